// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * deferred_destroy: replace a store that readers are using, without
 * waiting for them.
 *
 * A runtime keeps its placement map in a store and publishes a pointer to
 * it.  Reader threads look pages up in whatever store the pointer names.
 * A writer builds a new layout in a fresh store, swaps the pointer, and
 * retires the old store with ps_store_destroy_deferred(), which returns
 * at once: polstore frees the store after every reader that might still
 * hold it has left its section.  Readers open that section with
 * ps_sync_read_lock(), so the program makes no liburcu call and links
 * only libpolstore.
 *
 * At the end, after ps_rcu_barrier(), the policies are referenced by the
 * program alone: every retired store was freed.
 *
 * Build against an installed polstore:
 *   cc deferred_destroy.c $(pkg-config --cflags --libs polstore) -o deferred_destroy
 * Usage: deferred_destroy [-v VARIANT|all] [-t READERS] [-s SWAPS]
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <polstore/polstore.h>

#define PAGES 4096 /* store index = page number */

/* The store readers use; swapped by the writer. */
static struct ps_store *current;
static enum ps_sync variant;
static int stop;

struct reader {
	pthread_t thread;
	unsigned long lookups;
	int error;
};

/* Look pages up in the published store, each inside a section. */
static void *reader_main(void *arg)
{
	struct reader *r = arg;
	unsigned long page = (unsigned long)(uintptr_t)r;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct ps_store *s;
		int node, err;

		err = ps_sync_read_lock(variant);
		if (err) {
			r->error = err;
			break;
		}
		/* Pairs with the writer's release exchange: the store is complete. */
		s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
		page = (page * 1103515245 + 12345) % PAGES;
		/* Every layout sends every page to node 0. */
		node = ps_store_lookup_node(s, page, 0);
		ps_sync_read_unlock(variant);
		/* The store may be freed from here on: nothing of it is kept. */
		if (node != 0) {
			r->error = node < 0 ? node : -EPROTO;
			break;
		}
		r->lookups++;
	}
	return NULL;
}

/* Layout @gen: pages in blocks of 64 + @gen % 64, alternately bound and preferred. */
static struct ps_store *build_layout(unsigned gen, struct ps_policy *bind,
		struct ps_policy *preferred)
{
	struct ps_store *s = ps_store_create(variant);
	uint64_t block = 64 + gen % 64, start;
	int i = 0;

	if (!s)
		return NULL;
	for (start = 0; start < PAGES; start += block, i++) {
		uint64_t end = start + block < PAGES ? start + block : PAGES;

		if (ps_store_set(s, start, end, i % 2 ? preferred : bind)) {
			ps_store_destroy(s); /* never published: no reader has it */
			return NULL;
		}
	}
	return s;
}

/* Hand @old to the reclaim thread; on a transient failure try again shortly. */
static int retire(struct ps_store *old)
{
	struct timespec ms = { 0, 1000000 };
	int err, tries;

	for (tries = 0; tries < 1000; tries++) {
		err = ps_store_destroy_deferred(old);
		if (err != -ENOMEM && err != -EAGAIN)
			return err;
		nanosleep(&ms, NULL);
	}
	return err;
}

static int run(enum ps_sync sync, int nreaders, int swaps)
{
	unsigned long node0 = 1, lookups = 0;
	struct ps_policy *bind = ps_policy_create(PS_MPOL_BIND, 0, &node0, 1);
	struct ps_policy *preferred = ps_policy_create(PS_MPOL_PREFERRED, 0, &node0, 1);
	struct timespec pause = { 0, 200000 };
	struct reader *readers = calloc((size_t)nreaders, sizeof(*readers));
	int i, err = 0;

	variant = sync;
	__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
	current = bind && preferred ? build_layout(0, bind, preferred) : NULL;
	if (!current || !readers) {
		perror("deferred_destroy: setup");
		return 1;
	}
	for (i = 0; i < nreaders; i++) {
		err = pthread_create(&readers[i].thread, NULL, reader_main, &readers[i]);
		if (err) {
			fprintf(stderr, "pthread_create: %s\n", strerror(err));
			return 1;
		}
	}

	/* The writer: publish a new layout, retire the old one, never wait. */
	for (i = 1; i <= swaps && !err; i++) {
		struct ps_store *next = build_layout((unsigned)i, bind, preferred), *old;

		if (!next) {
			err = -ENOMEM;
			break;
		}
		old = __atomic_exchange_n(&current, next, __ATOMIC_ACQ_REL);
		err = retire(old);
		nanosleep(&pause, NULL);
	}

	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nreaders; i++) {
		pthread_join(readers[i].thread, NULL);
		lookups += readers[i].lookups;
		if (readers[i].error && !err)
			err = readers[i].error;
	}
	/* No reader is left: the last store may go at once. */
	ps_store_destroy(current);
	current = NULL;
	if (err) {
		fprintf(stderr, "deferred_destroy: %s: %s\n", ps_sync_name(sync), strerror(-err));
		return 1;
	}
	/* Every store handed over has been freed once this returns. */
	err = ps_rcu_barrier();
	if (err || ps_policy_refcount(bind) != 1 || ps_policy_refcount(preferred) != 1) {
		fprintf(stderr, "deferred_destroy: %s: retired stores still hold policies "
				"(%ld, %ld references; barrier %d)\n", ps_sync_name(sync),
				ps_policy_refcount(bind), ps_policy_refcount(preferred), err);
		return 1;
	}
	printf("%-8s %d stores swapped in and retired under %d readers, %lu lookups, "
			"all freed\n", ps_sync_name(sync), swaps, nreaders, lookups);
	ps_policy_put(bind);
	ps_policy_put(preferred);
	free(readers);
	return 0;
}

int main(int argc, char **argv)
{
	const char *which = "rcu";
	int nreaders = 2, swaps = 1000, opt, sync, ret = 0;

	while ((opt = getopt(argc, argv, "v:t:s:")) != -1) {
		switch (opt) {
		case 'v':
			which = optarg;
			break;
		case 't':
			nreaders = atoi(optarg);
			break;
		case 's':
			swaps = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [-v VARIANT|all] [-t READERS] [-s SWAPS]\n", argv[0]);
			return 2;
		}
	}
	if (nreaders < 1 || swaps < 0) {
		fprintf(stderr, "deferred_destroy: -t needs 1 or more readers, -s 0 or more swaps\n");
		return 2;
	}
	if (strcmp(which, "all") != 0) {
		sync = ps_sync_from_name(which);
		if (sync < 0) {
			fprintf(stderr, "deferred_destroy: unknown variant '%s'\n", which);
			return 2;
		}
		return run((enum ps_sync)sync, nreaders, swaps);
	}
	for (sync = 0; sync < PS_SYNC_COUNT; sync++)
		ret |= run((enum ps_sync)sync, nreaders, swaps);
	return ret;
}
