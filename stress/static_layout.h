/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A static search layout over the ranges of a point (static_layout.c):
 * the floor a lookup of that many ranges can reach.  Built once from the
 * range starts, read-only after.  A B+ order of 16-key nodes: each level
 * one array of nodes, a node's children the 17 consecutive nodes of the
 * level below at 17 times its index (no pointers), the leaves the keys
 * in order with the answer beside each key; everything on 2 MiB pages
 * where the system gives them.  A lookup reads one node a level: 2 lines
 * of keys, and at the leaf a third for the answer.
 */
#ifndef POLSTORE_STRESS_STATIC_LAYOUT_H
#define POLSTORE_STRESS_STATIC_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define SL_KEYS 16
#define SL_MAX_LEVELS 16

struct sl_leaf {
	uint64_t key[SL_KEYS]; /* range starts; UINT64_MAX past the last */
	int32_t val[SL_KEYS];  /* the answer of each key's range */
} __attribute__((aligned(64)));

struct sl_inner {
	uint64_t key[SL_KEYS]; /* the smallest key under child i + 1; UINT64_MAX: none */
} __attribute__((aligned(64)));

struct sl_tree {
	const struct sl_inner *level[SL_MAX_LEVELS]; /* the inner levels, the root's first */
	int nlevels;
	const struct sl_leaf *leaf;
	size_t n, nleaves;
	void *mem;
	size_t mem_bytes;
};

/*
 * sl_build() - the layout of @n ranges starting at @key[0] < @key[1] < ...,
 * range i answering @val[i]; exits the program when out of memory.
 */
void sl_build(struct sl_tree *t, const uint64_t *key, const int32_t *val, size_t n);
void sl_free(struct sl_tree *t);

/* How many of node @k's keys are at most @x: the child to take, or one past the key. */
static inline unsigned sl_rank(const uint64_t *k, uint64_t x)
{
	unsigned c = 0, i;

	for (i = 0; i < SL_KEYS; i++)
		c += k[i] <= x;
	return c;
}

/* The answer of the range holding @x (@x at least the first start). */
static inline int32_t sl_lookup(const struct sl_tree *t, uint64_t x)
{
	size_t j = 0;
	int l;

	for (l = 0; l < t->nlevels; l++)
		j = j * (SL_KEYS + 1) + sl_rank(t->level[l][j].key, x);
	return t->leaf[j].val[sl_rank(t->leaf[j].key, x) - 1];
}

#endif /* POLSTORE_STRESS_STATIC_LAYOUT_H */
