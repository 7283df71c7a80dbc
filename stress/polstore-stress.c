// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress: the many-rank benchmark and validator of polstore.
 *
 * This file is the driver: options, the points measured so far, the human
 * tables / JSON Lines / CSV output, the target summary, the gnuplot curves,
 * and the helpers the scenario files share (stress.h).  The scenarios live
 * in scn_store.c (lookup-cost, shared-text, hot-policy, write-cost, window,
 * batch-cost) and scn_companion.c
 * (memcg-charge, mmap-commit, css-walk).  `polstore-stress --help` and
 * docs/polstore-stress.1 describe the options; BENCHMARKS.md the results.
 */

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "stress.h"

struct stress_opts stress_opts;
double stress_ns_per_tick = 1.0;
double stress_work_iters_per_ns = 1.0;

static const char *const all_scenarios[] = {"lookup-cost", "shared-text", "hot-policy",
		"memcg-charge", "mmap-commit", "css-walk", "write-cost", "window", "batch-cost"};
#define NSCENARIOS (sizeof(all_scenarios) / sizeof(all_scenarios[0]))

/* ---- errors and progress ---------------------------------------------------- */

void stress_die(const char *fmt, ...)
{
	va_list ap;

	fputs("polstore-stress: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

void stress_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("polstore-stress: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static uint64_t t_program_start;

void stress_progress(const char *fmt, ...)
{
	va_list ap;

	if (stress_opts.quiet)
		return;
	fprintf(stderr, "[%6.1fs] ", (double)(stress_now_ns() - t_program_start) / 1e9);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- time, work, threads -------------------------------------------------------- */

void stress_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void stress_sleep_until(uint64_t t)
{
	struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void stress_calibrate(void)
{
	uint64_t t0, t1, k0, k1;
	unsigned iters = 1u << 22;

	t0 = stress_now_ns();
	k0 = stress_ticks();
	stress_sleep_ns(20000000);
	t1 = stress_now_ns();
	k1 = stress_ticks();
	stress_ns_per_tick = (double)(t1 - t0) / (double)(k1 - k0);
	/* The fault-work loop: best of three, so a preemption does not shrink it. */
	stress_work_iters_per_ns = 0;
	for (int i = 0; i < 3; i++) {
		double rate;

		t0 = stress_now_ns();
		stress_work(iters);
		t1 = stress_now_ns();
		rate = (double)iters / (double)(t1 - t0);
		if (rate > stress_work_iters_per_ns)
			stress_work_iters_per_ns = rate;
	}
}

unsigned stress_work_iters(double ns)
{
	double it = ns * stress_work_iters_per_ns;

	return it < 0 ? 0 : (unsigned)(it + 0.5);
}

void stress_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	ret = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	if (ret)
		stress_die("pthread_create: %s (lower --ranks?)", strerror(ret));
}

/*
 * The gate is a futex, not a condition variable: opening it makes every
 * waiter runnable at once, instead of handing a mutex from one woken thread
 * to the next while the threads already released eat the CPUs (with 1024
 * ranks on 2 CPUs that convoy took longer than a point).
 */
void stress_gate_init(struct stress_gate *g)
{
	g->ready = 0;
	g->go = 0;
}

void stress_gate_destroy(struct stress_gate *g)
{
	(void)g;
}

void stress_gate_wait(struct stress_gate *g)
{
	__atomic_fetch_add(&g->ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&g->go, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &g->go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

uint64_t stress_gate_open(struct stress_gate *g, int nthreads)
{
	uint64_t t;

	while (__atomic_load_n(&g->ready, __ATOMIC_ACQUIRE) < nthreads)
		stress_sleep_ns(100000);
	/*
	 * The time is taken before the release: the woken threads may preempt
	 * this one for a long while (seconds with 1024 ranks on 2 CPUs).
	 */
	t = stress_now_ns();
	__atomic_store_n(&g->go, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &g->go, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	return t;
}

/* ---- the allocator: counts live bytes of everything polstore allocates -------- */

static size_t live_bytes;

static void *count_alloc(size_t size, void *ctx)
{
	void *p = malloc(size);

	(void)ctx;
	if (p)
		__atomic_fetch_add(&live_bytes, malloc_usable_size(p), __ATOMIC_RELAXED);
	return p;
}

static void count_free(void *p, void *ctx)
{
	(void)ctx;
	__atomic_fetch_sub(&live_bytes, malloc_usable_size(p), __ATOMIC_RELAXED);
	free(p);
}

size_t stress_live_bytes(void)
{
	return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
}

/* ---- histogram ------------------------------------------------------------------ */

void stress_hist_merge(struct stress_hist *into, const struct stress_hist *h)
{
	unsigned i;

	for (i = 0; i < STRESS_HBUCKETS; i++)
		into->count[i] += h->count[i];
	into->n += h->n;
	into->sum += h->sum;
	if (h->max > into->max)
		into->max = h->max;
}

static double bucket_mid(unsigned b)
{
	unsigned e, m;

	if (b < STRESS_HSUB)
		return b;
	e = b / STRESS_HSUB + 3;
	m = b % STRESS_HSUB;
	return ((double)(STRESS_HSUB + m) + 0.5) * (double)(1ULL << (e - 4));
}

double stress_hist_quantile_ns(const struct stress_hist *h, double q)
{
	uint64_t want, seen = 0;
	unsigned i;

	if (!h->n)
		return NAN;
	want = (uint64_t)ceil(q * (double)h->n);
	if (!want)
		want = 1;
	for (i = 0; i < STRESS_HBUCKETS; i++) {
		seen += h->count[i];
		if (seen >= want) {
			double v = bucket_mid(i);

			return (v > (double)h->max ? (double)h->max : v) * stress_ns_per_tick;
		}
	}
	return (double)h->max * stress_ns_per_tick;
}

void stress_hist_to_point(const struct stress_hist *h, struct stress_point *p)
{
	p->samples = h->n;
	if (!h->n)
		return;
	p->mean_ns = (double)h->sum / (double)h->n * stress_ns_per_tick;
	p->p50_ns = stress_hist_quantile_ns(h, 0.50);
	p->p99_ns = stress_hist_quantile_ns(h, 0.99);
	p->p999_ns = stress_hist_quantile_ns(h, 0.999);
	p->max_ns = (double)h->max * stress_ns_per_tick;
}

/* ---- points ------------------------------------------------------------------------ */

static struct stress_point *points;
static size_t npoints, cap_points;
static bool csv_header_done;

void stress_point_init(struct stress_point *p, const char *scenario, const char *variant, int ranks)
{
	memset(p, 0, sizeof(*p));
	p->scenario = scenario;
	snprintf(p->variant, sizeof(p->variant), "%s", variant);
	p->ranks = ranks;
	p->baseline = NULL;
	p->writers = -1;
	p->ranges = p->ranges_end = p->pages = 0;
	p->duration_s = p->fault_work_ns = NAN;
	p->ops_per_sec = p->efficiency = p->lookup_share = p->mean_ns = NAN;
	p->rank_cpu_s = p->cpu_efficiency = NAN;
	p->ops_per_sec_min = p->ops_per_sec_max = NAN;
	p->reps = -1;
	p->p50_ns = p->p99_ns = p->p999_ns = p->max_ns = NAN;
	p->writer_ops_per_sec = p->writer_max_wait_ns = NAN;
	p->lookup_ns = p->overhead_ns = p->cost_ratio = p->lookup_ns_median = NAN;
	p->lookup_share_all = NAN;
	p->bytes_per_range = p->store_bytes_per_range = NAN;
	p->max_overshoot = p->overshoot_bound = p->max_error = p->error_bound = NAN;
	p->set_ns = p->set_ns_min = p->set_ns_max = p->restore_ns = p->restore_ratio = NAN;
	p->set_ns_oncpu = NAN;
	p->sync_ns_per_set = p->retired_bytes_max = NAN;
	p->ns_per_op = p->ranges_per_op = p->ns_per_range = p->ratio_lookup = NAN;
	p->ratio_borrow = p->single_ns = p->many_ns = p->batch_ratio = NAN;
	p->batch = -1;
}

const struct stress_point *stress_find(
		const char *scenario, const char *variant, int ranks, uint64_t ranges)
{
	size_t i;

	for (i = npoints; i-- > 0;)
		if (!strcmp(points[i].scenario, scenario) && !strcmp(points[i].variant, variant) &&
				points[i].ranks == ranks && (!ranges || points[i].ranges == ranges))
			return &points[i];
	return NULL;
}

const struct stress_point *stress_point_at(size_t i)
{
	return i < npoints ? &points[i] : NULL;
}

/* Column: key, and how to print it from a point. */
enum ctype { C_STR, C_INT, C_U64, C_DBL };
struct col {
	const char *key;
	enum ctype type;
	size_t off;
	const char *fmt;
};

#define COL(k, t, f, fmt)                                                                          \
	{                                                                                          \
		k, t, offsetof(struct stress_point, f), fmt                                        \
	}
static const struct col cols[] = {
		COL("variant", C_STR, variant, NULL),
		COL("ranks", C_INT, ranks, NULL),
		COL("writers", C_INT, writers, NULL),
		COL("pages", C_U64, pages, NULL),
		COL("ranges", C_U64, ranges, NULL),
		COL("ranges_end", C_U64, ranges_end, NULL),
		COL("duration_s", C_DBL, duration_s, "%.3f"),
		COL("fault_work_ns", C_DBL, fault_work_ns, "%.1f"),
		COL("ops", C_U64, ops, NULL),
		COL("ops_per_sec", C_DBL, ops_per_sec, "%.0f"),
		COL("reps", C_INT, reps, NULL),
		COL("ops_per_sec_min", C_DBL, ops_per_sec_min, "%.0f"),
		COL("ops_per_sec_max", C_DBL, ops_per_sec_max, "%.0f"),
		COL("efficiency", C_DBL, efficiency, "%.4f"),
		COL("rank_cpu_s", C_DBL, rank_cpu_s, "%.3f"),
		COL("cpu_efficiency", C_DBL, cpu_efficiency, "%.4f"),
		COL("lookup_share", C_DBL, lookup_share, "%.4f"),
		COL("lookup_share_all", C_DBL, lookup_share_all, "%.4f"),
		COL("mean_ns", C_DBL, mean_ns, "%.1f"),
		COL("p50_ns", C_DBL, p50_ns, "%.0f"),
		COL("p99_ns", C_DBL, p99_ns, "%.0f"),
		COL("p999_ns", C_DBL, p999_ns, "%.0f"),
		COL("max_ns", C_DBL, max_ns, "%.0f"),
		COL("samples", C_U64, samples, NULL),
		COL("writer_ops_per_sec", C_DBL, writer_ops_per_sec, "%.1f"),
		COL("writer_max_wait_ns", C_DBL, writer_max_wait_ns, "%.0f"),
		COL("lookup_ns", C_DBL, lookup_ns, "%.2f"),
		COL("lookup_ns_median", C_DBL, lookup_ns_median, "%.2f"),
		COL("overhead_ns", C_DBL, overhead_ns, "%.2f"),
		COL("cost_ratio", C_DBL, cost_ratio, "%.4f"),
		COL("bytes_per_range", C_DBL, bytes_per_range, "%.1f"),
		COL("store_bytes_per_range", C_DBL, store_bytes_per_range, "%.1f"),
		COL("max_overshoot", C_DBL, max_overshoot, "%.0f"),
		COL("overshoot_bound", C_DBL, overshoot_bound, "%.0f"),
		COL("max_error", C_DBL, max_error, "%.0f"),
		COL("error_bound", C_DBL, error_bound, "%.0f"),
		/* write-cost (after the older columns: CSV keeps their positions) */
		COL("kind", C_STR, kind, NULL),
		COL("set_ns", C_DBL, set_ns, "%.1f"),
		COL("set_ns_min", C_DBL, set_ns_min, "%.1f"),
		COL("set_ns_max", C_DBL, set_ns_max, "%.1f"),
		COL("set_ns_oncpu", C_DBL, set_ns_oncpu, "%.1f"),
		COL("restore_kind", C_STR, restore_kind, NULL),
		COL("restores", C_U64, restores, NULL),
		COL("slow_sets", C_U64, slow_sets, NULL),
		COL("restore_ns", C_DBL, restore_ns, "%.1f"),
		COL("restore_ratio", C_DBL, restore_ratio, "%.4f"),
		COL("sync_ns_per_set", C_DBL, sync_ns_per_set, "%.1f"),
		COL("retired_bytes_max", C_DBL, retired_bytes_max, "%.0f"),
		/* window and batch-cost (issue 16) */
		COL("ns_per_op", C_DBL, ns_per_op, "%.2f"),
		COL("ranges_per_op", C_DBL, ranges_per_op, "%.2f"),
		COL("ns_per_range", C_DBL, ns_per_range, "%.2f"),
		COL("ratio_lookup", C_DBL, ratio_lookup, "%.4f"),
		COL("ratio_borrow", C_DBL, ratio_borrow, "%.4f"),
		COL("batch", C_INT, batch, NULL),
		COL("single_ns", C_DBL, single_ns, "%.1f"),
		COL("many_ns", C_DBL, many_ns, "%.1f"),
		COL("batch_ratio", C_DBL, batch_ratio, "%.4f"),
};
#define NCOLS (sizeof(cols) / sizeof(cols[0]))

/* Print column @c of @p; false when it does not apply to the point. */
static bool col_value(const struct stress_point *p, const struct col *c, char *buf, size_t n)
{
	const void *f = (const char *)p + c->off;

	switch (c->type) {
	case C_STR:
		if (!*(const char *)f)
			return false; /* an empty kind: not a write-cost point */
		snprintf(buf, n, "%s", (const char *)f);
		return true;
	case C_INT:
		if (*(const int *)f < 0)
			return false;
		snprintf(buf, n, "%d", *(const int *)f);
		return true;
	case C_U64:
		if (!*(const uint64_t *)f && strcmp(c->key, "ops") &&
				(strcmp(c->key, "slow_sets") || strcmp(p->scenario, "write-cost")))
			return false;
		if (!strcmp(c->key, "ops") && !strcmp(p->scenario, "lookup-cost"))
			return false;
		snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)f);
		return true;
	case C_DBL:
		if (isnan(*(const double *)f))
			return false;
		snprintf(buf, n, c->fmt, *(const double *)f);
		return true;
	}
	return false;
}

static void json_lockstat_row(const char *dir, const struct ps_lock_stat_row *r, bool comma)
{
	printf("\"%s\":{\"con_bounces\":%llu,\"contentions\":%llu,\"waittime_min_ns\":%llu,"
	       "\"waittime_max_ns\":%llu,\"waittime_total_ns\":%llu,\"acq_bounces\":%llu,"
	       "\"acquisitions\":%llu,\"holdtime_min_ns\":%llu,\"holdtime_max_ns\":%llu,"
	       "\"holdtime_total_ns\":%llu}%s",
			dir, (unsigned long long)r->con_bounces, (unsigned long long)r->contentions,
			(unsigned long long)r->wait_min_ns, (unsigned long long)r->wait_max_ns,
			(unsigned long long)r->wait_total_ns, (unsigned long long)r->acq_bounces,
			(unsigned long long)r->acquisitions, (unsigned long long)r->hold_min_ns,
			(unsigned long long)r->hold_max_ns, (unsigned long long)r->hold_total_ns,
			comma ? "," : "");
}

static void print_json(const struct stress_point *p)
{
	char buf[64];
	size_t i;

	printf("{\"scenario\":\"%s\"", p->scenario);
	for (i = 0; i < NCOLS; i++) {
		if (!col_value(p, &cols[i], buf, sizeof(buf)))
			continue;
		if (cols[i].type == C_STR)
			printf(",\"%s\":\"%s\"", cols[i].key, buf);
		else
			printf(",\"%s\":%s", cols[i].key, buf);
	}
	if (!isnan(p->ops_per_sec) && p->ranks > 0)
		printf(",\"ops_per_sec_per_rank\":%.0f", p->ops_per_sec / p->ranks);
	if (p->baseline)
		printf(",\"baseline\":\"%s\"", p->baseline);
	if (p->note[0])
		printf(",\"note\":\"%s\"", p->note);
	if (p->has_lockstat) {
		printf(",\"lock_stat\":{");
		json_lockstat_row("W", &p->lockstat[PS_LOCK_STAT_WRITE], true);
		json_lockstat_row("R", &p->lockstat[PS_LOCK_STAT_READ], false);
		printf("}");
	}
	printf("}\n");
	fflush(stdout);
}

static void print_csv(const struct stress_point *p)
{
	char buf[64];
	size_t i;

	if (!csv_header_done) {
		printf("scenario");
		for (i = 0; i < NCOLS; i++)
			printf(",%s", cols[i].key);
		printf(",ops_per_sec_per_rank,baseline,note\n");
		csv_header_done = true;
	}
	printf("%s", p->scenario);
	for (i = 0; i < NCOLS; i++)
		printf(",%s", col_value(p, &cols[i], buf, sizeof(buf)) ? buf : "");
	if (!isnan(p->ops_per_sec) && p->ranks > 0)
		printf(",%.0f", p->ops_per_sec / p->ranks);
	else
		printf(",");
	printf(",%s,%s\n", p->baseline ? p->baseline : "", p->note);
	fflush(stdout);
}

void stress_emit(const struct stress_point *p)
{
	if (npoints == cap_points) {
		cap_points = cap_points ? cap_points * 2 : 64;
		points = realloc(points, cap_points * sizeof(*points));
		if (!points)
			stress_die("out of memory");
	}
	points[npoints++] = *p;
	if (stress_opts.json)
		print_json(p);
	else if (stress_opts.csv)
		print_csv(p);
}

/* ---- human tables ----------------------------------------------------------------- */

static void fmt_ns(char *buf, size_t n, double ns)
{
	if (isnan(ns))
		snprintf(buf, n, "-");
	else if (ns < 10000)
		snprintf(buf, n, "%.0f", ns);
	else if (ns < 1e7)
		snprintf(buf, n, "%.0fu", ns / 1e3);
	else
		snprintf(buf, n, "%.0fm", ns / 1e6);
}

static void fmt_num(char *buf, size_t n, const char *fmt, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, fmt, v);
}

static void table_lookup_cost(void)
{
	uint64_t last = 0;
	size_t i;

	for (i = 0; i < npoints; i++) {
		const struct stress_point *p = &points[i];
		char a[32], b[32], c[32], d[32];

		if (strcmp(p->scenario, "lookup-cost"))
			continue;
		if (p->ranges != last) {
			printf("\nlookup-cost: one rank, no writer, no other work; %llu ranges "
			       "over "
			       "%llu pages (loop overhead %.1f ns subtracted)\n",
					(unsigned long long)p->ranges, (unsigned long long)p->pages,
					p->overhead_ns);
			printf("  %-16s %10s %8s %-13s %12s %12s\n", "variant", "ns/lookup",
					"x base", "(base)", "bytes/range", "(ps_memory)");
			last = p->ranges;
		}
		fmt_num(a, sizeof(a), "%.2f", p->lookup_ns);
		fmt_num(b, sizeof(b), "%.3f", p->cost_ratio);
		fmt_num(c, sizeof(c), "%.1f", p->bytes_per_range);
		fmt_num(d, sizeof(d), "%.1f", p->store_bytes_per_range);
		printf("  %-16s %10s %8s %-13s %12s %12s\n", p->variant, a, b,
				p->baseline ? p->baseline : "", c, d);
	}
}

static void table_store(const char *scenario)
{
	bool header = false;
	size_t i;

	for (i = 0; i < npoints; i++) {
		const struct stress_point *p = &points[i];
		const struct stress_point *prw;
		char t[32], pr[32], e[32], ce[32], ls[32], p50[16], p99[16], p999[16], mx[16],
				w[32], ww[16], x[16];

		if (strcmp(p->scenario, scenario))
			continue;
		if (!header) {
			printf("\n%s: %llu pages, %llu ranges, %s pages, %d writer(s) every %.0f "
			       "us, "
			       "fault work %.0f ns, %.2f s per point\n",
					scenario, (unsigned long long)p->pages,
					(unsigned long long)p->ranges,
					!strcmp(scenario, "hot-policy") ? "one hot range's"
					: stress_opts.sequential	? "sequential"
									: "uniform",
					stress_opts.writers,
					(double)stress_opts.write_interval_ns / 1e3,
					p->fault_work_ns, stress_opts.duration_s);
			printf("  %-15s %5s %9s %9s %6s %6s %7s %6s %6s %6s %6s %8s %7s %7s\n",
					"variant", "ranks", "Mlkup/s", "per-rank", "eff", "cpueff",
					"lookup%", "p50", "p99", "p99.9", "max", "wr-set/s",
					"wr-wait", "x p_rw");
			header = true;
		}
		fmt_num(t, sizeof(t), "%.2f", p->ops_per_sec / 1e6);
		fmt_num(pr, sizeof(pr), "%.2f", p->ops_per_sec / 1e6 / p->ranks);
		fmt_num(e, sizeof(e), "%.3f", p->efficiency);
		fmt_num(ls, sizeof(ls), "%.1f", p->lookup_share * 100);
		fmt_ns(p50, sizeof(p50), p->p50_ns);
		fmt_ns(p99, sizeof(p99), p->p99_ns);
		fmt_ns(p999, sizeof(p999), p->p999_ns);
		fmt_ns(mx, sizeof(mx), p->max_ns);
		fmt_num(w, sizeof(w), "%.0f", p->writer_ops_per_sec);
		fmt_ns(ww, sizeof(ww), p->writer_max_wait_ns);
		prw = stress_find(scenario, "pthread_rwlock", p->ranks, p->ranges);
		fmt_num(x, sizeof(x), "%.2f", prw ? p->ops_per_sec / prw->ops_per_sec : NAN);
		fmt_num(ce, sizeof(ce), "%.3f", p->cpu_efficiency);
		printf("  %-15s %5d %9s %9s %6s %6s %7s %6s %6s %6s %6s %8s %7s %7s\n", p->variant,
				p->ranks, t, pr, e, ce, ls, p50, p99, p999, mx, w, ww, x);
	}
	if (header)
		printf("  (eff: throughput / (ranks x the 1-rank unsync throughput, or "
		       "unsync:noref "
		       "for :noref);\n   lookup%%: time in the lookup / time of the sampled faults "
		       "that kept the "
		       "CPU (< 100 us);\n   cpueff: lookups per CPU-second the ranks got / the "
		       "baseline's (insensitive to\n   other processes' load, blind to time a rank "
		       "sleeps);\n   latencies sampled 1 lookup in %d; x p_rw: throughput / "
		       "pthread_rwlock's at the same ranks)\n",
				STRESS_SAMPLE_MASK + 1);
}

static void table_lockstat(void)
{
	bool header = false;
	size_t i;

	for (i = 0; i < npoints; i++) {
		const struct stress_point *p = &points[i];
		struct ps_lock_stat_row *r;
		char name[80];
		int d;

		if (!p->has_lockstat)
			continue;
		if (!header) {
			printf("\nlock_stat (times in us, as /proc/lock_stat), per scenario, "
			       "variant "
			       "and ranks:\n");
			header = true;
		}
		snprintf(name, sizeof(name), "%s/%s/%d", p->scenario, p->variant, p->ranks);
		for (d = 0; d < 2; d++) {
			r = (struct ps_lock_stat_row *)&p->lockstat[d];
			if (d == PS_LOCK_STAT_READ && !r->acquisitions)
				continue;
			printf("%38s-%c: %10llu %10llu %9.2f %11.2f %13.2f %9.2f %10llu %11llu "
			       "%9.2f "
			       "%11.2f %13.2f %9.2f\n",
					name, d == PS_LOCK_STAT_WRITE ? 'W' : 'R',
					(unsigned long long)r->con_bounces,
					(unsigned long long)r->contentions, r->wait_min_ns / 1e3,
					r->wait_max_ns / 1e3, r->wait_total_ns / 1e3,
					r->contentions ? (double)r->wait_total_ns / r->contentions /
									 1e3
						       : 0.0,
					(unsigned long long)r->acq_bounces,
					(unsigned long long)r->acquisitions, r->hold_min_ns / 1e3,
					r->hold_max_ns / 1e3, r->hold_total_ns / 1e3,
					r->acquisitions ? (double)r->hold_total_ns /
									  r->acquisitions / 1e3
							: 0.0);
		}
	}
	if (header)
		printf("%40s  %10s %10s %9s %11s %13s %9s %10s %11s %9s %11s %13s %9s\n",
				"(columns)", "con-bounce", "contention", "wait-min", "wait-max",
				"wait-total", "wait-avg", "acq-bounce", "acquisition", "hold-min",
				"hold-max", "hold-total", "hold-avg");
}

void stress_print_companions(void);

static void table_write_cost(void)
{
	uint64_t last = 0;
	const char *last_kind = "";
	size_t i;

	for (i = 0; i < npoints; i++) {
		const struct stress_point *p = &points[i];
		char a[32], b[32], c[48], d[32], e[32], f[32], g[32];

		if (strcmp(p->scenario, "write-cost"))
			continue;
		if (p->ranges != last) {
			printf("\nwrite-cost: one thread, no readers; %llu ranges over %llu pages; "
			       "ns per set (TSC, %.1f ns of\n  timestamps subtracted), median of "
			       "%d repetition(s) of %.2f s per kind and variant\n",
					(unsigned long long)p->ranges, (unsigned long long)p->pages,
					p->overhead_ns, p->reps, p->duration_s);
			printf("  %-8s %-9s %9s %8s %-17s %-9s %9s %8s %9s %9s %9s %5s\n", "kind",
					"variant", "ns/set", "x unsync", "(min..max ns)", "restore",
					"ns/set", "x unsync", "sync/set", "retired", "sets",
					"slow");
			last = p->ranges;
			last_kind = "";
		}
		fmt_num(a, sizeof(a), "%.1f", p->set_ns);
		fmt_num(b, sizeof(b), "%.3f", p->cost_ratio);
		if (isnan(p->set_ns_min))
			snprintf(c, sizeof(c), "-");
		else
			snprintf(c, sizeof(c), "(%.0f..%.0f)", p->set_ns_min, p->set_ns_max);
		fmt_num(d, sizeof(d), "%.1f", p->restore_ns);
		fmt_num(e, sizeof(e), "%.3f", p->restore_ratio);
		fmt_num(f, sizeof(f), "%.1f", p->sync_ns_per_set);
		fmt_num(g, sizeof(g), "%.0f", p->retired_bytes_max);
		printf("  %-8s %-9s %9s %8s %-17s %-9s %9s %8s %9s %9s %9llu %5llu\n",
				strcmp(p->kind, last_kind) ? p->kind : "", p->variant, a, b, c,
				p->restore_kind[0] ? p->restore_kind : "-", d, e, f, g,
				(unsigned long long)p->ops, (unsigned long long)p->slow_sets);
		last_kind = p->kind;
	}
	if (last)
		printf("  (restore: the set(s) that put the tree back after each timed set, "
		       "timed apart;\n   sync/set: ps_store_synchronize() time per timed set, "
		       "outside the timed sets;\n   retired: most bytes one synchronize call "
		       "released; sets: the kind's timed sets, all repetitions;\n   slow: of "
		       "those, how many took 100 us or more (preempted?), counted in ns/set)\n");
}

/* ---- target summary ------------------------------------------------------------------- */

static void target_cpu(const char *what, double measured, const char *op, double want,
		const char *fmt, double cpu)
{
	char m[32];
	bool met;

	if (isnan(measured))
		return;
	snprintf(m, sizeof(m), fmt, measured);
	met = !strcmp(op, ">=") ? measured >= want : measured <= want;
	printf("  %-58s %10s  (%s %g)  %-6s", what, m, op, want, met ? "met" : "MISSED");
	if (!isnan(cpu))
		printf("  cpu-normalised %.3f %s", cpu,
				(!strcmp(op, ">=") ? cpu >= want : cpu <= want) ? "met" : "MISSED");
	putchar('\n');
}

static void target(const char *what, double measured, const char *op, double want, const char *fmt)
{
	target_cpu(what, measured, op, want, fmt, NAN);
}

static double ratio(const struct stress_point *a, const struct stress_point *b)
{
	return a && b ? a->ops_per_sec / b->ops_per_sec : NAN;
}

static double fld(const struct stress_point *p, size_t off)
{
	return p ? *(const double *)((const char *)p + off) : NAN;
}

#define F(p, field) fld(p, offsetof(struct stress_point, field))

static void summary(void)
{
	static const char *const cost_v[] = {"rcu", "rcu-qsbr", "seqlock", "rcu:noref",
			"rcu-qsbr:noref", "seqlock:noref"};
	static const double cost_t[] = {1.10, 1.10, 1.15, 1.10, 1.10, 1.15};
	static const char *const eff_v[] = {"rcu", "rcu-qsbr", "seqlock", "rwlock"};
	static const double eff_t[] = {0.90, 0.90, 0.85, 0.75};
	uint64_t n = stress_opts.ranges[0];
	char what[96];
	size_t i;
	bool any = false;

	for (i = 0; i < npoints; i++)
		if (strcmp(points[i].scenario, "lookup-cost") && strcmp(points[i].scenario, "window") &&
				points[i].ranks == 2)
			any = true;
	if (!any && !stress_find("lookup-cost", "rcu", 1, 0))
		return;
	printf("\ntargets (issues 3 and 4), ratios from this run (cpu-normalised: per CPU-second "
	       "the ranks got):\n");
	for (i = 0; i < 6; i++) {
		snprintf(what, sizeof(what), "lookup cost %s / %s, 1 rank, N=%llu", cost_v[i],
				strchr(cost_v[i], ':') ? "unsync:noref" : "unsync",
				(unsigned long long)n);
		target(what, F(stress_find("lookup-cost", cost_v[i], 1, n), cost_ratio),
				"<=", cost_t[i], "%.3f");
	}
	for (i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "shared-text efficiency %s, 2 ranks", eff_v[i]);
		target_cpu(what, F(stress_find("shared-text", eff_v[i], 2, 0), efficiency),
				">=", eff_t[i], "%.3f",
				F(stress_find("shared-text", eff_v[i], 2, 0), cpu_efficiency));
	}
	target("shared-text rwlock / pthread_rwlock, 2 ranks",
			ratio(stress_find("shared-text", "rwlock", 2, 0),
					stress_find("shared-text", "pthread_rwlock", 2, 0)),
			">=", 1.5, "%.2f");
	for (i = 0; i < 3; i++) {
		static const char *const nv[] = {"rcu:noref", "rcu-qsbr:noref", "seqlock:noref"};

		snprintf(what, sizeof(what), "hot-policy efficiency %s, 2 ranks", nv[i]);
		target_cpu(what, F(stress_find("hot-policy", nv[i], 2, 0), efficiency), ">=", 0.90,
				"%.3f", F(stress_find("hot-policy", nv[i], 2, 0), cpu_efficiency));
	}
	/* Issue 12: counted lookups of a hot policy, its count on per-CPU stripes. */
	for (i = 0; i < 3; i++) {
		static const char *const cv[] = {"rcu", "rcu-qsbr", "seqlock"};
		const struct stress_point *p = stress_find("hot-policy", cv[i], 2, 0),
					  *u = stress_find("hot-policy", "unsync", 2, 0);

		snprintf(what, sizeof(what), "hot-policy efficiency %s (counted), 2 ranks", cv[i]);
		target_cpu(what, F(p, efficiency), ">=", 0.80, "%.3f", F(p, cpu_efficiency));
		snprintf(what, sizeof(what), "hot-policy %s (counted) / unsync (atomic), 2 ranks",
				cv[i]);
		target_cpu(what, ratio(p, u), ">=", 1.0, "%.3f",
				F(p, cpu_efficiency) / F(u, cpu_efficiency));
	}
	for (i = 0; i < 2; i++) {
		static const int rk[] = {256, 1024};

		snprintf(what, sizeof(what), "shared-text rcu throughput %d ranks / 2 ranks",
				rk[i]);
		target(what,
				ratio(stress_find("shared-text", "rcu", rk[i], 0),
						stress_find("shared-text", "rcu", 2, 0)),
				">=", 0.8, "%.3f");
	}
	target("memcg-charge atomic / spin, 2 ranks",
			ratio(stress_find("memcg-charge", "atomic", 2, 0),
					stress_find("memcg-charge", "spin", 2, 0)),
			">=", 2.0, "%.2f");
	target("memcg-charge stock efficiency (vs 1 rank), 2 ranks",
			F(stress_find("memcg-charge", "stock", 2, 0), efficiency), ">=", 0.8,
			"%.3f");
	target("mmap-commit loose / strict, 2 ranks",
			ratio(stress_find("mmap-commit", "loose", 2, 0),
					stress_find("mmap-commit", "strict", 2, 0)),
			">=", 5.0, "%.2f");
	target("css-walk rcu efficiency (vs 1 rank), 2 ranks",
			F(stress_find("css-walk", "rcu", 2, 0), efficiency), ">=", 0.9, "%.3f");
	target("css-walk rwlock longest writer wait (ms), 2 ranks",
			F(stress_find("css-walk", "rwlock", 2, 0), writer_max_wait_ns) / 1e6,
			"<=", 10, "%.3f");
	for (i = 0; i < 2; i++) {
		static const char *const wv[] = {"rwlock", "seqlock"};

		snprintf(what, sizeof(what), "shared-text %s longest writer wait (ms), 2 ranks",
				wv[i]);
		target(what, F(stress_find("shared-text", wv[i], 2, 0), writer_max_wait_ns) / 1e6,
				"<=", 10, "%.3f");
	}
}

/*
 * Issue 10, RCU stores whose writers never wait.  A run with
 * --write-interval 0 measures the flat-out writer beside 1 rank (sets/s
 * against seqlock's in the same run); a run with a paced writer (the
 * default, 1 kHz) measures what the readers and the writer get: the share
 * of the requested sets achieved, the longest set, the readers'
 * efficiency.  Bytes per range come from lookup-cost at the largest N.
 */
static void issue10_header(bool *header)
{
	if (!*header)
		printf("\ntargets (issue 10, RCU writers that never wait), ratios from this run:\n");
	*header = true;
}

static void summary_rcu_writers(void)
{
	static const char *const rv[] = {"rcu", "rcu-qsbr"};
	uint64_t nmax = 0;
	char what[96];
	size_t i;
	int v;
	bool header = false;

	for (v = 0; v < 2; v++) {
		const struct stress_point *r1 = stress_find("shared-text", rv[v], 1, 0);
		const struct stress_point *s1 = stress_find("shared-text", "seqlock", 1, 0);
		const struct stress_point *r2 = stress_find("shared-text", rv[v], 2, 0);
		char noref[32];

		if (stress_opts.write_interval_ns == 0 && r1 && s1 && stress_opts.writers == 1) {
			issue10_header(&header);
			snprintf(what, sizeof(what), "flat-out writer beside 1 rank: %s / seqlock sets/s",
					rv[v]);
			target(what, r1->writer_ops_per_sec / s1->writer_ops_per_sec, ">=", 0.5,
					"%.3f");
		}
		if (stress_opts.write_interval_ns == 0 || !r2)
			continue;
		issue10_header(&header);
		snprintf(what, sizeof(what), "shared-text %s sets achieved / requested, 2 ranks",
				rv[v]);
		target(what,
				r2->writer_ops_per_sec /
						(1e9 / (double)stress_opts.write_interval_ns * stress_opts.writers),
				">=", 0.95, "%.3f");
		snprintf(what, sizeof(what), "shared-text %s longest writer wait (ms), 2 ranks", rv[v]);
		target(what, r2->writer_max_wait_ns / 1e6, "<=", 1.0, "%.3f");
		snprintf(noref, sizeof(noref), "%s:noref", rv[v]);
		snprintf(what, sizeof(what), "shared-text %s cpu efficiency, 2 ranks", noref);
		target(what, F(stress_find("shared-text", noref, 2, 0), cpu_efficiency), ">=", 0.85,
				"%.3f");
		snprintf(what, sizeof(what), "shared-text %s / rwlock efficiency (counted), 2 ranks",
				rv[v]);
		target(what, r2->efficiency / F(stress_find("shared-text", "rwlock", 2, 0), efficiency),
				">=", 1.0, "%.3f");
	}
	for (i = 0; i < npoints; i++)
		if (!strcmp(points[i].scenario, "lookup-cost") && points[i].ranges > nmax)
			nmax = points[i].ranges;
	for (v = 0; v < 2 && nmax >= 1000000; v++) {
		const struct stress_point *r = stress_find("lookup-cost", rv[v], 1, nmax);
		const struct stress_point *sp = stress_find("lookup-cost", "spin", 1, nmax);

		if (!r || !sp)
			continue;
		issue10_header(&header);
		snprintf(what, sizeof(what), "bytes per range %s / spin, N=%llu", rv[v],
				(unsigned long long)nmax);
		target(what, r->bytes_per_range / sp->bytes_per_range, "<=", 1.15, "%.3f");
	}
}

/*
 * write-cost: an RCU store's set costs at most 3x the unsync in-place set,
 * at every N, for every kind of set timed (a kind's own sets and the sets
 * that restore it); the worst kind is named.
 */
static void summary_write_cost(void)
{
	static const char *const wv[] = {"rcu", "rcu-qsbr"};
	uint64_t done[STRESS_MAX_LIST * 4];
	size_t ndone = 0, i, j, d;
	bool header = false;
	int v;

	for (i = 0; i < npoints; i++) {
		uint64_t n = points[i].ranges;

		if (strcmp(points[i].scenario, "write-cost"))
			continue;
		for (d = 0; d < ndone && done[d] != n; d++)
			;
		if (d < ndone || ndone == sizeof(done) / sizeof(done[0]))
			continue;
		done[ndone++] = n;
		for (v = 0; v < 2; v++) {
			double worst = NAN;
			const char *wk = "";
			char what[96];

			for (j = 0; j < npoints; j++) {
				const struct stress_point *p = &points[j];

				if (strcmp(p->scenario, "write-cost") || p->ranges != n ||
						strcmp(p->variant, wv[v]))
					continue;
				if (!isnan(p->cost_ratio) && !(p->cost_ratio <= worst)) {
					worst = p->cost_ratio;
					wk = p->kind;
				}
				if (!isnan(p->restore_ratio) && !(p->restore_ratio <= worst)) {
					worst = p->restore_ratio;
					wk = p->restore_kind;
				}
			}
			if (isnan(worst))
				continue;
			if (!header) {
				printf("\nwrite-cost target: set cost / the unsync in-place set, "
				       "worst kind, at every N:\n");
				header = true;
			}
			snprintf(what, sizeof(what), "write-cost %s / unsync set, N=%llu (%s)",
					wv[v], (unsigned long long)n, wk);
			target(what, worst, "<=", 3.0, "%.2f");
		}
	}
}

/* ---- plot -------------------------------------------------------------------------------- */

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	while (path && *path) {
		const char *end = strchr(path, ':');
		size_t len = end ? (size_t)(end - path) : strlen(path);

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, prog);
		if (!access(buf, X_OK))
			return true;
		path = end ? end + 1 : NULL;
	}
	return false;
}

static void plot(const char *file)
{
	char dat[4200], gp[4200], cmd[8600];
	const char *scn[] = {"shared-text", "hot-policy"};
	const char *ext = strrchr(file, '.');
	bool png = ext && !strcasecmp(ext, ".png");
	FILE *d, *g;
	int block = 0, s, first;
	size_t i, j;
	char titles[2][2048] = {"", ""};
	int nblocks[2] = {0, 0};

	snprintf(dat, sizeof(dat), "%s.dat", file);
	snprintf(gp, sizeof(gp), "%s.gp", file);
	d = fopen(dat, "w");
	if (!d) {
		fprintf(stderr, "polstore-stress: --plot: cannot write %s: %s\n", dat,
				strerror(errno));
		return;
	}
	/* One block per (scenario, variant), two blank lines apart: gnuplot's "index". */
	for (s = 0; s < 2; s++) {
		for (i = 0; i < npoints; i++) {
			bool seen = false;

			if (strcmp(points[i].scenario, scn[s]))
				continue;
			for (j = 0; j < i; j++)
				if (!strcmp(points[j].scenario, scn[s]) &&
						!strcmp(points[j].variant, points[i].variant))
					seen = true;
			if (seen)
				continue;
			fprintf(d, "# %s %s\n# ranks ops_per_sec efficiency\n", scn[s],
					points[i].variant);
			for (j = i; j < npoints; j++)
				if (!strcmp(points[j].scenario, scn[s]) &&
						!strcmp(points[j].variant, points[i].variant))
					fprintf(d, "%d %.0f %.4f\n", points[j].ranks,
							points[j].ops_per_sec,
							points[j].efficiency);
			fprintf(d, "\n\n");
			strncat(titles[s], points[i].variant,
					sizeof(titles[s]) - strlen(titles[s]) - 2);
			strcat(titles[s], " ");
			nblocks[s]++;
			block++;
		}
	}
	fclose(d);
	g = fopen(gp, "w");
	if (!g) {
		fprintf(stderr, "polstore-stress: --plot: cannot write %s\n", gp);
		return;
	}
	fprintf(g, "set terminal %s size 1200,%d%s\nset output '%s'\n", png ? "pngcairo" : "svg",
			nblocks[1] ? 900 : 480, png ? "" : " dynamic font 'sans,11'", file);
	fprintf(g, "set termoption noenhanced\n");
	fprintf(g,
			"set multiplot layout %d,2\nset logscale x 2\nset grid\nset key outside "
			"right "
			"top font ',9'\nset xlabel 'ranks (threads) on %ld CPUs'\n",
			nblocks[1] ? 2 : 1, sysconf(_SC_NPROCESSORS_ONLN));
	first = 0;
	for (s = 0; s < 2; s++) {
		if (!nblocks[s])
			continue;
		fprintf(g, "titles = \"%s\"\n", titles[s]);
		fprintf(g,
				"set title '%s: lookups/s'\nset logscale y\nset ylabel "
				"'lookups/s'\n"
				"plot for [i=0:%d] '%s' index (i+%d) using 1:2 with linespoints "
				"title "
				"word(titles, i+1)\n",
				scn[s], nblocks[s] - 1, dat, first);
		fprintf(g,
				"set title '%s: efficiency'\nunset logscale y\nset ylabel "
				"'efficiency'\nset yrange [0:*]\n"
				"plot for [i=0:%d] '%s' index (i+%d) using 1:3 with linespoints "
				"title "
				"word(titles, i+1)\nset autoscale y\n",
				scn[s], nblocks[s] - 1, dat, first);
		first += nblocks[s];
	}
	fprintf(g, "unset multiplot\n");
	fclose(g);
	(void)block;
	if (!first) {
		fprintf(stderr, "polstore-stress: --plot: no shared-text or hot-policy points to "
				"draw\n");
		return;
	}
	if (!in_path("gnuplot")) {
		fprintf(stderr,
				"polstore-stress: --plot: gnuplot is NOT installed (e.g. apt-get "
				"install gnuplot-nox): no %s; the data is in %s and the script in "
				"%s\n",
				file, dat, gp);
		return;
	}
	snprintf(cmd, sizeof(cmd), "gnuplot '%s'", gp);
	if (system(cmd))
		fprintf(stderr,
				"polstore-stress: --plot: gnuplot failed; data in %s, script in "
				"%s\n",
				dat, gp);
	else
		stress_progress("plot written to %s (data %s, script %s)", file, dat, gp);
}

/* ---- options --------------------------------------------------------------------------------- */

static void usage(FILE *out)
{
	fprintf(out, "Usage: polstore-stress [OPTION]...\n"
		     "Measure and validate polstore's store variants against hand-written "
		     "baselines.\n"
		     "With no option: lookup-cost and shared-text, every variant, 1 and 2 "
		     "ranks,\n"
		     "a human table and the issue-3 target summary (about 30-40 s).\n"
		     "\n"
		     "Scenarios (--scenario, comma-separated; default lookup-cost,shared-text):\n"
		     "  lookup-cost   one rank, no writer, no other work: ns per lookup per "
		     "variant,\n"
		     "                ratio to the unsynchronised lookup, and bytes per range "
		     "measured\n"
		     "                from the allocator; run for every --ranges value\n"
		     "  shared-text   ranks fault on uniform (or --sequential) pages of a shared "
		     "text\n"
		     "                region: lookup, validate, --fault-work of other work; "
		     "writers\n"
		     "                ps_store_set() a whole range or a random sub-range of one\n"
		     "  hot-policy    as shared-text, but every rank hits the same range (writers\n"
		     "                set the others): the policy refcount is the shared line\n"
		     "  memcg-charge  ranks charge/uncharge pages through leaves under a shared "
		     "parent\n"
		     "                and root (ps_charge kinds spin, seqlock, atomic, stock, "
		     "plus\n"
		     "                stock-private: a private hierarchy per rank)\n"
		     "  mmap-commit   ranks commit/uncommit 32768 pages (ps_commit), strict and "
		     "loose\n"
		     "                batch, max approximation error against its bound\n"
		     "  css-walk      ranks walk all ids with get_next, writers alloc/remove ids\n"
		     "                (ps_idmap spin, rwlock, rcu)\n"
		     "  write-cost    one thread, no readers: ns per ps_store_set() for each "
		     "store\n"
		     "                variant and the unsync in-place set, kinds replace, split,\n"
		     "                remove, span16 (restoring sets timed apart), ratio\n"
		     "                to unsync; --ranges [100,10000,1000000], median of "
		     "--repeat,\n"
		     "                min(--duration, 0.1) s per kind (not in the default run)\n"
		     "  window        ranks read windows (ps_store_foreach_range()) of 1, 16 and "
		     "256\n"
		     "                ranges, and point lookups, while writers set: CPU ns per "
		     "window\n"
		     "                and per range, ratio to the lookup; store variants, the "
		     "first\n"
		     "                --ranges value [1000000] (not in the default run)\n"
		     "  batch-cost    one thread, no readers: ns per set as --batch [16] single "
		     "sets\n"
		     "                and as one ps_store_set_many(), adjacent and random slots;\n"
		     "                --ranges [10000,1000000] (not in the default run)\n"
		     "  all           every scenario above\n"
		     "\n"
		     "Linearizability check (instead of the scenarios):\n"
		     "  --check              run the oracle on every selected store variant\n"
		     "                       (spin, rwlock, seqlock, rcu, rcu-qsbr): versioned "
		     "sets and\n"
		     "                       removals against timed lookups; an illegal lookup "
		     "prints\n"
		     "                       the history that proves it and aborts.  Without "
		     "--ranks\n"
		     "                       or --writers: CPUs/2 readers + 1 writer, then "
		     "2 x CPUs\n"
		     "                       readers + 2 writers (below and above the core "
		     "count)\n"
		     "  --lookups N          lookups checked per configuration [1000000]\n"
		     "  --writes N           and at least N sets and removals; more rounds run "
		     "until\n"
		     "                       the writers (an RCU set waits a grace period) "
		     "got there [10000]\n"
		     "                       (--pages: pages written and read [48])\n"
		     "\n"
		     "Options (defaults in brackets):\n"
		     "  --variants LIST      comma list or 'all' [all]; store scenarios: unsync,\n"
		     "                       unsync:noref, pthread_mutex, pthread_rwlock, spin, "
		     "rwlock,\n"
		     "                       seqlock, rcu, rcu-qsbr, each also with ':noref'; "
		     "the\n"
		     "                       1-rank unsync and unsync:noref baselines always run\n"
		     "  --ranks LIST         rank (reader thread) counts, e.g. 1,2 [1,2]\n"
		     "  --sweep LIST         same as --ranks, e.g. 1,2,4,16,64,256,1024\n"
		     "  --duration SECONDS   measuring time per point [1.0]\n"
		     "  --repeat K           measure every point K times, interleaved; report "
		     "the\n"
		     "                       median-throughput repetition and the worst writer "
		     "wait [1]\n"
		     "  --pages N            pages in the shared text region [16384]\n"
		     "  --ranges LIST        policy ranges N [64]; lookup-cost and write-cost run\n"
		     "                       each value, e.g. 100,10000,1000000 (write-cost's\n"
		     "                       default); the others use the first\n"
		     "  --writers N          writer threads calling ps_store_set() [1]\n"
		     "  --batch N            writers apply N sets per ps_store_set_many() call "
		     "[1];\n"
		     "                       batch-cost's batch size [16]\n"
		     "  --write-interval US  microseconds between a writer's sets; 0 = flat out "
		     "[1000]\n"
		     "  --fault-work NS      other work per fault in ns, or 'auto': the measured "
		     "cost\n"
		     "                       of one unsynchronised lookup [auto]\n"
		     "  --pattern P          uniform or sequential page order [uniform]\n"
		     "  --sequential         same as --pattern sequential\n"
		     "  --seed N             random seed [1]\n"
		     "  --scenario LIST      see above [lookup-cost,shared-text]\n"
		     "  --json               JSON Lines on stdout, one object per point\n"
		     "  --csv                CSV on stdout, one row per point\n"
		     "  --plot FILE.svg      throughput and efficiency against ranks per "
		     "variant\n"
		     "                       (gnuplot; .png for PNG); FILE.dat and FILE.gp kept\n"
		     "  --quiet              no progress lines on stderr\n"
		     "  --help               this text\n"
		     "\n"
		     "Every lookup is validated (a policy never set at that page aborts the "
		     "run);\n"
		     "ps_store_check() runs after every point.  lock_stat tables are printed "
		     "for the\n"
		     "locking variants when the library was built with "
		     "-DPOLSTORE_LOCK_STAT=ON.\n"
		     "Exit status: 0 ok, 1 usage error, 2 runtime error, abort on a broken "
		     "invariant.\n");
}

static int parse_list_u64(const char *s, uint64_t *out, int max)
{
	int n = 0;
	char *end;

	while (*s) {
		unsigned long long v = strtoull(s, &end, 10);

		if (end == s || n == max)
			return -1;
		if (*end == 'k' || *end == 'K')
			v *= 1000, end++;
		else if (*end == 'm' || *end == 'M')
			v *= 1000000, end++;
		out[n++] = v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return n;
}

static void bad(const char *what, const char *val)
{
	fprintf(stderr, "polstore-stress: invalid %s: '%s' (see --help)\n", what, val ? val : "");
	exit(1);
}

static bool scenario_selected(const char *name)
{
	char buf[256], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", stress_opts.scenarios);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, name) || !strcmp(tok, "all"))
			return true;
	return false;
}

bool stress_variant_selected(const char *name)
{
	char buf[512], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", stress_opts.variants);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, name) || !strcmp(tok, "all"))
			return true;
	return false;
}

bool stress_companion_variant_known(const char *name);

static void parse(int argc, char **argv)
{
	bool scenario_given = false;
	const char *scenario_only = NULL, *check_only = NULL; /* an option given, for the checks */
	int i;

	snprintf(stress_opts.scenarios, sizeof(stress_opts.scenarios), "lookup-cost,shared-text");
	snprintf(stress_opts.variants, sizeof(stress_opts.variants), "all");
	stress_opts.ranks[0] = 1;
	stress_opts.ranks[1] = 2;
	stress_opts.nranks = 2;
	stress_opts.duration_s = 1.0;
	stress_opts.repeat = 1;
	stress_opts.pages = 16384;
	stress_opts.ranges[0] = 64;
	stress_opts.nranges = 1;
	stress_opts.writers = 1;
	stress_opts.batch = 1;
	stress_opts.write_interval_ns = 1000000;
	stress_opts.fault_work_ns = -1;
	stress_opts.seed = 1;
	stress_opts.check_lookups = 1000000;
	stress_opts.check_writes = 10000;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		char *end;
		char key[64];
		const char *eq = strchr(a, '=');

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (strncmp(a, "--", 2))
			bad("argument", a);
		if (eq) {
			snprintf(key, sizeof(key), "%.*s", (int)(eq - a), a);
			v = eq + 1;
		} else {
			snprintf(key, sizeof(key), "%s", a);
		}
#define FLAG(name) (!strcmp(key, name))
#define NEEDV()                                                                                    \
	do {                                                                                       \
		if (!v) {                                                                          \
			if (i + 1 >= argc)                                                         \
				bad("missing value for", key);                                     \
			v = argv[++i];                                                             \
		}                                                                                  \
	} while (0)
		if (FLAG("--duration") || FLAG("--repeat") || FLAG("--plot") ||
				FLAG("--write-interval") || FLAG("--ranges") || FLAG("--pattern") ||
				FLAG("--sequential") || FLAG("--fault-work") || FLAG("--batch"))
			scenario_only = a;
		if (FLAG("--lookups") || FLAG("--writes"))
			check_only = a;
		if (FLAG("--json")) {
			stress_opts.json = true;
		} else if (FLAG("--check")) {
			stress_opts.check = true;
		} else if (FLAG("--lookups")) {
			uint64_t n;

			NEEDV();
			if (parse_list_u64(v, &n, 1) != 1 || !n || n > 1000000000000ULL)
				bad("--lookups", v);
			stress_opts.check_lookups = (long)n;
		} else if (FLAG("--writes")) {
			uint64_t n;

			NEEDV();
			if (parse_list_u64(v, &n, 1) != 1 || n > 1000000000ULL)
				bad("--writes", v);
			stress_opts.check_writes = (long)n;
		} else if (FLAG("--csv")) {
			stress_opts.csv = true;
		} else if (FLAG("--quiet")) {
			stress_opts.quiet = true;
		} else if (FLAG("--sequential")) {
			stress_opts.sequential = true;
		} else if (FLAG("--pattern")) {
			NEEDV();
			if (!strcmp(v, "sequential"))
				stress_opts.sequential = true;
			else if (!strcmp(v, "uniform"))
				stress_opts.sequential = false;
			else
				bad("--pattern", v);
		} else if (FLAG("--variants")) {
			char buf[512], *tok, *save;

			NEEDV();
			snprintf(stress_opts.variants, sizeof(stress_opts.variants), "%s", v);
			snprintf(buf, sizeof(buf), "%s", v);
			for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (strcmp(tok, "all") && !stress_variant_known(tok) &&
						!stress_companion_variant_known(tok))
					bad("variant", tok);
		} else if (FLAG("--ranks") || FLAG("--sweep")) {
			uint64_t l[STRESS_MAX_LIST];
			int n, k;

			NEEDV();
			n = parse_list_u64(v, l, STRESS_MAX_LIST);
			if (n <= 0)
				bad(key, v);
			for (k = 0; k < n; k++) {
				if (!l[k] || l[k] > 8192)
					bad(key, v);
				stress_opts.ranks[k] = (int)l[k];
			}
			stress_opts.nranks = n;
			stress_opts.ranks_given = true;
		} else if (FLAG("--duration")) {
			NEEDV();
			stress_opts.duration_s = strtod(v, &end);
			if (*end || !(stress_opts.duration_s > 0) || stress_opts.duration_s > 3600)
				bad("--duration", v);
		} else if (FLAG("--repeat")) {
			NEEDV();
			stress_opts.repeat = (int)strtol(v, &end, 10);
			if (*end || stress_opts.repeat < 1 || stress_opts.repeat > 100)
				bad("--repeat", v);
		} else if (FLAG("--pages")) {
			NEEDV();
			if (parse_list_u64(v, &stress_opts.pages, 1) != 1 || !stress_opts.pages ||
					stress_opts.pages > (1ULL << 40))
				bad("--pages", v);
			stress_opts.pages_given = true;
		} else if (FLAG("--ranges")) {
			int k;

			stress_opts.ranges_given = true;
			NEEDV();
			stress_opts.nranges =
					parse_list_u64(v, stress_opts.ranges, STRESS_MAX_LIST);
			if (stress_opts.nranges <= 0)
				bad("--ranges", v);
			for (k = 0; k < stress_opts.nranges; k++)
				if (!stress_opts.ranges[k] || stress_opts.ranges[k] > 100000000)
					bad("--ranges", v);
		} else if (FLAG("--writers")) {
			NEEDV();
			stress_opts.writers = (int)strtol(v, &end, 10);
			if (*end || stress_opts.writers < 0 || stress_opts.writers > 64)
				bad("--writers", v);
			stress_opts.writers_given = true;
		} else if (FLAG("--batch")) {
			NEEDV();
			stress_opts.batch = (int)strtol(v, &end, 10);
			if (*end || stress_opts.batch < 1 || stress_opts.batch > 4096)
				bad("--batch (1 to 4096)", v);
			stress_opts.batch_given = true;
		} else if (FLAG("--write-interval")) {
			double us;

			NEEDV();
			us = strtod(v, &end);
			if (*end || us < 0)
				bad("--write-interval", v);
			stress_opts.write_interval_ns = (uint64_t)(us * 1000);
		} else if (FLAG("--fault-work")) {
			NEEDV();
			if (!strcmp(v, "auto")) {
				stress_opts.fault_work_ns = -1;
			} else {
				stress_opts.fault_work_ns = strtol(v, &end, 10);
				if (*end || stress_opts.fault_work_ns < 0)
					bad("--fault-work", v);
			}
		} else if (FLAG("--seed")) {
			NEEDV();
			stress_opts.seed = strtoull(v, &end, 0);
			if (*end)
				bad("--seed", v);
		} else if (FLAG("--scenario") || FLAG("--scenarios")) {
			char buf[256], *tok, *save;
			size_t k;

			NEEDV();
			scenario_given = true;
			snprintf(stress_opts.scenarios, sizeof(stress_opts.scenarios), "%s", v);
			snprintf(buf, sizeof(buf), "%s", v);
			for (tok = strtok_r(buf, ",", &save); tok;
					tok = strtok_r(NULL, ",", &save)) {
				bool ok = !strcmp(tok, "all");

				for (k = 0; k < NSCENARIOS; k++)
					ok = ok || !strcmp(tok, all_scenarios[k]);
				if (!ok)
					bad("--scenario", tok);
			}
		} else if (FLAG("--plot")) {
			NEEDV();
			stress_opts.plot = v;
		} else {
			bad("option", a);
		}
	}
	if (stress_opts.json && stress_opts.csv)
		bad("combination", "--json with --csv");
	if (!stress_opts.check && check_only)
		bad("option without --check", check_only);
	if (stress_opts.check) {
		char buf[512], *tok, *save;

		if (scenario_given)
			bad("combination", "--check with --scenario");
		if (scenario_only)
			bad("option with --check (it measures no speed)", scenario_only);
		if (stress_opts.writers < 1)
			bad("--writers for --check (at least 1)", "0");
		if (stress_opts.pages_given && stress_opts.pages > (1u << 20))
			bad("--pages for --check (at most 1048576)", "too many");
		snprintf(buf, sizeof(buf), "%s", stress_opts.variants);
		for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, "all") && !stress_check_variant_known(tok))
				bad("variant for --check (spin, rwlock, seqlock, rcu, rcu-qsbr)",
						tok);
	}
}

int main(int argc, char **argv)
{
	struct ps_alloc_ops ops = {count_alloc, count_free, NULL};
	bool human;

	t_program_start = stress_now_ns();
	parse(argc, argv);
	if (stress_opts.check)
		return stress_run_check(); /* it installs its own counting allocator */
	human = !stress_opts.json && !stress_opts.csv;
	/* Before any polstore object exists: count every byte the library holds. */
	if (ps_set_alloc_ops(&ops))
		stress_die("ps_set_alloc_ops failed");
	stress_calibrate();
	if (human)
		printf("polstore-stress %s: %ld CPUs online, lock_stat %s, seed %llu\n",
				ps_version(), sysconf(_SC_NPROCESSORS_ONLN),
				ps_lock_stat_enabled() ? "on"
						       : "off (build with -DPOLSTORE_LOCK_STAT=ON)",
				(unsigned long long)stress_opts.seed);

	if (scenario_selected("lookup-cost"))
		stress_run_lookup_cost();
	if (scenario_selected("shared-text"))
		stress_run_store("shared-text");
	if (scenario_selected("hot-policy"))
		stress_run_store("hot-policy");
	if (scenario_selected("memcg-charge"))
		stress_run_memcg_charge();
	if (scenario_selected("mmap-commit"))
		stress_run_mmap_commit();
	if (scenario_selected("css-walk"))
		stress_run_css_walk();
	if (scenario_selected("write-cost"))
		stress_run_write_cost();
	if (scenario_selected("window"))
		stress_run_window();
	if (scenario_selected("batch-cost"))
		stress_run_batch_cost();

	if (human) {
		table_lookup_cost();
		table_store("shared-text");
		table_store("hot-policy");
		stress_print_companions();
		table_write_cost();
		stress_print_window();
		table_lockstat();
		summary();
		summary_write_cost();
		summary_rcu_writers();
		fflush(stdout);
	}
	if (stress_opts.plot)
		plot(stress_opts.plot);
	free(points);
	return 0;
}
