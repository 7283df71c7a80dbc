// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Real placement: policies to mbind(2), get_mempolicy(2) back to policies,
 * and libnuma bitmask conversions.
 *
 * libnuma is used for what it does well (the NUMA probe, the configured
 * node count and set, the system call wrappers) but not for the allowed
 * set: numa_get_mems_allowed() allocates a bitmask and libnuma exits the
 * process when such an allocation fails, which a library must not risk.
 * The allowed set is read into a buffer on the stack instead.
 *
 * Mask lengths: polstore masks hold exactly PS_MAX_NUMNODES bits.  The
 * kernel's get_nodes() reads maxnode - 1 bits (a historical off-by-one that
 * mbind(2) documents), so every call passes the number of bits + 1.
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <polstore/numa.h>

#include "alloc_internal.h"
#include "compiler.h"
#include "policy_internal.h"

#ifndef MPOL_LOCAL
#define MPOL_LOCAL 4
#endif

/*
 * Buffer for masks the kernel writes (allowed set, get_mempolicy()): the
 * kernel refuses a buffer shorter than its nr_node_ids, which can exceed
 * PS_MAX_NUMNODES, so take the page of bits the kernel accepts at most.
 */
#define PSI_KMASK_BITS PS_MAXNODE_LIMIT
#define PSI_KMASK_LONGS (PSI_KMASK_BITS / PSI_BITS_PER_LONG)

/*
 * 1 once the probe succeeded.  A positive answer cannot change during the
 * life of the process, a negative one is not cached (it is cheap to repeat
 * and tests may want to see it).  Relaxed accesses suffice: the flag guards
 * no other data.
 */
static int psi_numa_ok;

int ps_numa_available(void)
{
	if (psi_likely(PSI_READ_ONCE(psi_numa_ok)))
		return 0;
	errno = 0;
	if (numa_available() < 0)
		return errno == EPERM ? -EPERM : -ENOSYS;
	PSI_WRITE_ONCE(psi_numa_ok, 1);
	return 0;
}

/* The arguments were checked first (@ok), then libnuma: 0, -EINVAL or ps_numa_available()'s error. */
static int numa_args_ok(bool ok)
{
	return ok ? ps_numa_available() : -EINVAL;
}

static size_t psi_sys_page_size(void)
{
	static size_t cached;
	size_t ps = PSI_READ_ONCE(cached);

	if (!ps) {
		long v = sysconf(_SC_PAGESIZE);

		ps = v > 0 ? (size_t)v : 4096;
		PSI_WRITE_ONCE(cached, ps);
	}
	return ps;
}

static bool psi_test_bit(const unsigned long *mask, unsigned long bit)
{
	return (mask[bit / PSI_BITS_PER_LONG] >> (bit % PSI_BITS_PER_LONG)) & 1;
}

/*
 * The checks the top of polstore/numa.h promises.  numa_max_node() and
 * numa_nodes_ptr are libnuma's view of /sys/devices/system/node, read once
 * when libnuma is loaded.
 */
static int psi_check_nodes(const struct ps_policy *pol)
{
	unsigned long allowed[PSI_KMASK_LONGS];
	int max = numa_max_node();
	bool need_allowed = !(pol->flags & PS_MPOL_F_STATIC_NODES);
	unsigned long i;

	if (!pol->weight || (pol->flags & PS_MPOL_F_RELATIVE_NODES))
		return 0;
	if (need_allowed) {
		if (get_mempolicy(NULL, allowed, PSI_KMASK_BITS + 1, NULL, MPOL_F_MEMS_ALLOWED))
			return errno == ENOSYS || errno == EPERM ? -errno : -EINVAL;
	}
	for (i = 0; i < PS_MAX_NUMNODES; i++) {
		if (!psi_test_bit(pol->nodes, i))
			continue;
		if ((long)i > max)
			return -EINVAL;
		if (numa_nodes_ptr && !numa_bitmask_isbitset(numa_nodes_ptr, (unsigned)i))
			return -EINVAL;
		if (need_allowed && !psi_test_bit(allowed, i))
			return -EINVAL;
	}
	return 0;
}

static int psi_apply_weighted(const struct ps_policy *pol, char *addr, uint64_t npages,
		size_t page_size, uint64_t ilx, unsigned flags, uint64_t *done);

int ps_policy_apply(const struct ps_policy *pol, void *addr, size_t len, unsigned flags)
{
	unsigned mf = 0;
	int mode = PS_MPOL_DEFAULT;
	const unsigned long *mask = NULL;
	unsigned long maxnode = 0;
	int ret;

	ret = numa_args_ok(!(flags & ~PS_APPLY_ALL) &&
			!((uintptr_t)addr & (psi_sys_page_size() - 1)));
	if (ret || !len)
		return ret;
	if (flags & PS_APPLY_STRICT)
		mf |= MPOL_MF_STRICT;
	if (flags & PS_APPLY_MOVE)
		mf |= MPOL_MF_MOVE;
	if (pol) {
		ret = psi_check_nodes(pol);
		if (ret)
			return ret;
		/* Weights of its own: by the virtual page number, the kernel's index for anonymous memory. */
		if (pol->wts) {
			uint64_t done;

			return psi_apply_weighted(pol, addr, len / psi_sys_page_size(),
					psi_sys_page_size(),
					(uintptr_t)addr / psi_sys_page_size(), flags, &done);
		}
		mode = pol->mode;
		if (pol->weight) {
			mask = pol->nodes;
			maxnode = PS_MAX_NUMNODES + 1;
		}
		/* enum ps_mode and PS_MPOL_F_* equal the kernel's values. */
		if (mode != PS_MPOL_DEFAULT)
			mode |= (int)pol->flags;
	}
	if (!mbind(addr, len, mode, mask, maxnode, mf))
		return 0;
	ret = -errno;
	/* Before Linux 3.8, "local" was spelled "preferred, no node". */
	if (ret == -EINVAL && mode == PS_MPOL_LOCAL &&
			!mbind(addr, len, MPOL_PREFERRED, NULL, 0, mf))
		return 0;
	return ret;
}

struct ps_policy *ps_policy_from_addr(const void *addr)
{
	unsigned long mask[PSI_KMASK_LONGS];
	unsigned long i;
	int kmode = 0;
	int mode;
	unsigned flags;
	int ret = ps_numa_available();

	if (ret)
		return psi_err_null(-ret);
	if (get_mempolicy(&kmode, mask, PSI_KMASK_BITS + 1, (void *)addr, MPOL_F_ADDR))
		return NULL; /* errno from the kernel: EFAULT, EINVAL, ... */
	flags = (unsigned)kmode & PS_MPOL_F_ALL;
	mode = kmode & ~(int)PS_MPOL_F_ALL;
	if (mode < 0 || mode >= PS_MPOL_MAX)
		return psi_err_null(EOPNOTSUPP);
	for (i = PS_MAX_NUMNODES / PSI_BITS_PER_LONG; i < PSI_KMASK_LONGS; i++) {
		if (mask[i])
			return psi_err_null(EOVERFLOW);
	}
	/*
	 * The kernel reports the nodes of DEFAULT and LOCAL as empty; an old
	 * kernel's local policy (PREFERRED, empty) becomes LOCAL in
	 * ps_policy_create(), as polstore defines it.
	 */
	return ps_policy_create(mode, flags, mask, PS_MAX_NUMNODES);
}

int ps_policy_to_bitmask(const struct ps_policy *pol, struct bitmask *bmp)
{
	if (!pol || !bmp || !bmp->maskp || !bmp->size)
		return -EINVAL;
	/* struct bitmask stores bit i in word i / BITS_PER_LONG, as polstore does. */
	return ps_policy_nodemask(pol, bmp->maskp, bmp->size);
}

struct ps_policy *ps_policy_from_bitmask(int mode, unsigned flags, const struct bitmask *bmp)
{
	if (!bmp)
		return ps_policy_create(mode, flags, NULL, 0);
	return ps_policy_create(mode, flags, bmp->maskp, bmp->size);
}

/* One range of the store that meets the window, with its own reference. */
struct psi_apply_piece {
	uint64_t start, end;
	struct ps_policy *pol;
};

struct psi_apply_collect {
	uint64_t first, end; /* the window */
	struct psi_apply_piece *v;
	size_t n, cap;
};

#define PSI_COLLECT_DONE 1
#define PSI_COLLECT_NOMEM 2

/*
 * ps_store_foreach_range() callback: runs inside the store's read section or
 * lock, so it only copies and takes references; the allocation it may do
 * is the only slow step and happens only when the store grew after
 * ps_store_apply_range() sized the array.
 */
static int psi_apply_collect_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct psi_apply_collect *c = arg;

	if (start >= c->end)
		return PSI_COLLECT_DONE;
	if (end <= c->first)
		return 0;
	if (!psi_grow((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v), 8))
		return PSI_COLLECT_NOMEM;
	c->v[c->n].start = start < c->first ? c->first : start;
	c->v[c->n].end = end > c->end ? c->end : end;
	c->v[c->n].pol = ps_policy_get(pol);
	c->n++;
	return 0;
}

/*
 * A policy with weights of its own, over @npages pages of @page_size from
 * @addr whose first has interleave index @ilx: the kernel keeps no weights
 * per range, so each run of pages that go to one node is mbind()'s
 * PREFERRED on that node (an interleaved page, too, falls back to other
 * nodes when its own is full).  *@done: the pages placed.
 */
static int psi_apply_weighted(const struct ps_policy *pol, char *addr, uint64_t npages,
		size_t page_size, uint64_t ilx, unsigned flags, uint64_t *done)
{
	struct ps_policy one;
	uint64_t i, run;
	int node, ret;

	for (i = 0; i < npages; i = run) {
		node = ps_policy_node(pol, ilx + i, 0);
		for (run = i + 1; run < npages && ps_policy_node(pol, ilx + run, 0) == node; run++)
			;
		memset(&one, 0, sizeof(one));
		one.mode = PS_MPOL_PREFERRED;
		one.flags = pol->flags;
		one.weight = 1;
		one.nodes[(unsigned)node / PSI_BITS_PER_LONG] = 1UL << ((unsigned)node % PSI_BITS_PER_LONG);
		ret = ps_policy_apply(&one, addr + i * page_size, (run - i) * page_size, flags);
		if (ret) {
			*done = i;
			return ret;
		}
	}
	*done = npages;
	return 0;
}

/* Pages [@from, @to) of the window by @pol; *@pos: the page after the last placed. */
static int psi_apply_pages(const struct ps_policy *pol, char *base, uint64_t first, uint64_t from,
		uint64_t to, size_t page_size, unsigned flags, uint64_t *pos)
{
	char *addr = base + (from - first) * page_size;
	uint64_t done;
	int ret;

	if (pol && pol->wts) {
		done = 0;
		ret = psi_check_nodes(pol);
		if (!ret)
			ret = psi_apply_weighted(pol, addr, to - from, page_size, from, flags, &done);
		*pos = from + done;
		return ret;
	}
	ret = ps_policy_apply(pol, addr, (to - from) * page_size, flags);
	if (!ret)
		*pos = to;
	return ret;
}

int ps_store_apply_range(struct ps_store *store, void *base, uint64_t first_page, uint64_t npages,
		size_t page_size, unsigned flags, size_t *done_pages)
{
	struct psi_apply_collect c = {0};
	uint64_t pos = first_page;
	size_t i;
	int ret;

	if (done_pages)
		*done_pages = 0;
	ret = numa_args_ok(store && page_size && !(page_size % psi_sys_page_size()) &&
			!((uintptr_t)base % page_size) && !(flags & ~PS_APPLY_ALL) &&
			first_page + npages >= first_page &&
			npages <= (UINTPTR_MAX - (uintptr_t)base) / page_size && npages <= SIZE_MAX);
	if (ret || !npages)
		return ret;

	c.first = first_page;
	c.end = first_page + npages;
	c.cap = ps_store_count(store);
	if (c.cap > npages)
		c.cap = npages;
	if (c.cap < 4)
		c.cap = 4;
	c.v = psi_alloc(c.cap * sizeof(*c.v));
	if (!c.v)
		return -ENOMEM;
	/* Only the ranges that meet the window: a seek, not a walk of the whole store. */
	ret = ps_store_foreach_range(store, c.first, c.end, psi_apply_collect_fn, &c);
	if (ret == PSI_COLLECT_NOMEM) {
		ret = -ENOMEM;
		goto out;
	}
	ret = 0;

	/* Pieces are ascending and disjoint; fill the gaps with DEFAULT. */
	for (i = 0; i <= c.n && !ret; i++) {
		uint64_t next = i < c.n ? c.v[i].start : c.end;

		if (pos < next) {
			ret = psi_apply_pages(NULL, base, first_page, pos, next, page_size, flags,
					&pos);
			if (ret)
				break;
		}
		if (i < c.n)
			ret = psi_apply_pages(c.v[i].pol, base, first_page, pos, c.v[i].end,
					page_size, flags, &pos);
	}
	if (done_pages)
		*done_pages = (size_t)(pos - first_page);
out:
	for (i = 0; i < c.n; i++)
		ps_policy_put(c.v[i].pol);
	psi_free(c.v);
	return ret;
}
