/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pools of free ranges (rangepool.c): the lists writers take spare ranges
 * from and hand removed ones to, and the vectors the copy-on-write
 * stores keep per thread.
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

/* Spare ranges by pointer (copy on write), ranges [0, n) of @v. */
struct psi_range_vec {
	struct ps_range **v;
	size_t n, cap;
};

/** psi_range_list_push() - put @r first on @l. */
static inline void psi_range_list_push(struct psi_range_list *l, struct ps_range *r)
{
	r->next_free = l->head;
	l->head = r;
	if (!l->n++)
		l->tail = r;
}

/** psi_range_list_fill() - allocate ranges until @list holds @n; -ENOMEM leaves it as it was. */
int psi_range_list_fill(struct psi_range_list *list, int n);

/** psi_range_list_free() - put each range's policy (if any) and free it. */
void psi_range_list_free(struct psi_range_list *list);

/** psi_range_list_pop() - take the first range off @l, or NULL. */
struct ps_range *psi_range_list_pop(struct psi_range_list *l);

/** psi_range_list_move() - move @n ranges (at most all) from @src onto @dst, one by one. */
void psi_range_list_move(struct psi_range_list *dst, struct psi_range_list *src, size_t n);

/** psi_range_list_splice() - move all of @src onto @dst in O(1). */
void psi_range_list_splice(struct psi_range_list *dst, struct psi_range_list *src);

/** psi_range_list_put_policies() - put each range's policy; the ranges stay, without one. */
void psi_range_list_put_policies(struct psi_range_list *list);

/** psi_range_vec_reserve() - room for @n pointers in @vec; 0 or -ENOMEM (unchanged). */
int psi_range_vec_reserve(struct psi_range_vec *vec, size_t n);

/**
 * psi_range_vec_fill() - allocate ranges until @vec holds @n
 *
 * Return: 0, or -ENOMEM (@vec keeps what it holds, possibly more than
 * before: spares are no state).
 */
int psi_range_vec_fill(struct psi_range_vec *vec, size_t n);

/** psi_range_vec_trim() - free the spares beyond @keep (no policy touched). */
void psi_range_vec_trim(struct psi_range_vec *vec, size_t keep);

/** psi_range_vec_shrink() - shrink the array to what it holds (if much larger). */
void psi_range_vec_shrink(struct psi_range_vec *vec);

/** psi_range_vec_free() - free every spare and the array. */
void psi_range_vec_free(struct psi_range_vec *vec);

/** psi_range_list_free_nopol() - free each range, leaving its policy alone. */
void psi_range_list_free_nopol(struct psi_range_list *list);

#endif /* POLSTORE_SRC_RANGEPOOL_H */
