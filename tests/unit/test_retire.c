// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Retiring a store: ps_store_destroy() beside the reclaim thread, which
 * may still be releasing the store's last batch; deferred destroys; the
 * destroys of a store an object is attached to (ps_store_attach()).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "testutil.h"

/* The variants that hand retired ranges to a reclaim thread. */
static enum ps_sync deferring_syncs[] = { PS_SYNC_SEQLOCK, PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- destroy while the reclaim thread releases the store's last batch ---- */

static int hook_entered, hook_done, store_destroyed;

/*
 * Holds the reclaim thread inside the first batch release it is called
 * for, until the store is destroyed or 200 ms passed (a destroy that waits
 * for the release waits that long).
 */
static void hold_release(void)
{
	int i;

	if (PSI_XCHG(hook_entered, 1, SEQ_CST))
		return;
	for (i = 0; i < 200 && !PSI_LOAD_SEQ_CST(store_destroyed); i++)
		sleep_ms(1);
	sleep_ms(5); /* let a destroy that did not wait finish its frees */
	PSI_STORE_SEQ_CST(hook_done, 1);
}

/*
 * A destroy that does not wait for a release in progress frees the store
 * under the reclaim thread, which then writes to it: the quarantine sees
 * the write (ASan and memcheck report it too).
 */
static void destroy_beside_last_release_one(enum ps_sync *sync)
{
	struct ps_policy *p = ps_test_bind(1);
	struct ps_store *s, *other;
	uint64_t t0;
	long written;
	int i;

	PSI_STORE_SEQ_CST(hook_entered, 0);
	PSI_STORE_SEQ_CST(hook_done, 0);
	PSI_STORE_SEQ_CST(store_destroyed, 0);
	ps_test_alloc_install();
	psi_test_set_release_hook(hold_release);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	/*
	 * Retire ranges until a full batch is handed over and its release
	 * starts; slowly, so that no second batch follows it (destroy would
	 * wait for that one, and with it for the held release).
	 */
	t0 = ps_test_now_ns();
	for (i = 0; !PSI_LOAD_SEQ_CST(hook_entered); i++) {
		cr_assert_eq(ps_store_set(s, 0, 8, (i & 1) ? p : NULL), 0);
		sleep_ms(2);
		cr_assert_lt(ps_test_now_ns() - t0, 10000000000ULL, "no batch was released");
	}
	ps_test_alloc_quarantine_begin();
	ps_store_destroy(s);
	PSI_STORE_SEQ_CST(store_destroyed, 1);
	while (!PSI_LOAD_SEQ_CST(hook_done))
		sleep_ms(1);
	/* Every item queued before this barrier is released: the held one too. */
	other = ps_store_create(*sync);
	cr_assert_not_null(other);
	ps_store_synchronize(other);
	ps_store_destroy(other);
	written = ps_test_alloc_quarantine_end();
	psi_test_set_release_hook(NULL);
	cr_assert_eq(written, 0, "%s: %ld freed blocks written by the reclaim thread after "
			"ps_store_destroy() returned", ps_sync_name(*sync), written);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
	ps_test_alloc_restore();
}

Test(retire, destroy_beside_last_release, .timeout = 60)
{
	size_t i;

	for (i = 0; i < PS_ARRAY_SIZE(deferring_syncs); i++)
		destroy_beside_last_release_one(&deferring_syncs[i]);
}

/* Run @fn for every variant, in this one test process. */
static void for_all_syncs(void (*fn)(enum ps_sync *))
{
	int i;

	for (i = 0; i < PS_SYNC_COUNT; i++)
		fn(&ps_test_all_syncs[i]);
}

/* ---- ps_store_destroy_deferred(): readers still inside their sections ---- */

/*
 * Readers find the store through a pointer, inside a read-side section of
 * its RCU flavour of their own (a section of a helper store: memb, an RCU
 * store, for all but RCU_QSBR, whose helper is an RCU_QSBR store: what
 * ps_store_destroy_deferred() asks of readers), and stay in
 * their store's section for a while, checking every answer.  The main
 * thread unpublishes the store and hands it to ps_store_destroy_deferred()
 * while they are inside; they finish their sections on the retired store.
 * Memcheck (valgrind.retire) and ASan see every access.
 */
struct retire_readers {
	struct ps_store *published;
	struct ps_store *guard; /* its sections are read-side sections of the store's flavour */
	struct ps_policy *pol;
	int inside, retired, lookups;
};

static void *retire_reader(void *arg)
{
	struct retire_readers *r = arg;

	for (;;) {
		struct ps_store *s;
		int i;

		ps_store_read_lock(r->guard);
		s = PSI_LOAD_SEQ_CST(r->published);
		if (!s) {
			ps_store_read_unlock(r->guard);
			return NULL;
		}
		ps_store_read_lock(s);
		PSI_FETCH_ADD(r->inside, 1, SEQ_CST);
		/* Stay inside across the retirement, reading all the while. */
		for (i = 0; PSI_LOAD_SEQ_CST(r->retired) < 2; i++) {
			struct ps_policy_view v = PS_POLICY_VIEW_INIT(1);

			TCHECK(ps_store_lookup_borrow(s, 5) == r->pol, "borrowed lookup");
			/* SPIN: a copy takes the lock, which the section holds (-EDEADLK). */
			TCHECK(ps_store_sync_kind(s) == PS_SYNC_SPIN ||
					(ps_store_lookup_copy(s, 7, &v) == 1 &&
							v.mode == PS_MPOL_BIND), "copy");
			if (i % 64 == 63)
				sleep_ms(1);
		}
		PSI_FETCH_ADD(r->lookups, i, SEQ_CST);
		ps_store_read_unlock(s);
		ps_store_read_unlock(r->guard);
	}
}

static void deferred_destroy_beside_readers_in_sections_one(enum ps_sync *sync);

Test(retire, deferred_destroy_beside_readers_in_sections, .timeout = 60)
{
	for_all_syncs(deferred_destroy_beside_readers_in_sections_one);
}

static void deferred_destroy_beside_readers_in_sections_one(enum ps_sync *sync)
{
	/* The guard's flavour is the grace period's: qsbr for RCU_QSBR, memb for the others. */
	struct retire_readers r = { .guard = ps_store_create(*sync == PS_SYNC_RCU_QSBR ?
			PS_SYNC_RCU_QSBR : PS_SYNC_RCU), .pol = ps_test_bind(1) };
	struct ps_store *s = ps_store_create(*sync);
	pthread_t t[2];
	int i;

	cr_assert_not_null(s);
	for (i = 0; i < 64; i++)
		cr_assert_eq(ps_store_set(s, (uint64_t)i * 16, (uint64_t)i * 16 + 12, r.pol), 0);
	PSI_STORE_SEQ_CST(r.published, s);
	ps_test_spawn(t, 2, retire_reader, &r, 0);
	/* SPIN sections exclude each other: one reader inside, the other waiting for the lock. */
	while (PSI_LOAD_SEQ_CST(r.inside) < (*sync == PS_SYNC_SPIN ? 1 : 2))
		sleep_ms(1);
	/* Unpublish, then retire: the readers inside go on reading the retired store. */
	PSI_STORE_SEQ_CST(r.published, NULL);
	cr_assert_eq(ps_store_destroy_deferred(s), 0);
	PSI_STORE_SEQ_CST(r.retired, 1);
	sleep_ms(30); /* grace periods and lock tries meanwhile */
	PSI_STORE_SEQ_CST(r.retired, 2);
	ps_test_join(t, 2);
	cr_assert_eq(ps_rcu_barrier(), 0);
	/* SPIN, RWLOCK, SEQLOCK: freed once their lock was free; the readers left it before the join. */
	for (i = 0; i < 500 && ps_policy_refcount(r.pol) != 1; i++)
		sleep_ms(10);
	cr_assert_eq(ps_policy_refcount(r.pol), 1, "%s: the retired store was not freed",
			ps_sync_name(*sync));
	cr_log_info("%s: %d lookups in sections", ps_sync_name(*sync), PSI_LOAD_SEQ_CST(r.lookups));
	ps_store_destroy(r.guard);
	ps_policy_put(r.pol);
}

/* Inside the store's own section: it returns at once, the section goes on, the free follows it. */
static void deferred_destroy_inside_own_section_one(enum ps_sync *sync);

Test(retire, deferred_destroy_inside_own_section, .timeout = 30)
{
	for_all_syncs(deferred_destroy_inside_own_section_one);
}

static void deferred_destroy_inside_own_section_one(enum ps_sync *sync)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(2);
	int i;

	cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
	ps_store_read_lock(s);
	cr_assert_eq(ps_store_destroy_deferred(s), 0);
	sleep_ms(30); /* a grace period, and the lock tried, while the section is open */
	cr_expect_eq(ps_store_lookup_borrow(s, 3), p);
	ps_store_read_unlock(s);
	for (i = 0; i < 500 && ps_policy_refcount(p) != 1; i++)
		sleep_ms(10);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

/* A foreach walk in progress (SPIN, RWLOCK and SEQLOCK walks hold the lock). */
struct walk_hold {
	struct ps_store *s;
	int in, release;
};

static int hold_walk(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walk_hold *w = arg;

	(void)start, (void)end, (void)pol;
	PSI_STORE_SEQ_CST(w->in, 1);
	while (!PSI_LOAD_SEQ_CST(w->release))
		sleep_ms(1);
	return 1;
}

static void *walker(void *arg)
{
	struct walk_hold *w = arg;

	TCHECK(ps_store_foreach(w->s, hold_walk, w) == 1, "walk");
	return NULL;
}

static void deferred_destroy_beside_walk_one(enum ps_sync *sync);

Test(retire, deferred_destroy_beside_walk, .timeout = 30)
{
	for_all_syncs(deferred_destroy_beside_walk_one);
}

static void deferred_destroy_beside_walk_one(enum ps_sync *sync)
{
	struct walk_hold w = { .s = ps_store_create(*sync) };
	struct ps_policy *p = ps_test_bind(2);
	pthread_t t;
	int i;

	cr_assert_eq(ps_store_set(w.s, 0, 10, p), 0);
	ps_test_spawn(&t, 1, walker, &w, 0);
	while (!PSI_LOAD_SEQ_CST(w.in))
		sleep_ms(1);
	cr_assert_eq(ps_store_destroy_deferred(w.s), 0);
	sleep_ms(30); /* RCU variants: the walk's section holds the grace period up */
	cr_expect_eq(ps_policy_refcount(p), 2, "%s: freed under a walk", ps_sync_name(*sync));
	PSI_STORE_SEQ_CST(w.release, 1);
	ps_test_join(&t, 1);
	for (i = 0; i < 500 && ps_policy_refcount(p) != 1; i++)
		sleep_ms(10);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

/* Out of memory for the hand-over: nothing done, the store as it was. */
static void deferred_destroy_out_of_memory_one(enum ps_sync *sync);

Test(retire, deferred_destroy_out_of_memory, .timeout = 30)
{
	for_all_syncs(deferred_destroy_out_of_memory_one);
}

static void deferred_destroy_out_of_memory_one(enum ps_sync *sync)
{
	struct ps_store *s;
	struct ps_policy *p = ps_test_bind(2);

	ps_test_alloc_install();
	s = ps_store_create(*sync);
	cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
	ps_test_alloc_fail_after(0);
	cr_expect_eq(ps_store_destroy_deferred(s), -ENOMEM);
	ps_test_alloc_disarm();
	cr_expect_eq(ps_store_check(s, NULL), 0);
	ps_policy_put(ps_store_lookup(s, 5));
	cr_expect_eq(ps_store_destroy_deferred(NULL), -EINVAL);
	cr_assert_eq(ps_store_destroy_deferred(s), 0);
	cr_assert_eq(ps_rcu_barrier(), 0);
	ps_test_alloc_restore();
	ps_policy_put(p);
}

/* ---- ps_sync_read_lock(): the reader side of a deferred destroy ---- */

/*
 * A reader finds the store through a pointer inside ps_sync_read_lock()
 * and holds it across the retirement; the store is freed only after the
 * reader closed its section, and the reader's lookups after the
 * retirement read a live store (ASan and memcheck see every access).
 */
struct sync_reader {
	enum ps_sync sync;
	struct ps_store *published;
	struct ps_policy *pol;
	int inside, go_on, lookups_ok;
};

static void *sync_section_reader(void *arg)
{
	struct sync_reader *r = arg;
	struct ps_store *s;

	TCHECK(ps_sync_read_lock(r->sync) == 0, "ps_sync_read_lock");
	s = PSI_LOAD_SEQ_CST(r->published);
	TCHECK(ps_store_lookup_node(s, 3, 0) == 0, "lookup before the retirement");
	PSI_STORE_SEQ_CST(r->inside, 1);
	while (!PSI_LOAD_SEQ_CST(r->go_on))
		sleep_ms(1);
	/* Retired meanwhile, and still in use. */
	TCHECK(ps_store_lookup_node(s, 3, 0) == 0, "lookup after the retirement");
	TCHECK(ps_store_count(s) == 1, "count after the retirement");
	PSI_STORE_SEQ_CST(r->lookups_ok, 1);
	ps_sync_read_unlock(r->sync);
	return NULL;
}

VARIANT_TEST(retire, sync_section_holds_deferred_free, .timeout = 30)
{
	struct sync_reader r = { .sync = *sync, .pol = ps_test_bind(0) };
	struct ps_store *s = ps_store_create(*sync);
	pthread_t t;
	int i;

	cr_assert_eq(ps_store_set(s, 0, 10, r.pol), 0);
	PSI_STORE_SEQ_CST(r.published, s);
	ps_test_spawn(&t, 1, sync_section_reader, &r, 0);
	while (!PSI_LOAD_SEQ_CST(r.inside))
		sleep_ms(1);
	PSI_STORE_SEQ_CST(r.published, NULL);
	cr_assert_eq(ps_store_destroy_deferred(s), 0);
	sleep_ms(50); /* grace periods and lock tries meanwhile */
	cr_expect_eq(ps_policy_refcount(r.pol), 2, "%s: the store was freed under an open section",
			ps_sync_name(*sync));
	PSI_STORE_SEQ_CST(r.go_on, 1);
	ps_test_join(&t, 1);
	cr_expect(PSI_LOAD_SEQ_CST(r.lookups_ok));
	cr_assert_eq(ps_rcu_barrier(), 0);
	for (i = 0; i < 500 && ps_policy_refcount(r.pol) != 1; i++)
		sleep_ms(10);
	cr_assert_eq(ps_policy_refcount(r.pol), 1, "%s: not freed after the section",
			ps_sync_name(*sync));
	ps_policy_put(r.pol);
}

/*
 * Inside the section: sections nest (in each other and with a store's
 * own), stores work as anywhere, a deferred destroy is fine, and a wait
 * for a grace period of the section's flavour is refused (-EDEADLK), as
 * inside an RCU store's section.  Bad variants: -EINVAL, and an unlock
 * that does nothing.
 */
VARIANT_TEST(retire, sync_section_contexts, .timeout = 30)
{
	enum ps_sync same = *sync == PS_SYNC_RCU_QSBR ? PS_SYNC_RCU_QSBR : PS_SYNC_RCU;
	struct ps_store *s = ps_store_create(*sync), *other = ps_store_create(same);
	struct ps_store *gone = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(0);

	cr_assert_eq(ps_sync_read_lock((enum ps_sync)PS_SYNC_COUNT), -EINVAL);
	cr_assert_eq(ps_sync_read_lock((enum ps_sync)-1), -EINVAL);
	ps_sync_read_unlock((enum ps_sync)PS_SYNC_COUNT);
	cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
	cr_assert_eq(ps_store_set(gone, 0, 10, p), 0);

	cr_assert_eq(ps_sync_read_lock(*sync), 0);
	cr_expect_eq(ps_sync_read_lock(*sync), 0, "nested");
	if (*sync != PS_SYNC_SPIN) {
		/* A SPIN section holds the lock a SPIN lookup takes: borrowed reads only. */
		ps_store_read_lock(s);
		cr_expect_eq(ps_store_lookup_borrow(s, 5), p);
		ps_store_read_unlock(s);
	}
	cr_expect_eq(ps_store_lookup_node(s, 5, 0), 0);
	cr_expect_eq(ps_store_set(s, 20, 30, p), 0, "a set of the store");
	cr_expect_eq(ps_store_destroy_deferred(gone), 0);
	cr_expect_eq(ps_store_synchronize(other), -EDEADLK, "a grace period of the flavour");
	cr_expect_eq(ps_rcu_barrier(), -EDEADLK);
	ps_sync_read_unlock(*sync);
	ps_sync_read_unlock(*sync);

	/* Closed: waits for grace periods are allowed again. */
	cr_expect_eq(ps_store_synchronize(other), 0);
	cr_assert_eq(ps_rcu_barrier(), 0);
	ps_store_destroy(s);
	ps_store_destroy(other);
	cr_expect_eq(ps_policy_refcount(p), 1, "%s: the retired store was not freed",
			ps_sync_name(*sync));
	ps_policy_put(p);
}

/*
 * A thread that exits (pthread_exit()) or is cancelled inside a section
 * has it closed at exit: later grace periods, and the free of a store
 * retired while it was inside, do not wait for it forever.
 */
struct sync_dier {
	enum ps_sync sync;
	bool cancel;
	int inside;
};

static void *sync_section_dier(void *arg)
{
	struct sync_dier *d = arg;

	TCHECK(ps_sync_read_lock(d->sync) == 0, "ps_sync_read_lock");
	PSI_STORE_SEQ_CST(d->inside, 1);
	if (!d->cancel)
		pthread_exit(NULL);
	for (;;)
		pause(); /* a cancellation point */
	return NULL;
}

static void sync_section_dies(enum ps_sync sync, bool cancel)
{
	struct sync_dier d = { .sync = sync, .cancel = cancel };
	struct ps_store *s = ps_store_create(sync);
	struct ps_policy *p = ps_test_bind(0);
	pthread_t t;
	int i;

	cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
	cr_assert_eq(pthread_create(&t, NULL, sync_section_dier, &d), 0);
	while (!PSI_LOAD_SEQ_CST(d.inside))
		sleep_ms(1);
	cr_assert_eq(ps_store_destroy_deferred(s), 0);
	if (cancel)
		cr_assert_eq(pthread_cancel(t), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(ps_rcu_barrier(), 0); /* the test's timeout catches a hang */
	for (i = 0; i < 500 && ps_policy_refcount(p) != 1; i++)
		sleep_ms(10);
	cr_assert_eq(ps_policy_refcount(p), 1, "%s: not freed", ps_sync_name(sync));
	ps_policy_put(p);
}

VARIANT_TEST(retire, sync_section_thread_exits_inside, .timeout = 30)
{
	sync_section_dies(*sync, false);
}

VARIANT_TEST(retire, sync_section_thread_cancelled_inside, .timeout = 30)
{
	sync_section_dies(*sync, true);
}

/*
 * fork() beside a thread inside a section: the child uses sections of
 * its own, retires a store and waits for the free; the parent's thread,
 * which does not exist in the child, holds none of it up.
 */
struct sync_holder {
	enum ps_sync sync;
	int inside, release;
};

static void *sync_section_holder(void *arg)
{
	struct sync_holder *h = arg;

	TCHECK(ps_sync_read_lock(h->sync) == 0, "ps_sync_read_lock");
	PSI_STORE_SEQ_CST(h->inside, 1);
	while (!PSI_LOAD_SEQ_CST(h->release))
		sleep_ms(1);
	ps_sync_read_unlock(h->sync);
	return NULL;
}

static int sync_section_child(enum ps_sync sync, struct ps_store *s, struct ps_policy *p)
{
	int i;

	alarm(20);
	if (ps_sync_read_lock(sync) != 0)
		return 1;
	if (ps_store_lookup_node(s, 5, 0) != 0)
		return 2;
	ps_sync_read_unlock(sync);
	if (ps_store_destroy_deferred(s) != 0)
		return 3;
	if (ps_rcu_barrier() != 0)
		return 4;
	for (i = 0; i < 500 && ps_policy_refcount(p) != 1; i++)
		sleep_ms(10);
	return ps_policy_refcount(p) == 1 ? 0 : 5;
}

VARIANT_TEST(retire, sync_section_forked_child, .timeout = 30)
{
	struct sync_holder h = { .sync = *sync };
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(0);
	pthread_t t;
	pid_t pid;
	int status;

	cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
	ps_test_spawn(&t, 1, sync_section_holder, &h, 0);
	while (!PSI_LOAD_SEQ_CST(h.inside))
		sleep_ms(1);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(sync_section_child(*sync, s, p));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "%s: child killed by signal %d (hang or crash)",
			ps_sync_name(*sync), WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0, "%s: child failed at step %d", ps_sync_name(*sync),
			WEXITSTATUS(status));
	PSI_STORE_SEQ_CST(h.release, 1);
	ps_test_join(&t, 1);
	ps_store_destroy(s);
	ps_policy_put(p);
}

/* ---- grace periods in proportion to the memory queued ---- */

/* Wait (10 s at most) until the reclaim thread of @sync has released everything queued. */
static void wait_released(enum ps_sync sync)
{
	uint64_t t0 = ps_test_now_ns();
	size_t pending = 1;

	while (!ps_test_reclaim_stats(sync, NULL, &pending, NULL, false) && pending) {
		cr_assert_lt(ps_test_now_ns() - t0, 10000000000ULL,
				"%s: %zu bytes still queued after 10 s, with no synchronize call",
				ps_sync_name(sync), pending);
		sleep_ms(1);
	}
}

/*
 * Sets a little apart, each retiring what it replaced: they share grace
 * periods (fewer than one per 20 sets), and all is released with no
 * synchronize call.  A thread that started one grace period per
 * millisecond of work made about one per set here.
 *
 * A writer that stops for half the quiet time may rightly see a grace
 * period start in the pause (a loaded machine, or valgrind running one
 * thread at a time, stops it): each such pause allows one more, and sets
 * that slow down to more than the latency in all allow one per latency.
 */
SYNCS_TEST(deferring_syncs, retire, sets_share_grace_periods, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	struct ps_store *s = ps_store_create(*sync);
	struct timespec gap = { 0, 300000 };
	uint64_t gp0, gp1, t, t0, last, pauses = 0, allowed;
	int i, n = 200;

	cr_assert_not_null(s);
	for (i = 0; i < 64; i++)
		cr_assert_eq(ps_store_set(s, 8 * (uint64_t)i, 8 * (uint64_t)i + 4, p), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_test_reclaim_stats(*sync, &gp0, NULL, NULL, true), 0);
	t0 = last = ps_test_now_ns();
	for (i = 0; i < n; i++) {
		uint64_t k = (uint64_t)(i * 7 % 64);

		cr_assert_eq(ps_store_set(s, 8 * k, 8 * k + 4, (i & 1) ? p : q), 0);
		cr_assert_eq(ps_store_set(s, 8 * k + 1, 8 * k + 2, NULL), 0);
		nanosleep(&gap, NULL);
		t = ps_test_now_ns();
		pauses += t - last >= ps_test_reclaim_quiet_ns() / 2;
		last = t;
	}
	wait_released(*sync);
	cr_assert_eq(ps_test_reclaim_stats(*sync, &gp1, NULL, NULL, false), 0);
	/* The latency starts one at least that often however the sets come. */
	allowed = (last - t0) / ps_test_reclaim_latency_ns() + 2;
	allowed = (allowed > (uint64_t)n / 10 ? allowed : (uint64_t)n / 10) + pauses;
	cr_assert_lt(gp1 - gp0, allowed,
			"%s: %d sets took %llu grace periods, the writer paused %llu times",
			ps_sync_name(*sync), 2 * n, (unsigned long long)(gp1 - gp0),
			(unsigned long long)pauses);
	cr_assert_gt(gp1 - gp0, 0);
	cr_log_info("%s: %d sets, %llu grace periods, %llu pauses", ps_sync_name(*sync), 2 * n,
			(unsigned long long)(gp1 - gp0), (unsigned long long)pauses);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(p), 1);
	cr_assert_eq(ps_policy_refcount(q), 1);
	ps_policy_put(p);
	ps_policy_put(q);
}

/*
 * ps_store_synchronize() and a deferred destroy ask for their grace
 * period at once: neither waits out the time a batch may gather.  Ten of
 * each take less than five such times together.
 */
SYNCS_TEST(deferring_syncs, retire, synchronize_and_deferred_destroy_are_prompt, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	uint64_t t_sync = 0, t_defer = 0, latency = ps_test_reclaim_latency_ns();
	size_t pending;
	int i;

	for (i = 0; i < 10; i++) {
		struct ps_store *s = ps_store_create(*sync);
		uint64_t t0;

		cr_assert_not_null(s);
		cr_assert_eq(ps_store_set(s, 0, 100, p), 0);
		cr_assert_eq(ps_store_set(s, 10, 20, q), 0);
		cr_assert_eq(ps_store_set(s, 0, 100, q), 0); /* retires three ranges */
		t0 = ps_test_now_ns();
		cr_assert_eq(ps_store_synchronize(s), 0);
		t_sync += ps_test_now_ns() - t0;
		cr_assert_eq(ps_test_reclaim_stats(*sync, NULL, &pending, NULL, false), 0);
		cr_assert_eq(pending, 0, "%s: %zu bytes queued after a synchronize",
				ps_sync_name(*sync), pending);
		cr_assert_eq(ps_policy_refcount(p), 1);
		t0 = ps_test_now_ns();
		cr_assert_eq(ps_store_destroy_deferred(s), 0);
		while (ps_policy_refcount(q) != 1) {
			cr_assert_lt(ps_test_now_ns() - t0, 10000000000ULL, "never destroyed");
			usleep(100);
		}
		t_defer += ps_test_now_ns() - t0;
	}
	cr_expect_lt(t_sync, 5 * latency, "%s: 10 synchronize calls took %.1f ms",
			ps_sync_name(*sync), (double)t_sync / 1e6);
	cr_expect_lt(t_defer, 5 * latency, "%s: 10 deferred destroys took %.1f ms",
			ps_sync_name(*sync), (double)t_defer / 1e6);
	ps_policy_put(p);
	ps_policy_put(q);
}

/*
 * A writer flat out on one 64-range store, never synchronizing: what
 * waits for a grace period stays under the stores' hard bound (32 MiB,
 * reached only when the reclaim thread falls that far behind), and the
 * memory comes back to within twice a SPIN store's with
 * no synchronize call.
 */
static enum ps_sync rcu_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

static long store_of_64_blocks(enum ps_sync sync, struct ps_policy **pol, long sets,
		struct ps_store **out)
{
	long live0 = ps_test_alloc_live(), i;
	struct ps_store *s = ps_store_create(sync);
	uint64_t rng = 12345;

	cr_assert_not_null(s);
	for (i = 0; i < 64; i++)
		cr_assert_eq(ps_store_set(s, 4 * (uint64_t)i, 4 * (uint64_t)i + 3, pol[i % 4]), 0);
	for (i = 0; i < sets; i++) {
		uint64_t x;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		x = rng % 64;
		cr_assert_eq(ps_store_set(s, 4 * x, 4 * x + 3, pol[(rng >> 8) % 4]), 0);
	}
	*out = s;
	return ps_test_alloc_live() - live0;
}

SYNCS_TEST(rcu_syncs, retire, memory_in_flight_bounded, .timeout = 120)
{
	struct ps_policy *pol[4] = { ps_test_bind(0), ps_test_bind(1), ps_test_bind(2),
		ps_test_bind(3) };
	long sets = ps_test_iters(100000), spin_blocks, blocks = 0;
	struct ps_store *s;
	uint64_t t0;
	size_t peak;
	int i;

	ps_test_alloc_install();
	spin_blocks = store_of_64_blocks(PS_SYNC_SPIN, pol, 0, &s);
	ps_store_destroy(s);
	cr_assert_eq(ps_test_reclaim_stats(*sync, NULL, NULL, NULL, true), 0);
	store_of_64_blocks(*sync, pol, sets, &s);
	cr_assert_eq(ps_test_reclaim_stats(*sync, NULL, NULL, &peak, false), 0);
	cr_assert_leq(peak, ((size_t)32 << 20) + 65536, "%s: %zu bytes waited at once",
			ps_sync_name(*sync), peak);
	cr_log_info("%s: at most %zu bytes waited for a grace period (batches of %zu)",
			ps_sync_name(*sync), peak, ps_test_reclaim_batch_bytes());
	/* Back to twice a SPIN store's blocks with no synchronize call (the thread's spares aside). */
	for (t0 = ps_test_now_ns(); ps_test_now_ns() - t0 < 10000000000ULL; sleep_ms(5)) {
		blocks = ps_test_alloc_live();
		if (blocks <= 2 * spin_blocks)
			break;
	}
	cr_assert_leq(blocks, 2 * spin_blocks, "%s: %ld blocks live, SPIN's store %ld",
			ps_sync_name(*sync), blocks, spin_blocks);
	ps_store_destroy(s);
	ps_test_alloc_restore();
	for (i = 0; i < 4; i++)
		ps_policy_put(pol[i]);
}

/* ---- objects attached to a store ---- */

/* Two objects that read a store: their addresses name them. */
static char pools[2];

/* What a child attaches before it destroys the store. */
struct attach_child {
	struct ps_store *s;
	int users;
	bool deferred;
};

static void destroy_attached(void *arg)
{
	struct attach_child *c = arg;

	for (int i = 0; i < c->users; i++)
		if (ps_store_attach(c->s, &pools[i], "reader pool", "pool_stop()"))
			_exit(3);
	if (c->deferred)
		(void)ps_store_destroy_deferred(c->s);
	else
		ps_store_destroy(c->s);
}

/*
 * ps_store_destroy() of a store an object is attached to, in and out of
 * the checking mode, and ps_store_destroy_deferred() in it (out of it:
 * -EBUSY, attached_store_refused): one line naming the call, the store,
 * the object and the call that ends it, then abort().
 */
VARIANT_TEST(retire, attached_store_destroy_aborts, .timeout = 60)
{
	for (int k = 0; k < 6; k++) {
		bool checking = k >= 2, deferred = k >= 4;
		struct attach_child c = {.users = 1 + k % 2, .deferred = deferred};
		const char *call = deferred ? "ps_store_destroy_deferred()" : "ps_store_destroy()";
		char buf[2048], store[64], user[64];
		int sig;

		ps_test_set_checking(checking);
		c.s = ps_store_create(*sync);
		ps_test_set_checking(false);
		cr_assert_not_null(c.s);
		sig = ps_test_run_child(destroy_attached, &c, 10, buf, sizeof(buf), NULL);
		snprintf(store, sizeof(store), "%s store %p", ps_sync_name(*sync), (void *)c.s);
		snprintf(user, sizeof(user), "reader pool %p", (void *)&pools[c.users - 1]);
		cr_expect_eq(sig, SIGABRT, "%s, %d object(s), checking %d: the child %s: %s", call,
				c.users, checking,
				sig == SIGALRM ? "hung"
				: sig	       ? "died of another signal"
					       : "returned",
				buf);
		cr_expect(strstr(buf, "polstore: ") && strstr(buf, call) && strstr(buf, store) &&
						strstr(buf, user) && strstr(buf, "pool_stop()") &&
						(c.users < 2 || strstr(buf, "1 other attached "
									    "object")) &&
						(!checking || strstr(buf, "checking mode")),
				"%s, %d object(s), checking %d: message \"%s\" does not name %s "
				"and %s",
				call, c.users, checking, buf, store, user);
		ps_store_destroy(c.s);
	}
}

static void destroy_inherited(void *arg)
{
	struct ps_store *s = arg;

	ps_store_destroy(s);
	/* Dropped with the store: the child's copy is not the parent's attachment. */
	if (ps_store_detach(s, &pools[0]) != -ENOENT)
		_exit(4);
}

/*
 * Attached, a store is refused by ps_store_destroy_deferred() with -EBUSY
 * and stays as it was; attach and detach are refused for what they cannot
 * do, work inside a read-side section of the store, and leave nothing
 * attached when memory runs out; a child of fork() may destroy its copy
 * of a store the parent attached to; detached, the store goes.
 */
VARIANT_TEST(retire, attached_store_refused, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1);
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *got;
	char buf[2048] = "";

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 0, 8, p), 0);
	cr_expect_eq(ps_store_attach(NULL, &pools[0], "reader pool", "pool_stop()"), -EINVAL);
	cr_expect_eq(ps_store_attach(s, NULL, "reader pool", "pool_stop()"), -EINVAL);
	cr_expect_eq(ps_store_attach(s, &pools[0], NULL, "pool_stop()"), -EINVAL);
	cr_expect_eq(ps_store_attach(s, &pools[0], "reader pool", NULL), -EINVAL);
	cr_expect_eq(ps_store_detach(NULL, &pools[0]), -EINVAL);
	cr_expect_eq(ps_store_detach(s, NULL), -EINVAL);
	cr_expect_eq(ps_store_detach(s, &pools[0]), -ENOENT);

	ps_test_alloc_install();
	ps_test_alloc_fail_once(0);
	cr_expect_eq(ps_store_attach(s, &pools[0], "reader pool", "pool_stop()"), -ENOMEM);
	cr_expect(ps_test_alloc_disarm());
	ps_test_alloc_restore();
	cr_expect_eq(ps_store_detach(s, &pools[0]), -ENOENT, "attached without memory");

	ps_store_read_lock(s);
	cr_expect_eq(ps_store_attach(s, &pools[0], "reader pool", "pool_stop()"), 0);
	ps_store_read_unlock(s);
	cr_expect_eq(ps_store_attach(s, &pools[0], "reader pool", "pool_stop()"), -EEXIST);
	cr_expect_eq(ps_store_attach(s, &pools[1], "reader pool", "pool_stop()"), 0);
	cr_expect_eq(ps_store_destroy_deferred(s), -EBUSY);
	cr_expect_eq(ps_store_detach(s, &pools[1]), 0);
	cr_expect_eq(ps_store_destroy_deferred(s), -EBUSY);
	got = ps_store_lookup(s, 3);
	cr_expect_eq(got, p, "refused, the store changed");
	ps_policy_put(got);
	cr_expect_eq(ps_store_count(s), 1);

	cr_expect_eq(ps_test_run_child(destroy_inherited, s, 10, buf, sizeof(buf), NULL), 0,
			"the child did not return: %s", buf);
	cr_expect_eq(ps_store_destroy_deferred(s), -EBUSY,
			"the child's destroy detached the parent");

	ps_store_read_lock(s);
	cr_expect_eq(ps_store_detach(s, &pools[0]), 0);
	ps_store_read_unlock(s);
	cr_expect_eq(ps_store_detach(s, &pools[0]), -ENOENT);
	if (*sync % 2) {
		ps_store_destroy(s);
	} else {
		cr_expect_eq(ps_store_destroy_deferred(s), 0);
		ps_rcu_barrier();
	}
	ps_policy_put(p);
}
