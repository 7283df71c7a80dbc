// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What the store scenarios share (scn_store.h): the variants, read from
 * the library's list; the policy pool; a wrong lookup's message; the
 * writers; building, checking and freeing a point's tree.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "compiler.h"
#include "rangepool.h"
#include "scn_store.h"
#include "stress.h"

/* ---- variants ------------------------------------------------------------------ */

struct variant variants[NVARIANTS] = {
		{"unsync", V_UNSYNC, -1, false, F_REF, false},
		{"unsync:noref", V_UNSYNC, -1, true, F_NOREF, false},
		{"unsync:copy", V_UNSYNC, -1, true, F_COPY, false},
		{"unsync:node", V_UNSYNC, -1, true, F_NODE, false},
		{"pthread_mutex", V_MUTEX, -1, false, F_REF, false},
		{"pthread_rwlock", V_PRWLOCK, -1, false, F_REF, false},
};

uint64_t oncpu_ticks;

static char variant_names[STRESS_NSYNC * STORE_NFORMS][40];
static pthread_once_t variants_once = PTHREAD_ONCE_INIT;

/* The forms in enum vform order, plain then inlined. */
static const char *const form_suffix[STORE_NFORMS] = {
		"", ":noref", ":copy", ":node", ":inline", ":noref:inline", ":copy:inline",
		":node:inline"};

static void variants_fill(void)
{
	size_t i = NBASELINES + 2, k = 0;
	int s, f;

	for (s = 0; s < STRESS_NSYNC; s++)
		for (f = 0; f < STORE_NFORMS; f++, i++, k++) {
			snprintf(variant_names[k], sizeof(variant_names[k]), "%s%s",
					ps_sync_name((enum ps_sync)s), form_suffix[f]);
			variants[i] = (struct variant){variant_names[k], V_STORE, s, f % 4 != F_REF,
					(enum vform)(f % 4), f >= 4};
		}
}

void variants_init(void)
{
	pthread_once(&variants_once, variants_fill);
}

bool stress_variant_known(const char *name)
{
	size_t i;

	variants_init();
	for (i = 0; i < NVARIANTS; i++)
		if (!strcmp(variants[i].name, name))
			return true;
	return false;
}

/* ---- policy pool and its validation hash ------------------------------------ */

struct pool pool;

/*
 * A machine of 64 nodes, each with memory, 10 to itself and 20 to every
 * other: the pool's one-node policies name nodes 0-63, and a node lookup
 * returns only nodes of the topology in force.
 */
static void pool_topology(void)
{
	static unsigned char dist[64 * 64];
	int i, j;

	for (i = 0; i < 64; i++)
		for (j = 0; j < 64; j++)
			dist[i * 64 + j] = i == j ? 10 : 20;
	if (ps_numa_set_topology(64, dist, NULL))
		stress_die("ps_numa_set_topology: out of memory");
}

void pool_create(uint32_t ncolours)
{
	unsigned bits = 1;
	uint32_t c;
	int alt;

	pool_topology();
	pool.ncolours = ncolours;
	while (((size_t)1 << bits) < (size_t)ncolours * 2 * 4)
		bits++;
	pool.shift = 64 - bits;
	pool.pol = calloc((size_t)ncolours * 2, sizeof(*pool.pol));
	pool.key = calloc((size_t)1 << bits, sizeof(*pool.key));
	pool.colour = calloc((size_t)1 << bits, sizeof(*pool.colour));
	if (!pool.pol || !pool.key || !pool.colour)
		stress_die("out of memory for the policy pool");
	for (c = 0; c < ncolours; c++) {
		for (alt = 0; alt < 2; alt++) {
			unsigned long mask = 1UL << (c % 64);
			struct ps_policy *p = ps_policy_create(
					alt ? PS_MPOL_INTERLEAVE : PS_MPOL_BIND, 0, &mask, 64);
			size_t i, m = ((size_t)1 << bits) - 1;

			if (!p)
				stress_die("ps_policy_create: %s", strerror(errno));
			pool.pol[c * 2 + alt] = p;
			for (i = pool_hash(p); pool.key[i]; i = (i + 1) & m)
				;
			pool.key[i] = p;
			pool.colour[i] = c;
		}
	}
}

void pool_destroy(void)
{
	uint32_t i;

	for (i = 0; i < pool.ncolours * 2; i++)
		ps_policy_put(pool.pol[i]);
	free(pool.pol);
	free(pool.key);
	free(pool.colour);
	memset(&pool, 0, sizeof(pool));
}

/* ---- a wrong lookup ------------------------------------------------------------ */

__attribute__((noinline)) void bad_lookup(const struct ctx *c, uint64_t page, const void *pol)
{
	uint64_t s = slot_of(&c->l, page);
	int got = pol ? pool_colour(pol) : -1;

	if (!pol)
		stress_fail("VALIDATION FAILED: %s: lookup of page %llu returned no policy, "
			    "but every page is always covered (slot %llu)",
				c->v->name, (unsigned long long)page, (unsigned long long)s);
	if (got < 0)
		stress_fail("VALIDATION FAILED: %s: lookup of page %llu returned %p, a policy "
			    "that was never set in this store",
				c->v->name, (unsigned long long)page, pol);
	stress_fail("VALIDATION FAILED: %s: lookup of page %llu (slot %llu, colour %u) returned "
		    "a policy only ever set in slots of colour %d",
			c->v->name, (unsigned long long)page, (unsigned long long)s,
			colour_of_slot(s), got);
}

__attribute__((noinline)) void bad_value(const struct ctx *c, uint64_t page, uintptr_t got,
		uintptr_t want)
{
	stress_fail("VALIDATION FAILED: %s: lookup of page %llu gave %#llx, want %#llx "
		    "(colour %u)", c->v->name, (unsigned long long)page, (unsigned long long)got,
			(unsigned long long)want, colour_of_slot(slot_of(&c->l, page)));
}

/* ---- writers ---------------------------------------------------------------- */

static void base_set(struct ctx *c, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct psi_range_list spares = {NULL, 0, NULL}, removed = {NULL, 0, NULL};

	/* As the library's locked_set_k(): allocate first, then change under the lock. */
	if (psi_range_list_fill(&spares, PSI_RANGETREE_SET_MAX_NEW))
		stress_die("out of memory");
	if (c->v->kind == V_MUTEX)
		pthread_mutex_lock(&c->base->mu);
	else if (c->v->kind == V_PRWLOCK)
		pthread_rwlock_wrlock(&c->base->rw);
	psi_rangetree_set(&c->base->tree, start, end, pol, &spares, &removed);
	if (c->v->kind == V_MUTEX)
		pthread_mutex_unlock(&c->base->mu);
	else if (c->v->kind == V_PRWLOCK)
		pthread_rwlock_unlock(&c->base->rw);
	psi_range_list_free(&removed);
	psi_range_list_free(&spares);
}

void do_set(struct ctx *c, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	int ret;

	if (c->v->kind != V_STORE) {
		base_set(c, start, end, pol);
		return;
	}
	ret = ps_store_set(c->store, start, end, pol);
	if (ret)
		stress_die("ps_store_set(%llu, %llu): %s", (unsigned long long)start,
				(unsigned long long)end, strerror(-ret));
}

/* @n sets as one update: ps_store_set_many() on a store, one base_set() after another on a baseline. */
void do_set_many(struct ctx *c, const struct ps_set_op *ops, size_t n)
{
	size_t i;
	int ret;

	if (c->v->kind != V_STORE) {
		for (i = 0; i < n; i++)
			base_set(c, ops[i].start, ops[i].end, ops[i].pol);
		return;
	}
	ret = ps_store_set_many(c->store, ops, n);
	if (ret)
		stress_die("ps_store_set_many(%zu ops): %s", n, strerror(-ret));
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct ctx *c = w->c;
	uint64_t rng = stress_seed_for(stress_opts.seed, 100000 + (uint64_t)w->id);
	uint64_t interval = stress_opts.write_interval_ns, next, first_due;
	size_t batch = stress_opts.batch > 1 ? (size_t)stress_opts.batch : 1, b;
	struct ps_set_op *ops = calloc(batch, sizeof(*ops));
	unsigned alt = 0;

	if (!ops)
		stress_die("out of memory");

	stress_gate_wait(&c->gate);
	next = stress_now_ns();
	first_due = next + interval;
	while (!PSI_LOAD_ACQUIRE(c->stop)) {
		uint64_t s, lo, hi, start, end, t0, t1;

		if (interval) {
			uint64_t now = stress_now_ns();

			next += interval;
			if (next > now)
				stress_sleep_until(next);
			else
				next = now; /* late: no burst to catch up */
			if (PSI_LOAD_ACQUIRE(c->stop))
				break;
		}
		/* --batch N: N such sets in one ps_store_set_many() (baselines: one after another). */
		for (b = 0; b < batch; b++) {
			do
				s = stress_below(&rng, c->l.nslots);
			while (s == c->l.hot_slot && c->l.nslots > 1);
			lo = slot_start(&c->l, s);
			hi = slot_end(&c->l, s);
			if (stress_rand(&rng) & 1) {
				start = lo;
				end = hi;
			} else {
				start = lo + stress_below(&rng, hi - lo);
				end = start + 1 + stress_below(&rng, hi - start);
			}
			alt ^= 1;
			ops[b] = (struct ps_set_op){start, end, pool.pol[colour_of_slot(s) * 2 + alt]};
		}
		t0 = stress_now_ns();
		if (batch == 1)
			do_set(c, ops[0].start, ops[0].end, ops[0].pol);
		else
			do_set_many(c, ops, batch);
		t1 = stress_now_ns();
		w->ops += batch;
		if (t1 - t0 > w->max_wait_ns)
			w->max_wait_ns = t1 - t0;
	}
	/*
	 * A writer that never completed a set (it never got a CPU, with 1024
	 * ranks) waited at least from its first due set until now.
	 */
	if (!w->ops) {
		uint64_t now = stress_now_ns();

		/* It may first run only after the point ended: then it waited 0 so far. */
		w->max_wait_ns = now > first_due ? now - first_due : 0;
	}
	free(ops);
	return NULL;
}

/*
 * The writers of a timed point: @nwriters of them on @c, started once its
 * @nranks ranks are and let go with them by the gate; the point then runs
 * for --duration and is stopped.  *@t_go and *@t_stop: when it started and
 * stopped.  Returns the writers, for writers_join().
 */
struct writer *writers_run(
		struct ctx *c, int nwriters, int nranks, uint64_t *t_go, uint64_t *t_stop)
{
	size_t size = sizeof(struct writer) * (size_t)(nwriters ? nwriters : 1);
	struct writer *writers = aligned_alloc(64, size);
	int i;

	if (!writers)
		stress_die("out of memory");
	memset(writers, 0, size);
	for (i = 0; i < nwriters; i++) {
		writers[i].c = c;
		writers[i].id = i;
		stress_thread_start(&writers[i].th, writer_main, &writers[i]);
	}
	*t_go = stress_gate_open(&c->gate, nranks + nwriters);
	stress_sleep_until(*t_go + (uint64_t)(stress_opts.duration_s * 1e9));
	PSI_STORE_RELEASE(c->stop, 1);
	*t_stop = stress_now_ns();
	return writers;
}

/*
 * Join and free the writers of writers_run(), once the ranks are joined:
 * QSBR writers in a grace period finish once the ranks went offline.  @p
 * (its duration_s set) gets their number, sets per second and longest wait.
 */
void writers_join(struct writer *writers, int nwriters, struct stress_point *p)
{
	uint64_t wops = 0, wmax = 0;
	int i;

	for (i = 0; i < nwriters; i++) {
		pthread_join(writers[i].th, NULL);
		wops += writers[i].ops;
		if (writers[i].max_wait_ns > wmax)
			wmax = writers[i].max_wait_ns;
	}
	free(writers);
	p->writers = nwriters;
	if (nwriters) {
		p->writer_ops_per_sec = (double)wops / p->duration_s;
		p->writer_max_wait_ns = (double)wmax;
	}
}

/* ---- building and checking the tree ----------------------------------------- */

void layout_init(struct layout *l, uint64_t pages, uint64_t nranges, bool hot)
{
	memset(l, 0, sizeof(*l));
	if (pages < nranges)
		pages = nranges;
	l->pages = pages;
	l->nslots = nranges;
	l->slot_len = pages / nranges;
	l->slot_shift = -1;
	if (!(l->slot_len & (l->slot_len - 1)))
		l->slot_shift = __builtin_ctzll(l->slot_len);
	l->hot_slot = ~0ULL;
	l->lo = 0;
	l->n = pages;
	if (hot) {
		l->hot_slot = l->nslots / 2;
		l->lo = slot_start(l, l->hot_slot);
		l->n = slot_end(l, l->hot_slot) - l->lo;
	}
}

void ctx_build(struct ctx *c, const struct variant *v, const struct layout *l)
{
	uint64_t s;

	memset(c, 0, sizeof(*c));
	c->v = v;
	c->l = *l;
	if (v->kind == V_STORE) {
		/* Fill from a thread that never reads: no reader is registered, grace periods are
		 * short. */
		/* :inline forms: created as a POLSTORE_INLINE program creates them (version checked). */
		c->store = v->inl ? _ps_store_create_inline((enum ps_sync)v->sync, _PS_INLINE_ABI)
				  : ps_store_create((enum ps_sync)v->sync);
		if (!c->store)
			stress_die("ps_store_create(%s): %s", v->name, strerror(errno));
		if (stress_opts.counts && ps_store_counts_enable(c->store, true))
			stress_die("ps_store_counts_enable(%s): out of memory", v->name);
	} else {
		c->base = calloc(1, sizeof(*c->base));
		if (!c->base)
			stress_die("out of memory");
		psi_rangetree_init(&c->base->tree);
		pthread_rwlock_init(&c->base->rw, NULL);
		pthread_mutex_init(&c->base->mu, NULL);
	}
	for (s = 0; s < l->nslots; s++)
		do_set(c, slot_start(l, s), slot_end(l, s), pool.pol[colour_of_slot(s) * 2]);
}

struct walk_check {
	const struct ctx *c;
	uint64_t n;
};

static int walk_one(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walk_check *w = arg;
	const struct layout *l = &w->c->l;
	uint64_t s = slot_of(l, start);

	if (end > slot_end(l, s) || pool_colour(pol) != (int)colour_of_slot(s))
		stress_fail("VALIDATION FAILED: %s: range [%llu, %llu) crosses its slot or holds "
			    "a policy of another slot",
				w->c->v->name, (unsigned long long)start, (unsigned long long)end);
	w->n += end - start;
	return 0;
}

/* Tree invariants and the slot rule over every range; returns the range count. */
uint64_t ctx_check(struct ctx *c)
{
	struct walk_check w = {c, 0};
	const char *why = "?";
	uint64_t count;

	if (c->v->kind == V_STORE) {
		if (ps_store_check(c->store, &why))
			stress_fail("VALIDATION FAILED: %s: ps_store_check(): %s", c->v->name, why);
		ps_store_foreach(c->store, walk_one, &w);
		count = ps_store_count(c->store);
	} else {
		if (psi_rangetree_check(&c->base->tree, &why))
			stress_fail("VALIDATION FAILED: %s: the range tree's invariants: %s", c->v->name, why);
		psi_rangetree_foreach(&c->base->tree, walk_one, &w);
		count = c->base->tree.count;
	}
	if (w.n != c->l.pages)
		stress_fail("VALIDATION FAILED: %s: ranges cover %llu pages of %llu", c->v->name,
				(unsigned long long)w.n, (unsigned long long)c->l.pages);
	return count;
}

void ctx_destroy(struct ctx *c)
{
	if (c->store) {
		ps_store_destroy(c->store);
	} else {
		struct psi_range_list removed = {NULL, 0, NULL};

		psi_rangetree_clear(&c->base->tree, &removed);
		psi_range_list_free(&removed);
		pthread_rwlock_destroy(&c->base->rw);
		pthread_mutex_destroy(&c->base->mu);
		free(c->base);
	}
}

int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}
