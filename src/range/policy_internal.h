/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Policies inside the library: the layout, the striped reference count and
 * the hot paths that lookups inline are in polstore/static/policy.h (a
 * program built with POLSTORE_INLINE compiles them in too); here, what only
 * the library calls: the put and the stores' own references.
 */
#ifndef POLSTORE_SRC_POLICY_INTERNAL_H
#define POLSTORE_SRC_POLICY_INTERNAL_H

#include <limits.h>
#include <stddef.h>

#include <polstore/export.h>
#include <polstore/policy.h>
#include <polstore/static/policy.h>

#include "annotate.h"
#include "compiler.h"

#define PSI_BITS_PER_LONG (sizeof(unsigned long) * CHAR_BIT)
#define PSI_NODEMASK_LONGS PS_NODEMASK_WORDS

/* Out-of-line halves of psi_policy_put(). */
PS_API void _ps_policy_put_slow(struct ps_policy *pol);
PS_API void _ps_policy_release(struct ps_policy *pol, long old);

/* ps_policy_put() inlined: drop a reference the caller holds (NULL: nothing). */
static inline void psi_policy_put(struct ps_policy *pol)
{
	long old;

	if (!pol)
		return;
	/* Our uses of *pol happen before the free, on whichever thread frees. */
	PSI_ANNOTATE_HAPPENS_BEFORE(pol);
	if (__builtin_expect(PSI_LOAD_ACQUIRE(pol->refmode) == PS_REF_OPEN, 1)) {
		long *c = _ps_ref_stripe(PSI_READ_ONCE(pol->stripes),
				pol->stripe_mask);

		/* Release: pairs with the closing exchange (acq_rel), which the freeing put follows. */
		if (__builtin_expect(PSI_FETCH_SUB(*c, 1, RELEASE) > PS_REF_CLOSED_MAX,
				    1))
			return;
	}
	/* The atomic count.  Release: our uses of *pol happen before the free. */
	old = PSI_FETCH_SUB(pol->refcnt, 1, RELEASE);
	if (__builtin_expect(old <= 1, 0))
		_ps_policy_release(pol, old); /* the last reference, or a double put */
}

/* Read the node topology now if no lookup has yet (topology.c): stores do at creation. */
void psi_numa_topology_load(void);
/* Exported for the inline code of programs built against earlier headers. */
PS_API int _ps_numa_nearest(const unsigned long *nodes, int local_node);
PS_API int _ps_numa_weighted(const unsigned long *nodes, uint64_t ilx);

/* A store's reference, taken for a range (writers only: not a hot path). */
void psi_policy_store_get(struct ps_policy *pol);
/* Drop a store's reference; when it was the last store's, the stripes close first. */
void psi_policy_store_put(struct ps_policy *pol);
/* The number of store references (for invariant checks: a stored range's policy has >= 1). */
long psi_policy_stores(const struct ps_policy *pol);

#endif /* POLSTORE_SRC_POLICY_INTERNAL_H */
