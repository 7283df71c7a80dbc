// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The retire log of retire_log.h: a queue of entries in blocks that grow
 * from a few words (a small store retires little) to a page, with the
 * marks that say which grace period frees them.
 *
 * Blocks: entries are taken from @head at @hpos and added to @tail at
 * @tpos; a block taken to its end is freed once a later one holds
 * entries, and room reserved ahead is the blocks after @tail, empty.
 */
#include <errno.h>

#include "alloc_internal.h"
#include "compiler.h"
#include "rcu_reclaim.h"
#include "retire_log.h"

/* Entries of the first block of a log, and of the largest. */
#define RLOG_BLK_MIN 8u
#define RLOG_BLK_MAX 510u

struct psi_rlog_blk {
	struct psi_rlog_blk *next;
	uint32_t cap;
	void *e[];
};

static size_t blk_size(uint32_t cap)
{
	return sizeof(struct psi_rlog_blk) + (size_t)cap * sizeof(void *);
}

static void blk_free(struct psi_rlog *log, struct psi_rlog_blk *b)
{
	log->own_bytes -= psi_alloc_charge(blk_size(b->cap));
	psi_free(b);
}

int psi_rlog_reserve(struct psi_rlog **logp, size_t n)
{
	struct psi_rlog *log = *logp;
	struct psi_rlog_blk *b, *last;
	size_t room = 0;
	uint32_t cap;

	if (!log) {
		log = psi_zalloc(sizeof(*log));
		if (!log)
			return -ENOMEM;
		log->own_bytes = psi_alloc_charge(sizeof(*log));
		*logp = log;
	}
	last = log->tail;

	if (last) {
		room = last->cap - log->tpos;
		while (last->next) {
			last = last->next;
			room += last->cap;
		}
	}
	if (room >= n)
		return 0;
	cap = last ? (last->cap < RLOG_BLK_MAX / 2 ? 2 * last->cap : RLOG_BLK_MAX) : RLOG_BLK_MIN;
	if (n - room > cap) {
		if (n - room > UINT32_MAX / 2)
			return -ENOMEM;
		cap = (uint32_t)(n - room);
	}
	b = psi_alloc(blk_size(cap));
	if (!b)
		return -ENOMEM; /* a log made here stays, empty: psi_rlog_trim() */
	b->next = NULL;
	b->cap = cap;
	log->own_bytes += psi_alloc_charge(blk_size(cap));
	if (last) {
		last->next = b;
	} else {
		log->head = log->tail = b;
		log->hpos = log->tpos = 0;
	}
	return 0;
}

void psi_rlog_add(struct psi_rlog *log, void *e)
{
	if (log->tpos == log->tail->cap) {
		log->tail = log->tail->next; /* reserved */
		log->tpos = 0;
	}
	log->tail->e[log->tpos++] = e;
	log->added++;
}

void psi_rlog_mark(struct psi_rlog *log, uint64_t cookie)
{
	struct psi_rlog_mark *m;

	if (log->added == log->marked)
		return;
	log->marked = log->added;
	m = log->mn ? &log->mark[(log->mfirst + log->mn - 1) % PSI_RLOG_MARKS] : NULL;
	/*
	 * A later cookie than the last mark's needs a mark of its own; with
	 * none left, the last one covers the new entries too and waits for
	 * the later grace period.
	 */
	if (!m || (m->cookie != cookie && log->mn < PSI_RLOG_MARKS))
		m = &log->mark[(log->mfirst + log->mn++) % PSI_RLOG_MARKS];
	m->pos = log->added;
	m->bytes = log->added_bytes;
	m->cookie = cookie;
}

bool psi_rlog_ripen(struct psi_rlog *log, const struct psi_reclaimer *rc)
{
	bool some = false;

	while (log->mn && psi_reclaim_poll_done(rc, log->mark[log->mfirst].cookie)) {
		log->ripe = log->mark[log->mfirst].pos;
		log->ripe_bytes = log->mark[log->mfirst].bytes;
		log->mfirst = (log->mfirst + 1) % PSI_RLOG_MARKS;
		log->mn--;
		some = true;
	}
	return some;
}

void psi_rlog_ripen_upto(struct psi_rlog *log, uint64_t pos, uint64_t bytes)
{
	if (pos > log->ripe) {
		log->ripe = pos;
		log->ripe_bytes = bytes;
	}
	if (log->marked < pos)
		log->marked = pos;
	while (log->mn && log->mark[log->mfirst].pos <= pos) {
		log->mfirst = (log->mfirst + 1) % PSI_RLOG_MARKS;
		log->mn--;
	}
}

void *psi_rlog_take(struct psi_rlog *log)
{
	void *e;

	if (!log || log->taken == log->ripe)
		return NULL;
	if (log->hpos == log->head->cap) {
		struct psi_rlog_blk *b = log->head;

		log->head = b->next;
		log->hpos = 0;
		blk_free(log, b);
	}
	e = log->head->e[log->hpos++];
	if (++log->taken == log->added && log->head == log->tail) {
		/* Empty: its block is filled from the start again. */
		log->hpos = log->tpos = 0;
	}
	return e;
}

void *psi_rlog_peek(const struct psi_rlog *log)
{
	if (!log || log->taken == log->ripe)
		return NULL;
	if (log->hpos == log->head->cap)
		return log->head->next->e[0];
	return log->head->e[log->hpos];
}

void psi_rlog_trim(struct psi_rlog **logp)
{
	struct psi_rlog *log = *logp;
	struct psi_rlog_blk *b, *next;

	if (!log || log->taken != log->added)
		return;
	for (b = log->head; b; b = next) {
		next = b->next;
		psi_free(b);
	}
	psi_free(log);
	*logp = NULL;
}

bool psi_rlog_sane(const struct psi_rlog *log)
{
	if (!log)
		return true;
	return log->taken <= log->ripe && log->ripe <= log->marked && log->marked <= log->added &&
	       log->taken_bytes <= log->ripe_bytes && log->ripe_bytes <= log->added_bytes &&
	       (log->added == log->taken || log->head) && log->own_bytes >= psi_alloc_charge(sizeof(*log));
}
