// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The reclaim threads of rcu_reclaim.h.
 *
 * Why an item is released only after every reader that could see what it
 * frees has left: the writer unpublished that memory before it queued the
 * item (the caller's contract); the thread takes items from the queue and
 * only then starts a grace period, which waits for every read-side section
 * begun before it, hence for every reader that loaded a pointer to the
 * memory before it was unpublished.
 *
 * Fork (the handlers are rcu_thread.c's, which call these): the prepare
 * handler takes every reclaimer's gp_lock (so its thread is not inside a
 * grace period, where it would hold liburcu's internal locks and keep the
 * registry's entries on lists of its own) and then its queue lock; the
 * child finds no thread, keeps the queue, and starts a thread on its next
 * defer or barrier.
 */
#include <errno.h>
#include <signal.h>
#include <time.h>

#include "rcu_reclaim.h"

/* Least time between two grace periods of one reclaim thread (none while a barrier waits). */
#define PS_RECLAIM_PERIOD_NS 1000000L

static struct ps_reclaimer *const reclaimers[] = { &_ps_reclaim_memb, &_ps_reclaim_qsbr };
#define NRECLAIMERS (sizeof(reclaimers) / sizeof(reclaimers[0]))

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *reclaim_thread(void *arg)
{
	struct ps_reclaimer *rc = arg;
	uint64_t last_gp = 0;

	pthread_mutex_lock(&rc->gp_lock);
	pthread_mutex_lock(&rc->lock);
	for (;;) {
		struct ps_reclaim_item *batch, *next;
		uint64_t now;

		while (!rc->head) {
			pthread_mutex_unlock(&rc->gp_lock); /* between grace periods: fork may go */
			pthread_cond_wait(&rc->work, &rc->lock);
			pthread_mutex_unlock(&rc->lock);
			pthread_mutex_lock(&rc->gp_lock);
			pthread_mutex_lock(&rc->lock);
		}
		now = now_ns();
		if (!rc->barriers && now - last_gp < PS_RECLAIM_PERIOD_NS) {
			/* Let more work gather: fewer grace periods, fewer interrupts. */
			struct timespec ts = { 0, (long)(PS_RECLAIM_PERIOD_NS - (now - last_gp)) };

			pthread_mutex_unlock(&rc->lock);
			nanosleep(&ts, NULL);
			pthread_mutex_lock(&rc->lock);
		}
		batch = rc->head;
		rc->head = rc->tail = NULL;
		pthread_mutex_unlock(&rc->lock);
		last_gp = now_ns();
		rc->synchronize();
		for (; batch; batch = next) {
			next = batch->next;
			batch->release(batch);
		}
		pthread_mutex_lock(&rc->lock);
	}
	return NULL;
}

/* Under rc->lock: start the thread if none runs; false if it cannot be started. */
static bool reclaim_start(struct ps_reclaimer *rc)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	if (rc->started)
		return true;
	if (pthread_attr_init(&attr))
		return false;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The application's signals are not ours to take. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(&t, &attr, reclaim_thread, rc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	rc->started = !ret;
	return rc->started;
}

void _ps_reclaim_atfork_prepare(void)
{
	size_t i;

	for (i = 0; i < NRECLAIMERS; i++) {
		pthread_mutex_lock(&reclaimers[i]->gp_lock);
		pthread_mutex_lock(&reclaimers[i]->lock);
	}
}

void _ps_reclaim_atfork_parent(void)
{
	size_t i;

	for (i = NRECLAIMERS; i-- > 0;) {
		pthread_mutex_unlock(&reclaimers[i]->lock);
		pthread_mutex_unlock(&reclaimers[i]->gp_lock);
	}
}

void _ps_reclaim_atfork_child(void)
{
	size_t i;

	for (i = NRECLAIMERS; i-- > 0;) {
		struct ps_reclaimer *rc = reclaimers[i];

		/* No thread survives fork(); no waiter exists in the child. */
		rc->started = false;
		rc->barriers = 0;
		pthread_cond_init(&rc->work, NULL);
		pthread_cond_init(&rc->done, NULL);
		pthread_mutex_unlock(&rc->lock);
		pthread_mutex_unlock(&rc->gp_lock);
	}
}

/* Under rc->lock. */
static void reclaim_enqueue(struct ps_reclaimer *rc, struct ps_reclaim_item *item)
{
	item->next = NULL;
	if (rc->tail)
		rc->tail->next = item;
	else
		rc->head = item;
	rc->tail = item;
}

int _ps_reclaim_defer(struct ps_reclaimer *rc, struct ps_reclaim_item *item)
{
	pthread_mutex_lock(&rc->lock);
	if (!reclaim_start(rc)) {
		pthread_mutex_unlock(&rc->lock);
		return -EAGAIN;
	}
	reclaim_enqueue(rc, item);
	if (rc->head == item)
		pthread_cond_signal(&rc->work);
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

struct reclaim_barrier {
	struct ps_reclaim_item item;
	struct ps_reclaimer *rc;
	bool done;
};

static void reclaim_barrier_release(struct ps_reclaim_item *item)
{
	struct reclaim_barrier *b = (struct reclaim_barrier *)item;
	struct ps_reclaimer *rc = b->rc;

	pthread_mutex_lock(&rc->lock);
	b->done = true;
	pthread_cond_broadcast(&rc->done);
	pthread_mutex_unlock(&rc->lock);
}

void _ps_reclaim_barrier(struct ps_reclaimer *rc)
{
	struct reclaim_barrier b = { .item.release = reclaim_barrier_release, .rc = rc };
	struct ps_reclaim_item *batch, *next;

	pthread_mutex_lock(&rc->lock);
	if (!rc->head && !rc->started) {
		pthread_mutex_unlock(&rc->lock); /* nothing was ever queued here */
		return;
	}
	if (reclaim_start(rc)) {
		reclaim_enqueue(rc, &b.item);
		rc->barriers++;
		pthread_cond_signal(&rc->work);
		while (!b.done)
			pthread_cond_wait(&rc->done, &rc->lock);
		rc->barriers--;
		pthread_mutex_unlock(&rc->lock);
		return;
	}
	/* No thread (a forked child that cannot start one): do its work here. */
	batch = rc->head;
	rc->head = rc->tail = NULL;
	pthread_mutex_unlock(&rc->lock);
	rc->synchronize();
	for (; batch; batch = next) {
		next = batch->next;
		batch->release(batch);
	}
}
