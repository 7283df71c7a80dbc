/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store (rcu_store.c says how it works), compiled once: the
 * liburcu flavour is a value, the hook table the store holds
 * (rcu_flavour.h).  What the three files of the store share:
 *  - rcu_store.c: create, destroy, the walks, next(), the checks;
 *  - rcu_store_update.c: an update and the memory it retires (the log,
 *    the kept leaves, the spare ranges, the sweep), synchronize;
 *  - sync_rcu.c, sync_qsbr.c: each flavour's read side, inlined (its
 *    sections are a few instructions), and its ops table.
 */
#ifndef POLSTORE_SRC_RCU_STORE_H
#define POLSTORE_SRC_RCU_STORE_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "annotate.h"
#include "ixpool.h"
#include "lookup_cache.h"
#include "rangeindex.h"
#include "rcu_flavour.h"
#include "rcu_reclaim.h"
#include "retire_log.h"
#include "store_internal.h"

/*
 * Annotation keys, one a flavour: every read-side section ends before a
 * grace period of its flavour after it does (rcu_store.c).
 */
extern char psi_rcu_store_done[PSI_FLAVOUR_COUNT];

/*
 * base.rd.seq is the publication count: odd while a set publishes
 * (psi_rcu_store_update()), which next() validates its walk with
 * (psi_rcu_store_next_find()).  It shares the tree's line, which sets
 * write anyway; lookups read the line of base.ix, which sets write only
 * when they replace the root, and base.lc's count (lookup_cache.h).
 */
struct psi_rcu_store {
	struct ps_store base;
	pthread_mutex_t wlock __ps_cacheline_aligned;
	/* Set at create: the flavour. */
	const struct psi_flavour *flavour;
	/* Under @wlock: */
	struct ps_store_stats stats;
	struct psi_rlog *log;          /* what sets retired, until taken back (NULL: nothing) */
	uint64_t logs;                 /* logs freed (rs_trim()): a log's positions are its own */
	struct psi_range_list spare;   /* spare ranges kept for the next update */
	size_t unreported;             /* bytes logged and not yet reported (psi_reclaim_poll_weigh()) */
	uint64_t ripened;              /* bytes the last grace period made ripe */
	unsigned pull;                 /* log entries the update in progress may still look through */
	/* Atomic: walks that must see one version (rcu_store.c's file comment). */
	unsigned walkers;
	/* Under @wlock: ripe full leaves kept for the next sets (rs_stash_put()). */
	struct ps_ix_node *stash;
	/* Written under @wlock, read without it: */
	size_t held;                   /* bytes of @log, @spare and @stash, for ps_store_memory() */
	size_t ix_bytes;               /* the read index's nodes */
	/*
	 * The nodes of a large index (ixpool.h), made when it first is; set
	 * once under @wlock (release), loaded (acquire) by those without it.
	 */
	struct psi_ix_pool *pool;
	bool nothread;                 /* entries logged while no reclaim thread could start */
	bool pooled;                   /* under @wlock: the published index may hold pooled nodes */
	/*
	 * The sweep (psi_rcu_store_sweep()): queued once on the reclaimer
	 * behind a grace period (@kicked), then released again and again
	 * until it stops.  @swept is true from its queueing (rs_kick(), one
	 * compare-and-swap) until it stops; both atomic.  The rest is the
	 * sweep's own.
	 */
	bool swept, kicked;
	struct psi_reclaim_item sweep;
	uint64_t sweep_sets;           /* stats.sets the sweep last saw */
	uint64_t sweep_ns;             /* when it first saw them (psi_reclaim_now_ns()) */
	uint64_t unreported_ns;        /* when it first saw @unreported waiting (0: not) */
	uint64_t sweep_busy;           /* since when its looks found @wlock held (0: not) */
};
_Static_assert(offsetof(struct psi_rcu_store, base) == 0, "psi_store_zalloc(): base first");
/* Every store pays for these lines, however few ranges it holds: keep them seven. */
_Static_assert(sizeof(struct psi_rcu_store) <= 7 * 64, "a small store's footprint");
_Static_assert(offsetof(struct ps_store, ix) + sizeof(struct ps_ix_root) <= 64,
		"the read index's root shares the first line with the entry points");

static inline struct psi_rcu_store *psi_rcu_store_of(struct ps_store *s)
{
	return psi_container_of(s, struct psi_rcu_store, base);
}

/* The published root of the read index: loaded first, then declared to the thread checkers. */
static inline struct ps_ix_node *psi_rcu_store_root(struct psi_rcu_store *rs)
{
	struct ps_ix_node *root = PSI_LOAD_ACQUIRE(rs->base.ix.node);

	/* Pairs with the publication in psi_rcu_store_update(). */
	PSI_ANNOTATE_HAPPENS_AFTER(&rs->base.rd.tree);
	return root;
}

/* Inside a section: from the thread's lookup cache, or the index (lookup_cache.h). */
static inline struct ps_policy *psi_rcu_store_lookup_pol(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;
	uint64_t gen;
	int hint;

	if (_ps_lc_hit(s, idx, &pol, &hint, &gen))
		return pol;
	return _ps_lc_miss(s, psi_rcu_store_root(psi_rcu_store_of(s)), idx, &hint, gen);
}

/* Inside a read-side section of flavour @id: the policy at @idx, with a reference, or NULL. */
static inline struct ps_policy *psi_rcu_store_get(struct ps_store *s, uint64_t idx,
		enum psi_flavour_id id)
{
	struct ps_policy *pol;

	/* The range holds its reference for our whole section: a plain increment is safe. */
	pol = _ps_policy_get(psi_rcu_store_lookup_pol(s, idx));
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[id]);
	(void)id;
	return pol;
}

bool psi_rcu_store_next_find(struct ps_store *s, uint64_t idx, struct psi_ix_hit *hit);

/*
 * Inside a read-side section of flavour @id: next() with a reference (the
 * range holds its own for the whole section).
 */
static inline int psi_rcu_store_next_get(struct ps_store *s, uint64_t idx, uint64_t *start,
		uint64_t *end, struct ps_policy **pol, enum psi_flavour_id id)
{
	struct psi_ix_hit hit;
	bool found = psi_rcu_store_next_find(s, idx, &hit);

	if (found) {
		*start = hit.start;
		*end = hit.end;
		*pol = _ps_policy_get(hit.pol);
	}
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[id]);
	(void)id;
	return found ? 0 : -ENOENT;
}

/* The operations both flavours share (struct ps_sync_ops says what each does). */
struct ps_store *psi_rcu_store_create(const struct psi_flavour *flavour);
void psi_rcu_store_destroy(struct ps_store *s);
const struct ps_policy *psi_rcu_store_lookup_borrow(struct ps_store *s, uint64_t idx);
int psi_rcu_store_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol);
int psi_rcu_store_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg);
int psi_rcu_store_foreach_range(struct ps_store *s, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);
int psi_rcu_store_check(struct ps_store *s, const char **why);
size_t psi_rcu_store_held(struct ps_store *s);
struct psi_lstat *psi_rcu_store_lock_stat(struct ps_store *s);
int psi_rcu_store_stats(struct ps_store *s, struct ps_store_stats *st);

/* rcu_store_update.c: */
int psi_rcu_store_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol);
int psi_rcu_store_update(struct ps_store *s, const struct ps_set_op *ops, size_t n);
void psi_rcu_store_synchronize(struct ps_store *s);
bool psi_rcu_store_set_may_wait(struct ps_store *s);
/* The sweep, the release function of @rs->sweep (rcu_store_update.c). */
void psi_rcu_store_sweep(struct psi_reclaim_item *item);
/* Under @wlock, at destroy (no reader, no set): free everything retired, spares, kept leaves. */
void psi_rcu_store_free_retired(struct psi_rcu_store *rs);
/* Under @wlock: whether the kept leaves are counted right and within their bounds. */
bool psi_rcu_store_stash_sane(struct psi_rcu_store *rs);

#endif /* POLSTORE_SRC_RCU_STORE_H */
