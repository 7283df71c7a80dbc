/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read side of every store, inline: what a program that defines
 * POLSTORE_INLINE compiles into its own code in place of calls to
 * ps_store_lookup(), ps_store_lookup_borrow(), ps_store_read_lock(),
 * ps_store_read_unlock(), ps_store_lookup_copy(), ps_store_lookup_node()
 * and ps_policy_node() (polstore/store.h maps the names), with liburcu's
 * own read side inlined too (its urcu/static headers, as _LGPL_SOURCE
 * does).
 *
 * Each call checks its arguments and handles the common case inline, and
 * hands the rest to the library's exported call (the library's own copy,
 * src/store/store.c, to the variant's read path), so behaviour is the
 * library's.  A store whose tag (polstore/static/layout.h) names other
 * layouts is always handed over.  The common cases:
 *  - RCU, SEQLOCK: a thread liburcu already registered opens a memb
 *    section inline; an unregistered one calls the library, which
 *    registers it.  SEQLOCK tries its speculative walk once inline; a try
 *    that met a writer is redone by the library (retries, then the lock).
 *  - RCU_QSBR: an online thread walks inline (it is in a section already);
 *    an offline one calls the library, which brings it online for the call.
 *  - SPIN, RWLOCK: the lock is the library's (a call), the walk of a
 *    borrowed lookup is inline.
 *
 * Every call here answers from one range (its policy, and the node hint
 * set with it) or from the gap a search ended in.  RCU and RCU_QSBR
 * readers search the read index (polstore/static/index.h): one leaf, on a
 * path a set changes with one store, so the answer linearizes at the load
 * of that leaf; or answer from the thread's cache of the range last found
 * (polstore/static/lcache.h), which linearizes at the load of the store's
 * publication count.  ps_store_next(), which may combine two leaves and
 * validates its walk (src/sync/rcu_store.c), is not inlined.
 *
 * Not an API: see polstore/static/rtree.h.  The price of inlining is that
 * the program is bound to the layouts it was built with: ps_store_create()
 * refuses a library with any other (errno EPROTO, and one line on stderr),
 * and accepts every version with the same (polstore/static/layout.h).
 */
#ifndef POLSTORE_STATIC_LOOKUP_H
#define POLSTORE_STATIC_LOOKUP_H

#include <errno.h>

#include <urcu/static/urcu-memb.h>
#include <urcu/static/urcu-qsbr.h>

#include <polstore/export.h>
#include <polstore/static/atomic.h>
#include <polstore/static/index.h>
#include <polstore/static/layout.h>
#include <polstore/static/lcache.h>
#include <polstore/static/locks.h>
#include <polstore/static/policy.h>
#include <polstore/static/store.h>
#include <polstore/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Always inlined: the point is one call or none, whatever the caller's optimiser thinks. */
#define _PS_INL static inline __attribute__((always_inline))

/*
 * The slow path: in the library, the variant's own read path; in a
 * program, the library's exported call, which is right for a store of any
 * version (and then takes the variant's path itself).
 */
#ifdef POLSTORE_BUILDING
#define _PS_INL_SLOW(op, s, ...) ((s)->op((s), ##__VA_ARGS__))
#else
#define _PS_INL_SLOW(op, s, ...) ((ps_store_##op)((s), ##__VA_ARGS__))
#endif

_PS_INL struct ps_rb_node *_ps_inl_root(const struct ps_store *s)
{
	return _PS_LOAD_ACQUIRE(s->rd.tree.root.node);
}

/* The policy of a range the walk found (NULL: none). */
_PS_INL const struct ps_policy *_ps_inl_pol(const struct ps_range *r)
{
	return r ? _PS_READ_ONCE(r->pol) : NULL;
}

/* What a lookup found: the range's policy and node hint (none: NULL, local). */
struct _ps_found {
	const struct ps_policy *pol;
	int hint;
};

_PS_INL void _ps_inl_found(const struct ps_range *r, struct _ps_found *f)
{
	f->pol = _ps_inl_pol(r);
	f->hint = r ? _PS_READ_ONCE(r->node_hint) : _PS_HINT_LOCAL;
}

/*
 * RCU, RCU_QSBR: what the read index holds at @idx (polstore/static/index.h),
 * from the thread's cache when it holds it (polstore/static/lcache.h).
 */
_PS_INL void _ps_inl_ix_found(const struct ps_store *s, uint64_t idx, struct _ps_found *f)
{
	int hint = _PS_HINT_LOCAL;

	/* A local: only @hint's address goes to the miss. */
	f->pol = _ps_lc_lookup(s, idx, &hint);
	f->hint = hint;
}

/*
 * RCU, SEQLOCK: open a memb section inline, which only a thread liburcu
 * registered may.  Return: true when it is open; false when the library
 * must open it (and register the thread).
 */
_PS_INL bool _ps_inl_memb_enter(void)
{
	if (__builtin_expect(!URCU_TLS(urcu_memb_reader).registered, 0))
		return false;
	_urcu_memb_read_lock();
	return true;
}

/*
 * SEQLOCK, inside a memb section: one speculative walk (sync_seqlock.c
 * says why it is safe).  Return: 1 with *@f when no writer intervened,
 * 0 when the library must do the lookup (it retries, then takes the lock).
 */
_PS_INL int _ps_inl_seq_try(struct ps_store *s, uint64_t idx, struct _ps_found *f)
{
	unsigned start = _PS_LOAD_ACQUIRE(s->rd.seq.seq);
	struct ps_range *r = _ps_rtree_walk(_ps_inl_root(s), idx);

	_ps_inl_found(r != PS_RTREE_OVERRUN ? r : NULL, f);
	/* Orders the walk's loads before the count's re-read (pairs with the writer's fence). */
	_PS_FENCE(ACQUIRE);
	return !(start & 1) && r != PS_RTREE_OVERRUN &&
	       _PS_READ_ONCE(s->rd.seq.seq) == start;
}

/*
 * Open the read-side section a lookup needs and find @idx's range in it.
 * Return: 1 inside a memb section (close it with _ps_inl_exit()), 0 when
 * the thread needed none (an online QSBR thread), -1 when the library must
 * do the lookup (nothing is open then).
 */
_PS_INL int _ps_inl_enter_find(struct ps_store *s, uint64_t idx, struct _ps_found *f)
{
	switch (s->tag) {
	case _PS_STORE_TAG(PS_SYNC_RCU_QSBR):
		if (__builtin_expect(!_urcu_qsbr_read_ongoing(), 0))
			return -1;
		_ps_inl_ix_found(s, idx, f);
		return 0;
	case _PS_STORE_TAG(PS_SYNC_RCU):
		if (__builtin_expect(!_ps_inl_memb_enter(), 0))
			return -1;
		_ps_inl_ix_found(s, idx, f);
		return 1;
	case _PS_STORE_TAG(PS_SYNC_SEQLOCK):
		if (__builtin_expect(!_ps_inl_memb_enter(), 0))
			return -1;
		if (__builtin_expect(_ps_inl_seq_try(s, idx, f), 1))
			return 1;
		_urcu_memb_read_unlock();
		return -1;
	default:
		return -1;
	}
}

_PS_INL void _ps_inl_exit(int token)
{
	if (token)
		_urcu_memb_read_unlock();
}

_PS_INL struct ps_policy *_ps_inl_lookup(struct ps_store *s, uint64_t idx)
{
	struct _ps_found f;
	struct ps_policy *ref;
	int token;

	if (__builtin_expect(!s, 0)) {
		errno = EINVAL;
		return NULL;
	}
	token = _ps_inl_enter_find(s, idx, &f);
	if (__builtin_expect(token < 0, 0))
		return _PS_INL_SLOW(lookup, s, idx);
	/* The range holds its reference for the whole section: a plain increment is safe. */
	ref = _ps_policy_get((struct ps_policy *)f.pol);
	_ps_inl_exit(token);
	if (!ref)
		errno = 0; /* a miss, told from a NULL store by errno */
	return ref;
}

/*
 * -EINVAL for a NULL store or a bad @view; else what the walk found,
 * copied out inside the section, or the library's lookup_copy.
 */
_PS_INL int _ps_inl_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	struct _ps_found f;
	int token, ret;

	if (__builtin_expect(!s || _ps_policy_view_check(view), 0))
		return -EINVAL;
	token = _ps_inl_enter_find(s, idx, &f);
	if (__builtin_expect(token < 0, 0))
		return _PS_INL_SLOW(lookup_copy, s, idx, view);
	ret = _ps_policy_view_fill(f.pol, view);
	_ps_inl_exit(token);
	return ret;
}

/*
 * As _ps_inl_lookup_copy(), for the node: a one-node policy's answer is in
 * the range itself, with no load from the policy.
 */
_PS_INL int _ps_inl_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	struct _ps_found f;
	int token, ret;

	if (__builtin_expect(!s || _ps_node_check(local_node), 0))
		return -EINVAL;
	token = _ps_inl_enter_find(s, idx, &f);
	if (__builtin_expect(token < 0, 0))
		return _PS_INL_SLOW(lookup_node, s, idx, local_node);
	ret = _ps_policy_node_hinted(f.hint, f.pol, idx, local_node);
	_ps_inl_exit(token);
	return ret;
}

_PS_INL int _ps_inl_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	int err = _ps_node_check(local_node);

	return err ? err : _ps_policy_node(pol, ilx, local_node);
}

_PS_INL void _ps_inl_read_lock(struct ps_store *s)
{
	if (__builtin_expect(!s, 0))
		return;
	switch (s->tag) {
	case _PS_STORE_TAG(PS_SYNC_RCU):
	case _PS_STORE_TAG(PS_SYNC_SEQLOCK):
		if (__builtin_expect(_ps_inl_memb_enter(), 1))
			return;
		break;
	case _PS_STORE_TAG(PS_SYNC_RCU_QSBR):
		/* Online by its own choice: a section is free.  Else the library counts it. */
		if (__builtin_expect(!_urcu_qsbr_read_ongoing() || _ps_qsbr_auto_depth, 0))
			break;
		_urcu_qsbr_read_lock();
		return;
	default:
		break;
	}
	_PS_INL_SLOW(read_lock, s);
}

_PS_INL void _ps_inl_read_unlock(struct ps_store *s)
{
	if (__builtin_expect(!s, 0))
		return;
	/* Outside every section the library refuses the unlock (it names the store, then aborts). */
	switch (s->tag) {
	case _PS_STORE_TAG(PS_SYNC_RCU):
	case _PS_STORE_TAG(PS_SYNC_SEQLOCK):
		if (__builtin_expect(!_urcu_memb_read_ongoing(), 0))
			break;
		_urcu_memb_read_unlock();
		return;
	case _PS_STORE_TAG(PS_SYNC_RCU_QSBR):
		if (__builtin_expect(_ps_qsbr_auto_depth != 0 || !_urcu_qsbr_read_ongoing(), 0))
			break;
		_urcu_qsbr_read_unlock();
		return;
	default:
		break;
	}
	_PS_INL_SLOW(read_unlock, s);
}

/* Inside a section ps_store_read_lock() opened (inline or not). */
_PS_INL const struct ps_policy *_ps_inl_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	struct _ps_found f;

	if (__builtin_expect(!s, 0))
		return NULL;
	switch (s->tag) {
	case _PS_STORE_TAG(PS_SYNC_RCU):
	case _PS_STORE_TAG(PS_SYNC_RCU_QSBR):
		/* A published version of the read index. */
		_ps_inl_ix_found(s, idx, &f);
		return f.pol;
	case _PS_STORE_TAG(PS_SYNC_SPIN):
	case _PS_STORE_TAG(PS_SYNC_RWLOCK):
		/* Under the caller's lock. */
		return _ps_inl_pol(_ps_rtree_walk(_ps_inl_root(s), idx));
	case _PS_STORE_TAG(PS_SYNC_SEQLOCK):
		if (__builtin_expect(_ps_inl_seq_try(s, idx, &f), 1))
			return f.pol;
		break;
	default:
		break;
	}
	return _PS_INL_SLOW(lookup_borrow, s, idx);
}

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_STATIC_LOOKUP_H */
