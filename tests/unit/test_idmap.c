// SPDX-License-Identifier: LGPL-2.1-or-later
/* ps_idmap: every test runs once per variant (SPIN, RWLOCK, RCU). */
#include "compiler.h"
#include "idmap_test.h"

/* Distinct non-NULL fake objects: never dereferenced. */
static char objs[4096];

#define OBJ(i) ((void *)&objs[(i) % sizeof(objs)])

static void *find(struct ps_idmap *map, int id)
{
	void *p;

	ps_idmap_read_lock(map);
	p = ps_idmap_find(map, id);
	ps_idmap_read_unlock(map);
	return p;
}

static int alloc(struct ps_idmap *map, void *p, int min, int max)
{
	int id = -1, ret = ps_idmap_alloc(map, p, min, max, &id);

	return ret ? ret : id;
}

struct ps_idmap *mk(enum ps_idmap_sync sync)
{
	struct ps_idmap *map = ps_idmap_create(sync);

	cr_assert_not_null(map, "create: %s", strerror(errno));
	cr_assert_eq(ps_idmap_sync_kind(map), (int)sync);
	return map;
}

Test(idmap, names_and_args)
{
	struct ps_idmap *map;
	int id = 42;
	void *old = NULL;

	EXPECT_NAMES(ps_idmap_sync_name, ps_idmap_sync_from_name, PS_IDMAP_SYNC_COUNT,
			PS_IDMAP_RWLOCK, "rwlock", "seqlock");
	errno = 0;
	cr_expect_null(ps_idmap_create(PS_IDMAP_SYNC_COUNT));
	cr_expect_eq(errno, EINVAL);

	map = mk(PS_IDMAP_RCU);
	cr_expect_eq(ps_idmap_alloc(map, NULL, 0, 10, &id), -EINVAL);
	cr_expect_eq(ps_idmap_alloc(map, OBJ(1), -1, 10, &id), -EINVAL);
	cr_expect_eq(ps_idmap_alloc(map, OBJ(1), 5, 4, &id), -EINVAL);
	cr_expect_eq(ps_idmap_alloc(map, OBJ(1), 0, 4, NULL), -EINVAL);
	cr_expect_eq(ps_idmap_alloc(NULL, OBJ(1), 0, 4, &id), -EINVAL);
	cr_expect_eq(id, 42, "untouched on error");
	cr_expect_eq(ps_idmap_replace(map, 0, NULL, &old), -EINVAL);
	cr_expect_eq(ps_idmap_replace(map, -1, OBJ(1), &old), -EINVAL);
	cr_expect_eq(ps_idmap_remove(map, -1, &old), -EINVAL);
	cr_expect_eq(ps_idmap_remove(NULL, 0, &old), -EINVAL);
	cr_expect_null(old);
	cr_expect_eq(ps_idmap_free_rcu(map, NULL, free), -EINVAL);
	cr_expect_eq(ps_idmap_count(NULL), -EINVAL);
	cr_expect_eq(ps_idmap_count(map), 0);
	ps_idmap_read_lock(map);
	cr_expect_null(ps_idmap_find(map, -1));
	cr_expect_null(ps_idmap_find(map, 0));
	cr_expect_null(ps_idmap_get_next(map, NULL));
	id = -5;
	cr_expect_null(ps_idmap_get_next(map, &id));
	ps_idmap_read_unlock(map);
	ps_idmap_destroy(map);
	ps_idmap_destroy(NULL);
}

IDMAP_TEST(idmap, lowest_free_alloc)
{
	struct ps_idmap *map = mk(*sync);
	void *old;
	int i;

	for (i = 0; i < 200; i++)
		cr_assert_eq(alloc(map, OBJ(i), 0, INT_MAX), i);
	cr_assert_eq(ps_idmap_count(map), 200);
	cr_assert_eq(ps_idmap_remove(map, 7, &old), 0);
	cr_assert_eq(old, OBJ(7));
	cr_assert_eq(ps_idmap_remove(map, 130, NULL), 0);
	cr_assert_eq(ps_idmap_remove(map, 7, NULL), -ENOENT);
	cr_assert_null(find(map, 7));
	cr_assert_eq(alloc(map, OBJ(1007), 0, INT_MAX), 7, "lowest free id first");
	cr_assert_eq(alloc(map, OBJ(1130), 0, INT_MAX), 130);
	cr_assert_eq(alloc(map, OBJ(200), 0, INT_MAX), 200);
	cr_assert_eq(alloc(map, OBJ(5000), 5000, INT_MAX), 5000, "min respected");
	cr_assert_eq(alloc(map, OBJ(201), 150, 6000), 201);
	cr_assert_eq(find(map, 7), OBJ(1007));
	cr_assert_eq(find(map, 5000), OBJ(5000));
	cr_assert_null(find(map, 4999));
	cr_assert_null(find(map, INT_MAX));

	/* A small range fills up, then -ENOSPC and nothing changes. */
	cr_assert_eq(alloc(map, OBJ(1), 10000, 10002), 10000);
	cr_assert_eq(alloc(map, OBJ(2), 10000, 10002), 10001);
	cr_assert_eq(alloc(map, OBJ(3), 10000, 10002), 10002);
	i = ps_idmap_count(map);
	cr_assert_eq(alloc(map, OBJ(4), 10000, 10002), -ENOSPC);
	cr_assert_eq(alloc(map, OBJ(4), 0, 10), -ENOSPC);
	cr_assert_eq(ps_idmap_count(map), i);
	cr_assert_eq(alloc(map, OBJ(4), 10000, 10003), 10003);

	/* The very top of the id space. */
	cr_assert_eq(alloc(map, OBJ(9), INT_MAX, INT_MAX), INT_MAX);
	cr_assert_eq(alloc(map, OBJ(9), INT_MAX, INT_MAX), -ENOSPC);
	cr_assert_eq(find(map, INT_MAX), OBJ(9));
	cr_assert_eq(alloc(map, OBJ(8), INT_MAX - 1, INT_MAX), INT_MAX - 1);
	ps_idmap_destroy(map);
}

/* Fill whole leaves and a whole second-level node: the full bits must propagate and clear. */
IDMAP_TEST(idmap, full_subtrees)
{
	struct ps_idmap *map = mk(*sync);
	int i, n = 64 * 64 + 70;

	for (i = 0; i < n; i++)
		cr_assert_eq(alloc(map, OBJ(i), 0, INT_MAX), i);
	cr_assert_eq(ps_idmap_remove(map, 4095, NULL), 0);
	cr_assert_eq(alloc(map, OBJ(1), 0, INT_MAX), 4095);
	cr_assert_eq(ps_idmap_remove(map, 63, NULL), 0);
	cr_assert_eq(ps_idmap_remove(map, 64, NULL), 0);
	cr_assert_eq(alloc(map, OBJ(1), 10, INT_MAX), 63);
	cr_assert_eq(alloc(map, OBJ(1), 10, INT_MAX), 64);
	cr_assert_eq(alloc(map, OBJ(1), 10, INT_MAX), n);
	cr_assert_eq(alloc(map, OBJ(1), 0, n), -ENOSPC);
	cr_assert_eq(ps_idmap_count(map), n + 1);
	ps_idmap_destroy(map);
}

/* Inside a read-side section: ps_idmap_for_each() visits @ids[0 .. @n), in order, with OBJ(i). */
static void expect_walk(struct ps_idmap *map, const int *ids, int n)
{
	int id, seen = 0;
	void *p;

	ps_idmap_for_each(map, p, id) {
		cr_assert_lt(seen, n);
		cr_assert_eq(id, ids[seen]);
		cr_assert_eq(p, OBJ(seen));
		seen++;
	}
	cr_assert_eq(seen, n);
}

/*
 * Walks that reach PS_IDMAP_ID_MAX end there, in one section
 * (ps_idmap_for_each()) or one section per step (the idiom of idmap.h).
 * This file is built with -ftrapv: an id++ past INT_MAX aborts.
 */
IDMAP_TEST(idmap, walks_end_at_id_max)
{
	static const int ids[] = { 0, 5, PS_IDMAP_ID_MAX - 1, PS_IDMAP_ID_MAX };
	const int n = sizeof(ids) / sizeof(ids[0]);
	struct ps_idmap *map = mk(*sync);
	int i, id, seen = 0;
	void *p;

	for (i = 0; i < n; i++)
		cr_assert_eq(alloc(map, OBJ(i), ids[i], ids[i]), ids[i]);
	ps_idmap_read_lock(map);
	expect_walk(map, ids, n);
	ps_idmap_for_each(map, p, id)
		if (id == 5)
			break;
	cr_assert_eq(id, 5, "break leaves the id being visited");
	ps_idmap_read_unlock(map);

	seen = 0;
	for (id = 0;; id++) {
		ps_idmap_read_lock(map);
		p = ps_idmap_get_next(map, &id);
		if (p) {
			cr_assert_eq(id, ids[seen]);
			seen++;
		}
		ps_idmap_read_unlock(map);
		if (!p || id == PS_IDMAP_ID_MAX)
			break;
	}
	cr_assert_eq(seen, n);
	ps_idmap_destroy(map);
}

IDMAP_TEST(idmap, replace_remove_get_next)
{
	static const int ids[] = { 0, 1, 63, 64, 65, 4095, 4096, 262143, 262144, 1 << 20,
		(1 << 30) - 1, 1 << 30, INT_MAX - 64, INT_MAX };
	const int n = sizeof(ids) / sizeof(ids[0]);
	struct ps_idmap *map = mk(*sync);
	void *old = NULL;
	int i, id;

	for (i = n - 1; i >= 0; i--)
		cr_assert_eq(alloc(map, OBJ(i), ids[i], ids[i]), ids[i]);
	cr_assert_eq(ps_idmap_count(map), n);

	/* A walk visits every id once, in order. */
	ps_idmap_read_lock(map);
	expect_walk(map, ids, n);
	id = 66;
	cr_assert_eq(ps_idmap_get_next(map, &id), OBJ(5));
	cr_assert_eq(id, 4095);
	ps_idmap_read_unlock(map);

	cr_assert_eq(ps_idmap_replace(map, 4096, OBJ(100), &old), 0);
	cr_assert_eq(old, OBJ(6));
	cr_assert_eq(find(map, 4096), OBJ(100));
	cr_assert_eq(ps_idmap_replace(map, 4097, OBJ(100), &old), -ENOENT);
	cr_assert_eq(ps_idmap_replace(map, 5, OBJ(100), NULL), -ENOENT);
	cr_assert_eq(ps_idmap_count(map), n);

	cr_assert_eq(ps_idmap_remove(map, 4095, &old), 0);
	cr_assert_eq(old, OBJ(5));
	cr_assert_eq(ps_idmap_remove(map, 262144, NULL), 0);
	ps_idmap_read_lock(map);
	id = 66;
	cr_assert_eq(ps_idmap_get_next(map, &id), OBJ(100));
	cr_assert_eq(id, 4096);
	id = 262143 + 1;
	cr_assert_eq(ps_idmap_get_next(map, &id), OBJ(9));
	cr_assert_eq(id, 1 << 20);
	id = INT_MAX - 63;
	cr_assert_eq(ps_idmap_get_next(map, &id), OBJ(13));
	cr_assert_eq(id, INT_MAX);
	ps_idmap_read_unlock(map);
	cr_assert_eq(ps_idmap_count(map), n - 2);
	ps_idmap_destroy(map);
}

/* Randomised differential test against a plain array. */
#define MODEL_N 3000

IDMAP_TEST(idmap, differential)
{
	static void *model[MODEL_N];
	struct ps_idmap *map = mk(*sync);
	uint64_t seed = 0x5eed + (uint64_t)*sync;
	long ops = ps_test_iters(60000), k;
	int i, lo, hi, want, got, id, count = 0;
	void *p, *old;

	memset(model, 0, sizeof(model));
	for (k = 0; k < ops; k++) {
		uint64_t r = ps_test_rand(&seed);

		i = (int)((r >> 8) % MODEL_N);
		switch (r % 4) {
		case 0:
		case 1:
			lo = i;
			hi = lo + (int)((r >> 32) % 64);
			if (hi >= MODEL_N)
				hi = MODEL_N - 1;
			for (want = lo; want <= hi && model[want]; want++)
				;
			got = alloc(map, OBJ(k), lo, hi);
			if (want > hi) {
				cr_assert_eq(got, -ENOSPC, "[%d,%d] full, got %d", lo, hi, got);
			} else {
				cr_assert_eq(got, want, "[%d,%d]", lo, hi);
				model[want] = OBJ(k);
				count++;
			}
			break;
		case 2:
			got = ps_idmap_remove(map, i, &old);
			if (model[i]) {
				cr_assert_eq(got, 0);
				cr_assert_eq(old, model[i]);
				model[i] = NULL;
				count--;
			} else {
				cr_assert_eq(got, -ENOENT);
			}
			break;
		default:
			got = ps_idmap_replace(map, i, OBJ(k + 1), &old);
			if (model[i]) {
				cr_assert_eq(got, 0);
				cr_assert_eq(old, model[i]);
				model[i] = OBJ(k + 1);
			} else {
				cr_assert_eq(got, -ENOENT);
			}
			break;
		}
		cr_assert_eq(find(map, i), model[i]);
	}
	cr_assert_eq(ps_idmap_count(map), count);
	ps_idmap_read_lock(map);
	i = 0;
	ps_idmap_for_each(map, p, id) {
		while (!model[i])
			i++;
		cr_assert_eq(id, i);
		cr_assert_eq(p, model[i]);
		i++;
	}
	for (; i < MODEL_N; i++)
		cr_assert_null(model[i]);
	ps_idmap_read_unlock(map);
	ps_idmap_destroy(map);
}

/* ---- Allocation failure leaves the bindings as they were ---------------- */

IDMAP_TEST(idmap, allocation_failure)
{
	struct ps_idmap *map;
	int i;

	ps_test_alloc_fail_after(-1);
	map = mk(*sync);
	for (i = 0; i < 64; i++)
		cr_assert_eq(alloc(map, OBJ(i), 0, INT_MAX), i);
	ps_test_alloc_fail_after(0);
	cr_assert_eq(alloc(map, OBJ(1), 0, 63), -ENOSPC);
	cr_assert_eq(alloc(map, OBJ(1), 0, INT_MAX), -ENOMEM, "needs a new leaf");
	cr_assert_eq(alloc(map, OBJ(1), 1 << 20, INT_MAX), -ENOMEM, "needs new levels");
	cr_assert_eq(ps_idmap_count(map), 64);
	errno = 0;
	cr_assert_null(ps_idmap_create(*sync));
	cr_assert_eq(errno, ENOMEM);
	ps_test_alloc_fail_after(-1);
	cr_assert_eq(alloc(map, OBJ(1), 0, INT_MAX), 64);
	cr_assert_eq(alloc(map, OBJ(1), 1 << 20, INT_MAX), 1 << 20);
	cr_assert_eq(find(map, 63), OBJ(63));
	ps_idmap_destroy(map);
	ps_test_alloc_restore();
}

/* ---- Concurrent readers and writers (the idmap workload of testutil.h) ------ */

IDMAP_TEST(idmap, concurrent_smoke)
{
	struct ps_test_idmap_load l = {
		.sync = *sync, .walkers = 2, .mutators = 2, .slow = ps_test_scale() < 0.5,
		.run = { .iters = ps_test_iters(20000) },
	};

	cr_assert_eq(ps_test_idmap_run(&l), 0, "%s", l.run.why);
	cr_log_info("%s: %ld objects read", ps_idmap_sync_name(*sync), l.reads);
}

/* ---- A writer gets in while readers never stop --------------------------- */

struct rshared {
	struct ps_idmap *map;
	bool slow;
	long every; /* sections between progress reports */
	int stop;
	long sections;
};

static void *hammer(void *arg)
{
	struct rshared *sh = arg;
	long n = 0;
	int id;

	/* Back-to-back sections, no pause: some reader is always inside. */
	while (!PSI_LOAD_ACQUIRE(sh->stop)) {
		ps_idmap_read_lock(sh->map);
		id = 0;
		(void)ps_idmap_get_next(sh->map, &id);
		(void)ps_idmap_find(sh->map, 3);
		ps_idmap_read_unlock(sh->map);
		if (++n % sh->every == 0)
			PSI_ADD_FETCH(sh->sections, sh->every, RELAXED);
		if (sh->slow) /* valgrind's scheduler (testutil.h: ps_test_idmap_load.slow) */
			sched_yield();
	}
	return NULL;
}

IDMAP_TEST(idmap, writer_not_starved)
{
	struct rshared sh = { .slow = ps_test_scale() < 0.5 };
	bool stalled = false;
	pthread_t r[3];
	long i, n = ps_test_iters(300);
	uint64_t t, worst = 0, start;
	long before, during, first;
	int id;

	sh.every = sh.slow ? 1 : 64;
	sh.map = mk(*sync);
	for (i = 0; i < 3; i++)
		cr_assert_eq(pthread_create(&r[i], NULL, hammer, &sh), 0);
	/* Let the readers get going first. */
	while (PSI_READ_ONCE(sh.sections) < 3 * sh.every * 16)
		sched_yield();
	first = PSI_READ_ONCE(sh.sections);
	start = ps_test_now_ns();
	/* No cr_assert while the readers run: a failed test must still stop them. */
	for (i = 0; i < n && !stalled; i++) {
		t = ps_test_now_ns();
		if (ps_idmap_alloc(sh.map, OBJ(i), 0, INT_MAX, &id) ||
				ps_idmap_remove(sh.map, id, NULL))
			stalled = true;
		t = ps_test_now_ns() - t;
		if (t > worst)
			worst = t;
		/* Readers must make progress between writes: they never stop. */
		before = PSI_READ_ONCE(sh.sections);
		t = ps_test_now_ns();
		while (!stalled && PSI_READ_ONCE(sh.sections) == before) {
			if (ps_test_now_ns() - t > 10000000000ull)
				stalled = true;
			sched_yield();
		}
	}
	t = ps_test_now_ns() - start;
	during = PSI_READ_ONCE(sh.sections) - first;
	PSI_STORE_RELEASE(sh.stop, 1);
	for (i = 0; i < 3; i++)
		pthread_join(r[i], NULL);
	cr_assert_not(stalled, "a write failed or the readers stalled for 10 s");
	cr_log_info("%s: %ld writes in %.3f s under %ld reader sections, worst %.3f ms",
			ps_idmap_sync_name(*sync), 2 * n, t / 1e9, during, worst / 1e6);
	/* Generous: a starved writer waits forever, a fair one micro- to milliseconds. */
	cr_assert_lt(worst, 2000000000ull, "a writer waited %.3f s", worst / 1e9);
	ps_idmap_destroy(sh.map);
}
