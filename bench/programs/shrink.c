// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * shrink: what an RCU store holds and what its lookups cost after it
 * shrinks, against a store filled anew with the same ranges.  For each of
 * rcu and rcu-qsbr and each size N (ranges before the shrink), two
 * patterns:
 *
 *   munmap  N one-page ranges [2k, 2k + 1) set in order, then in each
 *           256-page block every range but the one at its middle removed
 *           by two sets, each across the leaves between (N / 128 left);
 *   shrink  N ranges [4k, 4k + 3) set in order, N / 4 random sets of 1-3
 *           pages under two policies (splits and replacements), then
 *           every range but one in 128 removed one set at a time, in a
 *           scattered order (the store falls far below the size at which
 *           its index nodes come from chunks).
 *
 * Then ps_store_synchronize(), and a store given the ranges left in order
 * (one set each, synchronized).  Prints both stores' ps_store_memory(),
 * their index depth, and the ratio of their lookup costs: random present
 * pages looked up with ps_store_lookup_borrow() in read sections of 64
 * (rcu-qsbr: an online thread), the two stores timed alternately in
 * --reps repetitions of --lookups each (the first of each pair swapped
 * every repetition; thread CPU time); the median ratio and its spread
 * (min, max).  Not built by CMake:
 *
 *   cc -O2 -Iinclude -Ibuild-rel/include bench/programs/shrink.c \
 *      build-rel/src/libpolstore.a -lurcu -lurcu-qsbr -lurcu-common -lnuma -lpthread -o shrink
 *   ./shrink [--sizes 20000,100000,260000] [--reps 15] [--lookups 1000000]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <polstore/polstore.h>
#include <polstore/static/store.h>

#define BLOCK 256

struct ranges {
	struct ps_set_op *v;
	size_t n, cap;
};

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dull;
}

static void die(const char *what)
{
	fprintf(stderr, "shrink: %s failed\n", what);
	exit(1);
}

static void set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	if (ps_store_set(s, start, end, pol))
		die("ps_store_set");
}

static int keep(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ranges *r = arg;

	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 1024;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		if (!r->v)
			die("realloc");
	}
	r->v[r->n++] = (struct ps_set_op){ start, end, pol };
	return 0;
}

static void ranges_of(struct ps_store *s, struct ranges *r)
{
	r->n = 0;
	if (ps_store_foreach(s, keep, r))
		die("ps_store_foreach");
}

static int depth(struct ps_store *s)
{
	const struct ps_ix_node *root = __atomic_load_n(&s->ix.node, __ATOMIC_ACQUIRE);

	return root ? root->height + 1 : 0;
}

static void munmap_pattern(struct ps_store *s, long n, struct ps_policy *p)
{
	uint64_t b;
	long i;

	for (i = 0; i < n; i++)
		set(s, 2 * (uint64_t)i, 2 * (uint64_t)i + 1, p);
	for (b = 0; b < 2 * (uint64_t)n; b += BLOCK) {
		set(s, b, b + BLOCK / 2, NULL);
		set(s, b + BLOCK / 2 + 1, b + BLOCK, NULL);
	}
}

static void shrink_pattern(struct ps_store *s, long n, struct ps_policy *p, struct ps_policy *q)
{
	struct ranges r = { NULL, 0, 0 };
	size_t i, k, stride = 7919;
	long c;

	for (c = 0; c < n; c++)
		set(s, 4 * (uint64_t)c, 4 * (uint64_t)c + 3, p);
	for (c = 0; c < n / 4; c++) {
		uint64_t a = rnd() % (4 * (uint64_t)n);

		set(s, a, a + 1 + rnd() % 3, c % 2 ? q : p);
	}
	ranges_of(s, &r);
	while (r.n % stride == 0)
		stride += 2;
	for (i = 0; i < r.n; i++) {
		k = (i * stride) % r.n;
		if (k % 128)
			set(s, r.v[k].start, r.v[k].end, NULL);
	}
	free(r.v);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const void *volatile sink;

static double time_lookups(struct ps_store *s, const uint64_t *keys, long m)
{
	double t0 = now_s();
	long i, j;

	for (i = 0; i < m; i += 64) {
		ps_store_read_lock(s);
		for (j = i; j < i + 64 && j < m; j++) {
			const struct ps_policy *p = ps_store_lookup_borrow(s, keys[j]);

			if (!p)
				die("a lookup of a present page");
			sink = p;
		}
		ps_store_read_unlock(s);
	}
	return now_s() - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void measure(enum ps_sync sync, const char *pattern, long n, int reps, long lookups,
		    struct ps_policy *p, struct ps_policy *q)
{
	struct ps_store *s = ps_store_create(sync), *f = ps_store_create(sync);
	struct ranges r = { NULL, 0, 0 };
	double *ratio = calloc((size_t)reps, sizeof(*ratio));
	uint64_t *keys = malloc((size_t)lookups * sizeof(*keys));
	size_t ms, mf, i;
	bool qsbr = sync == PS_SYNC_RCU_QSBR;
	int k;

	if (!s || !f || !ratio || !keys)
		die("setup");
	if (!strcmp(pattern, "munmap"))
		munmap_pattern(s, n, p);
	else
		shrink_pattern(s, n, p, q);
	if (ps_store_synchronize(s))
		die("ps_store_synchronize");
	ranges_of(s, &r);
	for (i = 0; i < r.n; i++)
		set(f, r.v[i].start, r.v[i].end, r.v[i].pol);
	if (ps_store_synchronize(f))
		die("ps_store_synchronize");
	ms = ps_store_memory(s);
	mf = ps_store_memory(f);
	for (i = 0; i < (size_t)lookups; i++) {
		const struct ps_set_op *o = &r.v[rnd() % r.n];

		keys[i] = o->start + rnd() % (o->end - o->start);
	}
	if (qsbr && ps_qsbr_thread_online())
		die("ps_qsbr_thread_online");
	/* Warm both. */
	time_lookups(s, keys, lookups);
	time_lookups(f, keys, lookups);
	for (k = 0; k < reps; k++) {
		double ts, tf;

		if (k % 2) {
			tf = time_lookups(f, keys, lookups);
			ts = time_lookups(s, keys, lookups);
		} else {
			ts = time_lookups(s, keys, lookups);
			tf = time_lookups(f, keys, lookups);
		}
		ratio[k] = ts / tf;
	}
	if (qsbr)
		ps_qsbr_thread_offline();
	qsort(ratio, (size_t)reps, sizeof(*ratio), cmp_double);
	printf("%-8s %-7s %7ld %6zu %10zu %3d %10zu %3d %6.2f %6.2f %6.2f %6.2f\n",
			ps_sync_name(sync), pattern, n, r.n, ms, depth(s), mf, depth(f),
			(double)ms / (double)mf, ratio[reps / 2], ratio[0], ratio[reps - 1]);
	fflush(stdout);
	ps_store_destroy(s);
	ps_store_destroy(f);
	free(r.v);
	free(ratio);
	free(keys);
}

int main(int argc, char **argv)
{
	static const enum ps_sync syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };
	static const char *const patterns[] = { "munmap", "shrink" };
	char sizes_arg[256] = "20000,100000,260000";
	unsigned long mask = 1, mask2 = 2;
	long lookups = 1000000, sizes[16];
	struct ps_policy *p, *q;
	int reps = 15, nsizes = 0, i, j, a;
	char *tok, *save;

	for (a = 1; a + 1 < argc; a += 2) {
		if (!strcmp(argv[a], "--sizes"))
			snprintf(sizes_arg, sizeof(sizes_arg), "%s", argv[a + 1]);
		else if (!strcmp(argv[a], "--reps"))
			reps = atoi(argv[a + 1]);
		else if (!strcmp(argv[a], "--lookups"))
			lookups = atol(argv[a + 1]);
		else
			break;
	}
	if (a < argc || reps < 1 || lookups < 64) {
		fprintf(stderr, "usage: shrink [--sizes N,N,...] [--reps R] [--lookups M]\n");
		return 2;
	}
	for (tok = strtok_r(sizes_arg, ",", &save); tok && nsizes < 16;
			tok = strtok_r(NULL, ",", &save))
		sizes[nsizes++] = atol(tok);
	p = ps_policy_create(PS_MPOL_BIND, 0, &mask, 64);
	q = ps_policy_create(PS_MPOL_BIND, 0, &mask2, 64);
	if (!p || !q)
		die("ps_policy_create");
	printf("# %d repetitions of %ld lookups per store; lookup ratio: shrunk / fresh\n", reps,
			lookups);
	printf("%-8s %-7s %7s %6s %10s %3s %10s %3s %6s %6s %6s %6s\n", "variant", "pattern",
			"ranges", "left", "bytes", "lvl", "fresh", "lvl", "mem", "lookup", "min",
			"max");
	for (i = 0; i < 2; i++)
		for (a = 0; a < nsizes; a++)
			for (j = 0; j < 2; j++)
				measure(syncs[i], patterns[j], sizes[a], reps, lookups, p, q);
	ps_policy_put(p);
	ps_policy_put(q);
	return 0;
}
