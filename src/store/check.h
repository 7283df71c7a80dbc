/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The checking mode (polstore/store.h, "Misuse"): turned on by the
 * environment variable POLSTORE_CHECK=1 when the library is loaded, or by
 * default in a build configured with -DPOLSTORE_CHECKING=ON
 * (POLSTORE_CHECK=0 turns that off), and covering the stores created
 * while it is on.  Such a store runs its calls through the wrappers of
 * check.c, which record the read-side sections each thread holds and the
 * calls it waits in, and its layout tag is one no inlined reader accepts,
 * so every call reaches them.  Stores created with it off run exactly as
 * before: nothing here is on their paths.
 */
#ifndef POLSTORE_SRC_CHECK_H
#define POLSTORE_SRC_CHECK_H

#include <stdbool.h>


struct ps_store;

/* On: stores created now are checked.  Written before threads exist (constructor) or by tests. */
extern bool psi_checking;

/*
 * Put @s (just created, not yet shared) under the checks.  Return: 0, or
 * -ENOMEM (@s unchanged).
 */
int psi_check_store(struct ps_store *s);

/* A call on a destroyed checked store (@call names it): a message, and abort(). */
__attribute__((noreturn, cold)) void psi_check_dead(const struct ps_store *s, const char *call);

#endif /* POLSTORE_SRC_CHECK_H */
