/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ps_rwlock: a writer-preferring reader-writer lock whose readers announce
 * themselves on per-slot counters, one cache line each, a slot per thread
 * (threads share slots round-robin only beyond PS_RWLOCK_SLOTS threads).
 * A reader writes only its own slot, never a line all readers share (as
 * glibc's pthread_rwlock counter is).  A writer raises @writer, which
 * turns away new readers, then waits for every slot to drain: a writer
 * waits at most for the read sections already in progress, so a stream of
 * readers cannot starve it (a reader-preferring rwlock let readers starve
 * a writer into a soft lockup in the kernel's id map).  Writers are serialised by a spinlock (spinlock.h).
 */
#ifndef POLSTORE_SRC_RWLOCK_H
#define POLSTORE_SRC_RWLOCK_H

#include "compiler.h"
#include "lstat.h"
#include "spinlock.h"

#define PS_RWLOCK_SLOTS 64

struct ps_rwlock_slot {
	long readers;
} __ps_cacheline_aligned;

struct ps_rwlock {
	struct ps_rwlock_slot slot[PS_RWLOCK_SLOTS];
	int writer __ps_cacheline_aligned; /* a writer holds or wants the lock */
	struct ps_spinlock wlock; /* serialises writers; its hold time is the write hold */
	struct ps_lstat stat;
};

/* Zero @l and declare its atomics-only words to the thread checkers; before @l is shared. */
void ps_rwlock_init(struct ps_rwlock *l);
void ps_rwlock_read_lock(struct ps_rwlock *l);
void ps_rwlock_read_unlock(struct ps_rwlock *l);
void ps_rwlock_write_lock(struct ps_rwlock *l);
void ps_rwlock_write_unlock(struct ps_rwlock *l);

#endif /* POLSTORE_SRC_RWLOCK_H */
