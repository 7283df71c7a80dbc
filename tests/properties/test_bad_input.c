// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The bad-input catalogue: every public function of every module, called
 * with each invalid argument its kernel-doc names, returns the documented
 * error, does not crash, and changes nothing (each suite compares the
 * objects it owns before and after).  BAD() counts the calls; each test
 * prints how many bad inputs it tried.
 */
#include <errno.h>
#include <limits.h>
#include <numa.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

static long tried;

/* One bad input: @expr must equal @want. */
#define BAD(expr, want)                                                                            \
	do {                                                                                       \
		long long _got = (long long)(expr), _want = (long long)(want);                     \
		tried++;                                                                           \
		cr_assert_eq(_got, _want, "%s: got %lld, want %lld", #expr, _got, _want);          \
	} while (0)

/* A constructor's bad input: NULL with errno @err. */
#define BAD_NULL(expr, err)                                                                        \
	do {                                                                                       \
		const void *_p;                                                                    \
		errno = 0;                                                                         \
		_p = (expr);                                                                       \
		tried++;                                                                           \
		cr_assert_null(_p, "%s: not refused", #expr);                                      \
		cr_assert_eq(errno, err, "%s: errno %d, want %d", #expr, errno, err);              \
	} while (0)

static void report(const char *what)
{
	fprintf(stderr, "bad_input: %-10s %4ld bad inputs, each with its documented error\n", what,
			tried);
}

#define BITS_PER_LONG (8 * sizeof(unsigned long))

/* ---- policy.h ---- */

Test(bad_input, policy)
{
	unsigned long big[PS_MAXNODE_LIMIT / BITS_PER_LONG + 1];
	unsigned long m1 = 1, m0 = 0, out[2] = { 0xAA, 0xBB };
	struct ps_policy *p = ps_test_bind(100);
	struct ps_policy *local = ps_policy_create(PS_MPOL_LOCAL, 0, NULL, 0);
	int mode;

	memset(big, 0, sizeof(big));
	/* Unknown modes and flags, both flags, oversized masks. */
	BAD_NULL(ps_policy_create(-1, 0, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_MAX, 0, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(INT_MAX, 0, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(INT_MIN, 0, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, 1, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, 1u << 13, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, 1u << 31, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, UINT_MAX, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, PS_MPOL_F_ALL, &m1, 1), EINVAL);
	/* DEFAULT drops a flag, but only after the flag checks. */
	BAD_NULL(ps_policy_create(PS_MPOL_DEFAULT, PS_MPOL_F_ALL, NULL, 0), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_DEFAULT, 1u << 13, NULL, 0), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, 0, big, PS_MAXNODE_LIMIT + 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, 0, &m1, ULONG_MAX), EINVAL);
	/* A node >= PS_MAX_NUMNODES, at the first and the last bit maxnode allows. */
	big[PS_MAX_NUMNODES / BITS_PER_LONG] = 1;
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, 0, big, PS_MAX_NUMNODES + 1), EINVAL);
	big[PS_MAX_NUMNODES / BITS_PER_LONG] = 0;
	big[PS_MAXNODE_LIMIT / BITS_PER_LONG - 1] = 1UL << (BITS_PER_LONG - 1);
	BAD_NULL(ps_policy_create(PS_MPOL_INTERLEAVE, 0, big, PS_MAXNODE_LIMIT), EINVAL);
	big[PS_MAXNODE_LIMIT / BITS_PER_LONG - 1] = 0;
	/* Masks that do not suit the mode. */
	BAD_NULL(ps_policy_create(PS_MPOL_DEFAULT, 0, &m1, 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_LOCAL, 0, &m1, 1), EINVAL);
	/* A real mask longer than the limit, even an empty one where no nodes are wanted. */
	BAD_NULL(ps_policy_create(PS_MPOL_DEFAULT, 0, big, PS_MAXNODE_LIMIT + 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_LOCAL, 0, big, PS_MAXNODE_LIMIT + 1), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_PREFERRED, 0, big, PS_MAXNODE_LIMIT + 1), EINVAL);
	/* LOCAL takes no node-mask flag (mpol_new() refuses them too). */
	BAD_NULL(ps_policy_create(PS_MPOL_LOCAL, PS_MPOL_F_STATIC_NODES, NULL, 0), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_LOCAL, PS_MPOL_F_RELATIVE_NODES, NULL, 0), EINVAL);
	for (mode = 0; mode < PS_MPOL_MAX; mode++) {
		if (mode == PS_MPOL_DEFAULT || mode == PS_MPOL_LOCAL || mode == PS_MPOL_PREFERRED)
			continue;
		BAD_NULL(ps_policy_create(mode, 0, &m0, 64), EINVAL);
		BAD_NULL(ps_policy_create(mode, 0, NULL, 64), EINVAL); /* NULL mask is empty */
		BAD_NULL(ps_policy_create(mode, 0, NULL, ULONG_MAX), EINVAL); /* at any length */
		BAD_NULL(ps_policy_create(mode, 0, &m1, 0), EINVAL); /* no valid bit */
		BAD_NULL(ps_policy_create(mode, 0, big, PS_MAXNODE_LIMIT), EINVAL);
	}
	m0 = 1UL << 5; /* set, but beyond @maxnode: ignored, so the mask is empty */
	BAD_NULL(ps_policy_create(PS_MPOL_BIND, 0, &m0, 5), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_PREFERRED, PS_MPOL_F_STATIC_NODES, NULL, 0), EINVAL);
	BAD_NULL(ps_policy_create(PS_MPOL_PREFERRED, PS_MPOL_F_RELATIVE_NODES, &m0, 5), EINVAL);

	/* Accessors. */
	BAD(ps_policy_get(NULL), NULL);
	ps_policy_put(NULL);
	tried += 2;
	BAD(ps_policy_mode(NULL), -EINVAL);
	BAD(ps_policy_flags(NULL), 0);
	BAD(ps_policy_weight(NULL), -EINVAL);
	BAD(ps_policy_first_node(NULL), -EINVAL);
	BAD(ps_policy_first_node(local), -ENOENT);
	BAD(ps_policy_refcount(NULL), -EINVAL);
	BAD(ps_policy_nodemask(NULL, out, 128), -EINVAL);
	BAD(ps_policy_nodemask(p, NULL, 128), -EINVAL);
	BAD(ps_policy_nodemask(p, out, 0), -EINVAL);
	BAD(ps_policy_nodemask(p, out, 100), -EINVAL); /* node 100 needs 101 bits */
	cr_assert(out[0] == 0xAA && out[1] == 0xBB, "mask written on error");
	BAD(ps_policy_equal(NULL, NULL), false);
	BAD(ps_policy_equal(p, NULL), false);
	BAD(ps_policy_equal(NULL, p), false);
	cr_assert_str_eq(ps_mode_name(-1), "unknown");
	cr_assert_str_eq(ps_mode_name(PS_MPOL_MAX), "unknown");
	cr_assert_str_eq(ps_mode_name(INT_MIN), "unknown");
	tried += 3;
	/* Nothing changed. */
	cr_assert_eq(ps_policy_refcount(p), 1);
	cr_assert_eq(ps_policy_first_node(p), 100);
	cr_assert_eq(ps_policy_weight(p), 1);
	ps_policy_put(p);
	ps_policy_put(local);
	report("policy");
}

#ifndef NDEBUG
/*
 * A double put, in a build where the library checks it.  The allocator
 * keeps freed blocks (reachable, zeroed), so the second put reads a count
 * of 0 from real memory instead of from a block malloc() reused.
 */
static void *kept[16];
static int nkept;

static void *keep_alloc(size_t size, void *ctx)
{
	(void)ctx;
	return calloc(1, size);
}

static void keep_free(void *p, void *ctx)
{
	(void)ctx;
	if (nkept < 16)
		kept[nkept++] = p;
}

Test(bad_input, double_put_aborts, .signal = SIGABRT)
{
	static const struct ps_alloc_ops ops = {.alloc = keep_alloc, .free = keep_free};
	struct ps_policy *p;

	cr_assert_eq(ps_set_alloc_ops(&ops), 0);
	p = ps_test_bind(3);
	ps_policy_put(p);
	ps_policy_put(p); /* aborts */
}
#endif

/* ---- store.h, alloc.h, rcu.h, lockstat.h ---- */

static void *plain_alloc(size_t size, void *ctx)
{
	(void)ctx;
	cr_assert_fail("a refused allocator was installed");
	return malloc(size);
}

static void plain_free(void *p, void *ctx)
{
	(void)ctx;
	free(p);
}

/* Never called: ps_set_alloc_ops() refuses one chunk hook without the other. */
static void *plain_chunk_alloc(size_t size, size_t align, void *ctx)
{
	(void)size;
	(void)align;
	(void)ctx;
	return NULL;
}

static void plain_chunk_free(void *p, size_t size, void *ctx)
{
	(void)p;
	(void)size;
	(void)ctx;
}

static int never_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	(void)start;
	(void)end;
	(void)pol;
	(void)arg;
	cr_assert_fail("a callback was called for a refused or empty window");
	return 0;
}

/*
 * Windows, walks by position, batches.  @s holds [0, 10) and
 * [2^64 - 2, 2^64 - 1); nothing here may change it.
 */
static void bad_store_windows(struct ps_store *s, struct ps_policy *a, struct ps_policy *b)
{
	struct ps_set_op ok = { 20, 30, a };
	struct ps_set_op empty_mid[] = { { 20, 30, a }, { 40, 40, b }, { 50, 60, a } };
	struct ps_set_op inverted_last[] = { { 20, 30, a }, { 50, 60, b }, { 61, 60, a } };
	struct ps_set_op empty_first[] = { { 0, 0, NULL }, { 0, UINT64_MAX, NULL } };
	struct ps_set_op top[] = { { 0, UINT64_MAX, NULL }, { UINT64_MAX, UINT64_MAX, b } };
	struct ps_set_op overlap[] = { { 100, 200, a }, { 150, 250, b } };
	const struct ps_policy *borrowed = (const struct ps_policy *)&ok;
	struct ps_policy *got = (struct ps_policy *)&ok;
	uint64_t st = 7, en = 7;
	struct ps_store *o;
	struct ps_model want;
	char why[160];

	/* Empty and inverted windows, a NULL callback. */
	BAD(ps_store_foreach_range(NULL, 0, 1, never_fn, NULL), -EINVAL);
	BAD(ps_store_foreach_range(s, 0, 1, NULL, NULL), -EINVAL);
	BAD(ps_store_foreach_range(s, 5, 5, never_fn, NULL), -EINVAL);
	BAD(ps_store_foreach_range(s, 6, 5, never_fn, NULL), -EINVAL);
	BAD(ps_store_foreach_range(s, 0, 0, never_fn, NULL), -EINVAL);
	BAD(ps_store_foreach_range(s, UINT64_MAX, UINT64_MAX, never_fn, NULL), -EINVAL);
	BAD(ps_store_foreach_range(s, UINT64_MAX, 0, never_fn, NULL), -EINVAL);
	/* No range in the window is no error: 0, and no call. */
	BAD(ps_store_foreach_range(s, 10, UINT64_MAX - 1, never_fn, NULL), 0);
	/* NULL out-pointers; -ENOENT past the last range.  Nothing is written. */
	BAD(ps_store_next(NULL, 0, &st, &en, &got), -EINVAL);
	BAD(ps_store_next(s, 0, NULL, &en, &got), -EINVAL);
	BAD(ps_store_next(s, 0, &st, NULL, &got), -EINVAL);
	BAD(ps_store_next(s, 0, &st, &en, NULL), -EINVAL);
	BAD(ps_store_next(s, UINT64_MAX, &st, &en, &got), -ENOENT);
	BAD(ps_store_next_borrow(NULL, 0, &st, &en, &borrowed), -EINVAL);
	ps_store_read_lock(s);
	BAD(ps_store_next_borrow(s, 0, NULL, &en, &borrowed), -EINVAL);
	BAD(ps_store_next_borrow(s, 0, &st, NULL, &borrowed), -EINVAL);
	BAD(ps_store_next_borrow(s, 0, &st, &en, NULL), -EINVAL);
	BAD(ps_store_next_borrow(s, UINT64_MAX, &st, &en, &borrowed), -ENOENT);
	ps_store_read_unlock(s);
	cr_assert(st == 7 && en == 7 && got == (struct ps_policy *)&ok &&
				  borrowed == (const struct ps_policy *)&ok,
			"an out-pointer was written on error");
	/* Batches: a NULL store or array, an empty or inverted op anywhere: nothing applied. */
	BAD(ps_store_set_many(NULL, &ok, 1), -EINVAL);
	BAD(ps_store_set_many(NULL, NULL, 0), -EINVAL);
	BAD(ps_store_set_many(s, NULL, 1), -EINVAL);
	BAD(ps_store_set_many(s, NULL, SIZE_MAX), -EINVAL);
	BAD(ps_store_set_many(s, empty_mid, 3), -EINVAL);
	BAD(ps_store_set_many(s, inverted_last, 3), -EINVAL);
	BAD(ps_store_set_many(s, empty_first, 2), -EINVAL);
	BAD(ps_store_set_many(s, top, 2), -EINVAL);
	/* n = 0 is documented as a no-op, with or without an array. */
	BAD(ps_store_set_many(s, NULL, 0), 0);
	BAD(ps_store_set_many(s, empty_mid, 0), 0);
	/*
	 * Overlapping ops are no error: applied in order, the later one wins
	 * (documented).  On a store of its own, as it changes it.
	 */
	o = ps_store_create(ps_store_sync_kind(s));
	cr_assert_not_null(o);
	BAD(ps_store_set_many(o, overlap, 2), 0);
	ps_model_init(&want);
	cr_assert_eq(ps_model_set(&want, 100, 150, a), 0);
	cr_assert_eq(ps_model_set(&want, 150, 250, b), 0);
	cr_assert(ps_model_matches(o, &want, why, sizeof(why)),
			"overlapping ops: the later one must win: %s", why);
	ps_store_destroy(o);
}

VARIANT_TEST(bad_input, store)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);
	struct ps_alloc_ops half1 = {.alloc = NULL, .free = NULL}, half2 = {.alloc = NULL, .free = NULL};
	struct ps_lock_stat_row rows[2];
	struct ps_model before;
	char why[160];
	long ra, rb;
	char name[32];

	cr_assert_not_null(s);
	/* A state with both uint64_t edges used: [0, 10), [UINT64_MAX - 1, UINT64_MAX). */
	cr_assert_eq(ps_store_set(s, 0, 10, a), 0);
	cr_assert_eq(ps_store_set(s, UINT64_MAX - 1, UINT64_MAX, b), 0);
	cr_assert_eq(ps_model_read(&before, s), 0);
	ra = ps_policy_refcount(a);
	rb = ps_policy_refcount(b);

	BAD_NULL(ps_store_create((enum ps_sync)-1), EINVAL);
	BAD_NULL(ps_store_create((enum ps_sync)PS_SYNC_COUNT), EINVAL);
	BAD_NULL(ps_store_create((enum ps_sync)INT_MAX), EINVAL);
	ps_store_destroy(NULL);
	tried++;
	BAD(ps_sync_name((enum ps_sync)-1), NULL);
	BAD(ps_sync_name((enum ps_sync)PS_SYNC_COUNT), NULL);
	BAD(ps_sync_from_name(NULL), -EINVAL);
	BAD(ps_sync_caps((enum ps_sync)-1), 0u);
	BAD(ps_sync_caps((enum ps_sync)PS_SYNC_COUNT), 0u);
	BAD(ps_sync_from_name(""), -EINVAL);
	BAD(ps_sync_from_name("SPIN"), -EINVAL);
	BAD(ps_sync_from_name("rcu "), -EINVAL);
	BAD(ps_store_sync_kind(NULL), -EINVAL);
	/* Empty and inverted ranges, at the edges too. */
	BAD(ps_store_set(NULL, 0, 1, a), -EINVAL);
	BAD(ps_store_set(NULL, 0, 1, NULL), -EINVAL);
	BAD(ps_store_set(s, 5, 5, b), -EINVAL);
	BAD(ps_store_set(s, 6, 5, b), -EINVAL);
	BAD(ps_store_set(s, 0, 0, b), -EINVAL);
	BAD(ps_store_set(s, 1, 0, NULL), -EINVAL);
	BAD(ps_store_set(s, UINT64_MAX, UINT64_MAX, b), -EINVAL);
	BAD(ps_store_set(s, UINT64_MAX, 0, b), -EINVAL);
	BAD(ps_store_set(s, UINT64_MAX, UINT64_MAX - 1, NULL), -EINVAL);
	/* Lookups: a NULL store says EINVAL, a miss says 0 (documented). */
	BAD_NULL(ps_store_lookup(NULL, 0), EINVAL);
	BAD_NULL(ps_store_lookup(NULL, UINT64_MAX), EINVAL);
	errno = EINVAL;
	BAD(ps_store_lookup(s, 20), NULL);
	cr_assert_eq(errno, 0, "a miss leaves errno %d, documented 0", errno);
	errno = EINVAL;
	/* UINT64_MAX is never covered: ranges are half-open with a uint64_t end. */
	BAD(ps_store_lookup(s, UINT64_MAX), NULL);
	cr_assert_eq(errno, 0);
	BAD(ps_store_lookup_borrow(NULL, 0), NULL);
	ps_store_read_lock(NULL);
	ps_store_read_unlock(NULL);
	tried += 2;
	BAD(ps_store_foreach(NULL, ps_test_count_ranges, NULL), -EINVAL);
	BAD(ps_store_foreach(s, NULL, NULL), -EINVAL);
	BAD(ps_store_count(NULL), 0);
	BAD(ps_store_check(NULL, NULL), -EINVAL);
	BAD(ps_store_memory(NULL), 0);
	BAD(ps_store_synchronize(NULL), -EINVAL);
	bad_store_windows(s, a, b);
	/* alloc.h: an allocator lacking a function is refused and the old one stays. */
	half1.alloc = plain_alloc;
	BAD(ps_set_alloc_ops(&half1), -EINVAL);
	half2.free = plain_free;
	BAD(ps_set_alloc_ops(&half2), -EINVAL);
	/* One chunk hook without the other. */
	half1.free = plain_free;
	half1.chunk_alloc = plain_chunk_alloc;
	BAD(ps_set_alloc_ops(&half1), -EINVAL);
	half1.chunk_alloc = NULL;
	half1.chunk_free = plain_chunk_free;
	BAD(ps_set_alloc_ops(&half1), -EINVAL);
	/* rcu.h: state changes of a thread that is not online are no-ops. */
	ps_qsbr_quiescent();
	ps_qsbr_thread_offline();
	ps_rcu_unregister_thread();
	BAD(ps_qsbr_thread_is_online(), false);
	tried += 3;
	/* lockstat.h */
	BAD(ps_store_lock_stat_read(NULL, rows), -EINVAL);
	BAD(ps_store_lock_stat_read(s, NULL), -EINVAL);
	BAD(ps_store_lock_stat_print(NULL, NULL, true, stderr), -EINVAL);
	BAD(ps_store_lock_stat_print(s, NULL, true, NULL), -EINVAL);
	BAD(ps_store_lock_stat_reset(NULL), -EINVAL);
	if (!ps_lock_stat_enabled()) {
		BAD(ps_store_lock_stat_read(s, rows), -EOPNOTSUPP);
		BAD(ps_store_lock_stat_reset(s), -EOPNOTSUPP);
	}

	/* Nothing changed, and the store still works (the allocator too). */
	cr_assert(ps_model_matches(s, &before, why, sizeof(why)), "bad input changed the store: %s",
			why);
	cr_assert_eq(ps_store_check(s, NULL), 0);
	cr_assert_eq(ps_policy_refcount(a), ra);
	cr_assert_eq(ps_policy_refcount(b), rb);
	cr_assert_eq(ps_store_set(s, 20, 30, a), 0);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
	snprintf(name, sizeof(name), "store %s", ps_sync_name(*sync));
	report(name);
}

/* ---- charge.h ---- */

Test(bad_input, charge)
{
	struct ps_charge *root = ps_charge_create(PS_CHARGE_SPIN, NULL, 100);
	struct ps_charge *kid = ps_charge_create(PS_CHARGE_ATOMIC, root, 50), *fail = root;
	struct ps_charge_stat st, st2;

	cr_assert(root && kid);
	cr_assert_eq(ps_charge_try(kid, 20, NULL), 0);
	cr_assert_eq(ps_charge_stat(kid, &st), 0);

	BAD(ps_charge_kind_name((enum ps_charge_kind)-1), NULL);
	BAD(ps_charge_kind_name((enum ps_charge_kind)PS_CHARGE_KIND_COUNT), NULL);
	BAD(ps_charge_kind_from_name(NULL), -EINVAL);
	BAD(ps_charge_kind_from_name("Spin"), -EINVAL);
	BAD_NULL(ps_charge_create((enum ps_charge_kind)-1, NULL, 1), EINVAL);
	BAD_NULL(ps_charge_create((enum ps_charge_kind)PS_CHARGE_KIND_COUNT, NULL, 1), EINVAL);
	BAD_NULL(ps_charge_create(PS_CHARGE_SPIN, NULL, -1), EINVAL);
	BAD_NULL(ps_charge_create(PS_CHARGE_SPIN, root, PS_CHARGE_MAX + 1), EINVAL);
	BAD_NULL(ps_charge_create(PS_CHARGE_STOCK, root, LONG_MAX), EINVAL);
	BAD_NULL(ps_charge_create(PS_CHARGE_ATOMIC, root, LONG_MIN), EINVAL);
	BAD(ps_charge_destroy(NULL), 0);
	BAD(ps_charge_destroy(root), -EBUSY); /* has a child */
	BAD(ps_charge_destroy(kid), -EBUSY); /* usage remains */
	BAD(ps_charge_kind(NULL), -EINVAL);
	BAD(ps_charge_parent(NULL), NULL);
	BAD(ps_charge_try(NULL, 1, &fail), -EINVAL);
	BAD(ps_charge_try(kid, -1, &fail), -EINVAL);
	BAD(ps_charge_try(kid, PS_CHARGE_MAX + 1, &fail), -EINVAL);
	BAD(ps_charge_try(kid, LONG_MAX, &fail), -EINVAL);
	BAD(ps_charge_try(kid, LONG_MIN, NULL), -EINVAL);
	cr_assert_eq(fail, root, "*fail written on EINVAL");
	BAD(ps_charge_uncharge(NULL, 1), -EINVAL);
	BAD(ps_charge_uncharge(kid, -1), -EINVAL);
	BAD(ps_charge_uncharge(kid, PS_CHARGE_MAX + 1), -EINVAL);
	BAD(ps_charge_uncharge(kid, 21), -EINVAL); /* more than its usage, no stock */
	BAD(ps_charge_set_limit(NULL, 1), -EINVAL);
	BAD(ps_charge_set_limit(kid, -1), -EINVAL);
	BAD(ps_charge_set_limit(kid, PS_CHARGE_MAX + 1), -EINVAL);
	BAD(ps_charge_set_limit(kid, 19), -EBUSY);
	BAD(ps_charge_set_stock(NULL, 1), -EINVAL);
	BAD(ps_charge_set_stock(kid, -1), -EINVAL);
	BAD(ps_charge_set_stock(kid, PS_CHARGE_MAX + 1), -EINVAL);
	BAD(ps_charge_stock_batch(NULL), -EINVAL);
	BAD(ps_charge_drain_stock(NULL), -EINVAL);
	BAD(ps_charge_read(NULL, PS_CHARGE_USAGE), -EINVAL);
	BAD(ps_charge_read(kid, (enum ps_charge_field)-1), -EINVAL);
	BAD(ps_charge_read(kid, (enum ps_charge_field)99), -EINVAL);
	BAD(ps_charge_stat(NULL, &st2), -EINVAL);
	BAD(ps_charge_stat(kid, NULL), -EINVAL);
	BAD(ps_charge_reset_max(NULL), -EINVAL);
	BAD(ps_charge_reset_failcnt(NULL), -EINVAL);
	BAD(ps_charge_overshoot_bound((enum ps_charge_kind)PS_CHARGE_KIND_COUNT, 1, 1, 0), -EINVAL);
	BAD(ps_charge_overshoot_bound((enum ps_charge_kind)-1, 1, 1, 0), -EINVAL);
	BAD(ps_charge_overshoot_bound(PS_CHARGE_ATOMIC, -1, 1, 0), -EINVAL);
	BAD(ps_charge_overshoot_bound(PS_CHARGE_ATOMIC, 1, -1, 0), -EINVAL);
	BAD(ps_charge_overshoot_bound(PS_CHARGE_ATOMIC, 1, 1, -1), -EINVAL);

	cr_assert_eq(ps_charge_stat(kid, &st2), 0);
	cr_assert_eq(memcmp(&st, &st2, sizeof(st)), 0, "bad input changed the counter");
	cr_assert_eq(ps_charge_read(kid, PS_CHARGE_LIMIT), 50);
	cr_assert_eq(ps_charge_read(root, PS_CHARGE_USAGE), 20);
	cr_assert_eq(ps_charge_stock_batch(kid), 0);
	cr_assert_eq(ps_charge_uncharge(kid, 20), 0);
	cr_assert_eq(ps_charge_destroy(kid), 0);
	cr_assert_eq(ps_charge_destroy(root), 0);
	report("charge");
}

/* ---- pcounter.h ---- */

Test(bad_input, pcounter)
{
	struct ps_pcounter *pc = ps_pcounter_create(7, 8);
	struct ps_commit *cm = ps_commit_create(PS_OVERCOMMIT_NEVER, 1000, 2);
	struct ps_pcounter_snapshot snap;

	cr_assert(pc && cm);
	cr_assert_eq(ps_commit_charge(cm, 10), 0);
	BAD_NULL(ps_pcounter_create(0, 0), EINVAL);
	BAD_NULL(ps_pcounter_create(0, -1), EINVAL);
	BAD_NULL(ps_pcounter_create(0, INT32_MIN), EINVAL);
	ps_pcounter_destroy(NULL);
	tried++;
	BAD(ps_pcounter_add(NULL, 1), -EINVAL);
	BAD(ps_pcounter_read(NULL), 0);
	BAD(ps_pcounter_read_positive(NULL), 0);
	BAD(ps_pcounter_sum(NULL), 0);
	BAD(ps_pcounter_compare(NULL, 5), 0);
	BAD(ps_pcounter_fold(NULL), -EINVAL);
	BAD(ps_pcounter_set_batch(NULL, 1), -EINVAL);
	BAD(ps_pcounter_set_batch(pc, 0), -EINVAL);
	BAD(ps_pcounter_set_batch(pc, -5), -EINVAL);
	BAD(ps_pcounter_set_batch(pc, INT32_MIN), -EINVAL);
	BAD(ps_pcounter_batch(NULL), -EINVAL);
	BAD(ps_pcounter_threads(NULL), -EINVAL);
	BAD(ps_pcounter_snapshot(NULL, &snap), -EINVAL);
	BAD(ps_pcounter_snapshot(pc, NULL), -EINVAL);
	BAD(ps_pcounter_error_bound(0, 1), -EINVAL);
	BAD(ps_pcounter_error_bound(-1, 1), -EINVAL);
	BAD(ps_pcounter_error_bound(1, -1), -EINVAL);
	BAD(ps_pcounter_compute_batch(1000, 0, false), -EINVAL);
	BAD(ps_pcounter_compute_batch(1000, -1, true), -EINVAL);
	BAD(ps_overcommit_name((enum ps_overcommit)-1), NULL);
	BAD(ps_overcommit_name((enum ps_overcommit)PS_OVERCOMMIT_COUNT), NULL);
	BAD(ps_overcommit_from_name(NULL), -EINVAL);
	BAD(ps_overcommit_from_name("sometimes"), -EINVAL);
	BAD_NULL(ps_commit_create((enum ps_overcommit)PS_OVERCOMMIT_COUNT, 1000, 1), EINVAL);
	BAD_NULL(ps_commit_create((enum ps_overcommit)-1, 1000, 1), EINVAL);
	BAD_NULL(ps_commit_create(PS_OVERCOMMIT_GUESS, 1000, -1), EINVAL);
	BAD_NULL(ps_commit_create(PS_OVERCOMMIT_GUESS, (uint64_t)INT64_MAX + 1, 1), EINVAL);
	BAD_NULL(ps_commit_create(PS_OVERCOMMIT_NEVER, UINT64_MAX, 1), EINVAL);
	ps_commit_destroy(NULL);
	tried++;
	BAD(ps_commit_set_mode(NULL, PS_OVERCOMMIT_GUESS), -EINVAL);
	BAD(ps_commit_set_mode(cm, (enum ps_overcommit)PS_OVERCOMMIT_COUNT), -EINVAL);
	BAD(ps_commit_set_mode(cm, (enum ps_overcommit)-1), -EINVAL);
	BAD(ps_commit_mode(NULL), -EINVAL);
	BAD(ps_commit_set_limit(NULL, 1), -EINVAL);
	BAD(ps_commit_set_limit(cm, -1), -EINVAL);
	BAD(ps_commit_set_limit(cm, INT64_MIN), -EINVAL);
	BAD(ps_commit_limit(NULL), -EINVAL);
	BAD(ps_commit_charge(NULL, 1), -EINVAL);
	BAD(ps_commit_charge(cm, -1), -EINVAL);
	BAD(ps_commit_charge(cm, INT64_MIN), -EINVAL);
	BAD(ps_commit_uncharge(NULL, 1), -EINVAL);
	BAD(ps_commit_uncharge(cm, -1), -EINVAL);
	BAD(ps_commit_committed(NULL, true), 0);
	BAD(ps_commit_counter(NULL), NULL);

	cr_assert_eq(ps_pcounter_sum(pc), 7);
	cr_assert_eq(ps_pcounter_batch(pc), 8);
	cr_assert_eq(ps_commit_mode(cm), PS_OVERCOMMIT_NEVER);
	cr_assert_eq(ps_commit_limit(cm), 1000);
	cr_assert_eq(ps_commit_committed(cm, true), 10);
	ps_pcounter_destroy(pc);
	ps_commit_destroy(cm);
	report("pcounter");
}

/* ---- idmap.h ---- */

static void no_free(void *p)
{
	(void)p;
	cr_assert_fail("free_fn called on a refused call");
}

IDMAP_TEST(bad_input, idmap)
{
	struct ps_idmap *map = ps_idmap_create(*sync);
	static char obj[4];
	void *old = &obj[3];
	int id = 1234, a, b;
	char name[32];

	cr_assert_not_null(map);
	cr_assert_eq(ps_idmap_alloc(map, &obj[0], 0, 1, &a), 0);
	cr_assert_eq(ps_idmap_alloc(map, &obj[1], 0, 1, &b), 0);
	BAD(ps_idmap_sync_name((enum ps_idmap_sync)-1), NULL);
	BAD(ps_idmap_sync_name((enum ps_idmap_sync)PS_IDMAP_SYNC_COUNT), NULL);
	BAD(ps_idmap_sync_from_name(NULL), -EINVAL);
	BAD(ps_idmap_sync_from_name("RCU"), -EINVAL);
	BAD_NULL(ps_idmap_create((enum ps_idmap_sync)-1), EINVAL);
	BAD_NULL(ps_idmap_create((enum ps_idmap_sync)PS_IDMAP_SYNC_COUNT), EINVAL);
	ps_idmap_destroy(NULL);
	tried++;
	BAD(ps_idmap_sync_kind(NULL), -EINVAL);
	BAD(ps_idmap_alloc(NULL, &obj[2], 0, 10, &id), -EINVAL);
	BAD(ps_idmap_alloc(map, NULL, 0, 10, &id), -EINVAL);
	BAD(ps_idmap_alloc(map, &obj[2], 0, 10, NULL), -EINVAL);
	BAD(ps_idmap_alloc(map, &obj[2], -1, 10, &id), -EINVAL);
	BAD(ps_idmap_alloc(map, &obj[2], INT_MIN, 10, &id), -EINVAL);
	BAD(ps_idmap_alloc(map, &obj[2], 10, 9, &id), -EINVAL);
	BAD(ps_idmap_alloc(map, &obj[2], PS_IDMAP_ID_MAX, 0, &id), -EINVAL);
	BAD(ps_idmap_alloc(map, &obj[2], 0, 1, &id), -ENOSPC); /* 0 and 1 are bound */
	cr_assert_eq(id, 1234, "*id written on error");
	BAD(ps_idmap_replace(NULL, a, &obj[2], &old), -EINVAL);
	BAD(ps_idmap_replace(map, a, NULL, &old), -EINVAL);
	BAD(ps_idmap_replace(map, -1, &obj[2], &old), -EINVAL);
	BAD(ps_idmap_replace(map, INT_MIN, &obj[2], &old), -EINVAL);
	BAD(ps_idmap_replace(map, 7, &obj[2], &old), -ENOENT);
	BAD(ps_idmap_replace(map, PS_IDMAP_ID_MAX, &obj[2], &old), -ENOENT);
	BAD(ps_idmap_remove(NULL, a, &old), -EINVAL);
	BAD(ps_idmap_remove(map, -1, &old), -EINVAL);
	BAD(ps_idmap_remove(map, 7, &old), -ENOENT);
	BAD(ps_idmap_remove(map, PS_IDMAP_ID_MAX, NULL), -ENOENT);
	cr_assert_eq(old, &obj[3], "*old written on error");
	ps_idmap_read_lock(map);
	BAD(ps_idmap_find(NULL, 0), NULL);
	BAD(ps_idmap_find(map, -1), NULL);
	BAD(ps_idmap_find(map, INT_MIN), NULL);
	BAD(ps_idmap_find(map, PS_IDMAP_ID_MAX), NULL);
	BAD(ps_idmap_get_next(NULL, &id), NULL);
	BAD(ps_idmap_get_next(map, NULL), NULL);
	id = -1;
	BAD(ps_idmap_get_next(map, &id), NULL);
	cr_assert_eq(id, -1);
	id = 2;
	BAD(ps_idmap_get_next(map, &id), NULL); /* nothing at or above 2 */
	cr_assert_eq(id, 2);
	ps_idmap_read_unlock(map);
	BAD(ps_idmap_count(NULL), -EINVAL);
	ps_idmap_synchronize(NULL);
	ps_idmap_barrier(NULL);
	tried += 2;
	BAD(ps_idmap_free_rcu(NULL, &obj[2], no_free), -EINVAL);
	BAD(ps_idmap_free_rcu(map, NULL, no_free), -EINVAL);
	BAD(ps_idmap_free_rcu(map, &obj[2], NULL), -EINVAL);

	cr_assert_eq(ps_idmap_count(map), 2);
	ps_idmap_read_lock(map);
	cr_assert_eq(ps_idmap_find(map, a), &obj[0]);
	cr_assert_eq(ps_idmap_find(map, b), &obj[1]);
	ps_idmap_read_unlock(map);
	ps_idmap_destroy(map);
	snprintf(name, sizeof(name), "idmap %s", ps_idmap_sync_name(*sync));
	report(name);
}

/* ---- numa.h ---- */

Test(bad_input, numa)
{
	struct ps_policy *p = ps_test_bind(100), *q;
	struct ps_store *s = ps_store_create(PS_SYNC_SPIN);
	struct bitmask *small = numa_bitmask_alloc(64), empty = { 0, NULL };
	long pg = sysconf(_SC_PAGESIZE);
	char *map = mmap(NULL, (size_t)pg * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	size_t done = 99;
	int avail = ps_numa_available();

	cr_assert(s && small && map != MAP_FAILED);
	cr_assert(avail == 0 || avail == -ENOSYS || avail == -EPERM, "ps_numa_available: %d",
			avail);
	cr_assert_eq(ps_store_set(s, 0, 4, p), 0);
	/* Flags and alignment are checked before the kernel is asked. */
	BAD(ps_policy_apply(p, map, (size_t)pg, 1u << 7), -EINVAL);
	BAD(ps_policy_apply(p, map, (size_t)pg, ~0u), -EINVAL);
	BAD(ps_policy_apply(p, map + 1, (size_t)pg, 0), -EINVAL);
	BAD(ps_policy_to_bitmask(NULL, small), -EINVAL);
	BAD(ps_policy_to_bitmask(p, NULL), -EINVAL);
	BAD(ps_policy_to_bitmask(p, &empty), -EINVAL);
	numa_bitmask_setbit(small, 5);
	BAD(ps_policy_to_bitmask(p, small), -EINVAL); /* node 100 does not fit in 64 bits */
	cr_assert(numa_bitmask_isbitset(small, 5), "bitmask written on error");
	BAD_NULL(ps_policy_from_bitmask(-1, 0, small), EINVAL);
	BAD_NULL(ps_policy_from_bitmask(PS_MPOL_BIND, PS_MPOL_F_ALL, small), EINVAL);
	BAD_NULL(ps_policy_from_bitmask(PS_MPOL_BIND, 0, NULL), EINVAL); /* NULL: empty */
	q = ps_policy_from_bitmask(PS_MPOL_LOCAL, 0, NULL);
	cr_assert_not_null(q);
	ps_policy_put(q);
	/* ps_store_apply_range(): every EINVAL applies nothing and says so. */
	BAD(ps_store_apply_range(NULL, map, 0, 4, (size_t)pg, 0, &done), -EINVAL);
	cr_assert_eq(done, 0);
	BAD(ps_store_apply_range(s, map, 0, 4, 0, 0, &done), -EINVAL);
	BAD(ps_store_apply_range(s, map, 0, 4, (size_t)pg + 1, 0, &done), -EINVAL);
	BAD(ps_store_apply_range(s, map, 0, 4, (size_t)pg / 2, 0, &done), -EINVAL);
	BAD(ps_store_apply_range(s, map + 8, 0, 4, (size_t)pg, 0, &done), -EINVAL);
	BAD(ps_store_apply_range(s, map, UINT64_MAX, 2, (size_t)pg, 0, &done), -EINVAL);
	BAD(ps_store_apply_range(s, map, 1, UINT64_MAX, (size_t)pg, 0, &done), -EINVAL);
	BAD(ps_store_apply_range(s, map, 0, UINT64_MAX / 2, (size_t)pg, 0, &done), -EINVAL);
	BAD(ps_store_apply_range(s, map, 0, 4, (size_t)pg, 1u << 9, &done), -EINVAL);
	cr_assert_eq(done, 0);
	if (avail == 0) {
		errno = 0;
		BAD_NULL(ps_policy_from_addr(NULL), EFAULT);
		/* Node 100 does not exist here: refused, not narrowed. */
		if (numa_max_node() < 100)
			BAD(ps_policy_apply(p, map, (size_t)pg, 0), -EINVAL);
	}
	munmap(map, (size_t)pg * 4);
	numa_bitmask_free(small);
	ps_store_destroy(s);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
	report("numa");
}
