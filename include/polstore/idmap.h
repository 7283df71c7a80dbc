/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore idmap: a map from small integer ids to objects, allocating the
 * lowest free id (the kernel's idr as cgroup css ids used it: first a
 * spinlock, then an rwlock that was reverted because a stream of readers
 * starved a writer, then RCU).
 *
 * Variants (enum ps_idmap_sync), one radix tree of 64-way nodes under each:
 *   PS_IDMAP_SPIN    one spinlock; readers take it too.
 *   PS_IDMAP_RWLOCK  readers share, writers exclude; writer-preferring, so a
 *                    writer waits only for the read sections already begun.
 *   PS_IDMAP_RCU     readers (liburcu memb) never block, never retry and
 *                    write no shared cache line; writers take a spinlock and
 *                    publish with release stores.
 *
 * Reading: find() and get_next() are called inside a read-side section,
 * ps_idmap_read_lock() ... ps_idmap_read_unlock(); the object returned stays
 * valid until the section ends (for the lock variants because no writer can
 * run, for RCU because the caller frees removed objects only after a grace
 * period: ps_idmap_free_rcu() or ps_idmap_synchronize()).
 *
 * Tree nodes are never freed before ps_idmap_destroy(): memory follows the
 * highest id ever allocated, which lowest-free allocation keeps close to the
 * peak population; readers never meet a freed node.
 */
#ifndef POLSTORE_IDMAP_H
#define POLSTORE_IDMAP_H

#include <limits.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** enum ps_idmap_sync - how a map synchronises readers and writers. */
enum ps_idmap_sync {
	PS_IDMAP_SPIN,
	PS_IDMAP_RWLOCK,
	PS_IDMAP_RCU,
};

/** Number of variants. */
#define PS_IDMAP_SYNC_COUNT 3

/** Largest id. */
#define PS_IDMAP_ID_MAX INT_MAX

struct ps_idmap;

/**
 * ps_idmap_sync_name() - "spin", "rwlock" or "rcu"
 * @sync: the variant
 *
 * Context: any thread.
 * Return: a static string, or NULL for a value that is not a variant.
 */
PS_API const char *ps_idmap_sync_name(enum ps_idmap_sync sync);

/**
 * ps_idmap_sync_from_name() - parse a name as ps_idmap_sync_name() prints it
 * @name: the name
 *
 * Context: any thread.
 * Return: the variant (>= 0), or -EINVAL for NULL or an unknown name.
 */
PS_API int ps_idmap_sync_from_name(const char *name);

/**
 * ps_idmap_create() - create an empty map
 * @sync: the variant
 *
 * Context: any thread; allocates.
 * Return: the map, or NULL with errno EINVAL (unknown @sync) or ENOMEM, or
 * for RCU maps EAGAIN or ENOMEM when polstore cannot create the
 * thread-specific-data keys that unregister its readers at exit
 * (pthread_key_create() failed; a later call tries again).
 */
PS_API struct ps_idmap *ps_idmap_create(enum ps_idmap_sync sync);

/**
 * ps_idmap_destroy() - free a map
 * @map: the map, or NULL (a no-op)
 *
 * Runs the frees still deferred by ps_idmap_free_rcu() (after a grace
 * period), and those these frees queue on @map in turn.  Objects still
 * bound are not touched.
 *
 * Context: no other thread may use @map during or after the call; for RCU
 * maps as ps_idmap_synchronize() (it may wait for a grace period).
 */
PS_API void ps_idmap_destroy(struct ps_idmap *map);

/**
 * ps_idmap_sync_kind() - the variant a map was created with
 * @map: the map
 *
 * Context: any thread.
 * Return: the variant, or -EINVAL when @map is NULL.
 */
PS_API int ps_idmap_sync_kind(const struct ps_idmap *map);

/**
 * ps_idmap_alloc() - bind @ptr to the lowest free id in [@min, @max]
 * @map: the map
 * @ptr: the object, not NULL
 * @min: lowest acceptable id, >= 0
 * @max: highest acceptable id, @min to PS_IDMAP_ID_MAX
 * @id: where to store the id
 *
 * Context: any thread, not inside a read-side section of @map if it is a
 * SPIN or RWLOCK map (RCU maps allow it); writers are serialised.
 * Allocates tree nodes as needed; an allocation failure leaves the
 * bindings unchanged.
 * Return: 0 (*@id set); -ENOSPC when every id in [@min, @max] is bound;
 * -ENOMEM; -EINVAL for a NULL argument or a bad range; -EDEADLK, nothing
 * changed, when called inside this thread's own section of a SPIN or
 * RWLOCK @map (it would wait for itself).
 */
PS_API int ps_idmap_alloc(struct ps_idmap *map, void *ptr, int min, int max, int *id);

/**
 * ps_idmap_replace() - bind a bound id to another object
 * @map: the map
 * @id: the id
 * @ptr: the new object, not NULL
 * @old: where to store the previous object, or NULL
 *
 * Readers see the old or the new object.  Free the old one as after
 * ps_idmap_remove().
 *
 * Context: as ps_idmap_alloc(); does not allocate.
 * Return: 0; -ENOENT when @id is not bound; -EINVAL for a NULL @map or
 * @ptr or a negative @id; -EDEADLK as ps_idmap_alloc().
 */
PS_API int ps_idmap_replace(struct ps_idmap *map, int id, void *ptr, void **old);

/**
 * ps_idmap_remove() - unbind an id
 * @map: the map
 * @id: the id
 * @old: where to store the object it was bound to, or NULL
 *
 * The id becomes free at once.  For RCU maps, readers may still hold the
 * object: free it with ps_idmap_free_rcu() or after ps_idmap_synchronize().
 *
 * Context: as ps_idmap_alloc(); does not allocate.
 * Return: 0; -ENOENT when @id is not bound; -EINVAL for a NULL @map or a
 * negative @id; -EDEADLK as ps_idmap_alloc().
 */
PS_API int ps_idmap_remove(struct ps_idmap *map, int id, void **old);

/**
 * ps_idmap_read_lock() - enter a read-side section of @map
 * @map: the map
 *
 * SPIN takes the lock, RWLOCK the read lock, RCU enters an RCU read-side
 * section (registering the thread with liburcu on first use).
 *
 * Context: any thread.  RWLOCK and RCU sections nest, of one map or several
 * (an RWLOCK reader already inside a section goes past a waiting writer);
 * a SPIN section must not be opened inside another of the same map: that
 * aborts with a message (it would wait for itself), and a SPIN section
 * inside another map's follows the lock order of polstore/store.h.  Inside
 * a SPIN or RWLOCK section, the map's writers return -EDEADLK.
 */
PS_API void ps_idmap_read_lock(struct ps_idmap *map);

/**
 * ps_idmap_read_unlock() - leave the read-side section
 * @map: the map
 *
 * Context: inside a section of @map entered by this thread.
 */
PS_API void ps_idmap_read_unlock(struct ps_idmap *map);

/**
 * ps_idmap_find() - the object bound to @id
 * @map: the map
 * @id: the id
 *
 * Context: inside ps_idmap_read_lock(@map); RCU readers never block.
 * Return: the object, valid until the section ends; NULL when @id is not
 * bound, @id is negative or @map is NULL.
 */
PS_API void *ps_idmap_find(const struct ps_idmap *map, int id);

/**
 * ps_idmap_get_next() - the bound id >= *@id with its object, for walks
 * @map: the map
 * @id: in: where to start; out: the id found
 *
 * Walk all ids with ps_idmap_for_each() inside one section, or one section
 * per step (RCU: an id bound or unbound during the walk may or may not be
 * seen; ids seen are seen in increasing order):
 *
 *	for (id = 0;; id++) {
 *		ps_idmap_read_lock(map);
 *		p = ps_idmap_get_next(map, &id);
 *		if (p)
 *			use(p);
 *		ps_idmap_read_unlock(map);
 *		if (!p || id == PS_IDMAP_ID_MAX)
 *			break;
 *	}
 *
 * Stop at PS_IDMAP_ID_MAX as above: the id after it would overflow an int
 * (`id++` past INT_MAX is undefined behaviour, not the end of the walk).
 *
 * Context: inside ps_idmap_read_lock(@map).
 * Return: the object (*@id set to its id), or NULL (*@id unchanged) when no
 * id >= *@id is bound or an argument is invalid.
 */
PS_API void *ps_idmap_get_next(const struct ps_idmap *map, int *id);

/**
 * ps_idmap_for_each() - walk every bound id in increasing order
 * @map: the map
 * @p: an object pointer lvalue (void * in C++): each object in turn
 * @id: an int lvalue: each object's id
 *
 * A loop header: `ps_idmap_for_each(map, p, id) { ... }`.  Ends after the
 * last bound id, PS_IDMAP_ID_MAX included, without overflowing @id (which
 * is -1 then).  @break leaves @id at the id being visited.
 *
 * Context: inside ps_idmap_read_lock(@map), for the whole loop.
 */
#define ps_idmap_for_each(map, p, id)                                                              \
	for ((id) = 0; (id) >= 0 && ((p) = ps_idmap_get_next((map), &(id))) != NULL;               \
	     (id) = (id) < PS_IDMAP_ID_MAX ? (id) + 1 : -1)

/**
 * ps_idmap_count() - number of bound ids
 * @map: the map
 *
 * Context: any thread; a snapshot when writers run.
 * Return: the count, or -EINVAL when @map is NULL.
 */
PS_API int ps_idmap_count(const struct ps_idmap *map);

/**
 * ps_idmap_synchronize() - wait until no reader can hold a removed object
 * @map: the map
 *
 * For RCU maps, waits for a grace period: every read-side section that began
 * before the call has ended.  For SPIN and RWLOCK maps, returns at once:
 * readers use objects only inside their section, which excluded the writer.
 *
 * Context: SPIN and RWLOCK maps: any thread.  RCU maps: any thread outside
 * every liburcu memb read-side section, which the grace period would wait
 * for, the caller's own included, forever: not inside a read-side section
 * of any RCU map, nor of an RCU or SEQLOCK store (between
 * ps_store_read_lock() and ps_store_read_unlock(), or in an RCU store's
 * ps_store_foreach() callback): stores and maps share the memb flavour.
 * Sections of SPIN/RWLOCK maps and stores and of RCU_QSBR stores (another
 * flavour) are fine, though an online RCU_QSBR thread that waits here also
 * holds up RCU_QSBR writers meanwhile.  May block.
 */
PS_API void ps_idmap_synchronize(struct ps_idmap *map);

/**
 * ps_idmap_free_rcu() - free a removed object after a grace period
 * @map: the map it was removed from
 * @ptr: the object
 * @free_fn: called once with @ptr, from this or a later call on @map
 *
 * SPIN and RWLOCK maps call @free_fn at once.  RCU maps queue @ptr; when the
 * queue is full (PS_IDMAP_FREE_BATCH objects), it goes to polstore's reclaim
 * thread, which waits for one grace period for the whole queue, and a later
 * call on @map (this function, ps_idmap_barrier(), ps_idmap_destroy()) runs
 * the frees, on its caller's thread: the call does not wait for readers,
 * and polstore's own thread never runs @free_fn.  @free_fn may itself call
 * ps_idmap_free_rcu() on @map (not ps_idmap_barrier() nor destroy).  A
 * thread that ends inside @free_fn (pthread_exit(), cancellation) leaves
 * the map working: that free counts as run, the others run in later calls.
 *
 * Context: SPIN and RWLOCK maps: where @free_fn may run.  RCU maps: as
 * ps_idmap_synchronize() (a call that cannot allocate its queue, or finds
 * no reclaim thread and cannot start one, waits for a grace period), and
 * where @free_fn may run (earlier objects' frees may run in it).
 * Return: 0, or -EINVAL for a NULL argument (nothing freed).  When queueing
 * cannot allocate, it waits for a grace period and frees @ptr at once.
 */
PS_API int ps_idmap_free_rcu(struct ps_idmap *map, void *ptr, void (*free_fn)(void *));

/** Objects ps_idmap_free_rcu() queues before it hands them over for one grace period. */
#define PS_IDMAP_FREE_BATCH 64

/**
 * ps_idmap_barrier() - run every free ps_idmap_free_rcu() has queued
 * @map: the map
 *
 * When it returns, every free queued on @map before the call has run: those
 * still queued and those of full batches (after their grace period), and
 * those another thread's call is running at that moment (it waits for
 * them).  Returns at once when nothing is queued.
 *
 * Context: as ps_idmap_synchronize() (it waits for a grace period when
 * frees are queued, and for other threads' frees); not inside a @free_fn
 * of @map; may block.
 */
PS_API void ps_idmap_barrier(struct ps_idmap *map);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_IDMAP_H */
