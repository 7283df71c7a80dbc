// SPDX-License-Identifier: LGPL-2.1-or-later
/* Policy creation rules (mbind(2)/LTP mbind01 cases), equality, node masks. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <criterion/criterion.h>

#include "testutil.h"

#define BPL (sizeof(unsigned long) * CHAR_BIT)

static unsigned long mask1[PS_MAX_NUMNODES / BPL];

static void set_node(unsigned long *m, int node)
{
	m[node / BPL] |= 1UL << (node % BPL);
}

static void expect_einval(int mode, unsigned flags, const unsigned long *mask, unsigned long maxnode)
{
	errno = 0;
	cr_assert_null(ps_policy_create(mode, flags, mask, maxnode), "mode %d flags %#x", mode,
			flags);
	cr_assert_eq(errno, EINVAL, "mode %d flags %#x: errno %d", mode, flags, errno);
}

Test(policy, valid_modes)
{
	unsigned long m[1] = { 0x5 };
	int modes[] = { PS_MPOL_BIND, PS_MPOL_INTERLEAVE, PS_MPOL_PREFERRED,
		PS_MPOL_PREFERRED_MANY, PS_MPOL_WEIGHTED_INTERLEAVE };
	unsigned long out[2];
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct ps_policy *p = ps_policy_create(modes[i], 0, m, 3);

		cr_assert_not_null(p);
		cr_assert_eq(ps_policy_mode(p), modes[i]);
		cr_assert_eq(ps_policy_flags(p), 0u);
		cr_assert_eq(ps_policy_weight(p), 2);
		cr_assert_eq(ps_policy_first_node(p), 0);
		cr_assert_eq(ps_policy_nodemask(p, out, 2 * BPL), 0);
		cr_assert_eq(out[0], 0x5UL);
		cr_assert_eq(out[1], 0UL);
		cr_assert_eq(ps_policy_refcount(p), 1);
		ps_policy_put(p);
	}
}

Test(policy, default_and_local_take_empty_masks)
{
	struct ps_policy *d = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	struct ps_policy *l = ps_policy_create(PS_MPOL_LOCAL, 0, mask1, PS_MAX_NUMNODES);

	cr_assert_not_null(d);
	cr_assert_not_null(l);
	cr_assert_eq(ps_policy_mode(d), PS_MPOL_DEFAULT);
	cr_assert_eq(ps_policy_mode(l), PS_MPOL_LOCAL);
	cr_assert_eq(ps_policy_first_node(l), -ENOENT);
	ps_policy_put(d);
	ps_policy_put(l);
}

Test(policy, preferred_empty_is_local)
{
	struct ps_policy *p = ps_policy_create(PS_MPOL_PREFERRED, 0, NULL, 0);
	struct ps_policy *l = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);

	cr_assert_not_null(p);
	cr_assert_eq(ps_policy_mode(p), PS_MPOL_LOCAL);
	cr_assert(ps_policy_equal(p, l));
	ps_policy_put(p);
	ps_policy_put(l);
	/* ... but an empty preferred mask with a flag is refused, as mpol_new() does. */
	expect_einval(PS_MPOL_PREFERRED, PS_MPOL_F_STATIC_NODES, NULL, 0);
}

/*
 * A NULL mask names no node, so @maxnode has nothing to measure: the kernel's
 * get_nodes() looks at the length only when there is a mask to copy.
 */
Test(policy, null_mask_ignores_maxnode)
{
	unsigned long maxnodes[] = { PS_MAXNODE_LIMIT + 1, 1UL << 40, ULONG_MAX };
	size_t i;

	for (i = 0; i < sizeof(maxnodes) / sizeof(maxnodes[0]); i++) {
		struct ps_policy *d = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, maxnodes[i]);
		struct ps_policy *l = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, maxnodes[i]);
		struct ps_policy *p = ps_policy_create(PS_MPOL_PREFERRED, 0, NULL, maxnodes[i]);

		cr_assert_not_null(d, "DEFAULT, NULL mask, maxnode %lu", maxnodes[i]);
		cr_assert_not_null(l, "LOCAL, NULL mask, maxnode %lu", maxnodes[i]);
		cr_assert_not_null(p, "PREFERRED, NULL mask, maxnode %lu", maxnodes[i]);
		cr_assert_eq(ps_policy_mode(d), PS_MPOL_DEFAULT);
		cr_assert_eq(ps_policy_mode(l), PS_MPOL_LOCAL);
		cr_assert_eq(ps_policy_mode(p), PS_MPOL_LOCAL);
		cr_assert_eq(ps_policy_weight(d), 0);
		cr_assert(ps_policy_equal(l, p));
		ps_policy_put(d);
		ps_policy_put(l);
		ps_policy_put(p);
		/* Still refused: modes that need nodes, and a real mask that is too long. */
		expect_einval(PS_MPOL_BIND, 0, NULL, maxnodes[i]);
		expect_einval(PS_MPOL_PREFERRED, PS_MPOL_F_STATIC_NODES, NULL, maxnodes[i]);
		expect_einval(PS_MPOL_DEFAULT, PS_MPOL_F_ALL, NULL, maxnodes[i]);
	}
	expect_einval(PS_MPOL_DEFAULT, 0, mask1, PS_MAXNODE_LIMIT + 1);
	expect_einval(PS_MPOL_LOCAL, 0, mask1, ULONG_MAX);
}

/*
 * The kernel keeps no DEFAULT policy object (mpol_new() hands back "no
 * policy"), so a node-mask flag given with DEFAULT has nothing to stay on.
 */
Test(policy, default_keeps_no_flag)
{
	struct ps_policy *d = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0);
	struct ps_policy *s = ps_policy_create(PS_MPOL_DEFAULT, PS_MPOL_F_STATIC_NODES, NULL, 0);
	struct ps_policy *r = ps_policy_create(PS_MPOL_DEFAULT, PS_MPOL_F_RELATIVE_NODES, mask1,
			PS_MAX_NUMNODES);

	cr_assert_not_null(s);
	cr_assert_not_null(r);
	cr_assert_eq(ps_policy_mode(s), PS_MPOL_DEFAULT);
	cr_assert_eq(ps_policy_flags(s), 0u, "DEFAULT dropped STATIC_NODES");
	cr_assert_eq(ps_policy_flags(r), 0u, "DEFAULT dropped RELATIVE_NODES");
	cr_assert(ps_policy_equal(d, s), "DEFAULT equals DEFAULT|STATIC_NODES");
	cr_assert(ps_policy_equal(d, r), "DEFAULT equals DEFAULT|RELATIVE_NODES");
	cr_assert(ps_policy_equal(s, r));
	ps_policy_put(d);
	ps_policy_put(s);
	ps_policy_put(r);
	/* Flag checks come first: unknown flags and both flags stay refused. */
	expect_einval(PS_MPOL_DEFAULT, PS_MPOL_F_ALL, NULL, 0);
	expect_einval(PS_MPOL_DEFAULT, 1u << 13, NULL, 0);
}

Test(policy, einval_catalogue)
{
	unsigned long m[PS_MAXNODE_LIMIT / BPL + 1];

	memset(m, 0, sizeof(m));
	set_node(m, 1);
	/* LTP mbind01: DEFAULT or LOCAL with nodes; BIND & co without. */
	expect_einval(PS_MPOL_DEFAULT, 0, m, 8);
	expect_einval(PS_MPOL_LOCAL, 0, m, 8);
	/* mpol_new(): LOCAL takes no node-mask flag either. */
	expect_einval(PS_MPOL_LOCAL, PS_MPOL_F_STATIC_NODES, NULL, 0);
	expect_einval(PS_MPOL_LOCAL, PS_MPOL_F_RELATIVE_NODES, NULL, 0);
	expect_einval(PS_MPOL_BIND, 0, NULL, 0);
	expect_einval(PS_MPOL_INTERLEAVE, 0, mask1, PS_MAX_NUMNODES);
	expect_einval(PS_MPOL_PREFERRED_MANY, 0, NULL, 64);
	expect_einval(PS_MPOL_WEIGHTED_INTERLEAVE, 0, NULL, 0);
	/* Unknown modes and flags, both flags at once. */
	expect_einval(-1, 0, m, 8);
	expect_einval(PS_MPOL_MAX, 0, m, 8);
	expect_einval(PS_MPOL_BIND, 1, m, 8);
	expect_einval(PS_MPOL_BIND, 1u << 13, m, 8);
	expect_einval(PS_MPOL_BIND, PS_MPOL_F_STATIC_NODES | PS_MPOL_F_RELATIVE_NODES, m, 8);
	/* Nodes at or above PS_MAX_NUMNODES, and a mask longer than the limit. */
	memset(m, 0, sizeof(m));
	set_node(m, PS_MAX_NUMNODES);
	expect_einval(PS_MPOL_BIND, 0, m, PS_MAX_NUMNODES + 1);
	memset(m, 0, sizeof(m));
	set_node(m, PS_MAXNODE_LIMIT - 1);
	expect_einval(PS_MPOL_BIND, 0, m, PS_MAXNODE_LIMIT);
	expect_einval(PS_MPOL_BIND, 0, m, PS_MAXNODE_LIMIT + 1);
}

Test(policy, bits_beyond_maxnode_are_ignored)
{
	unsigned long m[2] = { ~0UL, ~0UL };
	struct ps_policy *p = ps_policy_create(PS_MPOL_BIND, PS_MPOL_F_STATIC_NODES, m, 3);
	struct ps_policy *big;

	cr_assert_not_null(p);
	cr_assert_eq(ps_policy_weight(p), 3);
	cr_assert_eq(ps_policy_flags(p), (unsigned)PS_MPOL_F_STATIC_NODES);
	ps_policy_put(p);
	/* A long mask is fine while the bits past PS_MAX_NUMNODES are clear. */
	{
		unsigned long l[PS_MAXNODE_LIMIT / BPL];

		memset(l, 0, sizeof(l));
		set_node(l, PS_MAX_NUMNODES - 1);
		big = ps_policy_create(PS_MPOL_INTERLEAVE, 0, l, PS_MAXNODE_LIMIT);
		cr_assert_not_null(big);
		cr_assert_eq(ps_policy_first_node(big), PS_MAX_NUMNODES - 1);
		ps_policy_put(big);
	}
}

Test(policy, nodemask_copy_out)
{
	struct ps_policy *p = ps_test_bind(100);
	unsigned long out[PS_MAX_NUMNODES / BPL];
	unsigned long small[1] = { 0xdead };

	cr_assert_eq(ps_policy_nodemask(p, small, 64), -EINVAL);
	cr_assert_eq(small[0], 0xdeadUL, "a refused copy writes nothing");
	cr_assert_eq(ps_policy_nodemask(p, out, 100), -EINVAL);
	cr_assert_eq(ps_policy_nodemask(p, out, 101), 0);
	cr_assert_eq(out[100 / BPL], 1UL << (100 % BPL));
	cr_assert_eq(ps_policy_nodemask(NULL, out, 101), -EINVAL);
	cr_assert_eq(ps_policy_nodemask(p, NULL, 101), -EINVAL);
	cr_assert_eq(ps_policy_nodemask(p, out, 0), -EINVAL);
	ps_policy_put(p);
}

/*
 * A @maxnode near ULONG_MAX is no mask a caller can hold: refused, as
 * ps_policy_create() refuses it (its word count would wrap to 0, and the
 * copy would succeed having written nothing).
 */
Test(policy, nodemask_huge_maxnode_refused)
{
	struct ps_policy *p = ps_test_bind(3);
	unsigned long out[2] = { 0xdead, 0xbeef };
	unsigned long big[] = { ULONG_MAX, ULONG_MAX - 1, ULONG_MAX - BPL + 2,
		PS_MAXNODE_LIMIT + 1UL };
	size_t i;

	for (i = 0; i < PS_ARRAY_SIZE(big); i++) {
		cr_expect_eq(ps_policy_nodemask(p, out, big[i]), -EINVAL, "maxnode %lu", big[i]);
		cr_expect(out[0] == 0xdead && out[1] == 0xbeef, "maxnode %lu: mask written",
				big[i]);
	}
	/* The largest accepted length still works (and writes every word). */
	{
		unsigned long *all = calloc(PS_MAXNODE_LIMIT / BPL, sizeof(*all));

		cr_assert_not_null(all);
		cr_expect_eq(ps_policy_nodemask(p, all, PS_MAXNODE_LIMIT), 0);
		cr_expect_eq(all[0], 1UL << 3);
		free(all);
	}
	ps_policy_put(p);
}

Test(policy, equality_follows_mpol_equal)
{
	struct ps_policy *a = ps_test_bind(3), *b = ps_test_bind(3), *c = ps_test_bind(4);
	unsigned long m[1] = { 1UL << 3 };
	struct ps_policy *i = ps_policy_create(PS_MPOL_INTERLEAVE, 0, m, 64);
	struct ps_policy *s = ps_policy_create(PS_MPOL_BIND, PS_MPOL_F_STATIC_NODES, m, 64);
	struct ps_policy *l1 = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);
	struct ps_policy *l2 = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);

	cr_assert(ps_policy_equal(a, a));
	cr_assert(ps_policy_equal(a, b));
	cr_assert_not(ps_policy_equal(a, c), "different nodes");
	cr_assert_not(ps_policy_equal(a, i), "different modes");
	cr_assert_not(ps_policy_equal(a, s), "different flags");
	cr_assert_not(ps_policy_equal(a, NULL));
	cr_assert_not(ps_policy_equal(NULL, a));
	cr_assert_not(ps_policy_equal(NULL, NULL), "NULL equals nothing");
	cr_assert_not_null(l2);
	cr_assert(ps_policy_equal(l1, l2), "LOCAL policies are equal");
	ps_policy_put(a);
	ps_policy_put(b);
	ps_policy_put(c);
	ps_policy_put(i);
	ps_policy_put(s);
	ps_policy_put(l1);
	ps_policy_put(l2);
}

Test(policy, references)
{
	struct ps_policy *p = ps_test_bind(0);

	cr_assert_eq(ps_policy_get(p), p);
	cr_assert_eq(ps_policy_refcount(p), 2);
	ps_policy_put(p);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
	ps_policy_put(NULL);
	cr_assert_null(ps_policy_get(NULL));
	cr_assert_eq(ps_policy_mode(NULL), -EINVAL);
	cr_assert_eq(ps_policy_flags(NULL), 0u);
	cr_assert_eq(ps_policy_refcount(NULL), -EINVAL);
	cr_assert_str_eq(ps_mode_name(PS_MPOL_BIND), "bind");
	cr_assert_str_eq(ps_mode_name(99), "unknown");
}

/* Weights in the policy: what creation accepts, what it keeps, what is equal. */
Test(policy, create_weighted)
{
	static const unsigned char w31[3] = { 3, 0, 1 }, w62[3] = { 6, 0, 2 }, zero[2] = { 0, 0 };
	unsigned char out[4] = { 9, 9, 9, 9 };
	unsigned long mask[PS_NODEMASK_WORDS] = { 0 };
	struct ps_policy *a, *b, *c, *plain;

	cr_assert_null(ps_policy_create_weighted(0, NULL, 2));
	cr_assert_eq(errno, EINVAL);
	cr_assert_null(ps_policy_create_weighted(0, w31, 0));
	cr_assert_null(ps_policy_create_weighted(0, w31, PS_MAX_NUMNODES + 1));
	cr_assert_null(ps_policy_create_weighted(0, zero, 2));
	cr_assert_null(ps_policy_create_weighted(PS_MPOL_F_ALL, w31, 3));
	a = ps_policy_create_weighted(0, w31, 3);
	b = ps_policy_create_weighted(0, w31, 3);
	c = ps_policy_create_weighted(0, w62, 3);
	cr_assert(a && b && c);
	cr_assert_eq(ps_policy_mode(a), PS_MPOL_WEIGHTED_INTERLEAVE);
	cr_assert_eq(ps_policy_weight(a), 2);
	cr_assert_eq(ps_policy_nodemask(a, mask, PS_MAX_NUMNODES), 0);
	cr_assert_eq(mask[0], 0x5);
	cr_assert_eq(ps_policy_node_weights(a, out, 4), 3);
	cr_assert(out[0] == 3 && out[1] == 0 && out[2] == 1 && out[3] == 0);
	cr_assert_eq(ps_policy_node_weights(a, NULL, 0), 3);
	cr_assert_eq(ps_policy_node_weights(a, NULL, 1), -EINVAL);
	cr_assert_eq(ps_policy_node_weights(NULL, out, 1), -EINVAL);
	cr_assert(ps_policy_equal(a, b));
	cr_assert(!ps_policy_equal(a, c), "3:1 and 6:2 place the same, but are other weights");
	plain = ps_policy_create(PS_MPOL_WEIGHTED_INTERLEAVE, 0, mask, 3);
	cr_assert_not_null(plain);
	cr_assert_eq(ps_policy_node_weights(plain, out, 4), 0);
	cr_assert(!ps_policy_equal(a, plain) && !ps_policy_equal(plain, a));
	ps_policy_put(a);
	ps_policy_put(b);
	ps_policy_put(c);
	ps_policy_put(plain);
}

/* Each allocation of a weighted creation fails in turn: NULL, ENOMEM, nothing held. */
Test(policy, create_weighted_alloc_failure)
{
	static const unsigned char w[2] = { 3, 1 };
	struct ps_policy *pol = NULL;
	long k, live;

	ps_test_alloc_install();
	for (k = 0; !pol; k++) {
		live = ps_test_alloc_live();
		ps_test_alloc_fail_after(k);
		pol = ps_policy_create_weighted(0, w, 2);
		cr_assert_eq(ps_test_alloc_disarm(), !pol);
		if (!pol) {
			cr_assert_eq(errno, ENOMEM);
			cr_assert_eq(ps_test_alloc_live(), live);
		}
	}
	cr_assert_eq(k, 3);
	ps_policy_put(pol);
	ps_test_alloc_restore();
}
