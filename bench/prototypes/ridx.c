// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * ridx: prototypes of a read-side index for the RCU stores, measured
 * beside the red-black walk they would replace.  One program, one process
 * per size; README.md in this folder gives the commands and the figures.
 *
 * The ranges are laid out as the churn scenario lays them out
 * (docs/peers.md): N ranges over 2N slots of 16 pages, each a random
 * sub-range of its slot (at most 4 pages cut from either end), the N slots
 * chosen at random and inserted in random order.  Slot s's values are the
 * two policies of colour s % 64, each of one node (colour % 64), so a node
 * lookup's answer tells the slot's colour and every structure can be
 * checked against the model and against the red-black tree.
 *
 * Structures, each built from the same sets:
 *   rb          the library's range tree (psi_rangetree_set(), in place),
 *               walked as the unsync baseline walks it;
 *   rcu         a PS_SYNC_RCU store: ps_store_lookup_node() (library call)
 *               and _ps_inl_lookup_node() (the POLSTORE_INLINE read side);
 *   rb64        C: the same tree, same shape, copied into 64-byte aligned
 *               nodes (the library's ranges are 64 bytes at a 16-byte
 *               alignment, so about half of them straddle two lines);
 *   sorted      sorted arrays, branchless binary search;
 *   bplus       A: a copy-on-write B+-tree of immutable nodes, maintained
 *               by every set (leaves of A_LEAF ranges, inner nodes of
 *               A_FAN children);
 *   stree       B: an immutable static B+ layout (blocks of 16 starts,
 *               implicit children) plus a copy-on-write delta of recent
 *               sets that readers search first;
 *   eytz        B': the same snapshot with the starts in Eytzinger order.
 *
 * Modes:
 *   ridx lookup N [LOOKUPS]   build, churn, check, then per structure a
 *                             warm-up loop and a measured loop (functions
 *                             m_<structure>, noinline, for callgrind's
 *                             --toggle-collect), then wall-clock medians;
 *   ridx upkeep N [SETS]      the sets of write-cost's kinds (replace,
 *                             split/unsplit, remove/re-add) on rb, rcu and
 *                             bplus, each kind in its own function
 *                             (u_<structure>_<kind>), and the snapshot's
 *                             rebuild (u_stree_rebuild).
 *
 * Build (from the worktree's root, a Release build in build-rel; without
 * -fno-ipa-icf GCC folds the identical loops into one symbol):
 *   cc -O2 -g -fno-ipa-icf -Iinclude -Ibuild-rel/include -Isrc/util -Isrc/tree -Isrc/range \
 *      -Isrc/locks -Isrc/sync -Isrc/store bench/prototypes/ridx.c \
 *      build-rel/src/libpolstore.a -lurcu-memb -lurcu-qsbr -lurcu-common \
 *      -lnuma -lpthread -lm -o build-rel/ridx
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <valgrind/callgrind.h>

#include <polstore/polstore.h>
#include <polstore/static/lookup.h>

#include "rangetree.h"

#define NOINLINE __attribute__((noinline))
#define INLINE static inline __attribute__((always_inline))
#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

#ifndef A_LEAF
#define A_LEAF 16
#endif
#ifndef A_FAN
#define A_FAN 16
#endif
#ifndef D_MAX
#define D_MAX 64 /* the delta's capacity: a fold when it is full */
#endif

static void die(const char *what)
{
	fprintf(stderr, "ridx: %s\n", what);
	exit(1);
}

static void *xalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		die("out of memory");
	return p;
}

static void *xalloc64(size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, (n + 63) & ~(size_t)63))
		die("out of memory");
	return p;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* ---- the model and the layout --------------------------------------------------- */

#define SHIFT 4 /* 16 pages a slot */
#define NCOLOURS 64

static struct ps_policy *pols[NCOLOURS * 2];
static uint64_t nslots, npages;
static uint64_t *m_start, *m_end; /* per slot; m_end == 0: empty */
static uint8_t *m_alt;
static uint32_t *list, *where; /* full slots in list[0, nfull) */
static uint64_t nfull;

static struct ps_policy *slot_pol(uint64_t s, unsigned alt)
{
	return pols[(s % NCOLOURS) * 2 + alt];
}

static void list_swap(uint64_t i, uint64_t j)
{
	uint32_t a = list[i], b = list[j];

	list[i] = b;
	list[j] = a;
	where[b] = (uint32_t)i;
	where[a] = (uint32_t)j;
}

/* ---- A: a copy-on-write B+-tree of immutable nodes ------------------------------ */

/*
 * Every node begins with its header: its count and its height (0: a leaf).
 * A reader loads a child pointer with an acquire load and finds the node's
 * kind in the node, so a root or a slot can change height and kind with
 * one store.
 *
 * Intervals: an inner node's child i holds the ranges wholly inside
 * [piv[i-1], piv[i]) (piv[-1] and piv[n-1] are the node's own bounds), so
 * the child a lookup descends to holds the range containing the key if any
 * range does.  Unused pivots and starts are UINT64_MAX, so that a search
 * over the whole fixed array needs no count.
 */
#ifdef A_COMPACT
/*
 * The compact layout: a 4-byte header, 32-bit keys relative to the node's
 * lower bound, which the reader carries down (the root's is 0; child i's
 * is its parent's plus piv[i-1]), so that an inner node's header and
 * pivots are one cache line and a leaf's header and starts another.  A
 * node's lower bound never changes: child 0 is never dropped (it may be an
 * empty leaf).  A node whose keys span 2^32 - 1 pages or more would take a
 * 64-bit kind (the header's kind; not in the prototype).
 */
#undef A_LEAF
#define A_LEAF 15
#undef A_FAN
#define A_FAN 16
#define A_KEY32
struct a_hdr {
	uint16_t n;
	uint8_t height;
	uint8_t kind;
};
#else
struct a_hdr {
	uint16_t n;
	uint16_t height;
	uint32_t pad;
};
#endif

#ifdef A_COMPACT
typedef uint32_t a_key;
#define A_KEY_NONE UINT32_MAX
struct a_leaf {
	struct a_hdr h;
	uint32_t start[A_LEAF]; /* line 0, with the header */
	uint32_t end[16];	/* line 1 */
	int16_t hint[16];	/* line 2 */
	uint8_t pad[32];
	const struct ps_policy *pol[16]; /* lines 3-4 */
};
#define A_START(l, lo, i) ((lo) + (l)->start[i])
#define A_END(l, lo, i) ((lo) + (l)->end[i])
#elif defined(A_KEY32)
/*
 * Bounds relative to @base (the leaf's lower bound when it was built), in
 * 32 bits: a leaf whose ranges span 2^32 - 1 pages or more would take the
 * 64-bit kind (not in the prototype).  Unused starts are UINT32_MAX.
 */
typedef uint32_t a_key;
#define A_KEY_NONE UINT32_MAX
struct a_leaf {
	struct a_hdr h;
	uint64_t base;
	uint32_t start[A_LEAF];
	uint32_t end[A_LEAF];
	int16_t hint[A_LEAF];
	const struct ps_policy *pol[A_LEAF];
};
#define A_START(l, lo, i) ((l)->base + (l)->start[i])
#define A_END(l, lo, i) ((l)->base + (l)->end[i])
#else
typedef uint64_t a_key;
#define A_KEY_NONE UINT64_MAX
struct a_leaf {
	struct a_hdr h;
	uint64_t start[A_LEAF];
	uint64_t end[A_LEAF];
	int16_t hint[A_LEAF];
	const struct ps_policy *pol[A_LEAF];
};
#define A_START(l, lo, i) ((l)->start[i])
#define A_END(l, lo, i) ((l)->end[i])
#endif

#ifdef A_COMPACT
struct a_inner {
	struct a_hdr h;
	uint32_t piv[A_FAN - 1]; /* relative to the node's lower bound; [0, n - 1) used */
	struct a_hdr *child[A_FAN];
};
/* Pivot @i of @in (lower bound @lo), absolute. */
#define A_PIV(in, lo, i) ((lo) + (in)->piv[i])
#define A_PIV_NONE UINT32_MAX
#else
struct a_inner {
	struct a_hdr h;
	uint64_t piv[A_FAN - 1]; /* [0, n - 1) used */
	struct a_hdr *child[A_FAN];
};
#define A_PIV(in, lo, i) ((in)->piv[i])
#define A_PIV_NONE UINT64_MAX
#endif
_Static_assert(offsetof(struct a_inner, child) <= 128, "pivots in two lines at most");

struct a_index {
	struct a_hdr *root;
	size_t leaves, inners, count;
};

/* Keys in k[0, size - 1) <= @idx, sorted, branchless, size a power of two. */
#define COUNT_LE1(k, size, idx)                                                                    \
	({                                                                                         \
		unsigned _b = 0, _h;                                                               \
		for (_h = (size) / 2; _h; _h /= 2)                                                 \
			_b += (k)[_b + _h - 1] <= (idx) ? _h : 0;                                  \
		_b;                                                                                \
	})

/* Keys in k[0, size) <= @idx, sorted, branchless (the last step reads k[b], b < size). */
#define COUNT_LE(k, size, idx)                                                                     \
	({                                                                                         \
		unsigned _b = 0, _h;                                                               \
		for (_h = (size) / 2; _h; _h /= 2)                                                 \
			_b += (k)[_b + _h - 1] <= (idx) ? _h : 0;                                  \
		_b += (k)[_b] <= (idx);                                                            \
		_b;                                                                                \
	})

INLINE int a_lookup_node(const struct a_index *x, uint64_t idx, int local)
{
	const struct a_hdr *h = LOAD_ACQ(&x->root);
	const struct a_leaf *l;
	unsigned c;

	if (!h)
		return local;
#ifdef A_COMPACT
	{
		uint64_t lo = 0, rel;
		uint32_t k;

		while (h->height) {
			const struct a_inner *in = (const struct a_inner *)h;

			rel = idx - lo;
			k = rel < UINT32_MAX - 1 ? (uint32_t)rel : UINT32_MAX - 1;
			c = COUNT_LE1(in->piv, A_FAN, k);
			lo += c ? in->piv[c - 1] : 0;
			h = LOAD_ACQ(&in->child[c]);
		}
		l = (const struct a_leaf *)h;
		rel = idx - lo;
		k = rel < UINT32_MAX - 1 ? (uint32_t)rel : UINT32_MAX - 1;
		c = COUNT_LE1(l->start, 16, k);
		if (!c || k >= l->end[c - 1])
			return local;
	}
#else
	while (h->height) {
		const struct a_inner *in = (const struct a_inner *)h;

		c = COUNT_LE1(in->piv, A_FAN, idx);
		h = LOAD_ACQ(&in->child[c]);
	}
	l = (const struct a_leaf *)h;
#endif
#if defined(A_COMPACT)
#elif defined(A_KEY32)
	{
		/* Below the base (a leaf whose interval grew down) or past 2^32 - 2: no entry. */
		uint64_t rel = idx - l->base;
		uint32_t k = rel < UINT32_MAX - 1 ? (uint32_t)rel : UINT32_MAX - 1;

		c = COUNT_LE(l->start, A_LEAF, k);
		if (!c || k >= l->end[c - 1])
			return local;
	}
#else
	c = COUNT_LE(l->start, A_LEAF, idx);
	if (!c || idx >= l->end[c - 1])
		return local;
#endif
	return _ps_policy_node_hinted(l->hint[c - 1], l->pol[c - 1], idx, local);
}

/* One entry while an update assembles a leaf. */
struct a_ent {
	uint64_t start, end;
	const struct ps_policy *pol;
	int hint;
};

/*
 * What one update did, before it is published: the nodes it built (freed
 * on -ENOMEM), those it replaced (retired after publication, through the
 * same reclaim as the tree's ranges), and its one publication: @slot
 * (a published inner node's child slot, or the root) gets @val.
 */
#define A_TX_MAX 64
struct a_tx {
	void *built[A_TX_MAX];
	int nbuilt;
	void *retired[A_TX_MAX];
	int nretired;
	struct a_hdr **slot;
	struct a_hdr *val;
	bool fail; /* a simulated allocation failure */
};

/* New nodes of one level (0, 1, 2 on a split, or more), and the lower bound of each. */
struct a_out {
	int n;
	struct a_hdr *node[A_FAN + 2];
	uint64_t lo[A_FAN + 2];
};

static void *a_new(struct a_tx *tx, size_t size)
{
	void *p;

	if (tx->fail || tx->nbuilt == A_TX_MAX)
		return NULL;
	p = xalloc64(size);
	tx->built[tx->nbuilt++] = p;
	return p;
}

static void a_retire(struct a_tx *tx, void *p)
{
	if (tx->nretired == A_TX_MAX)
		die("a_tx: too many retired nodes");
	tx->retired[tx->nretired++] = p;
}

static struct a_leaf *a_leaf_make(struct a_tx *tx, const struct a_ent *e, int n, uint64_t base)
{
	struct a_leaf *l = a_new(tx, sizeof(*l));
	int i;

	if (!l)
		return NULL;
	memset(l, 0, sizeof(*l));
	l->h.n = (uint16_t)n;
	l->h.height = 0;
#ifdef A_COMPACT
	if (n && (e[0].start < base || e[n - 1].end - base >= UINT32_MAX - 1))
		die("bplus: a leaf spanning 2^32 pages needs the 64-bit kind");
	for (i = 0; i < 16; i++) {
		if (i < A_LEAF)
			l->start[i] = i < n ? (uint32_t)(e[i].start - base) : A_KEY_NONE;
		l->end[i] = i < n ? (uint32_t)(e[i].end - base) : 0;
#elif defined(A_KEY32)
	l->base = base;
	if (n && (e[0].start < base || e[n - 1].end - base >= UINT32_MAX - 1))
		die("bplus: a leaf spanning 2^32 pages needs the 64-bit kind");
	for (i = 0; i < A_LEAF; i++) {
		l->start[i] = i < n ? (uint32_t)(e[i].start - base) : A_KEY_NONE;
		l->end[i] = i < n ? (uint32_t)(e[i].end - base) : 0;
#else
	(void)base;
	for (i = 0; i < A_LEAF; i++) {
		l->start[i] = i < n ? e[i].start : A_KEY_NONE;
		l->end[i] = i < n ? e[i].end : 0;
#endif
		l->hint[i] = (int16_t)(i < n ? e[i].hint : 0);
		l->pol[i] = i < n ? e[i].pol : NULL;
	}
	return l;
}

static struct a_inner *a_inner_make(
		struct a_tx *tx, int height, struct a_hdr *const *child, const uint64_t *lo, int n)
{
	struct a_inner *in = a_new(tx, sizeof(*in));
	int i;

	if (!in)
		return NULL;
	memset(in, 0, sizeof(*in));
	in->h.n = (uint16_t)n;
	in->h.height = (uint8_t)height;
	for (i = 0; i < A_FAN; i++) {
#ifdef A_COMPACT
		if (i + 1 < n && lo[i + 1] - lo[0] >= UINT32_MAX - 1)
			die("bplus: an inner node spanning 2^32 pages needs the 64-bit kind");
		if (i < A_FAN - 1)
			in->piv[i] = i + 1 < n ? (uint32_t)(lo[i + 1] - lo[0]) : A_KEY_NONE;
#else
		if (i < A_FAN - 1)
			in->piv[i] = i + 1 < n ? lo[i + 1] : UINT64_MAX;
#endif
		in->child[i] = i < n ? child[i] : NULL;
	}
	return in;
}

/* Split @n entries (or children) into as few nodes of at most @cap as they need, evenly. */
static int a_parts(int n, int cap)
{
	return (n + cap - 1) / cap;
}

/* The entries of leaf @l with [s, e) set to @pol (NULL: removed): kernel replace semantics. */
static int a_leaf_apply(const struct a_leaf *l, uint64_t lo, uint64_t s, uint64_t e,
		const struct ps_policy *pol, struct a_ent *out)
{
	int i, n = 0, ln = l ? l->h.n : 0;
	bool placed = false;

	(void)lo;

	for (i = 0; i < ln; i++) {
		struct a_ent x = {A_START(l, lo, i), A_END(l, lo, i), l->pol[i], l->hint[i]};

		if (x.end <= s) {
			out[n++] = x;
			continue;
		}
		if (!placed && x.start >= e) {
			if (pol)
				out[n++] = (struct a_ent){s, e, pol, _ps_policy_hint(pol)};
			placed = true;
		}
		if (x.start >= e) {
			out[n++] = x;
			continue;
		}
		/* x overlaps [s, e): keep what lies outside. */
		if (x.start < s)
			out[n++] = (struct a_ent){x.start, s, x.pol, x.hint};
		if (!placed) {
			if (pol)
				out[n++] = (struct a_ent){s, e, pol, _ps_policy_hint(pol)};
			placed = true;
		}
		if (x.end > e)
			out[n++] = (struct a_ent){e, x.end, x.pol, x.hint};
	}
	if (!placed && pol)
		out[n++] = (struct a_ent){s, e, pol, _ps_policy_hint(pol)};
	return n;
}

static int a_update(struct a_tx *tx, struct a_hdr *h, int height, uint64_t lo, uint64_t hi,
		uint64_t s, uint64_t e, const struct ps_policy *pol, bool copy, bool first,
		struct a_out *out);

/* Leaf entries @ent[0, n) into out (0 or more leaves); the first leaf's lower bound is @lo. */
static int a_leaves_out(struct a_tx *tx, const struct a_ent *ent, int n, uint64_t lo, bool keep,
		struct a_out *out)
{
	int parts = a_parts(n, A_LEAF), p, at = 0;

	out->n = 0;
#ifdef A_COMPACT
	if (!n && keep) /* child 0 stays, empty: its lower bound is its parent's */
		parts = 1;
#else
	(void)keep;
#endif
	for (p = 0; p < parts; p++) {
		int k = (n - at) / (parts - p);
		struct a_leaf *l = a_leaf_make(tx, ent + at, k, p ? ent[at].start : lo);

		if (!l)
			return -ENOMEM;
		out->lo[out->n] = p ? ent[at].start : lo;
		out->node[out->n++] = &l->h;
		at += k;
	}
	return 0;
}

/* The children of @in's slots [a, b] replaced by what @sub holds, as a new list in @out. */
static int a_inner_out(struct a_tx *tx, const struct a_inner *in, uint64_t lo, int a, int b,
		struct a_out *const *sub, int nsub, struct a_out *out)
{
	struct a_hdr *ch[2 * A_FAN + 4];
	uint64_t clo[2 * A_FAN + 4];
	int n = 0, i, j, parts, p, at = 0;

	for (i = 0; i < a; i++) {
		ch[n] = in->child[i];
		clo[n++] = i ? A_PIV(in, lo, i - 1) : lo;
	}
	for (j = 0; j < nsub; j++)
		for (i = 0; i < sub[j]->n; i++) {
			ch[n] = sub[j]->node[i];
			clo[n++] = sub[j]->lo[i];
		}
	for (i = b + 1; i < in->h.n; i++) {
		ch[n] = in->child[i];
		clo[n++] = A_PIV(in, lo, i - 1);
	}
	out->n = 0;
	if (!n)
		return 0;
	/* The first child's lower bound is the node's, whatever the first new one said. */
	clo[0] = lo;
	parts = a_parts(n, A_FAN);
	for (p = 0; p < parts; p++) {
		int k = (n - at) / (parts - p);
		struct a_inner *x = a_inner_make(tx, in->h.height, ch + at, clo + at, k);

		if (!x)
			return -ENOMEM;
		out->lo[out->n] = clo[at];
		out->node[out->n++] = &x->h;
		at += k;
	}
	return 0;
}

/*
 * The right boundary child of a crossing set: [s, e) removed from @h
 * (read at its lower bound @lo), rebuilt as nodes whose interval begins at
 * @nlo (= e).  A leaf is rebuilt whole; an inner node's first child is
 * rebased in turn, the others are shared.
 */
static int a_update_rebased(struct a_tx *tx, struct a_hdr *h, int height, uint64_t lo, uint64_t nlo,
		uint64_t hi, uint64_t s, uint64_t e, bool keep, struct a_out *out);

/* A subtree none of whose ranges survive: every node retired. */
static void a_retire_all(struct a_tx *tx, struct a_hdr *h)
{
	int i;

	if (h->height)
		for (i = 0; i < h->n; i++)
			a_retire_all(tx, ((struct a_inner *)h)->child[i]);
	a_retire(tx, h);
}

/* The child of @in holding key @k (the last child for UINT64_MAX). */
static int a_child_of(const struct a_inner *in, uint64_t lo, uint64_t k)
{
#ifdef A_COMPACT
	int c = (int)COUNT_LE1(in->piv, A_FAN,
			(uint32_t)(k - lo < UINT32_MAX - 1 ? k - lo : UINT32_MAX - 1));
#else
	int c = (int)COUNT_LE1(in->piv, A_FAN, k);

	(void)lo;
#endif

	return c < in->h.n ? c : in->h.n - 1;
}

/*
 * @h (interval [lo, hi)) with [s, e) set to @pol, [s, e) within [lo, hi):
 * the nodes replacing @h into @out, or, when one slot store suffices
 * below, that store noted in @tx and @out->n = -1 (@h stays).  @copy
 * forbids the slot store (the caller copies the node above anyway).
 */
static int a_update(struct a_tx *tx, struct a_hdr *h, int height, uint64_t lo, uint64_t hi,
		uint64_t s, uint64_t e, const struct ps_policy *pol, bool copy, bool first,
		struct a_out *out)
{
	const struct a_inner *in = (const struct a_inner *)h;
	struct a_out subs[2], *sp[2];
	int ci, cj, i, err;

	if (!height) {
		struct a_ent ent[A_LEAF + 2];
		int n = a_leaf_apply((const struct a_leaf *)h, lo, s, e, pol, ent);

		if (h)
			a_retire(tx, h);
		return a_leaves_out(tx, ent, n, lo, first, out);
	}
	ci = a_child_of(in, lo, s);
	cj = a_child_of(in, lo, e - 1);
	if (ci == cj) {
		uint64_t clo = ci ? A_PIV(in, lo, ci - 1) : lo;
		uint64_t chi = ci + 1 < in->h.n ? A_PIV(in, lo, ci) : hi;

		err = a_update(tx, in->child[ci], height - 1, clo, chi, s, e, pol, copy, ci == 0,
				&subs[0]);
		if (err || subs[0].n < 0) {
			out->n = -1;
			return err;
		}
		if (subs[0].n == 1) {
			/* A small leaf joins a neighbour when both fit in 3/4 of one. */
			const struct a_hdr *nb = NULL;
			int k = ci;

			if (height == 1 && subs[0].node[0]->n < A_LEAF / 4 && in->h.n > 1) {
				k = ci + 1 < in->h.n ? ci + 1 : ci - 1;
				nb = in->child[k];
				if (subs[0].node[0]->n + nb->n > A_LEAF * 3 / 4)
					nb = NULL;
			}
			if (!nb && !copy) {
				/* One slot store publishes the update; this node stays. */
				tx->slot = (struct a_hdr **)&in->child[ci];
				tx->val = subs[0].node[0];
				out->n = -1;
				return 0;
			} else if (nb) {
				const struct a_leaf *x = (const struct a_leaf *)subs[0].node[0];
				const struct a_leaf *y = (const struct a_leaf *)nb;
				const struct a_leaf *f = k > ci ? x : y, *g = k > ci ? y : x;
				struct a_ent ent[A_LEAF];
				int n = 0;
				int a = k < ci ? k : ci;
				uint64_t flo = a ? A_PIV(in, lo, a - 1) : lo,
					 glo = A_PIV(in, lo, a);

				(void)flo;
				(void)glo;
				for (i = 0; i < f->h.n; i++)
					ent[n++] = (struct a_ent){A_START(f, flo, i),
							A_END(f, flo, i), f->pol[i], f->hint[i]};
				for (i = 0; i < g->h.n; i++)
					ent[n++] = (struct a_ent){A_START(g, glo, i),
							A_END(g, glo, i), g->pol[i], g->hint[i]};
				a_retire(tx, (void *)nb);
				/* The built leaf x is thrown away: it was never published. */
				tx->built[--tx->nbuilt] = NULL;
				free((void *)x);
				err = a_leaves_out(tx, ent, n, a ? A_PIV(in, lo, a - 1) : lo,
						a == 0, &subs[0]);
				if (err)
					return err;
				sp[0] = &subs[0];
				a_retire(tx, h);
				return a_inner_out(tx, in, lo, a, a + 1, sp, 1, out);
			}
		}
		sp[0] = &subs[0];
		a_retire(tx, h);
		return a_inner_out(tx, in, lo, ci, ci, sp, 1, out);
	}
	/*
	 * [s, e) crosses children ci .. cj: those between go, ci takes the new
	 * range (its interval now ends at e), cj loses [s, e) (and begins at e).
	 */
	{
		uint64_t clo = ci ? A_PIV(in, lo, ci - 1) : lo;
		uint64_t cjlo = A_PIV(in, lo, cj - 1),
			 chi = cj + 1 < in->h.n ? A_PIV(in, lo, cj) : hi;

		for (i = ci + 1; i < cj; i++)
			a_retire_all(tx, in->child[i]);
		err = a_update(tx, in->child[ci], height - 1, clo, e, s, e, pol, true, ci == 0,
				&subs[0]);
		if (err)
			return err;
		/* cj is read at its old lower bound and rebuilt at e. */
		err = a_update_rebased(
				tx, in->child[cj], height - 1, cjlo, e, chi, s, e, false, &subs[1]);
		if (err)
			return err;
		if (subs[1].n)
			subs[1].lo[0] = e;
		sp[0] = &subs[0];
		sp[1] = &subs[1];
		a_retire(tx, h);
		return a_inner_out(tx, in, lo, ci, cj, sp, 2, out);
	}
}

static int a_update_rebased(struct a_tx *tx, struct a_hdr *h, int height, uint64_t lo, uint64_t nlo,
		uint64_t hi, uint64_t s, uint64_t e, bool keep, struct a_out *out)
{
	const struct a_inner *in = (const struct a_inner *)h;
	struct a_out sub, *sp[1] = {&sub};
	int c, i, err;

	if (!height) {
		struct a_ent ent[A_LEAF + 2];
		int n = a_leaf_apply((const struct a_leaf *)h, lo, s, e, NULL, ent);

		a_retire(tx, h);
		return a_leaves_out(tx, ent, n, nlo, keep, out);
	}
	/* Children wholly below e go; the one holding e - 1 is rebased; the rest are shared. */
	c = a_child_of(in, lo, e - 1);
	for (i = 0; i < c; i++)
		a_retire_all(tx, in->child[i]);
	err = a_update_rebased(tx, in->child[c], height - 1, c ? A_PIV(in, lo, c - 1) : lo, nlo,
			c + 1 < in->h.n ? A_PIV(in, lo, c) : hi, s, e, true, &sub);
	if (err)
		return err;
	if (sub.n)
		sub.lo[0] = nlo;
	a_retire(tx, h);
	{
		/* a_inner_out() over slots [0, c] replaced by sub, at the new lower bound. */
		struct a_hdr *ch[2 * A_FAN + 4];
		uint64_t clo[2 * A_FAN + 4];
		int n = 0, parts, p, at = 0;

		for (i = 0; i < sub.n; i++) {
			ch[n] = sub.node[i];
			clo[n++] = sub.lo[i];
		}
		for (i = c + 1; i < in->h.n; i++) {
			ch[n] = in->child[i];
			clo[n++] = A_PIV(in, lo, i - 1);
		}
		out->n = 0;
		(void)sp;
		if (!n)
			return 0;
		clo[0] = nlo;
		parts = a_parts(n, A_FAN);
		for (p = 0; p < parts; p++) {
			int k = (n - at) / (parts - p);
			struct a_inner *x = a_inner_make(tx, height, ch + at, clo + at, k);

			if (!x)
				return -ENOMEM;
			out->lo[out->n] = clo[at];
			out->node[out->n++] = &x->h;
			at += k;
		}
	}
	return 0;
}

static void a_tx_abort(struct a_tx *tx)
{
	int i;

	for (i = 0; i < tx->nbuilt; i++)
		free(tx->built[i]);
}

static int a_set_tx(struct a_index *x, uint64_t s, uint64_t e, const struct ps_policy *pol,
		struct a_tx *tx)
{
	struct a_hdr *root = x->root, *nr = NULL;
	struct a_out out;
	int err, height = root ? root->height : 0, i;

	tx->nbuilt = tx->nretired = 0;
	tx->slot = NULL;
	if (!root && !pol)
		return 0;
	err = a_update(tx, root, height, 0, UINT64_MAX, s, e, pol, false, false, &out);
	if (err) {
		a_tx_abort(tx);
		return err;
	}
	if (out.n >= 0) {
		/* The root itself changes: grow a level while more than one node is left. */
		while (out.n > 1) {
			struct a_out up;
			int parts = a_parts(out.n, A_FAN), p, at = 0;

			height++;
			up.n = 0;
			for (p = 0; p < parts; p++) {
				int k = (out.n - at) / (parts - p);
				struct a_inner *in = a_inner_make(
						tx, height, out.node + at, out.lo + at, k);

				if (!in) {
					a_tx_abort(tx);
					return -ENOMEM;
				}
				up.lo[up.n] = out.lo[at];
				up.node[up.n++] = &in->h;
				at += k;
			}
			out = up;
		}
		nr = out.n ? out.node[0] : NULL;
		/* An inner root of one child gives way to the child. */
		while (nr && nr->height && nr->n == 1) {
			struct a_hdr *c = ((struct a_inner *)nr)->child[0];

			for (i = 0; i < tx->nbuilt; i++)
				if (tx->built[i] == nr) {
					free(nr);
					tx->built[i] = NULL;
					break;
				}
			if (i == tx->nbuilt)
				a_retire(tx, nr);
			nr = c;
		}
		tx->slot = &x->root;
		tx->val = nr;
	}
	/* Everything is allocated: publish with one release store, then retire. */
	STORE_REL(tx->slot, tx->val);
	for (i = 0; i < tx->nretired; i++) {
		struct a_hdr *r = tx->retired[i];

		if (r->height)
			x->inners--;
		else
			x->leaves--;
		free(r); /* the library: the set's retire record, after a grace period */
	}
	for (i = 0; i < tx->nbuilt; i++) {
		struct a_hdr *b = tx->built[i];

		if (!b)
			continue;
		if (b->height)
			x->inners++;
		else
			x->leaves++;
	}
	return 0;
}

static int a_set(struct a_index *x, uint64_t s, uint64_t e, const struct ps_policy *pol)
{
	struct a_tx tx;

	tx.fail = false;
	return a_set_tx(x, s, e, pol, &tx);
}

/* The index against the tree: every range in order, with its bounds and policy, and the intervals.
 */
struct a_check {
	uint64_t *start, *end;
	const struct ps_policy **pol;
	size_t n, at;
};

#ifdef A_COMPACT
#define A_KEEPS_EMPTY 1
#else
#define A_KEEPS_EMPTY 0
#endif
static void a_check_node(const struct a_hdr *h, int height, uint64_t lo, uint64_t hi, bool first,
		struct a_check *c, size_t *leaves, size_t *inners)
{
	int i;

	if (h->height != height || (!h->n && !(A_KEEPS_EMPTY && first)))
		die("bplus: a node of the wrong height, or empty");
	if (!height) {
		const struct a_leaf *l = (const struct a_leaf *)h;

		++*leaves;
		for (i = 0; i < A_LEAF; i++) {
			if (i >= l->h.n) {
				if (l->start[i] != A_KEY_NONE)
					die("bplus: an unused start is not UINT64_MAX");
				continue;
			}
			if (A_START(l, lo, i) < lo || A_END(l, lo, i) > hi ||
					A_START(l, lo, i) >= A_END(l, lo, i) ||
					(i && A_START(l, lo, i) < A_END(l, lo, i - 1)))
				die("bplus: a leaf entry out of order or outside its interval");
			if (c->at >= c->n || c->start[c->at] != A_START(l, lo, i) ||
					c->end[c->at] != A_END(l, lo, i) ||
					c->pol[c->at] != l->pol[i] ||
					l->hint[i] != _ps_policy_hint(l->pol[i]))
				die("bplus: a leaf entry differs from the tree");
			c->at++;
		}
		return;
	}
	++*inners;
	{
		const struct a_inner *in = (const struct a_inner *)h;

		for (i = 0; i < h->n; i++) {
			uint64_t clo = i ? A_PIV(in, lo, i - 1) : lo;
			uint64_t chi = i + 1 < h->n ? A_PIV(in, lo, i) : hi;

			if (clo > chi || (i && clo < lo) || (i + 1 < h->n && chi > hi))
				die("bplus: pivots out of order");
			a_check_node(in->child[i], height - 1, clo, chi, i == 0, c, leaves, inners);
		}
		for (i = h->n - 1; i < A_FAN - 1; i++)
			if (i >= 0 && in->piv[i] != A_PIV_NONE)
				die("bplus: an unused pivot is not UINT64_MAX");
	}
}

/* ---- the tree in order, for the checks and the snapshot ---------------------------- */

struct flat {
	uint64_t *start, *end;
	const struct ps_policy **pol;
	size_t n, cap;
};

static int flat_one(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct flat *f = arg;

	if (f->n == f->cap)
		die("flat: more ranges than room");
	f->start[f->n] = start;
	f->end[f->n] = end;
	f->pol[f->n++] = pol;
	return 0;
}

static void flat_init(struct flat *f, size_t cap)
{
	f->cap = cap;
	f->n = 0;
	f->start = xalloc(cap * sizeof(*f->start));
	f->end = xalloc(cap * sizeof(*f->end));
	f->pol = xalloc(cap * sizeof(*f->pol));
}

static void flat_free(struct flat *f)
{
	free(f->start);
	free(f->end);
	free(f->pol);
}

static void a_check(const struct a_index *x, const struct flat *f)
{
	struct a_check c = {f->start, f->end, f->pol, f->n, 0};
	size_t leaves = 0, inners = 0;

	if (x->root)
		a_check_node(x->root, x->root->height, 0, UINT64_MAX, false, &c, &leaves, &inners);
	if (c.at != f->n)
		die("bplus: fewer ranges than the tree");
	if (leaves != x->leaves || inners != x->inners)
		die("bplus: node counts wrong");
}

/* ---- B: an immutable snapshot plus a copy-on-write delta ---------------------------- */

#define B_BLK 16 /* keys per block: two cache lines */

/*
 * The snapshot: the starts sorted in blocks of B_BLK (the leaf level),
 * and above them levels of blocks of separators, block j of a level
 * holding the first start of children j*B_BLK+1 .. j*B_BLK+B_BLK-1 (the
 * last key of a block is UINT64_MAX), implicit children.  Ends, hints and
 * policies are beside, in sorted order.  Eytzinger order of the same
 * starts is kept beside (eyt_*), for the other layout.
 */
struct b_snap {
	size_t n;
	int levels;	  /* separator levels above the leaf level */
	uint64_t *lvl[8]; /* lvl[0]: the root block; lvl[levels]: the sorted starts */
	size_t nblk[8];
	uint64_t *end;
	int16_t *hint;
	const struct ps_policy **pol;
	uint64_t *eyt_start; /* [1, n], Eytzinger order */
	uint64_t *eyt_end;
	int16_t *eyt_hint;
	const struct ps_policy **eyt_pol;
	size_t bytes;
};

/* The delta: disjoint intervals set since the snapshot, sorted; pol NULL: a hole. */
struct b_delta {
	const struct b_snap *snap; /* the snapshot it applies to: one pointer publishes both */
	uint32_t n;
	uint64_t start[D_MAX]; /* [n, D_MAX): UINT64_MAX */
	uint64_t end[D_MAX];
	int16_t hint[D_MAX];
	const struct ps_policy *pol[D_MAX];
};

struct b_index {
	struct b_delta *cur;
	size_t sets_since;
	size_t folds;
};

static size_t eyt_fill(struct b_snap *b, const struct flat *f, size_t i, size_t k)
{
	if (k <= b->n) {
		i = eyt_fill(b, f, i, 2 * k);
		b->eyt_start[k] = f->start[i];
		b->eyt_end[k] = f->end[i];
		b->eyt_pol[k] = f->pol[i];
		b->eyt_hint[k] = (int16_t)_ps_policy_hint(f->pol[i]);
		i++;
		i = eyt_fill(b, f, i, 2 * k + 1);
	}
	return i;
}

static struct b_snap *b_snap_build(const struct flat *f, bool eytzinger)
{
	struct b_snap *b = xalloc(sizeof(*b));
	size_t n = f->n, i, nb, l;
	int lv = 0;
	uint64_t *levels[8], *minkey;
	size_t counts[8];

	memset(b, 0, sizeof(*b));
	b->n = n;
	nb = (n + B_BLK - 1) / B_BLK;
	if (!nb)
		nb = 1;
	/* The leaf level, then separator levels until one block. */
	levels[0] = xalloc64(nb * B_BLK * sizeof(uint64_t));
	counts[0] = nb;
	for (i = 0; i < nb * B_BLK; i++)
		levels[0][i] = i < n ? f->start[i] : UINT64_MAX;
	b->bytes = nb * B_BLK * 8;
	/* The smallest start under each block of the level below. */
	minkey = xalloc(nb * sizeof(*minkey));
	for (i = 0; i < nb; i++)
		minkey[i] = levels[0][i * B_BLK];
	while (counts[lv] > 1) {
		size_t below_n = counts[lv], up = (below_n + B_BLK - 1) / B_BLK, j;
		uint64_t *u = xalloc64(up * B_BLK * sizeof(uint64_t));

		for (j = 0; j < up * B_BLK; j++) {
			/* Block j / B_BLK, key j % B_BLK: the smallest start under child j + 1 of
			 * that block. */
			size_t blk = j / B_BLK, k = j % B_BLK, child = blk * B_BLK + k + 1;

			u[j] = (k < B_BLK - 1 && child < below_n) ? minkey[child] : UINT64_MAX;
		}
		for (j = 0; j < up; j++)
			minkey[j] = minkey[j * B_BLK];
		lv++;
		if (lv >= 8)
			die("stree: too many levels");
		levels[lv] = u;
		counts[lv] = up;
		b->bytes += up * B_BLK * 8;
	}
	free(minkey);
	b->levels = lv;
	for (l = 0; l <= (size_t)lv; l++) {
		b->lvl[l] = levels[lv - l];
		b->nblk[l] = counts[lv - l];
	}
	b->end = xalloc64(n * sizeof(*b->end) + 8);
	b->hint = xalloc64(n * sizeof(*b->hint) + 8);
	b->pol = xalloc64(n * sizeof(*b->pol) + 8);
	for (i = 0; i < n; i++) {
		b->end[i] = f->end[i];
		b->pol[i] = f->pol[i];
		b->hint[i] = (int16_t)_ps_policy_hint(f->pol[i]);
	}
	b->bytes += n * (8 + 2 + 8);
	if (eytzinger) {
		b->eyt_start = xalloc64((n + 1) * 8);
		b->eyt_end = xalloc64((n + 1) * 8);
		b->eyt_hint = xalloc64((n + 1) * 2);
		b->eyt_pol = xalloc64((n + 1) * 8);
		eyt_fill(b, f, 0, 1);
	}
	return b;
}

static void b_snap_free(struct b_snap *b)
{
	int l;

	for (l = 0; l <= b->levels; l++)
		free(b->lvl[l]);
	free(b->end);
	free(b->hint);
	free(b->pol);
	free(b->eyt_start);
	free(b->eyt_end);
	free(b->eyt_hint);
	free(b->eyt_pol);
	free(b);
}

/* The snapshot's lookup, S+ layout: -2 when no range of the snapshot holds @idx. */
INLINE int b_snap_node(const struct b_snap *b, uint64_t idx, int local)
{
	size_t blk = 0;
	unsigned c;
	int l;

	for (l = 0; l < b->levels; l++) {
		c = COUNT_LE(b->lvl[l] + blk * B_BLK, B_BLK, idx);
		blk = blk * B_BLK + c;
	}
	c = COUNT_LE(b->lvl[b->levels] + blk * B_BLK, B_BLK, idx);
	if (!c)
		return local;
	blk = blk * B_BLK + c - 1;
	if (blk >= b->n || idx >= b->end[blk])
		return local;
	return _ps_policy_node_hinted(b->hint[blk], b->pol[blk], idx, local);
}

/* The same in Eytzinger order, prefetching four levels ahead. */
INLINE int b_eyt_node(const struct b_snap *b, uint64_t idx, int local)
{
	size_t k = 1, n = b->n;

	while (k <= n) {
		__builtin_prefetch(b->eyt_start + 16 * k);
		k = 2 * k + (b->eyt_start[k] <= idx);
	}
	/* The last right turn: the largest start <= idx. */
	k >>= __builtin_ctzll(k) + 1;
	if (!k || idx >= b->eyt_end[k])
		return local;
	return _ps_policy_node_hinted(b->eyt_hint[k], b->eyt_pol[k], idx, local);
}

/* The delta first: 1 with *@ans when it decides, 0 when the snapshot does. */
INLINE int b_delta_find(const struct b_delta *d, uint64_t idx, int local, int *ans)
{
	unsigned c;

	if (!d->n)
		return 0;
	c = COUNT_LE(d->start, D_MAX, idx);
	if (!c || idx >= d->end[c - 1])
		return 0;
	*ans = d->pol[c - 1] ? _ps_policy_node_hinted(d->hint[c - 1], d->pol[c - 1], idx, local)
			     : local;
	return 1;
}

INLINE int b_lookup_node(const struct b_index *x, uint64_t idx, int local, bool eyt)
{
	const struct b_delta *d = LOAD_ACQ(&x->cur);
	int ans;

	if (b_delta_find(d, idx, local, &ans))
		return ans;
	return eyt ? b_eyt_node(d->snap, idx, local) : b_snap_node(d->snap, idx, local);
}

/*
 * A set on the delta: a fresh copy with [s, e) replaced by one interval
 * (a hole when @pol is NULL), published with one store.  Return: 0, or
 * -ENOSPC when the delta is full (the caller folds first).
 */
static int b_delta_set(struct b_index *x, uint64_t s, uint64_t e, const struct ps_policy *pol)
{
	const struct b_delta *d = x->cur;
	struct b_delta *nd;
	struct a_ent ent[D_MAX + 2];
	int i, n = 0;
	bool placed = false;

	for (i = 0; i < (int)d->n; i++) {
		struct a_ent y = {d->start[i], d->end[i], d->pol[i], d->hint[i]};

		if (y.end <= s) {
			ent[n++] = y;
			continue;
		}
		if (!placed && y.start >= e) {
			ent[n++] = (struct a_ent){s, e, pol, _ps_policy_hint(pol)};
			placed = true;
		}
		if (y.start >= e) {
			ent[n++] = y;
			continue;
		}
		if (y.start < s)
			ent[n++] = (struct a_ent){y.start, s, y.pol, y.hint};
		if (!placed) {
			ent[n++] = (struct a_ent){s, e, pol, _ps_policy_hint(pol)};
			placed = true;
		}
		if (y.end > e)
			ent[n++] = (struct a_ent){e, y.end, y.pol, y.hint};
	}
	if (!placed)
		ent[n++] = (struct a_ent){s, e, pol, _ps_policy_hint(pol)};
	if (n > D_MAX)
		return -ENOSPC;
	nd = xalloc64(sizeof(*nd));
	nd->snap = d->snap;
	nd->n = (uint32_t)n;
	for (i = 0; i < D_MAX; i++) {
		nd->start[i] = i < n ? ent[i].start : UINT64_MAX;
		nd->end[i] = i < n ? ent[i].end : 0;
		nd->pol[i] = i < n ? ent[i].pol : NULL;
		nd->hint[i] = (int16_t)(i < n ? ent[i].hint : 0);
	}
	STORE_REL(&x->cur, nd);
	free((void *)d); /* the library: retired after a grace period */
	return 0;
}

/* A fresh snapshot of the tree with an empty delta, one store. */
static void b_fold(struct b_index *x, const struct ps_rtree *t, size_t cap, bool eyt)
{
	struct flat f;
	struct b_delta *nd = xalloc64(sizeof(*nd)), *old = x->cur;
	int i;

	flat_init(&f, cap);
	psi_rangetree_foreach(t, flat_one, &f);
	memset(nd, 0, sizeof(*nd));
	nd->snap = b_snap_build(&f, eyt);
	if (getenv("RIDX_DEBUG")) {
		size_t j;

		for (j = 0; j < f.n; j++)
			if (b_snap_node(nd->snap, f.start[j], -5) == -5) {
				fprintf(stderr,
						"snap n %zu levels %d: range %zu of start %llu not "
						"found\n",
						f.n, nd->snap->levels, j,
						(unsigned long long)f.start[j]);
				exit(1);
			}
	}
	for (i = 0; i < D_MAX; i++)
		nd->start[i] = UINT64_MAX;
	STORE_REL(&x->cur, nd);
	if (old) {
		b_snap_free((struct b_snap *)old->snap);
		free(old);
	}
	flat_free(&f);
	x->folds++;
}

/* ---- the red-black tree: the library's, and the same shape in aligned nodes ---------- */

static struct ps_rtree rbt;

static void rb_set(uint64_t s, uint64_t e, struct ps_policy *pol)
{
	struct psi_range_list spares = {NULL, 0, NULL}, removed = {NULL, 0, NULL};

	if (psi_range_list_fill(&spares, PSI_RANGETREE_SET_MAX_NEW))
		die("out of memory");
	psi_rangetree_set(&rbt, s, e, pol, &spares, &removed);
	psi_range_list_free(&removed);
	psi_range_list_free(&spares);
}

INLINE int rb_lookup_node(const struct ps_rtree *t, uint64_t idx, int local)
{
	struct ps_range *r = psi_rangetree_lookup(t, idx);

	return r ? _ps_policy_node_hinted(r->node_hint, r->pol, idx, local) : local;
}

/* C: the tree's shape copied into 64-byte aligned nodes (one line each). */
static struct ps_range *rb64_slab;
static size_t rb64_used;

static struct ps_rb_node *rb64_copy(const struct ps_rb_node *n)
{
	struct ps_range *r, *o;

	if (!n)
		return NULL;
	o = (struct ps_range *)(void *)n;
	r = &rb64_slab[rb64_used++];
	*r = *o;
	r->rb.child[0] = rb64_copy(n->child[0]);
	r->rb.child[1] = rb64_copy(n->child[1]);
	return &r->rb;
}

/* Nodes and black nodes on the walk to @idx: the locality design C2 would give (one line per black
 * node). */
static void rb_path(const struct ps_rtree *t, uint64_t idx, uint64_t *nodes, uint64_t *blacks)
{
	const struct ps_rb_node *n = t->root.node;

	while (n) {
		const struct ps_range *r = (const struct ps_range *)(const void *)n;

		++*nodes;
		*blacks += n->meta & 1;
		if (idx < r->start)
			n = n->child[0];
		else if (idx >= r->end)
			n = n->child[1];
		else
			break;
	}
}

/* ---- the structures together ------------------------------------------------------ */

static struct ps_store *store;
static struct a_index aidx;
static struct b_index bidx, eidx;
static struct flat sorted;
static struct ps_rtree rb64;
static int16_t *sorted_hint;

/* One set on every structure that sets maintain (the snapshot ones through their deltas). */
static void set_all(uint64_t s, uint64_t e, struct ps_policy *pol)
{
	int err;

	rb_set(s, e, pol);
	err = ps_store_set(store, s, e, pol);
	if (err)
		die("ps_store_set failed");
	if (a_set(&aidx, s, e, pol))
		die("a_set failed");
	if (bidx.cur) {
		if (b_delta_set(&bidx, s, e, pol)) {
			b_fold(&bidx, &rbt, nslots + 8, false);
		}
		if (b_delta_set(&eidx, s, e, pol))
			b_fold(&eidx, &rbt, nslots + 8, true);
	}
}

static void fill_slot(uint64_t j, uint64_t *rng)
{
	uint32_t s = list[j];
	uint64_t lo = (uint64_t)s << SHIFT, len = 1ULL << SHIFT, q = len / 4;
	uint64_t start = lo + below(rng, q + 1), end = lo + len - below(rng, q + 1);

	m_alt[s] ^= 1;
	m_start[s] = start;
	m_end[s] = end;
	set_all(start, end, slot_pol(s, m_alt[s]));
	list_swap(j, nfull);
	nfull++;
}

/* The churn writer's op: remove a random range, insert one into a random empty slot. */
static void churn_step(uint64_t *rng)
{
	uint64_t i = below(rng, nfull);
	uint32_t s = list[i];

	set_all(m_start[s], m_end[s], NULL);
	m_end[s] = 0;
	list_swap(i, nfull - 1);
	nfull--;
	fill_slot(nfull + below(rng, nslots - nfull), rng);
}

static void check_structure_model(bool model);

/*
 * Sets that cross many ranges (and leaves): [slot s, slot s + k) set to
 * one policy, checked against the tree, then removed and the slots put
 * back as the model has them.
 */
static void span_sets(uint64_t *rng, int rounds, bool check)
{
	int t;

	for (t = 0; t < rounds; t++) {
		uint64_t s = below(rng, nslots), k = 1 + below(rng, 128), j;
		uint64_t a = s << SHIFT, b = s + k < nslots ? (s + k) << SHIFT : npages;

		set_all(a + below(rng, 4), b - below(rng, 4), pols[2 * below(rng, NCOLOURS)]);
		if (check && !(t % 16))
			check_structure_model(false);
		set_all(a, b, NULL);
		for (j = s; j < s + k && j < nslots; j++)
			if (m_end[j])
				set_all(m_start[j], m_end[j], slot_pol(j, m_alt[j]));
	}
}

/* The model's answer: the node of the slot's policy, or local. */
static int model_node(uint64_t idx, int local)
{
	uint64_t s = idx >> SHIFT;

	if (!m_end[s] || idx < m_start[s] || idx >= m_end[s])
		return local;
	return (int)((s % NCOLOURS) % 64);
}

static void snapshot_sorted(void)
{
	size_t i;

	flat_free(&sorted);
	free(sorted_hint);
	flat_init(&sorted, nslots + 8);
	psi_rangetree_foreach(&rbt, flat_one, &sorted);
	sorted_hint = xalloc((sorted.n + 1) * sizeof(*sorted_hint));
	for (i = 0; i < sorted.n; i++)
		sorted_hint[i] = (int16_t)_ps_policy_hint(sorted.pol[i]);
}

INLINE int sorted_lookup_node(uint64_t idx, int local)
{
	const uint64_t *b = sorted.start;
	size_t n = sorted.n, i;

	if (!n)
		return local;
	while (n > 1) {
		size_t h = n / 2;

		b = b[h] <= idx ? b + h : b;
		n -= h;
	}
	i = (size_t)(b - sorted.start);
	if (idx < sorted.start[i] || idx >= sorted.end[i])
		return local;
	return _ps_policy_node_hinted(sorted_hint[i], sorted.pol[i], idx, local);
}

/* ---- the measured loops --------------------------------------------------------------- */

enum st { S_NULL, S_RB, S_RB64, S_RCU, S_RCU_INL, S_SORTED, S_BPLUS, S_STREE, S_EYTZ, S_N };
static const char *const st_name[S_N] = {"null", "rb", "rb64", "rcu:node", "rcu:node:inline",
		"sorted", "bplus", "stree", "eytz"};

INLINE int one_lookup(enum st k, uint64_t idx)
{
	switch (k) {
	case S_NULL:
		return (int)(idx & 1);
	case S_RB:
		return rb_lookup_node(&rbt, idx, 0);
	case S_RB64:
		return rb_lookup_node(&rb64, idx, 0);
	case S_RCU:
		return (ps_store_lookup_node)(store, idx, 0);
	case S_RCU_INL:
		return _ps_inl_lookup_node(store, idx, 0);
	case S_SORTED:
		return sorted_lookup_node(idx, 0);
	case S_BPLUS:
		return a_lookup_node(&aidx, idx, 0);
	case S_STREE:
		return b_lookup_node(&bidx, idx, 0, false);
	case S_EYTZ:
		return b_lookup_node(&eidx, idx, 0, true);
	default:
		return -1;
	}
}

INLINE uint64_t loop(enum st k, uint64_t n, uint64_t seed)
{
	uint64_t rng = seed, sum = 0, i;

	for (i = 0; i < n; i++)
		sum += (uint64_t)one_lookup(k, below(&rng, npages));
	return sum;
}

/* Warm-up and measured loop per structure: callgrind collects the m_ ones. */
#define LOOPS(name, k)                                                                             \
	static NOINLINE uint64_t w_##name(uint64_t n, uint64_t seed)                               \
	{                                                                                          \
		return loop(k, n, seed);                                                           \
	}                                                                                          \
	static NOINLINE uint64_t m_##name(uint64_t n, uint64_t seed)                               \
	{                                                                                          \
		return loop(k, n, seed);                                                           \
	}
LOOPS(null, S_NULL)
LOOPS(rb, S_RB)
LOOPS(rb64, S_RB64)
LOOPS(rcu, S_RCU)
LOOPS(rcu_inl, S_RCU_INL)
LOOPS(sorted, S_SORTED)
LOOPS(bplus, S_BPLUS)
LOOPS(stree, S_STREE)
LOOPS(eytz, S_EYTZ)
/* The snapshot designs again, with a delta of D_MAX / 2 sets. */
LOOPS(stree_delta, S_STREE)
LOOPS(eytz_delta, S_EYTZ)

typedef uint64_t loop_fn(uint64_t, uint64_t);
static loop_fn *const warm[S_N] = {
		w_null, w_rb, w_rb64, w_rcu, w_rcu_inl, w_sorted, w_bplus, w_stree, w_eytz};
static loop_fn *const meas[S_N] = {
		m_null, m_rb, m_rb64, m_rcu, m_rcu_inl, m_sorted, m_bplus, m_stree, m_eytz};

/* Every structure against the model on @n random pages and on every slot's bounds. */
static void check_all(uint64_t n, uint64_t seed, bool snapshot_ok)
{
	uint64_t rng = seed, i, s;
	int k;

	for (i = 0; i < n + 4 * nslots; i++) {
		uint64_t idx;
		int want;

		if (i < n) {
			idx = below(&rng, npages);
		} else {
			s = (i - n) / 4;
			idx = m_end[s] ? ((i - n) % 4 == 0		    ? m_start[s]
							 : (i - n) % 4 == 1 ? m_end[s] - 1
							 : (i - n) % 4 == 2 ? m_end[s]
									    : m_start[s] - 1)
				       : (s << SHIFT) + (i - n) % 4;
			if (idx >= npages)
				continue;
		}
		want = model_node(idx, 0);
		for (k = S_RB; k < S_N; k++) {
			if ((k == S_SORTED || k == S_RB64) && !snapshot_ok)
				continue;
			if (one_lookup((enum st)k, idx) != want) {
				fprintf(stderr, "ridx: %s: lookup of %llu: %d, the model says %d\n",
						st_name[k], (unsigned long long)idx,
						one_lookup((enum st)k, idx), want);
				if (k == S_STREE || k == S_EYTZ) {
					const struct b_index *bx = k == S_STREE ? &bidx : &eidx;
					int a = -9, dec = b_delta_find(bx->cur, idx, 0, &a);

					fprintf(stderr,
							"ridx: delta of %u decides %d (%d); "
							"snapshot says %d\n",
							bx->cur->n, dec, a,
							b_snap_node(bx->cur->snap, idx, 0));
				}
				exit(1);
			}
		}
	}
}

static void check_structure_model(bool model)
{
	const char *why = "?";
	struct flat f;

	if (psi_rangetree_check(&rbt, &why))
		die(why);
	if (ps_store_check(store, &why))
		die(why);
	flat_init(&f, nslots + 8);
	psi_rangetree_foreach(&rbt, flat_one, &f);
	if (model && (f.n != nfull || rbt.count != nfull))
		die("the tree's count differs from the model's");
	a_check(&aidx, &f);
	flat_free(&f);
}

static void check_structure(void)
{
	check_structure_model(true);
}

static void build(uint64_t n, uint64_t seed)
{
	uint64_t rng = seed, k;
	static unsigned char dist[64 * 64];
	int i, j;

	for (i = 0; i < 64; i++)
		for (j = 0; j < 64; j++)
			dist[i * 64 + j] = i == j ? 10 : 20;
	if (ps_numa_set_topology(64, dist, NULL))
		die("ps_numa_set_topology");
	for (i = 0; i < NCOLOURS * 2; i++) {
		unsigned long mask = 1UL << ((i / 2) % 64);

		pols[i] = ps_policy_create(i & 1 ? PS_MPOL_INTERLEAVE : PS_MPOL_BIND, 0, &mask, 64);
		if (!pols[i])
			die("ps_policy_create");
	}
	nslots = 2 * n;
	npages = nslots << SHIFT;
	m_start = calloc(nslots, 8);
	m_end = calloc(nslots, 8);
	m_alt = calloc(nslots, 1);
	list = xalloc(nslots * 4);
	where = xalloc(nslots * 4);
	if (!m_start || !m_end || !m_alt)
		die("out of memory");
	for (k = 0; k < nslots; k++)
		list[k] = where[k] = (uint32_t)k;
	psi_rangetree_init(&rbt);
	store = ps_store_create(PS_SYNC_RCU);
	if (!store)
		die("ps_store_create");
	for (k = 0; k < n; k++)
		fill_slot(nfull + below(&rng, nslots - nfull), &rng);
	ps_store_synchronize(store);
}

/* The snapshot structures of the tree as it is now (their deltas empty). */
static void snapshots(void)
{
	snapshot_sorted();
	b_fold(&bidx, &rbt, nslots + 8, false);
	b_fold(&eidx, &rbt, nslots + 8, true);
	free(rb64_slab);
	rb64_slab = xalloc64((rbt.count + 1) * sizeof(struct ps_range));
	rb64_used = 0;
	psi_rangetree_init(&rb64);
	rb64.root.node = rb64_copy(rbt.root.node);
	rb64.count = rbt.count;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static size_t a_bytes(void)
{
	return aidx.leaves * ((sizeof(struct a_leaf) + 63) & ~(size_t)63) +
	       aidx.inners * ((sizeof(struct a_inner) + 63) & ~(size_t)63);
}

static bool test_only;

static void mode_lookup(uint64_t n, uint64_t lookups)
{
	uint64_t rng = 42, i, nodes = 0, blacks = 0, seed;
	size_t straddle = 0, offs[4] = {0, 0, 0, 0};
	int k, rep, reps = 7, with_delta;
	double ns[S_N][16];
	uint64_t sink = 0;

	build(n, 1);
	/* Sets after the build: churn steps on every structure, checked. */
	bidx.cur = NULL;
	for (i = 0; i < n / 4 + 100; i++)
		churn_step(&rng);
	check_structure();
	if (test_only) {
		/* The test: sets across many leaves too (they leave sparse leaves, so not
		 * measured). */
		span_sets(&rng, n <= 100000 ? 200 : 40, n <= 100000);
		check_structure();
	}
	snapshots();
	check_all(20000, 7, true);
	/* Churn through the deltas (and their folds), checked again. */
	for (i = 0; i < 3 * D_MAX + 5; i++)
		churn_step(&rng);
	check_structure();
	check_all(20000, 8, false);
	snapshots();
	check_all(20000, 9, true);

	/* The walk's shape: nodes and black nodes per lookup; ranges straddling two lines. */
	seed = 5;
	for (i = 0; i < 100000; i++)
		rb_path(&rbt, below(&seed, npages), &nodes, &blacks);
	{
		struct flat f;
		size_t j;

		flat_init(&f, nslots + 8);
		psi_rangetree_foreach(&rbt, flat_one, &f);
		for (j = 0; j < f.n; j++) {
			struct ps_range *r = psi_rangetree_lookup(&rbt, f.start[j]);

			/* The walk's fields, child[] to end, in two lines. */
			straddle += ((uintptr_t)r & 63) + offsetof(struct ps_range, end) + 8 > 64;
			offs[((uintptr_t)r & 63) / 16]++;
		}
		flat_free(&f);
	}
	printf("n %llu ranges %zu pages %llu rb_nodes_per_walk %.2f rb_blacks_per_walk %.2f "
	       "ranges_walk_fields_in_two_lines %.2f\n",
			(unsigned long long)n, rbt.count, (unsigned long long)npages,
			(double)nodes / 100000, (double)blacks / 100000,
			(double)straddle / rbt.count);
	printf("range address mod 64: 0: %zu 16: %zu 32: %zu 48: %zu\n", offs[0], offs[1], offs[2],
			offs[3]);
	printf("bytes_per_range: rb_range %zu rb_range_malloc 80 rcu_store %.1f bplus %.1f "
	       "(leaves %zu x %zu B, inners %zu x %zu B, fill %.2f) stree %.1f sorted %.1f "
	       "delta %zu B\n",
			sizeof(struct ps_range), (double)ps_store_memory(store) / rbt.count,
			(double)a_bytes() / rbt.count, aidx.leaves,
			(sizeof(struct a_leaf) + 63) & ~(size_t)63, aidx.inners,
			(sizeof(struct a_inner) + 63) & ~(size_t)63,
			(double)rbt.count / ((double)aidx.leaves * A_LEAF),
			(double)bidx.cur->snap->bytes / rbt.count, (double)(8 + 8 + 8 + 2),
			sizeof(struct b_delta));
	fflush(stdout);
	if (test_only) {
		check_all(20000, 13, true);
		printf("test passed\n");
		return;
	}

	/* The valgrind figures: each structure's warm-up, then its measured loop. */
	CALLGRIND_START_INSTRUMENTATION;
	for (k = 0; k < S_N; k++) {
		/* RIDX_ONLY=NAME: that structure alone (and the empty loop). */
		if (getenv("RIDX_ONLY") && k != S_NULL && strcmp(getenv("RIDX_ONLY"), st_name[k]))
			continue;
		sink += warm[k](lookups, 11 + (uint64_t)k);
		sink += meas[k](lookups, 1000 + (uint64_t)k);
	}
	/* With a delta of typical size: D_MAX / 2 sets since the fold. */
	for (i = 0; i < D_MAX / 2; i++) {
		uint64_t j = below(&rng, nfull);
		uint32_t s = list[j];

		m_alt[s] ^= 1;
		set_all(m_start[s], m_end[s], slot_pol(s, m_alt[s]));
	}
	with_delta = (int)bidx.cur->n;
	sink += w_stree_delta(lookups, 21);
	sink += m_stree_delta(lookups, 2000);
	sink += w_eytz_delta(lookups, 22);
	sink += m_eytz_delta(lookups, 2001);
	CALLGRIND_STOP_INSTRUMENTATION;
	check_all(20000, 10, false);
	printf("delta_entries_second_stree_eytz_loops %d\n", with_delta);

	/* Wall clock: repetitions interleaved across structures, median ns per lookup. */
	if (getenv("RIDX_NO_WALL"))
		return;
	{
		uint64_t wl = lookups < 200000 ? 200000 : lookups;

		for (rep = 0; rep < reps; rep++)
			for (k = 0; k < S_N; k++) {
				uint64_t t0;

				sink += warm[k](wl / 4, 31 + (uint64_t)rep);
				t0 = now_ns();
				sink += meas[k](wl, 3000 + (uint64_t)rep);
				ns[k][rep] = (double)(now_ns() - t0) / (double)wl;
			}
		for (k = 0; k < S_N; k++)
			qsort(ns[k], (size_t)reps, sizeof(double), dbl_cmp);
		for (k = 0; k < S_N; k++)
			printf("wall %-16s median %.1f ns (min %.1f max %.1f), less the loop %.1f "
			       "ns\n",
					st_name[k], ns[k][reps / 2], ns[k][0], ns[k][reps - 1],
					ns[k][reps / 2] - ns[S_NULL][reps / 2]);
	}
	printf("sink %llu\n", (unsigned long long)sink);
}

/* ---- upkeep: the sets of write-cost's kinds ------------------------------------------ */

enum kind { K_REPLACE, K_SPLIT, K_UNSPLIT, K_REMOVE, K_READD };

/* The sets of one kind, on one structure: slot list[@pick[i]] of the full slots. */
static uint64_t *pick;
static uint64_t npick;

INLINE void kind_bounds(enum kind kd, uint32_t s, uint64_t *a, uint64_t *b, struct ps_policy **p)
{
	*a = m_start[s];
	*b = m_end[s];
	switch (kd) {
	case K_REPLACE:
		*p = slot_pol(s, m_alt[s] ^ 1);
		break;
	case K_SPLIT:
		*a += 1;
		*b -= 1;
		*p = slot_pol(s, m_alt[s] ^ 1);
		break;
	case K_UNSPLIT:
		*p = slot_pol(s, m_alt[s]);
		break;
	case K_REMOVE:
		*p = NULL;
		break;
	case K_READD:
		*p = slot_pol(s, m_alt[s]);
		break;
	}
}

enum ust { U_RB, U_RCU, U_BPLUS, U_DELTA };

INLINE void upkeep_loop(enum ust u, enum kind kd)
{
	uint64_t i;

	for (i = 0; i < npick; i++) {
		uint32_t s = list[pick[i]];
		uint64_t a, b;
		struct ps_policy *p;

		kind_bounds(kd, s, &a, &b, &p);
		switch (u) {
		case U_RB:
			rb_set(a, b, p);
			break;
		case U_RCU:
			if (ps_store_set(store, a, b, p))
				die("ps_store_set");
			break;
		case U_BPLUS:
			if (a_set(&aidx, a, b, p))
				die("a_set");
			break;
		case U_DELTA:
			if (b_delta_set(&bidx, a, b, p))
				die("b_delta_set: full");
			break;
		}
	}
}

#define UPKEEP(name, u)                                                                            \
	static NOINLINE void u_##name##_replace(void)                                              \
	{                                                                                          \
		upkeep_loop(u, K_REPLACE);                                                         \
	}                                                                                          \
	static NOINLINE void u_##name##_split(void)                                                \
	{                                                                                          \
		upkeep_loop(u, K_SPLIT);                                                           \
	}                                                                                          \
	static NOINLINE void u_##name##_unsplit(void)                                              \
	{                                                                                          \
		upkeep_loop(u, K_UNSPLIT);                                                         \
	}                                                                                          \
	static NOINLINE void u_##name##_remove(void)                                               \
	{                                                                                          \
		upkeep_loop(u, K_REMOVE);                                                          \
	}                                                                                          \
	static NOINLINE void u_##name##_readd(void)                                                \
	{                                                                                          \
		upkeep_loop(u, K_READD);                                                           \
	}                                                                                          \
	static __attribute__((unused)) void u_##name##_all(bool replace)                           \
	{                                                                                          \
		if (replace)                                                                       \
			u_##name##_replace();                                                      \
		else {                                                                             \
			u_##name##_split();                                                        \
			u_##name##_unsplit();                                                      \
			u_##name##_remove();                                                       \
			u_##name##_readd();                                                        \
		}                                                                                  \
	}
UPKEEP(rb, U_RB)
UPKEEP(rcu, U_RCU)
UPKEEP(bplus, U_BPLUS)
UPKEEP(delta, U_DELTA)

static NOINLINE void u_stree_rebuild(void)
{
	b_fold(&bidx, &rbt, nslots + 8, false);
}

static NOINLINE void u_eytz_rebuild(void)
{
	b_fold(&eidx, &rbt, nslots + 8, true);
}

/* -ENOMEM exactness of A: a failed set leaves the published index as it was. */
static void a_enomem_check(uint64_t *rng)
{
	int t;

	for (t = 0; t < 200; t++) {
		uint32_t s = list[below(rng, nfull)];
		struct a_hdr *root = aidx.root;
		size_t lv = aidx.leaves, in = aidx.inners;
		struct a_tx tx;

		tx.fail = true;
		if (a_set_tx(&aidx, m_start[s] + 1, m_end[s] - 1, slot_pol(s, 0), &tx) != -ENOMEM)
			die("bplus: a set that could allocate nothing did not fail");
		if (aidx.root != root || aidx.leaves != lv || aidx.inners != in)
			die("bplus: a failed set changed the index");
	}
}

static void mode_upkeep(uint64_t n, uint64_t sets)
{
	uint64_t rng = 77, i;
	int round;
	double t_rb[2], t_a[2], t_rcu[2], t0;

	build(n, 1);
	bidx.cur = NULL;
	check_structure();
	a_enomem_check(&rng);
	b_fold(&bidx, &rbt, nslots + 8, false);
	npick = sets < n ? sets : n;
	pick = xalloc(npick * sizeof(*pick));
	/* Distinct full slots: a prefix of a shuffle of list[0, nfull). */
	for (i = 0; i < nfull; i++)
		list_swap(i, i + below(&rng, nfull - i));
	for (i = 0; i < npick; i++)
		pick[i] = i;

	CALLGRIND_START_INSTRUMENTATION;
	for (round = 0; round < 2; round++) {
		bool rep = round == 0;

		t0 = (double)now_ns();
		u_rb_all(rep);
		t_rb[round] = (double)now_ns() - t0;
		t0 = (double)now_ns();
		u_rcu_all(rep);
		t_rcu[round] = (double)now_ns() - t0;
		t0 = (double)now_ns();
		u_bplus_all(rep);
		t_a[round] = (double)now_ns() - t0;
		if (rep)
			for (i = 0; i < npick; i++)
				m_alt[list[pick[i]]] ^= 1;
	}
	/* The delta: D_MAX / 4 sets of each kind fit. */
	{
		uint64_t keep = npick;

		npick = keep < D_MAX / 8 ? keep : D_MAX / 8;
		u_delta_replace();
		for (i = 0; i < npick; i++)
			m_alt[list[pick[i]]] ^= 1;
		u_delta_split();
		u_delta_unsplit();
		u_delta_remove();
		u_delta_readd();
		/* The tree took none of the delta's sets but the replaces: redo them on it. */
		for (i = 0; i < npick; i++) {
			uint32_t s = list[pick[i]];

			rb_set(m_start[s], m_end[s], slot_pol(s, m_alt[s]));
			if (ps_store_set(store, m_start[s], m_end[s], slot_pol(s, m_alt[s])) ||
					a_set(&aidx, m_start[s], m_end[s], slot_pol(s, m_alt[s])))
				die("set");
		}
		npick = keep;
	}
	u_stree_rebuild();
	u_eytz_rebuild();
	CALLGRIND_STOP_INSTRUMENTATION;
	ps_store_synchronize(store);
	check_structure();
	check_all(20000, 12, false);
	printf("n %llu sets_per_kind %llu wall_ns_per_set(1 run, noisy) replace: rb %.0f rcu %.0f "
	       "bplus %.0f; split+unsplit+remove+readd: rb %.0f rcu %.0f bplus %.0f\n",
			(unsigned long long)n, (unsigned long long)npick, t_rb[0] / npick,
			t_rcu[0] / npick, t_a[0] / npick, t_rb[1] / npick / 4, t_rcu[1] / npick / 4,
			t_a[1] / npick / 4);
	printf("bplus leaves %zu inners %zu bytes/range %.1f\n", aidx.leaves, aidx.inners,
			(double)a_bytes() / rbt.count);
}

int main(int argc, char **argv)
{
	uint64_t n, k;

	if (argc < 3)
		die("usage: ridx test|lookup|upkeep N [COUNT]");
	n = strtoull(argv[2], NULL, 0);
	k = argc > 3 ? strtoull(argv[3], NULL, 0) : 0;
	if (n < 4)
		die("N: at least 4");
	if (!strcmp(argv[1], "test")) {
		test_only = true;
		mode_lookup(n, 1000);
	} else if (!strcmp(argv[1], "lookup"))
		mode_lookup(n, k ? k : 100000);
	else if (!strcmp(argv[1], "upkeep"))
		mode_upkeep(n, k ? k : 2000);
	else
		die("mode: lookup or upkeep");
	return 0;
}
