// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Pools of free ranges (rangepool.h): the lists writers take spare ranges
 * from and hand removed ones to.
 */
#include <errno.h>
#include <string.h>

#include "alloc_internal.h"
#include "compiler.h"
#include "policy_internal.h"
#include "rangepool.h"

struct ps_range *psi_range_list_pop(struct psi_range_list *l)
{
	struct ps_range *r = l->head;

	if (r) {
		l->head = r->next_free;
		if (!--l->n)
			l->tail = NULL;
	}
	return r;
}

int psi_range_list_grow(struct psi_range_list *list, int n)
{
	struct psi_range_list fresh = { NULL, 0, NULL };
	struct ps_range *r;
	size_t have;

	for (have = list->n; have < (size_t)n; have++) {
		r = psi_zalloc(sizeof(*r));
		if (!r) {
			psi_range_list_free(&fresh);
			return -ENOMEM;
		}
		psi_range_list_push(&fresh, r);
	}
	while ((r = psi_range_list_pop(&fresh)))
		psi_range_list_push(list, r);
	return 0;
}

void psi_range_list_free(struct psi_range_list *list)
{
	struct ps_range *r;

	while ((r = psi_range_list_pop(list))) {
		psi_policy_store_put(r->pol);
		psi_free(r);
	}
}

void psi_range_list_move(struct psi_range_list *dst, struct psi_range_list *src, size_t n)
{
	struct ps_range *r;

	while (n-- && (r = psi_range_list_pop(src)))
		psi_range_list_push(dst, r);
}

void psi_range_list_splice(struct psi_range_list *dst, struct psi_range_list *src)
{
	if (!src->n)
		return;
	src->tail->next_free = dst->head;
	if (!dst->n)
		dst->tail = src->tail;
	dst->head = src->head;
	dst->n += src->n;
	*src = (struct psi_range_list){ NULL, 0, NULL };
}

