// SPDX-License-Identifier: LGPL-2.1-or-later
/* Companion scenarios (issue 4): placeholder. */
#include <string.h>

#include "stress.h"

bool stress_companion_variant_known(const char *name);
void stress_print_companions(void);

bool stress_companion_variant_known(const char *name)
{
	(void)name;
	return false;
}

void stress_print_companions(void)
{
}

void stress_run_memcg_charge(void)
{
}

void stress_run_mmap_commit(void)
{
}

void stress_run_css_walk(void)
{
}
