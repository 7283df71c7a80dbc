// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Striped policy reference counts (issue 12): a hot policy in a store counts
 * lookups on per-CPU stripes and goes back to one atomic count when it
 * leaves its last store.  These tests check that the count stays exact
 * across the switches, that the last put frees at once (counted by the
 * allocator), that policies freed under readers are not used (churn, run
 * under ASan and valgrind), and that a failed stripe allocation only leaves
 * the policy on the atomic count.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "policy_internal.h" /* src/: the layout, to see which mode a policy is in */
#include "testutil.h"

#define HOT_LOOKUPS (2 * (long)PS_REF_HOT)

static void sync_store(struct ps_store *s)
{
	cr_assert_eq(ps_store_synchronize(s), 0);
}

/* Look @idx up @n times, keeping the references in @held. */
static void lookup_hold(struct ps_store *s, uint64_t idx, struct ps_policy **held, long n,
		struct ps_policy *want)
{
	long i;

	for (i = 0; i < n; i++) {
		held[i] = ps_store_lookup(s, idx);
		cr_assert_eq(held[i], want, "lookup %ld", i);
	}
}

static bool striped(const struct ps_policy *p)
{
	return PSI_READ_ONCE(p->refmode) == PS_REF_OPEN;
}

/* Stripes are only used where rseq tells the CPU and there is more than one. */
static bool stripes_possible(const struct ps_policy *p)
{
	return p->stripe_mask != 0;
}

/*
 * Exact counts through every switch: atomic -> hot and open -> closed on
 * leaving the store -> open again on coming back; references taken on
 * stripes and dropped on the atomic count, and the other way round.
 */
VARIANT_TEST(refcount, exact_across_switches)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(2), *held[HOT_LOOKUPS];
	long i;

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 100, 200, p), 0);
	cr_assert_eq(ps_store_set(s, 300, 400, p), 0);
	cr_assert_eq(ps_policy_refcount(p), 3);
	lookup_hold(s, 150, held, HOT_LOOKUPS, p);
	cr_assert_eq(ps_policy_refcount(p), 3 + HOT_LOOKUPS);
	if (stripes_possible(p))
		cr_assert(striped(p), "%ld lookups in a store make a policy hot", HOT_LOOKUPS);
	/* Half of them dropped now (some taken on the atomic count, dropped on stripes). */
	for (i = 0; i < HOT_LOOKUPS / 2; i++)
		ps_policy_put(held[i]);
	cr_assert_eq(ps_policy_refcount(p), 3 + HOT_LOOKUPS / 2);
	/* Out of the store: back on the atomic count, the rest still held. */
	cr_assert_eq(ps_store_set(s, 0, 1000, NULL), 0);
	sync_store(s);
	cr_assert_not(striped(p));
	cr_assert_eq(ps_policy_refcount(p), 1 + HOT_LOOKUPS / 2);
	/* In again: the stripes (kept since it was hot) open at once. */
	cr_assert_eq(ps_store_set(s, 100, 200, p), 0);
	if (stripes_possible(p))
		cr_assert(striped(p));
	for (i = HOT_LOOKUPS / 2; i < HOT_LOOKUPS; i++)
		ps_policy_put(held[i]); /* taken while open, closed, reopened: all exact */
	cr_assert_eq(ps_policy_refcount(p), 2);
	lookup_hold(s, 199, held, 10, p);
	cr_assert_eq(ps_policy_refcount(p), 12);
	ps_store_destroy(s);
	cr_assert_not(striped(p));
	cr_assert_eq(ps_policy_refcount(p), 11);
	for (i = 0; i < 10; i++)
		ps_policy_put(held[i]);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

/* ---- the last put frees at once, counted by the allocator ------------------------------- */

static void *watched;	   /* the policy whose free we wait for */
static long watched_frees; /* frees of @watched seen */

static void *counting_alloc(size_t size, void *ctx)
{
	(void)ctx;
	return malloc(size);
}

static void counting_free(void *ptr, void *ctx)
{
	(void)ctx;
	if (ptr && ptr == PSI_READ_ONCE(watched))
		PSI_FETCH_ADD(watched_frees, 1, RELAXED);
	free(ptr);
}

VARIANT_TEST(refcount, last_put_frees_at_once)
{
	static const struct ps_alloc_ops ops = {.alloc = counting_alloc, .free = counting_free};
	struct ps_store *s;
	struct ps_policy *p, *held[HOT_LOOKUPS];
	long i;

	cr_assert_eq(ps_set_alloc_ops(&ops), 0);
	s = ps_store_create(*sync);
	p = ps_test_bind(3);
	watched = p;
	watched_frees = 0;
	cr_assert_eq(ps_store_set(s, 0, 64, p), 0);
	ps_policy_put(p); /* only the store owns it */
	lookup_hold(s, 7, held, HOT_LOOKUPS, p);
	if (stripes_possible(p))
		cr_assert(striped(p));
	/* The store lets go (after its grace period, for RCU): the readers' references remain. */
	cr_assert_eq(ps_store_set(s, 0, 64, NULL), 0);
	sync_store(s);
	cr_assert_eq(watched_frees, 0);
	cr_assert_not(striped(p));
	cr_assert_eq(ps_policy_refcount(p), HOT_LOOKUPS);
	for (i = 0; i < HOT_LOOKUPS - 1; i++)
		ps_policy_put(held[i]);
	cr_assert_eq(watched_frees, 0);
	ps_policy_put(held[HOT_LOOKUPS - 1]);
	cr_assert_eq(watched_frees, 1, "the last put frees the policy, at once");

	/* And when the store's own reference is the last one. */
	p = ps_test_bind(4);
	watched = p;
	watched_frees = 0;
	cr_assert_eq(ps_store_set(s, 0, 64, p), 0);
	ps_policy_put(p);
	lookup_hold(s, 9, held, HOT_LOOKUPS, p);
	for (i = 0; i < HOT_LOOKUPS; i++)
		ps_policy_put(held[i]);
	cr_assert_eq(watched_frees, 0);
	cr_assert_eq(ps_store_set(s, 0, 64, NULL), 0);
	sync_store(s);
	cr_assert_eq(watched_frees, 1, "freed once the store's grace period is over");
	ps_store_destroy(s);
	watched = NULL;
	ps_set_alloc_ops(NULL);
}

/* ---- a failed stripe allocation: the atomic count, and every lookup still succeeds ----- */

VARIANT_TEST(refcount, stripe_allocation_fails)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(5), *held[4 * HOT_LOOKUPS];
	long i;

	cr_assert_eq(ps_store_set(s, 0, 64, p), 0);
	ps_test_alloc_fail_after(0); /* every allocation fails from here */
	for (i = 0; i < 4 * HOT_LOOKUPS; i++) {
		held[i] = ps_store_lookup(s, (uint64_t)i % 64);
		cr_assert_eq(held[i], p, "lookup %ld must not fail", i);
	}
	ps_test_alloc_restore();
	cr_assert_null(p->stripes);
	cr_assert_not(striped(p));
	cr_assert_eq(ps_policy_refcount(p), 2 + 4 * HOT_LOOKUPS);
	for (i = 0; i < 4 * HOT_LOOKUPS; i++)
		ps_policy_put(held[i]);
	cr_assert_eq(ps_policy_refcount(p), 2);
	/* The allocator back: the next hot stretch gets its stripes. */
	lookup_hold(s, 1, held, HOT_LOOKUPS, p);
	if (stripes_possible(p))
		cr_assert(striped(p));
	for (i = 0; i < HOT_LOOKUPS; i++)
		ps_policy_put(held[i]);
	cr_assert_eq(ps_policy_refcount(p), 2);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

/* ---- churn: every set installs a fresh policy only the store owns ---------------------- */

/* Before some sets: is the policy of the range about to be replaced striped? */
static void sample_striped(struct ps_store *s, uint64_t idx, void *arg)
{
	struct ps_policy *q = ps_store_lookup(s, idx);

	if (q && striped(q))
		(*(long *)arg)++;
	ps_policy_put(q);
}

/*
 * Eight ranges of 16 pages, each replaced whole by a fresh policy (the
 * victim reuse) again and again; three readers hold eight references at a
 * time (past their read section: QSBR readers go online), check each policy
 * whole and counted (freed memory is caught by ASan/valgrind), and put
 * them; the writer yields every 16 sets so the readers make some policies
 * hot before they go (the store workload of testutil.h).
 */
PS_PARAM_TEST(enum ps_sync, sync, ps_test_all_syncs, PS_SYNC_COUNT, refcount, churn_fresh_policies,
		.timeout = 300)
{
	long striped_seen = 0;
	struct ps_test_store_load l = {
		.sync = *sync, .readers = 3, .writers = 1, .hold = 8, .qsbr_online = true,
		.churn = true, .whole_regions = true, .region_size = 16, .yield_every = 16,
		.sample = sample_striped, .sample_arg = &striped_seen,
		.run = { .iters = ps_test_iters(20000) },
	};

	cr_assert_eq(ps_test_store_run(&l), 0, "%s", l.run.why);
	cr_log_info("%s: %ld sets, %ld lookups, %ld samples of a striped policy",
			ps_sync_name(*sync), l.sets, l.lookups, striped_seen);
}

/* ---- threads that exit holding references, and a forked child ------------------------- */

struct holder {
	struct ps_store *s;
	enum ps_sync sync;
	struct ps_policy *held[HOT_LOOKUPS];
};

static void *hold_and_exit(void *arg)
{
	struct holder *h = arg;
	long i;

	if (h->sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_online();
	for (i = 0; i < HOT_LOOKUPS; i++)
		h->held[i] = ps_store_lookup(h->s, 3);
	if (h->sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	return NULL; /* exits holding them: the count lives in the policy, not in the thread */
}

PS_PARAM_TEST(enum ps_sync, sync, ps_test_all_syncs, PS_SYNC_COUNT, refcount, thread_exits_holding,
		.timeout = 60)
{
	struct holder h[2] = {{.s = ps_store_create(*sync), .sync = *sync}};
	struct ps_policy *p = ps_test_bind(6);
	pthread_t th[2];
	long i;
	int t;

	h[1] = h[0];
	cr_assert_eq(ps_store_set(h[0].s, 0, 16, p), 0);
	for (t = 0; t < 2; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, hold_and_exit, &h[t]), 0);
	for (t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	cr_assert_eq(ps_policy_refcount(p), 2 + 2 * HOT_LOOKUPS);
	/* A child: one thread, the same counts; it drops them and the store. */
	{
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			for (t = 0; t < 2; t++)
				for (i = 0; i < HOT_LOOKUPS; i++)
					ps_policy_put(h[t].held[i]);
			if (ps_policy_refcount(p) != 2)
				_exit(1);
			ps_store_destroy(h[0].s);
			_exit(ps_policy_refcount(p) == 1 && !striped(p) ? 0 : 2);
		}
		cr_assert_gt(pid, 0);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	}
	/* The parent drops them from another thread than took them (other stripes). */
	for (t = 0; t < 2; t++)
		for (i = 0; i < HOT_LOOKUPS; i++)
			ps_policy_put(h[t].held[i]);
	cr_assert_eq(ps_policy_refcount(p), 2);
	ps_store_destroy(h[0].s);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

/* ---- stripes without rseq ---------------------------------------------------------------- */

struct one_ref {
	struct ps_store *s;
	struct ps_policy *got;
};

static void *take_one_ref(void *arg)
{
	struct one_ref *o = arg;

	o->got = ps_store_lookup(o->s, 3);
	return NULL;
}

/* The stripe whose count a step moved up by one, or -1. */
static int moved_stripe(const struct ps_policy *p, const long *before)
{
	unsigned i;
	int which = -1;

	for (i = 0; i <= p->stripe_mask; i++) {
		long v = PSI_READ_ONCE(*((long *)(p->stripes + (size_t)i * PS_REF_STRIPE_BYTES)));

		if (v == before[i] + 1 && which < 0)
			which = (int)i;
		else if (v != before[i])
			return -1;
	}
	return which;
}

/*
 * Where rseq tells no CPU (glibc.pthread.rseq=0, valgrind, other C
 * libraries), each thread counts on a stripe of its own: threads that take
 * a reference one after another land on different stripes, as threads on
 * different CPUs do with rseq.  unit.refcount.norseq runs this with rseq
 * off; with rseq on there is nothing to check.
 */
Test(refcount, stripe_per_thread_without_rseq, .timeout = 60)
{
	struct ps_store *s = ps_store_create(PS_SYNC_SPIN);
	struct ps_policy *p = ps_test_bind(1), *held[HOT_LOOKUPS];
	long before[PS_REF_MAX_STRIPES];
	int seen[PS_REF_MAX_STRIPES];
	unsigned t, i, n;

#ifdef PS_REF_HAVE_RSEQ
	if (__rseq_size)
		cr_skip_test("rseq is registered: stripes follow the CPUs");
#endif
	if (!stripes_possible(p))
		cr_skip_test("one CPU: policies never stripe");
	cr_assert_eq(ps_store_set(s, 0, 16, p), 0);
	lookup_hold(s, 3, held, HOT_LOOKUPS, p);
	cr_assert(striped(p));
	n = p->stripe_mask + 1;
	for (t = 0; t < n; t++) {
		struct one_ref o = { .s = s };
		pthread_t th;

		for (i = 0; i < n; i++)
			before[i] = PSI_READ_ONCE(*((long *)(p->stripes + (size_t)i * PS_REF_STRIPE_BYTES)));
		cr_assert_eq(pthread_create(&th, NULL, take_one_ref, &o), 0);
		cr_assert_eq(pthread_join(th, NULL), 0);
		cr_assert_eq(o.got, p);
		seen[t] = moved_stripe(p, before);
		cr_assert_geq(seen[t], 0, "thread %u's reference is on no single stripe", t);
		for (i = 0; i < t; i++)
			cr_expect_neq(seen[i], seen[t], "threads %u and %u share stripe %d", i, t,
					seen[t]);
		ps_policy_put(o.got);
	}
	for (i = 0; i < HOT_LOOKUPS; i++)
		ps_policy_put(held[i]);
	cr_expect_eq(ps_policy_refcount(p), 2);
	ps_store_destroy(s);
	ps_policy_put(p);
}
