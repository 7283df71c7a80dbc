// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The id map (polstore/idmap.h): one radix tree, three ways to synchronise.
 *
 * Tree: nodes of IDMAP_FANOUT slots; a node's @shift is how far an id is
 * shifted to index its slots (0 for leaves, whose slots hold objects).  The
 * root covers ids [0, IDMAP_FANOUT << root->shift); the tree grows upward by
 * putting the old root in slot 0 of a new one.  Nodes are never removed
 * before destroy, so lockless readers never meet freed memory, and the root
 * pointer and every slot only ever change from one valid value to another.
 *
 * Readers (find, get_next) follow slots with acquire loads; a writer fills a
 * node completely (its @shift, slot 0 when growing) before publishing it
 * with a release store, so a reader that loads the pointer sees it whole.
 * That is all the RCU variant needs, plus deferred frees of the caller's
 * objects; for SPIN and RWLOCK the same loads run under the lock.
 *
 * Thread checkers (helgrind/DRD see atomics as plain accesses): the root
 * pointer, every slot and @count are declared atomics-only words (each
 * write is a release store or PSI_WRITE_ONCE under the writer lock, each
 * lockless read an acquire load or PSI_READ_ONCE; a writer's plain reads
 * under the lock never meet a concurrent write).  What a release store
 * publishes (a node's @shift and slot 0, or the caller's object) is handed
 * over with HAPPENS_BEFORE on the word's address just before the store and
 * HAPPENS_AFTER on it after an acquire load that returned non-NULL: see
 * idmap_publish() and idmap_subscribed().
 *
 * Allocation: @full has bit i set when slot i of a leaf holds an object, or
 * when child i of an inner node exists and is itself full.  Writers alone
 * read and write it (under the writer lock), so readers pay nothing for it.
 * Lowest-free search skips full subtrees and stops at the first missing
 * child, so it visits at most one partial path per level plus the full
 * siblings' bits.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/idmap.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "compiler.h"
#include "held.h"
#include "lock.h"
#include "names.h"
#include "rcu_memb.h"
#include "rcu_reclaim.h"
#include "rcu_thread.h"

#define IDMAP_BITS 6
#define IDMAP_FANOUT (1 << IDMAP_BITS)
#define IDMAP_MASK (IDMAP_FANOUT - 1)
#define IDMAP_FULL UINT64_MAX
/* 6 levels cover 36 bits, more than any non-negative int. */
#define IDMAP_MAX_SHIFT 30

struct idmap_node {
	unsigned shift; /* immutable once published */
	uint64_t full; /* writer only */
	void *slots[IDMAP_FANOUT]; /* children or objects; release-published */
};

struct idmap_deferred {
	void *ptr;
	void (*fn)(void *);
};

/*
 * A batch of deferred frees.  The batch being filled hangs off the map
 * (@defer); a full one, or the one ps_idmap_barrier() takes, goes to the
 * memb flavour's reclaim thread (rcu_reclaim.h), which after a grace period
 * pushes it on the map's @ready stack and nothing more: the frees
 * themselves run on a caller's thread, in the next call on the map that
 * drains @ready (ps_idmap_free_rcu(), ps_idmap_barrier(), destroy), as
 * ps_idmap_free_rcu() promises.  So no caller waits for a grace period
 * (but when memory or the reclaim thread is missing), and polstore's
 * thread never runs a user's function.
 */
struct idmap_batch {
	struct psi_reclaim_item item; /* first: the reclaim thread's handle */
	struct ps_idmap *map;
	struct idmap_batch *next; /* on @ready */
	int n;
	struct idmap_deferred e[PS_IDMAP_FREE_BATCH];
};

struct ps_idmap {
	enum ps_idmap_sync sync;
	struct idmap_node *root; /* release-published */
	int count; /* PSI_WRITE_ONCE under the writer lock */

	pthread_mutex_t defer_lock; /* @defer; a batch taken off it is handed over under it */
	struct idmap_batch *defer; /* being filled, or NULL */
	struct idmap_batch *ready; /* atomic: past their grace period, newest first */
	long pending; /* atomic: batches taken off @defer whose frees have not all run */
	pthread_mutex_t drain_lock; /* held while running the frees of batches taken off @ready */
	/*
	 * Under @drain_lock: the batches a drain took and has not freed yet.
	 * Nobody reads it; it keeps them reachable from the map (for leak
	 * checkers and debuggers), in particular in a child forked while a
	 * thread was inside one of their frees.
	 */
	struct idmap_batch *draining;
	/* SPIN: everyone; RWLOCK: readers and writers; RCU: writers.  Last: sized by kind. */
	struct psi_lock lock __ps_cacheline_aligned;
};

/* The kind of lock a map takes: a spinlock unless it is a RWLOCK map. */
static inline enum psi_lock_kind idmap_lock_kind(enum ps_idmap_sync sync)
{
	return sync == PS_IDMAP_RWLOCK ? PSI_LOCK_RWLOCK : PSI_LOCK_SPIN;
}

static const char *const idmap_sync_names[PS_IDMAP_SYNC_COUNT] = {
	[PS_IDMAP_SPIN] = "spin",
	[PS_IDMAP_RWLOCK] = "rwlock",
	[PS_IDMAP_RCU] = "rcu",
};

#ifdef POLSTORE_DEBUG_CHECKS
/* Read-side sections this thread is in, to catch finds outside one. */
static __thread int idmap_read_depth;

static void idmap_bug(const char *what)
{
	fprintf(stderr, "polstore: idmap: %s\n", what);
	abort();
}
#endif

const char *ps_idmap_sync_name(enum ps_idmap_sync value)
{
	return psi_name_of(idmap_sync_names, PS_IDMAP_SYNC_COUNT, (int)value);
}

int ps_idmap_sync_from_name(const char *name)
{
	return psi_name_index(idmap_sync_names, PS_IDMAP_SYNC_COUNT, name);
}

/*
 * Release-store @v into @word (map->root or a slot) for lockless readers.
 * Stores of NULL publish nothing but go through here all the same.
 */
#define idmap_publish(word, v)                                                                     \
	do {                                                                                       \
		PSI_ANNOTATE_HAPPENS_BEFORE(&(word)); /* pairs with idmap_subscribed() */         \
		PSI_STORE_RELEASE(word, v);                                                         \
	} while (0)

/*
 * @p was just acquire-loaded from @word: what its idmap_publish() made
 * visible (a node filled in, the caller's initialised object) is visible
 * here.  Returns @p.
 */
static inline void *idmap_subscribed(const void *word, void *p)
{
	if (p)
		PSI_ANNOTATE_HAPPENS_AFTER(word);
	(void)word;
	return p;
}

static inline uint64_t idmap_span(const struct idmap_node *n)
{
	return (uint64_t)IDMAP_FANOUT << n->shift;
}

static inline unsigned idmap_index(const struct idmap_node *n, uint64_t id)
{
	return (unsigned)(id >> n->shift) & IDMAP_MASK;
}

static struct idmap_node *idmap_node_new(unsigned shift)
{
	struct idmap_node *n = psi_zalloc(sizeof(*n));

	if (n) {
		n->shift = shift;
		PSI_ANNOTATE_BENIGN_RACE_SIZED(n->slots, sizeof(n->slots)); /* atomics only */
	}
	return n;
}

static void idmap_node_free(struct idmap_node *n)
{
	int i;

	if (n->shift)
		for (i = 0; i < IDMAP_FANOUT; i++)
			if (n->slots[i])
				idmap_node_free(n->slots[i]);
	psi_free(n);
}

struct ps_idmap *ps_idmap_create(enum ps_idmap_sync sync)
{
	struct ps_idmap *map;
	int err;

	if ((unsigned)sync >= PS_IDMAP_SYNC_COUNT)
		return psi_err_null(EINVAL);
	/* RCU readers register with liburcu: never without the thread-exit hook. */
	err = sync == PS_IDMAP_RCU ? psi_rcu_thread_init() : 0;
	if (err)
		return psi_err_null(-err);
	map = psi_zalloc_aligned(offsetof(struct ps_idmap, lock) + psi_lock_size(idmap_lock_kind(sync)));
	if (!map)
		return psi_err_null(ENOMEM);
	map->sync = sync;
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&map->root, sizeof(map->root)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&map->count, sizeof(map->count)); /* atomics only */
	psi_lock_init(&map->lock, idmap_lock_kind(sync));
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&map->ready, sizeof(map->ready)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&map->pending, sizeof(map->pending)); /* atomics only */
	pthread_mutex_init(&map->defer_lock, NULL);
	pthread_mutex_init(&map->drain_lock, NULL);
	return map;
}

void ps_idmap_destroy(struct ps_idmap *map)
{
	if (!map)
		return;
	/*
	 * The frees a barrier runs may queue more on @map (ps_idmap_free_rcu()
	 * allows it): run those too, until none is left, or they would leak
	 * and a full batch of them would come back from the reclaim thread to
	 * the freed map.  No other thread uses @map: plain reads will do.
	 */
	do
		ps_idmap_barrier(map);
	while (map->sync == PS_IDMAP_RCU &&
			(map->defer || PSI_LOAD_ACQUIRE(map->pending)));
	if (map->root)
		idmap_node_free(map->root);
	pthread_mutex_destroy(&map->drain_lock);
	pthread_mutex_destroy(&map->defer_lock);
	psi_free_aligned(map);
}

int ps_idmap_sync_kind(const struct ps_idmap *map)
{
	return map ? (int)map->sync : -EINVAL;
}

/* ---- Locking ------------------------------------------------------------- */

static void idmap_write_lock(struct ps_idmap *map)
{
	psi_lock_write_lock(&map->lock, idmap_lock_kind(map->sync));
}

static void idmap_write_unlock(struct ps_idmap *map)
{
	psi_lock_write_unlock(&map->lock, idmap_lock_kind(map->sync));
}

/*
 * SPIN and RWLOCK sections are recorded as this thread's (held.h): a
 * writer called inside one returns -EDEADLK rather than wait for itself,
 * and a SPIN section opened inside another of the same map is a misuse
 * that would never return.  RWLOCK sections nest (rwlock.h).
 */
void ps_idmap_read_lock(struct ps_idmap *map)
{
	if (map->sync == PS_IDMAP_RCU) {
		psi_memb_read_lock();
	} else {
		if (map->sync == PS_IDMAP_SPIN && psi_held(map))
			psi_misuse("ps_idmap_read_lock()", "spin id map %p: this thread holds its "
					"lock already (a section of this map is open): it would "
					"wait for itself", (void *)map);
		psi_lock_read_lock(&map->lock, idmap_lock_kind(map->sync));
		psi_held_push(map);
	}
#ifdef POLSTORE_DEBUG_CHECKS
	idmap_read_depth++;
#endif
}

void ps_idmap_read_unlock(struct ps_idmap *map)
{
#ifdef POLSTORE_DEBUG_CHECKS
	if (idmap_read_depth-- <= 0)
		idmap_bug("read_unlock outside a read-side section");
#endif
	if (map->sync == PS_IDMAP_RCU) {
		PSI_ANNOTATE_HAPPENS_BEFORE(map); /* pairs with idmap_synchronize() */
		psi_memb_read_unlock();
	} else {
		psi_held_pop(map);
		psi_lock_read_unlock(&map->lock, idmap_lock_kind(map->sync));
	}
}

/* ---- Readers ------------------------------------------------------------- */

/*
 * A reader's root (NULL for an empty map), after the debug check that it is
 * inside a section (@what: the message otherwise).  Acquire: pairs with the
 * release that published the node, so its @shift and slots are set.
 */
static inline const struct idmap_node *idmap_reader_root(const struct ps_idmap *map,
		const char *what)
{
#ifdef POLSTORE_DEBUG_CHECKS
	if (idmap_read_depth <= 0)
		idmap_bug(what);
#endif
	(void)what;
	return idmap_subscribed(&map->root, PSI_LOAD_ACQUIRE(map->root));
}

void *ps_idmap_find(const struct ps_idmap *map, int id)
{
	const struct idmap_node *n;

	if (!map || id < 0)
		return NULL;
	n = idmap_reader_root(map, "find outside a read-side section");
	if (!n || (uint64_t)id >= idmap_span(n))
		return NULL;
	while (n->shift) {
		unsigned i = idmap_index(n, (uint64_t)id);

		n = idmap_subscribed(&n->slots[i], PSI_LOAD_ACQUIRE(n->slots[i]));
		if (!n)
			return NULL;
	}
	/* Acquire: the object's initialisation before ps_idmap_alloc() is visible. */
	id &= IDMAP_MASK;
	return idmap_subscribed(&n->slots[id], PSI_LOAD_ACQUIRE(n->slots[id]));
}

/* The lowest bound id >= @start under @n, which covers [@base, @base + span). */
static void *idmap_next(const struct idmap_node *n, uint64_t start, uint64_t base, uint64_t *found)
{
	unsigned i = (unsigned)((start - base) >> n->shift);
	uint64_t cbase;
	void *p;

	for (; i < IDMAP_FANOUT; i++) {
		p = idmap_subscribed(&n->slots[i], PSI_LOAD_ACQUIRE(n->slots[i]));
		if (!p)
			continue;
		cbase = base + ((uint64_t)i << n->shift);
		if (!n->shift) {
			*found = cbase;
			return p;
		}
		p = idmap_next(p, start > cbase ? start : cbase, cbase, found);
		if (p)
			return p;
	}
	return NULL;
}

void *ps_idmap_get_next(const struct ps_idmap *map, int *id)
{
	const struct idmap_node *root;
	uint64_t found;
	void *p;

	if (!map || !id || *id < 0)
		return NULL;
	root = idmap_reader_root(map, "get_next outside a read-side section");
	if (!root || (uint64_t)*id >= idmap_span(root))
		return NULL;
	p = idmap_next(root, (uint64_t)*id, 0, &found);
	if (p)
		*id = (int)found;
	return p;
}

int ps_idmap_count(const struct ps_idmap *map)
{
	return map ? PSI_READ_ONCE(map->count) : -EINVAL;
}

/* ---- Writers (under the writer lock) ------------------------------------- */

#ifdef POLSTORE_DEBUG_CHECKS
/* The @full bits along the path to @id agree with what they summarise. */
static void idmap_check_path(const struct ps_idmap *map, uint64_t id)
{
	const struct idmap_node *n = map->root, *c;
	unsigned i;
	bool want;

	while (n && id < idmap_span(n)) {
		i = idmap_index(n, id);
		c = n->slots[i];
		want = n->shift ? c && c->full == IDMAP_FULL : c != NULL;
		if (want != !!(n->full & (1ULL << i)))
			idmap_bug("full bitmap out of date");
		if (!n->shift)
			break;
		n = c;
	}
}
#else
static inline void idmap_check_path(const struct ps_idmap *map, uint64_t id)
{
	(void)map;
	(void)id;
}
#endif

/* The lowest free id >= @start under @n (covering [@base, ...)), or -1 when all are bound. */
static int64_t idmap_find_free(const struct idmap_node *n, uint64_t start, uint64_t base)
{
	unsigned i = (unsigned)((start - base) >> n->shift);
	uint64_t cbase, s;
	int64_t r;

	for (; i < IDMAP_FANOUT; i++) {
		if (n->full & (1ULL << i))
			continue;
		cbase = base + ((uint64_t)i << n->shift);
		s = start > cbase ? start : cbase;
		if (!n->shift || !n->slots[i])
			return (int64_t)s;
		r = idmap_find_free(n->slots[i], s, cbase);
		if (r >= 0)
			return r;
	}
	return -1;
}

/* Add a level above the root; the tree's contents do not change. */
static int idmap_grow(struct ps_idmap *map)
{
	struct idmap_node *old = map->root, *n;

	n = idmap_node_new(old ? old->shift + IDMAP_BITS : 0);
	if (!n)
		return -ENOMEM;
	if (old) {
		n->slots[0] = old;
		if (old->full == IDMAP_FULL)
			n->full = 1;
	}
	/* Release: @shift and slot 0 are visible to a reader that loads the new root. */
	idmap_publish(map->root, n);
	return 0;
}

/* Bind free @id to @ptr, creating nodes on the way.  Caller ensured the root covers @id. */
static int idmap_bind(struct ps_idmap *map, uint64_t id, void *ptr)
{
	struct idmap_node *path[IDMAP_MAX_SHIFT / IDMAP_BITS + 1];
	struct idmap_node *n = map->root, *c;
	int depth = 0;
	unsigned i;

	while (n->shift) {
		i = idmap_index(n, id);
		c = n->slots[i];
		if (!c) {
			c = idmap_node_new(n->shift - IDMAP_BITS);
			/* Nodes created so far stay, empty: the bindings are unchanged. */
			if (!c)
				return -ENOMEM;
			idmap_publish(n->slots[i], c);
		}
		path[depth++] = n;
		n = c;
	}
	/* Release: the caller's initialisation of *ptr happens before a reader finds it. */
	idmap_publish(n->slots[id & IDMAP_MASK], ptr);
	n->full |= 1ULL << (id & IDMAP_MASK);
	/* A node that just became full marks its bit in the parent, and so on up. */
	while (n->full == IDMAP_FULL && depth > 0) {
		n = path[--depth];
		n->full |= 1ULL << idmap_index(n, id);
	}
	PSI_WRITE_ONCE(map->count, map->count + 1);
	return 0;
}

/* The leaf holding @id, or NULL. */
static struct idmap_node *idmap_leaf(const struct ps_idmap *map, uint64_t id)
{
	struct idmap_node *n = map->root;

	if (!n || id >= idmap_span(n))
		return NULL;
	while (n && n->shift)
		n = n->slots[idmap_index(n, id)];
	return n;
}

int ps_idmap_alloc(struct ps_idmap *map, void *ptr, int min, int max, int *id)
{
	int64_t found = -1;
	int ret = 0;

	if (!map || !ptr || !id || min < 0 || max < min)
		return -EINVAL;
	if (psi_unlikely(psi_held(map)))
		return -EDEADLK; /* inside its own section: the writer lock waits for us */
	idmap_write_lock(map);
	if (!map->root)
		ret = idmap_grow(map);
	while (!ret && idmap_span(map->root) <= (uint64_t)min)
		ret = idmap_grow(map);
	while (!ret) {
		found = idmap_find_free(map->root, (uint64_t)min, 0);
		if (found >= 0) {
			if (found > max)
				ret = -ENOSPC;
			break;
		}
		/* Everything the root covers from @min on is bound: cover more, if allowed. */
		if (idmap_span(map->root) > (uint64_t)max)
			ret = -ENOSPC;
		else
			ret = idmap_grow(map);
	}
	if (!ret)
		ret = idmap_bind(map, (uint64_t)found, ptr);
	if (!ret) {
		idmap_check_path(map, (uint64_t)found);
		*id = (int)found;
	}
	idmap_write_unlock(map);
	return ret;
}

int ps_idmap_replace(struct ps_idmap *map, int id, void *ptr, void **old)
{
	struct idmap_node *leaf;
	void *prev;

	if (!map || !ptr || id < 0)
		return -EINVAL;
	if (psi_unlikely(psi_held(map)))
		return -EDEADLK; /* inside its own section: the writer lock waits for us */
	idmap_write_lock(map);
	leaf = idmap_leaf(map, (uint64_t)id);
	prev = leaf ? leaf->slots[id & IDMAP_MASK] : NULL;
	if (prev)
		idmap_publish(leaf->slots[id & IDMAP_MASK], ptr);
	idmap_write_unlock(map);
	if (!prev)
		return -ENOENT;
	if (old)
		*old = prev;
	return 0;
}

int ps_idmap_remove(struct ps_idmap *map, int id, void **old)
{
	struct idmap_node *n;
	void *prev = NULL;
	uint64_t uid = (uint64_t)id;

	if (!map || id < 0)
		return -EINVAL;
	if (psi_unlikely(psi_held(map)))
		return -EDEADLK; /* inside its own section: the writer lock waits for us */
	idmap_write_lock(map);
	n = idmap_leaf(map, uid);
	if (n)
		prev = n->slots[uid & IDMAP_MASK];
	if (prev) {
		idmap_publish(n->slots[uid & IDMAP_MASK], NULL);
		/* Nothing on the path to a free id is full any more. */
		for (n = map->root; n; n = n->shift ? n->slots[idmap_index(n, uid)] : NULL)
			n->full &= ~(1ULL << idmap_index(n, uid));
		PSI_WRITE_ONCE(map->count, map->count - 1);
		idmap_check_path(map, uid);
	}
	idmap_write_unlock(map);
	if (!prev)
		return -ENOENT;
	if (old)
		*old = prev;
	return 0;
}

/* ---- Grace periods --------------------------------------------------------- */

/* A grace period: every read section that could see a removed object ended. */
static void idmap_synchronize(struct ps_idmap *map)
{
	urcu_memb_synchronize_rcu();
	PSI_ANNOTATE_HAPPENS_AFTER(map); /* pairs with ps_idmap_read_unlock() */
}

void ps_idmap_synchronize(struct ps_idmap *map)
{
	if (map && map->sync == PS_IDMAP_RCU)
		idmap_synchronize(map);
}

/* Push @b on @map's @ready stack (lock-free). */
static void idmap_push_ready(struct ps_idmap *map, struct idmap_batch *b)
{
	struct idmap_batch *old = PSI_READ_ONCE(map->ready);

	do {
		b->next = old;
		PSI_ANNOTATE_HAPPENS_BEFORE(b); /* our last touch of @b: pairs with idmap_drain() */
	} while (!PSI_TRY_CMPXCHG_WEAK(map->ready, &old, b, RELEASE, RELAXED));
}

/*
 * The reclaim thread, a grace period after @item was queued: hand the batch
 * back to its map.  Lock-free, as a release function must be (a forked
 * child's reclaim thread may release it while a thread frozen in the fork
 * held the map's locks).
 */
static void idmap_batch_ready(struct psi_reclaim_item *item)
{
	struct idmap_batch *b = (struct idmap_batch *)item;

	idmap_push_ready(b->map, b);
}

/* A drain in progress: where it is, for idmap_drain_abandoned(). */
struct idmap_drain_pos {
	struct ps_idmap *map;
	int i; /* the free of map->draining's first batch being called */
};

/*
 * The draining thread ends inside a free function (pthread_exit() or
 * cancellation there): that free counts as run; the batch's later frees (it
 * may have none left: the next drain frees it) and the batches after it go
 * back on @ready for the next call, and the map is released.  Nothing else
 * is lost, and nobody waits for the dead thread.
 */
static void idmap_drain_abandoned(void *arg)
{
	const struct idmap_drain_pos *pos = arg;
	struct ps_idmap *map = pos->map;
	struct idmap_batch *b = map->draining, *next;

	b->n -= pos->i + 1;
	memmove(b->e, b->e + pos->i + 1, (size_t)b->n * sizeof(b->e[0]));
	for (; b; b = next) {
		next = b->next;
		idmap_push_ready(map, b);
	}
	map->draining = NULL;
	pthread_mutex_unlock(&map->drain_lock);
}

/*
 * Run the batches on @ready.  @wait: take @drain_lock even when another
 * thread holds it (a barrier must see that thread's batches finish);
 * otherwise a busy lock means somebody else drains (or this thread is in
 * one of those frees: its own call on the map must not wait for itself).
 */
static void idmap_drain(struct ps_idmap *map, bool wait)
{
	struct idmap_drain_pos pos = { .map = map };
	struct idmap_batch *b, *next;

	if (!PSI_READ_ONCE(map->ready) && !wait)
		return;
	if (wait)
		pthread_mutex_lock(&map->drain_lock);
	else if (pthread_mutex_trylock(&map->drain_lock))
		return;
	/* Oldest first: the stack's order reversed. */
	for (b = PSI_XCHG(map->ready, NULL, ACQUIRE); b; b = next) {
		PSI_ANNOTATE_HAPPENS_AFTER(b); /* pairs with idmap_push_ready() */
		next = b->next;
		b->next = map->draining;
		map->draining = b;
	}
	pthread_cleanup_push(idmap_drain_abandoned, &pos);
	while ((b = map->draining)) {
		PSI_ANNOTATE_HAPPENS_AFTER(map); /* the grace period: pairs with ps_idmap_read_unlock() */
		for (pos.i = 0; pos.i < b->n; pos.i++)
			b->e[pos.i].fn(b->e[pos.i].ptr);
		map->draining = b->next;
		psi_free(b);
		PSI_ANNOTATE_HAPPENS_BEFORE(&map->pending); /* pairs with ps_idmap_barrier() */
		PSI_SUB_FETCH(map->pending, 1, RELEASE);
	}
	pthread_cleanup_pop(0);
	pthread_mutex_unlock(&map->drain_lock);
}

/*
 * Hand @b, just taken off @defer, to the reclaim thread, which puts it on
 * @ready after a grace period.  When there is no reclaim thread (none could
 * be started), wait for the grace period here and put it there at once.
 * Context: under @defer_lock, so that a barrier, which takes it, finds every
 * batch taken before it on its way (pending counted, queued or on @ready).
 */
static void idmap_retire_batch(struct ps_idmap *map, struct idmap_batch *b)
{
	b->map = map;
	b->item.release = idmap_batch_ready;
	PSI_ADD_FETCH(map->pending, 1, RELAXED);
	PSI_ANNOTATE_HAPPENS_BEFORE(b); /* our last touch of the batch */
	if (!psi_reclaim_defer_weighed(psi_flavour_memb.reclaimer, &b->item, sizeof(*b)))
		return;
	idmap_synchronize(map);
	idmap_push_ready(map, b);
}

int ps_idmap_free_rcu(struct ps_idmap *map, void *ptr, void (*free_fn)(void *))
{
	if (!map || !ptr || !free_fn)
		return -EINVAL;
	if (map->sync != PS_IDMAP_RCU) {
		free_fn(ptr);
		return 0;
	}
	pthread_mutex_lock(&map->defer_lock);
	if (!map->defer) {
		map->defer = psi_alloc(sizeof(*map->defer));
		if (map->defer)
			map->defer->n = 0;
	}
	if (!map->defer) {
		pthread_mutex_unlock(&map->defer_lock);
		idmap_synchronize(map);
		free_fn(ptr);
		return 0;
	}
	map->defer->e[map->defer->n].ptr = ptr;
	map->defer->e[map->defer->n].fn = free_fn;
	if (++map->defer->n == PS_IDMAP_FREE_BATCH) {
		idmap_retire_batch(map, map->defer);
		map->defer = NULL;
	}
	pthread_mutex_unlock(&map->defer_lock);
	/* Run what is ready: batches the reclaim thread gave back, or the one just retired without it. */
	idmap_drain(map, false);
	return 0;
}

void ps_idmap_barrier(struct ps_idmap *map)
{
	long pending;

	if (!map || map->sync != PS_IDMAP_RCU)
		return;
	pthread_mutex_lock(&map->defer_lock);
	if (map->defer) {
		idmap_retire_batch(map, map->defer);
		map->defer = NULL;
	}
	pending = PSI_LOAD_ACQUIRE(map->pending);
	pthread_mutex_unlock(&map->defer_lock);
	if (!pending) {
		/* Nothing queued, handed over or being run: what other threads ran is done. */
		PSI_ANNOTATE_HAPPENS_AFTER(&map->pending);
		return;
	}
	/*
	 * Every batch taken off @defer before this point, ours and other
	 * threads' (they hand it over under @defer_lock), is on @ready once the
	 * reclaim thread has passed the barrier, or was taken off it by a
	 * drain that holds @drain_lock until its frees ran.
	 */
	psi_reclaim_barrier(psi_flavour_memb.reclaimer);
	idmap_drain(map, true);
}
