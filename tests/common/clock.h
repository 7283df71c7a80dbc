/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The clock of polstore's programs (the stress binary, the tests): a clock's
 * time in nanoseconds.  CLOCK_MONOTONIC for intervals and deadlines,
 * CLOCK_THREAD_CPUTIME_ID for the CPU a thread got.
 */
#ifndef POLSTORE_CLOCK_H
#define POLSTORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t ps_clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* POLSTORE_CLOCK_H */
