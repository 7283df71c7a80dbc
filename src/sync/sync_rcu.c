// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu memb flavour: the store of rcu_store.c with memb
 * read-side sections (rcu_memb.h) inlined into its point reads; every
 * other operation is the store's own, which calls the flavour's table.
 */
#include "rcu_memb.h"
#include "rcu_store.h"

#define MEMB PSI_FLAVOUR_MEMB

static struct ps_store *memb_create(void)
{
	return psi_rcu_store_create(&psi_flavour_memb);
}

static void memb_read_lock(struct ps_store *s)
{
	(void)s;
	psi_memb_read_lock();
}

static void memb_read_unlock(struct ps_store *s)
{
	if (psi_unlikely(!urcu_memb_read_ongoing()))
		psi_stray_read_unlock("rcu", s);
	/* Pairs with the grace period before a release. */
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[MEMB]);
	psi_memb_read_unlock();
}

static struct ps_policy *memb_lookup(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;

	psi_memb_read_lock();
	pol = psi_rcu_store_get(s, idx, MEMB);
	psi_memb_read_unlock();
	return psi_lookup_result(pol);
}

static int memb_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	int ret;

	psi_memb_read_lock();
	ret = _ps_policy_view_fill(psi_rcu_store_lookup_pol(s, idx), view);
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[MEMB]);
	psi_memb_read_unlock();
	return ret;
}

static int memb_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	int node;

	psi_memb_read_lock();
	node = _ps_policy_node(psi_rcu_store_lookup_pol(s, idx), idx, local_node);
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[MEMB]);
	psi_memb_read_unlock();
	return node;
}

static int memb_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	int ret;

	psi_memb_read_lock();
	ret = psi_rcu_store_next_get(s, idx, start, end, pol, MEMB);
	psi_memb_read_unlock();
	return ret;
}

const struct ps_sync_ops psi_sync_rcu_ops = {
	.create = memb_create,
	.destroy = psi_rcu_store_destroy,
	.lookup = memb_lookup,
	.read_lock = memb_read_lock,
	.read_unlock = memb_read_unlock,
	.lookup_borrow = psi_rcu_store_lookup_borrow,
	.lookup_copy = memb_lookup_copy,
	.lookup_node = memb_lookup_node,
	.set = psi_rcu_store_set,
	.synchronize = psi_rcu_store_synchronize,
	.set_may_wait = psi_rcu_store_set_may_wait,
	.foreach = psi_rcu_store_foreach,
	.check = psi_rcu_store_check,
	.held = psi_rcu_store_held,
	.lock_stat = psi_rcu_store_lock_stat,
	.foreach_range = psi_rcu_store_foreach_range,
	.next = memb_next,
	.next_borrow = psi_rcu_store_next_borrow,
	.set_many = psi_rcu_store_update,
	.counts_gen = true,
	.stats = psi_rcu_store_stats,
};
