// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read loops of the store scenarios: a rank's loop (shared-text,
 * hot-policy) and the cost loop (lookup-cost), each specialised per lookup
 * so that no call is added around the lookup measured.  One always-inline
 * core per loop takes the lookup as a constant; the named two-line
 * wrappers below instantiate it, and the tables after them pick one per
 * variant.
 *
 * "ref" lookups return a policy reference that is put right after (as a
 * fault would once it allocated the page); "noref" lookups borrow the
 * pointer inside a read-side section; "copy" and "node" are the one-call
 * forms.  Every form is timed whole: section, lookup, reference and put.
 */
#include <stdint.h>

#include <polstore/polstore.h>
#include <polstore/static/lookup.h> /* the :inline forms call its functions directly */

#include "compiler.h"
#include "scn_store.h"
#include "stress.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Every lookup a loop can make; LK_NULL makes none (the cost loop's overhead). */
enum lookup {
	LK_UNSYNC_REF,
	LK_UNSYNC_NOREF,
	LK_UNSYNC_COPY,
	LK_UNSYNC_NODE,
	LK_MUTEX,
	LK_PRWLOCK,
	LK_STORE_REF,
	LK_STORE_NOREF,
	LK_STORE_COPY,
	LK_STORE_NODE,
	LK_INL_REF,
	LK_INL_NOREF,
	LK_INL_COPY,
	LK_INL_NODE,
	LK_NULL,
};

/* What a lookup yields: the policy, its copy or the node. */
enum lookup_out { OUT_POL, OUT_COPY, OUT_NODE };

static ALWAYS_INLINE enum lookup_out out_of(enum lookup k)
{
	switch (k) {
	case LK_UNSYNC_COPY:
	case LK_STORE_COPY:
	case LK_INL_COPY:
		return OUT_COPY;
	case LK_UNSYNC_NODE:
	case LK_STORE_NODE:
	case LK_INL_NODE:
		return OUT_NODE;
	default:
		return OUT_POL;
	}
}

/*
 * The unsync baseline's reference: ps_policy_get() and ps_policy_put(),
 * two calls on the atomic count (the pool's policies are in no store while
 * a baseline runs, so they are never striped then).
 */
static ALWAYS_INLINE const void *unsync_ref(struct base *b, uint64_t page)
{
	const void *pol = ps_policy_get((struct ps_policy *)base_lookup(b, page));

	ps_policy_put((struct ps_policy *)pol);
	return pol;
}

/* The hand-written locks: the lookup and its reference under the lock, the put after it. */
static ALWAYS_INLINE const void *locked_ref(struct ctx *c, uint64_t page, bool rw)
{
	const void *pol;

	if (rw)
		pthread_rwlock_rdlock(&c->base->rw);
	else
		pthread_mutex_lock(&c->base->mu);
	pol = ps_policy_get((struct ps_policy *)base_lookup(c->base, page));
	if (rw)
		pthread_rwlock_unlock(&c->base->rw);
	else
		pthread_mutex_unlock(&c->base->mu);
	ps_policy_put((struct ps_policy *)pol);
	return pol;
}

/*
 * Lookup @k of @page: the policy into *@pol, the node into *@node or the
 * copy into *@view, as out_of(@k) says.  The store forms go through the
 * library's calls (ps_store_*()) or, for :inline, through _ps_inl_*(), the
 * functions POLSTORE_INLINE maps the public names to.
 */
static ALWAYS_INLINE void lookup(struct ctx *c, uint64_t page, enum lookup k, const void **pol,
		int *node, struct ps_policy_view *view)
{
	switch (k) {
	case LK_UNSYNC_REF:
		*pol = unsync_ref(c->base, page);
		break;
	case LK_UNSYNC_NOREF:
		*pol = base_lookup(c->base, page);
		break;
	case LK_UNSYNC_COPY:
		_ps_policy_view_fill(base_lookup(c->base, page), view);
		break;
	case LK_UNSYNC_NODE:
		*node = base_node(c->base, page, 0);
		break;
	case LK_MUTEX:
		*pol = locked_ref(c, page, false);
		break;
	case LK_PRWLOCK:
		*pol = locked_ref(c, page, true);
		break;
	case LK_STORE_REF:
		*pol = ps_store_lookup(c->store, page);
		ps_policy_put((struct ps_policy *)*pol);
		break;
	case LK_STORE_NOREF:
		ps_store_read_lock(c->store);
		*pol = ps_store_lookup_borrow(c->store, page);
		ps_store_read_unlock(c->store);
		break;
	case LK_STORE_COPY:
		ps_store_lookup_copy(c->store, page, view);
		break;
	case LK_STORE_NODE:
		*node = stress_opts.counts ? ps_store_lookup_node_count(c->store, page, 0)
					   : ps_store_lookup_node(c->store, page, 0);
		break;
	case LK_INL_REF:
		*pol = _ps_inl_lookup(c->store, page);
		ps_policy_put((struct ps_policy *)*pol);
		break;
	case LK_INL_NOREF:
		_ps_inl_read_lock(c->store);
		*pol = _ps_inl_lookup_borrow(c->store, page);
		_ps_inl_read_unlock(c->store);
		break;
	case LK_INL_COPY:
		_ps_inl_lookup_copy(c->store, page, view);
		break;
	case LK_INL_NODE:
		*node = stress_opts.counts ? ps_store_lookup_node_count(c->store, page, 0)
					   : _ps_inl_lookup_node(c->store, page, 0);
		break;
	case LK_NULL:
		*pol = pool.pol[colour_of_slot(slot_of(&c->l, page)) * 2];
		break;
	}
}

/* Validate what lookup @k yielded for @page (a wrong answer aborts the run). */
static ALWAYS_INLINE void check(const struct ctx *c, uint64_t page, enum lookup k,
		const void *pol, int node, const struct ps_policy_view *view)
{
	switch (out_of(k)) {
	case OUT_POL:
		validate(c, page, pol);
		break;
	case OUT_COPY:
		validate_view(c, page, view);
		break;
	case OUT_NODE:
		validate_node(c, page, node);
		break;
	}
}

/*
 * The value the cost loop sums so the lookup is not optimised away; a
 * copy is consumed whole, so no form can skip loading what it copied.
 */
static ALWAYS_INLINE uintptr_t result(enum lookup k, const void *pol, int node,
		const struct ps_policy_view *view)
{
	switch (out_of(k)) {
	case OUT_COPY:
		return view->nodes[0] + (uintptr_t)view->mode + (uintptr_t)view->flags +
		       (uintptr_t)view->weight;
	case OUT_NODE:
		return (uintptr_t)node;
	default:
		return (uintptr_t)pol;
	}
}

/* ---- a rank's loop ------------------------------------------------------------ */

/*
 * lookup_share is computed twice: over every sampled iteration, and over
 * those that took less than STRESS_ONCPU_NS, i.e. where the rank most
 * likely kept its CPU.  On a machine shared with other work one preemption
 * of a few ms inside a 30 ns lookup otherwise decides the share; the first
 * form keeps it (waiting for a preempted lock holder is a real cost under
 * oversubscription), the second shows the share while running.
 */
static inline void sample_share(struct rank *rk, uint64_t lookup_t, uint64_t iter)
{
	rk->lookup_ticks += lookup_t;
	rk->iter_ticks += iter;
	if (iter < oncpu_ticks) {
		rk->lookup_ticks_oncpu += lookup_t;
		rk->iter_ticks_oncpu += iter;
	}
}

/*
 * Fault after fault until the point stops: pick a page, look it up,
 * validate, do the fault work, and (rcu-qsbr, @qsbr) announce a quiescent
 * state.  One iteration in 32 is timed.
 */
static ALWAYS_INLINE void rank_loop(struct rank *rk, enum lookup k, bool qsbr)
{
	struct ctx *c = rk->c;
	uint64_t rng = rk->seed, ops = 0;
	uint64_t seq = c->sequential ? (uint64_t)rk->id * c->l.n / (uint64_t)c->nranks : 0;
	const void *pol = NULL;
	int node = 0;
	struct ps_policy_view view = PS_POLICY_VIEW_INIT(1);

	while (!PSI_READ_ONCE(c->stop)) {
		uint64_t page = next_page(c, &rng, &seq);

		if (!(ops & STRESS_SAMPLE_MASK)) {
			uint64_t t0 = stress_ticks(), t1;

			lookup(c, page, k, &pol, &node, &view);
			t1 = stress_ticks();
			check(c, page, k, pol, node, &view);
			stress_work(c->work_iters);
			if (qsbr)
				ps_qsbr_quiescent();
			stress_hist_add(&rk->hist, t1 - t0);
			sample_share(rk, t1 - t0, stress_ticks() - t0);
		} else {
			lookup(c, page, k, &pol, &node, &view);
			check(c, page, k, pol, node, &view);
			stress_work(c->work_iters);
			if (qsbr)
				ps_qsbr_quiescent();
		}
		ops++;
	}
	rk->ops = ops;
}

static void rank_unsync_ref(struct rank *rk)
{
	rank_loop(rk, LK_UNSYNC_REF, false);
}
static void rank_unsync_noref(struct rank *rk)
{
	rank_loop(rk, LK_UNSYNC_NOREF, false);
}
static void rank_unsync_copy(struct rank *rk)
{
	rank_loop(rk, LK_UNSYNC_COPY, false);
}
static void rank_unsync_node(struct rank *rk)
{
	rank_loop(rk, LK_UNSYNC_NODE, false);
}
static void rank_mutex(struct rank *rk)
{
	rank_loop(rk, LK_MUTEX, false);
}
static void rank_prwlock(struct rank *rk)
{
	rank_loop(rk, LK_PRWLOCK, false);
}
static void rank_store_ref(struct rank *rk)
{
	rank_loop(rk, LK_STORE_REF, false);
}
static void rank_store_noref(struct rank *rk)
{
	rank_loop(rk, LK_STORE_NOREF, false);
}
static void rank_store_copy(struct rank *rk)
{
	rank_loop(rk, LK_STORE_COPY, false);
}
static void rank_store_node(struct rank *rk)
{
	rank_loop(rk, LK_STORE_NODE, false);
}
static void rank_inl_ref(struct rank *rk)
{
	rank_loop(rk, LK_INL_REF, false);
}
static void rank_inl_noref(struct rank *rk)
{
	rank_loop(rk, LK_INL_NOREF, false);
}
static void rank_inl_copy(struct rank *rk)
{
	rank_loop(rk, LK_INL_COPY, false);
}
static void rank_inl_node(struct rank *rk)
{
	rank_loop(rk, LK_INL_NODE, false);
}
static void rank_qsbr_ref(struct rank *rk)
{
	rank_loop(rk, LK_STORE_REF, true);
}
static void rank_qsbr_noref(struct rank *rk)
{
	rank_loop(rk, LK_STORE_NOREF, true);
}
static void rank_qsbr_copy(struct rank *rk)
{
	rank_loop(rk, LK_STORE_COPY, true);
}
static void rank_qsbr_node(struct rank *rk)
{
	rank_loop(rk, LK_STORE_NODE, true);
}
static void rank_qsbr_inl_ref(struct rank *rk)
{
	rank_loop(rk, LK_INL_REF, true);
}
static void rank_qsbr_inl_noref(struct rank *rk)
{
	rank_loop(rk, LK_INL_NOREF, true);
}
static void rank_qsbr_inl_copy(struct rank *rk)
{
	rank_loop(rk, LK_INL_COPY, true);
}
static void rank_qsbr_inl_node(struct rank *rk)
{
	rank_loop(rk, LK_INL_NODE, true);
}

/* By form (enum vform order). */
static void (*const rank_unsync[4])(struct rank *) = {
		rank_unsync_ref, rank_unsync_noref, rank_unsync_copy, rank_unsync_node};
/* By [qsbr][inl][form]. */
static void (*const rank_store[2][2][4])(struct rank *) = {
		{{rank_store_ref, rank_store_noref, rank_store_copy, rank_store_node},
				{rank_inl_ref, rank_inl_noref, rank_inl_copy, rank_inl_node}},
		{{rank_qsbr_ref, rank_qsbr_noref, rank_qsbr_copy, rank_qsbr_node},
				{rank_qsbr_inl_ref, rank_qsbr_inl_noref, rank_qsbr_inl_copy,
						rank_qsbr_inl_node}},
};

static void (*rank_loop_of(const struct variant *v))(struct rank *)
{
	switch (v->kind) {
	case V_UNSYNC:
		return rank_unsync[v->form];
	case V_MUTEX:
		return rank_mutex;
	case V_PRWLOCK:
		return rank_prwlock;
	case V_STORE:
		break;
	}
	return rank_store[is_qsbr(v)][v->inl][v->form];
}

void *rank_main(void *arg)
{
	struct rank *rk = arg;
	struct ctx *c = rk->c;
	bool qsbr = is_qsbr(c->v);
	void (*loop)(struct rank *) = rank_loop_of(c->v);

	stress_gate_wait(&c->gate);
	/* QSBR rules (polstore/rcu.h): online to read, quiescent every loop, offline to leave. */
	if (qsbr)
		ps_qsbr_thread_online();
	rk->t_start = stress_now_ns();
	rk->cpu_start = stress_thread_cpu_ns();
	loop(rk);
	rk->t_end = stress_now_ns();
	rk->cpu_end = stress_thread_cpu_ns();
	if (qsbr)
		ps_qsbr_thread_offline();
	return NULL;
}

/* ---- the cost loop: one rank, no writer, no other work -------------------------- */

#define COST_CHECK_MASK 255 /* validate one lookup in 256: the check is not the cost */

/*
 * Lookups in batches of 1024 until @deadline; rcu-qsbr (@qsbr) announces a
 * quiescent state after each batch.  With --dependent each page waits for
 * the last answer: it is the page drawn plus the answer masked by an
 * opaque zero, so the same pages are looked up, one at a time.  Returns
 * the lookups made.
 */
static ALWAYS_INLINE uint64_t cost_loop_mode(struct ctx *c, uint64_t deadline, enum lookup k,
		bool qsbr, bool dep)
{
	uint64_t rng = stress_seed_for(stress_opts.seed, 7), ops = 0, seq = 0, zero = 0;
	const void *pol = NULL;
	int node = 0;
	struct ps_policy_view view = PS_POLICY_VIEW_INIT(1);
	uintptr_t sink = 0, last = 0;

	__asm__("" : "+r"(zero));
	for (;;) {
		unsigned i;

		for (i = 0; i < 1024; i++) {
			uint64_t page = next_page(c, &rng, &seq);

			if (dep)
				page += zero & last;
			lookup(c, page, k, &pol, &node, &view);
			last = result(k, pol, node, &view);
			sink += last;
			if (!(i & COST_CHECK_MASK))
				check(c, page, k, pol, node, &view);
		}
		if (qsbr)
			ps_qsbr_quiescent();
		ops += 1024;
		if (stress_now_ns() >= deadline)
			break;
	}
	__asm__ __volatile__("" ::"r"(sink));
	return ops;
}

/*
 * A loop of each mode: @dep a constant in each, so that the independent
 * one has no path from an answer to the next page (not even a select).
 */
static ALWAYS_INLINE uint64_t cost_loop(struct ctx *c, uint64_t deadline, enum lookup k, bool qsbr)
{
	if (stress_opts.dependent)
		return cost_loop_mode(c, deadline, k, qsbr, true);
	return cost_loop_mode(c, deadline, k, qsbr, false);
}

typedef uint64_t cost_fn(struct ctx *c, uint64_t deadline);

static uint64_t cost_unsync_ref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_UNSYNC_REF, false);
}
static uint64_t cost_unsync_noref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_UNSYNC_NOREF, false);
}
static uint64_t cost_unsync_copy(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_UNSYNC_COPY, false);
}
static uint64_t cost_unsync_node(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_UNSYNC_NODE, false);
}
static uint64_t cost_mutex(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_MUTEX, false);
}
static uint64_t cost_prwlock(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_PRWLOCK, false);
}
static uint64_t cost_store_ref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_REF, false);
}
static uint64_t cost_store_noref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_NOREF, false);
}
static uint64_t cost_store_copy(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_COPY, false);
}
static uint64_t cost_store_node(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_NODE, false);
}
static uint64_t cost_inl_ref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_REF, false);
}
static uint64_t cost_inl_noref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_NOREF, false);
}
static uint64_t cost_inl_copy(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_COPY, false);
}
static uint64_t cost_inl_node(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_NODE, false);
}
static uint64_t cost_qsbr_ref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_REF, true);
}
static uint64_t cost_qsbr_noref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_NOREF, true);
}
static uint64_t cost_qsbr_copy(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_COPY, true);
}
static uint64_t cost_qsbr_node(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_STORE_NODE, true);
}
static uint64_t cost_qsbr_inl_ref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_REF, true);
}
static uint64_t cost_qsbr_inl_noref(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_NOREF, true);
}
static uint64_t cost_qsbr_inl_copy(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_COPY, true);
}
static uint64_t cost_qsbr_inl_node(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_INL_NODE, true);
}
/* The loop without a lookup: RNG, sampled check, sink. */
static uint64_t cost_null(struct ctx *c, uint64_t d)
{
	return cost_loop(c, d, LK_NULL, false);
}

static cost_fn *const cost_unsync[4] = {
		cost_unsync_ref, cost_unsync_noref, cost_unsync_copy, cost_unsync_node};
static cost_fn *const cost_store[2][2][4] = {
		{{cost_store_ref, cost_store_noref, cost_store_copy, cost_store_node},
				{cost_inl_ref, cost_inl_noref, cost_inl_copy, cost_inl_node}},
		{{cost_qsbr_ref, cost_qsbr_noref, cost_qsbr_copy, cost_qsbr_node},
				{cost_qsbr_inl_ref, cost_qsbr_inl_noref, cost_qsbr_inl_copy,
						cost_qsbr_inl_node}},
};

static cost_fn *cost_loop_of(const struct variant *v)
{
	switch (v->kind) {
	case V_UNSYNC:
		return cost_unsync[v->form];
	case V_MUTEX:
		return cost_mutex;
	case V_PRWLOCK:
		return cost_prwlock;
	case V_STORE:
		break;
	}
	return cost_store[is_qsbr(v)][v->inl][v->form];
}

struct cost_arg {
	struct ctx *c;
	double seconds;
	bool null_lookup; /* measure the loop without a lookup: its overhead */
	double ns_per_iter;
};

static void *cost_main(void *arg)
{
	struct cost_arg *a = arg;
	struct ctx *c = a->c;
	bool qsbr = is_qsbr(c->v);
	cost_fn *loop = a->null_lookup ? cost_null : cost_loop_of(c->v);
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

double measure_cost(struct ctx *c, double seconds, bool null_lookup)
{
	struct cost_arg a = {c, seconds, null_lookup, 0};
	pthread_t t;

	/* A fresh thread: the driver thread never registers with liburcu. */
	stress_thread_start(&t, cost_main, &a);
	pthread_join(t, NULL);
	return a.ns_per_iter;
}

double calibrate_lookup_ns(const struct layout *l)
{
	struct ctx c;
	double ns;

	ctx_build(&c, unsync_noref, l);
	ns = measure_cost(&c, 0.05, false);
	ctx_destroy(&c);
	return ns;
}
