/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The lock-based sections the calling thread holds: SPIN and RWLOCK read
 * sections and foreach walks, SEQLOCK foreach walks (which hold its writer
 * lock), SPIN and RWLOCK id map sections.  Each is recorded by the object
 * (a store, a map) while it is open, so that a call that would take that
 * object's lock again, and wait for itself, returns -EDEADLK instead.
 *
 * Thread-local, written only by its thread, off every lock-free read
 * path: recording costs a store and an increment, and a check one
 * thread-local load and one predictable branch while the thread holds
 * nothing.  PSI_HELD_MAX sections are recorded; deeper ones are counted
 * but not named (a call into one of those is not caught, and an unlock
 * with one of those open is taken to close it).
 */
#ifndef POLSTORE_SRC_HELD_H
#define POLSTORE_SRC_HELD_H

#include <stdbool.h>

#include "compiler.h"

#define PSI_HELD_MAX 8

struct psi_held {
	unsigned n; /* sections open; the first PSI_HELD_MAX are in @obj */
	const void *obj[PSI_HELD_MAX];
};

extern __thread struct psi_held psi_held_tls __attribute__((tls_model("initial-exec")));

bool psi_held_find(const void *obj);
bool psi_held_drop(const void *obj);

/*
 * A misuse that cannot return an error (a void call that would wait for
 * itself for ever): print "polstore: @call: @fmt..." on stderr and abort().
 */
__attribute__((noreturn, cold, format(printf, 2, 3))) void psi_misuse(const char *call,
		const char *fmt, ...);

/* A section of @obj is open on this thread: record it. */
static inline void psi_held_push(const void *obj)
{
	unsigned n = psi_held_tls.n;

	if (psi_likely(n < PSI_HELD_MAX))
		psi_held_tls.obj[n] = obj;
	psi_held_tls.n = n + 1;
}

/*
 * The section of @obj that psi_held_push() recorded is closed.  False
 * when the thread holds none of @obj (a stray unlock: nothing changed);
 * an unnamed deeper section is taken to be it.
 */
static inline bool psi_held_pop(const void *obj)
{
	unsigned n = psi_held_tls.n;

	if (psi_likely(n && n <= PSI_HELD_MAX && psi_held_tls.obj[n - 1] == obj)) {
		psi_held_tls.n = n - 1; /* the usual case: sections close in the order they opened */
		return true;
	}
	return psi_held_drop(obj);
}

/* True when this thread holds a section of @obj (so its lock, or a share of it). */
static inline bool psi_held(const void *obj)
{
	return psi_unlikely(psi_held_tls.n) && psi_held_find(obj);
}

#endif /* POLSTORE_SRC_HELD_H */
