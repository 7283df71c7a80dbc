// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The range tree's update algorithm, after the kernel's
 * shared_policy_replace(): remove what [start, end) covers, trim what it
 * overlaps, split what covers it, insert the new range.  Ranges are never
 * merged.
 *
 * Invariants (ps_rtree_check()): ranges are non-empty, ordered by start,
 * pairwise disjoint (so their ends are ordered too), each holds a non-NULL,
 * non-DEFAULT policy with a positive count, and @count is the node count.
 */
#include <errno.h>

#include "policy_internal.h"
#include "rangetree.h"

static inline struct ps_range *rb_range(struct ps_rb_node *n)
{
	return n ? ps_container_of(n, struct ps_range, rb) : NULL;
}

void ps_rtree_init(struct ps_rtree *t)
{
	t->root.node = NULL;
	t->count = 0;
}

static struct ps_range *list_pop(struct ps_range_list *l)
{
	struct ps_range *r = l->head;

	if (r)
		l->head = r->next_free;
	return r;
}

static void list_push(struct ps_range_list *l, struct ps_range *r)
{
	r->next_free = l->head;
	l->head = r;
}

/* The leftmost range whose end is above @start: the first that can overlap it. */
static struct ps_range *first_ending_after(const struct ps_rtree *t, uint64_t start)
{
	struct ps_rb_node *n = t->root.node;
	struct ps_range *best = NULL;

	while (n) {
		struct ps_range *r = rb_range(n);

		if (r->end > start) {
			best = r;
			n = n->child[0];
		} else {
			n = n->child[1];
		}
	}
	return best;
}

static void rtree_insert(struct ps_rtree *t, struct ps_range *nr)
{
	struct ps_rb_node *parent = NULL, *n = t->root.node;
	int dir = 0;

	while (n) {
		parent = n;
		dir = nr->start >= rb_range(n)->start;
		n = n->child[dir];
	}
	ps_rb_link(&t->root, &nr->rb, parent, dir);
	ps_rb_insert_color(&t->root, &nr->rb);
	PS_WRITE_ONCE(t->count, t->count + 1);
}

static void rtree_remove(struct ps_rtree *t, struct ps_range *r, struct ps_range_list *removed)
{
	ps_rb_erase(&t->root, &r->rb);
	PS_WRITE_ONCE(t->count, t->count - 1);
	list_push(removed, r);
}

/* Fill a spare range; the release store that links it publishes these fields. */
static struct ps_range *new_range(struct ps_range_list *spares, uint64_t start, uint64_t end,
		struct ps_policy *pol)
{
	struct ps_range *r = list_pop(spares);

	PS_WRITE_ONCE(r->start, start);
	PS_WRITE_ONCE(r->end, end);
	PS_WRITE_ONCE(r->pol, ps_policy_get(pol));
	return r;
}

void ps_rtree_set(struct ps_rtree *t, uint64_t start, uint64_t end, struct ps_policy *pol,
		struct ps_range_list *spares, struct ps_range_list *removed)
{
	struct ps_range *r = first_ending_after(t, start);

	while (r && r->start < end) {
		struct ps_range *next = rb_range(ps_rb_next(&r->rb));

		if (r->start >= start) {
			if (r->end <= end) {
				rtree_remove(t, r, removed); /* inside: drop it */
			} else {
				PS_WRITE_ONCE(r->start, end); /* sticks out on the right */
				break;
			}
		} else if (r->end > end) {
			/* Covers both edges: keep [r->start, start) here, re-add [end, r->end). */
			struct ps_range *tail = new_range(spares, end, r->end, r->pol);

			PS_WRITE_ONCE(r->end, start);
			rtree_insert(t, tail);
			break;
		} else {
			PS_WRITE_ONCE(r->end, start); /* sticks out on the left */
		}
		r = next;
	}
	if (pol && pol->mode != PS_MPOL_DEFAULT)
		rtree_insert(t, new_range(spares, start, end, pol));
}

int ps_rtree_foreach(const struct ps_rtree *t, ps_foreach_fn fn, void *arg)
{
	struct ps_rb_node *n;
	int ret;

	for (n = ps_rb_first(&t->root); n; n = ps_rb_next(n)) {
		struct ps_range *r = rb_range(n);

		ret = fn(r->start, r->end, r->pol, arg);
		if (ret)
			return ret;
	}
	return 0;
}

int ps_rtree_check(const struct ps_rtree *t, const char **why)
{
	const struct ps_range *prev = NULL;
	struct ps_rb_node *n;
	long count = ps_rb_check(&t->root, why);

	if (count < 0)
		return -EUCLEAN;
	if ((size_t)count != t->count) {
		*why = "range count does not match the tree";
		return -EUCLEAN;
	}
	for (n = ps_rb_first(&t->root); n; n = ps_rb_next(n)) {
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
		if (ps_policy_refcount(r->pol) <= 0) {
			*why = "range holds a policy whose count is not positive";
			return -EUCLEAN;
		}
		prev = r;
	}
	return 0;
}

bool ps_rtree_same(const struct ps_rtree *a, const struct ps_rtree *b)
{
	struct ps_rb_node *x = ps_rb_first(&a->root), *y = ps_rb_first(&b->root);

	for (; x && y; x = ps_rb_next(x), y = ps_rb_next(y)) {
		const struct ps_range *ra = rb_range(x), *rb = rb_range(y);

		if (ra->start != rb->start || ra->end != rb->end || ra->pol != rb->pol)
			return false;
	}
	return !x && !y && a->count == b->count;
}

/* Post-order unlink: no rebalancing needed as the whole tree goes. */
static void clear_subtree(struct ps_rb_node *n, struct ps_range_list *removed)
{
	while (n) {
		struct ps_rb_node *left = n->child[0];

		clear_subtree(n->child[1], removed);
		list_push(removed, rb_range(n));
		n = left;
	}
}

void ps_rtree_clear(struct ps_rtree *t, struct ps_range_list *removed)
{
	clear_subtree(t->root.node, removed);
	PS_STORE_RELEASE(t->root.node, NULL);
	PS_WRITE_ONCE(t->count, 0);
}

int ps_range_list_fill(struct ps_range_list *list, int n)
{
	struct ps_range_list fresh = { NULL };
	struct ps_range *r;
	int have = 0;

	for (r = list->head; r; r = r->next_free)
		have++;
	for (; have < n; have++) {
		r = _ps_zalloc(sizeof(*r));
		if (!r) {
			ps_range_list_free(&fresh);
			return -ENOMEM;
		}
		list_push(&fresh, r);
	}
	while ((r = list_pop(&fresh)))
		list_push(list, r);
	return 0;
}

void ps_range_list_free(struct ps_range_list *list)
{
	struct ps_range *r;

	while ((r = list_pop(list))) {
		ps_policy_put(r->pol);
		_ps_free(r);
	}
}
