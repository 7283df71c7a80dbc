/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The range tree: non-overlapping [start, end) ranges, each holding one
 * policy reference, kept in a red-black tree ordered by start.  This is the
 * one tree core every synchronisation variant uses; it knows nothing about
 * locks.  Writers are serialised by the caller.
 *
 * psi_rangetree_set() changes the tree in place (rangetree.c): under the
 * store's lock (spin, rwlock), under a sequence count (seqlock), or under
 * the writer's lock while readers go through the read index (rcu,
 * rcu-qsbr; rangeindex.h).
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
 *           policy reference, and a spare that carries the old reference of
 *           a range the set reused in place; the caller frees them with
 *           psi_range_list_free() once no reader can reach them
 *
 * Cannot fail.  @pol NULL or DEFAULT only removes.  Return: the ranges
 * unlinked from the tree (the carrier of a reused range's reference is
 * not one).
 */
size_t psi_rangetree_set(struct ps_rtree *t, uint64_t start, uint64_t end, struct ps_policy *pol,
		struct psi_range_list *spares, struct psi_range_list *removed);

/** psi_rangetree_foreach() - in-order walk of a tree no writer is changing. */
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
 * in-order walk from there.  For a tree no writer is changing.
 */
int psi_rangetree_foreach_range(const struct ps_rtree *t, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);

/** psi_rangetree_foreach_range_from() - the same from a root loaded already (psi_rb_load_root()). */
int psi_rangetree_foreach_range_from(struct ps_rb_node *root, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);

#endif /* POLSTORE_SRC_RANGETREE_H */
