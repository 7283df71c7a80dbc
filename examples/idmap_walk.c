// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * An id map of groups walked by readers while groups come and go, as the
 * kernel walks cgroup css ids during reclaim.  Readers walk with get_next,
 * one read-side section per step; a writer creates and removes groups and
 * frees removed ones after a grace period.  Variant as argument: spin,
 * rwlock, rcu.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <polstore/polstore.h>

struct group {
	int id;
	long pages;
};

static struct ps_idmap *map;
static int stop;

static void *walker(void *arg)
{
	long walks = 0, seen = 0;
	struct group *g;
	int id;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		for (id = 0;; id++) {
			ps_idmap_read_lock(map);
			g = ps_idmap_get_next(map, &id);
			if (g)
				seen += g->pages >= 0; /* use the group inside the section only */
			ps_idmap_read_unlock(map);
			if (!g || id == PS_IDMAP_ID_MAX)
				break;
		}
		walks++;
	}
	printf("walker: %ld walks, %ld groups visited\n", walks, seen);
	return NULL;
}

int main(int argc, char **argv)
{
	int sync = ps_idmap_sync_from_name(argc > 1 ? argv[1] : "rcu");
	pthread_t w[2];
	struct group *g;
	void *old;
	int i, id;

	if (sync < 0) {
		fprintf(stderr, "usage: %s [spin|rwlock|rcu]\n", argv[0]);
		return 2;
	}
	map = ps_idmap_create(sync);
	if (!map) {
		perror("ps_idmap_create");
		return 1;
	}
	for (i = 0; i < 2; i++)
		pthread_create(&w[i], NULL, walker, NULL);
	for (i = 0; i < 100000; i++) {
		if (i % 3 != 2) {
			g = malloc(sizeof(*g));
			if (!g)
				return 1;
			g->pages = i;
			/* Ids start at 1, as css ids do; the lowest free one is reused. */
			if (ps_idmap_alloc(map, g, 1, 65535, &id)) {
				free(g);
				continue;
			}
			g->id = id; /* readers only read ->pages */
		} else if (ps_idmap_remove(map, 1 + (i * 7919) % 1000, &old) == 0) {
			ps_idmap_free_rcu(map, old, free);
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	printf("%s: %d groups left\n", ps_idmap_sync_name(sync), ps_idmap_count(map));
	for (;;) {
		id = 0;
		ps_idmap_read_lock(map);
		g = ps_idmap_get_next(map, &id);
		ps_idmap_read_unlock(map);
		if (!g)
			break;
		ps_idmap_remove(map, id, NULL);
		ps_idmap_free_rcu(map, g, free);
	}
	ps_idmap_destroy(map);
	return 0;
}
