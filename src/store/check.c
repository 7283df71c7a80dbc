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
 * Costs: a mutex per thread record taken around each update (the
 * watchdog takes it to read), a clock read per call; nothing on stores
 * created with the mode off.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <urcu/list.h>

#include "check.h"
#include "held.h"
#include "store_internal.h"
#include "variants.h"

#define PSI_CHK_SECTIONS 16     /* sections a thread record names (deeper: not checked) */
#define PSI_CHK_GRAVES 64       /* destroyed stores kept poisoned */
#define PSI_CHK_SCAN_MS 100     /* the watchdog's period */
#define PSI_CHK_STUCK_MS 300    /* a wait this old may be part of a deadlock */
#define PSI_CHK_THREADS_MAX 256 /* threads one scan looks at */

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
};

struct chk_store {
	struct ps_sync_ops ops;          /* what s->ops points at: the wrappers */
	const struct ps_sync_ops *real;  /* the variant's */
	struct ps_store *s;
	long sections;                   /* atomic: sections and walks open, every thread */
};

struct chk_section {
	struct ps_store *s;
	const char *call;
	int kind;
	bool exit_ok; /* polstore closes it if the thread exits inside (rcu.h) */
};

struct chk_thread {
	struct cds_list_head link; /* in @chk_threads, while @listed */
	pthread_mutex_t lock;      /* the fields below; the watchdog reads under it */
	pid_t tid;
	bool listed;
	struct ps_store *wait_s;   /* the call it waits in (NULL: none) */
	const char *wait_call;
	int wait_mask;
	uint64_t wait_since;
	unsigned n;                /* sections open; the first PSI_CHK_SECTIONS in @sec */
	struct chk_section sec[PSI_CHK_SECTIONS];
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

static struct chk_thread *me(void)
{
	struct chk_thread *t = &chk_me;

	if (psi_likely(t->listed))
		return t;
	pthread_mutex_init(&t->lock, NULL);
	t->tid = gettid();
	pthread_mutex_lock(&chk_lock);
	if (!chk_key_ok)
		chk_key_ok = !pthread_key_create(&chk_key, chk_thread_exit);
	cds_list_add(&t->link, &chk_threads);
	t->listed = true;
	chk_watchdog_start();
	pthread_mutex_unlock(&chk_lock);
	if (chk_key_ok)
		(void)pthread_setspecific(chk_key, t);
	return t;
}

static void chk_wait_begin(struct chk_thread *t, struct ps_store *s, const char *call, int mask)
{
	pthread_mutex_lock(&t->lock);
	t->wait_s = s;
	t->wait_call = call;
	t->wait_mask = mask;
	t->wait_since = now_ns();
	pthread_mutex_unlock(&t->lock);
}

static void chk_wait_end(struct chk_thread *t)
{
	pthread_mutex_lock(&t->lock);
	t->wait_s = NULL;
	pthread_mutex_unlock(&t->lock);
}

static void chk_push(struct chk_thread *t, struct ps_store *s, const char *call, int kind,
		bool exit_ok)
{
	pthread_mutex_lock(&t->lock);
	if (t->n < PSI_CHK_SECTIONS)
		t->sec[t->n] = (struct chk_section){ s, call, kind, exit_ok };
	t->n++;
	t->wait_s = NULL;
	pthread_mutex_unlock(&t->lock);
	__atomic_fetch_add(&chk_of(s)->sections, 1, __ATOMIC_RELAXED);
}

/* Close this thread's last section of @s; false when it holds none. */
static bool chk_pop(struct chk_thread *t, struct ps_store *s)
{
	unsigned i, n;
	bool found = false;

	pthread_mutex_lock(&t->lock);
	n = t->n < PSI_CHK_SECTIONS ? t->n : PSI_CHK_SECTIONS;
	for (i = n; i-- > 0;) {
		if (t->sec[i].s == s) {
			memmove(&t->sec[i], &t->sec[i + 1], (n - i - 1) * sizeof(t->sec[0]));
			t->n--;
			found = true;
			break;
		}
	}
	if (!found && t->n > PSI_CHK_SECTIONS) {
		t->n--; /* one of the unnamed deeper sections, we may assume */
		found = true;
	}
	pthread_mutex_unlock(&t->lock);
	if (found)
		__atomic_fetch_sub(&chk_of(s)->sections, 1, __ATOMIC_RELAXED);
	return found;
}

static bool chk_holds(struct chk_thread *t, const struct ps_store *s)
{
	unsigned i, n;
	bool found = false;

	pthread_mutex_lock(&t->lock);
	n = t->n < PSI_CHK_SECTIONS ? t->n : PSI_CHK_SECTIONS;
	for (i = 0; i < n && !found; i++)
		found = t->sec[i].s == s;
	found = found || t->n > PSI_CHK_SECTIONS;
	pthread_mutex_unlock(&t->lock);
	return found;
}

/* Another thread holding a section of @s (its id, 0: none), and the call that opened it. */
static pid_t chk_other_holder(const struct ps_store *s, const char **call)
{
	struct chk_thread *t;
	pid_t tid = 0;
	unsigned i;

	pthread_mutex_lock(&chk_lock);
	cds_list_for_each_entry(t, &chk_threads, link) {
		if (t == &chk_me)
			continue;
		pthread_mutex_lock(&t->lock);
		for (i = 0; i < t->n && i < PSI_CHK_SECTIONS && !tid; i++) {
			if (t->sec[i].s == s) {
				tid = t->tid;
				*call = t->sec[i].call;
			}
		}
		pthread_mutex_unlock(&t->lock);
		if (tid)
			break;
	}
	pthread_mutex_unlock(&chk_lock);
	return tid;
}

/* Thread exit: lock-based sections would stay held for good; the others polstore closes. */
static void chk_thread_exit(void *arg)
{
	struct chk_thread *t = arg;
	unsigned i;

	for (i = 0; i < t->n && i < PSI_CHK_SECTIONS; i++) {
		struct chk_section *c = &t->sec[i];

		if (!c->exit_ok)
			chk_die("thread exit", "thread %d exits inside a read-side section of %s "
					"store %p (opened by %s): its lock stays held for good",
					(int)t->tid, ps_sync_name(c->s->sync), (void *)c->s, c->call);
		__atomic_fetch_sub(&chk_of(c->s)->sections, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&chk_lock);
	cds_list_del(&t->link);
	t->listed = false;
	pthread_mutex_unlock(&chk_lock);
	pthread_mutex_destroy(&t->lock);
}

/*
 * fork(): only this thread lives on in the child.  The others' sections
 * protect nothing there (those of a lock stay held: docs/fork.md), and
 * no watchdog runs until the next thread record.
 */
static void chk_fork_prepare(void)
{
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
		for (i = 0; i < t->n && i < PSI_CHK_SECTIONS; i++)
			__atomic_fetch_sub(&chk_of(t->sec[i].s)->sections, 1, __ATOMIC_RELAXED);
		cds_list_del(&t->link);
	}
	if (chk_me.listed) {
		pthread_mutex_init(&chk_me.lock, NULL);
		chk_me.tid = gettid();
	}
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
	struct chk_section sec[PSI_CHK_SECTIONS];
};

static struct chk_snap chk_snaps[PSI_CHK_THREADS_MAX];

/* Does @h hold what a wait with @mask on @s needs? */
static bool chk_blocks(const struct chk_snap *h, struct ps_store *s, int mask, const char **call)
{
	unsigned i;

	for (i = 0; i < h->n && i < PSI_CHK_SECTIONS; i++) {
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
		uint64_t now, old;
		bool found = false;

		nanosleep(&ts, NULL);
		pthread_mutex_lock(&chk_lock);
		cds_list_for_each_entry(t, &chk_threads, link) {
			struct chk_snap *sn = &chk_snaps[n];

			if (n == PSI_CHK_THREADS_MAX)
				break;
			pthread_mutex_lock(&t->lock);
			sn->tid = t->tid;
			sn->wait_s = t->wait_s;
			sn->wait_call = t->wait_call;
			sn->wait_mask = t->wait_mask;
			sn->wait_since = t->wait_since;
			sn->n = t->n;
			memcpy(sn->sec, t->sec, sizeof(sn->sec));
			pthread_mutex_unlock(&t->lock);
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
		__typeof__(expr) r_;                                                               \
		chk_wait_begin(t_, (s), (call), (mask));                                           \
		r_ = (expr);                                                                       \
		chk_wait_end(t_);                                                                  \
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

	chk_wait_begin(t, s, "ps_store_read_lock()", chk_read_wait(s));
	chk_of(s)->real->read_lock(s);
	chk_push(t, s, "ps_store_read_lock()", chk_section_kind(s, false), chk_exit_ok(s));
}

static void chk_read_unlock(struct ps_store *s)
{
	const char *call = NULL;
	pid_t other;

	if (psi_likely(chk_pop(me(), s))) {
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
	bool in;
};

static int chk_walk_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct chk_walk *w = arg;

	if (!w->in) {
		chk_push(w->t, w->s, w->call, chk_section_kind(w->s, true), chk_exit_ok(w->s));
		w->in = true;
	}
	return w->fn(start, end, pol, w->arg);
}

static int chk_walk_end(struct chk_walk *w, int ret)
{
	if (w->in)
		chk_pop(w->t, w->s);
	else
		chk_wait_end(w->t);
	return ret;
}

static int chk_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	struct chk_walk w = { fn, arg, me(), s, "ps_store_foreach()", false };

	chk_wait_begin(w.t, s, w.call, chk_walk_wait(s));
	return chk_walk_end(&w, chk_of(s)->real->foreach(s, chk_walk_cb, &w));
}

static int chk_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	struct chk_walk w = { fn, arg, me(), s, "ps_store_foreach_range()", false };

	chk_wait_begin(w.t, s, w.call, chk_walk_wait(s));
	return chk_walk_end(&w, chk_of(s)->real->foreach_range(s, start, end, chk_walk_cb, &w));
}

static int chk_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	return CHK_CALL(s, "ps_store_set()", chk_lock_wait(s) | chk_gp_wait(s),
			chk_of(s)->real->set(s, start, end, pol));
}

static int chk_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return CHK_CALL(s, "ps_store_set_many()", chk_lock_wait(s) | chk_gp_wait(s),
			chk_of(s)->real->set_many(s, ops, n));
}

static int chk_check(struct ps_store *s, const char **why)
{
	return CHK_CALL(s, "ps_store_check()", chk_lock_wait(s), chk_of(s)->real->check(s, why));
}

static void chk_synchronize(struct ps_store *s)
{
	struct chk_thread *t = me();

	chk_wait_begin(t, s, "ps_store_synchronize()", chk_lock_wait(s) | chk_gp_wait(s));
	chk_of(s)->real->synchronize(s);
	chk_wait_end(t);
}

/* ---- destroyed stores ---- */

void psi_check_dead(const struct ps_store *s, const char *call)
{
	chk_die(call, "store %p was destroyed (ps_store_destroy() or "
			"ps_store_destroy_deferred())", (const void *)s);
}

#define CHK_DEAD(name, call, ret, ...)                                                             \
	static ret chk_dead_##name(struct ps_store *s, ##__VA_ARGS__)                              \
	{                                                                                          \
		psi_check_dead(s, call);                                                           \
	}

/* Every one aborts: their arguments go unused. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
CHK_DEAD(lookup, "ps_store_lookup()", struct ps_policy *, uint64_t a)
CHK_DEAD(read_lock, "ps_store_read_lock()", void)
CHK_DEAD(read_unlock, "ps_store_read_unlock()", void)
CHK_DEAD(lookup_borrow, "ps_store_lookup_borrow()", const struct ps_policy *, uint64_t a)
CHK_DEAD(lookup_copy, "ps_store_lookup_copy()", int, uint64_t a, struct ps_policy_view *v)
CHK_DEAD(lookup_node, "ps_store_lookup_node()", int, uint64_t a, int n)
CHK_DEAD(set, "ps_store_set()", int, uint64_t a, uint64_t b, struct ps_policy *p)
CHK_DEAD(synchronize, "ps_store_synchronize()", void)
CHK_DEAD(foreach, "ps_store_foreach()", int, ps_foreach_fn fn, void *arg)
CHK_DEAD(check, "ps_store_check()", int, const char **why)
CHK_DEAD(held, "ps_store_memory()", size_t)
CHK_DEAD(lock_stat, "ps_store_lock_stat_read()", struct psi_lstat *)
CHK_DEAD(foreach_range, "ps_store_foreach_range()", int, uint64_t a, uint64_t b, ps_foreach_fn f,
		void *arg)
CHK_DEAD(next, "ps_store_next()", int, uint64_t a, uint64_t *b, uint64_t *c, struct ps_policy **p)
CHK_DEAD(next_borrow, "ps_store_next_borrow()", int, uint64_t a, uint64_t *b, uint64_t *c,
		const struct ps_policy **p)
CHK_DEAD(set_many, "ps_store_set_many()", int, const struct ps_set_op *o, size_t n)
CHK_DEAD(destroy, "ps_store_destroy()", void)
CHK_DEAD(idle, "ps_store_destroy_deferred()", bool)
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

	s->tag = PSI_STORE_TAG_DEAD;
	s->ops = &chk_dead_ops;
	s->lookup = chk_dead_lookup;
	s->lookup_borrow = chk_dead_lookup_borrow;
	s->read_lock = chk_dead_read_lock;
	s->read_unlock = chk_dead_read_unlock;
	s->lookup_copy = chk_dead_lookup_copy;
	s->lookup_node = chk_dead_lookup_node;
	memset(&s->rd, 0, sizeof(s->rd));
	pthread_mutex_lock(&chk_lock);
	old = chk_graves[chk_graves_next];
	chk_graves[chk_graves_next] = s;
	chk_graves_next = (chk_graves_next + 1) % PSI_CHK_GRAVES;
	pthread_mutex_unlock(&chk_lock);
	psi_free_aligned(old);
}

static void chk_destroy(struct ps_store *s)
{
	struct chk_store *c = chk_of(s);
	long open = __atomic_load_n(&c->sections, __ATOMIC_RELAXED);
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
