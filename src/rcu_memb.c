// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * liburcu's memb flavour as every polstore module uses it (RCU and SEQLOCK
 * stores, RCU id maps): registration on a thread's first read-side section,
 * unregistration at exit (rcu_thread.c calls in), and the flavour's
 * reclaim thread (rcu_reclaim.h).
 */
#include <pthread.h>

#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "rcu_thread.h"

/* polstore registered this thread, so it unregisters it at exit. */
static __thread bool ps_memb_ours __attribute__((tls_model("initial-exec")));

void psi_memb_register(void)
{
	psi_rcu_register(PS_FLAVOR_MEMB, urcu_memb_register_thread,
			&URCU_TLS(urcu_memb_reader).node);
	ps_memb_ours = true;
}

struct ps_reclaimer psi_reclaim_memb = PS_RECLAIMER_INIT(urcu_memb_synchronize_rcu);

void psi_memb_thread_exit(void)
{
	if (ps_memb_ours) {
		psi_rcu_unregister(PS_FLAVOR_MEMB, urcu_memb_unregister_thread);
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
void psi_memb_thread_died(void)
{
	if (!ps_memb_ours)
		return;
	while (urcu_memb_read_ongoing())
		urcu_memb_read_unlock();
	psi_memb_thread_exit();
}
