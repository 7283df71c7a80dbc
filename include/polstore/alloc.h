/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore allocation hooks: route every allocation the library makes
 * through the caller's functions, e.g. to account memory or to inject
 * allocation failures in tests.
 */
#ifndef POLSTORE_ALLOC_H
#define POLSTORE_ALLOC_H

#include <stddef.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * struct ps_alloc_ops - an allocator
 * @alloc: returns @size bytes aligned for any type, or NULL on failure
 * @free: frees what @alloc returned; NULL is never passed
 * @ctx: passed to all four
 * @chunk_alloc: optional: returns @size bytes aligned to @align (both
 *	2 MiB today), or NULL on failure
 * @chunk_free: frees a chunk: what @chunk_alloc returned, and its @size
 *
 * A large RCU store's read index takes its nodes from chunks. With the
 * chunk hooks it asks them for chunks and advises each for transparent huge
 * pages (MADV_HUGEPAGE) before it writes there; without them it takes
 * chunks of just under 2 MiB from @alloc. The default allocator's hooks map
 * 2 MiB-aligned anonymous memory, and fall back to malloc() when the
 * mapping fails.
 */
struct ps_alloc_ops {
	void *(*alloc)(size_t size, void *ctx);
	void (*free)(void *ptr, void *ctx);
	void *ctx;
	void *(*chunk_alloc)(size_t size, size_t align, void *ctx);
	void (*chunk_free)(void *ptr, size_t size, void *ctx);
};

/**
 * ps_set_alloc_ops() - install an allocator for everything polstore allocates
 * @ops: the allocator (copied), or NULL to return to malloc()/free()
 *
 * Memory is always freed with the allocator installed at the time of the
 * free, so either install the allocator before creating any polstore object
 * or make its @free able to free what the previous allocator returned (a
 * wrapper around malloc()/free() that only fails some calls, for example).
 *
 * SEQLOCK, RCU and RCU_QSBR stores hand removed ranges to polstore's reclaim
 * thread, which frees them later through the hooks installed at that
 * moment, without any polstore call in progress: call ps_store_synchronize()
 * on every store (or destroy it) first, and ps_rcu_barrier() after stores
 * handed to ps_store_destroy_deferred(), so that nothing is left in flight.
 * No memory is kept between calls but what the objects hold (a large RCU
 * store's index nodes come in chunks, which are the store's).
 * ps_store_memory() counts each block as glibc's malloc() would hold it, whichever
 * allocator is installed (docs/internals.md).
 *
 * A chunk goes back to the @chunk_free, with the @ctx, of the allocator that
 * gave it, even once another is installed: keep them working while a store
 * made before holds chunks (until it is destroyed). Chunks the default
 * allocator mapped are unmapped whatever is installed.
 *
 * Context: while no other thread is inside polstore, and after
 * ps_store_synchronize() on every store.
 * Return: 0, or -EINVAL when @ops lacks @alloc or @free, or has only one
 * of @chunk_alloc and @chunk_free.
 */
PS_API int ps_set_alloc_ops(const struct ps_alloc_ops *ops);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_ALLOC_H */
