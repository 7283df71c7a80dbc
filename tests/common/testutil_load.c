// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The concurrent workloads of testutil.h, without Criterion: linked into the
 * unit suites and tsan_stress (not the fuzz harness, which runs one thread).
 *
 * Threads do not abort on a failed check: they count it and keep the first
 * message (under a mutex), so the caller reports it in its own way (a
 * Criterion assertion, tsan_stress's failure count) after every thread is
 * joined and every object freed.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PS_TEST_NO_CRITERION
#include "testutil.h"

void ps_test_spawn(pthread_t *t, int n, void *(*fn)(void *), void *arg, size_t stride)
{
	int i, err;

	for (i = 0; i < n; i++) {
		err = pthread_create(&t[i], NULL, fn, (char *)arg + (size_t)i * stride);
		if (err) {
			fprintf(stderr, "pthread_create: %s\n", strerror(err));
			abort();
		}
	}
}

void ps_test_join(pthread_t *t, int n)
{
	int i;

	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* ---- what every load shares: its failures, the stop flag, the deadline ---- */

struct load {
	struct ps_test_run *run;
	pthread_mutex_t lock; /* @run->failures and @run->why */
	atomic_bool stop;     /* observers (readers, monitors) stop */
	uint64_t deadline;    /* workers stop (ps_test_run.duration_ns after the start) */
};

static void load_init(struct load *ld, struct ps_test_run *run)
{
	ld->run = run;
	run->failures = 0;
	run->why[0] = '\0';
	pthread_mutex_init(&ld->lock, NULL);
	atomic_init(&ld->stop, false);
	ld->deadline = ps_test_now_ns() + run->duration_ns;
	/* Only atomics touch it; what the threads found reaches the caller by pthread_join(). */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&ld->stop, sizeof(ld->stop));
}

/* Worker round @i may run: below @iters, and below @min_iters or before @deadline. */
static bool load_go_on(const struct load *ld, long i, uint64_t deadline)
{
	const struct ps_test_run *run = ld->run;

	return i < run->iters &&
	       (!run->duration_ns || i < run->min_iters || ps_test_now_ns() < deadline);
}

static bool load_stopped(struct load *ld)
{
	return atomic_load_explicit(&ld->stop, memory_order_relaxed);
}

static void load_fail(struct load *ld, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;
	int n;

	pthread_mutex_lock(&ld->lock);
	if (!ld->run->failures++) {
		n = snprintf(ld->run->why, sizeof(ld->run->why), "testutil_load.c:%d: %s: ", line,
				cond);
		va_start(ap, fmt);
		if (n > 0 && (size_t)n < sizeof(ld->run->why))
			vsnprintf(ld->run->why + n, sizeof(ld->run->why) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&ld->lock);
}

#define CHECK(ld, cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			load_fail((ld), __LINE__, #cond, __VA_ARGS__);                             \
	} while (0)

/* 0, or -1 with the count of further failures after the first one's message. */
static int load_done(struct load *ld)
{
	struct ps_test_run *run = ld->run;
	size_t n = strlen(run->why);

	pthread_mutex_destroy(&ld->lock);
	if (run->failures > 1 && n < sizeof(run->why))
		snprintf(run->why + n, sizeof(run->why) - n, " (and %ld more)", run->failures - 1);
	return run->failures ? -1 : 0;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	TCHECK(p, "calloc(%zu, %zu)", n, size);
	return p;
}

/* ---- a store with readers, walkers and writers ---- */

/*
 * Churn policies: node k is the region, nodes CHURN_A_BIT.. and
 * CHURN_B_BIT.. hold the range's start and end offsets in the region in
 * binary, CHURN_MAGIC is always set.
 */
#define CHURN_A_BIT 16
#define CHURN_B_BIT 32
#define CHURN_OFF_BITS 10 /* offsets 0 .. PS_TEST_REGION_MAX */
#define CHURN_MAGIC 1000
#define MASK_LONGS (PS_MAX_NUMNODES / (8 * sizeof(unsigned long)))
#define LONG_BITS (8 * sizeof(unsigned long))

static void mask_set(unsigned long *mask, int bit)
{
	mask[bit / LONG_BITS] |= 1UL << (bit % LONG_BITS);
}

static bool mask_test(const unsigned long *mask, int bit)
{
	return mask[bit / LONG_BITS] >> (bit % LONG_BITS) & 1;
}

/* A policy that says it was set for [@a, @b) in region @k of @size pages. */
static struct ps_policy *churn_policy(int k, uint64_t size, uint64_t a, uint64_t b)
{
	unsigned long mask[MASK_LONGS] = { 0 };
	uint64_t base = (uint64_t)k * size;
	struct ps_policy *pol;
	int j;

	mask_set(mask, k);
	for (j = 0; j < CHURN_OFF_BITS; j++) {
		if ((a - base) >> j & 1)
			mask_set(mask, CHURN_A_BIT + j);
		if ((b - base) >> j & 1)
			mask_set(mask, CHURN_B_BIT + j);
	}
	mask_set(mask, CHURN_MAGIC);
	pol = ps_policy_create(PS_MPOL_BIND, 0, mask, PS_MAX_NUMNODES);
	TCHECK(pol, "ps_policy_create failed");
	return pol;
}

/* Was @pol, whole, set by churn_policy() for a range that holds @idx? */
static bool churn_policy_covers(const struct ps_policy *pol, uint64_t size, uint64_t idx)
{
	unsigned long mask[MASK_LONGS];
	int k = (int)(idx / size), j, weight = 0;
	uint64_t base = (uint64_t)k * size, a = 0, b = 0;

	if (!pol || ps_policy_mode(pol) != PS_MPOL_BIND ||
			ps_policy_nodemask(pol, mask, PS_MAX_NUMNODES))
		return false;
	if (!mask_test(mask, CHURN_MAGIC) || ps_policy_first_node(pol) != k)
		return false;
	for (j = 0; j < CHURN_A_BIT; j++)
		if (j != k && mask_test(mask, j))
			return false;
	for (j = 0; j < CHURN_OFF_BITS; j++) {
		a |= (uint64_t)mask_test(mask, CHURN_A_BIT + j) << j;
		b |= (uint64_t)mask_test(mask, CHURN_B_BIT + j) << j;
	}
	for (j = 0; j < PS_MAX_NUMNODES; j++)
		weight += mask_test(mask, j);
	return base + a <= idx && idx < base + b && b <= size && ps_policy_weight(pol) == weight;
}

struct store_load {
	struct load ld;
	struct ps_test_store_load *l;
	struct ps_store *store;
	struct ps_policy *pol[PS_TEST_REGIONS];
	uint64_t space;
	atomic_int readers_started; /* writers begin once every reader runs */
	atomic_long lookups, walks, sets;
};

/* @pol, found at @idx (@what: how), is what may be there. */
static void store_expect(struct store_load *sl, const struct ps_policy *pol, uint64_t idx,
		const char *what)
{
	uint64_t size = sl->l->region_size;
	int k = (int)(idx / size);

	if (sl->l->churn)
		CHECK(&sl->ld, churn_policy_covers(pol, size, idx) && ps_policy_refcount(pol) >= 1,
				"%s: page %llu: %p was not set for a range that holds it", what,
				(unsigned long long)idx, (const void *)pol);
	else
		CHECK(&sl->ld, !pol || (pol == sl->pol[k] && ps_policy_first_node(pol) == k),
				"%s: page %llu: the policy of another region", what,
				(unsigned long long)idx);
}

/* One read of @idx: a reference to what it found (NULL: a hole, or borrowed without churn). */
static struct ps_policy *store_read(struct store_load *sl, uint64_t idx, bool borrow)
{
	const struct ps_policy *got;
	struct ps_policy *held = NULL;

	if (!borrow)
		return ps_store_lookup(sl->store, idx);
	ps_store_read_lock(sl->store);
	got = ps_store_lookup_borrow(sl->store, idx);
	store_expect(sl, got, idx, "borrowed");
	/* A reference taken inside the section keeps a fresh policy past the section. */
	if (sl->l->churn)
		held = ps_policy_get((struct ps_policy *)got);
	ps_store_read_unlock(sl->store);
	return held;
}

static void *store_reader(void *arg)
{
	struct store_load *sl = arg;
	const struct ps_test_store_load *l = sl->l;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1, idx[PS_TEST_HOLD_MAX];
	struct ps_policy *held[PS_TEST_HOLD_MAX];
	bool online = l->qsbr_online && l->sync == PS_SYNC_RCU_QSBR;
	int hold = l->hold > 0 ? l->hold : 1, k;
	long n = 0;

	if (online)
		ps_qsbr_thread_online();
	atomic_fetch_add(&sl->readers_started, 1);
	while (!load_stopped(&sl->ld)) {
		for (k = 0; k < hold; k++, n++) {
			idx[k] = ps_test_rand(&seed) % sl->space;
			held[k] = store_read(sl, idx[k],
					l->read == PS_TEST_READ_BORROW ||
							(l->read == PS_TEST_READ_BOTH && (n & 1)));
		}
		if (l->qsbr_online)
			ps_qsbr_quiescent(); /* held references outlive the read section */
		for (k = 0; k < hold; k++) {
			store_expect(sl, held[k], idx[k], "held");
			ps_policy_put(held[k]);
		}
	}
	if (online)
		ps_qsbr_thread_offline();
	atomic_fetch_add(&sl->lookups, n);
	return NULL;
}

struct store_walk {
	struct store_load *sl;
	uint64_t prev_end;
};

static int store_visit(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct store_walk *w = arg;

	CHECK(&w->sl->ld, w->prev_end <= start && start < end, "walk: [%llu, %llu) after %llu",
			(unsigned long long)start, (unsigned long long)end,
			(unsigned long long)w->prev_end);
	store_expect(w->sl, pol, start, "walked");
	store_expect(w->sl, pol, end - 1, "walked");
	w->prev_end = end;
	return 0;
}

static void *store_walker(void *arg)
{
	struct store_load *sl = arg;
	long n = 0;

	for (; !load_stopped(&sl->ld); n++) {
		struct store_walk w = { sl, 0 };

		CHECK(&sl->ld, ps_store_foreach(sl->store, store_visit, &w) == 0, "foreach");
	}
	atomic_fetch_add(&sl->walks, n);
	return NULL;
}

static void *store_writer(void *arg)
{
	struct store_load *sl = arg;
	const struct ps_test_store_load *l = sl->l;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1, size = l->region_size, deadline;
	long i, sets = 0;

	/*
	 * Writers overlap readers: on a loaded machine the writers could
	 * otherwise finish their sets before any reader was scheduled.
	 */
	while (atomic_load(&sl->readers_started) < l->readers)
		sched_yield();
	deadline = ps_test_now_ns() + l->run.duration_ns;
	for (i = 0; load_go_on(&sl->ld, i, deadline); i++) {
		int k = (int)(ps_test_rand(&seed) % PS_TEST_REGIONS);
		uint64_t a = (uint64_t)k * size, b = a + size;
		struct ps_policy *pol;

		if (l->yield_every && i % l->yield_every == 0) {
			if (l->sample)
				l->sample(sl->store, a, l->sample_arg);
			sched_yield(); /* let the readers make some of the policies hot */
		}
		if (!l->whole_regions && !ps_test_rand_range(&seed, a, size, &a, &b))
			continue;
		/* Churn: the store's reference is the only one once we put ours. */
		pol = l->churn ? churn_policy(k, size, a, b)
			       : ps_test_rand(&seed) % 4 ? sl->pol[k] : NULL;
		CHECK(&sl->ld, ps_store_set(sl->store, a, b, pol) == 0, "set [%llu, %llu)",
				(unsigned long long)a, (unsigned long long)b);
		if (l->churn)
			ps_policy_put(pol);
		sets++;
	}
	atomic_fetch_add(&sl->sets, sets);
	return NULL;
}

int ps_test_store_run(struct ps_test_store_load *l)
{
	struct store_load sl = { .l = l };
	int nt = l->readers + l->walkers + l->writers, i;
	pthread_t *t = xcalloc((size_t)nt, sizeof(*t));
	uint64_t size = l->region_size;
	const char *why = NULL;

	TCHECK(size >= 1 && size <= PS_TEST_REGION_MAX && l->hold <= PS_TEST_HOLD_MAX,
			"region_size %llu, hold %d", (unsigned long long)size, l->hold);
	load_init(&sl.ld, &l->run);
	/* Only atomics touch it (the readers' start, the writers' signal). */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sl.readers_started, sizeof(sl.readers_started));
	sl.store = ps_store_create(l->sync);
	TCHECK(sl.store, "ps_store_create(%s)", ps_sync_name(l->sync));
	sl.space = PS_TEST_REGIONS * size;
	for (i = 0; i < PS_TEST_REGIONS; i++)
		sl.pol[i] = ps_test_bind(i);
	for (i = 0; l->churn && i < PS_TEST_REGIONS; i++) { /* every page covered from the start */
		struct ps_policy *pol = churn_policy(i, size, i * size, (i + 1) * size);

		CHECK(&sl.ld, ps_store_set(sl.store, i * size, (i + 1) * size, pol) == 0,
				"region %d", i);
		ps_policy_put(pol);
	}
	ps_test_spawn(t, l->readers, store_reader, &sl, 0);
	ps_test_spawn(t + l->readers, l->walkers, store_walker, &sl, 0);
	ps_test_spawn(t + l->readers + l->walkers, l->writers, store_writer, &sl, 0);
	ps_test_join(t + l->readers + l->walkers, l->writers);
	atomic_store(&sl.ld.stop, true);
	ps_test_join(t, l->readers + l->walkers);
	l->lookups = atomic_load(&sl.lookups);
	l->walks = atomic_load(&sl.walks);
	l->sets = atomic_load(&sl.sets);
	CHECK(&sl.ld, l->readers == 0 || l->lookups > 0, "%s: no lookup", ps_sync_name(l->sync));
	CHECK(&sl.ld, l->writers == 0 || l->sets > 0, "%s: no set", ps_sync_name(l->sync));
	CHECK(&sl.ld, ps_store_check(sl.store, &why) == 0, "%s: %s", ps_sync_name(l->sync), why);
	ps_store_destroy(sl.store);
	for (i = 0; i < PS_TEST_REGIONS; i++) {
		CHECK(&sl.ld, ps_policy_refcount(sl.pol[i]) == 1, "policy %d: refcount %ld", i,
				(long)ps_policy_refcount(sl.pol[i]));
		ps_policy_put(sl.pol[i]);
	}
	free(t);
	return load_done(&sl.ld);
}

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
	atomic_int workers_done;
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
	atomic_fetch_add(&w->cl->workers_done, 1);
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

/* The root's limit to lo and hi in turn: @limit_rounds times, and on while the workers charge. */
static void charge_limits(struct charge_load *cl)
{
	const struct ps_test_charge_load *l = cl->l;
	struct ps_charge_stat st;
	long i;

	for (i = 0; i < l->limit_rounds ||
			(l->limit_rounds && atomic_load(&cl->workers_done) < l->workers); i++) {
		int r = ps_charge_set_limit(cl->root, (i & 1) ? l->limit_hi : l->limit_lo);

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
	atomic_store(&cl.ld.stop, true);
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
	atomic_store(&cl->ld.stop, true);
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
	atomic_long reads;
	atomic_int walkers_started; /* mutators begin once every walker runs */
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

	atomic_fetch_add(&il->walkers_started, 1);
	/*
	 * Until stopped, and then on until the walker has read something
	 * (mutators leave objects behind), however late it was scheduled.
	 */
	for (n = 0; !load_stopped(&il->ld) || (reads == 0 && n < 1000); n++)
		reads += il->l->whole_walks && (n & 1) ? idmap_walk_whole(il, &seed)
						       : idmap_walk_steps(il);
	atomic_fetch_add(&il->reads, reads);
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
	while (atomic_load(&il->walkers_started) < il->l->walkers)
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
	atomic_store(&il.ld.stop, true);
	ps_test_join(t, l->walkers);
	l->reads = atomic_load(&il.reads);
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

/* ---- the read index beside a flat-out writer ---- */

#define IXL_SPANS 6
#define IXL_HIST 1024 /* versions described at once: a call spanning more is not checked */
#define IXL_WINDOW 512

/* A range of the configuration, or a span a version changed (@node 0: removed). */
struct ixl_span {
	uint64_t x, y;
	int node;
};

/* Version k: the configuration (k even) or it with @sp changed (k odd); atomics only. */
struct ixl_ver {
	int n;
	struct ixl_span sp[IXL_SPANS]; /* ascending, disjoint */
};

struct index_load {
	struct load ld;
	struct ps_test_index_load *l;
	struct ps_store *s;
	struct ps_policy *pol[16]; /* BIND on node i; [0] NULL */
	struct ixl_span *a;	   /* the configuration, nodes 1-7 */
	int na;
	uint64_t space; /* the configuration lies in [0, space) */
	int miss_node;	/* what ps_store_lookup_node(, 0) answers where no range is */
	struct ixl_ver hist[IXL_HIST];
	uint64_t updates; /* atomic: published so far (release) */
	atomic_long lookups, nexts, windows, unchecked;
};

static void ixl_ver_load(struct index_load *il, uint64_t k, struct ixl_ver *v)
{
	const struct ixl_ver *h = &il->hist[k % IXL_HIST];
	int i;

	v->n = 0;
	if (!(k & 1))
		return;
	v->n = __atomic_load_n(&h->n, __ATOMIC_RELAXED);
	if (v->n < 0 || v->n > IXL_SPANS)
		v->n = 0; /* overwritten meanwhile: the check is thrown away */
	for (i = 0; i < v->n; i++) {
		v->sp[i].x = __atomic_load_n(&h->sp[i].x, __ATOMIC_RELAXED);
		v->sp[i].y = __atomic_load_n(&h->sp[i].y, __ATOMIC_RELAXED);
		v->sp[i].node = __atomic_load_n(&h->sp[i].node, __ATOMIC_RELAXED);
		if (v->sp[i].node < 0 || v->sp[i].node > 15)
			v->sp[i].node = 0;
	}
}

static void ixl_ver_store(struct index_load *il, uint64_t k, const struct ixl_ver *v)
{
	struct ixl_ver *h = &il->hist[k % IXL_HIST];
	int i;

	__atomic_store_n(&h->n, v->n, __ATOMIC_RELAXED);
	for (i = 0; i < v->n; i++) {
		__atomic_store_n(&h->sp[i].x, v->sp[i].x, __ATOMIC_RELAXED);
		__atomic_store_n(&h->sp[i].y, v->sp[i].y, __ATOMIC_RELAXED);
		__atomic_store_n(&h->sp[i].node, v->sp[i].node, __ATOMIC_RELAXED);
	}
}

/* The first range of the configuration that ends after @idx: its position, or na. */
static int ixl_after(const struct index_load *il, uint64_t idx)
{
	int lo = 0, hi = il->na;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (il->a[mid].y > idx)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* The node of the range holding @idx in version @v (0: none). */
static int ixl_at(const struct index_load *il, const struct ixl_ver *v, uint64_t idx)
{
	int i;

	for (i = 0; i < v->n; i++)
		if (v->sp[i].x <= idx && idx < v->sp[i].y)
			return v->sp[i].node;
	i = ixl_after(il, idx);
	return i < il->na && il->a[i].x <= idx ? il->a[i].node : 0;
}

/*
 * The first range of version @v that ends after @idx: a changed span, or
 * what is left of a range of the configuration beside the spans.
 */
static bool ixl_next(const struct index_load *il, const struct ixl_ver *v, uint64_t idx,
		struct ixl_span *out)
{
	bool have = false;
	int i, j;

	for (j = 0; j < v->n; j++)
		if (v->sp[j].node && v->sp[j].y > idx) {
			*out = v->sp[j];
			have = true;
			break;
		}
	for (i = ixl_after(il, idx); i < il->na; i++) {
		struct ixl_span r = il->a[i], piece = { 0, 0, r.node };
		uint64_t cur = r.x;
		bool found = false;

		if (have && r.x >= out->x)
			break;
		for (j = 0; j < v->n && !found; j++) {
			const struct ixl_span *s = &v->sp[j];

			if (s->y <= cur)
				continue;
			if (s->x >= r.y)
				break;
			if (s->x > cur && s->x > idx) {
				piece.x = cur;
				piece.y = s->x;
				found = true;
			}
			cur = cur > s->y ? cur : s->y;
		}
		if (!found && cur < r.y) {
			piece.x = cur;
			piece.y = r.y;
			found = true;
		}
		if (found) {
			if (!have || piece.x < out->x)
				*out = piece;
			return true;
		}
	}
	return have;
}

/* What one reader call answered. */
struct ixl_answer {
	const struct index_load *il;
	int kind; /* 0 node, 1 policy, 2 next, 3 window */
	uint64_t idx, we;
	int node;
	const struct ps_policy *pol;
	int ret; /* next: 0 or -ENOENT; window: 0 or 1 (full) */
	uint64_t start, end;
	int n;
	struct ixl_span w[IXL_WINDOW];
};

static int ixl_node_of(const struct index_load *il, const struct ps_policy *pol)
{
	int i;

	for (i = 1; i < 16; i++)
		if (il->pol[i] == pol)
			return i;
	return pol ? -1 : 0;
}

static bool ixl_matches(const struct index_load *il, const struct ixl_ver *v,
		const struct ixl_answer *a)
{
	struct ixl_span r;
	uint64_t idx;
	int i, node;

	switch (a->kind) {
	case 0:
		node = ixl_at(il, v, a->idx);
		return a->node == (node ? ps_policy_node(il->pol[node], a->idx, 0) : il->miss_node);
	case 1:
		return a->pol == il->pol[ixl_at(il, v, a->idx)];
	case 2:
		if (!ixl_next(il, v, a->idx, &r))
			return a->ret == -ENOENT;
		return a->ret == 0 && a->start == r.x && a->end == r.y && a->pol == il->pol[r.node];
	default:
		for (i = 0, idx = a->idx; i < IXL_WINDOW; i++, idx = r.y) {
			if (!ixl_next(il, v, idx, &r) || r.x >= a->we)
				return i == a->n && !a->ret;
			if (i >= a->n || a->w[i].x != r.x || a->w[i].y != r.y || a->w[i].node != r.node)
				return false;
		}
		return a->n == IXL_WINDOW && a->ret == 1;
	}
}

static int ixl_window_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ixl_answer *a = arg;

	a->w[a->n].x = start;
	a->w[a->n].y = end;
	a->w[a->n].node = ixl_node_of(a->il, pol);
	return ++a->n == IXL_WINDOW;
}

/* An index a reader asks about: near the configuration's edges, in it, past it. */
static uint64_t ixl_idx(const struct index_load *il, uint64_t *seed)
{
	uint64_t r = ps_test_rand(seed) % 16;
	const struct ixl_span *x = &il->a[ps_test_rand(seed) % (uint64_t)il->na];

	if (r < 3)
		return x->x;
	if (r < 5)
		return x->y - 1 + ps_test_rand(seed) % 2;
	if (r == 5)
		return UINT64_MAX - ps_test_rand(seed) % 3;
	if (r == 6)
		return ps_test_rand(seed);
	return ps_test_rand(seed) % (il->space + 32);
}

/* Some version from @k0 to @k1 + 1 gave @a; false only when none did and all were still described. */
static void ixl_check(struct index_load *il, const struct ixl_answer *a, uint64_t k0, uint64_t k1)
{
	struct ixl_ver v;
	uint64_t k, k2;
	bool ok = false;

	for (k = k0; k <= k1 + 1 && !ok; k++) {
		ixl_ver_load(il, k, &v);
		ok = ixl_matches(il, &v, a);
	}
	k2 = __atomic_load_n(&il->updates, __ATOMIC_ACQUIRE);
	if (k2 + 2 - k0 >= IXL_HIST - 2) {
		atomic_fetch_add_explicit(&il->unchecked, 1, memory_order_relaxed);
		return;
	}
	CHECK(&il->ld, ok,
			"%s: %s of %" PRIu64 " (window to %" PRIu64 "): ret %d node %d [%" PRIu64
			", %" PRIu64 ") n %d: no version from %" PRIu64 " to %" PRIu64 " gave it",
			ps_sync_name(il->l->sync),
			a->kind == 0 ? "lookup_node" : a->kind == 1 ? "lookup" : a->kind == 2 ? "next" : "window",
			a->idx, a->we, a->ret, a->node, a->start, a->end, a->n, k0, k1 + 1);
}

static void *ixl_reader(void *arg)
{
	struct index_load *il = arg;
	struct ixl_answer *a = xcalloc(2, sizeof(*a));
	uint64_t seed = ps_test_seed(il->l->run.seed, 100 + (int)(uintptr_t)pthread_self() % 64);

	bool online = il->l->qsbr_online && il->l->sync == PS_SYNC_RCU_QSBR;
	int (*node_fn)(struct ps_store *, uint64_t, int) =
		il->l->lookup_node ? il->l->lookup_node : ps_store_lookup_node;
	struct ps_policy *(*lookup_fn)(struct ps_store *, uint64_t) =
		il->l->lookup ? il->l->lookup : ps_store_lookup;

	a[0].il = a[1].il = il;
	if (online)
		TCHECK(ps_qsbr_thread_online() == 0, "online");
	while (!load_stopped(&il->ld)) {
		uint64_t k0 = __atomic_load_n(&il->updates, __ATOMIC_ACQUIRE), k1, r;
		struct ps_policy *pol = NULL;
		int nans = 1;

		r = ps_test_rand(&seed) % 8;
		a[0].idx = ixl_idx(il, &seed);
		a[0].n = a[0].ret = 0;
		a[0].start = a[0].end = 0;
		a[0].pol = NULL;
		if (r < 2) {
			a[0].kind = 0;
			a[0].node = node_fn(il->s, a[0].idx, 0);
			atomic_fetch_add_explicit(&il->lookups, 1, memory_order_relaxed);
		} else if (r == 2) {
			a[0].kind = 1;
			pol = lookup_fn(il->s, a[0].idx);
			a[0].pol = pol;
			ps_policy_put(pol); /* the test holds a reference of its own */
			atomic_fetch_add_explicit(&il->lookups, 1, memory_order_relaxed);
		} else if (r < 5) {
			a[0].kind = 2;
			a[0].ret = ps_store_next(il->s, a[0].idx, &a[0].start, &a[0].end, &pol);
			if (!a[0].ret) {
				a[0].pol = pol;
				ps_policy_put(pol);
			}
			atomic_fetch_add_explicit(&il->nexts, 1, memory_order_relaxed);
		} else if (r < 7) {
			a[0].kind = 3;
			if (ps_test_rand(&seed) % 16 == 0) {
				a[0].idx = 0;
				a[0].we = UINT64_MAX;
			} else {
				a[0].idx %= il->space + 32;
				a[0].we = a[0].idx + 1 + ps_test_rand(&seed) % 600;
			}
			a[0].ret = ps_store_foreach_range(il->s, a[0].idx, a[0].we, ixl_window_cb, &a[0]);
			atomic_fetch_add_explicit(&il->windows, 1, memory_order_relaxed);
		} else {
			/* Borrowed, in one section: each answer some version's. */
			const struct ps_policy *b;

			a[0].kind = 1;
			a[1].kind = 2;
			a[1].idx = ixl_idx(il, &seed);
			a[1].start = a[1].end = 0;
			a[1].pol = NULL;
			ps_store_read_lock(il->s);
			a[0].pol = ps_store_lookup_borrow(il->s, a[0].idx);
			a[1].ret = ps_store_next_borrow(il->s, a[1].idx, &a[1].start, &a[1].end, &b);
			if (!a[1].ret)
				a[1].pol = b;
			ps_store_read_unlock(il->s);
			atomic_fetch_add_explicit(&il->lookups, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&il->nexts, 1, memory_order_relaxed);
			nans = 2;
		}
		k1 = __atomic_load_n(&il->updates, __ATOMIC_ACQUIRE);
		ixl_check(il, &a[0], k0, k1);
		if (nans == 2)
			ixl_check(il, &a[1], k0, k1);
		if (online)
			ps_qsbr_quiescent();
	}
	if (online)
		ps_qsbr_thread_offline();
	free(a);
	return NULL;
}

/* A version with some spans changed: one span (short or across many ranges) or a few. */
static void ixl_describe(struct index_load *il, uint64_t *seed, struct ixl_ver *v)
{
	uint64_t r = ps_test_rand(seed) % 4, top = il->space + 16;
	int j;

	if (r < 2) {
		uint64_t x = ps_test_rand(seed) % il->space;
		uint64_t len = 1 + ps_test_rand(seed) % (r ? il->space / 4 : 64);

		v->n = 1;
		v->sp[0].x = x;
		v->sp[0].y = x + len < top ? x + len : top;
		v->sp[0].node = ps_test_rand(seed) % 5 ? 8 + (int)(ps_test_rand(seed) % 8) : 0;
		return;
	}
	v->n = 2 + (int)(ps_test_rand(seed) % (IXL_SPANS - 1));
	for (j = 0; j < v->n; j++) {
		uint64_t w = top / (uint64_t)v->n, x = (uint64_t)j * w + ps_test_rand(seed) % w;
		uint64_t len = 1 + ps_test_rand(seed) % (r == 2 ? 32 : w), end = (uint64_t)(j + 1) * w;

		v->sp[j].x = x;
		v->sp[j].y = x + len < end ? x + len : end;
		v->sp[j].node = ps_test_rand(seed) % 5 ? 8 + (int)(ps_test_rand(seed) % 8) : 0;
	}
}

/* The sets that turn the configuration into version @v: one set, or a batch. */
static int ixl_change(struct index_load *il, const struct ixl_ver *v, struct ps_set_op *ops,
		uint64_t *seed)
{
	int j;

	for (j = 0; j < v->n; j++)
		ops[j] = (struct ps_set_op){ v->sp[j].x, v->sp[j].y, il->pol[v->sp[j].node] };
	if (v->n == 1 && ps_test_rand(seed) % 4)
		return ps_store_set(il->s, ops[0].start, ops[0].end, ops[0].pol);
	return ps_store_set_many(il->s, ops, (size_t)v->n);
}

/* The batch that turns version @v back into the configuration. */
static int ixl_restore(struct index_load *il, const struct ixl_ver *v, struct ps_set_op *ops)
{
	size_t n = 0;
	int i, j;

	for (j = 0; j < v->n; j++) {
		uint64_t lo = v->sp[j].x, hi = v->sp[j].y;

		i = ixl_after(il, lo);
		if (i < il->na && il->a[i].x < lo)
			lo = il->a[i].x;
		i = ixl_after(il, hi - 1);
		if (i < il->na && il->a[i].x < hi && il->a[i].y > hi)
			hi = il->a[i].y;
		ops[n++] = (struct ps_set_op){ lo, hi, NULL };
		for (i = ixl_after(il, lo); i < il->na && il->a[i].x < hi; i++)
			ops[n++] = (struct ps_set_op){ il->a[i].x, il->a[i].y, il->pol[il->a[i].node] };
	}
	return ps_store_set_many(il->s, ops, n);
}

static int ixl_expect_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ixl_answer *a = arg;
	const struct index_load *il = a->il;

	if (a->n >= il->na || il->a[a->n].x != start || il->a[a->n].y != end ||
			il->pol[il->a[a->n].node] != pol)
		a->ret = 1;
	a->n++;
	return 0;
}

int ps_test_index_run(struct ps_test_index_load *l)
{
	struct index_load *il = xcalloc(1, sizeof(*il));
	int nreaders = l->readers < 1 ? 1 : l->readers > 8 ? 8 : l->readers;
	struct ps_set_op *ops;
	struct ixl_ver cur;
	struct ixl_answer *end = xcalloc(1, sizeof(*end));
	pthread_t rd[8];
	uint64_t seed = ps_test_seed(l->run.seed, 0), pos = 0, u;
	const char *why = NULL;
	int i, ret;

	il->l = l;
	load_init(&il->ld, &l->run);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(il->hist, sizeof(il->hist));
	il->na = l->ranges > 0 ? l->ranges : 2000;
	il->a = xcalloc((size_t)il->na, sizeof(*il->a));
	ops = xcalloc((size_t)il->na + 4 * IXL_SPANS, sizeof(*ops));
	for (i = 1; i < 16; i++)
		il->pol[i] = ps_test_bind(i);
	il->s = l->create ? l->create(l->sync) : ps_store_create(l->sync);
	TCHECK(il->s, "ps_store_create");
	for (i = 0; i < il->na; i++) {
		uint64_t x = pos + ps_test_rand(&seed) % 4, len = 1 + ps_test_rand(&seed) % 8;

		il->a[i] = (struct ixl_span){ x, x + len, 1 + (int)(ps_test_rand(&seed) % 7) };
		ops[i] = (struct ps_set_op){ x, x + len, il->pol[il->a[i].node] };
		pos = x + len;
	}
	il->space = pos;
	TCHECK(ps_store_set_many(il->s, ops, (size_t)il->na) == 0, "the configuration");
	il->miss_node = ps_store_lookup_node(il->s, il->space + 1000000, 0);
	ixl_describe(il, &seed, &cur);
	ixl_ver_store(il, 1, &cur);
	ps_test_spawn(rd, nreaders, ixl_reader, il, 0);
	/* Update u makes version u + 1; version u + 2 is described before u + 1 is announced. */
	for (u = 0; (u & 1) || load_go_on(&il->ld, (long)u, il->ld.deadline); u++) {
		if (!(u & 1)) {
			ret = ixl_change(il, &cur, ops, &seed);
			CHECK(&il->ld, ret == 0, "update %" PRIu64 ": %d", u, ret);
		} else {
			ret = ixl_restore(il, &cur, ops);
			CHECK(&il->ld, ret == 0, "update %" PRIu64 ": %d", u, ret);
			ixl_describe(il, &seed, &cur);
			ixl_ver_store(il, u + 2, &cur);
		}
		if (u % 256 == 255) {
			ret = ps_store_check(il->s, &why);
			CHECK(&il->ld, ret == 0, "update %" PRIu64 ": %s", u, why);
		}
		__atomic_store_n(&il->updates, u + 1, __ATOMIC_RELEASE);
	}
	atomic_store(&il->ld.stop, true);
	ps_test_join(rd, nreaders);
	l->updates = (long)u;
	l->lookups = atomic_load(&il->lookups);
	l->nexts = atomic_load(&il->nexts);
	l->windows = atomic_load(&il->windows);
	l->unchecked = atomic_load(&il->unchecked);
	ret = ps_store_check(il->s, &why);
	CHECK(&il->ld, ret == 0, "at the end: %s", why);
	end->il = il;
	ps_store_foreach(il->s, ixl_expect_cb, end);
	CHECK(&il->ld, !end->ret && end->n == il->na, "at the end: not the configuration");
	ps_store_destroy(il->s);
	for (i = 1; i < 16; i++) {
		CHECK(&il->ld, ps_policy_refcount(il->pol[i]) == 1, "policy %d: %ld references", i,
				ps_policy_refcount(il->pol[i]));
		ps_policy_put(il->pol[i]);
	}
	ret = load_done(&il->ld);
	free(end);
	free(ops);
	free(il->a);
	free(il);
	return ret;
}
