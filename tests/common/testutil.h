/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one test-support header: what the Criterion suites, the fuzz harness
 * (fuzz/) and the thread-checker driver (tsan_stress.c) share beside the
 * public API.  testutil.c and testutil_load.c implement it without
 * Criterion; a program that does not link Criterion defines
 * PS_TEST_NO_CRITERION before including it and gets everything but the
 * test macros.
 *
 *   - PS_PARAM_TEST and its wrappers: one test body per variant;
 *   - the model of ps_store_set() (shared_policy_replace() on a sorted
 *     array of ranges) and the check of a store against it;
 *   - the failing, counting allocator (through ps_set_alloc_ops());
 *   - the concurrent workloads (testutil_load.c): a store's readers and
 *     writers, ps_charge, ps_pcounter, ps_commit and ps_idmap under load,
 *     each run by its unit suite and by tsan_stress;
 *   - clocks, iteration scaling, random numbers, a BIND policy;
 *   - the thread-checker annotations of src/util/annotate.h, for the tests' own
 *     atomics-only flags (PSI_ANNOTATE_BENIGN_RACE_SIZED).
 *
 * docs/design.md: tests use the public API and this header (the white-box
 * suites test_rbtree.c and test_rcu_store.c are the declared exceptions).
 */
#ifndef POLSTORE_TESTUTIL_H
#define POLSTORE_TESTUTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <stdio.h>
#include <stdlib.h>

#ifndef PS_TEST_NO_CRITERION
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#endif

#include <polstore/polstore.h>

#include "annotate.h" /* src/util/annotate.h */
#include "clock.h"
#include "xorshift.h"

#define PS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Every variant of each module, for the test macros below and for loops. */
extern enum ps_sync ps_test_all_syncs[PS_SYNC_COUNT];
extern enum ps_idmap_sync ps_test_all_idmap_syncs[PS_IDMAP_SYNC_COUNT];
extern enum ps_charge_kind ps_test_all_charge_kinds[PS_CHARGE_KIND_COUNT];
extern enum ps_overcommit ps_test_all_overcommits[PS_OVERCOMMIT_COUNT];

/*
 * The parameters test @test runs with: the @count elements of @values
 * (each @size bytes) copied to @out, in order.  Under valgrind's default
 * runs (POLSTORE_TEST_VARIANTS=rotate in the environment, POLSTORE_LONG
 * not) only one of two, or two of three or more, picked by a hash of the
 * test's name: valgrind pays over a second to start each case's process,
 * so every test runs there, each variant in a share of them, while
 * AddressSanitizer and POLSTORE_LONG=1 run every case.
 * Return: how many were copied.
 */
size_t ps_test_params_pick(const char *test, const void *values, void *out, size_t count,
		size_t size);

#ifndef PS_TEST_NO_CRITERION
/*
 * PS_PARAM_TEST(type, var, values, count, suite, name, options...): a
 * Criterion test run once per element of @values (an array of @count
 * @type); the body sees `type *var`; the options are Criterion's
 * (.timeout = 60, .disabled = true, ...).  Every parameterised test goes
 * through it, mostly by one of the wrappers below, so a test is written
 * once for all its variants.
 */
#define PS_PARAM_TEST(type, var, values, count, suite, name, ...)                                  \
	ParameterizedTestParameters(suite, name)                                                   \
	{                                                                                          \
		static type ps_picked_[count];                                                     \
		size_t ps_n_ = ps_test_params_pick(#suite "::" #name, (values), ps_picked_,       \
				(count), sizeof(type));                                            \
                                                                                                   \
		return cr_make_param_array(type, ps_picked_, ps_n_);                               \
	}                                                                                          \
	ParameterizedTest(type *var, suite, name, ##__VA_ARGS__)

/* A test for each element of a static array @values; the body sees `type *var`. */
#define PS_ARRAY_TEST(type, var, values, suite, name, ...)                                         \
	PS_PARAM_TEST(type, var, values, PS_ARRAY_SIZE(values), suite, name, ##__VA_ARGS__)

/* A test run for every store variant; the body sees `enum ps_sync *sync`. */
#define VARIANT_TEST(suite, name, ...)                                                             \
	PS_ARRAY_TEST(enum ps_sync, sync, ps_test_all_syncs, suite, name, ##__VA_ARGS__)

/* A test for the store variants in the array @syncs; the body sees `enum ps_sync *sync`. */
#define SYNCS_TEST(syncs, suite, name, ...)                                                        \
	PS_ARRAY_TEST(enum ps_sync, sync, syncs, suite, name, ##__VA_ARGS__)

/* Every id map variant; the body sees `enum ps_idmap_sync *sync`. */
#define IDMAP_TEST(suite, name, ...)                                                               \
	PS_ARRAY_TEST(enum ps_idmap_sync, sync, ps_test_all_idmap_syncs, suite, name, ##__VA_ARGS__)

/* Every charge kind; the body sees `enum ps_charge_kind *kind`. */
#define KIND_TEST(suite, name, ...)                                                                \
	PS_ARRAY_TEST(enum ps_charge_kind, kind, ps_test_all_charge_kinds, suite, name,            \
			##__VA_ARGS__)

/* Every overcommit mode; the body sees `enum ps_overcommit *mode`. */
#define MODE_TEST(suite, name, ...)                                                                \
	PS_ARRAY_TEST(enum ps_overcommit, mode, ps_test_all_overcommits, suite, name, ##__VA_ARGS__)

/*
 * EXPECT_NAMES(name_fn, from_name_fn, count, value, name, bogus): a
 * module's name table (src/util/names.h): every value below @count round-trips,
 * @value is called @name, @count has no name, @bogus and NULL are -EINVAL.
 */
#define EXPECT_NAMES(name_fn, from_name_fn, count, value, name, bogus)                             \
	do {                                                                                       \
		int v_;                                                                            \
		for (v_ = 0; v_ < (count); v_++)                                                   \
			cr_expect_eq(from_name_fn(name_fn(v_)), v_);                               \
		cr_expect_str_eq(name_fn(value), name);                                            \
		cr_expect_null(name_fn(count));                                                    \
		cr_expect_eq(from_name_fn(bogus), -EINVAL);                                        \
		cr_expect_eq(from_name_fn(NULL), -EINVAL);                                         \
	} while (0)

/* Eight nodes, each at 20 from the others: a BIND policy places on its own node. */
static inline void ps_test_eight_nodes(void)
{
	unsigned char dist[64];
	int i, j;

	for (i = 0; i < 8; i++)
		for (j = 0; j < 8; j++)
			dist[i * 8 + j] = i == j ? 10 : 20;
	cr_assert_eq(ps_numa_set_topology(8, dist, NULL), 0);
}
#endif /* !PS_TEST_NO_CRITERION */

/*
 * Checks inside worker threads, where Criterion asserts do not belong:
 * print what failed and abort, which fails the test as a crash.
 */
#define TCHECK(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/*
 * Scale iteration counts: 1.0 normally, smaller under valgrind
 * (POLSTORE_TEST_SCALE=valgrind) or as POLSTORE_TEST_SCALE=<factor> says.
 */
double ps_test_scale(void);
long ps_test_iters(long normal);

/* True when the suite runs under valgrind (any of its tools). */
bool ps_test_on_valgrind(void);

/* A BIND policy on node @node (0 <= node < PS_MAX_NUMNODES); aborts on failure. */
struct ps_policy *ps_test_bind(int node);

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t ps_test_now_ns(void)
{
	return ps_clock_ns(CLOCK_MONOTONIC);
}

/*
 * The failing allocator: malloc/free underneath, installed with
 * ps_set_alloc_ops(), counting allocation calls, the blocks live since it
 * was installed and the failures it returned.  Counts are atomic: reclaim
 * threads allocate and free concurrently.  An arming (fail_after,
 * fail_once) numbers and fails the allocations of the thread that armed
 * it only; disarm on that thread.
 *
 * ps_test_alloc_install() installs it, zeroes its counts, fails nothing.
 * ps_test_alloc_fail_after(k): k allocations from now succeed and every
 * later one fails until the next arming; k < 0 fails none.  Installs the
 * allocator (counts kept) when it is not.
 * ps_test_alloc_fail_once(k): only the k-th allocation from now (k = 0: the
 * next one) fails.
 * ps_test_alloc_disarm(): fail none from now on; true when an armed
 * failure was reached.
 * ps_test_alloc_restore(): polstore back on its own malloc/free.
 */
void ps_test_alloc_install(void);
void ps_test_alloc_fail_after(long k);
void ps_test_alloc_fail_once(long k);
bool ps_test_alloc_disarm(void);
long ps_test_alloc_live(void);
long ps_test_alloc_injected(void);
/* malloc_usable_size() of the blocks it allocated and did not free since the install. */
long ps_test_alloc_usable(void);
void ps_test_alloc_restore(void);

/*
 * polstore's allocations from malloc()/free() under a lock that fork()
 * holds: no thread is inside the C library's allocator for polstore at a
 * fork.  For a test that forks beside threads calling polstore that
 * allocate, where the allocator has no fork handlers of its own
 * (AddressSanitizer's in GCC 12: the child would find its locks held).
 * Install it while no other thread is inside polstore; no chunk hooks (a
 * large store's chunks come from it too).
 */
void ps_test_alloc_fork_safe(void);

/*
 * The allocator's quarantine, to catch writes after free without a memory
 * checker: from ps_test_alloc_quarantine_begin() on, every block polstore
 * frees is filled with a poison byte and kept instead of freed (up to 4096
 * blocks; beyond, freed as usual).  ps_test_alloc_quarantine_end() checks
 * each kept block, prints those written to since their free (a
 * use-after-free), frees them all and returns how many were written to.
 * Installs the allocator (counts kept) when it is not.
 */
void ps_test_alloc_quarantine_begin(void);
long ps_test_alloc_quarantine_end(void);

/*
 * The reclaim thread's test hook: @fn (NULL: none) is called on the
 * reclaim thread inside the release of every store's retire batch (RCU,
 * RCU_QSBR, SEQLOCK), after the batch is released and before the release
 * is done with its store, so that a test can hold the thread in that
 * window.  Set it while no batch is in flight.
 */
void psi_test_set_release_hook(void (*fn)(void));

/*
 * Bytes of @s's read index (RCU, RCU_QSBR: polstore/static/index.h; 0 for
 * the other variants), counted node by node.  Called by the store's only
 * writer, or with no writer.
 */
size_t ps_test_index_bytes(struct ps_store *s);

/* Bytes ps_store_memory() counts for one block of @size (a range: sizeof(struct ps_range)). */
size_t ps_test_block_bytes(size_t size);

/*
 * The reclaim thread that frees what @sync's stores retire (SEQLOCK and
 * RCU: liburcu's memb flavour's, RCU_QSBR: qsbr's; shared by every store
 * of the flavour): the grace periods it has waited for since the process
 * started, the bytes queued and not yet released, and the most bytes
 * queued since the last call with @reset (which starts a new peak).  Any
 * pointer may be NULL.  Return: 0, or -EOPNOTSUPP for SPIN and RWLOCK.
 */
int ps_test_reclaim_stats(enum ps_sync sync, uint64_t *grace_periods, size_t *pending,
		size_t *peak, bool reset);

/*
 * The reclaim thread's batching (src/locks/rcu_reclaim.h): the longest
 * queued memory waits for its grace period to start when nothing asks for
 * one, the pause in queueing after which one starts, and the bytes queued
 * at which one starts at once.
 */
uint64_t ps_test_reclaim_latency_ns(void);
uint64_t ps_test_reclaim_quiet_ns(void);
size_t ps_test_reclaim_batch_bytes(void);

/*
 * The checking mode (polstore/store.h, "Misuse") for the stores created
 * from now on in this process, as POLSTORE_CHECK=1 turns it on at load.
 */
void ps_test_set_checking(bool on);

/*
 * Run @fn(@arg) in a forked child with its stderr captured into @out (@len
 * bytes, NUL-terminated), killing it after @limit_s seconds (SIGALRM; it
 * writes its stack there first).
 * Return: the signal that ended the child, 0 when it returned (or exited),
 * with *@secs (if not NULL) the time it took.
 */
int ps_test_run_child(void (*fn)(void *), void *arg, unsigned limit_s, char *out, size_t len,
		double *secs);

/*
 * The model of ps_store_set(): the kernel's shared_policy_replace() on a
 * sorted array of disjoint ranges.  A set trims, splits or removes the
 * ranges it overlaps and inserts [start, end) -> @pol unless @pol is NULL
 * or DEFAULT (a removal); ranges are never merged, not even equal
 * neighbours.  Indices may be anywhere in [0, UINT64_MAX].
 */
#define PS_MODEL_MAX 512

struct ps_model_range {
	uint64_t start, end;
	struct ps_policy *pol;
};

struct ps_model {
	int n;
	struct ps_model_range r[PS_MODEL_MAX]; /* ascending */
};

static inline void ps_model_init(struct ps_model *m)
{
	m->n = 0;
}

/* Apply a set: 0, or -ENOSPC (the model unchanged) when the result would not fit. */
int ps_model_set(struct ps_model *m, uint64_t start, uint64_t end, struct ps_policy *pol);
/* The policy at @idx, NULL in a hole. */
struct ps_policy *ps_model_at(const struct ps_model *m, uint64_t idx);
/* How many ranges hold @pol (the references the store holds on it). */
long ps_model_refs(const struct ps_model *m, const struct ps_policy *pol);
/*
 * @s holds exactly the model's ranges: ps_store_check() passes, a
 * ps_store_foreach() walk meets the model's ranges in order and
 * ps_store_count() agrees.  True, or false with the first difference in
 * @why (@len bytes).
 */
bool ps_model_matches(struct ps_store *s, const struct ps_model *m, char *why, size_t len);
/*
 * ps_model_matches(), then, after ps_store_synchronize() (ranges retired
 * by earlier sets let go of their references), each of @pols[0 .. @npols)
 * holds 1 + ps_model_refs() references (the caller's own, one per range),
 * and a lookup of each index below @points finds the model's policy.
 */
bool ps_model_matches_refs(struct ps_store *s, const struct ps_model *m,
		struct ps_policy *const *pols, int npols, uint64_t points, char *why, size_t len);
/*
 * The model of what @s holds now (a snapshot, to hold it to later with
 * ps_model_matches()): 0, -ENOSPC when it has more than PS_MODEL_MAX
 * ranges, or ps_store_foreach()'s error.
 */
int ps_model_read(struct ps_model *m, struct ps_store *s);

/*
 * @n one-page ranges set to @a at pages 1000.. and each removed again (a
 * removal frees after a grace period), then ps_store_synchronize(): 0, or
 * -1 / the synchronize's error.
 */
int ps_test_churn(struct ps_store *s, struct ps_policy *a, int n);

/* A ps_foreach_fn that counts the ranges it is called for in the int at @arg. */
int ps_test_count_ranges(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg);

/* Queue @n fresh 16-byte objects on @map with ps_idmap_free_rcu(), each for @free_fn; aborts on an error. */
void ps_test_idmap_queue(struct ps_idmap *map, int n, void (*free_fn)(void *));

/* What ps_test_call_in_foreach() calls: @fn(@arg). */
struct ps_test_call {
	void (*fn)(void *arg);
	void *arg;
};

/*
 * A ps_foreach_fn that calls the struct ps_test_call at @arg inside the walk
 * (to wait, exit or be cancelled there), on the first range, and stops the
 * walk (returns 1).
 */
int ps_test_call_in_foreach(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg);

/* xorshift64*: deterministic per-thread random numbers. */
static inline uint64_t ps_test_rand(uint64_t *state)
{
	return ps_xorshift64s(state);
}

/*
 * A random non-empty sub-range [*a, *b) of [base, base + size): false (and
 * nothing written) when the two random points coincide, so callers skip
 * that round.
 */
static inline bool ps_test_rand_range(uint64_t *state, uint64_t base, uint64_t size, uint64_t *a,
		uint64_t *b)
{
	uint64_t x = ps_test_rand(state) % size, y = ps_test_rand(state) % size;

	if (x == y)
		return false;
	*a = base + (x < y ? x : y);
	*b = base + (x < y ? y : x);
	return true;
}

/* ---- concurrent workloads (testutil_load.c) ---- */

/*
 * Each workload is written once, here, and run by the unit suite of its
 * module (with Criterion's timeouts, under valgrind, helgrind and DRD) and
 * by tsan_stress (under ThreadSanitizer, time-bounded).  A load struct holds
 * the options (set by the caller, zero: the default) and, after the run, the
 * results.  The threads check every result as they go and the run checks
 * the end state; ps_test_*_run() returns 0, or -1 with the number of failed
 * checks in @run.failures and the first one in @run.why.  A thread or an
 * object the run cannot create aborts the program: no finding, a broken
 * environment.
 */
#define PS_TEST_WHY 256

/* How long each worker thread of a load runs, and how it went. */
struct ps_test_run {
	long iters;	      /* at most this many rounds per worker */
	long min_iters;	      /* with @duration_ns: at least this many, whatever the clock */
	uint64_t duration_ns; /* 0: all @iters; else stop once this passed */
	uint64_t seed;	      /* worker i starts from ps_test_seed(@seed, i) */
	long failures;	      /* out: failed checks */
	char why[PS_TEST_WHY]; /* out: the first one, with its line in testutil_load.c */
};

/* The random-number state of worker @i of a load seeded with @seed: never 0. */
static inline uint64_t ps_test_seed(uint64_t seed, int i)
{
	return (seed ^ (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL) | 1;
}

/*
 * Start @n threads running @fn, thread i with @arg + i * @stride (@stride 0:
 * all with @arg); wait for @n threads.  Abort when a thread cannot start.
 */
void ps_test_spawn(pthread_t *t, int n, void *(*fn)(void *), void *arg, size_t stride);
void ps_test_join(pthread_t *t, int n);

/*
 * A store with readers, walkers and writers.  The index space is
 * PS_TEST_REGIONS regions of @region_size pages; policy k is only ever set
 * in region k, so a lookup returns NULL or region k's policy, nothing else:
 * a range that was never there, or a freed policy (valgrind, ASan), fails.
 *
 * @churn: the store starts fully covered and every set installs a fresh
 * policy that only the store owns (the writer puts its reference at once),
 * whose node mask encodes the range it was set for; replaced policies are
 * freed while readers run.  Every read must then find a policy (never NULL)
 * set for a range that holds the page, whole (mode, mask, weight) and
 * counted; a policy freed too early is reported by valgrind/ASan, or
 * decodes to a wrong range.
 *
 * Readers look up (@read: with a reference, borrowed in a read-side
 * section, or the two in turn), @hold at a time, then (QSBR online: after a
 * quiescent state) check and put what they hold; walkers walk the store
 * with ps_store_foreach() and check each range; writers start once every
 * reader runs (so they overlap on a loaded machine), each for @run.
 * At the end: ps_store_check(), and every region policy back to the
 * caller's one reference once the store is gone.
 */
#define PS_TEST_REGIONS 8
#define PS_TEST_REGION_MAX 512 /* the largest @region_size a churn policy encodes */
#define PS_TEST_HOLD_MAX 8

enum ps_test_read {
	PS_TEST_READ_REF,    /* ps_store_lookup() */
	PS_TEST_READ_BORROW, /* ps_store_lookup_borrow() in a section (churn: and a reference) */
	PS_TEST_READ_BOTH,   /* the two in turn */
};

struct ps_test_store_load {
	enum ps_sync sync;
	int readers, walkers, writers;
	enum ps_test_read read;
	int hold;	      /* references a reader holds at once (1 .. PS_TEST_HOLD_MAX; 0: 1) */
	bool qsbr_online;     /* RCU_QSBR readers go online, report quiescent states */
	bool churn;	      /* a fresh policy per set (above) */
	bool whole_regions;   /* writers set whole regions (victims) instead of random sub-ranges */
	uint64_t region_size; /* 1 .. PS_TEST_REGION_MAX */
	int yield_every;      /* writers yield every so many sets (0: never) ... */
	/* ... and first call this with the store and the region they set next (NULL: none) */
	void (*sample)(struct ps_store *s, uint64_t idx, void *arg);
	void *sample_arg;
	struct ps_test_run run; /* per writer: @iters sets */
	long lookups, walks, sets; /* out */
};
int ps_test_store_run(struct ps_test_store_load *l);

/*
 * ps_charge under load: @workers threads charge and uncharge (1 to 8 pages
 * at a time) on leaves of their own (limit @leaf_limit) under a parent
 * (@parent_limit; 0: none) under a root (@root_limit), tracking what they
 * hold.  Meanwhile, with @monitor, a thread reads the root and the parent
 * (ps_charge_stat(), ps_charge_read()) and checks usage <= limit + @bound;
 * with @limit_rounds, the calling thread sets the root's limit to
 * @limit_lo and @limit_hi in turn (0 or -EBUSY), reading it and draining
 * the stocks each round, for @limit_rounds rounds and on until every
 * worker is done (so it sees load and calm).  At the end, exact at every level once the stocks
 * are back (usage == what the workers hold, each leaf within its limit +
 * @bound); with fixed limits, the largest overshoot within @bound, and none
 * at all for SPIN and SEQLOCK; with @expect_refusals, every worker was
 * refused at least once; everything uncharged and destroyed.
 */
struct ps_test_charge_load {
	enum ps_charge_kind kind;
	int workers;
	long root_limit, parent_limit, leaf_limit;
	bool monitor;
	long limit_rounds, limit_lo, limit_hi;
	bool expect_refusals;
	struct ps_test_run run; /* per worker: @iters charges or uncharges */
	long bound;		/* out: ps_charge_overshoot_bound() of this load */
	long overshoot;		/* out: the largest the root and the parent recorded */
	long max_seen;		/* out: the largest usage - limit the monitor saw */
	long limit_ok;		/* out: the limit changes that succeeded */
};
int ps_test_charge_run(struct ps_test_charge_load *l);

/*
 * ps_pcounter under load: @adders threads add random deltas (mostly
 * small steps with an upward drift, now and then +-2 batches) to the
 * caller's counter @pc.  Meanwhile, with @check_bound, a thread takes
 * snapshots and checks |approx - exact| <= batch x deltas <=
 * ps_pcounter_error_bound(); with @admin, a thread reads, sums, snapshots,
 * changes the batch and folds.  At the end: one delta slot per adder, the
 * exact sum is the counter's first value + @total, and (with @check_bound)
 * the cheap read is within the error bound.  The counter is left as it is.
 */
struct ps_test_pcounter_load {
	struct ps_pcounter *pc;
	int adders;
	bool check_bound, admin;
	struct ps_test_run run; /* per adder: @iters adds */
	int64_t total;		/* out: every delta added */
	long snapshots;		/* out: taken by the checking thread */
	int64_t max_err;	/* out: the largest |approx - exact| it saw */
};
int ps_test_pcounter_run(struct ps_test_pcounter_load *l);

/*
 * ps_commit under load: @committers threads commit @pages at a time and
 * give two of three commits back (like will-it-scale mmap1); meanwhile,
 * with @admin, a thread changes the overcommit mode and reads the committed
 * total.  At the end the exact committed total is what they kept (@held).
 * The caller's @cm is left as it is.
 */
struct ps_test_commit_load {
	struct ps_commit *cm;
	int committers;
	long pages;
	bool admin;
	struct ps_test_run run; /* per committer: @iters commits */
	int64_t held;		/* out: committed and kept */
	long refused;		/* out: commits refused */
};
int ps_test_commit_run(struct ps_test_commit_load *l);

/*
 * ps_idmap under load: @mutators threads bind objects (first a placeholder,
 * replaced once the id is known), replace and remove them, freeing what
 * they unbind with ps_idmap_free_rcu(); @walkers threads walk the map one
 * section per step (and, with @whole_walks, in turn a whole
 * ps_idmap_for_each() in one section and finds of random ids), checking
 * that every object found is live, says its id, and that walks go up.
 * @slow: readers yield after each section (valgrind's scheduler runs one
 * thread for long slices: back-to-back sections on an unfair spinlock
 * would starve the writers).  At the end every object is unbound and freed.
 */
struct ps_test_idmap_load {
	enum ps_idmap_sync sync;
	int walkers, mutators;
	bool slow, whole_walks;
	struct ps_test_run run; /* per mutator: @iters changes */
	long reads;		/* out: objects the walkers read */
};
int ps_test_idmap_run(struct ps_test_idmap_load *l);

/*
 * The read index of RCU and RCU_QSBR stores beside a flat-out writer.  The
 * store holds a fixed configuration of @ranges ranges (policies BIND 1-7,
 * gaps between some); the writer changes it, in turn, into that
 * configuration with some spans changed (one ps_store_set() across up to
 * a quarter of the ranges, or a ps_store_set_many() batch of up to six
 * disjoint spans; policies BIND 8-15, or removals) and back again (one
 * batch), flat out for @run.  @readers threads meanwhile call
 * ps_store_lookup_node(), ps_store_lookup(), ps_store_next(),
 * ps_store_foreach_range() (windows, some over everything) and, in a
 * section, ps_store_lookup_borrow() and ps_store_next_borrow() (@lookup,
 * @lookup_node and @create: the POLSTORE_INLINE read side instead); each
 * answer must be the one some version published while the call ran gave
 * (the versions are numbered; a call that lasted too long to tell is
 * counted in @unchecked).  At the end: ps_store_check(), the store back
 * to the configuration, every policy back to one reference.
 */
struct ps_test_index_load {
	enum ps_sync sync;	/* PS_SYNC_RCU or PS_SYNC_RCU_QSBR (any variant works) */
	int readers;		/* 1 .. 8 */
	int ranges;		/* of the configuration (0: 2000) */
	bool qsbr_online;	/* RCU_QSBR readers stay online, a quiescent state per call */
	/* Optional (NULL: the library's): the store's constructor and the lookups readers use. */
	struct ps_store *(*create)(enum ps_sync sync);
	struct ps_policy *(*lookup)(struct ps_store *s, uint64_t idx);
	int (*lookup_node)(struct ps_store *s, uint64_t idx, int local_node);
	struct ps_test_run run; /* the writer: @iters updates */
	long updates, lookups, nexts, windows, unchecked; /* out */
};
int ps_test_index_run(struct ps_test_index_load *l);

#endif /* POLSTORE_TESTUTIL_H */
