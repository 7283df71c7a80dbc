// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * SPIN and RWLOCK stores: one lock around one tree.  The two differ only in
 * the lock, so every function here is written once, always inlined, with
 * the kind of lock as a constant argument, and instantiated by short named
 * wrappers per kind (spin_*, rwlock_*): each variant's ops table reaches
 * its own lock's fast path with no further branch, and a SPIN store
 * allocates no reader slots.
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

psi_always_inline struct ps_store_locked *to_locked(struct ps_store *s)
{
	return ps_container_of(s, struct ps_store_locked, base);
}

psi_always_inline struct ps_lock *lock_of(struct ps_store *s)
{
	return &to_locked(s)->lock;
}

psi_always_inline struct ps_store *locked_create_k(enum ps_lock_kind k)
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
psi_always_inline bool locked_self_deadlock(struct ps_store *s, enum ps_lock_kind k)
{
	return k == PS_LOCK_SPIN && ps_held(s);
}

psi_always_inline void locked_section_enter(struct ps_store *s, enum ps_lock_kind k)
{
	ps_lock_read_lock(lock_of(s), k);
	ps_held_push(s);
}

psi_always_inline void locked_section_exit(struct ps_store *s, enum ps_lock_kind k)
{
	ps_held_pop(s);
	ps_lock_read_unlock(lock_of(s), k);
}

static const struct ps_policy *locked_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return ps_rtree_lookup_pol(&to_locked(s)->base.rd.tree, idx);
}

psi_always_inline struct ps_policy *locked_lookup_k(struct ps_store *s, uint64_t idx,
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

psi_always_inline int locked_foreach_k(struct ps_store *s, ps_foreach_fn fn, void *arg,
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

psi_always_inline int locked_check_k(struct ps_store *s, const char **why, enum ps_lock_kind k)
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
psi_always_inline bool locked_idle_k(struct ps_store *s, enum ps_lock_kind k)
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

/* ---- windows, walks by position, batches ---- */

psi_always_inline int locked_foreach_range_k(struct ps_store *s, uint64_t start, uint64_t end,
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

psi_always_inline int locked_next_k(struct ps_store *s, uint64_t idx, uint64_t *start,
		uint64_t *end, struct ps_policy **pol, enum ps_lock_kind k)
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
psi_always_inline int locked_set_many_k(struct ps_store *s, const struct ps_set_op *ops, size_t n,
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

/* A section of its own for lookup_copy/_node is a read lock; a set is a batch of one. */
psi_always_inline void locked_read_lock_k(struct ps_store *s, enum ps_lock_kind k)
{
	if (locked_self_deadlock(s, k))
		psi_misuse("ps_store_read_lock()", "%s store %p: this thread holds its lock already "
				"(a section of this store is open): it would wait for itself",
				k == PS_LOCK_SPIN ? "spin" : "rwlock", (void *)s);
	locked_section_enter(s, k);
}

psi_always_inline int locked_lookup_copy_k(struct ps_store *s, uint64_t idx,
		struct ps_policy_view *view, enum ps_lock_kind k)
{
	int ret;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	ps_lock_read_lock(lock_of(s), k);
	ret = _ps_policy_view_fill(locked_lookup_borrow(s, idx), view);
	ps_lock_read_unlock(lock_of(s), k);
	return ret;
}

psi_always_inline int locked_lookup_node_k(struct ps_store *s, uint64_t idx, int local_node,
		enum ps_lock_kind k)
{
	int node;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	ps_lock_read_lock(lock_of(s), k);
	node = _ps_policy_node(locked_lookup_borrow(s, idx), idx, local_node);
	ps_lock_read_unlock(lock_of(s), k);
	return node;
}

psi_always_inline int locked_set_k(struct ps_store *s, uint64_t start, uint64_t end,
		struct ps_policy *pol, enum ps_lock_kind k)
{
	const struct ps_set_op op = { .start = start, .end = end, .pol = pol };

	return locked_set_many_k(s, &op, 1, k);
}

/* ---- SPIN: the cores with a spin lock ---- */

static struct ps_store *spin_create(void)
{
	return locked_create_k(PS_LOCK_SPIN);
}

static void spin_read_lock(struct ps_store *s)
{
	locked_read_lock_k(s, PS_LOCK_SPIN);
}

static void spin_read_unlock(struct ps_store *s)
{
	locked_section_exit(s, PS_LOCK_SPIN);
}

static struct ps_policy *spin_lookup(struct ps_store *s, uint64_t idx)
{
	return locked_lookup_k(s, idx, PS_LOCK_SPIN);
}

static int spin_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	return locked_lookup_copy_k(s, idx, view, PS_LOCK_SPIN);
}

static int spin_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return locked_lookup_node_k(s, idx, local_node, PS_LOCK_SPIN);
}

static int spin_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	return locked_set_k(s, start, end, pol, PS_LOCK_SPIN);
}

static int spin_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	return locked_foreach_k(s, fn, arg, PS_LOCK_SPIN);
}

static int spin_check(struct ps_store *s, const char **why)
{
	return locked_check_k(s, why, PS_LOCK_SPIN);
}

static struct ps_lstat *spin_lock_stat(struct ps_store *s)
{
	return ps_lock_stat(lock_of(s), PS_LOCK_SPIN);
}

static int spin_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	return locked_foreach_range_k(s, start, end, fn, arg, PS_LOCK_SPIN);
}

static int spin_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	return locked_next_k(s, idx, start, end, pol, PS_LOCK_SPIN);
}

static int spin_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return locked_set_many_k(s, ops, n, PS_LOCK_SPIN);
}

static bool spin_idle(struct ps_store *s)
{
	return locked_idle_k(s, PS_LOCK_SPIN);
}

const struct ps_sync_ops psi_sync_spin_ops = {
	.create = spin_create,
	.destroy = locked_destroy,
	.lookup = spin_lookup,
	.read_lock = spin_read_lock,
	.read_unlock = spin_read_unlock,
	.lookup_borrow = locked_lookup_borrow,
	.lookup_copy = spin_lookup_copy,
	.lookup_node = spin_lookup_node,
	.set = spin_set,
	.foreach = spin_foreach,
	.check = spin_check,
	.lock_stat = spin_lock_stat,
	.foreach_range = spin_foreach_range,
	.next = spin_next,
	.next_borrow = locked_next_borrow,
	.set_many = spin_set_many,
	.idle = spin_idle,
};

/* ---- RWLOCK: the cores with a reader-writer lock ---- */

static struct ps_store *rwlock_create(void)
{
	return locked_create_k(PS_LOCK_RWLOCK);
}

static void rwlock_read_lock(struct ps_store *s)
{
	locked_read_lock_k(s, PS_LOCK_RWLOCK);
}

static void rwlock_read_unlock(struct ps_store *s)
{
	locked_section_exit(s, PS_LOCK_RWLOCK);
}

static struct ps_policy *rwlock_lookup(struct ps_store *s, uint64_t idx)
{
	return locked_lookup_k(s, idx, PS_LOCK_RWLOCK);
}

static int rwlock_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	return locked_lookup_copy_k(s, idx, view, PS_LOCK_RWLOCK);
}

static int rwlock_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return locked_lookup_node_k(s, idx, local_node, PS_LOCK_RWLOCK);
}

static int rwlock_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	return locked_set_k(s, start, end, pol, PS_LOCK_RWLOCK);
}

static int rwlock_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	return locked_foreach_k(s, fn, arg, PS_LOCK_RWLOCK);
}

static int rwlock_check(struct ps_store *s, const char **why)
{
	return locked_check_k(s, why, PS_LOCK_RWLOCK);
}

static struct ps_lstat *rwlock_lock_stat(struct ps_store *s)
{
	return ps_lock_stat(lock_of(s), PS_LOCK_RWLOCK);
}

static int rwlock_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	return locked_foreach_range_k(s, start, end, fn, arg, PS_LOCK_RWLOCK);
}

static int rwlock_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	return locked_next_k(s, idx, start, end, pol, PS_LOCK_RWLOCK);
}

static int rwlock_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return locked_set_many_k(s, ops, n, PS_LOCK_RWLOCK);
}

static bool rwlock_idle(struct ps_store *s)
{
	return locked_idle_k(s, PS_LOCK_RWLOCK);
}

const struct ps_sync_ops psi_sync_rwlock_ops = {
	.create = rwlock_create,
	.destroy = locked_destroy,
	.lookup = rwlock_lookup,
	.read_lock = rwlock_read_lock,
	.read_unlock = rwlock_read_unlock,
	.lookup_borrow = locked_lookup_borrow,
	.lookup_copy = rwlock_lookup_copy,
	.lookup_node = rwlock_lookup_node,
	.set = rwlock_set,
	.foreach = rwlock_foreach,
	.check = rwlock_check,
	.lock_stat = rwlock_lock_stat,
	.foreach_range = rwlock_foreach_range,
	.next = rwlock_next,
	.next_borrow = locked_next_borrow,
	.set_many = rwlock_set_many,
	.idle = rwlock_idle,
};
