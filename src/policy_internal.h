/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policies inside the library: the layout and hot paths are in polstore/static/policy.h. */
#ifndef POLSTORE_SRC_POLICY_INTERNAL_H
#define POLSTORE_SRC_POLICY_INTERNAL_H

#include <limits.h>

#include <polstore/policy.h>
#include <polstore/static/policy.h>

#define PS_BITS_PER_LONG (sizeof(unsigned long) * CHAR_BIT)
#define PS_NODEMASK_LONGS PS_NODEMASK_WORDS

#endif /* POLSTORE_SRC_POLICY_INTERNAL_H */
