/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Name tables: the one home of every enum <-> name mapping of the public API
 * (ps_charge_kind_name(), ps_idmap_sync_name(), ps_overcommit_name() and
 * their *_from_name() inverses; ps_sync_name() reads the variants' rows,
 * variants.c, the same way).  Each module keeps its table,
 * `static const char *const names[COUNT]` indexed by the enum, and its
 * pair of one-line calls to psi_name_of() and psi_name_index(), so every
 * table is read the same way: out-of-range values have no name, an
 * unknown or NULL name is -EINVAL.  ps_mode_name() (policy.c) reads its
 * table with psi_name_of() too; it has no inverse, and its API names an
 * invalid mode "unknown".
 */
#ifndef POLSTORE_SRC_NAMES_H
#define POLSTORE_SRC_NAMES_H

#include <errno.h>
#include <string.h>

/* @names[@value], or NULL when @value is not below @count. */
static inline const char *psi_name_of(const char *const *names, int count, int value)
{
	return (unsigned)value < (unsigned)count ? names[value] : NULL;
}

/* The index of @name in @names[0 .. @count), or -EINVAL (also for NULL). */
static inline int psi_name_index(const char *const *names, int count, const char *name)
{
	int i;

	if (name)
		for (i = 0; i < count; i++)
			if (!strcmp(name, names[i]))
				return i;
	return -EINVAL;
}

#endif /* POLSTORE_SRC_NAMES_H */
