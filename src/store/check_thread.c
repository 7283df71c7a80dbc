// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The checking mode's thread records and its deadlock watchdog
 * (check_thread.h; check.c says what the mode checks).
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

#include "check_thread.h"
#include "held.h"
#include "store_tag.h"
#include "variants.h"

#define PSI_CHK_SCAN_MS 100     /* the watchdog's period */
#define PSI_CHK_STUCK_MS 300    /* a wait this old may be part of a deadlock */
#define PSI_CHK_THREADS_MAX 256 /* threads one scan looks at */
#define PSI_CHK_SNAP_SECTIONS 4096 /* slots one scan looks at, of every thread */

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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noreturn, cold, format(printf, 2, 3))) void psi_chk_die(const char *call,
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
void psi_chk_global_lock(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	pthread_mutex_lock(&chk_lock);
}

void psi_chk_global_unlock(const sigset_t *old)
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

struct chk_thread *psi_chk_self(void)
{
	struct chk_thread *t = &chk_me;
	sigset_t old;

	if (psi_likely(PSI_READ_ONCE(t->listed)))
		return t;
	/* Signals blocked: a handler never sees a record half made. */
	psi_chk_global_lock(&old);
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
	psi_chk_global_unlock(&old);
	return t;
}

/* A call of a forked child on a store whose lock a thread of the parent held (chk_fork_mark()). */
static __attribute__((noreturn, cold)) void chk_fork_die(const struct ps_store *s,
		const char *call)
{
	const struct chk_store *c = psi_chk_of(s);

	psi_chk_die(call, "%s store %p: its lock was held at fork() by thread %d (%s %s), "
			"which this child of the fork does not have: the lock stays held for good; "
			"fork outside read-side sections, or use an RCU/SEQLOCK store",
			ps_sync_name(s->sync), (const void *)s, (int)c->fork_tid,
			c->fork_section ? "in a section opened by" : "inside", c->fork_call);
}

/* The call @t now waits in goes to *@saved, and @s, @call, @mask replace it. */
void psi_chk_wait_begin(struct chk_thread *t, struct ps_store *s, const char *call, int mask,
		struct chk_wait *saved)
{
	if (psi_unlikely(PSI_READ_ONCE(psi_chk_of(s)->fork_call) != NULL))
		chk_fork_die(s, call);
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

void psi_chk_wait_end(struct chk_thread *t, const struct chk_wait *saved)
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
void psi_chk_push(struct chk_thread *t, struct ps_store *s, const char *call, int kind,
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

			if (c && PSI_READ_ONCE(sec[i].s) == s && PSI_READ_ONCE(sec[i].kind) == kind) {
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
	PSI_FETCH_ADD(psi_chk_of(s)->sections, 1, RELAXED);
}

/* Close one section of @s of @kind of this thread; false when it holds none. */
bool psi_chk_pop(struct chk_thread *t, struct ps_store *s, int kind)
{
	struct chk_section *sec;
	unsigned i, n;
	bool found = false;

	chk_write_begin(t);
	sec = PSI_READ_ONCE(t->sec);
	n = PSI_READ_ONCE(t->n);
	for (i = 0; i < n && !found; i++) {
		unsigned c = PSI_READ_ONCE(sec[i].count);

		if (c && PSI_READ_ONCE(sec[i].s) == s && PSI_READ_ONCE(sec[i].kind) == kind) {
			PSI_WRITE_ONCE(sec[i].count, c - 1);
			found = true;
		}
	}
	if (!found && PSI_READ_ONCE(t->lost)) {
		PSI_WRITE_ONCE(t->lost, PSI_READ_ONCE(t->lost) - 1); /* one no slot names, we may assume */
		found = true;
	}
	chk_write_end(t);
	if (found)
		PSI_FETCH_SUB(psi_chk_of(s)->sections, 1, RELAXED);
	return found;
}

/* This thread holds a section or walk of @s (or one no slot names). */
bool psi_chk_holds(struct chk_thread *t, const struct ps_store *s)
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
pid_t psi_chk_other_holder(const struct ps_store *s, const char **call)
{
	struct chk_section sec[PSI_CHK_SECTIONS];
	struct chk_thread *t;
	struct chk_wait w;
	pid_t tid = 0;
	unsigned i, n;
	sigset_t old;

	psi_chk_global_lock(&old);
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
	psi_chk_global_unlock(&old);
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
			psi_chk_die("thread exit",
					"thread %d exits inside a read-side section of %s "
					"store %p (opened by %s): its lock stays held for good",
					(int)t->tid, ps_sync_name(c->s->sync), (void *)c->s,
					c->call);
		PSI_FETCH_SUB(psi_chk_of(c->s)->sections, c->count, RELAXED);
	}
	psi_chk_global_lock(&old);
	cds_list_del(&t->link);
	PSI_WRITE_ONCE(t->listed, false);
	PSI_WRITE_ONCE(t->n, 0);
	chk_unmap_all(t);
	psi_chk_global_unlock(&old);
}

/*
 * fork(): only this thread lives on in the child.  The others' sections
 * protect nothing there (those of a lock stay held: docs/fork.md), and
 * no watchdog runs until the next thread record.
 *
 * A SPIN or RWLOCK store that another thread of the parent held a
 * section or walk of, or was inside a call of, has its lock held for good
 * in the child when the lock is taken now (only this thread runs: by that
 * thread, unless this one holds a section of the store itself, when only
 * a section's record counts).  Marked here, the store's next call that
 * takes its lock aborts (chk_fork_die()) instead of waiting for ever.
 */
static void chk_fork_mark(const struct chk_thread *t, struct ps_store *s, const char *call,
		bool section)
{
	struct chk_store *c;

	if (!s || s->tag == PSI_STORE_TAG_DEAD || !psi_variant_has(s, PSI_V_SECTION_LOCK))
		return;
	c = psi_chk_of(s);
	if (c->fork_call)
		return;
	if (psi_chk_holds(&chk_me, s) ? !section : !c->real->idle || c->real->idle(s))
		return;
	c->fork_tid = t->tid;
	c->fork_section = section;
	c->fork_call = call ? call : "a call";
}

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
		for (i = 0; i < t->n; i++) {
			if (!t->sec[i].count)
				continue;
			if (t->sec[i].kind & (CHK_EXCL | CHK_SHARED))
				chk_fork_mark(t, t->sec[i].s, t->sec[i].call, true);
			PSI_FETCH_SUB(psi_chk_of(t->sec[i].s)->sections, t->sec[i].count, RELAXED);
		}
		chk_fork_mark(t, t->wait.s, t->wait.call, false);
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
		const struct chk_snap *w = &chk_snaps[path[i]],
				      *h = &chk_snaps[path[(i + 1) % len]];
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
	psi_chk_die("deadlock", "%s", msg);
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
