/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore and liburcu threads: the registration rules in one place.
 *
 * RCU (memb flavour) and SEQLOCK stores: nothing to do.  A thread is
 * registered with liburcu the first time it reads such a store and is
 * unregistered automatically when it exits.  ps_rcu_unregister_thread() lets
 * a long-lived thread that stops using stores leave earlier.
 *
 * RCU_QSBR stores: a reader costs nothing only while its thread is "online"
 * and reports quiescent states.  Two ways to read:
 *  - Do nothing: a thread that is not online enters and leaves an extended
 *    quiescent state around every read-side section (correct, but each
 *    lookup pays a store and a full fence).
 *  - Fast path: call ps_qsbr_thread_online() once, then ps_qsbr_quiescent()
 *    regularly at points where the thread holds no borrowed policy (e.g.
 *    once per loop iteration of a worker), and ps_qsbr_thread_offline()
 *    before the thread blocks, sleeps or waits for anything.  Memory that
 *    sets retire is freed only once every online thread has passed a
 *    quiescent state.  An online thread that never reports one holds up
 *    every qsbr grace period: sets go on without waiting while retired
 *    ranges pile up, until 32 MiB are in flight (ranges and the
 *    records that list them: 262,144 ranges when each set retires one);
 *    past that, each set made outside every section waits for a grace
 *    period, for as long as the stall lasts, and ps_store_synchronize()
 *    waits too.  polstore warns on stderr once such a wait has lasted
 *    10 s, naming the thread (ps_qsbr_set_stall_warning() routes, times or
 *    turns off the warnings).
 * Threads are unregistered from liburcu at exit whatever they did, by a
 * thread-specific-data key polstore creates before any thread can register
 * (when the first RCU, RCU_QSBR or SEQLOCK store or RCU id map is created,
 * or a thread goes online): when pthread_key_create() fails, those calls
 * fail (errno / return EAGAIN or ENOMEM) rather than leave a thread
 * registered past its exit.
 *
 * A thread that ends inside read-side sections (pthread_exit() in a
 * ps_store_foreach() callback or between ps_store_read_lock() and
 * ps_store_read_unlock(), or cancellation at a cancellation point there)
 * has them closed when it exits, so writers and grace periods waiting for
 * it carry on (RCU, RCU_QSBR and SEQLOCK stores, RCU id maps).  Its
 * cancellation cleanup handlers still run inside the sections and may use
 * what it borrowed; the sections are closed by polstore's
 * thread-specific-data destructor, and from then on the policies it
 * borrowed are no longer protected: another thread-specific-data
 * destructor must not touch them.  References it took (ps_store_lookup())
 * are its to put, in a cleanup handler, or they leak.  This covers the
 * threads polstore registered; a thread the application registered with
 * liburcu itself must leave its sections before it unregisters.
 * SPIN and RWLOCK read-side sections and foreach walks hold the store's
 * lock: a thread must not exit or be cancelled there (the lock would stay
 * held, as a mutex would).
 *
 * fork(): in the child, polstore's fork handler takes every thread it
 * registered, but the forking thread, out of liburcu's registries (those
 * threads no longer exist there), so the child may start threads, read and
 * wait for grace periods.  Do not call fork() inside a read-side section
 * of an RCU or SEQLOCK store or RCU id map, nor while online (RCU_QSBR):
 * fork() may wait for a grace period in progress, which would wait for
 * the caller.  Threads the application registered with liburcu itself
 * must unregister before fork(), as liburcu requires.  docs/fork.md has
 * the rules.
 *
 * Unloading the shared library (dlclose()): destroy every store and map
 * first, and have every thread that is still alive and read an RCU,
 * RCU_QSBR or SEQLOCK store or RCU map call ps_rcu_unregister_thread().
 * The library deletes its thread-exit keys when it is unloaded, so a
 * thread that exits afterwards calls nothing in it; a thread that was not
 * unregistered stays in liburcu's registry, which matters when liburcu
 * itself stays loaded (the program or another library uses it).  The
 * reclaim threads polstore starts for SEQLOCK, RCU and RCU_QSBR stores are
 * stopped and joined when the library is unloaded (they are idle once
 * every store was destroyed).
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
 *
 * Context: the calling thread, outside any read-side section.
 * Return: 0, or -EAGAIN / -ENOMEM when polstore cannot create the
 * thread-specific-data key that unregisters the thread at exit
 * (pthread_key_create() failed): the thread is left as it was.
 */
PS_API int ps_qsbr_thread_online(void);

/**
 * ps_qsbr_quiescent() - report a quiescent state for the calling thread
 *
 * The caller asserts that it holds no pointer borrowed from an RCU_QSBR
 * store.  A no-op for a thread that is not online.
 *
 * Context: an online thread, outside any read-side section.
 */
PS_API void ps_qsbr_quiescent(void);

/**
 * ps_qsbr_thread_offline() - enter an extended quiescent state
 *
 * After this the thread may block for as long as it likes without stalling
 * writers.  Lookups on QSBR stores stay correct (they go online around each
 * read-side section).  A no-op for a thread that is not online.
 *
 * Context: the calling thread, outside any read-side section.
 */
PS_API void ps_qsbr_thread_offline(void);

/**
 * ps_qsbr_thread_is_online() - is the calling thread online for urcu-qsbr?
 *
 * Context: the calling thread.
 * Return: true when online.
 */
PS_API bool ps_qsbr_thread_is_online(void);

/**
 * ps_rcu_unregister_thread() - leave liburcu now rather than at thread exit
 *
 * Unregisters the calling thread from both flavours it may be registered
 * with (only if polstore registered it), and cancels its thread-exit hook.
 * Harmless when it is not registered; it registers again on its next read
 * of an RCU or SEQLOCK store.  Call it in every thread still alive before
 * the library is dlclose()d.
 *
 * Context: the calling thread, outside any read-side section.
 */
PS_API void ps_rcu_unregister_thread(void);

/**
 * struct ps_qsbr_stall - one stall warning (ps_qsbr_set_stall_warning())
 * @tid: the online thread that has reported no quiescent state (its Linux
 *       thread id, gettid()), or 0 when no thread polstore registered is
 *       behind (a thread the application registered with liburcu itself
 *       may be: liburcu's registry is not polstore's to read)
 * @name: that thread's name (pthread_setname_np()), "" if unknown
 * @seconds: how long the waiter has waited for the grace period so far
 * @waiter: who waits: "polstore's rcu-qsbr reclaim thread" (freeing what
 *          sets retired; sets go on without it until the bound of
 *          polstore/store.h), or a set or synchronize of an RCU_QSBR store
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
 * @timeout_ms: how long a wait for a qsbr grace period may last before it
 *              is reported; 0 turns the warnings off
 * @fn: receives each warning; NULL prints it on stderr (the default)
 * @arg: passed to @fn
 *
 * As the kernel's RCU CPU stall warnings: once polstore has waited
 * @timeout_ms for a qsbr grace period (its reclaim thread, or a set or
 * ps_store_synchronize() of an RCU_QSBR store), every online thread that
 * has not reported a quiescent state since the grace period began is
 * reported, by thread id and name, with how long the wait has lasted; the
 * same wait is reported again every three timeouts while it lasts.  The
 * default is 10 s, or what the environment variable POLSTORE_QSBR_STALL_MS
 * says when the library is loaded (a number of ms; 0: off).  The reports
 * come from a watchdog thread polstore starts on its first such wait,
 * with every signal blocked; @fn runs there, holding no polstore lock, and
 * must not wait for a grace period.
 *
 * Context: any thread, at any time; applies to waits in progress too.
 * Return: 0, or -EINVAL when @timeout_ms exceeds 10^9 (nothing changed).
 */
PS_API int ps_qsbr_set_stall_warning(unsigned long timeout_ms, ps_qsbr_stall_fn fn, void *arg);

/**
 * ps_rcu_barrier() - wait for every deferred free polstore has queued
 *
 * When it returns, everything queued on polstore's reclaim threads before
 * the call has been released: the ranges earlier sets of every SEQLOCK,
 * RCU and RCU_QSBR store retired (their policy references dropped), and
 * every store handed to ps_store_destroy_deferred() (freed), but for a
 * store whose lock a reader still held then (a SPIN or RWLOCK section or
 * walk, a SEQLOCK walk): that one is freed once the lock is let go,
 * tried again every 10 ms, and not waited for.  Call it before
 * ps_set_alloc_ops() or dlclose(), for instance.
 *
 * Context: any thread outside every read-side section of an RCU, SEQLOCK
 * or RCU_QSBR store or RCU id map (it waits for grace periods of both
 * flavours); an online QSBR thread goes offline for the wait and back
 * online after it.  May sleep.
 * Return: 0, or -EDEADLK (nothing waited for) inside a memb read-side
 * section or an automatic RCU_QSBR section (polstore/store.h).
 */
PS_API int ps_rcu_barrier(void);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_RCU_H */
