/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * RCU_QSBR stall warnings (polstore/rcu.h, ps_qsbr_set_stall_warning()):
 * every qsbr grace period polstore waits for goes through
 * psi_qsbr_synchronize(), which records the wait; a watchdog thread,
 * started on the first wait, finds the online threads that have not
 * passed a quiescent state once a wait has lasted the timeout, and
 * reports each (then every three timeouts while the wait lasts).
 *
 * The threads it can name are those polstore registered with the qsbr
 * flavour (rcu_qsbr.c adds and removes them here); liburcu's own registry
 * is private to it.
 */
#ifndef POLSTORE_SRC_RCU_STALL_H
#define POLSTORE_SRC_RCU_STALL_H

#include <sys/types.h>
#include <urcu/list.h>

/* A thread polstore registered with urcu-qsbr, in its own TLS. */
struct psi_qsbr_watch {
	struct cds_list_head link;
	unsigned long *ctr; /* its liburcu reader counter: 0 offline, else the grace period it saw */
	pid_t tid;
};

/* The calling thread registered (@w in its TLS) / is about to unregister. */
void psi_qsbr_watch_add(struct psi_qsbr_watch *w);
void psi_qsbr_watch_del(struct psi_qsbr_watch *w);

/*
 * urcu_qsbr_synchronize_rcu(), watched: @who names the waiter in a
 * warning.  Context: as urcu_qsbr_synchronize_rcu() (offline, or not
 * registered).
 */
void psi_qsbr_synchronize(const char *who);

/*
 * fork() handlers, called by rcu_thread.c's in its order: prepare holds
 * the stall and watch locks; the child keeps only its own thread in the
 * watch list and starts no watchdog until its first wait.
 */
void psi_stall_atfork_prepare(void);
void psi_stall_atfork_parent(void);
void psi_stall_atfork_child(struct psi_qsbr_watch *self);

#endif /* POLSTORE_SRC_RCU_STALL_H */
