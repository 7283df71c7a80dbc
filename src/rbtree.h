/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An intrusive red-black tree, written for readers that walk it without
 * the writer's lock.
 *
 * The five properties kept (checked by ps_rb_check()):
 *  1. every node is red or black;
 *  2. the root is black;
 *  3. the (NULL) leaves are black;
 *  4. a red node has two black children;
 *  5. every path from a node down to a leaf holds the same number of black
 *     nodes.
 * Hence the depth is at most 2 * log2(n + 1), below PS_RB_MAX_DEPTH for any
 * n that fits in memory.
 *
 * Writers must be serialised by the caller.  Every child-pointer store is a
 * release store, so a lockless reader that loads a child pointer (acquire)
 * sees the node it points to fully initialised.  Writers rotate in place:
 * a concurrent reader may miss a node or follow a transient loop, so lockless
 * readers must validate what they found (seqcount) and bound their walk
 * (PS_RB_MAX_DEPTH), or only walk a tree no writer is changing (the RCU
 * latch).  The parent/colour word is for writers only.
 */
#ifndef POLSTORE_SRC_RBTREE_H
#define POLSTORE_SRC_RBTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

#define PS_RB_MAX_DEPTH 128

struct ps_rb_node {
	uintptr_t parent_color; /* parent pointer | colour in bit 0 (1 = black) */
	struct ps_rb_node *child[2]; /* [0] left (smaller), [1] right (larger) */
};

struct ps_rb_root {
	struct ps_rb_node *node;
};

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
 * ps_rb_link() - attach @node as @parent's child on side @dir (or as root)
 *
 * The caller found the empty slot by a search; ps_rb_insert_color() must
 * follow.  @node's fields are initialised here; the store that makes it
 * reachable is the last one and is a release.
 */
void ps_rb_link(struct ps_rb_root *root, struct ps_rb_node *node, struct ps_rb_node *parent,
		int dir);
void ps_rb_insert_color(struct ps_rb_root *root, struct ps_rb_node *node);
void ps_rb_erase(struct ps_rb_root *root, struct ps_rb_node *node);

struct ps_rb_node *ps_rb_first(const struct ps_rb_root *root);
struct ps_rb_node *ps_rb_next(const struct ps_rb_node *node);

/**
 * ps_rb_check() - verify the five properties and the parent links
 * @why: receives a static description of the first violation
 *
 * Return: the number of nodes, or -1 on a violation.
 */
long ps_rb_check(const struct ps_rb_root *root, const char **why);

#endif /* POLSTORE_SRC_RBTREE_H */
