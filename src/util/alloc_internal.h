/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Allocation through the hooks of polstore/alloc.h (alloc.c): every block
 * of polstore comes from here, and ps_store_memory() counts it as
 * psi_alloc_charge() says.
 */
#ifndef POLSTORE_SRC_ALLOC_INTERNAL_H
#define POLSTORE_SRC_ALLOC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

struct ps_alloc_ops;

/* The hooks installed now (ps_set_alloc_ops()), or the default's. */
const struct ps_alloc_ops *psi_alloc_ops(void);

void *psi_alloc(size_t size);
void *psi_zalloc(size_t size);
void psi_free(void *ptr);
void *psi_zalloc_aligned(size_t size);
/*
 * The array *@p of *@cap items of @size with room for @need: when it has
 * less, a new block of @first items (none before) or twice as many until
 * they are enough, what it held copied over and the old block freed.
 * Return: false, the array as it was, when the block cannot be had.
 */
bool psi_grow(void **p, size_t *cap, size_t need, size_t size, size_t first);
void psi_free_aligned(void *ptr);
/*
 * Bytes a block of @size holds of the process, as ps_store_memory()
 * counts it: the chunk glibc's malloc() makes for it, header and rounding
 * in, whichever allocator is installed.  Any thread; a pure function.
 */
size_t psi_alloc_charge(size_t size);
/* The same for a block of psi_zalloc_aligned(@size). */
size_t psi_alloc_charge_aligned(size_t size);
/* A block psi_free_aligned() leaves alone on this thread (the checking mode's graves). */
extern __thread void *psi_free_keep __attribute__((tls_model("initial-exec")));

#endif /* POLSTORE_SRC_ALLOC_INTERNAL_H */
