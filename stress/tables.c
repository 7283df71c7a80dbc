// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress: the human output of a run, from the points recorded
 * (stress.c): the tables, the lock_stat rows, the target summaries with
 * their ratios, and the gnuplot curves (--plot).  The driver calls it once
 * the scenarios have run.
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
		char a[32], b[32], c[32], d[32];

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
			printf("  %-21s %10s %8s %-13s %12s %12s\n", "variant", "ns/lookup",
					"x base", "(base)", "bytes/range", "(ps_memory)");
			last = p->ranges;
		}
		fmt_num(a, sizeof(a), "%.2f", p->lookup_ns);
		fmt_num(b, sizeof(b), "%.3f", p->cost_ratio);
		fmt_num(c, sizeof(c), "%.1f", p->bytes_per_range);
		fmt_num(d, sizeof(d), "%.1f", p->store_bytes_per_range);
		printf("  %-21s %10s %8s %-13s %12s %12s\n", p->variant, a, b,
				p->baseline ? p->baseline : "", c, d);
	}
}

static void table_store(const char *scenario)
{
	const struct stress_point *p, *prw;
	bool header = false;
	size_t i;

	for (i = 0; (p = next_point(scenario, &i)); i++) {
		char t[32], pr[32], e[32], ce[32], ls[32], p50[16], p99[16], p999[16], mx[16],
				w[32], ww[16], x[16];

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
			printf("  %-20s %5s %9s %9s %6s %6s %7s %6s %6s %6s %6s %8s %7s %7s\n",
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
		printf("  %-20s %5d %9s %9s %6s %6s %7s %6s %6s %6s %6s %8s %7s %7s\n", p->variant,
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

	for (i = 0; i < stress_npoints(); i++) {
		const struct stress_point *p = stress_point_at(i);
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


static void table_write_cost(void)
{
	const struct stress_point *p;
	uint64_t last = 0;
	const char *last_kind = "";
	size_t i;

	for (i = 0; (p = next_point("write-cost", &i)); i++) {
		char a[32], b[32], c[48], d[32], e[32], f[32], g[32];

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
	for (i = 0, last = 0; (p = next_point("write-cost", &i)); i++) {
		char a[32], b[32], c[32], d[32], e[32];

		if (isnan(p->copied_mean))
			continue;
		if (p->ranges != last) {
			printf("\nwrite-cost: tree nodes each set copied and retired, %llu ranges\n",
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
		printf("  (copied: published nodes a set copied before changing them; retired: nodes\n"
		       "   it took out of the tree, freed after a grace period; at the root: sets\n"
		       "   published by a store of the root rather than of a lower child slot)\n");
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

	for (i = 0; i < stress_npoints(); i++)
		if (strcmp(stress_point_at(i)->scenario, "lookup-cost") && strcmp(stress_point_at(i)->scenario, "window") &&
				strcmp(stress_point_at(i)->scenario, "churn") &&
				strcmp(stress_point_at(i)->scenario, "memcg-charge") &&
				stress_point_at(i)->ranks == 2)
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
 * RCU stores whose writers never wait for readers.  A run with
 * --write-interval 0 measures the flat-out writer beside 1 rank (sets/s
 * against seqlock's in the same run); a run with a paced writer (the
 * default, 1 kHz) measures what the readers and the writer get: the share
 * of the requested sets achieved, the longest set, the readers'
 * efficiency.  Bytes per range come from lookup-cost at the largest N.
 */
static void rcu_writers_header(bool *header)
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
			rcu_writers_header(&header);
			snprintf(what, sizeof(what), "flat-out writer beside 1 rank: %s / seqlock sets/s",
					rv[v]);
			target(what, r1->writer_ops_per_sec / s1->writer_ops_per_sec, ">=", 0.5,
					"%.3f");
		}
		if (stress_opts.write_interval_ns == 0 || !r2)
			continue;
		rcu_writers_header(&header);
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
	for (i = 0; i < stress_npoints(); i++)
		if (!strcmp(stress_point_at(i)->scenario, "lookup-cost") && stress_point_at(i)->ranges > nmax)
			nmax = stress_point_at(i)->ranges;
	for (v = 0; v < 2 && nmax >= 1000000; v++) {
		const struct stress_point *r = stress_find("lookup-cost", rv[v], 1, nmax);
		const struct stress_point *sp = stress_find("lookup-cost", "spin", 1, nmax);

		if (!r || !sp)
			continue;
		rcu_writers_header(&header);
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
	const struct stress_point *pn, *p;
	uint64_t done[STRESS_MAX_LIST * 4];
	size_t ndone = 0, i, j, d;
	bool header = false;
	int v;

	for (i = 0; (pn = next_point("write-cost", &i)); i++) {
		uint64_t n = pn->ranges;

		for (d = 0; d < ndone && done[d] != n; d++)
			;
		if (d < ndone || ndone == sizeof(done) / sizeof(done[0]))
			continue;
		done[ndone++] = n;
		for (v = 0; v < 2; v++) {
			double worst = NAN;
			const char *wk = "";
			char what[96];

			for (j = 0; (p = next_point("write-cost", &j)); j++) {
				if (p->ranges != n || strcmp(p->variant, wv[v]))
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
	const struct stress_point *p, *q;
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
		for (i = 0; (p = next_point(scn[s], &i)); i++) {
			bool seen = false;

			for (j = 0; (q = next_point(scn[s], &j)) && j < i; j++)
				if (!strcmp(q->variant, p->variant))
					seen = true;
			if (seen)
				continue;
			fprintf(d, "# %s %s\n# ranks ops_per_sec efficiency\n", scn[s], p->variant);
			for (j = i; (q = next_point(scn[s], &j)); j++)
				if (!strcmp(q->variant, p->variant))
					fprintf(d, "%d %.0f %.4f\n", q->ranks, q->ops_per_sec,
							q->efficiency);
			fprintf(d, "\n\n");
			strncat(titles[s], p->variant, sizeof(titles[s]) - strlen(titles[s]) - 2);
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

/* ---- entry points ------------------------------------------------------------------ */

/*
 * The read path a runtime calls on every fault: the one-call node and copy
 * lookups and the inlined read side (POLSTORE_INLINE), at the first
 * --ranges N (64 in the runs).  The issue measures them against the
 * bare walk that returns a pointer (unsync:noref); the like-with-like ratio
 * (the unsynchronised walk that also reads the policy: unsync:node,
 * unsync:copy) follows on the same line.  Counted inline lookups against
 * the counted unsync, node lookups' efficiency at 2 ranks in shared-text.
 */
static void read_path_header(bool *header)
{
	if (!*header)
		printf("\ntargets (issue 11, the read path of a fault), ratios from this run:\n");
	*header = true;
}

static void summary_read_path(void)
{
	static const char *const sv[] = {"rcu-qsbr", "rcu", "seqlock"};
	static const double inl_t[] = {1.03, 1.08, 1.08};
	static const char *const forms[] = {"node", "copy"};
	uint64_t n = stress_opts.ranges[0];
	const struct stress_point *walk = stress_find("lookup-cost", "unsync:noref", 1, n);
	bool header = false;
	char name[48], what[96];
	size_t i, f;
	int inl;

	for (i = 0; i < 3; i++) {
		const struct stress_point *p;

		for (f = 0; f < 2; f++)
			for (inl = 1; inl >= 0; inl--) {
				snprintf(name, sizeof(name), "%s:%s%s", sv[i], forms[f], inl ? ":inline" : "");
				p = stress_find("lookup-cost", name, 1, n);
				if (!p || !walk)
					continue;
				read_path_header(&header);
				snprintf(what, sizeof(what), "lookup cost %s / unsync:noref, N=%llu", name,
						(unsigned long long)n);
				target(what, p->lookup_ns / walk->lookup_ns, "<=", inl ? inl_t[i] : 1.15,
						"%.3f");
				printf("    (/ %s, like with like: %.3f)\n", p->baseline, p->cost_ratio);
			}
		snprintf(name, sizeof(name), "%s:inline", sv[i]);
		p = stress_find("lookup-cost", name, 1, n);
		if (p) {
			read_path_header(&header);
			snprintf(what, sizeof(what), "lookup cost %s (counted) / unsync, N=%llu", name,
					(unsigned long long)n);
			target(what, p->cost_ratio, "<=", inl_t[i], "%.3f");
		}
		for (inl = 0; inl < 2; inl++) {
			snprintf(name, sizeof(name), "%s:node%s", sv[i], inl ? ":inline" : "");
			p = stress_find("shared-text", name, 2, 0);
			if (!p)
				continue;
			read_path_header(&header);
			snprintf(what, sizeof(what), "shared-text %s cpu efficiency, 2 ranks%s", name,
					stress_opts.writers ? "" : ", no writer");
			target(what, p->cpu_efficiency, ">=", 0.92, "%.3f");
		}
	}
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
	stress_print_churn();
	stress_print_uffd_fault();
	table_lockstat();
	summary();
	summary_write_cost();
	summary_rcu_writers();
	summary_read_path();
	fflush(stdout);
}

void stress_plot(const char *file)
{
	plot(file);
}
