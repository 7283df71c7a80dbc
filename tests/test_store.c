// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The store's rules, written once and run for every variant: splits, trims,
 * removal, DEFAULT, EINVAL, uint64_t edges, references; a randomized
 * differential test against an array model; allocation failures.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "store_internal.h"
#include "testutil.h"

struct seen_range {
	uint64_t start, end;
	struct ps_policy *pol;
};

struct walk {
	struct seen_range r[256];
	int n;
};

static int collect(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walk *w = arg;

	cr_assert_lt(w->n, 256);
	w->r[w->n++] = (struct seen_range){ start, end, pol };
	return 0;
}

static struct walk walk_store(struct ps_store *s)
{
	struct walk w = { .n = 0 };

	cr_assert_eq(ps_store_foreach(s, collect, &w), 0);
	return w;
}

static void expect_ranges(struct ps_store *s, const struct seen_range *want, int n)
{
	struct walk w = walk_store(s);
	const char *why = NULL;
	int i;

	cr_assert_eq(ps_store_check(s, &why), 0, "%s: %s", ps_sync_name(ps_store_sync_kind(s)),
			why);
	cr_assert_eq(w.n, n, "%s: %d ranges, want %d", ps_sync_name(ps_store_sync_kind(s)), w.n,
			n);
	cr_assert_eq(ps_store_count(s), (size_t)n);
	for (i = 0; i < n; i++) {
		cr_assert_eq(w.r[i].start, want[i].start, "range %d start", i);
		cr_assert_eq(w.r[i].end, want[i].end, "range %d end", i);
		cr_assert_eq(w.r[i].pol, want[i].pol, "range %d policy", i);
	}
}

static void expect_at(struct ps_store *s, uint64_t idx, struct ps_policy *want)
{
	struct ps_policy *got = ps_store_lookup(s, idx);

	cr_assert_eq(got, want, "%s: lookup(%llu)", ps_sync_name(ps_store_sync_kind(s)),
			(unsigned long long)idx);
	ps_policy_put(got);
}

VARIANT_TEST(store, names_and_create)
{
	struct ps_store *s = ps_store_create(*sync);

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_sync_kind(s), (int)*sync);
	cr_assert_eq(ps_sync_from_name(ps_sync_name(*sync)), (int)*sync);
	cr_assert_eq(ps_store_count(s), 0u);
	expect_at(s, 0, NULL);
	expect_at(s, UINT64_MAX, NULL);
	ps_store_destroy(s);
}

Test(store, variant_names)
{
	cr_assert_str_eq(ps_sync_name(PS_SYNC_SPIN), "spin");
	cr_assert_str_eq(ps_sync_name(PS_SYNC_RWLOCK), "rwlock");
	cr_assert_str_eq(ps_sync_name(PS_SYNC_SEQLOCK), "seqlock");
	cr_assert_str_eq(ps_sync_name(PS_SYNC_RCU), "rcu");
	cr_assert_str_eq(ps_sync_name(PS_SYNC_RCU_QSBR), "rcu-qsbr");
	cr_assert_null(ps_sync_name(PS_SYNC_COUNT));
	cr_assert_eq(ps_sync_from_name("nope"), -EINVAL);
	cr_assert_eq(ps_sync_from_name(NULL), -EINVAL);
	errno = 0;
	cr_assert_null(ps_store_create((enum ps_sync)PS_SYNC_COUNT));
	cr_assert_eq(errno, EINVAL);
}

VARIANT_TEST(store, einval_leaves_state)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);
	struct seen_range want[] = { { 10, 20, a } };

	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	cr_assert_eq(ps_store_set(NULL, 0, 1, a), -EINVAL);
	cr_assert_eq(ps_store_set(s, 5, 5, a), -EINVAL);
	cr_assert_eq(ps_store_set(s, 30, 12, a), -EINVAL);
	cr_assert_eq(ps_store_set(s, UINT64_MAX, UINT64_MAX, a), -EINVAL);
	expect_ranges(s, want, 1);
	cr_assert_eq(ps_store_foreach(s, NULL, NULL), -EINVAL);
	cr_assert_eq(ps_store_foreach(NULL, collect, NULL), -EINVAL);
	errno = 0;
	cr_assert_null(ps_store_lookup(NULL, 3));
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(ps_store_count(NULL), 0u);
	cr_assert_eq(ps_store_check(NULL, NULL), -EINVAL);
	cr_assert_eq(ps_store_synchronize(NULL), -EINVAL);
	ps_store_destroy(NULL);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * Each variant's lookup sets errno on a miss itself (ps_store_lookup() tail-
 * calls it): a miss reads errno 0 whatever errno was, also inside a section.
 */
VARIANT_TEST(store, miss_sets_errno_zero)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1), *got;

	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	errno = EAGAIN;
	cr_assert_null(ps_store_lookup(s, 9));
	cr_assert_eq(errno, 0, "%s: errno %d after a miss", ps_sync_name(*sync), errno);
	errno = EAGAIN;
	cr_assert_null(ps_store_lookup(s, 20));
	cr_assert_eq(errno, 0);
	got = ps_store_lookup(s, 19);
	cr_assert_eq(got, a);
	/* Ours, the range's, and the lookup's. */
	cr_assert_eq(ps_policy_refcount(a), 2 + 1);
	ps_policy_put(got);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * RCU_QSBR lookups leave the thread as they found it: an online thread
 * stays online (the lookup skips the section bookkeeping), an offline one
 * stays offline, also for a lookup inside an automatic section.
 */
Test(store, qsbr_lookup_keeps_thread_state)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *a = ps_test_bind(1);

	cr_assert_eq(ps_store_set(s, 0, 8, a), 0);
	cr_assert_not(ps_qsbr_thread_is_online());
	ps_policy_put(ps_store_lookup(s, 1));
	cr_assert_not(ps_qsbr_thread_is_online());
	ps_store_read_lock(s); /* automatic section: online until its end */
	cr_assert_eq(ps_store_lookup_borrow(s, 2), a);
	ps_policy_put(ps_store_lookup(s, 3));
	cr_assert_eq(ps_store_lookup_borrow(s, 4), a);
	ps_store_read_unlock(s);
	cr_assert_not(ps_qsbr_thread_is_online());
	cr_assert_eq(ps_qsbr_thread_online(), 0);
	ps_policy_put(ps_store_lookup(s, 5));
	cr_assert_null(ps_store_lookup(s, 9));
	cr_assert(ps_qsbr_thread_is_online());
	ps_qsbr_quiescent();
	ps_qsbr_thread_offline();
	/* Synchronize waits for a grace period: no section may be left open above. */
	cr_assert_eq(ps_store_set(s, 0, 8, NULL), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_policy_refcount(a), 1);
	ps_store_destroy(s);
	ps_policy_put(a);
}

VARIANT_TEST(store, split_trim_remove)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2), *c = ps_test_bind(3);

	cr_assert_eq(ps_store_set(s, 0, 100, a), 0);
	/* Covered on both sides: split, both halves keep a. */
	cr_assert_eq(ps_store_set(s, 40, 60, b), 0);
	{
		struct seen_range w[] = { { 0, 40, a }, { 40, 60, b }, { 60, 100, a } };

		expect_ranges(s, w, 3);
	}
	expect_at(s, 39, a);
	expect_at(s, 40, b);
	expect_at(s, 59, b);
	expect_at(s, 60, a);
	expect_at(s, 100, NULL);
	/* Overlapping both edges' neighbours: trim left and right, remove the inside. */
	cr_assert_eq(ps_store_set(s, 30, 70, c), 0);
	{
		struct seen_range w[] = { { 0, 30, a }, { 30, 70, c }, { 70, 100, a } };

		expect_ranges(s, w, 3);
	}
	/* NULL removes; the hole is empty. */
	cr_assert_eq(ps_store_set(s, 20, 80, NULL), 0);
	{
		struct seen_range w[] = { { 0, 20, a }, { 80, 100, a } };

		expect_ranges(s, w, 2);
	}
	expect_at(s, 50, NULL);
	/* Exactly covering an existing range replaces it. */
	cr_assert_eq(ps_store_set(s, 80, 100, b), 0);
	{
		struct seen_range w[] = { { 0, 20, a }, { 80, 100, b } };

		expect_ranges(s, w, 2);
	}
	/* Equal neighbours are not merged. */
	cr_assert_eq(ps_store_set(s, 20, 80, a), 0);
	{
		struct seen_range w[] = { { 0, 20, a }, { 20, 80, a }, { 80, 100, b } };

		expect_ranges(s, w, 3);
	}
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(a), 1);
	cr_assert_eq(ps_policy_refcount(b), 1);
	cr_assert_eq(ps_policy_refcount(c), 1);
	ps_policy_put(a);
	ps_policy_put(b);
	ps_policy_put(c);
}

VARIANT_TEST(store, default_policy_removes)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);
	struct ps_policy *d = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	struct seen_range w[] = { { 0, 10, a }, { 90, 100, a } };

	cr_assert_eq(ps_store_set(s, 0, 100, a), 0);
	cr_assert_eq(ps_store_set(s, 10, 90, d), 0);
	expect_ranges(s, w, 2);
	cr_assert_eq(ps_policy_refcount(d), 1, "a DEFAULT policy is never stored");
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(d);
}

VARIANT_TEST(store, uint64_edges)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);

	cr_assert_eq(ps_store_set(s, 0, UINT64_MAX, a), 0);
	expect_at(s, 0, a);
	expect_at(s, UINT64_MAX - 1, a);
	/* [start, end) cannot include UINT64_MAX itself. */
	expect_at(s, UINT64_MAX, NULL);
	cr_assert_eq(ps_store_set(s, UINT64_MAX - 1, UINT64_MAX, b), 0);
	cr_assert_eq(ps_store_set(s, 0, 1, b), 0);
	{
		struct seen_range w[] = { { 0, 1, b }, { 1, UINT64_MAX - 1, a },
			{ UINT64_MAX - 1, UINT64_MAX, b } };

		expect_ranges(s, w, 3);
	}
	expect_at(s, UINT64_MAX - 1, b);
	expect_at(s, UINT64_MAX - 2, a);
	expect_at(s, 1, a);
	cr_assert_eq(ps_store_set(s, 0, UINT64_MAX, NULL), 0);
	expect_ranges(s, NULL, 0);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
}

/*
 * SEQLOCK frees removed ranges in batches after a grace period (through
 * call_rcu); ps_store_synchronize() frees the partial batch and waits for the
 * batches in flight, after which only ranges in the store hold references.
 */
VARIANT_TEST(store, removed_ranges_release_their_references)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);
	int i;

	for (i = 0; i < 200; i++) {
		cr_assert_eq(ps_store_set(s, (uint64_t)i, (uint64_t)i + 1, a), 0);
		cr_assert_eq(ps_store_set(s, (uint64_t)i, (uint64_t)i + 1, NULL), 0);
	}
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_policy_refcount(a), 1);
	cr_assert_eq(ps_store_count(s), 0u);
	ps_store_destroy(s);
	ps_policy_put(a);
}

VARIANT_TEST(store, references_outlive_the_store)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(7);
	struct ps_policy *got;

	cr_assert_eq(ps_store_set(s, 5, 6, a), 0);
	ps_policy_put(a); /* the store's reference is now the only one */
	got = ps_store_lookup(s, 5);
	cr_assert_eq(got, a);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(got), 1);
	cr_assert_eq(ps_policy_first_node(got), 7);
	ps_policy_put(got); /* frees it: valgrind/ASan check nothing is left */
}

VARIANT_TEST(store, borrowed_lookup)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(4);
	const struct ps_policy *p;

	cr_assert_eq(ps_store_set(s, 100, 200, a), 0);
	ps_store_read_lock(s);
	p = ps_store_lookup_borrow(s, 150);
	cr_assert_eq(p, a);
	cr_assert_eq(ps_policy_first_node(p), 4);
	cr_assert_null(ps_store_lookup_borrow(s, 99));
	ps_store_read_unlock(s);
	cr_assert_eq(ps_policy_refcount(a), 1 + 1, "a borrow takes no reference");
	cr_assert_null(ps_store_lookup_borrow(NULL, 1));
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * Differential test.  The model: per point of [0, M), the policy and the id
 * of the set that put it there.  A range is a maximal run of one id (a
 * split leaves two runs of the same id, always separated by the new set's
 * id or a hole, and ids are never reused), so the store must hold exactly
 * the runs.
 */
#define M 104 /* the model's points; sets start below M - 8 and end by M */
#define NPOL 6

struct model {
	struct ps_policy *pol[M];
	unsigned id[M];
	unsigned next_id;
};

static void model_set(struct model *m, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	bool removes = !pol || ps_policy_mode(pol) == PS_MPOL_DEFAULT;
	uint64_t i;

	m->next_id++;
	for (i = start; i < end; i++) {
		m->pol[i] = removes ? NULL : pol;
		m->id[i] = removes ? 0 : m->next_id;
	}
}

static void model_compare(struct ps_store *s, const struct model *m, long step)
{
	struct walk w = walk_store(s);
	int runs = 0, r = 0;
	uint64_t i;
	const char *why = NULL;

	cr_assert_eq(ps_store_check(s, &why), 0, "step %ld: %s", step, why);
	for (i = 0; i < M + 2; i++) {
		struct ps_policy *got = ps_store_lookup(s, i);

		cr_assert_eq(got, i < M ? m->pol[i] : NULL, "%s step %ld: point %llu",
				ps_sync_name(ps_store_sync_kind(s)), step, (unsigned long long)i);
		ps_policy_put(got);
	}
	for (i = 0; i < M; i++) {
		if (!m->id[i] || (i > 0 && m->id[i - 1] == m->id[i]))
			continue;
		uint64_t e = i;

		while (e < M && m->id[e] == m->id[i])
			e++;
		cr_assert_lt(r, w.n, "step %ld: store lacks the range at %llu", step,
				(unsigned long long)i);
		cr_assert(w.r[r].start == i && w.r[r].end == e && w.r[r].pol == m->pol[i],
				"step %ld: range %d is [%llu,%llu), want [%llu,%llu)", step, r,
				(unsigned long long)w.r[r].start, (unsigned long long)w.r[r].end,
				(unsigned long long)i, (unsigned long long)e);
		r++;
		runs++;
	}
	cr_assert_eq(w.n, runs, "step %ld: store has %d ranges, model %d", step, w.n, runs);
	cr_assert_eq(ps_store_count(s), (size_t)runs);
}

VARIANT_TEST(store, differential_random)
{
	struct ps_policy *pols[NPOL + 1];
	struct model m;
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)*sync;
	long rounds = ps_test_iters(60), ops = 80, step = 0, r, k;
	int p;

	for (p = 0; p < NPOL; p++)
		pols[p] = ps_test_bind(p);
	pols[NPOL] = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	for (r = 0; r < rounds; r++) {
		struct ps_store *s = ps_store_create(*sync);

		memset(&m, 0, sizeof(m));
		for (k = 0; k < ops; k++, step++) {
			uint64_t a = ps_test_rand(&seed) % (M - 8), b = ps_test_rand(&seed) % (M - 8);
			uint64_t pick = ps_test_rand(&seed) % (NPOL + 3);
			struct ps_policy *pol = pick < NPOL + 1 ? pols[pick] : NULL;

			if (a == b)
				b = a + 1 + ps_test_rand(&seed) % 3;
			if (a > b) {
				uint64_t t = a;

				a = b;
				b = t;
			}
			cr_assert_eq(ps_store_set(s, a, b, pol), 0);
			model_set(&m, a, b, pol);
			model_compare(s, &m, step);
			/*
			 * Every range holds one reference, once ranges retired
			 * by earlier sets are freed.
			 */
			cr_assert_eq(ps_store_synchronize(s), 0);
			for (p = 0; p < NPOL; p++) {
				long holders = 0;
				uint64_t i;

				for (i = 0; i < M; i++)
					holders += m.pol[i] == pols[p] &&
						   (i == 0 || m.id[i - 1] != m.id[i]);
				cr_assert_eq(ps_policy_refcount(pols[p]),
						1 + holders * 1,
						"step %ld: policy %d refcount", step, p);
			}
		}
		ps_store_destroy(s);
	}
	for (p = 0; p <= NPOL; p++) {
		cr_assert_eq(ps_policy_refcount(pols[p]), 1);
		ps_policy_put(pols[p]);
	}
}

/* Allocation failure: fail the k-th allocation for every k a set reaches. */
VARIANT_TEST(store, enomem_changes_nothing)
{
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);
	struct ps_store *s;
	long k;

	ps_test_alloc_fail_after(-1);
	s = ps_store_create(*sync);
	cr_assert_eq(ps_store_set(s, 0, 100, a), 0);
	for (k = 0;; k++) {
		struct seen_range w[] = { { 0, 100, a } };
		int ret;

		ps_test_alloc_fail_after(k);
		/* The split case: [0,100) covers [40,60). */
		ret = ps_store_set(s, 40, 60, b);
		ps_test_alloc_fail_after(-1);
		if (ret == 0)
			break;
		cr_assert_eq(ret, -ENOMEM);
		expect_ranges(s, w, 1);
		cr_assert_eq(ps_policy_refcount(a), 1 + 1);
		cr_assert_eq(ps_policy_refcount(b), 1);
	}
	cr_assert_gt(k, 0, "the set must allocate");
	{
		struct seen_range w[] = { { 0, 40, a }, { 40, 60, b }, { 60, 100, a } };

		expect_ranges(s, w, 3);
	}
	ps_test_alloc_fail_after(0);
	errno = 0;
	cr_assert_null(ps_store_create(*sync));
	cr_assert_eq(errno, ENOMEM);
	ps_test_alloc_fail_after(-1);
	ps_store_destroy(s);
	ps_test_alloc_restore();
	ps_policy_put(a);
	ps_policy_put(b);
}

Test(store, alloc_ops_validation)
{
	struct ps_alloc_ops bad = { NULL, NULL, NULL };

	cr_assert_eq(ps_set_alloc_ops(&bad), -EINVAL);
}
