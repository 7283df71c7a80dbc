/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An update of the read index as it is built: the transaction's state
 * (struct psi_ix_tx), the entries a leaf is assembled from, a node's size
 * and the mark of a retired subtree.  What rangeindex.h's calls and the
 * update's helpers (rangeindex_node.h) share; the calls are rangeindex.h's.
 */
#ifndef POLSTORE_SRC_IXTX_H
#define POLSTORE_SRC_IXTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/static/index.h>

struct ps_policy;
struct psi_ix_pool;

/* One range while an update assembles a leaf. */
struct psi_ix_ent {
	uint64_t start, end;
	struct ps_policy *pol;
	int hint;
};

/* Entries of a transaction's lists held in the transaction itself: a set's nodes need no more. */
#define PSI_IX_TX_INLINE 16

struct psi_ix_tx {
	struct ps_ix_root *root;  /* the published root */
	struct psi_ix_pool *pool; /* nodes come from it (when @serve) and go back to it */
	bool serve;
	struct ps_ix_node *cur;   /* the update's root so far */
	struct ps_ix_leaf *inplace; /* a published leaf whose entry @inplace_at takes a new policy */
	int inplace_at;
	struct ps_policy *inplace_pol;
	int16_t inplace_hint;
	/* A new leaf publication fills: @copy_from, [copy_i0, copy_i1) replaced by @copy_add. */
	struct ps_ix_node *copy;
	const struct ps_ix_leaf *copy_from;
	int copy_i0, copy_i1, copy_na;
	struct psi_ix_ent copy_add[3];
	bool at_root;             /* publish by a store of the root */
	struct ps_ix_node **slot; /* the publication: *slot = val */
	struct ps_ix_node *val;
	void **built;             /* nodes built, for an abort and the flags */
	size_t nbuilt, capbuilt;
	void **retired;           /* nodes (bit 0 clear) and whole subtrees (set) */
	size_t nretired, capretired;
	void *built0[PSI_IX_TX_INLINE], *retired0[PSI_IX_TX_INLINE]; /* the lists' first entries */
	ptrdiff_t bytes;          /* index bytes the update adds (negative: frees) */
	size_t retired_bytes;     /* bytes of the nodes on @retired, subtrees whole */
	size_t nkept;             /* nodes it built that were published (psi_ix_publish()) */
	/* Where nodes past their grace period come from (psi_ix_reuse()), or NULL. */
	void *(*reuse)(void *ctx, size_t size);
	void *reuse_ctx;
};

/* The bytes of node @h's own layout (what it is allocated as). */
static inline size_t psi_ix_node_size(const struct ps_ix_node *h)
{
	return h->height ? sizeof(struct ps_ix_inner) : _PS_IX_LEAF_BYTES(h->shift);
}

/* Bit 0 of a retired entry: the node and everything below it. */
#define PSI_IX_SUBTREE ((uintptr_t)1)

#endif /* POLSTORE_SRC_IXTX_H */
