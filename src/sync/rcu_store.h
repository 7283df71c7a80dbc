/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store (rcu_store.c says how it works), compiled once: the
 * liburcu flavour is a value, the hook table the store holds
 * (rcu_flavour.h).  Its files:
 *  - rcu_store.c (this header): create, destroy, the walks, next(), the
 *    checks, and the point reads the flavours inline;
 *  - rcu_store_update.c (rcu_store_update.h): an update and the memory
 *    it retires (the log, the kept leaves, the spare ranges, the sweep),
 *    synchronize;
 *  - sync_rcu.c, sync_qsbr.c: each flavour's read side, inlined (its
 *    sections are a few instructions), and its ops table;
 *  - rcu_store_object.h: the store object all of them share.
 */
#ifndef POLSTORE_SRC_RCU_STORE_H
#define POLSTORE_SRC_RCU_STORE_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "annotate.h"
#include "lookup_cache.h"
#include "rcu_store_object.h"
#include "rcu_store_update.h"
#include "store_internal.h"

/* Inside a section: from the thread's lookup cache, or the index (lookup_cache.h). */
static inline struct ps_policy *psi_rcu_store_lookup_pol(struct ps_store *s, uint64_t idx)
{
	struct ps_policy *pol;
	uint64_t gen;
	int hint;

	if (_ps_lc_hit(s, idx, &pol, &hint, &gen))
		return pol;
	return _ps_lc_miss(s, psi_rcu_store_root(psi_rcu_store_of(s)), idx, &hint, gen);
}

/* Inside a read-side section of flavour @id: the policy at @idx, with a reference, or NULL. */
static inline struct ps_policy *psi_rcu_store_get(struct ps_store *s, uint64_t idx,
		enum psi_flavour_id id)
{
	struct ps_policy *pol;

	/* The range holds its reference for our whole section: a plain increment is safe. */
	pol = _ps_policy_get(psi_rcu_store_lookup_pol(s, idx));
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[id]);
	(void)id;
	return pol;
}

bool psi_rcu_store_next_find(struct ps_store *s, uint64_t idx, struct psi_ix_hit *hit);

/*
 * Inside a read-side section of flavour @id: next() with a reference (the
 * range holds its own for the whole section).
 */
static inline int psi_rcu_store_next_get(struct ps_store *s, uint64_t idx, uint64_t *start,
		uint64_t *end, struct ps_policy **pol, enum psi_flavour_id id)
{
	struct psi_ix_hit hit;
	bool found = psi_rcu_store_next_find(s, idx, &hit);

	if (found) {
		*start = hit.start;
		*end = hit.end;
		*pol = _ps_policy_get(hit.pol);
	}
	PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_store_done[id]);
	(void)id;
	return found ? 0 : -ENOENT;
}

/* The operations both flavours share (struct ps_sync_ops says what each does). */
struct ps_store *psi_rcu_store_create(const struct psi_flavour *flavour);
void psi_rcu_store_destroy(struct ps_store *s);
const struct ps_policy *psi_rcu_store_lookup_borrow(struct ps_store *s, uint64_t idx);
int psi_rcu_store_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol);
int psi_rcu_store_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg);
int psi_rcu_store_foreach_range(struct ps_store *s, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);
int psi_rcu_store_check(struct ps_store *s, const char **why);
size_t psi_rcu_store_held(struct ps_store *s);
struct psi_lstat *psi_rcu_store_lock_stat(struct ps_store *s);
int psi_rcu_store_stats(struct ps_store *s, struct ps_store_stats *st);

#endif /* POLSTORE_SRC_RCU_STORE_H */
