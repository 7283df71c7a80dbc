// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * ps_store_next() on the RCU stores: an answer from one version
 * (test_rcu_store.c says how).
 */
#include "compiler.h"
#include "rcu_store_test.h"

/* ---- 12. next(): an answer from one version ---------------------------------------- */

/*
 * An index of two levels: 40 ranges [8 i, 8 i + 1) set in ascending order
 * (policy q), so that its leaves are full: [0, 1) .. [120, 121) in the
 * first, [128, 129) first in the second.  next(125) is [128, 129): no
 * range after 125 in the first leaf, so the walk takes the second's first.
 * Then `set [126, 127)` overflows the first leaf, which splits: the root is
 * copied and published; and `set [128, 129)` to a new policy stores it in
 * place in the second leaf, which the old root and the new one share.
 * next(125) is [128, 129) (q) before the first set and [126, 127) after it:
 * [128, 129) with the new policy is the answer of no version.
 */
#define NEXT_RANGES 40

static void next_tree_build(struct ps_store *s, struct ps_policy *q)
{
	const struct ps_ix_node *root;
	uint64_t i;

	for (i = 0; i < NEXT_RANGES; i++)
		cr_assert_eq(ps_store_set(s, 8 * i, 8 * i + 1, q), 0);
	root = s->ix.node;
	cr_assert(root && root->height == 1 && root->n >= 2 &&
					((const struct ps_ix_inner *)(const void *)root)->piv[0] == 128,
			"the test needs two levels with the second leaf at [128, 129)");
}

/* The test holds one thread (next_holder) at PSI_TP_RCU_NEXT_WALK, up to @max times. */
struct next_hold {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int max, paused, released;
};

static struct next_hold *next_hold_now;

static __thread bool next_holder;

static void next_hook(enum psi_test_point point)
{
	struct next_hold *h = next_hold_now;

	if (point != PSI_TP_RCU_NEXT_WALK || !next_holder || !h)
		return;
	pthread_mutex_lock(&h->m);
	if (h->paused < h->max) {
		int n = ++h->paused;

		pthread_cond_broadcast(&h->cv);
		while (h->released < n)
			pthread_cond_wait(&h->cv, &h->m);
	}
	pthread_mutex_unlock(&h->m);
}

/* Wait until the reader stopped for the @n-th time (false after 20 s). */
static bool next_wait_paused(struct next_hold *h, int n)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	pthread_mutex_lock(&h->m);
	while (h->paused < n && ret == 0)
		ret = pthread_cond_timedwait(&h->cv, &h->m, &ts);
	ret = h->paused >= n;
	pthread_mutex_unlock(&h->m);
	return ret;
}

static void next_release(struct next_hold *h)
{
	pthread_mutex_lock(&h->m);
	h->released++;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->m);
}

struct next_reader {
	struct ps_store *s;
	bool borrow;
	int ret;
	uint64_t start, end;
	const struct ps_policy *pol; /* compared only, never used */
};

static void *next_reader_fn(void *arg)
{
	struct next_reader *r = arg;

	next_holder = true;
	if (r->borrow) {
		const struct ps_policy *pol = NULL;

		ps_store_read_lock(r->s);
		r->ret = ps_store_next_borrow(r->s, 125, &r->start, &r->end, &pol);
		r->pol = pol;
		ps_store_read_unlock(r->s);
	} else {
		struct ps_policy *pol = NULL;

		r->ret = ps_store_next(r->s, 125, &r->start, &r->end, &pol);
		r->pol = pol;
		ps_policy_put(pol);
	}
	return NULL;
}

static uint64_t root_publications(struct ps_store *s)
{
	struct ps_store_stats st;

	cr_assert_eq(ps_store_stats(s, &st), 0);
	return st.root_publications;
}

/*
 * Under valgrind's thread checkers (an annotated build) every set
 * publishes at the root (rcu_store_update.c): no reader meets a later set in
 * a child slot, and the tests that stage one have nothing to stage.
 */
static void skip_unless_child_publications(enum ps_sync sync)
{
	struct ps_store *s = ps_store_create(sync);
	struct ps_policy *p = ps_test_bind(0), *q = ps_test_bind(1);
	uint64_t roots;
	bool below;

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 10, 11, p), 0);
	cr_assert_eq(ps_store_set(s, 5, 6, p), 0);
	cr_assert_eq(ps_store_set(s, 15, 16, p), 0);
	roots = root_publications(s);
	cr_assert_eq(ps_store_set(s, 5, 6, q), 0); /* a new policy: in place, or a copy at the root */
	below = root_publications(s) == roots;
	ps_store_destroy(s);
	ps_policy_put(p);
	ps_policy_put(q);
	if (!below)
		cr_skip_test("every set publishes at the root here (valgrind's thread checkers)");
}

/*
 * A next() that loaded the root holds it while the two sets of next_tree
 * publish: its answer must be that of one version, [128, 129) with q or
 * [126, 127), never [128, 129) with the new policy.  Counted and borrowed.
 */
RCU_TEST(next_beside_two_sets_is_one_version, .timeout = 60)
{
	struct ps_policy *p1 = ps_test_bind(1), *p2 = ps_test_bind(2);
	struct ps_policy *q = ps_test_bind(3);
	int borrow;

	skip_unless_child_publications(*sync);
	for (borrow = 0; borrow < 2; borrow++) {
		struct next_hold h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, 0 };
		struct next_reader r = { .borrow = borrow };
		uint64_t roots;
		pthread_t t;

		r.s = ps_store_create(*sync);
		cr_assert_not_null(r.s);
		next_tree_build(r.s, q);
		next_hold_now = &h;
		PSI_STORE_RELEASE(psi_test_hook, next_hook);
		cr_assert_eq(pthread_create(&t, NULL, next_reader_fn, &r), 0);
		cr_assert(next_wait_paused(&h, 1), "the reader never reached its walk");
		roots = root_publications(r.s);
		cr_assert_eq(ps_store_set(r.s, 126, 127, p1), 0);
		cr_assert_eq(root_publications(r.s), roots + 1,
				"the test needs the first set at the root");
		cr_assert_eq(ps_store_set(r.s, 128, 129, p2), 0);
		cr_assert_eq(root_publications(r.s), roots + 1,
				"the test needs the second set below the root");
		next_release(&h);
		pthread_join(t, NULL);
		PSI_STORE_RELEASE(psi_test_hook, NULL);
		next_hold_now = NULL;
		cr_assert_eq(r.ret, 0);
		cr_assert(r.start == 126 && r.end == 127 && r.pol == p1,
				"%s, %s: next(125) returned [%" PRIu64 ", %" PRIu64
				"), the answer of no version ([126, 127) after the sets)",
				ps_sync_name(*sync), borrow ? "borrowed" : "counted", r.start,
				r.end);
		ps_store_destroy(r.s);
	}
	cr_assert_eq(ps_policy_refcount(p1), 1);
	cr_assert_eq(ps_policy_refcount(p2), 1);
	ps_policy_put(p1);
	ps_policy_put(p2);
	ps_policy_put(q);
}

/*
 * A writer that publishes during every attempt of a next() does not
 * starve it: after a few attempts the reader announces its walk, sets
 * publish at the root from then on, and the answer is that of the version
 * the walk loaded (the two sets of next_tree made meanwhile are not seen).
 */
RCU_TEST(next_beside_flat_out_writer_ends_announced, .timeout = 60)
{
	struct ps_policy *p1 = ps_test_bind(1), *p2 = ps_test_bind(2);
	struct ps_policy *q = ps_test_bind(3);
	struct next_hold h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 64, 0, 0 };
	struct next_reader r = { .borrow = false };
	bool announced = false;
	pthread_t t;
	int n;

	skip_unless_child_publications(*sync);
	r.s = ps_store_create(*sync);
	cr_assert_not_null(r.s);
	next_tree_build(r.s, q);
	next_hold_now = &h;
	PSI_STORE_RELEASE(psi_test_hook, next_hook);
	cr_assert_eq(pthread_create(&t, NULL, next_reader_fn, &r), 0);
	for (n = 1; n <= h.max && !announced; n++) {
		uint64_t roots;

		cr_assert(next_wait_paused(&h, n), "attempt %d never came", n);
		roots = root_publications(r.s);
		/* A new policy for a range: in place, unless announced (a copy at the root). */
		cr_assert_eq(ps_store_set(r.s, 16, 17, (n & 1) ? p2 : q), 0);
		announced = root_publications(r.s) != roots;
		if (announced) {
			cr_assert_eq(ps_store_set(r.s, 126, 127, p1), 0);
			cr_assert_eq(ps_store_set(r.s, 128, 129, p2), 0);
			cr_assert_eq(root_publications(r.s), roots + 3,
					"sets beside an announced walk publish at the root");
		}
		next_release(&h);
	}
	pthread_join(t, NULL);
	PSI_STORE_RELEASE(psi_test_hook, NULL);
	next_hold_now = NULL;
	cr_assert(announced, "the reader retried %d times without announcing its walk", h.max);
	cr_assert_gt(n, 3, "the reader announced its walk before it retried");
	cr_assert_eq(r.ret, 0);
	cr_assert(r.start == 128 && r.end == 129 && r.pol == q,
			"next(125) returned [%" PRIu64 ", %" PRIu64 "), not the version its walk loaded",
			r.start, r.end);
	ps_store_destroy(r.s);
	ps_policy_put(p1);
	ps_policy_put(p2);
	ps_policy_put(q);
}

/*
 * Beside a writer: readers' next() answers each belong to one of the
 * versions the writer makes.  The writer repeats one cycle: a batch that
 * puts back the cycle's first state (one publication), then NEXT_CYCLE
 * random sets and removals; each answer must be that of one of the
 * NEXT_CYCLE + 1 states.  More readers than CPUs, so some are preempted
 * in the middle of a walk.
 */
#define NEXT_PAGES 512
#define NEXT_CYCLE 24
#define NEXT_READERS 4

struct next_load {
	struct ps_store *s;
	struct ps_model states[NEXT_CYCLE + 1];
	uint64_t sets[NEXT_CYCLE][2];
	struct ps_policy *setpol[NEXT_CYCLE];
	struct ps_set_op reset[PS_MODEL_MAX + 1];
	size_t nreset;
	int stop;
	long answers;
};

/* The model's next(): the first range ending after @idx (-ENOENT: none). */
static int model_next(const struct ps_model *m, uint64_t idx, const struct ps_model_range **out)
{
	int i;

	for (i = 0; i < m->n; i++) {
		if (m->r[i].end > idx) {
			*out = &m->r[i];
			return 0;
		}
	}
	return -ENOENT;
}

static bool next_answer_ok(const struct next_load *l, uint64_t idx, int ret, uint64_t start,
		uint64_t end, const struct ps_policy *pol)
{
	int k;

	for (k = 0; k <= NEXT_CYCLE; k++) {
		const struct ps_model_range *m;
		int mret = model_next(&l->states[k], idx, &m);

		if (mret == ret && (ret || (m->start == start && m->end == end && m->pol == pol)))
			return true;
	}
	return false;
}

static void *next_load_writer(void *arg)
{
	struct next_load *l = arg;
	long cycles = ps_test_iters(1500), c;
	int k;

	for (c = 0; c < cycles; c++) {
		TCHECK(ps_store_set_many(l->s, l->reset, l->nreset) == 0, "reset");
		for (k = 0; k < NEXT_CYCLE; k++)
			TCHECK(ps_store_set(l->s, l->sets[k][0], l->sets[k][1], l->setpol[k]) == 0,
					"set %d", k);
	}
	PSI_STORE_RELEASE(l->stop, 1);
	return NULL;
}

static void *next_load_reader(void *arg)
{
	struct next_load *l = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long n = 0;

	while (!PSI_LOAD_ACQUIRE(l->stop)) {
		uint64_t idx = ps_test_rand(&seed) % (NEXT_PAGES + 8), start = 0, end = 0;
		int ret;

		if (n & 1) {
			const struct ps_policy *pol = NULL;

			ps_store_read_lock(l->s);
			ret = ps_store_next_borrow(l->s, idx, &start, &end, &pol);
			TCHECK(next_answer_ok(l, idx, ret, start, end, pol),
					"next_borrow(%" PRIu64 ") = %d [%" PRIu64 ", %" PRIu64
					"): the answer of no version",
					idx, ret, start, end);
			ps_store_read_unlock(l->s);
		} else {
			struct ps_policy *pol = NULL;

			ret = ps_store_next(l->s, idx, &start, &end, &pol);
			TCHECK(next_answer_ok(l, idx, ret, start, end, pol),
					"next(%" PRIu64 ") = %d [%" PRIu64 ", %" PRIu64
					"): the answer of no version",
					idx, ret, start, end);
			ps_policy_put(pol);
		}
		n++;
	}
	PSI_FETCH_ADD(l->answers, n, RELAXED);
	return NULL;
}

RCU_TEST(next_beside_writer_answers_one_version, .timeout = 120)
{
	struct ps_policy *pols[4] = { ps_test_bind(0), ps_test_bind(1), ps_test_bind(2),
		ps_test_bind(3) };
	static struct next_load l;
	uint64_t seed = 0x5eed1234abcdULL;
	pthread_t w, rd[NEXT_READERS];
	int i, k;

	memset(&l, 0, sizeof(l));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&l.stop, sizeof(l.stop)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&l.answers, sizeof(l.answers));
	l.s = ps_store_create(*sync);
	cr_assert_not_null(l.s);
	/* The first state: 64 ranges of 1 .. 6 pages with gaps, random policies. */
	ps_model_init(&l.states[0]);
	l.reset[l.nreset++] = (struct ps_set_op){ 0, UINT64_MAX, NULL };
	for (i = 0; i < 64; i++) {
		uint64_t a = (uint64_t)i * 8 + ps_test_rand(&seed) % 2;
		uint64_t b = a + 1 + ps_test_rand(&seed) % 6;
		struct ps_policy *p = pols[ps_test_rand(&seed) % 4];

		cr_assert_eq(ps_model_set(&l.states[0], a, b, p), 0);
		l.reset[l.nreset++] = (struct ps_set_op){ a, b, p };
	}
	/* The cycle: grows, splits, inserts into gaps, removals. */
	for (k = 0; k < NEXT_CYCLE; k++) {
		uint64_t a = ps_test_rand(&seed) % NEXT_PAGES;
		uint64_t b = a + 1 + ps_test_rand(&seed) % ((k % 4) ? 5 : 40);
		struct ps_policy *p = k % 5 == 4 ? NULL : pols[ps_test_rand(&seed) % 4];

		l.sets[k][0] = a;
		l.sets[k][1] = b;
		l.setpol[k] = p;
		l.states[k + 1] = l.states[k];
		cr_assert_eq(ps_model_set(&l.states[k + 1], a, b, p), 0);
	}
	cr_assert_eq(ps_store_set_many(l.s, l.reset, l.nreset), 0);
	ps_test_spawn(rd, NEXT_READERS, next_load_reader, &l, 0);
	cr_assert_eq(pthread_create(&w, NULL, next_load_writer, &l), 0);
	pthread_join(w, NULL);
	ps_test_join(rd, NEXT_READERS);
	cr_assert_gt(l.answers, 0);
	ps_store_destroy(l.s);
	for (i = 0; i < 4; i++) {
		cr_assert_eq(ps_policy_refcount(pols[i]), 1);
		ps_policy_put(pols[i]);
	}
}
