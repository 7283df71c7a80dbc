/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An intrusive red-black tree without parent pointers, written once for two
 * kinds of writer:
 *
 *  - in place (spin, rwlock, seqlock stores): nodes are linked, recoloured
 *    and rotated where they are, as in any red-black tree;
 *  - copy on write (rcu, rcu-qsbr stores): readers walk the published tree
 *    while an update runs, and an update changes no node they can reach
 *    but one child slot, at publication.
 *
 * Copy on write, an update copies exactly the nodes whose links or payload
 * it changes, and the nodes between them and the highest one it changes;
 * every other node stays where it is.  The copies form one subtree (the
 * update's region) that replaces the subtree at one position of the
 * published tree: the pending slot, a child slot of a node the update does
 * not copy, or the root.  Until the update is published the slot keeps its
 * published content and the update sees the new one through psi_rb_child();
 * publication (psi_rb_publish()) is one release store into the slot.
 * Colours are the writers' alone (readers never load @meta), so a colour
 * change writes the node in place and copies nothing.
 *
 * The same insert and erase code serves both kinds: before it changes a
 * node's links it asks for that node owned (rb_own_at()), which in place
 * is the node itself and copy on write is the node if this update created
 * it (its generation is the update's), else a copy that takes its place.
 * A copy is linked into its owned parent, or becomes the content of the
 * pending slot; when a change falls outside the region, the region grows up
 * to the lowest common ancestor of the two (rb_raise()).  A node is copied
 * at most once per update.  Parent pointers are impossible copy on write (a
 * copied node's children would all need new parents), so writers carry the
 * path of ancestors (struct psi_rb_path) and readers walk down only.
 *
 * The five properties kept (checked by psi_rb_check()):
 *  1. every node is red or black;
 *  2. the root is black;
 *  3. the (NULL) leaves are black;
 *  4. a red node has two black children;
 *  5. every path from a node down to a leaf holds the same number of black
 *     nodes.
 * Hence the height is at most 2 * log2(n + 1), below PS_RB_MAX_DEPTH for
 * any n that fits in memory.
 *
 * Readers load only @child (acquire, pairing with the writers' release
 * stores) and the payload.  In place, a rotation can hide a node from a
 * concurrent reader for a moment, so such readers must validate what they
 * found (seqcount) and bound their walk (PS_RB_MAX_DEPTH).  Copy on write,
 * why a reader's walk is linearizable is written at psi_rb_publish()
 * (rbtree.c).
 */
#ifndef POLSTORE_SRC_RBTREE_H
#define POLSTORE_SRC_RBTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/static/rtree.h>

#include "compiler.h"

/*
 * The ancestors of a position, root first: @dir[i] is the side taken from
 * @node[i].  For an insertion the path ends at the parent of the empty
 * slot (@dir of the last node names the slot); for an erase or psi_rb_own()
 * it ends at the node itself.  The two spare entries let an erase extend
 * the path to the successor and rotate it once.
 */
struct psi_rb_path {
	int depth;
	unsigned char dir[PS_RB_MAX_DEPTH + 2];
	struct ps_rb_node *node[PS_RB_MAX_DEPTH + 2];
};

/*
 * One update's view of the tree.  In place: @root is the published root
 * and @copy NULL.  Copy on write: @root is the update's own root pointer
 * (starting as the published one), @gen a generation no earlier update
 * used, and @copy returns a copy of @old's payload in a node the caller
 * allocated before the update began (it cannot fail); the tree core sets
 * the copy's links and generation, and the caller retires @old.
 *
 * The pending slot (copy on write, @pending set): the position at depth
 * @pdepth of the path @ppath (whose first @pdepth nodes are published
 * nodes the update does not copy), which holds @pval from the update's
 * point of view.  At depth 0 it is the root, and @root->node is @pval.
 * Every node the update owns is @pval or below it, linked from owned
 * parents.
 */
struct psi_rb_undo {
	struct ps_rb_node *node;
	uint64_t meta;
};

struct psi_rb_tx {
	struct ps_rb_root *root;
	uint64_t gen;
	struct ps_rb_node *(*copy)(struct psi_rb_tx *tx, const struct ps_rb_node *old);
	bool pending;
	int pdepth;
	struct ps_rb_node *pval;
	struct psi_rb_path ppath;
	/*
	 * Copy on write: the colours the update wrote into published nodes,
	 * oldest first, so that psi_rb_abort() can put them back; room for
	 * psi_rb_paints() more before each operation (the caller's).
	 */
	struct psi_rb_undo *undo;
	size_t nundo, undo_cap;
};

/**
 * psi_rb_tx_init() - start an update of the tree at @root
 * @copy: the copy hook (copy on write), or NULL to change nodes in place
 *
 * In place @root is the published root; copy on write, the update's own
 * root pointer, holding the published root.
 */
static inline void psi_rb_tx_init(struct psi_rb_tx *tx, struct ps_rb_root *root, uint64_t gen,
		struct ps_rb_node *(*copy)(struct psi_rb_tx *tx, const struct ps_rb_node *old))
{
	tx->root = root;
	tx->gen = gen;
	tx->copy = copy;
	tx->pending = false;
	tx->pdepth = 0;
	tx->pval = NULL;
	tx->ppath.depth = 0;
	tx->undo = NULL;
	tx->nundo = tx->undo_cap = 0;
}

/*
 * A node's child on side @dir as the update sees it: the pending slot's
 * content where the node is the slot's parent.  Writers walk with this.
 */
static inline struct ps_rb_node *psi_rb_child(const struct psi_rb_tx *tx, const struct ps_rb_node *n,
		int dir)
{
	if (tx->pending && tx->pdepth && n == tx->ppath.node[tx->pdepth - 1] &&
			dir == tx->ppath.dir[tx->pdepth - 1])
		return tx->pval;
	return n->child[dir];
}

static inline void psi_rb_path_push(struct psi_rb_path *p, struct ps_rb_node *n, int dir)
{
	p->node[p->depth] = n;
	p->dir[p->depth] = (unsigned char)dir;
	p->depth++;
}

/* Reader-side loads: pair with the release stores of the writer. */
static inline struct ps_rb_node *psi_rb_load_root(const struct ps_rb_root *root)
{
	return PSI_LOAD_ACQUIRE(root->node);
}

static inline struct ps_rb_node *psi_rb_load_child(const struct ps_rb_node *n, int dir)
{
	return PSI_LOAD_ACQUIRE(n->child[dir]);
}

/**
 * psi_rb_insert() - link @node at the empty slot the path ends at, rebalance
 * @path: from the root to the slot's parent (empty for an empty tree);
 *        clobbered
 *
 * @node's links, colour and generation are set here; its payload must be
 * set before, as the store that makes it reachable (in place) is a release.
 * Copy on write, takes at most psi_rb_copies_insert(height) copies.
 */
void psi_rb_insert(struct psi_rb_tx *tx, struct psi_rb_path *path, struct ps_rb_node *node);

/**
 * psi_rb_erase() - unlink the node @path ends at, rebalance
 * @path: from the root to the node; clobbered
 *
 * Return: the node unlinked: the node itself, or copy on write its copy if
 * the update had copied it (the original was handed to @tx->copy, hence
 * to the caller, then).  Copy on write, takes at most
 * psi_rb_copies_erase(height) copies.
 */
struct ps_rb_node *psi_rb_erase(struct psi_rb_tx *tx, struct psi_rb_path *path);

/**
 * psi_rb_own() - the node @path ends at, made changeable by @tx
 * @path: directions from the root to the node (its node pointers are
 *        refreshed from the root first, so a path found before earlier
 *        changes of the update may be passed)
 *
 * In place the node itself.  Copy on write the node, or its copy in its
 * place; the caller may then change its payload, keeping the tree's
 * order.  At most psi_rb_copies_own(height) copies.
 */
struct ps_rb_node *psi_rb_own(struct psi_rb_tx *tx, struct psi_rb_path *path);

/**
 * psi_rb_raise_root() - make the update's pending slot the root
 *
 * Copies the published nodes above the pending slot (at most its depth),
 * so that psi_rb_publish() stores the root.  Copy on write only.
 */
void psi_rb_raise_root(struct psi_rb_tx *tx);

/**
 * psi_rb_publish() - make a copy-on-write update visible to readers
 * @published: the published root (the update's tx->root is its own)
 *
 * One release store: of the pending slot's content into the slot, which is
 * the root or a child slot of a published node.  Nothing when the update
 * changed no link or payload.  Return: true when the root was stored.
 */
bool psi_rb_publish(struct psi_rb_tx *tx, struct ps_rb_root *published);

/**
 * psi_rb_abort() - throw a copy-on-write update away
 *
 * Puts back the colours it wrote into published nodes (nothing else
 * published was written before publication); its copies are the caller's
 * to free, the originals it handed to @tx->copy stay where they are.
 */
void psi_rb_abort(struct psi_rb_tx *tx);

/*
 * Worst cases of one operation copy on write, in a tree of height at most
 * @h (nodes on the longest root-to-leaf path), for the caller to have that
 * many copies and undo entries ready before it.  An operation copies
 * nodes of its own path (the erase's extended to the successor), nodes of
 * the path to the pending slot when the region grows to meet it
 * (rb_raise()), and at most three siblings a deletion rotates; the colours
 * it writes into published nodes are one per level climbed (insertion:
 * three per two levels) and two more.  A node is copied once per update
 * at most, so no update copies more nodes than the tree has.
 */
static inline size_t psi_rb_copies_insert(int h)
{
	return 2 * (size_t)h + 1;
}

static inline size_t psi_rb_copies_erase(int h)
{
	return 2 * (size_t)h + 4;
}

static inline size_t psi_rb_copies_own(int h)
{
	return 2 * (size_t)h;
}

static inline size_t psi_rb_paints(int h)
{
	return 2 * (size_t)h + 4;
}

/* The height of a red-black tree of @n nodes is at most 2 * log2(n + 1). */
static inline int psi_rb_height_max(size_t n)
{
	return 2 * (int)(8 * sizeof(unsigned long long) - (size_t)__builtin_clzll((unsigned long long)n + 1));
}

/**
 * psi_rb_height_bound() - an upper bound on the height of @root's tree, and
 * of the tree after @grow more insertions
 *
 * Twice the black height (counted down the leftmost path, O(log n)) plus
 * what @grow insertions may add.
 */
int psi_rb_height_bound(const struct ps_rb_root *root, int grow);

/*
 * In-order iteration without parent pointers: the iterator keeps the
 * ancestors still to visit.  Loads are acquire loads, so a copy-on-write
 * reader may iterate a published version inside its read-side section.
 */
struct psi_rb_iter {
	int depth;
	struct ps_rb_node *stack[PS_RB_MAX_DEPTH + 2];
};

struct ps_rb_node *psi_rb_iter_first(struct psi_rb_iter *it, const struct ps_rb_root *root);
struct ps_rb_node *psi_rb_iter_next(struct psi_rb_iter *it);

/**
 * psi_rb_check() - verify the five properties and the depth bound
 * @why: receives a static description of the first violation
 *
 * Return: the number of nodes, or -1 on a violation.
 */
long psi_rb_check(const struct ps_rb_root *root, const char **why);

/**
 * psi_rb_count_gen() - how many nodes of @root's tree carry generation @gen
 *
 * For tests: after an update is published none should carry a later one,
 * and a version is unchanged if its nodes are.
 */
size_t psi_rb_count_gen(const struct ps_rb_root *root, uint64_t gen);

#endif /* POLSTORE_SRC_RBTREE_H */
