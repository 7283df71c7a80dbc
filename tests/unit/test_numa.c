// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Real placement on real mappings: mmap, apply with mbind(2), read back with
 * get_mempolicy(2).  The cases are those of LTP's mbind01 and
 * get_mempolicy01 that make sense on any machine, one node included: every
 * mode on node 0 reads back exactly, a node this machine lacks and a
 * misaligned address give EINVAL.  Every test skips, saying why, when the
 * kernel has no NUMA support or the system call is refused (seccomp).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <polstore/numa.h>

#include "testutil.h"

#define NPAGES 16

static size_t page;

static void skip_unless_numa(void)
{
	int ret = ps_numa_available();

	if (ret == -ENOSYS)
		cr_skip_test("kernel without NUMA support (get_mempolicy: ENOSYS)");
	if (ret == -EPERM)
		cr_skip_test("get_mempolicy/mbind not permitted here (EPERM, seccomp?)");
	cr_assert_eq(ret, 0, "ps_numa_available() = %d", ret);
}

static char *map_pages(size_t n)
{
	char *p;

	page = (size_t)sysconf(_SC_PAGESIZE);
	p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(p != MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

/* Apply, turning a refused mbind into a skip (containers may filter mbind alone). */
static int apply_or_skip(const struct ps_policy *pol, void *addr, size_t len, unsigned flags)
{
	int ret = ps_policy_apply(pol, addr, len, flags);

	if (ret == -EPERM || ret == -ENOSYS)
		cr_skip_test("mbind not permitted here (%s)", strerror(-ret));
	return ret;
}

static struct ps_policy *node_policy(int mode, unsigned flags, int node)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = {0};
	struct ps_policy *pol;

	mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
	pol = ps_policy_create(mode, flags, mask, PS_MAX_NUMNODES);
	cr_assert_not_null(pol, "ps_policy_create(%s): %s", ps_mode_name(mode), strerror(errno));
	return pol;
}

static struct ps_policy *empty_policy(int mode)
{
	struct ps_policy *pol = ps_policy_create(mode, 0, NULL, 0);

	cr_assert_not_null(pol);
	return pol;
}

/* The policy at @addr equals @want: same mode, same flags, same nodes. */
static void expect_policy_at(const void *addr, const struct ps_policy *want)
{
	struct ps_policy *got = ps_policy_from_addr(addr);
	unsigned long gm[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))];
	unsigned long wm[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))];

	cr_assert_not_null(got, "ps_policy_from_addr: %s", strerror(errno));
	cr_expect_eq(ps_policy_mode(got), ps_policy_mode(want), "mode %s, want %s",
			ps_mode_name(ps_policy_mode(got)), ps_mode_name(ps_policy_mode(want)));
	cr_expect_eq(ps_policy_flags(got), ps_policy_flags(want));
	cr_assert_eq(ps_policy_nodemask(got, gm, PS_MAX_NUMNODES), 0);
	cr_assert_eq(ps_policy_nodemask(want, wm, PS_MAX_NUMNODES), 0);
	cr_expect_arr_eq(gm, wm, sizeof(gm), "node masks differ");
	cr_expect(ps_policy_equal(got, want));
	ps_policy_put(got);
}

/* A node number this machine does not have, as LTP uses on one-node boxes. */
static int missing_node(void)
{
	return numa_max_node() + 1;
}

TestSuite(numa, .init = skip_unless_numa);

struct mode_case {
	int mode;
	bool nodes;
};

static struct mode_case readback_cases[] = {
	{ PS_MPOL_DEFAULT, false },
	{ PS_MPOL_BIND, true },
	{ PS_MPOL_PREFERRED, true },
	{ PS_MPOL_INTERLEAVE, true },
	{ PS_MPOL_LOCAL, false },
	{ PS_MPOL_PREFERRED, false },
};

/* mbind01 / get_mempolicy01: each mode on node 0, before and after faulting. */
PS_ARRAY_TEST(struct mode_case, c, readback_cases, numa, readback)
{
	char *p = map_pages(NPAGES);
	struct ps_policy *pol = c->nodes ? node_policy(c->mode, 0, 0) : empty_policy(c->mode);

	cr_assert_eq(apply_or_skip(pol, p, NPAGES * page, 0), 0);
	expect_policy_at(p, pol);
	expect_policy_at(p + (NPAGES - 1) * page, pol);
	memset(p, 1, NPAGES * page);
	expect_policy_at(p + page, pol);
	if (c->mode == PS_MPOL_PREFERRED && !c->nodes)
		cr_expect_eq(ps_policy_mode(pol), PS_MPOL_LOCAL, "empty PREFERRED is LOCAL");
	ps_policy_put(pol);
	munmap(p, NPAGES * page);
}

/* Newer modes: exact read-back when the kernel knows them, EINVAL when it does not. */
Test(numa, newer_modes)
{
	int modes[] = {PS_MPOL_PREFERRED_MANY, PS_MPOL_WEIGHTED_INTERLEAVE};
	char *p = map_pages(NPAGES);

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct ps_policy *pol = node_policy(modes[i], 0, 0);
		int ret = apply_or_skip(pol, p, NPAGES * page, 0);

		if (ret == -EINVAL) {
			cr_log_info("kernel does not know %s", ps_mode_name(modes[i]));
		} else {
			cr_expect_eq(ret, 0, "%s: %d", ps_mode_name(modes[i]), ret);
			if (!ret)
				expect_policy_at(p, pol);
		}
		ps_policy_put(pol);
	}
	munmap(p, NPAGES * page);
}

Test(numa, mode_flags_read_back)
{
	char *p = map_pages(NPAGES);
	struct ps_policy *st = node_policy(PS_MPOL_BIND, PS_MPOL_F_STATIC_NODES, 0);
	struct ps_policy *rel = node_policy(PS_MPOL_INTERLEAVE, PS_MPOL_F_RELATIVE_NODES, 0);

	cr_assert_eq(apply_or_skip(st, p, NPAGES * page, 0), 0);
	expect_policy_at(p, st);
	cr_assert_eq(apply_or_skip(rel, p, NPAGES * page, 0), 0);
	expect_policy_at(p, rel);
	ps_policy_put(st);
	ps_policy_put(rel);
	munmap(p, NPAGES * page);
}

/* Only part of a mapping: the kernel splits the VMA, neighbours keep theirs. */
Test(numa, partial_range)
{
	char *p = map_pages(NPAGES);
	struct ps_policy *bind = node_policy(PS_MPOL_BIND, 0, 0);
	struct ps_policy *def = empty_policy(PS_MPOL_DEFAULT);

	cr_assert_eq(apply_or_skip(bind, p + 4 * page, 4 * page, 0), 0);
	expect_policy_at(p + 3 * page, def);
	expect_policy_at(p + 4 * page, bind);
	expect_policy_at(p + 7 * page, bind);
	expect_policy_at(p + 8 * page, def);
	/* NULL is the default policy: it undoes the bind. */
	cr_assert_eq(apply_or_skip(NULL, p, NPAGES * page, 0), 0);
	expect_policy_at(p + 5 * page, def);
	ps_policy_put(bind);
	ps_policy_put(def);
	munmap(p, NPAGES * page);
}

Test(numa, strict_move_on_faulted_pages)
{
	char *p = map_pages(NPAGES);
	struct ps_policy *pol = node_policy(PS_MPOL_BIND, 0, 0);

	memset(p, 1, NPAGES * page);
	cr_assert_eq(apply_or_skip(pol, p, NPAGES * page, PS_APPLY_STRICT | PS_APPLY_MOVE), 0);
	expect_policy_at(p, pol);
	cr_assert_eq(apply_or_skip(pol, p, NPAGES * page, PS_APPLY_STRICT), 0);
	ps_policy_put(pol);
	munmap(p, NPAGES * page);
}

/* mbind01's EINVAL cases; the mapping keeps its policy after each refusal. */
Test(numa, missing_node_is_einval)
{
	char *p = map_pages(NPAGES);
	struct ps_policy *pref = node_policy(PS_MPOL_PREFERRED, 0, 0);
	int modes[] = {PS_MPOL_BIND, PS_MPOL_PREFERRED, PS_MPOL_INTERLEAVE};

	cr_assert_eq(apply_or_skip(pref, p, NPAGES * page, 0), 0);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct ps_policy *pol = node_policy(modes[i], 0, missing_node());

		cr_expect_eq(ps_policy_apply(pol, p, NPAGES * page, 0), -EINVAL, "%s on node %d",
				ps_mode_name(modes[i]), missing_node());
		ps_policy_put(pol);
		/* Static nodes must exist too, even though they need not be allowed. */
		pol = node_policy(modes[i], PS_MPOL_F_STATIC_NODES, missing_node());
		cr_expect_eq(ps_policy_apply(pol, p, NPAGES * page, 0), -EINVAL);
		ps_policy_put(pol);
	}
	expect_policy_at(p, pref);
	ps_policy_put(pref);
	munmap(p, NPAGES * page);
}

/* Node 0 and a node that does not exist: the kernel would narrow, polstore refuses. */
Test(numa, partly_missing_mask_is_einval)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = {0};
	int node = missing_node();
	char *p = map_pages(NPAGES);
	struct ps_policy *pol;

	mask[0] = 1;
	mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
	pol = ps_policy_create(PS_MPOL_BIND, 0, mask, PS_MAX_NUMNODES);
	cr_assert_not_null(pol);
	cr_expect_eq(ps_policy_apply(pol, p, NPAGES * page, 0), -EINVAL);
	ps_policy_put(pol);
	munmap(p, NPAGES * page);
}

Test(numa, misaligned_and_bad_arguments)
{
	char *p = map_pages(NPAGES);
	struct ps_policy *pol = node_policy(PS_MPOL_BIND, 0, 0);
	struct ps_policy *def = empty_policy(PS_MPOL_DEFAULT);

	cr_expect_eq(ps_policy_apply(pol, p + 1, page, 0), -EINVAL);
	cr_expect_eq(ps_policy_apply(pol, p + page / 2, page, 0), -EINVAL);
	cr_expect_eq(ps_policy_apply(pol, p, page, 1U << 7), -EINVAL);
	expect_policy_at(p, def);
	cr_expect_eq(ps_policy_apply(pol, p, 0, 0), 0, "empty length is a no-op");
	expect_policy_at(p, def);
	ps_policy_put(pol);
	ps_policy_put(def);
	munmap(p, NPAGES * page);
}

Test(numa, unmapped_range)
{
	char *p = map_pages(NPAGES);
	struct ps_policy *pol = node_policy(PS_MPOL_BIND, 0, 0);
	int ret;

	munmap(p + 8 * page, 8 * page);
	ret = ps_policy_apply(pol, p + 8 * page, 8 * page, 0);
	cr_expect(ret == -EFAULT || ret == -ENOMEM, "apply on a hole: %d", ret);
	errno = 0;
	cr_expect_null(ps_policy_from_addr(p + 8 * page));
	cr_expect_eq(errno, EFAULT);
	ps_policy_put(pol);
	munmap(p, 8 * page);
}

/* A MAP_SHARED memfd keeps one policy per file page: another mapping sees it. */
Test(numa, shared_memfd_policy)
{
	int fd = memfd_create("polstore-test", 0);
	struct ps_policy *pol = node_policy(PS_MPOL_INTERLEAVE, 0, 0);
	struct ps_policy *def = empty_policy(PS_MPOL_DEFAULT);
	char *a, *b;

	page = (size_t)sysconf(_SC_PAGESIZE);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, NPAGES * page), 0);
	a = mmap(NULL, NPAGES * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, NPAGES * page, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert(a != MAP_FAILED && b != MAP_FAILED);
	cr_assert_eq(apply_or_skip(pol, a + 2 * page, 2 * page, 0), 0);
	expect_policy_at(b + 2 * page, pol);
	expect_policy_at(b + 3 * page, pol);
	expect_policy_at(b + 4 * page, def);
	munmap(a, NPAGES * page);
	munmap(b, NPAGES * page);
	close(fd);
	ps_policy_put(pol);
	ps_policy_put(def);
}

Test(numa, bitmask_round_trip)
{
	struct bitmask *bm = numa_bitmask_alloc(PS_MAX_NUMNODES);
	struct bitmask *out = numa_bitmask_alloc(PS_MAX_NUMNODES);
	struct bitmask *small = numa_bitmask_alloc(8);
	struct ps_policy *pol;

	numa_bitmask_setbit(bm, 0);
	numa_bitmask_setbit(bm, 3);
	numa_bitmask_setbit(bm, 700);
	pol = ps_policy_from_bitmask(PS_MPOL_INTERLEAVE, 0, bm);
	cr_assert_not_null(pol);
	cr_expect_eq(ps_policy_weight(pol), 3);
	numa_bitmask_setbit(out, 5);
	cr_assert_eq(ps_policy_to_bitmask(pol, out), 0);
	cr_expect(numa_bitmask_equal(bm, out), "round trip changed the nodes");
	/* Too small for node 700: refused, untouched. */
	numa_bitmask_setbit(small, 1);
	cr_expect_eq(ps_policy_to_bitmask(pol, small), -EINVAL);
	cr_expect(numa_bitmask_isbitset(small, 1) && numa_bitmask_weight(small) == 1);
	cr_expect_eq(ps_policy_to_bitmask(NULL, out), -EINVAL);
	cr_expect_eq(ps_policy_to_bitmask(pol, NULL), -EINVAL);
	ps_policy_put(pol);

	/* NULL and empty masks follow ps_policy_create(): LOCAL yes, BIND no. */
	pol = ps_policy_from_bitmask(PS_MPOL_PREFERRED, 0, NULL);
	cr_assert_not_null(pol);
	cr_expect_eq(ps_policy_mode(pol), PS_MPOL_LOCAL);
	ps_policy_put(pol);
	numa_bitmask_clearall(bm);
	errno = 0;
	cr_expect_null(ps_policy_from_bitmask(PS_MPOL_BIND, 0, bm));
	cr_expect_eq(errno, EINVAL);
	numa_bitmask_free(bm);
	numa_bitmask_free(out);
	numa_bitmask_free(small);
}

/* The allowed set itself converts and applies: what a runtime passes most often. */
Test(numa, mems_allowed_applies)
{
	struct bitmask *allowed = numa_get_mems_allowed();
	struct ps_policy *pol = ps_policy_from_bitmask(PS_MPOL_INTERLEAVE, 0, allowed);
	char *p = map_pages(NPAGES);

	cr_assert_not_null(pol);
	cr_assert_eq(apply_or_skip(pol, p, NPAGES * page, 0), 0);
	expect_policy_at(p, pol);
	ps_policy_put(pol);
	numa_bitmask_free(allowed);
	munmap(p, NPAGES * page);
}

/*
 * Store (page indices): [0,3) PREFERRED 0, [5,7) BIND 0, [8,9) INTERLEAVE 0,
 * [11,20) LOCAL.  Window [2, 13) mapped at p + page: pages 1 and 14 of the
 * mapping lie outside it and must keep the sentinel policy.
 */
VARIANT_TEST(numa, store_apply_range)
{
	struct ps_store *st = ps_store_create(*sync);
	struct ps_policy *pref = node_policy(PS_MPOL_PREFERRED, 0, 0);
	struct ps_policy *bind = node_policy(PS_MPOL_BIND, 0, 0);
	struct ps_policy *il = node_policy(PS_MPOL_INTERLEAVE, 0, 0);
	struct ps_policy *local = empty_policy(PS_MPOL_LOCAL);
	struct ps_policy *def = empty_policy(PS_MPOL_DEFAULT);
	struct ps_policy *sentinel = node_policy(PS_MPOL_PREFERRED_MANY, 0, 0);
	const struct ps_policy *want[NPAGES];
	char *p = map_pages(NPAGES);
	char *base = p; /* page i of the store is at p + i * page */
	size_t done = 12345;
	int ret;

	cr_assert_not_null(st);
	cr_assert_eq(ps_store_set(st, 0, 3, pref), 0);
	cr_assert_eq(ps_store_set(st, 5, 7, bind), 0);
	cr_assert_eq(ps_store_set(st, 8, 9, il), 0);
	cr_assert_eq(ps_store_set(st, 11, 20, local), 0);
	if (apply_or_skip(sentinel, p, NPAGES * page, 0) == -EINVAL) {
		ps_policy_put(sentinel); /* old kernel: any other non-default policy will do */
		sentinel = node_policy(PS_MPOL_INTERLEAVE, PS_MPOL_F_STATIC_NODES, 0);
		cr_assert_eq(apply_or_skip(sentinel, p, NPAGES * page, 0), 0);
	}
	ret = ps_store_apply_range(st, base + 2 * page, 2, 11, page, 0, &done);
	cr_assert_eq(ret, 0, "apply_range: %d", ret);
	cr_expect_eq(done, 11);
	for (int i = 0; i < NPAGES; i++)
		want[i] = sentinel;
	want[2] = pref;
	want[3] = want[4] = def;
	want[5] = want[6] = bind;
	want[7] = def;
	want[8] = il;
	want[9] = want[10] = def;
	want[11] = want[12] = local;
	for (int i = 0; i < NPAGES; i++) {
		cr_log_info("page %d", i);
		expect_policy_at(base + (size_t)i * page, want[i]);
	}
	cr_expect_eq(ps_store_check(st, NULL), 0);
	ps_store_destroy(st);
	cr_expect_eq(ps_policy_refcount(bind), 1, "apply_range leaked a reference");
	ps_policy_put(pref);
	ps_policy_put(bind);
	ps_policy_put(il);
	ps_policy_put(local);
	ps_policy_put(def);
	ps_policy_put(sentinel);
	munmap(p, NPAGES * page);
}

/* The first error stops the walk; done_pages says how far it got. */
VARIANT_TEST(numa, store_apply_range_error)
{
	struct ps_store *st = ps_store_create(*sync);
	struct ps_policy *bind = node_policy(PS_MPOL_BIND, 0, 0);
	struct ps_policy *bad = node_policy(PS_MPOL_BIND, 0, missing_node());
	struct ps_policy *il = node_policy(PS_MPOL_INTERLEAVE, 0, 0);
	struct ps_policy *def = empty_policy(PS_MPOL_DEFAULT);
	char *p = map_pages(NPAGES);
	size_t done = 12345;

	cr_assert_not_null(st);
	cr_assert_eq(ps_store_set(st, 100, 102, bind), 0);
	cr_assert_eq(ps_store_set(st, 104, 106, bad), 0);
	cr_assert_eq(ps_store_set(st, 106, 108, il), 0);
	/* Window [100, 110) at p. */
	cr_assert_eq(ps_store_apply_range(st, p, 100, 10, page, 0, &done), -EINVAL);
	cr_expect_eq(done, 4, "done_pages = %zu", done);
	expect_policy_at(p, bind);
	expect_policy_at(p + 2 * page, def);
	expect_policy_at(p + 3 * page, def);
	expect_policy_at(p + 6 * page, def); /* untouched: never reached */

	/* Argument errors apply nothing and report 0 pages. */
	done = 7;
	cr_expect_eq(ps_store_apply_range(NULL, p, 0, 1, page, 0, &done), -EINVAL);
	cr_expect_eq(done, 0);
	cr_expect_eq(ps_store_apply_range(st, p + 1, 0, 1, page, 0, NULL), -EINVAL);
	cr_expect_eq(ps_store_apply_range(st, p, 0, 1, page + 1, 0, NULL), -EINVAL);
	cr_expect_eq(ps_store_apply_range(st, p, 0, 1, 0, 0, NULL), -EINVAL);
	cr_expect_eq(ps_store_apply_range(st, p, 0, 1, page, 1U << 9, NULL), -EINVAL);
	cr_expect_eq(ps_store_apply_range(st, p, UINT64_MAX, 2, page, 0, NULL), -EINVAL);
	cr_expect_eq(ps_store_apply_range(st, p, 0, UINT64_MAX / 2, page, 0, NULL), -EINVAL);
	cr_expect_eq(ps_store_apply_range(st, p, 0, 0, page, 0, &done), 0);
	cr_expect_eq(done, 0);

	ps_store_destroy(st);
	ps_policy_put(bind);
	ps_policy_put(bad);
	ps_policy_put(il);
	ps_policy_put(def);
	munmap(p, NPAGES * page);
}

/* An empty store over a window resets it all to DEFAULT in one call. */
Test(numa, store_apply_range_empty_store)
{
	struct ps_store *st = ps_store_create(PS_SYNC_RCU);
	struct ps_policy *bind = node_policy(PS_MPOL_BIND, 0, 0);
	struct ps_policy *def = empty_policy(PS_MPOL_DEFAULT);
	char *p = map_pages(NPAGES);
	size_t done;

	cr_assert_eq(apply_or_skip(bind, p, NPAGES * page, 0), 0);
	cr_assert_eq(ps_store_apply_range(st, p, 0, NPAGES, page, 0, &done), 0);
	cr_expect_eq(done, NPAGES);
	expect_policy_at(p, def);
	expect_policy_at(p + (NPAGES - 1) * page, def);
	ps_store_destroy(st);
	ps_policy_put(bind);
	ps_policy_put(def);
	munmap(p, NPAGES * page);
}

/*
 * A policy with weights of its own, 3:1 over nodes 0 and 1: apply_range
 * makes runs of pages preferred on the node the lookup names (read back
 * with get_mempolicy(2)), and where the machine has both nodes the pages,
 * touched, sit 3:1 within 2% (move_pages(2)).  A machine with one node
 * places a one-node weighted policy by the same runs, then skips the rest.
 */
#define WPAGES 4000

VARIANT_TEST(numa, store_apply_range_weighted)
{
	static const unsigned char w31[2] = { 3, 1 }, w0[1] = { 2 };
	struct ps_store *st = ps_store_create(*sync);
	struct ps_policy *pol, *want;
	char *p = map_pages(WPAGES);
	void **addr = calloc(WPAGES, sizeof(*addr));
	int *status = calloc(WPAGES, sizeof(*status));
	long n[2] = { 0, 0 };
	size_t done = 0, i;
	int ret, node;
	bool two;

	skip_unless_numa();
	two = numa_max_node() >= 1 && numa_bitmask_isbitset(numa_nodes_ptr, 1);
	pol = two ? ps_policy_create_weighted(0, w31, 2) : ps_policy_create_weighted(0, w0, 1);
	cr_assert(pol && addr && status);
	cr_assert_eq(ps_store_set(st, 100, 100 + WPAGES, pol), 0);
	ret = ps_store_apply_range(st, p, 100, WPAGES, page, 0, &done);
	if (ret == -EPERM || ret == -ENOSYS)
		cr_skip_test("mbind not permitted here (%s)", strerror(-ret));
	cr_assert_eq(ret, 0, "apply_range: %d", ret);
	cr_assert_eq(done, WPAGES);
	for (i = 0; i < WPAGES; i += 97) {
		node = ps_store_lookup_node(st, 100 + i, 0);
		want = node_policy(PS_MPOL_PREFERRED, 0, node);
		cr_log_info("page %zu", i);
		expect_policy_at(p + i * page, want);
		ps_policy_put(want);
	}
	if (two) {
		for (i = 0; i < WPAGES; i++) {
			p[i * page] = 1;
			addr[i] = p + i * page;
		}
		cr_assert_eq(move_pages(0, WPAGES, addr, NULL, status, 0), 0, "move_pages: %s",
				strerror(errno));
		for (i = 0; i < WPAGES; i++)
			if (status[i] == 0 || status[i] == 1)
				n[status[i]]++;
		cr_expect(n[0] + n[1] == WPAGES && labs(n[0] - 3 * n[1]) <= WPAGES * 8 / 100,
				"nodes 0 and 1 hold %ld and %ld pages", n[0], n[1]);
	}
	ps_store_destroy(st);
	ps_policy_put(pol);
	free(addr);
	free(status);
	munmap(p, WPAGES * page);
	if (!two)
		cr_skip_test("one node here: the 3:1 placement needs nodes 0 and 1");
}
