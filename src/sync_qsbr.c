// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu qsbr flavour: the latch of latch.h, and the thread
 * rules of polstore/rcu.h.
 *
 * A thread is in one of three states (TLS): unregistered, registered but
 * offline, or online by its own ps_qsbr_thread_online().  Only the last
 * reads for free; the others go online for each read-side section and back
 * offline after it (PS_LATCH_READ_EXIT), so they never stall a writer.
 */
#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <stdbool.h>
#include <urcu/urcu-qsbr.h>

#include <polstore/rcu.h>

#include "compiler.h"
#include "rcu_thread.h"
#include "store_internal.h"

enum ps_qsbr_state { PS_QSBR_UNREGISTERED, PS_QSBR_OFFLINE, PS_QSBR_ONLINE };

static __thread enum ps_qsbr_state ps_qsbr_state __attribute__((tls_model("initial-exec")));
/* The current section went online by itself and goes offline at its end. */
static __thread bool ps_qsbr_auto __attribute__((tls_model("initial-exec")));

static void ps_qsbr_go_online(void)
{
	if (ps_qsbr_state == PS_QSBR_UNREGISTERED) {
		urcu_qsbr_register_thread(); /* registers online */
		_ps_rcu_thread_registered(PS_FLAVOR_QSBR);
	} else {
		urcu_qsbr_thread_online();
	}
}

int ps_qsbr_thread_online(void)
{
	if (ps_qsbr_state != PS_QSBR_ONLINE)
		ps_qsbr_go_online();
	ps_qsbr_state = PS_QSBR_ONLINE;
	return 0;
}

void ps_qsbr_thread_offline(void)
{
	if (ps_qsbr_state == PS_QSBR_ONLINE) {
		urcu_qsbr_thread_offline();
		ps_qsbr_state = PS_QSBR_OFFLINE;
	}
}

void ps_qsbr_quiescent(void)
{
	if (ps_qsbr_state == PS_QSBR_ONLINE)
		urcu_qsbr_quiescent_state();
}

bool ps_qsbr_thread_is_online(void)
{
	return ps_qsbr_state == PS_QSBR_ONLINE;
}

void _ps_qsbr_thread_exit(void)
{
	if (ps_qsbr_state != PS_QSBR_UNREGISTERED) {
		/* Unregistering an online thread takes it offline first. */
		urcu_qsbr_unregister_thread();
		ps_qsbr_state = PS_QSBR_UNREGISTERED;
	}
}

static inline void ps_qsbr_read_enter(void)
{
	if (ps_unlikely(ps_qsbr_state != PS_QSBR_ONLINE)) {
		ps_qsbr_go_online();
		if (ps_qsbr_state == PS_QSBR_UNREGISTERED)
			ps_qsbr_state = PS_QSBR_OFFLINE;
		ps_qsbr_auto = true;
	}
	urcu_qsbr_read_lock();
}

static inline void ps_qsbr_read_exit(void)
{
	urcu_qsbr_read_unlock();
	if (ps_unlikely(ps_qsbr_auto)) {
		ps_qsbr_auto = false;
		urcu_qsbr_thread_offline();
	}
}

#define PS_LATCH_READ_ENTER() ps_qsbr_read_enter()
#define PS_LATCH_READ_EXIT() ps_qsbr_read_exit()
#define PS_LATCH_SYNCHRONIZE() urcu_qsbr_synchronize_rcu()
#define PS_LATCH_OPS _ps_sync_qsbr_ops
#include "latch.h"
