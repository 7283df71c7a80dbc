/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store, compiled once for both liburcu flavours (rcu_store.h):
 * the flavour is the hook table the store holds, which the write side
 * and the walks call; each flavour's file inlines the point reads
 * (sync_rcu.c: memb, sync_qsbr.c: qsbr).  This file: create, destroy,
 * the walks, next(), the checks; an update and its memory are
 * rcu_store_update.c's.
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
 * and lookup_node (sync_rcu.c, sync_qsbr.c, and inline,
 * polstore/static/lookup.h) return what one entry of a leaf holds, or
 * the gap a search ended in; a set changes at most one slot on any
 * root-to-leaf path, so the answer linearizes at the load of the leaf.
 * Readers that may combine several leaves need more:
 *  - next() may combine the leaf of its key (no range after the key)
 *    with the first range of the next leaf.  It validates its walk with
 *    the publication count and announces its last attempt
 *    (psi_rcu_store_next_find()).
 *  - Walks that must see one version (foreach, foreach_range) announce
 *    themselves in @walkers; while one is announced, updates publish at
 *    the root, so the walk, which loaded the root once, sees no later
 *    set.  The walk's increment and an update's read of @walkers each
 *    follow a full fence (rs_walk_begin(); rs_begin() in
 *    rcu_store_update.c).  A callback may end its thread
 *    (polstore/rcu.h): a cleanup handler withdraws the announcement
 *    then, inside the section, before the thread-exit hook closes it
 *    (rcu_thread.c).
 *
 * Why nothing is freed under a reader.  The index nodes an update
 * replaced and the policy references of the ranges it unlinked from the
 * tree go onto the store's retire log (retire_log.h), with the grace
 * period of the flavour that frees them: one that begins after a full
 * fence that follows the update's publication (rs_ripen(): the next
 * update's fence, or the sweep's).  Until that grace period has ended,
 * which waits for every reader that could have reached them, nothing on
 * the log is reused, freed or put.  So a set never waits for readers.
 * The unlinked ranges themselves go back to the spares at once: no
 * lockless reader reads the tree (a set that unlinks many logs them as
 * one list instead).
 *
 * Who takes memory back.  The writer itself: each update makes its new
 * index nodes of ripe nodes, the full leaves it kept (rs_stash_put())
 * first, then those at the head of the log, and takes off as many
 * entries as it adds (psi_rcu_store_update()), so a writer setting flat
 * out allocates little once grace periods end, and no memory crosses to
 * another thread.  The reclaim thread only runs grace periods: the store
 * asks for them by weight (psi_reclaim_poll_weigh()) and polls for their
 * end (psi_reclaim_poll_done()).  A store whose writer stopped has its log
 * emptied by its sweep (psi_rcu_store_sweep(): on the reclaim thread,
 * once no set came for PSI_RECLAIM_RETRY_NS); synchronize and destroy empty it at
 * once.  What the log holds counts in ps_store_memory(), ripe or not.
 *
 * Allocation: an update builds its index nodes, takes its spare ranges
 * and makes room on the log before it changes the tree; -ENOMEM there
 * throws it away and everything is as it was.  The tree's part cannot
 * fail.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "annotate.h"
#include "rcu_store.h"
#include "seqcount.h"
#include "testpoint.h"

/* Walks next() validates with the publication count before it announces one. */
#define PSI_RCU_NEXT_TRIES 4

struct ps_store *psi_rcu_store_create(const struct psi_flavour *flavour)
{
	struct ps_store *s = psi_store_zalloc(sizeof(struct psi_rcu_store));
	struct psi_rcu_store *rs;

	if (!s)
		return NULL;
	rs = psi_rcu_store_of(s);
	rs->flavour = flavour;
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->base.rd.tree, sizeof(rs->base.rd.tree)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->base.ix, sizeof(rs->base.ix)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->base.lc, sizeof(rs->base.lc)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->base.rd.gen, sizeof(rs->base.rd.gen)); /* atomics only */
	rs->base.lc.id = psi_lc_new_id();
	psi_seq_init(&rs->base.rd.seq);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->walkers, sizeof(rs->walkers));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->held, sizeof(rs->held));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->nothread, sizeof(rs->nothread));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->swept, sizeof(rs->swept));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->kicked, sizeof(rs->kicked));
	rs->sweep.release = psi_rcu_store_sweep;
	pthread_mutex_init(&rs->wlock, NULL);
	/*
	 * The mutex's own words are glibc's: a sweep that stops unlocks it on
	 * the reclaim thread just before a destroy may take it, and helgrind
	 * orders what came before that unlock, not the stores glibc makes
	 * inside it, which its destroy wrapper then reads.  Lock and unlock
	 * are still followed as such.
	 */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&rs->wlock, sizeof(rs->wlock));
	return s;
}

void psi_rcu_store_destroy(struct ps_store *s)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);
	struct psi_reclaimer *rc = rs->flavour->reclaimer;

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
	PSI_ANNOTATE_HAPPENS_AFTER(&psi_rcu_store_done[rs->flavour->id]);
	if (PSI_LOAD_ACQUIRE(rs->swept)) {
		/* Waits for the reclaim thread's grace period: as a barrier does (QSBR: offline). */
		bool token = rs->flavour->wait_enter();

		if (PSI_LOAD_ACQUIRE(rs->kicked) && !psi_reclaim_is_self(rc))
			psi_reclaim_barrier(rc);
		psi_reclaim_retry_cancel(rc, &rs->sweep);
		rs->flavour->wait_exit(token);
	}
	pthread_mutex_lock(&rs->wlock);
	psi_store_free_ranges(s);
	psi_ix_clear(&s->ix, rs->pool);
	psi_rcu_store_free_retired(rs);
	pthread_mutex_unlock(&rs->wlock);
	pthread_mutex_destroy(&rs->wlock);
	psi_ix_pool_destroy(rs->pool);
	psi_free_aligned(rs);
}

const struct ps_policy *psi_rcu_store_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return psi_rcu_store_lookup_pol(s, idx);
}

static void rs_walk_begin(struct psi_rcu_store *rs)
{
	PSI_FETCH_ADD(rs->walkers, 1, RELAXED);
	/* Pairs with the fence in rs_begin(): see the file comment. */
	PSI_FENCE(SEQ_CST);
}

static void rs_walk_end(struct psi_rcu_store *rs)
{
	PSI_FETCH_SUB(rs->walkers, 1, RELEASE);
}

/* A cleanup handler: the thread ends in a callback of an announced walk. */
static void rs_walk_cleanup(void *rs)
{
	rs_walk_end(rs);
}

psi_unwound_through int psi_rcu_store_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);
	int ret;

	/* One version, announced so that no set changes it in place; no writer waits. */
	rs->flavour->read_enter();
	rs_walk_begin(rs);
	/* A callback may end its thread: the announcement goes then too (file comment). */
	pthread_cleanup_push(rs_walk_cleanup, rs);
	ret = psi_ix_foreach_range(psi_rcu_store_root(rs), 0, UINT64_MAX, fn, arg);
	pthread_cleanup_pop(1);
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[rs->flavour->id]);
	rs->flavour->read_exit();
	return ret;
}

int psi_rcu_store_check(struct ps_store *s, const char **why)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);
	int ret;

	/* Takes only the writer mutex, which no holder keeps across a grace period. */
	pthread_mutex_lock(&rs->wlock);
	ret = psi_rangetree_check(&rs->base.rd.tree, why);
	if (!ret)
		ret = psi_ix_check(&rs->base.ix, &rs->base.rd.tree, why);
	if (!ret && psi_ix_bytes(rs->base.ix.node) != rs->ix_bytes) {
		*why = "index bytes differ from the count kept";
		ret = -EUCLEAN;
	}
	if (!ret && (PSI_READ_ONCE(rs->base.rd.seq.seq) & 1)) {
		*why = "publication count odd outside a publication";
		ret = -EUCLEAN;
	}
	if (!ret)
		ret = psi_lc_check(&rs->base, why);
	if (!ret && !psi_rlog_sane(rs->log)) {
		*why = "retire log counts disagree";
		ret = -EUCLEAN;
	}
	if (!ret && !psi_rcu_store_stash_sane(rs)) {
		*why = "stash of leaves miscounted or past its bound";
		ret = -EUCLEAN;
	}
	pthread_mutex_unlock(&rs->wlock);
	return ret;
}

/* Bytes besides the live ranges: the index, what the log holds, the spares.  Lock-free. */
size_t psi_rcu_store_held(struct ps_store *s)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);

	return PSI_READ_ONCE(rs->held) + PSI_READ_ONCE(rs->ix_bytes) +
	       psi_ix_pool_slack(PSI_LOAD_ACQUIRE(rs->pool));
}

struct psi_lstat *psi_rcu_store_lock_stat(struct ps_store *s)
{
	(void)s;
	return NULL;
}

int psi_rcu_store_stats(struct ps_store *s, struct ps_store_stats *st)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);

	pthread_mutex_lock(&rs->wlock);
	*st = rs->stats;
	pthread_mutex_unlock(&rs->wlock);
	return 0;
}

psi_unwound_through int psi_rcu_store_foreach_range(struct ps_store *s, uint64_t start,
		uint64_t end, ps_foreach_fn fn, void *arg)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);
	int ret;

	/* As psi_rcu_store_foreach(): one version, announced, withdrawn if the thread ends. */
	rs->flavour->read_enter();
	rs_walk_begin(rs);
	pthread_cleanup_push(rs_walk_cleanup, rs);
	ret = psi_ix_foreach_range(psi_rcu_store_root(rs), start, end, fn, arg);
	pthread_cleanup_pop(1);
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[rs->flavour->id]);
	rs->flavour->read_exit();
	return ret;
}

/* The last attempt of psi_rcu_store_next_find(): one walk of one version, announced. */
static __attribute__((noinline, cold)) bool rs_next_announced(struct psi_rcu_store *rs,
		uint64_t idx, struct psi_ix_hit *hit)
{
	struct ps_ix_node *root;
	bool found;

	rs_walk_begin(rs);
	root = psi_rcu_store_root(rs);
	PSI_TEST_POINT(PSI_TP_RCU_NEXT_WALK);
	found = psi_ix_next_from(root, idx, hit);
	rs_walk_end(rs);
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
 * store (psi_rcu_store_update(); sets are serialised by @wlock).  An
 * attempt whose first read (acquire) found the even count 2k is ordered after the k-th
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
 * Why it ends.  After PSI_RCU_NEXT_TRIES failed attempts (a writer
 * publishing flat out, or a count a fork left odd in a child where no
 * writer finishes it) the walk is announced (rs_next_announced()):
 * every set whose fence follows the announcement publishes at the root,
 * so the walk, which loads the root once, sees one version, as foreach
 * does (file comment).  Only then does the reader write a shared line; no
 * writer ever waits for it.
 */
bool psi_rcu_store_next_find(struct ps_store *s, uint64_t idx, struct psi_ix_hit *hit)
{
	struct psi_rcu_store *rs = psi_rcu_store_of(s);
	int tries;

	for (tries = 0; tries < PSI_RCU_NEXT_TRIES; tries++) {
		unsigned seq = psi_seq_read_begin(&rs->base.rd.seq);
		struct ps_ix_node *root;
		bool found;

		if (psi_unlikely(seq & 1)) {
			psi_cpu_relax();
			continue;
		}
		root = psi_rcu_store_root(rs);
		/* Tests hold the reader here, on the root it loaded. */
		PSI_TEST_POINT(PSI_TP_RCU_NEXT_WALK);
		found = psi_ix_next_from(root, idx, hit);
		if (psi_likely(!psi_seq_read_retry(&rs->base.rd.seq, seq)))
			return found;
	}
	return rs_next_announced(rs, idx, hit);
}

/* Inside a read-side section (psi_rcu_store_next_find()). */
int psi_rcu_store_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	struct psi_ix_hit hit;

	if (!psi_rcu_store_next_find(s, idx, &hit))
		return -ENOENT;
	*start = hit.start;
	*end = hit.end;
	*pol = hit.pol;
	return 0;
}
