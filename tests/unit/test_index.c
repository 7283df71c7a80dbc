// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index of the RCU stores: the B+-tree of immutable wide nodes of
 * polstore/static/index.h that src/range/rangeindex.[ch] keeps equal to
 * the store's range tree, and that every lockless reader of RCU and
 * RCU_QSBR walks.
 *
 *  1. White box, differential: an index beside an in-place range tree
 *     given the same sets (tiny spans, spans across many leaves, spans to
 *     UINT64_MAX and from 0, removals by NULL and DEFAULT, removals over
 *     gaps), at 1 to 10^4 ranges, single sets and batches.  After every
 *     update: psi_ix_check() against the tree, the bytes counted, and
 *     lookups, next and windows against the tree's; where each update
 *     publishes (one store, into the lowest node it leaves unchanged, or
 *     the root), what it builds and retires (exactly the nodes that enter
 *     and leave the index), and that the version it replaced is intact
 *     until its nodes are freed.
 *  2. Allocation failure at every allocation of an update: aborted, the
 *     index is as it was and nothing leaks.
 *  3. Through the store API: RCU and RCU_QSBR stores of 10^5 ranges
 *     answer as a SPIN store given the same sets; memory in proportion.
 *  4. Readers beside a flat-out writer (testutil_load.c, also run by
 *     tsan_stress): every answer is one some version gave.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "policy_internal.h"
#include "rangeindex.h"
#include "inline_shim.h"
#include "rangetree.h"
#include "testutil.h"

/* Constants of src/range/rangeindex.c (not exported): keep in step. */
#define IX_FRESH 1u
#define IX_DEAD 2u
#define IX_SUBTREE ((uintptr_t)1)

static enum ps_sync rcu_syncs[] = {PS_SYNC_RCU, PS_SYNC_RCU_QSBR};

/* ---- a sorted set of node pointers ---------------------------------------------- */

struct nodeset {
	const void **v;
	size_t n, cap;
};

static void ns_add(struct nodeset *s, const void *p)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		cr_assert_not_null(s->v);
	}
	s->v[s->n++] = p;
}

/* Every node of the index at @h. */
static void ns_collect(struct nodeset *s, const struct ps_ix_node *h)
{
	int i;

	if (!h)
		return;
	ns_add(s, h);
	if (h->height)
		for (i = 0; i < h->n; i++)
			ns_collect(s, ((const struct ps_ix_inner *)(const void *)h)->child[i]);
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const void *const *)a,
		  y = (uintptr_t) * (const void *const *)b;

	return x < y ? -1 : x > y;
}

static void ns_sort(struct nodeset *s)
{
	size_t i, k = 0;

	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), ptr_cmp);
	for (i = 0; i < s->n; i++)
		cr_assert(!k || s->v[k - 1] != s->v[i], "node %p twice in one set", s->v[i]);
	for (i = 0; i < s->n; i++)
		s->v[k++] = s->v[i];
}

static bool ns_has(const struct nodeset *s, const void *p)
{
	return s->n && bsearch(&p, s->v, s->n, sizeof(*s->v), ptr_cmp);
}

static void ns_free(struct nodeset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- ranges as a walk meets them -------------------------------------------------- */

struct rv {
	struct ps_model_range *v;
	size_t n, cap;
	size_t limit; /* 0: none; else the walk is stopped (7) when it holds this many */
};

static int rv_add(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct rv *r = arg;

	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 256;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		cr_assert_not_null(r->v);
	}
	r->v[r->n++] = (struct ps_model_range){start, end, pol};
	return r->limit && r->n >= r->limit ? 7 : 0;
}

static void rv_reset(struct rv *r, size_t limit)
{
	r->n = 0;
	r->limit = limit;
}

static void rv_free(struct rv *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

static void rv_expect_eq(const struct rv *a, const struct rv *b, const char *what)
{
	size_t i;

	cr_assert_eq(a->n, b->n, "%s: %zu ranges, expected %zu", what, a->n, b->n);
	for (i = 0; i < a->n; i++)
		cr_assert(a->v[i].start == b->v[i].start && a->v[i].end == b->v[i].end &&
						a->v[i].pol == b->v[i].pol,
				"%s: range %zu is [%" PRIu64 ", %" PRIu64 ") %p, expected [%" PRIu64
				", %" PRIu64 ") %p",
				what, i, a->v[i].start, a->v[i].end, (void *)a->v[i].pol,
				b->v[i].start, b->v[i].end, (void *)b->v[i].pol);
}

/* ---- the harness: an index and an in-place range tree given the same sets ---------- */

#define NBIND 8 /* BIND 0..5, two INTERLEAVEs (hint: the policy) */
#define POL_DEFAULT NBIND
#define NPOLS (NBIND + 1)

struct op {
	uint64_t s, e;
	struct ps_policy *pol;
};

struct hx {
	struct ps_ix_root root;
	struct ps_rtree tree;
	ptrdiff_t bytes; /* the index's bytes as its transactions counted them */
	struct ps_policy *pol[NPOLS];
	uint64_t seed;
	uint64_t space; /* most ranges lie in [0, space) */
	uint64_t avg;	/* and a small set is 1 .. 2 avg long */
	bool deep;	/* node-level checks of every update */
	struct rv a, b; /* scratch */
	/* What the updates did. */
	long updates, slot_pubs, root_pubs, noop_copies, joins_seen;
	int max_height;
};

static struct ps_policy *interleave(int n0, int n1)
{
	unsigned long mask = (1UL << n0) | (1UL << n1);
	struct ps_policy *p = ps_policy_create(PS_MPOL_INTERLEAVE, 0, &mask, 64);

	cr_assert_not_null(p);
	return p;
}

static void hx_init(struct hx *h, uint64_t seed)
{
	int i;

	memset(h, 0, sizeof(*h));
	psi_rangetree_init(&h->tree);
	for (i = 0; i < 6; i++)
		h->pol[i] = ps_test_bind(i);
	h->pol[6] = interleave(0, 1);
	h->pol[7] = interleave(2, 5);
	h->pol[POL_DEFAULT] = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	cr_assert_not_null(h->pol[POL_DEFAULT]);
	h->seed = seed | 1;
	h->space = 1024;
	h->avg = 8;
	h->deep = true;
}

static void hx_fini(struct hx *h)
{
	struct psi_range_list removed = {NULL, 0, NULL};
	int i;

	psi_ix_clear(&h->root);
	cr_assert_null(h->root.node);
	psi_rangetree_clear(&h->tree, &removed);
	psi_range_list_free(&removed);
	for (i = 0; i < NPOLS; i++) {
		cr_assert_eq(ps_policy_refcount(h->pol[i]), 1, "policy %d: references left", i);
		ps_policy_put(h->pol[i]);
	}
	rv_free(&h->a);
	rv_free(&h->b);
}

static uint64_t rnd(struct hx *h)
{
	return ps_test_rand(&h->seed);
}

static void tree_apply(struct hx *h, const struct op *o)
{
	struct psi_range_list spares = {NULL, 0, NULL}, removed = {NULL, 0, NULL};

	cr_assert_eq(psi_range_list_fill(&spares, PSI_RANGETREE_SET_MAX_NEW), 0);
	psi_rangetree_set(&h->tree, o->s, o->e, o->pol, &spares, &removed);
	psi_range_list_free(&spares);
	psi_range_list_free(&removed);
}

/* A removal that meets no range: the index is to stay as it is. */
static bool is_noop(struct hx *h, const struct op *o)
{
	struct ps_range *r;

	if (o->pol && o->pol->mode != PS_MPOL_DEFAULT)
		return false;
	r = psi_rangetree_next(&h->tree, o->s);
	return !r || r->start >= o->e;
}

static void ix_walk(const struct ps_ix_node *n, struct rv *r)
{
	rv_reset(r, 0);
	cr_assert_eq(psi_ix_foreach_range(n, 0, UINT64_MAX, rv_add, r), 0);
}

static void tree_walk(struct hx *h, struct rv *r)
{
	rv_reset(r, 0);
	cr_assert_eq(psi_rangetree_foreach(&h->tree, rv_add, r), 0);
}

static const struct ps_ix_inner *as_inner(const struct ps_ix_node *h)
{
	return (const struct ps_ix_inner *)(const void *)h;
}

/* The inner node of the set @ns that holds the slot @slot, or NULL. */
static const struct ps_ix_inner *slot_owner(
		const struct nodeset *ns, struct ps_ix_node *const *slot, int *ci)
{
	size_t i;
	int c;

	for (i = 0; i < ns->n; i++) {
		const struct ps_ix_node *h = ns->v[i];

		if (!h->height)
			continue;
		for (c = 0; c < h->n; c++)
			if (&as_inner(h)->child[c] == slot) {
				*ci = c;
				return as_inner(h);
			}
	}
	return NULL;
}

/*
 * The publication replaced @old by @val (not at the root's request): had
 * @val's node the same pivots and at most one child other than @old's, the
 * update could have published one level lower.
 */
static void expect_lowest(struct hx *h, const struct ps_ix_node *old, const struct ps_ix_node *val)
{
	const struct ps_ix_inner *a = as_inner(old), *b = as_inner(val);
	int i, differ = 0;

	if (!old || !val || !old->height || !val->height || old->n != val->n)
		return;
	if (memcmp(a->piv, b->piv, sizeof(a->piv)))
		return;
	for (i = 0; i < old->n; i++)
		differ += a->child[i] != b->child[i];
	cr_assert_gt(differ, 1,
			"update %ld: a copy of a node with the same pivots and %d child(ren) "
			"changed "
			"was published: the publication was not at the lowest unchanged node",
			h->updates, differ);
}

/*
 * One update of @n sets (at the root when @at_root; n > 1 needs it) on
 * the index and on the tree, published, its retired nodes freed; checked
 * throughout.
 */
static void hx_update(struct hx *h, const struct op *ops, int n, bool at_root)
{
	struct nodeset before = {0}, after = {0}, built = {0}, retired = {0};
	struct ps_ix_node *old_root = h->root.node, *const * slot, *val, *old_val = NULL;
	struct rv snap = {0};
	struct psi_ix_tx tx;
	bool noop = true, stored;
	size_t i;
	int k;

	cr_assert(at_root || n == 1);
	h->updates++;
	if (h->deep) {
		ns_collect(&before, old_root);
		ns_sort(&before);
		ix_walk(old_root, &snap);
	}
	psi_ix_begin(&tx, &h->root, at_root);
	for (k = 0; k < n; k++) {
		noop = noop && is_noop(h, &ops[k]);
		cr_assert_eq(psi_ix_set(&tx, ops[k].s, ops[k].e, ops[k].pol), 0);
		tree_apply(h, &ops[k]);
		cr_assert_eq(h->root.node, old_root,
				"update %ld: the root moved before publication", h->updates);
		if (h->deep && (k == n - 1 || n <= 4 || rnd(h) % 4 == 0)) {
			/* The published version as it was; the update's own equal to the tree. */
			ix_walk(old_root, &h->a);
			rv_expect_eq(&h->a, &snap, "published version during an update");
			if (at_root) {
				ix_walk(tx.cur, &h->a);
				tree_walk(h, &h->b);
				rv_expect_eq(&h->a, &h->b, "the update's version against the tree");
			}
		}
	}
	slot = tx.slot;
	val = tx.val;
	if (noop && slot) {
		/* Content stays; a copy for nothing is only counted. */
		h->noop_copies++;
	} else if (noop) {
		cr_assert(tx.nbuilt == 0 && tx.nretired == 0 && tx.bytes == 0,
				"update %ld: a removal over a gap built %zu and retired %zu nodes",
				h->updates, tx.nbuilt, tx.nretired);
	} else {
		cr_assert_not_null(
				slot, "update %ld: a change with nothing to publish", h->updates);
	}
	if (h->deep) {
		for (i = 0; i < tx.nbuilt; i++) {
			const struct ps_ix_node *b = tx.built[i];

			cr_assert(b->wflags & IX_FRESH, "update %ld: a built node not marked fresh",
					h->updates);
			if (!(b->wflags & IX_DEAD))
				ns_add(&built, b);
		}
		ns_sort(&built);
		for (i = 0; i < tx.nretired; i++) {
			uintptr_t e = (uintptr_t)tx.retired[i];

			if (e & IX_SUBTREE)
				ns_collect(&retired, (const struct ps_ix_node *)(e & ~IX_SUBTREE));
			else
				ns_add(&retired, (const void *)e);
		}
		ns_sort(&retired);
		for (i = 0; i < retired.n; i++) {
			cr_assert(ns_has(&before, retired.v[i]),
					"update %ld: retired a node that was not in the index",
					h->updates);
			cr_assert_eq(((const struct ps_ix_node *)retired.v[i])->wflags, 0);
		}
		if (slot && slot != &h->root.node) {
			const struct ps_ix_inner *owner;
			int ci = -1;

			cr_assert(!at_root,
					"update %ld: a publication below the root although asked "
					"for the root",
					h->updates);
			owner = slot_owner(&before, slot, &ci);
			cr_assert_not_null(owner,
					"update %ld: the slot published is in no node of the "
					"index",
					h->updates);
			cr_assert(!ns_has(&retired, owner),
					"update %ld: published into a node it "
					"retired",
					h->updates);
			old_val = *slot;
			cr_assert(ns_has(&retired, old_val),
					"update %ld: the node a slot store "
					"replaces is not retired",
					h->updates);
			cr_assert(ns_has(&built, val),
					"update %ld: a slot store of a node it did not "
					"build",
					h->updates);
			/* Same interval: the new node's ranges lie in the old node's interval. */
			expect_lowest(h, old_val, val);
		} else if (slot && !at_root) {
			expect_lowest(h, old_root, val);
		}
	}
	stored = psi_ix_publish(&tx);
	cr_assert_eq(stored, slot == &h->root.node);
	if (at_root && !noop)
		cr_assert(stored, "update %ld: asked for the root, published below it", h->updates);
	if (stored) {
		cr_assert_eq(h->root.node, val);
		h->root_pubs++;
	} else {
		cr_assert_eq(h->root.node, old_root,
				"update %ld: a publication below the root moved "
				"the root",
				h->updates);
		h->slot_pubs += slot != NULL;
	}
	if (h->deep) {
		ns_collect(&after, h->root.node);
		ns_sort(&after);
		/* The nodes that left are exactly those retired; those that came, built. */
		for (i = 0; i < before.n; i++)
			cr_assert_eq(ns_has(&after, before.v[i]), !ns_has(&retired, before.v[i]),
					"update %ld: a node left the index %s", h->updates,
					ns_has(&after, before.v[i]) ? "but was retired too"
								    : "without being retired");
		for (i = 0; i < after.n; i++)
			cr_assert(ns_has(&before, after.v[i]) || ns_has(&built, after.v[i]),
					"update %ld: a node in the index that it neither held nor "
					"built",
					h->updates);
		for (i = 0; i < built.n; i++)
			cr_assert(ns_has(&after, built.v[i]),
					"update %ld: a node built, not dead, not "
					"published (leaked)",
					h->updates);
		/* A reader of the version replaced at the root still sees it whole. */
		if (stored && old_root) {
			ix_walk(old_root, &h->a);
			rv_expect_eq(&h->a, &snap,
					"the replaced version before its nodes are freed");
		}
	}
	for (i = 0; i < tx.nretired; i++)
		psi_ix_free_retired(tx.retired[i]);
	h->bytes += tx.bytes;
	psi_ix_end(&tx);
	ns_free(&before);
	ns_free(&after);
	ns_free(&built);
	ns_free(&retired);
	rv_free(&snap);
	if (h->root.node && h->root.node->height > h->max_height)
		h->max_height = h->root.node->height;
}

/* ---- what the index answers, against the tree -------------------------------------- */

static void hx_check(struct hx *h)
{
	const char *why = NULL;

	/* The tree is the reference here, checked by its own suites: now and then when large. */
	if (h->tree.count <= 1000 || h->updates % 16 == 0)
		cr_assert_eq(psi_rangetree_check(&h->tree, &why), 0, "update %ld: tree: %s",
				h->updates, why);
	cr_assert_eq(psi_ix_check(&h->root, &h->tree, &why), 0, "update %ld: index: %s", h->updates,
			why);
	cr_assert_eq((ptrdiff_t)psi_ix_bytes(h->root.node), h->bytes,
			"update %ld: index bytes %zu, the updates counted %td", h->updates,
			psi_ix_bytes(h->root.node), h->bytes);
}

static void hx_probe(struct hx *h, uint64_t idx)
{
	struct ps_range *r = psi_rangetree_lookup(&h->tree, idx), *nr;
	const struct ps_ix_leaf *l;
	struct psi_ix_hit hit;
	uint64_t hi = 0;
	bool found;
	int i;

	l = _ps_ix_leaf_of(h->root.node, idx, &hi);
	if (!h->root.node) {
		cr_assert_null(l);
		cr_assert_null(r);
	} else {
		cr_assert_not_null(l);
		cr_assert(idx < hi || hi == UINT64_MAX, "leaf of %" PRIu64 " ends at %" PRIu64, idx,
				hi);
		i = _ps_ix_find_in(l, idx);
		if (!r) {
			cr_assert_eq(i, -1,
					"update %ld: index finds %" PRIu64 " in [%" PRIu64
					", %" PRIu64 "), the tree in no range",
					h->updates, idx, _PS_IX_START(l)[i], _PS_IX_END(l)[i]);
		} else {
			cr_assert_geq(i, 0,
					"update %ld: index misses %" PRIu64 " in [%" PRIu64
					", %" PRIu64 ")",
					h->updates, idx, r->start, r->end);
			cr_assert(_PS_IX_START(l)[i] == r->start && _PS_IX_END(l)[i] == r->end &&
							_PS_IX_POL(l)[i] == r->pol &&
							_PS_IX_HINT(l)[i] == r->node_hint,
					"update %ld: index range of %" PRIu64
					" differs from the tree's",
					h->updates, idx);
			cr_assert_leq(_PS_IX_END(l)[i], hi);
		}
	}
	found = psi_ix_next_from(h->root.node, idx, &hit);
	nr = psi_rangetree_next(&h->tree, idx);
	cr_assert_eq(found, nr != NULL, "update %ld: next(%" PRIu64 "): index %d, tree %d",
			h->updates, idx, found, nr != NULL);
	if (found)
		cr_assert(hit.start == nr->start && hit.end == nr->end && hit.pol == nr->pol,
				"update %ld: next(%" PRIu64 ") is [%" PRIu64 ", %" PRIu64
				"), the tree's [%" PRIu64 ", %" PRIu64 ")",
				h->updates, idx, hit.start, hit.end, nr->start, nr->end);
}

static void hx_window(struct hx *h, uint64_t ws, uint64_t we, size_t limit)
{
	int ra, rb;

	if (ws >= we)
		return;
	rv_reset(&h->a, limit);
	rv_reset(&h->b, limit);
	ra = psi_ix_foreach_range(h->root.node, ws, we, rv_add, &h->a);
	rb = psi_rangetree_foreach_range(&h->tree, ws, we, rv_add, &h->b);
	cr_assert_eq(ra, rb, "update %ld: window [%" PRIu64 ", %" PRIu64 "): returned %d, tree %d",
			h->updates, ws, we, ra, rb);
	rv_expect_eq(&h->a, &h->b, "window");
}

/* Pivots of every inner node (and a leaf's bounds sit there): probe each side. */
static void probe_pivots(struct hx *h, const struct ps_ix_node *n)
{
	int i;

	if (!n || !n->height)
		return;
	for (i = 0; i + 1 < n->n; i++) {
		uint64_t p = as_inner(n)->piv[i];

		hx_probe(h, p);
		hx_probe(h, p - 1);
	}
	for (i = 0; i < n->n; i++)
		probe_pivots(h, as_inner(n)->child[i]);
}

static uint64_t clamp_sub(uint64_t x, uint64_t d)
{
	return x > d ? x - d : 0;
}

static uint64_t clamp_add(uint64_t x, uint64_t d)
{
	return x < UINT64_MAX - d ? x + d : UINT64_MAX;
}

/* After an update of @ops: the index against the tree, around the sets and at random. */
static void hx_verify(struct hx *h, const struct op *ops, int n)
{
	size_t count = h->tree.count;
	int k, i;

	hx_check(h);
	for (k = 0; k < n; k++) {
		uint64_t s = ops[k].s, e = ops[k].e;

		hx_probe(h, clamp_sub(s, 1));
		hx_probe(h, s);
		hx_probe(h, e - 1);
		hx_probe(h, e);
		hx_window(h, clamp_sub(s, rnd(h) % (4 * h->avg)),
				clamp_add(e, rnd(h) % (4 * h->avg)),
				rnd(h) % 3 ? 0 : 1 + rnd(h) % 20);
	}
	for (i = 0; i < 12; i++)
		hx_probe(h, rnd(h) % (h->space + h->avg));
	hx_probe(h, rnd(h));
	hx_probe(h, 0);
	hx_probe(h, UINT64_MAX);
	hx_probe(h, UINT64_MAX - 1);
	{
		uint64_t a = rnd(h) % h->space;

		hx_window(h, a, a + 1 + rnd(h) % (h->space / 4 + 1),
				rnd(h) % 2 ? 0 : 1 + rnd(h) % 50);
	}
	if (count <= 64 || rnd(h) % 64 == 0) {
		/* Whole: every range's edges, every pivot, the whole window. */
		tree_walk(h, &h->b);
		for (i = 0; i < (int)h->b.n; i++) {
			uint64_t s = h->b.v[i].start, e = h->b.v[i].end;

			hx_probe(h, clamp_sub(s, 1));
			hx_probe(h, s);
			hx_probe(h, e - 1);
			hx_probe(h, e);
		}
		probe_pivots(h, h->root.node);
		hx_window(h, 0, UINT64_MAX, 0);
	}
}

/* ---- random sets ---------------------------------------------------------------------- */

static struct ps_policy *rnd_pol(struct hx *h)
{
	uint64_t r = rnd(h) % 100;

	if (r < 12)
		return NULL;
	if (r < 20)
		return h->pol[POL_DEFAULT];
	return h->pol[r % NBIND];
}

/* A span of every kind the store meets; a gap comes back as a removal. */
static struct op rnd_op(struct hx *h, bool grow)
{
	uint64_t r = grow ? rnd(h) % 600 : rnd(h) % 1000, a, len;
	struct op o = {0, 0, rnd_pol(h)};

	if (grow && (!o.pol || o.pol == h->pol[POL_DEFAULT]))
		o.pol = h->pol[rnd(h) % NBIND];
	if (r < 600) {
		/* Small, among the others. */
		a = rnd(h) % h->space;
		len = 1 + rnd(h) % (2 * h->avg);
	} else if (r < 780) {
		/* Across many leaves. */
		a = rnd(h) % h->space;
		len = 1 + rnd(h) % (h->space / 4 + 1);
	} else if (r < 830) {
		/* At the top of the index space, up to UINT64_MAX. */
		a = UINT64_MAX - 1 - rnd(h) % 4096;
		len = 1 + rnd(h) % (UINT64_MAX - a);
	} else if (r < 850) {
		/* From 0. */
		a = 0;
		len = 1 + rnd(h) % (h->space + 1);
	} else if (r < 865) {
		/* To the end. */
		a = rnd(h) % h->space;
		len = UINT64_MAX - a;
	} else if (r < 870) {
		/* Everything. */
		a = 0;
		len = UINT64_MAX;
	} else if (r < 900) {
		/* Anywhere. */
		a = rnd(h) % (UINT64_MAX - 1);
		len = 1 + rnd(h) % (UINT64_MAX - a);
	} else if (r < 950) {
		/* Exactly a range there is (the tree's victim). */
		struct ps_range *x = psi_rangetree_next(&h->tree, rnd(h) % h->space);

		if (!x)
			return rnd_op(h, grow);
		o.s = x->start;
		o.e = x->end;
		return o;
	} else {
		/* A gap, removed: nothing changes. */
		struct ps_range *x = psi_rangetree_next(&h->tree, rnd(h) % h->space), *y;

		if (!x)
			return rnd_op(h, grow);
		y = psi_rangetree_next(&h->tree, x->end);
		o.s = x->end;
		o.e = y ? y->start : clamp_add(x->end, 1 + rnd(h) % 1000);
		if (o.s >= o.e)
			return rnd_op(h, grow);
		if (o.e - o.s > 1 && rnd(h) % 2) {
			o.s += rnd(h) % (o.e - o.s - 1);
			o.e = o.s + 1 + rnd(h) % (o.e - o.s);
		}
		o.pol = rnd(h) % 2 ? NULL : h->pol[POL_DEFAULT];
		return o;
	}
	o.s = a;
	o.e = len > UINT64_MAX - a ? UINT64_MAX : a + len;
	return o;
}

/* Grow to @target ranges with small sets, checking as it goes (in batches when large). */
static void hx_grow(struct hx *h, size_t target)
{
	struct op ops[256];
	int n, k;

	h->space = target * 2 * h->avg + 64;
	while (h->tree.count < target) {
		bool batch = target > 256;

		n = batch ? 1 + (int)(rnd(h) % (target > 1000 ? 256 : 64)) : 1;
		for (k = 0; k < n; k++)
			ops[k] = rnd_op(h, true);
		hx_update(h, ops, n, batch || rnd(h) % 4 == 0);
		hx_verify(h, ops, n);
	}
}

/* @nops random updates: single sets (a quarter at the root) and batches. */
static void hx_churn(struct hx *h, long nops, size_t target)
{
	struct op ops[16];
	long i;

	for (i = 0; i < nops; i++) {
		int n = rnd(h) % 5 ? 1 : 2 + (int)(rnd(h) % 15), k;

		for (k = 0; k < n; k++)
			ops[k] = rnd_op(h, false);
		hx_update(h, ops, n, n > 1 || rnd(h) % 4 == 0);
		hx_verify(h, ops, n);
		if (h->tree.count < target / 2)
			hx_grow(h, target);
	}
}

static void hx_report(struct hx *h, const char *what)
{
	cr_log_info("%s: %ld updates, %ld slot and %ld root publications, %ld copies for a "
		    "removal over a gap, height up to %d, %zu ranges at the end",
			what, h->updates, h->slot_pubs, h->root_pubs, h->noop_copies, h->max_height,
			h->tree.count);
}

/* ---- 1. the differential test ------------------------------------------------------- */

/* From an empty index up to 10^4 ranges and back, every size on the way churned. */
Test(index, differential_against_the_tree, .timeout = 300)
{
	static const size_t sizes[] = {1, 2, 4, 5, 8, 16, 17, 40, 64, 300, 1000, 10000};
	struct hx h;
	size_t i;

	ps_test_alloc_install();
	hx_init(&h, 0x1de5);
	for (i = 0; i < PS_ARRAY_SIZE(sizes); i++) {
		size_t target = sizes[i];

		if (ps_test_scale() < 1 && target > 1000)
			break;
		/* The node-level checks walk the whole index twice per update: up to 10^3. */
		h.deep = target <= 1000;
		hx_grow(&h, target);
		hx_churn(&h, target > 1000 ? ps_test_iters(100) : ps_test_iters(200), target);
	}
	/* Everything out in one removal, then in again from the top of the space. */
	{
		struct op all = {0, UINT64_MAX, NULL};

		h.deep = true;
		hx_update(&h, &all, 1, false);
		hx_verify(&h, &all, 1);
		cr_assert_null(h.root.node);
		cr_assert_eq(h.bytes, 0);
	}
	hx_report(&h, "differential");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * Shapes one at a time: a store filled front to back, back to front, and
 * emptied both ways, one range at a time (splits and joins at every
 * leaf), with the node-level checks after every set.
 */
Test(index, fill_and_empty_in_order, .timeout = 120)
{
	long n = ps_test_scale() < 1 ? 200 : 1000, i;
	int pass;
	struct hx h;

	ps_test_alloc_install();
	hx_init(&h, 77);
	h.space = (uint64_t)n * 4;
	for (pass = 0; pass < 4; pass++) {
		bool up = pass % 2 == 0;

		for (i = 0; i < n; i++) {
			uint64_t k = up ? (uint64_t)i : (uint64_t)(n - 1 - i);
			struct op o = {4 * k + 1, 4 * k + 3, h.pol[k % NBIND]};

			hx_update(&h, &o, 1, pass >= 2);
			hx_verify(&h, &o, 1);
		}
		cr_assert_eq(h.tree.count, (size_t)n);
		for (i = 0; i < n; i++) {
			uint64_t k = up ? (uint64_t)(n - 1 - i) : (uint64_t)i;
			struct op o = {4 * k, 4 * k + 4, i % 2 ? NULL : h.pol[POL_DEFAULT]};

			hx_update(&h, &o, 1, pass >= 2);
			hx_verify(&h, &o, 1);
		}
		cr_assert_null(h.root.node);
	}
	hx_report(&h, "in order");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * Where a single set publishes.  A set inside one leaf that neither
 * splits nor shrinks it below a quarter keeps the leaf's interval: one
 * store of the new leaf into its parent's slot, the root pointer as it
 * was, one node built and one retired.  The same set at the root's
 * request stores the root.
 */
Test(index, single_set_publishes_at_the_lowest_unchanged_node)
{
	struct hx h;
	long i, slots = 0;

	ps_test_alloc_install();
	hx_init(&h, 5);
	h.space = 20000;
	/* 1000 ranges [10 k, 10 k + 5): leaves 3/4 full, three levels. */
	for (i = 0; i < 1000; i++) {
		struct op o = {10 * (uint64_t)i, 10 * (uint64_t)i + 5, h.pol[i % NBIND]};

		hx_update(&h, &o, 1, false);
	}
	hx_verify(&h, NULL, 0);
	cr_assert_geq(h.root.node->height, 2);
	for (i = 0; i < 400; i++) {
		uint64_t k = 1 + (uint64_t)(ps_test_rand(&h.seed) % 998);
		/* A new policy for one range: the same bounds, the leaf's count unchanged. */
		struct op o = {10 * k, 10 * k + 5, h.pol[(k + 1 + (uint64_t)i) % NBIND]};
		struct ps_ix_node *root = h.root.node;
		bool at_root = i % 2;
		struct psi_ix_tx tx;
		uint64_t hi;
		const struct ps_ix_leaf *l = _ps_ix_leaf_of(root, o.s, &hi);

		psi_ix_begin(&tx, &h.root, at_root);
		cr_assert_eq(psi_ix_set(&tx, o.s, o.e, o.pol), 0);
		cr_assert_eq(tx.nbuilt, (size_t)1 + (size_t)at_root * root->height,
				"set %ld: built %zu nodes", i, tx.nbuilt);
		cr_assert_eq(tx.nretired, (size_t)1 + (size_t)at_root * root->height);
		cr_assert_eq(tx.retired[0], (void *)l, "the leaf replaced first");
		if (at_root) {
			cr_assert_eq(tx.slot, &h.root.node);
		} else {
			cr_assert_neq(tx.slot, &h.root.node);
			cr_assert_eq(*tx.slot, (struct ps_ix_node *)l, "the slot is the leaf's");
			cr_assert_eq(tx.val->height, 0);
			slots++;
		}
		psi_ix_abort(&tx);
		psi_ix_end(&tx);
		cr_assert_eq(h.root.node, root);
		hx_update(&h, &o, 1, at_root);
		if (!at_root)
			cr_assert_eq(h.root.node, root, "a slot store moved the root");
		else
			cr_assert_neq(h.root.node, root,
					"a set at the root's request kept the root");
		hx_verify(&h, &o, 1);
	}
	cr_assert_eq(slots, 200);
	hx_report(&h, "lowest node");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/*
 * Batches: many sets in one transaction at the root, overlapping each
 * other (a later set replaces nodes an earlier one built), published once;
 * the version published before stays as it was until then.
 */
Test(index, batches_publish_once_at_the_root, .timeout = 120)
{
	struct hx h;
	long b, nb = ps_test_iters(300);

	ps_test_alloc_install();
	hx_init(&h, 0xba7c);
	hx_grow(&h, 500);
	for (b = 0; b < nb; b++) {
		struct op ops[48];
		int n = 2 + (int)(ps_test_rand(&h.seed) % 47), k;
		uint64_t base = ps_test_rand(&h.seed) % h.space;

		for (k = 0; k < n; k++) {
			if (b % 3 == 0) {
				/* Clustered: each set meets the last ones' leaves. */
				uint64_t a = base + ps_test_rand(&h.seed) % 200;

				ops[k] = (struct op){
						a, a + 1 + ps_test_rand(&h.seed) % 60, rnd_pol(&h)};
			} else {
				ops[k] = rnd_op(&h, false);
			}
		}
		hx_update(&h, ops, n, true);
		hx_verify(&h, ops, n);
		if (h.tree.count < 250)
			hx_grow(&h, 500);
	}
	hx_report(&h, "batches");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/* ---- 2. allocation failure at every allocation of an update ----------------------- */

/*
 * Update @ops[0, n) failing its k-th allocation for k = 0, 1, ... until it
 * succeeds: after each -ENOMEM and psi_ix_abort() the index is the one it
 * was (the same root, the same nodes and ranges, the bytes), and no block
 * more is live.  Then the update itself.  Return: the failures injected.
 */
static long fail_each(struct hx *h, const struct op *ops, int n, bool at_root)
{
	struct ps_ix_node *root = h->root.node;
	size_t bytes = psi_ix_bytes(root);
	struct nodeset before = {0}, now = {0};
	struct rv snap = {0};
	long k, failed = 0;
	size_t i;

	ns_collect(&before, root);
	ns_sort(&before);
	ix_walk(root, &snap);
	for (k = 0;; k++) {
		long live = ps_test_alloc_live();
		struct psi_ix_tx tx;
		bool reached;
		int ret = 0, j;

		psi_ix_begin(&tx, &h->root, at_root);
		ps_test_alloc_fail_once(k);
		for (j = 0; j < n && !ret; j++)
			ret = psi_ix_set(&tx, ops[j].s, ops[j].e, ops[j].pol);
		reached = ps_test_alloc_disarm();
		if (!ret)
			cr_assert(!reached, "failure %ld injected, yet the update succeeded", k);
		else
			cr_assert(ret == -ENOMEM && reached, "failure %ld: %d", k, ret);
		/* Thrown away (also when it succeeded: an unpublished update may be). */
		psi_ix_abort(&tx);
		psi_ix_end(&tx);
		cr_assert_eq(h->root.node, root, "failure %ld: the root moved", k);
		cr_assert_eq(psi_ix_bytes(root), bytes, "failure %ld: the index's bytes changed",
				k);
		cr_assert_eq(ps_test_alloc_live(), live, "failure %ld: %ld blocks leaked", k,
				ps_test_alloc_live() - live);
		ns_collect(&now, root);
		ns_sort(&now);
		cr_assert_eq(now.n, before.n);
		for (i = 0; i < now.n; i++) {
			cr_assert_eq(now.v[i], before.v[i],
					"failure %ld: another node in the index", k);
			cr_assert_eq(((const struct ps_ix_node *)now.v[i])->wflags, 0,
					"failure %ld: a published node's flags written", k);
		}
		now.n = 0;
		ix_walk(root, &h->a);
		rv_expect_eq(&h->a, &snap, "after an abort");
		hx_check(h);
		if (!ret)
			break;
		failed++;
	}
	ns_free(&before);
	ns_free(&now);
	rv_free(&snap);
	hx_update(h, ops, n, at_root);
	hx_verify(h, ops, n);
	return failed;
}

Test(index, allocation_failure_at_every_step, .timeout = 180)
{
	static const size_t sizes[] = {0, 1, 4, 5, 16, 17, 64, 300, 2000};
	long injected = 0, updates = 0;
	struct hx h;
	size_t i;

	ps_test_alloc_install();
	hx_init(&h, 0xfa11);
	for (i = 0; i < PS_ARRAY_SIZE(sizes); i++) {
		long u, nu = sizes[i] >= 2000 ? ps_test_iters(40) : ps_test_iters(120);

		if (sizes[i])
			hx_grow(&h, sizes[i]);
		h.deep = sizes[i] <= 300;
		for (u = 0; u < nu; u++) {
			struct op ops[8];
			int n = u % 4 == 3 ? 2 + (int)(ps_test_rand(&h.seed) % 7) : 1, k;

			for (k = 0; k < n; k++)
				ops[k] = rnd_op(&h, false);
			injected += fail_each(&h, ops, n, n > 1 || u % 4 == 1);
			updates++;
			if (sizes[i] && h.tree.count < sizes[i] / 2)
				hx_grow(&h, sizes[i]);
		}
	}
	cr_log_info("allocation failure: %ld updates, %ld failures injected", updates, injected);
	cr_assert_gt(injected, updates);
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/* ---- 3. through the store API, at scale ------------------------------------------------ */

/* Eight nodes, each at 20 from the others: a BIND policy places on its own node. */
static void eight_nodes(void)
{
	unsigned char dist[64];
	int i, j;

	for (i = 0; i < 8; i++)
		for (j = 0; j < 8; j++)
			dist[i * 8 + j] = i == j ? 10 : 20;
	cr_assert_eq(ps_numa_set_topology(8, dist, NULL), 0);
}

struct pair {
	struct ps_store *s, *ref; /* the store under test, and SPIN */
	struct ps_policy *pol[NPOLS];
	uint64_t seed, space;
	struct rv a, b;
};

static void pair_init(struct pair *p, enum ps_sync sync, uint64_t seed)
{
	int i;

	memset(p, 0, sizeof(*p));
	p->s = shim_create(sync); /* a store the inline read side may read */
	p->ref = ps_store_create(PS_SYNC_SPIN);
	cr_assert(p->s && p->ref);
	for (i = 0; i < 6; i++)
		p->pol[i] = ps_test_bind(i + 1);
	p->pol[6] = interleave(0, 3);
	p->pol[7] = interleave(4, 7);
	p->pol[POL_DEFAULT] = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	p->seed = seed | 1;
}

static void pair_fini(struct pair *p)
{
	int i;

	ps_store_destroy(p->s);
	ps_store_destroy(p->ref);
	for (i = 0; i < NPOLS; i++) {
		cr_assert_eq(ps_policy_refcount(p->pol[i]), 1, "policy %d: references left", i);
		ps_policy_put(p->pol[i]);
	}
	rv_free(&p->a);
	rv_free(&p->b);
}

static void pair_set_many(struct pair *p, const struct ps_set_op *ops, size_t n)
{
	if (n == 1 && ps_test_rand(&p->seed) % 2) {
		cr_assert_eq(ps_store_set(p->s, ops[0].start, ops[0].end, ops[0].pol), 0);
		cr_assert_eq(ps_store_set(p->ref, ops[0].start, ops[0].end, ops[0].pol), 0);
		return;
	}
	cr_assert_eq(ps_store_set_many(p->s, ops, n), 0);
	cr_assert_eq(ps_store_set_many(p->ref, ops, n), 0);
}

static void pair_window(struct pair *p, uint64_t ws, uint64_t we, size_t limit)
{
	int ra, rb;

	rv_reset(&p->a, limit);
	rv_reset(&p->b, limit);
	ra = ps_store_foreach_range(p->s, ws, we, rv_add, &p->a);
	rb = ps_store_foreach_range(p->ref, ws, we, rv_add, &p->b);
	cr_assert_eq(ra, rb, "window [%" PRIu64 ", %" PRIu64 "): %d, SPIN %d", ws, we, ra, rb);
	rv_expect_eq(&p->a, &p->b, "window against SPIN");
}

static void pair_probe(struct pair *p, uint64_t idx)
{
	struct ps_policy *x = ps_store_lookup(p->s, idx), *y = ps_store_lookup(p->ref, idx);
	uint64_t s1 = 0, e1 = 0, s2 = 0, e2 = 0;
	struct ps_policy *p1 = NULL, *p2 = NULL;
	int local = (int)(idx % 8), r1, r2;

	cr_assert_eq(x, y, "lookup(%" PRIu64 ") differs from SPIN's", idx);
	ps_policy_put(x);
	ps_policy_put(y); /* compared by address below: the test holds each policy */
	cr_assert_eq(ps_store_lookup_node(p->s, idx, local),
			ps_store_lookup_node(p->ref, idx, local),
			"lookup_node(%" PRIu64 ") differs from SPIN's", idx);
	/* The inline read side (POLSTORE_INLINE), online for RCU_QSBR: the index walked inline. */
	if (ps_store_sync_kind(p->s) == PS_SYNC_RCU_QSBR)
		cr_assert_eq(ps_qsbr_thread_online(), 0);
	x = shim_lookup(p->s, idx);
	cr_assert_eq(x, y, "inline lookup(%" PRIu64 ") differs from SPIN's", idx);
	ps_policy_put(x);
	shim_read_lock(p->s);
	cr_assert_eq(shim_lookup_borrow(p->s, idx), y, "inline borrowed lookup(%" PRIu64 ")", idx);
	shim_read_unlock(p->s);
	cr_assert_eq(shim_lookup_node(p->s, idx, local), ps_store_lookup_node(p->ref, idx, local),
			"inline lookup_node(%" PRIu64 ") differs from SPIN's", idx);
	if (ps_store_sync_kind(p->s) == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	r1 = ps_store_next(p->s, idx, &s1, &e1, &p1);
	r2 = ps_store_next(p->ref, idx, &s2, &e2, &p2);
	cr_assert_eq(r1, r2, "next(%" PRIu64 "): %d, SPIN %d", idx, r1, r2);
	cr_assert(s1 == s2 && e1 == e2 && p1 == p2,
			"next(%" PRIu64 ") is [%" PRIu64 ", %" PRIu64 "), SPIN's [%" PRIu64
			", %" PRIu64 ")",
			idx, s1, e1, s2, e2);
	if (!r1) {
		ps_policy_put(p1);
		ps_policy_put(p2);
	}
}

static void pair_expect_same(struct pair *p, const char *when)
{
	const char *why = NULL;

	cr_assert_eq(ps_store_check(p->s, &why), 0, "%s: %s", when, why);
	cr_assert_eq(ps_store_count(p->s), ps_store_count(p->ref), "%s: count", when);
	rv_reset(&p->a, 0);
	rv_reset(&p->b, 0);
	cr_assert_eq(ps_store_foreach(p->s, rv_add, &p->a), 0);
	cr_assert_eq(ps_store_foreach(p->ref, rv_add, &p->b), 0);
	rv_expect_eq(&p->a, &p->b, when);
}

static struct ps_policy *pair_pol(struct pair *p)
{
	uint64_t r = ps_test_rand(&p->seed) % 100;

	return r < 10 ? NULL : r < 16 ? p->pol[POL_DEFAULT] : p->pol[r % NBIND];
}

/*
 * 10^5 ranges built in one batch, then sets of every size (spans across
 * hundreds of ranges, batches, removals, spans to UINT64_MAX at the end):
 * the store's answers, the library's and the inline read side's, are
 * SPIN's after each.
 */
SYNCS_TEST(rcu_syncs, index, store_at_scale_answers_as_spin, .timeout = 300)
{
	long nranges = ps_test_scale() < 1 ? 5000 : 100000, u, nu = ps_test_iters(150), i;
#ifdef POLSTORE_DEBUG_CHECKS
	/* Each set checks both stores whole: fewer, larger updates. */
	nu = ps_test_scale() < 1 ? 10 : 16;
#endif
	struct ps_set_op *ops = calloc((size_t)nranges, sizeof(*ops));
	struct pair p;

	cr_assert_not_null(ops);
	eight_nodes();
	pair_init(&p, *sync, 0x5ca1e + (uint64_t)*sync);
	p.space = (uint64_t)nranges * 10;
	for (i = 0; i < nranges; i++) {
		uint64_t len = 1 + ps_test_rand(&p.seed) % 9;

		ops[i] = (struct ps_set_op){(uint64_t)i * 10, (uint64_t)i * 10 + len,
				p.pol[ps_test_rand(&p.seed) % NBIND]};
	}
	pair_set_many(&p, ops, (size_t)nranges);
	pair_expect_same(&p, "built");
	cr_assert_eq(ps_store_count(p.s), (size_t)nranges);
	for (u = 0; u < nu; u++) {
		uint64_t r = ps_test_rand(&p.seed) % 100, a = ps_test_rand(&p.seed) % p.space;
		size_t n = 1, k;

		if (r < 20) {
			/* Small. */
			ops[0] = (struct ps_set_op){
					a, a + 1 + ps_test_rand(&p.seed) % 20, pair_pol(&p)};
		} else if (r < 45) {
			/* Across 100 to 600 ranges. */
			ops[0] = (struct ps_set_op){
					a, a + 1000 + ps_test_rand(&p.seed) % 5000, pair_pol(&p)};
		} else if (r < 95) {
			/* A batch, its sets here and there, some across many ranges. */
			n = 2 + ps_test_rand(&p.seed) % 30;
			for (k = 0; k < n; k++) {
				uint64_t b = ps_test_rand(&p.seed) % p.space;
				uint64_t len = ps_test_rand(&p.seed) % 4
							       ? 1 + ps_test_rand(&p.seed) % 30
							       : 1 + ps_test_rand(&p.seed) % 3000;

				ops[k] = (struct ps_set_op){b, b + len, pair_pol(&p)};
			}
		} else {
			/* At the top of the index space. */
			a = UINT64_MAX - 1 - ps_test_rand(&p.seed) % 100000;
			ops[0] = (struct ps_set_op){a,
					UINT64_MAX - ps_test_rand(&p.seed) % (UINT64_MAX - a),
					pair_pol(&p)};
		}
		pair_set_many(&p, ops, n);
		for (k = 0; k < n; k++) {
			pair_probe(&p, ops[k].start);
			pair_probe(&p, ops[k].end);
			pair_probe(&p, ops[k].start ? ops[k].start - 1 : 0);
			pair_probe(&p, ops[k].end - 1);
		}
		for (i = 0; i < 64; i++)
			pair_probe(&p, ps_test_rand(&p.seed) % (p.space + 100));
		pair_probe(&p, UINT64_MAX);
		pair_probe(&p, UINT64_MAX - 1);
		pair_window(&p, a > 500 ? a - 500 : 0, a + 1 + ps_test_rand(&p.seed) % 8000,
				u % 3 ? 0 : 1 + ps_test_rand(&p.seed) % 100);
		if (u % 16 == 15)
			pair_expect_same(&p, "after sets");
	}
	/*
	 * The tail of the space and the start, whole (a few thousand ranges:
	 * what a set retires is released slot by slot).
	 */
	ops[0] = (struct ps_set_op){p.space - p.space / 32, UINT64_MAX, p.pol[2]};
	ops[1] = (struct ps_set_op){0, p.space / 32, NULL};
	ops[2] = (struct ps_set_op){p.space / 32 + 5, p.space / 32 + 7, p.pol[3]};
	pair_set_many(&p, ops, 1);
	pair_expect_same(&p, "to UINT64_MAX");
	pair_set_many(&p, ops + 1, 2);
	pair_expect_same(&p, "from 0");
	for (i = 0; i < 200; i++)
		pair_probe(&p, ps_test_rand(&p.seed) % (p.space + 100));
	pair_window(&p, 0, UINT64_MAX, 0);
	pair_fini(&p);
	free(ops);
	ps_numa_set_topology(0, NULL, NULL);
}

/* ---- memory in proportion ----------------------------------------------------------------- */

/* @n ranges [10 k, 10 k + 5) into @s, in batches of 100, ascending or in a random order. */
static void fill(struct ps_store *s, struct ps_policy *pol, long n, bool random_order)
{
	long *order = malloc((size_t)n * sizeof(*order)), i;
	struct ps_set_op ops[100];
	uint64_t seed = 42;
	int k = 0;

	cr_assert_not_null(order);
	for (i = 0; i < n; i++)
		order[i] = i;
	for (i = n - 1; random_order && i > 0; i--) {
		long j = (long)(ps_test_rand(&seed) % (uint64_t)(i + 1)), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (i = 0; i < n; i++) {
		ops[k++] = (struct ps_set_op){
				10 * (uint64_t)order[i], 10 * (uint64_t)order[i] + 5, pol};
		if (k == 100 || i == n - 1) {
			cr_assert_eq(ps_store_set_many(s, ops, (size_t)k), 0);
			k = 0;
		}
	}
	free(order);
	ps_store_synchronize(s);
}

enum fill_how { FILL_IN_ORDER, FILL_RANDOM, FILL_SINGLE };

/*
 * ps_store_memory() of a @sync store of @n ranges [10 k, 10 k + 5) against
 * a SPIN store's, filled @how: ascending or in a random order by batches of
 * 100, or one set at a time in a scattered order (slot stores and splits;
 * 2000 ranges at most where every set checks the store).  Return: the
 * ratio (printed with the figures).
 */
static double memory_ratio(enum ps_sync sync, long n, enum fill_how how)
{
	static const char *const hows[] = {"in order", "random order", "single sets"};
	struct ps_store *s = ps_store_create(sync), *ref = ps_store_create(PS_SYNC_SPIN);
	struct ps_policy *pol = ps_test_bind(1);
	size_t ms, mr, ix;
	double ratio;
	long i;

	cr_assert(s && ref);
	if (how == FILL_SINGLE) {
#ifdef POLSTORE_DEBUG_CHECKS
		n = n > 2000 ? 2000 : n;
#endif
		for (i = 0; i < n; i++) {
			uint64_t k = (uint64_t)((i * 7919) % n);

			cr_assert_eq(ps_store_set(s, 10 * k, 10 * k + 5, pol), 0);
			cr_assert_eq(ps_store_set(ref, 10 * k, 10 * k + 5, pol), 0);
		}
		ps_store_synchronize(s);
	} else {
		fill(s, pol, n, how == FILL_RANDOM);
		fill(ref, pol, n, how == FILL_RANDOM);
	}
	cr_assert_eq(ps_store_count(s), (size_t)n);
	mr = ps_store_memory(s);
	ms = ps_store_memory(ref);
	ix = ps_test_index_bytes(s);
	ratio = (double)mr / (double)ms;
	cr_log_info("%s, %ld ranges (%s): %zu bytes, SPIN %zu, %.2fx; index %zu bytes (%.1f per "
		    "range)",
			ps_sync_name(sync), n, hows[how], mr, ms, ratio, ix,
			(double)ix / (double)n);
	ps_store_destroy(s);
	ps_store_destroy(ref);
	ps_policy_put(pol);
	return ratio;
}

/* A 4-range store within 2x SPIN's bytes, however filled; 10^4 ranges in order within 1.7x. */
SYNCS_TEST(rcu_syncs, index, memory_in_proportion_to_spin, .timeout = 120)
{
	int how;

	for (how = FILL_IN_ORDER; how <= FILL_SINGLE; how++)
		cr_expect_leq(memory_ratio(*sync, 4, how), 2.0,
				"4 ranges: more than 2x SPIN's bytes");
	cr_expect_leq(memory_ratio(*sync, ps_test_scale() < 1 ? 2000 : 10000, FILL_IN_ORDER), 1.7,
			"10^4 ranges in order: more than 1.7x SPIN's bytes");
}

/* 10^4 ranges set in a random order, by batches and one at a time: within 1.7x SPIN's bytes. */
SYNCS_TEST(rcu_syncs, index, memory_after_scattered_sets_in_proportion_to_spin, .timeout = 120)
{
	long n = ps_test_scale() < 1 ? 2000 : 10000;

	cr_expect_leq(memory_ratio(*sync, n, FILL_RANDOM), 1.7,
			"10^4 ranges in a random order: more than 1.7x SPIN's bytes");
	cr_expect_leq(memory_ratio(*sync, n, FILL_SINGLE), 1.7,
			"10^4 ranges one set at a time: more than 1.7x SPIN's bytes");
}

/* ---- 4. readers beside a flat-out writer --------------------------------------------------- */

/*
 * The writer turns the store from a fixed configuration into that one with
 * some spans changed (one set across up to a quarter of the ranges, or a
 * batch of disjoint spans) and back (a batch), flat out; readers look up,
 * ask for next() and walk windows, each answer checked against the
 * versions published while it ran (testutil_load.c).
 */
SYNCS_TEST(rcu_syncs, index, readers_beside_a_flat_out_writer, .timeout = 120)
{
	struct ps_test_index_load l = {
			.sync = *sync,
			.readers = 2,
			.ranges = ps_test_scale() < 1 ? 300 : 2000,
			.run = {.iters = LONG_MAX,
					.min_iters = 200,
					.duration_ns = ps_test_scale() < 1 ? 300000000ull
									   : 1500000000ull,
					.seed = 0x1dea + (uint64_t)*sync},
	};
	int ret;

	ret = ps_test_index_run(&l);
	cr_log_info("%s: %ld updates, %ld lookups, %ld nexts, %ld windows, %ld unchecked",
			ps_sync_name(*sync), l.updates, l.lookups, l.nexts, l.windows, l.unchecked);
	cr_assert_eq(ret, 0, "%s: %s", ps_sync_name(*sync), l.run.why);
	cr_assert_gt(l.lookups + l.nexts + l.windows, 100);
}

/* The same with the inline read side (POLSTORE_INLINE), RCU_QSBR readers online. */
SYNCS_TEST(rcu_syncs, index, inline_readers_beside_a_flat_out_writer, .timeout = 120)
{
	struct ps_test_index_load l = {
			.sync = *sync,
			.readers = 2,
			.ranges = ps_test_scale() < 1 ? 300 : 2000,
			.qsbr_online = true,
			.create = shim_create,
			.lookup = shim_lookup,
			.lookup_node = shim_lookup_node,
			.run = {.iters = LONG_MAX,
					.min_iters = 200,
					.duration_ns = ps_test_scale() < 1 ? 300000000ull
									   : 1000000000ull,
					.seed = 0x1d1e + (uint64_t)*sync},
	};
	int ret;

	ret = ps_test_index_run(&l);
	cr_log_info("%s inline: %ld updates, %ld lookups, %ld nexts, %ld windows, %ld unchecked",
			ps_sync_name(*sync), l.updates, l.lookups, l.nexts, l.windows, l.unchecked);
	cr_assert_eq(ret, 0, "%s: %s", ps_sync_name(*sync), l.run.why);
	cr_assert_gt(l.lookups + l.nexts + l.windows, 100);
}

/*
 * A removal over a gap that holds a pivot (the first range of a leaf
 * removed, so that its interval begins before its first range): nothing
 * changes, so nothing is built, retired or published.
 */
Test(index, removal_over_a_gap_across_a_pivot_changes_nothing)
{
	struct hx h;
	long i, tried = 0;
	size_t built, retired;
	bool published;

	ps_test_alloc_install();
	hx_init(&h, 3);
	h.space = 4000;
	for (i = 0; i < 200; i++) {
		struct op o = {10 * (uint64_t)i, 10 * (uint64_t)i + 5, h.pol[i % NBIND]};

		hx_update(&h, &o, 1, false);
	}
	/* Every leaf's first range but the first leaf's out: each pivot then lies in a gap. */
	cr_assert_gt(h.root.node->height, 0);
	for (i = 1; i < h.root.node->n; i++) {
		uint64_t p = as_inner(h.root.node)->piv[i - 1];
		struct op o = {p, p + 5, NULL};

		cr_assert_eq(p % 10, 0);
		hx_update(&h, &o, 1, false);
		hx_verify(&h, &o, 1);
	}
	for (i = 1; i < h.root.node->n; i++) {
		uint64_t p = as_inner(h.root.node)->piv[i - 1];
		struct ps_range *before = NULL, *after = psi_rangetree_next(&h.tree, p - 30);
		struct psi_ix_tx tx;

		while (after && after->end <= p) {
			before = after;
			after = psi_rangetree_next(&h.tree, after->end);
		}
		if (!before || !after || after->start <= p)
			continue;
		tried++;
		psi_ix_begin(&tx, &h.root, false);
		cr_assert_eq(psi_ix_set(&tx, before->end, after->start, NULL), 0);
		built = tx.nbuilt;
		retired = tx.nretired;
		published = tx.slot != NULL;
		psi_ix_abort(&tx);
		psi_ix_end(&tx);
		cr_expect(!built && !retired && !published,
				"removing the gap [%" PRIu64 ", %" PRIu64
				") across the pivot %" PRIu64 " built %zu nodes and retired %zu",
				before->end, after->start, p, built, retired);
	}
	cr_assert_gt(tried, 0);
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}
