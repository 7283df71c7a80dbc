// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * jemalloc_arena: a jemalloc arena whose memory is placed by a polstore store.
 *
 * The arena owns a window of address space, reserved (PROT_NONE) when it is
 * created; store index i is page i of the window.  jemalloc gets memory
 * through the arena's extent hooks: the alloc hook carves an extent out of
 * the window, maps it, and places it with ps_store_apply_range(), so each
 * page gets the policy the store holds for it then (the default policy
 * where no range covers it).  Placement is fixed when the extent is mapped:
 * a later ps_store_set() places the extents mapped after it, and leaves the
 * pages of earlier ones where they are (mbind(2) without MPOL_MF_MOVE).
 *
 *   struct pa_arena *a = pa_create(store, 1UL << 30, PA_UNMAP, NULL, NULL);
 *   void *p = mallocx(size, MALLOCX_ARENA(a->ind) | MALLOCX_TCACHE_NONE);
 *   dallocx(p, MALLOCX_TCACHE_NONE);    (what pa_malloc() and pa_free() do)
 *   pa_destroy(a, NULL);                (every allocation freed before)
 *
 * MALLOCX_TCACHE_NONE: jemalloc's thread caches are per size class, not per
 * arena, so a cached small object of another arena could answer an
 * MALLOCX_ARENA request; and an arena may be destroyed only once no thread
 * cache holds its objects (or after "thread.tcache.flush" in every thread
 * that used it).
 *
 * The hooks and jemalloc's contracts (jemalloc(3), "arena.<i>.extent_hooks"):
 *  - alloc: a page run of the window, aligned as asked (exactly at
 *    new_addr when jemalloc names one, or not at all), mapped read-write
 *    and placed: zeroed and committed.  No room, a failed mmap(2) or a
 *    refused placement (ps_store_apply_range() fails, e.g. the policy names
 *    a node this machine lacks) gives the run back to the window and
 *    returns NULL with *zero and *commit untouched: mallocx() returns NULL,
 *    nothing crashes.
 *  - dalloc: what becomes of a freed extent is the arena's choice (enum
 *    pa_keep).  PA_UNMAP unmaps it: the run is reserved window again, its
 *    placement forgotten, and the next extent mapped there is placed
 *    afresh.  PA_DECOMMIT and PA_PURGE opt out (return true): the extent
 *    stays mapped with its placement, and jemalloc decommits it (PA_DECOMMIT)
 *    or, the decommit refused too, purges it (PA_PURGE), then reuses it:
 *    reused memory keeps the placement it was first mapped with.
 *  - destroy (retained extents, when the arena is destroyed): unmap.
 *  - decommit: PROT_NONE and MADV_DONTNEED, which frees the pages but keeps
 *    the mapping and its placement; commit: read-write again, and the pages
 *    read as zero, as the contract asks.
 *  - purge_forced: MADV_DONTNEED (zero on next touch); purge_lazy:
 *    MADV_FREE.  Both keep the placement; a kernel that refuses is reported
 *    as "not purged" (true).
 *  - split and merge: accepted.  Every extent lies in the window, every page
 *    carries its own placement in the kernel, and every hook works page by
 *    page with system calls that span mappings, so jemalloc may cut and join
 *    extents freely.  A merged extent keeps each page's placement.
 * Hooks run on jemalloc's allocating and freeing threads, several at once:
 * the window's page bitmap is under a mutex; the store is safe to read from
 * any thread.  They call malloc() (polstore allocates in
 * ps_store_apply_range()), which jemalloc serves reentrantly from arena 0.
 *
 * The demonstration: threads take zeroed blocks with mallocx() from three
 * arenas (one per pa_keep) and free them, while another thread changes the
 * policy of the whole window every half millisecond, cycling through bind,
 * preferred, interleave and default.  For every extent the alloc hook maps,
 * the placement is read back with get_mempolicy(2): MPOL_F_ADDR for the
 * policy, MPOL_F_NODE | MPOL_F_ADDR for the node each checked page landed
 * on, and checked against the policies in force while the extent was being
 * mapped; the first byte of every page of every block must read zero.  Then,
 * one step at a
 * time: an extent mapped after a change follows the new policy while an
 * older one keeps its own; an arena whose window is full and a policy
 * naming a node that does not exist make mallocx() return NULL, and the
 * arena goes on working after.
 *
 * Build against an installed polstore:
 *   cc jemalloc_arena.c $(pkg-config --cflags --libs polstore jemalloc) -pthread
 * Usage: jemalloc_arena [-t THREADS] [-n ALLOCS] [-v VARIANT]
 * MALLOC_CONF=retain:false makes jemalloc map each extent it needs (and
 * unmap it when it is purged) instead of carving extents out of a reserve
 * it grows geometrically.
 * Exit status: 0 when every check passed, 1 when one failed, 77 when this
 * system does not allow mbind(2).
 */
#define _GNU_SOURCE /* MADV_FREE, MAP_NORESERVE */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>
#include <polstore/polstore.h>

#ifndef MPOL_F_NODE
#define MPOL_F_NODE (1 << 0)
#define MPOL_F_ADDR (1 << 1)
#define MPOL_F_MEMS_ALLOWED (1 << 2)
#endif

#define LONG_BITS (8 * sizeof(unsigned long))

/* ------------------------------------------------------------------------
 * The arena: a window of address space placed by a store.
 */

/* What the arena does with an extent jemalloc lets go of (the dalloc hook). */
enum pa_keep {
	PA_UNMAP,    /* unmap it: back to reserved window, placed afresh when mapped again */
	PA_DECOMMIT, /* keep it mapped and placed: jemalloc decommits it, commits it for reuse */
	PA_PURGE,    /* keep it mapped, placed and committed: jemalloc purges its pages */
};

/* Hook call counters, for the demonstration. */
enum {
	H_ALLOC,
	H_DALLOC,
	H_DESTROY,
	H_COMMIT,
	H_DECOMMIT,
	H_PURGE_LAZY,
	H_PURGE_FORCED,
	H_SPLIT,
	H_MERGE,
	H_NR
};

struct pa_arena;
/* Called by the alloc hook for each extent it mapped and placed. */
typedef void (*pa_placed_fn)(struct pa_arena *a, void *addr, size_t size, void *arg);

struct pa_arena {
	extent_hooks_t hooks;	/* first: jemalloc hands &hooks back to every hook */
	struct ps_store *store; /* store index i: page i of the window */
	char *base;		/* the window: npages * page bytes */
	size_t page, npages;
	unsigned ind; /* jemalloc's arena index, for MALLOCX_ARENA() */
	enum pa_keep keep;
	pa_placed_fn placed;
	void *placed_arg;
	pthread_mutex_t lock; /* protects used and rover */
	unsigned long *used;  /* bit i set: page i is mapped (belongs to an extent) */
	size_t rover;	      /* next fit: where the last claim ended */
	atomic_ulong calls[H_NR], nmapped, nunmapped, nrefused, nnoroom;
};

static bool bit_get(const unsigned long *m, size_t i)
{
	return m[i / LONG_BITS] >> (i % LONG_BITS) & 1;
}

static void bits_assign(unsigned long *m, size_t first, size_t n, bool set)
{
	for (size_t i = first; i < first + n; i++) {
		if (set)
			m[i / LONG_BITS] |= 1UL << (i % LONG_BITS);
		else
			m[i / LONG_BITS] &= ~(1UL << (i % LONG_BITS));
	}
}

/* The first used page in [first, first + n), or SIZE_MAX when all are free. */
static size_t first_used(const unsigned long *m, size_t first, size_t n)
{
	size_t i = first;

	while (i < first + n) {
		if (i % LONG_BITS == 0 && first + n - i >= LONG_BITS && !m[i / LONG_BITS]) {
			i += LONG_BITS;
			continue;
		}
		if (bit_get(m, i))
			return i;
		i++;
	}
	return SIZE_MAX;
}

/* The first page at or after @p whose address is a multiple of @alignment. */
static size_t align_page(const struct pa_arena *a, size_t p, size_t alignment)
{
	uintptr_t addr = (uintptr_t)a->base + p * a->page;
	uintptr_t up = (addr + alignment - 1) & ~(uintptr_t)(alignment - 1);

	return up < addr ? SIZE_MAX : (up - (uintptr_t)a->base) / a->page;
}

/* A free run of @n pages, aligned, within pages [from, to); SIZE_MAX if none. */
static size_t find_run(const struct pa_arena *a, size_t from, size_t to, size_t n, size_t alignment)
{
	size_t p = align_page(a, from, alignment), busy;

	while (p < to && to - p >= n) {
		busy = first_used(a->used, p, n);
		if (busy == SIZE_MAX)
			return p;
		p = align_page(a, busy + 1, alignment);
	}
	return SIZE_MAX;
}

/* Claim @n pages (exactly at @want when not NULL): the first page, or SIZE_MAX. */
static size_t claim(struct pa_arena *a, void *want, size_t n, size_t alignment)
{
	size_t p = SIZE_MAX;

	pthread_mutex_lock(&a->lock);
	if (want) {
		uintptr_t off = (uintptr_t)want - (uintptr_t)a->base;

		if ((uintptr_t)want >= (uintptr_t)a->base && off % a->page == 0 &&
				off / a->page <= a->npages && a->npages - off / a->page >= n &&
				first_used(a->used, off / a->page, n) == SIZE_MAX)
			p = off / a->page;
	} else if (n <= a->npages) {
		p = find_run(a, a->rover, a->npages, n, alignment);
		if (p == SIZE_MAX)
			p = find_run(a, 0, a->npages, n, alignment);
	}
	if (p != SIZE_MAX) {
		bits_assign(a->used, p, n, true);
		a->rover = p + n;
	}
	pthread_mutex_unlock(&a->lock);
	return p;
}

static void release(struct pa_arena *a, size_t first, size_t n)
{
	pthread_mutex_lock(&a->lock);
	bits_assign(a->used, first, n, false);
	pthread_mutex_unlock(&a->lock);
}

/* Back to reserved window: no pages, no placement.  0 or -errno. */
static int unmap_to_window(void *addr, size_t size)
{
	void *r = mmap(addr, size, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);

	return r == MAP_FAILED ? -errno : 0;
}

/* Every hook: its arena (jemalloc hands back &a->hooks, the first member), the call counted. */
static struct pa_arena *hook_enter(extent_hooks_t *h, int hook)
{
	struct pa_arena *a = (struct pa_arena *)h;

	atomic_fetch_add(&a->calls[hook], 1);
	return a;
}

static void *pa_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment, bool *zero,
		bool *commit, unsigned arena_ind)
{
	struct pa_arena *a = hook_enter(h, H_ALLOC);
	size_t n = size / a->page, first;
	char *addr;

	(void)arena_ind;
	if (!size || size % a->page || (alignment & (alignment - 1)))
		return NULL;
	first = claim(a, new_addr, n, alignment < a->page ? a->page : alignment);
	if (first == SIZE_MAX) {
		atomic_fetch_add(&a->nnoroom, 1);
		return NULL;
	}
	addr = a->base + first * a->page;
	/* Over our own reservation: MAP_FIXED replaces nothing of anyone else's. */
	if (mmap(addr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			    0) == MAP_FAILED) {
		if (unmap_to_window(addr, size) == 0) /* a failed MAP_FIXED may leave a hole */
			release(a, first, n);
		atomic_fetch_add(&a->nnoroom, 1);
		return NULL;
	}
	/* Before any page is touched, so that every page is allocated under the policy. */
	if (ps_store_apply_range(a->store, addr, first, n, a->page, 0, NULL)) {
		if (unmap_to_window(addr, size) == 0)
			release(a, first, n); /* else the run stays claimed: never reused */
		atomic_fetch_add(&a->nrefused, 1);
		return NULL;
	}
	atomic_fetch_add(&a->nmapped, 1);
	if (a->placed)
		a->placed(a, addr, size, a->placed_arg);
	*zero = true; /* fresh anonymous memory: zero-filled on first touch */
	*commit = true;
	return addr;
}

static bool unmap_extent(struct pa_arena *a, void *addr, size_t size)
{
	if (unmap_to_window(addr, size))
		return true;
	release(a, (size_t)((char *)addr - a->base) / a->page, size / a->page);
	atomic_fetch_add(&a->nunmapped, 1);
	return false;
}

static bool pa_dalloc(
		extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena_ind)
{
	struct pa_arena *a = hook_enter(h, H_DALLOC);

	(void)committed;
	(void)arena_ind;
	if (a->keep != PA_UNMAP)
		return true; /* opt out: jemalloc keeps the extent mapped, in its commit state */
	return unmap_extent(a, addr, size); /* true (kept as it is) if unmapping failed */
}

static void pa_destroy_extent(
		extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena_ind)
{
	struct pa_arena *a = hook_enter(h, H_DESTROY);

	(void)committed;
	(void)arena_ind;
	if (unmap_extent(a, addr, size))
		fprintf(stderr, "jemalloc_arena: cannot unmap %zu bytes at %p\n", size, addr);
}

static bool pa_commit(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length,
		unsigned arena_ind)
{
	(void)size;
	(void)arena_ind;
	hook_enter(h, H_COMMIT);
	/* Decommit discarded the pages: they read as zero again. */
	return mprotect((char *)addr + offset, length, PROT_READ | PROT_WRITE) != 0;
}

static bool pa_decommit(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length,
		unsigned arena_ind)
{
	struct pa_arena *a = hook_enter(h, H_DECOMMIT);
	char *p = (char *)addr + offset;

	(void)size;
	(void)arena_ind;
	if (a->keep == PA_PURGE)
		return true; /* opt out: still committed; jemalloc purges instead */
	/* mprotect and madvise keep the mapping, so its placement stays. */
	if (mprotect(p, length, PROT_NONE))
		return true;
	if (madvise(p, length, MADV_DONTNEED)) {
		mprotect(p, length, PROT_READ | PROT_WRITE);
		return true;
	}
	return false;
}

/* Both purges: the pages advised away, the mapping and its placement kept; true if refused. */
static bool purge(extent_hooks_t *h, int hook, void *addr, size_t offset, size_t length, int advice)
{
	hook_enter(h, hook);
	return madvise((char *)addr + offset, length, advice) != 0;
}

static bool pa_purge_lazy(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length,
		unsigned arena_ind)
{
	(void)size;
	(void)arena_ind;
	return purge(h, H_PURGE_LAZY, addr, offset, length, MADV_FREE);
}

static bool pa_purge_forced(extent_hooks_t *h, void *addr, size_t size, size_t offset,
		size_t length, unsigned arena_ind)
{
	(void)size;
	(void)arena_ind;
	return purge(h, H_PURGE_FORCED, addr, offset, length, MADV_DONTNEED);
}

static bool pa_split(extent_hooks_t *h, void *addr, size_t size, size_t size_a, size_t size_b,
		bool committed, unsigned arena_ind)
{
	(void)addr, (void)size, (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
	hook_enter(h, H_SPLIT);
	return false;
}

static bool pa_merge(extent_hooks_t *h, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
		bool committed, unsigned arena_ind)
{
	(void)addr_a, (void)size_a, (void)addr_b, (void)size_b, (void)committed, (void)arena_ind;
	hook_enter(h, H_MERGE);
	return false;
}

/*
 * Reserve @window bytes of address space and create a jemalloc arena over
 * it, placed by @store (which must outlive the arena); @keep says what
 * becomes of freed extents.  @placed, if not NULL, is called by the alloc
 * hook after it placed an extent.  Returns NULL with errno set on failure.
 */
static struct pa_arena *pa_create(struct ps_store *store, size_t window, enum pa_keep keep,
		pa_placed_fn placed, void *placed_arg)
{
	struct pa_arena *a = calloc(1, sizeof(*a));
	size_t sz = sizeof(a->ind), limit = window / 8;
	extent_hooks_t *hooks;
	char cmd[64];
	int err = ENOMEM;

	if (!a)
		return NULL;
	a->hooks = (extent_hooks_t){pa_alloc, pa_dalloc, pa_destroy_extent, pa_commit, pa_decommit,
			pa_purge_lazy, pa_purge_forced, pa_split, pa_merge};
	a->store = store;
	a->keep = keep;
	a->placed = placed;
	a->placed_arg = placed_arg;
	a->page = (size_t)sysconf(_SC_PAGESIZE);
	a->npages = window / a->page;
	pthread_mutex_init(&a->lock, NULL);
	a->used = calloc((a->npages + LONG_BITS - 1) / LONG_BITS, sizeof(unsigned long));
	a->base = mmap(NULL, a->npages * a->page, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a->base == MAP_FAILED) {
		err = errno;
		a->base = NULL;
	}
	if (!a->npages || !a->used || !a->base) {
		err = a->npages ? err : EINVAL;
		goto fail;
	}
	hooks = &a->hooks;
	err = mallctl("arenas.create", &a->ind, &sz, &hooks, sizeof(hooks));
	if (err)
		goto fail;
	/*
	 * With opt.retain (jemalloc's default on Linux) the arena grows by
	 * geometrically larger extents and carves later ones out of them: cap
	 * the step so that one step cannot ask for the whole window, and so
	 * that the reserve, placed when it was mapped, stays small.  ENOENT:
	 * retain is off, each extent is mapped on its own.
	 */
	snprintf(cmd, sizeof(cmd), "arena.%u.retain_grow_limit", a->ind);
	err = mallctl(cmd, NULL, NULL, &limit, sizeof(limit));
	if (!err || err == ENOENT)
		return a;
	snprintf(cmd, sizeof(cmd), "arena.%u.destroy", a->ind);
	mallctl(cmd, NULL, NULL, NULL, 0);
fail:
	if (a->base)
		munmap(a->base, a->npages * a->page);
	free(a->used);
	free(a);
	errno = err;
	return NULL;
}

/*
 * Destroy the arena (every allocation in it is discarded: free them first,
 * and flush the thread caches that hold any), then release the window.
 * @calls, if not NULL, receives the hook call counts.  0, or a negative
 * errno from jemalloc (then the arena still exists).
 */
static int pa_destroy(struct pa_arena *a, unsigned long *calls)
{
	char cmd[64];
	int err;

	snprintf(cmd, sizeof(cmd), "arena.%u.destroy", a->ind);
	err = mallctl(cmd, NULL, NULL, NULL, 0);
	if (err)
		return -err; /* jemalloc still uses the window: keep it */
	for (int h = 0; calls && h < H_NR; h++)
		calls[h] = atomic_load(&a->calls[h]);
	munmap(a->base, a->npages * a->page);
	free(a->used);
	pthread_mutex_destroy(&a->lock);
	free(a);
	return 0;
}

/* @size bytes from arena @a, with jemalloc's @flags, bypassing the thread cache (see above). */
static void *pa_malloc(struct pa_arena *a, size_t size, int flags)
{
	return mallocx(size, MALLOCX_ARENA(a->ind) | MALLOCX_TCACHE_NONE | flags);
}

/* Free @p of pa_malloc(), if not NULL. */
static void pa_free(void *p)
{
	if (p)
		dallocx(p, MALLOCX_TCACHE_NONE);
}

/* ------------------------------------------------------------------------
 * The demonstration.
 */

/*
 * Generation k of the window's policy is pols[k % NPOLS] (NULL: default).
 * The changer publishes generation k with ps_store_set() and only then
 * stores k in gen; an allocating thread notes gen before each mallocx()
 * (jemalloc runs the alloc hook in the allocating thread).  A placement
 * snapshot taken by the alloc hook therefore saw a generation in
 * [gen before mallocx, gen after placement + 1]: the set of the next
 * generation may be published before gen says so, not the one after it.
 */
#define NPOLS 4
static struct ps_policy *pols[NPOLS];
static atomic_uint gen;
static _Thread_local unsigned gen_before;
static unsigned long allowed[PS_MAX_NUMNODES / LONG_BITS];
static size_t window_pages;

/* Extents mapped per policy (index into pols), and failed checks. */
static atomic_ulong seen[NPOLS], seen_pages[NPOLS], bad;

static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&bad, 1) >= 10)
		return;
	va_start(ap, fmt);
	fputs("jemalloc_arena: FAILED: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static bool pol_matches(const struct ps_policy *got, const struct ps_policy *want)
{
	return want ? ps_policy_equal(got, want) : ps_policy_mode(got) == PS_MPOL_DEFAULT;
}

/* May a page under @pol sit on @node? */
static bool node_ok(const struct ps_policy *pol, int node)
{
	unsigned long mask[PS_MAX_NUMNODES / LONG_BITS];
	int mode = pol ? ps_policy_mode(pol) : PS_MPOL_DEFAULT;

	if (node < 0 || node >= PS_MAX_NUMNODES)
		return false;
	if (mode == PS_MPOL_BIND || mode == PS_MPOL_INTERLEAVE) {
		if (ps_policy_nodemask(pol, mask, PS_MAX_NUMNODES))
			return false;
		return mask[node / LONG_BITS] >> (node % LONG_BITS) & 1;
	}
	/* preferred, local and default fall back to any allowed node */
	return allowed[node / LONG_BITS] >> (node % LONG_BITS) & 1;
}

/*
 * Which generation's policy does the page at @p follow, among generations
 * @lo..@hi?  The index into pols, or -1 (reported).  Reads the policy of
 * the page (get_mempolicy(MPOL_F_ADDR)) and the node the page landed on
 * (MPOL_F_NODE | MPOL_F_ADDR, which faults the page in).
 */
static int check_page(const char *p, unsigned lo, unsigned hi)
{
	struct ps_policy *got = ps_policy_from_addr(p);
	int node = -1, found = -1;

	if (!got) {
		complain("get_mempolicy(MPOL_F_ADDR) at %p: %s", (void *)p, strerror(errno));
		return -1;
	}
	for (unsigned k = lo; k <= hi && found < 0; k++)
		if (pol_matches(got, pols[k % NPOLS]))
			found = (int)(k % NPOLS);
	if (found < 0)
		complain("page %p is %s, expected a generation in [%u, %u]", (void *)p,
				ps_mode_name(ps_policy_mode(got)), lo, hi);
	ps_policy_put(got);
	if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, p, MPOL_F_NODE | MPOL_F_ADDR)) {
		complain("get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR) at %p: %s", (void *)p,
				strerror(errno));
		return -1;
	}
	if (found >= 0 && !node_ok(pols[found], node)) {
		complain("page %p landed on node %d, outside its policy", (void *)p, node);
		return -1;
	}
	return found;
}

/* The alloc hook's callback: check the first, middle and last page. */
static void on_placed(struct pa_arena *a, void *addr, size_t size, void *arg)
{
	unsigned hi = atomic_load(&gen) + 1, lo = gen_before;
	size_t n = size / a->page, idx[3] = {0, n / 2, n - 1};
	int which = -1;

	(void)arg;
	for (int i = 0; i < 3; i++) {
		int w = check_page((char *)addr + idx[i] * a->page, lo, hi);

		if (w < 0)
			return;
		if (which >= 0 && w != which) {
			complain("extent %p mixes policies", addr);
			return;
		}
		which = w;
	}
	atomic_fetch_add(&seen[which], 1);
	atomic_fetch_add(&seen_pages[which], n);
}

static void set_generation(struct ps_store *s, unsigned k)
{
	if (ps_store_set(s, 0, window_pages, pols[k % NPOLS])) {
		complain("ps_store_set: out of memory");
		return;
	}
	atomic_store(&gen, k);
}

static const char *pol_name(int i)
{
	return i < 0 ? "?" : pols[i] ? ps_mode_name(ps_policy_mode(pols[i])) : "default";
}

#define NARENAS 3
static const char *const keep_name[NARENAS] = {"unmap", "decommit", "purge"};
static const char *const hook_name[H_NR] = {"alloc", "dalloc", "destroy", "commit", "decommit",
		"purge_lazy", "purge_forced", "split", "merge"};

struct worker {
	pthread_t tid;
	struct pa_arena **arenas;
	unsigned id;
	long allocs;
	bool failed;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * 16 KiB..1 MiB zeroed blocks from each arena in turn, up to 8 live; each
 * page of a new block must read zero (jemalloc trusts the hooks' *zero and
 * the commit hook for that), then gets a non-zero byte.
 */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t rnd = 0x9e3779b97f4a7c15ULL * (w->id + 1);
	char *live[8] = {NULL};
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (long i = 0; i < w->allocs && !w->failed; i++) {
		size_t size = (16 << 10) + xorshift(&rnd) % (1 << 20), slot = (size_t)i % 8;
		struct pa_arena *a = w->arenas[(w->id + (unsigned)i) % NARENAS];
		unsigned ind = a->ind;
		char *p;

		pa_free(live[slot]);
		gen_before = atomic_load(&gen);
		p = pa_malloc(a, size, MALLOCX_ZERO);
		live[slot] = p;
		if (!p) {
			complain("mallocx(%zu) from arena %u failed", size, ind);
			w->failed = true;
			break;
		}
		for (size_t off = 0; off < size; off += page) {
			if (p[off]) {
				complain("mallocx(MALLOCX_ZERO) from arena %u: byte %zu is not "
					 "zero",
						ind, off);
				w->failed = true;
			}
			p[off] = 1;
		}
		p[size - 1] = 1;
	}
	for (int i = 0; i < 8; i++)
		pa_free(live[i]);
	return NULL;
}

static atomic_bool stop;

static void *changer_main(void *arg)
{
	struct timespec half_ms = {0, 500000};
	unsigned k = atomic_load(&gen);

	while (!atomic_load(&stop)) {
		set_generation(arg, ++k);
		nanosleep(&half_ms, NULL);
	}
	return NULL;
}

static int set_decay(unsigned ind, const char *which, ssize_t ms)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "arena.%u.%s_decay_ms", ind, which);
	return mallctl(cmd, NULL, NULL, &ms, sizeof(ms));
}

static struct pa_arena *arena_or_die(struct ps_store *s, size_t window, enum pa_keep keep)
{
	struct pa_arena *a = pa_create(s, window, keep, on_placed, NULL);

	if (!a) {
		perror("jemalloc_arena: pa_create");
		exit(1);
	}
	return a;
}

static void destroy_or_complain(struct pa_arena *a, unsigned long *calls)
{
	int err = pa_destroy(a, calls);

	if (err)
		complain("arena.<i>.destroy: %s", strerror(-err));
}

/* Threads allocate from three arenas while the window's policy changes. */
static int concurrent(struct ps_store *s, int threads, long allocs, size_t window)
{
	struct pa_arena *arenas[NARENAS];
	unsigned long calls[NARENAS][H_NR] = {{0}};
	struct worker *w = calloc((size_t)threads, sizeof(*w));
	unsigned long mapped = 0;
	pthread_t changer;
	int ret = 0;

	for (int i = 0; i < NARENAS; i++) {
		arenas[i] = arena_or_die(s, window, (enum pa_keep)i);
		/*
		 * Freed extents go back through the hooks at once, so threads keep
		 * mapping new ones; purge's arena lets them age as muzzy for 1 ms
		 * first (a lazy purge), then purges them for good.
		 */
		if (set_decay(arenas[i]->ind, "dirty", i == PA_PURGE ? 1 : 0) ||
				set_decay(arenas[i]->ind, "muzzy", i == PA_PURGE ? 1 : 0)) {
			fprintf(stderr, "jemalloc_arena: cannot set the decay times\n");
			return 1;
		}
	}
	printf("jemalloc %s; arenas %u, %u, %u (freed extents: unmapped, decommitted, purged), "
	       "each over a %zu MiB window; store %s; %d thread(s) x %ld zeroed allocations while "
	       "the window's policy changes every 0.5 ms\n",
			JEMALLOC_VERSION, arenas[0]->ind, arenas[1]->ind, arenas[2]->ind,
			window >> 20, ps_sync_name(ps_store_sync_kind(s)), threads, allocs);
	if (!w || pthread_create(&changer, NULL, changer_main, s)) {
		fprintf(stderr, "jemalloc_arena: cannot start threads\n");
		return 1;
	}
	for (int i = 0; i < threads; i++) {
		w[i] = (struct worker){.arenas = arenas, .id = (unsigned)i, .allocs = allocs};
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i])) {
			fprintf(stderr, "jemalloc_arena: cannot start threads\n");
			return 1;
		}
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].tid, NULL);
		ret |= w[i].failed;
	}
	atomic_store(&stop, true);
	pthread_join(changer, NULL);
	for (int round = 0; round < 2; round++) {
		struct timespec ms5 = {0, 5000000};
		char cmd[64];

		nanosleep(&ms5, NULL);
		snprintf(cmd, sizeof(cmd), "arena.%u.decay", arenas[PA_PURGE]->ind);
		mallctl(cmd, NULL, NULL, NULL, 0);
	}

	printf("\n%-12s %8s %10s   (each extent checked when mapped: policy and node of its first, "
	       "middle and last page)\n",
			"policy", "extents", "pages");
	for (int i = 0; i < NPOLS; i++)
		printf("%-12s %8lu %10lu\n", pol_name(i), atomic_load(&seen[i]),
				atomic_load(&seen_pages[i]));
	for (int i = 0; i < NARENAS; i++)
		mapped += atomic_load(&arenas[i]->nmapped);
	printf("%u policy changes, %lu extents mapped\n\n%-12s", atomic_load(&gen), mapped, "hook");
	for (int i = 0; i < NARENAS; i++)
		printf(" %9s", keep_name[i]);
	printf("   (calls per arena, until each arena was destroyed)\n");
	for (int i = 0; i < NARENAS; i++)
		destroy_or_complain(arenas[i], calls[i]);
	for (int h = 0; h < H_NR; h++) {
		printf("%-12s", hook_name[h]);
		for (int i = 0; i < NARENAS; i++)
			printf(" %9lu", calls[i][h]);
		printf("\n");
	}
	/* Each arena's way of letting go was taken (and MALLOCX_ZERO held throughout). */
	if (!calls[PA_UNMAP][H_DALLOC] || !calls[PA_DECOMMIT][H_DECOMMIT] ||
			!calls[PA_DECOMMIT][H_COMMIT] || !calls[PA_PURGE][H_PURGE_FORCED]) {
		complain("a hook was never called: dalloc (unmap) %lu, decommit %lu, commit %lu, "
			 "purge_forced %lu",
				calls[PA_UNMAP][H_DALLOC], calls[PA_DECOMMIT][H_DECOMMIT],
				calls[PA_DECOMMIT][H_COMMIT], calls[PA_PURGE][H_PURGE_FORCED]);
		ret = 1;
	}
	free(w);
	return ret;
}

/*
 * Step by step, in a fresh arena (so that each 64 MiB block is a new
 * extent: nothing retained is that large): a block mapped under one
 * policy, a change, a block mapped under the next; the first keeps its own.
 */
static int one_step(struct ps_store *s, size_t window)
{
	const size_t big = 64 << 20;
	struct pa_arena *a = arena_or_die(s, window, PA_UNMAP);
	unsigned long before = atomic_load(&a->nmapped), fresh;
	char *p1, *p2;
	int w1, w2, w1_again, ret = 0;
	unsigned g1;

	set_generation(s, atomic_load(&gen) + 1);
	g1 = gen_before = atomic_load(&gen);
	p1 = pa_malloc(a, big, 0);
	set_generation(s, g1 + 1);
	gen_before = g1 + 1;
	p2 = pa_malloc(a, big, 0);
	fresh = atomic_load(&a->nmapped) - before;
	if (!p1 || !p2 || fresh < 2) {
		complain("two new 64 MiB extents: %s, %lu mapped", p1 && p2 ? "ok" : "no", fresh);
		ret = 1;
	} else {
		w1 = check_page(p1, g1, g1);
		w2 = check_page(p2 + big - 1, g1 + 1, g1 + 1);
		w1_again = check_page(p1 + big - 1, g1, g1);
		ret = w1 < 0 || w2 < 0 || w1_again != w1;
		printf("\nstep by step: a 64 MiB block mapped under %s; the policy becomes %s; the "
		       "next block follows it, the first stays %s: %s\n",
				pol_name(w1), pol_name(w2), pol_name(w1_again),
				ret ? "FAILED" : "ok");
	}
	pa_free(p1);
	pa_free(p2);
	destroy_or_complain(a, NULL);
	return ret;
}

/* After a refusal the arena goes on working: 0 if @size bytes come (freed at once), else 1. */
static int still_works(struct pa_arena *a, size_t size, const char *failed)
{
	void *p = pa_malloc(a, size, 0);

	if (!p) {
		complain("%s", failed);
		return 1;
	}
	pa_free(p);
	return 0;
}

/* Bad input: a full window, and a placement the kernel cannot make. */
static int refusals(struct ps_store *s, size_t window)
{
	unsigned long far_node[PS_MAX_NUMNODES / LONG_BITS] = {0};
	struct ps_policy *nowhere;
	struct pa_arena *a;
	unsigned long n;
	int ret = 0;
	void *p;

	/* A window of 8 MiB: jemalloc's metadata fits, 16 MiB does not. */
	a = arena_or_die(s, 8 << 20, PA_UNMAP);
	p = pa_malloc(a, 16 << 20, 0);
	if (p) {
		complain("16 MiB from an 8 MiB window");
		pa_free(p);
		ret = 1;
	}
	n = atomic_load(&a->nnoroom);
	ret |= still_works(a, 64 << 10, "no 64 KiB from an 8 MiB window after a refusal");
	printf("full window: mallocx(16 MiB) from an 8 MiB window returns NULL (%lu alloc hook "
	       "call(s) found no room), 64 KiB still works: %s\n",
			n, ret ? "FAILED" : "ok");
	destroy_or_complain(a, NULL);

	/* Node PS_MAX_NUMNODES - 1 exists nowhere: mbind(2) is refused. */
	a = arena_or_die(s, window, PA_UNMAP);
	far_node[(PS_MAX_NUMNODES - 1) / LONG_BITS] = 1UL << ((PS_MAX_NUMNODES - 1) % LONG_BITS);
	nowhere = ps_policy_create(PS_MPOL_BIND, 0, far_node, PS_MAX_NUMNODES);
	if (!nowhere || ps_store_set(s, 0, window_pages, nowhere)) {
		complain("cannot set the bind-to-node-%d policy", PS_MAX_NUMNODES - 1);
		ps_policy_put(nowhere);
		destroy_or_complain(a, NULL);
		return 1;
	}
	p = pa_malloc(a, 32 << 20, 0);
	n = atomic_load(&a->nrefused);
	if (p || !n) {
		complain("an extent placed on node %d", PS_MAX_NUMNODES - 1);
		ret = 1;
		pa_free(p);
	}
	set_generation(s, atomic_load(&gen) + 1);
	gen_before = atomic_load(&gen);
	ret |= still_works(a, 32 << 20, "mallocx(32 MiB) fails after the refused placement");
	printf("refused placement: with the window bound to node %d, mallocx(32 MiB) returns "
	       "NULL (%lu placement(s) refused); with a valid policy again it works: %s\n",
			PS_MAX_NUMNODES - 1, n, ret ? "FAILED" : "ok");
	ps_policy_put(nowhere);
	destroy_or_complain(a, NULL);
	return ret;
}

int main(int argc, char **argv)
{
	unsigned long one[PS_MAX_NUMNODES / LONG_BITS] = {0};
	int threads = 4, variant = PS_SYNC_RCU, opt, node, ret = 0, avail;
	const size_t window = (size_t)1 << 30;
	long allocs = 2000;
	struct ps_store *s;

	while ((opt = getopt(argc, argv, "t:n:v:")) != -1) {
		switch (opt) {
		case 't':
			threads = atoi(optarg);
			break;
		case 'n':
			allocs = atol(optarg);
			break;
		case 'v':
			variant = ps_sync_from_name(optarg);
			break;
		default:
			variant = -1;
		}
	}
	if (threads < 1 || allocs < 1 || variant < 0) {
		fprintf(stderr, "usage: %s [-t THREADS] [-n ALLOCS] [-v VARIANT]\n", argv[0]);
		return 2;
	}
	avail = ps_numa_available();
	if (avail) {
		printf("jemalloc_arena: placement unavailable here (%s): skipped\n",
				strerror(-avail));
		return 77;
	}
	/* The policies, on the nodes this thread may use. */
	if (syscall(SYS_get_mempolicy, NULL, allowed, (unsigned long)PS_MAX_NUMNODES, NULL,
			    MPOL_F_MEMS_ALLOWED)) {
		perror("get_mempolicy(MPOL_F_MEMS_ALLOWED)");
		return 1;
	}
	for (node = 0; node < PS_MAX_NUMNODES - 1; node++)
		if (allowed[node / LONG_BITS] >> (node % LONG_BITS) & 1)
			break;
	one[node / LONG_BITS] = 1UL << (node % LONG_BITS);
	pols[0] = ps_policy_create(PS_MPOL_BIND, 0, one, PS_MAX_NUMNODES);
	pols[1] = ps_policy_create(PS_MPOL_PREFERRED, 0, one, PS_MAX_NUMNODES);
	pols[2] = ps_policy_create(PS_MPOL_INTERLEAVE, 0, allowed, PS_MAX_NUMNODES);
	pols[3] = NULL; /* the default policy: the window's range removed */
	s = ps_store_create(variant);
	if (!pols[0] || !pols[1] || !pols[2] || !s) {
		perror("jemalloc_arena: polstore");
		return 1;
	}
	/* Generation 0 before any arena exists: jemalloc's metadata is placed too. */
	window_pages = window / (size_t)sysconf(_SC_PAGESIZE);
	set_generation(s, 0);

	ret |= concurrent(s, threads, allocs, window);
	ret |= one_step(s, window);
	ret |= refusals(s, window);

	ps_store_destroy(s);
	for (int i = 0; i < NPOLS; i++)
		ps_policy_put(pols[i]);
	if (atomic_load(&bad)) {
		printf("jemalloc_arena: %lu check(s) FAILED\n", atomic_load(&bad));
		ret = 1;
	}
	return ret ? 1 : 0;
}
