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
	PS_ANNOTATE_BENIGN_RACE_SIZED(&l->passed, sizeof(l->passed));
}

/* A thread's slot: its thread index, so the first PS_RWLOCK_SLOTS threads never share one. */
static inline struct ps_rwlock_slot *my_slot(struct ps_rwlock *l)
{
	return &l->slot[psi_thread_index() % PS_RWLOCK_SLOTS];
}

/*
 * Read sections this thread holds, of every ps_rwlock together: a thread
 * with one open enters another past a waiting writer (rwlock.h).
 */
static __thread unsigned ps_rwlock_depth __attribute__((tls_model("initial-exec")));

/* A reader's hold starts, for lock_stat (empty structs without it), by nesting depth. */
#define PS_RWLOCK_HOLDS 8
static __thread struct ps_lstat_hold ps_rwlock_read_hold[PS_RWLOCK_HOLDS];

static inline struct ps_lstat_hold *read_hold(unsigned depth)
{
	return &ps_rwlock_read_hold[depth < PS_RWLOCK_HOLDS ? depth : PS_RWLOCK_HOLDS - 1];
}

/*
 * Enter with our slot incremented and @w, the writer state we loaded
 * after it.  Return: true when we are in; false when we backed out and
 * must wait and try again.
 */
static inline bool read_admitted(struct ps_rwlock *l, struct ps_rwlock_slot *s, int w)
{
	if (ps_likely(w == PS_RWLOCK_WRITER_NONE))
		return true;
	if (ps_rwlock_depth && w == PS_RWLOCK_WRITER_WANTS) {
		/*
		 * Nested, and the writer only waits: go in, but tell it.  Dekker
		 * with the writer's switch to HOLDS: we increment @passed then
		 * load @writer; it stores HOLDS then loads @passed.  Both seq_cst:
		 * either we see HOLDS and back out, or it sees our increment and
		 * scans the slots again (ours is already counted).
		 */
		__atomic_fetch_add(&l->passed, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&l->writer, __ATOMIC_SEQ_CST) != PS_RWLOCK_WRITER_HOLDS)
			return true;
	}
	__atomic_fetch_sub(&s->readers, 1, __ATOMIC_RELEASE);
	return false;
}

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
		if (ps_likely(read_admitted(l, s, __atomic_load_n(&l->writer, __ATOMIC_SEQ_CST))))
			break;
		/* A writer holds or wants the lock: step aside until it is done (nested: holds no more). */
		if (!wait_start)
			wait_start = ps_lstat_wait_begin();
		if (ps_rwlock_depth)
			PS_WAIT_WHILE(__atomic_load_n(&l->writer, __ATOMIC_ACQUIRE) ==
				      PS_RWLOCK_WRITER_HOLDS);
		else
			PS_WAIT_WHILE(__atomic_load_n(&l->writer, __ATOMIC_ACQUIRE));
	}
	PS_ANNOTATE_HAPPENS_AFTER(&l->writer); /* pairs with ps_rwlock_write_unlock() */
	ps_lstat_acquired(&l->stat, PS_LOCK_STAT_READ, wait_start, read_hold(ps_rwlock_depth));
	ps_rwlock_depth++;
}

void ps_rwlock_read_unlock(struct ps_rwlock *l)
{
	ps_rwlock_depth--;
	ps_lstat_released(&l->stat, PS_LOCK_STAT_READ, read_hold(ps_rwlock_depth));
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
	unsigned passed;
	int i;

	for (;;) {
		__atomic_store_n(&l->writer, PS_RWLOCK_WRITER_WANTS, __ATOMIC_SEQ_CST);
		/* After the store: a nested reader that saw WANTS counted before this is in its slot. */
		passed = __atomic_load_n(&l->passed, __ATOMIC_SEQ_CST);
		for (i = 0; i < PS_RWLOCK_SLOTS; i++) {
			if (PS_LSTAT_ON && !wait_start &&
					__atomic_load_n(&l->slot[i].readers, __ATOMIC_SEQ_CST))
				wait_start = ps_lstat_wait_begin();
			/* Acquire: pairs with read_unlock's release. */
			PS_WAIT_WHILE(__atomic_load_n(&l->slot[i].readers, __ATOMIC_SEQ_CST));
		}
		__atomic_store_n(&l->writer, PS_RWLOCK_WRITER_HOLDS, __ATOMIC_SEQ_CST);
		/* No nested reader came in behind the scan (read_admitted()): the lock is ours. */
		if (__atomic_load_n(&l->passed, __ATOMIC_SEQ_CST) == passed)
			break;
	}
	PS_ANNOTATE_HAPPENS_AFTER(&l->slot[0]); /* every reader that left: read_unlock() */
	ps_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, wait_start, &l->wlock.hold);
}

void ps_rwlock_write_unlock(struct ps_rwlock *l)
{
	ps_lstat_released(&l->stat, PS_LOCK_STAT_WRITE, &l->wlock.hold);
	PS_ANNOTATE_HAPPENS_BEFORE(&l->writer);
	__atomic_store_n(&l->writer, PS_RWLOCK_WRITER_NONE, __ATOMIC_RELEASE);
	ps_spin_release(&l->wlock);
}

bool ps_rwlock_write_trylock(struct ps_rwlock *l)
{
	int i;

	if (!ps_spin_trylock(&l->wlock))
		return false;
	PS_ANNOTATE_HAPPENS_AFTER(&l->wlock); /* pairs with write_unlock()'s release */
	/* Readers that come meanwhile back out: HOLDS turns nested ones away too. */
	__atomic_store_n(&l->writer, PS_RWLOCK_WRITER_HOLDS, __ATOMIC_SEQ_CST);
	for (i = 0; i < PS_RWLOCK_SLOTS; i++) {
		if (__atomic_load_n(&l->slot[i].readers, __ATOMIC_SEQ_CST)) {
			__atomic_store_n(&l->writer, PS_RWLOCK_WRITER_NONE, __ATOMIC_RELEASE);
			ps_spin_release(&l->wlock);
			return false;
		}
	}
	PS_ANNOTATE_HAPPENS_AFTER(&l->slot[0]); /* every reader that left: read_unlock() */
	ps_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, 0, &l->wlock.hold);
	return true;
}
