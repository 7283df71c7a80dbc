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
#include "uffd_test.h"

/* ---- failures injected into the library's libc calls ------------------------------------ */

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
void inject_add(enum inj_kind kind, unsigned long match, long skip, long count, int err,
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
long inject_off(void)
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
void inject(enum inj_kind kind, unsigned long match, long skip, long count, int err,
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

/* ---- helpers ------------------------------------------------------------------------------ */

/* @normal, scaled down under valgrind (POLSTORE_TEST_SCALE), a multiple of 4, at least @least. */
size_t scaled(size_t normal, size_t least)
{
	size_t n = (size_t)ps_test_iters((long)normal) & ~(size_t)3;

	return n < least ? least : n;
}

size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

void need_uffd(void)
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

int nthreads(void)
{
	return count_dir("/proc/self/task");
}

int nfds(void)
{
	return count_dir("/proc/self/fd");
}

/* Threads of this process, once those ending have gone (a joined thread may linger a moment). */
int settled_threads(int want)
{
	int n = nthreads();

	for (long i = 0; i < wait_polls(200) && n != want; i++) {
		usleep(1000);
		n = nthreads();
	}
	return n;
}

char *region(size_t bytes, int flags)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	return p;
}

/* The node page @p lies on (faulting it in first if it is missing). */
int node_of(const void *p)
{
	int node = -1;

	cr_assert_eq(syscall(SYS_get_mempolicy, &node, NULL, 0UL, p, MPOL_F_NODE_ADDR), 0,
			"get_mempolicy: %s", strerror(errno));
	return node;
}

void flat_topology(void)
{
	static unsigned char dist[FLAT_NODES * FLAT_NODES];

	for (int i = 0; i < FLAT_NODES; i++)
		for (int j = 0; j < FLAT_NODES; j++)
			dist[i * FLAT_NODES + j] = i == j ? 10 : 20;
	cr_assert_eq(ps_numa_set_topology(FLAT_NODES, dist, NULL), 0);
}

bool node_allowed(int node)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = {0};
	const int bits = 8 * sizeof(unsigned long);

	if (node < 0 || node >= PS_MAX_NUMNODES ||
			syscall(SYS_get_mempolicy, NULL, mask, (unsigned long)PS_MAX_NUMNODES, NULL,
					MPOL_F_MEMS))
		return false;
	return mask[node / bits] >> (node % bits) & 1;
}

void toucher_open(struct toucher *t)
{
	TCHECK(!pipe2(t->pfd, O_CLOEXEC), "pipe2: %s", strerror(errno));
}

void toucher_close(struct toucher *t)
{
	close(t->pfd[0]);
	close(t->pfd[1]);
}

/* The word at @p, read by a load or by the kernel; false when the kernel says EFAULT. */
bool peek(struct toucher *t, const void *p, uint64_t *v)
{
	if (!ps_test_on_valgrind()) {
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
bool kernel_peek(struct toucher *t, const void *p, uint64_t *v)
{
	if (write(t->pfd[1], p, sizeof(*v)) != (ssize_t)sizeof(*v))
		return false;
	TCHECK(read(t->pfd[0], v, sizeof(*v)) == (ssize_t)sizeof(*v), "pipe read");
	return true;
}

/* ---- the fill callback the tests use ----------------------------------------------------- */

void fill_init(struct fillctx *c, size_t npages, size_t psz)
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

void fill_fini(struct fillctx *c)
{
	free(c->rec);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

uint64_t first_word(uint64_t page)
{
	return MAGIC ^ page;
}

int test_fill(void *buf, const struct ps_uffd_fault *f, void *arg)
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
struct rec rec_of(struct fillctx *c, size_t p)
{
	struct rec r;

	pthread_mutex_lock(&c->lock);
	r = c->rec[p];
	pthread_mutex_unlock(&c->lock);
	return r;
}

struct ps_uffd *plane(struct ps_store *s, int resolvers, struct fillctx *c, unsigned flags)
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

struct ps_uffd_stats stats(struct ps_uffd *uf, int resolver)
{
	struct ps_uffd_stats st;

	cr_assert_eq(ps_uffd_stats(uf, resolver, &st), 0);
	return st;
}

/* ---- touching threads -------------------------------------------------------------------- */

/* Touch every page of the job (all of them, in this thread's order), checking the content. */
void *touch_main(void *arg)
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
long touch_all(char *base, size_t npages, size_t psz, int n, bool shuffle, bool zero_ok)
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
void expect_once(struct ps_uffd *uf, struct fillctx *c, long pages)
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
void four_ranges(struct ps_store *s, uint64_t npages)
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
void expect_placed(
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

void *touch_one_main(void *arg)
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
