// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index's occupancy (rangeindex_join.h).
 *
 * The invariant: every leaf but the root and the last leaf of the index
 * holds at least LEAF_LOW ranges (a quarter of its capacity), and every
 * inner node but the root at least INNER_LOW children (a quarter of its
 * fan-out); an inner root has at least two children.  So no node below
 * the root is an only child, and an index of n ranges has at most
 * log4(n / 4) + 1 levels.  psi_ix_check() checks it.
 *
 * Splits keep it (leaves_out(), inners_out(): the smaller part of a split
 * holds at least a quarter); removals break it: a set inside one leaf
 * leaves that leaf short, and a set across children drops the children
 * between whole and trims the two at its edges, which may leave both
 * short, and their parent short of children, and so on up.  update()
 * gathers the children of each node it rebuilds, and psi_ix_join() makes
 * each short one it made join a neighbour (one whose entries fit beside
 * its own, the fuller of two that do), or, when neither fits, share with
 * the smaller: the short one takes what its occupancy needs and the other
 * keeps the rest.  Even shares would leave nodes half full behind a
 * removal that sweeps across a store (munmap() of most of each mapping
 * in turn); these leave them about 3/4 full, and the short one, where the
 * sets are, grows by the joins that follow.  What a join makes may still
 * be short (two short neighbours): it joins again.  The node rebuilt may
 * end short in turn: its parent, which the update rebuilds too, joins
 * it then; and when two inner nodes join, their children side by side
 * join too (a short only child had no neighbour before).  A root of one
 * child gives way to it (psi_ix_set()), and one of at most a quarter of
 * its children that fit in one node to that node (psi_ix_join_root()), so
 * the index loses levels as it shrinks.
 *
 * A join or share reads its neighbour (published, or made by the same
 * update) and makes new nodes with new_node() before anything is
 * published; both nodes it replaced are retired: an update that fails
 * later leaves the index as it was, and its bytes stay counted exactly.
 */
#include "rangeindex_join.h"
#include "rangeindex_node.h"

/*
 * How many of @t entries (or children) go to the left of two nodes that
 * share them, the right one short when @right: the short one gets what
 * its occupancy needs, the other keeps the rest (the short one is where
 * the sets are, and grows by the joins that follow; the other stays as
 * full as it can: even shares would leave nodes half full behind a
 * shrinking sweep).
 */
static int share_at(int t, int low, bool right)
{
	return right ? t - low : low;
}

/*
 * Adjacent children @x and @y (lower bounds @xlo, @ylo; @open: @y is the
 * last of its level in the index; @right: @y is the short one) as one
 * node when they fit in one, else as two sharing them (share_at()): the
 * new nodes in @out, their lower bounds in @olo.  Return: how many (1 or
 * 2), or -ENOMEM.
 */
static int join_two(struct psi_ix_tx *tx, struct ps_ix_node *x, struct ps_ix_node *y, uint64_t xlo,
		uint64_t ylo, bool open, bool right, struct ps_ix_node **out, uint64_t *olo)
{
	int t = x->n + y->n, k, i, err;

	if (!x->height) {
		struct psi_ix_ent e[2 * LEAF_CAP];

		for (i = 0; i < x->n; i++)
			e[i] = leaf_ent(as_leaf(x), i);
		for (i = 0; i < y->n; i++)
			e[x->n + i] = leaf_ent(as_leaf(y), i);
		k = t <= (int)LEAF_CAP ? t : share_at(t, LEAF_LOW, right);
		out[0] = leaf_make(tx, e, k, PS_IX_LEAF_SHIFT);
		if (!out[0])
			return -ENOMEM;
		if (k < t) {
			out[1] = leaf_make(tx, e + k, t - k, PS_IX_LEAF_SHIFT);
			if (!out[1])
				return -ENOMEM;
			/* Sorted, disjoint ranges: the first right one's start divides them. */
			olo[1] = e[k].start;
		}
	} else {
		struct ps_ix_node *c[2 * PS_IX_FAN];
		uint64_t lo[2 * PS_IX_FAN];

		for (i = 0; i < x->n; i++) {
			c[i] = as_inner(x)->child[i];
			lo[i] = i ? as_inner(x)->piv[i - 1] : xlo;
		}
		for (i = 0; i < y->n; i++) {
			c[x->n + i] = as_inner(y)->child[i];
			lo[x->n + i] = i ? as_inner(y)->piv[i - 1] : ylo;
		}
		/*
		 * An only child is short of its occupancy with no neighbour
		 * to join (its parent is, and joins here): their children
		 * side by side, it has one now.
		 */
		if ((err = psi_ix_join(tx, c, lo, &t, 0, t, open)))
			return err;
		k = t <= PS_IX_FAN ? t : share_at(t, INNER_LOW, right);
		out[0] = inner_make(tx, x->height, c, lo, k);
		if (!out[0])
			return -ENOMEM;
		if (k < t) {
			out[1] = inner_make(tx, x->height, c + k, lo + k, t - k);
			if (!out[1])
				return -ENOMEM;
			olo[1] = lo[k];
		}
	}
	olo[0] = xlo;
	if ((err = retire(tx, x)) || (err = retire(tx, y)))
		return err;
	return k < t ? 2 : 1;
}

/* Entries a node of @h's kind holds. */
static int cap_of(const struct ps_ix_node *h)
{
	return h->height ? PS_IX_FAN : (int)LEAF_CAP;
}

/*
 * Whether a short node of @x entries joins or shares with its right
 * neighbour (of @right entries) rather than its left one (@left), nodes
 * holding @cap.
 */
static bool pick(int left, int right, int x, int cap)
{
	bool jl = x + left <= cap, jr = x + right <= cap;

	if (jl != jr)
		return jr;
	return jl ? right > left : right < left;
}

int psi_ix_join(struct psi_ix_tx *tx, struct ps_ix_node **ch, uint64_t *clo, int *n, int a, int b,
		bool open)
{
	struct ps_ix_node *out[2];
	uint64_t olo[2];
	int i = a, l, parts;

	while (i < b && *n > 1) {
		if (!node_under(ch[i], open && i == *n - 1)) {
			i++;
			continue;
		}
		/*
		 * A join rather than a share where one can, into the fuller
		 * node of the two it can make; else a share with the smaller
		 * neighbour.
		 */
		if (i == 0)
			l = 0;
		else if (i == *n - 1)
			l = i - 1;
		else
			l = pick(ch[i - 1]->n, ch[i + 1]->n, ch[i]->n, cap_of(ch[i])) ? i : i - 1;
		parts = join_two(tx, ch[l], ch[l + 1], clo[l], clo[l + 1], open && l + 2 == *n, l < i,
				out, olo);
		if (parts < 0)
			return parts;
		ch[l] = out[0];
		if (parts == 2) {
			/* Both at their occupancy now. */
			ch[l + 1] = out[1];
			clo[l + 1] = olo[1];
			i = l + 2;
			continue;
		}
		memmove(ch + l + 1, ch + l + 2, (size_t)(*n - l - 2) * sizeof(*ch));
		memmove(clo + l + 1, clo + l + 2, (size_t)(*n - l - 2) * sizeof(*clo));
		(*n)--;
		/* The joined node may be short still: it is looked at again. */
		b = b > l + 1 ? b - 1 : l + 1;
		i = l;
	}
	return 0;
}

bool psi_ix_root_fits(const struct ps_ix_inner *in, int ci, const struct ps_ix_node *x)
{
	int t = 0, i;

	if (in->h.n > INNER_LOW)
		return false;
	for (i = 0; i < in->h.n; i++)
		t += i == ci ? x->n : in->child[i]->n;
	return t <= cap_of(in->child[0]);
}

int psi_ix_join_root(struct psi_ix_tx *tx, struct ps_ix_node **root)
{
	struct ps_ix_node *r = *root, *x;
	struct ps_ix_inner *in;
	int t = 0, i, j, err;

	if (!r || !r->height || !psi_ix_root_fits(as_inner(r), -1, NULL))
		return 0;
	in = as_inner(r);
	for (i = 0; i < r->n; i++)
		t += in->child[i]->n;
	if (r->height == 1) {
		struct psi_ix_ent e[LEAF_CAP];
		int k = 0;

		for (i = 0; i < r->n; i++)
			for (j = 0; j < in->child[i]->n; j++)
				e[k++] = leaf_ent(as_leaf(in->child[i]), j);
		/* The root leaf: a small store's, of SMALL_CAP, when that holds it. */
		x = leaf_make(tx, e, t, t <= (int)SMALL_CAP ? PS_IX_SMALL_SHIFT : PS_IX_LEAF_SHIFT);
	} else {
		struct ps_ix_node *c[PS_IX_FAN];
		uint64_t lo[PS_IX_FAN];
		int k = 0;

		for (i = 0; i < r->n; i++) {
			const struct ps_ix_inner *ci = as_inner(in->child[i]);

			for (j = 0; j < ci->h.n; j++) {
				c[k] = ci->child[j];
				lo[k++] = j ? ci->piv[j - 1] : i ? in->piv[i - 1] : 0;
			}
		}
		x = inner_make(tx, r->height - 1, c, lo, t);
	}
	if (!x)
		return -ENOMEM;
	for (i = 0; i < r->n; i++)
		if ((err = retire(tx, in->child[i])))
			return err;
	if ((err = retire(tx, r)))
		return err;
	*root = x;
	return 0;
}
