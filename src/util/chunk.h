/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Aligned chunks from the allocator hooks (polstore/alloc.h): the chunk
 * hooks of the installed allocator, the default's mapping its own
 * 2 MiB-aligned memory (chunk.c).  Each chunk remembers the hook that
 * frees it, so a chunk outlives a change of allocator.
 */
#ifndef POLSTORE_SRC_CHUNK_H
#define POLSTORE_SRC_CHUNK_H

#include <stdbool.h>
#include <stddef.h>

struct ps_alloc_ops;

/* Where a chunk goes back: the chunk_free hook, with its ctx, of the allocator that gave it. */
struct psi_chunk_src {
	void (*free)(void *ptr, size_t size, void *ctx);
	void *ctx;
};

/*
 * A chunk of @size bytes aligned to @size (a power of two) from allocator
 * @ops (psi_alloc_ops()), advised for transparent huge pages, nothing
 * written in it; its hook in *@src.  NULL when @ops has no chunk hooks,
 * or the default's mapping failed (*@fallback true: take the memory from
 * psi_alloc()), or the installed chunk hook failed (*@fallback false: no
 * memory).
 */
void *psi_chunk_alloc(const struct ps_alloc_ops *ops, size_t size, struct psi_chunk_src *src,
		bool *fallback);

/* Chunk @ptr of @size bytes back to the hook that gave it. */
void psi_chunk_free(void *ptr, size_t size, const struct psi_chunk_src *src);

/* The default allocator's chunk hooks (alloc.c installs them with it). */
void *psi_chunk_map(size_t size, size_t align, void *ctx);
void psi_chunk_unmap(void *ptr, size_t size, void *ctx);

/* Tests: the default hook's mapping fails while set. */
extern bool psi_chunk_map_refused;

#endif /* POLSTORE_SRC_CHUNK_H */
