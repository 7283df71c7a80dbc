// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The companion scenarios of polstore-stress, each modelled on the kernel
 * workload that motivated its module (memcg's page counters,
 * vm_committed_as, cgroup css ids in an idr), with the options and output
 * of the store scenarios:
 *
 *   memcg-charge  ranks charge and uncharge pages one at a time
 *                 through their own leaf counter under a shared parent and
 *                 root; the parent's limit (48 pages per rank, while a rank
 *                 holds up to 64) makes charges fail at the peaks, and a
 *                 failure "reclaims" half of what the rank holds.  Variants:
 *                 spin, seqlock, atomic (every level that kind), stock (a
 *                 per-thread stock of 32 pages in front of atomic levels, as
 *                 memcg's per-CPU stock in front of page_counters) and
 *                 stock:private (each rank its own root, parent and leaf: the
 *                 ceiling with nothing shared).  At quiescence every level's
 *                 usage must be 0 after draining the stocks, and the largest
 *                 overshoot of the limit is checked against
 *                 ps_charge_overshoot_bound().
 *   mmap-commit   as will-it-scale's mmap1: ranks loop committing
 *                 and uncommitting 32768 pages (a 128 MiB mapping) through one
 *                 ps_commit sized like this machine (total = physical pages,
 *                 batch computed for the online CPUs).  Variants: strict
 *                 (OVERCOMMIT_NEVER, the small batch) and loose (GUESS, the
 *                 large batch).  A monitor thread snapshots the counter every
 *                 --write-interval and checks |approx - exact| against the
 *                 snapshot's bound; the largest error is reported with the
 *                 static bound batch x min(ranks, slots).
 *   css-walk      ranks walk every id with get_next inside one read
 *                 section; writers remove a random id and allocate the lowest
 *                 free one every --write-interval (the new object's id is
 *                 stored right after the alloc returns it: walkers accept the
 *                 id or "not yet known").  Objects carry their id and
 *                 a live mark; a walk that meets an object with another id or
 *                 a dead mark aborts.  Removed objects are freed with
 *                 ps_idmap_free_rcu(), poisoned and kept until the end, so a
 *                 use after the grace period is seen, not silently allowed.
 *
 * Efficiency here is throughput / (ranks x the same variant's 1-rank
 * throughput), measured first in the same run: at one rank a shared and a
 * private hierarchy are the same thing, so for memcg-charge this is the
 * issue's "one rank on a private, unshared hierarchy".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "stress.h"

static const char *const memcg_variants[] = {"spin", "seqlock", "atomic", "stock", "stock:private"};
static const char *const commit_variants[] = {"strict", "loose"};
static const char *const walk_variants[] = {"spin", "rwlock", "rcu"};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

bool stress_companion_variant_known(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(memcg_variants); i++)
		if (!strcmp(name, memcg_variants[i]))
			return true;
	for (i = 0; i < NELEM(commit_variants); i++)
		if (!strcmp(name, commit_variants[i]))
			return true;
	for (i = 0; i < NELEM(walk_variants); i++)
		if (!strcmp(name, walk_variants[i]))
			return true;
	return false;
}

/* ---- a tiny runner: ranks and writers behind a gate, for a duration ---------- */

struct crun;

struct cthread {
	struct crun *r;
	pthread_t th;
	int id;
	uint64_t ops, fails;
	uint64_t max_wait_ns;
	double aux;	 /* scenario-specific maximum */
	uint64_t cpu_ns; /* the thread's CPU time */
	void *(*fn)(void *);
	struct stress_hist hist;
} __attribute__((aligned(64)));

struct crun {
	struct stress_gate gate;
	int nranks, nwriters;
	void *(*rank_fn)(void *);
	void *(*writer_fn)(void *);
	void *arg;
	struct cthread *ranks, *writers;
	double duration_s;
	int stop __attribute__((aligned(64)));
};

/* Every thread runs through here: its CPU time is what it got of the machine. */
static void *crun_trampoline(void *arg)
{
	struct cthread *t = arg;

	t->fn(t);
	t->cpu_ns = stress_thread_cpu_ns();
	return NULL;
}

static inline bool crun_stopped(const struct crun *r)
{
	return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
}

static void crun_go(struct crun *r)
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
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	t_stop = stress_now_ns();
	for (i = 0; i < r->nranks; i++)
		pthread_join(r->ranks[i].th, NULL);
	for (i = 0; i < nw; i++)
		pthread_join(r->writers[i].th, NULL);
	r->nwriters = nw;
	r->duration_s = (double)(t_stop - t_go) / 1e9;
}

/* Totals of a run into a point; frees the thread arrays. */
static void crun_point(struct crun *r, struct stress_point *p)
{
	struct stress_hist *h = calloc(1, sizeof(*h));
	uint64_t ops = 0, wops = 0, wmax = 0;
	double cpu = 0;
	const struct stress_point *b;
	int i;

	if (!h)
		stress_die("out of memory");
	for (i = 0; i < r->nranks; i++) {
		ops += r->ranks[i].ops;
		cpu += (double)r->ranks[i].cpu_ns;
		stress_hist_merge(h, &r->ranks[i].hist);
	}
	p->rank_cpu_s = cpu / 1e9;
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
	b = stress_find(p->scenario, p->variant, 1, 0);
	p->baseline = p->variant;
	if (p->ranks == 1) {
		p->efficiency = p->cpu_efficiency = 1.0;
	} else if (b) {
		p->efficiency = p->ops_per_sec / ((double)p->ranks * b->ops_per_sec);
		p->cpu_efficiency =
				((double)p->ops / p->rank_cpu_s) / ((double)b->ops / b->rank_cpu_s);
	}
	free(h);
	free(r->ranks);
	free(r->writers);
}

/* Rank counts of a companion scenario: 1 first (the efficiency baseline). */
static int companion_ranks(int *out)
{
	int n = 0, i;

	out[n++] = 1;
	for (i = 0; i < stress_opts.nranks; i++)
		if (stress_opts.ranks[i] != 1)
			out[n++] = stress_opts.ranks[i];
	return n;
}

/* A companion scenario: @point(variant, ranks) for each rank count and selected variant. */
static void companion_run(const char *scenario, const char *const *variants, size_t nvariants,
		void (*point)(const char *variant, int nranks))
{
	int ranks[STRESS_MAX_LIST + 1], n = companion_ranks(ranks), k;
	size_t v;

	for (k = 0; k < n; k++)
		for (v = 0; v < nvariants; v++) {
			if (!stress_variant_selected(variants[v]))
				continue;
			stress_progress("%s: %s, %d ranks", scenario, variants[v], ranks[k]);
			point(variants[v], ranks[k]);
		}
}

/* ---- memcg-charge ------------------------------------------------------------ */

#define MC_HOLD_MAX 64	     /* pages a rank holds at its peak */
#define MC_LIMIT_PER_RANK 48 /* parent limit per rank: the peaks fail */

struct memcg {
	enum ps_charge_kind kind; /* of the levels above the leaves */
	bool stock, private_;
	struct ps_charge *root, *parent;
	struct ps_charge **leaf, **proot, **pparent; /* per rank */
};

static void *memcg_rank(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct memcg *m = r->arg;
	struct ps_charge *leaf = m->leaf[t->id], *fail;
	long held = 0;
	bool filling = true;
	uint64_t ops = 0, fails = 0;

	stress_gate_wait(&r->gate);
	while (!crun_stopped(r)) {
		int ret;
		uint64_t t0 = 0;
		bool sample = !(ops & STRESS_SAMPLE_MASK);

		if (sample)
			t0 = stress_ticks();
		if (filling) {
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

static void memcg_point(const char *variant, int nranks)
{
	struct memcg m = {0};
	struct crun r = {0};
	struct stress_point p;
	long bound = 0, over = 0, failcnt = 0;
	int i;

	m.private_ = strstr(variant, ":private") != NULL;
	m.stock = !strncmp(variant, "stock", 5);
	m.kind = m.stock ? PS_CHARGE_ATOMIC
			 : (enum ps_charge_kind)ps_charge_kind_from_name(variant);
	m.leaf = calloc((size_t)nranks, sizeof(*m.leaf));
	m.proot = calloc((size_t)nranks, sizeof(*m.proot));
	m.pparent = calloc((size_t)nranks, sizeof(*m.pparent));
	if (!m.leaf || !m.proot || !m.pparent)
		stress_die("out of memory");
	if (!m.private_) {
		m.root = charge_new(m.kind, NULL, PS_CHARGE_MAX);
		m.parent = charge_new(m.kind, m.root, (long)nranks * MC_LIMIT_PER_RANK);
	}
	for (i = 0; i < nranks; i++) {
		struct ps_charge *parent = m.parent;

		if (m.private_) {
			m.proot[i] = charge_new(m.kind, NULL, PS_CHARGE_MAX);
			m.pparent[i] = parent = charge_new(m.kind, m.proot[i], MC_LIMIT_PER_RANK);
		}
		m.leaf[i] = charge_new(m.stock ? PS_CHARGE_STOCK : m.kind, parent, PS_CHARGE_MAX);
	}
	r.nranks = nranks;
	r.rank_fn = memcg_rank;
	r.arg = &m;
	crun_go(&r);

	stress_point_init(&p, "memcg-charge", variant, nranks);
	for (i = 0; i < nranks; i++)
		failcnt += (long)r.ranks[i].fails;
	/* Quiescent: drain the stocks, then every level must be back to 0. */
	for (i = 0; i < nranks; i++) {
		struct ps_charge *top = m.private_ ? m.proot[i] : m.root;

		ps_charge_drain_stock(top);
	}
	for (i = 0; i < nranks; i++) {
		struct ps_charge *lv[3] = {m.leaf[i], m.private_ ? m.pparent[i] : m.parent,
				m.private_ ? m.proot[i] : m.root};
		int k;

		for (k = 0; k < 3; k++) {
			long u = ps_charge_read(lv[k], PS_CHARGE_USAGE);
			long o = ps_charge_read(lv[k], PS_CHARGE_MAX_OVERSHOOT);

			if (u != 0)
				stress_fail("VALIDATION FAILED: memcg-charge %s: usage %ld at "
					    "level %d "
					    "of rank %d after every page was uncharged",
						variant, u, k, i);
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
	crun_point(&r, &p);
	p.max_overshoot = (double)over;
	p.overshoot_bound = (double)bound;
	snprintf(p.note, sizeof(p.note), "%ld refused charges", failcnt);
	stress_emit(&p);

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
	companion_run("memcg-charge", memcg_variants, NELEM(memcg_variants), memcg_point);
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

static void commit_point(const char *variant, int nranks)
{
	bool strict = !strcmp(variant, "strict");
	long phys = sysconf(_SC_PHYS_PAGES);
	uint64_t total = phys > 0 ? (uint64_t)phys : (1ULL << 22);
	struct ps_commit *cm = ps_commit_create(
			strict ? PS_OVERCOMMIT_NEVER : PS_OVERCOMMIT_GUESS, total, 0);
	struct crun r = {0};
	struct stress_point p;
	int32_t batch;
	int64_t committed;
	uint64_t fails = 0;
	int i;

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
	stress_point_init(&p, "mmap-commit", variant, nranks);
	p.max_error = r.writers[0].aux;
	p.error_bound = (double)ps_pcounter_error_bound(batch, nranks);
	for (i = 0; i < nranks; i++)
		fails += r.ranks[i].fails;
	crun_point(&r, &p);
	p.writer_ops_per_sec = NAN; /* the monitor is not a writer */
	p.writer_max_wait_ns = NAN;
	if (p.max_error > p.error_bound)
		stress_fail("VALIDATION FAILED: mmap-commit %s: error %.0f above batch x ranks "
			    "%.0f",
				variant, p.max_error, p.error_bound);
	snprintf(p.note, sizeof(p.note), "batch %d, %llu refused", batch,
			(unsigned long long)fails);
	stress_emit(&p);
	ps_commit_destroy(cm);
}

void stress_run_mmap_commit(void)
{
	companion_run("mmap-commit", commit_variants, NELEM(commit_variants), commit_point);
}

/* ---- css-walk -------------------------------------------------------------------- */

#define WALK_IDS 1000
#define OBJ_LIVE 0x11FE11FEu
#define OBJ_DEAD 0xDEADDEADu

struct wobj {
	int id;
	unsigned magic;
	struct wobj *next_dead;
};

struct walk {
	struct ps_idmap *map;
	const char *variant;
	struct wobj *graveyard; /* freed objects, poisoned, released at the end */
	long expected;		/* bound ids, per the writers' successful calls */
};

static struct walk *walk_cur;

static void wobj_free(void *p)
{
	struct wobj *o = p, *head;

	/* After the grace period no reader may see it: poison it and keep the memory. */
	o->magic = OBJ_DEAD;
	head = __atomic_load_n(&walk_cur->graveyard, __ATOMIC_RELAXED);
	do
		o->next_dead = head;
	while (!__atomic_compare_exchange_n(
			&walk_cur->graveyard, &head, o, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

static void *walk_rank(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct walk *w = r->arg;
	uint64_t ops = 0;

	stress_gate_wait(&r->gate);
	while (!crun_stopped(r)) {
		uint64_t t0 = stress_ticks();
		struct wobj *o;
		int id, prev = -1, n = 0;

		ps_idmap_read_lock(w->map);
		for (id = 0; (o = ps_idmap_get_next(w->map, &id)); id++) {
			int oid = __atomic_load_n(&o->id, __ATOMIC_ACQUIRE);

			if ((oid != id && oid != -1) || o->magic != OBJ_LIVE || id <= prev)
				stress_fail("VALIDATION FAILED: css-walk %s: id %d gave an object "
					    "of id %d, mark %#x (after id %d)",
						w->variant, id, oid, o->magic, prev);
			prev = id;
			n++;
		}
		ps_idmap_read_unlock(w->map);
		if (n < WALK_IDS / 2)
			stress_fail("VALIDATION FAILED: css-walk %s: a walk saw %d ids of about %d",
					w->variant, n, WALK_IDS);
		stress_hist_add(&t->hist, stress_ticks() - t0);
		ops++;
	}
	t->ops = ops;
	return NULL;
}

static void *walk_writer(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct walk *w = r->arg;
	uint64_t rng = stress_seed_for(stress_opts.seed, 200000 + (uint64_t)t->id), next;

	stress_gate_wait(&r->gate);
	next = stress_now_ns();
	while (!crun_stopped(r)) {
		struct wobj *o = malloc(sizeof(*o)), *old = NULL;
		int victim = (int)stress_below(&rng, WALK_IDS), id, ret;
		uint64_t t0, t1;

		if (stress_opts.write_interval_ns) {
			next += stress_opts.write_interval_ns;
			stress_sleep_until(next);
			if (crun_stopped(r)) {
				free(o);
				break;
			}
		}
		if (!o)
			stress_die("out of memory");
		t0 = stress_now_ns();
		ret = ps_idmap_remove(w->map, victim, (void **)&old);
		t1 = stress_now_ns();
		if (t1 - t0 > t->max_wait_ns)
			t->max_wait_ns = t1 - t0;
		if (!ret) {
			__atomic_fetch_sub(&w->expected, 1, __ATOMIC_RELAXED);
			if (old->id != victim)
				stress_fail("VALIDATION FAILED: css-walk %s: removing id %d "
					    "returned "
					    "the object of id %d",
						w->variant, victim, old->id);
			ps_idmap_free_rcu(w->map, old, wobj_free);
		} else if (ret != -ENOENT) {
			stress_fail("css-walk: ps_idmap_remove: %s", strerror(-ret));
		}
		o->magic = OBJ_LIVE;
		o->id = -1; /* not yet known: walkers accept -1 or the id they found it at */
		t0 = stress_now_ns();
		ret = ps_idmap_alloc(w->map, o, 0, PS_IDMAP_ID_MAX, &id);
		t1 = stress_now_ns();
		if (ret)
			stress_fail("css-walk: ps_idmap_alloc: %s", strerror(-ret));
		if (t1 - t0 > t->max_wait_ns)
			t->max_wait_ns = t1 - t0;
		__atomic_store_n(&o->id, id, __ATOMIC_RELEASE);
		__atomic_fetch_add(&w->expected, 1, __ATOMIC_RELAXED);
		t->ops++;
	}
	return NULL;
}

static void walk_point(const char *variant, int nranks)
{
	struct walk w = {0};
	struct crun r = {0};
	struct stress_point p;
	struct wobj *o;
	int i, id, n;

	w.variant = variant;
	w.map = ps_idmap_create((enum ps_idmap_sync)ps_idmap_sync_from_name(variant));
	if (!w.map)
		stress_die("ps_idmap_create(%s): %s", variant, strerror(errno));
	walk_cur = &w;
	for (i = 0; i < WALK_IDS; i++) {
		o = malloc(sizeof(*o));
		if (!o)
			stress_die("out of memory");
		o->id = i;
		o->magic = OBJ_LIVE;
		if (ps_idmap_alloc(w.map, o, 0, PS_IDMAP_ID_MAX, &id) || id != i)
			stress_fail("css-walk: initial alloc gave id %d for %d", id, i);
	}
	w.expected = WALK_IDS;
	r.nranks = nranks;
	r.nwriters = stress_opts.writers;
	r.rank_fn = walk_rank;
	r.writer_fn = walk_writer;
	r.arg = &w;
	crun_go(&r);
	ps_idmap_barrier(w.map);
	n = 0;
	ps_idmap_read_lock(w.map);
	for (id = 0; (o = ps_idmap_get_next(w.map, &id)); id++, n++)
		if (o->id != id || o->magic != OBJ_LIVE)
			stress_fail("VALIDATION FAILED: css-walk %s: id %d holds object %d at the "
				    "end",
					variant, id, o->id);
	ps_idmap_read_unlock(w.map);
	if (n != w.expected || ps_idmap_count(w.map) != n)
		stress_fail("VALIDATION FAILED: css-walk %s: %d ids bound, count says %d, writers "
			    "expect %ld",
				variant, n, ps_idmap_count(w.map), w.expected);
	stress_point_init(&p, "css-walk", variant, nranks);
	crun_point(&r, &p);
	snprintf(p.note, sizeof(p.note), "%d ids", n);
	stress_emit(&p);
	for (;;) {
		id = 0;
		ps_idmap_read_lock(w.map);
		o = ps_idmap_get_next(w.map, &id);
		ps_idmap_read_unlock(w.map);
		if (!o)
			break;
		if (ps_idmap_remove(w.map, id, NULL))
			stress_fail("css-walk: cannot remove id %d at the end", id);
		free(o);
	}
	ps_idmap_destroy(w.map);
	while ((o = w.graveyard)) {
		w.graveyard = o->next_dead;
		free(o);
	}
	walk_cur = NULL;
}

void stress_run_css_walk(void)
{
	companion_run("css-walk", walk_variants, NELEM(walk_variants), walk_point);
}

/* ---- tables ------------------------------------------------------------------------- */

static void companion_table(const char *scenario, const char *title, const char *extra)
{
	bool header = false;
	size_t i;

	for (i = 0;; i++) {
		const struct stress_point *p = stress_point_at(i);
		char t[32], e[32], ce[32], p50[16], p99[16], mx[16], w[32], ww[16], x[48];

		if (!p)
			break;
		if (strcmp(p->scenario, scenario))
			continue;
		if (!header) {
			printf("\n%s: %s, %.2f s per point\n", scenario, title,
					stress_opts.duration_s);
			printf("  %-14s %5s %9s %6s %6s %7s %7s %7s %8s %7s  %s\n", "variant",
					"ranks", "Mops/s", "eff", "cpueff", "p50", "p99", "max",
					"wr-op/s", "wr-wait", extra);
			header = true;
		}
		snprintf(t, sizeof(t), "%.3f", p->ops_per_sec / 1e6);
		snprintf(e, sizeof(e), isnan(p->efficiency) ? "-" : "%.3f", p->efficiency);
		snprintf(p50, sizeof(p50), "%.0f", p->p50_ns);
		snprintf(p99, sizeof(p99), "%.0f", p->p99_ns);
		snprintf(mx, sizeof(mx), "%.0f", p->max_ns);
		snprintf(w, sizeof(w), isnan(p->writer_ops_per_sec) ? "-" : "%.0f",
				p->writer_ops_per_sec);
		if (isnan(p->writer_max_wait_ns))
			snprintf(ww, sizeof(ww), "-");
		else
			snprintf(ww, sizeof(ww), "%.0fu", p->writer_max_wait_ns / 1e3);
		if (!isnan(p->max_overshoot))
			snprintf(x, sizeof(x), "%.0f / %.0f", p->max_overshoot, p->overshoot_bound);
		else if (!isnan(p->max_error))
			snprintf(x, sizeof(x), "%.0f / %.0f", p->max_error, p->error_bound);
		else
			x[0] = 0;
		snprintf(ce, sizeof(ce), isnan(p->cpu_efficiency) ? "-" : "%.3f",
				p->cpu_efficiency);
		printf("  %-14s %5d %9s %6s %6s %7s %7s %7s %8s %7s  %s  (%s)\n", p->variant,
				p->ranks, t, e, ce, p50, p99, mx, w, ww, x, p->note);
	}
}

void stress_print_companions(void)
{
	companion_table("memcg-charge",
			"1-page charges/uncharges through per-rank leaves, shared parent (limit "
			"48/rank) and root; latency ns per call",
			"overshoot / bound (pages)");
	companion_table("mmap-commit",
			"commit + uncommit of 32768 pages per op; latency ns per op; monitor "
			"snapshot every --write-interval",
			"max |approx-exact| / bound (pages)");
	companion_table("css-walk",
			"one op = a get_next walk over ~1000 ids in one read section; writers "
			"remove + alloc + replace",
			"");
}
