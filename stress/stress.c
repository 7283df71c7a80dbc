// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress: what the scenario files and the driver share (stress.h):
 * errors and progress, timing and the fault-work loop, threads and the
 * start gate, the allocator that counts the library's live bytes, the
 * sampled latency histogram, and the points measured so far with their
 * JSON Lines / CSV output.  It calls neither the driver nor a scenario.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "compiler.h"
#include "stress.h"

struct stress_opts stress_opts;
double stress_ns_per_tick = 1.0;
double stress_work_iters_per_ns = 1.0;

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

void stress_init_clock(void)
{
	t_program_start = stress_now_ns();
}

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
	PSI_FETCH_ADD(g->ready, 1, RELEASE);
	while (!PSI_LOAD_ACQUIRE(g->go))
		syscall(SYS_futex, &g->go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

uint64_t stress_gate_open(struct stress_gate *g, int nthreads)
{
	uint64_t t;

	while (PSI_LOAD_ACQUIRE(g->ready) < nthreads)
		stress_sleep_ns(100000);
	/*
	 * The time is taken before the release: the woken threads may preempt
	 * this one for a long while (seconds with 1024 ranks on 2 CPUs).
	 */
	t = stress_now_ns();
	PSI_STORE_RELEASE(g->go, 1);
	syscall(SYS_futex, &g->go, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	return t;
}

/* ---- the allocator: counts live bytes of everything polstore allocates -------- */

/*
 * One counter a thread (threads past the table's end share slots), each on
 * its own cache line, summed when read: the count must not make a line that
 * the writer's allocations and the reclaim thread's frees pass between CPUs,
 * which the measured code does not have.  A slot may go negative (a block
 * freed by another thread than the one that allocated it); the sum is exact.
 */
#define COUNT_SLOTS 64

static struct {
	long bytes;
	char pad[64 - sizeof(long)];
} live_bytes[COUNT_SLOTS] __attribute__((aligned(64)));

static unsigned int count_next_slot;
static __thread int count_slot = -1;

static long *count_mine(void)
{
	if (count_slot < 0)
		count_slot = (int)(PSI_FETCH_ADD(count_next_slot, 1, RELAXED) %
				   COUNT_SLOTS);
	return &live_bytes[count_slot].bytes;
}

static void *count_alloc(size_t size, void *ctx)
{
	void *p = malloc(size);

	(void)ctx;
	if (p)
		PSI_FETCH_ADD(*(count_mine()), (long)malloc_usable_size(p), RELAXED);
	return p;
}

static void count_free(void *p, void *ctx)
{
	(void)ctx;
	if (p)
		PSI_FETCH_SUB(*(count_mine()), (long)malloc_usable_size(p), RELAXED);
	free(p);
}

/* Chunks for a large index: mapped 2 MiB-aligned, as the default allocator's, and counted. */
static void *count_chunk_alloc(size_t size, size_t align, void *ctx)
{
	size_t span = size + align - (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t raw, start;
	void *m;

	(void)ctx;
	m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	raw = (uintptr_t)m;
	start = (raw + align - 1) & ~(uintptr_t)(align - 1);
	if (start > raw)
		munmap(m, start - raw);
	if (raw + span > start + size)
		munmap((void *)(start + size), raw + span - (start + size));
	PSI_FETCH_ADD(*(count_mine()), (long)size, RELAXED);
	return (void *)start;
}

static void count_chunk_free(void *p, size_t size, void *ctx)
{
	(void)ctx;
	PSI_FETCH_SUB(*(count_mine()), (long)size, RELAXED);
	munmap(p, size);
}

void stress_count_allocations(void)
{
	static const struct ps_alloc_ops ops = {.alloc = count_alloc,
			.free = count_free,
			.chunk_alloc = count_chunk_alloc,
			.chunk_free = count_chunk_free};

	if (ps_set_alloc_ops(&ops))
		stress_die("ps_set_alloc_ops failed");
}

void stress_huge_bytes(size_t *advised, size_t *huge)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	size_t size = 0, anon_huge = 0, kb;
	char line[512];

	*advised = *huge = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Size: %zu kB", &kb) == 1)
			size = kb << 10;
		else if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
			anon_huge = kb << 10;
		else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg")) {
			*advised += size;
			*huge += anon_huge;
		}
	}
	fclose(f);
}

double stress_huge_share(size_t advised0, size_t huge0)
{
	size_t advised, huge;

	stress_huge_bytes(&advised, &huge);
	if (advised <= advised0)
		return NAN;
	return (double)(huge > huge0 ? huge - huge0 : 0) / (double)(advised - advised0);
}

size_t stress_live_bytes(void)
{
	long sum = 0;

	for (int i = 0; i < COUNT_SLOTS; i++)
		sum += PSI_READ_ONCE(live_bytes[i].bytes);
	return sum > 0 ? (size_t)sum : 0;
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
	p->efficiency_min = p->efficiency_max = p->writer_max_wait_min_ns = p->lookup_ns_max = NAN;
	p->rank_cpu_s = p->cpu_efficiency = NAN;
	p->ops_per_sec_min = p->ops_per_sec_max = NAN;
	p->reps = -1;
	p->p50_ns = p->p99_ns = p->p999_ns = p->max_ns = NAN;
	p->writer_ops_per_sec = p->writer_max_wait_ns = NAN;
	p->lookup_ns = p->overhead_ns = p->cost_ratio = p->lookup_ns_median = NAN;
	p->lookup_share_all = NAN;
	p->bytes_per_range = p->store_bytes_per_range = NAN;
	p->index_huge_share = NAN;
	p->max_overshoot = p->overshoot_bound = p->max_error = p->error_bound = NAN;
	p->set_ns = p->set_ns_min = p->set_ns_max = p->restore_ns = p->restore_ratio = NAN;
	p->set_ns_oncpu = NAN;
	p->sync_ns_per_set = p->retired_bytes_max = NAN;
	p->copied_mean = p->copied_max = p->nretired_mean = p->nretired_max = p->root_share = NAN;
	p->one_mem = p->one_heap_now = p->one_heap_idle = NAN;
	p->gp_per_sec = p->inflight_peak_bytes = NAN;
	for (int i = 0; i < 3; i++)
		p->store_mem[i] = p->store_heap[i] = p->store_rss[i] = NAN;
	p->ns_per_op = p->ranges_per_op = p->ns_per_range = p->ratio_lookup = NAN;
	p->ratio_borrow = p->single_ns = p->many_ns = p->batch_ratio = NAN;
	p->batch = -1;
	p->reader_ratio = p->writer_ratio = NAN;
	p->writer_ops_per_sec_min = p->writer_ops_per_sec_max = NAN;
	p->limit_ratio = p->limit_pages = p->refused_share = p->cpu_vs_private = NAN;
	p->resolvers = -1;
	p->resolve_ns = p->resolve_share = p->fixed_ratio = NAN;
	p->cpu_share = NAN;
	p->warn = 0;
}

/* ---- warnings ---------------------------------------------------------------------- */

double stress_cpu_share(double cpu_s, double wall_s, int threads)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int could = threads;

	if (ncpu >= 1 && could > ncpu)
		could = (int)ncpu;
	if (isnan(cpu_s) || !(wall_s > 0) || could < 1)
		return NAN;
	return cpu_s / (wall_s * could);
}

bool stress_warn_cpu(const struct stress_point *p)
{
	return !isnan(p->cpu_share) && p->cpu_share < stress_opts.warn_cpu;
}

void stress_warn_ref(struct stress_point *p, const struct stress_point *ref, double ref_events)
{
	if (!ref || ref == p)
		return;
	if (!(ref_events >= stress_opts.warn_events) || stress_warn_cpu(ref))
		p->warn |= STRESS_WARN_REF;
}

void stress_warn_explained(struct stress_point *p, double ratio, double share)
{
	if (isnan(ratio))
		return;
	if (isnan(share) || share < 0)
		share = 0;
	if (ratio > 1 + stress_opts.warn_slack || ratio < 1 - share - stress_opts.warn_slack)
		p->warn |= STRESS_WARN_NOISE;
}

static const char *const warn_name[] = {"cpu", "ref", "noise", "bound"};
#define NWARN (sizeof(warn_name) / sizeof(warn_name[0]))

const char *stress_warn_names(unsigned warn, char *buf, size_t n)
{
	size_t i, len = 0;

	buf[0] = 0;
	for (i = 0; i < NWARN; i++)
		if (warn & (1u << i))
			len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s",
					len ? "+" : "", warn_name[i]);
	return buf;
}

void stress_warn_footnote(unsigned seen)
{
	if (!seen)
		return;
	printf("  (warn: the row's figures are not meaningful:\n");
	if (seen & STRESS_WARN_CPU)
		printf("   cpu: its threads got under %.0f %% of the CPU time they could use (wall "
		       "time x\n   the smaller of their number and the %ld CPUs online): other "
		       "processes ran,\n   so its throughput and the ratios of it measure the "
		       "load;\n",
				stress_opts.warn_cpu * 100, sysconf(_SC_NPROCESSORS_ONLN));
	if (seen & STRESS_WARN_REF)
		printf("   ref: a ratio divides by a reference that counted fewer than %.0f events "
		       "or got\n   too little CPU itself (flagged cpu): the ratio is unbounded;\n",
				stress_opts.warn_events);
	if (seen & STRESS_WARN_NOISE)
		printf("   noise: the ratio is above %.2f or below 1 - (the lookup's share) - %.2f,"
		       "\n   more than the lookup, the only difference between the planes, can "
		       "explain\n   (write-cost: a store's set below %.2fx the bare set whose "
		       "work it includes);\n",
				1 + stress_opts.warn_slack, stress_opts.warn_slack,
				1 - stress_opts.warn_slack);
	if (seen & STRESS_WARN_BOUND)
		printf("   bound: the reclaim threads held over %.0f bytes waiting for a grace period\n"
		       "   beside the writer, past which an RCU set waits for one itself: the\n"
		       "   writer was throttled, and its sets/s measure the wait;\n",
				stress_opts.warn_inflight);
	printf("   limits: --warn cpu=%g,events=%g,slack=%g", stress_opts.warn_cpu,
			stress_opts.warn_events, stress_opts.warn_slack);
	if (!isnan(stress_opts.warn_inflight))
		printf(",inflight=%.0f", stress_opts.warn_inflight);
	printf(")\n");
}

void stress_fmt_ns(char *buf, size_t n, double ns)
{
	if (isnan(ns))
		snprintf(buf, n, "-");
	else if (ns < 1e4)
		snprintf(buf, n, "%.0f", ns);
	else if (ns < 1e7)
		snprintf(buf, n, "%.0fu", ns / 1e3);
	else
		snprintf(buf, n, "%.0fm", ns / 1e6);
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

size_t stress_npoints(void)
{
	return npoints;
}

void stress_points_free(void)
{
	free(points);
	points = NULL;
	npoints = cap_points = 0;
}

/*
 * The columns of the JSON and CSV output, in CSV order: a field of the
 * point, named as it is (its type follows from the field's), and how to
 * print it.  Per rank, baseline and note last: CSV keeps the columns' order.
 */
enum ctype { C_STR, C_PSTR, C_INT, C_U64, C_DBL, C_PER_RANK, C_WARN };
struct col {
	const char *key;
	enum ctype type;
	size_t off;
	const char *fmt;
};

#define COL_TYPE(f)                                                                                \
	_Generic(((struct stress_point *)0)->f, char *: C_STR, const char *: C_PSTR, int: C_INT,  \
			uint64_t: C_U64, double: C_DBL)
#define COL(f, format)                                                                             \
	{                                                                                          \
		.key = #f, .type = COL_TYPE(f), .off = offsetof(struct stress_point, f),           \
		.fmt = format                                                                      \
	}
static const struct col cols[] = {
		COL(variant, NULL),
		COL(ranks, NULL),
		COL(writers, NULL),
		COL(pages, NULL),
		COL(ranges, NULL),
		COL(ranges_end, NULL),
		COL(duration_s, "%.3f"),
		COL(fault_work_ns, "%.1f"),
		COL(ops, NULL),
		COL(ops_per_sec, "%.0f"),
		COL(reps, NULL),
		COL(ops_per_sec_min, "%.0f"),
		COL(ops_per_sec_max, "%.0f"),
		COL(efficiency, "%.4f"),
		COL(rank_cpu_s, "%.3f"),
		COL(cpu_efficiency, "%.4f"),
		COL(lookup_share, "%.4f"),
		COL(lookup_share_all, "%.4f"),
		COL(mean_ns, "%.1f"),
		COL(p50_ns, "%.0f"),
		COL(p99_ns, "%.0f"),
		COL(p999_ns, "%.0f"),
		COL(max_ns, "%.0f"),
		COL(samples, NULL),
		COL(writer_ops_per_sec, "%.1f"),
		COL(writer_max_wait_ns, "%.0f"),
		COL(lookup_ns, "%.2f"),
		COL(lookup_ns_median, "%.2f"),
		COL(overhead_ns, "%.2f"),
		COL(cost_ratio, "%.4f"),
		COL(bytes_per_range, "%.1f"),
		COL(store_bytes_per_range, "%.1f"),
		COL(max_overshoot, "%.0f"),
		COL(overshoot_bound, "%.0f"),
		COL(max_error, "%.0f"),
		COL(error_bound, "%.0f"),
		/* write-cost (after the older columns: CSV keeps their positions) */
		COL(kind, NULL),
		COL(set_ns, "%.1f"),
		COL(set_ns_min, "%.1f"),
		COL(set_ns_max, "%.1f"),
		COL(set_ns_oncpu, "%.1f"),
		COL(restore_kind, NULL),
		COL(restores, NULL),
		COL(slow_sets, NULL),
		COL(restore_ns, "%.1f"),
		COL(restore_ratio, "%.4f"),
		COL(sync_ns_per_set, "%.1f"),
		COL(retired_bytes_max, "%.0f"),
		/* window and batch-cost */
		COL(ns_per_op, "%.2f"),
		COL(ranges_per_op, "%.2f"),
		COL(ns_per_range, "%.2f"),
		COL(ratio_lookup, "%.4f"),
		COL(ratio_borrow, "%.4f"),
		COL(batch, NULL),
		COL(single_ns, "%.1f"),
		COL(many_ns, "%.1f"),
		COL(batch_ratio, "%.4f"),
		/* churn */
		COL(writer_ops_per_sec_min, "%.1f"),
		COL(writer_ops_per_sec_max, "%.1f"),
		COL(reader_ratio, "%.4f"),
		COL(writer_ratio, "%.4f"),
		COL(reference, NULL),
		COL(lookups_checked, NULL),
		/* memcg-charge */
		COL(limit_ratio, "%.2f"),
		COL(limit_pages, "%.0f"),
		COL(charges, NULL),
		COL(refused, NULL),
		COL(refused_share, "%.6f"),
		COL(cpu_vs_private, "%.4f"),
		/* uffd-fault */
		COL(resolvers, NULL),
		COL(resolve_ns, "%.1f"),
		COL(resolve_share, "%.5f"),
		COL(fixed_ratio, "%.4f"),
		/* ops_per_sec / ranks, not a field of its own */
		{"ops_per_sec_per_rank", C_PER_RANK, offsetof(struct stress_point, ops_per_sec),
				"%.0f"},
		COL(baseline, NULL),
		COL(note, NULL),
		/* write-cost, the copies and retirements of each set */
		COL(copied_mean, "%.2f"),
		COL(copied_max, "%.0f"),
		COL(nretired_mean, "%.2f"),
		COL(nretired_max, "%.0f"),
		COL(root_share, "%.3f"),
		/* many-stores */
		COL(stores, NULL),
		{"store_mem_fresh", C_DBL, offsetof(struct stress_point, store_mem[0]), "%.1f"},
		{"store_mem_after_sets", C_DBL, offsetof(struct stress_point, store_mem[1]),
				"%.1f"},
		{"store_mem_idle", C_DBL, offsetof(struct stress_point, store_mem[2]), "%.1f"},
		{"store_heap_fresh", C_DBL, offsetof(struct stress_point, store_heap[0]), "%.1f"},
		{"store_heap_after_sets", C_DBL, offsetof(struct stress_point, store_heap[1]),
				"%.1f"},
		{"store_heap_idle", C_DBL, offsetof(struct stress_point, store_heap[2]), "%.1f"},
		{"store_rss_fresh", C_DBL, offsetof(struct stress_point, store_rss[0]), "%.1f"},
		{"store_rss_after_sets", C_DBL, offsetof(struct stress_point, store_rss[1]),
				"%.1f"},
		{"store_rss_idle", C_DBL, offsetof(struct stress_point, store_rss[2]), "%.1f"},
		COL(one_mem, "%.0f"),
		COL(one_heap_now, "%.0f"),
		COL(one_heap_idle, "%.0f"),
		/* the spread over repetitions */
		COL(efficiency_min, "%.4f"),
		COL(efficiency_max, "%.4f"),
		COL(writer_max_wait_min_ns, "%.0f"),
		COL(lookup_ns_max, "%.2f"),
		/* the reclaim threads */
		COL(gp_per_sec, "%.1f"),
		COL(inflight_peak_bytes, "%.0f"),
		/* lookup-cost and churn: the read index on huge pages */
		COL(index_huge_share, "%.4f"),
		COL(lookup_mode, NULL),
		/* the warnings (stress_warn_*()), last */
		COL(cpu_share, "%.3f"),
		{"warn", C_WARN, offsetof(struct stress_point, warn), NULL},
};
#define NCOLS (sizeof(cols) / sizeof(cols[0]))

/* A 0 in column @key of @p says "none happened", not "does not apply". */
static bool zero_is_a_count(const struct stress_point *p, const char *key)
{
	return !strcmp(key, "ops") ||
	       (!strcmp(key, "slow_sets") && !strcmp(p->scenario, "write-cost")) ||
	       (!strcmp(key, "refused") && !strcmp(p->scenario, "memcg-charge"));
}

/* Print column @c of @p; false when it does not apply to the point. */
static bool col_value(const struct stress_point *p, const struct col *c, char *buf, size_t n)
{
	const void *f = (const char *)p + c->off;

	switch (c->type) {
	case C_STR:
		if (!*(const char *)f)
			return false; /* e.g. an empty kind: not a write-cost point */
		snprintf(buf, n, "%s", (const char *)f);
		return true;
	case C_PSTR:
		if (!*(const char *const *)f)
			return false;
		snprintf(buf, n, "%s", *(const char *const *)f);
		return true;
	case C_INT:
		if (*(const int *)f < 0)
			return false;
		snprintf(buf, n, "%d", *(const int *)f);
		return true;
	case C_U64:
		if (!*(const uint64_t *)f && !zero_is_a_count(p, c->key))
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
	case C_PER_RANK:
		if (isnan(*(const double *)f) || p->ranks <= 0)
			return false;
		snprintf(buf, n, c->fmt, *(const double *)f / p->ranks);
		return true;
	case C_WARN:
		stress_warn_names(*(const unsigned *)f, buf, n);
		return *buf;
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
		if (cols[i].type == C_STR || cols[i].type == C_PSTR || cols[i].type == C_WARN)
			printf(",\"%s\":\"%s\"", cols[i].key, buf);
		else
			printf(",\"%s\":%s", cols[i].key, buf);
	}
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
		printf("\n");
		csv_header_done = true;
	}
	printf("%s", p->scenario);
	for (i = 0; i < NCOLS; i++)
		printf(",%s", col_value(p, &cols[i], buf, sizeof(buf)) ? buf : "");
	printf("\n");
	fflush(stdout);
}

void stress_emit(const struct stress_point *pt)
{
	struct stress_point *p;

	if (npoints == cap_points) {
		cap_points = cap_points ? cap_points * 2 : 64;
		points = realloc(points, cap_points * sizeof(*points));
		if (!points)
			stress_die("out of memory");
	}
	p = &points[npoints++];
	*p = *pt;
	if (stress_warn_cpu(p))
		p->warn |= STRESS_WARN_CPU;
	if (stress_opts.json)
		print_json(p);
	else if (stress_opts.csv)
		print_csv(p);
}


/* ---- options ------------------------------------------------------------------------ */

bool stress_list_has(const char *list, const char *name)
{
	char buf[512], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, name) || !strcmp(tok, "all"))
			return true;
	return false;
}

bool stress_variant_selected(const char *name)
{
	return stress_list_has(stress_opts.variants, name);
}
