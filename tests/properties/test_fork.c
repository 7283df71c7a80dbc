// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What a child may do with a store after fork(): exactly the promises of
 * docs/fork.md, for every variant, with and without threads of its own
 * beside the parent's registered readers, and beside an application that
 * uses liburcu's call_rcu (and its fork hooks) itself.  A child that
 * hangs is killed by alarm() and counts as a failure; a fork() that hangs
 * in the parent is caught by Criterion's .timeout.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <urcu/urcu-memb.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "testutil.h"

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
	/* Windows and walks by position: [10, 20) a is the one range. */
	{
		const struct ps_policy *bp = NULL;
		uint64_t st = 0, en = 0;

		if (ps_store_foreach_range(s, 0, 100, ps_test_count_ranges, &n) || n != 1)
			return 7;
		n = 0;
		if (ps_store_next(s, 0, &st, &en, &got) || st != 10 || en != 20 || got != a)
			return 8;
		ps_policy_put(got);
		ps_store_read_lock(s);
		if (ps_store_next_borrow(s, 20, &st, &en, &bp) != -ENOENT)
			return 9;
		ps_store_read_unlock(s);
	}
	if (!write)
		return 0;
	b = ps_test_bind(2);
	/* A split (frees nothing) and a removal (frees after a grace period for RCU variants). */
	if (ps_store_set(s, 12, 14, b) || ps_store_set(s, 10, 20, NULL) ||
			ps_store_set(s, 30, 40, b))
		return 3;
	if (ps_store_foreach(s, ps_test_count_ranges, &n) || n != 1)
		return 4;
	if (ps_store_check(s, NULL))
		return 5;
	{
		/* A batch: set two ranges, remove one, in one update. */
		struct ps_set_op ops[] = { { 50, 60, b }, { 70, 80, b }, { 50, 60, NULL } };

		n = 0;
		if (ps_store_set_many(s, ops, 3) ||
				ps_store_foreach(s, ps_test_count_ranges, &n) || n != 2)
			return 10;
	}
	/* Wait for a grace period (RCU variants): the removed range's reference is dropped. */
	if (ps_store_synchronize(s) || ps_policy_refcount(a) != 1)
		return 6;
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
	cr_assert_eq(ps_store_foreach(s, ps_test_count_ranges, &n), 0);
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

/*
 * A fork while the reclaim thread lets retired memory gather (records
 * queued, their grace period not started): the child inherits the queue
 * and its synchronize releases it; the parent's thread goes on and
 * releases its copy with no synchronize call.
 */
static int child_releases_queue(struct ps_store *s, struct ps_policy *a, struct ps_policy *b)
{
	alarm(20);
	if (ps_store_synchronize(s) || ps_policy_refcount(a) != 1)
		return 2;
	if (ps_store_set(s, 10, 20, a) || ps_store_set(s, 10, 20, b) || ps_store_synchronize(s) ||
			ps_policy_refcount(a) != 1)
		return 3;
	ps_store_destroy(s);
	return 0;
}

VARIANT_TEST(fork, fork_while_retired_memory_gathers)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);
	uint64_t t0;
	pid_t pid;

	cr_assert_eq(ps_store_set(s, 0, 100, b), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	cr_assert_eq(ps_store_set(s, 10, 20, b), 0); /* retires the range that held @a */
	/* SEQLOCK keeps a part batch until synchronize; SPIN and RWLOCK freed it at once. */
	if (*sync == PS_SYNC_SEQLOCK)
		cr_assert_eq(ps_store_synchronize(s), 0);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(child_releases_queue(s, a, b));
	expect_child(pid);
	for (t0 = ps_test_now_ns(); ps_policy_refcount(a) != 1; usleep(1000))
		cr_assert_lt(ps_test_now_ns() - t0, 10000000000ULL, "the parent's queue stalled");
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
}

struct idle {
	struct ps_store *s;
	bool qsbr_online;
	sem_t ready;   /* posted by the reader: idle outside every section */
	sem_t release; /* posted by the test after the fork */
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
	sem_post(&id->ready);
	while (sem_wait(&id->release))
		;
	if (id->qsbr_online)
		ps_qsbr_thread_offline();
	return NULL;
}

static pid_t fork_beside_idle_reader(struct idle *id, struct ps_policy *a, bool child_writes)
{
	pthread_t t;
	pid_t pid;

	sem_init(&id->ready, 0, 0);
	sem_init(&id->release, 0, 0);
	cr_assert_eq(pthread_create(&t, NULL, idle_reader, id), 0);
	while (sem_wait(&id->ready))
		;
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(child_uses_store(id->s, a, child_writes));
	sem_post(&id->release);
	pthread_join(t, NULL);
	sem_destroy(&id->ready);
	sem_destroy(&id->release);
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
 * RCU_QSBR with another thread online at fork time: in the child that
 * thread no longer exists, and polstore took it out of liburcu's registry,
 * so the child's grace periods do not wait for it (before, they waited
 * forever and the child could only read).
 */
Test(fork, qsbr_online_thread_child_reads_and_writes, .timeout = 60)
{
	struct ps_policy *a = ps_test_bind(1);
	struct idle id = { .s = ps_store_create(PS_SYNC_RCU_QSBR), .qsbr_online = true };

	cr_assert_eq(ps_store_set(id.s, 10, 20, a), 0);
	expect_child(fork_beside_idle_reader(&id, a, true));
	expect_parent_unchanged(id.s, a);
	ps_store_destroy(id.s);
	ps_policy_put(a);
}

VARIANT_TEST(fork, deferred_frees_work_in_the_child)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1);
	pid_t pid;

	cr_assert_eq(ps_test_churn(s, a, 300), 0, "parent churn");
	cr_assert_eq(ps_policy_refcount(a), 1);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		alarm(20);
		/* The child's reclaim thread (started on its first use there) frees its batches. */
		if (ps_test_churn(s, a, 300))
			_exit(1);
		if (ps_policy_refcount(a) != 1)
			_exit(2);
		ps_store_destroy(s);
		_exit(0);
	}
	expect_child(pid);
	cr_assert_eq(ps_test_churn(s, a, 100), 0, "parent churn after the fork");
	cr_assert_eq(ps_policy_refcount(a), 1);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * A fork just after the first QSBR grace period of a process, which
 * starts the stall watchdog: the watchdog may still be in its start-up
 * (the allocator, under a sanitizer), whose locks the child would inherit
 * held; the child's first new thread then waits for them for ever.  Each
 * round is a fresh process (no watchdog yet) that forks at once after
 * its first grace period; its child starts a thread.
 */
static void *nothing(void *arg)
{
	return arg;
}

static int fork_after_first_grace_period(void)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *a = ps_test_bind(1);
	int status;
	pid_t pid;

	if (!s || !a || ps_store_set(s, 10, 20, a) || ps_store_set(s, 10, 20, NULL) ||
			ps_store_synchronize(s))
		return 1;
	pid = fork();
	if (pid == -1)
		return 2;
	if (pid == 0) {
		pthread_t t;

		alarm(10);
		if (pthread_create(&t, NULL, nothing, NULL) || pthread_join(t, NULL))
			_exit(1);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 3;
	ps_store_destroy(s);
	ps_policy_put(a);
	return 0;
}

Test(fork, fork_as_the_stall_watchdog_starts, .timeout = 120)
{
	int round;

	for (round = 0; round < 100; round++) {
		pid_t pid = fork();

		cr_assert_neq(pid, -1);
		if (pid == 0) {
			alarm(30);
			_exit(fork_after_first_grace_period());
		}
		expect_child(pid);
	}
}

/* ---- Threads in the child beside the parent's registered readers ---------------- */

/*
 * In the child only the forking thread survives, but the registry of
 * every liburcu flavour still lists the parent's other registered
 * threads, whose TLS (where their registry entry lives) glibc hands to the
 * child's next new threads.  These tests start threads in the child, which
 * read (and so register) and set, then wait for grace periods: before
 * polstore pruned its registrations in the child, the child crashed in
 * synchronize_rcu() or hung.
 */
#define PARENT_READERS 6
#define CHILD_THREADS 4
#define CHILD_SETS 200

static enum ps_sync rcu_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR, PS_SYNC_SEQLOCK };

enum reader_state {
	READERS_IDLE,       /* blocked outside every section (QSBR: offline) */
	READERS_EXITED,     /* exited (and were joined) before the fork */
	READERS_IN_SECTION, /* blocked inside ps_store_read_lock() (QSBR: online) */
};

struct readers {
	struct ps_store *s;
	enum ps_sync sync;
	enum reader_state state;
	pthread_mutex_t m;
	pthread_cond_t cv;
	int ready;
	bool release;
	pthread_t t[PARENT_READERS];
};

static void *parent_reader(void *arg)
{
	struct readers *r = arg;
	int i;

	if (r->state == READERS_IN_SECTION && r->sync == PS_SYNC_RCU_QSBR)
		TCHECK(ps_qsbr_thread_online() == 0, "online");
	for (i = 0; i < 100; i++)
		ps_policy_put(ps_store_lookup(r->s, (uint64_t)i % 32));
	if (r->state == READERS_IN_SECTION) {
		ps_store_read_lock(r->s);
		TCHECK(ps_store_lookup_borrow(r->s, 15) != NULL, "the parent's range");
	}
	pthread_mutex_lock(&r->m);
	r->ready++;
	pthread_cond_broadcast(&r->cv);
	while (r->state != READERS_EXITED && !r->release)
		pthread_cond_wait(&r->cv, &r->m);
	pthread_mutex_unlock(&r->m);
	if (r->state == READERS_IN_SECTION) {
		ps_store_read_unlock(r->s);
		if (r->sync == PS_SYNC_RCU_QSBR)
			ps_qsbr_thread_offline();
	}
	return NULL;
}

/* Start the readers; return once they are all in @r->state. */
static void readers_start(struct readers *r)
{
	int i;

	pthread_mutex_init(&r->m, NULL);
	pthread_cond_init(&r->cv, NULL);
	for (i = 0; i < PARENT_READERS; i++)
		cr_assert_eq(pthread_create(&r->t[i], NULL, parent_reader, r), 0);
	pthread_mutex_lock(&r->m);
	while (r->ready < PARENT_READERS)
		pthread_cond_wait(&r->cv, &r->m);
	pthread_mutex_unlock(&r->m);
	if (r->state == READERS_EXITED)
		for (i = 0; i < PARENT_READERS; i++)
			cr_assert_eq(pthread_join(r->t[i], NULL), 0);
}

static void readers_stop(struct readers *r)
{
	int i;

	if (r->state == READERS_EXITED)
		return;
	pthread_mutex_lock(&r->m);
	r->release = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->m);
	for (i = 0; i < PARENT_READERS; i++)
		cr_assert_eq(pthread_join(r->t[i], NULL), 0);
}

struct child_thread {
	struct ps_store *s;
	struct ps_policy *a;
	uint64_t base;
	int err;
};

/* A thread of the child: registers by reading, sets and removes its own ranges. */
static void *child_worker(void *arg)
{
	struct child_thread *c = arg;
	int i;

	for (i = 0; i < CHILD_SETS; i++) {
		uint64_t lo = c->base + 2 * (uint64_t)i;
		struct ps_policy *got;

		if (ps_store_set(c->s, lo, lo + 1, c->a)) {
			c->err = 10;
			break;
		}
		got = ps_store_lookup(c->s, lo);
		if (got != c->a) {
			c->err = 11;
			break;
		}
		ps_policy_put(got);
		if (i % 2 && ps_store_set(c->s, lo, lo + 1, NULL)) {
			c->err = 12;
			break;
		}
	}
	return NULL;
}

/* The child: threads that read and set, grace periods, a check.  Exit status 0 = ok. */
static int child_with_threads(struct ps_store *s, struct ps_policy *a)
{
	struct child_thread c[CHILD_THREADS];
	pthread_t t[CHILD_THREADS];
	long refs = ps_policy_refcount(a); /* ours, and one per range of @a in any store */
	struct ps_policy *got;
	int i;

	alarm(20); /* a hang is a failure, not a stuck test */
	for (i = 0; i < CHILD_THREADS; i++) {
		c[i] = (struct child_thread){ .s = s, .a = a, .base = 10000 + 1000 * (uint64_t)i };
		if (pthread_create(&t[i], NULL, child_worker, &c[i]))
			return 1;
	}
	for (i = 0; i < CHILD_THREADS; i++) {
		if (pthread_join(t[i], NULL))
			return 2;
		if (c[i].err)
			return c[i].err;
	}
	if (ps_store_synchronize(s))
		return 3;
	got = ps_store_lookup(s, 15);
	if (got != a)
		return 4;
	ps_policy_put(got);
	if (ps_store_set(s, 10, 20, NULL) || ps_store_synchronize(s))
		return 5;
	if (ps_store_check(s, NULL))
		return 6;
	/* Every removed range dropped its reference: @s holds one per range left. */
	if (ps_policy_refcount(a) != refs - 1 + (long)CHILD_THREADS * CHILD_SETS / 2)
		return 7;
	ps_store_destroy(s);
	return ps_policy_refcount(a) == refs - 1 ? 0 : 8;
}

static void fork_child_with_threads(enum ps_sync sync, enum reader_state state)
{
	struct ps_policy *a = ps_test_bind(1);
	struct readers r = { .s = ps_store_create(sync), .sync = sync, .state = state };
	pid_t pid;

	cr_assert_not_null(r.s);
	cr_assert_eq(ps_store_set(r.s, 10, 20, a), 0);
	/* Removed ranges in flight (SEQLOCK and RCU batches), then none. */
	cr_assert_eq(ps_test_churn(r.s, a, 300), 0);
	readers_start(&r);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(child_with_threads(r.s, a));
	readers_stop(&r);
	expect_child(pid);
	expect_parent_unchanged(r.s, a);
	ps_store_destroy(r.s);
	ps_policy_put(a);
}

/* docs/fork.md rule 2: the parent's registered readers idle at the fork. */
SYNCS_TEST(rcu_syncs, fork, child_threads_beside_idle_readers, .timeout = 60)
{
	fork_child_with_threads(*sync, READERS_IDLE);
}

/* Readers that registered and exited before the fork: their stacks are reused in the child. */
SYNCS_TEST(rcu_syncs, fork, child_threads_after_readers_exited, .timeout = 60)
{
	fork_child_with_threads(*sync, READERS_EXITED);
}

/*
 * Readers frozen inside read-side sections (RCU_QSBR: online) at the fork:
 * in the child they never run again, so its grace periods need not wait
 * for them.
 */
SYNCS_TEST(rcu_syncs, fork, child_threads_beside_readers_in_sections, .timeout = 60)
{
	fork_child_with_threads(*sync, READERS_IN_SECTION);
}

/*
 * An application that uses liburcu itself: it registered the forking
 * thread and calls call_rcu(), so it installs liburcu's call_rcu fork
 * hooks, as liburcu requires.  polstore has fork handlers of its own (its
 * reclaim threads, its registrations); together they must not deadlock
 * fork(), and both call_rcu and the stores (with threads) must work in
 * the child.
 */
static int app_callbacks;

static void app_callback(struct rcu_head *head)
{
	(void)head;
	PSI_ADD_FETCH(app_callbacks, 1, RELAXED);
}

static int app_call_rcu_round(int expect)
{
	struct rcu_head head;

	urcu_memb_call_rcu(&head, app_callback);
	urcu_memb_barrier();
	return PSI_READ_ONCE(app_callbacks) == expect ? 0 : 20;
}

Test(fork, app_call_rcu_fork_hooks, .timeout = 60)
{
	struct ps_policy *a = ps_test_bind(1);
	struct readers r = { .s = ps_store_create(PS_SYNC_RCU), .sync = PS_SYNC_RCU };
	struct ps_store *seq = ps_store_create(PS_SYNC_SEQLOCK);
	pid_t pid;

	cr_assert_eq(pthread_atfork(urcu_memb_call_rcu_before_fork,
			urcu_memb_call_rcu_after_fork_parent, urcu_memb_call_rcu_after_fork_child), 0);
	urcu_memb_register_thread();
	cr_assert_eq(app_call_rcu_round(1), 0);
	cr_assert_eq(ps_store_set(r.s, 10, 20, a), 0);
	cr_assert_eq(ps_store_set(seq, 10, 20, a), 0);
	cr_assert_eq(ps_test_churn(seq, a, 300), 0);
	readers_start(&r);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		int ret;

		alarm(20);
		ret = app_call_rcu_round(2);
		if (!ret)
			ret = child_with_threads(r.s, a);
		if (!ret)
			ret = child_with_threads(seq, a);
		if (!ret)
			ret = app_call_rcu_round(3);
		urcu_memb_unregister_thread();
		_exit(ret);
	}
	readers_stop(&r);
	expect_child(pid);
	cr_assert_eq(app_call_rcu_round(2), 0);
	expect_parent_unchanged(r.s, a);
	ps_store_destroy(r.s);
	ps_store_destroy(seq);
	urcu_memb_unregister_thread();
	ps_policy_put(a);
}

/*
 * What docs/fork.md forbids because it deadlocks: fork() from inside a
 * read-side section while a reclaim thread waits for a grace period.  The
 * prepare handler waits for that grace period to end (so that the child
 * does not inherit liburcu's grace-period lock held), and the grace period
 * waits for the forking thread's section.  Run in a process of its own,
 * which must still be stuck in fork() when its alarm fires.
 */
static void *retire_a_batch(void *arg)
{
	struct ps_store *s = arg;
	struct ps_policy *b = ps_test_bind(2);
	int i;

	/* SEQLOCK sets never wait: full batches go to the reclaim thread. */
	for (i = 0; i < 1000; i++)
		TCHECK(!ps_store_set(s, 5000 + (uint64_t)i, 5001 + (uint64_t)i, b) &&
				!ps_store_set(s, 5000 + (uint64_t)i, 5001 + (uint64_t)i, NULL),
				"set");
	ps_policy_put(b);
	return NULL;
}

static int fork_in_section(void)
{
	struct ps_store *s = ps_store_create(PS_SYNC_SEQLOCK);
	struct timespec settle = { 0, 100 * 1000 * 1000 };
	pthread_t t;
	pid_t pid;

	ps_store_read_lock(s);
	if (pthread_create(&t, NULL, retire_a_batch, s) || pthread_join(t, NULL))
		return 1;
	nanosleep(&settle, NULL); /* the reclaim thread is in its grace period by now */
	pid = fork();
	if (pid == 0)
		_exit(0);
	return 2; /* fork() returned: no deadlock */
}

Test(fork, fork_in_section_deadlocks, .timeout = 60)
{
	pid_t pid = fork();
	int status;

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		alarm(2);
		_exit(fork_in_section());
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM,
			"expected fork() to hang (status %#x)", status);
}

/* ---- RCU id maps ------------------------------------------------------------ */

static int map_freed; /* this process's count */

static void map_count_free(void *p)
{
	PSI_ADD_FETCH(map_freed, 1, RELAXED);
	free(p);
}

/* Queue @n objects, in full batches and a partial one, on @map. */
static void map_queue(struct ps_idmap *map, int n)
{
	int i, id;
	void *old;

	for (i = 0; i < n; i++) {
		cr_assert_eq(ps_idmap_alloc(map, malloc(16), 0, PS_IDMAP_ID_MAX, &id), 0);
		cr_assert_eq(ps_idmap_remove(map, id, &old), 0);
		cr_assert_eq(ps_idmap_free_rcu(map, old, map_count_free), 0);
	}
}

/* Child: run the frees inherited from the parent, use the map, destroy it. */
static int child_uses_map(struct ps_idmap *map, int inherited, int freed_before)
{
	void *old;
	int id;

	alarm(20);
	ps_idmap_barrier(map);
	if (map_freed != freed_before + inherited)
		return 1;
	if (ps_idmap_alloc(map, malloc(16), 0, PS_IDMAP_ID_MAX, &id))
		return 2;
	ps_idmap_read_lock(map);
	if (!ps_idmap_find(map, id))
		return 3;
	ps_idmap_read_unlock(map);
	if (ps_idmap_remove(map, id, &old) || ps_idmap_free_rcu(map, old, map_count_free))
		return 5;
	map_queue(map, PS_IDMAP_FREE_BATCH); /* the child's own batches, as it removes */
	ps_idmap_destroy(map);
	return map_freed == freed_before + inherited + PS_IDMAP_FREE_BATCH + 1 ? 0 : 4;
}

/*
 * Batches handed to the reclaim thread (and waiting for their grace period)
 * and a partial one are inherited by the child: its barrier runs each
 * exactly once there, and the parent's run them once more in the parent.
 */
Test(fork, idmap_deferred_frees_work_in_the_child, .timeout = 60)
{
	struct ps_idmap *map = ps_idmap_create(PS_IDMAP_RCU);
	int n = 3 * PS_IDMAP_FREE_BATCH + 7, before;
	pid_t pid;

	cr_assert_not_null(map);
	map_freed = 0;
	map_queue(map, n);
	before = map_freed; /* full batches whose grace period passed may have run */
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(child_uses_map(map, n - before, before));
	expect_child(pid);
	ps_idmap_barrier(map);
	cr_assert_eq(map_freed, n);
	ps_idmap_destroy(map);
}

/*
 * Another thread is inside a free function of the map (its call holds the
 * map's drain lock) at the fork: the child's own ps_idmap_free_rcu() calls
 * must not wait for that frozen thread.
 */
static int slow_in_free, slow_release;
static struct ps_idmap *slow_map; /* the child's leak check finds the frozen batch from here */

static void slow_map_free(void *p)
{
	PSI_STORE_RELEASE(slow_in_free, 1);
	while (!PSI_LOAD_ACQUIRE(slow_release))
		usleep(1000);
	free(p);
}

static void *run_slow_batch(void *arg)
{
	ps_test_idmap_queue(arg, PS_IDMAP_FREE_BATCH, slow_map_free);
	ps_idmap_barrier(arg); /* runs the batch: stays in slow_map_free until released */
	return NULL;
}

Test(fork, idmap_free_running_at_fork, .timeout = 60)
{
	struct ps_idmap *map = slow_map = ps_idmap_create(PS_IDMAP_RCU);
	pthread_t t;
	pid_t pid;

	cr_assert_not_null(map);
	cr_assert_eq(pthread_create(&t, NULL, run_slow_batch, map), 0);
	while (!PSI_LOAD_ACQUIRE(slow_in_free))
		usleep(100);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		int i, id;
		void *old;

		alarm(20);
		/* Two full batches: handed over, never waiting for the frozen thread. */
		for (i = 0; i < 2 * PS_IDMAP_FREE_BATCH + 1; i++) {
			if (ps_idmap_alloc(map, malloc(16), 0, PS_IDMAP_ID_MAX, &id) ||
					ps_idmap_remove(map, id, &old) ||
					ps_idmap_free_rcu(map, old, free))
				_exit(1);
		}
		ps_idmap_synchronize(map);
		_exit(0);
	}
	PSI_STORE_RELEASE(slow_release, 1);
	expect_child(pid);
	pthread_join(t, NULL);
	ps_idmap_destroy(map);
}

/*
 * Charge counters share one topology lock (creation, destruction, stock
 * drains).  A child forked while another thread holds it must still
 * create and destroy counters of its own: the lock is taken across
 * fork() and released in the child.
 */
static int charge_churn_stop;

static void *charge_churn(void *arg)
{
	struct ps_charge *root = arg;

	while (!PSI_READ_ONCE(charge_churn_stop)) {
		struct ps_charge *c = ps_charge_create(PS_CHARGE_STOCK, root, 0);

		if (c)
			ps_charge_destroy(c);
	}
	return NULL;
}

Test(fork, charge_topology_lock_across_fork, .timeout = 60)
{
	struct ps_charge *root = ps_charge_create(PS_CHARGE_SPIN, NULL, 0);
	pthread_t t[2];
	int i;

	cr_assert_not_null(root);
	ps_test_spawn(t, 2, charge_churn, root, 0);
	for (i = 0; i < 20; i++) {
		pid_t pid = fork();

		cr_assert_neq(pid, -1);
		if (pid == 0) {
			struct ps_charge *c, *leaf;

			alarm(5); /* a lock left held in the child is a hang */
			c = ps_charge_create(PS_CHARGE_ATOMIC, NULL, 100);
			leaf = c ? ps_charge_create(PS_CHARGE_STOCK, c, 10) : NULL;
			if (!leaf || ps_charge_try(leaf, 1, NULL) || ps_charge_drain_stock(c))
				_exit(1);
			ps_charge_uncharge(leaf, 1);
			if (ps_charge_destroy(leaf) || ps_charge_destroy(c))
				_exit(2);
			_exit(0);
		}
		expect_child(pid);
	}
	PSI_WRITE_ONCE(charge_churn_stop, 1);
	ps_test_join(t, 2);
	cr_assert_eq(ps_charge_destroy(root), 0);
}

/*
 * The objects attached to stores (ps_store_attach()) are one list under
 * one lock.  A child forked while other threads attach and detach must
 * attach and destroy stores of its own, and destroy its copy of a store
 * the parent's objects are attached to: the lock is taken across fork()
 * and the parent's attachments do not count in the child.
 */
static int attach_churn_stop;
static char attach_users[3];

static void *attach_churn(void *arg)
{
	struct ps_store *s = ((void **)arg)[0];
	const void *user = ((void **)arg)[1];

	while (!PSI_READ_ONCE(attach_churn_stop))
		if (!ps_store_attach(s, user, "churning object", "its detach"))
			ps_store_detach(s, user);
	return NULL;
}

Test(fork, attach_list_across_fork, .timeout = 60)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU);
	void *args[2][2] = {{s, &attach_users[0]}, {s, &attach_users[1]}};
	pthread_t t[2];
	int i;

	cr_assert_not_null(s);
	cr_assert_eq(pthread_create(&t[0], NULL, attach_churn, args[0]), 0);
	cr_assert_eq(pthread_create(&t[1], NULL, attach_churn, args[1]), 0);
	for (i = 0; i < 20; i++) {
		pid_t pid = fork();

		cr_assert_neq(pid, -1);
		if (pid == 0) {
			struct ps_store *own = ps_store_create(PS_SYNC_SPIN);

			alarm(5); /* a lock left held in the child is a hang */
			if (!own || ps_store_attach(own, &attach_users[2], "object", "its end"))
				_exit(1);
			if (ps_store_destroy_deferred(own) != -EBUSY ||
					ps_store_detach(own, &attach_users[2]))
				_exit(2);
			ps_store_destroy(own);
			ps_store_destroy(s); /* the parent's objects may be attached: not the child's */
			_exit(0);
		}
		expect_child(pid);
	}
	PSI_WRITE_ONCE(attach_churn_stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ps_store_destroy(s);
}
