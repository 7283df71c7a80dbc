// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU_QSBR stalls: a thread that stays online without a quiescent state
 * holds up every qsbr grace period.  polstore warns about it (naming the
 * thread and how long), the warning can be routed or turned off, and sets
 * go on without waiting until the bound polstore/store.h states.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "compiler.h"
#include "testutil.h"

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A thread that goes online and stays so, reporting no quiescent state, until released. */
struct stuck {
	pthread_t t;
	int tid, release;
};

static void *stuck_online(void *arg)
{
	struct stuck *st = arg;

	pthread_setname_np(pthread_self(), "stuck-online");
	TCHECK(ps_qsbr_thread_online() == 0, "online");
	PSI_STORE_SEQ_CST(st->tid, gettid());
	while (!PSI_LOAD_SEQ_CST(st->release))
		sleep_ms(1); /* online all along: a stall, against QSBR's rule */
	ps_qsbr_thread_offline();
	return NULL;
}

static void stuck_start(struct stuck *st)
{
	cr_assert_eq(pthread_create(&st->t, NULL, stuck_online, st), 0);
	while (!PSI_LOAD_SEQ_CST(st->tid))
		sleep_ms(1);
}

static void stuck_stop(struct stuck *st)
{
	PSI_STORE_SEQ_CST(st->release, 1);
	pthread_join(st->t, NULL);
}

/* The warnings a handler received. */
#define MAX_SEEN 64
static struct {
	pthread_mutex_t lock;
	int n;
	struct ps_qsbr_stall seen[MAX_SEEN];
} warnings = { PTHREAD_MUTEX_INITIALIZER, 0, { { 0 } } };

static void capture(const struct ps_qsbr_stall *stall, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&warnings.lock);
	if (warnings.n < MAX_SEEN) {
		warnings.seen[warnings.n] = *stall;
		warnings.seen[warnings.n].waiter = strdup(stall->waiter);
	}
	warnings.n++;
	pthread_mutex_unlock(&warnings.lock);
}

static int warnings_seen(void)
{
	int n;

	pthread_mutex_lock(&warnings.lock);
	n = warnings.n;
	pthread_mutex_unlock(&warnings.lock);
	return n;
}

/* Sets until a full batch went to the reclaim thread, which then waits for the stuck thread. */
static void retire_a_batch(struct ps_store *s, struct ps_policy *p)
{
	int i;

	for (i = 0; i < 400; i++) {
		cr_assert_eq(ps_store_set(s, 0, 8, p), 0);
		cr_assert_eq(ps_store_set(s, 0, 8, NULL), 0);
	}
}

Test(stall, online_thread_is_named_rate_limited, .timeout = 30)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *p = ps_test_bind(1);
	struct stuck st = { 0 };
	int i, n, mine = 0;

	cr_assert_eq(ps_qsbr_set_stall_warning(100, capture, NULL), 0);
	stuck_start(&st);
	retire_a_batch(s, p);
	/* 100 ms timeout: the first warning at 0.1 s, the next at 0.4 s, 0.7 s... */
	for (i = 0; i < 1000 && warnings_seen() == 0; i++)
		sleep_ms(5);
	sleep_ms(600);
	n = warnings_seen();
	stuck_stop(&st);
	cr_assert_gt(n, 0, "no stall warning");
	cr_expect_leq(n, 4, "%d warnings in 0.7 s: not rate-limited", n);
	for (i = 0; i < n && i < MAX_SEEN; i++) {
		const struct ps_qsbr_stall *w = &warnings.seen[i];

		cr_log_info("warning %d: thread %d (%s), %.2f s, %s (thread %d)", i, w->tid, w->name,
				w->seconds, w->waiter, w->waiter_tid);
		if (w->tid == PSI_LOAD_SEQ_CST(st.tid)) {
			mine++;
			cr_expect_str_eq(w->name, "stuck-online");
			cr_expect_geq(w->seconds, 0.1);
			cr_expect(strstr(w->waiter, "reclaim thread"), "waiter %s", w->waiter);
		}
	}
	cr_expect_eq(mine, n, "a warning named another thread");
	/* Released: the grace period ends, every retired range goes. */
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_expect_eq(ps_policy_refcount(p), 1);
	ps_store_destroy(s);
	ps_policy_put(p);
}

Test(stall, warnings_turned_off, .timeout = 30)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *p = ps_test_bind(1);
	struct stuck st = { 0 };

	cr_assert_eq(ps_qsbr_set_stall_warning(50, capture, NULL), 0);
	cr_assert_eq(ps_qsbr_set_stall_warning(0, capture, NULL), 0);
	cr_expect_eq(ps_qsbr_set_stall_warning(2000000000UL, NULL, NULL), -EINVAL);
	stuck_start(&st);
	retire_a_batch(s, p);
	sleep_ms(300);
	stuck_stop(&st);
	cr_expect_eq(warnings_seen(), 0);
	cr_assert_eq(ps_store_synchronize(s), 0);
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * The default route, stderr, with the timeout from the environment: the
 * variable is read when the library is loaded, so this runs the test
 * program again with it set, alone, and reads its stderr (without
 * BXFI_MAP, by which Criterion's runner tells its workers apart).
 */
Test(stall, env_timeout_default_stderr, .timeout = 60)
{
	char cmd[4096], line[1024], self[2048];
	bool found = false;
	ssize_t len;
	FILE *f;

	if (getenv("PS_TEST_STALL_CHILD"))
		cr_skip_test("the child's own run");
	if (ps_test_scale() < 1)
		cr_skip_test("the child would run under valgrind too, past its timing");
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	cr_assert_gt(len, 0);
	self[len] = 0;
	snprintf(cmd, sizeof(cmd), "env -u BXFI_MAP PS_TEST_STALL_CHILD=1 POLSTORE_QSBR_STALL_MS=50 '%s' "
			"--filter='stall/stderr_child' --jobs=1 2>&1", self);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		cr_log_info("child: %s", line);
		/* valgrind (--trace-children) reports into this pipe: a report fails the test. */
		cr_expect(!strstr(line, "== "), "child: %s", line);
		if (strstr(line, "polstore: rcu-qsbr stall: thread ") && strstr(line, "stuck-online") &&
				strstr(line, "ps_qsbr_quiescent()"))
			found = true;
	}
	cr_expect_eq(pclose(f), 0);
	cr_expect(found, "no stall warning on stderr");
}

/* Run only by env_timeout_default_stderr: the default handler, the environment's timeout. */
Test(stall, stderr_child, .timeout = 30)
{
	struct ps_store *s;
	struct ps_policy *p;
	struct stuck st = { 0 };

	if (!getenv("PS_TEST_STALL_CHILD"))
		cr_skip_test("run by env_timeout_default_stderr");
	s = ps_store_create(PS_SYNC_RCU_QSBR);
	p = ps_test_bind(1);
	stuck_start(&st);
	retire_a_batch(s, p);
	sleep_ms(300);
	stuck_stop(&st);
	cr_assert_eq(ps_store_synchronize(s), 0);
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * Sets never wait for a grace period while the reclaim thread keeps up;
 * when it cannot (here: a stalled online thread), sets made outside every
 * section go on until 262,144 retired ranges are in flight at least
 * (32 MiB of 64-byte ranges and their records), and only the set past that waits, for
 * as long as the stall lasts: with a warning naming the setter.
 */
struct setter {
	struct ps_store *s;
	struct ps_policy *p;
	int tid, stop;
	long sets;
};

static void *set_until_stopped(void *arg)
{
	struct setter *w = arg;

	PSI_STORE_SEQ_CST(w->tid, gettid());
	while (!PSI_LOAD_SEQ_CST(w->stop)) {
		TCHECK(ps_store_set(w->s, 0, 8, w->p) == 0, "set");
		TCHECK(ps_store_set(w->s, 0, 8, NULL) == 0, "set");
		PSI_FETCH_ADD(w->sets, 2, SEQ_CST);
	}
	return NULL;
}

Test(stall, sets_wait_only_past_the_inflight_bound, .timeout = 120)
{
	struct setter w = { .s = ps_store_create(PS_SYNC_RCU_QSBR), .p = ps_test_bind(1) };
	struct stuck st = { 0 };
	size_t mem = 0, pending = 0;
	long sets = 0;
	pthread_t t;
	int i, j;
	bool blocked = false;

	if (ps_test_scale() < 1)
		cr_skip_test("some 10^5 sets: too slow under valgrind");
	cr_assert_eq(ps_qsbr_set_stall_warning(100, capture, NULL), 0);
	stuck_start(&st);
	cr_assert_eq(pthread_create(&t, NULL, set_until_stopped, &w), 0);
	for (i = 0; i < 6000 && !blocked; i++) {
		sleep_ms(10);
		pthread_mutex_lock(&warnings.lock);
		for (j = 0; j < warnings.n && j < MAX_SEEN; j++)
			if (warnings.seen[j].waiter_tid == PSI_LOAD_SEQ_CST(w.tid))
				blocked = true;
		pthread_mutex_unlock(&warnings.lock);
		if (blocked) {
			mem = ps_store_memory(w.s);
			sets = PSI_LOAD_SEQ_CST(w.sets);
			cr_assert_eq(ps_test_reclaim_stats(PS_SYNC_RCU_QSBR, NULL, &pending, NULL,
						     false),
					0);
		}
	}
	stuck_stop(&st);
	PSI_STORE_SEQ_CST(w.stop, 1);
	pthread_join(t, NULL);
	cr_assert(blocked, "no warning named the setting thread");
	cr_log_info("the set after %ld sets waited; the store held %zu bytes, %zu in flight", sets,
			mem, pending);
	/*
	 * The set that waited came after 32 MiB of retired memory were in
	 * flight (the bound is in bytes: each removal retires a range, its
	 * record and the read index's leaf; the set over the empty store
	 * retires nothing).  They wait on the store's log, and count in its
	 * ps_store_memory().
	 */
	cr_expect_geq(pending, (size_t)32 << 20, "a set waited with %zu bytes in flight", pending);
	cr_expect_geq(sets, 2L * ((32L << 20) / 1024), "a set waited after %ld sets", sets);
	cr_assert_eq(ps_store_synchronize(w.s), 0);
	cr_expect_eq(ps_policy_refcount(w.p), 1);
	ps_store_destroy(w.s);
	ps_policy_put(w.p);
}
