/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * xorshift64*: the one pseudo-random generator of polstore's programs (the
 * stress binary, the linearizability oracle, the tests).  Fast, 64 bits of
 * state, good enough to pick pages and operations; never for anything that
 * must be unpredictable.  @state must not be 0.
 */
#ifndef POLSTORE_XORSHIFT_H
#define POLSTORE_XORSHIFT_H

#include <stdint.h>

static inline uint64_t ps_xorshift64s(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

#endif /* POLSTORE_XORSHIFT_H */
