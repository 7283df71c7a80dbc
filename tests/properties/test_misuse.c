// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Calling contexts: every call a Context: line allows, made from there
 * (an allocator hook inside a set, a foreach callback that reads other
 * stores, nested read-side sections), and the misuses it forbids, each
 * of which must return an error or fail loudly, never hang.  A call that
 * would hang runs on a thread of its own and is given a few seconds.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
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
	int done;
};

static void *bounded_run(void *arg)
{
	struct bounded *b = arg;

	b->fn(b->arg);
	PSI_STORE_SEQ_CST(b->done, 1);
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
	while (!PSI_LOAD_SEQ_CST(b->done) && ps_test_now_ns() - t0 < HANG_NS)
		sleep_ms(1);
	if (!PSI_LOAD_SEQ_CST(b->done)) {
		pthread_detach(t);
		return false;
	}
	pthread_join(t, NULL);
	free(b);
	return true;
}


/* Run @fn for each of the @n variants in @syncs, in this one test process. */
static void for_syncs(void (*fn)(enum ps_sync *), enum ps_sync *syncs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fn(&syncs[i]);
}

/* ---- ps_store_memory() from an allocator hook, and beside a writer ---- */

static struct ps_store *hook_store;
static long hook_calls;
static int hook_block, hook_blocked;

static void *memory_hook_alloc(size_t size, void *ctx)
{
	struct ps_store *s = PSI_LOAD_ACQUIRE(hook_store);

	(void)ctx;
	if (s) {
		/* The accounting a runtime's allocator does: ask the store what it holds. */
		if (!PSI_LOAD_SEQ_CST(hook_block))
			PSI_FETCH_ADD(hook_calls, ps_store_memory(s) > 0, SEQ_CST);
		else {
			PSI_STORE_SEQ_CST(hook_blocked, 1);
			while (PSI_LOAD_SEQ_CST(hook_block))
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

	for (i = 0; i < ps_test_iters(300); i++)
		TCHECK(ps_store_set(s, (uint64_t)i * 4, (uint64_t)i * 4 + 2 + (i & 1), set_pol) == 0,
				"set");
	return NULL;
}

/* ps_store_memory() takes no lock: an allocator hook may call it inside a set of the store. */
static void memory_from_allocator_hook_one(enum ps_sync *sync);

static void memory_from_allocator_hook(void)
{
	for_syncs(memory_from_allocator_hook_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void memory_from_allocator_hook_one(enum ps_sync *sync)
{
	static const struct ps_alloc_ops ops = {.alloc = memory_hook_alloc, .free = memory_hook_free};
	struct ps_store *s;

	PSI_STORE_SEQ_CST(hook_calls, 0);
	cr_assert_eq(ps_set_alloc_ops(&ops), 0);
	set_pol = ps_test_bind(1);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	PSI_STORE_RELEASE(hook_store, s);
	cr_assert(returns_in_time(set_some, s),
			"%s: ps_store_set() hangs when the allocator calls ps_store_memory()",
			ps_sync_name(*sync));
	cr_assert_gt(PSI_LOAD_SEQ_CST(hook_calls), 0);
	PSI_STORE_RELEASE(hook_store, NULL);
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
static void memory_beside_a_set_in_progress_one(enum ps_sync *sync);

static void memory_beside_a_set_in_progress(void)
{
	for_syncs(memory_beside_a_set_in_progress_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void memory_beside_a_set_in_progress_one(enum ps_sync *sync)
{
	static const struct ps_alloc_ops ops = {.alloc = memory_hook_alloc, .free = memory_hook_free};
	struct ps_store *s;
	pthread_t w;

	cr_assert_eq(ps_set_alloc_ops(&ops), 0);
	set_pol = ps_test_bind(1);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	PSI_STORE_SEQ_CST(hook_blocked, 0);
	PSI_STORE_SEQ_CST(hook_block, 1);
	PSI_STORE_RELEASE(hook_store, s);
	cr_assert_eq(pthread_create(&w, NULL, set_some, s), 0);
	while (!PSI_LOAD_SEQ_CST(hook_blocked))
		sleep_ms(1); /* RCU variants allocate under the writer lock; the others before it */
	/* The writer is inside ps_store_set(), in the allocator, holding what it holds. */
	PSI_STORE_RELEASE(hook_store, NULL);
	cr_expect(returns_in_time(memory_of, s),
			"%s: ps_store_memory() waits for a set in progress", ps_sync_name(*sync));
	PSI_STORE_SEQ_CST(hook_block, 0);
	pthread_join(w, NULL);
	ps_store_destroy(s);
	ps_policy_put(set_pol);
	ps_set_alloc_ops(NULL);
}

/* ---- readers that read other stores, beside waiting writers ---- */

/*
 * Two readers, each inside a section of its own store (a foreach callback
 * or a read-side section), each then reading the other's store, while a
 * writer waits on each store: a writer-preferring lock that turned the
 * second reader away would deadlock the four.  With @same, one store and
 * one reader that reads it again inside its own section.
 */
enum cross_how { CROSS_FOREACH_LOOKUP, CROSS_SECTION_COPY, CROSS_SECTION_NODE, CROSS_IDMAP };

struct cross {
	enum cross_how how;
	enum ps_sync sync;
	bool same;
	struct ps_store *s[2];
	struct ps_idmap *m[2];
	struct ps_policy *pol;
	int inside, go, writers_in;
};

struct cross_reader {
	struct cross *c;
	int me;
};

static void cross_wait_go(struct cross *c)
{
	PSI_FETCH_ADD(c->inside, 1, SEQ_CST);
	while (!PSI_LOAD_SEQ_CST(c->go))
		sleep_ms(1);
}

/* The read of the other store (or of our own, @same), inside our section. */
static void cross_read_other(struct cross *c, int me)
{
	int other = c->same ? me : !me;
	struct ps_policy_view v = PS_POLICY_VIEW_INIT(1);

	switch (c->how) {
	case CROSS_FOREACH_LOOKUP:
		ps_policy_put(ps_store_lookup(c->s[other], 5));
		break;
	case CROSS_SECTION_COPY:
		TCHECK(ps_store_lookup_copy(c->s[other], 5, &v) == 1, "copy");
		break;
	case CROSS_SECTION_NODE:
		TCHECK(ps_store_lookup_node(c->s[other], 5, 0) == 1, "node");
		break;
	case CROSS_IDMAP:
		ps_idmap_read_lock(c->m[other]);
		TCHECK(ps_idmap_find(c->m[other], 0), "find");
		ps_idmap_read_unlock(c->m[other]);
		break;
	}
}

static int cross_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct cross_reader *r = arg;

	(void)start, (void)end, (void)pol;
	cross_wait_go(r->c);
	cross_read_other(r->c, r->me);
	return 1;
}

static void *cross_reader_fn(void *arg)
{
	struct cross_reader *r = arg;
	struct cross *c = r->c;

	switch (c->how) {
	case CROSS_FOREACH_LOOKUP:
		TCHECK(ps_store_foreach(c->s[r->me], cross_cb, r) == 1, "foreach");
		break;
	case CROSS_SECTION_COPY:
	case CROSS_SECTION_NODE:
		ps_store_read_lock(c->s[r->me]);
		cross_wait_go(c);
		cross_read_other(c, r->me);
		ps_store_read_unlock(c->s[r->me]);
		break;
	case CROSS_IDMAP:
		ps_idmap_read_lock(c->m[r->me]);
		cross_wait_go(c);
		cross_read_other(c, r->me);
		ps_idmap_read_unlock(c->m[r->me]);
		break;
	}
	return NULL;
}

struct cross_writer {
	struct cross *c;
	int which;
};

static void *cross_writer_fn(void *arg)
{
	struct cross_writer *w = arg;
	struct cross *c = w->c;
	int id;

	PSI_FETCH_ADD(c->writers_in, 1, SEQ_CST);
	if (c->how == CROSS_IDMAP) {
		TCHECK(ps_idmap_alloc(c->m[w->which], c, 0, PS_IDMAP_ID_MAX, &id) == 0, "alloc");
		TCHECK(ps_idmap_remove(c->m[w->which], id, NULL) == 0, "remove");
	} else {
		TCHECK(ps_store_set(c->s[w->which], 100, 200, c->pol) == 0, "set");
	}
	return NULL;
}

/* The whole scenario; returns when every thread is done. */
static void *cross_run(void *arg)
{
	struct cross *c = arg;
	int n = c->same ? 1 : 2, i;
	struct cross_reader r[2] = { { c, 0 }, { c, 1 } };
	struct cross_writer w[2] = { { c, 0 }, { c, 1 } };
	pthread_t rt[2], wt[2];

	for (i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&rt[i], NULL, cross_reader_fn, &r[i]), 0);
	while (PSI_LOAD_SEQ_CST(c->inside) < n)
		sleep_ms(1);
	for (i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&wt[i], NULL, cross_writer_fn, &w[i]), 0);
	while (PSI_LOAD_SEQ_CST(c->writers_in) < n)
		sleep_ms(1);
	sleep_ms(50); /* each writer now waits for the reader inside its store */
	PSI_STORE_SEQ_CST(c->go, 1);
	for (i = 0; i < n; i++) {
		pthread_join(rt[i], NULL);
		pthread_join(wt[i], NULL);
	}
	return NULL;
}

static void cross_check(enum ps_sync sync, enum cross_how how, bool same)
{
	struct cross *c = calloc(1, sizeof(*c)); /* left to a hung scenario's threads */
	int i, id;

	cr_assert_not_null(c);
	c->how = how;
	c->same = same;
	c->pol = ps_test_bind(1);
	for (i = 0; i < 2; i++) {
		if (how == CROSS_IDMAP) {
			c->m[i] = ps_idmap_create(sync == PS_SYNC_SPIN ? PS_IDMAP_SPIN :
					sync == PS_SYNC_RWLOCK ? PS_IDMAP_RWLOCK : PS_IDMAP_RCU);
			cr_assert_not_null(c->m[i]);
			cr_assert_eq(ps_idmap_alloc(c->m[i], c, 0, 0, &id), 0);
		} else {
			c->s[i] = ps_store_create(sync);
			cr_assert_not_null(c->s[i]);
			cr_assert_eq(ps_store_set(c->s[i], 0, 10, c->pol), 0);
		}
	}
	cr_assert(returns_in_time(cross_run, c), "%s: readers reading %s inside their sections "
			"deadlock beside waiting writers", ps_sync_name(sync),
			same ? "their own store again" : "each other's store");
	for (i = 0; i < 2; i++) {
		ps_store_destroy(c->s[i]);
		ps_idmap_destroy(c->m[i]);
	}
	ps_policy_put(c->pol);
	free(c);
}

/*
 * A foreach callback "may read other stores" (ps_foreach_fn): RWLOCK
 * readers already inside a section go past a writer that waits.  SPIN
 * readers exclude each other: that is the lock order of polstore/store.h.
 */
static enum ps_sync shared_read_syncs[] = { PS_SYNC_RWLOCK, PS_SYNC_SEQLOCK, PS_SYNC_RCU,
	PS_SYNC_RCU_QSBR };

static void foreach_callbacks_read_each_others_store_one(enum ps_sync *sync);

static void foreach_callbacks_read_each_others_store(void)
{
	for_syncs(foreach_callbacks_read_each_others_store_one, shared_read_syncs, PS_ARRAY_SIZE(shared_read_syncs));
}

static void foreach_callbacks_read_each_others_store_one(enum ps_sync *sync)
{
	cross_check(*sync, CROSS_FOREACH_LOOKUP, false);
}

static void lookup_copy_inside_each_others_section_one(enum ps_sync *sync);

static void lookup_copy_inside_each_others_section(void)
{
	for_syncs(lookup_copy_inside_each_others_section_one, shared_read_syncs, PS_ARRAY_SIZE(shared_read_syncs));
}

static void lookup_copy_inside_each_others_section_one(enum ps_sync *sync)
{
	cross_check(*sync, CROSS_SECTION_COPY, false);
	cross_check(*sync, CROSS_SECTION_NODE, false);
}

/* Sections of one RWLOCK store nest, also while a writer waits. */
static void reads_nest_in_own_section_one(enum ps_sync *sync);

static void reads_nest_in_own_section(void)
{
	for_syncs(reads_nest_in_own_section_one, shared_read_syncs, PS_ARRAY_SIZE(shared_read_syncs));
}

static void reads_nest_in_own_section_one(enum ps_sync *sync)
{
	cross_check(*sync, CROSS_FOREACH_LOOKUP, true);
	cross_check(*sync, CROSS_SECTION_COPY, true);
}

static enum ps_sync idmap_shared[] = { PS_SYNC_RWLOCK, PS_SYNC_RCU };

static void idmap_sections_read_each_others_map_one(enum ps_sync *sync);

static void idmap_sections_read_each_others_map(void)
{
	for_syncs(idmap_sections_read_each_others_map_one, idmap_shared, PS_ARRAY_SIZE(idmap_shared));
}

static void idmap_sections_read_each_others_map_one(enum ps_sync *sync)
{
	cross_check(*sync, CROSS_IDMAP, false);
	cross_check(*sync, CROSS_IDMAP, true);
}

/* ---- calls that would wait for the caller: -EDEADLK, or a message and abort() ---- */

static bool lock_based(enum ps_sync s)
{
	return s == PS_SYNC_SPIN || s == PS_SYNC_RWLOCK;
}

static bool defers(enum ps_sync s)
{
	return !lock_based(s);
}

/* Inside ps_store_read_lock(s): what each call returns, per variant. */
static void calls_inside_own_section_one(enum ps_sync *sync);

static void calls_inside_own_section(void)
{
	for_syncs(calls_inside_own_section_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void calls_inside_own_section_one(enum ps_sync *sync)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1), *got;
	struct ps_policy_view v = PS_POLICY_VIEW_INIT(1);
	const struct ps_set_op op = { 20, 30, p };
	uint64_t st, en;
	int n = 0;
	bool spin = *sync == PS_SYNC_SPIN;

	cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
	ps_store_read_lock(s);
	/* Writers take the writer lock: SPIN and RWLOCK sections hold it (or a share). */
	cr_expect_eq(ps_store_set(s, 20, 30, p), lock_based(*sync) ? -EDEADLK : 0);
	cr_expect_eq(ps_store_set_many(s, &op, 1), lock_based(*sync) ? -EDEADLK : 0);
	cr_expect_eq(ps_store_check(s, NULL), lock_based(*sync) ? -EDEADLK : 0);
	/* A grace period would wait for (RCU_QSBR: end) the caller's own section. */
	cr_expect_eq(ps_store_synchronize(s), defers(*sync) ? -EDEADLK : 0);
	/* SPIN: every call that takes the lock; RWLOCK reads nest. */
	errno = 0;
	got = ps_store_lookup(s, 5);
	cr_expect_eq(got, spin ? NULL : p);
	cr_expect_eq(errno, spin ? EDEADLK : 0);
	ps_policy_put(got);
	cr_expect_eq(ps_store_lookup_copy(s, 5, &v), spin ? -EDEADLK : 1);
	cr_expect_eq(ps_store_lookup_node(s, 5, 0), spin ? -EDEADLK : 1);
	cr_expect_eq(ps_store_next(s, 0, &st, &en, &got), spin ? -EDEADLK : 0);
	if (!spin)
		ps_policy_put(got);
	cr_expect_eq(ps_store_foreach(s, ps_test_count_ranges, &n), spin ? -EDEADLK : 0);
	cr_expect_eq(ps_store_foreach_range(s, 0, 100, ps_test_count_ranges, &n),
			spin ? -EDEADLK : 0);
	cr_expect_eq(ps_store_lookup_borrow(s, 5), p); /* what the section is for */
	ps_store_read_unlock(s);
	/* Nothing changed by the refused calls; the section is closed. */
	cr_expect_eq(ps_store_set(s, 40, 50, p), 0);
	cr_expect_eq(ps_store_check(s, NULL), 0);
	cr_expect_eq(ps_store_synchronize(s), 0);
	ps_store_destroy(s);
	cr_expect_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

struct in_walk {
	struct ps_store *s;
	struct ps_policy *p;
	int set, set_many, check, sync, walk, walk_range, lookup_errno;
};

static int calls_in_walk(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct in_walk *w = arg;
	const struct ps_set_op op = { 200, 300, w->p };
	int n = 0;

	(void)start, (void)end, (void)pol;
	w->set = ps_store_set(w->s, 100, 110, w->p);
	w->set_many = ps_store_set_many(w->s, &op, 1);
	w->check = ps_store_check(w->s, NULL);
	w->sync = ps_store_synchronize(w->s);
	w->walk = ps_store_foreach(w->s, ps_test_count_ranges, &n);
	w->walk_range = ps_store_foreach_range(w->s, 0, 10, ps_test_count_ranges, &n);
	errno = 0;
	ps_policy_put(ps_store_lookup(w->s, 5));
	w->lookup_errno = errno;
	return 1;
}

/* Inside a foreach callback of the same store. */
static void calls_inside_own_walk_one(enum ps_sync *sync);

static void calls_inside_own_walk(void)
{
	for_syncs(calls_inside_own_walk_one, ps_test_all_syncs, PS_ARRAY_SIZE(ps_test_all_syncs));
}

static void calls_inside_own_walk_one(enum ps_sync *sync)
{
	struct in_walk w = { .s = ps_store_create(*sync), .p = ps_test_bind(1) };
	/* SEQLOCK walks hold the writer lock; RWLOCK walks hold a share of it. */
	bool writer_locked = *sync != PS_SYNC_RCU && *sync != PS_SYNC_RCU_QSBR;
	bool walk_locked = *sync == PS_SYNC_SPIN || *sync == PS_SYNC_SEQLOCK;

	cr_assert_eq(ps_store_set(w.s, 0, 10, w.p), 0);
	cr_assert_eq(ps_store_foreach(w.s, calls_in_walk, &w), 1);
	cr_expect_eq(w.set, writer_locked ? -EDEADLK : 0);
	cr_expect_eq(w.set_many, writer_locked ? -EDEADLK : 0);
	cr_expect_eq(w.check, writer_locked ? -EDEADLK : 0);
	/* SEQLOCK: its lock; RCU: the walk's section; RCU_QSBR: the walk's automatic section. */
	cr_expect_eq(w.sync, defers(*sync) ? -EDEADLK : 0);
	cr_expect_eq(w.walk, walk_locked ? -EDEADLK : 0);
	cr_expect_eq(w.walk_range, walk_locked ? -EDEADLK : 0);
	cr_expect_eq(w.lookup_errno, *sync == PS_SYNC_SPIN ? EDEADLK : 0);
	cr_expect_eq(ps_store_count(w.s), writer_locked ? 1 : 3);
	ps_store_destroy(w.s);
	ps_policy_put(w.p);
}

/*
 * Misuse a void call cannot report: @fn(@arg), run in a forked child, must
 * die of SIGABRT within HANG_NS with a message on stderr that names @call
 * (the polstore call) and contains @what.
 */
static void expect_abort(void (*fn)(void *), void *arg, const char *call, const char *what)
{
	char buf[2048];
	double secs;
	int sig = ps_test_run_child(fn, arg, HANG_NS / 1000000000ULL + 2, buf, sizeof(buf), &secs);

	cr_expect_eq(sig, SIGABRT, "%s (%s): the child %s", call, what,
			sig == SIGALRM ? "hung" : sig ? "died of another signal" : "returned");
	cr_expect_lt(secs, (double)HANG_NS / 1e9, "%s: no abort within the bound", call);
	cr_expect(strstr(buf, call) && strstr(buf, what), "%s: message \"%s\" lacks \"%s\"",
			call, buf, what);
}

static void spin_nested_section(void *arg)
{
	struct ps_store *s = ps_store_create(PS_SYNC_SPIN);

	(void)arg;
	ps_store_read_lock(s);
	ps_store_read_lock(s);
}

static void destroy_in_section(void *arg)
{
	struct ps_store *s = ps_store_create(*(enum ps_sync *)arg);

	ps_store_read_lock(s);
	ps_store_destroy(s);
}

static void spin_map_nested_section(void *arg)
{
	struct ps_idmap *m = ps_idmap_create(PS_IDMAP_SPIN);

	(void)arg;
	ps_idmap_read_lock(m);
	ps_idmap_read_lock(m);
}

/*
 * A SPIN section opened inside one of the same store (or id map) never
 * returns; a destroy inside its own section frees the lock the section
 * holds (SPIN, RWLOCK), or may wait for a grace period that waits for the
 * caller (SEQLOCK, RCU, RCU_QSBR).  Each prints what was called on what
 * and aborts.
 */
Test(misuse, void_calls_that_would_hang_abort, .timeout = 60)
{
	size_t i;

	expect_abort(spin_nested_section, NULL, "ps_store_read_lock()", "spin store 0x");
	for (i = 0; i < PS_SYNC_COUNT; i++) {
		char what[32];

		snprintf(what, sizeof(what), "%s store 0x", ps_sync_name(ps_test_all_syncs[i]));
		expect_abort(destroy_in_section, &ps_test_all_syncs[i], "ps_store_destroy()", what);
	}
	expect_abort(spin_map_nested_section, NULL, "ps_idmap_read_lock()", "spin id map 0x");
}

/*
 * A read unlock with no section of the store open on the thread (never
 * locked, or unlocked twice), without the checking mode: refused with a
 * message naming polstore, the call and the store, before it touches the
 * lock.  RCU_QSBR: on an offline thread (an online one is in a section
 * already).  The set after it would wait for ever on an RWLOCK store whose
 * reader count went below zero.
 */
static void stray_unlock(void *arg)
{
	enum ps_sync sync = *(enum ps_sync *)arg;
	struct ps_store *s = ps_store_create(sync);
	struct ps_policy *p = ps_test_bind(0);

	if (!s || ps_store_set(s, 0, 10, p))
		abort();
	ps_store_read_unlock(s);
	ps_store_set(s, 0, 5, NULL);
	fprintf(stderr, "the stray unlock went through\n");
}

static void unlock_twice_unchecked(void *arg)
{
	enum ps_sync sync = *(enum ps_sync *)arg;
	struct ps_store *s = ps_store_create(sync);

	if (!s)
		abort();
	ps_store_read_lock(s);
	if (!ps_store_lookup_borrow(s, 5) && errno == EINVAL)
		abort();
	ps_store_read_unlock(s);
	ps_store_read_unlock(s);
	ps_store_set(s, 0, 5, NULL);
	fprintf(stderr, "the second unlock went through\n");
}

static int stray_in;

static void *stray_lock_and_stay(void *arg)
{
	ps_store_read_lock(arg);
	PSI_STORE_SEQ_CST(stray_in, 1);
	for (;;)
		sleep_ms(100);
	return NULL;
}

/* Locked by another thread: this thread holds nothing (SPIN, RWLOCK: the record says so). */
static void unlock_other_threads_section(void *arg)
{
	struct ps_store *s = ps_store_create(*(enum ps_sync *)arg);
	pthread_t t;

	if (!s || pthread_create(&t, NULL, stray_lock_and_stay, s))
		abort();
	while (!PSI_LOAD_SEQ_CST(stray_in))
		sleep_ms(1);
	ps_store_read_unlock(s);
}

static void unlock_on_another_thread_unchecked_one(enum ps_sync *sync)
{
	expect_abort(unlock_other_threads_section, sync, "ps_store_read_unlock()",
			"no read-side section");
}

/* A variant's flavour section closed twice, then a grace period of it. */
static void sync_unlock_twice(void *arg)
{
	enum ps_sync sync = *(enum ps_sync *)arg;
	struct ps_store *s = ps_store_create(sync);

	if (!s || ps_sync_read_lock(sync))
		abort();
	ps_sync_read_unlock(sync);
	ps_sync_read_unlock(sync);
	ps_store_synchronize(s);
	ps_store_destroy(s);
	fprintf(stderr, "the second unlock went through\n");
}

Test(misuse, stray_sync_read_unlock_aborts, .timeout = 120)
{
	size_t i;

	for (i = 0; i < PS_SYNC_COUNT; i++)
		expect_abort(sync_unlock_twice, &ps_test_all_syncs[i], "polstore: ps_sync_read_unlock()",
				ps_sync_name(ps_test_all_syncs[i]));
}

Test(misuse, stray_read_unlock_aborts, .timeout = 120)
{
	static enum ps_sync lock_syncs[] = { PS_SYNC_SPIN, PS_SYNC_RWLOCK };
	size_t i;

	for (i = 0; i < PS_SYNC_COUNT; i++) {
		char what[64];

		snprintf(what, sizeof(what), "%s store 0x", ps_sync_name(ps_test_all_syncs[i]));
		expect_abort(stray_unlock, &ps_test_all_syncs[i], "polstore: ps_store_read_unlock()",
				what);
		expect_abort(unlock_twice_unchecked, &ps_test_all_syncs[i],
				"polstore: ps_store_read_unlock()", "no read-side section");
	}
	for_syncs(unlock_on_another_thread_unchecked_one, lock_syncs, PS_ARRAY_SIZE(lock_syncs));
}

/* Id maps: SPIN and RWLOCK writers inside the map's own section. */
static void idmap_writers_inside_own_section(void)
{
	static const enum ps_idmap_sync lock_maps[] = { PS_IDMAP_SPIN, PS_IDMAP_RWLOCK };
	size_t i;

	for (i = 0; i < PS_ARRAY_SIZE(lock_maps); i++) {
		struct ps_idmap *m = ps_idmap_create(lock_maps[i]);
		int id, x;
		void *old;

		cr_assert_eq(ps_idmap_alloc(m, &x, 0, 10, &id), 0);
		ps_idmap_read_lock(m);
		cr_expect_eq(ps_idmap_alloc(m, &x, 0, 10, &id), -EDEADLK);
		cr_expect_eq(ps_idmap_replace(m, 0, &x, &old), -EDEADLK);
		cr_expect_eq(ps_idmap_remove(m, 0, &old), -EDEADLK);
		cr_expect_eq(ps_idmap_find(m, 0), &x);
		ps_idmap_read_unlock(m);
		cr_expect_eq(ps_idmap_count(m), 1);
		cr_expect_eq(ps_idmap_remove(m, 0, &old), 0);
		ps_idmap_destroy(m);
	}
}

/*
 * pthread_create() that fails on demand (the library is linked statically
 * into this binary, so its calls come here): no reclaim thread can start.
 */
static int fail_thread_create;

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

	if (PSI_LOAD_SEQ_CST(fail_thread_create))
		return EAGAIN;
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	return real(t, attr, fn, arg);
}

/*
 * A SEQLOCK set inside a memb read-side section (its own store's too)
 * never waits: with no reclaim thread to take a full batch, it keeps the
 * batch for a later set or ps_store_synchronize() rather than wait for a
 * grace period that would wait for the caller.
 */
Test(misuse, seqlock_set_inside_section_without_reclaim_thread, .timeout = 120)
{
	struct ps_store *s = ps_store_create(PS_SYNC_SEQLOCK);
	struct ps_policy *p = ps_test_bind(1);
	int i;

	PSI_STORE_SEQ_CST(fail_thread_create, 1);
	ps_store_read_lock(s);
	for (i = 0; i < 400; i++) {
		cr_assert_eq(ps_store_set(s, 0, 10, p), 0);
		cr_assert_eq(ps_store_set(s, 0, 10, NULL), 0);
	}
	cr_expect_eq(ps_store_lookup_borrow(s, 5), NULL);
	ps_store_read_unlock(s);
	cr_assert_gt(ps_policy_refcount(p), 1, "the removed ranges were freed in the section");
	cr_assert_eq(ps_store_synchronize(s), 0);
	cr_expect_eq(ps_policy_refcount(p), 1);
	ps_store_destroy(s);
	PSI_STORE_SEQ_CST(fail_thread_create, 0);
	ps_policy_put(p);
}

/* ---- what RCU walks and sections do not hold back ---- */

struct walk_gate {
	struct ps_store *s;
	int in, release;
};

static int wait_in_walk(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walk_gate *g = arg;

	(void)start, (void)end, (void)pol;
	PSI_STORE_SEQ_CST(g->in, 1);
	while (!PSI_LOAD_SEQ_CST(g->release))
		sleep_ms(1);
	return 1;
}

static void *gate_walker(void *arg)
{
	struct walk_gate *g = arg;

	TCHECK(ps_store_foreach(g->s, wait_in_walk, g) == 1, "walk");
	return NULL;
}

static void *set_once(void *arg)
{
	TCHECK(ps_store_set(arg, 20, 30, NULL) == 0, "set");
	return NULL;
}

/*
 * RCU and RCU_QSBR sets do not wait for a walk in progress (it goes on in
 * its snapshot): a set from another thread returns while the walk's
 * callback is still running.  And sections of one store nest.
 */
static enum ps_sync rcu_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

static void rcu_walks_hold_back_no_set_one(enum ps_sync *sync);

static void rcu_walks_hold_back_no_set(void)
{
	for_syncs(rcu_walks_hold_back_no_set_one, rcu_syncs, PS_ARRAY_SIZE(rcu_syncs));
}

static void rcu_walks_hold_back_no_set_one(enum ps_sync *sync)
{
	struct walk_gate g = { .s = ps_store_create(*sync) };
	struct ps_policy *p = ps_test_bind(1);
	pthread_t t;

	cr_assert_eq(ps_store_set(g.s, 0, 10, p), 0);
	cr_assert_eq(ps_store_set(g.s, 20, 30, p), 0);
	cr_assert_eq(pthread_create(&t, NULL, gate_walker, &g), 0);
	while (!PSI_LOAD_SEQ_CST(g.in))
		sleep_ms(1);
	cr_expect(returns_in_time(set_once, g.s), "%s: a set waited for a walk",
			ps_sync_name(*sync));
	cr_expect_eq(ps_store_count(g.s), 1);
	/* Sections nest, on one store. */
	ps_store_read_lock(g.s);
	ps_store_read_lock(g.s);
	cr_expect_eq(ps_store_lookup_borrow(g.s, 5), p);
	ps_store_read_unlock(g.s);
	cr_expect_eq(ps_store_lookup_borrow(g.s, 5), p);
	ps_store_read_unlock(g.s);
	PSI_STORE_SEQ_CST(g.release, 1);
	pthread_join(t, NULL);
	ps_store_destroy(g.s);
	ps_policy_put(p);
}

/* One test process for these (each Criterion test is a process of its own: valgrind starts each). */
Test(misuse, memory_accounting_never_waits, .timeout = 300)
{
	memory_from_allocator_hook();
	memory_beside_a_set_in_progress();
}

/*
 * The policies bind node 1, which ps_store_lookup_node() names only where
 * the topology in force has it: two nodes, whatever this machine has.
 */
static void two_nodes(void)
{
	static const unsigned char dist[4] = { 10, 20, 20, 10 };

	cr_assert_eq(ps_numa_set_topology(2, dist, NULL), 0);
}

Test(misuse, readers_of_other_stores, .timeout = 300)
{
	two_nodes();
	foreach_callbacks_read_each_others_store();
	lookup_copy_inside_each_others_section();
	reads_nest_in_own_section();
	idmap_sections_read_each_others_map();
	rcu_walks_hold_back_no_set();
}

Test(misuse, calls_inside_own_sections, .timeout = 300)
{
	two_nodes();
	calls_inside_own_section();
	calls_inside_own_walk();
	idmap_writers_inside_own_section();
}
