// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Red-black tree rebalancing on an explicit path of ancestors, in place
 * (see rbtree.h).  The code is written once for both mirror images: `dir`
 * names a side (0 left, 1 right) and `!dir` the other, so each rebalancing
 * case appears once.
 *
 * Store order, for seqlock readers that walk while we write: every
 * child-pointer store is a release, and a rotation stores bottom-up so a
 * reader never finds NULL where a subtree is.  Such readers still validate
 * with the sequence count; the order only keeps them from faulting or
 * walking off into a node that is not initialised.
 */
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

static inline void rb_paint(struct ps_rb_node *n, uint64_t black)
{
	n->meta = (n->meta & ~RB_BLACK) | black;
}

static inline void rb_set_black(struct ps_rb_node *n)
{
	rb_paint(n, RB_BLACK);
}

static inline void rb_set_red(struct ps_rb_node *n)
{
	rb_paint(n, 0);
}

static inline void rb_set_colour_of(struct ps_rb_node *n, const struct ps_rb_node *from)
{
	rb_paint(n, from->meta & RB_BLACK);
}

static inline void rb_set_child(struct ps_rb_node *n, int dir, struct ps_rb_node *c)
{
	PSI_STORE_RELEASE(n->child[dir], c);
}

/*
 * Positions are named by a path and a depth: position @i of @p is the slot
 * p->node[i] sits in, the child of p->node[i - 1] on side p->dir[i - 1]
 * (the root for i = 0).  Make @n the content of position @i; p->node[i] is
 * left to the caller.
 */
static void rb_link_at(struct ps_rb_root *root, struct psi_rb_path *p, int i, struct ps_rb_node *n)
{
	if (i)
		rb_set_child(p->node[i - 1], p->dir[i - 1], n);
	else
		PSI_STORE_RELEASE(root->node, n);
}

/*
 * Rotate at position @xi of @p (node x) towards side @dir: x's child on
 * side !dir (y) rises into x's position, x becomes y's child on side @dir
 * and y's inner subtree moves under x.  In-order sequence and colours are
 * unchanged.  Returns y; p->node[xi] is left to the caller.
 */
static struct ps_rb_node *rb_rotate_at(struct ps_rb_root *root, struct psi_rb_path *p, int xi,
		int dir)
{
	struct ps_rb_node *x = p->node[xi], *y = x->child[!dir];

	rb_set_child(x, !dir, y->child[dir]);
	rb_set_child(y, dir, x);
	rb_link_at(root, p, xi, y);
	return y;
}

void psi_rb_insert(struct ps_rb_root *root, struct psi_rb_path *p, struct ps_rb_node *node)
{
	struct ps_rb_node *parent, *gparent, *uncle;
	int i = p->depth, dir;

	PSI_WRITE_ONCE(node->child[0], NULL);
	PSI_WRITE_ONCE(node->child[1], NULL);
	node->meta = 0; /* red */
	rb_link_at(root, p, i, node);
	p->node[i] = node; /* @node's index; its parent is p->node[i - 1] */

	/*
	 * Only property 4 can be broken: the red node at @i may have a red
	 * parent.
	 */
	while (i > 0 && rb_is_red(parent = p->node[i - 1])) {
		/* A red node is never the root: the grandparent exists. */
		gparent = p->node[i - 2];
		dir = p->dir[i - 2]; /* parent's side under gparent */
		uncle = gparent->child[!dir];
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
			 */
			rb_set_black(uncle);
			rb_set_black(parent);
			rb_set_red(gparent);
			i -= 2;
			continue;
		}
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
			parent = rb_rotate_at(root, p, i - 1, dir);
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
		rb_rotate_at(root, p, i - 2, !dir);
		rb_set_black(parent);
		rb_set_red(gparent);
		break;
	}
	rb_set_black(root->node); /* property 2 */
}

/*
 * Restore property 5 after a black node was unlinked: the subtree at
 * index @xi of @p (node @x, possibly a NULL leaf, child of p->node[xi - 1]
 * on side p->dir[xi - 1]) is one black short.
 */
static void rb_erase_fixup(struct ps_rb_root *root, struct psi_rb_path *p, int xi,
		struct ps_rb_node *x)
{
	struct ps_rb_node *parent, *w, *c;
	int dir;

	while (xi > 0 && rb_is_black(x)) {
		parent = p->node[xi - 1];
		dir = p->dir[xi - 1];
		/* The sibling exists: its side has black height >= 1. */
		w = parent->child[!dir];
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
			rb_set_black(w);
			rb_set_red(parent);
			rb_rotate_at(root, p, xi - 1, dir);
			p->node[xi - 1] = w;
			p->dir[xi - 1] = (unsigned char)dir;
			p->node[xi] = parent;
			p->dir[xi] = (unsigned char)dir;
			xi++;
			w = parent->child[!dir];
		}
		if (rb_is_black(w->child[0]) && rb_is_black(w->child[1])) {
			/*
			 * Case 2, black sibling with black children: the
			 * sibling turns red, both sides of the parent are one
			 * short now, and the deficit moves up to the parent
			 * (which ends the loop if it is red: it turns black).
			 */
			rb_set_red(w);
			x = parent;
			xi--;
			continue;
		}
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
			c = w->child[dir];
			rb_set_black(c);
			rb_set_red(w);
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
		rb_set_colour_of(w, parent);
		rb_set_black(parent);
		rb_set_black(w->child[!dir]);
		rb_rotate_at(root, p, xi - 1, dir);
		return;
	}
	/* x is red (it absorbs the missing black) or the root. */
	if (x)
		rb_set_black(x);
}

struct ps_rb_node *psi_rb_erase(struct ps_rb_root *root, struct psi_rb_path *p)
{
	struct ps_rb_node *z, *y, *x, *c;
	int zi = p->depth - 1, yi;
	bool removed_black;

	z = p->node[zi];
	if (z->child[0] && z->child[1]) {
		/* y, z's successor, leaves its position and takes z's. */
		p->dir[zi] = 1;
		y = z->child[1];
		psi_rb_path_push(p, y, 0);
		while ((c = y->child[0])) {
			y = c;
			psi_rb_path_push(p, y, 0);
		}
		yi = p->depth - 1;
		x = y->child[1]; /* y's only child, or NULL */
		removed_black = rb_is_black(y);
		/* For seqlock readers: unlink y, y takes z's links, y into z's place. */
		rb_set_child(p->node[yi - 1], p->dir[yi - 1], x);
		rb_set_child(y, 0, z->child[0]);
		rb_set_child(y, 1, z->child[1]);
		rb_set_colour_of(y, z);
		rb_link_at(root, p, zi, y);
		p->node[zi] = y;
	} else {
		yi = zi;
		x = z->child[z->child[0] ? 0 : 1]; /* z's only child, or NULL */
		removed_black = rb_is_black(z);
		rb_link_at(root, p, zi, x);
	}
	/* x now sits at index yi: its parent is p->node[yi - 1]. */
	p->node[yi] = x;
	if (removed_black)
		rb_erase_fixup(root, p, yi, x);
	return z;
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
