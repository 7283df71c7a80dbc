// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index's walks and its check (rangeindex.h): what reads an
 * index without changing it, from a read-side section (the walks) or as
 * the writer (the check).  The leaf layout is polstore/static/index.h's.
 */
#include <polstore/static/policy.h>

#include "compiler.h"
#include "rangeindex.h"
#include "rangeindex_node.h"
#include "rangetree.h"

/* ---- walks ------------------------------------------------------------------ */

/* Ranges of @h (interval ends at @hi) ending after @start and beginning before @end. */
static int foreach_node(const struct ps_ix_node *h, uint64_t hi, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg, bool *stop)
{
	int i, ret;

	if (!h->height) {
		const struct ps_ix_leaf *l = as_leaf(h);

		for (i = 0; i < h->n; i++) {
			struct psi_ix_ent x = leaf_ent(l, i);

			if (x.end <= start)
				continue;
			if (x.start >= end) {
				*stop = true;
				return 0;
			}
			if ((ret = fn(x.start, x.end, x.pol, arg)))
				return ret;
		}
		return 0;
	}
	for (i = 0; i < h->n; i++) {
		const struct ps_ix_inner *in = as_inner(h);
		uint64_t chi = i + 1 < h->n ? in->piv[i] : hi;

		if (i && in->piv[i - 1] >= end) {
			*stop = true;
			return 0;
		}
		if (chi <= start)
			continue;
		ret = foreach_node(PSI_LOAD_ACQUIRE(in->child[i]), chi, start, end,
				fn, arg, stop);
		if (ret || *stop)
			return ret;
	}
	return 0;
}

int psi_ix_foreach_range(const struct ps_ix_node *n, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg)
{
	bool stop = false;

	return n ? foreach_node(n, UINT64_MAX, start, end, fn, arg, &stop) : 0;
}

bool psi_ix_next_from(const struct ps_ix_node *n, uint64_t idx, struct psi_ix_hit *hit)
{
	uint64_t key = idx, hi;

	for (;;) {
		const struct ps_ix_leaf *l = _ps_ix_leaf_of(n, key, &hi);
		unsigned c;

		if (!l)
			return false;
		/* The last range starting at or below the key, if it ends after @idx, else the next. */
		c = _ps_ix_count_le(_PS_IX_START(l), 1u << l->h.shift, key);
		if (c && _PS_IX_END(l)[c - 1] > idx)
			c--;
		if (c < l->h.n) {
			hit->start = _PS_IX_START(l)[c];
			hit->end = _PS_IX_END(l)[c];
			hit->pol = _PS_LOAD_ACQUIRE(_PS_IX_POL(l)[c]);
			return true;
		}
		/* None in this leaf: the first of the next, whose interval begins at @hi. */
		if (hi == UINT64_MAX)
			return false;
		key = hi;
	}
}

/* ---- the check ----------------------------------------------------------------- */

struct check {
	struct ps_rb_node *tree;
	uint64_t cursor; /* the end of the last range compared */
	bool first;
	size_t ranges;
	int leaf_depth;
	const char *why;
};

static bool check_fail(struct check *k, const char *why)
{
	if (!k->why)
		k->why = why;
	return false;
}

static bool check_node(const struct ps_ix_node *h, int depth, uint64_t lo, uint64_t hi, bool root,
		struct check *k)
{
	int i;

	if (h->wflags & IX_WMASK)
		return check_fail(k, "index node still marked as being built");
	if (!h->n)
		return check_fail(k, "empty index node");
	if (!h->height) {
		const struct ps_ix_leaf *l = as_leaf(h);
		unsigned cap = 1u << h->shift;

		if ((h->shift != PS_IX_LEAF_SHIFT && !(root && h->shift == PS_IX_SMALL_SHIFT)) ||
				h->n > cap)
			return check_fail(k, "index leaf of a wrong capacity or count");
		/* The occupancy (rangeindex_join.c): all but the root and the last leaf. */
		if (!root && hi != UINT64_MAX && node_under(h, false))
			return check_fail(k, "index leaf under a quarter full");
		if (k->leaf_depth < 0)
			k->leaf_depth = depth;
		else if (k->leaf_depth != depth)
			return check_fail(k, "index leaves at different depths");
		for (i = 0; i < (int)cap; i++) {
			struct psi_ix_ent x = leaf_ent(l, i);
			struct ps_range *r;

			if (i >= h->n) {
				if (x.start != PS_IX_NONE || x.end || x.pol)
					return check_fail(k, "index leaf slot unused but not cleared");
				continue;
			}
			if (x.start >= x.end || x.start < lo || (hi != UINT64_MAX && x.end > hi))
				return check_fail(k, "index range empty or outside its leaf's interval");
			r = psi_rangetree_next_from(k->tree, k->cursor);
			if (!k->first && r && r->start < k->cursor)
				return check_fail(k, "tree ranges overlap");
			if (!r || r->start != x.start || r->end != x.end || r->pol != x.pol)
				return check_fail(k, "index range differs from the tree's");
			if (x.hint != _ps_policy_hint(x.pol))
				return check_fail(k, "index node hint differs from its policy's");
			k->cursor = x.end;
			k->first = false;
			k->ranges++;
		}
		return true;
	}
	{
		const struct ps_ix_inner *in = as_inner(h);

		if (h->n > PS_IX_FAN || (h->n < 2 && root))
			return check_fail(k, "index inner node of a wrong count");
		if (!root && node_under(h, false))
			return check_fail(k, "index inner node under a quarter full");
		for (i = 0; i < PS_IX_FAN; i++) {
			uint64_t clo = i ? in->piv[i - 1] : lo;
			uint64_t chi = i + 1 < h->n ? in->piv[i] : hi;

			if (i >= h->n) {
				if ((i < PS_IX_FAN - 1 && in->piv[i] != PS_IX_NONE) || in->child[i])
					return check_fail(k, "index inner slot unused but not cleared");
				continue;
			}
			if (i + 1 < h->n && (in->piv[i] == PS_IX_NONE || in->piv[i] <= clo ||
						    (hi != UINT64_MAX && in->piv[i] >= hi)))
				return check_fail(k, "index pivots out of order");
			if (!in->child[i] || in->child[i]->height + 1 != h->height)
				return check_fail(k, "index child of a wrong height");
			if (!check_node(in->child[i], depth + 1, clo, chi, false, k))
				return false;
		}
		return true;
	}
}

int psi_ix_check(const struct ps_ix_root *root, const struct ps_rtree *t, const char **why)
{
	struct check k = { psi_rb_load_root(&t->root), 0, true, 0, -1, NULL };

	if (root->node && !check_node(root->node, 0, 0, UINT64_MAX, true, &k))
		goto fail;
	if (k.ranges != t->count)
		check_fail(&k, "index holds another number of ranges than the tree");
	else if (psi_rangetree_next_from(k.tree, k.cursor))
		check_fail(&k, "tree holds a range the index lacks");
	if (!k.why)
		return 0;
fail:
	*why = k.why;
	return -EUCLEAN;
}
