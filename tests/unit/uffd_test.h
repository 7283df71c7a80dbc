/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the fault plane's suite share (test_uffd.c): the
 * includes, the failures injected into the library's libc calls, the fill
 * callback, the touching threads and the other helpers.
 */
#ifndef POLSTORE_TESTS_UFFD_TEST_H
#define POLSTORE_TESTS_UFFD_TEST_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(UNDER_ASAN)
#define UNDER_ASAN 1
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#include <polstore/uffd.h>

#include "testutil.h"

#define MAGIC 0x5eed0fa17ULL
#define MPOL_F_NODE_ADDR ((1 << 0) | (1 << 1)) /* MPOL_F_NODE | MPOL_F_ADDR */
#define MPOL_F_MEMS (1 << 2)		       /* MPOL_F_MEMS_ALLOWED */

enum inj_kind {
	INJ_NONE,
	INJ_ALLOC,
	INJ_THREAD,
	INJ_IOCTL,
	INJ_SYSCALL,
	INJ_OPEN,
	INJ_EPOLL,
	INJ_EVENTFD
};
/*
 * Tests that check which node the store named for each page name nodes
 * this machine may not have: a flat topology of 64 nodes makes the store
 * name them (ps_store_lookup_node() names only nodes of the topology in
 * force); the resolver still places each page where the kernel allows.
 */
#define FLAT_NODES 64
/*
 * A thread's way to touch pages: directly, or under valgrind through a
 * pipe (the kernel reads or writes the page).
 */
struct toucher {
	int pfd[2];
};
struct rec {
	int fills, resolver, node, named;
};
struct fillctx {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t npages;
	size_t psz;
	struct rec *rec;
	long by_resolver[64];
	long calls;
	/* behaviours */
	long exit_page; /* exit (1) or be cancelled (2) on the first fill of this page */
	int exit_how;
	long fail_page; /* fail this page's first @fail_times fills with -EIO */
	int fail_times;
	long pair_page; /* the first fill of this page waits for a second one */
	bool pair_entered;
	long hold_page; /* fills of this page wait until @hold_release */
	bool hold_entered, hold_release;
	long sleep_us; /* each fill sleeps this long */
	bool zero_odd; /* odd pages: PS_UFFD_FILL_ZERO */
};
struct touch_job {
	char *base;
	size_t npages, psz;
	uint64_t first_page; /* the store index of page 0 of @base */
	int nthreads, index;
	uint64_t seed;
	bool shuffle, check, zero_ok;
	long bad, efault, done;
	uint64_t *t0, *t1; /* per page: before and after its first touch by this job (optional) */
};
struct touch_one {
	const char *p;
	pthread_mutex_t lock;
	bool done;
	uint64_t v;
};

void inject_add(enum inj_kind kind, unsigned long match, long skip, long count, int err,
		bool real_first);
long inject_off(void);
void inject(enum inj_kind kind, unsigned long match, long skip, long count, int err,
		bool real_first);
size_t scaled(size_t normal, size_t least);
size_t page_size(void);
void need_uffd(void);
int nthreads(void);
int nfds(void);
int settled_threads(int want);
/*
 * @ms, the polls of a wait for another thread that a quiet machine ends
 * within a few: ten times as many under valgrind, which runs one thread
 * at a time, slowly, on a machine other tests share.
 */
static inline long wait_polls(long ms)
{
	return ps_test_on_valgrind() ? 10 * ms : ms;
}
char *region(size_t bytes, int flags);
int node_of(const void *p);
void flat_topology(void);
bool node_allowed(int node);
void toucher_open(struct toucher *t);
void toucher_close(struct toucher *t);
bool peek(struct toucher *t, const void *p, uint64_t *v);
bool kernel_peek(struct toucher *t, const void *p, uint64_t *v);
void fill_init(struct fillctx *c, size_t npages, size_t psz);
void fill_fini(struct fillctx *c);
uint64_t first_word(uint64_t page);
int test_fill(void *buf, const struct ps_uffd_fault *f, void *arg);
struct rec rec_of(struct fillctx *c, size_t p);
struct ps_uffd *plane(struct ps_store *s, int resolvers, struct fillctx *c, unsigned flags);
struct ps_uffd_stats stats(struct ps_uffd *uf, int resolver);
void *touch_main(void *arg);
long touch_all(char *base, size_t npages, size_t psz, int n, bool shuffle, bool zero_ok);
void expect_once(struct ps_uffd *uf, struct fillctx *c, long pages);
void four_ranges(struct ps_store *s, uint64_t npages);
void expect_placed(
		struct ps_store *s, char *base, struct fillctx *c, size_t npages, uint64_t covered);
void *touch_one_main(void *arg);

#endif /* POLSTORE_TESTS_UFFD_TEST_H */
