/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore change subscription: a store's generation, one load a cache compares, and
 * subscriptions to a window of pages, polled or called back.  Guide: docs/runtime.md,
 * "Knowing when a policy changed".
 */
#ifndef POLSTORE_SUBSCRIBE_H
#define POLSTORE_SUBSCRIBE_H

#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ps_store;
struct ps_sub;

/** An event's flag: the queue was full, changes were missed; re-read the window. */
#define PS_SUB_OVERFLOW (1U << 0)
/** An event's flag: the store was destroyed; the last event of the subscription. */
#define PS_SUB_CLOSED (1U << 1)

/**
 * struct ps_sub_event - what a subscription reports
 * @start: the first page changed, within the window
 * @end: the page after the last
 * @gen: the store's generation once readers saw the change (0 with a flag)
 * @flags: 0; PS_SUB_OVERFLOW: the queue was full, changes were missed, re-read the
 *         window [@start, @end); PS_SUB_CLOSED: the store was destroyed, the last event
 */
struct ps_sub_event {
	uint64_t start, end;
	uint64_t gen;
	unsigned flags;
};

/**
 * typedef ps_sub_fn - callback of a subscription, on the subscription's thread
 *
 * @ev is the callback's for the call.  It may call any polstore function but
 * ps_sub_cancel() of @sub.
 */
typedef void (*ps_sub_fn)(struct ps_sub *sub, const struct ps_sub_event *ev, void *arg);

/**
 * ps_store_generation() - the store's change generation
 * @store: the store
 *
 * A count that grows after each ps_store_set() or ps_store_set_many()
 * that succeeds, once readers see its change.  A cache loads it
 * before its lookup and keeps the answer while the count stays the same.
 * Context: any thread, inside read-side sections too; one acquire load.
 * Return: the generation (0 for a new store and for a NULL @store).
 */
PS_API uint64_t ps_store_generation(const struct ps_store *store);

/**
 * ps_store_subscribe() - report the changes to a window of pages
 * @store: the store
 * @start: the window's first page
 * @end: the page after its last (@start < @end)
 * @capacity: events the queue holds (1 .. 65536; rounded up to a power of two)
 * @fn: NULL for a polled subscription (ps_sub_fd(), ps_sub_read()), else
 *      called for each event on a thread the subscription starts
 * @arg: @fn's last argument
 *
 * Each set that changes pages of the window queues the part it changed
 * after readers see it; a full queue marks an overflow instead.  No set
 * waits for a subscriber.  A destroy of @store ends the subscription with
 * a PS_SUB_CLOSED event; the handle lives until ps_sub_cancel().
 * Context: any thread outside read-side sections; allocates; opens an
 * eventfd and, with @fn, starts a thread.
 * Return: the subscription, or NULL with errno EINVAL (a NULL @store, an
 * empty window, @capacity out of bounds), ENOMEM, or the error of
 * eventfd(2) or pthread_create(3); nothing changed then.
 */
PS_API struct ps_sub *ps_store_subscribe(struct ps_store *store, uint64_t start, uint64_t end,
		unsigned capacity, ps_sub_fn fn, void *arg);

/**
 * ps_sub_fd() - the file descriptor a polled subscription wakes
 * @sub: a subscription without a callback
 *
 * Readable (poll(2), epoll(7)) while ps_sub_read() has an event to give; @sub's, not to close.
 * Context: any thread.
 * Return: the descriptor; -EINVAL for a NULL @sub or one with a callback.
 */
PS_API int ps_sub_fd(const struct ps_sub *sub);

/**
 * ps_sub_read() - take the queued events of a polled subscription
 * @sub: a subscription without a callback
 * @ev: room for @n events
 * @n: at most this many
 *
 * Events that overlap or touch the one before are merged into one.  A
 * PS_SUB_OVERFLOW event comes after the events queued before the queue
 * filled.  One thread at a time reads a subscription.
 * Context: any thread; never blocks.
 * Return: the number of events written, 0 when none is queued; -EINVAL
 * for a NULL argument, @n of 0 or a subscription with a callback; -ECHILD
 * for a subscription a fork() child inherited.
 */
PS_API int ps_sub_read(struct ps_sub *sub, struct ps_sub_event *ev, size_t n);

/**
 * ps_sub_cancel() - end a subscription and free it
 * @sub: the subscription, or NULL (a no-op)
 *
 * After it returns no event of @sub is queued or called back; in a fork()
 * child, it frees the child's copy of a parent's subscription.
 * Context: any thread outside read-side sections but @sub's own callback;
 * waits for a callback in progress.
 * Return: 0; -EDEADLK from @sub's callback (nothing changed).
 */
PS_API int ps_sub_cancel(struct ps_sub *sub);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_SUBSCRIBE_H */
