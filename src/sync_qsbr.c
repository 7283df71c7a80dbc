// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu qsbr flavour: the latch of latch.h, and the thread
 * rules of polstore/rcu.h.
 *
 * A thread that is online (by ps_qsbr_thread_online(), or registered and
 * put online by the application itself) reads for free; any other thread
 * goes online for its outermost read-side section and back offline after
 * it (PS_LATCH_READ_EXIT), so it never stalls a writer.
 */
#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <pthread.h>
#include <stdbool.h>
#include <urcu/urcu-qsbr.h>

#include <polstore/rcu.h>

#include <polstore/static/lookup.h>

#include "compiler.h"
#include "rcu_reclaim.h"
#include "rcu_thread.h"
#include "store_internal.h"

/*
 * "Online" is liburcu's own state, so threads the application registered
 * itself are honoured, never registered twice and never unregistered by
 * polstore.  For the qsbr flavour liburcu's "inside a read-side section"
 * is exactly "online": a non-zero counter, which only a registered thread
 * has (liburcu zeroes it before it unregisters a thread).  One thread-local
 * load, the only one a lookup by an online thread makes.
 */
static inline bool qsbr_online_now(void)
{
	return urcu_qsbr_read_ongoing();
}

/* polstore registered this thread, so it unregisters it at exit. */
static __thread bool ps_qsbr_ours __attribute__((tls_model("initial-exec")));
/*
 * Read-side sections, counting from the outermost one that went online by
 * itself (the thread was offline): the section that brings it to 0 goes
 * offline again.  0 when the thread is online by its own choice.
 */
__thread unsigned _ps_qsbr_auto_depth __attribute__((tls_model("initial-exec")));

static void ps_qsbr_go_online(void)
{
	if (!URCU_TLS(urcu_qsbr_reader).registered) {
		/* Registers online. */
		_ps_rcu_register(PS_FLAVOR_QSBR, urcu_qsbr_register_thread,
				&URCU_TLS(urcu_qsbr_reader).node);
		ps_qsbr_ours = true;
	} else {
		urcu_qsbr_thread_online();
	}
}

int ps_qsbr_thread_online(void)
{
	if (!qsbr_online_now()) {
		int err = _ps_rcu_thread_init(); /* no registration without the exit hook */

		if (err)
			return err;
		ps_qsbr_go_online();
	}
	/* Inside a section that went online by itself: it now stays online. */
	_ps_qsbr_auto_depth = 0;
	return 0;
}

void ps_qsbr_thread_offline(void)
{
	/* Inside an automatic section the section's end goes offline anyway. */
	if (!_ps_qsbr_auto_depth && qsbr_online_now())
		urcu_qsbr_thread_offline();
}

void ps_qsbr_quiescent(void)
{
	/* Not inside an automatic section: its end goes offline instead. */
	if (ps_likely(qsbr_online_now()) && ps_likely(!_ps_qsbr_auto_depth))
		urcu_qsbr_quiescent_state();
}

bool ps_qsbr_thread_is_online(void)
{
	return !_ps_qsbr_auto_depth && qsbr_online_now();
}

/* fork(): an online forking thread would stall the grace period fork waits out. */
static __thread bool ps_qsbr_fork_online __attribute__((tls_model("initial-exec")));

void _ps_qsbr_fork_prepare(void)
{
	ps_qsbr_fork_online = qsbr_online_now();
	if (ps_qsbr_fork_online)
		urcu_qsbr_thread_offline();
}

void _ps_qsbr_fork_done(void)
{
	if (ps_qsbr_fork_online)
		urcu_qsbr_thread_online();
	ps_qsbr_fork_online = false;
}

void _ps_qsbr_thread_exit(void)
{
	if (ps_qsbr_ours) {
		/* Unregistering an online thread takes it offline first. */
		_ps_rcu_unregister(PS_FLAVOR_QSBR, urcu_qsbr_unregister_thread);
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
void _ps_qsbr_thread_died(void)
{
	_ps_qsbr_thread_exit();
}

static inline void ps_qsbr_read_enter(void)
{
	if (ps_unlikely(!qsbr_online_now())) {
		ps_qsbr_go_online();
		_ps_qsbr_auto_depth = 1;
	} else if (ps_unlikely(_ps_qsbr_auto_depth)) {
		_ps_qsbr_auto_depth++; /* nested in an automatic section */
	}
	urcu_qsbr_read_lock();
}

static inline void ps_qsbr_read_exit(void)
{
	urcu_qsbr_read_unlock();
	if (ps_unlikely(_ps_qsbr_auto_depth) && --_ps_qsbr_auto_depth == 0)
		urcu_qsbr_thread_offline();
}

/*
 * An online thread is inside a read-side section already (QSBR: from one
 * quiescent state to the next), by its own choice or inside an automatic
 * section, and a lookup does not change that: it needs no section of its
 * own, not even the depth count.  An offline thread opens an automatic one.
 */
static inline bool ps_qsbr_in_section(void)
{
	return ps_likely(qsbr_online_now());
}

/*
 * Waiting for a grace period where the contract allows it
 * (ps_store_synchronize()): an online thread would wait for itself, so it
 * goes offline for the wait and comes back online after it.
 */
static inline bool ps_qsbr_wait_enter(void)
{
	if (!qsbr_online_now())
		return false;
	urcu_qsbr_thread_offline();
	return true;
}

static inline void ps_qsbr_wait_exit(bool was_online)
{
	if (was_online)
		urcu_qsbr_thread_online();
}

struct ps_reclaimer _ps_reclaim_qsbr = PS_RECLAIMER_INIT(urcu_qsbr_synchronize_rcu);

#define PS_COW_READ_ENTER() ps_qsbr_read_enter()
#define PS_COW_IN_SECTION() ps_qsbr_in_section()
#define PS_COW_READ_EXIT() ps_qsbr_read_exit()
/* An online thread may hold borrowed policies: only an offline one may wait unasked. */
#define PS_COW_CAN_WAIT() (!qsbr_online_now())
#define PS_COW_WAIT_ENTER() ps_qsbr_wait_enter()
#define PS_COW_WAIT_EXIT(token) ps_qsbr_wait_exit(token)
#define PS_COW_SYNCHRONIZE() urcu_qsbr_synchronize_rcu()
#define PS_COW_RECLAIMER (&_ps_reclaim_qsbr)
#define PS_COW_OPS _ps_sync_qsbr_ops
#include "sync_cow.h"
