// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Red-black tree rebalancing.  The code is written once for both mirror
 * images: `dir` names a side (0 left, 1 right) and `!dir` the other, so
 * each rebalancing case appears once.
 */
#include "rbtree.h"

#define PS_RB_BLACK 1UL

static inline struct ps_rb_node *rb_parent(const struct ps_rb_node *n)
{
	return (struct ps_rb_node *)(n->parent_color & ~PS_RB_BLACK);
}

static inline bool rb_is_black(const struct ps_rb_node *n)
{
	return !n || (n->parent_color & PS_RB_BLACK); /* NULL leaves are black */
}

static inline bool rb_is_red(const struct ps_rb_node *n)
{
	return !rb_is_black(n);
}

static inline void rb_set_parent(struct ps_rb_node *n, struct ps_rb_node *p)
{
	n->parent_color = (uintptr_t)p | (n->parent_color & PS_RB_BLACK);
}

static inline void rb_set_black(struct ps_rb_node *n)
{
	n->parent_color |= PS_RB_BLACK;
}

static inline void rb_set_red(struct ps_rb_node *n)
{
	n->parent_color &= ~PS_RB_BLACK;
}

static inline void rb_set_child(struct ps_rb_node *n, int dir, struct ps_rb_node *c)
{
	PS_STORE_RELEASE(n->child[dir], c);
}

/* Make @new take @old's place under @parent (or at the root). */
static void rb_replace_child(struct ps_rb_root *root, struct ps_rb_node *parent,
		struct ps_rb_node *old, struct ps_rb_node *new)
{
	if (!parent)
		PS_STORE_RELEASE(root->node, new);
	else
		rb_set_child(parent, parent->child[1] == old, new);
}

/*
 * Rotate at @x towards side @dir: x's child on side !dir (y) rises into x's
 * place, x becomes y's child on side @dir and y's inner subtree (on side
 * @dir) moves under x.  In-order sequence and colours are unchanged.
 * Stores go bottom-up so that a reader never finds NULL where a subtree is.
 */
static void rb_rotate(struct ps_rb_root *root, struct ps_rb_node *x, int dir)
{
	struct ps_rb_node *y = x->child[!dir];
	struct ps_rb_node *inner = y->child[dir];
	struct ps_rb_node *p = rb_parent(x);

	rb_set_child(x, !dir, inner);
	if (inner)
		rb_set_parent(inner, x);
	rb_set_child(y, dir, x);
	rb_replace_child(root, p, x, y);
	rb_set_parent(y, p);
	rb_set_parent(x, y);
}

void ps_rb_link(struct ps_rb_root *root, struct ps_rb_node *node, struct ps_rb_node *parent,
		int dir)
{
	node->parent_color = (uintptr_t)parent; /* red */
	PS_WRITE_ONCE(node->child[0], NULL);
	PS_WRITE_ONCE(node->child[1], NULL);
	if (parent)
		rb_set_child(parent, dir, node);
	else
		PS_STORE_RELEASE(root->node, node);
}

void ps_rb_insert_color(struct ps_rb_root *root, struct ps_rb_node *node)
{
	struct ps_rb_node *parent, *gparent, *uncle;
	int dir;

	/* Only property 4 can be broken: @node (red) may have a red parent. */
	while ((parent = rb_parent(node)) && rb_is_red(parent)) {
		gparent = rb_parent(parent); /* exists: a red node is never the root */
		dir = gparent->child[1] == parent;
		uncle = gparent->child[!dir];
		if (rb_is_red(uncle)) {
			/*
			 * Case 1, red uncle: push the grandparent's blackness
			 * down to both children; the grandparent may now break
			 * property 4 with its own parent, so continue there.
			 */
			rb_set_black(parent);
			rb_set_black(uncle);
			rb_set_red(gparent);
			node = gparent;
			continue;
		}
		if (parent->child[!dir] == node) {
			/* Case 2, inner grandchild: rotate it to the outside. */
			rb_rotate(root, parent, dir);
			node = parent;
			parent = rb_parent(node);
		}
		/*
		 * Case 3, outer grandchild, black uncle: rotate the
		 * grandparent away and swap colours; black heights are as
		 * before and no red-red pair is left.
		 */
		rb_rotate(root, gparent, !dir);
		rb_set_black(parent);
		rb_set_red(gparent);
		break;
	}
	rb_set_black(root->node); /* property 2 */
}

/*
 * Restore property 5 after a black node was removed above @x (possibly a
 * NULL leaf) whose parent is @parent: the subtree at @x is one black short.
 */
static void rb_erase_color(struct ps_rb_root *root, struct ps_rb_node *x, struct ps_rb_node *parent)
{
	struct ps_rb_node *w;
	int dir;

	while (x != root->node && rb_is_black(x)) {
		/* @x is parent's child on side dir; its sibling w exists (black height >= 1). */
		dir = parent->child[0] != x;
		w = parent->child[!dir];
		if (rb_is_red(w)) {
			/* Case 1, red sibling: rotate so the sibling is black. */
			rb_set_black(w);
			rb_set_red(parent);
			rb_rotate(root, parent, dir);
			w = parent->child[!dir];
		}
		if (rb_is_black(w->child[0]) && rb_is_black(w->child[1])) {
			/* Case 2: sibling turns red, the deficit moves up. */
			rb_set_red(w);
			x = parent;
			parent = rb_parent(x);
			continue;
		}
		if (rb_is_black(w->child[!dir])) {
			/* Case 3: make the sibling's outer child red by rotating. */
			rb_set_black(w->child[dir]);
			rb_set_red(w);
			rb_rotate(root, w, !dir);
			w = parent->child[!dir];
		}
		/*
		 * Case 4: sibling black with a red outer child: rotate the
		 * parent towards x; x's side gains the black it lacked.
		 */
		if (rb_is_black(parent))
			rb_set_black(w);
		else
			rb_set_red(w);
		rb_set_black(parent);
		rb_set_black(w->child[!dir]);
		rb_rotate(root, parent, dir);
		x = root->node;
		break;
	}
	if (x)
		rb_set_black(x);
}

void ps_rb_erase(struct ps_rb_root *root, struct ps_rb_node *z)
{
	struct ps_rb_node *y, *x, *xp;
	bool removed_black;

	/* y: the node that leaves its position; z itself, or z's successor. */
	if (!z->child[0] || !z->child[1]) {
		y = z;
	} else {
		y = z->child[1];
		while (y->child[0])
			y = y->child[0];
	}
	x = y->child[0] ? y->child[0] : y->child[1];
	xp = rb_parent(y);
	removed_black = rb_is_black(y);

	if (y == z) {
		if (x)
			rb_set_parent(x, xp);
		rb_replace_child(root, xp, z, x);
	} else {
		/* Move y into z's place, taking z's colour. */
		if (xp == z) {
			xp = y; /* y was z's right child and keeps its right subtree x */
		} else {
			if (x)
				rb_set_parent(x, xp);
			rb_set_child(xp, 0, x); /* y was the leftmost of its subtree */
			rb_set_child(y, 1, z->child[1]);
			rb_set_parent(z->child[1], y);
		}
		rb_set_child(y, 0, z->child[0]);
		rb_set_parent(z->child[0], y);
		y->parent_color = z->parent_color;
		rb_replace_child(root, rb_parent(z), z, y);
	}
	if (removed_black)
		rb_erase_color(root, x, xp);
}

struct ps_rb_node *ps_rb_first(const struct ps_rb_root *root)
{
	struct ps_rb_node *n = root->node;

	if (!n)
		return NULL;
	while (n->child[0])
		n = n->child[0];
	return n;
}

struct ps_rb_node *ps_rb_next(const struct ps_rb_node *node)
{
	struct ps_rb_node *p;

	if (node->child[1]) {
		node = node->child[1];
		while (node->child[0])
			node = node->child[0];
		return (struct ps_rb_node *)node;
	}
	while ((p = rb_parent(node)) && node == p->child[1])
		node = p;
	return p;
}

/* Returns the black height of the subtree, or -1 on a violation. */
static long rb_check_subtree(const struct ps_rb_node *n, const struct ps_rb_node *parent,
		int depth, long *count, const char **why)
{
	long lh, rh;

	if (!n)
		return 1;
	if (depth > PS_RB_MAX_DEPTH) {
		*why = "tree deeper than PS_RB_MAX_DEPTH (a cycle?)";
		return -1;
	}
	if (rb_parent(n) != parent) {
		*why = "parent link does not match the child link";
		return -1;
	}
	if (rb_is_red(n) && (rb_is_red(n->child[0]) || rb_is_red(n->child[1]))) {
		*why = "red node with a red child (property 4)";
		return -1;
	}
	(*count)++;
	lh = rb_check_subtree(n->child[0], n, depth + 1, count, why);
	if (lh < 0)
		return -1;
	rh = rb_check_subtree(n->child[1], n, depth + 1, count, why);
	if (rh < 0)
		return -1;
	if (lh != rh) {
		*why = "black heights differ (property 5)";
		return -1;
	}
	return lh + rb_is_black(n);
}

long ps_rb_check(const struct ps_rb_root *root, const char **why)
{
	long count = 0;

	if (root->node && !rb_is_black(root->node)) {
		*why = "red root (property 2)";
		return -1;
	}
	if (rb_check_subtree(root->node, NULL, 0, &count, why) < 0)
		return -1;
	return count;
}
