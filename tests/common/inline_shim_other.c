// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The POLSTORE_INLINE read side as another release compiles it: CMake
 * builds this file twice, against headers that differ from this tree's in
 * one way each (tests/CMakeLists.txt makes them): another version number
 * with the same layouts (SHIM_OTHER_VERSION), and the same version with
 * another range layout (SHIM_OTHER_LAYOUT).  Only the creation is compared
 * for the other layout: its inlined walk would misread this library's
 * ranges, which is what the refusal prevents.
 */
#ifndef POLSTORE_INLINE
#error "inline_shim_other.c is built with POLSTORE_INLINE"
#endif
#include <polstore/polstore.h>

#include "inline_shim.h"

#if defined(SHIM_OTHER_VERSION)
struct ps_store *shim_other_version_create(enum ps_sync sync)
{
	return ps_store_create(sync);
}

int shim_other_version_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return ps_store_lookup_node(s, idx, local_node);
}

const char *shim_other_version_string(void)
{
	return PS_VERSION_STRING;
}
#elif defined(SHIM_OTHER_LAYOUT)
struct ps_store *shim_other_layout_create(enum ps_sync sync)
{
	return ps_store_create(sync);
}

unsigned long shim_other_layout_abi(void)
{
	return _PS_INLINE_ABI;
}
#else
#error "define SHIM_OTHER_VERSION or SHIM_OTHER_LAYOUT"
#endif
