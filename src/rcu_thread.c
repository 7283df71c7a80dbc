// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Thread-exit hooks: a pthread key per liburcu flavour whose destructor
 * unregisters the exiting thread, so users never have to.
 *
 * The destructor runs among the thread's thread-specific-data destructors,
 * after its cancellation cleanup handlers: a thread that dies inside
 * read-side sections (pthread_exit() in a foreach callback, cancellation
 * at a cancellation point) has them closed there, which wakes a grace
 * period already waiting for it (_ps_memb_thread_died()).
 *
 * The keys are created before any thread can register: by the entry points
 * that lead to a registration (_ps_rcu_thread_init()), which fail when
 * pthread_key_create() does.  A registered thread without its key would
 * never leave liburcu's registry, and once glibc reused its stack for a
 * new thread, its stale read-side count could stall every grace period.
 *
 * The keys are deleted when the library is unloaded (or the process
 * exits), so a thread still alive after dlclose() does not run a
 * destructor in unmapped code when it exits.
 */
#include <pthread.h>
#include <stdbool.h>

#include <polstore/rcu.h>

#include "annotate.h"
#include "compiler.h"
#include "rcu_thread.h"
#include "store_internal.h"

static pthread_key_t ps_rcu_keys[2];
static bool ps_rcu_key_ok[2]; /* ps_rcu_keys[i] exists; under ps_rcu_keys_lock */
static pthread_mutex_t ps_rcu_keys_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Both keys exist: set with a release store under the lock once they do,
 * cleared when they are deleted.  Read with an acquire load, which orders
 * the reader after the key values were written.
 */
static int ps_rcu_keys_ready;

static void ps_memb_key_destructor(void *unused)
{
	(void)unused;
	_ps_memb_thread_died();
}

static void ps_qsbr_key_destructor(void *unused)
{
	(void)unused;
	_ps_qsbr_thread_died();
}

static void (*const ps_rcu_key_destructors[2])(void *) = {
	[PS_FLAVOR_MEMB] = ps_memb_key_destructor,
	[PS_FLAVOR_QSBR] = ps_qsbr_key_destructor,
};

static bool ps_rcu_keys_exist(void)
{
	if (ps_likely(__atomic_load_n(&ps_rcu_keys_ready, __ATOMIC_ACQUIRE))) {
		PS_ANNOTATE_HAPPENS_AFTER(&ps_rcu_keys_ready); /* the keys were created */
		return true;
	}
	return false;
}

int _ps_rcu_thread_init(void)
{
	int err = 0, i;

	if (ps_likely(ps_rcu_keys_exist()))
		return 0;
	pthread_mutex_lock(&ps_rcu_keys_lock);
	for (i = PS_FLAVOR_MEMB; i <= PS_FLAVOR_QSBR && !err; i++) {
		if (ps_rcu_key_ok[i])
			continue; /* a key created by an earlier, partly failed call */
		err = pthread_key_create(&ps_rcu_keys[i], ps_rcu_key_destructors[i]);
		ps_rcu_key_ok[i] = !err;
	}
	if (!err) {
		PS_ANNOTATE_HAPPENS_BEFORE(&ps_rcu_keys_ready);
		__atomic_store_n(&ps_rcu_keys_ready, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ps_rcu_keys_lock);
	return -err;
}

void _ps_rcu_thread_registered(enum ps_flavor flavor)
{
	/*
	 * Every path to a registration went through _ps_rcu_thread_init()
	 * first (a store or map exists, or the thread went online), so the
	 * keys exist; the call only makes sure of it.
	 */
	if (ps_likely(!_ps_rcu_thread_init()))
		(void)pthread_setspecific(ps_rcu_keys[flavor], (void *)1);
}

void _ps_rcu_thread_unregistered(enum ps_flavor flavor)
{
	/* No destructor call at exit for a thread that left already. */
	if (ps_rcu_keys_exist())
		(void)pthread_setspecific(ps_rcu_keys[flavor], NULL);
}

/*
 * At dlclose() of the shared library (or exit of the process): a thread
 * that exits later must not call a destructor that is no longer mapped.
 * Threads still registered then stay registered: polstore/rcu.h asks to
 * unregister them before unloading.
 */
__attribute__((destructor)) static void ps_rcu_keys_delete(void)
{
	int i;

	pthread_mutex_lock(&ps_rcu_keys_lock);
	__atomic_store_n(&ps_rcu_keys_ready, 0, __ATOMIC_RELAXED);
	for (i = PS_FLAVOR_MEMB; i <= PS_FLAVOR_QSBR; i++) {
		if (ps_rcu_key_ok[i])
			(void)pthread_key_delete(ps_rcu_keys[i]);
		ps_rcu_key_ok[i] = false;
	}
	pthread_mutex_unlock(&ps_rcu_keys_lock);
}

void ps_rcu_unregister_thread(void)
{
	_ps_memb_thread_exit();
	_ps_qsbr_thread_exit();
}
