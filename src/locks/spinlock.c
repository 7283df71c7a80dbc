// SPDX-License-Identifier: LGPL-2.1-or-later
/* The spinlock's wait (spinlock.h). */
#include <sched.h>
#include <string.h>

#include "spinlock.h"

void psi_yield(void)
{
	sched_yield();
}

void psi_spin_init(struct psi_spinlock *l)
{
	memset(l, 0, sizeof(*l));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&l->locked, sizeof(l->locked)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&l->starving, sizeof(l->starving)); /* atomics only */
}

void psi_spin_lock_slow(struct psi_spinlock *l)
{
	unsigned rounds = 0, yields = 0;
	bool mine = false; /* we raised @starving: the next turn is ours */

	for (;;) {
		/* Spin on loads so waiters share the line read-only until it is freed. */
		if (!PSI_READ_ONCE(l->locked) && (mine || !PSI_READ_ONCE(l->starving)) &&
				!PSI_XCHG(l->locked, 1, ACQUIRE)) {
			if (mine)
				PSI_WRITE_ONCE(l->starving, 0);
			return;
		}
		if (++rounds < PSI_SPIN_ROUNDS) {
			psi_cpu_relax();
			continue;
		}
		psi_yield();
		if (!mine && ++yields >= PSI_SPIN_STARVE_YIELDS) {
			int zero = 0;

			mine = PSI_TRY_CMPXCHG(l->starving, &zero, 1, RELAXED, RELAXED);
		}
	}
}
