/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a set of store.c does once its change is visible to readers: count
 * it in the store's publication count, rd.gen (polstore/static/store.h),
 * unless the variant's writer did (RCU, RCU_QSBR: odd around its
 * publication), and, only when something subscribed, queue the change
 * for the subscriptions (subscribe.c) with the generation, half the count.
 */
#ifndef POLSTORE_SRC_SUBSCRIBE_INTERNAL_H
#define POLSTORE_SRC_SUBSCRIBE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <polstore/store.h>
#include <polstore/static/store.h>

#include "compiler.h"
#include "store_internal.h"

/* Queue [@start, @end), or each of @ops[0 .. @n) when @ops, for @s's subscriptions. */
void psi_subs_notify(struct ps_store *s, uint64_t start, uint64_t end, const struct ps_set_op *ops,
		size_t n, uint64_t gen);

/* Before a destroy frees @s: end its subscriptions (each gets PS_SUB_CLOSED). */
void psi_subs_end(struct ps_store *s);

static inline void psi_store_changed(struct ps_store *s, uint64_t start, uint64_t end,
		const struct ps_set_op *ops, size_t n)
{
	uint64_t gen;

	/*
	 * Release: a cache that loads the new generation (acquire) sees the
	 * change.  A writer that counted its own set made the count even with
	 * a release store after its change; the count read here is its own or
	 * a later set's (odd while a later one publishes: >> 1 drops that).
	 */
	if (s->ops->counts_gen)
		gen = PSI_LOAD_ACQUIRE(s->rd.gen) >> 1;
	else
		gen = PSI_ADD_FETCH(s->rd.gen, 2, RELEASE) >> 1;

	/* Acquire: pairs with the release that counted a subscription after linking it. */
	if (psi_unlikely(PSI_LOAD_ACQUIRE(s->rd.nsub)))
		psi_subs_notify(s, start, end, ops, n, gen);
}

#endif /* POLSTORE_SRC_SUBSCRIBE_INTERNAL_H */
