/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One lock for what takes either a spinlock or a reader-writer lock: the
 * SPIN and RWLOCK stores (sync_lock.c) and the id map (idmap.c: SPIN and
 * RCU maps serialise on a spinlock, RWLOCK maps on the rwlock).  The caller
 * passes the kind, a constant wherever it can be, so each call compiles to
 * the primitive's own fast path (spinlock.h, rwlock.h).
 *
 * A lock of kind PS_LOCK_SPIN uses only ps_lock_size(PS_LOCK_SPIN) bytes:
 * put struct ps_lock last in its structure and allocate that much, and no
 * 4 KiB of reader slots are carried (or touched) for a spinlock.
 */
#ifndef POLSTORE_SRC_LOCK_H
#define POLSTORE_SRC_LOCK_H

#include <stddef.h>

#include "lstat.h"
#include "rwlock.h"
#include "spinlock.h"

enum ps_lock_kind { PS_LOCK_SPIN, PS_LOCK_RWLOCK };

struct ps_lock {
	union {
		struct ps_spinlock spin;
		struct ps_rwlock rw;
	};
};

/* Bytes a lock of kind @k uses from the start of its struct ps_lock. */
static inline size_t ps_lock_size(enum ps_lock_kind k)
{
	return k == PS_LOCK_SPIN ? sizeof(struct ps_spinlock) : sizeof(struct ps_rwlock);
}

/*
 * The one dispatch on the kind: @spin_op on the spinlock or @rw_op on the
 * rwlock.  With @k a constant it folds to the one call.
 */
#define PS_LOCK_OP(l, k, spin_op, rw_op)                                                           \
	((k) == PS_LOCK_SPIN ? spin_op(&(l)->spin) : rw_op(&(l)->rw))

/* Before the lock is shared; @l is zeroed up to ps_lock_size(@k). */
static inline void ps_lock_init(struct ps_lock *l, enum ps_lock_kind k)
{
	PS_LOCK_OP(l, k, ps_spin_init, ps_rwlock_init);
}

/* A spinlock has no readers: its read side is its write side. */
static inline void ps_lock_read_lock(struct ps_lock *l, enum ps_lock_kind k)
{
	PS_LOCK_OP(l, k, ps_spin_lock, ps_rwlock_read_lock);
}

static inline void ps_lock_read_unlock(struct ps_lock *l, enum ps_lock_kind k)
{
	PS_LOCK_OP(l, k, ps_spin_unlock, ps_rwlock_read_unlock);
}

static inline void ps_lock_write_lock(struct ps_lock *l, enum ps_lock_kind k)
{
	PS_LOCK_OP(l, k, ps_spin_lock, ps_rwlock_write_lock);
}

static inline void ps_lock_write_unlock(struct ps_lock *l, enum ps_lock_kind k)
{
	PS_LOCK_OP(l, k, ps_spin_unlock, ps_rwlock_write_unlock);
}

/* Take @l for writing if it is free (no holder, no reader inside): true when taken. */
static inline bool ps_lock_write_trylock(struct ps_lock *l, enum ps_lock_kind k)
{
	return k == PS_LOCK_SPIN ? ps_spin_trylock(&l->spin) : ps_rwlock_write_trylock(&l->rw);
}

/* The lock's statistics, or NULL when lock_stat is not built in. */
static inline struct ps_lstat *ps_lock_stat(struct ps_lock *l, enum ps_lock_kind k)
{
	return ps_lstat_of(k == PS_LOCK_SPIN ? &l->spin.stat : &l->rw.stat);
}

#endif /* POLSTORE_SRC_LOCK_H */
