// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The qsbr flavour's thread states (rcu_qsbr.h): registration, the public
 * calls of polstore/rcu.h, fork and thread exit, and the reclaim thread.
 */
#include <pthread.h>
#include <unistd.h>

#include <polstore/rcu.h>

#include "rcu_qsbr.h"
#include "rcu_reclaim.h"
#include "rcu_stall.h"
#include "rcu_thread.h"

/* polstore registered this thread, so it unregisters it at exit. */
static __thread bool psi_qsbr_ours __attribute__((tls_model("initial-exec")));
/* While psi_qsbr_ours: the thread in the stall watchdog's list (rcu_stall.h). */
static __thread struct psi_qsbr_watch psi_qsbr_me __attribute__((tls_model("initial-exec")));
/*
 * Read-side sections, counting from the outermost one that went online by
 * itself (the thread was offline): the section that brings it to 0 goes
 * offline again.  0 when the thread is online by its own choice.
 */
__thread unsigned _ps_qsbr_auto_depth __attribute__((tls_model("initial-exec")));

void psi_qsbr_go_online(void)
{
	if (!URCU_TLS(urcu_qsbr_reader).registered) {
		/* Registers online. */
		psi_rcu_register(&psi_flavour_qsbr, urcu_qsbr_register_thread,
				&URCU_TLS(urcu_qsbr_reader).node);
		psi_qsbr_ours = true;
		psi_qsbr_me.ctr = &URCU_TLS(urcu_qsbr_reader).ctr;
		psi_qsbr_me.tid = gettid();
		psi_qsbr_watch_add(&psi_qsbr_me);
	} else {
		urcu_qsbr_thread_online();
	}
}

int ps_qsbr_thread_online(void)
{
	if (!psi_qsbr_online_now()) {
		int err = psi_rcu_thread_init(); /* no registration without the exit hook */

		if (err)
			return err;
		psi_qsbr_go_online();
	}
	/* Inside a section that went online by itself: it now stays online. */
	_ps_qsbr_auto_depth = 0;
	return 0;
}

void ps_qsbr_thread_offline(void)
{
	/* Inside an automatic section the section's end goes offline anyway. */
	if (!_ps_qsbr_auto_depth && psi_qsbr_online_now())
		urcu_qsbr_thread_offline();
}

void ps_qsbr_quiescent(void)
{
	/* Not inside an automatic section: its end goes offline instead. */
	if (psi_likely(psi_qsbr_online_now()) && psi_likely(!_ps_qsbr_auto_depth))
		urcu_qsbr_quiescent_state();
}

bool ps_qsbr_thread_is_online(void)
{
	return !_ps_qsbr_auto_depth && psi_qsbr_online_now();
}

/* fork(): an online forking thread would stall the grace period fork waits out. */
static __thread bool psi_qsbr_fork_online __attribute__((tls_model("initial-exec")));

static void psi_qsbr_fork_prepare(void)
{
	psi_qsbr_fork_online = psi_qsbr_online_now();
	if (psi_qsbr_fork_online)
		urcu_qsbr_thread_offline();
}

static void psi_qsbr_fork_done(void)
{
	if (psi_qsbr_fork_online)
		urcu_qsbr_thread_online();
	psi_qsbr_fork_online = false;
}

static void psi_qsbr_thread_exit(void)
{
	if (psi_qsbr_ours) {
		psi_qsbr_watch_del(&psi_qsbr_me);
		/* Unregistering an online thread takes it offline first. */
		psi_rcu_unregister(&psi_flavour_qsbr, urcu_qsbr_unregister_thread);
		psi_qsbr_ours = false;
		_ps_qsbr_auto_depth = 0;
	}
}

/*
 * For qsbr "inside a read-side section" is "online", and liburcu's
 * unregistration takes an online thread offline and wakes a grace period
 * waiting for it (urcu_qsbr_thread_offline()): a thread that dies online,
 * inside an automatic section or by its own choice, needs nothing more.
 * urcu_qsbr_read_lock() keeps no count outside liburcu's debug builds.
 */
static void psi_qsbr_thread_died(void)
{
	psi_qsbr_thread_exit();
}

/* The child of fork(): the stall watchdog's list keeps this thread only. */
static void psi_qsbr_atfork_child(void)
{
	psi_stall_atfork_child(psi_qsbr_ours ? &psi_qsbr_me : NULL);
}

static void psi_qsbr_reclaim_synchronize(void)
{
	psi_qsbr_synchronize("polstore's rcu-qsbr reclaim thread");
}

static struct psi_reclaimer psi_qsbr_reclaimer = PSI_RECLAIMER_INIT(psi_qsbr_reclaim_synchronize);

static void psi_qsbr_read_enter_fn(void)
{
	psi_qsbr_read_enter();
}

static void psi_qsbr_read_exit_fn(void)
{
	psi_qsbr_read_exit();
}

/* Only a section that brought the thread online is counted. */
static bool psi_qsbr_in_auto_section(void)
{
	return _ps_qsbr_auto_depth != 0;
}

/* An online thread may hold borrowed policies: only an offline one may wait unasked. */
static bool psi_qsbr_can_wait(void)
{
	return !psi_qsbr_online_now();
}

static bool psi_qsbr_online_fn(void)
{
	return psi_qsbr_online_now();
}

const struct psi_flavour psi_flavour_qsbr = {
	.name = "qsbr",
	.id = PSI_FLAVOUR_QSBR,
	.read_enter = psi_qsbr_read_enter_fn,
	.read_exit = psi_qsbr_read_exit_fn,
	.in_section = psi_qsbr_in_auto_section,
	.reads_free = psi_qsbr_online_fn,
	.can_wait = psi_qsbr_can_wait,
	.wait_enter = psi_qsbr_wait_enter,
	.wait_exit = psi_qsbr_wait_exit,
	.synchronize = psi_qsbr_synchronize,
	.reclaimer = &psi_qsbr_reclaimer,
	.thread_died = psi_qsbr_thread_died,
	.thread_exit = psi_qsbr_thread_exit,
	.fork_prepare = psi_qsbr_fork_prepare,
	.fork_done = psi_qsbr_fork_done,
	.fork_child = psi_qsbr_atfork_child,
};

/* Early (priority 101): before the constructors of a program that links polstore statically. */
__attribute__((constructor(101))) static void psi_qsbr_flavour_add(void)
{
	psi_rcu_flavour_add(&psi_flavour_qsbr);
}
