// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The linearizability oracle (tests/common/linearizability.h, also run by
 * polstore-stress --check) for every variant, with
 * fewer threads than cores and more threads than cores.  First the checker
 * itself is shown to catch each kind of illegal result on hand-made
 * histories, so a silent oracle means something.
 *
 * POLSTORE_LIN_LOOKUPS=<n> sets the lookups per test (default 200000, scaled
 * by POLSTORE_TEST_SCALE); every test prints what it checked, e.g.
 *   POLSTORE_LIN_LOOKUPS=10000000 ./tests/test_linearizability --jobs=1
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "linearizability.h"
#include "testutil.h"

/* ---- the checker on hand-made histories ---- */

/* Two pages; version 1 sets page 0 in [10, 20], version 2 sets pages 0-1 in [30, 40]. */
static const struct ps_lin_write hist[] = {
	{ .version = 1, .first = 0, .last = 0, .removal = false, .begin = 10, .end = 20 },
	{ .version = 2, .first = 0, .last = 1, .removal = false, .begin = 30, .end = 40 },
	{ .version = 3, .first = 1, .last = 1, .removal = true, .begin = 50, .end = 60 },
};

/*
 * A lookup of @page in [@begin, @end] that returned @version, checked alone
 * against a history: @illegal when the checker must flag it.
 */
struct lookup_case {
	uint64_t begin, end;
	uint32_t page;
	uint64_t version;
	long illegal;
	const char *what;
};

/*
 * The cases of the array @cases whose verdict is @illegal, each checked
 * alone against the @nwrites writes @h on @npages pages.
 */
#define EXPECT_LOOKUPS(h, nwrites, npages, cases, illegal)                                         \
	expect_lookups((h), (nwrites), (npages), (cases), PS_ARRAY_SIZE(cases), (illegal))

static void expect_lookups(const struct ps_lin_write *h, long nwrites, int npages,
		const struct lookup_case *c, size_t n, long illegal)
{
	FILE *log = getenv("LIN_VERBOSE") ? stderr : NULL;
	size_t i;

	for (i = 0; i < n; i++) {
		struct ps_lin_lookup l = { c[i].begin, c[i].end, c[i].version, c[i].page, 0 };

		if (c[i].illegal != illegal)
			continue;
		cr_assert_eq(ps_lin_check(npages, NULL, h, nwrites, &l, 1, log), c[i].illegal,
				"lookup [%llu, %llu] page %u version %llu: %s",
				(unsigned long long)c[i].begin, (unsigned long long)c[i].end,
				c[i].page, (unsigned long long)c[i].version, c[i].what);
	}
}

/* Lookups on hist: legal results, then illegal ones. */
static const struct lookup_case cases[] = {
	{ 1, 5, 0, 0, 0, "empty before any write" },
	{ 15, 16, 0, 1, 0, "during the set" },
	{ 15, 16, 0, 0, 0, "during the set, still empty" },
	{ 21, 29, 0, 1, 0, "after it" },
	{ 25, 35, 0, 1, 0, "overlapping the next set: old" },
	{ 25, 35, 0, 2, 0, "overlapping the next set: new" },
	{ 45, 46, 1, 2, 0, "version 2 on page 1" },
	{ 55, 56, 1, 0, 0, "removal in progress: gone" },
	{ 55, 56, 1, 2, 0, "removal in progress: still there" },
	{ 61, 62, 1, 0, 0, "after the removal" },
	{ 41, 45, 0, 1, 1, "stale: version 2 ended before" },
	{ 21, 25, 0, 0, 1, "stale empty after version 1 ended" },
	{ 5, 9, 0, 1, 1, "from the future" },
	{ 21, 25, 1, 1, 1, "version 1 never covered page 1" },
	{ 61, 62, 1, 2, 1, "removed before the lookup began" },
	{ 45, 46, 1, 0, 1, "nothing, but version 2 covers the page" },
	{ 45, 46, 1, 7, 1, "never written" },
	{ 45, 46, 1, UINT64_MAX, 1, "not a versioned policy" },
	{ 45, 46, 2, 0, 1, "page out of range" },
};

Test(linearizability_checker, legal_results_pass)
{
	EXPECT_LOOKUPS(hist, 3, 2, cases, 0);
}

Test(linearizability_checker, illegal_results_fail)
{
	EXPECT_LOOKUPS(hist, 3, 2, cases, 1);
}

Test(linearizability_checker, initial_state_and_versions)
{
	struct ps_lin_initial init[2] = { { 99 }, { 0 } };
	struct ps_lin_lookup l[] = {
		{ 1, 5, 99, 0, 0 }, /* legal: initial */
		{ 21, 25, 99, 0, 0 }, /* stale: version 1 ended at 20 */
		{ 1, 5, 99, 1, 0 }, /* page 1 was empty */
	};
	struct ps_policy *p = ps_lin_encode(12345);

	cr_assert_eq(ps_lin_check(2, init, hist, 3, l, 1, NULL), 0);
	cr_assert_eq(ps_lin_check(2, init, hist, 3, l + 1, 1, NULL), 1);
	cr_assert_eq(ps_lin_check(2, init, hist, 3, l + 2, 1, NULL), 1);
	cr_assert_not_null(p);
	cr_assert_eq(ps_lin_decode(p), 12345u);
	cr_assert_eq(ps_lin_decode(NULL), 0u);
	ps_policy_put(p);
	p = ps_test_bind(200);
	cr_assert_eq(ps_lin_decode(p), UINT64_MAX);
	ps_policy_put(p);
}

/*
 * Batches and window reads.  Version 5 sets pages 0-2 in
 * [50, 60]; a batch sets pages 0-1 (version 10), then page 1 again
 * (version 11), in [100, 110]; version 20 sets pages 2-3 alone in
 * [200, 210]; version 30 sets page 4 in [300, 310], version 31 page 5 in
 * [320, 330].
 */
static const struct ps_lin_write bhist[] = {
	{ .version = 5, .first = 0, .last = 2, .begin = 50, .end = 60 },
	{ .version = 10, .first = 0, .last = 1, .begin = 100, .end = 110, .batch = 10, .nbatch = 2 },
	{ .version = 11, .first = 1, .last = 1, .begin = 100, .end = 110, .batch = 10, .nbatch = 2 },
	{ .version = 20, .first = 2, .last = 3, .begin = 200, .end = 210 },
	{ .version = 30, .first = 4, .last = 4, .begin = 300, .end = 310 },
	{ .version = 31, .first = 5, .last = 5, .begin = 320, .end = 330 },
};

static long wcheck(uint64_t begin, uint64_t end, uint32_t first, uint32_t last,
		const uint64_t *versions)
{
	struct ps_lin_window w = { begin, end, first, last, 0, versions, false };
	FILE *log = getenv("LIN_VERBOSE") ? stderr : NULL;

	return ps_lin_check_windows(6, NULL, bhist, 6, NULL, 0, &w, 1, log);
}

static const struct lookup_case batched[] = {
	{ 120, 121, 0, 10, 0, "the batch's op on page 0" },
	{ 120, 121, 1, 11, 0, "its last op on page 1" },
	{ 105, 106, 1, 5, 0, "during the batch, before it" },
	{ 105, 106, 1, 11, 0, "during the batch, after it" },
	{ 120, 121, 1, 10, 1, "op 10 on page 1, without op 11: part of a batch" },
	{ 105, 106, 1, 10, 1, "... also while the batch runs" },
	{ 120, 121, 1, 5, 1, "stale after the batch" },
};

Test(linearizability_checker, batches_all_or_nothing)
{
	EXPECT_LOOKUPS(bhist, 6, 6, batched, 0);
	EXPECT_LOOKUPS(bhist, 6, 6, batched, 1);
}

Test(linearizability_checker, windows_are_snapshots)
{
	cr_assert_eq(wcheck(120, 125, 0, 2, (uint64_t[]){ 10, 11, 5 }), 0, "after the batch");
	cr_assert_eq(wcheck(105, 106, 0, 1, (uint64_t[]){ 5, 5 }), 0, "before the batch");
	cr_assert_eq(wcheck(105, 106, 0, 1, (uint64_t[]){ 10, 11 }), 0, "after it");
	cr_assert_eq(wcheck(105, 106, 0, 1, (uint64_t[]){ 10, 5 }), 1, "one op seen, one missed");
	cr_assert_eq(wcheck(105, 106, 0, 1, (uint64_t[]){ 5, 11 }), 1, "the other way round");
	cr_assert_eq(wcheck(105, 106, 0, 1, (uint64_t[]){ 10, 10 }), 1, "an op the batch overwrote");
	/* One write across two pages, seen on one only. */
	cr_assert_eq(wcheck(205, 206, 2, 3, (uint64_t[]){ 20, 20 }), 0);
	cr_assert_eq(wcheck(205, 206, 2, 3, (uint64_t[]){ 5, 0 }), 0);
	cr_assert_eq(wcheck(205, 206, 2, 3, (uint64_t[]){ 5, 20 }), 1, "torn single write");
	cr_assert_eq(wcheck(205, 206, 2, 3, (uint64_t[]){ 20, 0 }), 1, "torn: nothing beside it");
	/* Version 31 seen: 30 ended before 31 began, so it must be seen too. */
	cr_assert_eq(wcheck(305, 335, 4, 5, (uint64_t[]){ 0, 0 }), 0);
	cr_assert_eq(wcheck(305, 335, 4, 5, (uint64_t[]){ 30, 31 }), 0);
	cr_assert_eq(wcheck(305, 335, 4, 5, (uint64_t[]){ 30, 0 }), 0);
	cr_assert_eq(wcheck(305, 335, 4, 5, (uint64_t[]){ 0, 31 }), 1, "31 without 30");
	/*
	 * A ps_store_next() read from page 0: a hole, then the range found.
	 * Version 20 seen on page 3, so the batch (ended before it began) is
	 * on pages 0-1 and version 20 on page 2: a hole there comes from an
	 * older version than the range (a read that began before version 5
	 * makes no difference).
	 */
	cr_assert_eq(wcheck(100, 250, 0, 3, (uint64_t[]){ 10, 11, 20, 20 }), 0,
			"next(): one version");
	cr_assert_eq(wcheck(40, 250, 0, 3, (uint64_t[]){ 0, 0, 0, 20 }), 1,
			"next(): the hole older than the range after it");
	cr_assert_eq(wcheck(40, 250, 0, 4, (uint64_t[]){ 0, 0, 0, 0, 30 }), 1,
			"next(): a hole, then a range set after the hole was filled");
	/* Results a lookup could not give either. */
	cr_assert_eq(wcheck(10, 20, 0, 1, (uint64_t[]){ 5, 0 }), 1, "from the future");
	cr_assert_eq(wcheck(10, 20, 5, 6, (uint64_t[]){ 0, 0 }), 1, "outside the pages");
}

/* ---- the stores ---- */

struct lin_param {
	enum ps_sync sync;
	int readers, writers;
};

/* Two configurations per variant, for this machine's CPU count. */
static struct lin_param *lin_params(void)
{
	static struct lin_param params[2 * PS_SYNC_COUNT];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int s;

	if (ncpu < 2)
		ncpu = 2;
	for (s = 0; s < PS_SYNC_COUNT; s++) {
		/* Fewer ranks than cores when there are more than 2; 2 otherwise. */
		params[2 * s] = (struct lin_param){ (enum ps_sync)s, ncpu > 2 ? (int)ncpu - 2 : 1, 1 };
		/* More ranks than cores: 2 writers and 2 readers per core. */
		params[2 * s + 1] = (struct lin_param){ (enum ps_sync)s, 2 * (int)ncpu, 2 };
	}
	return params;
}

PS_PARAM_TEST(struct lin_param, p, lin_params(), 2 * PS_SYNC_COUNT, linearizability, store,
		.timeout = 1200)
{
	const char *env = getenv("POLSTORE_LIN_LOOKUPS");
	struct ps_lin_config cfg = {
		.sync = p->sync,
		.readers = p->readers,
		.writers = p->writers,
		.lookups = env && atol(env) > 0 ? atol(env) : ps_test_iters(200000),
		.seed = 0x1234 + (uint64_t)p->sync * 77 + (uint64_t)p->readers,
		/*
		 * valgrind: DRD's cost per write grows with the history, and an
		 * RCU write (records, the reclaim thread's grace periods) costs
		 * it several times a locked one.
		 */
		.round_writes = ps_test_scale() < 0.5 ? (ps_sync_caps(p->sync) & PS_CAP_RCU ? 1000 : 4000) : 0,
		/* A loaded machine may run a whole round before a writer starts. */
		.min_writes = 1,
	};
	struct ps_lin_result res;
	int ret = ps_lin_run(&cfg, &res);

	fprintf(stderr,
			"linearizability: %-8s readers=%d writers=%d: %ld reads checked (%ld "
			"windows), %ld writes (%ld removals, %ld batches), %ld rounds, %ld "
			"violations, %ld leaked\n",
			ps_sync_name(p->sync), p->readers, p->writers, res.lookups_checked,
			res.windows_checked, res.writes, res.removals, res.batches, res.rounds,
			res.violations, res.live_allocs);
	cr_assert_eq(res.violations, 0, "%s: %ld illegal lookups (history above)",
			ps_sync_name(p->sync), res.violations);
	cr_assert_eq(res.live_allocs, 0, "%s: %ld allocations leaked", ps_sync_name(p->sync),
			res.live_allocs);
	cr_assert_eq(ret, 0);
	cr_assert_geq(res.lookups_checked, cfg.lookups);
	cr_assert_gt(res.writes, 0);
	cr_assert_gt(res.windows_checked, 0);
}

/*
 * min_writes: an RCU set waits for a grace period, so a round of lookups may
 * finish with few writes; more rounds run until the writers reached it.
 */
Test(linearizability, min_writes_adds_rounds, .timeout = 600)
{
	struct ps_lin_config cfg = {
		.sync = PS_SYNC_RCU,
		.readers = 1,
		.writers = 1,
		.lookups = 1000,
		.min_writes = ps_test_iters(3000),
		.seed = 99,
	};
	struct ps_lin_result res;

	cr_assert_eq(ps_lin_run(&cfg, &res), 0);
	cr_assert_eq(res.violations, 0);
	cr_assert_geq(res.writes, cfg.min_writes, "%ld writes in %ld rounds", res.writes,
			res.rounds);
	cr_assert_geq(res.lookups_checked, cfg.lookups);
}
