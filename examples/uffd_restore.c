// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffd_restore: guest RAM restored on demand from a snapshot file, as a
 * virtual machine monitor restores (or migrates) a guest lazily, with the
 * fault plane (libpolstore_uffd).
 *
 * The guest has G NUMA nodes of M MiB each; its RAM is one anonymous
 * mapping and the snapshot file holds it, page for page.  A store says
 * where each guest node's memory goes: one range per guest node,
 * PREFERRED on the host node that guest node maps to (the host nodes this
 * process may use, round robin).  The RAM is registered with a fault
 * plane whose fill callback reads the faulting page from the snapshot
 * (pread(2) at the page's offset), so nothing is read before a vCPU needs
 * it, and every page lands on its guest node's host node.  vCPU threads
 * touch random pages, as a guest would, and compare each with the
 * snapshot; then every page is checked and the pages per guest node and
 * host node are counted with get_mempolicy(2).
 *
 * With -t the layout is written in the guest's own node numbers instead:
 * guest node i's range prefers node i, and ps_numa_set_topology()
 * installs the guest's topology (G nodes, local distance 10, 20 between
 * them) so that the store names guest nodes the host may lack (without
 * it the store names only nodes the host has, and maps every other to
 * one of those).  The plane then places a page of guest node i on host
 * node i where the host has it and this process may allocate there, and
 * elsewhere on the resolver's local node, counted as a fallback.
 *
 * Without a SNAPSHOT argument a snapshot with a pattern is written to a
 * temporary file first.
 *
 * Build against an installed polstore:
 *   cc uffd_restore.c $(pkg-config --cflags --libs polstore-uffd numa) -pthread
 * Usage: uffd_restore [-g GUEST_NODES] [-m MIB_PER_NODE] [-v VCPUS] [-k] [-t] [SNAPSHOT]
 *   -g  guest NUMA nodes (default 2)     -m  MiB of RAM per guest node (default 16)
 *   -v  vCPU threads (default 4)         -t  the layout in guest node numbers
 *   -k  vCPUs read guest memory through the kernel (write(2) of the page to
 *       a pipe), as KVM does; a vCPU's own load is the default
 * Exit status: 0 when every page matches the snapshot, 1 otherwise, 2 for a
 * usage error, 77 when this process may not use userfaultfd (the reason is
 * printed).  Where the pages lie is printed: a full host node sends pages
 * elsewhere, as a preferred policy does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <polstore/polstore.h>
#include <polstore/uffd.h>

#define MAX_GUEST_NODES 64

struct guest {
	int fd;		 /* the snapshot */
	size_t page;	 /* bytes per page */
	size_t pages;	 /* pages of guest RAM */
	size_t per_node; /* pages per guest node */
	char *ram;
	int host_of[MAX_GUEST_NODES];
	bool kernel_reads; /* -k */
};

struct vcpu {
	struct guest *g;
	unsigned seed;
	long touched, bad;
	pthread_t thread;
};

/* The fill callback: page @f->page of guest RAM, from the snapshot. */
static int restore_page(void *buf, const struct ps_uffd_fault *f, void *arg)
{
	struct guest *g = arg;
	ssize_t n = pread(g->fd, buf, g->page, (off_t)(f->page * g->page));

	return n == (ssize_t)g->page ? 0 : -EIO;
}

/* The snapshot's word @w of page @p, as the generated snapshot writes it. */
static uint64_t pattern(size_t p, size_t w)
{
	return (uint64_t)p * 0x9e3779b97f4a7c15ULL ^ w;
}

static int write_snapshot(struct guest *g)
{
	char name[] = "/tmp/uffd_restore.XXXXXX";
	uint64_t *buf = malloc(g->page);
	int fd = mkstemp(name);

	if (fd < 0 || !buf) {
		perror("uffd_restore: snapshot");
		free(buf);
		return -1;
	}
	unlink(name);
	for (size_t p = 0; p < g->pages; p++) {
		for (size_t w = 0; w < g->page / sizeof(*buf); w++)
			buf[w] = pattern(p, w);
		if (pwrite(fd, buf, g->page, (off_t)(p * g->page)) != (ssize_t)g->page) {
			perror("uffd_restore: writing the snapshot");
			close(fd);
			free(buf);
			return -1;
		}
	}
	free(buf);
	return fd;
}

/* Read guest page @p (through the kernel when @pfd is a pipe) and compare it with the snapshot. */
static bool page_ok(struct guest *g, size_t p, char *want, char *seen, const int *pfd)
{
	const char *addr = g->ram + p * g->page;

	if (pread(g->fd, want, g->page, (off_t)(p * g->page)) != (ssize_t)g->page)
		return false;
	if (pfd) {
		/* A kernel access faults into the plane too (no PS_UFFD_USER_MODE_ONLY). */
		if (write(pfd[1], addr, g->page) != (ssize_t)g->page ||
				read(pfd[0], seen, g->page) != (ssize_t)g->page)
			return false;
		return !memcmp(want, seen, g->page);
	}
	return !memcmp(want, addr, g->page);
}

static void *vcpu_main(void *arg)
{
	struct vcpu *v = arg;
	struct guest *g = v->g;
	char *want = malloc(g->page), *seen = malloc(g->page);
	int pfd[2] = {-1, -1};

	if (!want || !seen || (g->kernel_reads && pipe(pfd))) {
		v->bad++;
	} else {
		for (size_t i = 0; i < g->pages / 2; i++) {
			size_t p = (size_t)rand_r(&v->seed) % g->pages;

			v->touched++;
			v->bad += !page_ok(g, p, want, seen, g->kernel_reads ? pfd : NULL);
		}
	}
	if (pfd[0] >= 0) {
		close(pfd[0]);
		close(pfd[1]);
	}
	free(want);
	free(seen);
	return NULL;
}

static int usage(const char *prog)
{
	fprintf(stderr,
			"usage: %s [-g GUEST_NODES] [-m MIB_PER_NODE] [-v VCPUS] [-k] [-t] "
			"[SNAPSHOT]\n",
			prog);
	return 2;
}

int main(int argc, char **argv)
{
	struct guest g = {.page = (size_t)sysconf(_SC_PAGESIZE)};
	int nodes = 2, nvcpus = 4, opt, host[MAX_GUEST_NODES], nhost = 0, ret = 0, err;
	bool guest_numbers = false;
	long mib = 16;
	unsigned long allowed[PS_NODEMASK_WORDS] = {0};
	const unsigned bits = 8 * sizeof(unsigned long);
	struct ps_uffd_attr attr = PS_UFFD_ATTR_INIT;
	struct ps_uffd_stats st;
	struct ps_store *layout;
	struct ps_uffd *plane;
	struct vcpu *vcpus;
	char why[512];
	char *want, *seen;
	long bad = 0, touched = 0;

	while ((opt = getopt(argc, argv, "g:m:v:kt")) != -1) {
		switch (opt) {
		case 'g':
			nodes = atoi(optarg);
			break;
		case 'm':
			mib = atol(optarg);
			break;
		case 'v':
			nvcpus = atoi(optarg);
			break;
		case 'k':
			g.kernel_reads = true;
			break;
		case 't':
			guest_numbers = true;
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (nodes < 1 || nodes > MAX_GUEST_NODES || mib < 1 || nvcpus < 1 || optind + 1 < argc)
		return usage(argv[0]);
	if (ps_uffd_available(0, why, sizeof(why))) {
		printf("uffd_restore: %s: skipped\n", why);
		return 77;
	}
	g.per_node = (size_t)mib * (1 << 20) / g.page;
	g.pages = g.per_node * (size_t)nodes;
	if (optind < argc) {
		g.fd = open(argv[optind], O_RDONLY | O_CLOEXEC);
		if (g.fd < 0) {
			perror(argv[optind]);
			return 2;
		}
	} else if ((g.fd = write_snapshot(&g)) < 0) {
		return 1;
	}

	/*
	 * The guest's NUMA layout: guest node i -> the i-th allowed host node,
	 * round robin; with -t, guest node i -> node i, in the guest's topology.
	 */
	if (get_mempolicy(NULL, allowed, PS_MAX_NUMNODES, NULL, MPOL_F_MEMS_ALLOWED))
		allowed[0] = 1;
	for (int n = 0; n < PS_MAX_NUMNODES && nhost < MAX_GUEST_NODES; n++)
		if (allowed[n / bits] >> (n % bits) & 1)
			host[nhost++] = n;
	if (guest_numbers) {
		static unsigned char dist[MAX_GUEST_NODES * MAX_GUEST_NODES];

		for (int i = 0; i < nodes; i++) {
			host[i] = i;
			for (int j = 0; j < nodes; j++)
				dist[i * nodes + j] = i == j ? 10 : 20;
		}
		nhost = nodes;
		err = ps_numa_set_topology(nodes, dist, NULL);
		if (err) {
			fprintf(stderr, "uffd_restore: the guest topology: %s\n", strerror(-err));
			return 1;
		}
	}
	layout = ps_store_create(PS_SYNC_RCU);
	if (!layout) {
		perror("uffd_restore: ps_store_create");
		return 1;
	}
	for (int i = 0; i < nodes; i++) {
		unsigned long mask[PS_NODEMASK_WORDS] = {0};
		struct ps_policy *pol;

		g.host_of[i] = host[i % nhost];
		mask[g.host_of[i] / bits] = 1UL << (g.host_of[i] % bits);
		pol = ps_policy_create(PS_MPOL_PREFERRED, 0, mask, PS_MAX_NUMNODES);
		if (!pol || ps_store_set(layout, (uint64_t)i * g.per_node,
					    (uint64_t)(i + 1) * g.per_node, pol)) {
			perror("uffd_restore: the layout");
			return 1;
		}
		ps_policy_put(pol); /* the store keeps its own reference */
	}

	/* Guest RAM: reserved, never touched by this thread before the plane has it. */
	g.ram = mmap(NULL, g.pages * g.page, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (g.ram == MAP_FAILED) {
		perror("uffd_restore: mmap");
		return 1;
	}
	attr.fill = restore_page;
	attr.fill_arg = &g;
	plane = ps_uffd_create(layout, &attr, why, sizeof(why));
	if (!plane) {
		fprintf(stderr, "uffd_restore: %s\n", why);
		return 1;
	}
	err = ps_uffd_register(plane, g.ram, g.pages * g.page, 0);
	if (err) {
		fprintf(stderr, "uffd_restore: cannot register guest RAM: %s\n", strerror(-err));
		return 1;
	}

	vcpus = calloc((size_t)nvcpus, sizeof(*vcpus));
	if (!vcpus)
		return 1;
	for (int i = 0; i < nvcpus; i++) {
		vcpus[i].g = &g;
		vcpus[i].seed = 1 + (unsigned)i;
		if (pthread_create(&vcpus[i].thread, NULL, vcpu_main, &vcpus[i])) {
			fprintf(stderr, "uffd_restore: cannot start vCPU %d\n", i);
			return 1;
		}
	}
	for (int i = 0; i < nvcpus; i++) {
		pthread_join(vcpus[i].thread, NULL);
		touched += vcpus[i].touched;
		bad += vcpus[i].bad;
	}
	if (ps_uffd_stats(plane, -1, &st))
		return 1;
	printf("uffd_restore: %d guest nodes x %ld MiB, %d vCPUs touched %ld pages: %llu faults, "
	       "%llu pages restored, %llu already there, %llu on the local node for want of "
	       "the named one\n",
			nodes, mib, nvcpus, touched, (unsigned long long)st.faults,
			(unsigned long long)st.copies, (unsigned long long)st.exists,
			(unsigned long long)st.fallbacks);

	/* Every page now, and where each guest node's pages lie. */
	want = malloc(g.page);
	seen = malloc(g.page);
	if (!want || !seen)
		return 1;
	for (int i = 0; i < nodes; i++) {
		long on_host = 0, elsewhere = 0;

		for (size_t p = (size_t)i * g.per_node; p < (size_t)(i + 1) * g.per_node; p++) {
			int node = -1;

			bad += !page_ok(&g, p, want, seen, NULL);
			if (get_mempolicy(&node, NULL, 0, g.ram + p * g.page,
					    MPOL_F_NODE | MPOL_F_ADDR))
				bad++;
			else if (node == g.host_of[i])
				on_host++;
			else
				elsewhere++;
		}
		printf("  guest node %d -> host node %d: %ld pages there, %ld elsewhere\n", i,
				g.host_of[i], on_host, elsewhere);
	}
	if (bad) {
		fprintf(stderr, "uffd_restore: %ld pages differ from the snapshot\n", bad);
		ret = 1;
	}
	ps_uffd_destroy(plane); /* before the store it reads */
	ps_store_destroy(layout);
	munmap(g.ram, g.pages * g.page);
	close(g.fd);
	free(vcpus);
	free(want);
	free(seen);
	return ret;
}
