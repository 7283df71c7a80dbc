// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Readers and writers together, for every variant.  Policy k is only ever
 * set inside region k of the index space, so a lookup at idx may return
 * NULL or policy region(idx), nothing else: a lookup returning a range that
 * was never there, or a freed policy (valgrind/ASan), fails.
 *
 * Churn mode (the churn_* tests): the store starts fully covered and every
 * set installs a fresh policy that only the store owns (the writer puts its
 * reference at once), so replaced policies are freed while readers run.
 * Each policy's node mask encodes the range it was set for; readers look
 * up, borrow, take and put references, and check every result: never NULL
 * (every page is always covered), and set for a range that holds the page
 * looked up.  A policy freed too early is reported by valgrind/ASan, or
 * decodes to a wrong range.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

#define REGIONS 8
#define REGION_SIZE 512
#define SPACE (REGIONS * REGION_SIZE)

struct shared {
	struct ps_store *store;
	enum ps_sync sync;
	struct ps_policy *pol[REGIONS];
	atomic_bool stop;
	atomic_long lookups, sets, errors;
	atomic_int readers_started; /* writers begin once every reader runs */
	int nreaders;
	long sets_per_writer;
	uint64_t duration_ns; /* writers stop after this even if sets remain (slow grace periods) */
	bool borrow; /* readers use the no-reference path */
	bool qsbr_online; /* QSBR readers go online explicitly */
	bool churn; /* a fresh policy per set, owned by the store alone */
};

/*
 * Churn policies: node k is the region, nodes CHURN_A_BIT.. and
 * CHURN_B_BIT.. hold the range's start and end offsets in the region in
 * binary, CHURN_MAGIC is always set.
 */
#define CHURN_A_BIT 16
#define CHURN_B_BIT 32
#define CHURN_OFF_BITS 10 /* offsets 0 .. REGION_SIZE */
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

/* A policy that says it was set for [@a, @b) in region @k. */
static struct ps_policy *churn_policy(int k, uint64_t a, uint64_t b)
{
	unsigned long mask[MASK_LONGS] = { 0 };
	uint64_t base = (uint64_t)k * REGION_SIZE;
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

/* Was @pol set by churn_policy() for a range that holds @idx? */
static bool churn_policy_covers(const struct ps_policy *pol, uint64_t idx)
{
	unsigned long mask[MASK_LONGS];
	int k = (int)(idx / REGION_SIZE), j;
	uint64_t base = (uint64_t)k * REGION_SIZE, a = 0, b = 0;

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
	return base + a <= idx && idx < base + b && b <= REGION_SIZE;
}

static void *writer(void *arg)
{
	struct shared *sh = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	uint64_t deadline;
	long i;

	/*
	 * Writers overlap readers: on a loaded machine the writers could
	 * otherwise finish their sets before any reader was scheduled.
	 */
	while (atomic_load(&sh->readers_started) < sh->nreaders)
		sched_yield();
	deadline = ps_test_now_ns() + sh->duration_ns;
	/* At least a few sets whatever the clock says: the test must exercise writers. */
	for (i = 0; i < sh->sets_per_writer && (i < 8 || ps_test_now_ns() < deadline); i++) {
		int k = (int)(ps_test_rand(&seed) % REGIONS);
		uint64_t a, b;

		if (!ps_test_rand_range(&seed, (uint64_t)k * REGION_SIZE, REGION_SIZE, &a, &b))
			continue;
		if (sh->churn) {
			/* The store's reference is the only one once we put ours. */
			struct ps_policy *pol = churn_policy(k, a, b);

			if (ps_store_set(sh->store, a, b, pol))
				atomic_fetch_add(&sh->errors, 1);
			ps_policy_put(pol);
		} else if (ps_store_set(sh->store, a, b,
					   ps_test_rand(&seed) % 4 ? sh->pol[k] : NULL)) {
			atomic_fetch_add(&sh->errors, 1);
		}
		atomic_fetch_add(&sh->sets, 1);
	}
	return NULL;
}

/* One churn-mode read of @idx: every result is checked, a NULL is an error. */
static void churn_read(struct shared *sh, uint64_t idx)
{
	struct ps_policy *held;

	if (sh->borrow) {
		const struct ps_policy *got;

		ps_store_read_lock(sh->store);
		got = ps_store_lookup_borrow(sh->store, idx);
		if (!churn_policy_covers(got, idx))
			atomic_fetch_add(&sh->errors, 1);
		/* A reference taken inside the section keeps it past the section. */
		held = ps_policy_get((struct ps_policy *)got);
		ps_store_read_unlock(sh->store);
	} else {
		held = ps_store_lookup(sh->store, idx);
	}
	if (!churn_policy_covers(held, idx))
		atomic_fetch_add(&sh->errors, 1);
	ps_policy_put(held);
}

static void *reader(void *arg)
{
	struct shared *sh = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long n = 0;

	if (sh->sync == PS_SYNC_RCU_QSBR && sh->qsbr_online)
		ps_qsbr_thread_online();
	atomic_fetch_add(&sh->readers_started, 1);
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		uint64_t idx = ps_test_rand(&seed) % SPACE;
		const struct ps_policy *want = sh->pol[idx / REGION_SIZE];
		const struct ps_policy *got;

		if (sh->churn) {
			churn_read(sh, idx);
			n++;
			if (sh->qsbr_online)
				ps_qsbr_quiescent();
			continue;
		}
		if (sh->borrow) {
			ps_store_read_lock(sh->store);
			got = ps_store_lookup_borrow(sh->store, idx);
			if (got && ps_policy_first_node(got) != (int)(idx / REGION_SIZE))
				atomic_fetch_add(&sh->errors, 1);
			ps_store_read_unlock(sh->store);
		} else {
			struct ps_policy *p = ps_store_lookup(sh->store, idx);

			got = p;
			if (p && ps_policy_first_node(p) != (int)(idx / REGION_SIZE))
				atomic_fetch_add(&sh->errors, 1);
			ps_policy_put(p);
		}
		if (got && got != want)
			atomic_fetch_add(&sh->errors, 1);
		n++;
		if (sh->qsbr_online)
			ps_qsbr_quiescent();
	}
	if (sh->sync == PS_SYNC_RCU_QSBR && sh->qsbr_online)
		ps_qsbr_thread_offline();
	atomic_fetch_add(&sh->lookups, n);
	return NULL;
}

static void run_mixed(enum ps_sync sync, int readers, int writers, bool borrow, bool online,
		bool churn)
{
	struct shared sh = {
		.sync = sync, .borrow = borrow, .qsbr_online = online, .churn = churn,
		.nreaders = readers
	};
	pthread_t rt[64], wt[8];
	const char *why = NULL;
	int i;

	sh.store = ps_store_create(sync);
	cr_assert_not_null(sh.store);
	sh.sets_per_writer = ps_test_iters(3000);
	sh.duration_ns = (uint64_t)(2e9 * ps_test_scale() + 5e8);
	for (i = 0; i < REGIONS; i++)
		sh.pol[i] = ps_test_bind(i);
	for (i = 0; churn && i < REGIONS; i++) { /* every page covered from the start */
		struct ps_policy *pol = churn_policy(i, (uint64_t)i * REGION_SIZE,
				(uint64_t)(i + 1) * REGION_SIZE);

		cr_assert_eq(ps_store_set(sh.store, (uint64_t)i * REGION_SIZE,
					     (uint64_t)(i + 1) * REGION_SIZE, pol),
				0);
		ps_policy_put(pol);
	}
	for (i = 0; i < readers; i++)
		cr_assert_eq(pthread_create(&rt[i], NULL, reader, &sh), 0);
	for (i = 0; i < writers; i++)
		cr_assert_eq(pthread_create(&wt[i], NULL, writer, &sh), 0);
	for (i = 0; i < writers; i++)
		pthread_join(wt[i], NULL);
	atomic_store(&sh.stop, true);
	for (i = 0; i < readers; i++)
		pthread_join(rt[i], NULL);
	cr_assert_eq(atomic_load(&sh.errors), 0, "%s: %ld bad lookups or failed sets",
			ps_sync_name(sync), atomic_load(&sh.errors));
	cr_assert_gt(atomic_load(&sh.lookups), 0);
	cr_assert_gt(atomic_load(&sh.sets), 0);
	cr_assert_eq(ps_store_check(sh.store, &why), 0, "%s", why);
	ps_store_destroy(sh.store);
	for (i = 0; i < REGIONS; i++) {
		cr_assert_eq(ps_policy_refcount(sh.pol[i]), 1);
		ps_policy_put(sh.pol[i]);
	}
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
	atomic_bool stop;
	atomic_int running;
};

static void *busy_reader(void *arg)
{
	struct fair *f = arg;
	uint64_t seed = 99;

	atomic_fetch_add(&f->running, 1);
	while (!atomic_load_explicit(&f->stop, memory_order_relaxed))
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
	while (atomic_load(&f.running) < 4)
		usleep(100);
	for (i = 0; i < (int)ps_test_iters(200); i++) {
		uint64_t t0 = ps_test_now_ns(), d;

		cr_assert_eq(ps_store_set(f.store, (uint64_t)i % 1000, (uint64_t)i % 1000 + 8, a), 0);
		d = ps_test_now_ns() - t0;
		if (d > worst)
			worst = d;
	}
	atomic_store(&f.stop, true);
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
	atomic_long bad;
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
			atomic_fetch_add(&c->bad, 1);
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
	cr_assert_eq(atomic_load(&c.bad), 0);
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
	atomic_int phase; /* 1: callback ran its inner lookup; 2: callback about to return */
	atomic_int saw_removed; /* the walk reached [20, 30) with its policy alive */
	atomic_int sync_returned_early;
};

static int nested_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct nested *n = arg;

	if (start == 20 && end == 30 && ps_policy_refcount(pol) > 0 &&
			ps_policy_first_node(pol) == 1)
		atomic_store(&n->saw_removed, 1);
	if (atomic_load(&n->phase) == 0) {
		ps_policy_put(ps_store_lookup(n->other, 5)); /* the nested section */
		atomic_store(&n->phase, 1);
		usleep(200 * 1000); /* a synchronize that does not wait would return now */
		/* Still inside the walk's section: a correct synchronize returns after this. */
		atomic_store(&n->phase, 2);
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
	while (atomic_load(&n.phase) == 0)
		usleep(1000);
	cr_assert_eq(ps_store_set(n.store, 20, 30, NULL), 0);
	/* The removed range is freed, with its reference, only after a grace period. */
	cr_assert_eq(ps_store_synchronize(n.store), 0);
	if (atomic_load(&n.phase) != 2)
		atomic_store(&n.sync_returned_early, 1);
	pthread_join(t, NULL);
	cr_assert_eq(atomic_load(&n.sync_returned_early), 0,
			"%s: a synchronize returned while a walk was still in the tree",
			ps_sync_name(*sync));
	cr_assert_eq(atomic_load(&n.saw_removed), 1,
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
