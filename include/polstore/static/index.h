/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read index of the RCU stores as its readers see it: node layouts and
 * the descent.  A B+-tree of wide nodes over the store's ranges, which the
 * writer keeps equal to its red-black tree: inner nodes of up to 16
 * children and 15 pivots, leaves of up to 16 ranges (4 in a small store's
 * only leaf).  Below the root every node is at least a quarter full (the
 * last leaf excepted), so removals keep the depth of a fresh index's (or
 * one level more).  A lookup reads one root-to-leaf path of 4-5 nodes at
 * 10^6 ranges where the tree's walk reads about 20.  A small index (a
 * leaf, or an inner node over leaves) is searched by comparing every key
 * at once.
 *
 * Nodes are immutable once published, but for the policy and hint of an
 * entry that a set gives a new policy (each read once: a reader pairs
 * either with either, and answers as before or after the set): a set
 * builds new nodes and publishes them with one release store into a child
 * slot or the root, and retires the ones they replace through a grace
 * period (src/range/rangeindex.c).
 *
 * Not an API: see polstore/static/rtree.h.  Every field the descent reads
 * is in the identity of polstore/static/layout.h.
 */
#ifndef POLSTORE_STATIC_INDEX_H
#define POLSTORE_STATIC_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include <polstore/static/atomic.h>

struct ps_policy;

/* Children of an inner node, at most. */
#define PS_IX_FAN 16
/* Capacity of a leaf: 1 << PS_IX_LEAF_SHIFT, or 1 << PS_IX_SMALL_SHIFT for a small store's root. */
#define PS_IX_LEAF_SHIFT 4
#define PS_IX_SMALL_SHIFT 2
/* An unused pivot or start: above every key a search compares. */
#define PS_IX_NONE UINT64_MAX

/*
 * Every node begins with this header.  @height 0 is a leaf, whose
 * capacity is 1 << @shift.  @wflags belongs to the writer.
 */
struct ps_ix_node {
	uint16_t n;      /* ranges of a leaf, children of an inner node */
	uint8_t height;
	uint8_t shift;
	uint32_t wflags;
};

/*
 * Child i holds the ranges that lie wholly in [piv[i - 1], piv[i]), where
 * piv[-1] and piv[n - 1] are the node's own bounds (from its parent).
 * Pivots [n - 1, PS_IX_FAN - 1) are PS_IX_NONE.
 */
struct ps_ix_inner {
	struct ps_ix_node h;
	uint64_t piv[PS_IX_FAN - 1];
	struct ps_ix_node *child[PS_IX_FAN];
};

/*
 * A leaf of capacity c = 1 << h.shift: starts, ends and policies, c of
 * each, then c node hints (int16_t: polstore/static/policy.h's hints).
 * Starts [n, c) are PS_IX_NONE, their ends 0.  Ranges are sorted and
 * disjoint, each wholly inside the leaf's interval.
 */
struct ps_ix_leaf {
	struct ps_ix_node h;
	uint64_t w[];
};

/*
 * The layout of a leaf of capacity 1 << @shift, the one definition the
 * readers and the writer (src/range/rangeindex_node.h) use: the word of
 * w[] at which its starts, ends, policies and hints begin, and its bytes.
 */
#define _PS_IX_W_START(shift) ((size_t)0)
#define _PS_IX_W_END(shift) ((size_t)1 << (shift))
#define _PS_IX_W_POL(shift) ((size_t)2 << (shift))
#define _PS_IX_W_HINT(shift) ((size_t)3 << (shift))
#define _PS_IX_LEAF_BYTES(shift)                                                                   \
	(sizeof(struct ps_ix_node) + _PS_IX_W_HINT(shift) * sizeof(uint64_t) +                      \
			((size_t)1 << (shift)) * sizeof(int16_t))

/* The fields of leaf @l as a reader sees them: starts, ends, policies, hints. */
#define _PS_IX_START(l) ((l)->w + _PS_IX_W_START((l)->h.shift))
#define _PS_IX_END(l) ((l)->w + _PS_IX_W_END((l)->h.shift))
#define _PS_IX_POL(l)                                                                              \
	((struct ps_policy *const *)(const void *)((l)->w + _PS_IX_W_POL((l)->h.shift)))
#define _PS_IX_HINT(l) ((const int16_t *)(const void *)((l)->w + _PS_IX_W_HINT((l)->h.shift)))

struct ps_ix_root {
	struct ps_ix_node *node;
};

/*
 * How many of the sorted keys @k[0, @size) are <= @key: branchless, @size a
 * power of two (the search's steps do not depend on the keys).
 */
static inline __attribute__((always_inline)) unsigned _ps_ix_count_le(const uint64_t *k,
		unsigned size, uint64_t key)
{
	unsigned b = 0, h;

	for (h = size / 2; h; h /= 2)
		b += _PS_READ_ONCE(k[b + h - 1]) <= key ? h : 0;
	return b + (_PS_READ_ONCE(k[b]) <= key);
}

/*
 * The child of inner node @in whose interval holds @key (< UINT64_MAX):
 * how many of its 15 pivots are <= @key, branchless (four steps, reading
 * piv[0, 15)).
 */
static inline __attribute__((always_inline)) unsigned _ps_ix_child_of(
		const struct ps_ix_inner *in, uint64_t key)
{
	unsigned c = 0, s;

	for (s = PS_IX_FAN / 2; s; s /= 2)
		c += _PS_READ_ONCE(in->piv[c + s - 1]) <= key ? s : 0;
	return c;
}

/*
 * The leaf whose interval holds @idx, from the root node @h (loaded with an
 * acquire load), or NULL for an empty index.  *@hi: the leaf's upper
 * bound (UINT64_MAX for the last leaf) when @hi is not NULL.
 */
static inline __attribute__((always_inline)) const struct ps_ix_leaf *_ps_ix_leaf_of(
		const struct ps_ix_node *h, uint64_t idx, uint64_t *hi)
{
	/* UINT64_MAX is in no range; searched as UINT64_MAX - 1, so that pivots stay below it. */
	uint64_t key = idx < UINT64_MAX ? idx : UINT64_MAX - 1;

	if (hi)
		*hi = UINT64_MAX;
	if (!h)
		return NULL;
	while (h->height) {
		const struct ps_ix_inner *in = (const struct ps_ix_inner *)(const void *)h;
		unsigned c = _ps_ix_child_of(in, key);

		if (hi && c < PS_IX_FAN - 1 && in->piv[c] != PS_IX_NONE)
			*hi = in->piv[c];
		h = _PS_LOAD_ACQUIRE(in->child[c]);
		/*
		 * The search of the next node reads its second line first and
		 * its first or third next: ask for all three at once, so that
		 * their misses overlap instead of following one another.
		 */
		__builtin_prefetch((const char *)h + 64);
		__builtin_prefetch((const char *)h + 128);
	}
	return (const struct ps_ix_leaf *)(const void *)h;
}

/*
 * The entry of leaf @l holding @idx, given @c, how many of its starts are
 * <= @idx: its position, or -1 when @idx lies in a gap.
 */
static inline __attribute__((always_inline)) int _ps_ix_entry_of(const struct ps_ix_leaf *l,
		unsigned c, uint64_t idx)
{
	if (!c || idx >= _PS_READ_ONCE(_PS_IX_END(l)[c - 1]))
		return -1;
	return (int)c - 1;
}

/*
 * The entry of leaf @l holding @idx: its position, or -1 when @idx lies in
 * a gap.
 */
static inline __attribute__((always_inline)) int _ps_ix_find_in(const struct ps_ix_leaf *l,
		uint64_t idx)
{
	return _ps_ix_entry_of(l, _ps_ix_count_le(_PS_IX_START(l), 1u << l->h.shift, idx), idx);
}

/*
 * How many of the keys @k[0, @n) are <= @key, each compared on its own:
 * the loads do not wait for one another's compares, where the halving
 * search's each wait for the last.  In a small index, whose lines stay in
 * the L1, that is the shorter chain, most of all for a key asked for again
 * and again.
 */
static inline __attribute__((always_inline)) unsigned _ps_ix_count_le_each(const uint64_t *k,
		unsigned n, uint64_t key)
{
	unsigned c = 0, i;

	for (i = 0; i < n; i++)
		c += _PS_READ_ONCE(k[i]) <= key;
	return c;
}

/*
 * The entry holding @idx in a small index, whose root @h is a leaf or an
 * inner node of leaves (256 ranges at most), in *@l: its position, or -1.
 */
static inline __attribute__((always_inline)) int _ps_ix_small_find(const struct ps_ix_node *h,
		uint64_t idx, const struct ps_ix_leaf **l)
{
	/* As _ps_ix_leaf_of(): UINT64_MAX is searched as UINT64_MAX - 1. */
	uint64_t key = idx < UINT64_MAX ? idx : UINT64_MAX - 1;
	unsigned c;

	if (h->height) {
		const struct ps_ix_inner *in = (const struct ps_ix_inner *)(const void *)h;

		/* Its n - 1 pivots part its n children; the rest are PS_IX_NONE. */
		h = _PS_LOAD_ACQUIRE(in->child[_ps_ix_count_le_each(in->piv, h->n - 1u, key)]);
	}
	*l = (const struct ps_ix_leaf *)(const void *)h;
	c = _ps_ix_count_le_each(_PS_IX_START(*l), 1u << (*l)->h.shift, idx);
	return _ps_ix_entry_of(*l, c, idx);
}

/*
 * The entry holding @idx in the index whose root node @h was loaded with
 * an acquire load: its position in *@l, or -1 (an empty index, a gap).
 * The search every lockless lookup of the RCU stores makes when the
 * calling thread's cache misses (polstore/static/lcache.h).
 */
static inline __attribute__((always_inline)) int _ps_ix_find(const struct ps_ix_node *h,
		uint64_t idx, const struct ps_ix_leaf **l)
{
	if (!h)
		return -1;
	if (h->height <= 1)
		return _ps_ix_small_find(h, idx, l);
	*l = _ps_ix_leaf_of(h, idx, NULL);
	return _ps_ix_find_in(*l, idx);
}

#endif /* POLSTORE_STATIC_INDEX_H */
