// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * shared_text: the scenario of the kernel's shared_policy rwlock thread, for
 * real.  A program text image lives in tmpfs (a memfd here) and R ranks map
 * it and fault it in; each fault looks the page's policy up in one shared
 * store, the lookup every rank contends on.  Each rank:
 *   - maps the image (private, read-only, as text is mapped; --shared maps
 *     it MAP_SHARED, where mbind(2) writes the file's own shared policy),
 *   - for every page: asks the store where the page goes (timed), touches
 *     the page (a page fault), and places each run of pages with mbind(2):
 *     by default the one-call node lookup a runtime's fault path makes,
 *     ps_store_lookup_node() (the kernel's rules for shared policies, no
 *     reference, no shared write), each run of pages bound to the node it
 *     gave; with -m counted or -m borrow the page's policy itself
 *     (ps_store_lookup(), or a borrowed lookup in a read-side section),
 *     applied to each run of pages that share it (ps_policy_apply()),
 *   - drops its page tables (MADV_DONTNEED) so the next round faults again,
 *   - at the end reads every range's placement back with get_mempolicy(2)
 *     and checks it against the store.
 * It prints, per variant, the time split between lookups and the rest
 * (faults, mbind, the loop), summed over ranks.
 *
 * Usage: shared_text [-v VARIANT|all] [-r RANKS] [-p PAGES] [-n ROUNDS]
 *                    [-g RANGES] [-m node|counted|borrow] [-b] [--shared]
 *   -v  spin, rwlock, seqlock, rcu, rcu-qsbr or all (default rcu)
 *   -r  rank threads (default 4)          -p  pages in the image (default 2048)
 *   -n  rounds over the image (default 3) -g  policy ranges (default 32)
 *   -m  what the fault path asks (default node); -b is -m borrow
 * With --shared every rank's mbind(2) writes the one file's policy, so in
 * node mode (where each rank binds to the node its own CPU gets) the check
 * at the end is skipped.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <getopt.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <polstore/numa.h>
#include <polstore/polstore.h>

enum ask { ASK_NODE, ASK_COUNTED, ASK_BORROW };

struct config {
	int ranks, rounds, ranges;
	size_t pages, page;
	enum ask ask;
	bool shared;
	/* ASK_NODE: a BIND policy per node, to place a run where the store said. */
	struct ps_policy *bind[PS_MAX_NUMNODES];
};

struct rank {
	pthread_t tid;
	int id;
	const struct config *cfg;
	struct ps_store *store;
	enum ps_sync sync;
	int fd;
	int local; /* the node of the CPU the rank started on */
	pthread_barrier_t *start;
	double lookup_s, rest_s;
	double t_start, t_end; /* this rank's work, for the wall time */
	int err;	       /* 0, or a negative errno with msg */
	char msg[160];
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(struct rank *r, int err, const char *what)
{
	r->err = err;
	snprintf(r->msg, sizeof(r->msg), "rank %d: %s: %s", r->id, what, strerror(-err));
	return err;
}

/*
 * Look page @idx up.  Returns the policy (NULL: default) and sets *@ref when
 * the caller now holds a reference to it.  @cur is the policy of the run in
 * progress, which the caller holds a reference to (so its address cannot be
 * reused while we compare it).
 */
static struct ps_policy *lookup(struct rank *r, uint64_t idx, struct ps_policy *cur, bool *ref)
{
	const struct ps_policy *b;
	struct ps_policy *pol;

	*ref = true;
	if (r->cfg->ask == ASK_COUNTED)
		return ps_store_lookup(r->store, idx);
	/* Borrowed: write the shared reference count only when the policy changes. */
	ps_store_read_lock(r->store);
	b = ps_store_lookup_borrow(r->store, idx);
	if (b == cur) {
		*ref = false;
		pol = cur;
	} else {
		pol = ps_policy_get((struct ps_policy *)b);
	}
	ps_store_read_unlock(r->store);
	return pol;
}

/*
 * Every range's first page reads back the store's policy (default in gaps),
 * or in node mode the BIND to the node the store gives this rank.
 */
static int verify(struct rank *r, const char *map)
{
	const struct config *c = r->cfg;

	if (c->ask == ASK_NODE && c->shared)
		return 0; /* the file's policy is whatever rank bound it last */
	for (size_t idx = 0; idx < c->pages; idx++) {
		struct ps_policy *want = c->ask == ASK_NODE ? NULL : ps_store_lookup(r->store, idx);
		struct ps_policy *got = ps_policy_from_addr(map + idx * c->page);
		bool ok;

		if (c->ask == ASK_NODE)
			ok = got && ps_policy_equal(got,
					c->bind[ps_store_lookup_node(r->store, idx, r->local)]);
		else
			ok = got && (want ? ps_policy_equal(got, want)
					  : ps_policy_mode(got) == PS_MPOL_DEFAULT);
		ps_policy_put(got);
		ps_policy_put(want);
		if (!ok)
			return fail(r, got ? -EIO : -errno, "placement differs from the store");
		idx += c->pages / (size_t)c->ranges / 2; /* a few pages per range */
	}
	return 0;
}

/*
 * One round in node mode: the fault path is one call, the node the page
 * goes to; a run of pages with one answer is bound to that node at once.
 */
static void fault_by_node(struct rank *r, char *map, volatile char *sink)
{
	const struct config *c = r->cfg;
	size_t len = c->pages * c->page, run_start = 0;
	int run_node = -1;

	for (size_t idx = 0; idx <= c->pages; idx++) {
		double t0 = now(), t1;
		int node = idx < c->pages ? ps_store_lookup_node(r->store, idx, r->local) : -1;
		int ret = 0;

		t1 = now();
		r->lookup_s += t1 - t0;
		if (node < -1 || (node >= 0 && !c->bind[node])) {
			fail(r, node < 0 ? node : -ERANGE, "ps_store_lookup_node");
			return;
		}
		if (idx && node != run_node) {
			ret = ps_policy_apply(c->bind[run_node], map + run_start * c->page,
					(idx - run_start) * c->page, 0);
			run_start = idx;
		}
		if (idx < c->pages)
			*sink += map[idx * c->page]; /* the fault */
		run_node = node;
		if (r->sync == PS_SYNC_RCU_QSBR)
			ps_qsbr_quiescent();
		r->rest_s += now() - t1;
		if (ret) {
			fail(r, ret, "ps_policy_apply");
			return;
		}
	}
	if (madvise(map, len, MADV_DONTNEED))
		fail(r, -errno, "madvise");
}

static void *rank_main(void *arg)
{
	struct rank *r = arg;
	const struct config *c = r->cfg;
	size_t len = c->pages * c->page;
	char *map = mmap(NULL, len, PROT_READ, c->shared ? MAP_SHARED : MAP_PRIVATE, r->fd, 0);
	volatile char sink = 0;

	if (map == MAP_FAILED) {
		fail(r, -errno, "mmap");
		pthread_barrier_wait(r->start);
		return NULL;
	}
	pthread_barrier_wait(r->start);
	r->t_start = now();
	{
		/* getcpu(2), not numa_node_of_cpu(): libnuma keeps a cache it never frees. */
		unsigned cpu, node;

		r->local = getcpu(&cpu, &node) ? 0 : (int)node;
	}
	if (r->local < 0 || r->local >= PS_MAX_NUMNODES || !c->bind[r->local])
		r->local = 0;
	if (r->sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_online(); /* the fast path of polstore/rcu.h */

	for (int round = 0; round < c->rounds && !r->err && c->ask == ASK_NODE; round++)
		fault_by_node(r, map, &sink);
	for (int round = 0; round < c->rounds && !r->err && c->ask != ASK_NODE; round++) {
		struct ps_policy *run_pol = NULL;
		size_t run_start = 0;

		for (size_t idx = 0; idx <= c->pages; idx++) {
			double t0 = now(), t1;
			bool ref = false;
			struct ps_policy *pol =
					idx < c->pages ? lookup(r, idx, run_pol, &ref) : NULL;
			int ret = 0;

			t1 = now();
			r->lookup_s += t1 - t0;
			/* A run of pages with one policy ends: one mbind for all of it. */
			if (idx == c->pages || (idx && pol != run_pol)) {
				ret = ps_policy_apply(run_pol, map + run_start * c->page,
						(idx - run_start) * c->page, 0);
				ps_policy_put(run_pol);
				run_pol = NULL;
				run_start = idx;
			}
			if (idx < c->pages) {
				sink += map[idx * c->page]; /* the fault */
				if (!run_pol)
					run_pol = pol;
				else if (ref)
					ps_policy_put(pol); /* same policy, one reference is enough
							     */
			}
			if (r->sync == PS_SYNC_RCU_QSBR)
				ps_qsbr_quiescent(); /* no borrowed pointer held here */
			r->rest_s += now() - t1;
			if (ret) {
				ps_policy_put(run_pol);
				fail(r, ret, "ps_policy_apply");
				break;
			}
		}
		if (!r->err && madvise(map, len, MADV_DONTNEED))
			fail(r, -errno, "madvise");
	}
	if (r->sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	r->t_end = now();
	if (!r->err)
		verify(r, map);
	munmap(map, len);
	(void)sink;
	return NULL;
}

/* Policies for the ranges, cycling through what this machine allows. */
static int fill_store(struct ps_store *store, const struct config *c)
{
	struct bitmask *allowed = numa_get_mems_allowed();
	int first = -1;
	struct ps_policy *pols[4];
	size_t step = c->pages / (size_t)c->ranges;
	int ret = 0;

	for (unsigned i = 0; i < allowed->size && first < 0; i++)
		if (numa_bitmask_isbitset(allowed, i))
			first = (int)i;
	{
		unsigned long one[PS_MAX_NUMNODES / (8 * sizeof(long))] = {0};

		one[first / (8 * sizeof(long))] = 1UL << (first % (8 * sizeof(long)));
		pols[0] = ps_policy_from_bitmask(PS_MPOL_INTERLEAVE, 0, allowed);
		pols[1] = ps_policy_create(PS_MPOL_BIND, 0, one, PS_MAX_NUMNODES);
		pols[2] = ps_policy_create(PS_MPOL_PREFERRED, 0, one, PS_MAX_NUMNODES);
		pols[3] = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);
	}
	numa_bitmask_free(allowed);
	/*
	 * The whole layout in one ps_store_set_many() batch: a reader sees all
	 * of it or none of it.  Every fifth range is left out: those pages get
	 * the default policy.
	 */
	{
		struct ps_set_op *ops = calloc((size_t)c->ranges, sizeof(*ops));
		size_t n = 0;

		if (!ops)
			ret = -ENOMEM;
		for (int g = 0; g < c->ranges && !ret; g++) {
			if (g % 5 == 4)
				continue;
			if (!pols[g % 4])
				ret = -ENOMEM;
			ops[n++] = (struct ps_set_op){ g * step,
				g == c->ranges - 1 ? c->pages : (g + 1) * step, pols[g % 4] };
		}
		if (!ret)
			ret = ps_store_set_many(store, ops, n);
		free(ops);
	}
	for (int i = 0; i < 4; i++)
		ps_policy_put(pols[i]);
	return ret;
}

static int run_variant(enum ps_sync sync, const struct config *c, int fd)
{
	struct ps_store *store = ps_store_create(sync);
	struct rank *ranks = calloc((size_t)c->ranks, sizeof(*ranks));
	pthread_barrier_t start;
	double lookup = 0, rest = 0, first = 0, last = 0;
	int ret;

	if (!store || !ranks) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	ret = fill_store(store, c);
	if (ret) {
		fprintf(stderr, "filling the store: %s\n", strerror(-ret));
		return 1;
	}
	pthread_barrier_init(&start, NULL, (unsigned)c->ranks + 1);
	for (int i = 0; i < c->ranks; i++) {
		ranks[i] = (struct rank){.id = i,
				.cfg = c,
				.store = store,
				.sync = sync,
				.fd = fd,
				.start = &start};
		if (pthread_create(&ranks[i].tid, NULL, rank_main, &ranks[i])) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	for (int i = 0; i < c->ranks; i++)
		pthread_join(ranks[i].tid, NULL);
	ret = 0;
	for (int i = 0; i < c->ranks; i++) {
		if (ranks[i].err) {
			fprintf(stderr, "%s\n", ranks[i].msg);
			ret = ranks[i].err == -EPERM || ranks[i].err == -ENOSYS ? 77 : 1;
		}
		lookup += ranks[i].lookup_s;
		rest += ranks[i].rest_s;
		if (!i || ranks[i].t_start < first)
			first = ranks[i].t_start;
		if (ranks[i].t_end > last)
			last = ranks[i].t_end;
	}
	printf("%-9s %5d %7zu %6zu %10.2f %10.2f %8.1f%% %8.1f\n", ps_sync_name(sync), c->ranks,
			c->pages, ps_store_count(store), lookup * 1e3, rest * 1e3,
			100.0 * lookup / (lookup + rest), (last - first) * 1e3);
	pthread_barrier_destroy(&start);
	ps_store_destroy(store);
	free(ranks);
	return ret;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
			"usage: %s [-v spin|rwlock|seqlock|rcu|rcu-qsbr|all] [-r ranks] [-p "
			"pages]\n"
			"          [-n rounds] [-g ranges] [-m node|counted|borrow] [-b] [--shared]\n",
			argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"shared", no_argument, NULL, 'S'},
			{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	static struct config c = {.ranks = 4, .rounds = 3, .ranges = 32, .pages = 2048};
	const char *variant = "rcu";
	int opt, fd, ret = 0, avail;
	char *image;

	while ((opt = getopt_long(argc, argv, "v:r:p:n:g:m:bh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'v':
			variant = optarg;
			break;
		case 'r':
			c.ranks = atoi(optarg);
			break;
		case 'p':
			c.pages = strtoul(optarg, NULL, 0);
			break;
		case 'n':
			c.rounds = atoi(optarg);
			break;
		case 'g':
			c.ranges = atoi(optarg);
			break;
		case 'b':
			c.ask = ASK_BORROW;
			break;
		case 'm':
			if (!strcmp(optarg, "node"))
				c.ask = ASK_NODE;
			else if (!strcmp(optarg, "counted"))
				c.ask = ASK_COUNTED;
			else if (!strcmp(optarg, "borrow"))
				c.ask = ASK_BORROW;
			else
				usage(argv[0]);
			break;
		case 'S':
			c.shared = true;
			break;
		default:
			usage(argv[0]);
		}
	}
	if (c.ranks < 1 || c.rounds < 1 || c.ranges < 1 || c.pages < (size_t)c.ranges ||
			(strcmp(variant, "all") && ps_sync_from_name(variant) < 0))
		usage(argv[0]);
	avail = ps_numa_available();
	if (avail) {
		printf("placement unavailable here: %s; nothing to show\n", strerror(-avail));
		return 77;
	}

	/* The text image: a memfd (tmpfs) filled once, as a loader would. */
	c.page = (size_t)sysconf(_SC_PAGESIZE);
	fd = memfd_create("shared_text", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)(c.pages * c.page))) {
		perror("memfd");
		return 1;
	}
	image = mmap(NULL, c.pages * c.page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (image == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (size_t i = 0; i < c.pages * c.page; i += 64)
		image[i] = (char)(i >> 6);
	munmap(image, c.pages * c.page);

	/* Node mode: one BIND policy per node this process may use. */
	for (int n = 0; n <= numa_max_node() && n < PS_MAX_NUMNODES; n++) {
		unsigned long one[PS_MAX_NUMNODES / (8 * sizeof(long))] = {0};

		if (!numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)n))
			continue;
		one[n / (8 * sizeof(long))] = 1UL << (n % (8 * sizeof(long)));
		c.bind[n] = ps_policy_create(PS_MPOL_BIND, 0, one, PS_MAX_NUMNODES);
		if (!c.bind[n]) {
			perror("ps_policy_create");
			return 1;
		}
	}
	printf("%d ranks, %zu pages of %zu bytes, %d rounds, %s lookups, %s mappings\n", c.ranks,
			c.pages, c.page, c.rounds,
			c.ask == ASK_NODE ? "node" : c.ask == ASK_BORROW ? "borrowed" : "counted",
			c.shared ? "shared" : "private");
	printf("%-9s %5s %7s %6s %10s %10s %9s %8s\n", "variant", "ranks", "pages", "ranges",
			"lookup_ms", "rest_ms", "lookup%", "wall_ms");
	for (int s = 0; s < PS_SYNC_COUNT; s++) {
		int r;

		if (strcmp(variant, "all") && s != ps_sync_from_name(variant))
			continue;
		r = run_variant((enum ps_sync)s, &c, fd);
		if (r && !ret)
			ret = r;
	}
	close(fd);
	for (int n = 0; n < PS_MAX_NUMNODES; n++)
		ps_policy_put(c.bind[n]);
	return ret;
}
