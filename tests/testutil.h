/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by the Criterion suites. */
#ifndef POLSTORE_TESTUTIL_H
#define POLSTORE_TESTUTIL_H

#include <stdbool.h>
#include <stdint.h>

#include <polstore/polstore.h>

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

/* xorshift64*: deterministic per-thread random numbers. */
static inline uint64_t ps_test_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

#endif /* POLSTORE_TESTUTIL_H */
