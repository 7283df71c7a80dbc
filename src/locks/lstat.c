// SPDX-License-Identifier: LGPL-2.1-or-later
/* lock_stat accounting (lstat.h): built with POLSTORE_LOCK_STAT only. */
#include <sched.h>
#include <stdbool.h>
#include <time.h>

#include "compiler.h"
#include "lstat.h"

#ifdef POLSTORE_LOCK_STAT
uint64_t psi_lstat_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void stat_min(uint64_t *slot, uint64_t v)
{
	uint64_t cur = PSI_READ_ONCE(*slot);

	while ((cur == 0 || v < cur) &&
			!PSI_TRY_CMPXCHG_WEAK(*slot, &cur, v, RELAXED, RELAXED))
		;
}

static void stat_max(uint64_t *slot, uint64_t v)
{
	uint64_t cur = PSI_READ_ONCE(*slot);

	while (v > cur &&
			!PSI_TRY_CMPXCHG_WEAK(*slot, &cur, v, RELAXED, RELAXED))
		;
}

static void stat_add(uint64_t *slot, uint64_t v)
{
	PSI_FETCH_ADD(*slot, v, RELAXED);
}

uint64_t psi_lstat_acquired_slow(struct psi_lstat *st, int dir, uint64_t wait_start)
{
	struct psi_lstat_class *c = &st->cls[dir];
	uint64_t now = psi_lstat_now();
	int cpu = sched_getcpu();
	/* Any previous acquirer, of either direction, on another CPU means the line moved. */
	int prev = PSI_XCHG(st->cls[0].last_cpu, cpu + 1, RELAXED);
	bool bounced = prev && prev != cpu + 1;

	stat_add(&c->acquisitions, 1);
	if (bounced)
		stat_add(&c->acq_bounces, 1);
	if (wait_start) {
		uint64_t w = now - wait_start;

		stat_add(&c->contentions, 1);
		if (bounced)
			stat_add(&c->con_bounces, 1);
		if (w) {
			stat_min(&c->wait_min, w);
			stat_max(&c->wait_max, w);
			stat_add(&c->wait_total, w);
		}
	}
	return now;
}

void psi_lstat_released_slow(struct psi_lstat *st, int dir, uint64_t hold_start)
{
	struct psi_lstat_class *c = &st->cls[dir];
	uint64_t h = psi_lstat_now() - hold_start;

	if (h) {
		stat_min(&c->hold_min, h);
		stat_max(&c->hold_max, h);
		stat_add(&c->hold_total, h);
	}
}
#endif /* POLSTORE_LOCK_STAT */
