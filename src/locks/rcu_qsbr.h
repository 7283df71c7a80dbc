/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * liburcu's qsbr flavour as polstore uses it (RCU_QSBR stores) and the
 * thread rules of polstore/rcu.h: a thread that is online (by
 * ps_qsbr_thread_online(), or registered and put online by the application
 * itself) reads for free; any other thread goes online for its outermost
 * read-side section and back offline after it, so it never stalls a writer.
 * Registration, the public calls, the hook table (psi_flavour_qsbr): rcu_qsbr.c.
 */
#ifndef POLSTORE_SRC_RCU_QSBR_H
#define POLSTORE_SRC_RCU_QSBR_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <stdbool.h>
#include <urcu/urcu-qsbr.h>

#include <polstore/static/locks.h> /* _ps_qsbr_auto_depth */

#include "compiler.h"
#include "rcu_flavour.h"

/*
 * "Online" is liburcu's own state, so threads the application registered
 * itself are honoured, never registered twice and never unregistered by
 * polstore.  For the qsbr flavour liburcu's "inside a read-side section"
 * is exactly "online": a non-zero counter, which only a registered thread
 * has (liburcu zeroes it before it unregisters a thread).  One thread-local
 * load, the only one a lookup by an online thread makes.
 */
static inline bool psi_qsbr_online_now(void)
{
	return urcu_qsbr_read_ongoing();
}

/* Register (online) or put online the calling thread. */
void psi_qsbr_go_online(void);

static inline void psi_qsbr_read_enter(void)
{
	if (psi_unlikely(!psi_qsbr_online_now())) {
		psi_qsbr_go_online();
		_ps_qsbr_auto_depth = 1;
	} else if (psi_unlikely(_ps_qsbr_auto_depth)) {
		_ps_qsbr_auto_depth++; /* nested in an automatic section */
	}
	urcu_qsbr_read_lock();
}

static inline void psi_qsbr_read_exit(void)
{
	urcu_qsbr_read_unlock();
	if (psi_unlikely(_ps_qsbr_auto_depth) && --_ps_qsbr_auto_depth == 0)
		urcu_qsbr_thread_offline();
}

/*
 * An online thread is inside a read-side section already (QSBR: from one
 * quiescent state to the next), by its own choice or inside an automatic
 * section, and a lookup does not change that: it needs no section of its
 * own, not even the depth count.  An offline thread opens an automatic one.
 */
static inline bool psi_qsbr_in_section(void)
{
	return psi_likely(psi_qsbr_online_now());
}

/*
 * Waiting for a grace period where the contract allows it
 * (ps_store_synchronize()): an online thread would wait for itself, so it
 * goes offline for the wait and comes back online after it.
 */
static inline bool psi_qsbr_wait_enter(void)
{
	if (!psi_qsbr_online_now())
		return false;
	urcu_qsbr_thread_offline();
	return true;
}

static inline void psi_qsbr_wait_exit(bool was_online)
{
	if (was_online)
		urcu_qsbr_thread_online();
}

#endif /* POLSTORE_SRC_RCU_QSBR_H */
