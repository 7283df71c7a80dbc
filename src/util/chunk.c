// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Aligned chunks (chunk.h).  The default hook maps twice the alignment
 * less a page, unmaps what lies outside the aligned chunk and advises the
 * chunk for transparent huge pages before anything touches it, so that the
 * first fault can take a huge page for the whole chunk.  A chunk from an
 * installed hook is advised the same way; one that the kernel does not
 * back with huge pages (THP off, the advice refused) works the same.
 */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <polstore/alloc.h>

#include "chunk.h"

bool psi_chunk_map_refused;

void *psi_chunk_map(size_t size, size_t align, void *ctx)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), span;
	uintptr_t raw, start;
	void *m;

	(void)ctx;
	if (psi_chunk_map_refused || align < page || (align & (align - 1)) ||
	    size > SIZE_MAX - align)
		return NULL;
	span = size + align - page;
	m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	raw = (uintptr_t)m;
	start = (raw + align - 1) & ~(uintptr_t)(align - 1);
	if (start > raw)
		(void)munmap(m, start - raw);
	if (raw + span > start + size)
		(void)munmap((void *)(start + size), raw + span - (start + size));
	return (void *)start;
}

void psi_chunk_unmap(void *ptr, size_t size, void *ctx)
{
	(void)ctx;
	(void)munmap(ptr, size);
}

void *psi_chunk_alloc(const struct ps_alloc_ops *ops, size_t size, struct psi_chunk_src *src,
		bool *fallback)
{
	void *p;

	*fallback = !ops->chunk_alloc || ops->chunk_alloc == psi_chunk_map;
	if (!ops->chunk_alloc)
		return NULL;
	p = ops->chunk_alloc(size, size, ops->ctx);
	if (!p)
		return NULL;
	/* Before the first touch: a fault in an advised, aligned 2 MiB takes a huge page. */
	(void)madvise(p, size, MADV_HUGEPAGE);
	src->free = ops->chunk_free;
	src->ctx = ops->ctx;
	return p;
}

void psi_chunk_free(void *ptr, size_t size, const struct psi_chunk_src *src)
{
	src->free(ptr, size, src->ctx);
}
