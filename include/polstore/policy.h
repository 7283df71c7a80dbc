/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore policies: immutable, reference-counted NUMA placement policies.
 *
 * A policy is created once and never changes; it is shared by reference.
 * Mode and flag values are those of Linux's MPOL_* and MPOL_F_* so a policy
 * maps 1:1 onto mbind(2) / set_mempolicy(2).
 *
 * Node masks: unlike mbind(2), @maxnode is the exact number of bits in the
 * mask: bit i of the mask (bit i % BITS_PER_LONG of word i / BITS_PER_LONG)
 * is node i.
 */
#ifndef POLSTORE_POLICY_H
#define POLSTORE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** enum ps_mode - placement modes; values equal Linux's MPOL_* values. */
enum ps_mode {
	PS_MPOL_DEFAULT = 0,
	PS_MPOL_PREFERRED = 1,
	PS_MPOL_BIND = 2,
	PS_MPOL_INTERLEAVE = 3,
	PS_MPOL_LOCAL = 4,
	PS_MPOL_PREFERRED_MANY = 5,
	PS_MPOL_WEIGHTED_INTERLEAVE = 6,
};

/** Number of modes; a mode is valid when 0 <= mode < PS_MPOL_MAX. */
#define PS_MPOL_MAX 7

/* Mode flags; values equal Linux's MPOL_F_STATIC_NODES / MPOL_F_RELATIVE_NODES. */
#define PS_MPOL_F_STATIC_NODES (1 << 15)
#define PS_MPOL_F_RELATIVE_NODES (1 << 14)
/** Every flag ps_policy_create() accepts. */
#define PS_MPOL_F_ALL (PS_MPOL_F_STATIC_NODES | PS_MPOL_F_RELATIVE_NODES)

/** Highest node count a policy can name: nodes are 0 .. PS_MAX_NUMNODES - 1. */
#define PS_MAX_NUMNODES 1024

/*
 * Largest @maxnode accepted, as the kernel's get_nodes() accepts at most one
 * page worth of bits.  Bits at or above PS_MAX_NUMNODES must be clear.
 */
#define PS_MAXNODE_LIMIT (4096 * 8)

struct ps_policy;

/** Words of a full node mask: nodes 0 .. PS_MAX_NUMNODES - 1. */
#define PS_NODEMASK_WORDS (PS_MAX_NUMNODES / (8 * sizeof(unsigned long)))

/**
 * struct ps_policy_view - a policy copied out, for lookups that keep no reference
 * @size: set by the caller to sizeof(struct ps_policy_view): the layout
 *        version (an unknown size is refused with -EINVAL, so a program
 *        built against a later layout is told, not misread)
 * @nwords: set by the caller: how many words of @nodes to fill, 0 ..
 *          PS_NODEMASK_WORDS (1 covers nodes 0-63); words beyond are
 *          left untouched
 * @mode: the policy's mode; PS_MPOL_DEFAULT when no policy applies
 * @flags: its PS_MPOL_F_* flags (0 for DEFAULT)
 * @weight: the number of nodes in its whole mask (also those beyond @nwords)
 * @nodes: words 0 .. @nwords - 1 of its mask, bit i is node i (zero for DEFAULT)
 */
struct ps_policy_view {
	unsigned size;
	unsigned nwords;
	int mode;
	unsigned flags;
	int weight;
	unsigned long nodes[PS_NODEMASK_WORDS];
};

/** A struct ps_policy_view asking for @n mask words. */
#define PS_POLICY_VIEW_INIT(n) { sizeof(struct ps_policy_view), (n), 0, 0, 0, { 0 } }

/**
 * ps_policy_create() - create a policy with one reference held by the caller
 * @mode: one of enum ps_mode
 * @flags: 0 or one of PS_MPOL_F_STATIC_NODES, PS_MPOL_F_RELATIVE_NODES
 * @nodemask: @maxnode bits, bit i is node i; may be NULL (a NULL mask is
 *            empty whatever @maxnode says)
 * @maxnode: number of valid bits in @nodemask, at most PS_MAXNODE_LIMIT;
 *           ignored when @nodemask is NULL
 *
 * The rules are those of mbind(2) as LTP's mbind01 checks them: DEFAULT and
 * LOCAL take an empty mask; BIND, INTERLEAVE, PREFERRED_MANY and
 * WEIGHTED_INTERLEAVE need at least one node; PREFERRED with an empty mask
 * means "allocate locally" and, as in the kernel, becomes a LOCAL policy
 * (ps_policy_mode() then reads PS_MPOL_LOCAL); it may not carry a flag,
 * and neither may LOCAL, as in the kernel's mpol_new().  DEFAULT accepts a
 * flag and drops it (ps_policy_flags() reads 0), as the kernel keeps no
 * DEFAULT policy to hold one.
 * Node existence is not checked here (a virtual machine monitor describes
 * guests): ps_numa_check_policy() checks a policy against the topology node
 * lookups follow, ps_policy_apply() against the system.
 *
 * Context: any thread; allocates memory through the polstore allocator.
 * Return: the new policy, or NULL with errno set to EINVAL (unknown mode or
 * flag, both flags, a node >= PS_MAX_NUMNODES, @maxnode too large for a
 * non-NULL @nodemask, a mask that does not suit the mode) or ENOMEM.
 */
PS_API struct ps_policy *ps_policy_create(int mode, unsigned flags, const unsigned long *nodemask,
		unsigned long maxnode);

/**
 * ps_policy_get() - take one more reference to a policy
 * @pol: a policy the caller holds a reference to (or a borrowed pointer
 *       inside the read-side section that lent it); NULL is allowed
 *
 * A policy that is in a store and hot (looked up often) counts its
 * references on per-CPU stripes: the increment then touches a cache line of
 * the caller's CPU, not one shared by every thread.  Otherwise (and always
 * once the policy is in no store) the count is one atomic word.  The CPU
 * is the one the kernel last wrote in the thread's rseq area, which glibc
 * (2.35 and later, x86-64 and AArch64) registers for every thread; where it
 * registered none (GLIBC_TUNABLES=glibc.pthread.rseq=0, a runtime that
 * registers its own rseq area, valgrind, another C library) each thread
 * counts on a stripe of its own instead, taken in turn: as cheap, and as
 * free of sharing while no more threads take references at once than
 * there are stripes (the CPUs, up to 16).
 *
 * Context: any thread, inside or outside a read-side section; lock-free
 * (one atomic increment; the 64th get of a policy in a store, in atomic mode,
 * allocates its stripes, up to 1 KiB, and a failed allocation only
 * keeps the atomic count).
 * Return: @pol.
 */
PS_API struct ps_policy *ps_policy_get(struct ps_policy *pol);

/**
 * ps_policy_put() - drop one reference; the last one frees the policy
 * @pol: the policy, or NULL (a no-op)
 *
 * A policy is freed by the put that drops its last reference, at once,
 * when it is in no store (a store's own references are dropped when its
 * ranges are freed: after a grace period for SEQLOCK, RCU and RCU_QSBR).
 * The put may be on another thread, CPU or stripe than the get.
 *
 * Debug builds (no NDEBUG) abort on a put of a policy whose atomic count is
 * already zero (a double put; one counted on a per-CPU stripe is not seen).
 *
 * Context: any thread, inside or outside a read-side section; lock-free
 * (one atomic decrement); may free memory.
 */
PS_API void ps_policy_put(struct ps_policy *pol);

/**
 * ps_policy_mode() - the policy's mode
 * @pol: the policy
 *
 * Context: any thread; reads immutable data, writes nothing.
 * Return: an enum ps_mode value, or -EINVAL when @pol is NULL.
 */
PS_API int ps_policy_mode(const struct ps_policy *pol);

/**
 * ps_policy_flags() - the policy's mode flags
 * @pol: the policy
 *
 * Context: any thread; reads immutable data, writes nothing.
 * Return: the PS_MPOL_F_* flags given at creation (always 0 for a DEFAULT
 * policy, which drops them); 0 when @pol is NULL.
 */
PS_API unsigned ps_policy_flags(const struct ps_policy *pol);

/**
 * ps_policy_nodemask() - copy the policy's nodes out
 * @pol: the policy
 * @mask: room for @maxnode bits, rounded up to whole unsigned longs; every
 *        word is written (unused high bits cleared)
 * @maxnode: number of bits @mask can hold, at most PS_MAXNODE_LIMIT
 *
 * Context: any thread; reads immutable data, writes only @mask.
 * Return: 0, or -EINVAL when @pol or @mask is NULL, @maxnode is 0 or above
 * PS_MAXNODE_LIMIT, or a node of the policy does not fit in @maxnode bits
 * (then @mask is untouched).
 */
PS_API int ps_policy_nodemask(const struct ps_policy *pol, unsigned long *mask,
		unsigned long maxnode);

/**
 * ps_policy_weight() - number of nodes in the policy's mask
 * @pol: the policy
 *
 * Context: any thread; writes nothing.
 * Return: the count, or -EINVAL when @pol is NULL.
 */
PS_API int ps_policy_weight(const struct ps_policy *pol);

/**
 * ps_policy_first_node() - lowest node in the policy's mask
 * @pol: the policy
 *
 * Context: any thread; writes nothing.
 * Return: the node, -ENOENT when the mask is empty, -EINVAL when @pol is NULL.
 */
PS_API int ps_policy_first_node(const struct ps_policy *pol);

/**
 * ps_policy_equal() - do two policies place memory the same way?
 * @a: a policy or NULL
 * @b: a policy or NULL
 *
 * Follows the kernel's __mpol_equal(): same mode, same flags and same nodes;
 * two LOCAL policies are equal whatever else, and so are two DEFAULT ones
 * (they carry no flag and no node); NULL equals nothing (not even NULL).
 *
 * Context: any thread; writes nothing.
 * Return: true when equal.
 */
PS_API bool ps_policy_equal(const struct ps_policy *a, const struct ps_policy *b);

/**
 * ps_policy_refcount() - the current reference count, for tests and debugging
 * @pol: the policy
 *
 * Folds the per-CPU stripes of a hot policy into its atomic count: exact
 * when no other thread gets or puts the policy, or adds it to or removes it
 * from a store, meanwhile.  Otherwise it can be stale as soon as it is read,
 * and (stripes being read one by one) off by the references moving between
 * stripes meanwhile; while the policy is in a store it is then never less
 * than the stores' references nor less than 1.
 *
 * Context: any thread; reads the policy and its stripes (up to 16 loads),
 * writes nothing.
 * Return: the count, or -EINVAL when @pol is NULL.
 */
PS_API long ps_policy_refcount(const struct ps_policy *pol);

/**
 * ps_policy_node() - the node an allocation under @pol should use
 * @pol: a policy (held or borrowed), or NULL for "no policy"
 * @ilx: the interleave index: the page's offset in the object it belongs
 *       to; the kernel biases a shared (tmpfs/shm) object's offset by its
 *       inode number, so a caller that wants the kernel's exact node passes
 *       inode number + page offset
 * @local_node: the node of the allocating CPU, 0 .. PS_MAX_NUMNODES - 1
 *
 * The answer is always a node with memory in the topology in force: the
 * system's, or the table ps_numa_set_topology() installed (polstore/numa.h).
 * The policy's nodes that count are those with memory there (the usable
 * nodes); the kernel's rules for shared policies (mm/mempolicy.c) then
 * apply to them:
 *  - no policy, DEFAULT, LOCAL: the local node: @local_node when it has
 *    memory, else the node with memory nearest to it by the distance table
 *    (the kernel's numa_mem_id()); nearest always means the lowest id on
 *    ties, the kernel's zonelist order;
 *  - PREFERRED: its node when it has memory; else the node with memory
 *    nearest to it when the topology knows it (a node without memory: the
 *    kernel starts from that node's zonelist); else the local node;
 *  - BIND, PREFERRED_MANY: @local_node when it is usable, else the usable
 *    node nearest to @local_node;
 *  - INTERLEAVE: the (@ilx mod the usable count)-th usable node, counting
 *    from the lowest (the kernel's offset-based interleave);
 *  - WEIGHTED_INTERLEAVE: @ilx mod (sum of the usable nodes' weights) walks
 *    them from the lowest node, each node taking as many slots as its
 *    weight (the kernel's weighted_interleave_nid());
 *  - a policy with no usable node: the local node, as the kernel falls
 *    back to local allocation when a policy's nodes are gone.
 * ps_numa_check_policy() says beforehand which case a policy is in.  The
 * mask is used as stored: PS_MPOL_F_STATIC_NODES / _RELATIVE_NODES are the
 * caller's to apply before it creates the policy, as the kernel rebinds a
 * shared policy's mask when it is set.
 *
 * Context: any thread, inside or outside read-side sections; writes nothing
 * shared and takes no lock; the first node lookup of a process that
 * created no store reads the topology from sysfs (allocates).
 * Return: a node, or -EINVAL when @local_node is out of range.
 */
PS_API int ps_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node);

/**
 * ps_mode_name() - the kernel's name of a mode, e.g. "bind"
 * @mode: an enum ps_mode value
 *
 * Context: any thread.
 * Return: a static string; "unknown" for an invalid mode.
 */
PS_API const char *ps_mode_name(int mode);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_POLICY_H */
