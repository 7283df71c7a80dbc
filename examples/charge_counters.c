// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Charge pages to nested groups with limits, as a memory controller does:
 * a root, a "jobs" group with a tighter limit, one leaf per worker thread.
 * Workers charge until a limit refuses them, "reclaim" some of their own
 * pages, and go on.  Run it with a kind name: spin, seqlock, atomic, stock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <polstore/polstore.h>

#define WORKERS 4
#define ROUNDS 200000

struct worker {
	pthread_t tid;
	struct ps_charge *leaf;
	long held, reclaims;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct ps_charge *fail;
	long i;

	for (i = 0; i < ROUNDS; i++) {
		if (ps_charge_try(w->leaf, 1, &fail) == 0) {
			w->held++;
			continue;
		}
		/* Refused somewhere up the tree: give back half of ours, like reclaim would. */
		w->reclaims++;
		ps_charge_uncharge(w->leaf, w->held / 2);
		w->held -= w->held / 2;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int kind = ps_charge_kind_from_name(argc > 1 ? argv[1] : "stock");
	struct ps_charge *root, *jobs;
	struct worker w[WORKERS];
	struct ps_charge_stat st;
	long held = 0;
	int i;

	if (kind < 0) {
		fprintf(stderr, "usage: %s [spin|seqlock|atomic|stock]\n", argv[0]);
		return 2;
	}
	root = ps_charge_create(kind, NULL, 4096);
	jobs = ps_charge_create(kind, root, 2048);
	if (!root || !jobs) {
		perror("ps_charge_create");
		return 1;
	}
	for (i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){ .leaf = ps_charge_create(kind, jobs, 1024) };
		if (!w[i].leaf || pthread_create(&w[i].tid, NULL, work, &w[i])) {
			fprintf(stderr, "setup failed\n");
			return 1;
		}
	}
	for (i = 0; i < WORKERS; i++)
		pthread_join(w[i].tid, NULL);

	/* Pages pre-charged in per-thread stocks go back before an exact look. */
	ps_charge_drain_stock(root);
	printf("kind %s\n", ps_charge_kind_name(kind));
	for (i = 0; i < WORKERS; i++) {
		printf("  leaf %d: usage %ld (holds %ld), reclaims %ld, failcnt %ld\n", i,
				ps_charge_read(w[i].leaf, PS_CHARGE_USAGE), w[i].held, w[i].reclaims,
				ps_charge_read(w[i].leaf, PS_CHARGE_FAILCNT));
		held += w[i].held;
	}
	ps_charge_stat(jobs, &st);
	printf("  jobs: usage %ld/%ld, max %ld, failcnt %ld, largest overshoot %ld (bound %ld)\n",
			st.usage, st.limit, st.max_usage, st.failcnt, st.max_overshoot,
			ps_charge_overshoot_bound(kind, WORKERS, 1, ps_charge_stock_batch(w[0].leaf)));
	printf("  root: usage %ld, sum of leaves %ld\n", ps_charge_read(root, PS_CHARGE_USAGE),
			held);
	if (ps_charge_read(root, PS_CHARGE_USAGE) != held) {
		fprintf(stderr, "accounting mismatch\n");
		return 1;
	}
	for (i = 0; i < WORKERS; i++) {
		ps_charge_uncharge(w[i].leaf, w[i].held);
		ps_charge_destroy(w[i].leaf);
	}
	ps_charge_destroy(jobs);
	return ps_charge_destroy(root) ? 1 : 0;
}
