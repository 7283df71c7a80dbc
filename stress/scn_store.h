/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the store scenarios of polstore-stress share (scn_store.c): the
 * variants, the policy pool, a point's context, the writers, and the read
 * loops (scn_store_read.c).  The scenarios, one file each: lookup-cost,
 * shared-text and hot-policy, write-cost, window, batch-cost.  They measure
 * every store variant in every lookup form against three baselines built
 * on the very same range tree (src/range/rangetree.h): no synchronisation, a
 * pthread_rwlock_t and a pthread_mutex_t around it.
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
 * end of a point, ps_store_check() (or psi_rangetree_check() for baselines) and
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
#ifndef POLSTORE_STRESS_SCN_STORE_H
#define POLSTORE_STRESS_SCN_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <polstore/polstore.h>
/* The node hint of the baselines' walk, the :inline forms' functions and their store creation. */
#include <polstore/static/lookup.h>

/* The baselines wrap the range tree core: the program's one library-internal header. */
#include "rangetree.h"
#include "stress.h"

/* ---- variants ------------------------------------------------------------------ */

enum vkind { V_UNSYNC, V_MUTEX, V_PRWLOCK, V_STORE };

/* How a rank asks: with a reference, borrowed in a section, copied out, or for a node. */
enum vform { F_REF, F_NOREF, F_COPY, F_NODE };

struct variant {
	const char *name;
	enum vkind kind;
	int sync;   /* enum ps_sync for V_STORE, else -1 */
	bool noref; /* no policy reference taken: F_NOREF, F_COPY, F_NODE */
	enum vform form;
	bool inl; /* the read side inlined (polstore/static/lookup.h, POLSTORE_INLINE) */
};

/* The forms of each store variant: "", ":noref", ":copy", ":node", each also ":inline". */
#define STORE_NFORMS 8
/* variants[0 .. NBASELINES - 1]: the unsynchronised baselines, one per form, in form order. */
#define NBASELINES 4
/* Those, pthread_mutex and pthread_rwlock, then every form of every store variant. */
#define NVARIANTS (NBASELINES + 2 + STRESS_NSYNC * STORE_NFORMS)

/* Every variant, in the order a run takes them; filled by variants_init(). */
extern struct variant variants[NVARIANTS];
/* Fill variants[] from the library's variant list; call before reading it (idempotent). */
void variants_init(void);

#define unsync_noref (&variants[F_NOREF])

/* Like with like: each form is compared with the unsynchronised walk doing the same. */
static inline const char *baseline_of(const struct variant *v)
{
	return variants[v->form].name;
}

/* A variant whose readers announce quiescent states (rcu-qsbr). */
static inline bool is_qsbr(const struct variant *v)
{
	return v->kind == V_STORE && (ps_sync_caps(v->sync) & PS_CAP_QSBR);
}

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

extern struct pool pool;

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

void pool_create(uint32_t ncolours);
void pool_destroy(void);

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

/* Policy @alt (0 or 1) of slot @s's colour. */
static inline struct ps_policy *slot_pol(uint64_t s, unsigned alt)
{
	return pool.pol[colour_of_slot(s) * 2 + alt];
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

/* A wrong lookup result: says what was wrong, then aborts (scn_store.c). */
void __attribute__((noreturn)) bad_lookup(const struct ctx *c, uint64_t page, const void *pol);
void __attribute__((noreturn)) bad_value(const struct ctx *c, uint64_t page, uintptr_t got,
		uintptr_t want);

static inline void validate(const struct ctx *c, uint64_t page, const void *pol)
{
	if (psi_unlikely(!pol || pool_colour(pol) != (int)colour_of_slot(slot_of(&c->l, page))))
		bad_lookup(c, page, pol);
}

/*
 * The :copy and :node forms: a pool policy of colour k holds node k % 64
 * alone, so the copy's first mask word is 1 << (k % 64) and the node is
 * k % 64 (from local node 0: a one-node mask allows nothing else).
 */
static inline void validate_node(const struct ctx *c, uint64_t page, int node)
{
	uintptr_t want = colour_of_slot(slot_of(&c->l, page)) % 64;

	if (psi_unlikely((uintptr_t)node != want))
		bad_value(c, page, (uintptr_t)node, want);
}

static inline void validate_view(const struct ctx *c, uint64_t page, const struct ps_policy_view *v)
{
	uintptr_t want = 1UL << (colour_of_slot(slot_of(&c->l, page)) % 64);

	if (psi_unlikely(v->nodes[0] != want || v->weight != 1))
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
	struct ps_range *r = psi_rangetree_lookup(&b->tree, page);

	return r ? r->pol : NULL;
}

/* The node lookup of the unsynchronised walk: the range's hint, as the stores' (lookup.h). */
static inline int base_node(struct base *b, uint64_t page, int local)
{
	struct ps_range *r = psi_rangetree_lookup(&b->tree, page);

	return r ? _ps_policy_node_hinted(r->node_hint, r->pol, page, local) : local;
}

/*
 * Samples of a rank that took less than STRESS_ONCPU_NS most likely kept
 * their CPU; oncpu_ticks is that in TSC ticks, set by a scenario before
 * its first point.
 */
#define STRESS_ONCPU_NS 100000
extern uint64_t oncpu_ticks;

/* ---- writers -------------------------------------------------------------------- */

void do_set(struct ctx *c, uint64_t start, uint64_t end, struct ps_policy *pol);
void do_set_many(struct ctx *c, const struct ps_set_op *ops, size_t n);
struct writer *writers_run(
		struct ctx *c, int nwriters, int nranks, uint64_t *t_go, uint64_t *t_stop);
void writers_join(struct writer *writers, int nwriters, struct stress_point *p);

/* ---- building and checking the tree --------------------------------------------- */

void layout_init(struct layout *l, uint64_t pages, uint64_t nranges, bool hot);
void ctx_build(struct ctx *c, const struct variant *v, const struct layout *l);
uint64_t ctx_check(struct ctx *c);
void ctx_destroy(struct ctx *c);
int dbl_cmp(const void *a, const void *b);

/* Seconds to build a tree of @n ranges, about 1 us a range: for the estimates. */
static inline double build_s(uint64_t n)
{
	return (double)n * 1e-6;
}

/* ---- the read loops (scn_store_read.c) ------------------------------------------ */

/* A rank of shared-text or hot-policy: pthread start routine, @arg a struct rank. */
void *rank_main(void *arg);
/* ns per lookup of @c's variant (@null_lookup: of the loop alone), on a fresh thread. */
double measure_cost(struct ctx *c, double seconds, bool null_lookup);
/* Time of one unsynchronised lookup (with its loop) on @l: the default fault work. */
double calibrate_lookup_ns(const struct layout *l);

#endif /* POLSTORE_STRESS_SCN_STORE_H */
