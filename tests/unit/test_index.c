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
 *  5. Occupancy: removals across leaves (munmap() of most of each
 *     mapping) leave every node below the root at least a quarter full,
 *     and an index of about the bytes and depth of one filled anew;
 *     psi_ix_check() fails a node under its quarter.
 */
#include "index_test.h"

/* ---- a sorted set of node pointers ---------------------------------------------- */

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
void ns_collect(struct nodeset *s, const struct ps_ix_node *h)
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

void ns_sort(struct nodeset *s)
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

void ns_free(struct nodeset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- ranges as a walk meets them -------------------------------------------------- */

int rv_add(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
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

void rv_reset(struct rv *r, size_t limit)
{
	r->n = 0;
	r->limit = limit;
}

void rv_free(struct rv *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

void rv_expect_eq(const struct rv *a, const struct rv *b, const char *what)
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

struct ps_policy *interleave(int n0, int n1)
{
	unsigned long mask = (1UL << n0) | (1UL << n1);
	struct ps_policy *p = ps_policy_create(PS_MPOL_INTERLEAVE, 0, &mask, 64);

	cr_assert_not_null(p);
	return p;
}

void hx_init(struct hx *h, uint64_t seed)
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

void hx_fini(struct hx *h)
{
	struct psi_range_list removed = {NULL, 0, NULL};
	int i;

	psi_ix_clear(&h->root, h->pool);
	cr_assert_null(h->root.node);
	psi_ix_pool_destroy(h->pool);
	h->pool = NULL;
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

void ix_walk(const struct ps_ix_node *n, struct rv *r)
{
	rv_reset(r, 0);
	cr_assert_eq(psi_ix_foreach_range(n, 0, UINT64_MAX, rv_add, r), 0);
}

static void tree_walk(struct hx *h, struct rv *r)
{
	rv_reset(r, 0);
	cr_assert_eq(psi_rangetree_foreach(&h->tree, rv_add, r), 0);
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
void hx_update(struct hx *h, const struct op *ops, int n, bool at_root)
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
	psi_ix_begin(&tx, &h->root, h->pool, at_root);
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
		cr_assert(slot || tx.inplace, "update %ld: a change with nothing to publish",
				h->updates);
	}
	if (tx.inplace) {
		/* A new policy for one range, stored into its published leaf: nothing built. */
		cr_assert(!at_root && n == 1 && !slot,
				"update %ld: a policy stored in place in a batch or at the root's request",
				h->updates);
		cr_assert(tx.nbuilt == 0 && tx.nretired == 0 && tx.bytes == 0,
				"update %ld: a policy stored in place built %zu and retired %zu nodes",
				h->updates, tx.nbuilt, tx.nretired);
		cr_assert(_PS_IX_START(tx.inplace)[tx.inplace_at] == ops[0].s &&
						_PS_IX_END(tx.inplace)[tx.inplace_at] == ops[0].e,
				"update %ld: a policy stored in place into another range", h->updates);
		h->inplace++;
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
	psi_ix_free_retired(h->pool, tx.retired, tx.nretired);
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

void hx_check(struct hx *h)
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
void hx_verify(struct hx *h, const struct op *ops, int n)
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

struct ps_policy *rnd_pol(struct hx *h)
{
	uint64_t r = rnd(h) % 100;

	if (r < 12)
		return NULL;
	if (r < 20)
		return h->pol[POL_DEFAULT];
	return h->pol[r % NBIND];
}

/* A span of every kind the store meets; a gap comes back as a removal. */
struct op rnd_op(struct hx *h, bool grow)
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
void hx_grow(struct hx *h, size_t target)
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
void hx_churn(struct hx *h, long nops, size_t target)
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

void hx_report(struct hx *h, const char *what)
{
	cr_log_info("%s: %ld updates, %ld slot and %ld root publications, %ld policies stored "
		    "in place, %ld copies for a removal over a gap, height up to %d, %zu ranges "
		    "at the end",
			what, h->updates, h->slot_pubs, h->root_pubs, h->inplace, h->noop_copies,
			h->max_height, h->tree.count);
}
