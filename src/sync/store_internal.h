/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The contract between store.c (argument checks, public entry points) and
 * the synchronisation variants (sync_*.c).  Each variant embeds struct
 * ps_store first in its own store type and exports one ps_sync_ops.
 */
#ifndef POLSTORE_SRC_STORE_INTERNAL_H
#define POLSTORE_SRC_STORE_INTERNAL_H

#include <polstore/lockstat.h>
#include <polstore/store.h>
#include <polstore/static/store.h>

#include "alloc_internal.h"
#include "lstat.h"
#include "policy_internal.h"
#include "rangetree.h"

/*
 * Arguments are already checked by store.c: @store is not NULL and
 * start < end.  @lookup returns through psi_lookup_result(), so that
 * ps_store_lookup() can tail-call it: one call per lookup, not two.
 * @set allocates everything it can need before it changes anything and
 * returns 0 or -ENOMEM (nothing changed).
 */
struct ps_sync_ops {
	struct ps_store *(*create)(void);
	void (*destroy)(struct ps_store *store);
	struct ps_policy *(*lookup)(struct ps_store *store, uint64_t idx);
	void (*read_lock)(struct ps_store *store);
	void (*read_unlock)(struct ps_store *store);
	const struct ps_policy *(*lookup_borrow)(struct ps_store *store, uint64_t idx);
	/* One call each, in a read-side section of their own; @view checked, @local_node valid. */
	int (*lookup_copy)(struct ps_store *store, uint64_t idx, struct ps_policy_view *view);
	int (*lookup_node)(struct ps_store *store, uint64_t idx, int local_node);
	int (*set)(struct ps_store *store, uint64_t start, uint64_t end, struct ps_policy *pol);
	/* Free what earlier sets retired (NULL: the variant defers nothing). */
	void (*synchronize)(struct ps_store *store);
	int (*foreach)(struct ps_store *store, ps_foreach_fn fn, void *arg);
	/* Under the writer lock: check the tree. */
	int (*check)(struct ps_store *store, const char **why);
	/* Bytes held besides the live ranges: spares, retired ranges not yet freed (NULL: none). */
	size_t (*held)(struct ps_store *store);
	/* The writer lock's statistics (both directions), or NULL without lock_stat. */
	struct psi_lstat *(*lock_stat)(struct ps_store *store);
	/*
	 * Arguments checked by store.c: start < end, out-pointers not
	 * NULL, n > 0 and every op non-empty.  @foreach_range walks one
	 * snapshot as @foreach does; @next and @next_borrow are one
	 * linearizable read each, returning 0 or -ENOENT; @set_many
	 * allocates for the whole batch first and makes it visible at once
	 * (0 or -ENOMEM, nothing changed).
	 */
	int (*foreach_range)(struct ps_store *store, uint64_t start, uint64_t end,
			ps_foreach_fn fn, void *arg);
	int (*next)(struct ps_store *store, uint64_t idx, uint64_t *start, uint64_t *end,
			struct ps_policy **pol);
	int (*next_borrow)(struct ps_store *store, uint64_t idx, uint64_t *start, uint64_t *end,
			const struct ps_policy **pol);
	int (*set_many)(struct ps_store *store, const struct ps_set_op *ops, size_t n);
	/* The sets' figures (NULL: the variant keeps none). */
	int (*stats)(struct ps_store *store, struct ps_store_stats *stats);
	/*
	 * Deferred destroy (store.c), on the reclaim thread after a grace
	 * period: true when @destroy may run now without waiting, i.e. no
	 * reader holds the store's lock and no batch of the store is in
	 * flight.  Never waits.  NULL: always.
	 */
	bool (*idle)(struct ps_store *store);
	/*
	 * The checking mode's model of a set's waits: true when a set or
	 * set_many of @store by the calling thread could now wait for a
	 * grace period.  A hint (relaxed reads), never waits.  NULL: never.
	 */
	bool (*set_may_wait)(struct ps_store *store);
	/*
	 * true: @set and @set_many raise rd.gen themselves, odd before they
	 * publish and even after (RCU, RCU_QSBR: lookup_cache.h); false:
	 * store.c adds 2 once the set returned (psi_store_changed()).
	 */
	bool counts_gen;
};

/*
 * A variant's store object, the part of its create every variant shares:
 * @size bytes (its own store type, struct ps_store first), zeroed and
 * cache-line aligned, with @size recorded and an empty tree.  Return: the
 * base, or NULL when out of memory.  Free it with psi_free_aligned().
 */
static inline struct ps_store *psi_store_zalloc(size_t size)
{
	struct ps_store *s = psi_zalloc_aligned(size);

	if (s) {
		s->size = size;
		psi_rangetree_init(&s->rd.tree);
	}
	return s;
}

/*
 * The part of a variant's destroy every variant shares: free the tree's
 * ranges and drop their policy references at once (no reader may run
 * during destroy: polstore/store.h).
 */
static inline void psi_store_free_ranges(struct ps_store *s)
{
	struct psi_range_list removed = { NULL, 0, NULL };

	psi_rangetree_clear(&s->rd.tree, &removed);
	psi_range_list_free(&removed);
}

/*
 * ps_store_read_unlock() on a store of @variant (its name) in which the
 * calling thread holds no read-side section: the message of held.h's
 * psi_misuse(), then abort(); nothing is unlocked (sync_common.c).
 */
__attribute__((noreturn, cold)) void psi_stray_read_unlock(const char *variant,
		const struct ps_store *s);

/* Set errno to 0 and return NULL (sync_common.c); out of line, a tail call. */
struct ps_policy *psi_lookup_miss(void);

/*
 * What every variant's lookup returns: @pol, with errno set to 0 on a miss,
 * as ps_store_lookup() documents (a miss is told from a NULL store by errno).
 * errno is libc's thread-local: out of line, setting it is a tail call off
 * the path of a hit.
 */
static inline struct ps_policy *psi_lookup_result(struct ps_policy *pol)
{
	return psi_likely(pol) ? pol : psi_lookup_miss();
}

/* Look the policy up in @t and return it (borrowed) or NULL; for a tree no writer changes. */
static inline struct ps_policy *psi_rangetree_lookup_pol(const struct ps_rtree *t, uint64_t idx)
{
	struct ps_range *r = psi_rangetree_lookup(t, idx);

	return r ? PSI_READ_ONCE(r->pol) : NULL;
}

#endif /* POLSTORE_SRC_STORE_INTERNAL_H */
