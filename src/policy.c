// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Policies: validation follows mbind(2) as the kernel's mpol_new() and LTP's
 * mbind01 define it, with the mask length made exact (bit i is node i).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/policy.h>

#include "annotate.h"
#include "compiler.h"
#include "policy_internal.h"

static bool ps_mode_needs_nodes(int mode)
{
	return mode == PS_MPOL_BIND || mode == PS_MPOL_INTERLEAVE ||
	       mode == PS_MPOL_PREFERRED_MANY || mode == PS_MPOL_WEIGHTED_INTERLEAVE;
}

/*
 * Copy @maxnode bits of @src into @dst; a NULL @src is empty, whatever
 * @maxnode is.  Returns the number of nodes, or -EINVAL when a node >=
 * PS_MAX_NUMNODES is set.
 */
static int ps_nodes_import(unsigned long *dst, const unsigned long *src, unsigned long maxnode)
{
	unsigned long nlongs = (maxnode + PS_BITS_PER_LONG - 1) / PS_BITS_PER_LONG;
	unsigned long i;
	int weight = 0;

	memset(dst, 0, PS_NODEMASK_LONGS * sizeof(*dst));
	if (!src)
		return 0;
	for (i = 0; i < nlongs; i++) {
		unsigned long w = src[i];
		unsigned long valid = maxnode - i * PS_BITS_PER_LONG;

		if (valid < PS_BITS_PER_LONG)
			w &= (1UL << valid) - 1;
		if (!w)
			continue;
		if (i >= PS_NODEMASK_LONGS)
			return -EINVAL;
		dst[i] = w;
		weight += __builtin_popcountl(w);
	}
	return weight;
}

struct ps_policy *ps_policy_create(int mode, unsigned flags, const unsigned long *nodemask,
		unsigned long maxnode)
{
	struct ps_policy *pol;
	int weight;

	/*
	 * A NULL mask is empty and @maxnode measures nothing, so only a real
	 * mask is held to PS_MAXNODE_LIMIT (the kernel's get_nodes() likewise
	 * checks the length only when there is a mask to copy).
	 */
	if (mode < 0 || mode >= PS_MPOL_MAX || (flags & ~PS_MPOL_F_ALL) ||
			(flags & PS_MPOL_F_ALL) == PS_MPOL_F_ALL ||
			(nodemask && maxnode > PS_MAXNODE_LIMIT)) {
		errno = EINVAL;
		return NULL;
	}
	pol = _ps_alloc(sizeof(*pol));
	if (!pol) {
		errno = ENOMEM;
		return NULL;
	}
	weight = ps_nodes_import(pol->nodes, nodemask, maxnode);
	if (weight < 0)
		goto inval;
	if (mode == PS_MPOL_DEFAULT) {
		/*
		 * As mpol_new(): DEFAULT takes no nodes, and the kernel keeps no
		 * policy object for it, so a node-mask flag (already checked to
		 * be a known one, not both) is accepted and dropped.  Every
		 * DEFAULT policy is then flagless and equal to every other.
		 */
		if (weight)
			goto inval;
		flags = 0;
	} else if (mode == PS_MPOL_LOCAL) {
		/* As mpol_new(): no nodes, and no node-mask flag to apply to them. */
		if (weight || flags)
			goto inval;
	} else if (mode == PS_MPOL_PREFERRED) {
		/* As mpol_new(): an empty preferred mask is local allocation, flagless. */
		if (!weight) {
			if (flags)
				goto inval;
			mode = PS_MPOL_LOCAL;
		}
	} else if (ps_mode_needs_nodes(mode) && !weight) {
		goto inval;
	}
	pol->refcnt = 1;
	PS_ANNOTATE_BENIGN_RACE_SIZED(&pol->refcnt, sizeof(pol->refcnt)); /* atomics only */
	pol->mode = mode;
	pol->flags = flags;
	pol->weight = weight;
	return pol;
inval:
	_ps_free(pol);
	errno = EINVAL;
	return NULL;
}

struct ps_policy *ps_policy_get(struct ps_policy *pol)
{
	return _ps_policy_get(pol);
}

void ps_policy_put(struct ps_policy *pol)
{
	long old;

	if (!pol)
		return;
	/* Release: our uses of *pol happen before the free on whichever thread frees. */
	PS_ANNOTATE_HAPPENS_BEFORE(pol);
	old = __atomic_fetch_sub(&pol->refcnt, 1, __ATOMIC_RELEASE);
#ifndef NDEBUG
	if (old <= 0)
		abort(); /* double put: the policy was already freed or being freed */
#endif
	if (old == 1) {
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		/* Every put's release (and HAPPENS_BEFORE above) precedes the free. */
		PS_ANNOTATE_HAPPENS_AFTER(pol);
		_ps_free(pol);
	}
}

int ps_policy_mode(const struct ps_policy *pol)
{
	return pol ? pol->mode : -EINVAL;
}

unsigned ps_policy_flags(const struct ps_policy *pol)
{
	return pol ? pol->flags : 0;
}

int ps_policy_weight(const struct ps_policy *pol)
{
	return pol ? pol->weight : -EINVAL;
}

int ps_policy_first_node(const struct ps_policy *pol)
{
	size_t i;

	if (!pol)
		return -EINVAL;
	for (i = 0; i < PS_NODEMASK_LONGS; i++)
		if (pol->nodes[i])
			return (int)(i * PS_BITS_PER_LONG) + __builtin_ctzl(pol->nodes[i]);
	return -ENOENT;
}

int ps_policy_nodemask(const struct ps_policy *pol, unsigned long *mask, unsigned long maxnode)
{
	unsigned long nlongs, i;

	if (!pol || !mask || !maxnode)
		return -EINVAL;
	nlongs = (maxnode + PS_BITS_PER_LONG - 1) / PS_BITS_PER_LONG;
	/* Refuse before writing anything when a node does not fit. */
	for (i = 0; i < PS_NODEMASK_LONGS; i++) {
		unsigned long w = pol->nodes[i];

		if (!w)
			continue;
		if ((i + 1) * PS_BITS_PER_LONG - __builtin_clzl(w) > maxnode)
			return -EINVAL;
	}
	for (i = 0; i < nlongs; i++)
		mask[i] = i < PS_NODEMASK_LONGS ? pol->nodes[i] : 0;
	return 0;
}

bool ps_policy_equal(const struct ps_policy *a, const struct ps_policy *b)
{
	if (!a || !b)
		return false;
	if (a == b)
		return true;
	if (a->mode != b->mode || a->flags != b->flags)
		return false;
	if (a->mode == PS_MPOL_LOCAL)
		return true;
	return memcmp(a->nodes, b->nodes, sizeof(a->nodes)) == 0;
}

long ps_policy_refcount(const struct ps_policy *pol)
{
	return pol ? __atomic_load_n(&pol->refcnt, __ATOMIC_RELAXED) : -EINVAL;
}

const char *ps_mode_name(int mode)
{
	static const char *const names[PS_MPOL_MAX] = {
		[PS_MPOL_DEFAULT] = "default",
		[PS_MPOL_PREFERRED] = "preferred",
		[PS_MPOL_BIND] = "bind",
		[PS_MPOL_INTERLEAVE] = "interleave",
		[PS_MPOL_LOCAL] = "local",
		[PS_MPOL_PREFERRED_MANY] = "prefer (many)",
		[PS_MPOL_WEIGHTED_INTERLEAVE] = "weighted interleave",
	};

	return mode >= 0 && mode < PS_MPOL_MAX ? names[mode] : "unknown";
}
