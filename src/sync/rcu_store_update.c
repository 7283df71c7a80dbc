/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An RCU store's update (rcu_store.h), and the memory it retires: the
 * log's entries, the full leaves kept for the next sets (the stash), the
 * spare ranges, the count ps_store_memory() reads and the sweep that
 * empties the log of a store whose writer stopped.  Why nothing is freed
 * under a reader, and who takes memory back: rcu_store.c's file comment.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "annotate.h"
#include "lookup_cache.h"
#include "rcu_store_bound.h"
#include "rcu_store_object.h"
#include "rcu_store_update.h"
#include "seqcount.h"
#include "testpoint.h"

/*
 * The annotation keys of rcu_store.h, defined here: rcu_store.c calls
 * into this file, never this file into it.
 */
char psi_rcu_store_done[PSI_FLAVOUR_COUNT];

/*
 * Valgrind's thread checkers see no atomics: a reader is ordered after a
 * set by the annotation at its load of the root (psi_rcu_store_root()),
 * which a store into a child slot it loads later would bypass.  Under
 * them, sets publish at the root.  TSan sees the release store into the slot itself.
 */
#if defined(POLSTORE_ANNOTATE) && !defined(POLSTORE_TSAN)
#define PSI_RCU_CHECKER_ROOT() (RUNNING_ON_VALGRIND != 0)
#else
#define PSI_RCU_CHECKER_ROOT() false
#endif

/* How long the sweep finds the writer lock held at every look before it stops. */
#define PSI_RCU_SWEEP_BUSY_NS 1000000000L
/* Spare ranges a store keeps between updates. */
#define PSI_RCU_SPARES (2 * PSI_RANGETREE_SET_MAX_NEW)
/* Ranges an update unlinks, at most, that go back to the spares at once (more wait as one list). */
#define PSI_RCU_RANGES_NOW 4
/* Bytes logged between two reports to the reclaim thread (psi_reclaim_poll_weigh()). */
#define PSI_RCU_REPORT_BYTES ((size_t)16 << 10)
/* Log entries an update looks through for nodes to reuse, at most. */
#define PSI_RCU_PULL_MAX 16
/* Ripe full leaves a store keeps for its next sets, at most (rs_stash_put()). */
#define PSI_RCU_STASH_MAX 64
/* Who waits, in a flavour's stall warnings, when a set or synchronize waits for a grace period. */
static const char *const rs_who[PSI_FLAVOUR_COUNT] = {
	[PSI_FLAVOUR_MEMB] = "a set or synchronize of an rcu store",
	[PSI_FLAVOUR_QSBR] = "a set or synchronize of an rcu-qsbr store",
};

/* The size of a full leaf, of which most sets make one. */
#define PSI_RCU_LEAF_BYTES _PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT)

/*
 * The log's entries (retire_log.h): a node of the read index or a whole
 * subtree (rangeindex.h: bit 0 set), a policy reference of a range the
 * tree unlinked (RS_E_POL), or a list of such ranges, each with its
 * reference, through next_free (RS_E_LIST).
 */
#define RS_E_POL ((uintptr_t)2)
#define RS_E_LIST ((uintptr_t)3)
#define RS_E_MASK ((uintptr_t)3)

/*
 * What a stashed leaf holds after its header (which stays as it was): the
 * next leaf on the stash, and how many are on it from this one on.
 */
struct rs_stashed {
	struct ps_ix_node *next;
	unsigned count;
};

static inline struct rs_stashed *rs_stashed(struct ps_ix_node *h)
{
	return (struct rs_stashed *)(void *)(h + 1);
}

/* Under @wlock: the leaves on the stash. */
static inline unsigned rs_stash_count(struct psi_rcu_store *rs)
{
	return rs->stash ? rs_stashed(rs->stash)->count : 0;
}

/*
 * Under @wlock, after the log, the spares or the stash changed:
 * ps_store_memory()'s count of them.  What the log holds counts whole,
 * ripe or still waiting for its grace period.
 */
static void rs_account(struct psi_rcu_store *rs)
{
	size_t log = psi_rlog_bytes(rs->log);

	PSI_WRITE_ONCE(rs->held, log + rs->spare.n * psi_alloc_charge(sizeof(struct ps_range)) +
			rs_stash_count(rs) * psi_alloc_charge(PSI_RCU_LEAF_BYTES));
}

/* Under @wlock: @r, unlinked from the tree, which no reader reads: a spare now, or freed. */
static void rs_spare_put(struct psi_rcu_store *rs, struct ps_range *r)
{
	if (rs->spare.n >= PSI_RCU_SPARES) {
		psi_free(r);
		return;
	}
	memset(r, 0, sizeof(*r));
	psi_range_list_push(&rs->spare, r);
}

/* Under @wlock: free the log if it is empty. */
static void rs_trim(struct psi_rcu_store *rs)
{
	if (rs->log && !psi_rlog_count(rs->log)) {
		psi_rlog_trim(&rs->log);
		rs->logs++;
	}
}

/* Whether log entry @e is one index node of @size from the allocator (not from the pool). */
static inline bool rs_node_of(const void *e, size_t size)
{
	return !((uintptr_t)e & RS_E_MASK) && !psi_ix_pool_tag_of(e) &&
	       psi_ix_node_size(e) == size;
}

/* Under @wlock: whether the stash may hold @n leaves (the pool, when it serves, makes them). */
static bool rs_stash_fits(struct psi_rcu_store *rs, unsigned n)
{
	return n <= PSI_RCU_STASH_MAX && n * PSI_RCU_LEAF_BYTES <= rs->ix_bytes / 8 &&
	       (!rs->pool || !psi_ix_pool_serving(rs->pool));
}

/*
 * Under @wlock: keep log entry @e, ripe (no reader reaches it), on the
 * stash for the next sets when it is a full leaf of the allocator's and
 * the stash has room: at most PSI_RCU_STASH_MAX leaves, their bytes at
 * most an eighth of the index's, none while the index's pool serves.
 * The next set that makes a full leaf makes it of the leaf kept last,
 * whose lines rs_prefetch() asks for meanwhile: the allocator would hand
 * out memory freed longer ago, further from the writer's caches, and a
 * set writes every line of its new leaf.  Return: whether @e was kept.
 */
static bool rs_stash_put(struct psi_rcu_store *rs, void *e)
{
	struct ps_ix_node *h = e;
	unsigned n = rs_stash_count(rs);

	if (!rs_node_of(e, PSI_RCU_LEAF_BYTES) || !rs_stash_fits(rs, n + 1))
		return false;
	*rs_stashed(h) = (struct rs_stashed){ rs->stash, n + 1 };
	rs->stash = h;
	return true;
}

/* Under @wlock: a full leaf off the stash, or NULL when it is empty. */
static void *rs_stash_take(struct psi_rcu_store *rs)
{
	struct ps_ix_node *h = rs->stash;

	if (h)
		rs->stash = rs_stashed(h)->next;
	return h;
}

/* Under @wlock: free stashed leaves until the stash is within its bounds again (the index shrank). */
static void rs_stash_trim(struct psi_rcu_store *rs)
{
	while (rs->stash && !rs_stash_fits(rs, rs_stash_count(rs)))
		psi_free(rs_stash_take(rs));
}

/* Under @wlock: free the spare ranges and the stashed leaves the store keeps. */
static void rs_free_spares(struct psi_rcu_store *rs)
{
	void *h;

	psi_range_list_free(&rs->spare);
	while ((h = rs_stash_take(rs)))
		psi_free(h);
}

/* The bytes log entry @e holds (as psi_rcu_store_update() counted them in). */
static size_t rs_entry_bytes(const void *e)
{
	uintptr_t p = (uintptr_t)e;
	const struct ps_range *r;
	size_t n = 0;

	switch (p & RS_E_MASK) {
	case RS_E_POL:
		return 0;
	case RS_E_LIST:
		for (r = (const struct ps_range *)(p & ~RS_E_MASK); r; r = r->next_free)
			n++;
		return n * psi_alloc_charge(sizeof(struct ps_range));
	default:
		return psi_ix_retired_bytes(e);
	}
}

/* Under @wlock: the next ripe entry, taken off the log, or NULL. */
static void *rs_take(struct psi_rcu_store *rs)
{
	void *e = psi_rlog_take(rs->log);

	if (e)
		psi_rlog_taken(rs->log, rs_entry_bytes(e));
	return e;
}

/*
 * Under @wlock: what ripe entry @e holds, which no reader can reach any
 * more, goes: a reference is put, a node freed (a pooled one back to its
 * pool), a range kept as a spare or freed.
 */
static void rs_release(struct psi_rcu_store *rs, void *e)
{
	uintptr_t p = (uintptr_t)e;
	struct ps_range *r, *next;

	switch (p & RS_E_MASK) {
	case RS_E_POL:
		psi_policy_store_put((struct ps_policy *)(p & ~RS_E_MASK));
		return;
	case RS_E_LIST:
		for (r = (struct ps_range *)(p & ~RS_E_MASK); r; r = next) {
			next = r->next_free;
			psi_policy_store_put(r->pol);
			rs_spare_put(rs, r);
		}
		return;
	default:
		if (!rs_stash_put(rs, e))
			psi_ix_free_retired(rs->pool, &e, 1);
	}
}

/* Under @wlock: take off the log and release every ripe entry. */
static void rs_release_ripe(struct psi_rcu_store *rs)
{
	void *e;

	while ((e = rs_take(rs)))
		rs_release(rs, e);
}

/*
 * Under @wlock, after a full fence that follows every earlier update's
 * publication: what they logged waits for the grace period that begins
 * next (psi_reclaim_poll_state()); what waited for one that ended is ripe.
 */
static void rs_ripen(struct psi_rcu_store *rs)
{
	struct psi_rlog *log = rs->log;
	uint64_t before;

	if (!log)
		return;
	before = log->ripe_bytes;
	psi_rlog_mark(log, psi_reclaim_poll_state(rs->flavour->reclaimer));
	if (psi_rlog_ripen(log, rs->flavour->reclaimer)) {
		/* Readers' sections ended before. */
		PSI_ANNOTATE_HAPPENS_AFTER(&psi_rcu_store_done[rs->flavour->id]);
		rs->ripened = log->ripe_bytes - before;
	}
}

/*
 * A node of @size for the update in progress (psi_ix_reuse()): a full
 * leaf off the stash, or else the first such node among the next ripe
 * entries of the log, which this looks through (at most PSI_RCU_PULL_MAX
 * an update), releasing the others.
 */
static void *rs_reuse(void *ctx, size_t size)
{
	struct psi_rcu_store *rs = ctx;

	if (size == PSI_RCU_LEAF_BYTES && rs->stash)
		return rs_stash_take(rs);
	while (rs->pull) {
		void *e = rs_take(rs);

		if (!e) {
			rs->pull = 0;
			break;
		}
		rs->pull--;
		if (rs_node_of(e, size))
			return e;
		rs_release(rs, e);
	}
	return NULL;
}

/*
 * Under @wlock: ask for the lines of the node the next update will likely
 * reuse, the stash's first or the log's (retired a grace period ago, it
 * may be in no cache near), so that they come in while the writer does
 * other things.
 */
static inline void rs_prefetch(struct psi_rcu_store *rs)
{
	const char *e = rs->stash ? (const char *)rs->stash : psi_rlog_peek(rs->log);
	size_t i;

	if (!e || ((uintptr_t)e & RS_E_MASK))
		return;
	for (i = 0; i < PSI_RCU_LEAF_BYTES; i += 64)
		__builtin_prefetch(e + i, 1, 3);
}

/*
 * Under @wlock: wait here, outside every read-side section, for a grace
 * period that begins after everything logged so far was unpublished, and
 * release all of it (the lock is dropped for the wait).  With @barrier,
 * first the reclaim thread's barrier (which releases what it was asked
 * for, the sweep's look among it); then, unless a grace period of the
 * reclaim thread covered the log (the barrier returns at once where
 * nothing was ever queued, and a child of fork() has no thread yet), one
 * of our own, which a reclaim thread stuck in a grace period that does
 * not end shares.
 */
static void rs_wait_drain(struct psi_rcu_store *rs, bool barrier)
{
	struct psi_reclaimer *rc = rs->flavour->reclaimer;
	uint64_t pos = rs->log->added, bytes = rs->log->added_bytes, logs = rs->logs, cookie;
	bool token;
	int cancel;

	PSI_FENCE(SEQ_CST); /* after every publication of what is logged, before the cookie */
	cookie = psi_reclaim_poll_state(rc);
	rs->unreported = 0; /* this wait covers it: nothing to ask for */
	pthread_mutex_unlock(&rs->wlock);
	/* Not a cancellation point: the lock is taken again after. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	token = rs->flavour->wait_enter();
	if (barrier)
		psi_reclaim_barrier(rc);
	if (!psi_reclaim_poll_done(rc, cookie))
		rs->flavour->synchronize(rs_who[rs->flavour->id]);
	rs->flavour->wait_exit(token);
	pthread_mutex_lock(&rs->wlock);
	pthread_setcancelstate(cancel, NULL);
	PSI_ANNOTATE_HAPPENS_AFTER(&psi_rcu_store_done[rs->flavour->id]);
	/* Unless the log went meanwhile, with every entry before @pos. */
	if (rs->logs == logs)
		psi_rlog_ripen_upto(rs->log, pos, bytes);
	rs_release_ripe(rs);
	if (!psi_rlog_count(rs->log))
		PSI_WRITE_ONCE(rs->nothread, false);
}

/*
 * The sweep, a release function of the reclaimer: first after the grace
 * period of the update that queued it, then again and again
 * (psi_reclaim_retry()).  While the writer keeps setting it only looks
 * (the writer takes back what it logged); once no set came for
 * PSI_RECLAIM_RETRY_NS, it releases what is ripe, asks for a grace period
 * for the rest and looks again, and stops when the log is empty.  Never
 * waits for @wlock (a writer frozen in a fork child holds it for ever).
 */
void psi_rcu_store_sweep(struct psi_reclaim_item *item)
{
	struct psi_rcu_store *rs = psi_container_of(item, struct psi_rcu_store, sweep);
	uint64_t now;

	PSI_WRITE_ONCE(rs->kicked, false);
	if (psi_unlikely(psi_reclaim_test_hook))
		psi_reclaim_test_hook();
	now = psi_reclaim_now_ns();
	if (pthread_mutex_trylock(&rs->wlock)) {
		/*
		 * Held at every look for a second (a writer frozen in a fork
		 * child): the sweep stops, and the next set queues it again.
		 */
		if (!rs->sweep_busy)
			rs->sweep_busy = now;
		if (now - rs->sweep_busy < PSI_RCU_SWEEP_BUSY_NS) {
			psi_reclaim_retry(rs->flavour->reclaimer, item);
			return;
		}
		/*
		 * Stopped without the lock: a set that read @swept true under
		 * the lock and ends after this looks again after its unlock,
		 * and queues the sweep (rs_kick()).
		 */
		rs->sweep_busy = 0;
		PSI_ANNOTATE_HAPPENS_BEFORE(&rs->swept); /* @item is the next kick's: rs_kick() */
		PSI_STORE_RELEASE(rs->swept, false);
		return;
	}
	rs->sweep_busy = 0;
	if (rs->stats.sets != rs->sweep_sets) {
		/*
		 * The writer takes back what it logged, and reports it every
		 * PSI_RCU_REPORT_BYTES.  What a slow writer logged without a
		 * report yet is reported here once it has waited
		 * PSI_RECLAIM_LATENCY_NS, so that however little each set
		 * logs a grace period for it comes, and no sooner: a report
		 * made at every look would have the reclaim thread find the
		 * writers quiet between two and start a grace period each time.
		 */
		rs->sweep_sets = rs->stats.sets;
		rs->sweep_ns = now;
		if (!rs->unreported) {
			rs->unreported_ns = 0;
		} else if (!rs->unreported_ns) {
			rs->unreported_ns = now;
		} else if (now - rs->unreported_ns >= PSI_RECLAIM_LATENCY_NS) {
			if (psi_reclaim_poll_weigh(rs->flavour->reclaimer, rs->unreported))
				PSI_WRITE_ONCE(rs->nothread, true);
			rs->unreported = 0;
			rs->unreported_ns = 0;
		}
	} else if (now - rs->sweep_ns >= PSI_RECLAIM_RETRY_NS) {
		/* The writer is idle: its log is the sweep's to empty. */
		PSI_FENCE(SEQ_CST); /* after the writer's publications, before the grace period is read */
		rs_ripen(rs);
		rs_release_ripe(rs);
		if (!psi_rlog_count(rs->log)) {
			rs_trim(rs);
			rs_free_spares(rs);
			psi_ix_pool_trim(rs->pool);
			rs_account(rs);
			/* Under @wlock: a set after this one finds the sweep stopped and queues it. */
			PSI_STORE_RELEASE(rs->swept, false);
			pthread_mutex_unlock(&rs->wlock);
			return;
		}
		/* What is not ripe waits for a grace period that may not be asked for yet. */
		if (psi_reclaim_poll_weigh(rs->flavour->reclaimer, rs->unreported))
			PSI_WRITE_ONCE(rs->nothread, true);
		rs->unreported = 0;
		rs_account(rs);
	}
	pthread_mutex_unlock(&rs->wlock);
	psi_reclaim_retry(rs->flavour->reclaimer, item);
}

/*
 * Queue the sweep unless it is (@swept, claimed with one compare-and-swap:
 * a set under @wlock and one after it may both try), behind a grace
 * period.  Return: 0, or -EAGAIN when no reclaim thread could start.
 */
static int rs_kick(struct psi_rcu_store *rs, size_t weight)
{
	bool no = false;

	if (!PSI_TRY_CMPXCHG(rs->swept, &no, true, ACQ_REL, RELAXED))
		return 0;
	PSI_ANNOTATE_HAPPENS_AFTER(&rs->swept); /* the sweep let go of its item */
	PSI_WRITE_ONCE(rs->kicked, true);
	if (!psi_reclaim_defer_weighed(rs->flavour->reclaimer, &rs->sweep, weight))
		return 0;
	PSI_WRITE_ONCE(rs->kicked, false);
	PSI_STORE_RELEASE(rs->swept, false);
	return -EAGAIN;
}

/*
 * Under @wlock, after an update logged what weighs @weight: ask for the
 * grace period that frees it.  The first update after the sweep stopped
 * queues it (a grace period follows) after marking its entries, so that
 * this grace period frees them; later ones report what they logged now
 * and then (psi_reclaim_poll_weigh()), the sweep the rest, and the next
 * update marks them.
 */
static void rs_ask(struct psi_rcu_store *rs, size_t weight)
{
	struct psi_reclaimer *rc = rs->flavour->reclaimer;
	int err;

	rs->unreported += weight;
	if (!PSI_LOAD_ACQUIRE(rs->swept)) {
		PSI_FENCE(SEQ_CST); /* after our publication, before the grace period is read */
		psi_rlog_mark(rs->log, psi_reclaim_poll_state(rc));
		err = rs_kick(rs, rs->unreported);
	} else if (rs->unreported >= PSI_RCU_REPORT_BYTES) {
		err = psi_reclaim_poll_weigh(rc, rs->unreported);
	} else {
		return;
	}
	rs->unreported = 0;
	if (err)
		PSI_WRITE_ONCE(rs->nothread, true);
}

static inline void stats_add(uint64_t *sum, uint64_t *max, uint64_t v)
{
	*sum += v;
	if (*max < v)
		*max = v;
}

/*
 * Under @wlock, before an update builds anything: one full fence, then
 * whether it must publish at the root, and what earlier updates logged
 * is marked.  The fence pairs with the walk's (rcu_store.c): either
 * the walk sees this update's store, or this load sees the walk (and the
 * update goes to the root).  A walk is announced before it loads the
 * root, so it sees every update whose load missed it whole, and no later
 * one.  The fence also follows every earlier update's publication, which
 * rs_ripen() counts on.
 */
static bool rs_begin(struct psi_rcu_store *rs)
{
	bool walk;

	PSI_FENCE(SEQ_CST);
	walk = PSI_READ_ONCE(rs->walkers) != 0 || PSI_RCU_CHECKER_ROOT();
	rs_ripen(rs);
	return walk;
}

/*
 * Under @wlock: the store's spares made up to what an update of @n ops
 * may take, n * PSI_RANGETREE_SET_MAX_NEW ranges.  Return: 0, or -ENOMEM
 * with the spares as they were.
 */
static int rs_spares(struct psi_rcu_store *rs, size_t n)
{
	if (n > (size_t)INT_MAX / PSI_RANGETREE_SET_MAX_NEW)
		return -ENOMEM;
	return psi_range_list_fill(&rs->spare, (int)(n * PSI_RANGETREE_SET_MAX_NEW));
}

/* Under @wlock: keep up to PSI_RCU_SPARES spares (a batch may leave more), free the rest. */
static void rs_keep_spares(struct psi_rcu_store *rs)
{
	struct psi_range_list extra = { NULL, 0, NULL };

	if (rs->spare.n > PSI_RCU_SPARES) {
		psi_range_list_move(&extra, &rs->spare, rs->spare.n - PSI_RCU_SPARES);
		psi_range_list_free(&extra);
	}
}

/*
 * Under @wlock: log the ranges an update unlinked from the tree.  Few go
 * back to the spares at once (no reader reads the tree) and their
 * references onto the log one by one; more wait on the log as one list.
 * Return: the bytes logged.
 */
static size_t rs_log_removed(struct psi_rcu_store *rs, struct psi_range_list *removed)
{
	struct ps_range *r;

	if (!removed->n)
		return 0;
	if (removed->n > PSI_RCU_RANGES_NOW) {
		size_t bytes = removed->n * psi_alloc_charge(sizeof(struct ps_range));

		psi_rlog_add(rs->log, (void *)((uintptr_t)removed->head | RS_E_LIST));
		*removed = (struct psi_range_list){ NULL, 0, NULL };
		return bytes;
	}
	while ((r = psi_range_list_pop(removed))) {
		if (r->pol)
			psi_rlog_add(rs->log, (void *)((uintptr_t)r->pol | RS_E_POL));
		rs_spare_put(rs, r);
	}
	return 0;
}

/*
 * Under @wlock, after a publication: once a copy of an index with pooled
 * nodes would be one the pool does not serve (the store shrank; its
 * leaves may be far from full), or, at a synchronize (@sync), of an
 * index the copy would better (psi_ix_rebuild_pays(): removals left its
 * nodes part empty), the copy, every node from the allocator, is
 * published with one release store of the root, and the old index goes
 * onto the log whole: after its grace period its pooled nodes go back,
 * and their chunks with them.  Same ranges, so a reader sees no change;
 * next() sees the count move.  Return: the bytes logged (0: nothing to
 * do, or no memory for it: the store as it was).
 */
static size_t rs_unpool(struct psi_rcu_store *rs, bool sync)
{
	struct ps_ix_node *old = rs->base.ix.node, *nr;
	size_t bytes, was = rs->ix_bytes, n = rs->base.rd.tree.count;

	if (!(rs->pooled || (sync && psi_ix_rebuild_pays(old, n, was))) ||
			!psi_ix_pool_below(psi_ix_rebuilt_bytes(n)))
		return 0;
	if (psi_rlog_reserve(&rs->log, 1) || psi_ix_rebuild(old, &nr, &bytes))
		return 0;
	PSI_ANNOTATE_HAPPENS_BEFORE(&rs->base.rd.tree); /* as the update's publication */
	psi_seq_write_begin(&rs->base.rd.seq);
	PSI_STORE_RELEASE(rs->base.ix.node, nr); /* pairs with the readers' acquire of the root */
	psi_seq_write_end(&rs->base.rd.seq);
	rs->pooled = false;
	if (rs->pool)
		psi_ix_pool_grew(rs->pool, (ptrdiff_t)bytes - (ptrdiff_t)was);
	PSI_WRITE_ONCE(rs->ix_bytes, bytes);
	rs_stash_trim(rs);
	if (!old)
		return 0;
	psi_rlog_add(rs->log, psi_ix_retired_whole(old));
	psi_rlog_added_bytes(rs->log, was);
	return was;
}

/*
 * One update: @n ops (a set is a batch of one).  Under @wlock: the index
 * is built for all of them and everything the update needs is allocated
 * first; then the tree changes in place (it cannot fail) and the index is
 * published with one store.  A reader loads the published slot before or
 * after it: all of the batch or none.
 *
 * What it replaced goes onto the store's log (file comment).  Its new
 * nodes are made of the ripe nodes at the log's head where they fit, and
 * it takes off the log at least as many entries as it adds (twice as many
 * while more is ripe than the last grace period made so), so a writer
 * setting flat out allocates little once grace periods end and the log
 * holds about what two grace periods cover.
 */
int psi_rcu_store_update(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);
	struct psi_range_list removed = { NULL, 0, NULL };
	struct psi_ix_pool *pool;
	struct psi_ix_tx ix;
	uint64_t added, taken, logged, quota;
	size_t i, bytes, unlinked = 0;
	bool walk, root;

	pthread_mutex_lock(&rs->wlock);
	walk = rs_begin(rs);
	added = rs->log ? rs->log->added : 0;
	taken = rs->log ? rs->log->taken : 0;
	rs->pull = PSI_RCU_PULL_MAX;
	/* No pool for a small store; none yet (no memory) is only slower. */
	pool = rs->pool;
	if (psi_unlikely(!pool && rs->ix_bytes >= psi_ix_pool_threshold)) {
		int err = errno; /* a set that succeeds without a pool leaves errno alone */

		pool = psi_ix_pool_new(rs->ix_bytes);
		PSI_STORE_RELEASE(rs->pool, pool); /* for psi_rcu_store_held() */
		errno = err;
	}
	/* A batch publishes once: every set of it builds on the last, to the root. */
	psi_ix_begin(&ix, &rs->base.ix, pool, walk || n > 1);
	/* Nothing ripe or stashed: no node to look for (rs_reuse() would find none). */
	if (rs->stash || psi_rlog_ripe_count(rs->log))
		psi_ix_reuse(&ix, rs_reuse, rs);
	for (i = 0; i < n; i++)
		if (psi_ix_set(&ix, ops[i].start, ops[i].end, ops[i].pol))
			goto abort;
	if (rs_spares(rs, n) ||
			psi_rlog_reserve(&rs->log, ix.nretired + PSI_RCU_RANGES_NOW))
		goto abort;
	PSI_TEST_POINT(PSI_TP_RCU_UPDATE_BUILT);
	/* Nothing can fail from here on. */
	for (i = 0; i < n; i++)
		unlinked += psi_rangetree_set(&rs->base.rd.tree, ops[i].start, ops[i].end,
				ops[i].pol, &rs->spare, &removed);
	/*
	 * For the thread checkers: every node is written (but a leaf that
	 * psi_ix_publish() fills, which needs a slot store: under valgrind
	 * every set publishes at the root, PSI_RCU_CHECKER_ROOT()); pairs
	 * with the readers' annotation where they load the root
	 * (psi_rcu_store_root()).  The count is odd around the store that
	 * publishes: a next() whose walk loaded a slot of it sees the count
	 * move (psi_rcu_store_next_find()); so is the lookup caches'
	 * (lookup_cache.h).
	 */
	PSI_ANNOTATE_HAPPENS_BEFORE(&rs->base.rd.tree);
	psi_lc_write_begin(&rs->base);
	psi_seq_write_begin(&rs->base.rd.seq);
	root = psi_ix_publish(&ix);
	psi_seq_write_end(&rs->base.rd.seq);
	psi_lc_write_end(&rs->base);
	PSI_WRITE_ONCE(rs->ix_bytes, (size_t)((ptrdiff_t)rs->ix_bytes + ix.bytes));
	rs->pooled |= ix.serve;
	rs_stash_trim(rs);
	rs->stats.sets++;
	rs->stats.root_publications += root;
	stats_add(&rs->stats.nodes_copied, &rs->stats.nodes_copied_max, ix.nkept);
	stats_add(&rs->stats.nodes_retired, &rs->stats.nodes_retired_max, ix.nretired + unlinked);
	/* What left the index and the tree, onto the log until its grace period ends. */
	for (i = 0; i < ix.nretired; i++)
		psi_rlog_add(rs->log, ix.retired[i]);
	bytes = ix.retired_bytes + rs_log_removed(rs, &removed);
	psi_rlog_added_bytes(rs->log, bytes);
	psi_ix_end(&ix);
	rs_keep_spares(rs);
	bytes += rs_unpool(rs, false);
	/*
	 * As many entries off the log as came on: what a grace period made
	 * ripe lasts the sets until the next one ends.  Twice as many while
	 * more is ripe than the last one made so (what the one before left).
	 */
	logged = rs->log->added - added;
	quota = psi_rlog_ripe_bytes(rs->log) > rs->ripened ? 2 * logged : logged;
	while (rs->log->taken - taken < quota) {
		void *e = rs_take(rs);

		if (!e)
			break;
		rs_release(rs, e);
	}
	/* The log's own entries weigh too: a new policy stored in place logs only one. */
	if (logged)
		rs_ask(rs, bytes + logged * sizeof(void *));
	rs_prefetch(rs);
	/*
	 * Past PSI_RCU_PENDING_MAX waiting (a grace period that does not
	 * end), or with no reclaim thread to ask, a set that may wait waits
	 * for a grace period itself; one that may not keeps logging.
	 */
	if (psi_unlikely(rs->nothread ||
			    psi_reclaim_pending(rs->flavour->reclaimer) > PSI_RCU_PENDING_MAX) &&
			rs->flavour->can_wait())
		rs_wait_drain(rs, rs->nothread);
	rs_trim(rs);
	rs_account(rs);
	pthread_mutex_unlock(&rs->wlock);
	/*
	 * The sweep may have stopped on a busy lock after rs_ask() saw it
	 * queued (psi_rcu_store_sweep()): what this set logged needs it then.
	 */
	if (psi_unlikely(!PSI_LOAD_ACQUIRE(rs->swept)) && logged)
		(void)rs_kick(rs, 0);
	return 0;
abort:
	psi_ix_abort(&ix);
	psi_ix_end(&ix);
	rs_trim(rs);
	rs_keep_spares(rs);
	rs_account(rs);
	pthread_mutex_unlock(&rs->wlock);
	return -ENOMEM;
}

/* Whether psi_rcu_store_update() may wait for a grace period, read before the set. */
bool psi_rcu_store_set_may_wait(struct ps_store *s)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);

	return rs->flavour->can_wait() &&
	       (psi_reclaim_pending(rs->flavour->reclaimer) > PSI_RCU_PENDING_MAX ||
		       PSI_READ_ONCE(rs->nothread));
}

int psi_rcu_store_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_set_op op = { start, end, pol };

	return psi_rcu_store_update(s, &op, 1);
}

void psi_rcu_store_synchronize(struct ps_store *s)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);

	/*
	 * Documented: never inside a read-side section; a QSBR thread goes
	 * offline here.  Everything logged before the call is released after
	 * a grace period of our own; then the store holds its ranges and its
	 * index only (nothing else may free it later: ps_set_alloc_ops()).
	 */
	pthread_mutex_lock(&rs->wlock);
	(void)rs_unpool(rs, true);
	if (psi_rlog_count(rs->log))
		rs_wait_drain(rs, true);
	rs_trim(rs);
	rs_free_spares(rs);
	psi_ix_pool_trim(rs->pool);
	rs_account(rs);
	pthread_mutex_unlock(&rs->wlock);
}

/*
 * Under @wlock: the stash holds full leaves of the allocator's (as
 * rs_stash_put() took them), each counting those from it on, within its
 * bounds for the index as it is now (rs_stash_fits()).
 */
bool psi_rcu_store_stash_sane(struct psi_rcu_store *rs)
{
	unsigned n = rs_stash_count(rs);
	struct ps_ix_node *h;

	if (n && !rs_stash_fits(rs, n))
		return false;
	for (h = rs->stash; h; h = rs_stashed(h)->next, n--)
		if (!n || rs_stashed(h)->count != n || !rs_node_of(h, PSI_RCU_LEAF_BYTES))
			return false;
	return !n;
}


void psi_rcu_store_free_retired(struct psi_rcu_store *rs)
{
	if (rs->log)
		psi_rlog_ripen_upto(rs->log, rs->log->added, rs->log->added_bytes);
	rs_release_ripe(rs);
	rs_trim(rs);
	rs_free_spares(rs);
}
