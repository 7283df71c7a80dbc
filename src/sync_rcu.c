// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu memb flavour: the copy-on-write store of
 * sync_cow-impl.h with memb read-side sections (rcu_memb.h).
 */
#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "store_internal.h"

#define PS_COW_READ_ENTER() ps_memb_read_lock()
#define PS_COW_READ_EXIT() ps_memb_read_unlock()
#define PS_COW_FLAVOUR (&psi_flavour_memb)
#define PS_COW_OPS psi_sync_rcu_ops
#define PS_COW_NAME "rcu"
#include "sync_cow-impl.h"
