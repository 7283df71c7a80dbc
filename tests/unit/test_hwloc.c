// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The hwloc bridge (libpolstore_hwloc) against hwloc's own view: node sets
 * and masks round-trip; a policy made from each NUMA node, package and the
 * machine of this machine's topology names exactly the nodes hwloc gives
 * that object, and the machine's nodes are those the kernel lets us use
 * (get_mempolicy(MPOL_F_MEMS_ALLOWED)), so the policy applies; on a
 * synthetic two-package topology each package gives its own node and a
 * disallowed node is left out.  Bad input: node sets beyond
 * PS_MAX_NUMNODES, infinite sets, short masks, NULLs, objects without
 * nodes: -EINVAL (or NULL with errno EINVAL), output untouched.
 * Registered only when the bridge is built.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <polstore/hwloc.h>
#include <polstore/numa.h>

#include "testutil.h"

#define LONG_BITS (8 * sizeof(unsigned long))
#define MASK_LONGS (PS_MAX_NUMNODES / LONG_BITS)

static hwloc_topology_t load_topology(const char *synthetic, unsigned long flags)
{
	hwloc_topology_t topo;

	cr_assert_eq(hwloc_topology_init(&topo), 0);
	if (flags)
		cr_assert_eq(hwloc_topology_set_flags(topo, flags), 0);
	/* Misc objects (no node set) for bad_input. */
	cr_assert_eq(hwloc_topology_set_type_filter(
				     topo, HWLOC_OBJ_MISC, HWLOC_TYPE_FILTER_KEEP_ALL),
			0);
	if (synthetic)
		cr_assert_eq(hwloc_topology_set_synthetic(topo, synthetic), 0, "%s", synthetic);
	cr_assert_eq(hwloc_topology_load(topo), 0, "hwloc_topology_load: %s", strerror(errno));
	return topo;
}

/* The nodes of @pol, as an hwloc node set the caller frees. */
static hwloc_nodeset_t nodes_of(const struct ps_policy *pol)
{
	hwloc_nodeset_t set = hwloc_bitmap_alloc();

	cr_assert_not_null(set);
	cr_assert_eq(ps_hwloc_policy_to_nodeset(pol, set), 0);
	return set;
}

static void expect_sets_equal(
		hwloc_const_nodeset_t got, hwloc_const_nodeset_t want, const char *what)
{
	char *g = NULL, *w = NULL;
	bool equal = hwloc_bitmap_isequal(got, want);

	hwloc_bitmap_list_asprintf(&g, got);
	hwloc_bitmap_list_asprintf(&w, want);
	cr_expect(equal, "%s: nodes %s, hwloc says %s", what, g, w);
	free(g);
	free(w);
	cr_assert(equal);
}

Test(hwloc, nodeset_mask_round_trip)
{
	uint64_t rnd = 42;
	hwloc_nodeset_t set = hwloc_bitmap_alloc(), back = hwloc_bitmap_alloc();
	unsigned long mask[PS_MAXNODE_LIMIT / LONG_BITS];

	for (int iter = 0; iter < 200; iter++) {
		unsigned long maxnode = iter % 3 == 0	? PS_MAX_NUMNODES
					: iter % 3 == 1 ? PS_MAXNODE_LIMIT
							: 1 + ps_test_rand(&rnd) % 200;
		int n = (int)(ps_test_rand(&rnd) % 8);

		hwloc_bitmap_zero(set);
		for (int i = 0; i < n; i++)
			hwloc_bitmap_set(set,
					(unsigned)(ps_test_rand(&rnd) %
							(maxnode < PS_MAX_NUMNODES ? maxnode
										   : PS_MAX_NUMNODES)));
		memset(mask, 0xa5, sizeof(mask));
		cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, maxnode), 0);
		for (unsigned long b = 0; b < (maxnode + LONG_BITS - 1) / LONG_BITS * LONG_BITS;
				b++)
			cr_assert_eq(mask[b / LONG_BITS] >> (b % LONG_BITS) & 1,
					(unsigned long)hwloc_bitmap_isset(set, (unsigned)b),
					"bit %lu, maxnode %lu", b, maxnode);
		hwloc_bitmap_fill(back); /* overwritten whole */
		cr_assert_eq(ps_hwloc_mask_to_nodeset(mask, maxnode, back), 0);
		expect_sets_equal(back, set, "mask -> node set");
	}
	/* NULL mask: the empty set, whatever maxnode says. */
	hwloc_bitmap_fill(back);
	cr_assert_eq(ps_hwloc_mask_to_nodeset(NULL, 5, back), 0);
	cr_assert(hwloc_bitmap_iszero(back));
	/* Bits past maxnode in the last word are not nodes. */
	mask[0] = ~0UL;
	cr_assert_eq(ps_hwloc_mask_to_nodeset(mask, 3, back), 0);
	cr_assert_eq(hwloc_bitmap_weight(back), 3);
	hwloc_bitmap_free(set);
	hwloc_bitmap_free(back);
}

Test(hwloc, policy_round_trip)
{
	hwloc_nodeset_t set = hwloc_bitmap_alloc(), got;
	struct ps_policy *pol;

	hwloc_bitmap_set(set, 0);
	hwloc_bitmap_set(set, 3);
	hwloc_bitmap_set(set, PS_MAX_NUMNODES - 1);
	pol = ps_hwloc_policy_from_nodeset(PS_MPOL_INTERLEAVE, PS_MPOL_F_STATIC_NODES, set);
	cr_assert_not_null(pol, "%s", strerror(errno));
	cr_assert_eq(ps_policy_mode(pol), PS_MPOL_INTERLEAVE);
	cr_assert_eq(ps_policy_flags(pol), PS_MPOL_F_STATIC_NODES);
	cr_assert_eq(ps_policy_weight(pol), 3);
	got = nodes_of(pol);
	expect_sets_equal(got, set, "interleave policy");
	ps_policy_put(pol);
	hwloc_bitmap_free(got);

	/* NULL node set: empty, so only the modes that take no node accept it. */
	pol = ps_hwloc_policy_from_nodeset(PS_MPOL_LOCAL, 0, NULL);
	cr_assert_not_null(pol);
	got = nodes_of(pol);
	cr_assert(hwloc_bitmap_iszero(got));
	hwloc_bitmap_free(got);
	ps_policy_put(pol);
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_nodeset(PS_MPOL_BIND, 0, NULL));
	cr_assert_eq(errno, EINVAL);
	hwloc_bitmap_free(set);
}

/* Every NUMA node, package and the machine of this machine, and the kernel's view. */
Test(hwloc, matches_this_machine)
{
	hwloc_topology_t topo = load_topology(NULL, 0);
	hwloc_obj_t obj = NULL, root = hwloc_get_root_obj(topo);
	unsigned long kmask[PS_MAXNODE_LIMIT / LONG_BITS] = {0};
	hwloc_nodeset_t kernel = hwloc_bitmap_alloc(), got;
	struct ps_policy *pol;
	int nnodes = 0, npkgs = 0;

	while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj))) {
		pol = ps_hwloc_policy_from_obj(topo, obj, PS_MPOL_BIND, 0);
		cr_assert_not_null(pol, "NUMA node %u: %s", obj->os_index, strerror(errno));
		cr_assert_eq(ps_policy_weight(pol), 1);
		cr_assert_eq(ps_policy_first_node(pol), (int)obj->os_index);
		ps_policy_put(pol);
		nnodes++;
	}
	cr_assert_gt(nnodes, 0, "hwloc sees no NUMA node");
	while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj))) {
		pol = ps_hwloc_policy_from_obj(topo, obj, PS_MPOL_INTERLEAVE, 0);
		cr_assert_not_null(pol, "package %u: %s", obj->os_index, strerror(errno));
		got = nodes_of(pol);
		expect_sets_equal(got, obj->nodeset, "package");
		hwloc_bitmap_free(got);
		ps_policy_put(pol);
		npkgs++;
	}
	/* A PU: the nodes local to it, a subset of the machine's. */
	obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, 0);
	pol = ps_hwloc_policy_from_obj(topo, obj, PS_MPOL_PREFERRED_MANY, 0);
	cr_assert_not_null(pol, "PU 0: %s", strerror(errno));
	got = nodes_of(pol);
	cr_assert(hwloc_bitmap_isincluded(got, root->nodeset));
	cr_assert(!hwloc_bitmap_iszero(got));
	hwloc_bitmap_free(got);
	ps_policy_put(pol);

	/* The machine: hwloc's allowed nodes, which are the kernel's. */
	pol = ps_hwloc_policy_from_obj(topo, root, PS_MPOL_BIND, 0);
	cr_assert_not_null(pol, "machine: %s", strerror(errno));
	got = nodes_of(pol);
	expect_sets_equal(got, hwloc_topology_get_allowed_nodeset(topo), "machine");
	if (syscall(SYS_get_mempolicy, NULL, kmask, (unsigned long)PS_MAXNODE_LIMIT, NULL,
			    4 /* MPOL_F_MEMS_ALLOWED */) == 0) {
		cr_assert_eq(ps_hwloc_mask_to_nodeset(kmask, PS_MAX_NUMNODES, kernel), 0);
		expect_sets_equal(got, kernel, "machine vs the kernel's allowed nodes");
	}
	cr_log_info("hwloc: %d NUMA node(s), %d package(s)", nnodes, npkgs);

	/* Bound to the machine's nodes, a mapping reads the policy back. */
	if (ps_numa_available() == 0) {
		size_t len = 4 * (size_t)sysconf(_SC_PAGESIZE);
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
				0);
		struct ps_policy *back;
		int ret;

		cr_assert(p != MAP_FAILED);
		ret = ps_policy_apply(pol, p, len, 0);
		if (ret != -EPERM) {
			cr_assert_eq(ret, 0, "ps_policy_apply: %s", strerror(-ret));
			p[0] = 1;
			back = ps_policy_from_addr(p);
			cr_assert(ps_policy_equal(back, pol));
			ps_policy_put(back);
		}
		munmap(p, len);
	}
	hwloc_bitmap_free(got);
	hwloc_bitmap_free(kernel);
	ps_policy_put(pol);
	hwloc_topology_destroy(topo);
}

/* Two packages, one NUMA node each: each package its own node. */
Test(hwloc, synthetic_packages)
{
	hwloc_topology_t topo = load_topology("pack:2 numa:1 core:2 pu:1", 0);
	struct ps_policy *pol;

	cr_assert_eq(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE), 2);
	for (unsigned i = 0; i < 2; i++) {
		hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, i);
		hwloc_obj_t numa = hwloc_get_next_obj_covering_cpuset_by_type(
				topo, pkg->cpuset, HWLOC_OBJ_NUMANODE, NULL);
		hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(
				topo, pkg->cpuset, HWLOC_OBJ_CORE, 1);

		cr_assert_not_null(numa);
		pol = ps_hwloc_policy_from_obj(topo, pkg, PS_MPOL_BIND, 0);
		cr_assert_not_null(pol);
		cr_assert_eq(ps_policy_weight(pol), 1);
		cr_assert_eq(ps_policy_first_node(pol), (int)numa->os_index);
		ps_policy_put(pol);
		/* A core below the package: the node attached above it. */
		pol = ps_hwloc_policy_from_obj(topo, core, PS_MPOL_PREFERRED, 0);
		cr_assert_not_null(pol);
		cr_assert_eq(ps_policy_first_node(pol), (int)numa->os_index);
		ps_policy_put(pol);
	}
	pol = ps_hwloc_policy_from_obj(topo, hwloc_get_root_obj(topo), PS_MPOL_INTERLEAVE, 0);
	cr_assert_not_null(pol);
	cr_assert_eq(ps_policy_weight(pol), 2);
	ps_policy_put(pol);
	hwloc_topology_destroy(topo);
}

/* A topology that keeps disallowed nodes: they are left out, none left is EINVAL. */
Test(hwloc, disallowed_nodes_left_out)
{
	hwloc_topology_t topo = load_topology(
			"pack:2 numa:1 core:1 pu:1", HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
	hwloc_nodeset_t only1 = hwloc_bitmap_alloc();
	hwloc_obj_t pkg0 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
	hwloc_obj_t pkg1 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 1);
	hwloc_obj_t node1 = hwloc_get_next_obj_covering_cpuset_by_type(
			topo, pkg1->cpuset, HWLOC_OBJ_NUMANODE, NULL);
	struct ps_policy *pol;

	hwloc_bitmap_set(only1, node1->os_index);
	cr_assert_eq(hwloc_topology_allow(topo, NULL, only1, HWLOC_ALLOW_FLAG_CUSTOM), 0,
			"hwloc_topology_allow: %s", strerror(errno));
	pol = ps_hwloc_policy_from_obj(topo, hwloc_get_root_obj(topo), PS_MPOL_BIND, 0);
	cr_assert_not_null(pol);
	cr_assert_eq(ps_policy_weight(pol), 1);
	cr_assert_eq(ps_policy_first_node(pol), (int)node1->os_index);
	ps_policy_put(pol);
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_obj(topo, pkg0, PS_MPOL_PREFERRED, 0),
			"an empty PREFERRED would mean local");
	cr_assert_eq(errno, EINVAL);
	hwloc_bitmap_free(only1);
	hwloc_topology_destroy(topo);
}

Test(hwloc, bad_input)
{
	unsigned long mask[PS_MAXNODE_LIMIT / LONG_BITS], before[PS_MAXNODE_LIMIT / LONG_BITS];
	hwloc_nodeset_t set = hwloc_bitmap_alloc(), out = hwloc_bitmap_alloc();
	hwloc_topology_t topo = load_topology(NULL, 0);
	hwloc_obj_t misc;
	struct ps_policy *pol;

	memset(mask, 0x5a, sizeof(mask));
	memcpy(before, mask, sizeof(mask));

	/* A node beyond PS_MAX_NUMNODES, in a node set. */
	hwloc_bitmap_set(set, 1);
	hwloc_bitmap_set(set, PS_MAX_NUMNODES);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, PS_MAXNODE_LIMIT), -EINVAL);
	cr_assert_arr_eq(mask, before, sizeof(mask), "mask written on error");
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_nodeset(PS_MPOL_BIND, 0, set));
	cr_assert_eq(errno, EINVAL);
	/* Infinite sets. */
	hwloc_bitmap_fill(set);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, PS_MAX_NUMNODES), -EINVAL);
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_nodeset(PS_MPOL_INTERLEAVE, 0, set));
	cr_assert_eq(errno, EINVAL);
	hwloc_bitmap_zero(set);
	hwloc_bitmap_set_range(set, 5, -1);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, PS_MAX_NUMNODES), -EINVAL);
	/* A node that fits polstore but not the caller's mask. */
	hwloc_bitmap_only(set, 70);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, 64), -EINVAL);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, 70), -EINVAL);
	cr_assert_arr_eq(mask, before, sizeof(mask), "mask written on error");
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, 71), 0);
	/* NULLs and sizes. */
	cr_assert_eq(ps_hwloc_nodeset_to_mask(NULL, mask, 64), -EINVAL);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, NULL, 64), -EINVAL);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, 0), -EINVAL);
	cr_assert_eq(ps_hwloc_nodeset_to_mask(set, mask, PS_MAXNODE_LIMIT + 1), -EINVAL);

	/* A mask naming node PS_MAX_NUMNODES: refused, the node set untouched. */
	hwloc_bitmap_only(out, 7);
	memset(mask, 0, sizeof(mask));
	mask[PS_MAX_NUMNODES / LONG_BITS] = 1;
	cr_assert_eq(ps_hwloc_mask_to_nodeset(mask, PS_MAX_NUMNODES + 1, out), -EINVAL);
	cr_assert_eq(hwloc_bitmap_weight(out), 1);
	cr_assert(hwloc_bitmap_isset(out, 7));
	/* ...but with maxnode short of it, that bit is not a node. */
	cr_assert_eq(ps_hwloc_mask_to_nodeset(mask, PS_MAX_NUMNODES, out), 0);
	cr_assert(hwloc_bitmap_iszero(out));
	cr_assert_eq(ps_hwloc_mask_to_nodeset(mask, PS_MAXNODE_LIMIT + 1, out), -EINVAL);
	cr_assert_eq(ps_hwloc_mask_to_nodeset(mask, 8, NULL), -EINVAL);
	cr_assert_eq(ps_hwloc_policy_to_nodeset(NULL, out), -EINVAL);
	pol = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);
	cr_assert_eq(ps_hwloc_policy_to_nodeset(pol, NULL), -EINVAL);
	ps_policy_put(pol);

	/* Objects: NULLs, no node set, a mode that takes no node. */
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_obj(NULL, hwloc_get_root_obj(topo), PS_MPOL_BIND, 0));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_obj(topo, NULL, PS_MPOL_BIND, 0));
	cr_assert_eq(errno, EINVAL);
	misc = hwloc_topology_insert_misc_object(topo, hwloc_get_root_obj(topo), "no nodes");
	cr_assert_not_null(misc);
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_obj(topo, misc, PS_MPOL_BIND, 0));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_obj(
			topo, hwloc_get_root_obj(topo), PS_MPOL_DEFAULT, 0));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(ps_hwloc_policy_from_obj(topo, hwloc_get_root_obj(topo), PS_MPOL_BIND,
			PS_MPOL_F_STATIC_NODES | PS_MPOL_F_RELATIVE_NODES));
	cr_assert_eq(errno, EINVAL);

	hwloc_topology_destroy(topo);
	hwloc_bitmap_free(set);
	hwloc_bitmap_free(out);
}
