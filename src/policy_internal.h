/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The layout of struct ps_policy, private to the library. */
#ifndef POLSTORE_SRC_POLICY_INTERNAL_H
#define POLSTORE_SRC_POLICY_INTERNAL_H

#include <limits.h>

#include <polstore/policy.h>

#define PS_BITS_PER_LONG (sizeof(unsigned long) * CHAR_BIT)
#define PS_NODEMASK_LONGS ((PS_MAX_NUMNODES + PS_BITS_PER_LONG - 1) / PS_BITS_PER_LONG)

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
	unsigned long nodes[PS_NODEMASK_LONGS];
};

/* ps_policy_get() inlined for the library's own lookup paths (one call less per lookup). */
static inline struct ps_policy *_ps_policy_get(struct ps_policy *pol)
{
	if (pol)
		__atomic_fetch_add(&pol->refcnt, 1, __ATOMIC_RELAXED);
	return pol;
}

#endif /* POLSTORE_SRC_POLICY_INTERNAL_H */
