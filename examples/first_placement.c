// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * first_placement: give a range of pages a policy, ask which node a page
 * goes to, and place real memory as the store says.
 *
 * Store index i is page i of a mapping.  Pages [0, 256) are bound to
 * node 0; the others keep the default policy (the local node).  The
 * program asks the store where pages 7 and 300 go, places a 512-page
 * mapping with one call, touches it, and reads back from the kernel which
 * node each of the two pages landed on.
 *
 * Build against an installed polstore:
 *   cc first_placement.c $(pkg-config --cflags --libs polstore) -o first_placement
 * Exit status 77: mbind(2) is not permitted here (a container, say).
 */
#define _GNU_SOURCE /* sched_getcpu() */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <polstore/polstore.h>

/* The node the kernel put the page at @addr on. */
static int landed_on(void *addr)
{
	int node = -1;

	return get_mempolicy(&node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) ? -1 : node;
}

int main(void)
{
	const size_t pages = 512, page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned long node0 = 1UL; /* bit i is node i */
	struct ps_store *store = ps_store_create(PS_SYNC_RCU);
	struct ps_policy *bind = ps_policy_create(PS_MPOL_BIND, 0, &node0, 1);
	int cpu = sched_getcpu(), local = cpu >= 0 ? numa_node_of_cpu(cpu) : 0;
	char *mem;
	int ret;

	if (!store || !bind) {
		perror("polstore");
		return 1;
	}
	if (local < 0)
		local = 0;

	/* Pages [0, 256) go to node 0.  The store takes its own reference. */
	ret = ps_store_set(store, 0, 256, bind);
	ps_policy_put(bind);
	if (ret) {
		fprintf(stderr, "ps_store_set: %s\n", strerror(-ret));
		return 1;
	}

	/* The question a fault handler or an allocator asks: where does this page go? */
	printf("the store says: page 7 -> node %d, page 300 -> node %d (this CPU's node: %d)\n",
			ps_store_lookup_node(store, 7, local), ps_store_lookup_node(store, 300, local),
			local);

	/* Real memory: one mbind(2) per range of the store that meets the mapping. */
	mem = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	ret = ps_store_apply_range(store, mem, 0, pages, page, 0, NULL);
	if (ret == -EPERM || ret == -ENOSYS) {
		printf("mbind(2) is not available here: skipped\n");
		return 77;
	}
	if (ret) {
		fprintf(stderr, "ps_store_apply_range: %s\n", strerror(-ret));
		return 1;
	}
	memset(mem, 1, pages * page); /* the first touch allocates each page where it was placed */
	printf("the kernel says: page 7 is on node %d, page 300 on node %d\n",
			landed_on(mem + 7 * page), landed_on(mem + 300 * page));
	if (landed_on(mem + 7 * page) != ps_store_lookup_node(store, 7, local)) {
		fprintf(stderr, "page 7 is not where the store said\n");
		return 1;
	}

	munmap(mem, pages * page);
	ps_store_destroy(store);
	return 0;
}
