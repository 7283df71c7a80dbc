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
 *   PS_COW_SYNCHRONIZE(), PS_COW_BARRIER(), PS_COW_CALL_RCU(head, fn)
 *                          the flavour's grace period, barrier, call_rcu;
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
 * retire batch; a full batch goes to the flavour's call_rcu(), whose worker
 * frees it after a grace period, i.e. after every reader that could have
 * loaded a root reaching them has left its section.  Removed ranges drop
 * their policy reference then; replaced ones drop none (the copy took it
 * over: struct ps_rtree_cow).  So a set never waits for readers.
 *
 * Allocation: a set first computes how many ranges it can need in the worst
 * case (ps_rtree_cow_need()) and tops the store's spare pool up to that,
 * and allocates the retire batch header it may fill; -ENOMEM there leaves
 * everything as it was.  Only then is the new version built, from spares.
 *
 * Recycling: the worker does not free the ranges of a batch but pushes
 * them (policy references dropped) on the store's recycle stack while the
 * store holds fewer than PS_COW_SPARE_MAX spares; the next set moves them
 * into its pool, so a steady writer allocates nothing.
 *
 * Memory bound: ranges retired but not yet freed are the partial batch
 * (< PS_COW_RETIRE_BATCH) plus the batches in flight.  Should the
 * call_rcu worker fall behind by more than PS_COW_INFLIGHT_MAX ranges, a
 * set called outside every read-side section (PS_COW_CAN_WAIT()) frees its
 * batch itself after a grace period instead of queueing it; one called
 * inside a section queues it anyway: a set never waits there.
 */
#include <errno.h>
#include <pthread.h>

#include "annotate.h"
#include "store_internal.h"

#ifdef PS_COW_IN_SECTION
/* Out of line, off the path of the lookups that need no section. */
#define PS_COW_LOOKUP_SECTION static __attribute__((noinline))
#else
#define PS_COW_IN_SECTION() false
#define PS_COW_LOOKUP_SECTION static inline
#endif

/*
 * Ranges per retire batch handed to call_rcu(): the worker's grace periods
 * (each a membarrier, an interrupt on every CPU) follow the batches when a
 * writer runs flat out, so batches are large.
 */
#define PS_COW_RETIRE_BATCH 1024
/* Retired ranges in flight past which a set that may wait frees its own batch. */
#define PS_COW_INFLIGHT_MAX (1 << 18)
/*
 * Spare ranges a store keeps at most, in its pool and on its recycle stack
 * together (beyond, the worker frees what a grace period released, and a
 * set frees the pool's excess): a steady writer then allocates nothing.
 */
#define PS_COW_SPARE_MAX 4096

/* Annotation key: every batch freed happens before the flavour's barrier returns. */
static char cow_batches_done __attribute__((unused));

struct cow_batch {
	struct rcu_head head;
	struct ps_range_list replaced; /* freed without touching their policies */
	struct ps_range_list removed;  /* freed with their policy references */
	struct ps_store_cow *store;
};

struct ps_store_cow {
	struct ps_store base;
	struct ps_rtree tree __ps_cacheline_aligned; /* the published version: read by every reader */
	pthread_mutex_t wlock __ps_cacheline_aligned;
	/* Under @wlock: */
	uint64_t gen;                  /* the last update's generation */
	struct ps_range_list pool;     /* spare ranges */
	size_t npool;                  /* atomic copy of @pool.n, for the worker */
	struct cow_batch *batch;       /* the partial retire batch, or NULL */
	/* Atomic: ranges handed to call_rcu() and not yet freed. */
	size_t inflight;
	/*
	 * Atomic: ranges a grace period freed, for the next sets' pool (a
	 * stack: the worker pushes whole batches, the writer takes it all),
	 * and an upper bound of their number.
	 */
	struct ps_range *recycle;
	size_t nrecycle;
};

static inline struct ps_store_cow *to_cow(struct ps_store *s)
{
	return ps_container_of(s, struct ps_store_cow, base);
}

static inline const struct ps_rtree *cow_published(struct ps_store_cow *cs)
{
	PS_ANNOTATE_HAPPENS_AFTER(&cs->tree); /* pairs with the publication in cow_set() */
	return &cs->tree;
}

static struct ps_store *cow_create(void)
{
	struct ps_store_cow *cs = _ps_zalloc_aligned(sizeof(*cs));

	if (!cs)
		return NULL;
	cs->base.size = sizeof(*cs);
	ps_rtree_init(&cs->tree);
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->tree, sizeof(cs->tree)); /* atomics only */
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->inflight, sizeof(cs->inflight));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->recycle, sizeof(cs->recycle));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->nrecycle, sizeof(cs->nrecycle));
	PS_ANNOTATE_BENIGN_RACE_SIZED(&cs->npool, sizeof(cs->npool));
	pthread_mutex_init(&cs->wlock, NULL);
	return &cs->base;
}

static size_t batch_ranges(const struct cow_batch *b)
{
	return b->replaced.n + b->removed.n;
}

static void batch_free_now(struct cow_batch *b)
{
	ps_range_list_free_nopol(&b->replaced);
	ps_range_list_free(&b->removed);
	_ps_free(b);
}

/*
 * Give @list's ranges (no policy references left) to the store's next sets:
 * one compare-and-swap pushes the whole chain.  Only the writer takes from
 * the stack, and it takes everything (an exchange), so no ABA can arise.
 */
static void cow_recycle(struct ps_store_cow *cs, struct ps_range_list *list)
{
	struct ps_range *head = list->head, *tail = list->tail, *old;

	if (!head)
		return;
	/* Counted first: @nrecycle never falls below what the stack holds. */
	__atomic_fetch_add(&cs->nrecycle, list->n, __ATOMIC_RELAXED);
	PS_ANNOTATE_HAPPENS_BEFORE(&cs->recycle);
	old = __atomic_load_n(&cs->recycle, __ATOMIC_RELAXED);
	do
		tail->next_free = old;
	while (!__atomic_compare_exchange_n(&cs->recycle, &old, head, true, __ATOMIC_RELEASE,
			__ATOMIC_RELAXED));
	*list = (struct ps_range_list){ NULL, 0, NULL };
}

/* Under @wlock: move what the worker recycled into the pool. */
static void cow_take_recycled(struct ps_store_cow *cs)
{
	struct ps_range_list got = { NULL, 0, NULL };

	got.head = __atomic_exchange_n(&cs->recycle, NULL, __ATOMIC_ACQUIRE);
	if (!got.head)
		return;
	PS_ANNOTATE_HAPPENS_AFTER(&cs->recycle);
	for (got.tail = got.head, got.n = 1; got.tail->next_free; got.n++)
		got.tail = got.tail->next_free;
	__atomic_fetch_sub(&cs->nrecycle, got.n, __ATOMIC_RELAXED);
	ps_range_list_splice(&cs->pool, &got);
}

/* After a grace period: drop the removed ranges' references, recycle or free the batch. */
static void cow_batch_release(struct ps_store_cow *cs, struct cow_batch *b)
{
	ps_range_list_put_policies(&b->removed);
	if (__atomic_load_n(&cs->nrecycle, __ATOMIC_RELAXED) +
			__atomic_load_n(&cs->npool, __ATOMIC_RELAXED) < PS_COW_SPARE_MAX) {
		ps_range_list_splice(&b->replaced, &b->removed);
		cow_recycle(cs, &b->replaced);
	}
	batch_free_now(b);
}

static void cow_batch_free(struct rcu_head *head)
{
	struct cow_batch *b = ps_container_of(head, struct cow_batch, head);
	struct ps_store_cow *cs = b->store;
	size_t n = batch_ranges(b);

	PS_ANNOTATE_HAPPENS_AFTER(b); /* the writer filled @b before call_rcu() */
	/* A grace period has passed since the ranges left the published tree: readers let go. */
	PS_ANNOTATE_HAPPENS_AFTER(&cs->base);
	cow_batch_release(cs, b);
	/* The store outlives this: destroy waits for every callback (PS_COW_BARRIER). */
	__atomic_fetch_sub(&cs->inflight, n, __ATOMIC_RELAXED);
	PS_ANNOTATE_HAPPENS_BEFORE(&cow_batches_done);
}

static void cow_destroy(struct ps_store *s)
{
	struct ps_store_cow *cs = to_cow(s);
	struct ps_range_list removed = { NULL, 0, NULL };

	/* No reader may run during destroy (store.h): everything can go at once. */
	ps_rtree_clear(&cs->tree, &removed);
	ps_range_list_free(&removed);
	if (cs->batch)
		batch_free_now(cs->batch);
	/* Batches in flight point at the store: wait for them (any thread may destroy). */
	if (__atomic_load_n(&cs->inflight, __ATOMIC_RELAXED)) {
		bool token = PS_COW_WAIT_ENTER();

		PS_COW_BARRIER();
		PS_COW_WAIT_EXIT(token);
	}
	PS_ANNOTATE_HAPPENS_AFTER(&cow_batches_done);
	/* Spares own no reference (a recycled one may still point at a policy). */
	cow_take_recycled(cs);
	ps_range_list_free_nopol(&cs->pool);
	pthread_mutex_destroy(&cs->wlock);
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
	return ps_rtree_lookup_pol(cow_published(to_cow(s)), idx);
}

/* Inside a read-side section. */
static inline struct ps_policy *cow_get(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	/* The range holds its reference for our whole section: a plain increment is safe. */
	pol = _ps_policy_get(ps_rtree_lookup_pol(cow_published(to_cow(s)), idx));
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

/* Hand a full batch over; called without @wlock. */
static void cow_reclaim(struct ps_store_cow *cs, struct cow_batch *b)
{
	size_t n = batch_ranges(b);

	if (__atomic_load_n(&cs->inflight, __ATOMIC_RELAXED) > PS_COW_INFLIGHT_MAX &&
			PS_COW_CAN_WAIT()) {
		/* The worker is behind: reclaim this batch here rather than queue more. */
		PS_COW_SYNCHRONIZE();
		PS_ANNOTATE_HAPPENS_AFTER(&cs->base);
		cow_batch_release(cs, b);
		return;
	}
	b->store = cs;
	__atomic_fetch_add(&cs->inflight, n, __ATOMIC_RELAXED);
	PS_ANNOTATE_HAPPENS_BEFORE(b); /* our last touch of the batch: pairs with the free */
	PS_COW_CALL_RCU(&b->head, cow_batch_free);
}

/* Under @wlock: top the pool up to @need spares and make sure a batch header exists. */
static int cow_prepare(struct ps_store_cow *cs, size_t need)
{
	if (!cs->batch) {
		cs->batch = _ps_zalloc(sizeof(*cs->batch));
		if (!cs->batch)
			return -ENOMEM;
	}
	if (__atomic_load_n(&cs->recycle, __ATOMIC_RELAXED))
		cow_take_recycled(cs);
	if (cs->pool.n < need && ps_range_list_fill(&cs->pool, (int)need))
		return -ENOMEM;
	return 0;
}

/* ps_rtree_cow_need(), skipped when the pool holds a spare for every range already. */
static size_t cow_need(struct ps_store_cow *cs, uint64_t start, uint64_t end)
{
	if (cs->pool.n >= cs->tree.count + PS_RTREE_SET_MAX_NEW)
		return cs->tree.count + PS_RTREE_SET_MAX_NEW;
	return ps_rtree_cow_need(&cs->tree, start, end, 0);
}

static int cow_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_store_cow *cs = to_cow(s);
	struct ps_range_list excess = { NULL, 0, NULL };
	struct cow_batch *full = NULL;
	struct ps_rtree_cow c;
	int ret;

	pthread_mutex_lock(&cs->wlock);
	ret = cow_prepare(cs, cow_need(cs, start, end));
	if (ret) {
		pthread_mutex_unlock(&cs->wlock);
		return ret;
	}
	ps_rtree_cow_begin(&c, &cs->tree, ++cs->gen, &cs->pool);
	ps_rtree_cow_set(&c, start, end, pol);
	PS_ANNOTATE_HAPPENS_BEFORE(&cs->tree);
	ps_rtree_cow_publish(&c, &cs->tree);
	/* What left the published tree waits for a grace period. */
	ps_range_list_splice(&cs->batch->replaced, &c.replaced);
	ps_range_list_splice(&cs->batch->removed, &c.removed);
	if (batch_ranges(cs->batch) >= PS_COW_RETIRE_BATCH) {
		full = cs->batch;
		cs->batch = NULL;
	}
	if (cs->pool.n > PS_COW_SPARE_MAX)
		ps_range_list_move(&excess, &cs->pool, cs->pool.n - PS_COW_SPARE_MAX);
	__atomic_store_n(&cs->npool, cs->pool.n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cs->wlock);
	ps_range_list_free_nopol(&excess);
	if (full)
		cow_reclaim(cs, full);
	return 0;
}

static void cow_synchronize(struct ps_store *s)
{
	struct ps_store_cow *cs = to_cow(s);
	struct cow_batch *b;
	bool token;

	pthread_mutex_lock(&cs->wlock);
	b = cs->batch;
	cs->batch = NULL;
	pthread_mutex_unlock(&cs->wlock);
	/* Documented: never inside a read-side section; a QSBR thread goes offline here. */
	token = PS_COW_WAIT_ENTER();
	if (b) {
		PS_COW_SYNCHRONIZE();
		PS_ANNOTATE_HAPPENS_AFTER(&cs->base);
		batch_free_now(b);
	}
	/* And the batches handed to call_rcu() (by any store: liburcu waits for all). */
	PS_COW_BARRIER();
	PS_COW_WAIT_EXIT(token);
	PS_ANNOTATE_HAPPENS_AFTER(&cow_batches_done);
}

static int cow_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	int ret;

	/* The published version cannot change under us: a snapshot, and no writer waits. */
	PS_COW_READ_ENTER();
	ret = ps_rtree_foreach(cow_published(to_cow(s)), fn, arg);
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
	ret = ps_rtree_check(&cs->tree, why);
	pthread_mutex_unlock(&cs->wlock);
	return ret;
}

static const struct ps_rtree *cow_tree(struct ps_store *s)
{
	return cow_published(to_cow(s));
}

static size_t cow_held(struct ps_store *s)
{
	struct ps_store_cow *cs = to_cow(s);
	size_t n;

	pthread_mutex_lock(&cs->wlock);
	n = cs->pool.n + (cs->batch ? batch_ranges(cs->batch) : 0);
	pthread_mutex_unlock(&cs->wlock);
	return n + __atomic_load_n(&cs->inflight, __ATOMIC_RELAXED) +
	       __atomic_load_n(&cs->nrecycle, __ATOMIC_RELAXED);
}

static struct ps_lstat *cow_lock_stat(struct ps_store *s, int dir)
{
	(void)s;
	(void)dir;
	return NULL;
}

const struct ps_sync_ops PS_COW_OPS = {
	.create = cow_create,
	.destroy = cow_destroy,
	.lookup = cow_lookup,
	.read_lock = cow_read_lock,
	.read_unlock = cow_read_unlock,
	.lookup_borrow = cow_lookup_borrow,
	.set = cow_set,
	.synchronize = cow_synchronize,
	.foreach = cow_foreach,
	.check = cow_check,
	.tree = cow_tree,
	.held = cow_held,
	.lock_stat = cow_lock_stat,
};
