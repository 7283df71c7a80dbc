/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a destroy calls of counts.c (the fault plane counts its faults
 * with ps_store_count_access()).
 */
#ifndef POLSTORE_SRC_COUNTS_INTERNAL_H
#define POLSTORE_SRC_COUNTS_INTERNAL_H

#include <polstore/store.h>

/* Before a destroy frees @s: free its counts. */
void psi_counts_end(struct ps_store *s);

#endif /* POLSTORE_SRC_COUNTS_INTERNAL_H */
