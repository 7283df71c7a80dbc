// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Policies: validation follows mbind(2) as the kernel's mpol_new() and LTP's
 * mbind01 define it, with the mask length made exact (bit i is node i).
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/policy.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "compiler.h"
#include "names.h"
#include "policy_internal.h"

static unsigned psi_ref_mask(void);
static int psi_policy_last_node(const struct ps_policy *pol);

static bool psi_mode_needs_nodes(int mode)
{
	return mode == PS_MPOL_BIND || mode == PS_MPOL_INTERLEAVE ||
	       mode == PS_MPOL_PREFERRED_MANY || mode == PS_MPOL_WEIGHTED_INTERLEAVE;
}

/*
 * Copy @maxnode bits of @src into @dst; a NULL @src is empty, whatever
 * @maxnode is.  Returns the number of nodes, or -EINVAL when a node >=
 * PS_MAX_NUMNODES is set.
 */
static int psi_nodes_import(unsigned long *dst, const unsigned long *src, unsigned long maxnode)
{
	unsigned long nlongs = (maxnode + PSI_BITS_PER_LONG - 1) / PSI_BITS_PER_LONG;
	unsigned long i;
	int weight = 0;

	memset(dst, 0, PSI_NODEMASK_LONGS * sizeof(*dst));
	if (!src)
		return 0;
	for (i = 0; i < nlongs; i++) {
		unsigned long w = src[i];
		unsigned long valid = maxnode - i * PSI_BITS_PER_LONG;

		if (valid < PSI_BITS_PER_LONG)
			w &= (1UL << valid) - 1;
		if (!w)
			continue;
		if (i >= PSI_NODEMASK_LONGS)
			return -EINVAL;
		dst[i] = w;
		weight += __builtin_popcountl(w);
	}
	return weight;
}

struct ps_policy *ps_policy_create(int mode, unsigned flags, const unsigned long *nodemask,
		unsigned long maxnode)
{
	struct ps_policy *pol;
	int weight;

	/*
	 * A NULL mask is empty and @maxnode measures nothing, so only a real
	 * mask is held to PS_MAXNODE_LIMIT (the kernel's get_nodes() likewise
	 * checks the length only when there is a mask to copy).
	 */
	if (mode < 0 || mode >= PS_MPOL_MAX || (flags & ~PS_MPOL_F_ALL) ||
			(flags & PS_MPOL_F_ALL) == PS_MPOL_F_ALL ||
			(nodemask && maxnode > PS_MAXNODE_LIMIT)) {
		errno = EINVAL;
		return NULL;
	}
	pol = psi_alloc(sizeof(*pol));
	if (!pol) {
		errno = ENOMEM;
		return NULL;
	}
	weight = psi_nodes_import(pol->nodes, nodemask, maxnode);
	if (weight < 0)
		goto inval;
	if (mode == PS_MPOL_DEFAULT) {
		/*
		 * As mpol_new(): DEFAULT takes no nodes, and the kernel keeps no
		 * policy object for it, so a node-mask flag (already checked to
		 * be a known one, not both) is accepted and dropped.  Every
		 * DEFAULT policy is then flagless and equal to every other.
		 */
		if (weight)
			goto inval;
		flags = 0;
	} else if (mode == PS_MPOL_LOCAL) {
		/* As mpol_new(): no nodes, and no node-mask flag to apply to them. */
		if (weight || flags)
			goto inval;
	} else if (mode == PS_MPOL_PREFERRED) {
		/* As mpol_new(): an empty preferred mask is local allocation, flagless. */
		if (!weight) {
			if (flags)
				goto inval;
			mode = PS_MPOL_LOCAL;
		}
	} else if (psi_mode_needs_nodes(mode) && !weight) {
		goto inval;
	}
	pol->refcnt = 1;
	pol->stripes = NULL;
	pol->refmode = PS_REF_ATOMIC;
	pol->hits = 0;
	pol->stores = 0;
	pol->stripe_mask = psi_ref_mask();
	/* @refcnt .. @stores: atomics only. */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&pol->refcnt, offsetof(struct ps_policy, stripe_mask));
	pol->mode = mode;
	pol->flags = flags;
	pol->weight = weight;
	pol->wts = NULL;
	return pol;
inval:
	psi_free(pol);
	errno = EINVAL;
	return NULL;
}

struct ps_policy *ps_policy_get(struct ps_policy *pol)
{
	return _ps_policy_get(pol);
}

void ps_policy_put(struct ps_policy *pol)
{
	psi_policy_put(pol);
}

/* A get whose stripe was closed under it: the reference goes on the atomic count. */
void _ps_policy_get_slow(struct ps_policy *pol)
{
	PSI_FETCH_ADD(pol->refcnt, 1, RELAXED);
}

/*
 * A put on the atomic count (atomic mode, a closed stripe, or a store's
 * reference).  While the stripes are open (or being closed) @refcnt holds
 * PS_REF_BIAS and cannot reach 0 here; once closed it is exact, and the put
 * that takes it to 0 frees.
 */
void _ps_policy_put_slow(struct ps_policy *pol)
{
	long old;

	PSI_ANNOTATE_HAPPENS_BEFORE(pol);
	old = PSI_FETCH_SUB(pol->refcnt, 1, RELEASE);
	if (old <= 1)
		_ps_policy_release(pol, old);
}

/* A put took @refcnt from @old (<= 1) to @old - 1: free at 0, abort on a double put. */
void _ps_policy_release(struct ps_policy *pol, long old)
{
#ifndef NDEBUG
	if (old <= 0)
		abort(); /* double put: the policy was already freed or being freed */
#endif
	if (old != 1)
		return;
	PSI_FENCE(ACQUIRE);
	/* Every put's release (and HAPPENS_BEFORE) precedes the free. */
	PSI_ANNOTATE_HAPPENS_AFTER(pol);
	assert(PSI_READ_ONCE(pol->refmode) == PS_REF_ATOMIC);
	assert(PSI_READ_ONCE(pol->stores) == 0);
	psi_free(pol->stripes);
	psi_free((void *)pol->wts);
	psi_free(pol);
}

/*
 * The stripe mask of new policies: CPUs rounded up to a power of two, at
 * most PS_REF_MAX_STRIPES; 0 (never stripe) on one CPU.  Without rseq the
 * stripes go by thread (_ps_ref_cpu()): as many stripes serve as many
 * threads running at once.  Computed by a constructor, before any thread
 * of the program runs (so thread checkers see no race and fork has nothing
 * to inherit half done); a policy created by another constructor before it
 * ran just never stripes.
 */
static unsigned psi_ref_mask_value;

__attribute__((constructor)) static void psi_ref_mask_init(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	unsigned m = 1;

	while ((long)m < ncpu && m < PS_REF_MAX_STRIPES)
		m *= 2;
	psi_ref_mask_value = m - 1;
}

static unsigned psi_ref_mask(void)
{
	return psi_ref_mask_value;
}

/* Stripes from closed to open.  Called with @refmode claimed (BUSY) and a reference held. */
static void psi_ref_open(struct ps_policy *pol)
{
	char *s = PSI_READ_ONCE(pol->stripes);
	unsigned i;

	/* The bias first: a put counted on a stripe from now on can never take @refcnt to 0. */
	PSI_FETCH_ADD(pol->refcnt, PS_REF_BIAS, SEQ_CST);
	for (i = 0; i <= pol->stripe_mask; i++)
		PSI_STORE_RELEASE(*(long *)(s + (size_t)i * PS_REF_STRIPE_BYTES), 0);
}

/*
 * Stripes from open to closed, their sum folded into @refcnt and the bias
 * removed.  Each exchange is ordered against every add on that stripe (one
 * word, RMWs only): an add before it is in the sum, an add after it sees
 * PS_REF_CLOSED and goes to @refcnt itself.  Acquire: the puts' releases on
 * the stripes happen before our release on @refcnt, which the freeing put
 * acquires.  Called with @refmode claimed (BUSY) and a reference held, so
 * the exact count is >= 1 afterwards.
 */
static void psi_ref_close(struct ps_policy *pol)
{
	char *s = PSI_READ_ONCE(pol->stripes);
	long sum = 0, old;
	unsigned i;

	for (i = 0; i <= pol->stripe_mask; i++)
		sum += PSI_XCHG(*(long *)(s + (size_t)i * PS_REF_STRIPE_BYTES), PS_REF_CLOSED,
				ACQ_REL);
	old = PSI_FETCH_ADD(pol->refcnt, sum - PS_REF_BIAS, ACQ_REL);
	(void)old;
	assert(old + sum - PS_REF_BIAS >= 1);
}

/*
 * Bring the stripes in line with @stores: open while the policy is in a
 * store and has stripes, closed otherwise.  See policy_internal.h for why a
 * claimant that finds another at work may leave.  The caller holds a
 * reference.
 */
static void psi_ref_sync(struct ps_policy *pol)
{
	for (;;) {
		bool want = PSI_LOAD_SEQ_CST(pol->stores) > 0 &&
			    PSI_LOAD_SEQ_CST(pol->stripes);
		int m = PSI_LOAD_SEQ_CST(pol->refmode);

		if (m == PS_REF_BUSY || (m == PS_REF_OPEN) == want)
			return;
		if (!PSI_TRY_CMPXCHG(pol->refmode, &m, PS_REF_BUSY, SEQ_CST, SEQ_CST))
			continue;
		if (want)
			psi_ref_open(pol);
		else
			psi_ref_close(pol);
		/* Then reread @stores (the loop): a change we missed was left to us. */
		PSI_STORE_SEQ_CST(pol->refmode, want ? PS_REF_OPEN : PS_REF_ATOMIC);
	}
}

/*
 * A lookup found the policy hot: give it stripes.  Called from
 * _ps_policy_get() after its get, so with a reference held.  A failed
 * allocation leaves it on the atomic count (the lookup has its reference
 * already) and lets it retry after PS_REF_HOT more lookups.
 */
void _ps_policy_heat(struct ps_policy *pol)
{
	size_t bytes = (size_t)(pol->stripe_mask + 1) * PS_REF_STRIPE_BYTES;
	char *s, *none = NULL;
	unsigned i;

	if (!pol->stripe_mask || PSI_READ_ONCE(pol->stripes))
		return;
	s = psi_alloc(bytes);
	if (!s) {
		PSI_WRITE_ONCE(pol->hits, 0);
		return;
	}
	for (i = 0; i <= pol->stripe_mask; i++)
		*(long *)(s + (size_t)i * PS_REF_STRIPE_BYTES) = PS_REF_CLOSED;
	PSI_ANNOTATE_BENIGN_RACE_SIZED(s, bytes); /* atomics only */
	/* Seq_cst: against @stores (see psi_ref_sync()). */
	if (!PSI_TRY_CMPXCHG(pol->stripes, &none, s, SEQ_CST, RELAXED)) {
		psi_free(s);
		return;
	}
	psi_ref_sync(pol);
}

void psi_policy_store_get(struct ps_policy *pol)
{
	if (!pol)
		return;
	PSI_FETCH_ADD(pol->refcnt, 1, RELAXED);
	if (PSI_FETCH_ADD(pol->stores, 1, SEQ_CST) == 0 &&
			PSI_LOAD_SEQ_CST(pol->stripes))
		psi_ref_sync(pol);
}

void psi_policy_store_put(struct ps_policy *pol)
{
	long old;

	if (!pol)
		return;
	old = PSI_FETCH_SUB(pol->stores, 1, SEQ_CST);
#ifndef NDEBUG
	if (old <= 0)
		abort(); /* a store reference dropped twice */
#endif
	/* Still holding the store's reference (on @refcnt): the close finds the count >= 1. */
	if (old == 1 && PSI_LOAD_SEQ_CST(pol->stripes))
		psi_ref_sync(pol);
	_ps_policy_put_slow(pol);
}

long psi_policy_stores(const struct ps_policy *pol)
{
	return PSI_READ_ONCE(pol->stores);
}

int ps_policy_mode(const struct ps_policy *pol)
{
	return pol ? pol->mode : -EINVAL;
}

unsigned ps_policy_flags(const struct ps_policy *pol)
{
	return pol ? pol->flags : 0;
}

int ps_policy_weight(const struct ps_policy *pol)
{
	return pol ? pol->weight : -EINVAL;
}

int ps_policy_first_node(const struct ps_policy *pol)
{
	size_t i;

	if (!pol)
		return -EINVAL;
	for (i = 0; i < PSI_NODEMASK_LONGS; i++)
		if (pol->nodes[i])
			return (int)(i * PSI_BITS_PER_LONG) + __builtin_ctzl(pol->nodes[i]);
	return -ENOENT;
}

int ps_policy_nodemask(const struct ps_policy *pol, unsigned long *mask, unsigned long maxnode)
{
	unsigned long nlongs, i;

	/* Held to PS_MAXNODE_LIMIT as ps_policy_create() is: the word count cannot wrap. */
	if (!pol || !mask || !maxnode || maxnode > PS_MAXNODE_LIMIT)
		return -EINVAL;
	nlongs = (maxnode + PSI_BITS_PER_LONG - 1) / PSI_BITS_PER_LONG;
	/* Refuse before writing anything when a node does not fit. */
	for (i = 0; i < PSI_NODEMASK_LONGS; i++) {
		unsigned long w = pol->nodes[i];

		if (!w)
			continue;
		if ((i + 1) * PSI_BITS_PER_LONG - __builtin_clzl(w) > maxnode)
			return -EINVAL;
	}
	for (i = 0; i < nlongs; i++)
		mask[i] = i < PSI_NODEMASK_LONGS ? pol->nodes[i] : 0;
	return 0;
}

bool ps_policy_equal(const struct ps_policy *a, const struct ps_policy *b)
{
	if (!a || !b)
		return false;
	if (a == b)
		return true;
	if (a->mode != b->mode || a->flags != b->flags)
		return false;
	if (a->mode == PS_MPOL_LOCAL)
		return true;
	if (memcmp(a->nodes, b->nodes, sizeof(a->nodes)))
		return false;
	/* Equal masks: equal last nodes, so equal lengths of weights. */
	if (!a->wts || !b->wts)
		return a->wts == b->wts;
	return !memcmp(a->wts, b->wts, (size_t)psi_policy_last_node(a) + 1);
}

/* The last node of @pol's mask (not empty). */
static int psi_policy_last_node(const struct ps_policy *pol)
{
	int i;

	for (i = PSI_NODEMASK_LONGS - 1; !pol->nodes[i]; i--)
		;
	return i * (int)PSI_BITS_PER_LONG + (int)PSI_BITS_PER_LONG - 1 -
	       __builtin_clzl(pol->nodes[i]);
}

struct ps_policy *ps_policy_create_weighted(unsigned flags, const unsigned char *weights,
		int nr_nodes)
{
	unsigned long mask[PSI_NODEMASK_LONGS] = { 0 };
	struct ps_policy *pol;
	unsigned char *wts;
	int i, last = -1;

	if (!weights || nr_nodes <= 0 || nr_nodes > PS_MAX_NUMNODES)
		return psi_err_null(EINVAL);
	for (i = 0; i < nr_nodes; i++)
		if (weights[i]) {
			mask[i / PSI_BITS_PER_LONG] |= 1UL << (i % PSI_BITS_PER_LONG);
			last = i;
		}
	if (last < 0)
		return psi_err_null(EINVAL);
	wts = psi_alloc((size_t)last + 1);
	if (!wts)
		return psi_err_null(ENOMEM);
	pol = ps_policy_create(PS_MPOL_WEIGHTED_INTERLEAVE, flags, mask, (unsigned long)last + 1);
	if (!pol) {
		psi_free(wts);
		return NULL;
	}
	memcpy(wts, weights, (size_t)last + 1);
	/* Written before the policy is returned, as every field from @mode on. */
	pol->wts = wts;
	return pol;
}

int ps_policy_node_weights(const struct ps_policy *pol, unsigned char *weights, int nr_nodes)
{
	int last, i;

	if (!pol || nr_nodes < 0 || (nr_nodes && !weights))
		return -EINVAL;
	if (!pol->wts)
		return 0;
	last = psi_policy_last_node(pol);
	for (i = 0; i < nr_nodes; i++)
		weights[i] = i <= last ? pol->wts[i] : 0;
	return last + 1;
}

/*
 * The fold of policy_internal.h's formula.  Exact when no thread gets, puts
 * or changes the policy's stores meanwhile; under concurrency the stripes
 * are read one by one, so the sum may be off by references moving between
 * stripes meanwhile: it is then clamped to no less than the store
 * references, and 1 (open stripes mean a store or a closing thread holds
 * one).  A transition in progress is waited out (a few retries).
 */
long ps_policy_refcount(const struct ps_policy *pol)
{
	long n = 0, stores;
	int m = PS_REF_BUSY, tries;
	unsigned i;

	if (!pol)
		return -EINVAL;
	for (tries = 0; tries < 1000; tries++) {
		m = PSI_LOAD_ACQUIRE(pol->refmode);
		if (m == PS_REF_BUSY)
			continue;
		n = PSI_LOAD_ACQUIRE(pol->refcnt);
		if (m == PS_REF_OPEN) {
			const char *s = PSI_READ_ONCE(pol->stripes);

			n -= PS_REF_BIAS;
			for (i = 0; i <= pol->stripe_mask; i++) {
				long v = PSI_READ_ONCE(
					*(const long *)(s + (size_t)i * PS_REF_STRIPE_BYTES));

				if (v > PS_REF_CLOSED_MAX)
					n += v;
			}
		}
		if (PSI_LOAD_ACQUIRE(pol->refmode) == m)
			break;
	}
	/* Open stripes mean a store or a closing thread holds a reference: the count is >= 1. */
	stores = PSI_READ_ONCE(pol->stores);
	if (m != PS_REF_ATOMIC && n < (stores > 1 ? stores : 1))
		n = stores > 1 ? stores : 1;
	return n;
}

static const char *const mode_names[PS_MPOL_MAX] = {
	[PS_MPOL_DEFAULT] = "default",
	[PS_MPOL_PREFERRED] = "preferred",
	[PS_MPOL_BIND] = "bind",
	[PS_MPOL_INTERLEAVE] = "interleave",
	[PS_MPOL_LOCAL] = "local",
	[PS_MPOL_PREFERRED_MANY] = "prefer (many)",
	[PS_MPOL_WEIGHTED_INTERLEAVE] = "weighted interleave",
};

const char *ps_mode_name(int mode)
{
	const char *name = psi_name_of(mode_names, PS_MPOL_MAX, mode);

	return name ? name : "unknown";
}
