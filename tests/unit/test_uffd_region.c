// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What a fault plane's region may cover, a fault read before unregister,
 * misuse, the store a plane reads and attributes (test_uffd.c says how).
 */
#include "uffd_test.h"

/*
 * A resolver held after it has read a fault message and before it
 * resolves it: read(2) of the userfaultfd returns, then waits while
 * @read_hold.page is set and the message names that page.  Or held
 * before it reads a batch (@before): it has taken the registration count
 * the batch is checked against.  The test's own reads (pipes, a byte at
 * a time) pass through.
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uintptr_t page; /* 0: not armed */
	size_t len;
	bool entered, release, before;
} read_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, false, false, false};

/* The resolver, under @read_hold.lock: say it stopped, and wait until the test lets it go. */
static void read_hold_stop(void)
{
	read_hold.entered = true;
	pthread_cond_broadcast(&read_hold.cond);
	while (!read_hold.release)
		pthread_cond_wait(&read_hold.cond, &read_hold.lock);
}

/* The test: wait until the resolver stopped. */
static void read_hold_wait_entered(void)
{
	pthread_mutex_lock(&read_hold.lock);
	while (!read_hold.entered)
		pthread_cond_wait(&read_hold.cond, &read_hold.lock);
	pthread_mutex_unlock(&read_hold.lock);
}

/* The test: let the resolver go. */
static void read_hold_release(void)
{
	pthread_mutex_lock(&read_hold.lock);
	read_hold.release = true;
	pthread_cond_broadcast(&read_hold.cond);
	pthread_mutex_unlock(&read_hold.lock);
}

ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n)
{
	const struct uffd_msg *m = buf;
	ssize_t got;

	if (n >= sizeof(*m) && n % sizeof(*m) == 0) {
		pthread_mutex_lock(&read_hold.lock);
		if (read_hold.before) {
			read_hold.before = false;
			read_hold_stop();
		}
		pthread_mutex_unlock(&read_hold.lock);
	}
	got = __real_read(fd, buf, n);

	if (got <= 0 || (size_t)got % sizeof(*m))
		return got;
	pthread_mutex_lock(&read_hold.lock);
	if (read_hold.page && m->event == UFFD_EVENT_PAGEFAULT &&
			m->arg.pagefault.address - read_hold.page < read_hold.len) {
		read_hold.page = 0;
		read_hold_stop();
	}
	pthread_mutex_unlock(&read_hold.lock);
	return got;
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

/* Whether page @p is mapped: mincore(2) fails with ENOMEM on a page that is not. */
static bool page_mapped(const void *p)
{
	unsigned char vec;

	return mincore((void *)p, page_size(), &vec) == 0;
}

/*
 * A range not fully mapped is refused, wherever the hole lies.  The
 * process's own allocators may map a page into the hole meanwhile (the
 * sanitizers' do, in the calls themselves): then the range has no hole
 * any more, and the attempt is made again on a fresh one.
 */
Test(uffd, register_refuses_holes, .timeout = 60)
{
	const size_t psz = page_size();
	struct ps_uffd *uf;
	char *r;

	need_uffd();
	uf = plane(NULL, 1, NULL, 0);
	for (int hole = 0; hole < 4; hole++) {
		int tries;

		for (tries = 0; tries < 20; tries++) {
			int plain, span, nomaps = -EINVAL;
			long hits = 1;

			r = reserve(4);
			map_at(r, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE);
			cr_assert_eq(munmap(r + (size_t)hole * psz, psz), 0);
			plain = ps_uffd_register(uf, r, 4 * psz, 0);
			span = ps_uffd_register_flags(uf, r, 4 * psz, 0, PS_UFFD_REGISTER_SPAN);
			/*
			 * Without /proc/self/maps: still refused (msync(2) finds
			 * the hole, which memcheck reports as an unaddressable
			 * argument).
			 */
			if (!ps_test_on_valgrind()) {
				inject(INJ_OPEN, 0, 0, 1, EACCES, false);
				nomaps = ps_uffd_register(uf, r, 4 * psz, 0);
				hits = inject_off();
			}
			if (page_mapped(r + (size_t)hole * psz)) {
				/* Filled by someone else: ours are the other three pages. */
				(void)ps_uffd_unregister(uf, r, 4 * psz);
				for (int k = 0; k < 4; k++)
					if (k != hole)
						munmap(r + (size_t)k * psz, psz);
				continue;
			}
			cr_expect_eq(plain, -EINVAL, "hole at page %d", hole);
			cr_expect_eq(span, -EINVAL, "hole at page %d", hole);
			cr_expect_eq(nomaps, -EINVAL, "hole at page %d", hole);
			cr_expect_eq(hits, 1);
			cr_expect_eq(ps_uffd_unregister(uf, r, 4 * psz), -ENOENT);
			munmap(r, 4 * psz);
			break;
		}
		cr_expect_lt(tries, 20, "hole at page %d filled by the process in 20 tries", hole);
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

/*
 * A length one page too long, past the end of a 4-page RAM block: into a
 * guard page (PROT_NONE) or an unmapped page, it is refused with -EINVAL
 * and registers nothing (the exact length registers after it); into an
 * anonymous neighbour with the same permissions, which /proc/self/maps
 * does not tell from the block, it is registered whole, as
 * ps_uffd_register(3) says, and the neighbour's missing page is filled
 * with the content of store index 4.
 */
Test(uffd, register_overlong, .timeout = 60)
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
	for (int next = 0; next < 3; next++) {
		const char *what = next == 0 ? "guard page" : next == 1 ? "hole" : "same permissions";

		r = reserve(8);
		map_at(r, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE);
		if (next == 1)
			cr_assert_eq(munmap(r + 4 * psz, psz), 0);
		if (next == 2)
			map_at(r + 4 * psz, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
		if (next == 1 && page_mapped(r + 4 * psz)) {
			/* The process's own allocator took the hole (register_refuses_holes). */
			munmap(r, 8 * psz);
			continue;
		}
		if (next < 2) {
			cr_expect_eq(ps_uffd_register(uf, r, 5 * psz, 0), -EINVAL, "%s", what);
			cr_expect_eq(ps_uffd_unregister(uf, r, 5 * psz), -ENOENT, "%s", what);
			cr_expect_eq(ps_uffd_register(uf, r, 4 * psz, 0), 0, "%s", what);
			cr_expect(kernel_peek(&t, r + 3 * psz, &v));
			cr_expect_eq(v, first_word(3), "%s", what);
			cr_expect_eq(ps_uffd_unregister(uf, r, 4 * psz), 0, "%s", what);
		} else {
			cr_expect_eq(ps_uffd_register(uf, r, 5 * psz, 0), 0, "%s", what);
			cr_expect(kernel_peek(&t, r + 4 * psz, &v));
			cr_expect_eq(v, first_word(4), "%s: the neighbour's page", what);
			cr_expect_eq(ps_uffd_unregister(uf, r, 5 * psz), 0, "%s", what);
		}
		munmap(r, 8 * psz);
	}
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
	read_hold_wait_entered();
	/* The kernel serves the waiting fault: a zero page, dropped again. */
	cr_assert_eq(ps_uffd_unregister(uf, r, psz), 0);
	ps_test_join(&th, 1);
	cr_assert_eq(madvise(r, psz, MADV_DONTNEED), 0);
	cr_assert_eq(ps_uffd_register(uf, r, psz, 9), 0);
	read_hold_release();
	/* The resolver has handled the message once stats() gets its lock. */
	for (long i = 0; i < wait_polls(2000); i++) {
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

/*
 * A region registered while a resolver has taken the registration count
 * and not yet read its batch, in a plane none of whose regions ended: the
 * region is the first at its range, so its first fault is its own, served
 * at once and not dropped.
 */
Test(uffd, first_region_registered_during_a_read_keeps_its_fault, .timeout = 60)
{
	const size_t psz = page_size();
	struct touch_one ta = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct touch_one tb = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct ps_uffd_stats st;
	struct ps_uffd *uf;
	pthread_t tha, thb;
	char *a, *b;

	need_uffd();
	uf = plane(NULL, 1, NULL, 0);
	a = region(psz, MAP_PRIVATE);
	b = region(psz, MAP_PRIVATE);
	ta.p = a;
	tb.p = b;
	cr_assert_eq(ps_uffd_register(uf, a, psz, 0), 0);
	pthread_mutex_lock(&read_hold.lock);
	read_hold.entered = read_hold.release = false;
	read_hold.before = true;
	pthread_mutex_unlock(&read_hold.lock);
	/* A's fault wakes the resolver: it takes the count and stops before reading. */
	ps_test_spawn(&tha, 1, touch_one_main, &ta, 0);
	read_hold_wait_entered();
	cr_assert_eq(ps_uffd_register(uf, b, psz, 1), 0);
	ps_test_spawn(&thb, 1, touch_one_main, &tb, 0);
	usleep(50000); /* b's fault waits in the queue beside a's */
	read_hold_release();
	ps_test_join(&tha, 1);
	ps_test_join(&thb, 1);
	st = stats(uf, -1);
	cr_expect_eq(st.dropped, 0);
	cr_expect_eq(st.faults, st.zeros + st.exists, "faults %lu, zeros %lu, exists %lu",
			(unsigned long)st.faults, (unsigned long)st.zeros, (unsigned long)st.exists);
	ps_uffd_destroy(uf);
	munmap(a, psz);
	munmap(b, psz);
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

	if (freed && !checking && ps_test_on_valgrind())
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
	if (ps_test_on_valgrind())
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

/* ---- the store a plane reads -------------------------------------------------------------- */

/*
 * What a child that destroys a store under its planes made, on a page it
 * shares with the test: the addresses its message must name.
 */
struct store_child {
	enum ps_sync sync;
	int planes;    /* planes made on the store; all but the last are destroyed first */
	bool deferred; /* ps_store_destroy_deferred() instead of ps_store_destroy() */
	const void *store, *plane;
};

/* One page of @uf's, touched through the kernel (valgrind holds its lock through a direct touch).
 */
static bool touch_through_kernel(char *r)
{
	int fd[2];
	bool ok;

	if (pipe(fd))
		return false;
	ok = write(fd[1], r, 1) == 1;
	close(fd[0]);
	close(fd[1]);
	return ok;
}

/*
 * A store destroyed while a plane still reads it: the resolver of the next
 * fault would look up freed memory.  The destroy must abort, naming the
 * plane; what follows it is what happens when it returns.
 */
static void store_destroyed_under_plane(void *arg)
{
	struct store_child *m = arg;
	struct ps_uffd_attr a = PS_UFFD_ATTR_INIT;
	struct ps_store *s = ps_store_create(m->sync);
	struct ps_uffd *uf = NULL;
	char *r = mmap(NULL, page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			0);

	a.resolvers = 1;
	if (!s || r == MAP_FAILED)
		_exit(3);
	for (int i = 0; i < m->planes; i++) {
		if (uf)
			ps_uffd_destroy(uf);
		uf = ps_uffd_create(s, &a, NULL, 0);
		if (!uf)
			_exit(4);
	}
	if (ps_uffd_register(uf, r, page_size(), 0))
		_exit(5);
	m->store = s;
	m->plane = uf;
	if (m->deferred)
		(void)ps_store_destroy_deferred(s);
	else
		ps_store_destroy(s);
	touch_through_kernel(r);
	ps_uffd_destroy(uf);
}

/*
 * ps_store_destroy() of a store a plane reads, one plane or two (the
 * first destroyed already), in and out of the checking mode, and
 * ps_store_destroy_deferred() in the checking mode (out of it, it fails
 * with -EBUSY: store_outlives_its_planes): the child aborts with one line
 * that names the call, the store, the plane left and ps_uffd_destroy().
 */
Test(uffd, store_destroyed_under_plane_aborts, .timeout = 120)
{
	struct store_child *m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	need_uffd();
	/* Children that abort, one at a time, minutes under valgrind (misuse_fails_loudly). */
	if (ps_test_on_valgrind())
		cr_skip_test("under valgrind: its aborting children take minutes");
	cr_assert_neq(m, MAP_FAILED);
	for (int k = 0; k < 3 * PS_SYNC_COUNT * 2; k++) {
		int checking = k / (PS_SYNC_COUNT * 2) > 0, deferred = k / (PS_SYNC_COUNT * 2) > 1;
		const char *call = deferred ? "ps_store_destroy_deferred()" : "ps_store_destroy()";
		char buf[16384], store[64], plane[64];
		int sig;

		*m = (struct store_child){.sync = ps_test_all_syncs[k / 2 % PS_SYNC_COUNT],
				.planes = 1 + k % 2,
				.deferred = deferred};
		ps_test_set_checking(checking);
		sig = ps_test_run_child(store_destroyed_under_plane, m, MISUSE_LIMIT_S, buf,
				sizeof(buf), NULL);
		ps_test_set_checking(false);
		snprintf(store, sizeof(store), "%s store %p", ps_sync_name(m->sync), m->store);
		snprintf(plane, sizeof(plane), "fault plane %p", m->plane);
		cr_expect_eq(sig, SIGABRT, "%s, %s, %d plane(s), checking %d: the child %s: %s",
				call, store, m->planes, checking,
				sig == SIGALRM ? "hung"
				: sig	       ? "died of another signal"
					       : "returned",
				buf);
		cr_expect(strstr(buf, "polstore: ") && strstr(buf, call) && strstr(buf, store) &&
						strstr(buf, plane) &&
						strstr(buf, "ps_uffd_destroy()") &&
						(!checking || strstr(buf, "checking mode")),
				"%s, %d plane(s), checking %d: message \"%s\" does not name the "
				"call, "
				"%s and %s",
				call, m->planes, checking, buf, store, plane);
	}
	munmap(m, sizeof(*m));
}

/* In a child of fork(): the parent's store, then its plane. */
static void destroy_store_then_plane(void *arg)
{
	void **sp = arg;

	ps_store_destroy(sp[0]);
	ps_uffd_destroy(sp[1]);
}

/*
 * Destroyed after its planes, the store goes as any other; destroyed
 * deferred while a plane reads it, it is refused with -EBUSY and left as
 * it was (the plane goes on placing pages by it); in a child of fork(),
 * whose copy of the plane has no resolver, the store may go first.
 */
Test(uffd, store_outlives_its_planes, .timeout = 120)
{
	const size_t psz = page_size();
	struct toucher t;

	need_uffd();
	toucher_open(&t);
	for (int i = 0; i < PS_SYNC_COUNT; i++) {
		enum ps_sync sync = ps_test_all_syncs[i];
		struct ps_store *s;
		struct ps_policy *p;
		struct ps_uffd *uf, *other;
		uint64_t v = 1;
		char buf[4096], *r;

		/* Under valgrind: a locking variant and RCU_QSBR (test_uffd_resolve.c). */
		if (ps_test_on_valgrind() && sync != PS_SYNC_SPIN && sync != PS_SYNC_RCU_QSBR)
			continue;
		s = ps_store_create(sync);
		p = ps_test_bind(0);
		r = region(2 * psz, MAP_PRIVATE);
		cr_assert_not_null(s);
		uf = plane(s, 1, NULL, 0);
		other = plane(s, 1, NULL, 0);
		cr_assert_eq(ps_uffd_register(uf, r, 2 * psz, 0), 0);
		cr_expect_eq(ps_store_destroy_deferred(s), -EBUSY, "%s", ps_sync_name(sync));
		ps_uffd_destroy(other);
		cr_expect_eq(ps_store_destroy_deferred(s), -EBUSY, "%s", ps_sync_name(sync));
		cr_expect_eq(ps_store_set(s, 0, 2, p), 0);
		cr_expect(kernel_peek(&t, r, &v));
		cr_expect_eq(v, 0);
		cr_expect_eq(stats(uf, -1).zeros, 1);
		/* The child's store and plane are copies: neither is the parent's. */
		cr_expect_eq(ps_test_run_child(destroy_store_then_plane, (void *[]){s, uf},
					     MISUSE_LIMIT_S, buf, sizeof(buf), NULL),
				0, "%s: the child did not return: %s", ps_sync_name(sync), buf);
		cr_expect(kernel_peek(&t, r + psz, &v));
		cr_expect_eq(stats(uf, -1).zeros, 2);
		ps_uffd_destroy(uf);
		if (i % 2)
			ps_store_destroy(s);
		else
			cr_expect_eq(ps_store_destroy_deferred(s), 0);
		ps_policy_put(p);
		munmap(r, 2 * psz);
	}
	toucher_close(&t);
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
