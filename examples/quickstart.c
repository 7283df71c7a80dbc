// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * quickstart: a store of placement policies over page indices.
 *
 * Create policies, give ranges of a store a policy, look indices up, walk
 * the ranges (all of them, those in a window, or step by step), change
 * several ranges in one batch, and follow the reference rules:
 *  - ps_policy_create(), ps_store_lookup() and ps_store_next() hand you a
 *    reference: put it;
 *  - ps_store_set() and ps_store_set_many() take their own references:
 *    yours stay yours;
 *  - ps_store_lookup_borrow(), ps_store_foreach() and
 *    ps_store_foreach_range() lend a policy only until the read section or
 *    the callback ends: ps_policy_get() it to keep it.
 *
 * Build against an installed polstore:
 *   cc quickstart.c $(pkg-config --cflags --libs polstore) -o quickstart
 * Usage: quickstart [variant]   (spin, rwlock, seqlock, rcu, rcu-qsbr)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

static int print_range(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	int *n = arg;

	printf("  [%llu, %llu) %s on %d node(s)\n", (unsigned long long)start,
			(unsigned long long)end, ps_mode_name(ps_policy_mode(pol)),
			ps_policy_weight(pol));
	++*n;
	return 0; /* non-zero would stop the walk */
}

int main(int argc, char **argv)
{
	unsigned long node0 = 1UL; /* bit i is node i */
	int sync = argc > 1 ? ps_sync_from_name(argv[1]) : PS_SYNC_RCU;
	struct ps_policy *bind, *interleave, *pol;
	const struct ps_policy *borrowed;
	struct ps_store *store;
	uint64_t idx, start = 0, end = 0;
	int ranges = 0;

	if (sync < 0) {
		fprintf(stderr, "usage: %s [spin|rwlock|seqlock|rcu|rcu-qsbr]\n", argv[0]);
		return 2;
	}
	printf("polstore %s, variant %s\n", ps_version(), ps_sync_name(sync));

	store = ps_store_create(sync);
	bind = ps_policy_create(PS_MPOL_BIND, 0, &node0, 1);
	interleave = ps_policy_create(PS_MPOL_INTERLEAVE, 0, &node0, 1);
	if (!store || !bind || !interleave) {
		perror("polstore");
		return 1;
	}

	/* Pages [0, 100) bound to node 0, then [40, 60) interleaved: the bind splits. */
	if (ps_store_set(store, 0, 100, bind) || ps_store_set(store, 40, 60, interleave)) {
		fprintf(stderr, "ps_store_set failed\n");
		return 1;
	}
	/* The store holds its own references; ours can go now. */
	ps_policy_put(bind);
	ps_policy_put(interleave);

	/* A counted lookup: the policy is ours until we put it. */
	pol = ps_store_lookup(store, 50);
	printf("page 50: %s\n", pol ? ps_mode_name(ps_policy_mode(pol)) : "default");
	ps_policy_put(pol);

	/* Nothing covers page 500: NULL means the default policy. */
	pol = ps_store_lookup(store, 500);
	printf("page 500: %s\n", pol ? ps_mode_name(ps_policy_mode(pol)) : "default");

	/* A borrowed lookup: no shared write, valid until the section ends. */
	ps_store_read_lock(store);
	borrowed = ps_store_lookup_borrow(store, 10);
	printf("page 10: %s (borrowed)\n",
			borrowed ? ps_mode_name(ps_policy_mode(borrowed)) : "default");
	ps_store_read_unlock(store);

	printf("ranges:\n");
	ps_store_foreach(store, print_range, &ranges);
	if (ranges != 3 || ps_store_check(store, NULL)) {
		fprintf(stderr, "unexpected store state\n");
		return 1;
	}

	/* The ranges that meet a window, whole (not clipped), from one snapshot. */
	printf("ranges meeting [30, 45):\n");
	ranges = 0;
	ps_store_foreach_range(store, 30, 45, print_range, &ranges);

	/* One batch, seen by readers all at once: move the interleaved stretch to [100, 120). */
	pol = ps_store_lookup(store, 50);
	{
		struct ps_set_op ops[] = { { 40, 60, NULL }, { 100, 120, pol } };

		if (ranges != 2 || ps_store_set_many(store, ops, 2)) {
			fprintf(stderr, "window or batch failed\n");
			return 1;
		}
	}
	ps_policy_put(pol);

	/*
	 * Step by step without a callback: each ps_store_next() is one
	 * linearizable read, but the loop is no snapshot (sets in between show).
	 */
	printf("after the batch:\n");
	ranges = 0;
	for (idx = 0; ps_store_next(store, idx, &start, &end, &pol) == 0; idx = end) {
		print_range(start, end, pol, &ranges);
		ps_policy_put(pol);
	}
	if (ranges != 3) {
		fprintf(stderr, "unexpected store state after the batch\n");
		return 1;
	}

	ps_store_destroy(store);
	return 0;
}
