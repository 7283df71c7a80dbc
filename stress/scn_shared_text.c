// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * shared-text and hot-policy: ranks fault on the pages of a shared text
 * region (hot-policy: all on one range) beside writers; throughput,
 * efficiency against one rank's unsynchronised walk, sampled latency.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "scn_store.h"
#include "stress.h"

/* ---- shared-text and hot-policy ----------------------------------------------- */

/* @name is in --variants by itself ("all" does not count). */
static bool variant_named(const char *name)
{
	char buf[sizeof(stress_opts.variants)], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", stress_opts.variants);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, name))
			return true;
	return false;
}

/*
 * The multi-rank scenarios run a second each per point, so "all" there
 * means today's forms (counted and :noref) plus the node lookup, plain and
 * inlined, of the variants without a lock (what a fault path would use);
 * any other form runs when --variants names it.
 */
static bool multi_rank_wanted(const struct variant *v)
{
	if (!stress_variant_selected(v->name))
		return false;
	if (variant_named(v->name) || (v->form <= F_NOREF && !v->inl))
		return true;
	/* The node forms of the variants whose readers take no lock (liburcu readers). */
	return v->form == F_NODE && (ps_sync_caps(v->sync) & PS_CAP_RCU);
}

/*
 * The points of shared-text and hot-policy, want[(nranks + 1) * NVARIANTS]:
 * slot [0][i] the 1-rank baselines, [r + 1][i] variant i at --ranks[r];
 * returns how many are wanted.
 */
static size_t store_points_wanted(bool *want)
{
	int nr = stress_opts.nranks, r;
	size_t i, n = 0;

	/* The 1-rank baselines of every form some selected variant uses. */
	for (i = NBASELINES; i < NVARIANTS; i++)
		if (multi_rank_wanted(&variants[i]))
			want[variants[i].form] = true;
	want[0] = want[1] = true;
	for (r = 0; r < nr; r++)
		for (i = 0; i < NVARIANTS; i++)
			want[(size_t)(r + 1) * NVARIANTS + i] =
					multi_rank_wanted(&variants[i]) &&
					!(stress_opts.ranks[r] == 1 && variants[i].kind == V_UNSYNC);
	for (i = 0; i < (size_t)(nr + 1) * NVARIANTS; i++)
		n += want[i];
	return n;
}

static int point_by_ops(const void *a, const void *b)
{
	double x = ((const struct stress_point *)a)->ops_per_sec;
	double y = ((const struct stress_point *)b)->ops_per_sec;

	return x < y ? -1 : x > y;
}

static void run_point(const char *scenario, const struct variant *v, const struct layout *l,
		int nranks, double fault_ns, unsigned work_iters, struct stress_point *out)
{
	struct ctx *c = aligned_alloc(64, sizeof(*c));
	struct rank *ranks;
	struct writer *writers;
	struct stress_point p;
	struct stress_hist *h;
	int nwriters = v->kind == V_UNSYNC ? 0 : stress_opts.writers, i;
	uint64_t t_go, t_stop, ops = 0;
	struct stress_gp_mark gm;
	double gps, peak;
	double lookup_ticks = 0, iter_ticks = 0, cpu_ns = 0, lookup_oncpu = 0, iter_oncpu = 0;
	bool lockstat;

	if (!c)
		stress_die("out of memory");
	oncpu_ticks = (uint64_t)(STRESS_ONCPU_NS / stress_ns_per_tick);
	ctx_build(c, v, l);
	c->work_iters = work_iters;
	c->sequential = stress_opts.sequential;
	c->nranks = nranks;
	stress_gate_init(&c->gate);
	/* Lock statistics where the library keeps them (-EOPNOTSUPP: not built in). */
	lockstat = v->kind == V_STORE && !ps_store_lock_stat_reset(c->store);
	ranks = aligned_alloc(64, sizeof(*ranks) * (size_t)nranks);
	h = calloc(1, sizeof(*h));
	if (!ranks || !h)
		stress_die("out of memory");
	memset(ranks, 0, sizeof(*ranks) * (size_t)nranks);
	for (i = 0; i < nranks; i++) {
		ranks[i].c = c;
		ranks[i].id = i;
		ranks[i].seed = stress_seed_for(stress_opts.seed, (uint64_t)i);
		stress_thread_start(&ranks[i].th, rank_main, &ranks[i]);
	}
	stress_gp_mark(&gm);
	writers = writers_run(c, nwriters, nranks, &t_go, &t_stop);
	stress_gp_read(&gm, &gps, &peak);
	for (i = 0; i < nranks; i++) {
		pthread_join(ranks[i].th, NULL);
		ops += ranks[i].ops;
		stress_hist_merge(h, &ranks[i].hist);
		lookup_ticks += (double)ranks[i].lookup_ticks;
		iter_ticks += (double)ranks[i].iter_ticks;
		lookup_oncpu += (double)ranks[i].lookup_ticks_oncpu;
		iter_oncpu += (double)ranks[i].iter_ticks_oncpu;
		cpu_ns += (double)(ranks[i].cpu_end - ranks[i].cpu_start);
	}

	stress_point_init(&p, scenario, v->name, nranks);
	p.pages = l->pages;
	p.ranges = l->nslots;
	p.fault_work_ns = fault_ns;
	p.duration_s = (double)(t_stop - t_go) / 1e9;
	writers_join(writers, nwriters, &p);
	p.ops = ops;
	p.ops_per_sec = (double)ops / p.duration_s;
	p.lookup_share_all = iter_ticks > 0 ? lookup_ticks / iter_ticks : NAN;
	p.lookup_share = iter_oncpu > 0 ? lookup_oncpu / iter_oncpu : NAN;
	stress_hist_to_point(h, &p);
	p.baseline = baseline_of(v);
	p.rank_cpu_s = cpu_ns / 1e9;
	p.cpu_share = stress_cpu_share(p.rank_cpu_s, p.duration_s, nranks);
	p.gp_per_sec = gps;
	p.inflight_peak_bytes = peak;
	/* A variant without a lock reports zeros: nothing to show. */
	if (lockstat && !ps_store_lock_stat_read(c->store, p.lockstat))
		p.has_lockstat = p.lockstat[PS_LOCK_STAT_WRITE].acquisitions ||
				 p.lockstat[PS_LOCK_STAT_READ].acquisitions;
	p.ranges_end = ctx_check(c);
	*out = p;

	stress_gate_destroy(&c->gate);
	ctx_destroy(c);
	free(h);
	free(ranks);
	free(c);
}

void stress_run_store(const char *scenario)
{
	bool hot = !strcmp(scenario, "hot-policy");
	uint64_t n = stress_opts.ranges[0];
	struct layout l;
	double fault_ns;
	unsigned work_iters;

	variants_init();
	pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
	layout_init(&l, stress_opts.pages, n, hot);
	fault_ns = stress_opts.fault_work_ns >= 0 ? (double)stress_opts.fault_work_ns
						  : calibrate_lookup_ns(&l);
	work_iters = stress_work_iters(fault_ns);
	stress_progress("%s: %llu pages, %llu ranges, fault work %.0f ns (%u loop iterations)",
			scenario, (unsigned long long)l.pages, (unsigned long long)n, fault_ns,
			work_iters);
	/*
	 * Every point --repeat times, the repetitions interleaved (all
	 * variants once, then again), so a burst of load from other processes
	 * hits one repetition of many variants rather than every repetition of
	 * one.  Reported: the repetition with the median throughput, and the
	 * worst writer wait of all repetitions.
	 */
	{
		int nr = stress_opts.nranks, reps = stress_opts.repeat, rep, k;
		size_t npt = (size_t)(nr + 1) * NVARIANTS;
		struct stress_point *all = calloc(npt * (size_t)reps, sizeof(*all));
		bool *want = calloc(npt, sizeof(*want));

		if (!all || !want)
			stress_die("out of memory");
		store_points_wanted(want);
		for (rep = 0; rep < reps; rep++)
			for (k = 0; k < (int)npt; k++) {
				const struct variant *v = &variants[k % NVARIANTS];
				int nranks = k < (int)NVARIANTS
							     ? 1
							     : stress_opts.ranks[k / NVARIANTS - 1];

				if (!want[k])
					continue;
				stress_progress("%s: %s, %d rank%s%s (repetition %d/%d)", scenario,
						v->name, nranks, nranks > 1 ? "s" : "",
						k < (int)NVARIANTS ? ", baseline" : "", rep + 1,
						reps);
				run_point(scenario, v, &l, nranks, fault_ns, work_iters,
						&all[(size_t)k * (size_t)reps + (size_t)rep]);
			}
		for (k = 0; k < (int)npt; k++) {
			struct stress_point *pr = &all[(size_t)k * (size_t)reps], p;
			const struct stress_point *b;
			double wmax = 0, wmin = INFINITY;

			if (!want[k])
				continue;
			qsort(pr, (size_t)reps, sizeof(*pr), point_by_ops);
			for (rep = 0; rep < reps; rep++) {
				if (pr[rep].writer_max_wait_ns > wmax)
					wmax = pr[rep].writer_max_wait_ns;
				if (pr[rep].writer_max_wait_ns < wmin)
					wmin = pr[rep].writer_max_wait_ns;
			}
			p = pr[reps / 2];
			if (!isnan(p.writer_max_wait_ns)) {
				p.writer_max_wait_ns = wmax;
				p.writer_max_wait_min_ns = wmin;
			}
			p.reps = reps;
			p.ops_per_sec_min = pr[0].ops_per_sec;
			p.ops_per_sec_max = pr[reps - 1].ops_per_sec;
			b = stress_find(scenario, p.baseline, 1, l.nslots);
			if (b) {
				p.efficiency = p.ops_per_sec / ((double)p.ranks * b->ops_per_sec);
				p.efficiency_min = p.ops_per_sec_min / ((double)p.ranks * b->ops_per_sec);
				p.efficiency_max = p.ops_per_sec_max / ((double)p.ranks * b->ops_per_sec);
				p.cpu_efficiency = ((double)p.ops / p.rank_cpu_s) /
						   ((double)b->ops / b->rank_cpu_s);
				stress_warn_ref(&p, b, (double)b->ops);
			} else if (k < NBASELINES) {
				p.efficiency = p.cpu_efficiency = 1.0; /* the baseline itself */
				p.efficiency_min = p.ops_per_sec_min / p.ops_per_sec;
				p.efficiency_max = p.ops_per_sec_max / p.ops_per_sec;
			}
			stress_emit(&p);
		}
		free(all);
		free(want);
	}
	pool_destroy();
}


/* Seconds shared-text or hot-policy takes, about: points x --repeat x --duration. */
double stress_estimate_store(void)
{
	bool *want;
	size_t n;

	variants_init();
	want = calloc((size_t)(stress_opts.nranks + 1) * NVARIANTS, sizeof(*want));
	if (!want)
		stress_die("out of memory");
	n = store_points_wanted(want);
	free(want);
	return 0.05 + (double)n * stress_opts.repeat *
			(stress_opts.duration_s + build_s(stress_opts.ranges[0]));
}
