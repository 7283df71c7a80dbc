// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu qsbr flavour: the copy-on-write store of
 * sync_cow-impl.h with the thread rules of polstore/rcu.h (rcu_qsbr.h):
 * an online thread reads with no section of its own, an offline one goes
 * online for its outermost section and back offline after it.
 */
#include "rcu_qsbr.h"
#include "rcu_reclaim.h"
#include "rcu_stall.h"
#include "store_internal.h"

#define PSI_COW_READ_ENTER() psi_qsbr_read_enter()
#define PSI_COW_IN_SECTION() psi_qsbr_in_section()
#define PSI_COW_READ_EXIT() psi_qsbr_read_exit()
#define PSI_COW_READ_HELD() psi_qsbr_online_now()
#define PSI_COW_FLAVOUR (&psi_flavour_qsbr)
#define PSI_COW_OPS psi_sync_qsbr_ops
#define PSI_COW_NAME "rcu-qsbr"
#include "sync_cow-impl.h"
