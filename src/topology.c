// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The node topology ps_policy_node() reads: distances between nodes (the
 * nearest allowed node for BIND and PREFERRED_MANY) and weighted-interleave
 * weights.  Either the system's, read from sysfs on first use, or a table
 * the application installed with ps_numa_set_topology().
 *
 * Node lookups run inside read-side sections, on fault paths: they must
 * never wait.  So a table is built outside any lock and published by one
 * pointer, and it never changes once published; a reader loads it with one
 * acquire load.  A lookup that finds no table builds one (cancellation
 * disabled meanwhile, so a cancel leaks no FILE or table) and publishes it
 * with a compare-and-swap from NULL; when several race, the first wins and
 * the others free theirs.  No lock, so nothing for a thread cancelled
 * mid-read, or a child forked meanwhile, to find held.  A table replaced is
 * kept until the library unloads (they are few: start-up and tests), so a
 * reader never needs a grace period.  Tables come from malloc(), not the
 * allocation hooks of polstore/alloc.h: they live as long as the process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/numa.h>

#include "compiler.h"
#include "policy_internal.h"

/* Distance of a node pair the table does not describe: farther than any it does. */
#define PS_DIST_UNKNOWN 255

struct ps_topology {
	struct ps_topology *older; /* the table this one replaced, kept until unload */
	int nr;                    /* nodes 0 .. nr - 1 described */
	unsigned char *weight;     /* [nr], each >= 1 */
	unsigned char dist[];      /* [nr * nr], row: from, column: to */
};

static struct ps_topology *ps_topo; /* acquire loads; published by CAS (release) */
/* What a failed allocation leaves for one lookup: no node described (all equally far, weights 1). */
static const struct ps_topology ps_topo_none;

static struct ps_topology *ps_topo_alloc(int nr)
{
	struct ps_topology *t = calloc(1, sizeof(*t) + (size_t)nr * (size_t)nr + (size_t)nr);

	if (!t)
		return NULL;
	t->nr = nr;
	t->weight = t->dist + (size_t)nr * (size_t)nr;
	memset(t->weight, 1, (size_t)nr);
	memset(t->dist, PS_DIST_UNKNOWN, (size_t)nr * (size_t)nr);
	return t;
}

/* The highest id in a sysfs node list ("0", "0-3,8"), or -1. */
static int ps_sysfs_max_node(const char *path)
{
	char buf[4096], *p, *end;
	int max = -1;
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	for (p = buf; *p;) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (v > max)
			max = (int)v;
		p = end + (*end == ',' || *end == '-');
	}
	return max;
}

static int ps_sysfs_int(const char *path, int dflt)
{
	FILE *f = fopen(path, "re");
	int v;

	if (!f)
		return dflt;
	if (fscanf(f, "%d", &v) != 1)
		v = dflt;
	fclose(f);
	return v;
}

/*
 * The system's table: node<i>/distance lists the distances from node i to
 * every online node, in id order; weights come from the kernel's
 * weighted-interleave sysfs files (1 where there is none).
 */
static struct ps_topology *ps_topo_from_sysfs(void)
{
	int max = ps_sysfs_max_node("/sys/devices/system/node/online"), nr, i;
	unsigned char online[PS_MAX_NUMNODES] = { 0 };
	struct ps_topology *t;
	char path[128];

	if (max < 0)
		max = 0;
	nr = max + 1 < PS_MAX_NUMNODES ? max + 1 : PS_MAX_NUMNODES;
	t = ps_topo_alloc(nr);
	if (!t)
		return NULL;
	for (i = 0; i < nr; i++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/distance", i);
		online[i] = ps_sysfs_int(path, -1) >= 0;
	}
	for (i = 0; i < nr; i++) {
		FILE *f;
		int j, d;

		if (!online[i])
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/distance", i);
		f = fopen(path, "re");
		if (!f)
			continue;
		for (j = 0; j < nr; j++) {
			if (!online[j])
				continue;
			if (fscanf(f, "%d", &d) != 1)
				break;
			t->dist[i * nr + j] = (unsigned char)(d < 0 || d > PS_DIST_UNKNOWN ? PS_DIST_UNKNOWN : d);
		}
		fclose(f);
		snprintf(path, sizeof(path), "/sys/kernel/mm/mempolicy/weighted_interleave/node%d", i);
		d = ps_sysfs_int(path, 1);
		t->weight[i] = (unsigned char)(d < 1 ? 1 : d > 255 ? 255 : d);
	}
	return t;
}

/* ps_topo_from_sysfs() with cancellation off: its stdio calls are cancellation points. */
static struct ps_topology *ps_topo_system(void)
{
	struct ps_topology *t;
	int cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	t = ps_topo_from_sysfs();
	pthread_setcancelstate(cs, NULL);
	return t;
}

/* Publish @t in place of whatever table is in force (it is kept: see the top). */
static void ps_topo_publish(struct ps_topology *t)
{
	struct ps_topology *old = __atomic_load_n(&ps_topo, __ATOMIC_RELAXED);

	do
		t->older = old;
	while (!__atomic_compare_exchange_n(&ps_topo, &old, t, false, __ATOMIC_RELEASE,
			__ATOMIC_RELAXED));
}

/* The first lookup: the system's table, unless another thread published one meanwhile. */
static __attribute__((noinline, cold)) const struct ps_topology *ps_topo_first(void)
{
	struct ps_topology *t = ps_topo_system(), *cur = NULL;

	if (!t)
		return &ps_topo_none; /* not published: the next lookup tries again */
	if (!__atomic_compare_exchange_n(&ps_topo, &cur, t, false, __ATOMIC_RELEASE,
			__ATOMIC_ACQUIRE)) {
		free(t);
		return cur;
	}
	return t;
}

static inline const struct ps_topology *ps_topo_get(void)
{
	const struct ps_topology *t = PS_LOAD_ACQUIRE(ps_topo);

	return ps_likely(t) ? t : ps_topo_first();
}

static inline int ps_topo_dist(const struct ps_topology *t, int from, int to)
{
	return from < t->nr && to < t->nr ? t->dist[from * t->nr + to] : PS_DIST_UNKNOWN;
}

static inline int ps_topo_weight(const struct ps_topology *t, int node)
{
	return node < t->nr ? t->weight[node] : 1;
}

#define for_each_node_in(n, nodes)                                                                 \
	for (size_t _w = 0; _w < PS_NODEMASK_LONGS; _w++)                                          \
		for (unsigned long _b = (nodes)[_w];                                               \
				_b && ((n) = (int)(_w * PS_BITS_PER_LONG) + __builtin_ctzl(_b), 1); \
				_b &= _b - 1)

int _ps_numa_nearest(const unsigned long *nodes, int local_node)
{
	const struct ps_topology *t = ps_topo_get();
	int n, best = local_node, best_d = PS_DIST_UNKNOWN + 1;

	/* Ascending ids and a strict "nearer": the lowest id wins a tie. */
	for_each_node_in(n, nodes) {
		int d = ps_topo_dist(t, local_node, n);

		if (d < best_d) {
			best = n;
			best_d = d;
		}
	}
	return best;
}

int _ps_numa_weighted(const unsigned long *nodes, uint64_t ilx)
{
	const struct ps_topology *t = ps_topo_get();
	uint64_t total = 0, target;
	int n;

	for_each_node_in(n, nodes)
		total += (uint64_t)ps_topo_weight(t, n);
	if (!total)
		return -EINVAL; /* an empty mask: no policy that has one is in a store */
	target = ilx % total;
	for_each_node_in(n, nodes) {
		uint64_t w = (uint64_t)ps_topo_weight(t, n);

		if (target < w)
			return n;
		target -= w;
	}
	return -EINVAL; /* not reached */
}

int ps_numa_set_topology(int nr_nodes, const unsigned char *distance, const unsigned char *weights)
{
	struct ps_topology *t;
	int i;

	if (nr_nodes < 0 || nr_nodes > PS_MAX_NUMNODES || (nr_nodes && !distance) ||
			(!nr_nodes && (distance || weights)))
		return -EINVAL;
	for (i = 0; weights && i < nr_nodes; i++)
		if (!weights[i])
			return -EINVAL;
	if (nr_nodes) {
		t = ps_topo_alloc(nr_nodes);
		if (!t)
			return -ENOMEM;
		memcpy(t->dist, distance, (size_t)nr_nodes * (size_t)nr_nodes);
		if (weights)
			memcpy(t->weight, weights, (size_t)nr_nodes);
	} else {
		t = ps_topo_system();
		if (!t)
			return -ENOMEM;
	}
	ps_topo_publish(t);
	return 0;
}

int ps_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	int err = _ps_node_check(local_node);

	return err ? err : _ps_policy_node(pol, ilx, local_node);
}

/* At unload every table ever published goes; no reader may run then. */
static __attribute__((destructor)) void ps_topo_fini(void)
{
	struct ps_topology *t = ps_topo;

	while (t) {
		struct ps_topology *older = t->older;

		free(t);
		t = older;
	}
	ps_topo = NULL;
}
