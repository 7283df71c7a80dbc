/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a destroy and ps_store_check() call of counts.c (the fault plane
 * counts its faults with ps_store_count_access()).
 */
#ifndef POLSTORE_SRC_COUNTS_INTERNAL_H
#define POLSTORE_SRC_COUNTS_INTERNAL_H

#include <polstore/store.h>

/* Before a destroy frees @s: free its counts. */
void psi_counts_end(struct ps_store *s);

/*
 * ps_store_check(), for the calling thread: when its lookup cache entry
 * for @s counts accesses of a range, the slot it counts into is that
 * range's in the thread's own table.  Takes the counts' lock.  Return: 0,
 * or -EUCLEAN with *@why.
 */
int psi_counts_check(struct ps_store *s, const char **why);

#endif /* POLSTORE_SRC_COUNTS_INTERNAL_H */
