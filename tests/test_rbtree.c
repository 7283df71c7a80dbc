// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The tree core on its own (src/rbtree.c) and the range layer's
 * copy-on-write updates (src/rangetree.c), white-box:
 *  - in place and copy on write, random inserts and erases against a sorted
 *    array, the five properties checked after every operation;
 *  - copy on write: every earlier version is unchanged (same keys, same
 *    nodes, same colours, still a valid red-black tree) after any number of
 *    later updates, and an update never writes a node it did not create;
 *  - copies per operation stay within ps_rb_copies_insert/erase() of the
 *    height bound, and a node is copied at most once per update;
 *  - the range layer: copy-on-write sets over random trees never take more
 *    spares than ps_rtree_cow_need() said, and give the same ranges as the
 *    in-place algorithm.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "policy_internal.h"
#include "rangetree.h"
#include "rbtree.h"
#include "testutil.h"

struct tnode {
	struct ps_rb_node rb;
	uint64_t key;
	uint64_t sum; /* of the fields above, to detect a write to a published node */
};

static inline struct tnode *tn(struct ps_rb_node *n)
{
	return ps_container_of(n, struct tnode, rb);
}

static uint64_t node_sum(const struct tnode *t)
{
	return (uint64_t)(uintptr_t)t->rb.child[0] * 3 + (uint64_t)(uintptr_t)t->rb.child[1] * 5 +
	       t->rb.meta * 7 + t->key * 11;
}

/* A tree under test and what its copy hook did. */
struct ttree {
	struct ps_rb_root root;
	struct ps_rb_tx tx;
	size_t copies; /* in the current update */
	struct tnode **originals; /* nodes copied in the current update */
	size_t noriginals, cap;
	struct tnode **all; /* every node ever allocated, freed at the end */
	size_t nall, allcap;
};

static struct tnode *tnode_alloc(struct ttree *t)
{
	struct tnode *n = calloc(1, sizeof(*n));

	cr_assert_not_null(n);
	if (t->nall == t->allcap) {
		t->allcap = t->allcap ? 2 * t->allcap : 1024;
		t->all = realloc(t->all, t->allcap * sizeof(*t->all));
		cr_assert_not_null(t->all);
	}
	t->all[t->nall++] = n;
	return n;
}

static struct ps_rb_node *tcopy(struct ps_rb_tx *tx, const struct ps_rb_node *old)
{
	struct ttree *t = ps_container_of(tx, struct ttree, tx);
	struct tnode *n = tnode_alloc(t);
	size_t i;

	for (i = 0; i < t->noriginals; i++)
		cr_assert_neq(t->originals[i], tn((struct ps_rb_node *)old),
				"a node was copied twice in one update");
	if (t->noriginals == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 256;
		t->originals = realloc(t->originals, t->cap * sizeof(*t->originals));
	}
	t->originals[t->noriginals++] = tn((struct ps_rb_node *)old);
	n->key = tn((struct ps_rb_node *)old)->key;
	t->copies++;
	return &n->rb;
}

static void ttree_init(struct ttree *t, bool cow)
{
	memset(t, 0, sizeof(*t));
	t->tx.root = &t->root;
	t->tx.copy = cow ? tcopy : NULL;
}

static void ttree_fini(struct ttree *t)
{
	size_t i;

	for (i = 0; i < t->nall; i++)
		free(t->all[i]);
	free(t->all);
	free(t->originals);
}

static void begin(struct ttree *t)
{
	if (t->tx.copy)
		t->tx.gen++;
	t->copies = 0;
	t->noriginals = 0;
}

/* Path to @key's slot (insert) or node (erase); returns whether it is there. */
static bool find(struct ttree *t, uint64_t key, struct ps_rb_path *p)
{
	struct ps_rb_node *n = t->root.node;

	p->depth = 0;
	while (n) {
		int dir = key > tn(n)->key;

		ps_rb_path_push(p, n, dir);
		if (key == tn(n)->key)
			return true;
		n = n->child[dir];
	}
	return false;
}

static void check_tree(const struct ps_rb_root *root, const uint64_t *keys, size_t n,
		const char *what)
{
	const char *why = NULL;
	struct ps_rb_iter it;
	struct ps_rb_node *x;
	size_t i = 0;

	cr_assert_eq(ps_rb_check(root, &why), (long)n, "%s: %s", what, why ? why : "count");
	for (x = ps_rb_iter_first(&it, root); x; x = ps_rb_iter_next(&it), i++)
		cr_assert_eq(tn(x)->key, keys[i], "%s: key %zu is %llu, want %llu", what, i,
				(unsigned long long)tn(x)->key, (unsigned long long)keys[i]);
	cr_assert_eq(i, n);
}

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* A version kept to check that later updates leave it alone. */
struct version {
	struct ps_rb_node *root;
	uint64_t *keys;
	size_t n;
	struct tnode **nodes; /* its nodes and their sums when taken */
	uint64_t *sums;
};

static void collect(struct ps_rb_node *x, struct version *v, size_t *i)
{
	for (; x; x = x->child[1]) {
		collect(x->child[0], v, i);
		v->nodes[*i] = tn(x);
		v->sums[(*i)++] = node_sum(tn(x));
	}
}

static void version_take(struct version *v, const struct ttree *t, const uint64_t *keys, size_t n)
{
	size_t i = 0;

	v->root = t->root.node;
	v->n = n;
	v->keys = malloc((n + 1) * sizeof(*keys));
	memcpy(v->keys, keys, n * sizeof(*keys));
	v->nodes = malloc((n + 1) * sizeof(*v->nodes));
	v->sums = malloc((n + 1) * sizeof(*v->sums));
	collect(v->root, v, &i);
	cr_assert_eq(i, n);
}

static void version_check(const struct version *v, int which)
{
	struct ps_rb_root r = { v->root };
	char what[64];
	size_t i;

	snprintf(what, sizeof(what), "version %d", which);
	check_tree(&r, v->keys, v->n, what);
	for (i = 0; i < v->n; i++)
		cr_assert_eq(node_sum(v->nodes[i]), v->sums[i],
				"%s: node %zu (key %llu) was written after publication", what, i,
				(unsigned long long)v->nodes[i]->key);
}

static void version_free(struct version *v)
{
	free(v->keys);
	free(v->nodes);
	free(v->sums);
}

#define NKEYS 1500
#define NOPS 6000
#define NVERSIONS 16

static void random_ops(bool cow, uint64_t seed)
{
	struct ttree t;
	uint64_t keys[NKEYS + 1];
	size_t n = 0, op;
	struct version v[NVERSIONS];
	int nv = 0, i;

	ttree_init(&t, cow);
	for (op = 0; op < NOPS; op++) {
		uint64_t key = ps_test_rand(&seed) % (2 * NKEYS);
		struct ps_rb_path p;
		bool there = find(&t, key, &p);
		/* Grow early, then hover around NKEYS / 2 .. NKEYS. */
		bool insert = n < NKEYS / 2 || (n < NKEYS && ps_test_rand(&seed) % 2);
		int h = ps_rb_height_bound(&t.root, 1);

		begin(&t);
		if (insert && !there) {
			struct tnode *x = tnode_alloc(&t);

			x->key = key;
			ps_rb_insert(&t.tx, &p, &x->rb);
			keys[n++] = key;
			qsort(keys, n, sizeof(*keys), key_cmp);
			cr_assert_leq(t.copies, ps_rb_copies_insert(h), "insert took %zu copies, bound %zu",
					t.copies, ps_rb_copies_insert(h));
		} else if (there) {
			struct tnode *found = tn(p.node[p.depth - 1]);
			struct tnode *x = tn(ps_rb_erase(&t.tx, &p));
			size_t j;

			cr_assert_eq(x->key, key);
			/* In place the node itself leaves; copy on write its copy (the original stays put). */
			if (!cow)
				cr_assert_eq(x, found);
			else
				cr_assert_neq(x, found);
			for (j = 0; keys[j] != key; j++)
				;
			memmove(&keys[j], &keys[j + 1], (n - j - 1) * sizeof(*keys));
			n--;
			cr_assert_leq(t.copies, ps_rb_copies_erase(h), "erase took %zu copies, bound %zu",
					t.copies, ps_rb_copies_erase(h));
		} else {
			continue;
		}
		check_tree(&t.root, keys, n, cow ? "copy on write" : "in place");
		if (cow) {
			/* No node of an earlier version carries this update's generation. */
			for (i = 0; i < nv; i++) {
				struct ps_rb_root r = { v[i].root };

				cr_assert_eq(ps_rb_count_gen(&r, t.tx.gen), 0);
			}
			if (op % (NOPS / NVERSIONS) == 0 && nv < NVERSIONS)
				version_take(&v[nv++], &t, keys, n);
			if (op % 97 == 0)
				for (i = 0; i < nv; i++)
					version_check(&v[i], i);
		}
	}
	for (i = 0; i < nv; i++) {
		version_check(&v[i], i);
		version_free(&v[i]);
	}
	/* Erase everything left. */
	while (n) {
		struct ps_rb_path p;

		begin(&t);
		cr_assert(find(&t, keys[n - 1], &p));
		ps_rb_erase(&t.tx, &p);
		n--;
		check_tree(&t.root, keys, n, "draining");
	}
	cr_assert_null(t.root.node);
	ttree_fini(&t);
}

Test(rbtree, in_place_random)
{
	random_ops(false, 0x9e3779b97f4a7c15ULL);
}

Test(rbtree, copy_on_write_random_old_versions_unchanged)
{
	random_ops(true, 0x243f6a8885a308d3ULL);
}

/* Ascending and descending runs: the rebalancing cases a random order rarely hits in a row. */
Test(rbtree, sequential_both_modes)
{
	int cow;

	for (cow = 0; cow < 2; cow++) {
		struct ttree t;
		uint64_t keys[512];
		size_t n = 0;
		uint64_t k;

		ttree_init(&t, cow);
		for (k = 0; k < 512; k++) {
			struct ps_rb_path p;
			struct tnode *x = tnode_alloc(&t);

			begin(&t);
			cr_assert_not(find(&t, k, &p));
			x->key = k;
			ps_rb_insert(&t.tx, &p, &x->rb);
			keys[n++] = k;
			check_tree(&t.root, keys, n, "ascending insert");
		}
		for (k = 0; k < 512; k++) {
			struct ps_rb_path p;

			begin(&t);
			cr_assert(find(&t, k, &p));
			ps_rb_erase(&t.tx, &p);
			n--;
			check_tree(&t.root, keys + k + 1, n, "ascending erase");
		}
		ttree_fini(&t);
	}
}

/* ---- the range layer ------------------------------------------------------- */

struct rmodel {
	struct ps_policy *pol[4096]; /* page -> policy, NULL = none */
};

static int walk_cmp(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct rmodel *m = arg;
	uint64_t i;

	for (i = start; i < end; i++)
		cr_assert_eq(m->pol[i], pol, "page %llu", (unsigned long long)i);
	return 0;
}

/*
 * Copy-on-write sets with exactly ps_rtree_cow_need() spares (running out
 * aborts), against a page model and the in-place algorithm; each published
 * version is checked, and the old root stays a valid tree with its old
 * ranges until the retired ranges are freed.
 */
Test(rbtree, range_cow_sets_within_need)
{
	struct ps_policy *pols[3] = { ps_test_bind(0), ps_test_bind(1), NULL };
	struct ps_rtree pub, inplace;
	struct rmodel m = { { NULL } };
	uint64_t seed = 7, gen = 0;
	size_t maxneed = 0;
	int op, i;

	ps_rtree_init(&pub);
	ps_rtree_init(&inplace);
	for (op = 0; op < 4000; op++) {
		uint64_t a = ps_test_rand(&seed) % 4000, len = 1 + ps_test_rand(&seed) % (op % 5 ? 40 : 600);
		uint64_t b = a + len > 4096 ? 4096 : a + len;
		struct ps_policy *pol = pols[ps_test_rand(&seed) % 3];
		struct ps_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
		struct ps_range_vec vspares = { NULL, 0, 0 };
		size_t need = ps_rtree_cow_need(&pub, a, b, 0);
		struct ps_rtree_cow c;
		struct ps_rtree old = pub;
		const char *why = NULL;
		uint64_t x;

		maxneed = need > maxneed ? need : maxneed;
		cr_assert_eq(ps_range_vec_fill(&vspares, need), 0);
		ps_rtree_cow_begin(&c, &pub, ++gen, &vspares);
		cr_assert(ps_rtree_cow_set(&c, a, b, pol, SIZE_MAX));
		ps_rtree_cow_publish(&c, &pub);
		cr_assert_eq(ps_rtree_check(&pub, &why), 0, "op %d: %s", op, why);
		/* The old version still holds what it held: a reader of it sees it whole. */
		cr_assert_eq(ps_rb_check(&old.root, &why), (long)old.count, "op %d: old version: %s", op,
				why ? why : "count");
		ps_range_vec_free(&vspares);

		cr_assert_eq(ps_range_list_fill(&spares, PS_RTREE_SET_MAX_NEW), 0);
		ps_rtree_set(&inplace, a, b, pol, &spares, &removed);
		ps_range_list_free(&spares);
		ps_range_list_free(&removed);

		/* Retired ranges: replaced ones own no reference, removed ones do. */
		ps_range_list_free_nopol(&c.replaced);
		ps_range_list_free(&c.removed);

		for (x = a; x < b; x++)
			m.pol[x] = pol;
		ps_rtree_foreach(&pub, walk_cmp, &m);
		ps_rtree_foreach(&inplace, walk_cmp, &m);
		cr_assert_eq(pub.count, inplace.count, "op %d", op);
	}
	cr_log_info("largest ps_rtree_cow_need(): %zu spares for %zu ranges", maxneed, pub.count);
	{
		struct ps_range_list removed = { NULL, 0, NULL };

		ps_rtree_clear(&pub, &removed);
		ps_rtree_clear(&inplace, &removed);
		ps_range_list_free(&removed);
	}
	for (i = 0; i < 2; i++) {
		cr_assert_eq(ps_policy_refcount(pols[i]), 1);
		ps_policy_put(pols[i]);
	}
}

/*
 * An update prepared for a few erases that meets more stops, and
 * ps_rtree_cow_abort() leaves no trace: the published version, every
 * reference count and the spares are as before; the same set then runs
 * with ps_rtree_cow_need() spares.  Every third set here spans many ranges.
 */
Test(rbtree, range_cow_abort_leaves_no_trace)
{
	struct ps_policy *pols[2] = { ps_test_bind(0), ps_test_bind(1) };
	struct ps_rtree pub;
	struct rmodel m = { { NULL } };
	uint64_t seed = 11, gen = 0;
	int op, aborted = 0;

	ps_rtree_init(&pub);
	for (op = 0; op < 3000; op++) {
		uint64_t a = ps_test_rand(&seed) % 4000, len = 1 + ps_test_rand(&seed) % (op % 3 ? 8 : 300);
		uint64_t b = a + len > 4096 ? 4096 : a + len, x;
		struct ps_policy *pol = op % 7 ? pols[ps_test_rand(&seed) % 2] : NULL;
		struct ps_range_vec spares = { NULL, 0, 0 };
		long refs[2] = { ps_policy_refcount(pols[0]), ps_policy_refcount(pols[1]) };
		struct ps_rtree_cow c;
		const char *why = NULL;
		size_t n0;

		cr_assert_eq(ps_range_vec_fill(&spares, ps_rtree_cow_need_erasing(&pub, 1, 0)), 0);
		n0 = spares.n;
		ps_rtree_cow_begin(&c, &pub, ++gen, &spares);
		if (!ps_rtree_cow_set(&c, a, b, pol, 1)) {
			ps_rtree_cow_abort(&c);
			aborted++;
			cr_assert_eq(spares.n, n0, "op %d: spares not all returned", op);
			cr_assert_eq(ps_policy_refcount(pols[0]), refs[0], "op %d", op);
			cr_assert_eq(ps_policy_refcount(pols[1]), refs[1], "op %d", op);
			cr_assert_eq(ps_rtree_check(&pub, &why), 0, "op %d: %s", op, why);
			ps_rtree_foreach(&pub, walk_cmp, &m); /* still the model before this set */
			cr_assert_eq(ps_range_vec_fill(&spares, ps_rtree_cow_need(&pub, a, b, 0)), 0);
			ps_rtree_cow_begin(&c, &pub, ++gen, &spares);
			cr_assert(ps_rtree_cow_set(&c, a, b, pol, SIZE_MAX));
		}
		ps_rtree_cow_publish(&c, &pub);
		ps_range_vec_free(&spares);
		ps_range_list_free_nopol(&c.replaced);
		ps_range_list_free(&c.removed);
		for (x = a; x < b; x++)
			m.pol[x] = pol;
		cr_assert_eq(ps_rtree_check(&pub, &why), 0, "op %d: %s", op, why);
		ps_rtree_foreach(&pub, walk_cmp, &m);
	}
	cr_assert_gt(aborted, 100, "only %d sets met more than one range", aborted);
	{
		struct ps_range_list removed = { NULL, 0, NULL };

		ps_rtree_clear(&pub, &removed);
		ps_range_list_free(&removed);
	}
	cr_assert_eq(ps_policy_refcount(pols[0]), 1);
	cr_assert_eq(ps_policy_refcount(pols[1]), 1);
	ps_policy_put(pols[0]);
	ps_policy_put(pols[1]);
}
