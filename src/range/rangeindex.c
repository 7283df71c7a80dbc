// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index (rangeindex.h): a B+-tree of immutable wide nodes over
 * the ranges of a store, updated by copying the nodes a set changes.
 *
 * Intervals.  The root's interval is all keys; an inner node's child i
 * has [piv[i - 1], piv[i]), with the node's own bounds at both ends.
 * Every range lies wholly inside the interval of the one leaf that holds
 * it, so the leaf a search of a key reaches holds the range containing
 * the key if any range does.  A set that crosses children moves the pivot
 * between them: the left child's interval grows to the set's end, the
 * right one's begins there.
 *
 * An update.  A set rebuilds the leaf it falls in (entries wholly covered
 * go, ones overlapping an edge are trimmed, one covering both edges is
 * split, the new range goes between); a leaf that overflows splits in two,
 * and a node left under a quarter full (a leaf a set shrinks, the two
 * leaves at the edges of a set across children, an inner node that lost
 * children) joins a neighbour or shares with it (rangeindex_join.c).
 * Either copies the parent, and so on up; a root of one child gives way
 * to it, one of a few that fit in one node to that node.  When one leaf
 * changes and keeps its interval, a store of the new leaf into its
 * parent's slot publishes the set (the leaf is allocated as the set is
 * planned and written just before that store: its lines may be a grace
 * period cold, and the stores that miss on them come after the caller's
 * update of its tree instead of holding it up); otherwise the lowest node left unchanged
 * has a slot stored, or the root.  In a batch, or while a walk must see
 * one version, every set copies its whole path and publishes at the
 * root.  Nodes the update builds are marked fresh until published: a
 * later set of the same batch that replaces one frees it at publication
 * instead of retiring it.
 *
 * A published node is never written, but in one case: a set that gives
 * exactly one range a new policy (same bounds), alone in its update and
 * with no walk announced, stores the new node hint and then, with
 * release, the new policy into that range's entry of its published leaf.
 * A reader reads each word once, so it may pair either hint with either
 * policy; every answer it gives comes from one of the two (a node lookup
 * takes the hint when it names a node, else the policy, and a hint is a
 * function of its policy), so it is the answer before or after the set.
 * The old policy's reference is kept for a grace period, as a retired
 * range's is.  next() validates its walk with the publication count,
 * which the set makes odd around the stores, and walks that must see one
 * version are announced, which makes every set copy.
 *
 * Memory.  Every node an update needs is allocated before it publishes;
 * on failure the update frees what it built and the index is as it was.
 * Retired nodes, and whole subtrees a set removed, are freed by the
 * caller after a grace period (psi_ix_free_retired()).
 */
#include <errno.h>
#include <string.h>

#include <polstore/static/policy.h>

#include "compiler.h"
#include "ixpool.h"
#include "rangeindex.h"
#include "rangeindex_join.h"
#include "rangeindex_node.h"
#include "rangetree.h"

/* The nodes replacing one node of a level (0, 1 or 2), and the lower bound of each. */
struct out {
	int n; /* -1: nothing to replace here (a slot store below, or no change) */
	struct ps_ix_node *node[PS_IX_FAN + 2];
	uint64_t lo[PS_IX_FAN + 2];
};

/* Free @h, which no reader can reach, now: the writer. */
static void free_now(struct psi_ix_pool *pool, struct ps_ix_node *h)
{
	if (psi_ix_pool_tag_of(h))
		psi_ix_pool_put_now(pool, h);
	else
		psi_free(h);
}

/* @h and everything below it leave the index: no range of it survives. */
static int retire_all(struct psi_ix_tx *tx, struct ps_ix_node *h)
{
	int i, err;

	if (!(h->wflags & IX_FRESH)) {
		size_t b = psi_ix_bytes(h);

		tx->bytes -= (ptrdiff_t)b;
		tx->retired_bytes += b;
		return list_push(&tx->retired, &tx->nretired, &tx->capretired, tx->retired0,
				(void *)((uintptr_t)h | IX_SUBTREE));
	}
	if (h->height)
		for (i = 0; i < h->n; i++)
			if ((err = retire_all(tx, as_inner(h)->child[i])))
				return err;
	return retire(tx, h);
}

/*
 * How [s, e) set to @pol (NULL: removed) changes leaf @l (NULL: none):
 * its entries [*i0, *i1) go and @add[0, *na) take their place (what is
 * left of the first and last of them, the new range between).  Return:
 * the leaf's new count, or -1 when nothing changes.
 */
static int leaf_edit(const struct ps_ix_leaf *l, uint64_t s, uint64_t e, struct ps_policy *pol,
		int cnt, int *i0, int *i1, struct psi_ix_ent *add, int *na)
{
	int ln = 0, a = 0, b = 0, k = 0;

	if (l) {
		/*
		 * Branchless, as a lookup (the scans they replace mispredict
		 * their exit): the entries ending by @s are those starting by
		 * it but the last of them when it reaches past @s; those
		 * starting before @e follow (sentinels start above any key).
		 */
		unsigned cap = 1u << l->h.shift;

		ln = l->h.n;
		a = cnt >= 0 ? cnt : (int)_ps_ix_count_le(_PS_IX_START(l), cap, s);
		a -= a && _PS_IX_END(l)[a - 1] > s;
		b = (int)_ps_ix_count_le(_PS_IX_START(l), cap, e - 1);
	}
	if (!pol && a == b)
		return -1;
	if (a < b && _PS_IX_START(l)[a] < s)
		add[k++] = (struct psi_ix_ent){ _PS_IX_START(l)[a], s, _PS_IX_POL(l)[a],
			_PS_IX_HINT(l)[a] };
	if (pol)
		add[k++] = (struct psi_ix_ent){ s, e, pol, _ps_policy_hint(pol) };
	if (a < b && _PS_IX_END(l)[b - 1] > e)
		add[k++] = (struct psi_ix_ent){ e, _PS_IX_END(l)[b - 1], _PS_IX_POL(l)[b - 1],
			_PS_IX_HINT(l)[b - 1] };
	*i0 = a;
	*i1 = b;
	*na = k;
	return a + k + ln - b;
}

/*
 * Fill @x, a new leaf of @l's capacity, with @l's entries [i0, i1)
 * replaced by @add[0, na), which it fits: @l copied whole, then in each
 * field the run after the entries replaced moved to follow the new ones
 * (with the sentinels behind it, as far as it reaches), sentinels where
 * the leaf shrank, and @add written.
 */
static inline __attribute__((always_inline)) void leaf_fill_of(struct ps_ix_leaf *x,
		const struct ps_ix_leaf *l, int i0, int i1, const struct psi_ix_ent *add, int na,
		unsigned shift)
{
	size_t bytes = _PS_IX_LEAF_BYTES(shift);
	int cap = 1 << shift, at = i0 + na, k = cap - (i1 > at ? i1 : at), i;
	struct leaf_fields f = leaf_fields(x, shift);

	memcpy(x->w, l->w, bytes - sizeof(x->h));
	x->h.n = (uint16_t)(at + l->h.n - i1);
	x->h.shift = (uint8_t)shift;
	if (at != i1) {
		memmove(f.start + at, f.start + i1, (size_t)k * sizeof(*f.start));
		memmove(f.end + at, f.end + i1, (size_t)k * sizeof(*f.end));
		memmove(f.pol + at, f.pol + i1, (size_t)k * sizeof(*f.pol));
		memmove(f.hint + at, f.hint + i1, (size_t)k * sizeof(*f.hint));
		for (i = at + k; i < cap; i++)
			leaf_put(f, (unsigned)i, NULL);
	}
	for (i = 0; i < na; i++)
		leaf_put(f, (unsigned)(i0 + i), &add[i]);
}

/* Leaf @l with its entries [i0, i1) replaced by @add[0, na), as one new leaf of its capacity. */
static struct ps_ix_node *leaf_splice(struct psi_ix_tx *tx, const struct ps_ix_leaf *l, int i0,
		int i1, const struct psi_ix_ent *add, int na)
{
	size_t bytes = _PS_IX_LEAF_BYTES(l->h.shift);
	struct ps_ix_leaf *x = new_node(tx, bytes);

	if (!x)
		return NULL;
	/* A full leaf's offsets and sizes known to the compiler: most copies. */
	if (l->h.shift == PS_IX_LEAF_SHIFT)
		leaf_fill_of(x, l, i0, i1, add, na, PS_IX_LEAF_SHIFT);
	else
		leaf_fill_of(x, l, i0, i1, add, na, l->h.shift);
	tx->bytes += (ptrdiff_t)node_bytes(&x->h);
	return &x->h;
}

/* The copy set_one_leaf() left to the publication, made now. */
static void copy_now(struct psi_ix_tx *tx)
{
	leaf_fill_of(as_leaf(tx->copy), tx->copy_from, tx->copy_i0, tx->copy_i1, tx->copy_add,
			tx->copy_na, PS_IX_LEAF_SHIFT);
	tx->copy = NULL;
}

/* The capacity (as a shift) leaves_out() gives a leaf of @n entries, @small: the root. */
static unsigned leaf_shift(int n, bool small)
{
	return small && n <= (int)SMALL_CAP ? PS_IX_SMALL_SHIFT : PS_IX_LEAF_SHIFT;
}

/*
 * Entries @e[0, n) as leaves into @o; the first leaf's lower bound is @lo.
 * An overflowing leaf splits 3/4 to the left: ranges set in ascending
 * order inside the store leave leaves 3/4 full, not half.  The last leaf
 * of the index, overflowing by a range set past all of its own (@append: a
 * store filled front to back), keeps every old range: leaves stay full.
 * More entries (a leaf and its neighbour) are shared evenly.
 */
static int leaves_out(struct psi_ix_tx *tx, const struct psi_ix_ent *e, int n, uint64_t lo,
		bool small, bool append, struct out *o)
{
	int parts = (n + (int)LEAF_CAP - 1) / (int)LEAF_CAP, p, at = 0;
	unsigned shift = leaf_shift(n, small);

	o->n = 0;
	for (p = 0; p < parts; p++) {
		int k = (n - at) / (parts - p);

		struct ps_ix_node *l;

		if (parts == 2 && !p && n <= (int)LEAF_CAP + 2) {
			if (append)
				k = n - 1 < (int)LEAF_CAP ? n - 1 : (int)LEAF_CAP;
			else
				k = n - LEAF_CAP / 4 > (int)LEAF_JOIN ? (int)LEAF_JOIN
								   : n - (int)LEAF_CAP / 4;
		}
		l = leaf_make(tx, e + at, k, shift);
		if (!l)
			return -ENOMEM;
		o->lo[o->n] = p ? e[at].start : lo;
		o->node[o->n++] = l;
		at += k;
	}
	return 0;
}

/* Children @ch[0, n) (lower bounds @clo) as inner nodes of @height into @o, evenly. */
static int inners_out(struct psi_ix_tx *tx, int height, struct ps_ix_node **ch, uint64_t *clo, int n,
		struct out *o)
{
	int parts = (n + PS_IX_FAN - 1) / PS_IX_FAN, p, at = 0;

	o->n = 0;
	for (p = 0; p < parts; p++) {
		int k = (n - at) / (parts - p);
		struct ps_ix_node *x = inner_make(tx, height, ch + at, clo + at, k);

		if (!x)
			return -ENOMEM;
		o->lo[o->n] = clo[at];
		o->node[o->n++] = x;
		at += k;
	}
	return 0;
}

/*
 * @in (interval [lo, hi)) with its slots [a, b] replaced by what
 * @sub[0, nsub) holds, into @o; the children it made that are short of
 * their occupancy join or share with a neighbour first (psi_ix_join()).
 */
static int inner_out(struct psi_ix_tx *tx, const struct ps_ix_inner *in, uint64_t lo, uint64_t hi,
		int a, int b, struct out *const *sub, int nsub, struct out *o)
{
	struct ps_ix_node *ch[2 * PS_IX_FAN + 4];
	uint64_t clo[2 * PS_IX_FAN + 4];
	int n = 0, i, j, err;

	for (i = 0; i < a; i++) {
		ch[n] = in->child[i];
		clo[n++] = i ? in->piv[i - 1] : lo;
	}
	for (j = 0; j < nsub; j++)
		for (i = 0; i < sub[j]->n; i++) {
			ch[n] = sub[j]->node[i];
			clo[n++] = sub[j]->lo[i];
		}
	j = n;
	for (i = b + 1; i < in->h.n; i++) {
		ch[n] = in->child[i];
		clo[n++] = in->piv[i - 1];
	}
	o->n = 0;
	if (!n)
		return 0;
	/* The first child's interval begins where the node's does. */
	clo[0] = lo;
	if ((err = psi_ix_join(tx, ch, clo, &n, a, j, hi == UINT64_MAX)))
		return err;
	return inners_out(tx, in->h.height, ch, clo, n, o);
}

/* The child of @in whose interval holds @k. */
static int child_of(const struct ps_ix_inner *in, uint64_t k)
{
	int c = (int)_ps_ix_child_of(in, k);

	return c < in->h.n ? c : in->h.n - 1;
}

/*
 * The kinds of change a set makes to the index, each named once, chosen
 * once where it applies and made by one function.  The first set of an
 * update is classified on its way down to its leaf (first_kind()): a new
 * policy in place, one leaf for one under a slot store, or the walk.  The
 * walk (update()) classifies each node on the set's path once, from the
 * leaf up (leaf_kind(), child_kind(); a set across children is a kind of
 * its own), and each kind returns the nodes that replace the node, or
 * none when the node stays.  What replaces the root becomes the root
 * (root_store()).
 */
enum ix_kind {
	IX_KEEP,      /* nothing changes: a removal of nothing */
	IX_INPLACE,   /* one range's new policy, stored into its published leaf (inplace_note()) */
	IX_LEAF_SLOT, /* one full leaf for one under an inner node, filled at publication (leaf_slot()) */
	IX_WALK,      /* anything else: update() */
	IX_SPLICE,    /* a leaf: one of the same capacity in its place (leaf_splice_out()) */
	IX_LEAVES,    /* a leaf: none, or new leaves: split, or a small root's resized (leaf_rebuild()) */
	IX_SLOT,      /* an inner node: its one new child stored into its slot, the node stays */
	IX_SHARE,     /* an inner node: a leaf split in two and a neighbour as two (share_split()) */
	IX_COPY,      /* an inner node: copied over its new children, short ones joined (inner_copy()) */
	IX_SPAN,      /* an inner node: a set across its children (update_span()) */
};

/* How a set changes one leaf: its entries [i0, i1) replaced by add[0, na), n entries after. */
struct leaf_change {
	int n, i0, i1, na;
	struct psi_ix_ent add[3];
};

/* What a set that leaves leaf @l (NULL: none) @n entries (-1: unchanged) makes of it; @top: the root. */
static enum ix_kind leaf_kind(const struct ps_ix_leaf *l, int n, bool top)
{
	if (n < 0)
		return IX_KEEP;
	/* Most sets: one leaf in place of one, of the same capacity. */
	if (l && n > 0 && n <= (int)LEAF_CAP && leaf_shift(n, top) == l->h.shift)
		return IX_SPLICE;
	return IX_LEAVES;
}

/* IX_SPLICE: leaf @h (lower bound @lo) changed by @c, as one new leaf into @o. */
static int leaf_splice_out(struct psi_ix_tx *tx, struct ps_ix_node *h, uint64_t lo,
		const struct leaf_change *c, struct out *o)
{
	int err = retire(tx, h);

	if (err)
		return err;
	o->node[0] = leaf_splice(tx, as_leaf(h), c->i0, c->i1, c->add, c->na);
	if (!o->node[0])
		return -ENOMEM;
	o->lo[0] = lo;
	o->n = 1;
	return 0;
}

/*
 * IX_LEAVES: leaf @h (NULL: an empty index; interval [lo, hi)) changed by
 * @c, a set from @s, as new leaves into @o; @top: @h is the root.
 */
static int leaf_rebuild(struct psi_ix_tx *tx, struct ps_ix_node *h, uint64_t lo, uint64_t hi,
		uint64_t s, const struct leaf_change *c, bool top, struct out *o)
{
	const struct ps_ix_leaf *l = h ? as_leaf(h) : NULL;
	struct psi_ix_ent ent[LEAF_CAP + 2];
	/* The last leaf, a range set past all of its own: a store filled front to back. */
	bool append = h && hi == UINT64_MAX && h->n && s >= _PS_IX_END(l)[h->n - 1];
	int i, k = 0, err;

	if (h && (err = retire(tx, h)))
		return err;
	for (i = 0; l && i < c->i0; i++)
		ent[k++] = leaf_ent(l, i);
	for (i = 0; i < c->na; i++)
		ent[k++] = c->add[i];
	for (i = c->i1; l && i < l->h.n; i++)
		ent[k++] = leaf_ent(l, i);
	return leaves_out(tx, ent, c->n, lo, top, append, o);
}

/* update() at leaf @h (NULL: an empty index). */
static int update_leaf(struct psi_ix_tx *tx, struct ps_ix_node *h, uint64_t lo, uint64_t hi,
		uint64_t s, uint64_t e, struct ps_policy *pol, bool top, struct out *o)
{
	const struct ps_ix_leaf *l = h ? as_leaf(h) : NULL;
	struct leaf_change c;

	c.n = leaf_edit(l, s, e, pol, -1, &c.i0, &c.i1, c.add, &c.na);
	switch (leaf_kind(l, c.n, top)) {
	case IX_KEEP:
		o->n = -1;
		return 0;
	case IX_SPLICE:
		return leaf_splice_out(tx, h, lo, &c, o);
	default:
		return leaf_rebuild(tx, h, lo, hi, s, &c, top, o);
	}
}

/*
 * What inner node @in (interval ending at @hi) makes of itself when its
 * child @ci changed into @sub: @copy forbids a slot store, @top: @in is
 * the root.  An IX_SHARE's neighbour in *@k.
 */
static enum ix_kind child_kind(const struct ps_ix_inner *in, int ci, uint64_t hi, bool copy,
		bool top, const struct out *sub, int *k)
{
	int j;

	if (sub->n < 0)
		return IX_KEEP;
	/*
	 * One node for one, at its occupancy: one slot store publishes the
	 * update and this node stays.  A short one joins a neighbour as
	 * this node is copied (inner_out()).
	 */
	if (sub->n == 1 && !copy &&
			!node_under(sub->node[0], ci == in->h.n - 1 && hi == UINT64_MAX) &&
			!(top && psi_ix_root_fits(in, ci, sub->node[0])))
		return IX_SLOT;
	if (in->h.height != 1 || sub->n != 2 || in->h.n < 2)
		return IX_COPY;
	/*
	 * The leaf split: shared with a neighbour that has room, two leaves
	 * hold what three would (leaves stay fuller under random sets).
	 */
	j = ci > 0 ? ci - 1 : -1;
	if (ci + 1 < in->h.n && (j < 0 || in->child[ci + 1]->n < in->child[j]->n))
		j = ci + 1;
	if (sub->node[0]->n + sub->node[1]->n + in->child[j]->n > 2 * (int)LEAF_CAP - (int)LEAF_LOW)
		return IX_COPY;
	*k = j;
	return IX_SHARE;
}

/* IX_COPY: @h (interval [lo, hi)) with its children [a, b] replaced by @sub[0, nsub), into @o. */
static int inner_copy(struct psi_ix_tx *tx, struct ps_ix_node *h, uint64_t lo, uint64_t hi, int a,
		int b, struct out *const *sub, int nsub, struct out *o)
{
	int err = retire(tx, h);

	return err ? err : inner_out(tx, as_inner(h), lo, hi, a, b, sub, nsub, o);
}

/* IX_SHARE: @h's leaf @ci, split into @sub, and its neighbour @k as two leaves, into @o. */
static int share_split(struct psi_ix_tx *tx, struct ps_ix_node *h, uint64_t lo, uint64_t hi,
		int ci, int k, struct out *sub, struct out *o)
{
	struct ps_ix_inner *in = as_inner(h);
	struct ps_ix_node *part[3];
	struct psi_ix_ent ent[2 * LEAF_CAP];
	int n = 0, i, j, a, err;

	part[k < ci ? 0 : 2] = in->child[k];
	part[k < ci ? 1 : 0] = sub->node[0];
	part[k < ci ? 2 : 1] = sub->node[1];
	for (j = 0; j < 3; j++) {
		for (i = 0; i < part[j]->n; i++)
			ent[n++] = leaf_ent(as_leaf(part[j]), i);
		if ((err = retire(tx, part[j])))
			return err;
	}
	a = k < ci ? k : ci;
	if ((err = leaves_out(tx, ent, n, a ? in->piv[a - 1] : lo, false, false, sub)))
		return err;
	return inner_copy(tx, h, lo, hi, a, a + 1, &sub, 1, o);
}

static int update(struct psi_ix_tx *tx, struct ps_ix_node *h, int height, uint64_t lo, uint64_t hi,
		uint64_t s, uint64_t e, struct ps_policy *pol, bool copy, bool top, struct out *o);

/* update() at inner node @h, [s, e) within its child @ci. */
static int update_child(struct psi_ix_tx *tx, struct ps_ix_node *h, int height, uint64_t lo,
		uint64_t hi, uint64_t s, uint64_t e, struct ps_policy *pol, bool copy, bool top,
		int ci, struct out *o)
{
	struct ps_ix_inner *in = as_inner(h);
	uint64_t clo = ci ? in->piv[ci - 1] : lo;
	uint64_t chi = ci + 1 < in->h.n ? in->piv[ci] : hi;
	struct out sub, *sp = &sub;
	int k = -1, err;

	err = update(tx, in->child[ci], height - 1, clo, chi, s, e, pol, copy, false, &sub);
	if (err) {
		o->n = -1;
		return err;
	}
	switch (child_kind(in, ci, hi, copy, top, &sub, &k)) {
	case IX_KEEP:
		o->n = -1;
		return 0;
	case IX_SLOT:
		tx->slot = &in->child[ci];
		tx->val = sub.node[0];
		o->n = -1;
		return 0;
	case IX_SHARE:
		return share_split(tx, h, lo, hi, ci, k, &sub, o);
	default:
		return inner_copy(tx, h, lo, hi, ci, ci, &sp, 1, o);
	}
}

/*
 * IX_SPAN: update() at inner node @h, [s, e) across its children
 * ci .. cj: those between go whole, ci takes the new range (its interval
 * now ends at e), cj loses [s, e) and begins at e.
 */
static int update_span(struct psi_ix_tx *tx, struct ps_ix_node *h, int height, uint64_t lo,
		uint64_t hi, uint64_t s, uint64_t e, struct ps_policy *pol, int ci, int cj,
		struct out *o)
{
	struct ps_ix_inner *in = as_inner(h);
	struct out subs[2], *sp[2] = { &subs[0], &subs[1] };
	uint64_t clo = ci ? in->piv[ci - 1] : lo;
	uint64_t cjlo = in->piv[cj - 1];
	uint64_t chi = cj + 1 < in->h.n ? in->piv[cj] : hi;
	bool same;
	int i, err;

	for (i = ci + 1; i < cj; i++)
		if ((err = retire_all(tx, in->child[i])))
			return err;
	err = update(tx, in->child[ci], height - 1, clo, e, s, e, pol, true, false, &subs[0]);
	if (err)
		return err;
	same = subs[0].n < 0;
	if (same) {
		/* Unchanged (a removal that touched nothing there): kept as it is. */
		subs[0].n = 1;
		subs[0].node[0] = in->child[ci];
		subs[0].lo[0] = clo;
	}
	/* cj loses [cjlo, e); its interval now begins at e. */
	err = update(tx, in->child[cj], height - 1, cjlo, chi, cjlo, e, NULL, true, false, &subs[1]);
	if (err)
		return err;
	if (subs[1].n < 0) {
		/* A removal over the gap that holds the pivot between them: nothing changes. */
		if (same && cj == ci + 1) {
			o->n = -1;
			return 0;
		}
		subs[1].n = 1;
		subs[1].node[0] = in->child[cj];
	}
	if (subs[1].n)
		subs[1].lo[0] = e;
	return inner_copy(tx, h, lo, hi, ci, cj, sp, 2, o);
}

/*
 * @h (interval [lo, hi), height @height; NULL: an empty index) with
 * [s, e) set to @pol, [s, e) within [lo, hi): the nodes replacing @h into
 * @o, or o->n = -1 when @h stays (the publication noted in @tx is a slot
 * store below, or nothing changed).  @copy forbids a slot store (the
 * caller copies this node anyway); @top: @h is the root.
 */
static int update(struct psi_ix_tx *tx, struct ps_ix_node *h, int height, uint64_t lo, uint64_t hi,
		uint64_t s, uint64_t e, struct ps_policy *pol, bool copy, bool top, struct out *o)
{
	int ci, cj;

	if (!height)
		return update_leaf(tx, h, lo, hi, s, e, pol, top, o);
	ci = child_of(as_inner(h), s);
	cj = child_of(as_inner(h), e - 1);
	if (ci != cj)
		return update_span(tx, h, height, lo, hi, s, e, pol, ci, cj, o);
	return update_child(tx, h, height, lo, hi, s, e, pol, copy, top, ci, o);
}

void psi_ix_begin(struct psi_ix_tx *tx, struct ps_ix_root *root, struct psi_ix_pool *pool,
		bool at_root)
{
	tx->root = root;
	tx->pool = pool;
	tx->serve = pool && psi_ix_pool_tune(pool); /* a small store has none */
	tx->cur = root->node;
	tx->inplace = NULL;
	tx->copy = NULL;
	tx->at_root = at_root;
	tx->slot = NULL;
	tx->val = NULL;
	tx->built = tx->built0;
	tx->retired = tx->retired0;
	tx->nbuilt = tx->nretired = 0;
	tx->capbuilt = tx->capretired = PSI_IX_TX_INLINE;
	tx->bytes = 0;
	tx->retired_bytes = 0;
	tx->nkept = 0;
	tx->reuse = NULL;
	tx->reuse_ctx = NULL;
}

void psi_ix_reuse(struct psi_ix_tx *tx, void *(*fn)(void *ctx, size_t size), void *ctx)
{
	tx->reuse = fn;
	tx->reuse_ctx = ctx;
}

/* Where the first set of an update lands (first_kind()). */
struct first {
	struct ps_ix_leaf *l;
	struct ps_ix_inner *in; /* @l's parent; NULL: @l is the root */
	int c;			/* @l's slot in @in */
	int at;			/* IX_INPLACE: the entry */
	int i0, i1, na;		/* IX_LEAF_SLOT: the change, its new entries in tx->copy_add */
};

/*
 * The kind of the first set of an update that may store a slot, [s, e)
 * set to @pol in the index at @h, found on its way down to its leaf (in
 * @f): IX_INPLACE when it gives one range a new policy; IX_LEAF_SLOT
 * when, below an inner node, it changes one leaf into one that keeps its
 * interval and joins no neighbour (update() would end the same way, after
 * its general walk); IX_KEEP when it changes nothing there; else IX_WALK.
 */
static enum ix_kind first_kind(struct psi_ix_tx *tx, struct ps_ix_node *h, uint64_t s, uint64_t e,
		struct ps_policy *pol, struct first *f)
{
	struct ps_ix_node *root = h;
	struct ps_ix_inner *in = NULL;
	struct ps_ix_leaf *l;
	uint64_t hi = UINT64_MAX;
	int c = 0, cnt, n;

	while (h->height) {
		in = as_inner(h);
		c = child_of(in, s);
		if (c + 1 < in->h.n)
			hi = in->piv[c];
		h = in->child[c];
		/* As the readers' descent does (polstore/static/index.h). */
		__builtin_prefetch((const char *)h + 64);
		__builtin_prefetch((const char *)h + 128);
	}
	l = as_leaf(h);
	f->l = l;
	f->in = in;
	f->c = c;
	/* The rest of a full leaf, which a copy reads whole, while its starts are searched. */
	if (in) {
		__builtin_prefetch((const char *)l + 192);
		__builtin_prefetch((const char *)l + 256);
		__builtin_prefetch((const char *)l + 320);
		__builtin_prefetch((const char *)l + 384);
	}
	/* How many entries start by @s: the in-place test's and leaf_edit()'s. */
	cnt = (int)_ps_ix_count_le(_PS_IX_START(l), 1u << l->h.shift, s);
	if (pol && cnt && _PS_IX_START(l)[cnt - 1] == s && _PS_IX_END(l)[cnt - 1] == e) {
		f->at = cnt - 1;
		return IX_INPLACE;
	}
	/* Past the leaf's interval, or the root is the leaf: update() moves pivots or the root. */
	if (!in || e > hi)
		return IX_WALK;
	n = leaf_edit(l, s, e, pol, cnt, &f->i0, &f->i1, tx->copy_add, &f->na);
	if (n < 0)
		return IX_KEEP;
	/* A leaf that splits or goes short, or shrinks under a root it may let go: update(). */
	if (!n || n > (int)LEAF_CAP || (n < (int)LEAF_LOW && in->h.n > 1) ||
			l->h.shift != PS_IX_LEAF_SHIFT ||
			(n < l->h.n && &in->h == root && in->h.n <= INNER_LOW))
		return IX_WALK;
	return IX_LEAF_SLOT;
}

/* IX_INPLACE: entry @f->at of @f->l takes @pol at publication. */
static void inplace_note(struct psi_ix_tx *tx, const struct first *f, struct ps_policy *pol)
{
	tx->inplace = f->l;
	tx->inplace_at = f->at;
	tx->inplace_pol = pol;
	tx->inplace_hint = (int16_t)_ps_policy_hint(pol);
}

/*
 * IX_LEAF_SLOT: the new leaf allocated now, its contents written at
 * publication (copy_now()), its parent's slot noted.  Its lines may be
 * memory a grace period old, in no cache near, and the stores that miss
 * on them, made last, do not hold up the caller's update of its tree.
 */
static int leaf_slot(struct psi_ix_tx *tx, const struct first *f)
{
	struct ps_ix_node *x;

	if (retire(tx, &f->l->h))
		return -ENOMEM;
	x = new_node(tx, _PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT));
	if (!x)
		return -ENOMEM;
	x->shift = PS_IX_LEAF_SHIFT;
	tx->bytes += (ptrdiff_t)node_bytes(x);
	tx->copy = x;
	tx->copy_from = f->l;
	tx->copy_i0 = f->i0;
	tx->copy_i1 = f->i1;
	tx->copy_na = f->na;
	tx->slot = &f->in->child[f->c];
	tx->val = x;
	return 0;
}

/*
 * The nodes @o replacing the root of @height become the root at
 * publication: a level more while more than one is left; an inner root of
 * one child gives way to the child, one of a few to them joined.
 */
static int root_store(struct psi_ix_tx *tx, struct out *o, int height)
{
	struct ps_ix_node *nr;
	int err;

	while (o->n > 1) {
		struct out up;

		height++;
		if ((err = inners_out(tx, height, o->node, o->lo, o->n, &up)))
			return err;
		*o = up;
	}
	nr = o->n ? o->node[0] : NULL;
	while (nr && nr->height && nr->n == 1) {
		struct ps_ix_node *c = as_inner(nr)->child[0];

		if ((err = retire(tx, nr)))
			return err;
		nr = c;
	}
	if ((err = psi_ix_join_root(tx, &nr)))
		return err;
	tx->slot = &tx->root->node;
	tx->val = nr;
	tx->cur = nr;
	return 0;
}

int psi_ix_set(struct psi_ix_tx *tx, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_ix_node *root = tx->cur;
	struct out o;
	int err, height;

	if (tx->copy)
		copy_now(tx);
	if (pol && pol->mode == PS_MPOL_DEFAULT)
		pol = NULL;
	if (!root && !pol)
		return 0;
	if (root && !tx->at_root && root == tx->root->node && !tx->slot && !tx->inplace) {
		struct first f;

		switch (first_kind(tx, root, start, end, pol, &f)) {
		case IX_KEEP:
			return 0;
		case IX_INPLACE:
			inplace_note(tx, &f, pol);
			return 0;
		case IX_LEAF_SLOT:
			return leaf_slot(tx, &f);
		default:
			break;
		}
	}
	height = root ? root->height : 0;
	err = update(tx, root, height, 0, UINT64_MAX, start, end, pol, tx->at_root, true, &o);
	if (err)
		return err;
	if (o.n < 0)
		return 0; /* a slot store below (the one set of its update), or no change */
	return root_store(tx, &o, height);
}

void psi_ix_abort(struct psi_ix_tx *tx)
{
	size_t i;

	/* Every node built is private: never published. */
	for (i = 0; i < tx->nbuilt; i++)
		free_now(tx->pool, tx->built[i]);
	tx->nbuilt = tx->nretired = 0;
	tx->slot = NULL;
	tx->inplace = NULL;
	tx->copy = NULL;
	tx->bytes = 0;
	tx->retired_bytes = 0;
	tx->cur = tx->root->node;
	if (tx->pool)
		psi_ix_pool_grew(tx->pool, 0); /* nothing grew: the update's nodes are back */
}

bool psi_ix_publish(struct psi_ix_tx *tx)
{
	size_t i;

	if (tx->inplace) {
		struct leaf_fields f = leaf_fields(tx->inplace, tx->inplace->h.shift);

		PSI_WRITE_ONCE(f.hint[tx->inplace_at], tx->inplace_hint);
		/* Pairs with the readers' acquire load of the policy. */
		PSI_STORE_RELEASE(f.pol[tx->inplace_at], tx->inplace_pol);
		return false;
	}
	if (!tx->slot)
		return false;
	if (tx->copy)
		copy_now(tx);
	/* Pairs with the readers' acquire loads of the root and the child slots. */
	PSI_STORE_RELEASE(*tx->slot, tx->val);
	if (tx->pool) /* a small store has none */
		psi_ix_pool_grew(tx->pool, tx->bytes);
	for (i = 0; i < tx->nbuilt; i++) {
		struct ps_ix_node *h = tx->built[i];

		if (h->wflags & IX_DEAD) {
			free_now(tx->pool, h); /* replaced in its own batch: never reached */
		} else {
			h->wflags &= ~IX_WMASK;
			tx->nkept++;
		}
	}
	return tx->slot == &tx->root->node;
}

void psi_ix_end(struct psi_ix_tx *tx)
{
	if (tx->built != tx->built0)
		psi_free(tx->built);
	if (tx->retired != tx->retired0)
		psi_free(tx->retired);
	tx->built = tx->built0;
	tx->retired = tx->retired0;
	tx->capbuilt = tx->capretired = PSI_IX_TX_INLINE;
	tx->nbuilt = tx->nretired = 0;
}

/*
 * Free @h and everything below it: nodes from the pool onto @chain (or,
 * with no chain, back to the pool now), the others to the allocator.
 */
static void free_tree(struct psi_ix_pool *pool, struct psi_ix_pool_chain *chain,
		struct ps_ix_node *h)
{
	int i;

	if (h->height)
		for (i = 0; i < h->n; i++)
			free_tree(pool, chain, as_inner(h)->child[i]);
	if (chain && psi_ix_pool_tag_of(h))
		psi_ix_pool_link(chain, h);
	else
		free_now(pool, h);
}

void psi_ix_free_retired(struct psi_ix_pool *pool, void *const *entry, size_t n)
{
	struct psi_ix_pool_chain chain = {NULL, NULL};
	size_t i;

	for (i = 0; i < n; i++) {
		uintptr_t p = (uintptr_t)entry[i];
		struct ps_ix_node *h = (struct ps_ix_node *)(p & ~IX_SUBTREE);

		if (!h)
			continue;
		if (p & IX_SUBTREE)
			free_tree(pool, &chain, h);
		else if (psi_ix_pool_tag_of(h))
			psi_ix_pool_link(&chain, h);
		else
			psi_free(h);
	}
	psi_ix_pool_put_chain(pool, &chain);
}

size_t psi_ix_retired_bytes(const void *e)
{
	uintptr_t p = (uintptr_t)e;
	const struct ps_ix_node *h = (const struct ps_ix_node *)(p & ~IX_SUBTREE);

	return p & IX_SUBTREE ? psi_ix_bytes(h) : node_bytes(h);
}

void psi_ix_clear(struct ps_ix_root *root, struct psi_ix_pool *pool)
{
	psi_ix_pool_grew(pool, -(ptrdiff_t)psi_ix_bytes(root->node));
	if (root->node)
		free_tree(pool, NULL, root->node);
	root->node = NULL;
}

size_t psi_ix_bytes(const struct ps_ix_node *h)
{
	size_t b;
	int i;

	if (!h)
		return 0;
	b = node_bytes(h);
	if (h->height)
		for (i = 0; i < h->n; i++)
			b += psi_ix_bytes(as_inner(h)->child[i]);
	return b;
}
