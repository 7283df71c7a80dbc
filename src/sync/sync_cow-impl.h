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
 * index (rangeindex.h, polstore/static/index.h): a B+-tree of immutable
 * wide nodes holding the same ranges, to which every update applies the
 * same sets by copying the nodes they change, published with one release
 * store into one child slot of a published node, or into the root.  No
 * lockless reader touches the tree.
 *
 * Why readers are safe.  A published index node is never written.  A
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
 *    follow a full fence (cow_must_publish_at_root()).  A callback may
 *    end its thread (polstore/rcu.h): a cleanup handler withdraws the
 *    announcement then, inside the section, before the thread-exit hook
 *    closes it (rcu_thread.c).
 *
 * Why nothing is freed under a reader.  The index nodes an update
 * replaced and the ranges it unlinked from the tree go into one retire
 * record, queued on the flavour's reclaim thread (rcu_reclaim.h), which
 * releases it after a grace period, i.e. after every reader that could
 * have reached them has left its section.  The unlinked ranges drop their
 * policy references then: an old leaf a reader still holds names those
 * policies.  So a set never waits for readers.
 *
 * Who frees a record's memory.  The reclaim thread drops its references
 * and hands the record back to its store (@done), and the writer makes
 * its next update of it: each update takes one record handed back and
 * builds its index nodes, spare ranges and own record in that memory
 * where it fits (cow_update()), keeping a few spare ranges for the next
 * (@spare).  So a writer setting flat out allocates little once grace
 * periods end, and what it allocates does not cross CPUs.  A store whose
 * writer stopped has its records and spares freed by its sweep
 * (cow_sweep(): the reclaim thread, once no set came for
 * PSI_RECLAIM_RETRY_NS); synchronize and destroy free them at once.
 * What waits there is about what one grace period released, and it
 * counts in ps_store_memory().
 *
 * Allocation: an update builds its index nodes, takes its spare ranges
 * and allocates its record before it changes the tree; -ENOMEM there
 * throws it away and everything is as it was.  The tree's part cannot
 * fail.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "annotate.h"
#include "ixpool.h"
#include "rangeindex.h"
#include "rcu_reclaim.h"
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

/*
 * Retired bytes in flight past which a set that may wait releases its own
 * record: the bound while a grace period does not end.  32 MiB: 262,144
 * ranges with a record chunk each (a record of one range takes one chunk,
 * one of n ranges n at most).
 */
#define PSI_COW_PENDING_MAX (((size_t)1 << 18) * 2 * sizeof(struct ps_range))
/* Looks in a row (PSI_RECLAIM_RETRY_NS apart) that find the writer lock held before a sweep stops. */
#define PSI_COW_SWEEP_TRIES 100
/* Index entries a record has room for at least, so that most updates can reuse one. */
#define PSI_COW_REC_CAP 4
/* Spare ranges a store keeps between updates. */
#define PSI_COW_SPARES (2 * PSI_RANGETREE_SET_MAX_NEW)
/*
 * Bytes handed back past which an update frees a second record besides
 * the one it reuses: while a writer keeps setting, @done holds about what
 * one grace period released, for its next sets to reuse.
 */
#define PSI_COW_DONE_KEEP PSI_RECLAIM_BATCH_BYTES
/* Walks next() validates with the publication count before it announces one. */
#define PSI_COW_NEXT_TRIES 4

/* Annotation key: every record released happens before the flavour's barrier returns. */
static char cow_recs_done __attribute__((unused));

/*
 * What one update retired, queued for a grace period: the ranges it
 * unlinked from the tree (each holding its policy reference; one that is
 * empty only carries the reference a reused range had: rangetree.c), and
 * the index nodes and subtrees it replaced.
 */
struct cow_rec {
	struct psi_reclaim_item item; /* item.next links a store's stalled records too */
	struct psi_store_cow *cs;     /* the store, which frees the record's memory */
	struct psi_ix_pool *pool;     /* where pooled index nodes go back */
	size_t ix_bytes;              /* of the index nodes on @ix, subtrees whole */
	struct psi_range_list removed;
	size_t nix;                   /* entries on @ix */
	size_t cap;                   /* room on @ix */
	void *ix[];
};

/* The bytes a record holds, for the reclaim thread's batches and the in-flight bound. */
static size_t rec_bytes(const struct cow_rec *r)
{
	return sizeof(*r) + r->cap * sizeof(void *) + r->ix_bytes +
	       r->removed.n * sizeof(struct ps_range);
}

/* Free a record and what it holds, dropping the references (no reader can reach them). */
static void rec_release(struct cow_rec *r)
{
	psi_ix_free_retired(r->pool, r->ix, r->nix);
	psi_range_list_free(&r->removed);
	psi_free(r);
}

static void cow_hand_back(struct cow_rec *r);

static void cow_rec_free(struct psi_reclaim_item *item)
{
	struct cow_rec *r = psi_container_of(item, struct cow_rec, item);

	PSI_ANNOTATE_HAPPENS_AFTER(r); /* the writer filled @r before queueing it */
	/* A grace period has passed since they left the published index: readers let go. */
	PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done);
	psi_range_list_put_policies(&r->removed);
	cow_hand_back(r);
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_recs_done);
	if (psi_unlikely(psi_reclaim_test_hook))
		psi_reclaim_test_hook();
}

/* The record after @r on a chain linked by item.next, or NULL. */
static inline struct cow_rec *rec_next(const struct cow_rec *r)
{
	return r->item.next ? psi_container_of(r->item.next, struct cow_rec, item) : NULL;
}

/* Push @r on the chain at *@head (lock-free; release: @r's contents before it). */
static void rec_push(struct cow_rec **head, struct cow_rec *r)
{
	struct cow_rec *old = PSI_READ_ONCE(*head);

	do {
		r->item.next = old ? &old->item : NULL;
		PSI_ANNOTATE_HAPPENS_BEFORE(head); /* for the thread checkers, which see no atomics */
	} while (!PSI_TRY_CMPXCHG_WEAK(*head, &old, r, RELEASE, RELAXED));
}

/* Free a chain of records (linked by item.next) at once: no reader can reach them. */
static void rec_chain_free_now(struct cow_rec *r)
{
	struct cow_rec *next;

	for (; r; r = next) {
		next = rec_next(r);
		rec_release(r);
	}
}

/*
 * base.rd.seq, on the line of the root, is the publication count: odd
 * while a set publishes (cow_commit()), which next() validates its walk
 * with (cow_next_find()).
 */
struct psi_store_cow {
	struct ps_store base;
	pthread_mutex_t wlock __ps_cacheline_aligned;
	/* Under @wlock: */
	struct ps_store_stats stats;
	/* Atomic: walks that must see one version (see the file comment). */
	unsigned walkers;
	/* Atomic: a set queued a record since the store last waited for them all. */
	bool queued;
	/* Records no reclaim thread took (a set in a section without one); atomic push. */
	struct cow_rec *stalled;
	size_t nstalled;               /* bytes on @stalled (rec_bytes()); atomic */
	size_t ix_bytes;               /* the read index's nodes; written under @wlock, atomic */
	/*
	 * The nodes of a large index (ixpool.h), made when it first is; set
	 * once under @wlock (release), loaded (acquire) by those without it.
	 */
	struct psi_ix_pool *pool;
	/* Records past their grace period, references dropped, for the writer to free; atomic push. */
	struct cow_rec *done;
	size_t ndone;                  /* bytes on @done (rec_bytes()); atomic */
	/* Under the reclaimer's gp_lock: the sweep of @done, queued to retry while @swept. */
	struct psi_reclaim_item sweep;
	bool swept;
	uint64_t sweep_sets;           /* stats.sets the sweep last saw (and @wlock) */
	unsigned sweep_busy;           /* looks in a row that found @wlock held */
	/* Under @wlock: spare ranges kept for the next update; @nspare (their count) atomic. */
	struct psi_range_list spare;
	size_t nspare;
};
_Static_assert(offsetof(struct psi_store_cow, base) == 0, "psi_store_zalloc(): base first");

/*
 * A release function of the reclaimer (under its gp_lock): @r, its
 * references dropped, onto its store's @done, whose sweep is queued.
 * Lock-free against the writer taking records off (cow_take_done()).
 */
static void cow_hand_back(struct cow_rec *r)
{
	struct psi_store_cow *cs = r->cs;

	PSI_FETCH_ADD(cs->ndone, rec_bytes(r), RELAXED);
	rec_push(&cs->done, r);
	if (!cs->swept) {
		PSI_WRITE_ONCE(cs->swept, true);
		psi_reclaim_retry(PSI_COW_FLAVOUR->reclaimer, &cs->sweep);
	}
}

/*
 * Under @wlock (the only taker: no record leaves @done beneath it): take
 * up to @n records handed back, a chain linked by item.next, or all of
 * them with @n 0.
 */
static struct cow_rec *cow_take_done(struct psi_store_cow *cs, int n)
{
	struct cow_rec *first = PSI_LOAD_ACQUIRE(cs->done), *last, *next;
	size_t bytes;
	int i;

	if (!first)
		return NULL;
	if (!n) {
		first = PSI_XCHG(cs->done, NULL, ACQUIRE);
		PSI_ANNOTATE_HAPPENS_AFTER(&cs->done);
		for (bytes = 0, last = first; last; last = rec_next(last))
			bytes += rec_bytes(last);
		PSI_FETCH_SUB(cs->ndone, bytes, RELAXED);
		return first;
	}
	for (;;) {
		PSI_ANNOTATE_HAPPENS_AFTER(&cs->done);
		last = first;
		bytes = rec_bytes(first);
		for (i = 1; i < n && rec_next(last); i++) {
			last = rec_next(last);
			bytes += rec_bytes(last);
		}
		next = rec_next(last);
		/* Fails only when the reclaim thread pushed meanwhile: then from its push. */
		if (PSI_TRY_CMPXCHG_WEAK(cs->done, &first, next, ACQUIRE, ACQUIRE))
			break;
	}
	last->item.next = NULL;
	PSI_FETCH_SUB(cs->ndone, bytes, RELAXED);
	return first;
}

/* Under @wlock: free the spares the store keeps. */
static void cow_free_spares(struct psi_store_cow *cs)
{
	psi_range_list_free(&cs->spare);
	PSI_WRITE_ONCE(cs->nspare, 0);
}

/*
 * The sweep, a retried release of the reclaimer: once the store's writer
 * made no set since its last look (PSI_RECLAIM_RETRY_NS ago), it frees
 * what was handed back and stops; while a set runs or the writer keeps
 * setting (it frees them itself), it looks again later.  Never waits for
 * @wlock (a writer frozen in a fork child holds it for ever).
 */
static void cow_sweep(struct psi_reclaim_item *item)
{
	struct psi_store_cow *cs = psi_container_of(item, struct psi_store_cow, sweep);

	if (pthread_mutex_trylock(&cs->wlock)) {
		/*
		 * Held at every look for a second (a writer frozen in a fork
		 * child): the sweep stops, and the next record handed back
		 * queues it again.
		 */
		if (++cs->sweep_busy < PSI_COW_SWEEP_TRIES) {
			psi_reclaim_retry(PSI_COW_FLAVOUR->reclaimer, item);
			return;
		}
		cs->sweep_busy = 0;
		PSI_STORE_RELEASE(cs->swept, false);
		return;
	}
	cs->sweep_busy = 0;
	if (cs->stats.sets != cs->sweep_sets) {
		cs->sweep_sets = cs->stats.sets;
		pthread_mutex_unlock(&cs->wlock);
		psi_reclaim_retry(PSI_COW_FLAVOUR->reclaimer, item);
		return;
	}
	/*
	 * Freed under @wlock: a synchronize that took it after us finds them
	 * freed; the pooled nodes go back to the pool before destroy may free it.
	 */
	rec_chain_free_now(cow_take_done(cs, 0));
	cow_free_spares(cs);
	pthread_mutex_unlock(&cs->wlock);
	/* The last touch of the store: a destroy that reads it false frees the store. */
	PSI_STORE_RELEASE(cs->swept, false);
}

static inline struct psi_store_cow *to_cow(struct ps_store *s)
{
	return psi_container_of(s, struct psi_store_cow, base);
}

/* The published root of the read index: loaded first, then declared to the thread checkers. */
static inline struct ps_ix_node *cow_ix_root(struct psi_store_cow *cs)
{
	struct ps_ix_node *root = PSI_LOAD_ACQUIRE(cs->base.rd.ix.node);

	PSI_ANNOTATE_HAPPENS_AFTER(&cs->base.rd.tree); /* pairs with the publication in cow_commit() */
	return root;
}

static inline struct ps_policy *cow_lookup_pol(struct psi_store_cow *cs, uint64_t idx)
{
	return _ps_ix_lookup(cow_ix_root(cs), idx, NULL);
}

static struct ps_store *cow_create(void)
{
	struct ps_store *s = psi_store_zalloc(sizeof(struct psi_store_cow));
	struct psi_store_cow *cs;

	if (!s)
		return NULL;
	cs = to_cow(s);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->base.rd.tree, sizeof(cs->base.rd.tree)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->base.rd.ix, sizeof(cs->base.rd.ix)); /* atomics only */
	psi_seq_init(&cs->base.rd.seq);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->walkers, sizeof(cs->walkers));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->queued, sizeof(cs->queued));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->stalled, sizeof(cs->stalled));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->nstalled, sizeof(cs->nstalled));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->done, sizeof(cs->done));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->ndone, sizeof(cs->ndone));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->swept, sizeof(cs->swept));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cs->nspare, sizeof(cs->nspare));
	cs->sweep.release = cow_sweep;
	pthread_mutex_init(&cs->wlock, NULL);
	return s;
}

/* ---- stores ------------------------------------------------------------------- */

/* Wait until every record queued before has been released (outside every section). */
static void cow_wait_records(void)
{
	bool token = PSI_COW_FLAVOUR->wait_enter();

	psi_reclaim_barrier(PSI_COW_FLAVOUR->reclaimer);
	PSI_COW_FLAVOUR->wait_exit(token);
	PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done);
}

static void cow_destroy(struct ps_store *s)
{
	struct psi_store_cow *cs = to_cow(s);

	/*
	 * No reader may run during destroy (store.h): everything can go at
	 * once.  Records in flight hold what the store retired, never the
	 * store, so the reclaim thread needs nothing of it; destroy waits for
	 * them only so that the policy references they hold are dropped when
	 * it returns, as the other variants' are.
	 */
	/* Every section that reached the index has ended (a deferred destroy: a grace period ago). */
	PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done);
	psi_store_free_ranges(s);
	psi_ix_clear(&s->rd.ix, cs->pool);
	rec_chain_free_now(PSI_XCHG(cs->stalled, NULL, ACQUIRE));
	/* On the reclaim thread (a release that destroys a store) its records went first. */
	if (PSI_READ_ONCE(cs->queued) &&
			!psi_reclaim_is_self(PSI_COW_FLAVOUR->reclaimer))
		cow_wait_records();
	/*
	 * Every record is handed back now and no sweep starts; one queued
	 * (only a sweep clears @swept) is cancelled, and waited for if it runs.
	 */
	if (PSI_LOAD_ACQUIRE(cs->swept)) {
		/* Waits for the reclaim thread's grace period: as a barrier does (QSBR: offline). */
		bool token = PSI_COW_FLAVOUR->wait_enter();

		psi_reclaim_retry_cancel(PSI_COW_FLAVOUR->reclaimer, &cs->sweep);
		PSI_COW_FLAVOUR->wait_exit(token);
	}
	rec_chain_free_now(cow_take_done(cs, 0));
	cow_free_spares(cs);
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

/*
 * Queue @r (what one set retired) for a grace period.  Outside every
 * read-side section, with the reclaim thread far behind or missing, wait
 * for the grace period here and release it; inside one without a thread,
 * keep it on the store for a later set, synchronize or destroy.
 *
 * The memory bound: what the records queued hold and no release gave back
 * yet (psi_reclaim_pending(), in bytes, with every other user of the
 * flavour's thread).  The thread starts a grace period once that reaches
 * PSI_RECLAIM_BATCH_BYTES, so it stays near that bound while grace periods
 * end.  Past PSI_COW_PENDING_MAX (a grace period that does not end: a QSBR
 * thread online without quiescent states), a set outside every section
 * (the flavour's can_wait()) waits for a grace period and releases its
 * record itself; a set inside a section queues it anyway: a set never
 * waits there.
 */
static void cow_retire(struct psi_store_cow *cs, struct cow_rec *r)
{
	bool can_wait = PSI_COW_FLAVOUR->can_wait();
	size_t bytes = rec_bytes(r);

	r->item.release = cow_rec_free;
	PSI_ANNOTATE_HAPPENS_BEFORE(r); /* our last touch of the record: pairs with the release */
	if (!PSI_READ_ONCE(cs->queued))
		PSI_WRITE_ONCE(cs->queued, true);
	if (!(can_wait && psi_reclaim_pending(PSI_COW_FLAVOUR->reclaimer) > PSI_COW_PENDING_MAX) &&
			!psi_reclaim_defer_weighed(PSI_COW_FLAVOUR->reclaimer, &r->item, bytes))
		return;
	if (can_wait) {
		int cancel;

		/* A cancellation here would lose the record: acted on at the next point instead. */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
		psi_cow_synchronize();
		PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done);
		rec_release(r);
		pthread_setcancelstate(cancel, NULL);
		return;
	}
	rec_push(&cs->stalled, r);
	PSI_FETCH_ADD(cs->nstalled, bytes, RELAXED);
}

/* Release the records no reclaim thread took, after a grace period (outside every section). */
static void cow_release_stalled(struct psi_store_cow *cs)
{
	struct cow_rec *r = PSI_XCHG(cs->stalled, NULL, ACQUIRE), *next;
	bool token;
	int cancel;

	if (!r)
		return;
	PSI_WRITE_ONCE(cs->nstalled, 0);
	/* As in cow_retire(): not a cancellation point, nothing taken is lost. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	token = PSI_COW_FLAVOUR->wait_enter();
	psi_cow_synchronize();
	PSI_COW_FLAVOUR->wait_exit(token);
	PSI_ANNOTATE_HAPPENS_AFTER(&cow_recs_done);
	for (; r; r = next) {
		next = rec_next(r);
		rec_release(r);
	}
	pthread_setcancelstate(cancel, NULL);
}

static inline void stats_add(uint64_t *sum, uint64_t *max, uint64_t v)
{
	*sum += v;
	if (*max < v)
		*max = v;
}

/*
 * Under @wlock, before an update builds anything: whether it must publish
 * at the root.  Pairs with the walk's fence in cow_walk_begin(): either
 * the walk sees this update's store, or this load sees the walk (and the
 * update goes to the root).  A walk is announced before it loads the
 * root, so it sees every update whose load missed it whole, and no later
 * one.
 */
static bool cow_must_publish_at_root(struct psi_store_cow *cs)
{
	PSI_FENCE(SEQ_CST);
	return PSI_READ_ONCE(cs->walkers) != 0 || PSI_COW_CHECKER_ROOT();
}

static void cow_walk_begin(struct psi_store_cow *cs)
{
	PSI_FETCH_ADD(cs->walkers, 1, RELAXED);
	/* Pairs with the fence in cow_commit(): see the file comment. */
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

/* The end of every update: queue what it retired, release what stalled. */
static void cow_finish(struct psi_store_cow *cs, struct cow_rec *r)
{
	if (r)
		cow_retire(cs, r);
	if (psi_unlikely(PSI_READ_ONCE(cs->stalled)) && PSI_COW_FLAVOUR->can_wait())
		cow_release_stalled(cs);
}

/*
 * Under @wlock: the spares of an update, n * PSI_RANGETREE_SET_MAX_NEW
 * ranges: first the store's stock, then the ranges of @old (a record
 * handed back, whose references are gone), then new ones.  -ENOMEM: the
 * caller frees what @spares holds.
 */
static int cow_spares(struct psi_store_cow *cs, struct cow_rec *old, struct psi_range_list *spares,
		size_t n)
{
	struct ps_range *r;

	psi_range_list_splice(spares, &cs->spare);
	PSI_WRITE_ONCE(cs->nspare, 0);
	while (old && (r = psi_range_list_pop(&old->removed))) {
		memset(r, 0, sizeof(*r));
		psi_range_list_push(spares, r);
	}
	if (n > (size_t)INT_MAX / PSI_RANGETREE_SET_MAX_NEW)
		return -ENOMEM;
	return psi_range_list_fill(spares, (int)(n * PSI_RANGETREE_SET_MAX_NEW));
}

/*
 * Under @wlock, after an update that retired something: keep up to
 * PSI_COW_SPARES of the spares it left for the next one (its record's
 * hand-back queues the sweep, which frees them once sets stop; a record
 * released at once instead leaves them to the next set, synchronize or
 * destroy); the rest go.
 */
static void cow_keep_spares(struct psi_store_cow *cs, struct psi_range_list *spares)
{
	struct ps_range *r;

	while (cs->spare.n < PSI_COW_SPARES && (r = psi_range_list_pop(spares)))
		psi_range_list_push(&cs->spare, r);
	PSI_WRITE_ONCE(cs->nspare, cs->spare.n);
}

/*
 * The record of an update that retired @nix index entries: @old's when it
 * has the room (what is left of @old's own entries freed first), else a
 * new one; NULL when none can be had.
 */
static struct cow_rec *cow_rec_get(struct cow_rec *old, size_t nix)
{
	size_t cap = nix > PSI_COW_REC_CAP ? nix : PSI_COW_REC_CAP;
	struct cow_rec *r;

	if (old && old->cap >= nix)
		return old;
	r = psi_alloc(sizeof(*r) + cap * sizeof(void *));
	if (r)
		r->cap = cap;
	return r;
}

/* What is left of a record an update reused (its shell too, unless @keep_shell). */
static void cow_rec_leftover(struct cow_rec *old, bool keep_shell)
{
	if (!old)
		return;
	psi_ix_free_retired(old->pool, old->ix, old->nix);
	psi_range_list_free(&old->removed);
	if (!keep_shell)
		psi_free(old);
}

/*
 * One update: @n ops (a set is a batch of one).  Under @wlock: the index
 * is built for all of them and everything the update needs is allocated
 * first; then the tree changes in place (it cannot fail) and the index is
 * published with one store.  A reader loads the published slot before or
 * after it: all of the batch or none.
 *
 * Memory comes back to the writer: each update takes one record handed
 * back (@done) and makes its index nodes, its spare ranges and its own
 * record of that record's, where they fit; so a writer setting flat out
 * allocates little once grace periods end.  What it cannot use is freed,
 * and one more record when @done holds more than PSI_COW_DONE_KEEP.
 */
static int cow_update(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	struct psi_store_cow *cs = to_cow(s);
	struct psi_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
	struct cow_rec *r = NULL, *old, *done = NULL;
	struct psi_ix_pool *pool;
	struct psi_ix_tx ix;
	size_t i;
	bool walk, root;

	pthread_mutex_lock(&cs->wlock);
	old = cow_take_done(cs, 1);
	if (cow_spares(cs, old, &spares, n)) {
		pthread_mutex_unlock(&cs->wlock);
		goto nomem;
	}
	walk = cow_must_publish_at_root(cs);
	/* No pool for a small store; none yet (no memory) is only slower. */
	pool = cs->pool;
	if (psi_unlikely(!pool && cs->ix_bytes >= psi_ix_pool_threshold)) {
		int err = errno; /* a set that succeeds without a pool leaves errno alone */

		pool = psi_ix_pool_new(cs->ix_bytes);
		PSI_STORE_RELEASE(cs->pool, pool); /* for cow_held() */
		errno = err;
	}
	/* A batch publishes once: every set of it builds on the last, to the root. */
	psi_ix_begin(&ix, &cs->base.rd.ix, pool, walk || n > 1);
	if (old)
		psi_ix_reuse(&ix, old->ix, old->nix);
	for (i = 0; i < n; i++)
		if (psi_ix_set(&ix, ops[i].start, ops[i].end, ops[i].pol))
			goto abort;
	r = cow_rec_get(old, ix.nretired);
	if (!r)
		goto abort;
	PSI_TEST_POINT(PSI_TP_COW_UPDATE_BUILT);
	/* Nothing can fail from here on. */
	for (i = 0; i < n; i++)
		psi_rangetree_set(&cs->base.rd.tree, ops[i].start, ops[i].end, ops[i].pol, &spares,
				&removed);
	/*
	 * For the thread checkers: every node is written; pairs with the
	 * readers' annotation where they load the root (cow_ix_root()).  The
	 * count is odd around the store that publishes: a next() whose walk
	 * loaded a slot of it sees the count move (cow_next_find()).
	 */
	PSI_ANNOTATE_HAPPENS_BEFORE(&cs->base.rd.tree);
	psi_seq_write_begin(&cs->base.rd.seq);
	root = psi_ix_publish(&ix);
	psi_seq_write_end(&cs->base.rd.seq);
	PSI_WRITE_ONCE(cs->ix_bytes, (size_t)((ptrdiff_t)cs->ix_bytes + ix.bytes));
	cs->stats.sets++;
	cs->stats.root_publications += root;
	stats_add(&cs->stats.nodes_copied, &cs->stats.nodes_copied_max, ix.nkept);
	stats_add(&cs->stats.nodes_retired, &cs->stats.nodes_retired_max,
			ix.nretired + removed.n);
	if (ix.nretired || removed.n)
		cow_keep_spares(cs, &spares);
	if (PSI_READ_ONCE(cs->ndone) > PSI_COW_DONE_KEEP)
		done = cow_take_done(cs, 1);
	pthread_mutex_unlock(&cs->wlock);
	rec_chain_free_now(done);
	cow_rec_leftover(old, r == old);
	r->cs = cs;
	r->pool = pool;
	r->ix_bytes = ix.retired_bytes;
	r->removed = removed;
	r->nix = ix.nretired;
	if (r->nix)
		memcpy(r->ix, ix.retired, r->nix * sizeof(void *));
	psi_ix_end(&ix);
	psi_range_list_free(&spares);
	if (!r->nix && !r->removed.n) {
		psi_free(r);
		r = NULL;
	}
	cow_finish(cs, r);
	return 0;
abort:
	psi_ix_abort(&ix);
	psi_ix_end(&ix);
	pthread_mutex_unlock(&cs->wlock);
nomem:
	cow_rec_leftover(old, false);
	psi_range_list_free(&spares);
	return -ENOMEM;
}

/* What cow_retire() and cow_finish() wait for a grace period on, read before the set. */
static bool cow_set_may_wait(struct ps_store *s)
{
	return PSI_COW_FLAVOUR->can_wait() &&
	       (psi_reclaim_pending(PSI_COW_FLAVOUR->reclaimer) > PSI_COW_PENDING_MAX ||
		       PSI_READ_ONCE(to_cow(s)->stalled));
}

static int cow_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_set_op op = { start, end, pol };

	return cow_update(s, &op, 1);
}

static void cow_synchronize(struct ps_store *s)
{
	struct psi_store_cow *cs = to_cow(s);

	/* Documented: never inside a read-side section; a QSBR thread goes offline here. */
	cow_release_stalled(cs);
	cow_wait_records();
	/*
	 * The records handed back are freed, all of them (a set frees only
	 * two, and nothing may free them after this: ps_set_alloc_ops()), so
	 * the writer lock is waited for, which no holder keeps across a
	 * grace period; the pool's empty chunks go (unless a set is running,
	 * which takes them back itself).
	 */
	if (PSI_READ_ONCE(cs->done) || PSI_READ_ONCE(cs->nspare) ? !pthread_mutex_lock(&cs->wlock)
				    : PSI_LOAD_ACQUIRE(cs->pool) && !pthread_mutex_trylock(&cs->wlock)) {
		rec_chain_free_now(cow_take_done(cs, 0));
		cow_free_spares(cs);
		psi_ix_pool_trim(cs->pool);
		pthread_mutex_unlock(&cs->wlock);
	}
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

static int cow_check(struct ps_store *s, const char **why)
{
	struct psi_store_cow *cs = to_cow(s);
	int ret;

	/* Takes only the writer mutex, which no holder keeps across a grace period. */
	pthread_mutex_lock(&cs->wlock);
	ret = psi_rangetree_check(&cs->base.rd.tree, why);
	if (!ret)
		ret = psi_ix_check(&cs->base.rd.ix, &cs->base.rd.tree, why);
	if (!ret && psi_ix_bytes(cs->base.rd.ix.node) != cs->ix_bytes) {
		*why = "index bytes differ from the count kept";
		ret = -EUCLEAN;
	}
	if (!ret && (PSI_READ_ONCE(cs->base.rd.seq.seq) & 1)) {
		*why = "publication count odd outside a publication";
		ret = -EUCLEAN;
	}
	pthread_mutex_unlock(&cs->wlock);
	return ret;
}

/* Bytes besides the live ranges: what no reclaim thread took yet.  Lock-free. */
static size_t cow_held(struct ps_store *s)
{
	struct psi_store_cow *cs = to_cow(s);

	return PSI_READ_ONCE(cs->nstalled) + PSI_READ_ONCE(cs->ndone) + PSI_READ_ONCE(cs->ix_bytes) +
	       PSI_READ_ONCE(cs->nspare) * sizeof(struct ps_range) +
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
 * store (cow_commit(); sets are serialised by @wlock).  An attempt whose
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
 * answer linearizes there.  A published node is never written.
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
	.stats = cow_stats,
};
