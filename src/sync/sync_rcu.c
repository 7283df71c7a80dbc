// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu memb flavour: the copy-on-write store of
 * sync_cow-impl.h with memb read-side sections (rcu_memb.h).
 */
#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "store_internal.h"

#define PSI_COW_READ_ENTER() psi_memb_read_lock()
#define PSI_COW_READ_EXIT() psi_memb_read_unlock()
#define PSI_COW_READ_HELD() urcu_memb_read_ongoing()
#define PSI_COW_FLAVOUR (&psi_flavour_memb)
#define PSI_COW_OPS psi_sync_rcu_ops
#define PSI_COW_NAME "rcu"
#include "sync_cow-impl.h"
