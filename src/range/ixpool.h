/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The node pool of a large read index (ixpool.c): index nodes carved from
 * 2 MiB chunks advised for transparent huge pages, so that a lookup's 4-5
 * nodes cost fewer TLB misses and an inner node fills whole cache lines.
 * A store's index takes its nodes from the pool only while it is large
 * (psi_ix_pool_tune()); small stores allocate each node and stay small.
 *
 * The writer of the store (serialised by its caller) gets nodes and frees
 * the ones no reader ever saw; any thread gives back nodes after their
 * grace period, with one lock-free push of a chain, and the writer sorts
 * them back into their chunks when it next needs a node.  Nothing here
 * takes a lock, so fork() needs no handler.
 */
#ifndef POLSTORE_SRC_IXPOOL_H
#define POLSTORE_SRC_IXPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/static/index.h>

/* A node the pool does not serve comes from psi_alloc() and is charged as it says. */
#include "alloc_internal.h"

struct psi_ix_pool;

/* Index bytes at which the pool starts serving a store's nodes (it stops below half). */
extern size_t psi_ix_pool_threshold;

/* A new, empty pool for an index of @index_bytes; NULL with errno ENOMEM. */
struct psi_ix_pool *psi_ix_pool_new(size_t index_bytes);

/*
 * Free @p and its chunks, once every node it gave out is back or given
 * back (psi_ix_pool_put_chain()); the writer, at the store's destruction.
 */
void psi_ix_pool_destroy(struct psi_ix_pool *p);

/*
 * Whether the update starting now takes its nodes from @p (NULL: no
 * pool), by the size of the index; the writer.
 */
bool psi_ix_pool_tune(struct psi_ix_pool *p);

/* Whether an index of @index_bytes is one a pool stops serving (under half the threshold). */
bool psi_ix_pool_below(size_t index_bytes);

/* Whether @p (NULL: no pool) served the last update that asked (psi_ix_pool_tune()); the writer. */
bool psi_ix_pool_serving(const struct psi_ix_pool *p);

/* Take back what was given back and free every empty chunk; the writer, when sets settle. */
void psi_ix_pool_trim(struct psi_ix_pool *p);

/* The index grew by @delta bytes (negative: shrank); the writer, at each publication. */
void psi_ix_pool_grew(struct psi_ix_pool *p, ptrdiff_t delta);

/*
 * A node for an inner node (@inner) or a full leaf, from @p; the writer.
 * *@tag: the value to keep in the node's wflags (above its low 16 bits)
 * for psi_ix_pool_tag_of().  Return: the node (nothing written in it), or
 * NULL when no chunk can be allocated.
 */
void *psi_ix_pool_get(struct psi_ix_pool *p, bool inner, uint32_t *tag);

/* The pool's chunk of a node, as psi_ix_pool_get() tagged it; 0: not from a pool. */
static inline uint32_t psi_ix_pool_tag_of(const struct ps_ix_node *h)
{
	return h->wflags >> 16;
}

/* Give back node @h, which no reader ever reached; the writer. */
void psi_ix_pool_put_now(struct psi_ix_pool *p, struct ps_ix_node *h);

/*
 * A chain of nodes to give back (psi_ix_pool_link() builds it), from any
 * thread, once no reader can reach them.
 */
struct psi_ix_pool_chain {
	struct ps_ix_node *first, *last;
};

void psi_ix_pool_link(struct psi_ix_pool_chain *c, struct ps_ix_node *h);
void psi_ix_pool_put_chain(struct psi_ix_pool *p, struct psi_ix_pool_chain *c);

/* Bytes of @p's chunks that hold no node (what the store holds beyond its nodes); any thread. */
size_t psi_ix_pool_slack(const struct psi_ix_pool *p);

/* Blocks @p holds of the allocator beside itself: its chunks and their table; the writer. */
size_t psi_ix_pool_blocks(const struct psi_ix_pool *p);

#endif /* POLSTORE_SRC_IXPOOL_H */
