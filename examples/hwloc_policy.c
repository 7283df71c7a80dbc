// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * hwloc_policy: placement policies from the machine's topology, with the
 * hwloc bridge (libpolstore_hwloc).
 *
 * One slice of a store's pages per package: each slice interleaves over the
 * NUMA nodes hwloc finds under its package (ps_hwloc_policy_from_obj()).
 * The store places a mapping with ps_store_apply_range(), and each slice is
 * read back with get_mempolicy(2) and its nodes compared with hwloc's.
 * A machine whose topology shows no package gets one slice for the whole
 * machine.
 *
 * Build against an installed polstore:
 *   cc hwloc_policy.c $(pkg-config --cflags --libs polstore-hwloc)
 * Usage: hwloc_policy [PAGES_PER_PACKAGE]
 * Exit status: 0 when every slice reads back as stored, 1 otherwise, 77
 * when this system does not allow mbind(2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <polstore/hwloc.h>
#include <polstore/polstore.h>

int main(int argc, char **argv)
{
	size_t per = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	hwloc_topology_t topo;
	struct ps_store *store;
	int npkg, nslices, ret = 0, avail;
	char *map;

	avail = ps_numa_available();
	if (avail) {
		printf("hwloc_policy: placement unavailable here (%s): skipped\n",
				strerror(-avail));
		return 77;
	}
	if (!per || hwloc_topology_init(&topo) || hwloc_topology_load(topo)) {
		fprintf(stderr, "usage: %s [PAGES_PER_PACKAGE] (and a loadable topology)\n",
				argv[0]);
		return 2;
	}
	npkg = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
	nslices = npkg > 0 ? npkg : 1;
	store = ps_store_create(PS_SYNC_RCU);
	map = mmap(NULL, (size_t)nslices * per * page, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!store || map == MAP_FAILED) {
		perror("hwloc_policy");
		return 1;
	}

	/* Slice i of the store: interleaved over the NUMA nodes of package i. */
	for (int i = 0; i < nslices; i++) {
		hwloc_obj_t obj = npkg > 0 ? hwloc_get_obj_by_type(
							     topo, HWLOC_OBJ_PACKAGE, (unsigned)i)
					   : hwloc_get_root_obj(topo);
		struct ps_policy *pol = ps_hwloc_policy_from_obj(topo, obj, PS_MPOL_INTERLEAVE, 0);

		if (!pol || ps_store_set(store, (uint64_t)i * per, (uint64_t)(i + 1) * per, pol)) {
			fprintf(stderr, "hwloc_policy: package %d: %s\n", i, strerror(errno));
			return 1;
		}
		ps_policy_put(pol); /* the store holds its own reference */
	}
	ret = ps_store_apply_range(store, map, 0, (uint64_t)nslices * per, page, 0, NULL);
	if (ret == -EPERM) {
		printf("hwloc_policy: mbind(2) not permitted here: skipped\n");
		return 77;
	}
	if (ret) {
		fprintf(stderr, "hwloc_policy: ps_store_apply_range: %s\n", strerror(-ret));
		return 1;
	}

	printf("%-10s %-12s %-12s %8s  %s\n", "slice", "hwloc nodes", "read back", "pages",
			"check");
	for (int i = 0; i < nslices; i++) {
		hwloc_obj_t obj = npkg > 0 ? hwloc_get_obj_by_type(
							     topo, HWLOC_OBJ_PACKAGE, (unsigned)i)
					   : hwloc_get_root_obj(topo);
		char *slice = map + (size_t)i * per * page, *want = NULL, *got = NULL, name[32];
		struct ps_policy *back = ps_policy_from_addr(slice + (per - 1) * page);
		hwloc_nodeset_t nodes = hwloc_bitmap_alloc();
		bool ok = back && nodes && ps_policy_mode(back) == PS_MPOL_INTERLEAVE &&
			  ps_hwloc_policy_to_nodeset(back, nodes) == 0 &&
			  hwloc_bitmap_isequal(nodes, obj->nodeset);

		hwloc_bitmap_list_asprintf(&want, obj->nodeset);
		hwloc_bitmap_list_asprintf(&got, nodes);
		snprintf(name, sizeof(name), npkg > 0 ? "package %d" : "machine", i);
		printf("%-10s %-12s %-12s %8zu  %s\n", name, want, got, per, ok ? "ok" : "FAILED");
		ret |= !ok;
		free(want);
		free(got);
		hwloc_bitmap_free(nodes);
		ps_policy_put(back);
	}
	munmap(map, (size_t)nslices * per * page);
	ps_store_destroy(store);
	hwloc_topology_destroy(topo);
	return ret ? 1 : 0;
}
