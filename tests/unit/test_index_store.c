// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index through the store API: RCU and RCU_QSBR stores at scale
 * answer as a SPIN store, memory in proportion, readers beside a flat-out
 * writer (test_index.c says what is checked).
 */
#include "index_test.h"

static enum ps_sync rcu_syncs[] = {PS_SYNC_RCU, PS_SYNC_RCU_QSBR};

/* ---- 3. through the store API, at scale ------------------------------------------------ */

struct pair {
	struct ps_store *s, *ref; /* the store under test, and SPIN */
	struct ps_policy *pol[NPOLS];
	uint64_t seed, space;
	struct rv a, b;
};

static void pair_init(struct pair *p, enum ps_sync sync, uint64_t seed)
{
	int i;

	memset(p, 0, sizeof(*p));
	p->s = shim_create(sync); /* a store the inline read side may read */
	p->ref = ps_store_create(PS_SYNC_SPIN);
	cr_assert(p->s && p->ref);
	for (i = 0; i < 6; i++)
		p->pol[i] = ps_test_bind(i + 1);
	p->pol[6] = interleave(0, 3);
	p->pol[7] = interleave(4, 7);
	p->pol[POL_DEFAULT] = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	p->seed = seed | 1;
}

static void pair_fini(struct pair *p)
{
	int i;

	ps_store_destroy(p->s);
	ps_store_destroy(p->ref);
	for (i = 0; i < NPOLS; i++) {
		cr_assert_eq(ps_policy_refcount(p->pol[i]), 1, "policy %d: references left", i);
		ps_policy_put(p->pol[i]);
	}
	rv_free(&p->a);
	rv_free(&p->b);
}

static void pair_set_many(struct pair *p, const struct ps_set_op *ops, size_t n)
{
	if (n == 1 && ps_test_rand(&p->seed) % 2) {
		cr_assert_eq(ps_store_set(p->s, ops[0].start, ops[0].end, ops[0].pol), 0);
		cr_assert_eq(ps_store_set(p->ref, ops[0].start, ops[0].end, ops[0].pol), 0);
		return;
	}
	cr_assert_eq(ps_store_set_many(p->s, ops, n), 0);
	cr_assert_eq(ps_store_set_many(p->ref, ops, n), 0);
}

static void pair_window(struct pair *p, uint64_t ws, uint64_t we, size_t limit)
{
	int ra, rb;

	rv_reset(&p->a, limit);
	rv_reset(&p->b, limit);
	ra = ps_store_foreach_range(p->s, ws, we, rv_add, &p->a);
	rb = ps_store_foreach_range(p->ref, ws, we, rv_add, &p->b);
	cr_assert_eq(ra, rb, "window [%" PRIu64 ", %" PRIu64 "): %d, SPIN %d", ws, we, ra, rb);
	rv_expect_eq(&p->a, &p->b, "window against SPIN");
}

static void pair_probe(struct pair *p, uint64_t idx)
{
	struct ps_policy *x = ps_store_lookup(p->s, idx), *y = ps_store_lookup(p->ref, idx);
	uint64_t s1 = 0, e1 = 0, s2 = 0, e2 = 0;
	struct ps_policy *p1 = NULL, *p2 = NULL;
	int local = (int)(idx % 8), r1, r2;

	cr_assert_eq(x, y, "lookup(%" PRIu64 ") differs from SPIN's", idx);
	ps_policy_put(x);
	ps_policy_put(y); /* compared by address below: the test holds each policy */
	cr_assert_eq(ps_store_lookup_node(p->s, idx, local),
			ps_store_lookup_node(p->ref, idx, local),
			"lookup_node(%" PRIu64 ") differs from SPIN's", idx);
	/* The inline read side (POLSTORE_INLINE), online for RCU_QSBR: the index walked inline. */
	if (ps_store_sync_kind(p->s) == PS_SYNC_RCU_QSBR)
		cr_assert_eq(ps_qsbr_thread_online(), 0);
	x = shim_lookup(p->s, idx);
	cr_assert_eq(x, y, "inline lookup(%" PRIu64 ") differs from SPIN's", idx);
	ps_policy_put(x);
	shim_read_lock(p->s);
	cr_assert_eq(shim_lookup_borrow(p->s, idx), y, "inline borrowed lookup(%" PRIu64 ")", idx);
	shim_read_unlock(p->s);
	cr_assert_eq(shim_lookup_node(p->s, idx, local), ps_store_lookup_node(p->ref, idx, local),
			"inline lookup_node(%" PRIu64 ") differs from SPIN's", idx);
	if (ps_store_sync_kind(p->s) == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	r1 = ps_store_next(p->s, idx, &s1, &e1, &p1);
	r2 = ps_store_next(p->ref, idx, &s2, &e2, &p2);
	cr_assert_eq(r1, r2, "next(%" PRIu64 "): %d, SPIN %d", idx, r1, r2);
	cr_assert(s1 == s2 && e1 == e2 && p1 == p2,
			"next(%" PRIu64 ") is [%" PRIu64 ", %" PRIu64 "), SPIN's [%" PRIu64
			", %" PRIu64 ")",
			idx, s1, e1, s2, e2);
	if (!r1) {
		ps_policy_put(p1);
		ps_policy_put(p2);
	}
}

static void pair_expect_same(struct pair *p, const char *when)
{
	const char *why = NULL;

	cr_assert_eq(ps_store_check(p->s, &why), 0, "%s: %s", when, why);
	cr_assert_eq(ps_store_count(p->s), ps_store_count(p->ref), "%s: count", when);
	rv_reset(&p->a, 0);
	rv_reset(&p->b, 0);
	cr_assert_eq(ps_store_foreach(p->s, rv_add, &p->a), 0);
	cr_assert_eq(ps_store_foreach(p->ref, rv_add, &p->b), 0);
	rv_expect_eq(&p->a, &p->b, when);
}

static struct ps_policy *pair_pol(struct pair *p)
{
	uint64_t r = ps_test_rand(&p->seed) % 100;

	return r < 10 ? NULL : r < 16 ? p->pol[POL_DEFAULT] : p->pol[r % NBIND];
}

/*
 * 10^5 ranges built in one batch, then sets of every size (spans across
 * hundreds of ranges, batches, removals, spans to UINT64_MAX at the end):
 * the store's answers, the library's and the inline read side's, are
 * SPIN's after each.
 */
SYNCS_TEST(rcu_syncs, index, store_at_scale_answers_as_spin, .timeout = 300)
{
	long nranges = ps_test_scale() < 1 ? 5000 : 100000, u, nu = ps_test_iters(150), i;
#ifdef POLSTORE_DEBUG_CHECKS
	/* Each set checks both stores whole: fewer, larger updates. */
	nu = ps_test_scale() < 1 ? 10 : 16;
#endif
	struct ps_set_op *ops = calloc((size_t)nranges, sizeof(*ops));
	struct pair p;

	cr_assert_not_null(ops);
	ps_test_eight_nodes();
	pair_init(&p, *sync, 0x5ca1e + (uint64_t)*sync);
	p.space = (uint64_t)nranges * 10;
	for (i = 0; i < nranges; i++) {
		uint64_t len = 1 + ps_test_rand(&p.seed) % 9;

		ops[i] = (struct ps_set_op){(uint64_t)i * 10, (uint64_t)i * 10 + len,
				p.pol[ps_test_rand(&p.seed) % NBIND]};
	}
	pair_set_many(&p, ops, (size_t)nranges);
	pair_expect_same(&p, "built");
	cr_assert_eq(ps_store_count(p.s), (size_t)nranges);
	for (u = 0; u < nu; u++) {
		uint64_t r = ps_test_rand(&p.seed) % 100, a = ps_test_rand(&p.seed) % p.space;
		size_t n = 1, k;

		if (r < 20) {
			/* Small. */
			ops[0] = (struct ps_set_op){
					a, a + 1 + ps_test_rand(&p.seed) % 20, pair_pol(&p)};
		} else if (r < 45) {
			/* Across 100 to 600 ranges. */
			ops[0] = (struct ps_set_op){
					a, a + 1000 + ps_test_rand(&p.seed) % 5000, pair_pol(&p)};
		} else if (r < 95) {
			/* A batch, its sets here and there, some across many ranges. */
			n = 2 + ps_test_rand(&p.seed) % 30;
			for (k = 0; k < n; k++) {
				uint64_t b = ps_test_rand(&p.seed) % p.space;
				uint64_t len = ps_test_rand(&p.seed) % 4
							       ? 1 + ps_test_rand(&p.seed) % 30
							       : 1 + ps_test_rand(&p.seed) % 3000;

				ops[k] = (struct ps_set_op){b, b + len, pair_pol(&p)};
			}
		} else {
			/* At the top of the index space. */
			a = UINT64_MAX - 1 - ps_test_rand(&p.seed) % 100000;
			ops[0] = (struct ps_set_op){a,
					UINT64_MAX - ps_test_rand(&p.seed) % (UINT64_MAX - a),
					pair_pol(&p)};
		}
		pair_set_many(&p, ops, n);
		for (k = 0; k < n; k++) {
			pair_probe(&p, ops[k].start);
			pair_probe(&p, ops[k].end);
			pair_probe(&p, ops[k].start ? ops[k].start - 1 : 0);
			pair_probe(&p, ops[k].end - 1);
		}
		for (i = 0; i < 64; i++)
			pair_probe(&p, ps_test_rand(&p.seed) % (p.space + 100));
		pair_probe(&p, UINT64_MAX);
		pair_probe(&p, UINT64_MAX - 1);
		pair_window(&p, a > 500 ? a - 500 : 0, a + 1 + ps_test_rand(&p.seed) % 8000,
				u % 3 ? 0 : 1 + ps_test_rand(&p.seed) % 100);
		if (u % 16 == 15)
			pair_expect_same(&p, "after sets");
	}
	/*
	 * The tail of the space and the start, whole (a few thousand ranges:
	 * what a set retires is released slot by slot).
	 */
	ops[0] = (struct ps_set_op){p.space - p.space / 32, UINT64_MAX, p.pol[2]};
	ops[1] = (struct ps_set_op){0, p.space / 32, NULL};
	ops[2] = (struct ps_set_op){p.space / 32 + 5, p.space / 32 + 7, p.pol[3]};
	pair_set_many(&p, ops, 1);
	pair_expect_same(&p, "to UINT64_MAX");
	pair_set_many(&p, ops + 1, 2);
	pair_expect_same(&p, "from 0");
	for (i = 0; i < 200; i++)
		pair_probe(&p, ps_test_rand(&p.seed) % (p.space + 100));
	pair_window(&p, 0, UINT64_MAX, 0);
	pair_fini(&p);
	free(ops);
	ps_numa_set_topology(0, NULL, NULL);
}

/* ---- memory in proportion ----------------------------------------------------------------- */

/* @n ranges [10 k, 10 k + 5) into @s, in batches of 100, ascending or in a random order. */
static void fill(struct ps_store *s, struct ps_policy *pol, long n, bool random_order)
{
	long *order = malloc((size_t)n * sizeof(*order)), i;
	struct ps_set_op ops[100];
	uint64_t seed = 42;
	int k = 0;

	cr_assert_not_null(order);
	for (i = 0; i < n; i++)
		order[i] = i;
	for (i = n - 1; random_order && i > 0; i--) {
		long j = (long)(ps_test_rand(&seed) % (uint64_t)(i + 1)), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (i = 0; i < n; i++) {
		ops[k++] = (struct ps_set_op){
				10 * (uint64_t)order[i], 10 * (uint64_t)order[i] + 5, pol};
		if (k == 100 || i == n - 1) {
			cr_assert_eq(ps_store_set_many(s, ops, (size_t)k), 0);
			k = 0;
		}
	}
	free(order);
	ps_store_synchronize(s);
}

enum fill_how { FILL_IN_ORDER, FILL_RANDOM, FILL_SINGLE };

/*
 * ps_store_memory() of a @sync store of @n ranges [10 k, 10 k + 5) against
 * a SPIN store's, filled @how: ascending or in a random order by batches of
 * 100, or one set at a time in a scattered order (slot stores and splits;
 * 2000 ranges at most where every set checks the store).  Return: the
 * ratio (printed with the figures).
 */
static double memory_ratio(enum ps_sync sync, long n, enum fill_how how)
{
	static const char *const hows[] = {"in order", "random order", "single sets"};
	struct ps_store *s = ps_store_create(sync), *ref = ps_store_create(PS_SYNC_SPIN);
	struct ps_policy *pol = ps_test_bind(1);
	size_t ms, mr, ix;
	double ratio;
	long i;

	cr_assert(s && ref);
	if (how == FILL_SINGLE) {
#ifdef POLSTORE_DEBUG_CHECKS
		n = n > 2000 ? 2000 : n;
#endif
		for (i = 0; i < n; i++) {
			uint64_t k = (uint64_t)((i * 7919) % n);

			cr_assert_eq(ps_store_set(s, 10 * k, 10 * k + 5, pol), 0);
			cr_assert_eq(ps_store_set(ref, 10 * k, 10 * k + 5, pol), 0);
		}
		ps_store_synchronize(s);
	} else {
		fill(s, pol, n, how == FILL_RANDOM);
		fill(ref, pol, n, how == FILL_RANDOM);
	}
	cr_assert_eq(ps_store_count(s), (size_t)n);
	mr = ps_store_memory(s);
	ms = ps_store_memory(ref);
	ix = ps_test_index_bytes(s);
	ratio = (double)mr / (double)ms;
	cr_log_info("%s, %ld ranges (%s): %zu bytes, SPIN %zu, %.2fx; index %zu bytes (%.1f per "
		    "range)",
			ps_sync_name(sync), n, hows[how], mr, ms, ratio, ix,
			(double)ix / (double)n);
	ps_store_destroy(s);
	ps_store_destroy(ref);
	ps_policy_put(pol);
	return ratio;
}

/* A 4-range store within 2x SPIN's bytes, however filled; 10^4 ranges in order within 1.7x. */
SYNCS_TEST(rcu_syncs, index, memory_in_proportion_to_spin, .timeout = 120)
{
	int how;

	for (how = FILL_IN_ORDER; how <= FILL_SINGLE; how++)
		cr_expect_leq(memory_ratio(*sync, 4, how), 2.0,
				"4 ranges: more than 2x SPIN's bytes");
	cr_expect_leq(memory_ratio(*sync, ps_test_scale() < 1 ? 2000 : 10000, FILL_IN_ORDER), 1.7,
			"10^4 ranges in order: more than 1.7x SPIN's bytes");
}

/* 10^4 ranges set in a random order, by batches and one at a time: within 1.7x SPIN's bytes. */
SYNCS_TEST(rcu_syncs, index, memory_after_scattered_sets_in_proportion_to_spin, .timeout = 120)
{
	long n = ps_test_scale() < 1 ? 2000 : 10000;

	cr_expect_leq(memory_ratio(*sync, n, FILL_RANDOM), 1.7,
			"10^4 ranges in a random order: more than 1.7x SPIN's bytes");
	cr_expect_leq(memory_ratio(*sync, n, FILL_SINGLE), 1.7,
			"10^4 ranges one set at a time: more than 1.7x SPIN's bytes");
}

/* ---- 4. readers beside a flat-out writer --------------------------------------------------- */

/*
 * The writer turns the store from a fixed configuration into that one with
 * some spans changed (one set across up to a quarter of the ranges, or a
 * batch of disjoint spans) and back (a batch), flat out; readers look up,
 * ask for next() and walk windows, each answer checked against the
 * versions published while it ran (testutil_load.c).
 */
SYNCS_TEST(rcu_syncs, index, readers_beside_a_flat_out_writer, .timeout = 120)
{
	struct ps_test_index_load l = {
			.sync = *sync,
			.readers = 2,
			.ranges = ps_test_scale() < 1 ? 300 : 2000,
			.run = {.iters = LONG_MAX,
					.min_iters = 200,
					.duration_ns = ps_test_scale() < 1 ? 300000000ull
									   : 1500000000ull,
					.seed = 0x1dea + (uint64_t)*sync},
	};
	int ret;

	ret = ps_test_index_run(&l);
	cr_log_info("%s: %ld updates, %ld lookups, %ld nexts, %ld windows, %ld unchecked",
			ps_sync_name(*sync), l.updates, l.lookups, l.nexts, l.windows, l.unchecked);
	cr_assert_eq(ret, 0, "%s: %s", ps_sync_name(*sync), l.run.why);
	cr_assert_gt(l.lookups + l.nexts + l.windows, 100);
}

/* The same with the inline read side (POLSTORE_INLINE), RCU_QSBR readers online. */
SYNCS_TEST(rcu_syncs, index, inline_readers_beside_a_flat_out_writer, .timeout = 120)
{
	struct ps_test_index_load l = {
			.sync = *sync,
			.readers = 2,
			.ranges = ps_test_scale() < 1 ? 300 : 2000,
			.qsbr_online = true,
			.create = shim_create,
			.lookup = shim_lookup,
			.lookup_node = shim_lookup_node,
			.run = {.iters = LONG_MAX,
					.min_iters = 200,
					.duration_ns = ps_test_scale() < 1 ? 300000000ull
									   : 1000000000ull,
					.seed = 0x1d1e + (uint64_t)*sync},
	};
	int ret;

	ret = ps_test_index_run(&l);
	cr_log_info("%s inline: %ld updates, %ld lookups, %ld nexts, %ld windows, %ld unchecked",
			ps_sync_name(*sync), l.updates, l.lookups, l.nexts, l.windows, l.unchecked);
	cr_assert_eq(ret, 0, "%s: %s", ps_sync_name(*sync), l.run.why);
	cr_assert_gt(l.lookups + l.nexts + l.windows, 100);
}
