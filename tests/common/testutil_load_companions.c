// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The companions' concurrent workloads of testutil.h (ps_charge,
 * ps_pcounter and ps_commit, ps_idmap); testutil_load.c says how a load
 * reports a failed check.
 */
#include "compiler.h"
#include "testutil_load.h"

/* ---- ps_charge ---- */

#define CHARGE_MAX_NR 8

struct charge_worker {
	struct charge_load *cl;
	struct ps_charge *leaf;
	uint64_t seed;
	long held, refused;
};

struct charge_load {
	struct load ld;
	struct ps_test_charge_load *l;
	struct ps_charge *root, *parent;
	int workers_done;
};

static void *charge_worker(void *arg)
{
	struct charge_worker *w = arg;
	struct load *ld = &w->cl->ld;
	long i, nr;

	for (i = 0; load_go_on(ld, i, ld->deadline); i++) {
		nr = 1 + (long)(ps_test_rand(&w->seed) % CHARGE_MAX_NR);
		if (ps_test_rand(&w->seed) % 8 < 5 || w->held < nr) {
			if (!ps_charge_try(w->leaf, nr, NULL))
				w->held += nr;
			else
				w->refused++;
		} else {
			CHECK(ld, ps_charge_uncharge(w->leaf, nr) == 0, "uncharge %ld", nr);
			w->held -= nr;
		}
	}
	PSI_FETCH_ADD(w->cl->workers_done, 1, SEQ_CST);
	return NULL;
}

/* @c's field @f, which is never negative. */
static long charge_rd(struct charge_load *cl, const struct ps_charge *c, enum ps_charge_field f)
{
	long v = ps_charge_read(c, f);

	CHECK(&cl->ld, v >= 0, "read field %d: %ld", (int)f, v);
	return v;
}

/* Reads usage while charges run: never above limit + bound (bound 0 for SPIN/SEQLOCK). */
static void *charge_monitor(void *arg)
{
	struct charge_load *cl = arg;
	struct ps_charge *watch[2] = { cl->root, cl->parent };
	struct ps_charge_stat st;
	long bound = cl->l->bound, max_seen = 0;
	int i;

	while (!load_stopped(&cl->ld)) {
		for (i = 0; i < 2 && watch[i]; i++) {
			charge_rd(cl, watch[i], PS_CHARGE_USAGE);
			CHECK(&cl->ld, ps_charge_stat(watch[i], &st) == 0, "stat");
			CHECK(&cl->ld, st.usage <= st.limit + bound,
					"usage %ld limit %ld bound %ld", st.usage, st.limit, bound);
			if (st.usage - st.limit > max_seen)
				max_seen = st.usage - st.limit;
		}
		sched_yield();
	}
	cl->l->max_seen = max_seen;
	return NULL;
}

/*
 * The root's limit to lo and hi in turn: @limit_rounds times, on while the
 * workers charge, then two rounds (lo and hi) that start once every worker
 * is done.  Under load every round can fail (a worker preempted between
 * its add and its undo holds usage above any limit for a time slice), so
 * only the calm rounds make a success certain.
 */
static void charge_limits(struct charge_load *cl)
{
	const struct ps_test_charge_load *l = cl->l;
	struct ps_charge_stat st;
	long i, calm = 0;

	if (!l->limit_rounds)
		return;
	for (i = 0; i < l->limit_rounds || calm < 2; i++) {
		bool done = PSI_LOAD_SEQ_CST(cl->workers_done) == l->workers;
		int r = ps_charge_set_limit(cl->root, (i & 1) ? l->limit_hi : l->limit_lo);

		calm += done;
		CHECK(&cl->ld, r == 0 || r == -EBUSY, "set_limit: %d", r);
		cl->l->limit_ok += r == 0;
		charge_rd(cl, cl->root, PS_CHARGE_USAGE);
		CHECK(&cl->ld, ps_charge_stat(cl->root, &st) == 0, "stat");
		CHECK(&cl->ld, ps_charge_drain_stock(cl->root) == 0, "drain");
	}
}

static struct ps_charge *charge_mk(enum ps_charge_kind kind, struct ps_charge *parent, long limit)
{
	struct ps_charge *c = ps_charge_create(kind, parent, limit);

	TCHECK(c, "ps_charge_create: %s", strerror(errno));
	return c;
}

int ps_test_charge_run(struct ps_test_charge_load *l)
{
	struct charge_load cl = { .l = l };
	struct charge_worker *w = xcalloc((size_t)l->workers, sizeof(*w));
	pthread_t *t = xcalloc((size_t)l->workers, sizeof(*t)), mon;
	bool fixed = !l->limit_rounds;
	long sum = 0, ov;
	int i;

	load_init(&cl.ld, &l->run);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cl.workers_done, sizeof(cl.workers_done)); /* atomics only */
	cl.root = charge_mk(l->kind, NULL, l->root_limit);
	cl.parent = l->parent_limit ? charge_mk(l->kind, cl.root, l->parent_limit) : NULL;
	l->bound = ps_charge_overshoot_bound(l->kind, l->workers, CHARGE_MAX_NR,
			ps_charge_stock_batch(cl.parent ? cl.parent : cl.root));
	l->limit_ok = 0;
	l->max_seen = 0;
	for (i = 0; i < l->workers; i++)
		w[i] = (struct charge_worker){ .cl = &cl, .seed = ps_test_seed(l->run.seed, i),
			.leaf = charge_mk(l->kind, cl.parent ? cl.parent : cl.root,
					l->leaf_limit) };
	if (l->monitor)
		ps_test_spawn(&mon, 1, charge_monitor, &cl, 0);
	for (i = 0; i < l->workers; i++)
		ps_test_spawn(&t[i], 1, charge_worker, &w[i], 0);
	charge_limits(&cl);
	ps_test_join(t, l->workers);
	PSI_STORE_SEQ_CST(cl.ld.stop, true);
	if (l->monitor)
		ps_test_join(&mon, 1);
	if (!fixed) {
		CHECK(&cl.ld, ps_charge_set_limit(cl.root, l->root_limit) == 0, "limit back");
		CHECK(&cl.ld, l->limit_ok > 0, "no limit change succeeded");
	}

	/* Quiescent: exact at every level once the stocks are back. */
	CHECK(&cl.ld, ps_charge_drain_stock(cl.root) == 0, "drain");
	for (i = 0; i < l->workers; i++) {
		CHECK(&cl.ld, charge_rd(&cl, w[i].leaf, PS_CHARGE_USAGE) == w[i].held,
				"leaf %d: usage %ld, holds %ld", i,
				ps_charge_read(w[i].leaf, PS_CHARGE_USAGE), w[i].held);
		CHECK(&cl.ld, l->leaf_limit >= PS_CHARGE_MAX ||
				charge_rd(&cl, w[i].leaf, PS_CHARGE_MAX_USAGE) <=
						l->leaf_limit + l->bound,
				"leaf %d above its limit + bound", i);
		CHECK(&cl.ld, !l->expect_refusals || w[i].refused > 0,
				"worker %d: the limits were never hit", i);
		sum += w[i].held;
	}
	if (cl.parent)
		CHECK(&cl.ld, charge_rd(&cl, cl.parent, PS_CHARGE_USAGE) == sum, "parent usage");
	CHECK(&cl.ld, charge_rd(&cl, cl.root, PS_CHARGE_USAGE) == sum, "root usage");
	ov = charge_rd(&cl, cl.root, PS_CHARGE_MAX_OVERSHOOT);
	if (cl.parent && charge_rd(&cl, cl.parent, PS_CHARGE_MAX_OVERSHOOT) > ov)
		ov = charge_rd(&cl, cl.parent, PS_CHARGE_MAX_OVERSHOOT);
	l->overshoot = ov;
	if (fixed) {
		CHECK(&cl.ld, ov <= l->bound, "%s: overshoot %ld above the bound %ld",
				ps_charge_kind_name(l->kind), ov, l->bound);
		if (l->kind == PS_CHARGE_SPIN || l->kind == PS_CHARGE_SEQLOCK) {
			CHECK(&cl.ld, ov == 0, "%s: overshoot %ld", ps_charge_kind_name(l->kind),
					ov);
			CHECK(&cl.ld, !cl.parent ||
					charge_rd(&cl, cl.parent, PS_CHARGE_MAX_USAGE) <=
							l->parent_limit,
					"parent above its limit");
			CHECK(&cl.ld, charge_rd(&cl, cl.root, PS_CHARGE_MAX_USAGE) <= l->root_limit,
					"root above its limit");
		}
	}

	for (i = 0; i < l->workers; i++) {
		CHECK(&cl.ld, ps_charge_uncharge(w[i].leaf, w[i].held) == 0, "uncharge leaf %d", i);
		CHECK(&cl.ld, ps_charge_destroy(w[i].leaf) == 0, "destroy leaf %d", i);
	}
	CHECK(&cl.ld, charge_rd(&cl, cl.root, PS_CHARGE_USAGE) == 0, "usage left at the root");
	CHECK(&cl.ld, !cl.parent || ps_charge_destroy(cl.parent) == 0, "destroy parent");
	CHECK(&cl.ld, ps_charge_destroy(cl.root) == 0, "destroy root");
	free(t);
	free(w);
	return load_done(&cl.ld);
}

/* ---- ps_pcounter and ps_commit ---- */

struct counter_worker {
	struct counter_load *cl;
	uint64_t seed;
	int64_t total; /* pcounter: the deltas added; commit: the pages kept */
	long refused;
};

struct counter_load {
	struct load ld;
	struct ps_test_pcounter_load *pl;
	struct ps_test_commit_load *cm;
	int nthreads;
};

static void *pcounter_adder(void *arg)
{
	struct counter_worker *a = arg;
	struct ps_pcounter *pc = a->cl->pl->pc;
	int32_t batch = ps_pcounter_batch(pc);
	int64_t d;
	long i;

	for (i = 0; load_go_on(&a->cl->ld, i, a->cl->ld.deadline); i++) {
		uint64_t r = ps_test_rand(&a->seed);

		/* Mostly small steps with an upward drift, sometimes a whole mapping. */
		if (r % 64 == 0)
			d = (int64_t)(r >> 40) % (4 * (int64_t)batch) - 2 * (int64_t)batch;
		else
			d = (int64_t)(r % 7) - 2;
		CHECK(&a->cl->ld, ps_pcounter_add(pc, d) == 0, "add %lld", (long long)d);
		a->total += d;
	}
	return NULL;
}

/* Snapshots (their error bounds checked, or beside batch changes and folds) until stopped. */
static void *pcounter_observer(void *arg)
{
	struct counter_load *cl = arg;
	struct ps_test_pcounter_load *l = cl->pl;
	struct ps_pcounter_snapshot s;
	int64_t err, bound;
	long i;

	for (i = 0; !load_stopped(&cl->ld); i++) {
		CHECK(&cl->ld, ps_pcounter_snapshot(l->pc, &s) == 0, "snapshot");
		if (l->admin) {
			(void)ps_pcounter_read(l->pc);
			(void)ps_pcounter_sum(l->pc);
			CHECK(&cl->ld, ps_pcounter_set_batch(l->pc, i & 1 ? 4 : 32) == 0,
					"set_batch");
			CHECK(&cl->ld, ps_pcounter_fold(l->pc) == 0, "fold");
		}
		if (!l->check_bound)
			continue;
		err = s.approx > s.exact ? s.approx - s.exact : s.exact - s.approx;
		bound = ps_pcounter_error_bound(s.batch, l->adders);
		CHECK(&cl->ld, err <= s.bound, "|%lld - %lld| > batch %d x %d deltas",
				(long long)s.approx, (long long)s.exact, s.batch, s.nr_deltas);
		CHECK(&cl->ld, s.nr_deltas <= l->adders, "%d deltas", s.nr_deltas);
		CHECK(&cl->ld, err <= bound, "error %lld above bound %lld", (long long)err,
				(long long)bound);
		if (err > l->max_err)
			l->max_err = err;
		if (++l->snapshots % 64 == 0)
			sched_yield();
	}
	return NULL;
}

/* Like will-it-scale mmap1: commit a mapping, give it back, again. */
static void *commit_worker(void *arg)
{
	struct counter_worker *c = arg;
	struct ps_test_commit_load *l = c->cl->cm;
	long i;

	for (i = 0; load_go_on(&c->cl->ld, i, c->cl->ld.deadline); i++) {
		if (!ps_commit_charge(l->cm, l->pages)) {
			c->total += l->pages;
			if (i % 3)
				continue;
		} else {
			c->refused++;
		}
		if (c->total) {
			CHECK(&c->cl->ld, ps_commit_uncharge(l->cm, l->pages) == 0, "uncharge");
			c->total -= l->pages;
		}
	}
	return NULL;
}

static void *commit_admin(void *arg)
{
	struct counter_load *cl = arg;
	long i;

	for (i = 0; !load_stopped(&cl->ld); i++) {
		CHECK(&cl->ld, ps_commit_set_mode(cl->cm->cm, (enum ps_overcommit)(i % 3)) == 0,
				"set_mode");
		(void)ps_commit_committed(cl->cm->cm, i & 1);
	}
	return NULL;
}

/* @n workers running @fn beside @observer (NULL: none); their results in @w. */
static void counter_threads(struct counter_load *cl, struct counter_worker *w, int n,
		void *(*fn)(void *), void *(*observer)(void *))
{
	pthread_t *t = xcalloc((size_t)n, sizeof(*t)), obs;
	int i;

	for (i = 0; i < n; i++)
		w[i] = (struct counter_worker){ .cl = cl,
			.seed = ps_test_seed(cl->ld.run->seed, i) };
	if (observer)
		ps_test_spawn(&obs, 1, observer, cl, 0);
	ps_test_spawn(t, n, fn, w, sizeof(*w));
	ps_test_join(t, n);
	PSI_STORE_SEQ_CST(cl->ld.stop, true);
	if (observer)
		ps_test_join(&obs, 1);
	free(t);
}

int ps_test_pcounter_run(struct ps_test_pcounter_load *l)
{
	struct counter_load cl = { .pl = l };
	struct counter_worker *a = xcalloc((size_t)l->adders, sizeof(*a));
	int64_t first = ps_pcounter_sum(l->pc), read;
	int i;

	load_init(&cl.ld, &l->run);
	l->total = 0;
	l->snapshots = 0;
	l->max_err = 0;
	counter_threads(&cl, a, l->adders, pcounter_adder,
			l->check_bound || l->admin ? pcounter_observer : NULL);
	for (i = 0; i < l->adders; i++)
		l->total += a[i].total;
	CHECK(&cl.ld, ps_pcounter_threads(l->pc) == l->adders, "%d delta slots for %d adders",
			ps_pcounter_threads(l->pc), l->adders);
	CHECK(&cl.ld, ps_pcounter_sum(l->pc) == first + l->total, "sum %lld, added %lld to %lld",
			(long long)ps_pcounter_sum(l->pc), (long long)l->total, (long long)first);
	read = ps_pcounter_read(l->pc);
	CHECK(&cl.ld, !l->check_bound || llabs((long long)(read - first - l->total)) <=
			ps_pcounter_error_bound(ps_pcounter_batch(l->pc), l->adders),
			"read %lld, exact %lld", (long long)read, (long long)(first + l->total));
	free(a);
	return load_done(&cl.ld);
}

int ps_test_commit_run(struct ps_test_commit_load *l)
{
	struct counter_load cl = { .cm = l };
	struct counter_worker *c = xcalloc((size_t)l->committers, sizeof(*c));
	int i;

	load_init(&cl.ld, &l->run);
	l->held = 0;
	l->refused = 0;
	counter_threads(&cl, c, l->committers, commit_worker, l->admin ? commit_admin : NULL);
	for (i = 0; i < l->committers; i++) {
		l->held += c[i].total;
		l->refused += c[i].refused;
	}
	CHECK(&cl.ld, ps_commit_committed(l->cm, true) == l->held, "committed %lld, kept %lld",
			(long long)ps_commit_committed(l->cm, true), (long long)l->held);
	free(c);
	return load_done(&cl.ld);
}

/* ---- ps_idmap ---- */

#define OBJ_LIVE 0x11ce11ceu
#define OBJ_DEAD 0xdeadbeefu

struct obj {
	unsigned magic;
	int id;
};

/* Bound while its owner learns the id; then replaced by the real object. */
static struct obj reserved = { OBJ_LIVE, -1 };

static void obj_free(void *p)
{
	struct obj *o = p;

	o->magic = OBJ_DEAD; /* a write: a reader still using it races with this */
	free(o);
}

struct idmap_load {
	struct load ld;
	struct ps_test_idmap_load *l;
	struct ps_idmap *map;
	long reads;
	int walkers_started; /* mutators begin once every walker runs */
};

/* @o, found at @id, is live and says @id. */
static void idmap_expect(struct idmap_load *il, const struct obj *o, int id)
{
	CHECK(&il->ld, o->magic == OBJ_LIVE, "object %d freed under a reader", id);
	CHECK(&il->ld, o == &reserved || o->id == id, "object %d found at %d", o->id, id);
}

/* One walk, one section per step, as a long walk should. */
static long idmap_walk_steps(struct idmap_load *il)
{
	struct obj *o, *f;
	long reads = 0;
	int id, prev;

	for (id = 0, prev = -1;; id++) {
		ps_idmap_read_lock(il->map);
		o = ps_idmap_get_next(il->map, &id);
		if (o) {
			idmap_expect(il, o, id);
			CHECK(&il->ld, id > prev, "walk went back from %d to %d", prev, id);
			/* One find: under RCU a second one may see a later remove. */
			f = ps_idmap_find(il->map, id);
			CHECK(&il->ld, f == NULL || f->magic == OBJ_LIVE, "find(%d)", id);
		}
		ps_idmap_read_unlock(il->map);
		if (il->l->slow)
			sched_yield();
		if (!o || id == PS_IDMAP_ID_MAX)
			break;
		prev = id;
		reads++;
	}
	return reads;
}

/* One walk in one section, and a find of a random id. */
static long idmap_walk_whole(struct idmap_load *il, uint64_t *seed)
{
	int id, prev = -1, want = (int)(ps_test_rand(seed) % 600);
	struct obj *o;
	long reads = 0;

	ps_idmap_read_lock(il->map);
	ps_idmap_for_each(il->map, o, id) {
		idmap_expect(il, o, id);
		CHECK(&il->ld, id > prev, "walk went back from %d to %d", prev, id);
		prev = id;
		reads++;
	}
	o = ps_idmap_find(il->map, want);
	if (o)
		idmap_expect(il, o, want);
	ps_idmap_read_unlock(il->map);
	if (il->l->slow)
		sched_yield();
	return reads;
}

static void *idmap_walker(void *arg)
{
	struct idmap_load *il = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long reads = 0, n;

	PSI_FETCH_ADD(il->walkers_started, 1, SEQ_CST);
	/*
	 * Until stopped, and then on until the walker has read something
	 * (mutators leave objects behind), however late it was scheduled.
	 */
	for (n = 0; !load_stopped(&il->ld) || (reads == 0 && n < 1000); n++)
		reads += il->l->whole_walks && (n & 1) ? idmap_walk_whole(il, &seed)
						       : idmap_walk_steps(il);
	PSI_FETCH_ADD(il->reads, reads, SEQ_CST);
	return NULL;
}

static void *idmap_mutator(void *arg)
{
	struct idmap_load *il = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed;
	struct obj *o, *old;
	long i;
	int id;

	/* Mutators overlap walkers (on a loaded machine they could finish first). */
	while (PSI_LOAD_SEQ_CST(il->walkers_started) < il->l->walkers)
		sched_yield();
	for (i = 0; load_go_on(&il->ld, i, il->ld.deadline); i++) {
		uint64_t r = ps_test_rand(&seed);

		if (r % 3) {
			CHECK(&il->ld, ps_idmap_alloc(il->map, &reserved, (int)((r >> 32) % 512),
						INT_MAX, &id) == 0, "alloc");
			o = malloc(sizeof(*o));
			TCHECK(o, "malloc");
			o->magic = OBJ_LIVE;
			o->id = id; /* initialised before replace() publishes it */
			if (ps_idmap_replace(il->map, id, o, (void **)&old)) {
				free(o); /* another writer removed our id meanwhile */
				continue;
			}
			if (old != &reserved)
				CHECK(&il->ld, ps_idmap_free_rcu(il->map, old, obj_free) == 0,
						"free_rcu");
			continue;
		}
		id = (int)((r >> 32) % 600);
		if (ps_idmap_remove(il->map, id, (void **)&old) == 0 && old != &reserved)
			CHECK(&il->ld, ps_idmap_free_rcu(il->map, old, obj_free) == 0, "free_rcu");
	}
	return NULL;
}

int ps_test_idmap_run(struct ps_test_idmap_load *l)
{
	struct idmap_load il = { .l = l };
	pthread_t *t = xcalloc((size_t)(l->walkers + l->mutators), sizeof(*t));
	struct obj *o;
	int id;

	load_init(&il.ld, &l->run);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&il.walkers_started, sizeof(il.walkers_started));
	il.map = ps_idmap_create(l->sync);
	TCHECK(il.map, "ps_idmap_create(%s)", ps_idmap_sync_name(l->sync));
	ps_test_spawn(t, l->walkers, idmap_walker, &il, 0);
	ps_test_spawn(t + l->walkers, l->mutators, idmap_mutator, &il, 0);
	ps_test_join(t + l->walkers, l->mutators);
	PSI_STORE_SEQ_CST(il.ld.stop, true);
	ps_test_join(t, l->walkers);
	l->reads = PSI_LOAD_SEQ_CST(il.reads);
	CHECK(&il.ld, l->walkers == 0 || l->reads > 0, "%s: no object read",
			ps_idmap_sync_name(l->sync));
	/* Free what is left. */
	for (;;) {
		ps_idmap_read_lock(il.map);
		id = 0;
		o = ps_idmap_get_next(il.map, &id);
		ps_idmap_read_unlock(il.map);
		if (!o)
			break;
		CHECK(&il.ld, ps_idmap_remove(il.map, id, NULL) == 0, "remove(%d)", id);
		if (o != &reserved)
			CHECK(&il.ld, ps_idmap_free_rcu(il.map, o, obj_free) == 0, "free_rcu");
	}
	CHECK(&il.ld, ps_idmap_count(il.map) == 0, "%d ids left", ps_idmap_count(il.map));
	ps_idmap_destroy(il.map);
	free(t);
	return load_done(&il.ld);
}
