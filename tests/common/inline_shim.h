/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The POLSTORE_INLINE read side behind plain functions (inline_shim.c). */
#ifndef POLSTORE_TESTS_INLINE_SHIM_H
#define POLSTORE_TESTS_INLINE_SHIM_H

#include <stdint.h>

#include <polstore/polstore.h>

struct ps_store *shim_create(enum ps_sync sync);
struct ps_store *shim_create_abi(enum ps_sync sync, unsigned long abi);
struct ps_policy *shim_lookup(struct ps_store *s, uint64_t idx);
void shim_read_lock(struct ps_store *s);
void shim_read_unlock(struct ps_store *s);
const struct ps_policy *shim_lookup_borrow(struct ps_store *s, uint64_t idx);
int shim_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view);
int shim_lookup_node(struct ps_store *s, uint64_t idx, int local_node);
int shim_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node);

/* inline_shim_other.c: built against the headers of another release. */
struct ps_store *shim_other_version_create(enum ps_sync sync);
int shim_other_version_lookup_node(struct ps_store *s, uint64_t idx, int local_node);
const char *shim_other_version_string(void);
struct ps_store *shim_other_layout_create(enum ps_sync sync);
unsigned long shim_other_layout_abi(void);

#endif /* POLSTORE_TESTS_INLINE_SHIM_H */
