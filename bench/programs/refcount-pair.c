// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * refcount-pair: two threads pinned to CPUs 0 and 1 take and drop references
 * to one policy for 1 s, (a) by ps_store_lookup() + ps_policy_put() of a hot
 * policy in an RCU store and (b) by ps_policy_get() + ps_policy_put() of a
 * policy in no store (the atomic count), three times, interleaved.  Prints
 * thread-CPU nanoseconds per pair and the CPU the threads got (2 s when
 * they ran side by side the whole time: only then is the line shared).
 * The measurement behind docs/benchmark-history.md's "Two threads, one policy"; not
 * built by CMake:
 *
 *   cc -O2 -Iinclude -Ibuild-rel/include bench/programs/refcount-pair.c \
 *      build-rel/src/libpolstore.a -lurcu -lurcu-qsbr -lurcu-common -lnuma -lpthread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <polstore/polstore.h>

static struct ps_store *store;
static struct ps_policy *cold;
static int mode;
static int stop;

struct rank {
	long n;
	double cpu_s;
	int cpu;
};

static double thread_cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
	struct rank *r = arg;
	cpu_set_t set;
	double t0;
	long n = 0;
	int i;

	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	t0 = thread_cpu_s();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		for (i = 0; i < 1000; i++) {
			if (mode == 0) {
				struct ps_policy *p = ps_store_lookup(store, 5);

				if (!p)
					abort();
				ps_policy_put(p);
			} else {
				ps_policy_put(ps_policy_get(cold));
			}
		}
		n += 1000;
	}
	r->cpu_s = thread_cpu_s() - t0;
	r->n = n;
	return NULL;
}

int main(void)
{
	unsigned long mask = 1;
	struct ps_policy *hot = ps_policy_create(PS_MPOL_BIND, 0, &mask, 64);
	int rep, i;

	cold = ps_policy_create(PS_MPOL_BIND, 0, &mask, 64);
	store = ps_store_create(PS_SYNC_RCU);
	if (!hot || !cold || !store || ps_store_set(store, 0, 100, hot))
		return 2;
	for (rep = 0; rep < 3; rep++)
		for (mode = 0; mode < 2; mode++) {
			struct rank r[2] = { { 0, 0, 0 }, { 0, 0, 1 } };
			struct timespec second = { 1, 0 };
			pthread_t t[2];

			__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
			for (i = 0; i < 2; i++)
				pthread_create(&t[i], NULL, run, &r[i]);
			nanosleep(&second, NULL);
			__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
			for (i = 0; i < 2; i++)
				pthread_join(t[i], NULL);
			printf("%-40s %6.1f CPU ns per pair (threads' CPU %.2f s of 2 s)\n",
					mode ? "get+put, policy in no store (atomic)"
					     : "rcu lookup+put, hot policy in a store",
					(r[0].cpu_s + r[1].cpu_s) / (double)(r[0].n + r[1].n) * 1e9,
					r[0].cpu_s + r[1].cpu_s);
		}
	ps_store_destroy(store);
	ps_policy_put(hot);
	ps_policy_put(cold);
	return 0;
}
