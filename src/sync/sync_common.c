// SPDX-License-Identifier: LGPL-2.1-or-later
/* Out-of-line helpers every variant shares (store_internal.h). */
#include <errno.h>

#include "held.h"
#include "store_internal.h"

struct ps_policy *psi_lookup_miss(void)
{
	errno = 0; /* documented: a miss is told from a NULL store by errno */
	return NULL;
}

void psi_stray_read_unlock(const char *variant, const struct ps_store *s)
{
	psi_misuse("ps_store_read_unlock()", "%s store %p: this thread holds no read-side "
			"section of it (never locked, unlocked twice, or locked by another "
			"thread)", variant, (const void *)s);
}
