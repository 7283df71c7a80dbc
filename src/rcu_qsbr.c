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
static __thread bool ps_qsbr_ours __attribute__((tls_model("initial-exec")));
/* While ps_qsbr_ours: the thread in the stall watchdog's list (rcu_stall.h). */
static __thread struct ps_qsbr_watch ps_qsbr_me __attribute__((tls_model("initial-exec")));
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
		psi_rcu_register(PS_FLAVOR_QSBR, urcu_qsbr_register_thread,
				&URCU_TLS(urcu_qsbr_reader).node);
		ps_qsbr_ours = true;
		ps_qsbr_me.ctr = &URCU_TLS(urcu_qsbr_reader).ctr;
		ps_qsbr_me.tid = gettid();
		psi_qsbr_watch_add(&ps_qsbr_me);
	} else {
		urcu_qsbr_thread_online();
	}
}

int ps_qsbr_thread_online(void)
{
	if (!ps_qsbr_online_now()) {
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
	if (!_ps_qsbr_auto_depth && ps_qsbr_online_now())
		urcu_qsbr_thread_offline();
}

void ps_qsbr_quiescent(void)
{
	/* Not inside an automatic section: its end goes offline instead. */
	if (ps_likely(ps_qsbr_online_now()) && ps_likely(!_ps_qsbr_auto_depth))
		urcu_qsbr_quiescent_state();
}

bool ps_qsbr_thread_is_online(void)
{
	return !_ps_qsbr_auto_depth && ps_qsbr_online_now();
}

/* fork(): an online forking thread would stall the grace period fork waits out. */
static __thread bool ps_qsbr_fork_online __attribute__((tls_model("initial-exec")));

void psi_qsbr_fork_prepare(void)
{
	ps_qsbr_fork_online = ps_qsbr_online_now();
	if (ps_qsbr_fork_online)
		urcu_qsbr_thread_offline();
}

void psi_qsbr_fork_done(void)
{
	if (ps_qsbr_fork_online)
		urcu_qsbr_thread_online();
	ps_qsbr_fork_online = false;
}

void psi_qsbr_thread_exit(void)
{
	if (ps_qsbr_ours) {
		psi_qsbr_watch_del(&ps_qsbr_me);
		/* Unregistering an online thread takes it offline first. */
		psi_rcu_unregister(PS_FLAVOR_QSBR, urcu_qsbr_unregister_thread);
		ps_qsbr_ours = false;
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
void psi_qsbr_thread_died(void)
{
	psi_qsbr_thread_exit();
}

/* The child of fork(): the stall watchdog's list keeps this thread only. */
void psi_qsbr_atfork_child(void)
{
	psi_stall_atfork_child(ps_qsbr_ours ? &ps_qsbr_me : NULL);
}

static void ps_qsbr_reclaim_synchronize(void)
{
	psi_qsbr_synchronize("polstore's rcu-qsbr reclaim thread");
}

struct ps_reclaimer psi_reclaim_qsbr = PS_RECLAIMER_INIT(ps_qsbr_reclaim_synchronize);
