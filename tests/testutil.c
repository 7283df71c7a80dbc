// SPDX-License-Identifier: LGPL-2.1-or-later
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum ps_sync ps_test_all_syncs[PS_SYNC_COUNT] = {
	PS_SYNC_SPIN, PS_SYNC_RWLOCK, PS_SYNC_SEQLOCK, PS_SYNC_RCU, PS_SYNC_RCU_QSBR,
};

double ps_test_scale(void)
{
	const char *s = getenv("POLSTORE_TEST_SCALE");
	double f;

	if (!s || !*s)
		return 1.0;
	if (!strcmp(s, "valgrind"))
		return 0.05;
	f = atof(s);
	return f > 0 ? f : 1.0;
}

long ps_test_iters(long normal)
{
	long n = (long)(normal * ps_test_scale());

	return n > 0 ? n : 1;
}

struct ps_policy *ps_test_bind(int node)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = { 0 };
	struct ps_policy *pol;

	mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
	pol = ps_policy_create(PS_MPOL_BIND, 0, mask, PS_MAX_NUMNODES);
	if (!pol) {
		perror("ps_policy_create");
		abort();
	}
	return pol;
}

static long ps_test_countdown = -1;

static void *ps_test_failing_alloc(size_t size, void *ctx)
{
	(void)ctx;
	if (ps_test_countdown == 0)
		return NULL;
	if (ps_test_countdown > 0)
		ps_test_countdown--;
	return malloc(size);
}

static void ps_test_plain_free(void *p, void *ctx)
{
	(void)ctx;
	free(p);
}

void ps_test_alloc_fail_after(long k)
{
	static const struct ps_alloc_ops ops = { ps_test_failing_alloc, ps_test_plain_free, NULL };

	ps_test_countdown = k;
	if (ps_set_alloc_ops(&ops)) {
		fprintf(stderr, "ps_set_alloc_ops refused the test allocator\n");
		abort();
	}
}

void ps_test_alloc_restore(void)
{
	ps_test_countdown = -1;
	ps_set_alloc_ops(NULL);
}
