// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The uffd-fault scenario of polstore-stress: real page faults, resolved
 * by the fault plane (libpolstore_uffd), with the store naming each
 * page's node, beside the same plane with a fixed node and no lookup.
 *
 * A round: the ranks touch the --pages fresh pages of one registered
 * region (page i by rank i % ranks, each once, a load: the fault places a
 * page filled by the callback, which writes the page's index), then the
 * region's pages are dropped (MADV_DONTNEED), so the next round faults
 * again.  Rounds run until --duration of touching time has passed.  One
 * writer (--writers 0: none) gives a random sub-range of the region a
 * policy of the pool every --write-interval; the store starts with
 * --ranges ranges.  The pool holds, for each node this process may use,
 * PREFERRED and BIND on that node, and INTERLEAVE over them all and LOCAL.
 *
 * Measured per point: faults per second of touching time; each fault's
 * latency as its rank saw it (the load that faulted, TSC); the resolvers'
 * time per fault in ps_store_lookup_node() (PS_UFFD_TIMING: two clock
 * reads around it; the fixed plane times the same two reads around no
 * lookup), and with the fixed plane's figure at the same ranks taken out,
 * the lookup's own time as a share of that fault latency and of the
 * resolvers' time per fault; the ratio of faults/s to the fixed-node
 * plane's at the same ranks.  With --repeat K the variants' points are interleaved K times
 * and the median-throughput repetition is reported.
 *
 * Validation: every touched page holds its index; each round places
 * exactly one page per page (the plane's counts), no fault dropped or
 * failed; one page a round is checked to lie on an allowed node (the
 * fixed node for the fixed plane).  A violation aborts the run.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "compiler.h"
#include "stress.h"

#define SCENARIO "uffd-fault"

#ifdef STRESS_HAVE_UFFD
#include <polstore/uffd.h>

#define STAMP 0xfa17ed0000000000ULL
#define MAX_REPS 100

/* A store variant or the fixed-node plane (sync < 0). */
struct uvariant {
	const char *name;
	int sync;
};

/* The fixed-node plane, then every store variant the library has (uvariants_init()). */
static struct uvariant uvariants[1 + STRESS_NSYNC] = {{"fixed", -1}};
#define NUVARIANTS (sizeof(uvariants) / sizeof(uvariants[0]))

static void uvariants_init(void)
{
	int s;

	for (s = 0; s < STRESS_NSYNC; s++)
		uvariants[1 + s] = (struct uvariant){ps_sync_name((enum ps_sync)s), s};
}

struct upool {
	struct ps_policy *pol[2 * 64 + 2];
	int n;
	int nodes[64];
	int nnodes;
};

/* One point's run: the region, the ranks' rounds, the writer. */
struct urun {
	char *base;
	size_t psz;
	uint64_t pages;
	int ranks;
	struct ps_store *store;
	struct upool *pool;
	/* rounds: the driver bumps @gen, each rank counts @left down */
	int gen, left;
	int stop; /* read by the ranks after @gen changed */
	int writer_stop;
	uint64_t writer_sets;
	uint64_t seed;
};

struct urank {
	struct urun *run;
	int index;
	struct stress_hist hist;
	uint64_t faults;
} __attribute__((aligned(64)));

static void futex_wait(int *addr, int val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static int fill_stamp(void *buf, const struct ps_uffd_fault *f, void *arg)
{
	(void)arg;
	*(uint64_t *)buf = STAMP ^ f->page;
	return 0;
}

static bool allowed_node(const struct upool *pool, int node)
{
	for (int i = 0; i < pool->nnodes; i++)
		if (pool->nodes[i] == node)
			return true;
	return false;
}

static void pool_init(struct upool *pool)
{
	unsigned long all[PS_NODEMASK_WORDS] = {0};
	const unsigned bits = 8 * sizeof(unsigned long);
	unsigned long allowed[PS_NODEMASK_WORDS] = {0};

	memset(pool, 0, sizeof(*pool));
	if (syscall(SYS_get_mempolicy, NULL, allowed, (unsigned long)PS_MAX_NUMNODES, NULL,
			    4 /* MPOL_F_MEMS_ALLOWED */))
		allowed[0] = 1;
	for (int n = 0; n < PS_MAX_NUMNODES && pool->nnodes < 64; n++)
		if (allowed[n / bits] >> (n % bits) & 1)
			pool->nodes[pool->nnodes++] = n;
	for (int i = 0; i < pool->nnodes; i++) {
		unsigned long one[PS_NODEMASK_WORDS] = {0};
		int n = pool->nodes[i];

		one[n / bits] = 1UL << (n % bits);
		all[n / bits] |= 1UL << (n % bits);
		pool->pol[pool->n++] = ps_policy_create(PS_MPOL_PREFERRED, 0, one, PS_MAX_NUMNODES);
		pool->pol[pool->n++] = ps_policy_create(PS_MPOL_BIND, 0, one, PS_MAX_NUMNODES);
	}
	pool->pol[pool->n++] = ps_policy_create(PS_MPOL_INTERLEAVE, 0, all, PS_MAX_NUMNODES);
	pool->pol[pool->n++] = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);
	for (int i = 0; i < pool->n; i++)
		if (!pool->pol[i])
			stress_die("uffd-fault: policy %d: %s", i, strerror(errno));
}

static void pool_fini(struct upool *pool)
{
	for (int i = 0; i < pool->n; i++)
		ps_policy_put(pool->pol[i]);
}

static void *urank_main(void *arg)
{
	struct urank *k = arg;
	struct urun *r = k->run;
	int seen = 0;

	for (;;) {
		int gen;

		while ((gen = PSI_LOAD_ACQUIRE(r->gen)) == seen)
			futex_wait(&r->gen, seen);
		seen = gen;
		if (PSI_LOAD_ACQUIRE(r->stop))
			return NULL;
		for (uint64_t i = (uint64_t)k->index; i < r->pages; i += (uint64_t)r->ranks) {
			const volatile uint64_t *p = (const uint64_t *)(r->base + i * r->psz);
			uint64_t t0 = stress_ticks(), v = *p, t1 = stress_ticks();

			if (v != (STAMP ^ i))
				stress_fail("uffd-fault: page %llu holds %#llx, not its fill",
						(unsigned long long)i, (unsigned long long)v);
			stress_hist_add(&k->hist, t1 - t0);
			k->faults++;
		}
		if (PSI_SUB_FETCH(r->left, 1, ACQ_REL) == 0)
			futex_wake(&r->left);
	}
}

static void *uwriter_main(void *arg)
{
	struct urun *r = arg;
	uint64_t rnd = r->seed | 1, next = stress_now_ns();

	while (!PSI_LOAD_ACQUIRE(r->writer_stop)) {
		uint64_t a = stress_below(&rnd, r->pages), b = stress_below(&rnd, r->pages);
		struct ps_policy *pol = r->pool->pol[stress_below(&rnd, (uint64_t)r->pool->n)];

		if (a > b) {
			uint64_t x = a;

			a = b;
			b = x;
		}
		if (a == b)
			b = a + 1;
		if (ps_store_set(r->store, a, b, pol))
			stress_die("uffd-fault: ps_store_set: out of memory");
		r->writer_sets++;
		next += stress_opts.write_interval_ns;
		if (stress_opts.write_interval_ns)
			stress_sleep_until(next);
	}
	return NULL;
}

/* One measurement of @v at @ranks into @p (not emitted). */
static void measure(const struct uvariant *v, int ranks, int resolvers, struct upool *pool,
		struct stress_point *p)
{
	const size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	struct ps_uffd_attr attr = PS_UFFD_ATTR_INIT;
	struct urun run = {0};
	struct urank *rk;
	struct ps_uffd_stats st;
	struct stress_hist all;
	pthread_t *t, wt;
	struct ps_uffd *uf;
	char why[512] = "";
	uint64_t touch_ns = 0, rounds = 0, faults = 0, t_w0, t_w1, rnd = stress_opts.seed | 1;
	bool writer = v->sync >= 0 && stress_opts.writers > 0;
	size_t len;

	run.pages = stress_opts.pages;
	run.ranks = ranks;
	run.psz = psz;
	run.pool = pool;
	run.seed = stress_seed_for(stress_opts.seed, 77);
	len = run.pages * psz;
	if (v->sync >= 0) {
		uint64_t n = stress_opts.ranges[0] < run.pages ? stress_opts.ranges[0] : run.pages;

		run.store = ps_store_create((enum ps_sync)v->sync);
		if (!run.store)
			stress_die("uffd-fault: ps_store_create: %s", strerror(errno));
		for (uint64_t i = 0; i < n; i++)
			if (ps_store_set(run.store, i * run.pages / n, (i + 1) * run.pages / n,
					    pool->pol[i % (uint64_t)pool->n]))
				stress_die("uffd-fault: ps_store_set: out of memory");
	}
	attr.resolvers = resolvers;
	attr.flags = PS_UFFD_TIMING;
	attr.node = pool->nodes[0];
	attr.fill = fill_stamp;
	uf = ps_uffd_create(run.store, &attr, why, sizeof(why));
	if (!uf)
		stress_die("uffd-fault: %s", why);
	run.base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (run.base == MAP_FAILED)
		stress_die("uffd-fault: mmap of %zu bytes: %s", len, strerror(errno));
	if (ps_uffd_register(uf, run.base, len, 0))
		stress_die("uffd-fault: ps_uffd_register failed");

	rk = aligned_alloc(64, (size_t)ranks * sizeof(*rk));
	t = calloc((size_t)ranks, sizeof(*t));
	if (!rk || !t)
		stress_die("uffd-fault: out of memory");
	memset(rk, 0, (size_t)ranks * sizeof(*rk));
	for (int i = 0; i < ranks; i++) {
		rk[i].run = &run;
		rk[i].index = i;
		stress_thread_start(&t[i], urank_main, &rk[i]);
	}
	t_w0 = stress_now_ns();
	if (writer)
		stress_thread_start(&wt, uwriter_main, &run);
	while (touch_ns < (uint64_t)(stress_opts.duration_s * 1e9) || !rounds) {
		uint64_t t0, t1;
		int left;

		PSI_WRITE_ONCE(run.left, ranks);
		t0 = stress_now_ns();
		PSI_ADD_FETCH(run.gen, 1, RELEASE);
		futex_wake(&run.gen);
		while ((left = PSI_LOAD_ACQUIRE(run.left)) != 0)
			futex_wait(&run.left, left);
		t1 = stress_now_ns();
		touch_ns += t1 - t0;
		rounds++;
		{
			uint64_t pg = stress_below(&rnd, run.pages);
			int node = -1;

			if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, run.base + pg * psz,
					    3 /* MPOL_F_NODE | MPOL_F_ADDR */))
				stress_die("uffd-fault: get_mempolicy: %s", strerror(errno));
			if (v->sync < 0 ? node != pool->nodes[0] : !allowed_node(pool, node))
				stress_fail("uffd-fault: %s: page %llu on node %d", v->name,
						(unsigned long long)pg, node);
		}
		if (madvise(run.base, len, MADV_DONTNEED))
			stress_die("uffd-fault: madvise: %s", strerror(errno));
	}
	PSI_STORE_RELEASE(run.stop, 1);
	PSI_ADD_FETCH(run.gen, 1, RELEASE);
	futex_wake(&run.gen);
	for (int i = 0; i < ranks; i++)
		pthread_join(t[i], NULL);
	if (writer) {
		PSI_STORE_RELEASE(run.writer_stop, 1);
		pthread_join(wt, NULL);
	}
	t_w1 = stress_now_ns();

	if (ps_uffd_stats(uf, -1, &st))
		stress_die("uffd-fault: ps_uffd_stats failed");
	memset(&all, 0, sizeof(all));
	for (int i = 0; i < ranks; i++) {
		stress_hist_merge(&all, &rk[i].hist);
		faults += rk[i].faults;
	}
	if (faults != rounds * run.pages || st.copies != faults || st.faults != faults ||
			st.dropped || st.errors || st.fill_errors)
		stress_fail("uffd-fault: %s, %d ranks: %llu pages touched, %llu faults read, "
			    "%llu placed, %llu dropped, %llu failed",
				v->name, ranks, (unsigned long long)faults,
				(unsigned long long)st.faults, (unsigned long long)st.copies,
				(unsigned long long)st.dropped,
				(unsigned long long)(st.errors + st.fill_errors));
	if (run.store && ps_store_check(run.store, NULL))
		stress_fail("uffd-fault: %s: ps_store_check failed", v->name);

	stress_point_init(p, SCENARIO, v->name, ranks);
	p->writers = writer ? 1 : 0;
	p->pages = run.pages;
	p->ranges = run.store ? stress_opts.ranges[0] : 0;
	p->resolvers = ps_uffd_resolvers(uf);
	p->duration_s = (double)touch_ns / 1e9;
	p->ops = faults;
	p->ops_per_sec = (double)faults / p->duration_s;
	stress_hist_to_point(&all, p);
	/* The fixed plane's "lookup" is the two clock reads alone: the floor of the others. */
	p->lookup_ns = (double)st.lookup_ns / (double)faults;
	p->lookup_share = (double)st.lookup_ns / ((double)all.sum * stress_ns_per_tick);
	p->resolve_share = (double)st.lookup_ns / (double)st.resolve_ns;
	p->resolve_ns = (double)st.resolve_ns / (double)faults;
	p->writer_ops_per_sec =
			writer ? (double)run.writer_sets / ((double)(t_w1 - t_w0) / 1e9) : NAN;
	snprintf(p->note, sizeof(p->note), "%llu rounds, %llu rebinds", (unsigned long long)rounds,
			(unsigned long long)st.rebinds);

	ps_uffd_destroy(uf);
	munmap(run.base, len);
	ps_store_destroy(run.store);
	free(rk);
	free(t);
}

static int cmp_rate(const void *a, const void *b)
{
	const struct stress_point *x = a, *y = b;

	return (x->ops_per_sec > y->ops_per_sec) - (x->ops_per_sec < y->ops_per_sec);
}

void stress_run_uffd_fault(void)
{
	int reps = stress_opts.repeat > MAX_REPS ? MAX_REPS : stress_opts.repeat;
	struct stress_point *pts;
	char why[512] = "";
	struct upool pool;

	if (ps_uffd_available(0, why, sizeof(why))) {
		fprintf(stderr, "uffd-fault: userfaultfd not available: %s\n", why);
		return;
	}
	uvariants_init();
	pool_init(&pool);
	pts = calloc(NUVARIANTS * (size_t)reps, sizeof(*pts));
	if (!pts)
		stress_die("uffd-fault: out of memory");
	for (int r = 0; r < stress_opts.nranks; r++) {
		int ranks = stress_opts.ranks[r];
		int resolvers = stress_opts.resolvers < 0 ? ranks : stress_opts.resolvers;
		double fixed_rate = NAN, clock_ns = 0;
		const struct stress_point *fixed = NULL;

		if (resolvers > PS_UFFD_MAX_RESOLVERS)
			resolvers = PS_UFFD_MAX_RESOLVERS;
		for (int k = 0; k < reps; k++)
			for (size_t v = 0; v < NUVARIANTS; v++) {
				if (v && !stress_variant_selected(uvariants[v].name))
					continue;
				stress_progress("uffd-fault %s, %d ranks, repetition %d",
						uvariants[v].name, ranks, k + 1);
				measure(&uvariants[v], ranks, resolvers, &pool,
						&pts[v * (size_t)reps + (size_t)k]);
			}
		for (size_t v = 0; v < NUVARIANTS; v++) {
			struct stress_point *set = &pts[v * (size_t)reps], med;

			if (v && !stress_variant_selected(uvariants[v].name))
				continue;
			qsort(set, (size_t)reps, sizeof(*set), cmp_rate);
			med = set[reps / 2];
			med.reps = reps;
			med.ops_per_sec_min = set[0].ops_per_sec;
			med.ops_per_sec_max = set[reps - 1].ops_per_sec;
			med.baseline = v ? "fixed" : NULL;
			med.fixed_ratio = v ? med.ops_per_sec / fixed_rate : NAN;
			if (!v) {
				fixed_rate = med.ops_per_sec;
				clock_ns = med.lookup_ns;
			} else if (med.lookup_ns > 0) {
				/* The lookup's own share: the clock reads' cost taken out. */
				double net = med.lookup_ns > clock_ns ? med.lookup_ns - clock_ns
								      : 0;

				med.overhead_ns = net;
				med.lookup_share *= net / med.lookup_ns;
				med.resolve_share *= net / med.lookup_ns;
			}
			if (v) {
				stress_warn_ref(&med, fixed, fixed ? (double)fixed->ops : 0);
				stress_warn_explained(&med, med.fixed_ratio,
						isnan(med.overhead_ns) ? 0 : med.lookup_share);
			}
			stress_emit(&med);
			if (!v)
				fixed = stress_find(SCENARIO, "fixed", ranks, 0);
		}
	}
	free(pts);
	pool_fini(&pool);
}

#else /* !STRESS_HAVE_UFFD */

void stress_run_uffd_fault(void)
{
	fprintf(stderr, "uffd-fault: this polstore-stress was built without the fault plane "
			"(libpolstore_uffd)\n");
}

#endif /* STRESS_HAVE_UFFD */

/* @v with @fmt, or "-" for NaN. */
static void fmt_num(char *buf, size_t n, const char *fmt, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, fmt, v);
}

static void fmt_us(char *buf, size_t n, double ns)
{
	fmt_num(buf, n, "%.1f", ns / 1e3);
}

void stress_print_uffd_fault(void)
{
	static const char legend[] =
			"  (resol: resolver threads; x fixed: faults/s over the fixed-node plane's "
			"at\n"
			"   the same ranks; p50/p99/max: a fault's latency as its rank saw it;\n"
			"   timed ns: resolver time per fault between the two clock reads around\n"
			"   ps_store_lookup_node() (fixed: around no lookup, the reads' own "
			"cost);\n"
			"   lookup ns: timed ns less fixed's at the same ranks; lookup%: that "
			"over\n"
			"   the ranks' fault time; resolv%: over the resolvers' time per fault,\n"
			"   res. us)\n";
	static const char row[] =
			"  %-9s %5s %5s %10s %8s %8s %8s %9s %9s %9s %8s %8s %8s %9s %s\n";
	const struct stress_point *p;
	bool header = false;
	unsigned seen = 0;

	for (size_t i = 0; (p = stress_point_at(i)); i++) {
		char rk[16], rs_n[16], fr[16], ratio[16], p50[16], p99[16], mx[16], tm[16], lk[16],
				ls[16], rs[16], res[16], w[16], wn[24];

		if (strcmp(p->scenario, SCENARIO))
			continue;
		if (!header) {
			printf("\nuffd-fault: %llu fresh pages a round, %llu ranges, "
			       "writer every %.0f us,\n%.2f s of touching per point (median of "
			       "%d)\n",
					(unsigned long long)p->pages,
					(unsigned long long)stress_opts.ranges[0],
					(double)stress_opts.write_interval_ns / 1e3,
					stress_opts.duration_s, p->reps);
			printf(row, "variant", "ranks", "resol", "faults/s", "x fixed", "p50 us",
					"p99 us", "max us", "timed ns", "lookup ns", "lookup%",
					"resolv%", "res. us", "wr-sets/s", "warn");
			header = true;
		}
		snprintf(rk, sizeof(rk), "%d", p->ranks);
		snprintf(rs_n, sizeof(rs_n), "%d", p->resolvers);
		snprintf(fr, sizeof(fr), "%.0f", p->ops_per_sec);
		fmt_num(ratio, sizeof(ratio), "%.3f", p->fixed_ratio);
		fmt_us(p50, sizeof(p50), p->p50_ns);
		fmt_us(p99, sizeof(p99), p->p99_ns);
		fmt_us(mx, sizeof(mx), p->max_ns);
		fmt_num(tm, sizeof(tm), "%.0f", p->lookup_ns);
		fmt_num(lk, sizeof(lk), "%.0f", p->overhead_ns);
		fmt_num(ls, sizeof(ls), "%.3f",
				isnan(p->overhead_ns) ? NAN : p->lookup_share * 100);
		fmt_num(rs, sizeof(rs), "%.3f",
				isnan(p->overhead_ns) ? NAN : p->resolve_share * 100);
		fmt_us(res, sizeof(res), p->resolve_ns);
		fmt_num(w, sizeof(w), "%.0f", p->writer_ops_per_sec);
		printf(row, p->variant, rk, rs_n, fr, ratio, p50, p99, mx, tm, lk, ls, rs, res, w,
				stress_warn_names(p->warn, wn, sizeof(wn)));
		seen |= p->warn;
	}
	if (header) {
		fputs(legend, stdout);
		stress_warn_footnote(seen);
	}
}
