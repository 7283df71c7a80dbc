// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Writers of the companion modules get in under continuous load (a writer
 * that a stream of readers can starve is the soft lockup that got the
 * kernel's idr rwlock reverted): three threads charge, add or commit without
 * pause while the test thread calls the operations that take the module's
 * lock or fold every thread's share, and times each call.  The bound is
 * generous for a loaded 2-core machine (a starved writer waits forever, a
 * fair one micro- to milliseconds); the figures are logged for
 * RELIABILITY.md.  The store's and the id map's writers are timed the same
 * way in test_concurrency.c (writer_not_starved) and test_idmap.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "compiler.h"
#include "testutil.h"

#define NLOAD 3
#define BOUND_NS 2000000000ULL

/* The load: NLOAD threads running @fn(@obj, index) until told to stop. */
struct load {
	void (*fn)(void *obj, int idx);
	void *obj;
	bool stop;
	int running;
	long ops;
	pthread_t tid[NLOAD];
};

struct load_arg {
	struct load *l;
	int idx;
};

static struct load_arg load_args[NLOAD];

static void *load_thread(void *arg)
{
	struct load_arg *a = arg;
	struct load *l = a->l;
	long n = 0;

	PSI_FETCH_ADD(l->running, 1, SEQ_CST);
	while (!PSI_READ_ONCE(l->stop)) {
		l->fn(l->obj, a->idx);
		if (!(++n & 63))
			PSI_FETCH_ADD(l->ops, 64, RELAXED);
	}
	return NULL;
}

static void load_start(struct load *l)
{
	int i;

	for (i = 0; i < NLOAD; i++) {
		load_args[i] = (struct load_arg){ l, i };
		cr_assert_eq(pthread_create(&l->tid[i], NULL, load_thread, &load_args[i]), 0);
	}
	while (PSI_LOAD_SEQ_CST(l->running) < NLOAD || PSI_LOAD_SEQ_CST(l->ops) < 64 * NLOAD)
		sched_yield();
}

/* Stops the load; returns the operations it did while the writer ran. */
static long load_stop(struct load *l, long ops_at_start)
{
	int i;

	PSI_STORE_SEQ_CST(l->stop, true);
	for (i = 0; i < NLOAD; i++)
		pthread_join(l->tid[i], NULL);
	return PSI_LOAD_SEQ_CST(l->ops) - ops_at_start;
}

/*
 * The writer's loop: at least ps_test_iters(300) rounds and at least 0.3 s
 * (scaled, 50 ms at the least), so the load runs throughout.
 */
static bool writer_more(long i, uint64_t start)
{
	double secs = 0.3 * ps_test_scale();

	if (secs < 0.05)
		secs = 0.05;
	return i < ps_test_iters(300) || ps_test_now_ns() - start < (uint64_t)(secs * 1e9);
}

/* The worst time of one call, in ns. */
struct worst {
	const char *what;
	uint64_t ns;
};

#define TIMED(w, call)                                                                             \
	do {                                                                                       \
		uint64_t t0_ = ps_test_now_ns(), d_;                                                       \
		int r_ = (call);                                                                   \
		d_ = ps_test_now_ns() - t0_;                                                               \
		cr_assert_geq(r_, 0, "%s: %s", (w)->what, strerror(-r_));                          \
		if (d_ > (w)->ns)                                                                  \
			(w)->ns = d_;                                                              \
	} while (0)

static void report(const char *module, const char *kind, const struct worst *w, int nw,
		long writes, long load_ops)
{
	char line[512];
	size_t off = 0;
	int i;

	for (i = 0; i < nw; i++) {
		off += (size_t)snprintf(line + off, sizeof(line) - off, "%s%s %.3f ms",
				i ? ", " : "", w[i].what, (double)w[i].ns / 1e6);
		cr_assert_lt(w[i].ns, BOUND_NS, "%s %s: %s waited %.3f s", module, kind, w[i].what,
				(double)w[i].ns / 1e9);
	}
	cr_assert_gt(load_ops, 0, "%s %s: the load made no progress", module, kind);
	cr_log_info("%s %s: %ld writer calls under %d continuous threads (%ld of their "
		    "operations meanwhile), worst: %s",
			module, kind, writes, NLOAD, load_ops, line);
}

/*
 * The writer's side of every test: start the load (@fn on @obj), run @round
 * (one round of the writer's timed calls, @nw of them, into @w) until
 * writer_more() says stop, stop the load and report.
 */
static void run_writer(const char *module, const char *kind, void (*fn)(void *obj, int idx),
		void *obj, void (*round)(void *obj, struct worst *w, long i), struct worst *w,
		int nw)
{
	struct load l = { .fn = fn, .obj = obj };
	long i, ops0;
	uint64_t start;

	load_start(&l);
	ops0 = PSI_LOAD_SEQ_CST(l.ops);
	start = ps_test_now_ns();
	for (i = 0; writer_more(i, start); i++)
		round(obj, w, i);
	report(module, kind, w, nw, nw * i, load_stop(&l, ops0));
}

/* ---- ps_charge: set_limit, stat and drain against chargers ---- */

struct charge_tree {
	struct ps_charge *root, *leaf[NLOAD];
};

static void charge_one(void *obj, int idx)
{
	struct charge_tree *t = obj;

	TCHECK(ps_charge_try(t->leaf[idx], 1, NULL) == 0, "charge");
	TCHECK(ps_charge_uncharge(t->leaf[idx], 1) == 0, "uncharge");
}

static void charge_round(void *obj, struct worst *w, long i)
{
	struct charge_tree *t = obj;
	struct ps_charge_stat st;

	TIMED(&w[0], ps_charge_set_limit(t->root, (i & 1) ? 1L << 40 : 1L << 39));
	TIMED(&w[1], ps_charge_stat(t->root, &st));
	TIMED(&w[2], ps_charge_drain_stock(t->root));
}

KIND_TEST(fairness, charge_writer)
{
	struct charge_tree t;
	struct worst w[3] = { { "set_limit", 0 }, { "stat", 0 }, { "drain_stock", 0 } };
	long i;

	t.root = ps_charge_create(*kind, NULL, 1L << 40);
	cr_assert_not_null(t.root);
	for (i = 0; i < NLOAD; i++) {
		t.leaf[i] = ps_charge_create(*kind, t.root, 1L << 30);
		cr_assert_not_null(t.leaf[i]);
	}
	run_writer("charge", ps_charge_kind_name(*kind), charge_one, &t, charge_round, w, 3);
	for (i = 0; i < NLOAD; i++)
		cr_assert_eq(ps_charge_destroy(t.leaf[i]), 0);
	cr_assert_eq(ps_charge_read(t.root, PS_CHARGE_USAGE), 0);
	cr_assert_eq(ps_charge_destroy(t.root), 0);
}

/* ---- ps_pcounter: sum, fold and set_batch against adders ---- */

static void pcounter_one(void *obj, int idx)
{
	(void)idx;
	TCHECK(ps_pcounter_add(obj, 1) == 0, "add");
	TCHECK(ps_pcounter_add(obj, -1) == 0, "add");
}

static int sum_call(struct ps_pcounter *pc)
{
	(void)ps_pcounter_sum(pc);
	return 0;
}

static void pcounter_round(void *obj, struct worst *w, long i)
{
	TIMED(&w[0], sum_call(obj));
	TIMED(&w[1], ps_pcounter_fold(obj));
	TIMED(&w[2], ps_pcounter_set_batch(obj, (i & 1) ? 32 : 64));
}

Test(fairness, pcounter_writer)
{
	struct ps_pcounter *pc = ps_pcounter_create(0, 32);
	struct worst w[3] = { { "sum", 0 }, { "fold", 0 }, { "set_batch", 0 } };

	cr_assert_not_null(pc);
	run_writer("pcounter", "batch 32/64", pcounter_one, pc, pcounter_round, w, 3);
	cr_assert_eq(ps_pcounter_sum(pc), 0);
	ps_pcounter_destroy(pc);
}

/* ---- ps_commit: set_mode (a switch to NEVER folds) and exact reads against committers ---- */

static void commit_one(void *obj, int idx)
{
	(void)idx;
	TCHECK(ps_commit_charge(obj, 1) == 0, "commit");
	TCHECK(ps_commit_uncharge(obj, 1) == 0, "uncommit");
}

static int exact_call(struct ps_commit *cm)
{
	return ps_commit_committed(cm, true) >= 0 ? 0 : -EINVAL;
}

static void commit_round(void *obj, struct worst *w, long i)
{
	TIMED(&w[0], ps_commit_set_mode(obj, (i & 1) ? PS_OVERCOMMIT_GUESS : PS_OVERCOMMIT_NEVER));
	TIMED(&w[1], exact_call(obj));
}

Test(fairness, commit_writer)
{
	struct ps_commit *cm = ps_commit_create(PS_OVERCOMMIT_GUESS, 1ULL << 30, NLOAD + 1);
	struct worst w[2] = { { "set_mode", 0 }, { "committed(exact)", 0 } };

	cr_assert_not_null(cm);
	run_writer("commit", "guess/never", commit_one, cm, commit_round, w, 2);
	cr_assert_eq(ps_commit_committed(cm, true), 0);
	ps_commit_destroy(cm);
}

/* ---- RWLOCK stores: a writer beside readers whose sections nest ---- */

/*
 * Readers inside a section go past a writer that waits (polstore/store.h,
 * the lock order), so the sections of two stores may nest in any order
 * without deadlock.  The writer is still not starved: each reader leaves
 * every section between rounds, and a reader outside every section is
 * turned away while a writer waits.
 */
struct nested_pair {
	struct ps_store *a, *b;
	struct ps_policy *pol;
};

static void nested_one(void *obj, int idx)
{
	struct nested_pair *p = obj;
	struct ps_store *outer = (idx & 1) ? p->a : p->b, *inner = (idx & 1) ? p->b : p->a;

	ps_store_read_lock(outer);
	ps_store_read_lock(inner);
	TCHECK(ps_store_lookup_borrow(inner, 5) != NULL, "borrow");
	ps_policy_put(ps_store_lookup(outer, 5)); /* nested in its own store's section too */
	ps_store_read_unlock(inner);
	ps_store_read_unlock(outer);
}

static void nested_round(void *obj, struct worst *w, long i)
{
	struct nested_pair *p = obj;

	TIMED(&w[0], ps_store_set(p->a, 100 + (uint64_t)(i & 7), 200, p->pol));
	TIMED(&w[1], ps_store_set(p->b, 100 + (uint64_t)(i & 7), 200, p->pol));
}

Test(fairness, rwlock_writer_beside_nested_readers)
{
	struct nested_pair p = { ps_store_create(PS_SYNC_RWLOCK), ps_store_create(PS_SYNC_RWLOCK),
		ps_test_bind(1) };
	struct worst w[2] = { { "set(a)", 0 }, { "set(b)", 0 } };

	cr_assert_eq(ps_store_set(p.a, 0, 10, p.pol), 0);
	cr_assert_eq(ps_store_set(p.b, 0, 10, p.pol), 0);
	run_writer("store", "rwlock, nested sections", nested_one, &p, nested_round, w, 2);
	ps_store_destroy(p.a);
	ps_store_destroy(p.b);
	ps_policy_put(p.pol);
}
