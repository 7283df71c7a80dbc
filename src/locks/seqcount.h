/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ps_seqcount: the writer makes the count odd, writes, makes it even;
 * readers retry when it was odd or changed.  The count itself is struct
 * ps_seqcount of polstore/static/locks.h (SEQLOCK readers inline it); these
 * are the library's accesses, annotated for the thread checkers.  Writers
 * are serialised by the caller.
 */
#ifndef POLSTORE_SRC_SEQCOUNT_H
#define POLSTORE_SRC_SEQCOUNT_H

#include <stdbool.h>

#include <polstore/static/locks.h>

#include "annotate.h"
#include "compiler.h"

/*
 * psi_seq_init() - zero @s and declare its count to the thread checkers.
 * Context: before @s is shared.  The count is touched only with atomics
 * (and the writer's own plain read, under the writer lock); the ordering it
 * carries is annotated in psi_seq_read_begin() and psi_seq_write_end().
 */
static inline void psi_seq_init(struct ps_seqcount *s)
{
	PSI_WRITE_ONCE(s->seq, 0);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&s->seq, sizeof(s->seq)); /* atomics only */
}

static inline unsigned psi_seq_read_begin(const struct ps_seqcount *s)
{
	unsigned seq = PSI_LOAD_ACQUIRE(s->seq);

	PSI_ANNOTATE_HAPPENS_AFTER(s); /* pairs with psi_seq_write_end() */
	return seq;
}

/*
 * True when the section that began with @start must be retried.  The
 * acquire fence orders the section's data loads before the re-read of the
 * count; it pairs with the release fence in psi_seq_write_begin(): a reader
 * that saw any store of a write section sees the odd count it began with.
 */
static inline bool psi_seq_read_retry(const struct ps_seqcount *s, unsigned start)
{
	PSI_FENCE(ACQUIRE);
	return (start & 1) || PSI_READ_ONCE(s->seq) != start;
}

static inline void psi_seq_write_begin(struct ps_seqcount *s)
{
	PSI_WRITE_ONCE(s->seq, s->seq + 1);
	PSI_FENCE(RELEASE);
}

static inline void psi_seq_write_end(struct ps_seqcount *s)
{
	/* Release: the section's stores are visible to whoever sees the even count. */
	PSI_ANNOTATE_HAPPENS_BEFORE(s);
	PSI_STORE_RELEASE(s->seq, s->seq + 1);
}

#endif /* POLSTORE_SRC_SEQCOUNT_H */
