// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What a child may do with a store after fork(): exactly the promises of
 * docs/fork.md, for every variant.  A child that hangs is killed by
 * alarm() and counts as a failure.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

static int count_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	(void)start;
	(void)end;
	(void)pol;
	(*(int *)arg)++;
	return 0;
}

/* The child's work: read what the parent set, write, walk, check, destroy. Exit status 0 = ok. */
static int child_uses_store(struct ps_store *s, struct ps_policy *a, bool write)
{
	struct ps_policy *got, *b;
	int n = 0;

	alarm(20); /* a hang is a failure, not a stuck test */
	got = ps_store_lookup(s, 15);
	if (got != a)
		return 1;
	ps_policy_put(got);
	ps_store_read_lock(s);
	got = (struct ps_policy *)ps_store_lookup_borrow(s, 5);
	ps_store_read_unlock(s);
	if (got)
		return 2;
	if (!write)
		return 0;
	b = ps_test_bind(2);
	/* A split (frees nothing) and a removal (frees after a grace period for RCU variants). */
	if (ps_store_set(s, 12, 14, b) || ps_store_set(s, 10, 20, NULL) ||
			ps_store_set(s, 30, 40, b))
		return 3;
	if (ps_store_foreach(s, count_fn, &n) || n != 1)
		return 4;
	if (ps_store_check(s, NULL))
		return 5;
	ps_store_destroy(s);
	ps_policy_put(b);
	ps_policy_put(a);
	return 0;
}

static void expect_child(pid_t pid)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child killed by signal %d (hang or crash)",
			WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0, "child failed at step %d", WEXITSTATUS(status));
}

static void expect_parent_unchanged(struct ps_store *s, struct ps_policy *a)
{
	struct ps_policy *got = ps_store_lookup(s, 15);
	int n = 0;

	cr_assert_eq(got, a, "the child's sets leaked into the parent");
	ps_policy_put(got);
	cr_assert_eq(ps_store_foreach(s, count_fn, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(ps_store_check(s, NULL), 0);
	/* The parent still writes (its grace periods are unaffected by the child). */
	cr_assert_eq(ps_store_set(s, 100, 110, a), 0);
}

/* Promise 1: a process with no other thread inside polstore at fork time. */
VARIANT_TEST(fork, single_thread_child_reads_and_writes)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);
	pid_t pid;

	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	/* The parent has read (and, for RCU variants, registered with liburcu) before forking. */
	ps_policy_put(ps_store_lookup(s, 15));
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(child_uses_store(s, a, true));
	expect_child(pid);
	expect_parent_unchanged(s, a);
	ps_store_destroy(s);
	ps_policy_put(a);
}

struct idle {
	struct ps_store *s;
	bool qsbr_online;
	pthread_mutex_t m;
	pthread_cond_t cv;
	int state; /* 0 start, 1 ready (idle outside every section), 2 release */
};

static void *idle_reader(void *arg)
{
	struct idle *id = arg;
	int i;

	if (id->qsbr_online)
		ps_qsbr_thread_online();
	for (i = 0; i < 100; i++)
		ps_policy_put(ps_store_lookup(id->s, (uint64_t)i % 32));
	if (id->qsbr_online)
		ps_qsbr_quiescent();
	pthread_mutex_lock(&id->m);
	id->state = 1;
	pthread_cond_broadcast(&id->cv);
	while (id->state != 2)
		pthread_cond_wait(&id->cv, &id->m);
	pthread_mutex_unlock(&id->m);
	if (id->qsbr_online)
		ps_qsbr_thread_offline();
	return NULL;
}

static pid_t fork_beside_idle_reader(struct idle *id, struct ps_policy *a, bool child_writes)
{
	pthread_t t;
	pid_t pid;

	pthread_mutex_init(&id->m, NULL);
	pthread_cond_init(&id->cv, NULL);
	cr_assert_eq(pthread_create(&t, NULL, idle_reader, id), 0);
	pthread_mutex_lock(&id->m);
	while (id->state != 1)
		pthread_cond_wait(&id->cv, &id->m);
	pthread_mutex_unlock(&id->m);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(child_uses_store(id->s, a, child_writes));
	pthread_mutex_lock(&id->m);
	id->state = 2;
	pthread_cond_broadcast(&id->cv);
	pthread_mutex_unlock(&id->m);
	pthread_join(t, NULL);
	return pid;
}

/*
 * Promise 2: other threads that used the store but are idle (outside every
 * read-side section and set; for RCU_QSBR: offline, which threads that
 * never called ps_qsbr_thread_online() always are between lookups).
 */
VARIANT_TEST(fork, idle_registered_threads_child_reads_and_writes)
{
	struct ps_policy *a = ps_test_bind(1);
	struct idle id = { .s = ps_store_create(*sync) };

	cr_assert_eq(ps_store_set(id.s, 10, 20, a), 0);
	expect_child(fork_beside_idle_reader(&id, a, true));
	expect_parent_unchanged(id.s, a);
	ps_store_destroy(id.s);
	ps_policy_put(a);
}

/*
 * Promise 3: RCU_QSBR with another thread online at fork time: the child
 * may read (lookups never wait for a grace period) but must not write, as
 * the copy of that thread in the registry never reports a quiescent state.
 */
Test(fork, qsbr_online_thread_child_reads)
{
	struct ps_policy *a = ps_test_bind(1);
	struct idle id = { .s = ps_store_create(PS_SYNC_RCU_QSBR), .qsbr_online = true };

	cr_assert_eq(ps_store_set(id.s, 10, 20, a), 0);
	expect_child(fork_beside_idle_reader(&id, a, false));
	expect_parent_unchanged(id.s, a);
	ps_store_destroy(id.s);
	ps_policy_put(a);
}

/* Removed ranges through call_rcu (SEQLOCK batches) in the parent and in the child. */
static int churn(struct ps_store *s, struct ps_policy *a, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (ps_store_set(s, 1000 + (uint64_t)i, 1001 + (uint64_t)i, a) ||
				ps_store_set(s, 1000 + (uint64_t)i, 1001 + (uint64_t)i, NULL))
			return -1;
	return ps_store_synchronize(s);
}

VARIANT_TEST(fork, deferred_frees_work_in_the_child)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);
	pid_t pid;

	cr_assert_eq(churn(s, a, 300), 0, "parent churn");
	cr_assert_eq(ps_policy_refcount(a), 1);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		alarm(20);
		/* The child's call_rcu worker (restarted by the atfork hook) frees its batches. */
		if (churn(s, a, 300))
			_exit(1);
		if (ps_policy_refcount(a) != 1)
			_exit(2);
		ps_store_destroy(s);
		_exit(0);
	}
	expect_child(pid);
	cr_assert_eq(churn(s, a, 100), 0, "parent churn after the fork");
	cr_assert_eq(ps_policy_refcount(a), 1);
	ps_store_destroy(s);
	ps_policy_put(a);
}
