/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A store as its readers see it: the header every variant's store begins
 * with, and the line readers walk from.
 *
 * Not an API: see polstore/static/rtree.h.
 */
#ifndef POLSTORE_STATIC_STORE_H
#define POLSTORE_STATIC_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>
#include <polstore/policy.h>
#include <polstore/static/index.h>
#include <polstore/static/locks.h>
#include <polstore/static/rtree.h>
#include <polstore/store.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ps_sync_ops;
struct ps_store;
struct _ps_subs;
struct _ps_counts;

struct ps_store {
	/*
	 * _PS_STORE_TAG(sync) (polstore/static/layout.h): these layouts'
	 * identity and the variant, in the first word of every store of every
	 * version, so that an inlined reader built for other layouts
	 * recognises no store and takes the library's exported calls instead.
	 */
	unsigned tag;
	/*
	 * The variant's read-side entry points, copied from @ops at creation:
	 * one load less per call than going through @ops, and the slow paths
	 * inlined readers (polstore/static/lookup.h) fall back to.
	 */
	struct ps_policy *(*lookup)(struct ps_store *store, uint64_t idx);
	const struct ps_policy *(*lookup_borrow)(struct ps_store *store, uint64_t idx);
	void (*read_lock)(struct ps_store *store);
	void (*read_unlock)(struct ps_store *store);
	int (*lookup_copy)(struct ps_store *store, uint64_t idx, struct ps_policy_view *view);
	int (*lookup_node)(struct ps_store *store, uint64_t idx, int local_node);
	/*
	 * The read index of RCU and RCU_QSBR (polstore/static/index.h), on
	 * the line of the entry points, which no set writes: a lookup reads
	 * this one line of the store, and misses it only after a set that
	 * replaced the root.
	 */
	struct ps_ix_root ix;
	/*
	 * RCU and RCU_QSBR: the id no other store of the process has, that
	 * validates the readers' lookup caches with @rd.gen
	 * (polstore/static/lcache.h).  Written once, at creation.
	 */
	struct {
		uint64_t id;
	} lc;
	int sync; /* enum ps_sync */
	const struct ps_sync_ops *ops;
	size_t size; /* bytes of the variant's store object, for ps_store_memory() */
	struct _ps_counts *counts; /* access counts (polstore/counts.h): NULL until asked for */
	struct _ps_counts *counting; /* @counts while they are on, else NULL: what a count loads */
	/*
	 * What the locked variants' readers walk, on a line of its own: the
	 * tree (SPIN, RWLOCK, SEQLOCK: the one tree, changed in place; RCU,
	 * RCU_QSBR: the writer's, which readers do not walk) and SEQLOCK's
	 * count (RCU, RCU_QSBR: the publication count of next()).
	 */
	struct {
		struct ps_seqcount seq;
		struct ps_rtree tree;
		/*
		 * The store's publication count, on the line its sets write
		 * anyway, raised by 2 by every set that succeeds: RCU and
		 * RCU_QSBR writers make it odd before anything of a change is
		 * published and even again after (what validates the readers'
		 * lookup caches, polstore/static/lcache.h); the other variants'
		 * sets add 2 once readers see the change.  Half of it is the
		 * change generation (ps_store_generation()).  Then the
		 * subscriptions (src/store/subscribe.c): a set looks further
		 * only when @nsub is not 0.
		 */
		uint64_t gen;
		unsigned nsub;
		struct _ps_subs *subs;
	} rd __attribute__((aligned(64)));
};

/*
 * A program that inlines the read side (POLSTORE_INLINE) creates its
 * stores through _ps_store_create_inline() with the identity of the
 * layouts it was built with (_PS_INLINE_ABI, polstore/static/layout.h):
 * the library refuses any but its own, and the program's inlined readers
 * act only on stores whose tag carries it (any other store they hand to
 * the library's exported calls).
 */
/* ps_store_create() for a program built with POLSTORE_INLINE (errno EPROTO: other layouts). */
PS_API struct ps_store *_ps_store_create_inline(enum ps_sync sync, unsigned long abi);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_STATIC_STORE_H */
