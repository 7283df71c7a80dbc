// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * batch-cost: one thread, no readers: ns per set as B single
 * ps_store_set() calls and as one ps_store_set_many() of the same sets.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "scn_store.h"
#include "stress.h"

/* ---- batch-cost: B single sets against one ps_store_set_many() of them ----------- */

/*
 * One thread, no readers, the write-cost tree (N slots, --pages raised to
 * 4 N; --ranges, default 10000,1000000).  Each iteration picks B slots
 * (--batch, default 16): "adjacent" B consecutive slots, "random" B
 * random ones; sets each of them to its slot's other policy with B
 * ps_store_set() calls, and back with one ps_store_set_many() of the same
 * B ops (the order of the two alternates), each timed whole in thread CPU
 * time.
 * Every set replaces one range: the count stays N, the tree's shape stays.
 * ps_store_synchronize() runs after each repetition only: it frees the
 * spare ranges an RCU store keeps between its sets, and a batch takes as
 * many as its ops may add (PSI_RANGETREE_SET_MAX_NEW an op) before it
 * changes anything, so a synchronize every few thousand sets (as
 * write-cost does) would time the refill, not the batch.  Retired ranges
 * still go to the reclaim thread.
 * Reported per set: the singles' ns and the batch's ns, and their ratio
 * (median over --repeat repetitions of min(--duration, 0.1) s each).
 */
enum bc_pattern { BC_ADJACENT, BC_RANDOM, BC_N };

static const char *const bc_name[BC_N] = {"adjacent", "random"};

struct bc_arg {
	struct ctx *c;
	enum bc_pattern pat;
	size_t batch;
	double seconds;
	uint64_t seed;
	uint64_t single_ns, many_ns, sets;
};

static void *bc_main(void *arg)
{
	struct bc_arg *a = arg;
	struct ctx *c = a->c;
	const struct layout *l = &c->l;
	struct ps_set_op *cur = calloc(a->batch, sizeof(*cur)), *alt = calloc(a->batch, sizeof(*alt));
	uint64_t rng = a->seed, deadline = stress_now_ns() + (uint64_t)(a->seconds * 1e9), it;
	size_t j;

	if (!cur || !alt)
		stress_die("out of memory");
	for (it = 0; it < 16 || stress_now_ns() < deadline; it++) {
		uint64_t s0 = stress_below(&rng, l->nslots - a->batch + 1), t0, t1, t2;

		for (j = 0; j < a->batch; j++) {
			uint64_t s = a->pat == BC_ADJACENT ? s0 + j : stress_below(&rng, l->nslots);

			/* Slots hold their colour's first policy between iterations. */
			cur[j] = (struct ps_set_op){slot_start(l, s), slot_end(l, s), slot_pol(s, 0)};
			alt[j] = (struct ps_set_op){slot_start(l, s), slot_end(l, s), slot_pol(s, 1)};
		}
		/* Thread CPU time: other processes' time slices are not the sets' cost. */
		if (it & 1) {
			t0 = stress_thread_cpu_ns();
			for (j = 0; j < a->batch; j++)
				do_set(c, alt[j].start, alt[j].end, alt[j].pol);
			t1 = stress_thread_cpu_ns();
			do_set_many(c, cur, a->batch);
			t2 = stress_thread_cpu_ns();
			a->single_ns += t1 - t0;
			a->many_ns += t2 - t1;
		} else {
			t0 = stress_thread_cpu_ns();
			do_set_many(c, alt, a->batch);
			t1 = stress_thread_cpu_ns();
			for (j = 0; j < a->batch; j++)
				do_set(c, cur[j].start, cur[j].end, cur[j].pol);
			t2 = stress_thread_cpu_ns();
			a->many_ns += t1 - t0;
			a->single_ns += t2 - t1;
		}
		a->sets += a->batch;
	}
	ps_store_synchronize(c->store);
	free(cur);
	free(alt);
	return NULL;
}

static const uint64_t bc_default_ranges[] = {10000, 1000000};

void stress_run_batch_cost(void)
{
	int nr = stress_opts.ranges_given ? stress_opts.nranges : 2, r, reps = stress_opts.repeat,
	    rep, k;
	size_t batch = stress_opts.batch_given ? (size_t)stress_opts.batch : 16, i;
	double seconds = stress_opts.duration_s < 0.1 ? stress_opts.duration_s : 0.1;

	variants_init();
	for (r = 0; r < nr; r++) {
		uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r] : bc_default_ranges[r];
		uint64_t pages = stress_opts.pages > 4 * n ? stress_opts.pages : 4 * n;
		struct layout l;

		if (n < batch) {
			stress_progress("batch-cost: %llu ranges < a batch of %zu: skipped",
					(unsigned long long)n, batch);
			continue;
		}
		pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
		layout_init(&l, pages, n, false);
		for (i = 0; i < NVARIANTS; i++) {
			const struct variant *v = &variants[i];
			double ratio[64], single[64], many[64];
			struct ctx c;

			if (v->kind != V_STORE || v->noref || v->inl || !stress_variant_selected(v->name))
				continue;
			ctx_build(&c, v, &l);
			ps_store_synchronize(c.store);
			for (k = 0; k < BC_N; k++) {
				struct stress_point p;
				uint64_t sets = 0;

				for (rep = 0; rep < reps && rep < 64; rep++) {
					struct bc_arg a = {&c, (enum bc_pattern)k, batch, seconds,
							stress_seed_for(stress_opts.seed,
									400 + (uint64_t)rep),
							0, 0, 0};
					pthread_t t;

					stress_progress("batch-cost: %s, %llu ranges, %s batches of "
							"%zu (repetition %d/%d)",
							v->name, (unsigned long long)n, bc_name[k],
							batch, rep + 1, reps);
					stress_thread_start(&t, bc_main, &a);
					pthread_join(t, NULL);
					single[rep] = (double)a.single_ns / (double)a.sets;
					many[rep] = (double)a.many_ns / (double)a.sets;
					ratio[rep] = many[rep] / single[rep];
					sets += a.sets;
				}
				if (ctx_check(&c) != n || ps_store_count(c.store) != n)
					stress_fail("VALIDATION FAILED: batch-cost: %s: the count "
						    "changed",
							v->name);
				qsort(ratio, (size_t)rep, sizeof(double), dbl_cmp);
				qsort(single, (size_t)rep, sizeof(double), dbl_cmp);
				qsort(many, (size_t)rep, sizeof(double), dbl_cmp);
				stress_point_init(&p, "batch-cost", v->name, 1);
				snprintf(p.kind, sizeof(p.kind), "%s", bc_name[k]);
				p.writers = 1;
				p.batch = (int)batch;
				p.pages = l.pages;
				p.ranges = n;
				p.ranges_end = ps_store_count(c.store);
				p.duration_s = seconds;
				p.reps = rep;
				p.ops = sets;
				p.single_ns = single[rep / 2];
				p.many_ns = many[rep / 2];
				p.batch_ratio = ratio[rep / 2];
				stress_emit(&p);
			}
			ctx_destroy(&c);
		}
		pool_destroy();
	}
}

/* ---- the table ------------------------------------------------------------------ */

void stress_print_batch_cost(void)
{
	const struct stress_point *p;
	bool header = false;
	size_t i;

	for (i = 0; (p = stress_point_at(i)); i++) {
		if (strcmp(p->scenario, "batch-cost"))
			continue;
		if (!header) {
			printf("\nbatch-cost: one thread, no readers; ns per set as %d single "
			       "ps_store_set() calls and as one ps_store_set_many()\n  (median of "
			       "%d repetition(s) of %.2f s)\n",
					p->batch, p->reps, p->duration_s);
			printf("  %-9s %8s %-9s %10s %10s %8s\n", "variant", "ranges", "pattern",
					"single", "batched", "ratio");
			printf("  %-9s %8s %-9s %10s %10s %8s\n", "", "", "", "(ns/set)",
					"(ns/set)", "");
			header = true;
		}
		printf("  %-9s %8llu %-9s %10.1f %10.1f %8.3f\n", p->variant,
				(unsigned long long)p->ranges, p->kind, p->single_ns, p->many_ns,
				p->batch_ratio);
	}
}


/* Seconds batch-cost takes, about: per N and variant a build and both patterns' time. */
double stress_estimate_batch_cost(void)
{
	double d = stress_opts.duration_s < 0.1 ? stress_opts.duration_s : 0.1, t = 0;
	int nr = stress_opts.ranges_given ? stress_opts.nranges : 2, r;
	size_t i, nv = 0;

	variants_init();
	for (i = 0; i < NVARIANTS; i++)
		nv += variants[i].kind == V_STORE && !variants[i].noref && !variants[i].inl &&
		      stress_variant_selected(variants[i].name);
	for (r = 0; r < nr; r++) {
		uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r] : bc_default_ranges[r];

		t += (double)nv * (build_s(n) + stress_opts.repeat * BC_N * d);
	}
	return t;
}
