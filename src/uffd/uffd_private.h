/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the fault plane's files share: uffd.c (the plane), uffd_check.c
 * (misuse: destroyed planes, the wrong process, a resolver calling its own
 * plane) and uffd_register.c (what a region may cover).
 */
#ifndef POLSTORE_SRC_UFFD_PRIVATE_H
#define POLSTORE_SRC_UFFD_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * A plane's identity, checked at every call.  It lies past the first 16
 * bytes of the plane's block, which malloc() reuses for its own lists once
 * the block is freed, so a destroyed plane's tag stays readable until the
 * block is allocated again.
 */
struct uf_tag {
	uint32_t magic; /* UF_TAG_LIVE from creation to destroy, then UF_TAG_DEAD */
	bool checked;	/* created in the checking mode: its block outlives destroy */
	pid_t pid;	/* the process that created it */
};

#define UF_TAG_LIVE 0x0ff1ce11u
#define UF_TAG_DEAD 0xdeadfa17u

/* What a call may do beyond the parent's other threads (uf_enter() @how). */
#define UF_IN_CHILD 1U /* run in a child of fork() */
#define UF_RESOLVER 2U /* run on one of the plane's own resolver threads */

/*
 * The checking mode for planes created from now on: POLSTORE_CHECK=1 when
 * the library is loaded, or the build's default (POLSTORE_CHECKING).
 */
extern bool psi_uffd_checking;

/* A new plane's tag (the block is not shared yet). */
void uf_tag_init(struct uf_tag *t);

/*
 * Check a call (@call, e.g. "ps_uffd_stats()") on the plane @uf whose tag
 * is @t: misuse prints a message naming polstore, the call and the plane,
 * and aborts.  Return: 0, or -ESRCH in a child of fork() for a call that
 * does not allow it (@how) on a plane the checking mode does not cover.
 */
int uf_enter(const struct uf_tag *t, const void *uf, const char *call, unsigned how);

/* The end of @uf, whose tag is @t: its block is freed, or kept poisoned when checked. */
void uf_tag_bury(struct uf_tag *t, void *uf);

/* The calling thread is a resolver of @uf from now on (NULL: no longer). */
void uf_resolver_mark(const void *uf);

/*
 * Whether [@a, @a + @len) may be registered as one region (uffd_register.c):
 * 0; -EINVAL when part of it is not mapped, or when, unless @span, it
 * crosses from one mapping into another that /proc/self/maps tells apart.
 */
int uf_check_mappings(uintptr_t a, size_t len, bool span);

#endif /* POLSTORE_SRC_UFFD_PRIVATE_H */
