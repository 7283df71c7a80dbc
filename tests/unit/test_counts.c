// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Access counts, every variant: off costs and counts nothing; counts
 * exact at quiescence from several threads (the sum over ranges, gaps and
 * gone is the accesses made), and after their threads exit; what a set
 * that trims, splits, replaces or removes a range does to its figures;
 * epochs, rates and the top-N order; a set between two counts of a page
 * (the thread's cache); a count after the thread's exit hook; a store at
 * a freed store's address; counts through the lookup cache after the
 * thread's table grew or its exit hook ran; counting beside a writer and a reader of the counts; fork; allocation failures.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/static/lcache.h>

#include "compiler.h"
#include "counts_test.h"
#include "testpoint.h"

/* The stores whose readers keep a lookup cache, which counts too. */
static enum ps_sync rcu_syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

VARIANT_TEST(counts, off_counts_nothing)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct ps_counts_sum sum;
	struct ps_range_counts top[2];
	uint64_t p;

	for (p = 0; p < SPACE; p++)
		cr_assert_eq(ps_store_lookup_node_count(s, p, 0), ps_store_lookup_node(s, p, 0));
	cr_assert_eq(ps_store_count_access(s, 10), 0);
	cr_assert_eq(ps_store_counts_sum(s, &sum), -ENODATA);
	cr_assert_eq(ps_store_counts_top(s, 0, SPACE, PS_COUNTS_BY_COUNT, top, 2), -ENODATA);
	cr_assert_eq(ps_store_counts_tick(s), 0);
	/* Bad arguments. */
	cr_assert_eq(ps_store_counts_enable(NULL, true), -EINVAL);
	cr_assert_eq(ps_store_count_access(NULL, 1), -EINVAL);
	cr_assert_eq(ps_store_lookup_node_count(NULL, 1, 0), -EINVAL);
	cr_assert_eq(ps_store_counts_sum(s, NULL), -EINVAL);
	cr_assert_eq(ps_store_counts_foreach(s, 5, 5, one_fn, NULL), -EINVAL);
	cr_assert_eq(ps_store_counts_foreach(s, 0, 5, NULL, NULL), -EINVAL);
	cr_assert_eq(ps_store_counts_top(s, 0, 5, 7, top, 2), -EINVAL);
	/* Off again after on: what was counted stays, nothing more is. */
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	cr_assert_eq(ps_store_lookup_node_count(s, 10, 0), ps_store_lookup_node(s, 10, 0));
	cr_assert_eq(ps_store_counts_enable(s, false), 0);
	cr_assert_eq(ps_store_lookup_node_count(s, 10, 0), ps_store_lookup_node(s, 10, 0));
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, 1);
	cr_assert_eq(sum.in_ranges, 1);
	cr_assert_eq(sum.epoch, 1);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/* Counting threads: each keeps its own tally of where its accesses fell. */
struct counter {
	struct ps_store *s;
	uint64_t seed;
	long n;
	long per_range[NR], gaps;
	bool exit_early; /* counts, then exits while the others go on */
};

static void *count_thread(void *arg)
{
	struct counter *ct = arg;
	long i;

	for (i = 0; i < ct->n; i++) {
		uint64_t p = ps_test_rand(&ct->seed) % SPACE;

		if (i & 1)
			TCHECK(ps_store_lookup_node_count(ct->s, p, 0) >= 0, "lookup");
		else
			TCHECK(ps_store_count_access(ct->s, p) == 0, "count");
		if (p % 100 < 50)
			ct->per_range[p / 100]++;
		else
			ct->gaps++;
	}
	ps_rcu_unregister_thread();
	return NULL;
}

static int exact_fn(const struct ps_range_counts *c, void *arg)
{
	long *want = arg;

	cr_assert_eq(c->end - c->start, 50);
	cr_assert_eq((long)c->count, want[c->start / 100], "range %lu: %lu counted, %ld made",
			(unsigned long)c->start, (unsigned long)c->count, want[c->start / 100]);
	return 0;
}

VARIANT_TEST(counts, exact_at_quiescence, .timeout = 120)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct counter ct[3];
	long want[NR] = { 0 }, gaps = 0, total = 0;
	struct ps_counts_sum sum;
	pthread_t t[3];
	int i, k, round;

	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	/* Twice: threads that exited left their counts behind, and new ones add to them. */
	for (round = 0; round < 2; round++) {
		for (i = 0; i < 3; i++) {
			ct[i] = (struct counter){ .s = s, .seed = ps_test_seed(7 + round, i),
				.n = ps_test_iters(20000) };
			cr_assert_eq(pthread_create(&t[i], NULL, count_thread, &ct[i]), 0);
		}
		for (i = 0; i < 3; i++) {
			cr_assert_eq(pthread_join(t[i], NULL), 0);
			for (k = 0; k < NR; k++)
				want[k] += ct[i].per_range[k];
			gaps += ct[i].gaps;
			total += ct[i].n;
		}
		cr_assert_eq(ps_store_counts_foreach(s, 0, SPACE, exact_fn, want), 0);
		cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
		cr_assert_eq((long)sum.counted, total);
		cr_assert_eq((long)sum.gaps, gaps);
		cr_assert_eq((long)sum.in_ranges, total - gaps);
		cr_assert_eq(sum.gone, 0);
	}
	ps_store_destroy(s);
	ps_policy_put(a);
}

VARIANT_TEST(counts, sets_move_figures_as_documented)
{
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);
	struct ps_store *s = ps_store_create(*sync);
	struct ps_counts_sum sum;
	struct ps_range_counts c;
	int i;

	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	cr_assert_eq(ps_store_set(s, 30, 40, a), 0);
	cr_assert_eq(ps_store_set(s, 40, 50, b), 0);
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	for (i = 0; i < 5; i++)
		cr_assert_eq(ps_store_count_access(s, 15), 0);
	for (i = 0; i < 3; i++)
		cr_assert_eq(ps_store_count_access(s, 35), 0);
	for (i = 0; i < 4; i++)
		cr_assert_eq(ps_store_count_access(s, 45), 0);
	/* Trimmed at its end: the range keeps them. */
	cr_assert_eq(ps_store_set(s, 18, 20, NULL), 0);
	c = counts_at(s, 10);
	cr_assert(c.start == 10 && c.end == 18 && c.count == 5);
	/* Split: the part holding the first page keeps them. */
	cr_assert_eq(ps_store_set(s, 12, 13, b), 0);
	cr_assert_eq(counts_at(s, 10).count, 5);
	cr_assert_eq(counts_at(s, 12).count, 0);
	cr_assert_eq(counts_at(s, 13).count, 0);
	/* Trimmed at its start: the first range that overlaps it takes them. */
	cr_assert_eq(ps_store_set(s, 10, 11, NULL), 0);
	c = counts_at(s, 11);
	cr_assert(c.start == 11 && c.end == 12 && c.count == 5);
	/* Two replaced by one: they add up. */
	cr_assert_eq(ps_store_set(s, 30, 50, b), 0);
	c = counts_at(s, 30);
	cr_assert(c.start == 30 && c.end == 50 && c.count == 7, "[%lu, %lu): %lu",
			(unsigned long)c.start, (unsigned long)c.end, (unsigned long)c.count);
	/* Removed: gone. */
	cr_assert_eq(ps_store_set(s, 0, 20, NULL), 0);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, 12);
	cr_assert_eq(sum.gone, 5);
	cr_assert_eq(sum.in_ranges, 7);
	/* A page counted after a set that changed its range: the new range (the cache refills). */
	cr_assert_eq(ps_store_count_access(s, 45), 0);
	cr_assert_eq(ps_store_set(s, 44, 46, a), 0);
	cr_assert_eq(ps_store_count_access(s, 45), 0);
	cr_assert_eq(counts_at(s, 44).count, 1);
	cr_assert_eq(counts_at(s, 30).count, 8);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
}

VARIANT_TEST(counts, epochs_rates_and_top)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct ps_range_counts top[3];
	int i;

	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	for (i = 0; i < 16; i++)
		cr_assert_eq(ps_store_count_access(s, 5), 0); /* range 0: 16 in epoch 1 */
	cr_assert_eq(ps_store_counts_tick(s), 2);
	cr_assert_eq(ps_store_counts_tick(s), 3);
	cr_assert_eq(ps_store_counts_tick(s), 4);
	for (i = 0; i < 3; i++)
		cr_assert_eq(ps_store_count_access(s, 205), 0); /* range 2: 3 in epoch 4 */
	cr_assert_eq(ps_store_count_access(s, 705), 0);	      /* range 7: 1 in epoch 4 */
	cr_assert_eq(ps_store_counts_top(s, 0, SPACE, PS_COUNTS_BY_COUNT, top, 3), 3);
	cr_assert(top[0].start == 0 && top[0].count == 16 && top[0].last_epoch == 1);
	cr_assert(top[1].start == 200 && top[1].count == 3 && top[1].last_epoch == 4);
	cr_assert(top[2].start == 700 && top[2].count == 1);
	cr_assert_float_eq(top[0].rate, 2.0, 1e-9); /* 16 halved three times */
	cr_assert_float_eq(top[1].rate, 3.0, 1e-9);
	cr_assert_eq(ps_store_counts_top(s, 0, SPACE, PS_COUNTS_BY_RATE, top, 2), 2);
	cr_assert(top[0].start == 200 && top[1].start == 0);
	/* A window, and room for fewer than there are. */
	cr_assert_eq(ps_store_counts_top(s, 150, 800, PS_COUNTS_BY_COUNT, top, 3), 2);
	cr_assert(top[0].start == 200 && top[1].start == 700);
	cr_assert_eq(ps_store_counts_top(s, 0, SPACE, PS_COUNTS_BY_COUNT, top, 1), 1);
	cr_assert_eq(top[0].start, 0);
	cr_assert_eq(ps_store_counts_top(s, 0, SPACE, PS_COUNTS_BY_COUNT, top, 0), 0);
	ps_store_destroy(s);
	ps_policy_put(a);
}

static void *count_six(void *arg)
{
	int i;

	for (i = 0; i < 6; i++)
		TCHECK(ps_store_count_access(arg, 5) == 0, "count");
	return NULL;
}

/*
 * A page counted again and again across ticks: each epoch's counts decay
 * from their own epoch, though a repeated key is an increment between two
 * ticks, and an exited thread's rate adds up with the live ones.
 */
VARIANT_TEST(counts, a_repeated_key_decays_by_the_epoch_it_came_in)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct ps_range_counts c;
	pthread_t t;
	int i;

	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	for (i = 0; i < 8; i++)
		cr_assert_eq(ps_store_count_access(s, 5), 0); /* 8 in epoch 1 */
	cr_assert_eq(ps_store_counts_tick(s), 2);
	for (i = 0; i < 4; i++)
		cr_assert_eq(ps_store_count_access(s, 6), 0); /* 4 in epoch 2 */
	c = counts_at(s, 5);
	cr_assert(c.count == 12 && c.last_epoch == 2, "count %lu, epoch %lu",
			(unsigned long)c.count, (unsigned long)c.last_epoch);
	cr_assert_float_eq(c.rate, 8.0, 1e-9); /* 8 / 2 + 4 */
	cr_assert_eq(pthread_create(&t, NULL, count_six, s), 0);
	cr_assert_eq(pthread_join(t, NULL), 0); /* 6 in epoch 2, folded at its exit */
	cr_assert_eq(ps_store_counts_tick(s), 3);
	c = counts_at(s, 5);
	cr_assert_eq(c.count, 18);
	cr_assert_float_eq(c.rate, 7.0, 1e-9); /* (8 + 6) / 2 */
	for (i = 0; i < 2; i++)
		cr_assert_eq(ps_store_count_access(s, 5), 0); /* 2 in epoch 3 */
	c = counts_at(s, 5);
	cr_assert(c.count == 20 && c.last_epoch == 3, "count %lu, epoch %lu",
			(unsigned long)c.count, (unsigned long)c.last_epoch);
	cr_assert_float_eq(c.rate, 9.0, 1e-9);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * The same through counted lookups, which the thread's lookup cache
 * entry counts once it holds the range: a tick makes its counter stale,
 * and the first count after it brings the slot to the new epoch.
 */
SYNCS_TEST(rcu_syncs, counts, a_counted_lookup_decays_by_the_epoch_it_came_in)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct ps_range_counts c;
	int i;

	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	if (*sync == PS_SYNC_RCU_QSBR)
		cr_assert_eq(ps_qsbr_thread_online(), 0); /* the inline path */
	for (i = 0; i < 8; i++) /* 8 in epoch 1 */
		cr_assert_eq(ps_store_lookup_node_count(s, 5, 0), ps_store_lookup_node(s, 5, 0));
	cr_assert_eq(ps_store_counts_tick(s), 2);
	for (i = 0; i < 4; i++) /* 4 in epoch 2 */
		cr_assert_eq(ps_store_lookup_node_count(s, 6, 0), ps_store_lookup_node(s, 6, 0));
	if (*sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	c = counts_at(s, 5);
	cr_assert(c.count == 12 && c.last_epoch == 2, "count %lu, epoch %lu",
			(unsigned long)c.count, (unsigned long)c.last_epoch);
	cr_assert_float_eq(c.rate, 8.0, 1e-9); /* 8 / 2 + 4 */
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * A read of the counts while a counting thread is bringing its slot to a
 * new epoch, held between the epoch and the rest: the read waits for the
 * change, and never gives the old epoch's rate undecayed under the new one.
 */
/* 1: counted in epoch 1; 2: hold it at the point; 3: it is held; 4: let it go */
static int advance_state;

static void advance_hook(enum psi_test_point point)
{
	if (point != PSI_TP_COUNTS_SLOT_ADVANCE || PSI_LOAD_ACQUIRE(advance_state) != 2)
		return;
	PSI_STORE_RELEASE(advance_state, 3);
	while (PSI_LOAD_ACQUIRE(advance_state) != 4)
		sched_yield();
}

/* 4 counts in epoch 1, then one after the tick, held where its slot changes epoch. */
static void *count_across_a_tick(void *arg)
{
	int i;

	for (i = 0; i < 4; i++)
		TCHECK(ps_store_count_access(arg, 5) == 0, "count");
	PSI_STORE_RELEASE(advance_state, 1);
	while (PSI_LOAD_ACQUIRE(advance_state) != 2)
		sched_yield();
	TCHECK(ps_store_count_access(arg, 5) == 0, "count");
	return NULL;
}

static void *let_go_later(void *arg)
{
	(void)arg;
	usleep(20000);
	PSI_STORE_RELEASE(advance_state, 4);
	return NULL;
}

VARIANT_TEST(counts, a_read_beside_a_slot_changing_epoch_sees_it_whole)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct ps_range_counts c;
	pthread_t t, l;

	PSI_ANNOTATE_BENIGN_RACE_SIZED(&advance_state, sizeof(advance_state)); /* atomics only */
	PSI_STORE_RELEASE(advance_state, 0);
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	cr_assert_eq(pthread_create(&t, NULL, count_across_a_tick, s), 0);
	while (PSI_LOAD_ACQUIRE(advance_state) != 1)
		sched_yield();
	cr_assert_eq(ps_store_counts_tick(s), 2);
	PSI_STORE_RELEASE(psi_test_hook, advance_hook);
	PSI_STORE_RELEASE(advance_state, 2);
	while (PSI_LOAD_ACQUIRE(advance_state) != 3)
		sched_yield();
	cr_assert_eq(pthread_create(&l, NULL, let_go_later, NULL), 0);
	c = counts_at(s, 5);
	cr_assert_eq(pthread_join(l, NULL), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	PSI_STORE_RELEASE(psi_test_hook, NULL);
	PSI_STORE_RELEASE(advance_state, 0);
	/* The 4 of epoch 1 halve; the one of epoch 2 may be in or not yet. */
	cr_assert(c.count == 4 || c.count == 5, "count %lu", (unsigned long)c.count);
	cr_assert_float_eq(c.rate, 2.0 + (double)(c.count - 4), 1e-9, "rate %g, count %lu", c.rate,
			(unsigned long)c.count);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/* Counts a page of each store, waits until every such thread has, then exits. */
struct many_stores {
	struct ps_store *s[6];
	pthread_barrier_t all_counted;
};

static void *count_in_six_stores(void *arg)
{
	struct many_stores *m = arg;
	int i;

	for (i = 0; i < 6; i++)
		TCHECK(ps_store_count_access(m->s[i], 5) == 0, "count");
	/* All alive at once: no thread takes another's id and, with it, a shard it left. */
	pthread_barrier_wait(&m->all_counted);
	ps_rcu_unregister_thread();
	return NULL;
}

/*
 * Threads that each counted in more stores than a thread keeps its way
 * to at once: at their exit every one of their tables is folded into its
 * store's and freed, the forgotten ones too.
 */
VARIANT_TEST(counts, a_thread_that_counted_in_many_stores_leaves_no_table)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_counts_sum sum;
	struct many_stores m;
	pthread_t t[8];
	long live0, live1;
	int i;

	ps_test_alloc_install();
	for (i = 0; i < 6; i++) {
		m.s[i] = store_of_ranges(*sync, a);
		cr_assert_eq(ps_store_counts_enable(m.s[i], true), 0);
	}
	/* One thread first: each store's table of exited threads' counts exists after it. */
	cr_assert_eq(pthread_barrier_init(&m.all_counted, NULL, 1), 0);
	cr_assert_eq(pthread_create(&t[0], NULL, count_in_six_stores, &m), 0);
	cr_assert_eq(pthread_join(t[0], NULL), 0);
	cr_assert_eq(pthread_barrier_destroy(&m.all_counted), 0);
	/* Nothing retired in flight: what the sets left goes back first. */
	for (i = 0; i < 6; i++)
		ps_store_synchronize(m.s[i]);
	live0 = ps_test_alloc_live();
	cr_assert_eq(pthread_barrier_init(&m.all_counted, NULL, 8), 0);
	for (i = 0; i < 8; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, count_in_six_stores, &m), 0);
	for (i = 0; i < 8; i++)
		cr_assert_eq(pthread_join(t[i], NULL), 0);
	cr_assert_eq(pthread_barrier_destroy(&m.all_counted), 0);
	for (i = 0; i < 6; i++)
		ps_store_synchronize(m.s[i]);
	live1 = ps_test_alloc_live();
	/* A table left behind is more blocks; the reclaim thread only ever frees. */
	cr_assert_leq(live1, live0, "%ld blocks live after the threads exited, %ld before",
			live1, live0);
	for (i = 0; i < 6; i++) {
		cr_assert_eq(ps_store_counts_sum(m.s[i], &sum), 0);
		cr_assert_eq(sum.counted, 9);
		ps_store_destroy(m.s[i]);
	}
	ps_test_alloc_restore();
	ps_policy_put(a);
}

/*
 * A thread that counts again in a destructor that runs after the counts'
 * own exit hook (a key made later runs later): the hook folded and freed
 * the thread's shard, and the count after it must not go to the freed
 * one through the range the thread counted last.
 */
static pthread_key_t late_key;

static void late_count(void *arg)
{
	TCHECK(ps_store_count_access(arg, 5) == 0, "count");
	ps_rcu_unregister_thread();
}

static void *count_then_exit(void *arg)
{
	TCHECK(ps_store_count_access(arg, 5) == 0, "count");
	TCHECK(pthread_setspecific(late_key, arg) == 0, "setspecific");
	return NULL;
}

/*
 * @fn(@s) on a thread of its own, which sets late_key: once it exited,
 * its exit hooks and late_key's destructor with it, @s counted @want
 * accesses, every one in page 5's range; late_key is deleted.
 */
static void run_to_exit_then_expect(struct ps_store *s, void *(*fn)(void *), uint64_t want)
{
	struct ps_counts_sum sum;
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, fn, s), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, want);
	cr_assert_eq(counts_at(s, 5).count, want);
	cr_assert_eq(pthread_key_delete(late_key), 0);
}

VARIANT_TEST(counts, a_count_after_the_threads_exit_hook_is_kept)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);

	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	/* The first count makes the counts' key; the test's is made after it. */
	cr_assert_eq(ps_store_count_access(s, 5), 0);
	cr_assert_eq(pthread_key_create(&late_key, late_count), 0);
	run_to_exit_then_expect(s, count_then_exit, 3);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * The same with counts through lookups, which an entry of the thread's
 * lookup cache takes once it found the range: the exit hook freed the
 * slot that entry counted into, and the count after it must not go there.
 * The keys in the order that lets the destructor find the thread still
 * registered (or online): the counts' first (counting on in another
 * store), then the test's, then liburcu threads' (the first RCU store).
 */
static enum ps_sync late_sync;

static void late_lookup_count(void *arg)
{
	TCHECK(ps_store_lookup_node_count(arg, 5, 0) >= 0, "lookup");
	if (ps_qsbr_thread_is_online())
		ps_qsbr_thread_offline();
	ps_rcu_unregister_thread();
}

static void *lookup_count_then_exit(void *arg)
{
	if (late_sync == PS_SYNC_RCU_QSBR)
		TCHECK(ps_qsbr_thread_online() == 0, "online"); /* the inline path */
	TCHECK(ps_store_lookup_node_count(arg, 5, 0) >= 0, "lookup");
	TCHECK(ps_store_lookup_node_count(arg, 6, 0) >= 0, "lookup");
	TCHECK(pthread_setspecific(late_key, arg) == 0, "setspecific");
	return NULL;
}

SYNCS_TEST(rcu_syncs, counts, a_lookup_count_after_the_threads_exit_hook_is_kept)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *first = ps_store_create(PS_SYNC_SPIN), *s;

	cr_assert_not_null(first);
	cr_assert_eq(ps_store_counts_enable(first, true), 0);
	cr_assert_eq(pthread_key_create(&late_key, late_lookup_count), 0);
	s = store_of_ranges(*sync, a);
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	cr_assert_eq(ps_store_count_access(s, 5), 0);
	late_sync = *sync;
	run_to_exit_then_expect(s, lookup_count_then_exit, 4);
	ps_store_destroy(s);
	ps_store_destroy(first);
	ps_policy_put(a);
}

/*
 * Counts through lookups of one range, then counts of many others, which
 * grow the thread's table and move its slots, then lookups of the first
 * range again: none of them goes to the slot the table had before.
 */
SYNCS_TEST(rcu_syncs, counts, a_lookup_count_after_the_table_grew_is_kept)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = ps_store_create(*sync);
	struct ps_counts_sum sum;
	int k;

	cr_assert_not_null(s);
	for (k = 0; k < 40; k++)
		cr_assert_eq(ps_store_set(s, 100 * (uint64_t)k, 100 * (uint64_t)k + 50, a), 0);
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	if (*sync == PS_SYNC_RCU_QSBR)
		cr_assert_eq(ps_qsbr_thread_online(), 0); /* the inline path */
	for (k = 0; k < 3; k++)
		cr_assert_eq(ps_store_lookup_node_count(s, 5, 0), ps_store_lookup_node(s, 5, 0));
	/* More ranges than a first table holds, and than its first growth. */
	for (k = 1; k < 40; k++)
		cr_assert_eq(ps_store_count_access(s, 100 * (uint64_t)k + 7), 0);
	for (k = 0; k < 5; k++)
		cr_assert_eq(ps_store_lookup_node_count(s, 5, 0), ps_store_lookup_node(s, 5, 0));
	cr_assert_eq(ps_store_check(s, NULL), 0);
	/* The check sees an entry that counts into another slot (RCU, RCU_QSBR). */
	if (*sync == PS_SYNC_RCU || *sync == PS_SYNC_RCU_QSBR) {
		struct _ps_lc_entry *e = _ps_lc_way(s);
		uint64_t *was = e->ccount, other = 0;
		const char *why = NULL;

		cr_assert_neq(e->cstamp, 0, "the entry counts");
		e->ccount = &other;
		cr_assert_eq(ps_store_check(s, &why), -EUCLEAN);
		cr_assert_not_null(why);
		e->ccount = was;
		cr_assert_eq(ps_store_check(s, NULL), 0);
	}
	if (*sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	cr_assert_eq(counts_at(s, 5).count, 8);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, 8 + 39);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * A count after a set, of a page a lookup found before it: the range that
 * holds the page now takes it, not the one the lookup found (which the
 * thread's lookup cache still holds, at the older generation).
 */
VARIANT_TEST(counts, a_count_after_a_set_goes_to_the_range_of_now)
{
	struct ps_policy *a = ps_test_bind(1), *b = ps_test_bind(2);
	struct ps_store *s = ps_store_create(*sync);
	struct ps_range_counts c;

	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 0, 50, a), 0);
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	cr_assert_eq(ps_store_lookup_node_count(s, 30, 0), ps_store_lookup_node(s, 30, 0));
	cr_assert_eq(ps_store_set(s, 0, 25, b), 0);
	cr_assert_eq(ps_store_count_access(s, 30), 0);
	c = counts_at(s, 30);
	cr_assert(c.start == 25 && c.end == 50 && c.count == 1, "[%lu, %lu): %lu",
			(unsigned long)c.start, (unsigned long)c.end, (unsigned long)c.count);
	cr_assert_eq(counts_at(s, 10).count, 1);
	ps_store_destroy(s);
	ps_policy_put(a);
	ps_policy_put(b);
}

/*
 * Two RCU stores at one generation whose entries share a way of the
 * thread's lookup cache: a count in one never takes the bounds the other
 * one's lookup left there.
 */
Test(counts, a_count_takes_no_bounds_of_another_store)
{
	enum ps_sync syncs[] = { PS_SYNC_RCU, PS_SYNC_RCU_QSBR };
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *keep[64], *s, *t;
	struct ps_range_counts c;
	int i, n, k;

	for (i = 0; i < 2; i++) {
		s = ps_store_create(syncs[i]);
		cr_assert_not_null(s);
		/* A store in the same way as @s: one of the first few made. */
		for (n = 0, t = NULL; n < 64; n++) {
			keep[n] = ps_store_create(syncs[i]);
			cr_assert_not_null(keep[n]);
			if (_ps_lc_way(keep[n]) == _ps_lc_way(s)) {
				t = keep[n];
				break;
			}
		}
		cr_assert_not_null(t, "no store in the way of the first");
		/* Two sets each: the same generation. */
		cr_assert_eq(ps_store_set(s, 0, 50, a), 0);
		cr_assert_eq(ps_store_set(s, 100, 150, a), 0);
		cr_assert_eq(ps_store_set(t, 0, 25, a), 0);
		cr_assert_eq(ps_store_set(t, 25, 50, a), 0);
		cr_assert_eq(ps_store_generation(s), ps_store_generation(t));
		cr_assert_eq(ps_store_counts_enable(t, true), 0);
		/* The way now holds @s's [0, 50). */
		cr_assert_geq(ps_store_lookup_node(s, 30, 0), 0);
		cr_assert_eq(ps_store_count_access(t, 30), 0);
		c = counts_at(t, 30);
		cr_assert(c.start == 25 && c.count == 1, "[%lu, %lu): %lu", (unsigned long)c.start,
				(unsigned long)c.end, (unsigned long)c.count);
		ps_store_destroy(s);
		for (k = 0; k <= n; k++)
			ps_store_destroy(keep[k]);
	}
	ps_policy_put(a);
}

/* A new store where a destroyed one was: nothing of the old one's counts, in any thread. */
VARIANT_TEST(counts, a_store_at_a_freed_address_starts_at_zero)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_counts_sum sum;
	int round;

	for (round = 0; round < 8; round++) {
		struct ps_store *s = store_of_ranges(*sync, a);

		cr_assert_eq(ps_store_counts_enable(s, true), 0);
		cr_assert_eq(ps_store_count_access(s, 5), 0);
		cr_assert_eq(ps_store_count_access(s, 5), 0);
		cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
		cr_assert_eq(sum.counted, 2);
		cr_assert_eq(counts_at(s, 5).count, 2);
		ps_store_destroy(s);
	}
	ps_policy_put(a);
}

/* Counters, a writer and a reader of the counts at once; exact once they stop. */
struct busy {
	struct ps_store *s;
	struct ps_policy *a;
	int stop;
};

static void *busy_writer(void *arg)
{
	struct busy *b = arg;
	uint64_t seed = 3, k;

	while (!PSI_LOAD_ACQUIRE(b->stop)) {
		k = ps_test_rand(&seed) % NR;
		/* A range's second half: its first half, where the counters count, stays. */
		TCHECK(ps_store_set(b->s, 100 * k + 25, 100 * k + 50,
				(seed & 1) ? b->a : NULL) == 0, "set");
	}
	return NULL;
}

static int sum_fn(const struct ps_range_counts *c, void *arg)
{
	*(uint64_t *)arg += c->count;
	return 0;
}

static void *busy_reader(void *arg)
{
	struct busy *b = arg;
	struct ps_range_counts top[4];
	uint64_t n;
	int ret;

	while (!PSI_LOAD_ACQUIRE(b->stop)) {
		n = 0;
		TCHECK(ps_store_counts_foreach(b->s, 0, SPACE, sum_fn, &n) == 0, "foreach");
		ret = ps_store_counts_top(b->s, 0, SPACE, PS_COUNTS_BY_RATE, top, 4);
		TCHECK(ret >= 0, "top: %d", ret);
		(void)ps_store_counts_tick(b->s);
	}
	ps_rcu_unregister_thread();
	return NULL;
}

static void *first_halves(void *arg)
{
	struct counter *ct = arg;
	long i;

	for (i = 0; i < ct->n; i++) {
		uint64_t k = ps_test_rand(&ct->seed) % NR;

		TCHECK(ps_store_count_access(ct->s, 100 * k + ps_test_rand(&ct->seed) % 25) == 0,
				"count");
	}
	ps_rcu_unregister_thread();
	return NULL;
}

VARIANT_TEST(counts, beside_a_writer_and_a_reader, .timeout = 120)
{
	struct ps_policy *a = ps_test_bind(1);
	struct busy b = { .s = store_of_ranges(*sync, a), .a = a };
	struct ps_counts_sum sum;
	struct counter ct[2];
	pthread_t w[2], t[2];
	int i;

	PSI_ANNOTATE_BENIGN_RACE_SIZED(&b.stop, sizeof(b.stop)); /* atomics only */
	cr_assert_eq(ps_store_counts_enable(b.s, true), 0);
	cr_assert_eq(pthread_create(&w[0], NULL, busy_writer, &b), 0);
	cr_assert_eq(pthread_create(&w[1], NULL, busy_reader, &b), 0);
	for (i = 0; i < 2; i++) {
		ct[i] = (struct counter){ .s = b.s, .seed = ps_test_seed(11, i),
			.n = ps_test_iters(30000) };
		cr_assert_eq(pthread_create(&t[i], NULL, first_halves, &ct[i]), 0);
	}
	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_join(t[i], NULL), 0);
	PSI_STORE_RELEASE(b.stop, 1);
	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_join(w[i], NULL), 0);
	/* Each counted access fell in a first half, which no set touched: all are in ranges. */
	cr_assert_eq(ps_store_counts_sum(b.s, &sum), 0);
	cr_assert_eq((long)sum.counted, ct[0].n + ct[1].n);
	cr_assert_eq(sum.in_ranges, sum.counted);
	ps_store_destroy(b.s);
	ps_policy_put(a);
}

static void fork_child(void *arg)
{
	struct ps_store *s = arg;
	struct ps_counts_sum sum;

	TCHECK(ps_store_count_access(s, 5) == 0, "count");
	TCHECK(ps_store_counts_sum(s, &sum) == 0 && sum.counted == 2, "the child's sum");
	/* The parent's reader ticks on: the fork held its ticks out. */
	TCHECK(ps_store_counts_tick(s) > 1, "the child's tick");
	TCHECK(ps_store_count_access(s, 5) == 0, "count");
	TCHECK(ps_store_counts_sum(s, &sum) == 0 && sum.counted == 3, "the child's sum");
	ps_store_destroy(s);
}

/*
 * A child goes on from the parent's counts, even forked while a thread was
 * reading them (RCU, RCU_QSBR: a reader of a SPIN, RWLOCK or SEQLOCK store
 * holds the store's lock in its walk, which a child cannot take;
 * docs/fork.md).  The reader's reads allocate: polstore allocates from
 * malloc() under a lock the fork holds, so that an allocator without fork
 * handlers (AddressSanitizer's) does not leave the child its locks held.
 */
VARIANT_TEST(counts, fork_child_counts)
{
	bool reader = (*sync == PS_SYNC_RCU || *sync == PS_SYNC_RCU_QSBR) && !ps_test_on_valgrind();
	struct ps_policy *a = ps_test_bind(1);
	struct ps_counts_sum sum;
	struct busy b = { .a = a };
	char out[4096];
	pthread_t r;
	int sig;

	/*
	 * Not under valgrind: the child's leak check finds what the reader's
	 * fold had allocated at the fork, which no thread of the child holds.
	 */
	if (reader)
		ps_test_alloc_fork_safe();
	b.s = store_of_ranges(*sync, a);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&b.stop, sizeof(b.stop)); /* atomics only */
	cr_assert_eq(ps_store_counts_enable(b.s, true), 0);
	cr_assert_eq(ps_store_count_access(b.s, 5), 0);
	if (reader)
		cr_assert_eq(pthread_create(&r, NULL, busy_reader, &b), 0);
	sig = ps_test_run_child(fork_child, b.s, 60, out, sizeof(out), NULL);
	PSI_STORE_RELEASE(b.stop, 1);
	if (reader)
		cr_assert_eq(pthread_join(r, NULL), 0);
	cr_assert_eq(sig, 0, "the child ended by signal %d: %s", sig, out);
	cr_assert_eq(ps_store_counts_sum(b.s, &sum), 0);
	cr_assert_eq(sum.counted, 1);
	ps_store_destroy(b.s);
	ps_test_alloc_restore();
	ps_policy_put(a);
}

/* One read of @s's counts: 0, or the first error. */
static int read_counts(struct ps_store *s, int which, uint64_t *total)
{
	struct ps_range_counts top[4];
	struct ps_counts_sum sum;
	int ret;

	*total = 0;
	switch (which) {
	case 0:
		ret = ps_store_counts_sum(s, &sum);
		*total = ret ? 0 : sum.counted;
		return ret;
	case 1:
		return ps_store_counts_foreach(s, 0, UINT64_MAX, sum_fn, total);
	default:
		ret = ps_store_counts_top(s, 0, UINT64_MAX, PS_COUNTS_BY_COUNT, top, 4);
		*total = ret == 4 ? top[0].count + top[3].count : 0;
		return ret < 0 ? ret : 0;
	}
}

/*
 * A read takes its buffers from the installed allocator: each of its
 * allocations failing in turn gives -ENOMEM and leaves no block behind,
 * and the read that succeeds reads what one with no allocator installed
 * does.  200 ranges and keys: the buffers grow past their first size.
 */
VARIANT_TEST(counts, reads_allocate_through_the_hooks)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = ps_store_create(*sync);
	uint64_t k, want, got;
	long n, live;
	int which, ret;

	cr_assert_not_null(s);
	for (k = 0; k < 200; k++)
		cr_assert_eq(ps_store_set(s, 10 * k, 10 * k + 5, a), 0);
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	for (k = 0; k < 200; k++)
		cr_assert_eq(ps_store_count_access(s, 10 * k + k % 5), 0);
	cr_assert_eq(ps_store_count_access(s, 10 * 7), 0);
	ps_store_synchronize(s);
	for (which = 0; which < 3; which++) {
		ps_test_alloc_restore();
		cr_assert_eq(read_counts(s, which, &want), 0);
		cr_assert_neq(want, 0);
		ps_test_alloc_install();
		live = ps_test_alloc_live();
		for (n = 0;; n++) {
			ps_test_alloc_fail_after(n);
			ret = read_counts(s, which, &got);
			cr_assert_eq(ps_test_alloc_disarm(), ret != 0, "read %d, %ld allocations", which, n);
			cr_assert_eq(ps_test_alloc_live(), live, "read %d left blocks", which);
			if (!ret)
				break;
			cr_assert_eq(ret, -ENOMEM);
		}
		/* The keys' and the ranges' buffers, each grown once at least. */
		cr_assert_geq(n, 4, "read %d: %ld allocations", which, n);
		cr_assert_eq(got, want, "read %d", which);
	}
	ps_test_alloc_restore();
	ps_store_destroy(s);
	ps_policy_put(a);
}

/* Each allocation failing in turn: enable leaves counting off; a count goes uncounted. */
VARIANT_TEST(counts, allocation_failure_changes_nothing)
{
	struct ps_policy *a = ps_test_bind(1);
	struct ps_store *s = store_of_ranges(*sync, a);
	struct ps_counts_sum sum;
	long k;
	int ret;

	ps_test_alloc_install();
	for (k = 0;; k++) {
		ps_test_alloc_fail_after(k);
		ret = ps_store_counts_enable(s, true);
		cr_assert_eq(ps_test_alloc_disarm(), ret != 0);
		if (!ret)
			break;
		cr_assert_eq(ret, -ENOMEM);
		cr_assert_eq(ps_store_counts_sum(s, &sum), -ENODATA);
	}
	for (k = 0; k < 4; k++) {
		ps_test_alloc_fail_after(k);
		cr_assert_eq(ps_store_count_access(s, 105 + (uint64_t)k), 0);
		(void)ps_test_alloc_disarm();
	}
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_leq(sum.counted, 4);
	cr_assert_eq(sum.counted, sum.in_ranges + sum.gaps);
	ps_store_destroy(s);
	ps_policy_put(a);
}
