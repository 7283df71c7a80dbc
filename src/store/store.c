// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Public store entry points: argument checks, allocation before any change,
 * debug invariant checks, then the variant's operation.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <polstore/store.h>
#include <polstore/version.h>

#include <polstore/static/lookup.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "attach_internal.h"
#include "check.h"
#include "counts_internal.h"
#include "held.h"
#include "rcu_reclaim.h"
#include "rcu_thread.h"
#include "read_inline.h"
#include "store_internal.h"
#include "store_tag.h"
#include "subscribe_internal.h"
#include "variants.h"

const char *ps_version(void)
{
	return PS_VERSION_STRING;
}

struct ps_store *ps_store_create(enum ps_sync sync)
{
	const struct psi_variant *v = psi_variant_get(sync);
	struct ps_store *s;
	int err;

	if (!v)
		return psi_err_null(EINVAL);
	/* Here, not in the first lookup's read section (topology.c). */
	psi_numa_topology_load();
	/* Readers that register with liburcu: the exit hook first. */
	err = v->flavour ? psi_rcu_thread_init() : 0;
	if (err)
		return psi_err_null(-err);
	s = v->ops->create();
	if (!s)
		return psi_err_null(ENOMEM);
	s->ops = v->ops;
	s->sync = sync;
	s->tag = _PS_STORE_TAG(sync);
	s->lookup = s->ops->lookup;
	s->lookup_borrow = s->ops->lookup_borrow;
	s->read_lock = s->ops->read_lock;
	s->read_unlock = s->ops->read_unlock;
	s->lookup_copy = s->ops->lookup_copy;
	s->lookup_node = s->ops->lookup_node;
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&s->rd.gen, sizeof(s->rd.gen)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&s->rd.nsub, sizeof(s->rd.nsub)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&s->rd.subs, sizeof(s->rd.subs)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&s->counts, sizeof(s->counts)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&s->counting, sizeof(s->counting)); /* atomics only */
	if (psi_unlikely(psi_checking) && psi_check_store(s)) {
		s->ops->destroy(s);
		return psi_err_null(ENOMEM);
	}
	return s;
}

/*
 * The identity the build recorded for the packages (pkg-config's
 * polstore-inline, the CMake package, the Debian virtual package
 * polstore-layout-<identity>) is the one this library accepts.
 */
#ifdef POLSTORE_LAYOUT_RECORDED
_Static_assert(_PS_INLINE_ABI == POLSTORE_LAYOUT_RECORDED,
		"the inline layouts changed since CMake recorded their identity: run cmake again");
#endif

unsigned long ps_inline_layout(void)
{
	return _PS_INLINE_ABI;
}

struct ps_store *_ps_store_create_inline(enum ps_sync sync, unsigned long abi)
{
	static bool told;

	/* Inlined readers walk the layouts they were built with: any but these is refused. */
	if (abi != _PS_INLINE_ABI) {
		if (!PSI_XCHG(told, true, RELAXED))
			fprintf(stderr, "polstore: program built for inline layouts %08lx, library %s "
					"has %08lx: rebuild it against this library's headers\n",
					abi, PS_VERSION_STRING, (unsigned long)_PS_INLINE_ABI);
		errno = EPROTO;
		return NULL;
	}
	return ps_store_create(sync);
}

/*
 * The calling thread is inside a read-side section that a grace period of
 * @store's flavour waits for (RCU, SEQLOCK: a memb section; RCU_QSBR: one
 * that brought the thread online for its length, which a wait would end).
 * A section of an online-by-choice QSBR thread is not seen: liburcu keeps
 * no count of those.
 */
static bool psi_store_in_own_flavour_section(const struct ps_store *store)
{
	const struct psi_flavour *f = psi_variant_of(store)->flavour;

	return f && f->in_section();
}

void ps_store_destroy(struct ps_store *store)
{
	if (!store)
		return;
	if (psi_unlikely(psi_held(store)))
		psi_misuse("ps_store_destroy()", "%s store %p: called inside its own read-side "
				"section or foreach callback, whose lock it would free",
				ps_sync_name(store->sync), (void *)store);
	if (psi_unlikely(psi_store_in_own_flavour_section(store)))
		psi_misuse("ps_store_destroy()", "%s store %p: called inside a read-side section "
				"of its RCU flavour: it may wait for a grace period, which waits for "
				"this thread (ps_store_destroy_deferred() never waits)",
				ps_sync_name(store->sync), (void *)store);
	psi_attach_check_destroy(store, "ps_store_destroy()", false);
	psi_subs_end(store);
	psi_counts_end(store);
	store->ops->destroy(store);
}

/*
 * Deferred destroy.  The item is queued on the reclaimer of the store's
 * flavour (memb for a variant without one: SPIN, RWLOCK), after every
 * batch the store's sets queued there: items are released in the order
 * queued, so by the time its grace period has
 * passed those batches have been released and the variant's destroy
 * waits for nothing (it must not: it runs on the reclaim thread, which a
 * barrier would wait for).  A lock a reader still holds (a SPIN or RWLOCK
 * section or walk, a SEQLOCK walk), or a batch still in flight, make the
 * release try again later (ops->idle()); nothing here ever waits.
 */
/* The flavour whose grace period a deferred destroy of @v's stores waits for. */
static const struct psi_flavour *psi_retire_flavour(const struct psi_variant *v)
{
	return v->flavour ?: &psi_flavour_memb;
}

struct psi_store_retire {
	struct psi_reclaim_item item;
	struct psi_reclaimer *rc;
	struct ps_store *store;
};

static void psi_store_retire_release(struct psi_reclaim_item *item)
{
	struct psi_store_retire *r = psi_container_of(item, struct psi_store_retire, item);
	struct ps_store *s = r->store;

	if (s->ops->idle && !s->ops->idle(s)) {
		psi_reclaim_retry(r->rc, item);
		return;
	}
	/* A grace period has passed: readers that left their sections let go (their read_unlock). */
	PSI_ANNOTATE_HAPPENS_AFTER(s);
	psi_subs_end(s);
	psi_counts_end(s);
	s->ops->destroy(s);
	psi_free(r);
}

int ps_store_destroy_deferred(struct ps_store *store)
{
	struct psi_store_retire *r;
	int err;

	if (!store)
		return -EINVAL;
	err = psi_attach_check_destroy(store, "ps_store_destroy_deferred()", true);
	if (err)
		return err;
	r = psi_alloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->rc = psi_retire_flavour(psi_variant_of(store))->reclaimer;
	r->store = store;
	r->item.release = psi_store_retire_release;
	/* Its memory is waiting: no reason to let more gather first. */
	err = psi_reclaim_defer_now(r->rc, &r->item, sizeof(*r) + ps_store_memory(store));
	if (err)
		psi_free(r);
	return err;
}

/*
 * A read-side section of the retire flavour: a grace period of that
 * flavour, which every deferred destroy waits for, waits for it too.  The
 * exit keys come first, so a thread that registers here leaves liburcu
 * when it exits, inside the section or not.
 */
int ps_sync_read_lock(enum ps_sync sync)
{
	const struct psi_variant *v = psi_variant_get(sync);
	int err;

	if (!v)
		return -EINVAL;
	err = psi_rcu_thread_init();
	if (err)
		return err;
	psi_retire_flavour(v)->read_enter();
	return 0;
}

void ps_sync_read_unlock(enum ps_sync sync)
{
	const struct psi_variant *v = psi_variant_get(sync);
	const struct psi_flavour *f;

	if (!v)
		return;
	f = psi_retire_flavour(v);
	/* Closing a section never opened would leave the flavour's grace periods waiting for ever. */
	if (psi_unlikely(!f->in_section() && !f->reads_free()))
		psi_misuse("ps_sync_read_unlock()",
				"%s: this thread holds no read-side section of the variant's flavour (%s)",
				ps_sync_name(sync), f->name);
	f->read_exit();
}

int ps_store_sync_kind(const struct ps_store *store)
{
	if (store && psi_unlikely(store->tag == PSI_STORE_TAG_DEAD))
		psi_check_dead(store, "ps_store_sync_kind()");
	return store ? (int)store->sync : -EINVAL;
}

static void psi_store_debug_check(struct ps_store *store)
{
#ifdef POLSTORE_DEBUG_CHECKS
	const char *why = NULL;

	if (ps_store_check(store, &why)) {
		fprintf(stderr, "polstore: %s store invariant broken: %s\n",
				ps_sync_name(store->sync), why);
		abort();
	}
#else
	(void)store;
#endif
}

int ps_store_set(struct ps_store *store, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	int ret;

	if (!store || start >= end)
		return -EINVAL;
	/* Inside its own lock-based section: the writer lock waits for this thread. */
	if (psi_unlikely(psi_held(store)))
		return -EDEADLK;
	/* The variant allocates every node the update can need before anything changes. */
	ret = store->ops->set(store, start, end, pol);
	if (psi_unlikely(ret))
		return ret;
	psi_store_debug_check(store);
	psi_store_changed(store, start, end, NULL, 0);
	return 0;
}

int ps_store_synchronize(struct ps_store *store)
{
	if (!store)
		return -EINVAL;
	if (!store->ops->synchronize)
		return 0;
	/* It takes the writer lock, and waits for grace periods. */
	if (psi_unlikely(psi_held(store) || psi_store_in_own_flavour_section(store)))
		return -EDEADLK;
	store->ops->synchronize(store);
	return 0;
}

/* The read side's exported calls: read_inline.h. */
struct ps_policy *ps_store_lookup(struct ps_store *store, uint64_t idx)
{
	if (PSI_READ_INLINE)
		return _ps_inl_lookup(store, idx);
	if (psi_unlikely(!store))
		return psi_err_null(EINVAL);
	/* A tail call: the variant sets errno on a miss (psi_lookup_result()). */
	return store->lookup(store, idx);
}

void ps_store_read_lock(struct ps_store *store)
{
	if (PSI_READ_INLINE)
		_ps_inl_read_lock(store);
	else if (store)
		store->read_lock(store);
}

void ps_store_read_unlock(struct ps_store *store)
{
	if (PSI_READ_INLINE)
		_ps_inl_read_unlock(store);
	else if (store)
		store->read_unlock(store);
}

const struct ps_policy *ps_store_lookup_borrow(struct ps_store *store, uint64_t idx)
{
	if (PSI_READ_INLINE)
		return _ps_inl_lookup_borrow(store, idx);
	return store ? store->lookup_borrow(store, idx) : NULL;
}

int ps_store_lookup_copy(struct ps_store *store, uint64_t idx, struct ps_policy_view *view)
{
	if (PSI_READ_INLINE)
		return _ps_inl_lookup_copy(store, idx, view);
	if (psi_unlikely(!store || _ps_policy_view_check(view)))
		return -EINVAL;
	return store->lookup_copy(store, idx, view);
}

int ps_store_lookup_node(struct ps_store *store, uint64_t idx, int local_node)
{
	if (PSI_READ_INLINE)
		return _ps_inl_lookup_node(store, idx, local_node);
	if (psi_unlikely(!store || _ps_node_check(local_node)))
		return -EINVAL;
	return store->lookup_node(store, idx, local_node);
}

/* A walk that takes its store's lock exclusively: not inside its own section or walk. */
static inline bool psi_walk_self_deadlock(const struct ps_store *store)
{
	return psi_held(store) && psi_variant_has(store, PSI_V_WALK_EXCL);
}

int ps_store_foreach(struct ps_store *store, ps_foreach_fn fn, void *arg)
{
	if (!store || !fn)
		return -EINVAL;
	if (psi_unlikely(psi_walk_self_deadlock(store)))
		return -EDEADLK;
	return store->ops->foreach(store, fn, arg);
}

size_t ps_store_count(struct ps_store *store)
{
	if (store && psi_unlikely(store->tag == PSI_STORE_TAG_DEAD))
		psi_check_dead(store, "ps_store_count()");
	return store ? PSI_READ_ONCE(store->rd.tree.count) : 0;
}

int ps_store_check(struct ps_store *store, const char **why)
{
	const char *dummy;
	int ret;

	if (!store)
		return -EINVAL;
	if (psi_unlikely(psi_held(store)))
		return -EDEADLK; /* it takes the writer lock */
	ret = store->ops->check(store, why ? why : &dummy);
	return ret ? ret : psi_counts_check(store, why ? why : &dummy);
}

size_t ps_store_memory(struct ps_store *store)
{
	if (!store)
		return 0;
	/* Each block as malloc() holds it (psi_alloc_charge()). */
	return psi_alloc_charge_aligned(store->size) +
	       ps_store_count(store) * psi_alloc_charge(sizeof(struct ps_range)) +
	       (store->ops->held ? store->ops->held(store) : 0);
}

int ps_store_stats(struct ps_store *store, struct ps_store_stats *stats)
{
	if (!store || !stats)
		return -EINVAL;
	if (!store->ops->stats)
		return -EOPNOTSUPP;
	return store->ops->stats(store, stats);
}

bool ps_lock_stat_enabled(void)
{
#ifdef POLSTORE_LOCK_STAT
	return true;
#else
	return false;
#endif
}

/* ---- windows, walks by position, batches ---- */

int ps_store_foreach_range(struct ps_store *store, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg)
{
	if (!store || !fn || start >= end)
		return -EINVAL;
	if (psi_unlikely(psi_walk_self_deadlock(store)))
		return -EDEADLK;
	return store->ops->foreach_range(store, start, end, fn, arg);
}

int ps_store_next(struct ps_store *store, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	if (!store || !start || !end || !pol)
		return -EINVAL;
	return store->ops->next(store, idx, start, end, pol);
}

int ps_store_next_borrow(struct ps_store *store, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	if (!store || !start || !end || !pol)
		return -EINVAL;
	return store->ops->next_borrow(store, idx, start, end, pol);
}

int ps_store_set_many(struct ps_store *store, const struct ps_set_op *ops, size_t n)
{
	size_t i;
	int ret;

	if (!store || (!ops && n))
		return -EINVAL;
	/* Every op is checked before the variant allocates or changes anything. */
	for (i = 0; i < n; i++)
		if (ops[i].start >= ops[i].end)
			return -EINVAL;
	if (!n)
		return 0;
	if (psi_unlikely(psi_held(store)))
		return -EDEADLK;
	ret = store->ops->set_many(store, ops, n);
	if (psi_unlikely(ret))
		return ret;
	psi_store_debug_check(store);
	psi_store_changed(store, 0, 0, ops, n);
	return 0;
}
