/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The locks behind the SPIN, RWLOCK and SEQLOCK stores, with optional
 * lock statistics (POLSTORE_LOCK_STAT; compiled out entirely when off).
 *
 * ps_spinlock: test-and-test-and-set; waiters spin on a read-only load for
 *   a bounded number of rounds, then sched_yield(), so a preempted holder
 *   gets the CPU back when threads outnumber cores (no livelock with 1000
 *   threads on 2 cores).  TTAS is unfair: a thread that releases and
 *   re-takes the lock in a loop can keep a waiter out indefinitely (seen
 *   with readers against a writer).  So a waiter that has yielded
 *   PS_SPIN_STARVE_YIELDS times raises @starving; while it is raised nobody
 *   else takes the lock, and the starving waiter clears it once it has the
 *   lock.  A waiter thus waits at most for its yields plus one hand-off.
 *
 * ps_rwlock: a writer-preferring reader-writer lock whose readers announce
 *   themselves on per-slot counters, one cache line each, a slot per thread
 *   (threads share slots round-robin only beyond PS_RWLOCK_SLOTS threads).
 *   A reader writes only its own slot, never a line all readers share (as
 *   glibc's pthread_rwlock counter is).  A writer raises @writer, which
 *   turns away new readers, then waits for every slot to drain: a writer
 *   waits at most for the read sections already in progress, so a stream of
 *   readers cannot starve it (the soft lockup that got seed 003's rwlock
 *   reverted).
 *
 * ps_seqcount: the writer makes the count odd, writes, makes it even;
 *   readers retry when it was odd or changed.
 */
#ifndef POLSTORE_SRC_LOCK_H
#define POLSTORE_SRC_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/lockstat.h>
#include <polstore/static/store.h>

#include "annotate.h"
#include "compiler.h"

#define PS_SPIN_ROUNDS 128 /* pause rounds before a waiter yields */
#define PS_SPIN_STARVE_YIELDS 16 /* yields before a waiter claims the next turn */
#define PS_RWLOCK_SLOTS 64

#ifdef POLSTORE_LOCK_STAT
/* One class per lock and direction ([PS_LOCK_STAT_WRITE], [PS_LOCK_STAT_READ]). */
struct ps_lstat_class {
	uint64_t con_bounces, contentions, acq_bounces, acquisitions;
	uint64_t wait_min, wait_max, wait_total;
	uint64_t hold_min, hold_max, hold_total;
	int last_cpu;
};

struct ps_lstat {
	struct ps_lstat_class cls[2];
};

uint64_t _ps_lstat_now(void);
/* Acquisition done; @wait_start is 0 when the first attempt succeeded. Returns the hold start. */
uint64_t _ps_lstat_acquired(struct ps_lstat *st, int dir, uint64_t wait_start);
void _ps_lstat_released(struct ps_lstat *st, int dir, uint64_t hold_start);
#define PS_LSTAT_FIELD(name) struct ps_lstat name;
#else
#define PS_LSTAT_FIELD(name)
#endif

struct ps_spinlock {
	int locked;
	int starving; /* a long waiter claims the next acquisition */
#ifdef POLSTORE_LOCK_STAT
	uint64_t hold_start; /* written by the holder only */
	struct ps_lstat stat;
#endif
};

void ps_spin_init(struct ps_spinlock *l);
void _ps_spin_lock_slow(struct ps_spinlock *l);

static inline bool ps_spin_trylock(struct ps_spinlock *l)
{
	return !PS_READ_ONCE(l->locked) && !PS_READ_ONCE(l->starving) &&
	       !__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE);
}

static inline void ps_spin_lock(struct ps_spinlock *l)
{
#ifdef POLSTORE_LOCK_STAT
	uint64_t wait_start = 0;

	if (!ps_spin_trylock(l)) {
		wait_start = _ps_lstat_now();
		_ps_spin_lock_slow(l);
	}
	/* Before the holder's first write, hold_start included. */
	PS_ANNOTATE_HAPPENS_AFTER(l); /* pairs with ps_spin_unlock() */
	l->hold_start = _ps_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, wait_start);
#else
	if (ps_unlikely(!ps_spin_trylock(l)))
		_ps_spin_lock_slow(l);
	PS_ANNOTATE_HAPPENS_AFTER(l); /* pairs with ps_spin_unlock() */
#endif
}

static inline void ps_spin_unlock(struct ps_spinlock *l)
{
#ifdef POLSTORE_LOCK_STAT
	_ps_lstat_released(&l->stat, PS_LOCK_STAT_WRITE, l->hold_start);
#endif
	PS_ANNOTATE_HAPPENS_BEFORE(l);
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

/* Wait, spinning then yielding, while @cond holds.  @cond is re-evaluated each round. */
#define PS_WAIT_WHILE(cond)                                                                        \
	do {                                                                                       \
		unsigned _ps_rounds = 0;                                                           \
		while (cond) {                                                                     \
			if (++_ps_rounds < PS_SPIN_ROUNDS)                                         \
				ps_cpu_relax();                                                    \
			else                                                                       \
				_ps_yield();                                                       \
		}                                                                                  \
	} while (0)

void _ps_yield(void);

struct ps_rwlock_slot {
	long readers;
} __ps_cacheline_aligned;

struct ps_rwlock {
	struct ps_rwlock_slot slot[PS_RWLOCK_SLOTS];
	int writer __ps_cacheline_aligned; /* a writer holds or wants the lock */
	struct ps_spinlock wlock; /* serialises writers */
#ifdef POLSTORE_LOCK_STAT
	struct ps_lstat stat;
#endif
};

void ps_rwlock_init(struct ps_rwlock *l);
void ps_rwlock_read_lock(struct ps_rwlock *l);
void ps_rwlock_read_unlock(struct ps_rwlock *l);
void ps_rwlock_write_lock(struct ps_rwlock *l);
void ps_rwlock_write_unlock(struct ps_rwlock *l);
/* The ps_lstat of a lock, or NULL without POLSTORE_LOCK_STAT. */
struct ps_lstat *ps_rwlock_stat(struct ps_rwlock *l);
struct ps_lstat *ps_spin_stat(struct ps_spinlock *l);

/* struct ps_seqcount: polstore/static/store.h (SEQLOCK readers inline it). */

/*
 * ps_seq_init() - zero @s and declare its count to the thread checkers.
 * Context: before @s is shared.  The count is touched only with atomics
 * (and the writer's own plain read, under the writer lock); the ordering it
 * carries is annotated in ps_seq_read_begin() and ps_seq_write_end().
 */
void ps_seq_init(struct ps_seqcount *s);

static inline unsigned ps_seq_read_begin(const struct ps_seqcount *s)
{
	unsigned seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

	PS_ANNOTATE_HAPPENS_AFTER(s); /* pairs with ps_seq_write_end() */
	return seq;
}

/*
 * True when the section that began with @start must be retried.  The
 * acquire fence orders the section's data loads before the re-read of the
 * count; it pairs with the release fence in ps_seq_write_begin(): a reader
 * that saw any store of a write section sees the odd count it began with.
 */
static inline bool ps_seq_read_retry(const struct ps_seqcount *s, unsigned start)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return (start & 1) || __atomic_load_n(&s->seq, __ATOMIC_RELAXED) != start;
}

static inline void ps_seq_write_begin(struct ps_seqcount *s)
{
	PS_WRITE_ONCE(s->seq, s->seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void ps_seq_write_end(struct ps_seqcount *s)
{
	/* Release: the section's stores are visible to whoever sees the even count. */
	PS_ANNOTATE_HAPPENS_BEFORE(s);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

#endif /* POLSTORE_SRC_LOCK_H */
