/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store, written once and compiled once per liburcu flavour
 * (sync_rcu.c: memb, sync_qsbr.c: qsbr).  An include-template: the
 * including file defines its read side
 *   PSI_COW_READ_ENTER(), PSI_COW_READ_EXIT()   a read-side section;
 *   PSI_COW_READ_HELD()     true when a read unlock may close a section
 *                          (memb: inside one; QSBR: online);
 *   PSI_COW_IN_SECTION()    true when the calling thread is inside a section
 *                          already, so a lookup needs none of its own
 *                          (QSBR: an online thread); optional;
 * and names the rest:
 *   PSI_COW_FLAVOUR         the flavour's hook table (rcu_flavour.h), which
 *                          the write side calls: may it wait, around a
 *                          wait, a grace period, the reclaim thread;
 *   PSI_COW_OPS             the name of the ops table;
 *   PSI_COW_NAME            the variant's name, for stall warnings.
 *
 * Two structures.  The red-black range tree (rangetree.h) is the store's
 * structure of record, the writer's alone: sets change it in place under
 * @wlock, as the locked variants' writers do.  Readers read the read
 * index (rangeindex.h, polstore/static/index.h): a B+-tree of wide
 * nodes holding the same ranges, to which every update applies the same
 * sets by copying the nodes they change, published with one release
 * store into one child slot of a published node, or into the root.  No
 * lockless reader touches the tree.
 *
 * Why readers are safe.  A published index node is never written, but
 * for the policy and hint of a range a set gives a new policy, alone in
 * its update and with no walk announced (two single-word stores:
 * rangeindex.c says why each answer is one of before or after).  A
 * lookup loads one root-to-leaf path (acquire loads), never retries,
 * never blocks, and writes nothing but its own liburcu per-thread counter
 * (nothing at all under QSBR).  An update linearizes at its publication.
 *
 * Readers that answer from one leaf: lookup, lookup_borrow, lookup_copy
 * and lookup_node (here and inline, polstore/static/lookup.h) return what
 * one entry of a leaf holds, or the gap a search ended in; a set changes
 * at most one slot on any root-to-leaf path, so the answer linearizes at
 * the load of the leaf.  Readers that may combine several leaves need
 * more:
 *  - next() may combine the leaf of its key (no range after the key)
 *    with the first range of the next leaf.  It validates its walk with
 *    the publication count and announces its last attempt
 *    (cow_next_find()).
 *  - Walks that must see one version (foreach, foreach_range) announce
 *    themselves in @walkers; while one is announced, updates publish at
 *    the root, so the walk, which loaded the root once, sees no later
 *    set.  The walk's increment and an update's read of @walkers each
 *    follow a full fence (cow_begin()).  A callback may
 *    end its thread (polstore/rcu.h): a cleanup handler withdraws the
 *    announcement then, inside the section, before the thread-exit hook
 *    closes it (rcu_thread.c).
 *
 * Why nothing is freed under a reader.  The index nodes an update
 * replaced and the policy references of the ranges it unlinked from the
 * tree go onto the store's retire log (retire_log.h), with the grace
 * period of the flavour that frees them: one that begins after a full
 * fence that follows the update's publication (cow_ripen(): the next
 * update's fence, or the sweep's).  Until that grace period has ended,
 * which waits for every reader that could have reached them, nothing on
 * the log is reused, freed or put.  So a set never waits for readers.
 * The unlinked ranges themselves go back to the spares at once: no
 * lockless reader reads the tree (a set that unlinks many logs them as
 * one list instead).
 *
 * Who takes memory back.  The writer itself: each update makes its new
 * index nodes of ripe nodes, the full leaves it kept (cow_stash_put())
 * first, then those at the head of the log, and takes off as many
 * entries as it adds (cow_update()), so a writer setting flat out
 * allocates little once grace periods end, and no memory crosses to
 * another thread.  The reclaim thread only runs grace periods: the store
 * asks for them by weight (psi_reclaim_poll_weigh()) and polls for their
 * end (psi_reclaim_poll_done()).  A store whose writer stopped has its log
 * emptied by its sweep (cow_sweep(): on the reclaim thread, once no set
 * came for PSI_RECLAIM_RETRY_NS); synchronize and destroy empty it at
 * once.  What the log holds counts in ps_store_memory(), ripe or not.
 *
 * Allocation: an update builds its index nodes, takes its spare ranges
 * and makes room on the log before it changes the tree; -ENOMEM there
 * throws it away and everything is as it was.  The tree's part cannot
 * fail.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "annotate.h"
#include "cow_bound.h"
#include "ixpool.h"
#include "lookup_cache.h"
#include "rangeindex.h"
#include "rcu_reclaim.h"
#include "retire_log.h"
#include "seqcount.h"
#include "store_internal.h"
#include "testpoint.h"

/* A grace period of the flavour, named in its stall warnings. */
static inline void psi_cow_synchronize(void)
{
	PSI_COW_FLAVOUR->synchronize("a set or synchronize of an " PSI_COW_NAME " store");
}

#ifdef PSI_COW_IN_SECTION
/* Out of line, off the path of the lookups that need no section. */
#define PSI_COW_LOOKUP_SECTION static __attribute__((noinline))
#else
#define PSI_COW_IN_SECTION() false
#define PSI_COW_LOOKUP_SECTION static inline
#endif

/*
 * Valgrind's thread checkers see no atomics: a reader is ordered after a
 * set by the annotation at its load of the root (cow_ix_root()), which a store
 * into a child slot it loads later would bypass.  Under them, sets publish
 * at the root.  TSan sees the release store into the slot itself.
 */
#if defined(POLSTORE_ANNOTATE) && !defined(POLSTORE_TSAN)
#define PSI_COW_CHECKER_ROOT() (RUNNING_ON_VALGRIND != 0)
#else
#define PSI_COW_CHECKER_ROOT() false
#endif

/* How long the sweep finds the writer lock held at every look before it stops. */
#define PSI_COW_SWEEP_BUSY_NS 1000000000L
/* Spare ranges a store keeps between updates. */
#define PSI_COW_SPARES (2 * PSI_RANGETREE_SET_MAX_NEW)
/* Ranges an update unlinks, at most, that go back to the spares at once (more wait as one list). */
#define PSI_COW_RANGES_NOW 4
/* Bytes logged between two reports to the reclaim thread (psi_reclaim_poll_weigh()). */
#define PSI_COW_REPORT_BYTES ((size_t)16 << 10)
/* Log entries an update looks through for nodes to reuse, at most. */
#define PSI_COW_PULL_MAX 16
/* Ripe full leaves a store keeps for its next sets, at most (cow_stash_put()). */
#define PSI_COW_STASH_MAX 64
/* The size of a full leaf, of which most sets make one. */
#define PSI_COW_LEAF_BYTES _PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT)
/* Walks next() validates with the publication count before it announces one. */
#define PSI_COW_NEXT_TRIES 4

/*
 * The log's entries (retire_log.h): a node of the read index or a whole
 * subtree (rangeindex.h: bit 0 set), a policy reference of a range the
 * tree unlinked (COW_E_POL), or a list of such ranges, each with its
 * reference, through next_free (COW_E_LIST).
 */
#define COW_E_POL ((uintptr_t)2)
#define COW_E_LIST ((uintptr_t)3)
#define COW_E_MASK ((uintptr_t)3)

/* Annotation key: every read-side section ends before a grace period after it does. */
static char cow_recs_done __attribute__((unused));

/*
 * base.rd.seq is the publication count: odd while a set publishes
 * (cow_update()), which next() validates its walk with (cow_next_find()).
 * It shares the tree's line, which sets write anyway; lookups read the
 * line of base.ix, which sets write only when they replace the root, and
 * base.lc's count (lookup_cache.h).
 */
struct psi_store_cow {
	struct ps_store base;
	pthread_mutex_t wlock __ps_cacheline_aligned;
	/* Under @wlock: */
	struct ps_store_stats stats;
	struct psi_rlog *log;          /* what sets retired, until taken back (NULL: nothing) */
	uint64_t logs;                 /* logs freed (cow_trim()): a log's positions are its own */
	struct psi_range_list spare;   /* spare ranges kept for the next update */
	size_t unreported;             /* bytes logged and not yet reported (psi_reclaim_poll_weigh()) */
	uint64_t ripened;              /* bytes the last grace period made ripe */
	unsigned pull;                 /* log entries the update in progress may still look through */
	/* Atomic: walks that must see one version (see the file comment). */
	unsigned walkers;
	/* Under @wlock: ripe full leaves kept for the next sets (cow_stash_put()). */
	struct ps_ix_node *stash;
	/* Written under @wlock, read without it: */
	size_t held;                   /* bytes of @log, @spare and @stash, for ps_store_memory() */
	size_t ix_bytes;               /* the read index's nodes */
	bool nothread;                 /* entries logged while no reclaim thread could start */
	/*
	 * The nodes of a large index (ixpool.h), made when it first is; set
	 * once under @wlock (release), loaded (acquire) by those without it.
	 */
	struct psi_ix_pool *pool;
	bool pooled;                   /* under @wlock: the published index may hold pooled nodes */
	/*
	 * The sweep (cow_sweep()): queued once on the reclaimer behind a
	 * grace period (@kicked), then released again and again until it
	 * stops.  @swept is true from its queueing (cow_kick(), one
	 * compare-and-swap) until it stops; both atomic.  The rest is the
	 * sweep's own.
	 */
	struct psi_reclaim_item sweep;
	bool swept, kicked;
	uint64_t sweep_sets;           /* stats.sets the sweep last saw */
	uint64_t sweep_ns;             /* when it first saw them (psi_reclaim_now_ns()) */
	uint64_t unreported_ns;        /* when it first saw @unreported waiting (0: not) */
	uint64_t sweep_busy;           /* since when its looks found @wlock held (0: not) */
};
_Static_assert(offsetof(struct psi_store_cow, base) == 0, "psi_store_zalloc(): base first");
_Static_assert(offsetof(struct ps_store, ix) + sizeof(struct ps_ix_root) <= 64,
		"the read index's root shares the first line with the entry points");

static inline struct psi_store_cow *to_cow(struct ps_store *s)
{
	return psi_container_of(s, struct psi_store_cow, base);
}

/*
 * What a stashed leaf holds after its header (which stays as it was): the
 * next leaf on the stash, and how many are on it from this one on.
 */
struct cow_stashed {
	struct ps_ix_node *next;
	unsigned count;
};

static inline struct cow_stashed *cow_stashed(struct ps_ix_node *h)
{
	return (struct cow_stashed *)(void *)(h + 1);
}

/* Under @wlock: the leaves on the stash. */
static inline unsigned cow_stash_count(struct psi_store_cow *cs)
{
	return cs->stash ? cow_stashed(cs->stash)->count : 0;
}

/*
 * Under @wlock, after the log, the spares or the stash changed:
 * ps_store_memory()'s count of them.  What the log holds counts whole,
 * ripe or still waiting for its grace period.
 */
static void cow_account(struct psi_store_cow *cs)
{
	size_t log = psi_rlog_bytes(cs->log);

	PSI_WRITE_ONCE(cs->held, log + cs->spare.n * psi_alloc_charge(sizeof(struct ps_range)) +
			cow_stash_count(cs) * psi_alloc_charge(PSI_COW_LEAF_BYTES));
}

/* Under @wlock: @r, unlinked from the tree, which no reader reads: a spare now, or freed. */
static void cow_spare_put(struct psi_store_cow *cs, struct ps_range *r)
{
	if (cs->spare.n >= PSI_COW_SPARES) {
		psi_free(r);
		return;
	}
	memset(r, 0, sizeof(*r));
	psi_range_list_push(&cs->spare, r);
}

/* Under @wlock: free the log if it is empty. */
static void cow_trim(struct psi_store_cow *cs)
{
	if (cs->log && !psi_rlog_count(cs->log)) {
		psi_rlog_trim(&cs->log);
		cs->logs++;
	}
}

/* Whether log entry @e is one index node of @size from the allocator (not from the pool). */
static inline bool cow_node_of(const void *e, size_t size)
{
	return !((uintptr_t)e & COW_E_MASK) && !psi_ix_pool_tag_of(e) &&
	       psi_ix_node_size(e) == size;
}

/* Under @wlock: whether the stash may hold @n leaves (the pool, when it serves, makes them). */
static bool cow_stash_fits(struct psi_store_cow *cs, unsigned n)
{
	return n <= PSI_COW_STASH_MAX && n * PSI_COW_LEAF_BYTES <= cs->ix_bytes / 8 &&
	       !psi_ix_pool_serving(cs->pool);
}

/*
 * Under @wlock: keep log entry @e, ripe (no reader reaches it), on the
 * stash for the next sets when it is a full leaf of the allocator's and
 * the stash has room: at most PSI_COW_STASH_MAX leaves, their bytes at
 * most an eighth of the index's, none while the index's pool serves.
 * The next set that makes a full leaf makes it of the leaf kept last,
 * whose lines cow_prefetch() asks for meanwhile: the allocator would hand
 * out memory freed longer ago, further from the writer's caches, and a
 * set writes every line of its new leaf.  Return: whether @e was kept.
 */
static bool cow_stash_put(struct psi_store_cow *cs, void *e)
{
	struct ps_ix_node *h = e;
	unsigned n = cow_stash_count(cs);

	if (!cow_node_of(e, PSI_COW_LEAF_BYTES) || !cow_stash_fits(cs, n + 1))
		return false;
	*cow_stashed(h) = (struct cow_stashed){ cs->stash, n + 1 };
	cs->stash = h;
	return true;
}

/* Under @wlock: a full leaf off the stash, or NULL when it is empty. */
static void *cow_stash_take(struct psi_store_cow *cs)
{
	struct ps_ix_node *h = cs->stash;

	if (h)
		cs->stash = cow_stashed(h)->next;
	return h;
}

/* Under @wlock: free stashed leaves until the stash is within its bounds again (the index shrank). */
static void cow_stash_trim(struct psi_store_cow *cs)
{
	while (cs->stash && !cow_stash_fits(cs, cow_stash_count(cs)))
		psi_free(cow_stash_take(cs));
}

/* Under @wlock: free the spare ranges and the stashed leaves the store keeps. */
static void cow_free_spares(struct psi_store_cow *cs)
{
	void *h;

	psi_range_list_free(&cs->spare);
	while ((h = cow_stash_take(cs)))
		psi_free(h);
}

/* The bytes log entry @e holds (as cow_update() counted them in). */
static size_t cow_entry_bytes(const void *e)
{
	uintptr_t p = (uintptr_t)e;
	const struct ps_range *r;
	size_t n = 0;

	switch (p & COW_E_MASK) {
	case COW_E_POL:
		return 0;
	case COW_E_LIST:
		for (r = (const struct ps_range *)(p & ~COW_E_MASK); r; r = r->next_free)
			n++;
		return n * psi_alloc_charge(sizeof(struct ps_range));
	default:
		return psi_ix_retired_bytes(e);
	}
}

/* Under @wlock: the next ripe entry, taken off the log, or NULL. */
static void *cow_take(struct psi_store_cow *cs)
{
	void *e = psi_rlog_take(cs->log);

	if (e)
		psi_rlog_taken(cs->log, cow_entry_bytes(e));
	return e;
}

/*
 * Under @wlock: what ripe entry @e holds, which no reader can reach any
 * more, goes: a reference is put, a node freed (a pooled one back to its
 * pool), a range kept as a spare or freed.
 */
static void cow_release(struct psi_store_cow *cs, void *e)
{
	uintptr_t p = (uintptr_t)e;
	struct ps_range *r, *next;

	switch (p & COW_E_MASK) {
	case COW_E_POL:
		psi_policy_store_put((struct ps_policy *)(p & ~COW_E_MASK));
		return;
	case COW_E_LIST:
		for (r = (struct ps_range *)(p & ~COW_E_MASK); r; r = next) {
			next = r->next_free;
			psi_policy_store_put(r->pol);
			cow_spare_put(cs, r);
		}
		return;
	default:
		if (!cow_stash_put(cs, e))
			psi_ix_free_retired(cs->pool, &e, 1);
	}
}

/* Under @wlock: take off the log and release every ripe entry. */
static void cow_release_ripe(struct psi_store_cow *cs)
{
	void *e;

	while ((e = cow_take(cs)))
		cow_release(cs, e);
}

/*
 * Under @wlock, after a full fence that follows every earlier update's
 * publication: what they logged waits for the grace period that begins
 * next (psi_reclaim_poll_state()); what waited for one that ended is ripe.
 */
static void cow_ripen(struct psi_store_cow *cs)
{
	struct psi_rlog *log = cs->log;
	uint64_t before;

	if (!log)
		return;
	before = log->ripe_bytes;
	psi_rlog_mark(log, psi_reclaim_poll_state(PSI_COW_FLAVOUR->reclaimer));
	if (psi_rlog_ripen(log, PSI_COW_FLAVOUR->reclaimer)) {
		PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done); /* readers' sections ended before */
		cs->ripened = log->ripe_bytes - before;
	}
}

/*
 * A node of @size for the update in progress (psi_ix_reuse()): a full
 * leaf off the stash, or else the first such node among the next ripe
 * entries of the log, which this looks through (at most PSI_COW_PULL_MAX
 * an update), releasing the others.
 */
static void *cow_reuse(void *ctx, size_t size)
{
	struct psi_store_cow *cs = ctx;

	if (size == PSI_COW_LEAF_BYTES && cs->stash)
		return cow_stash_take(cs);
	while (cs->pull) {
		void *e = cow_take(cs);

		if (!e) {
			cs->pull = 0;
			break;
		}
		cs->pull--;
		if (cow_node_of(e, size))
			return e;
		cow_release(cs, e);
	}
	return NULL;
}

/*
 * Under @wlock: ask for the lines of the node the next update will likely
 * reuse, the stash's first or the log's (retired a grace period ago, it
 * may be in no cache near), so that they come in while the writer does
 * other things.
 */
static inline void cow_prefetch(struct psi_store_cow *cs)
{
	const char *e = cs->stash ? (const char *)cs->stash : psi_rlog_peek(cs->log);
	size_t i;

	if (!e || ((uintptr_t)e & COW_E_MASK))
		return;
	for (i = 0; i < PSI_COW_LEAF_BYTES; i += 64)
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
static void cow_wait_drain(struct psi_store_cow *cs, bool barrier)
{
	struct psi_reclaimer *rc = PSI_COW_FLAVOUR->reclaimer;
	uint64_t pos = cs->log->added, bytes = cs->log->added_bytes, logs = cs->logs, cookie;
	bool token;
	int cancel;

	PSI_FENCE(SEQ_CST); /* after every publication of what is logged, before the cookie */
	cookie = psi_reclaim_poll_state(rc);
	cs->unreported = 0; /* this wait covers it: nothing to ask for */
	pthread_mutex_unlock(&cs->wlock);
	/* Not a cancellation point: the lock is taken again after. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	token = PSI_COW_FLAVOUR->wait_enter();
	if (barrier)
		psi_reclaim_barrier(rc);
	if (!psi_reclaim_poll_done(rc, cookie))
		psi_cow_synchronize();
	PSI_COW_FLAVOUR->wait_exit(token);
	pthread_mutex_lock(&cs->wlock);
	pthread_setcancelstate(cancel, NULL);
	PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done);
	/* Unless the log went meanwhile, with every entry before @pos. */
	if (cs->logs == logs)
		psi_rlog_ripen_upto(cs->log, pos, bytes);
	cow_release_ripe(cs);
	if (!psi_rlog_count(cs->log))
		PSI_WRITE_ONCE(cs->nothread, false);
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
static void cow_sweep(struct psi_reclaim_item *item)
{
	struct psi_store_cow *cs = psi_container_of(item, struct psi_store_cow, sweep);
	uint64_t now;

	PSI_WRITE_ONCE(cs->kicked, false);
	if (psi_unlikely(psi_reclaim_test_hook))
		psi_reclaim_test_hook();
	now = psi_reclaim_now_ns();
	if (pthread_mutex_trylock(&cs->wlock)) {
		/*
		 * Held at every look for a second (a writer frozen in a fork
		 * child): the sweep stops, and the next set queues it again.
		 */
		if (!cs->sweep_busy)
			cs->sweep_busy = now;
		if (now - cs->sweep_busy < PSI_COW_SWEEP_BUSY_NS) {
			psi_reclaim_retry(PSI_COW_FLAVOUR->reclaimer, item);
			return;
		}
		/*
		 * Stopped without the lock: a set that read @swept true under
		 * the lock and ends after this looks again after its unlock,
		 * and queues the sweep (cow_kick()).
		 */
		cs->sweep_busy = 0;
		PSI_ANNOTATE_HAPPENS_BEFORE(&cs->swept); /* @item is the next kick's: cow_kick() */
		PSI_STORE_RELEASE(cs->swept, false);
		return;
	}
	cs->sweep_busy = 0;
	if (cs->stats.sets != cs->sweep_sets) {
		/*
		 * The writer takes back what it logged, and reports it every
		 * PSI_COW_REPORT_BYTES.  What a slow writer logged without a
		 * report yet is reported here once it has waited
		 * PSI_RECLAIM_LATENCY_NS, so that however little each set
		 * logs a grace period for it comes, and no sooner: a report
		 * made at every look would have the reclaim thread find the
		 * writers quiet between two and start a grace period each time.
		 */
		cs->sweep_sets = cs->stats.sets;
		cs->sweep_ns = now;
		if (!cs->unreported) {
			cs->unreported_ns = 0;
		} else if (!cs->unreported_ns) {
			cs->unreported_ns = now;
		} else if (now - cs->unreported_ns >= PSI_RECLAIM_LATENCY_NS) {
			if (psi_reclaim_poll_weigh(PSI_COW_FLAVOUR->reclaimer, cs->unreported))
				PSI_WRITE_ONCE(cs->nothread, true);
			cs->unreported = 0;
			cs->unreported_ns = 0;
		}
	} else if (now - cs->sweep_ns >= PSI_RECLAIM_RETRY_NS) {
		/* The writer is idle: its log is the sweep's to empty. */
		PSI_FENCE(SEQ_CST); /* after the writer's publications, before the grace period is read */
		cow_ripen(cs);
		cow_release_ripe(cs);
		if (!psi_rlog_count(cs->log)) {
			cow_trim(cs);
			cow_free_spares(cs);
			psi_ix_pool_trim(cs->pool);
			cow_account(cs);
			/* Under @wlock: a set after this one finds the sweep stopped and queues it. */
			PSI_STORE_RELEASE(cs->swept, false);
			pthread_mutex_unlock(&cs->wlock);
			return;
		}
		/* What is not ripe waits for a grace period that may not be asked for yet. */
		if (psi_reclaim_poll_weigh(PSI_COW_FLAVOUR->reclaimer, cs->unreported))
			PSI_WRITE_ONCE(cs->nothread, true);
		cs->unreported = 0;
		cow_account(cs);
	}
	pthread_mutex_unlock(&cs->wlock);
	psi_reclaim_retry(PSI_COW_FLAVOUR->reclaimer, item);
}

/*
 * Queue the sweep unless it is (@swept, claimed with one compare-and-swap:
 * a set under @wlock and one after it may both try), behind a grace
 * period.  Return: 0, or -EAGAIN when no reclaim thread could start.
 */
static int cow_kick(struct psi_store_cow *cs, size_t weight)
{
	bool no = false;

	if (!PSI_TRY_CMPXCHG(cs->swept, &no, true, ACQ_REL, RELAXED))
		return 0;
	PSI_ANNOTATE_HAPPENS_AFTER(&cs->swept); /* the sweep let go of its item */
	PSI_WRITE_ONCE(cs->kicked, true);
	if (!psi_reclaim_defer_weighed(PSI_COW_FLAVOUR->reclaimer, &cs->sweep, weight))
		return 0;
	PSI_WRITE_ONCE(cs->kicked, false);
	PSI_STORE_RELEASE(cs->swept, false);
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
static void cow_ask(struct psi_store_cow *cs, size_t weight)
{
	struct psi_reclaimer *rc = PSI_COW_FLAVOUR->reclaimer;
	int err;

	cs->unreported += weight;
	if (!PSI_LOAD_ACQUIRE(cs->swept)) {
		PSI_FENCE(SEQ_CST); /* after our publication, before the grace period is read */
		psi_rlog_mark(cs->log, psi_reclaim_poll_state(rc));
		err = cow_kick(cs, cs->unreported);
	} else if (cs->unreported >= PSI_COW_REPORT_BYTES) {
		err = psi_reclaim_poll_weigh(rc, cs->unreported);
	} else {
		return;
	}
	cs->unreported = 0;
	if (err)
		PSI_WRITE_ONCE(cs->nothread, true);
}

/* The published root of the read index: loaded first, then declared to the thread checkers. */
static inline struct ps_ix_node *cow_ix_root(struct psi_store_cow *cs)
{
	struct ps_ix_node *root = PSI_LOAD_ACQUIRE(cs->base.ix.node);

	PSI_ANNOTATE_HAPPENS_AFTER(&cs->base.rd.tree); /* pairs with the publication in cow_update() */
	return root;
}

/* Inside a section: from the thread's lookup cache, or the index (lookup_cache.h). */
static inline struct ps_policy *cow_lookup_pol(struct psi_store_cow *cs, uint64_t idx)
{
	struct ps_policy *pol;
	uint64_t gen;
	int hint;

	if (_ps_lc_hit(&cs->base, idx, &pol, &hint, &gen))
		return pol;
	return _ps_lc_miss(&cs->base, cow_ix_root(cs), idx, &hint, gen);
}

static struct ps_store *cow_create(void)
{
	struct ps_store *s = psi_store_zalloc(sizeof(struct psi_store_cow));
	struct psi_store_cow *cs;

	if (!s)
		return NULL;
	cs = to_cow(s);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->base.rd.tree, sizeof(cs->base.rd.tree)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->base.ix, sizeof(cs->base.ix)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->base.lc, sizeof(cs->base.lc)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->base.rd.gen, sizeof(cs->base.rd.gen)); /* atomics only */
	cs->base.lc.id = psi_lc_new_id();
	psi_seq_init(&cs->base.rd.seq);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->walkers, sizeof(cs->walkers));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->held, sizeof(cs->held));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->nothread, sizeof(cs->nothread));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->swept, sizeof(cs->swept));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->kicked, sizeof(cs->kicked));
	cs->sweep.release = cow_sweep;
	pthread_mutex_init(&cs->wlock, NULL);
	return s;
}

/* ---- stores ------------------------------------------------------------------- */

static void cow_destroy(struct ps_store *s)
{
	struct psi_store_cow *cs = to_cow(s);
	struct psi_reclaimer *rc = PSI_COW_FLAVOUR->reclaimer;

	/*
	 * No reader may run during destroy (store.h), nor a set: everything
	 * can go at once, the log too.  Only the sweep may still run, on the
	 * reclaim thread, and it touches the store: a sweep queued is waited
	 * for (queued behind its grace period: a barrier) and cancelled,
	 * which waits for one running; one that stopped just before may
	 * still be letting the lock go, which taking it waits for.  On the
	 * reclaim thread (a release that destroys a store) a queued sweep
	 * went first.  The lock is taken after the reclaimer's, never held
	 * around it: the sweep tries it under the reclaimer's.
	 */
	PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done);
	if (PSI_LOAD_ACQUIRE(cs->swept)) {
		/* Waits for the reclaim thread's grace period: as a barrier does (QSBR: offline). */
		bool token = PSI_COW_FLAVOUR->wait_enter();

		if (PSI_LOAD_ACQUIRE(cs->kicked) && !psi_reclaim_is_self(rc))
			psi_reclaim_barrier(rc);
		psi_reclaim_retry_cancel(rc, &cs->sweep);
		PSI_COW_FLAVOUR->wait_exit(token);
	}
	pthread_mutex_lock(&cs->wlock);
	psi_store_free_ranges(s);
	psi_ix_clear(&s->ix, cs->pool);
	if (cs->log)
		psi_rlog_ripen_upto(cs->log, cs->log->added, cs->log->added_bytes);
	cow_release_ripe(cs);
	cow_trim(cs);
	cow_free_spares(cs);
	pthread_mutex_unlock(&cs->wlock);
	pthread_mutex_destroy(&cs->wlock);
	psi_ix_pool_destroy(cs->pool);
	psi_free_aligned(cs);
}

static void cow_read_lock(struct ps_store *s)
{
	(void)s;
	PSI_COW_READ_ENTER();
}

static void cow_read_unlock(struct ps_store *s)
{
	if (psi_unlikely(!PSI_COW_READ_HELD()))
		psi_stray_read_unlock(PSI_COW_NAME, s);
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_recs_done); /* pairs with the grace period before a release */
	PSI_COW_READ_EXIT();
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
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_recs_done);
	return pol;
}

PSI_COW_LOOKUP_SECTION struct ps_policy *cow_lookup_section(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	PSI_COW_READ_ENTER();
	pol = cow_get(s, idx);
	PSI_COW_READ_EXIT();
	return psi_lookup_result(pol);
}

static struct ps_policy *cow_lookup(struct ps_store *s, uint64_t idx)
{
	if (!PSI_COW_IN_SECTION())
		return cow_lookup_section(s, idx);
	return psi_lookup_result(cow_get(s, idx));
}

/* A section of its own unless the thread is inside one (an online QSBR thread). */
static inline int cow_section_begin(struct ps_store *s)
{
	(void)s;
	if (PSI_COW_IN_SECTION())
		return 0;
	PSI_COW_READ_ENTER();
	return 1;
}

static inline void cow_section_end(struct ps_store *s, int entered)
{
	(void)s;
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_recs_done); /* pairs with the grace period before a release */
	if (entered)
		PSI_COW_READ_EXIT();
}

static int cow_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	int token = cow_section_begin(s), ret;

	ret = _ps_policy_view_fill(cow_lookup_borrow(s, idx), view);
	cow_section_end(s, token);
	return ret;
}

static int cow_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	int token = cow_section_begin(s), node;

	node = _ps_policy_node(cow_lookup_borrow(s, idx), idx, local_node);
	cow_section_end(s, token);
	return node;
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
 * is marked.  The fence pairs with the walk's in cow_walk_begin(): either
 * the walk sees this update's store, or this load sees the walk (and the
 * update goes to the root).  A walk is announced before it loads the
 * root, so it sees every update whose load missed it whole, and no later
 * one.  The fence also follows every earlier update's publication, which
 * cow_ripen() counts on.
 */
static bool cow_begin(struct psi_store_cow *cs)
{
	bool walk;

	PSI_FENCE(SEQ_CST);
	walk = PSI_READ_ONCE(cs->walkers) != 0 || PSI_COW_CHECKER_ROOT();
	cow_ripen(cs);
	return walk;
}

static void cow_walk_begin(struct psi_store_cow *cs)
{
	PSI_FETCH_ADD(cs->walkers, 1, RELAXED);
	/* Pairs with the fence in cow_begin(): see the file comment. */
	PSI_FENCE(SEQ_CST);
}

static void cow_walk_end(struct psi_store_cow *cs)
{
	PSI_FETCH_SUB(cs->walkers, 1, RELEASE);
}

/* A cleanup handler: the thread ends in a callback of an announced walk. */
static void cow_walk_cleanup(void *cs)
{
	cow_walk_end(cs);
}

/*
 * Under @wlock: the store's spares made up to what an update of @n ops
 * may take, n * PSI_RANGETREE_SET_MAX_NEW ranges.  Return: 0, or -ENOMEM
 * with the spares as they were.
 */
static int cow_spares(struct psi_store_cow *cs, size_t n)
{
	if (n > (size_t)INT_MAX / PSI_RANGETREE_SET_MAX_NEW)
		return -ENOMEM;
	return psi_range_list_fill(&cs->spare, (int)(n * PSI_RANGETREE_SET_MAX_NEW));
}

/* Under @wlock: keep up to PSI_COW_SPARES spares (a batch may leave more), free the rest. */
static void cow_keep_spares(struct psi_store_cow *cs)
{
	struct psi_range_list extra = { NULL, 0, NULL };

	if (cs->spare.n > PSI_COW_SPARES) {
		psi_range_list_move(&extra, &cs->spare, cs->spare.n - PSI_COW_SPARES);
		psi_range_list_free(&extra);
	}
}

/*
 * Under @wlock: log the ranges an update unlinked from the tree.  Few go
 * back to the spares at once (no reader reads the tree) and their
 * references onto the log one by one; more wait on the log as one list.
 * Return: the bytes logged.
 */
static size_t cow_log_removed(struct psi_store_cow *cs, struct psi_range_list *removed)
{
	struct ps_range *r;

	if (!removed->n)
		return 0;
	if (removed->n > PSI_COW_RANGES_NOW) {
		size_t bytes = removed->n * psi_alloc_charge(sizeof(struct ps_range));

		psi_rlog_add(cs->log, (void *)((uintptr_t)removed->head | COW_E_LIST));
		*removed = (struct psi_range_list){ NULL, 0, NULL };
		return bytes;
	}
	while ((r = psi_range_list_pop(removed))) {
		if (r->pol)
			psi_rlog_add(cs->log, (void *)((uintptr_t)r->pol | COW_E_POL));
		cow_spare_put(cs, r);
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
static size_t cow_unpool(struct psi_store_cow *cs, bool sync)
{
	struct ps_ix_node *old = cs->base.ix.node, *nr;
	size_t bytes, was = cs->ix_bytes, n = cs->base.rd.tree.count;

	if (!psi_ix_pool_below(psi_ix_rebuilt_bytes(n)) ||
			!(cs->pooled || (sync && psi_ix_rebuild_pays(old, n, was))))
		return 0;
	if (psi_rlog_reserve(&cs->log, 1) || psi_ix_rebuild(old, &nr, &bytes))
		return 0;
	PSI_ANNOTATE_HAPPENS_BEFORE(&cs->base.rd.tree); /* as cow_update()'s publication */
	psi_seq_write_begin(&cs->base.rd.seq);
	PSI_STORE_RELEASE(cs->base.ix.node, nr); /* pairs with the readers' acquire of the root */
	psi_seq_write_end(&cs->base.rd.seq);
	cs->pooled = false;
	psi_ix_pool_grew(cs->pool, (ptrdiff_t)bytes - (ptrdiff_t)was);
	PSI_WRITE_ONCE(cs->ix_bytes, bytes);
	cow_stash_trim(cs);
	if (!old)
		return 0;
	psi_rlog_add(cs->log, psi_ix_retired_whole(old));
	psi_rlog_added_bytes(cs->log, was);
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
static int cow_update(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	struct psi_store_cow *cs = to_cow(s);
	struct psi_range_list removed = { NULL, 0, NULL };
	struct psi_ix_pool *pool;
	struct psi_ix_tx ix;
	uint64_t added, taken, logged, quota;
	size_t i, bytes, unlinked = 0;
	bool walk, root;

	pthread_mutex_lock(&cs->wlock);
	walk = cow_begin(cs);
	added = cs->log ? cs->log->added : 0;
	taken = cs->log ? cs->log->taken : 0;
	cs->pull = PSI_COW_PULL_MAX;
	/* No pool for a small store; none yet (no memory) is only slower. */
	pool = cs->pool;
	if (psi_unlikely(!pool && cs->ix_bytes >= psi_ix_pool_threshold)) {
		int err = errno; /* a set that succeeds without a pool leaves errno alone */

		pool = psi_ix_pool_new(cs->ix_bytes);
		PSI_STORE_RELEASE(cs->pool, pool); /* for cow_held() */
		errno = err;
	}
	/* A batch publishes once: every set of it builds on the last, to the root. */
	psi_ix_begin(&ix, &cs->base.ix, pool, walk || n > 1);
	/* Nothing ripe or stashed: no node to look for (cow_reuse() would find none). */
	if (cs->stash || psi_rlog_ripe_count(cs->log))
		psi_ix_reuse(&ix, cow_reuse, cs);
	for (i = 0; i < n; i++)
		if (psi_ix_set(&ix, ops[i].start, ops[i].end, ops[i].pol))
			goto abort;
	if (cow_spares(cs, n) ||
			psi_rlog_reserve(&cs->log, ix.nretired + PSI_COW_RANGES_NOW))
		goto abort;
	PSI_TEST_POINT(PSI_TP_COW_UPDATE_BUILT);
	/* Nothing can fail from here on. */
	for (i = 0; i < n; i++)
		unlinked += psi_rangetree_set(&cs->base.rd.tree, ops[i].start, ops[i].end,
				ops[i].pol, &cs->spare, &removed);
	/*
	 * For the thread checkers: every node is written (but a leaf that
	 * psi_ix_publish() fills, which needs a slot store: under valgrind
	 * every set publishes at the root, PSI_COW_CHECKER_ROOT()); pairs
	 * with the readers' annotation where they load the root
	 * (cow_ix_root()).  The count is odd around the store that
	 * publishes: a next() whose walk loaded a slot of it sees the count
	 * move (cow_next_find()); so is the lookup caches' (lookup_cache.h).
	 */
	PSI_ANNOTATE_HAPPENS_BEFORE(&cs->base.rd.tree);
	psi_lc_write_begin(&cs->base);
	psi_seq_write_begin(&cs->base.rd.seq);
	root = psi_ix_publish(&ix);
	psi_seq_write_end(&cs->base.rd.seq);
	psi_lc_write_end(&cs->base);
	PSI_WRITE_ONCE(cs->ix_bytes, (size_t)((ptrdiff_t)cs->ix_bytes + ix.bytes));
	cs->pooled |= ix.serve;
	cow_stash_trim(cs);
	cs->stats.sets++;
	cs->stats.root_publications += root;
	stats_add(&cs->stats.nodes_copied, &cs->stats.nodes_copied_max, ix.nkept);
	stats_add(&cs->stats.nodes_retired, &cs->stats.nodes_retired_max, ix.nretired + unlinked);
	/* What left the index and the tree, onto the log until its grace period ends. */
	for (i = 0; i < ix.nretired; i++)
		psi_rlog_add(cs->log, ix.retired[i]);
	bytes = ix.retired_bytes + cow_log_removed(cs, &removed);
	psi_rlog_added_bytes(cs->log, bytes);
	psi_ix_end(&ix);
	cow_keep_spares(cs);
	bytes += cow_unpool(cs, false);
	/*
	 * As many entries off the log as came on: what a grace period made
	 * ripe lasts the sets until the next one ends.  Twice as many while
	 * more is ripe than the last one made so (what the one before left).
	 */
	logged = cs->log->added - added;
	quota = psi_rlog_ripe_bytes(cs->log) > cs->ripened ? 2 * logged : logged;
	while (cs->log->taken - taken < quota) {
		void *e = cow_take(cs);

		if (!e)
			break;
		cow_release(cs, e);
	}
	/* The log's own entries weigh too: a new policy stored in place logs only one. */
	if (logged)
		cow_ask(cs, bytes + logged * sizeof(void *));
	cow_prefetch(cs);
	/*
	 * Past PSI_COW_PENDING_MAX waiting (a grace period that does not
	 * end), or with no reclaim thread to ask, a set that may wait waits
	 * for a grace period itself; one that may not keeps logging.
	 */
	if (psi_unlikely(cs->nothread ||
			    psi_reclaim_pending(PSI_COW_FLAVOUR->reclaimer) > PSI_COW_PENDING_MAX) &&
			PSI_COW_FLAVOUR->can_wait())
		cow_wait_drain(cs, cs->nothread);
	cow_trim(cs);
	cow_account(cs);
	pthread_mutex_unlock(&cs->wlock);
	/*
	 * The sweep may have stopped on a busy lock after cow_ask() saw it
	 * queued (cow_sweep()): what this set logged needs it then.
	 */
	if (psi_unlikely(!PSI_LOAD_ACQUIRE(cs->swept)) && logged)
		(void)cow_kick(cs, 0);
	return 0;
abort:
	psi_ix_abort(&ix);
	psi_ix_end(&ix);
	cow_trim(cs);
	cow_keep_spares(cs);
	cow_account(cs);
	pthread_mutex_unlock(&cs->wlock);
	return -ENOMEM;
}

/* Whether cow_update() may wait for a grace period, read before the set. */
static bool cow_set_may_wait(struct ps_store *s)
{
	return PSI_COW_FLAVOUR->can_wait() &&
	       (psi_reclaim_pending(PSI_COW_FLAVOUR->reclaimer) > PSI_COW_PENDING_MAX ||
		       PSI_READ_ONCE(to_cow(s)->nothread));
}

static int cow_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_set_op op = { start, end, pol };

	return cow_update(s, &op, 1);
}

static void cow_synchronize(struct ps_store *s)
{
	struct psi_store_cow *cs = to_cow(s);

	/*
	 * Documented: never inside a read-side section; a QSBR thread goes
	 * offline here.  Everything logged before the call is released after
	 * a grace period of our own; then the store holds its ranges and its
	 * index only (nothing else may free it later: ps_set_alloc_ops()).
	 */
	pthread_mutex_lock(&cs->wlock);
	(void)cow_unpool(cs, true);
	if (psi_rlog_count(cs->log))
		cow_wait_drain(cs, true);
	cow_trim(cs);
	cow_free_spares(cs);
	psi_ix_pool_trim(cs->pool);
	cow_account(cs);
	pthread_mutex_unlock(&cs->wlock);
}

psi_unwound_through static int cow_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	struct psi_store_cow *cs = to_cow(s);
	int ret;

	/* One version, announced so that no set changes it in place; no writer waits. */
	PSI_COW_READ_ENTER();
	cow_walk_begin(cs);
	/* A callback may end its thread: the announcement goes then too (file comment). */
	pthread_cleanup_push(cow_walk_cleanup, cs);
	ret = psi_ix_foreach_range(cow_ix_root(cs), 0, UINT64_MAX, fn, arg);
	pthread_cleanup_pop(1);
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_recs_done);
	PSI_COW_READ_EXIT();
	return ret;
}

/*
 * Under @wlock: the stash holds full leaves of the allocator's (as
 * cow_stash_put() took them), each counting those from it on, within its
 * bounds for the index as it is now (cow_stash_fits()).
 */
static bool cow_stash_sane(struct psi_store_cow *cs)
{
	unsigned n = cow_stash_count(cs);
	struct ps_ix_node *h;

	if (n && !cow_stash_fits(cs, n))
		return false;
	for (h = cs->stash; h; h = cow_stashed(h)->next, n--)
		if (!n || cow_stashed(h)->count != n || !cow_node_of(h, PSI_COW_LEAF_BYTES))
			return false;
	return !n;
}

static int cow_check(struct ps_store *s, const char **why)
{
	struct psi_store_cow *cs = to_cow(s);
	int ret;

	/* Takes only the writer mutex, which no holder keeps across a grace period. */
	pthread_mutex_lock(&cs->wlock);
	ret = psi_rangetree_check(&cs->base.rd.tree, why);
	if (!ret)
		ret = psi_ix_check(&cs->base.ix, &cs->base.rd.tree, why);
	if (!ret && psi_ix_bytes(cs->base.ix.node) != cs->ix_bytes) {
		*why = "index bytes differ from the count kept";
		ret = -EUCLEAN;
	}
	if (!ret && (PSI_READ_ONCE(cs->base.rd.seq.seq) & 1)) {
		*why = "publication count odd outside a publication";
		ret = -EUCLEAN;
	}
	if (!ret)
		ret = psi_lc_check(&cs->base, why);
	if (!ret && !psi_rlog_sane(cs->log)) {
		*why = "retire log counts disagree";
		ret = -EUCLEAN;
	}
	if (!ret && !cow_stash_sane(cs)) {
		*why = "stash of leaves miscounted or past its bound";
		ret = -EUCLEAN;
	}
	pthread_mutex_unlock(&cs->wlock);
	return ret;
}

/* Bytes besides the live ranges: the index, what the log holds, the spares.  Lock-free. */
static size_t cow_held(struct ps_store *s)
{
	struct psi_store_cow *cs = to_cow(s);

	return PSI_READ_ONCE(cs->held) + PSI_READ_ONCE(cs->ix_bytes) +
	       psi_ix_pool_slack(PSI_LOAD_ACQUIRE(cs->pool));
}

static struct psi_lstat *cow_lock_stat(struct ps_store *s)
{
	(void)s;
	return NULL;
}

static int cow_stats(struct ps_store *s, struct ps_store_stats *st)
{
	struct psi_store_cow *cs = to_cow(s);

	pthread_mutex_lock(&cs->wlock);
	*st = cs->stats;
	pthread_mutex_unlock(&cs->wlock);
	return 0;
}

psi_unwound_through static int cow_foreach_range(struct ps_store *s, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg)
{
	struct psi_store_cow *cs = to_cow(s);
	int ret;

	/* As cow_foreach(): one version, announced, withdrawn if the thread ends. */
	PSI_COW_READ_ENTER();
	cow_walk_begin(cs);
	pthread_cleanup_push(cow_walk_cleanup, cs);
	ret = psi_ix_foreach_range(cow_ix_root(cs), start, end, fn, arg);
	pthread_cleanup_pop(1);
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_recs_done);
	PSI_COW_READ_EXIT();
	return ret;
}

/* The last attempt of cow_next_find(): one walk of one version, announced. */
static __attribute__((noinline, cold)) bool cow_next_announced(struct psi_store_cow *cs,
		uint64_t idx, struct psi_ix_hit *hit)
{
	struct ps_ix_node *root;
	bool found;

	cow_walk_begin(cs);
	root = cow_ix_root(cs);
	PSI_TEST_POINT(PSI_TP_COW_NEXT_WALK);
	found = psi_ix_next_from(root, idx, hit);
	cow_walk_end(cs);
	return found;
}

/*
 * Inside a read-side section: the first range that ends after @idx, as
 * one version of the store holds it.  Return: true with *@hit, or false.
 *
 * The answer may combine two leaves of the index (the leaf of @idx holds
 * no range after it, the next leaf's first does), so the walk is
 * validated with the publication count.
 *
 * Why a walk the count validated read one version.  A set makes the count
 * odd, publishes with release stores, and makes it even with a release
 * store (cow_update(); sets are serialised by @wlock).  An attempt whose
 * first read (acquire) found the even count 2k is ordered after the k-th
 * publication: every slot it loads holds that publication's value or a
 * later one.  A slot or node it loaded from a later publication was
 * reached through that publication's release store, loaded with an
 * acquire load, so the odd count 2k + 1 written before that store is
 * visible to the second read, which the acquire fence keeps after the
 * walk's loads (psi_seq_read_retry()).  So when the count read 2k again,
 * every load of the walk returned version k's value: the walk is one of
 * version k, which was current at the first read (it stops being current
 * only at the next publication, after the count went odd), and the
 * answer linearizes there.  (A policy a set stores in place is a
 * publication too, inside the odd count.)
 *
 * A failed attempt is harmless: every node it reaches was in a published
 * index during our section, and none is freed before a grace period
 * ends, which waits for the section; nothing of it is returned or
 * written.
 *
 * Why it ends.  After PSI_COW_NEXT_TRIES failed attempts (a writer
 * publishing flat out, or a count a fork left odd in a child where no
 * writer finishes it) the walk is announced (cow_next_announced()):
 * every set whose fence follows the announcement publishes at the root,
 * so the walk, which loads the root once, sees one version, as foreach
 * does (file comment).  Only then does the reader write a shared line; no
 * writer ever waits for it.
 */
static bool cow_next_find(struct psi_store_cow *cs, uint64_t idx, struct psi_ix_hit *hit)
{
	int tries;

	for (tries = 0; tries < PSI_COW_NEXT_TRIES; tries++) {
		unsigned seq = psi_seq_read_begin(&cs->base.rd.seq);
		struct ps_ix_node *root;
		bool found;

		if (psi_unlikely(seq & 1)) {
			psi_cpu_relax();
			continue;
		}
		root = cow_ix_root(cs);
		/* Tests hold the reader here, on the root it loaded. */
		PSI_TEST_POINT(PSI_TP_COW_NEXT_WALK);
		found = psi_ix_next_from(root, idx, hit);
		if (psi_likely(!psi_seq_read_retry(&cs->base.rd.seq, seq)))
			return found;
	}
	return cow_next_announced(cs, idx, hit);
}

/* Inside a read-side section (cow_next_find()). */
static int cow_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	struct psi_ix_hit hit;

	if (!cow_next_find(to_cow(s), idx, &hit))
		return -ENOENT;
	*start = hit.start;
	*end = hit.end;
	*pol = hit.pol;
	return 0;
}

/* Inside a read-side section: the range holds its reference for the whole section. */
static inline int cow_next_get(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	struct psi_ix_hit hit;
	bool found = cow_next_find(to_cow(s), idx, &hit);

	if (found) {
		*start = hit.start;
		*end = hit.end;
		*pol = _ps_policy_get(hit.pol);
	}
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_recs_done);
	return found ? 0 : -ENOENT;
}

PSI_COW_LOOKUP_SECTION int cow_next_section(struct ps_store *s, uint64_t idx, uint64_t *start,
		uint64_t *end, struct ps_policy **pol)
{
	int ret;

	PSI_COW_READ_ENTER();
	ret = cow_next_get(s, idx, start, end, pol);
	PSI_COW_READ_EXIT();
	return ret;
}

static int cow_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	if (!PSI_COW_IN_SECTION())
		return cow_next_section(s, idx, start, end, pol);
	return cow_next_get(s, idx, start, end, pol);
}

static int cow_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return cow_update(s, ops, n);
}

const struct ps_sync_ops PSI_COW_OPS = {
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
	.set_may_wait = cow_set_may_wait,
	.foreach = cow_foreach,
	.check = cow_check,
	.held = cow_held,
	.lock_stat = cow_lock_stat,
	.foreach_range = cow_foreach_range,
	.next = cow_next,
	.next_borrow = cow_next_borrow,
	.set_many = cow_set_many,
	.counts_gen = true,
	.stats = cow_stats,
};
