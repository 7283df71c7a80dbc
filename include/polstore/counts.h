/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* polstore access counts per range, off until asked for.  Guide: docs/runtime.md. */
#ifndef POLSTORE_COUNTS_H
#define POLSTORE_COUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ps_store;

/**
 * struct ps_range_counts - what was counted for one range
 * @start: the range's first page, as the store holds it now
 * @end: the page after its last
 * @count: the accesses counted in it
 * @last_epoch: the epoch of the last one (ps_store_counts_tick()); 0 with none
 * @rate: this epoch's accesses, plus half the last one's, a quarter of the one before...
 */
struct ps_range_counts {
	uint64_t start, end;
	uint64_t count;
	uint64_t last_epoch;
	double rate;
};

/**
 * struct ps_counts_sum - a store's counts as a whole
 * @counted: every access counted; at quiescence @in_ranges + @gaps + @gone
 * @in_ranges: those that fall to a range the store holds now
 * @gaps: those in no range at the access (or in no counter: memory ran out)
 * @gone: those of ranges that no range of the store overlaps any more
 * @epoch: the current epoch
 */
struct ps_counts_sum {
	uint64_t counted, in_ranges, gaps, gone;
	uint64_t epoch;
};

/** ps_store_counts_top()'s order: the most accesses first. */
#define PS_COUNTS_BY_COUNT 0
/** ps_store_counts_top()'s order: the highest decayed rate first. */
#define PS_COUNTS_BY_RATE 1

/**
 * typedef ps_counts_fn - callback of ps_store_counts_foreach()
 *
 * Called with no lock of polstore's held: it may call any polstore function.
 * Return: 0 to go on, anything else to stop the walk (that value is returned).
 */
typedef int (*ps_counts_fn)(const struct ps_range_counts *counts, void *arg);

/**
 * ps_store_counts_enable() - start or stop counting accesses to @store
 * @store: the store
 * @on: true to count, false to stop (what was counted is kept)
 *
 * Off, counting costs one load; on, each thread counts in counters of its
 * own, folded when read.  The counts live until ps_store_destroy().
 * Context: any thread outside read-side sections.
 * Return: 0; -EINVAL for a NULL @store; -ENOMEM (counting stays off).
 */
PS_API int ps_store_counts_enable(struct ps_store *store, bool on);

/**
 * ps_store_lookup_node_count() - ps_store_lookup_node(), counting the access
 * @store: the store
 * @idx: the page
 * @local_node: as for ps_store_lookup_node()
 *
 * While counting is on, the access counts to the range holding @idx (a
 * set meanwhile: maybe to the range as it was), else as a gap.  The fault
 * plane counts its faults so.
 * Context: any thread; inside a read-side section only of an RCU, RCU_QSBR
 * or SEQLOCK @store; allocates the thread's counters at its first count.
 * Return: as ps_store_lookup_node().
 */
PS_API int ps_store_lookup_node_count(struct ps_store *store, uint64_t idx, int local_node);

/**
 * ps_store_count_access() - count an access to page @idx of @store, with no lookup
 * @store: the store
 * @idx: the page
 *
 * As ps_store_lookup_node_count() without the lookup: for a page looked up
 * already, or an access learnt of elsewhere (a sampler, an access-bit scan).
 * Context: as ps_store_lookup_node_count().
 * Return: 0 (also while counting is off); -EINVAL for a NULL @store.
 */
PS_API int ps_store_count_access(struct ps_store *store, uint64_t idx);

/**
 * struct ps_access_region - accesses a monitor saw in a region of pages
 * @start: the region's first page
 * @end: the page after its last (@start < @end)
 * @accesses: what the monitor counted there (docs/runtime.md: DAMON's regions)
 */
struct ps_access_region {
	uint64_t start, end;
	uint64_t accesses;
};

/**
 * ps_store_counts_feed() - count accesses a monitor reported, region by region
 * @store: the store
 * @regions: the regions, in any order, overlapping or not
 * @n: how many
 *
 * Each region's accesses go to the ranges it overlaps, shared by pages;
 * pages in no range count as gaps; in this epoch (docs/runtime.md).
 * Context: any thread outside read-side sections; allocates.
 * Return: 0; -EINVAL (NULL, @start >= @end); -EOVERFLOW (over 2^53 accesses,
 * a counter full); -ENODATA (counting off); -ENOMEM; -EDEADLK: nothing counted.
 */
PS_API int ps_store_counts_feed(struct ps_store *store, const struct ps_access_region *regions,
		size_t n);

/**
 * ps_store_counts_tick() - end the current epoch
 * @store: the store
 *
 * The program's clock for the counts (a tiering daemon ticks once an
 * interval): each tick halves the rates.  Counting starts in epoch 1.
 * Context: any thread.
 * Return: the new epoch; 0 for a NULL @store or one that never counted.
 */
PS_API uint64_t ps_store_counts_tick(struct ps_store *store);

/**
 * ps_store_counts_foreach() - the counts of every range overlapping [@start, @end)
 * @store: the store
 * @start: the window's first page
 * @end: the page after its last (@start < @end)
 * @fn: called for each range in ascending order, counted or not
 * @arg: @fn's last argument
 *
 * A range's figures stay with the range now holding its first page, else
 * with the first range overlapping it; with none, they are gone
 * (docs/runtime.md says what trims, splits and replacements do).  Exact at
 * quiescence: a fold of counters that may still count.
 * Context: any thread outside read-side sections; allocates; @fn as
 * ps_counts_fn says.
 * Return: 0 after a full walk, else @fn's non-zero return; -EINVAL (a NULL
 * pointer, an empty window); -ENODATA: @store never counted; -ENOMEM.
 */
PS_API int ps_store_counts_foreach(struct ps_store *store, uint64_t start, uint64_t end,
		ps_counts_fn fn, void *arg);

/**
 * ps_store_counts_top() - the @n ranges of [@start, @end) counted most
 * @store: the store
 * @start: the window's first page
 * @end: the page after its last (@start < @end)
 * @by: PS_COUNTS_BY_COUNT or PS_COUNTS_BY_RATE
 * @out: receives up to @n ranges, the highest first (ties: the lower @start)
 * @n: room in @out
 *
 * As ps_store_counts_foreach(), keeping the @n highest counted ranges.
 * Context: as ps_store_counts_foreach().
 * Return: the number of ranges written; else as ps_store_counts_foreach()
 * (-EINVAL also for an unknown @by).
 */
PS_API int ps_store_counts_top(struct ps_store *store, uint64_t start, uint64_t end, int by,
		struct ps_range_counts *out, size_t n);

/**
 * ps_store_counts_sum() - a store's counts as a whole
 * @store: the store
 * @sum: receives them
 *
 * Context: as ps_store_counts_foreach().
 * Return: 0; else as ps_store_counts_foreach().
 */
PS_API int ps_store_counts_sum(struct ps_store *store, struct ps_counts_sum *sum);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_COUNTS_H */
