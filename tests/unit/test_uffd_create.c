// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault plane's creation (refused by seccomp or for an unprivileged
 * user, failing at every step), bad input, pages of two system pages,
 * shared memory, dropped pages and zero pages (test_uffd.c says how).
 */
#include "uffd_test.h"

#include <inttypes.h>

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
			ps_test_on_valgrind() ? "/dev/userfaultfd" : "vm.unprivileged_userfaultfd",
			EPERM);
	if (rc || ps_test_on_valgrind())
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
	/* The kernel may report a fault again (a retried wait): found placed. */
	cr_expect_eq(st.faults, st.zeros + st.exists,
			"faults %" PRIu64 ", zeros %" PRIu64 ", exists %" PRIu64 ", dropped %" PRIu64
			", errors %" PRIu64,
			st.faults, st.zeros, st.exists, st.dropped, st.errors);
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
	served = read_within(base + sys, wait_polls(3000), &v, destroy_plane, uf);
	/* Not served: the plane is destroyed, the kernel served it. */
	cr_assert(served, "the read of the dropped half was not served in %ld ms",
			wait_polls(3000));
	cr_expect_eq(v, 0);
	st = stats(uf, -1);
	/* Both halves placed as zero pages (one fault may come twice: found placed). */
	cr_expect_eq(st.zeros, 2);
	cr_expect_eq(st.faults, st.zeros + st.exists);
	ps_uffd_destroy(uf);
	munmap(raw, 3 * psz);
}

/*
 * Weights in the policy reach the fault plane: on a two-node guest
 * topology weighted 1:1, a range whose policy carries 3:1 has its faults
 * named 3:1 within 2%, each page's node by its store index.
 */
Test(uffd, weighted_policy_names_nodes, .timeout = 60)
{
	static const unsigned char dist[4] = { 10, 20, 20, 10 }, w31[2] = { 3, 1 };
	const size_t n = 400, psz = page_size();
	struct ps_policy *pol = ps_policy_create_weighted(0, w31, 2);
	long named[2] = { 0, 0 };
	struct fillctx c;
	struct ps_uffd *uf;
	struct ps_store *s;
	struct toucher t;
	char *base;
	uint64_t v;
	int node;

	need_uffd();
	cr_assert_not_null(pol);
	cr_assert_eq(ps_numa_set_topology(2, dist, NULL), 0);
	s = ps_store_create(PS_SYNC_RCU);
	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 1000, 1000 + n, pol), 0);
	fill_init(&c, 1000 + n, psz);
	uf = plane(s, 1, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 1000), 0);
	toucher_open(&t);
	for (size_t p = 0; p < n; p++) {
		cr_expect(peek(&t, base + p * psz, &v));
		node = rec_of(&c, 1000 + p).named;
		cr_assert_eq(node, (1000 + p) % 4 < 3 ? 0 : 1, "page %zu: node %d", p, node);
		named[node]++;
	}
	cr_expect(labs(4 * named[0] - 3 * (long)n) <= (long)n * 8 / 100, "named %ld:%ld",
			named[0], named[1]);
	toucher_close(&t);
	ps_uffd_destroy(uf);
	munmap(base, n * psz);
	ps_store_destroy(s);
	fill_fini(&c);
	ps_policy_put(pol);
	cr_assert_eq(ps_numa_set_topology(0, NULL, NULL), 0);
}

/* A store that counts: each fault the plane resolves is counted to its page's range. */
Test(uffd, faults_are_counted, .timeout = 60)
{
	const size_t n = 64, psz = page_size();
	struct ps_policy *pol = ps_test_bind(0);
	struct ps_range_counts top[3];
	struct ps_counts_sum sum;
	struct fillctx c;
	struct ps_uffd *uf;
	struct ps_store *s;
	struct toucher t;
	char *base;
	uint64_t v;

	need_uffd();
	s = ps_store_create(PS_SYNC_RCU);
	cr_assert_not_null(s);
	cr_assert_eq(ps_store_set(s, 1000, 1016, pol), 0); /* 16 pages */
	cr_assert_eq(ps_store_set(s, 1020, 1060, pol), 0); /* 40; 1016-1020 and 1060-1064: gaps */
	cr_assert_eq(ps_store_counts_enable(s, true), 0);
	fill_init(&c, 1000 + n, psz);
	uf = plane(s, 1, &c, 0);
	base = region(n * psz, MAP_PRIVATE);
	cr_assert_eq(ps_uffd_register(uf, base, n * psz, 1000), 0);
	toucher_open(&t);
	for (size_t p = 0; p < n; p++)
		cr_expect(peek(&t, base + p * psz, &v));
	toucher_close(&t);
	ps_uffd_destroy(uf);
	cr_assert_eq(ps_store_counts_top(s, 0, 2000, PS_COUNTS_BY_COUNT, top, 3), 2);
	cr_assert(top[0].start == 1020 && top[0].count == 40, "%lu: %lu",
			(unsigned long)top[0].start, (unsigned long)top[0].count);
	cr_assert(top[1].start == 1000 && top[1].count == 16);
	cr_assert_eq(ps_store_counts_sum(s, &sum), 0);
	cr_assert_eq(sum.counted, n);
	cr_assert_eq(sum.gaps, 8);
	munmap(base, n * psz);
	ps_store_destroy(s);
	fill_fini(&c);
	ps_policy_put(pol);
}
