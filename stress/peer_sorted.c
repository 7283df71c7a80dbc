// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A polstore-stress plugin (peer.h): a sorted array of ranges behind one
 * mutex, binary-searched.  It is the smallest map the ABI allows, shows how
 * a plugin is written, and lets the tests run the plugin path.
 *
 * Built with PEER_SORTED_FAULT=1 it misses the first page of every range,
 * and with PEER_SORTED_FAULT=2 it also reports the page just past a range
 * as inside it: the tests check that polstore-stress catches both.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

#ifndef PEER_SORTED_FAULT
#define PEER_SORTED_FAULT 0
#endif

struct range {
	uint64_t start, end;
	uintptr_t value;
};

/* Ranges sorted by start, disjoint; the mutex covers everything. */
struct sorted {
	pthread_mutex_t lock;
	struct range *r;
	size_t n, cap;
};

/* The first range whose end + @slack is past @idx (n when none is). */
static size_t first_after(const struct sorted *m, uint64_t idx, uint64_t slack)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->r[mid].end + slack <= idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void *sorted_create(void)
{
	struct sorted *m = calloc(1, sizeof(*m));

	if (m && pthread_mutex_init(&m->lock, NULL)) {
		free(m);
		return NULL;
	}
	return m;
}

static void sorted_destroy(void *map)
{
	struct sorted *m = map;

	pthread_mutex_destroy(&m->lock);
	free(m->r);
	free(m);
}

static int sorted_insert(void *map, uint64_t start, uint64_t end, uintptr_t value)
{
	struct sorted *m = map;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct range *r = realloc(m->r, cap * sizeof(*r));

		if (!r) {
			ret = -ENOMEM;
			goto out;
		}
		m->r = r;
		m->cap = cap;
	}
	i = first_after(m, start, 0);
	if (i < m->n && m->r[i].start < end) {
		ret = -EEXIST;
		goto out;
	}
	memmove(&m->r[i + 1], &m->r[i], (m->n - i) * sizeof(*m->r));
	m->r[i] = (struct range){start, end, value};
	m->n++;
out:
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static int sorted_remove(void *map, uint64_t start, uint64_t end)
{
	struct sorted *m = map;
	size_t i;
	int ret = -ENOENT;

	pthread_mutex_lock(&m->lock);
	i = first_after(m, start, 0);
	if (i < m->n && m->r[i].start == start && m->r[i].end == end) {
		memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof(*m->r));
		m->n--;
		ret = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static bool sorted_lookup(void *map, uint64_t idx, struct ps_peer_hit *hit)
{
	struct sorted *m = map;
	size_t i = first_after(m, idx, PEER_SORTED_FAULT == 2);

	if (i == m->n || m->r[i].start + (PEER_SORTED_FAULT == 1) > idx)
		return false;
	hit->start = m->r[i].start;
	hit->end = m->r[i].end;
	hit->value = m->r[i].value;
	return true;
}

static void sorted_read_enter(void *map)
{
	pthread_mutex_lock(&((struct sorted *)map)->lock);
}

static void sorted_read_exit(void *map)
{
	pthread_mutex_unlock(&((struct sorted *)map)->lock);
}

static int sorted_check(void *map, const char **why)
{
	struct sorted *m = map;
	size_t i;

	for (i = 0; i < m->n; i++) {
		if (m->r[i].start >= m->r[i].end) {
			*why = "an empty range";
			return -EINVAL;
		}
		if (i && m->r[i - 1].end > m->r[i].start) {
			*why = "ranges out of order or overlapping";
			return -EINVAL;
		}
	}
	return 0;
}

static const struct ps_peer_ops sorted_ops = {
		.abi_version = PS_PEER_ABI_VERSION,
		.flags = PS_PEER_VALUE | PS_PEER_BOUNDS,
		.name = PEER_SORTED_FAULT ? "sorted-faulty" : "sorted",
		.version = "polstore-stress sample plugin: sorted array, one mutex",
		.create = sorted_create,
		.destroy = sorted_destroy,
		.insert = sorted_insert,
		.remove = sorted_remove,
		.lookup = sorted_lookup,
		.read_enter = sorted_read_enter,
		.read_exit = sorted_read_exit,
		.check = sorted_check,
};

__attribute__((visibility("default"))) const struct ps_peer_ops *ps_peer_query(uint32_t abi_version)
{
	return abi_version == PS_PEER_ABI_VERSION ? &sorted_ops : NULL;
}
