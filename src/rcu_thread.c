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
 */
#include <pthread.h>
#include <stdbool.h>

#include <polstore/rcu.h>

#include "annotate.h"
#include "rcu_thread.h"
#include "store_internal.h"

static pthread_key_t ps_rcu_keys[2];
static bool ps_rcu_key_ok[2]; /* pthread_key_create() succeeded */
static pthread_once_t ps_rcu_keys_once = PTHREAD_ONCE_INIT;

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

static void ps_rcu_keys_create(void)
{
	/* Failure leaves threads registered until exit of the process: harmless. */
	ps_rcu_key_ok[PS_FLAVOR_MEMB] =
			!pthread_key_create(&ps_rcu_keys[PS_FLAVOR_MEMB], ps_memb_key_destructor);
	ps_rcu_key_ok[PS_FLAVOR_QSBR] =
			!pthread_key_create(&ps_rcu_keys[PS_FLAVOR_QSBR], ps_qsbr_key_destructor);
	/* glibc's pthread_once fast path is an atomic load checkers do not see. */
	PS_ANNOTATE_HAPPENS_BEFORE(&ps_rcu_keys_once);
}

void _ps_rcu_thread_registered(enum ps_flavor flavor)
{
	pthread_once(&ps_rcu_keys_once, ps_rcu_keys_create);
	PS_ANNOTATE_HAPPENS_AFTER(&ps_rcu_keys_once); /* the keys were created */
	if (ps_rcu_key_ok[flavor])
		(void)pthread_setspecific(ps_rcu_keys[flavor], (void *)1);
}

void ps_rcu_unregister_thread(void)
{
	_ps_memb_thread_exit();
	_ps_qsbr_thread_exit();
}
