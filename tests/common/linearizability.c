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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler.h"
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

/* The checker's state for one history. */
struct lin_ctx {
	int npages;
	struct lin_page *pages;
	const struct ps_lin_write **byver; /* by version, for lin_find() */
	long nwrites;
	FILE *log;
	long violations;
};

static const struct ps_lin_write *lin_find(const struct lin_ctx *c, uint64_t version)
{
	struct ps_lin_write key = { .version = version };
	const struct ps_lin_write *kp = &key, **hit;

	hit = bsearch(&kp, c->byver, (size_t)c->nwrites, sizeof(*c->byver), write_ver_cmp);
	return hit ? *hit : NULL;
}

/* Is @w what its batch leaves on @page, i.e. no later op of the batch covers it? */
static bool lin_effective(const struct lin_ctx *c, const struct ps_lin_write *w, uint32_t page)
{
	uint64_t v;

	if (!w->batch)
		return true;
	for (v = w->version + 1; v < w->batch + w->nbatch; v++) {
		const struct ps_lin_write *o = lin_find(c, v);

		if (o && o->first <= page && page <= o->last)
			return false;
	}
	return true;
}

/*
 * Print the lookup (or the window read's page), the write it returned, the
 * one that proves it stale, and what surrounds them.
 */
static void print_violation(FILE *log, const char *why, const struct ps_lin_lookup *l,
		const struct ps_lin_window *win, const struct lin_page *pg,
		const struct lin_entry *w, const struct lin_entry *later)
{
	uint64_t from = w ? w->begin : 0;
	long i, shown = 0;

	if (!log)
		return;
	fprintf(log,
			"LINEARIZABILITY VIOLATION: %s\n  %-9s reader %u page %u began %" PRIu64
			" ended %" PRIu64 " returned ",
			why, win ? "window" : "lookup", l->reader, l->page, l->begin, l->end);
	if (l->version)
		fprintf(log, "version %" PRIu64 "\n", l->version);
	else
		fputs("nothing\n", log);
	if (win) {
		uint32_t p;

		fprintf(log, "  the %s read pages [%u, %u] at once:",
				win->next ? "next()" : "window", win->first, win->last);
		for (p = win->first; p <= win->last && p < win->first + 16; p++)
			fprintf(log, " %u:%" PRIu64, p, win->versions[p - win->first]);
		if (p <= win->last)
			fprintf(log, " ... %u:%" PRIu64, win->last,
					win->versions[win->last - win->first]);
		fputs("\n", log);
	}
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

/* Count an illegal result; print it in full if it is one of the first few of the round. */
static void illegal(struct lin_ctx *c, const char *why, const struct ps_lin_lookup *l,
		const struct ps_lin_window *win, const struct lin_page *pg,
		const struct lin_entry *w, const struct lin_entry *later)
{
	if (++c->violations <= LIN_PRINT_MAX)
		print_violation(c->log, why, l, win, pg, w, later);
}

/*
 * The write a result names, checked for (a), (b) and for a batch seen in
 * part; false (after counting a violation) when there is none.  "Nothing"
 * names the removal (or empty initial state) that ended last among those
 * covering the page that began before the read ended: the hardest to
 * prove stale.
 */
static bool lin_resolve(struct lin_ctx *c, const struct ps_lin_lookup *l,
		const struct ps_lin_window *win, struct lin_entry *out)
{
	const struct ps_lin_write *hit;
	struct lin_page *pg;
	long k;

	if ((int)l->page >= c->npages) {
		c->violations++;
		if (c->log)
			fprintf(c->log, "lookup of page %u outside the %d pages\n", l->page,
					c->npages);
		return false;
	}
	pg = &c->pages[l->page];
	if (l->version == 0) {
		k = first_begin_after(pg->rm, pg->nrm, l->end - 1) - 1;
		if (k < 0) {
			illegal(c,
					"returned nothing, but no removal of the page began before "
					"the lookup ended",
					l, win, pg, NULL, NULL);
			return false;
		}
		*out = pg->rm[pg->premax[k]];
		return true;
	}
	if (l->version == UINT64_MAX) {
		illegal(c, "returned a policy that carries no version", l, win, pg, NULL, NULL);
		return false;
	}
	if (l->version == pg->init_version) {
		*out = pg->init;
		return true;
	}
	hit = lin_find(c, l->version);
	if (!hit || hit->removal) {
		illegal(c, "returned a version that was never set", l, win, pg, NULL, NULL);
		return false;
	}
	*out = (struct lin_entry){ hit->begin, hit->end, hit };
	if (l->page < hit->first || l->page > hit->last) {
		illegal(c, "returned a version that does not cover the page", l, win, pg, out, NULL);
		return false;
	}
	if (!lin_effective(c, hit, l->page)) {
		illegal(c,
				"returned an op of a batch that a later op of the same batch "
				"overwrote on this page: part of a batch seen without the rest",
				l, win, pg, out, NULL);
		return false;
	}
	if (out->begin >= l->end) {
		illegal(c, "returned a version whose set began after the lookup ended", l, win,
				pg, out, NULL);
		return false;
	}
	return true;
}

/*
 * (c): a write covering the page that began after @w ended and ended before
 * @begin (the read's begin, or later for a window: see linearizability.h).
 */
static void lin_stale(struct lin_ctx *c, const struct ps_lin_lookup *l,
		const struct ps_lin_window *win, const struct lin_entry *w, uint64_t begin)
{
	struct lin_page *pg = &c->pages[l->page];
	long k = first_begin_after(pg->all, pg->nall, w->end);

	if (k < pg->nall && pg->all[pg->sufmin[k]].end < begin)
		illegal(c, "stale: a later write covering the page ended before the lookup began",
				l, win, pg, w, &pg->all[pg->sufmin[k]]);
}

static struct ps_lin_lookup lin_window_page(const struct ps_lin_window *win, uint32_t i)
{
	return (struct ps_lin_lookup){ win->begin, win->end, win->versions[i], win->first + i,
		win->reader };
}

/* One window read; @seen has room for every page.  At most one violation per window. */
static void lin_check_window(struct lin_ctx *c, const struct ps_lin_window *win,
		struct lin_entry *seen)
{
	uint64_t begin = win->begin;
	long before = c->violations;
	uint32_t n, i, q;

	if (win->last < win->first || (int)win->last >= c->npages) {
		c->violations++;
		if (c->log)
			fprintf(c->log, "window read of pages [%u, %u] outside the %d pages\n",
					win->first, win->last, c->npages);
		return;
	}
	n = win->last - win->first + 1;
	for (i = 0; i < n; i++) {
		struct ps_lin_lookup l = lin_window_page(win, i);

		if (!lin_resolve(c, &l, win, &seen[i]))
			return;
		/* A write seen was linearized before the read: so was all that ended before it began. */
		if (l.version && seen[i].w && seen[i].begin > begin)
			begin = seen[i].begin;
	}
	for (i = 0; i < n && c->violations == before; i++) {
		struct ps_lin_lookup l = lin_window_page(win, i);

		lin_stale(c, &l, win, &seen[i], begin);
	}
	/*
	 * A write seen, and every op of its batch, was linearized before the
	 * read: no page it leaves its mark on may show what certainly preceded
	 * it (ended before it began; the initial state ended at tick 0).
	 */
	for (i = 0; i < n && c->violations == before; i++) {
		const struct ps_lin_write *x = seen[i].w;
		uint64_t v, v0, v1;

		if (!win->versions[i] || !x)
			continue;
		v0 = x->batch ? x->batch : x->version;
		v1 = x->batch ? x->batch + x->nbatch : x->version + 1;
		for (v = v0; v < v1 && c->violations == before; v++) {
			const struct ps_lin_write *z = v == x->version ? x : lin_find(c, v);
			uint32_t lo, hi;

			if (!z)
				continue;
			lo = z->first > win->first ? z->first : win->first;
			hi = z->last < win->last ? z->last : win->last;
			for (q = lo; q <= hi && z->first <= hi; q++) {
				const struct lin_entry *y = &seen[q - win->first];
				struct ps_lin_lookup l = lin_window_page(win, q - win->first);
				struct lin_entry ze = { z->begin, z->end, z };
				char why[160];

				if (y->w == z || !lin_effective(c, z, q) || y->end >= z->begin)
					continue;
				snprintf(why, sizeof(why),
						"torn window: page %u shows version %" PRIu64
						", so this page must show what %s left here",
						win->first + i, win->versions[i],
						z == x ? "that write" : "that write's batch");
				illegal(c, why, &l, win, &c->pages[q], y, &ze);
				break;
			}
		}
	}
}

long ps_lin_check(int npages, const struct ps_lin_initial *initial,
		const struct ps_lin_write *writes, long nwrites, const struct ps_lin_lookup *lookups,
		long nlookups, FILE *log)
{
	return ps_lin_check_windows(npages, initial, writes, nwrites, lookups, nlookups, NULL, 0,
			log);
}

long ps_lin_check_windows(int npages, const struct ps_lin_initial *initial,
		const struct ps_lin_write *writes, long nwrites, const struct ps_lin_lookup *lookups,
		long nlookups, const struct ps_lin_window *windows, long nwindows, FILE *log)
{
	struct lin_page *pages = calloc((size_t)npages, sizeof(*pages));
	const struct ps_lin_write **byver = malloc(((size_t)nwrites + 1) * sizeof(*byver));
	long *cnt = calloc((size_t)npages, sizeof(*cnt)), *rcnt = calloc((size_t)npages, sizeof(*rcnt));
	struct lin_entry *seen = malloc(((size_t)npages + 1) * sizeof(*seen));
	struct lin_ctx c = { npages, pages, byver, nwrites, log, 0 };
	long i;
	int p;

	if (!pages || !byver || !cnt || !rcnt || !seen)
		abort();
	/* Count (an upper bound: ops a later op of their batch hides are left out below). */
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
	/* Each page gets its initial state plus every write that leaves its mark on it. */
	for (i = 0; i < nwrites; i++) {
		const struct ps_lin_write *w = &writes[i];
		struct lin_entry e = { w->begin, w->end, w };

		for (p = (int)w->first; p <= (int)w->last && p < npages; p++) {
			if (!lin_effective(&c, w, (uint32_t)p))
				continue;
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
		struct lin_entry w;

		if (lin_resolve(&c, &lookups[i], NULL, &w))
			lin_stale(&c, &lookups[i], NULL, &w, lookups[i].begin);
	}
	for (i = 0; i < nwindows; i++)
		lin_check_window(&c, &windows[i], seen);

	if (log && c.violations > LIN_PRINT_MAX)
		fprintf(log, "... and %ld more illegal lookups (not shown)\n",
				c.violations - LIN_PRINT_MAX);
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
	free(seen);
	return c.violations;
}

/* ---- the workload ---- */

static long lin_live; /* polstore allocations not yet freed */

static void *lin_alloc(size_t size, void *ctx)
{
	void *p = malloc(size);

	(void)ctx;
	if (p)
		PSI_FETCH_ADD(lin_live, 1, RELAXED);
	return p;
}

static void lin_free(void *p, void *ctx)
{
	(void)ctx;
	PSI_FETCH_SUB(lin_live, 1, RELAXED);
	free(p);
}

#define LIN_BATCH_MAX 4 /* ops per ps_store_set_many() batch: 2 .. LIN_BATCH_MAX */
#define LIN_WINDOW_MAX 8 /* pages per ps_store_foreach_range() window, and room per read */
#define LIN_NEXT_SPAN 64 /* pages a ps_store_next() read records at most */

struct lin_run {
	const struct ps_lin_config *cfg;
	struct ps_store *store;
	int npages;
	uint64_t clock;
	uint64_t version_base;
	struct ps_lin_write *writes;
	long round_writes; /* writes per round at most, <= LIN_ROUND_WRITES */
	long nwrites; /* slots claimed; may exceed round_writes */
	long batches;
	struct ps_lin_lookup *lookups;
	struct ps_lin_window *windows; /* [readers * quota], each reader's from id * quota */
	/* [readers * quota * LIN_WINDOW_MAX], each reader's from id * quota * LIN_WINDOW_MAX */
	uint64_t *wversions;
	long quota; /* reads per reader this round */
	int readers_left;
	bool stop;
	long errors;
	pthread_barrier_t start;
};

struct lin_thread {
	struct lin_run *run;
	int id;
	uint64_t seed;
	pthread_t tid;
	long nlookups, nwindows; /* what a reader recorded this round */
	long nversions; /* entries of its wversions its windows took */
};

static inline uint64_t lin_tick(struct lin_run *run)
{
	/* seq_cst: the tick order extends the real-time order of the operations around it. */
	return PSI_FETCH_ADD(run->clock, 1, SEQ_CST) + 1;
}

/* A random write with @version (all but its interval); *@pol is what to set (NULL removes). */
static bool lin_make_write(struct lin_thread *t, struct ps_lin_write *w, uint64_t version,
		struct ps_policy **pol)
{
	int np = t->run->npages;
	uint64_t r = ps_xorshift64s(&t->seed);
	uint32_t first = (uint32_t)(r % (uint64_t)np), len;
	int kind = (int)((r >> 16) % 20);

	/* Mostly short ranges (splits and trims), sometimes wide ones. */
	len = (r >> 24) % 4 ? 1 + (uint32_t)((r >> 32) % 4) : 1 + (uint32_t)((r >> 32) % (uint64_t)np);
	w->version = version;
	w->first = first;
	w->last = first + len - 1 >= (uint32_t)np ? (uint32_t)np - 1 : first + len - 1;
	w->removal = kind < 3;
	w->batch = 0;
	w->nbatch = 0;
	*pol = NULL;
	if (kind == 0)
		*pol = ps_policy_create(PS_MPOL_DEFAULT, 0, NULL, 0); /* DEFAULT removes too */
	else if (kind >= 3)
		*pol = ps_lin_encode(w->version);
	return kind == 1 || kind == 2 || *pol;
}

static void *lin_writer(void *arg)
{
	struct lin_thread *t = arg;
	struct lin_run *run = t->run;

	pthread_barrier_wait(&run->start);
	while (!PSI_READ_ONCE(run->stop)) {
		struct ps_policy *pols[LIN_BATCH_MAX] = { NULL };
		struct ps_set_op ops[LIN_BATCH_MAX];
		uint64_t r = ps_xorshift64s(&t->seed), begin, end;
		/* One write in four is a batch of 2 .. LIN_BATCH_MAX ops (may overlap each other). */
		int m = !run->cfg->singles_only && r % 4 == 0 ?
					2 + (int)((r >> 8) % (LIN_BATCH_MAX - 1)) :
					1;
		long slot = PSI_FETCH_ADD(run->nwrites, m, SEQ_CST);
		bool ok = true;
		int j, ret;

		if (slot + m > run->round_writes)
			break;
		for (j = 0; j < m; j++) {
			struct ps_lin_write *w = &run->writes[slot + j];

			ok = ok && lin_make_write(t, w, run->version_base + (uint64_t)(slot + j),
						   &pols[j]);
			if (m > 1) {
				w->batch = run->version_base + (uint64_t)slot;
				w->nbatch = (uint32_t)m;
			}
			ops[j] = (struct ps_set_op){ w->first, (uint64_t)w->last + 1, pols[j] };
		}
		if (!ok) {
			PSI_FETCH_ADD(run->errors, 1, SEQ_CST);
			for (j = 0; j < m; j++)
				ps_policy_put(pols[j]);
			break;
		}
		begin = lin_tick(run);
		if (m > 1)
			ret = ps_store_set_many(run->store, ops, (size_t)m);
		else
			ret = ps_store_set(run->store, ops[0].start, ops[0].end, ops[0].pol);
		end = lin_tick(run);
		if (ret)
			PSI_FETCH_ADD(run->errors, 1, SEQ_CST);
		for (j = 0; j < m; j++) {
			run->writes[slot + j].begin = begin;
			run->writes[slot + j].end = end;
			ps_policy_put(pols[j]);
		}
		if (m > 1)
			PSI_FETCH_ADD(run->batches, 1, SEQ_CST);
	}
	return NULL;
}

/* A window read's callback: ranges must come ascending, disjoint and overlapping the window. */
struct lin_wread {
	uint64_t *v;
	uint32_t first, last;
	uint64_t prev_end;
	bool bad;
};

static int lin_window_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct lin_wread *w = arg;
	uint64_t version = ps_lin_decode(pol), p;

	if (start < w->prev_end || start >= end || end <= w->first || start > w->last)
		w->bad = true;
	w->prev_end = end;
	for (p = start > w->first ? start : w->first; p < end && p <= w->last; p++)
		w->v[p - w->first] = version;
	return 0;
}

/*
 * Fill @win (pages from @page, versions in @v) with a
 * ps_store_foreach_range() read of up to LIN_WINDOW_MAX pages, or a
 * ps_store_next() read: the hole before the range it found and the
 * range's first page (up to LIN_NEXT_SPAN pages; the pages after @page
 * when it found none), so that a range from a newer version than the
 * hole shows as a torn window.
 */
static bool lin_read_window(struct lin_thread *t, struct ps_lin_window *win, uint64_t *v,
		uint32_t page, uint64_t r)
{
	struct lin_run *run = t->run;
	uint32_t last = page + (uint32_t)((r >> 40) % LIN_WINDOW_MAX), span, p;
	bool window = (r >> 32) % 8 != 7;

	span = (uint32_t)run->npages - page;
	if (span > LIN_NEXT_SPAN)
		span = LIN_NEXT_SPAN;
	if (last >= (uint32_t)run->npages)
		last = (uint32_t)run->npages - 1;
	win->first = page;
	win->reader = (uint32_t)t->id;
	win->versions = v;
	win->next = !window;
	if (window) {
		for (p = page; p <= last; p++)
			v[p - page] = 0;
		struct lin_wread w = { v, page, last, 0, false };

		win->begin = lin_tick(run);
		if (ps_store_foreach_range(run->store, page, (uint64_t)last + 1, lin_window_fn, &w))
			w.bad = true;
		win->end = lin_tick(run);
		win->last = last;
		return !w.bad;
	}
	/* ps_store_next(): the range after @page and the hole before it, at one point. */
	{
		bool borrow = (r >> 48) & 1;
		uint64_t start = 0, end = 0, version;
		const struct ps_policy *bp = NULL;
		struct ps_policy *pol = NULL;
		int ret;

		if (borrow) {
			ps_store_read_lock(run->store);
			win->begin = lin_tick(run);
			ret = ps_store_next_borrow(run->store, page, &start, &end, &bp);
			win->end = lin_tick(run);
			version = ret ? 0 : ps_lin_decode(bp);
			ps_store_read_unlock(run->store);
		} else {
			win->begin = lin_tick(run);
			ret = ps_store_next(run->store, page, &start, &end, &pol);
			win->end = lin_tick(run);
			version = ret ? 0 : ps_lin_decode(pol);
			ps_policy_put(pol);
		}
		if (ret == -ENOENT) {
			/* Nothing ends after @page: every page from it is empty. */
			last = page + span - 1;
			for (p = page; p <= last; p++)
				v[p - page] = 0;
			win->last = last;
			return true;
		}
		if (ret || end <= page || start >= end)
			return false;
		/* The hole [page, start), then the range's first page (if within the span). */
		if (start > last)
			last = start < (uint64_t)page + span ? (uint32_t)start : page + span - 1;
		if (end - 1 < last)
			last = (uint32_t)(end - 1);
		for (p = page; p <= last; p++)
			v[p - page] = p < start ? 0 : version;
		win->last = last;
		return true;
	}
}

static void *lin_reader(void *arg)
{
	struct lin_thread *t = arg;
	struct lin_run *run = t->run;
	struct ps_lin_lookup *out = run->lookups + (long)t->id * run->quota;
	struct ps_lin_window *wout = run->windows + (long)t->id * run->quota;
	uint64_t *vout = run->wversions + (long)t->id * run->quota * LIN_WINDOW_MAX;
	bool qsbr_fast = (ps_sync_caps(run->cfg->sync) & PS_CAP_QSBR) && (t->id & 1);
	long i;

	t->nlookups = t->nwindows = t->nversions = 0;
	if (qsbr_fast)
		ps_qsbr_thread_online();
	pthread_barrier_wait(&run->start);
	for (i = 0; i < run->quota; i++) {
		uint64_t r = ps_xorshift64s(&t->seed);
		uint32_t page = (uint32_t)(r % (uint64_t)run->npages);
		struct ps_lin_lookup *l;

		/*
		 * Three reads in eight see a window (two foreach_range, one
		 * next), while the reader's room for versions lasts
		 * (LIN_WINDOW_MAX a read; a window takes at most that, a
		 * next() read up to LIN_NEXT_SPAN).
		 */
		if (!run->cfg->singles_only && (r >> 32) % 8 >= 5 &&
				t->nversions + LIN_NEXT_SPAN <= run->quota * LIN_WINDOW_MAX) {
			struct ps_lin_window *win = &wout[t->nwindows];

			if (!lin_read_window(t, win, vout + t->nversions, page, r)) {
				fprintf(run->cfg->log ? run->cfg->log : stderr,
						"window read from page %u: ranges out of order, "
						"overlapping, or outside the window\n",
						page);
				PSI_FETCH_ADD(run->errors, 1, SEQ_CST);
			}
			t->nversions += win->last - win->first + 1;
			t->nwindows++;
			goto next;
		}
		l = &out[t->nlookups++];
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
next:
		if (qsbr_fast)
			ps_qsbr_quiescent();
	}
	if (qsbr_fast)
		ps_qsbr_thread_offline();
	if (PSI_FETCH_SUB(run->readers_left, 1, SEQ_CST) == 1)
		PSI_STORE_SEQ_CST(run->stop, true);
	return NULL;
}

int ps_lin_run(const struct ps_lin_config *cfg, struct ps_lin_result *res)
{
	struct ps_alloc_ops ops = {.alloc = lin_alloc, .free = lin_free};
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
	PSI_STORE_SEQ_CST(lin_live, 0);
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
	run.windows = malloc((size_t)(cfg->readers > LIN_ROUND_LOOKUPS ? cfg->readers
								    : LIN_ROUND_LOOKUPS) *
			     sizeof(*run.windows));
	run.wversions = malloc((size_t)(cfg->readers > LIN_ROUND_LOOKUPS ? cfg->readers
									: LIN_ROUND_LOOKUPS) *
			       LIN_WINDOW_MAX * sizeof(*run.wversions));
	if (!run.store || !initial || !th || !run.writes || !run.lookups || !run.windows ||
			!run.wversions)
		abort();

	/*
	 * Slow writers (an RCU set waits for a grace period) finish few writes
	 * per round: min_writes keeps rounds coming until enough did.
	 */
	while (remaining > 0 || (res->writes < cfg->min_writes && res->rounds < LIN_MAX_ROUNDS)) {
		long nlook, nwin, nw, v, page;
		const char *why = NULL;

		run.quota = LIN_ROUND_LOOKUPS / cfg->readers;
		if (run.quota < 1)
			run.quota = 1;
		if (remaining > 0 && run.quota * cfg->readers > remaining)
			run.quota = (remaining + cfg->readers - 1) / cfg->readers;
		PSI_STORE_SEQ_CST(run.nwrites, 0);
		PSI_STORE_SEQ_CST(run.readers_left, cfg->readers);
		PSI_STORE_SEQ_CST(run.stop, false);
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
		nw = PSI_LOAD_SEQ_CST(run.nwrites);
		if (nw > run.round_writes)
			nw = run.round_writes;
		/* A slot claimed after stop was never written: keep only finished writes. */
		for (v = 0; v < nw; v++)
			if (!run.writes[v].end)
				break;
		nw = v;
		/* Each reader's lookups and windows, packed in reader order. */
		for (i = 0, nlook = 0, nwin = 0; i < cfg->readers; i++) {
			memmove(&run.lookups[nlook], &run.lookups[(long)i * run.quota],
					(size_t)th[i].nlookups * sizeof(*run.lookups));
			memmove(&run.windows[nwin], &run.windows[(long)i * run.quota],
					(size_t)th[i].nwindows * sizeof(*run.windows));
			nlook += th[i].nlookups;
			nwin += th[i].nwindows;
		}
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
		res->violations += ps_lin_check_windows(run.npages, initial, run.writes, nw,
				run.lookups, nlook + run.npages, run.windows, nwin, log);
		for (page = 0; page < run.npages; page++)
			initial[page].version = run.lookups[nlook + page].version;
		for (v = 0; v < nw; v++) {
			res->removals += run.writes[v].removal;
			run.writes[v].end = 0;
		}
		res->writes += nw;
		res->lookups_checked += nlook + nwin + run.npages;
		res->windows_checked += nwin;
		res->rounds++;
		remaining -= nlook + nwin;
		run.version_base += LIN_ROUND_WRITES;
		if (res->violations || PSI_LOAD_SEQ_CST(run.errors))
			break;
	}
	if (PSI_LOAD_SEQ_CST(run.errors)) {
		fprintf(log, "%ld operations failed unexpectedly\n", (long)PSI_LOAD_SEQ_CST(run.errors));
		res->violations++;
	}
	res->batches = PSI_LOAD_SEQ_CST(run.batches);
	ps_store_destroy(run.store);
	res->live_allocs = PSI_LOAD_SEQ_CST(lin_live);
	ps_set_alloc_ops(NULL);
	free(initial);
	free(th);
	free(run.writes);
	free(run.lookups);
	free(run.windows);
	free(run.wversions);
	if (res->violations && cfg->abort_on_violation)
		abort();
	return res->violations || res->live_allocs ? -1 : 0;
}
