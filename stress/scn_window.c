// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * window: ranks read windows of 1, 16 and 256 ranges
 * (ps_store_foreach_range()) and point lookups while writers set; CPU ns
 * per window and per range, against the same variant's lookup.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "compiler.h"
#include "scn_store.h"
#include "stress.h"

/* ---- window: ranks read windows while writers set ---------------------------- */

/*
 * The tree of write-cost (N slots, --pages raised to 4 N; default N = 10^6
 * when --ranges is not given), built once per variant.  Then, for every
 * mode and --ranks value (repetitions interleaved across modes), ranks run
 * one mode flat out while --writers writers set at --write-interval (in
 * --batch sets per ps_store_set_many()):
 *
 *   lookup        ps_store_lookup() of a random page, and the put
 *   lookup:noref  read_lock, ps_store_lookup_borrow(), read_unlock
 *   1             ps_store_foreach_range() of [p, p + 1), p a random page
 *   16, 256       ps_store_foreach_range() from the start of a random slot
 *                 to the end of the 15th (255th) slot after it
 *
 * ns per op = the ranks' CPU time / their ops (CPU time: the time slices
 * the machine gives other processes are not the store's cost); ranges per
 * op counts what the windows returned (a writer's split adds ranges), and
 * ns per range divides.  The window-1 ratio divides by the same variant's
 * lookup in the same run; the cost of one more range is the slope between
 * the 1- and 256-range windows.
 *
 * Validation: one op in 64 checks its result, a window's fully: its ranges
 * tile it (every page is always covered: contiguous, the first starting at
 * or before the window and the last ending at or after it), each inside
 * its slot with a policy of the slot's colour.  The other ops only count
 * the ranges (the check is not the cost measured).  ctx_check() after
 * every point.  The walks of one snapshot are what the oracle checks
 * (polstore-stress --check).
 */

enum win_mode { WM_LOOKUP, WM_LOOKUP_NOREF, WM_W1, WM_W16, WM_W256, WM_N };

static const char *const wm_name[WM_N] = {"lookup", "lookup:noref", "1", "16", "256"};
static const uint64_t wm_slots[WM_N] = {0, 0, 0, 16, 256};

#define WIN_CHECK_MASK 63

struct win_rank {
	struct ctx *c;
	pthread_t th;
	int id;
	enum win_mode mode;
	uint64_t seed;
	uint64_t ops, ranges, cpu_ns;
} __attribute__((aligned(64)));

struct win_walk {
	const struct ctx *c;
	uint64_t a, b, next, n;
};

static void __attribute__((noinline, noreturn))
bad_window(const struct win_walk *w, uint64_t start, uint64_t end, const char *why)
{
	stress_fail("VALIDATION FAILED: window: %s: window [%llu, %llu): range [%llu, %llu) %s",
			w->c->v->name, (unsigned long long)w->a, (unsigned long long)w->b,
			(unsigned long long)start, (unsigned long long)end, why);
}

static int win_check_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct win_walk *w = arg;
	uint64_t s = slot_of(&w->c->l, start);

	if (w->n ? start != w->next : start > w->a)
		bad_window(w, start, end, "leaves a gap or overlaps: not one snapshot");
	if (end > slot_end(&w->c->l, s) || pool_colour(pol) != (int)colour_of_slot(s))
		bad_window(w, start, end, "crosses its slot or holds another slot's policy");
	w->next = end;
	w->n++;
	return 0;
}

static int win_count_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	(void)start;
	(void)end;
	(void)pol;
	++*(uint64_t *)arg;
	return 0;
}

static inline void win_bounds(const struct ctx *c, enum win_mode m, uint64_t *rng, uint64_t *a,
		uint64_t *b)
{
	if (m == WM_W1 || m == WM_LOOKUP || m == WM_LOOKUP_NOREF) {
		*a = stress_below(rng, c->l.pages);
		*b = *a + 1;
	} else {
		uint64_t k = wm_slots[m] < c->l.nslots ? wm_slots[m] : c->l.nslots;
		uint64_t s = stress_below(rng, c->l.nslots - k + 1);

		*a = slot_start(&c->l, s);
		*b = slot_end(&c->l, s + k - 1);
	}
}

static void *win_main(void *arg)
{
	struct win_rank *rk = arg;
	struct ctx *c = rk->c;
	bool qsbr = ps_sync_caps(c->v->sync) & PS_CAP_QSBR;
	uint64_t rng = rk->seed, ops = 0, ranges = 0, t0;
	uintptr_t sink = 0;

	stress_gate_wait(&c->gate);
	if (qsbr)
		ps_qsbr_thread_online();
	t0 = stress_thread_cpu_ns();
	while (!PSI_READ_ONCE(c->stop)) {
		unsigned i;

		for (i = 0; i <= WIN_CHECK_MASK; i++) {
			uint64_t a, b;
			const void *pol;

			win_bounds(c, rk->mode, &rng, &a, &b);
			if (rk->mode == WM_LOOKUP || rk->mode == WM_LOOKUP_NOREF) {
				if (rk->mode == WM_LOOKUP) {
					pol = ps_store_lookup(c->store, a);
					ps_policy_put((struct ps_policy *)pol);
				} else {
					ps_store_read_lock(c->store);
					pol = ps_store_lookup_borrow(c->store, a);
					ps_store_read_unlock(c->store);
				}
				sink += (uintptr_t)pol;
				if (!i)
					validate(c, a, pol);
				ranges++;
			} else {
				if (!i) {
					struct win_walk w = {c, a, b, 0, 0};

					ps_store_foreach_range(c->store, a, b, win_check_cb, &w);
					if (!w.n || w.next < b)
						bad_window(&w, a, w.next, "is where the window's "
									  "coverage ends: pages missing");
					ranges += w.n;
				} else {
					ps_store_foreach_range(c->store, a, b, win_count_cb, &ranges);
				}
			}
			if (qsbr)
				ps_qsbr_quiescent();
		}
		ops += WIN_CHECK_MASK + 1;
	}
	rk->cpu_ns = stress_thread_cpu_ns() - t0;
	if (qsbr)
		ps_qsbr_thread_offline();
	__asm__ __volatile__("" ::"r"(sink));
	rk->ops = ops;
	rk->ranges = ranges;
	return NULL;
}

/* One point: @nranks ranks in mode @m beside the writers, for --duration. */
static void win_phase(struct ctx *c, enum win_mode m, int nranks, struct stress_point *p)
{
	int nwriters = stress_opts.writers, i;
	struct win_rank *ranks = aligned_alloc(64, sizeof(*ranks) * (size_t)nranks);
	struct writer *writers;
	uint64_t t_go, t_stop, ops = 0, ranges = 0, cpu = 0;

	if (!ranks)
		stress_die("out of memory");
	memset(ranks, 0, sizeof(*ranks) * (size_t)nranks);
	c->stop = 0;
	stress_gate_init(&c->gate);
	for (i = 0; i < nranks; i++) {
		ranks[i].c = c;
		ranks[i].id = i;
		ranks[i].mode = m;
		ranks[i].seed = stress_seed_for(stress_opts.seed, 300 + (uint64_t)i * 16 + m);
		stress_thread_start(&ranks[i].th, win_main, &ranks[i]);
	}
	writers = writers_run(c, nwriters, nranks, &t_go, &t_stop);
	for (i = 0; i < nranks; i++) {
		pthread_join(ranks[i].th, NULL);
		ops += ranks[i].ops;
		ranges += ranks[i].ranges;
		cpu += ranks[i].cpu_ns;
	}
	stress_point_init(p, "window", c->v->name, nranks);
	p->duration_s = (double)(t_stop - t_go) / 1e9;
	writers_join(writers, nwriters, p);
	stress_gate_destroy(&c->gate);
	snprintf(p->kind, sizeof(p->kind), "%s", wm_name[m]);
	p->batch = stress_opts.batch;
	p->pages = c->l.pages;
	p->ranges = c->l.nslots;
	p->ops = ops;
	p->ops_per_sec = (double)ops / p->duration_s;
	p->rank_cpu_s = (double)cpu / 1e9;
	p->ns_per_op = ops ? (double)cpu / (double)ops : NAN;
	p->ranges_per_op = ops ? (double)ranges / (double)ops : NAN;
	p->ns_per_range = ranges ? (double)cpu / (double)ranges : NAN;
	p->ranges_end = ctx_check(c);
	free(ranks);
}

static int point_by_ns(const void *a, const void *b)
{
	double x = ((const struct stress_point *)a)->ns_per_op;
	double y = ((const struct stress_point *)b)->ns_per_op;

	return x < y ? -1 : x > y;
}

void stress_run_window(void)
{
	uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[0] : 1000000;
	uint64_t pages = stress_opts.pages > 4 * n ? stress_opts.pages : 4 * n;
	int reps = stress_opts.repeat, nr = stress_opts.nranks, r, rep, m;
	struct layout l;
	size_t i;

	variants_init();
	pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
	layout_init(&l, pages, n, false);
	for (i = 0; i < NVARIANTS; i++) {
		const struct variant *v = &variants[i];
		struct stress_point *pts;
		struct ctx *c;
		uint64_t t0 = stress_now_ns();

		/* Windows lend their policies: the store variants, each once (':noref' is a mode). */
		if (v->kind != V_STORE || v->noref || v->inl || !stress_variant_selected(v->name))
			continue;
		c = aligned_alloc(64, sizeof(*c));
		pts = calloc((size_t)(nr * WM_N * reps), sizeof(*pts));
		if (!c || !pts)
			stress_die("out of memory");
		ctx_build(c, v, &l);
		ps_store_synchronize(c->store);
		stress_progress("window: %s, %llu ranges built in %.2f s", v->name,
				(unsigned long long)n, (double)(stress_now_ns() - t0) / 1e9);
		for (rep = 0; rep < reps; rep++)
			for (r = 0; r < nr; r++)
				for (m = 0; m < WM_N; m++) {
					stress_progress("window: %s, %s, %d rank%s (repetition %d/%d)",
							v->name, wm_name[m], stress_opts.ranks[r],
							stress_opts.ranks[r] > 1 ? "s" : "", rep + 1,
							reps);
					win_phase(c, (enum win_mode)m, stress_opts.ranks[r],
							&pts[((size_t)r * WM_N + (size_t)m) * (size_t)reps +
									(size_t)rep]);
				}
		/* The median repetition of each point (by ns per op); ratios within the variant. */
		for (r = 0; r < nr; r++) {
			struct stress_point med[WM_N];

			for (m = 0; m < WM_N; m++) {
				struct stress_point *pr = &pts[((size_t)r * WM_N + (size_t)m) *
							       (size_t)reps];

				qsort(pr, (size_t)reps, sizeof(*pr), point_by_ns);
				med[m] = pr[reps / 2];
				med[m].reps = reps;
			}
			for (m = 0; m < WM_N; m++) {
				med[m].baseline = "lookup";
				med[m].ratio_lookup = med[m].ns_per_op / med[WM_LOOKUP].ns_per_op;
				med[m].ratio_borrow =
						med[m].ns_per_op / med[WM_LOOKUP_NOREF].ns_per_op;
				stress_emit(&med[m]);
			}
		}
		ctx_destroy(c);
		free(c);
		free(pts);
	}
	pool_destroy();
}

/* ---- the table ------------------------------------------------------------------ */

void stress_print_window(void)
{
	const struct stress_point *p, *q;
	bool header = false;
	size_t i, j;

	for (i = 0; (p = stress_point_at(i)); i++) {
		const struct stress_point *w[WM_N] = {NULL};
		int m;

		if (strcmp(p->scenario, "window") || strcmp(p->kind, "lookup"))
			continue;
		for (j = i; (q = stress_point_at(j)) && j < i + WM_N; j++)
			for (m = 0; m < WM_N; m++)
				if (!strcmp(q->scenario, "window") && !strcmp(q->kind, wm_name[m]) &&
						!strcmp(q->variant, p->variant) && q->ranks == p->ranks)
					w[m] = q;
		if (!header) {
			printf("\nwindow: ranks read windows while %d writer(s) set every %.0f us "
			       "(%d set(s) per call); %llu ranges over %llu pages;\n  CPU ns per "
			       "op (median of %d repetition(s)), ranges per window, ns per range\n",
					p->writers, (double)stress_opts.write_interval_ns / 1e3,
					p->batch > 1 ? p->batch : 1, (unsigned long long)p->ranges,
					(unsigned long long)p->pages, p->reps);
			printf("  %-9s %5s %8s %8s | %8s %6s | %8s %6s %6s | %8s %6s %6s | %8s\n",
					"variant", "ranks", "lookup", "noref", "win 1", "x look",
					"win 16", "ranges", "/range", "win 256", "ranges", "/range",
					"+1 range");
			printf("  %-9s %5s %8s %8s | %8s %6s | %8s %6s %6s | %8s %6s %6s | %8s\n",
					"", "", "(ns)", "(ns)", "(ns)", "", "(ns)", "", "(ns)",
					"(ns)", "", "(ns)", "(ns)");
			header = true;
		}
		if (!w[WM_W1] || !w[WM_W16] || !w[WM_W256] || !w[WM_LOOKUP_NOREF])
			continue;
		printf("  %-9s %5d %8.1f %8.1f | %8.1f %6.2f | %8.1f %6.1f %6.1f | %8.1f %6.1f %6.1f "
		       "| %8.1f\n",
				p->variant, p->ranks, p->ns_per_op, w[WM_LOOKUP_NOREF]->ns_per_op,
				w[WM_W1]->ns_per_op, w[WM_W1]->ratio_lookup, w[WM_W16]->ns_per_op,
				w[WM_W16]->ranges_per_op, w[WM_W16]->ns_per_range,
				w[WM_W256]->ns_per_op, w[WM_W256]->ranges_per_op,
				w[WM_W256]->ns_per_range,
				(w[WM_W256]->ns_per_op - w[WM_W1]->ns_per_op) /
						(w[WM_W256]->ranges_per_op - w[WM_W1]->ranges_per_op));
	}
}

/* Seconds window takes, about: per variant a build, then modes x ranks x --repeat points. */
double stress_estimate_window(void)
{
	size_t i, nv = 0;

	variants_init();
	for (i = 0; i < NVARIANTS; i++)
		nv += variants[i].kind == V_STORE && !variants[i].noref && !variants[i].inl &&
		      stress_variant_selected(variants[i].name);
	return (double)nv * (build_s(stress_opts.ranges_given ? stress_opts.ranges[0] : 1000000) +
				    stress_opts.repeat * stress_opts.nranks * WM_N *
						    stress_opts.duration_s);
}
