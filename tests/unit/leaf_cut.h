/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The occupancy checks' tool, shared by the index suite and the RCU
 * store's: cut an index's first leaf down to its first range in place.
 */
#ifndef POLSTORE_TESTS_LEAF_CUT_H
#define POLSTORE_TESTS_LEAF_CUT_H

#include <criterion/criterion.h>

#include "rangeindex.h"
#include "rangeindex_node.h"
#include "rangetree.h"

/*
 * Cut the first leaf of the index rooted at @root down to its first
 * range, taking its other ranges out of @tree too, so that index and tree
 * still agree and only the leaf's occupancy is wrong.  No reader or set
 * may run.  The leaf must hold at least four ranges.
 */
static inline void leaf_cut_first(const struct ps_ix_node *root, struct ps_rtree *tree)
{
	struct psi_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
	const struct ps_ix_node *h;
	struct ps_ix_leaf *l;
	unsigned cap, i;

	for (h = root; h->height; h = ((const struct ps_ix_inner *)(const void *)h)->child[0])
		;
	l = (struct ps_ix_leaf *)(void *)h;
	cap = 1u << l->h.shift;
	cr_assert_geq(l->h.n, 4);
	for (i = 1; i < l->h.n; i++) {
		cr_assert_eq(psi_range_list_fill(&spares, PSI_RANGETREE_SET_MAX_NEW), 0);
		psi_rangetree_set(tree, _PS_IX_START(l)[i], _PS_IX_END(l)[i], NULL, &spares,
				&removed);
	}
	for (i = 1; i < cap; i++)
		leaf_put(leaf_fields(l, l->h.shift), i, NULL);
	l->h.n = 1;
	psi_range_list_free(&spares);
	psi_range_list_free(&removed);
}

#endif
