/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lock_stat hooks: what a lock calls when it starts to wait, when it has
 * the lock and when it lets go, in the kernel's /proc/lock_stat terms
 * (polstore/lockstat.h prints them).  Built with POLSTORE_LOCK_STAT they
 * time and count (lstat.c); without it every hook is an empty inline and
 * every field an empty struct, so a lock compiles to its bare fast path.
 */
#ifndef POLSTORE_SRC_LSTAT_H
#define POLSTORE_SRC_LSTAT_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/lockstat.h>

#ifdef POLSTORE_LOCK_STAT
#define PSI_LSTAT_ON 1

/* One class per lock and direction ([PS_LOCK_STAT_WRITE], [PS_LOCK_STAT_READ]). */
struct psi_lstat_class {
	uint64_t con_bounces, contentions, acq_bounces, acquisitions;
	uint64_t wait_min, wait_max, wait_total;
	uint64_t hold_min, hold_max, hold_total;
	int last_cpu;
};

struct psi_lstat {
	struct psi_lstat_class cls[2];
};

/* When the holder took the lock: written by the holder only. */
struct psi_lstat_hold {
	uint64_t start;
};

uint64_t psi_lstat_now(void);
/* Acquisition done; @wait_start is 0 when the first attempt succeeded.  Returns the hold start. */
uint64_t psi_lstat_acquired_slow(struct psi_lstat *st, int dir, uint64_t wait_start);
void psi_lstat_released_slow(struct psi_lstat *st, int dir, uint64_t hold_start);

static inline uint64_t psi_lstat_wait_begin(void)
{
	return psi_lstat_now();
}

static inline void psi_lstat_acquired(struct psi_lstat *st, int dir, uint64_t wait_start,
		struct psi_lstat_hold *hold)
{
	hold->start = psi_lstat_acquired_slow(st, dir, wait_start);
}

static inline void psi_lstat_released(struct psi_lstat *st, int dir, const struct psi_lstat_hold *hold)
{
	psi_lstat_released_slow(st, dir, hold->start);
}

static inline struct psi_lstat *psi_lstat_of(struct psi_lstat *st)
{
	return st;
}
#else /* !POLSTORE_LOCK_STAT */
#define PSI_LSTAT_ON 0

struct psi_lstat {
	char none[0];
};

struct psi_lstat_hold {
	char none[0];
};

static inline uint64_t psi_lstat_wait_begin(void)
{
	return 0;
}

static inline void psi_lstat_acquired(struct psi_lstat *st, int dir, uint64_t wait_start,
		struct psi_lstat_hold *hold)
{
	(void)st, (void)dir, (void)wait_start, (void)hold;
}

static inline void psi_lstat_released(struct psi_lstat *st, int dir, const struct psi_lstat_hold *hold)
{
	(void)st, (void)dir, (void)hold;
}

/* No statistics in this build: NULL. */
static inline struct psi_lstat *psi_lstat_of(struct psi_lstat *st)
{
	(void)st;
	return NULL;
}
#endif /* POLSTORE_LOCK_STAT */

#endif /* POLSTORE_SRC_LSTAT_H */
