// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU store, liburcu qsbr flavour: the store of rcu_store.c with the
 * thread rules of polstore/rcu.h (rcu_qsbr.h) inlined into its point
 * reads: an online thread reads with no section of its own, an offline
 * one goes online for its outermost section and back offline after it.
 * Every other operation is the store's own, which calls the flavour's
 * table.
 */
#include "rcu_qsbr.h"
#include "rcu_store.h"

#define QSBR PSI_FLAVOUR_QSBR

static struct ps_store *qsbr_create(void)
{
	return psi_rcu_store_create(&psi_flavour_qsbr);
}

static void qsbr_read_lock(struct ps_store *s)
{
	(void)s;
	psi_qsbr_read_enter();
}

static void qsbr_read_unlock(struct ps_store *s)
{
	if (psi_unlikely(!psi_qsbr_online_now()))
		psi_stray_read_unlock("rcu-qsbr", s);
	/* Pairs with the grace period before a release. */
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[QSBR]);
	psi_qsbr_read_exit();
}

/* Out of line, off the path of the lookups that need no section. */
static __attribute__((noinline)) struct ps_policy *qsbr_lookup_section(struct ps_store *s,
		uint64_t idx)
{
	struct ps_policy *pol;

	psi_qsbr_read_enter();
	pol = psi_rcu_store_get(s, idx, QSBR);
	psi_qsbr_read_exit();
	return psi_lookup_result(pol);
}

static struct ps_policy *qsbr_lookup(struct ps_store *s, uint64_t idx)
{
	if (!psi_qsbr_in_section())
		return qsbr_lookup_section(s, idx);
	return psi_lookup_result(psi_rcu_store_get(s, idx, QSBR));
}

/* A section of its own unless the thread is inside one (online). */
static inline int qsbr_section_begin(void)
{
	if (psi_qsbr_in_section())
		return 0;
	psi_qsbr_read_enter();
	return 1;
}

static inline void qsbr_section_end(int entered)
{
	/* Pairs with the grace period before a release. */
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[QSBR]);
	if (entered)
		psi_qsbr_read_exit();
}

static int qsbr_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	int token = qsbr_section_begin(), ret;

	ret = _ps_policy_view_fill(psi_rcu_store_lookup_pol(s, idx), view);
	qsbr_section_end(token);
	return ret;
}

static int qsbr_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	int token = qsbr_section_begin(), node;

	node = _ps_policy_node(psi_rcu_store_lookup_pol(s, idx), idx, local_node);
	qsbr_section_end(token);
	return node;
}

static __attribute__((noinline)) int qsbr_next_section(struct ps_store *s, uint64_t idx,
		uint64_t *start, uint64_t *end, struct ps_policy **pol)
{
	int ret;

	psi_qsbr_read_enter();
	ret = psi_rcu_store_next_get(s, idx, start, end, pol, QSBR);
	psi_qsbr_read_exit();
	return ret;
}

static int qsbr_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	if (!psi_qsbr_in_section())
		return qsbr_next_section(s, idx, start, end, pol);
	return psi_rcu_store_next_get(s, idx, start, end, pol, QSBR);
}

const struct ps_sync_ops psi_sync_qsbr_ops = {
	.create = qsbr_create,
	.destroy = psi_rcu_store_destroy,
	.lookup = qsbr_lookup,
	.read_lock = qsbr_read_lock,
	.read_unlock = qsbr_read_unlock,
	.lookup_borrow = psi_rcu_store_lookup_borrow,
	.lookup_copy = qsbr_lookup_copy,
	.lookup_node = qsbr_lookup_node,
	.set = psi_rcu_store_set,
	.synchronize = psi_rcu_store_synchronize,
	.set_may_wait = psi_rcu_store_set_may_wait,
	.foreach = psi_rcu_store_foreach,
	.check = psi_rcu_store_check,
	.held = psi_rcu_store_held,
	.lock_stat = psi_rcu_store_lock_stat,
	.foreach_range = psi_rcu_store_foreach_range,
	.next = qsbr_next,
	.next_borrow = psi_rcu_store_next_borrow,
	.set_many = psi_rcu_store_update,
	.counts_gen = true,
	.stats = psi_rcu_store_stats,
};
