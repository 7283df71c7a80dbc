// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The checking mode of check.h.
 *
 * A checked store's ops table is a copy of its variant's with every entry
 * point wrapped (struct chk_store, reached from the store through
 * s->ops).  Each thread keeps a record (struct chk_thread, in its TLS,
 * listed in @chk_threads): the read-side sections and walks it holds, and
 * the call it waits in, if any.  From those:
 *  - a read unlock of a store this thread holds no section of (never
 *    locked, or locked by another thread), and a borrowed lookup outside
 *    every section of the store, abort with a message naming the call and
 *    the store;
 *  - a destroy while sections of the store are open (on any thread)
 *    aborts; the destroyed store's memory is kept for a while (a
 *    quarantine of PSI_CHK_GRAVES stores) with a poisoned tag and ops that
 *    abort on any later call;
 *  - a thread that exits inside a SPIN or RWLOCK section or walk (whose
 *    lock stays held for good) aborts;
 *  - a watchdog thread looks every PSI_CHK_SCAN_MS at the threads waiting
 *    in a call: one that waits for a store held by a thread that waits,
 *    through a chain of such waits, for the first, is a deadlock (two
 *    SPIN walks reading each other's store, a writer inside another
 *    store's section...): it prints the cycle and aborts, within a second.
 *
 * A set is taken to wait for a grace period only where the variant says
 * it could now (ops->set_may_wait()); a set inside a section never does.
 *
 * Signal handlers: a handler's calls nest inside those of the thread it
 * interrupted and update the same record, which takes no lock (struct
 * chk_thread), so a lookup in a handler is checked as anywhere else.
 *
 * Costs: two atomic increments per record update (the watchdog reads
 * without waiting), a clock read per call; nothing on stores created with
 * the mode off.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <urcu/list.h>

#include "check.h"
#include "held.h"
#include "store_internal.h"
#include "variants.h"

#define PSI_CHK_SECTIONS 16     /* slots in a thread record itself; more go to a mapping */
#define PSI_CHK_GRAVES 64       /* destroyed stores kept poisoned */
#define PSI_CHK_SCAN_MS 100     /* the watchdog's period */
#define PSI_CHK_STUCK_MS 300    /* a wait this old may be part of a deadlock */
#define PSI_CHK_THREADS_MAX 256 /* threads one scan looks at */
#define PSI_CHK_SNAP_SECTIONS 4096 /* slots one scan looks at, of every thread */

#ifdef POLSTORE_CHECKING
bool psi_checking = true;
#else
bool psi_checking;
#endif

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

/* A mapping that held a thread's slots: kept until the thread exits (readers may be in it). */
struct chk_map {
	void *prev;
	size_t size;
	struct chk_section sec[];
};

static __thread struct chk_thread chk_me;
static pthread_mutex_t chk_lock = PTHREAD_MUTEX_INITIALIZER; /* the list, the graves, the key */
static struct cds_list_head chk_threads = CDS_LIST_HEAD_INIT(chk_threads);
static pthread_key_t chk_key;
static bool chk_key_ok, chk_watchdog_started;
static struct ps_store *chk_graves[PSI_CHK_GRAVES];
static unsigned chk_graves_next;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* POLSTORE_CHECK=1 or 0, read once when the library is loaded. */
__attribute__((constructor)) static void chk_read_env(void)
{
	const char *v = getenv("POLSTORE_CHECK");

	if (v && (!strcmp(v, "1") || !strcmp(v, "0")))
		psi_checking = v[0] == '1';
}

static inline struct chk_store *chk_of(const struct ps_store *s)
{
	return psi_container_of(s->ops, struct chk_store, ops);
}

__attribute__((noreturn, cold, format(printf, 2, 3))) static void chk_die(const char *call,
		const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	psi_misuse(call, "%s (checking mode)", msg);
}

/* ---- thread records ---- */

static void chk_thread_exit(void *arg);
static void chk_watchdog_start(void);

/*
 * chk_lock, taken by application threads with every signal blocked: a
 * handler that interrupted its holder and called into a checked store
 * would wait for its own thread.
 */
static void chk_global_lock(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	pthread_mutex_lock(&chk_lock);
}

static void chk_global_unlock(const sigset_t *old)
{
	pthread_mutex_unlock(&chk_lock);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/*
 * Around every update of @t by its thread.  Seq_cst: the increment of
 * @busy is ordered before the update's stores, which are ordered before
 * @ver's increment and @busy's decrement (chk_read_thread() pairs).
 */
static inline void chk_write_begin(struct chk_thread *t)
{
	PSI_FETCH_ADD(t->busy, 1, SEQ_CST);
	/* The update's relaxed stores after @busy, for a reader that orders by a fence. */
	PSI_FENCE(RELEASE);
}

static inline void chk_write_end(struct chk_thread *t)
{
	PSI_FETCH_ADD(t->ver, 1, SEQ_CST);
	PSI_FETCH_SUB(t->busy, 1, SEQ_CST);
}

static struct chk_thread *me(void)
{
	struct chk_thread *t = &chk_me;
	sigset_t old;

	if (psi_likely(PSI_READ_ONCE(t->listed)))
		return t;
	/* Signals blocked: a handler never sees a record half made. */
	chk_global_lock(&old);
	if (!t->listed) {
		t->tid = gettid();
		t->sec = t->inl;
		t->cap = PSI_CHK_SECTIONS;
		if (!chk_key_ok)
			chk_key_ok = !pthread_key_create(&chk_key, chk_thread_exit);
		cds_list_add(&t->link, &chk_threads);
		PSI_WRITE_ONCE(t->listed, true);
		chk_watchdog_start();
		if (chk_key_ok)
			(void)pthread_setspecific(chk_key, t);
	}
	chk_global_unlock(&old);
	return t;
}

/* The call @t now waits in goes to *@saved, and @s, @call, @mask replace it. */
static void chk_wait_begin(struct chk_thread *t, struct ps_store *s, const char *call, int mask,
		struct chk_wait *saved)
{
	saved->s = PSI_READ_ONCE(t->wait.s);
	saved->call = PSI_READ_ONCE(t->wait.call);
	saved->mask = PSI_READ_ONCE(t->wait.mask);
	saved->since = PSI_READ_ONCE(t->wait.since);
	chk_write_begin(t);
	PSI_WRITE_ONCE(t->wait.call, call);
	PSI_WRITE_ONCE(t->wait.mask, mask);
	PSI_WRITE_ONCE(t->wait.since, now_ns());
	PSI_WRITE_ONCE(t->wait.s, s);
	chk_write_end(t);
}

/* Under chk_write_begin(): back to the wait the call interrupted (a handler's), or none. */
static void chk_wait_put(struct chk_thread *t, const struct chk_wait *saved)
{
	PSI_WRITE_ONCE(t->wait.s, saved->s);
	PSI_WRITE_ONCE(t->wait.call, saved->call);
	PSI_WRITE_ONCE(t->wait.mask, saved->mask);
	PSI_WRITE_ONCE(t->wait.since, saved->since);
}

static void chk_wait_end(struct chk_thread *t, const struct chk_wait *saved)
{
	chk_write_begin(t);
	chk_wait_put(t, saved);
	chk_write_end(t);
}

/*
 * Room for twice the slots, with every signal blocked (a handler's push
 * must not grow the same array): a mapping, since malloc() is no more
 * ours to call here than in a signal handler.  The old slots stay mapped
 * until the thread exits: a reader may still be in them.  False when no
 * memory is left.
 */
static bool chk_grow(struct chk_thread *t)
{
	sigset_t all, old;
	bool ok = true;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (PSI_READ_ONCE(t->n) == PSI_READ_ONCE(t->cap)) {
		unsigned cap = 2 * t->cap;
		size_t size = sizeof(struct chk_map) + cap * sizeof(struct chk_section);
		struct chk_map *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED) {
			ok = false;
		} else {
			unsigned i;

			m->prev = t->maps;
			m->size = size;
			for (i = 0; i < t->n; i++) {
				PSI_WRITE_ONCE(m->sec[i].count, t->sec[i].count);
				PSI_WRITE_ONCE(m->sec[i].s, t->sec[i].s);
				PSI_WRITE_ONCE(m->sec[i].kind, t->sec[i].kind);
				PSI_WRITE_ONCE(m->sec[i].call, t->sec[i].call);
				PSI_WRITE_ONCE(m->sec[i].exit_ok, t->sec[i].exit_ok);
			}
			chk_write_begin(t);
			PSI_WRITE_ONCE(t->sec, m->sec);
			PSI_WRITE_ONCE(t->cap, cap);
			chk_write_end(t);
			t->maps = m;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

/*
 * A section of @s of @kind is open.  A signal handler may run between any
 * two steps, and leaves the slots as it found them: a slot is claimed by
 * its count first (a handler that finds it counted either matches it and
 * counts itself in, or passes it by), its other fields follow.
 */
static void chk_push(struct chk_thread *t, struct ps_store *s, const char *call, int kind,
		bool exit_ok, const struct chk_wait *saved)
{
	struct chk_section *sec;
	unsigned i, n, free_slot;

	chk_write_begin(t);
	for (;;) {
		sec = PSI_READ_ONCE(t->sec);
		n = PSI_READ_ONCE(t->n);
		free_slot = n;
		for (i = 0; i < n; i++) {
			unsigned c = PSI_READ_ONCE(sec[i].count);

			if (c && PSI_READ_ONCE(sec[i].s) == s &&
					PSI_READ_ONCE(sec[i].kind) == kind) {
				PSI_WRITE_ONCE(sec[i].count, c + 1);
				goto done;
			}
			if (!c && free_slot == n)
				free_slot = i;
		}
		if (free_slot < n || n < PSI_READ_ONCE(t->cap))
			break;
		/*
		 * A handler that interrupted this thread's own update (@busy
		 * above one) must not move the slots: the update writes through
		 * the array it loaded.  It counts its section unnamed instead.
		 */
		if (PSI_READ_ONCE(t->busy) > 1 || !chk_grow(t)) {
			PSI_WRITE_ONCE(t->lost, PSI_READ_ONCE(t->lost) + 1);
			goto done;
		}
	}
	i = free_slot;
	if (i == n)
		PSI_WRITE_ONCE(t->n, n + 1);
	PSI_WRITE_ONCE(sec[i].count, 1);
	PSI_WRITE_ONCE(sec[i].s, s);
	PSI_WRITE_ONCE(sec[i].kind, kind);
	PSI_WRITE_ONCE(sec[i].call, call);
	PSI_WRITE_ONCE(sec[i].exit_ok, exit_ok);
done:
	chk_wait_put(t, saved);
	chk_write_end(t);
	PSI_FETCH_ADD(chk_of(s)->sections, 1, RELAXED);
}

/* Close one section of @s of @kind of this thread; false when it holds none. */
static bool chk_pop(struct chk_thread *t, struct ps_store *s, int kind)
{
	struct chk_section *sec;
	unsigned i, n;
	bool found = false;

	chk_write_begin(t);
	sec = PSI_READ_ONCE(t->sec);
	n = PSI_READ_ONCE(t->n);
	for (i = 0; i < n && !found; i++) {
		unsigned c = PSI_READ_ONCE(sec[i].count);

		if (c && PSI_READ_ONCE(sec[i].s) == s &&
				PSI_READ_ONCE(sec[i].kind) == kind) {
			PSI_WRITE_ONCE(sec[i].count, c - 1);
			found = true;
		}
	}
	if (!found && PSI_READ_ONCE(t->lost)) {
		/* one no slot names, we may assume */
		PSI_WRITE_ONCE(t->lost, PSI_READ_ONCE(t->lost) - 1);
		found = true;
	}
	chk_write_end(t);
	if (found)
		PSI_FETCH_SUB(chk_of(s)->sections, 1, RELAXED);
	return found;
}

/* This thread holds a section or walk of @s (or one no slot names). */
static bool chk_holds(struct chk_thread *t, const struct ps_store *s)
{
	struct chk_section *sec = PSI_READ_ONCE(t->sec);
	unsigned i, n = PSI_READ_ONCE(t->n);

	for (i = 0; i < n; i++)
		if (PSI_READ_ONCE(sec[i].count) && PSI_READ_ONCE(sec[i].s) == s)
			return true;
	return PSI_READ_ONCE(t->lost) != 0;
}

/* The slots @sec, an array of @t's (@inl or a mapping of chk_grow()), has room for. */
static unsigned chk_room(struct chk_thread *t, struct chk_section *sec)
{
	struct chk_map *m;

	if (sec == t->inl)
		return PSI_CHK_SECTIONS;
	m = psi_container_of(sec, struct chk_map, sec[0]);
	return (unsigned)((m->size - sizeof(*m)) / sizeof(struct chk_section));
}

/*
 * What another thread's record says, read as a seqlock reader does: into
 * *@w and @out (room for @max slots, those with a count; *@nout of them),
 * false when it stays busy (a handler that stopped inside an update): the
 * caller then goes without it.  Under chk_lock, so @t stays listed and its
 * mappings stay mapped.
 */
static bool chk_read_thread(struct chk_thread *t, struct chk_wait *w, struct chk_section *out,
		unsigned max, unsigned *nout)
{
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		unsigned long v;
		struct chk_section *sec;
		unsigned i, n, k = 0;

		if (PSI_LOAD_SEQ_CST(t->busy)) {
			sched_yield();
			continue;
		}
		v = PSI_LOAD_SEQ_CST(t->ver);
		w->s = PSI_READ_ONCE(t->wait.s);
		w->call = PSI_READ_ONCE(t->wait.call);
		w->mask = PSI_READ_ONCE(t->wait.mask);
		w->since = PSI_READ_ONCE(t->wait.since);
		sec = PSI_READ_ONCE(t->sec);
		n = PSI_READ_ONCE(t->n);
		/* The room of the array loaded, not @cap, which a grow may have changed since. */
		if (n > chk_room(t, sec))
			continue; /* torn: the check below fails too */
		for (i = 0; i < n && k < max; i++) {
			out[k].count = PSI_READ_ONCE(sec[i].count);
			if (!out[k].count)
				continue;
			out[k].s = PSI_READ_ONCE(sec[i].s);
			out[k].kind = PSI_READ_ONCE(sec[i].kind);
			out[k].call = PSI_READ_ONCE(sec[i].call);
			out[k].exit_ok = PSI_READ_ONCE(sec[i].exit_ok);
			k++;
		}
		/* Orders the loads above before the re-reads (pairs with chk_write_begin()). */
		PSI_FENCE(ACQUIRE);
		if (!PSI_LOAD_SEQ_CST(t->busy) &&
				PSI_LOAD_SEQ_CST(t->ver) == v) {
			*nout = k;
			return true;
		}
	}
	return false;
}

/* Another thread holding a section of @s (its id, 0: none), and the call that opened it. */
static pid_t chk_other_holder(const struct ps_store *s, const char **call)
{
	struct chk_section sec[PSI_CHK_SECTIONS];
	struct chk_thread *t;
	struct chk_wait w;
	pid_t tid = 0;
	unsigned i, n;
	sigset_t old;

	chk_global_lock(&old);
	cds_list_for_each_entry(t, &chk_threads, link) {
		if (t == &chk_me || !chk_read_thread(t, &w, sec, PSI_CHK_SECTIONS, &n))
			continue;
		for (i = 0; i < n && !tid; i++) {
			if (sec[i].s == s) {
				tid = t->tid;
				*call = sec[i].call;
			}
		}
		if (tid)
			break;
	}
	chk_global_unlock(&old);
	return tid;
}

static void chk_unmap_all(struct chk_thread *t)
{
	struct chk_map *m, *prev;

	for (m = t->maps; m; m = prev) {
		prev = m->prev;
		munmap(m, m->size);
	}
	t->maps = NULL;
	t->sec = t->inl;
	t->cap = PSI_CHK_SECTIONS;
}

/* Thread exit: lock-based sections would stay held for good; the others polstore closes. */
static void chk_thread_exit(void *arg)
{
	struct chk_thread *t = arg;
	unsigned i;
	sigset_t old;

	for (i = 0; i < t->n; i++) {
		struct chk_section *c = &t->sec[i];

		if (!c->count)
			continue;
		if (!c->exit_ok)
			chk_die("thread exit", "thread %d exits inside a read-side section of %s "
					"store %p (opened by %s): its lock stays held for good",
					(int)t->tid, ps_sync_name(c->s->sync), (void *)c->s, c->call);
		PSI_FETCH_SUB(chk_of(c->s)->sections, c->count, RELAXED);
	}
	chk_global_lock(&old);
	cds_list_del(&t->link);
	PSI_WRITE_ONCE(t->listed, false);
	PSI_WRITE_ONCE(t->n, 0);
	chk_unmap_all(t);
	chk_global_unlock(&old);
}

/*
 * fork(): only this thread lives on in the child.  The others' sections
 * protect nothing there (those of a lock stay held: docs/fork.md), and
 * no watchdog runs until the next thread record.
 */
static void chk_fork_prepare(void)
{
	/* Signals stay as they are: a fork that hangs in a later handler stays killable. */
	pthread_mutex_lock(&chk_lock);
}

static void chk_fork_parent(void)
{
	pthread_mutex_unlock(&chk_lock);
}

static void chk_fork_child(void)
{
	struct chk_thread *t, *next;
	unsigned i;

	cds_list_for_each_entry_safe(t, next, &chk_threads, link) {
		if (t == &chk_me)
			continue;
		for (i = 0; i < t->n; i++)
			if (t->sec[i].count)
				PSI_FETCH_SUB(chk_of(t->sec[i].s)->sections, t->sec[i].count,
						RELAXED);
		cds_list_del(&t->link);
	}
	if (chk_me.listed)
		chk_me.tid = gettid();
	chk_watchdog_started = false;
	pthread_mutex_unlock(&chk_lock);
}

__attribute__((constructor)) static void chk_install_fork_handlers(void)
{
	(void)pthread_atfork(chk_fork_prepare, chk_fork_parent, chk_fork_child);
}

/* ---- the deadlock watchdog ---- */

struct chk_snap {
	pid_t tid;
	struct ps_store *wait_s;
	const char *wait_call;
	int wait_mask;
	uint64_t wait_since;
	unsigned n;
	struct chk_section *sec; /* in chk_snap_secs */
};

static struct chk_snap chk_snaps[PSI_CHK_THREADS_MAX];
/* The slots one scan copies, of every thread (beyond: a thread's others are not looked at). */
static struct chk_section chk_snap_secs[PSI_CHK_SNAP_SECTIONS];

/* Does @h hold what a wait with @mask on @s needs? */
static bool chk_blocks(const struct chk_snap *h, struct ps_store *s, int mask, const char **call)
{
	unsigned i;

	for (i = 0; i < h->n; i++) {
		const struct chk_section *c = &h->sec[i];

		if (((mask & CHK_EXCL) && c->s == s && (c->kind & (CHK_EXCL | CHK_SHARED))) ||
				((mask & CHK_GP_MEMB) && (c->kind & CHK_GP_MEMB)) ||
				((mask & CHK_GP_QSBR) && (c->kind & CHK_GP_QSBR))) {
			*call = c->call;
			return true;
		}
	}
	return false;
}

/*
 * A cycle of waits from snapshot @w back to @start (depth-first, @path of
 * @depth indices so far).  True when found, @path holding it.
 */
static bool chk_cycle(int n, int start, int w, uint64_t old, int *path, int depth, int *len)
{
	int h;

	if (depth >= 16)
		return false;
	path[depth] = w;
	for (h = 0; h < n; h++) {
		const char *call;

		if (h == w || (!chk_snaps[h].wait_s && h != start))
			continue;
		if (!chk_blocks(&chk_snaps[h], chk_snaps[w].wait_s, chk_snaps[w].wait_mask, &call))
			continue;
		if (h == start) {
			*len = depth + 1;
			return true;
		}
		if (chk_snaps[h].wait_since > old)
			continue; /* a wait too young to count */
		if (chk_cycle(n, start, h, old, path, depth + 1, len))
			return true;
	}
	return false;
}

__attribute__((noreturn)) static void chk_report_cycle(int *path, int len, uint64_t now)
{
	char msg[2048];
	size_t off = 0;
	int i;

	for (i = 0; i < len; i++) {
		const struct chk_snap *w = &chk_snaps[path[i]], *h = &chk_snaps[path[(i + 1) % len]];
		const char *call = "?";

		chk_blocks(h, w->wait_s, w->wait_mask, &call);
		off += (size_t)snprintf(msg + off, sizeof(msg) - off,
				"%sthread %d waits in %s on %s store %p for %.1f s, for thread %d, "
				"which holds it (inside %s)", i ? "; " : "", (int)w->tid,
				w->wait_call, ps_sync_name(w->wait_s->sync), (void *)w->wait_s,
				(double)(now - w->wait_since) / 1e9, (int)h->tid, call);
		if (off >= sizeof(msg))
			break;
	}
	chk_die("deadlock", "%s", msg);
}

static void *chk_watchdog(void *unused)
{
	int suspect = -1; /* a thread found in a cycle by the previous scan */
	uint64_t suspect_since = 0;

	(void)unused;
	for (;;) {
		struct timespec ts = { 0, PSI_CHK_SCAN_MS * 1000000L };
		struct chk_thread *t;
		int n = 0, i, path[16], len;
		unsigned used = 0;
		uint64_t now, old;
		bool found = false;

		nanosleep(&ts, NULL);
		/* Signals are blocked on this thread (chk_watchdog_start()). */
		pthread_mutex_lock(&chk_lock);
		cds_list_for_each_entry(t, &chk_threads, link) {
			struct chk_snap *sn = &chk_snaps[n];
			struct chk_wait w;

			if (n == PSI_CHK_THREADS_MAX)
				break;
			/* Never waits for the thread: a record it cannot read it goes without. */
			sn->sec = chk_snap_secs + used;
			if (!chk_read_thread(t, &w, sn->sec, PSI_CHK_SNAP_SECTIONS - used, &sn->n))
				continue;
			used += sn->n;
			sn->tid = t->tid;
			sn->wait_s = w.s;
			sn->wait_call = w.call;
			sn->wait_mask = w.mask;
			sn->wait_since = w.since;
			n++;
		}
		pthread_mutex_unlock(&chk_lock);
		now = now_ns();
		old = now - PSI_CHK_STUCK_MS * 1000000ULL;
		for (i = 0; i < n && !found; i++) {
			if (!chk_snaps[i].wait_s || chk_snaps[i].wait_since > old)
				continue;
			found = chk_cycle(n, i, i, old, path, 0, &len);
		}
		if (!found) {
			suspect = -1;
			continue;
		}
		/* Seen by two scans, the same waits: not a snapshot taken mid-update. */
		if (chk_snaps[path[0]].tid == suspect &&
				chk_snaps[path[0]].wait_since == suspect_since)
			chk_report_cycle(path, len, now);
		suspect = chk_snaps[path[0]].tid;
		suspect_since = chk_snaps[path[0]].wait_since;
	}
	return NULL;
}

/* Under chk_lock. */
static void chk_watchdog_start(void)
{
	sigset_t all, old;
	pthread_t t;

	if (chk_watchdog_started)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	chk_watchdog_started = !pthread_create(&t, NULL, chk_watchdog, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (chk_watchdog_started)
		pthread_detach(t);
}

/* ---- the wrappers ---- */

/* What a call waits for, per variant: a lock exclusively, a grace period. */
static int chk_lock_wait(const struct ps_store *s)
{
	return psi_variant_has(s, PSI_V_LOCK) ? CHK_EXCL : 0;
}

static int chk_gp_wait(const struct ps_store *s)
{
	const struct psi_flavour *f = psi_variant_of(s)->flavour;

	if (!f)
		return 0;
	return f->id == PSI_FLAVOUR_QSBR ? CHK_GP_QSBR : CHK_GP_MEMB;
}

/*
 * What a set may wait for besides the writer lock: a grace period, only
 * where the variant says one could come now (RCU: outside every section,
 * with the reclaim thread far behind).  A SEQLOCK set waits for one only
 * without memory for a batch header or a reclaim thread: not seen here.
 */
static int chk_set_gp_wait(struct ps_store *s)
{
	const struct ps_sync_ops *real = chk_of(s)->real;

	return real->set_may_wait && real->set_may_wait(s) ? chk_gp_wait(s) : 0;
}

/* What a read-side section (@walk: a foreach walk) of @s holds. */
static int chk_section_kind(const struct ps_store *s, bool walk)
{
	if (psi_variant_has(s, PSI_V_SECTION_LOCK))
		return psi_variant_has(s, PSI_V_SECTION_SHARED) ? CHK_SHARED : CHK_EXCL;
	if (walk && psi_variant_has(s, PSI_V_WALK_EXCL))
		return CHK_EXCL;
	return chk_gp_wait(s);
}

/* Sections that hold a lock leave it held when their thread exits. */
static bool chk_exit_ok(const struct ps_store *s)
{
	return !psi_variant_has(s, PSI_V_SECTION_LOCK);
}

/* Lookups of a variant whose sections hold its lock exclusively take it; others never wait long. */
static int chk_read_wait(const struct ps_store *s)
{
	return chk_section_kind(s, false) == CHK_EXCL ? CHK_EXCL : 0;
}

/* A walk waits for the lock when it takes it exclusively. */
static int chk_walk_wait(const struct ps_store *s)
{
	return psi_variant_has(s, PSI_V_WALK_EXCL) ? CHK_EXCL : 0;
}

#define CHK_CALL(s, call, mask, expr)                                                              \
	({                                                                                         \
		struct chk_thread *t_ = me();                                                      \
		struct chk_wait saved_;                                                            \
		__typeof__(expr) r_;                                                               \
		chk_wait_begin(t_, (s), (call), (mask), &saved_);                                  \
		r_ = (expr);                                                                       \
		chk_wait_end(t_, &saved_);                                                         \
		r_;                                                                                \
	})

static struct ps_policy *chk_lookup(struct ps_store *s, uint64_t idx)
{
	return CHK_CALL(s, "ps_store_lookup()", chk_read_wait(s), chk_of(s)->real->lookup(s, idx));
}

static int chk_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	return CHK_CALL(s, "ps_store_lookup_copy()", chk_read_wait(s),
			chk_of(s)->real->lookup_copy(s, idx, view));
}

static int chk_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return CHK_CALL(s, "ps_store_lookup_node()", chk_read_wait(s),
			chk_of(s)->real->lookup_node(s, idx, local_node));
}

static int chk_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	return CHK_CALL(s, "ps_store_next()", chk_read_wait(s),
			chk_of(s)->real->next(s, idx, start, end, pol));
}

static void chk_read_lock(struct ps_store *s)
{
	struct chk_thread *t = me();
	struct chk_wait saved;

	chk_wait_begin(t, s, "ps_store_read_lock()", chk_read_wait(s), &saved);
	chk_of(s)->real->read_lock(s);
	chk_push(t, s, "ps_store_read_lock()", chk_section_kind(s, false), chk_exit_ok(s), &saved);
}

static void chk_read_unlock(struct ps_store *s)
{
	const char *call = NULL;
	pid_t other;

	if (psi_likely(chk_pop(me(), s, chk_section_kind(s, false)))) {
		chk_of(s)->real->read_unlock(s);
		return;
	}
	other = chk_other_holder(s, &call);
	if (other)
		chk_die("ps_store_read_unlock()", "%s store %p: this thread holds no read-side "
				"section of it; thread %d does (%s): a section is closed by the "
				"thread that opened it", ps_sync_name(s->sync), (void *)s, (int)other,
				call);
	chk_die("ps_store_read_unlock()", "%s store %p: no read-side section of it is open "
			"(never locked, or unlocked twice)", ps_sync_name(s->sync), (void *)s);
}

/* Borrowed reads: inside a section of @s on this thread (RCU_QSBR: or online). */
static void chk_borrow_context(struct ps_store *s, const char *call)
{
	const struct psi_flavour *f = psi_variant_of(s)->flavour;

	if (f && f->reads_free())
		return;
	if (!chk_holds(me(), s))
		chk_die(call, "%s store %p: called outside every read-side section of it on "
				"this thread: what it returns is not protected",
				ps_sync_name(s->sync), (void *)s);
}

static const struct ps_policy *chk_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	chk_borrow_context(s, "ps_store_lookup_borrow()");
	return chk_of(s)->real->lookup_borrow(s, idx);
}

static int chk_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	chk_borrow_context(s, "ps_store_next_borrow()");
	return chk_of(s)->real->next_borrow(s, idx, start, end, pol);
}

/* A walk: waiting until its first callback, a section from then on. */
struct chk_walk {
	ps_foreach_fn fn;
	void *arg;
	struct chk_thread *t;
	struct ps_store *s;
	const char *call;
	struct chk_wait saved; /* what the thread waited in before the walk */
	bool in;
};

static int chk_walk_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct chk_walk *w = arg;

	if (!w->in) {
		chk_push(w->t, w->s, w->call, chk_section_kind(w->s, true) | CHK_WALK,
				chk_exit_ok(w->s), &w->saved);
		w->in = true;
	}
	return w->fn(start, end, pol, w->arg);
}

static int chk_walk_end(struct chk_walk *w, int ret)
{
	if (w->in)
		chk_pop(w->t, w->s, chk_section_kind(w->s, true) | CHK_WALK);
	else
		chk_wait_end(w->t, &w->saved);
	return ret;
}

static int chk_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	struct chk_walk w = { fn, arg, me(), s, "ps_store_foreach()", { 0 }, false };

	chk_wait_begin(w.t, s, w.call, chk_walk_wait(s), &w.saved);
	return chk_walk_end(&w, chk_of(s)->real->foreach(s, chk_walk_cb, &w));
}

static int chk_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	struct chk_walk w = { fn, arg, me(), s, "ps_store_foreach_range()", { 0 }, false };

	chk_wait_begin(w.t, s, w.call, chk_walk_wait(s), &w.saved);
	return chk_walk_end(&w, chk_of(s)->real->foreach_range(s, start, end, chk_walk_cb, &w));
}

static int chk_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	return CHK_CALL(s, "ps_store_set()", chk_lock_wait(s) | chk_set_gp_wait(s),
			chk_of(s)->real->set(s, start, end, pol));
}

static int chk_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return CHK_CALL(s, "ps_store_set_many()", chk_lock_wait(s) | chk_set_gp_wait(s),
			chk_of(s)->real->set_many(s, ops, n));
}

static int chk_check(struct ps_store *s, const char **why)
{
	return CHK_CALL(s, "ps_store_check()", chk_lock_wait(s), chk_of(s)->real->check(s, why));
}

static void chk_synchronize(struct ps_store *s)
{
	struct chk_thread *t = me();
	struct chk_wait saved;

	chk_wait_begin(t, s, "ps_store_synchronize()", chk_lock_wait(s) | chk_gp_wait(s), &saved);
	chk_of(s)->real->synchronize(s);
	chk_wait_end(t, &saved);
}

/* ---- destroyed stores ---- */

void psi_check_dead(const struct ps_store *s, const char *call)
{
	chk_die(call, "store %p was destroyed (ps_store_destroy() or "
			"ps_store_destroy_deferred())", (const void *)s);
}

/*
 * What a destroyed store's calls do: each aborts naming the call, so its
 * arguments go unused.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
static struct ps_policy *chk_dead_lookup(struct ps_store *s, uint64_t a)
{
	psi_check_dead(s, "ps_store_lookup()");
}

static void chk_dead_read_lock(struct ps_store *s)
{
	psi_check_dead(s, "ps_store_read_lock()");
}

static void chk_dead_read_unlock(struct ps_store *s)
{
	psi_check_dead(s, "ps_store_read_unlock()");
}

static const struct ps_policy *chk_dead_lookup_borrow(struct ps_store *s, uint64_t a)
{
	psi_check_dead(s, "ps_store_lookup_borrow()");
}

static int chk_dead_lookup_copy(struct ps_store *s, uint64_t a, struct ps_policy_view *v)
{
	psi_check_dead(s, "ps_store_lookup_copy()");
}

static int chk_dead_lookup_node(struct ps_store *s, uint64_t a, int n)
{
	psi_check_dead(s, "ps_store_lookup_node()");
}

static int chk_dead_set(struct ps_store *s, uint64_t a, uint64_t b, struct ps_policy *p)
{
	psi_check_dead(s, "ps_store_set()");
}

static void chk_dead_synchronize(struct ps_store *s)
{
	psi_check_dead(s, "ps_store_synchronize()");
}

static int chk_dead_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	psi_check_dead(s, "ps_store_foreach()");
}

static int chk_dead_check(struct ps_store *s, const char **why)
{
	psi_check_dead(s, "ps_store_check()");
}

static size_t chk_dead_held(struct ps_store *s)
{
	psi_check_dead(s, "ps_store_memory()");
}

static struct psi_lstat *chk_dead_lock_stat(struct ps_store *s)
{
	psi_check_dead(s, "ps_store_lock_stat_read()");
}

static int chk_dead_foreach_range(
		struct ps_store *s, uint64_t a, uint64_t b, ps_foreach_fn f, void *arg)
{
	psi_check_dead(s, "ps_store_foreach_range()");
}

static int chk_dead_next(
		struct ps_store *s, uint64_t a, uint64_t *b, uint64_t *c, struct ps_policy **p)
{
	psi_check_dead(s, "ps_store_next()");
}

static int chk_dead_next_borrow(struct ps_store *s, uint64_t a, uint64_t *b, uint64_t *c,
		const struct ps_policy **p)
{
	psi_check_dead(s, "ps_store_next_borrow()");
}

static int chk_dead_set_many(struct ps_store *s, const struct ps_set_op *o, size_t n)
{
	psi_check_dead(s, "ps_store_set_many()");
}

static void chk_dead_destroy(struct ps_store *s)
{
	psi_check_dead(s, "ps_store_destroy()");
}

static bool chk_dead_idle(struct ps_store *s)
{
	psi_check_dead(s, "ps_store_destroy_deferred()");
}
#pragma GCC diagnostic pop

static const struct ps_sync_ops chk_dead_ops = {
	.destroy = chk_dead_destroy, .lookup = chk_dead_lookup, .read_lock = chk_dead_read_lock,
	.read_unlock = chk_dead_read_unlock, .lookup_borrow = chk_dead_lookup_borrow,
	.lookup_copy = chk_dead_lookup_copy, .lookup_node = chk_dead_lookup_node,
	.set = chk_dead_set, .synchronize = chk_dead_synchronize, .foreach = chk_dead_foreach,
	.check = chk_dead_check, .held = chk_dead_held, .lock_stat = chk_dead_lock_stat,
	.foreach_range = chk_dead_foreach_range, .next = chk_dead_next,
	.next_borrow = chk_dead_next_borrow, .set_many = chk_dead_set_many,
	.idle = chk_dead_idle,
};

/* Keep @s, destroyed, poisoned: every later call aborts.  The oldest grave is freed. */
static void chk_bury(struct ps_store *s)
{
	struct ps_store *old;
	sigset_t mask;

	s->tag = PSI_STORE_TAG_DEAD;
	s->ops = &chk_dead_ops;
	s->lookup = chk_dead_lookup;
	s->lookup_borrow = chk_dead_lookup_borrow;
	s->read_lock = chk_dead_read_lock;
	s->read_unlock = chk_dead_read_unlock;
	s->lookup_copy = chk_dead_lookup_copy;
	s->lookup_node = chk_dead_lookup_node;
	memset(&s->rd, 0, sizeof(s->rd));
	chk_global_lock(&mask);
	old = chk_graves[chk_graves_next];
	chk_graves[chk_graves_next] = s;
	chk_graves_next = (chk_graves_next + 1) % PSI_CHK_GRAVES;
	chk_global_unlock(&mask);
	psi_free_aligned(old);
}

static void chk_destroy(struct ps_store *s)
{
	struct chk_store *c = chk_of(s);
	long open = PSI_READ_ONCE(c->sections);
	const char *call = NULL;

	if (open) {
		pid_t other = chk_other_holder(s, &call);

		chk_die("ps_store_destroy()", "%s store %p: %ld read-side sections or walks of it "
				"are still open (thread %d: %s); ps_store_destroy_deferred() waits "
				"for them", ps_sync_name(s->sync), (void *)s, open, (int)other,
				call ? call : "?");
	}
	/* The variant frees everything but the store's own block, which is buried. */
	psi_free_keep = s;
	c->real->destroy(s);
	psi_free_keep = NULL;
	psi_free(c);
	chk_bury(s);
}

int psi_check_store(struct ps_store *s)
{
	struct chk_store *c = psi_alloc(sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->real = s->ops;
	c->s = s;
	c->sections = 0;
	c->ops = *s->ops;
	c->ops.destroy = chk_destroy;
	c->ops.lookup = chk_lookup;
	c->ops.read_lock = chk_read_lock;
	c->ops.read_unlock = chk_read_unlock;
	c->ops.lookup_borrow = chk_lookup_borrow;
	c->ops.lookup_copy = chk_lookup_copy;
	c->ops.lookup_node = chk_lookup_node;
	c->ops.set = chk_set;
	if (c->ops.synchronize)
		c->ops.synchronize = chk_synchronize;
	c->ops.foreach = chk_foreach;
	c->ops.check = chk_check;
	c->ops.foreach_range = chk_foreach_range;
	c->ops.next = chk_next;
	c->ops.next_borrow = chk_next_borrow;
	c->ops.set_many = chk_set_many;
	s->ops = &c->ops;
	s->lookup = chk_lookup;
	s->lookup_borrow = chk_lookup_borrow;
	s->read_lock = chk_read_lock;
	s->read_unlock = chk_read_unlock;
	s->lookup_copy = chk_lookup_copy;
	s->lookup_node = chk_lookup_node;
	/* A variant byte no inlined reader knows: every read reaches the wrappers. */
	s->tag |= 0x80;
	(void)me();
	return 0;
}
