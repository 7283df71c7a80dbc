/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read index's occupancy (rangeindex_join.c): nodes that an update
 * leaves under a quarter full join a neighbour or share with it, and a
 * root whose few children fit in one node gives way to that node, so that
 * the index of a store that shrinks keeps about the size and depth of one
 * built anew.  Called by update() in rangeindex.c, under the
 * writer's serialisation; every node made here is made with new_node()
 * before anything is published, every node replaced is retired.
 */
#ifndef POLSTORE_SRC_RANGEINDEX_JOIN_H
#define POLSTORE_SRC_RANGEINDEX_JOIN_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/static/index.h>

struct psi_ix_tx;

/*
 * Children @ch[0, *n) of an inner node, with their lower bounds @clo (the
 * node's own first), as the update rebuilds that node: those of them that
 * the update made, [a, b), and under their occupancy (node_under(); the
 * last child is the index's last when @open: the node's interval reaches
 * UINT64_MAX) join a neighbour, or share with one when neither fits
 * beside them, until none is.  *@n and the lists change in place (no
 * more entries than before).  Return: 0 or -ENOMEM.
 */
int psi_ix_join(struct psi_ix_tx *tx, struct ps_ix_node **ch, uint64_t *clo, int *n, int a, int b,
		bool open);

/*
 * Whether the root @in, its child @ci replaced by @x (@ci -1: none), has
 * at most a quarter of its children and they fit in one node: then the
 * update rebuilds it, and psi_ix_join_root() replaces it by that node.
 */
bool psi_ix_root_fits(const struct ps_ix_inner *in, int ci, const struct ps_ix_node *x);

/*
 * The root an update made, *@root: an inner node of at most a quarter of
 * its children whose children fit in one node is replaced by that node
 * (the index loses a level).  Return: 0 or -ENOMEM.
 */
int psi_ix_join_root(struct psi_ix_tx *tx, struct ps_ix_node **root);

#endif /* POLSTORE_SRC_RANGEINDEX_JOIN_H */
