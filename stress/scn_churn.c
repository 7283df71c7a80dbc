// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The churn scenario of polstore-stress: N ranges over a page space,
 * readers looking up uniform random pages (one read section per lookup),
 * one writer removing a random range and inserting another into a free
 * place, flat out.  It measures polstore's store variants through the
 * public API and any range map loaded as a plugin (--peer PATH.so, the
 * ABI of peer.h) with the same code, so their figures compare.
 *
 * The page space is 2N slots of L pages (a power of two); N of them hold
 * one range each, a random sub-range of the slot.  Values come from a pool
 * of polstore policies: the slots of colour c (slot % K) only ever hold
 * policy 2c or 2c + 1, so every result can be checked without a lock.
 * docs/peers.md describes the rows, the checks and the plugin ABI.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "churn.h"
#include "compiler.h"
#include "peer.h"
#include "stress.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- values: a pool of policies, and which slots may hold each -------------------------- */

#define MAX_COLOURS 4096 /* a power of two: a slot's colour is a mask away */

static struct {
	struct ps_policy **pol; /* [colour * 2 + alt] */
	uint32_t ncolours;	/* a power of two */
	uintptr_t *key;		/* open addressing: policy -> its index in pol */
	uint32_t *id;
	unsigned shift; /* 64 - log2(table size) */
} pool;

static inline size_t pool_hash(uintptr_t v)
{
	return (size_t)(((uint64_t)v * 0x9E3779B97F4A7C15ULL) >> pool.shift);
}

/* The index of @v in the pool, or -1 when @v is no pool policy. */
static inline long pool_id(uintptr_t v)
{
	size_t mask = ((size_t)1 << (64 - pool.shift)) - 1, i;

	for (i = pool_hash(v);; i = (i + 1) & mask) {
		if (pool.key[i] == v)
			return pool.id[i];
		if (!pool.key[i])
			return -1;
	}
}

static void pool_create(uint32_t ncolours)
{
	unsigned bits = 1;
	uint32_t i, n = ncolours * 2;

	while (((size_t)1 << bits) < (size_t)n * 4)
		bits++;
	pool.ncolours = ncolours;
	pool.shift = 64 - bits;
	pool.pol = calloc(n, sizeof(*pool.pol));
	pool.key = calloc((size_t)1 << bits, sizeof(*pool.key));
	pool.id = calloc((size_t)1 << bits, sizeof(*pool.id));
	if (!pool.pol || !pool.key || !pool.id)
		stress_die("out of memory for the policy pool");
	for (i = 0; i < n; i++) {
		unsigned long mask = 1UL << (i / 2 % 64);
		size_t h, m = ((size_t)1 << bits) - 1;

		pool.pol[i] = ps_policy_create(
				i & 1 ? PS_MPOL_INTERLEAVE : PS_MPOL_BIND, 0, &mask, 64);
		if (!pool.pol[i])
			stress_die("ps_policy_create: %s", strerror(errno));
		for (h = pool_hash((uintptr_t)pool.pol[i]); pool.key[h]; h = (h + 1) & m)
			;
		pool.key[h] = (uintptr_t)pool.pol[i];
		pool.id[h] = i;
	}
}

static void pool_destroy(void)
{
	uint32_t i;

	for (i = 0; i < pool.ncolours * 2; i++)
		ps_policy_put(pool.pol[i]);
	free(pool.pol);
	free(pool.key);
	free(pool.id);
	memset(&pool, 0, sizeof(pool));
}

/* ---- one point: the model, the threads and the checks ------------------------------------- */

/*
 * The model of one slot.  The writer alone writes it; exact checks read it
 * under the sequence count: odd while the writer changes the slot in the
 * map, so a reader that saw the same even count before and after its
 * lookup knows the slot's state for the whole lookup.
 */
struct slot {
	uint64_t start, end; /* end == 0: the slot holds no range */
	uintptr_t value;
	uint32_t seq;
	uint32_t alt; /* writer only: the slot's next value is pol[colour * 2 + alt] */
};

/*
 * A point's shared state.  Readers read only the first cache line; the
 * writer's own fields start on the next, so that its stores do not move a
 * line every reader needs.
 */
struct point {
	const struct churn_map *m;
	void *map;
	struct slot *slots;
	uint64_t nslots; /* 2N */
	unsigned shift;	 /* log2 of the pages per slot */
	uint64_t pages;	 /* nslots << shift */
	bool exact;
	/* The writer's (and the build's): */
	uint32_t *list __attribute__((aligned(64))); /* full slots in [0, nfull), then empty */
	uint32_t *where;			     /* a slot's position in list */
	uint64_t nfull;
	uint64_t rng;
	uint64_t swept; /* lookups the sweeps checked */
	struct stress_gate gate;
	int stop __attribute__((aligned(64))); /* read by every thread, written once */
	char pad[60];
};

struct worker {
	struct point *pt;
	pthread_t th;
	uint64_t seed;
	uint64_t ops, checked;
	uint64_t cpu_ns;
} __attribute__((aligned(64)));

static inline uint64_t slot_lo(const struct point *pt, uint64_t s)
{
	return s << pt->shift;
}

static inline uint32_t slot_colour(uint64_t s)
{
	return (uint32_t)(s & (pool.ncolours - 1));
}

/* What a lookup reported, as far as the map reports it. */
static void describe_hit(char *buf, size_t n, uint32_t flags, const struct ps_peer_hit *hit)
{
	if (!(flags & PS_PEER_BOUNDS))
		snprintf(buf, n, "a range of value %#llx", (unsigned long long)hit->value);
	else if (!(flags & PS_PEER_VALUE))
		snprintf(buf, n, "[%llu, %llu)", (unsigned long long)hit->start,
				(unsigned long long)hit->end);
	else
		snprintf(buf, n, "[%llu, %llu) value %#llx", (unsigned long long)hit->start,
				(unsigned long long)hit->end, (unsigned long long)hit->value);
}

static void __attribute__((noinline, noreturn))
bad_hit(const struct point *pt, uint64_t idx, const struct ps_peer_hit *hit, const char *why)
{
	char got[80];

	describe_hit(got, sizeof(got), pt->m->ops->flags, hit);
	stress_fail("VALIDATION FAILED: churn: %s: lookup of page %llu (slot %llu) found %s: %s",
			pt->m->ops->name, (unsigned long long)idx,
			(unsigned long long)(idx >> pt->shift), got, why);
}

/* What every found range must satisfy: a value of its slot's colour, bounds inside the slot. */
static inline void check_hit(const struct point *pt, uint64_t idx, const struct ps_peer_hit *hit)
{
	uint64_t s = idx >> pt->shift, lo = slot_lo(pt, s);
	uint32_t flags = pt->m->ops->flags;

	if (flags & PS_PEER_VALUE) {
		long id = pool_id(hit->value);

		if (unlikely(id < 0 || (uint32_t)(id / 2) != slot_colour(s)))
			bad_hit(pt, idx, hit,
					id < 0 ? "a value never inserted"
					       : "a value only ever inserted in other slots");
	}
	if ((flags & PS_PEER_BOUNDS) &&
			unlikely(hit->start > idx || idx >= hit->end || hit->start < lo ||
					hit->end > lo + (1ULL << pt->shift)))
		bad_hit(pt, idx, hit, "bounds that do not hold the page inside its slot");
}

/* The slot's state, as exact checks compare it. */
struct state {
	uint64_t start, end;
	uintptr_t value;
};

static inline struct state slot_state(const struct slot *sl)
{
	struct state st = {PSI_READ_ONCE(sl->start),
			PSI_READ_ONCE(sl->end),
			PSI_READ_ONCE(sl->value)};

	return st;
}

static void __attribute__((noinline, noreturn)) bad_exact(const struct point *pt, uint64_t idx,
		const struct state *st, bool found, const struct ps_peer_hit *hit)
{
	const char *name = pt->m->ops->name;
	unsigned long long s = idx >> pt->shift;
	char held[80], got[80];

	if (st->end)
		snprintf(held, sizeof(held), "[%llu, %llu) value %#llx",
				(unsigned long long)st->start, (unsigned long long)st->end,
				(unsigned long long)st->value);
	else
		snprintf(held, sizeof(held), "no range");
	if (found)
		describe_hit(got, sizeof(got), pt->m->ops->flags, hit);
	else
		snprintf(got, sizeof(got), "nothing");
	stress_fail("VALIDATION FAILED: churn: %s: lookup of page %llu found %s, but its slot "
		    "%llu held %s for the whole lookup",
			name, (unsigned long long)idx, got, s, held);
}

/* A lookup of @idx that ran while its slot was @st must have found exactly that. */
static inline void check_exact(const struct point *pt, uint64_t idx, const struct state *st,
		bool found, const struct ps_peer_hit *hit)
{
	bool want = st->end && st->start <= idx && idx < st->end;
	uint32_t flags = pt->m->ops->flags;

	if (unlikely(found != want))
		bad_exact(pt, idx, st, found, hit);
	if (found && (((flags & PS_PEER_VALUE) && hit->value != st->value) ||
				     ((flags & PS_PEER_BOUNDS) &&
						     (hit->start != st->start ||
								     hit->end != st->end))))
		bad_exact(pt, idx, st, found, hit);
}

/* One lookup in its own section. */
static inline bool lookup(const struct point *pt, uint64_t idx, struct ps_peer_hit *hit)
{
	const struct ps_peer_ops *o = pt->m->ops;
	bool found;

	o->read_enter(pt->map);
	found = o->lookup(pt->map, idx, hit);
	o->read_exit(pt->map);
	return found;
}

static void probe(struct point *pt, uint64_t idx, const struct state *st)
{
	struct ps_peer_hit hit = {0, 0, 0};

	check_exact(pt, idx, st, lookup(pt, idx, &hit), &hit);
	pt->swept++;
}

/*
 * Every slot against the model, with no writer running: the first and last
 * page of each range, the pages just outside it, both ends of each empty
 * slot.  Misses, which the readers' checks cannot see, show here.
 */
static void sweep(struct point *pt)
{
	const struct ps_peer_ops *o = pt->m->ops;
	uint64_t s;

	for (s = 0; s < pt->nslots; s++) {
		struct state st = slot_state(&pt->slots[s]);
		uint64_t lo = slot_lo(pt, s), hi = lo + (1ULL << pt->shift);

		if (st.end) {
			probe(pt, st.start, &st);
			probe(pt, st.end - 1, &st);
			if (st.start > lo)
				probe(pt, st.start - 1, &st);
			if (st.end < hi)
				probe(pt, st.end, &st);
		} else {
			probe(pt, lo, &st);
			probe(pt, hi - 1, &st);
		}
		if (o->quiescent && !(s & 255))
			o->quiescent(pt->map);
	}
}

/* The writer's changes of a slot, between the two steps of its sequence count. */
static inline void slot_begin(struct slot *sl)
{
	PSI_WRITE_ONCE(sl->seq, sl->seq + 1);
	/* The odd count is visible before the change can be: pairs with check_reader()'s fence. */
	PSI_FENCE(RELEASE);
}

static inline void slot_finish(struct slot *sl, uint64_t start, uint64_t end, uintptr_t value)
{
	PSI_WRITE_ONCE(sl->start, start);
	PSI_WRITE_ONCE(sl->end, end);
	PSI_WRITE_ONCE(sl->value, value);
	/* The change and the new state before the even count: pairs with the reader's acquire. */
	PSI_STORE_RELEASE(sl->seq, sl->seq + 1);
}

static inline void list_swap(struct point *pt, uint64_t i, uint64_t j)
{
	uint32_t a = pt->list[i], b = pt->list[j];

	pt->list[i] = b;
	pt->list[j] = a;
	pt->where[b] = (uint32_t)i;
	pt->where[a] = (uint32_t)j;
}

/* Put a new range into the empty slot at position @j of the list. */
static void fill_slot(struct point *pt, uint64_t j)
{
	uint32_t s = pt->list[j];
	struct slot *sl = &pt->slots[s];
	uint64_t len = 1ULL << pt->shift, q = len / 4, lo = slot_lo(pt, s);
	uint64_t start = lo + stress_below(&pt->rng, q + 1);
	uint64_t end = lo + len - stress_below(&pt->rng, q + 1);
	uintptr_t value = (uintptr_t)pool.pol[slot_colour(s) * 2 + sl->alt];
	int ret;

	sl->alt ^= 1;
	slot_begin(sl);
	ret = pt->m->ops->insert(pt->map, start, end, value);
	if (ret)
		stress_die("churn: %s: insert [%llu, %llu): %s", pt->m->ops->name,
				(unsigned long long)start, (unsigned long long)end, strerror(-ret));
	slot_finish(sl, start, end, value);
	list_swap(pt, j, pt->nfull);
	pt->nfull++;
}

/* One writer op: remove a random range, insert one into a random empty slot. */
static void churn_step(struct point *pt)
{
	uint64_t i = stress_below(&pt->rng, pt->nfull);
	struct slot *sl = &pt->slots[pt->list[i]];
	int ret;

	slot_begin(sl);
	ret = pt->m->ops->remove(pt->map, sl->start, sl->end);
	if (ret)
		stress_die("churn: %s: remove [%llu, %llu): %s", pt->m->ops->name,
				(unsigned long long)sl->start, (unsigned long long)sl->end,
				strerror(-ret));
	slot_finish(sl, 0, 0, 0);
	list_swap(pt, i, pt->nfull - 1);
	pt->nfull--;
	fill_slot(pt, pt->nfull + stress_below(&pt->rng, pt->nslots - pt->nfull));
}

static void *writer_main(void *arg)
{
	struct worker *w = arg;
	struct point *pt = w->pt;
	const struct ps_peer_ops *o = pt->m->ops;
	uint64_t cpu0, ops = 0;

	if (o->thread_register)
		o->thread_register();
	stress_gate_wait(&pt->gate);
	cpu0 = stress_thread_cpu_ns();
	while (!PSI_READ_ONCE(pt->stop)) {
		churn_step(pt);
		if (o->quiescent)
			o->quiescent(pt->map);
		ops++;
	}
	w->cpu_ns = stress_thread_cpu_ns() - cpu0;
	w->ops = ops;
	if (o->thread_unregister)
		o->thread_unregister();
	return NULL;
}

/* The measured reader: the cheap checks on every range found. */
static void reader_loop(struct worker *w)
{
	struct point *pt = w->pt;
	const struct ps_peer_ops *o = pt->m->ops;
	bool (*lk)(void *, uint64_t, struct ps_peer_hit *) = o->lookup;
	void (*enter)(void *) = o->read_enter, (*leave)(void *) = o->read_exit;
	void (*qs)(void *) = o->quiescent;
	void *map = pt->map;
	uint64_t rng = w->seed, ops = 0, pages = pt->pages;
	struct ps_peer_hit hit = {0, 0, 0};

	while (!PSI_READ_ONCE(pt->stop)) {
		uint64_t idx = stress_below(&rng, pages);
		bool found;

		enter(map);
		found = lk(map, idx, &hit);
		leave(map);
		if (found)
			check_hit(pt, idx, &hit);
		if (qs)
			qs(map);
		ops++;
	}
	w->ops = ops;
}

/* The validating reader: every lookup whose slot did not change meanwhile checked exactly. */
static void check_reader(struct worker *w)
{
	struct point *pt = w->pt;
	const struct ps_peer_ops *o = pt->m->ops;
	uint64_t rng = w->seed, ops = 0;
	struct ps_peer_hit hit = {0, 0, 0};

	while (!PSI_READ_ONCE(pt->stop)) {
		uint64_t idx = stress_below(&rng, pt->pages);
		struct slot *sl = &pt->slots[idx >> pt->shift];
		uint32_t seq = PSI_LOAD_ACQUIRE(sl->seq);
		struct state st = slot_state(sl);
		bool found = lookup(pt, idx, &hit);

		/* The lookup's loads come before the count's second load (see slot_begin()). */
		PSI_FENCE(ACQUIRE);
		if (found)
			check_hit(pt, idx, &hit);
		if (!(seq & 1) && PSI_READ_ONCE(sl->seq) == seq) {
			check_exact(pt, idx, &st, found, &hit);
			w->checked++;
		}
		if (o->quiescent)
			o->quiescent(pt->map);
		ops++;
	}
	w->ops = ops;
}

static void *reader_main(void *arg)
{
	struct worker *w = arg;
	struct point *pt = w->pt;
	const struct ps_peer_ops *o = pt->m->ops;
	uint64_t cpu0;

	if (o->thread_register)
		o->thread_register();
	stress_gate_wait(&pt->gate);
	cpu0 = stress_thread_cpu_ns();
	if (pt->exact)
		check_reader(w);
	else
		reader_loop(w);
	w->cpu_ns = stress_thread_cpu_ns() - cpu0;
	if (o->thread_unregister)
		o->thread_unregister();
	return NULL;
}

/* Build the map: N random slots of the 2N, in random order; then sweep it. */
static void *build_main(void *arg)
{
	struct point *pt = arg;
	const struct ps_peer_ops *o = pt->m->ops;
	uint64_t n = pt->nslots / 2, k;

	if (o->thread_register)
		o->thread_register();
	pt->map = pt->m->sync >= 0 ? ps_store_create((enum ps_sync)pt->m->sync) : o->create();
	if (!pt->map)
		stress_die("churn: %s: create failed: %s", o->name, strerror(errno));
	for (k = 0; k < n; k++) {
		fill_slot(pt, pt->nfull + stress_below(&pt->rng, pt->nslots - pt->nfull));
		if (o->quiescent && !(k & 255))
			o->quiescent(pt->map);
	}
	sweep(pt);
	if (o->thread_unregister)
		o->thread_unregister();
	return NULL;
}

/* After the point: sweep, the map's own check, destroy. */
static void *teardown_main(void *arg)
{
	struct point *pt = arg;
	const struct ps_peer_ops *o = pt->m->ops;
	const char *why = "?";

	if (o->thread_register)
		o->thread_register();
	sweep(pt);
	if (o->check && o->check(pt->map, &why))
		stress_fail("VALIDATION FAILED: churn: %s: its own check: %s", o->name, why);
	o->destroy(pt->map);
	pt->map = NULL;
	if (o->thread_unregister)
		o->thread_unregister();
	return NULL;
}

static void run_alone(void *(*fn)(void *), struct point *pt)
{
	pthread_t t;

	stress_thread_start(&t, fn, pt);
	pthread_join(t, NULL);
}

/* What one repetition of one row measured for one map. */
struct result {
	double reader_ops_s, writer_ops_s, cpus, duration_s;
	double gp_per_sec, inflight_peak; /* the reclaim threads (gp.c) */
	double huge_share; /* of the index's chunks, at the end (stress_huge_share()) */
	uint64_t reader_ops;
	uint64_t checked, swept; /* lookups compared with the model: by readers, by the sweeps */
};

/*
 * One point: @nreaders readers and @nwriters (0 or 1) writer on a fresh
 * map of @n ranges built from @seed, for @seconds; @exact: the validating
 * readers.  Returns what it measured.
 */
static struct result run_point(const struct churn_map *m, uint64_t n, unsigned shift, uint64_t seed,
		int nreaders, int nwriters, double seconds, bool exact)
{
	struct point *pt = aligned_alloc(64, sizeof(*pt));
	int nthreads = nreaders + nwriters, i;
	struct worker *w = aligned_alloc(64, sizeof(*w) * (size_t)(nthreads ? nthreads : 1));
	struct result r = {NAN, NAN, 0, 0, 0, 0, NAN, 0, 0, 0};
	uint64_t s, t_go, t_stop, rops = 0, wops = 0, cpu = 0;
	size_t advised0, huge0;
	struct stress_gp_mark gm;

	if (!pt || !w)
		stress_die("out of memory");
	memset(pt, 0, sizeof(*pt));
	memset(w, 0, sizeof(*w) * (size_t)(nthreads ? nthreads : 1));
	pt->m = m;
	pt->nslots = 2 * n;
	pt->shift = shift;
	pt->pages = pt->nslots << shift;
	pt->rng = seed;
	pt->exact = exact;
	pt->slots = calloc(pt->nslots, sizeof(*pt->slots));
	pt->list = malloc(pt->nslots * sizeof(*pt->list));
	pt->where = malloc(pt->nslots * sizeof(*pt->where));
	if (!pt->slots || !pt->list || !pt->where)
		stress_die("out of memory for %llu slots", (unsigned long long)pt->nslots);
	for (s = 0; s < pt->nslots; s++)
		pt->list[s] = pt->where[s] = (uint32_t)s;
	stress_gate_init(&pt->gate);
	stress_huge_bytes(&advised0, &huge0);
	run_alone(build_main, pt);

	for (i = 0; i < nthreads; i++) {
		w[i].pt = pt;
		w[i].seed = stress_seed_for(seed, 1 + (uint64_t)i);
		stress_thread_start(&w[i].th, i < nreaders ? reader_main : writer_main, &w[i]);
	}
	stress_gp_mark(&gm);
	t_go = stress_gate_open(&pt->gate, nthreads);
	stress_sleep_until(t_go + (uint64_t)(seconds * 1e9));
	PSI_WRITE_ONCE(pt->stop, 1);
	t_stop = stress_now_ns();
	stress_gp_read(&gm, &r.gp_per_sec, &r.inflight_peak);
	for (i = 0; i < nthreads; i++) {
		pthread_join(w[i].th, NULL);
		if (i < nreaders)
			rops += w[i].ops;
		else
			wops += w[i].ops;
		r.checked += w[i].checked;
		cpu += w[i].cpu_ns;
	}
	r.duration_s = (double)(t_stop - t_go) / 1e9;
	r.reader_ops = rops;
	if (nreaders)
		r.reader_ops_s = (double)rops / r.duration_s;
	if (nwriters)
		r.writer_ops_s = (double)wops / r.duration_s;
	r.cpus = (double)cpu / 1e9 / r.duration_s;
	r.huge_share = stress_huge_share(advised0, huge0);

	run_alone(teardown_main, pt);
	r.swept = pt->swept;
	stress_gate_destroy(&pt->gate);
	free(pt->slots);
	free(pt->list);
	free(pt->where);
	free(pt);
	free(w);
	return r;
}

/* ---- the rows, the repetitions and the points emitted ----------------------------------- */

struct row {
	int readers, writers;
};

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of @n values (sorted here), and their spread. */
static double median(double *v, int n, double *lo, double *hi)
{
	qsort(v, (size_t)n, sizeof(*v), dbl_cmp);
	*lo = v[0];
	*hi = v[n - 1];
	return v[n / 2];
}

/* Pages per slot: 16, or from --pages (a power of two, at least 4). */
static unsigned slot_shift(uint64_t n)
{
	uint64_t per = stress_opts.pages_given ? stress_opts.pages / (2 * n) : 16;
	unsigned shift = 2;

	while (shift < 40 && (2ULL << shift) <= per)
		shift++;
	return shift;
}

static void run_size(uint64_t n, const struct row *rows, int nrows)
{
	int reps = stress_opts.repeat, rep, r, k;
	unsigned shift = slot_shift(n);
	struct result *res = calloc((size_t)nrows * churn_nmaps * (size_t)reps, sizeof(*res));
	uint64_t *checked = calloc(churn_nmaps, sizeof(*checked));
	double *a = calloc((size_t)reps, sizeof(double));
	int vr = stress_opts.ranks[0];
	uint32_t colours;
	size_t m;

	if (!res || !checked || !a)
		stress_die("out of memory");
	for (colours = MAX_COLOURS; colours > 2 * n; colours /= 2)
		;
	pool_create(colours);
	for (k = 0; k < stress_opts.nranks; k++)
		if (stress_opts.ranks[k] > vr)
			vr = stress_opts.ranks[k];
	/*
	 * Validation first: every map, the most readers and the writer, each
	 * lookup whose slot stayed still compared with the model; run again
	 * (10 times at most) while a loaded machine let no reader check one.
	 */
	for (m = 0; m < churn_nmaps; m++) {
		struct result v = {0};
		int tries;

		for (tries = 0; tries < 10 && !v.checked; tries++) {
			v = run_point(&churn_maps[m], n, shift, stress_seed_for(stress_opts.seed, n), vr,
					1, 0.2, true);
			checked[m] += v.checked + v.swept;
		}
		if (!v.checked)
			stress_die("churn: %s, %llu ranges: no reader could check a lookup in 10 "
				   "validation runs (is the machine overloaded?)",
					churn_maps[m].ops->name, (unsigned long long)n);
		stress_progress("churn: %s, %llu ranges: validated, %llu lookups checked exactly "
				"beside the writer",
				churn_maps[m].ops->name, (unsigned long long)n,
				(unsigned long long)v.checked);
	}
	/*
	 * Repetitions interleaved: every row of every map once, then again.
	 * Within a repetition every map starts from the same tree and sees the
	 * same writer ops and reader pages.
	 */
	for (rep = 0; rep < reps; rep++) {
		uint64_t seed = stress_seed_for(
				stress_opts.seed, n + 1000003ULL * (uint64_t)(rep + 1));

		for (r = 0; r < nrows; r++)
			for (m = 0; m < churn_nmaps; m++) {
				struct result *x = &res[((size_t)r * churn_nmaps + m) * (size_t)reps];

				stress_progress("churn: %s, %llu ranges, %d reader(s), %d writer "
						"(repetition %d/%d)",
						churn_maps[m].ops->name, (unsigned long long)n,
						rows[r].readers, rows[r].writers, rep + 1, reps);
				x[rep] = run_point(&churn_maps[m], n, shift, seed, rows[r].readers,
						rows[r].writers, stress_opts.duration_s, false);
				checked[m] += x[rep].swept;
			}
	}
	for (r = 0; r < nrows; r++) {
		struct stress_point pts[CHURN_MAX_MAPS];
		const struct stress_point *ref = NULL;

		for (m = 0; m < churn_nmaps; m++) {
			struct result *x = &res[((size_t)r * churn_nmaps + m) * (size_t)reps];
			struct stress_point *p = &pts[m];
			double lo, hi;
			int i, mid = 0;

			stress_point_init(p, "churn", churn_maps[m].ops->name, rows[r].readers);
			p->writers = rows[r].writers;
			p->pages = 2 * n << shift;
			p->ranges = n;
			p->reps = reps;
			p->reference = churn_reference;
			p->lookups_checked = checked[m];
			snprintf(p->note, sizeof(p->note), "%.*s", (int)sizeof(p->note) - 1,
					churn_maps[m].version);
			if (rows[r].readers) {
				for (i = 0; i < reps; i++)
					a[i] = x[i].reader_ops_s;
				p->ops_per_sec = median(a, reps, &lo, &hi);
				p->ops_per_sec_min = lo;
				p->ops_per_sec_max = hi;
				for (i = 0; i < reps; i++)
					if (x[i].reader_ops_s == p->ops_per_sec)
						mid = i;
			}
			if (rows[r].writers) {
				for (i = 0; i < reps; i++)
					a[i] = x[i].writer_ops_s;
				p->writer_ops_per_sec = median(a, reps, &lo, &hi);
				p->writer_ops_per_sec_min = lo;
				p->writer_ops_per_sec_max = hi;
				if (!rows[r].readers)
					for (i = 0; i < reps; i++)
						if (x[i].writer_ops_s == p->writer_ops_per_sec)
							mid = i;
			}
			/* The repetition whose throughput is the median gives ops and CPU use. */
			p->ops = x[mid].reader_ops;
			p->duration_s = x[mid].duration_s;
			p->rank_cpu_s = x[mid].cpus * x[mid].duration_s;
			p->cpu_share = stress_cpu_share(p->rank_cpu_s, p->duration_s,
					rows[r].readers + rows[r].writers);
			/* The library's reclaim threads: a plugin's grace periods are its own. */
			if (!churn_maps[m].path) {
				p->gp_per_sec = x[mid].gp_per_sec;
				p->inflight_peak_bytes = x[mid].inflight_peak;
				/*
				 * Past the bound an RCU set waits for a grace period:
				 * in any repetition, the writer's figures measure it.
				 */
				for (i = 0; i < reps && rows[r].writers; i++)
					if (x[i].inflight_peak > stress_opts.warn_inflight)
						p->warn |= STRESS_WARN_BOUND;
				p->index_huge_share = x[mid].huge_share;
			}
			if (!strcmp(churn_maps[m].ops->name, churn_reference))
				ref = p;
		}
		for (m = 0; m < churn_nmaps; m++) {
			pts[m].reader_ratio = pts[m].ops_per_sec / ref->ops_per_sec;
			pts[m].writer_ratio = pts[m].writer_ops_per_sec / ref->writer_ops_per_sec;
			/* The events a reference counted: its lookups, its writer's ops. */
			if (!isnan(pts[m].reader_ratio))
				stress_warn_ref(&pts[m], ref, (double)ref->ops);
			if (!isnan(pts[m].writer_ratio))
				stress_warn_ref(&pts[m], ref,
						ref->writer_ops_per_sec * ref->duration_s);
			stress_emit(&pts[m]);
		}
	}
	pool_destroy();
	free(a);
	free(checked);
	free(res);
}

void stress_run_churn(void)
{
	static const uint64_t default_ranges[] = {64, 100000};
	struct row rows[2 * STRESS_MAX_LIST + 1];
	int nrows = 0, k, w;

	if (isnan(stress_opts.warn_inflight))
		stress_opts.warn_inflight = (double)stress_gp_bound();
	churn_select_maps();
	for (w = 0; w < 2; w++)
		for (k = 0; k < stress_opts.nranks; k++)
			rows[nrows++] = (struct row){stress_opts.ranks[k], w};
	rows[nrows++] = (struct row){0, 1};
	if (stress_opts.ranges_given)
		for (k = 0; k < stress_opts.nranges; k++)
			run_size(stress_opts.ranges[k], rows, nrows);
	else
		for (k = 0; k < 2; k++)
			run_size(default_ranges[k], rows, nrows);
}

/* ---- the human table ------------------------------------------------------------------- */

/* @v / @unit with @fmt, its spread after it: "2.31 (2.20..2.40)"; one unit per column. */
static void fmt_spread(char *buf, size_t n, double v, double lo, double hi, double unit)
{
	if (isnan(v)) {
		snprintf(buf, n, "-");
		return;
	}
	if (isnan(lo) || isnan(hi))
		snprintf(buf, n, "%.2f", v / unit);
	else
		snprintf(buf, n, "%.2f (%.2f..%.2f)", v / unit, lo / unit, hi / unit);
}

static void fmt_ratio(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.3f", v);
}

static void row_name(char *buf, size_t n, int readers, int writers)
{
	if (!readers)
		snprintf(buf, n, "writer alone");
	else
		snprintf(buf, n, "%d reader%s%s", readers, readers > 1 ? "s" : "",
				writers ? " + writer" : "");
}

void stress_print_churn(void)
{
	const struct stress_point *p;
	uint64_t last = 0;
	size_t i, m;
	int lr = -2, lw = -2;
	unsigned seen = 0;

	for (i = 0; (p = stress_point_at(i)); i++) {
		char row[32], rd[48], wr[48], x1[16], x2[16], cpu[16], gp[16], fl[16], hp[16],
				wn[24];

		if (strcmp(p->scenario, "churn"))
			continue;
		if (p->ranges != last) {
			printf("\nchurn: %llu ranges over %llu pages (%llu slots of %llu pages, "
			       "one "
			       "range in half of them);\n"
			       "  readers look up uniform random pages, one read section per "
			       "lookup; the writer, flat out,\n"
			       "  removes a random range and inserts one into a random empty slot "
			       "(1 op = both);\n"
			       "  median of %d interleaved repetition(s) of %.2f s (min..max); "
			       "x %s: median / %s's\n",
					(unsigned long long)p->ranges, (unsigned long long)p->pages,
					(unsigned long long)(2 * p->ranges),
					(unsigned long long)(p->pages / (2 * p->ranges)), p->reps,
					stress_opts.duration_s, p->reference, p->reference);
			printf("  %-19s %-18s %-28s %7s %-26s %7s %5s %6s %9s %5s %s\n", "row",
					"map", "lookups, all readers", "x ref", "writer ops", "x ref",
					"CPUs", "GPs", "in flight", "huge", "warn");
			printf("  %-19s %-18s %-28s %7s %-26s %7s %5s %6s %9s %5s\n", "", "", "(M/s)",
					"", "(k/s)", "", "", "(/s)", "(KiB)", "(%)");
			last = p->ranges;
			lr = lw = -2;
		}
		row_name(row, sizeof(row), p->ranks, p->writers);
		fmt_spread(rd, sizeof(rd), p->ops_per_sec, p->ops_per_sec_min, p->ops_per_sec_max,
				1e6);
		fmt_spread(wr, sizeof(wr), p->writer_ops_per_sec, p->writer_ops_per_sec_min,
				p->writer_ops_per_sec_max, 1e3);
		fmt_ratio(x1, sizeof(x1), p->reader_ratio);
		fmt_ratio(x2, sizeof(x2), p->writer_ratio);
		snprintf(cpu, sizeof(cpu), "%.2f", p->rank_cpu_s / p->duration_s);
		if (isnan(p->gp_per_sec)) {
			snprintf(gp, sizeof(gp), "-");
			snprintf(fl, sizeof(fl), "-");
		} else {
			snprintf(gp, sizeof(gp), "%.0f", p->gp_per_sec);
			snprintf(fl, sizeof(fl), "%.0f", p->inflight_peak_bytes / 1024);
		}
		if (isnan(p->index_huge_share))
			snprintf(hp, sizeof(hp), "-");
		else
			snprintf(hp, sizeof(hp), "%.0f", 100 * p->index_huge_share);
		printf("  %-19s %-18s %-28s %7s %-26s %7s %5s %6s %9s %5s %s\n",
				p->ranks == lr && p->writers == lw ? "" : row, p->variant, rd, x1,
				wr, x2, cpu, gp, fl, hp, stress_warn_names(p->warn, wn, sizeof(wn)));
		seen |= p->warn;
		lr = p->ranks;
		lw = p->writers;
	}
	if (!last)
		return;
	printf("  (CPUs: CPU time the point's threads got / its wall time; lower than its "
	       "thread count\n   when other processes took CPU; GPs: the library's reclaim "
	       "threads' grace periods\n   per second; in flight: the most retired memory "
	       "that waited for one; huge: the\n   share of the read index's chunks on "
	       "huge pages, from /proc/self/smaps; -: no chunk)\n");
	stress_warn_footnote(seen);
	printf("  churn_maps:\n");
	for (m = 0; m < churn_nmaps; m++)
		printf("    %-18s %s%s%s\n", churn_maps[m].ops->name, churn_maps[m].version,
				churn_maps[m].path ? ", plugin " : ", through the public API",
				churn_maps[m].path ? churn_maps[m].path : "");
	printf("  validated: every range found had a value and bounds of its page's slot; "
	       "before the\n  repetitions, each map ran the most readers beside the "
	       "writer with every lookup whose\n  slot did not change meanwhile compared "
	       "with the model; after every point, every slot\n  was swept (ends of each "
	       "range and the pages beside them) with no writer running\n");
	fflush(stdout);
}
