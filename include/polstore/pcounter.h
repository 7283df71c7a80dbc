/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore pcounter: a batched per-thread counter (the kernel's percpu_counter), and on top of it
 * committed-memory accounting under an overcommit policy (vm_committed_as).  Each thread adds into
 * its own slot and folds it into the global count at +/-batch: a read is one load, off by less
 * than batch per thread holding a delta (docs/companions.md).
 */
#ifndef POLSTORE_PCOUNTER_H
#define POLSTORE_PCOUNTER_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Per-thread slots of a counter; threads beyond this many share slots. */
#define PS_PCOUNTER_SLOTS 64

struct ps_pcounter;

/**
 * struct ps_pcounter_snapshot - the approximate and exact value, read together
 * @approx: what ps_pcounter_read() returned at that moment
 * @exact: the global count plus every slot's delta
 * @nr_deltas: slots holding a non-zero delta
 * @batch: the batch in force
 * @bound: @batch * @nr_deltas; |@approx - @exact| <= @bound always
 */
struct ps_pcounter_snapshot {
	int64_t approx;
	int64_t exact;
	int nr_deltas;
	int32_t batch;
	int64_t bound;
};

/**
 * ps_pcounter_create() - create a counter
 * @initial: the initial value
 * @batch: the batch, 1 to INT32_MAX
 * Context: any thread; allocates.
 * Return: the counter, or NULL with errno EINVAL (@batch out of range) or ENOMEM.
 */
PS_API struct ps_pcounter *ps_pcounter_create(int64_t initial, int32_t batch);

/**
 * ps_pcounter_destroy() - free a counter
 * @pc: the counter, or NULL (a no-op)
 * Context: no other thread may use @pc during or after the call.
 */
PS_API void ps_pcounter_destroy(struct ps_pcounter *pc);

/**
 * ps_pcounter_add() - add @delta
 * @pc: the counter
 * @delta: any amount; |@delta| >= batch always goes to the global count
 * Context: any thread; never sleeps.  Touches only the calling thread's slot unless the delta
 * reaches the batch, then takes the counter's spinlock.
 * Return: 0, or -EINVAL when @pc is NULL.
 */
PS_API int ps_pcounter_add(struct ps_pcounter *pc, int64_t delta);

/**
 * ps_pcounter_read() - the approximate value: the global count alone
 * @pc: the counter
 * Context: any thread; one load, no lock.
 * Return: the value, within ps_pcounter_error_bound() of the exact sum; 0 when @pc is NULL.
 */
PS_API int64_t ps_pcounter_read(const struct ps_pcounter *pc);

/**
 * ps_pcounter_read_positive() - ps_pcounter_read(), negative values as 0
 * @pc: the counter
 * Context: any thread.
 * Return: max(ps_pcounter_read(@pc), 0).
 */
PS_API int64_t ps_pcounter_read_positive(const struct ps_pcounter *pc);

/**
 * ps_pcounter_sum() - the exact value: the global count plus every delta
 * @pc: the counter
 *
 * Exact when no add runs concurrently; otherwise each concurrent add is counted or not.
 * Context: any thread; takes the counter's spinlock, reads every slot.
 * Return: the value; 0 when @pc is NULL.
 */
PS_API int64_t ps_pcounter_sum(struct ps_pcounter *pc);

/**
 * ps_pcounter_compare() - compare the counter with @rhs, cheaply if possible
 * @pc: the counter
 * @rhs: the value to compare with
 *
 * Uses the approximate value when it is farther from @rhs than batch times the number of threads
 * that have used the counter (it cannot be on the other side then), the exact sum otherwise.
 * Context: any thread; may take the counter's spinlock.
 * Return: -1, 0 or 1 as the counter is below, equal to or above @rhs; 0 when @pc is NULL.
 */
PS_API int ps_pcounter_compare(struct ps_pcounter *pc, int64_t rhs);

/**
 * ps_pcounter_fold() - move every thread's delta into the global count
 * @pc: the counter
 *
 * Afterwards ps_pcounter_read() is exact until the next add.
 * Context: any thread; takes the counter's spinlock.
 * Return: 0, or -EINVAL when @pc is NULL.
 */
PS_API int ps_pcounter_fold(struct ps_pcounter *pc);

/**
 * ps_pcounter_set_batch() - change the batch
 * @pc: the counter
 * @batch: the new batch, 1 to INT32_MAX
 *
 * When the batch shrinks, every delta is folded after the new batch is installed, so no slot keeps
 * more than the new batch allows and a strict check right after the switch is exact.  Adds that
 * race with the switch may still use the old batch once.
 * Context: any thread; takes the counter's spinlock when folding.
 * Return: 0, or -EINVAL when @pc is NULL or @batch out of range.
 */
PS_API int ps_pcounter_set_batch(struct ps_pcounter *pc, int32_t batch);

/**
 * ps_pcounter_batch() - the batch in force
 * @pc: the counter
 * Context: any thread.
 * Return: the batch, or -EINVAL when @pc is NULL.
 */
PS_API int32_t ps_pcounter_batch(const struct ps_pcounter *pc);

/**
 * ps_pcounter_threads() - slots that have ever been used on this counter
 * @pc: the counter
 * Context: any thread.
 * Return: 0 to PS_PCOUNTER_SLOTS, or -EINVAL when @pc is NULL.
 */
PS_API int ps_pcounter_threads(const struct ps_pcounter *pc);

/**
 * ps_pcounter_snapshot() - read approximate and exact value at one moment
 * @pc: the counter
 * @snap: where to store them
 *
 * Taken under the counter's lock, so no fold is half done: every slot then holds less than the
 * batch, and |approx - exact| <= @snap->bound.
 * Context: any thread; takes the counter's spinlock.
 * Return: 0, or -EINVAL when @pc or @snap is NULL.
 */
PS_API int ps_pcounter_snapshot(struct ps_pcounter *pc, struct ps_pcounter_snapshot *snap);

/**
 * ps_pcounter_error_bound() - largest |approximate - exact| for a batch
 * @batch: the batch
 * @nthreads: threads adding to the counter
 * Context: any thread.
 * Return: @batch * min(@nthreads, PS_PCOUNTER_SLOTS), or -EINVAL for a @batch below 1 or a
 * negative @nthreads.
 */
PS_API int64_t ps_pcounter_error_bound(int32_t batch, int nthreads);

/**
 * ps_pcounter_compute_batch() - the batch for a total, as the kernel computes
 * vm_committed_as_batch
 * @total: the total the counter measures against (pages of memory)
 * @ncpus: number of CPUs (threads adding)
 * @strict: strict accounting (overcommit NEVER)
 *
 * Strict: min(@total / @ncpus / 256, INT32_MAX) (0.4% of each CPU's share); otherwise min(@total /
 * @ncpus / 4, INT32_MAX) (25%); at least max(2 * @ncpus, 32) either way.
 * Context: any thread.
 * Return: the batch (>= 32), or -EINVAL when @ncpus < 1.
 */
PS_API int32_t ps_pcounter_compute_batch(uint64_t total, int ncpus, bool strict);

/* ---- Committed memory under an overcommit policy ------------------------- */

/** enum ps_overcommit - overcommit policies, numbered as vm.overcommit_memory. */
enum ps_overcommit {
	PS_OVERCOMMIT_GUESS, /* refuse only a single request larger than the total */
	PS_OVERCOMMIT_ALWAYS, /* never refuse */
	PS_OVERCOMMIT_NEVER, /* refuse when committed would exceed the commit limit */
};

/** Number of policies. */
#define PS_OVERCOMMIT_COUNT 3

struct ps_commit;

/**
 * ps_overcommit_name() - "guess", "always" or "never"
 * @mode: the policy
 * Context: any thread.
 * Return: a static string, or NULL for a value that is not a policy.
 */
PS_API const char *ps_overcommit_name(enum ps_overcommit mode);

/**
 * ps_overcommit_from_name() - parse a name as ps_overcommit_name() prints it
 * @name: the name
 * Context: any thread.
 * Return: the policy (>= 0), or -EINVAL for NULL or an unknown name.
 */
PS_API int ps_overcommit_from_name(const char *name);

/**
 * ps_commit_create() - committed-memory accounting for a machine
 * @mode: the overcommit policy
 * @total_pages: memory (plus swap) in pages; also the initial commit limit
 * @ncpus: CPUs (threads) that will commit, or 0 for the online CPUs
 *
 * The counter's batch is ps_pcounter_compute_batch(@total_pages, @ncpus, @mode ==
 * PS_OVERCOMMIT_NEVER).
 * Context: any thread; allocates.
 * Return: the object, or NULL with errno EINVAL (unknown @mode, negative @ncpus, @total_pages
 * above INT64_MAX) or ENOMEM.
 */
PS_API struct ps_commit *ps_commit_create(enum ps_overcommit mode, uint64_t total_pages,
		int ncpus);

/**
 * ps_commit_destroy() - free the accounting
 * @cm: the object, or NULL (a no-op)
 * Context: no other thread may use @cm during or after the call.
 */
PS_API void ps_commit_destroy(struct ps_commit *cm);

/**
 * ps_commit_set_mode() - switch the overcommit policy
 * @cm: the object
 * @mode: the new policy
 *
 * Recomputes the batch; switching to NEVER folds every thread's delta into the global count first
 * (ps_pcounter_set_batch()), so the first strict check after the switch sees the exact committed
 * total.
 * Context: any thread.
 * Return: 0, or -EINVAL for a NULL @cm or an unknown @mode.
 */
PS_API int ps_commit_set_mode(struct ps_commit *cm, enum ps_overcommit mode);

/**
 * ps_commit_mode() - the policy in force
 * @cm: the object
 * Context: any thread.
 * Return: the policy, or -EINVAL when @cm is NULL.
 */
PS_API int ps_commit_mode(const struct ps_commit *cm);

/**
 * ps_commit_set_limit() - set the commit limit NEVER enforces
 * @cm: the object
 * @limit: pages, >= 0
 * Context: any thread.
 * Return: 0, or -EINVAL for a NULL @cm or a negative @limit.
 */
PS_API int ps_commit_set_limit(struct ps_commit *cm, int64_t limit);

/**
 * ps_commit_limit() - the commit limit
 * @cm: the object
 * Context: any thread.
 * Return: the limit, or -EINVAL when @cm is NULL.
 */
PS_API int64_t ps_commit_limit(const struct ps_commit *cm);

/**
 * ps_commit_charge() - commit @pages, if the policy allows it
 * @cm: the object
 * @pages: pages to commit, >= 0
 *
 * As __vm_enough_memory(): the pages are added first, then checked.  ALWAYS accepts; GUESS refuses
 * only @pages above the total; NEVER compares the committed total with the limit
 * (ps_pcounter_compare(): exact near the limit) and takes the pages back when it is exceeded.
 * Context: any thread; never sleeps.
 * Return: 0; -ENOMEM when refused (nothing stays committed); -EINVAL for a NULL @cm or a negative
 * @pages.
 */
PS_API int ps_commit_charge(struct ps_commit *cm, int64_t pages);

/**
 * ps_commit_uncharge() - return committed pages
 * @cm: the object
 * @pages: pages to return, >= 0
 * Context: any thread; never sleeps.
 * Return: 0, or -EINVAL for a NULL @cm or a negative @pages.
 */
PS_API int ps_commit_uncharge(struct ps_commit *cm, int64_t pages);

/**
 * ps_commit_committed() - pages committed now
 * @cm: the object
 * @exact: sum every thread's delta (ps_pcounter_sum()) rather than read the approximate global
 *         count
 * Context: any thread.
 * Return: the pages; 0 when @cm is NULL.
 */
PS_API int64_t ps_commit_committed(const struct ps_commit *cm, bool exact);

/**
 * ps_commit_counter() - the counter behind the accounting
 * @cm: the object
 *
 * For measurements (ps_pcounter_snapshot(), ps_pcounter_batch()).  Adding to it directly bypasses
 * the policy.
 * Context: any thread.
 * Return: the counter, or NULL when @cm is NULL.
 */
PS_API struct ps_pcounter *ps_commit_counter(const struct ps_commit *cm);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_PCOUNTER_H */
