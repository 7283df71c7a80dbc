/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A small number for the calling thread, handed out 0, 1, 2, ... in the
 * order threads first ask, and fixed for the thread's life.  Per-thread slot
 * arrays index with `psi_thread_index() % NSLOTS`, so the first NSLOTS
 * threads never share a slot (a hash of the thread id could collide).
 * Exported: the inline read side's striped counts use it without rseq
 * (polstore/static/policy.h).
 */
#ifndef POLSTORE_SRC_THREAD_INDEX_H
#define POLSTORE_SRC_THREAD_INDEX_H

#include <polstore/export.h>

#include "compiler.h"

PS_API extern __thread int _ps_thread_idx __attribute__((tls_model("initial-exec")));
PS_API int _ps_thread_index_slow(void);

static inline unsigned psi_thread_index(void)
{
	int i = _ps_thread_idx;

	return (unsigned)(psi_likely(i >= 0) ? i : _ps_thread_index_slow());
}

#endif /* POLSTORE_SRC_THREAD_INDEX_H */
