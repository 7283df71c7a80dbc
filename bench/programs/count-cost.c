// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * count-cost: what counting an access adds to a node lookup of an RCU
 * store, one thread, no writer.  A store of 64 ranges [100k, 100k + 50)
 * and two key patterns:
 *
 *   hot     the 8 pages [1010, 1018) in turn: one range, the fault path
 *           of a hot policy;
 *   spread  page 100k + 10 of range k = 37 i mod 64: every lookup another
 *           range.
 *
 * Two ways to run it.  Timed: for each of rcu and rcu-qsbr and each
 * pattern, --lookups ps_store_lookup_node() calls and as many
 * ps_store_lookup_node_count() calls (counting on), alternately in --reps
 * repetitions (thread CPU time; rcu-qsbr on an online thread); prints the median ratio of counted over
 * plain lookups per second and its spread (min, max).  Counted in
 * instructions, which a loaded machine does not disturb: one
 * configuration per process,
 *
 *   ./count-cost --one rcu|rcu-qsbr hot|spread plain|counted N
 *
 * under `valgrind --tool=callgrind`, at N and 2N; the difference of the
 * two totals over N is the instructions one call takes.  Not built by
 * CMake:
 *
 *   cc -O2 -Iinclude -Ibuild-rel/include bench/programs/count-cost.c \
 *      build-rel/src/libpolstore.a -lurcu -lurcu-qsbr -lurcu-common -lnuma -lpthread -o count-cost
 *   ./count-cost [--reps 15] [--lookups 10000000]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <polstore/polstore.h>

static uint64_t key(int spread, long i)
{
	return spread ? (uint64_t)((i * 37) % 64) * 100 + 10 : 1010 + (uint64_t)(i & 7);
}

static long run(struct ps_store *s, int spread, int counted, long n)
{
	long i, sum = 0;

	if (counted)
		for (i = 0; i < n; i++)
			sum += ps_store_lookup_node_count(s, key(spread, i), 0);
	else
		for (i = 0; i < n; i++)
			sum += ps_store_lookup_node(s, key(spread, i), 0);
	return sum;
}

static struct ps_store *store_new(enum ps_sync sync, struct ps_policy *pol)
{
	struct ps_store *s = ps_store_create(sync);
	int k;

	if (!s)
		exit(1);
	for (k = 0; k < 64; k++)
		if (ps_store_set(s, 100 * (uint64_t)k, 100 * (uint64_t)k + 50, pol))
			exit(1);
	if (ps_store_counts_enable(s, true))
		exit(1);
	return s;
}

static double cpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "rcu", "rcu-qsbr" };
	enum ps_sync syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };
	struct ps_policy *pol = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);
	long lookups = 10000000, sink = 0;
	int reps = 15, v, spread, r, i;

	if (!pol)
		return 1;
	if (argc == 6 && !strcmp(argv[1], "--one")) {
		v = !strcmp(argv[2], "rcu-qsbr");
		if (v && ps_qsbr_thread_online())
			return 1;
		return run(store_new(syncs[v], pol), !strcmp(argv[3], "spread"),
				   !strcmp(argv[4], "counted"), atol(argv[5])) < 0;
	}
	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--lookups"))
			lookups = atol(argv[i + 1]);
	}
	if (reps < 1 || reps > 1000 || lookups < 1)
		return 1;
	printf("variant   pattern  counted/plain lookups per second: median (min, max)\n");
	for (v = 0; v < 2; v++) {
		struct ps_store *s = store_new(syncs[v], pol);

		if (v && ps_qsbr_thread_online()) /* the fault path's thread: online */
			return 1;
		for (spread = 0; spread < 2; spread++) {
			double ratio[1000], t[2];

			for (r = 0; r < reps; r++) {
				for (i = 0; i < 2; i++) {
					int counted = (i + r) & 1;
					double t0 = cpu_now();

					sink += run(s, spread, counted, lookups);
					t[counted] = cpu_now() - t0;
				}
				ratio[r] = t[0] / t[1];
			}
			qsort(ratio, reps, sizeof(ratio[0]), cmp);
			printf("%-9s %-8s %.2f (%.2f, %.2f)\n", names[v], spread ? "spread" : "hot",
					ratio[reps / 2], ratio[0], ratio[reps - 1]);
		}
		if (v)
			ps_qsbr_thread_offline();
		ps_store_destroy(s);
	}
	ps_policy_put(pol);
	return sink < 0;
}
