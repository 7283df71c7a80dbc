/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The range tree: non-overlapping [start, end) ranges, each holding one
 * policy reference, kept in a red-black tree ordered by start.  This is the
 * one tree core every synchronisation variant uses; it knows nothing about
 * locks.  Writers are serialised by the caller.
 */
#ifndef POLSTORE_SRC_RANGETREE_H
#define POLSTORE_SRC_RANGETREE_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/store.h>

#include "rbtree.h"

/*
 * @start, @end and @pol are loaded by lockless readers while the writer
 * may trim the range, so they are accessed with PS_READ_ONCE/PS_WRITE_ONCE.
 * @pol never changes once the range is linked.
 */
struct ps_range {
	struct ps_rb_node rb;
	uint64_t start;
	uint64_t end;
	struct ps_policy *pol; /* one reference, owned by the range */
	struct ps_range *next_free; /* on a ps_range_list once unlinked or spare */
};

struct ps_rtree {
	struct ps_rb_root root;
	size_t count; /* PS_READ_ONCE by ps_store_count() */
};

/* A singly-linked list of ranges: spares for a set, or ranges it removed. */
struct ps_range_list {
	struct ps_range *head;
};

/* Most ranges one ps_rtree_set() takes from its spares: the new range and a split tail. */
#define PS_RTREE_SET_MAX_NEW 2

/** ps_rtree_lookup() outcome for a walk that exceeded PS_RB_MAX_DEPTH. */
#define PS_RTREE_OVERRUN ((struct ps_range *)1)

/**
 * ps_rtree_lookup() - the range containing @idx
 *
 * Safe for a lockless reader of a tree a writer may be changing: every load
 * is atomic and the walk stops after PS_RB_MAX_DEPTH steps (returning
 * PS_RTREE_OVERRUN).  Such a reader must validate the result.
 * Return: the range, NULL, or PS_RTREE_OVERRUN.
 */
static inline struct ps_range *ps_rtree_lookup(const struct ps_rtree *t, uint64_t idx)
{
	struct ps_rb_node *n = ps_rb_load_root(&t->root);
	int steps;

	for (steps = 0; n && steps < PS_RB_MAX_DEPTH; steps++) {
		struct ps_range *r = ps_container_of(n, struct ps_range, rb);

		if (idx < PS_READ_ONCE(r->start))
			n = ps_rb_load_child(n, 0);
		else if (idx >= PS_READ_ONCE(r->end))
			n = ps_rb_load_child(n, 1);
		else
			return r;
	}
	return n ? PS_RTREE_OVERRUN : NULL;
}

void ps_rtree_init(struct ps_rtree *t);

/**
 * ps_rtree_set() - apply shared_policy_replace() semantics to one tree
 * @spares: at least PS_RTREE_SET_MAX_NEW preallocated ranges; those used
 *          are taken off the list
 * @removed: receives the ranges unlinked from the tree; the caller frees
 *           them with ps_range_list_free() once no reader can reach them
 *
 * Cannot fail.  @pol NULL or DEFAULT only removes.
 */
void ps_rtree_set(struct ps_rtree *t, uint64_t start, uint64_t end, struct ps_policy *pol,
		struct ps_range_list *spares, struct ps_range_list *removed);

/** ps_rtree_foreach() - in-order walk for a tree no writer is changing. */
int ps_rtree_foreach(const struct ps_rtree *t, ps_foreach_fn fn, void *arg);

/** ps_rtree_check() - rb properties, order, no overlap, count, policies. */
int ps_rtree_check(const struct ps_rtree *t, const char **why);

/** ps_rtree_same() - do two trees hold the same ranges with the same policies? */
bool ps_rtree_same(const struct ps_rtree *a, const struct ps_rtree *b);

/** ps_rtree_clear() - unlink every range onto @removed (tree becomes empty). */
void ps_rtree_clear(struct ps_rtree *t, struct ps_range_list *removed);

/** ps_range_list_fill() - allocate ranges until @list holds @n; -ENOMEM leaves it as it was. */
int ps_range_list_fill(struct ps_range_list *list, int n);

/** ps_range_list_free() - put each range's policy (if any) and free it. */
void ps_range_list_free(struct ps_range_list *list);

#endif /* POLSTORE_SRC_RANGETREE_H */
