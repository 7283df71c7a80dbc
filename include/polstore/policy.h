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
 * As mbind(2) (docs/placement.md): DEFAULT and LOCAL take no node, the
 * others at least one; PREFERRED with none becomes LOCAL.  LOCAL takes no
 * flag; DEFAULT drops one.  Nodes are not checked against a machine here.
 * Context: any thread; allocates memory through the polstore allocator.
 * Return: the new policy, or NULL with errno set to EINVAL (unknown mode or
 * flag, both flags, a node >= PS_MAX_NUMNODES, @maxnode too large for a
 * non-NULL @nodemask, a mask that does not suit the mode) or ENOMEM.
 */
PS_API struct ps_policy *ps_policy_create(int mode, unsigned flags, const unsigned long *nodemask,
		unsigned long maxnode);

/**
 * ps_policy_create_weighted() - a weighted interleave with weights of its own
 * @flags: 0 or one of PS_MPOL_F_STATIC_NODES, PS_MPOL_F_RELATIVE_NODES
 * @weights: @nr_nodes weights, @weights[i] node i's share (0: not one of its nodes)
 * @nr_nodes: 1 .. PS_MAX_NUMNODES
 *
 * PS_MPOL_WEIGHTED_INTERLEAVE by @weights, not the topology's (docs/placement.md).
 * Context: any thread; allocates memory through the polstore allocator.
 * Return: the new policy, or NULL with errno EINVAL (bad arguments, no weight) or ENOMEM.
 */
PS_API struct ps_policy *ps_policy_create_weighted(unsigned flags, const unsigned char *weights,
		int nr_nodes);

/**
 * ps_policy_node_weights() - the weights a policy carries
 * @pol: the policy
 * @weights: room for @nr_nodes weights (may be NULL when @nr_nodes is 0)
 * @nr_nodes: how many to write: node i's weight, 0 for a node not weighed
 * Context: any thread; reads immutable data, writes nothing shared.
 * Return: its last weighed node + 1; 0 without weights of its own (the topology's apply);
 * -EINVAL for a NULL @pol, a negative @nr_nodes or a NULL @weights with @nr_nodes > 0.
 */
PS_API int ps_policy_node_weights(const struct ps_policy *pol, unsigned char *weights,
		int nr_nodes);

/**
 * ps_policy_get() - take one more reference to a policy
 * @pol: a policy the caller holds a reference to (or a borrowed pointer
 *       inside the read-side section that lent it); NULL is allowed
 *
 * One atomic increment: on a cache line of the caller's CPU once the policy
 * is in a store and hot, else on its one count (docs/internals.md).
 * Context: any thread, inside or outside a read-side section; lock-free;
 * the 64th get of a policy in a store allocates its stripes (up to 1 KiB;
 * a failure only keeps the atomic count).
 * Return: @pol.
 */
PS_API struct ps_policy *ps_policy_get(struct ps_policy *pol);

/**
 * ps_policy_put() - drop one reference; the last one frees the policy
 * @pol: the policy, or NULL (a no-op)
 *
 * The put may be on another thread, CPU or stripe than the get.  Debug
 * builds abort on a put of a policy whose atomic count is already zero.
 * Context: any thread, inside or outside a read-side section; lock-free
 * (one atomic decrement); may free memory.
 */
PS_API void ps_policy_put(struct ps_policy *pol);

/**
 * ps_policy_mode() - the policy's mode
 * @pol: the policy
 * Context: any thread; reads immutable data, writes nothing.
 * Return: an enum ps_mode value, or -EINVAL when @pol is NULL.
 */
PS_API int ps_policy_mode(const struct ps_policy *pol);

/**
 * ps_policy_flags() - the policy's mode flags
 * @pol: the policy
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
 * Context: any thread; writes nothing.
 * Return: the count, or -EINVAL when @pol is NULL.
 */
PS_API int ps_policy_weight(const struct ps_policy *pol);

/**
 * ps_policy_first_node() - lowest node in the policy's mask
 * @pol: the policy
 * Context: any thread; writes nothing.
 * Return: the node, -ENOENT when the mask is empty, -EINVAL when @pol is NULL.
 */
PS_API int ps_policy_first_node(const struct ps_policy *pol);

/**
 * ps_policy_equal() - do two policies place memory the same way?
 * @a: a policy or NULL
 * @b: a policy or NULL
 *
 * As the kernel's __mpol_equal(): same mode, flags and nodes; two LOCAL or
 * two DEFAULT policies (no flag, no node) are always equal; NULL equals
 * nothing, not even NULL.
 * Context: any thread; writes nothing.
 * Return: true when equal.
 */
PS_API bool ps_policy_equal(const struct ps_policy *a, const struct ps_policy *b);

/**
 * ps_policy_refcount() - the current reference count, for tests and debugging
 * @pol: the policy
 *
 * Exact when no other thread takes, drops or stores the policy meanwhile
 * (docs/internals.md says how far off it can be then).
 * Context: any thread; reads the policy and its stripes (up to 16 loads),
 * writes nothing.
 * Return: the count, or -EINVAL when @pol is NULL.
 */
PS_API long ps_policy_refcount(const struct ps_policy *pol);

/**
 * ps_policy_node() - the node an allocation under @pol should use
 * @pol: a policy (held or borrowed), or NULL for "no policy"
 * @ilx: the interleave index: the page's offset in its object (the kernel
 *       adds a shared object's inode number: pass inode number + offset)
 * @local_node: the node of the allocating CPU, 0 .. PS_MAX_NUMNODES - 1
 *
 * The kernel's rules for shared policies over the policy's nodes with memory
 * in the topology in force (polstore/numa.h); always a node with memory.
 * The rules per mode: docs/placement.md.
 * Context: any thread, inside or outside read-side sections; writes nothing
 * shared, takes no lock; a process's first lookup may read sysfs.
 * Return: a node, or -EINVAL when @local_node is out of range.
 */
PS_API int ps_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node);

/**
 * ps_mode_name() - the kernel's name of a mode, e.g. "bind"
 * @mode: an enum ps_mode value
 * Context: any thread.
 * Return: a static string; "unknown" for an invalid mode.
 */
PS_API const char *ps_mode_name(int mode);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_POLICY_H */
