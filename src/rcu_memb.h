/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * liburcu "memb" flavour as every polstore module uses it (RCU and SEQLOCK
 * stores, RCU id maps): read-side sections inlined (_LGPL_SOURCE; polstore
 * is LGPL too), threads registered on first use and unregistered at exit
 * (rcu_memb.c, rcu_thread.c).
 */
#ifndef POLSTORE_SRC_RCU_MEMB_H
#define POLSTORE_SRC_RCU_MEMB_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <stdbool.h>
#include <urcu/urcu-memb.h>

#include "compiler.h"

/* Register the calling thread (on its first section); rcu_memb.c. */
void psi_memb_register(void);
/* Unregister a thread polstore registered, at its exit (rcu_thread.c). */
void psi_memb_thread_exit(void);

/*
 * liburcu's own flag decides, so a thread the application registered itself
 * is never registered twice (nor unregistered by polstore).
 */
static inline void ps_memb_read_lock(void)
{
	if (ps_unlikely(!URCU_TLS(urcu_memb_reader).registered))
		psi_memb_register();
	urcu_memb_read_lock();
}

static inline void ps_memb_read_unlock(void)
{
	urcu_memb_read_unlock();
}

#endif /* POLSTORE_SRC_RCU_MEMB_H */
