// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The threads polstore registers with each liburcu flavour: unregistered
 * by a pthread key's destructor when they exit, and unlinked from the
 * flavour's registry in a forked child.  Why and how: docs/fork.md.
 * Flavours register their hook tables (rcu_flavour.h) at load time; this
 * file names none of them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include <polstore/rcu.h>

#include "annotate.h"
#include "compiler.h"
#include "rcu_flavour.h"
#include "rcu_reclaim.h"
#include "rcu_stall.h"
#include "rcu_thread.h"

/* Set by the flavours' constructors, before any thread can register. */
static const struct psi_flavour *psi_rcu_flavours[PSI_FLAVOUR_COUNT];

#define for_each_flavour(f, i)                                                                     \
	for ((i) = 0; (i) < PSI_FLAVOUR_COUNT; (i)++)                                              \
		if (((f) = psi_rcu_flavours[i]) != NULL)

static pthread_key_t psi_rcu_keys[PSI_FLAVOUR_COUNT];
static bool psi_rcu_key_ok[PSI_FLAVOUR_COUNT]; /* psi_rcu_keys[i] exists; under psi_rcu_keys_lock */
static pthread_mutex_t psi_rcu_keys_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Every flavour's key exists: set with a release store under the lock once
 * they do, cleared when they are deleted.  Read with an acquire load, which
 * orders the reader after the key values were written.
 */
static int psi_rcu_keys_ready;

void psi_rcu_flavour_add(const struct psi_flavour *f)
{
	pthread_mutex_lock(&psi_rcu_keys_lock);
	psi_rcu_flavours[f->id] = f;
	/* Should keys exist already, the next psi_rcu_thread_init() creates this flavour's. */
	PSI_WRITE_ONCE(psi_rcu_keys_ready, 0);
	pthread_mutex_unlock(&psi_rcu_keys_lock);
	psi_reclaim_add(f->reclaimer);
}

/*
 * The key's value is the flavour.  The destructor runs after the thread's
 * cancellation cleanup handlers, so sections it died in are closed here.
 */
static void psi_rcu_key_destructor(void *flavour)
{
	((const struct psi_flavour *)flavour)->thread_died();
}

/*
 * A thread polstore registered with a flavour, for the fork handler: one
 * per thread and flavour, in the thread's TLS, linked in psi_rcu_regs[]
 * from its registration to its unregistration.
 */
struct psi_rcu_reg {
	struct cds_list_head link;       /* in psi_rcu_regs[flavour] */
	struct cds_list_head *urcu_node; /* the thread's entry in liburcu's registry */
};

static __thread struct psi_rcu_reg psi_rcu_self[PSI_FLAVOUR_COUNT]
	__attribute__((tls_model("initial-exec")));
/* Under psi_rcu_reg_lock, which also covers each liburcu (un)registration by polstore. */
static struct cds_list_head psi_rcu_regs[PSI_FLAVOUR_COUNT] = {
	CDS_LIST_HEAD_INIT(psi_rcu_regs[0]),
	CDS_LIST_HEAD_INIT(psi_rcu_regs[1]),
};
_Static_assert(PSI_FLAVOUR_COUNT == 2, "one list head per flavour above");
static pthread_mutex_t psi_rcu_reg_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * The fork handlers are installed.  Set by the constructor or, if that
 * failed, under psi_rcu_atfork_lock: a lock no fork handler takes, as glibc
 * before 2.35 calls pthread_atfork() and the prepare handlers under one
 * internal lock.
 */
static bool psi_rcu_atfork_ok;
static pthread_mutex_t psi_rcu_atfork_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Reclaim threads before psi_rcu_reg_lock: a reclaim thread's grace period
 * may wait for a reader that is registering.
 */
static void psi_rcu_atfork_prepare(void)
{
	const struct psi_flavour *f;
	int i;

	/* A QSBR forking thread goes offline: the grace periods below must not wait for it. */
	for_each_flavour(f, i)
		if (f->fork_prepare)
			f->fork_prepare();
	psi_reclaim_atfork_prepare();
	pthread_mutex_lock(&psi_rcu_reg_lock);
	pthread_mutex_lock(&psi_rcu_keys_lock);
	/* Last: a reclaim thread takes the stall lock inside its grace periods. */
	psi_stall_atfork_prepare();
}

static void psi_rcu_fork_done(void)
{
	const struct psi_flavour *f;
	int i;

	for_each_flavour(f, i)
		if (f->fork_done)
			f->fork_done();
}

static void psi_rcu_atfork_parent(void)
{
	psi_stall_atfork_parent();
	pthread_mutex_unlock(&psi_rcu_keys_lock);
	pthread_mutex_unlock(&psi_rcu_reg_lock);
	psi_reclaim_atfork_parent();
	psi_rcu_fork_done();
}

/* @node is linked in a well-formed list: its neighbours point back at it. */
static bool psi_rcu_node_linked(const struct cds_list_head *node)
{
	return node->next->prev == node && node->prev->next == node;
}

/*
 * In the child: unlink every thread polstore registered, but this one,
 * from liburcu's registries, as their own unregistration would have.  Their
 * records and entries live in their TLS, still mapped and not yet reused:
 * no thread has started in the child yet.
 */
static void psi_rcu_prune_dead_threads(void)
{
	int f;

	for (f = 0; f < PSI_FLAVOUR_COUNT; f++) {
		struct cds_list_head *pos, *next;

		cds_list_for_each_safe(pos, next, &psi_rcu_regs[f]) {
			struct psi_rcu_reg *reg = cds_list_entry(pos, struct psi_rcu_reg, link);

			if (reg != &psi_rcu_self[f] && psi_rcu_node_linked(reg->urcu_node))
				cds_list_del(reg->urcu_node);
		}
		CDS_INIT_LIST_HEAD(&psi_rcu_regs[f]);
		if (psi_rcu_self[f].urcu_node)
			cds_list_add(&psi_rcu_self[f].link, &psi_rcu_regs[f]);
	}
}

static void psi_rcu_atfork_child(void)
{
	const struct psi_flavour *f;
	int i;

	psi_rcu_prune_dead_threads();
	for_each_flavour(f, i)
		if (f->fork_child)
			f->fork_child();
	pthread_mutex_unlock(&psi_rcu_keys_lock);
	pthread_mutex_unlock(&psi_rcu_reg_lock);
	psi_reclaim_atfork_child();
	psi_rcu_fork_done();
}

/*
 * Installed by a constructor, so the child handler runs before any child
 * handler the application installs (docs/fork.md).  A failure here is
 * retried by psi_rcu_thread_init(), which fails then too.
 */
__attribute__((constructor)) static void psi_rcu_atfork_install(void)
{
	psi_rcu_atfork_ok = !pthread_atfork(psi_rcu_atfork_prepare, psi_rcu_atfork_parent,
			psi_rcu_atfork_child);
}

static bool psi_rcu_keys_exist(void)
{
	if (psi_likely(PSI_LOAD_ACQUIRE(psi_rcu_keys_ready))) {
		PSI_ANNOTATE_HAPPENS_AFTER(&psi_rcu_keys_ready); /* the keys were created */
		return true;
	}
	return false;
}

/*
 * A registered thread without its key would never leave liburcu's
 * registry; once glibc reused its stack, its stale read-side count could
 * stall every grace period.  So the keys exist before any registration.
 */
int psi_rcu_thread_init(void)
{
	const struct psi_flavour *f;
	int err = 0, i;

	if (psi_likely(psi_rcu_keys_exist()))
		return 0;
	pthread_mutex_lock(&psi_rcu_atfork_lock);
	if (!psi_rcu_atfork_ok)
		psi_rcu_atfork_ok = !pthread_atfork(psi_rcu_atfork_prepare, psi_rcu_atfork_parent,
				psi_rcu_atfork_child);
	err = psi_rcu_atfork_ok ? 0 : ENOMEM;
	pthread_mutex_unlock(&psi_rcu_atfork_lock);
	if (err)
		return -err;
	pthread_mutex_lock(&psi_rcu_keys_lock);
	for_each_flavour(f, i) {
		if (psi_rcu_key_ok[i])
			continue; /* a key created by an earlier, partly failed call */
		err = pthread_key_create(&psi_rcu_keys[i], psi_rcu_key_destructor);
		psi_rcu_key_ok[i] = !err;
		if (err)
			break;
	}
	if (!err) {
		PSI_ANNOTATE_HAPPENS_BEFORE(&psi_rcu_keys_ready);
		PSI_STORE_RELEASE(psi_rcu_keys_ready, 1);
	}
	pthread_mutex_unlock(&psi_rcu_keys_lock);
	return -err;
}

void psi_rcu_register(const struct psi_flavour *flavour, void (*urcu_register)(void),
		struct cds_list_head *urcu_node)
{
	struct psi_rcu_reg *self = &psi_rcu_self[flavour->id];

	pthread_mutex_lock(&psi_rcu_reg_lock);
	urcu_register();
	self->urcu_node = urcu_node;
	cds_list_add(&self->link, &psi_rcu_regs[flavour->id]);
	pthread_mutex_unlock(&psi_rcu_reg_lock);
	/*
	 * Every path to a registration went through psi_rcu_thread_init()
	 * first (a store or map exists, or the thread went online), so the
	 * keys exist; the call only makes sure of it.
	 */
	if (psi_likely(!psi_rcu_thread_init()))
		(void)pthread_setspecific(psi_rcu_keys[flavour->id], (void *)flavour);
}

void psi_rcu_unregister(const struct psi_flavour *flavour, void (*urcu_unregister)(void))
{
	struct psi_rcu_reg *self = &psi_rcu_self[flavour->id];

	pthread_mutex_lock(&psi_rcu_reg_lock);
	urcu_unregister();
	cds_list_del(&self->link);
	self->urcu_node = NULL;
	pthread_mutex_unlock(&psi_rcu_reg_lock);
	/* No destructor call at exit for a thread that left already. */
	if (psi_rcu_keys_exist())
		(void)pthread_setspecific(psi_rcu_keys[flavour->id], NULL);
}

/*
 * At dlclose() of the shared library (or exit of the process): a thread
 * that exits later must not call a destructor that is no longer mapped.
 * Threads still registered then stay registered: polstore/rcu.h asks to
 * unregister them before unloading.
 */
__attribute__((destructor)) static void psi_rcu_keys_delete(void)
{
	int i;

	pthread_mutex_lock(&psi_rcu_keys_lock);
	PSI_WRITE_ONCE(psi_rcu_keys_ready, 0);
	for (i = 0; i < PSI_FLAVOUR_COUNT; i++) {
		if (psi_rcu_key_ok[i])
			(void)pthread_key_delete(psi_rcu_keys[i]);
		psi_rcu_key_ok[i] = false;
	}
	pthread_mutex_unlock(&psi_rcu_keys_lock);
}

void ps_rcu_unregister_thread(void)
{
	const struct psi_flavour *f;
	int i;

	for_each_flavour(f, i)
		f->thread_exit();
}

int ps_rcu_barrier(void)
{
	const struct psi_flavour *f;
	int i;

	/* Each waits for grace periods: not from inside a section one would wait for. */
	for_each_flavour(f, i)
		if (f->in_section())
			return -EDEADLK;
	/* An online QSBR thread goes offline for its wait, as ps_store_synchronize() does. */
	for_each_flavour(f, i) {
		bool token = f->wait_enter();

		psi_reclaim_barrier(f->reclaimer);
		f->wait_exit(token);
	}
	return 0;
}
