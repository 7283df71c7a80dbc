// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The RCU stores (src/sync/sync_cow-impl.h, src/locks/rcu_reclaim.c) and the
 * in-place variants' victim reuse, adversarially.
 *
 * Each test states the suspicion it checks.  A test that hangs is failed by
 * Criterion's timeout (or, in a forked child, by alarm()).
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "policy_internal.h"
#include "rcu_reclaim.h"
#include "store_internal.h"
#include "testpoint.h"
#include "testutil.h"

/* Constants of src/sync/sync_cow-impl.h (not exported): keep in step. */
#define COW_PENDING_MAX (1 << 18)
#define COW_DEPOT_MAX 16384
#define COW_REFILL 256
#define COW_RECS_MAX 64
/* A retire record: its header and slots, at most the size of 40 pointers. */
#define COW_REC_BYTES (40 * sizeof(void *))

static enum ps_sync rcu_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

#define RCU_TEST(name, ...) SYNCS_TEST(rcu_syncs, cow, name, ##__VA_ARGS__)
#define ALL_TEST(name, ...) VARIANT_TEST(cow, name, ##__VA_ARGS__)

static double now_s(void)
{
	return (double)ps_test_now_ns() * 1e-9;
}

/* Retire at least @n ranges: set and remove one-page ranges. */
static void churn(struct ps_store *s, struct ps_policy *p, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		cr_assert_eq(ps_store_set(s, 1000000 + (uint64_t)i, 1000001 + (uint64_t)i, p), 0);
		cr_assert_eq(ps_store_set(s, 1000000 + (uint64_t)i, 1000001 + (uint64_t)i, NULL), 0);
	}
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

/* Destroy right after sets that handed records to the reclaim thread. */
RCU_TEST(destroy_with_records_in_flight, .timeout = 60)
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

Test(cow, qsbr_online_thread_sets, .timeout = 60)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, qsbr_online_setter, s), 0);
	pthread_join(t, NULL);
	ps_store_destroy(s);
}

/* ---- 5. fork ------------------------------------------------------------------------ */

static void expect_child_ok(pid_t pid, const char *what)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "%s: child killed by signal %d (hang: alarm, or crash)", what,
			WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0, "%s: child failed at step %d", what,
			WEXITSTATUS(status));
}

/* The child: sets, synchronize, destroy on a store of its own; a hang is killed by alarm(). */
static int child_work(enum ps_sync sync, struct ps_policy *p)
{
	struct ps_store *s;
	int i;

	alarm(10);
	s = ps_store_create(sync);
	if (!s)
		return 1;
	for (i = 0; i < 600; i++)
		if (ps_store_set(s, (uint64_t)i, (uint64_t)i + 1, p) ||
				ps_store_set(s, (uint64_t)i, (uint64_t)i + 1, NULL))
			return 2;
	if (ps_store_synchronize(s))
		return 3;
	if (ps_policy_refcount(p) != 1)
		return 4;
	ps_store_destroy(s);
	return 0;
}

struct online_idle {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int state;
};

/*
 * Online and running (QSBR's rule: an online thread reports quiescent
 * states and goes offline before it blocks), until the fork is over.
 */
static void *online_idle_thread(void *arg)
{
	struct online_idle *o = arg;

	TCHECK(ps_qsbr_thread_online() == 0, "online");
	ps_qsbr_quiescent();
	pthread_mutex_lock(&o->m);
	o->state = 1;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->m);
	while (__atomic_load_n(&o->state, __ATOMIC_ACQUIRE) != 2) {
		ps_qsbr_quiescent();
		sched_yield();
	}
	ps_qsbr_thread_offline();
	return NULL;
}

/*
 * docs/fork.md promise 3: another thread is online (RCU_QSBR) at the fork;
 * the child may read and destroy.  Here the parent's sets had handed a
 * record to the QSBR reclaim thread, whose grace period waits for the
 * online thread; fork()'s prepare handler waits for that grace period
 * (gp_lock), which ends at the online thread's next quiescent state (an
 * online thread that blocked instead would break QSBR's rule and stall
 * fork as it stalls every grace period).  The online thread runs until
 * fork() returns.
 */
Test(cow, fork_beside_online_qsbr_thread_with_record_in_flight, .timeout = 20)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *p = ps_test_bind(1);
	struct online_idle o = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	pthread_t t;
	pid_t pid;

	cr_assert_eq(ps_store_set(s, 10, 20, p), 0);
	cr_assert_eq(pthread_create(&t, NULL, online_idle_thread, &o), 0);
	pthread_mutex_lock(&o.m);
	while (o.state != 1)
		pthread_cond_wait(&o.cv, &o.m);
	pthread_mutex_unlock(&o.m);
	churn(s, p, 400); /* hands records to the QSBR reclaim thread */
	usleep(20000);    /* its grace period now waits for the online thread */
	pid = fork();
	if (pid == 0) {
		struct ps_policy *got;

		alarm(10);
		got = ps_store_lookup(s, 15);
		_exit(got == p ? 0 : 1);
	}
	__atomic_store_n(&o.state, 2, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	expect_child_ok(pid, "online beside");
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * The forking thread itself is online (the zero-cost QSBR read path, e.g.
 * an event loop) and has set: no other application thread exists
 * (docs/fork.md case 1), but polstore's own QSBR reclaim thread is in a
 * grace period that waits for the forking thread.
 */
Test(cow, fork_from_online_qsbr_thread_after_sets, .timeout = 20)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *p = ps_test_bind(1);
	pid_t pid;

	cr_assert_eq(ps_qsbr_thread_online(), 0);
	churn(s, p, 400); /* online: records go to the reclaim thread */
	usleep(20000);
	pid = fork();
	if (pid == 0) {
		ps_qsbr_thread_offline();
		/* The parent's records hold references: let them go too. */
		if (ps_store_synchronize(s))
			_exit(5);
		_exit(child_work(PS_SYNC_RCU_QSBR, p));
	}
	ps_qsbr_thread_offline();
	expect_child_ok(pid, "online forker");
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * A writer flat out on store A (another thread) at every fork; the child
 * uses only its own store B of the same flavour (allowed: docs/fork.md,
 * "the child may use the stores no thread was using").  B's synchronize
 * runs the reclaim queue copied from the parent, which holds A's records:
 * their release may find the depot's lock held by the frozen writer, and
 * must not wait for it (rec_release() only tries it).
 */
struct flat_writer {
	struct ps_store *s;
	struct ps_policy *p;
	volatile int stop;
};

static void *flat_writer_fn(void *arg)
{
	struct flat_writer *w = arg;
	uint64_t i = 0;

	while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
		TCHECK(ps_store_set(w->s, i % 5000, i % 5000 + 3, (i & 1) ? w->p : NULL) == 0, "set");
		i++;
	}
	return NULL;
}

RCU_TEST(fork_while_writer_flat_out_child_uses_other_store, .timeout = 120)
{
	struct flat_writer w = { ps_store_create(*sync), ps_test_bind(1), 0 };
	struct ps_policy *q = ps_test_bind(2);
	pthread_t t;
	int i, hung = 0, nforks = (int)ps_test_iters(300);
	double max_fork_s = 0;

#if defined(__SANITIZE_ADDRESS__)
	/*
	 * ASan's allocator is not fork-safe: a child forked while the writer
	 * holds its size-class lock hangs in malloc (seen: FutexWait in
	 * SizeClassAllocator64::GetFromAllocator).  Run in a plain build.
	 */
	cr_skip_test("fork beside a busy allocating thread: not under ASan");
#endif
	/*
	 * Under memcheck (--trace-children) every child reports what the
	 * writer, frozen mid-set, had allocated as lost: only its stack, which
	 * the child does not have, pointed to it.  That is the test's design
	 * (the writer is always busy), so the plain build runs it.
	 */
	if (ps_test_scale() < 0.5)
		cr_skip_test("fork beside a thread in mid-allocation: not under valgrind");

	cr_assert_eq(pthread_create(&t, NULL, flat_writer_fn, &w), 0);
	usleep(50000);
	for (i = 0; i < nforks; i++) {
		double t0 = now_s(), dt;
		pid_t pid = fork();
		int status;

		cr_assert_neq(pid, -1);
		if (pid == 0)
			_exit(child_work(*sync, q));
		dt = now_s() - t0;
		if (dt > max_fork_s)
			max_fork_s = dt;
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			hung++;
			cr_log_error("child: %s %d", WIFEXITED(status) ? "exit" : "signal",
					WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		}
		if (hung)
			break;
		usleep(1000);
	}
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	cr_log_info("%s: longest fork() %.3f s", ps_sync_name(*sync), max_fork_s);
	cr_assert_eq(hung, 0, "fork %d: the child hung or failed (%s)", i, ps_sync_name(*sync));
	/* fork() must not wait for a writer that never stops (gp_lock is held while work remains). */
	cr_assert_lt(max_fork_s, 1.0, "fork() took %.3f s beside a busy writer", max_fork_s);
	ps_store_synchronize(w.s);
	ps_store_destroy(w.s);
	ps_policy_put(w.p);
	ps_policy_put(q);
}

/*
 * A writer of store A is inside an update at the fork: it holds A's
 * writer lock, its index nodes and record are built and not published,
 * and A's records wait in the reclaim queue the child inherits.  The
 * child's reader of A sees the last published version, its own store B
 * works, and its reclaim thread releases A's records: nothing in the
 * child may wait for what the frozen writer holds, or it hangs until
 * alarm().  The writer is held at the test point inside the update.
 */
struct update_hold {
	pthread_mutex_t m;
	pthread_cond_t cv;
	struct ps_store *s;
	struct ps_policy *p;
	int held;     /* under @m: the writer waits at the test point */
	int release;  /* under @m: it may go on */
	int stop;     /* atomic */
};

static struct update_hold *update_hold_now;
static __thread bool update_holder;

static void update_hook(enum psi_test_point point)
{
	struct update_hold *h = update_hold_now;

	if (point != PSI_TP_COW_UPDATE_BUILT || !update_holder || !h)
		return;
	pthread_mutex_lock(&h->m);
	if (!h->release) {
		h->held = 1;
		pthread_cond_broadcast(&h->cv);
		while (!h->release)
			pthread_cond_wait(&h->cv, &h->m);
	}
	pthread_mutex_unlock(&h->m);
}

static void *update_writer(void *arg)
{
	struct update_hold *h = arg;
	uint64_t i = 0;

	update_holder = true;
	while (!__atomic_load_n(&h->stop, __ATOMIC_RELAXED)) {
		int ret = ps_store_set(h->s, i % 61, i % 61 + 3, (i & 1) ? h->p : NULL);

		TCHECK(ret == 0, "set: %d", ret);
		i++;
	}
	return NULL;
}

RCU_TEST(fork_while_writer_inside_update, .timeout = 60)
{
	struct update_hold h = { .m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	struct ps_policy *q;
	struct timespec ts;
	pthread_t w;
	pid_t pid;
	int ret = 0;

	/*
	 * The frozen writer's unpublished nodes, record and spares are lost to
	 * the child by design (docs/fork.md), which memcheck, following the
	 * child, reports as leaks; the native and sanitizer runs check the
	 * child's work.
	 */
	if (ps_test_scale() < 1)
		cr_skip_test("memcheck counts the frozen writer's memory as the child's leak");
	q = ps_test_bind(2);
	h.s = ps_store_create(*sync);
	h.p = ps_test_bind(1);
	update_hold_now = &h;
	__atomic_store_n(&psi_test_hook, update_hook, __ATOMIC_RELEASE);
	cr_assert_eq(pthread_create(&w, NULL, update_writer, &h), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	pthread_mutex_lock(&h.m);
	while (!h.held && ret == 0)
		ret = pthread_cond_timedwait(&h.cv, &h.m, &ts);
	pthread_mutex_unlock(&h.m);
	cr_assert(h.held, "the writer never reached the test point");
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		/* A's last published version: ranges [i % 61, i % 61 + 3) come and go, none past 64. */
		if (ps_store_lookup_node(h.s, 70, 0) != 0)
			_exit(3);
		_exit(child_work(*sync, q));
	}
	pthread_mutex_lock(&h.m);
	h.release = 1;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.m);
	expect_child_ok(pid, "child beside a writer inside an update");
	__atomic_store_n(&h.stop, 1, __ATOMIC_RELAXED);
	pthread_join(w, NULL);
	__atomic_store_n(&psi_test_hook, NULL, __ATOMIC_RELEASE);
	update_hold_now = NULL;
	ps_store_synchronize(h.s);
	ps_store_destroy(h.s);
	ps_policy_put(h.p);
	cr_assert_eq(ps_policy_refcount(q), 1);
	ps_policy_put(q);
}

/* ---- 6. allocation failure at every allocation of a set -------------------------- */

/* The store before each attempt: a failed set must leave it so (testutil.h's model). */
static struct ps_model before_set;

/*
 * For each kind of set (split, trim, cover many, victim, remove all, at
 * the top edge), fail the k-th allocation for k = 0, 1, ... until the set
 * succeeds: every failure must return -ENOMEM with the store and every
 * refcount exactly as before.  The store is fresh and synchronized first,
 * so the spare pool is small and the set must allocate.
 */
ALL_TEST(alloc_failure_every_allocation, .timeout = 300)
{
	struct ps_policy *pols[3] = { ps_test_bind(0), ps_test_bind(1), ps_test_bind(2) };
	static const uint64_t sets[][2] = {
		{ 503, 507 },        /* split */
		{ 505, 2000 },       /* trims and removals */
		{ 0, 4000 },         /* cover everything: a victim and many removals */
		{ 1000, 1010 },      /* exactly one range: victim */
		{ 0, UINT64_MAX },   /* everything, to the top */
		{ UINT64_MAX - 1, UINT64_MAX },
	};
	unsigned si;
	int pi;

	for (si = 0; si < sizeof(sets) / sizeof(sets[0]); si++) {
		for (pi = 0; pi < 2; pi++) {
			struct ps_store *s = ps_store_create(*sync);
			struct ps_policy *p = pi ? pols[2] : NULL;
			long ref[3], k;
			int i, ret = -ENOMEM;

			for (i = 0; i < 400; i++)
				cr_assert_eq(ps_store_set(s, 10 * (uint64_t)i, 10 * (uint64_t)i + 10,
						pols[i & 1]), 0);
			cr_assert_eq(ps_store_set(s, UINT64_MAX - 5, UINT64_MAX, pols[0]), 0);
			ps_store_synchronize(s);
			for (k = 0; ret == -ENOMEM; k++) {
				char why[160];

				cr_assert_eq(ps_model_read(&before_set, s), 0);
				for (i = 0; i < 3; i++)
					ref[i] = ps_policy_refcount(pols[i]);
				ps_test_alloc_fail_after(k);
				ret = ps_store_set(s, sets[si][0], sets[si][1], p);
				ps_test_alloc_restore();
				cr_assert(ret == 0 || ret == -ENOMEM, "set %u: %d", si, ret);
				if (ret)
					/* A set that failed released nothing: no grace period needed. */
					for (i = 0; i < 3; i++)
						cr_assert_eq(ps_policy_refcount(pols[i]), ref[i],
								"set %u k %ld: policy %d count changed",
								si, k, i);
				if (ret)
					cr_assert(ps_model_matches(s, &before_set, why,
								  sizeof(why)),
							"set %u k %ld: ranges changed: %s", si, k,
							why);
				cr_assert_eq(ps_store_check(s, NULL), 0);
				cr_assert_lt(k, 100000);
			}
			cr_log_info("%s set %u pol %d: succeeded after %ld failures",
					ps_sync_name(*sync), si, pi, k - 1);
			ps_store_synchronize(s);
			ps_store_destroy(s);
		}
	}
	for (pi = 0; pi < 3; pi++) {
		cr_assert_eq(ps_policy_refcount(pols[pi]), 1);
		ps_policy_put(pols[pi]);
	}
}

/* ---- 7. memory bound under a flat-out writer -------------------------------------- */

/* Reader threads on a store until @stop (sections 7 and 9); @reads: their lookups. */
struct store_readers {
	struct ps_store *s;
	int stop;   /* atomic */
	long reads; /* atomic */
};

/*
 * ps_set_alloc_ops() after every store is destroyed and ps_rcu_barrier():
 * nothing the old allocator gave is left for the new one to free.  A
 * writer thread that stays alive keeps spare ranges between its sets, and
 * released chunks wait in the flavour's depot; ps_set_alloc_ops() gives
 * both back to the allocator they came from, taking the depot's lock
 * (which the reclaim thread may hold, emptying it) rather than trying it.
 */
struct spares_writer {
	struct ps_store *s;
	struct ps_policy *p;
	sem_t done, go;
};

static void *spares_writer(void *arg)
{
	struct spares_writer *w = arg;
	int i;

	for (i = 0; i < 2000; i++)
		TCHECK(!ps_store_set(w->s, (uint64_t)(i % 97) * 3, (uint64_t)(i % 97) * 3 + 5,
				       (i & 1) ? w->p : NULL),
				"set");
	sem_post(&w->done);
	while (sem_wait(&w->go))
		;
	return NULL;
}

RCU_TEST(alloc_ops_switch_after_destroy_frees_with_old, .timeout = 60)
{
	struct spares_writer w;
	pthread_t t;
	long live;

	w.p = ps_test_bind(1);
	sem_init(&w.done, 0, 0);
	sem_init(&w.go, 0, 0);
	ps_test_alloc_install();
	w.s = ps_store_create(*sync);
	cr_assert_not_null(w.s);
	cr_assert_eq(pthread_create(&t, NULL, spares_writer, &w), 0);
	while (sem_wait(&w.done))
		;
	ps_store_destroy(w.s);
	cr_assert_eq(ps_rcu_barrier(), 0);
	ps_test_alloc_restore();
	live = ps_test_alloc_live();
	sem_post(&w.go);
	pthread_join(t, NULL);
	cr_expect_eq(live, 0, "%s: %ld blocks of the old allocator left for the new one to free",
			ps_sync_name(*sync), live);
	ps_policy_put(w.p);
}

/* Readers with long sections now and then: the reclaim thread's grace periods wait for them. */
static void *mem_reader_fn(void *arg)
{
	struct store_readers *r = arg;
	uint64_t seed = 77;

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		int i;

		ps_store_read_lock(r->s);
		for (i = 0; i < 1000; i++)
			(void)ps_store_lookup_borrow(r->s, ps_test_rand(&seed) % 20000);
		if (ps_test_rand(&seed) % 8 == 0)
			usleep(3000);
		ps_store_read_unlock(r->s);
		__atomic_fetch_add(&r->reads, 1000, __ATOMIC_RELAXED);
	}
	return NULL;
}

RCU_TEST(memory_bounded_under_flat_out_writer, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *pols[2] = { ps_test_bind(0), ps_test_bind(1) };
	struct store_readers r = { .s = s };
	size_t empty_mem = ps_store_memory(s);
	uint64_t seed = 3;
	size_t maxmem = 0, maxcount = 0, maxindex = 0, bound;
	double t0, secs = ps_test_scale() < 1 ? 0.5 : 2.0;
	long sets = 0;
	pthread_t t;

#if !defined(__SANITIZE_ADDRESS__)
	size_t heap0 = mallinfo2().uordblks, maxheap = 0;
#endif

	cr_assert_eq(pthread_create(&t, NULL, mem_reader_fn, &r), 0);
	t0 = now_s();
	while (now_s() - t0 < secs) {
		int i;

		for (i = 0; i < 100; i++) {
			uint64_t a = ps_test_rand(&seed) % 20000, len = 1 + ps_test_rand(&seed) % 16;

			cr_assert_eq(ps_store_set(s, a, a + len, (i & 3) ? pols[i & 1] : NULL), 0);
			sets++;
		}
		if (ps_store_count(s) > maxcount)
			maxcount = ps_store_count(s);
		/* The read index apart: bounded by itself below. */
		if (ps_store_memory(s) - ps_test_index_bytes(s) > maxmem)
			maxmem = ps_store_memory(s) - ps_test_index_bytes(s);
		if (ps_test_index_bytes(s) > maxindex)
			maxindex = ps_test_index_bytes(s);
#if !defined(__SANITIZE_ADDRESS__)
		if (mallinfo2().uordblks - heap0 > maxheap)
			maxheap = mallinfo2().uordblks - heap0;
#endif
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	/*
	 * The store holds its live ranges and its read index, nothing else
	 * (its spares are the writing thread's, what it retired is the
	 * reclaim thread's).  The index in proportion: its leaves stay on
	 * average at least a quarter full (a small leaf joins a neighbour).
	 */
	bound = empty_mem + maxcount * sizeof(struct ps_range);
	cr_log_info("%s: %ld sets in %.1f s, %ld lookups, max %zu ranges, max memory %zu (bound %zu), "
		    "max index %zu",
			ps_sync_name(*sync), sets, secs, r.reads, maxcount, maxmem, bound, maxindex);
	cr_assert_leq(maxmem, bound);
	cr_assert_leq(maxindex, maxcount * (448 + 256) / 4 + 4096);
#if !defined(__SANITIZE_ADDRESS__)
	/*
	 * The heap itself: live ranges; what is retired and not yet
	 * released (at most COW_PENDING_MAX before a set waits, plus one
	 * record); the depot; the writer's pool (the keep of its sets' need,
	 * which stays below 1024 here, twice over before a trim, plus
	 * COW_REFILL) and its records, each with its slots.
	 */
	bound = (maxcount + COW_PENDING_MAX + 64 + COW_DEPOT_MAX + 2 * (1024 + COW_REFILL)) *
				(sizeof(struct ps_range) + 16) +
		(COW_PENDING_MAX + COW_DEPOT_MAX + COW_RECS_MAX) * COW_REC_BYTES + 4096 * 8 +
		/* the index, live and retired (each node with the aligned allocation's 80 bytes) */
		2 * maxindex + (maxindex + COW_PENDING_MAX * sizeof(struct ps_range)) / 256 * 80;
	cr_log_info("%s: heap growth max %zu (bound %zu)", ps_sync_name(*sync), maxheap, bound);
	cr_assert_leq(maxheap, bound);
#endif
	ps_store_synchronize(s);
	cr_assert_eq(ps_policy_refcount(pols[0]) + ps_policy_refcount(pols[1]),
			2 + (long)ps_store_count(s));
	/* After synchronize: the store, its ranges and its index, exactly. */
	cr_assert_eq(ps_store_memory(s), empty_mem + ps_store_count(s) * sizeof(struct ps_range) +
						 ps_test_index_bytes(s));
	ps_store_destroy(s);
	ps_policy_put(pols[0]);
	ps_policy_put(pols[1]);
}

/* ---- 8. no reclaim thread: stalled records ---------------------------------------- */


/*
 * pthread_create() that fails on demand (the library is linked statically
 * into this binary, so its calls come here): the reclaim thread cannot be
 * started, and sets that may not wait keep their records "stalled".
 */
static int fail_thread_create;

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

	if (__atomic_load_n(&fail_thread_create, __ATOMIC_RELAXED))
		return EAGAIN;
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	return real(t, attr, fn, arg);
}

/*
 * Sets inside a read-side section while no reclaim thread can start: their
 * records stall on the store.  sync_cow-impl.h's cow_finish() releases them at
 * the next set that may wait for a grace period: once the section is
 * over, later sets must release them, and ps_store_memory() must count
 * them meanwhile.
 */
RCU_TEST(stalled_records_released_by_later_sets, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	size_t mem_before, mem_stalled;
	int i;

	__atomic_store_n(&fail_thread_create, 1, __ATOMIC_RELAXED);
	mem_before = ps_store_memory(s);
	ps_store_read_lock(s);
	churn(s, p, 3000); /* thousands of records, none can be handed over */
	ps_store_read_unlock(s);
	cr_assert_eq(ps_store_count(s), 0);
	mem_stalled = ps_store_memory(s);
	cr_log_info("%s: memory %zu before, %zu with stalled records, refcount %ld",
			ps_sync_name(*sync), mem_before, mem_stalled, ps_policy_refcount(p));
	/* Outside every section now: sets may wait for a grace period. */
	churn(s, q, 600);
	cr_assert_eq(ps_policy_refcount(p), 1,
			"%s: %ld references to removed ranges still held after later sets "
			"(stalled records never released but by synchronize/destroy)",
			ps_sync_name(*sync), ps_policy_refcount(p) - 1);
	ps_store_synchronize(s);
	cr_assert_eq(ps_policy_refcount(p), 1);
	cr_assert_eq(ps_policy_refcount(q), 1);
	ps_store_destroy(s);
	__atomic_store_n(&fail_thread_create, 0, __ATOMIC_RELAXED);
	(void)i;
	ps_policy_put(p);
	ps_policy_put(q);
}

/* ps_store_memory() counts every range the store holds, stalled ones too. */
RCU_TEST(memory_counts_stalled_records, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1);
	size_t mem;

	__atomic_store_n(&fail_thread_create, 1, __ATOMIC_RELAXED);
	ps_store_read_lock(s);
	churn(s, p, 3000);
	ps_store_read_unlock(s);
	mem = ps_store_memory(s);
	/* p's references beyond ours are removed ranges the store still holds. */
	cr_assert_geq(mem, sizeof(struct ps_store) +
			(size_t)(ps_policy_refcount(p) - 1) * sizeof(struct ps_range),
			"%s: memory %zu does not count %ld held removed ranges", ps_sync_name(*sync),
			mem, ps_policy_refcount(p) - 1);
	ps_store_synchronize(s);
	ps_store_destroy(s);
	__atomic_store_n(&fail_thread_create, 0, __ATOMIC_RELAXED);
	ps_policy_put(p);
}

/* Destroy and synchronize with stalled records: every reference dropped, nothing leaked. */
RCU_TEST(destroy_with_stalled_records, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1);
	int k;

	__atomic_store_n(&fail_thread_create, 1, __ATOMIC_RELAXED);
	for (k = 0; k < 2; k++) {
		struct ps_store *s = ps_store_create(*sync);

		ps_store_read_lock(s);
		churn(s, p, 2000);
		ps_store_read_unlock(s);
		if (k)
			ps_store_synchronize(s);
		ps_store_destroy(s);
		cr_assert_eq(ps_policy_refcount(p), 1);
	}
	__atomic_store_n(&fail_thread_create, 0, __ATOMIC_RELAXED);
	ps_policy_put(p);
}

/* ---- 9. in-place variants: victim reuse under lockless readers --------------------- */

static void *flip_reader(void *arg)
{
	struct store_readers *f = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		uint64_t idx = ps_test_rand(&seed) % 120;
		struct ps_policy *p = ps_store_lookup(f->s, idx);
		const struct ps_policy *b;

		if (p) {
			TCHECK(ps_policy_mode(p) == PS_MPOL_BIND && ps_policy_refcount(p) > 0,
					"counted lookup got a dead policy");
			ps_policy_put(p);
		}
		ps_store_read_lock(f->s);
		b = ps_store_lookup_borrow(f->s, idx);
		if (b)
			TCHECK(ps_policy_mode(b) == PS_MPOL_BIND && ps_policy_refcount(b) > 0,
					"borrowed a dead policy");
		ps_store_read_unlock(f->s);
		__atomic_fetch_add(&f->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * The writer gives [0, 100) a fresh policy again and again and drops its
 * own reference at once: the covered range is the victim, changed in place
 * by SEQLOCK under its readers (its policy pointer changes in place), copied
 * by RCU.  The old policy's last reference must be dropped only after the
 * readers that may have loaded it left (ASan: use after free; TCHECK: a
 * freed policy's count).
 */
ALL_TEST(victim_policy_swap_under_readers, .timeout = 60)
{
	struct store_readers f = { .s = ps_store_create(*sync) };
	pthread_t t[2];
	long i, n = ps_test_iters(100000);

	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, flip_reader, &f), 0);
	for (i = 0; i < n; i++) {
		struct ps_policy *p = ps_test_bind((int)(i % 4));

		cr_assert_eq(ps_store_set(f.s, 0, 100, p), 0);
		if (i % 16 == 0)
			cr_assert_eq(ps_store_set(f.s, 10 + (uint64_t)i % 80, 12 + (uint64_t)i % 80, p), 0);
		if (i % 64 == 0)
			cr_assert_eq(ps_store_set(f.s, 100, 120, p), 0);
		ps_policy_put(p);
	}
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(ps_store_check(f.s, NULL), 0);
	ps_store_destroy(f.s);
}

/* ---- 10. synchronize and sets from many threads ------------------------------------ */

struct many {
	struct ps_store *s;
	struct ps_policy *pols[3];
	int id;
};

static void *many_fn(void *arg)
{
	struct many *m = arg;
	uint64_t seed = 1 + (uint64_t)m->id;
	int i;

	if (m->id == 3 && ps_store_sync_kind(m->s) == PS_SYNC_RCU_QSBR)
		TCHECK(ps_qsbr_thread_online() == 0, "online");
	for (i = 0; i < 3000; i++) {
		uint64_t a = ps_test_rand(&seed) % 2000, b = a + 1 + ps_test_rand(&seed) % 50;
		struct ps_policy *got;

		TCHECK(ps_store_set(m->s, a, b, i % 5 ? m->pols[i % 3] : NULL) == 0, "set");
		got = ps_store_lookup(m->s, a);
		ps_policy_put(got);
		if (i % 300 == 0)
			TCHECK(ps_store_synchronize(m->s) == 0, "synchronize");
		if (m->id == 3)
			ps_qsbr_quiescent();
	}
	if (m->id == 3)
		ps_qsbr_thread_offline();
	return NULL;
}

ALL_TEST(synchronize_from_many_threads, .timeout = 120)
{
	struct ps_store *s = ps_store_create(*sync);
	struct many m[4];
	pthread_t t[4];
	int i;

	for (i = 0; i < 4; i++) {
		m[i].s = s;
		m[i].id = i;
		m[i].pols[0] = ps_test_bind(0);
		m[i].pols[1] = ps_test_bind(1);
		m[i].pols[2] = ps_test_bind(2);
		cr_assert_eq(pthread_create(&t[i], NULL, many_fn, &m[i]), 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_check(s, NULL), 0);
	ps_store_destroy(s);
	for (i = 0; i < 4; i++) {
		int k;

		for (k = 0; k < 3; k++) {
			cr_assert_eq(ps_policy_refcount(m[i].pols[k]), 1);
			ps_policy_put(m[i].pols[k]);
		}
	}
}

/* ---- 11. dlclose() and the reclaim threads ------------------------------------------ */

#ifdef PS_TEST_SHARED_LIB
#include <dirent.h>

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * The library is dlopen()ed, an RCU store used (its sets start the memb
 * reclaim thread) and destroyed, and the library dlclose()d: test_lifecycle
 * supports this.  The detached reclaim thread (rcu_reclaim.c) is never
 * stopped: it stays, parked in pthread_cond_wait() with its return address
 * in the unmapped library, and any wake-up of that futex word (a library
 * later mapped at the same address) runs unmapped code.
 */
static int dl_child(void)
{
	void *h = dlopen(PS_TEST_SHARED_LIB, RTLD_NOW | RTLD_LOCAL);
	struct ps_store *(*create)(enum ps_sync);
	int (*set)(struct ps_store *, uint64_t, uint64_t, struct ps_policy *);
	void (*destroy)(struct ps_store *);
	struct ps_policy *(*bind)(int, unsigned, const unsigned long *, unsigned long);
	void (*put)(struct ps_policy *);
	struct ps_policy *p;
	struct ps_store *s;
	unsigned long node0 = 1;
	int before, i;

	alarm(10);
	if (!h)
		return 1;
	before = count_threads();
	*(void **)&create = dlsym(h, "ps_store_create");
	*(void **)&set = dlsym(h, "ps_store_set");
	*(void **)&destroy = dlsym(h, "ps_store_destroy");
	*(void **)&bind = dlsym(h, "ps_policy_create");
	*(void **)&put = dlsym(h, "ps_policy_put");
	if (!create || !set || !destroy || !bind || !put)
		return 2;
	s = create(PS_SYNC_RCU);
	p = bind(PS_MPOL_BIND, 0, &node0, 2);
	if (!s || !p)
		return 3;
	for (i = 0; i < 400; i++)
		if (set(s, (uint64_t)i, (uint64_t)i + 1, p) || set(s, (uint64_t)i, (uint64_t)i + 1, NULL))
			return 4;
	destroy(s);
	put(p);
	if (dlclose(h))
		return 5;
	if (dlopen(PS_TEST_SHARED_LIB, RTLD_NOW | RTLD_NOLOAD))
		return 77;
	usleep(20000);
	return count_threads() == before ? 0 : 6;
}

Test(cow, dlclose_leaves_no_reclaim_thread, .timeout = 30)
{
	pid_t pid = fork();
	int status;

	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(dl_child());
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child killed by signal %d", WTERMSIG(status));
	if (WEXITSTATUS(status) == 77)
		cr_skip_test("dlclose() did not unmap the library");
	cr_assert_eq(WEXITSTATUS(status), 0,
			"child step %d (6: a reclaim thread outlives dlclose())", WEXITSTATUS(status));
}
#endif

/* ---- 12. next(): an answer from one version ---------------------------------------- */

/*
 * A tree whose root is [123, 125) (p0), with ranges at 15 .. 105 on its
 * left and 150 .. 450 on its right, inserted level by level so that no
 * rotation moves the root.  Then `set [123, 129)` copies the root and
 * publishes at the root, and `set [130, 131)` inserts below [150, 151),
 * publishing into a child slot of the right subtree, which the old root
 * and the new one share.  next(125) is [150, 151) before the first set and
 * [123, 129) after it: [130, 131) is the answer of no version.
 */
static const uint64_t next_tree[] = { 123, 60, 300, 30, 90, 200, 400, 15, 45, 75, 105, 150, 250,
	350, 450 };

static void next_tree_build(struct ps_store *s, struct ps_policy *p0, struct ps_policy *q)
{
	struct ps_range *root;
	size_t i;

	cr_assert_eq(ps_store_set(s, 123, 125, p0), 0);
	for (i = 1; i < sizeof(next_tree) / sizeof(next_tree[0]); i++)
		cr_assert_eq(ps_store_set(s, next_tree[i], next_tree[i] + 1, q), 0);
	root = (struct ps_range *)(void *)s->rd.tree.root.node;
	cr_assert(root && root->start == 123 && root->end == 125,
			"the test needs [123, 125) at the root");
}

/* The test holds one thread (next_holder) at PSI_TP_COW_NEXT_WALK, up to @max times. */
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

	if (point != PSI_TP_COW_NEXT_WALK || !next_holder || !h)
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
 * publishes at the root (sync_cow-impl.h): no reader meets a later set in
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
	cr_assert_eq(ps_store_set(s, 5, 6, q), 0); /* a leaf's new policy: one copy */
	below = root_publications(s) == roots;
	ps_store_destroy(s);
	ps_policy_put(p);
	ps_policy_put(q);
	if (!below)
		cr_skip_test("every set publishes at the root here (valgrind's thread checkers)");
}

/*
 * A next() that loaded the root holds it while the two sets of next_tree
 * publish: its answer must be that of one version, [150, 151) or
 * [123, 129), never [130, 131).  Counted and borrowed.
 */
RCU_TEST(next_beside_two_sets_is_one_version, .timeout = 60)
{
	struct ps_policy *p0 = ps_test_bind(0), *p1 = ps_test_bind(1), *p2 = ps_test_bind(2);
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
		next_tree_build(r.s, p0, q);
		next_hold_now = &h;
		__atomic_store_n(&psi_test_hook, next_hook, __ATOMIC_RELEASE);
		cr_assert_eq(pthread_create(&t, NULL, next_reader_fn, &r), 0);
		cr_assert(next_wait_paused(&h, 1), "the reader never reached its walk");
		roots = root_publications(r.s);
		cr_assert_eq(ps_store_set(r.s, 123, 129, p1), 0);
		cr_assert_eq(ps_store_set(r.s, 130, 131, p2), 0);
		cr_assert_eq(root_publications(r.s), roots + 1,
				"the test needs the second set below the root");
		next_release(&h);
		pthread_join(t, NULL);
		__atomic_store_n(&psi_test_hook, NULL, __ATOMIC_RELEASE);
		next_hold_now = NULL;
		cr_assert_eq(r.ret, 0);
		cr_assert(r.start == 123 && r.end == 129 && r.pol == p1,
				"%s, %s: next(125) returned [%" PRIu64 ", %" PRIu64
				"), the answer of no version ([123, 129) after the sets)",
				ps_sync_name(*sync), borrow ? "borrowed" : "counted", r.start,
				r.end);
		ps_store_destroy(r.s);
	}
	cr_assert_eq(ps_policy_refcount(p1), 1);
	cr_assert_eq(ps_policy_refcount(p2), 1);
	ps_policy_put(p0);
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
	struct ps_policy *p0 = ps_test_bind(0), *p1 = ps_test_bind(1), *p2 = ps_test_bind(2);
	struct ps_policy *q = ps_test_bind(3);
	struct next_hold h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 64, 0, 0 };
	struct next_reader r = { .borrow = false };
	bool announced = false;
	pthread_t t;
	int n;

	skip_unless_child_publications(*sync);
	r.s = ps_store_create(*sync);
	cr_assert_not_null(r.s);
	next_tree_build(r.s, p0, q);
	next_hold_now = &h;
	__atomic_store_n(&psi_test_hook, next_hook, __ATOMIC_RELEASE);
	cr_assert_eq(pthread_create(&t, NULL, next_reader_fn, &r), 0);
	for (n = 1; n <= h.max && !announced; n++) {
		uint64_t roots;

		cr_assert(next_wait_paused(&h, n), "attempt %d never came", n);
		roots = root_publications(r.s);
		/* A new policy for a leaf: one copy, published below the root unless announced. */
		cr_assert_eq(ps_store_set(r.s, 15, 16, (n & 1) ? p2 : q), 0);
		announced = root_publications(r.s) != roots;
		if (announced) {
			cr_assert_eq(ps_store_set(r.s, 123, 129, p1), 0);
			cr_assert_eq(ps_store_set(r.s, 130, 131, p2), 0);
			cr_assert_eq(root_publications(r.s), roots + 3,
					"sets beside an announced walk publish at the root");
		}
		next_release(&h);
	}
	pthread_join(t, NULL);
	__atomic_store_n(&psi_test_hook, NULL, __ATOMIC_RELEASE);
	next_hold_now = NULL;
	cr_assert(announced, "the reader retried %d times without announcing its walk", h.max);
	cr_assert_gt(n, 3, "the reader announced its walk before it retried");
	cr_assert_eq(r.ret, 0);
	cr_assert(r.start == 150 && r.end == 151 && r.pol == q,
			"next(125) returned [%" PRIu64 ", %" PRIu64 "), not the version its walk loaded",
			r.start, r.end);
	ps_store_destroy(r.s);
	ps_policy_put(p0);
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
	__atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *next_load_reader(void *arg)
{
	struct next_load *l = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long n = 0;

	while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
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
	__atomic_fetch_add(&l->answers, n, __ATOMIC_RELAXED);
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
