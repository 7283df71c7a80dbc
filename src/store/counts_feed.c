// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Accesses fed from outside (ps_store_counts_feed(), polstore/counts.h):
 * each region's accesses shared out over the store's ranges by pages,
 * found by walks of the store with no lock of the counts held, then added
 * to the table of exited threads' counts at once (counts.c).
 */
#include <errno.h>
#include <stdint.h>

#include <polstore/counts.h>
#include <polstore/store.h>

#include "alloc_internal.h"
#include "compiler.h"
#include "counts_shard.h"
#include "held.h"
#include "store_internal.h"
#include "variants.h"

struct feed {
	struct psi_counts_add *a;
	size_t n, cap;
	uint64_t gaps;
	/* The region walked: its bounds, accesses, and the pages shared out so far. */
	uint64_t start, end, accesses, done;
};

/*
 * The accesses of the region's pages [@f->start, @f->start + @upto):
 * rounded down, so that the shares of consecutive pieces, differences of
 * two such, add up to the region's accesses exactly.
 */
static uint64_t feed_upto(const struct feed *f, uint64_t upto)
{
	return (uint64_t)((unsigned __int128)f->accesses * upto / (f->end - f->start));
}

/* The region's pages from @f->done to @to go to [@start, @end) (@gap: to no range). */
static int feed_piece(struct feed *f, uint64_t to, uint64_t start, uint64_t end, bool gap)
{
	uint64_t share = feed_upto(f, to - f->start) - feed_upto(f, f->done - f->start);

	f->done = to;
	if (!share)
		return 0;
	if (gap) {
		f->gaps += share;
		return 0;
	}
	if (!psi_grow((void **)&f->a, &f->cap, f->n + 1, sizeof(*f->a), 16))
		return -ENOMEM;
	f->a[f->n++] = (struct psi_counts_add){ start, end, share };
	return 0;
}

/* ps_store_foreach_range()'s callback: a range overlapping the region, in order. */
static int feed_range(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct feed *f = arg;
	uint64_t lo = start > f->start ? start : f->start;
	uint64_t hi = end < f->end ? end : f->end;
	int err = 0;

	(void)pol;
	if (lo > f->done)
		err = feed_piece(f, lo, 0, 0, true);
	return err ? err : feed_piece(f, hi, start, end, false);
}

/*
 * The accesses one feed may add: their rate's fixed point, and the
 * counter of a range that took every one of them, keep room to spare.
 */
#define COUNTS_FEED_MAX ((uint64_t)1 << 53)

int ps_store_counts_feed(struct ps_store *store, const struct ps_access_region *regions,
		size_t n)
{
	struct feed f = { 0 };
	struct _ps_counts *c;
	uint64_t total = 0;
	size_t i;
	int err = 0;

	if (!store || !regions)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (regions[i].start >= regions[i].end)
			return -EINVAL;
		if (regions[i].accesses > COUNTS_FEED_MAX - total)
			return -EOVERFLOW;
		total += regions[i].accesses;
	}
	if (!(c = PSI_LOAD_ACQUIRE(store->counting)))
		return -ENODATA;
	if (psi_unlikely(psi_held(store) && psi_variant_has(store, PSI_V_WALK_EXCL)))
		return -EDEADLK;
	/* The shares, from walks of the store's ranges (no lock of the counts held). */
	for (i = 0; i < n && !err; i++) {
		f.start = f.done = regions[i].start;
		f.end = regions[i].end;
		f.accesses = regions[i].accesses;
		err = store->ops->foreach_range(store, f.start, f.end, feed_range, &f);
		if (!err && f.done < f.end)
			err = feed_piece(&f, f.end, 0, 0, true);
	}
	/* Into the table of exited threads' counts, all or none. */
	if (!err)
		err = psi_counts_add_retired(c, f.a, f.n, total, f.gaps);
	psi_free(f.a);
	return err;
}
