// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Allocation failures everywhere: for a random operation sequence on every
 * store variant, and for every allocating call of the companion modules,
 * fail the k-th allocation of the call for every k the call reaches (k = 0,
 * 1, ... until it succeeds).  Each failing call must return -ENOMEM (or NULL
 * with errno ENOMEM) and leave the state exactly as the model says it was;
 * the allocator counts live blocks, and every test ends with none (the
 * valgrind label checks the same from the outside).
 *
 * The kernel's tricky case is here: a set inside a range that covers it on
 * both sides (a split), where the out-of-memory path once leaked a policy
 * reference (shared_policy_replace(), the spare after its alloc_new retry).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- the failing allocator (testutil.h), fail one allocation at a time ---- */

static void inj_teardown(const char *what, long ops)
{
	fprintf(stderr, "alloc_failure: %-22s %5ld calls, %5ld allocation failures injected, "
			"%ld blocks live at the end\n",
			what, ops, ps_test_alloc_injected(), ps_test_alloc_live());
	cr_assert_eq(ps_test_alloc_live(), 0, "%s: %ld blocks leaked", what, ps_test_alloc_live());
	ps_test_alloc_restore();
}

/*
 * Run @call with the k-th allocation failing, k = 0, 1, ... until it
 * succeeds; after each failure @check (the state is as before) runs.
 * @call returns 0 on success, -ENOMEM on failure, anything else is wrong.
 */
#define FAIL_EACH_ALLOC(call, check)                                                               \
	do {                                                                                       \
		long _k;                                                                           \
		for (_k = 0;; _k++) {                                                              \
			int _ret;                                                                  \
			bool _reached;                                                             \
			ps_test_alloc_fail_once(_k);                                                               \
			_ret = (call);                                                             \
			_reached = ps_test_alloc_disarm();                                                   \
			if (_ret == 0) {                                                           \
				cr_assert(!_reached, "succeeded despite failure %ld", _k);         \
				break;                                                             \
			}                                                                          \
			cr_assert_eq(_ret, -ENOMEM, "failure %ld: got %d", _k, _ret);              \
			cr_assert(_reached);                                                       \
			check;                                                                     \
		}                                                                                  \
	} while (0)

/* ---- the store against a model ---- */

#define SPACE 64

#define NPOLS 6

/* The store holds exactly the model's ranges, and every policy the references they imply. */
static void expect_model(struct ps_store *s, const struct ps_model *m, struct ps_policy **pols,
		int npols)
{
	char why[160];

	cr_assert(ps_model_matches_refs(s, m, pols, npols, SPACE, why, sizeof(why)), "%s: %s",
			ps_sync_name(ps_store_sync_kind(s)), why);
}

/*
 * CREATED(out, call): a constructor call for FAIL_EACH_ALLOC: its result
 * goes to *@out; 0, or -ENOMEM when it returned NULL (with errno ENOMEM).
 */
static int created(const void *obj)
{
	if (obj)
		return 0;
	cr_assert_eq(errno, ENOMEM);
	return -ENOMEM;
}

#define CREATED(out, call) (errno = 0, created(*(out) = (call)))

/* An INTERLEAVE policy on @node. */
static struct ps_policy *policy_on(int node)
{
	unsigned long mask = 1UL << node;

	return ps_policy_create(PS_MPOL_INTERLEAVE, 0, &mask, 64);
}

/* Install the allocator, then make a store and NPOLS policies (and NULL), each failing in turn. */
static struct ps_store *store_setup(enum ps_sync sync, struct ps_policy **pols)
{
	struct ps_store *s = NULL;
	int j;

	ps_test_alloc_install();
	FAIL_EACH_ALLOC(CREATED(&s, ps_store_create(sync)), (void)0);
	for (j = 0; j < NPOLS; j++)
		FAIL_EACH_ALLOC(CREATED(&pols[j], policy_on(j)), (void)0);
	pols[NPOLS] = NULL; /* removal */
	return s;
}

/* Check the end state, free everything: no block may be left. */
static void store_teardown(struct ps_store *s, const struct ps_model *m, struct ps_policy **pols,
		const char *test, long calls)
{
	char what[64];
	int j;

	expect_model(s, m, pols, NPOLS);
	snprintf(what, sizeof(what), "%s %s", test, ps_sync_name(ps_store_sync_kind(s)));
	ps_store_destroy(s);
	for (j = 0; j < NPOLS; j++) {
		cr_assert_eq(ps_policy_refcount(pols[j]), 1);
		ps_policy_put(pols[j]);
	}
	inj_teardown(what, calls);
}

/*
 * A random op's range from the bits of @r: [a, b) inside [lo, lo + span),
 * or one time in four strictly inside a range the model holds (a split)
 * when that range is 3 or longer.
 */
static void random_range(const struct ps_model *m, uint64_t r, uint64_t lo, uint64_t span,
		uint64_t *a, uint64_t *b)
{
	uint64_t x = lo + r % span, y = lo + (r >> 8) % span;

	if ((r >> 24) % 4 == 0 && m->n) {
		const struct ps_model_range *c = &m->r[(r >> 32) % (uint64_t)m->n];

		if (c->end - c->start >= 3) {
			x = c->start + 1;
			y = c->end - 1;
		}
	}
	if (x == y)
		y = x + 1;
	*a = x < y ? x : y;
	*b = x < y ? y : x;
}

/*
 * @ops on @s, one ps_store_set() each (@many: one ps_store_set_many() for
 * them all), every allocation of each call failing in turn with the store
 * held to the model after each failure; then on the model.
 */
static void set_failing(struct ps_store *s, struct ps_model *m, struct ps_policy **pols,
		const struct ps_set_op *ops, size_t n, bool many)
{
	size_t k;

	if (many)
		FAIL_EACH_ALLOC(ps_store_set_many(s, ops, n), expect_model(s, m, pols, NPOLS));
	for (k = 0; k < n; k++) {
		if (!many)
			FAIL_EACH_ALLOC(ps_store_set(s, ops[k].start, ops[k].end, ops[k].pol),
					expect_model(s, m, pols, NPOLS));
		cr_assert_eq(ps_model_set(m, ops[k].start, ops[k].end, ops[k].pol), 0);
	}
}

VARIANT_TEST(alloc_failure, store)
{
	struct ps_policy *pols[NPOLS + 1];
	struct ps_model m = { .n = 0 };
	struct ps_store *s = store_setup(*sync, pols);
	/* The split case first: [0, 64) covers [20, 30). */
	struct ps_set_op split[] = { { 0, SPACE, pols[0] }, { 20, 30, pols[1] } };
	uint64_t seed = 0xA11 + (uint64_t)*sync;
	long ops = 0, i, nops = ps_test_iters(400);

	set_failing(s, &m, pols, split, 2, false);
	expect_model(s, &m, pols, NPOLS);
	cr_assert_eq(m.n, 3);
	for (i = 0; i < nops; i++) {
		uint64_t r = ps_test_rand(&seed);
		struct ps_set_op op = { .pol = pols[(r >> 16) % (NPOLS + 1)] };

		random_range(&m, r, 0, SPACE, &op.start, &op.end);
		set_failing(s, &m, pols, &op, 1, false);
		ops++;
		if (i % 16 == 0)
			expect_model(s, &m, pols, NPOLS);
	}
	store_teardown(s, &m, pols, "store", ops + NPOLS + 3);
}

/*
 * ps_store_set_many(): every allocation of a batch fails once in turn, and
 * the store must be as before the call, with every reference count (all or
 * nothing: the whole batch is allocated for before any op changes the
 * tree).  Batches of 1..6 ops, overlapping each other, inside a 32-page
 * stretch (so one call never retires the 64 ranges that make a SEQLOCK
 * batch, whose header is allocated after the change: see below), with the
 * split case first.
 */
VARIANT_TEST(alloc_failure, store_set_many)
{
	struct ps_policy *pols[NPOLS + 1];
	struct ps_model m = { .n = 0 };
	struct ps_store *s = store_setup(*sync, pols);
	uint64_t seed = 0xBA7C4 + (uint64_t)*sync;
	long calls = 0, i, nbatches = ps_test_iters(150);

	{
		/* Set a range, split it twice, in one batch. */
		struct ps_set_op split[] = { { 0, SPACE, pols[0] }, { 20, 30, pols[1] },
			{ 40, 44, pols[2] } };

		set_failing(s, &m, pols, split, 3, true);
		expect_model(s, &m, pols, NPOLS);
		cr_assert_eq(m.n, 5);
		calls++;
	}
	for (i = 0; i < nbatches; i++, calls++) {
		struct ps_set_op ops[6];
		uint64_t lo = ps_test_rand(&seed) % (SPACE - 32);
		size_t n = 1 + ps_test_rand(&seed) % 6, k;

		for (k = 0; k < n; k++) {
			uint64_t r = ps_test_rand(&seed), a, b;

			random_range(&m, r, lo, 32, &a, &b);
			ops[k] = (struct ps_set_op){ a, b, pols[(r >> 16) % (NPOLS + 1)] };
		}
		set_failing(s, &m, pols, ops, n, true);
		if (i % 8 == 0)
			expect_model(s, &m, pols, NPOLS);
	}
	store_teardown(s, &m, pols, "set_many", calls + NPOLS + 1);
}

/*
 * SEQLOCK stores retire removed ranges in batches of 64 (src/locks/rcu_reclaim.c);
 * the batch's own allocation comes after the tree changed, so when it fails the
 * set must still succeed: it waits for a grace period and frees the batch
 * itself.  expect_model() flushes batches (ps_store_synchronize()), so here
 * the sets run back to back, each one retiring the range the last one made,
 * and every allocation of every set fails once in turn.
 */
Test(alloc_failure, seqlock_retire_batch)
{
	struct ps_policy *pols[2];
	struct ps_store *s = NULL;
	struct ps_model m = { .n = 0 };
	long i, k, fallbacks = 0, nsets = 3 * 64 + 8;
	char what[64];

	ps_test_alloc_install();
	s = ps_store_create(PS_SYNC_SEQLOCK);
	cr_assert_not_null(s);
	for (i = 0; i < 2; i++)
		cr_assert_eq(CREATED(&pols[i], policy_on((int)i)), 0);
	for (i = 0; i < nsets; i++) {
		struct ps_policy *pol = pols[i & 1], *got;

		for (k = 0;; k++) {
			int ret;
			bool reached;

			ps_test_alloc_fail_once(k);
			ret = ps_store_set(s, 0, SPACE, pol);
			reached = ps_test_alloc_disarm();
			if (ret == 0) {
				/* Only the batch may fail without failing the set. */
				fallbacks += reached;
				break;
			}
			cr_assert_eq(ret, -ENOMEM, "set %ld, failure %ld: got %d", i, k, ret);
			cr_assert(reached);
			/* Unchanged, checked without flushing the batch being collected. */
			got = ps_store_lookup(s, SPACE / 2);
			cr_assert_eq(got, i ? pols[(i - 1) & 1] : NULL);
			ps_policy_put(got);
			cr_assert_eq(ps_store_count(s), i ? 1u : 0u);
		}
		cr_assert_eq(ps_model_set(&m, 0, SPACE, pol), 0);
	}
	cr_assert_geq(fallbacks, 3, "the batch allocation failed %ld times", fallbacks);
	expect_model(s, &m, pols, 2);
	ps_store_destroy(s);
	for (i = 0; i < 2; i++) {
		cr_assert_eq(ps_policy_refcount(pols[i]), 1);
		ps_policy_put(pols[i]);
	}
	snprintf(what, sizeof(what), "seqlock retire batch");
	inj_teardown(what, nsets);
}

/* ---- companion modules ---- */

Test(alloc_failure, charge)
{
	struct ps_charge *root, *kids[PS_CHARGE_KIND_COUNT];
	long calls = 0;
	int k;

	ps_test_alloc_install();
	FAIL_EACH_ALLOC(CREATED(&root, ps_charge_create(PS_CHARGE_SPIN, NULL, 1000)), (void)0);
	calls++;
	for (k = 0; k < PS_CHARGE_KIND_COUNT; k++, calls++) {
		/* A failed child must not stay linked under its parent: destroy would say EBUSY. */
		FAIL_EACH_ALLOC(CREATED(&kids[k], ps_charge_create((enum ps_charge_kind)k, root, 1000)),
				(void)0);
		cr_assert_eq(ps_charge_try(kids[k], 10, NULL), 0);
	}
	for (k = 0; k < PS_CHARGE_KIND_COUNT; k++, calls++) {
		long batch = ps_charge_stock_batch(kids[k]);

		/* Enabling a stock allocates (except when there is one already). */
		FAIL_EACH_ALLOC(ps_charge_set_stock(kids[k], 8),
				cr_assert_eq(ps_charge_stock_batch(kids[k]), batch));
		cr_assert_eq(ps_charge_stock_batch(kids[k]), 8);
		cr_assert_eq(ps_charge_uncharge(kids[k], 10), 0);
		cr_assert_eq(ps_charge_drain_stock(kids[k]), 0);
		cr_assert_eq(ps_charge_read(kids[k], PS_CHARGE_USAGE), 0);
	}
	for (k = 0; k < PS_CHARGE_KIND_COUNT; k++)
		cr_assert_eq(ps_charge_destroy(kids[k]), 0);
	cr_assert_eq(ps_charge_destroy(root), 0);
	inj_teardown("charge", calls);
}

Test(alloc_failure, pcounter_and_commit)
{
	struct ps_pcounter *pc;
	struct ps_commit *cm;
	int mode;

	ps_test_alloc_install();
	FAIL_EACH_ALLOC(CREATED(&pc, ps_pcounter_create(5, 16)), (void)0);
	cr_assert_eq(ps_pcounter_add(pc, 3), 0);
	cr_assert_eq(ps_pcounter_sum(pc), 8);
	ps_pcounter_destroy(pc);
	for (mode = 0; mode < PS_OVERCOMMIT_COUNT; mode++) {
		FAIL_EACH_ALLOC(CREATED(&cm, ps_commit_create((enum ps_overcommit)mode, 1 << 20, 2)),
				(void)0);
		cr_assert_eq(ps_commit_charge(cm, 10), 0);
		cr_assert_eq(ps_commit_committed(cm, true), 10);
		ps_commit_destroy(cm);
	}
	inj_teardown("pcounter/commit", 1 + PS_OVERCOMMIT_COUNT);
}

#define IDS 64

static int freed_objects;

static void count_free(void *p)
{
	(void)p;
	freed_objects++;
}

static void expect_ids(struct ps_idmap *map, const int *ids, int n, char *objs)
{
	int i;

	cr_assert_eq(ps_idmap_count(map), n);
	ps_idmap_read_lock(map);
	for (i = 0; i < n; i++)
		cr_assert_eq(ps_idmap_find(map, ids[i]), &objs[i], "id %d", ids[i]);
	ps_idmap_read_unlock(map);
}

IDMAP_TEST(alloc_failure, idmap)
{
	static char objs[IDS];
	struct ps_idmap *map;
	uint64_t seed = 77 + (uint64_t)*sync;
	int ids[IDS], n = 0, i;
	char what[64];

	ps_test_alloc_install();
	FAIL_EACH_ALLOC(CREATED(&map, ps_idmap_create(*sync)), (void)0);
	for (i = 0; i < IDS; i++) {
		/* Sparse ids far apart: new levels and new leaves both allocate. */
		int min = (int)(ps_test_rand(&seed) % 4 == 0 ? ps_test_rand(&seed) % (1u << 30) :
								   ps_test_rand(&seed) % 4096);

		FAIL_EACH_ALLOC(ps_idmap_alloc(map, &objs[n], min, PS_IDMAP_ID_MAX, &ids[n]),
				expect_ids(map, ids, n, objs));
		cr_assert_geq(ids[n], min);
		n++;
	}
	expect_ids(map, ids, n, objs);
	/* Deferred frees: a queue that cannot be allocated frees at once after a grace period. */
	freed_objects = 0;
	for (i = 0; i < n; i++) {
		int before = freed_objects;

		cr_assert_eq(ps_idmap_remove(map, ids[i], NULL), 0);
		ps_test_alloc_fail_once(0);
		cr_assert_eq(ps_idmap_free_rcu(map, &objs[i], count_free), 0);
		if (ps_test_alloc_disarm())
			cr_assert_eq(freed_objects, before + 1, "unqueued object freed at once");
	}
	ps_idmap_barrier(map);
	cr_assert_eq(freed_objects, n);
	cr_assert_eq(ps_idmap_count(map), 0);
	ps_idmap_destroy(map);
	snprintf(what, sizeof(what), "idmap %s", ps_idmap_sync_name(*sync));
	inj_teardown(what, 2L * IDS + 1);
}
