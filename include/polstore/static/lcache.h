/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The lookup cache of the RCU stores' readers: each thread keeps the last
 * range it found in each of PS_LC_WAYS stores (a way per store, picked by
 * the store's address), so that a key asked for again and again, the fault
 * path's common case, costs a few loads and no search of the read index.
 *
 * What validates an entry.  Every RCU store has an id that no other store
 * of the process ever has (a global count, from 1: a store created where
 * a destroyed one was has another) and a publication count, @rd.gen
 * (polstore/static/store.h; twice the change generation), that its writer
 * makes odd before it publishes a change to the read index and even again
 * after (src/sync/lookup_cache.h).  An entry holds the store's id
 * and the even count it was filled at, with what the index held then for
 * one range: its bounds, policy and node hint.  A lookup, inside its
 * read-side section, loads the store's count; the entry answers only when
 * the id and the count are the entry's and the key lies in its range.
 *
 * Why that answer is right, and its policy alive.  The entry was filled
 * only when the count read before and after the search was the same even
 * value (a seqlock's read), so it holds what the index held at that
 * version.  The writer's odd count is stored before anything of a change
 * is published (a release fence between them), and everything it
 * unpublishes is retired after that, through a grace period that begins
 * after a full fence (src/sync/rcu_store.c).  So a section that loads
 * the entry's count again sees the version still current at that load
 * (the lookup linearizes there), and any change after it retires the
 * range's policy reference only after this section ends, as for a reader
 * that loaded the index's root before the change.  The count is 64 bits:
 * it does not wrap.
 *
 * A signal handler that looks up on the thread meets its entries as the
 * interrupted code left them: a fill marks the entry BUSY first and names
 * its store last, so a handler's lookup finds a whole entry or none, and
 * fills none that is being filled.
 *
 * Why an entry kept across sections and lifetimes is harmless.  It holds
 * no reference and is read only after it is validated: a set, or a store's
 * destroy (deferred or not) and a new store at its address, change the
 * count or the id an entry must match.  A forked child copies the stores
 * and the thread's entries together.  A thread's entries are its own
 * thread-local storage, which no other thread reads and which goes with
 * it; a new thread's start zeroed (id 0 names no store; length 0 holds
 * no key).
 *
 * Not an API: see polstore/static/rtree.h.  Every field read here is in
 * the identity of polstore/static/layout.h.
 */
#ifndef POLSTORE_STATIC_LCACHE_H
#define POLSTORE_STATIC_LCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/export.h>
#include <polstore/static/atomic.h>
#include <polstore/static/index.h>
#include <polstore/static/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stores a thread's cache holds at once: a power of two. */
#define PS_LC_WAYS 4
/* An entry's @cstamp before a miss that may fill it: no counts' stamp. */
#define PS_LC_UNFILLED UINT64_MAX
/* An entry's @id while it is filled: no store's (ids count from 1). */
#define _PS_LC_BUSY UINT64_MAX

/*
 * One store's entry, a cache line: the range [start, start + len) at
 * count @gen (even).  Then what counts an access of that range when the
 * store counts them (src/store/counts.c): the count of the calling
 * thread's own slot for it, valid while @cstamp is the stamp of the
 * store's counts; every fill of the entry clears @cstamp (0 is no stamp;
 * nor is PS_LC_UNFILLED, which a counted lookup stores before a miss to
 * learn whether the miss filled the entry).
 */
struct _ps_lc_entry {
	uint64_t id;  /* the store's id; 0: empty; _PS_LC_BUSY: being filled */
	uint64_t gen;
	uint64_t start;
	uint64_t len;
	struct ps_policy *pol;
	int hint;
	uint64_t cstamp;
	uint64_t *ccount;
} __attribute__((aligned(64)));

struct _ps_lc {
	struct _ps_lc_entry e[PS_LC_WAYS];
};

/* The calling thread's cache (src/sync/lookup_cache.c); initial-exec: no call to reach it. */
PS_API extern __thread struct _ps_lc _ps_lc_tls __attribute__((tls_model("initial-exec")));

/*
 * The way of store @s in the calling thread's cache: picked by its
 * address, which the caller holds in a register (no load before the
 * entry's), and validated by its id.
 */
static inline __attribute__((always_inline)) struct _ps_lc_entry *_ps_lc_way(
		const struct ps_store *s)
{
	uintptr_t a = (uintptr_t)s;

	return &_ps_lc_tls.e[((a >> 6) ^ (a >> 9) ^ (a >> 12)) & (PS_LC_WAYS - 1)];
}

/*
 * The hit: the calling thread's entry for @s, with the policy in *@pol and
 * the node hint in *@hint, when it holds @s's current version of a range
 * holding @idx; NULL, with that version's count in *@gen, else.
 */
static inline __attribute__((always_inline)) struct _ps_lc_entry *_ps_lc_hit(
		const struct ps_store *s, uint64_t idx, struct ps_policy **pol, int *hint,
		uint64_t *gen)
{
	struct _ps_lc_entry *e = _ps_lc_way(s);

	/* Pairs with the writer's release of the even count (and its fence after the odd one). */
	*gen = _PS_LOAD_ACQUIRE(s->rd.gen);
	if (__builtin_expect(e->id == _PS_READ_ONCE(s->lc.id) && e->gen == *gen &&
				    idx - e->start < e->len, 1)) {
		*hint = e->hint;
		*pol = e->pol;
		return e;
	}
	return NULL;
}

/*
 * The miss: search the index from its root @h (loaded with an acquire
 * load after @gen was), and fill the thread's entry for @s when the count
 * read before (@gen) and after the search is one even value.  As
 * _ps_lc_lookup().  Out of line: the hit's caller saves no registers for
 * the search.
 */
static __attribute__((noinline, unused)) struct ps_policy *_ps_lc_miss(const struct ps_store *s,
		const struct ps_ix_node *h, uint64_t idx, int *hint, uint64_t gen)
{
	struct _ps_lc_entry *e = _ps_lc_way(s);
	const struct ps_ix_leaf *l;
	struct ps_policy *pol;
	uint64_t start, end;
	int i, hi;

	i = _ps_ix_find(h, idx, &l);
	if (i < 0)
		return NULL;
	start = _PS_READ_ONCE(_PS_IX_START(l)[i]);
	end = _PS_READ_ONCE(_PS_IX_END(l)[i]);
	hi = _PS_READ_ONCE(_PS_IX_HINT(l)[i]);
	pol = _PS_LOAD_ACQUIRE(_PS_IX_POL(l)[i]);
	*hint = hi;
	/* Orders the search's loads before the count's re-read (a seqlock's read). */
	_PS_FENCE(ACQUIRE);
	/*
	 * A signal handler's lookup on this thread may run between any two
	 * stores of the fill: the entry names no store meanwhile (BUSY), and
	 * such a lookup neither answers from it nor fills it, so no entry
	 * mixes two fills.
	 */
	if (!(gen & 1) && _PS_READ_ONCE(s->rd.gen) == gen && e->id != _PS_LC_BUSY) {
		e->id = _PS_LC_BUSY;
		_PS_SIGNAL_FENCE(SEQ_CST);
		e->gen = gen;
		e->start = start;
		e->len = end - start;
		e->pol = pol;
		e->hint = hi;
		e->cstamp = 0;
		_PS_SIGNAL_FENCE(SEQ_CST);
		e->id = _PS_READ_ONCE(s->lc.id);
	}
	return pol;
}

/*
 * RCU, RCU_QSBR, inside a read-side section: the policy of the range
 * holding @idx, and its node hint in *@hint; NULL, *@hint untouched, in a
 * gap.  What the read index holds (_ps_ix_find()), from the calling
 * thread's cache when it holds the store's current version of that range.
 */
static inline __attribute__((always_inline)) struct ps_policy *_ps_lc_lookup(
		const struct ps_store *s, uint64_t idx, int *hint)
{
	struct ps_policy *pol;
	uint64_t gen;

	if (__builtin_expect(_ps_lc_hit(s, idx, &pol, hint, &gen) != NULL, 1))
		return pol;
	return _ps_lc_miss(s, _PS_LOAD_ACQUIRE(s->ix.node), idx, hint, gen);
}

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_STATIC_LCACHE_H */
