/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore real placement: policies to page placement with mbind(2) and back with
 * get_mempolicy(2), node masks to and from libnuma's struct bitmask; nothing is cached, nodes
 * are checked before any system call (docs/placement.md).
 */
#ifndef POLSTORE_NUMA_H
#define POLSTORE_NUMA_H

#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>
#include <polstore/policy.h>
#include <polstore/store.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bitmask; /* libnuma's, from <numa.h> */

/** Apply flag: fail with -EIO when existing pages do not follow the policy (MPOL_MF_STRICT). */
#define PS_APPLY_STRICT (1U << 0)
/** Apply flag: migrate existing pages used only by this process (MPOL_MF_MOVE). */
#define PS_APPLY_MOVE (1U << 1)
/** Every flag ps_policy_apply() and ps_store_apply_range() accept. */
#define PS_APPLY_ALL (PS_APPLY_STRICT | PS_APPLY_MOVE)

/**
 * ps_numa_available() - can this process place memory with mbind(2)?
 * Context: any thread; no allocation; the kernel is probed until it answers yes.
 * Return: 0 when placement works; -ENOSYS when the kernel has no NUMA
 * support; -EPERM when the system call is refused (seccomp, for example).
 */
PS_API int ps_numa_available(void);

/**
 * ps_numa_set_topology() - the node topology ps_policy_node() follows
 * @nr_nodes: nodes the table describes (0 .. @nr_nodes - 1, each with
 *            memory), at most PS_MAX_NUMNODES; 0: back to the system's
 * @distance: @nr_nodes x @nr_nodes distances, row = from, column = to (as
 *            numa_distance(); 10 is local), NULL with @nr_nodes 0
 * @weights: @nr_nodes weighted-interleave weights, each 1-255; NULL: 1 each
 *
 * The nodes a node lookup may return and how it chooses (default: sysfs), copied; ranges
 * already set follow it from the next lookup on (docs/placement.md).
 * Context: any thread, at any time, also while other threads look up or
 * fork (they use the old table or the new one); no lock; allocates.
 * Return: 0; -EINVAL for a bad count, a missing distance table, a weight
 * of 0; -ENOMEM (nothing changed).
 */
PS_API int ps_numa_set_topology(int nr_nodes, const unsigned char *distance,
		const unsigned char *weights);

/**
 * enum ps_fit_rule - what a node lookup does with a policy on the topology in force
 * @PS_FIT_EXACT: every node of the policy has memory there: the policy's own rule
 * @PS_FIT_NARROWED: some do: the policy's rule over those (the modes of several nodes)
 * @PS_FIT_NEAREST: PREFERRED on a known node without memory: the nearest with memory
 * @PS_FIT_LOCAL: none does (or PREFERRED on an unknown node): as for no policy, the
 *                local node or the nearest with memory to it
 */
enum ps_fit_rule {
	PS_FIT_EXACT = 0,
	PS_FIT_NARROWED,
	PS_FIT_NEAREST,
	PS_FIT_LOCAL,
};

/**
 * struct ps_policy_fit - how a policy meets the topology in force
 * @rule: an enum ps_fit_rule
 * @first_missing: the lowest node of the policy without memory there, -1 when none
 * @missing: the nodes of the policy without memory there
 * @present: the nodes of the policy with memory there
 */
struct ps_policy_fit {
	int rule;
	int first_missing;
	int missing;
	int present;
};

/**
 * ps_numa_check_policy() - check a policy's nodes against the topology in force
 * @pol: the policy
 * @fit: if not NULL, receives which node failed and what a lookup does instead
 *
 * Says beforehand where a node lookup would fall back (docs/placement.md);
 * the mask is taken as stored, and a policy without nodes always fits.
 * Context: any thread; takes no lock; reads sysfs on first use.
 * Return: 0 when every node of @pol has memory in the topology in force; -ENOENT when one
 * does not (@fit says which); -EINVAL when @pol is NULL (@fit untouched).
 */
PS_API int ps_numa_check_policy(const struct ps_policy *pol, struct ps_policy_fit *fit);

/**
 * ps_policy_apply() - place the pages of [@addr, @addr + @len) by a policy
 * @pol: the policy; NULL applies the default policy (as where no range is)
 * @addr: start of a mapping of the calling process; page aligned
 * @len: length in bytes (the kernel rounds it up to pages); 0 does nothing and succeeds
 * @flags: 0 or PS_APPLY_STRICT and/or PS_APPLY_MOVE
 *
 * One mbind(2) with the policy's mode, flags and nodes, after polstore's
 * node checks (docs/placement.md).
 * Context: any thread; may sleep (the mm's lock; PS_APPLY_MOVE migrates
 * pages); no allocation.
 * Return: 0; -EINVAL for a bad @flags, a misaligned @addr, a node that does not exist or is
 * not allowed, or a mode the kernel does not know; -EFAULT or -ENOMEM when [@addr, @addr +
 * @len) is not fully mapped; -EIO when PS_APPLY_STRICT is given and pages could not be placed
 * (the policy may be applied all the same); -ENOSYS or -EPERM as ps_numa_available().  On any
 * other error nothing has changed.
 */
PS_API int ps_policy_apply(const struct ps_policy *pol, void *addr, size_t len, unsigned flags);

/**
 * ps_policy_from_addr() - read the policy of the page at @addr
 * @addr: an address in a mapping of the calling process
 *
 * get_mempolicy(2) with MPOL_F_ADDR; no policy reads back as PS_MPOL_DEFAULT.
 * Context: any thread; may sleep; allocates the new policy.
 * Return: a new policy with one reference for the caller, or NULL with errno EFAULT (@addr
 * not mapped), ENOMEM, ENOSYS or EPERM (as ps_numa_available()), EOPNOTSUPP (a mode flag
 * polstore cannot hold, e.g. MPOL_F_NUMA_BALANCING) or EOVERFLOW (a node >= PS_MAX_NUMNODES).
 */
PS_API struct ps_policy *ps_policy_from_addr(const void *addr);

/**
 * ps_policy_to_bitmask() - copy a policy's nodes into a libnuma bitmask
 * @pol: the policy
 * @bmp: a bitmask from numa_allocate_nodemask() or numa_bitmask_alloc(); every bit is written
 * Context: any thread; writes only @bmp.
 * Return: 0, or -EINVAL when @pol or @bmp is NULL, @bmp has no bits, or a
 * node of @pol does not fit in @bmp (then @bmp is untouched).
 */
PS_API int ps_policy_to_bitmask(const struct ps_policy *pol, struct bitmask *bmp);

/**
 * ps_policy_from_bitmask() - create a policy from a libnuma bitmask
 * @mode: one of enum ps_mode
 * @flags: as for ps_policy_create()
 * @bmp: the nodes (numa_parse_nodestring(), numa_get_mems_allowed(), ...); NULL: none
 *
 * Exactly ps_policy_create(@mode, @flags, @bmp->maskp, @bmp->size).
 * Context: any thread; allocates.
 * Return: a new policy with one reference for the caller, or NULL with
 * errno as ps_policy_create() sets it.
 */
PS_API struct ps_policy *ps_policy_from_bitmask(
		int mode, unsigned flags, const struct bitmask *bmp);

/**
 * ps_store_apply_range() - place a window of a mapping as a store says
 * @store: the store; its indices are page numbers
 * @base: address of page @first_page in the mapping; aligned to @page_size
 * @first_page: first store index of the window
 * @npages: number of pages in the window
 * @page_size: bytes per page: the system page size, or a hugetlb mapping's huge page size
 * @flags: as for ps_policy_apply()
 * @done_pages: if not NULL, receives how many pages from @first_page on were placed
 *
 * One ps_policy_apply() per piece of the window cut at range edges, in order, from one
 * snapshot of the store, outside every lock and section (docs/placement.md).
 * Context: any thread, not inside a read-side section of @store; may sleep;
 * allocates a temporary array of the collected ranges.
 * Return: 0; -EINVAL for a NULL @store, a @page_size not a multiple of the system page size,
 * a misaligned @base, a window that overflows or a bad @flags, and -ENOMEM (nothing applied,
 * either); otherwise the first ps_policy_apply() error: pages before *@done_pages are
 * placed, pages from it on are untouched.
 */
PS_API int ps_store_apply_range(struct ps_store *store, void *base, uint64_t first_page,
		uint64_t npages, size_t page_size, unsigned flags, size_t *done_pages);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_NUMA_H */
