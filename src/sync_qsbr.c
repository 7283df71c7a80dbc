// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu qsbr flavour: the copy-on-write store of sync_cow.h
 * with the thread rules of polstore/rcu.h (rcu_qsbr.h): an online thread
 * reads with no section of its own, an offline one goes online for its
 * outermost section and back offline after it, so it never stalls a writer.
 */
#include "rcu_qsbr.h"
#include "rcu_reclaim.h"
#include "rcu_stall.h"
#include "store_internal.h"

#define PS_COW_READ_ENTER() ps_qsbr_read_enter()
#define PS_COW_IN_SECTION() ps_qsbr_in_section()
#define PS_COW_READ_EXIT() ps_qsbr_read_exit()
/* An online thread may hold borrowed policies: only an offline one may wait unasked. */
#define PS_COW_CAN_WAIT() (!ps_qsbr_online_now())
#define PS_COW_WAIT_ENTER() ps_qsbr_wait_enter()
#define PS_COW_WAIT_EXIT(token) ps_qsbr_wait_exit(token)
#define PS_COW_SYNCHRONIZE() psi_qsbr_synchronize("a set or synchronize of an rcu-qsbr store")
#define PS_COW_RECLAIMER (&psi_reclaim_qsbr)
#define PS_COW_OPS psi_sync_qsbr_ops
#include "sync_cow.h"
