/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The writer's side of the readers' lookup cache (polstore/static/lcache.h,
 * which says why an entry is valid): a store's id, given once, and its
 * publication count, odd while an update publishes.
 */
#ifndef POLSTORE_SRC_LOOKUP_CACHE_H
#define POLSTORE_SRC_LOOKUP_CACHE_H

#include <polstore/static/lcache.h>

#include "compiler.h"

/* An id no store of this process had before: from 1, never reused (64 bits). */
uint64_t psi_lc_new_id(void);

/*
 * Under the store's writer lock, before the first store that publishes a
 * change to the read index: the count goes odd, and the release fence
 * keeps it before every store of the change (a reader that loads the old
 * even count has seen none of it: polstore/static/lcache.h).  It precedes
 * every retirement of the update too, whose grace period begins after a
 * full fence later still.
 */
static inline void psi_lc_write_begin(struct ps_store *s)
{
	PSI_WRITE_ONCE(s->rd.gen, s->rd.gen + 1);
	PSI_FENCE(RELEASE);
}

/* After the update's last publishing store: even again (release: after all of it). */
static inline void psi_lc_write_end(struct ps_store *s)
{
	PSI_STORE_RELEASE(s->rd.gen, s->rd.gen + 1);
}

/*
 * Under the store's writer lock, for ps_store_check(): the count is even
 * (no update publishing), the id given, and the calling thread's entry for
 * the store, when it holds the current count, holds what the index holds
 * for its range.  Return: 0, or -EUCLEAN with *@why.
 */
int psi_lc_check(const struct ps_store *s, const char **why);

#endif /* POLSTORE_SRC_LOOKUP_CACHE_H */
