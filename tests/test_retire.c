// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Retiring a store: ps_store_destroy() beside the reclaim thread, which
 * may still be releasing the store's last batch.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

/* The variants that hand retired ranges to a reclaim thread. */
static enum ps_sync deferring_syncs[] = { PS_SYNC_SEQLOCK, PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- destroy while the reclaim thread releases the store's last batch ---- */

static atomic_int hook_entered, hook_done, store_destroyed;

/*
 * Holds the reclaim thread inside the first batch release it is called
 * for, until the store is destroyed or 200 ms passed (a destroy that waits
 * for the release waits that long).
 */
static void hold_release(void)
{
	int i;

	if (atomic_exchange(&hook_entered, 1))
		return;
	for (i = 0; i < 200 && !atomic_load(&store_destroyed); i++)
		sleep_ms(1);
	sleep_ms(5); /* let a destroy that did not wait finish its frees */
	atomic_store(&hook_done, 1);
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

	atomic_store(&hook_entered, 0);
	atomic_store(&hook_done, 0);
	atomic_store(&store_destroyed, 0);
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
	for (i = 0; !atomic_load(&hook_entered); i++) {
		cr_assert_eq(ps_store_set(s, 0, 8, (i & 1) ? p : NULL), 0);
		sleep_ms(2);
		cr_assert_lt(ps_test_now_ns() - t0, 10000000000ULL, "no batch was released");
	}
	ps_test_alloc_quarantine_begin();
	ps_store_destroy(s);
	atomic_store(&store_destroyed, 1);
	while (!atomic_load(&hook_done))
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
	struct ps_store *_Atomic published;
	struct ps_store *guard; /* its sections are read-side sections of the store's flavour */
	struct ps_policy *pol;
	atomic_int inside, retired, lookups;
};

static void *retire_reader(void *arg)
{
	struct retire_readers *r = arg;

	for (;;) {
		struct ps_store *s;
		int i;

		ps_store_read_lock(r->guard);
		s = atomic_load(&r->published);
		if (!s) {
			ps_store_read_unlock(r->guard);
			return NULL;
		}
		ps_store_read_lock(s);
		atomic_fetch_add(&r->inside, 1);
		/* Stay inside across the retirement, reading all the while. */
		for (i = 0; atomic_load(&r->retired) < 2; i++) {
			struct ps_policy_view v = PS_POLICY_VIEW_INIT(1);

			TCHECK(ps_store_lookup_borrow(s, 5) == r->pol, "borrowed lookup");
			/* SPIN: a copy takes the lock, which the section holds (-EDEADLK). */
			TCHECK(ps_store_sync_kind(s) == PS_SYNC_SPIN ||
					(ps_store_lookup_copy(s, 7, &v) == 1 &&
							v.mode == PS_MPOL_BIND), "copy");
			if (i % 64 == 63)
				sleep_ms(1);
		}
		atomic_fetch_add(&r->lookups, i);
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
	atomic_store(&r.published, s);
	ps_test_spawn(t, 2, retire_reader, &r, 0);
	/* SPIN sections exclude each other: one reader inside, the other waiting for the lock. */
	while (atomic_load(&r.inside) < (*sync == PS_SYNC_SPIN ? 1 : 2))
		sleep_ms(1);
	/* Unpublish, then retire: the readers inside go on reading the retired store. */
	atomic_store(&r.published, NULL);
	cr_assert_eq(ps_store_destroy_deferred(s), 0);
	atomic_store(&r.retired, 1);
	sleep_ms(30); /* grace periods and lock tries meanwhile */
	atomic_store(&r.retired, 2);
	ps_test_join(t, 2);
	cr_assert_eq(ps_rcu_barrier(), 0);
	/* SPIN, RWLOCK, SEQLOCK: freed once their lock was free; the readers left it before the join. */
	for (i = 0; i < 500 && ps_policy_refcount(r.pol) != 1; i++)
		sleep_ms(10);
	cr_assert_eq(ps_policy_refcount(r.pol), 1, "%s: the retired store was not freed",
			ps_sync_name(*sync));
	cr_log_info("%s: %d lookups in sections", ps_sync_name(*sync), atomic_load(&r.lookups));
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
	atomic_int in, release;
};

static int hold_walk(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walk_hold *w = arg;

	(void)start, (void)end, (void)pol;
	atomic_store(&w->in, 1);
	while (!atomic_load(&w->release))
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
	while (!atomic_load(&w.in))
		sleep_ms(1);
	cr_assert_eq(ps_store_destroy_deferred(w.s), 0);
	sleep_ms(30); /* RCU variants: the walk's section holds the grace period up */
	cr_expect_eq(ps_policy_refcount(p), 2, "%s: freed under a walk", ps_sync_name(*sync));
	atomic_store(&w.release, 1);
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
