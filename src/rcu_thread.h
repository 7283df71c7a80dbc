/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unregistering threads from liburcu when they exit. */
#ifndef POLSTORE_SRC_RCU_THREAD_H
#define POLSTORE_SRC_RCU_THREAD_H

enum ps_flavor { PS_FLAVOR_MEMB, PS_FLAVOR_QSBR };

/*
 * Create the thread-exit keys if they do not exist yet.  Every entry point
 * that can lead a thread to register with liburcu calls it first (creating
 * an RCU, RCU_QSBR or SEQLOCK store or an RCU id map, going online), so no
 * thread is ever registered without a way to leave at exit.  Retried on
 * the next call after a failure.  Context: any thread.
 * Return: 0, or -EAGAIN / -ENOMEM as pthread_key_create() failed.
 */
int _ps_rcu_thread_init(void);

/* Arrange for the calling thread to leave @flavor when it exits. */
void _ps_rcu_thread_registered(enum ps_flavor flavor);

/* Forget the calling thread's exit hooks: it left liburcu already. */
void _ps_rcu_thread_unregistered(enum ps_flavor flavor);

/*
 * The calling thread exits, perhaps from inside read-side sections
 * (pthread_exit() in a foreach callback, cancellation): close them, which
 * wakes a grace period waiting for them, then leave the flavour.  Only for
 * threads polstore registered itself.  sync_rcu.c / sync_qsbr.c.
 */
void _ps_memb_thread_died(void);
void _ps_qsbr_thread_died(void);

#endif /* POLSTORE_SRC_RCU_THREAD_H */
