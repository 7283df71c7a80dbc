/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An RCU store's update and the memory it retires (rcu_store_update.c):
 * the operations the flavours' tables hold, and what create, destroy and
 * the checks of rcu_store.c call.
 */
#ifndef POLSTORE_SRC_RCU_STORE_UPDATE_H
#define POLSTORE_SRC_RCU_STORE_UPDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/store.h>

struct ps_set_op;
struct psi_rcu_store;
struct psi_reclaim_item;

int psi_rcu_store_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol);
int psi_rcu_store_update(struct ps_store *s, const struct ps_set_op *ops, size_t n);
void psi_rcu_store_synchronize(struct ps_store *s);
bool psi_rcu_store_set_may_wait(struct ps_store *s);
/* The sweep, the release function of @rs->sweep. */
void psi_rcu_store_sweep(struct psi_reclaim_item *item);
/* Under @wlock, at destroy (no reader, no set): free everything retired, spares, kept leaves. */
void psi_rcu_store_free_retired(struct psi_rcu_store *rs);
/* Under @wlock: whether the kept leaves are counted right and within their bounds. */
bool psi_rcu_store_stash_sane(struct psi_rcu_store *rs);

#endif /* POLSTORE_SRC_RCU_STORE_UPDATE_H */
