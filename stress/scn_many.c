// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * many-stores: the shape of the kernel's shared policies, one small tree
 * per shared object.  --stores stores (10,000) of 1 to 16 ranges each (or
 * exactly --ranges when given), per store variant, each variant in a child
 * process of its own so that its memory is measured alone:
 *
 *  - bytes per store: ps_store_memory(), the library's live heap bytes
 *    (the counting allocator) and the resident set, fresh, after 100 sets
 *    on every store, and 100 ms later with no ps_store_synchronize() call;
 *  - readers (--ranks, 2) look up uniform pages of uniform stores
 *    (ps_store_lookup_node(), as a fault would) while --writers writers
 *    (1) set random ranges of random stores at --write-interval (1 ms;
 *    0: flat out): lookups and sets per second;
 *  - one store of 64 ranges after 100,000 sets: its library heap bytes at
 *    once and 100 ms later, with no synchronize call.
 *
 * Validation: every store's ranges are compared with a model after the
 * sets and after the run, and every lookup must name node 0 (the policies
 * bind to it) or say the page has none.
 */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "compiler.h"
#include "stress.h"

#define MANY_SLOTS 16       /* ranges a store holds at most */
#define MANY_SLOT_PAGES 4   /* pages per slot: a range is [4 i, 4 i + 3) */
#define MANY_POLS 8
#define MANY_SETS_EACH 100
#define MANY_ONE_RANGES 64
#define MANY_ONE_SETS 100000
#define MANY_IDLE_NS 100000000ULL

/* What a child measured, sent back through a pipe. */
struct many_result {
	int ok;
	char err[160];
	double mem[3], heap[3], rss[3]; /* per store: fresh, after sets, 100 ms later */
	double lookups_per_s, sets_per_s;
	double one_mem, one_heap_now, one_heap_idle;
};

struct many {
	enum ps_sync sync;
	struct ps_store **s;
	uint8_t (*model)[MANY_SLOTS]; /* per store and slot: 0 none, 1 + policy index */
	uint8_t *nslots;
	size_t nstores;
	struct ps_policy *pol[MANY_POLS];
	struct stress_gate gate;
	int stop;           /* atomic */
	uint64_t lookups;   /* atomic */
	uint64_t sets;      /* atomic */
	int bad;            /* atomic */
	pthread_mutex_t wlock; /* writers share the model */
};

static size_t rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t memory_sum(const struct many *m)
{
	size_t i, sum = 0;

	for (i = 0; i < m->nstores; i++)
		sum += ps_store_memory(m->s[i]);
	return sum;
}

/* Set slot @k of store @i to policy @p (0: none) and note it in the model. */
static int many_set(struct many *m, size_t i, unsigned k, unsigned p)
{
	uint64_t a = (uint64_t)k * MANY_SLOT_PAGES;
	int ret = ps_store_set(m->s[i], a, a + MANY_SLOT_PAGES - 1, p ? m->pol[p - 1] : NULL);

	if (!ret)
		m->model[i][k] = (uint8_t)p;
	return ret;
}

struct many_check {
	const uint8_t *model;
	struct ps_policy *const *pol;
	unsigned next;
	bool bad;
};

static int many_check_one(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct many_check *c = arg;

	while (c->next < MANY_SLOTS && !c->model[c->next])
		c->next++;
	if (c->next >= MANY_SLOTS || start != (uint64_t)c->next * MANY_SLOT_PAGES ||
			end != start + MANY_SLOT_PAGES - 1 || pol != c->pol[c->model[c->next] - 1])
		c->bad = true;
	c->next++;
	return 0;
}

/* Every store holds exactly its model's ranges: false (and @why) if not. */
static bool many_check(const struct many *m, char *why, size_t n)
{
	size_t i;

	for (i = 0; i < m->nstores; i++) {
		struct many_check c = { m->model[i], m->pol, 0, false };
		const char *broken = NULL;

		if (ps_store_check(m->s[i], &broken)) {
			snprintf(why, n, "store %zu: %s", i, broken);
			return false;
		}
		ps_store_foreach(m->s[i], many_check_one, &c);
		while (c.next < MANY_SLOTS && !m->model[i][c.next])
			c.next++;
		if (c.bad || c.next < MANY_SLOTS) {
			snprintf(why, n, "store %zu does not hold the ranges set", i);
			return false;
		}
	}
	return true;
}

static void *many_reader(void *arg)
{
	struct many *m = arg;
	uint64_t rng = stress_seed_for(stress_opts.seed, (uint64_t)(uintptr_t)&rng), n = 0;

	bool qsbr = ps_sync_caps(m->sync) & PS_CAP_QSBR;

	/* QSBR readers as the other scenarios run them: online, quiescent between lookups. */
	if (qsbr)
		ps_qsbr_thread_online();
	stress_gate_wait(&m->gate);
	while (!PSI_READ_ONCE(m->stop)) {
		int i;

		for (i = 0; i < 256; i++) {
			size_t s = stress_below(&rng, m->nstores);
			uint64_t page = stress_below(&rng, MANY_SLOTS * MANY_SLOT_PAGES);
			int node = ps_store_lookup_node(m->s[s], page, 0);

			if (node != 0)
				PSI_WRITE_ONCE(m->bad, 1);
			if (qsbr)
				ps_qsbr_quiescent();
		}
		n += 256;
	}
	if (qsbr)
		ps_qsbr_thread_offline();
	PSI_FETCH_ADD(m->lookups, n, RELAXED);
	return NULL;
}

static void *many_writer(void *arg)
{
	struct many *m = arg;
	uint64_t rng = stress_seed_for(stress_opts.seed, (uint64_t)(uintptr_t)&rng), n = 0;
	uint64_t next = 0;

	stress_gate_wait(&m->gate);
	next = stress_now_ns();
	while (!PSI_READ_ONCE(m->stop)) {
		size_t s = stress_below(&rng, m->nstores);
		unsigned k = (unsigned)stress_below(&rng, m->nslots[s]);
		unsigned p = 1 + (unsigned)stress_below(&rng, MANY_POLS);

		pthread_mutex_lock(&m->wlock);
		if (many_set(m, s, k, p))
			PSI_WRITE_ONCE(m->bad, 2);
		pthread_mutex_unlock(&m->wlock);
		n++;
		if (stress_opts.write_interval_ns) {
			next += stress_opts.write_interval_ns;
			stress_sleep_until(next);
		}
	}
	PSI_FETCH_ADD(m->sets, n, RELAXED);
	return NULL;
}

static void many_fail(struct many_result *r, const char *fmt, const char *what)
{
	r->ok = 0;
	snprintf(r->err, sizeof(r->err), fmt, what);
}

/* The measurements of one variant, in a child process. */
static void many_child(enum ps_sync sync, size_t nstores, struct many_result *r)
{
	struct many m = { .sync = sync, .nstores = nstores };
	unsigned long node0 = 1;
	uint64_t rng = stress_seed_for(stress_opts.seed, 77);
	size_t i, heap0, rss0;
	pthread_t *ts;
	int nr = stress_opts.ranks[stress_opts.nranks - 1], nw = stress_opts.writers, t;
	uint64_t t0;
	char why[128];

	memset(r, 0, sizeof(*r));
	r->ok = 1;
	pthread_mutex_init(&m.wlock, NULL);
	for (i = 0; i < MANY_POLS; i++)
		m.pol[i] = ps_policy_create(i & 1 ? PS_MPOL_BIND : PS_MPOL_PREFERRED, 0, &node0, 1);
	m.s = calloc(nstores, sizeof(*m.s));
	m.model = calloc(nstores, sizeof(*m.model));
	m.nslots = calloc(nstores, 1);
	ts = calloc((size_t)(nr + nw), sizeof(*ts));
	if (!m.s || !m.model || !m.nslots || !ts)
		stress_die("out of memory");
	heap0 = stress_live_bytes();
	rss0 = rss_bytes();
	for (i = 0; i < nstores; i++) {
		unsigned k, n = stress_opts.ranges_given ? (unsigned)stress_opts.ranges[0]
							  : 1 + (unsigned)stress_below(&rng, MANY_SLOTS);

		m.s[i] = ps_store_create(sync);
		if (!m.s[i])
			stress_die("ps_store_create(%s): %s", ps_sync_name(sync), strerror(errno));
		m.nslots[i] = (uint8_t)n;
		for (k = 0; k < n; k++)
			if (many_set(&m, i, k, 1 + (unsigned)stress_below(&rng, MANY_POLS)))
				stress_die("ps_store_set: out of memory");
	}
	r->mem[0] = (double)memory_sum(&m) / (double)nstores;
	r->heap[0] = (double)(stress_live_bytes() - heap0) / (double)nstores;
	r->rss[0] = (double)(rss_bytes() - rss0) / (double)nstores;
	/* 100 sets on every store: new policies for its ranges, splits, removals, re-adds. */
	for (i = 0; i < nstores; i++) {
		int j;

		for (j = 0; j < MANY_SETS_EACH; j++) {
			unsigned k = (unsigned)stress_below(&rng, m.nslots[i]);
			unsigned p = (unsigned)stress_below(&rng, MANY_POLS + 1);

			if (many_set(&m, i, k, p))
				stress_die("ps_store_set: out of memory");
		}
	}
	r->mem[1] = (double)memory_sum(&m) / (double)nstores;
	r->heap[1] = (double)(stress_live_bytes() - heap0) / (double)nstores;
	r->rss[1] = (double)(rss_bytes() - rss0) / (double)nstores;
	stress_sleep_ns(MANY_IDLE_NS);
	r->mem[2] = (double)memory_sum(&m) / (double)nstores;
	r->heap[2] = (double)(stress_live_bytes() - heap0) / (double)nstores;
	r->rss[2] = (double)(rss_bytes() - rss0) / (double)nstores;
	if (!many_check(&m, why, sizeof(why))) {
		many_fail(r, "after the sets: %s", why);
		return;
	}
	/* Readers over all the stores, writers changing random ones. */
	stress_gate_init(&m.gate);
	for (t = 0; t < nr; t++)
		stress_thread_start(&ts[t], many_reader, &m);
	for (t = 0; t < nw; t++)
		stress_thread_start(&ts[nr + t], many_writer, &m);
	t0 = stress_gate_open(&m.gate, nr + nw);
	stress_sleep_ns((uint64_t)(stress_opts.duration_s * 1e9));
	PSI_WRITE_ONCE(m.stop, 1);
	for (t = 0; t < nr + nw; t++)
		pthread_join(ts[t], NULL);
	r->lookups_per_s = (double)m.lookups / ((double)(stress_now_ns() - t0) / 1e9);
	r->sets_per_s = (double)m.sets / ((double)(stress_now_ns() - t0) / 1e9);
	stress_gate_destroy(&m.gate);
	if (m.bad) {
		many_fail(r, "%s", m.bad == 1 ? "a lookup named a node no policy binds"
					       : "a set failed");
		return;
	}
	if (!many_check(&m, why, sizeof(why))) {
		many_fail(r, "after the run: %s", why);
		return;
	}
	for (i = 0; i < nstores; i++)
		ps_store_destroy(m.s[i]);
	/* One store of 64 ranges, 100,000 sets, no synchronize. */
	{
		struct ps_store *s = ps_store_create(sync);
		uint64_t k;

		heap0 = stress_live_bytes();
		for (k = 0; k < MANY_ONE_RANGES; k++)
			ps_store_set(s, 4 * k, 4 * k + 3, m.pol[k % MANY_POLS]);
		for (k = 0; k < MANY_ONE_SETS; k++) {
			uint64_t x = stress_below(&rng, MANY_ONE_RANGES);

			ps_store_set(s, 4 * x, 4 * x + 3, m.pol[stress_below(&rng, MANY_POLS)]);
		}
		r->one_mem = (double)ps_store_memory(s);
		r->one_heap_now = (double)(stress_live_bytes() - heap0);
		stress_sleep_ns(MANY_IDLE_NS);
		r->one_heap_idle = (double)(stress_live_bytes() - heap0);
		ps_store_destroy(s);
	}
	for (i = 0; i < MANY_POLS; i++)
		ps_policy_put(m.pol[i]);
	free(m.s);
	free(m.model);
	free(m.nslots);
	free(ts);
}

void stress_run_many_stores(void)
{
	size_t nstores = stress_opts.stores ? stress_opts.stores : 10000;
	int v;

	for (v = 0; v < STRESS_NSYNC; v++) {
		const char *name = ps_sync_name((enum ps_sync)v);
		struct many_result r;
		struct stress_point p;
		int fd[2], status;
		ssize_t got;
		pid_t pid;

		if (!stress_variant_selected(name))
			continue;
		stress_progress("many-stores: %s, %zu stores", name, nstores);
		if (pipe(fd))
			stress_die("pipe: %s", strerror(errno));
		fflush(NULL);
		pid = fork();
		if (pid < 0)
			stress_die("fork: %s", strerror(errno));
		if (pid == 0) {
			close(fd[0]);
			many_child((enum ps_sync)v, nstores, &r);
			got = write(fd[1], &r, sizeof(r));
			_exit(got == (ssize_t)sizeof(r) ? 0 : 1);
		}
		close(fd[1]);
		got = read(fd[0], &r, sizeof(r));
		close(fd[0]);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) ||
				got != (ssize_t)sizeof(r))
			stress_die("many-stores: the %s child died", name);
		if (!r.ok)
			stress_fail("VALIDATION FAILED: many-stores: %s: %s", name, r.err);
		stress_point_init(&p, "many-stores", name, stress_opts.ranks[stress_opts.nranks - 1]);
		p.writers = stress_opts.writers;
		p.ranges = stress_opts.ranges_given ? stress_opts.ranges[0] : 0;
		p.stores = nstores;
		p.duration_s = stress_opts.duration_s;
		memcpy(p.store_mem, r.mem, sizeof(r.mem));
		memcpy(p.store_heap, r.heap, sizeof(r.heap));
		memcpy(p.store_rss, r.rss, sizeof(r.rss));
		p.ops_per_sec = r.lookups_per_s;
		p.writer_ops_per_sec = r.sets_per_s;
		p.one_mem = r.one_mem;
		p.one_heap_now = r.one_heap_now;
		p.one_heap_idle = r.one_heap_idle;
		stress_emit(&p);
	}
}
