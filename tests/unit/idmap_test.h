/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the id map's suite share (test_idmap.c): the includes
 * and mk(), which makes a map of a variant.
 */
#ifndef POLSTORE_TESTS_IDMAP_TEST_H
#define POLSTORE_TESTS_IDMAP_TEST_H

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

struct ps_idmap *mk(enum ps_idmap_sync sync);

#endif /* POLSTORE_TESTS_IDMAP_TEST_H */
