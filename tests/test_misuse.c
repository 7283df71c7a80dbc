// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Calling contexts: every call a Context: line allows, made from there
 * (an allocator hook inside a set, a foreach callback that reads other
 * stores, nested read-side sections), and the misuses it forbids, each
 * of which must return an error or fail loudly, never hang.  A call that
 * would hang runs on a thread of its own and is given a few seconds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

#define HANG_NS 3000000000ULL /* a call that takes longer is taken for a hang */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Run @fn(@arg) on a thread; true when it returned within HANG_NS (the thread is left if not). */
struct bounded {
	void *(*fn)(void *);
	void *arg;
	atomic_int done;
};

static void *bounded_run(void *arg)
{
	struct bounded *b = arg;

	b->fn(b->arg);
	atomic_store(&b->done, 1);
	return NULL;
}

static bool returns_in_time(void *(*fn)(void *), void *arg)
{
	struct bounded *b = calloc(1, sizeof(*b)); /* leaked with its thread on a hang */
	uint64_t t0 = ps_test_now_ns();
	pthread_t t;

	cr_assert_not_null(b);
	b->fn = fn;
	b->arg = arg;
	cr_assert_eq(pthread_create(&t, NULL, bounded_run, b), 0);
	while (!atomic_load(&b->done) && ps_test_now_ns() - t0 < HANG_NS)
		sleep_ms(1);
	if (!atomic_load(&b->done)) {
		pthread_detach(t);
		return false;
	}
	pthread_join(t, NULL);
	free(b);
	return true;
}

/* ---- ps_store_memory() from an allocator hook, and beside a writer ---- */

static struct ps_store *hook_store;
static atomic_long hook_calls;
static atomic_int hook_block, hook_blocked;

static void *memory_hook_alloc(size_t size, void *ctx)
{
	struct ps_store *s = __atomic_load_n(&hook_store, __ATOMIC_ACQUIRE);

	(void)ctx;
	if (s) {
		/* The accounting a runtime's allocator does: ask the store what it holds. */
		if (!atomic_load(&hook_block))
			atomic_fetch_add(&hook_calls, ps_store_memory(s) > 0);
		else {
			atomic_store(&hook_blocked, 1);
			while (atomic_load(&hook_block))
				sleep_ms(1);
		}
	}
	return malloc(size);
}

static void memory_hook_free(void *p, void *ctx)
{
	(void)ctx;
	free(p);
}

static struct ps_policy *set_pol;

static void *set_some(void *arg)
{
	struct ps_store *s = arg;
	int i;

	for (i = 0; i < 600; i++)
		TCHECK(ps_store_set(s, (uint64_t)i * 4, (uint64_t)i * 4 + 2 + (i & 1), set_pol) == 0,
				"set");
	return NULL;
}

/* ps_store_memory() takes no lock: an allocator hook may call it inside a set of the store. */
VARIANT_TEST(misuse, memory_from_allocator_hook, .timeout = 30)
{
	static const struct ps_alloc_ops ops = { memory_hook_alloc, memory_hook_free, NULL };
	struct ps_store *s;

	cr_assert_eq(ps_set_alloc_ops(&ops), 0);
	set_pol = ps_test_bind(1);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	__atomic_store_n(&hook_store, s, __ATOMIC_RELEASE);
	cr_assert(returns_in_time(set_some, s),
			"%s: ps_store_set() hangs when the allocator calls ps_store_memory()",
			ps_sync_name(*sync));
	cr_assert_gt(atomic_load(&hook_calls), 0);
	__atomic_store_n(&hook_store, NULL, __ATOMIC_RELEASE);
	ps_store_destroy(s);
	ps_policy_put(set_pol);
	ps_set_alloc_ops(NULL);
}

static void *memory_of(void *arg)
{
	TCHECK(ps_store_memory(arg) > 0, "memory");
	return NULL;
}

/* Nor does it wait for a set in progress on another thread. */
VARIANT_TEST(misuse, memory_beside_a_set_in_progress, .timeout = 30)
{
	static const struct ps_alloc_ops ops = { memory_hook_alloc, memory_hook_free, NULL };
	struct ps_store *s;
	pthread_t w;

	cr_assert_eq(ps_set_alloc_ops(&ops), 0);
	set_pol = ps_test_bind(1);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	atomic_store(&hook_block, 1);
	__atomic_store_n(&hook_store, s, __ATOMIC_RELEASE);
	cr_assert_eq(pthread_create(&w, NULL, set_some, s), 0);
	while (!atomic_load(&hook_blocked))
		sleep_ms(1); /* RCU variants allocate under the writer lock; the others before it */
	/* The writer is inside ps_store_set(), in the allocator, holding what it holds. */
	__atomic_store_n(&hook_store, NULL, __ATOMIC_RELEASE);
	cr_expect(returns_in_time(memory_of, s),
			"%s: ps_store_memory() waits for a set in progress", ps_sync_name(*sync));
	atomic_store(&hook_block, 0);
	pthread_join(w, NULL);
	ps_store_destroy(s);
	ps_policy_put(set_pol);
	ps_set_alloc_ops(NULL);
}
