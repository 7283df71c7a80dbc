// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Red-black tree rebalancing on an explicit path of ancestors, in place or
 * copy on write (see rbtree.h).  The code is written once for both mirror
 * images: `dir` names a side (0 left, 1 right) and `!dir` the other, so
 * each rebalancing case appears once.
 *
 * Ownership rule (copy on write): a node's links or payload change only
 * once it is owned, and it is owned only as a copy linked into an owned
 * parent or held by the pending slot, so no node a reader can reach is
 * written before publication.  rb_copy() is the only place that copies;
 * rb_own_at() and rb_raise() decide where a copy goes.  Colours are
 * written in place: no reader loads them.
 *
 * Store order (in place, for seqlock readers that walk while we write):
 * every child-pointer store is a release, and a rotation stores bottom-up
 * so a reader never finds NULL where a subtree is.  Such readers still
 * validate with the sequence count; the order only keeps them from
 * faulting or walking off into a node that is not initialised.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rbtree.h"

#define RB_BLACK 1ULL

static inline bool rb_is_black(const struct ps_rb_node *n)
{
	return !n || (n->meta & RB_BLACK); /* NULL leaves are black (property 3) */
}

static inline bool rb_is_red(const struct ps_rb_node *n)
{
	return !rb_is_black(n);
}

static inline bool rb_owned(const struct psi_rb_tx *tx, const struct ps_rb_node *n)
{
	return !tx->copy || (n->meta >> 1) == tx->gen;
}

/* Give @n the colour @black; a published node's old colour goes to the undo log first. */
static void rb_paint(struct psi_rb_tx *tx, struct ps_rb_node *n, uint64_t black)
{
	uint64_t meta = (n->meta & ~RB_BLACK) | black;

	if (meta == n->meta)
		return;
	if (!rb_owned(tx, n)) {
		if (tx->nundo == tx->undo_cap) {
			/* The caller reserves psi_rb_paints() per operation: a bug, not a state. */
			fprintf(stderr, "polstore: red-black update ran out of undo entries\n");
			abort();
		}
		tx->undo[tx->nundo].node = n;
		tx->undo[tx->nundo++].meta = n->meta;
	}
	n->meta = meta;
}

static inline void rb_set_black(struct psi_rb_tx *tx, struct ps_rb_node *n)
{
	rb_paint(tx, n, RB_BLACK);
}

static inline void rb_set_red(struct psi_rb_tx *tx, struct ps_rb_node *n)
{
	rb_paint(tx, n, 0);
}

static inline void rb_set_colour_of(struct psi_rb_tx *tx, struct ps_rb_node *n,
		const struct ps_rb_node *from)
{
	rb_paint(tx, n, from->meta & RB_BLACK);
}

void psi_rb_abort(struct psi_rb_tx *tx)
{
	while (tx->nundo) {
		tx->nundo--;
		tx->undo[tx->nundo].node->meta = tx->undo[tx->nundo].meta;
	}
	tx->pending = false;
}

static inline void rb_set_child(struct ps_rb_node *n, int dir, struct ps_rb_node *c)
{
	PSI_STORE_RELEASE(n->child[dir], c);
}

/* A copy of @old owned by @tx: same children (as the update sees them), colour and payload. */
static struct ps_rb_node *rb_copy(struct psi_rb_tx *tx, struct ps_rb_node *old)
{
	struct ps_rb_node *n = tx->copy(tx, old);

	n->child[0] = psi_rb_child(tx, old, 0);
	n->child[1] = psi_rb_child(tx, old, 1);
	n->meta = tx->gen << 1 | (old->meta & RB_BLACK);
	return n;
}

/*
 * @parent's child on side @dir, owned.  @parent must be owned already, so
 * its child slot is its own.  NULL stays NULL.
 */
static struct ps_rb_node *rb_own_child(struct psi_rb_tx *tx, struct ps_rb_node *parent, int dir)
{
	struct ps_rb_node *c = parent->child[dir];

	if (!c || rb_owned(tx, c))
		return c;
	c = rb_copy(tx, c);
	rb_set_child(parent, dir, c);
	return c;
}

/*
 * Positions are named by a path and a depth: position @i of @p is the slot
 * p->node[i] sits in, the child of p->node[i - 1] on side p->dir[i - 1]
 * (the root for i = 0).  Above the pending slot every node is published
 * and uncopied, so a node there has one position and comparing the parent
 * tells two positions apart.
 */
static inline bool pos_on_ppath(const struct psi_rb_tx *tx, const struct psi_rb_path *p, int i)
{
	return i == 0 || (p->node[i - 1] == tx->ppath.node[i - 1] &&
				 p->dir[i - 1] == tx->ppath.dir[i - 1]);
}

/* Position @i of @p is the pending slot. */
static inline bool pos_pending(const struct psi_rb_tx *tx, const struct psi_rb_path *p, int i)
{
	return tx->pending && i == tx->pdepth && pos_on_ppath(tx, p, i);
}

/* Position @i of @p lies above the pending slot, on the way to it. */
static inline bool pos_above_pending(const struct psi_rb_tx *tx, const struct psi_rb_path *p, int i)
{
	return tx->pending && i < tx->pdepth && pos_on_ppath(tx, p, i);
}

static inline void pend_val(struct psi_rb_tx *tx, struct ps_rb_node *n)
{
	tx->pval = n;
	if (!tx->pdepth)
		tx->root->node = n;
}

/*
 * Move the pending slot up to position @i, above it (its parent is
 * tx->ppath.node[i - 1]): the published nodes from @i down to the slot's
 * parent are copied, each linked into the copy above it, and the slot's
 * content hangs below the last.  These are the nodes between the update's
 * changes and its highest one.  @p (may be NULL), a path through position
 * @i, has its nodes on the way replaced by their copies.
 */
static void rb_raise(struct psi_rb_tx *tx, struct psi_rb_path *p, int i)
{
	int k = tx->pdepth, j;
	bool follow = p != NULL;
	struct ps_rb_node *top, *cur, *c;

	top = cur = rb_copy(tx, tx->ppath.node[i]); /* takes tx->pval if i == k - 1 */
	if (follow)
		p->node[i] = top;
	for (j = i + 1; j < k; j++) {
		c = rb_copy(tx, tx->ppath.node[j]);
		cur->child[tx->ppath.dir[j - 1]] = c;
		cur = c;
		follow = follow && j < p->depth && p->dir[j - 1] == tx->ppath.dir[j - 1];
		if (follow)
			p->node[j] = c;
	}
	tx->pdepth = i;
	tx->ppath.depth = i;
	pend_val(tx, top);
}

static struct ps_rb_node *rb_own_at(struct psi_rb_tx *tx, struct psi_rb_path *p, int i);

/*
 * Make @n the content of position @i of @p.  Return: what was there (the
 * node p->node[i] names, or its copy when the pending slot had to move up
 * through it first).  p->node[i] is left to the caller.
 */
static struct ps_rb_node *rb_link_at(struct psi_rb_tx *tx, struct psi_rb_path *p, int i,
		struct ps_rb_node *n)
{
	struct ps_rb_node *parent = i ? p->node[i - 1] : NULL, *old;

	if (!tx->copy || (parent && rb_owned(tx, parent))) {
		if (parent)
			rb_set_child(parent, p->dir[i - 1], n);
		else
			PSI_STORE_RELEASE(tx->root->node, n);
		return i < p->depth ? p->node[i] : NULL;
	}
	/* The slot's old content may hold the pending slot: bring it up first. */
	if (pos_above_pending(tx, p, i))
		rb_raise(tx, p, i);
	old = p->node[i];
	if (pos_pending(tx, p, i)) {
		pend_val(tx, n);
	} else if (!tx->pending) {
		/* The update's first change: this slot is where it will be published. */
		tx->pending = true;
		tx->pdepth = i;
		tx->ppath.depth = i;
		memcpy(tx->ppath.node, p->node, (size_t)i * sizeof(p->node[0]));
		memcpy(tx->ppath.dir, p->dir, (size_t)i);
		pend_val(tx, n);
	} else {
		/*
		 * A change beside the region: own the parent, which grows the
		 * region up to the two changes' lowest common ancestor (i > 0:
		 * the root is the pending slot or above it).
		 */
		parent = rb_own_at(tx, p, i - 1);
		rb_set_child(parent, p->dir[i - 1], n);
	}
	return old;
}

/* The node at position @i of @p, owned; p->node[i] names it from then on. */
static struct ps_rb_node *rb_own_at(struct psi_rb_tx *tx, struct psi_rb_path *p, int i)
{
	struct ps_rb_node *n = p->node[i];

	if (rb_owned(tx, n))
		return n;
	if (pos_above_pending(tx, p, i)) {
		rb_raise(tx, p, i);
		return p->node[i];
	}
	n = rb_copy(tx, n);
	rb_link_at(tx, p, i, n);
	p->node[i] = n;
	return n;
}

struct ps_rb_node *psi_rb_own(struct psi_rb_tx *tx, struct psi_rb_path *p)
{
	int i;

	/* Earlier changes of the update may have replaced nodes on the way: follow the sides. */
	p->node[0] = tx->root->node;
	for (i = 1; i < p->depth; i++)
		p->node[i] = psi_rb_child(tx, p->node[i - 1], p->dir[i - 1]);
	return rb_own_at(tx, p, p->depth - 1);
}

/*
 * Rotate at position @xi of @p (node x, owned) towards side @dir: x's child
 * on side !dir (y, owned by the caller) rises into x's position, x becomes
 * y's child on side @dir and y's inner subtree moves under x.  In-order
 * sequence and colours are unchanged; the inner subtree is moved, not
 * changed, so it needs no copy.  Returns y; p->node[xi] is left to the
 * caller.
 */
static struct ps_rb_node *rb_rotate_at(struct psi_rb_tx *tx, struct psi_rb_path *p, int xi, int dir)
{
	struct ps_rb_node *x = p->node[xi], *y = x->child[!dir];

	rb_set_child(x, !dir, y->child[dir]);
	rb_set_child(y, dir, x);
	rb_link_at(tx, p, xi, y);
	return y;
}

void psi_rb_insert(struct psi_rb_tx *tx, struct psi_rb_path *p, struct ps_rb_node *node)
{
	struct ps_rb_node *parent, *gparent, *uncle;
	int i = p->depth, dir;

	PSI_WRITE_ONCE(node->child[0], NULL);
	PSI_WRITE_ONCE(node->child[1], NULL);
	node->meta = tx->gen << 1; /* red, and owned: the update made it */
	rb_link_at(tx, p, i, node);
	p->node[i] = node; /* @node's index; its parent is p->node[i - 1] */

	/*
	 * Only property 4 can be broken: the red node at @i may have a red
	 * parent.
	 */
	while (i > 0 && rb_is_red(parent = p->node[i - 1])) {
		/* A red node is never the root: the grandparent exists. */
		gparent = p->node[i - 2];
		dir = p->dir[i - 2]; /* parent's side under gparent */
		uncle = psi_rb_child(tx, gparent, !dir);
		if (rb_is_red(uncle)) {
			/*
			 * Case 1, red uncle:
			 *
			 *        G            g        (capital: black)
			 *       / \          / \
			 *      p   u  -->   P   U
			 *      |            |
			 *      n            n
			 *
			 * The grandparent's blackness moves down to both
			 * children; black heights are unchanged, but g may now
			 * be red under a red parent: continue two levels up.
			 * Colours only: nothing is copied.
			 */
			rb_set_black(tx, uncle);
			rb_set_black(tx, parent);
			rb_set_red(tx, gparent);
			i -= 2;
			continue;
		}
		/* Rotations ahead: own what they relink, top-down. */
		gparent = rb_own_at(tx, p, i - 2);
		parent = rb_own_at(tx, p, i - 1);
		if (p->dir[i - 1] != dir) {
			/*
			 * Case 2, inner grandchild (n on the side away from
			 * p's side): rotate at p so that the red pair lies on
			 * the outside, then treat p as the lower node.
			 *
			 *      G             G
			 *     / \           / \
			 *    p   U  -->    n   U
			 *     \           /
			 *      n         p
			 */
			rb_own_at(tx, p, i);
			parent = rb_rotate_at(tx, p, i - 1, dir);
			p->node[i - 1] = parent;
		}
		/*
		 * Case 3, outer grandchild, black uncle: rotate the
		 * grandparent away and swap the two colours; black heights are
		 * as before and no red pair is left.
		 *
		 *        G             P
		 *       / \           / \
		 *      p   U  -->    n   g
		 *     /                   \
		 *    n                     U
		 */
		rb_rotate_at(tx, p, i - 2, !dir);
		rb_set_black(tx, parent);
		rb_set_red(tx, gparent);
		break;
	}
	rb_set_black(tx, tx->root->node); /* property 2 */
}

/*
 * Restore property 5 after a black node was unlinked: the subtree at
 * index @xi of @p (node @x, possibly a NULL leaf, child of p->node[xi - 1]
 * on side p->dir[xi - 1]) is one black short.
 */
static void rb_erase_fixup(struct psi_rb_tx *tx, struct psi_rb_path *p, int xi,
		struct ps_rb_node *x)
{
	struct ps_rb_node *parent, *w, *c;
	int dir;

	while (xi > 0 && rb_is_black(x)) {
		parent = p->node[xi - 1];
		dir = p->dir[xi - 1];
		/* The sibling exists: its side has black height >= 1. */
		w = psi_rb_child(tx, parent, !dir);
		if (rb_is_red(w)) {
			/*
			 * Case 1, red sibling: rotate at the parent so that x
			 * gets a black sibling (w's inner child); the parent
			 * turns red, so after this level the loop ends.
			 *
			 *      P               W
			 *     / \             / \
			 *    x   w    -->    p   D
			 *       / \         / \
			 *      C   D       x   C
			 *
			 * The path gains w above the parent.
			 */
			parent = rb_own_at(tx, p, xi - 1);
			w = rb_own_child(tx, parent, !dir);
			rb_set_black(tx, w);
			rb_set_red(tx, parent);
			rb_rotate_at(tx, p, xi - 1, dir);
			p->node[xi - 1] = w;
			p->dir[xi - 1] = (unsigned char)dir;
			p->node[xi] = parent;
			p->dir[xi] = (unsigned char)dir;
			xi++;
			w = parent->child[!dir];
		}
		if (rb_is_black(psi_rb_child(tx, w, 0)) && rb_is_black(psi_rb_child(tx, w, 1))) {
			/*
			 * Case 2, black sibling with black children: the
			 * sibling turns red, both sides of the parent are one
			 * short now, and the deficit moves up to the parent
			 * (which ends the loop if it is red: it turns black).
			 * Colours only: nothing is copied.
			 */
			rb_set_red(tx, w);
			x = parent;
			xi--;
			continue;
		}
		/* Rotations ahead: own the parent and the sibling. */
		parent = rb_own_at(tx, p, xi - 1);
		w = rb_own_child(tx, parent, !dir);
		if (rb_is_black(w->child[!dir])) {
			/*
			 * Case 3, the sibling's outer child is black (so its
			 * inner child is red): rotate at the sibling so that
			 * its outer child is red, for case 4.
			 *
			 *      p             p
			 *     / \           / \
			 *    x   W   -->   x   C
			 *       / \             \
			 *      c   D             w
			 *                         \
			 *                          D
			 */
			c = rb_own_child(tx, w, dir);
			rb_set_black(tx, c);
			rb_set_red(tx, w);
			rb_set_child(w, dir, c->child[!dir]);
			rb_set_child(c, !dir, w);
			rb_set_child(parent, !dir, c);
			w = c;
		}
		/*
		 * Case 4, black sibling with a red outer child: rotate at the
		 * parent towards x; the sibling takes the parent's colour, the
		 * parent and the outer child turn black, and x's side gains
		 * the black it lacked.  Done.
		 *
		 *      p               w
		 *     / \             / \
		 *    x   W    -->    P   E
		 *       / \         / \
		 *      c   e       x   c
		 */
		rb_set_colour_of(tx, w, parent);
		rb_set_black(tx, parent);
		rb_set_black(tx, w->child[!dir]);
		rb_rotate_at(tx, p, xi - 1, dir);
		return;
	}
	/* x is red (it absorbs the missing black) or the root. */
	if (x)
		rb_set_black(tx, x);
}

struct ps_rb_node *psi_rb_erase(struct psi_rb_tx *tx, struct psi_rb_path *p)
{
	struct ps_rb_node *z, *y, *x, *c;
	int zi = p->depth - 1, yi;
	bool removed_black;

	/* Below z, the pending slot would be cut off from the region: bring it up to z. */
	if (tx->copy && pos_above_pending(tx, p, zi))
		rb_raise(tx, p, zi);
	z = p->node[zi];
	if (psi_rb_child(tx, z, 0) && psi_rb_child(tx, z, 1)) {
		/* y, z's successor, leaves its position and takes z's. */
		p->dir[zi] = 1;
		y = psi_rb_child(tx, z, 1);
		psi_rb_path_push(p, y, 0);
		while ((c = psi_rb_child(tx, y, 0))) {
			y = c;
			psi_rb_path_push(p, y, 0);
		}
		yi = p->depth - 1;
		x = psi_rb_child(tx, y, 1); /* y's only child, or NULL */
		removed_black = rb_is_black(y);
		if (!tx->copy) {
			/* In place, for seqlock readers: unlink y, y takes z's links, y into z's place. */
			rb_set_child(p->node[yi - 1], p->dir[yi - 1], x);
			rb_set_child(y, 0, z->child[0]);
			rb_set_child(y, 1, z->child[1]);
			rb_set_colour_of(tx, y, z);
			rb_link_at(tx, p, zi, y);
		} else {
			/*
			 * Copy on write, y (owned) into z's position first: it
			 * is the owned parent of the way down to y's old
			 * position, which is owned next, so z itself needs no
			 * copy.  Nothing published is written before
			 * publication, so the order is free.
			 */
			if (!rb_owned(tx, y))
				y = rb_copy(tx, y);
			z = rb_link_at(tx, p, zi, y);
			rb_set_colour_of(tx, y, z);
			rb_set_child(y, 0, psi_rb_child(tx, z, 0));
			p->node[zi] = y;
			if (yi == zi + 1) {
				rb_set_child(y, 1, x); /* y was z's right child */
			} else {
				int j;

				rb_set_child(y, 1, psi_rb_child(tx, z, 1));
				for (j = zi + 1; j < yi; j++)
					rb_own_at(tx, p, j);
				rb_set_child(p->node[yi - 1], 0, x);
			}
		}
		p->node[zi] = y;
	} else {
		yi = zi;
		x = psi_rb_child(tx, z, psi_rb_child(tx, z, 0) ? 0 : 1); /* z's only child, or NULL */
		removed_black = rb_is_black(z);
		z = rb_link_at(tx, p, zi, x);
	}
	/* x now sits at index yi: its parent is p->node[yi - 1]. */
	p->node[yi] = x;
	if (removed_black)
		rb_erase_fixup(tx, p, yi, x);
	return z;
}

void psi_rb_raise_root(struct psi_rb_tx *tx)
{
	if (tx->pending && tx->pdepth)
		rb_raise(tx, NULL, 0);
}

/*
 * Why a reader's walk is linearizable when updates publish into child
 * slots.  Call a node current while the published tree reaches it, and
 * the interval of a position the keys a walk routes through it.  An update
 * writes no current node but the slot it publishes into, so:
 *  (a) a node that stops being current is never written again (its
 *      copy, or nothing, took its place), and a reader that holds it
 *      walks what the tree held at that moment;
 *  (b) each node a reader visits was current at some time during its
 *      walk: the first is the root it loaded; a later one was in its
 *      parent's slot when the reader loaded it, or when the parent
 *      stopped being current, if that was earlier (a), and in both cases
 *      after the reader reached the parent;
 *  (c) a current node's payload never changes: a new bound or policy is
 *      a copy.
 * A reader that finds a range containing its key returns a node that was
 * current at some time T during the walk, and the ranges current at T are
 * disjoint: it was the answer at T.  A reader that finds no range ends at
 * an empty slot; the routing it followed is that of the tree at the time
 * it entered each subtree, and a key leaves a subtree's interval only when
 * a range grows over it (the victim of a set takes [start, end) whole),
 * which copies every node between that range and whatever the grown part
 * held, so a reader below them sees the older tree, where the key was in
 * a gap: there is a time during its walk when no range contained it.
 * tests/test_rbtree.c replays slow readers, one step per update, against
 * the versions their walk spanned.
 */
bool psi_rb_publish(struct psi_rb_tx *tx, struct ps_rb_root *published)
{
	struct ps_rb_node *parent;

	if (!tx->pending)
		return false;
	if (!tx->pdepth) {
		PSI_STORE_RELEASE(published->node, tx->pval);
		return true;
	}
	parent = tx->ppath.node[tx->pdepth - 1];
	PSI_STORE_RELEASE(parent->child[tx->ppath.dir[tx->pdepth - 1]], tx->pval);
	return false;
}

int psi_rb_height_bound(const struct ps_rb_root *root, int grow)
{
	const struct ps_rb_node *n;
	int bh = 0;

	/* Property 5: the leftmost path has as many black nodes as any other. */
	for (n = root->node; n; n = n->child[0])
		bh += rb_is_black(n);
	/* Property 4: no path has more red nodes than black ones. */
	return 2 * (bh + grow);
}

static void iter_push_left(struct psi_rb_iter *it, struct ps_rb_node *n)
{
	while (n && it->depth < PS_RB_MAX_DEPTH + 2) {
		it->stack[it->depth++] = n;
		n = psi_rb_load_child(n, 0);
	}
}

struct ps_rb_node *psi_rb_iter_first(struct psi_rb_iter *it, const struct ps_rb_root *root)
{
	it->depth = 0;
	iter_push_left(it, psi_rb_load_root(root));
	return it->depth ? it->stack[it->depth - 1] : NULL;
}

struct ps_rb_node *psi_rb_iter_next(struct psi_rb_iter *it)
{
	struct ps_rb_node *n;

	if (!it->depth)
		return NULL;
	n = it->stack[--it->depth];
	iter_push_left(it, psi_rb_load_child(n, 1));
	return it->depth ? it->stack[it->depth - 1] : NULL;
}

/* Returns the black height of the subtree, or -1 on a violation. */
static long rb_check_subtree(const struct ps_rb_node *n, int depth, long *count, const char **why)
{
	long lh, rh;

	if (!n)
		return 1;
	if (depth >= PS_RB_MAX_DEPTH) {
		*why = "tree deeper than PS_RB_MAX_DEPTH (a cycle?)";
		return -1;
	}
	if (rb_is_red(n) && (rb_is_red(n->child[0]) || rb_is_red(n->child[1]))) {
		*why = "red node with a red child (property 4)";
		return -1;
	}
	(*count)++;
	lh = rb_check_subtree(n->child[0], depth + 1, count, why);
	if (lh < 0)
		return -1;
	rh = rb_check_subtree(n->child[1], depth + 1, count, why);
	if (rh < 0)
		return -1;
	if (lh != rh) {
		*why = "black heights differ (property 5)";
		return -1;
	}
	return lh + rb_is_black(n);
}

long psi_rb_check(const struct ps_rb_root *root, const char **why)
{
	long count = 0;

	if (root->node && !rb_is_black(root->node)) {
		*why = "red root (property 2)";
		return -1;
	}
	if (rb_check_subtree(root->node, 0, &count, why) < 0)
		return -1;
	return count;
}

static size_t count_gen(const struct ps_rb_node *n, uint64_t gen)
{
	size_t c = 0;

	for (; n; n = n->child[1])
		c += ((n->meta >> 1) == gen) + count_gen(n->child[0], gen);
	return c;
}

size_t psi_rb_count_gen(const struct ps_rb_root *root, uint64_t gen)
{
	return count_gen(root->node, gen);
}
