// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The threads polstore registers with liburcu (memb and qsbr flavours).
 *
 * Thread exit: a pthread key per flavour whose destructor unregisters the
 * exiting thread, so users never have to.  The destructor runs among the
 * thread's thread-specific-data destructors, after its cancellation cleanup
 * handlers: a thread that dies inside read-side sections (pthread_exit() in
 * a foreach callback, cancellation at a cancellation point) has them closed
 * there, which wakes a grace period already waiting for it
 * (psi_memb_thread_died()).
 *
 * The keys are created before any thread can register: by the entry points
 * that lead to a registration (psi_rcu_thread_init()), which fail when
 * pthread_key_create() does.  A registered thread without its key would
 * never leave liburcu's registry, and once glibc reused its stack for a
 * new thread, its stale read-side count could stall every grace period.
 *
 * The keys are deleted when the library is unloaded (or the process
 * exits), so a thread still alive after dlclose() does not run a
 * destructor in unmapped code when it exits.
 *
 * fork(): only the forking thread goes on in the child, but liburcu's
 * registry of each flavour (a list through every registered thread's
 * TLS) still lists the others, and glibc hands their stacks, TLS
 * included, to the child's next new threads: the TLS is reset, the entry
 * zeroed or linked a second time, and the child's next grace period
 * crashes or never ends.  liburcu requires every thread to unregister
 * before fork() and offers no way to unregister another thread.  So
 * polstore keeps its own list of the threads it registered (a record in
 * each thread's TLS, holding the address of the thread's registry entry),
 * and its fork handler, in the child, unlinks the entry of every one but
 * the forking thread from liburcu's registry, exactly as the thread's own
 * rcu_unregister_thread() would have (cds_list_del() of the entry; the
 * registry lock it would take is liburcu's private one, free in the child
 * unless a thread was frozen inside liburcu, which docs/fork.md forbids).
 * It runs before the child can start a thread: the handlers are
 * installed by a constructor, before any the application installs in
 * main(), and child handlers run in the order they were installed.
 *
 * What makes the unlinking sound:
 *  - The registry lists the entries in liburcu's own TLS object
 *    (struct urcu_reader / urcu_qsbr_reader, linked through ->node): the
 *    layout of liburcu's public static headers, which its inline read side
 *    relies on too.  An entry whose neighbours do not point back at it is
 *    left alone (a list frozen mid-update by a thread inside liburcu).
 *  - No registration or unregistration by polstore is half done in the
 *    child: both take ps_rcu_reg_lock around liburcu's call and the record,
 *    and the prepare handler takes it.
 *  - No polstore reclaim thread is inside a grace period, where liburcu
 *    moves the entries to lists of its own and holds its locks: the
 *    prepare handler first waits for every reclaim thread to be between
 *    grace periods (rcu_reclaim.h), then takes ps_rcu_reg_lock.  That
 *    order matters: a reclaim thread's grace period may wait for a reader
 *    that is registering.
 *  - The dead threads never run again in the child, so their read-side
 *    sections (and online QSBR states) protect nothing there.
 * Threads the application registered itself are not polstore's to
 * unlink: liburcu's rule stands for them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include <polstore/rcu.h>

#include "annotate.h"
#include "compiler.h"
#include "rcu_memb.h"
#include "rcu_qsbr.h"
#include "rcu_reclaim.h"
#include "rcu_stall.h"
#include "rcu_thread.h"

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
	psi_memb_thread_died();
}

static void ps_qsbr_key_destructor(void *unused)
{
	(void)unused;
	psi_qsbr_thread_died();
}

static void (*const ps_rcu_key_destructors[2])(void *) = {
	[PS_FLAVOR_MEMB] = ps_memb_key_destructor,
	[PS_FLAVOR_QSBR] = ps_qsbr_key_destructor,
};

/*
 * A thread polstore registered with a flavour, for the fork handler: one
 * per thread and flavour, in the thread's TLS, linked in ps_rcu_regs[]
 * from its registration to its unregistration.
 */
struct ps_rcu_reg {
	struct cds_list_head link;       /* in ps_rcu_regs[flavour] */
	struct cds_list_head *urcu_node; /* the thread's entry in liburcu's registry */
};

static __thread struct ps_rcu_reg ps_rcu_self[2] __attribute__((tls_model("initial-exec")));
/* Under ps_rcu_reg_lock, which also covers each liburcu (un)registration by polstore. */
static struct cds_list_head ps_rcu_regs[2] = {
	CDS_LIST_HEAD_INIT(ps_rcu_regs[0]),
	CDS_LIST_HEAD_INIT(ps_rcu_regs[1]),
};
static pthread_mutex_t ps_rcu_reg_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * The fork handlers are installed.  Set by the constructor or, if that
 * failed, under ps_rcu_atfork_lock: a lock no fork handler takes, as glibc
 * before 2.35 calls pthread_atfork() and the prepare handlers under one
 * internal lock.
 */
static bool ps_rcu_atfork_ok;
static pthread_mutex_t ps_rcu_atfork_lock = PTHREAD_MUTEX_INITIALIZER;

static void ps_rcu_atfork_prepare(void)
{
	/* An online QSBR forking thread goes offline: the grace period below must not wait for it. */
	psi_qsbr_fork_prepare();
	/* Reclaim threads first: see "That order matters" above. */
	psi_reclaim_atfork_prepare();
	pthread_mutex_lock(&ps_rcu_reg_lock);
	pthread_mutex_lock(&ps_rcu_keys_lock);
	/* Last: a reclaim thread takes the stall lock inside its grace periods. */
	psi_stall_atfork_prepare();
}

static void ps_rcu_atfork_parent(void)
{
	psi_stall_atfork_parent();
	pthread_mutex_unlock(&ps_rcu_keys_lock);
	pthread_mutex_unlock(&ps_rcu_reg_lock);
	psi_reclaim_atfork_parent();
	psi_qsbr_fork_done();
}

/* @node is linked in a well-formed list: its neighbours point back at it. */
static bool ps_rcu_node_linked(const struct cds_list_head *node)
{
	return node->next->prev == node && node->prev->next == node;
}

/*
 * In the child: unlink every thread polstore registered, but this one,
 * from liburcu's registries, as their own unregistration would have.  Their
 * records and entries live in their TLS, still mapped and not yet reused:
 * no thread has started in the child yet.
 */
static void ps_rcu_prune_dead_threads(void)
{
	int f;

	for (f = PS_FLAVOR_MEMB; f <= PS_FLAVOR_QSBR; f++) {
		struct cds_list_head *pos, *next;

		cds_list_for_each_safe(pos, next, &ps_rcu_regs[f]) {
			struct ps_rcu_reg *reg = cds_list_entry(pos, struct ps_rcu_reg, link);

			if (reg != &ps_rcu_self[f] && ps_rcu_node_linked(reg->urcu_node))
				cds_list_del(reg->urcu_node);
		}
		CDS_INIT_LIST_HEAD(&ps_rcu_regs[f]);
		if (ps_rcu_self[f].urcu_node)
			cds_list_add(&ps_rcu_self[f].link, &ps_rcu_regs[f]);
	}
}

static void ps_rcu_atfork_child(void)
{
	ps_rcu_prune_dead_threads();
	psi_qsbr_atfork_child();
	pthread_mutex_unlock(&ps_rcu_keys_lock);
	pthread_mutex_unlock(&ps_rcu_reg_lock);
	psi_reclaim_atfork_child();
	psi_qsbr_fork_done();
}

/*
 * Install the fork handlers as early as possible, so that the child
 * handler runs before any child handler the application installs (one
 * that starts a thread would be handed a dead thread's TLS before it is
 * unlinked).  A failure here is retried by psi_rcu_thread_init(), which
 * fails then too.
 */
__attribute__((constructor)) static void ps_rcu_atfork_install(void)
{
	ps_rcu_atfork_ok = !pthread_atfork(ps_rcu_atfork_prepare, ps_rcu_atfork_parent,
			ps_rcu_atfork_child);
}

static bool ps_rcu_keys_exist(void)
{
	if (ps_likely(__atomic_load_n(&ps_rcu_keys_ready, __ATOMIC_ACQUIRE))) {
		PS_ANNOTATE_HAPPENS_AFTER(&ps_rcu_keys_ready); /* the keys were created */
		return true;
	}
	return false;
}

int psi_rcu_thread_init(void)
{
	int err = 0, i;

	if (ps_likely(ps_rcu_keys_exist()))
		return 0;
	pthread_mutex_lock(&ps_rcu_atfork_lock);
	if (!ps_rcu_atfork_ok)
		ps_rcu_atfork_ok = !pthread_atfork(ps_rcu_atfork_prepare, ps_rcu_atfork_parent,
				ps_rcu_atfork_child);
	err = ps_rcu_atfork_ok ? 0 : ENOMEM;
	pthread_mutex_unlock(&ps_rcu_atfork_lock);
	if (err)
		return -err;
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

void psi_rcu_register(enum ps_flavor flavor, void (*urcu_register)(void),
		struct cds_list_head *urcu_node)
{
	struct ps_rcu_reg *self = &ps_rcu_self[flavor];

	pthread_mutex_lock(&ps_rcu_reg_lock);
	urcu_register();
	self->urcu_node = urcu_node;
	cds_list_add(&self->link, &ps_rcu_regs[flavor]);
	pthread_mutex_unlock(&ps_rcu_reg_lock);
	/*
	 * Every path to a registration went through psi_rcu_thread_init()
	 * first (a store or map exists, or the thread went online), so the
	 * keys exist; the call only makes sure of it.
	 */
	if (ps_likely(!psi_rcu_thread_init()))
		(void)pthread_setspecific(ps_rcu_keys[flavor], (void *)1);
}

void psi_rcu_unregister(enum ps_flavor flavor, void (*urcu_unregister)(void))
{
	struct ps_rcu_reg *self = &ps_rcu_self[flavor];

	pthread_mutex_lock(&ps_rcu_reg_lock);
	urcu_unregister();
	cds_list_del(&self->link);
	self->urcu_node = NULL;
	pthread_mutex_unlock(&ps_rcu_reg_lock);
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
	psi_memb_thread_exit();
	psi_qsbr_thread_exit();
}

int ps_rcu_barrier(void)
{
	bool was_online;

	/* Both wait for grace periods: not from inside a section they would wait for. */
	if (urcu_memb_read_ongoing() || _ps_qsbr_auto_depth)
		return -EDEADLK;
	psi_reclaim_barrier(&psi_reclaim_memb);
	/* An online QSBR thread goes offline for the wait, as ps_store_synchronize() does. */
	was_online = ps_qsbr_wait_enter();
	psi_reclaim_barrier(&psi_reclaim_qsbr);
	ps_qsbr_wait_exit(was_online);
	return 0;
}
