// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The node pool of a large read index.  A chunk is one allocation of
 * just under 2 MiB: full leaves are carved from its bottom up, inner nodes (256
 * bytes, so that each fills four whole lines) from its top down, and a
 * node given back goes on its chunk's free list of its kind.  An empty
 * chunk goes back to the allocator, except one kept while the pool serves
 * (so that a store on the edge of a chunk does not allocate and free one
 * per set).  The chunk of a node is its tag (index + 1 into the chunk
 * table), kept in the node header's upper wflags bits, so a node needs no
 * extra word.
 *
 * Chunks of 2 MiB, aligned to it, come from the allocator's chunk hooks
 * (src/util/chunk.h: the default allocator maps them), advised for
 * transparent huge pages before their first touch.  An allocator without
 * chunk hooks, or a default mapping that failed, gives a block of just
 * under 2 MiB through psi_alloc(), advised where it starts at its own page
 * (glibc maps such a block with mmap(), but writes its header in the
 * first page before the advice, and past the first free of a block this
 * large, takes them from its heaps: such chunks seldom get huge pages).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "chunk.h"
#include "compiler.h"
#include "ixpool.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define IXP_HIDE(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define IXP_SHOW(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#elif defined(POLSTORE_ANNOTATE) && !defined(POLSTORE_TSAN)
#include <valgrind/memcheck.h>
#define IXP_HIDE(p, n) VALGRIND_MAKE_MEM_NOACCESS((p), (n))
#define IXP_SHOW(p, n) VALGRIND_MAKE_MEM_UNDEFINED((p), (n))
#else
#define IXP_HIDE(p, n) ((void)(p), (void)(n))
#define IXP_SHOW(p, n) ((void)(p), (void)(n))
#endif

/* glibc maps a request of this size with exactly 2 MiB: one huge page. */
#define IXP_CHUNK ((size_t)(2u << 20) - 64)
#define IXP_HUGE ((uintptr_t)2u << 20)
#define IXP_PAGE ((uintptr_t)4096)
/* Slot sizes: a full leaf (8-byte aligned), an inner node (256, so aligned to its size). */
#define IXP_LEAF ((_PS_IX_LEAF_BYTES(PS_IX_LEAF_SHIFT) + 7) & ~(size_t)7)
#define IXP_INNER sizeof(struct ps_ix_inner)
/* A free node's header stays readable: its height says its kind, the word after it links it. */
#define IXP_KEEP 16

size_t psi_ix_pool_threshold = 4u << 20;

struct ixp_chunk {
	char *base;           /* the allocation; NULL: an unused table entry */
	struct psi_chunk_src src; /* where it goes back; src.free NULL: psi_free(), IXP_CHUNK bytes */
	char *lo, *hi;        /* never carved yet: leaves from @lo up, inner nodes from @hi down */
	struct ps_ix_node *free[2]; /* given back: leaves, inner nodes */
	uint32_t live;        /* nodes out of this chunk */
};

struct psi_ix_pool {
	/* Nodes given back after a grace period, linked; pushed by any thread. */
	struct ps_ix_node *returned;
	char pad[PSI_CACHELINE - sizeof(void *)];
	/* The writer's. */
	struct ixp_chunk *chunk;
	uint32_t nchunk, cap; /* entries in use (some may be unused), entries allocated */
	uint32_t hint[2];     /* no chunk below it has room for a node of that kind */
	uint32_t nempty;      /* chunks with no node out */
	bool serving;
	size_t index_bytes;   /* of the index the pool serves, every node counted */
	size_t pending;       /* slot bytes got since the index last grew (an update's) */
	size_t bytes;         /* the chunks' (psi_alloc_charge()); any thread reads it */
	size_t live_bytes;    /* of the nodes out of them; any thread reads it */
};

static void drain(struct psi_ix_pool *p);

static struct ps_ix_node **link_of(struct ps_ix_node *h)
{
	return (struct ps_ix_node **)(void *)((char *)h + sizeof(struct ps_ix_node));
}

static size_t slot_bytes(bool inner)
{
	return inner ? IXP_INNER : IXP_LEAF;
}

struct psi_ix_pool *psi_ix_pool_new(size_t index_bytes)
{
	struct psi_ix_pool *p = psi_zalloc_aligned(sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&p->returned, sizeof(p->returned)); /* atomics only */
	p->index_bytes = index_bytes;
	return p;
}

/* Bytes of chunk @c: a whole huge page from the chunk hooks, else a block of just under. */
static size_t chunk_bytes(const struct ixp_chunk *c)
{
	return c->src.free ? IXP_HUGE : IXP_CHUNK;
}

/* What chunk @c costs the process: the mapping, or the block as malloc() holds it. */
static size_t chunk_charge(const struct ixp_chunk *c)
{
	return c->src.free ? IXP_HUGE : psi_alloc_charge(IXP_CHUNK);
}

static void chunk_free(struct psi_ix_pool *p, struct ixp_chunk *c)
{
	size_t size = chunk_bytes(c);

	/* Shown before it goes: memory mapped there later must not start poisoned. */
	IXP_SHOW(c->base, size);
	if (c->src.free)
		psi_chunk_free(c->base, size, &c->src);
	else
		psi_free(c->base);
	c->base = NULL;
	PSI_WRITE_ONCE(p->bytes, p->bytes - chunk_charge(c));
}

void psi_ix_pool_destroy(struct psi_ix_pool *p)
{
	uint32_t i;

	if (!p)
		return;
	drain(p);
	/* A node still out (an update that never ended: a writer lost in a fork child) keeps the pool. */
	for (i = 0; i < p->nchunk; i++)
		if (p->chunk[i].base && p->chunk[i].live)
			return;
	for (i = 0; i < p->nchunk; i++)
		if (p->chunk[i].base)
			chunk_free(p, &p->chunk[i]);
	psi_free(p->chunk);
	psi_free_aligned(p);
}

/* A block of just under 2 MiB from psi_alloc(), advised where it has its own pages; or NULL. */
static char *chunk_block(void)
{
	char *b = psi_alloc(IXP_CHUNK);
	uintptr_t start, end;

	if (!b)
		return NULL;
	/*
	 * The pages the block covers; a page it leaves at most 64 bytes of is
	 * counted in (the allocator's header or tail in a mapping of its own),
	 * so that a 2 MiB mapping is advised whole, not split at its ends.
	 */
	start = (uintptr_t)b & ~(IXP_PAGE - 1);
	if ((uintptr_t)b - start > 64)
		start += IXP_PAGE;
	end = ((uintptr_t)b + IXP_CHUNK + IXP_PAGE - 1) & ~(IXP_PAGE - 1);
	if (end - ((uintptr_t)b + IXP_CHUNK) > 64)
		end -= IXP_PAGE;
	if (end > start)
		(void)madvise((void *)start, end - start, MADV_HUGEPAGE);
	return b;
}

/* A chunk for the table's entry @c; false when the allocator has none. */
static bool chunk_new(struct psi_ix_pool *p, struct ixp_chunk *c)
{
	bool fallback;
	char *b = psi_chunk_alloc(psi_alloc_ops(), IXP_HUGE, &c->src, &fallback);
	size_t size;

	if (!b && fallback) {
		c->src.free = NULL;
		b = chunk_block();
	}
	if (!b)
		return false;
	size = chunk_bytes(c);
	c->base = b;
	c->lo = (char *)(((uintptr_t)b + 7) & ~(uintptr_t)7);
	c->hi = (char *)(((uintptr_t)b + size) & ~(uintptr_t)(IXP_INNER - 1));
	c->free[0] = c->free[1] = NULL;
	c->live = 0;
	IXP_HIDE(b, size);
	PSI_WRITE_ONCE(p->bytes, p->bytes + chunk_charge(c));
	p->nempty++;
	return true;
}

/* Node @h (its header intact) back on its chunk's list; the chunk goes when empty and not kept. */
static void put_one(struct psi_ix_pool *p, struct ps_ix_node *h)
{
	uint32_t i = psi_ix_pool_tag_of(h) - 1;
	struct ixp_chunk *c = &p->chunk[i];
	bool inner = h->height != 0;

	*link_of(h) = c->free[inner];
	c->free[inner] = h;
	IXP_HIDE((char *)h + IXP_KEEP, slot_bytes(inner) - IXP_KEEP);
	PSI_WRITE_ONCE(p->live_bytes, p->live_bytes - slot_bytes(inner));
	if (i < p->hint[inner])
		p->hint[inner] = i;
	if (--c->live)
		return;
	if (p->serving && !p->nempty)
		p->nempty++;
	else
		chunk_free(p, c);
}

/* Take back what other threads gave back. */
static void drain(struct psi_ix_pool *p)
{
	struct ps_ix_node *h;

	if (!PSI_READ_ONCE(p->returned))
		return;
	h = PSI_XCHG(p->returned, NULL, ACQUIRE);
	PSI_ANNOTATE_HAPPENS_AFTER(&p->returned);
	while (h) {
		struct ps_ix_node *next = *link_of(h);

		put_one(p, h);
		h = next;
	}
}

void psi_ix_pool_grew(struct psi_ix_pool *p, ptrdiff_t delta)
{
	if (p) {
		p->index_bytes = (size_t)((ptrdiff_t)p->index_bytes + delta);
		p->pending = 0;
	}
}

/* Every empty chunk back to the allocator. */
static void free_empty(struct psi_ix_pool *p)
{
	uint32_t i;

	for (i = 0; p->nempty && i < p->nchunk; i++)
		if (p->chunk[i].base && !p->chunk[i].live) {
			chunk_free(p, &p->chunk[i]);
			p->nempty--;
		}
}

void psi_ix_pool_trim(struct psi_ix_pool *p)
{
	if (!p)
		return;
	drain(p);
	free_empty(p);
}

bool psi_ix_pool_tune(struct psi_ix_pool *p)
{
	size_t index_bytes;

	if (!p)
		return false;
	drain(p);
	index_bytes = p->index_bytes;
	if (index_bytes >= psi_ix_pool_threshold) {
		p->serving = true;
	} else if (p->serving && psi_ix_pool_below(index_bytes)) {
		/* The kept empty chunk goes too: the chunks left go as they empty. */
		p->serving = false;
		free_empty(p);
	}
	return p->serving;
}

bool psi_ix_pool_below(size_t index_bytes)
{
	return index_bytes < psi_ix_pool_threshold / 2;
}

bool psi_ix_pool_serving(const struct psi_ix_pool *p)
{
	return p && p->serving;
}

/* A node of chunk @c, or NULL when it has no room for one of that kind. */
static void *take(struct ixp_chunk *c, bool inner)
{
	struct ps_ix_node *h = c->free[inner];
	size_t size = slot_bytes(inner);

	if (h) {
		IXP_SHOW((char *)h + IXP_KEEP, size - IXP_KEEP);
		c->free[inner] = *link_of(h);
	} else if ((size_t)(c->hi - c->lo) >= size) {
		if (inner) {
			c->hi -= size;
			h = (struct ps_ix_node *)(void *)c->hi;
		} else {
			h = (struct ps_ix_node *)(void *)c->lo;
			c->lo += size;
		}
		IXP_SHOW(h, size);
	} else {
		return NULL;
	}
	return h;
}

/* An unused entry of the table, growing it; NULL when it cannot grow. */
static struct ixp_chunk *free_entry(struct psi_ix_pool *p)
{
	uint32_t i;

	for (i = 0; i < p->nchunk; i++)
		if (!p->chunk[i].base)
			return &p->chunk[i];
	if (p->nchunk == p->cap) {
		uint32_t ncap = p->cap ? 2 * p->cap : 8;
		struct ixp_chunk *nc;

		if (ncap > UINT16_MAX)
			return NULL;
		nc = psi_alloc(ncap * sizeof(*nc));
		if (!nc)
			return NULL;
		if (p->nchunk)
			memcpy(nc, p->chunk, p->nchunk * sizeof(*nc));
		psi_free(p->chunk);
		p->chunk = nc;
		p->cap = ncap;
	}
	p->chunk[p->nchunk].base = NULL;
	return &p->chunk[p->nchunk++];
}

void *psi_ix_pool_get(struct psi_ix_pool *p, bool inner, uint32_t *tag)
{
	struct ixp_chunk *c = NULL;
	void *h = NULL;
	uint32_t i;

	drain(p);
	for (i = p->hint[inner]; i < p->nchunk; i++) {
		c = &p->chunk[i];
		if (c->base && (h = take(c, inner)))
			break;
	}
	if (!h) {
		p->hint[inner] = p->nchunk;
		/*
		 * No chunk more while the nodes out of the pool, the update's
		 * own aside, exceed the index by more than a sixteenth and a
		 * chunk: the excess is nodes waiting for their grace period,
		 * and a chunk made for them would stay once they are back.
		 * The caller allocates this node by itself.
		 */
		if (p->live_bytes - p->pending > p->index_bytes + p->index_bytes / 16 + IXP_CHUNK)
			return NULL;
		c = free_entry(p);
		if (!c || !chunk_new(p, c))
			return NULL;
		h = take(c, inner);
	}
	i = (uint32_t)(c - p->chunk);
	/* No chunk below @i had room for this kind; a new one has room for the other. */
	p->hint[inner] = i;
	if (i < p->hint[!inner])
		p->hint[!inner] = i;
	if (!c->live++)
		p->nempty--;
	PSI_WRITE_ONCE(p->live_bytes, p->live_bytes + slot_bytes(inner));
	p->pending += slot_bytes(inner);
	*tag = i + 1;
	return h;
}

void psi_ix_pool_put_now(struct psi_ix_pool *p, struct ps_ix_node *h)
{
	put_one(p, h);
}

void psi_ix_pool_link(struct psi_ix_pool_chain *c, struct ps_ix_node *h)
{
	*link_of(h) = c->first;
	c->first = h;
	if (!c->last)
		c->last = h;
}

void psi_ix_pool_put_chain(struct psi_ix_pool *p, struct psi_ix_pool_chain *c)
{
	struct ps_ix_node *old;

	if (!c->first)
		return;
	old = PSI_READ_ONCE(p->returned);
	do {
		*link_of(c->last) = old;
		PSI_ANNOTATE_HAPPENS_BEFORE(&p->returned); /* the links, before the push */
	} while (!PSI_TRY_CMPXCHG_WEAK(p->returned, &old, c->first, RELEASE, RELAXED));
	c->first = c->last = NULL;
}

size_t psi_ix_pool_slack(const struct psi_ix_pool *p)
{
	size_t bytes, live;

	if (!p)
		return 0;
	/* Two loads, not one snapshot: never below zero. */
	live = PSI_READ_ONCE(p->live_bytes);
	bytes = PSI_READ_ONCE(p->bytes);
	return bytes > live ? bytes - live : 0;
}

size_t psi_ix_pool_blocks(const struct psi_ix_pool *p)
{
	size_t n = 0;
	uint32_t i;

	if (!p)
		return 0;
	for (i = 0; i < p->nchunk; i++)
		n += p->chunk[i].base != NULL;
	return n + (p->chunk != NULL);
}
