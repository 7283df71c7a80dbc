/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore hwloc bridge: hwloc node sets <-> policy node masks, and policies
 * made from hwloc topology objects (the NUMA nodes of a package, of a core,
 * of the machine).
 *
 * This header is not part of <polstore/polstore.h>: it includes <hwloc.h>,
 * and its functions live in a library of their own, libpolstore_hwloc
 * (pkg-config module "polstore-hwloc"; CMake: find_package(polstore
 * COMPONENTS hwloc), target polstore::polstore_hwloc), which links
 * libpolstore and libhwloc.  libpolstore itself does not depend on hwloc.
 * The bridge is built when libhwloc-dev is found (CMake option
 * POLSTORE_HWLOC=AUTO, the default; ON requires it, OFF never builds it).
 *
 * Numbering: hwloc node sets hold OS (physical) NUMA node numbers, which
 * are the numbers Linux policies and polstore masks use: bit i of either
 * is node i.  polstore policies name nodes 0 .. PS_MAX_NUMNODES - 1; a node
 * set naming a higher node, or an infinite one, is refused with -EINVAL.
 * Nothing here checks that a node exists on this machine:
 * ps_policy_apply() does, when the policy is applied.
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
 * @mask: room for @maxnode bits, rounded up to whole unsigned longs; every
 *        word is written (bits of nodes not in @nodeset cleared)
 * @maxnode: number of bits @mask can hold, at most PS_MAXNODE_LIMIT
 *
 * The mask is in the layout ps_policy_create() takes: bit i % BITS_PER_LONG
 * of word i / BITS_PER_LONG is node i.
 *
 * Context: any thread; writes only @mask; no allocation.
 * Return: 0; -EINVAL when @nodeset or @mask is NULL, @maxnode is 0 or above
 * PS_MAXNODE_LIMIT, @nodeset is infinite, or names a node >=
 * PS_MAX_NUMNODES or >= @maxnode (then @mask is untouched).
 */
PS_API int ps_hwloc_nodeset_to_mask(
		hwloc_const_nodeset_t nodeset, unsigned long *mask, unsigned long maxnode);

/**
 * ps_hwloc_mask_to_nodeset() - copy a node mask into an hwloc node set
 * @mask: @maxnode bits, bit i is node i; NULL is an empty mask
 * @maxnode: number of valid bits in @mask, at most PS_MAXNODE_LIMIT;
 *           ignored when @mask is NULL
 * @nodeset: the node set to overwrite (from hwloc_bitmap_alloc())
 *
 * Context: any thread; may allocate (hwloc grows @nodeset as needed).
 * Return: 0; -EINVAL when @nodeset is NULL, @maxnode is above
 * PS_MAXNODE_LIMIT or @mask names a node >= PS_MAX_NUMNODES (then @nodeset
 * is untouched); -ENOMEM when hwloc cannot grow @nodeset (hwloc then
 * leaves it as it was).
 */
PS_API int ps_hwloc_mask_to_nodeset(
		const unsigned long *mask, unsigned long maxnode, hwloc_nodeset_t nodeset);

/**
 * ps_hwloc_policy_from_nodeset() - create a policy over an hwloc node set
 * @mode: one of enum ps_mode
 * @flags: as for ps_policy_create()
 * @nodeset: the nodes; NULL is an empty set
 *
 * ps_policy_create(@mode, @flags, mask of @nodeset): the policy rules
 * (which modes take which masks) are ps_policy_create()'s.
 *
 * Context: any thread; allocates the policy.
 * Return: a new policy with one reference for the caller, or NULL with
 * errno EINVAL (@nodeset infinite or naming a node >= PS_MAX_NUMNODES, or
 * what ps_policy_create() refuses) or ENOMEM.
 */
PS_API struct ps_policy *ps_hwloc_policy_from_nodeset(
		int mode, unsigned flags, hwloc_const_nodeset_t nodeset);

/**
 * ps_hwloc_policy_to_nodeset() - copy a policy's nodes into an hwloc node set
 * @pol: the policy
 * @nodeset: the node set to overwrite (from hwloc_bitmap_alloc())
 *
 * Context: any thread; may allocate (hwloc grows @nodeset as needed).
 * Return: 0; -EINVAL when @pol or @nodeset is NULL; -ENOMEM when hwloc
 * cannot grow @nodeset (hwloc then leaves it as it was).
 */
PS_API int ps_hwloc_policy_to_nodeset(const struct ps_policy *pol, hwloc_nodeset_t nodeset);

/**
 * ps_hwloc_policy_from_obj() - create a policy over the NUMA nodes of an object
 * @topology: the loaded topology @obj belongs to
 * @obj: a CPU-side or memory object of @topology: the machine, a package, a
 *       group, a cache, a core, a PU or a NUMA node
 * @mode: one of enum ps_mode; one that takes nodes (PS_MPOL_BIND,
 *        PS_MPOL_INTERLEAVE, PS_MPOL_PREFERRED, PS_MPOL_PREFERRED_MANY,
 *        PS_MPOL_WEIGHTED_INTERLEAVE)
 * @flags: as for ps_policy_create()
 *
 * The nodes are @obj->nodeset (for a CPU-side object, the NUMA nodes local
 * to it: those attached to it or to an ancestor; for a NUMA node, itself),
 * less the nodes @topology does not allow this process to allocate on
 * (hwloc_topology_get_allowed_nodeset(), which matters only for a topology
 * loaded with HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED).  The NUMA nodes
 * under the first package, interleaved:
 *
 *   hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
 *   pol = ps_hwloc_policy_from_obj(topo, pkg, PS_MPOL_INTERLEAVE, 0);
 *
 * Context: any thread; allocates the policy.  @topology is only read, as
 * hwloc allows from several threads at once.
 * Return: a new policy with one reference for the caller, or NULL with
 * errno EINVAL (@topology or @obj NULL, an object without a node set such
 * as an I/O or Misc object, no allowed node, a node >= PS_MAX_NUMNODES,
 * or what ps_policy_create() refuses, e.g. PS_MPOL_DEFAULT, which takes no
 * node) or ENOMEM.
 */
PS_API struct ps_policy *ps_hwloc_policy_from_obj(
		hwloc_topology_t topology, hwloc_obj_t obj, int mode, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_HWLOC_H */
