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
 * the fault path's case, where counting must cost about an increment.  A
 * count loads the store's @counting, NULL while counting is off.  A
 * slot's decayed rate is brought to an epoch by its first count of it
 * (slot_add()); a read adds the counts since (slot_read()).
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
#include "held.h"
#include "read_inline.h"
#include "seqcount.h"
#include "store_internal.h"
#include "testpoint.h"
#include "variants.h"

#define COUNTS_EMPTY UINT64_MAX /* no range starts there: a free slot */
#define COUNTS_TLS 4		/* stores a thread finds its shard of at once */
#define COUNTS_CACHE 64		/* ranges a shard finds the slot of at once */
#define COUNTS_MIN_SLOTS 16
#define RATE_ONE 1024 /* a count in the rate's fixed point */

struct cslot {
	uint64_t start; /* the key: COUNTS_EMPTY or a range's first page */
	uint64_t end;
	uint64_t count;
	uint64_t rate; /* RATE_ONE a count up to @base, halved each epoch since @epoch */
	uint64_t epoch; /* the epoch of the last count */
	uint64_t base; /* @count when @rate was last brought to @epoch */
	struct ps_seqcount seq; /* around a change of @rate, @epoch and @base */
};

/* Tries a read makes of a slot its owner is changing (100 us apart): then it takes what it read. */
#define COUNTS_SLOT_TRIES 1000

/* A range the owner counted since the store's generation @gen of its shard. */
struct crange {
	uint64_t start, end;
	struct cslot *slot;
};

struct cshard {
	struct cslot *slots; /* the owner's; replaced under the store's @lock */
	size_t mask;
	size_t used;	/* the owner's */
	/* The owner's: the ranges it counted at generation @gen, sorted by @start. */
	uint64_t gen;
	unsigned nranges, last;
	struct crange ranges[COUNTS_CACHE];
	uint64_t gaps;	/* accesses of pages no range held */
	uint64_t lost;	/* accesses no slot could take (an allocation failed) */
	pthread_t owner;
	bool orphan;	/* the owner left it without folding it */
	struct cshard *next; /* under @lock */
};

struct _ps_counts {
	pthread_mutex_t lock;
	pthread_mutex_t tick_lock; /* ticks one at a time: ps_store_counts_tick() */
	uint64_t serial;
	/*
	 * Atomic: no other counts of the process had it, and a tick gives a
	 * new one after the epoch (release): what validates counts_last.
	 */
	uint64_t stamp;
	uint64_t epoch;
	struct cshard *shards; /* under @lock */
	struct cshard retired; /* exited threads' counts, under @lock */
	struct ps_store *store;
	struct _ps_counts *next; /* the process's, under counts_lock */
};

struct ctls {
	struct _ps_counts *c;
	uint64_t serial;
	struct cshard *sh;
};

static __thread struct ctls counts_tls[COUNTS_TLS] __attribute__((tls_model("initial-exec")));
static __thread unsigned counts_tls_next __attribute__((tls_model("initial-exec")));

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
	struct cslot *slot;
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

static struct cslot *slots_new(size_t n)
{
	struct cslot *t = psi_alloc(n * sizeof(*t));
	size_t i;

	if (t) {
		for (i = 0; i < n; i++)
			t[i].start = COUNTS_EMPTY;
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
static struct cslot *slot_find(struct cslot *t, size_t mask, uint64_t start)
{
	size_t i = slot_hash(start, mask);

	while (t[i].start != start && t[i].start != COUNTS_EMPTY)
		i = (i + 1) & mask;
	return &t[i];
}

/* Bring @sl's rate to @epoch: halved once an epoch since its own. */
static uint64_t rate_at(uint64_t rate, uint64_t from, uint64_t epoch)
{
	return epoch <= from ? rate : epoch - from >= 64 ? 0 : rate >> (epoch - from);
}

/*
 * A read of @sl: its count, and its rate at its epoch with the counts
 * since @base in.  The owner changes the rate, the epoch and @base
 * together inside @seq (slot_advance()); a count alone moves nothing
 * the rate is computed from but the count itself.  A read that meets a
 * change tries again, for 100 ms at most: a fork child may
 * hold a slot its parent's thread was changing, which no thread will
 * finish, and a read there takes what it found.
 */
static uint64_t slot_read(const struct cslot *sl, uint64_t *count, uint64_t *epoch)
{
	uint64_t rate, base;
	unsigned seq, tries = 0;

	for (;;) {
		seq = psi_seq_read_begin(&sl->seq);
		rate = PSI_READ_ONCE(sl->rate);
		base = PSI_READ_ONCE(sl->base);
		*epoch = PSI_READ_ONCE(sl->epoch);
		*count = PSI_READ_ONCE(sl->count);
		if (!psi_seq_read_retry(&sl->seq, seq) || ++tries == COUNTS_SLOT_TRIES)
			break;
		usleep(100);
	}
	return rate + (*count > base ? *count - base : 0) * RATE_ONE;
}

/* The owner, or a fold under @lock: bring @sl's rate to @epoch, a later one. */
static void slot_advance(struct cslot *sl, uint64_t epoch)
{
	uint64_t count = sl->count, from = sl->epoch;
	uint64_t rate = rate_at(sl->rate + (count - sl->base) * RATE_ONE, from, epoch);

	psi_seq_write_begin(&sl->seq);
	PSI_WRITE_ONCE(sl->epoch, epoch);
	PSI_TEST_POINT(PSI_TP_COUNTS_SLOT_ADVANCE);
	PSI_WRITE_ONCE(sl->base, count);
	PSI_WRITE_ONCE(sl->rate, rate);
	psi_seq_write_end(&sl->seq);
}

/* The owner: count one access of @epoch in @sl. */
static inline void slot_add(struct cslot *sl, uint64_t epoch)
{
	if (psi_unlikely(epoch > sl->epoch))
		slot_advance(sl, epoch);
	PSI_WRITE_ONCE(sl->count, sl->count + 1);
}

/* A fold under @lock: add @count accesses whose rate was @rate at @epoch to @sl. */
static void slot_merge(struct cslot *sl, uint64_t count, uint64_t rate, uint64_t epoch)
{
	if (epoch > sl->epoch)
		slot_advance(sl, epoch);
	else
		rate = rate_at(rate, epoch, sl->epoch);
	/* Counted in the rate already: @base moves with @count. */
	psi_seq_write_begin(&sl->seq);
	PSI_WRITE_ONCE(sl->base, sl->base + count);
	PSI_WRITE_ONCE(sl->rate, sl->rate + rate);
	PSI_WRITE_ONCE(sl->count, sl->count + count);
	psi_seq_write_end(&sl->seq);
}

/*
 * The slot of [@start, @end) in @sh, inserted if new; NULL when the table
 * must grow and cannot.  The owner, or a fold under @lock (@c's retired).
 */
static struct cslot *shard_slot(struct _ps_counts *c, struct cshard *sh, uint64_t start,
		uint64_t end, bool owner)
{
	struct cslot *sl, *t, *old;
	size_t i, n;

	if (!sh->slots || 4 * (sh->used + 1) > 3 * (sh->mask + 1)) {
		n = sh->slots ? 2 * (sh->mask + 1) : COUNTS_MIN_SLOTS;
		t = slots_new(n);
		if (!t)
			return NULL;
		for (i = 0; sh->slots && i <= sh->mask; i++)
			if (sh->slots[i].start != COUNTS_EMPTY)
				*slot_find(t, n - 1, sh->slots[i].start) = sh->slots[i];
		if (owner)
			pthread_mutex_lock(&c->lock);
		old = sh->slots;
		PSI_WRITE_ONCE(sh->slots, t);
		sh->mask = n - 1;
		if (owner)
			pthread_mutex_unlock(&c->lock);
		psi_free(old);
		sh->nranges = 0; /* their slots were the old table's */
	}
	sl = slot_find(sh->slots, sh->mask, start);
	if (sl->start == COUNTS_EMPTY) {
		sl->end = end;
		sl->count = 0;
		sl->rate = 0;
		sl->epoch = 0;
		sl->base = 0;
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
static struct cshard *shard_get(struct _ps_counts *c, struct ctls **entry)
{
	struct ctls *e = NULL;
	struct cshard *sh, *o;
	pthread_t self;
	unsigned i;

	for (i = 0; i < COUNTS_TLS; i++)
		if (counts_tls[i].c == c && counts_tls[i].serial == c->serial) {
			*entry = &counts_tls[i];
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
		if (sh) {
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
	*entry = e;
	return sh;
}

/* The first of @sh's cached ranges that ends after @idx (@sh->nranges: none). */
static unsigned range_find(const struct cshard *sh, uint64_t idx)
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
		uint64_t gen, uint64_t start, uint64_t end, struct cslot *sl)
{
	uint64_t stamp = PSI_LOAD_ACQUIRE(c->stamp);

	slot_add(sl, PSI_READ_ONCE(c->epoch));
	counts_last = (struct clast){ stamp, gen, start, end - start, sl };
}

/* Count an access of @idx of @s in @sh, whose cache does not hold its range. */
static void counts_note_slow(struct ps_store *s, struct _ps_counts *c, struct cshard *sh,
		uint64_t idx, unsigned at, uint64_t gen)
{
	const struct ps_policy *pol;
	uint64_t start, end;
	struct cslot *sl;
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
	if (sh->nranges == COUNTS_CACHE)
		sh->nranges = at = 0; /* full: start again */
	memmove(&sh->ranges[at + 1], &sh->ranges[at], (sh->nranges - at) * sizeof(sh->ranges[0]));
	sh->ranges[at] = (struct crange){ start, end, sl };
	sh->nranges++;
	last_count(c, gen, start, end, sl);
}

/*
 * RCU, RCU_QSBR: the bounds of the range holding @idx at generation @gen
 * of @s, from the calling thread's lookup cache (polstore/static/lcache.h)
 * when its entry for @s was filled at @gen and holds @idx: what a lookup
 * just found, with no second search.  False else (other variants' id is
 * 0, an empty entry's too, but an empty entry holds no key).
 */
static bool lc_bounds(const struct ps_store *s, uint64_t idx, uint64_t gen, uint64_t *start,
		uint64_t *end)
{
	const struct _ps_lc_entry *e = _ps_lc_way(s);

	if (e->id != PSI_READ_ONCE(s->lc.id) || e->gen != gen || idx - e->start >= e->len)
		return false;
	*start = e->start;
	*end = e->start + e->len;
	return true;
}

/* The owner: the slot of [@start, @end) in @sh, inserted if new; NULL as shard_slot(). */
static struct cslot *slot_of(struct _ps_counts *c, struct cshard *sh, uint64_t start,
		uint64_t end)
{
	struct cslot *sl;

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
	struct cshard *sh;
	uint64_t start, end;
	struct cslot *sl;
	struct ctls *e;
	unsigned i;

	sh = shard_get(c, &e);
	if (!sh)
		return; /* no memory: the access goes uncounted, as with counting off */
	/* The range the lookup just found, when the thread's lookup cache holds it. */
	if (lc_bounds(s, idx, gen, &start, &end)) {
		sl = slot_of(c, sh, start, end);
		if (!sl) {
			PSI_WRITE_ONCE(sh->lost, sh->lost + 1);
			return;
		}
		last_count(c, gen, start, end, sl);
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

int ps_store_lookup_node_count(struct ps_store *store, uint64_t idx, int local_node)
{
	struct _ps_counts *c;
	int node;

	if (psi_unlikely(!store || _ps_node_check(local_node)))
		return -EINVAL;
	node = PSI_READ_INLINE ? _ps_inl_lookup_node(store, idx, local_node)
			       : store->lookup_node(store, idx, local_node);
	if ((c = PSI_LOAD_ACQUIRE(store->counting)))
		counts_note(store, c, idx);
	return node;
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

static void shard_free(struct cshard *sh)
{
	psi_free(sh->slots);
	psi_free(sh);
}

void psi_counts_end(struct ps_store *s)
{
	struct _ps_counts *c = s->counts, **pp;
	struct cshard *sh;

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
	psi_free(c->retired.slots);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->tick_lock);
	s->counting = NULL;
	s->counts = NULL;
	psi_free(c);
}

/* Under @c's @lock: add @sh's counts to @c's retired table; false when it cannot grow. */
static bool shard_fold(struct _ps_counts *c, struct cshard *sh)
{
	struct cslot *sl, *to;
	uint64_t rate, epoch, count;
	size_t i;

	for (i = 0; sh->slots && i <= sh->mask; i++) {
		sl = &sh->slots[i];
		if (sl->start == COUNTS_EMPTY || !sl->count)
			continue;
		to = shard_slot(c, &c->retired, sl->start, sl->end, false);
		if (!to)
			return false;
		rate = slot_read(sl, &count, &epoch);
		slot_merge(to, count, rate, epoch);
		sl->count = 0;
		sl->rate = 0;
		sl->base = 0;
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
static bool shard_leave(struct _ps_counts *c, struct cshard **pp)
{
	struct cshard *sh = *pp;

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
	struct cshard **pp;
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
				struct cshard *sh = *pp;

				if (sh->orphan || !pthread_equal(sh->owner, self) || !shard_leave(c, pp))
					pp = &sh->next;
			}
			pthread_mutex_unlock(&c->lock);
		}
	}
	pthread_mutex_unlock(&counts_lock);
	memset(tls, 0, sizeof(counts_tls));
	counts_tls_next = 0;
	memset(&counts_last, 0, sizeof(counts_last)); /* the exiting thread's own */
}

/* ---- reading -------------------------------------------------------------------------- */

struct fold {
	struct cslot *k; /* the keys, merged by start */
	size_t nk, capk;
	uint64_t gaps, lost, epoch;
	struct ps_range_counts *r; /* the store's ranges in the window */
	size_t nr, capr;
	uint64_t start, end; /* the window */
};

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static bool fold_shard(struct fold *f, const struct cshard *sh)
{
	const struct cslot *t = PSI_READ_ONCE(sh->slots);
	struct cslot sl;
	size_t i;

	f->gaps += PSI_READ_ONCE(sh->gaps);
	f->lost += PSI_READ_ONCE(sh->lost);
	for (i = 0; t && i <= sh->mask; i++) {
		sl.start = PSI_LOAD_ACQUIRE(t[i].start);
		if (sl.start == COUNTS_EMPTY)
			continue;
		PSI_ANNOTATE_HAPPENS_AFTER(&t[i].start);
		sl.end = PSI_READ_ONCE(t[i].end);
		sl.rate = slot_read(&t[i], &sl.count, &sl.epoch);
		sl.rate = rate_at(sl.rate, sl.epoch, f->epoch);
		if (!sl.count)
			continue;
		if (!grow((void **)&f->k, &f->capk, f->nk + 1, sizeof(*f->k)))
			return false;
		f->k[f->nk++] = sl;
	}
	return true;
}

static int key_cmp(const void *a, const void *b)
{
	const struct cslot *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Every shard's keys, sorted and merged by their first page. */
static int fold_keys(struct _ps_counts *c, struct fold *f)
{
	const struct cshard *sh;
	bool ok = true;
	size_t i, j;

	pthread_mutex_lock(&c->lock);
	f->epoch = PSI_READ_ONCE(c->epoch);
	ok = fold_shard(f, &c->retired);
	for (sh = c->shards; sh && ok; sh = sh->next)
		ok = fold_shard(f, sh);
	pthread_mutex_unlock(&c->lock);
	if (!ok)
		return -ENOMEM;
	if (f->nk)
		qsort(f->k, f->nk, sizeof(*f->k), key_cmp);
	for (i = 0, j = 0; i < f->nk; i++) {
		if (j && f->k[j - 1].start == f->k[i].start) {
			struct cslot *d = &f->k[j - 1];

			d->count += f->k[i].count;
			d->rate += f->k[i].rate;
			d->end = f->k[i].end > d->end ? f->k[i].end : d->end;
			d->epoch = f->k[i].epoch > d->epoch ? f->k[i].epoch : d->epoch;
			continue;
		}
		f->k[j++] = f->k[i];
	}
	f->nk = j;
	return 0;
}

/* ps_store_foreach_range(), from outside read-side sections. */
static int walk(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn, void *arg)
{
	if (psi_unlikely(psi_held(s) && psi_variant_has(s, PSI_V_WALK_EXCL)))
		return -EDEADLK;
	return s->ops->foreach_range(s, start, end, fn, arg);
}

static int range_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct fold *f = arg;

	(void)pol;
	if (!grow((void **)&f->r, &f->capr, f->nr + 1, sizeof(*f->r)))
		return -ENOMEM;
	f->r[f->nr++] = (struct ps_range_counts){ .start = start, .end = end };
	return 0;
}

/* The first of @f's ranges that ends after @p. */
static size_t range_after(const struct fold *f, uint64_t p)
{
	size_t lo = 0, hi = f->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->r[mid].end <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The ranges of [@start, @end) with their counts: each key goes to the
 * range holding its first page, else to the first that overlaps it.
 * Return: 0, -ENODATA, -ENOMEM; with @gone the keys with no range.
 */
static int fold(struct ps_store *store, uint64_t start, uint64_t end, struct fold *f,
		uint64_t *gone)
{
	struct _ps_counts *c = store ? PSI_LOAD_ACQUIRE(store->counts) : NULL;
	uint64_t lo = start, hi = end;
	size_t i, j;
	int err;

	memset(f, 0, sizeof(*f));
	if (!c)
		return -ENODATA;
	err = fold_keys(c, f);
	if (err)
		return err;
	/*
	 * The window's ranges; the keys that reach them (a key may go to a
	 * range it overlaps, no other); the ranges those keys reach.
	 */
	err = walk(store, start, end, range_fn, f);
	if (err)
		return err < 0 ? err : -ENOMEM;
	if (f->nr) {
		lo = f->r[0].start < lo ? f->r[0].start : lo;
		hi = f->r[f->nr - 1].end > hi ? f->r[f->nr - 1].end : hi;
	}
	start = lo;
	end = hi;
	for (i = 0, j = 0; i < f->nk; i++)
		if (f->k[i].start < end && f->k[i].end > start) {
			lo = f->k[i].start < lo ? f->k[i].start : lo;
			hi = f->k[i].end > hi ? f->k[i].end : hi;
			f->k[j++] = f->k[i];
		}
	f->nk = j;
	if (lo < start || hi > end) {
		f->nr = 0;
		err = walk(store, lo, hi, range_fn, f);
		if (err)
			return err < 0 ? err : -ENOMEM;
	}
	*gone = 0;
	for (i = 0; i < f->nk; i++) {
		j = range_after(f, f->k[i].start);
		if (j < f->nr && f->r[j].start < f->k[i].end) {
			struct ps_range_counts *r = &f->r[j];

			r->count += f->k[i].count;
			r->rate += (double)f->k[i].rate / RATE_ONE;
			if (f->k[i].epoch > r->last_epoch)
				r->last_epoch = f->k[i].epoch;
		} else {
			*gone += f->k[i].count;
		}
	}
	return 0;
}

static void fold_free(struct fold *f)
{
	free(f->k);
	free(f->r);
}

int ps_store_counts_foreach(struct ps_store *store, uint64_t start, uint64_t end,
		ps_counts_fn fn, void *arg)
{
	struct fold f;
	uint64_t gone;
	size_t i;
	int ret;

	if (!store || !fn || start >= end)
		return -EINVAL;
	ret = fold(store, start, end, &f, &gone);
	for (i = 0; !ret && i < f.nr; i++)
		if (f.r[i].end > start && f.r[i].start < end)
			ret = fn(&f.r[i], arg);
	fold_free(&f);
	return ret;
}

static bool above(const struct ps_range_counts *a, const struct ps_range_counts *b, int by)
{
	if (by == PS_COUNTS_BY_RATE ? a->rate != b->rate : a->count != b->count)
		return by == PS_COUNTS_BY_RATE ? a->rate > b->rate : a->count > b->count;
	return a->start < b->start;
}

int ps_store_counts_top(struct ps_store *store, uint64_t start, uint64_t end, int by,
		struct ps_range_counts *out, size_t n)
{
	size_t i, k = 0, j;
	struct fold f;
	uint64_t gone;
	int ret;

	if (!store || !out || start >= end || (by != PS_COUNTS_BY_COUNT && by != PS_COUNTS_BY_RATE))
		return -EINVAL;
	if (n > INT32_MAX)
		n = INT32_MAX;
	ret = fold(store, start, end, &f, &gone);
	for (i = 0; !ret && i < f.nr; i++) {
		const struct ps_range_counts *r = &f.r[i];

		if (!r->count || r->end <= start || r->start >= end)
			continue;
		if (k == n && (!n || !above(r, &out[n - 1], by)))
			continue;
		/* Insertion into the sorted @out: n is small. */
		j = k < n ? k++ : n - 1;
		for (; j && above(r, &out[j - 1], by); j--)
			out[j] = out[j - 1];
		out[j] = *r;
	}
	fold_free(&f);
	return ret ? ret : (int)k;
}

int ps_store_counts_sum(struct ps_store *store, struct ps_counts_sum *sum)
{
	struct fold f;
	uint64_t gone;
	size_t i;
	int ret;

	if (!store || !sum)
		return -EINVAL;
	ret = fold(store, 0, UINT64_MAX, &f, &gone);
	if (!ret) {
		*sum = (struct ps_counts_sum){ .gaps = f.gaps + f.lost, .gone = gone,
			.epoch = f.epoch };
		for (i = 0; i < f.nr; i++)
			sum->in_ranges += f.r[i].count;
		sum->counted = sum->in_ranges + sum->gaps + sum->gone;
	}
	fold_free(&f);
	return ret;
}
