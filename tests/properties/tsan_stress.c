// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * tsan_stress: a short, bounded run of every concurrent path, as a plain C
 * program (Criterion cannot start under -fsanitize=thread), for the TSan
 * build (CTest test tsan.stress, label tsan).  It is cheap enough to run as
 * unit.tsan_stress in ordinary builds too.
 *
 *   1. the linearizability oracle (tests/common/linearizability.h) on every store variant;
 *   2. a mix on every store variant: readers with references and borrowing
 *      readers (read_lock/lookup_borrow/read_unlock) in turn, writers, a
 *      foreach; then fresh policies per set under readers holding
 *      references (the striped counts of hot policies switching on and off);
 *   3. every ps_charge kind: charge/uncharge on a two-level hierarchy while
 *      another thread reads it, then while the root's limit changes and
 *      stocks are drained;
 *   4. ps_pcounter add/read/sum/fold/set_batch/snapshot and ps_commit
 *      charge/uncharge/set_mode;
 *   5. every ps_idmap variant: alloc/replace/remove with deferred frees
 *      (free_rcu) while readers find and walk the objects;
 *   6. the store mix again on stores of the checking mode, its watchdog
 *      running;
 *   7. RWLOCK readers nesting two stores' sections in both orders beside
 *      writers of both (nested readers go past waiting writers);
 *   8. ps_store_destroy_deferred() of every variant while readers are
 *      still inside their sections;
 *   9. an RCU_QSBR stall with its warning: the watchdog reading the
 *      threads' counters while they go on and offline;
 *  10. the read index of RCU and RCU_QSBR: readers (lookups, next, windows)
 *      beside a writer of sets across many leaves and batches, each answer
 *      checked against the versions published meanwhile.
 *
 * Phases 2 to 5 and 10 are the workloads of testutil.h (testutil_load.c), the same
 * code the unit suites run.  Every check failure is printed and counted;
 * the exit status is 1 if any failed (TSan itself exits non-zero on a
 * report: halt_on_error or its exitcode).  POLSTORE_TSAN_SECONDS (default
 * 0.3) is the duration of each timed phase.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <polstore/polstore.h>

#include "compiler.h"
#include "linearizability.h"
#define PS_TEST_NO_CRITERION
#include "testutil.h"

static long failures;
static double phase_seconds = 0.3;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "tsan_stress: FAILED %s:%d: %s: ", __FILE__, __LINE__,     \
					#cond);                                                    \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			PSI_FETCH_ADD(failures, 1, SEQ_CST);                                            \
		}                                                                                  \
	} while (0)

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

/*
 * The workloads below are testutil.h's, which the unit suites run too
 * (test_concurrency, test_refcount, test_charge, test_pcounter, test_idmap):
 * here each is bounded by time, at least a few rounds per thread.
 */
static struct ps_test_run timed(long min_iters, uint64_t seed)
{
	return (struct ps_test_run){ .iters = LONG_MAX, .min_iters = min_iters,
		.duration_ns = (uint64_t)(phase_seconds * 1e9), .seed = seed };
}

/* ---- 2. store mix: policy k only ever lives in region k ---- */

static void mix_all(void)
{
	int s;

	for (s = 0; s < PS_SYNC_COUNT; s++) {
		struct ps_test_store_load l = {
			.sync = (enum ps_sync)s, .readers = 3, .walkers = 1, .writers = 2,
			.read = PS_TEST_READ_BOTH, .region_size = 256, .run = timed(16, 0),
		};

		CHECK(ps_test_store_run(&l) == 0, "mix %s: %s", ps_sync_name(l.sync), l.run.why);
		printf("mix      %-8s %8ld lookups, %6ld sets, %5ld walks\n", ps_sync_name(l.sync),
				l.lookups, l.sets, l.walks);
	}
}

/*
 * ---- 2b. fresh policies (issue 12): every set installs a new policy only the
 * store owns, readers hold what they find, so policies go hot (per-CPU
 * stripes), leave their store (stripes folded) and are freed by whichever
 * put is last: a reader's or the store's.
 */
static void fresh_all(void)
{
	int s;

	for (s = 0; s < PS_SYNC_COUNT; s++) {
		struct ps_test_store_load l = {
			.sync = (enum ps_sync)s, .readers = 2, .writers = 1, .hold = 8,
			.churn = true, .whole_regions = true, .region_size = 16, .yield_every = 8,
			.run = timed(64, 0),
		};

		CHECK(ps_test_store_run(&l) == 0, "fresh %s: %s", ps_sync_name(l.sync), l.run.why);
		printf("fresh    %-8s %8ld lookups, %6ld sets\n", ps_sync_name(l.sync), l.lookups,
				l.sets);
	}
}

/* ---- 3. charge: a monitor beside charges, then limits changed under them ---- */

static void charge_all(void)
{
	int k;

	for (k = 0; k < PS_CHARGE_KIND_COUNT; k++) {
		struct ps_test_charge_load b = {
			.kind = (enum ps_charge_kind)k, .workers = 4, .root_limit = 200,
			.parent_limit = 150, .leaf_limit = 60, .monitor = true,
			.expect_refusals = true, .run = timed(1000, 0),
		}, l = {
			.kind = (enum ps_charge_kind)k, .workers = 3, .root_limit = 400,
			.parent_limit = PS_CHARGE_MAX, .leaf_limit = PS_CHARGE_MAX,
			.limit_rounds = 2000, .limit_lo = 100, .limit_hi = 400,
			.run = timed(16, 77),
		};
		const char *name = ps_charge_kind_name(b.kind);

		CHECK(ps_test_charge_run(&b) == 0, "charge %s bounded: %s", name, b.run.why);
		CHECK(ps_test_charge_run(&l) == 0, "charge %s limits: %s", name, l.run.why);
		printf("charge   %-8s overshoot %ld of %ld, %ld limit changes\n", name, b.overshoot,
				b.bound, l.limit_ok);
	}
}

/* ---- 4. pcounter and commit ---- */

static void pcounter_all(void)
{
	struct ps_test_pcounter_load b = {
		.pc = ps_pcounter_create(0, 32), .adders = 3, .check_bound = true,
		.run = timed(16, 1234567),
	}, a = {
		.pc = ps_pcounter_create(1000, 16), .adders = 3, .admin = true,
		.run = timed(16, 99),
	};
	struct ps_test_commit_load c = {
		.cm = ps_commit_create(PS_OVERCOMMIT_NEVER, 1 << 20, 4), .committers = 3,
		.pages = 2, .admin = true, .run = timed(16, 0),
	};

	if (!b.pc || !a.pc || !c.cm) {
		perror("ps_pcounter_create/ps_commit_create");
		exit(2);
	}
	CHECK(ps_test_pcounter_run(&b) == 0, "pcounter bounded: %s", b.run.why);
	CHECK(ps_test_pcounter_run(&a) == 0, "pcounter admin: %s", a.run.why);
	CHECK(ps_test_commit_run(&c) == 0, "commit: %s", c.run.why);
	CHECK(ps_commit_uncharge(c.cm, c.held) == 0 && ps_commit_committed(c.cm, true) == 0,
			"commit left %lld", (long long)ps_commit_committed(c.cm, true));
	ps_pcounter_destroy(b.pc);
	ps_pcounter_destroy(a.pc);
	ps_commit_destroy(c.cm);
	printf("pcounter %ld snapshots checked, largest error %lld; commit %lld kept, "
	       "%ld refused\n", b.snapshots, (long long)b.max_err, (long long)c.held, c.refused);
}

/* ---- 5. idmap: objects bound, replaced, unbound and freed under walks and finds ---- */

static void idmap_all(void)
{
	int s;

	for (s = 0; s < PS_IDMAP_SYNC_COUNT; s++) {
		struct ps_test_idmap_load l = {
			.sync = (enum ps_idmap_sync)s, .walkers = 3, .mutators = 2,
			.whole_walks = true, .run = timed(16, 0),
		};

		CHECK(ps_test_idmap_run(&l) == 0, "idmap %s: %s", ps_idmap_sync_name(l.sync),
				l.run.why);
		printf("idmap    %-8s %8ld objects read\n", ps_idmap_sync_name(l.sync), l.reads);
	}
}

/* ---- 6. the store mix on checked stores ---- */

static void checked_all(void)
{
	int s;

	ps_test_set_checking(true);
	for (s = 0; s < PS_SYNC_COUNT; s++) {
		struct ps_test_store_load l = {
			.sync = (enum ps_sync)s, .readers = 2, .walkers = 1, .writers = 1,
			.read = PS_TEST_READ_BOTH, .region_size = 64, .run = timed(16, 0),
		};

		CHECK(ps_test_store_run(&l) == 0, "checked %s: %s", ps_sync_name(l.sync),
				l.run.why);
		printf("checked  %-8s %8ld lookups, %6ld sets, %5ld walks\n", ps_sync_name(l.sync),
				l.lookups, l.sets, l.walks);
	}
	ps_test_set_checking(false);
}

/* ---- 7. nested RWLOCK sections of two stores beside their writers ---- */

struct nested {
	struct ps_store *a, *b;
	struct ps_policy *pol;
	int stop;
	long reads;
};

struct nested_arg {
	struct nested *n;
	int flip; /* which store is the outer one first */
};

static void *nested_reader(void *arg)
{
	struct nested *n = ((struct nested_arg *)arg)->n;
	int flip = ((struct nested_arg *)arg)->flip;
	long i;

	for (i = 0; !PSI_LOAD_SEQ_CST(n->stop); i++) {
		struct ps_store *o = (i + flip) & 1 ? n->a : n->b, *in = (i + flip) & 1 ? n->b : n->a;

		ps_store_read_lock(o);
		ps_store_read_lock(in);
		CHECK(ps_store_lookup_borrow(in, 5) == n->pol, "nested borrow");
		ps_policy_put(ps_store_lookup(o, 5));
		ps_store_read_unlock(in);
		ps_store_read_unlock(o);
	}
	PSI_FETCH_ADD(n->reads, i, SEQ_CST);
	return NULL;
}

static void nested_all(void)
{
	struct nested n = { .a = ps_store_create(PS_SYNC_RWLOCK),
		.b = ps_store_create(PS_SYNC_RWLOCK), .pol = ps_test_bind(1) };
	struct nested_arg args[2] = { { &n, 0 }, { &n, 1 } };
	pthread_t t[2];
	uint64_t t0 = ps_test_now_ns();
	long sets = 0;
	int i;

	CHECK(ps_store_set(n.a, 0, 10, n.pol) == 0 && ps_store_set(n.b, 0, 10, n.pol) == 0, "set");
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, nested_reader, &args[i]);
	while (ps_test_now_ns() - t0 < (uint64_t)(phase_seconds * 1e9) || sets < 16) {
		CHECK(ps_store_set(n.a, 20, 30, sets & 1 ? n.pol : NULL) == 0, "set a");
		CHECK(ps_store_set(n.b, 20, 30, sets & 1 ? n.pol : NULL) == 0, "set b");
		sets += 2;
	}
	PSI_STORE_SEQ_CST(n.stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("nested   rwlock   %8ld reads, %6ld sets\n", PSI_LOAD_SEQ_CST(n.reads), sets);
	ps_store_destroy(n.a);
	ps_store_destroy(n.b);
	ps_policy_put(n.pol);
}

/* ---- 8. deferred destroy while readers are inside their sections ---- */

struct retiring {
	struct ps_store *pub;
	struct ps_store *guard;
	struct ps_policy *pol;
	int stop;
};

static void *retire_reader(void *arg)
{
	struct retiring *r = arg;

	while (!PSI_LOAD_SEQ_CST(r->stop)) {
		struct ps_store *s;
		int i;

		ps_store_read_lock(r->guard);
		s = PSI_LOAD_SEQ_CST(r->pub);
		if (s) {
			ps_store_read_lock(s);
			for (i = 0; i < 64; i++)
				CHECK(ps_store_lookup_borrow(s, 5) == r->pol, "retired borrow");
			ps_store_read_unlock(s);
		}
		ps_store_read_unlock(r->guard);
	}
	return NULL;
}

static void retire_all(void)
{
	int s, round, i;

	for (s = 0; s < PS_SYNC_COUNT; s++) {
		/* The guard's flavour is the grace period's (ps_store_destroy_deferred()). */
		struct retiring r = { .guard = ps_store_create(s == PS_SYNC_RCU_QSBR ?
				PS_SYNC_RCU_QSBR : PS_SYNC_RCU), .pol = ps_test_bind(1) };
		pthread_t t[2];

		for (i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, retire_reader, &r);
		for (round = 0; round < 20; round++) {
			struct ps_store *st = ps_store_create((enum ps_sync)s);

			CHECK(st && ps_store_set(st, 0, 10, r.pol) == 0, "create");
			PSI_STORE_SEQ_CST(r.pub, st);
			sched_yield();
			PSI_STORE_SEQ_CST(r.pub, NULL);
			CHECK(ps_store_destroy_deferred(st) == 0, "retire");
		}
		PSI_STORE_SEQ_CST(r.stop, 1);
		for (i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		CHECK(ps_rcu_barrier() == 0, "barrier");
		for (i = 0; i < 500 && ps_policy_refcount(r.pol) != 1; i++)
			nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		CHECK(ps_policy_refcount(r.pol) == 1, "retire %s: stores not freed",
				ps_sync_name((enum ps_sync)s));
		printf("retire   %-8s 20 stores retired under readers\n",
				ps_sync_name((enum ps_sync)s));
		ps_store_destroy(r.guard);
		ps_policy_put(r.pol);
	}
}

/* ---- 9. an RCU_QSBR stall and its warning ---- */

static int stall_seen, stall_release, stall_online_now;

static void stall_cb(const struct ps_qsbr_stall *st, void *arg)
{
	(void)st, (void)arg;
	PSI_FETCH_ADD(stall_seen, 1, SEQ_CST);
}

static void *stall_online(void *arg)
{
	(void)arg;
	CHECK(ps_qsbr_thread_online() == 0, "online");
	PSI_STORE_SEQ_CST(stall_online_now, 1);
	while (!PSI_LOAD_SEQ_CST(stall_release))
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	ps_qsbr_thread_offline();
	return NULL;
}

static void stall_all(void)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU_QSBR);
	struct ps_policy *p = ps_test_bind(1);
	pthread_t t;
	int i;

	ps_qsbr_set_stall_warning(50, stall_cb, NULL);
	pthread_create(&t, NULL, stall_online, NULL);
	/* The sets' grace period must start with the thread online: under load it comes late. */
	while (!PSI_LOAD_SEQ_CST(stall_online_now))
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	for (i = 0; i < 1000; i++)
		CHECK(ps_store_set(s, 0, 8, i & 1 ? p : NULL) == 0, "set");
	for (i = 0; i < 1000 && !PSI_LOAD_SEQ_CST(stall_seen); i++)
		nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	PSI_STORE_SEQ_CST(stall_release, 1);
	pthread_join(t, NULL);
	CHECK(PSI_LOAD_SEQ_CST(stall_seen) > 0, "no stall warning");
	CHECK(ps_store_synchronize(s) == 0, "synchronize");
	ps_qsbr_set_stall_warning(0, NULL, NULL);
	printf("stall    rcu-qsbr %d warnings\n", PSI_LOAD_SEQ_CST(stall_seen));
	ps_store_destroy(s);
	ps_policy_put(p);
}

/* ---- 10. the read index beside a flat-out writer ---- */

static void index_all(void)
{
	static const enum ps_sync syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };
	size_t i;

	for (i = 0; i < sizeof(syncs) / sizeof(syncs[0]); i++) {
		struct ps_test_index_load l = {
			.sync = syncs[i], .readers = 2, .ranges = 1000, .run = timed(64, 0x1dea),
		};

		CHECK(ps_test_index_run(&l) == 0, "index %s: %s", ps_sync_name(l.sync), l.run.why);
		printf("index    %-8s %6ld updates, %7ld lookups, %7ld nexts, %5ld windows\n",
				ps_sync_name(l.sync), l.updates, l.lookups, l.nexts, l.windows);
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
	checked_all();
	nested_all();
	retire_all();
	stall_all();
	index_all();
	if (PSI_LOAD_SEQ_CST(failures)) {
		fprintf(stderr, "tsan_stress: %ld checks failed\n", PSI_LOAD_SEQ_CST(failures));
		return 1;
	}
	printf("tsan_stress: all checks passed\n");
	return 0;
}
