// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * tiering: what a memory-tiering daemon starts from.  Worker threads
 * fault pages of a mapping (the fault path asks the store for a node and
 * counts the access); every interval a daemon reads the hottest ranges,
 * moves them to the fast node and the ranges that cooled back to the slow
 * one (a set, then ps_store_apply_range() to move the pages already
 * there); the workers keep a cache of placements per range that a
 * subscription empties when a range's policy changes.
 *
 * The mapping is -n ranges of 16 pages, all on the slow node at first.
 * Each phase of -r intervals makes another four ranges hot.  At the end
 * the four hot ranges of the last phase must be on the fast node, and no
 * cached placement may differ from the store's.
 *
 * The fast node is node 0, the slow one the highest node (node 0 too on a
 * machine with one: the moves are then made, and change nothing).
 *
 * Build against an installed polstore:
 *   cc tiering.c $(pkg-config --cflags --libs polstore) -lpthread -o tiering
 * Usage: tiering [-t workers] [-n ranges] [-p phases] [-r intervals a phase] [-i ms]
 */
#define _GNU_SOURCE /* getcpu() */
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <polstore/polstore.h>

#define RANGE_PAGES 16
#define HOT 4 /* hot ranges a phase, and ranges the fast node holds */
#define MIN_ACCESSES 2000

static struct ps_store *store;
static struct ps_policy *fast, *slow;
static int fast_node, slow_node;
static long nranges;
/*
 * Per range: a version the subscription raises, and the node a worker
 * cached plus one (0: none).  A worker caches with a compare-and-swap from
 * the word it found empty, so that an emptying meanwhile wins.
 */
static uint64_t *cached;
#define CACHE_NODE(w) ((int)((w) & 0xffff) - 1)
static int hot_base;	      /* the first hot range of this phase */
static int stop;
static uint64_t seen_gen;     /* the last generation the subscription reported */

static struct ps_policy *preferred(int node)
{
	unsigned long mask[4] = { 0 };

	mask[node / 64] = 1UL << (node % 64);
	return ps_policy_create(PS_MPOL_PREFERRED, 0, mask, 256);
}

static uint64_t next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* A worker: 9 accesses in 10 to the hot ranges, the rest anywhere. */
static void *worker(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ULL | 1;
	unsigned cpu, here;
	/* getcpu(2), not numa_node_of_cpu(): libnuma fills a cache at first use, racily. */
	int local = getcpu(&cpu, &here) ? 0 : (int)here;

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		long k = next_rand(&x) % 10 ? (__atomic_load_n(&hot_base, __ATOMIC_RELAXED) +
							(long)(next_rand(&x) % HOT)) % nranges
					    : (long)(next_rand(&x) % (uint64_t)nranges);
		uint64_t page = (uint64_t)k * RANGE_PAGES + next_rand(&x) % RANGE_PAGES;
		uint64_t w = __atomic_load_n(&cached[k], __ATOMIC_ACQUIRE);
		int node;

		/* A fault: where the page goes, counted.  A real one would place the page there. */
		if (CACHE_NODE(w) < 0) {
			node = ps_store_lookup_node_count(store, page, local);
			if (node >= 0)
				__atomic_compare_exchange_n(&cached[k], &w, w | (uint64_t)(node + 1),
						false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		} else {
			ps_store_count_access(store, page); /* the cache answered; the access counts */
		}
	}
	ps_rcu_unregister_thread();
	return NULL;
}

/* The subscription: a range's policy changed, its cached placement goes. */
static void changed(struct ps_sub *sub, const struct ps_sub_event *ev, void *arg)
{
	uint64_t k;

	(void)sub;
	(void)arg;
	for (k = ev->start / RANGE_PAGES; k < (ev->end + RANGE_PAGES - 1) / RANGE_PAGES; k++) {
		uint64_t w = __atomic_load_n(&cached[k], __ATOMIC_ACQUIRE);

		while (!__atomic_compare_exchange_n(&cached[k], &w, ((w >> 16) + 1) << 16, false,
				__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			;
	}
	if (ev->gen)
		__atomic_store_n(&seen_gen, ev->gen, __ATOMIC_RELEASE);
}

/* Move [@start, @end) to @pol's node: the store first, then the pages already placed. */
static int move(char *mem, size_t page, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	int ret = ps_store_set(store, start, end, pol);

	if (!ret)
		ret = ps_store_apply_range(store, mem, start, end - start, page, PS_APPLY_MOVE, NULL);
	return ret == -EPERM || ret == -ENOSYS || ret == -EIO ? 0 : ret;
}

static bool is_fast(uint64_t start)
{
	struct ps_policy *pol = ps_store_lookup(store, start);
	bool yes = pol == fast;

	ps_policy_put(pol);
	return yes;
}

/* The daemon's interval: promote the hottest ranges that are slow, demote the fast that cooled. */
static int interval(char *mem, size_t page)
{
	struct ps_range_counts top[HOT];
	int n = ps_store_counts_top(store, 0, (uint64_t)nranges * RANGE_PAGES, PS_COUNTS_BY_RATE,
			top, HOT);
	uint64_t k;
	int i, ret = 0;

	if (n < 0)
		return n;
	for (k = 0; k < (uint64_t)nranges && !ret; k++) {
		bool hot = false;

		for (i = 0; i < n; i++)
			hot |= top[i].start == k * RANGE_PAGES;
		if (hot != is_fast(k * RANGE_PAGES))
			ret = move(mem, page, k * RANGE_PAGES, (k + 1) * RANGE_PAGES,
					hot ? fast : slow);
	}
	ps_store_counts_tick(store);
	return ret;
}

int main(int argc, char **argv)
{
	long workers = 2, phases = 3, rounds = 4, ms = 20, i, k;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct timespec ts;
	struct ps_counts_sum sum;
	uint64_t counted = 0;
	struct ps_sub *sub;
	pthread_t *t;
	char *mem;
	int opt, ret = 0, bad = 0;

	nranges = 64;
	while ((opt = getopt(argc, argv, "t:n:p:r:i:")) != -1) {
		long v = atol(optarg);

		if (v <= 0) {
			fprintf(stderr, "-%c: a positive number\n", opt);
			return 2;
		}
		if (opt == 't')
			workers = v;
		else if (opt == 'n')
			nranges = v < HOT ? HOT : v;
		else if (opt == 'p')
			phases = v;
		else if (opt == 'r')
			rounds = v;
		else if (opt == 'i')
			ms = v;
		else
			return 2;
	}
	fast_node = 0;
	slow_node = numa_available() < 0 ? 0 : numa_max_node();
	store = ps_store_create(PS_SYNC_RCU);
	fast = preferred(fast_node);
	slow = preferred(slow_node);
	cached = malloc((size_t)nranges * sizeof(*cached));
	t = calloc((size_t)workers, sizeof(*t));
	mem = mmap(NULL, (size_t)nranges * RANGE_PAGES * page, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!store || !fast || !slow || !cached || !t || mem == MAP_FAILED) {
		perror("tiering");
		return 1;
	}
	for (k = 0; k < nranges; k++)
		cached[k] = 0;
	/* One range of the store a range of the daemon's. */
	for (k = 0; k < nranges && !ret; k++)
		ret = ps_store_set(store, (uint64_t)k * RANGE_PAGES, (uint64_t)(k + 1) * RANGE_PAGES,
				slow);
	if (!ret)
		ret = ps_store_counts_enable(store, true);
	sub = ret ? NULL : ps_store_subscribe(store, 0, (uint64_t)nranges * RANGE_PAGES, 4096,
						 changed, NULL);
	if (!sub) {
		fprintf(stderr, "tiering: %s\n", strerror(ret ? -ret : errno));
		return 1;
	}
	seen_gen = ps_store_generation(store);
	memset(mem, 0, (size_t)nranges * RANGE_PAGES * page); /* the pages exist, on the slow node */
	for (i = 0; i < workers; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1))) {
			fprintf(stderr, "tiering: no thread\n");
			return 1;
		}
	ts = (struct timespec){ ms / 1000, ms % 1000 * 1000000 };
	for (i = 0; i < phases && !ret; i++) {
		__atomic_store_n(&hot_base, (int)(i * 2 * HOT % nranges), __ATOMIC_RELAXED);
		for (k = 0; k < rounds && !ret; k++) {
			/* An interval, and at least MIN_ACCESSES (on a machine busy with more). */
			nanosleep(&ts, NULL);
			while (!(ret = ps_store_counts_sum(store, &sum)) &&
					sum.counted < counted + MIN_ACCESSES)
				usleep(1000);
			counted = sum.counted;
			if (!ret)
				ret = interval(mem, page);
		}
		printf("phase %ld: ranges %ld-%ld hot\n", i, (long)(i * 2 * HOT % nranges),
				(long)(i * 2 * HOT % nranges) + HOT - 1);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < workers; i++)
		pthread_join(t[i], NULL);
	if (ret) {
		fprintf(stderr, "tiering: a move failed: %s\n", strerror(-ret));
		return 1;
	}
	/* The last phase's hot ranges are fast. */
	for (k = 0; k < HOT; k++)
		if (!is_fast((uint64_t)((hot_base + k) % nranges) * RANGE_PAGES)) {
			fprintf(stderr, "tiering: hot range %ld is not on the fast node\n",
					(hot_base + k) % nranges);
			bad = 1;
		}
	/* Once the subscription has reported every change, no cached placement is stale. */
	while (__atomic_load_n(&seen_gen, __ATOMIC_ACQUIRE) < ps_store_generation(store))
		usleep(1000);
	for (k = 0; k < nranges; k++) {
		int c = CACHE_NODE(__atomic_load_n(&cached[k], __ATOMIC_ACQUIRE));

		if (c >= 0 && c != ps_store_lookup_node(store, (uint64_t)k * RANGE_PAGES, 0)) {
			fprintf(stderr, "tiering: range %ld cached on node %d, the store says %d\n", k,
					c, ps_store_lookup_node(store, (uint64_t)k * RANGE_PAGES, 0));
			bad = 1;
		}
	}
	ps_store_counts_sum(store, &sum);
	printf("%lu accesses counted over %lu epochs; fast node %d, slow node %d\n",
			(unsigned long)sum.counted, (unsigned long)sum.epoch, fast_node, slow_node);
	ps_sub_cancel(sub);
	ps_store_destroy(store);
	ps_policy_put(fast);
	ps_policy_put(slow);
	munmap(mem, (size_t)nranges * RANGE_PAGES * page);
	free(cached);
	free(t);
	return bad;
}
