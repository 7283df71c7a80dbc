// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The node topology that node lookups follow: its first load from sysfs,
 * which no lookup may wait for (a thread cancelled while it reads sysfs, a
 * parent thread reading it at fork()); the system's nodes without memory;
 * ps_numa_check_policy(); lookups while the topology changes.
 *
 * fopen() is interposed: a thread that sets hook_stop stops inside its next
 * fopen() of a file under /sys/devices/system/node/ (the first read of the
 * topology) until the test posts hook_release; with fake_sysfs set, the
 * node and weighted-interleave files are the table's (a file not in it does
 * not exist).  Criterion runs every test in a fresh process, so each
 * test's first lookup loads the topology.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <polstore/numa.h>

#include "compiler.h"
#include "testutil.h"

#define SYSFS_NODE "/sys/devices/system/node/"
#define SYSFS_WEIGHTS "/sys/kernel/mm/mempolicy/weighted_interleave/"

static sem_t hook_entered, hook_release;
static __thread bool hook_stop;
static const char *const (*fake_sysfs)[2]; /* { path, content } ..., { NULL } */

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

FILE *fopen(const char *path, const char *mode)
{
	static FILE *(*real)(const char *, const char *);
	int i;

	if (!real)
		real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
	if (hook_stop && has_prefix(path, SYSFS_NODE)) {
		hook_stop = false;
		sem_post(&hook_entered);
		/* sem_wait() is a cancellation point. */
		while (sem_wait(&hook_release) && errno == EINTR)
			;
	}
	if (fake_sysfs && (has_prefix(path, SYSFS_NODE) || has_prefix(path, SYSFS_WEIGHTS))) {
		for (i = 0; fake_sysfs[i][0]; i++)
			if (!strcmp(path, fake_sysfs[i][0]))
				return fmemopen((void *)fake_sysfs[i][1], strlen(fake_sysfs[i][1]), "r");
		errno = ENOENT;
		return NULL;
	}
	return real(path, mode);
}

static void hook_init(void)
{
	cr_assert_eq(sem_init(&hook_entered, 0, 0), 0);
	cr_assert_eq(sem_init(&hook_release, 0, 0), 0);
}

/* Wait for @s at most @seconds.  Return: true when it was posted. */
static bool wait_sem(sem_t *s, int seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	for (;;) {
		if (!sem_timedwait(s, &ts))
			return true;
		if (errno != EINTR)
			return false;
	}
}

/* BIND on nodes 0 and 1: from local node 2 a lookup needs the distances. */
static struct ps_policy *bind01(void)
{
	unsigned long mask = 0x3;
	struct ps_policy *pol = ps_policy_create(PS_MPOL_BIND, 0, &mask, 64);

	cr_assert_not_null(pol);
	return pol;
}

/* A thread that stops inside the first topology load, then meets a cancellation point. */
static void *stop_in_first_load(void *arg)
{
	hook_stop = true;
	(void)ps_policy_node(arg, 0, 2);
	pthread_testcancel();
	return NULL;
}

struct lookup_arg {
	struct ps_policy *pol;
	sem_t done;
	int node;
};

static void *lookup_thread(void *arg)
{
	struct lookup_arg *a = arg;

	a->node = ps_policy_node(a->pol, 0, 2);
	sem_post(&a->done);
	return NULL;
}

/*
 * A thread cancelled while it loads the topology from sysfs leaves nothing
 * behind that another lookup waits for.  The cancellation still takes
 * effect, at the thread's next cancellation point after the load.
 */
Test(topology, cancelled_in_first_load, .timeout = 60)
{
	struct lookup_arg b = { .pol = bind01() };
	pthread_t ta, tb;
	void *res;
	bool done;

	hook_init();
	cr_assert_eq(sem_init(&b.done, 0, 0), 0);
	cr_assert_eq(pthread_create(&ta, NULL, stop_in_first_load, b.pol), 0);
	cr_assert(wait_sem(&hook_entered, 20), "the first lookup read no sysfs node file");
	cr_assert_eq(pthread_cancel(ta), 0);
	cr_assert_eq(pthread_create(&tb, NULL, lookup_thread, &b), 0);
	done = wait_sem(&b.done, 10);
	sem_post(&hook_release);
	cr_assert(done, "a node lookup waits for a thread cancelled inside the topology load");
	cr_expect_geq(b.node, 0);
	cr_assert_eq(pthread_join(tb, NULL), 0);
	cr_assert_eq(pthread_join(ta, &res), 0);
	cr_expect_eq(res, PTHREAD_CANCELED, "the cancellation was lost");
	cr_expect_eq(ps_policy_node(b.pol, 0, 2), b.node);
	ps_policy_put(b.pol);
}

/* A child forked while another thread loads the topology does its own lookups. */
Test(topology, fork_during_first_load, .timeout = 60)
{
	struct ps_policy *pol = bind01();
	pthread_t ta;
	pid_t pid;
	int status;

	hook_init();
	cr_assert_eq(pthread_create(&ta, NULL, stop_in_first_load, pol), 0);
	cr_assert(wait_sem(&hook_entered, 20), "the first lookup read no sysfs node file");
	pid = fork();
	cr_assert_neq(pid, -1);
	if (!pid) {
		alarm(10); /* a hang is a failure */
		_exit(ps_policy_node(pol, 0, 2) >= 0 ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	sem_post(&hook_release);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"the child's lookup %s (signal %d)",
			WIFSIGNALED(status) ? "hung or crashed" : "failed",
			WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(pthread_join(ta, NULL), 0);
	ps_policy_put(pol);
}

static struct ps_policy *make(int mode, unsigned long mask)
{
	struct ps_policy *pol = ps_policy_create(mode, 0, mask ? &mask : NULL, mask ? 64 : 0);

	cr_assert_not_null(pol, "ps_policy_create(%s, %#lx)", ps_mode_name(mode), mask);
	return pol;
}

/*
 * A system whose node 1 is online without memory (a CPU-only node), the
 * others a ring: 0-1 20, 0-2 30, 0-3 20, 1-2 20, 1-3 30, 2-3 20; node 2
 * weighs 3 for weighted interleave.
 */
static const char *const memoryless_node1[][2] = {
	{ SYSFS_NODE "online", "0-3\n" },
	{ SYSFS_NODE "has_memory", "0,2-3\n" },
	{ SYSFS_NODE "node0/distance", "10 20 30 20\n" },
	{ SYSFS_NODE "node1/distance", "20 10 20 30\n" },
	{ SYSFS_NODE "node2/distance", "30 20 10 20\n" },
	{ SYSFS_NODE "node3/distance", "20 30 20 10\n" },
	{ SYSFS_WEIGHTS "node2", "3\n" },
	{ NULL, NULL },
};

struct sys_case {
	int mode;
	unsigned long mask;
	uint64_t ilx;
	int local, want;
	const char *why;
};

static const struct sys_case sys_cases[] = {
	{ PS_MPOL_BIND, 1UL << 2, 0, 0, 2, "BIND on 2, past the dense prefix (node 0 alone)" },
	{ PS_MPOL_BIND, 1UL << 1, 0, 0, 0, "BIND on the memoryless node: local" },
	{ PS_MPOL_BIND, 1UL << 1, 0, 3, 3, "BIND on the memoryless node: local" },
	{ PS_MPOL_BIND, 1UL << 1, 0, 1, 0, "BIND on it from itself: 0 and 2 at 20, lowest id" },
	{ PS_MPOL_BIND, 0x3, 0, 1, 0, "BIND 0,1 from 1: node 0" },
	{ PS_MPOL_PREFERRED, 1UL << 1, 0, 3, 0, "PREFERRED on it: nearest to it with memory" },
	{ PS_MPOL_PREFERRED, 1UL << 7, 0, 3, 3, "PREFERRED on a node not online: local" },
	{ PS_MPOL_INTERLEAVE, 0xe, 0, 0, 2, "INTERLEAVE 1-3 over 2,3: index 0" },
	{ PS_MPOL_INTERLEAVE, 0xe, 1, 0, 3, "INTERLEAVE 1-3 over 2,3: index 1" },
	{ PS_MPOL_INTERLEAVE, 0xe, 2, 0, 2, "INTERLEAVE 1-3 over 2,3: index 2" },
	{ PS_MPOL_WEIGHTED_INTERLEAVE, 0xe, 2, 0, 2, "WEIGHTED over 2 (3 slots), 3" },
	{ PS_MPOL_WEIGHTED_INTERLEAVE, 0xe, 3, 0, 3, "WEIGHTED over 2 (3 slots), 3: slot 3" },
	{ PS_MPOL_LOCAL, 0, 0, 1, 0, "LOCAL from the memoryless node: nearest, lowest id" },
	{ PS_MPOL_LOCAL, 0, 0, 2, 2, "LOCAL from 2" },
	{ PS_MPOL_PREFERRED_MANY, 0x6, 0, 1, 2, "PREFERRED_MANY 1,2 from 1: 2" },
};

/* The system's topology, nodes without memory included, through ps_policy_node() and stores. */
Test(topology, system_memoryless_node)
{
	size_t i;
	int k;

	fake_sysfs = memoryless_node1;
	for (i = 0; i < PS_ARRAY_SIZE(sys_cases); i++) {
		const struct sys_case *c = &sys_cases[i];
		struct ps_policy *pol = make(c->mode, c->mask);

		cr_expect_eq(ps_policy_node(pol, c->ilx, c->local), c->want, "%s: got %d", c->why,
				ps_policy_node(pol, c->ilx, c->local));
		for (k = 0; k < PS_SYNC_COUNT; k++) {
			struct ps_store *s = ps_store_create(ps_test_all_syncs[k]);

			cr_assert_not_null(s);
			cr_assert_eq(ps_store_set(s, 0, 64, pol), 0);
			if (ps_test_all_syncs[k] == PS_SYNC_RCU_QSBR)
				ps_qsbr_thread_online();
			cr_expect_eq(ps_store_lookup_node(s, c->ilx, c->local), c->want, "%s: %s",
					ps_sync_name(ps_test_all_syncs[k]), c->why);
			if (ps_test_all_syncs[k] == PS_SYNC_RCU_QSBR)
				ps_qsbr_thread_offline();
			ps_store_destroy(s);
		}
		ps_policy_put(pol);
	}
	cr_expect_eq(ps_policy_node(NULL, 0, 1), 0, "no policy from the memoryless node");
	/* Going back to the system's topology reads it again. */
	cr_expect_eq(ps_numa_set_topology(0, NULL, NULL), 0);
	cr_expect_eq(ps_policy_node(NULL, 0, 1), 0);
	fake_sysfs = NULL;
}

struct fit_case {
	int mode;
	unsigned long mask;
	int ret, rule, first_missing, missing, present;
};

static void expect_fit(const struct fit_case *c, const char *topology)
{
	struct ps_policy *pol = make(c->mode, c->mask);
	struct ps_policy_fit fit;

	memset(&fit, 0x5a, sizeof(fit));
	cr_expect_eq(ps_numa_check_policy(pol, &fit), c->ret, "%s, %s %#lx", topology,
			ps_mode_name(c->mode), c->mask);
	cr_expect_eq(fit.rule, c->rule, "%s, %s %#lx: rule %d", topology, ps_mode_name(c->mode),
			c->mask, fit.rule);
	cr_expect_eq(fit.first_missing, c->first_missing, "%s, %s %#lx: first missing %d", topology,
			ps_mode_name(c->mode), c->mask, fit.first_missing);
	cr_expect_eq(fit.missing, c->missing, "%s, %s %#lx", topology, ps_mode_name(c->mode),
			c->mask);
	cr_expect_eq(fit.present, c->present, "%s, %s %#lx", topology, ps_mode_name(c->mode),
			c->mask);
	cr_expect_eq(ps_numa_check_policy(pol, NULL), c->ret, "no result asked for");
	ps_policy_put(pol);
}

/* Which node or rule fails, on the system's topology (node 1 without memory) and on a table. */
Test(topology, check_policy)
{
	static const struct fit_case on_system[] = {
		{ PS_MPOL_BIND, 0xd, 0, PS_FIT_EXACT, -1, 0, 3 },
		{ PS_MPOL_BIND, 0x6, -ENOENT, PS_FIT_NARROWED, 1, 1, 1 },
		{ PS_MPOL_INTERLEAVE, 0x2, -ENOENT, PS_FIT_LOCAL, 1, 1, 0 },
		{ PS_MPOL_PREFERRED, 0x2, -ENOENT, PS_FIT_NEAREST, 1, 1, 0 },
		{ PS_MPOL_PREFERRED, 0x80, -ENOENT, PS_FIT_LOCAL, 7, 1, 0 },
		{ PS_MPOL_PREFERRED, 0x5, 0, PS_FIT_EXACT, -1, 0, 1 },
		{ PS_MPOL_LOCAL, 0, 0, PS_FIT_EXACT, -1, 0, 0 },
		{ PS_MPOL_DEFAULT, 0, 0, PS_FIT_EXACT, -1, 0, 0 },
	};
	static const struct fit_case on_table[] = {
		{ PS_MPOL_BIND, 0x3, 0, PS_FIT_EXACT, -1, 0, 2 },
		{ PS_MPOL_BIND, 0x24, -ENOENT, PS_FIT_LOCAL, 2, 2, 0 },
		{ PS_MPOL_WEIGHTED_INTERLEAVE, 0x11, -ENOENT, PS_FIT_NARROWED, 4, 1, 1 },
		{ PS_MPOL_PREFERRED, 0x2, 0, PS_FIT_EXACT, -1, 0, 1 },
		{ PS_MPOL_PREFERRED, 0x4, -ENOENT, PS_FIT_LOCAL, 2, 1, 0 },
	};
	static const unsigned char two[4] = { 10, 20, 20, 10 };
	struct ps_policy_fit fit = { .rule = 99 };
	size_t i;

	fake_sysfs = memoryless_node1;
	for (i = 0; i < PS_ARRAY_SIZE(on_system); i++)
		expect_fit(&on_system[i], "system");
	cr_assert_eq(ps_numa_set_topology(2, two, NULL), 0);
	for (i = 0; i < PS_ARRAY_SIZE(on_table); i++)
		expect_fit(&on_table[i], "two nodes");
	cr_expect_eq(ps_numa_check_policy(NULL, &fit), -EINVAL);
	cr_expect_eq(fit.rule, 99, "a refused call writes nothing");
	cr_assert_eq(ps_numa_set_topology(0, NULL, NULL), 0);
	fake_sysfs = NULL;
}

struct flip_arg {
	struct ps_store *s;
	struct ps_policy *b3, *il123;
	enum ps_sync sync;
	int stop, failed;
	long lookups;
	char why[PS_TEST_WHY]; /* the first reader to fail writes it (@failed) */
};

/* Every answer is the one of the ring or of the two-node table (flip_topologies). */
static void *flip_reader(void *arg)
{
	struct flip_arg *a = arg;
	long n = 0;

	if (a->sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_online();
	while (!PSI_READ_ONCE(a->stop)) {
		int b = ps_store_lookup_node(a->s, 10, 0), il = ps_store_lookup_node(a->s, 101, 0);
		int p = ps_policy_node(a->b3, 0, 0), miss = ps_store_lookup_node(a->s, 500, 3);

		if ((b != 3 && b != 0) || (il != 3 && il != 1) || (p != 3 && p != 0) ||
				(miss != 3 && miss != 0)) {
			if (!PSI_XCHG(a->failed, 1, ACQ_REL))
				snprintf(a->why, sizeof(a->why), "answers %d %d %d %d", b, il, p, miss);
			break;
		}
		if (!(++n & 63)) {
			PSI_FETCH_ADD(a->lookups, 64, RELAXED);
			if (a->sync == PS_SYNC_RCU_QSBR)
				ps_qsbr_quiescent();
		}
	}
	if (a->sync == PS_SYNC_RCU_QSBR)
		ps_qsbr_thread_offline();
	return NULL;
}

/*
 * Lookups while another thread installs one topology after another: each
 * answer is that of one of them (the ring: BIND 3 gives 3, INTERLEAVE 1-3
 * at 101 gives 3, a miss from 3 gives 3; two nodes: 0, 1 and 0).  The
 * flips go on until the readers made their lookups.
 */
PS_PARAM_TEST(enum ps_sync, sync, ps_test_all_syncs, PS_SYNC_COUNT, topology, flip_topologies,
		.timeout = 60)
{
	static const unsigned char ring[16] = { 10, 20, 30, 20, 20, 10, 20, 30, 30, 20, 10, 20,
		20, 30, 20, 10 };
	static const unsigned char two[4] = { 10, 20, 20, 10 };
	struct flip_arg a = { .s = ps_store_create(*sync), .sync = *sync };
	long lookups = ps_test_iters(20000), i;
	pthread_t t[2];
	int k;

	cr_assert_not_null(a.s);
	a.b3 = make(PS_MPOL_BIND, 1UL << 3);
	a.il123 = make(PS_MPOL_INTERLEAVE, 0xe);
	cr_assert_eq(ps_numa_set_topology(4, ring, NULL), 0);
	cr_assert_eq(ps_store_set(a.s, 0, 100, a.b3), 0);
	cr_assert_eq(ps_store_set(a.s, 100, 200, a.il123), 0);
	for (k = 0; k < 2; k++)
		cr_assert_eq(pthread_create(&t[k], NULL, flip_reader, &a), 0);
	for (i = 0; PSI_READ_ONCE(a.lookups) < lookups &&
			!PSI_LOAD_ACQUIRE(a.failed); i++) {
		cr_assert_eq(ps_numa_set_topology(i & 1 ? 4 : 2, i & 1 ? ring : two, NULL), 0);
		if (!(i & 15))
			sched_yield(); /* one CPU: let the readers run */
	}
	PSI_WRITE_ONCE(a.stop, 1);
	for (k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	cr_expect_not(a.failed, "%s", a.why);
	cr_log_info("%s: %ld flips, %ld lookups", ps_sync_name(*sync), i, a.lookups);
	ps_store_destroy(a.s);
	ps_policy_put(a.b3);
	ps_policy_put(a.il123);
}

/*
 * Weights in the policy: on a two-node guest topology whose own weights
 * are 1:5, a policy weighted 3:1 places pages 3:1 by lookup_node (every
 * variant), each page's node a function of its index alone; a weighted
 * interleave without weights of its own follows the topology's 1:5.
 */
VARIANT_TEST(topology, weights_in_the_policy)
{
	static const unsigned char two[4] = { 10, 20, 20, 10 }, tw[2] = { 1, 5 }, w31[2] = { 3, 1 };
	unsigned long mask = 0x3;
	struct ps_policy *own = ps_policy_create_weighted(0, w31, 2);
	struct ps_policy *topo = ps_policy_create(PS_MPOL_WEIGHTED_INTERLEAVE, 0, &mask, 2);
	struct ps_store *s = ps_store_create(*sync);
	long n[2][2] = { { 0, 0 }, { 0, 0 } };
	uint64_t i, len = 10000;
	int node;

	cr_assert(own && topo && s);
	cr_assert_eq(ps_numa_set_topology(2, two, tw), 0);
	cr_assert_eq(ps_store_set(s, 1000, 1000 + len, own), 0);
	cr_assert_eq(ps_store_set(s, 50000, 50000 + len, topo), 0);
	for (i = 0; i < len; i++) {
		node = ps_store_lookup_node(s, 1000 + i, 1);
		cr_assert(node == 0 || node == 1, "page %lu: node %d", 1000 + i, node);
		cr_assert_eq(node, ps_policy_node(own, 1000 + i, 0), "page %lu", 1000 + i);
		cr_assert_eq(node, (1000 + i) % 4 < 3 ? 0 : 1, "page %lu", 1000 + i);
		n[0][node]++;
		node = ps_store_lookup_node(s, 50000 + i, 0);
		cr_assert(node == 0 || node == 1, "page %lu: node %d", 50000 + i, node);
		n[1][node]++;
	}
	/* 3:1 within 2%: node 0's share is 0.75 +- 0.02. */
	cr_expect(labs(4 * n[0][0] - 3 * (long)len) <= (long)len * 8 / 100, "3:1 placed %ld:%ld",
			n[0][0], n[0][1]);
	cr_expect(labs(6 * n[1][0] - (long)len) <= (long)len * 12 / 100, "1:5 placed %ld:%ld",
			n[1][0], n[1][1]);
	cr_assert_eq(ps_numa_set_topology(0, NULL, NULL), 0);
	ps_store_destroy(s);
	ps_policy_put(own);
	ps_policy_put(topo);
}
