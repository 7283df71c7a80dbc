// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lookup-cost: one rank, no writer, no other work: ns per lookup of every
 * variant, its ratio to the unsynchronised walk of the same form, and the
 * bytes per range the library allocated.  The loops are scn_store_read.c's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "scn_store.h"
#include "stress.h"

/* Measuring time per lookup-cost measurement: --duration, at most 0.3 s. */
static double cost_seconds(void)
{
	return stress_opts.duration_s < 0.3 ? stress_opts.duration_s : 0.3;
}

/* Every unsync baseline runs (each form's ratio needs its own), the rest as --variants. */
static bool cost_selected(const struct variant *v)
{
	return v->kind == V_UNSYNC || stress_variant_selected(v->name);
}

/*
 * Repetition @rep of @reps of @v on layout @l, in a fresh context: its ns per
 * lookup, loop included.  The first one starts @p and measures the bytes
 * per range (allocated once the build settled, and as ps_store_memory()
 * says).
 */
static double cost_repetition(const struct variant *v, const struct layout *l, int rep, int reps,
		struct stress_point *p)
{
	uint64_t n = l->nslots;
	size_t before, advised0, huge0;
	struct ctx c;
	double ns;

	stress_progress("lookup-cost: %s, %llu ranges (repetition %d/%d)", v->name,
			(unsigned long long)n, rep + 1, reps);
	before = stress_live_bytes();
	stress_huge_bytes(&advised0, &huge0);
	ctx_build(&c, v, l);
	if (!rep) {
		/*
		 * What the store holds once its build has settled: the ranges
		 * the build retired freed, the building thread's spares back.
		 */
		if (c.store)
			ps_store_synchronize(c.store);
		stress_point_init(p, "lookup-cost", v->name, 1);
		p->pages = l->pages;
		p->ranges = n;
		p->bytes_per_range = (double)(stress_live_bytes() - before) / (double)n;
		p->store_bytes_per_range =
				c.store ? (double)ps_store_memory(c.store) / (double)n
					: (double)(sizeof(*c.base) + n * sizeof(struct ps_range)) /
								(double)n;
		p->index_huge_share = stress_huge_share(advised0, huge0);
	}
	ns = measure_cost(&c, cost_seconds(), false);
	p->ranges_end = ctx_check(&c);
	ctx_destroy(&c);
	return ns;
}

/*
 * @p's times from its @reps repetitions @ns (sorted here), less the loop's
 * @overhead.  The fastest repetition is reported: on one rank without
 * writers, other processes (caches, a busy SMT sibling) only ever add time.
 */
static void cost_times(struct stress_point *p, double *ns, int reps, double overhead)
{
	qsort(ns, (size_t)reps, sizeof(double), dbl_cmp);
	p->reps = reps;
	p->overhead_ns = overhead;
	p->lookup_ns = ns[0] - overhead;
	p->lookup_ns_median = ns[reps / 2] - overhead;
	p->lookup_ns_max = ns[reps - 1] - overhead;
	p->ops_per_sec = 1e9 / ns[0];
	p->duration_s = cost_seconds();
}

void stress_run_lookup_cost(void)
{
	int r, reps = stress_opts.repeat, rep;
	size_t i;

	variants_init();

	for (r = 0; r < stress_opts.nranges; r++) {
		uint64_t n = stress_opts.ranges[r];
		struct layout l;
		double base_ns[NBASELINES] = { -1, -1, -1, -1 }, overhead;
		double *ns = calloc(NVARIANTS * (size_t)reps, sizeof(*ns));
		struct stress_point *pts = calloc(NVARIANTS, sizeof(*pts));
		struct ctx c;

		if (!ns || !pts)
			stress_die("out of memory");
		pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
		layout_init(&l, stress_opts.pages, n, false);
		/* The loop without a lookup: RNG, sampled check, sink. */
		ctx_build(&c, unsync_noref, &l);
		overhead = measure_cost(&c, cost_seconds() / 2, true);
		ctx_destroy(&c);
		/* Repetitions interleaved across variants. */
		for (rep = 0; rep < reps; rep++)
			for (i = 0; i < NVARIANTS; i++)
				if (cost_selected(&variants[i]))
					ns[i * (size_t)reps + (size_t)rep] = cost_repetition(
							&variants[i], &l, rep, reps, &pts[i]);
		for (i = 0; i < NVARIANTS; i++) {
			if (!cost_selected(&variants[i]))
				continue;
			cost_times(&pts[i], &ns[i * (size_t)reps], reps, overhead);
			if (i < NBASELINES)
				base_ns[i] = pts[i].lookup_ns;
			pts[i].baseline = baseline_of(&variants[i]);
			pts[i].cost_ratio = pts[i].lookup_ns / base_ns[variants[i].form];
			stress_emit(&pts[i]);
		}
		free(ns);
		free(pts);
		pool_destroy();
	}
}


/* Seconds lookup-cost takes, about: variants x --repeat x (warm-up + measurement + build). */
double stress_estimate_lookup_cost(void)
{
	double t = 0;
	size_t i, nv = 0;
	int r;

	variants_init();
	for (i = 0; i < NVARIANTS; i++)
		nv += cost_selected(&variants[i]);
	for (r = 0; r < stress_opts.nranges; r++)
		t += cost_seconds() / 2 + (double)nv * stress_opts.repeat *
				(0.02 + cost_seconds() + build_s(stress_opts.ranges[r]));
	return t;
}
