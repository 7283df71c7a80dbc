// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The retire log of the RCU stores (src/sync/retire_log.c) and the polled
 * grace periods it waits for (src/locks/rcu_reclaim.c), white-box:
 *  - entries come back in the order added, and only once the grace period
 *    of their mark has ended; blocks grow, go as they empty, and an empty
 *    log is freed whole;
 *  - marks past the ring wait for the later grace period, never an
 *    earlier one;
 *  - a failed reservation leaves the log as it was;
 *  - a cookie taken after an unpublication is not done while a reader
 *    that could still reach the memory stays in its section, and is done
 *    after it left and a grace period ran.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>

#include "compiler.h"
#include "rcu_flavour.h"
#include "rcu_reclaim.h"
#include "retire_log.h"
#include "testutil.h"

/* Entry i of a test: an even word, as the stores' entries are (their low bits are tags). */
static void *entry(uintptr_t i)
{
	return (void *)((i + 1) << 2);
}

/* A reclaimer of the test's own whose ended grace periods the test sets. */
static struct psi_reclaimer fake = PSI_RECLAIMER_INIT(NULL);

static void fake_ended(uint64_t gp)
{
	PSI_STORE_RELEASE(fake.gp_ended, gp);
}

static void add_n(struct psi_rlog **log, uintptr_t first, uintptr_t n, size_t bytes_each)
{
	uintptr_t i;

	cr_assert_eq(psi_rlog_reserve(log, n), 0);
	for (i = 0; i < n; i++)
		psi_rlog_add(*log, entry(first + i));
	psi_rlog_added_bytes(*log, n * bytes_each);
}

/* Take every ripe entry, checking they come in order from @first; return how many. */
static uintptr_t take_all(struct psi_rlog *log, uintptr_t first, size_t bytes_each)
{
	uintptr_t n = 0;
	void *e;

	while ((e = psi_rlog_take(log))) {
		cr_assert_eq(e, entry(first + n), "entry %lu came as %p",
				(unsigned long)(first + n), e);
		psi_rlog_taken(log, bytes_each);
		n++;
	}
	return n;
}

Test(rlog, entries_come_back_in_order_after_their_grace_period)
{
	struct psi_rlog *log = NULL;

	fake_ended(0);
	add_n(&log, 0, 3, 100);
	psi_rlog_mark(log, 1);
	add_n(&log, 3, 2, 100);
	psi_rlog_mark(log, 2);
	cr_assert(psi_rlog_sane(log));
	cr_assert_eq(psi_rlog_count(log), 5);
	cr_assert_null(psi_rlog_take(log), "an entry before its grace period ended");
	cr_assert_not(psi_rlog_ripen(log, &fake));
	cr_assert_eq(psi_rlog_kept_bytes(log), 0, "bytes in flight counted as kept");
	fake_ended(1);
	cr_assert(psi_rlog_ripen(log, &fake));
	cr_assert_eq(psi_rlog_ripe_bytes(log), 300);
	cr_assert_eq(psi_rlog_peek(log), entry(0));
	cr_assert_eq(take_all(log, 0, 100), 3, "only the entries of grace period 1");
	cr_assert_eq(psi_rlog_kept_bytes(log), 0);
	fake_ended(2);
	cr_assert(psi_rlog_ripen(log, &fake));
	cr_assert_eq(take_all(log, 3, 100), 2);
	cr_assert_eq(psi_rlog_count(log), 0);
	cr_assert(psi_rlog_sane(log));
	psi_rlog_trim(&log);
	cr_assert_null(log, "an empty log is freed");
}

Test(rlog, blocks_grow_and_go_as_they_empty)
{
	struct psi_rlog *log = NULL;
	uintptr_t added = 0, taken = 0, round;
	size_t own0;

	fake_ended(0);
	for (round = 1; round <= 40; round++) {
		uintptr_t n = round * 37 % 301;

		add_n(&log, added, n, 8);
		added += n;
		psi_rlog_mark(log, round);
		fake_ended(round - 1);
		psi_rlog_ripen(log, &fake);
		taken += take_all(log, taken, 8);
		cr_assert(psi_rlog_sane(log));
		cr_assert_eq(psi_rlog_count(log), added - taken);
	}
	cr_assert_eq(added - taken, 40 * 37 % 301, "the last round still waits");
	own0 = log->own_bytes;
	psi_rlog_ripen_upto(log, log->added, log->added_bytes);
	taken += take_all(log, taken, 8);
	cr_assert_eq(taken, added);
	cr_assert_leq(log->own_bytes, own0, "blocks only go as the log empties");
	cr_assert_eq(psi_rlog_bytes(log), log->own_bytes);
	psi_rlog_trim(&log);
	cr_assert_null(log);
}

/*
 * More grace periods than marks: the last mark takes the new entries too,
 * with the later cookie, so none of them comes back early.
 */
Test(rlog, marks_past_the_ring_wait_for_the_later_grace_period)
{
	struct psi_rlog *log = NULL;
	uint64_t gp;

	fake_ended(0);
	for (gp = 1; gp <= PSI_RLOG_MARKS + 3; gp++) {
		add_n(&log, gp - 1, 1, 1);
		psi_rlog_mark(log, gp);
	}
	for (gp = 1; gp <= PSI_RLOG_MARKS + 3; gp++) {
		fake_ended(gp);
		psi_rlog_ripen(log, &fake);
		/* Entry k (grace period k + 1) never comes before grace period k + 1 ended. */
		cr_assert_leq(log->ripe, gp, "an entry before its grace period at %llu",
				(unsigned long long)gp);
	}
	cr_assert_eq(log->ripe, PSI_RLOG_MARKS + 3, "every entry ripe at the last one");
	cr_assert_eq(take_all(log, 0, 1), PSI_RLOG_MARKS + 3);
	psi_rlog_trim(&log);
	cr_assert_null(log);
}

Test(rlog, failed_reservation_leaves_the_log_as_it_was)
{
	struct psi_rlog *log = NULL, before;
	long k;

	ps_test_alloc_install();
	ps_test_alloc_fail_once(0);
	cr_assert_eq(psi_rlog_reserve(&log, 1), -ENOMEM);
	cr_assert(ps_test_alloc_disarm());
	cr_assert_null(log, "no log made");
	add_n(&log, 0, 5, 1);
	psi_rlog_mark(log, 1);
	for (k = 0;; k++) {
		int ret;

		before = *log;
		ps_test_alloc_fail_once(k);
		ret = psi_rlog_reserve(&log, 1000);
		if (!ps_test_alloc_disarm()) {
			cr_assert_eq(ret, 0);
			break;
		}
		cr_assert_eq(ret, -ENOMEM);
		cr_assert_eq(memcmp(&before, log, sizeof(before)), 0,
				"a failed reservation changed the log");
	}
	cr_assert_gt(k, 0, "the reservation allocated nothing");
	psi_rlog_ripen_upto(log, log->added, log->added_bytes);
	cr_assert_eq(take_all(log, 0, 1), 5);
	psi_rlog_trim(&log);
	cr_assert_null(log);
	cr_assert_eq(ps_test_alloc_live(), 0, "%ld blocks leaked", ps_test_alloc_live());
	ps_test_alloc_restore();
}

/* ---- polled grace periods of a real reclaimer ---------------------------------- */

struct section_holder {
	sem_t inside, leave;
};

static void *hold_section(void *arg)
{
	struct section_holder *h = arg;

	cr_assert_eq(ps_sync_read_lock(PS_SYNC_RCU), 0);
	sem_post(&h->inside);
	while (sem_wait(&h->leave))
		;
	ps_sync_read_unlock(PS_SYNC_RCU);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * What a writer unpublished while a reader was inside its section is not
 * freed while the reader stays: the cookie taken after the unpublication
 * is not done, however long a grace period is asked for; once the reader
 * left, it is done within a grace period.
 */
Test(poll, cookie_waits_for_a_reader_inside, .timeout = 60)
{
	struct psi_reclaimer *rc = psi_flavour_memb.reclaimer;
	struct section_holder h;
	pthread_t t;
	uint64_t cookie;
	int i;

	sem_init(&h.inside, 0, 0);
	sem_init(&h.leave, 0, 0);
	cr_assert_eq(pthread_create(&t, NULL, hold_section, &h), 0);
	while (sem_wait(&h.inside))
		;
	/* The unpublication would be here; then the fence, then the cookie. */
	PSI_FENCE(SEQ_CST);
	cookie = psi_reclaim_poll_state(rc);
	cr_assert_eq(psi_reclaim_poll_weigh(rc, 4096), 0);
	for (i = 0; i < 20; i++) {
		sleep_ms(10);
		cr_assert_not(psi_reclaim_poll_done(rc, cookie),
				"grace period %llu ended with a reader inside since before it",
				(unsigned long long)cookie);
	}
	sem_post(&h.leave);
	pthread_join(t, NULL);
	for (i = 0; i < 5000 && !psi_reclaim_poll_done(rc, cookie); i++)
		sleep_ms(1);
	cr_assert(psi_reclaim_poll_done(rc, cookie),
			"no grace period in 5 s after the reader left");
	/* A barrier runs one more: a cookie taken now is done after it. */
	cookie = psi_reclaim_poll_state(rc);
	cr_assert_eq(ps_rcu_barrier(), 0);
	cr_assert(psi_reclaim_poll_done(rc, cookie));
	sem_destroy(&h.inside);
	sem_destroy(&h.leave);
}
