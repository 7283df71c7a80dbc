/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store: a latch of two range trees, written once and compiled once
 * per liburcu flavour (sync_rcu.c: memb, sync_qsbr.c: qsbr).  The including
 * file defines PS_LATCH_READ_ENTER(), PS_LATCH_READ_EXIT(),
 * PS_LATCH_SYNCHRONIZE() and PS_LATCH_OPS (the name of the ops table), and
 * may define PS_LATCH_WRITE_ENTER() / PS_LATCH_WRITE_EXIT(token) around the
 * writer's mutex (QSBR: a writer must not wait for the mutex while online),
 * and PS_LATCH_IN_SECTION(), true when the calling thread is inside a
 * read-side section already, so that a lookup needs no section of its own
 * (QSBR: an online thread).
 *
 * Why readers are safe.  In-place red-black rotations can hide a node from
 * a reader walking the tree at that moment (the warning in Linux's
 * rbtree_latch.h), so no tree is ever changed while a reader may be in it:
 *
 *   @cur points at the tree readers use; the other tree is the standby.
 *   Invariant between updates: both trees hold the same ranges and no
 *   reader is inside the standby.
 *   An update, under @wlock:
 *     1. apply the change to the standby (no reader there: invariant);
 *     2. publish it: cur = standby (release store; a reader's acquire load
 *        of @cur then sees the whole updated tree);
 *     3. wait for a grace period: every reader that loaded the old @cur
 *        has left its read-side section, and new readers load the new one;
 *     4. apply the same change to the old tree (no reader can be there).
 *   After 4 the trees are equal again and no reader is in the new standby
 *   (the old tree): the invariant holds for the next update.
 *
 * So readers walk a tree that does not change under them: they never
 * retry, never block, and write nothing but their own liburcu per-thread
 * counter (nothing at all under QSBR).  A lookup is linearizable at its
 * load of @cur; ps_store_set() returns only after step 2, its
 * linearization point.  Every range removed in step 1 or 4 was unreachable
 * for readers when removed, so it is freed at once, with its policy
 * reference; policies found by a reader stay referenced by the tree for
 * at least its whole read-side section.  Cost: two nodes per range and one
 * grace period per update.
 */
#include <errno.h>
#include <pthread.h>

#include "annotate.h"
#include "store_internal.h"

#ifdef PS_LATCH_IN_SECTION
/* Out of line, off the path of the lookups that need no section. */
#define PS_LATCH_LOOKUP_SECTION static __attribute__((noinline))
#else
#define PS_LATCH_IN_SECTION() false
#define PS_LATCH_LOOKUP_SECTION static inline
#endif

#ifndef PS_LATCH_WRITE_ENTER
#define PS_LATCH_WRITE_ENTER() false
#define PS_LATCH_WRITE_EXIT(token) ((void)(token))
#endif

struct ps_store_latch {
	struct ps_store base;
	struct ps_rtree *cur __ps_cacheline_aligned; /* read by every reader */
	pthread_mutex_t wlock __ps_cacheline_aligned; /* writers may sleep in a grace period */
	struct ps_rtree tree[2] __ps_cacheline_aligned;
};

static inline struct ps_store_latch *to_latch(struct ps_store *s)
{
	return ps_container_of(s, struct ps_store_latch, base);
}

static inline const struct ps_rtree *latch_cur(struct ps_store_latch *ls)
{
	const struct ps_rtree *t = PS_LOAD_ACQUIRE(ls->cur); /* pairs with the publish in latch_set() */

	PS_ANNOTATE_HAPPENS_AFTER(&ls->cur);
	return t;
}

static struct ps_store *latch_create(void)
{
	struct ps_store_latch *ls = _ps_zalloc_aligned(sizeof(*ls));

	if (!ls)
		return NULL;
	ls->base.size = sizeof(*ls);
	ps_rtree_init(&ls->tree[0]);
	ps_rtree_init(&ls->tree[1]);
	ls->cur = &ls->tree[0];
	PS_ANNOTATE_BENIGN_RACE_SIZED(&ls->cur, sizeof(ls->cur)); /* atomics only */
	pthread_mutex_init(&ls->wlock, NULL);
	return &ls->base;
}

static void latch_destroy(struct ps_store *s)
{
	struct ps_store_latch *ls = to_latch(s);
	struct ps_range_list removed = { NULL };

	ps_rtree_clear(&ls->tree[0], &removed);
	ps_rtree_clear(&ls->tree[1], &removed);
	ps_range_list_free(&removed);
	pthread_mutex_destroy(&ls->wlock);
	_ps_free_aligned(ls);
}

static void latch_read_lock(struct ps_store *s)
{
	(void)s;
	PS_LATCH_READ_ENTER();
}

static void latch_read_unlock(struct ps_store *s)
{
	PS_ANNOTATE_HAPPENS_BEFORE(s); /* pairs with the grace period in latch_set() */
	PS_LATCH_READ_EXIT();
}

static const struct ps_policy *latch_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return ps_rtree_lookup_pol(latch_cur(to_latch(s)), idx);
}

/* Inside a read-side section. */
static inline struct ps_policy *latch_get(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	/* The tree holds its reference for our whole section: a plain increment is safe. */
	pol = _ps_policy_get(ps_rtree_lookup_pol(latch_cur(to_latch(s)), idx));
	PS_ANNOTATE_HAPPENS_BEFORE(s);
	return pol;
}

PS_LATCH_LOOKUP_SECTION struct ps_policy *latch_lookup_section(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	PS_LATCH_READ_ENTER();
	pol = latch_get(s, idx);
	PS_LATCH_READ_EXIT();
	return ps_lookup_result(pol);
}

static struct ps_policy *latch_lookup(struct ps_store *s, uint64_t idx)
{
	if (!PS_LATCH_IN_SECTION())
		return latch_lookup_section(s, idx);
	return ps_lookup_result(latch_get(s, idx));
}

static void latch_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol,
		struct ps_range_list *spares)
{
	struct ps_store_latch *ls = to_latch(s);
	struct ps_range_list removed = { NULL };
	struct ps_rtree *old, *standby;
	bool token = PS_LATCH_WRITE_ENTER();

	pthread_mutex_lock(&ls->wlock);
	old = ls->cur;
	standby = old == &ls->tree[0] ? &ls->tree[1] : &ls->tree[0];
	ps_rtree_set(standby, start, end, pol, spares, &removed);
	PS_ANNOTATE_HAPPENS_BEFORE(&ls->cur);
	PS_STORE_RELEASE(ls->cur, standby);
	PS_LATCH_SYNCHRONIZE();
	/* The grace period: every reader of the old tree left (PS_LATCH_READ_EXIT). */
	PS_ANNOTATE_HAPPENS_AFTER(&ls->base);
	ps_rtree_set(old, start, end, pol, spares, &removed);
	pthread_mutex_unlock(&ls->wlock);
	PS_LATCH_WRITE_EXIT(token);
	ps_range_list_free(&removed);
}

static int latch_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	int ret;

	/* The current tree cannot change until we leave the section: a snapshot. */
	PS_LATCH_READ_ENTER();
	ret = ps_rtree_foreach(latch_cur(to_latch(s)), fn, arg);
	PS_ANNOTATE_HAPPENS_BEFORE(s);
	PS_LATCH_READ_EXIT();
	return ret;
}

static int latch_check(struct ps_store *s, const char **why)
{
	struct ps_store_latch *ls = to_latch(s);
	bool token = PS_LATCH_WRITE_ENTER();
	int ret;

	pthread_mutex_lock(&ls->wlock);
	ret = ps_rtree_check(&ls->tree[0], why);
	if (!ret)
		ret = ps_rtree_check(&ls->tree[1], why);
	if (!ret && !ps_rtree_same(&ls->tree[0], &ls->tree[1])) {
		*why = "the two trees of the latch differ";
		ret = -EUCLEAN;
	}
	if (!ret && ls->cur != &ls->tree[0] && ls->cur != &ls->tree[1]) {
		*why = "current tree pointer is corrupt";
		ret = -EUCLEAN;
	}
	pthread_mutex_unlock(&ls->wlock);
	PS_LATCH_WRITE_EXIT(token);
	return ret;
}

static const struct ps_rtree *latch_tree(struct ps_store *s)
{
	return latch_cur(to_latch(s));
}

static struct ps_lstat *latch_lock_stat(struct ps_store *s, int dir)
{
	(void)s;
	(void)dir;
	return NULL;
}

const struct ps_sync_ops PS_LATCH_OPS = {
	.ntrees = 2,
	.create = latch_create,
	.destroy = latch_destroy,
	.lookup = latch_lookup,
	.read_lock = latch_read_lock,
	.read_unlock = latch_read_unlock,
	.lookup_borrow = latch_lookup_borrow,
	.set = latch_set,
	.foreach = latch_foreach,
	.check = latch_check,
	.tree = latch_tree,
	.lock_stat = latch_lock_stat,
};
