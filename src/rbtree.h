/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An intrusive red-black tree without parent pointers, written once for two
 * kinds of writer:
 *
 *  - in place (spin, rwlock, seqlock stores): nodes are linked, recoloured
 *    and rotated where they are, as in any red-black tree;
 *  - copy on write (rcu, rcu-qsbr stores): a node that readers may reach is
 *    never changed.  An update works on a private root and copies every
 *    node it must change (path copying), so the published version stays
 *    whole; publishing the private root is one release store.
 *
 * The same insert and erase code serves both: before it changes a node it
 * asks for that node "owned" (rb_own_*()), which in place is the node
 * itself and copy on write is the node if this update created it (its
 * generation is the update's), else a fresh copy linked in its place in the
 * (owned) parent.  Ownership goes top-down, so a parent is always owned
 * before its child is copied.  A node is copied at most once per update.
 * Parent pointers are impossible copy on write (a copied node's children
 * would all need new parents), so writers carry the path of ancestors
 * (struct ps_rb_path) and readers walk down only.
 *
 * The five properties kept (checked by ps_rb_check()):
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
 * stores).  @meta (colour and generation) is the writers' alone.  In place,
 * a rotation can hide a node from a concurrent reader for a moment, so such
 * readers must validate what they found (seqcount) and bound their walk
 * (PS_RB_MAX_DEPTH); copy on write, readers see one immutable version.
 */
#ifndef POLSTORE_SRC_RBTREE_H
#define POLSTORE_SRC_RBTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/static/rtree.h>

#include "compiler.h"

/*
 * One update's view of the tree.  In place: @root is the published root,
 * @copy is NULL.  Copy on write: @root is the update's private root
 * (starting as the published one), @gen a generation no earlier update
 * used, and @copy returns a copy of @old (children, colour and payload)
 * that the caller allocated before the update began; it cannot fail.  The
 * tree core sets the copy's generation; the caller retires @old.
 */
struct ps_rb_tx {
	struct ps_rb_root *root;
	uint64_t gen;
	struct ps_rb_node *(*copy)(struct ps_rb_tx *tx, const struct ps_rb_node *old);
};

/*
 * The ancestors of a position, root first: @dir[i] is the side taken from
 * @node[i].  For an insertion the path ends at the parent of the empty
 * slot (@dir of the last node names the slot); for an erase or ps_rb_own()
 * it ends at the node itself.  The two spare entries let an erase extend
 * the path to the successor and rotate it once.
 */
struct ps_rb_path {
	int depth;
	unsigned char dir[PS_RB_MAX_DEPTH + 2];
	struct ps_rb_node *node[PS_RB_MAX_DEPTH + 2];
};

static inline void ps_rb_path_push(struct ps_rb_path *p, struct ps_rb_node *n, int dir)
{
	p->node[p->depth] = n;
	p->dir[p->depth] = (unsigned char)dir;
	p->depth++;
}

/* Reader-side loads: pair with the release stores of the writer. */
static inline struct ps_rb_node *ps_rb_load_root(const struct ps_rb_root *root)
{
	return PS_LOAD_ACQUIRE(root->node);
}

static inline struct ps_rb_node *ps_rb_load_child(const struct ps_rb_node *n, int dir)
{
	return PS_LOAD_ACQUIRE(n->child[dir]);
}

/**
 * ps_rb_insert() - link @node at the empty slot the path ends at, rebalance
 * @path: from the root to the slot's parent (empty for an empty tree);
 *        clobbered
 *
 * @node's links, colour and generation are set here; its payload must be
 * set before, as the store that makes it reachable (in place) is a release.
 * Copy on write, takes at most ps_rb_copies_insert(@path->depth) copies.
 */
void ps_rb_insert(struct ps_rb_tx *tx, struct ps_rb_path *path, struct ps_rb_node *node);

/**
 * ps_rb_erase() - unlink the node @path ends at, rebalance
 * @path: from the root to the node; clobbered
 *
 * Return: the node unlinked: the node itself in place, its copy copy on
 * write (the original was handed to @tx->copy, hence to the caller, first).
 * Copy on write, takes at most ps_rb_copies_erase(height) copies.
 */
struct ps_rb_node *ps_rb_erase(struct ps_rb_tx *tx, struct ps_rb_path *path);

/**
 * ps_rb_own() - the node @path ends at, made changeable by @tx
 *
 * In place the node itself.  Copy on write the node, or its copy linked in
 * its place (its ancestors owned too); the caller may then change its
 * payload, keeping the tree's order.  At most @path->depth copies.
 */
struct ps_rb_node *ps_rb_own(struct ps_rb_tx *tx, struct ps_rb_path *path);

/*
 * Worst-case copies of one operation in a tree of height at most @h
 * (nodes on the longest root-to-leaf path): the path itself, then for
 * insertion one uncle per two levels climbed; for erase the sibling at
 * every level climbed plus, at the level that ends the loop, a second
 * sibling and two nephews, and the final node made black.
 */
static inline size_t ps_rb_copies_insert(int h)
{
	return (size_t)h + (size_t)h / 2 + 1;
}

static inline size_t ps_rb_copies_erase(int h)
{
	return 2 * (size_t)h + 5;
}

/* The height of a red-black tree of @n nodes is at most 2 * log2(n + 1). */
static inline int ps_rb_height_max(size_t n)
{
	return 2 * (int)(8 * sizeof(unsigned long long) - (size_t)__builtin_clzll((unsigned long long)n + 1));
}

/**
 * ps_rb_height_bound() - an upper bound on the height of @root's tree, and
 * of the tree after @grow more insertions
 *
 * Twice the black height (counted down the leftmost path, O(log n)) plus
 * what @grow insertions may add.
 */
int ps_rb_height_bound(const struct ps_rb_root *root, int grow);

/*
 * In-order iteration without parent pointers: the iterator keeps the
 * ancestors still to visit.  Loads are acquire loads, so a copy-on-write
 * reader may iterate a published version inside its read-side section.
 */
struct ps_rb_iter {
	int depth;
	struct ps_rb_node *stack[PS_RB_MAX_DEPTH + 2];
};

struct ps_rb_node *ps_rb_iter_first(struct ps_rb_iter *it, const struct ps_rb_root *root);
struct ps_rb_node *ps_rb_iter_next(struct ps_rb_iter *it);

/**
 * ps_rb_check() - verify the five properties and the depth bound
 * @why: receives a static description of the first violation
 *
 * Return: the number of nodes, or -1 on a violation.
 */
long ps_rb_check(const struct ps_rb_root *root, const char **why);

/**
 * ps_rb_count_gen() - how many nodes of @root's tree carry generation @gen
 *
 * For tests: after an update is published none should carry a later one,
 * and a version is unchanged if its nodes are.
 */
size_t ps_rb_count_gen(const struct ps_rb_root *root, uint64_t gen);

#endif /* POLSTORE_SRC_RBTREE_H */
