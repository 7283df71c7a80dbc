/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the access counts' suite share (test_counts.c): a
 * store of NR ranges and the counts of the range at a page.
 */
#ifndef POLSTORE_TESTS_COUNTS_TEST_H
#define POLSTORE_TESTS_COUNTS_TEST_H

#include <errno.h>

#include "testutil.h"

#define NR 8	    /* ranges [100 k, 100 k + 50) */
#define SPACE (100 * NR) /* pages drawn from */

static inline struct ps_store *store_of_ranges(enum ps_sync sync, struct ps_policy *pol)
{
	struct ps_store *s = ps_store_create(sync);
	int k;

	cr_assert_not_null(s);
	for (k = 0; k < NR; k++)
		cr_assert_eq(ps_store_set(s, 100 * (uint64_t)k, 100 * (uint64_t)k + 50, pol), 0);
	return s;
}

/* The counts of the range starting at @start, found by a window of one page. */
static inline int one_fn(const struct ps_range_counts *c, void *arg)
{
	*(struct ps_range_counts *)arg = *c;
	return 0;
}

static inline struct ps_range_counts counts_at(struct ps_store *s, uint64_t page)
{
	struct ps_range_counts c = { 0 };

	cr_assert_eq(ps_store_counts_foreach(s, page, page + 1, one_fn, &c), 0);
	cr_assert(c.start <= page && page < c.end, "no range at %lu", (unsigned long)page);
	return c;
}

#endif /* POLSTORE_TESTS_COUNTS_TEST_H */
