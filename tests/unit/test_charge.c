// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * ps_charge: every test that applies to all kinds runs once per kind.
 * Invariant checked after operations and at quiescence:
 *   usage(c) == own charges held + stocked(c) + sum of usage(children).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

static long rd(const struct ps_charge *c, enum ps_charge_field f)
{
	long v = ps_charge_read(c, f);

	cr_assert_geq(v, 0, "read field %d: %ld", (int)f, v);
	return v;
}

static struct ps_charge *mk(enum ps_charge_kind kind, struct ps_charge *parent, long limit)
{
	struct ps_charge *c = ps_charge_create(kind, parent, limit);

	cr_assert_not_null(c, "create: %s", strerror(errno));
	return c;
}

Test(charge, kind_names)
{
	EXPECT_NAMES(ps_charge_kind_name, ps_charge_kind_from_name, PS_CHARGE_KIND_COUNT,
			PS_CHARGE_STOCK, "stock", "bogus");
}

Test(charge, invalid_arguments)
{
	struct ps_charge *c;

	errno = 0;
	cr_expect_null(ps_charge_create(PS_CHARGE_KIND_COUNT, NULL, 10));
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_null(ps_charge_create(PS_CHARGE_SPIN, NULL, -1));
	cr_expect_eq(errno, EINVAL);
	cr_expect_null(ps_charge_create(PS_CHARGE_SPIN, NULL, PS_CHARGE_MAX + 1));

	c = mk(PS_CHARGE_SPIN, NULL, 100);
	cr_expect_eq(ps_charge_try(NULL, 1, NULL), -EINVAL);
	cr_expect_eq(ps_charge_try(c, -1, NULL), -EINVAL);
	cr_expect_eq(ps_charge_try(c, PS_CHARGE_MAX + 1, NULL), -EINVAL);
	cr_expect_eq(ps_charge_uncharge(c, -1), -EINVAL);
	cr_expect_eq(ps_charge_uncharge(NULL, 1), -EINVAL);
	cr_expect_eq(ps_charge_set_limit(c, -1), -EINVAL);
	cr_expect_eq(ps_charge_set_limit(NULL, 1), -EINVAL);
	cr_expect_eq(ps_charge_set_stock(c, -1), -EINVAL);
	cr_expect_eq(ps_charge_read(c, (enum ps_charge_field)99), -EINVAL);
	cr_expect_eq(ps_charge_read(NULL, PS_CHARGE_USAGE), -EINVAL);
	cr_expect_eq(ps_charge_stat(c, NULL), -EINVAL);
	cr_expect_eq(ps_charge_kind(NULL), -EINVAL);
	cr_expect_eq(ps_charge_drain_stock(NULL), -EINVAL);
	cr_expect_eq(ps_charge_reset_max(NULL), -EINVAL);
	cr_expect_eq(ps_charge_reset_failcnt(NULL), -EINVAL);
	cr_expect_eq(ps_charge_destroy(NULL), 0);
	cr_expect_eq(rd(c, PS_CHARGE_USAGE), 0);
	cr_expect_eq(rd(c, PS_CHARGE_LIMIT), 100);
	cr_expect_eq(ps_charge_destroy(c), 0);
}

Test(charge, overshoot_bound)
{
	cr_expect_eq(ps_charge_overshoot_bound(PS_CHARGE_SPIN, 8, 100, 0), 0);
	cr_expect_eq(ps_charge_overshoot_bound(PS_CHARGE_SEQLOCK, 8, 100, 32), 0);
	cr_expect_eq(ps_charge_overshoot_bound(PS_CHARGE_ATOMIC, 8, 100, 0), 800);
	cr_expect_eq(ps_charge_overshoot_bound(PS_CHARGE_STOCK, 4, 1, 0), 4 * PS_CHARGE_STOCK_BATCH);
	cr_expect_eq(ps_charge_overshoot_bound(PS_CHARGE_STOCK, 4, 64, 32), 256);
	cr_expect_eq(ps_charge_overshoot_bound(PS_CHARGE_ATOMIC, -1, 1, 0), -EINVAL);
	cr_expect_eq(ps_charge_overshoot_bound(PS_CHARGE_KIND_COUNT, 1, 1, 0), -EINVAL);
}

/* usage == own + stocked + children, at one counter. */
static void check_level(const struct ps_charge *c, long own, long children)
{
	struct ps_charge_stat st;

	cr_assert_eq(ps_charge_stat(c, &st), 0);
	cr_assert_eq(st.usage, own + st.stocked + children,
			"usage %ld != own %ld + stocked %ld + children %ld", st.usage, own,
			st.stocked, children);
	cr_assert_leq(st.usage, st.limit + st.max_overshoot);
}

KIND_TEST(charge, hierarchy_accounting)
{
	struct ps_charge *root = mk(*kind, NULL, 100);
	struct ps_charge *mid = mk(*kind, root, 60);
	struct ps_charge *leaf = mk(*kind, mid, 1000);
	struct ps_charge *leaf2 = mk(*kind, root, 1000);
	struct ps_charge *fail = NULL;

	cr_assert_eq(ps_charge_kind(leaf), (int)*kind);
	cr_assert_eq(ps_charge_parent(leaf), mid);
	cr_assert_eq(ps_charge_parent(root), NULL);

	/* 50 goes through every level (more than a batch: no stock involved). */
	cr_assert_eq(ps_charge_try(leaf, 50, &fail), 0);
	check_level(leaf, 50, 0);
	check_level(mid, 0, rd(leaf, PS_CHARGE_USAGE));
	check_level(root, 0, rd(mid, PS_CHARGE_USAGE));
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 50);

	/* mid refuses 20: nothing charged anywhere, failcnt only at mid. */
	cr_assert_eq(ps_charge_try(leaf, 20, &fail), -ENOMEM);
	cr_assert_eq(fail, mid);
	cr_assert_eq(rd(mid, PS_CHARGE_FAILCNT), 1);
	cr_assert_eq(rd(leaf, PS_CHARGE_FAILCNT), 0);
	cr_assert_eq(rd(root, PS_CHARGE_FAILCNT), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_USAGE), 50);
	cr_assert_eq(rd(mid, PS_CHARGE_USAGE), 50);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 50);

	/* The root refuses 60 from the other leaf. */
	fail = NULL;
	cr_assert_eq(ps_charge_try(leaf2, 60, &fail), -ENOMEM);
	cr_assert_eq(fail, root);
	cr_assert_eq(rd(root, PS_CHARGE_FAILCNT), 1);
	cr_assert_eq(rd(leaf2, PS_CHARGE_USAGE), 0);

	/* A small charge (served by a stock where there is one). */
	cr_assert_eq(ps_charge_try(leaf2, 5, NULL), 0);
	check_level(leaf2, 5, 0);
	check_level(root, 0, rd(mid, PS_CHARGE_USAGE) + rd(leaf2, PS_CHARGE_USAGE));
	cr_assert_eq(ps_charge_drain_stock(root), 0);
	cr_assert_eq(rd(leaf2, PS_CHARGE_USAGE), 5);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 55);
	cr_assert_geq(rd(root, PS_CHARGE_MAX_USAGE), 55);

	/* Exactly at the limit is allowed. */
	cr_assert_eq(ps_charge_try(leaf, 10, NULL), 0);
	cr_assert_eq(ps_charge_drain_stock(root), 0);
	cr_assert_eq(rd(mid, PS_CHARGE_USAGE), 60);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 65);

	/* Without a stock, uncharging more than the usage is refused, unchanged. */
	if (*kind != PS_CHARGE_STOCK) {
		cr_assert_eq(ps_charge_uncharge(leaf2, 6), -EINVAL);
		cr_assert_eq(rd(leaf2, PS_CHARGE_USAGE), 5);
		cr_assert_eq(rd(root, PS_CHARGE_USAGE), 65);
	}

	/* set_limit: -EBUSY below the usage, limit unchanged. */
	cr_assert_eq(ps_charge_set_limit(mid, 59), -EBUSY);
	cr_assert_eq(rd(mid, PS_CHARGE_LIMIT), 60);
	cr_assert_eq(ps_charge_set_limit(mid, 60), 0);
	cr_assert_eq(ps_charge_set_limit(mid, 200), 0);
	cr_assert_eq(rd(mid, PS_CHARGE_LIMIT), 200);

	/* Destroy refuses counters with children or usage. */
	cr_assert_eq(ps_charge_destroy(mid), -EBUSY);
	cr_assert_eq(ps_charge_destroy(leaf2), -EBUSY);

	cr_assert_eq(ps_charge_uncharge(leaf, 60), 0);
	cr_assert_eq(ps_charge_uncharge(leaf2, 5), 0);
	cr_assert_eq(ps_charge_drain_stock(root), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 0);
	cr_assert_eq(rd(mid, PS_CHARGE_USAGE), 0);

	/* Watermarks and failcnt resets. */
	cr_assert_eq(rd(root, PS_CHARGE_MAX_USAGE) >= 65, 1);
	cr_assert_eq(ps_charge_reset_max(root), 0);
	cr_assert_eq(rd(root, PS_CHARGE_MAX_USAGE), 0);
	cr_assert_eq(rd(root, PS_CHARGE_MAX_OVERSHOOT), 0);
	cr_assert_eq(ps_charge_reset_failcnt(mid), 0);
	cr_assert_eq(rd(mid, PS_CHARGE_FAILCNT), 0);

	cr_assert_eq(ps_charge_destroy(leaf), 0);
	cr_assert_eq(ps_charge_destroy(leaf2), 0);
	cr_assert_eq(ps_charge_destroy(mid), 0);
	cr_assert_eq(ps_charge_destroy(root), 0);
}

KIND_TEST(charge, watermark_exact)
{
	struct ps_charge *c = mk(*kind, NULL, 1000);

	cr_assert_eq(ps_charge_set_stock(c, 0), 0); /* exact accounting, every kind */
	cr_assert_eq(ps_charge_try(c, 300, NULL), 0);
	cr_assert_eq(ps_charge_try(c, 200, NULL), 0);
	cr_assert_eq(ps_charge_uncharge(c, 400), 0);
	cr_assert_eq(ps_charge_try(c, 100, NULL), 0);
	cr_assert_eq(rd(c, PS_CHARGE_USAGE), 200);
	cr_assert_eq(rd(c, PS_CHARGE_MAX_USAGE), 500);
	cr_assert_eq(ps_charge_reset_max(c), 0);
	cr_assert_eq(rd(c, PS_CHARGE_MAX_USAGE), 200);
	cr_assert_eq(ps_charge_try(c, 801, NULL), -ENOMEM);
	cr_assert_eq(rd(c, PS_CHARGE_USAGE), 200);
	cr_assert_eq(rd(c, PS_CHARGE_FAILCNT), 1);
	if (*kind == PS_CHARGE_ATOMIC || *kind == PS_CHARGE_STOCK)
		cr_assert_eq(rd(c, PS_CHARGE_MAX_OVERSHOOT), 1, "a refused add overshoots by 1");
	else
		cr_assert_eq(rd(c, PS_CHARGE_MAX_OVERSHOOT), 0);
	cr_assert_eq(ps_charge_uncharge(c, 200), 0);
	cr_assert_eq(ps_charge_destroy(c), 0);
}

KIND_TEST(charge, stock_in_front)
{
	struct ps_charge *root = mk(*kind, NULL, 1000);
	struct ps_charge *leaf = mk(*kind, root, 1000);
	long batch = 16;

	cr_assert_eq(ps_charge_set_stock(leaf, batch), 0);
	cr_assert_eq(ps_charge_stock_batch(leaf), batch);
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_USAGE), batch, "a refill pre-charges a whole batch");
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), batch);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch - 1);
	cr_assert_eq(ps_charge_try(leaf, batch - 1, NULL), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), batch);
	/* Uncharges go to the stock, which keeps at most one batch. */
	cr_assert_eq(ps_charge_uncharge(leaf, batch), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch);
	cr_assert_eq(ps_charge_try(leaf, batch, NULL), 0);
	cr_assert_eq(ps_charge_uncharge(leaf, 10), 0);
	cr_assert_eq(ps_charge_uncharge(leaf, 6), 0);
	cr_assert_leq(rd(leaf, PS_CHARGE_STOCKED), batch);
	cr_assert_eq(ps_charge_drain_stock(root), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 0);

	/* Near the limit the stocks are drained before a charge is refused. */
	cr_assert_eq(ps_charge_set_limit(root, 20), 0);
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0); /* stocks 15 */
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 16);
	cr_assert_eq(ps_charge_try(leaf, 19, NULL), 0);
	cr_assert_eq(ps_charge_drain_stock(leaf), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 20);
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), -ENOMEM);
	cr_assert_eq(ps_charge_uncharge(leaf, 20), 0);

	/* set_limit drains stocks in the subtree before answering -EBUSY. */
	cr_assert_eq(ps_charge_set_limit(root, 1000), 0);
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
	cr_assert_eq(ps_charge_set_limit(root, 1), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 1);
	cr_assert_eq(ps_charge_uncharge(leaf, 1), 0);

	cr_assert_eq(ps_charge_set_stock(leaf, 0), 0);
	cr_assert_eq(ps_charge_stock_batch(leaf), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 0);
	cr_assert_eq(ps_charge_destroy(leaf), 0);
	cr_assert_eq(ps_charge_destroy(root), 0);
}

KIND_TEST(charge, stock_lean_refill_and_half_trim)
{
	struct ps_charge *root = mk(*kind, NULL, 20);
	struct ps_charge *leaf = mk(*kind, root, 1000);
	long batch = 16, held, i;

	cr_assert_eq(ps_charge_set_stock(leaf, batch), 0);
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
	cr_assert_eq(ps_charge_try(leaf, batch - 1, NULL), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), 0);
	/* The batch refill is refused (16 + 16 > 20): only the page is charged. */
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), batch + 1);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), 0);
	cr_assert_eq(rd(root, PS_CHARGE_FAILCNT), 0, "a refused refill is not a refusal");
	/* Room again, but the next batch refills still charge only their page. */
	cr_assert_eq(ps_charge_set_limit(root, 1000), 0);
	for (i = 0; i < batch; i++) {
		cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
		cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), 0, "lean refill %ld pre-charged", i);
	}
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 2 * batch + 1);
	/* Then whole batches again. */
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch - 1);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 3 * batch + 1);
	held = 2 * batch + 2;
	/* Uncharges fill the stock to one batch; beyond it, half a batch is kept. */
	cr_assert_eq(ps_charge_uncharge(leaf, 1), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 3 * batch + 1);
	cr_assert_eq(ps_charge_uncharge(leaf, 1), 0);
	held -= 2;
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch / 2);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), held + batch / 2);
	cr_assert_eq(ps_charge_uncharge(leaf, held), 0);
	cr_assert_leq(rd(leaf, PS_CHARGE_STOCKED), batch);
	cr_assert_eq(ps_charge_drain_stock(root), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_USAGE), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 0);
	cr_assert_eq(ps_charge_destroy(leaf), 0);
	cr_assert_eq(ps_charge_destroy(root), 0);
}

/*
 * A run of uncharges through a stock: the first overflow keeps half a
 * batch, the next one, with no charge served between, keeps nothing; after
 * a charge an overflow keeps half a batch again.  Usage stays exact.
 */
KIND_TEST(charge, stock_release_run_keeps_nothing)
{
	struct ps_charge *root = mk(*kind, NULL, 1000);
	struct ps_charge *leaf = mk(*kind, root, 1000);
	long batch = 16, held = 0, i;

	cr_assert_eq(ps_charge_set_stock(leaf, batch), 0);
	for (i = 0; i < 4 * batch; i++, held++)
		cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
	cr_assert_eq(ps_charge_drain_stock(leaf), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), held);
	/* One batch fills the stock; the page after it overflows: half a batch kept. */
	for (i = 0; i < batch + 1; i++, held--)
		cr_assert_eq(ps_charge_uncharge(leaf, 1), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch / 2);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), held + batch / 2);
	/* Uncharges on: the next overflow keeps nothing. */
	for (i = 0; i < batch / 2 + 1; i++, held--)
		cr_assert_eq(ps_charge_uncharge(leaf, 1), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), 0, "a run of uncharges kept pages");
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), held);
	/* Fill the stock again, serve one charge from it: the next overflow keeps half. */
	for (i = 0; i < batch; i++, held--)
		cr_assert_eq(ps_charge_uncharge(leaf, 1), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch);
	cr_assert_eq(ps_charge_try(leaf, 1, NULL), 0);
	held++;
	for (i = 0; i < 2; i++, held--)
		cr_assert_eq(ps_charge_uncharge(leaf, 1), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_STOCKED), batch / 2, "a trim after a charge keeps half");
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), held + batch / 2);
	cr_assert_eq(ps_charge_uncharge(leaf, held), 0);
	cr_assert_eq(ps_charge_drain_stock(root), 0);
	cr_assert_eq(rd(leaf, PS_CHARGE_USAGE), 0);
	cr_assert_eq(rd(root, PS_CHARGE_USAGE), 0);
	cr_assert_eq(ps_charge_destroy(leaf), 0);
	cr_assert_eq(ps_charge_destroy(root), 0);
}

/* ---- Concurrency (the charge workload of testutil.h) ------------------------ */

/*
 * Four workers on leaves of 60 under a parent of 150 under a root of 200,
 * a monitor reading the root and the parent meanwhile: usage never above
 * limit + bound, exact once quiescent, every worker refused now and then.
 */
KIND_TEST(charge, concurrent_exact_and_bounded)
{
	struct ps_test_charge_load l = {
		.kind = *kind, .workers = 4, .root_limit = 200, .parent_limit = 150,
		.leaf_limit = 60, .monitor = true, .expect_refusals = true,
		.run = { .iters = ps_test_iters(200000) },
	};

	cr_assert_eq(ps_test_charge_run(&l), 0, "%s", l.run.why);
	cr_log_info("%s: largest overshoot %ld (monitor saw %ld), bound %ld",
			ps_charge_kind_name(*kind), l.overshoot, l.max_seen, l.bound);
}

/* Set_limit racing with charges: a successful shrink is never undercut for locked kinds. */
KIND_TEST(charge, set_limit_under_load)
{
	/* Not scaled down under valgrind: set_limit is cheap, and the loop must see load and calm. */
	struct ps_test_charge_load l = {
		.kind = *kind, .workers = 2, .root_limit = 1000, .leaf_limit = PS_CHARGE_MAX,
		.limit_rounds = 2000, .limit_lo = 40, .limit_hi = 1000,
		.run = { .iters = ps_test_iters(100000), .seed = 77 },
	};

	cr_assert_eq(ps_test_charge_run(&l), 0, "%s", l.run.why);
}

/* ---- Allocation failures ------------------------------------------------- */

Test(charge, allocation_failure)
{
	struct ps_charge *c;

	ps_test_alloc_fail_after(-1);
	c = mk(PS_CHARGE_SPIN, NULL, 10);
	ps_test_alloc_fail_after(0);
	errno = 0;
	cr_expect_null(ps_charge_create(PS_CHARGE_ATOMIC, c, 10));
	cr_expect_eq(errno, ENOMEM);
	cr_expect_eq(ps_charge_set_stock(c, 8), -ENOMEM);
	cr_expect_eq(ps_charge_stock_batch(c), 0);
	cr_expect_eq(ps_charge_destroy(c), 0, "no child was linked");
	ps_test_alloc_fail_after(-1);
	ps_test_alloc_restore();
}
