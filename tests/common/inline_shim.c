// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read side compiled as a program built with POLSTORE_INLINE compiles
 * it (CMake defines the macro for this file only), behind plain functions
 * that test_lookup.c compares with the library's own entry points.
 */
#ifndef POLSTORE_INLINE
#error "inline_shim.c is built with POLSTORE_INLINE"
#endif
#include <polstore/polstore.h>

#include "inline_shim.h"

struct ps_store *shim_create(enum ps_sync sync)
{
	return ps_store_create(sync);
}

struct ps_store *shim_create_abi(enum ps_sync sync, unsigned long abi)
{
	return _ps_store_create_inline(sync, abi);
}

struct ps_policy *shim_lookup(struct ps_store *s, uint64_t idx)
{
	return ps_store_lookup(s, idx);
}

void shim_read_lock(struct ps_store *s)
{
	ps_store_read_lock(s);
}

void shim_read_unlock(struct ps_store *s)
{
	ps_store_read_unlock(s);
}

const struct ps_policy *shim_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	return ps_store_lookup_borrow(s, idx);
}

int shim_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	return ps_store_lookup_copy(s, idx, view);
}

int shim_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return ps_store_lookup_node(s, idx, local_node);
}

int shim_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	return ps_policy_node(pol, ilx, local_node);
}
