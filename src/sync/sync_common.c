// SPDX-License-Identifier: LGPL-2.1-or-later
/* Out-of-line helpers every variant shares (store_internal.h). */
#include <errno.h>

#include "store_internal.h"

struct ps_policy *psi_lookup_miss(void)
{
	errno = 0; /* documented: a miss is told from a NULL store by errno */
	return NULL;
}
