// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The program scripts/check-crossings.sh runs under callgrind: an RCU
 * store of a few thousand ranges, warmed by sets and a grace period, then
 * one ps_store_set() (crossing_set()) and one ps_store_lookup() that
 * misses the thread's lookup cache (crossing_lookup()), each in a function
 * of its own, whose calls callgrind collects alone (--toggle-collect).
 *
 * Usage: crossings [rcu|rcu-qsbr]
 */
#include <stdio.h>
#include <stdlib.h>

#include <polstore/polstore.h>

#define RANGES 4096
#define STEP 16

__attribute__((noinline)) int crossing_set(struct ps_store *s, uint64_t start, uint64_t end,
		struct ps_policy *pol);
__attribute__((noinline)) struct ps_policy *crossing_lookup(struct ps_store *s, uint64_t idx);

/* One set: what callgrind collects. */
__attribute__((noinline)) int crossing_set(struct ps_store *s, uint64_t start, uint64_t end,
		struct ps_policy *pol)
{
	return ps_store_set(s, start, end, pol);
}

/* One lookup: what callgrind collects. */
__attribute__((noinline)) struct ps_policy *crossing_lookup(struct ps_store *s, uint64_t idx)
{
	return ps_store_lookup(s, idx);
}

int main(int argc, char **argv)
{
	int sync = ps_sync_from_name(argc > 1 ? argv[1] : "rcu");
	unsigned long node0 = 1;
	struct ps_policy *pol[2], *got;
	struct ps_store *s;
	uint64_t i, mid = (uint64_t)RANGES / 2 * STEP;

	if (sync < 0) {
		fprintf(stderr, "usage: %s [rcu|rcu-qsbr]\n", argv[0]);
		return 2;
	}
	if (sync == PS_SYNC_RCU_QSBR && ps_qsbr_thread_online()) {
		perror("ps_qsbr_thread_online");
		return 1;
	}
	s = ps_store_create(sync);
	pol[0] = ps_policy_create(PS_MPOL_BIND, 0, &node0, 1);
	pol[1] = ps_policy_create(PS_MPOL_INTERLEAVE, 0, &node0, 1);
	if (!s || !pol[0] || !pol[1]) {
		perror("polstore");
		return 1;
	}
	/* Ranges of half a step, in ascending order; then sets inside some of them. */
	for (i = 0; i < RANGES; i++)
		if (ps_store_set(s, i * STEP, i * STEP + STEP / 2, pol[i & 1]))
			return 1;
	for (i = 0; i < RANGES; i += 7)
		if (ps_store_set(s, i * STEP + 1, i * STEP + 3, pol[(i + 1) & 1]))
			return 1;
	/* What those sets retired is ripe: the set below is one of a store in use. */
	if (ps_store_synchronize(s))
		return 1;
	got = ps_store_lookup(s, 0);
	ps_policy_put(got);
	/* A new range inside one of the middle: the range splits in three. */
	if (crossing_set(s, mid + 2, mid + 5, pol[1]))
		return 1;
	/* A key of another range than the last lookup's: a miss of the thread's cache. */
	got = crossing_lookup(s, mid + 3);
	if (got != pol[1]) {
		fprintf(stderr, "crossings: the lookup did not find the set's policy\n");
		return 1;
	}
	ps_policy_put(got);
	ps_policy_put(pol[0]);
	ps_policy_put(pol[1]);
	ps_store_destroy(s);
	if (sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	return 0;
}
