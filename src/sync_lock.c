// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * SPIN and RWLOCK stores: one lock around one tree.  The two differ only in
 * the lock, so they share every function here; the variant is a
 * well-predicted branch on the store's kind.
 *
 * Readers and writers exclude each other completely, so the tree is never
 * seen half-updated, lookups are linearizable at the acquisition, and
 * removed ranges can be freed as soon as the lock is dropped.
 */
#include <errno.h>
#include <limits.h>

#include "store_internal.h"

struct ps_store_locked {
	struct ps_store base; /* base.rd.tree: the tree, under @lock */
	union {
		struct ps_spinlock spin;
		struct ps_rwlock rw;
	} lock;
};

static inline struct ps_store_locked *to_locked(struct ps_store *s)
{
	return ps_container_of(s, struct ps_store_locked, base);
}

static void locked_read_lock(struct ps_store *s)
{
	struct ps_store_locked *ls = to_locked(s);

	if (s->sync == PS_SYNC_SPIN)
		ps_spin_lock(&ls->lock.spin);
	else
		ps_rwlock_read_lock(&ls->lock.rw);
}

static void locked_read_unlock(struct ps_store *s)
{
	struct ps_store_locked *ls = to_locked(s);

	if (s->sync == PS_SYNC_SPIN)
		ps_spin_unlock(&ls->lock.spin);
	else
		ps_rwlock_read_unlock(&ls->lock.rw);
}

static void locked_write_lock(struct ps_store_locked *ls)
{
	if (ls->base.sync == PS_SYNC_SPIN)
		ps_spin_lock(&ls->lock.spin);
	else
		ps_rwlock_write_lock(&ls->lock.rw);
}

static void locked_write_unlock(struct ps_store_locked *ls)
{
	if (ls->base.sync == PS_SYNC_SPIN)
		ps_spin_unlock(&ls->lock.spin);
	else
		ps_rwlock_write_unlock(&ls->lock.rw);
}

static struct ps_store *locked_create(void)
{
	struct ps_store_locked *ls;

	/* The rwlock's slots are cache-line aligned. */
	ls = _ps_zalloc_aligned(sizeof(*ls));
	if (!ls)
		return NULL;
	ls->base.size = sizeof(*ls);
	ps_rtree_init(&ls->base.rd.tree);
	/*
	 * The variant is set by the caller after create(): initialise both
	 * members of the union (both start as zeroes; each init also tells
	 * the thread checkers which of its words are atomics-only).
	 */
	ps_rwlock_init(&ls->lock.rw);
	ps_spin_init(&ls->lock.spin);
	return &ls->base;
}

static void locked_destroy(struct ps_store *s)
{
	struct ps_store_locked *ls = to_locked(s);
	struct ps_range_list removed = { NULL, 0, NULL };

	ps_rtree_clear(&ls->base.rd.tree, &removed);
	ps_range_list_free(&removed);
	_ps_free_aligned(ls);
}

static const struct ps_policy *locked_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return ps_rtree_lookup_pol(&to_locked(s)->base.rd.tree, idx);
}

static struct ps_policy *locked_lookup(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	locked_read_lock(s);
	pol = _ps_policy_get(ps_rtree_lookup_pol(&to_locked(s)->base.rd.tree, idx));
	locked_read_unlock(s);
	return ps_lookup_result(pol);
}

static inline int locked_section_begin(struct ps_store *s)
{
	locked_read_lock(s);
	return 0;
}

static inline void locked_section_end(struct ps_store *s, int token)
{
	(void)token;
	locked_read_unlock(s);
}

PS_DEFINE_LOOKUP_COPY_NODE(locked, locked_section_begin, locked_lookup_borrow, locked_section_end)

static int locked_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	int ret;

	locked_read_lock(s);
	ret = ps_rtree_foreach(&to_locked(s)->base.rd.tree, fn, arg);
	locked_read_unlock(s);
	return ret;
}

static int locked_check(struct ps_store *s, const char **why)
{
	struct ps_store_locked *ls = to_locked(s);
	int ret;

	locked_write_lock(ls);
	ret = ps_rtree_check(&ls->base.rd.tree, why);
	locked_write_unlock(ls);
	return ret;
}

static const struct ps_rtree *locked_tree(struct ps_store *s)
{
	return &to_locked(s)->base.rd.tree;
}

static struct ps_lstat *locked_lock_stat(struct ps_store *s, int dir)
{
	struct ps_store_locked *ls = to_locked(s);

	(void)dir;
	return s->sync == PS_SYNC_SPIN ? ps_spin_stat(&ls->lock.spin) : ps_rwlock_stat(&ls->lock.rw);
}

/* ---- windows, walks by position, batches (issue 16) ---- */

static int locked_foreach_range(struct ps_store *s, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg)
{
	int ret;

	locked_read_lock(s);
	ret = ps_rtree_foreach_range(&to_locked(s)->base.rd.tree, start, end, fn, arg);
	locked_read_unlock(s);
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

static int locked_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	struct ps_range *r;

	locked_read_lock(s);
	r = ps_rtree_next(&to_locked(s)->base.rd.tree, idx);
	if (r) {
		*start = r->start;
		*end = r->end;
		*pol = _ps_policy_get(r->pol);
	}
	locked_read_unlock(s);
	return r ? 0 : -ENOENT;
}

/* Every op under one hold of the lock: readers see none of the batch or all of it. */
/* In place a set takes no copies: the new range and a split tail at most, per op. */
static int locked_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	struct ps_store_locked *ls = to_locked(s);
	struct ps_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
	size_t i;

	if (n > (size_t)INT_MAX / PS_RTREE_SET_MAX_NEW ||
			ps_range_list_fill(&spares, (int)(n * PS_RTREE_SET_MAX_NEW)))
		return -ENOMEM;
	locked_write_lock(ls);
	for (i = 0; i < n; i++)
		ps_rtree_set(&ls->base.rd.tree, ops[i].start, ops[i].end, ops[i].pol, &spares, &removed);
	locked_write_unlock(ls);
	/* No reader can reach them: they were unlinked under the exclusive lock. */
	ps_range_list_free(&removed);
	ps_range_list_free(&spares);
	return 0;
}

/* A set is a batch of one. */
static int locked_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	const struct ps_set_op op = { .start = start, .end = end, .pol = pol };

	return locked_set_many(s, &op, 1);
}

#define PS_LOCKED_OPS                                                                              \
	.create = locked_create, .destroy = locked_destroy,                           \
	.lookup = locked_lookup, .read_lock = locked_read_lock,                                    \
	.read_unlock = locked_read_unlock, .lookup_borrow = locked_lookup_borrow,                  \
	.lookup_copy = locked_lookup_copy, .lookup_node = locked_lookup_node,                      \
	.set = locked_set, .foreach = locked_foreach, .check = locked_check,                       \
	.tree = locked_tree, .lock_stat = locked_lock_stat,                                        \
	.foreach_range = locked_foreach_range, .next = locked_next,                                \
	.next_borrow = locked_next_borrow, .set_many = locked_set_many

const struct ps_sync_ops _ps_sync_spin_ops = { PS_LOCKED_OPS };
const struct ps_sync_ops _ps_sync_rwlock_ops = { PS_LOCKED_OPS };
