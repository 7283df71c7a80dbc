// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index's chunks and the allocator's chunk hooks
 * (polstore/alloc.h, src/util/chunk.c):
 *  1. with the default allocator, a large RCU store's index is on huge
 *     pages where the system has transparent huge pages in madvise or
 *     always mode; a mapping that fails falls back to the allocator;
 *  2. an installed allocator's chunk hooks supply every chunk, aligned,
 *     counted whole in the pool's bytes, each freed once with its size;
 *     a hook that fails leaves the pool as it was, and a set that can
 *     get no memory at all fails with -ENOMEM and changes nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "chunk.h"
#include "compiler.h"
#include "ixpool.h"
#include "testutil.h"

#define HUGE ((size_t)2 << 20)
#define LEAF_BYTES _PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT)
#define LEAF_SLOT ((LEAF_BYTES + 7) & ~(size_t)7)

static enum ps_sync pooled_syncs[] = {PS_SYNC_RCU, PS_SYNC_RCU_QSBR};

/* ---- 1. the default allocator --------------------------------------------------- */

/* Whether the system gives an advised mapping huge pages (THP in madvise or always mode). */
static bool thp_on(void)
{
	char line[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (!f)
		return false;
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	return strstr(line, "[always]") || strstr(line, "[madvise]");
}

/* Bytes of the mappings advised for huge pages (VmFlags hg), and of those on huge pages. */
static void advised_bytes(size_t *size, size_t *huge)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	size_t vsize = 0, vhuge = 0, kb;

	cr_assert_not_null(f);
	*size = *huge = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Size: %zu kB", &kb) == 1)
			vsize = kb << 10;
		else if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
			vhuge = kb << 10;
		else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg")) {
			*size += vsize;
			*huge += vhuge;
		}
	}
	fclose(f);
}

/* A store of @n ranges [10 i, 10 i + 7), set in a random order, in batches of 2^16. */
static struct ps_store *build_random(enum ps_sync sync, long n, struct ps_policy *const *pol)
{
	struct ps_store *s = ps_store_create(sync);
	struct ps_set_op *ops = calloc((size_t)n, sizeof(*ops));
	uint64_t seed = 0x4a6e;
	long i, b = 1 << 16;

	cr_assert(s && ops);
	for (i = 0; i < n; i++)
		ops[i] = (struct ps_set_op){(uint64_t)i * 10, (uint64_t)i * 10 + 7, pol[i % 4]};
	for (i = n - 1; i > 0; i--) {
		long j = (long)(ps_test_rand(&seed) % (uint64_t)(i + 1));
		struct ps_set_op t = ops[i];

		ops[i] = ops[j];
		ops[j] = t;
	}
	for (i = 0; i < n; i += b)
		cr_assert_eq(ps_store_set_many(s, ops + i, (size_t)(n - i < b ? n - i : b)), 0);
	free(ops);
	cr_assert_eq(ps_store_count(s), (size_t)n);
	return s;
}

SYNCS_TEST(pooled_syncs, ixpool_huge, a_large_index_is_on_huge_pages, .timeout = 300)
{
	struct ps_policy *pol[4];
	size_t size0, huge0, size, huge;
	struct ps_store *s;
	int i;

	if (ps_test_scale() < 1)
		cr_skip_test("a store of 10^6 ranges: not under valgrind");
	if (!thp_on())
		cr_skip_test("transparent huge pages are off on this system");
	cr_assert_eq(ps_set_alloc_ops(NULL), 0);
	for (i = 0; i < 4; i++)
		pol[i] = ps_test_bind(0);
	advised_bytes(&size0, &huge0);
	s = build_random(*sync, 1000000, pol);
	ps_store_synchronize(s);
	advised_bytes(&size, &huge);
	size -= size0;
	huge -= huge0;
	/* 10^6 ranges: some 38 MB of index, nearly all of it pooled. */
	cr_assert_geq(size, 16 * HUGE, "%zu bytes of chunks", size);
	cr_assert_geq(huge * 10, size * 9, "%zu of %zu bytes of the index's chunks on huge pages",
			huge, size);
	ps_store_destroy(s);
	ps_rcu_barrier();
	advised_bytes(&size, &huge);
	cr_assert_eq(size, size0, "%zu bytes of chunks left mapped", size - size0);
	for (i = 0; i < 4; i++)
		ps_policy_put(pol[i]);
}

/*
 * With the default allocator a chunk is mapped: 2 MiB on a 2 MiB boundary;
 * when the mapping fails, the chunk comes from the allocator (64 bytes
 * short of 2 MiB), counted as the allocator holds it.
 */
Test(ixpool_huge, a_mapping_that_fails_falls_back)
{
	size_t old = psi_ix_pool_threshold;
	int refused;

	cr_assert_eq(ps_set_alloc_ops(NULL), 0);
	psi_ix_pool_threshold = 0;
	for (refused = 0; refused < 2; refused++) {
		struct psi_ix_pool *p = psi_ix_pool_new(0);
		struct ps_ix_node *h;
		uint32_t tag = 0;

		cr_assert_not_null(p);
		cr_assert(psi_ix_pool_tune(p));
		psi_chunk_map_refused = refused;
		h = psi_ix_pool_get(p, false, &tag);
		psi_chunk_map_refused = false;
		cr_assert_not_null(h, "refused %d: no node", refused);
		cr_assert_eq(psi_ix_pool_slack(p),
				(refused ? ps_test_block_bytes(HUGE - 64) : HUGE) - LEAF_SLOT,
				"refused %d: slack %zu", refused, psi_ix_pool_slack(p));
		if (!refused)
			cr_assert_eq((uintptr_t)h % HUGE, 0, "a mapped chunk at %p", (void *)h);
		h->height = 0;
		h->wflags = tag << 16;
		psi_ix_pool_put_now(p, h);
		psi_ix_pool_destroy(p);
	}
	psi_ix_pool_threshold = old;
}

/* The VmFlags of the mapping that holds @addr carry hg (advised for huge pages). */
static bool advised_at(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	uintptr_t a = (uintptr_t)addr;
	unsigned long lo, hi;
	bool in = false, hg = false;
	char line[512];

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = a >= lo && a < hi;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			hg = strstr(line, " hg") != NULL;
			break;
		}
	}
	fclose(f);
	return hg;
}

/* A node from a pool of its own, whose first chunk it opens; the pool in *@pp. */
static struct ps_ix_node *first_node(struct psi_ix_pool **pp, uint32_t *tag)
{
	struct psi_ix_pool *p = psi_ix_pool_new(0);
	struct ps_ix_node *h;

	cr_assert_not_null(p);
	cr_assert(psi_ix_pool_tune(p));
	h = psi_ix_pool_get(p, false, tag);
	cr_assert_not_null(h);
	*pp = p;
	return h;
}

static void first_node_put(struct psi_ix_pool *p, struct ps_ix_node *h, uint32_t tag)
{
	h->height = 0;
	h->wflags = tag << 16;
	psi_ix_pool_put_now(p, h);
	psi_ix_pool_destroy(p);
}

/*
 * With the default allocator a chunk is mapped on a 2 MiB boundary and
 * advised for huge pages: the advice is in its mapping's flags whether or
 * not the system then gives it a huge page.
 */
Test(ixpool_huge, a_mapped_chunk_is_aligned_and_advised)
{
	size_t old = psi_ix_pool_threshold;
	struct psi_ix_pool *p;
	struct ps_ix_node *h;
	uint32_t tag = 0;

	if (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK))
		cr_skip_test("no transparent huge pages in this kernel");
	cr_assert_eq(ps_set_alloc_ops(NULL), 0);
	psi_ix_pool_threshold = 0;
	h = first_node(&p, &tag);
	cr_assert_eq((uintptr_t)h % HUGE, 0, "a mapped chunk at %p", (void *)h);
	cr_assert(advised_at(h), "the chunk at %p is not advised for huge pages", (void *)h);
	cr_assert(advised_at((char *)h + HUGE - 1), "the chunk's last page is not advised");
	first_node_put(p, h, tag);
	psi_ix_pool_threshold = old;
}

/* ---- 2. an installed allocator's chunk hooks ------------------------------------ */

/*
 * malloc() for blocks and aligned_alloc() for chunks, counting both; from
 * the @fail_at-th call on (both kinds counted together, -1: never) every
 * allocation fails.
 */
static struct {
	long calls, fail_at, blocks, chunks, chunk_calls, bad_frees;
} hk;

static bool hk_fails(void)
{
	return hk.fail_at >= 0 && hk.calls++ >= hk.fail_at;
}

static void *hk_alloc(size_t size, void *ctx)
{
	void *p;

	cr_assert_eq(ctx, &hk);
	if (hk_fails())
		return NULL;
	p = malloc(size);
	if (p)
		PSI_FETCH_ADD(hk.blocks, 1, RELAXED);
	return p;
}

static void hk_free(void *p, void *ctx)
{
	cr_assert_eq(ctx, &hk);
	PSI_FETCH_SUB(hk.blocks, 1, RELAXED);
	free(p);
}

static void *hk_chunk_alloc(size_t size, size_t align, void *ctx)
{
	void *p;

	cr_assert_eq(ctx, &hk);
	cr_assert_eq(size, HUGE);
	cr_assert_eq(align, HUGE);
	hk.chunk_calls++;
	if (hk_fails())
		return NULL;
	p = aligned_alloc(align, size);
	if (p)
		PSI_FETCH_ADD(hk.chunks, 1, RELAXED);
	return p;
}

static void hk_chunk_free(void *p, size_t size, void *ctx)
{
	cr_assert_eq(ctx, &hk);
	if (size != HUGE || (uintptr_t)p % HUGE)
		PSI_FETCH_ADD(hk.bad_frees, 1, RELAXED);
	PSI_FETCH_SUB(hk.chunks, 1, RELAXED);
	free(p);
}

static void hk_install(void)
{
	static const struct ps_alloc_ops ops = {.alloc = hk_alloc,
			.free = hk_free,
			.ctx = &hk,
			.chunk_alloc = hk_chunk_alloc,
			.chunk_free = hk_chunk_free};

	memset(&hk, 0, sizeof(hk));
	hk.fail_at = -1;
	cr_assert_eq(ps_set_alloc_ops(&ops), 0);
}

static void hk_restore(void)
{
	cr_assert_eq(hk.bad_frees, 0, "a chunk freed with the wrong size or address");
	cr_assert_eq(ps_set_alloc_ops(NULL), 0);
}

/* A chunk from an installed allocator's hook is advised by the pool before it writes there. */
Test(ixpool_huge, a_hooks_chunk_is_advised)
{
	size_t old = psi_ix_pool_threshold;
	struct psi_ix_pool *p;
	struct ps_ix_node *h;
	uint32_t tag = 0;

	if (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK))
		cr_skip_test("no transparent huge pages in this kernel");
	hk_install();
	psi_ix_pool_threshold = 0;
	h = first_node(&p, &tag);
	cr_assert_eq(hk.chunks, 1);
	cr_assert_eq((uintptr_t)h % HUGE, 0, "the hook's chunk at %p", (void *)h);
	cr_assert(advised_at(h), "the chunk at %p is not advised for huge pages", (void *)h);
	first_node_put(p, h, tag);
	psi_ix_pool_threshold = old;
	hk_restore();
}

/* 15000 nodes: three chunks from the hook, counted whole, each freed once; a failure changes nothing. */
Test(ixpool_huge, the_chunk_hooks_supply_every_chunk)
{
	size_t n = 15000, i, old = psi_ix_pool_threshold;
	struct ps_ix_node **h = calloc(n, sizeof(*h));
	struct psi_ix_pool *p;
	uint32_t tag = 0;
	struct ps_ix_node **extra = calloc(n, sizeof(*extra));
	size_t nx = 0;
	long blocks;

	cr_assert(h && extra);
	hk_install();
	psi_ix_pool_threshold = 0;
	p = psi_ix_pool_new(0);
	cr_assert(p && psi_ix_pool_tune(p));
	blocks = hk.blocks;
	for (i = 0; i < n; i++) {
		bool inner = i % 5 == 0;

		h[i] = psi_ix_pool_get(p, inner, &tag);
		cr_assert_not_null(h[i]);
		h[i]->height = inner;
		h[i]->wflags = tag << 16;
	}
	cr_assert_eq(hk.chunks, 3, "%ld chunks", hk.chunks);
	cr_assert_eq(hk.blocks - blocks, 1, "blocks beside the table: %ld", hk.blocks - blocks - 1);
	cr_assert_eq(psi_ix_pool_slack(p), 3 * HUGE - 12000 * LEAF_SLOT -
			3000 * sizeof(struct ps_ix_inner));

	/* A hook that fails: no node, no chunk, no block in its stead; then it works. */
	for (;;) {
		size_t slack = psi_ix_pool_slack(p);
		struct ps_ix_node *x;

		hk.fail_at = hk.calls;
		x = psi_ix_pool_get(p, false, &tag);
		hk.fail_at = -1;
		if (x) { /* room in the chunks still: keep it, for the put below */
			x->height = 0;
			x->wflags = tag << 16;
			cr_assert_lt(nx, n);
			extra[nx++] = x;
			continue;
		}
		cr_assert_eq(hk.chunk_calls, 4);
		cr_assert_eq(hk.chunks, 3);
		cr_assert_eq(hk.blocks - blocks, 1);
		cr_assert_eq(psi_ix_pool_slack(p), slack);
		break;
	}
	for (i = 0; i < n; i++)
		psi_ix_pool_put_now(p, h[i]);
	for (i = 0; i < nx; i++)
		psi_ix_pool_put_now(p, extra[i]);
	psi_ix_pool_trim(p);
	cr_assert_eq(psi_ix_pool_slack(p), 0);
	psi_ix_pool_destroy(p);
	cr_assert_eq(hk.chunks, 0, "%ld chunks not freed", hk.chunks);
	cr_assert_eq(hk.blocks, 0, "%ld blocks not freed", hk.blocks);
	hk_restore();
	psi_ix_pool_threshold = old;
	free(h);
	free(extra);
}

/* Every range's bounds and policy, hashed (ps_store_foreach_range()). */
static int hash_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	uint64_t *hsh = arg;

	*hsh = (*hsh ^ start ^ end * 31 ^ (uintptr_t)pol) * 0x100000001b3ull;
	return 0;
}

static uint64_t store_hash(struct ps_store *s)
{
	uint64_t hsh = 0xcbf29ce484222325ull;

	cr_assert_eq(ps_store_foreach_range(s, 0, UINT64_MAX, hash_fn, &hsh), 0);
	return hsh;
}

/*
 * A pooled store with the hooks: its chunks come from them and go back to
 * them.  A batch whose k-th allocation on fails (chunks and blocks alike)
 * either succeeds or fails with -ENOMEM and leaves the store exactly as
 * it was: its ranges, its memory, its checks.
 */
SYNCS_TEST(pooled_syncs, ixpool_huge, a_failing_chunk_hook_changes_nothing, .timeout = 300)
{
	size_t old = psi_ix_pool_threshold;
	long b, k, injected = 0, nb = ps_test_scale() < 1 ? 3 : 12;
	struct ps_policy *pol[2];
	uint64_t seed = 0xc4c4;
	struct ps_store *s;
	const char *why;

	hk_install();
	psi_ix_pool_threshold = 0;
	pol[0] = ps_test_bind(0);
	pol[1] = NULL;
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	for (b = 0; b < nb; b++) {
		struct ps_set_op ops[64];
		int i;

		/* Each batch 64 ranges in fresh space: leaves and chunks to add. */
		for (i = 0; i < 64; i++) {
			uint64_t a = ((uint64_t)b * 64 + (uint64_t)i) * 1000 +
				     ps_test_rand(&seed) % 500;

			ops[i] = (struct ps_set_op){a, a + 1 + ps_test_rand(&seed) % 400,
					pol[ps_test_rand(&seed) % 2]};
		}
		for (k = 0;; k++) {
			size_t mem;
			uint64_t hsh;
			int ret;

			ps_store_synchronize(s);
			mem = ps_store_memory(s);
			hsh = store_hash(s);
			hk.fail_at = hk.calls + k;
			ret = ps_store_set_many(s, ops, 64);
			hk.fail_at = -1;
			if (!ret)
				break;
			cr_assert_eq(ret, -ENOMEM, "batch %ld, failure %ld: %d", b, k, ret);
			injected++;
			ps_store_synchronize(s);
			cr_assert_eq(store_hash(s), hsh, "batch %ld, failure %ld: ranges changed", b, k);
			cr_assert_eq(ps_store_memory(s), mem, "batch %ld, failure %ld: memory", b, k);
			why = NULL;
			cr_assert_eq(ps_store_check(s, &why), 0, "%s", why ? why : "");
		}
	}
	cr_assert_gt(hk.chunk_calls, 0, "no chunk asked of the hook");
	cr_assert_gt(hk.chunks, 0, "no chunk from the hook");
	cr_assert_gt(injected, nb);
	ps_store_destroy(s);
	ps_rcu_barrier();
	ps_policy_put(pol[0]);
	cr_assert_eq(hk.chunks, 0, "%ld chunks not freed", hk.chunks);
	cr_assert_eq(hk.blocks, 0, "%ld blocks not freed", hk.blocks);
	hk_restore();
	psi_ix_pool_threshold = old;
}
