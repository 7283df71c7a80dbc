// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The node topology that node lookups follow: its first load from sysfs,
 * which no lookup may wait for (a thread cancelled while it reads sysfs, a
 * parent thread reading it at fork()).
 *
 * fopen() is interposed: a thread that sets hook_stop stops inside its next
 * fopen() of a file under /sys/devices/system/node/ (the first read of the
 * topology) until the test posts hook_release.  Criterion runs every test
 * in a fresh process, so each test's first lookup loads the topology.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <polstore/numa.h>

#include "testutil.h"

#define SYSFS_NODE "/sys/devices/system/node/"

static sem_t hook_entered, hook_release;
static __thread bool hook_stop;

FILE *fopen(const char *path, const char *mode)
{
	static FILE *(*real)(const char *, const char *);

	if (!real)
		real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
	if (hook_stop && !strncmp(path, SYSFS_NODE, strlen(SYSFS_NODE))) {
		hook_stop = false;
		sem_post(&hook_entered);
		/* sem_wait() is a cancellation point. */
		while (sem_wait(&hook_release) && errno == EINTR)
			;
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
