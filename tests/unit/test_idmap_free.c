// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * ps_idmap's deferred frees: after a grace period, never waiting for
 * readers, barriers, batches handed over or run without a reclaim thread,
 * frees queued by frees, threads that end inside a free function or a
 * barrier.
 */
#include "compiler.h"
#include "idmap_test.h"

/* ---- Deferred frees -------------------------------------------------------- */

static int freed, freed_elsewhere;

static pthread_t freeing_thread;

/* Counts the frees and those run on another thread than the test's. */
static void count_free(void *p)
{
	freed++;
	if (!pthread_equal(pthread_self(), freeing_thread))
		freed_elsewhere++;
	free(p);
}

IDMAP_TEST(idmap, free_rcu)
{
	struct ps_idmap *map = mk(*sync);
	void *old;
	int i, id, n = 3 * PS_IDMAP_FREE_BATCH + 5;

	freed = 0;
	freed_elsewhere = 0;
	freeing_thread = pthread_self();
	for (i = 0; i < n; i++) {
		cr_assert_eq(ps_idmap_alloc(map, malloc(16), 0, INT_MAX, &id), 0);
		cr_assert_eq(ps_idmap_remove(map, id, &old), 0);
		cr_assert_eq(ps_idmap_free_rcu(map, old, count_free), 0);
	}
	if (*sync == PS_IDMAP_RCU)
		/* Full batches ran in later calls once their grace period passed; the rest waits. */
		cr_assert_leq(freed, 3 * PS_IDMAP_FREE_BATCH, "a free not yet queued a batch ran");
	else
		cr_assert_eq(freed, n, "lock variants free at once");
	ps_idmap_barrier(map);
	cr_assert_eq(freed, n);
	/* Destroy flushes what is still queued. */
	cr_assert_eq(ps_idmap_alloc(map, malloc(16), 0, INT_MAX, &id), 0);
	cr_assert_eq(ps_idmap_remove(map, id, &old), 0);
	cr_assert_eq(ps_idmap_free_rcu(map, old, count_free), 0);
	ps_idmap_synchronize(map);
	ps_idmap_destroy(map);
	cr_assert_eq(freed, n + 1);
	cr_assert_eq(freed_elsewhere, 0, "a free ran outside the caller's calls on the map");
}

/*
 * A full batch goes to the reclaim thread and the call returns without
 * waiting for a grace period; a later call on the map (on the caller's
 * thread) runs the frees once the grace period has passed.  The proof that
 * nobody waits: a reader of the map stays inside its section all along, so
 * no grace period can end while the batches are queued.
 */
struct held_reader {
	struct ps_idmap *map;
	int entered, leave; /* atomics */
};

static void *hold_section(void *arg)
{
	struct held_reader *h = arg;

	ps_idmap_read_lock(h->map);
	PSI_STORE_RELEASE(h->entered, 1);
	while (!PSI_LOAD_ACQUIRE(h->leave))
		usleep(1000);
	ps_idmap_read_unlock(h->map);
	return NULL;
}

Test(idmap, free_rcu_never_waits_for_readers)
{
	struct held_reader h = { .map = mk(PS_IDMAP_RCU) };
	pthread_t t;
	int i;

	freed = 0;
	freed_elsewhere = 0;
	freeing_thread = pthread_self();
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&h.entered, sizeof(h.entered));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&h.leave, sizeof(h.leave));
	cr_assert_eq(pthread_create(&t, NULL, hold_section, &h), 0);
	while (!PSI_LOAD_ACQUIRE(h.entered))
		usleep(100);
	/* Four full batches: each call returns while the reader blocks every grace period. */
	for (i = 0; i < 4 * PS_IDMAP_FREE_BATCH; i++)
		cr_assert_eq(ps_idmap_free_rcu(h.map, malloc(16), count_free), 0);
	usleep(20000);
	cr_assert_eq(ps_idmap_free_rcu(h.map, malloc(16), count_free), 0);
	cr_assert_eq(freed, 0, "%d objects freed while a reader that may hold them runs", freed);
	PSI_STORE_RELEASE(h.leave, 1);
	pthread_join(t, NULL);
	/* The grace periods end now: a later call runs the batches. */
	for (i = 0; i < 2000 && freed < 4 * PS_IDMAP_FREE_BATCH; i++) {
		usleep(1000);
		cr_assert_eq(ps_idmap_free_rcu(h.map, malloc(16), count_free), 0);
	}
	cr_assert_geq(freed, 4 * PS_IDMAP_FREE_BATCH, "full batches not run by later calls");
	ps_idmap_destroy(h.map);
	cr_assert_eq(freed, 4 * PS_IDMAP_FREE_BATCH + 1 + i);
	cr_assert_eq(freed_elsewhere, 0, "a free ran on polstore's reclaim thread");
}

/*
 * ps_idmap_barrier() runs every free queued before it, including a full
 * batch another thread is still running (a slow free_fn here).
 */
static int slow_started, slow_freed;

static void slow_free(void *p)
{
	PSI_STORE_RELEASE(slow_started, 1);
	usleep(20000);
	PSI_ADD_FETCH(slow_freed, 1, RELEASE);
	free(p);
}

/* Queue a full batch of slow frees and run it (the barrier drains it here). */
static void *fill_batch(void *arg)
{
	ps_test_idmap_queue(arg, PS_IDMAP_FREE_BATCH, slow_free);
	ps_idmap_barrier(arg);
	return NULL;
}

Test(idmap, barrier_waits_for_batches_in_flight)
{
	struct ps_idmap *map = mk(PS_IDMAP_RCU);
	pthread_t t;

	slow_started = 0;
	slow_freed = 0;
	/* Atomics only; the frees themselves are ordered by the barrier's mutex. */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&slow_started, sizeof(slow_started));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&slow_freed, sizeof(slow_freed));
	cr_assert_eq(pthread_create(&t, NULL, fill_batch, map), 0);
	/* The other thread is inside the frees of its batch. */
	while (!PSI_LOAD_ACQUIRE(slow_started))
		usleep(100);
	ps_idmap_barrier(map);
	cr_assert_eq(PSI_LOAD_ACQUIRE(slow_freed), PS_IDMAP_FREE_BATCH,
			"barrier returned with %d of %d queued frees run", slow_freed,
			PS_IDMAP_FREE_BATCH);
	pthread_join(t, NULL);
	ps_idmap_destroy(map);
}

/* A free function may queue more frees on its map: its call does not wait for itself. */
static struct ps_idmap *requeue_map;

static void requeue_free(void *p)
{
	freed++;
	if (freed <= PS_IDMAP_FREE_BATCH)
		TCHECK(ps_idmap_free_rcu(requeue_map, malloc(16), requeue_free) == 0, "free_rcu");
	free(p);
}

Test(idmap, free_fn_frees_on_the_map)
{
	int i;

	requeue_map = mk(PS_IDMAP_RCU);
	freed = 0;
	for (i = 0; i < PS_IDMAP_FREE_BATCH; i++)
		cr_assert_eq(ps_idmap_free_rcu(requeue_map, malloc(16), requeue_free), 0);
	ps_idmap_barrier(requeue_map);
	cr_assert_geq(freed, PS_IDMAP_FREE_BATCH);
	ps_idmap_destroy(requeue_map);
	cr_assert_eq(freed, 2 * PS_IDMAP_FREE_BATCH);
}

/* ---- Deferred frees: races, nested frees, threads that end inside -------- */

/*
 * Test hooks (the library is linked statically into this binary, so its
 * calls come here, as in test_rcu_store.c): pthread_create() that fails on demand
 * but in threads that opted out (the test's own; no reclaim thread can be
 * started), and pthread_mutex_unlock() that, in a
 * thread that asks for it, sleeps after its next unlock, to hold that thread
 * in the few instructions between a lock's release and its next step.
 */
static int fail_thread_create; /* atomic: armed for threads that did not opt out */
static __thread int may_create_threads; /* this thread's calls succeed even when armed */
static __thread int sleep_after_unlock_us; /* this thread's next unlock sleeps that long */
static int slept_after_unlock; /* atomic: a thread is in that sleep */

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

	if (PSI_READ_ONCE(fail_thread_create) && !may_create_threads)
		return EAGAIN;
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	return real(t, attr, fn, arg);
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	static int (*real)(pthread_mutex_t *);
	int ret, us = sleep_after_unlock_us;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	ret = real(m);
	if (us) {
		sleep_after_unlock_us = 0;
		PSI_STORE_RELEASE(slept_after_unlock, 1);
		usleep((useconds_t)us);
	}
	return ret;
}

static long race_freed; /* atomic: frees run by race_free() */

static void race_free(void *p)
{
	PSI_ADD_FETCH(race_freed, 1, RELEASE);
	free(p);
}

static int filler_started, ender_inside; /* atomics */

/* The flags and counters above are atomics only: no hand-off for the thread checkers. */
static void race_flags_init(void)
{
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&slept_after_unlock, sizeof(slept_after_unlock));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&race_freed, sizeof(race_freed));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&filler_started, sizeof(filler_started));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&ender_inside, sizeof(ender_inside));
}

static void queue_race_frees(struct ps_idmap *map, int n)
{
	ps_test_idmap_queue(map, n, race_free);
}

/*
 * Another thread's ps_idmap_free_rcu() fills the batch and takes it off the
 * map; a barrier called before that call hands the batch to the reclaim
 * thread must still run the frees queued before it (ours, in that batch).
 * The other thread is held between the two steps: it sleeps after its first
 * unlock, that of the lock under which it took the batch.
 */
static void *fill_last_slot(void *arg)
{
	sleep_after_unlock_us = 300000;
	queue_race_frees(arg, 1);
	return NULL;
}

Test(idmap, barrier_runs_a_batch_being_handed_over, .timeout = 60)
{
	struct ps_idmap *map = mk(PS_IDMAP_RCU);
	pthread_t t;
	long n;

	race_flags_init();
	/* The reclaim thread runs and no batch is left anywhere. */
	queue_race_frees(map, PS_IDMAP_FREE_BATCH);
	ps_idmap_barrier(map);
	cr_assert_eq(PSI_LOAD_ACQUIRE(race_freed), PS_IDMAP_FREE_BATCH);
	PSI_WRITE_ONCE(race_freed, 0);

	queue_race_frees(map, PS_IDMAP_FREE_BATCH - 1);
	cr_assert_eq(pthread_create(&t, NULL, fill_last_slot, map), 0);
	while (!PSI_LOAD_ACQUIRE(slept_after_unlock))
		usleep(100);
	ps_idmap_barrier(map);
	n = PSI_LOAD_ACQUIRE(race_freed);
	pthread_join(t, NULL);
	cr_assert_geq(n, PS_IDMAP_FREE_BATCH - 1,
			"barrier returned with %ld of the %d frees queued before it run", n,
			PS_IDMAP_FREE_BATCH - 1);
	ps_idmap_destroy(map);
	cr_assert_eq(PSI_LOAD_ACQUIRE(race_freed), PS_IDMAP_FREE_BATCH);
}

/*
 * No reclaim thread can be started: the ps_idmap_free_rcu() call that fills
 * a batch waits for the grace period itself and runs it (held up here by a
 * reader).  A barrier called meanwhile, from a thread whose own frees are
 * in that batch, must wait for them.
 */
struct barrier_probe {
	struct ps_idmap *map;
	long freed_at_return; /* race_freed when the barrier returned */
	int done; /* atomic */
};

static void *probe_barrier(void *arg)
{
	struct barrier_probe *b = arg;

	ps_idmap_barrier(b->map);
	b->freed_at_return = PSI_LOAD_ACQUIRE(race_freed);
	PSI_STORE_RELEASE(b->done, 1);
	return NULL;
}

static void *fill_last_slot_and_wait(void *arg)
{
	PSI_STORE_RELEASE(filler_started, 1);
	queue_race_frees(arg, 1); /* fills the batch: waits for the reader, then runs it */
	return NULL;
}

Test(idmap, barrier_waits_for_a_batch_run_without_reclaim_thread, .timeout = 60)
{
	struct held_reader h;
	struct barrier_probe b = { 0 };
	pthread_t rt, ft, bt;

	race_flags_init();
	may_create_threads = 1;
	PSI_WRITE_ONCE(fail_thread_create, 1);
	h = (struct held_reader){ .map = mk(PS_IDMAP_RCU) };
	b.map = h.map;
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&h.entered, sizeof(h.entered));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&h.leave, sizeof(h.leave));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&b.done, sizeof(b.done));
	queue_race_frees(h.map, PS_IDMAP_FREE_BATCH - 1);
	cr_assert_eq(pthread_create(&rt, NULL, hold_section, &h), 0);
	while (!PSI_LOAD_ACQUIRE(h.entered))
		usleep(100);
	cr_assert_eq(pthread_create(&ft, NULL, fill_last_slot_and_wait, h.map), 0);
	while (!PSI_LOAD_ACQUIRE(filler_started))
		usleep(100);
	usleep(200000); /* the filler is in its grace period (if it came second, the barrier is) */
	cr_assert_eq(pthread_create(&bt, NULL, probe_barrier, &b), 0);
	usleep(200000);
	PSI_STORE_RELEASE(h.leave, 1);
	pthread_join(rt, NULL);
	pthread_join(ft, NULL);
	pthread_join(bt, NULL);
	cr_assert_geq(b.freed_at_return, PS_IDMAP_FREE_BATCH - 1,
			"barrier returned with %ld of the %d frees queued before it run",
			b.freed_at_return, PS_IDMAP_FREE_BATCH - 1);
	ps_idmap_destroy(h.map);
	PSI_WRITE_ONCE(fail_thread_create, 0);
	cr_assert_eq(PSI_LOAD_ACQUIRE(race_freed), PS_IDMAP_FREE_BATCH);
}

/*
 * ps_idmap_destroy() runs every free still deferred, those the frees it runs
 * queue too (a free function may call ps_idmap_free_rcu() on its map): a
 * full batch of them, handed to the reclaim thread, must not come back to a
 * freed map, and a partial one must not be left behind.
 */
static struct ps_idmap *chain_map;

static void chain_free(void *p)
{
	queue_race_frees(chain_map, PS_IDMAP_FREE_BATCH + 1);
	race_free(p);
}

Test(idmap, destroy_runs_frees_queued_by_its_frees, .timeout = 60)
{
	race_flags_init();
	chain_map = mk(PS_IDMAP_RCU);
	cr_assert_eq(ps_idmap_free_rcu(chain_map, malloc(16), chain_free), 0);
	ps_idmap_destroy(chain_map);
	cr_assert_eq(PSI_LOAD_ACQUIRE(race_freed), 1 + PS_IDMAP_FREE_BATCH + 1,
			"destroy ran %ld of %d frees", race_freed, 1 + PS_IDMAP_FREE_BATCH + 1);
	/* Memcheck and ASan: the reclaim thread would hand the batch back to the freed map. */
	usleep(50000);
}

/*
 * A thread that ends inside a free function (pthread_exit() there, or
 * cancellation at a cancellation point there) leaves the map working: the
 * frees queued beside its own still run, by later calls of other threads,
 * and ps_idmap_barrier() and ps_idmap_destroy() return.
 */
static void exiting_free(void *p)
{
	free(p);
	PSI_ADD_FETCH(race_freed, 1, RELEASE);
	pthread_exit(NULL);
}

static void cancelled_free(void *p)
{
	free(p);
	PSI_ADD_FETCH(race_freed, 1, RELEASE);
	PSI_STORE_RELEASE(ender_inside, 1);
	for (;;)
		pause(); /* a cancellation point: the test cancels us here */
}

static void *end_inside_free(void *arg)
{
	void (**fn)(void *) = arg;

	TCHECK(ps_idmap_free_rcu(chain_map, malloc(16), *fn) == 0, "free_rcu");
	queue_race_frees(chain_map, PS_IDMAP_FREE_BATCH - 1);
	ps_idmap_barrier(chain_map); /* runs *fn first: the thread ends there */
	TCHECK(0, "the thread came back from its free function");
	return NULL;
}

static void *barrier_then_flag(void *arg)
{
	ps_idmap_barrier(chain_map);
	PSI_STORE_RELEASE(*((int *)arg), 1);
	return NULL;
}

static void thread_ends_inside_free_fn(void (*fn)(void *))
{
	pthread_t t;
	int i, done = 0;
	long want;

	race_flags_init();
	chain_map = mk(PS_IDMAP_RCU);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&done, sizeof(done));
	cr_assert_eq(pthread_create(&t, NULL, end_inside_free, &fn), 0);
	if (fn == cancelled_free) {
		while (!PSI_LOAD_ACQUIRE(ender_inside))
			usleep(100);
		cr_assert_eq(pthread_cancel(t), 0);
	}
	cr_assert_eq(pthread_join(t, NULL), 0);
	/* Later ps_idmap_free_rcu() calls alone run full batches, those left behind too. */
	for (i = 0; i < 3000 && PSI_LOAD_ACQUIRE(race_freed) < PS_IDMAP_FREE_BATCH;
			i++) {
		queue_race_frees(chain_map, 1);
		usleep(1000);
	}
	cr_assert_geq(PSI_LOAD_ACQUIRE(race_freed), PS_IDMAP_FREE_BATCH,
			"%ld frees run; the %d queued beside the free its thread ended in never ran",
			race_freed, PS_IDMAP_FREE_BATCH - 1);
	want = PS_IDMAP_FREE_BATCH + i;
	cr_assert_eq(pthread_create(&t, NULL, barrier_then_flag, &done), 0);
	for (i = 0; i < 10000 && !PSI_LOAD_ACQUIRE(done); i++)
		usleep(1000);
	cr_assert(PSI_LOAD_ACQUIRE(done),
			"ps_idmap_barrier() hangs after a thread ended inside a free function");
	pthread_join(t, NULL);
	cr_assert_eq(PSI_LOAD_ACQUIRE(race_freed), want);
	ps_idmap_destroy(chain_map);
}

Test(idmap, thread_exits_inside_free_fn, .timeout = 60)
{
	thread_ends_inside_free_fn(exiting_free);
}

Test(idmap, thread_cancelled_inside_free_fn, .timeout = 60)
{
	thread_ends_inside_free_fn(cancelled_free);
}

/*
 * A thread cancelled while its ps_idmap_barrier() waits for the reclaim
 * thread (a reader holds the grace period up; pthread_cond_wait() is a
 * cancellation point) leaves the map, and the reclaim thread every RCU map
 * and RCU or SEQLOCK store shares, working: later barriers return.  (Acted
 * on in there, the cancellation would leave the reclaimer's lock held and
 * the barrier's item, on the dead thread's stack, queued.)
 */
static void *cancelled_in_barrier(void *arg)
{
	struct held_reader *h = arg;

	queue_race_frees(h->map, 1);
	PSI_STORE_RELEASE(ender_inside, 1);
	ps_idmap_barrier(h->map); /* waits for the reader: cancelled in here, or just after */
	pthread_testcancel();
	TCHECK(0, "the thread was not cancelled");
	return NULL;
}

static void *queue_one_then_barrier(void *arg)
{
	struct barrier_probe *b = arg;

	queue_race_frees(b->map, 1);
	return probe_barrier(b);
}

Test(idmap, thread_cancelled_in_barrier, .timeout = 60)
{
	struct held_reader h = { .map = mk(PS_IDMAP_RCU) };
	struct barrier_probe b = { .map = h.map };
	pthread_t rt, t;
	int i;

	race_flags_init();
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&h.entered, sizeof(h.entered));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&h.leave, sizeof(h.leave));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&b.done, sizeof(b.done));
	cr_assert_eq(pthread_create(&rt, NULL, hold_section, &h), 0);
	while (!PSI_LOAD_ACQUIRE(h.entered))
		usleep(100);
	cr_assert_eq(pthread_create(&t, NULL, cancelled_in_barrier, &h), 0);
	while (!PSI_LOAD_ACQUIRE(ender_inside))
		usleep(100);
	usleep(100000); /* inside the barrier's wait */
	cr_assert_eq(pthread_cancel(t), 0);
	usleep(100000);
	PSI_STORE_RELEASE(h.leave, 1);
	pthread_join(rt, NULL);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(pthread_create(&t, NULL, queue_one_then_barrier, &b), 0);
	for (i = 0; i < 10000 && !PSI_LOAD_ACQUIRE(b.done); i++)
		usleep(1000);
	cr_assert(PSI_LOAD_ACQUIRE(b.done),
			"ps_idmap_barrier() hangs after a thread was cancelled inside one");
	pthread_join(t, NULL);
	cr_assert_eq(b.freed_at_return, 2);
	ps_idmap_destroy(h.map);
}

/*
 * What another thread's frees did happens before ps_idmap_barrier() returns
 * (its guarantee), for the thread checkers too: here the barrier finds
 * nothing left to do and returns at once.  The frees write a plain counter;
 * the only flag between the threads is atomics-only (no hand-off for the
 * checkers), so helgrind and DRD (helgrind.idmap, drd.idmap) see the order
 * only if the barrier declares it.
 */
static int plain_freed; /* plain: ordered by the barriers */
static int frees_done; /* atomics only */

static void plain_free(void *p)
{
	plain_freed++;
	free(p);
}

static void *queue_plain_batch(void *arg)
{
	ps_test_idmap_queue(arg, PS_IDMAP_FREE_BATCH, plain_free);
	ps_idmap_barrier(arg); /* runs the batch on this thread */
	PSI_STORE_RELEASE(frees_done, 1);
	return NULL;
}

Test(idmap, barrier_orders_other_threads_frees, .timeout = 120)
{
	struct ps_idmap *map = mk(PS_IDMAP_RCU);
	pthread_t t;
	int n;

	PSI_ANNOTATE_BENIGN_RACE_SIZED(&frees_done, sizeof(frees_done));
	cr_assert_eq(pthread_create(&t, NULL, queue_plain_batch, map), 0);
	while (!PSI_LOAD_ACQUIRE(frees_done))
		usleep(1000);
	ps_idmap_barrier(map);
	n = plain_freed;
	pthread_join(t, NULL);
	cr_assert_eq(n, PS_IDMAP_FREE_BATCH);
	ps_idmap_destroy(map);
}
