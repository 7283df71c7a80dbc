// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The node topology node lookups follow: which nodes have memory, the
 * distances between nodes and the weighted-interleave weights.  Either the
 * system's, read from sysfs on first use, or a table the application
 * installed with ps_numa_set_topology().  The rules that turn a policy and
 * a local node into a node are polstore/policy.h's (ps_policy_node()).
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
#define PSI_DIST_UNKNOWN 255

#define PSI_SYSFS_NODE "/sys/devices/system/node/"

struct psi_topology {
	struct psi_topology *older; /* the table this one replaced, kept until unload */
	int nr;                    /* nodes 0 .. nr - 1 have distances and weights */
	int dense;                 /* nodes 0 .. dense - 1 all have memory */
	unsigned long mem[PSI_NODEMASK_LONGS]; /* the nodes with memory: never empty */
	unsigned char *weight;     /* [nr], each >= 1 */
	unsigned char dist[];      /* [nr * nr], row: from, column: to */
};

/* Acquire loads; published by CAS (seq_cst: see psi_topo_sync_dense()). */
static struct psi_topology *psi_topo;
/* What a failed allocation leaves for one lookup: node 0 alone, nothing described. */
static const struct psi_topology psi_topo_none = { .dense = 1, .mem = { 1 } };

struct _ps_numa_fast _ps_numa_fast;

static bool psi_bit(const unsigned long *mask, int n)
{
	return mask[(unsigned)n / PSI_BITS_PER_LONG] >> ((unsigned)n % PSI_BITS_PER_LONG) & 1;
}

static void psi_set_bit(unsigned long *mask, int n)
{
	mask[(unsigned)n / PSI_BITS_PER_LONG] |= 1UL << ((unsigned)n % PSI_BITS_PER_LONG);
}

#define for_each_node_in(n, nodes)                                                                 \
	for (size_t _w = 0; _w < PSI_NODEMASK_LONGS; _w++)                                          \
		for (unsigned long _b = (nodes)[_w];                                               \
				_b && ((n) = (int)(_w * PSI_BITS_PER_LONG) + __builtin_ctzl(_b), 1); \
				_b &= _b - 1)

static struct psi_topology *psi_topo_alloc(int nr)
{
	struct psi_topology *t = calloc(1, sizeof(*t) + (size_t)nr * (size_t)nr + (size_t)nr);

	if (!t)
		return NULL;
	t->nr = nr;
	t->weight = t->dist + (size_t)nr * (size_t)nr;
	memset(t->weight, 1, (size_t)nr);
	memset(t->dist, PSI_DIST_UNKNOWN, (size_t)nr * (size_t)nr);
	return t;
}

/* The nodes with memory are @mem (node 0 when it is empty); the dense prefix follows. */
static void psi_topo_set_mem(struct psi_topology *t, const unsigned long *mem)
{
	size_t w;
	int n;

	memcpy(t->mem, mem, sizeof(t->mem));
	for (w = 0; w < PSI_NODEMASK_LONGS && !t->mem[w]; w++)
		;
	if (w == PSI_NODEMASK_LONGS)
		t->mem[0] = 1;
	for (n = 0; n < PS_MAX_NUMNODES && psi_bit(t->mem, n); n++)
		;
	t->dense = n;
}

/*
 * A sysfs node list ("0", "0-3,8") into @mask, nodes from PS_MAX_NUMNODES
 * on dropped.  Return: the highest node listed, or -1 (no file, nothing
 * listed).
 */
static int psi_sysfs_nodes(const char *path, unsigned long *mask)
{
	char buf[4096], *p = buf, *end;
	int max = -1;
	FILE *f = fopen(path, "re");

	memset(mask, 0, PSI_NODEMASK_LONGS * sizeof(*mask));
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	for (;;) {
		long lo = strtol(p, &end, 10), hi = lo, n;

		if (end == p || lo < 0)
			break;
		if (*end == '-') {
			p = end + 1;
			hi = strtol(p, &end, 10);
			if (end == p || hi < lo)
				break;
		}
		for (n = lo; n <= hi && n < PS_MAX_NUMNODES; n++)
			psi_set_bit(mask, (int)n);
		if (lo < PS_MAX_NUMNODES && n - 1 > max)
			max = (int)(n - 1);
		if (*end != ',')
			break;
		p = end + 1;
	}
	return max;
}

static int psi_sysfs_int(const char *path, int dflt)
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
 * The system's table.  node<i>/distance lists the distances from node i
 * to every online node, in id order; has_memory lists the nodes with
 * memory (online where the kernel has no such file); weights come from the
 * kernel's weighted-interleave files (1 where there is none).
 */
static struct psi_topology *psi_topo_read_sysfs(void)
{
	unsigned long online[PSI_NODEMASK_LONGS], mem[PSI_NODEMASK_LONGS];
	int max = psi_sysfs_nodes(PSI_SYSFS_NODE "online", online), i, j, d;
	struct psi_topology *t;
	char path[128];

	if (max < 0) {
		max = 0;
		psi_set_bit(online, 0);
	}
	t = psi_topo_alloc(max + 1);
	if (!t)
		return NULL;
	if (psi_sysfs_nodes(PSI_SYSFS_NODE "has_memory", mem) < 0)
		memcpy(mem, online, sizeof(mem));
	psi_topo_set_mem(t, mem);
	for (i = 0; i < t->nr; i++) {
		FILE *f;

		if (!psi_bit(online, i))
			continue;
		snprintf(path, sizeof(path), PSI_SYSFS_NODE "node%d/distance", i);
		f = fopen(path, "re");
		if (f) {
			for (j = 0; j < t->nr; j++) {
				if (!psi_bit(online, j))
					continue;
				if (fscanf(f, "%d", &d) != 1)
					break;
				t->dist[i * t->nr + j] = (unsigned char)(d < 0 || d > PSI_DIST_UNKNOWN ?
										 PSI_DIST_UNKNOWN : d);
			}
			fclose(f);
		}
		snprintf(path, sizeof(path), "/sys/kernel/mm/mempolicy/weighted_interleave/node%d", i);
		d = psi_sysfs_int(path, 1);
		t->weight[i] = (unsigned char)(d < 1 ? 1 : d > 255 ? 255 : d);
	}
	return t;
}

/* psi_topo_read_sysfs() with cancellation off: its stdio calls are cancellation points. */
static struct psi_topology *psi_topo_system(void)
{
	struct psi_topology *t;
	int cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	t = psi_topo_read_sysfs();
	pthread_setcancelstate(cs, NULL);
	return t;
}

/*
 * Make _ps_numa_fast.dense the published table's.  Two publishers may store it
 * in either order, so each stores the value of the table it then loads,
 * and goes again unless that table is still published after its store.
 * All seq_cst (the CASs too): whoever stores last either found the last
 * table published, or saw it come after its store and goes again.
 */
static void psi_topo_sync_dense(void)
{
	const struct psi_topology *t;

	do {
		t = PSI_LOAD_SEQ_CST(psi_topo);
		PSI_STORE_SEQ_CST(_ps_numa_fast.dense, t->dense);
	} while (PSI_LOAD_SEQ_CST(psi_topo) != t);
}

/* Publish @t in place of whatever table is in force (it is kept: see the top). */
static void psi_topo_publish(struct psi_topology *t)
{
	struct psi_topology *old = PSI_READ_ONCE(psi_topo);

	do
		t->older = old;
	while (!PSI_TRY_CMPXCHG(psi_topo, &old, t, SEQ_CST, RELAXED));
	psi_topo_sync_dense();
}

/* The first lookup: the system's table, unless another thread published one meanwhile. */
static __attribute__((noinline, cold)) const struct psi_topology *psi_topo_first(void)
{
	struct psi_topology *t = psi_topo_system(), *cur = NULL;

	if (!t)
		return &psi_topo_none; /* not published: the next lookup tries again */
	if (!PSI_TRY_CMPXCHG(psi_topo, &cur, t, SEQ_CST, ACQUIRE)) {
		free(t);
		return cur;
	}
	psi_topo_sync_dense();
	return t;
}

static inline const struct psi_topology *psi_topo_get(void)
{
	const struct psi_topology *t = PSI_LOAD_ACQUIRE(psi_topo);

	return psi_likely(t) ? t : psi_topo_first();
}

void psi_numa_topology_load(void)
{
	(void)psi_topo_get();
}

static inline int psi_topo_dist(const struct psi_topology *t, int from, int to)
{
	return from < t->nr && to < t->nr ? t->dist[from * t->nr + to] : PSI_DIST_UNKNOWN;
}

static inline int psi_topo_weight(const struct psi_topology *t, int node)
{
	return node < t->nr ? t->weight[node] : 1;
}

/* Not in the table's memory, but in its distances: an online node without memory. */
static bool psi_topo_described(const struct psi_topology *t, int node)
{
	return psi_topo_dist(t, node, node) != PSI_DIST_UNKNOWN;
}

/* The node of @nodes (not empty) nearest to @from; ascending ids and a strict "nearer": the lowest id wins a tie. */
static int psi_topo_nearest(const struct psi_topology *t, const unsigned long *nodes, int from)
{
	int n, best = -1, best_d = PSI_DIST_UNKNOWN + 1;

	for_each_node_in(n, nodes) {
		int d = psi_topo_dist(t, from, n);

		if (d < best_d) {
			best = n;
			best_d = d;
		}
	}
	return best;
}

/* Where the local node's allocations go: itself when it has memory, else the nearest node that has. */
static int psi_topo_local(const struct psi_topology *t, int local_node)
{
	return psi_bit(t->mem, local_node) ? local_node : psi_topo_nearest(t, t->mem, local_node);
}

/* @nodes that have memory, into @usable.  Return: how many. */
static int psi_topo_usable(const struct psi_topology *t, const unsigned long *nodes,
		unsigned long *usable)
{
	size_t w;
	int n = 0;

	for (w = 0; w < PSI_NODEMASK_LONGS; w++) {
		usable[w] = nodes[w] & t->mem[w];
		n += __builtin_popcountl(usable[w]);
	}
	return n;
}

/*
 * WEIGHTED_INTERLEAVE over @nodes (not empty): slot @ilx mod the weights'
 * sum, by @wts (a policy's own, covering every node of @nodes) or, NULL,
 * by the table's.
 */
static int psi_topo_weighted(const struct psi_topology *t, const unsigned long *nodes,
		const unsigned char *wts, uint64_t ilx)
{
	uint64_t total = 0, target;
	int n, last = -1;

	for_each_node_in(n, nodes)
		total += wts ? wts[n] : (uint64_t)psi_topo_weight(t, n);
	target = ilx % total;
	for_each_node_in(n, nodes) {
		uint64_t w = wts ? wts[n] : (uint64_t)psi_topo_weight(t, n);

		if (target < w)
			return n;
		target -= w;
		last = n;
	}
	return last; /* not reached */
}

/*
 * ps_policy_node()'s rules on the table @t.  The nodes of a policy that
 * count are those with memory in @t; a policy left with none falls back
 * to the local node's allocation, as the kernel's does when a policy's
 * mask no longer meets the nodes it may use.
 */
static int psi_topo_node(const struct psi_topology *t, const struct ps_policy *pol, uint64_t ilx,
		int local_node)
{
	unsigned long usable[PSI_NODEMASK_LONGS];
	int n, first;

	if (!pol || pol->mode == PS_MPOL_DEFAULT || pol->mode == PS_MPOL_LOCAL)
		return psi_topo_local(t, local_node);
	if (pol->mode == PS_MPOL_PREFERRED) {
		/* A node without memory is the start of the search, as its zonelist is the kernel's. */
		first = _ps_nodes_nth(pol->nodes, 0);
		if (psi_bit(t->mem, first))
			return first;
		return psi_topo_local(t, psi_topo_described(t, first) ? first : local_node);
	}
	n = psi_topo_usable(t, pol->nodes, usable);
	if (!n)
		return psi_topo_local(t, local_node);
	switch (pol->mode) {
	case PS_MPOL_BIND:
	case PS_MPOL_PREFERRED_MANY:
		return psi_bit(usable, local_node) ? local_node : psi_topo_nearest(t, usable, local_node);
	case PS_MPOL_INTERLEAVE:
		return _ps_nodes_nth(usable, (unsigned long)(ilx % (unsigned)n));
	default: /* PS_MPOL_WEIGHTED_INTERLEAVE */
		return psi_topo_weighted(t, usable, pol->wts, ilx);
	}
}

int _ps_numa_node(const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	return psi_topo_node(psi_topo_get(), pol, ilx, local_node);
}

/*
 * Called by the inline code of programs built against earlier headers
 * (BIND and PREFERRED_MANY without the local node; WEIGHTED_INTERLEAVE):
 * the same rules, on the topology in force.
 */
int _ps_numa_nearest(const unsigned long *nodes, int local_node)
{
	const struct psi_topology *t = psi_topo_get();
	unsigned long usable[PSI_NODEMASK_LONGS];

	if (local_node < 0 || local_node >= PS_MAX_NUMNODES)
		return -EINVAL;
	if (!psi_topo_usable(t, nodes, usable))
		return psi_topo_local(t, local_node);
	return psi_topo_nearest(t, usable, local_node);
}

int _ps_numa_weighted(const unsigned long *nodes, uint64_t ilx)
{
	const struct psi_topology *t = psi_topo_get();
	unsigned long usable[PSI_NODEMASK_LONGS];

	if (!psi_topo_usable(t, nodes, usable))
		return _ps_nodes_nth(t->mem, 0);
	return psi_topo_weighted(t, usable, NULL, ilx);
}

int ps_numa_set_topology(int nr_nodes, const unsigned char *distance, const unsigned char *weights)
{
	unsigned long mem[PSI_NODEMASK_LONGS] = { 0 };
	struct psi_topology *t;
	int i;

	if (nr_nodes < 0 || nr_nodes > PS_MAX_NUMNODES || (nr_nodes && !distance) ||
			(!nr_nodes && (distance || weights)))
		return -EINVAL;
	for (i = 0; weights && i < nr_nodes; i++)
		if (!weights[i])
			return -EINVAL;
	if (nr_nodes) {
		t = psi_topo_alloc(nr_nodes);
		if (!t)
			return -ENOMEM;
		memcpy(t->dist, distance, (size_t)nr_nodes * (size_t)nr_nodes);
		if (weights)
			memcpy(t->weight, weights, (size_t)nr_nodes);
		for (i = 0; i < nr_nodes; i++)
			psi_set_bit(mem, i);
		psi_topo_set_mem(t, mem);
	} else {
		t = psi_topo_system();
		if (!t)
			return -ENOMEM;
	}
	psi_topo_publish(t);
	return 0;
}

int ps_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	int err = _ps_node_check(local_node);

	return err ? err : _ps_policy_node(pol, ilx, local_node);
}

int ps_numa_check_policy(const struct ps_policy *pol, struct ps_policy_fit *fit)
{
	const struct psi_topology *t;
	unsigned long usable[PSI_NODEMASK_LONGS];
	struct ps_policy_fit f = { .first_missing = -1, .rule = PS_FIT_EXACT };
	int n;

	if (!pol)
		return -EINVAL;
	t = psi_topo_get();
	if (pol->mode == PS_MPOL_PREFERRED) {
		/* Its lowest node is the one it prefers, as the kernel's. */
		n = _ps_nodes_nth(pol->nodes, 0);
		f.present = psi_bit(t->mem, n);
		f.missing = !f.present;
		if (f.missing) {
			f.first_missing = n;
			f.rule = psi_topo_described(t, n) ? PS_FIT_NEAREST : PS_FIT_LOCAL;
		}
	} else if (pol->weight) {
		f.present = psi_topo_usable(t, pol->nodes, usable);
		f.missing = pol->weight - f.present;
		for_each_node_in(n, pol->nodes) {
			if (!psi_bit(usable, n)) {
				f.first_missing = n;
				break;
			}
		}
		if (f.missing)
			f.rule = f.present ? PS_FIT_NARROWED : PS_FIT_LOCAL;
	}
	if (fit)
		*fit = f;
	return f.missing ? -ENOENT : 0;
}

/* At unload every table ever published goes; no reader may run then. */
static __attribute__((destructor)) void psi_topo_fini(void)
{
	struct psi_topology *t = psi_topo;

	while (t) {
		struct psi_topology *older = t->older;

		free(t);
		t = older;
	}
	psi_topo = NULL;
	_ps_numa_fast.dense = 0;
}
