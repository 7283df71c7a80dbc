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
 *
 * The thread records and the watchdog are check_thread.c's
 * (check_thread.h); this file wraps a store's operations.
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

#include "alloc_internal.h"
#include "check.h"
#include "check_thread.h"
#include "held.h"
#include "store_internal.h"
#include "store_tag.h"
#include "variants.h"

#define PSI_CHK_GRAVES 64       /* destroyed stores kept poisoned */

#ifdef POLSTORE_CHECKING
bool psi_checking = true;
#else
bool psi_checking;
#endif

static struct ps_store *chk_graves[PSI_CHK_GRAVES];
static unsigned chk_graves_next;

/* POLSTORE_CHECK=1 or 0, read once when the library is loaded. */
__attribute__((constructor)) static void chk_read_env(void)
{
	const char *v = getenv("POLSTORE_CHECK");

	if (v && (!strcmp(v, "1") || !strcmp(v, "0")))
		psi_checking = v[0] == '1';
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
	const struct ps_sync_ops *real = psi_chk_of(s)->real;

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
		struct chk_thread *t_ = psi_chk_self();                                            \
		struct chk_wait saved_;                                                            \
		__typeof__(expr) r_;                                                               \
		psi_chk_wait_begin(t_, (s), (call), (mask), &saved_);                              \
		r_ = (expr);                                                                       \
		psi_chk_wait_end(t_, &saved_);                                                     \
		r_;                                                                                \
	})

static struct ps_policy *chk_lookup(struct ps_store *s, uint64_t idx)
{
	return CHK_CALL(s, "ps_store_lookup()", chk_read_wait(s),
			psi_chk_of(s)->real->lookup(s, idx));
}

static int chk_lookup_copy(struct ps_store *s, uint64_t idx, struct ps_policy_view *view)
{
	return CHK_CALL(s, "ps_store_lookup_copy()", chk_read_wait(s),
			psi_chk_of(s)->real->lookup_copy(s, idx, view));
}

static int chk_lookup_node(struct ps_store *s, uint64_t idx, int local_node)
{
	return CHK_CALL(s, "ps_store_lookup_node()", chk_read_wait(s),
			psi_chk_of(s)->real->lookup_node(s, idx, local_node));
}

static int chk_next(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol)
{
	return CHK_CALL(s, "ps_store_next()", chk_read_wait(s),
			psi_chk_of(s)->real->next(s, idx, start, end, pol));
}

static void chk_read_lock(struct ps_store *s)
{
	struct chk_thread *t = psi_chk_self();
	struct chk_wait saved;

	psi_chk_wait_begin(t, s, "ps_store_read_lock()", chk_read_wait(s), &saved);
	psi_chk_of(s)->real->read_lock(s);
	psi_chk_push(t, s, "ps_store_read_lock()", chk_section_kind(s, false), chk_exit_ok(s),
			&saved);
}

static void chk_read_unlock(struct ps_store *s)
{
	const char *call = NULL;
	pid_t other;

	if (psi_likely(psi_chk_pop(psi_chk_self(), s, chk_section_kind(s, false)))) {
		psi_chk_of(s)->real->read_unlock(s);
		return;
	}
	other = psi_chk_other_holder(s, &call);
	if (other)
		psi_chk_die("ps_store_read_unlock()",
				"%s store %p: this thread holds no read-side "
				"section of it; thread %d does (%s): a section is closed by the "
				"thread that opened it",
				ps_sync_name(s->sync), (void *)s, (int)other, call);
	psi_chk_die("ps_store_read_unlock()", "%s store %p: no read-side section of it is open "
			"(never locked, or unlocked twice)", ps_sync_name(s->sync), (void *)s);
}

/* Borrowed reads: inside a section of @s on this thread (RCU_QSBR: or online). */
static void chk_borrow_context(struct ps_store *s, const char *call)
{
	const struct psi_flavour *f = psi_variant_of(s)->flavour;

	if (f && f->reads_free())
		return;
	if (!psi_chk_holds(psi_chk_self(), s))
		psi_chk_die(call, "%s store %p: called outside every read-side section of it on "
				"this thread: what it returns is not protected",
				ps_sync_name(s->sync), (void *)s);
}

static const struct ps_policy *chk_lookup_borrow(struct ps_store *s, uint64_t idx)
{
	chk_borrow_context(s, "ps_store_lookup_borrow()");
	return psi_chk_of(s)->real->lookup_borrow(s, idx);
}

static int chk_next_borrow(struct ps_store *s, uint64_t idx, uint64_t *start, uint64_t *end,
		const struct ps_policy **pol)
{
	chk_borrow_context(s, "ps_store_next_borrow()");
	return psi_chk_of(s)->real->next_borrow(s, idx, start, end, pol);
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
		psi_chk_push(w->t, w->s, w->call, chk_section_kind(w->s, true) | CHK_WALK,
				chk_exit_ok(w->s), &w->saved);
		w->in = true;
	}
	return w->fn(start, end, pol, w->arg);
}

static int chk_walk_end(struct chk_walk *w, int ret)
{
	if (w->in)
		psi_chk_pop(w->t, w->s, chk_section_kind(w->s, true) | CHK_WALK);
	else
		psi_chk_wait_end(w->t, &w->saved);
	return ret;
}

static int chk_foreach(struct ps_store *s, ps_foreach_fn fn, void *arg)
{
	struct chk_walk w = { fn, arg, psi_chk_self(), s, "ps_store_foreach()", { 0 }, false };

	psi_chk_wait_begin(w.t, s, w.call, chk_walk_wait(s), &w.saved);
	return chk_walk_end(&w, psi_chk_of(s)->real->foreach(s, chk_walk_cb, &w));
}

static int chk_foreach_range(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn,
		void *arg)
{
	struct chk_walk w = {fn, arg, psi_chk_self(), s, "ps_store_foreach_range()", {0}, false};

	psi_chk_wait_begin(w.t, s, w.call, chk_walk_wait(s), &w.saved);
	return chk_walk_end(&w, psi_chk_of(s)->real->foreach_range(s, start, end, chk_walk_cb, &w));
}

static int chk_set(struct ps_store *s, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	return CHK_CALL(s, "ps_store_set()", chk_lock_wait(s) | chk_set_gp_wait(s),
			psi_chk_of(s)->real->set(s, start, end, pol));
}

static int chk_set_many(struct ps_store *s, const struct ps_set_op *ops, size_t n)
{
	return CHK_CALL(s, "ps_store_set_many()", chk_lock_wait(s) | chk_set_gp_wait(s),
			psi_chk_of(s)->real->set_many(s, ops, n));
}

static int chk_check(struct ps_store *s, const char **why)
{
	return CHK_CALL(s, "ps_store_check()", chk_lock_wait(s),
			psi_chk_of(s)->real->check(s, why));
}

static void chk_synchronize(struct ps_store *s)
{
	struct chk_thread *t = psi_chk_self();
	struct chk_wait saved;

	psi_chk_wait_begin(
			t, s, "ps_store_synchronize()", chk_lock_wait(s) | chk_gp_wait(s), &saved);
	psi_chk_of(s)->real->synchronize(s);
	psi_chk_wait_end(t, &saved);
}

/* ---- destroyed stores ---- */

void psi_check_dead(const struct ps_store *s, const char *call)
{
	psi_chk_die(call, "store %p was destroyed (ps_store_destroy() or "
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
	psi_chk_global_lock(&mask);
	old = chk_graves[chk_graves_next];
	chk_graves[chk_graves_next] = s;
	chk_graves_next = (chk_graves_next + 1) % PSI_CHK_GRAVES;
	psi_chk_global_unlock(&mask);
	psi_free_aligned(old);
}

static void chk_destroy(struct ps_store *s)
{
	struct chk_store *c = psi_chk_of(s);
	long open = PSI_READ_ONCE(c->sections);
	const char *call = NULL;

	if (open) {
		pid_t other = psi_chk_other_holder(s, &call);

		psi_chk_die("ps_store_destroy()",
				"%s store %p: %ld read-side sections or walks of it "
				"are still open (thread %d: %s); ps_store_destroy_deferred() waits "
				"for them",
				ps_sync_name(s->sync), (void *)s, open, (int)other,
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
	c->fork_call = NULL;
	c->fork_tid = 0;
	c->fork_section = false;
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
	s->tag |= PSI_STORE_TAG_CHECKED;
	(void)psi_chk_self();
	return 0;
}
