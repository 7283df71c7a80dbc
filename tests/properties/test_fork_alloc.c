// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * fork() while another thread is inside the allocator.  An allocator
 * without fork handlers (AddressSanitizer's in GCC 12, some production
 * ones) leaves its locks held in the child for good: a thread the child
 * starts may then wait in its start-up for ever, before it runs any of
 * polstore's code.  The child's reclaim thread is such a thread: nothing
 * the child waits for (a synchronize, a barrier, a set that waits) may
 * depend on it until it has shown it runs.  Each round forks beside a
 * thread that allocates without pause; the child churns the store it
 * inherited, frees a store deferred, waits for the deferred frees, forks
 * (every fourth round) and destroys the store, under a watchdog (alarm()).  Only an allocator
 * without fork handlers shows a hang: the ASan configuration runs it (a
 * child whose barrier waits for its new thread there hangs within the
 * first 20 of the 100 rounds in most runs of each variant).
 *
 * POLSTORE_FORK_ROUNDS=<n> sets the rounds per variant (POLSTORE_LONG=1:
 * 300).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "testutil.h"


static enum ps_sync reclaim_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR, PS_SYNC_SEQLOCK };

static int alloc_stop;
static void *alloc_blocks[16]; /* global: a child's leak check finds what the helper held */

/*
 * Allocates and frees without pause: blocks of sizes up to 1 MiB, and
 * mostly of 7800 bytes, which AddressSanitizer takes from its 8 KiB size
 * class (with the redzone), the one its quarantine batches come from: a
 * new thread's start-up frees a block, and so needs a batch, at once.
 */
static void *allocate(void *arg)
{
	uint64_t x = (uintptr_t)arg | 1;

	while (!PSI_READ_ONCE(alloc_stop)) {
		void **p = alloc_blocks;
		int i;

		for (i = 0; i < 16; i++) {
			size_t any = 16 + ps_test_rand(&x) % ((size_t)16 << (ps_test_rand(&x) % 17));

			p[i] = malloc(i & 3 ? 7800 : any);
			if (p[i])
				memset(p[i], i, 16);
		}
		for (i = 0; i < 16; i++)
			free(p[i]);
	}
	return NULL;
}

static int fork_rounds(void)
{
	const char *env = getenv("POLSTORE_FORK_ROUNDS");

	if (env && atoi(env) > 0)
		return atoi(env);
	/* Under valgrind (no helper: below), a round of each kind: seconds each. */
	if (ps_test_on_valgrind())
		return 2;
	return getenv("POLSTORE_LONG") ? 300 : 100;
}

/* The child's steps.  Exit status: 0, or the step that failed. */
static int child_steps(enum ps_sync sync, struct ps_store *s, struct ps_policy *a, int round)
{
	struct ps_store *t;
	int status;
	pid_t pid;

	alarm(10); /* a hang is a failure (SIGALRM) */
	if (ps_test_churn(s, a, 20))
		return 1;
	t = ps_store_create(sync);
	if (!t || ps_store_set(t, 10, 20, a) || ps_store_set(t, 30, 40, a))
		return 2;
	if (ps_store_destroy_deferred(t))
		return 3;
	/* The deferred destroy drops the references t held. */
	if (ps_rcu_barrier() || ps_policy_refcount(a) != 2)
		return 4;
	if (ps_test_churn(s, a, 20) || ps_policy_refcount(a) != 2)
		return 5;
	/*
	 * Every fourth round, the child forks in turn, its reclaim thread
	 * running or not: a fork waits up to a second for a thread that has
	 * not run yet.
	 */
	if (round % 4 != 1) {
		ps_store_destroy(s);
		return 0;
	}
	pid = fork();
	if (pid == -1)
		return 6;
	if (pid == 0)
		_exit(ps_test_churn(s, a, 20) || ps_policy_refcount(a) != 2 ? 1 : 0);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 7;
	ps_store_destroy(s);
	return 0;
}

SYNCS_TEST(reclaim_syncs, fork, child_waits_beside_allocating_thread, .timeout = 300)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);
	int round, rounds = fork_rounds();
	pthread_t helper;

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 1, 2, a), 0);
	cr_assert_eq(ps_test_churn(s, a, 20), 0);
	/*
	 * Not under valgrind: its allocator is its own, safe across fork(),
	 * and a block the helper has just been handed is in no variable yet:
	 * the child's leak check would report it.
	 */
	if (!ps_test_on_valgrind())
		cr_assert_eq(pthread_create(&helper, NULL, allocate, (void *)(uintptr_t)*sync), 0);
	for (round = 0; round < rounds; round++) {
		int status;
		pid_t pid = fork();

		cr_assert_neq(pid, -1);
		if (pid == 0)
			_exit(child_steps(*sync, s, a, round));
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(!WIFSIGNALED(status), "round %d of %d: child killed by signal %d%s", round,
				rounds, WTERMSIG(status),
				WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
		cr_assert_eq(WEXITSTATUS(status), 0, "round %d: child failed at step %d", round,
				WEXITSTATUS(status));
	}
	PSI_WRITE_ONCE(alloc_stop, 1);
	if (!ps_test_on_valgrind())
		cr_assert_eq(pthread_join(helper, NULL), 0);
	cr_assert_eq(ps_policy_refcount(a), 2);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(a), 1);
	ps_policy_put(a);
}
