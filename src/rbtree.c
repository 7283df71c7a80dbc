// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Red-black tree rebalancing on an explicit path of ancestors, in place or
 * copy on write (see rbtree.h).  The code is written once for both mirror
 * images: `dir` names a side (0 left, 1 right) and `!dir` the other, so
 * each rebalancing case appears once.
 *
 * Ownership rule (copy on write): a node is changed only once owned, and
 * it is owned only through an owned parent (or as the root), so the
 * published version is never written.  rb_own_child() and rb_own_path()
 * are the only places that copy.
 *
 * Store order (in place, for seqlock readers that walk while we write):
 * every child-pointer store is a release, and a rotation stores bottom-up
 * so a reader never finds NULL where a subtree is.  Such readers still
 * validate with the sequence count; the order only keeps them from
 * faulting or walking off into a node that is not initialised.
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

static inline void rb_set_black(struct ps_rb_node *n)
{
	n->meta |= RB_BLACK;
}

static inline void rb_set_red(struct ps_rb_node *n)
{
	n->meta &= ~RB_BLACK;
}

static inline void rb_set_colour_of(struct ps_rb_node *n, const struct ps_rb_node *from)
{
	n->meta = (n->meta & ~RB_BLACK) | (from->meta & RB_BLACK);
}

static inline void rb_set_child(struct ps_rb_node *n, int dir, struct ps_rb_node *c)
{
	PS_STORE_RELEASE(n->child[dir], c);
}

/* Point @parent's side @dir (or the root, for a NULL @parent) at @n. */
static inline void rb_link(struct ps_rb_tx *tx, struct ps_rb_node *parent, int dir,
		struct ps_rb_node *n)
{
	if (parent)
		rb_set_child(parent, dir, n);
	else
		PS_STORE_RELEASE(tx->root->node, n);
}

static inline bool rb_owned(const struct ps_rb_tx *tx, const struct ps_rb_node *n)
{
	return !tx->copy || (n->meta >> 1) == tx->gen;
}

/* A copy of @old owned by @tx: same children, colour and payload. */
static struct ps_rb_node *rb_copy(struct ps_rb_tx *tx, struct ps_rb_node *old)
{
	struct ps_rb_node *n = tx->copy(tx, old);

	n->child[0] = old->child[0];
	n->child[1] = old->child[1];
	n->meta = tx->gen << 1 | (old->meta & RB_BLACK);
	return n;
}

/*
 * @parent's child on side @dir (or the root, @parent NULL), owned.
 * @parent must be owned already.  NULL stays NULL.
 */
static struct ps_rb_node *rb_own_child(struct ps_rb_tx *tx, struct ps_rb_node *parent, int dir)
{
	struct ps_rb_node *c = parent ? parent->child[dir] : tx->root->node;

	if (!c || rb_owned(tx, c))
		return c;
	c = rb_copy(tx, c);
	rb_link(tx, parent, dir, c);
	return c;
}

static inline struct ps_rb_node *path_parent(const struct ps_rb_path *p, int i)
{
	return i > 0 ? p->node[i - 1] : NULL;
}

static inline int path_side(const struct ps_rb_path *p, int i)
{
	return i > 0 ? p->dir[i - 1] : 0;
}

/* Own every node on @p, top-down; @p then names the owned nodes. */
static void rb_own_path(struct ps_rb_tx *tx, struct ps_rb_path *p)
{
	int i;

	if (!tx->copy)
		return;
	for (i = 0; i < p->depth; i++)
		p->node[i] = rb_own_child(tx, path_parent(p, i), path_side(p, i));
}

struct ps_rb_node *ps_rb_own(struct ps_rb_tx *tx, struct ps_rb_path *path)
{
	rb_own_path(tx, path);
	return path->node[path->depth - 1];
}

/*
 * Rotate at @x (child @pdir of @parent, or the root) towards side @dir:
 * x's child on side !dir (y, owned by the caller) rises into x's place, x
 * becomes y's child on side @dir and y's inner subtree moves under x.
 * In-order sequence and colours are unchanged; the inner subtree is moved,
 * not changed, so it needs no copy.  Returns y.
 */
static struct ps_rb_node *rb_rotate(struct ps_rb_tx *tx, struct ps_rb_node *parent, int pdir,
		struct ps_rb_node *x, int dir)
{
	struct ps_rb_node *y = x->child[!dir];

	rb_set_child(x, !dir, y->child[dir]);
	rb_set_child(y, dir, x);
	rb_link(tx, parent, pdir, y);
	return y;
}

void ps_rb_insert(struct ps_rb_tx *tx, struct ps_rb_path *p, struct ps_rb_node *node)
{
	struct ps_rb_node *parent, *gparent, *uncle;
	int i, dir;

	rb_own_path(tx, p);
	PS_WRITE_ONCE(node->child[0], NULL);
	PS_WRITE_ONCE(node->child[1], NULL);
	node->meta = tx->gen << 1; /* red */
	rb_link(tx, p->depth ? p->node[p->depth - 1] : NULL, p->depth ? p->dir[p->depth - 1] : 0,
			node);
	p->node[p->depth] = node;
	i = p->depth; /* @node's index; its parent is p->node[i - 1] */

	/*
	 * Only property 4 can be broken: the red node at @i may have a red
	 * parent.  Everything from the root to @i is owned.
	 */
	while (i > 0 && rb_is_red(parent = p->node[i - 1])) {
		/* A red node is never the root: the grandparent exists. */
		gparent = p->node[i - 2];
		dir = p->dir[i - 2]; /* parent's side under gparent */
		if (rb_is_red(gparent->child[!dir])) {
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
			uncle = rb_own_child(tx, gparent, !dir);
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
			parent = rb_rotate(tx, gparent, dir, parent, dir);
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
		rb_rotate(tx, path_parent(p, i - 2), path_side(p, i - 2), gparent, !dir);
		rb_set_black(parent);
		rb_set_red(gparent);
		break;
	}
	rb_set_black(tx->root->node); /* property 2; the root is owned (path or @node) */
}

/*
 * Restore property 5 after a black node was unlinked: the subtree at
 * index @xi of @p (node @x, possibly a NULL leaf, child of p->node[xi - 1]
 * on side p->dir[xi - 1]) is one black short.  Every node on p->node[0 ..
 * xi - 1] is owned.
 */
static void rb_erase_fixup(struct ps_rb_tx *tx, struct ps_rb_path *p, int xi,
		struct ps_rb_node *x)
{
	struct ps_rb_node *parent, *w, *c;
	int dir;

	while (xi > 0 && rb_is_black(x)) {
		parent = p->node[xi - 1];
		dir = p->dir[xi - 1];
		/* The sibling exists: its side has black height >= 1. */
		w = rb_own_child(tx, parent, !dir);
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
			rb_rotate(tx, path_parent(p, xi - 1), path_side(p, xi - 1), parent, dir);
			p->node[xi - 1] = w;
			p->dir[xi - 1] = (unsigned char)dir;
			p->node[xi] = parent;
			p->dir[xi] = (unsigned char)dir;
			xi++;
			w = rb_own_child(tx, parent, !dir);
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
			c = rb_own_child(tx, w, dir);
			rb_set_black(c);
			rb_set_red(w);
			w = rb_rotate(tx, parent, !dir, w, !dir);
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
		c = rb_own_child(tx, w, !dir);
		rb_set_black(c);
		rb_rotate(tx, path_parent(p, xi - 1), path_side(p, xi - 1), parent, dir);
		return;
	}
	/* x is red (it absorbs the missing black) or the root. */
	if (x) {
		x = rb_own_child(tx, path_parent(p, xi), path_side(p, xi));
		rb_set_black(x);
	}
}

struct ps_rb_node *ps_rb_erase(struct ps_rb_tx *tx, struct ps_rb_path *p)
{
	struct ps_rb_node *z, *y, *x, *yparent;
	int zi, yi;
	bool removed_black;

	rb_own_path(tx, p);
	zi = p->depth - 1;
	z = p->node[zi];
	/* y: the node that leaves its position; z itself, or z's successor. */
	if (z->child[0] && z->child[1]) {
		y = rb_own_child(tx, z, 1);
		ps_rb_path_push(p, y, 0);
		p->dir[zi] = 1;
		while (y->child[0]) {
			y = rb_own_child(tx, y, 0);
			ps_rb_path_push(p, y, 0);
		}
	} else {
		y = z;
	}
	yi = p->depth - 1;
	x = y->child[y->child[0] ? 0 : 1]; /* y's only child, or NULL */
	removed_black = rb_is_black(y);
	yparent = path_parent(p, yi);

	/* y's place goes to x; x keeps its subtree, so it needs no copy. */
	rb_link(tx, yparent, path_side(p, yi), x);
	if (y != z) {
		/* y takes z's place and colour (z's children read after the unlink above). */
		rb_set_child(y, 0, z->child[0]);
		rb_set_child(y, 1, z->child[1]);
		rb_set_colour_of(y, z);
		rb_link(tx, path_parent(p, zi), path_side(p, zi), y);
		p->node[zi] = y;
	}
	/* x now sits at index yi: its parent is p->node[yi - 1] (y itself if it was z's child). */
	if (removed_black)
		rb_erase_fixup(tx, p, yi, x);
	return z;
}

int ps_rb_height_bound(const struct ps_rb_root *root, int grow)
{
	const struct ps_rb_node *n;
	int bh = 0;

	/* Property 5: the leftmost path has as many black nodes as any other. */
	for (n = root->node; n; n = n->child[0])
		bh += rb_is_black(n);
	/* Property 4: no path has more red nodes than black ones. */
	return 2 * (bh + grow);
}

static void iter_push_left(struct ps_rb_iter *it, struct ps_rb_node *n)
{
	while (n && it->depth < PS_RB_MAX_DEPTH + 2) {
		it->stack[it->depth++] = n;
		n = ps_rb_load_child(n, 0);
	}
}

struct ps_rb_node *ps_rb_iter_first(struct ps_rb_iter *it, const struct ps_rb_root *root)
{
	it->depth = 0;
	iter_push_left(it, ps_rb_load_root(root));
	return it->depth ? it->stack[it->depth - 1] : NULL;
}

struct ps_rb_node *ps_rb_iter_next(struct ps_rb_iter *it)
{
	struct ps_rb_node *n;

	if (!it->depth)
		return NULL;
	n = it->stack[--it->depth];
	iter_push_left(it, ps_rb_load_child(n, 1));
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

long ps_rb_check(const struct ps_rb_root *root, const char **why)
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

size_t ps_rb_count_gen(const struct ps_rb_root *root, uint64_t gen)
{
	return count_gen(root->node, gen);
}
