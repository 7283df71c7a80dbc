// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Thread lifecycle against the stores and the liburcu flavours: a reader
 * that exits or is cancelled inside its read-side section, thread-exit keys
 * that cannot be created, contexts the grace-period waiters allow, locks
 * waited for at fork(), allocator hooks swapped after the deferred frees,
 * dlclose() of the library with threads still alive.
 *
 * A hang is the failure most of these look for: every wait that could hang
 * runs in a helper thread joined with a deadline (or in a forked child under
 * alarm()), so it is reported as a failed assertion, not a stuck run; each
 * test also has a Criterion .timeout as a backstop.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <urcu/urcu-memb.h>
#include <urcu/urcu-qsbr.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "testutil.h"

/* How long a wait that must end may take before it counts as a hang. */
#define HANG_S 10

static struct timespec deadline_in(int secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	return ts;
}

/* 0 when @t ended within @secs, ETIMEDOUT when it is still running (a hang). */
static int join_within(pthread_t t, int secs)
{
	struct timespec ts = deadline_in(secs);

	return pthread_timedjoin_np(t, NULL, &ts);
}

static void wait_sem(sem_t *s, const char *what)
{
	struct timespec ts = deadline_in(HANG_S);
	int ret;

	while ((ret = sem_timedwait(s, &ts)) && errno == EINTR)
		;
	cr_assert_eq(ret, 0, "timed out waiting for %s", what);
}

/* Run in a forked child; @fn's return is the exit status, a hang is killed by alarm(). */
static int in_child(int (*fn)(void *), void *arg, int alarm_s)
{
	pid_t pid = fork();
	int status;

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		alarm((unsigned)alarm_s);
		_exit(fn(arg));
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		return -WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* ---- 1. A reader that dies inside its read-side section ---------------------- */

enum death {
	EXIT_IN_FOREACH, /* pthread_exit() inside a ps_store_foreach() callback */
	EXIT_IN_SECTION, /* pthread_exit() between ps_store_read_lock() and unlock */
	CANCEL_IN_FOREACH, /* cancelled at a cancellation point in a foreach callback */
	CANCEL_IN_SECTION, /* cancelled at a cancellation point inside read_lock/unlock */
	EXIT_IN_WINDOW, /* pthread_exit() inside a ps_store_foreach_range() callback */
	CANCEL_IN_WINDOW, /* cancelled at a cancellation point in a foreach_range callback */
};

static const char *const death_names[] = {
	"pthread_exit in foreach",
	"pthread_exit in read section",
	"cancel in foreach",
	"cancel in read section",
	"pthread_exit in foreach_range",
	"cancel in foreach_range",
};

struct death_case {
	enum ps_sync sync;
	enum death how;
	bool online; /* RCU_QSBR reader online by ps_qsbr_thread_online() */
};

static struct death_case death_cases[] = {
	{ PS_SYNC_RCU, EXIT_IN_FOREACH, false },
	{ PS_SYNC_RCU, EXIT_IN_SECTION, false },
	{ PS_SYNC_RCU, CANCEL_IN_FOREACH, false },
	{ PS_SYNC_RCU, CANCEL_IN_SECTION, false },
	{ PS_SYNC_SEQLOCK, EXIT_IN_FOREACH, false },
	{ PS_SYNC_SEQLOCK, EXIT_IN_SECTION, false },
	{ PS_SYNC_SEQLOCK, CANCEL_IN_FOREACH, false },
	{ PS_SYNC_SEQLOCK, CANCEL_IN_SECTION, false },
	{ PS_SYNC_RCU_QSBR, EXIT_IN_FOREACH, false },
	{ PS_SYNC_RCU_QSBR, EXIT_IN_SECTION, false },
	{ PS_SYNC_RCU_QSBR, CANCEL_IN_FOREACH, false },
	{ PS_SYNC_RCU_QSBR, CANCEL_IN_SECTION, false },
	{ PS_SYNC_RCU_QSBR, EXIT_IN_SECTION, true },
	{ PS_SYNC_RCU_QSBR, CANCEL_IN_SECTION, true },
	{ PS_SYNC_RCU, EXIT_IN_WINDOW, false },
	{ PS_SYNC_RCU, CANCEL_IN_WINDOW, false },
	{ PS_SYNC_SEQLOCK, EXIT_IN_WINDOW, false },
	{ PS_SYNC_SEQLOCK, CANCEL_IN_WINDOW, false },
	{ PS_SYNC_RCU_QSBR, EXIT_IN_WINDOW, false },
	{ PS_SYNC_RCU_QSBR, CANCEL_IN_WINDOW, false },
};

struct dying {
	struct ps_store *s;
	const struct death_case *c;
	sem_t inside; /* posted by the reader once inside its section */
	sem_t go; /* posted by the test: die now (EXIT_*) */
	const struct ps_policy *borrowed;
};

static bool death_cancels(enum death how)
{
	return how == CANCEL_IN_FOREACH || how == CANCEL_IN_SECTION || how == CANCEL_IN_WINDOW;
}

/* A walk with callbacks: SEQLOCK holds its writer lock there, not a read-side section. */
static bool death_in_walk(enum death how)
{
	return how == EXIT_IN_FOREACH || how == CANCEL_IN_FOREACH || how == EXIT_IN_WINDOW ||
	       how == CANCEL_IN_WINDOW;
}

static void die_here(void *arg)
{
	struct dying *d = arg;

	sem_post(&d->inside);
	if (death_cancels(d->c->how)) {
		for (;;)
			pause(); /* a cancellation point; the test cancels us here */
	}
	while (sem_wait(&d->go))
		;
	pthread_exit(NULL);
}

static void *dying_reader(void *arg)
{
	struct dying *d = arg;
	struct ps_test_call die = { die_here, d };

	if (d->c->online)
		ps_qsbr_thread_online();
	if (d->c->how == EXIT_IN_FOREACH || d->c->how == CANCEL_IN_FOREACH) {
		ps_store_foreach(d->s, ps_test_call_in_foreach, &die);
	} else if (d->c->how == EXIT_IN_WINDOW || d->c->how == CANCEL_IN_WINDOW) {
		ps_store_foreach_range(d->s, 5, 6, ps_test_call_in_foreach, &die);
	} else {
		/* Nested sections: every level must be closed when the thread dies. */
		ps_store_read_lock(d->s);
		ps_store_read_lock(d->s);
		d->borrowed = ps_store_lookup_borrow(d->s, 5);
		die_here(d);
	}
	abort(); /* not reached */
}

/* Every wait for readers a store offers: sets, synchronize (and with it call_rcu barriers). */
struct waiter {
	struct ps_store *s;
	struct ps_policy *pol;
	int done;
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;

	ps_store_synchronize(w->s);
	ps_store_set(w->s, 100, 110, w->pol);
	ps_store_synchronize(w->s);
	ps_store_set(w->s, 100, 110, NULL);
	ps_store_synchronize(w->s);
	PSI_STORE_SEQ_CST(w->done, 1);
	return NULL;
}

/* The futex liburcu sleeps on when a grace period waits for a reader. */
static int32_t *gp_futex(enum ps_sync sync)
{
	return sync == PS_SYNC_RCU_QSBR ? &urcu_qsbr_gp.futex : &urcu_memb_gp.futex;
}

/*
 * Wait until the waiter is asleep in a grace period (liburcu set the
 * futex to -1 and sleeps until a reader wakes it) or finished.  Only then
 * does the reader die, so the test always checks the hard case: a grace
 * period that already waits for the dying thread.
 */
static void until_waiter_sleeps(struct waiter *w, enum ps_sync sync)
{
	int32_t *futex = gp_futex(sync);
	int i;

	for (i = 0; i < HANG_S * 1000; i++) {
		if (PSI_LOAD_SEQ_CST(*futex) == -1 || PSI_LOAD_SEQ_CST(w->done))
			return;
		usleep(1000);
	}
	cr_assert_fail("the writer neither waited for the reader nor finished");
}

/* @s's history in reader_dies_in_section before the reader died, on a fresh store. */
static struct ps_store *death_store_twin(enum ps_sync sync, struct ps_policy *a,
		struct ps_policy *b)
{
	struct ps_store *s = ps_store_create(sync);
	int i;

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 0, 10, b), 0);
	cr_assert_eq(ps_store_set(s, 0, 10, a), 0);
	for (i = 0; i < 2; i++) { /* waiter_fn()'s sets, twice */
		cr_assert_eq(ps_store_set(s, 100, 110, b), 0);
		cr_assert_eq(ps_store_set(s, 100, 110, NULL), 0);
	}
	return s;
}

/* Sets on @s: 64 ranges, then @n new policies for them.  Return: how many published at the root. */
static uint64_t root_publications_of_sets(struct ps_store *s, int n, struct ps_policy *a,
		struct ps_policy *b)
{
	struct ps_store_stats st0, st1;
	int i;

	cr_assert_eq(ps_store_stats(s, &st0), 0);
	for (i = 0; i < 64; i++)
		cr_assert_eq(ps_store_set(s, 1000 + 2 * (uint64_t)i, 1001 + 2 * (uint64_t)i, a), 0);
	for (i = 0; i < n; i++) {
		uint64_t at = 1000 + 2 * (uint64_t)((i * 37) % 64);

		cr_assert_eq(ps_store_set(s, at, at + 1, (i & 1) ? a : b), 0);
	}
	cr_assert_eq(ps_store_stats(s, &st1), 0);
	return st1.root_publications - st0.root_publications;
}

/*
 * RCU stores: a walk the reader announced (foreach, foreach_range) ended
 * with it, so later sets publish where they would on a store no walk
 * ever ran on (the same history on a twin store): at the root only when
 * they change the root, not every one of them.
 */
static void expect_no_walk_left(struct ps_store *s, const struct death_case *c,
		struct ps_policy *a, struct ps_policy *b)
{
	struct ps_store *twin = death_store_twin(c->sync, a, b);
	int n = (int)ps_test_iters(2000);
	uint64_t got = root_publications_of_sets(s, n, a, b);
	uint64_t want = root_publications_of_sets(twin, n, a, b);

	ps_store_destroy(twin);
	cr_assert_eq(got, want,
			"%s, %s: %" PRIu64 " of %d sets after the death published at the root, "
			"%" PRIu64 " on a store without the dead reader (its walk is still announced)",
			ps_sync_name(c->sync), death_names[c->how], got, 64 + n, want);
}

PS_ARRAY_TEST(struct death_case, c, death_cases, lifecycle, reader_dies_in_section,
		.timeout = 4 * HANG_S)
{
	struct dying d = { .c = c };
	struct ps_policy *a, *b;
	a = ps_test_bind(1);
	b = ps_test_bind(2);
	struct waiter w = { .pol = b };
	const char *name = ps_sync_name(c->sync), *how = death_names[c->how];
	pthread_t rt, wt;
	const char *why = NULL;
	struct ps_policy *got;

	d.s = w.s = ps_store_create(c->sync);
	cr_assert_not_null(d.s);
	sem_init(&d.inside, 0, 0);
	sem_init(&d.go, 0, 0);
	/* A replaced range: SEQLOCK then has a retired batch that synchronize frees. */
	cr_assert_eq(ps_store_set(d.s, 0, 10, b), 0);
	cr_assert_eq(ps_store_set(d.s, 0, 10, a), 0);
	cr_assert_eq(pthread_create(&rt, NULL, dying_reader, &d), 0);
	wait_sem(&d.inside, "the reader to enter its section");

	/* A writer that waits for the reader (SEQLOCK foreach: for its lock). */
	cr_assert_eq(pthread_create(&wt, NULL, waiter_fn, &w), 0);
	if (!(c->sync == PS_SYNC_SEQLOCK && death_in_walk(c->how)))
		until_waiter_sleeps(&w, c->sync);

	if (death_cancels(c->how))
		cr_assert_eq(pthread_cancel(rt), 0);
	else
		sem_post(&d.go);
	cr_assert_eq(join_within(rt, HANG_S), 0, "%s, %s: the reader did not finish dying", name,
			how);
	cr_assert_eq(join_within(wt, HANG_S), 0,
			"%s, %s: a writer waiting for the dead reader never woke up", name, how);

	/* And every wait started after the death. */
	w.done = 0;
	cr_assert_eq(pthread_create(&wt, NULL, waiter_fn, &w), 0);
	cr_assert_eq(join_within(wt, HANG_S), 0, "%s, %s: a writer after the death hangs", name,
			how);

	got = ps_store_lookup(d.s, 5);
	cr_assert_eq(got, a);
	ps_policy_put(got);
	cr_assert_eq(ps_store_check(d.s, &why), 0, "%s", why);
	if (c->sync != PS_SYNC_SEQLOCK)
		expect_no_walk_left(d.s, c, a, b);
	ps_store_destroy(d.s);
	cr_assert_eq(ps_policy_refcount(a), 1);
	cr_assert_eq(ps_policy_refcount(b), 1);
	ps_policy_put(a);
	ps_policy_put(b);
	sem_destroy(&d.inside);
	sem_destroy(&d.go);
}

/* The same for an RCU id map, which shares the memb flavour with the stores. */
struct idmap_dying {
	struct ps_idmap *map;
	sem_t inside;
};

static void *idmap_dying_reader(void *arg)
{
	struct idmap_dying *d = arg;

	ps_idmap_read_lock(d->map);
	(void)ps_idmap_find(d->map, 0);
	sem_post(&d->inside);
	for (;;)
		pause(); /* cancelled here */
	return NULL;
}

static void *idmap_syncer(void *arg)
{
	ps_idmap_synchronize(arg);
	return NULL;
}

Test(lifecycle, idmap_reader_cancelled_in_section, .timeout = 4 * HANG_S)
{
	struct idmap_dying d = { .map = ps_idmap_create(PS_IDMAP_RCU) };
	struct waiter w = { 0 };
	pthread_t rt, wt;

	cr_assert_not_null(d.map);
	sem_init(&d.inside, 0, 0);
	cr_assert_eq(pthread_create(&rt, NULL, idmap_dying_reader, &d), 0);
	wait_sem(&d.inside, "the reader to enter its section");
	cr_assert_eq(pthread_create(&wt, NULL, idmap_syncer, d.map), 0);
	until_waiter_sleeps(&w, PS_SYNC_RCU);
	cr_assert_eq(pthread_cancel(rt), 0);
	cr_assert_eq(join_within(rt, HANG_S), 0);
	cr_assert_eq(join_within(wt, HANG_S), 0,
			"ps_idmap_synchronize() never woke up after its reader was cancelled");
	ps_idmap_synchronize(d.map);
	ps_idmap_destroy(d.map);
	sem_destroy(&d.inside);
}

/* ---- 5. Where the RCU id map's grace-period waits may be called --------------- */

enum gp_context {
	CTX_NONE,
	CTX_SPIN_STORE, /* ps_store_read_lock() of a SPIN store */
	CTX_RWLOCK_STORE,
	CTX_QSBR_STORE, /* an RCU_QSBR section: another liburcu flavour */
	CTX_QSBR_ONLINE, /* the same, the thread online by ps_qsbr_thread_online() */
	CTX_SPIN_MAP, /* ps_idmap_read_lock() of a SPIN map */
	CTX_RWLOCK_MAP,
	CTX_RCU_STORE, /* forbidden from here on: memb sections */
	CTX_SEQLOCK_STORE,
	CTX_RCU_STORE_FOREACH,
	CTX_RCU_MAP,
};

static const char *const gp_context_names[] = {
	"no section", "SPIN store section", "RWLOCK store section", "RCU_QSBR store section",
	"RCU_QSBR store section, online", "SPIN map section", "RWLOCK map section",
	"RCU store section", "SEQLOCK store section", "RCU store foreach callback",
	"RCU map section",
};

struct gp_run {
	enum gp_context ctx;
	struct ps_idmap *map; /* the RCU map whose waits are called */
	int progress_fd; /* forbidden cases: written just before the first wait */
};

/* Every call of idmap.h that may wait for a grace period on an RCU map. */
static void gp_waits(void *arg)
{
	struct gp_run *r = arg;

	int i;

	if (r->progress_fd >= 0 && write(r->progress_fd, "w", 1) != 1)
		abort();
	for (i = 0; i <= PS_IDMAP_FREE_BATCH; i++) /* waits only when memory runs out */
		ps_idmap_free_rcu(r->map, malloc(16), free);
	ps_idmap_barrier(r->map); /* waits: frees queued */
	ps_idmap_synchronize(r->map);
}

/* Enter @r->ctx, call the waits inside, leave. */
static void gp_in_context(struct gp_run *r)
{
	static const enum ps_sync store_sync[] = {
		[CTX_SPIN_STORE] = PS_SYNC_SPIN, [CTX_RWLOCK_STORE] = PS_SYNC_RWLOCK,
		[CTX_QSBR_STORE] = PS_SYNC_RCU_QSBR, [CTX_QSBR_ONLINE] = PS_SYNC_RCU_QSBR,
		[CTX_RCU_STORE] = PS_SYNC_RCU, [CTX_SEQLOCK_STORE] = PS_SYNC_SEQLOCK,
		[CTX_RCU_STORE_FOREACH] = PS_SYNC_RCU,
	};
	struct ps_policy *a = ps_test_bind(0);
	struct ps_store *s = NULL;
	struct ps_idmap *m = NULL;

	switch (r->ctx) {
	case CTX_NONE:
		gp_waits(r);
		break;
	case CTX_SPIN_MAP:
	case CTX_RWLOCK_MAP:
	case CTX_RCU_MAP:
		m = r->ctx == CTX_RCU_MAP ? r->map :
		    ps_idmap_create(r->ctx == CTX_SPIN_MAP ? PS_IDMAP_SPIN : PS_IDMAP_RWLOCK);
		ps_idmap_read_lock(m);
		gp_waits(r);
		ps_idmap_read_unlock(m);
		if (m != r->map)
			ps_idmap_destroy(m);
		break;
	default:
		s = ps_store_create(store_sync[r->ctx]);
		if (!s || ps_store_set(s, 0, 10, a))
			abort();
		if (r->ctx == CTX_QSBR_ONLINE)
			ps_qsbr_thread_online();
		if (r->ctx == CTX_RCU_STORE_FOREACH) {
			struct ps_test_call wait = { gp_waits, r };

			ps_store_foreach(s, ps_test_call_in_foreach, &wait);
		} else {
			ps_store_read_lock(s);
			gp_waits(r);
			ps_store_read_unlock(s);
		}
		if (r->ctx == CTX_QSBR_ONLINE)
			ps_qsbr_thread_offline();
		ps_store_destroy(s);
		break;
	}
	ps_policy_put(a);
}

static void *gp_thread(void *arg)
{
	gp_in_context(arg);
	return NULL;
}

/* Allowed contexts: every wait returns. */
Test(lifecycle, idmap_waits_in_allowed_contexts, .timeout = 4 * HANG_S)
{
	struct gp_run r = { .map = ps_idmap_create(PS_IDMAP_RCU), .progress_fd = -1 };
	pthread_t t;

	cr_assert_not_null(r.map);
	for (r.ctx = CTX_NONE; r.ctx < CTX_RCU_STORE; r.ctx++) {
		cr_assert_eq(pthread_create(&t, NULL, gp_thread, &r), 0);
		cr_assert_eq(join_within(t, HANG_S), 0, "idmap grace-period waits hang in a %s",
				gp_context_names[r.ctx]);
	}
	ps_idmap_destroy(r.map);
}

#define HUNG_EXIT 42 /* not valgrind's --error-exitcode */

/* A plain exit rather than death by SIGALRM, which valgrind reports as an error. */
static void hung(int sig)
{
	(void)sig;
	_exit(HUNG_EXIT);
}

static int gp_forbidden_child(void *arg)
{
	signal(SIGALRM, hung);
	gp_in_context(arg);
	return 0; /* returned: the documentation forbids too much */
}

/*
 * Forbidden contexts: the waits never return (the grace period waits for
 * the caller's own memb section), so the documentation forbids exactly
 * these.  Each runs in a child killed by alarm() after it reached the wait.
 */
Test(lifecycle, idmap_waits_in_memb_sections_deadlock, .timeout = 4 * HANG_S)
{
	struct gp_run r = { .map = ps_idmap_create(PS_IDMAP_RCU) };
	int fds[2], ret;
	char c;

	cr_assert_not_null(r.map);
	for (r.ctx = CTX_RCU_STORE; r.ctx <= CTX_RCU_MAP; r.ctx++) {
		cr_assert_eq(pipe(fds), 0);
		r.progress_fd = fds[1];
		ret = in_child(gp_forbidden_child, &r, 2);
		close(fds[1]);
		cr_assert_eq(read(fds[0], &c, 1), 1, "%s: the child never reached the wait",
				gp_context_names[r.ctx]);
		close(fds[0]);
		cr_assert_eq(ret, HUNG_EXIT, "%s: expected a deadlock, got %d",
				gp_context_names[r.ctx], ret);
	}
	ps_idmap_destroy(r.map);
}

/* ---- 4. Thread-exit keys that cannot be created ------------------------------- */

static long counted_allocs, foreign_frees;
static pthread_t counting_owner; /* frees from any other thread are counted */

static void *counting_alloc(size_t size, void *ctx)
{
	(void)ctx;
	PSI_FETCH_ADD(counted_allocs, 1, SEQ_CST);
	return malloc(size);
}

static void counting_free(void *p, void *ctx)
{
	(void)ctx;
	if (!pthread_equal(pthread_self(), counting_owner))
		PSI_FETCH_ADD(foreign_frees, 1, SEQ_CST);
	free(p);
}

static void *reader_exits(void *arg)
{
	ps_policy_put(ps_store_lookup(arg, 1));
	return NULL;
}

/*
 * In a fresh child (no polstore key created yet): use up every pthread key,
 * then every entry point that could register a thread with liburcu must
 * fail with pthread_key_create()'s EAGAIN and allocate nothing; the lock
 * variants do not need the keys.  Once two keys are free again, creation
 * succeeds and readers come and go.
 */
static int keys_exhausted_child(void *unused)
{
	static const struct ps_alloc_ops counting = {.alloc = counting_alloc, .free = counting_free};
	static const enum ps_sync needs_keys[] = { PS_SYNC_SEQLOCK, PS_SYNC_RCU, PS_SYNC_RCU_QSBR };
	static pthread_key_t keys[PTHREAD_KEYS_MAX];
	struct ps_store *s;
	pthread_t t;
	int n = 0, err = 0;
	unsigned i;

	(void)unused;
	counting_owner = pthread_self();
	while (n < PTHREAD_KEYS_MAX && !(err = pthread_key_create(&keys[n], NULL)))
		n++;
	if (err != EAGAIN || n < 2)
		return 1;
	if (ps_set_alloc_ops(&counting))
		return 2;
	for (i = 0; i < sizeof(needs_keys) / sizeof(needs_keys[0]); i++) {
		errno = 0;
		s = ps_store_create(needs_keys[i]);
		if (s || errno != EAGAIN)
			return 10 + (int)i;
	}
	errno = 0;
	if (ps_idmap_create(PS_IDMAP_RCU) || errno != EAGAIN)
		return 20;
	if (ps_qsbr_thread_online() != -EAGAIN || ps_qsbr_thread_is_online())
		return 21;
	if (PSI_LOAD_SEQ_CST(counted_allocs))
		return 22; /* a failed creation allocated something */
	/* The lock variants need no key. */
	s = ps_store_create(PS_SYNC_SPIN);
	if (!s)
		return 23;
	ps_store_destroy(s);
	/* Keys again: everything works, readers come and go. */
	pthread_key_delete(keys[--n]);
	pthread_key_delete(keys[--n]);
	s = ps_store_create(PS_SYNC_RCU);
	if (!s)
		return 30;
	if (pthread_create(&t, NULL, reader_exits, s) || pthread_join(t, NULL))
		return 31;
	if (ps_store_set(s, 0, 10, NULL) || ps_store_synchronize(s))
		return 32;
	ps_store_destroy(s);
	return 0;
}

Test(lifecycle, no_thread_keys_no_rcu_store, .timeout = 4 * HANG_S)
{
	int ret = in_child(keys_exhausted_child, NULL, HANG_S);

	cr_assert_eq(ret, 0, "child failed at step %d (negative: killed by that signal)", ret);
}

/* ---- 6d. dlclose() with a reader thread still alive --------------------------- */

struct dl_api {
	struct ps_store *(*create)(enum ps_sync sync);
	struct ps_policy *(*lookup)(struct ps_store *s, uint64_t idx);
	void (*destroy)(struct ps_store *s);
	void (*unregister)(void);
};

struct dl_reader {
	struct dl_api api;
	struct ps_store *s;
	bool unregister;
	sem_t ready, go;
};

static void *dl_reader_fn(void *arg)
{
	struct dl_reader *r = arg;

	(void)r->api.lookup(r->s, 1); /* registers with liburcu: the exit key is set */
	if (r->unregister)
		r->api.unregister();
	sem_post(&r->ready);
	while (sem_wait(&r->go))
		;
	return NULL; /* exits after the library is gone */
}

/*
 * A thread reads an RCU store of the dlopen()ed library and is still alive
 * when the library is dlclose()d; when it exits later, no destructor may
 * run in the unmapped library.  With @unregister it called
 * ps_rcu_unregister_thread() first, as polstore/rcu.h asks.  Without, it is
 * still registered (the library's keys must be gone at unload); the child
 * exits before liburcu could look at its stale registration again.
 */
static int dlclose_child(void *arg)
{
	struct dl_reader r = { .unregister = *(bool *)arg };
	void *h = dlopen(PS_TEST_SHARED_LIB, RTLD_NOW | RTLD_LOCAL);
	pthread_t t;

	if (!h)
		return 1;
	*(void **)&r.api.create = dlsym(h, "ps_store_create");
	*(void **)&r.api.lookup = dlsym(h, "ps_store_lookup");
	*(void **)&r.api.destroy = dlsym(h, "ps_store_destroy");
	*(void **)&r.api.unregister = dlsym(h, "ps_rcu_unregister_thread");
	if (!r.api.create || !r.api.lookup || !r.api.destroy || !r.api.unregister)
		return 2;
	r.s = r.api.create(PS_SYNC_RCU);
	if (!r.s)
		return 3;
	sem_init(&r.ready, 0, 0);
	sem_init(&r.go, 0, 0);
	if (pthread_create(&t, NULL, dl_reader_fn, &r))
		return 4;
	while (sem_wait(&r.ready))
		;
	r.api.destroy(r.s);
	if (dlclose(h))
		return 5;
	if (dlopen(PS_TEST_SHARED_LIB, RTLD_NOW | RTLD_NOLOAD))
		return 77; /* still mapped: nothing to check */
	sem_post(&r.go);
	if (pthread_join(t, NULL))
		return 6;
	return 0;
}

static void expect_dlclose_child(bool unregister)
{
	int ret = in_child(dlclose_child, &unregister, HANG_S);

	if (ret == 77)
		cr_skip_test("dlclose() did not unmap %s", PS_TEST_SHARED_LIB);
	cr_assert_eq(ret, 0, "child failed at step %d (negative: killed by that signal)", ret);
}

Test(lifecycle, dlclose_then_unregistered_thread_exits, .timeout = 4 * HANG_S)
{
	expect_dlclose_child(true);
}

Test(lifecycle, dlclose_then_registered_thread_exits, .timeout = 4 * HANG_S)
{
	expect_dlclose_child(false);
}

/* ---- 6a. Deferred frees need no registered writer ----------------------------- */

/*
 * liburcu's call_rcu() "must be called by registered RCU read-side
 * threads"; polstore does not use it: writers hand retired ranges to
 * polstore's reclaim thread (src/locks/rcu_reclaim.h), which needs no
 * registration.  A writer that never reads stays unregistered, its sets
 * retire several batches, and synchronize frees them all.
 */
struct quiet_writer {
	struct ps_store *s;
	struct ps_policy *a;
	int registered; /* liburcu's flag of the store's flavour after the sets */
};

static void *quiet_writer_fn(void *arg)
{
	struct quiet_writer *w = arg;
	uint64_t i;

	/* Never reads; removes enough ranges to hand several batches over. */
	for (i = 0; i < 2048; i++)
		if (ps_store_set(w->s, i, i + 1, w->a) || ps_store_set(w->s, i, i + 1, NULL))
			abort();
	w->registered = ps_store_sync_kind(w->s) == PS_SYNC_RCU_QSBR ?
					URCU_TLS(urcu_qsbr_reader).registered :
					URCU_TLS(urcu_memb_reader).registered;
	return NULL;
}

static const enum ps_sync deferring_syncs[] = { PS_SYNC_SEQLOCK, PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

SYNCS_TEST(deferring_syncs, lifecycle, writer_needs_no_registration, .timeout = 4 * HANG_S)
{
	struct quiet_writer w = { .s = ps_store_create(*sync), .a = ps_test_bind(1) };
	pthread_t t;

	cr_assert_not_null(w.s);
	cr_assert_eq(pthread_create(&t, NULL, quiet_writer_fn, &w), 0);
	cr_assert_eq(join_within(t, HANG_S), 0);
	cr_assert_not(w.registered, "%s: a writer was registered with liburcu",
			ps_sync_name(*sync));
	cr_assert_eq(ps_store_synchronize(w.s), 0);
	cr_assert_eq(ps_policy_refcount(w.a), 1, "%s: retired ranges kept their references",
			ps_sync_name(*sync));
	ps_store_destroy(w.s);
	ps_policy_put(w.a);
}

/* ---- 6b. Swapping the allocator hooks ----------------------------------------- */

/*
 * polstore/alloc.h: once ps_store_synchronize() has returned on every
 * store, the reclaim threads have nothing of polstore's left to free,
 * so the hooks can be swapped: no free through them comes from another
 * thread afterwards.  (Before it, SEQLOCK batches are still in flight.)
 */
Test(lifecycle, alloc_hooks_idle_after_synchronize, .timeout = 4 * HANG_S)
{
	static const struct ps_alloc_ops counting = {.alloc = counting_alloc, .free = counting_free};
	struct ps_store *s[2];
	struct ps_policy *a;
	long after;
	int i, k;

	counting_owner = pthread_self();
	cr_assert_eq(ps_set_alloc_ops(&counting), 0);
	a = ps_test_bind(1);
	for (k = 0; k < 2; k++) {
		s[k] = ps_store_create(PS_SYNC_SEQLOCK);
		cr_assert_not_null(s[k]);
		for (i = 0; i < 300; i++) { /* several batches of removed ranges */
			cr_assert_eq(ps_store_set(s[k], (uint64_t)i, (uint64_t)i + 1, a), 0);
			cr_assert_eq(ps_store_set(s[k], (uint64_t)i, (uint64_t)i + 1, NULL), 0);
		}
	}
	for (k = 0; k < 2; k++)
		cr_assert_eq(ps_store_synchronize(s[k]), 0);
	after = PSI_LOAD_SEQ_CST(foreign_frees);
	cr_assert_gt(after, 0, "no batch went through the call_rcu worker");
	usleep(100 * 1000);
	cr_assert_eq(PSI_LOAD_SEQ_CST(foreign_frees), after,
			"the call_rcu worker freed through the hooks after ps_store_synchronize()");
	/* Safe now: both allocators wrap malloc()/free(). */
	cr_assert_eq(ps_set_alloc_ops(NULL), 0);
	for (k = 0; k < 2; k++)
		ps_store_destroy(s[k]);
	ps_policy_put(a);
	cr_assert_eq(PSI_LOAD_SEQ_CST(foreign_frees), after);
}

/* ---- 6c. A thread waiting for a store's lock at fork() ------------------------- */

/* The variants whose writers (and SPIN/RWLOCK readers) take a lock. */
static enum ps_sync lock_syncs[] = { PS_SYNC_SPIN, PS_SYNC_RWLOCK, PS_SYNC_SEQLOCK };

struct lock_fork {
	struct ps_store *a, *b; /* @a: locked and waited for at the fork; @b: idle */
	struct ps_policy *pol;
	sem_t holding, release, waiting;
};

static int hold_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct lock_fork *f = arg;

	(void)start;
	(void)end;
	(void)pol;
	sem_post(&f->holding);
	while (sem_wait(&f->release))
		;
	return 1;
}

static void *lock_holder(void *arg)
{
	struct lock_fork *f = arg;

	ps_store_foreach(f->a, hold_cb, f); /* holds @a's lock until released */
	return NULL;
}

static void *lock_waiter(void *arg)
{
	struct lock_fork *f = arg;

	sem_post(&f->waiting);
	/*
	 * Takes the writer lock, so waits for the holder; allocates nothing
	 * (a set would, and its frozen copy's spare ranges, referenced only
	 * from a stack the child does not have, would read as leaks).
	 */
	if (ps_store_check(f->a, NULL))
		abort();
	return NULL;
}

/* docs/fork.md: stores no thread was using or waiting for work in the child. */
static int lock_fork_child(void *arg)
{
	struct lock_fork *f = arg;
	struct ps_policy *got;
	int n = 0;

	got = ps_store_lookup(f->b, 5);
	if (got != f->pol)
		return 1;
	ps_policy_put(got);
	if (ps_store_set(f->b, 0, 4, NULL) || ps_store_set(f->b, 40, 50, f->pol))
		return 2;
	if (ps_store_foreach(f->b, ps_test_count_ranges, &n) || n != 2)
		return 3;
	if (ps_store_check(f->b, NULL) || ps_store_synchronize(f->b))
		return 4;
	ps_store_destroy(f->b);
	return 0;
}

SYNCS_TEST(lock_syncs, lifecycle, lock_waiter_at_fork, .timeout = 4 * HANG_S)
{
	struct lock_fork f = { .a = ps_store_create(*sync), .b = ps_store_create(*sync),
		.pol = ps_test_bind(1) };
	pthread_t h, w;
	int ret;

	cr_assert(f.a && f.b);
	sem_init(&f.holding, 0, 0);
	sem_init(&f.release, 0, 0);
	sem_init(&f.waiting, 0, 0);
	cr_assert_eq(ps_store_set(f.a, 0, 10, f.pol), 0);
	cr_assert_eq(ps_store_set(f.b, 0, 10, f.pol), 0);
	cr_assert_eq(pthread_create(&h, NULL, lock_holder, &f), 0);
	wait_sem(&f.holding, "the holder to take the lock");
	cr_assert_eq(pthread_create(&w, NULL, lock_waiter, &f), 0);
	wait_sem(&f.waiting, "the waiter to start");
	usleep(20 * 1000); /* long enough to have yielded and claimed the next turn */
	ret = in_child(lock_fork_child, &f, HANG_S);
	cr_assert_eq(ret, 0, "%s: child failed at step %d (a negative step: killed by that signal)",
			ps_sync_name(*sync), ret);
	sem_post(&f.release);
	cr_assert_eq(join_within(h, HANG_S), 0);
	cr_assert_eq(join_within(w, HANG_S), 0);
	cr_assert_eq(ps_store_check(f.a, NULL), 0);
	ps_store_destroy(f.a);
	ps_store_destroy(f.b);
	ps_policy_put(f.pol);
}
