/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore store: a map from half-open index ranges [start, end) to policies, as the kernel's
 * struct shared_policy, with one of five synchronisation variants (enum ps_sync) per store.
 * Every lookup is linearizable with concurrent sets; a set or a batch is all or nothing and
 * atomic to readers.  Lookups that take no reference write nothing shared under RCU, RCU_QSBR
 * and, but for its lock fallback, SEQLOCK.  Guide: docs/store.md; calling contexts:
 * docs/context.md (in share/doc/libpolstore-dev/).
 */
#ifndef POLSTORE_STORE_H
#define POLSTORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>
#include <polstore/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/** enum ps_sync - how a store synchronises readers and writers. */
enum ps_sync {
	PS_SYNC_SPIN,	  /* one spinlock around the tree (bounded spin, then yield) */
	PS_SYNC_RWLOCK,	  /* writer-preferring; readers on per-thread cache lines */
	PS_SYNC_SEQLOCK,  /* readers retry when a writer intervened, then lock */
	PS_SYNC_RCU,	  /* liburcu memb; readers never block, retry or write shared */
	PS_SYNC_RCU_QSBR, /* liburcu qsbr; zero-cost sections for online threads */
};

/** Number of variants; loop `for (s = 0; s < PS_SYNC_COUNT; s++)`. */
#define PS_SYNC_COUNT 5

struct ps_store;

/**
 * ps_sync_name() - the variant's name: "spin", "rwlock", "seqlock", "rcu", "rcu-qsbr"
 * @sync: the variant
 * Context: any thread.
 * Return: a static string, or NULL for a value that is not a variant.
 */
PS_API const char *ps_sync_name(enum ps_sync sync);

/**
 * ps_sync_from_name() - parse a variant name as ps_sync_name() prints it
 * @name: the name
 * Context: any thread.
 * Return: the variant (>= 0), or -EINVAL for NULL or an unknown name.
 */
PS_API int ps_sync_from_name(const char *name);

/* What a variant is, as ps_sync_caps() reports it. */
#define PS_CAP_LOCK 0x1u /* writers take a lock readers or walks wait for (lock_stat) */
#define PS_CAP_RCU 0x2u	 /* readers use liburcu: a reading thread registers (rcu.h) */
#define PS_CAP_QSBR 0x4u /* liburcu's qsbr flavour: online threads read for free */

/**
 * ps_sync_caps() - what a variant is, for programs that treat variants alike
 * @sync: the variant
 * Context: any thread.
 * Return: the PS_CAP_* bits of @sync; 0 for a value that is not a variant.
 */
PS_API unsigned ps_sync_caps(enum ps_sync sync);

/**
 * ps_store_create() - create an empty store
 * @sync: the synchronisation variant
 * Context: any thread; allocates.
 * Return: the store, or NULL with errno EINVAL (unknown @sync), ENOMEM, or
 * EAGAIN (SEQLOCK, RCU, RCU_QSBR: no thread-exit key, docs/context.md "Threads").
 */
PS_API struct ps_store *ps_store_create(enum ps_sync sync);

/**
 * ps_store_destroy() - free a store and drop its policy references
 * @store: the store, or NULL (a no-op)
 * Context: see docs/context.md; no other thread may use @store during or after the call (else:
 * ps_store_destroy_deferred()); references taken stay valid; an object attached: abort (attach.h).
 */
PS_API void ps_store_destroy(struct ps_store *store);

/**
 * ps_store_destroy_deferred() - free a store once no reader can still use it, never waiting
 * @store: the store, which the caller has made unreachable for new readers
 * Context: see docs/context.md, "Retiring a store": in sections too, no writer during or after.
 * Return: 0; -EINVAL for NULL; -EBUSY with an object attached (polstore/attach.h); -ENOMEM or
 * -EAGAIN (no memory, no reclaim thread).  On error @store is as before.
 */
PS_API int ps_store_destroy_deferred(struct ps_store *store);

/**
 * ps_sync_read_lock() - open a section in which stores of a variant are not freed
 * @sync: the variant of the stores the section finds
 *
 * A store loaded (acquire) in the section outlives it, even when destroyed deferred.
 * Context: any thread, which closes it with the same @sync (docs/context.md, "Retiring a store").
 * Return: 0; -EINVAL (not a variant); -EAGAIN or -ENOMEM (no thread-exit key; nothing opened).
 */
PS_API int ps_sync_read_lock(enum ps_sync sync);

/**
 * ps_sync_read_unlock() - close a section that ps_sync_read_lock() opened
 * @sync: the variant given to ps_sync_read_lock()
 * Context: the opener, same @sync (not a variant: ignored; none open: abort, docs/context.md).
 */
PS_API void ps_sync_read_unlock(enum ps_sync sync);

/**
 * ps_store_sync_kind() - the variant a store was created with
 * @store: the store
 * Context: any thread.
 * Return: the variant, or -EINVAL when @store is NULL.
 */
PS_API int ps_store_sync_kind(const struct ps_store *store);

/**
 * ps_store_set() - give [@start, @end) the policy @pol
 * @store: the store
 * @start: first index of the range
 * @end: one past the last index; must be > @start
 * @pol: the policy; NULL or a PS_MPOL_DEFAULT policy removes what is there
 *
 * Replaces what is there, as shared_policy_replace() does, with a reference of its own to @pol.
 * Context: see docs/context.md; allocates.
 * Return: 0; -EINVAL when @store is NULL or @start >= @end; -ENOMEM;
 * -EDEADLK (nothing changed) where docs/context.md says so.
 */
PS_API int ps_store_set(struct ps_store *store, uint64_t start, uint64_t end,
		struct ps_policy *pol);

/**
 * ps_store_synchronize() - wait until the store holds references only for its ranges
 * @store: the store
 * Context: see docs/context.md, note 5; an online RCU_QSBR thread goes offline.
 * Return: 0; -EINVAL for NULL; -EDEADLK (nothing waited for) inside a section it would wait for.
 */
PS_API int ps_store_synchronize(struct ps_store *store);

/**
 * ps_store_lookup() - the policy covering @idx, with a new reference
 * @store: the store
 * @idx: the index
 * Context: see docs/context.md; may allocate a hot policy's per-CPU stripes.
 * Return: the policy, which the caller must ps_policy_put(); NULL when no range covers @idx
 * (errno 0), @store is NULL (errno EINVAL), or in this thread's SPIN section (errno EDEADLK).
 */
PS_API struct ps_policy *ps_store_lookup(struct ps_store *store, uint64_t idx);

/**
 * ps_store_read_lock() - open a read-side section for borrowed lookups
 * @store: the store
 * Context: see docs/context.md; short; nests, but not in a SPIN section of @store.
 */
PS_API void ps_store_read_lock(struct ps_store *store);

/**
 * ps_store_read_unlock() - close the section ps_store_read_lock() opened
 * @store: the store
 * Context: the thread that called ps_store_read_lock() on @store; with no
 * section to close, a message and abort() (docs/context.md, "Misuse").
 */
PS_API void ps_store_read_unlock(struct ps_store *store);

/**
 * ps_store_lookup_borrow() - the policy covering @idx, borrowed, no reference
 * @store: the store
 * @idx: the index
 * Context: inside ps_store_read_lock() on @store (docs/context.md).
 * Return: the policy, valid until ps_store_read_unlock(); NULL for a miss or a NULL @store.
 */
PS_API const struct ps_policy *ps_store_lookup_borrow(struct ps_store *store, uint64_t idx);

/**
 * ps_store_lookup_copy() - the policy covering @idx, copied out: one call, no reference
 * @store: the store
 * @idx: the index
 * @view: from PS_POLICY_VIEW_INIT() (size, mask words wanted); gets the mode,
 *        flags, weight and mask words, or PS_MPOL_DEFAULT and an empty mask
 * Context: see docs/context.md; a section of its own.
 * Return: 1 when a policy covers @idx, 0 when none does; -EINVAL (@view untouched) when @store
 * or @view is NULL or @view->size or @view->nwords is wrong; -EDEADLK in a SPIN section.
 */
PS_API int ps_store_lookup_copy(struct ps_store *store, uint64_t idx, struct ps_policy_view *view);

/**
 * ps_store_lookup_node() - the node an allocation of page @idx should use: one call
 * @store: the store
 * @idx: the page index (the lookup key and the interleave index)
 * @local_node: the node of the allocating CPU, 0 .. PS_MAX_NUMNODES - 1
 * Context: see docs/context.md; a section of its own.
 * Return: ps_policy_node() of the covering policy, a node with memory; -EINVAL
 * when @store is NULL or @local_node out of range; -EDEADLK as lookup_copy.
 */
PS_API int ps_store_lookup_node(struct ps_store *store, uint64_t idx, int local_node);

/**
 * typedef ps_foreach_fn - callback of ps_store_foreach() and ps_store_foreach_range()
 *
 * @pol is borrowed for the call; a non-zero return stops the walk.  It may call what the
 * "callback" column of docs/context.md allows.
 */
typedef int (*ps_foreach_fn)(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg);

/**
 * ps_store_foreach() - call @fn on every range in ascending order
 * @store: the store
 * @fn: the callback
 * @arg: passed to @fn
 *
 * One consistent snapshot; SPIN, RWLOCK and SEQLOCK sets wait for the walk.
 * Context: see docs/context.md; @fn as ps_foreach_fn says.
 * Return: 0 after a full walk, else @fn's non-zero return; -EINVAL when
 * @store or @fn is NULL; -EDEADLK where docs/context.md says so.
 */
PS_API int ps_store_foreach(struct ps_store *store, ps_foreach_fn fn, void *arg);

/**
 * ps_store_count() - number of ranges in the store
 * @store: the store
 * Context: see docs/context.md; may be stale at once under concurrent sets.
 * Return: the count; 0 for NULL.
 */
PS_API size_t ps_store_count(struct ps_store *store);

/**
 * ps_store_check() - verify every invariant of the store (docs/internals.md)
 * @store: the store
 * @why: if not NULL, receives a static description of the first violation
 * Context: see docs/context.md; it excludes sets while it runs.
 * Return: 0, -EINVAL for a NULL store, -EUCLEAN on a violation, or -EDEADLK.
 */
PS_API int ps_store_check(struct ps_store *store, const char **why);

/**
 * ps_store_memory() - bytes of the store, its ranges and index, and of what waits to be freed
 * @store: the store
 * Context: see docs/context.md; also from an allocator hook in a set of @store.
 * Return: the bytes, each block as glibc's malloc() holds it (any allocator), what waits for a
 * grace period in until freed or synchronized, not the policies (docs/internals.md); 0 for NULL.
 */
PS_API size_t ps_store_memory(struct ps_store *store);

/**
 * struct ps_store_stats - what a store's sets have done, since its creation
 * @sets: ps_store_set() calls and ps_store_set_many() batches that succeeded
 * @nodes_copied: index nodes the sets built (RCU, RCU_QSBR: docs/internals.md)
 * @nodes_copied_max: the most one set built
 * @nodes_retired: index nodes the sets took out and ranges they unlinked from the tree
 * @nodes_retired_max: the most one set retired
 * @root_publications: sets published by a store of the root, not of a child
 */
struct ps_store_stats {
	uint64_t sets;
	uint64_t nodes_copied;
	uint64_t nodes_copied_max;
	uint64_t nodes_retired;
	uint64_t nodes_retired_max;
	uint64_t root_publications;
};

/**
 * ps_store_stats() - read what a store's sets have done
 * @store: the store
 * @stats: receives the figures
 * Context: see docs/context.md: RCU and RCU_QSBR wait for a set in progress.
 * Return: 0; -EINVAL when @store or @stats is NULL; -EOPNOTSUPP for SPIN, RWLOCK and SEQLOCK.
 */
PS_API int ps_store_stats(struct ps_store *store, struct ps_store_stats *stats);

/**
 * ps_store_foreach_range() - call @fn on every range overlapping [@start, @end)
 * @store: the store
 * @start: first index of the window
 * @end: one past the last index of the window; must be > @start
 * @fn: the callback, as for ps_store_foreach()
 * @arg: passed to @fn
 *
 * As ps_store_foreach(), O(log n + k) for k ranges; ranges are NOT clipped.
 * Context: see docs/context.md; @fn as ps_foreach_fn says.
 * Return: 0 after a full walk, else @fn's non-zero return; -EINVAL when @store or @fn is NULL
 * or @start >= @end; -EDEADLK as ps_store_foreach().
 */
PS_API int ps_store_foreach_range(struct ps_store *store, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);

/**
 * ps_store_next() - the first range that ends after @idx, with a new reference
 * @store: the store
 * @idx: the index: the range found contains @idx or is the first after it
 * @start: receives the range's first index (not clipped to @idx)
 * @end: receives one past its last index
 * @pol: receives its policy, with a reference the caller must ps_policy_put()
 *
 * Linearizable, O(log n); a loop from @idx 0 on *@end is NOT a snapshot.
 * Context: see docs/context.md; in a SPIN section, ps_store_next_borrow().
 * Return: 0 with *@start, *@end and *@pol written; -ENOENT when no range ends after @idx;
 * -EINVAL when a pointer is NULL; -EDEADLK inside this thread's section of a SPIN @store.
 */
PS_API int ps_store_next(struct ps_store *store, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol);

/**
 * ps_store_next_borrow() - ps_store_next() inside a read-side section, no reference
 * @store: the store
 * @idx: the index
 * @start: receives the range's first index
 * @end: receives one past its last index
 * @pol: receives its policy, borrowed until ps_store_read_unlock()
 *
 * A loop of calls is a snapshot only under SPIN and RWLOCK.
 * Context: inside ps_store_read_lock() on @store (docs/context.md).
 * Return: 0 with *@start, *@end and *@pol written; -ENOENT when no range
 * ends after @idx; -EINVAL when a pointer is NULL.
 */
PS_API int ps_store_next_borrow(struct ps_store *store, uint64_t idx, uint64_t *start,
		uint64_t *end, const struct ps_policy **pol);

/**
 * struct ps_set_op - one set of a ps_store_set_many() batch
 * @start: first index of the range
 * @end: one past the last index; must be > @start
 * @pol: the policy, or NULL / a PS_MPOL_DEFAULT policy to remove
 */
struct ps_set_op {
	uint64_t start;
	uint64_t end;
	struct ps_policy *pol;
};

/**
 * ps_store_set_many() - ps_store_set() of each of @n ops in order, as one atomic update
 * @store: the store
 * @ops: the sets, applied in array order; may be NULL when @n is 0
 * @n: how many (0: nothing to do)
 * Context: as ps_store_set() (docs/context.md); allocates.
 * Return: 0; -EINVAL when @store is NULL, @ops is NULL with @n > 0, or an
 * op has start >= end; -ENOMEM; -EDEADLK as ps_store_set().
 */
PS_API int ps_store_set_many(struct ps_store *store, const struct ps_set_op *ops, size_t n);

/**
 * ps_inline_layout() - the identity of the layouts this library's inline read side reads
 * Context: any thread.
 * Return: the identity, a 32-bit value (8 hex digits); a POLSTORE_INLINE
 * program runs only under its own (docs/runtime.md).
 */
PS_API unsigned long ps_inline_layout(void);

#ifdef __cplusplus
}
#endif

/* POLSTORE_INLINE, defined before any polstore header, inlines the read side. */
#if defined(POLSTORE_INLINE) && !defined(POLSTORE_BUILDING)
#include <polstore/static/lookup.h>
#define ps_store_create(sync) _ps_store_create_inline((sync), _PS_INLINE_ABI)
#define ps_store_lookup(store, idx) _ps_inl_lookup((store), (idx))
#define ps_store_lookup_borrow(store, idx) _ps_inl_lookup_borrow((store), (idx))
#define ps_store_read_lock(store) _ps_inl_read_lock(store)
#define ps_store_read_unlock(store) _ps_inl_read_unlock(store)
#define ps_store_lookup_copy(store, idx, view) _ps_inl_lookup_copy((store), (idx), (view))
#define ps_store_lookup_node(store, idx, node) _ps_inl_lookup_node((store), (idx), (node))
#define ps_policy_node(pol, ilx, node) _ps_inl_policy_node((pol), (ilx), (node))
#endif

#endif /* POLSTORE_STORE_H */
