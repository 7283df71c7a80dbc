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
	uint64_t *start, *end;
	struct ps_policy **pol;
	int16_t *hint;

	memcpy(x->w, l->w, bytes - sizeof(x->h));
	x->h.n = (uint16_t)(at + l->h.n - i1);
	x->h.shift = (uint8_t)shift;
	start = x->w;
	end = x->w + cap;
	pol = (struct ps_policy **)(void *)(x->w + 2 * cap);
	hint = (int16_t *)(void *)(x->w + 3 * cap);
	if (at != i1) {
		memmove(start + at, start + i1, (size_t)k * sizeof(*start));
		memmove(end + at, end + i1, (size_t)k * sizeof(*end));
		memmove(pol + at, pol + i1, (size_t)k * sizeof(*pol));
		memmove(hint + at, hint + i1, (size_t)k * sizeof(*hint));
		for (i = at + k; i < cap; i++) {
			start[i] = PS_IX_NONE;
			end[i] = 0;
			pol[i] = NULL;
			hint[i] = 0;
		}
	}
	for (i = 0; i < na; i++) {
		start[i0 + i] = add[i].start;
		end[i0 + i] = add[i].end;
		pol[i0 + i] = add[i].pol;
		hint[i0 + i] = (int16_t)add[i].hint;
	}
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
 * @h (interval [lo, hi), height @height; NULL: an empty index) with
 * [s, e) set to @pol, [s, e) within [lo, hi): the nodes replacing @h into
 * @o, or o->n = -1 when @h stays (the publication noted in @tx is a slot
 * store below, or nothing changed).  @copy forbids a slot store (the
 * caller copies this node anyway); @top: @h is the root.
 */
static int update(struct psi_ix_tx *tx, struct ps_ix_node *h, int height, uint64_t lo, uint64_t hi,
		uint64_t s, uint64_t e, struct ps_policy *pol, bool copy, bool top, struct out *o)
{
	struct ps_ix_inner *in = as_inner(h);
	struct out subs[2], *sp[2] = { &subs[0], &subs[1] };
	int ci, cj, err;

	if (!height) {
		const struct ps_ix_leaf *l = h ? as_leaf(h) : NULL;
		struct psi_ix_ent add[3], ent[LEAF_CAP + 2];
		int i0, i1, na, n = leaf_edit(l, s, e, pol, -1, &i0, &i1, add, &na), i, k = 0;
		bool append = h && hi == UINT64_MAX && h->n &&
			      s >= _PS_IX_END(as_leaf(h))[h->n - 1];

		if (n < 0) {
			o->n = -1;
			return 0;
		}
		if (h && (err = retire(tx, h)))
			return err;
		/* Most sets: one leaf in place of one, of the same capacity. */
		if (l && n > 0 && n <= (int)LEAF_CAP && leaf_shift(n, top) == l->h.shift) {
			o->node[0] = leaf_splice(tx, l, i0, i1, add, na);
			if (!o->node[0])
				return -ENOMEM;
			o->lo[0] = lo;
			o->n = 1;
			return 0;
		}
		for (i = 0; l && i < i0; i++)
			ent[k++] = leaf_ent(l, i);
		for (i = 0; i < na; i++)
			ent[k++] = add[i];
		for (i = i1; l && i < l->h.n; i++)
			ent[k++] = leaf_ent(l, i);
		return leaves_out(tx, ent, n, lo, top, append, o);
	}
	ci = child_of(in, s);
	cj = child_of(in, e - 1);
	if (ci == cj) {
		uint64_t clo = ci ? in->piv[ci - 1] : lo;
		uint64_t chi = ci + 1 < in->h.n ? in->piv[ci] : hi;

		err = update(tx, in->child[ci], height - 1, clo, chi, s, e, pol, copy, false, &subs[0]);
		if (err || subs[0].n < 0) {
			o->n = -1;
			return err;
		}
		/*
		 * One node for one, at its occupancy: one slot store publishes
		 * the update and this node stays.  A short one joins a
		 * neighbour as this node is copied (inner_out()).
		 */
		if (subs[0].n == 1 && !copy &&
				!node_under(subs[0].node[0], ci == in->h.n - 1 && hi == UINT64_MAX) &&
				!(top && psi_ix_root_fits(in, ci, subs[0].node[0]))) {
			tx->slot = &in->child[ci];
			tx->val = subs[0].node[0];
			o->n = -1;
			return 0;
		}
		if (height == 1 && subs[0].n == 2 && in->h.n > 1) {
			/*
			 * The leaf split: shared with a neighbour that has room,
			 * two leaves hold what three would (leaves stay fuller
			 * under random sets).
			 */
			int k = ci > 0 ? ci - 1 : -1, n = 0, i, j, a;

			if (ci + 1 < in->h.n && (k < 0 || in->child[ci + 1]->n < in->child[k]->n))
				k = ci + 1;
			if (subs[0].node[0]->n + subs[0].node[1]->n + in->child[k]->n <=
					2 * (int)LEAF_CAP - (int)LEAF_LOW) {
				struct ps_ix_node *part[3];
				struct psi_ix_ent ent[2 * LEAF_CAP];

				part[k < ci ? 0 : 2] = in->child[k];
				part[k < ci ? 1 : 0] = subs[0].node[0];
				part[k < ci ? 2 : 1] = subs[0].node[1];
				for (j = 0; j < 3; j++) {
					for (i = 0; i < part[j]->n; i++)
						ent[n++] = leaf_ent(as_leaf(part[j]), i);
					if ((err = retire(tx, part[j])))
						return err;
				}
				a = k < ci ? k : ci;
				err = leaves_out(tx, ent, n, a ? in->piv[a - 1] : lo, false, false, &subs[0]);
				if (err || (err = retire(tx, h)))
					return err;
				return inner_out(tx, in, lo, hi, a, a + 1, sp, 1, o);
			}
		}
		if ((err = retire(tx, h)))
			return err;
		return inner_out(tx, in, lo, hi, ci, ci, sp, 1, o);
	}
	/*
	 * [s, e) crosses children ci .. cj: those between go whole, ci takes
	 * the new range (its interval now ends at e), cj loses [s, e) and
	 * begins at e.
	 */
	{
		uint64_t clo = ci ? in->piv[ci - 1] : lo;
		uint64_t cjlo = in->piv[cj - 1];
		uint64_t chi = cj + 1 < in->h.n ? in->piv[cj] : hi;
		bool same;
		int i;

		for (i = ci + 1; i < cj; i++)
			if ((err = retire_all(tx, in->child[i])))
				return err;
		err = update(tx, in->child[ci], height - 1, clo, e, s, e, pol, true, false, &subs[0]);
		if (err)
			return err;
		same = subs[0].n < 0;
		if (subs[0].n < 0) {
			/* Unchanged (a removal that touched nothing there): kept as it is. */
			subs[0].n = 1;
			subs[0].node[0] = in->child[ci];
			subs[0].lo[0] = clo;
		}
		/* cj loses [cjlo, e); its interval now begins at e. */
		err = update(tx, in->child[cj], height - 1, cjlo, chi, cjlo, e, NULL, true, false,
				&subs[1]);
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
		if ((err = retire(tx, h)))
			return err;
		return inner_out(tx, in, lo, hi, ci, cj, sp, 2, o);
	}
}

void psi_ix_begin(struct psi_ix_tx *tx, struct ps_ix_root *root, struct psi_ix_pool *pool,
		bool at_root)
{
	tx->root = root;
	tx->pool = pool;
	tx->serve = psi_ix_pool_tune(pool);
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

/*
 * The first set of an update that may store a slot, [s, e) set to @pol in
 * the index at @h: when it gives one range a new policy, in place; when,
 * below an inner node, it changes one leaf into one that keeps its
 * interval and joins no neighbour, the new leaf is allocated, its copy
 * left to psi_ix_publish() and its parent's slot noted, without the
 * general walk of update() (which would end the same way).
 * Return: 1 when done, 0 when update() must do it (nothing built), or
 * -ENOMEM.
 */
static int set_one_leaf(struct psi_ix_tx *tx, struct ps_ix_node *h, uint64_t s, uint64_t e,
		struct ps_policy *pol)
{
	struct ps_ix_node *x, *root = h;
	struct ps_ix_inner *in = NULL;
	struct ps_ix_leaf *l;
	uint64_t hi = UINT64_MAX;
	int c = 0, cnt, i0, i1, na, n;

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
	/* The rest of a full leaf, which a copy reads whole, while its starts are searched. */
	if (in) {
		__builtin_prefetch((const char *)l + 192);
		__builtin_prefetch((const char *)l + 256);
		__builtin_prefetch((const char *)l + 320);
		__builtin_prefetch((const char *)l + 384);
	}
	/* How many entries start by @s: the in-place test's and leaf_edit()'s. */
	cnt = (int)_ps_ix_count_le(_PS_IX_START(l), 1u << l->h.shift, s);
	if (pol && cnt) {
		int i = cnt - 1;

		if (_PS_IX_START(l)[i] == s && _PS_IX_END(l)[i] == e) {
			tx->inplace = l;
			tx->inplace_at = i;
			tx->inplace_pol = pol;
			tx->inplace_hint = (int16_t)_ps_policy_hint(pol);
			return 1;
		}
	}
	/* Past the leaf's interval, or the root is the leaf: update() moves pivots or the root. */
	if (!in || e > hi)
		return 0;
	n = leaf_edit(l, s, e, pol, cnt, &i0, &i1, tx->copy_add, &na);
	if (n < 0)
		return 1;
	/* A leaf that splits or goes short, or shrinks under a root it may let go: update(). */
	if (!n || n > (int)LEAF_CAP || (n < (int)LEAF_LOW && in->h.n > 1) ||
			l->h.shift != PS_IX_LEAF_SHIFT ||
			(n < l->h.n && &in->h == root && in->h.n <= INNER_LOW))
		return 0;
	if (retire(tx, &l->h))
		return -ENOMEM;
	/*
	 * The new leaf now, its contents at publication: its lines may be
	 * memory a grace period old, in no cache near, and the stores that
	 * miss on them, made last, do not hold up the caller's update of its
	 * tree.
	 */
	x = new_node(tx, _PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT));
	if (!x)
		return -ENOMEM;
	x->shift = PS_IX_LEAF_SHIFT;
	tx->bytes += (ptrdiff_t)node_bytes(x);
	tx->copy = x;
	tx->copy_from = l;
	tx->copy_i0 = i0;
	tx->copy_i1 = i1;
	tx->copy_na = na;
	tx->slot = &in->child[c];
	tx->val = x;
	return 1;
}

int psi_ix_set(struct psi_ix_tx *tx, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_ix_node *root = tx->cur, *nr;
	struct out o;
	int err, height;

	if (tx->copy)
		copy_now(tx);
	if (pol && pol->mode == PS_MPOL_DEFAULT)
		pol = NULL;
	if (!root && !pol)
		return 0;
	if (root && !tx->at_root && root == tx->root->node && !tx->slot && !tx->inplace) {
		err = set_one_leaf(tx, root, start, end, pol);
		if (err)
			return err < 0 ? err : 0;
	}
	height = root ? root->height : 0;
	err = update(tx, root, height, 0, UINT64_MAX, start, end, pol, tx->at_root, true, &o);
	if (err)
		return err;
	if (o.n < 0)
		return 0; /* a slot store below (the one set of its update), or no change */
	/* The root itself changes: a level more while more than one node is left. */
	while (o.n > 1) {
		struct out up;

		height++;
		if ((err = inners_out(tx, height, o.node, o.lo, o.n, &up)))
			return err;
		o = up;
	}
	nr = o.n ? o.node[0] : NULL;
	/* An inner root of one child gives way to the child; one of a few, to them joined. */
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
	psi_ix_pool_grew(tx->pool, 0); /* nothing grew: the update's nodes are back */
}

bool psi_ix_publish(struct psi_ix_tx *tx)
{
	size_t i;

	if (tx->inplace) {
		struct ps_ix_leaf *l = tx->inplace;
		int16_t *hint = (int16_t *)(void *)(l->w + ((size_t)3 << l->h.shift));
		struct ps_policy **pol = (struct ps_policy **)(void *)(l->w + ((size_t)2 << l->h.shift));

		PSI_WRITE_ONCE(hint[tx->inplace_at], tx->inplace_hint);
		/* Pairs with the readers' acquire load of the policy. */
		PSI_STORE_RELEASE(pol[tx->inplace_at], tx->inplace_pol);
		return false;
	}
	if (!tx->slot)
		return false;
	if (tx->copy)
		copy_now(tx);
	/* Pairs with the readers' acquire loads of the root and the child slots. */
	PSI_STORE_RELEASE(*tx->slot, tx->val);
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
