/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the read index's suite share (test_index.c): the
 * includes, the sorted node sets, the harness (an index and an in-place
 * range tree given the same sets) and its checks.
 */
#ifndef POLSTORE_TESTS_INDEX_TEST_H
#define POLSTORE_TESTS_INDEX_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "ixpool.h"
#include "policy_internal.h"
#include "rangeindex.h"
#include "rangeindex_node.h"
#include "inline_shim.h"
#include "rangetree.h"
#include "testutil.h"

struct nodeset {
	const void **v;
	size_t n, cap;
};

struct rv {
	struct ps_model_range *v;
	size_t n, cap;
	size_t limit; /* 0: none; else the walk is stopped (7) when it holds this many */
};

#define NBIND 8 /* BIND 0..5, two INTERLEAVEs (hint: the policy) */
#define POL_DEFAULT NBIND
#define NPOLS (NBIND + 1)

struct op {
	uint64_t s, e;
	struct ps_policy *pol;
};

struct hx {
	struct ps_ix_root root;
	struct psi_ix_pool *pool; /* NULL: every node from the allocator */
	struct ps_rtree tree;
	ptrdiff_t bytes; /* the index's bytes as its transactions counted them */
	struct ps_policy *pol[NPOLS];
	uint64_t seed;
	uint64_t space; /* most ranges lie in [0, space) */
	uint64_t avg;	/* and a small set is 1 .. 2 avg long */
	bool deep;	/* node-level checks of every update */
	struct rv a, b; /* scratch */
	/* What the updates did. */
	long updates, slot_pubs, root_pubs, inplace, noop_copies, joins_seen;
	int max_height;
};

void ns_collect(struct nodeset *s, const struct ps_ix_node *h);
void ns_sort(struct nodeset *s);
void ns_free(struct nodeset *s);
int rv_add(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg);
void rv_reset(struct rv *r, size_t limit);
void rv_free(struct rv *r);
void rv_expect_eq(const struct rv *a, const struct rv *b, const char *what);
struct ps_policy *interleave(int n0, int n1);
void hx_init(struct hx *h, uint64_t seed);
void hx_fini(struct hx *h);
void ix_walk(const struct ps_ix_node *n, struct rv *r);
void hx_update(struct hx *h, const struct op *ops, int n, bool at_root);
void hx_check(struct hx *h);
void hx_verify(struct hx *h, const struct op *ops, int n);
struct ps_policy *rnd_pol(struct hx *h);
struct op rnd_op(struct hx *h, bool grow);
void hx_grow(struct hx *h, size_t target);
void hx_churn(struct hx *h, long nops, size_t target);
void hx_report(struct hx *h, const char *what);

#endif /* POLSTORE_TESTS_INDEX_TEST_H */
