// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The static layout of static_layout.h: levels built bottom up, each
 * node's separators the smallest keys of its children but the first, then
 * laid out root first in one mapping advised for huge pages.  The mapping
 * is its own, 2 MiB-aligned and advised before its first touch, as the
 * library's index chunks are: memory from malloc() may come from a heap
 * already touched in small pages, and the huge-page share the stress
 * tool reports for the layout would then say little.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "static_layout.h"
#include "stress.h"

#define SL_HUGE ((size_t)2 << 20)

/* @bytes (a multiple of SL_HUGE) of anonymous memory on an SL_HUGE boundary, or NULL. */
static void *sl_map(size_t bytes)
{
	size_t span = bytes + SL_HUGE - (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t raw, start;
	void *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	raw = (uintptr_t)m;
	start = (raw + SL_HUGE - 1) & ~(uintptr_t)(SL_HUGE - 1);
	if (start > raw)
		(void)munmap(m, start - raw);
	if (raw + span > start + bytes)
		(void)munmap((void *)(start + bytes), raw + span - (start + bytes));
	return (void *)start;
}

void sl_build(struct sl_tree *t, const uint64_t *key, const int32_t *val, size_t n)
{
	size_t count[SL_MAX_LEVELS], m, bytes, i, g;
	uint64_t *min, *next;
	struct sl_inner *lv[SL_MAX_LEVELS];
	struct sl_leaf *leaf;
	char *at;
	int nl = 0, l;

	memset(t, 0, sizeof(*t));
	if (!n)
		stress_die("a static layout of no range");
	t->n = n;
	t->nleaves = (n + SL_KEYS - 1) / SL_KEYS;
	/* The inner levels' sizes, from the one above the leaves up to a root of one node. */
	for (m = t->nleaves; m > 1; m = (m + SL_KEYS) / (SL_KEYS + 1)) {
		if (nl == SL_MAX_LEVELS)
			stress_die("a static layout too deep");
		count[nl++] = (m + SL_KEYS) / (SL_KEYS + 1);
	}
	bytes = t->nleaves * sizeof(struct sl_leaf);
	for (l = 0; l < nl; l++)
		bytes += count[l] * sizeof(struct sl_inner);
	t->mem_bytes = (bytes + SL_HUGE - 1) & ~(SL_HUGE - 1);
	t->mem = sl_map(t->mem_bytes);
	min = malloc(t->nleaves * sizeof(*min));
	next = malloc(t->nleaves * sizeof(*next));
	if (!t->mem || !min || !next)
		stress_die("out of memory for a static layout of %zu ranges", n);
	/* Before the first touch, so that a fault can take a huge page. */
	(void)madvise(t->mem, t->mem_bytes, MADV_HUGEPAGE);
	/* Root first: the levels in lookup order, the leaves last. */
	at = t->mem;
	for (l = nl - 1; l >= 0; l--) {
		lv[l] = (struct sl_inner *)(void *)at;
		at += count[l] * sizeof(struct sl_inner);
	}
	leaf = (struct sl_leaf *)(void *)at;
	for (i = 0; i < t->nleaves * SL_KEYS; i++) {
		leaf[i / SL_KEYS].key[i % SL_KEYS] = i < n ? key[i] : UINT64_MAX;
		leaf[i / SL_KEYS].val[i % SL_KEYS] = i < n ? val[i] : -1;
	}
	for (i = 0; i < t->nleaves; i++)
		min[i] = leaf[i].key[0];
	/* Level l over the m nodes below, whose smallest keys are min[]. */
	m = t->nleaves;
	for (l = 0; l < nl; l++) {
		for (g = 0; g < count[l]; g++) {
			for (i = 0; i < SL_KEYS; i++) {
				size_t c = g * (SL_KEYS + 1) + i + 1;

				lv[l][g].key[i] = c < m ? min[c] : UINT64_MAX;
			}
			next[g] = min[g * (SL_KEYS + 1)];
		}
		memcpy(min, next, count[l] * sizeof(*min));
		m = count[l];
	}
	for (l = 0; l < nl; l++)
		t->level[nl - 1 - l] = lv[l];
	t->nlevels = nl;
	t->leaf = leaf;
	free(min);
	free(next);
}

void sl_free(struct sl_tree *t)
{
	if (t->mem)
		(void)munmap(t->mem, t->mem_bytes);
	memset(t, 0, sizeof(*t));
}
