// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read index, white box, beside an in-place range tree: the
 * differential test, where updates publish, allocation failure at every
 * allocation of an update, occupancy (test_index.c says what is checked).
 */
#include "index_test.h"
#include "leaf_cut.h"

/* ---- 1. the differential test ------------------------------------------------------- */

/* From an empty index up to 10^4 ranges and back, every size on the way churned. */
Test(index, differential_against_the_tree, .timeout = 300)
{
	static const size_t sizes[] = {1, 2, 4, 5, 8, 16, 17, 40, 64, 300, 1000, 10000};
	struct hx h;
	size_t i;

	ps_test_alloc_install();
	hx_init(&h, 0x1de5);
	for (i = 0; i < PS_ARRAY_SIZE(sizes); i++) {
		size_t target = sizes[i];

		if (ps_test_scale() < 1 && target > 1000)
			break;
		/* The node-level checks walk the whole index twice per update: up to 10^3. */
		h.deep = target <= 1000;
		hx_grow(&h, target);
		hx_churn(&h, target > 1000 ? ps_test_iters(100) : ps_test_iters(200), target);
	}
	/* Everything out in one removal, then in again from the top of the space. */
	{
		struct op all = {0, UINT64_MAX, NULL};

		h.deep = true;
		hx_update(&h, &all, 1, false);
		hx_verify(&h, &all, 1);
		cr_assert_null(h.root.node);
		cr_assert_eq(h.bytes, 0);
	}
	hx_report(&h, "differential");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * Shapes one at a time: a store filled front to back, back to front, and
 * emptied both ways, one range at a time (splits and joins at every
 * leaf), with the node-level checks after every set.
 */
Test(index, fill_and_empty_in_order, .timeout = 120)
{
	long n = ps_test_scale() < 1 ? 200 : 1000, i;
	int pass;
	struct hx h;

	ps_test_alloc_install();
	hx_init(&h, 77);
	h.space = (uint64_t)n * 4;
	for (pass = 0; pass < 4; pass++) {
		bool up = pass % 2 == 0;

		for (i = 0; i < n; i++) {
			uint64_t k = up ? (uint64_t)i : (uint64_t)(n - 1 - i);
			struct op o = {4 * k + 1, 4 * k + 3, h.pol[k % NBIND]};

			hx_update(&h, &o, 1, pass >= 2);
			hx_verify(&h, &o, 1);
		}
		cr_assert_eq(h.tree.count, (size_t)n);
		for (i = 0; i < n; i++) {
			uint64_t k = up ? (uint64_t)(n - 1 - i) : (uint64_t)i;
			struct op o = {4 * k, 4 * k + 4, i % 2 ? NULL : h.pol[POL_DEFAULT]};

			hx_update(&h, &o, 1, pass >= 2);
			hx_verify(&h, &o, 1);
		}
		cr_assert_null(h.root.node);
	}
	hx_report(&h, "in order");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/* 1000 ranges [10 k, 10 k + 5) of @h, set one by one: leaves 3/4 full, three levels. */
static void hx_build_spaced(struct hx *h)
{
	long i;

	h->space = 20000;
	for (i = 0; i < 1000; i++) {
		struct op o = {10 * (uint64_t)i, 10 * (uint64_t)i + 5, h->pol[i % NBIND]};

		hx_update(h, &o, 1, false);
	}
}

/*
 * Where a single set publishes.  A set inside one leaf that neither
 * splits nor shrinks it below a quarter keeps the leaf's interval: one
 * store of the new leaf into its parent's slot, the root pointer as it
 * was, one node built and one retired.  The same set at the root's
 * request stores the root.  (The set moves a range's end: one that only
 * gives a range a new policy stores it in place, index::new_policy_in_place.)
 */
Test(index, single_set_publishes_at_the_lowest_unchanged_node)
{
	struct hx h;
	long i, slots = 0;

	ps_test_alloc_install();
	hx_init(&h, 5);
	hx_build_spaced(&h);
	hx_verify(&h, NULL, 0);
	cr_assert_geq(h.root.node->height, 2);
	for (i = 0; i < 400; i++) {
		struct ps_ix_node *root = h.root.node;
		const struct ps_ix_leaf *l;
		uint64_t k, end, hi;
		struct psi_ix_tx tx;
		bool at_root = i % 2;
		struct op o;

		/* One range grown into the gap after it, a new policy: the leaf's count unchanged. */
		do {
			k = 1 + (uint64_t)(ps_test_rand(&h.seed) % 998);
			l = _ps_ix_leaf_of(root, 10 * k, &hi);
			end = _PS_IX_END(l)[_ps_ix_find_in(l, 10 * k)];
		} while (end >= 10 * k + 9);
		o = (struct op){10 * k, end + 1, h.pol[(k + 1 + (uint64_t)i) % NBIND]};

		psi_ix_begin(&tx, &h.root, h.pool, at_root);
		cr_assert_eq(psi_ix_set(&tx, o.s, o.e, o.pol), 0);
		cr_assert_eq(tx.nbuilt, (size_t)1 + (size_t)at_root * root->height,
				"set %ld: built %zu nodes", i, tx.nbuilt);
		cr_assert_eq(tx.nretired, (size_t)1 + (size_t)at_root * root->height);
		cr_assert_eq(tx.retired[0], (void *)l, "the leaf replaced first");
		if (at_root) {
			cr_assert_eq(tx.slot, &h.root.node);
		} else {
			cr_assert_neq(tx.slot, &h.root.node);
			cr_assert_eq(*tx.slot, (struct ps_ix_node *)l, "the slot is the leaf's");
			cr_assert_eq(tx.val->height, 0);
			slots++;
		}
		psi_ix_abort(&tx);
		psi_ix_end(&tx);
		cr_assert_eq(h.root.node, root);
		hx_update(&h, &o, 1, at_root);
		if (!at_root)
			cr_assert_eq(h.root.node, root, "a slot store moved the root");
		else
			cr_assert_neq(h.root.node, root,
					"a set at the root's request kept the root");
		hx_verify(&h, &o, 1);
	}
	cr_assert_eq(slots, 200);
	hx_report(&h, "lowest node");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/*
 * The sets a writer makes most: a range split by a set inside it (two
 * entries more) and a range removed (one fewer), each inside one leaf that
 * neither overflows nor falls under a quarter.  Each copies that one leaf
 * and stores it into its parent's slot; the leaf's neighbours, its parent
 * and the root stay.  The sets that put the range back are checked the
 * same way.
 */
Test(index, splits_and_removals_inside_a_leaf_copy_one_leaf)
{
	struct hx h;
	long i, copied = 0;

	ps_test_alloc_install();
	hx_init(&h, 8);
	hx_build_spaced(&h);
	/* Every fourth range out: room in every leaf for a split. */
	for (i = 3; i < 1000; i += 4) {
		struct op o = {10 * (uint64_t)i, 10 * (uint64_t)i + 5, NULL};

		hx_update(&h, &o, 1, false);
	}
	hx_verify(&h, NULL, 0);
	for (i = 0; i < 400; i++) {
		uint64_t r = ps_test_rand(&h.seed), k = 4 * (r % 250) + (r >> 32) % 3, s = 10 * k;
		struct ps_ix_node *root = h.root.node;
		const struct ps_ix_leaf *l = _ps_ix_leaf_of(root, s, NULL);
		int at = _ps_ix_find_in(l, s), grow = i % 2 ? 2 : -1, step;
		struct ps_policy *was;
		struct op o[2];

		if (at < 0 || l->h.n + grow > 16 || l->h.n + grow < 4)
			continue;
		was = _PS_IX_POL(l)[at];
		/* The change, then the set that undoes it. */
		o[0] = i % 2 ? (struct op){s + 1, s + 4, h.pol[(k + 1) % NBIND]}
			     : (struct op){s, s + 5, NULL};
		o[1] = (struct op){s, s + 5, was};
		for (step = 0; step < 2; step++) {
			const struct ps_ix_leaf *cur = _ps_ix_leaf_of(h.root.node, s, NULL);
			struct psi_ix_tx tx;

			root = h.root.node;
			psi_ix_begin(&tx, &h.root, h.pool, false);
			cr_assert_eq(psi_ix_set(&tx, o[step].s, o[step].e, o[step].pol), 0);
			cr_assert(tx.nbuilt == 1 && tx.nretired == 1,
					"set %ld step %d: built %zu nodes and retired %zu", i, step,
					tx.nbuilt, tx.nretired);
			cr_assert_eq(tx.retired[0], (void *)cur);
			cr_assert_neq(tx.slot, &h.root.node);
			cr_assert_eq(*tx.slot, (struct ps_ix_node *)cur, "the slot is the leaf's");
			cr_assert_eq(tx.val->height, 0);
			psi_ix_abort(&tx);
			psi_ix_end(&tx);
			hx_update(&h, &o[step], 1, false);
			cr_assert_eq(h.root.node, root, "a set inside one leaf moved the root");
			hx_verify(&h, &o[step], 1);
		}
		copied++;
	}
	cr_assert_gt(copied, 350, "only %ld of 400 sets inside one leaf", copied);
	hx_report(&h, "inside a leaf");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/*
 * A set that only gives one range a new policy (the same bounds) builds
 * and retires nothing: it stores the policy and hint into the range's
 * entry of its published leaf, the root and every slot as they were.  In
 * a batch, or at the root's request (a walk is announced), it copies.
 */
Test(index, new_policy_in_place)
{
	struct hx h;
	long i, inplace = 0;

	ps_test_alloc_install();
	hx_init(&h, 6);
	hx_build_spaced(&h);
	for (i = 0; i < 400; i++) {
		uint64_t k = (uint64_t)(ps_test_rand(&h.seed) % 1000);
		struct op o = {10 * k, 10 * k + 5, h.pol[(k + 1 + (uint64_t)i) % NBIND]};
		struct ps_ix_node *root = h.root.node;
		const struct ps_ix_leaf *l = _ps_ix_leaf_of(root, o.s, NULL);
		bool at_root = i % 2;
		struct psi_ix_tx tx;
		int at = _ps_ix_find_in(l, o.s);
		struct ps_policy *was = _PS_IX_POL(l)[at];

		psi_ix_begin(&tx, &h.root, h.pool, at_root);
		cr_assert_eq(psi_ix_set(&tx, o.s, o.e, o.pol), 0);
		if (at_root) {
			cr_assert_null(tx.inplace, "set %ld: in place at the root's request", i);
			cr_assert_gt(tx.nbuilt, 0);
		} else {
			cr_assert_eq(tx.inplace, l, "set %ld: not in place in its leaf", i);
			cr_assert_eq(tx.inplace_at, at);
			cr_assert(tx.nbuilt == 0 && tx.nretired == 0 && !tx.slot);
			inplace++;
		}
		psi_ix_abort(&tx);
		psi_ix_end(&tx);
		cr_assert_eq(_PS_IX_POL(l)[at], was, "an aborted set changed the leaf");
		hx_update(&h, &o, 1, at_root);
		if (!at_root) {
			cr_assert_eq(h.root.node, root, "a policy stored in place moved the root");
			cr_assert_eq(_PS_IX_POL(l)[at], o.pol);
		}
		hx_verify(&h, &o, 1);
	}
	cr_assert_eq(inplace, 200);
	/* A batch of two new policies copies. */
	{
		struct op two[2] = {{0, 5, h.pol[1]}, {10, 15, h.pol[2]}};

		hx_update(&h, two, 2, true);
		hx_verify(&h, two, 2);
	}
	hx_report(&h, "in place");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/*
 * Batches: many sets in one transaction at the root, overlapping each
 * other (a later set replaces nodes an earlier one built), published once;
 * the version published before stays as it was until then.
 */
Test(index, batches_publish_once_at_the_root, .timeout = 120)
{
	struct hx h;
	long b, nb = ps_test_iters(300);

	ps_test_alloc_install();
	hx_init(&h, 0xba7c);
	hx_grow(&h, 500);
	for (b = 0; b < nb; b++) {
		struct op ops[48];
		int n = 2 + (int)(ps_test_rand(&h.seed) % 47), k;
		uint64_t base = ps_test_rand(&h.seed) % h.space;

		for (k = 0; k < n; k++) {
			if (b % 3 == 0) {
				/* Clustered: each set meets the last ones' leaves. */
				uint64_t a = base + ps_test_rand(&h.seed) % 200;

				ops[k] = (struct op){
						a, a + 1 + ps_test_rand(&h.seed) % 60, rnd_pol(&h)};
			} else {
				ops[k] = rnd_op(&h, false);
			}
		}
		hx_update(&h, ops, n, true);
		hx_verify(&h, ops, n);
		if (h.tree.count < 250)
			hx_grow(&h, 500);
	}
	hx_report(&h, "batches");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/* ---- 2. allocation failure at every allocation of an update ----------------------- */

/*
 * Update @ops[0, n) failing its k-th allocation for k = 0, 1, ... until it
 * succeeds: after each -ENOMEM and psi_ix_abort() the index is the one it
 * was (the same root, the same nodes and ranges, the bytes), and no block
 * more is live.  Then the update itself.  Return: the failures injected.
 */
static long fail_each(struct hx *h, const struct op *ops, int n, bool at_root)
{
	struct ps_ix_node *root = h->root.node;
	size_t bytes = psi_ix_bytes(root);
	struct nodeset before = {0}, now = {0};
	struct rv snap = {0};
	long k, failed = 0;
	size_t i;

	ns_collect(&before, root);
	ns_sort(&before);
	ix_walk(root, &snap);
	for (k = 0;; k++) {
		long live = ps_test_alloc_live();
		struct psi_ix_tx tx;
		bool reached;
		int ret = 0, j;

		psi_ix_begin(&tx, &h->root, h->pool, at_root);
		ps_test_alloc_fail_once(k);
		for (j = 0; j < n && !ret; j++)
			ret = psi_ix_set(&tx, ops[j].s, ops[j].e, ops[j].pol);
		reached = ps_test_alloc_disarm();
		if (!ret)
			cr_assert(!reached, "failure %ld injected, yet the update succeeded", k);
		else
			cr_assert(ret == -ENOMEM && reached, "failure %ld: %d", k, ret);
		/* Thrown away (also when it succeeded: an unpublished update may be). */
		psi_ix_abort(&tx);
		psi_ix_end(&tx);
		cr_assert_eq(h->root.node, root, "failure %ld: the root moved", k);
		cr_assert_eq(psi_ix_bytes(root), bytes, "failure %ld: the index's bytes changed",
				k);
		cr_assert_eq(ps_test_alloc_live(), live, "failure %ld: %ld blocks leaked", k,
				ps_test_alloc_live() - live);
		ns_collect(&now, root);
		ns_sort(&now);
		cr_assert_eq(now.n, before.n);
		for (i = 0; i < now.n; i++) {
			cr_assert_eq(now.v[i], before.v[i],
					"failure %ld: another node in the index", k);
			cr_assert_eq(((const struct ps_ix_node *)now.v[i])->wflags, 0,
					"failure %ld: a published node's flags written", k);
		}
		now.n = 0;
		ix_walk(root, &h->a);
		rv_expect_eq(&h->a, &snap, "after an abort");
		hx_check(h);
		if (!ret)
			break;
		failed++;
	}
	ns_free(&before);
	ns_free(&now);
	rv_free(&snap);
	hx_update(h, ops, n, at_root);
	hx_verify(h, ops, n);
	return failed;
}

Test(index, allocation_failure_at_every_step, .timeout = 180)
{
	static const size_t sizes[] = {0, 1, 4, 5, 16, 17, 64, 300, 2000};
	long injected = 0, updates = 0;
	struct hx h;
	size_t i;

	ps_test_alloc_install();
	hx_init(&h, 0xfa11);
	for (i = 0; i < PS_ARRAY_SIZE(sizes); i++) {
		long u, nu = sizes[i] >= 2000 ? ps_test_iters(40) : ps_test_iters(120);

		if (sizes[i])
			hx_grow(&h, sizes[i]);
		h.deep = sizes[i] <= 300;
		for (u = 0; u < nu; u++) {
			struct op ops[8];
			int n = u % 4 == 3 ? 2 + (int)(ps_test_rand(&h.seed) % 7) : 1, k;

			for (k = 0; k < n; k++)
				ops[k] = rnd_op(&h, false);
			injected += fail_each(&h, ops, n, n > 1 || u % 4 == 1);
			updates++;
			if (sizes[i] && h.tree.count < sizes[i] / 2)
				hx_grow(&h, sizes[i]);
		}
	}
	cr_log_info("allocation failure: %ld updates, %ld failures injected", updates, injected);
	cr_assert_gt(injected, updates);
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * A removal over a gap that holds a pivot (the first range of a leaf
 * removed, so that its interval begins before its first range): nothing
 * changes, so nothing is built, retired or published.
 */
Test(index, removal_over_a_gap_across_a_pivot_changes_nothing)
{
	struct hx h;
	long i, tried = 0;
	size_t built, retired;
	bool published;

	ps_test_alloc_install();
	hx_init(&h, 3);
	h.space = 4000;
	for (i = 0; i < 200; i++) {
		struct op o = {10 * (uint64_t)i, 10 * (uint64_t)i + 5, h.pol[i % NBIND]};

		hx_update(&h, &o, 1, false);
	}
	/* Every leaf's first range but the first leaf's out: each pivot then lies in a gap. */
	cr_assert_gt(h.root.node->height, 0);
	for (i = 1; i < h.root.node->n; i++) {
		uint64_t p = as_inner(h.root.node)->piv[i - 1];
		struct op o = {p, p + 5, NULL};

		cr_assert_eq(p % 10, 0);
		hx_update(&h, &o, 1, false);
		hx_verify(&h, &o, 1);
	}
	for (i = 1; i < h.root.node->n; i++) {
		uint64_t p = as_inner(h.root.node)->piv[i - 1];
		struct ps_range *before = NULL, *after = psi_rangetree_next(&h.tree, p - 30);
		struct psi_ix_tx tx;

		while (after && after->end <= p) {
			before = after;
			after = psi_rangetree_next(&h.tree, after->end);
		}
		if (!before || !after || after->start <= p)
			continue;
		tried++;
		psi_ix_begin(&tx, &h.root, h.pool, false);
		cr_assert_eq(psi_ix_set(&tx, before->end, after->start, NULL), 0);
		built = tx.nbuilt;
		retired = tx.nretired;
		published = tx.slot != NULL;
		psi_ix_abort(&tx);
		psi_ix_end(&tx);
		cr_expect(!built && !retired && !published,
				"removing the gap [%" PRIu64 ", %" PRIu64
				") across the pivot %" PRIu64 " built %zu nodes and retired %zu",
				before->end, after->start, p, built, retired);
	}
	cr_assert_gt(tried, 0);
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0);
	ps_test_alloc_restore();
}

/* ---- 5. occupancy -------------------------------------------------------------------- */

/*
 * @n ranges [2 k, 2 k + 1) of @h set in order; then in each block of 256
 * every range but the one at its middle removed with two sets across the
 * leaves between (munmap() of most of each mapping), checked, with an
 * allocation failure at every step of each when @fail.
 */
static void hx_punch(struct hx *h, long n, bool at_root, bool fail)
{
	uint64_t b;
	long i;
	int k;

	h->space = 2 * (uint64_t)n;
	for (i = 0; i < n; i++) {
		struct op o = {2 * (uint64_t)i, 2 * (uint64_t)i + 1, h->pol[i % NBIND]};

		hx_update(h, &o, 1, at_root);
	}
	for (b = 0; b < 2 * (uint64_t)n; b += 256) {
		struct op o[2] = {{b, b + 128, NULL}, {b + 129, b + 256, NULL}};

		for (k = 0; k < 2; k++) {
			if (fail) {
				fail_each(h, &o[k], 1, at_root);
				continue;
			}
			hx_update(h, &o[k], 1, at_root);
			hx_verify(h, &o[k], 1);
		}
	}
}

/* The ranges of @h set in order into @fresh, which is empty. */
static void hx_refill(struct hx *h, struct hx *fresh)
{
	size_t i;

	ix_walk(h->root.node, &h->b);
	for (i = 0; i < h->b.n; i++) {
		struct op o = {h->b.v[i].start, h->b.v[i].end, h->b.v[i].pol};

		hx_update(fresh, &o, 1, false);
	}
}

/*
 * Removals across leaves leave no node under its occupancy (hx_check()
 * after each), and an index of at most 1.5x the bytes and one level more
 * than one filled anew with the ranges left; single sets and at the
 * root's request, an allocation failure at every step of the smaller.
 */
Test(index, removals_across_leaves_shrink_it, .timeout = 120)
{
	static const long sizes[] = {600, 4000};
	int z, at_root;

	ps_test_alloc_install();
	for (z = 0; z < (int)PS_ARRAY_SIZE(sizes); z++)
		for (at_root = 0; at_root < 2; at_root++) {
			struct hx h, fresh;
			size_t bh, bf;

			hx_init(&h, 0x9a7 + (uint64_t)z);
			hx_init(&fresh, 1);
			h.deep = sizes[z] <= 1000;
			fresh.deep = false;
			hx_punch(&h, sizes[z], at_root, sizes[z] <= 1000);
			hx_refill(&h, &fresh);
			hx_check(&fresh);
			bh = psi_ix_bytes(h.root.node);
			bf = psi_ix_bytes(fresh.root.node);
			cr_log_info("%ld ranges punched%s: %zu left, index %zu bytes, %d levels; "
				    "filled anew %zu bytes, %d levels",
					sizes[z], at_root ? " at the root" : "", h.tree.count, bh,
					h.root.node->height + 1, bf, fresh.root.node->height + 1);
			cr_expect_leq(bh, bf + bf / 2, "%ld ranges punched: index %zu bytes, anew %zu",
					sizes[z], bh, bf);
			cr_expect_leq(h.root.node->height, fresh.root.node->height + 1,
					"%ld ranges punched: %d levels, anew %d", sizes[z],
					h.root.node->height + 1, fresh.root.node->height + 1);
			hx_fini(&fresh);
			hx_fini(&h);
		}
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * psi_ix_check() (ps_store_check() of an RCU store) fails an index with a
 * leaf under a quarter full that is neither the root nor the last leaf:
 * the first leaf of a three-level index cut down to one range in place,
 * those ranges out of the tree too, so that only the occupancy is wrong.
 */
Test(index, check_fails_a_leaf_under_its_occupancy)
{
	const char *why = NULL;
	struct hx h;

	ps_test_alloc_install();
	hx_init(&h, 11);
	hx_build_spaced(&h);
	hx_check(&h);
	leaf_cut_first(h.root.node, &h.tree);
	cr_assert_eq(psi_ix_check(&h.root, &h.tree, &why), -EUCLEAN);
	cr_assert_str_eq(why, "index leaf under a quarter full");
	hx_fini(&h);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}
