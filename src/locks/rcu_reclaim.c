// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The reclaim threads of rcu_reclaim.h.
 *
 * Why an item is released only after every reader that could see what it
 * frees has left: the writer unpublished that memory before it queued the
 * item (the caller's contract); the thread takes items off the stack and
 * only then starts a grace period, which waits for every read-side section
 * begun before it, hence for every reader that loaded a pointer to the
 * memory before it was unpublished.
 *
 * Waking the thread without a lock on the writer's side: the thread sets
 * @idle and then looks at the stack (WAITING) or at @pending and @urgent
 * (GATHERING) once more before it sleeps; a writer adds its weight, pushes,
 * sets @urgent if it asks, and then looks at @idle.  All are sequentially
 * consistent, so at least one of them sees the other's store: either the
 * thread finds the item (or the weight, or the request), or the writer
 * sees @idle and signals under @lock, which the thread holds from setting
 * @idle until pthread_cond_(timed)wait() releases it, so the signal cannot
 * fall between the two.  A writer signals a GATHERING thread only when
 * its push made the grace period due: most pushes cost no system call.
 *
 * Fork (the handlers are rcu_thread.c's, which call these): the prepare
 * handler takes every reclaimer's gp_lock (so its thread is not inside a
 * grace period, where it would hold liburcu's internal locks and keep the
 * registry's entries on lists of its own, nor between taking a stack and
 * releasing it) and then its @lock; the child finds no thread, keeps the
 * stack, and starts a thread on its next defer or barrier.  That stack
 * holds items of every store of the flavour, those other threads were
 * writing too: their release functions may take no lock of their store
 * that a writer holds (struct psi_reclaim_item), or the child's thread,
 * and every barrier of the flavour there, would wait for ever.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include "annotate.h"
#include "compiler.h"
#include "rcu_reclaim.h"

void (*psi_reclaim_test_hook)(void);

/* The reclaimer whose release functions this thread runs now (under its @gp_lock). */
static __thread struct psi_reclaimer *releasing;

/*
 * This process is a child of fork(): set by the child handler before any
 * thread of the child starts.  A thread a child starts may never run
 * (psi_reclaim_barrier()).
 */
static bool in_fork_child;

/* Every flavour's reclaimer, added at load time (psi_reclaim_add()). */
static struct psi_reclaimer *reclaimers[PSI_RECLAIMERS_MAX];
static size_t nreclaimers;

void psi_reclaim_add(struct psi_reclaimer *rc)
{
	size_t i;

	for (i = 0; i < nreclaimers; i++)
		if (reclaimers[i] == rc)
			return;
	if (nreclaimers < PSI_RECLAIMERS_MAX)
		reclaimers[nreclaimers++] = rc;
}

uint64_t psi_reclaim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Take the whole stack, oldest first; *@weight: what its items weigh. */
static struct psi_reclaim_item *take_all(struct psi_reclaimer *rc, size_t *weight)
{
	struct psi_reclaim_item *it = PSI_XCHG(rc->head, NULL, ACQUIRE);
	struct psi_reclaim_item *fifo = NULL, *next;

	*weight = 0;
	for (; it; it = next) {
		PSI_ANNOTATE_HAPPENS_AFTER(it); /* pairs with push(): the exchange is the hand-off */
		next = it->next;
		*weight += it->weight;
		it->next = fifo;
		fifo = it;
	}
	return fifo;
}

static void release_all(struct psi_reclaimer *rc, struct psi_reclaim_item *batch)
{
	struct psi_reclaimer *outer = releasing;
	struct psi_reclaim_item *next;

	releasing = rc;
	for (; batch; batch = next) {
		next = batch->next;
		batch->release(batch);
	}
	releasing = outer;
}

/* Items queued, or weight a poller reported: a grace period is wanted. */
static bool has_work(struct psi_reclaimer *rc)
{
	return PSI_LOAD_SEQ_CST(rc->head) || PSI_LOAD_SEQ_CST(rc->polled);
}

/*
 * Under @lock: wait until there is work (true) or the thread must stop
 * (false).  With items to retry (@retry_pending, read under @gp_lock
 * before), every wait lasts at most PSI_RECLAIM_RETRY_NS, and its timing
 * out returns true.
 */
static bool wait_for_work(struct psi_reclaimer *rc, bool retry_pending)
{
	for (;;) {
		int timed_out = 0;

		if (has_work(rc))
			return true;
		if (rc->stop)
			return false;
		PSI_STORE_SEQ_CST(rc->idle, PSI_RECLAIM_WAITING);
		if (!has_work(rc)) {
			if (retry_pending) {
				struct timespec ts;

				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += PSI_RECLAIM_RETRY_NS;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				timed_out = pthread_cond_timedwait(&rc->work, &rc->lock, &ts) ==
					    ETIMEDOUT;
			} else {
				pthread_cond_wait(&rc->work, &rc->lock);
			}
		}
		PSI_WRITE_ONCE(rc->idle, 0);
		if (timed_out && !has_work(rc))
			return true;
	}
}

bool psi_reclaim_is_self(struct psi_reclaimer *rc)
{
	return releasing == rc;
}

/*
 * Under @gp_lock: release again what asked for it (it may ask again).
 * The items wait on @retrying, each taken off before its release, so
 * that a release may cancel any other (psi_reclaim_retry_cancel()).
 */
static void retry_all(struct psi_reclaimer *rc)
{
	struct psi_reclaimer *outer = releasing;
	struct psi_reclaim_item *it;

	rc->retrying = rc->retry;
	rc->retry = NULL;
	releasing = rc;
	while ((it = rc->retrying)) {
		rc->retrying = it->next;
		it->release(it);
	}
	releasing = outer;
}

static bool unlink_item(struct psi_reclaim_item **list, struct psi_reclaim_item *item)
{
	for (; *list; list = &(*list)->next)
		if (*list == item) {
			*list = item->next;
			return true;
		}
	return false;
}

void psi_reclaim_retry_cancel(struct psi_reclaimer *rc, struct psi_reclaim_item *item)
{
	bool locked = releasing != rc;

	if (locked)
		pthread_mutex_lock(&rc->gp_lock);
	if (!unlink_item(&rc->retry, item))
		(void)unlink_item(&rc->retrying, item);
	if (locked)
		pthread_mutex_unlock(&rc->gp_lock);
}

/*
 * Under @lock, with items queued: wait until their grace period is due.
 * It is due at once when a barrier waits or the thread must stop; when
 * @pending reached PSI_RECLAIM_BATCH_BYTES or a defer asked for it
 * (@urgent), once PSI_RECLAIM_PERIOD_NS have passed since the last one
 * began (@last_gp); otherwise once nothing was queued for
 * PSI_RECLAIM_QUIET_NS (the writers stopped: more waiting gathers
 * nothing), or PSI_RECLAIM_LATENCY_NS after the thread saw the first item.
 * Pushes are seen by the stack's head changing; the thread looks at least
 * every PSI_RECLAIM_QUIET_NS.  Wakes: see the file comment.
 */
static void wait_until_due(struct psi_reclaimer *rc, uint64_t last_gp)
{
	uint64_t first = psi_reclaim_now_ns(), quiet = first + PSI_RECLAIM_QUIET_NS;
	struct psi_reclaim_item *seen = PSI_READ_ONCE(rc->head);
	size_t seen_polled = PSI_READ_ONCE(rc->polled);

	for (;;) {
		struct psi_reclaim_item *head = PSI_READ_ONCE(rc->head);
		size_t polled = PSI_READ_ONCE(rc->polled);
		uint64_t now = psi_reclaim_now_ns(), due;
		bool full;

		if (rc->barriers > 0 || rc->stop)
			break;
		if (head != seen || polled != seen_polled) {
			seen = head;
			seen_polled = polled;
			quiet = now + PSI_RECLAIM_QUIET_NS;
		}
		full = PSI_LOAD_SEQ_CST(rc->urgent) ||
		       PSI_LOAD_SEQ_CST(rc->pending) >= PSI_RECLAIM_BATCH_BYTES;
		if (full)
			due = last_gp + PSI_RECLAIM_PERIOD_NS;
		else
			due = quiet < first + PSI_RECLAIM_LATENCY_NS ? quiet
								     : first + PSI_RECLAIM_LATENCY_NS;
		if (now >= due)
			break;
		PSI_STORE_SEQ_CST(rc->idle, PSI_RECLAIM_GATHERING);
		/* Full already (then wait out the period), or not full yet after @idle was set. */
		if (full || (!PSI_LOAD_SEQ_CST(rc->urgent) &&
				    PSI_LOAD_SEQ_CST(rc->pending) <
						    PSI_RECLAIM_BATCH_BYTES)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)(due - now);
			while (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&rc->work, &rc->lock, &ts);
		}
		PSI_WRITE_ONCE(rc->idle, 0);
	}
	PSI_WRITE_ONCE(rc->urgent, 0);
}

/*
 * Under @gp_lock: one grace period for everything queued, then its
 * releases.  The batch's weight leaves @pending before them, so that a
 * barrier, released with the batch, sees none of it queued.
 *
 * Pollers (psi_reclaim_poll_state()): @gp_begun is raised, and a full
 * fence follows, before the grace period's own start.  A poller fenced
 * after its unpublication and then read @gp_begun; if it read the old
 * count, its fence came before ours in their single total order, so every
 * reader that begins after our fence finds the memory unpublished, and
 * the grace period waits for every reader begun before: the cookie (the
 * old count + 1) names this grace period rightly.  @gp_ended is stored
 * with release after the wait, which the poller's acquire pairs with.
 */
static void grace_period(struct psi_reclaimer *rc)
{
	size_t weight, polled, before;
	struct psi_reclaim_item *batch = take_all(rc, &weight);
	uint64_t gp = PSI_READ_ONCE(rc->gp_begun) + 1;

	polled = PSI_XCHG(rc->polled, 0, RELAXED);
	PSI_WRITE_ONCE(rc->gp_begun, gp);
	PSI_FENCE(SEQ_CST);
	rc->synchronize();
	PSI_STORE_RELEASE(rc->gp_ended, gp);
	weight += polled;
	PSI_FETCH_ADD(rc->grace_periods, 1, RELAXED);
	/* @pending only falls here: its value before each fall is a peak. */
	before = PSI_FETCH_SUB(rc->pending, weight, RELAXED);
	if (before > PSI_READ_ONCE(rc->peak))
		PSI_WRITE_ONCE(rc->peak, before);
	release_all(rc, batch);
}

static void *reclaim_thread(void *arg)
{
	struct psi_reclaimer *rc = arg;
	struct sched_param sp = { .sched_priority = 0 };
	uint64_t last_gp = 0;

	/* The thread's start-up (its stack, its TLS, a sanitizer's records) is done. */
	PSI_STORE_RELEASE(rc->running, true);

	/*
	 * SCHED_BATCH: its fair share of CPU, but a wake-up does not preempt
	 * the thread that queued the work (a writer mid-update would wait for
	 * the grace period it just asked for).  Best effort.
	 */
	(void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);

	for (;;) {
		bool retry;

		pthread_mutex_lock(&rc->gp_lock);
		retry_all(rc);
		retry = rc->retry != NULL;
		pthread_mutex_unlock(&rc->gp_lock);
		pthread_mutex_lock(&rc->lock);
		if (!wait_for_work(rc, retry)) {
			pthread_mutex_unlock(&rc->lock);
			return NULL;
		}
		if (has_work(rc))
			wait_until_due(rc, last_gp);
		pthread_mutex_unlock(&rc->lock);
		if (!has_work(rc))
			continue; /* woken to retry only */
		pthread_mutex_lock(&rc->gp_lock);
		last_gp = psi_reclaim_now_ns();
		grace_period(rc);
		pthread_mutex_unlock(&rc->gp_lock);
	}
}

/* Start the thread if none runs; false if it cannot be started. */
static bool reclaim_start(struct psi_reclaimer *rc)
{
	sigset_t all, old;
	int ret;

	if (PSI_LOAD_ACQUIRE(rc->started))
		return true;
	pthread_mutex_lock(&rc->lock);
	if (!rc->started && !rc->stop) {
		/* Words only ever accessed with atomics (helgrind and DRD see plain accesses). */
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->head, sizeof(rc->head));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->idle, sizeof(rc->idle));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->pending, sizeof(rc->pending));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->peak, sizeof(rc->peak));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->grace_periods, sizeof(rc->grace_periods));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->gp_begun, sizeof(rc->gp_begun));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->gp_ended, sizeof(rc->gp_ended));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->polled, sizeof(rc->polled));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->urgent, sizeof(rc->urgent));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->started, sizeof(rc->started));
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&rc->running, sizeof(rc->running));
		/* The application's signals are not ours to take. */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		rc->created_ns = psi_reclaim_now_ns();
		ret = pthread_create(&rc->thread, NULL, reclaim_thread, rc);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		PSI_STORE_RELEASE(rc->started, !ret);
	}
	pthread_mutex_unlock(&rc->lock);
	return PSI_LOAD_ACQUIRE(rc->started);
}

/*
 * Library unload or process exit: stop the threads, which exit once their
 * stack is empty, and join them, so that none runs this library's code
 * after dlclose().  A thread still inside a grace period that does not end
 * (a reader stuck in a section at exit) is given up on after a second.
 */
__attribute__((destructor)) static void reclaim_unload(void)
{
	size_t i;

	for (i = 0; i < nreclaimers; i++) {
		struct psi_reclaimer *rc = reclaimers[i];
		struct timespec ts;
		bool started;

		pthread_mutex_lock(&rc->lock);
		rc->stop = true;
		started = rc->started;
		pthread_cond_signal(&rc->work);
		pthread_mutex_unlock(&rc->lock);
		if (!started)
			continue;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (!pthread_timedjoin_np(rc->thread, NULL, &ts)) {
			PSI_WRITE_ONCE(rc->running, false);
			PSI_STORE_RELEASE(rc->started, false);
		}
	}
}

/*
 * Before fork(): every thread out of its grace period and releases (they
 * hold @gp_lock) and out of its start-up.  A thread created but not yet
 * running its own code may be inside the allocator (its stack, its TLS,
 * AddressSanitizer's records of it), whose locks a child would inherit
 * held with no thread to release them: the fork waits for it first, but
 * not for ever (psi_reclaim_start_overdue(): a forked child's thread may
 * never run, and that child may fork in turn).
 */
void psi_reclaim_fork_nap(void)
{
	int cancel;

	/* Sleep, not yield: a forking thread of a real-time policy on its CPU would starve it. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	nanosleep(&(struct timespec){ .tv_nsec = 100000 }, NULL);
	pthread_setcancelstate(cancel, NULL);
}

bool psi_reclaim_start_overdue(uint64_t created_ns)
{
	return in_fork_child &&
	       psi_reclaim_now_ns() - created_ns >= (uint64_t)PSI_RECLAIM_START_WAIT_NS;
}

void psi_reclaim_atfork_prepare(void)
{
	size_t i;

	for (i = 0; i < nreclaimers; i++) {
		struct psi_reclaimer *rc = reclaimers[i];

		for (;;) {
			pthread_mutex_lock(&rc->gp_lock);
			pthread_mutex_lock(&rc->lock);
			if (!PSI_LOAD_ACQUIRE(rc->started) ||
					PSI_LOAD_ACQUIRE(rc->running) ||
					psi_reclaim_start_overdue(rc->created_ns))
				break;
			pthread_mutex_unlock(&rc->lock);
			pthread_mutex_unlock(&rc->gp_lock);
			psi_reclaim_fork_nap();
		}
	}
}

void psi_reclaim_atfork_parent(void)
{
	size_t i;

	for (i = nreclaimers; i-- > 0;) {
		pthread_mutex_unlock(&reclaimers[i]->lock);
		pthread_mutex_unlock(&reclaimers[i]->gp_lock);
	}
}

void psi_reclaim_atfork_child(void)
{
	size_t i;

	in_fork_child = true;
	for (i = nreclaimers; i-- > 0;) {
		struct psi_reclaimer *rc = reclaimers[i];

		/* No thread survives fork(); no waiter exists in the child. */
		rc->started = false;
		rc->running = false;
		rc->idle = 0;
		rc->barriers = 0;
		pthread_cond_init(&rc->work, NULL);
		pthread_cond_init(&rc->done, NULL);
		pthread_mutex_unlock(&rc->lock);
		pthread_mutex_unlock(&rc->gp_lock);
	}
}

static void push(struct psi_reclaimer *rc, struct psi_reclaim_item *item)
{
	struct psi_reclaim_item *old = PSI_READ_ONCE(rc->head);

	/* Release: the item's contents (and what it frees) before the thread takes it. */
	do {
		item->next = old;
		PSI_ANNOTATE_HAPPENS_BEFORE(item); /* the checkers see no atomics: declare the hand-off */
	} while (!PSI_TRY_CMPXCHG_WEAK(rc->head, &old, item, SEQ_CST, RELAXED));
}

/*
 * Queue @item (NULL: a poller's weight alone) of @weight bytes.  The
 * weight, the push or @polled, and @urgent each come before the look at
 * @idle (the file comment).
 */
static int defer(struct psi_reclaimer *rc, struct psi_reclaim_item *item, size_t weight,
		bool now)
{
	size_t pending;
	int idle;

	if (psi_unlikely(!PSI_LOAD_ACQUIRE(rc->started))) {
		if (!reclaim_start(rc))
			return -EAGAIN;
	}
	/* Sequentially consistent: pairs with wait_until_due()'s look (the file comment). */
	pending = PSI_ADD_FETCH(rc->pending, weight, SEQ_CST);
	if (item) {
		item->weight = weight;
		push(rc, item);
	} else {
		/* Never 0 once reported: a report of nothing still asks for a grace period. */
		PSI_FETCH_ADD(rc->polled, weight, SEQ_CST);
	}
	if (now)
		PSI_STORE_SEQ_CST(rc->urgent, 1);
	idle = PSI_LOAD_SEQ_CST(rc->idle);
	if (idle == PSI_RECLAIM_WAITING ||
			(idle == PSI_RECLAIM_GATHERING && (now || pending >= PSI_RECLAIM_BATCH_BYTES))) {
		pthread_mutex_lock(&rc->lock);
		pthread_cond_signal(&rc->work);
		pthread_mutex_unlock(&rc->lock);
	}
	return 0;
}

int psi_reclaim_defer_weighed(struct psi_reclaimer *rc, struct psi_reclaim_item *item,
		size_t weight)
{
	return defer(rc, item, weight, false);
}

int psi_reclaim_defer_now(struct psi_reclaimer *rc, struct psi_reclaim_item *item, size_t weight)
{
	return defer(rc, item, weight, true);
}

int psi_reclaim_poll_weigh(struct psi_reclaimer *rc, size_t weight)
{
	return defer(rc, NULL, weight ? weight : 1, false);
}

void psi_reclaim_stats(struct psi_reclaimer *rc, struct psi_reclaim_stats *st, bool reset)
{
	st->grace_periods = PSI_READ_ONCE(rc->grace_periods);
	st->pending = PSI_READ_ONCE(rc->pending);
	st->peak = PSI_READ_ONCE(rc->peak);
	if (st->peak < st->pending)
		st->peak = st->pending;
	if (reset)
		PSI_WRITE_ONCE(rc->peak, st->pending);
}

void psi_reclaim_retry(struct psi_reclaimer *rc, struct psi_reclaim_item *item)
{
	item->next = rc->retry;
	rc->retry = item;
}

struct reclaim_barrier {
	struct psi_reclaim_item item;
	struct psi_reclaimer *rc;
	bool done;
};

static void reclaim_barrier_release(struct psi_reclaim_item *item)
{
	struct reclaim_barrier *b = (struct reclaim_barrier *)item;
	struct psi_reclaimer *rc = b->rc;

	pthread_mutex_lock(&rc->lock);
	b->done = true;
	pthread_cond_broadcast(&rc->done);
	pthread_mutex_unlock(&rc->lock);
}

void psi_reclaim_barrier(struct psi_reclaimer *rc)
{
	/*
	 * Thread-local, not on the stack: the thread checkers keep the
	 * address push() annotates as a synchronisation object, and DRD
	 * refuses a mutex placed there later.  A thread waits in one barrier
	 * at a time.
	 */
	static __thread struct reclaim_barrier b;
	int cancel_state;

	b = (struct reclaim_barrier){ .item.release = reclaim_barrier_release, .rc = rc };

	if (!PSI_LOAD_ACQUIRE(rc->head) &&
			!PSI_LOAD_ACQUIRE(rc->started))
		return; /* nothing was ever queued here (in this process) */
	/*
	 * Not a cancellation point: pthread_cond_wait() is one, and a waiter
	 * cancelled there would leave @lock held (the thread, and every later
	 * barrier, would wait for it for ever) and @b, on its dead stack,
	 * queued.  A pending cancellation is acted on at the caller's next
	 * cancellation point.
	 */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	if (!reclaim_start(rc) || (in_fork_child && !PSI_LOAD_ACQUIRE(rc->running))) {
		/*
		 * No thread (a forked child that cannot start one), or, in
		 * a forked child, one that has not yet reached its own code:
		 * do its work here.  A thread a forked child starts may never
		 * reach it: when another thread of the parent was inside an
		 * allocator without fork handlers (a sanitizer's), that
		 * allocator's locks stay held in the child, and the new
		 * thread's start-up waits for them for ever.  Both take
		 * @gp_lock for a grace period and its releases, so they take
		 * turns.  (Elsewhere the thread's start-up ends, and what the
		 * thread frees stays off the caller's thread.)
		 */
		pthread_mutex_lock(&rc->gp_lock);
		grace_period(rc);
		pthread_mutex_unlock(&rc->gp_lock);
		pthread_setcancelstate(cancel_state, NULL);
		return;
	}
	pthread_mutex_lock(&rc->lock);
	rc->barriers++;
	push(rc, &b.item);
	pthread_cond_signal(&rc->work);
	while (!b.done)
		pthread_cond_wait(&rc->done, &rc->lock);
	rc->barriers--;
	pthread_mutex_unlock(&rc->lock);
	pthread_setcancelstate(cancel_state, NULL);
}
