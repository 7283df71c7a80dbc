/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An intrusive red-black tree without parent pointers, changed in place:
 * nodes are linked, recoloured and rotated where they are.  Writers are
 * serialised by the caller and carry the path of ancestors (struct
 * psi_rb_path); readers walk down only.
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
 * stores) and the payload; colours (@meta) are the writers' alone.  A
 * rotation can hide a node from a concurrent reader for a moment, so such
 * readers must validate what they found (seqcount) and bound their walk
 * (PS_RB_MAX_DEPTH); the RCU stores' readers use the read index
 * (rangeindex.h) instead.
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
 * slot (@dir of the last node names the slot); for an erase it ends at the
 * node itself.  The two spare entries let an erase extend
 * the path to the successor and rotate it once.
 */
struct psi_rb_path {
	int depth;
	unsigned char dir[PS_RB_MAX_DEPTH + 2];
	struct ps_rb_node *node[PS_RB_MAX_DEPTH + 2];
};

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
 * @node's links and colour are set here; its payload must be set before,
 * as the store that makes it reachable is a release.
 */
void psi_rb_insert(struct ps_rb_root *root, struct psi_rb_path *path, struct ps_rb_node *node);

/**
 * psi_rb_erase() - unlink the node @path ends at, rebalance
 * @path: from the root to the node; clobbered
 *
 * Return: the node unlinked.
 */
struct ps_rb_node *psi_rb_erase(struct ps_rb_root *root, struct psi_rb_path *path);

/*
 * In-order iteration without parent pointers: the iterator keeps the
 * ancestors still to visit.  Loads are acquire loads; the tree must not
 * change during the walk.
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

#endif /* POLSTORE_SRC_RBTREE_H */
