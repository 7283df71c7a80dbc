/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * psi_spinlock: test-and-test-and-set; waiters spin on a read-only load for
 * a bounded number of rounds, then sched_yield(), so a preempted holder
 * gets the CPU back when threads outnumber cores (no livelock with 1000
 * threads on 2 cores).  TTAS is unfair: a thread that releases and
 * re-takes the lock in a loop can keep a waiter out indefinitely (seen
 * with readers against a writer).  So a waiter that has yielded
 * PSI_SPIN_STARVE_YIELDS times raises @starving; while it is raised nobody
 * else takes the lock, and the starving waiter clears it once it has the
 * lock.  A waiter thus waits at most for its yields plus one hand-off.
 *
 * The fast path is inline; the wait (spinlock.c) and the lock_stat hooks
 * (lstat.h: nothing unless POLSTORE_LOCK_STAT) are not on it.
 */
#ifndef POLSTORE_SRC_SPINLOCK_H
#define POLSTORE_SRC_SPINLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "annotate.h"
#include "compiler.h"
#include "lstat.h"

#define PSI_SPIN_ROUNDS 128 /* pause rounds before a waiter yields */
#define PSI_SPIN_STARVE_YIELDS 16 /* yields before a waiter claims the next turn */

struct psi_spinlock {
	int locked;
	int starving; /* a long waiter claims the next acquisition */
	struct psi_lstat_hold hold;
	struct psi_lstat stat;
};

/* Zero @l and declare its atomics-only words to the thread checkers; before @l is shared. */
void psi_spin_init(struct psi_spinlock *l);
void psi_spin_lock_slow(struct psi_spinlock *l);
void psi_yield(void);

static inline bool psi_spin_trylock(struct psi_spinlock *l)
{
	return !PSI_READ_ONCE(l->locked) && !PSI_READ_ONCE(l->starving) &&
	       !PSI_XCHG(l->locked, 1, ACQUIRE);
}

/*
 * Take @l, without statistics (a lock built on this one keeps its own).
 * Return: when the wait began for lock_stat, 0 when there was none.
 */
static inline uint64_t psi_spin_acquire(struct psi_spinlock *l)
{
	uint64_t wait_start = 0;

	if (psi_unlikely(!psi_spin_trylock(l))) {
		wait_start = psi_lstat_wait_begin();
		psi_spin_lock_slow(l);
	}
	PSI_ANNOTATE_HAPPENS_AFTER(l); /* pairs with psi_spin_release() */
	return wait_start;
}

static inline void psi_spin_release(struct psi_spinlock *l)
{
	PSI_ANNOTATE_HAPPENS_BEFORE(l);
	PSI_STORE_RELEASE(l->locked, 0);
}

static inline void psi_spin_lock(struct psi_spinlock *l)
{
	uint64_t wait_start = psi_spin_acquire(l);

	/* Before the holder's first write, the hold time included. */
	psi_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, wait_start, &l->hold);
}

static inline void psi_spin_unlock(struct psi_spinlock *l)
{
	psi_lstat_released(&l->stat, PS_LOCK_STAT_WRITE, &l->hold);
	psi_spin_release(l);
}

/* Wait, spinning then yielding, while @cond holds.  @cond is re-evaluated each round. */
#define PSI_WAIT_WHILE(cond)                                                                        \
	do {                                                                                       \
		unsigned psi_rounds = 0;                                                           \
		while (cond) {                                                                     \
			if (++psi_rounds < PSI_SPIN_ROUNDS)                                         \
				psi_cpu_relax();                                                    \
			else                                                                       \
				psi_yield();                                                       \
		}                                                                                  \
	} while (0)

#endif /* POLSTORE_SRC_SPINLOCK_H */
