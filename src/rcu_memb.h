/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * liburcu "memb" flavour as the RCU and SEQLOCK stores use it: read-side
 * sections inlined (_LGPL_SOURCE; polstore is LGPL too), threads registered
 * on first use and unregistered at exit (see rcu_thread.c).
 */
#ifndef POLSTORE_SRC_RCU_MEMB_H
#define POLSTORE_SRC_RCU_MEMB_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <stdbool.h>
#include <urcu/urcu-memb.h>

#include "compiler.h"

extern __thread bool _ps_memb_registered __attribute__((tls_model("initial-exec")));
void _ps_memb_register(void);

static inline void ps_memb_read_lock(void)
{
	if (ps_unlikely(!_ps_memb_registered))
		_ps_memb_register();
	urcu_memb_read_lock();
}

static inline void ps_memb_read_unlock(void)
{
	urcu_memb_read_unlock();
}

#endif /* POLSTORE_SRC_RCU_MEMB_H */
