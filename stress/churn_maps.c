// SPDX-License-Identifier: LGPL-2.1-or-later
/* The maps the churn scenario measures (churn.h). */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <polstore/polstore.h>

#include "churn.h"

/* ---- polstore's store variants as churn_maps of the plugin ABI ---------------------------------- */

/*
 * The store variants speak peer.h too, so the harness calls every map
 * through the same table: a read section and a borrowed lookup, the value
 * being the policy pointer.
 */
static void store_destroy(void *map)
{
	ps_store_destroy(map);
}

/* ps_store_destroy() waits for grace periods: an online QSBR thread leaves for it. */
static void store_destroy_qsbr(void *map)
{
	ps_qsbr_thread_offline();
	ps_store_destroy(map);
	ps_qsbr_thread_online();
}

static int store_insert(void *map, uint64_t start, uint64_t end, uintptr_t value)
{
	return ps_store_set(map, start, end, (struct ps_policy *)value);
}

static int store_remove(void *map, uint64_t start, uint64_t end)
{
	return ps_store_set(map, start, end, NULL);
}

static bool store_lookup(void *map, uint64_t idx, struct ps_peer_hit *hit)
{
	hit->value = (uintptr_t)ps_store_lookup_borrow(map, idx);
	return hit->value != 0;
}

static void store_read_enter(void *map)
{
	ps_store_read_lock(map);
}

static void store_read_exit(void *map)
{
	ps_store_read_unlock(map);
}

static int store_check(void *map, const char **why)
{
	return ps_store_check(map, why);
}

static void qsbr_quiescent(void *map)
{
	(void)map;
	ps_qsbr_quiescent();
}

static void qsbr_register(void)
{
	if (ps_qsbr_thread_online())
		stress_die("ps_qsbr_thread_online failed");
}

static void qsbr_unregister(void)
{
	ps_qsbr_thread_offline();
}

/*
 * One map per store variant the library has, filled by store_maps_init():
 * no create hook (build_main() calls ps_store_create() with the map's
 * variant); rcu-qsbr readers go online, offline and quiescent.
 */
static struct ps_peer_ops store_maps[STRESS_NSYNC];
#define NSTORE_MAPS STRESS_NSYNC

static void store_maps_init(void)
{
	int s;

	for (s = 0; s < STRESS_NSYNC; s++) {
		bool qsbr = ps_sync_caps((enum ps_sync)s) & PS_CAP_QSBR;

		store_maps[s] = (struct ps_peer_ops){PS_PEER_ABI_VERSION, PS_PEER_VALUE,
				ps_sync_name((enum ps_sync)s), NULL, NULL,
				qsbr ? store_destroy_qsbr : store_destroy, store_insert, store_remove,
				store_lookup, store_read_enter, store_read_exit,
				qsbr ? qsbr_quiescent : NULL, qsbr ? qsbr_register : NULL,
				qsbr ? qsbr_unregister : NULL, store_check};
	}
}

/* ---- the churn_maps of this run: selected store variants, then the plugins ---------------------- */

struct churn_map churn_maps[CHURN_MAX_MAPS];
size_t churn_nmaps;
const char *churn_reference;

static bool name_ok(const char *s)
{
	size_t n = 0;

	for (; s && *s; s++, n++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
				!(*s >= '0' && *s <= '9') && !strchr("-_.:", *s))
			return false;
	return n > 0 && n < sizeof(((struct stress_point *)0)->variant);
}

const struct churn_map *churn_map_named(const char *name)
{
	size_t i;

	for (i = 0; i < churn_nmaps; i++)
		if (!strcmp(churn_maps[i].ops->name, name))
			return &churn_maps[i];
	return NULL;
}

/*
 * dlopen() @path and take its table: the version it speaks, the hooks
 * every map needs, and a name no other map of the run has.  The object
 * stays loaded until the program exits.
 */
static void load_plugin(const char *path)
{
	const struct ps_peer_ops *(*query)(uint32_t);
	const struct ps_peer_ops *o;
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	struct churn_map *m;

	if (!dl)
		stress_die("--peer %s: %s", path, dlerror());
	*(void **)&query = dlsym(dl, PS_PEER_QUERY_SYMBOL);
	if (!query)
		stress_die("--peer %s: no %s(): not a polstore-stress plugin", path,
				PS_PEER_QUERY_SYMBOL);
	o = query(PS_PEER_ABI_VERSION);
	if (!o || o->abi_version != PS_PEER_ABI_VERSION)
		stress_die("--peer %s: the plugin does not speak ABI version %d (stress/peer.h)",
				path, PS_PEER_ABI_VERSION);
	if (!o->create || !o->destroy || !o->insert || !o->remove || !o->lookup || !o->read_enter ||
			!o->read_exit)
		stress_die("--peer %s: a required operation is NULL", path);
	if (!(o->flags & (PS_PEER_VALUE | PS_PEER_BOUNDS)) ||
			(o->flags & ~(PS_PEER_VALUE | PS_PEER_BOUNDS)))
		stress_die("--peer %s: flags %#x: PS_PEER_VALUE and/or PS_PEER_BOUNDS", path,
				o->flags);
	if (!name_ok(o->name))
		stress_die("--peer %s: name '%s' (letters, digits, -_.:, 1 to 39 characters)", path,
				o->name ? o->name : "(null)");
	if (churn_map_named(o->name))
		stress_die("--peer %s: a map named '%s' is already in the run", path, o->name);
	m = &churn_maps[churn_nmaps++];
	m->ops = o;
	m->sync = -1;
	m->path = path;
	snprintf(m->version, sizeof(m->version), "%s", o->version ? o->version : "");
}

void churn_select_maps(void)
{
	size_t i;
	int k;

	churn_nmaps = 0;
	store_maps_init();
	for (i = 0; i < NSTORE_MAPS; i++) {
		if (!stress_variant_selected(store_maps[i].name))
			continue;
		churn_maps[churn_nmaps].ops = &store_maps[i];
		churn_maps[churn_nmaps].sync = (int)i;
		churn_maps[churn_nmaps].path = NULL;
		snprintf(churn_maps[churn_nmaps].version, sizeof(churn_maps[churn_nmaps].version), "polstore %s",
				ps_version());
		churn_nmaps++;
	}
	for (k = 0; k < stress_opts.npeers; k++)
		load_plugin(stress_opts.peers[k]);
	if (!churn_nmaps)
		stress_die("churn: no map to measure (--variants names no store variant, "
			   "no --peer)");
	churn_reference = stress_opts.reference;
	if (!churn_reference)
		churn_reference = stress_opts.npeers ? churn_maps[churn_nmaps - (size_t)stress_opts.npeers].ops->name
					       : churn_maps[0].ops->name;
	if (!churn_map_named(churn_reference))
		stress_die("churn: --churn_reference %s: no such map in this run", churn_reference);
}

