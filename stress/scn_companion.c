// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The companion scenarios of polstore-stress, each modelled on the kernel
 * workload that motivated its module (memcg's page counters,
 * vm_committed_as, cgroup css ids in an idr), with the options and output
 * of the store scenarios:
 *
 *   memcg-charge  ranks charge and uncharge pages one at a time
 *                 through their own leaf counter under a shared parent and
 *                 root; a rank fills up to 64 pages, then empties, and
 *                 again.  The parent's limit is each --limit value times
 *                 what the ranks hold at their peaks: far above it by
 *                 default (100, where almost every charge succeeds), 0.75
 *                 for charges that fail at the peaks; a refused charge
 *                 "reclaims" half of what the rank holds.  Variants: spin,
 *                 seqlock, atomic (every level that kind), stock (a
 *                 per-thread stock of 32 pages in front of atomic levels, as
 *                 memcg's per-CPU stock in front of page_counters) and
 *                 stock:private (each rank its own root, parent and leaf: the
 *                 ceiling with nothing shared).  Ranks 1, 2, 4, 16 and 64
 *                 unless --ranks says otherwise.  Every point checks the
 *                 largest overshoot of a limit against
 *                 ps_charge_overshoot_bound(), then, with the stocks as the
 *                 ranks left them, that one thread charging page by page is
 *                 refused exactly at the limit, then that every level's
 *                 usage is 0 once the stocks are drained.
 *   mmap-commit   as will-it-scale's mmap1: ranks loop committing
 *                 and uncommitting 32768 pages (a 128 MiB mapping) through one
 *                 ps_commit sized like this machine (total = physical pages,
 *                 batch computed for the online CPUs).  Variants: strict
 *                 (OVERCOMMIT_NEVER, the small batch) and loose (GUESS, the
 *                 large batch).  A monitor thread snapshots the counter every
 *                 --write-interval and checks |approx - exact| against the
 *                 snapshot's bound; the largest error is reported with the
 *                 static bound batch x min(ranks, slots).
 *   css-walk      ranks walk the ids of a ps_idmap while writers replace
 *                 them (scn_css_walk.c).
 *
 * Efficiency here is throughput / (ranks x the same variant's 1-rank
 * throughput at the same setting), measured in the same run: at one rank a
 * shared and a private hierarchy are the same thing.  memcg-charge also
 * divides each variant's calls per rank CPU-second by stock:private's at
 * the same ranks and limit.  Points run --repeat times, interleaved; the
 * median-throughput repetition is reported.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "companion_run.h"
#include "scn_css_walk.h"
#include "stress.h"

static const char *const memcg_variants[] = {"spin", "seqlock", "atomic", "stock", "stock:private"};
static const char *const commit_variants[] = {"strict", "loose"};

bool stress_companion_variant_known(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(memcg_variants); i++)
		if (!strcmp(name, memcg_variants[i]))
			return true;
	for (i = 0; i < NELEM(commit_variants); i++)
		if (!strcmp(name, commit_variants[i]))
			return true;
	return css_walk_variant_known(name);
}

/* ---- memcg-charge ------------------------------------------------------------ */

#define MC_HOLD_MAX 64 /* pages a rank holds at its peak */

static const int memcg_default_ranks[] = {1, 2, 4, 16, 64};

struct memcg {
	enum ps_charge_kind kind; /* of the levels above the leaves */
	bool stock, private_;
	struct ps_charge *root, *parent;
	struct ps_charge **leaf, **proot, **pparent; /* per rank */
};

/*
 * A rank fills up to MC_HOLD_MAX pages one charge at a time, then gives
 * them back one at a time, and again.  A refused charge "reclaims": half of
 * what the rank holds goes back at once.
 */
static void *memcg_rank(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct memcg *m = r->arg;
	struct ps_charge *leaf = m->leaf[t->id], *fail;
	long held = 0;
	bool filling = true;
	uint64_t ops = 0, tries = 0, fails = 0;

	stress_gate_wait(&r->gate);
	while (!crun_stopped(r)) {
		int ret;
		uint64_t t0 = 0;
		bool sample = !(ops & STRESS_SAMPLE_MASK);

		if (sample)
			t0 = stress_ticks();
		if (filling) {
			tries++;
			ret = ps_charge_try(leaf, 1, &fail);
			if (!ret) {
				held++;
			} else if (ret == -ENOMEM) {
				long n = held / 2; /* reclaim */

				fails++;
				if (n && ps_charge_uncharge(leaf, n))
					stress_fail("memcg-charge: uncharge(%ld) failed", n);
				held -= n;
			} else {
				stress_fail("memcg-charge: ps_charge_try: %s", strerror(-ret));
			}
			if (held >= MC_HOLD_MAX)
				filling = false;
		} else {
			if (ps_charge_uncharge(leaf, 1))
				stress_fail("memcg-charge: uncharge(1) failed with %ld held", held);
			if (--held == 0)
				filling = true;
		}
		if (sample)
			stress_hist_add(&t->hist, stress_ticks() - t0);
		ops++;
	}
	if (held && ps_charge_uncharge(leaf, held))
		stress_fail("memcg-charge: final uncharge(%ld) failed", held);
	t->ops = ops;
	t->tries = tries;
	t->fails = fails;
	return NULL;
}

static struct ps_charge *charge_new(enum ps_charge_kind kind, struct ps_charge *parent, long limit)
{
	struct ps_charge *c = ps_charge_create(kind, parent, limit);

	if (!c)
		stress_die("ps_charge_create: %s", strerror(errno));
	return c;
}

/*
 * The limit at quiescence, with the stocks as the ranks left them: one
 * thread charging @leaf page by page is refused exactly when what it holds
 * reaches @limit (the pages other threads' stocks held go back before a
 * refusal), and then by @limited alone.  Most of the way is one large
 * charge; the last MC_HOLD_MAX pages, and whatever the stocks held, one
 * page at a time.  Everything is given back.
 */
static void memcg_probe_limit(const char *variant, struct ps_charge *leaf,
		struct ps_charge *limited, long limit, long stocked)
{
	struct ps_charge *fail = NULL;
	long held = 0, bulk = limit - stocked - MC_HOLD_MAX;
	int ret;

	if (bulk > 0) {
		ret = ps_charge_try(leaf, bulk, &fail);
		if (ret)
			stress_fail("VALIDATION FAILED: memcg-charge %s: %ld pages refused (%s) "
				    "below the limit %ld with %ld stocked",
					variant, bulk, strerror(-ret), limit, stocked);
		held = bulk;
	}
	while (!(ret = ps_charge_try(leaf, 1, &fail)))
		if (++held > limit)
			stress_fail("VALIDATION FAILED: memcg-charge %s: one thread holds %ld "
				    "pages under the limit %ld",
					variant, held, limit);
	if (ret != -ENOMEM || fail != limited || held != limit)
		stress_fail("VALIDATION FAILED: memcg-charge %s: at quiescence a charge was "
			    "refused (%s) %s with %ld of the limit's %ld pages held",
				variant, strerror(-ret),
				fail == limited ? "by the limited level" : "by another level", held,
				limit);
	if (held && ps_charge_uncharge(leaf, held))
		stress_fail("memcg-charge: uncharging the %ld probe pages failed", held);
}

static void memcg_point(const char *variant, int nranks, double ratio, struct stress_point *p)
{
	struct memcg m = {0};
	struct crun r = {0};
	long bound = 0, over = 0, stocked = 0, limit;
	uint64_t tries = 0, fails = 0;
	int i;

	m.private_ = strstr(variant, ":private") != NULL;
	m.stock = !strncmp(variant, "stock", 5);
	m.kind = m.stock ? PS_CHARGE_ATOMIC
			 : (enum ps_charge_kind)ps_charge_kind_from_name(variant);
	/* The parent's limit: @ratio x what the ranks under it hold at their peaks. */
	limit = lround(ratio * (m.private_ ? 1 : nranks) * MC_HOLD_MAX);
	if (limit < 1)
		limit = 1;
	m.leaf = calloc((size_t)nranks, sizeof(*m.leaf));
	m.proot = calloc((size_t)nranks, sizeof(*m.proot));
	m.pparent = calloc((size_t)nranks, sizeof(*m.pparent));
	if (!m.leaf || !m.proot || !m.pparent)
		stress_die("out of memory");
	if (!m.private_) {
		m.root = charge_new(m.kind, NULL, PS_CHARGE_MAX);
		m.parent = charge_new(m.kind, m.root, limit);
	}
	for (i = 0; i < nranks; i++) {
		struct ps_charge *parent = m.parent;

		if (m.private_) {
			m.proot[i] = charge_new(m.kind, NULL, PS_CHARGE_MAX);
			m.pparent[i] = parent = charge_new(m.kind, m.proot[i], limit);
		}
		m.leaf[i] = charge_new(m.stock ? PS_CHARGE_STOCK : m.kind, parent, PS_CHARGE_MAX);
	}
	r.nranks = nranks;
	r.rank_fn = memcg_rank;
	r.arg = &m;
	crun_go(&r);

	stress_point_init(p, "memcg-charge", variant, nranks);
	for (i = 0; i < nranks; i++) {
		tries += r.ranks[i].tries;
		fails += r.ranks[i].fails;
	}
	/* Overshoot of the run, at every level, before the probe adds its own. */
	for (i = 0; i < nranks; i++) {
		struct ps_charge *lv[3] = {m.leaf[i], m.private_ ? m.pparent[i] : m.parent,
				m.private_ ? m.proot[i] : m.root};
		int k;

		for (k = 0; k < 3; k++) {
			long o = ps_charge_read(lv[k], PS_CHARGE_MAX_OVERSHOOT);

			if (o > over)
				over = o;
		}
	}
	/* Every rank charges the parent: nranks threads, 1 page each, or a stock batch. */
	bound = ps_charge_overshoot_bound(
			m.kind, m.private_ ? 1 : nranks, 1, m.stock ? PS_CHARGE_STOCK_BATCH : 0);
	if (over > bound)
		stress_fail("VALIDATION FAILED: memcg-charge %s: overshoot %ld pages above the "
			    "documented bound %ld",
				variant, over, bound);
	/* The stocks still hold what the ranks left there: the probe must get it back. */
	for (i = 0; i < (m.private_ ? 1 : nranks); i++)
		stocked += ps_charge_read(m.leaf[i], PS_CHARGE_STOCKED);
	memcg_probe_limit(variant, m.leaf[0], m.private_ ? m.pparent[0] : m.parent, limit, stocked);
	/* Quiescent: drain the stocks, then every level must be back to 0. */
	for (i = 0; i < nranks; i++)
		ps_charge_drain_stock(m.private_ ? m.proot[i] : m.root);
	for (i = 0; i < nranks; i++) {
		struct ps_charge *lv[3] = {m.leaf[i], m.private_ ? m.pparent[i] : m.parent,
				m.private_ ? m.proot[i] : m.root};
		int k;

		for (k = 0; k < 3; k++) {
			long u = ps_charge_read(lv[k], PS_CHARGE_USAGE);

			if (u != 0)
				stress_fail("VALIDATION FAILED: memcg-charge %s: usage %ld at "
					    "level %d of rank %d after every page was uncharged",
						variant, u, k, i);
		}
	}
	crun_point(&r, p);
	p->max_overshoot = (double)over;
	p->overshoot_bound = (double)bound;
	p->limit_ratio = ratio;
	p->limit_pages = (double)limit;
	p->charges = tries;
	p->refused = fails;
	p->refused_share = tries ? (double)fails / (double)tries : NAN;

	for (i = 0; i < nranks; i++) {
		if (ps_charge_destroy(m.leaf[i]))
			stress_fail("memcg-charge: leaf %d busy at destroy", i);
		if (m.private_ &&
				(ps_charge_destroy(m.pparent[i]) || ps_charge_destroy(m.proot[i])))
			stress_fail("memcg-charge: private hierarchy %d busy at destroy", i);
	}
	if (!m.private_ && (ps_charge_destroy(m.parent) || ps_charge_destroy(m.root)))
		stress_fail("memcg-charge: parent or root busy at destroy");
	free(m.leaf);
	free(m.proot);
	free(m.pparent);
}

void stress_run_memcg_charge(void)
{
	const struct companion c = {"memcg-charge", memcg_variants, NELEM(memcg_variants),
			stress_opts.limits, stress_opts.nlimits, memcg_default_ranks,
			(int)NELEM(memcg_default_ranks), memcg_point};

	companion_run(&c);
}

/* ---- mmap-commit --------------------------------------------------------------- */

#define MMAP_PAGES 32768 /* 128 MiB of 4 KiB pages */

static void *commit_rank(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct ps_commit *cm = r->arg;
	uint64_t ops = 0, fails = 0;

	stress_gate_wait(&r->gate);
	while (!crun_stopped(r)) {
		uint64_t t0 = 0;
		bool sample = !(ops & STRESS_SAMPLE_MASK);
		int ret;

		if (sample)
			t0 = stress_ticks();
		ret = ps_commit_charge(cm, MMAP_PAGES);
		if (!ret)
			ps_commit_uncharge(cm, MMAP_PAGES);
		else if (ret == -ENOMEM)
			fails++;
		else
			stress_fail("mmap-commit: ps_commit_charge: %s", strerror(-ret));
		if (sample)
			stress_hist_add(&t->hist, stress_ticks() - t0);
		ops++;
	}
	t->ops = ops;
	t->fails = fails;
	return NULL;
}

/* The "writer" of mmap-commit: a monitor checking the approximation error. */
static void *commit_monitor(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct ps_pcounter *pc = ps_commit_counter(r->arg);
	uint64_t next;

	stress_gate_wait(&r->gate);
	next = stress_now_ns();
	while (!crun_stopped(r)) {
		struct ps_pcounter_snapshot s;
		int64_t err;
		uint64_t t0, t1;

		next += stress_opts.write_interval_ns ? stress_opts.write_interval_ns : 1000000;
		stress_sleep_until(next);
		t0 = stress_now_ns();
		if (ps_pcounter_snapshot(pc, &s))
			stress_fail("mmap-commit: ps_pcounter_snapshot failed");
		t1 = stress_now_ns();
		err = s.approx > s.exact ? s.approx - s.exact : s.exact - s.approx;
		if (err > s.bound)
			stress_fail("VALIDATION FAILED: mmap-commit: |approx %lld - exact %lld| = "
				    "%lld "
				    "above the bound %lld (batch %d x %d deltas)",
					(long long)s.approx, (long long)s.exact, (long long)err,
					(long long)s.bound, s.batch, s.nr_deltas);
		if ((double)err > t->aux)
			t->aux = (double)err;
		if (t1 - t0 > t->max_wait_ns)
			t->max_wait_ns = t1 - t0;
		t->ops++;
	}
	return NULL;
}

static void commit_point(const char *variant, int nranks, double setting, struct stress_point *p)
{
	bool strict = !strcmp(variant, "strict");
	long phys = sysconf(_SC_PHYS_PAGES);
	uint64_t total = phys > 0 ? (uint64_t)phys : (1ULL << 22);
	struct ps_commit *cm = ps_commit_create(
			strict ? PS_OVERCOMMIT_NEVER : PS_OVERCOMMIT_GUESS, total, 0);
	struct crun r = {0};
	int32_t batch;
	int64_t committed;
	uint64_t fails = 0;
	int i;

	(void)setting; /* one setting */

	if (!cm)
		stress_die("ps_commit_create: %s", strerror(errno));
	batch = ps_pcounter_batch(ps_commit_counter(cm));
	r.nranks = nranks;
	r.nwriters = 1;
	r.rank_fn = commit_rank;
	r.writer_fn = commit_monitor;
	r.arg = cm;
	crun_go(&r);
	committed = ps_commit_committed(cm, true);
	if (committed != 0)
		stress_fail("VALIDATION FAILED: mmap-commit %s: %lld pages committed after every "
			    "mapping was uncommitted",
				variant, (long long)committed);
	stress_point_init(p, "mmap-commit", variant, nranks);
	p->max_error = r.writers[0].aux;
	p->error_bound = (double)ps_pcounter_error_bound(batch, nranks);
	for (i = 0; i < nranks; i++)
		fails += r.ranks[i].fails;
	crun_point(&r, p);
	p->writer_ops_per_sec = NAN; /* the monitor is not a writer */
	p->writer_max_wait_ns = NAN;
	if (p->max_error > p->error_bound)
		stress_fail("VALIDATION FAILED: mmap-commit %s: error %.0f above batch x ranks "
			    "%.0f",
				variant, p->max_error, p->error_bound);
	snprintf(p->note, sizeof(p->note), "batch %d, %llu refused", batch,
			(unsigned long long)fails);
	ps_commit_destroy(cm);
}

void stress_run_mmap_commit(void)
{
	const struct companion c = {"mmap-commit", commit_variants, NELEM(commit_variants),
			one_setting, 1, stress_opts.ranks, stress_opts.nranks, commit_point};

	companion_run(&c);
}

/* ---- tables ------------------------------------------------------------------------- */

static void fmt_ratio(char *buf, size_t n, double x)
{
	if (isnan(x))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.3f", x);
}

/*
 * "@a / @b, @what": the quotient of the two variants' medians at each rank
 * count at limit @ratio, on one line; per CPU-second the ranks got with
 * @cpu, else throughput.  The limit's heading first, once (*@header).
 */
static void memcg_ratio_line(const char *a, const char *b, double ratio, bool cpu, const char *what,
		bool *header)
{
	const struct stress_point *pa, *pb;
	bool any = false;
	size_t i;

	for (i = 0; (pa = stress_point_at(i)); i++) {
		double x;

		if (strcmp(pa->scenario, "memcg-charge") || strcmp(pa->variant, a) ||
				!same_setting(pa->limit_ratio, ratio))
			continue;
		pb = companion_find("memcg-charge", b, pa->ranks, ratio);
		if (!pb)
			continue;
		x = cpu ? ((double)pa->ops / pa->rank_cpu_s) / ((double)pb->ops / pb->rank_cpu_s)
			: pa->ops_per_sec / pb->ops_per_sec;
		if (!*header)
			printf("  limit %g x peak, quotients of the medians by rank count:\n",
					ratio);
		*header = true;
		if (!any)
			printf("    %s / %s, %s:", a, b, what);
		printf("  %d: %.3fx", pa->ranks, x);
		any = true;
	}
	if (any)
		putchar('\n');
}

static void memcg_table(void)
{
	const struct stress_point *p;
	double last = NAN;
	bool header = false;
	unsigned seen = 0;
	size_t i;
	int l;

	for (i = 0; (p = stress_point_at(i)); i++) {
		char e[16], ce[16], cp[16], rf[16], p50[32], p99[32], mx[32], wn[24];

		if (strcmp(p->scenario, "memcg-charge"))
			continue;
		if (!header) {
			printf("\nmemcg-charge: 1-page charges and uncharges, each rank through\n"
			       "  its own leaf under a shared parent (the one limited level) and\n"
			       "  root; a rank holds up to %d pages; %.2f s per point, median of\n"
			       "  %d repetition(s)\n",
					MC_HOLD_MAX, stress_opts.duration_s, p->reps);
			printf("  %-14s %7s %7s %8s %8s %6s %6s %7s %8s %8s %8s %8s %6s %6s %s\n",
					"variant", "ranks", "limit", "limit", "Mops/s", "eff",
					"cpueff", "cpu vs", "refused", "p50", "p99", "max", "over-",
					"bound", "warn");
			printf("  %-14s %7s %7s %8s %8s %6s %6s %7s %8s %8s %8s %8s %6s %6s\n", "",
					"threads", "x peak", "pages", "", "x", "x", "private", "%",
					"(ns)", "(ns)", "(ns)", "pages", "pages");
			header = true;
		}
		if (!same_setting(p->limit_ratio, last) && !isnan(last))
			putchar('\n');
		last = p->limit_ratio;
		fmt_ratio(e, sizeof(e), p->efficiency);
		fmt_ratio(ce, sizeof(ce), p->cpu_efficiency);
		fmt_ratio(cp, sizeof(cp), p->cpu_vs_private);
		snprintf(rf, sizeof(rf), isnan(p->refused_share) ? "-" : "%.3f",
				p->refused_share * 100);
		stress_fmt_ns(p50, sizeof(p50), p->p50_ns);
		stress_fmt_ns(p99, sizeof(p99), p->p99_ns);
		stress_fmt_ns(mx, sizeof(mx), p->max_ns);
		printf("  %-14s %7d %7g %8.0f %8.3f %6s %6s %7s %8s %8s %8s %8s %6.0f %6.0f %s\n",
				p->variant, p->ranks, p->limit_ratio, p->limit_pages,
				p->ops_per_sec / 1e6, e, ce, cp, rf, p50, p99, mx, p->max_overshoot,
				p->overshoot_bound, stress_warn_names(p->warn, wn, sizeof(wn)));
		seen |= p->warn;
	}
	if (!header)
		return;
	printf("  (limit: the parent's, x the pages all ranks under it hold at their peaks "
	       "(stock:private:\n   each rank its own parent); eff: throughput / (ranks x the "
	       "same variant's 1-rank\n   throughput at that limit); cpueff: the same per "
	       "CPU-second the ranks got; cpu vs\n   private: calls per rank CPU-second / "
	       "stock:private's at the same ranks and limit;\n   refused: share of charge "
	       "calls refused; latency of one call in %d; over-shoot: the\n   largest usage "
	       "above a limit any level reached, within its bound\n   "
	       "(ps_charge_overshoot_bound()); and at quiescence, with the stocks as the ranks\n"
	       "   left them, one thread's charges were refused at exactly the limit;\n"
	       "   latencies in ns, or with u in us, m in ms)\n",
			STRESS_SAMPLE_MASK + 1);
	stress_warn_footnote(seen);
	for (l = 0; l < stress_opts.nlimits; l++) {
		double ratio = stress_opts.limits[l];

		bool hdr = false;

		memcg_ratio_line("stock", "stock:private", ratio, true, "calls per CPU-second",
				&hdr);
		memcg_ratio_line("atomic", "spin", ratio, false, "throughput", &hdr);
		memcg_ratio_line("seqlock", "spin", ratio, false, "throughput", &hdr);
	}
}

static void companion_table(const char *scenario, const char *title, const char *extra)
{
	bool header = false;
	unsigned seen = 0;
	size_t i;

	for (i = 0;; i++) {
		const struct stress_point *p = stress_point_at(i);
		char t[32], e[32], ce[32], p50[32], p99[32], mx[32], w[32], ww[32], x[48], wn[24];

		if (!p)
			break;
		if (strcmp(p->scenario, scenario))
			continue;
		if (!header) {
			printf("\n%s: %s, %.2f s per point\n", scenario, title,
					stress_opts.duration_s);
			printf("  %-14s %5s %9s %6s %6s %8s %8s %9s %8s %9s %-7s  %s\n", "variant",
					"ranks", "ops", "eff", "cpueff", "p50", "p99", "max",
					"writer", "writer", "warn", extra);
			printf("  %-14s %5s %9s %6s %6s %8s %8s %9s %8s %9s\n", "", "", "(M/s)", "",
					"", "(ns)", "(ns)", "(ns)", "(ops/s)", "wait (ns)");
			header = true;
		}
		snprintf(t, sizeof(t), "%.3f", p->ops_per_sec / 1e6);
		snprintf(e, sizeof(e), isnan(p->efficiency) ? "-" : "%.3f", p->efficiency);
		stress_fmt_ns(p50, sizeof(p50), p->p50_ns);
		stress_fmt_ns(p99, sizeof(p99), p->p99_ns);
		stress_fmt_ns(mx, sizeof(mx), p->max_ns);
		snprintf(w, sizeof(w), isnan(p->writer_ops_per_sec) ? "-" : "%.0f",
				p->writer_ops_per_sec);
		stress_fmt_ns(ww, sizeof(ww), p->writer_max_wait_ns);
		if (!isnan(p->max_overshoot))
			snprintf(x, sizeof(x), "%.0f / %.0f", p->max_overshoot, p->overshoot_bound);
		else if (!isnan(p->max_error))
			snprintf(x, sizeof(x), "%.0f / %.0f", p->max_error, p->error_bound);
		else
			x[0] = 0;
		snprintf(ce, sizeof(ce), isnan(p->cpu_efficiency) ? "-" : "%.3f",
				p->cpu_efficiency);
		printf("  %-14s %5d %9s %6s %6s %8s %8s %9s %8s %9s %-7s  %s  (%s)\n", p->variant,
				p->ranks, t, e, ce, p50, p99, mx, w, ww,
				stress_warn_names(p->warn, wn, sizeof(wn)), x, p->note);
		seen |= p->warn;
	}
	if (header) {
		printf("  (latencies in ns, or with u in us, m in ms)\n");
		stress_warn_footnote(seen);
	}
}

void stress_print_companions(void)
{
	memcg_table();
	companion_table("mmap-commit",
			"commit + uncommit of 32768 pages per op; latency ns per op; monitor "
			"snapshot every --write-interval",
			"max |approx-exact| / bound (pages)");
	companion_table("css-walk",
			"one op = a get_next walk over ~1000 ids in one read section; writers "
			"remove + alloc + replace",
			"");
}

double stress_estimate_memcg_charge(void)
{
	return companion_estimate(&(struct companion){"memcg-charge", memcg_variants,
			NELEM(memcg_variants), stress_opts.limits, stress_opts.nlimits,
			memcg_default_ranks, (int)NELEM(memcg_default_ranks), NULL});
}

double stress_estimate_mmap_commit(void)
{
	return companion_estimate(&(struct companion){"mmap-commit", commit_variants,
			NELEM(commit_variants), one_setting, 1, stress_opts.ranks, stress_opts.nranks,
			NULL});
}
