/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore fault plane: resolve the missing-page faults of memory regions with userfaultfd(2),
 * placing each page on the node a store names (ps_store_lookup_node(), the resolver's node as the
 * local one) and filling it with what a callback gives (zeros by default).  Not in
 * <polstore/polstore.h>; the library is libpolstore_uffd (pkg-config polstore-uffd).  Design,
 * calling contexts, fork and misuse (a message naming the call and the plane, then abort()):
 * docs/uffd.md.
 */
#ifndef POLSTORE_UFFD_H
#define POLSTORE_UFFD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <polstore/export.h>
#include <polstore/store.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ps_uffd;

/**
 * PS_UFFD_USER_MODE_ONLY - handle only faults from user mode (UFFD_USER_MODE_ONLY)
 *
 * Such a userfaultfd needs no privilege and no vm.unprivileged_userfaultfd, but a kernel access to
 * a page not yet placed (read(2) into it, O_DIRECT, KVM reading guest memory) fails with EFAULT
 * instead of faulting into the plane.  Without it, creation needs CAP_SYS_PTRACE,
 * vm.unprivileged_userfaultfd=1 or access to /dev/userfaultfd.
 */
#define PS_UFFD_USER_MODE_ONLY (1U << 0)
/**
 * PS_UFFD_READ_ZEROPAGE - read faults on zero content map the kernel's zero page
 *
 * UFFDIO_ZEROPAGE on a private anonymous region maps the shared zero page: no memory, but the page
 * then has no node, and the write that later replaces it allocates by the writing thread's policy,
 * not the store's.  Without this flag every page is placed, zero content included.
 */
#define PS_UFFD_READ_ZEROPAGE (1U << 1)
/** PS_UFFD_TIMING - sum the time spent in lookups and in each resolution (struct ps_uffd_stats). */
#define PS_UFFD_TIMING (1U << 2)
/** Every flag ps_uffd_create() and ps_uffd_available() accept. */
#define PS_UFFD_ALL_FLAGS (PS_UFFD_USER_MODE_ONLY | PS_UFFD_READ_ZEROPAGE | PS_UFFD_TIMING)

/**
 * PS_UFFD_REGISTER_SPAN - the range may span several mappings (ps_uffd_register_flags())
 *
 * Without it a range that crosses from one mapping into another that /proc/self/maps tells apart
 * is refused; with it such a range is registered whole.  Holes and the plane's own memory are
 * refused either way.
 */
#define PS_UFFD_REGISTER_SPAN (1U << 0)

/** Most resolver threads a plane may have. */
#define PS_UFFD_MAX_RESOLVERS 1024

/** The fault was a write (struct ps_uffd_fault @flags). */
#define PS_UFFD_FAULT_WRITE (1U << 0)

/**
 * struct ps_uffd_fault - the fault a fill callback fills the page for
 * @addr: the first byte of the page (aligned to the plane's page size)
 * @page: the page's store index: the region's first index plus the page's number inside the region
 * @node: the node the page is allocated on (the resolver's preferred node); -1 when the kernel's
 *        default placement applies (the resolver could prefer neither the named node nor its local
 *        one)
 * @named_node: the node the store named (without a store: the plane's fixed node, or the local
 *              one); differs from @node when this process may not allocate there
 * @resolver: index of the resolver thread, 0 .. ps_uffd_resolvers() - 1
 * @flags: PS_UFFD_FAULT_WRITE or 0
 * @tid: the thread that faulted, 0 when the kernel does not say
 */
struct ps_uffd_fault {
	void *addr;
	uint64_t page;
	int node;
	int named_node;
	int resolver;
	unsigned flags;
	pid_t tid;
};

/** Return value of a fill callback: place a zero-filled page. */
#define PS_UFFD_FILL_ZERO 1

/**
 * typedef ps_uffd_fill_fn - the content of a page about to be placed
 *
 * Writes the page's content into @buf (the plane's page size, aligned to it; what an earlier call
 * left there is not cleared) and returns 0, or returns PS_UFFD_FILL_ZERO for a zero page, or a
 * negative errno when it cannot give the content: then the page is poisoned where the kernel
 * allows it (UFFDIO_POISON, Linux 6.6: the access raises SIGBUS, a kernel access fails with
 * EFAULT), else the faulting thread is woken unresolved, faults again and the callback is asked
 * again.  Any other return counts as an error.
 *
 * When several threads fault on one page at once the callback may be called for each of them; one
 * copy is placed, the others find the page there (counted in @exists of struct ps_uffd_stats).
 *
 * Context: a resolver thread (docs/uffd.md, "Calling contexts").
 */
typedef int (*ps_uffd_fill_fn)(void *buf, const struct ps_uffd_fault *fault, void *arg);

/**
 * struct ps_uffd_attr - how to create a plane (PS_UFFD_ATTR_INIT for the defaults)
 * @size: sizeof(struct ps_uffd_attr): the layout version (any other value is refused with EINVAL)
 * @flags: 0 or PS_UFFD_* flags
 * @resolvers: resolver threads, 1 .. PS_UFFD_MAX_RESOLVERS; 0: one per node this process may
 *             allocate on
 * @node: without a store, the node every page goes to; -1: the local node of the resolver.
 *        Ignored with a store.
 * @page_size: bytes placed per fault: 0 for the system page size, or a power-of-two multiple of it
 *             (then regions and their store indices are in these units)
 * @fill: the content callback; NULL: every page is zero-filled
 * @fill_arg: passed to @fill
 */
struct ps_uffd_attr {
	size_t size;
	unsigned flags;
	int resolvers;
	int node;
	size_t page_size;
	ps_uffd_fill_fn fill;
	void *fill_arg;
};

/** The default attributes: system pages, zero-filled, one resolver per node. */
#define PS_UFFD_ATTR_INIT                                                                          \
	{                                                                                          \
		.size = sizeof(struct ps_uffd_attr), .node = -1                                    \
	}

/**
 * struct ps_uffd_stats - what resolvers did (counts since creation)
 * @faults: fault messages read
 * @copies: pages placed with the fill callback's content
 * @zeros: pages placed zero-filled (UFFDIO_ZEROPAGE included)
 * @exists: faults whose page was already placed (EEXIST): woken, not placed again
 * @retries: resolving calls repeated after EAGAIN
 * @rebinds: set_mempolicy(2) calls: a resolver changed its preferred node
 * @fallbacks: faults whose named node this process may not allocate on: placed on the local node
 *             instead
 * @fill_errors: fill callbacks that failed (the page poisoned, or retried)
 * @dropped: faults whose region was unregistered or unmapped before the page could be placed
 *           (woken: the kernel serves them), and a few of a region registered after one ended
 * @errors: other failures of the resolving call (ENOMEM, ...): the faulting thread is woken and
 *          faults again
 * @restarts: resolver threads replaced after exiting inside a callback
 * @lookup_ns: with PS_UFFD_TIMING, nanoseconds in the store lookup (a plane without a store times
 *             the same clock reads around no lookup: their own cost)
 * @resolve_ns: with PS_UFFD_TIMING, nanoseconds from reading each message to placing its page
 *              (lookup and fill included)
 */
struct ps_uffd_stats {
	uint64_t faults;
	uint64_t copies;
	uint64_t zeros;
	uint64_t exists;
	uint64_t retries;
	uint64_t rebinds;
	uint64_t fallbacks;
	uint64_t fill_errors;
	uint64_t dropped;
	uint64_t errors;
	uint64_t restarts;
	uint64_t lookup_ns;
	uint64_t resolve_ns;
};

/**
 * ps_uffd_available() - may this process create a plane with these flags?
 * @flags: 0 or PS_UFFD_USER_MODE_ONLY (other PS_UFFD_* flags are accepted and ignored)
 * @why: if not NULL, receives on failure a sentence naming what refused the userfaultfd and what
 *       to change (truncated to @why_len)
 * @why_len: bytes @why holds
 *
 * Creates and closes a userfaultfd as ps_uffd_create() would: first with userfaultfd(2), then
 * through /dev/userfaultfd.
 *
 * Context: any thread.
 * Return: 0; -EINVAL for unknown @flags; -EPERM when the kernel or a seccomp filter refuses
 * (unprivileged with vm.unprivileged_userfaultfd=0, no access to /dev/userfaultfd, a filter);
 * -ENOSYS when the kernel has no userfaultfd; -EMFILE, -ENFILE, -ENOMEM as the kernel says.
 */
PS_API int ps_uffd_available(unsigned flags, char *why, size_t why_len);

/**
 * ps_uffd_create() - create a plane: a userfaultfd and its resolver threads
 * @store: the store that names each page's node (its indices are page numbers as
 *         ps_uffd_register() gives them), or NULL for a plane that places every page on
 *         @attr->node; the plane attaches to it (ps_store_attach()) until ps_uffd_destroy()
 * @attr: the attributes, or NULL for PS_UFFD_ATTR_INIT
 * @why: if not NULL, receives on failure a sentence saying what failed and, when the kernel
 *       refused the userfaultfd, what to change
 * @why_len: bytes @why holds
 *
 * The userfaultfd comes from userfaultfd(2) or, when that is refused, from /dev/userfaultfd (Linux
 * 6.1).  Resolver threads start at once, with every signal blocked; they wait for faults without
 * spinning.  Destroy it before @store: until then ps_store_destroy() aborts, naming the plane.
 *
 * Context: any thread; allocates, starts threads.
 * Return: the plane, or NULL with errno: EINVAL (a bad attribute: @why names it, its value and the
 * values it may take), EPERM or ENOSYS as ps_uffd_available() says, ENOMEM, EMFILE, or EAGAIN (a
 * thread could not be started).  Nothing is left behind on failure: no descriptor, no thread, no
 * memory.
 */
PS_API struct ps_uffd *ps_uffd_create(
		struct ps_store *store, const struct ps_uffd_attr *attr, char *why, size_t why_len);

/**
 * ps_uffd_destroy() - stop the resolvers, unregister every region, free the plane
 * @uf: the plane, or NULL (a no-op)
 *
 * Waits for each resolver to finish the fault it is resolving (fill callbacks in progress return
 * first), then unregisters the regions.  Faults still waiting, and later ones, are served by the
 * kernel as if the region had never been registered: anonymous pages come back zero (or as the
 * file holds them), placed by the faulting thread's own policy.  In a forked child it frees the
 * child's copy only.  Either way it detaches the plane from its store last (ps_store_detach()).
 *
 * Context: docs/uffd.md, "Calling contexts": not on a resolver thread, and no other thread calls
 * the plane during or after the call; a second destroy is misuse (see "Misuse" there).
 */
PS_API void ps_uffd_destroy(struct ps_uffd *uf);

/**
 * ps_uffd_register() - have the plane resolve the missing pages of [@addr, @addr + @len)
 * @uf: the plane
 * @addr: start of a private or shared anonymous, memfd or tmpfs mapping; aligned to the plane's
 *        page size
 * @len: bytes, a non-zero multiple of the page size
 * @first_page: the store index of the page at @addr; page i of the region is index @first_page + i
 *
 * Missing pages fault into the plane on first touch.  The range must lie in one mapping, as
 * /proc/self/maps shows it: a hole, a crossing into other permissions (a PROT_NONE guard page) or
 * backing, or the plane's own memory is refused.  Not so a range too long for its anonymous
 * mapping that runs on into a neighbour with the same permissions, which /proc/self/maps does not
 * tell apart: the neighbour's missing pages fault into the plane too (docs/uffd.md).
 *
 * Context: not on a resolver (docs/uffd.md); allocates, reads /proc/self/maps.
 * Return: 0; -EINVAL for a NULL @uf, a misaligned @addr or @len, an index range that overflows, a
 * range refused above, or a mapping the kernel cannot register (a private file mapping); -EBUSY
 * when the range overlaps a region of this plane or one another userfaultfd registered; -ENOMEM
 * when memory is short; -EOPNOTSUPP when the kernel cannot copy pages into it (then it is left
 * unregistered); -ESRCH in a forked child.
 */
PS_API int ps_uffd_register(struct ps_uffd *uf, void *addr, size_t len, uint64_t first_page);

/**
 * ps_uffd_register_flags() - ps_uffd_register() with flags
 * @uf: the plane
 * @addr: as for ps_uffd_register()
 * @len: as for ps_uffd_register()
 * @first_page: as for ps_uffd_register()
 * @flags: 0 (then the call is ps_uffd_register()) or PS_UFFD_REGISTER_SPAN: a range that crosses
 *         from one mapping into another is registered whole (holes and the plane's own memory are
 *         still refused)
 * Context: as for ps_uffd_register().
 * Return: as ps_uffd_register(); -EINVAL for unknown @flags too.
 */
PS_API int ps_uffd_register_flags(
		struct ps_uffd *uf, void *addr, size_t len, uint64_t first_page, unsigned flags);

/**
 * ps_uffd_unregister() - stop resolving the faults of a region
 * @uf: the plane
 * @addr: the @addr ps_uffd_register() was given
 * @len: the @len it was given
 *
 * Faults waiting on the region are handed back to the kernel, which serves them and later ones as
 * ps_uffd_destroy() says.  When the call returns no resolver is placing a page in the region any
 * more, so the range may be unmapped and reused.  A region already unmapped is forgotten all the
 * same.
 *
 * Context: docs/uffd.md, "Calling contexts".
 * Return: 0; -EINVAL for a NULL @uf; -ENOENT when no region of the plane starts at @addr with
 * length @len; -ESRCH in a forked child.
 */
PS_API int ps_uffd_unregister(struct ps_uffd *uf, void *addr, size_t len);

/**
 * ps_uffd_stats() - what a resolver, or every resolver, did
 * @uf: the plane
 * @resolver: the resolver's index, or -1 for the sum over all of them
 * @stats: receives the counts
 *
 * Each resolver's counts are read as they were between two faults; the sum is not one instant of
 * the whole plane.
 *
 * Context: docs/uffd.md, "Calling contexts".
 * Return: 0; -EINVAL for a NULL @uf or @stats or an index out of range; -ESRCH in a forked child.
 */
PS_API int ps_uffd_stats(struct ps_uffd *uf, int resolver, struct ps_uffd_stats *stats);

/**
 * ps_uffd_resolvers() - the number of resolver threads of a plane
 * @uf: the plane
 * Context: any thread, a forked child's included.
 * Return: the count (>= 1), or -EINVAL for a NULL @uf.
 */
PS_API int ps_uffd_resolvers(const struct ps_uffd *uf);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_UFFD_H */
