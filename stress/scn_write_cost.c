// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * write-cost: one thread, no readers: ns per ps_store_set() of each kind
 * (replace, split, remove, span16) and of the sets that restore the tree,
 * for every store variant against the unsync in-place set.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "scn_store.h"
#include "stress.h"

/* ---- write-cost: one thread, no readers, ns per set ----------------------------- */

/*
 * Each (variant, N) tree is built once, by setting N disjoint slots (as for
 * the other scenarios; --pages is raised to 4 N so every slot is at least 4
 * pages long and can be split strictly inside).  Slot s always holds one of
 * the two policies of its colour; cur[s] says which.  Then, per repetition
 * and variant (repetitions interleaved across variants, trees kept), one
 * fresh thread runs each kind for its time, every iteration on a random
 * slot (xorshift), and each ps_store_set() (unsync: base_set()) is timed
 * alone with the TSC, so the kind's own set and the sets that restore the
 * tree are reported apart:
 *
 *   replace   set exactly [start, end) of slot s to its other policy: one
 *             range unlinked, one linked.  Nothing to restore; the count
 *             stays N.
 *   split     set [start + 1, end - 1) of slot s to its other policy: the
 *             range is split in two and a third linked between (N + 2).
 *             Restored by "unsplit": set [start, end) to the slot's policy,
 *             three ranges unlinked, one linked (N).
 *   remove    set [start, end) of slot s to NULL: one range unlinked
 *             (N - 1).  Restored by "re-add": set it back, one range linked
 *             into the gap (N).
 *   span16    set slots s .. s + 15 to one policy: 16 ranges unlinked, one
 *             linked (N - 15).  Restored by "unspan16": 16 sets, one per
 *             slot, each trimming the head off the spanning range (the last
 *             one replaces what is left of it) (N).  Skipped when N < 16.
 *
 * ns/set = the TSC time of the kind's sets / their number, minus the cost
 * of the timestamps themselves (measured back to back); median over the
 * repetitions, with the fastest and slowest.  It is wall time: a set that
 * is preempted counts whole.  So that this shows, the sets of the kind
 * that took STRESS_ONCPU_NS (100 us) or more are counted (slow_sets), and
 * set_ns_oncpu is the same median without them: on a quiet machine the
 * two agree and slow_sets is ~0; a variant with a genuinely slow set now
 * and then has both a higher ns/set and many slow sets.  The ratio divides that median
 * by unsync's median for the same kind and N.  A restoring kind's ns/set is
 * taken over every repetition's restoring sets together.
 *
 * Retired memory.  Once WC_SYNC_EVERY (4096) timed sets have run since the
 * last call, at an iteration's end (the tree restored), and at the end of
 * each kind, a store variant calls ps_store_synchronize() outside the timed
 * sets: SEQLOCK (and an RCU store that defers frees) holds removed ranges
 * until then, so they stay bounded by about 4096 sets' worth.  Its time is
 * reported per timed set apart (sync_ns_per_set), with the most bytes one
 * call released (retired_bytes_max, from the counting allocator), and the
 * most bytes that waited for a grace period meanwhile (inflight_peak_bytes,
 * the reclaim threads' own count: gp.c).  unsync
 * frees in base_set() and never synchronises.  Why 4096: with a call every
 * 256 sets, SEQLOCK's sets measured 3-6x slower (each call waits ~10 ms for
 * liburcu's call_rcu worker, so the thread mostly slept between short runs
 * of sets); with 4096 they cost the same as with one call at the end.
 *
 * Validation.  After each kind the range count must be N again; after each
 * repetition ps_store_check() / psi_rangetree_check(), the slot rule and
 * coverage (ctx_check()), and a walk that every range is exactly one slot
 * holding exactly the policy cur[] says.
 */

enum wc_kind { WC_REPLACE, WC_SPLIT, WC_REMOVE, WC_SPAN, WC_NKINDS };

static const char *const wc_name[WC_NKINDS] = {"replace", "split", "remove", "span16"};
static const char *const wc_restore_name[WC_NKINDS] = {"", "unsplit", "re-add", "unspan16"};

#define WC_SPAN_RANGES 16
#define WC_SYNC_EVERY 4096 /* timed sets between ps_store_synchronize() calls, at least */
#define WC_MIN_ITERS 16	   /* iterations per kind even past the deadline */
#define WC_PAGES_PER_RANGE 4

struct wc_sum {
	uint64_t set_ticks, sets, restore_ticks, restores;
	/* From ps_store_stats() around each of the kind's own sets (stats: it keeps them). */
	bool stats;
	uint64_t copied, copied_max, nretired, nretired_max, root;
	uint64_t slow;	     /* the kind's own sets that took STRESS_ONCPU_NS or more */
	uint64_t fast_ticks; /* the kind's own sets that took less */
	uint64_t sync_ns, syncs;
	double retired_max; /* bytes */
	double inflight_peak; /* the most bytes that waited for a grace period (gp.c) */
	double gp_per_sec;
};

struct wc_arg {
	struct ctx *c;
	uint8_t *cur;
	double seconds;
	uint64_t seed;
	struct wc_sum sum[WC_NKINDS];
};

static inline uint64_t wc_timed(struct ctx *c, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	uint64_t t0 = stress_ticks();

	do_set(c, start, end, pol);
	return stress_ticks() - t0;
}

/*
 * One of the kind's own sets: timed, and the nodes it copied and retired
 * read from ps_store_stats() before and after it (outside the timing).
 */
static uint64_t wc_kind_set(struct ctx *c, struct wc_sum *sum, uint64_t start, uint64_t end,
		struct ps_policy *pol)
{
	struct ps_store_stats a, b;
	bool stats = c->store && !ps_store_stats(c->store, &a);
	uint64_t t = wc_timed(c, start, end, pol);

	if (stats && !ps_store_stats(c->store, &b)) {
		uint64_t copied = b.nodes_copied - a.nodes_copied;
		uint64_t retired = b.nodes_retired - a.nodes_retired;

		sum->stats = true;
		sum->copied += copied;
		sum->nretired += retired;
		sum->root += b.root_publications - a.root_publications;
		if (copied > sum->copied_max)
			sum->copied_max = copied;
		if (retired > sum->nretired_max)
			sum->nretired_max = retired;
	}
	return t;
}

/* One of the kind's own sets took @t ticks. */
static inline void wc_count_set(struct wc_sum *sum, uint64_t t)
{
	sum->set_ticks += t;
	sum->sets++;
	if (t >= oncpu_ticks)
		sum->slow++;
	else
		sum->fast_ticks += t;
}

static uint64_t wc_count(struct ctx *c)
{
	return c->store ? ps_store_count(c->store) : c->base->tree.count;
}

static void wc_sync(struct ctx *c, struct wc_sum *sum)
{
	size_t before = stress_live_bytes(), after;
	uint64_t t0 = stress_now_ns();
	int ret = ps_store_synchronize(c->store);

	if (ret)
		stress_die("ps_store_synchronize(%s): %s", c->v->name, strerror(-ret));
	sum->sync_ns += stress_now_ns() - t0;
	sum->syncs++;
	after = stress_live_bytes();
	if (before > after && (double)(before - after) > sum->retired_max)
		sum->retired_max = (double)(before - after);
}

static void wc_run_kind(struct wc_arg *a, enum wc_kind k)
{
	struct ctx *c = a->c;
	const struct layout *l = &c->l;
	struct wc_sum *sum = &a->sum[k];
	uint64_t rng = stress_seed_for(a->seed, 200 + (uint64_t)k);
	uint64_t deadline = stress_now_ns() + (uint64_t)(a->seconds * 1e9), it, unsynced = 0;
	uint64_t i;

	for (it = 0; it < WC_MIN_ITERS || stress_now_ns() < deadline; it++) {
		uint64_t s, lo, hi, n0 = sum->sets + sum->restores;

		switch (k) {
		case WC_REPLACE:
			s = stress_below(&rng, l->nslots);
			a->cur[s] ^= 1;
			wc_count_set(sum, wc_kind_set(c, sum, slot_start(l, s), slot_end(l, s),
							  slot_pol(s, a->cur[s])));
			break;
		case WC_SPLIT:
			s = stress_below(&rng, l->nslots);
			lo = slot_start(l, s);
			hi = slot_end(l, s);
			wc_count_set(sum, wc_kind_set(c, sum, lo + 1, hi - 1, slot_pol(s, a->cur[s] ^ 1)));
			sum->restore_ticks += wc_timed(c, lo, hi, slot_pol(s, a->cur[s]));
			sum->restores++;
			break;
		case WC_REMOVE:
			s = stress_below(&rng, l->nslots);
			lo = slot_start(l, s);
			hi = slot_end(l, s);
			wc_count_set(sum, wc_kind_set(c, sum, lo, hi, NULL));
			sum->restore_ticks += wc_timed(c, lo, hi, slot_pol(s, a->cur[s]));
			sum->restores++;
			break;
		case WC_SPAN:
			s = stress_below(&rng, l->nslots - (WC_SPAN_RANGES - 1));
			wc_count_set(sum, wc_kind_set(c, sum, slot_start(l, s),
							  slot_end(l, s + WC_SPAN_RANGES - 1),
							  slot_pol(s, a->cur[s] ^ 1)));
			for (i = s; i < s + WC_SPAN_RANGES; i++)
				sum->restore_ticks += wc_timed(c, slot_start(l, i), slot_end(l, i),
						slot_pol(i, a->cur[i]));
			sum->restores += WC_SPAN_RANGES;
			break;
		default:
			stress_die("write-cost: unknown kind %d", (int)k);
		}
		unsynced += sum->sets + sum->restores - n0;
		if (c->store && unsynced >= WC_SYNC_EVERY) {
			wc_sync(c, sum);
			unsynced = 0;
		}
	}
	if (c->store)
		wc_sync(c, sum);
	if (wc_count(c) != l->nslots)
		stress_fail("VALIDATION FAILED: write-cost: %s: %llu ranges after the %s loop, "
			    "expected %llu",
				c->v->name, (unsigned long long)wc_count(c), wc_name[k],
				(unsigned long long)l->nslots);
}

static void *wc_main(void *arg)
{
	struct wc_arg *a = arg;
	int k;

	for (k = 0; k < WC_NKINDS; k++)
		if (k != WC_SPAN || a->c->l.nslots >= WC_SPAN_RANGES) {
			struct stress_gp_mark gm;

			stress_gp_mark(&gm);
			wc_run_kind(a, (enum wc_kind)k);
			stress_gp_read(&gm, &a->sum[k].gp_per_sec, &a->sum[k].inflight_peak);
		}
	return NULL;
}

struct wc_walk {
	const struct ctx *c;
	const uint8_t *cur;
	uint64_t next; /* the slot the next range must be */
};

static int wc_walk_one(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct wc_walk *w = arg;
	const struct layout *l = &w->c->l;
	uint64_t s = w->next++;

	if (s >= l->nslots || start != slot_start(l, s) || end != slot_end(l, s) ||
			pol != slot_pol(s, w->cur[s]))
		stress_fail("VALIDATION FAILED: write-cost: %s: range [%llu, %llu) is not slot "
			    "%llu with the policy last set there",
				w->c->v->name, (unsigned long long)start, (unsigned long long)end,
				(unsigned long long)s);
	return 0;
}

/* Everything ctx_check() checks, then every range is exactly its slot with cur[]'s policy. */
static void wc_check(struct ctx *c, const uint8_t *cur)
{
	struct wc_walk w = {c, cur, 0};
	uint64_t n = ctx_check(c);

	if (n != c->l.nslots)
		stress_fail("VALIDATION FAILED: write-cost: %s: %llu ranges, expected %llu",
				c->v->name, (unsigned long long)n, (unsigned long long)c->l.nslots);
	if (c->store)
		ps_store_foreach(c->store, wc_walk_one, &w);
	else
		psi_rangetree_foreach(&c->base->tree, wc_walk_one, &w);
	if (w.next != c->l.nslots)
		stress_fail("VALIDATION FAILED: write-cost: %s: the walk saw %llu ranges of %llu",
				c->v->name, (unsigned long long)w.next,
				(unsigned long long)c->l.nslots);
}

/* The cost of a pair of back-to-back timestamps, in ticks: the fastest of 8 x 4096. */
static double wc_tick_overhead(void)
{
	double best = 1e30;
	int b, i;

	for (b = 0; b < 8; b++) {
		uint64_t sum = 0;

		for (i = 0; i < 4096; i++) {
			uint64_t t0 = stress_ticks();

			sum += stress_ticks() - t0;
		}
		if ((double)sum / 4096 < best)
			best = (double)sum / 4096;
	}
	return best;
}

static bool wc_variant(const struct variant *v)
{
	if (v->noref || v->inl)
		return false;
	if (v->kind == V_UNSYNC)
		return true; /* the baseline always runs */
	return v->kind == V_STORE && stress_variant_selected(v->name);
}

static const uint64_t wc_default_ranges[] = {100, 10000, 1000000};

/* ns per set from a sum of TSC intervals, the timestamps' own cost taken off. */
static double wc_ns(uint64_t ticks, uint64_t sets, double overhead_ns)
{
	return sets ? (double)ticks * stress_ns_per_tick / (double)sets - overhead_ns : NAN;
}

void stress_run_write_cost(void)
{
	int nr = stress_opts.ranges_given ? stress_opts.nranges : 3, r;
	int reps = stress_opts.repeat, rep, k;
	double seconds = stress_opts.duration_s < 0.1 ? stress_opts.duration_s : 0.1;
	double overhead_ns = wc_tick_overhead() * stress_ns_per_tick;
	size_t i;

	variants_init();
	oncpu_ticks = (uint64_t)(STRESS_ONCPU_NS / stress_ns_per_tick);
	for (r = 0; r < nr; r++) {
		uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r]
						      : wc_default_ranges[r];
		uint64_t pages = stress_opts.pages;
		const struct variant *vs[NVARIANTS];
		struct ctx *cs;
		uint8_t **cur;
		struct wc_sum *sums; /* [variant][rep][kind] */
		double *ns, *fns, base_ns[WC_NKINDS], base_rns[WC_NKINDS];
		size_t nv = 0;
		struct layout l;

		for (i = 0; i < NVARIANTS; i++)
			if (wc_variant(&variants[i]))
				vs[nv++] = &variants[i];
		if (pages < WC_PAGES_PER_RANGE * n)
			pages = WC_PAGES_PER_RANGE * n;
		pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
		layout_init(&l, pages, n, false);
		cs = aligned_alloc(64, sizeof(*cs) * nv);
		cur = calloc(nv, sizeof(*cur));
		sums = calloc(nv * (size_t)reps * WC_NKINDS, sizeof(*sums));
		ns = calloc((size_t)reps, sizeof(*ns));
		fns = calloc((size_t)reps, sizeof(*fns));
		if (!cs || !cur || !sums || !ns || !fns)
			stress_die("out of memory");
		/* Every tree of this N is built once and kept: repetitions alternate variants. */
		for (i = 0; i < nv; i++) {
			uint64_t t0 = stress_now_ns();

			cur[i] = calloc(n, 1);
			if (!cur[i])
				stress_die("out of memory");
			ctx_build(&cs[i], vs[i], &l);
			if (vs[i]->kind == V_STORE)
				wc_sync(&cs[i], &(struct wc_sum){0});
			wc_check(&cs[i], cur[i]);
			stress_progress("write-cost: %s, %llu ranges built in %.2f s", vs[i]->name,
					(unsigned long long)n,
					(double)(stress_now_ns() - t0) / 1e9);
		}
		if (n < WC_SPAN_RANGES)
			stress_progress("write-cost: %llu ranges < %d: span16 skipped",
					(unsigned long long)n, WC_SPAN_RANGES);
		for (rep = 0; rep < reps; rep++) {
			for (i = 0; i < nv; i++) {
				struct wc_arg a;
				pthread_t t;

				memset(&a, 0, sizeof(a));
				a.c = &cs[i];
				a.cur = cur[i];
				a.seconds = seconds;
				a.seed = stress_seed_for(stress_opts.seed, (uint64_t)rep);
				stress_progress("write-cost: %s, %llu ranges (repetition %d/%d)",
						vs[i]->name, (unsigned long long)n, rep + 1, reps);
				/* A fresh thread, as lookup-cost: the driver never registers. */
				stress_thread_start(&t, wc_main, &a);
				pthread_join(t, NULL);
				memcpy(&sums[(i * (size_t)reps + (size_t)rep) * WC_NKINDS], a.sum,
						sizeof(a.sum));
				wc_check(&cs[i], cur[i]);
			}
		}
		/* Points: kinds in order, variants in order, unsync first (the baseline). */
		for (k = 0; k < WC_NKINDS; k++) {
			if (k == WC_SPAN && n < WC_SPAN_RANGES)
				continue;
			base_ns[k] = base_rns[k] = NAN;
			for (i = 0; i < nv; i++) {
				struct stress_point p;
				struct wc_sum tot;
				double rns;

				memset(&tot, 0, sizeof(tot));
				for (rep = 0; rep < reps; rep++) {
					const struct wc_sum *sm =
							&sums[(i * (size_t)reps + (size_t)rep) *
											WC_NKINDS +
									(size_t)k];

					ns[rep] = wc_ns(sm->set_ticks, sm->sets, overhead_ns);
					fns[rep] = wc_ns(sm->fast_ticks, sm->sets - sm->slow,
							overhead_ns);
					tot.slow += sm->slow;
					tot.set_ticks += sm->set_ticks;
					tot.sets += sm->sets;
					tot.restore_ticks += sm->restore_ticks;
					tot.restores += sm->restores;
					tot.sync_ns += sm->sync_ns;
					tot.syncs += sm->syncs;
					if (sm->retired_max > tot.retired_max)
						tot.retired_max = sm->retired_max;
					if (sm->inflight_peak > tot.inflight_peak)
						tot.inflight_peak = sm->inflight_peak;
					tot.stats |= sm->stats;
					tot.copied += sm->copied;
					tot.nretired += sm->nretired;
					tot.root += sm->root;
					if (sm->copied_max > tot.copied_max)
						tot.copied_max = sm->copied_max;
					if (sm->nretired_max > tot.nretired_max)
						tot.nretired_max = sm->nretired_max;
				}
				qsort(ns, (size_t)reps, sizeof(*ns), dbl_cmp);
				qsort(fns, (size_t)reps, sizeof(*fns), dbl_cmp);
				stress_point_init(&p, "write-cost", vs[i]->name, 1);
				snprintf(p.kind, sizeof(p.kind), "%s", wc_name[k]);
				snprintf(p.restore_kind, sizeof(p.restore_kind), "%s",
						wc_restore_name[k]);
				p.writers = 1;
				p.pages = l.pages;
				p.ranges = n;
				p.ranges_end = wc_count(&cs[i]);
				p.duration_s = seconds;
				p.reps = reps;
				p.ops = tot.sets;
				p.restores = tot.restores;
				p.overhead_ns = overhead_ns;
				p.set_ns = ns[reps / 2];
				p.set_ns_min = ns[0];
				p.set_ns_max = ns[reps - 1];
				p.set_ns_oncpu = fns[reps / 2];
				p.slow_sets = tot.slow;
				/* Restores: over all repetitions (the spread is in set_ns). */
				rns = wc_ns(tot.restore_ticks, tot.restores, overhead_ns);
				p.restore_ns = rns;
				if (vs[i]->kind == V_STORE) {
					p.sync_ns_per_set = (double)tot.sync_ns /
							    (double)(tot.sets + tot.restores);
					p.retired_bytes_max = tot.retired_max;
					p.inflight_peak_bytes = tot.inflight_peak;
				}
				if (tot.stats && tot.sets) {
					p.copied_mean = (double)tot.copied / (double)tot.sets;
					p.copied_max = (double)tot.copied_max;
					p.nretired_mean = (double)tot.nretired / (double)tot.sets;
					p.nretired_max = (double)tot.nretired_max;
					p.root_share = (double)tot.root / (double)tot.sets;
				}
				if (vs[i]->kind == V_UNSYNC) {
					base_ns[k] = p.set_ns;
					base_rns[k] = rns;
				}
				p.baseline = "unsync";
				p.cost_ratio = p.set_ns / base_ns[k];
				p.restore_ratio = rns / base_rns[k];
				/*
				 * A store's set does the bare set's work and more:
				 * measured cheaper by more than the slack, it measured
				 * the machine.  Preempted sets past 1 % did too.
				 */
				if (vs[i]->kind != V_UNSYNC &&
						p.cost_ratio < 1 - stress_opts.warn_slack)
					p.warn |= STRESS_WARN_NOISE;
				if (p.slow_sets * 100 > p.ops)
					p.warn |= STRESS_WARN_CPU;
				stress_emit(&p);
			}
		}
		for (i = 0; i < nv; i++) {
			ctx_destroy(&cs[i]);
			free(cur[i]);
		}
		free(cs);
		free(cur);
		free(sums);
		free(ns);
		free(fns);
		pool_destroy();
	}
}

/* Seconds write-cost takes, about: per N, the builds and every kind's time. */
double stress_estimate_write_cost(void)
{
	double d = stress_opts.duration_s < 0.1 ? stress_opts.duration_s : 0.1, t = 0;
	int nr = stress_opts.ranges_given ? stress_opts.nranges : 3, r;
	size_t i, nv = 0;

	variants_init();
	for (i = 0; i < NVARIANTS; i++)
		nv += wc_variant(&variants[i]);
	for (r = 0; r < nr; r++) {
		uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r] : wc_default_ranges[r];

		t += (double)nv * (build_s(n) + stress_opts.repeat * WC_NKINDS * d);
	}
	return t;
}
