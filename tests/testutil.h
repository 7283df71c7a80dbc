/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by the Criterion suites. */
#ifndef POLSTORE_TESTUTIL_H
#define POLSTORE_TESTUTIL_H

#include <stdbool.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <polstore/polstore.h>

#include "xorshift.h" /* stress/xorshift.h */

/*
 * PS_PARAM_TEST(type, var, values, count, suite, name): a Criterion test run
 * once per element of @values (an array of @count @type); the body sees
 * `type *var`.  Each module wraps it (every store variant, every charge
 * kind, ...) so a test is written once for all its variants.
 */
#define PS_PARAM_TEST(type, var, values, count, suite, name, ...)                                  \
	ParameterizedTestParameters(suite, name)                                                   \
	{                                                                                          \
		return cr_make_param_array(type, values, count);                                   \
	}                                                                                          \
	ParameterizedTest(type *var, suite, name, ##__VA_ARGS__)

/* A test run for every store variant; the body sees `enum ps_sync *sync`. */
#define VARIANT_TEST(suite, name)                                                                  \
	PS_PARAM_TEST(enum ps_sync, sync, ps_test_all_syncs, PS_SYNC_COUNT, suite, name)

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

/* Every store variant, for ParameterizedTestParameters(). */
extern enum ps_sync ps_test_all_syncs[PS_SYNC_COUNT];

/*
 * Scale iteration counts: 1.0 normally, smaller under valgrind
 * (POLSTORE_TEST_SCALE=valgrind) or as POLSTORE_TEST_SCALE=<factor> says.
 */
double ps_test_scale(void);
long ps_test_iters(long normal);

/* A BIND policy on node @node (0 <= node < PS_MAX_NUMNODES); aborts on failure. */
struct ps_policy *ps_test_bind(int node);

/*
 * Allocation-failure injection through ps_set_alloc_ops(): after
 * ps_test_alloc_fail_after(k), k allocations succeed and every later one
 * fails until the next call; k < 0 never fails.  The first call installs the
 * failing allocator (malloc/free underneath); ps_test_alloc_restore() puts
 * polstore back on malloc/free.
 */
void ps_test_alloc_fail_after(long k);
void ps_test_alloc_restore(void);

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
