// SPDX-License-Identifier: LGPL-2.1-or-later
/* The reader-writer lock of rwlock.h. */
#include <string.h>

#include "rwlock.h"
#include "thread_index.h"

void psi_rwlock_init(struct psi_rwlock *l)
{
	int i;

	memset(l, 0, sizeof(*l));
	psi_spin_init(&l->wlock);
	/* Atomics only; their ordering is annotated at lock and unlock. */
	for (i = 0; i < PSI_RWLOCK_SLOTS; i++)
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&l->slot[i].readers, sizeof(l->slot[i].readers));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&l->writer, sizeof(l->writer));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&l->passed, sizeof(l->passed));
}

/* A thread's slot: its thread index, so the first PSI_RWLOCK_SLOTS threads never share one. */
static inline struct psi_rwlock_slot *my_slot(struct psi_rwlock *l)
{
	return &l->slot[psi_thread_index() % PSI_RWLOCK_SLOTS];
}

/*
 * Read sections this thread holds, of every psi_rwlock together: a thread
 * with one open enters another past a waiting writer (rwlock.h).
 */
static __thread unsigned psi_rwlock_depth __attribute__((tls_model("initial-exec")));

/* A reader's hold starts, for lock_stat (empty structs without it), by nesting depth. */
#define PSI_RWLOCK_HOLDS 8
static __thread struct psi_lstat_hold psi_rwlock_read_hold[PSI_RWLOCK_HOLDS];

static inline struct psi_lstat_hold *read_hold(unsigned depth)
{
	return &psi_rwlock_read_hold[depth < PSI_RWLOCK_HOLDS ? depth : PSI_RWLOCK_HOLDS - 1];
}

/*
 * Enter with our slot incremented and @w, the writer state we loaded
 * after it.  Return: true when we are in; false when we backed out and
 * must wait and try again.
 */
static inline bool read_admitted(struct psi_rwlock *l, struct psi_rwlock_slot *s, int w)
{
	if (psi_likely(w == PSI_RWLOCK_WRITER_NONE))
		return true;
	if (psi_rwlock_depth && w == PSI_RWLOCK_WRITER_WANTS) {
		/*
		 * Nested, and the writer only waits: go in, but tell it.  Dekker
		 * with the writer's switch to HOLDS: we increment @passed then
		 * load @writer; it stores HOLDS then loads @passed.  Both seq_cst:
		 * either we see HOLDS and back out, or it sees our increment and
		 * scans the slots again (ours is already counted).
		 */
		PSI_FETCH_ADD(l->passed, 1, SEQ_CST);
		if (PSI_LOAD_SEQ_CST(l->writer) != PSI_RWLOCK_WRITER_HOLDS)
			return true;
	}
	PSI_FETCH_SUB(s->readers, 1, RELEASE);
	return false;
}

void psi_rwlock_read_lock(struct psi_rwlock *l)
{
	struct psi_rwlock_slot *s = my_slot(l);
	uint64_t wait_start = 0;

	for (;;) {
		/*
		 * Dekker with the writer: we increment our slot then load
		 * @writer; the writer stores @writer then loads every slot.
		 * Both sides are seq_cst, so at least one sees the other.
		 */
		PSI_FETCH_ADD(s->readers, 1, SEQ_CST);
		if (psi_likely(read_admitted(l, s, PSI_LOAD_SEQ_CST(l->writer))))
			break;
		/* A writer holds or wants the lock: step aside until it is done (nested: holds no more). */
		if (!wait_start)
			wait_start = psi_lstat_wait_begin();
		if (psi_rwlock_depth)
			PSI_WAIT_WHILE(PSI_LOAD_ACQUIRE(l->writer) ==
				      PSI_RWLOCK_WRITER_HOLDS);
		else
			PSI_WAIT_WHILE(PSI_LOAD_ACQUIRE(l->writer));
	}
	PSI_ANNOTATE_HAPPENS_AFTER(&l->writer); /* pairs with psi_rwlock_write_unlock() */
	psi_lstat_acquired(&l->stat, PS_LOCK_STAT_READ, wait_start, read_hold(psi_rwlock_depth));
	psi_rwlock_depth++;
}

void psi_rwlock_read_unlock(struct psi_rwlock *l)
{
	psi_rwlock_depth--;
	psi_lstat_released(&l->stat, PS_LOCK_STAT_READ, read_hold(psi_rwlock_depth));
	/* Release: our reads of the protected data happen before a writer's stores. */
	PSI_ANNOTATE_HAPPENS_BEFORE(&l->slot[0]);
	PSI_FETCH_SUB(my_slot(l)->readers, 1, RELEASE);
}

void psi_rwlock_write_lock(struct psi_rwlock *l)
{
	/*
	 * The previous writer's section happens before ours: psi_spin_acquire()
	 * pairs with write_unlock()'s release of @wlock.  Without it the
	 * checkers saw two writers' stores as unordered whenever no reader
	 * linked them.
	 */
	uint64_t wait_start = psi_spin_acquire(&l->wlock);
	unsigned passed;
	int i;

	for (;;) {
		PSI_STORE_SEQ_CST(l->writer, PSI_RWLOCK_WRITER_WANTS);
		/* After the store: a nested reader that saw WANTS counted before this is in its slot. */
		passed = PSI_LOAD_SEQ_CST(l->passed);
		for (i = 0; i < PSI_RWLOCK_SLOTS; i++) {
			if (PSI_LSTAT_ON && !wait_start &&
					PSI_LOAD_SEQ_CST(l->slot[i].readers))
				wait_start = psi_lstat_wait_begin();
			/* Acquire: pairs with read_unlock's release. */
			PSI_WAIT_WHILE(PSI_LOAD_SEQ_CST(l->slot[i].readers));
		}
		PSI_STORE_SEQ_CST(l->writer, PSI_RWLOCK_WRITER_HOLDS);
		/* No nested reader came in behind the scan (read_admitted()): the lock is ours. */
		if (PSI_LOAD_SEQ_CST(l->passed) == passed)
			break;
	}
	PSI_ANNOTATE_HAPPENS_AFTER(&l->slot[0]); /* every reader that left: read_unlock() */
	psi_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, wait_start, &l->wlock.hold);
}

void psi_rwlock_write_unlock(struct psi_rwlock *l)
{
	psi_lstat_released(&l->stat, PS_LOCK_STAT_WRITE, &l->wlock.hold);
	PSI_ANNOTATE_HAPPENS_BEFORE(&l->writer);
	PSI_STORE_RELEASE(l->writer, PSI_RWLOCK_WRITER_NONE);
	psi_spin_release(&l->wlock);
}

bool psi_rwlock_write_trylock(struct psi_rwlock *l)
{
	int i;

	if (!psi_spin_trylock(&l->wlock))
		return false;
	PSI_ANNOTATE_HAPPENS_AFTER(&l->wlock); /* pairs with write_unlock()'s release */
	/* Readers that come meanwhile back out: HOLDS turns nested ones away too. */
	PSI_STORE_SEQ_CST(l->writer, PSI_RWLOCK_WRITER_HOLDS);
	for (i = 0; i < PSI_RWLOCK_SLOTS; i++) {
		if (PSI_LOAD_SEQ_CST(l->slot[i].readers)) {
			PSI_STORE_RELEASE(l->writer, PSI_RWLOCK_WRITER_NONE);
			psi_spin_release(&l->wlock);
			return false;
		}
	}
	PSI_ANNOTATE_HAPPENS_AFTER(&l->slot[0]); /* every reader that left: read_unlock() */
	psi_lstat_acquired(&l->stat, PS_LOCK_STAT_WRITE, 0, &l->wlock.hold);
	return true;
}
