// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Change subscriptions (polstore/subscribe.h, docs/runtime.md).
 *
 * A store's subscriptions hang from one list (struct _ps_subs) that its
 * first subscription allocates and its destroy frees.  Sets queue their
 * changes under the list's lock, which only sets, subscribe and cancel
 * take, each for a walk of the list: a set never waits for a subscriber's
 * reading.  Each subscription has a ring its producers fill under that
 * lock and its one consumer empties without it: @tail is published by a
 * release store and read with acquire, @head likewise the other way.  A
 * full ring sets @overflow instead.  The eventfd is written only when the
 * consumer armed it (@armed) before it found the ring empty: a Dekker
 * pair of fences, so that either the producer sees @armed or the consumer
 * sees the new @tail.
 *
 * subs_lock, taken before any list's lock, keeps the process's lists
 * (for fork) and orders cancel against a destroy, which takes the store
 * from a subscription.  The fork handlers hold subs_lock and every list's
 * lock across fork(); the child unlinks every subscription, which are
 * its parent's (their threads and the eventfds' readers stayed there).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <polstore/subscribe.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "compiler.h"
#include "spinlock.h"
#include "store_internal.h"
#include "subscribe_internal.h"

#define SUB_CAPACITY_MAX 65536u
#define SUB_BATCH 64
#define SUB_LINGER_MS 1

struct _ps_subs {
	struct psi_spinlock lock;
	struct ps_sub *head; /* under @lock */
	struct ps_store *store;
	struct _ps_subs *next; /* the process's lists, under subs_lock */
};

struct ps_sub {
	/* Read by the producers, under the list's lock. */
	struct ps_sub *next;
	uint64_t start, end;
	struct ps_sub_event *ring;
	uint64_t mask;
	uint64_t tail;
	unsigned overflow; /* set by producers, taken by the consumer */
	unsigned closed;   /* 1: set by the destroy; 2: told */
	unsigned armed;	   /* the consumer sleeps on the eventfd */
	int efd;
	/* Under subs_lock: the store, NULL once a destroy or a fork took it away. */
	struct ps_store *store;
	pid_t pid; /* the process that subscribed: in another, a fork child's copy */
	ps_sub_fn fn;
	void *arg;
	pthread_t thread;
	unsigned stop;
	/* The consumer's, on a line of its own. */
	uint64_t head __attribute__((aligned(PSI_CACHELINE)));
};

static pthread_mutex_t subs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct _ps_subs *subs_all; /* under subs_lock */
/*
 * The fork handlers are installed.  Under subs_atfork_lock, which no fork
 * handler takes: glibc before 2.35 runs pthread_atfork() under the lock
 * that fork() holds across the prepare handlers, which take subs_lock.
 */
static bool subs_atfork_ok;
static pthread_mutex_t subs_atfork_lock = PTHREAD_MUTEX_INITIALIZER;

static void subs_fork_prepare(void)
{
	struct _ps_subs *l;

	pthread_mutex_lock(&subs_lock);
	for (l = subs_all; l; l = l->next)
		psi_spin_acquire(&l->lock);
}

static void subs_fork_parent(void)
{
	struct _ps_subs *l;

	for (l = subs_all; l; l = l->next)
		psi_spin_release(&l->lock);
	pthread_mutex_unlock(&subs_lock);
}

static void subs_fork_child(void)
{
	struct _ps_subs *l;
	struct ps_sub *sub;

	for (l = subs_all; l; l = l->next) {
		for (sub = l->head; sub; sub = sub->next)
			sub->store = NULL;
		l->head = NULL;
		PSI_WRITE_ONCE(l->store->rd.nsub, 0);
		psi_spin_release(&l->lock);
	}
	pthread_mutex_unlock(&subs_lock);
}

static bool subs_atfork_install(void)
{
	bool ok;

	pthread_mutex_lock(&subs_atfork_lock);
	if (!PSI_READ_ONCE(subs_atfork_ok))
		PSI_WRITE_ONCE(subs_atfork_ok,
				!pthread_atfork(subs_fork_prepare, subs_fork_parent,
						subs_fork_child));
	ok = PSI_READ_ONCE(subs_atfork_ok);
	pthread_mutex_unlock(&subs_atfork_lock);
	return ok;
}

__attribute__((constructor)) static void subs_init(void)
{
	(void)subs_atfork_install();
}

uint64_t ps_store_generation(const struct ps_store *store)
{
	/* Half the publication count: raised once a set's change is visible (store.h). */
	return store ? PSI_LOAD_ACQUIRE(store->rd.gen) >> 1 : 0;
}

/* Write the eventfd if the consumer armed it; after a change to what it reads. */
static void sub_wake(struct ps_sub *sub)
{
	/* Pairs with the consumer's fence between arming and looking at the ring. */
	PSI_FENCE(SEQ_CST);
	if (PSI_READ_ONCE(sub->armed) && PSI_XCHG(sub->armed, 0, RELAXED))
		(void)eventfd_write(sub->efd, 1);
}

/* Under the list's lock: queue [@start, @end) clipped to @sub's window. */
static bool sub_push(struct ps_sub *sub, uint64_t start, uint64_t end, uint64_t gen)
{
	uint64_t t = sub->tail;

	if (start >= sub->end || end <= sub->start)
		return false;
	if (t - PSI_LOAD_ACQUIRE(sub->head) > sub->mask) {
		PSI_STORE_RELEASE(sub->overflow, 1);
		return true;
	}
	PSI_ANNOTATE_HAPPENS_AFTER(&sub->head); /* the consumer read the slot: sub_take() */
	sub->ring[t & sub->mask] = (struct ps_sub_event){
		.start = start > sub->start ? start : sub->start,
		.end = end < sub->end ? end : sub->end,
		.gen = gen,
	};
	/* Pairs with the consumer's acquire of @tail: the slot is written. */
	PSI_ANNOTATE_HAPPENS_BEFORE(&sub->tail);
	PSI_STORE_RELEASE(sub->tail, t + 1);
	return true;
}

void psi_subs_notify(struct ps_store *s, uint64_t start, uint64_t end, const struct ps_set_op *ops,
		size_t n, uint64_t gen)
{
	struct _ps_subs *l = PSI_LOAD_ACQUIRE(s->rd.subs);
	struct ps_sub *sub;
	bool queued;
	size_t i;

	if (!l)
		return;
	PSI_ANNOTATE_HAPPENS_AFTER(&s->rd.subs); /* the list is initialised: subscribe */
	psi_spin_acquire(&l->lock);
	for (sub = l->head; sub; sub = sub->next) {
		if (ops)
			for (i = 0, queued = false; i < n; i++)
				queued |= sub_push(sub, ops[i].start, ops[i].end, gen);
		else
			queued = sub_push(sub, start, end, gen);
		if (queued)
			sub_wake(sub);
	}
	psi_spin_release(&l->lock);
}

void psi_subs_end(struct ps_store *s)
{
	struct _ps_subs *l, **pp;
	struct ps_sub *sub;

	if (!PSI_READ_ONCE(s->rd.subs))
		return;
	pthread_mutex_lock(&subs_lock);
	l = s->rd.subs;
	psi_spin_acquire(&l->lock);
	for (sub = l->head; sub; sub = sub->next) {
		sub->store = NULL;
		PSI_STORE_RELEASE(sub->closed, 1);
		sub_wake(sub);
	}
	l->head = NULL;
	PSI_WRITE_ONCE(s->rd.nsub, 0);
	PSI_WRITE_ONCE(s->rd.subs, NULL);
	psi_spin_release(&l->lock);
	for (pp = &subs_all; *pp != l; pp = &(*pp)->next)
		;
	*pp = l->next;
	pthread_mutex_unlock(&subs_lock);
	psi_free(l);
}

/* The consumer: take what is queued into @ev, merging neighbours. */
static size_t sub_take(struct ps_sub *sub, struct ps_sub_event *ev, size_t n)
{
	uint64_t h = sub->head, t = PSI_LOAD_ACQUIRE(sub->tail);
	size_t k = 0;

	PSI_ANNOTATE_HAPPENS_AFTER(&sub->tail); /* the slots are written: sub_push() */

	for (; h != t; h++) {
		const struct ps_sub_event *e = &sub->ring[h & sub->mask];
		struct ps_sub_event *last = k ? &ev[k - 1] : NULL;

		if (last && e->start <= last->end && last->start <= e->end) {
			last->start = e->start < last->start ? e->start : last->start;
			last->end = e->end > last->end ? e->end : last->end;
			last->gen = e->gen > last->gen ? e->gen : last->gen;
			continue;
		}
		if (k == n)
			break;
		ev[k++] = *e;
	}
	/* Pairs with the producers' acquire of @head: the slots are read. */
	PSI_ANNOTATE_HAPPENS_BEFORE(&sub->head);
	PSI_STORE_RELEASE(sub->head, h);
	if (h != t)
		return k;
	if (k < n && PSI_READ_ONCE(sub->overflow) && PSI_XCHG(sub->overflow, 0, ACQUIRE))
		ev[k++] = (struct ps_sub_event){ sub->start, sub->end, 0, PS_SUB_OVERFLOW };
	if (k < n && PSI_LOAD_ACQUIRE(sub->closed) == 1) {
		PSI_WRITE_ONCE(sub->closed, 2);
		ev[k++] = (struct ps_sub_event){ sub->start, sub->end, 0, PS_SUB_CLOSED };
	}
	return k;
}

static bool sub_pending(struct ps_sub *sub)
{
	return PSI_READ_ONCE(sub->tail) != sub->head || PSI_READ_ONCE(sub->overflow) ||
	       PSI_READ_ONCE(sub->closed) == 1;
}

/* Clear the descriptor, arm it, and write it again if something came meanwhile. */
static void sub_arm(struct ps_sub *sub)
{
	eventfd_t junk;

	(void)eventfd_read(sub->efd, &junk);
	PSI_WRITE_ONCE(sub->armed, 1);
	/* Pairs with the producers' fence in sub_wake(). */
	PSI_FENCE(SEQ_CST);
	if (sub_pending(sub) && PSI_XCHG(sub->armed, 0, RELAXED))
		(void)eventfd_write(sub->efd, 1);
}

static size_t sub_read(struct ps_sub *sub, struct ps_sub_event *ev, size_t n)
{
	size_t k = sub_take(sub, ev, n);

	/* Fewer than @n: nothing left; else more may wait, the descriptor stays readable. */
	if (k < n)
		sub_arm(sub);
	return k;
}

/*
 * A callback subscription's thread.  After a batch it lingers
 * SUB_LINGER_MS unarmed, so that the sets meanwhile queue without writing
 * the eventfd: while changes flow it wakes about once a linger, not once
 * a set.  It arms only when a take finds nothing.
 */
static void *sub_thread(void *arg)
{
	struct ps_sub *sub = arg;
	struct ps_sub_event ev[SUB_BATCH];
	struct pollfd p = { .fd = sub->efd, .events = POLLIN };
	eventfd_t junk;
	size_t i, k;

	while (!PSI_LOAD_ACQUIRE(sub->stop)) {
		k = sub_take(sub, ev, SUB_BATCH);
		for (i = 0; i < k && !PSI_LOAD_ACQUIRE(sub->stop); i++)
			sub->fn(sub, &ev[i], sub->arg);
		if (k == SUB_BATCH)
			continue;
		if (k) {
			/* A cancel's write wakes the linger: @stop was set before it. */
			(void)eventfd_read(sub->efd, &junk);
			if (!PSI_LOAD_ACQUIRE(sub->stop))
				(void)poll(&p, 1, SUB_LINGER_MS);
			continue;
		}
		sub_arm(sub);
		/* sub_arm() may have consumed the write of a cancel that set @stop before it. */
		if (!PSI_LOAD_ACQUIRE(sub->stop))
			(void)poll(&p, 1, -1);
	}
	return NULL;
}

static void sub_free(struct ps_sub *sub)
{
	if (sub->efd >= 0)
		close(sub->efd);
	psi_free(sub->ring);
	psi_free_aligned(sub);
}

/* Start @sub's thread with every signal blocked: signals are the program's threads'. */
static int sub_start(struct ps_sub *sub)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&sub->thread, NULL, sub_thread, sub);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

struct ps_sub *ps_store_subscribe(struct ps_store *store, uint64_t start, uint64_t end,
		unsigned capacity, ps_sub_fn fn, void *arg)
{
	struct _ps_subs *l = NULL;
	struct ps_sub *sub;
	uint64_t cap = 1;
	int err;

	if (!store || start >= end || !capacity || capacity > SUB_CAPACITY_MAX)
		return psi_err_null(EINVAL);
	while (cap < capacity)
		cap <<= 1;
	sub = psi_zalloc_aligned(sizeof(*sub));
	if (!sub)
		return psi_err_null(ENOMEM);
	sub->efd = -1;
	sub->ring = psi_alloc(cap * sizeof(*sub->ring));
	if (!PSI_READ_ONCE(store->rd.subs))
		l = psi_zalloc(sizeof(*l));
	if (!sub->ring || (!PSI_READ_ONCE(store->rd.subs) && !l)) {
		err = -ENOMEM;
		goto fail;
	}
	sub->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sub->efd < 0) {
		err = -errno;
		goto fail;
	}
	*sub = (struct ps_sub){ .start = start, .end = end, .ring = sub->ring, .mask = cap - 1,
		.armed = 1, .efd = sub->efd, .store = store, .pid = getpid(), .fn = fn,
		.arg = arg };
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sub->tail, sizeof(sub->tail)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sub->head, sizeof(sub->head)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sub->overflow, sizeof(sub->overflow)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sub->closed, sizeof(sub->closed)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sub->armed, sizeof(sub->armed)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sub->stop, sizeof(sub->stop)); /* atomics only */
	/* Without the handlers a child could find a lock held for good. */
	if (psi_unlikely(!PSI_READ_ONCE(subs_atfork_ok)) && !subs_atfork_install()) {
		err = -ENOMEM;
		goto fail;
	}
	err = fn ? sub_start(sub) : 0;
	if (err)
		goto fail;
	pthread_mutex_lock(&subs_lock);
	if (!store->rd.subs) {
		psi_spin_init(&l->lock);
		l->store = store;
		l->next = subs_all;
		subs_all = l;
		/* Pairs with the producers' acquire: the list is initialised. */
		PSI_ANNOTATE_HAPPENS_BEFORE(&store->rd.subs);
		PSI_STORE_RELEASE(store->rd.subs, l);
		l = NULL;
	}
	psi_spin_acquire(&store->rd.subs->lock);
	sub->next = store->rd.subs->head;
	store->rd.subs->head = sub;
	/* Pairs with the sets' acquire of @nsub: a set that counts @sub finds it linked. */
	PSI_STORE_RELEASE(store->rd.nsub, store->rd.nsub + 1);
	psi_spin_release(&store->rd.subs->lock);
	pthread_mutex_unlock(&subs_lock);
	psi_free(l);
	return sub;
fail:
	psi_free(l);
	sub_free(sub);
	return psi_err_null(-err);
}

int ps_sub_fd(const struct ps_sub *sub)
{
	return sub && !sub->fn ? sub->efd : -EINVAL;
}

int ps_sub_read(struct ps_sub *sub, struct ps_sub_event *ev, size_t n)
{
	if (!sub || !ev || !n || sub->fn)
		return -EINVAL;
	if (sub->pid != getpid())
		return -ECHILD;
	if (n > INT32_MAX)
		n = INT32_MAX;
	return (int)sub_read(sub, ev, n);
}

int ps_sub_cancel(struct ps_sub *sub)
{
	struct ps_sub **pp;
	struct _ps_subs *l;
	bool own;

	if (!sub)
		return 0;
	own = sub->fn && sub->pid == getpid();
	if (own && pthread_equal(pthread_self(), sub->thread))
		return -EDEADLK;
	pthread_mutex_lock(&subs_lock);
	if (sub->store) {
		l = sub->store->rd.subs;
		psi_spin_acquire(&l->lock);
		for (pp = &l->head; *pp != sub; pp = &(*pp)->next)
			;
		*pp = sub->next;
		PSI_WRITE_ONCE(sub->store->rd.nsub, sub->store->rd.nsub - 1);
		psi_spin_release(&l->lock);
		sub->store = NULL;
	}
	pthread_mutex_unlock(&subs_lock);
	if (own) {
		PSI_STORE_RELEASE(sub->stop, 1);
		(void)eventfd_write(sub->efd, 1);
		pthread_join(sub->thread, NULL);
	}
	sub_free(sub);
	return 0;
}
