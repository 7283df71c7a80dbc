/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU stores' bound on retired memory in flight, on its own so that
 * the stress program can name it without the store's header.
 */
#ifndef POLSTORE_SRC_RCU_STORE_BOUND_H
#define POLSTORE_SRC_RCU_STORE_BOUND_H

#include <stddef.h>

#include <polstore/static/rtree.h>

/*
 * Retired bytes waiting for grace periods past which a set that may wait
 * waits for one itself: the bound while a grace period does not end (a
 * QSBR thread online without quiescent states).  32 MiB.
 */
#define PSI_RCU_PENDING_MAX (((size_t)1 << 18) * 2 * sizeof(struct ps_range))

#endif /* POLSTORE_SRC_RCU_STORE_BOUND_H */
