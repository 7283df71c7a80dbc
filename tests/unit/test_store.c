// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The store's rules, written once and run for every variant: splits, trims,
 * removal, DEFAULT, EINVAL, uint64_t edges, references; a randomized
 * differential test against an array model; allocation failures.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

struct seen_range {
	uint64_t start, end;
	struct ps_policy *pol;
};

struct walk {
	struct seen_range r[512];
	int n;
};

static int collect(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walk *w = arg;

	cr_assert_lt(w->n, 512);
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

/* expect_ranges() of a list written in place: EXPECT_RANGES(s, { 0, 40, a }, { 40, 60, b }). */
#define EXPECT_RANGES(s, ...)                                                                      \
	expect_ranges((s), (const struct seen_range[]){ __VA_ARGS__ },                             \
			(int)(sizeof((const struct seen_range[]){ __VA_ARGS__ }) /                 \
					sizeof(struct seen_range)))

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
	EXPECT_NAMES(ps_sync_name, ps_sync_from_name, PS_SYNC_COUNT, PS_SYNC_RCU_QSBR, "rcu-qsbr",
			"nope");
	errno = 0;
	cr_assert_null(ps_store_create((enum ps_sync)PS_SYNC_COUNT));
	cr_assert_eq(errno, EINVAL);
}

/* What ps_sync_caps() says a variant is, and what its store does. */
VARIANT_TEST(store, caps)
{
	static const struct {
		const char *name;
		unsigned caps;
	} want[] = {
		{ "spin", PS_CAP_LOCK },
		{ "rwlock", PS_CAP_LOCK },
		{ "seqlock", PS_CAP_LOCK | PS_CAP_RCU },
		{ "rcu", PS_CAP_RCU },
		{ "rcu-qsbr", PS_CAP_RCU | PS_CAP_QSBR },
	};
	unsigned caps = ps_sync_caps(*sync);
	struct ps_lock_stat_row rows[2];
	struct ps_policy *a;
	struct ps_store *s;
	size_t i;

	for (i = 0; i < PS_ARRAY_SIZE(want); i++)
		if (!strcmp(want[i].name, ps_sync_name(*sync)))
			cr_assert_eq(caps, want[i].caps, "%s: caps %#x", want[i].name, caps);
	cr_assert(!(caps & PS_CAP_QSBR) || (caps & PS_CAP_RCU));
	if (!ps_lock_stat_enabled())
		return;
	/* The lock a set takes is the one lock_stat shows. */
	s = ps_store_create(*sync);
	a = ps_test_bind(1);
	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 0, 10, a), 0);
	cr_assert_eq(ps_store_lock_stat_read(s, rows), 0);
	cr_assert_eq(rows[PS_LOCK_STAT_WRITE].acquisitions != 0, (caps & PS_CAP_LOCK) != 0);
	ps_store_destroy(s);
	ps_policy_put(a);
}

VARIANT_TEST(store, einval_leaves_state)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);

	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	cr_assert_eq(ps_store_set(NULL, 0, 1, a), -EINVAL);
	cr_assert_eq(ps_store_set(s, 5, 5, a), -EINVAL);
	cr_assert_eq(ps_store_set(s, 30, 12, a), -EINVAL);
	cr_assert_eq(ps_store_set(s, UINT64_MAX, UINT64_MAX, a), -EINVAL);
	EXPECT_RANGES(s, { 10, 20, a });
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
	EXPECT_RANGES(s, { 0, 40, a }, { 40, 60, b }, { 60, 100, a });
	expect_at(s, 39, a);
	expect_at(s, 40, b);
	expect_at(s, 59, b);
	expect_at(s, 60, a);
	expect_at(s, 100, NULL);
	/* Overlapping both edges' neighbours: trim left and right, remove the inside. */
	cr_assert_eq(ps_store_set(s, 30, 70, c), 0);
	EXPECT_RANGES(s, { 0, 30, a }, { 30, 70, c }, { 70, 100, a });
	/* NULL removes; the hole is empty. */
	cr_assert_eq(ps_store_set(s, 20, 80, NULL), 0);
	EXPECT_RANGES(s, { 0, 20, a }, { 80, 100, a });
	expect_at(s, 50, NULL);
	/* Exactly covering an existing range replaces it. */
	cr_assert_eq(ps_store_set(s, 80, 100, b), 0);
	EXPECT_RANGES(s, { 0, 20, a }, { 80, 100, b });
	/* Equal neighbours are not merged. */
	cr_assert_eq(ps_store_set(s, 20, 80, a), 0);
	EXPECT_RANGES(s, { 0, 20, a }, { 20, 80, a }, { 80, 100, b });
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

	cr_assert_eq(ps_store_set(s, 0, 100, a), 0);
	cr_assert_eq(ps_store_set(s, 10, 90, d), 0);
	EXPECT_RANGES(s, { 0, 10, a }, { 90, 100, a });
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
	EXPECT_RANGES(s, { 0, 1, b }, { 1, UINT64_MAX - 1, a }, { UINT64_MAX - 1, UINT64_MAX, b });
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
 * SEQLOCK frees removed ranges in batches after a grace period (on
 * polstore's reclaim thread); ps_store_synchronize() frees the partial batch
 * and waits for the batches in flight, after which only ranges in the store
 * hold references.
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
 * Differential test against the model of testutil.h (shared_policy_replace()
 * on a sorted array): after every set the store holds exactly the model's
 * ranges, every point of [0, M + 2) looks up the model's policy and, once
 * ranges retired by earlier sets are freed, every range holds one reference.
 */
#define M 104 /* sets start below M - 8 and end by M */
#define NPOL 6

/* The model's ranges, references (once retired ranges are freed) and points [0, M + 2). */
static void model_compare(struct ps_store *s, const struct ps_model *m, struct ps_policy **pols,
		long step)
{
	char why[160];

	cr_assert(ps_model_matches_refs(s, m, pols, NPOL, M + 2, why, sizeof(why)),
			"%s step %ld: %s", ps_sync_name(ps_store_sync_kind(s)), step, why);
}

/* NPOL BIND policies and a DEFAULT one (a removal) at [NPOL]. */
static void diff_policies(struct ps_policy **pols)
{
	int p;

	for (p = 0; p < NPOL; p++)
		pols[p] = ps_test_bind(p);
	pols[NPOL] = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
}

/* Every store is gone: each policy holds the test's reference only. */
static void diff_policies_put(struct ps_policy **pols)
{
	int p;

	for (p = 0; p <= NPOL; p++) {
		cr_assert_eq(ps_policy_refcount(pols[p]), 1);
		ps_policy_put(pols[p]);
	}
}

/* A random set inside [base, base + M): a policy of @pols, DEFAULT or NULL. */
static struct ps_set_op random_op(uint64_t *seed, struct ps_policy **pols, uint64_t base)
{
	uint64_t a = ps_test_rand(seed) % (M - 8), b = ps_test_rand(seed) % (M - 8);
	uint64_t pick = ps_test_rand(seed) % (NPOL + 3);

	if (a == b)
		b = a + 1 + ps_test_rand(seed) % 3;
	return (struct ps_set_op){ base + (a < b ? a : b), base + (a < b ? b : a),
		pick < NPOL + 1 ? pols[pick] : NULL };
}

VARIANT_TEST(store, differential_random)
{
	struct ps_policy *pols[NPOL + 1];
	struct ps_model m;
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)*sync;
	long rounds = ps_test_iters(60), ops = 80, step = 0, r, k;

	diff_policies(pols);
	for (r = 0; r < rounds; r++) {
		struct ps_store *s = ps_store_create(*sync);

		ps_model_init(&m);
		for (k = 0; k < ops; k++, step++) {
			struct ps_set_op op = random_op(&seed, pols, 0);

			cr_assert_eq(ps_store_set(s, op.start, op.end, op.pol), 0);
			cr_assert_eq(ps_model_set(&m, op.start, op.end, op.pol), 0);
			model_compare(s, &m, pols, step);
		}
		ps_store_destroy(s);
	}
	diff_policies_put(pols);
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
		int ret;

		ps_test_alloc_fail_after(k);
		/* The split case: [0,100) covers [40,60). */
		ret = ps_store_set(s, 40, 60, b);
		ps_test_alloc_fail_after(-1);
		if (ret == 0)
			break;
		cr_assert_eq(ret, -ENOMEM);
		EXPECT_RANGES(s, { 0, 100, a });
		cr_assert_eq(ps_policy_refcount(a), 1 + 1);
		cr_assert_eq(ps_policy_refcount(b), 1);
	}
	cr_assert_gt(k, 0, "the set must allocate");
	EXPECT_RANGES(s, { 0, 40, a }, { 40, 60, b }, { 60, 100, a });
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
	struct ps_alloc_ops bad = {.alloc = NULL, .free = NULL};

	cr_assert_eq(ps_set_alloc_ops(&bad), -EINVAL);
}

/* ---- windows, walks by position, batches ---- */

/* Four ranges, both uint64_t edges used: [0, 10) a, [20, 30) b, [30, 40) a, [2^64 - 2, 2^64 - 1) b. */
static struct ps_store *edge_store(enum ps_sync sync, struct ps_policy *a, struct ps_policy *b)
{
	struct ps_store *s = ps_store_create(sync);

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 0, 10, a), 0);
	cr_assert_eq(ps_store_set(s, 20, 30, b), 0);
	cr_assert_eq(ps_store_set(s, 30, 40, a), 0);
	cr_assert_eq(ps_store_set(s, UINT64_MAX - 1, UINT64_MAX, b), 0);
	return s;
}

static struct walk window(struct ps_store *s, uint64_t start, uint64_t end)
{
	struct walk w = { .n = 0 };

	cr_assert_eq(ps_store_foreach_range(s, start, end, collect, &w), 0, "window [%llu, %llu)",
			(unsigned long long)start, (unsigned long long)end);
	return w;
}

static void expect_window(struct ps_store *s, uint64_t start, uint64_t end,
		const struct seen_range *want, int n)
{
	struct walk w = window(s, start, end);
	int i;

	cr_assert_eq(w.n, n, "%s: window [%llu, %llu): %d ranges, want %d",
			ps_sync_name(ps_store_sync_kind(s)), (unsigned long long)start,
			(unsigned long long)end, w.n, n);
	for (i = 0; i < n; i++)
		cr_assert(w.r[i].start == want[i].start && w.r[i].end == want[i].end &&
						w.r[i].pol == want[i].pol,
				"window [%llu, %llu): range %d is [%llu, %llu)",
				(unsigned long long)start, (unsigned long long)end, i,
				(unsigned long long)w.r[i].start, (unsigned long long)w.r[i].end);
}

static int stop_after_two(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	int *calls = arg;

	(void)start;
	(void)end;
	(void)pol;
	return ++*calls == 2 ? 42 : 0;
}

VARIANT_TEST(store, foreach_range_windows)
{
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);
	struct ps_store *s = edge_store(*sync, a, b);
	struct seen_range r0 = { 0, 10, a }, r1 = { 20, 30, b }, r2 = { 30, 40, a },
			  r3 = { UINT64_MAX - 1, UINT64_MAX, b };
	int calls = 0;

	/* Not clipped: each range as the store holds it. */
	expect_window(s, 0, 1, &r0, 1);
	expect_window(s, 9, 10, &r0, 1);
	expect_window(s, 5, 25, (struct seen_range[]){ r0, r1 }, 2);
	expect_window(s, 25, 31, (struct seen_range[]){ r1, r2 }, 2);
	expect_window(s, 0, UINT64_MAX, (struct seen_range[]){ r0, r1, r2, r3 }, 4);
	expect_window(s, 9, UINT64_MAX - 1, (struct seen_range[]){ r0, r1, r2 }, 3);
	/* Windows that meet ranges only at their edges, and holes: nothing. */
	expect_window(s, 10, 20, NULL, 0);
	expect_window(s, 40, UINT64_MAX - 1, NULL, 0);
	expect_window(s, 15, 16, NULL, 0);
	/* At the top of the index space. */
	expect_window(s, UINT64_MAX - 1, UINT64_MAX, &r3, 1);
	expect_window(s, UINT64_MAX - 2, UINT64_MAX, &r3, 1);
	/* A callback's non-zero return stops the walk and is returned. */
	cr_assert_eq(ps_store_foreach_range(s, 0, UINT64_MAX, stop_after_two, &calls), 42);
	cr_assert_eq(calls, 2);
	cr_assert_eq(ps_store_foreach_range(s, 5, 5, collect, NULL), -EINVAL);
	cr_assert_eq(ps_store_foreach_range(s, 6, 5, collect, NULL), -EINVAL);
	cr_assert_eq(ps_store_foreach_range(s, 0, 1, NULL, NULL), -EINVAL);
	cr_assert_eq(ps_store_foreach_range(NULL, 0, 1, collect, NULL), -EINVAL);
	/* An empty store. */
	cr_assert_eq(ps_store_set(s, 0, UINT64_MAX, NULL), 0);
	expect_window(s, 0, UINT64_MAX, NULL, 0);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
}

VARIANT_TEST(store, next_walks)
{
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2), *got = NULL;
	struct ps_store *s = edge_store(*sync, a, b);
	const struct ps_policy *borrowed = NULL;
	struct seen_range want[] = { { 0, 10, a }, { 20, 30, b }, { 30, 40, a },
		{ UINT64_MAX - 1, UINT64_MAX, b } };
	uint64_t idx, start = 7, end = 7;
	int i = 0;

	/* The loop the API is made for: idx = end until -ENOENT. */
	for (idx = 0; ps_store_next(s, idx, &start, &end, &got) == 0; idx = end, i++) {
		cr_assert_lt(i, 4);
		cr_assert(start == want[i].start && end == want[i].end && got == want[i].pol,
				"%s: step %d: [%llu, %llu)", ps_sync_name(*sync), i,
				(unsigned long long)start, (unsigned long long)end);
		cr_assert_eq(ps_policy_refcount(got), 1 + 2 + 1, "a new reference");
		ps_policy_put(got);
	}
	cr_assert_eq(i, 4);
	/* Inside a range: that range, not clipped; in a hole: the next one. */
	cr_assert_eq(ps_store_next(s, 25, &start, &end, &got), 0);
	cr_assert(start == 20 && end == 30 && got == b);
	ps_policy_put(got);
	cr_assert_eq(ps_store_next(s, 10, &start, &end, &got), 0);
	cr_assert(start == 20 && end == 30 && got == b);
	ps_policy_put(got);
	cr_assert_eq(ps_store_next(s, 40, &start, &end, &got), 0);
	cr_assert(start == UINT64_MAX - 1 && got == b);
	ps_policy_put(got);
	/* Past the last range: -ENOENT, nothing written. */
	start = end = 7;
	got = NULL;
	cr_assert_eq(ps_store_next(s, UINT64_MAX, &start, &end, &got), -ENOENT);
	cr_assert(start == 7 && end == 7 && got == NULL);
	/* The borrowed form, in a section, takes no reference. */
	ps_store_read_lock(s);
	for (idx = 0, i = 0; ps_store_next_borrow(s, idx, &start, &end, &borrowed) == 0;
			idx = end, i++)
		cr_assert(i < 4 && start == want[i].start && end == want[i].end &&
				  borrowed == want[i].pol);
	cr_assert_eq(ps_store_next_borrow(s, UINT64_MAX, &start, &end, &borrowed), -ENOENT);
	ps_store_read_unlock(s);
	cr_assert_eq(i, 4);
	/* The counted form inside a section, where its comment allows it (not SPIN, RWLOCK). */
	if (*sync != PS_SYNC_SPIN && *sync != PS_SYNC_RWLOCK) {
		ps_store_read_lock(s);
		cr_assert_eq(ps_store_next(s, 15, &start, &end, &got), 0);
		cr_assert(start == 20 && got == b);
		ps_store_read_unlock(s);
		ps_policy_put(got);
	}
	cr_assert_eq(ps_policy_refcount(a), 1 + 2);
	cr_assert_eq(ps_policy_refcount(b), 1 + 2);
	cr_assert_eq(ps_store_next(s, 0, NULL, &end, &got), -EINVAL);
	cr_assert_eq(ps_store_next(s, 0, &start, NULL, &got), -EINVAL);
	cr_assert_eq(ps_store_next(s, 0, &start, &end, NULL), -EINVAL);
	cr_assert_eq(ps_store_next(NULL, 0, &start, &end, &got), -EINVAL);
	cr_assert_eq(ps_store_next_borrow(NULL, 0, &start, &end, &borrowed), -EINVAL);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
}

VARIANT_TEST(store, set_many_in_order)
{
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2), *c = ps_test_bind(3);
	struct ps_store *s = ps_store_create(*sync);
	/* Overlapping ops: each trims, splits or removes what the ones before it set. */
	struct ps_set_op ops[] = {
		{ 0, 100, a },	/* [0, 100) a */
		{ 40, 60, b },	/* splits it */
		{ 50, 70, c },	/* trims b, trims the tail of a */
		{ 90, 95, NULL }, /* a hole in the tail */
		{ 0, 10, a },	/* replaces the head's start */
	};
	struct seen_range want[] = { { 0, 10, a }, { 10, 40, a }, { 40, 50, b }, { 50, 70, c },
		{ 70, 90, a }, { 95, 100, a } };
	struct ps_set_op bad[] = { { 200, 300, a }, { 5, 5, b }, { 300, 400, c } };

	cr_assert_eq(ps_store_set_many(s, ops, 5), 0);
	expect_ranges(s, want, 6);
	/* An invalid op anywhere: -EINVAL and nothing applied, not even the ops before it. */
	cr_assert_eq(ps_store_set_many(s, bad, 3), -EINVAL);
	bad[1].start = 6;
	cr_assert_eq(ps_store_set_many(s, bad, 3), -EINVAL);
	expect_ranges(s, want, 6);
	/* n = 0 is a no-op, ops may then be NULL. */
	cr_assert_eq(ps_store_set_many(s, NULL, 0), 0);
	cr_assert_eq(ps_store_set_many(s, ops, 0), 0);
	expect_ranges(s, want, 6);
	cr_assert_eq(ps_store_set_many(s, NULL, 1), -EINVAL);
	cr_assert_eq(ps_store_set_many(NULL, ops, 1), -EINVAL);
	/* A batch that removes everything, up to the top of the index space. */
	{
		struct ps_set_op all[] = { { UINT64_MAX - 1, UINT64_MAX, b }, { 0, UINT64_MAX, NULL } };

		cr_assert_eq(ps_store_set_many(s, all, 2), 0);
		expect_ranges(s, NULL, 0);
	}
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_policy_refcount(a), 1);
	cr_assert_eq(ps_policy_refcount(b), 1);
	cr_assert_eq(ps_policy_refcount(c), 1);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
	ps_policy_put(c);
}

/*
 * The differential test above, for the three calls: the same model, over
 * [base, base + M) with base 0 or 2^64 - 1 - M (so windows meet both ends
 * of the index space), sets applied alone or in batches of 1..6 ops that
 * may overlap, and after every step random windows (empty ones, ones at
 * base and at base + M, inside one range, across many, past M) and
 * ps_store_next() walks (counted and borrowed) checked against the runs.
 */
static void check_window(struct ps_store *s, const struct ps_model_range *runs, int nruns, uint64_t a,
		uint64_t b, long step)
{
	struct walk w = window(s, a, b);
	int i, k = 0;

	for (i = 0; i < nruns; i++) {
		if (runs[i].end <= a || runs[i].start >= b)
			continue;
		cr_assert(k < w.n && w.r[k].start == runs[i].start && w.r[k].end == runs[i].end &&
						w.r[k].pol == runs[i].pol,
				"%s step %ld: window [%llu, %llu): range %d differs from the model",
				ps_sync_name(ps_store_sync_kind(s)), step, (unsigned long long)a,
				(unsigned long long)b, k);
		k++;
	}
	cr_assert_eq(w.n, k, "%s step %ld: window [%llu, %llu): %d ranges, model %d",
			ps_sync_name(ps_store_sync_kind(s)), step, (unsigned long long)a,
			(unsigned long long)b, w.n, k);
}

static void check_next_walk(struct ps_store *s, const struct ps_model_range *runs, int nruns, uint64_t idx,
		bool borrow, long step)
{
	int i = 0, ret;

	while (i < nruns && runs[i].end <= idx)
		i++;
	if (borrow)
		ps_store_read_lock(s);
	for (;; i++) {
		uint64_t start = 0, end = 0;
		struct ps_policy *pol = NULL;

		if (borrow)
			ret = ps_store_next_borrow(s, idx, &start, &end, (const struct ps_policy **)&pol);
		else
			ret = ps_store_next(s, idx, &start, &end, &pol);
		if (i == nruns) {
			cr_assert_eq(ret, -ENOENT, "step %ld: next(%llu) after the last range",
					step, (unsigned long long)idx);
			break;
		}
		cr_assert_eq(ret, 0, "step %ld: next(%llu): %d", step, (unsigned long long)idx, ret);
		cr_assert(start == runs[i].start && end == runs[i].end && pol == runs[i].pol,
				"%s step %ld: next(%llu) is [%llu, %llu), model [%llu, %llu)",
				ps_sync_name(ps_store_sync_kind(s)), step, (unsigned long long)idx,
				(unsigned long long)start, (unsigned long long)end,
				(unsigned long long)runs[i].start, (unsigned long long)runs[i].end);
		if (!borrow)
			ps_policy_put(pol);
		idx = end;
	}
	if (borrow)
		ps_store_read_unlock(s);
}

static void model_compare_windows(struct ps_store *s, const struct ps_model *m, uint64_t base,
		uint64_t *seed, long step)
{
	const struct ps_model_range *runs = m->r;
	int n = m->n, k;
	uint64_t top = base ? UINT64_MAX : M + 40; /* windows past the model's points */
	const char *why = NULL;

	cr_assert_eq(ps_store_check(s, &why), 0, "step %ld: %s", step, why);
	/* Everything, the first and the last point, the edges of the index space. */
	check_window(s, runs, n, base, base + M, step);
	check_window(s, runs, n, base, base + 1, step);
	check_window(s, runs, n, base + M - 1, base + M, step);
	check_window(s, runs, n, 0, UINT64_MAX, step);
	check_window(s, runs, n, base ? 0 : M, UINT64_MAX, step);
	for (k = 0; k < 12; k++) {
		uint64_t a = ps_test_rand(seed) % (top - base), b;

		switch (k % 4) {
		case 0: /* inside one range, when there is one */
			if (n) {
				const struct ps_model_range *r = &runs[ps_test_rand(seed) % (uint64_t)n];

				a = r->start - base + ps_test_rand(seed) % (r->end - r->start);
				b = a + 1 + ps_test_rand(seed) % (r->end - base - a);
				break;
			}
			/* fall through */
		case 1: /* short: often in a hole */
			b = a + 1 + ps_test_rand(seed) % 3;
			break;
		default: /* across many */
			b = a + 1 + ps_test_rand(seed) % (top - base - a);
			break;
		}
		if (b > top - base)
			b = top - base;
		check_window(s, runs, n, base + a, base + b, step);
	}
	check_next_walk(s, runs, n, base, false, step);
	check_next_walk(s, runs, n, base + ps_test_rand(seed) % M, false, step);
	check_next_walk(s, runs, n, base + ps_test_rand(seed) % M, true, step);
	check_next_walk(s, runs, n, 0, true, step);
}

VARIANT_TEST(store, differential_windows_and_batches)
{
	struct ps_policy *pols[NPOL + 1];
	struct ps_model m;
	uint64_t seed = 0x5eed0016ULL ^ (uint64_t)*sync;
	long rounds = ps_test_iters(40), ops = 60, step = 0, r, k, batches = 0;

	diff_policies(pols);
	for (r = 0; r < rounds; r++) {
		struct ps_store *s = ps_store_create(*sync);
		uint64_t base = r & 1 ? UINT64_MAX - M : 0;

		ps_model_init(&m);
		for (k = 0; k < ops; k++, step++) {
			struct ps_set_op batch[6];
			size_t n = ps_test_rand(&seed) % 3 ? 1 + ps_test_rand(&seed) % 6 : 1;
			size_t i;

			for (i = 0; i < n; i++)
				batch[i] = random_op(&seed, pols, base);
			if (n == 1 && ps_test_rand(&seed) % 2) {
				cr_assert_eq(ps_store_set(s, batch[0].start, batch[0].end, batch[0].pol),
						0);
			} else {
				cr_assert_eq(ps_store_set_many(s, batch, n), 0);
				batches++;
			}
			for (i = 0; i < n; i++)
				cr_assert_eq(ps_model_set(&m, batch[i].start, batch[i].end, batch[i].pol),
						0);
			model_compare_windows(s, &m, base, &seed, step);
		}
		model_compare(s, &m, pols, step);
		ps_store_destroy(s);
	}
	diff_policies_put(pols);
	cr_assert_gt(batches, 0);
}

/*
 * Batches built to take many spares, on a large tree: ops that add ranges
 * later ops of the same batch erase, splits of splits, a removal of
 * everything the batch built, windows that repeat.  Every variant takes
 * the spares of a batch before it changes the tree (at most
 * PSI_RANGETREE_SET_MAX_NEW an op); too few abort ("ran out of
 * preallocated ranges").  A twin
 * store gets the same ops as single sets; the region they touched must be
 * the same in both.
 */
VARIANT_TEST(store, set_many_worst_cases)
{
	enum { R = 12000, W = 8 }; /* R ranges of W pages: 2n + overlaps stay below the cap */
	struct ps_policy *pols[4];
	struct ps_store *s = ps_store_create(*sync), *twin = ps_store_create(*sync);
	struct ps_set_op *build = calloc(R, sizeof(*build));
	uint64_t seed = 0xC0FFEE ^ (uint64_t)*sync;
	long b, batches = ps_test_iters(150);
	int p;

	cr_assert(s && twin && build);
	for (p = 0; p < 4; p++)
		pols[p] = ps_test_bind(p);
	/* Built by one batch each (one invariant check, not R). */
	for (b = 0; b < R; b++)
		build[b] = (struct ps_set_op){ (uint64_t)b * W, (uint64_t)b * W + W, pols[b % 4] };
	cr_assert_eq(ps_store_set_many(s, build, R), 0);
	cr_assert_eq(ps_store_set_many(twin, build, R), 0);
	cr_assert_eq(ps_store_count(s), (size_t)R);
	for (b = 0; b < batches; b++) {
		struct ps_set_op ops[16];
		uint64_t span = 1 + ps_test_rand(&seed) % 300;
		uint64_t lo = W + ps_test_rand(&seed) % ((R - 50) * W);
		size_t n = 2 + ps_test_rand(&seed) % 15, i;
		struct walk x = { .n = 0 }, y = { .n = 0 };

		for (i = 0; i + 1 < n; i++) {
			/* Small ranges inside [lo, lo + span): splits, and splits of what the batch set. */
			uint64_t a = lo + ps_test_rand(&seed) % span, len = 1 + ps_test_rand(&seed) % 3;

			ops[i] = (struct ps_set_op){ a, a + len, pols[ps_test_rand(&seed) % 4] };
		}
		/* The last op covers the lot: removes it, or sets it whole, or punches a hole. */
		switch (b % 3) {
		case 0:
			ops[n - 1] = (struct ps_set_op){ lo, lo + span + 3, NULL };
			break;
		case 1:
			ops[n - 1] = (struct ps_set_op){ lo, lo + span + 3, pols[b % 4] };
			break;
		default:
			ops[n - 1] = (struct ps_set_op){ lo + span / 2, lo + span / 2 + 1, NULL };
			break;
		}
		cr_assert_eq(ps_store_set_many(s, ops, n), 0);
		for (i = 0; i < n; i++)
			cr_assert_eq(ps_store_set(twin, ops[i].start, ops[i].end, ops[i].pol), 0);
		cr_assert_eq(ps_store_foreach_range(s, lo - W, lo + span + 2 * W, collect, &x), 0);
		cr_assert_eq(ps_store_foreach_range(twin, lo - W, lo + span + 2 * W, collect, &y), 0);
		cr_assert_eq(x.n, y.n, "batch %ld: %d ranges, %d with single sets", b, x.n, y.n);
		cr_assert_eq(memcmp(x.r, y.r, (size_t)x.n * sizeof(x.r[0])), 0,
				"batch %ld differs from the same sets one by one", b);
		cr_assert_eq(ps_store_count(s), ps_store_count(twin));
	}
	/* And the whole tree in one batch: every range erased. */
	{
		struct ps_set_op all[] = { { 5, (R - 5) * W, pols[0] }, { 0, R * W, NULL } };

		cr_assert_eq(ps_store_set_many(s, all, 2), 0);
		cr_assert_eq(ps_store_count(s), 0u);
	}
	cr_assert_eq(ps_store_synchronize(s), 0);
	ps_store_destroy(s);
	ps_store_destroy(twin);
	free(build);
	for (p = 0; p < 4; p++) {
		cr_assert_eq(ps_policy_refcount(pols[p]), 1);
		ps_policy_put(pols[p]);
	}
}
