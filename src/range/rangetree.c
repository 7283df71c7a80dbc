// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The range tree's update algorithm, after the kernel's
 * shared_policy_replace(): remove what [start, end) covers, trim what it
 * overlaps, split what covers it, insert the new range.  Ranges are never
 * merged.  psi_rangetree_set() finds every range it changes by key, through the
 * tree core's path operations, and changes the tree in place.
 *
 * Invariants (psi_rangetree_check()): ranges are non-empty, ordered by start,
 * pairwise disjoint (so their ends are ordered too), each holds a non-NULL,
 * non-DEFAULT policy with a positive count, and @count is the node count.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy_internal.h"
#include "rangetree.h"

static inline struct ps_range *rb_range(struct ps_rb_node *n)
{
	return n ? psi_container_of(n, struct ps_range, rb) : NULL;
}

void psi_rangetree_init(struct ps_rtree *t)
{
	t->root.node = NULL;
	t->count = 0;
}

/*
 * The leftmost range whose end is above @start (the first that can
 * overlap [start, ...)), with @path ending at it.  Ranges are disjoint and
 * ordered, so their ends are ordered like their starts.
 */
static struct ps_range *first_ending_after(const struct ps_rtree *t, uint64_t start,
		struct psi_rb_path *path)
{
	struct ps_rb_node *n = t->root.node;
	int best_depth = 0;

	path->depth = 0;
	while (n) {
		int right = !(rb_range(n)->end > start);

		psi_rb_path_push(path, n, right);
		if (!right)
			best_depth = path->depth;
		n = n->child[right];
	}
	path->depth = best_depth;
	return best_depth ? rb_range(path->node[best_depth - 1]) : NULL;
}

/* Link @nr (payload set) by its start; ranges never overlap, so starts are unique. */
static void rtree_insert(struct ps_rtree *t, struct ps_range *nr)
{
	struct psi_rb_path path;
	struct ps_rb_node *n = t->root.node;

	path.depth = 0; /* only the steps taken are read: no need to clear 1 KiB of arrays */
	while (n) {
		int dir = nr->start >= rb_range(n)->start;

		psi_rb_path_push(&path, n, dir);
		n = n->child[dir];
	}
	psi_rb_insert(&t->root, &path, &nr->rb);
	PSI_WRITE_ONCE(t->count, t->count + 1);
}

/* A range off the caller's list of spares (PSI_RANGETREE_SET_MAX_NEW suffice). */
static struct ps_range *spare_take(struct psi_range_list *spares)
{
	struct ps_range *r = psi_range_list_pop(spares);

	if (!r) {
		/* The caller gave fewer spares than a set takes: a bug, not a state to go on in. */
		fprintf(stderr, "polstore: range tree update ran out of preallocated ranges\n");
		abort();
	}
	return r;
}

/* Fill a spare range; the release store that links it publishes these fields. */
static struct ps_range *new_range(struct psi_range_list *spares, uint64_t start, uint64_t end,
		struct ps_policy *pol)
{
	struct ps_range *r = spare_take(spares);

	PSI_WRITE_ONCE(r->start, start);
	PSI_WRITE_ONCE(r->end, end);
	if (pol)
		psi_policy_store_get(pol);
	PSI_WRITE_ONCE(r->pol, pol);
	PSI_WRITE_ONCE(r->node_hint, _ps_policy_hint(pol));
	return r;
}

/*
 * shared_policy_replace() on @t.  Each loop turn finds the first range
 * still overlapping [cursor, end) afresh (O(log n)): after a left trim its
 * end is @start, after a removal it is gone, so the search moves on.
 *
 * When a new range goes in, the first range [start, end) covers whole (the
 * victim) is not removed but becomes the new range: its node keeps its
 * place in the tree (its predecessor ends at or before @start by then, its
 * successors start at or after @end), so the set changes one node instead
 * of erasing and inserting with two rebalancings.  The victim's old policy
 * reference goes to @removed on the spare that the new range would have
 * taken, so it is dropped exactly when an erased range's would be.  The
 * victim is kept by pointer: an erase after it relinks nodes (the victim
 * may take an erased node's place) but never moves a range.
 */
size_t psi_rangetree_set(struct ps_rtree *t, uint64_t start, uint64_t end, struct ps_policy *pol,
		struct psi_range_list *spares, struct psi_range_list *removed)
{
	bool add = pol && pol->mode != PS_MPOL_DEFAULT;
	struct ps_range *r, *victim = NULL;
	uint64_t cursor = start;
	struct psi_rb_path path;
	size_t unlinked = 0;

	while ((r = first_ending_after(t, cursor, &path)) && r->start < end) {
		if (r->start >= start) {
			if (r->end <= end) {
				if (add && !victim) {
					/* Kept for the new range; the search goes on past it. */
					victim = r;
					cursor = r->end;
					if (cursor >= end)
						break;
					continue;
				}
				/* Inside: drop it (its reference goes with it). */
				r = rb_range(psi_rb_erase(&t->root, &path));
				PSI_WRITE_ONCE(t->count, t->count - 1);
				psi_range_list_push(removed, r);
				unlinked++;
				continue;
			}
			/* Sticks out on the right: keep [end, r->end). */
			PSI_WRITE_ONCE(r->start, end);
			break;
		}
		if (r->end > end) {
			/* Covers both edges: keep [r->start, start) here, re-add [end, r->end). */
			struct ps_range *tail = new_range(spares, end, r->end, r->pol);

			PSI_WRITE_ONCE(r->end, start);
			rtree_insert(t, tail);
			break;
		}
		/* Sticks out on the left: keep [r->start, start). */
		PSI_WRITE_ONCE(r->end, start);
	}
	if (!add)
		return unlinked;
	if (!victim) {
		rtree_insert(t, new_range(spares, start, end, pol));
		return unlinked;
	}
	{
		struct ps_range *old = new_range(spares, 0, 0, NULL);

		r = victim;
		old->pol = r->pol; /* the old reference, dropped like an erased range's */
		psi_range_list_push(removed, old);
		psi_policy_store_get(pol);
		PSI_WRITE_ONCE(r->pol, pol);
		PSI_WRITE_ONCE(r->node_hint, _ps_policy_hint(pol));
		PSI_WRITE_ONCE(r->start, start);
		PSI_WRITE_ONCE(r->end, end);
	}
	return unlinked;
}

int psi_rangetree_foreach(const struct ps_rtree *t, ps_foreach_fn fn, void *arg)
{
	struct psi_rb_iter it;
	struct ps_rb_node *n;
	int ret;

	for (n = psi_rb_iter_first(&it, &t->root); n; n = psi_rb_iter_next(&it)) {
		struct ps_range *r = rb_range(n);

		ret = fn(r->start, r->end, r->pol, arg);
		if (ret)
			return ret;
	}
	return 0;
}

int psi_rangetree_check(const struct ps_rtree *t, const char **why)
{
	const struct ps_range *prev = NULL;
	struct psi_rb_iter it;
	struct ps_rb_node *n;
	long count = psi_rb_check(&t->root, why);

	if (count < 0)
		return -EUCLEAN;
	if ((size_t)count != t->count) {
		*why = "range count does not match the tree";
		return -EUCLEAN;
	}
	for (n = psi_rb_iter_first(&it, &t->root); n; n = psi_rb_iter_next(&it)) {
		const struct ps_range *r = rb_range(n);

		if (r->start >= r->end) {
			*why = "empty or inverted range";
			return -EUCLEAN;
		}
		if (prev && prev->end > r->start) {
			*why = "ranges overlap or are out of order";
			return -EUCLEAN;
		}
		if (!r->pol || r->pol->mode == PS_MPOL_DEFAULT) {
			*why = "range without a policy, or with a DEFAULT one";
			return -EUCLEAN;
		}
		if (psi_policy_stores(r->pol) <= 0) {
			*why = "range holds a policy that counts no store reference";
			return -EUCLEAN;
		}
		if (r->node_hint != _ps_policy_hint(r->pol)) {
			*why = "range's node hint does not match its policy";
			return -EUCLEAN;
		}
		prev = r;
	}
	return 0;
}

/* Post-order unlink: no rebalancing needed as the whole tree goes. */
static void clear_subtree(struct ps_rb_node *n, struct psi_range_list *removed)
{
	while (n) {
		struct ps_rb_node *left = n->child[0];

		clear_subtree(n->child[1], removed);
		psi_range_list_push(removed, rb_range(n));
		n = left;
	}
}

void psi_rangetree_clear(struct ps_rtree *t, struct psi_range_list *removed)
{
	clear_subtree(t->root.node, removed);
	PSI_STORE_RELEASE(t->root.node, NULL);
	PSI_WRITE_ONCE(t->count, 0);
}

/* ---- seeks, windows and batches ---------------------------------------------- */

/*
 * A range spans two cache lines when malloc() put it across a boundary:
 * ask for both (a prefetch never faults).
 */
static inline void range_prefetch(const struct ps_rb_node *n)
{
	__builtin_prefetch(n);
	__builtin_prefetch((const char *)n + sizeof(struct ps_range) - 1);
}

/*
 * psi_rb_iter_next() for windows, prefetching.  Path-copied trees (rcu,
 * rcu-qsbr) scatter neighbours in memory, so a plain in-order walk waits
 * for a cache miss at nearly every step.  But the walk knows what comes:
 * a stacked node's right subtree is visited after everything above it on
 * the stack, starting with that subtree's left spine.  So when a node is
 * stacked its right child is asked for (@pf[i] follows that spine: the
 * deepest node of it asked for), and each step moves the spines of the two
 * top entries, the next to be descended, one node further down.  The loads
 * are the walk's own, made early and two at a time.
 */
struct window_iter {
	struct psi_rb_iter it;
	struct ps_rb_node *pf[PS_RB_MAX_DEPTH + 2];
};

static inline void window_push(struct window_iter *w, struct ps_rb_node *n)
{
	struct ps_rb_node *r = psi_rb_load_child(n, 1);

	if (r)
		range_prefetch(r);
	w->pf[w->it.depth] = r;
	w->it.stack[w->it.depth++] = n;
}

static inline void window_push_left(struct window_iter *w, struct ps_rb_node *n)
{
	while (n && w->it.depth < PS_RB_MAX_DEPTH + 2) {
		window_push(w, n);
		n = psi_rb_load_child(n, 0);
	}
}

static inline void window_advance(struct window_iter *w, int i)
{
	struct ps_rb_node *x = w->pf[i];

	if (x) {
		x = psi_rb_load_child(x, 0);
		if (x)
			range_prefetch(x);
		w->pf[i] = x;
	}
}

static inline struct ps_rb_node *window_next(struct window_iter *w)
{
	struct ps_rb_node *n;
	int d;

	if (!w->it.depth)
		return NULL;
	n = w->it.stack[--w->it.depth];
	window_push_left(w, psi_rb_load_child(n, 1));
	d = w->it.depth;
	if (d > 1)
		window_advance(w, d - 2);
	if (d > 0) {
		window_advance(w, d - 1);
		return w->it.stack[d - 1];
	}
	return NULL;
}

int psi_rangetree_foreach_range(const struct ps_rtree *t, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg)
{
	return psi_rangetree_foreach_range_from(psi_rb_load_root(&t->root), start, end, fn, arg);
}

int psi_rangetree_foreach_range_from(struct ps_rb_node *n, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg)
{
	struct window_iter w;
	int ret;

	/*
	 * Seek the first range ending after @start.  The nodes where the
	 * search goes left are exactly the in-order successors still ahead of
	 * it, deepest last: an iterator's stack.  A range containing @start
	 * ends the search (nothing before it ends after @start).
	 */
	w.it.depth = 0;
	while (n && w.it.depth < PS_RB_MAX_DEPTH) {
		struct ps_range *r = rb_range(n);

		if (r->end <= start) {
			n = psi_rb_load_child(n, 1);
			continue;
		}
		window_push(&w, n);
		if (r->start <= start)
			break;
		n = psi_rb_load_child(n, 0);
	}
	for (n = w.it.depth ? w.it.stack[w.it.depth - 1] : NULL; n; n = window_next(&w)) {
		struct ps_range *r = rb_range(n);

		if (r->start >= end)
			break;
		ret = fn(r->start, r->end, r->pol, arg);
		if (ret)
			return ret;
		/* The next range starts at or after this one's end: past the window. */
		if (r->end >= end)
			break;
	}
	return 0;
}
