// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault plane resolving real faults: content, placement, counts, the
 * resolvers' retries and errors, policies changed while faults are
 * resolved, teardown with faults in flight, resolvers that exit in their
 * fill, a forked child (test_uffd.c says how).
 */
#include "uffd_test.h"

/*
 * Under valgrind the store tests run for a locking variant and RCU_QSBR
 * (whose resolvers go online) only: the plane's code is the same for the
 * others, which the store's own suites check under valgrind.
 */
static void need_variant(enum ps_sync sync)
{
	if (ps_test_on_valgrind() && sync != PS_SYNC_SPIN && sync != PS_SYNC_RCU_QSBR)
		cr_skip_test("under valgrind: spin and rcu-qsbr only");
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
	cr_expect_eq(st.faults, st.zeros + st.exists,
			"faults %lu: zeros %lu, exists %lu, dropped %lu, errors %lu, fill errors %lu",
			(unsigned long)st.faults, (unsigned long)st.zeros, (unsigned long)st.exists,
			(unsigned long)st.dropped, (unsigned long)st.errors,
			(unsigned long)st.fill_errors);
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
	const int nt = ps_test_on_valgrind() ? 4 : 8;
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
		if (!ps_test_on_valgrind()) {
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
