// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The allocator every polstore object comes from (polstore/alloc.h,
 * alloc_internal.h), and the test points of testpoint.h.
 *
 * The hooks are read without synchronisation: ps_set_alloc_ops() may only be
 * called while no other thread is inside polstore, so the caller's own
 * thread creation/join supplies the ordering.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/alloc.h>

#include "alloc_internal.h"
#include "chunk.h"
#include "compiler.h"
#include "testpoint.h"

static void *psi_default_alloc(size_t size, void *ctx)
{
	(void)ctx;
	return malloc(size);
}

static void psi_default_free(void *ptr, void *ctx)
{
	(void)ctx;
	free(ptr);
}

static struct ps_alloc_ops ps_alloc_ops = {
	.alloc = psi_default_alloc,
	.free = psi_default_free,
	.chunk_alloc = psi_chunk_map,
	.chunk_free = psi_chunk_unmap,
};

const struct ps_alloc_ops *psi_alloc_ops(void)
{
	return &ps_alloc_ops;
}

int ps_set_alloc_ops(const struct ps_alloc_ops *ops)
{
	if (ops && (!ops->alloc || !ops->free || !ops->chunk_alloc != !ops->chunk_free))
		return -EINVAL;
	if (!ops) {
		ps_alloc_ops.alloc = psi_default_alloc;
		ps_alloc_ops.free = psi_default_free;
		ps_alloc_ops.ctx = NULL;
		ps_alloc_ops.chunk_alloc = psi_chunk_map;
		ps_alloc_ops.chunk_free = psi_chunk_unmap;
		return 0;
	}
	ps_alloc_ops = *ops;
	return 0;
}

void *psi_alloc(size_t size)
{
	return ps_alloc_ops.alloc(size, ps_alloc_ops.ctx);
}

void *psi_zalloc(size_t size)
{
	void *p = psi_alloc(size);

	if (p)
		memset(p, 0, size);
	return p;
}

void psi_free(void *ptr)
{
	if (ptr)
		ps_alloc_ops.free(ptr, ps_alloc_ops.ctx);
}

bool psi_grow(void **p, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t n = *cap ? *cap : first;
	void *q;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	if (n > SIZE_MAX / size)
		return false;
	q = psi_alloc(n * size);
	if (!q)
		return false;
	if (*cap)
		memcpy(q, *p, *cap * size);
	psi_free(*p);
	*p = q;
	*cap = n;
	return true;
}

/*
 * Cache-line aligned, zeroed memory from the hooks: over-allocate, align,
 * and keep the hook's pointer just below the aligned block.
 */
void *psi_zalloc_aligned(size_t size)
{
	size_t extra = PSI_CACHELINE + sizeof(void *);
	char *raw = psi_alloc(size + extra);
	uintptr_t aligned;

	if (!raw)
		return NULL;
	aligned = ((uintptr_t)raw + extra) & ~(uintptr_t)(PSI_CACHELINE - 1);
	((void **)aligned)[-1] = raw;
	memset((void *)aligned, 0, size);
	return (void *)aligned;
}

/*
 * glibc's malloc() on a 64-bit system: a block is a chunk of its size and
 * an 8-byte header rounded up to 16 bytes, at least 32; a block from its
 * mmap threshold (128 KiB at first) is a mapping of its own, its pages.
 * A pure function of @size: no probe, no shared state, the same figure on
 * every call, so that what a log adds and takes back matches.
 */
#define PSI_CHARGE_HDR sizeof(size_t)
#define PSI_CHARGE_ALIGN (2 * sizeof(size_t))
#define PSI_CHARGE_MIN (4 * sizeof(size_t))
#define PSI_CHARGE_MMAP ((size_t)128 << 10)
#define PSI_CHARGE_PAGE ((size_t)4096)

size_t psi_alloc_charge(size_t size)
{
	size_t chunk;

	if (size >= PSI_CHARGE_MMAP)
		return (size + 2 * PSI_CHARGE_HDR + PSI_CHARGE_PAGE - 1) & ~(PSI_CHARGE_PAGE - 1);
	chunk = (size + PSI_CHARGE_HDR + PSI_CHARGE_ALIGN - 1) & ~(PSI_CHARGE_ALIGN - 1);
	return chunk < PSI_CHARGE_MIN ? PSI_CHARGE_MIN : chunk;
}

size_t psi_alloc_charge_aligned(size_t size)
{
	return psi_alloc_charge(size + PSI_CACHELINE + sizeof(void *));
}

__thread void *psi_free_keep __attribute__((tls_model("initial-exec")));

void psi_free_aligned(void *ptr)
{
	if (psi_unlikely(ptr == psi_free_keep) && ptr)
		return; /* the checking mode keeps it (check.c) */
	if (ptr)
		psi_free(((void **)ptr)[-1]);
}

/* Test points (testpoint.h): set by tests only. */
void (*psi_test_hook)(enum psi_test_point point);
