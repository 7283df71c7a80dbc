/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore and liburcu threads: registration, QSBR online and offline
 * states, stall warnings, thread exit and unloading.  RCU and SEQLOCK
 * stores need no call: a thread registers on its first read and leaves at
 * exit.  RCU_QSBR stores read for free on a thread that is online and
 * reports quiescent states.  The rules in full: docs/context.md, "Threads".
 */
#ifndef POLSTORE_RCU_H
#define POLSTORE_RCU_H

#include <stdbool.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * ps_qsbr_thread_online() - register with urcu-qsbr if needed, go online
 * Context: the calling thread, outside any read-side section.
 * Return: 0, or -EAGAIN / -ENOMEM when the key that unregisters the thread
 * at exit cannot be made (pthread_key_create()): the thread is as it was.
 */
PS_API int ps_qsbr_thread_online(void);

/**
 * ps_qsbr_quiescent() - report a quiescent state for the calling thread
 *
 * The caller asserts that it holds no pointer borrowed from an RCU_QSBR
 * store.  A no-op for a thread that is not online.
 * Context: an online thread, outside any read-side section.
 */
PS_API void ps_qsbr_quiescent(void);

/**
 * ps_qsbr_thread_offline() - enter an extended quiescent state
 *
 * The thread may then block as long as it likes without stalling writers;
 * its lookups go online around each section.  No-op when not online.
 * Context: the calling thread, outside any read-side section.
 */
PS_API void ps_qsbr_thread_offline(void);

/**
 * ps_qsbr_thread_is_online() - is the calling thread online for urcu-qsbr?
 * Context: the calling thread.
 * Return: true when online.
 */
PS_API bool ps_qsbr_thread_is_online(void);

/**
 * ps_rcu_unregister_thread() - leave liburcu now rather than at thread exit
 *
 * From both flavours, if polstore registered the thread; its next read
 * registers it again.  Call it in every live thread before dlclose().
 * Context: the calling thread, outside any read-side section.
 */
PS_API void ps_rcu_unregister_thread(void);

/**
 * struct ps_qsbr_stall - one stall warning (ps_qsbr_set_stall_warning())
 * @tid: the online thread behind (gettid()), or 0 when no thread polstore
 *       registered is (docs/context.md)
 * @name: that thread's name (pthread_setname_np()), "" if unknown
 * @seconds: how long the waiter has waited for the grace period so far
 * @waiter: who waits: "polstore's rcu-qsbr reclaim thread", or a set or
 *          synchronize of an RCU_QSBR store
 * @waiter_tid: the waiting thread's id
 */
struct ps_qsbr_stall {
	int tid;
	char name[16];
	double seconds;
	const char *waiter;
	int waiter_tid;
};

/** typedef ps_qsbr_stall_fn - receives a stall warning; @stall is valid during the call. */
typedef void (*ps_qsbr_stall_fn)(const struct ps_qsbr_stall *stall, void *arg);

/**
 * ps_qsbr_set_stall_warning() - warn when an online QSBR thread holds up a grace period
 * @timeout_ms: how long a qsbr grace period may be waited for before it is
 *              reported; 0 turns the warnings off
 * @fn: receives each warning; NULL prints it on stderr (the default)
 * @arg: passed to @fn
 *
 * As the kernel's RCU CPU stall warnings: each online thread behind is
 * reported, again every three timeouts.  Default 10 s, or
 * POLSTORE_QSBR_STALL_MS at load (docs/context.md, "Stall warnings").
 * Context: any thread, at any time; applies to waits in progress too.  @fn
 * runs on a watchdog thread and must not wait for a grace period.
 * Return: 0, or -EINVAL when @timeout_ms exceeds 10^9 (nothing changed).
 */
PS_API int ps_qsbr_set_stall_warning(unsigned long timeout_ms, ps_qsbr_stall_fn fn, void *arg);

/**
 * ps_rcu_barrier() - wait for every deferred free polstore has queued
 *
 * Releases what was queued before the call: SEQLOCK stores' batches of
 * retired ranges (their policy references dropped) and deferred-destroyed
 * stores, but for one whose lock a reader still holds; RCU stores keep
 * what they retire (ps_store_synchronize(): docs/context.md).  Call it
 * before ps_set_alloc_ops() or dlclose(), for instance.
 * Context: outside every read-side section of an RCU, SEQLOCK or RCU_QSBR
 * store or RCU id map; an online QSBR thread goes offline.  May sleep.
 * Return: 0, or -EDEADLK (nothing waited for) inside a memb read-side
 * section or an automatic RCU_QSBR section (docs/context.md).
 */
PS_API int ps_rcu_barrier(void);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_RCU_H */
