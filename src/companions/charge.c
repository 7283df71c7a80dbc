// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Hierarchical charge counters (polstore/charge.h).
 *
 * One hierarchy walk (charge_hier_try/charge_hier_uncharge) over levels that
 * each update themselves as their kind says (charge_level_*), plus an
 * optional per-thread stock in front of any counter.
 *
 * Invariants, each at quiescence (no call in progress):
 *  - usage(c) == direct charges to c still held + stocked(c)
 *                + sum of usage(child) over the children of c;
 *  - SPIN/SEQLOCK: usage <= limit at every instant (check and add happen
 *    under the level's lock);
 *  - ATOMIC: the successful charges held never exceed the limit (each was
 *    <= limit when its add returned, and only successful adds stay), so
 *    usage - limit is at most the sum of the speculative adds in flight,
 *    one per thread.  Every value usage ever takes is the result of an
 *    add_fetch, so recording new - limit on the refusal path observes the
 *    exact maximum overshoot at no cost to successful charges;
 *  - a stock slot holds at most its counter's batch once the call that
 *    filled it returns (puts trim the excess back to the hierarchy).
 *
 * Topology (children lists) is guarded by one global spinlock, taken only
 * by create, destroy and drains; charges never take it, and drains take
 * level locks inside it, never the other way round.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/charge.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "compiler.h"
#include "names.h"
#include "seqcount.h"
#include "spinlock.h"
#include "thread_index.h"

struct charge_stock_slot {
	long nr;
	/*
	 * Refills still to be made at the charge's own size after a refused
	 * batch refill (near the limit a batch only hoards headroom that other
	 * threads' charges then drain back).  A hint: relaxed atomics, races
	 * between threads sharing a slot only change how much is pre-charged.
	 */
	long lean;
	/*
	 * Nonzero from a trim until the slot next serves a charge: a second
	 * trim meanwhile belongs to a run of uncharges (memory being given
	 * back) and keeps nothing.  A hint, as @lean is.
	 */
	int trimmed;
} __ps_cacheline_aligned;

struct ps_charge {
	/* Written by every charge: a line of its own. */
	long usage __ps_cacheline_aligned;
	long max_usage;
	long failcnt;
	long max_overshoot;
	long limit;
	struct psi_spinlock lock; /* SPIN, SEQLOCK: serialises writers (and SPIN readers) */
	struct ps_seqcount seq; /* SEQLOCK: readers' retry count */

	/* Read-mostly. */
	enum ps_charge_kind kind __ps_cacheline_aligned;
	struct ps_charge *parent;
	long stock_batch; /* 0: no stock; PSI_READ_ONCE */
	struct charge_stock_slot *stock; /* allocated once, under charge_topo, then release-published */

	/* Under charge_topo. */
	struct ps_charge *first_child;
	struct ps_charge *next_sibling;
};

static struct psi_spinlock charge_topo;
/* Counters that have had a stock; 0 lets refusals skip the drain-and-retry. */
static long charge_nr_stocked;

/*
 * The statics above are zero from the start; this runs psi_spin_init() on
 * charge_topo all the same, before main(), so that its lock words are
 * declared to helgrind/DRD like every other spinlock's, and declares
 * charge_nr_stocked, touched only with atomics (its RMWs under charge_topo,
 * lockless PSI_READ_ONCE in ps_charge_try()).
 */
/*
 * fork(): charge_topo is held across it, so the child gets it free and
 * consistent whatever the parent's other threads were doing (they do not
 * exist there: a lock one of them held would stay held for good, and
 * every create, destroy and drain of the child with it).  Drains take
 * level locks inside charge_topo, never the other way round, so the
 * prepare handler's wait ends.
 */
static void charge_fork_prepare(void)
{
	psi_spin_lock(&charge_topo);
}

static void charge_fork_parent(void)
{
	psi_spin_unlock(&charge_topo);
}

static void charge_fork_child(void)
{
	/* No other thread exists, so no waiter may hold the anti-starvation turn either. */
	psi_spin_init(&charge_topo);
}

/* The fork handlers are installed (by the constructor, or retried by ps_charge_create()). */
static bool charge_atfork_ok;
static pthread_mutex_t charge_atfork_lock = PTHREAD_MUTEX_INITIALIZER;

static bool charge_atfork_install(void)
{
	bool ok;

	pthread_mutex_lock(&charge_atfork_lock);
	if (!PSI_READ_ONCE(charge_atfork_ok))
		PSI_WRITE_ONCE(charge_atfork_ok,
				!pthread_atfork(charge_fork_prepare, charge_fork_parent,
						charge_fork_child));
	ok = PSI_READ_ONCE(charge_atfork_ok);
	pthread_mutex_unlock(&charge_atfork_lock);
	return ok;
}

__attribute__((constructor)) static void charge_init_statics(void)
{
	psi_spin_init(&charge_topo);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&charge_nr_stocked, sizeof(charge_nr_stocked));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&charge_atfork_ok, sizeof(charge_atfork_ok));
	(void)charge_atfork_install();
}

static const char *const charge_kind_names[PS_CHARGE_KIND_COUNT] = {
	[PS_CHARGE_SPIN] = "spin",
	[PS_CHARGE_SEQLOCK] = "seqlock",
	[PS_CHARGE_ATOMIC] = "atomic",
	[PS_CHARGE_STOCK] = "stock",
};

const char *ps_charge_kind_name(enum ps_charge_kind value)
{
	return psi_name_of(charge_kind_names, PS_CHARGE_KIND_COUNT, (int)value);
}

int ps_charge_kind_from_name(const char *name)
{
	return psi_name_index(charge_kind_names, PS_CHARGE_KIND_COUNT, name);
}

static inline bool charge_is_atomic(const struct ps_charge *c)
{
	return c->kind == PS_CHARGE_ATOMIC || c->kind == PS_CHARGE_STOCK;
}

static void charge_atomic_max(long *slot, long v)
{
	long cur = PSI_READ_ONCE(*slot);

	while (v > cur &&
			!PSI_TRY_CMPXCHG_WEAK(*slot, &cur, v, RELAXED, RELAXED))
		;
}

static void charge_underflow(const struct ps_charge *c, long usage)
{
#ifdef POLSTORE_DEBUG_CHECKS
	fprintf(stderr, "polstore: charge counter %p uncharged below zero (usage %ld)\n",
			(const void *)c, usage);
	abort();
#else
	(void)c;
	(void)usage;
#endif
}

/*
 * Declare to helgrind/DRD the words of @c that are only ever accessed with
 * atomics (they see atomics as plain accesses).  Context: before @c is shared.
 *  - @stock_batch (PSI_READ_ONCE/PSI_WRITE_ONCE) and @stock (release store
 *    under charge_topo, acquire loads; plain reads only under charge_topo or
 *    by destroy), every kind; the slots are declared when allocated;
 *  - the counter words, for every kind but SPIN: ATOMIC and STOCK update
 *    them with atomic RMWs and read them lockless; SEQLOCK writes them with
 *    PSI_WRITE_ONCE under c->lock and its readers load them with
 *    PSI_READ_ONCE inside a seqcount section that retries when a writer got
 *    in (the lock holder's plain reads never meet a concurrent write).
 *    SPIN keeps every access under c->lock, so the checkers still check it.
 */
static void charge_declare_atomics(struct ps_charge *c)
{
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->stock_batch, sizeof(c->stock_batch));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->stock, sizeof(c->stock));
	if (c->kind == PS_CHARGE_SPIN)
		return;
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->usage, sizeof(c->usage));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->max_usage, sizeof(c->max_usage));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->failcnt, sizeof(c->failcnt));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->max_overshoot, sizeof(c->max_overshoot));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->limit, sizeof(c->limit));
}

/* Locked kinds: the caller holds c->lock.  Stores are WRITE_ONCE for SEQLOCK readers. */
static inline void charge_locked_begin(struct ps_charge *c)
{
	psi_spin_lock(&c->lock);
	if (c->kind == PS_CHARGE_SEQLOCK)
		psi_seq_write_begin(&c->seq);
}

static inline void charge_locked_end(struct ps_charge *c)
{
	if (c->kind == PS_CHARGE_SEQLOCK)
		psi_seq_write_end(&c->seq);
	psi_spin_unlock(&c->lock);
}

/* Charge @nr at this level only.  False when the limit refused it. */
static bool charge_level_try(struct ps_charge *c, long nr, bool count_fail)
{
	long new, limit;

	if (charge_is_atomic(c)) {
		/*
		 * seq_cst add, then seq_cst load of the limit; set_limit stores
		 * the limit, then loads usage, both seq_cst: one of the two sees
		 * the other, so a new limit is never missed by both.
		 */
		new = PSI_ADD_FETCH(c->usage, nr, SEQ_CST);
		limit = PSI_LOAD_SEQ_CST(c->limit);
		if (psi_unlikely(new > limit)) {
			charge_atomic_max(&c->max_overshoot, new - limit);
			PSI_SUB_FETCH(c->usage, nr, RELAXED);
			if (count_fail)
				PSI_ADD_FETCH(c->failcnt, 1, RELAXED);
			return false;
		}
		if (new > PSI_READ_ONCE(c->max_usage))
			charge_atomic_max(&c->max_usage, new);
		return true;
	}

	psi_spin_lock(&c->lock);
	new = c->usage + nr;
	if (new > c->limit) {
		if (count_fail) {
			if (c->kind == PS_CHARGE_SEQLOCK)
				psi_seq_write_begin(&c->seq);
			PSI_WRITE_ONCE(c->failcnt, c->failcnt + 1);
			if (c->kind == PS_CHARGE_SEQLOCK)
				psi_seq_write_end(&c->seq);
		}
		psi_spin_unlock(&c->lock);
		return false;
	}
	if (c->kind == PS_CHARGE_SEQLOCK)
		psi_seq_write_begin(&c->seq);
	PSI_WRITE_ONCE(c->usage, new);
	if (new > c->max_usage)
		PSI_WRITE_ONCE(c->max_usage, new);
	charge_locked_end(c);
	return true;
}

static void charge_level_uncharge(struct ps_charge *c, long nr)
{
	long new;

	if (charge_is_atomic(c)) {
		new = PSI_SUB_FETCH(c->usage, nr, RELAXED);
	} else {
		charge_locked_begin(c);
		new = c->usage - nr;
		PSI_WRITE_ONCE(c->usage, new);
		charge_locked_end(c);
	}
	if (psi_unlikely(new < 0))
		charge_underflow(c, new);
}

/* Uncharge @nr at this level unless its usage is below @nr. */
static bool charge_level_uncharge_checked(struct ps_charge *c, long nr)
{
	long cur;

	if (charge_is_atomic(c)) {
		cur = PSI_READ_ONCE(c->usage);
		do {
			if (cur < nr)
				return false;
		} while (!PSI_TRY_CMPXCHG_WEAK(c->usage, &cur, cur - nr, RELAXED, RELAXED));
		return true;
	}
	psi_spin_lock(&c->lock);
	if (c->usage < nr) {
		psi_spin_unlock(&c->lock);
		return false;
	}
	if (c->kind == PS_CHARGE_SEQLOCK)
		psi_seq_write_begin(&c->seq);
	PSI_WRITE_ONCE(c->usage, c->usage - nr);
	charge_locked_end(c);
	return true;
}

static int charge_hier_try(struct ps_charge *c, long nr, struct ps_charge **fail, bool count_fail)
{
	struct ps_charge *l, *u;

	for (l = c; l; l = l->parent) {
		if (psi_likely(charge_level_try(l, nr, count_fail)))
			continue;
		for (u = c; u != l; u = u->parent)
			charge_level_uncharge(u, nr);
		if (fail)
			*fail = l;
		return -ENOMEM;
	}
	return 0;
}

static void charge_hier_uncharge(struct ps_charge *c, long nr)
{
	for (; c; c = c->parent)
		charge_level_uncharge(c, nr);
}

/* ---- Per-thread stock ---------------------------------------------------- */

/*
 * A thread's slot index, the same for every counter, handed out round-robin
 * so the first PS_CHARGE_STOCK_SLOTS threads never share one.  Shared slots
 * stay correct: every slot update is an atomic RMW.
 */
static inline struct charge_stock_slot *charge_slot(struct charge_stock_slot *stock)
{
	return &stock[psi_thread_index() % PS_CHARGE_STOCK_SLOTS];
}

static bool charge_stock_take(struct charge_stock_slot *s, long nr)
{
	long cur = PSI_READ_ONCE(s->nr);

	while (cur >= nr)
		if (PSI_TRY_CMPXCHG_WEAK(s->nr, &cur, cur - nr, RELAXED, RELAXED))
			return true;
	return false;
}

/*
 * Add @nr pre-charged pages to a slot of @c.  When the slot would hold more
 * than @batch, it keeps half a batch and the rest goes back to the
 * hierarchy: uncharges and charges that alternate around a full slot then
 * walk the shared levels once per half batch, not once per call as trimming
 * to exactly @batch would, and the half kept still serves the charges that
 * follow.  A second trim with no charge served since the first is a run of
 * uncharges: that one keeps nothing, so the run walks once per batch.
 */
static void charge_stock_put(struct ps_charge *c, struct charge_stock_slot *s, long nr, long batch)
{
	long cur = PSI_ADD_FETCH(s->nr, nr, RELAXED);
	long keep;

	while (cur > batch) {
		keep = PSI_READ_ONCE(s->trimmed) ? 0 : batch / 2;
		if (PSI_TRY_CMPXCHG_WEAK(s->nr, &cur, keep, RELAXED, RELAXED)) {
			PSI_WRITE_ONCE(s->trimmed, 1);
			charge_hier_uncharge(c, cur - keep);
			return;
		}
	}
}

static void charge_drain_one(struct ps_charge *c)
{
	struct charge_stock_slot *stock = PSI_LOAD_ACQUIRE(c->stock);
	long v;
	int i;

	if (!stock)
		return;
	/*
	 * Load before exchanging: an empty slot's line is not written (nor
	 * taken from its owner's cache).  A put landing after the load is a
	 * put after the drain; at quiescence the load sees every put.
	 */
	for (i = 0; i < PS_CHARGE_STOCK_SLOTS; i++) {
		if (!PSI_READ_ONCE(stock[i].nr))
			continue;
		v = PSI_XCHG(stock[i].nr, 0, RELAXED);
		if (v)
			charge_hier_uncharge(c, v);
	}
}

/* Drain @c and its descendants: a pre-order walk of the subtree.  Caller holds charge_topo. */
static void charge_drain_subtree_locked(struct ps_charge *top)
{
	struct ps_charge *c = top;

	for (;;) {
		charge_drain_one(c);
		if (c->first_child) {
			c = c->first_child;
			continue;
		}
		while (c != top && !c->next_sibling)
			c = c->parent;
		if (c == top)
			return;
		c = c->next_sibling;
	}
}

static void charge_drain_subtree(struct ps_charge *top)
{
	psi_spin_lock(&charge_topo);
	charge_drain_subtree_locked(top);
	psi_spin_unlock(&charge_topo);
}

static long charge_stocked(const struct ps_charge *c)
{
	struct charge_stock_slot *stock = PSI_LOAD_ACQUIRE(c->stock);
	long sum = 0;
	int i;

	if (!stock)
		return 0;
	for (i = 0; i < PS_CHARGE_STOCK_SLOTS; i++)
		sum += PSI_READ_ONCE(stock[i].nr);
	return sum;
}

/* ---- Public operations --------------------------------------------------- */

static int charge_enable_stock(struct ps_charge *c)
{
	struct charge_stock_slot *stock;
	int ret = 0;

	psi_spin_lock(&charge_topo);
	if (!c->stock) {
		stock = psi_zalloc_aligned(sizeof(*stock) * PS_CHARGE_STOCK_SLOTS);
		if (stock) {
			/* Slots: only ever atomic RMWs and loads once zeroed. */
			PSI_ANNOTATE_BENIGN_RACE_SIZED(stock, sizeof(*stock) * PS_CHARGE_STOCK_SLOTS);
			/* Release: the zeroed slots are visible to whoever loads the pointer. */
			PSI_STORE_RELEASE(c->stock, stock);
			PSI_ADD_FETCH(charge_nr_stocked, 1, RELAXED);
		} else {
			ret = -ENOMEM;
		}
	}
	psi_spin_unlock(&charge_topo);
	return ret;
}

struct ps_charge *ps_charge_create(enum ps_charge_kind kind, struct ps_charge *parent, long limit)
{
	struct ps_charge *c;

	if ((unsigned)kind >= PS_CHARGE_KIND_COUNT || limit < 0 || limit > PS_CHARGE_MAX)
		return psi_err_null(EINVAL);
	/* No counter without the fork handlers that keep charge_topo usable in a child. */
	if (psi_unlikely(!PSI_READ_ONCE(charge_atfork_ok)) &&
			!charge_atfork_install())
		return psi_err_null(ENOMEM);
	c = psi_zalloc_aligned(sizeof(*c));
	if (!c)
		return psi_err_null(ENOMEM);
	c->kind = kind;
	c->limit = limit;
	c->parent = parent;
	psi_spin_init(&c->lock);
	psi_seq_init(&c->seq);
	charge_declare_atomics(c);
	if (kind == PS_CHARGE_STOCK) {
		if (charge_enable_stock(c)) {
			psi_free_aligned(c);
			return psi_err_null(ENOMEM);
		}
		c->stock_batch = PS_CHARGE_STOCK_BATCH;
	}
	if (parent) {
		psi_spin_lock(&charge_topo);
		c->next_sibling = parent->first_child;
		parent->first_child = c;
		psi_spin_unlock(&charge_topo);
	}
	return c;
}

int ps_charge_destroy(struct ps_charge *c)
{
	struct ps_charge **pp;

	if (!c)
		return 0;
	psi_spin_lock(&charge_topo);
	if (c->first_child) {
		psi_spin_unlock(&charge_topo);
		return -EBUSY;
	}
	charge_drain_one(c);
	if (PSI_READ_ONCE(c->usage)) {
		psi_spin_unlock(&charge_topo);
		return -EBUSY;
	}
	if (c->parent) {
		for (pp = &c->parent->first_child; *pp != c; pp = &(*pp)->next_sibling)
			;
		*pp = c->next_sibling;
	}
	if (c->stock)
		PSI_SUB_FETCH(charge_nr_stocked, 1, RELAXED);
	psi_spin_unlock(&charge_topo);
	psi_free_aligned(c->stock);
	psi_free_aligned(c);
	return 0;
}

int ps_charge_kind(const struct ps_charge *c)
{
	return c ? (int)c->kind : -EINVAL;
}

struct ps_charge *ps_charge_parent(const struct ps_charge *c)
{
	return c ? c->parent : NULL;
}

/*
 * The calling thread's stock slot of @c when a charge or uncharge of @nr
 * goes through the stock (a stock exists and @nr fits one batch), with the
 * batch in @batch; NULL when it goes straight to the hierarchy.
 */
static struct charge_stock_slot *charge_stock_for(struct ps_charge *c, long nr, long *batch)
{
	struct charge_stock_slot *stock;

	*batch = PSI_READ_ONCE(c->stock_batch);
	stock = PSI_LOAD_ACQUIRE(c->stock);
	return *batch && stock && nr <= *batch ? charge_slot(stock) : NULL;
}

int ps_charge_try(struct ps_charge *c, long nr, struct ps_charge **fail)
{
	struct charge_stock_slot *s;
	struct ps_charge *refused;
	long batch, lean;

	if (!c || nr < 0 || nr > PS_CHARGE_MAX)
		return -EINVAL;
	s = charge_stock_for(c, nr, &batch);
	if (s) {
		/* A charge ends a run of uncharges; loaded first, so most charges store nothing. */
		if (psi_unlikely(PSI_READ_ONCE(s->trimmed)))
			PSI_WRITE_ONCE(s->trimmed, 0);
		if (psi_likely(charge_stock_take(s, nr)))
			return 0;
		lean = PSI_READ_ONCE(s->lean);
		if (lean > 0) {
			/* Near the limit: charge only @nr, as the walk below does. */
			PSI_WRITE_ONCE(s->lean, lean - 1);
		} else if (!charge_hier_try(c, batch, NULL, false)) {
			/* Refill: a whole batch, the rest of it kept in our slot. */
			if (batch > nr)
				charge_stock_put(c, s, batch - nr, batch);
			return 0;
		} else if (batch > nr) {
			/* Refused: the next @batch refills charge only their own @nr. */
			PSI_WRITE_ONCE(s->lean, batch);
		}
	}
	/* No stock anywhere: the plain walk, failcnt counted at the first refusal. */
	if (!PSI_READ_ONCE(charge_nr_stocked))
		return charge_hier_try(c, nr, fail, true);
	if (!charge_hier_try(c, nr, &refused, false))
		return 0;
	/* The limit is near: pages sitting in stocks under the refusing level go back first. */
	charge_drain_subtree(refused);
	return charge_hier_try(c, nr, fail, true);
}

int ps_charge_uncharge(struct ps_charge *c, long nr)
{
	struct charge_stock_slot *s;
	long batch;

	if (!c || nr < 0 || nr > PS_CHARGE_MAX)
		return -EINVAL;
	s = charge_stock_for(c, nr, &batch);
	if (s) {
		charge_stock_put(c, s, nr, batch);
		return 0;
	}
	if (!charge_level_uncharge_checked(c, nr))
		return -EINVAL;
	charge_hier_uncharge(c->parent, nr);
	return 0;
}

static int charge_set_limit_once(struct ps_charge *c, long limit)
{
	long old;

	if (charge_is_atomic(c)) {
		if (PSI_LOAD_SEQ_CST(c->usage) > limit)
			return -EBUSY;
		/* Pairs with the add-then-load in charge_level_try(). */
		old = PSI_XCHG(c->limit, limit, SEQ_CST);
		if (PSI_LOAD_SEQ_CST(c->usage) > limit) {
			/* Put the old limit back unless another set_limit got in first. */
			PSI_TRY_CMPXCHG(c->limit, &limit, old, SEQ_CST, SEQ_CST);
			return -EBUSY;
		}
		return 0;
	}
	psi_spin_lock(&c->lock);
	if (c->usage > limit) {
		psi_spin_unlock(&c->lock);
		return -EBUSY;
	}
	if (c->kind == PS_CHARGE_SEQLOCK)
		psi_seq_write_begin(&c->seq);
	PSI_WRITE_ONCE(c->limit, limit);
	charge_locked_end(c);
	return 0;
}

int ps_charge_set_limit(struct ps_charge *c, long limit)
{
	int ret;

	if (!c || limit < 0 || limit > PS_CHARGE_MAX)
		return -EINVAL;
	ret = charge_set_limit_once(c, limit);
	if (ret == -EBUSY) {
		charge_drain_subtree(c);
		ret = charge_set_limit_once(c, limit);
	}
	return ret;
}

int ps_charge_set_stock(struct ps_charge *c, long batch)
{
	int ret;

	if (!c || batch < 0 || batch > PS_CHARGE_MAX)
		return -EINVAL;
	if (batch) {
		ret = charge_enable_stock(c);
		if (ret)
			return ret;
	}
	PSI_WRITE_ONCE(c->stock_batch, batch);
	psi_spin_lock(&charge_topo);
	charge_drain_one(c);
	psi_spin_unlock(&charge_topo);
	return 0;
}

long ps_charge_stock_batch(const struct ps_charge *c)
{
	return c ? PSI_READ_ONCE(c->stock_batch) : -EINVAL;
}

int ps_charge_drain_stock(struct ps_charge *c)
{
	if (!c)
		return -EINVAL;
	charge_drain_subtree(c);
	return 0;
}

static void charge_read_fields(const struct ps_charge *c, struct ps_charge_stat *st)
{
	st->usage = PSI_READ_ONCE(c->usage);
	st->limit = PSI_READ_ONCE(c->limit);
	st->max_usage = PSI_READ_ONCE(c->max_usage);
	st->failcnt = PSI_READ_ONCE(c->failcnt);
	st->max_overshoot = PSI_READ_ONCE(c->max_overshoot);
}

int ps_charge_stat(const struct ps_charge *c, struct ps_charge_stat *st)
{
	struct ps_charge *w = (struct ps_charge *)c; /* the lock is mutable state */
	unsigned seq;

	if (!c || !st)
		return -EINVAL;
	switch (c->kind) {
	case PS_CHARGE_SPIN:
		psi_spin_lock(&w->lock);
		charge_read_fields(c, st);
		psi_spin_unlock(&w->lock);
		break;
	case PS_CHARGE_SEQLOCK:
		do {
			seq = psi_seq_read_begin(&c->seq);
			charge_read_fields(c, st);
		} while (psi_seq_read_retry(&c->seq, seq));
		break;
	default:
		charge_read_fields(c, st);
		break;
	}
	st->stocked = charge_stocked(c);
	return 0;
}

long ps_charge_read(const struct ps_charge *c, enum ps_charge_field field)
{
	struct ps_charge_stat st;

	if (!c || (unsigned)field > PS_CHARGE_STOCKED)
		return -EINVAL;
	if (field == PS_CHARGE_STOCKED)
		return charge_stocked(c);
	ps_charge_stat(c, &st);
	switch (field) {
	case PS_CHARGE_USAGE:
		return st.usage;
	case PS_CHARGE_LIMIT:
		return st.limit;
	case PS_CHARGE_MAX_USAGE:
		return st.max_usage;
	case PS_CHARGE_FAILCNT:
		return st.failcnt;
	case PS_CHARGE_MAX_OVERSHOOT:
		return st.max_overshoot;
	default:
		return -EINVAL;
	}
}

int ps_charge_reset_max(struct ps_charge *c)
{
	if (!c)
		return -EINVAL;
	if (charge_is_atomic(c)) {
		PSI_WRITE_ONCE(c->max_usage, PSI_READ_ONCE(c->usage));
		PSI_WRITE_ONCE(c->max_overshoot, 0);
		return 0;
	}
	charge_locked_begin(c);
	PSI_WRITE_ONCE(c->max_usage, c->usage);
	PSI_WRITE_ONCE(c->max_overshoot, 0);
	charge_locked_end(c);
	return 0;
}

int ps_charge_reset_failcnt(struct ps_charge *c)
{
	if (!c)
		return -EINVAL;
	if (charge_is_atomic(c)) {
		PSI_WRITE_ONCE(c->failcnt, 0);
		return 0;
	}
	charge_locked_begin(c);
	PSI_WRITE_ONCE(c->failcnt, 0);
	charge_locked_end(c);
	return 0;
}

long ps_charge_overshoot_bound(enum ps_charge_kind kind, int nthreads, long max_nr, long batch)
{
	long per;

	if ((unsigned)kind >= PS_CHARGE_KIND_COUNT || nthreads < 0 || max_nr < 0 || batch < 0)
		return -EINVAL;
	if (kind == PS_CHARGE_SPIN || kind == PS_CHARGE_SEQLOCK)
		return 0;
	if (kind == PS_CHARGE_STOCK && !batch)
		batch = PS_CHARGE_STOCK_BATCH;
	per = max_nr > batch ? max_nr : batch;
	return (long)nthreads * per;
}
