// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Grace periods and memory in flight of the library's reclaim threads
 * (src/locks/rcu_reclaim.h), read around a measured interval: every
 * flavour's summed, since a point runs one variant at a time; and the
 * bound on them past which an RCU set waits (rcu_store_bound.h).
 */
#include <stdbool.h>

#include "rcu_store_bound.h"
#include "rcu_flavour.h"
#include "rcu_reclaim.h"
#include "stress.h"

static const struct psi_flavour *const gp_flavours[] = { &psi_flavour_memb, &psi_flavour_qsbr };

void stress_gp_mark(struct stress_gp_mark *m)
{
	size_t i;

	m->grace_periods = 0;
	for (i = 0; i < sizeof(gp_flavours) / sizeof(gp_flavours[0]); i++) {
		struct psi_reclaim_stats st;

		psi_reclaim_stats(gp_flavours[i]->reclaimer, &st, true);
		m->grace_periods += st.grace_periods;
	}
	m->t_ns = stress_now_ns();
}

void stress_gp_read(const struct stress_gp_mark *m, double *gp_per_sec, double *peak_bytes)
{
	uint64_t gps = 0;
	size_t i, peak = 0;

	for (i = 0; i < sizeof(gp_flavours) / sizeof(gp_flavours[0]); i++) {
		struct psi_reclaim_stats st;

		psi_reclaim_stats(gp_flavours[i]->reclaimer, &st, false);
		gps += st.grace_periods;
		if (st.peak > peak)
			peak = st.peak;
	}
	*gp_per_sec = (double)(gps - m->grace_periods) /
		      ((double)(stress_now_ns() - m->t_ns) / 1e9);
	*peak_bytes = (double)peak;
}

size_t stress_gp_bound(void)
{
	return PSI_RCU_PENDING_MAX;
}
