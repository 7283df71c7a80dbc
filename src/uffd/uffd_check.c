// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Misuse of a plane, reported with a message that names polstore, the call
 * and the plane, then abort() (polstore/uffd.h, "Misuse").
 *
 * Always: a call on a block whose tag is not a live plane's (a destroyed
 * plane whose memory was not reused yet, or no plane at all), and a call
 * from one of the plane's own resolver threads that would wait for that
 * thread.  In the checking mode (POLSTORE_CHECK=1, as for stores) also:
 * a call in a child of fork() other than those the header allows, and
 * every call on a destroyed plane, whose block is kept with a dead tag
 * (a quarantine of UF_GRAVES planes) so that no later allocation reuses
 * it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uffd_private.h"

#define UF_GRAVES 64 /* destroyed checked planes kept */

#ifdef POLSTORE_CHECKING
bool psi_uffd_checking = true;
#else
bool psi_uffd_checking;
#endif

static __thread const void *uf_resolver_of; /* the plane this thread resolves faults for */
static pthread_mutex_t uf_graves_lock = PTHREAD_MUTEX_INITIALIZER;
static void *uf_graves[UF_GRAVES];
static unsigned uf_graves_next;

/* POLSTORE_CHECK=1 or 0, read once when the library is loaded (as libpolstore reads it). */
__attribute__((constructor)) static void uf_read_env(void)
{
	const char *v = getenv("POLSTORE_CHECK");

	if (v && (!strcmp(v, "1") || !strcmp(v, "0")))
		psi_uffd_checking = v[0] == '1';
}

__attribute__((noreturn, cold, format(printf, 4, 5))) static void uf_misuse(
		const char *call, const void *uf, bool checked, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One write: the message stays whole beside other threads' output. */
	fprintf(stderr, "polstore: %s: plane %p: %s%s\n", call, uf, msg,
			checked ? " (checking mode)" : "");
	abort();
}

void uf_tag_init(struct uf_tag *t)
{
	t->magic = UF_TAG_LIVE;
	t->checked = psi_uffd_checking;
	t->pid = getpid();
}

int uf_enter(const struct uf_tag *t, const void *uf, const char *call, unsigned how)
{
	bool child = getpid() != t->pid;

	if (t->magic == UF_TAG_DEAD)
		uf_misuse(call, uf, t->checked, "destroyed already (ps_uffd_destroy())");
	if (t->magic != UF_TAG_LIVE)
		uf_misuse(call, uf, false,
				"not a plane (never created by ps_uffd_create(), or "
				"destroyed and its memory reused)");
	/* A child forked by a fill callback has none of the resolvers. */
	if (!(how & UF_RESOLVER) && !child && uf_resolver_of == uf)
		uf_misuse(call, uf, t->checked,
				"called on one of its resolver threads (from "
				"its fill callback), where it would wait for that thread itself");
	if (!(how & UF_IN_CHILD) && child) {
		if (t->checked)
			uf_misuse(call, uf, true,
					"created by process %d, called in process %d: "
					"in a child of fork() only ps_uffd_destroy() and "
					"ps_uffd_resolvers() may be called",
					(int)t->pid, (int)getpid());
		return -ESRCH;
	}
	return 0;
}

void uf_tag_bury(struct uf_tag *t, void *uf)
{
	void *old;

	t->magic = UF_TAG_DEAD;
	if (!t->checked) {
		free(uf);
		return;
	}
	pthread_mutex_lock(&uf_graves_lock);
	old = uf_graves[uf_graves_next];
	uf_graves[uf_graves_next] = uf;
	uf_graves_next = (uf_graves_next + 1) % UF_GRAVES;
	pthread_mutex_unlock(&uf_graves_lock);
	free(old);
}

void uf_resolver_mark(const void *uf)
{
	uf_resolver_of = uf;
}
