// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The hwloc bridge (libpolstore_hwloc): node sets <-> policy node masks.
 *
 * It uses only polstore's public API (policy.h), so it can live in a
 * library of its own: libpolstore does not link hwloc, and a program that
 * does not want hwloc never loads it.  Every conversion goes through a mask
 * of exactly PS_MAX_NUMNODES bits on the stack, so no call allocates except
 * hwloc growing a caller's node set and ps_policy_create().
 *
 * Validation happens before any output is written, so a refused call leaves
 * the caller's mask or node set as it was.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include <polstore/hwloc.h>

#define PSI_HW_LONG_BITS (CHAR_BIT * sizeof(unsigned long))
#define PSI_HW_MASK_LONGS (PS_MAX_NUMNODES / PSI_HW_LONG_BITS)

_Static_assert(PS_MAX_NUMNODES % (CHAR_BIT * sizeof(unsigned long)) == 0,
		"a mask of PS_MAX_NUMNODES bits is whole unsigned longs");

/*
 * The highest node of @nodeset, -1 when it is empty; -EINVAL when it is
 * infinite or the node is >= PS_MAX_NUMNODES.
 */
static int psi_hw_last_node(hwloc_const_nodeset_t nodeset)
{
	int last;

	if (hwloc_bitmap_iszero(nodeset))
		return -1;
	if (hwloc_bitmap_weight(nodeset) < 0) /* infinite: hwloc_bitmap_fill() and the like */
		return -EINVAL;
	last = hwloc_bitmap_last(nodeset);
	return last < 0 || last >= PS_MAX_NUMNODES ? -EINVAL : last;
}

/* @nodeset into a full PS_MAX_NUMNODES-bit mask: 0 or -EINVAL. */
static int psi_hw_to_full_mask(hwloc_const_nodeset_t nodeset, unsigned long *mask)
{
	int last = psi_hw_last_node(nodeset);

	if (last < -1)
		return last;
	for (unsigned i = 0; i < PSI_HW_MASK_LONGS; i++)
		mask[i] = hwloc_bitmap_to_ith_ulong(nodeset, i);
	return 0;
}

int ps_hwloc_nodeset_to_mask(
		hwloc_const_nodeset_t nodeset, unsigned long *mask, unsigned long maxnode)
{
	unsigned long full[PSI_HW_MASK_LONGS];
	unsigned long words, i;
	int last;

	if (!nodeset || !mask || !maxnode || maxnode > PS_MAXNODE_LIMIT)
		return -EINVAL;
	last = psi_hw_last_node(nodeset);
	if (last < -1 || (last >= 0 && (unsigned long)last >= maxnode))
		return -EINVAL;
	psi_hw_to_full_mask(nodeset, full);
	words = (maxnode + PSI_HW_LONG_BITS - 1) / PSI_HW_LONG_BITS;
	for (i = 0; i < words; i++)
		mask[i] = i < PSI_HW_MASK_LONGS ? full[i] : 0;
	return 0;
}

int ps_hwloc_mask_to_nodeset(
		const unsigned long *mask, unsigned long maxnode, hwloc_nodeset_t nodeset)
{
	unsigned long full[PSI_HW_MASK_LONGS] = {0};
	unsigned long words, i;

	if (!nodeset || (mask && maxnode > PS_MAXNODE_LIMIT))
		return -EINVAL;
	if (mask) {
		words = (maxnode + PSI_HW_LONG_BITS - 1) / PSI_HW_LONG_BITS;
		for (i = 0; i < words; i++) {
			unsigned long w = mask[i];

			if (i == words - 1 && maxnode % PSI_HW_LONG_BITS)
				w &= (1UL << (maxnode % PSI_HW_LONG_BITS)) - 1;
			if (i >= PSI_HW_MASK_LONGS) {
				if (w)
					return -EINVAL; /* a node >= PS_MAX_NUMNODES */
				continue;
			}
			full[i] = w;
		}
	}
	/* hwloc grows the set before writing it: a failure leaves it as it was. */
	return hwloc_bitmap_from_ulongs(nodeset, PSI_HW_MASK_LONGS, full) ? -ENOMEM : 0;
}

struct ps_policy *ps_hwloc_policy_from_nodeset(
		int mode, unsigned flags, hwloc_const_nodeset_t nodeset)
{
	unsigned long full[PSI_HW_MASK_LONGS] = {0};

	if (nodeset && psi_hw_to_full_mask(nodeset, full)) {
		errno = EINVAL;
		return NULL;
	}
	return ps_policy_create(mode, flags, full, PS_MAX_NUMNODES);
}

int ps_hwloc_policy_to_nodeset(const struct ps_policy *pol, hwloc_nodeset_t nodeset)
{
	unsigned long full[PSI_HW_MASK_LONGS];

	if (!pol || !nodeset)
		return -EINVAL;
	if (ps_policy_nodemask(pol, full, PS_MAX_NUMNODES))
		return -EINVAL; /* cannot happen: a policy's nodes are < PS_MAX_NUMNODES */
	return hwloc_bitmap_from_ulongs(nodeset, PSI_HW_MASK_LONGS, full) ? -ENOMEM : 0;
}

struct ps_policy *ps_hwloc_policy_from_obj(
		hwloc_topology_t topology, hwloc_obj_t obj, int mode, unsigned flags)
{
	unsigned long full[PSI_HW_MASK_LONGS];
	hwloc_const_nodeset_t allowed;
	bool any = false;

	if (!topology || !obj || !obj->nodeset) {
		errno = EINVAL;
		return NULL;
	}
	allowed = hwloc_topology_get_allowed_nodeset(topology);
	if (psi_hw_to_full_mask(obj->nodeset, full)) {
		errno = EINVAL;
		return NULL;
	}
	/*
	 * Only the allowed nodes.  The allowed set itself may be infinite or
	 * reach past PS_MAX_NUMNODES: test bit by bit, within the object's.
	 */
	for (unsigned i = 0; i < PSI_HW_MASK_LONGS; i++) {
		for (unsigned b = 0; b < PSI_HW_LONG_BITS; b++) {
			if (!(full[i] >> b & 1))
				continue;
			if (allowed && !hwloc_bitmap_isset(allowed, i * PSI_HW_LONG_BITS + b))
				full[i] &= ~(1UL << b);
		}
		any |= full[i] != 0;
	}
	if (!any) {
		/* Not even PREFERRED: an empty mask would quietly mean "local". */
		errno = EINVAL;
		return NULL;
	}
	return ps_policy_create(mode, flags, full, PS_MAX_NUMNODES);
}
