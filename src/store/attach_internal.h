/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What is attached to a store (ps_store_attach(), attach.c), as the
 * destroys of store.c ask before they free anything.
 */
#ifndef POLSTORE_SRC_ATTACH_INTERNAL_H
#define POLSTORE_SRC_ATTACH_INTERNAL_H

#include <stdbool.h>

struct ps_store;

/*
 * Before @call (a destroy) frees @store: with an object of this process
 * attached, a message naming the store, the object and the call that ends
 * it, then abort(), unless @may_refuse and @store is not under the
 * checking mode: then -EBUSY, nothing changed.  Otherwise 0, and the
 * attachments a forked child inherited for @store are dropped.
 */
int psi_attach_check_destroy(struct ps_store *store, const char *call, bool may_refuse);

#endif /* POLSTORE_SRC_ATTACH_INTERNAL_H */
