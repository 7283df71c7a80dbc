/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The checking mode's thread records (check_thread.c: the sections and
 * walks each thread holds, the call it waits in, the deadlock watchdog)
 * as its wrappers of a store's operations (check.c) use them.  check.c
 * says what the mode checks.
 */
#ifndef POLSTORE_SRC_CHECK_THREAD_H
#define POLSTORE_SRC_CHECK_THREAD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <urcu/list.h>

#include "store_internal.h"

#define PSI_CHK_SECTIONS 16     /* slots in a thread record itself; more go to a mapping */

/* What a section holds, or what a wait needs (a mask). */
enum {
	CHK_EXCL = 1,     /* the store's lock, exclusively (SPIN; SEQLOCK walks; writers) */
	CHK_SHARED = 2,   /* a share of an RWLOCK store's lock */
	CHK_GP_MEMB = 4,  /* a memb read-side section; as a wait: a memb grace period */
	CHK_GP_QSBR = 8,  /* a qsbr read-side section; as a wait: a qsbr grace period */
	CHK_WALK = 16,    /* a section: a foreach walk's (read unlocks close none) */
};

struct chk_store {
	struct ps_sync_ops ops;          /* what s->ops points at: the wrappers */
	const struct ps_sync_ops *real;  /* the variant's */
	struct ps_store *s;
	long sections;                   /* atomic: sections and walks open, every thread */
	/*
	 * In a forked child: the call in which a thread of the parent held
	 * the store's lock at the fork (a SPIN or RWLOCK store), that thread
	 * and whether it held it in a section; NULL: none.  Set by the fork
	 * handler, before any other thread of the child runs.
	 */
	const char *fork_call;
	pid_t fork_tid;
	bool fork_section;
};

/*
 * The sections of one store of one kind that a thread holds, counted: any
 * depth of nesting, closed in any order, takes one slot.  A slot whose
 * @count is 0 is free.
 */
struct chk_section {
	struct ps_store *s;
	const char *call; /* the call that opened the first of them */
	int kind;         /* CHK_*, with CHK_WALK for foreach walks */
	bool exit_ok;     /* polstore closes them if the thread exits inside (rcu.h) */
	unsigned count;
};

/* The call a thread waits in (@s NULL: none). */
struct chk_wait {
	struct ps_store *s;
	const char *call;
	int mask;
	uint64_t since;
};

/*
 * A thread's record.  Only the thread writes it, and its signal handlers,
 * whose calls nest inside the thread's: every field is an atomic (relaxed,
 * so a handler that interrupts an update sees each field whole), an
 * update runs between chk_write_begin() and chk_write_end(), and a handler
 * leaves what it changed as it found it.  Other threads (the watchdog, a
 * misuse report) read it as a seqlock reader does (chk_read_thread()), and
 * never wait for it: no lock is on any path a signal handler can take.
 */
struct chk_thread {
	struct cds_list_head link; /* in @chk_threads, while @listed (under chk_lock) */
	pid_t tid;
	bool listed;
	unsigned busy;             /* updates under way (nested: a signal handler's) */
	unsigned long ver;         /* updates done */
	struct chk_wait wait;
	unsigned n;                /* slots in use or used before: sec[0..n) */
	unsigned cap;              /* slots @sec has room for */
	unsigned lost;             /* sections open that no slot names (no memory for one) */
	struct chk_section *sec;   /* @inl, or a mapping of its own (chk_grow()) */
	void *maps;                /* the mappings @sec used, newest first */
	struct chk_section inl[PSI_CHK_SECTIONS];
};

static inline struct chk_store *psi_chk_of(const struct ps_store *s)
{
	return psi_container_of(s->ops, struct chk_store, ops);
}

/* A misuse the mode found: the message, and abort(). */
__attribute__((noreturn, cold, format(printf, 2, 3))) void psi_chk_die(const char *call,
		const char *fmt, ...);

/* chk_lock (the thread list, the graves, the key), with every signal blocked; *@old: the mask. */
void psi_chk_global_lock(sigset_t *old);
void psi_chk_global_unlock(const sigset_t *old);

/* This thread's record, listed (and the watchdog started) at its first use. */
struct chk_thread *psi_chk_self(void);

/* The call @t now waits in goes to *@saved, and @s, @call, @mask replace it. */
void psi_chk_wait_begin(struct chk_thread *t, struct ps_store *s, const char *call, int mask,
		struct chk_wait *saved);
/* The wait of *@saved is @t's again. */
void psi_chk_wait_end(struct chk_thread *t, const struct chk_wait *saved);

/* A section of @s of @kind is open; the wait of *@saved is @t's again. */
void psi_chk_push(struct chk_thread *t, struct ps_store *s, const char *call, int kind,
		bool exit_ok, const struct chk_wait *saved);
/* Close one section of @s of @kind of this thread; false when it holds none. */
bool psi_chk_pop(struct chk_thread *t, struct ps_store *s, int kind);
/* This thread holds a section or walk of @s (or one no slot names). */
bool psi_chk_holds(struct chk_thread *t, const struct ps_store *s);
/* Another thread holding a section of @s (its id, 0: none), and the call that opened it. */
pid_t psi_chk_other_holder(const struct ps_store *s, const char **call);

#endif /* POLSTORE_SRC_CHECK_THREAD_H */
