/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the concurrent workloads share (testutil_load.c,
 * testutil_load_companions.c, testutil_load_index.c): a load's failures, its
 * stop flag and deadline.  Private to them; the workloads' API is testutil.h.
 */
#ifndef POLSTORE_TESTS_TESTUTIL_LOAD_H
#define POLSTORE_TESTS_TESTUTIL_LOAD_H

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PS_TEST_NO_CRITERION
#include "testutil.h"

struct load {
	struct ps_test_run *run;
	pthread_mutex_t lock; /* @run->failures and @run->why */
	bool stop;     /* observers (readers, monitors) stop */
	uint64_t deadline;    /* workers stop (ps_test_run.duration_ns after the start) */
};

#define CHECK(ld, cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			load_fail((ld), __LINE__, #cond, __VA_ARGS__);                             \
	} while (0)

void load_init(struct load *ld, struct ps_test_run *run);
void load_start_clock(struct load *ld);
bool load_go_on(const struct load *ld, long i, uint64_t deadline);
bool load_stopped(struct load *ld);
void load_fail(struct load *ld, int line, const char *cond, const char *fmt, ...);
int load_done(struct load *ld);
void *xcalloc(size_t n, size_t size);

#endif /* POLSTORE_TESTS_TESTUTIL_LOAD_H */
