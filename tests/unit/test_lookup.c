// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The one-call read paths: ps_store_lookup_copy(),
 * ps_store_lookup_node(), ps_policy_node() and the POLSTORE_INLINE read
 * side (through inline_shim.c), against the library's own lookups, a table
 * of nodes worked out by hand from the kernel's rules, and real placement.
 */
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <polstore/numa.h>
#include <polstore/static/layout.h> /* white box: a store's tag, the layouts' identity */

#include "compiler.h"
#include "inline_shim.h"
#include "testutil.h"

#include <criterion/redirect.h>

#define BITS (8 * sizeof(unsigned long))

static struct ps_policy *make(int mode, const int *nodes, int n)
{
	unsigned long mask[PS_NODEMASK_WORDS] = { 0 };
	struct ps_policy *pol;
	int i;

	for (i = 0; i < n; i++)
		mask[nodes[i] / BITS] |= 1UL << (nodes[i] % BITS);
	pol = ps_policy_create(mode, 0, n ? mask : NULL, n ? PS_MAX_NUMNODES : 0);
	cr_assert_not_null(pol, "ps_policy_create(%s): %s", ps_mode_name(mode), strerror(errno));
	return pol;
}

#define MAKE(mode, ...)                                                                            \
	make(mode, (const int[]){ __VA_ARGS__ }, (int)(sizeof((int[]){ __VA_ARGS__ }) / sizeof(int)))

/*
 * Four nodes on a ring: neighbours at 20, the opposite node at 30.
 *        0   1   2   3
 *   0   10  20  30  20
 *   1   20  10  20  30
 *   2   30  20  10  20
 *   3   20  30  20  10
 * Weighted-interleave weights 3, 1, 2, 1.
 */
static const unsigned char ring_dist[16] = {
	10, 20, 30, 20,
	20, 10, 20, 30,
	30, 20, 10, 20,
	20, 30, 20, 10,
};
static const unsigned char ring_weights[4] = { 3, 1, 2, 1 };

static void ring_topology(void)
{
	cr_assert_eq(ps_numa_set_topology(4, ring_dist, ring_weights), 0);
}

static void system_topology(void)
{
	cr_assert_eq(ps_numa_set_topology(0, NULL, NULL), 0);
}

struct node_case {
	struct ps_policy *pol;
	uint64_t ilx;
	int local, want;
	const char *why;
};

/* The hand-made table: what the kernel's rules give on the ring above. */
static int node_cases(struct node_case *c)
{
	struct ps_policy *pref2 = MAKE(PS_MPOL_PREFERRED, 2);
	struct ps_policy *bind13 = MAKE(PS_MPOL_BIND, 1, 3);
	struct ps_policy *bind23 = MAKE(PS_MPOL_BIND, 2, 3);
	struct ps_policy *many02 = MAKE(PS_MPOL_PREFERRED_MANY, 0, 2);
	struct ps_policy *il023 = MAKE(PS_MPOL_INTERLEAVE, 0, 2, 3);
	struct ps_policy *wil012 = MAKE(PS_MPOL_WEIGHTED_INTERLEAVE, 0, 1, 2);
	struct ps_policy *local = make(PS_MPOL_LOCAL, NULL, 0);
	struct ps_policy *dflt = make(PS_MPOL_DEFAULT, NULL, 0);
	struct ps_policy *far = MAKE(PS_MPOL_BIND, 5, 9);
	struct ps_policy *wide = MAKE(PS_MPOL_INTERLEAVE, 3, 70, 130);
	struct ps_policy *pref7 = MAKE(PS_MPOL_PREFERRED, 7);
	struct ps_policy *bind35 = MAKE(PS_MPOL_BIND, 3, 5);
	struct ps_policy *il159 = MAKE(PS_MPOL_INTERLEAVE, 1, 5, 9);
	struct ps_policy *wil06 = MAKE(PS_MPOL_WEIGHTED_INTERLEAVE, 0, 6);
	struct ps_policy *many28 = MAKE(PS_MPOL_PREFERRED_MANY, 2, 8);
	struct ps_policy *many89 = MAKE(PS_MPOL_PREFERRED_MANY, 8, 9);
	int n = 0;

#define CASE(p, i, l, w, y) c[n++] = (struct node_case){ p, i, l, w, y }
	CASE(NULL, 7, 2, 2, "no policy: local");
	CASE(dflt, 7, 3, 3, "DEFAULT: local");
	CASE(local, 7, 1, 1, "LOCAL: local");
	CASE(pref2, 0, 0, 2, "PREFERRED: its node, whatever is local");
	CASE(pref2, 9, 3, 2, "PREFERRED: its node, whatever the index");
	CASE(bind13, 0, 1, 1, "BIND: local allowed");
	CASE(bind13, 0, 3, 3, "BIND: local allowed");
	CASE(bind13, 0, 0, 1, "BIND from 0: 1 and 3 both at 20, lowest id");
	CASE(bind13, 0, 2, 1, "BIND from 2: 1 and 3 both at 20, lowest id");
	CASE(bind23, 0, 0, 3, "BIND from 0: 3 at 20 beats 2 at 30");
	CASE(bind23, 0, 1, 2, "BIND from 1: 2 at 20 beats 3 at 30");
	CASE(many02, 0, 2, 2, "PREFERRED_MANY: local allowed");
	CASE(many02, 0, 1, 0, "PREFERRED_MANY from 1: 0 and 2 both at 20, lowest id");
	CASE(many02, 0, 3, 0, "PREFERRED_MANY from 3: 0 and 2 both at 20, lowest id");
	CASE(il023, 0, 1, 0, "INTERLEAVE: 0 mod 3 -> first node");
	CASE(il023, 1, 1, 2, "INTERLEAVE: 1 mod 3 -> second node");
	CASE(il023, 2, 1, 3, "INTERLEAVE: 2 mod 3 -> third node");
	CASE(il023, 3, 1, 0, "INTERLEAVE: 3 mod 3 -> first node");
	CASE(il023, 7, 1, 2, "INTERLEAVE: 7 mod 3 -> second node");
	CASE(wil012, 0, 3, 0, "WEIGHTED: slots 0-2 are node 0 (weight 3)");
	CASE(wil012, 2, 3, 0, "WEIGHTED: slots 0-2 are node 0");
	CASE(wil012, 3, 3, 1, "WEIGHTED: slot 3 is node 1 (weight 1)");
	CASE(wil012, 4, 3, 2, "WEIGHTED: slots 4-5 are node 2 (weight 2)");
	CASE(wil012, 5, 3, 2, "WEIGHTED: slots 4-5 are node 2");
	CASE(wil012, 6, 3, 0, "WEIGHTED: 6 mod 6 -> slot 0");
	CASE(wil012, 10, 3, 2, "WEIGHTED: 10 mod 6 = 4 -> node 2");
	CASE(bind23, 0, 7, 2, "local beyond the table: all unknown, lowest id");
	/* Nodes the ring does not have: the rule over those it has, else the local node's. */
	CASE(far, 0, 0, 0, "BIND on no node of the ring: the local node");
	CASE(far, 0, 2, 2, "BIND on no node of the ring: the local node");
	CASE(far, 0, 9, 0, "BIND on no node of the ring, local 9 not there either: lowest id");
	CASE(bind35, 0, 0, 3, "BIND narrowed to the ring's node 3");
	CASE(bind35, 0, 5, 3, "BIND narrowed, local 5 not in the ring: node 3");
	CASE(pref7, 0, 1, 1, "PREFERRED on a node the ring lacks: the local node");
	CASE(pref7, 0, 8, 0, "PREFERRED on a node the ring lacks, local 8 neither: lowest id");
	CASE(il159, 0, 2, 1, "INTERLEAVE narrowed to node 1");
	CASE(il159, 1, 2, 1, "INTERLEAVE narrowed to node 1, any index");
	CASE(il159, 2, 2, 1, "INTERLEAVE narrowed to node 1, any index");
	CASE(wide, 1, 0, 3, "INTERLEAVE over mask words narrowed to node 3");
	CASE(wide, 5, 0, 3, "INTERLEAVE over mask words narrowed to node 3");
	CASE(wil06, 1, 2, 0, "WEIGHTED narrowed to node 0");
	CASE(wil06, 4, 2, 0, "WEIGHTED narrowed to node 0, any index");
	CASE(many28, 0, 8, 2, "PREFERRED_MANY from 8 (not in the ring): its node 2");
	CASE(many89, 0, 3, 3, "PREFERRED_MANY on no node of the ring: the local node");
	CASE(local, 0, 6, 0, "LOCAL from a node the ring lacks: nearest there, lowest id");
	CASE(NULL, 0, 9, 0, "no policy from a node the ring lacks: lowest id");
	CASE(dflt, 0, 5, 0, "DEFAULT from a node the ring lacks: lowest id");
#undef CASE
	return n;
}

static void put_cases(struct node_case *c, int n)
{
	struct ps_policy *seen[64];
	int i, j, nseen = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < nseen && seen[j] != c[i].pol; j++)
			;
		if (j == nseen && c[i].pol)
			seen[nseen++] = c[i].pol;
	}
	for (j = 0; j < nseen; j++)
		ps_policy_put(seen[j]);
}

Test(lookup, policy_node_by_hand)
{
	struct node_case c[64];
	int i, n;

	ring_topology();
	n = node_cases(c);
	for (i = 0; i < n; i++) {
		cr_expect_eq(ps_policy_node(c[i].pol, c[i].ilx, c[i].local), c[i].want,
				"%s: got %d", c[i].why, ps_policy_node(c[i].pol, c[i].ilx, c[i].local));
		cr_expect_eq(shim_policy_node(c[i].pol, c[i].ilx, c[i].local), c[i].want,
				"inline: %s", c[i].why);
	}
	put_cases(c, n);
	system_topology();
}

/* The node picked for every case, through a store of each variant: the library's call and the inline one. */
VARIANT_TEST(lookup, store_node_by_hand)
{
	struct ps_store *s = ps_store_create(*sync), *si = shim_create(*sync);
	struct node_case c[64];
	int i, n;

	cr_assert(s && si);
	ring_topology();
	n = node_cases(c);
	if (*sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_online(); /* the inline path for an online thread */
	for (i = 0; i < n; i++) {
		/* Case i at [1000 i, 1000 i + 1000): the interleave index is the page index. */
		uint64_t idx = 1000 * (uint64_t)i + c[i].ilx;

		if (!c[i].pol || ps_policy_mode(c[i].pol) == PS_MPOL_DEFAULT)
			continue; /* a DEFAULT set removes: covered by the miss below */
		cr_assert_eq(ps_store_set(s, 1000 * (uint64_t)i, 1000 * (uint64_t)i + 1000, c[i].pol), 0);
		cr_assert_eq(ps_store_set(si, 1000 * (uint64_t)i, 1000 * (uint64_t)i + 1000, c[i].pol), 0);
		/* The ring's interleave indexes are small: shift each case by a multiple of its period. */
		if (ps_policy_mode(c[i].pol) == PS_MPOL_INTERLEAVE ||
				ps_policy_mode(c[i].pol) == PS_MPOL_WEIGHTED_INTERLEAVE)
			idx = c[i].ilx + 1000 * (uint64_t)i / 60 * 60; /* 60: a multiple of 3 and 6 */
		if (idx < 1000 * (uint64_t)i)
			idx += 60 * ((1000 * (uint64_t)i - idx + 59) / 60);
		cr_expect_eq(ps_store_lookup_node(s, idx, c[i].local), c[i].want, "%s: %s (idx %lu)",
				ps_sync_name(*sync), c[i].why, (unsigned long)idx);
		cr_expect_eq(shim_lookup_node(si, idx, c[i].local), c[i].want, "inline %s: %s",
				ps_sync_name(*sync), c[i].why);
	}
	cr_expect_eq(ps_store_lookup_node(s, 999999, 3), 3, "a miss: the local node");
	cr_expect_eq(shim_lookup_node(si, 999999, 3), 3, "inline miss: the local node");
	cr_expect_eq(ps_store_lookup_node(s, 999999, 9), 0, "a miss from a node the ring lacks");
	cr_expect_eq(shim_lookup_node(si, 999999, 9), 0, "inline miss from a node the ring lacks");
	if (*sync == PS_SYNC_RCU_QSBR) {
		/* Offline: the inline call goes to the library, which brings the thread online for it. */
		ps_qsbr_thread_offline();
		cr_expect_eq(shim_lookup_node(si, 1000 * 3 + 5, 0), 2, "offline inline lookup");
		cr_expect(!ps_qsbr_thread_is_online());
	}
	ps_store_destroy(s);
	ps_store_destroy(si);
	put_cases(c, n);
	system_topology();
}

VARIANT_TEST(lookup, copy_views)
{
	struct ps_store *s = ps_store_create(*sync);
	unsigned long mask[PS_NODEMASK_WORDS] = { 0 };
	struct ps_policy *pol;
	struct ps_policy_view v = PS_POLICY_VIEW_INIT(PS_NODEMASK_WORDS), w;
	unsigned i;
	int k;

	cr_assert_not_null(s);
	mask[0] = 0x5;
	mask[2] = 1UL << 3; /* node 131 */
	pol = ps_policy_create(PS_MPOL_INTERLEAVE, PS_MPOL_F_STATIC_NODES, mask, PS_MAX_NUMNODES);
	cr_assert_not_null(pol);
	cr_assert_eq(ps_store_set(s, 100, 200, pol), 0);
	for (k = 0; k < 2; k++) {
		int (*copy)(struct ps_store *, uint64_t, struct ps_policy_view *) =
				k ? shim_lookup_copy : ps_store_lookup_copy;

		memset(v.nodes, 0xaa, sizeof(v.nodes));
		cr_assert_eq(copy(s, 150, &v), 1);
		cr_expect_eq(v.mode, PS_MPOL_INTERLEAVE);
		cr_expect_eq(v.flags, PS_MPOL_F_STATIC_NODES);
		cr_expect_eq(v.weight, 3);
		cr_expect_eq(memcmp(v.nodes, mask, sizeof(mask)), 0);
		cr_expect_eq(ps_policy_refcount(pol), 2, "a copy takes no reference");

		/* One word asked for: the rest is not touched, the weight counts the whole mask. */
		w = (struct ps_policy_view)PS_POLICY_VIEW_INIT(1);
		memset(w.nodes, 0xaa, sizeof(w.nodes));
		cr_assert_eq(copy(s, 100, &w), 1);
		cr_expect_eq(w.nodes[0], 0x5UL);
		cr_expect_eq(w.weight, 3);
		for (i = 1; i < PS_NODEMASK_WORDS; i++)
			cr_expect_eq(w.nodes[i], ~0UL / 0xff * 0xaa, "word %u touched", i);

		/* A miss: DEFAULT, empty mask in the words asked for. */
		cr_assert_eq(copy(s, 200, &w), 0);
		cr_expect_eq(w.mode, PS_MPOL_DEFAULT);
		cr_expect_eq(w.flags, 0);
		cr_expect_eq(w.weight, 0);
		cr_expect_eq(w.nodes[0], 0UL);
		cr_expect_eq(w.nodes[1], ~0UL / 0xff * 0xaa);

		/* No words at all: mode and weight only. */
		w = (struct ps_policy_view)PS_POLICY_VIEW_INIT(0);
		w.nodes[0] = 7;
		cr_assert_eq(copy(s, 120, &w), 1);
		cr_expect_eq(w.mode, PS_MPOL_INTERLEAVE);
		cr_expect_eq(w.nodes[0], 7UL);
	}
	ps_store_destroy(s);
	ps_policy_put(pol);
}

/* Bad input: -EINVAL, the view untouched, for the library's calls and the inline ones. */
VARIANT_TEST(lookup, bad_input)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *pol = MAKE(PS_MPOL_BIND, 0);
	struct ps_policy_view v, before;
	int k;

	cr_assert_eq(ps_store_set(s, 0, 10, pol), 0);
	for (k = 0; k < 2; k++) {
		int (*copy)(struct ps_store *, uint64_t, struct ps_policy_view *) =
				k ? shim_lookup_copy : ps_store_lookup_copy;
		int (*node)(struct ps_store *, uint64_t, int) = k ? shim_lookup_node : ps_store_lookup_node;

		memset(&v, 0x5a, sizeof(v));
		v.size = sizeof(v);
		v.nwords = 1;
		before = v;
		cr_expect_eq(copy(NULL, 1, &v), -EINVAL);
		cr_expect_eq(copy(s, 1, NULL), -EINVAL);
		v.size = sizeof(v) - 8;
		before.size = v.size;
		cr_expect_eq(copy(s, 1, &v), -EINVAL);
		v.size = 0;
		before.size = 0;
		cr_expect_eq(copy(s, 1, &v), -EINVAL);
		v.size = sizeof(v);
		v.nwords = PS_NODEMASK_WORDS + 1;
		before.size = v.size;
		before.nwords = v.nwords;
		cr_expect_eq(copy(s, 1, &v), -EINVAL);
		cr_expect_eq(memcmp(&v, &before, sizeof(v)), 0, "a refused view is untouched");

		cr_expect_eq(node(NULL, 1, 0), -EINVAL);
		cr_expect_eq(node(s, 1, -1), -EINVAL);
		cr_expect_eq(node(s, 1, PS_MAX_NUMNODES), -EINVAL);
		cr_expect_eq(node(s, 1, PS_MAX_NUMNODES - 1), 0, "the highest node is valid");
	}
	cr_expect_eq(ps_policy_node(pol, 0, -1), -EINVAL);
	cr_expect_eq(shim_policy_node(pol, 0, PS_MAX_NUMNODES), -EINVAL);
	cr_expect_eq(ps_policy_refcount(pol), 2, "nothing taken or dropped");
	ps_store_destroy(s);
	ps_policy_put(pol);
}

Test(lookup, topology_bad_input)
{
	unsigned char zero_w[4] = { 1, 0, 1, 1 };
	struct ps_policy *bind23 = MAKE(PS_MPOL_BIND, 2, 3);

	ring_topology();
	cr_expect_eq(ps_numa_set_topology(-1, ring_dist, NULL), -EINVAL);
	cr_expect_eq(ps_numa_set_topology(PS_MAX_NUMNODES + 1, ring_dist, NULL), -EINVAL);
	cr_expect_eq(ps_numa_set_topology(4, NULL, NULL), -EINVAL);
	cr_expect_eq(ps_numa_set_topology(0, ring_dist, NULL), -EINVAL);
	cr_expect_eq(ps_numa_set_topology(0, NULL, ring_weights), -EINVAL);
	cr_expect_eq(ps_numa_set_topology(4, ring_dist, zero_w), -EINVAL);
	/* Refused calls changed nothing: the ring still decides. */
	cr_expect_eq(ps_policy_node(bind23, 0, 0), 3);
	/* Weights NULL: 1 each. */
	cr_assert_eq(ps_numa_set_topology(4, ring_dist, NULL), 0);
	{
		struct ps_policy *wil = MAKE(PS_MPOL_WEIGHTED_INTERLEAVE, 0, 1, 2);

		cr_expect_eq(ps_policy_node(wil, 1, 0), 1);
		cr_expect_eq(ps_policy_node(wil, 5, 0), 2);
		ps_policy_put(wil);
	}
	system_topology();
	ps_policy_put(bind23);
}

/* A table of @nr nodes: 10 to itself, 20 to every other node. */
static void flat_topology(int nr)
{
	static unsigned char dist[256 * 256];
	int i, j;

	cr_assert_leq(nr, 256);
	for (i = 0; i < nr; i++)
		for (j = 0; j < nr; j++)
			dist[i * nr + j] = i == j ? 10 : 20;
	cr_assert_eq(ps_numa_set_topology(nr, dist, NULL), 0);
}

/* Interleaving over nodes in several mask words, all in the topology. */
Test(lookup, interleave_wide_masks)
{
	struct ps_policy *wide = MAKE(PS_MPOL_INTERLEAVE, 3, 70, 130);
	uint64_t ilx;

	flat_topology(192);
	for (ilx = 0; ilx < 6; ilx++) {
		int want = (int[]){ 3, 70, 130 }[ilx % 3];

		cr_expect_eq(ps_policy_node(wide, ilx, 0), want, "index %lu", (unsigned long)ilx);
		cr_expect_eq(shim_policy_node(wide, ilx, 0), want, "inline, index %lu",
				(unsigned long)ilx);
	}
	cr_expect_eq(ps_policy_node(NULL, 0, 191), 191, "the table's last node is there");
	system_topology();
	ps_policy_put(wide);
}

/*
 * Ranges set under one topology, looked up under another: every answer
 * follows the topology in force at the lookup, whatever the node hint the
 * range got when it was set.
 */
VARIANT_TEST(lookup, topology_changes_after_set)
{
	struct ps_store *s = ps_store_create(*sync), *si = shim_create(*sync);
	struct ps_policy *b3 = MAKE(PS_MPOL_BIND, 3), *il13 = MAKE(PS_MPOL_INTERLEAVE, 1, 3);
	static const unsigned char two[4] = { 10, 20, 20, 10 };
	int round;

	cr_assert(s && si);
	ring_topology();
	cr_assert_eq(ps_store_set(s, 0, 100, b3), 0);
	cr_assert_eq(ps_store_set(s, 100, 200, il13), 0);
	cr_assert_eq(ps_store_set(si, 0, 100, b3), 0);
	cr_assert_eq(ps_store_set(si, 100, 200, il13), 0);
	if (*sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_online();
	for (round = 0; round < 2; round++) {
		struct ps_store *st = round ? si : s;
		int (*node)(struct ps_store *, uint64_t, int) = round ? shim_lookup_node :
									ps_store_lookup_node;

		ring_topology();
		cr_expect_eq(node(st, 50, 0), 3, "round %d: BIND 3 on the ring", round);
		cr_expect_eq(node(st, 151, 0), 3, "round %d: INTERLEAVE 1,3 at 151", round);
		cr_expect_eq(node(st, 500, 3), 3, "round %d: a miss from 3", round);
		cr_assert_eq(ps_numa_set_topology(2, two, NULL), 0);
		cr_expect_eq(node(st, 50, 1), 1, "round %d: BIND 3 on two nodes: the local node", round);
		cr_expect_eq(node(st, 50, 0), 0, "round %d: BIND 3 on two nodes: the local node", round);
		cr_expect_eq(node(st, 151, 0), 1, "round %d: INTERLEAVE narrowed to node 1", round);
		cr_expect_eq(node(st, 500, 3), 0, "round %d: a miss from 3, not there", round);
		cr_expect_eq(ps_policy_node(b3, 0, 1), 1, "round %d: ps_policy_node", round);
		cr_expect_eq(shim_policy_node(b3, 0, 1), 1, "round %d: inline ps_policy_node", round);
		ring_topology();
		cr_expect_eq(node(st, 50, 0), 3, "round %d: BIND 3 on the ring again", round);
		cr_expect_eq(shim_policy_node(b3, 0, 1), 3, "round %d: inline, the ring again", round);
	}
	if (*sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	ps_store_destroy(s);
	ps_store_destroy(si);
	ps_policy_put(b3);
	ps_policy_put(il13);
	system_topology();
}

/*
 * The inline read side against the library's, every variant: counted,
 * borrowed, copied; registered and unregistered threads (a fresh thread
 * starts unregistered: its first inline call goes to the library).
 */
struct equiv_arg {
	enum ps_sync sync;
	struct ps_store *s;
	struct ps_policy **pols;
};

static void *equiv_thread(void *arg)
{
	struct equiv_arg *a = arg;
	uint64_t idx;

	for (idx = 0; idx < 4000; idx += 7) {
		struct ps_policy *lib = ps_store_lookup(a->s, idx), *inl = shim_lookup(a->s, idx);
		struct ps_policy_view v1 = PS_POLICY_VIEW_INIT(1), v2 = PS_POLICY_VIEW_INIT(1);
		const struct ps_policy *b1, *b2;

		TCHECK(lib == inl, "counted lookup of %lu", (unsigned long)idx);
		shim_read_lock(a->s);
		b1 = shim_lookup_borrow(a->s, idx);
		b2 = ps_store_lookup_borrow(a->s, idx);
		shim_read_unlock(a->s);
		TCHECK(b1 == lib && b2 == lib, "borrowed lookup of %lu", (unsigned long)idx);
		TCHECK(ps_store_lookup_copy(a->s, idx, &v1) == shim_lookup_copy(a->s, idx, &v2),
				"copy of %lu", (unsigned long)idx);
		TCHECK(!memcmp(&v1, &v2, sizeof(v1)), "views of %lu", (unsigned long)idx);
		TCHECK(ps_store_lookup_node(a->s, idx, 1) == shim_lookup_node(a->s, idx, 1),
				"node of %lu", (unsigned long)idx);
		ps_policy_put(lib);
		ps_policy_put(inl);
	}
	return NULL;
}

VARIANT_TEST(lookup, inline_matches_library)
{
	struct ps_store *s = shim_create(*sync);
	struct ps_policy *pols[3] = { MAKE(PS_MPOL_BIND, 0), MAKE(PS_MPOL_INTERLEAVE, 0, 1),
		MAKE(PS_MPOL_PREFERRED, 1) };
	struct equiv_arg a = { *sync, s, pols };
	uint64_t rng = 42, lo, hi;
	pthread_t t;
	int i;

	cr_assert_not_null(s);
	for (i = 0; i < 300; i++) {
		if (!ps_test_rand_range(&rng, 0, 4000, &lo, &hi) || hi - lo > 400)
			continue;
		cr_assert_eq(ps_store_set(s, lo, hi, ps_test_rand(&rng) % 4 ? pols[i % 3] : NULL), 0);
	}
	cr_assert_eq(pthread_create(&t, NULL, equiv_thread, &a), 0); /* unregistered at first */
	pthread_join(t, NULL);
	equiv_thread(&a);
	if (*sync == PS_SYNC_RCU_QSBR) {
		cr_assert_eq(ps_qsbr_thread_online(), 0);
		equiv_thread(&a); /* online: the inline path proper */
		/* A section opened by the library for an offline thread nests in the library. */
		ps_qsbr_thread_offline();
		ps_store_read_lock(s);
		shim_read_lock(s);
		(void)shim_lookup_borrow(s, 1);
		shim_read_unlock(s);
		cr_expect(ps_qsbr_thread_is_online() == false, "still in the automatic section");
		ps_store_read_unlock(s);
	}
	ps_store_destroy(s);
	for (i = 0; i < 3; i++) {
		cr_expect_eq(ps_policy_refcount(pols[i]), 1, "every reference given back");
		ps_policy_put(pols[i]);
	}
}

/* Concurrent: inline readers beside a writer see only policies that were set there. */
struct race_arg {
	struct ps_store *s;
	struct ps_policy *a, *b;
	enum ps_sync sync;
	int stop; /* atomic */
};

static void *race_reader(void *arg)
{
	struct race_arg *r = arg;
	uint64_t n = 0;

	if (r->sync == PS_SYNC_RCU_QSBR)
		TCHECK(ps_qsbr_thread_online() == 0, "online");
	while (!PSI_READ_ONCE(r->stop)) {
		uint64_t idx = n++ % 64;
		struct ps_policy *p = shim_lookup(r->s, idx);
		int node = shim_lookup_node(r->s, idx, 3);

		TCHECK(!p || p == r->a || p == r->b, "counted lookup saw a stranger");
		TCHECK(node == 0 || node == 1 || node == 3, "node %d", node);
		ps_policy_put(p);
		if (r->sync == PS_SYNC_RCU_QSBR)
			ps_qsbr_quiescent();
	}
	if (r->sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	return NULL;
}

VARIANT_TEST(lookup, inline_readers_beside_writer)
{
	struct race_arg r = { shim_create(*sync), MAKE(PS_MPOL_BIND, 0), MAKE(PS_MPOL_PREFERRED, 1),
		*sync, 0 };
	pthread_t t[2];
	long i, iters = ps_test_iters(20000);

	cr_assert_not_null(r.s);
	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, race_reader, &r), 0);
	for (i = 0; i < iters; i++) {
		uint64_t lo = (uint64_t)(i * 7) % 60;

		cr_assert_eq(ps_store_set(r.s, lo, lo + 1 + i % 5, i % 3 ? (i & 1 ? r.a : r.b) : NULL), 0);
	}
	PSI_WRITE_ONCE(r.stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ps_store_destroy(r.s);
	cr_expect_eq(ps_policy_refcount(r.a), 1);
	cr_expect_eq(ps_policy_refcount(r.b), 1);
	ps_policy_put(r.a);
	ps_policy_put(r.b);
}

/*
 * A store of another layout version (its tag says so: here a white-box
 * flip of the version bits) is never read inline: every call goes to the
 * library, and answers as the library does.
 */
VARIANT_TEST(lookup, inline_hands_foreign_store_to_library)
{
	struct ps_store *s = shim_create(*sync);
	struct ps_policy *p = MAKE(PS_MPOL_BIND, 0), *got;
	struct ps_policy_view v = PS_POLICY_VIEW_INIT(1);

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 10, 20, p), 0);
	s->tag ^= 1u << 8;
	got = shim_lookup(s, 15);
	cr_expect_eq(got, p);
	ps_policy_put(got);
	errno = 5;
	cr_expect_null(shim_lookup(s, 25));
	cr_expect_eq(errno, 0, "a miss from the library, as inline");
	cr_expect_eq(shim_lookup_copy(s, 12, &v), 1);
	cr_expect_eq(v.nodes[0], 1UL);
	cr_expect_eq(shim_lookup_node(s, 12, 3), 0);
	shim_read_lock(s);
	cr_expect_eq(shim_lookup_borrow(s, 19), p);
	cr_expect_null(shim_lookup_borrow(s, 20));
	shim_read_unlock(s);
	s->tag ^= 1u << 8;
	ps_store_destroy(s);
	cr_expect_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
}

/* A program built for another version is refused at creation, clearly. */
Test(lookup, inline_abi_mismatch)
{
	errno = 0;
	cr_expect_null(shim_create_abi(PS_SYNC_RCU, 0));
	cr_expect_eq(errno, EPROTO);
	errno = 0;
	cr_expect_null(shim_create_abi(PS_SYNC_SPIN, ~0UL));
	cr_expect_eq(errno, EPROTO);
	errno = 0;
	cr_expect_null(shim_create(PS_SYNC_COUNT), "a bad variant is still EINVAL");
	cr_expect_eq(errno, EINVAL);
}

/*
 * A program built against another release's headers.  Same layouts,
 * another version number: it creates stores and reads them inline.
 */
VARIANT_TEST(lookup, inline_other_release_same_layouts)
{
	struct ps_policy *p = MAKE(PS_MPOL_BIND, 0);
	struct ps_store *s;

	cr_assert_str_neq(shim_other_version_string(), ps_version());
	errno = 0;
	s = shim_other_version_create(*sync);
	cr_assert_not_null(s, "a library with the same layouts refused: %s", strerror(errno));
	cr_assert_eq(ps_store_set(s, 10, 20, p), 0);
	if (*sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_online();
	cr_expect_eq(shim_other_version_lookup_node(s, 15, 0), 0);
	if (*sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	ps_store_destroy(s);
	ps_policy_put(p);
}

/* Another layout, the same version number: refused, with a line on stderr naming both layouts. */
Test(lookup, inline_other_layout_refused, .init = cr_redirect_stderr)
{
	char line[512] = "", want[64];
	FILE *err;

	errno = 0;
	cr_assert_null(shim_other_layout_create(PS_SYNC_RCU), "another layout accepted");
	cr_expect_eq(errno, EPROTO);
	cr_assert_null(shim_other_layout_create(PS_SYNC_SPIN), "another layout accepted");
	cr_expect_eq(errno, EPROTO);
	cr_expect_neq(shim_other_layout_abi(), _PS_INLINE_ABI, "the layouts' identities agree");
	/* Close the pipe's write end (fd 2): the read below ends at what was written. */
	fflush(stderr);
	cr_assert_geq(dup2(open("/dev/null", O_WRONLY), STDERR_FILENO), 0);
	err = cr_get_redirected_stderr();
	cr_assert(fgets(line, sizeof(line), err), "nothing on stderr");
	snprintf(want, sizeof(want), "%08lx", shim_other_layout_abi());
	cr_expect(strstr(line, want), "the program's layout %s is not named: %s", want, line);
	snprintf(want, sizeof(want), "%08lx", (unsigned long)_PS_INLINE_ABI);
	cr_expect(strstr(line, want), "the library's layout %s is not named: %s", want, line);
	cr_expect(!fgets(line, sizeof(line), err), "more than one line: %s", line);
}

/*
 * Real placement: pages faulted in a mapping bound with ps_policy_apply()
 * land where ps_store_lookup_node() says (get_mempolicy(MPOL_F_NODE |
 * MPOL_F_ADDR)).  The store is keyed by virtual page number: for an
 * anonymous mapping that is the kernel's interleave index too.  On a
 * one-node machine every case is a node-0 case.
 */
VARIANT_TEST(lookup, node_matches_real_placement)
{
	static const int modes[] = { PS_MPOL_BIND, PS_MPOL_PREFERRED, PS_MPOL_INTERLEAVE,
		PS_MPOL_PREFERRED_MANY, PS_MPOL_WEIGHTED_INTERLEAVE, PS_MPOL_LOCAL };
	size_t page = (size_t)sysconf(_SC_PAGESIZE), npages = 16, m, i;
	struct ps_store *s = ps_store_create(*sync);
	int local, ret = ps_numa_available();

	if (ret)
		cr_skip_test("no NUMA placement here (%d)", ret);
	system_topology();
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct ps_policy *pol = modes[m] == PS_MPOL_LOCAL ? make(PS_MPOL_LOCAL, NULL, 0)
								 : MAKE(modes[m], 0);
		char *p = mmap(NULL, npages * page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t first = (uint64_t)(uintptr_t)p / page;

		cr_assert(p != MAP_FAILED);
		ret = ps_policy_apply(pol, p, npages * page, 0);
		if (ret == -EINVAL && modes[m] == PS_MPOL_WEIGHTED_INTERLEAVE) {
			cr_log_info("kernel without weighted interleave: case skipped");
			goto next;
		}
		if (ret == -EPERM || ret == -ENOSYS)
			cr_skip_test("mbind refused here (%d)", ret);
		cr_assert_eq(ret, 0, "apply %s: %d", ps_mode_name(modes[m]), ret);
		cr_assert_eq(ps_store_set(s, first, first + npages, pol), 0);
		for (i = 0; i < npages; i++) {
			int node = -1;

			p[i * page] = 1; /* fault it in, under the policy */
			cr_assert_eq(get_mempolicy(&node, NULL, 0, p + i * page, MPOL_F_NODE | MPOL_F_ADDR), 0);
			local = node; /* one node here: the local node is where LOCAL put it */
			cr_expect_eq(ps_store_lookup_node(s, first + i, local), node,
					"%s page %zu: kernel put it on %d", ps_mode_name(modes[m]), i, node);
			cr_expect_eq(shim_lookup_node(s, first + i, local), node);
		}
next:
		munmap(p, npages * page);
		ps_policy_put(pol);
	}
	ps_store_destroy(s);
}
