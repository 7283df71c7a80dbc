// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The linearizability oracle (see linearizability.h for the rule it checks).
 *
 * Checking cost: O((W + L) log W) per round for W writes and L lookups.  For
 * every page the writes covering it are sorted by begin with a suffix
 * minimum of their ends, so "is there a W' covering p with W'.begin > t and
 * W'.end < L.begin" is one binary search; "nothing" results pick, among the
 * removals covering p that began before L ended, the one that ended last
 * (the hardest to overwrite), with a prefix maximum.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "linearizability.h"
#include "xorshift.h"

#define LIN_MARK (1UL << 48) /* always set: the mask is never empty */
#define LIN_VMASK (LIN_MARK - 1)
#define LIN_ROUND_LOOKUPS (1L << 18) /* per round, all readers together */
#define LIN_ROUND_WRITES (1L << 17)
#define LIN_PRINT_MAX 10 /* violations printed in full per round; the rest are counted */
#define LIN_MAX_ROUNDS 4096 /* min_writes gives up after this many rounds */


struct ps_policy *ps_lin_encode(uint64_t version)
{
	unsigned long mask = LIN_MARK | (unsigned long)(version & LIN_VMASK);

	return ps_policy_create(PS_MPOL_BIND, 0, &mask, 64);
}

uint64_t ps_lin_decode(const struct ps_policy *pol)
{
	unsigned long mask = 0;

	if (!pol)
		return 0;
	if (ps_policy_mode(pol) != PS_MPOL_BIND || ps_policy_nodemask(pol, &mask, 64) ||
			!(mask & LIN_MARK))
		return UINT64_MAX;
	return mask & LIN_VMASK;
}

/* ---- the checker ---- */

struct lin_entry {
	uint64_t begin, end;
	const struct ps_lin_write *w; /* NULL: the page's initial state */
};

struct lin_page {
	struct lin_entry *all; /* every write covering the page, by begin */
	uint64_t *sufmin; /* sufmin[i] = index in @all of the least end in all[i..] */
	long nall;
	struct lin_entry *rm; /* removals covering the page (and an empty initial), by begin */
	long *premax; /* premax[i] = index in @rm of the greatest end in rm[0..i] */
	long nrm;
	struct lin_entry init;
	uint64_t init_version;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct lin_entry *x = a, *y = b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int write_ver_cmp(const void *a, const void *b)
{
	const struct ps_lin_write *const *x = a, *const *y = b;

	return (*x)->version < (*y)->version ? -1 : (*x)->version > (*y)->version;
}

/* First index in @e[0..n) whose begin is > @t (n when none). */
static long first_begin_after(const struct lin_entry *e, long n, uint64_t t)
{
	long lo = 0, hi = n;

	while (lo < hi) {
		long mid = lo + (hi - lo) / 2;

		if (e[mid].begin > t)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static void print_entry(FILE *log, const char *tag, const struct lin_entry *e, uint32_t page,
		uint64_t init_version)
{
	if (!e->w && init_version)
		fprintf(log, "  %-9s the state of page %u when the round began: version %" PRIu64
			     "\n", tag, page, init_version);
	else if (!e->w)
		fprintf(log, "  %-9s the state of page %u when the round began: empty\n", tag,
				page);
	else
		fprintf(log,
				"  %-9s %s version %" PRIu64 " pages [%u, %u] began %" PRIu64
				" ended %" PRIu64 "\n",
				tag, e->w->removal ? "REMOVE" : "set", e->w->version, e->w->first,
				e->w->last, e->begin, e->end);
}

/* Print the lookup, the write it returned, the one that proves it stale, and what surrounds them. */
static void print_violation(FILE *log, const char *why, const struct ps_lin_lookup *l,
		const struct lin_page *pg, const struct lin_entry *w, const struct lin_entry *later)
{
	uint64_t from = w ? w->begin : 0;
	long i, shown = 0;

	if (!log)
		return;
	fprintf(log,
			"LINEARIZABILITY VIOLATION: %s\n  lookup    reader %u page %u began %" PRIu64
			" ended %" PRIu64 " returned ",
			why, l->reader, l->page, l->begin, l->end);
	if (l->version)
		fprintf(log, "version %" PRIu64 "\n", l->version);
	else
		fputs("nothing\n", log);
	if (w)
		print_entry(log, "returned", w, l->page, pg->init_version);
	if (later)
		print_entry(log, "overwrote", later, l->page, pg->init_version);
	fprintf(log, "  history of page %u from tick %" PRIu64 " to %" PRIu64
			" (initial version %" PRIu64 "):\n",
			l->page, from, l->end, pg->init_version);
	for (i = 0; i < pg->nall && shown < 40; i++) {
		const struct lin_entry *e = &pg->all[i];

		if (e->end < from || e->begin > l->end)
			continue;
		print_entry(log, "write", e, l->page, pg->init_version);
		shown++;
	}
}

/* Count an illegal lookup; print it in full if it is one of the first few of the round. */
static void illegal(FILE *log, long *violations, const char *why, const struct ps_lin_lookup *l,
		const struct lin_page *pg, const struct lin_entry *w, const struct lin_entry *later)
{
	if (++*violations <= LIN_PRINT_MAX)
		print_violation(log, why, l, pg, w, later);
}

long ps_lin_check(int npages, const struct ps_lin_initial *initial,
		const struct ps_lin_write *writes, long nwrites, const struct ps_lin_lookup *lookups,
		long nlookups, FILE *log)
{
	struct lin_page *pages = calloc((size_t)npages, sizeof(*pages));
	const struct ps_lin_write **byver = malloc(((size_t)nwrites + 1) * sizeof(*byver));
	long *cnt = calloc((size_t)npages, sizeof(*cnt)), *rcnt = calloc((size_t)npages, sizeof(*rcnt));
	long violations = 0, i;
	int p;

	if (!pages || !byver || !cnt || !rcnt)
		abort();
	/* Count, allocate, fill: each page gets its initial state plus every write covering it. */
	for (i = 0; i < nwrites; i++) {
		byver[i] = &writes[i];
		for (p = (int)writes[i].first; p <= (int)writes[i].last && p < npages; p++) {
			cnt[p]++;
			rcnt[p] += writes[i].removal;
		}
	}
	qsort(byver, (size_t)nwrites, sizeof(*byver), write_ver_cmp);
	for (p = 0; p < npages; p++) {
		struct lin_page *pg = &pages[p];

		pg->init = (struct lin_entry){ 0, 0, NULL };
		pg->init_version = initial ? initial[p].version : 0;
		pg->all = malloc((size_t)(cnt[p] + 1) * sizeof(*pg->all));
		pg->sufmin = malloc((size_t)(cnt[p] + 1) * sizeof(*pg->sufmin));
		pg->rm = malloc((size_t)(rcnt[p] + 1) * sizeof(*pg->rm));
		pg->premax = malloc((size_t)(rcnt[p] + 1) * sizeof(*pg->premax));
		if (!pg->all || !pg->sufmin || !pg->rm || !pg->premax)
			abort();
		pg->all[pg->nall++] = pg->init;
		if (!pg->init_version)
			pg->rm[pg->nrm++] = pg->init;
	}
	for (i = 0; i < nwrites; i++) {
		const struct ps_lin_write *w = &writes[i];
		struct lin_entry e = { w->begin, w->end, w };

		for (p = (int)w->first; p <= (int)w->last && p < npages; p++) {
			pages[p].all[pages[p].nall++] = e;
			if (w->removal)
				pages[p].rm[pages[p].nrm++] = e;
		}
	}
	for (p = 0; p < npages; p++) {
		struct lin_page *pg = &pages[p];

		qsort(pg->all, (size_t)pg->nall, sizeof(*pg->all), entry_cmp);
		qsort(pg->rm, (size_t)pg->nrm, sizeof(*pg->rm), entry_cmp);
		for (i = pg->nall - 1; i >= 0; i--)
			pg->sufmin[i] = (i == pg->nall - 1 ||
						pg->all[i].end < pg->all[pg->sufmin[i + 1]].end) ?
						(uint64_t)i :
						pg->sufmin[i + 1];
		for (i = 0; i < pg->nrm; i++)
			pg->premax[i] = (i == 0 || pg->rm[i].end > pg->rm[pg->premax[i - 1]].end) ?
						i :
						pg->premax[i - 1];
	}

	for (i = 0; i < nlookups; i++) {
		const struct ps_lin_lookup *l = &lookups[i];
		struct lin_page *pg;
		const struct lin_entry *w = NULL;
		struct lin_entry found;
		long k;

		if ((int)l->page >= npages) {
			violations++;
			if (log)
				fprintf(log, "lookup of page %u outside the %d pages\n", l->page,
						npages);
			continue;
		}
		pg = &pages[l->page];
		if (l->version == 0) {
			/* Any removal (or an empty initial state) that began before we ended. */
			k = first_begin_after(pg->rm, pg->nrm, l->end - 1) - 1;
			if (k < 0) {
				illegal(log, &violations,
						"returned nothing, but no removal of the page began "
						"before the lookup ended",
						l, pg, NULL, NULL);
				continue;
			}
			w = &pg->rm[pg->premax[k]];
		} else if (l->version == UINT64_MAX) {
			illegal(log, &violations,
					"returned a policy that carries no version", l, pg, NULL, NULL);
			continue;
		} else if (l->version == pg->init_version) {
			w = &pg->init;
		} else {
			struct ps_lin_write key = { .version = l->version };
			const struct ps_lin_write *kp = &key, **hit;

			hit = bsearch(&kp, byver, (size_t)nwrites, sizeof(*byver), write_ver_cmp);
			if (!hit || (*hit)->removal) {
				illegal(log, &violations,
						"returned a version that was never set", l, pg, NULL,
						NULL);
				continue;
			}
			found = (struct lin_entry){ (*hit)->begin, (*hit)->end, *hit };
			w = &found;
			if (l->page < (*hit)->first || l->page > (*hit)->last) {
				illegal(log, &violations,
						"returned a version that does not cover the page", l,
						pg, w, NULL);
				continue;
			}
			if (w->begin >= l->end) {
				illegal(log, &violations,
						"returned a version whose set began after the lookup "
						"ended",
						l, pg, w, NULL);
				continue;
			}
		}
		/* (c): a write covering the page that began after w ended and ended before l began. */
		k = first_begin_after(pg->all, pg->nall, w->end);
		if (k < pg->nall && pg->all[pg->sufmin[k]].end < l->begin) {
			illegal(log, &violations,
					"stale: a later write covering the page ended before the "
					"lookup began",
					l, pg, w, &pg->all[pg->sufmin[k]]);
		}
	}

	if (log && violations > LIN_PRINT_MAX)
		fprintf(log, "... and %ld more illegal lookups (not shown)\n",
				violations - LIN_PRINT_MAX);
	for (p = 0; p < npages; p++) {
		free(pages[p].all);
		free(pages[p].sufmin);
		free(pages[p].rm);
		free(pages[p].premax);
	}
	free(pages);
	free(byver);
	free(cnt);
	free(rcnt);
	return violations;
}

/* ---- the workload ---- */

static atomic_long lin_live; /* polstore allocations not yet freed */

static void *lin_alloc(size_t size, void *ctx)
{
	void *p = malloc(size);

	(void)ctx;
	if (p)
		atomic_fetch_add_explicit(&lin_live, 1, memory_order_relaxed);
	return p;
}

static void lin_free(void *p, void *ctx)
{
	(void)ctx;
	atomic_fetch_sub_explicit(&lin_live, 1, memory_order_relaxed);
	free(p);
}

struct lin_run {
	const struct ps_lin_config *cfg;
	struct ps_store *store;
	int npages;
	_Atomic uint64_t clock;
	uint64_t version_base;
	struct ps_lin_write *writes;
	long round_writes; /* writes per round at most, <= LIN_ROUND_WRITES */
	atomic_long nwrites; /* slots claimed; may exceed round_writes */
	struct ps_lin_lookup *lookups;
	long quota; /* per reader this round */
	atomic_int readers_left;
	atomic_bool stop;
	atomic_long errors;
	pthread_barrier_t start;
};

struct lin_thread {
	struct lin_run *run;
	int id;
	uint64_t seed;
	pthread_t tid;
};

static inline uint64_t lin_tick(struct lin_run *run)
{
	/* seq_cst: the tick order extends the real-time order of the operations around it. */
	return atomic_fetch_add(&run->clock, 1) + 1;
}

static void *lin_writer(void *arg)
{
	struct lin_thread *t = arg;
	struct lin_run *run = t->run;
	int np = run->npages;

	pthread_barrier_wait(&run->start);
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		long slot = atomic_fetch_add(&run->nwrites, 1);
		struct ps_lin_write *w;
		struct ps_policy *pol = NULL;
		uint64_t r = ps_xorshift64s(&t->seed);
		uint32_t first = (uint32_t)(r % (uint64_t)np), len;
		int kind = (int)((r >> 16) % 20);

		if (slot >= run->round_writes)
			break;
		w = &run->writes[slot];
		/* Mostly short ranges (splits and trims), sometimes wide ones. */
		len = (r >> 24) % 4 ? 1 + (uint32_t)((r >> 32) % 4) :
				      1 + (uint32_t)((r >> 32) % (uint64_t)np);
		w->version = run->version_base + (uint64_t)slot;
		w->first = first;
		w->last = first + len - 1 >= (uint32_t)np ? (uint32_t)np - 1 : first + len - 1;
		w->removal = kind < 3;
		if (kind == 0) {
			pol = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0); /* DEFAULT removes too */
		} else if (kind >= 3) {
			pol = ps_lin_encode(w->version);
		}
		if (kind != 1 && kind != 2 && !pol) {
			atomic_fetch_add(&run->errors, 1);
			break;
		}
		w->begin = lin_tick(run);
		if (ps_store_set(run->store, w->first, (uint64_t)w->last + 1, pol))
			atomic_fetch_add(&run->errors, 1);
		w->end = lin_tick(run);
		ps_policy_put(pol);
	}
	return NULL;
}

static void *lin_reader(void *arg)
{
	struct lin_thread *t = arg;
	struct lin_run *run = t->run;
	struct ps_lin_lookup *out = run->lookups + (long)t->id * run->quota;
	bool qsbr_fast = run->cfg->sync == PS_SYNC_RCU_QSBR && (t->id & 1);
	long i;

	if (qsbr_fast)
		ps_qsbr_thread_online();
	pthread_barrier_wait(&run->start);
	for (i = 0; i < run->quota; i++) {
		uint64_t r = ps_xorshift64s(&t->seed);
		uint32_t page = (uint32_t)(r % (uint64_t)run->npages);
		struct ps_lin_lookup *l = &out[i];

		l->page = page;
		l->reader = (uint32_t)t->id;
		if ((r >> 32) & 1) {
			struct ps_policy *pol;

			l->begin = lin_tick(run);
			pol = ps_store_lookup(run->store, page);
			l->end = lin_tick(run);
			l->version = ps_lin_decode(pol);
			ps_policy_put(pol);
		} else {
			/* Borrowed: decode inside the section, where the policy is valid. */
			ps_store_read_lock(run->store);
			l->begin = lin_tick(run);
			l->version = ps_lin_decode(ps_store_lookup_borrow(run->store, page));
			l->end = lin_tick(run);
			ps_store_read_unlock(run->store);
		}
		if (qsbr_fast)
			ps_qsbr_quiescent();
	}
	if (qsbr_fast)
		ps_qsbr_thread_offline();
	if (atomic_fetch_sub(&run->readers_left, 1) == 1)
		atomic_store(&run->stop, true);
	return NULL;
}

int ps_lin_run(const struct ps_lin_config *cfg, struct ps_lin_result *res)
{
	struct ps_alloc_ops ops = { lin_alloc, lin_free, NULL };
	struct ps_lin_initial *initial;
	struct lin_thread *th;
	struct lin_run run;
	FILE *log = cfg->log ? cfg->log : stderr;
	int nthreads = cfg->readers + cfg->writers, i;
	long remaining = cfg->lookups;
	uint64_t seed = cfg->seed ? cfg->seed : 0x9E3779B97F4A7C15ULL;

	memset(res, 0, sizeof(*res));
	memset(&run, 0, sizeof(run));
	if (cfg->readers < 1 || cfg->writers < 1 || cfg->lookups < 1)
		return -1;
	run.cfg = cfg;
	run.npages = cfg->npages > 0 ? cfg->npages : 48;
	run.version_base = 1;
	run.round_writes = cfg->round_writes > 0 && cfg->round_writes < LIN_ROUND_WRITES ?
					   cfg->round_writes :
					   LIN_ROUND_WRITES;
	atomic_store(&lin_live, 0);
	/* Counted allocations: every policy and node must be freed by the end. */
	if (ps_set_alloc_ops(&ops))
		return -1;
	run.store = ps_store_create(cfg->sync);
	initial = calloc((size_t)run.npages, sizeof(*initial));
	th = calloc((size_t)nthreads, sizeof(*th));
	run.writes = calloc(LIN_ROUND_WRITES, sizeof(*run.writes));
	/* A round: LIN_ROUND_LOOKUPS lookups, or one per reader if there are more readers. */
	run.lookups = malloc(((size_t)(cfg->readers > LIN_ROUND_LOOKUPS ? cfg->readers
									: LIN_ROUND_LOOKUPS) +
				     (size_t)run.npages) *
			     sizeof(*run.lookups));
	if (!run.store || !initial || !th || !run.writes || !run.lookups)
		abort();

	/*
	 * Slow writers (an RCU set waits for a grace period) finish few writes
	 * per round: min_writes keeps rounds coming until enough did.
	 */
	while (remaining > 0 || (res->writes < cfg->min_writes && res->rounds < LIN_MAX_ROUNDS)) {
		long nlook, nw, v, page;
		const char *why = NULL;

		run.quota = LIN_ROUND_LOOKUPS / cfg->readers;
		if (run.quota < 1)
			run.quota = 1;
		if (remaining > 0 && run.quota * cfg->readers > remaining)
			run.quota = (remaining + cfg->readers - 1) / cfg->readers;
		atomic_store(&run.nwrites, 0);
		atomic_store(&run.readers_left, cfg->readers);
		atomic_store(&run.stop, false);
		pthread_barrier_init(&run.start, NULL, (unsigned)nthreads);
		for (i = 0; i < nthreads; i++) {
			th[i].run = &run;
			th[i].id = i < cfg->readers ? i : i - cfg->readers;
			th[i].seed = (seed += 0x9E3779B97F4A7C15ULL) | 1;
			if (pthread_create(&th[i].tid, NULL, i < cfg->readers ? lin_reader : lin_writer,
					    &th[i]))
				abort();
		}
		for (i = 0; i < nthreads; i++)
			pthread_join(th[i].tid, NULL);
		pthread_barrier_destroy(&run.start);
		nw = atomic_load(&run.nwrites);
		if (nw > run.round_writes)
			nw = run.round_writes;
		/* A slot claimed after stop was never written: keep only finished writes. */
		for (v = 0; v < nw; v++)
			if (!run.writes[v].end)
				break;
		nw = v;
		nlook = run.quota * cfg->readers;
		/* The state after every write: checked like a lookup, then carried forward. */
		for (page = 0; page < run.npages; page++) {
			struct ps_lin_lookup *l = &run.lookups[nlook + page];
			struct ps_policy *pol;

			l->page = (uint32_t)page;
			l->reader = (uint32_t)cfg->readers; /* "the checker" */
			l->begin = lin_tick(&run);
			pol = ps_store_lookup(run.store, (uint64_t)page);
			l->end = lin_tick(&run);
			l->version = ps_lin_decode(pol);
			ps_policy_put(pol);
		}
		if (ps_store_check(run.store, &why)) {
			fprintf(log, "store invariant broken: %s\n", why);
			res->violations++;
		}
		res->violations += ps_lin_check(run.npages, initial, run.writes, nw, run.lookups,
				nlook + run.npages, log);
		for (page = 0; page < run.npages; page++)
			initial[page].version = run.lookups[nlook + page].version;
		for (v = 0; v < nw; v++) {
			res->removals += run.writes[v].removal;
			run.writes[v].end = 0;
		}
		res->writes += nw;
		res->lookups_checked += nlook + run.npages;
		res->rounds++;
		remaining -= nlook;
		run.version_base += LIN_ROUND_WRITES;
		if (res->violations || atomic_load(&run.errors))
			break;
	}
	if (atomic_load(&run.errors)) {
		fprintf(log, "%ld operations failed unexpectedly\n", (long)atomic_load(&run.errors));
		res->violations++;
	}
	ps_store_destroy(run.store);
	res->live_allocs = atomic_load(&lin_live);
	ps_set_alloc_ops(NULL);
	free(initial);
	free(th);
	free(run.writes);
	free(run.lookups);
	if (res->violations && cfg->abort_on_violation)
		abort();
	return res->violations || res->live_allocs ? -1 : 0;
}
