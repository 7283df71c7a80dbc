// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The tree core on its own (src/tree/rbtree.c) and the range layer's
 * in-place sets (src/range/rangetree.c), white-box:
 *  - random inserts and erases against a sorted array, the five
 *    properties checked after every operation; ascending and descending
 *    runs;
 *  - random sets over a page model: the ranges the model holds, the
 *    invariants after every set, never more spares than
 *    PSI_RANGETREE_SET_MAX_NEW;
 *  - every set between edge points (0, 1, 2^63, UINT64_MAX) over small
 *    trees, and adversarial sets over big ones (huge spans, splits, trims,
 *    deletion-heavy shapes), the invariants after each.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "policy_internal.h"
#include "rangepool.h"
#include "rangetree.h"
#include "rbtree.h"
#include "testutil.h"

struct tnode {
	struct ps_rb_node rb;
	uint64_t key;
};

static inline struct tnode *tn(struct ps_rb_node *n)
{
	return psi_container_of(n, struct tnode, rb);
}

/* A tree under test and every node it allocated, freed at the end. */
struct ttree {
	struct ps_rb_root root;
	struct tnode **all;
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

static void ttree_init(struct ttree *t)
{
	memset(t, 0, sizeof(*t));
}

static void ttree_fini(struct ttree *t)
{
	size_t i;

	for (i = 0; i < t->nall; i++)
		free(t->all[i]);
	free(t->all);
}

/* Path to @key's slot (insert) or node (erase). */
static bool find(struct ttree *t, uint64_t key, struct psi_rb_path *p)
{
	struct ps_rb_node *n = t->root.node;

	p->depth = 0;
	while (n) {
		int dir = key > tn(n)->key;

		psi_rb_path_push(p, n, dir);
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
	struct psi_rb_iter it;
	struct ps_rb_node *x;
	size_t i = 0;

	cr_assert_eq(psi_rb_check(root, &why), (long)n, "%s: %s", what, why ? why : "count");
	for (x = psi_rb_iter_first(&it, root); x; x = psi_rb_iter_next(&it), i++)
		cr_assert_eq(tn(x)->key, keys[i], "%s: key %zu is %llu, want %llu", what, i,
				(unsigned long long)tn(x)->key, (unsigned long long)keys[i]);
	cr_assert_eq(i, n);
}

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}


#define NKEYS 1500
#define NOPS 6000

/* Insert or erase a random key.  Return: 0 insert, 1 erase, -1 nothing to do. */
static int random_op(struct ttree *t, uint64_t *keys, size_t *n, uint64_t *seed)
{
	uint64_t key = ps_test_rand(seed) % (2 * NKEYS);
	struct psi_rb_path p;
	bool there = find(t, key, &p);
	/* Grow early, then hover around NKEYS / 2 .. NKEYS. */
	bool insert = *n < NKEYS / 2 || (*n < NKEYS && ps_test_rand(seed) % 2);
	size_t j;

	if (insert && !there) {
		struct tnode *x = tnode_alloc(t);

		x->key = key;
		psi_rb_insert(&t->root, &p, &x->rb);
		keys[(*n)++] = key;
		qsort(keys, *n, sizeof(*keys), key_cmp);
		return 0;
	}
	if (there) {
		struct tnode *found = tn(p.node[p.depth - 1]);
		struct tnode *x = tn(psi_rb_erase(&t->root, &p));

		cr_assert_eq(x, found, "erase returned another node");
		for (j = 0; keys[j] != key; j++)
			;
		memmove(&keys[j], &keys[j + 1], (*n - j - 1) * sizeof(*keys));
		(*n)--;
		return 1;
	}
	return -1;
}

Test(rbtree, in_place_random)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	uint64_t keys[NKEYS + 1];
	struct ttree t;
	size_t n = 0, op;

	ttree_init(&t);
	for (op = 0; op < NOPS; op++)
		if (random_op(&t, keys, &n, &seed) >= 0)
			check_tree(&t.root, keys, n, "in place");
	/* Erase everything left. */
	while (n) {
		struct psi_rb_path p;

		cr_assert(find(&t, keys[n - 1], &p));
		psi_rb_erase(&t.root, &p);
		n--;
		check_tree(&t.root, keys, n, "draining");
	}
	cr_assert_null(t.root.node);
	ttree_fini(&t);
}

/* Ascending and descending runs: the rebalancing cases a random order rarely hits in a row. */
Test(rbtree, sequential)
{
	struct ttree t;
	uint64_t keys[512];
	size_t n = 0;
	uint64_t k;

	ttree_init(&t);
	for (k = 0; k < 512; k++) {
		struct psi_rb_path p;
		struct tnode *x = tnode_alloc(&t);

		cr_assert_not(find(&t, k, &p));
		x->key = k;
		psi_rb_insert(&t.root, &p, &x->rb);
		keys[n++] = k;
		check_tree(&t.root, keys, n, "ascending insert");
	}
	for (k = 0; k < 512; k++) {
		struct psi_rb_path p;

		cr_assert(find(&t, k, &p));
		psi_rb_erase(&t.root, &p);
		n--;
		check_tree(&t.root, keys + k + 1, n, "ascending erase");
	}
	for (k = 512; k-- > 0;) {
		struct psi_rb_path p;
		struct tnode *x = tnode_alloc(&t);

		cr_assert_not(find(&t, k, &p));
		x->key = k;
		psi_rb_insert(&t.root, &p, &x->rb);
		keys[k] = k;
		n++;
		check_tree(&t.root, keys + k, n, "descending insert");
	}
	for (k = 512; k-- > 0;) {
		struct psi_rb_path p;

		cr_assert(find(&t, k, &p));
		psi_rb_erase(&t.root, &p);
		n--;
		check_tree(&t.root, keys, n, "descending erase");
	}
	ttree_fini(&t);
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

/* The ranges of a tree wholly inside [a, b). */
struct inside {
	uint64_t a, b;
	size_t n;
};

static int count_inside(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct inside *in = arg;

	(void)pol;
	in->n += start >= in->a && end <= in->b;
	return 0;
}

/*
 * In-place sets with exactly PSI_RANGETREE_SET_MAX_NEW spares each (running
 * out aborts), against a page model; the tree is checked after each.  A
 * set unlinks the ranges it covers whole, but for the one a new range
 * takes the place of, and says how many.
 */
Test(rbtree, range_sets_against_page_model)
{
	struct ps_policy *pols[3] = { ps_test_bind(0), ps_test_bind(1), NULL };
	static struct rmodel m;
	struct ps_rtree t;
	uint64_t seed = 7;
	int op, i;

	memset(&m, 0, sizeof(m));
	psi_rangetree_init(&t);
	for (op = 0; op < 4000; op++) {
		uint64_t a = ps_test_rand(&seed) % 4000, len = 1 + ps_test_rand(&seed) % (op % 5 ? 40 : 600);
		uint64_t b = a + len > 4096 ? 4096 : a + len;
		struct ps_policy *pol = pols[ps_test_rand(&seed) % 3];
		struct psi_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
		struct inside in = { a, b, 0 };
		const char *why = NULL;
		size_t unlinked;
		uint64_t x;

		psi_rangetree_foreach(&t, count_inside, &in);
		cr_assert_eq(psi_range_list_fill(&spares, PSI_RANGETREE_SET_MAX_NEW), 0);
		unlinked = psi_rangetree_set(&t, a, b, pol, &spares, &removed);
		cr_assert_eq(unlinked, in.n - (pol && in.n), "op %d: %zu unlinked of %zu inside", op,
				unlinked, in.n);
		psi_range_list_free(&spares);
		psi_range_list_free(&removed);
		cr_assert_eq(psi_rangetree_check(&t, &why), 0, "op %d: %s", op, why);
		for (x = a; x < b; x++)
			m.pol[x] = pol;
		psi_rangetree_foreach(&t, walk_cmp, &m);
	}
	{
		struct psi_range_list removed = { NULL, 0, NULL };

		psi_rangetree_clear(&t, &removed);
		psi_range_list_free(&removed);
	}
	for (i = 0; i < 2; i++) {
		cr_assert_eq(ps_policy_refcount(pols[i]), 1);
		ps_policy_put(pols[i]);
	}
}

/* ---- in-place sets at the edges and on adversarial shapes ---------------- */

/*
 * One in-place set with exactly the spares a set may take (running out
 * aborts: a crash fails the test); the removed ranges are freed at once
 * (no readers).
 */
static void tree_apply(struct ps_rtree *t, uint64_t a, uint64_t b, struct ps_policy *pol)
{
	struct psi_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
	const char *why = NULL;

	cr_assert_eq(psi_range_list_fill(&spares, PSI_RANGETREE_SET_MAX_NEW), 0);
	psi_rangetree_set(t, a, b, pol, &spares, &removed);
	cr_assert_eq(psi_rangetree_check(t, &why), 0, "[%llu, %llu): %s", (unsigned long long)a,
			(unsigned long long)b, why);
	psi_range_list_free(&spares);
	psi_range_list_free(&removed);
}

static void tree_free(struct ps_rtree *t)
{
	struct psi_range_list removed = { NULL, 0, NULL };

	psi_rangetree_clear(t, &removed);
	psi_range_list_free(&removed);
}

/*
 * Trees of 0 to 3 ranges built from edge points (0, 1, ..., 2^63,
 * UINT64_MAX - 1, UINT64_MAX), every set between two edge points, adding
 * and removing.  Sets equal to existing ranges, adjacent, covering all.
 */
Test(rbtree, sets_exhaustive_small_trees_at_edges)
{
	static const uint64_t P[] = { 0, 1, 2, 3, 5, 8, 1ULL << 63, UINT64_MAX - 1, UINT64_MAX };
	enum { NP = sizeof(P) / sizeof(P[0]) };
	struct ps_policy *pa = ps_test_bind(0), *pb = ps_test_bind(1);
	unsigned mask, i, j, sa, sb;
	long cases = 0;

	/* A tree: consecutive edge-point intervals chosen by @mask (up to 3 of them). */
	for (mask = 0; mask < (1u << (NP - 1)); mask++) {
		if (__builtin_popcount(mask) > 3)
			continue;
		for (sa = 0; sa < NP; sa++) {
			for (sb = sa + 1; sb < NP; sb++) {
				int k;

				for (k = 0; k < 2; k++) {
					struct ps_rtree t;

					psi_rangetree_init(&t);
					for (i = 0, j = 0; i < NP - 1; i++)
						if (mask & (1u << i))
							tree_apply(&t, P[i], P[i + 1], j++ & 1 ? pa : pb);
					tree_apply(&t, P[sa], P[sb], k ? pa : NULL);
					/* And a second set on the result: the same again. */
					tree_apply(&t, P[sa], P[sb], pb);
					tree_free(&t);
					cases++;
				}
			}
		}
	}
	cr_log_info("%ld cases", cases);
	cr_assert_eq(ps_policy_refcount(pa), 1);
	cr_assert_eq(ps_policy_refcount(pb), 1);
	ps_policy_put(pa);
	ps_policy_put(pb);
}

/*
 * Big trees, adversarial sets: a long run of adjacent one-page ranges, then
 * sets that cover many of them (huge spans, up to UINT64_MAX), split one,
 * trim both ends, equal an existing range; also trees shaped by many
 * removals (deletion-heavy rebalancing).
 */
Test(rbtree, sets_big_trees_adversarial, .timeout = 300)
{
	struct ps_policy *pols[2] = { ps_test_bind(0), ps_test_bind(1) };
	uint64_t seed = 4242;
	/* Under valgrind: trees up to 512 ranges, 300 sets each (natively 2048, 3000). */
	bool slow = ps_test_scale() < 0.5;
	int round, sizes = slow ? 4 : 6, ops = slow ? 300 : 3000;

	for (round = 0; round < 12; round++) {
		struct ps_rtree t;
		uint64_t n = 64u << (round % sizes), i;
		int op;

		psi_rangetree_init(&t);
		/* Adjacent ranges, inserted in an order that depends on the round. */
		for (i = 0; i < n; i++) {
			uint64_t x = round & 1 ? i : (round & 2 ? n - 1 - i : (i * 7919) % n);

			tree_apply(&t, 10 * x, 10 * x + 10, pols[x & 1]);
		}
		/* Carve holes: a deletion-heavy shape. */
		for (i = 0; i < n; i += 1 + ps_test_rand(&seed) % 3)
			tree_apply(&t, 10 * i, 10 * i + 10, NULL);
		for (op = 0; op < ops; op++) {
			uint64_t r = ps_test_rand(&seed), a, b;
			struct ps_policy *p = r & 1 ? pols[(r >> 1) & 1] : NULL;

			switch ((r >> 4) % 8) {
			case 0: /* huge span to the end */
				a = ps_test_rand(&seed) % (10 * n + 20);
				b = UINT64_MAX;
				break;
			case 1: /* from 0 */
				a = 0;
				b = 1 + ps_test_rand(&seed) % (10 * n + 20);
				break;
			case 2: /* inside one range: split */
				a = 10 * (ps_test_rand(&seed) % n) + 3;
				b = a + 4;
				break;
			case 3: /* exactly one range */
				a = 10 * (ps_test_rand(&seed) % n);
				b = a + 10;
				break;
			case 4: /* many whole ranges, trimmed at both ends */
				a = 10 * (ps_test_rand(&seed) % n) + 5;
				b = a + 10 * (1 + ps_test_rand(&seed) % 64);
				break;
			case 5: /* the very top */
				a = UINT64_MAX - 1 - ps_test_rand(&seed) % 4;
				b = UINT64_MAX - ps_test_rand(&seed) % 2;
				if (a >= b)
					continue;
				break;
			default: /* small random */
				a = ps_test_rand(&seed) % (10 * n);
				b = a + 1 + ps_test_rand(&seed) % 30;
				break;
			}
			tree_apply(&t, a, b, p);
			if (!t.count || op % (ops / 6) == ops / 6 - 1) {
				/* Refill: many adjacent ranges again. */
				for (i = 0; i < n; i += 1 + (ps_test_rand(&seed) & 1))
					tree_apply(&t, 10 * i, 10 * i + 10, pols[i & 1]);
			}
		}
		tree_free(&t);
	}
	cr_assert_eq(ps_policy_refcount(pols[0]), 1);
	cr_assert_eq(ps_policy_refcount(pols[1]), 1);
	ps_policy_put(pols[0]);
	ps_policy_put(pols[1]);
}
