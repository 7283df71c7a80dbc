/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The css-walk companion scenario (scn_css_walk.c), as scn_companion.c names it. */
#ifndef POLSTORE_STRESS_SCN_CSS_WALK_H
#define POLSTORE_STRESS_SCN_CSS_WALK_H

#include <stdbool.h>

/* A variant name of css-walk. */
bool css_walk_variant_known(const char *name);

#endif /* POLSTORE_STRESS_SCN_CSS_WALK_H */
