/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whether the library's exported read calls (store.c's lookups, counts.c's
 * counted lookup) run the inline fast path of polstore/static/lookup.h,
 * what a POLSTORE_INLINE program compiles into itself, and fall back to
 * the variant's read path for the rest.  Builds for the thread checkers
 * (POLSTORE_ANNOTATE) always take the variant's path: it carries the
 * annotations that tell them about grace periods and the SEQLOCK's
 * speculative walk.
 */
#ifndef POLSTORE_SRC_READ_INLINE_H
#define POLSTORE_SRC_READ_INLINE_H

#ifdef POLSTORE_ANNOTATE
#define PSI_READ_INLINE 0
#else
#define PSI_READ_INLINE 1
#endif

#endif /* POLSTORE_SRC_READ_INLINE_H */
