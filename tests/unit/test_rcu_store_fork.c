// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The RCU stores in a forked child and when an allocation fails
 * (test_rcu_store.c says how).
 */
#include "compiler.h"
#include "rcu_store_test.h"
#include "rcu_flavour.h"

/* ---- 5. fork ------------------------------------------------------------------------ */

/* A child's wait status: it exited, with 0 (else the step it failed at). */
static void expect_status_ok(int status, const char *what)
{
	cr_assert(WIFEXITED(status), "%s: child killed by signal %d (hang: alarm, or crash)", what,
			WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0, "%s: child failed at step %d", what,
			WEXITSTATUS(status));
}

static void expect_child_ok(pid_t pid, const char *what)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	expect_status_ok(status, what);
}

/* The child: sets, synchronize, destroy on a store of its own; a hang is killed by alarm(). */
static int child_work(enum ps_sync sync, struct ps_policy *p)
{
	struct ps_store *s;
	int i;

	alarm(10);
	s = ps_store_create(sync);
	if (!s)
		return 1;
	for (i = 0; i < 600; i++)
		if (ps_store_set(s, (uint64_t)i, (uint64_t)i + 1, p) ||
				ps_store_set(s, (uint64_t)i, (uint64_t)i + 1, NULL))
			return 2;
	if (ps_store_synchronize(s))
		return 3;
	if (ps_policy_refcount(p) != 1)
		return 4;
	ps_store_destroy(s);
	return 0;
}

struct online_idle {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int state;
};

/*
 * Online and running (QSBR's rule: an online thread reports quiescent
 * states and goes offline before it blocks), until the fork is over.
 */
static void *online_idle_thread(void *arg)
{
	struct online_idle *o = arg;

	TCHECK(ps_qsbr_thread_online() == 0, "online");
	ps_qsbr_quiescent();
	pthread_mutex_lock(&o->m);
	o->state = 1;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->m);
	while (PSI_LOAD_ACQUIRE(o->state) != 2) {
		ps_qsbr_quiescent();
		sched_yield();
	}
	ps_qsbr_thread_offline();
	return NULL;
}

/*
 * docs/fork.md promise 3: another thread is online (RCU_QSBR) at the fork;
 * the child may read and destroy.  Here the parent's sets had asked the
 * QSBR reclaim thread for a grace period, which waits for the online
 * thread; fork()'s prepare handler waits for that grace period
 * (gp_lock), which ends at the online thread's next quiescent state (an
 * online thread that blocked instead would break QSBR's rule and stall
 * fork as it stalls every grace period).  The online thread runs until
 * fork() returns.
 */
Test(rcu_store, fork_beside_online_qsbr_thread_with_grace_period_asked, .timeout = 20)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *p = ps_test_bind(1);
	struct online_idle o = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	pthread_t t;
	pid_t pid;

	cr_assert_eq(ps_store_set(s, 10, 20, p), 0);
	cr_assert_eq(pthread_create(&t, NULL, online_idle_thread, &o), 0);
	pthread_mutex_lock(&o.m);
	while (o.state != 1)
		pthread_cond_wait(&o.cv, &o.m);
	pthread_mutex_unlock(&o.m);
	churn(s, p, 400); /* hands records to the QSBR reclaim thread */
	usleep(20000);    /* its grace period now waits for the online thread */
	pid = fork();
	if (pid == 0) {
		struct ps_policy *got;

		alarm(10);
		got = ps_store_lookup(s, 15);
		_exit(got == p ? 0 : 1);
	}
	PSI_STORE_RELEASE(o.state, 2);
	pthread_join(t, NULL);
	expect_child_ok(pid, "online beside");
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * The forking thread itself is online (the zero-cost QSBR read path, e.g.
 * an event loop) and has set: no other application thread exists
 * (docs/fork.md case 1), but polstore's own QSBR reclaim thread is in a
 * grace period that waits for the forking thread.
 */
Test(rcu_store, fork_from_online_qsbr_thread_after_sets, .timeout = 20)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *p = ps_test_bind(1);
	pid_t pid;

	cr_assert_eq(ps_qsbr_thread_online(), 0);
	churn(s, p, 400); /* online: records go to the reclaim thread */
	usleep(20000);
	pid = fork();
	if (pid == 0) {
		ps_qsbr_thread_offline();
		/* The parent's records hold references: let them go too. */
		if (ps_store_synchronize(s))
			_exit(5);
		_exit(child_work(PS_SYNC_RCU_QSBR, p));
	}
	ps_qsbr_thread_offline();
	expect_child_ok(pid, "online forker");
	ps_store_destroy(s);
	ps_policy_put(p);
}

/*
 * A writer flat out on store A (another thread) at every fork; the child
 * uses only its own store B of the same flavour (allowed: docs/fork.md,
 * "the child may use the stores no thread was using").  B's synchronize
 * runs the reclaim queue copied from the parent, which holds A's sweep:
 * it may find A's writer lock held by the frozen writer, and must not
 * wait for it (psi_rcu_store_sweep() only tries it).
 */
struct flat_writer {
	struct ps_store *s;
	struct ps_policy *p;
	int stop; /* atomic */
};

static void *flat_writer_fn(void *arg)
{
	struct flat_writer *w = arg;
	uint64_t i = 0;

	while (!PSI_READ_ONCE(w->stop)) {
		TCHECK(ps_store_set(w->s, i % 5000, i % 5000 + 3, (i & 1) ? w->p : NULL) == 0, "set");
		i++;
	}
	return NULL;
}

RCU_TEST(fork_while_writer_flat_out_child_uses_other_store, .timeout = 120)
{
	struct flat_writer w = { ps_store_create(*sync), ps_test_bind(1), 0 };
	struct ps_policy *q = ps_test_bind(2);
	pthread_t t;
	int i, hung = 0, nforks = (int)ps_test_iters(300);
	double max_fork_s = 0;

#if defined(__SANITIZE_ADDRESS__)
	/*
	 * ASan's allocator is not fork-safe: a child forked while the writer
	 * holds its size-class lock hangs in malloc (seen: FutexWait in
	 * SizeClassAllocator64::GetFromAllocator).  Run in a plain build.
	 */
	cr_skip_test("fork beside a busy allocating thread: not under ASan");
#endif
	/*
	 * Under memcheck (--trace-children) every child reports what the
	 * writer, frozen mid-set, had allocated as lost: only its stack, which
	 * the child does not have, pointed to it.  That is the test's design
	 * (the writer is always busy), so the plain build runs it.
	 */
	if (ps_test_scale() < 0.5)
		cr_skip_test("fork beside a thread in mid-allocation: not under valgrind");

	cr_assert_eq(pthread_create(&t, NULL, flat_writer_fn, &w), 0);
	usleep(50000);
	for (i = 0; i < nforks; i++) {
		double t0 = now_s(), dt;
		pid_t pid = fork();
		int status;

		cr_assert_neq(pid, -1);
		if (pid == 0)
			_exit(child_work(*sync, q));
		dt = now_s() - t0;
		if (dt > max_fork_s)
			max_fork_s = dt;
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			hung++;
			cr_log_error("child: %s %d", WIFEXITED(status) ? "exit" : "signal",
					WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		}
		if (hung)
			break;
		usleep(1000);
	}
	PSI_WRITE_ONCE(w.stop, 1);
	pthread_join(t, NULL);
	cr_log_info("%s: longest fork() %.3f s", ps_sync_name(*sync), max_fork_s);
	cr_assert_eq(hung, 0, "fork %d: the child hung or failed (%s)", i, ps_sync_name(*sync));
	/* fork() must not wait for a writer that never stops (gp_lock is held while work remains). */
	cr_assert_lt(max_fork_s, 1.0, "fork() took %.3f s beside a busy writer", max_fork_s);
	ps_store_synchronize(w.s);
	ps_store_destroy(w.s);
	ps_policy_put(w.p);
	ps_policy_put(q);
}

/*
 * A writer of store A is inside an update at the fork: it holds A's
 * writer lock, its index nodes and record are built and not published,
 * and A's records wait in the reclaim queue the child inherits.  The
 * child's reader of A sees the last published version, its own store B
 * works, and its reclaim thread releases A's records: nothing in the
 * child may wait for what the frozen writer holds, or it hangs until
 * alarm().  The writer is held at the test point inside the update.
 */
struct update_hold {
	pthread_mutex_t m;
	pthread_cond_t cv;
	struct ps_store *s;
	struct ps_policy *p;
	int held;     /* under @m: the writer waits at the test point */
	int release;  /* under @m: it may go on */
	int stop;     /* atomic */
};

static struct update_hold *update_hold_now;

static __thread bool update_holder;

static void update_hook(enum psi_test_point point)
{
	struct update_hold *h = update_hold_now;

	if (point != PSI_TP_RCU_UPDATE_BUILT || !update_holder || !h)
		return;
	pthread_mutex_lock(&h->m);
	if (!h->release) {
		h->held = 1;
		pthread_cond_broadcast(&h->cv);
		while (!h->release)
			pthread_cond_wait(&h->cv, &h->m);
	}
	pthread_mutex_unlock(&h->m);
}

static void *update_writer(void *arg)
{
	struct update_hold *h = arg;
	uint64_t i = 0;

	update_holder = true;
	while (!PSI_READ_ONCE(h->stop)) {
		int ret = ps_store_set(h->s, i % 61, i % 61 + 3, (i & 1) ? h->p : NULL);

		TCHECK(ret == 0, "set: %d", ret);
		i++;
	}
	return NULL;
}

RCU_TEST(fork_while_writer_inside_update, .timeout = 60)
{
	struct update_hold h = { .m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	struct ps_policy *q;
	struct timespec ts;
	pthread_t w;
	pid_t pid;
	int ret = 0;

	/*
	 * The frozen writer's unpublished nodes, record and spares are lost to
	 * the child by design (docs/fork.md), which memcheck, following the
	 * child, reports as leaks; the native and sanitizer runs check the
	 * child's work.
	 */
	if (ps_test_scale() < 1)
		cr_skip_test("memcheck counts the frozen writer's memory as the child's leak");
	q = ps_test_bind(2);
	h.s = ps_store_create(*sync);
	h.p = ps_test_bind(1);
	update_hold_now = &h;
	PSI_STORE_RELEASE(psi_test_hook, update_hook);
	cr_assert_eq(pthread_create(&w, NULL, update_writer, &h), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	pthread_mutex_lock(&h.m);
	while (!h.held && ret == 0)
		ret = pthread_cond_timedwait(&h.cv, &h.m, &ts);
	pthread_mutex_unlock(&h.m);
	cr_assert(h.held, "the writer never reached the test point");
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		/* A's last published version: ranges [i % 61, i % 61 + 3) come and go, none past 64. */
		if (ps_store_lookup_node(h.s, 70, 0) != 0)
			_exit(3);
		_exit(child_work(*sync, q));
	}
	pthread_mutex_lock(&h.m);
	h.release = 1;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.m);
	expect_child_ok(pid, "child beside a writer inside an update");
	PSI_WRITE_ONCE(h.stop, 1);
	pthread_join(w, NULL);
	PSI_STORE_RELEASE(psi_test_hook, NULL);
	update_hold_now = NULL;
	ps_store_synchronize(h.s);
	ps_store_destroy(h.s);
	ps_policy_put(h.p);
	cr_assert_eq(ps_policy_refcount(q), 1);
	ps_policy_put(q);
}

/* ---- 6. allocation failure at every allocation of a set -------------------------- */

/* The store before each attempt: a failed set must leave it so (testutil.h's model). */
static struct ps_model before_set;

/*
 * For each kind of set (split, trim, cover many, victim, remove all, at
 * the top edge), fail the k-th allocation for k = 0, 1, ... until the set
 * succeeds: every failure must return -ENOMEM with the store and every
 * refcount exactly as before.  The store is fresh and synchronized first,
 * so the spare pool is small and the set must allocate.
 */
ALL_TEST(alloc_failure_every_allocation, .timeout = 300)
{
	struct ps_policy *pols[3] = { ps_test_bind(0), ps_test_bind(1), ps_test_bind(2) };
	static const uint64_t sets[][2] = {
		{ 503, 507 },        /* split */
		{ 505, 2000 },       /* trims and removals */
		{ 0, 4000 },         /* cover everything: a victim and many removals */
		{ 1000, 1010 },      /* exactly one range: victim */
		{ 0, UINT64_MAX },   /* everything, to the top */
		{ UINT64_MAX - 1, UINT64_MAX },
	};
	unsigned si;
	int pi;

	for (si = 0; si < sizeof(sets) / sizeof(sets[0]); si++) {
		for (pi = 0; pi < 2; pi++) {
			struct ps_store *s = ps_store_create(*sync);
			struct ps_policy *p = pi ? pols[2] : NULL;
			long ref[3], k;
			int i, ret = -ENOMEM;

			for (i = 0; i < 400; i++)
				cr_assert_eq(ps_store_set(s, 10 * (uint64_t)i, 10 * (uint64_t)i + 10,
						pols[i & 1]), 0);
			cr_assert_eq(ps_store_set(s, UINT64_MAX - 5, UINT64_MAX, pols[0]), 0);
			ps_store_synchronize(s);
			for (k = 0; ret == -ENOMEM; k++) {
				char why[160];

				cr_assert_eq(ps_model_read(&before_set, s), 0);
				for (i = 0; i < 3; i++)
					ref[i] = ps_policy_refcount(pols[i]);
				ps_test_alloc_fail_after(k);
				ret = ps_store_set(s, sets[si][0], sets[si][1], p);
				ps_test_alloc_restore();
				cr_assert(ret == 0 || ret == -ENOMEM, "set %u: %d", si, ret);
				if (ret)
					/* A set that failed released nothing: no grace period needed. */
					for (i = 0; i < 3; i++)
						cr_assert_eq(ps_policy_refcount(pols[i]), ref[i],
								"set %u k %ld: policy %d count changed",
								si, k, i);
				if (ret)
					cr_assert(ps_model_matches(s, &before_set, why,
								  sizeof(why)),
							"set %u k %ld: ranges changed: %s", si, k,
							why);
				cr_assert_eq(ps_store_check(s, NULL), 0);
				cr_assert_lt(k, 100000);
			}
			cr_log_info("%s set %u pol %d: succeeded after %ld failures",
					ps_sync_name(*sync), si, pi, k - 1);
			ps_store_synchronize(s);
			ps_store_destroy(s);
		}
	}
	for (pi = 0; pi < 3; pi++) {
		cr_assert_eq(ps_policy_refcount(pols[pi]), 1);
		ps_policy_put(pols[pi]);
	}
}

/*
 * Suspicion: in a child of fork(), which has no reclaim thread yet (the
 * reclaimer's barrier returns at once there when nothing is queued),
 * ps_store_synchronize() releases what a set retired while a reader of
 * the child is still inside the section that found it.  The parent keeps
 * setting, so that its store's sweep has run and waits on the reclaimer's
 * retry list, which the child inherits but no barrier looks at; the child
 * checks that nothing is queued and no thread runs, before and after its
 * set (else the parent forks again).  The child's reader borrows the
 * store's only reference to a policy and stays inside for 300 ms while
 * the child gives the range a new policy and synchronizes (a policy freed
 * under it aborts the reader, so the child).
 */
#define CHILD_NOT_STAGED 7

/* Nothing queued on the child's reclaimer and no thread: its barrier returns at once. */
static bool child_barrier_is_empty(struct psi_reclaimer *rc)
{
	return !PSI_LOAD_ACQUIRE(rc->head) && !PSI_LOAD_ACQUIRE(rc->started);
}

/* The child: a reader inside, a set and synchronize beside it; a hang is killed by alarm(). */
static int child_synchronize_beside_reader(struct ps_store *s, struct ps_policy *q,
		struct psi_reclaimer *rc)
{
	struct slow_reader r = { .s = s, .page = 0x1500 };
	pthread_t t;
	int left;

	alarm(10);
	if (!child_barrier_is_empty(rc))
		return CHILD_NOT_STAGED;
	if (sem_init(&r.inside, 0, 0) || pthread_create(&t, NULL, slow_reader_fn, &r))
		return 6; /* 1 is the sanitizers' exit status */
	while (sem_wait(&r.inside))
		;
	if (ps_store_set(s, 0x1000, 0x2000, q))
		return 2;
	if (!child_barrier_is_empty(rc))
		return CHILD_NOT_STAGED; /* the set queued the sweep: a grace period would follow */
	if (ps_store_synchronize(s))
		return 3;
	left = PSI_LOAD_SEQ_CST(r.left);
	pthread_join(t, NULL);
	if (!left)
		return 4; /* synchronize returned with the reader inside */
	return 0;
}

RCU_TEST(fork_child_synchronize_waits_for_its_readers, .timeout = 60)
{
	const struct psi_flavour *f = *sync == PS_SYNC_RCU ? &psi_flavour_memb : &psi_flavour_qsbr;
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *p = ps_test_bind(1), *q = ps_test_bind(2);
	int tries, i, status = 0;
	pid_t pid;

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 0x1000, 0x2000, p), 0);
	ps_policy_put(p); /* the store holds the only reference */
	for (tries = 0; tries < 50; tries++) {
		/* A set every millisecond for 30 ms: the sweep runs and stays on the retry list. */
		for (i = 0; i < 30; i++) {
			cr_assert_eq(ps_store_set(s, 0x3000, 0x3001, (i & 1) ? q : NULL), 0);
			usleep(1000);
		}
		pid = fork();
		cr_assert_geq(pid, 0);
		if (!pid)
			_exit(child_synchronize_beside_reader(s, q, f->reclaimer));
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_NOT_STAGED)
			break;
	}
	cr_assert_lt(tries, 50, "no child found its reclaimer's queue empty in 50 forks");
	expect_status_ok(status, "synchronize in the child beside its reader");
	ps_store_destroy(s);
	ps_policy_put(q);
}
