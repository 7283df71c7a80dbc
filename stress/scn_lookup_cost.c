// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lookup-cost: one rank, no writer, no other work: ns per lookup of every
 * variant, its ratio to the unsynchronised walk of the same form, and the
 * bytes per range the library allocated.  The loops are scn_store_read.c's.
 * Beside them, the floor: the static layout of static_layout.h over the
 * same ranges, answering the node form's question, its answers checked
 * against the tree once it is built.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "scn_store.h"
#include "static_layout.h"
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

/* ---- the static layout ---------------------------------------------------------- */

static const struct variant static_node = {"static:node", V_UNSYNC, -1, true, F_NODE, false};

struct static_collect {
	struct base *b;
	uint64_t *key;
	int32_t *val;
	size_t n;
};

static int static_collect_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct static_collect *sc = arg;

	(void)end;
	(void)pol;
	sc->key[sc->n] = start;
	sc->val[sc->n++] = base_node(sc->b, start, 0);
	return 0;
}

/* Page @page's answer from @t against the tree's; exits on a difference. */
static void static_expect(const struct sl_tree *t, struct base *b, uint64_t page)
{
	int got = sl_lookup(t, page), want = base_node(b, page, 0);

	if (got != want)
		stress_fail("VALIDATION FAILED: static:node: lookup of page %llu gave %d, the tree "
			    "%d", (unsigned long long)page, got, want);
}

/*
 * The static layout of @l's ranges as ctx_build() lays them out, into @t;
 * every range's first and last page and as many random pages answer as
 * the tree.  Its bytes per range and huge-page share into @p.
 */
static void static_build(struct sl_tree *t, const struct layout *l, struct stress_point *p)
{
	struct static_collect sc = {NULL, NULL, NULL, 0};
	size_t advised0, huge0, i;
	uint64_t rng = stress_seed_for(stress_opts.seed, 11);
	struct ctx c;

	ctx_build(&c, &variants[F_NODE], l);
	sc.b = c.base;
	sc.key = malloc(l->nslots * 3 * sizeof(*sc.key));
	sc.val = malloc(l->nslots * 3 * sizeof(*sc.val));
	if (!sc.key || !sc.val)
		stress_die("out of memory");
	if (psi_rangetree_foreach(&c.base->tree, static_collect_fn, &sc))
		stress_die("static layout: the walk of the tree failed");
	stress_huge_bytes(&advised0, &huge0);
	sl_build(t, sc.key, sc.val, sc.n);
	for (i = 0; i < sc.n; i++) {
		uint64_t end = i + 1 < sc.n ? sc.key[i + 1] : l->pages;

		static_expect(t, c.base, sc.key[i]);
		static_expect(t, c.base, end - 1);
		static_expect(t, c.base, stress_below(&rng, l->pages));
	}
	stress_point_init(p, "lookup-cost", static_node.name, 1);
	p->pages = l->pages;
	p->ranges = sc.n;
	p->ranges_end = sc.n;
	p->bytes_per_range = (double)(t->nleaves * sizeof(struct sl_leaf) +
					      (t->nlevels ? (size_t)((const char *)t->leaf -
									  (const char *)t->level[0])
							  : 0)) /
			     (double)sc.n;
	p->index_huge_share = stress_huge_share(advised0, huge0);
	free(sc.key);
	free(sc.val);
	ctx_destroy(&c);
}

struct static_arg {
	const struct sl_tree *t;
	struct ctx *c;
	double seconds, ns;
};

/* cost_loop() of scn_store_read.c over the static layout, each mode its own loop. */
static inline __attribute__((always_inline)) uint64_t static_loop_mode(const struct sl_tree *t,
		struct ctx *c, uint64_t deadline, bool dep)
{
	uint64_t rng = stress_seed_for(stress_opts.seed, 7), ops = 0, seq = 0, zero = 0;
	uintptr_t sink = 0, last = 0;

	__asm__("" : "+r"(zero));
	for (;;) {
		unsigned i;

		for (i = 0; i < 1024; i++) {
			uint64_t page = next_page(c, &rng, &seq);
			int node;

			if (dep)
				page += zero & last;
			node = sl_lookup(t, page);
			last = (uintptr_t)node;
			sink += last;
			if (!(i & 255))
				validate_node(c, page, node);
		}
		ops += 1024;
		if (stress_now_ns() >= deadline)
			break;
	}
	__asm__ __volatile__("" ::"r"(sink));
	return ops;
}

static uint64_t static_loop(const struct sl_tree *t, struct ctx *c, uint64_t deadline)
{
	if (stress_opts.dependent)
		return static_loop_mode(t, c, deadline, true);
	return static_loop_mode(t, c, deadline, false);
}

static void *static_main(void *arg)
{
	struct static_arg *a = arg;
	uint64_t t0, t1, ops;

	static_loop(a->t, a->c, stress_now_ns() + 20000000);
	t0 = stress_thread_cpu_ns();
	ops = static_loop(a->t, a->c, stress_now_ns() + (uint64_t)(a->seconds * 1e9));
	t1 = stress_thread_cpu_ns();
	a->ns = (double)(t1 - t0) / (double)ops;
	return NULL;
}

/* One repetition of the static layout @t of @l: ns per lookup, loop included. */
static double static_repetition(const struct sl_tree *t, const struct layout *l)
{
	struct ctx c;
	struct static_arg a = {t, &c, cost_seconds(), 0};
	pthread_t th;

	memset(&c, 0, sizeof(c));
	c.v = &static_node;
	c.l = *l;
	c.sequential = stress_opts.sequential;
	stress_thread_start(&th, static_main, &a);
	pthread_join(th, NULL);
	return a.ns;
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
		struct stress_point *pts = calloc(NVARIANTS + 1, sizeof(*pts));
		double *static_ns = calloc((size_t)reps, sizeof(*static_ns));
		struct sl_tree st;
		struct ctx c;

		if (!ns || !pts || !static_ns)
			stress_die("out of memory");
		pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
		layout_init(&l, stress_opts.pages, n, false);
		/* The loop without a lookup: RNG, sampled check, sink. */
		ctx_build(&c, unsync_noref, &l);
		overhead = measure_cost(&c, cost_seconds() / 2, true);
		ctx_destroy(&c);
		stress_progress("lookup-cost: %s, %llu ranges (built and checked)", static_node.name,
				(unsigned long long)n);
		static_build(&st, &l, &pts[NVARIANTS]);
		/* Repetitions interleaved across variants, the static layout last. */
		for (rep = 0; rep < reps; rep++) {
			for (i = 0; i < NVARIANTS; i++)
				if (cost_selected(&variants[i]))
					ns[i * (size_t)reps + (size_t)rep] = cost_repetition(
							&variants[i], &l, rep, reps, &pts[i]);
			stress_progress("lookup-cost: %s, %llu ranges (repetition %d/%d)",
					static_node.name, (unsigned long long)n, rep + 1, reps);
			static_ns[rep] = static_repetition(&st, &l);
		}
		sl_free(&st);
		for (i = 0; i <= NVARIANTS; i++) {
			const struct variant *v = i < NVARIANTS ? &variants[i] : &static_node;

			if (i < NVARIANTS && !cost_selected(v))
				continue;
			cost_times(&pts[i], i < NVARIANTS ? &ns[i * (size_t)reps] : static_ns, reps,
					overhead);
			if (i < NBASELINES)
				base_ns[i] = pts[i].lookup_ns;
			pts[i].baseline = baseline_of(v);
			pts[i].cost_ratio = pts[i].lookup_ns / base_ns[v->form];
			snprintf(pts[i].lookup_mode, sizeof(pts[i].lookup_mode), "%s",
					stress_opts.dependent ? "dependent" : "independent");
			stress_emit(&pts[i]);
		}
		free(ns);
		free(static_ns);
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
	nv++; /* the static layout */
	for (r = 0; r < stress_opts.nranges; r++)
		t += cost_seconds() / 2 + (double)nv * stress_opts.repeat *
				(0.02 + cost_seconds() + build_s(stress_opts.ranges[r]));
	return t;
}
