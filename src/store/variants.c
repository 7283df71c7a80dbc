// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The store variants, one row each.  A new variant adds its enum value
 * (polstore/store.h), its file exporting a struct ps_sync_ops, and its row
 * here (docs/design.md, "Adding a variant").
 */
#include <errno.h>
#include <string.h>

#include <polstore/store.h>

#include "variants.h"

extern const struct ps_sync_ops psi_sync_spin_ops;
extern const struct ps_sync_ops psi_sync_rwlock_ops;
extern const struct ps_sync_ops psi_sync_seqlock_ops;
extern const struct ps_sync_ops psi_sync_rcu_ops;
extern const struct ps_sync_ops psi_sync_qsbr_ops;

const struct psi_variant psi_variants[PS_SYNC_COUNT] = {
	[PS_SYNC_SPIN] = { "spin", &psi_sync_spin_ops, NULL,
		PSI_V_LOCK | PSI_V_SECTION_LOCK | PSI_V_WALK_EXCL },
	[PS_SYNC_RWLOCK] = { "rwlock", &psi_sync_rwlock_ops, NULL,
		PSI_V_LOCK | PSI_V_SECTION_LOCK | PSI_V_SECTION_SHARED },
	[PS_SYNC_SEQLOCK] = { "seqlock", &psi_sync_seqlock_ops, &psi_flavour_memb,
		PSI_V_LOCK | PSI_V_WALK_EXCL },
	[PS_SYNC_RCU] = { "rcu", &psi_sync_rcu_ops, &psi_flavour_memb, 0 },
	[PS_SYNC_RCU_QSBR] = { "rcu-qsbr", &psi_sync_qsbr_ops, &psi_flavour_qsbr, 0 },
};

const struct psi_variant *psi_variant_get(enum ps_sync sync)
{
	return (unsigned)sync < PS_SYNC_COUNT ? &psi_variants[sync] : NULL;
}

/* As every name table (names.h): NULL out of range; -EINVAL for an unknown or NULL name. */
const char *ps_sync_name(enum ps_sync sync)
{
	const struct psi_variant *v = psi_variant_get(sync);

	return v ? v->name : NULL;
}

int ps_sync_from_name(const char *name)
{
	int i;

	if (name)
		for (i = 0; i < PS_SYNC_COUNT; i++)
			if (!strcmp(name, psi_variants[i].name))
				return i;
	return -EINVAL;
}

unsigned ps_sync_caps(enum ps_sync sync)
{
	const struct psi_variant *v = psi_variant_get(sync);

	if (!v)
		return 0;
	return (v->caps & PSI_V_LOCK ? PS_CAP_LOCK : 0) | (v->flavour ? PS_CAP_RCU : 0) |
	       (v->flavour && v->flavour->id == PSI_FLAVOUR_QSBR ? PS_CAP_QSBR : 0);
}
