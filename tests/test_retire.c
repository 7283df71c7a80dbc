// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Retiring a store: ps_store_destroy() beside the reclaim thread, which
 * may still be releasing the store's last batch.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

/* The variants that hand retired ranges to a reclaim thread. */
static enum ps_sync deferring_syncs[] = { PS_SYNC_SEQLOCK, PS_SYNC_RCU, PS_SYNC_RCU_QSBR };

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- destroy while the reclaim thread releases the store's last batch ---- */

static atomic_int hook_entered, hook_done, store_destroyed;

/*
 * Holds the reclaim thread inside the first batch release it is called
 * for, until the store is destroyed or 200 ms passed (a destroy that waits
 * for the release waits that long).
 */
static void hold_release(void)
{
	int i;

	if (atomic_exchange(&hook_entered, 1))
		return;
	for (i = 0; i < 200 && !atomic_load(&store_destroyed); i++)
		sleep_ms(1);
	sleep_ms(5); /* let a destroy that did not wait finish its frees */
	atomic_store(&hook_done, 1);
}

/*
 * A destroy that does not wait for a release in progress frees the store
 * under the reclaim thread, which then writes to it: the quarantine sees
 * the write (ASan and memcheck report it too).
 */
SYNCS_TEST(deferring_syncs, retire, destroy_beside_last_release, .timeout = 30)
{
	struct ps_policy *p = ps_test_bind(1);
	struct ps_store *s, *other;
	uint64_t t0;
	long written;
	int i;

	ps_test_alloc_install();
	ps_test_set_release_hook(hold_release);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	/*
	 * Retire ranges until a full batch is handed over and its release
	 * starts; slowly, so that no second batch follows it (destroy would
	 * wait for that one, and with it for the held release).
	 */
	t0 = ps_test_now_ns();
	for (i = 0; !atomic_load(&hook_entered); i++) {
		cr_assert_eq(ps_store_set(s, 0, 8, (i & 1) ? p : NULL), 0);
		sleep_ms(2);
		cr_assert_lt(ps_test_now_ns() - t0, 10000000000ULL, "no batch was released");
	}
	ps_test_alloc_quarantine_begin();
	ps_store_destroy(s);
	atomic_store(&store_destroyed, 1);
	while (!atomic_load(&hook_done))
		sleep_ms(1);
	/* Every item queued before this barrier is released: the held one too. */
	other = ps_store_create(*sync);
	cr_assert_not_null(other);
	ps_store_synchronize(other);
	ps_store_destroy(other);
	written = ps_test_alloc_quarantine_end();
	ps_test_set_release_hook(NULL);
	cr_assert_eq(written, 0, "%s: %ld freed blocks written by the reclaim thread after "
			"ps_store_destroy() returned", ps_sync_name(*sync), written);
	cr_assert_eq(ps_policy_refcount(p), 1);
	ps_policy_put(p);
	ps_test_alloc_restore();
}
