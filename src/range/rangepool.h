/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pools of free ranges (rangepool.c): the lists writers take spare ranges
 * from and hand removed ones to.
 */
#ifndef POLSTORE_SRC_RANGEPOOL_H
#define POLSTORE_SRC_RANGEPOOL_H

#include <stddef.h>

#include <polstore/static/rtree.h>

/* A singly-linked list of ranges: spares for a set, or ranges it removed. */
struct psi_range_list {
	struct ps_range *head;
	size_t n;	       /* ranges on the list */
	struct ps_range *tail; /* the last one, for psi_range_list_splice() */
};

/** psi_range_list_push() - put @r first on @l. */
static inline void psi_range_list_push(struct psi_range_list *l, struct ps_range *r)
{
	r->next_free = l->head;
	l->head = r;
	if (!l->n++)
		l->tail = r;
}

/* psi_range_list_fill()'s allocation, for a list short of @n. */
int psi_range_list_grow(struct psi_range_list *list, int n);

/** psi_range_list_fill() - allocate ranges until @list holds @n; -ENOMEM leaves it as it was. */
static inline int psi_range_list_fill(struct psi_range_list *list, int n)
{
	return list->n >= (size_t)n ? 0 : psi_range_list_grow(list, n);
}

/** psi_range_list_free() - put each range's policy (if any) and free it. */
void psi_range_list_free(struct psi_range_list *list);

/** psi_range_list_pop() - take the first range off @l, or NULL. */
struct ps_range *psi_range_list_pop(struct psi_range_list *l);

/** psi_range_list_move() - move @n ranges (at most all) from @src onto @dst, one by one. */
void psi_range_list_move(struct psi_range_list *dst, struct psi_range_list *src, size_t n);

/** psi_range_list_splice() - move all of @src onto @dst in O(1). */
void psi_range_list_splice(struct psi_range_list *dst, struct psi_range_list *src);


#endif /* POLSTORE_SRC_RANGEPOOL_H */
