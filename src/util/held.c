// SPDX-License-Identifier: LGPL-2.1-or-later
/* The per-thread record of held.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "held.h"

__thread struct psi_held psi_held_tls __attribute__((tls_model("initial-exec")));

bool psi_held_find(const void *obj)
{
	unsigned i, n = psi_held_tls.n < PSI_HELD_MAX ? psi_held_tls.n : PSI_HELD_MAX;

	for (i = 0; i < n; i++)
		if (psi_held_tls.obj[i] == obj)
			return true;
	return false;
}

/*
 * A section closed out of order: take its entry out (the last recorded one
 * of @obj).  Without one, an unnamed section (deeper than PSI_HELD_MAX, or
 * moved up into a NULL entry) is taken to be it; without any, false.
 */
bool psi_held_drop(const void *obj)
{
	unsigned i, n = psi_held_tls.n < PSI_HELD_MAX ? psi_held_tls.n : PSI_HELD_MAX;

	for (i = n; i-- > 0;)
		if (psi_held_tls.obj[i] == obj)
			break;
	if (i == (unsigned)-1 && psi_held_tls.n <= PSI_HELD_MAX) {
		for (i = n; i-- > 0;)
			if (!psi_held_tls.obj[i])
				break;
		if (i == (unsigned)-1)
			return false;
	}
	if (i != (unsigned)-1) {
		for (; i + 1 < n; i++)
			psi_held_tls.obj[i] = psi_held_tls.obj[i + 1];
		if (psi_held_tls.n > PSI_HELD_MAX)
			psi_held_tls.obj[n - 1] = NULL; /* a deeper, unnamed section moves up */
	}
	psi_held_tls.n--;
	return true;
}

void psi_misuse(const char *call, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One write: the message stays whole beside other threads' output. */
	fprintf(stderr, "polstore: %s: %s\n", call, msg);
	abort();
}
