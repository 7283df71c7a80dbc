// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Committed-memory accounting under the three overcommit policies, like the
 * kernel's vm_committed_as: threads map and unmap 128 MB (32768 pages of
 * 4 KiB) in a loop.  Loose policies get a large per-thread batch (few trips
 * to the shared lock); NEVER gets a small one and an exact check near the
 * commit limit.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <polstore/polstore.h>

#define THREADS 2
#define ROUNDS 200000
#define MAPPING 32768

static struct ps_commit *cm;
static long refused[THREADS];

static void *mmap_loop(void *arg)
{
	long idx = (long)arg, i;

	for (i = 0; i < ROUNDS; i++) {
		if (ps_commit_charge(cm, MAPPING)) {
			refused[idx]++;
			continue;
		}
		ps_commit_uncharge(cm, MAPPING);
	}
	return NULL;
}

static double run(void)
{
	pthread_t t[THREADS];
	struct timespec a, b;
	long i;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, mmap_loop, (void *)i);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)THREADS * ROUNDS / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
}

int main(void)
{
	const uint64_t total = (uint64_t)16 << 18; /* 16 GiB of 4 KiB pages */
	struct ps_pcounter_snapshot snap;
	int mode;

	for (mode = 0; mode < PS_OVERCOMMIT_COUNT; mode++) {
		cm = ps_commit_create(mode, total, THREADS);
		if (!cm) {
			perror("ps_commit_create");
			return 1;
		}
		/* NEVER: room for one mapping and a half: the two threads collide. */
		ps_commit_set_limit(cm, MAPPING + MAPPING / 2);
		refused[0] = refused[1] = 0;
		printf("%-7s batch %-7d %12.0f map+unmap/s, refused %ld\n", ps_overcommit_name(mode),
				ps_pcounter_batch(ps_commit_counter(cm)), run(),
				refused[0] + refused[1]);
		ps_pcounter_snapshot(ps_commit_counter(cm), &snap);
		printf("        committed %lld (approximate %lld, error bound %lld)\n",
				(long long)snap.exact, (long long)snap.approx,
				(long long)ps_pcounter_error_bound(snap.batch, THREADS));
		ps_commit_destroy(cm);
	}

	/* Switching to NEVER folds every thread's delta: the cheap read is exact at once. */
	cm = ps_commit_create(PS_OVERCOMMIT_GUESS, total, THREADS);
	if (!cm)
		return 1;
	ps_commit_charge(cm, 100);
	printf("guess: committed %lld approximately, %lld exactly\n",
			(long long)ps_commit_committed(cm, false),
			(long long)ps_commit_committed(cm, true));
	ps_commit_set_mode(cm, PS_OVERCOMMIT_NEVER);
	printf("never: committed %lld approximately, %lld exactly\n",
			(long long)ps_commit_committed(cm, false),
			(long long)ps_commit_committed(cm, true));
	ps_commit_destroy(cm);
	return 0;
}
