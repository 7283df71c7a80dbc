// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The concurrent workloads of testutil.h, without Criterion: linked into the
 * unit suites and tsan_stress (not the fuzz harness, which runs one thread).
 *
 * Threads do not abort on a failed check: they count it and keep the first
 * message (under a mutex), so the caller reports it in its own way (a
 * Criterion assertion, tsan_stress's failure count) after every thread is
 * joined and every object freed.
 */
#include "compiler.h"
#include "testutil_load.h"

void ps_test_spawn(pthread_t *t, int n, void *(*fn)(void *), void *arg, size_t stride)
{
	int i, err;

	for (i = 0; i < n; i++) {
		err = pthread_create(&t[i], NULL, fn, (char *)arg + (size_t)i * stride);
		if (err) {
			fprintf(stderr, "pthread_create: %s\n", strerror(err));
			abort();
		}
	}
}

void ps_test_join(pthread_t *t, int n)
{
	int i;

	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* ---- what every load shares: its failures, the stop flag, the deadline ---- */

void load_init(struct load *ld, struct ps_test_run *run)
{
	ld->run = run;
	run->failures = 0;
	run->why[0] = '\0';
	pthread_mutex_init(&ld->lock, NULL);
	PSI_WRITE_ONCE(ld->stop, false);
	load_start_clock(ld);
	/* Only atomics touch it; what the threads found reaches the caller by pthread_join(). */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&ld->stop, sizeof(ld->stop));
}

/* The run's time counts from now: the workers' deadline is its duration from here. */
void load_start_clock(struct load *ld)
{
	ld->deadline = ps_test_now_ns() + ld->run->duration_ns;
}

/* Worker round @i may run: below @iters, and below @min_iters or before @deadline. */
bool load_go_on(const struct load *ld, long i, uint64_t deadline)
{
	const struct ps_test_run *run = ld->run;

	return i < run->iters &&
	       (!run->duration_ns || i < run->min_iters || ps_test_now_ns() < deadline);
}

bool load_stopped(struct load *ld)
{
	return PSI_READ_ONCE(ld->stop);
}

void load_fail(struct load *ld, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;
	int n;

	pthread_mutex_lock(&ld->lock);
	if (!ld->run->failures++) {
		n = snprintf(ld->run->why, sizeof(ld->run->why), "testutil_load.c:%d: %s: ", line,
				cond);
		va_start(ap, fmt);
		if (n > 0 && (size_t)n < sizeof(ld->run->why))
			vsnprintf(ld->run->why + n, sizeof(ld->run->why) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&ld->lock);
}

/* 0, or -1 with the count of further failures after the first one's message. */
int load_done(struct load *ld)
{
	struct ps_test_run *run = ld->run;
	size_t n = strlen(run->why);

	pthread_mutex_destroy(&ld->lock);
	if (run->failures > 1 && n < sizeof(run->why))
		snprintf(run->why + n, sizeof(run->why) - n, " (and %ld more)", run->failures - 1);
	return run->failures ? -1 : 0;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	TCHECK(p, "calloc(%zu, %zu)", n, size);
	return p;
}

/* ---- a store with readers, walkers and writers ---- */

/*
 * Churn policies: node k is the region, nodes CHURN_A_BIT.. and
 * CHURN_B_BIT.. hold the range's start and end offsets in the region in
 * binary, CHURN_MAGIC is always set.
 */
#define CHURN_A_BIT 16
#define CHURN_B_BIT 32
#define CHURN_OFF_BITS 10 /* offsets 0 .. PS_TEST_REGION_MAX */
#define CHURN_MAGIC 1000
#define MASK_LONGS (PS_MAX_NUMNODES / (8 * sizeof(unsigned long)))
#define LONG_BITS (8 * sizeof(unsigned long))

static void mask_set(unsigned long *mask, int bit)
{
	mask[bit / LONG_BITS] |= 1UL << (bit % LONG_BITS);
}

static bool mask_test(const unsigned long *mask, int bit)
{
	return mask[bit / LONG_BITS] >> (bit % LONG_BITS) & 1;
}

/* A policy that says it was set for [@a, @b) in region @k of @size pages. */
static struct ps_policy *churn_policy(int k, uint64_t size, uint64_t a, uint64_t b)
{
	unsigned long mask[MASK_LONGS] = { 0 };
	uint64_t base = (uint64_t)k * size;
	struct ps_policy *pol;
	int j;

	mask_set(mask, k);
	for (j = 0; j < CHURN_OFF_BITS; j++) {
		if ((a - base) >> j & 1)
			mask_set(mask, CHURN_A_BIT + j);
		if ((b - base) >> j & 1)
			mask_set(mask, CHURN_B_BIT + j);
	}
	mask_set(mask, CHURN_MAGIC);
	pol = ps_policy_create(PS_MPOL_BIND, 0, mask, PS_MAX_NUMNODES);
	TCHECK(pol, "ps_policy_create failed");
	return pol;
}

/* Was @pol, whole, set by churn_policy() for a range that holds @idx? */
static bool churn_policy_covers(const struct ps_policy *pol, uint64_t size, uint64_t idx)
{
	unsigned long mask[MASK_LONGS];
	int k = (int)(idx / size), j, weight = 0;
	uint64_t base = (uint64_t)k * size, a = 0, b = 0;

	if (!pol || ps_policy_mode(pol) != PS_MPOL_BIND ||
			ps_policy_nodemask(pol, mask, PS_MAX_NUMNODES))
		return false;
	if (!mask_test(mask, CHURN_MAGIC) || ps_policy_first_node(pol) != k)
		return false;
	for (j = 0; j < CHURN_A_BIT; j++)
		if (j != k && mask_test(mask, j))
			return false;
	for (j = 0; j < CHURN_OFF_BITS; j++) {
		a |= (uint64_t)mask_test(mask, CHURN_A_BIT + j) << j;
		b |= (uint64_t)mask_test(mask, CHURN_B_BIT + j) << j;
	}
	for (j = 0; j < PS_MAX_NUMNODES; j++)
		weight += mask_test(mask, j);
	return base + a <= idx && idx < base + b && b <= size && ps_policy_weight(pol) == weight;
}

struct store_load {
	struct load ld;
	struct ps_test_store_load *l;
	struct ps_store *store;
	struct ps_policy *pol[PS_TEST_REGIONS];
	uint64_t space;
	int readers_started; /* writers begin once every reader runs */
	long lookups, walks, sets;
};

/* @pol, found at @idx (@what: how), is what may be there. */
static void store_expect(struct store_load *sl, const struct ps_policy *pol, uint64_t idx,
		const char *what)
{
	uint64_t size = sl->l->region_size;
	int k = (int)(idx / size);

	if (sl->l->churn)
		CHECK(&sl->ld, churn_policy_covers(pol, size, idx) && ps_policy_refcount(pol) >= 1,
				"%s: page %llu: %p was not set for a range that holds it", what,
				(unsigned long long)idx, (const void *)pol);
	else
		CHECK(&sl->ld, !pol || (pol == sl->pol[k] && ps_policy_first_node(pol) == k),
				"%s: page %llu: the policy of another region", what,
				(unsigned long long)idx);
}

/* One read of @idx: a reference to what it found (NULL: a hole, or borrowed without churn). */
static struct ps_policy *store_read(struct store_load *sl, uint64_t idx, bool borrow)
{
	const struct ps_policy *got;
	struct ps_policy *held = NULL;

	if (!borrow)
		return ps_store_lookup(sl->store, idx);
	ps_store_read_lock(sl->store);
	got = ps_store_lookup_borrow(sl->store, idx);
	store_expect(sl, got, idx, "borrowed");
	/* A reference taken inside the section keeps a fresh policy past the section. */
	if (sl->l->churn)
		held = ps_policy_get((struct ps_policy *)got);
	ps_store_read_unlock(sl->store);
	return held;
}

static void *store_reader(void *arg)
{
	struct store_load *sl = arg;
	const struct ps_test_store_load *l = sl->l;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1, idx[PS_TEST_HOLD_MAX];
	struct ps_policy *held[PS_TEST_HOLD_MAX];
	bool online = l->qsbr_online && l->sync == PS_SYNC_RCU_QSBR;
	int hold = l->hold > 0 ? l->hold : 1, k;
	long n = 0;

	if (online)
		ps_qsbr_thread_online();
	PSI_FETCH_ADD(sl->readers_started, 1, SEQ_CST);
	while (!load_stopped(&sl->ld)) {
		for (k = 0; k < hold; k++, n++) {
			idx[k] = ps_test_rand(&seed) % sl->space;
			held[k] = store_read(sl, idx[k],
					l->read == PS_TEST_READ_BORROW ||
							(l->read == PS_TEST_READ_BOTH && (n & 1)));
		}
		if (l->qsbr_online)
			ps_qsbr_quiescent(); /* held references outlive the read section */
		for (k = 0; k < hold; k++) {
			store_expect(sl, held[k], idx[k], "held");
			ps_policy_put(held[k]);
		}
	}
	if (online)
		ps_qsbr_thread_offline();
	PSI_FETCH_ADD(sl->lookups, n, SEQ_CST);
	return NULL;
}

struct store_walk {
	struct store_load *sl;
	uint64_t prev_end;
};

static int store_visit(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct store_walk *w = arg;

	CHECK(&w->sl->ld, w->prev_end <= start && start < end, "walk: [%llu, %llu) after %llu",
			(unsigned long long)start, (unsigned long long)end,
			(unsigned long long)w->prev_end);
	store_expect(w->sl, pol, start, "walked");
	store_expect(w->sl, pol, end - 1, "walked");
	w->prev_end = end;
	return 0;
}

static void *store_walker(void *arg)
{
	struct store_load *sl = arg;
	long n = 0;

	for (; !load_stopped(&sl->ld); n++) {
		struct store_walk w = { sl, 0 };

		CHECK(&sl->ld, ps_store_foreach(sl->store, store_visit, &w) == 0, "foreach");
	}
	PSI_FETCH_ADD(sl->walks, n, SEQ_CST);
	return NULL;
}

static void *store_writer(void *arg)
{
	struct store_load *sl = arg;
	const struct ps_test_store_load *l = sl->l;
	uint64_t seed = (uint64_t)(uintptr_t)&seed | 1, size = l->region_size, deadline;
	long i, sets = 0;

	/*
	 * Writers overlap readers: on a loaded machine the writers could
	 * otherwise finish their sets before any reader was scheduled.
	 */
	while (PSI_LOAD_SEQ_CST(sl->readers_started) < l->readers)
		sched_yield();
	deadline = ps_test_now_ns() + l->run.duration_ns;
	for (i = 0; load_go_on(&sl->ld, i, deadline); i++) {
		int k = (int)(ps_test_rand(&seed) % PS_TEST_REGIONS);
		uint64_t a = (uint64_t)k * size, b = a + size;
		struct ps_policy *pol;

		if (l->yield_every && i % l->yield_every == 0) {
			if (l->sample)
				l->sample(sl->store, a, l->sample_arg);
			sched_yield(); /* let the readers make some of the policies hot */
		}
		if (!l->whole_regions && !ps_test_rand_range(&seed, a, size, &a, &b))
			continue;
		/* Churn: the store's reference is the only one once we put ours. */
		pol = l->churn ? churn_policy(k, size, a, b)
			       : ps_test_rand(&seed) % 4 ? sl->pol[k] : NULL;
		CHECK(&sl->ld, ps_store_set(sl->store, a, b, pol) == 0, "set [%llu, %llu)",
				(unsigned long long)a, (unsigned long long)b);
		if (l->churn)
			ps_policy_put(pol);
		sets++;
	}
	PSI_FETCH_ADD(sl->sets, sets, SEQ_CST);
	return NULL;
}

int ps_test_store_run(struct ps_test_store_load *l)
{
	struct store_load sl = { .l = l };
	int nt = l->readers + l->walkers + l->writers, i;
	pthread_t *t = xcalloc((size_t)nt, sizeof(*t));
	uint64_t size = l->region_size;
	const char *why = NULL;

	TCHECK(size >= 1 && size <= PS_TEST_REGION_MAX && l->hold <= PS_TEST_HOLD_MAX,
			"region_size %llu, hold %d", (unsigned long long)size, l->hold);
	load_init(&sl.ld, &l->run);
	/* Only atomics touch it (the readers' start, the writers' signal). */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&sl.readers_started, sizeof(sl.readers_started));
	sl.store = ps_store_create(l->sync);
	TCHECK(sl.store, "ps_store_create(%s)", ps_sync_name(l->sync));
	sl.space = PS_TEST_REGIONS * size;
	for (i = 0; i < PS_TEST_REGIONS; i++)
		sl.pol[i] = ps_test_bind(i);
	for (i = 0; l->churn && i < PS_TEST_REGIONS; i++) { /* every page covered from the start */
		struct ps_policy *pol = churn_policy(i, size, i * size, (i + 1) * size);

		CHECK(&sl.ld, ps_store_set(sl.store, i * size, (i + 1) * size, pol) == 0,
				"region %d", i);
		ps_policy_put(pol);
	}
	ps_test_spawn(t, l->readers, store_reader, &sl, 0);
	ps_test_spawn(t + l->readers, l->walkers, store_walker, &sl, 0);
	ps_test_spawn(t + l->readers + l->walkers, l->writers, store_writer, &sl, 0);
	ps_test_join(t + l->readers + l->walkers, l->writers);
	PSI_STORE_SEQ_CST(sl.ld.stop, true);
	ps_test_join(t, l->readers + l->walkers);
	l->lookups = PSI_LOAD_SEQ_CST(sl.lookups);
	l->walks = PSI_LOAD_SEQ_CST(sl.walks);
	l->sets = PSI_LOAD_SEQ_CST(sl.sets);
	CHECK(&sl.ld, l->readers == 0 || l->lookups > 0, "%s: no lookup", ps_sync_name(l->sync));
	CHECK(&sl.ld, l->writers == 0 || l->sets > 0, "%s: no set", ps_sync_name(l->sync));
	CHECK(&sl.ld, ps_store_check(sl.store, &why) == 0, "%s: %s", ps_sync_name(l->sync), why);
	ps_store_destroy(sl.store);
	for (i = 0; i < PS_TEST_REGIONS; i++) {
		CHECK(&sl.ld, ps_policy_refcount(sl.pol[i]) == 1, "policy %d: refcount %ld", i,
				(long)ps_policy_refcount(sl.pol[i]));
		ps_policy_put(sl.pol[i]);
	}
	free(t);
	return load_done(&sl.ld);
}
