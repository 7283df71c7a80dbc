// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The RCU stores as they shrink: ranges removed by sets that cross many
 * leaves of the read index (munmap() of most of each mapping) leave a
 * store of about the bytes and the index depth of one filled anew with
 * the ranges left.
 */
#include "compiler.h"
#include "rcu_store_test.h"
#include "leaf_cut.h"

/* Pages of a block of the pattern: all but one range of each removed. */
#define BLOCK 256

struct kept {
	struct ps_set_op *v;
	size_t n;
};

static int keep(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct kept *k = arg;

	k->v[k->n++] = (struct ps_set_op){ start, end, pol };
	return 0;
}

/* @ops[0, n) set in order, by batches (one check each where every set checks the store). */
static void set_in_order(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i += 4096)
		cr_assert_eq(ps_store_set_many(s, ops + i, n - i < 4096 ? n - i : 4096), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
}

static int ix_height(struct ps_store *s)
{
	const struct ps_ix_node *r = PSI_LOAD_ACQUIRE(s->ix.node);

	return r ? r->height : -1;
}

/*
 * A @sync store of @n one-page ranges [2 k, 2 k + 1), set in order; then
 * in each block of BLOCK pages every range but the one at its middle
 * removed with two sets, each across the leaves between (one at a time;
 * by batches where every set checks the store, past 2 10^4 ranges).  Once
 * synchronized, against a store given the ranges left in order: the same
 * ranges, at most 1.5x its bytes, an index at most one level deeper.
 */
static void punch(enum ps_sync sync, long n)
{
	struct ps_store *s = ps_store_create(sync), *f = ps_store_create(sync);
	struct ps_policy *pol = ps_test_bind(1);
	struct kept k = { malloc((size_t)n * sizeof(*k.v)), 0 };
	size_t ms, mf, expect = 0;
	const char *why = NULL;
	bool batch = false;
	uint64_t b;
	long i;

#ifdef POLSTORE_DEBUG_CHECKS
	batch = n > 20000;
#endif
	cr_assert(s && f && k.v);
	for (i = 0; i < n; i++)
		k.v[i] = (struct ps_set_op){ 2 * (uint64_t)i, 2 * (uint64_t)i + 1, pol };
	set_in_order(s, k.v, (size_t)n);
	k.n = 0;
	for (b = 0; b < 2 * (uint64_t)n; b += BLOCK) {
		struct ps_set_op o[2] = { { b, b + BLOCK / 2, NULL },
			{ b + BLOCK / 2 + 1, b + BLOCK, NULL } };

		expect += b + BLOCK / 2 < 2 * (uint64_t)n;
		if (batch) {
			/* One batch per 64 blocks: the ops of the blocks before, kept in k.v. */
			k.v[k.n++] = o[0];
			k.v[k.n++] = o[1];
			if (k.n == 128 || b + BLOCK >= 2 * (uint64_t)n) {
				cr_assert_eq(ps_store_set_many(s, k.v, k.n), 0);
				k.n = 0;
			}
			continue;
		}
		cr_assert_eq(ps_store_set(s, o[0].start, o[0].end, NULL), 0);
		cr_assert_eq(ps_store_set(s, o[1].start, o[1].end, NULL), 0);
	}
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_check(s, &why), 0, "%s", why);
	k.n = 0;
	cr_assert_eq(ps_store_foreach(s, keep, &k), 0);
	cr_assert_eq(k.n, expect, "%zu ranges left, expected %zu", k.n, expect);
	for (i = 0; i < (long)k.n; i++) {
		struct ps_policy *p = ps_store_lookup(s, k.v[i].start);

		cr_assert(k.v[i].start % BLOCK == BLOCK / 2 && p == pol,
				"range %ld: [%" PRIu64 ", %" PRIu64 ") %p", i, k.v[i].start,
				k.v[i].end, (void *)p);
		ps_policy_put(p);
		cr_assert_null(ps_store_lookup(s, k.v[i].start + 2));
	}
	set_in_order(f, k.v, k.n);
	ms = ps_store_memory(s);
	mf = ps_store_memory(f);
	cr_log_info("%s, %ld ranges, %zu left: %zu bytes (index %zu, %d levels), filled anew %zu "
		    "(index %zu, %d levels): %.2fx",
			ps_sync_name(sync), n, k.n, ms, ps_test_index_bytes(s), ix_height(s) + 1, mf,
			ps_test_index_bytes(f), ix_height(f) + 1, (double)ms / (double)mf);
	cr_expect_leq(ms, mf + mf / 2, "%s, %ld ranges: %zu bytes, %.2fx a store filled anew (%zu)",
			ps_sync_name(sync), n, ms, (double)ms / (double)mf, mf);
	cr_expect_leq(ix_height(s), ix_height(f) + 1,
			"%s, %ld ranges: an index of %d levels where one filled anew has %d",
			ps_sync_name(sync), n, ix_height(s) + 1, ix_height(f) + 1);
	ps_store_destroy(s);
	ps_store_destroy(f);
	ps_policy_put(pol);
	free(k.v);
}

RCU_TEST(removals_across_leaves_shrink_the_index, .timeout = 60)
{
	punch(*sync, ps_test_scale() < 1 ? 4000 : 20000);
}

RCU_TEST(removals_across_leaves_shrink_the_index_at_1e5, .timeout = 120)
{
	punch(*sync, ps_test_scale() < 1 ? 8000 : 100000);
}

/*
 * Removals one range at a time, scattered (15 of every 16 ranges of a
 * store of 20000 set in order, 4000 under valgrind), leave leaves a quarter to half full;
 * ps_store_synchronize() then copies the index into leaves 3/4 full, so
 * that the store holds at most 5/4 of the bytes of one filled anew.
 */
RCU_TEST(scattered_removals_compact_at_synchronize, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync), *f = ps_store_create(*sync);
	struct ps_policy *pol = ps_test_bind(1);
	long n = ps_test_scale() < 1 ? 4000 : 20000, i, j;
	struct kept k = { malloc((size_t)n * sizeof(*k.v)), 0 };
	size_t ms, mf;
	const char *why = NULL;

	cr_assert(s && f && k.v);
	for (i = 0; i < n; i++)
		k.v[i] = (struct ps_set_op){ 2 * (uint64_t)i, 2 * (uint64_t)i + 1, pol };
	set_in_order(s, k.v, (size_t)n);
	/* In a scattered order: a stride prime to n. */
	for (i = 0, j = 0; i < n; i++) {
		long r = (i * 7919) % n;

		if (r % 16)
			k.v[j++] = (struct ps_set_op){ 2 * (uint64_t)r, 2 * (uint64_t)r + 1, NULL };
	}
	for (i = 0; i < j; i += 64)
		cr_assert_eq(ps_store_set_many(s, k.v + i, (size_t)(j - i < 64 ? j - i : 64)), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_check(s, &why), 0, "%s", why);
	k.n = 0;
	cr_assert_eq(ps_store_foreach(s, keep, &k), 0);
	cr_assert_eq(k.n, (size_t)(n / 16), "%zu ranges left", k.n);
	set_in_order(f, k.v, k.n);
	ms = ps_store_memory(s);
	mf = ps_store_memory(f);
	cr_expect_leq(ms, mf + mf / 4, "%s: %zu bytes, %.2fx a store filled anew (%zu)",
			ps_sync_name(*sync), ms, (double)ms / (double)mf, mf);
	ps_store_destroy(s);
	ps_store_destroy(f);
	ps_policy_put(pol);
	free(k.v);
}

/*
 * A store of 20000 ranges (8000 under valgrind) set in order, churned by
 * sets that split and replace, then emptied but for one range in 128 in
 * a scattered order: once synchronized its index has no more levels than
 * one filled anew with its ranges in order (its copy fills leaves past
 * 3/4 where 3/4 would take a level more).
 */
RCU_TEST(a_shrunk_index_is_no_deeper_than_a_fresh_one, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync), *f = ps_store_create(*sync);
	struct ps_policy *pol = ps_test_bind(1), *other = ps_test_bind(2);
	long n = ps_test_scale() < 1 ? 8000 : 20000, i, j;
	struct kept k = { malloc((size_t)n * 2 * sizeof(*k.v)), 0 };
	struct ps_set_op ops[64];
	uint64_t rnd = 7;
	const char *why = NULL;

	cr_assert(s && f && k.v);
	for (i = 0; i < n; i++)
		k.v[i] = (struct ps_set_op){ 4 * (uint64_t)i, 4 * (uint64_t)i + 3, pol };
	set_in_order(s, k.v, (size_t)n);
	for (i = 0; i < n / 4; i += 64) {
		for (j = 0; j < 64; j++) {
			uint64_t a = ps_test_rand(&rnd) % (4 * (uint64_t)n);

			ops[j] = (struct ps_set_op){ a, a + 1 + ps_test_rand(&rnd) % 3,
				j % 2 ? other : pol };
		}
		cr_assert_eq(ps_store_set_many(s, ops, 64), 0);
	}
	k.n = 0;
	cr_assert_eq(ps_store_foreach(s, keep, &k), 0);
	/* In a scattered order (a stride prime to the count), by batches of 64. */
	for (i = 0, j = 0; i < (long)k.n; i++) {
		long r = (long)(((uint64_t)i * 7919) % k.n);

		if (r % 128)
			ops[j++] = (struct ps_set_op){ k.v[r].start, k.v[r].end, NULL };
		if (j == 64 || (i + 1 == (long)k.n && j)) {
			cr_assert_eq(ps_store_set_many(s, ops, (size_t)j), 0);
			j = 0;
		}
	}
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_check(s, &why), 0, "%s", why);
	k.n = 0;
	cr_assert_eq(ps_store_foreach(s, keep, &k), 0);
	set_in_order(f, k.v, k.n);
	cr_log_info("%s: %zu ranges left, %d levels, filled anew %d; %zu bytes, filled anew %zu",
			ps_sync_name(*sync), k.n, ix_height(s) + 1, ix_height(f) + 1,
			ps_store_memory(s), ps_store_memory(f));
	cr_expect_leq(ix_height(s), ix_height(f), "%s, %zu ranges: %d levels, filled anew %d",
			ps_sync_name(*sync), k.n, ix_height(s) + 1, ix_height(f) + 1);
	ps_store_destroy(s);
	ps_store_destroy(f);
	ps_policy_put(pol);
	ps_policy_put(other);
	free(k.v);
}

/*
 * Every variant through a life of fills and shrinks: 3000 ranges (1000
 * under valgrind) set in order, the munmap() pattern (sets across many leaves), churn of sets
 * that split and replace, then scattered removals down to 1/16; once
 * synchronized, the store holds at most 5/4 of the bytes of one given
 * its ranges in order.
 */
VARIANT_TEST(rcu_store, a_shrunk_store_holds_what_a_fresh_one_holds, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync), *f = ps_store_create(*sync);
	struct ps_policy *pol = ps_test_bind(1), *other = ps_test_bind(2);
	long n = ps_test_scale() < 1 ? 1000 : 3000, i;
	struct kept k = { malloc((size_t)n * 4 * sizeof(*k.v)), 0 };
	uint64_t rnd = 42;
	size_t ms, mf;
	const char *why = NULL;

	cr_assert(s && f && k.v);
	for (i = 0; i < n; i++)
		k.v[i] = (struct ps_set_op){ 4 * (uint64_t)i, 4 * (uint64_t)i + 3, pol };
	set_in_order(s, k.v, (size_t)n);
	for (i = 0; i < 4 * n; i += BLOCK)
		cr_assert_eq(ps_store_set(s, (uint64_t)i + 4, (uint64_t)i + BLOCK / 2, NULL), 0);
	for (i = 0; i < 2 * n / 3; i++) {
		uint64_t a = ps_test_rand(&rnd) % (4 * (uint64_t)n);

		cr_assert_eq(ps_store_set(s, a, a + 1 + ps_test_rand(&rnd) % 3, i % 2 ? other : pol),
				0);
	}
	k.n = 0;
	cr_assert_eq(ps_store_foreach(s, keep, &k), 0);
	for (i = 0; i < (long)k.n; i++)
		if (i % 16)
			cr_assert_eq(ps_store_set(s, k.v[i].start, k.v[i].end, NULL), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_check(s, &why), 0, "%s", why);
	k.n = 0;
	cr_assert_eq(ps_store_foreach(s, keep, &k), 0);
	set_in_order(f, k.v, k.n);
	ms = ps_store_memory(s);
	mf = ps_store_memory(f);
	cr_expect_leq(ms, mf + mf / 4, "%s, %zu ranges: %zu bytes, %.2fx a store filled anew (%zu)",
			ps_sync_name(*sync), k.n, ms, (double)ms / (double)mf, mf);
	ps_store_destroy(s);
	ps_store_destroy(f);
	ps_policy_put(pol);
	ps_policy_put(other);
	free(k.v);
}

/*
 * ps_store_check() fails a store whose index has a leaf under a quarter
 * full that is neither the root nor the last leaf: the first leaf of a
 * store of 1000 ranges, set one by one, cut down to one range in place
 * (no reader, no set runs), its other ranges taken out of the tree too,
 * so that only the occupancy is wrong.
 */
RCU_TEST(check_fails_a_leaf_under_its_occupancy)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *pol = ps_test_bind(1);
	const char *why = NULL;
	unsigned i;

	cr_assert_not_null(s);
	for (i = 0; i < 1000; i++)
		cr_assert_eq(ps_store_set(s, 10 * (uint64_t)i, 10 * (uint64_t)i + 5, pol), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_check(s, &why), 0, "%s", why);
	leaf_cut_first(s->ix.node, &s->rd.tree);
	cr_assert_eq(ps_store_check(s, &why), -EUCLEAN);
	cr_assert_str_eq(why, "index leaf under a quarter full");
	ps_store_destroy(s);
	ps_policy_put(pol);
}
