// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The RCU stores (src/sync/rcu_store*.c, src/locks/rcu_reclaim.c) and the
 * in-place variants' victim reuse, adversarially.
 *
 * Each test states the suspicion it checks.  A test that hangs is failed by
 * Criterion's timeout (or, in a forked child, by alarm()).
 */
#include "compiler.h"
#include "rcu_store_test.h"

double now_s(void)
{
	return (double)ps_test_now_ns() * 1e-9;
}

/* Retire at least @n ranges: set and remove one-page ranges. */
void churn(struct ps_store *s, struct ps_policy *p, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		cr_assert_eq(ps_store_set(s, 1000000 + (uint64_t)i, 1000001 + (uint64_t)i, p), 0);
		cr_assert_eq(ps_store_set(s, 1000000 + (uint64_t)i, 1000001 + (uint64_t)i, NULL), 0);
	}
}

void *slow_reader_fn(void *arg)
{
	struct slow_reader *r = arg;
	const struct ps_policy *p;

	ps_store_read_lock(r->s);
	p = ps_store_lookup_borrow(r->s, r->page);
	sem_post(&r->inside);
	usleep(300000);
	TCHECK(p && ps_policy_refcount((struct ps_policy *)p) >= 1, "the borrowed policy");
	PSI_STORE_SEQ_CST(r->left, 1);
	ps_store_read_unlock(r->s);
	return NULL;
}

/* ---- the store against the model of testutil.h, on pages [0, MODEL_PAGES) ---- */

#define MODEL_PAGES 512

/* The store holds the model's ranges; after synchronize each policy counts 1 + its ranges. */
static void expect_model(struct ps_store *s, const struct ps_model *m, struct ps_policy **pols,
		int npols, const char *when)
{
	char why[160];

	cr_assert(ps_model_matches_refs(s, m, pols, npols, MODEL_PAGES, why, sizeof(why)),
			"%s: %s (%s)", when, why, ps_sync_name(ps_store_sync_kind(s)));
}

/* ---- 1. reference counts across copies, victim reuse, removal, recycling --------- */

/*
 * Random sets (many of them equal to, or covering exactly, existing ranges:
 * the victim reuse) against the model; after every synchronize each
 * policy's count must be exactly 1 + the ranges holding it, and before it
 * never below that.  Enough sets that retired ranges are recycled many
 * times over (recycled spares still point at old policies).
 */
ALL_TEST(refcounts_random_with_victims, .timeout = 120)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *pols[6];
	struct ps_model m;
	uint64_t seed = 0x1234 + (uint64_t)*sync;
	long op, nops = ps_test_iters(60000);
	int i;

	ps_model_init(&m);
	for (i = 0; i < 5; i++)
		pols[i] = ps_test_bind(i);
	pols[5] = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	cr_assert_not_null(pols[5]);
	for (op = 0; op < nops; op++) {
		uint64_t a, b, r = ps_test_rand(&seed);
		struct ps_policy *p = (r & 7) == 0 ? NULL : pols[(r >> 3) % 6];

		if ((r >> 8) % 4 == 0) {
			/* Exactly an existing range, or a run of them with one policy, or a hole. */
			struct ps_policy *run;

			a = ps_test_rand(&seed) % MODEL_PAGES;
			b = a;
			run = ps_model_at(&m, a);
			while (b < MODEL_PAGES && ps_model_at(&m, b) == run)
				b++;
			while (a > 0 && ps_model_at(&m, a - 1) == run)
				a--;
			if (a == b)
				continue;
		} else if (!ps_test_rand_range(&seed, 0, MODEL_PAGES, &a, &b)) {
			continue;
		}
		cr_assert_eq(ps_store_set(s, a, b, p), 0);
		cr_assert_eq(ps_model_set(&m, a, b, p), 0);
		if (op % 4096 == 4095) {
			for (i = 0; i < 6; i++)
				cr_assert_geq(ps_policy_refcount(pols[i]),
						1 + ps_model_refs(&m, pols[i]),
						"policy %d count below its ranges", i);
			expect_model(s, &m, pols, 6, "after synchronize");
		}
	}
	expect_model(s, &m, pols, 6, "end");
	/* Remove everything, with one set at the extreme edges. */
	cr_assert_eq(ps_store_set(s, 0, UINT64_MAX, NULL), 0);
	cr_assert_eq(ps_store_count(s), 0);
	ps_store_synchronize(s);
	for (i = 0; i < 6; i++)
		cr_assert_eq(ps_policy_refcount(pols[i]), 1, "policy %d after removing all", i);
	ps_store_destroy(s);
	for (i = 0; i < 6; i++)
		ps_policy_put(pols[i]);
}

/*
 * Recycled spares still point at the policies of the ranges they were: a
 * policy whose last reference went with a retired range is freed, and
 * its address then sits in spares.  Nothing may read or put it (ASan:
 * heap-use-after-free; double put: the count of a live policy falls).
 * Fresh policies each round, so freed ones really are freed.
 */
RCU_TEST(recycled_spares_never_touch_stale_policies, .timeout = 120)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *keep = ps_test_bind(0);
	long round, nrounds = ps_test_iters(400);
	uint64_t seed = 99;

	cr_assert_eq(ps_store_set(s, 0, 1 << 20, keep), 0);
	for (round = 0; round < nrounds; round++) {
		struct ps_policy *p = ps_test_bind((int)(round % 3) + 1);
		int i;

		/* Many ranges of @p, then overwritten (victims and splits) and removed. */
		for (i = 0; i < 200; i++) {
			uint64_t a = ps_test_rand(&seed) % 4096;

			cr_assert_eq(ps_store_set(s, a, a + 1 + ps_test_rand(&seed) % 8, p), 0);
		}
		ps_policy_put(p); /* only the store holds @p now */
		for (i = 0; i < 200; i++) {
			uint64_t a = ps_test_rand(&seed) % 4096;

			cr_assert_eq(ps_store_set(s, a, a + 1 + ps_test_rand(&seed) % 8, keep), 0);
		}
		cr_assert_eq(ps_store_set(s, 0, 4200, keep), 0); /* covers all: a victim, rest removed */
		if (round % 50 == 49)
			cr_assert_eq(ps_store_check(s, NULL), 0);
	}
	ps_store_synchronize(s);
	cr_assert_eq(ps_policy_refcount(keep), 1 + (long)ps_store_count(s));
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(keep), 1);
	ps_policy_put(keep);
}

/* Destroy right after sets whose retired ranges and nodes wait on the log for a grace period. */
RCU_TEST(destroy_with_retired_in_flight, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1);
	int round;

	for (round = 0; round < 50; round++) {
		struct ps_store *s = ps_store_create(*sync);

		churn(s, p, 300 + round * 7);
		cr_assert_eq(ps_store_set(s, 5, 6, p), 0);
		ps_store_destroy(s);
		cr_assert_eq(ps_policy_refcount(p), 1, "round %d: references left after destroy",
				round);
	}
	ps_policy_put(p);
}

/* Destroy from another thread than the one that set (and than any that read). */
static void *destroy_thread(void *arg)
{
	ps_store_destroy(arg);
	return NULL;
}

RCU_TEST(destroy_from_other_thread, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1);
	int round;

	for (round = 0; round < 20; round++) {
		struct ps_store *s = ps_store_create(*sync);
		pthread_t t;

		churn(s, p, 600);
		cr_assert_eq(pthread_create(&t, NULL, destroy_thread, s), 0);
		pthread_join(t, NULL);
		cr_assert_eq(ps_policy_refcount(p), 1);
	}
	ps_policy_put(p);
}

/* ---- 3. readers holding an old version ------------------------------------------- */

struct old_reader {
	struct ps_store *s;
	sem_t in_section, writer_done; /* posted by the reader, by the writer */
	long seen, expect;
	const struct ps_policy *borrowed[64];
	int borrowed_node[64];
	bool bad;
};

static void old_reader_wait_writer(struct old_reader *o)
{
	sem_post(&o->in_section);
	while (sem_wait(&o->writer_done))
		;
}

static bool policy_looks_alive(const struct ps_policy *p, int node)
{
	return ps_policy_refcount(p) > 0 && ps_policy_mode(p) == PS_MPOL_BIND &&
	       ps_policy_first_node(p) == node;
}

static int old_reader_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct old_reader *o = arg;

	if (o->seen == 0)
		old_reader_wait_writer(o); /* everything below runs after thousands of sets */
	/* The snapshot: [10i, 10i + 5) with node i % 4, for i < expect. */
	if (start != 10 * (uint64_t)o->seen || end != start + 5 ||
			!policy_looks_alive(pol, (int)(o->seen % 4)))
		o->bad = true;
	o->seen++;
	return 0;
}

static void *old_reader_walk(void *arg)
{
	struct old_reader *o = arg;

	cr_assert_eq(ps_store_foreach(o->s, old_reader_fn, o), 0);
	return NULL;
}

static void *old_reader_borrow(void *arg)
{
	struct old_reader *o = arg;
	int i;

	ps_store_read_lock(o->s);
	for (i = 0; i < 64; i++)
		o->borrowed[i] = ps_store_lookup_borrow(o->s, 10 * (uint64_t)i + 2);
	old_reader_wait_writer(o);
	for (i = 0; i < 64; i++)
		if (!o->borrowed[i] || !policy_looks_alive(o->borrowed[i], i % 4))
			o->bad = true;
	ps_store_read_unlock(o->s);
	return NULL;
}

/* Only the store holds the policies; then thousands of sets change and remove everything. */
static void old_version_scenario(enum ps_sync sync, void *(*reader)(void *))
{
	struct old_reader o = { .s = ps_store_create(sync), .expect = 64 };
	uint64_t seed = 5;
	pthread_t t;
	int i;

	sem_init(&o.in_section, 0, 0);
	sem_init(&o.writer_done, 0, 0);
	for (i = 0; i < 64; i++) {
		struct ps_policy *p = ps_test_bind(i % 4);

		cr_assert_eq(ps_store_set(o.s, 10 * (uint64_t)i, 10 * (uint64_t)i + 5, p), 0);
		ps_policy_put(p);
	}
	cr_assert_eq(pthread_create(&t, NULL, reader, &o), 0);
	while (sem_wait(&o.in_section))
		;
	/* Sets never wait for the reader (fewer retired ranges than the backpressure bound). */
	for (i = 0; i < 6000; i++) {
		uint64_t a = ps_test_rand(&seed) % 700, b = a + 1 + ps_test_rand(&seed) % 40;
		struct ps_policy *p = ps_test_bind(i % 5);

		cr_assert_eq(ps_store_set(o.s, a, b, i % 3 ? p : NULL), 0);
		ps_policy_put(p);
		if (i % 1000 == 999)
			cr_assert_eq(ps_store_set(o.s, 0, UINT64_MAX, NULL), 0);
	}
	cr_assert_eq(ps_store_set(o.s, 0, UINT64_MAX, NULL), 0);
	sem_post(&o.writer_done);
	pthread_join(t, NULL);
	cr_assert_not(o.bad, "the reader's version or its policies changed under it");
	if (reader == old_reader_walk)
		cr_assert_eq(o.seen, 64, "the reader's snapshot has %ld ranges", o.seen);
	ps_store_synchronize(o.s);
	ps_store_destroy(o.s);
	sem_destroy(&o.in_section);
	sem_destroy(&o.writer_done);
}

RCU_TEST(reader_walk_keeps_old_version, .timeout = 60)
{
	old_version_scenario(*sync, old_reader_walk);
}

RCU_TEST(reader_borrow_keeps_policies, .timeout = 60)
{
	old_version_scenario(*sync, old_reader_borrow);
}

/* ---- 4. sets inside read-side sections ------------------------------------------- */

/*
 * Inside ps_store_read_lock(): borrow, then sets that remove the borrowed
 * range and retire many records.  No set may wait (a memb grace period
 * would wait for us: deadlock, failed by the timeout), and the borrowed
 * policy must stay alive until read_unlock.
 */
RCU_TEST(set_inside_read_lock, .timeout = 30)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(2), *q = ps_test_bind(3);
	const struct ps_policy *b;

	cr_assert_eq(ps_store_set(s, 0, 100, p), 0);
	ps_policy_put(p);
	ps_store_read_lock(s);
	b = ps_store_lookup_borrow(s, 50);
	cr_assert_eq(b, p);
	cr_assert_eq(ps_store_set(s, 0, 100, NULL), 0);
	churn(s, q, 3000);
	cr_assert(policy_looks_alive(b, 2), "borrowed policy freed inside the section");
	ps_store_read_unlock(s);
	ps_store_synchronize(s);
	cr_assert_eq(ps_policy_refcount(q), 1);
	ps_store_destroy(s);
	ps_policy_put(q);
}

struct in_cb {
	struct ps_store *s;
	struct ps_policy *q;
	const struct ps_policy *first;
	bool bad;
};

static int set_in_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct in_cb *c = arg;
	int i;

	(void)end;
	if (start == 0) {
		c->first = pol;
		for (i = 0; i < 2000; i++)
			if (ps_store_set(c->s, 0, 200, i & 1 ? c->q : NULL) ||
					ps_store_set(c->s, 500 + (uint64_t)i, 501 + (uint64_t)i, c->q))
				c->bad = true;
	}
	if (!policy_looks_alive(pol, start == 0 ? 2 : 3))
		c->bad = true;
	return 0;
}

RCU_TEST(set_inside_foreach_callback, .timeout = 30)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(2);
	struct in_cb c = { .s = s, .q = ps_test_bind(3) };

	cr_assert_eq(ps_store_set(s, 0, 100, p), 0);
	cr_assert_eq(ps_store_set(s, 100, 200, c.q), 0);
	ps_policy_put(p);
	cr_assert_eq(ps_store_foreach(s, set_in_cb, &c), 0);
	cr_assert_not(c.bad);
	ps_store_synchronize(s);
	cr_assert_eq(ps_policy_refcount(c.q), 1 + (long)ps_store_count(s));
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(c.q), 1);
	ps_policy_put(c.q);
}

/* An online QSBR thread sets flat out, borrowing as it goes; then synchronizes and goes offline. */
static void *qsbr_online_setter(void *arg)
{
	struct ps_store *s = arg;
	struct ps_policy *q = ps_test_bind(1);
	int i;

	TCHECK(ps_qsbr_thread_online() == 0, "online");
	for (i = 0; i < 20000; i++) {
		const struct ps_policy *b;

		TCHECK(ps_store_set(s, (uint64_t)i % 300, (uint64_t)i % 300 + 3, q) == 0, "set");
		b = ps_store_lookup_borrow(s, (uint64_t)i % 300 + 1);
		TCHECK(b == q, "borrow");
		TCHECK(ps_store_set(s, 0, 400, NULL) == 0, "remove");
		TCHECK(policy_looks_alive(b, 1), "borrowed policy freed while online");
		if (i % 1000 == 999)
			ps_qsbr_quiescent();
	}
	ps_store_synchronize(s); /* goes offline for the wait, and back */
	TCHECK(ps_qsbr_thread_is_online(), "back online after synchronize");
	TCHECK(ps_policy_refcount(q) == 1, "refcount %ld", ps_policy_refcount(q));
	ps_qsbr_thread_offline();
	ps_policy_put(q);
	return NULL;
}

Test(rcu_store, qsbr_online_thread_sets, .timeout = 60)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, qsbr_online_setter, s), 0);
	pthread_join(t, NULL);
	ps_store_destroy(s);
}

/* One set on @s: the index nodes it built and what it retired (ps_store_stats()). */
static void set_counted(struct ps_store *s, uint64_t a, uint64_t b, struct ps_policy *pol,
		uint64_t *copied, uint64_t *retired)
{
	struct ps_store_stats st0, st1;

	cr_assert_eq(ps_store_stats(s, &st0), 0);
	cr_assert_eq(ps_store_set(s, a, b, pol), 0);
	cr_assert_eq(ps_store_stats(s, &st1), 0);
	*copied = st1.nodes_copied - st0.nodes_copied;
	*retired = st1.nodes_retired - st0.nodes_retired;
}

/*
 * Suspicion: the stats count as retired the spare that carries the old
 * policy reference of a range given a new one in place, which no set
 * took out of the tree.  Each index node a set built here replaces one,
 * so what it retired beyond what it built is the ranges it unlinked: none
 * for a new policy, one for a removal, two for a range set over three.
 */
RCU_TEST(stats_count_what_sets_take_out, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);
	uint64_t copied, retired;
	int i;

	cr_assert_not_null(s);
	/* Filled front to back: full leaves of 16 ranges. */
	for (i = 0; i < 64; i++)
		cr_assert_eq(ps_store_set(s, 1000 + 10 * (uint64_t)i, 1005 + 10 * (uint64_t)i, a), 0);
	set_counted(s, 1000, 1005, b, &copied, &retired);
	cr_expect_eq(retired, copied, "a new policy: %" PRIu64 " retired, %" PRIu64 " built",
			retired, copied);
	set_counted(s, 1200, 1205, NULL, &copied, &retired);
	cr_expect_eq(retired, copied + 1, "a removal: %" PRIu64 " retired, %" PRIu64 " built",
			retired, copied);
	set_counted(s, 1400, 1425, b, &copied, &retired);
	cr_expect_eq(retired, copied + 2, "three ranges in one: %" PRIu64 " retired, %" PRIu64
			" built", retired, copied);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
}
