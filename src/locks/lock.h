/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One lock for what takes either a spinlock or a reader-writer lock: the
 * SPIN and RWLOCK stores (sync_lock.c) and the id map (idmap.c: SPIN and
 * RCU maps serialise on a spinlock, RWLOCK maps on the rwlock).  The caller
 * passes the kind, a constant wherever it can be, so each call compiles to
 * the primitive's own fast path (spinlock.h, rwlock.h).
 *
 * A lock of kind PSI_LOCK_SPIN uses only psi_lock_size(PSI_LOCK_SPIN) bytes:
 * put struct psi_lock last in its structure and allocate that much, and no
 * 4 KiB of reader slots are carried (or touched) for a spinlock.
 */
#ifndef POLSTORE_SRC_LOCK_H
#define POLSTORE_SRC_LOCK_H

#include <stddef.h>

#include "lstat.h"
#include "rwlock.h"
#include "spinlock.h"

enum psi_lock_kind { PSI_LOCK_SPIN, PSI_LOCK_RWLOCK };

struct psi_lock {
	union {
		struct psi_spinlock spin;
		struct psi_rwlock rw;
	};
};

/* Bytes a lock of kind @k uses from the start of its struct psi_lock. */
static inline size_t psi_lock_size(enum psi_lock_kind k)
{
	return k == PSI_LOCK_SPIN ? sizeof(struct psi_spinlock) : sizeof(struct psi_rwlock);
}

/*
 * The one dispatch on the kind: @spin_op on the spinlock or @rw_op on the
 * rwlock.  With @k a constant it folds to the one call.
 */
#define PSI_LOCK_OP(l, k, spin_op, rw_op)                                                           \
	((k) == PSI_LOCK_SPIN ? spin_op(&(l)->spin) : rw_op(&(l)->rw))

/* Before the lock is shared; @l is zeroed up to psi_lock_size(@k). */
static inline void psi_lock_init(struct psi_lock *l, enum psi_lock_kind k)
{
	PSI_LOCK_OP(l, k, psi_spin_init, psi_rwlock_init);
}

/* A spinlock has no readers: its read side is its write side. */
static inline void psi_lock_read_lock(struct psi_lock *l, enum psi_lock_kind k)
{
	PSI_LOCK_OP(l, k, psi_spin_lock, psi_rwlock_read_lock);
}

static inline void psi_lock_read_unlock(struct psi_lock *l, enum psi_lock_kind k)
{
	PSI_LOCK_OP(l, k, psi_spin_unlock, psi_rwlock_read_unlock);
}

static inline void psi_lock_write_lock(struct psi_lock *l, enum psi_lock_kind k)
{
	PSI_LOCK_OP(l, k, psi_spin_lock, psi_rwlock_write_lock);
}

static inline void psi_lock_write_unlock(struct psi_lock *l, enum psi_lock_kind k)
{
	PSI_LOCK_OP(l, k, psi_spin_unlock, psi_rwlock_write_unlock);
}

/* Take @l for writing if it is free (no holder, no reader inside): true when taken. */
static inline bool psi_lock_write_trylock(struct psi_lock *l, enum psi_lock_kind k)
{
	return k == PSI_LOCK_SPIN ? psi_spin_trylock(&l->spin) : psi_rwlock_write_trylock(&l->rw);
}

/* The lock's statistics, or NULL when lock_stat is not built in. */
static inline struct psi_lstat *psi_lock_stat(struct psi_lock *l, enum psi_lock_kind k)
{
	return psi_lstat_of(k == PSI_LOCK_SPIN ? &l->spin.stat : &l->rw.stat);
}

#endif /* POLSTORE_SRC_LOCK_H */
