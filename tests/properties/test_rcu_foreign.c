// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Threads the application registered with liburcu itself: polstore must
 * not register them a second time (liburcu asserts, or corrupts its
 * registry), nor unregister them behind the application's back.
 */
#include <pthread.h>

#include <criterion/criterion.h>
#include <urcu/urcu-memb.h>

#include "testutil.h"

static void *foreign_reader(void *arg)
{
	struct ps_store *s = arg;
	int i;

	urcu_memb_register_thread();
	for (i = 0; i < 1000; i++)
		ps_policy_put(ps_store_lookup(s, (uint64_t)i % 64));
	/* Still ours to unregister: polstore did not take it over. */
	urcu_memb_unregister_thread();
	return NULL;
}

Test(rcu_foreign, memb_registered_threads_are_honoured)
{
	int kinds[] = { PS_SYNC_RCU, PS_SYNC_SEQLOCK };
	size_t k;

	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct ps_store *s = ps_store_create(kinds[k]);
		struct ps_policy *a = ps_test_bind(1);
		pthread_t t;

		cr_assert_eq(ps_store_set(s, 0, 32, a), 0);
		cr_assert_eq(pthread_create(&t, NULL, foreign_reader, s), 0);
		cr_assert_eq(pthread_join(t, NULL), 0);
		cr_assert_eq(ps_store_set(s, 0, 64, NULL), 0, "a writer after the thread left");
		ps_store_destroy(s);
		ps_policy_put(a);
	}
}
