// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Access counts fed by region (ps_store_counts_feed()), every variant:
 * shares by pages that add up exactly, gaps, epochs and the top order;
 * bad arguments, counting off, an allocation failure at each step and
 * accesses past what a counter holds count nothing.
 */
#include <errno.h>
#include <stdint.h>

#include "counts_test.h"

/*
 * What is the counts' own, not the walk's, runs on a locked store and an
 * RCU one (the walk of every variant: fed_regions_share_by_pages).
 */
static enum ps_sync two_syncs[] = { PS_SYNC_SPIN, PS_SYNC_RCU };

/*
 * Accesses a monitor reported by region: shared over the ranges each
 * region overlaps by pages, adding up exactly, the rest gaps; beside
 * counted lookups, in the epoch they came in.
 */
VARIANT_TEST(counts, fed_regions_share_by_pages)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a); /* [100 k, 100 k + 50) */
	struct ps_access_region r[] = {
		{ 0, 50, 7 },	   /* range 0 alone */
		{ 125, 325, 10 },  /* pages of ranges 1, 2, 3 (25, 50, 25) and gaps (100) */
		{ 210, 220, 5 },   /* inside range 2 */
		{ 205, 215, 4 },   /* overlaps the last: both count */
		{ 60, 90, 3 },	   /* a gap */
	};
	struct ps_counts_sum sum;
	struct ps_range_counts top[2];

	cr_assert_eq(ps_store_counts_feed(s, r, 5), -ENODATA, "counting is off");
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	cr_assert_eq(ps_store_count_access(s, 5), 0);
	cr_assert_eq(ps_store_counts_feed(s, r, 5), 0);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, 1 + 7 + 10 + 5 + 4 + 3);
	cr_assert_eq(counts_at(s, 0).count, 8);
	/*
	 * 10 over 200 pages, by the pages before each piece's end: 10 x 25 /
	 * 200 = 1 to range 1, 3 - 1 to the gap, 6 - 3 to range 2, 8 - 6 to
	 * the gap, 10 - 8 to range 3.
	 */
	cr_assert_eq(counts_at(s, 100).count, 1);
	cr_assert_eq(counts_at(s, 200).count, 5 + 4 + 3);
	cr_assert_eq(counts_at(s, 300).count, 2);
	cr_assert_eq(sum.gaps, 2 + 2 + 3);
	cr_assert_eq(sum.in_ranges, 8 + 1 + 12 + 2);
	cr_assert_eq(counts_at(s, 0).last_epoch, 1);
	/* A later epoch: the fed accesses decay like counted ones. */
	cr_assert_eq(ps_store_counts_tick(s), 2);
	cr_assert_float_eq(counts_at(s, 200).rate, 6.0, 1e-9);
	cr_assert_eq(ps_store_counts_top(s, 0, SPACE, PS_COUNTS_BY_COUNT, top, 2), 2);
	cr_assert(top[0].start == 200 && top[1].start == 0);
	/* Bad arguments count nothing. */
	cr_assert_eq(ps_store_counts_feed(NULL, r, 1), -EINVAL);
	cr_assert_eq(ps_store_counts_feed(s, NULL, 1), -EINVAL);
	r[1].end = r[1].start;
	cr_assert_eq(ps_store_counts_feed(s, r, 5), -EINVAL);
	cr_assert_eq(ps_store_counts_feed(s, NULL, 0), -EINVAL);
	cr_assert_eq(ps_store_counts_feed(s, r, 0), 0);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, 30);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/* One region over many ranges: the shares add up to its accesses, whatever the rounding. */
SYNCS_TEST(two_syncs, counts, a_fed_region_adds_up_exactly)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = ps_store_create(*sync);
	/* Past the store's last range, and enough accesses times pages to need 128 bits. */
	struct ps_access_region r = { 3, 100003, ((uint64_t)1 << 53) - 999 };
	struct ps_counts_sum sum;
	uint64_t seed = ps_test_seed(3, 0), p = 0;
	int k = 0;

	cr_assert_not_null(s);
	while (p < 1000) { /* ranges of 1 to 20 pages, gaps of 0 to 5 */
		uint64_t len = 1 + ps_test_rand(&seed) % 20;

		cr_assert_eq(ps_store_set(s, p, p + len, a), 0);
		p += len + ps_test_rand(&seed) % 6;
		k++;
	}
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	cr_assert_eq(ps_store_counts_feed(s, &r, 1), 0);
	r.accesses = 999;
	cr_assert_eq(ps_store_counts_feed(s, &r, 1), 0);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, (uint64_t)1 << 53, "%d ranges", k);
	cr_assert_eq(sum.in_ranges + sum.gaps, sum.counted);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * Accesses that a range's counter or its rate could not hold: refused,
 * nothing counted; up to the limit, the rate is exact.
 */
SYNCS_TEST(two_syncs, counts, a_feed_past_what_a_counter_holds_is_refused)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct ps_access_region r[2] = { { 0, 50, (uint64_t)1 << 52 }, { 200, 250, 1 } };
	struct ps_counts_sum sum;
	struct ps_range_counts c;
	int i;

	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	cr_assert_eq(ps_store_counts_feed(s, r, 2), 0);
	c = counts_at(s, 0);
	cr_assert_eq(c.count, (uint64_t)1 << 52);
	cr_assert_float_eq(c.rate, (double)((uint64_t)1 << 52), 1.0, "rate %g", c.rate);
	/* One feed over the limit, then feeds until the counter would wrap. */
	r[0].accesses = ((uint64_t)1 << 53) + 1 - r[1].accesses;
	cr_assert_eq(ps_store_counts_feed(s, r, 2), -EOVERFLOW);
	r[0].accesses = (uint64_t)1 << 53;
	for (i = 0; i < 4096; i++)
		if (ps_store_counts_feed(s, r, 1))
			break;
	cr_assert_lt(i, 4096, "a counter took every feed");
	cr_assert_eq(ps_store_counts_feed(s, r, 1), -EOVERFLOW);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, ((uint64_t)1 << 52) + 1 + (uint64_t)i * ((uint64_t)1 << 53));
	cr_assert_eq(counts_at(s, 200).count, 1, "the refused feed's other region counted");
	ps_store_destroy(s);
	ps_policy_put(a);
}

/* A feed that runs out of memory at any allocation counts nothing. */
SYNCS_TEST(two_syncs, counts, a_fed_region_without_memory_counts_nothing)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = ps_store_create(*sync);
	struct ps_access_region r = { 0, 4000, 4000 };
	struct ps_counts_sum sum;
	long k;
	int err, i;

	cr_assert_not_null(s);
	for (i = 0; i < 100; i++)
		cr_assert_eq(ps_store_set(s, 40 * (uint64_t)i, 40 * (uint64_t)i + 20, a), 0);
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	ps_test_alloc_install();
	for (k = 0;; k++) {
		ps_test_alloc_fail_after(k);
		err = ps_store_counts_feed(s, &r, 1);
		ps_test_alloc_disarm();
		cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
		if (!err)
			break;
		cr_assert_eq(err, -ENOMEM);
		cr_assert_eq(sum.counted, 0, "after %ld allocations", k);
	}
	cr_assert_gt(k, 1, "the feed allocates");
	cr_assert_eq(sum.counted, 4000);
	cr_assert_eq(sum.in_ranges, 2000);
	ps_test_alloc_restore();
	ps_store_destroy(s);
	ps_policy_put(a);
}
