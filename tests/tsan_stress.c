// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * tsan_stress: a short, bounded run of every concurrent path, as a plain C
 * program (Criterion cannot start under -fsanitize=thread), for the TSan
 * build (CTest test tsan.stress, label tsan).  It is cheap enough to run as
 * unit.tsan_stress in ordinary builds too.
 *
 *   1. the linearizability oracle (stress/linearizability.h) on every store variant;
 *   2. a mix on every store variant: readers with references, borrowing
 *      readers (read_lock/lookup_borrow/read_unlock), writers, a foreach;
 *      then fresh policies per set under readers holding references (the
 *      striped counts of hot policies switching on and off);
 *   3. every ps_charge kind: charge/uncharge on a two-level hierarchy while
 *      another thread reads, changes the limit and drains stocks;
 *   4. ps_pcounter add/read/sum/fold/set_batch/snapshot and ps_commit
 *      charge/uncharge/set_mode;
 *   5. every ps_idmap variant: alloc/replace/remove with deferred frees
 *      (free_rcu) while readers find and walk the objects.
 *
 * Every check failure is printed and counted; the exit status is 1 if any
 * failed (TSan itself exits non-zero on a report: halt_on_error or its
 * exitcode).  POLSTORE_TSAN_SECONDS (default 0.3) is the duration of each
 * timed phase.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <polstore/polstore.h>

#include "linearizability.h"
#define PS_TEST_NO_CRITERION
#include "testutil.h"

static atomic_long failures;
static double phase_seconds = 0.3;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "tsan_stress: FAILED %s:%d: %s: ", __FILE__, __LINE__,     \
					#cond);                                                    \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			atomic_fetch_add(&failures, 1);                                            \
		}                                                                                  \
	} while (0)

static uint64_t deadline(void)
{
	return ps_test_now_ns() + (uint64_t)(phase_seconds * 1e9);
}

static void spawn(pthread_t *t, int n, void *(*fn)(void *), void *arg)
{
	int i;

	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, fn, arg)) {
			perror("pthread_create");
			exit(2);
		}
}

static void join(pthread_t *t, int n)
{
	int i;

	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* ---- 1. the oracle ---- */

static void lin_all(void)
{
	int s;

	for (s = 0; s < PS_SYNC_COUNT; s++) {
		struct ps_lin_config cfg = {
			.sync = (enum ps_sync)s,
			.readers = 3,
			.writers = 2,
			.lookups = (long)(20000 * phase_seconds / 0.3),
			.seed = 0x75a + (uint64_t)s,
		};
		struct ps_lin_result res;
		int ret = ps_lin_run(&cfg, &res);

		CHECK(ret == 0 && res.violations == 0 && res.live_allocs == 0,
				"%s: %ld violations, %ld leaked", ps_sync_name(cfg.sync),
				res.violations, res.live_allocs);
		printf("oracle   %-8s %8ld lookups checked, %6ld writes, %ld violations\n",
				ps_sync_name(cfg.sync), res.lookups_checked, res.writes,
				res.violations);
	}
}

/* ---- 2. store mix: policy k only ever lives in region k ---- */

#define REGIONS 8
#define REGION_SIZE 256

struct mix {
	struct ps_store *store;
	struct ps_policy *pol[REGIONS];
	uint64_t end;
	atomic_bool stop;
	atomic_long lookups, sets;
};

static void check_found(const struct ps_policy *got, struct mix *m, uint64_t idx)
{
	CHECK(!got || (got == m->pol[idx / REGION_SIZE] &&
				      ps_policy_first_node(got) == (int)(idx / REGION_SIZE)),
			"lookup(%llu) returned a policy of another region", (unsigned long long)idx);
}

static void *mix_reader(void *arg)
{
	struct mix *m = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long n = 0;

	while (!atomic_load_explicit(&m->stop, memory_order_relaxed)) {
		uint64_t idx = ps_test_rand(&seed) % (REGIONS * REGION_SIZE);

		if (n & 1) {
			ps_store_read_lock(m->store);
			check_found(ps_store_lookup_borrow(m->store, idx), m, idx);
			ps_store_read_unlock(m->store);
		} else {
			struct ps_policy *p = ps_store_lookup(m->store, idx);

			check_found(p, m, idx);
			ps_policy_put(p);
		}
		n++;
	}
	atomic_fetch_add(&m->lookups, n);
	return NULL;
}

static void *mix_writer(void *arg)
{
	struct mix *m = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long n = 0;

	while (ps_test_now_ns() < m->end || n < 16) {
		int k = (int)(ps_test_rand(&seed) % REGIONS);
		uint64_t a, b;

		if (!ps_test_rand_range(&seed, (uint64_t)k * REGION_SIZE, REGION_SIZE, &a, &b))
			continue;
		CHECK(ps_store_set(m->store, a, b,
				      ps_test_rand(&seed) % 4 ? m->pol[k] : NULL) == 0,
				"set failed");
		n++;
	}
	atomic_fetch_add(&m->sets, n);
	return NULL;
}

static int mix_visit(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct mix *m = arg;

	check_found(pol, m, start);
	check_found(pol, m, end - 1);
	return 0;
}

static void *mix_walker(void *arg)
{
	struct mix *m = arg;

	while (!atomic_load_explicit(&m->stop, memory_order_relaxed))
		CHECK(ps_store_foreach(m->store, mix_visit, m) == 0, "foreach failed");
	return NULL;
}

static void mix_all(void)
{
	int s, i;

	for (s = 0; s < PS_SYNC_COUNT; s++) {
		struct mix m = { .store = ps_store_create((enum ps_sync)s) };
		pthread_t rt[3], wt[2], ft[1];
		const char *why = NULL;

		if (!m.store) {
			perror("ps_store_create");
			exit(2);
		}
		for (i = 0; i < REGIONS; i++)
			m.pol[i] = ps_test_bind(i);
		m.end = deadline();
		spawn(rt, 3, mix_reader, &m);
		spawn(ft, 1, mix_walker, &m);
		spawn(wt, 2, mix_writer, &m);
		join(wt, 2);
		atomic_store(&m.stop, true);
		join(rt, 3);
		join(ft, 1);
		CHECK(ps_store_check(m.store, &why) == 0, "%s: %s", ps_sync_name((enum ps_sync)s),
				why);
		ps_store_destroy(m.store);
		for (i = 0; i < REGIONS; i++) {
			CHECK(ps_policy_refcount(m.pol[i]) == 1, "policy %d: refcount %ld", i,
					(long)ps_policy_refcount(m.pol[i]));
			ps_policy_put(m.pol[i]);
		}
		printf("mix      %-8s %8ld lookups, %6ld sets\n", ps_sync_name((enum ps_sync)s),
				atomic_load(&m.lookups), atomic_load(&m.sets));
	}
}

/*
 * ---- 2b. fresh policies (issue 12): every set installs a new policy only the
 * store owns, readers hold what they find, so policies go hot (per-CPU
 * stripes), leave their store (stripes folded) and are freed by whichever
 * put is last: a reader's or the store's.
 */

struct fresh {
	struct ps_store *store;
	uint64_t end;
	atomic_bool stop;
	atomic_long lookups, sets;
};

static void *fresh_reader(void *arg)
{
	struct fresh *f = arg;
	struct ps_policy *held[8];
	long n = 0;
	int k;

	while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
		for (k = 0; k < 8; k++)
			held[k] = ps_store_lookup(f->store, (uint64_t)(n + k) % 64);
		for (k = 0; k < 8; k++) {
			CHECK(!held[k] || ps_policy_first_node(held[k]) == (int)((n + k) % 64 / 16),
					"fresh: a policy of another range");
			ps_policy_put(held[k]);
		}
		n += 8;
	}
	atomic_fetch_add(&f->lookups, n);
	return NULL;
}

static void fresh_all(void)
{
	int s;

	for (s = 0; s < PS_SYNC_COUNT; s++) {
		struct fresh f = { .store = ps_store_create((enum ps_sync)s) };
		pthread_t rt[2];
		long n = 0;

		if (!f.store) {
			perror("ps_store_create");
			exit(2);
		}
		f.end = deadline();
		spawn(rt, 2, fresh_reader, &f);
		while (ps_test_now_ns() < f.end || n < 64) {
			uint64_t r = (uint64_t)(n % 4);
			struct ps_policy *p = ps_test_bind((int)r);

			CHECK(ps_store_set(f.store, r * 16, r * 16 + 16, p) == 0, "fresh: set failed");
			ps_policy_put(p);
			if (n % 8 == 7)
				sched_yield(); /* let the readers make some of them hot */
			n++;
		}
		atomic_store(&f.stop, true);
		join(rt, 2);
		ps_store_destroy(f.store);
		printf("fresh    %-8s %8ld lookups, %6ld sets\n", ps_sync_name((enum ps_sync)s),
				atomic_load(&f.lookups), n);
	}
}

/* ---- 3. charge ---- */

struct chg {
	struct ps_charge *root, *child;
	uint64_t end;
	atomic_bool stop;
	atomic_long charged;
};

static void *chg_worker(void *arg)
{
	struct chg *c = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long held = 0, n = 0;

	while (ps_test_now_ns() < c->end || n < 16) {
		long nr = (long)(ps_test_rand(&seed) % 8) + 1;

		if (held < 64 && !ps_charge_try(c->child, nr, NULL)) {
			held += nr;
		} else if (held) {
			CHECK(ps_charge_uncharge(c->child, held) == 0, "uncharge failed");
			held = 0;
		}
		n++;
	}
	if (held)
		CHECK(ps_charge_uncharge(c->child, held) == 0, "uncharge failed");
	atomic_fetch_add(&c->charged, n);
	return NULL;
}

static void *chg_admin(void *arg)
{
	struct chg *c = arg;
	struct ps_charge_stat st;
	long i = 0;

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		CHECK(ps_charge_read(c->root, PS_CHARGE_USAGE) >= 0, "negative usage");
		CHECK(ps_charge_stat(c->child, &st) == 0, "stat failed");
		(void)ps_charge_set_limit(c->root, i & 1 ? 100 : 400); /* may be -EBUSY */
		if (ps_charge_kind(c->root) == PS_CHARGE_STOCK)
			CHECK(ps_charge_drain_stock(c->root) == 0, "drain failed");
		i++;
	}
	return NULL;
}

static void charge_all(void)
{
	int k;

	for (k = 0; k < PS_CHARGE_KIND_COUNT; k++) {
		struct chg c = { 0 };
		pthread_t wt[3], at[1];

		c.root = ps_charge_create((enum ps_charge_kind)k, NULL, 400);
		c.child = c.root ? ps_charge_create((enum ps_charge_kind)k, c.root, PS_CHARGE_MAX)
				 : NULL;
		if (!c.child) {
			perror("ps_charge_create");
			exit(2);
		}
		c.end = deadline();
		spawn(at, 1, chg_admin, &c);
		spawn(wt, 3, chg_worker, &c);
		join(wt, 3);
		atomic_store(&c.stop, true);
		join(at, 1);
		if (k == PS_CHARGE_STOCK)
			CHECK(ps_charge_drain_stock(c.root) == 0, "drain failed");
		CHECK(ps_charge_read(c.root, PS_CHARGE_USAGE) == 0, "%s: usage %ld left",
				ps_charge_kind_name((enum ps_charge_kind)k),
				ps_charge_read(c.root, PS_CHARGE_USAGE));
		CHECK(ps_charge_destroy(c.child) == 0 && ps_charge_destroy(c.root) == 0,
				"destroy failed");
		printf("charge   %-8s %8ld charge/uncharge calls\n",
				ps_charge_kind_name((enum ps_charge_kind)k), atomic_load(&c.charged));
	}
}

/* ---- 4. pcounter and commit ---- */

struct pcc {
	struct ps_pcounter *pc;
	struct ps_commit *cm;
	uint64_t end;
	atomic_bool stop;
};

static void *pcc_worker(void *arg)
{
	struct pcc *p = arg;
	long n = 0;

	while (ps_test_now_ns() < p->end || n < 16) {
		CHECK(ps_pcounter_add(p->pc, 3) == 0 && ps_pcounter_add(p->pc, -3) == 0,
				"pcounter add failed");
		if (!ps_commit_charge(p->cm, 2))
			CHECK(ps_commit_uncharge(p->cm, 2) == 0, "commit uncharge failed");
		n++;
	}
	return NULL;
}

static void *pcc_admin(void *arg)
{
	struct pcc *p = arg;
	struct ps_pcounter_snapshot snap;
	long i = 0;

	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		(void)ps_pcounter_read(p->pc);
		/* Workers add 3 then take it back: at most 3 each in flight. */
		CHECK(ps_pcounter_sum(p->pc) >= 1000 && ps_pcounter_sum(p->pc) <= 1009,
				"sum out of [1000, 1009]");
		CHECK(ps_pcounter_snapshot(p->pc, &snap) == 0, "snapshot failed");
		CHECK(ps_pcounter_set_batch(p->pc, i & 1 ? 4 : 32) == 0, "set_batch failed");
		CHECK(ps_pcounter_fold(p->pc) == 0, "fold failed");
		CHECK(ps_commit_set_mode(p->cm, (enum ps_overcommit)(i % 3)) == 0, "set_mode failed");
		(void)ps_commit_committed(p->cm, i & 1);
		i++;
	}
	return NULL;
}

static void pcounter_all(void)
{
	struct pcc p = { .pc = ps_pcounter_create(1000, 16),
		.cm = ps_commit_create(PS_OVERCOMMIT_NEVER, 1 << 20, 4) };
	pthread_t wt[3], at[1];

	if (!p.pc || !p.cm) {
		perror("ps_pcounter_create/ps_commit_create");
		exit(2);
	}
	p.end = deadline();
	spawn(at, 1, pcc_admin, &p);
	spawn(wt, 3, pcc_worker, &p);
	join(wt, 3);
	atomic_store(&p.stop, true);
	join(at, 1);
	CHECK(ps_pcounter_sum(p.pc) == 1000, "final sum %lld", (long long)ps_pcounter_sum(p.pc));
	CHECK(ps_commit_committed(p.cm, true) == 0, "commit left %lld",
			(long long)ps_commit_committed(p.cm, true));
	ps_pcounter_destroy(p.pc);
	ps_commit_destroy(p.cm);
	printf("pcounter + commit  ok\n");
}

/*
 * ---- 5. idmap ----
 * Writer w owns ids [w * 64, w * 64 + 63]: it alone allocates, replaces and
 * removes them, so it may still write the id into an object it published.
 * Readers check the magic written before publication and that an object
 * found at id says id (or -1: not yet told).  Freeing poisons the magic.
 */
#define OBJ_MAGIC 0x5eedf00dL
#define IDM_WRITERS 2
#define IDM_PER_WRITER 64

struct obj {
	long magic;
	atomic_int id;
};

struct idm {
	struct ps_idmap *map;
	uint64_t end;
	atomic_bool stop;
	atomic_int next_writer;
	atomic_long found;
};

static struct obj *obj_new(int id)
{
	struct obj *o = malloc(sizeof(*o));

	if (!o)
		exit(2);
	o->magic = OBJ_MAGIC;
	atomic_init(&o->id, id);
	return o;
}

static void obj_free(void *p)
{
	struct obj *o = p;

	o->magic = 0; /* a write: a reader still using it would race with this */
	free(o);
}

static void check_obj(const struct obj *o, int id)
{
	int seen = atomic_load_explicit(&o->id, memory_order_relaxed);

	CHECK(o->magic == OBJ_MAGIC && (seen == id || seen == -1), "id %d: magic %lx, says %d", id,
			o->magic, seen);
}

static void *idm_reader(void *arg)
{
	struct idm *d = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	long n = 0;

	while (!atomic_load_explicit(&d->stop, memory_order_relaxed)) {
		int id = (int)(ps_test_rand(&seed) % (IDM_WRITERS * IDM_PER_WRITER));
		struct obj *o;

		ps_idmap_read_lock(d->map);
		o = ps_idmap_find(d->map, id);
		if (o) {
			check_obj(o, id);
			n++;
		}
		ps_idmap_for_each(d->map, o, id)
			check_obj(o, id);
		ps_idmap_read_unlock(d->map);
	}
	atomic_fetch_add(&d->found, n);
	return NULL;
}

static void *idm_writer(void *arg)
{
	struct idm *d = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
	int w = atomic_fetch_add(&d->next_writer, 1);
	int lo = w * IDM_PER_WRITER, hi = lo + IDM_PER_WRITER - 1;
	long n = 0;

	while (ps_test_now_ns() < d->end || n < 16) {
		struct obj *o = obj_new(-1), *old = NULL;
		int id;

		if (ps_idmap_alloc(d->map, o, lo, hi, &id)) {
			free(o); /* full: make room */
			id = lo + (int)(ps_test_rand(&seed) % IDM_PER_WRITER);
			if (!ps_idmap_remove(d->map, id, (void **)&old))
				CHECK(ps_idmap_free_rcu(d->map, old, obj_free) == 0, "free_rcu");
			continue;
		}
		atomic_store_explicit(&o->id, id, memory_order_relaxed);
		if (n & 1) {
			struct obj *full = obj_new(id);

			CHECK(ps_idmap_replace(d->map, id, full, (void **)&old) == 0 && old == o,
					"replace(%d)", id);
			CHECK(ps_idmap_free_rcu(d->map, o, obj_free) == 0, "free_rcu");
		}
		n++;
	}
	return NULL;
}

static void idmap_all(void)
{
	int s;

	for (s = 0; s < PS_IDMAP_SYNC_COUNT; s++) {
		struct idm d = { .map = ps_idmap_create((enum ps_idmap_sync)s) };
		pthread_t rt[3], wt[IDM_WRITERS];
		struct obj *o;
		int id = 0;

		if (!d.map) {
			perror("ps_idmap_create");
			exit(2);
		}
		d.end = deadline();
		spawn(rt, 3, idm_reader, &d);
		spawn(wt, IDM_WRITERS, idm_writer, &d);
		join(wt, IDM_WRITERS);
		atomic_store(&d.stop, true);
		join(rt, 3);
		ps_idmap_barrier(d.map);
		for (;;) { /* alone now; remove takes the writer lock, so not in a section */
			ps_idmap_read_lock(d.map);
			o = ps_idmap_get_next(d.map, &id);
			ps_idmap_read_unlock(d.map);
			if (!o)
				break;
			ps_idmap_remove(d.map, id, NULL);
			obj_free(o);
			if (id == PS_IDMAP_ID_MAX)
				break;
			id++;
		}
		ps_idmap_destroy(d.map);
		printf("idmap    %-8s %8ld objects found\n",
				ps_idmap_sync_name((enum ps_idmap_sync)s), atomic_load(&d.found));
	}
}

int main(void)
{
	const char *env = getenv("POLSTORE_TSAN_SECONDS");

	if (env && atof(env) > 0)
		phase_seconds = atof(env);
	lin_all();
	mix_all();
	fresh_all();
	charge_all();
	pcounter_all();
	idmap_all();
	if (atomic_load(&failures)) {
		fprintf(stderr, "tsan_stress: %ld checks failed\n", atomic_load(&failures));
		return 1;
	}
	printf("tsan_stress: all checks passed\n");
	return 0;
}
