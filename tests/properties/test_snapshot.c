// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What an RCU or RCU_QSBR reader keeps while writers go on: sets never wait
 * for readers, so a reader's version must stay whole (every range, every
 * policy alive) for as long as its section lasts, however many sets run
 * meanwhile; and a set may be called inside a section, a foreach callback
 * or from an online QSBR thread without waiting and without freeing what
 * the caller borrowed.  Freed memory read here is caught by ASan and
 * valgrind (this suite runs under both), a hang by the timeouts.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <semaphore.h>

#include "compiler.h"
#include "testutil.h"

static const enum ps_sync rcu_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };
#define RCU_TEST(name, ...) SYNCS_TEST(rcu_syncs, snapshot, name, ##__VA_ARGS__)

/* A policy that says which range it was made for: BIND on node (start / 16) % 64. */
static struct ps_policy *range_policy(uint64_t start)
{
	return ps_test_bind((int)((start / 16) % 64));
}

static bool policy_fits(const struct ps_policy *pol, uint64_t start)
{
	return ps_policy_first_node(pol) == (int)((start / 16) % 64);
}

#define NRANGES 64 /* [16 i, 16 i + 16), i < NRANGES */

/*
 * A walk that stops in its first callback while the test churns the
 * store, then checks that it goes on in its version: a whole-store
 * ps_store_foreach(), or a window: pages 8 * 16 + 3 .. 24 * 16 - 2, ranges
 * 8 .. 23, the end ones not clipped.
 */
struct walker {
	struct ps_store *s;
	sem_t in_walk, go_on;
	bool window;
	int first; /* the first range the walk meets: 0, or 8 for the window */
	int seen, bad;
	pthread_t thread;
};

static int walk_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walker *w = arg;

	if (w->seen == 0) {
		sem_post(&w->in_walk);
		sem_wait(&w->go_on); /* the writer runs thousands of sets now */
	}
	/* The version the walk started in: the original ranges, policies alive. */
	if (start != (uint64_t)(w->first + w->seen) * 16 || end != start + 16 ||
			ps_policy_refcount(pol) <= 0 || !policy_fits(pol, start))
		w->bad++;
	w->seen++;
	return 0;
}

static void *walker_main(void *arg)
{
	struct walker *w = arg;

	if (w->window)
		ps_store_foreach_range(w->s, 8 * 16 + 3, 24 * 16 - 1, walk_cb, w);
	else
		ps_store_foreach(w->s, walk_cb, w);
	return NULL;
}

/* NRANGES ranges whose policies only the store owns; the walk started and stopped in them. */
static void walker_start(struct walker *w, enum ps_sync sync, bool window)
{
	uint64_t i;

	*w = (struct walker){ .s = ps_store_create(sync), .window = window, .first = window ? 8 : 0 };
	cr_assert_not_null(w->s);
	sem_init(&w->in_walk, 0, 0);
	sem_init(&w->go_on, 0, 0);
	for (i = 0; i < NRANGES; i++) {
		struct ps_policy *p = range_policy(i * 16);

		cr_assert_eq(ps_store_set(w->s, i * 16, i * 16 + 16, p), 0);
		ps_policy_put(p); /* the store owns it alone */
	}
	cr_assert_eq(pthread_create(&w->thread, NULL, walker_main, w), 0);
	sem_wait(&w->in_walk);
}

/* Let the walk go on: it must see its version's @want ranges, unchanged. */
static void walker_finish(struct walker *w, int want)
{
	const char *name = ps_sync_name(ps_store_sync_kind(w->s));

	sem_post(&w->go_on);
	pthread_join(w->thread, NULL);
	cr_assert_eq(w->seen, want, "%s: the walk saw %d ranges of its version", name, w->seen);
	cr_assert_eq(w->bad, 0, "%s: %d ranges of the walk's version changed or lost their policy",
			name, w->bad);
	cr_assert_eq(ps_store_synchronize(w->s), 0);
	ps_store_destroy(w->s);
	sem_destroy(&w->in_walk);
	sem_destroy(&w->go_on);
}

/*
 * Churn: every set installs a fresh policy that only the store owns (the
 * test puts its own reference at once), removes whole stretches and puts
 * them back, so every range and policy of the walker's version is retired
 * and would be freed if the walker's section did not hold it.
 */
static void churn(struct ps_store *s, long sets, uint64_t seed)
{
	long i;

	for (i = 0; i < sets; i++) {
		uint64_t a = ps_test_rand(&seed) % NRANGES, n = 1 + ps_test_rand(&seed) % 8;
		uint64_t start = a * 16, end = (a + n > NRANGES ? NRANGES : a + n) * 16;

		if (i % 5 == 0) {
			cr_assert_eq(ps_store_set(s, start, end, NULL), 0);
		} else {
			struct ps_policy *p = range_policy(start);

			cr_assert_eq(ps_store_set(s, start, end, p), 0);
			ps_policy_put(p);
		}
	}
	cr_assert_eq(ps_store_set(s, 0, NRANGES * 16, NULL), 0); /* and everything goes */
}

RCU_TEST(old_version_whole_after_many_sets, .timeout = 120)
{
	struct walker w;

	walker_start(&w, *sync, false);
	churn(w.s, ps_test_iters(20000), 42);
	cr_assert_eq(ps_store_count(w.s), 0);
	walker_finish(&w, NRANGES);
}

/* A set inside the caller's own read-side section returns, and the borrowed policy stays valid. */
RCU_TEST(set_inside_read_section, .timeout = 30)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(3), *b = ps_test_bind(4);
	const struct ps_policy *p;

	cr_assert_eq(ps_store_set(s, 0, 100, a), 0);
	ps_store_read_lock(s);
	p = ps_store_lookup_borrow(s, 50);
	cr_assert_eq(p, a);
	cr_assert_eq(ps_store_set(s, 0, 100, NULL), 0);
	cr_assert_eq(ps_store_set(s, 40, 60, b), 0);
	cr_assert_eq(ps_store_check(s, NULL), 0);
	/* The section sees the new version from here on, and p is still the old policy. */
	cr_assert_eq(ps_store_lookup_borrow(s, 50), b);
	cr_assert_null(ps_store_lookup_borrow(s, 10));
	cr_assert_eq(ps_policy_first_node(p), 3);
	ps_store_read_unlock(s);
	ps_policy_put(a); /* only a retired range still holds it: freed after a grace period */
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_policy_refcount(b), 2);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(b), 1);
	ps_policy_put(b);
}

struct cb_setter {
	struct ps_store *s;
	struct ps_policy *a, *b;
	int calls;
};

/* A store of ten ranges [10 i, 10 i + 5) of @c->a, and @c->b for the callback's sets. */
static void cb_setter_init(struct cb_setter *c, enum ps_sync sync)
{
	uint64_t i;

	*c = (struct cb_setter){ .s = ps_store_create(sync), .a = ps_test_bind(3),
		.b = ps_test_bind(5) };
	for (i = 0; i < 10; i++)
		cr_assert_eq(ps_store_set(c->s, i * 10, i * 10 + 5, c->a), 0);
}

/* The store is sound; once it is gone, the policies hold their own references only. */
static void cb_setter_done(struct cb_setter *c)
{
	cr_assert_eq(ps_store_check(c->s, NULL), 0);
	cr_assert_eq(ps_store_synchronize(c->s), 0);
	ps_store_destroy(c->s);
	cr_assert_eq(ps_policy_refcount(c->a), 1);
	cr_assert_eq(ps_policy_refcount(c->b), 1);
	ps_policy_put(c->a);
	ps_policy_put(c->b);
}

/*
 * An online QSBR thread borrowed @p (node 6) before its sets: still there,
 * held by the retired range only; then offline, and @s and @b go.
 */
static void qsbr_borrowed_survived(struct ps_store *s, const struct ps_policy *p,
		struct ps_policy *b, const char *what)
{
	cr_assert(ps_qsbr_thread_is_online(), "%s took the thread offline", what);
	cr_assert_eq(ps_policy_first_node(p), 6);
	cr_assert_eq(ps_policy_refcount(p), 1, "the retired range still holds the policy");
	ps_qsbr_quiescent();
	ps_qsbr_thread_offline();
	cr_assert_eq(ps_store_synchronize(s), 0);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(b), 1);
	ps_policy_put(b);
}

static int set_in_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct cb_setter *c = arg;

	(void)end;
	cr_assert_eq(ps_policy_first_node(pol), 3, "the walk sees its own version");
	/* Remove the range the walk stands on and the ones after it. */
	cr_assert_eq(ps_store_set(c->s, start, 1000, c->calls % 2 ? c->b : NULL), 0);
	c->calls++;
	return 0;
}

/* A set from inside a foreach callback of the same store: the walk goes on in its snapshot. */
RCU_TEST(set_inside_own_foreach, .timeout = 30)
{
	struct cb_setter c;

	cb_setter_init(&c, *sync);
	cr_assert_eq(ps_store_foreach(c.s, set_in_cb, &c), 0);
	cr_assert_eq(c.calls, 10, "the snapshot's ten ranges, whatever the sets did");
	cb_setter_done(&c);
}

/* An online QSBR thread keeps borrowed policies across its own sets: a set is no quiescent state. */
Test(snapshot, qsbr_online_set_keeps_borrowed, .timeout = 30)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *a = ps_test_bind(6), *b = ps_test_bind(7);
	const struct ps_policy *p;
	int i;

	cr_assert_eq(ps_store_set(s, 0, 10, a), 0);
	cr_assert_eq(ps_qsbr_thread_online(), 0);
	p = ps_store_lookup_borrow(s, 5);
	cr_assert_eq(p, a);
	ps_policy_put(a);
	/* Enough sets to fill retire batches: none may be freed while we are online. */
	cr_assert_eq(ps_store_set(s, 0, 10, NULL), 0);
	for (i = 0; i < 3000; i++)
		cr_assert_eq(ps_store_set(s, 20 + i % 50, 21 + i % 50, i % 3 ? NULL : b), 0);
	qsbr_borrowed_survived(s, p, b, "a set");
}

/* ---- windows, walks by position, batches ---- */

/*
 * A window walk keeps its version whole while batches churn the store: no
 * writer waits for it, nothing of its version is freed under it.
 */
RCU_TEST(window_whole_after_many_batches, .timeout = 120)
{
	struct walker w;
	struct ps_set_op ops[4];
	uint64_t seed = 7;
	long b, batches = ps_test_iters(5000);

	walker_start(&w, *sync, true);
	for (b = 0; b < batches; b++) {
		struct ps_policy *p[4];
		int k;

		for (k = 0; k < 4; k++) {
			uint64_t a = ps_test_rand(&seed) % NRANGES;

			p[k] = k == 3 ? NULL : range_policy(a * 16);
			ops[k] = (struct ps_set_op){ a * 16, a * 16 + 16, p[k] };
		}
		cr_assert_eq(ps_store_set_many(w.s, ops, 4), 0);
		for (k = 0; k < 4; k++)
			ps_policy_put(p[k]);
	}
	cr_assert_eq(ps_store_set(w.s, 0, NRANGES * 16, NULL), 0);
	walker_finish(&w, 16);
}

/*
 * Inside a read-side section: ps_store_next() (counted) and its borrowed
 * form, and ps_store_set_many() of the same store, which returns at once;
 * what the section borrowed stays valid.
 */
RCU_TEST(next_and_set_many_inside_read_section, .timeout = 30)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(3), *b = ps_test_bind(4), *got = NULL;
	struct ps_set_op ops[] = { { 0, 100, NULL }, { 40, 60, b }, { 70, 80, b } };
	const struct ps_policy *p = NULL;
	uint64_t st, en;

	cr_assert_eq(ps_store_set(s, 0, 100, a), 0);
	ps_store_read_lock(s);
	cr_assert_eq(ps_store_next_borrow(s, 0, &st, &en, &p), 0);
	cr_assert(p == a && st == 0 && en == 100);
	cr_assert_eq(ps_store_next(s, 50, &st, &en, &got), 0);
	cr_assert_eq(got, a);
	cr_assert_eq(ps_store_set_many(s, ops, 3), 0);
	/* The section sees the new version from here on; p is still the old policy. */
	cr_assert_eq(ps_store_next_borrow(s, 0, &st, &en, &p), 0);
	cr_assert(p == b && st == 40 && en == 60);
	cr_assert_eq(ps_store_next_borrow(s, 60, &st, &en, &p), 0);
	cr_assert(p == b && st == 70 && en == 80);
	cr_assert_eq(ps_policy_first_node(got), 3);
	ps_store_read_unlock(s);
	ps_policy_put(got);
	ps_policy_put(a);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_policy_refcount(b), 1 + 2);
	ps_store_destroy(s);
	ps_policy_put(b);
}

static int set_many_in_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct cb_setter *c = arg;
	struct ps_set_op ops[] = { { start, 1000, NULL }, { start + 1, start + 3, c->b } };

	(void)end;
	cr_assert_eq(ps_policy_first_node(pol), 3, "the window walk sees its own version");
	cr_assert_eq(ps_store_set_many(c->s, ops, 2), 0);
	c->calls++;
	return 0;
}

/* A batch from inside a window's callback on the same store: the walk goes on in its snapshot. */
RCU_TEST(set_many_inside_own_window, .timeout = 30)
{
	struct cb_setter c;

	cb_setter_init(&c, *sync);
	cr_assert_eq(ps_store_foreach_range(c.s, 12, 77, set_many_in_cb, &c), 0);
	cr_assert_eq(c.calls, 7, "the snapshot's ranges 1 .. 7, whatever the batches did");
	cr_assert_eq(ps_store_count(c.s), 1 + 7, "[0, 5) and each batch's [s + 1, s + 3)");
	cb_setter_done(&c);
}

/* An online QSBR thread keeps what it borrowed across its own batches. */
Test(snapshot, qsbr_online_set_many_keeps_borrowed, .timeout = 30)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *a = ps_test_bind(6), *b = ps_test_bind(7);
	const struct ps_policy *p;
	uint64_t st, en;
	int i;

	cr_assert_eq(ps_store_set(s, 0, 10, a), 0);
	cr_assert_eq(ps_qsbr_thread_online(), 0);
	cr_assert_eq(ps_store_next_borrow(s, 0, &st, &en, &p), 0);
	cr_assert_eq(p, a);
	ps_policy_put(a);
	for (i = 0; i < 1000; i++) {
		struct ps_set_op ops[] = { { 0, 10, NULL }, { 20 + i % 50, 21 + i % 50, b },
			{ 30 + i % 40, 31 + i % 40, NULL } };

		cr_assert_eq(ps_store_set_many(s, ops, 3), 0);
	}
	qsbr_borrowed_survived(s, p, b, "a batch");
}

/*
 * Walks beside a writer going flat out, where the race between a walk's
 * announcement and a set's choice of where to publish is.  The writer
 * sweeps the ranges round and round, left to right, giving update u (range
 * u mod 64) the tag of its sweep, u / 64 mod 64 (the node of a BIND
 * policy): in every version the ranges before the sweep's front carry the
 * new tag, the others the one before.  A walk is slower than the sweep and
 * goes the same way; had it seen sets published into slots ahead of it
 * after it passed ranges the same sweep changed later, its view would be
 * no version: each walk is compared with every version from its start to
 * its end.  Whole-store walks and windows over everything, short and long
 * (the callback spins now and then).
 */
#define SWEEP_RANGES 64
#define SWEEP_TAGS 64

struct sweep_run {
	struct ps_store *s;
	struct ps_policy *tag[SWEEP_TAGS];
	uint64_t updates; /* atomic: published so far (release) */
	int stop;         /* atomic */
	long walks;       /* atomic */
	int bad;          /* atomic */
};

struct sweep_walk {
	int tag[SWEEP_RANGES];
	unsigned ranges, spin;
};

/* The tag of range @i after updates [0, @k) (each range starts with tag 0, update k - 1 last). */
static int sweep_tag(uint64_t k, unsigned i)
{
	uint64_t last;

	if (k <= i)
		return 0;
	last = k - 1 - ((k - 1 - i) % SWEEP_RANGES); /* the last update of range i before k */
	return (int)((last / SWEEP_RANGES + 1) % SWEEP_TAGS);
}

static int sweep_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct sweep_walk *w = arg;
	unsigned i;

	(void)end;
	if (w->ranges < SWEEP_RANGES && start == (uint64_t)w->ranges * 16)
		w->tag[w->ranges] = ps_policy_first_node(pol);
	w->ranges++;
	for (i = 0; i < w->spin; i++)
		__asm__ volatile("" ::: "memory");
	return 0;
}

static void *sweep_walker(void *arg)
{
	struct sweep_run *r = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed;
	long n = 0;

	while (!PSI_READ_ONCE(r->stop)) {
		struct sweep_walk w = { .ranges = 0, .spin = ps_test_rand(&seed) % 2 ? 0 : 20000 };
		uint64_t k0 = PSI_LOAD_ACQUIRE(r->updates), k1, k;
		bool some = false;
		unsigned i;

		if (n & 1)
			ps_store_foreach_range(r->s, 0, SWEEP_RANGES * 16, sweep_cb, &w);
		else
			ps_store_foreach(r->s, sweep_cb, &w);
		k1 = PSI_LOAD_ACQUIRE(r->updates);
		/* Some version k (the store after update k - 1) in [k0, k1 + 1]: that one whole. */
		for (k = k0; k <= k1 + 1 && !some; k++) {
			for (i = 0; i < SWEEP_RANGES && w.tag[i] == sweep_tag(k, i); i++)
				;
			some = i == SWEEP_RANGES;
		}
		if (w.ranges != SWEEP_RANGES || !some)
			PSI_WRITE_ONCE(r->bad, 1);
		PSI_FETCH_ADD(r->walks, 1, RELAXED);
		n++;
	}
	return NULL;
}

RCU_TEST(walks_see_one_version_beside_a_flat_out_writer, .timeout = 120)
{
	struct sweep_run r = { .s = ps_store_create(*sync) };
	double t0, secs = ps_test_scale() < 1 ? 0.3 : 1.0;
	pthread_t w[2];
	uint64_t u;
	int i;

	for (i = 0; i < SWEEP_TAGS; i++)
		r.tag[i] = ps_test_bind(i);
	for (i = 0; i < SWEEP_RANGES; i++)
		cr_assert_eq(ps_store_set(r.s, (uint64_t)i * 16, (uint64_t)i * 16 + 16, r.tag[0]), 0);
	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&w[i], NULL, sweep_walker, &r), 0);
	t0 = (double)ps_test_now_ns() * 1e-9;
	/*
	 * The writer goes on past its time until the walkers have walked
	 * enough (valgrind runs one thread at a time, and may run the
	 * writer alone for long), for a minute at most.
	 */
	for (u = 0; (double)ps_test_now_ns() * 1e-9 - t0 < secs || u < 2000 ||
		    (PSI_READ_ONCE(r.walks) <= 10 &&
			    (double)ps_test_now_ns() * 1e-9 - t0 < 60);
			u++) {
		uint64_t x = u % SWEEP_RANGES;

		/* The count goes up after the set: a walk that loads it first began before. */
		cr_assert_eq(ps_store_set(r.s, x * 16, x * 16 + 16,
					     r.tag[(u / SWEEP_RANGES + 1) % SWEEP_TAGS]), 0);
		PSI_STORE_RELEASE(r.updates, u + 1);
	}
	PSI_WRITE_ONCE(r.stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	cr_log_info("%s: %llu updates, %ld walks", ps_sync_name(*sync), (unsigned long long)u,
			r.walks);
	cr_assert_eq(r.bad, 0, "%s: a walk saw no version of the store", ps_sync_name(*sync));
	cr_assert_gt(r.walks, 10);
	ps_store_destroy(r.s);
	for (i = 0; i < SWEEP_TAGS; i++) {
		cr_assert_eq(ps_policy_refcount(r.tag[i]), 1);
		ps_policy_put(r.tag[i]);
	}
}
