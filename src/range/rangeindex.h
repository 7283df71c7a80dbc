/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read index: a B+-tree of wide immutable nodes (polstore/static/index.h)
 * holding the same ranges as a range tree, for lockless readers.  The
 * writer applies every set to the tree and to the index; readers of the
 * RCU stores read only the index.
 *
 * An update is a transaction (struct psi_ix_tx): psi_ix_set() builds the
 * nodes a set changes off to the side, allocating every one of them before
 * anything is published; psi_ix_publish() makes the update visible with
 * one release store (into the child slot of the lowest node it left
 * unchanged, or into the root); the nodes it replaced are then retired,
 * to be freed with psi_ix_free_retired() after a grace period.  Writers
 * are serialised by the caller.
 */
#ifndef POLSTORE_SRC_RANGEINDEX_H
#define POLSTORE_SRC_RANGEINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/static/index.h>
#include <polstore/store.h>

#include "ixtx.h"

struct ps_rtree;

/*
 * Start an update of the index at @root, whose large nodes come from
 * @pool while the index is large (NULL: every node from the allocator);
 * @at_root: publish at the root (a batch, a walk).
 */
void psi_ix_begin(struct psi_ix_tx *tx, struct ps_ix_root *root, struct psi_ix_pool *pool,
		bool at_root);

/*
 * Let the update make its new nodes of memory @fn(@ctx, size) gives: a
 * node of that many bytes that an earlier update retired, that no reader
 * can reach any more and that came from the allocator (not from a pool),
 * or NULL when it has none.  Nodes it gave and the update did not keep go
 * back to the allocator when the update is aborted.
 */
void psi_ix_reuse(struct psi_ix_tx *tx, void *(*fn)(void *ctx, size_t size), void *ctx);

/*
 * Bytes of retired entry @e (psi_ix_publish()): its node, or its whole
 * subtree, each node as psi_ix_bytes() counts it.
 */
size_t psi_ix_retired_bytes(const void *e);

/* The retired entry of the whole index at @h, for psi_ix_free_retired(). */
void *psi_ix_retired_whole(struct ps_ix_node *h);

/*
 * A copy of the index at @from (NULL: empty) into *@to, every node from
 * the allocator (none from a pool), its leaves 3/4 full; *@bytes its
 * nodes' bytes.  Nothing is published (ixrebuild.c); the writer, which
 * no in-place store runs beside.  Return: 0, or -ENOMEM with nothing
 * allocated.
 */
int psi_ix_rebuild(const struct ps_ix_node *from, struct ps_ix_node **to, size_t *bytes);

/* The bytes psi_ix_rebuild() makes of an index of @n ranges. */
size_t psi_ix_rebuilt_bytes(size_t n);

/*
 * Whether psi_ix_rebuild() of the index at @root, of @n ranges and
 * @bytes (psi_ix_bytes()), would make it better: hold under 4/5 of its
 * bytes, or have fewer levels (its copy has as few as full nodes allow).
 */
bool psi_ix_rebuild_pays(const struct ps_ix_node *root, size_t n, size_t bytes);

/*
 * psi_ix_set() - [start, end) set to @pol in the update (NULL: removed),
 * with the tree's replace semantics
 *
 * Return: 0, or -ENOMEM: the update must be thrown away (psi_ix_abort()).
 */
int psi_ix_set(struct psi_ix_tx *tx, uint64_t start, uint64_t end, struct ps_policy *pol);

/* Throw an unpublished update away: its nodes are freed, nothing published was written. */
void psi_ix_abort(struct psi_ix_tx *tx);

/*
 * Publish the update with one release store (or, for a set that only
 * gives one range a new policy, two single-word stores into its published
 * leaf: rangeindex.c), after writing a new leaf whose copy psi_ix_set()
 * left to it.  Return: true when it stored the root.  Afterwards
 * tx->retired[0, nretired) is what left the index, each for
 * psi_ix_free_retired() after a grace period; psi_ix_end() then.
 */
bool psi_ix_publish(struct psi_ix_tx *tx);

/* Free the transaction's own lists (after psi_ix_publish() or psi_ix_abort()). */
void psi_ix_end(struct psi_ix_tx *tx);

/*
 * Free retired nodes and subtrees (entries of tx->retired of an update
 * that began with @pool; NULL entries are skipped), once no reader can
 * reach them; any thread.
 */
void psi_ix_free_retired(struct psi_ix_pool *pool, void *const *entry, size_t n);

/* Free every node of the index at @root now (no reader can reach it); it is empty then. */
void psi_ix_clear(struct ps_ix_root *root, struct psi_ix_pool *pool);

/*
 * Bytes of the nodes of the index at @n: a pooled node its size, another
 * what the allocator holds for it (psi_alloc_charge()).
 */
size_t psi_ix_bytes(const struct ps_ix_node *n);

/*
 * The index at @root against the tree @t, under the writer's lock: the
 * same ranges with the same policies and hints, sorted, every entry in its
 * node's interval, node shapes and sentinels.  Return: 0 or -EUCLEAN with
 * *@why.
 */
int psi_ix_check(const struct ps_ix_root *root, const struct ps_rtree *t, const char **why);

/*
 * Ranges that end after @start and begin before @end, in order, of the
 * version whose root node is @n (which no set changes in place: an
 * announced walk).  Stops at the first non-zero return of @fn.
 */
int psi_ix_foreach_range(const struct ps_ix_node *n, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);

/* One range of the index, as next() returns it. */
struct psi_ix_hit {
	uint64_t start, end;
	struct ps_policy *pol;
};

/*
 * The first range ending after @idx in the version at @n (a version no
 * set changes in place, or one the caller validates).  Return: true with
 * *@hit, false when there is none.
 */
bool psi_ix_next_from(const struct ps_ix_node *n, uint64_t idx, struct psi_ix_hit *hit);

#endif /* POLSTORE_SRC_RANGEINDEX_H */
