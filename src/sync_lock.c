// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * SPIN and RWLOCK stores: one lock around one tree.  The two differ only in
 * the lock, so every function here is written once and compiled once per
 * kind of lock (DEFINE_LOCKED_VARIANT below): each variant's ops table
 * reaches its own lock's fast path with no further branch, and a SPIN
 * store allocates no reader slots.
 *
 * Readers and writers exclude each other completely, so the tree is never
 * seen half-updated, lookups are linearizable at the acquisition, and
 * removed ranges can be freed as soon as the lock is dropped.
 */
#include <errno.h>
#include <limits.h>

#include "held.h"
#include "lock.h"
#include "store_internal.h"

struct ps_store_locked {
	struct ps_store base; /* base.rd.tree: the tree, under @lock */
	struct ps_lock lock;  /* last: allocated to ps_lock_size() of the kind */
};
_Static_assert(offsetof(struct ps_store_locked, base) == 0, "psi_store_zalloc(): base first");

static inline struct ps_store_locked *to_locked(struct ps_store *s)
{
	return ps_container_of(s, struct ps_store_locked, base);
}

static inline struct ps_lock *lock_of(struct ps_store *s)
{
	return &to_locked(s)->lock;
}

static inline struct ps_store *locked_create_k(enum ps_lock_kind k)
{
	size_t size = offsetof(struct ps_store_locked, lock) + ps_lock_size(k);
	/* Cache-line aligned, as the rwlock's slots need. */
	struct ps_store *s = psi_store_zalloc(size);

	if (!s)
		return NULL;
	ps_lock_init(lock_of(s), k);
	return s;
}

static void locked_destroy(struct ps_store *s)
{
	psi_store_free_ranges(s);
	psi_free_aligned(to_locked(s));
}

/*
 * A read section of a SPIN store holds its one lock: the thread that opens
 * one inside another of the same store waits for itself.  RWLOCK sections
 * nest (rwlock.h).  Every section is recorded (held.h) for the writers'
 * -EDEADLK (store.c).
 */
static inline bool locked_self_deadlock(struct ps_store *s, enum ps_lock_kind k)
{
	return k == PS_LOCK_SPIN && ps_held(s);
}

static inline void locked_section_enter(struct ps_store *s, enum ps_lock_kind k)
{
	ps_lock_read_lock(lock_of(s), k);
	ps_held_push(s);
}

static inline void locked_section_exit(struct ps_store *s, enum ps_lock_kind k)
{
	ps_held_pop(s);
	ps_lock_read_unlock(lock_of(s), k);
}

static const struct ps_policy *locked_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return ps_rtree_lookup_pol(&to_locked(s)->base.rd.tree, idx);
}

static inline struct ps_policy *locked_lookup_k(struct ps_store *s, uint64_t idx,
		enum ps_lock_kind k)
{
	struct ps_policy *pol;

	if (locked_self_deadlock(s, k))
		return psi_err_null(EDEADLK);
	ps_lock_read_lock(lock_of(s), k);
	pol = _ps_policy_get(ps_rtree_lookup_pol(&s->rd.tree, idx));
	ps_lock_read_unlock(lock_of(s), k);
	return ps_lookup_result(pol);
}

static inline int locked_foreach_k(struct ps_store *s, ps_foreach_fn fn, void *arg,
		enum ps_lock_kind k)
{
	int ret;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	locked_section_enter(s, k);
	ret = ps_rtree_foreach(&s->rd.tree, fn, arg);
	locked_section_exit(s, k);
	return ret;
}

static inline int locked_check_k(struct ps_store *s, const char **why, enum ps_lock_kind k)
{
	int ret;

	ps_lock_write_lock(lock_of(s), k);
	ret = ps_rtree_check(&s->rd.tree, why);
	ps_lock_write_unlock(lock_of(s), k);
	return ret;
}

/*
 * No section or walk holds the lock at this instant; none can take it
 * later (ps_store_destroy_deferred(): nobody finds the store any more).
 */
static inline bool locked_idle_k(struct ps_store *s, enum ps_lock_kind k)
{
	if (!ps_lock_write_trylock(lock_of(s), k))
		return false;
	if (k == PS_LOCK_SPIN) {
		PS_ANNOTATE_HAPPENS_AFTER(&lock_of(s)->spin); /* pairs with the last unlock */
		ps_spin_release(&lock_of(s)->spin);
	} else {
		ps_rwlock_write_unlock(&lock_of(s)->rw);
	}
	return true;
}

/* ---- windows, walks by position, batches (issue 16) ---- */

static inline int locked_foreach_range_k(struct ps_store *s, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg, enum ps_lock_kind k)
{
	int ret;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	locked_section_enter(s, k);
	ret = ps_rtree_foreach_range(&s->rd.tree, start, end, fn, arg);
	locked_section_exit(s, k);
	return ret;
}

/* Under the lock (or in a section, which holds it): no writer changes the tree. */
static int locked_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	struct ps_range *r = ps_rtree_next(&to_locked(s)->base.rd.tree, idx);

	if (!r)
		return -ENOENT;
	*start = r->start;
	*end = r->end;
	*pol = r->pol;
	return 0;
}

static inline int locked_next_k(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol, enum ps_lock_kind k)
{
	struct ps_range *r;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	ps_lock_read_lock(lock_of(s), k);
	r = ps_rtree_next(&s->rd.tree, idx);
	if (r) {
		*start = r->start;
		*end = r->end;
		*pol = _ps_policy_get(r->pol);
	}
	ps_lock_read_unlock(lock_of(s), k);
	return r ? 0 : -ENOENT;
}

/* Every op under one hold of the lock: readers see none of the batch or all of it. */
/* In place a set takes no copies: the new range and a split tail at most, per op. */
static inline int locked_set_many_k(struct ps_store *s, const struct ps_set_op *ops, size_t n,
		enum ps_lock_kind k)
{
	struct ps_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
	size_t i;

	if (n > (size_t)INT_MAX / PS_RTREE_SET_MAX_NEW ||
			ps_range_list_fill(&spares, (int)(n * PS_RTREE_SET_MAX_NEW)))
		return -ENOMEM;
	ps_lock_write_lock(lock_of(s), k);
	for (i = 0; i < n; i++)
		ps_rtree_set(&s->rd.tree, ops[i].start, ops[i].end, ops[i].pol, &spares, &removed);
	ps_lock_write_unlock(lock_of(s), k);
	/* No reader can reach them: they were unlinked under the exclusive lock. */
	ps_range_list_free(&removed);
	ps_range_list_free(&spares);
	return 0;
}

/*
 * The kind-dependent half of a variant, and its ops table.  A set is a
 * batch of one; a section of its own for lookup_copy/_node is a read lock.
 */
#define DEFINE_LOCKED_VARIANT(pfx, K)                                                              \
	static struct ps_store *pfx##_create(void)                                                 \
	{                                                                                          \
		return locked_create_k(K);                                                         \
	}                                                                                          \
	static void pfx##_read_lock(struct ps_store *s)                                            \
	{                                                                                          \
		if (locked_self_deadlock(s, K))                                                    \
			psi_misuse("ps_store_read_lock()",                                         \
					"%s store %p: this thread holds its lock already (a "      \
					"section of this store is open): it would wait for itself", \
					ps_sync_name(s->sync), (void *)s);                         \
		locked_section_enter(s, K);                                                        \
	}                                                                                          \
	static void pfx##_read_unlock(struct ps_store *s)                                          \
	{                                                                                          \
		locked_section_exit(s, K);                                                         \
	}                                                                                          \
	static struct ps_policy *pfx##_lookup(struct ps_store *s, uint64_t idx)                    \
	{                                                                                          \
		return locked_lookup_k(s, idx, K);                                                 \
	}                                                                                          \
	static inline int pfx##_section_begin(struct ps_store *s)                                  \
	{                                                                                          \
		ps_lock_read_lock(lock_of(s), K);                                                  \
		return 0;                                                                          \
	}                                                                                          \
	static inline void pfx##_section_end(struct ps_store *s, int token)                        \
	{                                                                                          \
		(void)token;                                                                       \
		ps_lock_read_unlock(lock_of(s), K);                                                \
	}                                                                                          \
	PS_DEFINE_LOOKUP_COPY_NODE(pfx##_in, pfx##_section_begin, locked_lookup_borrow,            \
			pfx##_section_end)                                                         \
	static int pfx##_lookup_copy(struct ps_store *s, uint64_t idx,                             \
			struct ps_policy_view *view)                                               \
	{                                                                                          \
		return locked_self_deadlock(s, K) ? -EDEADLK : pfx##_in_lookup_copy(s, idx, view); \
	}                                                                                          \
	static int pfx##_lookup_node(struct ps_store *s, uint64_t idx, int local_node)             \
	{                                                                                          \
		return locked_self_deadlock(s, K) ? -EDEADLK :                                     \
						    pfx##_in_lookup_node(s, idx, local_node);      \
	}                                                                                          \
	static int pfx##_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)                  \
	{                                                                                          \
		return locked_foreach_k(s, fn, arg, K);                                            \
	}                                                                                          \
	static int pfx##_check(struct ps_store *s, const char **why)                               \
	{                                                                                          \
		return locked_check_k(s, why, K);                                                  \
	}                                                                                          \
	static struct ps_lstat *pfx##_lock_stat(struct ps_store *s)                                \
	{                                                                                          \
		return ps_lock_stat(lock_of(s), K);                                                \
	}                                                                                          \
	static int pfx##_foreach_range(struct ps_store *s, uint64_t start, uint64_t end,           \
			ps_foreach_fn fn, void *arg)                                               \
	{                                                                                          \
		return locked_foreach_range_k(s, start, end, fn, arg, K);                          \
	}                                                                                          \
	static int pfx##_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,    \
			struct ps_policy **pol)                                                    \
	{                                                                                          \
		return locked_next_k(s, idx, start, end, pol, K);                                  \
	}                                                                                          \
	static int pfx##_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)       \
	{                                                                                          \
		return locked_set_many_k(s, ops, n, K);                                            \
	}                                                                                          \
	static bool pfx##_idle(struct ps_store *s)                                                 \
	{                                                                                          \
		return locked_idle_k(s, K);                                                        \
	}                                                                                          \
	static int pfx##_set(struct ps_store *s, uint64_t start, uint64_t end,                     \
			struct ps_policy *pol)                                                     \
	{                                                                                          \
		const struct ps_set_op op = { .start = start, .end = end, .pol = pol };            \
                                                                                                   \
		return locked_set_many_k(s, &op, 1, K);                                            \
	}                                                                                          \
	const struct ps_sync_ops psi_sync_##pfx##_ops = {                                          \
		.create = pfx##_create, .destroy = locked_destroy, .lookup = pfx##_lookup,         \
		.read_lock = pfx##_read_lock, .read_unlock = pfx##_read_unlock,                    \
		.lookup_borrow = locked_lookup_borrow, .lookup_copy = pfx##_lookup_copy,           \
		.lookup_node = pfx##_lookup_node, .set = pfx##_set, .foreach = pfx##_foreach,      \
		.check = pfx##_check, .lock_stat = pfx##_lock_stat,                                \
		.foreach_range = pfx##_foreach_range, .next = pfx##_next,                          \
		.next_borrow = locked_next_borrow, .set_many = pfx##_set_many,                     \
		.idle = pfx##_idle,                                                                \
	};

DEFINE_LOCKED_VARIANT(spin, PS_LOCK_SPIN)
DEFINE_LOCKED_VARIANT(rwlock, PS_LOCK_RWLOCK)
