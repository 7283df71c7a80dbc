/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore's range tree as its readers see it: the node layout and the walk.
 *
 * Not an API.  These layouts belong to the library they came with: the
 * library itself is built on them, and a program that defines
 * POLSTORE_INLINE compiles the read side into its own code from them
 * (polstore/static/lookup.h), which binds it to libraries with the same
 * layouts.  Every field the inline read side touches is in the identity
 * of polstore/static/layout.h, which follows any change to it.
 */
#ifndef POLSTORE_STATIC_RTREE_H
#define POLSTORE_STATIC_RTREE_H

#include <stddef.h>
#include <stdint.h>

#include <polstore/static/atomic.h>

struct ps_policy;

/* Longest walk a lockless reader makes before it calls its result overrun. */
#define PS_RB_MAX_DEPTH 128

/*
 * A red-black tree node without a parent pointer.  Readers load only
 * @child, with acquire loads pairing with the writers' release stores;
 * @meta (the colour) is the writers' alone.
 */
struct ps_rb_node {
	struct ps_rb_node *child[2]; /* [0] left (smaller), [1] right (larger) */
	uint64_t meta; /* bit 0: colour (1 = black); bits 1-63: zero */
};

struct ps_rb_root {
	struct ps_rb_node *node;
};

/*
 * One [start, end) range and the policy reference it holds.  @start, @end
 * and @pol are loaded by lockless readers while an in-place writer may
 * trim the range or turn it into another, so every access to them is
 * atomic (relaxed).
 */
struct ps_range {
	struct ps_rb_node rb;
	uint64_t start;
	uint64_t end;
	struct ps_policy *pol; /* one reference, owned by the range */
	/*
	 * Where the policy places every page, when that needs no page index or
	 * local node (a one-node mask, PREFERRED): a node; or _PS_HINT_LOCAL
	 * or _PS_HINT_POLICY (polstore/static/policy.h).  Set with @pol, so a
	 * node lookup reads no more than the range the walk ended on.
	 */
	int node_hint;
	struct ps_range *next_free; /* on a list once unlinked or spare */
};

struct ps_rtree {
	struct ps_rb_root root;
	size_t count; /* ranges; relaxed loads by readers */
};

/* The walk's answer when it went PS_RB_MAX_DEPTH steps without an end. */
#define PS_RTREE_OVERRUN ((struct ps_range *)1)

/*
 * The range containing @idx, walking down from the node @n (a root loaded
 * with an acquire load).  Every load is atomic and the walk stops after
 * PS_RB_MAX_DEPTH steps, so it is safe for a reader racing an in-place
 * writer, which must then validate what it found; a reader of a tree no
 * writer changes never sees the overrun.
 * Return: the range, NULL, or PS_RTREE_OVERRUN.
 */
static inline __attribute__((always_inline)) struct ps_range *_ps_rtree_walk(struct ps_rb_node *n, uint64_t idx)
{
	int steps;

	for (steps = 0; n && steps < PS_RB_MAX_DEPTH; steps++) {
		/* The node is the range's first member. */
		struct ps_range *r = (struct ps_range *)(void *)n;

		if (idx < _PS_READ_ONCE(r->start))
			n = _PS_LOAD_ACQUIRE(n->child[0]);
		else if (idx >= _PS_READ_ONCE(r->end))
			n = _PS_LOAD_ACQUIRE(n->child[1]);
		else
			return r;
	}
	return n ? PS_RTREE_OVERRUN : NULL;
}

#endif /* POLSTORE_STATIC_RTREE_H */
