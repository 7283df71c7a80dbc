/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The threads polstore registers with liburcu: unregistered when they exit,
 * and taken out of liburcu's registries in a forked child, where they no
 * longer exist.
 */
#ifndef POLSTORE_SRC_RCU_THREAD_H
#define POLSTORE_SRC_RCU_THREAD_H

#include <urcu/list.h>

enum ps_flavor { PS_FLAVOR_MEMB, PS_FLAVOR_QSBR };

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
 * Register the calling thread with @flavor (@urcu_register, the flavour's
 * rcu_register_thread()), record @urcu_node, its entry in the flavour's
 * registry (&URCU_TLS(reader).node), for the fork handler, and arrange for
 * it to leave when it exits.  Excludes fork(): a child never sees a
 * registration half done.  Context: a thread not registered with @flavor.
 */
void psi_rcu_register(enum ps_flavor flavor, void (*urcu_register)(void),
		struct cds_list_head *urcu_node);

/*
 * Unregister the calling thread, which psi_rcu_register() registered, from
 * @flavor (@urcu_unregister), forget it, and cancel its exit hook.
 */
void psi_rcu_unregister(enum ps_flavor flavor, void (*urcu_unregister)(void));

/*
 * The calling thread exits, perhaps from inside read-side sections
 * (pthread_exit() in a foreach callback, cancellation): close them, which
 * wakes a grace period waiting for them, then leave the flavour.  Only for
 * threads polstore registered itself.  sync_rcu.c / sync_qsbr.c.
 */
void psi_memb_thread_died(void);
void psi_qsbr_thread_died(void);

/*
 * fork() handlers of sync_qsbr.c: prepare takes an online forking thread
 * offline (fork waits for reclaim threads between grace periods, and a
 * QSBR grace period would wait for it), done puts it back online in the
 * parent and the child.
 */
void psi_qsbr_fork_prepare(void);
void psi_qsbr_fork_done(void);
/* In the child, before psi_qsbr_fork_done(): the stall watchdog's state (rcu_stall.h). */
void psi_qsbr_atfork_child(void);

#endif /* POLSTORE_SRC_RCU_THREAD_H */
