/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A liburcu flavour as polstore uses it: one const table of hooks per
 * flavour (rcu_memb.c, rcu_qsbr.c).  rcu_thread.c and the modules above
 * it call a flavour only through its table; only inlined read-side fast
 * paths name a flavour directly.
 */
#ifndef POLSTORE_SRC_RCU_FLAVOUR_H
#define POLSTORE_SRC_RCU_FLAVOUR_H

#include <stdbool.h>

struct psi_reclaimer;

/* The slot of each flavour in rcu_thread.c's per-flavour state. */
enum psi_flavour_id { PSI_FLAVOUR_MEMB, PSI_FLAVOUR_QSBR, PSI_FLAVOUR_COUNT };

struct psi_flavour {
	const char *name;
	enum psi_flavour_id id;
	/* A read-side section of the calling thread (registers it on first use). */
	void (*read_enter)(void);
	void (*read_exit)(void);
	/*
	 * The thread is inside a section a grace period of this flavour waits
	 * for and polstore can see (QSBR: a section that brought the thread
	 * online; an online-by-choice thread is not counted).
	 */
	bool (*in_section)(void);
	/* The thread reads without opening a section (a QSBR online thread). */
	bool (*reads_free)(void);
	/* The thread may wait for a grace period unasked (it holds nothing borrowed). */
	bool (*can_wait)(void);
	/*
	 * Around a wait the caller asked for: enter makes the thread one a
	 * grace period does not wait for (QSBR: offline) and returns what
	 * exit needs to undo it.
	 */
	bool (*wait_enter)(void);
	void (*wait_exit)(bool token);
	/* A grace period; @who names the waiter in a stall warning. */
	void (*synchronize)(const char *who);
	/* The flavour's reclaim thread (rcu_reclaim.h). */
	struct psi_reclaimer *reclaimer;
	/* Thread exit, perhaps inside sections (rcu_thread.c's key destructor). */
	void (*thread_died)(void);
	/* Unregister a thread polstore registered (ps_rcu_unregister_thread()). */
	void (*thread_exit)(void);
	/*
	 * fork(): prepare runs first of rcu_thread.c's handlers, done last in
	 * the parent and the child; child runs in the child before done.
	 * Each may be NULL.
	 */
	void (*fork_prepare)(void);
	void (*fork_done)(void);
	void (*fork_child)(void);
};

extern const struct psi_flavour psi_flavour_memb;
extern const struct psi_flavour psi_flavour_qsbr;

#endif /* POLSTORE_SRC_RCU_FLAVOUR_H */
