// SPDX-License-Identifier: LGPL-2.1-or-later
/* testutil.h without Criterion: linked into the suites, the fuzz harness and tsan_stress. */
#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <polstore/static/store.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#define PS_TEST_NO_CRITERION
#include "alloc_internal.h"
#include "compiler.h"
#include "rangeindex.h"
#include "rcu_flavour.h"
#include "rcu_reclaim.h"
#include "testutil.h"

enum ps_sync ps_test_all_syncs[PS_SYNC_COUNT];

/* Every variant the library has, in the enum's order: a new one is tested with no edit here. */
__attribute__((constructor)) static void ps_test_list_syncs(void)
{
	int i;

	for (i = 0; i < PS_SYNC_COUNT; i++)
		ps_test_all_syncs[i] = (enum ps_sync)i;
}
enum ps_idmap_sync ps_test_all_idmap_syncs[PS_IDMAP_SYNC_COUNT] = {
	PS_IDMAP_SPIN, PS_IDMAP_RWLOCK, PS_IDMAP_RCU,
};
enum ps_charge_kind ps_test_all_charge_kinds[PS_CHARGE_KIND_COUNT] = {
	PS_CHARGE_SPIN, PS_CHARGE_SEQLOCK, PS_CHARGE_ATOMIC, PS_CHARGE_STOCK,
};
enum ps_overcommit ps_test_all_overcommits[PS_OVERCOMMIT_COUNT] = {
	PS_OVERCOMMIT_GUESS, PS_OVERCOMMIT_ALWAYS, PS_OVERCOMMIT_NEVER,
};

double ps_test_scale(void)
{
	const char *s = getenv("POLSTORE_TEST_SCALE");
	double f;

	if (!s || !*s)
		return 1.0;
	if (!strcmp(s, "valgrind"))
		return 0.05;
	f = atof(s);
	return f > 0 ? f : 1.0;
}

size_t ps_test_params_pick(const char *test, const void *values, void *out, size_t count,
		size_t size)
{
	const char *rotate = getenv("POLSTORE_TEST_VARIANTS"), *lng = getenv("POLSTORE_LONG");
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t first, second;

	if (count < 2 || !rotate || strcmp(rotate, "rotate") || (lng && *lng && strcmp(lng, "0"))) {
		memcpy(out, values, count * size);
		return count;
	}
	for (; *test; test++)
		h = (h ^ (unsigned char)*test) * 0x100000001b3ULL;
	first = (size_t)(h % count);
	if (count == 2) {
		memcpy(out, (const char *)values + first * size, size);
		return 1;
	}
	second = (first + count / 2) % count;
	if (second < first) {
		size_t t = first;

		first = second;
		second = t;
	}
	memcpy(out, (const char *)values + first * size, size);
	memcpy((char *)out + size, (const char *)values + second * size, size);
	return 2;
}

long ps_test_iters(long normal)
{
	long n = (long)(normal * ps_test_scale());

	return n > 0 ? n : 1;
}

struct ps_policy *ps_test_bind(int node)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = { 0 };
	struct ps_policy *pol;

	mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
	pol = ps_policy_create(PS_MPOL_BIND, 0, mask, PS_MAX_NUMNODES);
	if (!pol) {
		perror("ps_policy_create");
		abort();
	}
	return pol;
}

int ps_test_churn(struct ps_store *s, struct ps_policy *a, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (ps_store_set(s, 1000 + (uint64_t)i, 1001 + (uint64_t)i, a) ||
				ps_store_set(s, 1000 + (uint64_t)i, 1001 + (uint64_t)i, NULL))
			return -1;
	return ps_store_synchronize(s);
}

int ps_test_count_ranges(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	(void)start;
	(void)end;
	(void)pol;
	(*(int *)arg)++;
	return 0;
}

void ps_test_idmap_queue(struct ps_idmap *map, int n, void (*free_fn)(void *))
{
	int i;

	for (i = 0; i < n; i++)
		TCHECK(ps_idmap_free_rcu(map, malloc(16), free_fn) == 0, "free_rcu");
}

int ps_test_call_in_foreach(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	const struct ps_test_call *c = arg;

	(void)start;
	(void)end;
	(void)pol;
	c->fn(c->arg);
	return 1;
}

/* ---- the failing allocator ---- */

/*
 * Allocation calls so far of each thread.  An arming counts the calls of
 * the thread that armed it only: the reclaim threads allocate too, at
 * times of their own, and a failure they absorb must not stand in for one
 * of the call under test.
 */
static __thread long alloc_calls;
/* Each arming's number; the arming thread keeps it in its armed_here. */
static long armed_gen;
static __thread long armed_here;
/* Calls numbered [fail_from, fail_to] of the arming thread fail; LONG_MAX: none. */
static long fail_from = LONG_MAX, fail_to = LONG_MAX;
static long alloc_live; /* blocks allocated and not freed since the install */
static long alloc_injected; /* failures returned */
static long alloc_usable; /* malloc_usable_size() of the blocks allocated and not freed */
static bool alloc_installed;

static void *failing_alloc(size_t size, void *ctx)
{
	long n = alloc_calls++;
	void *p;

	(void)ctx;
	if (n >= PSI_LOAD_SEQ_CST(fail_from) && n <= PSI_LOAD_SEQ_CST(fail_to) &&
			armed_here == PSI_LOAD_SEQ_CST(armed_gen)) {
		PSI_FETCH_ADD(alloc_injected, 1, SEQ_CST);
		return NULL;
	}
	p = malloc(size);
	if (p) {
		PSI_FETCH_ADD(alloc_live, 1, SEQ_CST);
		PSI_FETCH_ADD(alloc_usable, (long)malloc_usable_size(p), SEQ_CST);
	}
	return p;
}

/* The quarantine: blocks freed while it is on, poisoned, under quarantine_lock. */
#define QUARANTINE_MAX 4096
#define QUARANTINE_POISON 0x5b
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static bool quarantine_on;
static size_t quarantine_n;
static void *quarantine[QUARANTINE_MAX];

/* Keep @p poisoned instead of freeing it; false when the quarantine is off or full. */
static bool quarantine_keep(void *p)
{
	bool kept = false;

	pthread_mutex_lock(&quarantine_lock);
	if (quarantine_on && quarantine_n < QUARANTINE_MAX) {
		memset(p, QUARANTINE_POISON, malloc_usable_size(p));
		quarantine[quarantine_n++] = p;
		kept = true;
	}
	pthread_mutex_unlock(&quarantine_lock);
	return kept;
}

static void counting_free(void *p, void *ctx)
{
	(void)ctx;
	PSI_FETCH_SUB(alloc_live, 1, SEQ_CST);
	PSI_FETCH_SUB(alloc_usable, (long)malloc_usable_size(p), SEQ_CST);
	if (!quarantine_keep(p))
		free(p);
}

void ps_test_alloc_quarantine_begin(void)
{
	if (!alloc_installed)
		ps_test_alloc_install();
	pthread_mutex_lock(&quarantine_lock);
	quarantine_on = true;
	pthread_mutex_unlock(&quarantine_lock);
}

long ps_test_alloc_quarantine_end(void)
{
	long written = 0;
	size_t i, j;

	pthread_mutex_lock(&quarantine_lock);
	quarantine_on = false;
	for (i = 0; i < quarantine_n; i++) {
		const unsigned char *b = quarantine[i];
		size_t n = malloc_usable_size(quarantine[i]);

		for (j = 0; j < n; j++) {
			if (b[j] != QUARANTINE_POISON) {
				fprintf(stderr, "quarantine: block %p (%zu bytes) written at offset %zu "
						"after it was freed\n", (void *)b, n, j);
				written++;
				break;
			}
		}
		free(quarantine[i]);
	}
	quarantine_n = 0;
	pthread_mutex_unlock(&quarantine_lock);
	return written;
}

/* The library's checking switch (src/store/check.h): not part of the API. */
extern bool psi_checking;
/* The fault plane's (src/uffd/uffd_private.h), in the programs that link it. */
extern bool psi_uffd_checking __attribute__((weak));

void ps_test_set_checking(bool on)
{
	psi_checking = on;
	if (&psi_uffd_checking)
		psi_uffd_checking = on;
}

/* A hung child's stack, written to its captured stderr before SIGALRM ends it. */
static void child_hung(int sig)
{
	static const char msg[] = "the child hung; its stack:\n";
	void *pc[64];
	int n = backtrace(pc, 64);

	(void)!write(2, msg, sizeof(msg) - 1);
	backtrace_symbols_fd(pc, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

int ps_test_run_child(void (*fn)(void *), void *arg, unsigned limit_s, char *out, size_t len,
		double *secs)
{
	uint64_t t0 = ps_test_now_ns();
	size_t got = 0;
	int fds[2], status = 0;
	void *pc[1];
	ssize_t n;
	pid_t pid;

	if (pipe(fds))
		abort();
	/* backtrace()'s first call loads its unwinder, which allocates: here, not in the child. */
	(void)backtrace(pc, 1);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		signal(SIGALRM, child_hung);
		alarm(limit_s);
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	while (len && (n = read(fds[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	if (len)
		out[got] = 0;
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid)
		abort();
	if (secs)
		*secs = (double)(ps_test_now_ns() - t0) / 1e9;
	return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static pthread_mutex_t fork_safe_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_safe_once = PTHREAD_ONCE_INIT;

static void fork_safe_prepare(void)
{
	pthread_mutex_lock(&fork_safe_lock);
}

static void fork_safe_release(void)
{
	pthread_mutex_unlock(&fork_safe_lock);
}

static void fork_safe_init(void)
{
	if (pthread_atfork(fork_safe_prepare, fork_safe_release, fork_safe_release))
		abort();
}

static void *fork_safe_alloc(size_t size, void *ctx)
{
	void *p;

	(void)ctx;
	pthread_mutex_lock(&fork_safe_lock);
	p = malloc(size);
	pthread_mutex_unlock(&fork_safe_lock);
	return p;
}

static void fork_safe_free(void *ptr, void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&fork_safe_lock);
	free(ptr);
	pthread_mutex_unlock(&fork_safe_lock);
}

void ps_test_alloc_fork_safe(void)
{
	const struct ps_alloc_ops ops = { .alloc = fork_safe_alloc, .free = fork_safe_free };

	pthread_once(&fork_safe_once, fork_safe_init);
	if (ps_set_alloc_ops(&ops))
		abort();
}

/* The library's test hook and reclaim threads (src/locks/rcu_reclaim.h): not part of the API. */

void psi_test_set_release_hook(void (*fn)(void))
{
	PSI_STORE_SEQ_CST(psi_reclaim_test_hook, fn);
}

size_t ps_test_index_bytes(struct ps_store *s)
{
	return psi_ix_bytes(PSI_LOAD_ACQUIRE(s->ix.node));
}

int ps_test_reclaim_stats(enum ps_sync sync, uint64_t *grace_periods, size_t *pending,
		size_t *peak, bool reset)
{
	const struct psi_flavour *f;
	struct psi_reclaim_stats st;

	switch (sync) {
	case PS_SYNC_SEQLOCK:
	case PS_SYNC_RCU:
		f = &psi_flavour_memb;
		break;
	case PS_SYNC_RCU_QSBR:
		f = &psi_flavour_qsbr;
		break;
	default:
		return -EOPNOTSUPP;
	}
	psi_reclaim_stats(f->reclaimer, &st, reset);
	if (grace_periods)
		*grace_periods = st.grace_periods;
	if (pending)
		*pending = st.pending;
	if (peak)
		*peak = st.peak;
	return 0;
}

bool ps_test_on_valgrind(void)
{
	return RUNNING_ON_VALGRIND != 0;
}

uint64_t ps_test_reclaim_latency_ns(void)
{
	return PSI_RECLAIM_LATENCY_NS;
}

uint64_t ps_test_reclaim_quiet_ns(void)
{
	return PSI_RECLAIM_QUIET_NS;
}

size_t ps_test_reclaim_batch_bytes(void)
{
	return PSI_RECLAIM_BATCH_BYTES;
}

void ps_test_alloc_install(void)
{
	static const struct ps_alloc_ops ops = {.alloc = failing_alloc, .free = counting_free};

	PSI_STORE_SEQ_CST(fail_from, LONG_MAX);
	PSI_STORE_SEQ_CST(fail_to, LONG_MAX);
	PSI_STORE_SEQ_CST(alloc_live, 0);
	PSI_STORE_SEQ_CST(alloc_usable, 0);
	PSI_STORE_SEQ_CST(alloc_injected, 0);
	if (ps_set_alloc_ops(&ops)) {
		fprintf(stderr, "ps_set_alloc_ops refused the test allocator\n");
		abort();
	}
	alloc_installed = true;
}

void ps_test_alloc_fail_after(long k)
{
	if (!alloc_installed)
		ps_test_alloc_install();
	PSI_STORE_SEQ_CST(fail_to, LONG_MAX);
	armed_here = PSI_FETCH_ADD(armed_gen, 1, SEQ_CST) + 1;
	PSI_STORE_SEQ_CST(fail_from, k < 0 ? LONG_MAX : alloc_calls + k);
}

void ps_test_alloc_fail_once(long k)
{
	long at = alloc_calls + k;

	if (!alloc_installed)
		ps_test_alloc_install();
	armed_here = PSI_FETCH_ADD(armed_gen, 1, SEQ_CST) + 1;
	PSI_STORE_SEQ_CST(fail_to, at);
	PSI_STORE_SEQ_CST(fail_from, at);
}

bool ps_test_alloc_disarm(void)
{
	long at = PSI_XCHG(fail_from, LONG_MAX, SEQ_CST);

	PSI_STORE_SEQ_CST(fail_to, LONG_MAX);
	return alloc_calls > at;
}

long ps_test_alloc_live(void)
{
	return PSI_LOAD_SEQ_CST(alloc_live);
}

long ps_test_alloc_usable(void)
{
	return PSI_LOAD_SEQ_CST(alloc_usable);
}

size_t ps_test_block_bytes(size_t size)
{
	return psi_alloc_charge(size);
}

long ps_test_alloc_injected(void)
{
	return PSI_LOAD_SEQ_CST(alloc_injected);
}

void ps_test_alloc_restore(void)
{
	ps_test_alloc_disarm();
	ps_set_alloc_ops(NULL);
	alloc_installed = false;
}

/* ---- the model of ps_store_set() ---- */

int ps_model_set(struct ps_model *m, uint64_t start, uint64_t end, struct ps_policy *pol)
{
	struct ps_model_range out[PS_MODEL_MAX + 2];
	int n = 0, i, j;

	for (i = 0; i < m->n; i++) {
		struct ps_model_range r = m->r[i];

		if (r.end <= start || r.start >= end) {
			out[n++] = r;
			continue;
		}
		if (r.start < start)
			out[n++] = (struct ps_model_range){ r.start, start, r.pol };
		if (r.end > end)
			out[n++] = (struct ps_model_range){ end, r.end, r.pol };
	}
	if (pol && ps_policy_mode(pol) != PS_MPOL_DEFAULT)
		out[n++] = (struct ps_model_range){ start, end, pol };
	if (n > PS_MODEL_MAX)
		return -ENOSPC;
	/* Insertion sort by start: the ranges are disjoint, at most three out of place. */
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && out[j - 1].start > out[j].start; j--) {
			struct ps_model_range t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	memcpy(m->r, out, (size_t)n * sizeof(out[0]));
	m->n = n;
	return 0;
}

struct ps_policy *ps_model_at(const struct ps_model *m, uint64_t idx)
{
	int i;

	for (i = 0; i < m->n; i++)
		if (m->r[i].start <= idx && idx < m->r[i].end)
			return m->r[i].pol;
	return NULL;
}

long ps_model_refs(const struct ps_model *m, const struct ps_policy *pol)
{
	long refs = 0;
	int i;

	for (i = 0; i < m->n; i++)
		refs += m->r[i].pol == pol;
	return refs;
}

struct model_walk {
	const struct ps_model *m;
	int i;
	char *why;
	size_t len;
	bool ok;
};

static int model_walk_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct model_walk *w = arg;
	const struct ps_model_range *r = w->i < w->m->n ? &w->m->r[w->i] : NULL;

	if (w->ok && (!r || r->start != start || r->end != end || r->pol != pol)) {
		w->ok = false;
		if (r)
			snprintf(w->why, w->len, "range %d is [%llu, %llu) %p, model [%llu, %llu) %p",
					w->i, (unsigned long long)start, (unsigned long long)end,
					(void *)pol, (unsigned long long)r->start,
					(unsigned long long)r->end, (void *)r->pol);
		else
			snprintf(w->why, w->len, "range %d [%llu, %llu) beyond the model's %d",
					w->i, (unsigned long long)start, (unsigned long long)end,
					w->m->n);
	}
	w->i++;
	return 0;
}

bool ps_model_matches(struct ps_store *s, const struct ps_model *m, char *why, size_t len)
{
	struct model_walk w = { m, 0, why, len, true };
	const char *bad = NULL;
	size_t count;
	int ret;

	ret = ps_store_check(s, &bad);
	if (ret) {
		snprintf(why, len, "ps_store_check: %d: %s", ret, bad ? bad : "?");
		return false;
	}
	ret = ps_store_foreach(s, model_walk_fn, &w);
	if (ret) {
		snprintf(why, len, "ps_store_foreach: %d", ret);
		return false;
	}
	if (!w.ok)
		return false;
	if (w.i != m->n) {
		snprintf(why, len, "the store has %d ranges, the model %d", w.i, m->n);
		return false;
	}
	count = ps_store_count(s);
	if (count != (size_t)m->n) {
		snprintf(why, len, "ps_store_count: %zu, the model %d", count, m->n);
		return false;
	}
	return true;
}

bool ps_model_matches_refs(struct ps_store *s, const struct ps_model *m,
		struct ps_policy *const *pols, int npols, uint64_t points, char *why, size_t len)
{
	uint64_t i;
	int j, ret;

	if (!ps_model_matches(s, m, why, len))
		return false;
	ret = ps_store_synchronize(s);
	if (ret) {
		snprintf(why, len, "ps_store_synchronize: %d", ret);
		return false;
	}
	for (j = 0; j < npols; j++) {
		long refs = 1 + ps_model_refs(m, pols[j]);

		if (ps_policy_refcount(pols[j]) != refs) {
			snprintf(why, len, "policy %d: %ld references, want %ld", j,
					(long)ps_policy_refcount(pols[j]), refs);
			return false;
		}
	}
	for (i = 0; i < points; i++) {
		struct ps_policy *got = ps_store_lookup(s, i), *want = ps_model_at(m, i);

		ps_policy_put(got);
		if (got != want) {
			snprintf(why, len, "lookup(%llu): %p, the model %p", (unsigned long long)i,
					(void *)got, (void *)want);
			return false;
		}
	}
	return true;
}

static int model_read_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ps_model *m = arg;

	if (m->n == PS_MODEL_MAX)
		return -ENOSPC;
	m->r[m->n++] = (struct ps_model_range){ start, end, pol };
	return 0;
}

int ps_model_read(struct ps_model *m, struct ps_store *s)
{
	ps_model_init(m);
	return ps_store_foreach(s, model_read_fn, m);
}
