/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store's object (rcu_store.h says which file does what): what
 * the store's files share, and the annotation keys of its grace periods.
 */
#ifndef POLSTORE_SRC_RCU_STORE_OBJECT_H
#define POLSTORE_SRC_RCU_STORE_OBJECT_H

#include <pthread.h>
#include <stdint.h>

#include "annotate.h"
#include "ixpool.h"
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

#endif /* POLSTORE_SRC_RCU_STORE_OBJECT_H */
