/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A policy as the library's read paths see it: its layout, the reference a
 * lookup takes (a striped count once the policy is hot), the copy
 * ps_store_lookup_copy() makes and the node ps_store_lookup_node() picks.
 *
 * Not an API: see polstore/static/rtree.h.
 */
#ifndef POLSTORE_STATIC_POLICY_H
#define POLSTORE_STATIC_POLICY_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>
#include <polstore/policy.h>
#include <polstore/static/atomic.h>

#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 35) && (defined(__x86_64__) || defined(__aarch64__))
#include <sys/rseq.h>
#define PS_REF_HAVE_RSEQ 1
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Striped reference counts
 * ========================
 *
 * The true count of a policy is
 *
 *	refcnt - (refmode == PS_REF_OPEN ? PS_REF_BIAS : 0) + sum of the open stripes
 *
 * @refcnt is one atomic word ("the atomic count").  @stripes, once a
 * policy is hot, is an array of counters 64 bytes apart (each on a cache
 * line of its own), indexed by the caller's CPU (rseq's cpu_id; without
 * rseq, by the thread: _ps_ref_cpu()).  A stripe
 * is open (a small value, possibly negative: a reference taken on one
 * stripe may be dropped on another) or closed (PS_REF_CLOSED plus whatever
 * late increments drifted in: far below PS_REF_CLOSED_MAX).
 *
 * Fast path (get and put): while @refmode reads OPEN, one relaxed (get) or
 * release (put) fetch_add on the caller's stripe.  Its return value says
 * whether the stripe was open when the add took effect: if so the add is
 * counted and that is all; if not, the add went to a dead counter, and the
 * caller applies it to the atomic count instead (the slow path).  Each add
 * is one atomic RMW on one word, so it is ordered against the closing
 * exchange of that word: it is either folded in by the close or redirected,
 * never both and never neither.  This is what replaces percpu_ref's grace
 * period: no caller has to be inside any read section, so user threads,
 * threads polstore never saw and every store variant use the same path.
 *
 * Open (refmode ATOMIC -> OPEN): refcnt += PS_REF_BIAS, then each stripe is
 * set to 0.  Close (OPEN -> ATOMIC): each stripe is exchanged with
 * PS_REF_CLOSED and the values summed into S, then refcnt += S - BIAS.
 * While the bias is in @refcnt it cannot reach 0, whatever gets and puts
 * are redirected there meanwhile (the bias dwarfs any real count), so no
 * put frees the policy while stripes may hold part of its count.  After the
 * close @refcnt is the exact count again, and the put that takes it to 0
 * frees the policy at once: a policy in no store is never left waiting.
 *
 * Who opens and closes: a policy's stripes are open exactly while it is in
 * a store (@stores > 0: ranges of any store hold it) and hot (@stripes was
 * allocated: it was looked up PS_REF_HOT times in atomic mode while in a
 * store).  Transitions are claimed by a CAS of @refmode to BUSY, never
 * waited for (so fork() and dying threads cannot leave a waiter stuck):
 * whoever changes @stores (seq_cst RMW) then reads @refmode; the claimant
 * stores the new @refmode (seq_cst) then rereads @stores and goes again if
 * they disagree.  One of the two sees the other's write (Dekker), so the
 * last change of @stores is always acted on.  Every transition runs while
 * its caller holds a reference, so a close never finds the count at 0.
 *
 * The stripe array lives as long as the policy (freed by the final put),
 * so a thread that read @stripes may always add to it; it is allocated
 * only once the policy is hot, and a failed allocation leaves the policy on
 * the atomic count (it retries PS_REF_HOT lookups later).
 */
#define PS_REF_ATOMIC 0 /* every reference on @refcnt; @stripes closed or absent */
#define PS_REF_OPEN 1	/* stripes open, @refcnt biased by PS_REF_BIAS */
#define PS_REF_BUSY 2	/* a thread is opening or closing the stripes */

#define PS_REF_BIAS (1L << 60)
#define PS_REF_CLOSED (-(1L << 62))
#define PS_REF_CLOSED_MAX (-(1L << 61)) /* an add that returns less found its stripe closed */
#define PS_REF_HOT 64u			/* lookups in atomic mode, while in a store, that make it hot */
#define PS_REF_STRIPE_BYTES 64		/* one counter per cache line */
#define PS_REF_MAX_STRIPES 16		/* 1 KiB per policy at most */

/*
 * Everything from @mode on is written once, before the policy is returned
 * by ps_policy_create(), and never again; readers need no synchronisation
 * for it beyond the publication of the pointer.  The words before @mode are
 * accessed with __atomic builtins only (see above).
 */
struct ps_policy {
	long refcnt;	  /* the atomic count; the policy is freed when it drops to 0 */
	char *stripes;	  /* NULL until hot; then set once, freed with the policy */
	int refmode;	  /* PS_REF_ATOMIC, PS_REF_OPEN or PS_REF_BUSY */
	unsigned hits;	  /* heat: lookups in atomic mode while in a store (racy, a hint) */
	long stores;	  /* references held by ranges of stores (counted in @refcnt too) */
	unsigned stripe_mask; /* stripes - 1 (a power of two); 0: this process never stripes */
	int mode;
	unsigned flags;
	int weight; /* nodes set in @nodes */
	unsigned long nodes[PS_NODEMASK_WORDS];
	/*
	 * A weighted interleave's own weights, one a node up to its last
	 * node (ps_policy_create_weighted()); NULL: the topology's.  Read
	 * only out of line (_ps_numa_node()), never by inlined readers.
	 */
	const unsigned char *wts;
};

/* Out-of-line halves of _ps_policy_get() (exported: the inline may live in programs). */
PS_API void _ps_policy_get_slow(struct ps_policy *pol);
PS_API void _ps_policy_heat(struct ps_policy *pol);

/*
 * The node topology as the inline node lookup sees it (src/range/topology.c):
 * nodes 0 .. @dense - 1 all have memory in the topology in force; 0 until
 * it is first read.  Relaxed loads: the value guards no data.  On a cache
 * line of its own, written only when the topology changes.
 */
struct _ps_numa_fast {
	int dense;
} __attribute__((aligned(64)));
PS_API extern struct _ps_numa_fast _ps_numa_fast;

/* The out-of-line part of ps_policy_node(): every case, by the topology in force. */
PS_API int _ps_numa_node(const struct ps_policy *pol, uint64_t ilx, int local_node);

/*
 * The calling thread's number, 0, 1, 2, ... in the order threads first ask
 * (src/util/alloc.c; -1 until then), and where it is handed out.
 */
PS_API extern __thread int _ps_thread_idx __attribute__((tls_model("initial-exec")));
PS_API int _ps_thread_index_slow(void);

/*
 * The caller's stripe (any value is safe: it is masked): its CPU as the
 * kernel last wrote it in the rseq area; where rseq tells no CPU (glibc
 * registered none: glibc.pthread.rseq=0, a runtime that registers its
 * own, valgrind; other C libraries), the thread's number, so threads still
 * spread over the stripes instead of all landing on one.
 */
static inline unsigned _ps_ref_cpu(void)
{
	int i;
#ifdef PS_REF_HAVE_RSEQ
	const char *rs = (const char *)__builtin_thread_pointer() + __rseq_offset;
	/* Negative (RSEQ_CPU_ID_UNINITIALIZED, _REGISTRATION_FAILED) when none is registered. */
	int cpu = _PS_READ_ONCE(*(const int *)(rs + offsetof(struct rseq, cpu_id)));

	if (__builtin_expect(cpu >= 0, 1))
		return (unsigned)cpu;
#endif
	i = _ps_thread_idx;
	return (unsigned)(__builtin_expect(i >= 0, 1) ? i : _ps_thread_index_slow());
}

static inline long *_ps_ref_stripe(char *stripes, unsigned mask)
{
	return (long *)(stripes + (size_t)(_ps_ref_cpu() & mask) * PS_REF_STRIPE_BYTES);
}

/*
 * ps_policy_get() inlined for the library's own lookup paths.  The caller
 * holds a reference or is in a read section that keeps one alive.
 */
static inline struct ps_policy *_ps_policy_get(struct ps_policy *pol)
{
	unsigned h;

	if (!pol)
		return pol;
	/* Acquire: OPEN was stored after @stripes was published. */
	if (__builtin_expect(_PS_LOAD_ACQUIRE(pol->refmode) == PS_REF_OPEN, 1)) {
		long *c = _ps_ref_stripe(_PS_READ_ONCE(pol->stripes),
				pol->stripe_mask);

		if (__builtin_expect(_PS_FETCH_ADD(*c, 1, RELAXED) > PS_REF_CLOSED_MAX,
				    1))
			return pol;
		_ps_policy_get_slow(pol); /* closed under us: count it on @refcnt */
		return pol;
	}
	_PS_FETCH_ADD(pol->refcnt, 1, RELAXED);
	if (_PS_READ_ONCE(pol->stores) > 0 && pol->stripe_mask) {
		/* Lost updates only delay the heat; the first value >= PS_REF_HOT stored is PS_REF_HOT. */
		h = _PS_READ_ONCE(pol->hits) + 1;
		if (h <= PS_REF_HOT) {
			_PS_WRITE_ONCE(pol->hits, h);
			if (h == PS_REF_HOT)
				_ps_policy_heat(pol);
		}
	}
	return pol;
}

/* The arguments of a view the caller filled in: 0 or -EINVAL. */
static inline int _ps_policy_view_check(const struct ps_policy_view *view)
{
	return view && view->size == sizeof(*view) && view->nwords <= PS_NODEMASK_WORDS ? 0 : -EINVAL;
}

/* Copy @pol (NULL: none) into a checked @view.  Return: 1 for a policy, 0 for none. */
static inline __attribute__((always_inline)) int _ps_policy_view_fill(const struct ps_policy *pol, struct ps_policy_view *view)
{
	unsigned i, n = view->nwords;

	if (!pol) {
		view->mode = PS_MPOL_DEFAULT;
		view->flags = 0;
		view->weight = 0;
		for (i = 0; i < n; i++)
			view->nodes[i] = 0;
		return 0;
	}
	view->mode = pol->mode;
	view->flags = pol->flags;
	view->weight = pol->weight;
	for (i = 0; i < n; i++)
		view->nodes[i] = pol->nodes[i];
	return 1;
}

/* The @n-th node (from 0) of a mask holding more than @n nodes. */
static inline int _ps_nodes_nth(const unsigned long *nodes, unsigned long n)
{
	unsigned i;

	for (i = 0;; i++) {
		unsigned long w = nodes[i];
		unsigned long c = (unsigned long)__builtin_popcountl(w);

		if (n < c) {
			while (n--)
				w &= w - 1; /* drop the lowest node */
			return (int)(i * 8 * sizeof(long)) + __builtin_ctzl(w);
		}
		n -= c;
	}
}

/* struct ps_range's node_hint when it is not a node: */
#define _PS_HINT_LOCAL (-1)  /* the local node (LOCAL) */
#define _PS_HINT_POLICY (-2) /* ask the policy (several nodes, by index or distance) */

/*
 * The node every page under @pol goes to when that needs no page index or
 * local node (a one-node mask whatever the mode: its node is the nearest
 * allowed and every interleave slot's; PREFERRED), else _PS_HINT_LOCAL or
 * _PS_HINT_POLICY.  A range keeps it as its node_hint.
 */
static inline int _ps_policy_hint(const struct ps_policy *pol)
{
	if (!pol || pol->mode == PS_MPOL_LOCAL || pol->mode == PS_MPOL_DEFAULT)
		return _PS_HINT_LOCAL;
	if (pol->weight == 1 || pol->mode == PS_MPOL_PREFERRED)
		return _ps_nodes_nth(pol->nodes, 0);
	return _PS_HINT_POLICY;
}

/*
 * The cases of _ps_policy_node_hinted() after the first: the local node
 * when it has memory and the policy takes it as it is (LOCAL, no policy,
 * BIND or PREFERRED_MANY holding it), else the library's answer.
 */
static inline int _ps_policy_node_local(int hint, const struct ps_policy *pol, uint64_t ilx,
		int local_node, unsigned dense)
{
	const unsigned long bits = 8 * sizeof(long);
	unsigned l = (unsigned)local_node;

	if (l < dense) {
		if (hint == _PS_HINT_LOCAL)
			return local_node;
		if ((pol->mode == PS_MPOL_BIND || pol->mode == PS_MPOL_PREFERRED_MANY) &&
				(pol->nodes[l / bits] >> (l % bits) & 1))
			return local_node;
	}
	return _ps_numa_node(pol, ilx, local_node);
}

/*
 * _ps_policy_node() of a range's policy, given the range's hint.  A hint
 * is a node of the policy whatever the topology; it is the answer when
 * that node has memory in the topology in force, which one compare with
 * _ps_numa_fast.dense shows for every node of its dense prefix (a negative
 * hint is never below it).  Any other case, a range set before the
 * topology changed included, goes by the policy and the topology in force.
 */
static inline __attribute__((always_inline)) int _ps_policy_node_hinted(int hint,
		const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	unsigned dense = (unsigned)_PS_READ_ONCE(_ps_numa_fast.dense);

	if (__builtin_expect((unsigned)hint < dense, 1))
		return hint;
	return _ps_policy_node_local(hint, pol, ilx, local_node, dense);
}

/* ps_policy_node() with @local_node checked: the hint, then the policy when it has none. */
static inline int _ps_policy_node(const struct ps_policy *pol, uint64_t ilx, int local_node)
{
	return _ps_policy_node_hinted(_ps_policy_hint(pol), pol, ilx, local_node);
}

/* A node id ps_policy_node() accepts. */
static inline int _ps_node_check(int node)
{
	return node >= 0 && node < PS_MAX_NUMNODES ? 0 : -EINVAL;
}

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_STATIC_POLICY_H */
