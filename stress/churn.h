// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The maps the churn scenario measures (churn_maps.c): polstore's store
 * variants, spoken to through the plugin ABI of peer.h, and the plugins
 * --peer loads.
 */
#ifndef POLSTORE_STRESS_CHURN_H
#define POLSTORE_STRESS_CHURN_H

#include <stddef.h>

#include "peer.h"
#include "stress.h"

#define CHURN_MAX_MAPS (STRESS_NSYNC + STRESS_MAX_PEERS)

struct churn_map {
	const struct ps_peer_ops *ops;
	int sync;          /* the store variant, or -1 for a plugin */
	char version[256]; /* what the tables print: the library's or the plugin's */
	const char *path;  /* the plugin's file, NULL for a store variant */
};

/* The maps of this run, in the order the tables print them. */
extern struct churn_map churn_maps[CHURN_MAX_MAPS];
extern size_t churn_nmaps;
/* The name of the map every ratio divides by. */
extern const char *churn_reference;

/*
 * churn_select_maps() - fill churn_maps[] from --variants and --peer
 *
 * Loads each plugin (dlopen) and checks its table; exits with a message
 * when a plugin is unusable, no map is selected or --reference names no
 * map of the run.  Main thread, before any worker starts.
 */
void churn_select_maps(void);

/* churn_map_named() - the map of this run called @name, or NULL. */
const struct churn_map *churn_map_named(const char *name);

#endif
