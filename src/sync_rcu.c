// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu memb flavour: the copy-on-write store of sync_cow.h
 * with memb read-side sections (rcu_memb.h: a thread registers itself on
 * its first section and leaves at exit, closing any section it dies in).
 */
#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "store_internal.h"

#define PS_COW_READ_ENTER() ps_memb_read_lock()
#define PS_COW_READ_EXIT() ps_memb_read_unlock()
/* Waiting inside a memb section would wait for ourselves. */
#define PS_COW_CAN_WAIT() (!urcu_memb_read_ongoing())
#define PS_COW_WAIT_ENTER() false
#define PS_COW_WAIT_EXIT(token) ((void)(token))
#define PS_COW_SYNCHRONIZE() urcu_memb_synchronize_rcu()
#define PS_COW_RECLAIMER (&psi_reclaim_memb)
#define PS_COW_OPS psi_sync_rcu_ops
#include "sync_cow.h"
