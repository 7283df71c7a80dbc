// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Objects attached to a store (ps_store_attach()): objects that read a
 * store from threads of their own for as long as they live, such as a
 * fault plane's resolvers.  A destroy of a store something is attached
 * to would free memory those threads go on reading: it is refused before
 * anything is freed, naming the object and the call that ends it.
 *
 * One list for the process, under attach_lock.  Attachments are few (one
 * per plane) and only the calls that create and end such objects, and the
 * destroys, look at them: never a read or a set.  Nothing runs under the
 * lock but the list's walk and the allocation or free of an entry, which
 * are made there so that no entry is ever off the list in a thread's
 * hands: the fork handlers hold the lock across fork(), and a child finds
 * every entry on its copy of the list (its leak checks too).  The child's
 * copies of the parent's attachments (@pid another process) do not count,
 * as the threads of the objects stayed in the parent.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include <polstore/attach.h>
#include <polstore/store.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "attach_internal.h"
#include "check.h"
#include "held.h"
#include "store_internal.h"
#include "store_tag.h"

struct attach {
	struct attach *next;
	const struct ps_store *store;
	const void *user;
	const char *what, *until; /* the caller's strings, kept: never copied, never freed */
	pid_t pid;		  /* the process that attached it */
};

static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static struct attach *attach_list; /* under attach_lock */

/* The fork handlers are installed (by the constructor, or retried by ps_store_attach()). */
static bool attach_atfork_ok;
/* No fork handler takes it: glibc before 2.35 runs pthread_atfork() under the prepare handlers'
 * lock. */
static pthread_mutex_t attach_atfork_lock = PTHREAD_MUTEX_INITIALIZER;

static void attach_fork_prepare(void)
{
	pthread_mutex_lock(&attach_lock);
}

static void attach_fork_done(void)
{
	pthread_mutex_unlock(&attach_lock);
}

static bool attach_atfork_install(void)
{
	bool ok;

	pthread_mutex_lock(&attach_atfork_lock);
	if (!PSI_READ_ONCE(attach_atfork_ok))
		PSI_WRITE_ONCE(attach_atfork_ok,
				!pthread_atfork(attach_fork_prepare, attach_fork_done,
						attach_fork_done));
	ok = PSI_READ_ONCE(attach_atfork_ok);
	pthread_mutex_unlock(&attach_atfork_lock);
	return ok;
}

__attribute__((constructor)) static void attach_init(void)
{
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&attach_atfork_ok, sizeof(attach_atfork_ok));
	(void)attach_atfork_install();
}

int ps_store_attach(struct ps_store *store, const void *user, const char *what, const char *until)
{
	pid_t pid = getpid();
	struct attach *a, *i;
	int err = 0;

	if (!store || !user || !what || !until)
		return -EINVAL;
	if (psi_unlikely(store->tag == PSI_STORE_TAG_DEAD))
		psi_check_dead(store, "ps_store_attach()");
	/*
	 * Without the handlers a child could find the lock held for good.
	 * Read outside attach_atfork_lock, which no fork handler takes: a
	 * child forked while another thread held it would wait for ever.
	 */
	if (psi_unlikely(!PSI_READ_ONCE(attach_atfork_ok)) && !attach_atfork_install())
		return -ENOMEM;
	pthread_mutex_lock(&attach_lock);
	for (i = attach_list; i; i = i->next)
		if (i->store == store && i->user == user && i->pid == pid)
			err = -EEXIST;
	a = err ? NULL : psi_alloc(sizeof(*a));
	if (a) {
		*a = (struct attach){.next = attach_list,
				.store = store,
				.user = user,
				.what = what,
				.until = until,
				.pid = pid};
		attach_list = a;
	} else if (!err) {
		err = -ENOMEM;
	}
	pthread_mutex_unlock(&attach_lock);
	return err;
}

/* Never reads *@store: a forked child may detach after it destroyed its copy of the store. */
int ps_store_detach(struct ps_store *store, const void *user)
{
	struct attach **pp, *a = NULL;

	if (!store || !user)
		return -EINVAL;
	pthread_mutex_lock(&attach_lock);
	for (pp = &attach_list; *pp; pp = &(*pp)->next)
		if ((*pp)->store == store && (*pp)->user == user) {
			a = *pp;
			*pp = a->next;
			psi_free(a);
			break;
		}
	pthread_mutex_unlock(&attach_lock);
	return a ? 0 : -ENOENT;
}

int psi_attach_check_destroy(struct ps_store *store, const char *call, bool may_refuse)
{
	struct attach **pp, *a, *mine = NULL, shown;
	bool checked = store->tag & PSI_STORE_TAG_CHECKED;
	pid_t pid = getpid();
	unsigned others = 0;
	char more[48] = "";

	pthread_mutex_lock(&attach_lock);
	for (a = attach_list; a; a = a->next)
		if (a->store == store && a->pid == pid) {
			others += mine != NULL;
			mine = mine ?: a;
		}
	if (!mine) {
		for (pp = &attach_list; *pp;) {
			a = *pp;
			if (a->store != store) {
				pp = &a->next;
				continue;
			}
			*pp = a->next;
			psi_free(a);
		}
	}
	/* What the message names, read under the lock: a detach may free @mine after it. */
	if (mine)
		shown = *mine;
	pthread_mutex_unlock(&attach_lock);
	if (psi_likely(!mine))
		return 0;
	if (may_refuse && !checked)
		return -EBUSY;
	if (others)
		snprintf(more, sizeof(more), " (and %u other attached object%s)", others,
				others > 1 ? "s" : "");
	psi_misuse(call,
			"%s store %p: %s %p still reads it%s: call %s on it first, then destroy "
			"the store%s",
			ps_sync_name(store->sync), (void *)store, shown.what, shown.user, more,
			shown.until, checked ? " (checking mode)" : "");
}
