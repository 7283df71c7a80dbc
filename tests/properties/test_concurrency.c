// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Readers and writers together, for every variant: the store workload of
 * testutil.h (ps_test_store_run(), which tsan_stress runs too).  Policy k is
 * only ever set inside region k of the index space, so a lookup at idx may
 * return NULL or policy region(idx), nothing else: a lookup returning a
 * range that was never there, or a freed policy (valgrind/ASan), fails.
 *
 * Churn mode (the churn_* tests): the store starts fully covered and every
 * set installs a fresh policy that only the store owns, so replaced
 * policies are freed while readers run; each policy's node mask encodes
 * the range it was set for, and every read must find one set for a range
 * that holds the page.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "testutil.h"

/* Readers and writers on one store (testutil.h: ps_test_store_run()). */
static void run_mixed(enum ps_sync sync, int readers, int writers, bool borrow, bool online,
		bool churn)
{
	struct ps_test_store_load l = {
		.sync = sync, .readers = readers, .writers = writers,
		.read = borrow ? PS_TEST_READ_BORROW : PS_TEST_READ_REF, .qsbr_online = online,
		.churn = churn, .region_size = 512,
		.run = { .iters = ps_test_iters(3000), .min_iters = 8,
			/* writers stop after this even if sets remain (slow grace periods) */
			.duration_ns = (uint64_t)(2e9 * ps_test_scale() + 5e8) },
	};

	cr_assert_eq(ps_test_store_run(&l), 0, "%s: %ld bad lookups or failed sets: %s",
			ps_sync_name(sync), l.run.failures, l.run.why);
}

VARIANT_TEST(concurrency, readers_and_writers)
{
	run_mixed(*sync, 3, 2, false, true, false);
}

VARIANT_TEST(concurrency, borrowed_readers)
{
	run_mixed(*sync, 3, 1, true, true, false);
}

VARIANT_TEST(concurrency, churn_readers_and_writers)
{
	run_mixed(*sync, 3, 2, false, true, true);
}

VARIANT_TEST(concurrency, churn_borrowed_readers)
{
	run_mixed(*sync, 3, 1, true, true, true);
}

VARIANT_TEST(concurrency, oversubscribed)
{
	/*
	 * Many more threads than the machine's cores: every variant must
	 * progress.  Under valgrind (one thread runs at a time) 8 readers already
	 * oversubscribe, and each QSBR grace period costs a full round of them.
	 */
	run_mixed(*sync, ps_test_scale() < 1 ? 8 : 48, 4, false, true, false);
}

/* QSBR readers that never go online explicitly stay correct and never stall writers. */
Test(concurrency, qsbr_implicit_readers)
{
	run_mixed(PS_SYNC_RCU_QSBR, 3, 2, false, false, false);
	run_mixed(PS_SYNC_RCU_QSBR, 3, 1, true, false, false);
	run_mixed(PS_SYNC_RCU_QSBR, 3, 2, false, false, true);
	run_mixed(PS_SYNC_RCU_QSBR, 3, 1, true, false, true);
}

Test(concurrency, qsbr_thread_states)
{
	cr_assert_not(ps_qsbr_thread_is_online());
	cr_assert_eq(ps_qsbr_thread_online(), 0);
	cr_assert(ps_qsbr_thread_is_online());
	ps_qsbr_quiescent();
	ps_qsbr_thread_offline();
	cr_assert_not(ps_qsbr_thread_is_online());
	ps_qsbr_thread_offline(); /* idempotent */
	ps_qsbr_quiescent(); /* a no-op offline */
	ps_rcu_unregister_thread();
	ps_rcu_unregister_thread(); /* harmless when not registered */
}

/* Writer fairness: continuous readers must not keep a writer out. */
struct fair {
	struct ps_store *store;
	bool stop;
	int running;
};

static void *busy_reader(void *arg)
{
	struct fair *f = arg;
	uint64_t seed = 99;

	PSI_FETCH_ADD(f->running, 1, SEQ_CST);
	while (!PSI_READ_ONCE(f->stop))
		ps_policy_put(ps_store_lookup(f->store, ps_test_rand(&seed) % 1024));
	return NULL;
}

VARIANT_TEST(concurrency, writer_not_starved)
{
	struct fair f = { .store = ps_store_create(*sync) };
	struct ps_policy *a = ps_test_bind(0);
	pthread_t t[4];
	uint64_t worst = 0;
	int i;

	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, busy_reader, &f);
	while (PSI_LOAD_SEQ_CST(f.running) < 4)
		usleep(100);
	for (i = 0; i < (int)ps_test_iters(200); i++) {
		uint64_t t0 = ps_test_now_ns(), d;

		cr_assert_eq(ps_store_set(f.store, (uint64_t)i % 1000, (uint64_t)i % 1000 + 8, a), 0);
		d = ps_test_now_ns() - t0;
		if (d > worst)
			worst = d;
	}
	PSI_STORE_SEQ_CST(f.stop, true);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* A generous bound for a loaded 2-core machine: starvation would be unbounded. */
	cr_assert_lt(worst, 2000000000ULL, "%s: a set waited %llu ns", ps_sync_name(*sync),
			(unsigned long long)worst);
	cr_log_info("%s: longest set under 4 continuous readers: %llu us", ps_sync_name(*sync),
			(unsigned long long)(worst / 1000));
	ps_store_destroy(f.store);
	ps_policy_put(a);
}

/*
 * A thousand threads on a 2-core machine: every variant must finish (the
 * SPIN lock yields after bounded spinning, RWLOCK readers step aside for a
 * writer, QSBR readers here use the implicit online/offline path so a
 * preempted reader does not hold up grace periods for its whole timeslice).
 */
struct crowd {
	struct ps_store *store;
	struct ps_policy *pol;
	long bad;
	long lookups;
};

static void *crowd_reader(void *arg)
{
	struct crowd *c = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long i;

	for (i = 0; i < c->lookups; i++) {
		struct ps_policy *p = ps_store_lookup(c->store, ps_test_rand(&seed) % 4096);

		if (p && p != c->pol)
			PSI_FETCH_ADD(c->bad, 1, SEQ_CST);
		ps_policy_put(p);
	}
	return NULL;
}

VARIANT_TEST(concurrency, thousand_threads)
{
	long nthreads = ps_test_iters(1000);
	struct crowd c = { .store = ps_store_create(*sync), .pol = ps_test_bind(2), .lookups = 200 };
	pthread_t *t = calloc((size_t)nthreads, sizeof(*t));
	pthread_attr_t attr;
	long i, created = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	cr_assert_eq(ps_store_set(c.store, 0, 4096, c.pol), 0);
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], &attr, crowd_reader, &c) == 0)
			created++;
		else
			break;
	cr_assert_gt(created, nthreads / 2, "could create only %ld threads", created);
	for (i = 0; i < 20; i++)
		cr_assert_eq(ps_store_set(c.store, (uint64_t)i * 100, (uint64_t)i * 100 + 50,
					     i % 2 ? c.pol : NULL),
				0);
	for (i = 0; i < created; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(PSI_LOAD_SEQ_CST(c.bad), 0);
	pthread_attr_destroy(&attr);
	free(t);
	ps_store_destroy(c.store);
	ps_policy_put(c.pol);
}

/*
 * A read-side section nested in another (a foreach callback that looks up
 * in a second store of the same variant) must keep the thread protected
 * until the outer section ends.  A set on the walked store started meanwhile
 * returns at once (rcu, rcu-qsbr: it publishes a new version) or after the
 * walk (the others hold the writer lock across foreach); either way the walk
 * goes on in its own snapshot and still sees the range the set removed, with
 * its policy alive, and ps_store_synchronize() (which frees what the set
 * retired) does not return before the walk is over.  The reader never goes
 * online explicitly (QSBR's automatic path).
 */
struct nested {
	struct ps_store *store, *other;
	int phase; /* 1: callback ran its inner lookup; 2: callback about to return */
	int saw_removed; /* the walk reached [20, 30) with its policy alive */
	int sync_returned_early;
};

static int nested_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct nested *n = arg;

	if (start == 20 && end == 30 && ps_policy_refcount(pol) > 0 &&
			ps_policy_first_node(pol) == 1)
		PSI_STORE_SEQ_CST(n->saw_removed, 1);
	if (PSI_LOAD_SEQ_CST(n->phase) == 0) {
		ps_policy_put(ps_store_lookup(n->other, 5)); /* the nested section */
		PSI_STORE_SEQ_CST(n->phase, 1);
		usleep(200 * 1000); /* a synchronize that does not wait would return now */
		/* Still inside the walk's section: a correct synchronize returns after this. */
		PSI_STORE_SEQ_CST(n->phase, 2);
	}
	return 0;
}

static void *nested_walker(void *arg)
{
	struct nested *n = arg;

	ps_store_foreach(n->store, nested_cb, n);
	return NULL;
}

VARIANT_TEST(concurrency, nested_sections_stay_protected, .timeout = 60)
{
	struct nested n = { .store = ps_store_create(*sync), .other = ps_store_create(*sync) };
	struct ps_policy *a = ps_test_bind(1);
	pthread_t t;

	cr_assert_eq(ps_store_set(n.other, 0, 10, a), 0);
	cr_assert_eq(ps_store_set(n.store, 0, 10, a), 0);
	cr_assert_eq(ps_store_set(n.store, 20, 30, a), 0);
	pthread_create(&t, NULL, nested_walker, &n);
	while (PSI_LOAD_SEQ_CST(n.phase) == 0)
		usleep(1000);
	cr_assert_eq(ps_store_set(n.store, 20, 30, NULL), 0);
	/* The removed range is freed, with its reference, only after a grace period. */
	cr_assert_eq(ps_store_synchronize(n.store), 0);
	if (PSI_LOAD_SEQ_CST(n.phase) != 2)
		PSI_STORE_SEQ_CST(n.sync_returned_early, 1);
	pthread_join(t, NULL);
	cr_assert_eq(PSI_LOAD_SEQ_CST(n.sync_returned_early), 0,
			"%s: a synchronize returned while a walk was still in the tree",
			ps_sync_name(*sync));
	cr_assert_eq(PSI_LOAD_SEQ_CST(n.saw_removed), 1,
			"%s: the walk's snapshot lost the range a concurrent set removed",
			ps_sync_name(*sync));
	cr_assert_null(ps_store_lookup(n.store, 25));
	ps_store_destroy(n.store);
	ps_store_destroy(n.other);
	cr_assert_eq(ps_policy_refcount(a), 1);
	ps_policy_put(a);
}

/* Two QSBR writers that are online must not deadlock on each other. */
static void *online_writer(void *arg)
{
	struct ps_store *s = arg;
	struct ps_policy *p = ps_test_bind(3);
	int i;

	ps_qsbr_thread_online();
	for (i = 0; i < 200; i++) {
		if (ps_store_set(s, (uint64_t)i, (uint64_t)i + 2, i % 3 ? p : NULL))
			abort();
		ps_qsbr_quiescent();
	}
	ps_qsbr_thread_offline();
	ps_policy_put(p);
	return NULL;
}

Test(concurrency, qsbr_online_writers, .timeout = 60)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	pthread_t t[2];

	pthread_create(&t[0], NULL, online_writer, s);
	pthread_create(&t[1], NULL, online_writer, s);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	cr_assert_eq(ps_store_check(s, NULL), 0);
	ps_store_destroy(s);
}
