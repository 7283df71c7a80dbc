/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the RCU stores' suite share (test_rcu_store.c): the
 * includes, the allowances of a bound on memory, the test macros and
 * helpers.
 */
#ifndef POLSTORE_TESTS_RCU_STORE_TEST_H
#define POLSTORE_TESTS_RCU_STORE_TEST_H

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

/* Unused in a file of every-variant tests only. */
static enum ps_sync rcu_syncs[] __attribute__((unused)) = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

#define RCU_TEST(name, ...) SYNCS_TEST(rcu_syncs, rcu_store, name, ##__VA_ARGS__)
#define ALL_TEST(name, ...) VARIANT_TEST(rcu_store, name, ##__VA_ARGS__)

/* The exact memory of @s at rest: @empty (the store's when empty), its ranges and its index. */
static inline size_t at_rest(struct ps_store *s, size_t empty)
{
	return empty + ps_store_count(s) * ps_test_block_bytes(sizeof(struct ps_range)) +
	       ps_test_index_bytes(s);
}

double now_s(void);
void churn(struct ps_store *s, struct ps_policy *p, int n);

/*
 * A reader that borrows @page's policy, posts @inside, stays inside its
 * section 300 ms, checks the policy alive (abort() if not) and sets @left
 * before it leaves (slow_reader_fn(), test_rcu_store.c).
 */
struct slow_reader {
	struct ps_store *s;
	uint64_t page;
	sem_t inside;
	int left; /* atomic */
};

void *slow_reader_fn(void *arg);

#endif /* POLSTORE_TESTS_RCU_STORE_TEST_H */
