/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unregistering threads from liburcu when they exit. */
#ifndef POLSTORE_SRC_RCU_THREAD_H
#define POLSTORE_SRC_RCU_THREAD_H

enum ps_flavor { PS_FLAVOR_MEMB, PS_FLAVOR_QSBR };

/* Arrange for the calling thread to leave @flavor when it exits. */
void _ps_rcu_thread_registered(enum ps_flavor flavor);

#endif /* POLSTORE_SRC_RCU_THREAD_H */
