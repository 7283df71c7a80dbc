/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Freeing after a grace period without waiting for one: polstore's own
 * call_rcu.
 *
 * One reclaim thread per liburcu flavour (started on first use) takes what
 * writers queued, waits for one grace period of its flavour, and runs each
 * item's release function, in the order queued.  Every store of the
 * flavour and the id maps share the thread, so one grace period serves
 * them all.
 *
 * Grace periods follow the memory waiting for them, not the number of
 * sets: a memb grace period interrupts every CPU that runs a thread of the
 * process (two sys_membarrier calls, more when a reader is slow to leave
 * its section), so the thread lets retired memory gather.  It starts one
 * PSI_RECLAIM_LATENCY_NS after it first saw work, or once nothing more
 * came for PSI_RECLAIM_QUIET_NS; at once (but no sooner than
 * PSI_RECLAIM_PERIOD_NS after the last) when the weight queued reaches
 * PSI_RECLAIM_BATCH_BYTES or a defer asks (psi_reclaim_defer_now()); and
 * at once for a barrier.  The bound on memory in flight: about
 * PSI_RECLAIM_BATCH_BYTES, plus what writers retire during one grace
 * period; a grace period that does not end is bounded by the caller
 * (rcu_store_bound.h, PSI_RCU_PENDING_MAX).  docs/internals.md has the figures.
 *
 * A writer that keeps what it retired itself (the RCU stores) polls
 * instead of queueing: it notes the grace period that frees what it
 * unpublished (psi_reclaim_poll_state()), reports the weight so that one
 * starts (psi_reclaim_poll_weigh()), and reuses the memory on its own
 * thread once that grace period has ended (psi_reclaim_poll_done()), as
 * the kernel's get_state_synchronize_rcu() and poll_state_synchronize_rcu()
 * do.  Nothing of it crosses to the reclaim thread, which only runs the
 * grace period.
 *
 * It also keeps polstore off liburcu's call_rcu machinery altogether: no
 * registration is required of the queueing thread (liburcu requires a
 * registered caller for call_rcu()), and there are no liburcu fork hooks
 * for polstore to register a second time next to the application's.  The
 * thread is fork-safe: fork() waits until it is between grace periods and
 * its queue is consistent, and the child starts a new one on its next use.
 * When the library is unloaded (or the process exits) an idle thread is
 * stopped and joined, so no thread runs the library's code after dlclose().
 */
#ifndef POLSTORE_SRC_RCU_RECLAIM_H
#define POLSTORE_SRC_RCU_RECLAIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

/* Least time between two grace periods of one reclaim thread (none while a barrier waits). */
#define PSI_RECLAIM_PERIOD_NS 1000000L
/* Weight queued at which a grace period starts without waiting for more. */
#define PSI_RECLAIM_BATCH_BYTES ((size_t)4 << 20)
/* The longest queued work waits, after the thread saw it, for its grace period to start. */
#define PSI_RECLAIM_LATENCY_NS 40000000L
/* Nothing queued for this long: the writers stopped, and the grace period starts. */
#define PSI_RECLAIM_QUIET_NS 10000000L
/* The longest time between two releases of an item that asked for more (psi_reclaim_retry()). */
#define PSI_RECLAIM_RETRY_NS 10000000L

struct psi_reclaim_item {
	struct psi_reclaim_item *next;
	size_t weight; /* the bytes the item frees: see psi_reclaim_pending() */
	/*
	 * Runs after a grace period, on the reclaim thread or a waiting
	 * caller's.  Never waits for a lock a writer of the item's store may
	 * hold: a forked child inherits the queue, with the items of stores
	 * whose writers are frozen there holding their locks
	 * (rcu_store_update.c, psi_rcu_store_sweep()).
	 */
	void (*release)(struct psi_reclaim_item *item);
};

/*
 * One per liburcu flavour: statically initialised with PSI_RECLAIMER_INIT().
 * Queueing is lock-free (a writer never waits for the reclaim thread, which
 * may be preempted): items are pushed on a stack with one compare-and-swap,
 * the thread takes the whole stack with one exchange and releases it in
 * the order it was pushed.
 */
struct psi_reclaimer {
	void (*synchronize)(void);     /* the flavour's synchronize_rcu() */
	struct psi_reclaim_item *head;  /* atomic: pushed items, newest first */
	size_t pending;                /* atomic: the weight queued and not past its grace period */
	size_t peak;                   /* atomic: the highest @pending before a grace period's end */
	uint64_t grace_periods;        /* atomic: grace periods the thread (or a barrier) waited for */
	uint64_t gp_begun;             /* atomic: grace periods begun (under @gp_lock), for pollers */
	uint64_t gp_ended;             /* atomic: of those, ended (release: after the wait) */
	size_t polled;                 /* atomic: weight pollers reported since a grace period began */
	int urgent;                    /* atomic: a defer asked for a grace period at once */
	int idle;                      /* atomic: PSI_RECLAIM_WAITING or _GATHERING (set under @lock) */
	pthread_mutex_t lock;          /* @work, @done, and the fields below */
	pthread_mutex_t gp_lock;       /* held by the thread across a grace period and its releases */
	struct psi_reclaim_item *retry; /* under @gp_lock: to release again (psi_reclaim_retry()) */
	struct psi_reclaim_item *retrying; /* under @gp_lock: those being released again now */
	pthread_cond_t work;           /* the thread waits here for items */
	pthread_cond_t done;           /* barrier callers wait here */
	int barriers;                  /* callers waiting in psi_reclaim_barrier() */
	bool started;                  /* a thread runs (in this process); atomic reads */
	bool running;                  /* atomic: the thread reached its own code (see fork) */
	uint64_t created_ns;           /* when the thread was created (psi_reclaim_now_ns()) */
	bool stop;                     /* the library is being unloaded: the thread exits */
	pthread_t thread;
};

/* @idle: the thread waits on @work for any item, or for its queued items to be due. */
#define PSI_RECLAIM_WAITING 1
#define PSI_RECLAIM_GATHERING 2

#define PSI_RECLAIMER_INIT(sync_fn)                                                                 \
	{                                                                                          \
		.synchronize = (sync_fn), .lock = PTHREAD_MUTEX_INITIALIZER,                        \
		.gp_lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,            \
		.done = PTHREAD_COND_INITIALIZER,                                                  \
	}

/**
 * psi_reclaim_defer_weighed() - run @item->release after a grace period of
 * @rc's flavour; the item frees @weight bytes
 *
 * The weight counts in psi_reclaim_pending() until the item is released;
 * the grace period starts early once the weight queued reaches
 * PSI_RECLAIM_BATCH_BYTES.
 * Context: any thread, registered or not, inside a read-side section too:
 * never waits for a grace period nor for the reclaim thread (lock-free,
 * but for the first call, which starts the thread).
 * Return: 0, or -EAGAIN when no reclaim thread could be started: nothing
 * was queued, and the caller must wait for a grace period itself (or keep
 * the item for later).
 */
int psi_reclaim_defer_weighed(struct psi_reclaimer *rc, struct psi_reclaim_item *item,
		size_t weight);

/**
 * psi_reclaim_defer_now() - psi_reclaim_defer_weighed(), and a grace period
 * for everything queued as soon as PSI_RECLAIM_PERIOD_NS allows
 *
 * For an item whose release somebody is waiting for (a deferred destroy).
 * Context and return: as psi_reclaim_defer_weighed().
 */
int psi_reclaim_defer_now(struct psi_reclaimer *rc, struct psi_reclaim_item *item,
		size_t weight);

/**
 * psi_reclaim_poll_state() - the grace period of @rc that frees what the
 * caller unpublished before its last full fence
 *
 * Call after a sequentially consistent fence that follows the release
 * stores which unpublished the memory: a grace period that begins after
 * that fence waits for every reader that could still reach it, and one
 * that began before does not count.
 * Context: any thread; a load.
 * Return: a cookie for psi_reclaim_poll_done().
 */
static inline uint64_t psi_reclaim_poll_state(const struct psi_reclaimer *rc)
{
	return PSI_READ_ONCE(rc->gp_begun) + 1;
}

/**
 * psi_reclaim_poll_done() - whether grace period @cookie of @rc has ended
 *
 * Context: any thread; an acquire load, so that what the caller frees
 * after a true return is ordered after the grace period.
 * Return: true when no reader can still reach what the cookie was taken for.
 */
static inline bool psi_reclaim_poll_done(const struct psi_reclaimer *rc, uint64_t cookie)
{
	return (int64_t)(PSI_LOAD_ACQUIRE(rc->gp_ended) - cookie) >= 0;
}

/**
 * psi_reclaim_poll_weigh() - ask @rc for a grace period for @weight bytes
 * a poller retired and keeps
 *
 * The weight counts in psi_reclaim_pending() until a grace period begun
 * after the call ends, and brings one on as items of that weight would.
 * Context: any thread, registered or not, inside a read-side section too;
 * lock-free, never waits (but for the first call, which starts the thread).
 * Return: 0, or -EAGAIN when no reclaim thread could be started: then no
 * grace period comes unless the caller waits for one itself.
 */
int psi_reclaim_poll_weigh(struct psi_reclaimer *rc, size_t weight);

/*
 * What a reclaimer has done (test support and polstore-stress): its grace
 * periods since the process started, the weight queued now, and the
 * highest weight queued since the last reset (@reset: start a new peak).
 */
struct psi_reclaim_stats {
	uint64_t grace_periods;
	size_t pending;
	size_t peak;
};

void psi_reclaim_stats(struct psi_reclaimer *rc, struct psi_reclaim_stats *st, bool reset);

/**
 * psi_reclaim_pending() - the weight of the items queued on @rc whose
 * grace period has not ended: how far its thread is behind (a relaxed read)
 */
static inline size_t psi_reclaim_pending(const struct psi_reclaimer *rc)
{
	return PSI_READ_ONCE(rc->pending);
}

/* CLOCK_MONOTONIC in nanoseconds, the clock of the times above. */
uint64_t psi_reclaim_now_ns(void);

/**
 * psi_reclaim_retry() - release @item again later, from a release function
 *
 * For an item whose grace period has passed but whose memory something
 * else still holds (a store's lock), or one that looks again later (a
 * store's sweep): the thread calls @item->release again after its next
 * grace period or wake-up, and at least every PSI_RECLAIM_RETRY_NS,
 * without a grace period of its own, until it stops asking.  A barrier
 * does not wait for it.  @item is not queued already.
 *
 * Context: a release function of @rc (the reclaim thread, or a barrier
 * caller doing its work, under @gp_lock); never waits.
 */
void psi_reclaim_retry(struct psi_reclaimer *rc, struct psi_reclaim_item *item);

/**
 * psi_reclaim_retry_cancel() - take @item off @rc's items to release again,
 * if it is there: its release is not called after this returns
 *
 * For the owner of an item about to be freed.
 * Context: outside every read-side section, or in a release function of
 * @rc; waits for a grace period the thread is in and its releases.
 */
void psi_reclaim_retry_cancel(struct psi_reclaimer *rc, struct psi_reclaim_item *item);

/**
 * psi_reclaim_barrier() - wait until every item queued on @rc before the
 * call has been released
 *
 * The caller runs the grace period and the releases itself while @rc has
 * no thread, or, in a forked child, one that has not yet reached its own
 * code (there it may never: see psi_reclaim_barrier()'s body); it waits
 * for the thread only once the thread has shown it runs.
 * Context: outside every read-side section of the flavour (QSBR: offline);
 * may sleep; not a cancellation point (a cancellation arriving meanwhile
 * is acted on at the caller's next one).
 */
void psi_reclaim_barrier(struct psi_reclaimer *rc);

/*
 * psi_reclaim_fork_nap() - the wait of a fork prepare handler between two
 * looks for a thread that has not finished its start-up: a short sleep,
 * with cancellation off (fork() is not a cancellation point)
 */
void psi_reclaim_fork_nap(void);

/* The longest a fork waits for a thread to finish its start-up, from the thread's creation. */
#define PSI_RECLAIM_START_WAIT_NS 1000000000L

/*
 * psi_reclaim_start_overdue() - in a forked child, whether a thread
 * created at @created_ns (psi_reclaim_now_ns()) and not yet running its
 * own code has been so for PSI_RECLAIM_START_WAIT_NS: it waits for
 * something that nothing will release (an allocator lock another thread
 * of the parent held at the fork), and a fork prepare handler stops
 * waiting for it.  Its start-up holds none of the allocator's locks then:
 * it waits for one.  Elsewhere the start-up ends: always false.
 */
bool psi_reclaim_start_overdue(uint64_t created_ns);

/**
 * psi_reclaim_is_self() - true in a release function of @rc (on its thread,
 * or a barrier caller's doing its work): there a barrier would wait for
 * itself, and every item queued before the one being released has been
 * released already
 */
bool psi_reclaim_is_self(struct psi_reclaimer *rc);

/*
 * fork() handlers, called by rcu_thread.c's (which orders them with its
 * own): prepare waits until every reclaim thread is between grace periods
 * and holds it there; the child starts none, and the next defer or barrier
 * starts one.  Context: the forking thread, outside every read-side
 * section (QSBR: offline): prepare may wait for a grace period to end.
 */
void psi_reclaim_atfork_prepare(void);
void psi_reclaim_atfork_parent(void);
void psi_reclaim_atfork_child(void);

/*
 * Test support only (tests/common/testutil.h: psi_test_set_release_hook()): when
 * set, the release of a store's retire batch (SEQLOCK) or every look of
 * its sweep (RCU, RCU_QSBR) calls it on the reclaim thread, before the
 * release's last access to anything of its store, the window in which a
 * destroy must not free the store.
 * Unset (NULL) it costs a load and a branch per release, on no reader's
 * or writer's path.
 */
extern void (*psi_reclaim_test_hook)(void);

/*
 * Make @rc known to the fork handlers and to the unload: called once per
 * flavour at load time (rcu_thread.c, psi_rcu_flavour_add()), before any
 * thread can use @rc.
 */
#define PSI_RECLAIMERS_MAX 4
void psi_reclaim_add(struct psi_reclaimer *rc);

#endif /* POLSTORE_SRC_RCU_RECLAIM_H */
