// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The RCU stores' memory: the bound under a flat-out writer, what is
 * retired while no reclaim thread can start, what the writer takes back
 * of its log, the victim reuse under lockless readers, synchronize from
 * many threads, the reclaim threads at dlclose() (test_rcu_store.c says how).
 */
#include "compiler.h"
#include "rcu_store_test.h"

/* ---- 7. memory bound under a flat-out writer -------------------------------------- */

/* Reader threads on a store until @stop (sections 7 and 9); @reads: their lookups. */
struct store_readers {
	struct ps_store *s;
	int stop;   /* atomic */
	long reads; /* atomic */
};

/*
 * ps_set_alloc_ops() after every store is destroyed and ps_rcu_barrier():
 * nothing the old allocator gave is left for the new one to free.  The
 * store keeps spare ranges and full leaves between its sets, which its
 * writer thread outlives here: its destroy frees them, and
 * ps_rcu_barrier() waits for what its sets retired.
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

	while (!PSI_READ_ONCE(r->stop)) {
		int i;

		ps_store_read_lock(r->s);
		for (i = 0; i < 1000; i++)
			(void)ps_store_lookup_borrow(r->s, ps_test_rand(&seed) % 20000);
		if (ps_test_rand(&seed) % 8 == 0)
			usleep(3000);
		ps_store_read_unlock(r->s);
		PSI_FETCH_ADD(r->reads, 1000, RELAXED);
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
	size_t maxmem = 0, maxcount = 0, maxindex = 0, bound, pending, peak;
	double t0, secs = ps_test_scale() < 1 ? 0.5 : 2.0;
	uint64_t gps;
	long sets = 0;
	pthread_t t;

#if !defined(__SANITIZE_ADDRESS__)
	size_t heap0 = mallinfo2().uordblks, maxheld = 0, maxover = 0;
#endif

	cr_assert_eq(ps_test_reclaim_stats(*sync, &gps, &pending, &peak, true), 0);
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
		{
			/*
			 * The store's count first: only this thread allocates, and a
			 * block freed between the two reads has left both.
			 */
			size_t held = ps_store_memory(s) - empty_mem, heap = mallinfo2().uordblks;

			if (held > maxheld)
				maxheld = held;
			if (heap > heap0 + held && heap - heap0 - held > maxover)
				maxover = heap - heap0 - held;
		}
#endif
	}
	PSI_WRITE_ONCE(r.stop, 1);
	pthread_join(t, NULL);
	cr_assert_eq(ps_test_reclaim_stats(*sync, &gps, &pending, &peak, false), 0);
	/*
	 * The store holds its live ranges, its read index and what on its
	 * log is past its grace period, which its writer takes back as it
	 * sets: about what one grace period made ripe, so at most twice the
	 * most that waited for one; what waits on its log for one (at most
	 * the most in flight, and under 16 KiB not yet reported); and the
	 * full leaves it keeps for its next sets (at most an eighth of the
	 * index's bytes).  The index in proportion: its leaves stay on
	 * average at least a quarter full (a small leaf joins a neighbour).
	 */
	bound = empty_mem + maxcount * ps_test_block_bytes(sizeof(struct ps_range)) + 3 * peak + (16 << 10) +
		maxindex / 8;
	cr_log_info("%s: %ld sets in %.1f s, %ld lookups, max %zu ranges, max memory %zu (bound %zu), "
		    "max index %zu, most in flight %zu",
			ps_sync_name(*sync), sets, secs, r.reads, maxcount, maxmem, bound, maxindex,
			peak);
	cr_assert_leq(maxmem, bound);
	cr_assert_leq(maxindex, maxcount * (448 + 256) / 4 + 4096);
#if !defined(__SANITIZE_ADDRESS__)
	/*
	 * The heap itself: what the store holds is on its count, each block
	 * as glibc's malloc() holds it (ranges, index, log, kept leaves and
	 * spares), so the heap grows by that count and little more.  The
	 * rest: blocks the writer and the reclaim thread freed that glibc
	 * keeps in their per-thread caches (at most 7 of each size class up
	 * to 1 KiB, and the store frees blocks of a few sizes) and what the
	 * threads' first calls register.
	 */
	cr_log_info("%s: heap growth beyond the store's count: at most %zu bytes (store's count "
		    "at most %zu)", ps_sync_name(*sync), maxover, maxheld);
	cr_assert_leq(maxover, 64 << 10, "%s: the heap grew %zu bytes past ps_store_memory()",
			ps_sync_name(*sync), maxover);
#endif
	ps_store_synchronize(s);
	cr_assert_eq(ps_policy_refcount(pols[0]) + ps_policy_refcount(pols[1]),
			2 + (long)ps_store_count(s));
	/* After synchronize: the store, its ranges and its index, exactly. */
	cr_assert_eq(ps_store_memory(s), at_rest(s, empty_mem));
	ps_store_destroy(s);
	ps_policy_put(pols[0]);
	ps_policy_put(pols[1]);
}

/* ---- 8. no reclaim thread: what is retired stalls on the log ----------------------- */

/*
 * pthread_create() that fails on demand (the library is linked statically
 * into this binary, so its calls come here): the reclaim thread cannot be
 * started, and sets that may not wait keep what they retired on the log,
 * with no grace period asked for it ("stalled").
 */
static int fail_thread_create;

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

	if (PSI_READ_ONCE(fail_thread_create))
		return EAGAIN;
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	return real(t, attr, fn, arg);
}

/*
 * Sets inside a read-side section while no reclaim thread can start: what
 * they retire stalls on the store's log.  The next set that may wait for a
 * grace period waits for one and empties the log (rcu_store_update.c,
 * psi_rcu_store_update()): once the section is over, later sets must release it,
 * and ps_store_memory() must count it meanwhile.
 */
RCU_TEST(stalled_log_released_by_later_sets, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	size_t mem_before, mem_stalled;
	int i;

	PSI_WRITE_ONCE(fail_thread_create, 1);
	mem_before = ps_store_memory(s);
	ps_store_read_lock(s);
	churn(s, p, 3000); /* thousands of sets, no grace period for any of them */
	ps_store_read_unlock(s);
	cr_assert_eq(ps_store_count(s), 0);
	mem_stalled = ps_store_memory(s);
	cr_log_info("%s: memory %zu before, %zu with the log stalled, refcount %ld",
			ps_sync_name(*sync), mem_before, mem_stalled, ps_policy_refcount(p));
	/* Outside every section now: sets may wait for a grace period. */
	churn(s, q, 600);
	cr_assert_eq(ps_policy_refcount(p), 1,
			"%s: %ld references to removed ranges still held after later sets "
			"(a stalled log emptied only by synchronize/destroy)",
			ps_sync_name(*sync), ps_policy_refcount(p) - 1);
	ps_store_synchronize(s);
	cr_assert_eq(ps_policy_refcount(p), 1);
	cr_assert_eq(ps_policy_refcount(q), 1);
	ps_store_destroy(s);
	PSI_WRITE_ONCE(fail_thread_create, 0);
	(void)i;
	ps_policy_put(p);
	ps_policy_put(q);
}

/* ps_store_memory() counts every range the store holds, stalled ones too. */
RCU_TEST(memory_counts_stalled_log, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1);
	size_t mem;

	PSI_WRITE_ONCE(fail_thread_create, 1);
	ps_store_read_lock(s);
	churn(s, p, 3000);
	ps_store_read_unlock(s);
	mem = ps_store_memory(s);
	/* p's references beyond ours are removed ranges the store still holds. */
	cr_assert_geq(mem, sizeof(struct ps_store) +
			(size_t)(ps_policy_refcount(p) - 1) * ps_test_block_bytes(sizeof(struct ps_range)),
			"%s: memory %zu does not count %ld held removed ranges", ps_sync_name(*sync),
			mem, ps_policy_refcount(p) - 1);
	ps_store_synchronize(s);
	ps_store_destroy(s);
	PSI_WRITE_ONCE(fail_thread_create, 0);
	ps_policy_put(p);
}

/* Destroy and synchronize with a stalled log: every reference dropped, nothing leaked. */
RCU_TEST(destroy_with_stalled_log, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1);
	int k;

	PSI_WRITE_ONCE(fail_thread_create, 1);
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
	PSI_WRITE_ONCE(fail_thread_create, 0);
	ps_policy_put(p);
}

/*
 * No reclaim thread, and a reader inside its section holding a borrowed
 * policy that a set replaces: the set may wait for a grace period itself,
 * and then that grace period must wait for the reader; so must
 * ps_store_synchronize() after another such set.  Neither may return, and
 * free the policy, while the reader is still inside.
 */
static void nothread_wait_for(struct slow_reader *r, int k, enum ps_sync sync)
{
	struct ps_policy *q = ps_test_bind(2);
	pthread_t t;

	PSI_STORE_SEQ_CST(r->left, 0);
	PSI_WRITE_ONCE(fail_thread_create, 0);
	cr_assert_eq(pthread_create(&t, NULL, slow_reader_fn, r), 0);
	PSI_WRITE_ONCE(fail_thread_create, 1);
	while (sem_wait(&r->inside))
		;
	cr_assert_eq(ps_store_set(r->s, 0x1000, 0x2000, q), 0); /* the reader's policy goes */
	if (k)
		cr_assert_eq(ps_store_synchronize(r->s), 0);
	cr_assert(PSI_LOAD_SEQ_CST(r->left),
			"%s: %s returned while a reader was inside since before the set",
			ps_sync_name(sync), k ? "synchronize" : "the set");
	pthread_join(t, NULL);
	ps_policy_put(q);
}

RCU_TEST(no_thread_waits_for_readers_inside, .timeout = 60)
{
	struct slow_reader r = { .page = 0x1500 };
	int k;

	PSI_WRITE_ONCE(fail_thread_create, 1);
	r.s = ps_store_create(*sync);
	cr_assert_not_null(r.s);
	sem_init(&r.inside, 0, 0);
	for (k = 0; k < 2; k++) {
		struct ps_policy *p = ps_test_bind(1);

		cr_assert_eq(ps_store_set(r.s, 0x1000, 0x2000, p), 0);
		ps_policy_put(p); /* the store holds the only reference */
		nothread_wait_for(&r, k, *sync);
	}
	ps_store_destroy(r.s);
	sem_destroy(&r.inside);
	PSI_WRITE_ONCE(fail_thread_create, 0);
}

/* ---- 8b. what the writer takes back of its log ------------------------------------ */

/*
 * What a store retired waits on its log until its grace period ends; its
 * writer makes its next sets of it.  A store whose sets stop has its log
 * emptied by its sweep on the reclaim thread, with the spare ranges it
 * kept: no set and no synchronize needed.
 */
RCU_TEST(retired_memory_freed_once_sets_stop, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1);
	size_t empty = ps_store_memory(s), mem = 0, most = 0;
	int tries;

	churn(s, p, 3000);
	cr_assert_eq(ps_store_count(s), 0);
	for (tries = 0; tries < 2000; tries++) {
		mem = ps_store_memory(s);
		if (mem > most)
			most = mem;
		if (mem == at_rest(s, empty) && ps_policy_refcount(p) == 1)
			break;
		usleep(10000);
	}
	cr_log_info("%s: memory %zu empty, at most %zu after the sets, %zu after %d ms",
			ps_sync_name(*sync), empty, most, mem, 10 * tries);
	cr_assert_eq(mem, at_rest(s, empty),
			"%s: %zu bytes still held 20 s after the last set", ps_sync_name(*sync),
			mem - empty);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * Sets that give one range a new policy store it in place and log only
 * the old policy's reference, weighing nothing of the index: grace
 * periods must still be asked for while they go on, so that the
 * references (and the policies they keep alive) go back, not only once
 * the sets stop.  Four grace periods come, or, where the reclaim thread
 * runs seldom (valgrind), what was asked for weighs four reports.
 */
RCU_TEST(policies_stored_in_place_get_grace_periods, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	uint64_t gp0, gp1;
	size_t peak = 0;
	double t0;
	long i = 0;

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 0x1000, 0x2000, p), 0);
	cr_assert_eq(ps_test_reclaim_stats(*sync, &gp0, NULL, NULL, true), 0);
	t0 = now_s();
	do {
		for (int k = 0; k < 100; k++, i++)
			cr_assert_eq(ps_store_set(s, 0x1000, 0x2000, i & 1 ? p : q), 0);
		cr_assert_eq(ps_test_reclaim_stats(*sync, &gp1, NULL, &peak, false), 0);
	} while (gp1 - gp0 < 4 && peak < 4 * (16 << 10) && now_s() - t0 < 10);
	cr_log_info("%s: %ld sets in place, %llu grace periods and %zu bytes asked for in %.2f s",
			ps_sync_name(*sync), i, (unsigned long long)(gp1 - gp0), peak, now_s() - t0);
	cr_assert(gp1 - gp0 >= 4 || peak >= 4 * (16 << 10),
			"%s: %llu grace periods and %zu bytes asked for in %.1f s of %ld sets",
			ps_sync_name(*sync), (unsigned long long)(gp1 - gp0), peak, now_s() - t0, i);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(p), 1);
	cr_assert_eq(ps_policy_refcount(q), 1);
	ps_policy_put(p);
	ps_policy_put(q);
}

/*
 * The sweep stops when it finds the writer lock held at every look for a
 * second.  A set that saw it queued while it still ran, and that ends
 * after it stopped, must queue it again: else what that set logged waits
 * until a later call on the store.  The last set holds its lock 1.2 s
 * (pthread_mutex_unlock() below sleeps first).
 */
static __thread int sleep_before_unlock_us;

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	static int (*real)(pthread_mutex_t *);
	int us = sleep_before_unlock_us;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	if (us) {
		sleep_before_unlock_us = 0;
		usleep((useconds_t)us);
	}
	return real(m);
}

RCU_TEST(a_sweep_stopped_on_a_busy_lock_is_queued_again, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	size_t empty = ps_store_memory(s) + ps_test_block_bytes(sizeof(struct ps_range)); /* and its one range */
	int i;

	cr_assert_not_null(s);
	for (i = 0; i < 40; i++) {
		cr_assert_eq(ps_store_set(s, 0x1000, 0x2000, (i & 1) ? p : q), 0);
		usleep(5000);
	}
	sleep_before_unlock_us = 1200000;
	cr_assert_eq(ps_store_set(s, 0x1000, 0x2000, q), 0);
	for (i = 0; i < 500; i++) {
		if (ps_store_memory(s) == empty + ps_test_index_bytes(s) &&
				ps_policy_refcount(p) == 1)
			break;
		usleep(10000);
	}
	cr_assert_eq(ps_policy_refcount(p), 1,
			"%s: %ld references still held 5 s after the last set", ps_sync_name(*sync),
			ps_policy_refcount(p) - 1);
	cr_assert_eq(ps_store_memory(s), empty + ps_test_index_bytes(s),
			"%s: %zu bytes held 5 s after the last set (empty %zu, index %zu)",
			ps_sync_name(*sync), ps_store_memory(s), empty, ps_test_index_bytes(s));
	ps_store_destroy(s);
	ps_policy_put(p);
	ps_policy_put(q);
}

/*
 * A set makes what it needs of what is ripe on its log (its index nodes)
 * and of the spares the store kept.  With a grace period before each set
 * (ps_rcu_barrier()), what the set before the last one retired is ripe;
 * each allocation the set still needs fails in turn and loses nothing:
 * the store holds what it held, and nothing leaks.  Sets that found all
 * they needed allocate nothing at all.
 */
RCU_TEST(a_set_reusing_retired_memory_fails_cleanly, .timeout = 120)
{
	struct ps_policy *p[2] = { ps_test_bind(0), ps_test_bind(1) };
	uint64_t seed = 0x5e75 + (uint64_t)*sync;
	long u, injected = 0, none = 0;
	struct ps_model *m = malloc(sizeof(*m));
	struct ps_store *s;
	char why[256];
	int i;

	cr_assert_not_null(m);
	ps_test_alloc_install();
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	ps_model_init(m);
	for (i = 0; i < 200; i++) {
		cr_assert_eq(ps_store_set(s, 4 * (uint64_t)i, 4 * (uint64_t)i + 3, p[i & 1]), 0);
		cr_assert_eq(ps_model_set(m, 4 * (uint64_t)i, 4 * (uint64_t)i + 3, p[i & 1]), 0);
	}
	for (u = 0; u < 300; u++) {
		uint64_t a = ps_test_rand(&seed) % 800;
		uint64_t e = a + 1 + ps_test_rand(&seed) % (u % 8 ? 4 : 64);
		struct ps_policy *pol = u % 5 ? p[u & 1] : NULL;
		long k;

		cr_assert_eq(ps_rcu_barrier(), 0);
		for (k = 0;; k++) {
			int ret;

			ps_test_alloc_fail_once(k);
			ret = ps_store_set(s, a, e, pol);
			if (!ps_test_alloc_disarm() || !ret) {
				cr_assert_eq(ret, 0);
				break;
			}
			cr_assert_eq(ret, -ENOMEM);
			injected++;
			cr_assert(ps_model_matches(s, m, why, sizeof(why)), "%s", why);
		}
		none += !k;
		cr_assert_eq(ps_model_set(m, a, e, pol), 0);
	}
	cr_assert(ps_model_matches(s, m, why, sizeof(why)), "%s", why);
	cr_log_info("%s: %ld of %ld sets allocated nothing, %ld failures injected",
			ps_sync_name(*sync), none, u, injected);
	cr_assert_gt(none, 0, "no set made its memory of what it retired");
	cr_assert_gt(injected, u);
	ps_store_destroy(s);
	cr_assert_eq(ps_rcu_barrier(), 0);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
	ps_policy_put(p[0]);
	ps_policy_put(p[1]);
	free(m);
}

/*
 * Destroy, at once or deferred, while records wait to be handed back, sit
 * on the store, or its sweep is queued or running: the sweep never
 * touches a destroyed store (AddressSanitizer, valgrind), and nothing
 * leaks.
 */
RCU_TEST(destroy_while_a_sweep_waits, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1);
	int k;

	for (k = 0; k < 48; k++) {
		struct ps_store *s = ps_store_create(*sync);

		cr_assert_not_null(s);
		churn(s, p, 100 + 50 * (k % 5));
		if (k % 3)
			usleep((useconds_t)(k % 4) * 7000);
		if (k & 1)
			ps_store_destroy(s);
		else
			cr_assert_eq(ps_store_destroy_deferred(s), 0);
	}
	cr_assert_eq(ps_rcu_barrier(), 0);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

/*
 * An online QSBR thread destroys a store whose sweep is queued while
 * another thread's sets keep the reclaim thread in grace periods, which
 * wait for the destroying thread.  Destroy cancels the sweep under the
 * reclaimer's grace-period lock, offline as when it waits for the
 * records: online, a grace period begun just before would wait for it
 * while it waits for the lock.  (That window is a few instructions wide:
 * this test runs the path under the checkers more than it catches it.)
 */
struct qsbr_churner {
	struct ps_store *s;
	struct ps_policy *p;
	int stop; /* atomic */
};

static void *qsbr_churner(void *arg)
{
	struct qsbr_churner *c = arg;

	while (!PSI_READ_ONCE(c->stop)) {
		churn(c->s, c->p, 50);
		usleep(500);
	}
	return NULL;
}

Test(rcu_store, online_qsbr_destroy_with_a_sweep_queued, .timeout = 60)
{
	struct qsbr_churner c = { .s = ps_store_create(PS_SYNC_RCU_QSBR), .p = ps_test_bind(1) };
	int k, rounds = ps_test_scale() < 1 ? 6 : 40;
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, qsbr_churner, &c), 0);
	cr_assert_eq(ps_qsbr_thread_online(), 0);
	for (k = 0; k < rounds; k++) {
		struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);

		churn(s, c.p, 200);
		ps_qsbr_quiescent();
		usleep(2000); /* grace periods end: records come back, the sweep is queued */
		ps_qsbr_quiescent();
		churn(s, c.p, 20);
		ps_store_destroy(s);
	}
	ps_qsbr_thread_offline();
	PSI_WRITE_ONCE(c.stop, 1);
	pthread_join(t, NULL);
	ps_store_destroy(c.s);
	cr_assert_eq(ps_rcu_barrier(), 0);
	cr_assert_eq(ps_policy_refcount(c.p), 1);
	ps_policy_put(c.p);
}

/* Ranges of the kept-leaves tests: 3000, or 600 under valgrind. */
static int leaves_ranges(void)
{
	return ps_test_scale() < 1 ? 600 : 3000;
}

/* @n ranges of 4 pages, [4i, 4i + 4), side by side, policies @p[0] and @p[1] in turn. */
static void leaves_fill(struct ps_store *s, struct ps_policy **p, int n)
{
	int i;

	for (i = 0; i < n; i++)
		cr_assert_eq(ps_store_set(s, 4 * (uint64_t)i, 4 * (uint64_t)i + 4, p[i & 1]), 0);
}

/*
 * @sets times, a random range of leaves_fill()'s split and made whole
 * again (a new leaf a set), with a grace period every 64 so that retired
 * leaves ripen, and ps_store_check() every 200.
 */
static void leaves_split_and_mend(struct ps_store *s, struct ps_policy **p, int n, int sets,
		uint64_t *seed)
{
	const char *why = "";
	int i;

	for (i = 0; i < sets; i++) {
		uint64_t r = ps_test_rand(seed) % (uint64_t)n;

		cr_assert_eq(ps_store_set(s, 4 * r + 1, 4 * r + 3, p[!(r & 1)]), 0);
		cr_assert_eq(ps_store_set(s, 4 * r, 4 * r + 4, p[r & 1]), 0);
		if (i % 64 == 63)
			cr_assert_eq(ps_rcu_barrier(), 0);
		if (i % 200 == 199)
			cr_assert_eq(ps_store_check(s, &why), 0, "%s", why);
	}
	cr_assert_eq(ps_store_count(s), (size_t)n);
}

/*
 * A store of a few thousand ranges (600 under valgrind) keeps full
 * leaves taken off its log for its next sets (up to 64, an eighth of its
 * index's bytes): they pass ps_store_check() and go back, to the
 * allocator they came from, at synchronize, once sets stop (the sweep)
 * and at destroy.  Each round splits ranges and makes them whole again
 * (leaves_split_and_mend()).
 */
RCU_TEST(kept_leaves_given_back, .timeout = 120)
{
	struct ps_policy *p[2] = { ps_test_bind(0), ps_test_bind(1) };
	uint64_t seed = 0x1eaf + (uint64_t)*sync;
	int n = leaves_ranges(), round, tries;
	struct ps_store *s;
	size_t empty;

	ps_test_alloc_install();
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	empty = ps_store_memory(s);
	leaves_fill(s, p, n);
	for (round = 0; round < 3; round++) {
		leaves_split_and_mend(s, p, n, n, &seed);
		if (round == 0) {
			ps_store_synchronize(s);
			cr_assert_eq(ps_store_memory(s), at_rest(s, empty),
					"%s: %zu bytes besides ranges and index after synchronize",
					ps_sync_name(*sync), ps_store_memory(s) - at_rest(s, empty));
		} else if (round == 1) {
			for (tries = 0; tries < 2000; tries++) {
				if (ps_store_memory(s) == at_rest(s, empty))
					break;
				usleep(10000);
			}
			cr_assert_eq(ps_store_memory(s), at_rest(s, empty),
					"%s: %zu bytes besides ranges and index 20 s after the sets",
					ps_sync_name(*sync), ps_store_memory(s) - at_rest(s, empty));
		}
	}
	ps_store_destroy(s);
	cr_assert_eq(ps_rcu_barrier(), 0);
	ps_test_alloc_restore();
	cr_assert_eq(ps_test_alloc_live(), 0, "%s: %ld blocks of the store's allocator left",
			ps_sync_name(*sync), ps_test_alloc_live());
	ps_policy_put(p[0]);
	ps_policy_put(p[1]);
}

/*
 * A store that keeps leaves from a large index and then shrinks to one
 * range keeps no more than its smaller index allows: ps_store_check()
 * checks the bound after the set that shrinks it, and synchronize gives
 * back everything besides the range and the index.
 */
RCU_TEST(kept_leaves_follow_a_shrinking_index, .timeout = 120)
{
	struct ps_policy *p[2] = { ps_test_bind(0), ps_test_bind(1) };
	uint64_t seed = 0x5a11 + (uint64_t)*sync;
	int n = leaves_ranges();
	struct ps_store *s;
	const char *why = "";
	size_t empty;

	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	empty = ps_store_memory(s);
	leaves_fill(s, p, n);
	leaves_split_and_mend(s, p, n, 2 * n, &seed);
	cr_assert_eq(ps_store_check(s, &why), 0, "%s: %s", ps_sync_name(*sync), why);
	cr_assert_eq(ps_store_set(s, 0, 4 * (uint64_t)n, p[0]), 0);
	cr_assert_eq(ps_store_count(s), 1);
	cr_assert_eq(ps_store_check(s, &why), 0, "%s after the store shrank: %s",
			ps_sync_name(*sync), why);
	ps_store_synchronize(s);
	cr_assert_eq(ps_store_memory(s), at_rest(s, empty),
			"%s: %zu bytes besides the range and the index after synchronize",
			ps_sync_name(*sync), ps_store_memory(s) - at_rest(s, empty));
	ps_store_destroy(s);
	ps_policy_put(p[0]);
	ps_policy_put(p[1]);
}

/* ---- 9. in-place variants: victim reuse under lockless readers --------------------- */

static void *flip_reader(void *arg)
{
	struct store_readers *f = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed;

	while (!PSI_READ_ONCE(f->stop)) {
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
		PSI_FETCH_ADD(f->reads, 1, RELAXED);
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
	PSI_WRITE_ONCE(f.stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(ps_store_check(f.s, NULL), 0);
	ps_store_destroy(f.s);
}

/* ---- 10. synchronize and sets from many threads (3000 each, 600 under valgrind) ----- */

struct many {
	struct ps_store *s;
	struct ps_policy *pols[3];
	int id;
};

static void *many_fn(void *arg)
{
	struct many *m = arg;
	uint64_t seed = 1 + (uint64_t)m->id;
	long i, n = ps_test_iters(3000) < 600 ? 600 : ps_test_iters(3000);

	if (m->id == 3 && ps_store_sync_kind(m->s) == PS_SYNC_RCU_QSBR)
		TCHECK(ps_qsbr_thread_online() == 0, "online");
	for (i = 0; i < n; i++) {
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

Test(rcu_store, dlclose_leaves_no_reclaim_thread, .timeout = 30)
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
