// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The checking mode (polstore/store.h, "Misuse"): every misuse it covers
 * ends in an abort with a message naming the call and the store, within
 * a second; correct use of checked stores works as without it.  Each
 * misuse runs in a forked child (ps_test_run_child()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "testutil.h"

#define LIMIT_S 20 /* a child that has not died by then hung */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* @fn(@arg) in a checked child must abort within a second, saying @call and @what. */
static void expect_check_abort(void (*fn)(void *), void *arg, const char *call, const char *what)
{
	char buf[4096];
	double secs;
	int sig = ps_test_run_child(fn, arg, LIMIT_S, buf, sizeof(buf), &secs);

	cr_expect_eq(sig, SIGABRT, "%s: the child %s; stderr: %s", call,
			sig == SIGALRM ? "hung" : sig ? "died of another signal" : "returned", buf);
	/* Within a second (and the child's start); valgrind runs it ten times slower. */
	cr_expect_lt(secs, ps_test_scale() < 1 ? 10.0 : 1.5, "%s: %.2f s to abort", call, secs);
	cr_expect(strstr(buf, call) && strstr(buf, what) && strstr(buf, "checking mode"),
			"%s: message \"%s\" lacks \"%s\"", call, buf, what);
}

static struct ps_store *checked(enum ps_sync sync)
{
	struct ps_store *s;

	ps_test_set_checking(true);
	s = ps_store_create(sync);
	if (!s)
		abort();
	return s;
}

/* Run @fn for each of the @n variants in @syncs, in this one test process. */
static void for_syncs(void (*fn)(enum ps_sync *), enum ps_sync *syncs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fn(&syncs[i]);
}

/* ---- read-side sections ---- */

static void unlock_never_locked(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_read_unlock(s);
}

static void unlock_twice(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_read_lock(s);
	ps_store_read_unlock(s);
	ps_store_read_unlock(s);
}

static struct ps_store *locked_elsewhere;
static int elsewhere_in;

static void *lock_and_stay(void *arg)
{
	ps_store_read_lock(arg);
	PSI_STORE_SEQ_CST(elsewhere_in, 1);
	for (;;)
		sleep_ms(100);
	return NULL;
}

static void unlock_on_another_thread(void *arg)
{
	pthread_t t;

	locked_elsewhere = checked(*(enum ps_sync *)arg);
	if (pthread_create(&t, NULL, lock_and_stay, locked_elsewhere))
		abort();
	while (!PSI_LOAD_SEQ_CST(elsewhere_in))
		sleep_ms(1);
	ps_store_read_unlock(locked_elsewhere);
}

static void borrow_outside_section(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_lookup_borrow(s, 5);
}

/*
 * RCU_QSBR: an online thread is inside a section already, so a borrowed
 * lookup there is not a misuse; an offline one is tested here.
 */
static void read_unlock_and_borrow_misuse_one(enum ps_sync *sync);

static void read_unlock_and_borrow_misuse(void)
{
	for_syncs(read_unlock_and_borrow_misuse_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void read_unlock_and_borrow_misuse_one(enum ps_sync *sync)
{
	char what[64];

	snprintf(what, sizeof(what), "%s store 0x", ps_sync_name(*sync));
	expect_check_abort(unlock_never_locked, sync, "ps_store_read_unlock()", what);
	expect_check_abort(unlock_twice, sync, "ps_store_read_unlock()", "no read-side section");
	/* SPIN: the other thread's section holds the lock; the unlock is caught before it. */
	expect_check_abort(unlock_on_another_thread, sync, "ps_store_read_unlock()",
			"closed by the thread that opened it");
	expect_check_abort(borrow_outside_section, sync, "ps_store_lookup_borrow()", what);
}

/* ---- destroy ---- */

static void destroy_beside_open_section(void *arg)
{
	pthread_t t;

	locked_elsewhere = checked(*(enum ps_sync *)arg);
	if (pthread_create(&t, NULL, lock_and_stay, locked_elsewhere))
		abort();
	while (!PSI_LOAD_SEQ_CST(elsewhere_in))
		sleep_ms(1);
	ps_store_destroy(locked_elsewhere);
}

static void lookup_after_destroy(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_destroy(s);
	ps_policy_put(ps_store_lookup(s, 5));
}

static void node_after_destroy(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_destroy(s);
	ps_store_lookup_node(s, 5, 0);
}

static void set_after_destroy(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_destroy(s);
	ps_store_set(s, 0, 1, NULL);
}

static void count_after_destroy(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_destroy(s);
	ps_store_count(s);
}

static void destroy_twice(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	ps_store_destroy(s);
	ps_store_destroy(s);
}

static void deferred_then_read(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);

	if (ps_store_destroy_deferred(s) || ps_rcu_barrier())
		abort();
	for (int i = 0; i < 100; i++) {
		ps_store_read_lock(s); /* the store is gone once the barrier returned */
		sleep_ms(10);
	}
}

static void destroyed_stores_are_poisoned_one(enum ps_sync *sync);

static void destroyed_stores_are_poisoned(void)
{
	for_syncs(destroyed_stores_are_poisoned_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void destroyed_stores_are_poisoned_one(enum ps_sync *sync)
{
	expect_check_abort(destroy_beside_open_section, sync, "ps_store_destroy()", "still open");
	expect_check_abort(lookup_after_destroy, sync, "ps_store_lookup()", "was destroyed");
	expect_check_abort(node_after_destroy, sync, "ps_store_lookup_node()", "was destroyed");
	expect_check_abort(set_after_destroy, sync, "ps_store_set()", "was destroyed");
	expect_check_abort(count_after_destroy, sync, "ps_store_count()", "was destroyed");
	expect_check_abort(destroy_twice, sync, "ps_store_destroy()", "was destroyed");
	if (*sync != PS_SYNC_SPIN && *sync != PS_SYNC_RWLOCK)
		expect_check_abort(deferred_then_read, sync, "ps_store_read_lock()", "was destroyed");
}

/* ---- thread exit inside a lock-based section ---- */

static void *exit_in_section(void *arg)
{
	ps_store_read_lock(arg);
	return NULL; /* the section is never closed: its lock stays held */
}

static void thread_exits_in_section(void *arg)
{
	struct ps_store *s = checked(*(enum ps_sync *)arg);
	pthread_t t;

	if (pthread_create(&t, NULL, exit_in_section, s))
		abort();
	pthread_join(t, NULL);
	sleep_ms(2000);
}

static enum ps_sync lock_syncs[] = { PS_SYNC_SPIN, PS_SYNC_RWLOCK };

static void thread_exit_inside_lock_section_one(enum ps_sync *sync);

static void thread_exit_inside_lock_section(void)
{
	for_syncs(thread_exit_inside_lock_section_one, lock_syncs, PS_ARRAY_SIZE(lock_syncs));
}

static void thread_exit_inside_lock_section_one(enum ps_sync *sync)
{
	expect_check_abort(thread_exits_in_section, sync, "thread exit", "lock stays held");
}

/* ---- fork while another thread holds a lock-based section ---- */

static int fork_reader_in, fork_reader_out;

static void *read_across_fork(void *arg)
{
	ps_store_read_lock(arg);
	PSI_STORE_SEQ_CST(fork_reader_in, 1);
	while (!PSI_LOAD_SEQ_CST(fork_reader_out))
		sleep_ms(1);
	ps_store_read_unlock(arg);
	return NULL;
}

/* The child's calls: a lookup (which an RWLOCK store lets through) and a set. */
static void child_uses_held_store(void *arg)
{
	struct ps_store *s = arg;
	struct ps_policy *a = ps_test_bind(1);

	ps_policy_put(ps_store_lookup(s, 15));
	(void)ps_store_set(s, 30, 40, a);
}

static void fork_inside_lock_section_one(enum ps_sync *sync)
{
	struct ps_store *s = checked(*sync);
	struct ps_policy *a = ps_test_bind(1);
	char buf[4096];
	pthread_t t;
	int sig;

	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	PSI_STORE_SEQ_CST(fork_reader_in, 0);
	PSI_STORE_SEQ_CST(fork_reader_out, 0);
	cr_assert_eq(pthread_create(&t, NULL, read_across_fork, s), 0);
	while (!PSI_LOAD_SEQ_CST(fork_reader_in))
		sleep_ms(1);
	/* The child has this thread only: the reader's section holds the lock there for good. */
	sig = ps_test_run_child(child_uses_held_store, s, 10, buf, sizeof(buf), NULL);
	PSI_STORE_SEQ_CST(fork_reader_out, 1);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_expect_eq(sig, SIGABRT, "%s: the child %s; stderr: %s", ps_sync_name(*sync),
			sig == SIGALRM ? "hung" : sig ? "died of another signal" : "returned", buf);
	cr_expect(strstr(buf, "ps_store_lookup()") && strstr(buf, "fork()") &&
					strstr(buf, ps_sync_name(*sync)) &&
					strstr(buf, "fork outside read-side sections, or use an "
						    "RCU/SEQLOCK store") &&
					strchr(buf, '\n') == strrchr(buf, '\n'),
			"%s: message \"%s\"", ps_sync_name(*sync), buf);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_test_set_checking(false);
}

Test(check, fork_inside_lock_section, .timeout = 120)
{
	for_syncs(fork_inside_lock_section_one, lock_syncs, PS_ARRAY_SIZE(lock_syncs));
}

/* ---- deadlocks: each thread inside one store, waiting for the other's ---- */

struct cross {
	struct ps_store *s[2];
	struct ps_policy *p;
	int how; /* 0: walks that look the other store up; 1: sections that set the other store */
	int in;
};

static struct cross cx;

static int cross_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ps_store *other = arg;

	(void)start, (void)end, (void)pol;
	PSI_FETCH_ADD(cx.in, 1, SEQ_CST);
	while (PSI_LOAD_SEQ_CST(cx.in) < 2)
		sleep_ms(1);
	ps_policy_put(ps_store_lookup(other, 5));
	return 1;
}

static void *cross_thread(void *arg)
{
	int me = (int)(intptr_t)arg;

	if (cx.how == 0) {
		ps_store_foreach(cx.s[me], cross_cb, cx.s[!me]);
	} else {
		ps_store_read_lock(cx.s[me]);
		PSI_FETCH_ADD(cx.in, 1, SEQ_CST);
		while (PSI_LOAD_SEQ_CST(cx.in) < 2)
			sleep_ms(1);
		ps_store_set(cx.s[!me], 20, 30, cx.p);
		ps_store_read_unlock(cx.s[me]);
	}
	return NULL;
}

static void cross_deadlock(void *arg)
{
	pthread_t t[2];
	int i;

	cx.how = *(int *)arg;
	for (i = 0; i < 2; i++) {
		cx.s[i] = checked(cx.how == 0 ? PS_SYNC_SPIN : PS_SYNC_RWLOCK);
		cx.p = ps_test_bind(1);
		if (ps_store_set(cx.s[i], 0, 10, cx.p))
			abort();
	}
	for (i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, cross_thread, (void *)(intptr_t)i))
			abort();
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

/*
 * Two SPIN walks whose callbacks look up each other's store (the lock
 * order of polstore/store.h broken), and two RWLOCK readers each setting
 * the other's store inside its section: both hang for good without the
 * checking mode; with it, the watchdog names both waits and aborts.
 */
Test(check, lock_order_deadlocks_are_reported, .timeout = 300)
{
	int how;

	for (how = 0; how < 2; how++)
		expect_check_abort(cross_deadlock, &how, "deadlock", "waits in ps_store_");
}

static enum ps_sync rcu_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

/* @fn(@arg) in a checked child returns, with nothing on stderr. */
static void expect_check_clean(void (*fn)(void *), void *arg, const char *what)
{
	char buf[4096];
	int sig = ps_test_run_child(fn, arg, LIMIT_S, buf, sizeof(buf), NULL);

	cr_expect_eq(sig, 0, "%s: the child %s; stderr: %s", what,
			sig == SIGALRM ? "hung" : sig == SIGABRT ? "aborted" : "died", buf);
	cr_expect_eq(buf[0], 0, "%s: stderr: %s", what, buf);
}

/* ---- lookups from a signal handler ---- */

static struct ps_store *sig_store;
static long sig_handled;
static int sig_stop;

/* What polstore/store.h allows a handler: node lookups, copies, a section of its own. */
static void lookup_handler(int sig)
{
	struct ps_policy_view v = PS_POLICY_VIEW_INIT(1);
	int saved = errno;

	(void)sig;
	if (ps_store_lookup_node(sig_store, 5, 0) != 1 || ps_store_lookup_copy(sig_store, 5, &v) != 1)
		abort();
	ps_store_read_lock(sig_store);
	if (!ps_store_lookup_borrow(sig_store, 5))
		abort();
	ps_store_read_unlock(sig_store);
	PSI_FETCH_ADD(sig_handled, 1, SEQ_CST);
	errno = saved;
}

static void *signal_sender(void *arg)
{
	pthread_t target = *(pthread_t *)arg;

	while (!PSI_LOAD_SEQ_CST(sig_stop)) {
		pthread_kill(target, SIGUSR1);
		usleep(50);
	}
	return NULL;
}

/*
 * The thread reads the store in a loop (lookups, sections, borrowed
 * lookups: its record changes all the time) while another sends it
 * SIGUSR1 every 50 us, whose handler reads the store too; the watchdog
 * scans meanwhile.  Nothing waits for the thread's own record.
 */
struct sig_case {
	enum ps_sync sync;
	bool checked;
};

static void lookups_in_signal_handler(void *arg)
{
	const struct sig_case *c = arg;
	struct sigaction sa = { .sa_handler = lookup_handler };
	pthread_t self = pthread_self(), sender;
	uint64_t end;

	ps_test_set_checking(c->checked);
	sig_store = ps_store_create(c->sync);
	if (!sig_store)
		abort();
	if (ps_store_set(sig_store, 0, 10, ps_test_bind(1)))
		abort();
	ps_policy_put(ps_store_lookup(sig_store, 5)); /* registers the thread with liburcu */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) || pthread_create(&sender, NULL, signal_sender, &self))
		abort();
	end = ps_test_now_ns() + 600000000ull;
	while (ps_test_now_ns() < end || PSI_LOAD_SEQ_CST(sig_handled) < 100) {
		ps_store_read_lock(sig_store);
		if (!ps_store_lookup_borrow(sig_store, 5))
			abort();
		ps_store_read_unlock(sig_store);
		if (ps_store_lookup_node(sig_store, 5, 0) != 1)
			abort();
	}
	PSI_STORE_SEQ_CST(sig_stop, 1);
	pthread_join(sender, NULL);
}

/* What polstore/store.h promises a handler, with the checking mode and without. */
static void lookups_in_signal_handlers_one(enum ps_sync *sync)
{
	int on;

	for (on = 0; on < 2; on++) {
		struct sig_case c = { *sync, on };
		char what[64];

		snprintf(what, sizeof(what), "%s%s: lookups in a signal handler",
				ps_sync_name(*sync), on ? ", checked" : "");
		expect_check_clean(lookups_in_signal_handler, &c, what);
	}
}

Test(check, lookups_in_signal_handlers, .timeout = 120)
{
	static const unsigned char dist[4] = { 10, 20, 20, 10 };

	cr_assert_eq(ps_numa_set_topology(2, dist, NULL), 0);
	for_syncs(lookups_in_signal_handlers_one, rcu_syncs, PS_ARRAY_SIZE(rcu_syncs));
}

/* ---- deep nesting ---- */

#define DEEP_STORES 40

/*
 * Sections of 40 stores (of every variant but SPIN), all open, closed in
 * an order that is not the opening one; before each close, every store
 * still open lends a borrowed lookup.  Then one store 100 sections deep.
 */
static void deep_sections(void *arg)
{
	static const enum ps_sync syncs[] = { PS_SYNC_RWLOCK, PS_SYNC_SEQLOCK, PS_SYNC_RCU,
		PS_SYNC_RCU_QSBR };
	struct ps_store *s[DEEP_STORES];
	bool open[DEEP_STORES];
	struct ps_policy *p = ps_test_bind(0);
	int i, j, k;

	(void)arg;
	for (i = 0; i < DEEP_STORES; i++) {
		s[i] = checked(syncs[i % 4]);
		if (ps_store_set(s[i], 0, 10, p))
			abort();
		ps_store_read_lock(s[i]);
		open[i] = true;
	}
	for (k = 0; k < DEEP_STORES; k++) {
		i = (k * 7 + 3) % DEEP_STORES; /* 7 and 40 are coprime: each store once */
		for (j = 0; j < DEEP_STORES; j++)
			if (open[j] && ps_store_lookup_borrow(s[j], 5) != p)
				abort();
		ps_store_read_unlock(s[i]);
		open[i] = false;
	}
	for (i = 0; i < 100; i++)
		ps_store_read_lock(s[2]);
	ps_store_read_lock(s[3]);
	for (i = 0; i < 100; i++) {
		if (ps_store_lookup_borrow(s[2], 5) != p || ps_store_lookup_borrow(s[3], 5) != p)
			abort();
		ps_store_read_unlock(s[2]);
	}
	ps_store_read_unlock(s[3]);
	for (i = 0; i < DEEP_STORES; i++)
		ps_store_destroy(s[i]);
	ps_policy_put(p);
}

Test(check, deep_sections_closed_out_of_order, .timeout = 60)
{
	expect_check_clean(deep_sections, NULL, "40 sections closed out of order");
}

/* ---- waits that are not deadlocks ---- */

/* Allocations of a thread that asked for it sleep, the first one for a second. */
static __thread bool slow_allocs;

static void *slow_alloc(size_t size, void *ctx)
{
	(void)ctx;
	if (slow_allocs) {
		slow_allocs = false;
		sleep_ms(1000);
	}
	return malloc(size);
}

static void slow_free(void *p, void *ctx)
{
	(void)ctx;
	free(p);
}

static struct ps_store *slow_store;
static int slow_in;

/* Inside a section of the store, a set that takes a second (its allocator sleeps). */
static void *set_in_own_section(void *arg)
{
	struct ps_policy *p = arg;

	ps_store_read_lock(slow_store);
	PSI_FETCH_ADD(slow_in, 1, SEQ_CST);
	while (PSI_LOAD_SEQ_CST(slow_in) < 2)
		sleep_ms(1);
	slow_allocs = true;
	if (ps_store_set(slow_store, 0, 100, p))
		abort();
	slow_allocs = false;
	ps_store_read_unlock(slow_store);
	return NULL;
}

/*
 * RCU and RCU_QSBR: two threads, each inside a section of the store, each
 * in a set of it that lasts a second.  A set inside a section never waits
 * for a grace period: no thread waits for the other's section, and the
 * child returns with no report.
 */
static void sets_inside_sections(void *arg)
{
	static const struct ps_alloc_ops ops = {.alloc = slow_alloc, .free = slow_free};
	struct ps_policy *p;
	pthread_t t[2];
	int i;

	if (ps_set_alloc_ops(&ops))
		abort();
	slow_store = checked(*(enum ps_sync *)arg);
	p = ps_test_bind(1);
	for (i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, set_in_own_section, p))
			abort();
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

static void sets_inside_sections_are_no_deadlock_one(enum ps_sync *sync)
{
	char what[64];

	snprintf(what, sizeof(what), "%s: sets inside sections", ps_sync_name(*sync));
	expect_check_clean(sets_inside_sections, sync, what);
}

Test(check, sets_inside_sections_are_no_deadlock, .timeout = 120)
{
	for_syncs(sets_inside_sections_are_no_deadlock_one, rcu_syncs, PS_ARRAY_SIZE(rcu_syncs));
}

/* ---- correct use is unaffected ---- */

static void checked_stores_under_load_one(enum ps_sync *sync);

static void checked_stores_under_load(void)
{
	for_syncs(checked_stores_under_load_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void checked_stores_under_load_one(enum ps_sync *sync)
{
	struct ps_test_store_load l = {
		.sync = *sync,
		.readers = 2,
		.walkers = 1,
		.writers = 1,
		.read = PS_TEST_READ_BOTH,
		.hold = 2,
		.qsbr_online = true,
		.region_size = 64,
		.run = { .iters = ps_test_iters(1500), .seed = 11 },
	};

	ps_test_set_checking(true);
	cr_assert_eq(ps_test_store_run(&l), 0, "%s: %ld failures, first: %s", ps_sync_name(*sync),
			l.run.failures, l.run.why);
	ps_test_set_checking(false);
}

/* Sections nest, walks read other stores, deferred destroys run: nothing aborts. */
static int read_other(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ps_policy_view v = PS_POLICY_VIEW_INIT(1);

	(void)start, (void)end, (void)pol;
	if (ps_store_lookup_copy(arg, 5, &v) != 1)
		abort();
	return 0;
}

static void checked_correct_contexts_one(enum ps_sync *sync);

static void checked_correct_contexts(void)
{
	for_syncs(checked_correct_contexts_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void checked_correct_contexts_one(enum ps_sync *sync)
{
	struct ps_store *a, *b;
	struct ps_policy *p = ps_test_bind(2);
	uint64_t st, en;
	const struct ps_policy *bp;

	ps_test_set_checking(true);
	a = ps_store_create(*sync);
	b = ps_store_create(PS_SYNC_RCU);
	cr_assert_eq(ps_store_set(a, 0, 10, p), 0);
	cr_assert_eq(ps_store_set(b, 0, 10, p), 0);
	ps_store_read_lock(b);
	ps_store_read_lock(a);
	cr_expect_eq(ps_store_lookup_borrow(a, 5), p);
	cr_expect_eq(ps_store_next_borrow(a, 0, &st, &en, &bp), 0);
	ps_store_read_unlock(b); /* out of order: allowed */
	ps_store_read_unlock(a);
	cr_expect_eq(ps_store_foreach(a, read_other, b), 0);
	cr_expect_eq(ps_store_foreach(b, read_other, a), 0);
	cr_expect_eq(ps_store_synchronize(a), 0);
	ps_store_destroy(b);
	cr_assert_eq(ps_store_destroy_deferred(a), 0);
	cr_assert_eq(ps_rcu_barrier(), 0);
	ps_test_set_checking(false);
	ps_policy_put(p);
}

/* POLSTORE_CHECK=1 at load turns the mode on: this program again, with it, reading its stderr. */
Test(check, environment_turns_it_on, .timeout = 300)
{
	char cmd[4096], self[2048], line[1024];
	bool found = false;
	ssize_t len;
	FILE *f;

	if (getenv("PS_TEST_CHECK_CHILD"))
		cr_skip_test("the child's own run");
	if (ps_test_scale() < 1)
		cr_skip_test("the child would run under valgrind too: the other tests cover it");
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	cr_assert_gt(len, 0);
	self[len] = 0;
	/* Without BXFI_MAP, by which Criterion's runner tells its workers apart. */
	snprintf(cmd, sizeof(cmd), "env -u BXFI_MAP PS_TEST_CHECK_CHILD=1 POLSTORE_CHECK=1 '%s' "
			"--filter='check/env_child' --jobs=1 2>&1", self);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		cr_log_info("child: %s", line);
		if (strstr(line, "ps_store_read_unlock()") && strstr(line, "checking mode"))
			found = true;
	}
	pclose(f);
	cr_expect(found, "POLSTORE_CHECK=1 did not catch an unlock without a lock");
}

Test(check, env_child, .signal = SIGABRT, .timeout = 30)
{
	struct ps_store *s;

	if (!getenv("PS_TEST_CHECK_CHILD")) {
		raise(SIGABRT); /* run by environment_turns_it_on; alone it passes */
		return;
	}
	s = ps_store_create(PS_SYNC_RCU); /* checked: the environment said so */
	ps_store_read_unlock(s);
}

/* One test process for these (each Criterion test is a process of its own: valgrind starts each). */
Test(check, section_and_destroy_misuse, .timeout = 600)
{
	read_unlock_and_borrow_misuse();
	destroyed_stores_are_poisoned();
	thread_exit_inside_lock_section();
}

Test(check, correct_use_unaffected, .timeout = 600)
{
	checked_stores_under_load();
	checked_correct_contexts();
}
