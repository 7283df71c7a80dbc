// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A copy of a whole read index (rangeindex.h: psi_ix_rebuild()), every
 * node from the allocator: what a store whose pool stopped serving
 * publishes in place of an index whose nodes hold the pool's chunks.
 * Leaves are filled to 3/4 (as a split leaves them; fuller where 3/4
 * would add a level), inner nodes evenly,
 * bottom up; the first leaf's interval begins at 0 and each next one's at
 * its first range, so every range lies in its leaf's interval.
 */
#include <errno.h>
#include <string.h>

#include <polstore/static/policy.h>

#include "alloc_internal.h"
#include "compiler.h"
#include "rangeindex.h"
#include "rangeindex_node.h"

#define RB_CAP (1u << PS_IX_LEAF_SHIFT)
#define RB_SMALL (1u << PS_IX_SMALL_SHIFT)
#define RB_FILL (RB_CAP * 3 / 4)

struct rb_fill {
	struct ps_ix_node **all; /* every node built, for the abort */
	size_t nall;
	struct ps_ix_node **ch;	      /* the level being built: its nodes, */
	uint64_t *lo;		      /* and their lower bounds */
	size_t nleaf, perleaf, extra; /* leaves; each holds @perleaf, the first @extra one more */
	unsigned shift;
	size_t at; /* entries put into leaf @nleaf_done so far */
	size_t nleaf_done;
	size_t bytes;
};

static size_t rb_count(const struct ps_ix_node *h)
{
	const struct ps_ix_inner *in = (const struct ps_ix_inner *)(const void *)h;
	size_t n = 0;
	int i;

	if (!h->height)
		return h->n;
	for (i = 0; i < h->n; i++)
		n += rb_count(in->child[i]);
	return n;
}

static struct ps_ix_node *rb_node(struct rb_fill *f, size_t size)
{
	struct ps_ix_node *h = psi_alloc(size);

	if (!h)
		return NULL;
	memset(h, 0, sizeof(*h));
	f->all[f->nall++] = h;
	f->bytes += psi_alloc_charge(size);
	return h;
}

/* The next leaf, its unused slots cleared as a leaf's must be; false without memory. */
static bool rb_leaf_begin(struct rb_fill *f)
{
	struct ps_ix_leaf *l;
	unsigned cap = 1u << f->shift, i;

	l = (struct ps_ix_leaf *)(void *)rb_node(f, _PS_IX_LEAF_BYTES(f->shift));
	if (!l)
		return false;
	l->h.shift = (uint8_t)f->shift;
	for (i = 0; i < cap; i++)
		leaf_put(leaf_fields(l, f->shift), i, NULL);
	f->ch[f->nleaf_done] = &l->h;
	f->lo[f->nleaf_done] = 0;
	f->at = 0;
	return true;
}

/* Every range of @h, in order, into the leaves of @f. */
static int rb_leaves(struct rb_fill *f, const struct ps_ix_node *h)
{
	int i, err;

	if (h->height) {
		const struct ps_ix_inner *in = (const struct ps_ix_inner *)(const void *)h;

		for (i = 0; i < h->n; i++)
			if ((err = rb_leaves(f, in->child[i])))
				return err;
		return 0;
	}
	for (i = 0; i < h->n; i++) {
		const struct ps_ix_leaf *from = (const struct ps_ix_leaf *)(const void *)h;
		size_t want = f->perleaf + (f->nleaf_done < f->extra);
		struct ps_ix_leaf *l;
		/* The writer's: a policy stored in place is the writer's store. */
		struct psi_ix_ent ent = { _PS_IX_START(from)[i], _PS_IX_END(from)[i],
			_PS_IX_POL(from)[i], _PS_IX_HINT(from)[i] };

		if (!f->ch[f->nleaf_done] && !rb_leaf_begin(f))
			return -ENOMEM;
		l = (struct ps_ix_leaf *)(void *)f->ch[f->nleaf_done];
		if (!f->at && f->nleaf_done)
			f->lo[f->nleaf_done] = ent.start;
		leaf_put(leaf_fields(l, f->shift), f->at, &ent);
		l->h.n = (uint16_t)++f->at;
		if (f->at == want)
			f->nleaf_done++;
	}
	return 0;
}

/*
 * The shape of the copy of @n > 0 ranges: its leaves' shift, its leaves
 * (3/4 full, or fuller where that would take a level more than full
 * leaves need, so that the copy is never deeper than an index of full
 * nodes); *@height its root's height.  Return: its nodes.
 */
static size_t rb_shape(size_t n, unsigned *shift, size_t *nleaf, int *height)
{
	size_t total, m, reach;

	*shift = n <= RB_SMALL ? PS_IX_SMALL_SHIFT : PS_IX_LEAF_SHIFT;
	*nleaf = n <= RB_CAP ? 1 : (n + RB_FILL - 1) / RB_FILL;
	/* @reach: the leaves a tree as low as full leaves allow can hold. */
	for (reach = 1; reach * RB_CAP < n; reach *= PS_IX_FAN)
		;
	if (*nleaf > reach)
		*nleaf = reach;
	*height = 0;
	for (total = *nleaf, m = *nleaf; m > 1; total += m, ++*height)
		m = (m + PS_IX_FAN - 1) / PS_IX_FAN;
	return total;
}

bool psi_ix_rebuild_pays(const struct ps_ix_node *root, size_t n, size_t bytes)
{
	size_t nleaf;
	unsigned shift;
	int height;

	if (!root || !n)
		return false;
	rb_shape(n, &shift, &nleaf, &height);
	return bytes - bytes / 5 > psi_ix_rebuilt_bytes(n) || root->height > height;
}

size_t psi_ix_rebuilt_bytes(size_t n)
{
	size_t nleaf, total;
	unsigned shift;
	int height;

	if (!n)
		return 0;
	total = rb_shape(n, &shift, &nleaf, &height);
	return nleaf * psi_alloc_charge(_PS_IX_LEAF_BYTES(shift)) +
	       (total - nleaf) * psi_alloc_charge(sizeof(struct ps_ix_inner));
}

int psi_ix_rebuild(const struct ps_ix_node *from, struct ps_ix_node **to, size_t *bytes)
{
	struct rb_fill f = {0};
	size_t n, m, total, i;
	int height = 0;

	*to = NULL;
	*bytes = 0;
	n = from ? rb_count(from) : 0;
	if (!n)
		return 0;
	total = rb_shape(n, &f.shift, &f.nleaf, &height);
	height = 0;
	f.perleaf = n / f.nleaf;
	f.extra = n % f.nleaf;
	f.all = psi_alloc(total * sizeof(*f.all) + f.nleaf * (sizeof(*f.ch) + sizeof(*f.lo)));
	if (!f.all)
		return -ENOMEM;
	f.ch = (struct ps_ix_node **)(f.all + total);
	f.lo = (uint64_t *)(void *)(f.ch + f.nleaf);
	memset(f.ch, 0, f.nleaf * sizeof(*f.ch));
	if (rb_leaves(&f, from))
		goto nomem;
	/* Each level: its nodes of up to PS_IX_FAN of the level below, evenly, in place. */
	for (m = f.nleaf; m > 1;) {
		size_t parts = (m + PS_IX_FAN - 1) / PS_IX_FAN, p, at = 0;

		height++;
		for (p = 0; p < parts; p++) {
			size_t k = (m - at) / (parts - p);
			struct ps_ix_inner *in =
					(struct ps_ix_inner *)(void *)rb_node(&f, sizeof(*in));
			uint64_t lo = f.lo[at];

			if (!in)
				goto nomem;
			in->h.n = (uint16_t)k;
			in->h.height = (uint8_t)height;
			for (i = 0; i < PS_IX_FAN; i++) {
				if (i < PS_IX_FAN - 1)
					in->piv[i] = i + 1 < k ? f.lo[at + i + 1] : PS_IX_NONE;
				in->child[i] = i < k ? f.ch[at + i] : NULL;
			}
			/* @p <= @at: the slots written were read. */
			f.ch[p] = &in->h;
			f.lo[p] = lo;
			at += k;
		}
		m = parts;
	}
	*to = f.ch[0];
	*bytes = f.bytes;
	psi_free(f.all);
	return 0;
nomem:
	for (i = 0; i < f.nall; i++)
		psi_free(f.all[i]);
	psi_free(f.all);
	return -ENOMEM;
}

void *psi_ix_retired_whole(struct ps_ix_node *h)
{
	return (void *)((uintptr_t)h | PSI_IX_SUBTREE);
}
