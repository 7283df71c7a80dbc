// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The readers' lookup cache of the RCU stores (polstore/static/lcache.h):
 * a thread's entry, kept across sections, never answers for a version of
 * the store other than the one it was filled at, nor for another store:
 * after a set, after a destroy (deferred or not) and a new store where the
 * old one was, in a forked child, and in a thread after others exited.
 * Every lookup form is asked (test_rcu_store.c says how the suite is built).
 */
#include <polstore/static/lcache.h>

#include "compiler.h"
#include "rcu_store_test.h"

/* The forms of a lookup, each answering the policy at @idx (or NULL). */
enum lc_form { LC_COUNTED, LC_BORROWED, LC_NODE, LC_FORMS };

static const char *const lc_form_name[] = { "counted", "borrowed", "node" };

/*
 * What a lookup of @idx through @form answers: the policy, or for LC_NODE
 * the node (the policies here are bound: each places on its own node;
 * a gap answers the local node, 0, which no policy here binds).
 */
static intptr_t lc_lookup(struct ps_store *s, uint64_t idx, enum lc_form form)
{
	const struct ps_policy *pol;

	switch (form) {
	case LC_COUNTED:
		pol = ps_store_lookup(s, idx);
		ps_policy_put((struct ps_policy *)pol);
		return (intptr_t)pol;
	case LC_BORROWED:
		ps_store_read_lock(s);
		pol = ps_store_lookup_borrow(s, idx);
		ps_store_read_unlock(s);
		return (intptr_t)pol;
	default:
		return ps_store_lookup_node(s, idx, 0);
	}
}

/* What lc_lookup() answers when @idx holds @want (NULL: a gap). */
static intptr_t lc_want(const struct ps_policy *want, uint64_t idx, enum lc_form form)
{
	if (form != LC_NODE)
		return (intptr_t)want;
	return want ? ps_policy_node(want, idx, 0) : 0;
}

static void lc_expect(struct ps_store *s, uint64_t idx, enum lc_form form,
		const struct ps_policy *want, const char *after)
{
	const char *why = NULL;
	int i;

	/* Twice: the first may fill the entry, the second is answered from it. */
	for (i = 0; i < 2; i++)
		cr_assert_eq(lc_lookup(s, idx, form), lc_want(want, idx, form),
				"%s lookup of %" PRIu64 " %s: an old answer (lookup %d)",
				lc_form_name[form], idx, after, i + 1);
	cr_assert_eq(ps_store_check(s, &why), 0, "check %s: %s", after, why ? why : "");
}

/*
 * A set that gives the cached range a new policy (in place in the index),
 * one that splits it, and one that removes it: the next lookup of the same
 * key answers the new version.  The policies are bound to distinct nodes
 * so that the node form tells them apart too.
 */
RCU_TEST(lcache_set_is_seen_by_next_lookup)
{
	struct ps_policy *p1 = ps_test_bind(1), *p2 = ps_test_bind(2), *p3 = ps_test_bind(3);
	enum lc_form form;

	ps_test_eight_nodes();
	for (form = 0; form < LC_FORMS; form++) {
		struct ps_store *s = ps_store_create(*sync);

		cr_assert_not_null(s);
		cr_assert_eq(ps_store_set(s, 0, 100, p1), 0);
		lc_expect(s, 50, form, p1, "after the first set");
		cr_assert_eq(ps_store_set(s, 0, 100, p2), 0);
		lc_expect(s, 50, form, p2, "after a new policy for the range");
		cr_assert_eq(ps_store_set(s, 40, 60, p3), 0);
		lc_expect(s, 50, form, p3, "after a split");
		lc_expect(s, 10, form, p2, "after a split, left of it");
		cr_assert_eq(ps_store_set(s, 0, 100, NULL), 0);
		lc_expect(s, 50, form, NULL, "after a removal");
		ps_store_destroy(s);
	}
	ps_policy_put(p1);
	ps_policy_put(p2);
	ps_policy_put(p3);
}

/*
 * @s, with ranges [0, 100) @a, [100, 200) @b and [300, 400) @a, and the
 * calling thread's entry for it filled with [100, 200) through @form.
 */
static void lc_three(struct ps_store *s, enum lc_form form, struct ps_policy *a,
		struct ps_policy *b)
{
	struct ps_set_op ops[3] = { { 0, 100, a }, { 100, 200, b }, { 300, 400, a } };

	cr_assert_eq(ps_store_set(s, 0, 1000, NULL), 0);
	cr_assert_eq(ps_store_set_many(s, ops, 3), 0);
	lc_expect(s, 150, form, b, "after the batch that made the three ranges");
}

/*
 * What each kind of change does to the cached range [100, 200): a batch
 * whose middle op gives it a new policy, one that removes it and one that
 * changes only other ranges; a set over a window of several ranges that
 * covers it, one that covers half of it, and a removal in a hole.  The
 * next lookup of a key in it answers the new version, and each change
 * raises the store's generation by one.
 */
RCU_TEST(lcache_batch_window_and_removal_are_seen)
{
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2), *c = ps_test_bind(3);
	enum lc_form form;

	ps_test_eight_nodes();
	for (form = 0; form < LC_FORMS; form++) {
		struct ps_set_op renew[3] = { { 0, 50, c }, { 120, 180, c }, { 350, 360, c } };
		struct ps_set_op drop[2] = { { 0, 10, c }, { 100, 200, NULL } };
		struct ps_set_op other[2] = { { 0, 100, c }, { 300, 400, b } };
		struct ps_store *s = ps_store_create(*sync);
		uint64_t gen;

		cr_assert_not_null(s);
		lc_three(s, form, a, b);
		gen = ps_store_generation(s);
		cr_assert_eq(ps_store_set_many(s, renew, 3), 0);
		cr_assert_eq(ps_store_generation(s), gen + 1, "a batch is one generation");
		lc_expect(s, 150, form, c, "after a batch that set part of the range");
		lc_expect(s, 110, form, b, "after a batch, left of its op");

		lc_three(s, form, a, b);
		cr_assert_eq(ps_store_set_many(s, drop, 2), 0);
		lc_expect(s, 150, form, NULL, "after a batch that removed the range");

		lc_three(s, form, a, b);
		cr_assert_eq(ps_store_set_many(s, other, 2), 0);
		lc_expect(s, 150, form, b, "after a batch of other ranges");
		lc_expect(s, 50, form, c, "after a batch of other ranges, its own op");

		lc_three(s, form, a, b);
		cr_assert_eq(ps_store_set(s, 50, 350, c), 0);
		lc_expect(s, 150, form, c, "after a set over a window of three ranges");

		lc_three(s, form, a, b);
		cr_assert_eq(ps_store_set(s, 150, 250, NULL), 0);
		lc_expect(s, 150, form, NULL, "after a removal of half of the range");
		lc_expect(s, 149, form, b, "after a removal of half of the range, left of it");

		lc_three(s, form, a, b);
		gen = ps_store_generation(s);
		cr_assert_eq(ps_store_set(s, 220, 280, NULL), 0);
		cr_assert_eq(ps_store_generation(s), gen + 1, "a removal in a hole counts");
		lc_expect(s, 150, form, b, "after a removal in a hole");
		cr_assert_eq(ps_store_set(s, 100, 200, c), 0);
		lc_expect(s, 150, form, c, "after a removal in a hole and a set");
		ps_store_destroy(s);
	}
	ps_policy_put(a);
	ps_policy_put(b);
	ps_policy_put(c);
}

/* Wait until the reclaim thread of @sync has nothing queued (a deferred destroy done). */
static void lc_wait_reclaimed(enum ps_sync sync)
{
	size_t pending = 1;
	int i;

	for (i = 0; i < 2000 && pending; i++) {
		cr_assert_eq(ps_test_reclaim_stats(sync, NULL, &pending, NULL, false), 0);
		if (pending)
			usleep(1000);
	}
}

/*
 * Store after store at one address (the allocator hands the freed block
 * back), each with one set, so that each holds the same count when looked
 * up: only the id tells a new store from the one an entry was filled for.
 */
static void lc_reuse(enum ps_sync sync, bool deferred)
{
	struct ps_policy *p[2] = { ps_test_bind(1), ps_test_bind(2) };
	struct ps_store *last = NULL;
	enum lc_form form;
	int i, reused = 0;

	ps_test_eight_nodes();
	for (form = 0; form < LC_FORMS; form++) {
		for (i = 0; i < 8; i++) {
			struct ps_store *s = ps_store_create(sync);

			cr_assert_not_null(s);
			reused += s == last;
			cr_assert_eq(ps_store_set(s, 0, 100, p[i & 1]), 0);
			lc_expect(s, 50, form, p[i & 1], "in a new store");
			if (deferred) {
				cr_assert_eq(ps_store_destroy_deferred(s), 0);
				lc_wait_reclaimed(sync);
			} else {
				ps_store_destroy(s);
			}
			last = s;
		}
	}
	cr_log_info("%s: %d of %d stores where the last one was", ps_sync_name(sync), reused,
			8 * LC_FORMS);
	cr_assert_eq(ps_policy_refcount(p[0]), 1);
	cr_assert_eq(ps_policy_refcount(p[1]), 1);
	ps_policy_put(p[0]);
	ps_policy_put(p[1]);
}

RCU_TEST(lcache_new_store_where_one_was_destroyed)
{
	lc_reuse(*sync, false);
}

RCU_TEST(lcache_new_store_where_one_was_destroyed_deferred, .timeout = 60)
{
	lc_reuse(*sync, true);
}

/*
 * A forked child inherits the thread's entries with the stores: its first
 * lookup may answer from them (its copy of the store is at that version),
 * and after its own set it answers the new one; the child's set is not
 * the parent's, whose own set after it it answers.
 */
RCU_TEST(lcache_fork_child_and_parent_see_their_own_sets, .timeout = 30)
{
	struct ps_policy *p1 = ps_test_bind(1), *p2 = ps_test_bind(2), *p3 = ps_test_bind(3);
	enum lc_form form;

	ps_test_eight_nodes();
	for (form = 0; form < LC_FORMS; form++) {
		struct ps_store *s = ps_store_create(*sync);
		int status;
		pid_t pid;

		cr_assert_not_null(s);
		cr_assert_eq(ps_store_set(s, 0, 100, p1), 0);
		lc_expect(s, 50, form, p1, "before the fork");
		pid = fork();
		cr_assert_geq(pid, 0);
		if (!pid) {
			alarm(10);
			if (lc_lookup(s, 50, form) != lc_want(p1, 50, form))
				_exit(1);
			if (ps_store_set(s, 0, 100, p2))
				_exit(2);
			if (lc_lookup(s, 50, form) != lc_want(p2, 50, form) ||
					lc_lookup(s, 50, form) != lc_want(p2, 50, form))
				_exit(3);
			_exit(0);
		}
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
				"%s: the child failed at step %d (1: its inherited answer, 3: an "
				"old answer after its set)",
				lc_form_name[form], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		lc_expect(s, 50, form, p1, "after the fork, in the parent");
		cr_assert_eq(ps_store_set(s, 0, 100, p3), 0);
		lc_expect(s, 50, form, p3, "after the fork, in the parent");
		ps_store_destroy(s);
	}
	ps_policy_put(p1);
	ps_policy_put(p2);
	ps_policy_put(p3);
}

struct lc_thread {
	struct ps_store *s;
	const struct ps_policy *want;
	enum lc_form form;
	bool ok;
};

static void *lc_thread_fn(void *arg)
{
	struct lc_thread *t = arg;

	intptr_t want = lc_want(t->want, 50, t->form);

	t->ok = lc_lookup(t->s, 50, t->form) == want && lc_lookup(t->s, 50, t->form) == want;
	return NULL;
}

/*
 * Threads that filled their entries and exited leave nothing behind: a
 * thread started after a set (its stack, and the thread-local storage on
 * it, most likely an exited one's) answers the new version, and so does
 * one after a new store took the old one's place.
 */
RCU_TEST(lcache_thread_after_exited_ones_answers_current)
{
	struct ps_policy *p[2] = { ps_test_bind(1), ps_test_bind(2) };
	enum lc_form form;
	int i;

	ps_test_eight_nodes();
	for (form = 0; form < LC_FORMS; form++) {
		struct lc_thread t = { ps_store_create(*sync), NULL, form, false };

		cr_assert_not_null(t.s);
		for (i = 0; i < 8; i++) {
			pthread_t th;

			if (i == 4) {
				ps_store_destroy(t.s);
				t.s = ps_store_create(*sync);
				cr_assert_not_null(t.s);
			}
			cr_assert_eq(ps_store_set(t.s, 0, 100, p[i & 1]), 0);
			t.want = p[i & 1];
			cr_assert_eq(pthread_create(&th, NULL, lc_thread_fn, &t), 0);
			pthread_join(th, NULL);
			cr_assert(t.ok, "%s, thread %d: an old answer", lc_form_name[form], i);
		}
		ps_store_destroy(t.s);
	}
	ps_policy_put(p[0]);
	ps_policy_put(p[1]);
}

/*
 * One reader looks one key up again and again while the writer gives its
 * range policy after policy, announcing each after its set returned and
 * waiting until the reader has judged a lookup begun after it: the reader
 * never answers a policy older than the one announced before its lookup
 * began (a lookup linearizes inside its call).
 */
struct lc_race {
	struct ps_store *s;
	struct ps_policy *p[4];
	int done;      /* atomic */
	int announced; /* atomic: the set that returned last */
	int seen;      /* atomic: the announcement before the reader's last judged lookup */
	int stale;
};

static void *lc_race_reader(void *arg)
{
	struct lc_race *r = arg;
	bool vg = ps_test_on_valgrind();

	while (!PSI_LOAD_ACQUIRE(r->done)) {
		int k = PSI_LOAD_ACQUIRE(r->announced), k2, j;
		struct ps_policy *pol = ps_store_lookup(r->s, 50);

		k2 = PSI_LOAD_ACQUIRE(r->announced);
		for (j = 0; j < 4 && pol != r->p[j]; j++)
			;
		ps_policy_put(pol);
		/* Set i gave policy i & 3: set k's, or set k + 1's (published, not announced). */
		if (k2 != k)
			continue;
		r->stale += j != (k & 3) && j != ((k + 1) & 3);
		PSI_STORE_RELEASE(r->seen, k);
		/* valgrind runs one thread at a time and may hand its lock back to this loop for ever. */
		if (vg)
			sched_yield();
	}
	return NULL;
}

RCU_TEST(lcache_hot_key_beside_a_writer_is_never_stale, .timeout = 240)
{
	struct lc_race r = { ps_store_create(*sync), { NULL }, 0, 0, -1, 0 };
	int i, n = (int)ps_test_iters(4000);
	pthread_t th;

	ps_test_eight_nodes();
	cr_assert_not_null(r.s);
	for (i = 0; i < 4; i++)
		r.p[i] = ps_test_bind(i + 1);
	cr_assert_eq(ps_store_set(r.s, 0, 100, r.p[0]), 0);
	cr_assert_eq(pthread_create(&th, NULL, lc_race_reader, &r), 0);
	for (i = 1; i <= n; i++) {
		cr_assert_eq(ps_store_set(r.s, 0, 100, r.p[i & 3]), 0);
		PSI_STORE_RELEASE(r.announced, i);
		while (PSI_LOAD_ACQUIRE(r.seen) < i)
			sched_yield();
	}
	PSI_STORE_RELEASE(r.done, 1);
	pthread_join(th, NULL);
	cr_assert_eq(r.stale, 0, "%d lookups answered a policy older than the last set's",
			r.stale);
	ps_store_destroy(r.s);
	for (i = 0; i < 4; i++)
		ps_policy_put(r.p[i]);
}

/* The store a signal handler looks up, and how often it ran. */
static struct ps_store *lc_sig_store;
static volatile sig_atomic_t lc_sig_runs;

static void lc_sig_lookup(int sig)
{
	(void)sig;
	(void)ps_store_lookup_node(lc_sig_store, 1050, 0);
	lc_sig_runs++;
}

struct lc_kick {
	pthread_t target;
	int stop; /* atomic */
};

/* Signals the target thread, a pause between signals, until told to stop. */
static void *lc_kicker(void *arg)
{
	struct lc_kick *k = arg;
	int i;

	while (!PSI_LOAD_ACQUIRE(k->stop)) {
		pthread_kill(k->target, SIGUSR1);
		if (ps_test_on_valgrind())
			sched_yield();
		for (i = 0; i < 200 && !PSI_LOAD_ACQUIRE(k->stop); i++)
			psi_cpu_relax();
	}
	return NULL;
}

/*
 * A signal handler that looks up on the thread (ps_store_lookup_node() is
 * async-signal-safe) between any two stores of a fill.  Stores A and B
 * share a way of the thread's cache; the thread fills it with A's range
 * [0, 100) and B's [0, 100) in turn, each lookup a miss, while the handler
 * looks up B's [1000, 1100).  A handler's fill inside A's must not leave
 * B's id and count over A's range and policy: B's next lookup of 50 would
 * answer A's policy.  Under valgrind, whose signals arrive between
 * blocks only, a short run: the handler's lookups are checked, not the race.
 */
RCU_TEST(lcache_fill_interrupted_by_a_handler_lookup, .timeout = 240)
{
	struct ps_policy *pa = ps_test_bind(1), *pb = ps_test_bind(2), *pb2 = ps_test_bind(3);
	struct ps_store *a = ps_store_create(*sync), *b = NULL, *spare[64];
	struct sigaction sa = { .sa_handler = lc_sig_lookup }, old;
	struct lc_kick k = { .target = pthread_self() };
	long i, n = ps_test_on_valgrind() ? 10000 : 4000000, wrong = 0;
	int ns = 0, form;
	pthread_t th;

	ps_test_eight_nodes();
	cr_assert_not_null(a);
	/* A store in A's way: one of the next few. */
	while (!b && ns < 64) {
		struct ps_store *t = ps_store_create(*sync);

		cr_assert_not_null(t);
		if (_ps_lc_way(t) == _ps_lc_way(a))
			b = t;
		else
			spare[ns++] = t;
	}
	cr_assert_not_null(b, "no store shares a way with the first");
	cr_assert_eq(ps_store_set(a, 0, 100, pa), 0);
	cr_assert_eq(ps_store_set(b, 0, 100, pb), 0);
	cr_assert_eq(ps_store_set(b, 1000, 1100, pb2), 0);
	/* The handler's flavour is registered on this thread before any signal. */
	cr_assert_eq(ps_store_lookup_node(b, 1050, 0), ps_policy_node(pb2, 1050, 0));
	lc_sig_store = b;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
	cr_assert_eq(pthread_create(&th, NULL, lc_kicker, &k), 0);
	/* Under valgrind, until a handler ran too (its one thread at a time yields to the kicker). */
	for (i = 0; (i < n || !lc_sig_runs) && i < 100 * n && !wrong; i++) {
		form = (int)(i % LC_FORMS);
		(void)lc_lookup(a, 50, (enum lc_form)form);
		wrong += lc_lookup(b, 50, (enum lc_form)form) != lc_want(pb, 50, (enum lc_form)form);
		if (ps_test_on_valgrind() && i % 64 == 0)
			sched_yield();
	}
	PSI_STORE_RELEASE(k.stop, 1);
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(sigaction(SIGUSR1, &old, NULL), 0);
	cr_assert_eq(wrong, 0, "a lookup of B answered A's policy, after %ld lookups and %d signals",
			i, (int)lc_sig_runs);
	cr_assert_gt(lc_sig_runs, 0);
	ps_store_destroy(a);
	ps_store_destroy(b);
	while (ns)
		ps_store_destroy(spare[--ns]);
	ps_policy_put(pa);
	ps_policy_put(pb);
	ps_policy_put(pb2);
}
