// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What ps_store_memory() counts, every variant: what waits for a grace
 * period until it is freed, and each block as malloc() holds it.
 */
#include "compiler.h"
#include "rcu_store_test.h"

/* A thread that holds back the grace periods of @s's flavour until told to stop. */
struct holder {
	struct ps_store *s;
	bool qsbr;
	int ready, stop;
};

static void *hold_fn(void *arg)
{
	struct holder *h = arg;

	/* QSBR: online and never quiescent; memb: inside a section of the store. */
	if (h->qsbr)
		cr_assert_eq(ps_qsbr_thread_online(), 0);
	else
		ps_store_read_lock(h->s);
	PSI_STORE_RELEASE(h->ready, 1);
	while (!PSI_LOAD_ACQUIRE(h->stop))
		usleep(1000);
	if (h->qsbr)
		ps_qsbr_thread_offline();
	else
		ps_store_read_unlock(h->s);
	ps_rcu_unregister_thread();
	return NULL;
}

/*
 * What the sets removed and replaced, waiting for a grace period that a
 * reader holds back, counts in ps_store_memory(): at least the removed
 * ranges (SEQLOCK) or a replaced leaf a set (RCU); after
 * ps_store_synchronize() it is gone and the store holds its ranges and
 * index alone.  SPIN and RWLOCK free at once.
 */
ALL_TEST(memory_counts_what_waits_for_a_grace_period, .timeout = 60)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1);
	bool waits = *sync == PS_SYNC_SEQLOCK || *sync == PS_SYNC_RCU || *sync == PS_SYNC_RCU_QSBR;
	struct holder h = { s, *sync == PS_SYNC_RCU_QSBR, 0, 0 };
	size_t empty = ps_store_memory(s), held, rest;
	pthread_t t;
	uint64_t k;

	for (k = 0; k < 200; k++)
		cr_assert_eq(ps_store_set(s, 4 * k, 4 * k + 3, p), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	if (waits) {
		cr_assert_eq(pthread_create(&t, NULL, hold_fn, &h), 0);
		while (!PSI_LOAD_ACQUIRE(h.ready))
			usleep(1000);
	}
	for (k = 0; k < 200; k += 2)
		cr_assert_eq(ps_store_set(s, 4 * k, 4 * k + 3, NULL), 0);
	held = ps_store_memory(s);
	rest = at_rest(s, empty);
	cr_log_info("%s: %zu bytes with what waits, %zu at rest", ps_sync_name(*sync), held, rest);
	if (waits) {
		cr_assert_geq(held, rest + 100 * ps_test_block_bytes(sizeof(struct ps_range)),
				"%s: %zu bytes; %zu at rest and 100 removed ranges waiting",
				ps_sync_name(*sync), held, rest);
		PSI_STORE_RELEASE(h.stop, 1);
		cr_assert_eq(pthread_join(t, NULL), 0);
	} else {
		cr_assert_eq(held, rest);
	}
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_memory(s), at_rest(s, empty), "%s: %zu bytes after synchronize",
			ps_sync_name(*sync), ps_store_memory(s));
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * ps_store_memory() is at least what malloc() holds for the store's
 * blocks (malloc_usable_size(), which the test allocator sums): filled,
 * churned with what waits for a grace period (3000 sets, 600 under
 * valgrind), and synchronized.
 */
ALL_TEST(memory_counts_what_malloc_holds, .timeout = 60)
{
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	struct ps_store *s;
	uint64_t seed = 5;
	long base, i, n = ps_test_iters(3000) < 600 ? 600 : ps_test_iters(3000);

	/* The reclaim threads and the policies first: they are not the store's. */
	s = ps_store_create(*sync);
	cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
	ps_store_destroy(s);
	ps_rcu_barrier();
	ps_test_alloc_install();
	base = ps_test_alloc_usable();
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	for (i = 0; i < n; i++) {
		uint64_t a = ps_test_rand(&seed) % 40000;

		cr_assert_eq(ps_store_set(s, a, a + 1 + ps_test_rand(&seed) % 8, i % 5 ? p : q), 0);
		if (i % 100 == 0)
			cr_assert_geq(ps_store_memory(s), (size_t)(ps_test_alloc_usable() - base),
					"%s: after %ld sets %zu bytes, malloc holds %ld", ps_sync_name(*sync),
					i, ps_store_memory(s), ps_test_alloc_usable() - base);
	}
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_log_info("%s: %zu ranges, %zu bytes, malloc holds %ld", ps_sync_name(*sync),
			ps_store_count(s), ps_store_memory(s), ps_test_alloc_usable() - base);
	cr_assert_geq(ps_store_memory(s), (size_t)(ps_test_alloc_usable() - base),
			"%s: %zu bytes, malloc holds %ld", ps_sync_name(*sync), ps_store_memory(s),
			ps_test_alloc_usable() - base);
	ps_store_destroy(s);
	ps_rcu_barrier();
	ps_test_alloc_restore();
	ps_policy_put(p);
	ps_policy_put(q);
}
