// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index's node pool (src/range/ixpool.c), white-box, and RCU
 * stores whose every node comes from it (the pool's threshold set to 0):
 *  1. nodes are carved apart and aligned, given back by the writer and by
 *     other threads, reused before a chunk is added; empty chunks go back
 *     to the allocator; nothing leaks; a chunk that cannot be allocated
 *     leaves the pool as it was;
 *  2. pooled stores answer as a SPIN store given the same sets (lookups,
 *     nodes, next, windows, ps_store_check()), lose nothing when an
 *     allocation fails, and readers beside a flat-out writer never read
 *     a recycled node;
 *  3. a store that shrinks under half the threshold (lowered) copies its
 *     index out of the pool: synchronized, it holds at most 3/2 of what a
 *     fresh store of its ranges holds, an allocation failure in the copy
 *     loses nothing, and readers beside the copies read right answers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "ixpool.h"
#include "testutil.h"

/* ---- 1. the pool alone ---------------------------------------------------------- */

#define LEAF_BYTES _PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT)

struct got {
	struct ps_ix_node *h;
	bool inner;
};

/* A node as the index would make it: the header the pool reads, a pattern in the body. */
static struct ps_ix_node *get(struct psi_ix_pool *p, bool inner, uint32_t id)
{
	uint32_t tag = 0;
	struct ps_ix_node *h = psi_ix_pool_get(p, inner, &tag);
	size_t size = inner ? sizeof(struct ps_ix_inner) : LEAF_BYTES, i;

	cr_assert_not_null(h);
	cr_assert_gt(tag, 0);
	cr_assert_eq((uintptr_t)h % (inner ? sizeof(struct ps_ix_inner) : 8), 0,
			"a node's alignment");
	memset(h, 0, sizeof(*h));
	h->height = inner;
	h->shift = PS_IX_LEAF_SHIFT;
	h->wflags = tag << 16;
	for (i = sizeof(*h); i + 4 <= size; i += 4)
		memcpy((char *)h + i, &id, 4);
	return h;
}

static void expect_pattern(const struct ps_ix_node *h, bool inner, uint32_t id)
{
	size_t size = inner ? sizeof(struct ps_ix_inner) : LEAF_BYTES, i;

	for (i = sizeof(*h); i + 4 <= size; i += 4) {
		uint32_t v;

		memcpy(&v, (const char *)h + i, 4);
		cr_assert_eq(v, id, "node %u overwritten at byte %zu", id, i);
	}
}

struct giver {
	struct psi_ix_pool *p;
	struct got *g;
	size_t from, to, step;
};

/* Give back every @step-th node of [from, to) from another thread, in chains of 7. */
static void *give_back(void *arg)
{
	struct giver *gv = arg;
	struct psi_ix_pool_chain c = {NULL, NULL};
	size_t i, n = 0;

	for (i = gv->from; i < gv->to; i += gv->step) {
		psi_ix_pool_link(&c, gv->g[i].h);
		gv->g[i].h = NULL;
		if (++n % 7 == 0)
			psi_ix_pool_put_chain(gv->p, &c);
	}
	psi_ix_pool_put_chain(gv->p, &c);
	return NULL;
}

Test(ixpool, nodes_apart_reused_and_chunks_given_back, .timeout = 120)
{
	size_t n = 15000, i, blocks, again;
	struct got *g = calloc(n, sizeof(*g));
	struct psi_ix_pool *p;
	struct giver gv;
	pthread_t t;
	size_t old = psi_ix_pool_threshold;

	cr_assert_not_null(g);
	ps_test_alloc_install();
	psi_ix_pool_threshold = 0;
	p = psi_ix_pool_new(0);
	cr_assert_not_null(p);
	cr_assert(psi_ix_pool_tune(p), "a pool at threshold 0 serves");
	for (i = 0; i < n; i++) {
		g[i].inner = i % 5 == 0;
		g[i].h = get(p, g[i].inner, (uint32_t)i);
	}
	for (i = 0; i < n; i++)
		expect_pattern(g[i].h, g[i].inner, (uint32_t)i);
	blocks = psi_ix_pool_blocks(p);
	/* 12000 leaves and 3000 inner nodes: 5.8 MB, three 2 MiB chunks (as malloc() holds them), and the table. */
	cr_assert_eq(blocks, 4, "%zu blocks", blocks);
	cr_assert_eq(psi_ix_pool_slack(p), 3 * ps_test_block_bytes((2u << 20) - 64) -
			12000 * ((LEAF_BYTES + 7) & ~7u) -
			3000 * sizeof(struct ps_ix_inner));

	/* Half back from another thread, half of the rest by the writer. */
	gv = (struct giver){p, g, 0, n, 2};
	cr_assert_eq(pthread_create(&t, NULL, give_back, &gv), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	for (i = 1; i < n; i += 4) {
		psi_ix_pool_put_now(p, g[i].h);
		g[i].h = NULL;
	}
	cr_assert(psi_ix_pool_tune(p));
	/* As many again as went back: all from the free slots, no chunk more. */
	again = 0;
	for (i = 0; i < n; i++)
		if (!g[i].h) {
			g[i].h = get(p, g[i].inner, (uint32_t)i);
			again++;
		}
	cr_assert_gt(again, n / 2);
	cr_assert_eq(psi_ix_pool_blocks(p), blocks, "a chunk added with free slots left");
	for (i = 0; i < n; i++)
		expect_pattern(g[i].h, g[i].inner, (uint32_t)i);

	/* Everything back: the empty chunks go at the trim; one stays while serving. */
	gv = (struct giver){p, g, 0, n, 1};
	cr_assert_eq(pthread_create(&t, NULL, give_back, &gv), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert(psi_ix_pool_tune(p));
	cr_assert_leq(psi_ix_pool_blocks(p), 2, "more than one empty chunk kept");
	psi_ix_pool_trim(p);
	cr_assert_eq(psi_ix_pool_blocks(p), 1, "empty chunks left after a trim");
	cr_assert_eq(psi_ix_pool_slack(p), 0);
	psi_ix_pool_destroy(p);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
	psi_ix_pool_threshold = old;
	free(g);
}

Test(ixpool, serves_only_a_large_index)
{
	struct psi_ix_pool *p = psi_ix_pool_new(0);

	cr_assert_not_null(p);
	cr_assert(!psi_ix_pool_tune(p), "serving an empty index");
	psi_ix_pool_grew(p, (ptrdiff_t)psi_ix_pool_threshold);
	cr_assert(psi_ix_pool_tune(p));
	/* Hysteresis: it stops below half the threshold, not at it. */
	psi_ix_pool_grew(p, -(ptrdiff_t)(psi_ix_pool_threshold / 4));
	cr_assert(psi_ix_pool_tune(p));
	psi_ix_pool_grew(p, -(ptrdiff_t)(psi_ix_pool_threshold / 2));
	cr_assert(!psi_ix_pool_tune(p));
	cr_assert(!psi_ix_pool_tune(NULL));
	psi_ix_pool_destroy(p);
	psi_ix_pool_destroy(NULL);
}

/* The k-th allocation of a get failing: NULL, no node out, nothing leaked; then it works. */
Test(ixpool, a_chunk_that_cannot_be_allocated_changes_nothing)
{
	struct psi_ix_pool *p;
	struct ps_ix_node *h;
	uint32_t tag = 0;
	long k;

	ps_test_alloc_install();
	p = psi_ix_pool_new(0);
	cr_assert_not_null(p);
	for (k = 0;; k++) {
		long live = ps_test_alloc_live();
		size_t blocks = psi_ix_pool_blocks(p);

		ps_test_alloc_fail_once(k);
		h = psi_ix_pool_get(p, false, &tag);
		if (!ps_test_alloc_disarm()) {
			cr_assert_not_null(h);
			break;
		}
		cr_assert_null(h, "failure %ld: a node without its chunk", k);
		cr_assert_eq(psi_ix_pool_slack(p), 0, "failure %ld: a chunk counted", k);
		/* A grown (still empty) table may stay; no chunk does. */
		cr_assert_leq(ps_test_alloc_live() - live, 1);
		cr_assert_leq(psi_ix_pool_blocks(p), blocks + 1);
	}
	cr_assert_eq(k, 2, "a first get allocates the table and a chunk: %ld", k);
	h->height = 0;
	h->wflags = tag << 16;
	psi_ix_pool_put_now(p, h);
	psi_ix_pool_destroy(p);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/*
 * A set past the threshold makes the store's pool; when that allocation
 * fails the set goes on without one (only slower) and succeeds: errno is
 * as the caller left it, as after any call that succeeds.
 */
Test(ixpool, a_pool_that_cannot_be_made_leaves_errno_alone)
{
	size_t old = psi_ix_pool_threshold;
	struct ps_policy *a = ps_test_bind(1);
	bool set_without_pool = false;
	long k;

	ps_test_alloc_install();
	psi_ix_pool_threshold = 0;
	for (k = 0; k < 16; k++) {
		struct ps_store *s = ps_store_create(PS_SYNC_RCU);
		int ret;

		cr_assert_not_null(s);
		errno = 0;
		ps_test_alloc_fail_once(k);
		ret = ps_store_set(s, 10, 20, a);
		if (ps_test_alloc_disarm() && !ret) {
			set_without_pool = true;
			cr_assert_eq(errno, 0, "failure %ld: a set that succeeded set errno %d", k,
					errno);
		}
		cr_assert(!ret || ret == -ENOMEM, "failure %ld: %d", k, ret);
		ps_store_destroy(s);
	}
	cr_assert(set_without_pool, "no failure fell on the pool");
	psi_ix_pool_threshold = old;
	ps_test_alloc_restore();
	ps_policy_put(a);
}

/* ---- 2. stores whose every node is pooled ----------------------------------------- */

static enum ps_sync pooled_syncs[] = {PS_SYNC_RCU, PS_SYNC_RCU_QSBR};

#define NPOL 7 /* BIND to nodes 1 .. 7 */

struct twin {
	struct ps_store *s, *ref;
	struct ps_policy *pol[NPOL];
	uint64_t seed, space;
};

static void twin_init(struct twin *t, enum ps_sync sync, uint64_t seed)
{
	int i;

	ps_test_eight_nodes();
	psi_ix_pool_threshold = 0;
	t->s = ps_store_create(sync);
	t->ref = ps_store_create(PS_SYNC_SPIN);
	cr_assert(t->s && t->ref);
	for (i = 0; i < NPOL; i++)
		t->pol[i] = ps_test_bind(i + 1);
	t->seed = seed | 1;
	/* Under valgrind a tenth: with the debug checks every set walks the store whole. */
	t->space = ps_test_scale() < 1 ? 4000 : 40000;
}

static void twin_fini(struct twin *t)
{
	int i;

	ps_store_destroy(t->s);
	ps_store_destroy(t->ref);
	for (i = 0; i < NPOL; i++)
		ps_policy_put(t->pol[i]);
	ps_numa_set_topology(0, NULL, NULL);
}

static struct ps_policy *twin_pol(struct twin *t)
{
	uint64_t r = ps_test_rand(&t->seed) % (NPOL + 2);

	return r < NPOL ? t->pol[r] : NULL;
}

static void twin_probe(struct twin *t, uint64_t idx)
{
	uint64_t s1 = 0, e1 = 0, s2 = 0, e2 = 0;
	struct ps_policy *p1 = NULL, *p2 = NULL;
	int r1, r2;

	cr_assert_eq(ps_store_lookup_node(t->s, idx, 0), ps_store_lookup_node(t->ref, idx, 0),
			"lookup_node(%llu)", (unsigned long long)idx);
	p1 = ps_store_lookup(t->s, idx);
	p2 = ps_store_lookup(t->ref, idx);
	cr_assert_eq(p1, p2, "lookup(%llu)", (unsigned long long)idx);
	ps_policy_put(p1);
	ps_policy_put(p2);
	r1 = ps_store_next(t->s, idx, &s1, &e1, &p1);
	r2 = ps_store_next(t->ref, idx, &s2, &e2, &p2);
	cr_assert_eq(r1, r2);
	if (!r1) {
		cr_assert(s1 == s2 && e1 == e2 && p1 == p2, "next(%llu)", (unsigned long long)idx);
		ps_policy_put(p1);
		ps_policy_put(p2);
	}
}

static int count_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	uint64_t *sum = arg;

	sum[0]++;
	sum[1] += (start ^ end) + (uintptr_t)pol;
	return 0;
}

static void twin_expect_same(struct twin *t)
{
	uint64_t a[2] = {0, 0}, b[2] = {0, 0};
	const char *why = NULL;

	cr_assert_eq(ps_store_check(t->s, &why), 0, "%s", why ? why : "");
	cr_assert_eq(ps_store_count(t->s), ps_store_count(t->ref));
	cr_assert_eq(ps_store_foreach_range(t->s, 0, UINT64_MAX, count_fn, a), 0);
	cr_assert_eq(ps_store_foreach_range(t->ref, 0, UINT64_MAX, count_fn, b), 0);
	cr_assert(a[0] == b[0] && a[1] == b[1], "the ranges differ from SPIN's");
}

/* Random sets and batches: @n ops of up to @maxlen pages; both stores must accept each. */
static void twin_churn(struct twin *t, long n, uint64_t maxlen)
{
	struct ps_set_op ops[16];
	long i;

	for (i = 0; i < n; i++) {
		size_t k, m = ps_test_rand(&t->seed) % 4 ? 1 : 1 + ps_test_rand(&t->seed) % 16;

		for (k = 0; k < m; k++) {
			uint64_t a = ps_test_rand(&t->seed) % t->space;

			ops[k] = (struct ps_set_op){a, a + 1 + ps_test_rand(&t->seed) % maxlen,
					twin_pol(t)};
		}
		cr_assert_eq(ps_store_set_many(t->s, ops, m), 0);
		cr_assert_eq(ps_store_set_many(t->ref, ops, m), 0);
		if (i % 64 == 0)
			twin_probe(t, ps_test_rand(&t->seed) % t->space);
	}
}

SYNCS_TEST(pooled_syncs, ixpool, pooled_store_answers_as_spin, .timeout = 300)
{
	struct twin t;
	long i, n = ps_test_scale() < 1 ? 2000 : 20000;
#ifdef POLSTORE_DEBUG_CHECKS
	n /= 10; /* each set checks the store whole */
#endif

	twin_init(&t, *sync, 0x900d + (uint64_t)*sync);
	/* Fill front to back (full leaves), then churn, long and short sets. */
	for (i = 0; i < (long)t.space / 4; i++) {
		struct ps_policy *pol = t.pol[i % NPOL];

		cr_assert_eq(ps_store_set(t.s, 4 * (uint64_t)i, 4 * (uint64_t)i + 3, pol), 0);
		cr_assert_eq(ps_store_set(t.ref, 4 * (uint64_t)i, 4 * (uint64_t)i + 3, pol), 0);
	}
	twin_expect_same(&t);
	twin_churn(&t, n, 8);
	twin_expect_same(&t);
	twin_churn(&t, n / 10, 3000);
	ps_store_synchronize(t.s);
	twin_expect_same(&t);
	for (i = 0; i < 2000; i++)
		twin_probe(&t, ps_test_rand(&t.seed) % (t.space + 100));
	/* Emptied and filled again: the pool's chunks go and come back. */
	cr_assert_eq(ps_store_set(t.s, 0, UINT64_MAX, NULL), 0);
	cr_assert_eq(ps_store_set(t.ref, 0, UINT64_MAX, NULL), 0);
	ps_store_synchronize(t.s);
	twin_expect_same(&t);
	twin_churn(&t, n / 4, 8);
	twin_expect_same(&t);
	twin_fini(&t);
}

/*
 * @ops applied to @t's store with its @k-th allocation failed.  Return:
 * true when the update failed (-ENOMEM), false when it succeeded, the
 * failure not reached or absorbed.
 */
static bool set_failing(struct twin *t, const struct ps_set_op *ops, size_t n, long k)
{
	int ret;

	ps_test_alloc_fail_once(k);
	ret = ps_store_set_many(t->s, ops, n);
	if (!ps_test_alloc_disarm()) {
		cr_assert_eq(ret, 0);
		return false;
	}
	cr_assert(ret == -ENOMEM || ret == 0, "%d", ret);
	return ret != 0;
}

SYNCS_TEST(pooled_syncs, ixpool, allocation_failure_in_a_pooled_store_loses_nothing,
		.timeout = 300)
{
	long u, injected = 0, nu = ps_test_scale() < 1 ? 40 : 300;
	struct twin t;

	ps_test_alloc_install();
	twin_init(&t, *sync, 0xfa11 + (uint64_t)*sync);
#ifdef POLSTORE_DEBUG_CHECKS
	nu /= 10; /* each set checks the store whole */
#endif
	twin_churn(&t, ps_test_scale() < 1 ? 300 : 3000, 8);
	for (u = 0; u < nu; u++) {
		uint64_t a = ps_test_rand(&t.seed) % t.space;
		struct ps_set_op op = {a, a + 1 + ps_test_rand(&t.seed) % (u % 8 ? 8 : 2000),
				twin_pol(&t)};
		long k;

		/*
		 * Half the sets start with the records of the last ones handed
		 * back, which a set reuses, the other half with none (synchronize
		 * frees them): each allocates everything then.
		 */
		if (u % 2)
			cr_assert_eq(ps_store_synchronize(t.s), 0);
		else
			ps_rcu_barrier();
		for (k = 0; set_failing(&t, &op, 1, k); k++) {
			injected++;
			if (k % 3 == 0)
				twin_expect_same(&t);
		}
		cr_assert_eq(ps_store_set_many(t.ref, &op, 1), 0);
		if (u % 16 == 0)
			twin_expect_same(&t);
	}
	twin_expect_same(&t);
	cr_assert_gt(injected, nu);
	twin_fini(&t);
	ps_rcu_barrier();
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * Batches of 16 sets in distinct leaves copy their paths whole: 48 nodes
 * and more, so the update's list of built nodes grows past its inline
 * entries.  Each allocation of a batch fails in turn; after a failure the
 * store, synchronized, holds exactly what it held before (a pooled inner
 * node given back as a leaf would leave 168 bytes of slack, and overwrite
 * its neighbour when taken again).
 */
SYNCS_TEST(pooled_syncs, ixpool, a_failed_batch_gives_every_pooled_node_back, .timeout = 300)
{
	long b, injected = 0, nb = ps_test_scale() < 1 ? 4 : 24;
	struct twin t;

	ps_test_alloc_install();
	twin_init(&t, *sync, 0xba7c + (uint64_t)*sync);
	twin_churn(&t, ps_test_scale() < 1 ? 300 : 3000, 8);
	for (b = 0; b < nb; b++) {
		struct ps_set_op ops[16];
		long k;
		int i;

		for (i = 0; i < 16; i++) {
			uint64_t a = (uint64_t)i * (t.space / 16) + ps_test_rand(&t.seed) % (t.space / 32);

			ops[i] = (struct ps_set_op){a, a + 1 + ps_test_rand(&t.seed) % 4, twin_pol(&t)};
		}
		for (k = 0;; k++) {
			size_t before, after;

			ps_store_synchronize(t.s);
			before = ps_store_memory(t.s);
			if (!set_failing(&t, ops, 16, k))
				break;
			injected++;
			ps_store_synchronize(t.s);
			after = ps_store_memory(t.s);
			cr_assert_eq(after, before, "failure %ld of batch %ld: %zu bytes before, %zu after",
					k, b, before, after);
			if (k % 8 == 0)
				twin_expect_same(&t);
		}
		cr_assert_eq(ps_store_set_many(t.ref, ops, 16), 0);
		twin_expect_same(&t);
	}
	cr_assert_gt(injected, nb * 16);
	twin_fini(&t);
	ps_rcu_barrier();
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * Readers beside a flat-out writer: range [8 k, 8 k + 6) only ever holds
 * BIND to node 1 + k % 7 (or nothing), so a lookup of its page 8 k + 3
 * answers that node or 0 (no policy; the local node): another answer read
 * a node that went back to the pool and was reused while it was read.
 */
struct reader_arg {
	struct ps_store *s;
	bool qsbr;
	uint64_t nslots;
	long *stop;
	long lookups;
};

static void *reader(void *arg)
{
	struct reader_arg *ra = arg;
	uint64_t seed = (uintptr_t)ra | 1;

	if (ra->qsbr)
		cr_assert_eq(ps_qsbr_thread_online(), 0);
	while (!PSI_LOAD_ACQUIRE(*(ra->stop))) {
		uint64_t k = ps_test_rand(&seed) % ra->nslots;
		int node = ps_store_lookup_node(ra->s, 8 * k + 3, 0);

		cr_assert(node == 0 || node == (int)(1 + k % 7), "page %llu: node %d",
				(unsigned long long)(8 * k + 3), node);
		if (ra->qsbr && ++ra->lookups % 64 == 0)
			ps_qsbr_quiescent();
		else if (!ra->qsbr)
			ra->lookups++;
	}
	if (ra->qsbr)
		ps_qsbr_thread_offline();
	ps_rcu_unregister_thread();
	return NULL;
}

SYNCS_TEST(pooled_syncs, ixpool, readers_never_see_a_recycled_node, .timeout = 300)
{
	uint64_t nslots = ps_test_scale() < 1 ? 500 : 4000, seed = 7, k;
	long stop = 0, i, n = ps_test_iters(20000);
	struct ps_policy *pol[NPOL];
	struct reader_arg ra;
	struct ps_store *s;
	pthread_t t;

	ps_test_eight_nodes();
	psi_ix_pool_threshold = 0;
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	for (i = 0; i < NPOL; i++)
		pol[i] = ps_test_bind((int)i + 1);
	for (k = 0; k < nslots; k++)
		cr_assert_eq(ps_store_set(s, 8 * k, 8 * k + 6, pol[k % 7]), 0);
	ra = (struct reader_arg){s, *sync == PS_SYNC_RCU_QSBR, nslots, &stop, 0};
	cr_assert_eq(pthread_create(&t, NULL, reader, &ra), 0);
#ifdef POLSTORE_DEBUG_CHECKS
	n /= 10; /* each set checks the store whole */
#endif
	for (i = 0; i < n; i++) {
		k = ps_test_rand(&seed) % nslots;
		switch (ps_test_rand(&seed) % 4) {
		case 0: /* out */
			cr_assert_eq(ps_store_set(s, 8 * k, 8 * k + 6, NULL), 0);
			break;
		case 1: /* a part out, so that the leaf splits */
			cr_assert_eq(ps_store_set(s, 8 * k + 1, 8 * k + 2, NULL), 0);
			break;
		default: /* in again, whole */
			cr_assert_eq(ps_store_set(s, 8 * k, 8 * k + 6, pol[k % 7]), 0);
			break;
		}
	}
	PSI_STORE_RELEASE(stop, 1);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_gt(ra.lookups, 0);
	{
		const char *why = NULL;

		cr_assert_eq(ps_store_check(s, &why), 0, "%s", why ? why : "");
	}
	ps_store_destroy(s);
	for (i = 0; i < NPOL; i++)
		ps_policy_put(pol[i]);
	ps_numa_set_topology(0, NULL, NULL);
}

/* ---- 3. a store that shrinks gives its chunks back ------------------------------ */

static int copy_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	return ps_store_set(arg, start, end, pol);
}

/* A store of @sync holding what @s holds, set front to back: the most compact index. */
static struct ps_store *fresh_copy(struct ps_store *s, enum ps_sync sync)
{
	struct ps_store *f = ps_store_create(sync);

	cr_assert_not_null(f);
	cr_assert_eq(ps_store_foreach(s, copy_fn, f), 0);
	ps_store_synchronize(f);
	return f;
}

/* @t's store, synchronized, holds at most 3/2 of what a fresh store of its ranges holds. */
static void expect_near_fresh(struct twin *t, enum ps_sync sync, const char *when)
{
	struct ps_store *f;
	size_t mem, fresh;

	cr_assert_eq(ps_store_synchronize(t->s), 0);
	f = fresh_copy(t->s, sync);
	mem = ps_store_memory(t->s);
	fresh = ps_store_memory(f);
	cr_log_info("%s, %s: %zu ranges, %zu bytes, a fresh store %zu", ps_sync_name(sync), when,
			ps_store_count(t->s), mem, fresh);
	cr_assert_leq(2 * mem, 3 * fresh, "%s, %s: %zu ranges hold %zu bytes, a fresh store %zu",
			ps_sync_name(sync), when, ps_store_count(t->s), mem, fresh);
	ps_store_destroy(f);
}

/* Ranges [i, j) of the fill, 4 i to 4 i + 3, in one batch. */
static int fill(struct ps_store *s, struct twin *t, long i, long j)
{
	struct ps_set_op ops[64];
	long x;

	cr_assert_leq(j - i, 64);
	for (x = i; x < j; x++)
		ops[x - i] = (struct ps_set_op){4 * (uint64_t)x, 4 * (uint64_t)x + 3,
				t->pol[x % NPOL]};
	return ps_store_set_many(s, ops, (size_t)(j - i));
}

/*
 * Filled past the pool's threshold, churned, then emptied range by range
 * down to under half of it: the synchronized store holds what a fresh one
 * holds (within 3/2), not the chunks its surviving nodes sit in; and so
 * after more sets.  With the index's copy failing at each of its
 * allocations in turn the store loses nothing, and the next set or the
 * synchronize makes it.
 */
SYNCS_TEST(pooled_syncs, ixpool, a_shrunk_store_gives_its_chunks_back, .timeout = 300)
{
	long i, n, kept = 0;
	struct twin t;
	uint64_t k;

	ps_test_alloc_install();
	twin_init(&t, *sync, 0x5417 + (uint64_t)*sync);
	psi_ix_pool_threshold = 16u << 10;
	/* 54 KB of index (27 KB under valgrind), shrinking to 1-2 KB. */
	n = ps_test_scale() < 1 ? 1000 : 2000;
	t.space = 4 * (uint64_t)n;
	for (i = 0; i < n; i++) {
		struct ps_policy *pol = t.pol[i % NPOL];

		cr_assert_eq(ps_store_set(t.s, 4 * (uint64_t)i, 4 * (uint64_t)i + 3, pol), 0);
		cr_assert_eq(ps_store_set(t.ref, 4 * (uint64_t)i, 4 * (uint64_t)i + 3, pol), 0);
	}
	cr_assert_gt(ps_test_index_bytes(t.s), psi_ix_pool_threshold, "the pool never served");
	twin_churn(&t, n / 4, 8);
	/* Out one by one, in a scattered order, but every 64th. */
	for (i = 0; i < n; i++) {
		k = (uint64_t)((i * 7919L) % n);
		if (k % 64 == 0)
			continue;
		cr_assert_eq(ps_store_set(t.s, 4 * k, 4 * k + 4, NULL), 0);
		cr_assert_eq(ps_store_set(t.ref, 4 * k, 4 * k + 4, NULL), 0);
	}
	twin_expect_same(&t);
	expect_near_fresh(&t, *sync, "shrunk");
	twin_churn(&t, n / 32, 2);
	twin_expect_same(&t);
	expect_near_fresh(&t, *sync, "shrunk, then churned");
	for (i = 0; i < 2000; i++)
		twin_probe(&t, ps_test_rand(&t.seed) % (t.space + 100));

	/* Again, one set emptying it, each allocation failing in turn. */
	cr_assert_eq(ps_store_set(t.s, 0, UINT64_MAX, NULL), 0);
	cr_assert_eq(ps_store_set(t.ref, 0, UINT64_MAX, NULL), 0);
	for (k = 0;; k++) {
		long m = 1000;
		int ret;

		for (i = 0; i < m; i += 50)
			cr_assert_eq(fill(t.s, &t, i, i + 50), 0);
		cr_assert_gt(ps_test_index_bytes(t.s), psi_ix_pool_threshold);
		ps_test_alloc_fail_once((long)k);
		ret = ps_store_set(t.s, 0, 4 * (uint64_t)m - 40, NULL);
		if (!ps_test_alloc_disarm()) {
			cr_assert_eq(ret, 0);
			break;
		}
		cr_assert(ret == 0 || ret == -ENOMEM, "failure %ld: %d", (long)k, ret);
		/* The failure fell on the copy: the set stands, on the pooled nodes. */
		kept += !ret;
		cr_assert_eq(ps_store_count(t.s), ret ? (size_t)m : 10);
		cr_assert_eq(ps_store_check(t.s, NULL), 0, "failure %ld", (long)k);
	}
	cr_assert_gt(kept, 0, "no failure fell on the copy");
	for (i = 0; i < 1000; i += 50)
		cr_assert_eq(fill(t.ref, &t, i, i + 50), 0);
	cr_assert_eq(ps_store_set(t.ref, 0, 4000 - 40, NULL), 0);
	twin_expect_same(&t);
	expect_near_fresh(&t, *sync, "shrunk in one set");
	twin_fini(&t);
	ps_rcu_barrier();
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * Readers beside a writer that fills a store past the pool's threshold
 * and empties it again, so that sets and synchronizes copy the index out
 * of the pool: each lookup answers as in readers_never_see_a_recycled_node.
 */
SYNCS_TEST(pooled_syncs, ixpool, readers_beside_copies_out_of_the_pool, .timeout = 300)
{
	uint64_t nslots = ps_test_scale() < 1 ? 300 : 2000, k;
	long stop = 0, i, rounds = ps_test_scale() < 1 ? 2 : 6;
	struct ps_policy *pol[NPOL];
	struct reader_arg ra;
	struct ps_store *s;
	pthread_t t;

	ps_test_eight_nodes();
	/* 54 KB of index (8 KB under valgrind), shrinking to 1 KB. */
	psi_ix_pool_threshold = ps_test_scale() < 1 ? 4u << 10 : 16u << 10;
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	for (i = 0; i < NPOL; i++)
		pol[i] = ps_test_bind((int)i + 1);
	ra = (struct reader_arg){s, *sync == PS_SYNC_RCU_QSBR, nslots, &stop, 0};
	cr_assert_eq(pthread_create(&t, NULL, reader, &ra), 0);
	for (i = 0; i < rounds; i++) {
		for (k = 0; k < nslots; k++)
			cr_assert_eq(ps_store_set(s, 8 * k, 8 * k + 6, pol[k % 7]), 0);
		/* Out in a scattered order but every 50th: leaves left part empty. */
		for (k = 0; k < nslots; k++) {
			uint64_t x = (k * 7919) % nslots;

			if (x % 50)
				cr_assert_eq(ps_store_set(s, 8 * x, 8 * x + 6, NULL), 0);
		}
		if (i % 2)
			cr_assert_eq(ps_store_synchronize(s), 0);
	}
	PSI_STORE_RELEASE(stop, 1);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_gt(ra.lookups, 0);
	cr_assert_eq(ps_store_check(s, NULL), 0);
	ps_store_destroy(s);
	for (i = 0; i < NPOL; i++)
		ps_policy_put(pol[i]);
	ps_numa_set_topology(0, NULL, NULL);
}
