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

void _ps_memb_register(void);

/*
 * liburcu's own flag decides, so a thread the application registered itself
 * is never registered twice (nor unregistered by polstore).
 */
static inline void ps_memb_read_lock(void)
{
	if (ps_unlikely(!URCU_TLS(urcu_memb_reader).registered))
		_ps_memb_register();
	urcu_memb_read_lock();
}

static inline void ps_memb_read_unlock(void)
{
	urcu_memb_read_unlock();
}

/*
 * liburcu's call_rcu() "must be called by registered RCU read-side
 * threads" (urcu-call-rcu-impl.h): it looks its per-CPU or per-thread
 * call_rcu data up inside a read-side section, so that
 * free_all_cpu_call_rcu_data() can wait for it.  A writer may never have
 * read: register it as a reader would be (and unregistered at its exit).
 */
static inline void ps_memb_call_rcu(struct rcu_head *head, void (*fn)(struct rcu_head *head))
{
	if (ps_unlikely(!URCU_TLS(urcu_memb_reader).registered))
		_ps_memb_register();
	urcu_memb_call_rcu(head, fn);
}

#endif /* POLSTORE_SRC_RCU_MEMB_H */
