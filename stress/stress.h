/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore-stress: what the scenario files (scn_*.c), the output
 * (tables.c), the options (options.c) and the driver (polstore-stress.c)
 * share: the options, one measured point and the points recorded, timing,
 * the sampled latency histogram, the start gate and errors, all in
 * stress.c, which calls no other file of the program; the reclaim threads'
 * figures (gp.c); then the scenarios' entry points, which only the driver
 * and tables.c call.
 *
 * The store scenarios (scn_store.h) include src/range/rangetree.h: their
 * unsynchronised, pthread_rwlock and pthread_mutex baselines wrap the range
 * tree core directly.  gp.c includes src/locks/rcu_reclaim.h, whose
 * counters no public call shows.  Those are the stress program's declared
 * uses of library-internal headers (docs/design.md).
 */
#ifndef POLSTORE_STRESS_H
#define POLSTORE_STRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <polstore/lockstat.h>

#include "clock.h"
#include "xorshift.h"

/* The store variants, numbered as the library numbers them (ps_sync_name(), ps_sync_caps()). */
#define STRESS_NSYNC PS_SYNC_COUNT

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define STRESS_HAVE_TSC 1
#endif

#define STRESS_MAX_LIST 32
#define STRESS_MAX_PEERS 8 /* --peer plugins */

struct stress_opts {
	char scenarios[256];
	char variants[512]; /* comma list or "all" */
	int ranks[STRESS_MAX_LIST];
	int nranks;
	double duration_s;
	int repeat;
	uint64_t pages;
	uint64_t ranges[STRESS_MAX_LIST];
	int nranges;
	int writers;
	uint64_t write_interval_ns;
	long fault_work_ns; /* -1: calibrate to one unsynchronised lookup */
	uint64_t seed;
	bool sequential;
	bool counts; /* --counts: stores count accesses, :node lookups counted */
	bool dependent; /* lookup-cost: each lookup's page waits for the last answer */
	bool json, csv, quiet;
	const char *plot;
	/* --check: the linearizability oracle instead of the scenarios */
	bool check;
	long check_lookups; /* per configuration */
	long check_writes; /* at least, per configuration */
	bool ranks_given, writers_given, pages_given, ranges_given; /* on the command line */
	int batch; /* writers apply this many sets per ps_store_set_many() [1]; batch-cost's B */
	bool batch_given;
	size_t stores; /* many-stores: how many stores [10000] */
	/* churn: the plugins to load (--peer) and the map the ratios divide by (--reference) */
	const char *peers[STRESS_MAX_PEERS];
	int npeers;
	const char *reference;
	/* memcg-charge: the parent's limit as multiples of the ranks' peak usage [100] */
	double limits[STRESS_MAX_LIST];
	int nlimits;
	int resolvers; /* uffd-fault's resolver threads; 0: one per node, -1: as many as ranks */
	/*
	 * --warn: the limits below which a point is flagged (STRESS_WARN_* by
	 * default); warn_inflight NaN: stress_gp_bound(), churn resolves it.
	 */
	double warn_cpu, warn_events, warn_slack, warn_inflight;
};

/*
 * One measured point.  Fields that do not apply are negative (or NaN for
 * doubles) and are left out of the JSON object / empty in CSV.
 */
struct stress_point {
	const char *scenario;
	char variant[40];
	const char *baseline; /* the single-rank point efficiency divides by */
	int ranks;
	int writers;
	uint64_t pages, ranges, ranges_end;
	double duration_s;
	double fault_work_ns;
	uint64_t ops;
	double ops_per_sec;
	int reps; /* repetitions; the point is the one with the median throughput */
	double ops_per_sec_min, ops_per_sec_max;
	double efficiency;
	double efficiency_min, efficiency_max; /* the slowest and fastest repetition's */
	double rank_cpu_s;	 /* CPU time the ranks got, summed */
	double cpu_efficiency;	 /* ops per rank CPU second / the baseline's */
	double lookup_share;	 /* sampled iterations that kept the CPU */
	double lookup_share_all; /* every sampled iteration */
	double mean_ns;
	double p50_ns, p99_ns, p999_ns, max_ns;
	uint64_t samples;
	double writer_ops_per_sec;
	double writer_max_wait_ns;     /* the longest of every repetition */
	double writer_max_wait_min_ns; /* the repetition whose longest wait was shortest */
	/* lookup-cost; lookup_ns is the fastest repetition, lookup_ns_max the slowest */
	double lookup_ns, lookup_ns_median, lookup_ns_max, overhead_ns, cost_ratio, bytes_per_range,
			store_bytes_per_range;
	/* lookup-cost and churn: the share of the index's chunks on huge pages (NaN: no chunk) */
	double index_huge_share;
	/* lookup-cost: "independent" (throughput) or "dependent" (latency) lookups */
	char lookup_mode[16];
	/* companions */
	double max_overshoot, overshoot_bound, max_error, error_bound;
	/*
	 * write-cost: the kind of set (and of the set that restores it), ns per
	 * set (median over repetitions, with its spread), the restoring set's
	 * ns and ratio, ps_store_synchronize() time per timed set, and the most
	 * bytes one synchronize call released; slow_sets took 100 us or more,
	 * set_ns_oncpu leaves them out.  cost_ratio and overhead_ns are
	 * shared with lookup-cost.
	 */
	char kind[16], restore_kind[16];
	uint64_t restores, slow_sets;
	double set_ns, set_ns_min, set_ns_max, set_ns_oncpu, restore_ns, restore_ratio,
			sync_ns_per_set, retired_bytes_max;
	/*
	 * write-cost, variants that keep ps_store_stats(): tree nodes the
	 * kind's sets copied and retired (mean and most per set), and the
	 * share of them published at the root.
	 */
	double copied_mean, copied_max, nretired_mean, nretired_max, root_share;
	/*
	 * many-stores: @stores stores; bytes per store (ps_store_memory(), the
	 * library's heap, the resident set) fresh, after 100 sets each and
	 * 100 ms later; one 64-range store after 100,000 sets: its
	 * ps_store_memory() and heap bytes at once and 100 ms later.
	 */
	uint64_t stores;
	double store_mem[3], store_heap[3], store_rss[3];
	double one_mem, one_heap_now, one_heap_idle;
	/*
	 * window: the kind is the window ("1", "16", "256" ranges)
	 * or the point lookup it is compared with ("lookup", "lookup:noref");
	 * ns_per_op is CPU ns per window or lookup, ranges_per_op the ranges
	 * a window returned on average, ns_per_range their quotient,
	 * ratio_lookup ns_per_op over the same variant's counted lookup's,
	 * ratio_borrow over its borrowed lookup's.
	 * batch-cost: the kind is the pattern ("adjacent", "random"),
	 * single_ns and many_ns ns per set as @batch single sets and as one
	 * ps_store_set_many() of the same sets, batch_ratio many / single.
	 */
	double ns_per_op, ranges_per_op, ns_per_range, ratio_lookup, ratio_borrow;
	int batch;
	double single_ns, many_ns, batch_ratio;
	/*
	 * churn: the map the ratios divide by, the readers' and the writer's
	 * median over its own, the writer's spread, and the lookups compared
	 * exactly with the model for this map and N.
	 */
	const char *reference;
	double reader_ratio, writer_ratio, writer_ops_per_sec_min, writer_ops_per_sec_max;
	uint64_t lookups_checked;
	/*
	 * memcg-charge: the limit as a multiple of the ranks' peak usage and
	 * in pages; charge calls and those refused, and their quotient;
	 * calls per rank CPU-second over stock:private's at the same ranks
	 * and limit (the hierarchy with nothing shared).
	 */
	double limit_ratio, limit_pages, refused_share, cpu_vs_private;
	uint64_t charges, refused;
	/*
	 * uffd-fault: resolver threads, resolver ns per fault, the lookup's
	 * share of that (lookup_share is its share of the fault latency), and
	 * faults/s over the fixed-node plane's at the same ranks.
	 */
	int resolvers;
	double resolve_ns, resolve_share, fixed_ratio;
	/*
	 * shared-text, hot-policy, churn, write-cost: grace periods per
	 * second of the library's reclaim threads while the point ran, and
	 * the most bytes that waited for one (gp.c).
	 */
	double gp_per_sec, inflight_peak_bytes;
	char note[64];
	/*
	 * The CPU time the point's threads got over what they could have used
	 * (stress_cpu_share()), and the warnings the point carries (STRESS_WARN_*).
	 */
	double cpu_share;
	unsigned warn;
	bool has_lockstat;
	struct ps_lock_stat_row lockstat[2];
};

void stress_point_init(
		struct stress_point *p, const char *scenario, const char *variant, int ranks);

/*
 * ---- warnings: figures that say more about the machine than about the code ----
 *
 * The default limits, in this one place (--warn changes them; the WARNINGS
 * section of polstore-stress(1) and BENCHMARKS.md quote them):
 *   cpu    the point's threads got less than STRESS_WARN_CPU_SHARE of the CPU
 *          time they could have used: wall time x the smaller of their number
 *          and the CPUs online.  Other processes ran in between, so the
 *          throughput, and every ratio of it, measures the machine's load.
 *   ref    a ratio of the point divides by a reference that counted fewer
 *          than STRESS_WARN_MIN_EVENTS events (a near-zero rate: the ratio is
 *          unbounded) or that is itself flagged cpu.
 *   noise  a ratio between two runs that differ only in a part taking a share
 *          s of the work (uffd-fault: the lookup's share of a fault) lies above
 *          1 + STRESS_WARN_SLACK or below 1 - s - STRESS_WARN_SLACK: more than
 *          that part can explain; write-cost: a store's set, which does the
 *          bare set's work and more, below 1 - STRESS_WARN_SLACK of it.
 *          write-cost flags cpu when over 1 % of a kind's sets were slow
 *          (preempted).
 *   bound  churn: the reclaim threads held more than the in-flight bound (the
 *          RCU stores' PSI_RCU_PENDING_MAX, 32 MiB; stress_gp_bound()) waiting
 *          for a grace period in a repetition with a writer, past which an RCU
 *          set waits for a grace period itself: the writer was throttled.
 */
#define STRESS_WARN_CPU_SHARE 0.5
#define STRESS_WARN_MIN_EVENTS 100
#define STRESS_WARN_SLACK 0.10
enum {
	STRESS_WARN_CPU = 1u << 0,
	STRESS_WARN_REF = 1u << 1,
	STRESS_WARN_NOISE = 1u << 2,
	STRESS_WARN_BOUND = 1u << 3,
};

/* @cpu_s of CPU time over (@wall_s x min(@threads, CPUs online)); NaN if unknown. */
double stress_cpu_share(double cpu_s, double wall_s, int threads);
/* The cpu warning of @p: its cpu_share is known and below the limit. */
bool stress_warn_cpu(const struct stress_point *p);
/* A ratio of @p divides by @ref, whose figure counted @ref_events: flag ref if needed. */
void stress_warn_ref(struct stress_point *p, const struct stress_point *ref, double ref_events);
/* @ratio compares two runs that differ in a part of share @share: flag noise if needed. */
void stress_warn_explained(struct stress_point *p, double ratio, double share);
/* @warn's names joined by '+' ("cpu+ref") into @buf, "" for none; returns @buf. */
const char *stress_warn_names(unsigned warn, char *buf, size_t n);
/* Under a table: one explanation per warning in @seen, each with its limit. */
void stress_warn_footnote(unsigned seen);
/* A latency for the human tables: ns below 10^4, else "123u" (us) or "45m" (ms). */
void stress_fmt_ns(char *buf, size_t n, double ns);
/* Record a finished point: kept for the tables, printed at once as JSON/CSV. */
void stress_emit(const struct stress_point *p);
/* The points recorded so far (for baselines and summaries). */
const struct stress_point *stress_find(
		const char *scenario, const char *variant, int ranks, uint64_t ranges);
/* The @i-th point recorded, or NULL past the end. */
const struct stress_point *stress_point_at(size_t i);
size_t stress_npoints(void);
void stress_points_free(void);
/* Start the clock of stress_progress()'s timestamps. */
void stress_init_clock(void);
void stress_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void stress_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A broken invariant: message on stderr, then abort() for a core dump. */
void stress_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * The reclaim threads' grace periods and memory in flight over an interval
 * (gp.c): mark at its start (a new peak starts), read at its end: grace
 * periods per second since the mark, the most bytes queued since.
 */
struct stress_gp_mark {
	uint64_t grace_periods;
	uint64_t t_ns;
};
void stress_gp_mark(struct stress_gp_mark *m);
void stress_gp_read(const struct stress_gp_mark *m, double *gp_per_sec, double *peak_bytes);
/* The bytes in flight past which an RCU set waits for a grace period (32 MiB). */
size_t stress_gp_bound(void);

extern struct stress_opts stress_opts;
extern double stress_ns_per_tick;
extern double stress_work_iters_per_ns;

/* ---- time ---------------------------------------------------------------- */

static inline uint64_t stress_now_ns(void)
{
	return ps_clock_ns(CLOCK_MONOTONIC);
}

/* A cheap timestamp for sampled lookups: the TSC where there is one. */
static inline uint64_t stress_ticks(void)
{
#ifdef STRESS_HAVE_TSC
	return __rdtsc();
#else
	return stress_now_ns();
#endif
}

static inline uint64_t stress_thread_cpu_ns(void)
{
	return ps_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

void stress_calibrate(void);
void stress_sleep_ns(uint64_t ns);
void stress_sleep_until(uint64_t t); /* CLOCK_MONOTONIC ns */

/* The calibrated "other work" of a fault: a dependent busy loop. */
static inline void stress_work(unsigned iters)
{
	unsigned i;

	for (i = 0; i < iters; i++)
		__asm__ __volatile__("" ::: "memory");
}

unsigned stress_work_iters(double ns);

/* ---- random numbers -------------------------------------------------------- */

static inline uint64_t stress_rand(uint64_t *s)
{
	return ps_xorshift64s(s);
}

/* Uniform in [0, n) without a division. */
static inline uint64_t stress_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)stress_rand(s) * n) >> 64);
}

static inline uint64_t stress_seed_for(uint64_t seed, uint64_t stream)
{
	uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (stream + 1);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return z ? z : 1;
}

/* ---- sampled latency histogram (ticks), log-linear, 16 steps per octave ---- */

#define STRESS_HSUB 16
#define STRESS_HBUCKETS (61 * STRESS_HSUB)
#define STRESS_SAMPLE_MASK 31 /* time one lookup in 32 */

struct stress_hist {
	uint64_t count[STRESS_HBUCKETS];
	uint64_t n, sum, max;
};

static inline unsigned stress_hbucket(uint64_t v)
{
	unsigned e;

	if (v < STRESS_HSUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return (e - 3) * STRESS_HSUB + (unsigned)((v >> (e - 4)) & (STRESS_HSUB - 1));
}

static inline void stress_hist_add(struct stress_hist *h, uint64_t v)
{
	h->count[stress_hbucket(v)]++;
	h->n++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

void stress_hist_merge(struct stress_hist *into, const struct stress_hist *h);
/* The @q quantile in ns (ticks converted), the bucket's midpoint. */
double stress_hist_quantile_ns(const struct stress_hist *h, double q);
/* Fill the latency fields of @p from @h. */
void stress_hist_to_point(const struct stress_hist *h, struct stress_point *p);

/* ---- start gate: every thread ready, then go together ----------------------- */

struct stress_gate {
	int ready, go;
};

void stress_gate_init(struct stress_gate *g);
void stress_gate_destroy(struct stress_gate *g);
void stress_gate_wait(struct stress_gate *g); /* a worker */
/* The driver: wait until @nthreads wait, release them; returns the release time. */
uint64_t stress_gate_open(struct stress_gate *g, int nthreads);

/* Thread with a small stack (1024 ranks fit easily). */
void stress_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/*
 * Route the library's allocations through a counting allocator (before any
 * polstore object exists); stress_live_bytes(): the live bytes the library
 * holds (malloc_usable_size of every block it owns).
 */
void stress_count_allocations(void);
size_t stress_live_bytes(void);

/*
 * The process's mappings advised for transparent huge pages (VmFlags hg in
 * /proc/self/smaps: in this program, the chunks of the stores' read
 * indexes): their bytes, and the bytes of them on huge pages; zeros when
 * smaps cannot be read.  stress_huge_share(): the share on huge pages of
 * what was advised since *0 were read, NaN when nothing was.
 */
void stress_huge_bytes(size_t *advised, size_t *huge);
double stress_huge_share(size_t advised0, size_t huge0);

/* ---- options ---------------------------------------------------------------- */

/* @name is in the comma list @list, or the list says "all". */
bool stress_list_has(const char *list, const char *name);
/* @name is in --variants. */
bool stress_variant_selected(const char *name);

/* ---- scenarios (the driver's and tables.c's to call) ------------------------- */

bool stress_variant_known(const char *name); /* a store-scenario variant */
void stress_run_lookup_cost(void);
void stress_run_store(const char *scenario); /* shared-text, hot-policy */
void stress_run_write_cost(void);
void stress_run_window(void); /* window reads beside writers */
void stress_run_batch_cost(void);
void stress_run_many_stores(void);
void stress_print_window(void); /* their tables */
void stress_print_batch_cost(void);
void stress_run_uffd_fault(void); /* scn_uffd.c: real faults through the fault plane */
void stress_print_uffd_fault(void);
bool stress_companion_variant_known(const char *name);
void stress_print_companions(void);
void stress_run_memcg_charge(void);
void stress_run_mmap_commit(void);
void stress_run_css_walk(void);
bool stress_check_variant_known(const char *name); /* spin ... rcu-qsbr, also :noref */
void stress_run_churn(void); /* store variants and --peer plugins, scn_churn.c */
void stress_print_churn(void);
int stress_run_check(void); /* --check */
/* About how many seconds a scenario takes with the options given, for the driver. */
double stress_estimate_lookup_cost(void);
double stress_estimate_store(void); /* shared-text, hot-policy */
double stress_estimate_write_cost(void);
double stress_estimate_window(void);
double stress_estimate_batch_cost(void);
double stress_estimate_memcg_charge(void);
double stress_estimate_mmap_commit(void);
double stress_estimate_css_walk(void);

/* ---- options (options.c), the driver's to call ------------------------------ */

/* The usage text (--help). */
void stress_usage(FILE *out);
/*
 * Parse the command line into stress_opts, the scenario names given being
 * @scenarios; a bad option exits with status 1.  Returns false for --help.
 */
bool stress_parse(int argc, char **argv, const char *const *scenarios, size_t nscenarios);

/* ---- human output (tables.c), the driver's to call -------------------------- */

/* Every table, lock_stat row and the summary per question of the points recorded. */
void stress_print_tables(void);
/* --plot: the gnuplot data, script and image of the store scenarios. */
void stress_plot(const char *file);

#endif /* POLSTORE_STRESS_H */
