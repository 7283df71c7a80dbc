// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * RCU_QSBR stall warnings (rcu_stall.h).
 *
 * Locks: @stall_lock covers the waits, the settings and the watchdog's
 * state; @watch_lock the registered threads.  Neither is held across a
 * grace period or a handler call, and the watchdog never holds both at
 * once, so a stall (which blocks grace periods, registrations and the
 * writers) never blocks the warning about it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE /* liburcu's qsbr internals: a reader's state from its counter */
#endif
#include <urcu/urcu-qsbr.h>

#include <polstore/rcu.h>

#include "annotate.h"
#include "rcu_reclaim.h"
#include "rcu_stall.h"

#define PSI_QSBR_STALL_DEFAULT_MS 10000UL
#define PSI_QSBR_STALL_MAX_MS 1000000000UL /* about 11 days: ns fit in 64 bits */
#define STALL_REPORTS_MAX 8 /* waits reported per round; more wait for the next */

/* A wait for a grace period, on the waiting thread's stack while it lasts. */
struct stall_wait {
	struct cds_list_head link;
	const char *who;
	pid_t tid;
	uint64_t since; /* CLOCK_MONOTONIC ns */
	uint64_t next;  /* report once it has lasted this long (ns) */
};

static pthread_mutex_t stall_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stall_cond = PTHREAD_COND_INITIALIZER;
static struct cds_list_head stall_waits = CDS_LIST_HEAD_INIT(stall_waits);
static unsigned long stall_timeout_ms = PSI_QSBR_STALL_DEFAULT_MS; /* atomic reads */
static ps_qsbr_stall_fn stall_fn;
static void *stall_arg;
static bool stall_started, stall_stop;
static bool stall_running; /* atomic: the watchdog runs its own code (psi_stall_atfork_prepare()) */
static uint64_t stall_created_ns; /* under @stall_lock: when the watchdog was created */
static pthread_t stall_thread;

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cds_list_head watch_list = CDS_LIST_HEAD_INIT(watch_list);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* POLSTORE_QSBR_STALL_MS, read once: the timeout in ms, 0 for none. */
__attribute__((constructor)) static void stall_read_env(void)
{
	const char *v = getenv("POLSTORE_QSBR_STALL_MS");
	unsigned long ms;
	char *end;

	if (!v || !*v)
		return;
	errno = 0;
	ms = strtoul(v, &end, 10);
	if (!errno && !*end && ms <= PSI_QSBR_STALL_MAX_MS)
		stall_timeout_ms = ms;
}

void psi_qsbr_watch_add(struct psi_qsbr_watch *w)
{
	pthread_mutex_lock(&watch_lock);
	cds_list_add(&w->link, &watch_list);
	pthread_mutex_unlock(&watch_lock);
}

void psi_qsbr_watch_del(struct psi_qsbr_watch *w)
{
	pthread_mutex_lock(&watch_lock);
	cds_list_del(&w->link);
	pthread_mutex_unlock(&watch_lock);
}

/* The thread's name as the kernel keeps it (pthread_setname_np()), or "". */
static void thread_name(pid_t tid, char *name, size_t len)
{
	char path[64];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, name, len - 1);
		close(fd);
	}
	if (n < 0)
		n = 0;
	name[n] = 0;
	if (n && name[n - 1] == '\n')
		name[n - 1] = 0;
}

/*
 * The registered threads that hold up the grace period in progress: online
 * (a non-zero counter) with a counter older than the grace period's.
 */
static int stalled_threads(pid_t *tids, int max)
{
	struct psi_qsbr_watch *w;
	int n = 0;

	pthread_mutex_lock(&watch_lock);
	cds_list_for_each_entry(w, &watch_list, link) {
		if (n < max && urcu_qsbr_reader_state(w->ctr) == URCU_READER_ACTIVE_OLD)
			tids[n++] = w->tid;
	}
	pthread_mutex_unlock(&watch_lock);
	return n;
}

static void stall_print(const struct ps_qsbr_stall *st)
{
	if (st->tid)
		fprintf(stderr, "polstore: rcu-qsbr stall: thread %d (%s) is online and has "
				"reported no quiescent state for %.1f s while %s (thread %d) "
				"waits for a grace period; it must call ps_qsbr_quiescent() "
				"or ps_qsbr_thread_offline()\n",
				st->tid, st->name[0] ? st->name : "?", st->seconds, st->waiter,
				st->waiter_tid);
	else
		fprintf(stderr, "polstore: rcu-qsbr stall: %s (thread %d) has waited %.1f s for "
				"a grace period; no thread polstore registered is behind (one "
				"the application registered with liburcu itself may be)\n",
				st->waiter, st->waiter_tid, st->seconds);
}

/* Without @stall_lock: one report per thread holding up each due wait. */
static void stall_report(const struct stall_wait *due, int ndue, ps_qsbr_stall_fn fn, void *arg)
{
	pid_t tids[16];
	int i, j, n = stalled_threads(tids, 16);

	for (i = 0; i < ndue; i++) {
		for (j = 0; j < (n ? n : 1); j++) {
			struct ps_qsbr_stall st = {
				.tid = n ? tids[j] : 0,
				.seconds = (double)(now_ns() - due[i].since) / 1e9,
				.waiter = due[i].who,
				.waiter_tid = due[i].tid,
			};

			if (st.tid)
				thread_name(st.tid, st.name, sizeof(st.name));
			if (fn)
				fn(&st, arg);
			else
				stall_print(&st);
		}
	}
}

static void *stall_watchdog(void *unused)
{
	(void)unused;
	/* The thread's start-up (its stack, its TLS, a sanitizer's records) is done. */
	PSI_STORE_RELEASE(stall_running, true);
	pthread_mutex_lock(&stall_lock);
	while (!stall_stop) {
		unsigned long t = PSI_READ_ONCE(stall_timeout_ms);
		struct stall_wait due[STALL_REPORTS_MAX];
		uint64_t now, wake, tns = (uint64_t)t * 1000000u;
		struct stall_wait *w;
		struct timespec ts;
		int ndue = 0;

		if (!t || cds_list_empty(&stall_waits)) {
			pthread_cond_wait(&stall_cond, &stall_lock);
			continue;
		}
		/* A wait is reported at most a quarter of the timeout late. */
		now = now_ns();
		wake = now + (tns < 4000000000u ? tns : 4000000000u) / 4;
		cds_list_for_each_entry(w, &stall_waits, link) {
			if (now - w->since >= w->next && ndue < STALL_REPORTS_MAX) {
				due[ndue++] = *w;
				/* Rate limit: again after three more timeouts of this wait. */
				w->next = now - w->since + 3 * tns;
			}
			if (w->since + w->next < wake)
				wake = w->since + w->next;
		}
		if (ndue) {
			ps_qsbr_stall_fn fn = stall_fn;
			void *arg = stall_arg;

			pthread_mutex_unlock(&stall_lock);
			stall_report(due, ndue, fn, arg);
			pthread_mutex_lock(&stall_lock);
			continue;
		}
		/* The condition variable's clock is CLOCK_REALTIME: wait the difference. */
		clock_gettime(CLOCK_REALTIME, &ts);
		wake -= now;
		ts.tv_sec += (time_t)(wake / 1000000000u);
		ts.tv_nsec += (long)(wake % 1000000000u);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&stall_cond, &stall_lock, &ts);
	}
	pthread_mutex_unlock(&stall_lock);
	return NULL;
}

/* Under @stall_lock: start the watchdog if none runs (best effort: retried by the next wait). */
static void stall_start(void)
{
	sigset_t all, old;

	if (stall_started || stall_stop)
		return;
	/* A word only ever accessed with atomics (helgrind and DRD see plain accesses). */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&stall_running, sizeof(stall_running));
	/* The application's signals are not ours to take. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	stall_created_ns = psi_reclaim_now_ns();
	stall_started = !pthread_create(&stall_thread, NULL, stall_watchdog, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void psi_qsbr_synchronize(const char *who)
{
	struct stall_wait w;

	/* Off: nothing but the grace period. */
	if (!PSI_READ_ONCE(stall_timeout_ms)) {
		urcu_qsbr_synchronize_rcu();
		return;
	}
	w.who = who;
	w.tid = gettid();
	w.since = now_ns();
	pthread_mutex_lock(&stall_lock);
	w.next = (uint64_t)stall_timeout_ms * 1000000u;
	/* The watchdog sleeps without a timeout only while no wait is listed. */
	if (cds_list_empty(&stall_waits))
		pthread_cond_signal(&stall_cond);
	cds_list_add(&w.link, &stall_waits);
	stall_start();
	pthread_mutex_unlock(&stall_lock);
	urcu_qsbr_synchronize_rcu();
	pthread_mutex_lock(&stall_lock);
	cds_list_del(&w.link);
	pthread_mutex_unlock(&stall_lock);
}

int ps_qsbr_set_stall_warning(unsigned long timeout_ms, ps_qsbr_stall_fn fn, void *arg)
{
	if (timeout_ms > PSI_QSBR_STALL_MAX_MS)
		return -EINVAL;
	pthread_mutex_lock(&stall_lock);
	PSI_WRITE_ONCE(stall_timeout_ms, timeout_ms);
	stall_fn = fn;
	stall_arg = arg;
	pthread_cond_signal(&stall_cond);
	pthread_mutex_unlock(&stall_lock);
	return 0;
}

/*
 * Before fork(): the watchdog out of its start-up.  A thread created but
 * not yet running its own code may be inside the allocator (its stack,
 * its TLS, AddressSanitizer's records of it), whose locks a child would
 * inherit held with no thread to release them: the fork waits for it,
 * but not for ever (psi_reclaim_start_overdue()).
 */
void psi_stall_atfork_prepare(void)
{
	for (;;) {
		pthread_mutex_lock(&stall_lock);
		pthread_mutex_lock(&watch_lock);
		if (!stall_started || PSI_LOAD_ACQUIRE(stall_running) ||
				psi_reclaim_start_overdue(stall_created_ns))
			break;
		pthread_mutex_unlock(&watch_lock);
		pthread_mutex_unlock(&stall_lock);
		psi_reclaim_fork_nap();
	}
}

void psi_stall_atfork_parent(void)
{
	pthread_mutex_unlock(&watch_lock);
	pthread_mutex_unlock(&stall_lock);
}

void psi_stall_atfork_child(struct psi_qsbr_watch *self)
{
	/* Only the forking thread lives on, waiting for nothing; no watchdog runs. */
	stall_started = false;
	stall_running = false;
	CDS_INIT_LIST_HEAD(&stall_waits);
	CDS_INIT_LIST_HEAD(&watch_list);
	if (self) {
		self->tid = gettid();
		cds_list_add(&self->link, &watch_list);
	}
	pthread_cond_init(&stall_cond, NULL);
	pthread_mutex_unlock(&watch_lock);
	pthread_mutex_unlock(&stall_lock);
}

/* Library unload or process exit: stop the watchdog and join it (a second at most). */
__attribute__((destructor)) static void stall_unload(void)
{
	struct timespec ts;
	bool started;

	pthread_mutex_lock(&stall_lock);
	stall_stop = true;
	started = stall_started;
	pthread_cond_signal(&stall_cond);
	pthread_mutex_unlock(&stall_lock);
	if (!started)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	(void)pthread_timedjoin_np(stall_thread, NULL, &ts);
}
