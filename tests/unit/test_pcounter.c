// SPDX-License-Identifier: LGPL-2.1-or-later
/* ps_pcounter and ps_commit: batch policy, error bound under concurrency, folds, modes. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

/* The formula as the issue states it, in 128-bit arithmetic so it cannot itself overflow. */
static int64_t ref_batch(uint64_t total, int n, bool strict)
{
	unsigned __int128 sized = (unsigned __int128)(total / (uint64_t)n / (strict ? 256 : 4));
	int64_t floor = 2 * (int64_t)n > 32 ? 2 * (int64_t)n : 32;

	if (sized > INT_MAX)
		sized = INT_MAX;
	return (int64_t)sized > floor ? (int64_t)sized : floor;
}

Test(pcounter, batch_formula)
{
	static const uint64_t totals[] = { 0, 1, 255, 8192, 1 << 20, (uint64_t)1 << 32,
		(uint64_t)1 << 40, (uint64_t)1 << 50, UINT64_MAX };
	static const int cpus[] = { 1, 2, 4, 16, 64, 144, 1024, 100000 };
	size_t t, c;
	int s;

	for (t = 0; t < sizeof(totals) / sizeof(totals[0]); t++)
		for (c = 0; c < sizeof(cpus) / sizeof(cpus[0]); c++)
			for (s = 0; s < 2; s++)
				cr_expect_eq(ps_pcounter_compute_batch(totals[t], cpus[c], s),
						ref_batch(totals[t], cpus[c], s),
						"total %llu cpus %d strict %d",
						(unsigned long long)totals[t], cpus[c], s);
	/* Spot values: 16 GiB of 4 KiB pages on 8 CPUs. */
	cr_expect_eq(ps_pcounter_compute_batch(4194304, 8, true), 2048);
	cr_expect_eq(ps_pcounter_compute_batch(4194304, 8, false), 131072);
	cr_expect_eq(ps_pcounter_compute_batch(1000, 8, true), 32);
	cr_expect_eq(ps_pcounter_compute_batch(1000, 100, false), 200);
	cr_expect_eq(ps_pcounter_compute_batch(UINT64_MAX, 1, false), INT_MAX);
	cr_expect_eq(ps_pcounter_compute_batch(100, 0, false), -EINVAL);
	cr_expect_eq(ps_pcounter_compute_batch(100, -3, true), -EINVAL);
}

Test(pcounter, error_bound_and_args)
{
	struct ps_pcounter *pc;

	cr_expect_eq(ps_pcounter_error_bound(32, 4), 128);
	cr_expect_eq(ps_pcounter_error_bound(32, 1000), 32 * PS_PCOUNTER_SLOTS);
	cr_expect_eq(ps_pcounter_error_bound(0, 4), -EINVAL);
	cr_expect_eq(ps_pcounter_error_bound(1, -1), -EINVAL);
	errno = 0;
	cr_expect_null(ps_pcounter_create(0, 0));
	cr_expect_eq(errno, EINVAL);
	pc = ps_pcounter_create(7, 4);
	cr_assert_not_null(pc);
	cr_expect_eq(ps_pcounter_add(NULL, 1), -EINVAL);
	cr_expect_eq(ps_pcounter_set_batch(pc, 0), -EINVAL);
	cr_expect_eq(ps_pcounter_set_batch(NULL, 3), -EINVAL);
	cr_expect_eq(ps_pcounter_batch(pc), 4);
	cr_expect_eq(ps_pcounter_fold(NULL), -EINVAL);
	cr_expect_eq(ps_pcounter_snapshot(pc, NULL), -EINVAL);
	cr_expect_eq(ps_pcounter_threads(NULL), -EINVAL);
	cr_expect_eq(ps_pcounter_read(pc), 7);
	cr_expect_eq(ps_pcounter_sum(pc), 7);
	ps_pcounter_destroy(pc);
	ps_pcounter_destroy(NULL);
}

Test(pcounter, batching_single_thread)
{
	struct ps_pcounter *pc = ps_pcounter_create(0, 10);
	struct ps_pcounter_snapshot snap;
	int i;

	cr_assert_not_null(pc);
	for (i = 0; i < 9; i++)
		cr_assert_eq(ps_pcounter_add(pc, 1), 0);
	cr_expect_eq(ps_pcounter_read(pc), 0, "9 < batch stays in the thread's slot");
	cr_expect_eq(ps_pcounter_sum(pc), 9);
	cr_expect_eq(ps_pcounter_threads(pc), 1);
	cr_assert_eq(ps_pcounter_snapshot(pc, &snap), 0);
	cr_expect_eq(snap.approx, 0);
	cr_expect_eq(snap.exact, 9);
	cr_expect_eq(snap.nr_deltas, 1);
	cr_expect_eq(snap.bound, 10);
	cr_assert_eq(ps_pcounter_add(pc, 1), 0);
	cr_expect_eq(ps_pcounter_read(pc), 10, "reaching the batch folds");
	cr_assert_eq(ps_pcounter_add(pc, -25), 0);
	cr_expect_eq(ps_pcounter_read(pc), -15, "a delta beyond the batch goes straight through");
	cr_expect_eq(ps_pcounter_read_positive(pc), 0);
	cr_assert_eq(ps_pcounter_add(pc, 3), 0);
	cr_expect_eq(ps_pcounter_sum(pc), -12);
	cr_assert_eq(ps_pcounter_fold(pc), 0);
	cr_expect_eq(ps_pcounter_read(pc), -12);

	/* compare: far away answers from the approximate value, close by exactly. */
	cr_assert_eq(ps_pcounter_add(pc, 5), 0); /* approx -12, exact -7 */
	cr_expect_eq(ps_pcounter_compare(pc, -7), 0);
	cr_expect_eq(ps_pcounter_compare(pc, -8), 1);
	cr_expect_eq(ps_pcounter_compare(pc, -6), -1);
	cr_expect_eq(ps_pcounter_compare(pc, 1000), -1);
	cr_expect_eq(ps_pcounter_compare(pc, -1000), 1);
	ps_pcounter_destroy(pc);
}

/* ---- |approx - exact| <= batch x threads with a delta, checked while threads run ---- */

/* The pcounter workload of testutil.h: four adders, and a thread checking snapshots. */
#define NTHREADS 4

static int32_t batches[] = { 1, 32, 1000 };

PS_ARRAY_TEST(int32_t, batch, batches, pcounter, concurrent_error_bound)
{
	struct ps_test_pcounter_load l = {
		.pc = ps_pcounter_create(0, *batch), .adders = NTHREADS, .check_bound = true,
		.run = { .iters = ps_test_iters(1000000), .seed = 1234567 },
	};

	cr_assert_not_null(l.pc);
	cr_assert_eq(ps_test_pcounter_run(&l), 0, "%s", l.run.why);
	cr_log_info("batch %d: %ld snapshots, largest error %lld, bound %lld", *batch, l.snapshots,
			(long long)l.max_err, (long long)ps_pcounter_error_bound(*batch, NTHREADS));
	/* Exact at quiescence (the sum; the read within the bound): checked by the run. */
	cr_assert_eq(ps_pcounter_fold(l.pc), 0);
	cr_assert_eq(ps_pcounter_read(l.pc), l.total);
	ps_pcounter_destroy(l.pc);
}

/* Shrinking the batch folds: right after the switch the cheap read is exact. */
Test(pcounter, fold_on_switch_to_strict)
{
	struct ps_test_pcounter_load l = {
		.pc = ps_pcounter_create(0, 100000), .adders = NTHREADS,
		.run = { .iters = ps_test_iters(50000), .seed = 99 },
	};
	int64_t total;

	cr_assert_not_null(l.pc);
	cr_assert_eq(ps_test_pcounter_run(&l), 0, "%s", l.run.why);
	total = l.total;
	cr_assert_neq(ps_pcounter_read(l.pc), total, "the loose batch left deltas in the slots");
	cr_assert_eq(ps_pcounter_set_batch(l.pc, 32), 0);
	cr_assert_eq(ps_pcounter_read(l.pc), total);
	cr_assert_eq(ps_pcounter_sum(l.pc), total);
	/* Growing the batch folds nothing and changes nothing. */
	cr_assert_eq(ps_pcounter_add(l.pc, 5), 0);
	cr_assert_eq(ps_pcounter_set_batch(l.pc, 64), 0);
	cr_assert_eq(ps_pcounter_read(l.pc), total);
	cr_assert_eq(ps_pcounter_sum(l.pc), total + 5);
	ps_pcounter_destroy(l.pc);
}

/* ---- Committed memory ----------------------------------------------------- */

Test(commit, names_and_args)
{
	struct ps_commit *cm;

	EXPECT_NAMES(ps_overcommit_name, ps_overcommit_from_name, PS_OVERCOMMIT_COUNT,
			PS_OVERCOMMIT_NEVER, "never", "sometimes");
	errno = 0;
	cr_expect_null(ps_commit_create(PS_OVERCOMMIT_COUNT, 100, 1));
	cr_expect_eq(errno, EINVAL);
	cr_expect_null(ps_commit_create(PS_OVERCOMMIT_NEVER, 100, -1));
	cm = ps_commit_create(PS_OVERCOMMIT_GUESS, 1 << 20, 0);
	cr_assert_not_null(cm);
	cr_expect_eq(ps_commit_charge(cm, -1), -EINVAL);
	cr_expect_eq(ps_commit_uncharge(cm, -1), -EINVAL);
	cr_expect_eq(ps_commit_charge(NULL, 1), -EINVAL);
	cr_expect_eq(ps_commit_set_mode(cm, PS_OVERCOMMIT_COUNT), -EINVAL);
	cr_expect_eq(ps_commit_mode(cm), PS_OVERCOMMIT_GUESS);
	cr_expect_eq(ps_commit_set_limit(cm, -1), -EINVAL);
	cr_expect_eq(ps_commit_limit(cm), 1 << 20);
	cr_expect_eq(ps_commit_committed(cm, true), 0);
	ps_commit_destroy(cm);
	ps_commit_destroy(NULL);
}

MODE_TEST(commit, policy_batch_and_limits)
{
	const uint64_t total = (uint64_t)1 << 22; /* 16 GiB of 4 KiB pages */
	struct ps_commit *cm = ps_commit_create(*mode, total, 4);
	struct ps_pcounter *pc = ps_commit_counter(cm);
	int64_t i, n;

	cr_assert_not_null(cm);
	cr_assert_eq(ps_pcounter_batch(pc),
			ps_pcounter_compute_batch(total, 4, *mode == PS_OVERCOMMIT_NEVER));
	cr_assert_eq(ps_commit_set_limit(cm, 1000), 0);
	switch (*mode) {
	case PS_OVERCOMMIT_ALWAYS:
		cr_assert_eq(ps_commit_charge(cm, (int64_t)total * 4), 0);
		cr_assert_eq(ps_commit_uncharge(cm, (int64_t)total * 4), 0);
		break;
	case PS_OVERCOMMIT_GUESS:
		cr_assert_eq(ps_commit_charge(cm, (int64_t)total + 1), -ENOMEM);
		cr_assert_eq(ps_commit_charge(cm, (int64_t)total), 0);
		cr_assert_eq(ps_commit_charge(cm, (int64_t)total), 0, "only single requests count");
		cr_assert_eq(ps_commit_uncharge(cm, 2 * (int64_t)total), 0);
		break;
	case PS_OVERCOMMIT_NEVER:
		/* One page at a time up to the limit, exactly, then -ENOMEM. */
		for (i = 0, n = 0; i < 2000; i++)
			if (!ps_commit_charge(cm, 1))
				n++;
		cr_assert_eq(n, 1000);
		cr_assert_eq(ps_commit_committed(cm, true), 1000);
		cr_assert_eq(ps_commit_charge(cm, 1), -ENOMEM);
		cr_assert_eq(ps_commit_committed(cm, true), 1000, "a refused charge stays refused");
		cr_assert_eq(ps_commit_uncharge(cm, 10), 0);
		cr_assert_eq(ps_commit_charge(cm, 11), -ENOMEM);
		cr_assert_eq(ps_commit_charge(cm, 10), 0);
		cr_assert_eq(ps_commit_uncharge(cm, 1000), 0);
		break;
	default:
		cr_assert_fail();
	}
	cr_assert_eq(ps_commit_committed(cm, true), 0);
	ps_commit_destroy(cm);
}

/* Loose batch while threads run, then NEVER: the first strict check sees the exact total. */
MODE_TEST(commit, switch_to_never_is_exact)
{
	const uint64_t total = (uint64_t)1 << 26;
	/* The commit workload of testutil.h: 32768-page commits, two of three given back. */
	struct ps_test_commit_load l = {
		.cm = ps_commit_create(*mode, total, NTHREADS), .committers = NTHREADS,
		.pages = 32768, .run = { .iters = ps_test_iters(20000) },
	};
	int64_t held, committed;

	cr_assert_not_null(l.cm);
	cr_assert_eq(ps_commit_set_limit(l.cm, 20 * 32768), 0);
	/* Exact at the end (what the committers kept): checked by the run. */
	cr_assert_eq(ps_test_commit_run(&l), 0, "%s", l.run.why);
	held = l.held;
	if (*mode == PS_OVERCOMMIT_NEVER) {
		cr_assert_leq(held, 20 * 32768, "NEVER never lets the limit be exceeded");
		cr_assert_gt(l.refused, 0);
	}
	/* Loose again, a sub-batch delta left in this thread's slot, then strict. */
	cr_assert_eq(ps_commit_set_mode(l.cm, PS_OVERCOMMIT_GUESS), 0);
	cr_assert_eq(ps_commit_charge(l.cm, 3), 0);
	held += 3;
	cr_assert_eq(ps_commit_set_mode(l.cm, PS_OVERCOMMIT_NEVER), 0);
	cr_assert_eq(ps_commit_mode(l.cm), PS_OVERCOMMIT_NEVER);
	committed = ps_commit_committed(l.cm, false);
	cr_assert_eq(committed, held, "approximate %lld vs exact %lld right after the switch",
			(long long)committed, (long long)held);
	cr_assert_eq(ps_pcounter_batch(ps_commit_counter(l.cm)),
			ps_pcounter_compute_batch(total, NTHREADS, true));
	cr_assert_eq(ps_commit_uncharge(l.cm, held), 0);
	cr_assert_eq(ps_commit_committed(l.cm, true), 0);
	ps_commit_destroy(l.cm);
}
