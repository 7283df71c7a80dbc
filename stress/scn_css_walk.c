// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * css-walk: ranks walk every id of a ps_idmap with get_next inside one
 * read section while writers remove a random id and allocate the lowest
 * free one every --write-interval (the new object's id is stored right
 * after the alloc returns it: walkers accept the id or "not yet known").
 * Objects carry their id and a live mark; a walk that meets an object with
 * another id or a dead mark aborts.  Removed objects are freed with
 * ps_idmap_free_rcu(), poisoned and kept until the end, so a use after the
 * grace period is seen, not silently allowed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "companion_run.h"
#include "compiler.h"
#include "scn_css_walk.h"
#include "stress.h"

static const char *const walk_variants[] = {"spin", "rwlock", "rcu"};

bool css_walk_variant_known(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(walk_variants); i++)
		if (!strcmp(name, walk_variants[i]))
			return true;
	return false;
}

/* ---- css-walk -------------------------------------------------------------------- */

#define WALK_IDS 1000
#define OBJ_LIVE 0x11FE11FEu
#define OBJ_DEAD 0xDEADDEADu

struct wobj {
	int id;
	unsigned magic;
	struct wobj *next_dead;
};

struct walk {
	struct ps_idmap *map;
	const char *variant;
	struct wobj *graveyard; /* freed objects, poisoned, released at the end */
	long expected;		/* bound ids, per the writers' successful calls */
};

static struct walk *walk_cur;

static void wobj_free(void *p)
{
	struct wobj *o = p, *head;

	/* After the grace period no reader may see it: poison it and keep the memory. */
	o->magic = OBJ_DEAD;
	head = PSI_READ_ONCE(walk_cur->graveyard);
	do
		o->next_dead = head;
	while (!PSI_TRY_CMPXCHG_WEAK(walk_cur->graveyard, &head, o, RELEASE, RELAXED));
}

static void *walk_rank(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct walk *w = r->arg;
	uint64_t ops = 0;

	stress_gate_wait(&r->gate);
	while (!crun_stopped(r)) {
		uint64_t t0 = stress_ticks();
		struct wobj *o;
		int id, prev = -1, n = 0;

		ps_idmap_read_lock(w->map);
		for (id = 0; (o = ps_idmap_get_next(w->map, &id)); id++) {
			int oid = PSI_LOAD_ACQUIRE(o->id);

			if ((oid != id && oid != -1) || o->magic != OBJ_LIVE || id <= prev)
				stress_fail("VALIDATION FAILED: css-walk %s: id %d gave an object "
					    "of id %d, mark %#x (after id %d)",
						w->variant, id, oid, o->magic, prev);
			prev = id;
			n++;
		}
		ps_idmap_read_unlock(w->map);
		if (n < WALK_IDS / 2)
			stress_fail("VALIDATION FAILED: css-walk %s: a walk saw %d ids of about %d",
					w->variant, n, WALK_IDS);
		stress_hist_add(&t->hist, stress_ticks() - t0);
		ops++;
	}
	t->ops = ops;
	return NULL;
}

static void *walk_writer(void *arg)
{
	struct cthread *t = arg;
	struct crun *r = t->r;
	struct walk *w = r->arg;
	uint64_t rng = stress_seed_for(stress_opts.seed, 200000 + (uint64_t)t->id), next;

	stress_gate_wait(&r->gate);
	next = stress_now_ns();
	while (!crun_stopped(r)) {
		struct wobj *o = malloc(sizeof(*o)), *old = NULL;
		int victim = (int)stress_below(&rng, WALK_IDS), id, ret;
		uint64_t t0, t1;

		if (stress_opts.write_interval_ns) {
			next += stress_opts.write_interval_ns;
			stress_sleep_until(next);
			if (crun_stopped(r)) {
				free(o);
				break;
			}
		}
		if (!o)
			stress_die("out of memory");
		t0 = stress_now_ns();
		ret = ps_idmap_remove(w->map, victim, (void **)&old);
		t1 = stress_now_ns();
		if (t1 - t0 > t->max_wait_ns)
			t->max_wait_ns = t1 - t0;
		if (!ret) {
			PSI_FETCH_SUB(w->expected, 1, RELAXED);
			if (old->id != victim)
				stress_fail("VALIDATION FAILED: css-walk %s: removing id %d "
					    "returned "
					    "the object of id %d",
						w->variant, victim, old->id);
			ps_idmap_free_rcu(w->map, old, wobj_free);
		} else if (ret != -ENOENT) {
			stress_fail("css-walk: ps_idmap_remove: %s", strerror(-ret));
		}
		o->magic = OBJ_LIVE;
		o->id = -1; /* not yet known: walkers accept -1 or the id they found it at */
		t0 = stress_now_ns();
		ret = ps_idmap_alloc(w->map, o, 0, PS_IDMAP_ID_MAX, &id);
		t1 = stress_now_ns();
		if (ret)
			stress_fail("css-walk: ps_idmap_alloc: %s", strerror(-ret));
		if (t1 - t0 > t->max_wait_ns)
			t->max_wait_ns = t1 - t0;
		PSI_STORE_RELEASE(o->id, id);
		PSI_FETCH_ADD(w->expected, 1, RELAXED);
		t->ops++;
	}
	return NULL;
}

static void walk_point(const char *variant, int nranks, double setting, struct stress_point *p)
{
	struct walk w = {0};
	struct crun r = {0};
	struct wobj *o;
	int i, id, n;

	(void)setting; /* one setting */

	w.variant = variant;
	w.map = ps_idmap_create((enum ps_idmap_sync)ps_idmap_sync_from_name(variant));
	if (!w.map)
		stress_die("ps_idmap_create(%s): %s", variant, strerror(errno));
	walk_cur = &w;
	for (i = 0; i < WALK_IDS; i++) {
		o = malloc(sizeof(*o));
		if (!o)
			stress_die("out of memory");
		o->id = i;
		o->magic = OBJ_LIVE;
		if (ps_idmap_alloc(w.map, o, 0, PS_IDMAP_ID_MAX, &id) || id != i)
			stress_fail("css-walk: initial alloc gave id %d for %d", id, i);
	}
	w.expected = WALK_IDS;
	r.nranks = nranks;
	r.nwriters = stress_opts.writers;
	r.rank_fn = walk_rank;
	r.writer_fn = walk_writer;
	r.arg = &w;
	crun_go(&r);
	ps_idmap_barrier(w.map);
	n = 0;
	ps_idmap_read_lock(w.map);
	for (id = 0; (o = ps_idmap_get_next(w.map, &id)); id++, n++)
		if (o->id != id || o->magic != OBJ_LIVE)
			stress_fail("VALIDATION FAILED: css-walk %s: id %d holds object %d at the "
				    "end",
					variant, id, o->id);
	ps_idmap_read_unlock(w.map);
	if (n != w.expected || ps_idmap_count(w.map) != n)
		stress_fail("VALIDATION FAILED: css-walk %s: %d ids bound, count says %d, writers "
			    "expect %ld",
				variant, n, ps_idmap_count(w.map), w.expected);
	stress_point_init(p, "css-walk", variant, nranks);
	crun_point(&r, p);
	snprintf(p->note, sizeof(p->note), "%d ids", n);
	for (;;) {
		id = 0;
		ps_idmap_read_lock(w.map);
		o = ps_idmap_get_next(w.map, &id);
		ps_idmap_read_unlock(w.map);
		if (!o)
			break;
		if (ps_idmap_remove(w.map, id, NULL))
			stress_fail("css-walk: cannot remove id %d at the end", id);
		free(o);
	}
	ps_idmap_destroy(w.map);
	while ((o = w.graveyard)) {
		w.graveyard = o->next_dead;
		free(o);
	}
	walk_cur = NULL;
}

void stress_run_css_walk(void)
{
	const struct companion c = {"css-walk", walk_variants, NELEM(walk_variants), one_setting, 1,
			stress_opts.ranks, stress_opts.nranks, walk_point};

	companion_run(&c);
}

double stress_estimate_css_walk(void)
{
	return companion_estimate(&(struct companion){"css-walk", walk_variants,
			NELEM(walk_variants), one_setting, 1, stress_opts.ranks, stress_opts.nranks,
			NULL});
}
