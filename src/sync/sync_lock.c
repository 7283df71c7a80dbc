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

#include "alloc_internal.h"
#include "held.h"
#include "lock.h"
#include "store_internal.h"

struct psi_store_locked {
	struct ps_store base; /* base.rd.tree: the tree, under @lock */
	struct psi_lock lock;  /* last: allocated to psi_lock_size() of the kind */
};
_Static_assert(offsetof(struct psi_store_locked, base) == 0, "psi_store_zalloc(): base first");

psi_always_inline struct psi_store_locked *to_locked(struct ps_store *s)
{
	return psi_container_of(s, struct psi_store_locked, base);
}

psi_always_inline struct psi_lock *lock_of(struct ps_store *s)
{
	return &to_locked(s)->lock;
}

psi_always_inline struct ps_store *locked_create_k(enum psi_lock_kind k)
{
	size_t size = offsetof(struct psi_store_locked, lock) + psi_lock_size(k);
	/* Cache-line aligned, as the rwlock's slots need. */
	struct ps_store *s = psi_store_zalloc(size);

	if (!s)
		return NULL;
	psi_lock_init(lock_of(s), k);
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
psi_always_inline bool locked_self_deadlock(struct ps_store *s, enum psi_lock_kind k)
{
	return k == PSI_LOCK_SPIN && psi_held(s);
}

psi_always_inline void locked_section_enter(struct ps_store *s, enum psi_lock_kind k)
{
	psi_lock_read_lock(lock_of(s), k);
	psi_held_push(s);
}

/* A section this thread does not hold is refused before the lock is touched. */
psi_always_inline void locked_section_exit(struct ps_store *s, enum psi_lock_kind k)
{
	if (psi_unlikely(!psi_held_pop(s)))
		psi_stray_read_unlock(k == PSI_LOCK_SPIN ? "spin" : "rwlock", s);
	psi_lock_read_unlock(lock_of(s), k);
}

static const struct ps_policy *locked_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return psi_rangetree_lookup_pol(&to_locked(s)->base.rd.tree, idx);
}

psi_always_inline struct ps_policy *locked_lookup_k(struct ps_store *s, uint64_t idx,
		enum psi_lock_kind k)
{
	struct ps_policy *pol;

	if (locked_self_deadlock(s, k))
		return psi_err_null(EDEADLK);
	psi_lock_read_lock(lock_of(s), k);
	pol = _ps_policy_get(psi_rangetree_lookup_pol(&s->rd.tree, idx));
	psi_lock_read_unlock(lock_of(s), k);
	return psi_lookup_result(pol);
}

psi_always_inline int locked_foreach_k(struct ps_store *s, ps_foreach_fn fn, void *arg,
		enum psi_lock_kind k)
{
	int ret;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	locked_section_enter(s, k);
	ret = psi_rangetree_foreach(&s->rd.tree, fn, arg);
	locked_section_exit(s, k);
	return ret;
}

psi_always_inline int locked_check_k(struct ps_store *s, const char **why, enum psi_lock_kind k)
{
	int ret;

	psi_lock_write_lock(lock_of(s), k);
	ret = psi_rangetree_check(&s->rd.tree, why);
	psi_lock_write_unlock(lock_of(s), k);
	return ret;
}

/*
 * No section or walk holds the lock at this instant; none can take it
 * later (ps_store_destroy_deferred(): nobody finds the store any more).
 */
psi_always_inline bool locked_idle_k(struct ps_store *s, enum psi_lock_kind k)
{
	if (!psi_lock_write_trylock(lock_of(s), k))
		return false;
	if (k == PSI_LOCK_SPIN) {
		PSI_ANNOTATE_HAPPENS_AFTER(&lock_of(s)->spin); /* pairs with the last unlock */
		psi_spin_release(&lock_of(s)->spin);
	} else {
		psi_rwlock_write_unlock(&lock_of(s)->rw);
	}
	return true;
}

/* ---- windows, walks by position, batches ---- */

psi_always_inline int locked_foreach_range_k(struct ps_store *s, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg, enum psi_lock_kind k)
{
	int ret;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	locked_section_enter(s, k);
	ret = psi_rangetree_foreach_range(&s->rd.tree, start, end, fn, arg);
	locked_section_exit(s, k);
	return ret;
}

/* Under the lock (or in a section, which holds it): no writer changes the tree. */
static int locked_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	struct ps_range *r = psi_rangetree_next(&to_locked(s)->base.rd.tree, idx);

	if (!r)
		return -ENOENT;
	*start = r->start;
	*end = r->end;
	*pol = r->pol;
	return 0;
}

psi_always_inline int locked_next_k(struct ps_store *s, uint64_t idx, uint64_t *start,
		uint64_t *end, struct ps_policy **pol, enum psi_lock_kind k)
{
	struct ps_range *r;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	psi_lock_read_lock(lock_of(s), k);
	r = psi_rangetree_next(&s->rd.tree, idx);
	if (r) {
		*start = r->start;
		*end = r->end;
		*pol = _ps_policy_get(r->pol);
	}
	psi_lock_read_unlock(lock_of(s), k);
	return r ? 0 : -ENOENT;
}

/* Every op under one hold of the lock: readers see none of the batch or all of it. */
/* In place a set takes no copies: the new range and a split tail at most, per op. */
psi_always_inline int locked_set_many_k(struct ps_store *s, const struct ps_set_op *ops, size_t n,
		enum psi_lock_kind k)
{
	struct psi_range_list spares = { NULL, 0, NULL }, removed = { NULL, 0, NULL };
	size_t i;

	if (n > (size_t)INT_MAX / PSI_RANGETREE_SET_MAX_NEW ||
			psi_range_list_fill(&spares, (int)(n * PSI_RANGETREE_SET_MAX_NEW)))
		return -ENOMEM;
	psi_lock_write_lock(lock_of(s), k);
	for (i = 0; i < n; i++)
		psi_rangetree_set(&s->rd.tree, ops[i].start, ops[i].end, ops[i].pol, &spares, &removed);
	psi_lock_write_unlock(lock_of(s), k);
	/* No reader can reach them: they were unlinked under the exclusive lock. */
	psi_range_list_free(&removed);
	psi_range_list_free(&spares);
	return 0;
}

/* A section of its own for lookup_copy/_node is a read lock; a set is a batch of one. */
psi_always_inline void locked_read_lock_k(struct ps_store *s, enum psi_lock_kind k)
{
	if (locked_self_deadlock(s, k))
		psi_misuse("ps_store_read_lock()", "%s store %p: this thread holds its lock already "
				"(a section of this store is open): it would wait for itself",
				k == PSI_LOCK_SPIN ? "spin" : "rwlock", (void *)s);
	locked_section_enter(s, k);
}

psi_always_inline int locked_lookup_copy_k(struct ps_store *s, uint64_t idx,
		struct ps_policy_view *view, enum psi_lock_kind k)
{
	int ret;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	psi_lock_read_lock(lock_of(s), k);
	ret = _ps_policy_view_fill(locked_lookup_borrow(s, idx), view);
	psi_lock_read_unlock(lock_of(s), k);
	return ret;
}

psi_always_inline int locked_lookup_node_k(struct ps_store *s, uint64_t idx, int local_node,
		enum psi_lock_kind k)
{
	int node;

	if (locked_self_deadlock(s, k))
		return -EDEADLK;
	psi_lock_read_lock(lock_of(s), k);
	node = _ps_policy_node(locked_lookup_borrow(s, idx), idx, local_node);
	psi_lock_read_unlock(lock_of(s), k);
	return node;
}

psi_always_inline int locked_set_k(struct ps_store *s, uint64_t start, uint64_t end,
		struct ps_policy *pol, enum psi_lock_kind k)
{
	const struct ps_set_op op = { .start = start, .end = end, .pol = pol };

	return locked_set_many_k(s, &op, 1, k);
}

/* ---- SPIN: the cores with a spin lock ---- */

static struct ps_store *spin_create(void)
{
	return locked_create_k(PSI_LOCK_SPIN);
}

static void spin_read_lock(struct ps_store *s)
{
	locked_read_lock_k(s, PSI_LOCK_SPIN);
}

static void spin_read_unlock(struct ps_store *s)
{
	locked_section_exit(s, PSI_LOCK_SPIN);
}

static struct ps_policy *spin_lookup(struct ps_store *s, uint64_t idx)
{
	return locked_lookup_k(s, idx, PSI_LOCK_SPIN);
}

static int spin_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	return locked_lookup_copy_k(s, idx, view, PSI_LOCK_SPIN);
}

static int spin_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return locked_lookup_node_k(s, idx, local_node, PSI_LOCK_SPIN);
}

static int spin_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	return locked_set_k(s, start, end, pol, PSI_LOCK_SPIN);
}

static int spin_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	return locked_foreach_k(s, fn, arg, PSI_LOCK_SPIN);
}

static int spin_check(struct ps_store *s, const char **why)
{
	return locked_check_k(s, why, PSI_LOCK_SPIN);
}

static struct psi_lstat *spin_lock_stat(struct ps_store *s)
{
	return psi_lock_stat(lock_of(s), PSI_LOCK_SPIN);
}

static int spin_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	return locked_foreach_range_k(s, start, end, fn, arg, PSI_LOCK_SPIN);
}

static int spin_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	return locked_next_k(s, idx, start, end, pol, PSI_LOCK_SPIN);
}

static int spin_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return locked_set_many_k(s, ops, n, PSI_LOCK_SPIN);
}

static bool spin_idle(struct ps_store *s)
{
	return locked_idle_k(s, PSI_LOCK_SPIN);
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
	return locked_create_k(PSI_LOCK_RWLOCK);
}

static void rwlock_read_lock(struct ps_store *s)
{
	locked_read_lock_k(s, PSI_LOCK_RWLOCK);
}

static void rwlock_read_unlock(struct ps_store *s)
{
	locked_section_exit(s, PSI_LOCK_RWLOCK);
}

static struct ps_policy *rwlock_lookup(struct ps_store *s, uint64_t idx)
{
	return locked_lookup_k(s, idx, PSI_LOCK_RWLOCK);
}

static int rwlock_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	return locked_lookup_copy_k(s, idx, view, PSI_LOCK_RWLOCK);
}

static int rwlock_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return locked_lookup_node_k(s, idx, local_node, PSI_LOCK_RWLOCK);
}

static int rwlock_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	return locked_set_k(s, start, end, pol, PSI_LOCK_RWLOCK);
}

static int rwlock_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	return locked_foreach_k(s, fn, arg, PSI_LOCK_RWLOCK);
}

static int rwlock_check(struct ps_store *s, const char **why)
{
	return locked_check_k(s, why, PSI_LOCK_RWLOCK);
}

static struct psi_lstat *rwlock_lock_stat(struct ps_store *s)
{
	return psi_lock_stat(lock_of(s), PSI_LOCK_RWLOCK);
}

static int rwlock_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	return locked_foreach_range_k(s, start, end, fn, arg, PSI_LOCK_RWLOCK);
}

static int rwlock_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	return locked_next_k(s, idx, start, end, pol, PSI_LOCK_RWLOCK);
}

static int rwlock_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return locked_set_many_k(s, ops, n, PSI_LOCK_RWLOCK);
}

static bool rwlock_idle(struct ps_store *s)
{
	return locked_idle_k(s, PSI_LOCK_RWLOCK);
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
