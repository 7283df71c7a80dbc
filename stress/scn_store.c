// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The store scenarios of polstore-stress: lookup-cost, shared-text,
 * hot-policy and write-cost, for the five store variants (each with and without the
 * policy reference) and three baselines built on the very same range tree
 * (src/rangetree.h): no synchronisation, a pthread_rwlock_t and a
 * pthread_mutex_t around it.
 *
 * The tree.  The P pages are cut into N equal slots (the last one takes
 * the remainder); slot i starts as one range.  Policies come from a pool:
 * K = min(N, 4096) "colours", two policies per colour; slot i may only
 * ever hold policies of colour i % K.  Writers set either a whole slot or a
 * random sub-range inside one slot, alternating the two policies of its
 * colour, so the range count stays near N (between N and about 3N) and
 * every page is always covered.
 *
 * Validation.  Every lookup's result is checked: the policy pointer is
 * looked up in a read-only hash of the pool (pointer -> colour), and the
 * colour must be that of the page's slot.  A NULL result, a pointer that is
 * not in the pool, or a policy of another slot aborts the run with a clear
 * message.  The pool's policies are referenced by the program for the whole
 * run, so a pointer value stays unambiguous after its section ends.  At the
 * end of a point, ps_store_check() (or ps_rtree_check() for baselines) and
 * a walk of every range against the slot rule.
 *
 * Measurement.  One iteration in 32 is timed with the TSC: the lookup
 * (section, lookup, reference and put) goes to a per-rank latency
 * histogram, and lookup_share is the sum of those lookup times over the
 * sum of the same iterations' whole times (lookup, check, fault work,
 * quiescent state).  A preemption inside a sampled lookup thus counts in
 * both sums and the share stays within [0, 1]; it is the fraction of a
 * fault spent looking up, as a profile of the rank would show it.  The
 * other 31 iterations run untimed.  Throughput counts every lookup.
 */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>
#include <polstore/static/lookup.h> /* the :inline forms call its functions directly */

#include "policy_internal.h" /* the unsync baseline's bare atomic count */
#include "rangetree.h"
#include "stress.h"

/* ---- variants ---------------------------------------------------------------- */

enum vkind { V_UNSYNC, V_MUTEX, V_PRWLOCK, V_STORE };

/* How a rank asks: with a reference, borrowed in a section, copied out, or for a node. */
enum vform { F_REF, F_NOREF, F_COPY, F_NODE };

struct variant {
	const char *name;
	enum vkind kind;
	int sync;      /* enum ps_sync for V_STORE */
	bool noref;    /* no policy reference taken: F_NOREF, F_COPY, F_NODE */
	bool lockstat; /* the store has a lock lock_stat can show */
	enum vform form;
	bool inl;      /* the read side inlined (polstore/static/lookup.h, POLSTORE_INLINE) */
};

#define STORE_FORMS(name, sync, ls)                                                                \
	{name, V_STORE, sync, false, ls, F_REF, false},                                            \
	{name ":noref", V_STORE, sync, true, ls, F_NOREF, false},                                  \
	{name ":copy", V_STORE, sync, true, ls, F_COPY, false},                                    \
	{name ":node", V_STORE, sync, true, ls, F_NODE, false},                                    \
	{name ":inline", V_STORE, sync, false, ls, F_REF, true},                                   \
	{name ":noref:inline", V_STORE, sync, true, ls, F_NOREF, true},                            \
	{name ":copy:inline", V_STORE, sync, true, ls, F_COPY, true},                              \
	{name ":node:inline", V_STORE, sync, true, ls, F_NODE, true}

static const struct variant variants[] = {
		{"unsync", V_UNSYNC, -1, false, false, F_REF, false},
		{"unsync:noref", V_UNSYNC, -1, true, false, F_NOREF, false},
		{"unsync:copy", V_UNSYNC, -1, true, false, F_COPY, false},
		{"unsync:node", V_UNSYNC, -1, true, false, F_NODE, false},
		{"pthread_mutex", V_MUTEX, -1, false, false, F_REF, false},
		{"pthread_rwlock", V_PRWLOCK, -1, false, false, F_REF, false},
		STORE_FORMS("spin", PS_SYNC_SPIN, true),
		STORE_FORMS("rwlock", PS_SYNC_RWLOCK, true),
		STORE_FORMS("seqlock", PS_SYNC_SEQLOCK, true),
		STORE_FORMS("rcu", PS_SYNC_RCU, false),
		STORE_FORMS("rcu-qsbr", PS_SYNC_RCU_QSBR, false),
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))
/* variants[0 .. NBASELINES - 1]: the unsynchronised baselines, one per form, in form order. */
#define NBASELINES 4

/* Like with like: each form is compared with the unsynchronised walk doing the same. */
static const char *baseline_of(const struct variant *v)
{
	return variants[v->form].name;
}

static const struct variant *unsync_noref = &variants[F_NOREF];

/* ---- the baselines' structure: one range tree and the hand-written locks ---- */

struct base {
	struct ps_rtree tree;
	pthread_rwlock_t rw;
	pthread_mutex_t mu;
};

/* ---- policy pool and its validation hash ------------------------------------ */

#define MAX_COLOURS 4096

struct pool {
	struct ps_policy **pol; /* [colour * 2 + alt] */
	uint32_t ncolours;
	const void **key; /* open addressing, read-only while threads run */
	uint32_t *colour;
	unsigned shift; /* 64 - log2(table size) */
};

static struct pool pool;

static inline size_t pool_hash(const void *p)
{
	return (size_t)(((uintptr_t)p * 0x9E3779B97F4A7C15ULL) >> pool.shift);
}

/* The colour of @p, or -1 when @p is not a pool policy. */
static inline int pool_colour(const void *p)
{
	size_t mask = ((size_t)1 << (64 - pool.shift)) - 1, i;

	for (i = pool_hash(p);; i = (i + 1) & mask) {
		if (pool.key[i] == p)
			return (int)pool.colour[i];
		if (!pool.key[i])
			return -1;
	}
}

/*
 * A machine of 64 nodes, each with memory, 10 to itself and 20 to every
 * other: the pool's one-node policies name nodes 0-63, and a node lookup
 * returns only nodes of the topology in force.
 */
static void pool_topology(void)
{
	static unsigned char dist[64 * 64];
	int i, j;

	for (i = 0; i < 64; i++)
		for (j = 0; j < 64; j++)
			dist[i * 64 + j] = i == j ? 10 : 20;
	if (ps_numa_set_topology(64, dist, NULL))
		stress_die("ps_numa_set_topology: out of memory");
}

static void pool_create(uint32_t ncolours)
{
	unsigned bits = 1;
	uint32_t c;
	int alt;

	pool_topology();
	pool.ncolours = ncolours;
	while (((size_t)1 << bits) < (size_t)ncolours * 2 * 4)
		bits++;
	pool.shift = 64 - bits;
	pool.pol = calloc((size_t)ncolours * 2, sizeof(*pool.pol));
	pool.key = calloc((size_t)1 << bits, sizeof(*pool.key));
	pool.colour = calloc((size_t)1 << bits, sizeof(*pool.colour));
	if (!pool.pol || !pool.key || !pool.colour)
		stress_die("out of memory for the policy pool");
	for (c = 0; c < ncolours; c++) {
		for (alt = 0; alt < 2; alt++) {
			unsigned long mask = 1UL << (c % 64);
			struct ps_policy *p = ps_policy_create(
					alt ? PS_MPOL_INTERLEAVE : PS_MPOL_BIND, 0, &mask, 64);
			size_t i, m = ((size_t)1 << bits) - 1;

			if (!p)
				stress_die("ps_policy_create: %s", strerror(errno));
			pool.pol[c * 2 + alt] = p;
			for (i = pool_hash(p); pool.key[i]; i = (i + 1) & m)
				;
			pool.key[i] = p;
			pool.colour[i] = c;
		}
	}
}

static void pool_destroy(void)
{
	uint32_t i;

	for (i = 0; i < pool.ncolours * 2; i++)
		ps_policy_put(pool.pol[i]);
	free(pool.pol);
	free(pool.key);
	free(pool.colour);
	memset(&pool, 0, sizeof(pool));
}

/* ---- one point's context ----------------------------------------------------- */

struct layout {
	uint64_t pages;
	uint64_t nslots;
	uint64_t slot_len;
	int slot_shift;	   /* log2(slot_len) when a power of two, else -1 */
	uint64_t lo, n;	   /* readers draw pages from [lo, lo + n) */
	uint64_t hot_slot; /* hot-policy: the slot writers leave alone; else ~0 */
};

static inline uint64_t slot_of(const struct layout *l, uint64_t page)
{
	uint64_t s = l->slot_shift >= 0 ? page >> l->slot_shift : page / l->slot_len;

	return s < l->nslots ? s : l->nslots - 1;
}

static inline uint64_t slot_start(const struct layout *l, uint64_t s)
{
	return s * l->slot_len;
}

static inline uint64_t slot_end(const struct layout *l, uint64_t s)
{
	return s + 1 == l->nslots ? l->pages : (s + 1) * l->slot_len;
}

static inline uint32_t colour_of_slot(uint64_t s)
{
	return (uint32_t)(s % pool.ncolours);
}

struct ctx;

struct rank {
	struct ctx *c;
	pthread_t th;
	int id;
	uint64_t seed;
	uint64_t ops;
	uint64_t t_start, t_end, cpu_start, cpu_end;
	/* Sampled iterations, whole (lookup, check, work, quiescence), and their lookups. */
	uint64_t iter_ticks, lookup_ticks;
	/* The same over samples that kept the CPU (iteration < STRESS_ONCPU_NS). */
	uint64_t iter_ticks_oncpu, lookup_ticks_oncpu;
	struct stress_hist hist;
} __attribute__((aligned(64)));

struct writer {
	struct ctx *c;
	pthread_t th;
	int id;
	uint64_t ops;
	uint64_t max_wait_ns;
} __attribute__((aligned(64)));

struct ctx {
	const struct variant *v;
	struct ps_store *store;
	struct base *base;
	struct layout l;
	unsigned work_iters;
	bool sequential;
	int nranks;
	struct stress_gate gate;
	int stop __attribute__((aligned(64))); /* read by every rank, written once */
	char pad[60];
};

static void __attribute__((noinline, noreturn))
bad_lookup(const struct ctx *c, uint64_t page, const void *pol)
{
	uint64_t s = slot_of(&c->l, page);
	int got = pol ? pool_colour(pol) : -1;

	if (!pol)
		stress_fail("VALIDATION FAILED: %s: lookup of page %llu returned no policy, "
			    "but every page is always covered (slot %llu)",
				c->v->name, (unsigned long long)page, (unsigned long long)s);
	if (got < 0)
		stress_fail("VALIDATION FAILED: %s: lookup of page %llu returned %p, a policy "
			    "that was never set in this store",
				c->v->name, (unsigned long long)page, pol);
	stress_fail("VALIDATION FAILED: %s: lookup of page %llu (slot %llu, colour %u) returned "
		    "a policy only ever set in slots of colour %d",
			c->v->name, (unsigned long long)page, (unsigned long long)s,
			colour_of_slot(s), got);
}

static inline void validate(const struct ctx *c, uint64_t page, const void *pol)
{
	if (ps_unlikely(!pol || pool_colour(pol) != (int)colour_of_slot(slot_of(&c->l, page))))
		bad_lookup(c, page, pol);
}

/*
 * The :copy and :node forms: a pool policy of colour k holds node k % 64
 * alone, so the copy's first mask word is 1 << (k % 64) and the node is
 * k % 64 (from local node 0: a one-node mask allows nothing else).
 */
static void __attribute__((noinline, noreturn))
bad_value(const struct ctx *c, uint64_t page, uintptr_t got, uintptr_t want)
{
	stress_fail("VALIDATION FAILED: %s: lookup of page %llu gave %#llx, want %#llx "
		    "(colour %u)", c->v->name, (unsigned long long)page, (unsigned long long)got,
			(unsigned long long)want, colour_of_slot(slot_of(&c->l, page)));
}

static inline void validate_node(const struct ctx *c, uint64_t page, int node)
{
	uintptr_t want = colour_of_slot(slot_of(&c->l, page)) % 64;

	if (ps_unlikely((uintptr_t)node != want))
		bad_value(c, page, (uintptr_t)node, want);
}

static inline void validate_view(const struct ctx *c, uint64_t page, const struct ps_policy_view *v)
{
	uintptr_t want = 1UL << (colour_of_slot(slot_of(&c->l, page)) % 64);

	if (ps_unlikely(v->nodes[0] != want || v->weight != 1))
		bad_value(c, page, v->nodes[0], want);
}

static inline uint64_t next_page(const struct ctx *c, uint64_t *rng, uint64_t *seq)
{
	if (c->sequential) {
		uint64_t p = c->l.lo + *seq;

		if (++*seq == c->l.n)
			*seq = 0;
		return p;
	}
	return c->l.lo + stress_below(rng, c->l.n);
}

static inline const struct ps_policy *base_lookup(struct base *b, uint64_t page)
{
	struct ps_range *r = ps_rtree_lookup(&b->tree, page);

	return r ? r->pol : NULL;
}

/* The node lookup of the unsynchronised walk: the range's hint, as the stores' (lookup.h). */
static inline int base_node(struct base *b, uint64_t page, int local)
{
	struct ps_range *r = ps_rtree_lookup(&b->tree, page);

	return r ? _ps_policy_node_hinted(r->node_hint, r->pol, page, local) : local;
}

/*
 * The lookups, one per variant.  "ref" lookups return a policy reference
 * that is put right after (as a fault would once it allocated the page);
 * "noref" lookups borrow the pointer inside a read-side section.  Both
 * forms are timed whole: section, lookup, reference and put.
 */
/*
 * lookup_share is computed twice: over every sampled iteration, and over
 * those that took less than STRESS_ONCPU_NS, i.e. where the rank most
 * likely kept its CPU.  On a machine shared with other work one preemption
 * of a few ms inside a 30 ns lookup otherwise decides the share; the first
 * form keeps it (waiting for a preempted lock holder is a real cost under
 * oversubscription), the second shows the share while running.
 */
#define STRESS_ONCPU_NS 100000

static uint64_t oncpu_ticks; /* STRESS_ONCPU_NS in ticks */

static inline void sample_share(struct rank *rk, uint64_t lookup, uint64_t iter)
{
	rk->lookup_ticks += lookup;
	rk->iter_ticks += iter;
	if (iter < oncpu_ticks) {
		rk->lookup_ticks_oncpu += lookup;
		rk->iter_ticks_oncpu += iter;
	}
}

/*
 * The variables a lookup (LK_*) writes: the policy of the :ref and :noref
 * forms, the node of :node, the copy of :copy.
 */
#define LOOKUP_VARS                                                                                \
	const void *pol __attribute__((unused));                                                   \
	int node __attribute__((unused));                                                          \
	struct ps_policy_view view __attribute__((unused)) = PS_POLICY_VIEW_INIT(1)

/*
 * What a form's lookup yields (OUT: POL, COPY or NODE): CK_OUT validates
 * it, RES_OUT is the value the cost loop sums so the lookup is not
 * optimised away.  A copy is consumed whole, so no form can skip loading
 * what it copied.
 */
#define CK_POL validate(c, page, pol)
#define CK_COPY validate_view(c, page, &view)
#define CK_NODE validate_node(c, page, node)
#define RES_POL ((uintptr_t)pol)
#define RES_COPY                                                                                   \
	(view.nodes[0] + (uintptr_t)view.mode + (uintptr_t)view.flags + (uintptr_t)view.weight)
#define RES_NODE ((uintptr_t)node)

/*
 * The unsync baseline's reference is one bare atomic word, as
 * ps_policy_get()/put() were before issue 12 (two calls, as then): it stays
 * the atomic-count baseline beside the stores' striped counts, whichever
 * mode the pool's policies are in (@refcnt is valid in every mode, see
 * src/policy_internal.h; the pool's own reference keeps it above 0).
 */
__attribute__((noinline)) static const void *atomic_get(const void *pol)
{
	if (pol)
		__atomic_fetch_add(&((struct ps_policy *)pol)->refcnt, 1, __ATOMIC_RELAXED);
	return pol;
}

__attribute__((noinline)) static void atomic_put(const void *pol)
{
	if (pol)
		__atomic_fetch_sub(&((struct ps_policy *)pol)->refcnt, 1, __ATOMIC_RELEASE);
}

/* The unsynchronised walk of the bare tree, in each form: LK_UNSYNC(REF) ... */
#define LK_UNSYNC(form) LK_UNSYNC_##form
#define LK_UNSYNC_REF                                                                              \
	do {                                                                                       \
		pol = atomic_get(base_lookup(c->base, page));                                      \
		atomic_put(pol);                                                                   \
	} while (0)
#define LK_UNSYNC_NOREF pol = base_lookup(c->base, page)
#define LK_UNSYNC_COPY _ps_policy_view_fill(base_lookup(c->base, page), &view)
#define LK_UNSYNC_NODE node = base_node(c->base, page, 0)

/* The hand-written locks: the lookup and its reference taken under the lock, put after it. */
#define LK_LOCKED(LOCK, UNLOCK, field)                                                             \
	do {                                                                                       \
		LOCK(&c->base->field);                                                             \
		pol = ps_policy_get((struct ps_policy *)base_lookup(c->base, page));               \
		UNLOCK(&c->base->field);                                                           \
		ps_policy_put((struct ps_policy *)pol);                                            \
	} while (0)
#define LK_MUTEX LK_LOCKED(pthread_mutex_lock, pthread_mutex_unlock, mu)
#define LK_PRWLOCK LK_LOCKED(pthread_rwlock_rdlock, pthread_rwlock_unlock, rw)

/*
 * A store's lookup in each form, through one read API: ps_store_*() (the
 * library's calls), or _ps_inl_*() for the :inline forms, the functions
 * POLSTORE_INLINE maps the public names to.  The one-call forms (:copy,
 * :node) need no section of their own.
 */
#define LK_REF(API)                                                                                \
	do {                                                                                       \
		pol = API##_lookup(c->store, page);                                                \
		ps_policy_put((struct ps_policy *)pol);                                            \
	} while (0)
#define LK_NOREF(API)                                                                              \
	do {                                                                                       \
		API##_read_lock(c->store);                                                         \
		pol = API##_lookup_borrow(c->store, page);                                         \
		API##_read_unlock(c->store);                                                       \
	} while (0)
#define LK_COPY(API) API##_lookup_copy(c->store, page, &view)
#define LK_NODE(API) node = API##_lookup_node(c->store, page, 0)
#define LK_STORE(form) LK_##form(ps_store)
#define LK_INL(form) LK_##form(_ps_inl)

/*
 * Every lookup loop a variant may run, as X(name, LOOKUP, OUT, QUIESCE):
 * QUIESCE is what a reader does between lookups (rcu-qsbr's quiescent
 * state; a rank after each one, the cost loop every 1024).  The
 * ranks' loops and the cost loops are both generated from this one list,
 * and both indexed by its enum loop_id; FORM_LOOPS lists the forms in
 * enum vform order, so a form's loop is its first one + v->form.
 */
#define FORM_LOOPS(X, name, LK, QUIESCE)                                                           \
	X(name##_ref, LK(REF), POL, QUIESCE)                                                       \
	X(name##_noref, LK(NOREF), POL, QUIESCE)                                                   \
	X(name##_copy, LK(COPY), COPY, QUIESCE)                                                    \
	X(name##_node, LK(NODE), NODE, QUIESCE)
#define LOOPS(X)                                                                                   \
	FORM_LOOPS(X, unsync, LK_UNSYNC, (void)0)                                                  \
	X(mutex, LK_MUTEX, POL, (void)0)                                                           \
	X(prwlock, LK_PRWLOCK, POL, (void)0)                                                       \
	FORM_LOOPS(X, store, LK_STORE, (void)0)                                                    \
	FORM_LOOPS(X, store_inl, LK_INL, (void)0)                                                  \
	FORM_LOOPS(X, qsbr, LK_STORE, ps_qsbr_quiescent())                                         \
	FORM_LOOPS(X, qsbr_inl, LK_INL, ps_qsbr_quiescent())

#define LOOP_ID(name, LOOKUP, OUT, QUIESCE) L_##name,
enum loop_id { LOOPS(LOOP_ID) NLOOPS };
_Static_assert(L_store_node - L_store_ref == F_NODE && L_store_copy - L_store_ref == F_COPY,
		"FORM_LOOPS lists the forms in enum vform order");

static bool is_qsbr(const struct variant *v)
{
	return v->kind == V_STORE && v->sync == PS_SYNC_RCU_QSBR;
}

/* The loop of @v in LOOPS. */
static unsigned loop_of(const struct variant *v)
{
	switch (v->kind) {
	case V_UNSYNC:
		return L_unsync_ref + v->form;
	case V_MUTEX:
		return L_mutex;
	case V_PRWLOCK:
		return L_prwlock;
	case V_STORE:
		break;
	}
	if (is_qsbr(v))
		return (v->inl ? L_qsbr_inl_ref : L_qsbr_ref) + v->form;
	return (v->inl ? L_store_inl_ref : L_store_ref) + v->form;
}

/* A rank's loop, specialised per lookup form so no call is added around it. */
#define DEFINE_RANK_LOOP(name, LOOKUP, OUT, QUIESCE)                                               \
	static void rank_##name(struct rank *rk)                                                   \
	{                                                                                          \
		struct ctx *c = rk->c;                                                             \
		uint64_t rng = rk->seed, ops = 0;                                                  \
		uint64_t seq = c->sequential ? (uint64_t)rk->id * c->l.n / (uint64_t)c->nranks     \
					     : 0;                                                  \
		LOOKUP_VARS;                                                                       \
                                                                                                   \
		while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {                             \
			uint64_t page = next_page(c, &rng, &seq);                                  \
                                                                                                   \
			if (!(ops & STRESS_SAMPLE_MASK)) {                                         \
				uint64_t t0 = stress_ticks(), t1;                                  \
				LOOKUP;                                                            \
				t1 = stress_ticks();                                               \
				CK_##OUT;                                                          \
				stress_work(c->work_iters);                                        \
				QUIESCE;                                                           \
				stress_hist_add(&rk->hist, t1 - t0);                               \
				sample_share(rk, t1 - t0, stress_ticks() - t0);                    \
			} else {                                                                   \
				LOOKUP;                                                            \
				CK_##OUT;                                                          \
				stress_work(c->work_iters);                                        \
				QUIESCE;                                                           \
			}                                                                          \
			ops++;                                                                     \
		}                                                                                  \
		rk->ops = ops;                                                                     \
	}
#define RANK_LOOP_FN(name, LOOKUP, OUT, QUIESCE) rank_##name,
LOOPS(DEFINE_RANK_LOOP)
static void (*const rank_loops[NLOOPS])(struct rank *) = {LOOPS(RANK_LOOP_FN)};

static void *rank_main(void *arg)
{
	struct rank *rk = arg;
	struct ctx *c = rk->c;
	bool qsbr = is_qsbr(c->v);

	stress_gate_wait(&c->gate);
	/* QSBR rules (polstore/rcu.h): online to read, quiescent every loop, offline to leave. */
	if (qsbr)
		ps_qsbr_thread_online();
	rk->t_start = stress_now_ns();
	rk->cpu_start = stress_thread_cpu_ns();
	rank_loops[loop_of(c->v)](rk);
	rk->t_end = stress_now_ns();
	rk->cpu_end = stress_thread_cpu_ns();
	if (qsbr)
		ps_qsbr_thread_offline();
	return NULL;
}

/* ---- writers ---------------------------------------------------------------- */

static void base_set(struct ctx *c, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_range_list spares = {NULL, 0, NULL}, removed = {NULL, 0, NULL};

	/* As the library's locked_set(): allocate first, then change under the lock. */
	if (ps_range_list_fill(&spares, PS_RTREE_SET_MAX_NEW))
		stress_die("out of memory");
	if (c->v->kind == V_MUTEX)
		pthread_mutex_lock(&c->base->mu);
	else if (c->v->kind == V_PRWLOCK)
		pthread_rwlock_wrlock(&c->base->rw);
	ps_rtree_set(&c->base->tree, start, end, pol, &spares, &removed);
	if (c->v->kind == V_MUTEX)
		pthread_mutex_unlock(&c->base->mu);
	else if (c->v->kind == V_PRWLOCK)
		pthread_rwlock_unlock(&c->base->rw);
	ps_range_list_free(&removed);
	ps_range_list_free(&spares);
}

static void do_set(struct ctx *c, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	int ret;

	if (c->v->kind != V_STORE) {
		base_set(c, start, end, pol);
		return;
	}
	ret = ps_store_set(c->store, start, end, pol);
	if (ret)
		stress_die("ps_store_set(%llu, %llu): %s", (unsigned long long)start,
				(unsigned long long)end, strerror(-ret));
}

/* @n sets as one update: ps_store_set_many() on a store, one base_set() after another on a baseline. */
static void do_set_many(struct ctx *c, const struct ps_set_op *ops, size_t n)
{
	size_t i;
	int ret;

	if (c->v->kind != V_STORE) {
		for (i = 0; i < n; i++)
			base_set(c, ops[i].start, ops[i].end, ops[i].pol);
		return;
	}
	ret = ps_store_set_many(c->store, ops, n);
	if (ret)
		stress_die("ps_store_set_many(%zu ops): %s", n, strerror(-ret));
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct ctx *c = w->c;
	uint64_t rng = stress_seed_for(stress_opts.seed, 100000 + (uint64_t)w->id);
	uint64_t interval = stress_opts.write_interval_ns, next, first_due;
	size_t batch = stress_opts.batch > 1 ? (size_t)stress_opts.batch : 1, b;
	struct ps_set_op *ops = calloc(batch, sizeof(*ops));
	unsigned alt = 0;

	if (!ops)
		stress_die("out of memory");

	stress_gate_wait(&c->gate);
	next = stress_now_ns();
	first_due = next + interval;
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		uint64_t s, lo, hi, start, end, t0, t1;

		if (interval) {
			uint64_t now = stress_now_ns();

			next += interval;
			if (next > now)
				stress_sleep_until(next);
			else
				next = now; /* late: no burst to catch up */
			if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
				break;
		}
		/* --batch N: N such sets in one ps_store_set_many() (baselines: one after another). */
		for (b = 0; b < batch; b++) {
			do
				s = stress_below(&rng, c->l.nslots);
			while (s == c->l.hot_slot && c->l.nslots > 1);
			lo = slot_start(&c->l, s);
			hi = slot_end(&c->l, s);
			if (stress_rand(&rng) & 1) {
				start = lo;
				end = hi;
			} else {
				start = lo + stress_below(&rng, hi - lo);
				end = start + 1 + stress_below(&rng, hi - start);
			}
			alt ^= 1;
			ops[b] = (struct ps_set_op){start, end, pool.pol[colour_of_slot(s) * 2 + alt]};
		}
		t0 = stress_now_ns();
		if (batch == 1)
			do_set(c, ops[0].start, ops[0].end, ops[0].pol);
		else
			do_set_many(c, ops, batch);
		t1 = stress_now_ns();
		w->ops += batch;
		if (t1 - t0 > w->max_wait_ns)
			w->max_wait_ns = t1 - t0;
	}
	/*
	 * A writer that never completed a set (it never got a CPU, with 1024
	 * ranks) waited at least from its first due set until now.
	 */
	if (!w->ops) {
		uint64_t now = stress_now_ns();

		/* It may first run only after the point ended: then it waited 0 so far. */
		w->max_wait_ns = now > first_due ? now - first_due : 0;
	}
	free(ops);
	return NULL;
}

/*
 * The writers of a timed point: @nwriters of them on @c, started once its
 * @nranks ranks are and let go with them by the gate; the point then runs
 * for --duration and is stopped.  *@t_go and *@t_stop: when it started and
 * stopped.  Returns the writers, for writers_join().
 */
static struct writer *writers_run(
		struct ctx *c, int nwriters, int nranks, uint64_t *t_go, uint64_t *t_stop)
{
	size_t size = sizeof(struct writer) * (size_t)(nwriters ? nwriters : 1);
	struct writer *writers = aligned_alloc(64, size);
	int i;

	if (!writers)
		stress_die("out of memory");
	memset(writers, 0, size);
	for (i = 0; i < nwriters; i++) {
		writers[i].c = c;
		writers[i].id = i;
		stress_thread_start(&writers[i].th, writer_main, &writers[i]);
	}
	*t_go = stress_gate_open(&c->gate, nranks + nwriters);
	stress_sleep_until(*t_go + (uint64_t)(stress_opts.duration_s * 1e9));
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	*t_stop = stress_now_ns();
	return writers;
}

/*
 * Join and free the writers of writers_run(), once the ranks are joined:
 * QSBR writers in a grace period finish once the ranks went offline.  @p
 * (its duration_s set) gets their number, sets per second and longest wait.
 */
static void writers_join(struct writer *writers, int nwriters, struct stress_point *p)
{
	uint64_t wops = 0, wmax = 0;
	int i;

	for (i = 0; i < nwriters; i++) {
		pthread_join(writers[i].th, NULL);
		wops += writers[i].ops;
		if (writers[i].max_wait_ns > wmax)
			wmax = writers[i].max_wait_ns;
	}
	free(writers);
	p->writers = nwriters;
	if (nwriters) {
		p->writer_ops_per_sec = (double)wops / p->duration_s;
		p->writer_max_wait_ns = (double)wmax;
	}
}

/* ---- building and checking the tree ----------------------------------------- */

static void layout_init(struct layout *l, uint64_t pages, uint64_t nranges, bool hot)
{
	memset(l, 0, sizeof(*l));
	if (pages < nranges)
		pages = nranges;
	l->pages = pages;
	l->nslots = nranges;
	l->slot_len = pages / nranges;
	l->slot_shift = -1;
	if (!(l->slot_len & (l->slot_len - 1)))
		l->slot_shift = __builtin_ctzll(l->slot_len);
	l->hot_slot = ~0ULL;
	l->lo = 0;
	l->n = pages;
	if (hot) {
		l->hot_slot = l->nslots / 2;
		l->lo = slot_start(l, l->hot_slot);
		l->n = slot_end(l, l->hot_slot) - l->lo;
	}
}

static void ctx_build(struct ctx *c, const struct variant *v, const struct layout *l)
{
	uint64_t s;

	memset(c, 0, sizeof(*c));
	c->v = v;
	c->l = *l;
	if (v->kind == V_STORE) {
		/* Fill from a thread that never reads: no reader is registered, grace periods are
		 * short. */
		/* :inline forms: created as a POLSTORE_INLINE program creates them (version checked). */
		c->store = v->inl ? _ps_store_create_inline((enum ps_sync)v->sync, _PS_INLINE_ABI)
				  : ps_store_create((enum ps_sync)v->sync);
		if (!c->store)
			stress_die("ps_store_create(%s): %s", v->name, strerror(errno));
	} else {
		c->base = calloc(1, sizeof(*c->base));
		if (!c->base)
			stress_die("out of memory");
		ps_rtree_init(&c->base->tree);
		pthread_rwlock_init(&c->base->rw, NULL);
		pthread_mutex_init(&c->base->mu, NULL);
	}
	for (s = 0; s < l->nslots; s++)
		do_set(c, slot_start(l, s), slot_end(l, s), pool.pol[colour_of_slot(s) * 2]);
}

struct walk_check {
	const struct ctx *c;
	uint64_t n;
};

static int walk_one(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct walk_check *w = arg;
	const struct layout *l = &w->c->l;
	uint64_t s = slot_of(l, start);

	if (end > slot_end(l, s) || pool_colour(pol) != (int)colour_of_slot(s))
		stress_fail("VALIDATION FAILED: %s: range [%llu, %llu) crosses its slot or holds "
			    "a policy of another slot",
				w->c->v->name, (unsigned long long)start, (unsigned long long)end);
	w->n += end - start;
	return 0;
}

/* Tree invariants and the slot rule over every range; returns the range count. */
static uint64_t ctx_check(struct ctx *c)
{
	struct walk_check w = {c, 0};
	const char *why = "?";
	uint64_t count;

	if (c->v->kind == V_STORE) {
		if (ps_store_check(c->store, &why))
			stress_fail("VALIDATION FAILED: %s: ps_store_check(): %s", c->v->name, why);
		ps_store_foreach(c->store, walk_one, &w);
		count = ps_store_count(c->store);
	} else {
		if (ps_rtree_check(&c->base->tree, &why))
			stress_fail("VALIDATION FAILED: %s: ps_rtree_check(): %s", c->v->name, why);
		ps_rtree_foreach(&c->base->tree, walk_one, &w);
		count = c->base->tree.count;
	}
	if (w.n != c->l.pages)
		stress_fail("VALIDATION FAILED: %s: ranges cover %llu pages of %llu", c->v->name,
				(unsigned long long)w.n, (unsigned long long)c->l.pages);
	return count;
}

static void ctx_destroy(struct ctx *c)
{
	if (c->store) {
		ps_store_destroy(c->store);
	} else {
		struct ps_range_list removed = {NULL, 0, NULL};

		ps_rtree_clear(&c->base->tree, &removed);
		ps_range_list_free(&removed);
		pthread_rwlock_destroy(&c->base->rw);
		pthread_mutex_destroy(&c->base->mu);
		free(c->base);
	}
}

/* ---- lookup-cost: one rank, no writer, no other work ------------------------ */

struct cost_arg {
	struct ctx *c;
	double seconds;
	bool null_lookup; /* measure the loop without a lookup: its overhead */
	double ns_per_iter;
};

#define COST_CHECK_MASK 255 /* validate one lookup in 256: the check is not the cost */

#define DEFINE_COST_LOOP(name, LOOKUP, OUT, QUIESCE)                                               \
	static uint64_t cost_##name(struct ctx *c, uint64_t deadline)                              \
	{                                                                                          \
		uint64_t rng = stress_seed_for(stress_opts.seed, 7), ops = 0, seq = 0;             \
		LOOKUP_VARS;                                                                       \
		uintptr_t sink = 0;                                                                \
                                                                                                   \
		for (;;) {                                                                         \
			unsigned i;                                                                \
                                                                                                   \
			for (i = 0; i < 1024; i++) {                                               \
				uint64_t page = next_page(c, &rng, &seq);                          \
                                                                                                   \
				LOOKUP;                                                            \
				sink += RES_##OUT;                                                 \
				if (!(i & COST_CHECK_MASK))                                        \
					CK_##OUT;                                                  \
			}                                                                          \
			QUIESCE;                                                                   \
			ops += 1024;                                                               \
			if (stress_now_ns() >= deadline)                                           \
				break;                                                             \
		}                                                                                  \
		__asm__ __volatile__("" ::"r"(sink));                                              \
		return ops;                                                                        \
	}
#define COST_LOOP_FN(name, LOOKUP, OUT, QUIESCE) cost_##name,
LOOPS(DEFINE_COST_LOOP)
static uint64_t (*const cost_loops[NLOOPS])(struct ctx *, uint64_t) = {LOOPS(COST_LOOP_FN)};

/* The loop without a lookup: its overhead. */
#define LK_NULL pol = pool.pol[colour_of_slot(slot_of(&c->l, page)) * 2]
DEFINE_COST_LOOP(null, LK_NULL, POL, (void)0)

static void *cost_main(void *arg)
{
	struct cost_arg *a = arg;
	struct ctx *c = a->c;
	bool qsbr = is_qsbr(c->v);
	uint64_t (*loop)(struct ctx *, uint64_t) =
			a->null_lookup ? cost_null : cost_loops[loop_of(c->v)];
	uint64_t t0, t1, ops, warm = stress_now_ns() + 20000000;

	if (qsbr)
		ps_qsbr_thread_online();
	/* Warm caches and registration, then measure. */
	loop(c, warm);
	/*
	 * Thread CPU time, not wall time: on a shared machine the time slices
	 * other processes take are not the lookup's cost.
	 */
	t0 = stress_thread_cpu_ns();
	ops = loop(c, stress_now_ns() + (uint64_t)(a->seconds * 1e9));
	t1 = stress_thread_cpu_ns();
	a->ns_per_iter = (double)(t1 - t0) / (double)ops;
	if (qsbr)
		ps_qsbr_thread_offline();
	return NULL;
}

static double measure_cost(struct ctx *c, double seconds, bool null_lookup)
{
	struct cost_arg a = {c, seconds, null_lookup, 0};
	pthread_t t;

	/* A fresh thread: the driver thread never registers with liburcu. */
	stress_thread_start(&t, cost_main, &a);
	pthread_join(t, NULL);
	return a.ns_per_iter;
}

/* Time of one unsynchronised lookup (with its loop) on a layout: the default fault work. */
static double calibrate_lookup_ns(const struct layout *l)
{
	struct ctx c;
	double ns;

	ctx_build(&c, unsync_noref, l);
	ns = measure_cost(&c, 0.05, false);
	ctx_destroy(&c);
	return ns;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Measuring time per lookup-cost measurement: --duration, at most 0.3 s. */
static double cost_seconds(void)
{
	return stress_opts.duration_s < 0.3 ? stress_opts.duration_s : 0.3;
}

/* Every unsync baseline runs (each form's ratio needs its own), the rest as --variants. */
static bool cost_selected(const struct variant *v)
{
	return v->kind == V_UNSYNC || stress_variant_selected(v->name);
}

/*
 * Repetition @rep of @reps of @v on layout @l, in a fresh context: its ns per
 * lookup, loop included.  The first one starts @p and measures the bytes
 * per range (allocated, and as ps_store_memory() says).
 */
static double cost_repetition(const struct variant *v, const struct layout *l, int rep, int reps,
		struct stress_point *p)
{
	uint64_t n = l->nslots;
	size_t before;
	struct ctx c;
	double ns;

	stress_progress("lookup-cost: %s, %llu ranges (repetition %d/%d)", v->name,
			(unsigned long long)n, rep + 1, reps);
	before = stress_live_bytes();
	ctx_build(&c, v, l);
	if (!rep) {
		stress_point_init(p, "lookup-cost", v->name, 1);
		p->pages = l->pages;
		p->ranges = n;
		p->bytes_per_range = (double)(stress_live_bytes() - before) / (double)n;
		p->store_bytes_per_range =
				c.store ? (double)ps_store_memory(c.store) / (double)n
					: (double)(sizeof(*c.base) + n * sizeof(struct ps_range)) /
								(double)n;
	}
	ns = measure_cost(&c, cost_seconds(), false);
	p->ranges_end = ctx_check(&c);
	ctx_destroy(&c);
	return ns;
}

/*
 * @p's times from its @reps repetitions @ns (sorted here), less the loop's
 * @overhead.  The fastest repetition is reported: on one rank without
 * writers, other processes (caches, a busy SMT sibling) only ever add time.
 */
static void cost_times(struct stress_point *p, double *ns, int reps, double overhead)
{
	qsort(ns, (size_t)reps, sizeof(double), dbl_cmp);
	p->reps = reps;
	p->overhead_ns = overhead;
	p->lookup_ns = ns[0] - overhead;
	p->lookup_ns_median = ns[reps / 2] - overhead;
	p->lookup_ns_max = ns[reps - 1] - overhead;
	p->ops_per_sec = 1e9 / ns[0];
	p->duration_s = cost_seconds();
}

void stress_run_lookup_cost(void)
{
	int r, reps = stress_opts.repeat, rep;
	size_t i;

	for (r = 0; r < stress_opts.nranges; r++) {
		uint64_t n = stress_opts.ranges[r];
		struct layout l;
		double base_ns[NBASELINES] = { -1, -1, -1, -1 }, overhead;
		double *ns = calloc(NVARIANTS * (size_t)reps, sizeof(*ns));
		struct stress_point *pts = calloc(NVARIANTS, sizeof(*pts));
		struct ctx c;

		if (!ns || !pts)
			stress_die("out of memory");
		pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
		layout_init(&l, stress_opts.pages, n, false);
		/* The loop without a lookup: RNG, sampled check, sink. */
		ctx_build(&c, unsync_noref, &l);
		overhead = measure_cost(&c, cost_seconds() / 2, true);
		ctx_destroy(&c);
		/* Repetitions interleaved across variants. */
		for (rep = 0; rep < reps; rep++)
			for (i = 0; i < NVARIANTS; i++)
				if (cost_selected(&variants[i]))
					ns[i * (size_t)reps + (size_t)rep] = cost_repetition(
							&variants[i], &l, rep, reps, &pts[i]);
		for (i = 0; i < NVARIANTS; i++) {
			if (!cost_selected(&variants[i]))
				continue;
			cost_times(&pts[i], &ns[i * (size_t)reps], reps, overhead);
			if (i < NBASELINES)
				base_ns[i] = pts[i].lookup_ns;
			pts[i].baseline = baseline_of(&variants[i]);
			pts[i].cost_ratio = pts[i].lookup_ns / base_ns[variants[i].form];
			stress_emit(&pts[i]);
		}
		free(ns);
		free(pts);
		pool_destroy();
	}
}

/* ---- shared-text and hot-policy ----------------------------------------------- */

/* @name is in --variants by itself ("all" does not count). */
static bool variant_named(const char *name)
{
	char buf[sizeof(stress_opts.variants)], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", stress_opts.variants);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, name))
			return true;
	return false;
}

/*
 * The multi-rank scenarios run a second each per point, so "all" there
 * means today's forms (counted and :noref) plus the node lookup, plain and
 * inlined, of the variants without a lock (what a fault path would use);
 * any other form runs when --variants names it.
 */
static bool multi_rank_wanted(const struct variant *v)
{
	if (!stress_variant_selected(v->name))
		return false;
	if (variant_named(v->name) || (v->form <= F_NOREF && !v->inl))
		return true;
	return v->form == F_NODE && (v->sync == PS_SYNC_RCU || v->sync == PS_SYNC_RCU_QSBR ||
					    v->sync == PS_SYNC_SEQLOCK);
}

/*
 * The points of shared-text and hot-policy, want[(nranks + 1) * NVARIANTS]:
 * slot [0][i] the 1-rank baselines, [r + 1][i] variant i at --ranks[r];
 * returns how many are wanted.
 */
static size_t store_points_wanted(bool *want)
{
	int nr = stress_opts.nranks, r;
	size_t i, n = 0;

	/* The 1-rank baselines of every form some selected variant uses. */
	for (i = NBASELINES; i < NVARIANTS; i++)
		if (multi_rank_wanted(&variants[i]))
			want[variants[i].form] = true;
	want[0] = want[1] = true;
	for (r = 0; r < nr; r++)
		for (i = 0; i < NVARIANTS; i++)
			want[(size_t)(r + 1) * NVARIANTS + i] =
					multi_rank_wanted(&variants[i]) &&
					!(stress_opts.ranks[r] == 1 && variants[i].kind == V_UNSYNC);
	for (i = 0; i < (size_t)(nr + 1) * NVARIANTS; i++)
		n += want[i];
	return n;
}

static int point_by_ops(const void *a, const void *b)
{
	double x = ((const struct stress_point *)a)->ops_per_sec;
	double y = ((const struct stress_point *)b)->ops_per_sec;

	return x < y ? -1 : x > y;
}

static void run_point(const char *scenario, const struct variant *v, const struct layout *l,
		int nranks, double fault_ns, unsigned work_iters, struct stress_point *out)
{
	struct ctx *c = aligned_alloc(64, sizeof(*c));
	struct rank *ranks;
	struct writer *writers;
	struct stress_point p;
	struct stress_hist *h;
	int nwriters = v->kind == V_UNSYNC ? 0 : stress_opts.writers, i;
	uint64_t t_go, t_stop, ops = 0;
	double lookup_ticks = 0, iter_ticks = 0, cpu_ns = 0, lookup_oncpu = 0, iter_oncpu = 0;

	if (!c)
		stress_die("out of memory");
	oncpu_ticks = (uint64_t)(STRESS_ONCPU_NS / stress_ns_per_tick);
	ctx_build(c, v, l);
	c->work_iters = work_iters;
	c->sequential = stress_opts.sequential;
	c->nranks = nranks;
	stress_gate_init(&c->gate);
	if (v->kind == V_STORE && v->lockstat && ps_lock_stat_enabled())
		ps_store_lock_stat_reset(c->store);
	ranks = aligned_alloc(64, sizeof(*ranks) * (size_t)nranks);
	h = calloc(1, sizeof(*h));
	if (!ranks || !h)
		stress_die("out of memory");
	memset(ranks, 0, sizeof(*ranks) * (size_t)nranks);
	for (i = 0; i < nranks; i++) {
		ranks[i].c = c;
		ranks[i].id = i;
		ranks[i].seed = stress_seed_for(stress_opts.seed, (uint64_t)i);
		stress_thread_start(&ranks[i].th, rank_main, &ranks[i]);
	}
	writers = writers_run(c, nwriters, nranks, &t_go, &t_stop);
	for (i = 0; i < nranks; i++) {
		pthread_join(ranks[i].th, NULL);
		ops += ranks[i].ops;
		stress_hist_merge(h, &ranks[i].hist);
		lookup_ticks += (double)ranks[i].lookup_ticks;
		iter_ticks += (double)ranks[i].iter_ticks;
		lookup_oncpu += (double)ranks[i].lookup_ticks_oncpu;
		iter_oncpu += (double)ranks[i].iter_ticks_oncpu;
		cpu_ns += (double)(ranks[i].cpu_end - ranks[i].cpu_start);
	}

	stress_point_init(&p, scenario, v->name, nranks);
	p.pages = l->pages;
	p.ranges = l->nslots;
	p.fault_work_ns = fault_ns;
	p.duration_s = (double)(t_stop - t_go) / 1e9;
	writers_join(writers, nwriters, &p);
	p.ops = ops;
	p.ops_per_sec = (double)ops / p.duration_s;
	p.lookup_share_all = iter_ticks > 0 ? lookup_ticks / iter_ticks : NAN;
	p.lookup_share = iter_oncpu > 0 ? lookup_oncpu / iter_oncpu : NAN;
	stress_hist_to_point(h, &p);
	p.baseline = baseline_of(v);
	p.rank_cpu_s = cpu_ns / 1e9;
	if (v->kind == V_STORE && v->lockstat && ps_lock_stat_enabled())
		p.has_lockstat = !ps_store_lock_stat_read(c->store, p.lockstat);
	p.ranges_end = ctx_check(c);
	*out = p;

	stress_gate_destroy(&c->gate);
	ctx_destroy(c);
	free(h);
	free(ranks);
	free(c);
}

void stress_run_store(const char *scenario)
{
	bool hot = !strcmp(scenario, "hot-policy");
	uint64_t n = stress_opts.ranges[0];
	struct layout l;
	double fault_ns;
	unsigned work_iters;

	pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
	layout_init(&l, stress_opts.pages, n, hot);
	fault_ns = stress_opts.fault_work_ns >= 0 ? (double)stress_opts.fault_work_ns
						  : calibrate_lookup_ns(&l);
	work_iters = stress_work_iters(fault_ns);
	stress_progress("%s: %llu pages, %llu ranges, fault work %.0f ns (%u loop iterations)",
			scenario, (unsigned long long)l.pages, (unsigned long long)n, fault_ns,
			work_iters);
	/*
	 * Every point --repeat times, the repetitions interleaved (all
	 * variants once, then again), so a burst of load from other processes
	 * hits one repetition of many variants rather than every repetition of
	 * one.  Reported: the repetition with the median throughput, and the
	 * worst writer wait of all repetitions.
	 */
	{
		int nr = stress_opts.nranks, reps = stress_opts.repeat, rep, k;
		size_t npt = (size_t)(nr + 1) * NVARIANTS;
		struct stress_point *all = calloc(npt * (size_t)reps, sizeof(*all));
		bool *want = calloc(npt, sizeof(*want));

		if (!all || !want)
			stress_die("out of memory");
		store_points_wanted(want);
		for (rep = 0; rep < reps; rep++)
			for (k = 0; k < (int)npt; k++) {
				const struct variant *v = &variants[k % NVARIANTS];
				int nranks = k < (int)NVARIANTS
							     ? 1
							     : stress_opts.ranks[k / NVARIANTS - 1];

				if (!want[k])
					continue;
				stress_progress("%s: %s, %d rank%s%s (repetition %d/%d)", scenario,
						v->name, nranks, nranks > 1 ? "s" : "",
						k < (int)NVARIANTS ? ", baseline" : "", rep + 1,
						reps);
				run_point(scenario, v, &l, nranks, fault_ns, work_iters,
						&all[(size_t)k * (size_t)reps + (size_t)rep]);
			}
		for (k = 0; k < (int)npt; k++) {
			struct stress_point *pr = &all[(size_t)k * (size_t)reps], p;
			const struct stress_point *b;
			double wmax = 0, wmin = INFINITY;

			if (!want[k])
				continue;
			qsort(pr, (size_t)reps, sizeof(*pr), point_by_ops);
			for (rep = 0; rep < reps; rep++) {
				if (pr[rep].writer_max_wait_ns > wmax)
					wmax = pr[rep].writer_max_wait_ns;
				if (pr[rep].writer_max_wait_ns < wmin)
					wmin = pr[rep].writer_max_wait_ns;
			}
			p = pr[reps / 2];
			if (!isnan(p.writer_max_wait_ns)) {
				p.writer_max_wait_ns = wmax;
				p.writer_max_wait_min_ns = wmin;
			}
			p.reps = reps;
			p.ops_per_sec_min = pr[0].ops_per_sec;
			p.ops_per_sec_max = pr[reps - 1].ops_per_sec;
			b = stress_find(scenario, p.baseline, 1, l.nslots);
			if (b) {
				p.efficiency = p.ops_per_sec / ((double)p.ranks * b->ops_per_sec);
				p.efficiency_min = p.ops_per_sec_min / ((double)p.ranks * b->ops_per_sec);
				p.efficiency_max = p.ops_per_sec_max / ((double)p.ranks * b->ops_per_sec);
				p.cpu_efficiency = ((double)p.ops / p.rank_cpu_s) /
						   ((double)b->ops / b->rank_cpu_s);
			} else if (k < NBASELINES) {
				p.efficiency = p.cpu_efficiency = 1.0; /* the baseline itself */
				p.efficiency_min = p.ops_per_sec_min / p.ops_per_sec;
				p.efficiency_max = p.ops_per_sec_max / p.ops_per_sec;
			}
			stress_emit(&p);
		}
		free(all);
		free(want);
	}
	pool_destroy();
}

/* ---- write-cost: one thread, no readers, ns per set ----------------------------- */

/*
 * Each (variant, N) tree is built once, by setting N disjoint slots (as for
 * the other scenarios; --pages is raised to 4 N so every slot is at least 4
 * pages long and can be split strictly inside).  Slot s always holds one of
 * the two policies of its colour; cur[s] says which.  Then, per repetition
 * and variant (repetitions interleaved across variants, trees kept), one
 * fresh thread runs each kind for its time, every iteration on a random
 * slot (xorshift), and each ps_store_set() (unsync: base_set()) is timed
 * alone with the TSC, so the kind's own set and the sets that restore the
 * tree are reported apart:
 *
 *   replace   set exactly [start, end) of slot s to its other policy: one
 *             range unlinked, one linked.  Nothing to restore; the count
 *             stays N.
 *   split     set [start + 1, end - 1) of slot s to its other policy: the
 *             range is split in two and a third linked between (N + 2).
 *             Restored by "unsplit": set [start, end) to the slot's policy,
 *             three ranges unlinked, one linked (N).
 *   remove    set [start, end) of slot s to NULL: one range unlinked
 *             (N - 1).  Restored by "re-add": set it back, one range linked
 *             into the gap (N).
 *   span16    set slots s .. s + 15 to one policy: 16 ranges unlinked, one
 *             linked (N - 15).  Restored by "unspan16": 16 sets, one per
 *             slot, each trimming the head off the spanning range (the last
 *             one replaces what is left of it) (N).  Skipped when N < 16.
 *
 * ns/set = the TSC time of the kind's sets / their number, minus the cost
 * of the timestamps themselves (measured back to back); median over the
 * repetitions, with the fastest and slowest.  It is wall time: a set that
 * is preempted counts whole.  So that this shows, the sets of the kind
 * that took STRESS_ONCPU_NS (100 us) or more are counted (slow_sets), and
 * set_ns_oncpu is the same median without them: on a quiet machine the
 * two agree and slow_sets is ~0; a variant with a genuinely slow set now
 * and then has both a higher ns/set and many slow sets.  The ratio divides that median
 * by unsync's median for the same kind and N.  A restoring kind's ns/set is
 * taken over every repetition's restoring sets together.
 *
 * Retired memory.  Once WC_SYNC_EVERY (4096) timed sets have run since the
 * last call, at an iteration's end (the tree restored), and at the end of
 * each kind, a store variant calls ps_store_synchronize() outside the timed
 * sets: SEQLOCK (and an RCU store that defers frees) holds removed ranges
 * until then, so they stay bounded by about 4096 sets' worth.  Its time is
 * reported per timed set apart (sync_ns_per_set), with the most bytes one
 * call released (retired_bytes_max, from the counting allocator).  unsync
 * frees in base_set() and never synchronises.  Why 4096: with a call every
 * 256 sets, SEQLOCK's sets measured 3-6x slower (each call waits ~10 ms for
 * liburcu's call_rcu worker, so the thread mostly slept between short runs
 * of sets); with 4096 they cost the same as with one call at the end.
 *
 * Validation.  After each kind the range count must be N again; after each
 * repetition ps_store_check() / ps_rtree_check(), the slot rule and
 * coverage (ctx_check()), and a walk that every range is exactly one slot
 * holding exactly the policy cur[] says.
 */

enum wc_kind { WC_REPLACE, WC_SPLIT, WC_REMOVE, WC_SPAN, WC_NKINDS };

static const char *const wc_name[WC_NKINDS] = {"replace", "split", "remove", "span16"};
static const char *const wc_restore_name[WC_NKINDS] = {"", "unsplit", "re-add", "unspan16"};

#define WC_SPAN_RANGES 16
#define WC_SYNC_EVERY 4096 /* timed sets between ps_store_synchronize() calls, at least */
#define WC_MIN_ITERS 16	   /* iterations per kind even past the deadline */
#define WC_PAGES_PER_RANGE 4

struct wc_sum {
	uint64_t set_ticks, sets, restore_ticks, restores;
	/* From ps_store_stats() around each of the kind's own sets (stats: it keeps them). */
	bool stats;
	uint64_t copied, copied_max, nretired, nretired_max, root;
	uint64_t slow;	     /* the kind's own sets that took STRESS_ONCPU_NS or more */
	uint64_t fast_ticks; /* the kind's own sets that took less */
	uint64_t sync_ns, syncs;
	double retired_max; /* bytes */
};

struct wc_arg {
	struct ctx *c;
	uint8_t *cur;
	double seconds;
	uint64_t seed;
	struct wc_sum sum[WC_NKINDS];
};

static inline struct ps_policy *wc_pol(uint64_t s, unsigned alt)
{
	return pool.pol[colour_of_slot(s) * 2 + alt];
}

static inline uint64_t wc_timed(struct ctx *c, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	uint64_t t0 = stress_ticks();

	do_set(c, start, end, pol);
	return stress_ticks() - t0;
}

/*
 * One of the kind's own sets: timed, and the nodes it copied and retired
 * read from ps_store_stats() before and after it (outside the timing).
 */
static uint64_t wc_kind_set(struct ctx *c, struct wc_sum *sum, uint64_t start, uint64_t end,
		struct ps_policy *pol)
{
	struct ps_store_stats a, b;
	bool stats = c->store && !ps_store_stats(c->store, &a);
	uint64_t t = wc_timed(c, start, end, pol);

	if (stats && !ps_store_stats(c->store, &b)) {
		uint64_t copied = b.nodes_copied - a.nodes_copied;
		uint64_t retired = b.nodes_retired - a.nodes_retired;

		sum->stats = true;
		sum->copied += copied;
		sum->nretired += retired;
		sum->root += b.root_publications - a.root_publications;
		if (copied > sum->copied_max)
			sum->copied_max = copied;
		if (retired > sum->nretired_max)
			sum->nretired_max = retired;
	}
	return t;
}

/* One of the kind's own sets took @t ticks. */
static inline void wc_count_set(struct wc_sum *sum, uint64_t t)
{
	sum->set_ticks += t;
	sum->sets++;
	if (t >= oncpu_ticks)
		sum->slow++;
	else
		sum->fast_ticks += t;
}

static uint64_t wc_count(struct ctx *c)
{
	return c->store ? ps_store_count(c->store) : c->base->tree.count;
}

static void wc_sync(struct ctx *c, struct wc_sum *sum)
{
	size_t before = stress_live_bytes(), after;
	uint64_t t0 = stress_now_ns();
	int ret = ps_store_synchronize(c->store);

	if (ret)
		stress_die("ps_store_synchronize(%s): %s", c->v->name, strerror(-ret));
	sum->sync_ns += stress_now_ns() - t0;
	sum->syncs++;
	after = stress_live_bytes();
	if (before > after && (double)(before - after) > sum->retired_max)
		sum->retired_max = (double)(before - after);
}

static void wc_run_kind(struct wc_arg *a, enum wc_kind k)
{
	struct ctx *c = a->c;
	const struct layout *l = &c->l;
	struct wc_sum *sum = &a->sum[k];
	uint64_t rng = stress_seed_for(a->seed, 200 + (uint64_t)k);
	uint64_t deadline = stress_now_ns() + (uint64_t)(a->seconds * 1e9), it, unsynced = 0;
	uint64_t i;

	for (it = 0; it < WC_MIN_ITERS || stress_now_ns() < deadline; it++) {
		uint64_t s, lo, hi, n0 = sum->sets + sum->restores;

		switch (k) {
		case WC_REPLACE:
			s = stress_below(&rng, l->nslots);
			a->cur[s] ^= 1;
			wc_count_set(sum, wc_kind_set(c, sum, slot_start(l, s), slot_end(l, s),
							  wc_pol(s, a->cur[s])));
			break;
		case WC_SPLIT:
			s = stress_below(&rng, l->nslots);
			lo = slot_start(l, s);
			hi = slot_end(l, s);
			wc_count_set(sum, wc_kind_set(c, sum, lo + 1, hi - 1, wc_pol(s, a->cur[s] ^ 1)));
			sum->restore_ticks += wc_timed(c, lo, hi, wc_pol(s, a->cur[s]));
			sum->restores++;
			break;
		case WC_REMOVE:
			s = stress_below(&rng, l->nslots);
			lo = slot_start(l, s);
			hi = slot_end(l, s);
			wc_count_set(sum, wc_kind_set(c, sum, lo, hi, NULL));
			sum->restore_ticks += wc_timed(c, lo, hi, wc_pol(s, a->cur[s]));
			sum->restores++;
			break;
		case WC_SPAN:
			s = stress_below(&rng, l->nslots - (WC_SPAN_RANGES - 1));
			wc_count_set(sum, wc_kind_set(c, sum, slot_start(l, s),
							  slot_end(l, s + WC_SPAN_RANGES - 1),
							  wc_pol(s, a->cur[s] ^ 1)));
			for (i = s; i < s + WC_SPAN_RANGES; i++)
				sum->restore_ticks += wc_timed(c, slot_start(l, i), slot_end(l, i),
						wc_pol(i, a->cur[i]));
			sum->restores += WC_SPAN_RANGES;
			break;
		default:
			stress_die("write-cost: unknown kind %d", (int)k);
		}
		unsynced += sum->sets + sum->restores - n0;
		if (c->store && unsynced >= WC_SYNC_EVERY) {
			wc_sync(c, sum);
			unsynced = 0;
		}
	}
	if (c->store)
		wc_sync(c, sum);
	if (wc_count(c) != l->nslots)
		stress_fail("VALIDATION FAILED: write-cost: %s: %llu ranges after the %s loop, "
			    "expected %llu",
				c->v->name, (unsigned long long)wc_count(c), wc_name[k],
				(unsigned long long)l->nslots);
}

static void *wc_main(void *arg)
{
	struct wc_arg *a = arg;
	int k;

	for (k = 0; k < WC_NKINDS; k++)
		if (k != WC_SPAN || a->c->l.nslots >= WC_SPAN_RANGES)
			wc_run_kind(a, (enum wc_kind)k);
	return NULL;
}

struct wc_walk {
	const struct ctx *c;
	const uint8_t *cur;
	uint64_t next; /* the slot the next range must be */
};

static int wc_walk_one(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct wc_walk *w = arg;
	const struct layout *l = &w->c->l;
	uint64_t s = w->next++;

	if (s >= l->nslots || start != slot_start(l, s) || end != slot_end(l, s) ||
			pol != wc_pol(s, w->cur[s]))
		stress_fail("VALIDATION FAILED: write-cost: %s: range [%llu, %llu) is not slot "
			    "%llu with the policy last set there",
				w->c->v->name, (unsigned long long)start, (unsigned long long)end,
				(unsigned long long)s);
	return 0;
}

/* Everything ctx_check() checks, then every range is exactly its slot with cur[]'s policy. */
static void wc_check(struct ctx *c, const uint8_t *cur)
{
	struct wc_walk w = {c, cur, 0};
	uint64_t n = ctx_check(c);

	if (n != c->l.nslots)
		stress_fail("VALIDATION FAILED: write-cost: %s: %llu ranges, expected %llu",
				c->v->name, (unsigned long long)n, (unsigned long long)c->l.nslots);
	if (c->store)
		ps_store_foreach(c->store, wc_walk_one, &w);
	else
		ps_rtree_foreach(&c->base->tree, wc_walk_one, &w);
	if (w.next != c->l.nslots)
		stress_fail("VALIDATION FAILED: write-cost: %s: the walk saw %llu ranges of %llu",
				c->v->name, (unsigned long long)w.next,
				(unsigned long long)c->l.nslots);
}

/* The cost of a pair of back-to-back timestamps, in ticks: the fastest of 8 x 4096. */
static double wc_tick_overhead(void)
{
	double best = 1e30;
	int b, i;

	for (b = 0; b < 8; b++) {
		uint64_t sum = 0;

		for (i = 0; i < 4096; i++) {
			uint64_t t0 = stress_ticks();

			sum += stress_ticks() - t0;
		}
		if ((double)sum / 4096 < best)
			best = (double)sum / 4096;
	}
	return best;
}

static bool wc_variant(const struct variant *v)
{
	if (v->noref || v->inl)
		return false;
	if (v->kind == V_UNSYNC)
		return true; /* the baseline always runs */
	return v->kind == V_STORE && stress_variant_selected(v->name);
}

static const uint64_t wc_default_ranges[] = {100, 10000, 1000000};

/* ns per set from a sum of TSC intervals, the timestamps' own cost taken off. */
static double wc_ns(uint64_t ticks, uint64_t sets, double overhead_ns)
{
	return sets ? (double)ticks * stress_ns_per_tick / (double)sets - overhead_ns : NAN;
}

void stress_run_write_cost(void)
{
	int nr = stress_opts.ranges_given ? stress_opts.nranges : 3, r;
	int reps = stress_opts.repeat, rep, k;
	double seconds = stress_opts.duration_s < 0.1 ? stress_opts.duration_s : 0.1;
	double overhead_ns = wc_tick_overhead() * stress_ns_per_tick;
	size_t i;

	oncpu_ticks = (uint64_t)(STRESS_ONCPU_NS / stress_ns_per_tick);
	for (r = 0; r < nr; r++) {
		uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r]
						      : wc_default_ranges[r];
		uint64_t pages = stress_opts.pages;
		const struct variant *vs[NVARIANTS];
		struct ctx *cs;
		uint8_t **cur;
		struct wc_sum *sums; /* [variant][rep][kind] */
		double *ns, *fns, base_ns[WC_NKINDS], base_rns[WC_NKINDS];
		size_t nv = 0;
		struct layout l;

		for (i = 0; i < NVARIANTS; i++)
			if (wc_variant(&variants[i]))
				vs[nv++] = &variants[i];
		if (pages < WC_PAGES_PER_RANGE * n)
			pages = WC_PAGES_PER_RANGE * n;
		pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
		layout_init(&l, pages, n, false);
		cs = aligned_alloc(64, sizeof(*cs) * nv);
		cur = calloc(nv, sizeof(*cur));
		sums = calloc(nv * (size_t)reps * WC_NKINDS, sizeof(*sums));
		ns = calloc((size_t)reps, sizeof(*ns));
		fns = calloc((size_t)reps, sizeof(*fns));
		if (!cs || !cur || !sums || !ns || !fns)
			stress_die("out of memory");
		/* Every tree of this N is built once and kept: repetitions alternate variants. */
		for (i = 0; i < nv; i++) {
			uint64_t t0 = stress_now_ns();

			cur[i] = calloc(n, 1);
			if (!cur[i])
				stress_die("out of memory");
			ctx_build(&cs[i], vs[i], &l);
			if (vs[i]->kind == V_STORE)
				wc_sync(&cs[i], &(struct wc_sum){0});
			wc_check(&cs[i], cur[i]);
			stress_progress("write-cost: %s, %llu ranges built in %.2f s", vs[i]->name,
					(unsigned long long)n,
					(double)(stress_now_ns() - t0) / 1e9);
		}
		if (n < WC_SPAN_RANGES)
			stress_progress("write-cost: %llu ranges < %d: span16 skipped",
					(unsigned long long)n, WC_SPAN_RANGES);
		for (rep = 0; rep < reps; rep++) {
			for (i = 0; i < nv; i++) {
				struct wc_arg a;
				pthread_t t;

				memset(&a, 0, sizeof(a));
				a.c = &cs[i];
				a.cur = cur[i];
				a.seconds = seconds;
				a.seed = stress_seed_for(stress_opts.seed, (uint64_t)rep);
				stress_progress("write-cost: %s, %llu ranges (repetition %d/%d)",
						vs[i]->name, (unsigned long long)n, rep + 1, reps);
				/* A fresh thread, as lookup-cost: the driver never registers. */
				stress_thread_start(&t, wc_main, &a);
				pthread_join(t, NULL);
				memcpy(&sums[(i * (size_t)reps + (size_t)rep) * WC_NKINDS], a.sum,
						sizeof(a.sum));
				wc_check(&cs[i], cur[i]);
			}
		}
		/* Points: kinds in order, variants in order, unsync first (the baseline). */
		for (k = 0; k < WC_NKINDS; k++) {
			if (k == WC_SPAN && n < WC_SPAN_RANGES)
				continue;
			base_ns[k] = base_rns[k] = NAN;
			for (i = 0; i < nv; i++) {
				struct stress_point p;
				struct wc_sum tot;
				double rns;

				memset(&tot, 0, sizeof(tot));
				for (rep = 0; rep < reps; rep++) {
					const struct wc_sum *sm =
							&sums[(i * (size_t)reps + (size_t)rep) *
											WC_NKINDS +
									(size_t)k];

					ns[rep] = wc_ns(sm->set_ticks, sm->sets, overhead_ns);
					fns[rep] = wc_ns(sm->fast_ticks, sm->sets - sm->slow,
							overhead_ns);
					tot.slow += sm->slow;
					tot.set_ticks += sm->set_ticks;
					tot.sets += sm->sets;
					tot.restore_ticks += sm->restore_ticks;
					tot.restores += sm->restores;
					tot.sync_ns += sm->sync_ns;
					tot.syncs += sm->syncs;
					if (sm->retired_max > tot.retired_max)
						tot.retired_max = sm->retired_max;
					tot.stats |= sm->stats;
					tot.copied += sm->copied;
					tot.nretired += sm->nretired;
					tot.root += sm->root;
					if (sm->copied_max > tot.copied_max)
						tot.copied_max = sm->copied_max;
					if (sm->nretired_max > tot.nretired_max)
						tot.nretired_max = sm->nretired_max;
				}
				qsort(ns, (size_t)reps, sizeof(*ns), dbl_cmp);
				qsort(fns, (size_t)reps, sizeof(*fns), dbl_cmp);
				stress_point_init(&p, "write-cost", vs[i]->name, 1);
				snprintf(p.kind, sizeof(p.kind), "%s", wc_name[k]);
				snprintf(p.restore_kind, sizeof(p.restore_kind), "%s",
						wc_restore_name[k]);
				p.writers = 1;
				p.pages = l.pages;
				p.ranges = n;
				p.ranges_end = wc_count(&cs[i]);
				p.duration_s = seconds;
				p.reps = reps;
				p.ops = tot.sets;
				p.restores = tot.restores;
				p.overhead_ns = overhead_ns;
				p.set_ns = ns[reps / 2];
				p.set_ns_min = ns[0];
				p.set_ns_max = ns[reps - 1];
				p.set_ns_oncpu = fns[reps / 2];
				p.slow_sets = tot.slow;
				/* Restores: over all repetitions (the spread is in set_ns). */
				rns = wc_ns(tot.restore_ticks, tot.restores, overhead_ns);
				p.restore_ns = rns;
				if (vs[i]->kind == V_STORE) {
					p.sync_ns_per_set = (double)tot.sync_ns /
							    (double)(tot.sets + tot.restores);
					p.retired_bytes_max = tot.retired_max;
				}
				if (tot.stats && tot.sets) {
					p.copied_mean = (double)tot.copied / (double)tot.sets;
					p.copied_max = (double)tot.copied_max;
					p.nretired_mean = (double)tot.nretired / (double)tot.sets;
					p.nretired_max = (double)tot.nretired_max;
					p.root_share = (double)tot.root / (double)tot.sets;
				}
				if (vs[i]->kind == V_UNSYNC) {
					base_ns[k] = p.set_ns;
					base_rns[k] = rns;
				}
				p.baseline = "unsync";
				p.cost_ratio = p.set_ns / base_ns[k];
				p.restore_ratio = rns / base_rns[k];
				stress_emit(&p);
			}
		}
		for (i = 0; i < nv; i++) {
			ctx_destroy(&cs[i]);
			free(cur[i]);
		}
		free(cs);
		free(cur);
		free(sums);
		free(ns);
		free(fns);
		pool_destroy();
	}
}

bool stress_variant_known(const char *name)
{
	size_t i;

	for (i = 0; i < NVARIANTS; i++)
		if (!strcmp(variants[i].name, name))
			return true;
	return false;
}

/* ---- window: ranks read windows while writers set ---------------------------- */

/*
 * The tree of write-cost (N slots, --pages raised to 4 N; default N = 10^6
 * when --ranges is not given), built once per variant.  Then, for every
 * mode and --ranks value (repetitions interleaved across modes), ranks run
 * one mode flat out while --writers writers set at --write-interval (in
 * --batch sets per ps_store_set_many()):
 *
 *   lookup        ps_store_lookup() of a random page, and the put
 *   lookup:noref  read_lock, ps_store_lookup_borrow(), read_unlock
 *   1             ps_store_foreach_range() of [p, p + 1), p a random page
 *   16, 256       ps_store_foreach_range() from the start of a random slot
 *                 to the end of the 15th (255th) slot after it
 *
 * ns per op = the ranks' CPU time / their ops (CPU time: the time slices
 * the machine gives other processes are not the store's cost); ranges per
 * op counts what the windows returned (a writer's split adds ranges), and
 * ns per range divides.  The window-1 ratio divides by the same variant's
 * lookup in the same run; the cost of one more range is the slope between
 * the 1- and 256-range windows.
 *
 * Validation: one op in 64 checks its result, a window's fully: its ranges
 * tile it (every page is always covered: contiguous, the first starting at
 * or before the window and the last ending at or after it), each inside
 * its slot with a policy of the slot's colour.  The other ops only count
 * the ranges (the check is not the cost measured).  ctx_check() after
 * every point.  The walks of one snapshot are what the oracle checks
 * (polstore-stress --check).
 */

enum win_mode { WM_LOOKUP, WM_LOOKUP_NOREF, WM_W1, WM_W16, WM_W256, WM_N };

static const char *const wm_name[WM_N] = {"lookup", "lookup:noref", "1", "16", "256"};
static const uint64_t wm_slots[WM_N] = {0, 0, 0, 16, 256};

#define WIN_CHECK_MASK 63

struct win_rank {
	struct ctx *c;
	pthread_t th;
	int id;
	enum win_mode mode;
	uint64_t seed;
	uint64_t ops, ranges, cpu_ns;
} __attribute__((aligned(64)));

struct win_walk {
	const struct ctx *c;
	uint64_t a, b, next, n;
};

static void __attribute__((noinline, noreturn))
bad_window(const struct win_walk *w, uint64_t start, uint64_t end, const char *why)
{
	stress_fail("VALIDATION FAILED: window: %s: window [%llu, %llu): range [%llu, %llu) %s",
			w->c->v->name, (unsigned long long)w->a, (unsigned long long)w->b,
			(unsigned long long)start, (unsigned long long)end, why);
}

static int win_check_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct win_walk *w = arg;
	uint64_t s = slot_of(&w->c->l, start);

	if (w->n ? start != w->next : start > w->a)
		bad_window(w, start, end, "leaves a gap or overlaps: not one snapshot");
	if (end > slot_end(&w->c->l, s) || pool_colour(pol) != (int)colour_of_slot(s))
		bad_window(w, start, end, "crosses its slot or holds another slot's policy");
	w->next = end;
	w->n++;
	return 0;
}

static int win_count_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	(void)start;
	(void)end;
	(void)pol;
	++*(uint64_t *)arg;
	return 0;
}

static inline void win_bounds(const struct ctx *c, enum win_mode m, uint64_t *rng, uint64_t *a,
		uint64_t *b)
{
	if (m == WM_W1 || m == WM_LOOKUP || m == WM_LOOKUP_NOREF) {
		*a = stress_below(rng, c->l.pages);
		*b = *a + 1;
	} else {
		uint64_t k = wm_slots[m] < c->l.nslots ? wm_slots[m] : c->l.nslots;
		uint64_t s = stress_below(rng, c->l.nslots - k + 1);

		*a = slot_start(&c->l, s);
		*b = slot_end(&c->l, s + k - 1);
	}
}

static void *win_main(void *arg)
{
	struct win_rank *rk = arg;
	struct ctx *c = rk->c;
	bool qsbr = c->v->sync == PS_SYNC_RCU_QSBR;
	uint64_t rng = rk->seed, ops = 0, ranges = 0, t0;
	uintptr_t sink = 0;

	stress_gate_wait(&c->gate);
	if (qsbr)
		ps_qsbr_thread_online();
	t0 = stress_thread_cpu_ns();
	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
		unsigned i;

		for (i = 0; i <= WIN_CHECK_MASK; i++) {
			uint64_t a, b;
			const void *pol;

			win_bounds(c, rk->mode, &rng, &a, &b);
			if (rk->mode == WM_LOOKUP || rk->mode == WM_LOOKUP_NOREF) {
				if (rk->mode == WM_LOOKUP) {
					pol = ps_store_lookup(c->store, a);
					ps_policy_put((struct ps_policy *)pol);
				} else {
					ps_store_read_lock(c->store);
					pol = ps_store_lookup_borrow(c->store, a);
					ps_store_read_unlock(c->store);
				}
				sink += (uintptr_t)pol;
				if (!i)
					validate(c, a, pol);
				ranges++;
			} else {
				if (!i) {
					struct win_walk w = {c, a, b, 0, 0};

					ps_store_foreach_range(c->store, a, b, win_check_cb, &w);
					if (!w.n || w.next < b)
						bad_window(&w, a, w.next, "is where the window's "
									  "coverage ends: pages missing");
					ranges += w.n;
				} else {
					ps_store_foreach_range(c->store, a, b, win_count_cb, &ranges);
				}
			}
			if (qsbr)
				ps_qsbr_quiescent();
		}
		ops += WIN_CHECK_MASK + 1;
	}
	rk->cpu_ns = stress_thread_cpu_ns() - t0;
	if (qsbr)
		ps_qsbr_thread_offline();
	__asm__ __volatile__("" ::"r"(sink));
	rk->ops = ops;
	rk->ranges = ranges;
	return NULL;
}

/* One point: @nranks ranks in mode @m beside the writers, for --duration. */
static void win_phase(struct ctx *c, enum win_mode m, int nranks, struct stress_point *p)
{
	int nwriters = stress_opts.writers, i;
	struct win_rank *ranks = aligned_alloc(64, sizeof(*ranks) * (size_t)nranks);
	struct writer *writers;
	uint64_t t_go, t_stop, ops = 0, ranges = 0, cpu = 0;

	if (!ranks)
		stress_die("out of memory");
	memset(ranks, 0, sizeof(*ranks) * (size_t)nranks);
	c->stop = 0;
	stress_gate_init(&c->gate);
	for (i = 0; i < nranks; i++) {
		ranks[i].c = c;
		ranks[i].id = i;
		ranks[i].mode = m;
		ranks[i].seed = stress_seed_for(stress_opts.seed, 300 + (uint64_t)i * 16 + m);
		stress_thread_start(&ranks[i].th, win_main, &ranks[i]);
	}
	writers = writers_run(c, nwriters, nranks, &t_go, &t_stop);
	for (i = 0; i < nranks; i++) {
		pthread_join(ranks[i].th, NULL);
		ops += ranks[i].ops;
		ranges += ranks[i].ranges;
		cpu += ranks[i].cpu_ns;
	}
	stress_point_init(p, "window", c->v->name, nranks);
	p->duration_s = (double)(t_stop - t_go) / 1e9;
	writers_join(writers, nwriters, p);
	stress_gate_destroy(&c->gate);
	snprintf(p->kind, sizeof(p->kind), "%s", wm_name[m]);
	p->batch = stress_opts.batch;
	p->pages = c->l.pages;
	p->ranges = c->l.nslots;
	p->ops = ops;
	p->ops_per_sec = (double)ops / p->duration_s;
	p->rank_cpu_s = (double)cpu / 1e9;
	p->ns_per_op = ops ? (double)cpu / (double)ops : NAN;
	p->ranges_per_op = ops ? (double)ranges / (double)ops : NAN;
	p->ns_per_range = ranges ? (double)cpu / (double)ranges : NAN;
	p->ranges_end = ctx_check(c);
	free(ranks);
}

static int point_by_ns(const void *a, const void *b)
{
	double x = ((const struct stress_point *)a)->ns_per_op;
	double y = ((const struct stress_point *)b)->ns_per_op;

	return x < y ? -1 : x > y;
}

void stress_run_window(void)
{
	uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[0] : 1000000;
	uint64_t pages = stress_opts.pages > 4 * n ? stress_opts.pages : 4 * n;
	int reps = stress_opts.repeat, nr = stress_opts.nranks, r, rep, m;
	struct layout l;
	size_t i;

	pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
	layout_init(&l, pages, n, false);
	for (i = 0; i < NVARIANTS; i++) {
		const struct variant *v = &variants[i];
		struct stress_point *pts;
		struct ctx *c;
		uint64_t t0 = stress_now_ns();

		/* Windows lend their policies: the store variants, each once (':noref' is a mode). */
		if (v->kind != V_STORE || v->noref || v->inl || !stress_variant_selected(v->name))
			continue;
		c = aligned_alloc(64, sizeof(*c));
		pts = calloc((size_t)(nr * WM_N * reps), sizeof(*pts));
		if (!c || !pts)
			stress_die("out of memory");
		ctx_build(c, v, &l);
		ps_store_synchronize(c->store);
		stress_progress("window: %s, %llu ranges built in %.2f s", v->name,
				(unsigned long long)n, (double)(stress_now_ns() - t0) / 1e9);
		for (rep = 0; rep < reps; rep++)
			for (r = 0; r < nr; r++)
				for (m = 0; m < WM_N; m++) {
					stress_progress("window: %s, %s, %d rank%s (repetition %d/%d)",
							v->name, wm_name[m], stress_opts.ranks[r],
							stress_opts.ranks[r] > 1 ? "s" : "", rep + 1,
							reps);
					win_phase(c, (enum win_mode)m, stress_opts.ranks[r],
							&pts[((size_t)r * WM_N + (size_t)m) * (size_t)reps +
									(size_t)rep]);
				}
		/* The median repetition of each point (by ns per op); ratios within the variant. */
		for (r = 0; r < nr; r++) {
			struct stress_point med[WM_N];

			for (m = 0; m < WM_N; m++) {
				struct stress_point *pr = &pts[((size_t)r * WM_N + (size_t)m) *
							       (size_t)reps];

				qsort(pr, (size_t)reps, sizeof(*pr), point_by_ns);
				med[m] = pr[reps / 2];
				med[m].reps = reps;
			}
			for (m = 0; m < WM_N; m++) {
				med[m].baseline = "lookup";
				med[m].ratio_lookup = med[m].ns_per_op / med[WM_LOOKUP].ns_per_op;
				med[m].ratio_borrow =
						med[m].ns_per_op / med[WM_LOOKUP_NOREF].ns_per_op;
				stress_emit(&med[m]);
			}
		}
		ctx_destroy(c);
		free(c);
		free(pts);
	}
	pool_destroy();
}

/* ---- batch-cost: B single sets against one ps_store_set_many() of them ----------- */

/*
 * One thread, no readers, the write-cost tree (N slots, --pages raised to
 * 4 N; --ranges, default 10000,1000000).  Each iteration picks B slots
 * (--batch, default 16): "adjacent" B consecutive slots, "random" B
 * random ones; sets each of them to its slot's other policy with B
 * ps_store_set() calls, and back with one ps_store_set_many() of the same
 * B ops (the order of the two alternates), each timed whole in thread CPU
 * time.
 * Every set replaces one range: the count stays N, the tree's shape stays.
 * ps_store_synchronize() runs after each repetition only: it gives back
 * the spares an RCU store keeps beyond PS_COW_SPARE_IDLE, and a batch's
 * worst case asks for thousands (ps_rtree_cow_need_many()), so a
 * synchronize every few thousand sets (as write-cost does) would time the
 * refill, not the batch.  Retired ranges still go to the reclaim thread.
 * Reported per set: the singles' ns and the batch's ns, and their ratio
 * (median over --repeat repetitions of min(--duration, 0.1) s each).
 */
enum bc_pattern { BC_ADJACENT, BC_RANDOM, BC_N };

static const char *const bc_name[BC_N] = {"adjacent", "random"};

struct bc_arg {
	struct ctx *c;
	enum bc_pattern pat;
	size_t batch;
	double seconds;
	uint64_t seed;
	uint64_t single_ns, many_ns, sets;
};

static void *bc_main(void *arg)
{
	struct bc_arg *a = arg;
	struct ctx *c = a->c;
	const struct layout *l = &c->l;
	struct ps_set_op *cur = calloc(a->batch, sizeof(*cur)), *alt = calloc(a->batch, sizeof(*alt));
	uint64_t rng = a->seed, deadline = stress_now_ns() + (uint64_t)(a->seconds * 1e9), it;
	size_t j;

	if (!cur || !alt)
		stress_die("out of memory");
	for (it = 0; it < 16 || stress_now_ns() < deadline; it++) {
		uint64_t s0 = stress_below(&rng, l->nslots - a->batch + 1), t0, t1, t2;

		for (j = 0; j < a->batch; j++) {
			uint64_t s = a->pat == BC_ADJACENT ? s0 + j : stress_below(&rng, l->nslots);

			/* Slots hold their colour's first policy between iterations. */
			cur[j] = (struct ps_set_op){slot_start(l, s), slot_end(l, s), wc_pol(s, 0)};
			alt[j] = (struct ps_set_op){slot_start(l, s), slot_end(l, s), wc_pol(s, 1)};
		}
		/* Thread CPU time: other processes' time slices are not the sets' cost. */
		if (it & 1) {
			t0 = stress_thread_cpu_ns();
			for (j = 0; j < a->batch; j++)
				do_set(c, alt[j].start, alt[j].end, alt[j].pol);
			t1 = stress_thread_cpu_ns();
			do_set_many(c, cur, a->batch);
			t2 = stress_thread_cpu_ns();
			a->single_ns += t1 - t0;
			a->many_ns += t2 - t1;
		} else {
			t0 = stress_thread_cpu_ns();
			do_set_many(c, alt, a->batch);
			t1 = stress_thread_cpu_ns();
			for (j = 0; j < a->batch; j++)
				do_set(c, cur[j].start, cur[j].end, cur[j].pol);
			t2 = stress_thread_cpu_ns();
			a->many_ns += t1 - t0;
			a->single_ns += t2 - t1;
		}
		a->sets += a->batch;
	}
	ps_store_synchronize(c->store);
	free(cur);
	free(alt);
	return NULL;
}

static const uint64_t bc_default_ranges[] = {10000, 1000000};

void stress_run_batch_cost(void)
{
	int nr = stress_opts.ranges_given ? stress_opts.nranges : 2, r, reps = stress_opts.repeat,
	    rep, k;
	size_t batch = stress_opts.batch_given ? (size_t)stress_opts.batch : 16, i;
	double seconds = stress_opts.duration_s < 0.1 ? stress_opts.duration_s : 0.1;

	for (r = 0; r < nr; r++) {
		uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r] : bc_default_ranges[r];
		uint64_t pages = stress_opts.pages > 4 * n ? stress_opts.pages : 4 * n;
		struct layout l;

		if (n < batch) {
			stress_progress("batch-cost: %llu ranges < a batch of %zu: skipped",
					(unsigned long long)n, batch);
			continue;
		}
		pool_create(n < MAX_COLOURS ? (uint32_t)n : MAX_COLOURS);
		layout_init(&l, pages, n, false);
		for (i = 0; i < NVARIANTS; i++) {
			const struct variant *v = &variants[i];
			double ratio[64], single[64], many[64];
			struct ctx c;

			if (v->kind != V_STORE || v->noref || v->inl || !stress_variant_selected(v->name))
				continue;
			ctx_build(&c, v, &l);
			ps_store_synchronize(c.store);
			for (k = 0; k < BC_N; k++) {
				struct stress_point p;
				uint64_t sets = 0;

				for (rep = 0; rep < reps && rep < 64; rep++) {
					struct bc_arg a = {&c, (enum bc_pattern)k, batch, seconds,
							stress_seed_for(stress_opts.seed,
									400 + (uint64_t)rep),
							0, 0, 0};
					pthread_t t;

					stress_progress("batch-cost: %s, %llu ranges, %s batches of "
							"%zu (repetition %d/%d)",
							v->name, (unsigned long long)n, bc_name[k],
							batch, rep + 1, reps);
					stress_thread_start(&t, bc_main, &a);
					pthread_join(t, NULL);
					single[rep] = (double)a.single_ns / (double)a.sets;
					many[rep] = (double)a.many_ns / (double)a.sets;
					ratio[rep] = many[rep] / single[rep];
					sets += a.sets;
				}
				if (ctx_check(&c) != n || ps_store_count(c.store) != n)
					stress_fail("VALIDATION FAILED: batch-cost: %s: the count "
						    "changed",
							v->name);
				qsort(ratio, (size_t)rep, sizeof(double), dbl_cmp);
				qsort(single, (size_t)rep, sizeof(double), dbl_cmp);
				qsort(many, (size_t)rep, sizeof(double), dbl_cmp);
				stress_point_init(&p, "batch-cost", v->name, 1);
				snprintf(p.kind, sizeof(p.kind), "%s", bc_name[k]);
				p.writers = 1;
				p.batch = (int)batch;
				p.pages = l.pages;
				p.ranges = n;
				p.ranges_end = ps_store_count(c.store);
				p.duration_s = seconds;
				p.reps = rep;
				p.ops = sets;
				p.single_ns = single[rep / 2];
				p.many_ns = many[rep / 2];
				p.batch_ratio = ratio[rep / 2];
				stress_emit(&p);
			}
			ctx_destroy(&c);
		}
		pool_destroy();
	}
}

/* ---- their tables ---- */

void stress_print_window(void)
{
	const struct stress_point *p, *q;
	bool header = false;
	size_t i, j;

	for (i = 0; (p = stress_point_at(i)); i++) {
		const struct stress_point *w[WM_N] = {NULL};
		int m;

		if (strcmp(p->scenario, "window") || strcmp(p->kind, "lookup"))
			continue;
		for (j = i; (q = stress_point_at(j)) && j < i + WM_N; j++)
			for (m = 0; m < WM_N; m++)
				if (!strcmp(q->scenario, "window") && !strcmp(q->kind, wm_name[m]) &&
						!strcmp(q->variant, p->variant) && q->ranks == p->ranks)
					w[m] = q;
		if (!header) {
			printf("\nwindow: ranks read windows while %d writer(s) set every %.0f us "
			       "(%d set(s) per call); %llu ranges over %llu pages;\n  CPU ns per "
			       "op (median of %d repetition(s)), ranges per window, ns per range\n",
					p->writers, (double)stress_opts.write_interval_ns / 1e3,
					p->batch > 1 ? p->batch : 1, (unsigned long long)p->ranges,
					(unsigned long long)p->pages, p->reps);
			printf("  %-9s %5s %8s %8s | %8s %6s | %8s %6s %6s | %8s %6s %6s | %8s\n",
					"variant", "ranks", "lookup", "noref", "win 1", "x look",
					"win 16", "ranges", "/range", "win 256", "ranges", "/range",
					"+1 range");
			printf("  %-9s %5s %8s %8s | %8s %6s | %8s %6s %6s | %8s %6s %6s | %8s\n",
					"", "", "(ns)", "(ns)", "(ns)", "", "(ns)", "", "(ns)",
					"(ns)", "", "(ns)", "(ns)");
			header = true;
		}
		if (!w[WM_W1] || !w[WM_W16] || !w[WM_W256] || !w[WM_LOOKUP_NOREF])
			continue;
		printf("  %-9s %5d %8.1f %8.1f | %8.1f %6.2f | %8.1f %6.1f %6.1f | %8.1f %6.1f %6.1f "
		       "| %8.1f\n",
				p->variant, p->ranks, p->ns_per_op, w[WM_LOOKUP_NOREF]->ns_per_op,
				w[WM_W1]->ns_per_op, w[WM_W1]->ratio_lookup, w[WM_W16]->ns_per_op,
				w[WM_W16]->ranges_per_op, w[WM_W16]->ns_per_range,
				w[WM_W256]->ns_per_op, w[WM_W256]->ranges_per_op,
				w[WM_W256]->ns_per_range,
				(w[WM_W256]->ns_per_op - w[WM_W1]->ns_per_op) /
						(w[WM_W256]->ranges_per_op - w[WM_W1]->ranges_per_op));
	}
	header = false;
	for (i = 0; (p = stress_point_at(i)); i++) {
		if (strcmp(p->scenario, "batch-cost"))
			continue;
		if (!header) {
			printf("\nbatch-cost: one thread, no readers; ns per set as %d single "
			       "ps_store_set() calls and as one ps_store_set_many()\n  (median of "
			       "%d repetition(s) of %.2f s)\n",
					p->batch, p->reps, p->duration_s);
			printf("  %-9s %8s %-9s %10s %10s %8s\n", "variant", "ranges", "pattern",
					"single", "batched", "ratio");
			printf("  %-9s %8s %-9s %10s %10s %8s\n", "", "", "", "(ns/set)",
					"(ns/set)", "");
			header = true;
		}
		printf("  %-9s %8llu %-9s %10.1f %10.1f %8.3f\n", p->variant,
				(unsigned long long)p->ranges, p->kind, p->single_ns, p->many_ns,
				p->batch_ratio);
	}
}

/* ---- how long a run takes ---- */

/* Seconds to build a tree of @n ranges (about 1 us a range), for the estimate. */
static double build_s(uint64_t n)
{
	return (double)n * 1e-6;
}

double stress_store_estimate_s(const char *scenario)
{
	double reps = stress_opts.repeat, d = stress_opts.duration_s, t = 0;
	size_t i, nv = 0;
	int r;

	if (!strcmp(scenario, "lookup-cost")) {
		for (i = 0; i < NVARIANTS; i++)
			nv += cost_selected(&variants[i]);
		for (r = 0; r < stress_opts.nranges; r++)
			t += cost_seconds() / 2 + (double)nv * reps *
					(0.02 + cost_seconds() + build_s(stress_opts.ranges[r]));
		return t;
	}
	if (!strcmp(scenario, "shared-text") || !strcmp(scenario, "hot-policy")) {
		bool *want = calloc((size_t)(stress_opts.nranks + 1) * NVARIANTS, sizeof(*want));
		size_t n;

		if (!want)
			stress_die("out of memory");
		n = store_points_wanted(want);
		free(want);
		return 0.05 + (double)n * reps * (d + build_s(stress_opts.ranges[0]));
	}
	if (!strcmp(scenario, "write-cost")) {
		int nr = stress_opts.ranges_given ? stress_opts.nranges : 3;

		for (i = 0; i < NVARIANTS; i++)
			nv += wc_variant(&variants[i]);
		for (r = 0; r < nr; r++) {
			uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r]
							      : wc_default_ranges[r];

			t += (double)nv * (build_s(n) + reps * WC_NKINDS * (d < 0.1 ? d : 0.1));
		}
		return t;
	}
	for (i = 0; i < NVARIANTS; i++)
		nv += variants[i].kind == V_STORE && !variants[i].noref && !variants[i].inl &&
		      stress_variant_selected(variants[i].name);
	if (!strcmp(scenario, "window"))
		return (double)nv * (build_s(stress_opts.ranges_given ? stress_opts.ranges[0]
								      : 1000000) +
					    reps * stress_opts.nranks * WM_N * d);
	if (!strcmp(scenario, "batch-cost")) {
		int nr = stress_opts.ranges_given ? stress_opts.nranges : 2;

		for (r = 0; r < nr; r++) {
			uint64_t n = stress_opts.ranges_given ? stress_opts.ranges[r]
							      : bc_default_ranges[r];

			t += (double)nv * (build_s(n) + reps * BC_N * (d < 0.1 ? d : 0.1));
		}
		return t;
	}
	return 0;
}
