/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The threads polstore registers with liburcu: unregistered when they exit,
 * and taken out of liburcu's registries in a forked child, where they no
 * longer exist.
 */
#ifndef POLSTORE_SRC_RCU_THREAD_H
#define POLSTORE_SRC_RCU_THREAD_H

#include <urcu/list.h>

#include "rcu_flavour.h"

/*
 * Make @f known: its thread-exit key, its fork hooks, its reclaimer.
 * Called by each flavour's constructor.  Context: load time.
 */
void psi_rcu_flavour_add(const struct psi_flavour *f);

/*
 * Create the thread-exit keys (and install the fork handlers) if that is not
 * done yet.  Every entry point that can lead a thread to register with
 * liburcu calls it first (creating an RCU, RCU_QSBR or SEQLOCK store or an
 * RCU id map, going online), so no thread is ever registered without a way
 * to leave at exit, nor without being taken out of the registry in a forked
 * child.  Retried on the next call after a failure.  Context: any thread.
 * Return: 0, or -EAGAIN / -ENOMEM as pthread_key_create() or
 * pthread_atfork() failed.
 */
int psi_rcu_thread_init(void);

/*
 * Register the calling thread with @flavour (@urcu_register, the flavour's
 * rcu_register_thread()), record @urcu_node, its entry in the flavour's
 * registry (&URCU_TLS(reader).node), for the fork handler, and arrange for
 * it to leave when it exits.  Excludes fork(): a child never sees a
 * registration half done.  Context: a thread not registered with @flavour.
 */
void psi_rcu_register(const struct psi_flavour *flavour, void (*urcu_register)(void),
		struct cds_list_head *urcu_node);

/*
 * Unregister the calling thread, which psi_rcu_register() registered, from
 * @flavour (@urcu_unregister), forget it, and cancel its exit hook.
 */
void psi_rcu_unregister(const struct psi_flavour *flavour, void (*urcu_unregister)(void));

#endif /* POLSTORE_SRC_RCU_THREAD_H */
