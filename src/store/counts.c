// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Access counts (polstore/counts.h, docs/runtime.md).
 *
 * A store that counts has one struct _ps_counts, allocated by the first
 * ps_store_counts_enable() and freed by the destroy.  Each thread that
 * counts an access to it owns a shard: a hash table keyed by the first
 * page of the range the access fell in, which only that thread writes
 * (plain stores through PSI_WRITE_ONCE: nothing another CPU writes is
 * touched by a count).  A read takes the store's @lock and folds every
 * shard with loads; a shard's table is replaced (it grows) only under
 * @lock, and freed with it held, so a read never meets a freed table.
 *
 * The thread's way to its shard and to the slot of the range it counted
 * last is a small cache in initial-exec TLS: an entry names the counts
 * (pointer and serial: a new store at a freed one's address has another
 * serial), the store's generation it was filled at (ps_store_generation():
 * any set since refills it) and the range.  A hit is one compare of the
 * range and an increment of the slot.  Before it, the range counted last
 * (counts_last) takes a repeated key with three compares and no search:
 * the fault path's case, where counting must cost about an increment.
 * In an RCU store the thread's lookup cache entry (polstore/static/
 * lcache.h) names the slot of its range too, with the stamp it is good
 * for: a counted lookup the entry answers increments that slot in its
 * section (ix_lookup_node_count()); a table's growth and the thread's
 * exit forget every entry's slot (lc_forget_counts()).  A lookup that
 * refilled the entry (its miss cleared the stamp a counted lookup set to
 * PS_LC_UNFILLED before it) counts in the slot of the entry's range with
 * one probe of the thread's table (counts_note_entry()); a thread's
 * shard has its table from its start, its slots a cache line each.  A
 * count loads the store's @counting, NULL while counting is off.  A
 * slot's decayed rate is brought to an epoch by its first count of it
 * (slot_add()); a read adds the counts since (psi_counts_slot_read()).
 *
 * A thread's exit folds its shards into the store's @retired table (the
 * destructor of counts_key): those in its cache, and past COUNTS_TLS
 * stores the ones it forgot, found in every counting store; a program that
 * starts threads by the thousand keeps one table per live thread.
 * counts_lock keeps the process's counting stores: the exit and a destroy
 * take it first; the fork handlers hold it and every @lock and @tick_lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/counts.h>
#include <polstore/store.h>
#include <polstore/static/lookup.h>
#include <polstore/static/policy.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "compiler.h"
#include "counts_internal.h"
#include "counts_shard.h"
#include "held.h"
#include "read_inline.h"
#include "seqcount.h"
#include "store_internal.h"
#include "testpoint.h"
#include "variants.h"

#define COUNTS_TLS 4		/* stores a thread finds its shard of at once */
#define COUNTS_MIN_SLOTS 16

/* Tries a read makes of a slot its owner is changing (100 us apart): then it takes what it read. */
#define COUNTS_SLOT_TRIES 1000

struct ctls {
	struct _ps_counts *c;
	uint64_t serial;
	struct psi_cshard *sh;
};

static __thread struct ctls counts_tls[COUNTS_TLS] __attribute__((tls_model("initial-exec")));
static __thread unsigned counts_tls_next __attribute__((tls_model("initial-exec")));
/* No counts' entry: serial 0, which no counts has. */
static const struct ctls counts_tls_none;
/* The entry of counts_tls shard_get() found or made last (counts_tls_none: none). */
static __thread const struct ctls *counts_tls_hit __attribute__((tls_model("initial-exec"))) =
		&counts_tls_none;

/*
 * The range this thread counted last, at the store's generation @gen: its
 * slot in the thread's own shard of the counts whose @stamp it was (no
 * other counts had it; a tick gives a new one, and the search brings the
 * slot to the new epoch).  Valid while @gen is the store's and the slot's
 * table the shard's: a table is replaced only by its owner's
 * counts_note_slow(), which then refills this, and freed only with the
 * shard (the owner's exit clears this; a destroy ends the stamp).
 */
struct clast {
	uint64_t stamp; /* 0: none */
	uint64_t gen;
	uint64_t start, len;
	struct psi_cslot *slot;
};

static __thread struct clast counts_last __attribute__((tls_model("initial-exec")));

static pthread_mutex_t counts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct _ps_counts *counts_all; /* under counts_lock */
static uint64_t counts_serial;	      /* under counts_lock */
static uint64_t counts_stamps;	      /* atomic: the last stamp given */
static pthread_key_t counts_key;
static bool counts_key_ok;
static pthread_once_t counts_once = PTHREAD_ONCE_INIT;

static void counts_fork_prepare(void)
{
	struct _ps_counts *c;

	pthread_mutex_lock(&counts_lock);
	for (c = counts_all; c; c = c->next) {
		pthread_mutex_lock(&c->lock);
		pthread_mutex_lock(&c->tick_lock);
	}
}

static void counts_fork_release(void)
{
	struct _ps_counts *c;

	for (c = counts_all; c; c = c->next) {
		pthread_mutex_unlock(&c->tick_lock);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&counts_lock);
}

static void counts_thread_exit(void *arg);

static void counts_init_once(void)
{
	counts_key_ok = !pthread_key_create(&counts_key, counts_thread_exit) &&
			!pthread_atfork(counts_fork_prepare, counts_fork_release,
					counts_fork_release);
}

/* ---- a shard's table ---------------------------------------------------------- */

static struct psi_cslot *slots_new(size_t n)
{
	struct psi_cslot *t = psi_zalloc_aligned(n * sizeof(*t));
	size_t i;

	if (t) {
		for (i = 0; i < n; i++)
			t[i].start = PSI_COUNTS_EMPTY;
		/* Its owner's stores and a fold's loads, atomics only; keys published: slot_find(). */
		PSI_ANNOTATE_BENIGN_RACE_SIZED(t, n * sizeof(*t));
	}
	return t;
}

static size_t slot_hash(uint64_t start, size_t mask)
{
	return (size_t)((start * 0x9e3779b97f4a7c15ULL) >> 17) & mask;
}

/* The slot of @start in @t, or the free one where it would go. */
static struct psi_cslot *slot_find(struct psi_cslot *t, size_t mask, uint64_t start)
{
	size_t i = slot_hash(start, mask);

	while (t[i].start != start && t[i].start != PSI_COUNTS_EMPTY)
		i = (i + 1) & mask;
	return &t[i];
}

/*
 * A read of @sl: its count, and its rate at its epoch with the counts
 * since @rated in.  The owner changes the rate, the epoch and @rated
 * together inside @seq (slot_advance()); a count alone moves nothing
 * the rate is computed from but the count itself.  A read that meets a
 * change tries again, for 100 ms at most: a fork child may
 * hold a slot its parent's thread was changing, which no thread will
 * finish, and a read there takes what it found.
 */
uint64_t psi_counts_slot_read(const struct psi_cslot *sl, uint64_t *count, uint64_t *epoch)
{
	uint64_t rate, rated;
	unsigned seq, tries = 0;

	for (;;) {
		seq = psi_seq_read_begin(&sl->seq);
		rate = PSI_READ_ONCE(sl->rate);
		rated = PSI_READ_ONCE(sl->rated);
		*epoch = PSI_READ_ONCE(sl->epoch);
		*count = PSI_READ_ONCE(sl->count);
		if (!psi_seq_read_retry(&sl->seq, seq) || ++tries == COUNTS_SLOT_TRIES)
			break;
		usleep(100);
	}
	return rate + (*count > rated ? *count - rated : 0) * PSI_COUNTS_RATE_ONE;
}

/* The owner, or a fold under @lock: bring @sl's rate to @epoch, a later one. */
static void slot_advance(struct psi_cslot *sl, uint64_t epoch)
{
	uint64_t count = sl->count, from = sl->epoch;
	uint64_t rate = psi_counts_rate_at(sl->rate + (count - sl->rated) * PSI_COUNTS_RATE_ONE, from, epoch);

	psi_seq_write_begin(&sl->seq);
	PSI_WRITE_ONCE(sl->epoch, epoch);
	PSI_TEST_POINT(PSI_TP_COUNTS_SLOT_ADVANCE);
	PSI_WRITE_ONCE(sl->rated, count);
	PSI_WRITE_ONCE(sl->rate, rate);
	psi_seq_write_end(&sl->seq);
}

/* The owner: count one access of @epoch in @sl. */
static inline void slot_add(struct psi_cslot *sl, uint64_t epoch)
{
	if (psi_unlikely(epoch > sl->epoch))
		slot_advance(sl, epoch);
	PSI_WRITE_ONCE(sl->count, sl->count + 1);
}

/* A fold under @lock: add @count accesses whose rate was @rate at @epoch to @sl. */
static void slot_merge(struct psi_cslot *sl, uint64_t count, uint64_t rate, uint64_t epoch)
{
	if (epoch > sl->epoch)
		slot_advance(sl, epoch);
	else
		rate = psi_counts_rate_at(rate, epoch, sl->epoch);
	/* Counted in the rate already: @rated moves with @count. */
	psi_seq_write_begin(&sl->seq);
	PSI_WRITE_ONCE(sl->rated, sl->rated + count);
	PSI_WRITE_ONCE(sl->rate, sl->rate + rate);
	PSI_WRITE_ONCE(sl->count, sl->count + count);
	psi_seq_write_end(&sl->seq);
}

/*
 * The owner's slots moved (a table grew) or go (the thread exits): no
 * entry of the thread's lookup cache counts into them any more.
 */
static void lc_forget_counts(void)
{
	unsigned i;

	for (i = 0; i < PS_LC_WAYS; i++)
		_ps_lc_tls.e[i].cstamp = 0;
}

/*
 * The slot of [@start, @end) in @sh, inserted if new; NULL when the table
 * must grow and cannot.  The owner, or a fold under @lock (@c's retired).
 */
static struct psi_cslot *shard_slot(struct _ps_counts *c, struct psi_cshard *sh, uint64_t start,
		uint64_t end, bool owner)
{
	struct psi_cslot *sl, *t, *old;
	size_t i, n;

	if (!sh->slots || 4 * (sh->used + 1) > 3 * (sh->mask + 1)) {
		n = sh->slots ? 2 * (sh->mask + 1) : COUNTS_MIN_SLOTS;
		t = slots_new(n);
		if (!t)
			return NULL;
		for (i = 0; sh->slots && i <= sh->mask; i++)
			if (sh->slots[i].start != PSI_COUNTS_EMPTY)
				*slot_find(t, n - 1, sh->slots[i].start) = sh->slots[i];
		if (owner)
			pthread_mutex_lock(&c->lock);
		old = sh->slots;
		PSI_WRITE_ONCE(sh->slots, t);
		sh->mask = n - 1;
		if (owner)
			pthread_mutex_unlock(&c->lock);
		psi_free_aligned(old);
		sh->nranges = 0; /* their slots were the old table's */
		if (owner)
			lc_forget_counts(); /* and so were the lookup cache's */
	}
	sl = slot_find(sh->slots, sh->mask, start);
	if (sl->start == PSI_COUNTS_EMPTY) {
		sl->end = end;
		sl->count = 0;
		sl->rate = 0;
		sl->epoch = 0;
		sl->rated = 0;
		sl->seq.seq = 0;
		/* Pairs with the fold's acquire: the slot's fields before its key. */
		PSI_ANNOTATE_HAPPENS_BEFORE(&sl->start);
		PSI_STORE_RELEASE(sl->start, start);
		sh->used++;
	} else if (end > PSI_READ_ONCE(sl->end)) {
		PSI_WRITE_ONCE(sl->end, end);
	}
	return sl;
}

/* ---- counting ---------------------------------------------------------------------- */

/* This thread's shard of @c: from the cache, adopted, or new; NULL without memory. */
static struct psi_cshard *shard_get(struct _ps_counts *c, struct ctls **entry)
{
	struct ctls *e = NULL;
	struct psi_cshard *sh, *o;
	pthread_t self;
	unsigned i;

	for (i = 0; i < COUNTS_TLS; i++)
		if (counts_tls[i].c == c && counts_tls[i].serial == c->serial) {
			counts_tls_hit = *entry = &counts_tls[i];
			return counts_tls[i].sh;
		}
	self = pthread_self();
	pthread_mutex_lock(&c->lock);
	/* One this thread made and the cache forgot, else one a thread left at its exit. */
	for (sh = c->shards; sh; sh = sh->next)
		if (!sh->orphan && pthread_equal(sh->owner, self))
			break;
	for (o = c->shards; !sh && o; o = o->next)
		if (o->orphan)
			sh = o;
	if (!sh) {
		sh = psi_zalloc(sizeof(*sh));
		/* With its table: a thread's shard always has one (counts_note_entry()). */
		if (sh && !(sh->slots = slots_new(COUNTS_MIN_SLOTS))) {
			psi_free(sh);
			sh = NULL;
		}
		if (sh) {
			sh->mask = COUNTS_MIN_SLOTS - 1;
			PSI_ANNOTATE_BENIGN_RACE_SIZED(&sh->gaps, sizeof(sh->gaps)); /* atomics only */
			PSI_ANNOTATE_BENIGN_RACE_SIZED(&sh->lost, sizeof(sh->lost)); /* atomics only */
			sh->next = c->shards;
			c->shards = sh;
		}
	}
	if (sh) {
		sh->owner = self;
		sh->orphan = false;
	}
	pthread_mutex_unlock(&c->lock);
	if (!sh)
		return NULL;
	if (counts_key_ok)
		(void)pthread_setspecific(counts_key, counts_tls);
	e = &counts_tls[counts_tls_next++ % COUNTS_TLS];
	*e = (struct ctls){ .c = c, .serial = c->serial, .sh = sh };
	counts_tls_hit = *entry = e;
	return sh;
}

/* The first of @sh's cached ranges that ends after @idx (@sh->nranges: none). */
static unsigned range_find(const struct psi_cshard *sh, uint64_t idx)
{
	unsigned lo = 0, hi = sh->nranges;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (sh->ranges[mid].end <= idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Count an access in @sl at @c's epoch, and remember [@start, @end) of
 * generation @gen as this thread's last range, with the stamp of that
 * epoch: the stamp first, so that a tick between the two loads leaves an
 * older stamp, which the next count finds changed.
 */
static inline __attribute__((always_inline)) void last_count(const struct _ps_counts *c,
		uint64_t gen, uint64_t start, uint64_t end, struct psi_cslot *sl)
{
	uint64_t stamp = PSI_LOAD_ACQUIRE(c->stamp);

	slot_add(sl, PSI_READ_ONCE(c->epoch));
	counts_last = (struct clast){ stamp, gen, start, end - start, sl };
}

/* Count an access of @idx of @s in @sh, whose cache does not hold its range. */
static void counts_note_slow(struct ps_store *s, struct _ps_counts *c, struct psi_cshard *sh,
		uint64_t idx, unsigned at, uint64_t gen)
{
	const struct ps_policy *pol;
	uint64_t start, end;
	struct psi_cslot *sl;
	int err;

	/* Borrowed, in a section: a reference would write the policy's count. */
	s->read_lock(s);
	err = s->ops->next_borrow(s, idx, &start, &end, &pol);
	s->read_unlock(s);
	if (err || start > idx) {
		PSI_WRITE_ONCE(sh->gaps, sh->gaps + 1);
		return;
	}
	sl = shard_slot(c, sh, start, end, true);
	if (!sl) {
		PSI_WRITE_ONCE(sh->lost, sh->lost + 1);
		return;
	}
	if (!sh->nranges)
		at = 0; /* a grow emptied the cache */
	if (sh->nranges == PSI_COUNTS_CACHE)
		sh->nranges = at = 0; /* full: start again */
	memmove(&sh->ranges[at + 1], &sh->ranges[at], (sh->nranges - at) * sizeof(sh->ranges[0]));
	sh->ranges[at] = (struct psi_crange){ start, end, sl };
	sh->nranges++;
	last_count(c, gen, start, end, sl);
}

/*
 * RCU, RCU_QSBR: whether lookup cache entry @e (polstore/static/lcache.h)
 * is @s's, filled at generation @gen, and holds @idx: then its bounds are
 * those of the range holding @idx, what a lookup just found, with no
 * second search (other variants' id is 0, an empty entry's too, but an
 * empty entry holds no key).
 */
static inline bool lc_holds(const struct ps_store *s, const struct _ps_lc_entry *e, uint64_t idx,
		uint64_t gen)
{
	return e->id == PSI_READ_ONCE(s->lc.id) && e->gen == gen && idx - e->start < e->len;
}

/* Let lookup cache entry @e count its range's next accesses in @sl, at @stamp. */
static inline void lc_arm(struct _ps_lc_entry *e, struct psi_cslot *sl, uint64_t stamp)
{
	e->ccount = &sl->count;
	e->cstamp = stamp;
}

/* As lc_holds(), for the calling thread's entry of @s: the entry and its bounds, or NULL. */
static struct _ps_lc_entry *lc_bounds(const struct ps_store *s, uint64_t idx, uint64_t gen,
		uint64_t *start, uint64_t *end)
{
	struct _ps_lc_entry *e = _ps_lc_way(s);

	if (!lc_holds(s, e, idx, gen))
		return NULL;
	*start = e->start;
	*end = e->start + e->len;
	return e;
}

/* The owner: the slot of [@start, @end) in @sh, inserted if new; NULL as shard_slot(). */
static struct psi_cslot *range_slot(struct _ps_counts *c, struct psi_cshard *sh, uint64_t start,
		uint64_t end)
{
	struct psi_cslot *sl;

	if (sh->slots) {
		sl = slot_find(sh->slots, sh->mask, start);
		if (sl->start == start) {
			if (end > sl->end)
				PSI_WRITE_ONCE(sl->end, end);
			return sl;
		}
	}
	return shard_slot(c, sh, start, end, true);
}

/* As counts_note(), for a key that is not in this thread's last range of @c at @gen. */
static __attribute__((noinline)) void counts_note_search(struct ps_store *s, struct _ps_counts *c,
		uint64_t idx, uint64_t gen)
{
	struct psi_cshard *sh;
	uint64_t start, end;
	struct _ps_lc_entry *le;
	struct psi_cslot *sl;
	struct ctls *e;
	unsigned i;

	sh = shard_get(c, &e);
	if (!sh)
		return; /* no memory: the access goes uncounted, as with counting off */
	/*
	 * The range the lookup just found, when the thread's lookup cache
	 * holds it; the entry then counts the next accesses of the range
	 * itself, at this stamp (ps_store_lookup_node_count()).
	 */
	if ((le = lc_bounds(s, idx, gen, &start, &end))) {
		sl = range_slot(c, sh, start, end);
		if (!sl) {
			PSI_WRITE_ONCE(sh->lost, sh->lost + 1);
			return;
		}
		last_count(c, gen, start, end, sl);
		lc_arm(le, sl, counts_last.stamp);
		return;
	}
	if (psi_unlikely(sh->gen != gen)) {
		sh->gen = gen;
		sh->nranges = 0;
	}
	/* The range counted last, then a search of the others. */
	i = sh->last < sh->nranges && idx - sh->ranges[sh->last].start <
			sh->ranges[sh->last].end - sh->ranges[sh->last].start ? sh->last
									: range_find(sh, idx);
	if (i < sh->nranges && sh->ranges[i].start <= idx) {
		sh->last = i;
		last_count(c, gen, sh->ranges[i].start, sh->ranges[i].end, sh->ranges[i].slot);
	} else {
		counts_note_slow(s, c, sh, idx, i, gen);
	}
}

/* Count an access of page @idx of @s, whose counts @c are on. */
static inline __attribute__((always_inline)) void counts_note(struct ps_store *s,
		struct _ps_counts *c, uint64_t idx)
{
	/* First: a set after it changes the generation, and the next count looks again. */
	uint64_t gen = PSI_LOAD_ACQUIRE(s->rd.gen);
	const struct clast *l = &counts_last;

	/* The slot was brought to this epoch: a count is an increment. */
	if (psi_likely(l->stamp == PSI_LOAD_ACQUIRE(c->stamp) && l->gen == gen &&
			idx - l->start < l->len))
		PSI_WRITE_ONCE(l->slot->count, l->slot->count + 1);
	else
		counts_note_search(s, c, idx, gen);
}

/* counts_note(), out of line: what a count the lookup cache could not take costs. */
static __attribute__((noinline)) void counts_note_out(struct ps_store *s, struct _ps_counts *c,
		uint64_t idx)
{
	counts_note(s, c, idx);
}

/*
 * RCU, RCU_QSBR, after a lookup that refilled the thread's lookup cache
 * entry @e for @s with the range holding @idx (a miss), or found its
 * counter stale (a tick): count in the slot of the entry's range in the
 * thread's shard, which the shard found last holds, and let the entry
 * count the next accesses itself.  The range is the one the lookup found:
 * a count after its section lands in that range even when a set changed
 * it since (polstore/counts.h allows the range as it was).  A signal
 * handler's lookup on the thread may refill @e meanwhile: then this count
 * may land in the handler's range, and the entry is never left counting
 * into a slot not of its range (the check after lc_arm()).  Anything else
 * (no such entry, another shard, a new slot, a range that grew, a new
 * epoch) is counts_note()'s.
 */
static inline __attribute__((always_inline)) void counts_note_entry(struct ps_store *s, struct _ps_counts *c,
		uint64_t idx, struct _ps_lc_entry *e)
{
	const struct ctls *t = counts_tls_hit;
	uint64_t stamp, start, end;
	struct psi_cslot *sl;
	size_t i, mask;

	/* Serials are unique in the process: the entry is @c's (its shard has a table). */
	if (psi_unlikely(!e || t->serial != c->serial))
		goto search;
	start = e->start;
	end = start + e->len;
	sl = t->sh->slots;
	mask = t->sh->mask;
	/* slot_find(), stopping at the free slot where the range would go. */
	for (i = slot_hash(start, mask); sl[i].start != start; i = (i + 1) & mask)
		if (sl[i].start == PSI_COUNTS_EMPTY)
			goto search;
	sl += i;
	/* The stamp first: a tick between it and the epoch leaves the entry an older one. */
	stamp = PSI_LOAD_ACQUIRE(c->stamp);
	if (psi_unlikely(end > sl->end || PSI_READ_ONCE(c->epoch) != sl->epoch))
		goto search;
	PSI_WRITE_ONCE(sl->count, sl->count + 1);
	lc_arm(e, sl, stamp);
	/* A handler's fill before the arming: its range is another's, whose slot this is not. */
	PSI_SIGNAL_FENCE(SEQ_CST);
	if (psi_unlikely(e->start != start))
		e->cstamp = 0;
	return;
search:
	counts_note_out(s, c, idx);
}

/*
 * RCU, RCU_QSBR, inside the section the inline read side opened
 * (polstore/static/lookup.h; @memb: a memb one, which this closes): the
 * lookup with its count.  When the thread's lookup cache answered and its
 * entry's stamp is the counts' (the slot was brought to this epoch for
 * that very range: counts_note_search()), the count is an increment of
 * the slot the entry names, inside the section; else counts_note_entry()
 * after, with the entry that answered or the one the miss filled.
 */
static inline __attribute__((always_inline)) int ix_lookup_node_count(struct ps_store *store,
		uint64_t idx, int local_node, bool memb)
{
	struct _ps_lc_entry *e, *way;
	struct ps_policy *pol;
	struct _ps_counts *c;
	int hint, node;
	uint64_t gen;

	e = _ps_lc_hit(store, idx, &pol, &hint, &gen);
	if (psi_likely(e != NULL)) {
		node = _ps_policy_node_hinted(hint, pol, idx, local_node);
		c = PSI_LOAD_ACQUIRE(store->counting);
		if (psi_likely(c && e->cstamp == PSI_LOAD_ACQUIRE(c->stamp))) {
			PSI_WRITE_ONCE(*e->ccount, *e->ccount + 1);
			c = NULL;
		}
		way = e;
	} else {
		int miss_hint = _PS_HINT_LOCAL; /* only this one's address goes to the miss */
		uint64_t cstamp;

		/*
		 * A fill clears the stamp: then the entry holds the range found.
		 * Else the entry is as it was, its stamp too.
		 */
		way = _ps_lc_way(store);
		cstamp = way->cstamp;
		way->cstamp = PS_LC_UNFILLED;
		pol = _ps_lc_miss(store, PSI_LOAD_ACQUIRE(store->ix.node), idx, &miss_hint, gen);
		/* Found again rather than kept across the call: a register fewer to save. */
		way = _ps_lc_way(store);
		if (way->cstamp) {
			way->cstamp = cstamp;
			way = NULL;
		}
		node = _ps_policy_node_hinted(miss_hint, pol, idx, local_node);
		c = PSI_LOAD_ACQUIRE(store->counting);
	}
	if (memb)
		_urcu_memb_read_unlock();
	if (c)
		counts_note_entry(store, c, idx, way);
	return node;
}

/* The inline read side's lookup, then the count (counts_note()). */
static int lookup_node_then_count(struct ps_store *store, uint64_t idx, int local_node)
{
	struct _ps_counts *c;
	int node;

	node = PSI_READ_INLINE ? _ps_inl_lookup_node(store, idx, local_node)
			       : store->lookup_node(store, idx, local_node);
	if ((c = PSI_LOAD_ACQUIRE(store->counting)))
		counts_note(store, c, idx);
	return node;
}

int ps_store_lookup_node_count(struct ps_store *store, uint64_t idx, int local_node)
{
	if (psi_unlikely(!store || _ps_node_check(local_node)))
		return -EINVAL;
	if (PSI_READ_INLINE) {
		switch (store->tag) {
		case _PS_STORE_TAG(PS_SYNC_RCU):
			if (psi_likely(_ps_inl_memb_enter()))
				return ix_lookup_node_count(store, idx, local_node, true);
			break;
		case _PS_STORE_TAG(PS_SYNC_RCU_QSBR):
			if (psi_likely(_urcu_qsbr_read_ongoing()))
				return ix_lookup_node_count(store, idx, local_node, false);
			break;
		default:
			break;
		}
	}
	return lookup_node_then_count(store, idx, local_node);
}

int ps_store_count_access(struct ps_store *store, uint64_t idx)
{
	struct _ps_counts *c;

	if (!store)
		return -EINVAL;
	if ((c = PSI_LOAD_ACQUIRE(store->counting)))
		counts_note(store, c, idx);
	return 0;
}

int psi_counts_check(struct ps_store *s, const char **why)
{
	struct _ps_counts *c = PSI_LOAD_ACQUIRE(s->counts);
	const struct _ps_lc_entry *e = _ps_lc_way(s);
	pthread_t self = pthread_self();
	struct psi_cslot *sl = NULL;
	struct psi_cshard *sh;

	if (!c || e->id != PSI_READ_ONCE(s->lc.id) || e->cstamp != PSI_LOAD_ACQUIRE(c->stamp))
		return 0; /* the thread's entry for @s counts nothing now */
	pthread_mutex_lock(&c->lock);
	for (sh = c->shards; sh; sh = sh->next)
		if (!sh->orphan && pthread_equal(sh->owner, self))
			break;
	if (sh && sh->slots)
		sl = slot_find(sh->slots, sh->mask, e->start);
	if (!sl || sl->start != e->start || e->ccount != &sl->count)
		sl = NULL;
	pthread_mutex_unlock(&c->lock);
	if (!sl) {
		*why = "counts: a lookup cache entry counts into no slot of its range in the thread's table";
		return -EUCLEAN;
	}
	return 0;
}

/* ---- turning on and off, ticks, ends -------------------------------------------- */

int ps_store_counts_enable(struct ps_store *store, bool on)
{
	struct _ps_counts *c;

	if (!store)
		return -EINVAL;
	pthread_once(&counts_once, counts_init_once);
	pthread_mutex_lock(&counts_lock);
	c = store->counts;
	if (!c && on) {
		c = psi_zalloc(sizeof(*c));
		if (!c) {
			pthread_mutex_unlock(&counts_lock);
			return -ENOMEM;
		}
		pthread_mutex_init(&c->lock, NULL);
		pthread_mutex_init(&c->tick_lock, NULL);
		c->serial = ++counts_serial;
		c->stamp = PSI_ADD_FETCH(counts_stamps, 1, RELAXED);
		c->epoch = 1;
		c->store = store;
		c->next = counts_all;
		counts_all = c;
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->stamp, sizeof(c->stamp)); /* atomics only */
		PSI_ANNOTATE_BENIGN_RACE_SIZED(&c->epoch, sizeof(c->epoch)); /* atomics only */
		/* Pairs with the counting threads' acquire: @c is initialised. */
		PSI_ANNOTATE_HAPPENS_BEFORE(&store->counts);
		PSI_STORE_RELEASE(store->counts, c);
	}
	if (c) {
		PSI_ANNOTATE_HAPPENS_BEFORE(&store->counting);
		PSI_STORE_RELEASE(store->counting, on ? c : NULL);
	}
	pthread_mutex_unlock(&counts_lock);
	return 0;
}

uint64_t ps_store_counts_tick(struct ps_store *store)
{
	struct _ps_counts *c = store ? PSI_LOAD_ACQUIRE(store->counts) : NULL;
	uint64_t epoch;

	if (!c)
		return 0;
	/*
	 * Ticks one at a time, each stamp after its epoch: a count that
	 * loads a stamp then loads its epoch, whichever tick stored it last
	 * (two at once could leave the last stamp before the last epoch).
	 */
	pthread_mutex_lock(&c->tick_lock);
	epoch = PSI_ADD_FETCH(c->epoch, 1, RELAXED);
	PSI_STORE_RELEASE(c->stamp, PSI_ADD_FETCH(counts_stamps, 1, RELAXED));
	pthread_mutex_unlock(&c->tick_lock);
	return epoch;
}

/* ---- accesses fed from outside --------------------------------------------------- */

/* Whether @sl takes @total more accesses, their rate too, without wrapping. */
static bool feed_fits(const struct psi_cslot *sl, uint64_t total)
{
	return sl->count <= UINT64_MAX - total &&
	       sl->rate <= UINT64_MAX - total * PSI_COUNTS_RATE_ONE;
}

int psi_counts_add_retired(struct _ps_counts *c, const struct psi_counts_add *a, size_t n,
		uint64_t total, uint64_t gaps)
{
	struct psi_cslot *sl;
	size_t i;
	int err = 0;

	/*
	 * Every counter first, so that a table that cannot grow, or a counter
	 * that could not take them, leaves no access counted (a counter of
	 * none is no figure: folds skip it), then the accesses.
	 */
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n && !err; i++) {
		sl = shard_slot(c, &c->retired, a[i].start, a[i].end, false);
		if (!sl)
			err = -ENOMEM;
		else if (!feed_fits(sl, total))
			err = -EOVERFLOW;
	}
	for (i = 0; i < n && !err; i++) {
		sl = slot_find(c->retired.slots, c->retired.mask, a[i].start);
		slot_merge(sl, a[i].count, a[i].count * PSI_COUNTS_RATE_ONE, PSI_READ_ONCE(c->epoch));
	}
	if (!err)
		c->retired.gaps += gaps;
	pthread_mutex_unlock(&c->lock);
	return err;
}

static void shard_free(struct psi_cshard *sh)
{
	psi_free_aligned(sh->slots);
	psi_free(sh);
}

void psi_counts_end(struct ps_store *s)
{
	struct _ps_counts *c = s->counts, **pp;
	struct psi_cshard *sh;

	if (!c)
		return;
	pthread_mutex_lock(&counts_lock);
	for (pp = &counts_all; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	pthread_mutex_unlock(&counts_lock);
	while ((sh = c->shards)) {
		c->shards = sh->next;
		shard_free(sh);
	}
	psi_free_aligned(c->retired.slots);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->tick_lock);
	s->counting = NULL;
	s->counts = NULL;
	psi_free(c);
}

/* Under @c's @lock: add @sh's counts to @c's retired table; false when it cannot grow. */
static bool shard_fold(struct _ps_counts *c, struct psi_cshard *sh)
{
	struct psi_cslot *sl, *to;
	uint64_t rate, epoch, count;
	size_t i;

	for (i = 0; sh->slots && i <= sh->mask; i++) {
		sl = &sh->slots[i];
		if (sl->start == PSI_COUNTS_EMPTY || !sl->count)
			continue;
		to = shard_slot(c, &c->retired, sl->start, sl->end, false);
		if (!to)
			return false;
		rate = psi_counts_slot_read(sl, &count, &epoch);
		slot_merge(to, count, rate, epoch);
		sl->count = 0;
		sl->rate = 0;
		sl->rated = 0;
	}
	c->retired.gaps += sh->gaps;
	c->retired.lost += sh->lost;
	sh->gaps = sh->lost = 0;
	return true;
}

/*
 * Under counts_lock and @c's @lock: the exiting thread's shard *@pp goes
 * into @c's retired table and is freed (true), or stays, an orphan the
 * next thread to count takes, when the table cannot grow (false).
 */
static bool shard_leave(struct _ps_counts *c, struct psi_cshard **pp)
{
	struct psi_cshard *sh = *pp;

	if (!shard_fold(c, sh)) {
		sh->orphan = true;
		return false;
	}
	*pp = sh->next;
	shard_free(sh);
	return true;
}

/* The exiting thread's shards go into their stores' retired tables (or stay, orphans). */
static void counts_thread_exit(void *arg)
{
	struct ctls *tls = arg;
	struct _ps_counts *c, *x;
	struct psi_cshard **pp;
	unsigned i;

	pthread_mutex_lock(&counts_lock);
	for (i = 0; i < COUNTS_TLS; i++) {
		c = tls[i].c;
		for (x = counts_all; x && x != c; x = x->next)
			;
		/* A store destroyed since, or another at its address: the shard went with it. */
		if (!x || x->serial != tls[i].serial)
			continue;
		pthread_mutex_lock(&c->lock);
		for (pp = &c->shards; *pp && *pp != tls[i].sh; pp = &(*pp)->next)
			;
		if (*pp)
			shard_leave(c, pp);
		pthread_mutex_unlock(&c->lock);
	}
	/*
	 * Past COUNTS_TLS counts the cache forgot some of this thread's
	 * shards: every counting store's list is looked through for them.
	 */
	if (counts_tls_next > COUNTS_TLS) {
		pthread_t self = pthread_self();

		for (c = counts_all; c; c = c->next) {
			pthread_mutex_lock(&c->lock);
			for (pp = &c->shards; *pp;) {
				struct psi_cshard *sh = *pp;

				if (sh->orphan || !pthread_equal(sh->owner, self) || !shard_leave(c, pp))
					pp = &sh->next;
			}
			pthread_mutex_unlock(&c->lock);
		}
	}
	pthread_mutex_unlock(&counts_lock);
	memset(tls, 0, sizeof(counts_tls));
	counts_tls_next = 0;
	counts_tls_hit = &counts_tls_none;
	memset(&counts_last, 0, sizeof(counts_last)); /* the exiting thread's own */
	lc_forget_counts();
}
