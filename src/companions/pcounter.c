// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Batched per-thread counters and committed-memory accounting
 * (polstore/pcounter.h).
 *
 * Invariants:
 *  - true value == count + sum of slot deltas, except inside a fold, where
 *    the folded delta has left its slot and not yet reached @count (both
 *    happen under @lock, so sum() and snapshot() never see that window);
 *  - every value a slot is set to has |delta| < batch (the add that would
 *    reach the batch folds instead of storing), so outside a fold
 *    |count - exact| < batch * (slots holding a delta).  A batch shrink
 *    breaks this for slots filled under the old batch until the fold that
 *    set_batch() runs right after installing the new batch.
 *
 * Slots are updated with CAS (owned slots never contend, so this costs the
 * same as a plain add), because folds from other threads and threads beyond
 * PS_PCOUNTER_SLOTS share them.  Slot indices are per thread, common to all
 * counters, handed out round-robin.
 *
 * Thread checkers: @count, @batch, @active and the slot deltas are words
 * touched only with atomics (@count's plain reads are the lock holder's,
 * and every write to it is under @lock); they are declared to helgrind and
 * DRD, which see atomics as plain accesses, at create.  Nothing else is
 * handed over through them: sums and folds run under @lock.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/pcounter.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "compiler.h"
#include "names.h"
#include "spinlock.h"
#include "thread_index.h"

struct pcounter_slot {
	int64_t delta;
} __ps_cacheline_aligned;

struct ps_pcounter {
	int64_t count __ps_cacheline_aligned; /* written under @lock, read lockless */
	struct psi_spinlock lock;
	int32_t batch __ps_cacheline_aligned; /* read by every add */
	uint64_t active; /* bit i: slot i has been used (set once per thread) */
	struct pcounter_slot slot[PS_PCOUNTER_SLOTS];
};

static inline int pcounter_slot_index(void)
{
	return (int)(psi_thread_index() % PS_PCOUNTER_SLOTS);
}

struct ps_pcounter *ps_pcounter_create(int64_t initial, int32_t batch)
{
	struct ps_pcounter *pc;

	if (batch < 1)
		return psi_err_null(EINVAL);
	pc = psi_zalloc_aligned(sizeof(*pc));
	if (!pc)
		return psi_err_null(ENOMEM);
	pc->count = initial;
	pc->batch = batch;
	psi_spin_init(&pc->lock);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&pc->count, sizeof(pc->count)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&pc->batch, sizeof(pc->batch)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&pc->active, sizeof(pc->active)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(pc->slot, sizeof(pc->slot)); /* atomics only */
	return pc;
}

void ps_pcounter_destroy(struct ps_pcounter *pc)
{
	psi_free_aligned(pc);
}

int ps_pcounter_add(struct ps_pcounter *pc, int64_t delta)
{
	struct pcounter_slot *s;
	int64_t cur, new, v;
	int32_t batch;
	int i;

	if (!pc)
		return -EINVAL;
	i = pcounter_slot_index();
	s = &pc->slot[i];
	if (psi_unlikely(!(PSI_READ_ONCE(pc->active) & (1ULL << i))))
		PSI_FETCH_OR(pc->active, 1ULL << i, RELAXED);
	batch = PSI_READ_ONCE(pc->batch);
	cur = PSI_READ_ONCE(s->delta);
	for (;;) {
		/* Compare in 64 bits: |cur| < INT32_MAX, so the sum cannot overflow for sane deltas. */
		new = cur + delta;
		if (new >= batch || new <= -(int64_t)batch)
			break;
		if (PSI_TRY_CMPXCHG_WEAK(s->delta, &cur, new, RELAXED, RELAXED))
			return 0;
	}
	psi_spin_lock(&pc->lock);
	v = PSI_XCHG(s->delta, 0, RELAXED);
	PSI_WRITE_ONCE(pc->count, pc->count + v + delta);
	psi_spin_unlock(&pc->lock);
	return 0;
}

int64_t ps_pcounter_read(const struct ps_pcounter *pc)
{
	return pc ? PSI_READ_ONCE(pc->count) : 0;
}

int64_t ps_pcounter_read_positive(const struct ps_pcounter *pc)
{
	int64_t v = ps_pcounter_read(pc);

	return v > 0 ? v : 0;
}

/* Caller holds pc->lock. */
static int64_t pcounter_sum_locked(struct ps_pcounter *pc, int *nr_deltas)
{
	int64_t sum = pc->count, d;
	int i, n = 0;

	for (i = 0; i < PS_PCOUNTER_SLOTS; i++) {
		d = PSI_READ_ONCE(pc->slot[i].delta);
		sum += d;
		n += d != 0;
	}
	if (nr_deltas)
		*nr_deltas = n;
	return sum;
}

int64_t ps_pcounter_sum(struct ps_pcounter *pc)
{
	int64_t sum;

	if (!pc)
		return 0;
	psi_spin_lock(&pc->lock);
	sum = pcounter_sum_locked(pc, NULL);
	psi_spin_unlock(&pc->lock);
	return sum;
}

int ps_pcounter_threads(const struct ps_pcounter *pc)
{
	if (!pc)
		return -EINVAL;
	return __builtin_popcountll(PSI_READ_ONCE(pc->active));
}

int ps_pcounter_compare(struct ps_pcounter *pc, int64_t rhs)
{
	int64_t count, exact, slack;

	if (!pc)
		return 0;
	count = PSI_READ_ONCE(pc->count);
	slack = (int64_t)PSI_READ_ONCE(pc->batch) * ps_pcounter_threads(pc);
	/*
	 * |count - exact| < slack (a slot of a thread that never added is 0),
	 * so beyond slack the approximate value is on the same side as the
	 * exact one.
	 */
	if (count > rhs && count - rhs > slack)
		return 1;
	if (count < rhs && rhs - count > slack)
		return -1;
	exact = ps_pcounter_sum(pc);
	return (exact > rhs) - (exact < rhs);
}

int ps_pcounter_fold(struct ps_pcounter *pc)
{
	int64_t v;
	int i;

	if (!pc)
		return -EINVAL;
	psi_spin_lock(&pc->lock);
	for (i = 0; i < PS_PCOUNTER_SLOTS; i++) {
		v = PSI_XCHG(pc->slot[i].delta, 0, RELAXED);
		if (v)
			PSI_WRITE_ONCE(pc->count, pc->count + v);
	}
	psi_spin_unlock(&pc->lock);
	return 0;
}

int ps_pcounter_set_batch(struct ps_pcounter *pc, int32_t batch)
{
	int32_t old;

	if (!pc || batch < 1)
		return -EINVAL;
	old = PSI_XCHG(pc->batch, batch, SEQ_CST);
	/* New batch first, then fold: deltas added after the fold respect the new batch. */
	if (batch < old)
		ps_pcounter_fold(pc);
	return 0;
}

int32_t ps_pcounter_batch(const struct ps_pcounter *pc)
{
	return pc ? PSI_READ_ONCE(pc->batch) : -EINVAL;
}

int ps_pcounter_snapshot(struct ps_pcounter *pc, struct ps_pcounter_snapshot *snap)
{
	if (!pc || !snap)
		return -EINVAL;
	psi_spin_lock(&pc->lock);
	snap->approx = pc->count;
	snap->exact = pcounter_sum_locked(pc, &snap->nr_deltas);
	snap->batch = PSI_READ_ONCE(pc->batch);
	psi_spin_unlock(&pc->lock);
	snap->bound = (int64_t)snap->batch * snap->nr_deltas;
	return 0;
}

int64_t ps_pcounter_error_bound(int32_t batch, int nthreads)
{
	if (batch < 1 || nthreads < 0)
		return -EINVAL;
	if (nthreads > PS_PCOUNTER_SLOTS)
		nthreads = PS_PCOUNTER_SLOTS;
	return (int64_t)batch * nthreads;
}

int32_t ps_pcounter_compute_batch(uint64_t total, int ncpus, bool strict)
{
	uint64_t sized;
	int64_t floor;

	if (ncpus < 1)
		return -EINVAL;
	sized = total / (uint64_t)ncpus / (strict ? 256 : 4);
	if (sized > INT32_MAX)
		sized = INT32_MAX;
	floor = 2 * (int64_t)ncpus;
	if (floor < 32)
		floor = 32;
	if (floor > INT32_MAX)
		floor = INT32_MAX;
	return (int32_t)((int64_t)sized > floor ? (int64_t)sized : floor);
}

/* ---- Committed memory ----------------------------------------------------- */

struct ps_commit {
	struct ps_pcounter *pc;
	int64_t total; /* immutable */
	int ncpus; /* immutable */
	int mode; /* PSI_READ_ONCE */
	int64_t limit; /* PSI_READ_ONCE */
	struct psi_spinlock mode_lock; /* serialises set_mode */
};

static const char *const overcommit_names[PS_OVERCOMMIT_COUNT] = {
	[PS_OVERCOMMIT_GUESS] = "guess",
	[PS_OVERCOMMIT_ALWAYS] = "always",
	[PS_OVERCOMMIT_NEVER] = "never",
};

const char *ps_overcommit_name(enum ps_overcommit value)
{
	return psi_name_of(overcommit_names, PS_OVERCOMMIT_COUNT, (int)value);
}

int ps_overcommit_from_name(const char *name)
{
	return psi_name_index(overcommit_names, PS_OVERCOMMIT_COUNT, name);
}

struct ps_commit *ps_commit_create(enum ps_overcommit mode, uint64_t total_pages, int ncpus)
{
	struct ps_commit *cm;

	if ((unsigned)mode >= PS_OVERCOMMIT_COUNT || ncpus < 0 || total_pages > INT64_MAX)
		return psi_err_null(EINVAL);
	if (!ncpus) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		ncpus = n > 0 && n < INT_MAX ? (int)n : 1;
	}
	cm = psi_zalloc(sizeof(*cm));
	if (!cm)
		return psi_err_null(ENOMEM);
	cm->pc = ps_pcounter_create(0, ps_pcounter_compute_batch(total_pages, ncpus,
					     mode == PS_OVERCOMMIT_NEVER));
	if (!cm->pc) {
		psi_free(cm);
		return psi_err_null(ENOMEM);
	}
	cm->total = (int64_t)total_pages;
	cm->ncpus = ncpus;
	cm->mode = mode;
	cm->limit = (int64_t)total_pages;
	psi_spin_init(&cm->mode_lock);
	/* Atomics only: PSI_READ_ONCE by charges, atomic stores by the setters. */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cm->mode, sizeof(cm->mode));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cm->limit, sizeof(cm->limit));
	return cm;
}

void ps_commit_destroy(struct ps_commit *cm)
{
	if (!cm)
		return;
	ps_pcounter_destroy(cm->pc);
	psi_free(cm);
}

int ps_commit_set_mode(struct ps_commit *cm, enum ps_overcommit mode)
{
	if (!cm || (unsigned)mode >= PS_OVERCOMMIT_COUNT)
		return -EINVAL;
	psi_spin_lock(&cm->mode_lock);
	/*
	 * Into NEVER: shrink the batch (which folds) before NEVER is visible,
	 * so the first strict check compares an exact count.  Out of NEVER:
	 * loosen the policy first; the batch may grow afterwards.
	 */
	if (mode == PS_OVERCOMMIT_NEVER) {
		ps_pcounter_set_batch(cm->pc, ps_pcounter_compute_batch(cm->total, cm->ncpus, true));
		PSI_STORE_SEQ_CST(cm->mode, mode);
	} else {
		PSI_STORE_SEQ_CST(cm->mode, mode);
		ps_pcounter_set_batch(cm->pc,
				ps_pcounter_compute_batch(cm->total, cm->ncpus, false));
	}
	psi_spin_unlock(&cm->mode_lock);
	return 0;
}

int ps_commit_mode(const struct ps_commit *cm)
{
	return cm ? PSI_READ_ONCE(cm->mode) : -EINVAL;
}

int ps_commit_set_limit(struct ps_commit *cm, int64_t limit)
{
	if (!cm || limit < 0)
		return -EINVAL;
	PSI_WRITE_ONCE(cm->limit, limit);
	return 0;
}

int64_t ps_commit_limit(const struct ps_commit *cm)
{
	return cm ? PSI_READ_ONCE(cm->limit) : -EINVAL;
}

int ps_commit_charge(struct ps_commit *cm, int64_t pages)
{
	if (!cm || pages < 0)
		return -EINVAL;
	ps_pcounter_add(cm->pc, pages);
	switch (PSI_READ_ONCE(cm->mode)) {
	case PS_OVERCOMMIT_ALWAYS:
		return 0;
	case PS_OVERCOMMIT_GUESS:
		if (pages <= cm->total)
			return 0;
		break;
	default:
		if (ps_pcounter_compare(cm->pc, PSI_READ_ONCE(cm->limit)) <= 0)
			return 0;
		break;
	}
	ps_pcounter_add(cm->pc, -pages);
	return -ENOMEM;
}

int ps_commit_uncharge(struct ps_commit *cm, int64_t pages)
{
	if (!cm || pages < 0)
		return -EINVAL;
	return ps_pcounter_add(cm->pc, -pages);
}

int64_t ps_commit_committed(const struct ps_commit *cm, bool exact)
{
	if (!cm)
		return 0;
	return exact ? ps_pcounter_sum(cm->pc) : ps_pcounter_read(cm->pc);
}

struct ps_pcounter *ps_commit_counter(const struct ps_commit *cm)
{
	return cm ? cm->pc : NULL;
}
