// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu memb flavour: the latch of latch.h with memb read-side
 * sections.  A thread registers itself on its first read-side section and
 * leaves at exit (rcu_thread.c).  Also home of the memb registration the
 * SEQLOCK store shares.
 */
#include <pthread.h>

#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "rcu_thread.h"
#include "store_internal.h"

/* polstore registered this thread, so it unregisters it at exit. */
static __thread bool ps_memb_ours __attribute__((tls_model("initial-exec")));

void _ps_memb_register(void)
{
	urcu_memb_register_thread();
	ps_memb_ours = true;
	_ps_rcu_thread_registered(PS_FLAVOR_MEMB);
}

struct ps_reclaimer _ps_reclaim_memb = PS_RECLAIMER_INIT(urcu_memb_synchronize_rcu);

void _ps_memb_thread_exit(void)
{
	if (ps_memb_ours) {
		urcu_memb_unregister_thread();
		ps_memb_ours = false;
	}
}

#define PS_COW_READ_ENTER() ps_memb_read_lock()
#define PS_COW_READ_EXIT() ps_memb_read_unlock()
/* Waiting inside a memb section would wait for ourselves. */
#define PS_COW_CAN_WAIT() (!urcu_memb_read_ongoing())
#define PS_COW_WAIT_ENTER() false
#define PS_COW_WAIT_EXIT(token) ((void)(token))
#define PS_COW_SYNCHRONIZE() urcu_memb_synchronize_rcu()
#define PS_COW_RECLAIMER (&_ps_reclaim_memb)
#define PS_COW_OPS _ps_sync_rcu_ops
#include "sync_cow.h"
