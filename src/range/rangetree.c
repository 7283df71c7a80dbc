// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The range tree's update algorithm, after the kernel's
 * shared_policy_replace(): remove what [start, end) covers, trim what it
 * overlaps, split what covers it, insert the new range.  Ranges are never
 * merged.  One algorithm (rtree_apply()) for both kinds of writer: it finds
 * every range it changes by key, through the tree core's path operations,
 * so it never holds a node across a change (copy on write, a change may
 * replace nodes by copies).
 *
 * Invariants (psi_rangetree_check()): ranges are non-empty, ordered by start,
 * pairwise disjoint (so their ends are ordered too), each holds a non-NULL,
 * non-DEFAULT policy with a positive count, and @count is the node count.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "annotate.h"
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
 * overlap [start, ...)), with @path ending at it, in the tree as @tx sees
 * it.  Ranges are disjoint and ordered, so their ends are ordered like
 * their starts.
 */
static struct ps_range *first_ending_after(const struct psi_rb_tx *tx, uint64_t start,
		struct psi_rb_path *path)
{
	struct ps_rb_node *n = tx->root->node;
	int best_depth = 0;

	path->depth = 0;
	while (n) {
		int right = !(rb_range(n)->end > start);

		psi_rb_path_push(path, n, right);
		if (!right)
			best_depth = path->depth;
		n = psi_rb_child(tx, n, right);
	}
	path->depth = best_depth;
	return best_depth ? rb_range(path->node[best_depth - 1]) : NULL;
}

/* Link @nr (payload set) by its start; ranges never overlap, so starts are unique. */
static void rtree_insert(struct psi_rb_tx *tx, size_t *count, struct ps_range *nr)
{
	struct psi_rb_path path = { .depth = 0 };
	struct ps_rb_node *n = tx->root->node;

	while (n) {
		int dir = nr->start >= rb_range(n)->start;

		psi_rb_path_push(&path, n, dir);
		n = psi_rb_child(tx, n, dir);
	}
	psi_rb_insert(tx, &path, &nr->rb);
	PSI_WRITE_ONCE(*count, *count + 1);
}

/*
 * Where a set takes its ranges: in place, a list of two the caller
 * allocated; copy on write, the update's memory (struct psi_rangetree_cow_mem),
 * topped up before each operation of the tree (cow_ready()), so that an
 * update that cannot get memory stops between two operations and is
 * thrown away whole.
 */
struct spares {
	struct psi_range_list *list;
	struct psi_rangetree_cow *cow;
};

static struct ps_range *spare_take(struct spares *s)
{
	struct psi_rangetree_cow_mem *m;
	struct ps_range *r;

	if (!s->cow)
		r = psi_range_list_pop(s->list);
	else if ((m = s->cow->mem)->spares.n)
		r = m->used.v[m->used.n++] = m->spares.v[--m->spares.n];
	else
		r = NULL;
	if (!r) {
		/* The reservation before the operation was short: a bug, not a state to go on in. */
		fprintf(stderr, "polstore: range tree update ran out of preallocated ranges\n");
		abort();
	}
	return r;
}

/* A store reference for a range the update builds, noted for an abort. */
static void take_ref(struct spares *s, struct ps_policy *pol)
{
	if (!pol)
		return;
	psi_policy_store_get(pol);
	if (s->cow)
		s->cow->mem->refs[s->cow->mem->nrefs++] = pol;
}

/* Fill a spare range; the release store that links it publishes these fields. */
static struct ps_range *new_range(struct spares *spares, uint64_t start, uint64_t end,
		struct ps_policy *pol)
{
	struct ps_range *r = spare_take(spares);

	PSI_WRITE_ONCE(r->start, start);
	PSI_WRITE_ONCE(r->end, end);
	take_ref(spares, pol);
	PSI_WRITE_ONCE(r->pol, pol);
	PSI_WRITE_ONCE(r->node_hint, _ps_policy_hint(pol));
	return r;
}

enum tree_op { OP_OWN, OP_ERASE, OP_INSERT };

/*
 * Copy on write, before an operation of the tree: room for its worst case
 * (psi_rb_copies_*() of the height the tree can have by then, and no more
 * copies than published nodes), @extra new ranges and references, and
 * its undo entries.  In place nothing: the caller's two spares suffice.
 * Return: false when out of memory (the update must be thrown away).
 */
static bool cow_ready(struct spares *s, enum tree_op op, size_t extra)
{
	struct psi_rangetree_cow *c = s->cow;
	int h;
	size_t copies;

	if (!c)
		return true;
	/* The height a tree of that many ranges can have: no walk needed. */
	h = psi_rb_height_max(c->published + (size_t)c->inserts + 1);
	copies = op == OP_OWN ? psi_rb_copies_own(h) :
		 op == OP_ERASE ? psi_rb_copies_erase(h) : psi_rb_copies_insert(h);
	if (copies > c->published + 1)
		copies = c->published + 1;
	c->mem->nundo = c->tx.nundo;
	if (psi_rangetree_cow_mem_reserve(c->mem, copies + extra, extra, psi_rb_paints(h)))
		return false;
	c->tx.undo = c->mem->undo;
	c->tx.undo_cap = c->mem->undo_cap;
	if (op == OP_INSERT)
		c->inserts++;
	return true;
}

/* The path to the range that starts at @key (it exists), in the tree as @tx sees it. */
static struct ps_range *path_to_start(const struct psi_rb_tx *tx, uint64_t key,
		struct psi_rb_path *path)
{
	struct ps_rb_node *n = tx->root->node;

	path->depth = 0;
	for (;;) {
		struct ps_range *r = rb_range(n);
		int dir = key > r->start;

		psi_rb_path_push(path, n, dir);
		if (key == r->start)
			return r;
		n = psi_rb_child(tx, n, dir);
	}
}

/*
 * shared_policy_replace() on the tree @tx changes.  Each loop turn finds
 * the first range still overlapping [cursor, end) afresh (O(log n)): after
 * a left trim its end is @start, after a removal it is gone, so the search
 * moves on.  Copy on write, nodes found by earlier turns may have been
 * copied since: every search walks the tree as @tx sees it.
 *
 * When a new range goes in, the first range [start, end) covers whole (the
 * victim) is not removed but becomes the new range: its node keeps its
 * place in the tree (its predecessor ends at or before @start by then, its
 * successors start at or after @end), so the set changes one node instead
 * of erasing and inserting with two rebalancings; copy on write, a set
 * that gives one range a new policy copies that one node.  The victim's
 * old policy reference goes to @removed on the spare that the new range
 * would have taken, so it is dropped exactly when an erased range's would
 * be.  The path to the victim is kept from the search that found it: trims
 * change no link, so unless a range was erased after it, the path's
 * directions still lead there (psi_rb_own() follows them from the root).
 *
 * Copy on write, memory is reserved before each operation of the tree;
 * when it cannot be, the set stops there and returns false, and the
 * caller throws the whole update away (psi_rangetree_cow_abort()).
 */
static bool rtree_apply(struct psi_rb_tx *tx, size_t *count, uint64_t start, uint64_t end,
		struct ps_policy *pol, struct spares *spares, struct psi_range_list *removed)
{
	bool add = pol && pol->mode != PS_MPOL_DEFAULT, have_victim = false, moved = false;
	uint64_t cursor = start, victim = 0;
	struct psi_rb_path path, vpath;
	struct ps_range *r;

	while ((r = first_ending_after(tx, cursor, &path)) && r->start < end) {
		if (r->start >= start) {
			if (r->end <= end) {
				if (add && !have_victim) {
					/* Kept for the new range; the search goes on past it. */
					have_victim = true;
					victim = r->start;
					vpath = path;
					cursor = r->end;
					if (cursor >= end)
						break;
					continue;
				}
				/* Inside: drop it (its reference goes with it). */
				if (!cow_ready(spares, OP_ERASE, 0))
					return false;
				r = rb_range(psi_rb_erase(tx, &path));
				PSI_WRITE_ONCE(*count, *count - 1);
				psi_range_list_push(removed, r);
				moved = true;
				continue;
			}
			/* Sticks out on the right: keep [end, r->end). */
			if (!cow_ready(spares, OP_OWN, 0))
				return false;
			r = rb_range(psi_rb_own(tx, &path));
			PSI_WRITE_ONCE(r->start, end);
			break;
		}
		if (r->end > end) {
			/* Covers both edges: keep [r->start, start) here, re-add [end, r->end). */
			struct ps_range *tail;

			if (!cow_ready(spares, OP_OWN, 0) || !cow_ready(spares, OP_INSERT, 1))
				return false;
			tail = new_range(spares, end, r->end, r->pol);
			r = rb_range(psi_rb_own(tx, &path));
			PSI_WRITE_ONCE(r->end, start);
			rtree_insert(tx, count, tail);
			break;
		}
		/* Sticks out on the left: keep [r->start, start). */
		if (!cow_ready(spares, OP_OWN, 0))
			return false;
		r = rb_range(psi_rb_own(tx, &path));
		PSI_WRITE_ONCE(r->end, start);
	}
	if (!add)
		return true;
	if (!have_victim) {
		if (!cow_ready(spares, OP_INSERT, 1))
			return false;
		rtree_insert(tx, count, new_range(spares, start, end, pol));
		return true;
	}
	{
		struct ps_range *old;

		if (!cow_ready(spares, OP_OWN, 1))
			return false;
		old = new_range(spares, 0, 0, NULL);
		if (moved)
			path_to_start(tx, victim, &vpath);
		r = rb_range(psi_rb_own(tx, &vpath));
		old->pol = r->pol; /* the old reference, dropped like an erased range's */
		psi_range_list_push(removed, old);
		take_ref(spares, pol);
		PSI_WRITE_ONCE(r->pol, pol);
		PSI_WRITE_ONCE(r->node_hint, _ps_policy_hint(pol));
		PSI_WRITE_ONCE(r->start, start);
		PSI_WRITE_ONCE(r->end, end);
	}
	return true;
}

void psi_rangetree_set(struct ps_rtree *t, uint64_t start, uint64_t end, struct ps_policy *pol,
		struct psi_range_list *spares, struct psi_range_list *removed)
{
	struct psi_rb_tx tx;
	struct spares s = { .list = spares, .cow = NULL };

	psi_rb_tx_init(&tx, &t->root, 0, NULL);
	rtree_apply(&tx, &t->count, start, end, pol, &s, removed);
}

/* ---- copy on write ---------------------------------------------------------- */

/* The tree core's copy hook: a spare takes the published range's payload. */
static struct ps_rb_node *cow_copy(struct psi_rb_tx *tx, const struct ps_rb_node *old)
{
	struct psi_rangetree_cow *c = psi_container_of(tx, struct psi_rangetree_cow, tx);
	struct ps_range *o = psi_container_of(old, struct ps_range, rb);
	struct spares s = { .list = NULL, .cow = c };
	struct ps_range *r = spare_take(&s);

	/* The reference moves to the copy (see struct psi_rangetree_cow). */
	PSI_WRITE_ONCE(r->start, o->start);
	PSI_WRITE_ONCE(r->end, o->end);
	PSI_WRITE_ONCE(r->pol, o->pol);
	PSI_WRITE_ONCE(r->node_hint, o->node_hint);
	psi_range_list_push(&c->replaced, (struct ps_range *)o);
	c->copies++;
	return &r->rb;
}

int psi_rangetree_cow_mem_reserve(struct psi_rangetree_cow_mem *m, size_t ranges, size_t refs,
		size_t paints)
{
	if (m->peak < ranges)
		m->peak = ranges;
	if (m->spares.n < ranges) {
		/* The array first: a refill only fills the room there is. */
		if (psi_range_vec_reserve(&m->spares, ranges + m->refill_batch))
			return -ENOMEM;
		if (m->refill)
			m->refill(m, ranges);
		if (psi_range_vec_fill(&m->spares, ranges))
			return -ENOMEM;
	}
	if (psi_range_vec_reserve(&m->used, m->used.n + ranges))
		return -ENOMEM;
	if (m->refs_cap < m->nrefs + refs) {
		size_t cap = m->refs_cap ? 2 * m->refs_cap : 16;
		struct ps_policy **v;

		while (cap < m->nrefs + refs)
			cap *= 2;
		v = psi_alloc(cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		if (m->nrefs)
			memcpy(v, m->refs, m->nrefs * sizeof(*v));
		psi_free(m->refs);
		m->refs = v;
		m->refs_cap = cap;
	}
	if (m->undo_cap < m->nundo + paints) {
		size_t cap = m->undo_cap ? 2 * m->undo_cap : 32;
		struct psi_rb_undo *u;

		while (cap < m->nundo + paints)
			cap *= 2;
		u = psi_alloc(cap * sizeof(*u));
		if (!u)
			return -ENOMEM;
		if (m->nundo)
			memcpy(u, m->undo, m->nundo * sizeof(*u));
		psi_free(m->undo);
		m->undo = u;
		m->undo_cap = cap;
	}
	return 0;
}

void psi_rangetree_cow_mem_trim(struct psi_rangetree_cow_mem *m, size_t keep)
{
	psi_range_vec_trim(&m->spares, keep);
}

void psi_rangetree_cow_mem_free(struct psi_rangetree_cow_mem *m)
{
	psi_range_vec_free(&m->spares);
	psi_range_vec_free(&m->used);
	psi_free(m->refs);
	psi_free(m->undo);
	m->refs = NULL;
	m->undo = NULL;
	m->refs_cap = m->undo_cap = m->nrefs = m->nundo = 0;
}

void psi_rangetree_cow_begin(struct psi_rangetree_cow *c, const struct ps_rtree *t, uint64_t gen,
		struct psi_rangetree_cow_mem *mem)
{
	c->root.node = t->root.node;
	c->count = t->count;
	c->published = t->count;
	psi_rb_tx_init(&c->tx, &c->root, gen, cow_copy);
	c->inserts = 0;
	c->mem = mem;
	c->copies = 0;
	c->replaced = (struct psi_range_list){ NULL, 0, NULL };
	c->removed = (struct psi_range_list){ NULL, 0, NULL };
}

bool psi_rangetree_cow_set(struct psi_rangetree_cow *c, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct spares s = { .list = NULL, .cow = c };
	bool done;

	done = rtree_apply(&c->tx, &c->count, start, end, pol, &s, &c->removed);
	c->mem->nundo = c->tx.nundo;
	return done;
}

void psi_rangetree_cow_abort(struct psi_rangetree_cow *c)
{
	struct psi_rangetree_cow_mem *m = c->mem;

	psi_rb_abort(&c->tx);
	m->nundo = 0;
	/* Every range the update took is private: never published, no reference of its own. */
	while (m->used.n)
		psi_free(m->used.v[--m->used.n]);
	while (m->nrefs)
		psi_policy_store_put(m->refs[--m->nrefs]);
	c->replaced = (struct psi_range_list){ NULL, 0, NULL };
	c->removed = (struct psi_range_list){ NULL, 0, NULL };
	c->copies = 0;
}

int psi_rangetree_cow_ready_publish(struct psi_rangetree_cow *c, bool at_root, size_t extra)
{
	c->mem->nundo = c->tx.nundo;
	return psi_rangetree_cow_mem_reserve(c->mem, (at_root ? (size_t)c->tx.pdepth : 0) + extra, 0, 0);
}

bool psi_rangetree_cow_publish(struct psi_rangetree_cow *c, struct ps_rtree *t, bool at_root)
{
	struct psi_rangetree_cow_mem *m = c->mem;
	bool root;

	if (at_root)
		psi_rb_raise_root(&c->tx);
	/*
	 * For the thread checkers: every copy is written (the raise's too);
	 * pairs with the readers' annotation where they load the root.
	 */
	PSI_ANNOTATE_HAPPENS_BEFORE(t);
	/* Ordered before the publication's release store: a forked child tells the two apart. */
	PSI_WRITE_ONCE(m->publishing, true);
	root = psi_rb_publish(&c->tx, &t->root);
	PSI_WRITE_ONCE(t->count, c->count);
	/* What the update took is the tree's or the retired lists' now. */
	m->used.n = 0;
	PSI_STORE_RELEASE(m->publishing, false);
	m->nrefs = 0;
	m->nundo = 0;
	c->tx.nundo = 0;
	return root;
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
