// SPDX-License-Identifier: LGPL-2.1-or-later
/* The per-thread index of thread_index.h. */
#include "compiler.h"
#include "thread_index.h"

/* -1 until the thread first asks. */
__thread int _ps_thread_idx __attribute__((tls_model("initial-exec"))) = -1;
static unsigned psi_thread_next_idx;

int _ps_thread_index_slow(void)
{
	_ps_thread_idx = (int)(PSI_FETCH_ADD(psi_thread_next_idx, 1, RELAXED) &
			       0x7fffffff);
	return _ps_thread_idx;
}
