/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What each store variant is: one row per variant (variants.c), read by
 * store creation, the names, the checking wrappers and lock_stat output.
 */
#ifndef POLSTORE_SRC_VARIANTS_H
#define POLSTORE_SRC_VARIANTS_H

#include <polstore/store.h>

#include "rcu_flavour.h"
#include "store_internal.h"

/* Writers take a lock that readers or walks can wait for (lock_stat shows it). */
#define PSI_V_LOCK (1u << 0)
/* A read-side section holds that lock: a thread that exits inside one leaves it held. */
#define PSI_V_SECTION_LOCK (1u << 1)
/* Readers share that lock: sections nest, and a walk inside one does not wait for it. */
#define PSI_V_SECTION_SHARED (1u << 2)
/* A walk (foreach, foreach_range) holds that lock exclusively. */
#define PSI_V_WALK_EXCL (1u << 3)

struct psi_variant {
	const char *name; /* ps_sync_name() */
	const struct ps_sync_ops *ops;
	/*
	 * The liburcu flavour its readers register with (threads need the
	 * exit keys of rcu_thread.h first); NULL: none.
	 */
	const struct psi_flavour *flavour;
	unsigned caps; /* PSI_V_* */
};

/* Indexed by enum ps_sync. */
extern const struct psi_variant psi_variants[];

/* The row of @sync, or NULL for a value that is not a variant. */
const struct psi_variant *psi_variant_get(enum ps_sync sync);

static inline const struct psi_variant *psi_variant_of(const struct ps_store *s)
{
	return &psi_variants[s->sync];
}

static inline bool psi_variant_has(const struct ps_store *s, unsigned caps)
{
	return (psi_variant_of(s)->caps & caps) == caps;
}

#endif /* POLSTORE_SRC_VARIANTS_H */
