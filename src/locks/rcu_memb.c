// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * liburcu's memb flavour (RCU and SEQLOCK stores, RCU id maps): its hook
 * table, registration on a thread's first read-side section,
 * unregistration at exit, and its reclaim thread.
 */
#include <pthread.h>

#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "rcu_thread.h"

/* polstore registered this thread, so it unregisters it at exit. */
static __thread bool psi_memb_ours __attribute__((tls_model("initial-exec")));

void psi_memb_register(void)
{
	psi_rcu_register(&psi_flavour_memb, urcu_memb_register_thread,
			&URCU_TLS(urcu_memb_reader).node);
	psi_memb_ours = true;
}

static struct psi_reclaimer psi_memb_reclaimer = PSI_RECLAIMER_INIT(urcu_memb_synchronize_rcu);

static void psi_memb_thread_exit(void)
{
	if (psi_memb_ours) {
		psi_rcu_unregister(&psi_flavour_memb, urcu_memb_unregister_thread);
		psi_memb_ours = false;
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
static void psi_memb_thread_died(void)
{
	if (!psi_memb_ours)
		return;
	while (urcu_memb_read_ongoing())
		urcu_memb_read_unlock();
	psi_memb_thread_exit();
}

static void psi_memb_read_enter(void)
{
	psi_memb_read_lock();
}

static void psi_memb_read_exit(void)
{
	psi_memb_read_unlock();
}

static bool psi_memb_in_section(void)
{
	return urcu_memb_read_ongoing();
}

static bool psi_memb_never(void)
{
	return false;
}

/* Waiting inside a memb section would wait for ourselves. */
static bool psi_memb_can_wait(void)
{
	return !urcu_memb_read_ongoing();
}

static void psi_memb_wait_exit(bool token)
{
	(void)token;
}

static void psi_memb_synchronize(const char *who)
{
	(void)who;
	urcu_memb_synchronize_rcu();
}

const struct psi_flavour psi_flavour_memb = {
	.name = "memb",
	.id = PSI_FLAVOUR_MEMB,
	.read_enter = psi_memb_read_enter,
	.read_exit = psi_memb_read_exit,
	.in_section = psi_memb_in_section,
	.reads_free = psi_memb_never,
	.can_wait = psi_memb_can_wait,
	.wait_enter = psi_memb_never,
	.wait_exit = psi_memb_wait_exit,
	.synchronize = psi_memb_synchronize,
	.reclaimer = &psi_memb_reclaimer,
	.thread_died = psi_memb_thread_died,
	.thread_exit = psi_memb_thread_exit,
};

/* Early (priority 101): before the constructors of a program that links polstore statically. */
__attribute__((constructor(101))) static void psi_memb_flavour_add(void)
{
	psi_rcu_flavour_add(&psi_flavour_memb);
}
