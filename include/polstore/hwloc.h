/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore hwloc bridge: hwloc node sets <-> policy node masks (bit i is OS node i), and
 * policies made from hwloc topology objects.  Not in <polstore/polstore.h>; the library is
 * libpolstore_hwloc (pkg-config polstore-hwloc).  docs/runtime.md, "hwloc".
 */
#ifndef POLSTORE_HWLOC_H
#define POLSTORE_HWLOC_H

#include <hwloc.h>

#include <polstore/export.h>
#include <polstore/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * ps_hwloc_nodeset_to_mask() - copy an hwloc node set into a node mask
 * @nodeset: the node set (hwloc_bitmap_alloc(), an object's nodeset, ...)
 * @mask: room for @maxnode bits in whole unsigned longs, as ps_policy_create() takes; all written
 * @maxnode: number of bits @mask can hold, at most PS_MAXNODE_LIMIT
 * Context: any thread; writes only @mask; no allocation.
 * Return: 0; -EINVAL (@mask untouched) when @nodeset or @mask is NULL, @maxnode is 0 or above
 * PS_MAXNODE_LIMIT, @nodeset is infinite or names a node >= PS_MAX_NUMNODES or >= @maxnode.
 */
PS_API int ps_hwloc_nodeset_to_mask(
		hwloc_const_nodeset_t nodeset, unsigned long *mask, unsigned long maxnode);

/**
 * ps_hwloc_mask_to_nodeset() - copy a node mask into an hwloc node set
 * @mask: @maxnode bits, bit i is node i; NULL is an empty mask
 * @maxnode: number of valid bits in @mask, at most PS_MAXNODE_LIMIT; ignored for a NULL @mask
 * @nodeset: the node set to overwrite (from hwloc_bitmap_alloc())
 * Context: any thread; may allocate (hwloc grows @nodeset as needed).
 * Return: 0; -EINVAL (@nodeset untouched) when @nodeset is NULL, @maxnode is above
 * PS_MAXNODE_LIMIT or @mask names a node >= PS_MAX_NUMNODES; -ENOMEM (@nodeset as it was).
 */
PS_API int ps_hwloc_mask_to_nodeset(
		const unsigned long *mask, unsigned long maxnode, hwloc_nodeset_t nodeset);

/**
 * ps_hwloc_policy_from_nodeset() - create a policy over an hwloc node set
 * @mode: one of enum ps_mode
 * @flags: as for ps_policy_create()
 * @nodeset: the nodes; NULL is an empty set
 *
 * ps_policy_create(@mode, @flags, mask of @nodeset), with its rules.
 * Context: any thread; allocates the policy.
 * Return: a new policy with one reference for the caller, or NULL with errno EINVAL
 * (@nodeset infinite or naming a node >= PS_MAX_NUMNODES, or as ps_policy_create()) or ENOMEM.
 */
PS_API struct ps_policy *ps_hwloc_policy_from_nodeset(
		int mode, unsigned flags, hwloc_const_nodeset_t nodeset);

/**
 * ps_hwloc_policy_to_nodeset() - copy a policy's nodes into an hwloc node set
 * @pol: the policy
 * @nodeset: the node set to overwrite (from hwloc_bitmap_alloc())
 * Context: any thread; may allocate (hwloc grows @nodeset as needed).
 * Return: 0; -EINVAL when @pol or @nodeset is NULL; -ENOMEM (@nodeset as it was).
 */
PS_API int ps_hwloc_policy_to_nodeset(const struct ps_policy *pol, hwloc_nodeset_t nodeset);

/**
 * ps_hwloc_policy_from_obj() - create a policy over the NUMA nodes of an object
 * @topology: the loaded topology @obj belongs to
 * @obj: a CPU-side or memory object of @topology: machine, package, group, cache, core, PU or
 *       NUMA node
 * @mode: one of enum ps_mode that takes nodes (not PS_MPOL_DEFAULT or PS_MPOL_LOCAL)
 * @flags: as for ps_policy_create()
 *
 * The nodes are @obj->nodeset less those @topology does not allow (docs/runtime.md).
 * Context: any thread, also several at once on one @topology; allocates the policy.
 * Return: a new policy with one reference for the caller, or NULL with errno EINVAL
 * (@topology or @obj NULL, an object without a node set such as an I/O or Misc object, no
 * allowed node, a node >= PS_MAX_NUMNODES, or as ps_policy_create()) or ENOMEM.
 */
PS_API struct ps_policy *ps_hwloc_policy_from_obj(
		hwloc_topology_t topology, hwloc_obj_t obj, int mode, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_HWLOC_H */
