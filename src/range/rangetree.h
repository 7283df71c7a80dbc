/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The range tree: non-overlapping [start, end) ranges, each holding one
 * policy reference, kept in a red-black tree ordered by start.  This is the
 * one tree core every synchronisation variant uses; it knows nothing about
 * locks.  Writers are serialised by the caller.
 *
 * Two ways to update, one algorithm (rangetree.c):
 *  - in place, psi_rangetree_set(): the published tree changes under its lock
 *    (spin, rwlock) or under a sequence count (seqlock);
 *  - copy on write, psi_rangetree_cow_*(): an update copies the ranges it
 *    changes (and those between them and the highest one), shares every
 *    other node with the published tree, and is published by one release
 *    store into one child slot or the root (rcu, rcu-qsbr; rbtree.h).
 *    A published range's bounds and policy are never written.
 */
#ifndef POLSTORE_SRC_RANGETREE_H
#define POLSTORE_SRC_RANGETREE_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/store.h>

#include "rangepool.h"
#include "rbtree.h"

/* Most ranges one set takes for itself: the new range and a split tail. */
#define PSI_RANGETREE_SET_MAX_NEW 2

/**
 * psi_rangetree_lookup_from() / psi_rangetree_lookup() - the range containing @idx,
 * from a root loaded already (psi_rb_load_root()) or from @t's
 *
 * Safe for a lockless reader of a tree an in-place writer may be changing:
 * every load is atomic and the walk stops after PS_RB_MAX_DEPTH steps
 * (returning PS_RTREE_OVERRUN).  Such a reader must validate the result.
 * A reader of a published copy-on-write version never sees the overrun.
 * Return: the range, NULL, or PS_RTREE_OVERRUN.
 */
static inline struct ps_range *psi_rangetree_lookup_from(struct ps_rb_node *n, uint64_t idx)
{
	return _ps_rtree_walk(n, idx);
}

static inline struct ps_range *psi_rangetree_lookup(const struct ps_rtree *t, uint64_t idx)
{
	return psi_rangetree_lookup_from(psi_rb_load_root(&t->root), idx);
}

void psi_rangetree_init(struct ps_rtree *t);

/**
 * psi_rangetree_set() - apply shared_policy_replace() semantics to one tree, in place
 * @spares: at least PSI_RANGETREE_SET_MAX_NEW preallocated ranges; those used
 *          are taken off the list
 * @removed: receives the ranges unlinked from the tree, each with its
 *           policy reference; the caller frees them with
 *           psi_range_list_free() once no reader can reach them
 *
 * Cannot fail.  @pol NULL or DEFAULT only removes.
 */
void psi_rangetree_set(struct ps_rtree *t, uint64_t start, uint64_t end, struct ps_policy *pol,
		struct psi_range_list *spares, struct psi_range_list *removed);

/*
 * The memory copy-on-write updates draw on, kept by the caller between
 * them (sync_cow-impl.h: one per writing thread).  Before each operation of the
 * tree an update reserves its worst case here (psi_rangetree_cow_mem_reserve()),
 * so that running short stops it between two operations, never inside
 * one; taken ranges and references are noted so that the update can be
 * thrown away whole.
 */
struct psi_rangetree_cow_mem {
	struct psi_range_vec spares;    /* free ranges */
	struct psi_range_vec used;      /* ranges the current update took */
	struct ps_policy **refs;       /* references it took, [0, nrefs) */
	size_t nrefs, refs_cap;
	struct psi_rb_undo *undo;       /* its colour log, [0, nundo) */
	size_t nundo, undo_cap;
	size_t peak;                   /* the most spares one reservation asked for (the caller resets it) */
	/* Atomic: true from just before publication until @used is the tree's (fork: see the child). */
	bool publishing;
	/* Optional: put up to @want spares in @spares from elsewhere before allocating. */
	void (*refill)(struct psi_rangetree_cow_mem *m, size_t want);
	/* Room kept in @spares beyond a reservation, for @refill to bring a batch. */
	size_t refill_batch;
};

/**
 * psi_rangetree_cow_mem_reserve() - room for @ranges more ranges, @refs more
 * references and @paints more undo entries
 * Return: 0, or -ENOMEM (what was allocated stays: spares are no state).
 */
int psi_rangetree_cow_mem_reserve(struct psi_rangetree_cow_mem *m, size_t ranges, size_t refs,
		size_t paints);

/** psi_rangetree_cow_mem_trim() - free the spares beyond @keep (between updates). */
void psi_rangetree_cow_mem_trim(struct psi_rangetree_cow_mem *m, size_t keep);

/** psi_rangetree_cow_mem_free() - free everything (between updates). */
void psi_rangetree_cow_mem_free(struct psi_rangetree_cow_mem *m);

/*
 * One copy-on-write update: any number of sets applied to the tree as the
 * update sees it, then published at once.
 *
 * References: a policy reference belongs to a range, not to a node.  When
 * a published range is copied, the copy takes the reference over and the
 * original goes to @replaced: it is freed after a grace period without
 * touching its policy (a reader that found it is protected by the
 * reference the copy holds, and if the copy is removed later, that removal
 * waits for its own grace period, which waits for this reader too).  A
 * range the update removes goes to @removed and drops its reference after
 * a grace period.
 */
struct psi_rangetree_cow {
	struct psi_rb_tx tx;
	struct ps_rb_root root;          /* the update's own root pointer */
	size_t count;                    /* the range count the update leaves */
	size_t published;                /* the published tree's range count */
	int inserts;                     /* insertions reserved so far: each may add a level */
	struct psi_rangetree_cow_mem *mem;
	size_t copies;                   /* published ranges copied so far */
	struct psi_range_list replaced;   /* published ranges copied: no reference */
	struct psi_range_list removed;    /* ranges removed: each with its reference */
};

/** psi_rangetree_cow_begin() - start an update of @t with generation @gen (> every earlier one). */
void psi_rangetree_cow_begin(struct psi_rangetree_cow *c, const struct ps_rtree *t, uint64_t gen,
		struct psi_rangetree_cow_mem *mem);

/**
 * psi_rangetree_cow_set() - psi_rangetree_set() in the update
 *
 * Writes nothing a reader can reach but colours, which no reader loads.
 * Return: true; false when memory ran out, between two operations of the
 * tree: the update must then be thrown away (psi_rangetree_cow_abort()).
 */
bool psi_rangetree_cow_set(struct psi_rangetree_cow *c, uint64_t start, uint64_t end, struct ps_policy *pol);

/**
 * psi_rangetree_cow_abort() - throw an unpublished update away
 *
 * The colours it wrote are put back, the ranges it took freed, the
 * references it took put; nothing else published was written.
 */
void psi_rangetree_cow_abort(struct psi_rangetree_cow *c);

/**
 * psi_rangetree_cow_publish() - make the update the tree readers see
 * @at_root: publish by a store of the root, copying the nodes above the
 *           update's changes (a walk that must see one version is on)
 *
 * One release store (psi_rb_publish()): a reader that loads it (acquire)
 * sees every node below it initialised.  The count follows; it is a hint
 * for readers (ps_store_count()).  @at_root needs psi_rangetree_cow_ready_publish()
 * first.  Return: true when the root was stored.
 */
bool psi_rangetree_cow_publish(struct psi_rangetree_cow *c, struct ps_rtree *t, bool at_root);

/**
 * psi_rangetree_cow_ready_publish() - reserve, before publication, the copies a
 * publication at the root takes (@at_root) and @extra spares more
 * Return: 0, or -ENOMEM: the update must be thrown away.
 */
int psi_rangetree_cow_ready_publish(struct psi_rangetree_cow *c, bool at_root, size_t extra);

/** psi_rangetree_foreach() - in-order walk of a tree no writer is changing (or a published version). */
int psi_rangetree_foreach(const struct ps_rtree *t, ps_foreach_fn fn, void *arg);

/** psi_rangetree_check() - rb properties, order, no overlap, count, policies. */
int psi_rangetree_check(const struct ps_rtree *t, const char **why);

/** psi_rangetree_clear() - unlink every range onto @removed (tree becomes empty). */
void psi_rangetree_clear(struct ps_rtree *t, struct psi_range_list *removed);

/* ---- seeks, windows and batches ---- */

/**
 * psi_rangetree_next_from() / psi_rangetree_next() - the first range that ends after
 * @idx, from a root loaded already (psi_rb_load_root()) or from @t's
 *
 * The range containing @idx, else the first one starting after it.  Safe
 * for lockless readers as psi_rangetree_lookup() is (atomic loads, at most
 * PS_RB_MAX_DEPTH steps, then PS_RTREE_OVERRUN; such a reader validates
 * what it found).  Ranges are disjoint and ordered, so their ends are
 * ordered like their starts: a range ending after @idx is the answer or
 * has it in its left subtree, and one that contains @idx is the answer.
 * Return: the range, NULL, or PS_RTREE_OVERRUN.
 */
static inline struct ps_range *psi_rangetree_next_from(struct ps_rb_node *n, uint64_t idx)
{
	struct ps_range *best = NULL;
	int steps;

	for (steps = 0; n && steps < PS_RB_MAX_DEPTH; steps++) {
		struct ps_range *r = psi_container_of(n, struct ps_range, rb);

		if (idx >= PSI_READ_ONCE(r->end)) {
			n = psi_rb_load_child(n, 1);
			continue;
		}
		best = r;
		if (idx >= PSI_READ_ONCE(r->start))
			return r;
		n = psi_rb_load_child(n, 0);
	}
	return n ? PS_RTREE_OVERRUN : best;
}

static inline struct ps_range *psi_rangetree_next(const struct ps_rtree *t, uint64_t idx)
{
	return psi_rangetree_next_from(psi_rb_load_root(&t->root), idx);
}

/**
 * psi_rangetree_foreach_range() - @fn on every range overlapping [start, end), ascending
 *
 * Ranges are passed whole (not clipped).  O(log n + k): one seek, then the
 * in-order walk from there.  For a tree no writer is changing (or a
 * published version).
 */
int psi_rangetree_foreach_range(const struct ps_rtree *t, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);

/** psi_rangetree_foreach_range_from() - the same from a root loaded already (psi_rb_load_root()). */
int psi_rangetree_foreach_range_from(struct ps_rb_node *root, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);

#endif /* POLSTORE_SRC_RANGETREE_H */
