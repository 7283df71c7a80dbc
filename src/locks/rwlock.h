/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * psi_rwlock: a writer-preferring reader-writer lock whose readers announce
 * themselves on per-slot counters, one cache line each, a slot per thread
 * (threads share slots round-robin only beyond PSI_RWLOCK_SLOTS threads).
 * A reader writes only its own slot, never a line all readers share (as
 * glibc's pthread_rwlock counter is).  A writer raises @writer, which
 * turns away new readers, then waits for every slot to drain: a writer
 * waits at most for the read sections already in progress, so a stream of
 * readers cannot starve it (a reader-preferring rwlock let readers starve
 * a writer into a soft lockup in the kernel's id map).  Writers are serialised by a spinlock (spinlock.h).
 *
 * Nesting: a thread that is inside a read section of any psi_rwlock already
 * (a per-thread count) does not step aside for a writer that only wants
 * the lock: it enters at once.  So read sections nest, of one lock or of
 * several, whatever writers wait: two threads each inside one lock's
 * section and reading the other's cannot deadlock behind the two locks'
 * waiting writers.  The writer is not starved by it: it is turned away
 * from nobody new, and waits for the threads that were inside a section
 * when it came only until each has left every section it holds.  Such a
 * nested reader still waits for a writer that holds the lock (@writer is
 * PSI_RWLOCK_WRITER_HOLDS): a holder waits for no reader.  @passed counts
 * the nested readers that went past a waiting writer, so that the writer,
 * once every slot read 0, sees whether one came in behind its scan and
 * waits again.
 */
#ifndef POLSTORE_SRC_RWLOCK_H
#define POLSTORE_SRC_RWLOCK_H

#include <stdbool.h>

#include "compiler.h"
#include "lstat.h"
#include "spinlock.h"

#define PSI_RWLOCK_SLOTS 64

struct psi_rwlock_slot {
	long readers;
} __ps_cacheline_aligned;

/* @writer: no writer, one that waits for the readers to drain, one that holds the lock. */
#define PSI_RWLOCK_WRITER_NONE 0
#define PSI_RWLOCK_WRITER_WANTS 1
#define PSI_RWLOCK_WRITER_HOLDS 2

struct psi_rwlock {
	struct psi_rwlock_slot slot[PSI_RWLOCK_SLOTS];
	int writer __ps_cacheline_aligned; /* PSI_RWLOCK_WRITER_*: a writer holds or wants the lock */
	unsigned passed; /* nested readers that entered past a waiting writer */
	struct psi_spinlock wlock; /* serialises writers; its hold time is the write hold */
	struct psi_lstat stat;
};

/* Zero @l and declare its atomics-only words to the thread checkers; before @l is shared. */
void psi_rwlock_init(struct psi_rwlock *l);
void psi_rwlock_read_lock(struct psi_rwlock *l);
void psi_rwlock_read_unlock(struct psi_rwlock *l);
void psi_rwlock_write_lock(struct psi_rwlock *l);
void psi_rwlock_write_unlock(struct psi_rwlock *l);
/* Take @l for writing if no writer has it and no reader is inside: true when taken. */
bool psi_rwlock_write_trylock(struct psi_rwlock *l);

#endif /* POLSTORE_SRC_RWLOCK_H */
