// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress: the human output of a run, from the points recorded
 * (stress.c): the tables, the lock_stat rows, a short summary per question
 * with the spread of the repetitions, and the gnuplot curves (--plot).
 * The driver calls it once the scenarios have run.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <polstore/polstore.h>
#include <polstore/static/policy.h> /* bytes per policy */

#include "stress.h"

/* ---- human tables ----------------------------------------------------------------- */

static void fmt_num(char *buf, size_t n, const char *fmt, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, fmt, v);
}

/*
 * The first point of @scenario at or after index *@i (then *@i is its
 * index), or NULL: for (i = 0; (p = next_point(scenario, &i)); i++) walks
 * a scenario's points in the order they were recorded.
 */
static const struct stress_point *next_point(const char *scenario, size_t *i)
{
	const struct stress_point *p;

	for (; (p = stress_point_at(*i)); ++*i)
		if (!strcmp(p->scenario, scenario))
			return p;
	return NULL;
}

static void table_lookup_cost(void)
{
	const struct stress_point *p;
	uint64_t last = 0;
	size_t i;

	for (i = 0; (p = next_point("lookup-cost", &i)); i++) {
		char a[32], b[32], c[32], d[32], e[16];

		if (p->ranges != last) {
			printf("\nlookup-cost: one rank, no writer, no other work; %llu ranges "
			       "over "
			       "%llu pages (loop overhead %.1f ns subtracted)\n",
					(unsigned long long)p->ranges, (unsigned long long)p->pages,
					p->overhead_ns);
			/* Bytes per policy: the struct, and the stripes a hot policy in a store adds. */
			printf("  (a policy: %zu bytes, plus %d per CPU, at most %d, once hot in a "
			       "store: its striped reference count)\n",
					sizeof(struct ps_policy), PS_REF_STRIPE_BYTES,
					PS_REF_STRIPE_BYTES * PS_REF_MAX_STRIPES);
			printf("  %-21s %10s %8s %-13s %12s %12s %5s\n", "variant", "lookup",
					"x base", "(base)", "allocated", "ps_memory", "huge");
			printf("  %-21s %10s %8s %-13s %12s %12s %5s\n", "", "(ns)", "", "",
					"(B/range)", "(B/range)", "(%)");
			last = p->ranges;
		}
		fmt_num(a, sizeof(a), "%.2f", p->lookup_ns);
		fmt_num(b, sizeof(b), "%.3f", p->cost_ratio);
		fmt_num(c, sizeof(c), "%.1f", p->bytes_per_range);
		fmt_num(d, sizeof(d), "%.1f", p->store_bytes_per_range);
		if (isnan(p->index_huge_share))
			snprintf(e, sizeof(e), "-");
		else
			snprintf(e, sizeof(e), "%.0f", 100 * p->index_huge_share);
		printf("  %-21s %10s %8s %-13s %12s %12s %5s\n", p->variant, a, b,
				p->baseline ? p->baseline : "", c, d, e);
	}
}

static void table_store(const char *scenario)
{
	const struct stress_point *p, *prw;
	bool header = false;
	unsigned seen = 0;
	size_t i;

	for (i = 0; (p = next_point(scenario, &i)); i++) {
		char t[32], pr[32], e[32], ce[32], ls[32], p50[32], p99[32], p999[32], mx[32],
				w[32], ww[32], x[16], gp[32], wn[24];
		unsigned warn = p->warn;

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
			printf("  %-20s %5s %9s %9s %6s %6s %7s %8s %8s %8s %9s %8s %9s %6s %6s %s\n",
					"variant", "ranks", "lookups", "per rank", "eff", "cpueff",
					"lookup", "p50", "p99", "p99.9", "max", "writer", "writer",
					"x p_rw", "GPs", "warn");
			printf("  %-20s %5s %9s %9s %6s %6s %7s %8s %8s %8s %9s %8s %9s %6s %6s\n", "",
					"", "(M/s)", "(M/s)", "", "", "(%)", "(ns)", "(ns)", "(ns)",
					"(ns)", "(sets/s)", "wait (ns)", "", "(/s)");
			header = true;
		}
		fmt_num(t, sizeof(t), "%.2f", p->ops_per_sec / 1e6);
		fmt_num(pr, sizeof(pr), "%.2f", p->ops_per_sec / 1e6 / p->ranks);
		fmt_num(e, sizeof(e), "%.3f", p->efficiency);
		fmt_num(ls, sizeof(ls), "%.1f", p->lookup_share * 100);
		stress_fmt_ns(p50, sizeof(p50), p->p50_ns);
		stress_fmt_ns(p99, sizeof(p99), p->p99_ns);
		stress_fmt_ns(p999, sizeof(p999), p->p999_ns);
		stress_fmt_ns(mx, sizeof(mx), p->max_ns);
		fmt_num(w, sizeof(w), "%.0f", p->writer_ops_per_sec);
		stress_fmt_ns(ww, sizeof(ww), p->writer_max_wait_ns);
		prw = stress_find(scenario, "pthread_rwlock", p->ranks, p->ranges);
		fmt_num(x, sizeof(x), "%.2f", prw ? p->ops_per_sec / prw->ops_per_sec : NAN);
		/* x p_rw is a ratio of this table only: its reference is checked here. */
		if (prw && prw != p &&
				(stress_warn_cpu(prw) ||
						(double)prw->ops < stress_opts.warn_events))
			warn |= STRESS_WARN_REF;
		fmt_num(ce, sizeof(ce), "%.3f", p->cpu_efficiency);
		fmt_num(gp, sizeof(gp), "%.0f", p->gp_per_sec);
		printf("  %-20s %5d %9s %9s %6s %6s %7s %8s %8s %8s %9s %8s %9s %6s %6s %s\n",
				p->variant, p->ranks, t, pr, e, ce, ls, p50, p99, p999, mx, w, ww,
				x, gp, stress_warn_names(warn, wn, sizeof(wn)));
		seen |= warn;
	}
	if (header) {
		printf("  (eff: throughput / (ranks x the 1-rank unsync throughput, or "
		       "unsync:noref "
		       "for :noref);\n   lookup: time in the lookup / time of the sampled faults "
		       "that kept the "
		       "CPU (< 100 us);\n   cpueff: lookups per CPU-second the ranks got / the "
		       "baseline's (insensitive to\n   other processes' load, blind to time a rank "
		       "sleeps);\n   latencies sampled 1 lookup in %d, in ns, or with u in us, m "
		       "in ms;\n   x p_rw: throughput / pthread_rwlock's at the same ranks;\n   GPs: "
		       "the reclaim threads' grace periods per second during the point)\n",
				STRESS_SAMPLE_MASK + 1);
		stress_warn_footnote(seen);
	}
}

static void table_lockstat(void)
{
	bool header = false;
	size_t i;

	for (i = 0; i < stress_npoints(); i++) {
		const struct stress_point *p = stress_point_at(i);
		struct ps_lock_stat_row *r;
		char name[80];
		int d;

		if (!p->has_lockstat)
			continue;
		if (!header) {
			printf("\nlock_stat (as /proc/lock_stat; counts, and times in us), per "
			       "scenario, variant and ranks:\n");
			header = true;
		}
		snprintf(name, sizeof(name), "%s/%s/%d", p->scenario, p->variant, p->ranks);
		for (d = 0; d < 2; d++) {
			r = (struct ps_lock_stat_row *)&p->lockstat[d];
			if (d == PS_LOCK_STAT_READ && !r->acquisitions)
				continue;
			printf("%38s-%c: %10llu %10llu %11.2f %11.2f %13.2f %11.2f %10llu %11llu "
			       "%11.2f %11.2f %13.2f %11.2f\n",
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
		printf("%40s  %10s %10s %11s %11s %13s %11s %10s %11s %11s %11s %13s %11s\n",
				"(columns)", "con-bounce", "contention", "wait-min us", "wait-max us",
				"wait-total us", "wait-avg us", "acq-bounce", "acquisition",
				"hold-min us", "hold-max us", "hold-total us", "hold-avg us");
}


static void table_write_cost(void)
{
	const struct stress_point *p;
	uint64_t last = 0;
	const char *last_kind = "";
	size_t i;

	unsigned warned = 0;

	for (i = 0; (p = next_point("write-cost", &i)); i++) {
		char a[32], b[32], c[48], d[32], e[32], f[32], g[32], h[32], w[32];

		if (p->ranges != last) {
			printf("\nwrite-cost: one thread, no readers; %llu ranges over %llu pages; "
			       "ns per set (TSC, %.1f ns of\n  timestamps subtracted), median of "
			       "%d repetition(s) of %.2f s per kind and variant\n",
					(unsigned long long)p->ranges, (unsigned long long)p->pages,
					p->overhead_ns, p->reps, p->duration_s);
			printf("  %-8s %-9s %9s %8s %-17s %-9s %9s %8s %9s %9s %9s %9s %5s %s\n",
					"kind", "variant", "set", "x unsync", "(min..max)",
					"restore", "restore", "x unsync", "sync", "retired",
					"in flight", "sets", "slow", "warn");
			printf("  %-8s %-9s %9s %8s %-17s %-9s %9s %8s %9s %9s %9s %9s %5s\n",
					"", "", "(ns)", "", "(ns)", "", "(ns)", "", "(ns/set)",
					"(B)", "(B)", "", "");
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
		fmt_num(h, sizeof(h), "%.0f", p->inflight_peak_bytes);
		printf("  %-8s %-9s %9s %8s %-17s %-9s %9s %8s %9s %9s %9s %9llu %5llu %s\n",
				strcmp(p->kind, last_kind) ? p->kind : "", p->variant, a, b, c,
				p->restore_kind[0] ? p->restore_kind : "-", d, e, f, g, h,
				(unsigned long long)p->ops, (unsigned long long)p->slow_sets,
				stress_warn_names(p->warn, w, sizeof(w)));
		last_kind = p->kind;
		warned |= p->warn;
	}
	stress_warn_footnote(warned);
	if (last)
		printf("  (restore: the set(s) that put the tree back after each timed set, "
		       "timed apart;\n   sync: ps_store_synchronize() time per timed set, "
		       "outside the timed sets;\n   retired: most bytes one synchronize call "
		       "released; in flight: the most retired bytes that waited for a grace\n"
		       "   period (every store of the flavour); sets: the kind's timed sets, all "
		       "repetitions;\n   slow: of "
		       "those, how many took 100 us or more (preempted?), counted in ns/set)\n");
	for (i = 0, last = 0; (p = next_point("write-cost", &i)); i++) {
		char a[32], b[32], c[32], d[32], e[32];

		if (isnan(p->copied_mean))
			continue;
		if (p->ranges != last) {
			printf("\nwrite-cost: index nodes each set built and retired, %llu ranges\n",
					(unsigned long long)p->ranges);
			printf("  %-8s %-9s %12s %12s %13s %13s %14s\n", "kind", "variant",
					"copied/set", "copied max", "retired/set", "retired max",
					"at the root %");
			last = p->ranges;
		}
		fmt_num(a, sizeof(a), "%.2f", p->copied_mean);
		fmt_num(b, sizeof(b), "%.0f", p->copied_max);
		fmt_num(c, sizeof(c), "%.2f", p->nretired_mean);
		fmt_num(d, sizeof(d), "%.0f", p->nretired_max);
		fmt_num(e, sizeof(e), "%.1f", 100 * p->root_share);
		printf("  %-8s %-9s %12s %12s %13s %13s %14s\n", p->kind, p->variant, a, b, c, d, e);
	}
	if (last)
		printf("  (copied: read index nodes a set built in place of published ones; retired:\n"
		       "   index nodes it took out, freed after a grace period, and ranges it unlinked\n"
		       "   from the tree; at the root: sets published by a store of the root rather\n"
		       "   than of a lower child slot)\n");
}

/* ---- summary: one short answer per question, with the spread of the repetitions ---- */

/* "22.1 ns (21.8-23.0) 1.31x": median, the fastest and slowest repetition, x @base_ns. */
static void cell_ns(char *buf, size_t n, const struct stress_point *p, double base_ns)
{
	if (!p || isnan(p->lookup_ns_median)) {
		snprintf(buf, n, "-");
		return;
	}
	snprintf(buf, n, "%.1f ns (%.1f-%.1f) %.2fx", p->lookup_ns_median, p->lookup_ns,
			isnan(p->lookup_ns_max) ? p->lookup_ns : p->lookup_ns_max,
			p->lookup_ns_median / base_ns);
}

/* "0.912 (0.88-0.93)": the median repetition's efficiency, the slowest and fastest. */
static void cell_eff(char *buf, size_t n, const struct stress_point *p)
{
	if (!p || isnan(p->efficiency)) {
		snprintf(buf, n, "-");
		return;
	}
	if (isnan(p->efficiency_min))
		snprintf(buf, n, "%.3f%s", p->efficiency, p->warn ? " !" : "");
	else
		snprintf(buf, n, "%.3f (%.3f-%.3f)%s", p->efficiency, p->efficiency_min,
				p->efficiency_max, p->warn ? " !" : "");
}

/* Under a summary whose cells carry a '!': what it means. */
static void summary_warned(bool any)
{
	if (any)
		printf("  (!: the point carries a warning; the warn column of its table says "
		       "which)\n");
}

/*
 * The rows of a summary: the baselines, then every store variant the
 * library has; @form "" (counted), ":noref" or ":node" names the column.
 */
static const char *const summary_baselines[] = {"unsync", "pthread_mutex", "pthread_rwlock"};
#define NSUMMARY_BASELINES (sizeof(summary_baselines) / sizeof(summary_baselines[0]))
static const char *const summary_forms[] = {"", ":noref", ":node"};

static const char *summary_row(size_t i)
{
	if (i < NSUMMARY_BASELINES)
		return summary_baselines[i];
	return ps_sync_name((enum ps_sync)(i - NSUMMARY_BASELINES));
}

#define NSUMMARY_ROWS (NSUMMARY_BASELINES + STRESS_NSYNC)

static const struct stress_point *form_point(const char *scenario, size_t row, size_t form,
		int ranks, uint64_t ranges)
{
	char name[48];

	/* The baselines other than unsync have the counted form only. */
	if (form && row && row < NSUMMARY_BASELINES)
		return NULL;
	snprintf(name, sizeof(name), "%s%s", summary_row(row), summary_forms[form]);
	return stress_find(scenario, name, ranks, ranges);
}

static int summary_reps(const char *scenario)
{
	const struct stress_point *p;
	size_t i = 0;

	p = next_point(scenario, &i);
	return p ? p->reps : 0;
}

static void summary_lookup(void)
{
	const struct stress_point *walk, *p;
	uint64_t n;
	size_t i = 0, r, f;

	p = next_point("lookup-cost", &i);
	if (!p)
		return;
	n = p->ranges;
	walk = stress_find("lookup-cost", "unsync:noref", 1, n);
	if (!walk)
		return;
	printf("\nWhat does a lookup cost?  lookup-cost, 1 rank, %llu ranges, no writer: ns per "
	       "lookup,\n  median of %d repetition(s) (fastest-slowest), and x the bare walk "
	       "(unsync:noref, %.1f ns)\n",
			(unsigned long long)n, p->reps, walk->lookup_ns_median);
	printf("  %-15s %-30s %-30s %-30s\n", "variant", "counted (lookup + put)",
			"borrowed (:noref)", "node (:node)");
	for (r = 0; r < NSUMMARY_ROWS; r++) {
		char c[3][48];
		bool any = false;

		for (f = 0; f < 3; f++) {
			const struct stress_point *q = form_point("lookup-cost", r, f, 1, n);

			cell_ns(c[f], sizeof(c[f]), q, walk->lookup_ns_median);
			any = any || q;
		}
		if (any)
			printf("  %-15s %-30s %-30s %-30s\n", summary_row(r), c[0], c[1], c[2]);
	}
	/* The floor: the static layout answers the node form's question. */
	p = stress_find("lookup-cost", "static:node", 1, n);
	if (p) {
		char c[48];

		cell_ns(c, sizeof(c), p, walk->lookup_ns_median);
		printf("  %-15s %-30s %-30s %-30s\n", "static layout", "", "", c);
	}
	printf("  (%s lookups%s)\n", stress_opts.dependent ? "dependent" : "independent",
			stress_opts.dependent ? ": each page waits for the last answer" : "");
}

/* The first rank count above 1 that @scenario measured, or 0. */
static int summary_ranks(const char *scenario)
{
	const struct stress_point *p;
	size_t i;

	for (i = 0; (p = next_point(scenario, &i)); i++)
		if (p->ranks > 1)
			return p->ranks;
	return 0;
}

static void summary_scaling(const char *scenario)
{
	int ranks = summary_ranks(scenario);
	bool warned = false;
	size_t r, f;

	if (!ranks)
		return;
	printf("\nHow does it scale to %d ranks?  %s, %d ranks beside %d writer(s): efficiency "
	       "=\n  lookups/s / (%d x one rank's unsynchronised walk of the same form), median "
	       "of %d\n  repetition(s) (slowest-fastest); 1.000 is linear scaling\n",
			ranks, scenario, ranks, stress_opts.writers, ranks, summary_reps(scenario));
	printf("  %-15s %-24s %-24s %-24s\n", "variant", "counted", "borrowed (:noref)",
			"node (:node)");
	for (r = 0; r < NSUMMARY_ROWS; r++) {
		char c[3][40];
		bool any = false;

		for (f = 0; f < 3; f++) {
			const struct stress_point *q = form_point(scenario, r, f, ranks, 0);

			cell_eff(c[f], sizeof(c[f]), q);
			any = any || q;
			warned = warned || (q && q->warn);
		}
		if (any)
			printf("  %-15s %-24s %-24s %-24s\n", summary_row(r), c[0], c[1], c[2]);
	}
	summary_warned(warned);
}

static void summary_write(void)
{
	int ranks = summary_ranks("shared-text");
	const struct stress_point *p;
	uint64_t last = 0;
	bool warned = false;
	size_t r, i;

	if (ranks && stress_opts.writers) {
		char asked[64];

		if (stress_opts.write_interval_ns)
			snprintf(asked, sizeof(asked), "asking for %.0f sets/s in all",
					1e9 / (double)stress_opts.write_interval_ns *
							stress_opts.writers);
		else
			snprintf(asked, sizeof(asked), "setting flat out");
		printf("\nWhat does a write cost beside readers?  shared-text, %d ranks, %d "
		       "writer(s)\n  %s: sets/s done (median repetition) and the longest "
		       "single set,\n  in us (the repetition with the shortest - the longest)\n",
				ranks, stress_opts.writers, asked);
		printf("  %-15s %12s %26s\n", "variant", "sets/s", "longest set (us)");
		for (r = 1; r < NSUMMARY_ROWS; r++) {
			p = form_point("shared-text", r, 0, ranks, 0);
			if (!p || isnan(p->writer_ops_per_sec))
				continue;
			printf("  %-15s %12.0f %12.1f - %-11.1f%s\n", summary_row(r),
					p->writer_ops_per_sec,
					(isnan(p->writer_max_wait_min_ns)
									? p->writer_max_wait_ns
									: p->writer_max_wait_min_ns) /
							1e3,
					p->writer_max_wait_ns / 1e3, p->warn ? " !" : "");
			warned = warned || p->warn;
		}
		summary_warned(warned);
	}
	warned = false;
	for (i = 0; (p = next_point("write-cost", &i)); i++) {
		if (strcmp(p->kind, "replace"))
			continue;
		if (!last)
			printf("\nWhat does a write cost alone?  write-cost, one thread, no readers: "
			       "ns per set that\n  replaces one range, median of %d repetition(s) "
			       "(fastest-slowest), x the unsync set\n",
					p->reps);
		if (p->ranges != last)
			printf("  %llu ranges:\n", (unsigned long long)p->ranges);
		last = p->ranges;
		printf("    %-13s %9.1f ns (%.1f-%.1f) %6.2fx%s\n", p->variant, p->set_ns,
				p->set_ns_min, p->set_ns_max, p->cost_ratio, p->warn ? " !" : "");
		warned = warned || p->warn;
	}
	if (last)
		summary_warned(warned);
}

static void summary_memory(void)
{
	const struct stress_point *p;
	uint64_t last = 0;
	size_t i;

	for (i = 0; (p = next_point("lookup-cost", &i)); i++) {
		if (p->ranges == last)
			continue;
		last = p->ranges;
		printf("\nWhat does a range hold in memory?  %llu ranges: bytes per range the "
		       "library allocated\n  (measured once per run; the allocation does not vary "
		       "between repetitions)\n",
				(unsigned long long)last);
		for (size_t r = 0; r < NSUMMARY_ROWS; r++) {
			const struct stress_point *q = form_point("lookup-cost", r, 0, 1, last);

			if (q)
				printf("%s%s %.1f B", r ? ", " : "  ", summary_row(r),
						q->bytes_per_range);
		}
		putchar('\n');
	}
}

static void summary(void)
{
	summary_lookup();
	summary_scaling("shared-text");
	summary_scaling("hot-policy");
	summary_write();
	summary_memory();
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

/*
 * --plot FILE.svg (or .png): FILE.dat (one block per scenario and
 * variant: ranks, lookups/s, efficiency, longest writer wait in us, p99
 * lookup latency in ns; then, per scenario, one block of the points --warn
 * flagged, drawn as red circles over the lines), FILE.gp (the gnuplot
 * script) and, when gnuplot is installed, the image: per store scenario one
 * row of four panels.
 */
#define PLOT_MAX_BLOCKS 32

static void plot(const char *file)
{
	static const char *const scn[] = {"shared-text", "hot-policy"};
	static const struct {
		int col;
		const char *title, *ylabel, *format;
		bool logy;
	} panel[] = {
		{2, "lookups/s, all ranks", "lookups/s", "%.0s%c", true},
		{3, "efficiency (1 = linear scaling)", "lookups/s / (ranks x 1-rank walk)", "%.2f",
				false},
		{4, "longest writer wait", "longest ps_store_set() (us)", "%g", true},
		{5, "p99 lookup latency", "p99 of 1 lookup in 32 (ns)", "%g", true},
	};
	char base[4096], dat[4200], gp[4200], cmd[8600];
	const struct stress_point *p, *q;
	const char *ext = strrchr(file, '.'), *slash = strrchr(file, '/');
	bool png = ext && !strcasecmp(ext, ".png");
	FILE *d, *g;
	int s, first, k, b, rows = 0;
	const char *sep;
	size_t i, j;
	char titles[2][2048] = {"", ""};
	int nblocks[2] = {0, 0};
	bool flagged[2] = {false, false};
	/* Per block, the panels it has a point for: a block with none is left out of the panel. */
	unsigned drawn[2][PLOT_MAX_BLOCKS] = {{0}}, fdrawn[2] = {0, 0};

	/* FILE.svg -> FILE.dat and FILE.gp, as --help says. */
	snprintf(base, sizeof(base), "%.*s",
			ext && (!slash || ext > slash) ? (int)(ext - file) : (int)strlen(file), file);
	snprintf(dat, sizeof(dat), "%s.dat", base);
	snprintf(gp, sizeof(gp), "%s.gp", base);
	d = fopen(dat, "w");
	if (!d) {
		fprintf(stderr, "polstore-stress: --plot: cannot write %s: %s\n", dat,
				strerror(errno));
		return;
	}
	/* One block per (scenario, variant), two blank lines apart: gnuplot's "index". */
	for (s = 0; s < 2; s++) {
		for (i = 0; (p = next_point(scn[s], &i)); i++) {
			bool seen = false;

			for (j = 0; (q = next_point(scn[s], &j)) && j < i; j++)
				if (!strcmp(q->variant, p->variant))
					seen = true;
			if (seen)
				continue;
			fprintf(d, "# %s %s\n# ranks lookups_per_s efficiency writer_wait_us "
				   "p99_ns\n",
					scn[s], p->variant);
			for (j = i; (q = next_point(scn[s], &j)); j++) {
				double v[4] = {q->ops_per_sec, q->efficiency,
					       q->writer_max_wait_ns / 1e3, q->p99_ns};

				if (strcmp(q->variant, p->variant))
					continue;
				/* gnuplot skips "NaN" points: no writer, no wait. */
				fprintf(d, "%d %.0f %.4f %.3f %.0f\n", q->ranks, v[0], v[1], v[2],
						v[3]);
				for (k = 0; k < 4 && nblocks[s] < PLOT_MAX_BLOCKS; k++)
					if (!isnan(v[k]))
						drawn[s][nblocks[s]] |= 1u << k;
			}
			fprintf(d, "\n\n");
			strncat(titles[s], p->variant, sizeof(titles[s]) - strlen(titles[s]) - 2);
			strcat(titles[s], " ");
			nblocks[s]++;
		}
		/* The points --warn flagged, all variants, in a block of their own drawn on top. */
		for (i = 0; (p = next_point(scn[s], &i)); i++) {
			if (!p->warn)
				continue;
			if (!flagged[s])
				fprintf(d, "# %s flagged (--warn)\n", scn[s]);
			fprintf(d, "%d %.0f %.4f %.3f %.0f\n", p->ranks, p->ops_per_sec,
					p->efficiency, p->writer_max_wait_ns / 1e3, p->p99_ns);
			flagged[s] = true;
			fdrawn[s] |= (unsigned)!isnan(p->ops_per_sec) |
				     (unsigned)!isnan(p->efficiency) << 1 |
				     (unsigned)!isnan(p->writer_max_wait_ns) << 2 |
				     (unsigned)!isnan(p->p99_ns) << 3;
		}
		if (flagged[s])
			fprintf(d, "\n\n");
		rows += nblocks[s] > 0;
	}
	fclose(d);
	if (!rows) {
		fprintf(stderr, "polstore-stress: --plot: no shared-text or hot-policy points to "
				"draw\n");
		return;
	}
	g = fopen(gp, "w");
	if (!g) {
		fprintf(stderr, "polstore-stress: --plot: cannot write %s\n", gp);
		return;
	}
	fprintf(g, "set terminal %s size 1600,%d%s\nset output '%s'\n", png ? "pngcairo" : "svg",
			520 * rows, png ? "" : " dynamic font 'sans,11'", file);
	fprintf(g, "set termoption noenhanced\nset datafile missing 'nan'\n");
	fprintf(g, "set multiplot layout %d,4\nset logscale x 2\nset grid\n"
		   "set key outside bottom center horizontal font ',9'\n"
		   "set xlabel 'ranks (reader threads) on %ld CPUs'\nset xtics 2 format '%%g'\n",
			rows, sysconf(_SC_NPROCESSORS_ONLN));
	first = 0;
	for (s = 0; s < 2; s++) {
		if (!nblocks[s])
			continue;
		fprintf(g, "titles = \"%s\"\n", titles[s]);
		for (k = 0; k < 4; k++) {
			fprintf(g, "set title '%s: %s'\nset ylabel '%s'\nset format y '%s'\n",
					scn[s], panel[k].title, panel[k].ylabel, panel[k].format);
			fprintf(g, panel[k].logy ? "set logscale y\n"
						 : "unset logscale y\nset yrange [0:*]\n");
			/* A fixed line type per variant keeps its colour in every panel. */
			sep = "plot";
			for (b = 0; b < nblocks[s]; b++) {
				if (b < PLOT_MAX_BLOCKS && !(drawn[s][b] & 1u << k))
					continue;
				fprintf(g, "%s '%s' index %d using 1:%d with linespoints lt %d "
					   "title word(titles, %d)",
						sep, dat, first + b, panel[k].col, b + 1, b + 1);
				sep = ",";
			}
			if (fdrawn[s] & 1u << k)
				fprintf(g, "%s '%s' index %d using 1:%d with points pt 6 ps 2.5 "
					   "lc rgb 'red' title 'flagged (--warn): not meaningful'",
						sep, dat, first + nblocks[s], panel[k].col);
			else if (!strcmp(sep, "plot")) /* no variant has a point here (no writer) */
				fprintf(g, "set label 1 'no points' at graph 0.5,0.5 center\n"
					   "set yrange [1:10]\nplot 1/0 notitle\nunset label 1");
			fprintf(g, "\nset autoscale y\n");
		}
		first += nblocks[s] + flagged[s];
	}
	fprintf(g, "unset multiplot\n");
	fclose(g);
	if (!in_path("gnuplot")) {
		fprintf(stderr,
				"polstore-stress: --plot: gnuplot is not installed (e.g. apt-get "
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

/* many-stores: bytes per store and lookups, each variant against spin's. */
static void table_many_stores(void)
{
	const struct stress_point *p, *spin = stress_find("many-stores", "spin",
			stress_opts.ranks[stress_opts.nranks - 1], 0);
	static const char *const when[3] = { "fresh", "+100 sets", "+100 ms" };
	bool header = false;
	size_t i;
	int w;

	for (i = 0; (p = next_point("many-stores", &i)); i++) {
		char a[32], b[32], c[32], d[32];

		if (!header) {
			printf("\nmany-stores: %llu stores of %s ranges; bytes per store (x spin's)\n",
					(unsigned long long)p->stores,
					p->ranges ? "exactly --ranges" : "1 to 16");
			printf("  %-9s %-10s %18s %18s %18s\n", "variant", "when",
					"ps_store_memory B", "library heap B", "resident set B");
			header = true;
		}
		for (w = 0; w < 3; w++) {
			double x = spin ? p->store_heap[w] / spin->store_heap[w] : NAN;

			fmt_num(a, sizeof(a), "%.0f", p->store_mem[w]);
			fmt_num(b, sizeof(b), "%.0f", p->store_heap[w]);
			fmt_num(c, sizeof(c), "%.0f", p->store_rss[w]);
			fmt_num(d, sizeof(d), "%.2f", x);
			printf("  %-9s %-10s %18s %10s (%5s) %18s\n", w ? "" : p->variant, when[w], a,
					b, d, c);
		}
	}
	if (!header)
		return;
	printf("\nmany-stores: %d reader(s) over all stores (ps_store_lookup_node()), %d writer(s)\n",
			stress_opts.ranks[stress_opts.nranks - 1], stress_opts.writers);
	printf("  %-9s %14s %12s   one 64-range store after 100000 sets: %s\n", "variant",
			"lookups/s", "sets/s", "memory B, heap B at once, 100 ms later (x spin's)");
	for (i = 0; (p = next_point("many-stores", &i)); i++) {
		char a[32], b[32], c[32], d[32], e[32], f[32];

		fmt_num(a, sizeof(a), "%.0f", p->ops_per_sec);
		fmt_num(b, sizeof(b), "%.0f", p->writer_ops_per_sec);
		fmt_num(c, sizeof(c), "%.0f", p->one_mem);
		fmt_num(d, sizeof(d), "%.0f", p->one_heap_now);
		fmt_num(e, sizeof(e), "%.0f", p->one_heap_idle);
		fmt_num(f, sizeof(f), "%.2f", spin ? p->one_heap_idle / spin->one_heap_idle : NAN);
		printf("  %-9s %14s %12s   %9s %9s %9s (%s)\n", p->variant, a, b, c, d, e, f);
	}
}

void stress_print_tables(void)
{
	table_lookup_cost();
	table_store("shared-text");
	table_store("hot-policy");
	stress_print_companions();
	table_write_cost();
	table_many_stores();
	stress_print_window();
	stress_print_batch_cost();
	stress_print_churn();
	stress_print_uffd_fault();
	table_lockstat();
	summary();
	fflush(stdout);
}

void stress_plot(const char *file)
{
	plot(file);
}
