// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * SEQLOCK store: writers take a spinlock and bracket their change with a
 * sequence count; readers walk the tree with no lock and retry when the
 * count says a writer intervened, taking the writer lock after
 * PSI_SEQ_RETRIES failed tries so a reader always finishes.
 *
 * Why a reader never touches freed memory: readers run inside a liburcu
 * memb read-side section, and a writer frees the ranges it unlinked only
 * after a grace period (the construction of the kernel's d_lookup() with
 * rename_lock).  Until then an unlinked range is still valid memory holding
 * its policy reference, so even a reader that reached it through a stale
 * pointer reads real nodes and may take a plain reference on its policy.
 * Unlinked ranges are retired in batches: the set that fills a batch
 * (PSI_SEQ_RETIRE_BATCH ranges) hands it to the memb reclaim thread
 * (rcu_reclaim.h), which frees it after a grace period, so no set waits
 * for one (should the small batch header fail to allocate, or no reclaim
 * thread start, that set waits and frees the batch itself: nothing is
 * lost).  At most one partial batch per store plus the batches in flight
 * are held back, with their policy references; ps_store_synchronize()
 * frees the partial batch and waits for those in flight.
 *
 * Why a reader never loops forever: writers rotate in place, so a racing
 * walk can see a transient cycle; psi_rangetree_lookup() gives up after
 * PS_RB_MAX_DEPTH steps, and the attempt counts as failed.
 *
 * Linearizability: an attempt whose count was even and unchanged saw the
 * tree as it was between two write sections: it linearizes at its first
 * count read.  The fallback linearizes when it holds the lock.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "held.h"
#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "seqcount.h"
#include "spinlock.h"
#include "store_internal.h"

#define PSI_SEQ_RETRIES 4
#define PSI_SEQ_RETIRE_BATCH 64

/* Annotation key: every batch freed happens before the reclaim barrier returns. */
static char seq_batches_done __attribute__((unused));

struct psi_store_seq {
	struct ps_store base;
	/* base.rd: the count and the tree, one line, one miss for a reader. */
	struct psi_spinlock lock __ps_cacheline_aligned;
	struct psi_range_list retired; /* unlinked, waiting for a grace period; under @lock */
	size_t inflight; /* atomic: batches handed to the reclaim thread and not yet freed */
	size_t waiting;  /* atomic: bytes of @retired and of the batches in flight */
};
_Static_assert(offsetof(struct psi_store_seq, base) == 0, "psi_store_zalloc(): base first");

static inline struct psi_store_seq *to_seq(struct ps_store *s)
{
	return psi_container_of(s, struct psi_store_seq, base);
}

static struct ps_store *seq_create(void)
{
	struct ps_store *s = psi_store_zalloc(sizeof(struct psi_store_seq));

	if (!s)
		return NULL;
	psi_spin_init(&to_seq(s)->lock);
	psi_seq_init(&s->rd.seq);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&to_seq(s)->inflight, sizeof(to_seq(s)->inflight));
	return s;
}

static void seq_destroy(struct ps_store *s)
{
	struct psi_store_seq *ss = to_seq(s);

	psi_store_free_ranges(s);
	psi_range_list_free(&ss->retired); /* no reader may run during destroy */
	/*
	 * Batches in flight hold policy references (dropped when destroy
	 * returns) and point at the store: wait for them.  Their release
	 * drops @inflight last.
	 */
	if (PSI_LOAD_ACQUIRE(ss->inflight))
		psi_reclaim_barrier(psi_flavour_memb.reclaimer);
	PSI_ANNOTATE_HAPPENS_AFTER(&seq_batches_done);
	psi_free_aligned(ss);
}

static void seq_read_lock(struct ps_store *s)
{
	(void)s;
	psi_memb_read_lock();
}

static void seq_read_unlock(struct ps_store *s)
{
	/* Outside every memb section liburcu's count would go below zero. */
	if (psi_unlikely(!urcu_memb_read_ongoing()))
		psi_stray_read_unlock("seqlock", s);
	PSI_ANNOTATE_HAPPENS_BEFORE(s); /* pairs with the grace period in seq_set() */
	psi_memb_read_unlock();
}

/* The fallback after PSI_SEQ_RETRIES failed tries: out of line, off the fast path. */
static __attribute__((noinline, cold)) struct ps_policy *seq_read_locked(
		struct psi_store_seq *ss, uint64_t idx)
{
	struct ps_policy *pol;

	psi_spin_lock(&ss->lock);
	pol = psi_rangetree_lookup_pol(&ss->base.rd.tree, idx);
	psi_spin_unlock(&ss->lock);
	return pol;
}

/* Inside a memb read-side section; inlined into both lookups. */
static inline struct ps_policy *seq_read(struct psi_store_seq *ss, uint64_t idx)
{
	struct ps_policy *pol;
	int tries;

	for (tries = 0; tries < PSI_SEQ_RETRIES; tries++) {
		unsigned start = psi_seq_read_begin(&ss->base.rd.seq);
		struct ps_range *r;

		if (start & 1) {
			psi_cpu_relax(); /* a writer is inside: don't walk a tree in flux */
			continue;
		}
		/*
		 * A walk racing a writer by design: its result is used only if
		 * the count did not change, and nodes stay valid memory for the
		 * whole memb section.  Not a data race to report.
		 */
		PSI_ANNOTATE_IGNORE_READS_BEGIN();
		r = psi_rangetree_lookup(&ss->base.rd.tree, idx);
		pol = r && r != PS_RTREE_OVERRUN ? PSI_READ_ONCE(r->pol) : NULL;
		PSI_ANNOTATE_IGNORE_READS_END();
		if (!psi_seq_read_retry(&ss->base.rd.seq, start) && r != PS_RTREE_OVERRUN)
			return pol;
	}
	return seq_read_locked(ss, idx);
}

static const struct ps_policy *seq_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return seq_read(to_seq(s), idx);
}

static inline int seq_section_begin(struct ps_store *s)
{
	seq_read_lock(s);
	return 0;
}

static inline void seq_section_end(struct ps_store *s, int token)
{
	(void)token;
	seq_read_unlock(s);
}

static int seq_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	int token = seq_section_begin(s), ret;

	ret = _ps_policy_view_fill(seq_lookup_borrow(s, idx), view);
	seq_section_end(s, token);
	return ret;
}

static int seq_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	int token = seq_section_begin(s), node;

	node = _ps_policy_node(seq_lookup_borrow(s, idx), idx, local_node);
	seq_section_end(s, token);
	return node;
}

static struct ps_policy *seq_lookup(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	psi_memb_read_lock();
	/* Still in the section: the range, and its reference, outlive us. */
	pol = _ps_policy_get(seq_read(to_seq(s), idx));
	PSI_ANNOTATE_HAPPENS_BEFORE(s);
	psi_memb_read_unlock();
	return psi_lookup_result(pol);
}

/* A batch of retired ranges on its way through the memb reclaim thread. */
struct seq_batch {
	struct psi_reclaim_item item;
	struct psi_range_list list;
	struct psi_store_seq *store;
};

/* Bytes ps_store_memory() counts for retired ranges @list and their batch header (@hdr). */
static size_t seq_list_bytes(const struct psi_range_list *list, bool hdr)
{
	return list->n * psi_alloc_charge(sizeof(struct ps_range)) +
	       (hdr ? psi_alloc_charge(sizeof(struct seq_batch)) : 0);
}

static void seq_batch_free(struct psi_reclaim_item *item)
{
	struct seq_batch *b = psi_container_of(item, struct seq_batch, item);
	struct psi_store_seq *ss = b->store;
	size_t bytes = seq_list_bytes(&b->list, true);

	PSI_ANNOTATE_HAPPENS_AFTER(b); /* the writer filled @b before queueing it */
	/* A grace period has passed since the ranges were unlinked: readers let go. */
	PSI_ANNOTATE_HAPPENS_AFTER(&ss->base);
	psi_range_list_free(&b->list);
	psi_free(b);
	PSI_FETCH_SUB(ss->waiting, bytes, RELAXED);
	if (psi_unlikely(psi_reclaim_test_hook))
		psi_reclaim_test_hook();
	PSI_ANNOTATE_HAPPENS_BEFORE(&seq_batches_done);
	/* The last access to the store: destroy frees it once it reads 0 (acquire). */
	PSI_FETCH_SUB(ss->inflight, 1, RELEASE);
}

/*
 * Free @list once no reader can still hold one of its ranges, without
 * waiting if possible.  Without a batch header or a reclaim thread, a set
 * made outside every memb read-side section waits for a grace period and
 * frees @list itself; one made inside a section (a set never waits for
 * itself) gives @list back to the store's retired list, for a later set or
 * ps_store_synchronize().
 */
static void seq_reclaim(struct ps_store *s, struct psi_range_list *list)
{
	struct psi_store_seq *ss = to_seq(s);
	struct seq_batch *b;

	if (!list->head)
		return;
	b = psi_alloc(sizeof(*b));
	if (psi_likely(b)) {
		b->list = *list;
		b->store = ss;
		b->item.release = seq_batch_free;
		PSI_FETCH_ADD(ss->inflight, 1, RELAXED);
		PSI_FETCH_ADD(ss->waiting, psi_alloc_charge(sizeof(*b)), RELAXED);
		PSI_ANNOTATE_HAPPENS_BEFORE(b); /* our last touch of the batch: pairs with the free */
		if (!psi_reclaim_defer_weighed(psi_flavour_memb.reclaimer, &b->item,
				    sizeof(*b) + list->n * sizeof(struct ps_range)))
			return;
		PSI_FETCH_SUB(ss->waiting, psi_alloc_charge(sizeof(*b)), RELAXED);
		PSI_FETCH_SUB(ss->inflight, 1, RELAXED);
		psi_free(b);
	}
	if (urcu_memb_read_ongoing()) {
		psi_spin_lock(&ss->lock);
		psi_range_list_splice(&ss->retired, list);
		psi_spin_unlock(&ss->lock);
		return;
	}
	urcu_memb_synchronize_rcu();
	PSI_ANNOTATE_HAPPENS_AFTER(s);
	PSI_FETCH_SUB(ss->waiting, seq_list_bytes(list, false), RELAXED);
	psi_range_list_free(list);
}

static void seq_synchronize(struct ps_store *s)
{
	struct psi_store_seq *ss = to_seq(s);
	struct psi_range_list batch;

	psi_spin_lock(&ss->lock);
	batch = ss->retired;
	ss->retired = (struct psi_range_list){ NULL, 0, NULL };
	psi_spin_unlock(&ss->lock);
	if (batch.head) {
		urcu_memb_synchronize_rcu();
		PSI_ANNOTATE_HAPPENS_AFTER(s);
		PSI_FETCH_SUB(ss->waiting, seq_list_bytes(&batch, false), RELAXED);
		psi_range_list_free(&batch);
	}
	/* And the batches handed to the reclaim thread (by any memb store). */
	psi_reclaim_barrier(psi_flavour_memb.reclaimer);
	PSI_ANNOTATE_HAPPENS_AFTER(&seq_batches_done);
}

/*
 * A walk holds the writer lock, recorded as this thread's section
 * (held.h): a set, synchronize, check or walk of the store from a callback
 * returns -EDEADLK (store.c) instead of waiting for itself.
 */
static void seq_foreach_unlock(void *store)
{
	psi_held_pop(store);
	psi_spin_unlock(&to_seq(store)->lock);
}

static void seq_foreach_lock(struct ps_store *s)
{
	psi_spin_lock(&to_seq(s)->lock);
	psi_held_push(s);
}

psi_unwound_through static int seq_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	struct psi_store_seq *ss = to_seq(s);
	int ret;

	/* A walk cannot be retried once callbacks ran: hold the writer lock. */
	seq_foreach_lock(s);
	/* A callback may end its thread (pthread_exit(), cancellation): unlock then too. */
	pthread_cleanup_push(seq_foreach_unlock, s);
	ret = psi_rangetree_foreach(&ss->base.rd.tree, fn, arg);
	pthread_cleanup_pop(1);
	return ret;
}

static int seq_check(struct ps_store *s, const char **why)
{
	struct psi_store_seq *ss = to_seq(s);
	int ret;

	psi_spin_lock(&ss->lock);
	ret = psi_rangetree_check(&ss->base.rd.tree, why);
	if (!ret && (ss->base.rd.seq.seq & 1)) {
		*why = "sequence count odd outside a write section";
		ret = -EUCLEAN;
	}
	psi_spin_unlock(&ss->lock);
	return ret;
}

static struct psi_lstat *seq_lock_stat(struct ps_store *s)
{
	return psi_lstat_of(&to_seq(s)->lock.stat);
}

/* ---- windows, walks by position, batches ---- */

psi_unwound_through static int seq_foreach_range(struct ps_store *s, uint64_t start,
		uint64_t end, ps_foreach_fn fn, void *arg)
{
	struct psi_store_seq *ss = to_seq(s);
	int ret;

	/* As seq_foreach(): a walk that ran callbacks cannot be retried. */
	seq_foreach_lock(s);
	pthread_cleanup_push(seq_foreach_unlock, s);
	ret = psi_rangetree_foreach_range(&ss->base.rd.tree, start, end, fn, arg);
	pthread_cleanup_pop(1);
	return ret;
}

/* The fallback after PSI_SEQ_RETRIES failed tries, under the writer lock. */
static __attribute__((noinline, cold)) struct ps_range *seq_next_locked(
		struct psi_store_seq *ss, uint64_t idx, struct ps_range *out)
{
	struct ps_range *r;

	psi_spin_lock(&ss->lock);
	r = psi_rangetree_next(&ss->base.rd.tree, idx);
	if (r)
		*out = *r;
	psi_spin_unlock(&ss->lock);
	return r ? out : NULL;
}

/*
 * Inside a memb read-side section: the seek and the range's three fields,
 * validated together by the sequence count, so bounds and policy are one
 * state of the store (linearizable at the first count read, as seq_read()).
 * Returns @out filled in, or NULL when no range ends after @idx.
 */
static struct ps_range *seq_next_read(struct psi_store_seq *ss, uint64_t idx, struct ps_range *out)
{
	int tries;

	for (tries = 0; tries < PSI_SEQ_RETRIES; tries++) {
		unsigned start = psi_seq_read_begin(&ss->base.rd.seq);
		struct ps_range *r;

		if (start & 1) {
			psi_cpu_relax();
			continue;
		}
		/* A walk racing a writer by design, as in seq_read(). */
		PSI_ANNOTATE_IGNORE_READS_BEGIN();
		r = psi_rangetree_next(&ss->base.rd.tree, idx);
		if (r && r != PS_RTREE_OVERRUN) {
			out->start = PSI_READ_ONCE(r->start);
			out->end = PSI_READ_ONCE(r->end);
			out->pol = PSI_READ_ONCE(r->pol);
		}
		PSI_ANNOTATE_IGNORE_READS_END();
		if (!psi_seq_read_retry(&ss->base.rd.seq, start) && r != PS_RTREE_OVERRUN)
			return r ? out : NULL;
	}
	return seq_next_locked(ss, idx, out);
}

static int seq_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	struct ps_range buf, *r = seq_next_read(to_seq(s), idx, &buf);

	if (!r)
		return -ENOENT;
	*start = r->start;
	*end = r->end;
	*pol = r->pol;
	return 0;
}

static int seq_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	struct ps_range buf, *r;

	psi_memb_read_lock();
	r = seq_next_read(to_seq(s), idx, &buf);
	/* Still in the section: the range, and its reference, outlive us. */
	if (r)
		*pol = _ps_policy_get(r->pol);
	PSI_ANNOTATE_HAPPENS_BEFORE(s);
	psi_memb_read_unlock();
	if (!r)
		return -ENOENT;
	*start = r->start;
	*end = r->end;
	return 0;
}

/* Every op in one write section: a reader validates against all of the batch or none. */
static int seq_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	struct psi_store_seq *ss = to_seq(s);
	struct psi_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
	struct psi_range_list batch = { NULL, 0, NULL };
	size_t i, removed_bytes;

	if (n > (size_t)INT_MAX / PSI_RANGETREE_SET_MAX_NEW ||
			psi_range_list_fill(&spares, (int)(n * PSI_RANGETREE_SET_MAX_NEW)))
		return -ENOMEM;
	psi_spin_lock(&ss->lock);
	psi_seq_write_begin(&ss->base.rd.seq);
	for (i = 0; i < n; i++)
		psi_rangetree_set(&ss->base.rd.tree, ops[i].start, ops[i].end, ops[i].pol, &spares, &removed);
	psi_seq_write_end(&ss->base.rd.seq);
	/* Trims free nothing; removed ranges join the batch waiting for a grace period. */
	removed_bytes = seq_list_bytes(&removed, false);
	PSI_FETCH_ADD(ss->waiting, removed_bytes, RELAXED);
	psi_range_list_splice(&ss->retired, &removed);
	if (ss->retired.n >= PSI_SEQ_RETIRE_BATCH) {
		batch = ss->retired;
		ss->retired = (struct psi_range_list){ NULL, 0, NULL };
	}
	psi_spin_unlock(&ss->lock);
	seq_reclaim(s, &batch);
	psi_range_list_free(&spares);
	return 0;
}

/* A set is a batch of one (in place: no copies, the new range and a split tail at most). */
static int seq_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	const struct ps_set_op op = { .start = start, .end = end, .pol = pol };

	return seq_set_many(s, &op, 1);
}

/* Bytes besides the live ranges: retired ranges and batches waiting for a grace period. */
static size_t seq_held(struct ps_store *s)
{
	return PSI_READ_ONCE(to_seq(s)->waiting);
}

/* No walk holds the writer lock now, no batch is in flight (ps_store_destroy_deferred()). */
static bool seq_idle(struct ps_store *s)
{
	struct psi_store_seq *ss = to_seq(s);

	if (PSI_LOAD_ACQUIRE(ss->inflight) || !psi_spin_trylock(&ss->lock))
		return false;
	PSI_ANNOTATE_HAPPENS_AFTER(&ss->lock); /* pairs with the last unlock */
	psi_spin_release(&ss->lock);
	return true;
}

const struct ps_sync_ops psi_sync_seqlock_ops = {
	.create = seq_create,
	.destroy = seq_destroy,
	.lookup = seq_lookup,
	.read_lock = seq_read_lock,
	.read_unlock = seq_read_unlock,
	.lookup_borrow = seq_lookup_borrow,
	.lookup_copy = seq_lookup_copy,
	.lookup_node = seq_lookup_node,
	.set = seq_set,
	.synchronize = seq_synchronize,
	.foreach = seq_foreach,
	.check = seq_check,
	.lock_stat = seq_lock_stat,
	.foreach_range = seq_foreach_range,
	.next = seq_next,
	.next_borrow = seq_next_borrow,
	.set_many = seq_set_many,
	.idle = seq_idle,
	.held = seq_held,
};
