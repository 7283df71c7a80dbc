// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault plane (libpolstore_uffd) with real faults.  Every page a
 * thread touches holds what the fill callback gave (or zeros), lies on the
 * node the resolver preferred (get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)),
 * which is the node the store named when that node is allowed, and was
 * placed once: the resolvers' counts add up fault by fault (copies +
 * already-there = fills, per resolver; one copy per page).  A policy set
 * while faults are resolved shows in the pages as the policy in force at
 * some instant of each fault.  EAGAIN, EEXIST, ENOMEM and failing fills
 * (poisoned pages) are handled; unregister and destroy with faults in
 * flight return and let every touching thread go on; a resolver that
 * exits or is cancelled inside its fill is replaced; a forked child gets
 * the parent's pages and a plane it can only free.  A seccomp filter and an
 * unprivileged user are refused with a reason; failures injected at every
 * step of creation leave no descriptor, thread or block behind.
 *
 * Failures are injected by wrapping libc calls at link time (--wrap, see
 * tests/CMakeLists.txt): the library links statically into this program.
 * Under valgrind, whose scheduler holds its lock through a thread's page
 * fault, threads touch missing pages through write(2) and read(2) on a pipe
 * (a kernel access, which valgrind runs without its lock), never directly.
 * Skipped where this process may not use userfaultfd.
 */
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

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
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

/* ---- failures injected into the library's libc calls ------------------------------------ */

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

static pthread_mutex_t inj_lock = PTHREAD_MUTEX_INITIALIZER;
#define INJ_RULES 4
static struct inj_rule {
	enum inj_kind kind;
	unsigned long match; /* ioctl request or system call number; 0: any */
	long skip, left;
	int err;
	bool real_first; /* make the real call, then fail */
} inj[INJ_RULES];
static long inj_hits;

/* Also, from the next call of @kind (matching @match) on: let @skip through, fail @count with @err.
 */
static void inject_add(enum inj_kind kind, unsigned long match, long skip, long count, int err,
		bool real_first)
{
	pthread_mutex_lock(&inj_lock);
	for (int i = 0; i < INJ_RULES; i++)
		if (inj[i].kind == INJ_NONE) {
			inj[i] = (struct inj_rule){kind, match, skip, count, err, real_first};
			break;
		}
	pthread_mutex_unlock(&inj_lock);
}

/* Stop injecting; the number of failures injected. */
static long inject_off(void)
{
	long hits;

	pthread_mutex_lock(&inj_lock);
	memset(inj, 0, sizeof(inj));
	hits = inj_hits;
	inj_hits = 0;
	pthread_mutex_unlock(&inj_lock);
	return hits;
}

/* Only this rule. */
static void inject(enum inj_kind kind, unsigned long match, long skip, long count, int err,
		bool real_first)
{
	inject_off();
	inject_add(kind, match, skip, count, err, real_first);
}

/* The errno this call fails with, or 0. */
static int inj_check(enum inj_kind kind, unsigned long what, bool *real_first)
{
	int err = 0;

	pthread_mutex_lock(&inj_lock);
	for (int i = 0; i < INJ_RULES; i++) {
		struct inj_rule *r = &inj[i];

		if (r->kind != kind || (r->match && r->match != what) || r->left <= 0)
			continue;
		if (r->skip > 0) {
			r->skip--;
		} else {
			r->left--;
			inj_hits++;
			err = r->err;
			if (real_first)
				*real_first = r->real_first;
		}
		break;
	}
	pthread_mutex_unlock(&inj_lock);
	return err;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
int __real_posix_memalign(void **p, size_t align, size_t n);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __real_ioctl(int fd, unsigned long req, ...);
long __real_syscall(long n, ...);
int __real_open(const char *path, int flags, ...);
int __real_epoll_create1(int flags);
int __real_eventfd(unsigned int v, int flags);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_ioctl(int fd, unsigned long req, ...);
long __wrap_syscall(long n, ...);
int __wrap_open(const char *path, int flags, ...);
int __wrap_epoll_create1(int flags);
int __wrap_eventfd(unsigned int v, int flags);

void *__wrap_malloc(size_t n)
{
	if (inj_check(INJ_ALLOC, 0, NULL)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (inj_check(INJ_ALLOC, 0, NULL)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	if (inj_check(INJ_ALLOC, 0, NULL))
		return ENOMEM;
	return __real_posix_memalign(p, align, n);
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	int err = inj_check(INJ_THREAD, 0, NULL);

	return err ? err : __real_pthread_create(t, a, fn, arg);
}

int __wrap_ioctl(int fd, unsigned long req, ...)
{
	bool real_first = false;
	va_list ap;
	void *arg;
	int err;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	err = inj_check(INJ_IOCTL, req, &real_first);
	if (!err)
		return __real_ioctl(fd, req, arg);
	if (real_first)
		(void)__real_ioctl(fd, req, arg);
	errno = err;
	return -1;
}

long __wrap_syscall(long n, ...)
{
	long a[6];
	va_list ap;
	int err, i;

	va_start(ap, n);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	err = inj_check(INJ_SYSCALL, (unsigned long)n, NULL);
	if (err) {
		errno = err;
		return -1;
	}
	return __real_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;
	int err;

	if (flags & O_CREAT) {
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	err = inj_check(INJ_OPEN, 0, NULL);
	if (err) {
		errno = err;
		return -1;
	}
	return __real_open(path, flags, mode);
}

int __wrap_epoll_create1(int flags)
{
	int err = inj_check(INJ_EPOLL, 0, NULL);

	if (err) {
		errno = err;
		return -1;
	}
	return __real_epoll_create1(flags);
}

int __wrap_eventfd(unsigned int v, int flags)
{
	int err = inj_check(INJ_EVENTFD, 0, NULL);

	if (err) {
		errno = err;
		return -1;
	}
	return __real_eventfd(v, flags);
}

/*
 * A resolver held after it has read a fault message and before it
 * resolves it: read(2) of the userfaultfd returns, then waits while
 * @read_hold.page is set and the message names that page.  The test's own
 * reads (pipes) pass through.
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uintptr_t page; /* 0: not armed */
	size_t len;
	bool entered, release;
} read_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, false, false};

ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n);

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
	ssize_t got = __real_read(fd, buf, n);
	const struct uffd_msg *m = buf;

	if (got <= 0 || (size_t)got % sizeof(*m))
		return got;
	pthread_mutex_lock(&read_hold.lock);
	if (read_hold.page && m->event == UFFD_EVENT_PAGEFAULT &&
			m->arg.pagefault.address - read_hold.page < read_hold.len) {
		read_hold.page = 0;
		read_hold.entered = true;
		pthread_cond_broadcast(&read_hold.cond);
		while (!read_hold.release)
			pthread_cond_wait(&read_hold.cond, &read_hold.lock);
	}
	pthread_mutex_unlock(&read_hold.lock);
	return got;
}

/* ---- helpers ------------------------------------------------------------------------------ */

/* @normal, scaled down under valgrind (POLSTORE_TEST_SCALE), a multiple of 4, at least @least. */
static size_t scaled(size_t normal, size_t least)
{
	size_t n = (size_t)ps_test_iters((long)normal) & ~(size_t)3;

	return n < least ? least : n;
}

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * Under valgrind the store tests run for a locking variant and RCU_QSBR
 * (whose resolvers go online) only: the plane's code is the same for the
 * others, which the store's own suites check under valgrind.
 */
static void need_variant(enum ps_sync sync)
{
	if (RUNNING_ON_VALGRIND && sync != PS_SYNC_SPIN && sync != PS_SYNC_RCU_QSBR)
		cr_skip_test("under valgrind: spin and rcu-qsbr only");
}

static void need_uffd(void)
{
	char why[512] = "";

	if (ps_uffd_available(0, why, sizeof(why)))
		cr_skip_test("userfaultfd not available: %s", why);
}

/* Entries in a /proc directory (threads of this process, its descriptors). */
static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d, "%s", path);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int nthreads(void)
{
	return count_dir("/proc/self/task");
}

static int nfds(void)
{
	return count_dir("/proc/self/fd");
}

/* Threads of this process, once those ending have gone (a joined thread may linger a moment). */
static int settled_threads(int want)
{
	int n = nthreads();

	for (int i = 0; i < 200 && n != want; i++) {
		usleep(1000);
		n = nthreads();
	}
	return n;
}

static char *region(size_t bytes, int flags)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	return p;
}

/* The node page @p lies on (faulting it in first if it is missing). */
static int node_of(const void *p)
{
	int node = -1;

	cr_assert_eq(syscall(SYS_get_mempolicy, &node, NULL, 0UL, p, MPOL_F_NODE_ADDR), 0,
			"get_mempolicy: %s", strerror(errno));
	return node;
}

/*
 * Tests that check which node the store named for each page name nodes
 * this machine may not have: a flat topology of 64 nodes makes the store
 * name them (ps_store_lookup_node() names only nodes of the topology in
 * force); the resolver still places each page where the kernel allows.
 */
#define FLAT_NODES 64

static void flat_topology(void)
{
	static unsigned char dist[FLAT_NODES * FLAT_NODES];

	for (int i = 0; i < FLAT_NODES; i++)
		for (int j = 0; j < FLAT_NODES; j++)
			dist[i * FLAT_NODES + j] = i == j ? 10 : 20;
	cr_assert_eq(ps_numa_set_topology(FLAT_NODES, dist, NULL), 0);
}

static bool node_allowed(int node)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = {0};
	const int bits = 8 * sizeof(unsigned long);

	if (node < 0 || node >= PS_MAX_NUMNODES ||
			syscall(SYS_get_mempolicy, NULL, mask, (unsigned long)PS_MAX_NUMNODES, NULL,
					MPOL_F_MEMS))
		return false;
	return mask[node / bits] >> (node % bits) & 1;
}

/*
 * A thread's way to touch pages: directly, or under valgrind through a
 * pipe (the kernel reads or writes the page).
 */
struct toucher {
	int pfd[2];
};

static void toucher_open(struct toucher *t)
{
	TCHECK(!pipe2(t->pfd, O_CLOEXEC), "pipe2: %s", strerror(errno));
}

static void toucher_close(struct toucher *t)
{
	close(t->pfd[0]);
	close(t->pfd[1]);
}

/* The word at @p, read by a load or by the kernel; false when the kernel says EFAULT. */
static bool peek(struct toucher *t, const void *p, uint64_t *v)
{
	if (!RUNNING_ON_VALGRIND) {
		*v = *(const volatile uint64_t *)p;
		return true;
	}
	if (write(t->pfd[1], p, sizeof(*v)) != (ssize_t)sizeof(*v)) {
		TCHECK(errno == EFAULT, "write from the page: %s", strerror(errno));
		return false;
	}
	TCHECK(read(t->pfd[0], v, sizeof(*v)) == (ssize_t)sizeof(*v), "pipe read");
	return true;
}

/* Read page @p with the kernel: false when the access fails (EFAULT). */
static bool kernel_peek(struct toucher *t, const void *p, uint64_t *v)
{
	if (write(t->pfd[1], p, sizeof(*v)) != (ssize_t)sizeof(*v))
		return false;
	TCHECK(read(t->pfd[0], v, sizeof(*v)) == (ssize_t)sizeof(*v), "pipe read");
	return true;
}

/* ---- the fill callback the tests use ----------------------------------------------------- */

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

static void fill_init(struct fillctx *c, size_t npages, size_t psz)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->npages = npages;
	c->psz = psz;
	c->rec = calloc(npages, sizeof(*c->rec));
	cr_assert_not_null(c->rec);
	c->exit_page = c->fail_page = c->pair_page = c->hold_page = -1;
}

static void fill_fini(struct fillctx *c)
{
	free(c->rec);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

static uint64_t first_word(uint64_t page)
{
	return MAGIC ^ page;
}

static int test_fill(void *buf, const struct ps_uffd_fault *f, void *arg)
{
	struct fillctx *c = arg;
	int ret = 0;

	TCHECK(f->page < c->npages, "page %llu", (unsigned long long)f->page);
	TCHECK(((uintptr_t)f->addr & (c->psz - 1)) == 0, "unaligned %p", f->addr);
	TCHECK(f->resolver >= 0 && f->resolver < 64, "resolver %d", f->resolver);
	if (c->sleep_us)
		usleep((useconds_t)c->sleep_us);
	pthread_mutex_lock(&c->lock);
	c->calls++;
	c->rec[f->page].fills++;
	c->rec[f->page].resolver = f->resolver;
	c->rec[f->page].node = f->node;
	c->rec[f->page].named = f->named_node;
	c->by_resolver[f->resolver]++;
	if ((long)f->page == c->pair_page) {
		if (!c->pair_entered) {
			uint64_t until = ps_test_now_ns() + 10000000000ULL;

			c->pair_entered = true;
			pthread_cond_broadcast(&c->cond);
			while (c->rec[f->page].fills < 2 && ps_test_now_ns() < until) {
				pthread_mutex_unlock(&c->lock);
				usleep(1000);
				pthread_mutex_lock(&c->lock);
			}
		}
	}
	if ((long)f->page == c->hold_page) {
		c->hold_entered = true;
		pthread_cond_broadcast(&c->cond);
		while (!c->hold_release)
			pthread_cond_wait(&c->cond, &c->lock);
	}
	if ((long)f->page == c->fail_page && c->fail_times > 0) {
		c->fail_times--;
		ret = -EIO;
	}
	if ((long)f->page == c->exit_page && c->exit_how) {
		int how = c->exit_how;

		c->exit_how = 0;
		pthread_mutex_unlock(&c->lock);
		if (how == 1)
			pthread_exit(NULL);
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		pthread_cancel(pthread_self());
		pthread_testcancel();
		TCHECK(0, "not cancelled");
	}
	if (c->zero_odd && (f->page & 1))
		ret = PS_UFFD_FILL_ZERO;
	pthread_mutex_unlock(&c->lock);
	if (ret)
		return ret;
	memset(buf, 0xa5, c->psz);
	((uint64_t *)buf)[0] = first_word(f->page);
	((uint64_t *)((char *)buf + c->psz))[-1] = ~f->page;
	return 0;
}

/* What the fills recorded for page @p (the resolvers write it under the lock). */
static struct rec rec_of(struct fillctx *c, size_t p)
{
	struct rec r;

	pthread_mutex_lock(&c->lock);
	r = c->rec[p];
	pthread_mutex_unlock(&c->lock);
	return r;
}

static void fill_wait(struct fillctx *c, bool *flag)
{
	pthread_mutex_lock(&c->lock);
	while (!*flag)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

static void fill_release(struct fillctx *c)
{
	pthread_mutex_lock(&c->lock);
	c->hold_release = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static struct ps_uffd *plane(struct ps_store *s, int resolvers, struct fillctx *c, unsigned flags)
{
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	char why[512] = "";
	struct ps_uffd *uf;

	a.resolvers = resolvers;
	a.flags = flags;
	if (c) {
		a.fill = test_fill;
		a.fill_arg = c;
		a.page_size = c->psz;
	}
	uf = ps_uffd_create(s, &a, why, sizeof(why));
	cr_assert_not_null(uf, "ps_uffd_create: %s (%s)", strerror(errno), why);
	return uf;
}

static struct ps_uffd_stats stats(struct ps_uffd *uf, int resolver)
{
	struct ps_uffd_stats st;

	cr_assert_eq(ps_uffd_stats(uf, resolver, &st), 0);
	return st;
}

/* ---- touching threads -------------------------------------------------------------------- */

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

/* Touch every page of the job (all of them, in this thread's order), checking the content. */
static void *touch_main(void *arg)
{
	struct touch_job *j = arg;
	struct toucher t;
	size_t *order = malloc(j->npages * sizeof(*order));
	uint64_t rnd = j->seed | 1;

	TCHECK(order, "malloc");
	toucher_open(&t);
	for (size_t i = 0; i < j->npages; i++)
		order[i] = i;
	if (j->shuffle)
		for (size_t i = j->npages - 1; i > 0; i--) {
			size_t k = ps_test_rand(&rnd) % (i + 1), x = order[i];

			order[i] = order[k];
			order[k] = x;
		}
	for (size_t i = (size_t)j->index; i < j->npages; i += (size_t)j->nthreads) {
		size_t pg = order[i];
		char *p = j->base + pg * j->psz;
		uint64_t v, w = 0, t0 = ps_test_now_ns();

		if (!peek(&t, p, &v)) {
			j->efault++;
			continue;
		}
		if (j->t0) {
			j->t0[pg] = t0;
			j->t1[pg] = ps_test_now_ns();
		}
		if (!j->check)
			continue;
		if (v == first_word(j->first_page + pg)) {
			w = *(const volatile uint64_t *)(p + j->psz - sizeof(w));
			if (w != ~(j->first_page + pg))
				j->bad++;
		} else if (!(v == 0 && j->zero_ok)) {
			j->bad++;
		}
		j->done++;
	}
	toucher_close(&t);
	free(order);
	return NULL;
}

/*
 * @n threads touch pages [0, @npages) of @base: with @shuffle each touches
 * every page in its own order (so faults meet on pages), else page i goes
 * to thread i % n.  Returns the pages with wrong content.
 */
static long touch_all(char *base, size_t npages, size_t psz, int n, bool shuffle, bool zero_ok)
{
	struct touch_job *j = calloc((size_t)n, sizeof(*j));
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	long bad = 0;

	cr_assert(j && t);
	for (int i = 0; i < n; i++) {
		j[i] = (struct touch_job){.base = base,
				.npages = npages,
				.psz = psz,
				.nthreads = shuffle ? 1 : n,
				.index = shuffle ? 0 : i,
				.seed = 1000 + (uint64_t)i,
				.shuffle = shuffle,
				.check = true,
				.zero_ok = zero_ok};
	}
	ps_test_spawn(t, n, touch_main, j, sizeof(*j));
	ps_test_join(t, n);
	for (int i = 0; i < n; i++) {
		bad += j[i].bad;
		cr_expect_eq(j[i].efault, 0);
	}
	free(j);
	free(t);
	return bad;
}

/*
 * Every page placed once, every fill accounted for: per resolver, fills =
 * copies + already-there + errors; over all, one copy per page (or zeros
 * for the zero-filled ones), and every fault message read led to one of
 * those outcomes.  Messages of faults that met on a page may still be
 * read after their threads went on (the page is there: EEXIST), so the
 * per-resolver sums are compared until one pass finds them all equal.
 */
static void expect_once(struct ps_uffd *uf, struct fillctx *c, long pages)
{
	struct ps_uffd_stats all;
	int nres = ps_uffd_resolvers(uf), bad = -1;
	long copies = 0, fills = 0;
	uint64_t until = ps_test_now_ns() + 20000000000ULL;

	do {
		if (bad >= 0)
			usleep(1000);
		bad = -1;
		copies = 0;
		for (int i = 0; i < nres && bad < 0; i++) {
			struct ps_uffd_stats st = stats(uf, i);

			pthread_mutex_lock(&c->lock);
			fills = c->by_resolver[i];
			pthread_mutex_unlock(&c->lock);
			if ((long)(st.copies + st.zeros + st.exists + st.fill_errors + st.errors) !=
					fills)
				bad = i;
			copies += (long)(st.copies + st.zeros);
		}
	} while (bad >= 0 && ps_test_now_ns() < until);
	cr_expect_eq(bad, -1, "resolver %d: fills and outcomes never agree", bad);
	cr_expect_eq(copies, pages, "%ld pages placed for %ld pages", copies, pages);
	all = stats(uf, -1);
	cr_expect_eq(all.faults, all.copies + all.zeros + all.exists + all.fill_errors +
						 all.errors + all.dropped);
	cr_expect_eq(all.dropped, 0);
	cr_expect_eq(all.errors, 0);
	pthread_mutex_lock(&c->lock);
	for (long p = 0; p < pages; p++)
		cr_expect_geq(c->rec[p].fills, 1, "page %ld never filled", p);
	pthread_mutex_unlock(&c->lock);
}

/* The policies a store gets: preferred, bound, interleaved, none; answers independent of the CPU.
 */
static void four_ranges(struct ps_store *s, uint64_t npages)
{
	unsigned long all[PS_NODEMASK_WORDS] = {0}, one[PS_NODEMASK_WORDS] = {0};
	struct ps_policy *pref, *bind, *il;
	uint64_t q = npages / 4;
	int first = -1;

	for (int n = 0; n < PS_MAX_NUMNODES; n++)
		if (node_allowed(n)) {
			all[n / (8 * sizeof(long))] |= 1UL << (n % (8 * sizeof(long)));
			if (first < 0)
				first = n;
		}
	cr_assert_geq(first, 0);
	one[first / (8 * sizeof(long))] = 1UL << (first % (8 * sizeof(long)));
	pref = ps_policy_create(PS_MPOL_PREFERRED, 0, one, PS_MAX_NUMNODES);
	bind = ps_policy_create(PS_MPOL_BIND, 0, one, PS_MAX_NUMNODES);
	il = ps_policy_create(PS_MPOL_INTERLEAVE, 0, all, PS_MAX_NUMNODES);
	cr_assert(pref && bind && il);
	cr_assert_eq(ps_store_set(s, 0, q, pref), 0);
	cr_assert_eq(ps_store_set(s, q, 2 * q, bind), 0);
	cr_assert_eq(ps_store_set(s, 2 * q, 3 * q, il), 0);
	ps_policy_put(pref);
	ps_policy_put(bind);
	ps_policy_put(il);
}

/*
 * Each page lies where its fill said, and the store named that node: for
 * a page a policy covers, the store's answer (independent of the CPU for
 * four_ranges()); for the others, a node this process may use.
 */
static void expect_placed(
		struct ps_store *s, char *base, struct fillctx *c, size_t npages, uint64_t covered)
{
	for (size_t p = 0; p < npages; p++) {
		const struct rec *r = &c->rec[p];
		int node = node_of(base + p * c->psz);

		if (r->node >= 0)
			cr_expect_eq(node, r->node, "page %zu on node %d, preferred %d", p, node,
					r->node);
		if (node_allowed(r->named))
			cr_expect_eq(r->node, r->named, "page %zu: named %d, placed on %d", p,
					r->named, r->node);
		if (s && p < covered)
			cr_expect_eq(r->named, ps_store_lookup_node(s, p, r->named),
					"page %zu: named %d", p, r->named);
		else
			cr_expect(node_allowed(r->named), "page %zu: local node %d", p, r->named);
	}
}

/* ---- tests --------------------------------------------------------------------------------- */

Test(uffd, available)
{
	char why[512] = "";

	cr_expect_eq(ps_uffd_available(PS_UFFD_ALL_FLAGS + 1, why, sizeof(why)), -EINVAL);
	need_uffd();
	cr_expect_eq(ps_uffd_available(0, NULL, 0), 0);
	cr_expect_eq(ps_uffd_available(PS_UFFD_USER_MODE_ONLY, why, sizeof(why)), 0, "%s", why);
}

/* Zero pages by default, each on the node its policy names (or the local node without one). */
VARIANT_TEST(uffd, zero_pages_placed, .timeout = 60)
{
	const size_t n = scaled(64, 16), psz = page_size();
	struct ps_store *s;
	struct ps_uffd *uf;
	struct ps_uffd_stats st;
	char *base;

	need_uffd();
	need_variant(*sync);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	four_ranges(s, n);
	uf = plane(s, 2, NULL, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	cr_expect_eq(touch_all(base, n, psz, 2, false, true), 0);
	for (size_t p = 0; p < n; p++) {
		int node = node_of(base + p * psz);

		cr_expect(node_allowed(node), "page %zu on node %d", p, node);
		if (p < 3 * n / 4)
			cr_expect_eq(node, ps_store_lookup_node(s, p, node), "page %zu", p);
		cr_expect_eq(*(uint64_t *)(base + p * psz), 0);
	}
	st = stats(uf, -1);
	cr_expect_eq(st.zeros, n);
	cr_expect_eq(st.copies, 0);
	cr_expect_eq(st.faults, st.zeros + st.exists);
	cr_expect_eq(st.fallbacks, 0);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	ps_store_destroy(s);
}

/*
 * Eight threads (four under valgrind) each touch every page in their own order, so faults on one
 * page meet: every page holds its fill, is placed once, where named.
 */
VARIANT_TEST(uffd, fill_from_many_threads, .timeout = 120)
{
	const size_t n = scaled(128, 32), psz = page_size();
	const int nt = RUNNING_ON_VALGRIND ? 4 : 8;
	struct fillctx c;
	struct ps_store *s;
	struct ps_uffd *uf;
	char *base;

	need_uffd();
	need_variant(*sync);
	fill_init(&c, n, psz);
	s = ps_store_create(*sync);
	cr_assert_not_null(s);
	four_ranges(s, n);
	uf = plane(s, 3, &c, PS_UFFD_TIMING);
	cr_expect_eq(ps_uffd_resolvers(uf), 3);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	cr_expect_eq(touch_all(base, n, psz, nt, true, false), 0);
	expect_once(uf, &c, (long)n);
	pthread_mutex_lock(&c.lock);
	expect_placed(s, base, &c, n, 3 * n / 4);
	pthread_mutex_unlock(&c.lock);
	cr_expect_gt(stats(uf, -1).lookup_ns, 0);
	cr_expect_geq(stats(uf, -1).resolve_ns, stats(uf, -1).lookup_ns);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	ps_store_destroy(s);
	fill_fini(&c);
}

/* A plane without a store: every page on the fixed node, or on the local one. */
Test(uffd, fixed_and_local_node, .timeout = 60)
{
	const size_t n = 16, psz = page_size();
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	struct fillctx c;
	struct ps_uffd *uf;
	struct ps_store *empty;
	char *base;
	int first = 0;

	need_uffd();
	while (!node_allowed(first))
		first++;
	for (int round = 0; round < 3; round++) {
		fill_init(&c, n, psz);
		a.fill = test_fill;
		a.fill_arg = &c;
		a.node = round == 0 ? first : -1;
		empty = round == 2 ? ps_store_create(PS_SYNC_RCU) : NULL;
		uf = ps_uffd_create(empty, &a, NULL, 0);
		cr_assert_not_null(uf);
		base = region(n * psz, MAP_PRIVATE);
		cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
		cr_expect_eq(touch_all(base, n, psz, 1, false, false), 0);
		for (size_t p = 0; p < n; p++) {
			struct rec r = rec_of(&c, p);

			if (round == 0)
				cr_expect_eq(r.named, first);
			cr_expect(node_allowed(r.named), "round %d page %zu: node %d", round, p,
					r.named);
			cr_expect_eq(r.node, r.named);
			cr_expect_eq(node_of(base + p * psz), r.node);
		}
		expect_once(uf, &c, (long)n);
		ps_uffd_destroy(uf);
		ps_store_destroy(empty);
		munmap(base, n * psz);
		fill_fini(&c);
	}
}

/*
 * Two faults on one page, each read by its own resolver while the first
 * fill waits for the second: one copy lands, the other finds the page
 * there (EEXIST) and wakes its thread.
 */
Test(uffd, same_page_two_resolvers, .timeout = 60)
{
	const size_t psz = page_size();
	struct touch_job j[2];
	pthread_t t[2];
	struct fillctx c;
	struct ps_uffd *uf;
	struct ps_uffd_stats st;
	char *base;

	need_uffd();
	fill_init(&c, 1, psz);
	c.pair_page = 0;
	uf = plane(NULL, 2, &c, 0);
	base = region(psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, psz, 0), 0);
	for (int i = 0; i < 2; i++)
		j[i] = (struct touch_job){.base = base,
				.npages = 1,
				.psz = psz,
				.nthreads = 1,
				.check = true};
	ps_test_spawn(&t[0], 1, touch_main, &j[0], 0);
	fill_wait(&c, &c.pair_entered);
	ps_test_spawn(&t[1], 1, touch_main, &j[1], 0);
	ps_test_join(t, 2);
	cr_expect_eq(j[0].bad + j[1].bad, 0);
	st = stats(uf, -1);
	cr_expect_eq(st.faults, 2);
	cr_expect_eq(st.copies, 1);
	cr_expect_eq(st.exists, 1);
	cr_expect_eq(rec_of(&c, 0).fills, 2);
	cr_expect_eq(stats(uf, 0).faults, 1);
	cr_expect_eq(stats(uf, 1).faults, 1);
	ps_uffd_destroy(uf);
	munmap(base, psz);
	fill_fini(&c);
}

/* One plane, four pages, an injected failure of UFFDIO_COPY: the pages still hold their fill. */
static struct ps_uffd_stats copy_with(int err, long times, bool real_first, long *hits)
{
	const size_t n = 4, psz = page_size();
	struct ps_uffd_stats st;
	struct fillctx c;
	struct ps_uffd *uf;
	char *base;

	fill_init(&c, n, psz);
	uf = plane(NULL, 1, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	inject(INJ_IOCTL, UFFDIO_COPY, 1, times, err, real_first);
	cr_expect_eq(touch_all(base, n, psz, 1, false, false), 0);
	*hits = inject_off();
	st = stats(uf, -1);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	fill_fini(&c);
	return st;
}

Test(uffd, eagain_retried, .timeout = 60)
{
	struct ps_uffd_stats st;
	long hits;

	need_uffd();
	st = copy_with(EAGAIN, 3, false, &hits);
	cr_expect_eq(hits, 3);
	cr_expect_eq(st.retries, 3);
	cr_expect_eq(st.copies, 4);
	cr_expect_eq(st.faults, 4);
}

/* EEXIST with the page not there (the thread faults again) and with it there. */
Test(uffd, eexist_woken, .timeout = 60)
{
	struct ps_uffd_stats st;
	long hits;

	need_uffd();
	st = copy_with(EEXIST, 1, false, &hits);
	cr_expect_eq(hits, 1);
	cr_expect_eq(st.exists, 1);
	cr_expect_eq(st.copies, 4);
	cr_expect_eq(st.faults, 5);
	st = copy_with(EEXIST, 1, true, &hits);
	cr_expect_eq(hits, 1);
	cr_expect_eq(st.exists, 1);
	cr_expect_eq(st.copies, 3);
	cr_expect_eq(st.faults, 4);
}

Test(uffd, enomem_faults_again, .timeout = 60)
{
	struct ps_uffd_stats st;
	long hits;

	need_uffd();
	st = copy_with(ENOMEM, 2, false, &hits);
	cr_expect_eq(hits, 2);
	cr_expect_eq(st.errors, 2);
	cr_expect_eq(st.copies, 4);
	cr_expect_eq(st.faults, 6);
}

static bool kernel_has_poison(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	cr_assert_eq(uname(&u), 0);
	sscanf(u.release, "%d.%d", &major, &minor);
	return major > 6 || (major == 6 && minor >= 6); /* UFFDIO_POISON */
}

/*
 * A fill that fails: the page is poisoned (a kernel access fails with
 * EFAULT, a load raises SIGBUS), or on a kernel without UFFDIO_POISON the
 * thread faults again until the fill gives the content.
 */
Test(uffd, fill_error, .timeout = 60)
{
	const size_t n = 4, psz = page_size();
	bool poison = kernel_has_poison();
	struct toucher t;
	struct fillctx c;
	struct ps_uffd *uf;
	uint64_t v = 0;
	char *base;
	pid_t pid;
	int status;

	need_uffd();
	fill_init(&c, n, psz);
	c.fail_page = 1;
	c.fail_times = 3;
	uf = plane(NULL, 1, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	toucher_open(&t);
	cr_expect(kernel_peek(&t, base, &v));
	cr_expect_eq(v, first_word(0));
	if (poison) {
		cr_expect_not(kernel_peek(&t, base + psz, &v), "a poisoned page reads");
		cr_expect_eq(stats(uf, -1).fill_errors, 1);
		if (!RUNNING_ON_VALGRIND) {
			pid = fork();
			cr_assert_geq(pid, 0);
			if (!pid) {
				signal(SIGBUS, SIG_DFL); /* a sanitizer's handler would exit instead
							  */
				v = *(volatile uint64_t *)(base + psz);
				_exit(0);
			}
			cr_assert_eq(waitpid(pid, &status, 0), pid);
			cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS, "status %#x",
					status);
		}
	} else {
		cr_expect(kernel_peek(&t, base + psz, &v));
		cr_expect_eq(v, first_word(1));
		cr_expect_eq(stats(uf, -1).fill_errors, 3);
	}
	cr_expect(kernel_peek(&t, base + 2 * psz, &v));
	cr_expect_eq(v, first_word(2));
	toucher_close(&t);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	fill_fini(&c);
}

/*
 * A writer gives the whole region a new PREFERRED policy again and again,
 * naming node v for version v (most of them nodes this machine lacks:
 * those pages go to the local node).  The node each fault was placed by
 * is the policy of a version in force at some instant of that fault:
 * between its touch and its return.
 */
struct version_writer {
	struct ps_store *s;
	uint64_t npages;
	int versions;
	uint64_t *begin, *end; /* per version: before and after its set */
	int done;	       /* versions set */
	bool stop;
	pthread_mutex_t lock;
};

static void *version_main(void *arg)
{
	struct version_writer *w = arg;

	for (int v = 0; v < w->versions; v++) {
		unsigned long m[PS_NODEMASK_WORDS] = {0};
		struct ps_policy *pol;
		bool stop;

		m[v / (8 * sizeof(long))] = 1UL << (v % (8 * sizeof(long)));
		pol = ps_policy_create(PS_MPOL_PREFERRED, 0, m, PS_MAX_NUMNODES);
		TCHECK(pol, "policy %d", v);
		w->begin[v] = ps_test_now_ns();
		TCHECK(!ps_store_set(w->s, 0, w->npages, pol), "set");
		w->end[v] = ps_test_now_ns();
		ps_policy_put(pol);
		pthread_mutex_lock(&w->lock);
		w->done = v + 1;
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			break;
		usleep(50);
	}
	return NULL;
}

VARIANT_TEST(uffd, policy_changes_while_resolving, .timeout = 120)
{
	const size_t n = scaled(256, 48), psz = page_size();
	/*
	 * Version v prefers node v: one version per node of the topology, or
	 * the store would name another node for versions past the last one.
	 */
	const int nt = 4, versions = FLAT_NODES;
	struct version_writer w = {.npages = n, .versions = versions};
	uint64_t *t0 = calloc(n, sizeof(*t0)), *t1 = calloc(n, sizeof(*t1));
	struct touch_job j[4];
	pthread_t wt, tt[4];
	struct fillctx c;
	struct ps_uffd *uf;
	char *base;
	size_t disallowed = 0;
	int last;

	need_uffd();
	need_variant(*sync);
	flat_topology();
	cr_assert(t0 && t1);
	fill_init(&c, n, psz);
	w.begin = calloc((size_t)versions, sizeof(uint64_t));
	w.end = calloc((size_t)versions, sizeof(uint64_t));
	cr_assert(w.begin && w.end);
	pthread_mutex_init(&w.lock, NULL);
	w.s = ps_store_create(*sync);
	cr_assert_not_null(w.s);
	uf = plane(w.s, 2, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	ps_test_spawn(&wt, 1, version_main, &w, 0);
	/* Touch once a policy covers the region: every fault then names a version. */
	for (int done = 0; !done;) {
		pthread_mutex_lock(&w.lock);
		done = w.done;
		pthread_mutex_unlock(&w.lock);
		if (!done)
			usleep(100);
	}
	for (int i = 0; i < nt; i++)
		j[i] = (struct touch_job){.base = base,
				.npages = n,
				.psz = psz,
				.nthreads = nt,
				.index = i,
				.check = true,
				.t0 = t0,
				.t1 = t1};
	ps_test_spawn(tt, nt, touch_main, j, sizeof(j[0]));
	ps_test_join(tt, nt);
	pthread_mutex_lock(&w.lock);
	w.stop = true;
	pthread_mutex_unlock(&w.lock);
	ps_test_join(&wt, 1);
	last = w.done - 1;
	for (int i = 0; i < nt; i++)
		cr_expect_eq(j[i].bad, 0);
	pthread_mutex_lock(&c.lock);
	for (size_t p = 0; p < n; p++) {
		const struct rec *r = &c.rec[p];
		int v = r->named;

		cr_expect_eq(r->fills, 1, "page %zu", p);
		cr_assert(v >= 0 && v <= last, "page %zu: node %d, %d versions set", p, v,
				last + 1);
		cr_expect_leq(w.begin[v], t1[p], "page %zu: version %d set after its fault", p, v);
		if (v < last)
			cr_expect_geq(w.end[v + 1], t0[p],
					"page %zu: version %d replaced before its fault (%d versions set)",
					p, v, last + 1);
		if (node_allowed(v)) {
			cr_expect_eq(r->node, v, "page %zu", p);
		} else {
			cr_expect(node_allowed(r->node), "page %zu: fallback to node %d", p,
					r->node);
			disallowed++;
		}
		cr_expect_eq(node_of(base + p * psz), r->node);
	}
	pthread_mutex_unlock(&c.lock);
	/* A fault under a version whose node this machine lacks fell back. */
	cr_expect_eq(stats(uf, -1).fallbacks > 0, disallowed > 0, "%zu pages named a node not allowed",
			disallowed);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	ps_store_destroy(w.s);
	pthread_mutex_destroy(&w.lock);
	free(w.begin);
	free(w.end);
	free(t0);
	free(t1);
	fill_fini(&c);
}

/*
 * Threads touch a large region while fills are slow; the plane goes away
 * (destroy, or unregister of the region) under them.  Every thread gets to
 * its last page: each page holds its fill or, once the kernel serves it,
 * zeros.  After unregister returns no fill runs for the region, and the
 * plane serves a new one.
 */
static void teardown_under_faults(bool destroy)
{
	const size_t n = scaled(1024, 192), psz = page_size();
	const int nt = 6;
	struct touch_job j[6];
	pthread_t t[6];
	struct fillctx c;
	struct ps_uffd *uf;
	long calls, placed = 0, zero = 0;
	char *base;
	int threads0 = nthreads(), fds0 = nfds();

	fill_init(&c, n, psz);
	c.sleep_us = 100;
	uf = plane(NULL, 2, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	for (int i = 0; i < nt; i++)
		j[i] = (struct touch_job){.base = base,
				.npages = n,
				.psz = psz,
				.nthreads = nt,
				.index = i,
				.check = true,
				.zero_ok = true};
	ps_test_spawn(t, nt, touch_main, j, sizeof(j[0]));
	for (int k = 0; k < 1000; k++) {
		pthread_mutex_lock(&c.lock);
		calls = c.calls;
		pthread_mutex_unlock(&c.lock);
		if (calls >= 20)
			break;
		usleep(1000);
	}
	if (destroy) {
		ps_uffd_destroy(uf);
	} else {
		cr_assert_eq(ps_uffd_unregister(uf, base, n * psz), 0);
		cr_expect_eq(ps_uffd_unregister(uf, base, n * psz), -ENOENT);
		pthread_mutex_lock(&c.lock);
		calls = c.calls;
		pthread_mutex_unlock(&c.lock);
	}
	ps_test_join(t, nt);
	for (int i = 0; i < nt; i++) {
		cr_expect_eq(j[i].bad, 0);
		cr_expect_eq(j[i].done, (long)((n - (size_t)i + nt - 1) / nt));
	}
	for (size_t p = 0; p < n; p++) {
		uint64_t v = *(uint64_t *)(base + p * psz);

		placed += v == first_word(p);
		zero += v == 0;
	}
	cr_expect_eq(placed + zero, (long)n);
	cr_expect_gt(placed, 0);
	cr_expect_gt(zero, 0, "every page placed before the teardown");
	if (!destroy) {
		char *more = region(4 * psz, MAP_PRIVATE);
		struct fillctx *cc = &c;

		pthread_mutex_lock(&cc->lock);
		cr_expect_eq(cc->calls, calls, "fills after unregister returned");
		pthread_mutex_unlock(&cc->lock);
		/* The plane goes on with another region (store indices 0 .. 3 again). */
		cr_assert_eq(ps_uffd_register(uf, more, 4 * psz, 0), 0);
		cr_expect_eq(touch_all(more, 4, psz, 1, false, false), 0);
		ps_uffd_destroy(uf);
		munmap(more, 4 * psz);
	}
	cr_expect_eq(settled_threads(threads0), threads0);
	cr_expect_eq(nfds(), fds0);
	munmap(base, n * psz);
	fill_fini(&c);
}

Test(uffd, destroy_with_faults_in_flight, .timeout = 120)
{
	need_uffd();
	teardown_under_faults(true);
}

Test(uffd, unregister_with_faults_in_flight, .timeout = 120)
{
	need_uffd();
	teardown_under_faults(false);
}

/*
 * A fill that ends its thread (pthread_exit(), or a cancellation it
 * enabled): the fault it held is handed back, a new resolver takes over,
 * and every page is placed.  With one resolver nobody else could.
 */
static void resolver_ends(int how, int resolvers)
{
	const size_t n = 16, psz = page_size();
	struct fillctx c;
	struct ps_uffd *uf;
	int threads0 = nthreads();

	fill_init(&c, n, psz);
	c.exit_page = 5;
	c.exit_how = how;
	uf = plane(NULL, resolvers, &c, 0);
	{
		char *base = region(n * psz, MAP_PRIVATE);

		cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
		cr_expect_eq(touch_all(base, n, psz, 2, false, false), 0);
		/* The ending thread hands its fault back before it starts its successor. */
		for (int i = 0; i < 10000 && stats(uf, -1).restarts == 0; i++)
			usleep(1000);
		cr_expect_eq(stats(uf, -1).restarts, 1);
		cr_expect_eq(rec_of(&c, 5).fills, 2);
		cr_expect_eq(settled_threads(threads0 + resolvers), threads0 + resolvers);
		/* The replacement serves the next faults too. */
		cr_assert_eq(ps_uffd_unregister(uf, base, n * psz), 0);
		cr_assert_eq(madvise(base, n * psz, MADV_DONTNEED), 0);
		cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
		cr_expect_eq(touch_all(base, n, psz, 1, false, false), 0);
		munmap(base, n * psz);
	}
	ps_uffd_destroy(uf);
	cr_expect_eq(settled_threads(threads0), threads0);
	fill_fini(&c);
}

Test(uffd, resolver_exits_in_fill, .timeout = 60)
{
	need_uffd();
	resolver_ends(1, 1);
	resolver_ends(1, 3);
}

Test(uffd, resolver_cancelled_in_fill, .timeout = 60)
{
	need_uffd();
	resolver_ends(2, 1);
	resolver_ends(2, 2);
}

/* Touch page 9 of the region at @arg and check it (no heap: a forked child copies this thread's
 * memory without the thread). */
static void *touch_page9(void *arg)
{
	struct toucher t;
	uint64_t v = 0;

	toucher_open(&t);
	TCHECK(peek(&t, (char *)arg + 9 * page_size(), &v), "page 9");
	TCHECK(v == first_word(9), "page 9 holds %#llx", (unsigned long long)v);
	toucher_close(&t);
	return NULL;
}

/*
 * fork() with a fill in progress: the child has the parent's placed pages,
 * zeros where the parent had none (its copy of the region is not
 * registered), and a plane it can only free (without waiting for the
 * parent's resolver, which holds its lock in the child's copy).  The
 * parent's plane goes on.
 */
Test(uffd, fork_child, .timeout = 60)
{
	const size_t n = 16, psz = page_size();
	struct fillctx c;
	struct ps_uffd *uf;
	pthread_t t;
	char *base;
	pid_t pid;
	int status;

	need_uffd();
	fill_init(&c, n, psz);
	c.hold_page = 9;
	uf = plane(NULL, 1, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	cr_expect_eq(touch_all(base, 8, psz, 1, false, false), 0);
	ps_test_spawn(&t, 1, touch_page9, base, 0);
	fill_wait(&c, &c.hold_entered);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		struct ps_uffd_stats st;
		struct toucher tt;
		uint64_t v = 1;
		int bad = 0;

		for (size_t p = 0; p < 8; p++)
			bad |= *(uint64_t *)(base + p * psz) != first_word(p);
		toucher_open(&tt);
		bad |= (!peek(&tt, base + 12 * psz, &v) || v != 0) << 1;
		toucher_close(&tt);
		bad |= (ps_uffd_register(uf, base, psz, 0) != -ESRCH) << 2;
		bad |= (ps_uffd_unregister(uf, base, n * psz) != -ESRCH) << 3;
		bad |= (ps_uffd_stats(uf, -1, &st) != -ESRCH) << 4;
		bad |= (ps_uffd_resolvers(uf) != 1) << 5;
		ps_uffd_destroy(uf);
		/* Not fill_fini(): the parent's resolver waits on the condition in this copy. */
		_exit(bad);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	fill_release(&c);
	ps_test_join(&t, 1);
	cr_expect_eq(touch_all(base, n, psz, 2, false, false), 0);
	expect_once(uf, &c, (long)n);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	fill_fini(&c);
}

/* ---- creation: refused, failing, bad input ------------------------------------------------ */

/* Run @fn in a child; its exit status (0: every check passed). */
static int in_child(int (*fn)(void))
{
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (!pid)
		_exit(fn());
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child status %#x", status);
	return WEXITSTATUS(status);
}

/* A refused creation leaves no descriptor and no thread; 0, or which check failed. */
static int refused_cleanly(const char *want, int want_err)
{
	int threads0 = nthreads(), fds0 = nfds();
	char why[1024] = "";
	struct ps_uffd *uf;

	uf = ps_uffd_create(NULL, NULL, why, sizeof(why));
	if (uf)
		return 10;
	if (errno != want_err) {
		fprintf(stderr, "errno %d (%s): %s\n", errno, strerror(errno), why);
		return 11;
	}
	if (!strstr(why, want)) {
		fprintf(stderr, "no '%s' in: %s\n", want, why);
		return 12;
	}
	if (nthreads() != threads0 || nfds() != fds0)
		return 13;
	if (ps_uffd_available(0, NULL, 0) != -want_err)
		return 14;
	return 0;
}

/* userfaultfd(2) and USERFAULTFD_IOC_NEW refused with EPERM, everything else allowed. */
static int deny_by_seccomp(void)
{
	struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 1, 0),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, USERFAULTFD_IOC_NEW, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = PS_ARRAY_SIZE(f), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
			prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0))
		return 20;
	return refused_cleanly("seccomp", EPERM);
}

Test(uffd, refused_by_seccomp, .timeout = 60)
{
	need_uffd();
	cr_expect_eq(in_child(deny_by_seccomp), 0);
}

/* An unprivileged user: refused, unless only user-mode faults are asked for. */
static int as_nobody(void)
{
	const size_t psz = page_size();
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	struct toucher t;
	struct ps_uffd *uf;
	char *base;
	uint64_t v;
	int rc;

	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		return 30;
	/* The reason names the sysctl when the system call refused (valgrind has none). */
	rc = refused_cleanly(
			RUNNING_ON_VALGRIND ? "/dev/userfaultfd" : "vm.unprivileged_userfaultfd",
			EPERM);
	if (rc || RUNNING_ON_VALGRIND)
		return rc;
	a.flags = PS_UFFD_USER_MODE_ONLY;
	uf = ps_uffd_create(NULL, &a, NULL, 0);
	if (!uf)
		return 31;
	base = mmap(NULL, 2 * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED || ps_uffd_register(uf, base, 2 * psz, 0))
		return 32;
	if (*(volatile uint64_t *)base != 0)
		return 33;
	toucher_open(&t);
	if (kernel_peek(&t, base + psz, &v))
		return 34; /* a kernel access to a missing page fails */
	toucher_close(&t);
	ps_uffd_destroy(uf);
	return 0;
}

Test(uffd, refused_unprivileged, .timeout = 60)
{
	int sysctl = -1;
	FILE *f = fopen("/proc/sys/vm/unprivileged_userfaultfd", "re");

	need_uffd();
	if (f) {
		if (fscanf(f, "%d", &sysctl) != 1)
			sysctl = -1;
		fclose(f);
	}
	if (geteuid() != 0 || sysctl != 0)
		cr_skip_test("needs root and vm.unprivileged_userfaultfd=0");
	cr_expect_eq(in_child(as_nobody), 0);
}

/* Neither userfaultfd(2) nor /dev/userfaultfd (both injected): ENOSYS, and the reason. */
Test(uffd, no_userfaultfd_here)
{
	int fds0 = nfds(), threads0 = nthreads();
	char why[1024] = "";

	inject(INJ_SYSCALL, SYS_userfaultfd, 0, 2, ENOSYS, false);
	inject_add(INJ_OPEN, 0, 0, 2, ENOENT, false);
	errno = 0;
	cr_expect_null(ps_uffd_create(NULL, NULL, why, sizeof(why)));
	cr_expect_eq(errno, ENOSYS);
	cr_expect(strstr(why, "CONFIG_USERFAULTFD") &&
					strstr(why, "/dev/userfaultfd does not exist"),
			"%s", why);
	cr_expect_eq(ps_uffd_available(0, NULL, 0), -ENOSYS);
	cr_expect_eq(inject_off(), 4);
	cr_expect_eq(nfds(), fds0);
	cr_expect_eq(nthreads(), threads0);
}

/*
 * Each step of creation failing in turn (an allocation, a thread, an
 * epoll or event descriptor, the API handshake): NULL with the step's
 * errno, and no descriptor, thread or block left; then the same call
 * succeeds.  Memcheck sees the blocks.
 */
Test(uffd, create_failures_leave_nothing, .timeout = 120)
{
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	struct fillctx c;
	int threads0, fds0;
	static const struct {
		enum inj_kind kind;
		unsigned long match;
		int err, want, max;
	} steps[] = {
			{INJ_ALLOC, 0, ENOMEM, ENOMEM, 16},
			{INJ_THREAD, 0, EAGAIN, EAGAIN, 3},
			{INJ_EPOLL, 0, EMFILE, EMFILE, 3},
			{INJ_EVENTFD, 0, EMFILE, EMFILE, 1},
			{INJ_IOCTL, UFFDIO_API, EFAULT, EFAULT, 1},
	};

	need_uffd();
	fill_init(&c, 4, page_size());
	a.resolvers = 3;
	a.fill = test_fill;
	a.fill_arg = &c;
	threads0 = nthreads();
	fds0 = nfds();
	for (size_t k = 0; k < PS_ARRAY_SIZE(steps); k++) {
		int failed = 0;

		for (int skip = 0;; skip++) {
			struct ps_uffd *uf;
			char why[256] = "";
			long hits;

			cr_assert_lt(skip, 64, "step %zu never succeeds", k);
			inject(steps[k].kind, steps[k].match, skip, 1, steps[k].err, false);
			errno = 0;
			uf = ps_uffd_create(NULL, &a, why, sizeof(why));
			hits = inject_off();
			if (uf) {
				cr_expect_eq(hits, 0, "step %zu: created despite a failure", k);
				ps_uffd_destroy(uf);
				break;
			}
			failed++;
			cr_expect_eq(errno, steps[k].want, "step %zu, skip %d: errno %d (%s)", k,
					skip, errno, why);
			cr_expect_neq(why[0], 0);
			cr_expect_eq(settled_threads(threads0), threads0, "step %zu skip %d", k,
					skip);
			cr_expect_eq(nfds(), fds0, "step %zu skip %d", k, skip);
		}
		cr_expect_geq(failed, 1, "step %zu never failed", k);
		cr_expect_leq(failed, steps[k].max, "step %zu", k);
	}
	fill_fini(&c);
}

/* A kernel that refuses the faulting thread's id: the handshake again, without it. */
Test(uffd, handshake_without_thread_id, .timeout = 60)
{
	const size_t psz = page_size();
	struct fillctx c;
	struct ps_uffd *uf;
	char *base;
	int fds0;

	need_uffd();
	fds0 = nfds();
	fill_init(&c, 2, psz);
	inject(INJ_IOCTL, UFFDIO_API, 0, 1, EINVAL, false);
	uf = plane(NULL, 1, &c, 0);
	cr_expect_eq(inject_off(), 1);
	base = region(2 * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, 2 * psz, 0), 0);
	cr_expect_eq(touch_all(base, 2, psz, 1, false, false), 0);
	ps_uffd_destroy(uf);
	cr_expect_eq(nfds(), fds0);
	munmap(base, 2 * psz);
	fill_fini(&c);
}

Test(uffd, bad_input, .timeout = 60)
{
	const size_t psz = page_size();
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT, bad;
	struct ps_uffd_stats st;
	struct ps_uffd *uf, *other;
	char *base, *un;

	need_uffd();
	struct {
		const char *what;
		void (*set)(struct ps_uffd_attr *);
	} *unused = NULL;
	(void)unused;
	bad = a;
	bad.size = sizeof(a) - 1;
	errno = 0;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	cr_expect_eq(errno, EINVAL);
	bad = a;
	bad.flags = PS_UFFD_ALL_FLAGS + 1;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	bad = a;
	bad.resolvers = -1;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	bad.resolvers = PS_UFFD_MAX_RESOLVERS + 1;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	bad = a;
	bad.node = -2;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	bad.node = PS_MAX_NUMNODES;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	bad = a;
	bad.page_size = psz + 1;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	bad.page_size = 3 * psz;
	cr_expect_null(ps_uffd_create(NULL, &bad, NULL, 0));
	cr_expect_eq(errno, EINVAL);
	ps_uffd_destroy(NULL);
	cr_expect_eq(ps_uffd_resolvers(NULL), -EINVAL);
	cr_expect_eq(ps_uffd_register(NULL, NULL, psz, 0), -EINVAL);
	cr_expect_eq(ps_uffd_unregister(NULL, NULL, psz), -EINVAL);
	cr_expect_eq(ps_uffd_stats(NULL, -1, &st), -EINVAL);

	uf = ps_uffd_create(NULL, NULL, NULL, 0);
	cr_assert_not_null(uf);
	cr_expect_geq(ps_uffd_resolvers(uf), 1);
	cr_expect_eq(ps_uffd_stats(uf, -1, NULL), -EINVAL);
	cr_expect_eq(ps_uffd_stats(uf, -2, &st), -EINVAL);
	cr_expect_eq(ps_uffd_stats(uf, ps_uffd_resolvers(uf), &st), -EINVAL);
	base = region(8 * psz, MAP_PRIVATE);
	cr_expect_eq(ps_uffd_register(uf, base + 1, psz, 0), -EINVAL);
	cr_expect_eq(ps_uffd_register(uf, base, psz + 1, 0), -EINVAL);
	cr_expect_eq(ps_uffd_register(uf, base, 0, 0), -EINVAL);
	cr_expect_eq(ps_uffd_register(uf, base, 2 * psz, UINT64_MAX), -EINVAL);
	cr_expect_eq(ps_uffd_register(uf, base, 4 * psz, 0), 0);
	cr_expect_eq(ps_uffd_register(uf, base + 3 * psz, 2 * psz, 9), -EBUSY);
	cr_expect_eq(ps_uffd_register(uf, base, psz, 9), -EBUSY);
	cr_expect_eq(ps_uffd_unregister(uf, base, 2 * psz), -ENOENT);
	cr_expect_eq(ps_uffd_unregister(uf, base + psz, 3 * psz), -ENOENT);
	/* Another userfaultfd has the range: the kernel says EBUSY. */
	other = ps_uffd_create(NULL, NULL, NULL, 0);
	cr_assert_not_null(other);
	cr_expect_eq(ps_uffd_register(other, base, 4 * psz, 0), -EBUSY);
	cr_expect_eq(ps_uffd_register(other, base + 4 * psz, 4 * psz, 0), 0);
	ps_uffd_destroy(other);
	/* An unmapped range, a private file mapping: refused by the kernel. */
	un = region(2 * psz, MAP_PRIVATE);
	munmap(un, 2 * psz);
	cr_expect_eq(ps_uffd_register(uf, un, 2 * psz, 100), -EINVAL);
	{
		FILE *f = tmpfile();
		char *fm;

		cr_assert_not_null(f);
		cr_assert_eq(ftruncate(fileno(f), (off_t)psz), 0);
		fm = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(f), 0);
		cr_assert_neq(fm, MAP_FAILED);
		cr_expect_eq(ps_uffd_register(uf, fm, psz, 200), -EINVAL);
		munmap(fm, psz);
		fclose(f);
	}
	/* Allocation failure growing the region table: nothing registered. */
	for (int i = 0; i < 7; i++)
		cr_assert_eq(ps_uffd_register(uf, region(psz, MAP_PRIVATE), psz, 300 + i), 0);
	{
		char *r9 = region(psz, MAP_PRIVATE);

		inject(INJ_ALLOC, 0, 0, 1, ENOMEM, false);
		cr_expect_eq(ps_uffd_register(uf, r9, psz, 400), -ENOMEM);
		cr_expect_eq(inject_off(), 1);
		cr_expect_eq(ps_uffd_unregister(uf, r9, psz), -ENOENT);
		cr_expect_eq(ps_uffd_register(uf, r9, psz, 400), 0);
	}
	cr_expect_eq(ps_uffd_unregister(uf, base, 4 * psz), 0);
	ps_uffd_destroy(uf);
	munmap(base, 8 * psz);
}

/*
 * A plane page of two system pages: placed whole on a fault in either
 * half; after its second half is dropped, only that half is placed again.
 */
Test(uffd, page_of_two_system_pages, .timeout = 60)
{
	const size_t sys = page_size(), psz = 2 * sys, n = 4;
	struct toucher t;
	struct fillctx c;
	struct ps_uffd *uf;
	struct ps_uffd_stats st;
	uint64_t v = 0;
	char *base = region(n * psz + psz, MAP_PRIVATE);

	need_uffd();
	base = (char *)(((uintptr_t)base + psz - 1) & ~(uintptr_t)(psz - 1));
	fill_init(&c, n, psz);
	uf = plane(NULL, 1, &c, 0);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), -0);
	toucher_open(&t);
	cr_expect(kernel_peek(&t, base + psz + sys, &v)); /* second half of page 1 */
	cr_expect_eq(*(uint64_t *)(base + psz), first_word(1));
	cr_expect_eq(*(uint64_t *)(base + 2 * psz - 8), ~(uint64_t)1);
	*(uint64_t *)(base + psz) = 77;
	cr_assert_eq(madvise(base + psz + sys, sys, MADV_DONTNEED), 0);
	cr_expect(kernel_peek(&t, base + 2 * psz - 8, &v));
	cr_expect_eq(v, ~(uint64_t)1);
	cr_expect_eq(*(uint64_t *)(base + psz), 77, "the half that stayed was overwritten");
	*(uint64_t *)(base + psz) = first_word(1);
	toucher_close(&t);
	st = stats(uf, -1);
	cr_expect_eq(st.copies, 2);
	cr_expect_eq(st.exists, 0);
	cr_expect_eq(rec_of(&c, 1).fills, 2);
	cr_expect_eq(touch_all(base, n, psz, 2, false, false), 0);
	ps_uffd_destroy(uf);
	fill_fini(&c);
}

/* Shared memory: a MAP_SHARED anonymous region and a memfd. */
Test(uffd, shared_memory, .timeout = 60)
{
	const size_t n = 32, psz = page_size();
	struct fillctx c;
	struct ps_uffd *uf;
	struct ps_store *s;
	char *base;
	int fd;

	need_uffd();
	s = ps_store_create(PS_SYNC_RCU);
	cr_assert_not_null(s);
	four_ranges(s, n);
	for (int kind = 0; kind < 2; kind++) {
		fill_init(&c, n, psz);
		c.zero_odd = true;
		uf = plane(s, 2, &c, 0);
		if (kind == 0) {
			base = region(n * psz, MAP_SHARED);
		} else {
			fd = memfd_create("uffd-test", MFD_CLOEXEC);
			cr_assert_geq(fd, 0);
			cr_assert_eq(ftruncate(fd, (off_t)(n * psz)), 0);
			base = mmap(NULL, n * psz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			cr_assert_neq(base, MAP_FAILED);
			close(fd);
		}
		cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
		cr_expect_eq(touch_all(base, n, psz, 3, true, true), 0);
		for (size_t p = 1; p < n; p += 2)
			cr_expect_eq(*(uint64_t *)(base + p * psz), 0);
		expect_once(uf, &c, (long)n);
		pthread_mutex_lock(&c.lock);
		expect_placed(s, base, &c, n, 3 * n / 4);
		pthread_mutex_unlock(&c.lock);
		cr_expect_eq(stats(uf, -1).zeros, n / 2);
		ps_uffd_destroy(uf);
		munmap(base, n * psz);
		fill_fini(&c);
	}
	ps_store_destroy(s);
}

/*
 * Pages dropped (MADV_DONTNEED) fault again and are placed afresh, by the
 * policy in force then: the region's store indices start at 1000.
 */
Test(uffd, dropped_pages_fault_again, .timeout = 60)
{
	const size_t n = 8, psz = page_size();
	unsigned long m[PS_NODEMASK_WORDS] = {0};
	struct ps_policy *pol;
	struct fillctx c;
	struct ps_uffd *uf;
	struct ps_store *s;
	struct toucher t;
	char *base;
	uint64_t v;

	need_uffd();
	flat_topology();
	s = ps_store_create(PS_SYNC_SEQLOCK);
	cr_assert_not_null(s);
	fill_init(&c, 1000 + n, psz);
	uf = plane(s, 1, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 1000), 0);
	toucher_open(&t);
	for (int round = 0; round < 3; round++) {
		m[0] = 1UL << (3 + round); /* nodes this machine may lack: a fallback */
		pol = ps_policy_create(PS_MPOL_PREFERRED, 0, m, 64);
		cr_assert_not_null(pol);
		cr_assert_eq(ps_store_set(s, 1000, 1000 + n, pol), 0);
		ps_policy_put(pol);
		for (size_t p = 0; p < n; p++) {
			cr_expect(peek(&t, base + p * psz, &v));
			cr_expect_eq(v, first_word(1000 + p));
			cr_expect_eq(rec_of(&c, 1000 + p).fills, round + 1);
			cr_expect_eq(rec_of(&c, 1000 + p).named, 3 + round);
		}
		cr_assert_eq(madvise(base, n * psz, MADV_DONTNEED), 0);
	}
	toucher_close(&t);
	cr_expect_eq(stats(uf, -1).copies, 3 * n);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	ps_store_destroy(s);
	fill_fini(&c);
}

/* PS_UFFD_READ_ZEROPAGE: a read of zero content maps the zero page; a write gets a real page. */
Test(uffd, read_zeropage, .timeout = 60)
{
	const size_t n = 4, psz = page_size();
	struct ps_uffd *uf;
	struct ps_uffd_stats st;
	struct toucher t;
	char *base;
	uint64_t v = 1;

	need_uffd();
	uf = plane(NULL, 1, NULL, PS_UFFD_READ_ZEROPAGE);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	toucher_open(&t);
	cr_expect(peek(&t, base, &v));
	cr_expect_eq(v, 0);
	/* A write fault: read(2) into the page. */
	cr_assert_eq(write(t.pfd[1], "x", 1), 1);
	cr_assert_eq(read(t.pfd[0], base + psz, 1), 1);
	cr_expect_eq(base[psz], 'x');
	toucher_close(&t);
	st = stats(uf, -1);
	cr_expect_eq(st.zeros, 2);
	cr_expect_eq(st.faults, 2);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
}

/*
 * An RCU_QSBR store's resolvers are online while they work: grace periods
 * still end, while faults are resolved and after (ps_store_synchronize()
 * waits for one; the test's timeout catches a resolver that never lets go).
 */
Test(uffd, qsbr_grace_periods_end, .timeout = 60)
{
	const size_t n = scaled(256, 32), psz = page_size();
	struct touch_job j[2];
	pthread_t t[2];
	struct fillctx c;
	struct ps_store *s;
	struct ps_uffd *uf;
	char *base;
	int rounds = 0;

	need_uffd();
	fill_init(&c, n, psz);
	s = ps_store_create(PS_SYNC_RCU_QSBR);
	cr_assert_not_null(s);
	four_ranges(s, n);
	uf = plane(s, 2, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 0), 0);
	for (int i = 0; i < 2; i++)
		j[i] = (struct touch_job){.base = base,
				.npages = n,
				.psz = psz,
				.nthreads = 2,
				.index = i,
				.check = true};
	ps_test_spawn(t, 2, touch_main, j, sizeof(j[0]));
	for (;;) {
		long calls;

		four_ranges(s, n);
		cr_assert_eq(ps_store_synchronize(s), 0);
		rounds++;
		pthread_mutex_lock(&c.lock);
		calls = c.calls;
		pthread_mutex_unlock(&c.lock);
		if (calls >= (long)n || rounds > 100000)
			break;
	}
	ps_test_join(t, 2);
	cr_expect_eq(j[0].bad + j[1].bad, 0);
	/* Idle, online for a moment longer: the next grace period still ends. */
	four_ranges(s, n);
	cr_expect_eq(ps_store_synchronize(s), 0);
	expect_once(uf, &c, (long)n);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	ps_store_destroy(s);
	fill_fini(&c);
}

/* ---- a plane page partly dropped, read faults on zero content ----------------------------- */

struct touch_one {
	const char *p;
	pthread_mutex_t lock;
	bool done;
	uint64_t v;
};

static void *touch_one_main(void *arg)
{
	struct touch_one *o = arg;
	struct toucher t;
	uint64_t v = 1;

	toucher_open(&t);
	TCHECK(peek(&t, o->p, &v), "peek %p", (const void *)o->p);
	toucher_close(&t);
	pthread_mutex_lock(&o->lock);
	o->v = v;
	o->done = true;
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

/*
 * A thread reads @p; true when it was served within @ms.  When it was not,
 * @unstick(@arg) runs (it must let the thread go on) before it is joined.
 */
static bool read_within(const char *p, long ms, uint64_t *v, void (*unstick)(void *), void *arg)
{
	struct touch_one o = {.p = p, .lock = PTHREAD_MUTEX_INITIALIZER};
	pthread_t t;
	bool done = false;

	ps_test_spawn(&t, 1, touch_one_main, &o, 0);
	for (long i = 0; i < ms && !done; i++) {
		usleep(1000);
		pthread_mutex_lock(&o.lock);
		done = o.done;
		pthread_mutex_unlock(&o.lock);
	}
	if (!done)
		unstick(arg);
	ps_test_join(&t, 1);
	*v = o.v;
	return done;
}

static void destroy_plane(void *uf)
{
	ps_uffd_destroy(uf);
}

/*
 * PS_UFFD_READ_ZEROPAGE with a plane page of two system pages, one of them
 * dropped: the read of the dropped half maps the zero page there alone
 * (the whole-page zero fill finds the other half present).
 */
Test(uffd, read_zeropage_partly_present, .timeout = 60)
{
	const size_t sys = page_size(), psz = 2 * sys;
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	struct ps_uffd_stats st;
	struct ps_uffd *uf;
	struct toucher t;
	uint64_t v = 1;
	char *raw = region(3 * psz, MAP_PRIVATE), *base;
	bool served;

	need_uffd();
	base = (char *)(((uintptr_t)raw + psz - 1) & ~(uintptr_t)(psz - 1));
	a.flags = PS_UFFD_READ_ZEROPAGE;
	a.page_size = psz;
	a.resolvers = 1;
	uf = ps_uffd_create(NULL, &a, NULL, 0);
	cr_assert_not_null(uf);
	cr_assert_eq(ps_uffd_register(uf, base, 2 * psz, 0), 0);
	toucher_open(&t);
	cr_expect(kernel_peek(&t, base + sys, &v));
	cr_expect_eq(v, 0);
	toucher_close(&t);
	cr_assert_eq(madvise(base + sys, sys, MADV_DONTNEED), 0);
	served = read_within(base + sys, 3000, &v, destroy_plane, uf);
	/* Not served: the plane is destroyed, the kernel served it. */
	cr_assert(served, "the read of the dropped half was not served in 3 s");
	cr_expect_eq(v, 0);
	st = stats(uf, -1);
	cr_expect_eq(st.zeros, 2);
	cr_expect_eq(st.faults, 2);
	cr_expect_eq(st.exists, 0);
	ps_uffd_destroy(uf);
	munmap(raw, 3 * psz);
}

/* ---- what a region may cover -------------------------------------------------------------- */

/* @n pages of fresh address space, PROT_NONE: the tests map into it with MAP_FIXED. */
static char *reserve(size_t n)
{
	char *p = mmap(NULL, n * page_size(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	return p;
}

static void map_at(char *p, size_t n, int prot, int flags)
{
	cr_assert_eq(mmap(p, n * page_size(), prot, flags | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
			(void *)p);
}

/* A range not fully mapped is refused, wherever the hole lies. */
Test(uffd, register_refuses_holes, .timeout = 60)
{
	const size_t psz = page_size();
	struct ps_uffd *uf;
	char *r;

	need_uffd();
	uf = plane(NULL, 1, NULL, 0);
	for (int hole = 0; hole < 4; hole++) {
		r = reserve(4);
		map_at(r, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE);
		cr_assert_eq(munmap(r + (size_t)hole * psz, psz), 0);
		cr_expect_eq(ps_uffd_register(uf, r, 4 * psz, 0), -EINVAL, "hole at page %d", hole);
		cr_expect_eq(ps_uffd_register_flags(uf, r, 4 * psz, 0, PS_UFFD_REGISTER_SPAN),
				-EINVAL, "hole at page %d", hole);
		/*
		 * Without /proc/self/maps: still refused (msync(2) finds the
		 * hole, which memcheck reports as an unaddressable argument).
		 */
		if (!RUNNING_ON_VALGRIND) {
			inject(INJ_OPEN, 0, 0, 1, EACCES, false);
			cr_expect_eq(ps_uffd_register(uf, r, 4 * psz, 0), -EINVAL, "hole at page %d",
					hole);
			cr_expect_eq(inject_off(), 1);
		}
		cr_expect_eq(ps_uffd_unregister(uf, r, 4 * psz), -ENOENT);
		munmap(r, 4 * psz);
	}
	ps_uffd_destroy(uf);
}

/*
 * A range that runs past its mapping into another one (other backing,
 * other permissions) is refused and leaves the other mapping alone; one
 * mapping the kernel split (madvise, mprotect back to the same
 * permissions) is one region.
 */
Test(uffd, register_refuses_neighbours, .timeout = 60)
{
	const size_t psz = page_size();
	struct toucher t;
	struct fillctx c;
	struct ps_uffd *uf;
	uint64_t v;
	char *r;

	need_uffd();
	fill_init(&c, 8, psz);
	uf = plane(NULL, 1, &c, 0);
	toucher_open(&t);
	/* Guest RAM below a shared mapping, below a read-only one. */
	for (int kind = 0; kind < 2; kind++) {
		r = reserve(8);
		map_at(r, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE);
		map_at(r + 4 * psz, 4, kind ? PROT_READ : PROT_READ | PROT_WRITE,
				kind ? MAP_PRIVATE : MAP_SHARED);
		cr_expect_eq(ps_uffd_register(uf, r, 8 * psz, 0), -EINVAL, "kind %d", kind);
		cr_expect_eq(ps_uffd_register(uf, r, 5 * psz, 0), -EINVAL, "kind %d", kind);
		cr_expect(kernel_peek(&t, r + 4 * psz, &v));
		cr_expect_eq(v, 0, "kind %d: the neighbour got content", kind);
		cr_expect_eq(rec_of(&c, 4).fills, 0);
		cr_expect_eq(ps_uffd_register(uf, r, 4 * psz, 0), 0);
		cr_expect_eq(ps_uffd_unregister(uf, r, 4 * psz), 0);
		/* Meant to span: registered whole, the neighbour's missing pages included. */
		cr_expect_eq(ps_uffd_register_flags(uf, r, 8 * psz, 0, 1U << 5), -EINVAL);
		cr_expect_eq(ps_uffd_register_flags(uf, r, 8 * psz, 0, PS_UFFD_REGISTER_SPAN), 0,
				"kind %d", kind);
		cr_expect(kernel_peek(&t, r + 5 * psz, &v));
		cr_expect_eq(v, first_word(5), "kind %d", kind);
		cr_expect_eq(ps_uffd_unregister(uf, r, 8 * psz), 0);
		munmap(r, 8 * psz);
	}
	/* Guest RAM below a thread stack's guard page (PROT_NONE). */
	r = reserve(8);
	map_at(r, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	cr_expect_eq(ps_uffd_register(uf, r, 8 * psz, 0), -EINVAL);
	munmap(r, 8 * psz);
	/* One mapping split by the kernel: still one region. */
	r = region(8 * psz, MAP_PRIVATE);
	cr_assert_eq(madvise(r + 2 * psz, 2 * psz, MADV_NOHUGEPAGE), 0);
	cr_assert_eq(mprotect(r + 5 * psz, psz, PROT_READ), 0);
	cr_assert_eq(mprotect(r + 5 * psz, psz, PROT_READ | PROT_WRITE), 0);
	cr_expect_eq(ps_uffd_register(uf, r, 8 * psz, 0), 0);
	cr_expect_eq(touch_all(r, 8, psz, 1, false, false), 0);
	cr_expect_eq(ps_uffd_unregister(uf, r, 8 * psz), 0);
	munmap(r, 8 * psz);
	toucher_close(&t);
	ps_uffd_destroy(uf);
	fill_fini(&c);
}

/* Where the resolver's stack is: its fill records it. */
static struct {
	pthread_mutex_t lock;
	uintptr_t local, lo, guard;
	size_t size;
} resolver_stack = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};

static int stack_fill(void *buf, const struct ps_uffd_fault *f, void *arg)
{
	pthread_attr_t a;
	void *lo = NULL;
	size_t size = 0, guard = 0;
	char here;

	(void)f, (void)arg;
	TCHECK(!pthread_getattr_np(pthread_self(), &a), "pthread_getattr_np");
	pthread_attr_getstack(&a, &lo, &size);
	pthread_attr_getguardsize(&a, &guard);
	pthread_attr_destroy(&a);
	pthread_mutex_lock(&resolver_stack.lock);
	resolver_stack.local = (uintptr_t)&here;
	resolver_stack.lo = (uintptr_t)lo;
	resolver_stack.size = size;
	resolver_stack.guard = guard;
	pthread_mutex_unlock(&resolver_stack.lock);
	memset(buf, 0x50, page_size());
	return 0;
}

/* The plane's own memory is never registered: a resolver's stack and its guard page. */
Test(uffd, register_refuses_own_memory, .timeout = 60)
{
	const size_t psz = page_size();
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	struct ps_uffd *uf;
	struct toucher t;
	uintptr_t here, lo, guard;
	uint64_t v = 0;
	char *r;

	need_uffd();
	a.resolvers = 1;
	a.fill = stack_fill;
	uf = ps_uffd_create(NULL, &a, NULL, 0);
	cr_assert_not_null(uf);
	r = region(psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, r, psz, 0), 0);
	toucher_open(&t);
	cr_expect(kernel_peek(&t, r, &v));
	toucher_close(&t);
	cr_expect_eq(v, 0x5050505050505050ULL);
	pthread_mutex_lock(&resolver_stack.lock);
	here = resolver_stack.local & ~(uintptr_t)(psz - 1);
	lo = resolver_stack.lo;
	guard = resolver_stack.guard;
	pthread_mutex_unlock(&resolver_stack.lock);
	cr_assert_neq(lo, 0);
	cr_expect_eq(ps_uffd_register(uf, (void *)here, psz, 10), -EINVAL, "its stack");
	cr_expect_eq(ps_uffd_register_flags(uf, (void *)here, psz, 10, PS_UFFD_REGISTER_SPAN),
			-EINVAL, "its stack, spanning");
	cr_expect_eq(ps_uffd_register(uf, (void *)lo, 2 * psz, 10), -EINVAL, "its stack's bottom");
	if (guard)
		cr_expect_eq(ps_uffd_register(uf, (void *)(lo - guard), psz, 10), -EINVAL,
				"its guard page");
	ps_uffd_destroy(uf);
	munmap(r, psz);
}

/* ---- a fault read before unregister, resolved after the range is registered again ---------- */

/*
 * A resolver has read a fault message when the region is unregistered and
 * the range registered again (other store indices): the message belongs
 * to the registration that ended, whose faults the kernel served; the new
 * region's fill is not asked for it, and its page stays missing until a
 * touch of the new region faults.
 */
Test(uffd, stale_fault_after_register_again, .timeout = 60)
{
	const size_t psz = page_size();
	struct ps_uffd_stats st;
	struct fillctx c;
	struct ps_uffd *uf;
	struct toucher t;
	uint64_t v = 1;
	pthread_t th;
	char *r;

	need_uffd();
	fill_init(&c, 16, psz);
	uf = plane(NULL, 1, &c, 0);
	r = region(psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, r, psz, 0), 0);
	pthread_mutex_lock(&read_hold.lock);
	read_hold.page = (uintptr_t)r;
	read_hold.len = psz;
	read_hold.entered = read_hold.release = false;
	pthread_mutex_unlock(&read_hold.lock);
	ps_test_spawn(&th, 1, touch_one_main,
			&(struct touch_one){.p = r, .lock = PTHREAD_MUTEX_INITIALIZER}, 0);
	pthread_mutex_lock(&read_hold.lock);
	while (!read_hold.entered)
		pthread_cond_wait(&read_hold.cond, &read_hold.lock);
	pthread_mutex_unlock(&read_hold.lock);
	/* The kernel serves the waiting fault: a zero page, dropped again. */
	cr_assert_eq(ps_uffd_unregister(uf, r, psz), 0);
	ps_test_join(&th, 1);
	cr_assert_eq(madvise(r, psz, MADV_DONTNEED), 0);
	cr_assert_eq(ps_uffd_register(uf, r, psz, 9), 0);
	pthread_mutex_lock(&read_hold.lock);
	read_hold.release = true;
	pthread_cond_broadcast(&read_hold.cond);
	pthread_mutex_unlock(&read_hold.lock);
	/* The resolver has handled the message once stats() gets its lock. */
	for (int i = 0; i < 2000; i++) {
		st = stats(uf, -1);
		if (st.faults)
			break;
		usleep(1000);
	}
	cr_expect_eq(st.faults, 1);
	cr_expect_eq(st.dropped, 1);
	cr_expect_eq(rec_of(&c, 9).fills, 0, "the new region's fill was asked for the old fault");
	cr_expect_eq(rec_of(&c, 0).fills, 0);
	toucher_open(&t);
	cr_expect(peek(&t, r, &v));
	toucher_close(&t);
	cr_expect_eq(v, first_word(9));
	cr_expect_eq(rec_of(&c, 9).fills, 1);
	ps_uffd_destroy(uf);
	munmap(r, psz);
	fill_fini(&c);
}

/* ---- misuse -------------------------------------------------------------------------------- */

#define MISUSE_LIMIT_S 10 /* a child that has not died by then hung */

/*
 * @fn(@arg) in a child must abort with a message naming polstore, @call
 * and @what.  @freed: without the checking mode @fn calls a plane whose
 * memory was freed, which AddressSanitizer reports itself (and memcheck,
 * whose runs of this suite must stay clean: not run there).
 */
static void expect_misuse(void (*fn)(void *), void *arg, bool checking, bool freed,
		const char *call, const char *what)
{
	char buf[16384];
	int sig;

	if (freed && !checking && RUNNING_ON_VALGRIND)
		return;
	ps_test_set_checking(checking);
	sig = ps_test_run_child(fn, arg, MISUSE_LIMIT_S, buf, sizeof(buf), NULL);
	ps_test_set_checking(false);
	if (freed && !checking && UNDER_ASAN) {
		char fn_name[64];

		snprintf(fn_name, sizeof(fn_name), "%.*s", (int)strcspn(call, "("), call);
		cr_expect(strstr(buf, "heap-use-after-free") && strstr(buf, fn_name),
				"%s: AddressSanitizer did not report it: %s", call, buf);
		return;
	}
	cr_expect_eq(sig, SIGABRT, "%s: the child %s; stderr: %s", call,
			sig == SIGALRM ? "hung" : sig ? "died of another signal" : "returned", buf);
	cr_expect(strstr(buf, "polstore: ") && strstr(buf, call) && strstr(buf, what) &&
					(!checking || strstr(buf, "checking mode")),
			"%s: message \"%s\" lacks \"%s\"", call, buf, what);
}

static struct ps_uffd *plain_plane(void)
{
	struct ps_uffd *uf = ps_uffd_create(NULL, NULL, NULL, 0);

	if (!uf)
		abort();
	return uf;
}

static void destroy_twice(void *unused)
{
	struct ps_uffd *uf = plain_plane();

	(void)unused;
	ps_uffd_destroy(uf);
	ps_uffd_destroy(uf);
}

static void stats_after_destroy(void *unused)
{
	struct ps_uffd *uf = plain_plane();
	struct ps_uffd_stats st;

	(void)unused;
	ps_uffd_destroy(uf);
	ps_uffd_stats(uf, -1, &st);
}

/* Checking mode: the destroyed plane's memory is kept, so a plane created since is told apart. */
static void register_after_destroy(void *unused)
{
	struct ps_uffd *uf = plain_plane(), *other;
	char *r = mmap(NULL, page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			0);

	(void)unused;
	ps_uffd_destroy(uf);
	other = plain_plane();
	ps_uffd_register(uf, r, page_size(), 0);
	ps_uffd_destroy(other);
}

static void stats_in_child(void *unused)
{
	struct ps_uffd *uf = plain_plane();
	struct ps_uffd_stats st;
	pid_t pid;
	int status;

	(void)unused;
	pid = fork();
	if (pid < 0)
		abort();
	if (!pid) {
		ps_uffd_stats(uf, -1, &st);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		raise(WTERMSIG(status));
	ps_uffd_destroy(uf);
}

/* A fill callback that calls its own plane: that call would wait for the callback. */
static int calls_own_plane(void *buf, const struct ps_uffd_fault *f, void *arg)
{
	struct ps_uffd_stats st;

	(void)buf, (void)f;
	ps_uffd_stats(*(struct ps_uffd **)arg, -1, &st);
	return PS_UFFD_FILL_ZERO;
}

static void stats_from_fill(void *unused)
{
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	static struct ps_uffd *uf;
	char *r = mmap(NULL, page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			0);
	int fd[2];

	(void)unused;
	if (pipe(fd))
		abort();
	a.resolvers = 1;
	a.fill = calls_own_plane;
	a.fill_arg = &uf;
	uf = ps_uffd_create(NULL, &a, NULL, 0);
	if (!uf || ps_uffd_register(uf, r, page_size(), 0))
		abort();
	/* A kernel access (valgrind holds its lock through a direct one). */
	if (write(fd[1], r, 1) != 1)
		abort();
	ps_uffd_destroy(uf);
}

Test(uffd, misuse_fails_loudly, .timeout = 120)
{
	need_uffd();
	/* Children that abort, one at a time, minutes under valgrind: the checks read no memory it watches. */
	if (RUNNING_ON_VALGRIND)
		cr_skip_test("under valgrind: its aborting children take minutes");
	for (int checking = 0; checking < 2; checking++) {
		expect_misuse(destroy_twice, NULL, checking, true, "ps_uffd_destroy()",
				"destroyed");
		expect_misuse(stats_after_destroy, NULL, checking, true, "ps_uffd_stats()",
				"destroyed");
		expect_misuse(stats_from_fill, NULL, checking, false, "ps_uffd_stats()",
				"resolver");
	}
	expect_misuse(register_after_destroy, NULL, true, true, "ps_uffd_register()", "destroyed");
	expect_misuse(stats_in_child, NULL, true, false, "ps_uffd_stats()", "fork");
}

/* ---- attributes ---------------------------------------------------------------------------- */

/* A refused attribute is named, with the values it may take. */
Test(uffd, bad_attribute_named, .timeout = 60)
{
	const struct {
		const char *field;
		size_t size;
		unsigned flags;
		int resolvers, node;
		size_t page_size;
	} bad[] = {
			{"size", 1, 0, 0, -1, 0},
			{"flags", 0, PS_UFFD_ALL_FLAGS + 1, 0, -1, 0},
			{"resolvers", 0, 0, -1, -1, 0},
			{"resolvers", 0, 0, PS_UFFD_MAX_RESOLVERS + 1, -1, 0},
			{"node", 0, 0, 0, -2, 0},
			{"node", 0, 0, 0, PS_MAX_NUMNODES, 0},
			{"page_size", 0, 0, 0, -1, 3},
			{"page_size", 0, 0, 0, -1, 12},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
		char why[256] = "", want[64];

		if (bad[i].size)
			a.size = bad[i].size;
		a.flags = bad[i].flags;
		a.resolvers = bad[i].resolvers;
		a.node = bad[i].node;
		a.page_size = bad[i].page_size * page_size();
		errno = 0;
		cr_expect_null(ps_uffd_create(NULL, &a, why, sizeof(why)));
		cr_expect_eq(errno, EINVAL);
		snprintf(want, sizeof(want), "attr->%s", bad[i].field);
		cr_expect(strstr(why, want), "case %zu: \"%s\" does not name %s", i, why, want);
	}
}
