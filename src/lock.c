// SPDX-License-Identifier: LGPL-2.1-or-later
/* Slow paths of the locks in lock.h and the lock_stat accounting. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "lock.h"

void _ps_yield(void)
{
	sched_yield();
}

void ps_spin_init(struct ps_spinlock *l)
{
	memset(l, 0, sizeof(*l));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&l->locked, sizeof(l->locked)); /* atomics only */
	PS_ANNOTATE_BENIGN_RACE_SIZED(&l->starving, sizeof(l->starving)); /* atomics only */
}

void ps_seq_init(struct ps_seqcount *s)
{
	PS_WRITE_ONCE(s->seq, 0);
	PS_ANNOTATE_BENIGN_RACE_SIZED(&s->seq, sizeof(s->seq)); /* atomics only */
}

void _ps_spin_lock_slow(struct ps_spinlock *l)
{
	unsigned rounds = 0, yields = 0;
	bool mine = false; /* we raised @starving: the next turn is ours */

	for (;;) {
		/* Spin on loads so waiters share the line read-only until it is freed. */
		if (!PS_READ_ONCE(l->locked) && (mine || !PS_READ_ONCE(l->starving)) &&
				!__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE)) {
			if (mine)
				PS_WRITE_ONCE(l->starving, 0);
			return;
		}
		if (++rounds < PS_SPIN_ROUNDS) {
			ps_cpu_relax();
			continue;
		}
		_ps_yield();
		if (!mine && ++yields >= PS_SPIN_STARVE_YIELDS) {
			int zero = 0;

			mine = __atomic_compare_exchange_n(&l->starving, &zero, 1, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED);
		}
	}
}

struct ps_lstat *ps_spin_stat(struct ps_spinlock *l)
{
#ifdef POLSTORE_LOCK_STAT
	return &l->stat;
#else
	(void)l;
	return NULL;
#endif
}

void ps_rwlock_init(struct ps_rwlock *l)
{
	int i;

	memset(l, 0, sizeof(*l));
	ps_spin_init(&l->wlock);
	/* Atomics only; their ordering is annotated at lock and unlock. */
	for (i = 0; i < PS_RWLOCK_SLOTS; i++)
		PS_ANNOTATE_BENIGN_RACE_SIZED(&l->slot[i].readers, sizeof(l->slot[i].readers));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&l->writer, sizeof(l->writer));
}

/* A thread's slot: its thread index, so the first PS_RWLOCK_SLOTS threads never share one. */
static inline struct ps_rwlock_slot *my_slot(struct ps_rwlock *l)
{
	return &l->slot[_ps_thread_index() % PS_RWLOCK_SLOTS];
}

#ifdef POLSTORE_LOCK_STAT
static __thread uint64_t ps_rwlock_read_hold_start;
#endif

void ps_rwlock_read_lock(struct ps_rwlock *l)
{
	struct ps_rwlock_slot *s = my_slot(l);
#ifdef POLSTORE_LOCK_STAT
	uint64_t wait_start = 0;
#endif

	for (;;) {
		/*
		 * Dekker with the writer: we increment our slot then load
		 * @writer; the writer stores @writer then loads every slot.
		 * Both sides are seq_cst, so at least one sees the other.
		 */
		__atomic_fetch_add(&s->readers, 1, __ATOMIC_SEQ_CST);
		if (ps_likely(!__atomic_load_n(&l->writer, __ATOMIC_SEQ_CST)))
			break;
		/* A writer holds or wants the lock: step aside until it is done. */
		__atomic_fetch_sub(&s->readers, 1, __ATOMIC_RELEASE);
#ifdef POLSTORE_LOCK_STAT
		if (!wait_start)
			wait_start = _ps_lstat_now();
#endif
		PS_WAIT_WHILE(__atomic_load_n(&l->writer, __ATOMIC_ACQUIRE));
	}
	PS_ANNOTATE_HAPPENS_AFTER(&l->writer); /* pairs with ps_rwlock_write_unlock() */
#ifdef POLSTORE_LOCK_STAT
	ps_rwlock_read_hold_start = _ps_lstat_acquired(&l->stat, PS_LOCK_STAT_READ, wait_start);
#endif
}

void ps_rwlock_read_unlock(struct ps_rwlock *l)
{
#ifdef POLSTORE_LOCK_STAT
	_ps_lstat_released(&l->stat, PS_LOCK_STAT_READ, ps_rwlock_read_hold_start);
#endif
	/* Release: our reads of the protected data happen before a writer's stores. */
	PS_ANNOTATE_HAPPENS_BEFORE(&l->slot[0]);
	__atomic_fetch_sub(&my_slot(l)->readers, 1, __ATOMIC_RELEASE);
}

void ps_rwlock_write_lock(struct ps_rwlock *l)
{
	int i;
#ifdef POLSTORE_LOCK_STAT
	uint64_t wait_start = 0;

	if (!ps_spin_trylock(&l->wlock)) {
		wait_start = _ps_lstat_now();
		_ps_spin_lock_slow(&l->wlock);
	}
#else
	if (!ps_spin_trylock(&l->wlock))
		_ps_spin_lock_slow(&l->wlock);
#endif
	/*
	 * The previous writer's section happens before ours: pairs with
	 * write_unlock()'s HAPPENS_BEFORE(&l->wlock).  Without it the checkers
	 * saw two writers' stores as unordered whenever no reader linked them.
	 */
	PS_ANNOTATE_HAPPENS_AFTER(&l->wlock);
	__atomic_store_n(&l->writer, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < PS_RWLOCK_SLOTS; i++) {
#ifdef POLSTORE_LOCK_STAT
		if (!wait_start && __atomic_load_n(&l->slot[i].readers, __ATOMIC_SEQ_CST))
			wait_start = _ps_lstat_now();
#endif
		/* Acquire: pairs with read_unlock's release. */
		PS_WAIT_WHILE(__atomic_load_n(&l->slot[i].readers, __ATOMIC_SEQ_CST));
	}
	PS_ANNOTATE_HAPPENS_AFTER(&l->slot[0]); /* every reader that left: read_unlock() */
#ifdef POLSTORE_LOCK_STAT
	l->wlock.hold_start = _ps_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, wait_start);
#endif
}

void ps_rwlock_write_unlock(struct ps_rwlock *l)
{
#ifdef POLSTORE_LOCK_STAT
	_ps_lstat_released(&l->stat, PS_LOCK_STAT_WRITE, l->wlock.hold_start);
#endif
	PS_ANNOTATE_HAPPENS_BEFORE(&l->writer);
	PS_ANNOTATE_HAPPENS_BEFORE(&l->wlock);
	__atomic_store_n(&l->writer, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&l->wlock.locked, 0, __ATOMIC_RELEASE);
}

struct ps_lstat *ps_rwlock_stat(struct ps_rwlock *l)
{
#ifdef POLSTORE_LOCK_STAT
	return &l->stat;
#else
	(void)l;
	return NULL;
#endif
}

#ifdef POLSTORE_LOCK_STAT
uint64_t _ps_lstat_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void stat_min(uint64_t *slot, uint64_t v)
{
	uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);

	while ((cur == 0 || v < cur) &&
			!__atomic_compare_exchange_n(slot, &cur, v, true, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		;
}

static void stat_max(uint64_t *slot, uint64_t v)
{
	uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);

	while (v > cur &&
			!__atomic_compare_exchange_n(slot, &cur, v, true, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		;
}

static void stat_add(uint64_t *slot, uint64_t v)
{
	__atomic_fetch_add(slot, v, __ATOMIC_RELAXED);
}

uint64_t _ps_lstat_acquired(struct ps_lstat *st, int dir, uint64_t wait_start)
{
	struct ps_lstat_class *c = &st->cls[dir];
	uint64_t now = _ps_lstat_now();
	int cpu = sched_getcpu();
	/* Any previous acquirer, of either direction, on another CPU means the line moved. */
	int prev = __atomic_exchange_n(&st->cls[0].last_cpu, cpu + 1, __ATOMIC_RELAXED);
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

void _ps_lstat_released(struct ps_lstat *st, int dir, uint64_t hold_start)
{
	struct ps_lstat_class *c = &st->cls[dir];
	uint64_t h = _ps_lstat_now() - hold_start;

	if (h) {
		stat_min(&c->hold_min, h);
		stat_max(&c->hold_max, h);
		stat_add(&c->hold_total, h);
	}
}
#endif /* POLSTORE_LOCK_STAT */
