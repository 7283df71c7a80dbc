// SPDX-License-Identifier: LGPL-2.1-or-later
/* The reader-writer lock of rwlock.h. */
#include <string.h>

#include "rwlock.h"

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

/* A reader's hold start, for lock_stat (an empty struct without it). */
static __thread struct ps_lstat_hold ps_rwlock_read_hold;

void ps_rwlock_read_lock(struct ps_rwlock *l)
{
	struct ps_rwlock_slot *s = my_slot(l);
	uint64_t wait_start = 0;

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
		if (!wait_start)
			wait_start = ps_lstat_wait_begin();
		PS_WAIT_WHILE(__atomic_load_n(&l->writer, __ATOMIC_ACQUIRE));
	}
	PS_ANNOTATE_HAPPENS_AFTER(&l->writer); /* pairs with ps_rwlock_write_unlock() */
	ps_lstat_acquired(&l->stat, PS_LOCK_STAT_READ, wait_start, &ps_rwlock_read_hold);
}

void ps_rwlock_read_unlock(struct ps_rwlock *l)
{
	ps_lstat_released(&l->stat, PS_LOCK_STAT_READ, &ps_rwlock_read_hold);
	/* Release: our reads of the protected data happen before a writer's stores. */
	PS_ANNOTATE_HAPPENS_BEFORE(&l->slot[0]);
	__atomic_fetch_sub(&my_slot(l)->readers, 1, __ATOMIC_RELEASE);
}

void ps_rwlock_write_lock(struct ps_rwlock *l)
{
	/*
	 * The previous writer's section happens before ours: ps_spin_acquire()
	 * pairs with write_unlock()'s release of @wlock.  Without it the
	 * checkers saw two writers' stores as unordered whenever no reader
	 * linked them.
	 */
	uint64_t wait_start = ps_spin_acquire(&l->wlock);
	int i;

	__atomic_store_n(&l->writer, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < PS_RWLOCK_SLOTS; i++) {
		if (PS_LSTAT_ON && !wait_start &&
				__atomic_load_n(&l->slot[i].readers, __ATOMIC_SEQ_CST))
			wait_start = ps_lstat_wait_begin();
		/* Acquire: pairs with read_unlock's release. */
		PS_WAIT_WHILE(__atomic_load_n(&l->slot[i].readers, __ATOMIC_SEQ_CST));
	}
	PS_ANNOTATE_HAPPENS_AFTER(&l->slot[0]); /* every reader that left: read_unlock() */
	ps_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, wait_start, &l->wlock.hold);
}

void ps_rwlock_write_unlock(struct ps_rwlock *l)
{
	ps_lstat_released(&l->stat, PS_LOCK_STAT_WRITE, &l->wlock.hold);
	PS_ANNOTATE_HAPPENS_BEFORE(&l->writer);
	__atomic_store_n(&l->writer, 0, __ATOMIC_RELEASE);
	ps_spin_release(&l->wlock);
}
