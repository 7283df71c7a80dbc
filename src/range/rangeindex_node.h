/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read index's nodes as an update makes them (rangeindex.c,
 * rangeindex_join.c, ixrebuild.c): the writer's flags, the occupancy
 * bounds, the writer's view of a leaf's layout (leaf_fields()), and the
 * makers, inline in those files.  Every node an update makes is allocated
 * with new_node() and marked fresh until the update publishes; every node
 * that leaves the index goes through retire(), which counts its bytes out
 * and lists it for the grace period (or, fresh, marks it dead).
 */
#ifndef POLSTORE_SRC_RANGEINDEX_NODE_H
#define POLSTORE_SRC_RANGEINDEX_NODE_H

#include <errno.h>
#include <string.h>

#include <polstore/static/index.h>

#include "compiler.h"
#include "ixpool.h"
#include "ixtx.h"

#define IX_FRESH 1u /* built by the update in progress: not published */
#define IX_DEAD 2u  /* built and replaced again before publication */
#define IX_WMASK 0xffffu /* the update's flags; above them, the node's pool tag (ixpool.h) */
#define IX_SUBTREE PSI_IX_SUBTREE

#define LEAF_CAP (1u << PS_IX_LEAF_SHIFT)
#define SMALL_CAP (1u << PS_IX_SMALL_SHIFT)
/*
 * Occupancy (rangeindex_join.c): a leaf holds at least LEAF_LOW ranges
 * and an inner node at least INNER_LOW children, a quarter, but the root
 * and the last leaf of the index (whose interval ends at UINT64_MAX).
 */
#define LEAF_LOW (LEAF_CAP / 4)
#define INNER_LOW (PS_IX_FAN / 4)
/* The left part of a leaf that splits: 3/4 of one (leaves_out()). */
#define LEAF_JOIN (LEAF_CAP * 3 / 4)

_Static_assert(sizeof(struct ps_ix_node) == 8, "a node's header is one word");
_Static_assert(sizeof(struct ps_ix_inner) == 256, "an inner node is four lines");

/* What a node holds: its slot of a pool's chunk, or what the allocator holds for it. */
static inline size_t node_bytes(const struct ps_ix_node *h)
{
	size_t size = psi_ix_node_size(h);

	return psi_ix_pool_tag_of(h) ? size : psi_alloc_charge(size);
}

static inline struct ps_ix_leaf *as_leaf(const struct ps_ix_node *h)
{
	return (struct ps_ix_leaf *)(void *)h;
}

static inline struct ps_ix_inner *as_inner(const struct ps_ix_node *h)
{
	return (struct ps_ix_inner *)(void *)h;
}

/*
 * Room for one more entry on a list of the transaction, growing it beyond
 * its entries in the transaction (@v0); -ENOMEM when it cannot.
 */
static inline int list_reserve(void ***v, size_t n, size_t *cap, void **v0)
{
	if (n == *cap) {
		size_t ncap = 2 * *cap;
		void **nv = psi_alloc(ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		memcpy(nv, *v, n * sizeof(*nv));
		if (*v != v0)
			psi_free(*v);
		*v = nv;
		*cap = ncap;
	}
	return 0;
}

static inline int list_push(void ***v, size_t *n, size_t *cap, void **v0, void *p)
{
	if (list_reserve(v, *n, cap, v0))
		return -ENOMEM;
	(*v)[(*n)++] = p;
	return 0;
}

/* A node of @size bytes for the update (its header cleared, marked fresh), or NULL. */
static inline void *new_node(struct psi_ix_tx *tx, size_t size)
{
	struct ps_ix_node *h = NULL;
	uint32_t tag = 0;

	/*
	 * The list's room first: a pooled node given back before its header
	 * says what it is would go on the wrong free list.
	 */
	if (list_reserve(&tx->built, tx->nbuilt, &tx->capbuilt, tx->built0))
		return NULL;
	/* A large index's inner nodes and full leaves: from its pool (ixpool.h). */
	if (tx->serve && (size == sizeof(struct ps_ix_inner) ||
				 size == _PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT)))
		h = psi_ix_pool_get(tx->pool, size == sizeof(struct ps_ix_inner), &tag);
	/*
	 * Otherwise, or when no chunk can be had, from the allocator; not
	 * cache-line aligned: an aligned block costs a line more than the
	 * allocator's header, and a search reads the same lines in either.
	 */
	if (!h && tx->reuse)
		h = tx->reuse(tx->reuse_ctx, size);
	if (!h)
		h = psi_alloc(size);
	if (!h)
		return NULL;
	/* The makers write every field but the header's. */
	memset(h, 0, sizeof(*h));
	h->wflags = IX_FRESH | tag << 16;
	tx->built[tx->nbuilt++] = h;
	return h;
}

/* @h leaves the index with this update. */
static inline int retire(struct psi_ix_tx *tx, struct ps_ix_node *h)
{
	if (h->wflags & IX_FRESH) {
		h->wflags |= IX_DEAD;
		tx->bytes -= (ptrdiff_t)node_bytes(h);
		return 0;
	}
	tx->bytes -= (ptrdiff_t)node_bytes(h);
	tx->retired_bytes += node_bytes(h);
	return list_push(&tx->retired, &tx->nretired, &tx->capretired, tx->retired0, h);
}

/*
 * The fields of leaf @l, of capacity 1 << @shift, as the writer writes
 * them: the layout of polstore/static/index.h (@shift a constant where
 * the caller knows it, so that the offsets are).
 */
struct leaf_fields {
	uint64_t *start;
	uint64_t *end;
	struct ps_policy **pol;
	int16_t *hint;
};

static inline __attribute__((always_inline)) struct leaf_fields leaf_fields(struct ps_ix_leaf *l,
		unsigned shift)
{
	return (struct leaf_fields){ l->w + _PS_IX_W_START(shift), l->w + _PS_IX_W_END(shift),
		(struct ps_policy **)(void *)(l->w + _PS_IX_W_POL(shift)),
		(int16_t *)(void *)(l->w + _PS_IX_W_HINT(shift)) };
}

/* Entry @i of a leaf being written: @e, or, NULL, an unused slot. */
static inline __attribute__((always_inline)) void leaf_put(struct leaf_fields f, unsigned i,
		const struct psi_ix_ent *e)
{
	f.start[i] = e ? e->start : PS_IX_NONE;
	f.end[i] = e ? e->end : 0;
	f.pol[i] = e ? e->pol : NULL;
	f.hint[i] = (int16_t)(e ? e->hint : 0);
}

/* A leaf of capacity 1 << @shift holding @e[0, n). */
static inline struct ps_ix_node *leaf_make(struct psi_ix_tx *tx, const struct psi_ix_ent *e, int n,
		unsigned shift)
{
	struct ps_ix_leaf *l = new_node(tx, _PS_IX_LEAF_BYTES(shift));
	unsigned i, cap = 1u << shift;
	struct leaf_fields f;

	if (!l)
		return NULL;
	l->h.n = (uint16_t)n;
	l->h.shift = (uint8_t)shift;
	tx->bytes += (ptrdiff_t)node_bytes(&l->h);
	f = leaf_fields(l, shift);
	for (i = 0; i < cap; i++)
		leaf_put(f, i, i < (unsigned)n ? &e[i] : NULL);
	return &l->h;
}

/* An inner node of @height over @child[0, n), whose lower bounds are @lo (lo[0] unread). */
static inline struct ps_ix_node *inner_make(struct psi_ix_tx *tx, int height,
		struct ps_ix_node *const *child, const uint64_t *lo, int n)
{
	struct ps_ix_inner *in = new_node(tx, sizeof(*in));
	int i;

	if (!in)
		return NULL;
	in->h.n = (uint16_t)n;
	in->h.height = (uint8_t)height;
	tx->bytes += (ptrdiff_t)node_bytes(&in->h);
	for (i = 0; i < PS_IX_FAN; i++) {
		if (i < PS_IX_FAN - 1)
			in->piv[i] = i + 1 < n ? lo[i + 1] : PS_IX_NONE;
		in->child[i] = i < n ? child[i] : NULL;
	}
	return &in->h;
}

/* Entry @i of leaf @l (its policy and hint may change in place: see the file comment). */
static inline struct psi_ix_ent leaf_ent(const struct ps_ix_leaf *l, int i)
{
	return (struct psi_ix_ent){ _PS_IX_START(l)[i], _PS_IX_END(l)[i],
		_PS_LOAD_ACQUIRE(_PS_IX_POL(l)[i]), _PS_READ_ONCE(_PS_IX_HINT(l)[i]) };
}

/*
 * Whether @h, a child of an inner node, is under its occupancy: @last, it
 * is the last leaf of the index (exempt: a store filled front to back
 * keeps its other leaves full, and its last one grows from one range).
 */
static inline bool node_under(const struct ps_ix_node *h, bool last)
{
	return h->height ? h->n < INNER_LOW : !last && h->n < LEAF_LOW;
}

#endif /* POLSTORE_SRC_RANGEINDEX_NODE_H */
