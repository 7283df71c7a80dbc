// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The tree core on its own (src/tree/rbtree.c) and the range layer's
 * copy-on-write updates (src/range/rangetree.c), white-box:
 *  - in place and copy on write, random inserts and erases against a sorted
 *    array, the five properties checked after every operation;
 *  - copy on write: an update writes no node of the published tree but one
 *    child slot at publication (and colours, which readers never load),
 *    publishes at the root when asked, copies a node at most once, and
 *    copies within psi_rb_copies_insert/erase() of the height bound; on
 *    average it copies a few nodes, not the path;
 *  - readers that walk one step at a time while updates are published
 *    between their steps (as a slow reader on another CPU would) always
 *    answer as some version during their walk did: lookups are
 *    linearizable;
 *  - the range layer: copy-on-write sets over random trees never take more
 *    spares than psi_rangetree_cow_mem_reserve() reserved, give the same ranges as the
 *    in-place algorithm, and slow range readers are linearizable too.
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
	uint64_t sum; /* of the fields above, to detect a write to a published node */
};

static inline struct tnode *tn(struct ps_rb_node *n)
{
	return psi_container_of(n, struct tnode, rb);
}


/* A tree under test and what its copy hook did. */
struct ttree {
	struct ps_rb_root root;  /* the published root */
	struct ps_rb_root priv;  /* an update's own root pointer (copy on write) */
	struct psi_rb_tx tx;
	struct psi_rb_undo undo[1024];
	bool cow;
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

static struct ps_rb_node *tcopy(struct psi_rb_tx *tx, const struct ps_rb_node *old)
{
	struct ttree *t = psi_container_of(tx, struct ttree, tx);
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
	t->cow = cow;
	psi_rb_tx_init(&t->tx, &t->root, 0, NULL);
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
	if (t->cow) {
		t->priv.node = t->root.node;
		psi_rb_tx_init(&t->tx, &t->priv, t->tx.gen + 1, tcopy);
		t->tx.undo = t->undo;
		t->tx.undo_cap = 1024;
	}
	t->copies = 0;
	t->noriginals = 0;
}

/* Copy on write: publish the update (at the root when asked); false if it changed nothing. */
static bool publish(struct ttree *t, bool at_root)
{
	if (!t->cow)
		return true;
	if (at_root)
		psi_rb_raise_root(&t->tx);
	if (!t->tx.pending)
		return false;
	cr_assert_eq(psi_rb_publish(&t->tx, &t->root), t->tx.pdepth == 0);
	return true;
}

/* Path to @key's slot (insert) or node (erase), in the tree as the update sees it. */
static bool find(struct ttree *t, uint64_t key, struct psi_rb_path *p)
{
	struct ps_rb_node *n = t->tx.root->node;

	p->depth = 0;
	while (n) {
		int dir = key > tn(n)->key;

		psi_rb_path_push(p, n, dir);
		if (key == tn(n)->key)
			return true;
		n = psi_rb_child(&t->tx, n, dir);
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

/*
 * The published nodes before an update: each with its links, key and
 * generation, to check that the update wrote none of them but the one
 * child slot it publishes into.
 */
struct snap {
	size_t n;
	struct tnode **node;
	struct ps_rb_node *child[2][4096];
	uint64_t key[4096], gen[4096], meta[4096];
};

static void snap_collect(struct snap *sn, struct ps_rb_node *x)
{
	for (; x; x = x->child[1]) {
		snap_collect(sn, x->child[0]);
		cr_assert_lt(sn->n, 4096);
		sn->node[sn->n] = tn(x);
		sn->child[0][sn->n] = x->child[0];
		sn->child[1][sn->n] = x->child[1];
		sn->key[sn->n] = tn(x)->key;
		sn->meta[sn->n] = x->meta;
		sn->gen[sn->n++] = x->meta >> 1;
	}
}

static void snap_take(struct snap *sn, const struct ps_rb_root *root)
{
	static struct tnode *nodes[4096];

	sn->n = 0;
	sn->node = nodes;
	snap_collect(sn, root->node);
}

/* After an abort: every node exactly as it was, colours too. */
static void snap_check_whole(const struct snap *sn, const struct ps_rb_root *root, const char *what)
{
	size_t i;

	for (i = 0; i < sn->n; i++) {
		const struct tnode *x = sn->node[i];

		cr_assert(x->key == sn->key[i] && x->rb.meta == sn->meta[i] &&
				x->rb.child[0] == sn->child[0][i] && x->rb.child[1] == sn->child[1][i],
				"%s: node %llu changed", what, (unsigned long long)x->key);
	}
	cr_assert_eq(sn->n == 0, root->node == NULL, "%s: root", what);
}

/* After publication: only @slot_parent's side @slot_dir may differ (none when NULL). */
static void snap_check(const struct snap *sn, const struct ps_rb_node *slot_parent, int slot_dir,
		const char *what)
{
	size_t i;
	int d;

	for (i = 0; i < sn->n; i++) {
		const struct tnode *x = sn->node[i];

		cr_assert_eq(x->key, sn->key[i], "%s: a published key was written", what);
		cr_assert_eq(x->rb.meta >> 1, sn->gen[i], "%s: a published generation was written",
				what);
		for (d = 0; d < 2; d++)
			if (&x->rb != slot_parent || d != slot_dir)
				cr_assert_eq(x->rb.child[d], sn->child[d][i],
						"%s: published node %llu's child %d was written", what,
						(unsigned long long)x->key, d);
	}
}

/*
 * A reader that walks one step per turn, while updates are published
 * between its steps: it looks @key up from the root loaded at update
 * @start and must answer as some version from then to its last step did.
 */
struct slow_reader {
	bool active;
	uint64_t key;
	struct ps_rb_node *at;
	size_t start;
	unsigned pace; /* steps every @pace turns */
};

#define NHIST 256 /* versions kept: longer than any reader's walk */

/* Key sets of the last NHIST versions, version v at v % NHIST. */
struct history {
	uint64_t *keys[NHIST];
	size_t n[NHIST];
};

static void history_put(struct history *h, size_t v, const uint64_t *keys, size_t n)
{
	free(h->keys[v % NHIST]);
	h->keys[v % NHIST] = malloc((n + 1) * sizeof(*keys));
	memcpy(h->keys[v % NHIST], keys, n * sizeof(*keys));
	h->n[v % NHIST] = n;
}

static bool history_has(const struct history *h, size_t v, uint64_t key)
{
	return bsearch(&key, h->keys[v % NHIST], h->n[v % NHIST], sizeof(key),
			       key_cmp) != NULL;
}

static void history_free(struct history *h)
{
	int i;

	for (i = 0; i < NHIST; i++)
		free(h->keys[i]);
}

/* One turn of @r at version @now: a step if its pace says so; check the answer at the end. */
static void slow_step(struct slow_reader *r, const struct history *h, size_t now, size_t turn)
{
	bool found, ok = false;
	size_t v;

	if (!r->active || turn % r->pace)
		return;
	if (r->at && tn(r->at)->key != r->key) {
		r->at = PSI_LOAD_ACQUIRE(r->at->child[r->key > tn(r->at)->key]);
		return;
	}
	found = r->at != NULL;
	cr_assert_lt(now - r->start, (size_t)NHIST, "a reader outlived the history");
	for (v = r->start; v <= now && !ok; v++)
		ok = history_has(h, v, r->key) == found;
	cr_assert(ok, "a reader of %llu that started at version %zu answered %s at %zu: no version "
		      "between said so", (unsigned long long)r->key, r->start, found ? "found" : "absent",
			now);
	r->active = false;
}

#define NKEYS 1500
#define NOPS 6000
#define NREADERS 8

/*
 * One operation of an update: insert or erase a random key.  Return: 0
 * insert, 1 erase, -1 nothing to do.
 */
static int random_op(struct ttree *t, uint64_t *keys, size_t *n, uint64_t *seed, uint64_t near)
{
	/* Near the update's first key, so that its operations meet each other's changes. */
	uint64_t key = near == UINT64_MAX ? ps_test_rand(seed) % (2 * NKEYS) :
					   (near + ps_test_rand(seed) % 16) % (2 * NKEYS);
	struct psi_rb_path p;
	bool there = find(t, key, &p);
	/* Grow early, then hover around NKEYS / 2 .. NKEYS. */
	bool insert = *n < NKEYS / 2 || (*n < NKEYS && ps_test_rand(seed) % 2);
	size_t j;

	if (insert && !there) {
		struct tnode *x = tnode_alloc(t);

		x->key = key;
		psi_rb_insert(&t->tx, &p, &x->rb);
		keys[(*n)++] = key;
		qsort(keys, *n, sizeof(*keys), key_cmp);
		return 0;
	}
	if (there) {
		struct tnode *found = tn(p.node[p.depth - 1]);
		struct tnode *x = tn(psi_rb_erase(&t->tx, &p));

		cr_assert_eq(x->key, key);
		/* The node itself leaves, or its copy if the update copied it first. */
		if (x != found) {
			bool copied = false;

			for (j = 0; j < t->noriginals; j++)
				copied = copied || t->originals[j] == found;
			cr_assert(t->cow && copied, "erase returned neither the node nor its copy");
		}
		for (j = 0; keys[j] != key; j++)
			;
		memmove(&keys[j], &keys[j + 1], (*n - j - 1) * sizeof(*keys));
		(*n)--;
		return 1;
	}
	return -1;
}

/*
 * Updates of one operation (half of them, for the copy counts) or of two
 * to five (so that later operations meet the region of earlier ones).
 */
static void random_ops(bool cow, uint64_t seed)
{
	static struct snap sn;
	struct ttree t;
	uint64_t keys[NKEYS + 1];
	size_t n = 0, up, version = 0, copies[2] = { 0, 0 }, ops[2] = { 0, 0 };
	struct slow_reader rd[NREADERS];
	struct history hist = { { NULL }, { 0 } };
	int i;

	memset(rd, 0, sizeof(rd));
	ttree_init(&t, cow);
	history_put(&hist, 0, keys, 0);
	for (up = 0; up < NOPS; up++) {
		int h = psi_rb_height_bound(&t.root, 5), nops = up % 2 ? 1 : 2 + (int)(up / 2 % 4);
		bool at_root = up % 8 == 7;
		size_t bound = 0;
		int k, kind = -1;

		if (cow)
			snap_take(&sn, &t.root);
		begin(&t);
		/* Most multi-operation updates work on a cluster of 16 neighbouring keys. */
		uint64_t base = up % 4 ? ps_test_rand(&seed) % (2 * NKEYS) : UINT64_MAX;

		bool abort_it = cow && up % 10 == 5;
		static uint64_t saved[NKEYS + 1];
		size_t nsaved = n;

		if (abort_it)
			memcpy(saved, keys, n * sizeof(*keys));
		for (k = 0; k < nops; k++) {
			size_t c0 = t.copies, u0 = t.tx.nundo;
			int done = random_op(&t, keys, &n, &seed, base);

			if (done >= 0) {
				size_t b = done ? psi_rb_copies_erase(h) : psi_rb_copies_insert(h);

				cr_assert_leq(t.copies - c0, b, "an operation took %zu copies, bound %zu",
						t.copies - c0, b);
				cr_assert_leq(t.tx.nundo - u0, psi_rb_paints(h),
						"an operation painted %zu published nodes, bound %zu",
						t.tx.nundo - u0, psi_rb_paints(h));
				bound += b;
				kind = kind == -1 ? done : 2;
			}
		}
		if (abort_it) {
			/* Thrown away: every published node as it was, colours too. */
			psi_rb_abort(&t.tx);
			snap_check_whole(&sn, &t.root, "abort");
			memcpy(keys, saved, nsaved * sizeof(*keys));
			n = nsaved;
			check_tree(&t.root, keys, n, "after an abort");
			continue;
		}
		if (kind == -1)
			continue;
		cr_assert_leq(t.copies, bound, "an update took %zu copies, bound %zu", t.copies, bound);
		if (cow) {
			struct ps_rb_node *slot = NULL;
			int dir = 0;

			if (!at_root && t.tx.pending && t.tx.pdepth) {
				slot = t.tx.ppath.node[t.tx.pdepth - 1];
				dir = t.tx.ppath.dir[t.tx.pdepth - 1];
			}
			/* (Several operations may cancel out: an insert and the erase of that key.) */
			publish(&t, at_root);
			snap_check(&sn, slot, dir, "update");
			if (!at_root && nops == 1) {
				copies[kind] += t.copies;
				ops[kind]++;
			}
		}
		check_tree(&t.root, keys, n, cow ? "copy on write" : "in place");
		if (!cow)
			continue;
		/* Slow readers: start some, step all between this update and the next. */
		history_put(&hist, ++version, keys, n);
		for (i = 0; i < NREADERS; i++) {
			struct slow_reader *r = &rd[i];

			if (!r->active && ps_test_rand(&seed) % 4 == 0) {
				r->active = true;
				r->key = ps_test_rand(&seed) % (2 * NKEYS);
				r->start = version;
				r->at = PSI_LOAD_ACQUIRE(t.root.node);
				r->pace = 1 + (unsigned)(ps_test_rand(&seed) % 4);
			}
			slow_step(r, &hist, version, up);
		}
	}
	if (cow) {
		/*
		 * Lazy copying: an insertion copies only what its rotations
		 * relink, an erase what it relinks, not the path to the root.
		 */
		cr_log_info("copies per insert %.2f, per erase %.2f (%zu, %zu one-op updates)",
				(double)copies[0] / (double)ops[0], (double)copies[1] / (double)ops[1],
				ops[0], ops[1]);
		cr_assert_lt((double)copies[0] / (double)ops[0], 3.0);
		cr_assert_lt((double)copies[1] / (double)ops[1], 4.0);
	}
	history_free(&hist);
	/* Erase everything left. */
	while (n) {
		struct psi_rb_path p;

		begin(&t);
		cr_assert(find(&t, keys[n - 1], &p));
		psi_rb_erase(&t.tx, &p);
		publish(&t, false);
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

Test(rbtree, copy_on_write_random_one_slot_written)
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
			struct psi_rb_path p;
			struct tnode *x = tnode_alloc(&t);

			begin(&t);
			cr_assert_not(find(&t, k, &p));
			x->key = k;
			psi_rb_insert(&t.tx, &p, &x->rb);
			publish(&t, k % 5 == 0);
			keys[n++] = k;
			check_tree(&t.root, keys, n, "ascending insert");
		}
		for (k = 0; k < 512; k++) {
			struct psi_rb_path p;

			begin(&t);
			cr_assert(find(&t, k, &p));
			psi_rb_erase(&t.tx, &p);
			publish(&t, k % 5 == 0);
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

/* A slow range reader: psi_rangetree_lookup() of @idx, one step per turn. */
struct slow_range_reader {
	bool active;
	uint64_t idx;
	struct ps_rb_node *at;
	size_t start;
	unsigned pace;
};

#define RHIST 128

/*
 * Copy-on-write sets with exactly the spares psi_rangetree_cow_mem_reserve() reserves (running out
 * aborts), against a page model and the in-place algorithm; each published
 * version is checked.  Slow readers walk while sets are published between
 * their steps; retired ranges are kept until the end, as a grace period
 * would keep them from such readers.
 */
Test(rbtree, range_cow_sets_within_reservations)
{
	struct ps_policy *pols[3] = { ps_test_bind(0), ps_test_bind(1), NULL };
	struct ps_rtree pub, inplace;
	static struct rmodel m, hist[RHIST];
	struct slow_range_reader rd[NREADERS];
	struct psi_range_list retired_nopol = { NULL, 0, NULL }, retired = { NULL, 0, NULL };
	struct psi_rangetree_cow_mem mem;
	uint64_t seed = 7, gen = 0;
	size_t maxneed = 0, version = 0, slots = 0;
	int op, i;

	memset(&m, 0, sizeof(m));
	memset(&mem, 0, sizeof(mem));
	memset(rd, 0, sizeof(rd));
	hist[0] = m;
	psi_rangetree_init(&pub);
	psi_rangetree_init(&inplace);
	for (op = 0; op < 4000; op++) {
		uint64_t a = ps_test_rand(&seed) % 4000, len = 1 + ps_test_rand(&seed) % (op % 5 ? 40 : 600);
		uint64_t b = a + len > 4096 ? 4096 : a + len;
		struct ps_policy *pol = pols[ps_test_rand(&seed) % 3];
		struct psi_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
		struct psi_rangetree_cow c;
		const char *why = NULL;
		uint64_t x;

		psi_rangetree_cow_begin(&c, &pub, ++gen, &mem);
		cr_assert(psi_rangetree_cow_set(&c, a, b, pol));
		if (op % 4 == 3)
			cr_assert_eq(psi_rangetree_cow_ready_publish(&c, true, 0), 0);
		slots += !psi_rangetree_cow_publish(&c, &pub, op % 4 == 3) && c.tx.pending;
		maxneed = mem.peak > maxneed ? mem.peak : maxneed;
		cr_assert_eq(psi_rangetree_check(&pub, &why), 0, "op %d: %s", op, why);

		cr_assert_eq(psi_range_list_fill(&spares, PSI_RANGETREE_SET_MAX_NEW), 0);
		psi_rangetree_set(&inplace, a, b, pol, &spares, &removed);
		psi_range_list_free(&spares);
		psi_range_list_free(&removed);

		/* Retired ranges: replaced ones own no reference, removed ones do. */
		psi_range_list_splice(&retired_nopol, &c.replaced);
		psi_range_list_splice(&retired, &c.removed);

		for (x = a; x < b; x++)
			m.pol[x] = pol;
		psi_rangetree_foreach(&pub, walk_cmp, &m);
		psi_rangetree_foreach(&inplace, walk_cmp, &m);
		cr_assert_eq(pub.count, inplace.count, "op %d", op);

		hist[++version % RHIST] = m;
		for (i = 0; i < NREADERS; i++) {
			struct slow_range_reader *r = &rd[i];
			struct ps_range *rg;
			struct ps_policy *seen;
			size_t v;
			bool ok = false;

			if (!r->active) {
				if (ps_test_rand(&seed) % 3)
					continue;
				r->active = true;
				r->idx = ps_test_rand(&seed) % 4096;
				r->start = version;
				r->at = PSI_LOAD_ACQUIRE(pub.root.node);
				r->pace = 1 + (unsigned)(ps_test_rand(&seed) % 3);
			}
			if (op % r->pace)
				continue;
			rg = r->at ? psi_container_of(r->at, struct ps_range, rb) : NULL;
			if (rg && (r->idx < rg->start || r->idx >= rg->end)) {
				r->at = PSI_LOAD_ACQUIRE(r->at->child[r->idx >= rg->end]);
				continue;
			}
			seen = rg ? rg->pol : NULL;
			cr_assert_lt(version - r->start, (size_t)RHIST);
			for (v = r->start; v <= version && !ok; v++)
				ok = hist[v % RHIST].pol[r->idx] == seen;
			cr_assert(ok, "op %d: a slow reader of page %llu answered a policy no version "
				      "from %zu to %zu held", op, (unsigned long long)r->idx, r->start,
					version);
			r->active = false;
		}
	}
	cr_log_info("largest reservation: %zu spares for %zu ranges; %zu sets published "
		    "in a child slot", maxneed, pub.count, slots);
	psi_rangetree_cow_mem_free(&mem);
	cr_assert_gt(slots, 1000);
	psi_range_list_free_nopol(&retired_nopol);
	psi_range_list_free(&retired);
	{
		struct psi_range_list removed = { NULL, 0, NULL };

		psi_rangetree_clear(&pub, &removed);
		psi_rangetree_clear(&inplace, &removed);
		psi_range_list_free(&removed);
	}
	for (i = 0; i < 2; i++) {
		cr_assert_eq(ps_policy_refcount(pols[i]), 1);
		ps_policy_put(pols[i]);
	}
}

/*
 * A set that gives one range a new policy copies that one range and
 * publishes it into its parent's slot; a set into a gap that needs no
 * rotation copies nothing.
 */
Test(rbtree, range_cow_copies_only_what_changes)
{
	struct ps_policy *pols[2] = { ps_test_bind(0), ps_test_bind(1) };
	struct psi_rangetree_cow_mem mem;
	struct ps_rtree pub;
	uint64_t gen = 0, i;
	size_t none = 0;

	memset(&mem, 0, sizeof(mem));
	psi_rangetree_init(&pub);
	for (i = 0; i < 1000; i++) {
		struct psi_rangetree_cow c;
		uint64_t s = (i * 7919) % 1000; /* scattered: a balanced-looking tree */

		psi_rangetree_cow_begin(&c, &pub, ++gen, &mem);
		cr_assert(psi_rangetree_cow_set(&c, 10 * s, 10 * s + 5, pols[0]));
		cr_assert_eq(mem.used.n, c.copies + 1, "an insertion takes its range and the copies");
		none += c.copies == 0;
		psi_rangetree_cow_publish(&c, &pub, false);
		psi_range_list_free_nopol(&c.replaced);
		psi_range_list_free(&c.removed);
	}
	for (i = 0; i < 1000; i++) {
		struct psi_rangetree_cow c;

		psi_rangetree_cow_begin(&c, &pub, ++gen, &mem);
		cr_assert(psi_rangetree_cow_set(&c, 10 * i, 10 * i + 5, pols[i & 1]));
		cr_assert_eq(c.copies, 1, "a new policy for one range copied %zu nodes", c.copies);
		cr_assert_eq(c.replaced.n, 1);
		cr_assert_eq(c.count, 1000);
		psi_rangetree_cow_publish(&c, &pub, false);
		psi_range_list_free_nopol(&c.replaced);
		psi_range_list_free(&c.removed);
	}
	cr_log_info("%zu of 1000 insertions copied nothing", none);
	cr_assert_gt(none, 300);
	psi_rangetree_cow_mem_free(&mem);
	{
		struct psi_range_list removed = { NULL, 0, NULL };

		psi_rangetree_clear(&pub, &removed);
		psi_range_list_free(&removed);
	}
	cr_assert_eq(ps_policy_refcount(pols[0]), 1);
	cr_assert_eq(ps_policy_refcount(pols[1]), 1);
	ps_policy_put(pols[0]);
	ps_policy_put(pols[1]);
}

/* A range's full state, for the abort test: pointers, links, colour, payload, its policy's count. */
struct rsnap {
	size_t n;
	struct ps_range *r[2048];
	struct ps_rb_node *child[2][2048];
	uint64_t meta[2048], start[2048], end[2048];
	struct ps_policy *pol[2048];
};

static void rsnap_walk(struct rsnap *sn, struct ps_rb_node *x)
{
	for (; x; x = x->child[1]) {
		struct ps_range *r = psi_container_of(x, struct ps_range, rb);

		rsnap_walk(sn, x->child[0]);
		cr_assert_lt(sn->n, 2048);
		sn->r[sn->n] = r;
		sn->child[0][sn->n] = x->child[0];
		sn->child[1][sn->n] = x->child[1];
		sn->meta[sn->n] = x->meta;
		sn->start[sn->n] = r->start;
		sn->end[sn->n] = r->end;
		sn->pol[sn->n++] = r->pol;
	}
}

static void rsnap_check(const struct rsnap *sn, const struct ps_rtree *t, const char *what, long k)
{
	size_t i;

	for (i = 0; i < sn->n; i++) {
		const struct ps_range *r = sn->r[i];

		cr_assert(r->rb.child[0] == sn->child[0][i] && r->rb.child[1] == sn->child[1][i] &&
				r->rb.meta == sn->meta[i] && r->start == sn->start[i] &&
				r->end == sn->end[i] && r->pol == sn->pol[i],
				"%s, failure %ld: range [%llu, %llu) changed", what, k,
				(unsigned long long)sn->start[i], (unsigned long long)sn->end[i]);
	}
	cr_assert_eq(sn->n == 0, t->root.node == NULL, "%s: root", what);
}

/*
 * Out of memory at every allocation of an update in turn (the failing
 * allocator): the set reports it, psi_rangetree_cow_abort() leaves every
 * published range exactly as it was (links, colours, bounds, policies,
 * reference counts), and then the set succeeds.  Single sets and batches
 * of several, over random trees.
 */
Test(rbtree, range_cow_abort_at_every_allocation)
{
	struct ps_policy *pols[3] = { ps_test_bind(0), ps_test_bind(1), NULL };
	static struct rsnap sn;
	struct ps_rtree pub;
	uint64_t seed = 11, gen = 0;
	long aborts = 0;
	int op;

	psi_rangetree_init(&pub);
	ps_test_alloc_install();
	for (op = 0; op < 600; op++) {
		int nops = 1 + (op % 3 == 0 ? (int)(ps_test_rand(&seed) % 4) : 0), j;
		struct ps_set_op ops[4];
		long refs[2], k;

		for (j = 0; j < nops; j++) {
			uint64_t a = ps_test_rand(&seed) % 1000;

			ops[j].start = a;
			ops[j].end = a + 1 + ps_test_rand(&seed) % (op % 7 ? 8 : 120);
			ops[j].pol = pols[ps_test_rand(&seed) % 3];
		}
		for (k = 0;; k++) {
			struct psi_rangetree_cow_mem mem;
			struct psi_rangetree_cow c;
			bool ok = true;
			const char *why = NULL;

			memset(&mem, 0, sizeof(mem));
			sn.n = 0;
			rsnap_walk(&sn, pub.root.node);
			refs[0] = ps_policy_refcount(pols[0]);
			refs[1] = ps_policy_refcount(pols[1]);
			ps_test_alloc_fail_once(k);
			psi_rangetree_cow_begin(&c, &pub, ++gen, &mem);
			for (j = 0; j < nops && ok; j++)
				ok = psi_rangetree_cow_set(&c, ops[j].start, ops[j].end, ops[j].pol);
			if (ok && op % 5 == 0)
				ok = !psi_rangetree_cow_ready_publish(&c, true, 0);
			if (!ps_test_alloc_disarm()) {
				cr_assert(ok, "op %d: an update failed with no allocation failing", op);
				psi_rangetree_cow_publish(&c, &pub, op % 5 == 0);
				cr_assert_eq(psi_rangetree_check(&pub, &why), 0, "op %d: %s", op, why);
				psi_range_list_free_nopol(&c.replaced);
				psi_range_list_free(&c.removed);
				psi_rangetree_cow_mem_free(&mem);
				break;
			}
			cr_assert(!ok, "op %d: an update succeeded despite failure %ld", op, k);
			psi_rangetree_cow_abort(&c);
			aborts++;
			rsnap_check(&sn, &pub, "abort", k);
			cr_assert_eq(psi_rangetree_check(&pub, &why), 0, "op %d, failure %ld: %s", op, k, why);
			cr_assert_eq(ps_policy_refcount(pols[0]), refs[0], "op %d, failure %ld", op, k);
			cr_assert_eq(ps_policy_refcount(pols[1]), refs[1], "op %d, failure %ld", op, k);
			psi_rangetree_cow_mem_free(&mem);
		}
	}
	ps_test_alloc_restore();
	cr_log_info("%ld aborted updates", aborts);
	cr_assert_gt(aborts, 1000);
	{
		struct psi_range_list removed = { NULL, 0, NULL };

		psi_rangetree_clear(&pub, &removed);
		psi_range_list_free(&removed);
	}
	cr_assert_eq(ps_policy_refcount(pols[0]), 1);
	cr_assert_eq(ps_policy_refcount(pols[1]), 1);
	ps_policy_put(pols[0]);
	ps_policy_put(pols[1]);
}
