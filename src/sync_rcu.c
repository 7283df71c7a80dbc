// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu memb flavour: the copy-on-write store of sync_cow.h with memb read-side
 * sections.  A thread registers itself on its first read-side section and
 * leaves at exit, closing any section it dies in (rcu_thread.c).  Also home of the memb
 * registration the SEQLOCK store shares.
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
	_ps_rcu_register(PS_FLAVOR_MEMB, urcu_memb_register_thread,
			&URCU_TLS(urcu_memb_reader).node);
	ps_memb_ours = true;
}

struct ps_reclaimer _ps_reclaim_memb = PS_RECLAIMER_INIT(urcu_memb_synchronize_rcu);

void _ps_memb_thread_exit(void)
{
	if (ps_memb_ours) {
		_ps_rcu_unregister(PS_FLAVOR_MEMB, urcu_memb_unregister_thread);
		ps_memb_ours = false;
	}
}

/*
 * Unregistering alone would not do for a thread that dies inside read-side
 * sections: a grace period already waiting for it sleeps on liburcu's
 * futex until a reader's outermost read_unlock() wakes it, and
 * urcu_memb_unregister_thread() only unlinks the thread.  So close every
 * nesting level first, with read_unlock() itself: the outermost one stores
 * a zero count (ordered after the section by liburcu's barriers) and wakes
 * the waiter, which then sees the thread quiescent.  What the thread
 * borrowed is no longer protected from here on.
 */
void _ps_memb_thread_died(void)
{
	if (!ps_memb_ours)
		return;
	while (urcu_memb_read_ongoing())
		urcu_memb_read_unlock();
	_ps_memb_thread_exit();
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
