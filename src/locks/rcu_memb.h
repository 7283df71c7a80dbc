/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * liburcu's memb flavour, the inlined read side (_LGPL_SOURCE; polstore is
 * LGPL too): a thread registers on its first section.  The hook table:
 * psi_flavour_memb (rcu_memb.c).
 */
#ifndef POLSTORE_SRC_RCU_MEMB_H
#define POLSTORE_SRC_RCU_MEMB_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <stdbool.h>
#include <urcu/urcu-memb.h>

#include "compiler.h"
#include "rcu_flavour.h"

/* Register the calling thread (on its first section); rcu_memb.c. */
void psi_memb_register(void);

/*
 * liburcu's own flag decides, so a thread the application registered itself
 * is never registered twice (nor unregistered by polstore).
 */
static inline void psi_memb_read_lock(void)
{
	if (psi_unlikely(!URCU_TLS(urcu_memb_reader).registered))
		psi_memb_register();
	urcu_memb_read_lock();
}

static inline void psi_memb_read_unlock(void)
{
	urcu_memb_read_unlock();
}

#endif /* POLSTORE_SRC_RCU_MEMB_H */
