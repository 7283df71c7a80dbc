/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store: one copy-on-write red-black tree, written once and
 * compiled once per liburcu flavour (sync_rcu.c: memb, sync_qsbr.c: qsbr).
 * The including file defines
 *   PS_COW_READ_ENTER(), PS_COW_READ_EXIT()   a read-side section;
 *   PS_COW_IN_SECTION()    true when the calling thread is inside a section
 *                          already, so a lookup needs none of its own
 *                          (QSBR: an online thread); optional;
 *   PS_COW_WAIT_ENTER() / PS_COW_WAIT_EXIT(token)
 *                          around a wait for a grace period where the
 *                          caller's contract allows one (QSBR: an online
 *                          thread goes offline and back);
 *   PS_COW_CAN_WAIT()      true when the thread is outside every
 *                          read-side section (QSBR: offline), so that it
 *                          may wait without being told it may;
 *   PS_COW_SYNCHRONIZE()   the flavour's grace period;
 *   PS_COW_RECLAIMER       the flavour's reclaim thread (rcu_reclaim.h);
 *   PS_COW_OPS             the name of the ops table.
 *
 * Why readers are safe.  A version of the tree, once published, is never
 * written: a set copies every node it must change (rangetree.c,
 * rbtree.c), links the copies into a private version that shares all the
 * other nodes with the published one, and publishes it with one release
 * store of the root.  A reader loads the root once (acquire) and walks an
 * immutable tree: it never retries, never blocks, and writes nothing but its
 * own liburcu per-thread counter (nothing at all under QSBR).  A lookup is
 * linearizable at its load of the root; a set at its publication.
 *
 * Why nothing is freed under a reader.  The nodes a set replaced (the
 * originals of its copies) and the ranges it removed go on the store's
 * retire batch; a full batch goes to the flavour's reclaim thread
 * (rcu_reclaim.h), which releases it after a grace period, i.e. after
 * every reader that could have loaded a root reaching them has left its
 * section.  Removed ranges drop
 * their policy reference then; replaced ones drop none (the copy took it
 * over: struct ps_rtree_cow).  So a set never waits for readers.
 *
 * Allocation: a set first computes how many ranges it can need in the worst
 * case (ps_rtree_cow_need()) and tops the store's spare pool up to that,
 * and allocates the retire batch header it may fill; -ENOMEM there leaves
 * everything as it was.  Only then is the new version built, from spares.
 *
 * Recycling: the reclaim thread does not free the ranges of a batch but hands
 * them (policy references dropped) to the store's recycle array while the
 * store holds fewer than PS_COW_SPARE_MAX spares and its recycle lock is
 * free (neither side ever waits for the other: cow_recycle()); the next
 * set moves them into its pool, so a steady writer allocates nothing.
 * Spares are kept by pointer: taking one from an array costs no load from
 * its memory (a list would make each take a dependent cache miss on a
 * range that may be cold).
 * ps_store_synchronize() gives back every spare beyond PS_COW_SPARE_IDLE.
 *
 * Memory bound: ranges retired but not yet freed are the partial batch
 * (< PS_COW_RETIRE_BATCH) plus the batches in flight.  Should the
 * reclaim thread fall behind by more than PS_COW_INFLIGHT_MAX ranges, a
 * set called outside every read-side section (PS_COW_CAN_WAIT()) frees its
 * batch itself after a grace period instead of queueing it; one called
 * inside a section queues it anyway: a set never waits there.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "annotate.h"
#include "rcu_reclaim.h"
#include "store_internal.h"

#ifdef PS_COW_IN_SECTION
/* Out of line, off the path of the lookups that need no section. */
#define PS_COW_LOOKUP_SECTION static __attribute__((noinline))
#else
#define PS_COW_IN_SECTION() false
#define PS_COW_LOOKUP_SECTION static inline
#endif

/*
 * Ranges a set is first prepared to erase (more: it runs again, prepared
 * for all).  The guess grows fourfold when a set meets more, and halves
 * after PS_COW_GUESS_DECAY sets without that, never below the minimum.
 */
#define PS_COW_GUESS_ERASE 4
#define PS_COW_GUESS_ERASE_MAX 1024
#define PS_COW_GUESS_DECAY 1024
/* Ranges per retire batch handed to the reclaim thread. */
#define PS_COW_RETIRE_BATCH 256
/* Retired ranges in flight past which a set that may wait frees its own batch. */
#define PS_COW_INFLIGHT_MAX (1 << 18)
/*
 * Spare ranges a store keeps at most, in its pool and on its recycle list
 * together (beyond, the worker frees what a grace period released, and a
 * set frees the pool's excess), and what ps_store_synchronize() leaves.
 */
#define PS_COW_SPARE_MAX 65536
#define PS_COW_SPARE_IDLE 256

/* Annotation key: every batch freed happens before the flavour's barrier returns. */
static char cow_batches_done __attribute__((unused));

/*
 * Retired ranges by pointer, and the policy references to drop with them,
 * recorded by the writer while the ranges are still in its cache: the
 * worker then releases a batch without loading a single range.
 */
struct cow_batch {
	struct ps_reclaim_item item;
	struct ps_store_cow *store;
	struct cow_batch *next_stalled;
	size_t n, npols, cap;
	struct ps_range **ranges;  /* [cap]: retired ranges */
	struct ps_policy **pols;   /* [cap]: the references removed ones held */
	/* What did not fit (a set that retired many): released by walking them. */
	struct ps_range_list over_replaced, over_removed;
};

struct ps_store_cow {
	struct ps_store base;
	pthread_mutex_t wlock __ps_cacheline_aligned;
	/* Under @wlock: */
	uint64_t gen;                  /* the last update's generation */
	size_t guess_erase;            /* see PS_COW_GUESS_ERASE */
	unsigned guess_sets;           /* sets since @guess_erase last changed */
	struct ps_range_vec pool;      /* spare ranges */
	size_t npool;                  /* atomic copy of @pool.n, for the worker */
	struct cow_batch *batch;       /* the partial retire batch, or NULL */
	struct cow_batch *stalled;     /* full batches no reclaim thread took */
	size_t nstalled;               /* ranges in @stalled; atomic reads outside @wlock */
	/* Atomic: ranges (and batches) handed to the reclaim thread and not yet released. */
	size_t inflight, inflight_batches;
	/* Ranges a grace period released, for the next sets' pool; under @rlock. */
	pthread_mutex_t rlock;
	struct ps_range_vec recycle;
	size_t nrecycle; /* atomic copy of @recycle.n: a hint read without @rlock */
};
_Static_assert(offsetof(struct ps_store_cow, base) == 0, "_ps_store_zalloc(): base first");

static inline struct ps_store_cow *to_cow(struct ps_store *s)
{
	return ps_container_of(s, struct ps_store_cow, base);
}

/* The published root: loaded first, then declared to the thread checkers. */
static inline struct ps_rb_node *cow_root(struct ps_store_cow *cs)
{
	struct ps_rb_node *root = ps_rb_load_root(&cs->base.rd.tree.root);

	PS_ANNOTATE_HAPPENS_AFTER(&cs->base.rd.tree); /* pairs with the publication in cow_set() */
	return root;
}

static inline struct ps_policy *cow_lookup_pol(struct ps_store_cow *cs, uint64_t idx)
{
	struct ps_range *r = ps_rtree_lookup_from(cow_root(cs), idx);

	return r ? PS_READ_ONCE(r->pol) : NULL;
}

static struct ps_store *cow_create(void)
{
	struct ps_store *s = _ps_store_zalloc(sizeof(struct ps_store_cow));
	struct ps_store_cow *cs;

	if (!s)
		return NULL;
	cs = to_cow(s);
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->base.rd.tree, sizeof(cs->base.rd.tree)); /* atomics only */
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->inflight, sizeof(cs->inflight));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->nrecycle, sizeof(cs->nrecycle));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->nstalled, sizeof(cs->nstalled));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->inflight_batches, sizeof(cs->inflight_batches));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->npool, sizeof(cs->npool));
	pthread_mutex_init(&cs->wlock, NULL);
	pthread_mutex_init(&cs->rlock, NULL);
	return s;
}

static inline size_t batch_ranges(const struct cow_batch *b)
{
	return b->n + b->over_replaced.n + b->over_removed.n;
}

static struct cow_batch *batch_alloc(void)
{
	/* A batch is handed over once it holds PS_COW_RETIRE_BATCH: room for the set that fills it. */
	size_t cap = 2 * PS_COW_RETIRE_BATCH;
	struct cow_batch *b = _ps_zalloc(sizeof(*b) + 2 * cap * sizeof(void *));

	if (!b)
		return NULL;
	b->ranges = (struct ps_range **)(b + 1);
	b->pols = (struct ps_policy **)(b->ranges + cap);
	b->cap = cap;
	return b;
}

/* Drop the references of the removed ranges, and free those that did not fit. */
static void batch_put_policies(struct cow_batch *b)
{
	size_t i;

	for (i = 0; i < b->npols; i++)
		_ps_policy_store_put(b->pols[i]);
	b->npols = 0;
	ps_range_list_free(&b->over_removed);
	ps_range_list_free_nopol(&b->over_replaced);
}

static void batch_free_now(struct cow_batch *b)
{
	size_t i;

	batch_put_policies(b);
	for (i = 0; i < b->n; i++)
		_ps_free(b->ranges[i]);
	_ps_free(b);
}

/* Free a chain of batches (linked by @next_stalled) at once: no reader can reach them. */
static void batch_chain_free_now(struct cow_batch *b)
{
	struct cow_batch *next;

	for (; b; b = next) {
		next = b->next_stalled;
		batch_free_now(b);
	}
}

/*
 * Give @b's ranges (no policy references left) to the store's next sets, or
 * leave them to the caller to free.
 *
 * Never waits for @rlock, as a writer never waits for the reclaim thread
 * (cow_take_recycled()): the two only ever try.  A wait here could last
 * forever in a forked child: the reclaim queue is copied into the child
 * with the batches of every store, and a writer that held @rlock at the
 * fork (a set in cow_take_recycled(), or ps_store_synchronize() or
 * ps_store_memory() on this store) is frozen there with it.  The child's
 * reclaim thread would block on it at the first such batch, and every
 * barrier of the flavour with it: ps_store_synchronize() and
 * ps_store_destroy() of a store the child made itself would never return
 * (tests/test_cow.c, fork_while_writer_holds_recycle_lock).  Freeing a
 * batch that finds @rlock busy costs the writer only an allocation later.
 */
static void cow_recycle(struct ps_store_cow *cs, struct cow_batch *b)
{
	if (pthread_mutex_trylock(&cs->rlock))
		return; /* busy: the caller frees them */
	if (ps_range_vec_reserve(&cs->recycle, cs->recycle.n + b->n)) {
		pthread_mutex_unlock(&cs->rlock);
		return; /* recycling is an optimisation: the caller frees them */
	}
	memcpy(cs->recycle.v + cs->recycle.n, b->ranges, b->n * sizeof(*b->ranges));
	cs->recycle.n += b->n;
	b->n = 0;
	__atomic_store_n(&cs->nrecycle, cs->recycle.n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cs->rlock);
}

/*
 * Under @wlock: move what the reclaim thread recycled into the pool (if the
 * pool can grow).  A writer never waits for the reclaim thread, which may be
 * preempted holding @rlock: if it is busy, the next set takes them.
 */
static void cow_take_recycled(struct ps_store_cow *cs)
{
	if (pthread_mutex_trylock(&cs->rlock))
		return;
	if (!cs->pool.n && cs->pool.cap <= cs->recycle.cap) {
		/* Swap the arrays: nothing to copy. */
		struct ps_range_vec t = cs->pool;

		cs->pool = cs->recycle;
		cs->recycle = t;
	} else if (!ps_range_vec_reserve(&cs->pool, cs->pool.n + cs->recycle.n)) {
		memcpy(cs->pool.v + cs->pool.n, cs->recycle.v, cs->recycle.n * sizeof(*cs->pool.v));
		cs->pool.n += cs->recycle.n;
		cs->recycle.n = 0;
	} else {
		pthread_mutex_unlock(&cs->rlock);
		return;
	}
	__atomic_store_n(&cs->nrecycle, cs->recycle.n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cs->rlock);
}

/* After a grace period: drop the removed ranges' references, recycle or free the batch. */
static void cow_batch_release(struct ps_store_cow *cs, struct cow_batch *b)
{
	batch_put_policies(b);
	if (__atomic_load_n(&cs->nrecycle, __ATOMIC_RELAXED) +
			__atomic_load_n(&cs->npool, __ATOMIC_RELAXED) < PS_COW_SPARE_MAX)
		cow_recycle(cs, b);
	batch_free_now(b);
}

static void cow_batch_free(struct ps_reclaim_item *item)
{
	struct cow_batch *b = ps_container_of(item, struct cow_batch, item);
	struct ps_store_cow *cs = b->store;
	size_t n = batch_ranges(b);

	PS_ANNOTATE_HAPPENS_AFTER(b); /* the writer filled @b before queueing it */
	/* A grace period has passed since the ranges left the published tree: readers let go. */
	PS_ANNOTATE_HAPPENS_AFTER(&cs->base);
	cow_batch_release(cs, b);
	__atomic_fetch_sub(&cs->inflight, n, __ATOMIC_RELAXED);
	if (ps_unlikely(_ps_reclaim_test_hook))
		_ps_reclaim_test_hook();
	PS_ANNOTATE_HAPPENS_BEFORE(&cow_batches_done);
	/*
	 * The last access to the store: destroy frees it once it reads 0
	 * here (acquire), and waits for the barrier while it does not.
	 */
	__atomic_fetch_sub(&cs->inflight_batches, 1, __ATOMIC_RELEASE);
}

/*
 * Free @b, a chain of this store's batches, after a grace period (NULL:
 * none), then wait for the batches handed to the reclaim thread (by any
 * store of the flavour).  Never inside a read-side section; the flavour
 * takes a QSBR thread offline for the waits (PS_COW_WAIT_ENTER()).
 */
static void cow_wait_batches(struct ps_store_cow *cs, struct cow_batch *b)
{
	bool token = PS_COW_WAIT_ENTER();

	if (b) {
		PS_COW_SYNCHRONIZE();
		PS_ANNOTATE_HAPPENS_AFTER(&cs->base);
		batch_chain_free_now(b);
	}
	_ps_reclaim_barrier(PS_COW_RECLAIMER);
	PS_COW_WAIT_EXIT(token);
}

static void cow_destroy(struct ps_store *s)
{
	struct ps_store_cow *cs = to_cow(s);

	/* No reader may run during destroy (store.h): everything can go at once. */
	_ps_store_free_ranges(s);
	if (cs->batch)
		batch_free_now(cs->batch);
	batch_chain_free_now(cs->stalled);
	/*
	 * Batches in flight point at the store: wait for them (any thread may
	 * destroy).  The count of batches is the one their release drops last.
	 */
	if (__atomic_load_n(&cs->inflight_batches, __ATOMIC_ACQUIRE))
		cow_wait_batches(cs, NULL);
	PS_ANNOTATE_HAPPENS_AFTER(&cow_batches_done);
	/* Spares own no reference (a recycled one may still point at a policy). */
	ps_range_vec_free(&cs->pool);
	ps_range_vec_free(&cs->recycle);
	pthread_mutex_destroy(&cs->wlock);
	pthread_mutex_destroy(&cs->rlock);
	_ps_free_aligned(cs);
}

static void cow_read_lock(struct ps_store *s)
{
	(void)s;
	PS_COW_READ_ENTER();
}

static void cow_read_unlock(struct ps_store *s)
{
	PS_ANNOTATE_HAPPENS_BEFORE(s); /* pairs with the grace period before a batch is freed */
	PS_COW_READ_EXIT();
}

static const struct ps_policy *cow_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return cow_lookup_pol(to_cow(s), idx);
}

/* Inside a read-side section. */
static inline struct ps_policy *cow_get(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	/* The range holds its reference for our whole section: a plain increment is safe. */
	pol = _ps_policy_get(cow_lookup_pol(to_cow(s), idx));
	PS_ANNOTATE_HAPPENS_BEFORE(s);
	return pol;
}

PS_COW_LOOKUP_SECTION struct ps_policy *cow_lookup_section(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	PS_COW_READ_ENTER();
	pol = cow_get(s, idx);
	PS_COW_READ_EXIT();
	return ps_lookup_result(pol);
}

static struct ps_policy *cow_lookup(struct ps_store *s, uint64_t idx)
{
	if (!PS_COW_IN_SECTION())
		return cow_lookup_section(s, idx);
	return ps_lookup_result(cow_get(s, idx));
}

/* A section of its own unless the thread is inside one (an online QSBR thread). */
static inline int cow_section_begin(struct ps_store *s)
{
	(void)s;
	if (PS_COW_IN_SECTION())
		return 0;
	PS_COW_READ_ENTER();
	return 1;
}

static inline void cow_section_end(struct ps_store *s, int entered)
{
	PS_ANNOTATE_HAPPENS_BEFORE(s); /* pairs with the grace period before a batch is freed */
	if (entered)
		PS_COW_READ_EXIT();
}

PS_DEFINE_LOOKUP_COPY_NODE(cow, cow_section_begin, cow_lookup_borrow, cow_section_end)

static bool cow_defer(struct ps_store_cow *cs, struct cow_batch *b)
{
	b->store = cs;
	b->item.release = cow_batch_free;
	__atomic_fetch_add(&cs->inflight, batch_ranges(b), __ATOMIC_RELAXED);
	__atomic_fetch_add(&cs->inflight_batches, 1, __ATOMIC_RELAXED);
	PS_ANNOTATE_HAPPENS_BEFORE(b); /* our last touch of the batch: pairs with the free */
	if (!_ps_reclaim_defer(PS_COW_RECLAIMER, &b->item))
		return true;
	__atomic_fetch_sub(&cs->inflight, batch_ranges(b), __ATOMIC_RELAXED);
	__atomic_fetch_sub(&cs->inflight_batches, 1, __ATOMIC_RELAXED);
	return false;
}

static void cow_reclaim(struct ps_store_cow *cs, struct cow_batch *b)
{
	bool can_wait = PS_COW_CAN_WAIT();
	struct cow_batch *stalled = NULL, *next;

	if (ps_unlikely(__atomic_load_n(&cs->nstalled, __ATOMIC_RELAXED))) {
		/* Batches no reclaim thread took: this batch joins them, and they go first. */
		pthread_mutex_lock(&cs->wlock);
		stalled = cs->stalled;
		cs->stalled = NULL;
		__atomic_store_n(&cs->nstalled, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&cs->wlock);
	}
	b->next_stalled = stalled;
	stalled = b;
	/* The reclaim thread far behind: reclaim here rather than queue more. */
	if (!(can_wait &&
			    __atomic_load_n(&cs->inflight, __ATOMIC_RELAXED) > PS_COW_INFLIGHT_MAX)) {
		/* Once handed over, a batch may be freed at once: read its link first. */
		for (; stalled; stalled = next) {
			next = stalled->next_stalled;
			if (!cow_defer(cs, stalled))
				break;
		}
		if (!stalled)
			return;
	}
	if (can_wait) {
		/* Behind, or no reclaim thread: wait for the grace period here. */
		PS_COW_SYNCHRONIZE();
		PS_ANNOTATE_HAPPENS_AFTER(&cs->base);
		for (; stalled; stalled = next) {
			next = stalled->next_stalled;
			cow_batch_release(cs, stalled);
		}
		return;
	}
	/* Inside a section and no thread: keep them for a later set or synchronize. */
	pthread_mutex_lock(&cs->wlock);
	for (; stalled; stalled = next) {
		next = stalled->next_stalled;
		stalled->next_stalled = cs->stalled;
		cs->stalled = stalled;
		__atomic_store_n(&cs->nstalled, cs->nstalled + batch_ranges(stalled),
				__ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&cs->wlock);
}

/* Under @wlock: free the pool's spares beyond @keep. */
static void cow_trim_pool(struct ps_store_cow *cs, size_t keep)
{
	ps_range_vec_trim(&cs->pool, keep);
	__atomic_store_n(&cs->npool, cs->pool.n, __ATOMIC_RELAXED);
}

/*
 * Under @wlock: top the pool up to @need spares and make sure a batch
 * exists (what does not fit in its arrays goes on its lists: no
 * allocation after the set).
 */
static int cow_prepare(struct ps_store_cow *cs, size_t need)
{
	if (!cs->batch) {
		cs->batch = batch_alloc();
		if (!cs->batch)
			return -ENOMEM;
	}
	if (__atomic_load_n(&cs->nrecycle, __ATOMIC_RELAXED))
		cow_take_recycled(cs);
	if (cs->pool.n < need && ps_range_vec_fill(&cs->pool, need))
		return -ENOMEM;
	return 0;
}

/* Record what the update retired, while it is in cache; the arrays' overflow goes on lists. */
static void cow_retire(struct cow_batch *b, struct ps_rtree_cow *c)
{
	struct ps_range *r;

	while (b->n < b->cap && (r = ps_range_list_pop(&c->replaced)))
		b->ranges[b->n++] = r;
	while (b->n < b->cap && (r = ps_range_list_pop(&c->removed))) {
		b->ranges[b->n++] = r;
		if (r->pol)
			b->pols[b->npols++] = r->pol;
	}
	ps_range_list_splice(&b->over_replaced, &c->replaced);
	ps_range_list_splice(&b->over_removed, &c->removed);
}

/*
 * Under @wlock: publish the update built in @c, retire what left the
 * published tree (it waits for a grace period), keep the pool within its
 * cap.  Return: the batch to hand over once @wlock is dropped, or NULL.
 */
static struct cow_batch *cow_commit(struct ps_store_cow *cs, struct ps_rtree_cow *c)
{
	struct cow_batch *full = NULL;

	PS_ANNOTATE_HAPPENS_BEFORE(&cs->base.rd.tree);
	ps_rtree_cow_publish(c, &cs->base.rd.tree);
	cow_retire(cs->batch, c);
	if (batch_ranges(cs->batch) >= PS_COW_RETIRE_BATCH) {
		full = cs->batch;
		cs->batch = NULL;
	}
	if (cs->pool.n > PS_COW_SPARE_MAX)
		cow_trim_pool(cs, PS_COW_SPARE_MAX);
	__atomic_store_n(&cs->npool, cs->pool.n, __ATOMIC_RELAXED);
	return full;
}

static int cow_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_store_cow *cs = to_cow(s);
	struct cow_batch *full = NULL;
	struct ps_rtree_cow c;
	int ret;

	pthread_mutex_lock(&cs->wlock);
	/*
	 * Most sets erase a range or two: prepare for PS_COW_GUESS_ERASE
	 * without walking the ranges the set covers.  A set that erases more
	 * stops, is thrown away (nothing published was written), and runs
	 * again with what ps_rtree_cow_need() counts: either way every spare
	 * is allocated before the version that is published is built.
	 */
	if (++cs->guess_sets >= PS_COW_GUESS_DECAY || cs->guess_erase < PS_COW_GUESS_ERASE) {
		cs->guess_erase = cs->guess_erase / 2 > PS_COW_GUESS_ERASE ? cs->guess_erase / 2 :
									    PS_COW_GUESS_ERASE;
		cs->guess_sets = 0;
	}
	ret = cow_prepare(cs, ps_rtree_cow_need_erasing(&cs->base.rd.tree, cs->guess_erase, 0));
	if (ret)
		goto out;
	ps_rtree_cow_begin(&c, &cs->base.rd.tree, ++cs->gen, &cs->pool);
	if (!ps_rtree_cow_set(&c, start, end, pol, cs->guess_erase)) {
		ps_rtree_cow_abort(&c);
		if (cs->guess_erase < PS_COW_GUESS_ERASE_MAX)
			cs->guess_erase *= 4;
		cs->guess_sets = 0;
		ret = cow_prepare(cs, ps_rtree_cow_need(&cs->base.rd.tree, start, end, 0));
		if (ret)
			goto out;
		ps_rtree_cow_begin(&c, &cs->base.rd.tree, ++cs->gen, &cs->pool);
		ps_rtree_cow_set(&c, start, end, pol, SIZE_MAX);
	}
	full = cow_commit(cs, &c);
out:
	pthread_mutex_unlock(&cs->wlock);
	if (full)
		cow_reclaim(cs, full);
	return ret;
}

static void cow_synchronize(struct ps_store *s)
{
	struct ps_store_cow *cs = to_cow(s);
	struct cow_batch *b;

	pthread_mutex_lock(&cs->wlock);
	b = cs->batch;
	cs->batch = NULL;
	if (b)
		b->next_stalled = cs->stalled;
	else
		b = cs->stalled;
	cs->stalled = NULL;
	__atomic_store_n(&cs->nstalled, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cs->wlock);
	/* Documented: never inside a read-side section; a QSBR thread goes offline here. */
	cow_wait_batches(cs, b);
	PS_ANNOTATE_HAPPENS_AFTER(&cow_batches_done);
	/* An idle store keeps few spares. */
	pthread_mutex_lock(&cs->wlock);
	pthread_mutex_lock(&cs->rlock);
	ps_range_vec_free(&cs->recycle);
	__atomic_store_n(&cs->nrecycle, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cs->rlock);
	cow_trim_pool(cs, PS_COW_SPARE_IDLE);
	ps_range_vec_shrink(&cs->pool);
	pthread_mutex_unlock(&cs->wlock);
}

static int cow_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	int ret;

	struct ps_rtree snap;

	/* The published version cannot change under us: a snapshot, and no writer waits. */
	PS_COW_READ_ENTER();
	snap.root.node = cow_root(to_cow(s));
	snap.count = 0;
	ret = ps_rtree_foreach(&snap, fn, arg);
	PS_ANNOTATE_HAPPENS_BEFORE(s);
	PS_COW_READ_EXIT();
	return ret;
}

static int cow_check(struct ps_store *s, const char **why)
{
	struct ps_store_cow *cs = to_cow(s);
	int ret;

	/* Takes only the writer mutex, which no holder keeps across a grace period. */
	pthread_mutex_lock(&cs->wlock);
	ret = ps_rtree_check(&cs->base.rd.tree, why);
	pthread_mutex_unlock(&cs->wlock);
	return ret;
}

/*
 * Bytes besides the live ranges: spares, retired ranges not yet freed, and
 * their bookkeeping.  Never waits for a lock (ps_store_memory() is called
 * from allocator hooks, inside this store's sets too): a lock that is
 * busy leaves its part to the atomic copies of the counts, without the
 * partial batch and the arrays' spare room.
 */
static size_t cow_held(struct ps_store *s)
{
	const size_t batch_bytes = sizeof(struct cow_batch) + 4 * PS_COW_RETIRE_BATCH * sizeof(void *);
	struct ps_store_cow *cs = to_cow(s);
	size_t ranges, batches, bytes;
	struct cow_batch *b;

	if (!pthread_mutex_trylock(&cs->wlock)) {
		ranges = cs->pool.n + cs->nstalled;
		batches = 0;
		if (cs->batch) {
			ranges += batch_ranges(cs->batch);
			batches++;
		}
		for (b = cs->stalled; b; b = b->next_stalled)
			batches++;
		bytes = cs->pool.cap * sizeof(*cs->pool.v);
		pthread_mutex_unlock(&cs->wlock);
	} else {
		ranges = __atomic_load_n(&cs->npool, __ATOMIC_RELAXED) +
			 __atomic_load_n(&cs->nstalled, __ATOMIC_RELAXED);
		batches = 0;
		bytes = ranges * sizeof(*cs->pool.v);
	}
	if (!pthread_mutex_trylock(&cs->rlock)) {
		ranges += cs->recycle.n;
		bytes += cs->recycle.cap * sizeof(*cs->recycle.v);
		pthread_mutex_unlock(&cs->rlock);
	} else {
		ranges += __atomic_load_n(&cs->nrecycle, __ATOMIC_RELAXED);
		bytes += __atomic_load_n(&cs->nrecycle, __ATOMIC_RELAXED) * sizeof(*cs->recycle.v);
	}
	ranges += __atomic_load_n(&cs->inflight, __ATOMIC_RELAXED);
	batches += __atomic_load_n(&cs->inflight_batches, __ATOMIC_RELAXED);
	return bytes + ranges * sizeof(struct ps_range) + batches * batch_bytes;
}

/* Readers hold no lock; destroy waits for nothing once no batch is in flight. */
static bool cow_idle(struct ps_store *s)
{
	return !__atomic_load_n(&to_cow(s)->inflight_batches, __ATOMIC_ACQUIRE);
}

static struct ps_lstat *cow_lock_stat(struct ps_store *s)
{
	(void)s;
	return NULL;
}

/* Issue 16: defined at the end of the file. */
static int cow_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg);
static int cow_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol);
static int cow_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol);
static int cow_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n);

const struct ps_sync_ops PS_COW_OPS = {
	.create = cow_create,
	.destroy = cow_destroy,
	.lookup = cow_lookup,
	.read_lock = cow_read_lock,
	.read_unlock = cow_read_unlock,
	.lookup_borrow = cow_lookup_borrow,
	.lookup_copy = cow_lookup_copy,
	.lookup_node = cow_lookup_node,
	.set = cow_set,
	.synchronize = cow_synchronize,
	.foreach = cow_foreach,
	.check = cow_check,
	.held = cow_held,
	.lock_stat = cow_lock_stat,
	.foreach_range = cow_foreach_range,
	.next = cow_next,
	.next_borrow = cow_next_borrow,
	.set_many = cow_set_many,
	.idle = cow_idle,
};

/* ---- windows, walks by position, batches (issue 16) ---- */

static int cow_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	int ret;

	/* As cow_foreach(): one published version, immutable; no writer waits for us. */
	PS_COW_READ_ENTER();
	ret = ps_rtree_foreach_range_from(cow_root(to_cow(s)), start, end, fn, arg);
	PS_ANNOTATE_HAPPENS_BEFORE(s);
	PS_COW_READ_EXIT();
	return ret;
}

/*
 * Inside a read-side section.  cow_root() loads the root once
 * (acquire) and walks that immutable version: the range's bounds and
 * policy are one state, linearizable at the root load.
 */
static int cow_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	struct ps_range *r = ps_rtree_next_from(cow_root(to_cow(s)), idx);

	if (!r)
		return -ENOENT;
	*start = r->start;
	*end = r->end;
	*pol = r->pol;
	return 0;
}

/* Inside a read-side section: the range holds its reference for the whole section. */
static inline int cow_next_get(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	struct ps_range *r = ps_rtree_next_from(cow_root(to_cow(s)), idx);

	if (r) {
		*start = r->start;
		*end = r->end;
		*pol = _ps_policy_get(r->pol);
	}
	PS_ANNOTATE_HAPPENS_BEFORE(s);
	return r ? 0 : -ENOENT;
}

PS_COW_LOOKUP_SECTION int cow_next_section(struct ps_store *s, uint64_t idx, uint64_t *start,
		uint64_t *end, struct ps_policy **pol)
{
	int ret;

	PS_COW_READ_ENTER();
	ret = cow_next_get(s, idx, start, end, pol);
	PS_COW_READ_EXIT();
	return ret;
}

static int cow_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	if (!PS_COW_IN_SECTION())
		return cow_next_section(s, idx, start, end, pol);
	return cow_next_get(s, idx, start, end, pol);
}

/*
 * cow_set() for a batch: the spares of every op's worst case
 * (ps_rtree_cow_need_many()) before anything changes, one private
 * version built by all the ops in order, one publication.  A reader loads
 * the root before or after it: all of the batch or none.
 */
static int cow_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	struct ps_store_cow *cs = to_cow(s);
	struct cow_batch *full = NULL;
	struct ps_rtree_cow c;
	size_t i;
	int ret;

	pthread_mutex_lock(&cs->wlock);
	ret = cow_prepare(cs, ps_rtree_cow_need_many(&cs->base.rd.tree, ops, n));
	if (ret) {
		pthread_mutex_unlock(&cs->wlock);
		return ret;
	}
	ps_rtree_cow_begin(&c, &cs->base.rd.tree, ++cs->gen, &cs->pool);
	for (i = 0; i < n; i++)
		ps_rtree_cow_set(&c, ops[i].start, ops[i].end, ops[i].pol, SIZE_MAX);
	full = cow_commit(cs, &c);
	pthread_mutex_unlock(&cs->wlock);
	if (full)
		cow_reclaim(cs, full);
	return 0;
}
