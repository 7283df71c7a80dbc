// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The runner the companion scenarios share (companion_run.h): ranks and
 * writers behind a gate for --duration, and the loop that measures every
 * setting x rank count x variant with interleaved repetitions and emits
 * each point's median.  It calls no scenario but through the point
 * function a scenario passes in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "companion_run.h"
#include "compiler.h"
#include "stress.h"

/* ---- a tiny runner: ranks and writers behind a gate, for a duration ---------- */

/* Every thread runs through here: its CPU time is what it got of the machine. */
static void *crun_trampoline(void *arg)
{
	struct cthread *t = arg;

	t->fn(t);
	t->cpu_ns = stress_thread_cpu_ns();
	return NULL;
}

void crun_go(struct crun *r)
{
	int i, nw = r->writer_fn ? r->nwriters : 0;
	uint64_t t_go, t_stop;

	r->ranks = aligned_alloc(64, sizeof(*r->ranks) * (size_t)r->nranks);
	r->writers = aligned_alloc(64, sizeof(*r->writers) * (size_t)(nw ? nw : 1));
	if (!r->ranks || !r->writers)
		stress_die("out of memory");
	memset(r->ranks, 0, sizeof(*r->ranks) * (size_t)r->nranks);
	memset(r->writers, 0, sizeof(*r->writers) * (size_t)(nw ? nw : 1));
	stress_gate_init(&r->gate);
	r->stop = 0;
	for (i = 0; i < r->nranks; i++) {
		r->ranks[i].r = r;
		r->ranks[i].id = i;
		r->ranks[i].fn = r->rank_fn;
		stress_thread_start(&r->ranks[i].th, crun_trampoline, &r->ranks[i]);
	}
	for (i = 0; i < nw; i++) {
		r->writers[i].r = r;
		r->writers[i].id = i;
		r->writers[i].fn = r->writer_fn;
		stress_thread_start(&r->writers[i].th, crun_trampoline, &r->writers[i]);
	}
	t_go = stress_gate_open(&r->gate, r->nranks + nw);
	stress_sleep_until(t_go + (uint64_t)(stress_opts.duration_s * 1e9));
	PSI_STORE_RELEASE(r->stop, 1);
	t_stop = stress_now_ns();
	for (i = 0; i < r->nranks; i++)
		pthread_join(r->ranks[i].th, NULL);
	for (i = 0; i < nw; i++)
		pthread_join(r->writers[i].th, NULL);
	r->nwriters = nw;
	r->duration_s = (double)(t_stop - t_go) / 1e9;
}

/* Totals of a run into a point (efficiency is the runner's); frees the thread arrays. */
void crun_point(struct crun *r, struct stress_point *p)
{
	struct stress_hist *h = calloc(1, sizeof(*h));
	uint64_t ops = 0, wops = 0, wmax = 0;
	double cpu = 0;
	int i;

	if (!h)
		stress_die("out of memory");
	for (i = 0; i < r->nranks; i++) {
		ops += r->ranks[i].ops;
		cpu += (double)r->ranks[i].cpu_ns;
		stress_hist_merge(h, &r->ranks[i].hist);
	}
	p->rank_cpu_s = cpu / 1e9;
	p->cpu_share = stress_cpu_share(p->rank_cpu_s, r->duration_s, r->nranks);
	for (i = 0; i < r->nwriters; i++) {
		wops += r->writers[i].ops;
		if (r->writers[i].max_wait_ns > wmax)
			wmax = r->writers[i].max_wait_ns;
	}
	p->duration_s = r->duration_s;
	p->ops = ops;
	p->ops_per_sec = (double)ops / r->duration_s;
	p->writers = r->nwriters;
	if (r->nwriters) {
		p->writer_ops_per_sec = (double)wops / r->duration_s;
		p->writer_max_wait_ns = (double)wmax;
	}
	stress_hist_to_point(h, p);
	p->baseline = p->variant;
	free(h);
	free(r->ranks);
	free(r->writers);
}

bool same_setting(double a, double b)
{
	return (isnan(a) && isnan(b)) || a == b;
}

/* The point recorded last for @scenario, @variant, @ranks at @setting (limit_ratio). */
const struct stress_point *companion_find(
		const char *scenario, const char *variant, int ranks, double setting)
{
	const struct stress_point *p, *found = NULL;
	size_t i;

	for (i = 0; (p = stress_point_at(i)); i++)
		if (!strcmp(p->scenario, scenario) && !strcmp(p->variant, variant) &&
				p->ranks == ranks && same_setting(p->limit_ratio, setting))
			found = p;
	return found;
}

/* Rank counts of a companion scenario: 1 first (the efficiency baseline). */
static int companion_ranks(const struct companion *c, int *out)
{
	const int *l = stress_opts.ranks_given ? stress_opts.ranks : c->default_ranks;
	int nl = stress_opts.ranks_given ? stress_opts.nranks : c->ndefault_ranks;
	int n = 0, i;

	out[n++] = 1;
	for (i = 0; i < nl; i++)
		if (l[i] != 1)
			out[n++] = l[i];
	return n;
}

static int point_by_ops(const void *a, const void *b)
{
	double x = ((const struct stress_point *)a)->ops_per_sec;
	double y = ((const struct stress_point *)b)->ops_per_sec;

	return (x > y) - (x < y);
}

/* The larger of @a and @b, NAN only when both are. */
static double worst(double a, double b)
{
	return isnan(a) || b > a ? b : a;
}

/*
 * The repetitions of one point: the median-throughput one, with the spread
 * of throughput, the worst writer wait and the largest overshoot or error
 * of them all (each repetition was validated as it ran).
 */
static struct stress_point companion_median(struct stress_point *pr, int reps)
{
	struct stress_point p;
	double wait = NAN, over = NAN, err = NAN;
	int rep;

	qsort(pr, (size_t)reps, sizeof(*pr), point_by_ops);
	for (rep = 0; rep < reps; rep++) {
		wait = worst(wait, pr[rep].writer_max_wait_ns);
		over = worst(over, pr[rep].max_overshoot);
		err = worst(err, pr[rep].max_error);
	}
	p = pr[reps / 2];
	p.writer_max_wait_ns = wait;
	p.max_overshoot = over;
	p.max_error = err;
	p.reps = reps;
	p.ops_per_sec_min = pr[0].ops_per_sec;
	p.ops_per_sec_max = pr[reps - 1].ops_per_sec;
	return p;
}

/* Point @at (setting-major, then ranks, then variant) once, into @p. */
static void companion_measure(const struct companion *c, const int *ranks, int nr, size_t at,
		int rep, struct stress_point *p)
{
	size_t nv = c->nvariants, v = at % nv;
	int k = (int)(at / nv % (size_t)nr), s = (int)(at / nv / (size_t)nr);
	char lim[48] = "";

	if (!stress_variant_selected(c->variants[v]))
		return;
	if (!isnan(c->settings[s]))
		snprintf(lim, sizeof(lim), ", limit %g x peak", c->settings[s]);
	stress_progress("%s: %s, %d rank%s%s (repetition %d/%d)", c->name, c->variants[v], ranks[k],
			ranks[k] > 1 ? "s" : "", lim, rep + 1, stress_opts.repeat);
	c->point(c->variants[v], ranks[k], c->settings[s], p);
}

/*
 * Every setting x rank count x selected variant, --repeat times with the
 * repetitions interleaved (all points once, then again), so a burst of load
 * from other processes hits one repetition of many points rather than every
 * repetition of one.  Then, per setting and rank count, the median of each
 * variant is emitted, with its efficiency against the same variant's 1-rank
 * median at that setting (emitted before it) and, where the scenario has
 * stock:private, its calls per CPU-second against stock:private's there.
 */
void companion_run(const struct companion *c)
{
	int ranks[STRESS_MAX_LIST + 1], nr = companion_ranks(c, ranks);
	int reps = stress_opts.repeat, ns = c->nsettings, s, k, rep;
	size_t nv = c->nvariants, v, at, npt = (size_t)ns * (size_t)nr * nv;
	struct stress_point *all = calloc(npt * (size_t)reps, sizeof(*all)), *grp;

	grp = calloc(nv, sizeof(*grp));
	if (!all || !grp)
		stress_die("out of memory");
	for (rep = 0; rep < reps; rep++)
		for (at = 0; at < npt; at++)
			companion_measure(c, ranks, nr, at, rep,
					&all[at * (size_t)reps + (size_t)rep]);
	for (s = 0; s < ns; s++)
		for (k = 0; k < nr; k++) {
			const struct stress_point *priv = NULL, *b;

			for (v = 0; v < nv; v++) {
				at = ((size_t)s * (size_t)nr + (size_t)k) * nv + v;
				if (!stress_variant_selected(c->variants[v]))
					continue;
				grp[v] = companion_median(&all[at * (size_t)reps], reps);
				if (!strcmp(c->variants[v], "stock:private"))
					priv = &grp[v];
			}
			for (v = 0; v < nv; v++) {
				struct stress_point *p = &grp[v];

				if (!stress_variant_selected(c->variants[v]))
					continue;
				b = companion_find(c->name, p->variant, 1, c->settings[s]);
				if (ranks[k] == 1) {
					p->efficiency = p->cpu_efficiency = 1.0;
				} else if (b) {
					p->efficiency = p->ops_per_sec /
							((double)p->ranks * b->ops_per_sec);
					p->cpu_efficiency = ((double)p->ops / p->rank_cpu_s) /
							    ((double)b->ops / b->rank_cpu_s);
					stress_warn_ref(p, b, (double)b->ops);
				}
				if (priv) {
					p->cpu_vs_private = ((double)p->ops / p->rank_cpu_s) /
							    ((double)priv->ops / priv->rank_cpu_s);
					stress_warn_ref(p, priv, (double)priv->ops);
				}
				stress_emit(p);
			}
		}
	free(grp);
	free(all);
}

const double one_setting[1] = {NAN};

/* Seconds @c takes: selected variants x rank counts x settings x --repeat x --duration. */
double companion_estimate(const struct companion *c)
{
	int ranks[STRESS_MAX_LIST + 1], nr = companion_ranks(c, ranks);
	size_t v, nv = 0;

	for (v = 0; v < c->nvariants; v++)
		nv += stress_variant_selected(c->variants[v]);
	return (double)nv * nr * c->nsettings * stress_opts.repeat * stress_opts.duration_s;
}
