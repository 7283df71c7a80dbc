/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore idmap: a map from small integer ids to objects, allocating the lowest free id, as the
 * kernel's idr for cgroup css ids; one radix tree of 64-way nodes, freed only by
 * ps_idmap_destroy(), under three variants.  Rules and design: docs/companions.md.
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
	PS_IDMAP_SPIN,	 /* one spinlock; readers take it too */
	PS_IDMAP_RWLOCK, /* writer-preferring; a writer waits only for sections begun */
	PS_IDMAP_RCU,	 /* readers (liburcu memb) never block, retry or write shared */
};

/** Number of variants. */
#define PS_IDMAP_SYNC_COUNT 3

/** Largest id. */
#define PS_IDMAP_ID_MAX INT_MAX

struct ps_idmap;

/**
 * ps_idmap_sync_name() - "spin", "rwlock" or "rcu"
 * @sync: the variant
 * Context: any thread.
 * Return: a static string, or NULL for a value that is not a variant.
 */
PS_API const char *ps_idmap_sync_name(enum ps_idmap_sync sync);

/**
 * ps_idmap_sync_from_name() - parse a name as ps_idmap_sync_name() prints it
 * @name: the name
 * Context: any thread.
 * Return: the variant (>= 0), or -EINVAL for NULL or an unknown name.
 */
PS_API int ps_idmap_sync_from_name(const char *name);

/**
 * ps_idmap_create() - create an empty map
 * @sync: the variant
 * Context: any thread; allocates.
 * Return: the map, or NULL with errno EINVAL (unknown @sync), ENOMEM, or EAGAIN (RCU: no
 * thread-exit key, docs/context.md "Threads").
 */
PS_API struct ps_idmap *ps_idmap_create(enum ps_idmap_sync sync);

/**
 * ps_idmap_destroy() - free a map
 * @map: the map, or NULL (a no-op)
 *
 * Runs the frees ps_idmap_free_rcu() still defers; objects still bound are not touched.
 * Context: no other thread may use @map during or after it; RCU: as ps_idmap_synchronize().
 */
PS_API void ps_idmap_destroy(struct ps_idmap *map);

/**
 * ps_idmap_sync_kind() - the variant a map was created with
 * @map: the map
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
 * Context: any thread; allocates (a failure leaves the bindings unchanged).
 * Return: 0 (*@id set); -ENOSPC when every id in [@min, @max] is bound; -ENOMEM; -EINVAL for a
 * NULL argument or a bad range; -EDEADLK inside this thread's SPIN or RWLOCK section of @map.
 */
PS_API int ps_idmap_alloc(struct ps_idmap *map, void *ptr, int min, int max, int *id);

/**
 * ps_idmap_replace() - bind a bound id to another object
 * @map: the map
 * @id: the id
 * @ptr: the new object, not NULL
 * @old: where to store the previous object, or NULL
 *
 * Readers see the old or the new object; free the old one as after ps_idmap_remove().
 * Context: as ps_idmap_alloc(); does not allocate.
 * Return: 0; -ENOENT when @id is not bound; -EINVAL for a NULL @map or @ptr or a negative @id;
 * -EDEADLK as ps_idmap_alloc().
 */
PS_API int ps_idmap_replace(struct ps_idmap *map, int id, void *ptr, void **old);

/**
 * ps_idmap_remove() - unbind an id
 * @map: the map
 * @id: the id
 * @old: where to store the object it was bound to, or NULL
 *
 * The id is free at once; free the object with ps_idmap_free_rcu() (RCU readers may hold it).
 * Context: as ps_idmap_alloc(); does not allocate.
 * Return: 0; -ENOENT when @id is not bound; -EINVAL for a NULL @map or a negative @id; -EDEADLK as
 * ps_idmap_alloc().
 */
PS_API int ps_idmap_remove(struct ps_idmap *map, int id, void **old);

/**
 * ps_idmap_read_lock() - enter a read-side section of @map
 * @map: the map
 * Context: any thread; RWLOCK and RCU sections nest, a SPIN one in another of @map aborts
 * (docs/companions.md).
 */
PS_API void ps_idmap_read_lock(struct ps_idmap *map);

/**
 * ps_idmap_read_unlock() - leave the read-side section
 * @map: the map
 * Context: inside a section of @map entered by this thread.
 */
PS_API void ps_idmap_read_unlock(struct ps_idmap *map);

/**
 * ps_idmap_find() - the object bound to @id
 * @map: the map
 * @id: the id
 * Context: inside ps_idmap_read_lock(@map); RCU readers never block.
 * Return: the object, valid until the section ends; NULL when @id is not bound or invalid.
 */
PS_API void *ps_idmap_find(const struct ps_idmap *map, int id);

/**
 * ps_idmap_get_next() - the bound id >= *@id with its object, for walks
 * @map: the map
 * @id: in: where to start; out: the id found
 *
 * A walk of one section per step stops at PS_IDMAP_ID_MAX (docs/companions.md).
 * Context: inside ps_idmap_read_lock(@map).
 * Return: the object (*@id set to its id), or NULL (*@id unchanged) when no id >= *@id is bound or
 * an argument is invalid.
 */
PS_API void *ps_idmap_get_next(const struct ps_idmap *map, int *id);

/**
 * ps_idmap_for_each() - walk every bound id in increasing order
 * @map: the map
 * @p: an object pointer lvalue (void * in C++): each object in turn
 * @id: an int lvalue: each object's id
 *
 * A loop header; @id is -1 after the last id, a `break` leaves it at the id being visited.
 * Context: inside ps_idmap_read_lock(@map), for the whole loop.
 */
#define ps_idmap_for_each(map, p, id)                                                              \
	for ((id) = 0; (id) >= 0 && ((p) = ps_idmap_get_next((map), &(id))) != NULL;               \
	     (id) = (id) < PS_IDMAP_ID_MAX ? (id) + 1 : -1)

/**
 * ps_idmap_count() - number of bound ids
 * @map: the map
 * Context: any thread; a snapshot when writers run.
 * Return: the count, or -EINVAL when @map is NULL.
 */
PS_API int ps_idmap_count(const struct ps_idmap *map);

/**
 * ps_idmap_synchronize() - wait until no reader can hold a removed object
 * @map: the map
 *
 * RCU maps: waits for a grace period.  SPIN and RWLOCK maps: returns at once.
 * Context: RCU maps: outside every memb section (RCU maps, RCU and SEQLOCK stores), may block.
 */
PS_API void ps_idmap_synchronize(struct ps_idmap *map);

/**
 * ps_idmap_free_rcu() - free a removed object after a grace period
 * @map: the map it was removed from
 * @ptr: the object
 * @free_fn: called once with @ptr, from this or a later call on @map
 *
 * SPIN and RWLOCK: @free_fn at once; RCU: after a grace period, by a later call on @map (or this
 * one, waiting for the grace period, when queueing cannot allocate).
 * Context: where @free_fn may run; RCU maps also as ps_idmap_synchronize().
 * Return: 0, or -EINVAL for a NULL argument (nothing freed).
 */
PS_API int ps_idmap_free_rcu(struct ps_idmap *map, void *ptr, void (*free_fn)(void *));

/** Objects ps_idmap_free_rcu() queues before it hands them over for one grace period. */
#define PS_IDMAP_FREE_BATCH 64

/**
 * ps_idmap_barrier() - run every free ps_idmap_free_rcu() has queued
 * @map: the map
 *
 * Also waits for the frees another thread's call is running.
 * Context: as ps_idmap_synchronize(); not inside a @free_fn of @map.
 */
PS_API void ps_idmap_barrier(struct ps_idmap *map);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_IDMAP_H */
