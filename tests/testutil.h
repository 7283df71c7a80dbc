/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one test-support header: what the Criterion suites, the fuzz harness
 * (fuzz/) and the thread-checker driver (tsan_stress.c) share beside the
 * public API.  testutil.c implements it without Criterion; a program that
 * does not link Criterion defines PS_TEST_NO_CRITERION before including it
 * and gets everything but the test macros.
 *
 *   - PS_PARAM_TEST and its wrappers: one test body per variant;
 *   - the model of ps_store_set() (shared_policy_replace() on a sorted
 *     array of ranges) and the check of a store against it;
 *   - the failing, counting allocator (through ps_set_alloc_ops());
 *   - clocks, iteration scaling, random numbers, a BIND policy;
 *   - the thread-checker annotations of src/annotate.h, for the tests' own
 *     atomics-only flags (PS_ANNOTATE_BENIGN_RACE_SIZED).
 *
 * docs/design.md: tests use the public API and this header (the white-box
 * suites test_rbtree.c and test_cow.c are the declared exceptions).
 */
#ifndef POLSTORE_TESTUTIL_H
#define POLSTORE_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <stdio.h>
#include <stdlib.h>

#ifndef PS_TEST_NO_CRITERION
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#endif

#include <polstore/polstore.h>

#include "annotate.h" /* src/annotate.h */
#include "clock.h" /* stress/clock.h */
#include "xorshift.h" /* stress/xorshift.h */

#define PS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Every variant of each module, for the test macros below and for loops. */
extern enum ps_sync ps_test_all_syncs[PS_SYNC_COUNT];
extern enum ps_idmap_sync ps_test_all_idmap_syncs[PS_IDMAP_SYNC_COUNT];
extern enum ps_charge_kind ps_test_all_charge_kinds[PS_CHARGE_KIND_COUNT];
extern enum ps_overcommit ps_test_all_overcommits[PS_OVERCOMMIT_COUNT];

#ifndef PS_TEST_NO_CRITERION
/*
 * PS_PARAM_TEST(type, var, values, count, suite, name, options...): a
 * Criterion test run once per element of @values (an array of @count
 * @type); the body sees `type *var`; the options are Criterion's
 * (.timeout = 60, .disabled = true, ...).  Every parameterised test goes
 * through it, mostly by one of the wrappers below, so a test is written
 * once for all its variants.
 */
#define PS_PARAM_TEST(type, var, values, count, suite, name, ...)                                  \
	ParameterizedTestParameters(suite, name)                                                   \
	{                                                                                          \
		return cr_make_param_array(type, values, count);                                   \
	}                                                                                          \
	ParameterizedTest(type *var, suite, name, ##__VA_ARGS__)

/* A test for each element of a static array @values; the body sees `type *var`. */
#define PS_ARRAY_TEST(type, var, values, suite, name, ...)                                         \
	PS_PARAM_TEST(type, var, values, PS_ARRAY_SIZE(values), suite, name, ##__VA_ARGS__)

/* A test run for every store variant; the body sees `enum ps_sync *sync`. */
#define VARIANT_TEST(suite, name, ...)                                                             \
	PS_ARRAY_TEST(enum ps_sync, sync, ps_test_all_syncs, suite, name, ##__VA_ARGS__)

/* A test for the store variants in the array @syncs; the body sees `enum ps_sync *sync`. */
#define SYNCS_TEST(syncs, suite, name, ...)                                                        \
	PS_ARRAY_TEST(enum ps_sync, sync, syncs, suite, name, ##__VA_ARGS__)

/* Every id map variant; the body sees `enum ps_idmap_sync *sync`. */
#define IDMAP_TEST(suite, name, ...)                                                               \
	PS_ARRAY_TEST(enum ps_idmap_sync, sync, ps_test_all_idmap_syncs, suite, name, ##__VA_ARGS__)

/* Every charge kind; the body sees `enum ps_charge_kind *kind`. */
#define KIND_TEST(suite, name, ...)                                                                \
	PS_ARRAY_TEST(enum ps_charge_kind, kind, ps_test_all_charge_kinds, suite, name,            \
			##__VA_ARGS__)

/* Every overcommit mode; the body sees `enum ps_overcommit *mode`. */
#define MODE_TEST(suite, name, ...)                                                                \
	PS_ARRAY_TEST(enum ps_overcommit, mode, ps_test_all_overcommits, suite, name, ##__VA_ARGS__)

/*
 * EXPECT_NAMES(name_fn, from_name_fn, count, value, name, bogus): a
 * module's name table (src/names.h): every value below @count round-trips,
 * @value is called @name, @count has no name, @bogus and NULL are -EINVAL.
 */
#define EXPECT_NAMES(name_fn, from_name_fn, count, value, name, bogus)                             \
	do {                                                                                       \
		int v_;                                                                            \
		for (v_ = 0; v_ < (count); v_++)                                                   \
			cr_expect_eq(from_name_fn(name_fn(v_)), v_);                               \
		cr_expect_str_eq(name_fn(value), name);                                            \
		cr_expect_null(name_fn(count));                                                    \
		cr_expect_eq(from_name_fn(bogus), -EINVAL);                                        \
		cr_expect_eq(from_name_fn(NULL), -EINVAL);                                         \
	} while (0)
#endif /* !PS_TEST_NO_CRITERION */

/*
 * Checks inside worker threads, where Criterion asserts do not belong:
 * print what failed and abort, which fails the test as a crash.
 */
#define TCHECK(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/*
 * Scale iteration counts: 1.0 normally, smaller under valgrind
 * (POLSTORE_TEST_SCALE=valgrind) or as POLSTORE_TEST_SCALE=<factor> says.
 */
double ps_test_scale(void);
long ps_test_iters(long normal);

/* A BIND policy on node @node (0 <= node < PS_MAX_NUMNODES); aborts on failure. */
struct ps_policy *ps_test_bind(int node);

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t ps_test_now_ns(void)
{
	return ps_clock_ns(CLOCK_MONOTONIC);
}

/*
 * The failing allocator: malloc/free underneath, installed with
 * ps_set_alloc_ops(), counting allocation calls, the blocks live since it
 * was installed and the failures it returned.  Counts are atomic: reclaim
 * threads allocate and free concurrently.
 *
 * ps_test_alloc_install() installs it, zeroes its counts, fails nothing.
 * ps_test_alloc_fail_after(k): k allocations from now succeed and every
 * later one fails until the next arming; k < 0 fails none.  Installs the
 * allocator (counts kept) when it is not.
 * ps_test_alloc_fail_once(k): only the k-th allocation from now (k = 0: the
 * next one) fails.
 * ps_test_alloc_disarm(): fail none from now on; true when an armed
 * failure was reached.
 * ps_test_alloc_restore(): polstore back on its own malloc/free.
 */
void ps_test_alloc_install(void);
void ps_test_alloc_fail_after(long k);
void ps_test_alloc_fail_once(long k);
bool ps_test_alloc_disarm(void);
long ps_test_alloc_live(void);
long ps_test_alloc_injected(void);
void ps_test_alloc_restore(void);

/*
 * The model of ps_store_set(): the kernel's shared_policy_replace() on a
 * sorted array of disjoint ranges.  A set trims, splits or removes the
 * ranges it overlaps and inserts [start, end) -> @pol unless @pol is NULL
 * or DEFAULT (a removal); ranges are never merged, not even equal
 * neighbours.  Indices may be anywhere in [0, UINT64_MAX].
 */
#define PS_MODEL_MAX 256

struct ps_model_range {
	uint64_t start, end;
	struct ps_policy *pol;
};

struct ps_model {
	int n;
	struct ps_model_range r[PS_MODEL_MAX]; /* ascending */
};

static inline void ps_model_init(struct ps_model *m)
{
	m->n = 0;
}

/* Apply a set: 0, or -ENOSPC (the model unchanged) when the result would not fit. */
int ps_model_set(struct ps_model *m, uint64_t start, uint64_t end, struct ps_policy *pol);
/* The policy at @idx, NULL in a hole. */
struct ps_policy *ps_model_at(const struct ps_model *m, uint64_t idx);
/* How many ranges hold @pol (the references the store holds on it). */
long ps_model_refs(const struct ps_model *m, const struct ps_policy *pol);
/*
 * @s holds exactly the model's ranges: ps_store_check() passes, a
 * ps_store_foreach() walk meets the model's ranges in order and
 * ps_store_count() agrees.  True, or false with the first difference in
 * @why (@len bytes).
 */
bool ps_model_matches(struct ps_store *s, const struct ps_model *m, char *why, size_t len);

/* xorshift64*: deterministic per-thread random numbers. */
static inline uint64_t ps_test_rand(uint64_t *state)
{
	return ps_xorshift64s(state);
}

/*
 * A random non-empty sub-range [*a, *b) of [base, base + size): false (and
 * nothing written) when the two random points coincide, so callers skip
 * that round.
 */
static inline bool ps_test_rand_range(uint64_t *state, uint64_t base, uint64_t size, uint64_t *a,
		uint64_t *b)
{
	uint64_t x = ps_test_rand(state) % size, y = ps_test_rand(state) % size;

	if (x == y)
		return false;
	*a = base + (x < y ? x : y);
	*b = base + (x < y ? y : x);
	return true;
}

#endif /* POLSTORE_TESTUTIL_H */
