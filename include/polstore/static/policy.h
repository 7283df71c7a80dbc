/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A policy as the library's read paths see it: its layout, the reference a
 * lookup takes, the copy ps_store_lookup_copy() makes and the node
 * ps_store_lookup_node() picks.
 *
 * Not an API: see polstore/static/rtree.h.
 */
#ifndef POLSTORE_STATIC_POLICY_H
#define POLSTORE_STATIC_POLICY_H

#include <errno.h>
#include <stdint.h>

#include <polstore/export.h>
#include <polstore/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Everything but @refcnt is written once, before the policy is returned by
 * ps_policy_create(), and never again; readers need no synchronisation for
 * it beyond the publication of the pointer.
 */
struct ps_policy {
	long refcnt; /* atomic; the policy is freed when it drops to 0 */
	int mode;
	unsigned flags;
	int weight; /* nodes set in @nodes */
	unsigned long nodes[PS_NODEMASK_WORDS];
};

/* The out-of-line parts of ps_policy_node(): they read the node topology. */
PS_API int _ps_numa_nearest(const unsigned long *nodes, int local_node);
PS_API int _ps_numa_weighted(const unsigned long *nodes, uint64_t ilx);

/* A new reference on @pol (NULL: none), for a lookup inside its read section. */
static inline struct ps_policy *_ps_policy_get(struct ps_policy *pol)
{
	if (pol)
		__atomic_fetch_add(&pol->refcnt, 1, __ATOMIC_RELAXED);
	return pol;
}

/* The arguments of a view the caller filled in: 0 or -EINVAL. */
static inline int _ps_policy_view_check(const struct ps_policy_view *view)
{
	return view && view->size == sizeof(*view) && view->nwords <= PS_NODEMASK_WORDS ? 0 : -EINVAL;
}

/* Copy @pol (NULL: none) into a checked @view.  Return: 1 for a policy, 0 for none. */
static inline __attribute__((always_inline)) int _ps_policy_view_fill(const struct ps_policy *pol, struct ps_policy_view *view)
{
	unsigned i, n = view->nwords;

	if (!pol) {
		view->mode = PS_MPOL_DEFAULT;
		view->flags = 0;
		view->weight = 0;
		for (i = 0; i < n; i++)
			view->nodes[i] = 0;
		return 0;
	}
	view->mode = pol->mode;
	view->flags = pol->flags;
	view->weight = pol->weight;
	for (i = 0; i < n; i++)
		view->nodes[i] = pol->nodes[i];
	return 1;
}

/* The @n-th node (from 0) of a mask holding more than @n nodes. */
static inline int _ps_nodes_nth(const unsigned long *nodes, unsigned long n)
{
	unsigned i;

	for (i = 0;; i++) {
		unsigned long w = nodes[i];
		unsigned long c = (unsigned long)__builtin_popcountl(w);

		if (n < c) {
			while (n--)
				w &= w - 1; /* drop the lowest node */
			return (int)(i * 8 * sizeof(long)) + __builtin_ctzl(w);
		}
		n -= c;
	}
}

/*
 * ps_policy_node() with @local_node checked.  A one-node mask answers at
 * once whatever the mode (its node is the nearest allowed, and every
 * interleave slot's); a runtime's fault path meets it most.
 */
static inline int _ps_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	const unsigned long bits = 8 * sizeof(long);

	if (!pol || pol->mode == PS_MPOL_LOCAL || pol->mode == PS_MPOL_DEFAULT)
		return local_node;
	if (pol->weight == 1 || pol->mode == PS_MPOL_PREFERRED)
		return _ps_nodes_nth(pol->nodes, 0);
	switch (pol->mode) {
	case PS_MPOL_BIND:
	case PS_MPOL_PREFERRED_MANY:
		if (pol->nodes[(unsigned)local_node / bits] >> ((unsigned)local_node % bits) & 1)
			return local_node;
		return _ps_numa_nearest(pol->nodes, local_node);
	case PS_MPOL_INTERLEAVE:
		return _ps_nodes_nth(pol->nodes, (unsigned long)(ilx % (unsigned)pol->weight));
	default: /* PS_MPOL_WEIGHTED_INTERLEAVE */
		return _ps_numa_weighted(pol->nodes, ilx);
	}
}

/* struct ps_range's node_hint when it is not a node: */
#define _PS_HINT_LOCAL (-1)  /* the local node (LOCAL) */
#define _PS_HINT_POLICY (-2) /* ask the policy (several nodes, by index or distance) */

/* The node_hint of a range holding @pol. */
static inline int _ps_policy_hint(const struct ps_policy *pol)
{
	if (!pol || pol->mode == PS_MPOL_LOCAL || pol->mode == PS_MPOL_DEFAULT)
		return _PS_HINT_LOCAL;
	if (pol->weight == 1 || pol->mode == PS_MPOL_PREFERRED)
		return _ps_nodes_nth(pol->nodes, 0);
	return _PS_HINT_POLICY;
}

/* _ps_policy_node() of a range's policy, given the range's hint. */
static inline __attribute__((always_inline)) int _ps_policy_node_hinted(int hint, const struct ps_policy *pol, uint64_t ilx,
		int local_node)
{
	if (__builtin_expect(hint >= 0, 1))
		return hint;
	return hint == _PS_HINT_LOCAL ? local_node : _ps_policy_node(pol, ilx, local_node);
}

/* A node id ps_policy_node() accepts. */
static inline int _ps_node_check(int node)
{
	return node >= 0 && node < PS_MAX_NUMNODES ? 0 : -EINVAL;
}

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_STATIC_POLICY_H */
