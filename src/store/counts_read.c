// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Reading a store's access counts (polstore/counts.h): every shard
 * folded under the counts' lock with loads only, the keys merged and
 * matched to the store's ranges of a window (counts.c keeps the counts).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/counts.h>
#include <polstore/store.h>

#include "alloc_internal.h"
#include "annotate.h"
#include "compiler.h"
#include "counts_shard.h"
#include "held.h"
#include "store_internal.h"
#include "variants.h"

struct fold {
	struct psi_cslot *k; /* the keys, merged by start */
	size_t nk, capk;
	uint64_t gaps, lost, epoch;
	struct ps_range_counts *r; /* the store's ranges in the window */
	size_t nr, capr;
	uint64_t start, end; /* the window */
};

static bool fold_shard(struct fold *f, const struct psi_cshard *sh)
{
	const struct psi_cslot *t = PSI_READ_ONCE(sh->slots);
	struct psi_cslot sl;
	size_t i;

	f->gaps += PSI_READ_ONCE(sh->gaps);
	f->lost += PSI_READ_ONCE(sh->lost);
	for (i = 0; t && i <= sh->mask; i++) {
		sl.start = PSI_LOAD_ACQUIRE(t[i].start);
		if (sl.start == PSI_COUNTS_EMPTY)
			continue;
		PSI_ANNOTATE_HAPPENS_AFTER(&t[i].start);
		sl.end = PSI_READ_ONCE(t[i].end);
		sl.rate = psi_counts_slot_read(&t[i], &sl.count, &sl.epoch);
		sl.rate = psi_counts_rate_at(sl.rate, sl.epoch, f->epoch);
		if (!sl.count)
			continue;
		if (!psi_grow((void **)&f->k, &f->capk, f->nk + 1, sizeof(*f->k), 64))
			return false;
		f->k[f->nk++] = sl;
	}
	return true;
}

static int key_cmp(const void *a, const void *b)
{
	const struct psi_cslot *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Every shard's keys, sorted and merged by their first page. */
static int fold_keys(struct _ps_counts *c, struct fold *f)
{
	const struct psi_cshard *sh;
	bool ok = true;
	size_t i, j;

	pthread_mutex_lock(&c->lock);
	f->epoch = PSI_READ_ONCE(c->epoch);
	ok = fold_shard(f, &c->retired);
	for (sh = c->shards; sh && ok; sh = sh->next)
		ok = fold_shard(f, sh);
	pthread_mutex_unlock(&c->lock);
	if (!ok)
		return -ENOMEM;
	if (f->nk)
		qsort(f->k, f->nk, sizeof(*f->k), key_cmp);
	for (i = 0, j = 0; i < f->nk; i++) {
		if (j && f->k[j - 1].start == f->k[i].start) {
			struct psi_cslot *d = &f->k[j - 1];

			d->count += f->k[i].count;
			d->rate += f->k[i].rate;
			d->end = f->k[i].end > d->end ? f->k[i].end : d->end;
			d->epoch = f->k[i].epoch > d->epoch ? f->k[i].epoch : d->epoch;
			continue;
		}
		f->k[j++] = f->k[i];
	}
	f->nk = j;
	return 0;
}

/* ps_store_foreach_range(), from outside read-side sections. */
static int walk(struct ps_store *s, uint64_t start, uint64_t end, ps_foreach_fn fn, void *arg)
{
	if (psi_unlikely(psi_held(s) && psi_variant_has(s, PSI_V_WALK_EXCL)))
		return -EDEADLK;
	return s->ops->foreach_range(s, start, end, fn, arg);
}

static int range_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct fold *f = arg;

	(void)pol;
	if (!psi_grow((void **)&f->r, &f->capr, f->nr + 1, sizeof(*f->r), 64))
		return -ENOMEM;
	f->r[f->nr++] = (struct ps_range_counts){ .start = start, .end = end };
	return 0;
}

/* The first of @f's ranges that ends after @p. */
static size_t range_after(const struct fold *f, uint64_t p)
{
	size_t lo = 0, hi = f->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->r[mid].end <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The ranges of [@start, @end) with their counts: each key goes to the
 * range holding its first page, else to the first that overlaps it.
 * Return: 0, -ENODATA, -ENOMEM; with @gone the keys with no range.
 */
static int fold(struct ps_store *store, uint64_t start, uint64_t end, struct fold *f,
		uint64_t *gone)
{
	struct _ps_counts *c = store ? PSI_LOAD_ACQUIRE(store->counts) : NULL;
	uint64_t lo = start, hi = end;
	size_t i, j;
	int err;

	memset(f, 0, sizeof(*f));
	if (!c)
		return -ENODATA;
	err = fold_keys(c, f);
	if (err)
		return err;
	/*
	 * The window's ranges; the keys that reach them (a key may go to a
	 * range it overlaps, no other); the ranges those keys reach.
	 */
	err = walk(store, start, end, range_fn, f);
	if (err)
		return err < 0 ? err : -ENOMEM;
	if (f->nr) {
		lo = f->r[0].start < lo ? f->r[0].start : lo;
		hi = f->r[f->nr - 1].end > hi ? f->r[f->nr - 1].end : hi;
	}
	start = lo;
	end = hi;
	for (i = 0, j = 0; i < f->nk; i++)
		if (f->k[i].start < end && f->k[i].end > start) {
			lo = f->k[i].start < lo ? f->k[i].start : lo;
			hi = f->k[i].end > hi ? f->k[i].end : hi;
			f->k[j++] = f->k[i];
		}
	f->nk = j;
	if (lo < start || hi > end) {
		f->nr = 0;
		err = walk(store, lo, hi, range_fn, f);
		if (err)
			return err < 0 ? err : -ENOMEM;
	}
	*gone = 0;
	for (i = 0; i < f->nk; i++) {
		j = range_after(f, f->k[i].start);
		if (j < f->nr && f->r[j].start < f->k[i].end) {
			struct ps_range_counts *r = &f->r[j];

			r->count += f->k[i].count;
			r->rate += (double)f->k[i].rate / PSI_COUNTS_RATE_ONE;
			if (f->k[i].epoch > r->last_epoch)
				r->last_epoch = f->k[i].epoch;
		} else {
			*gone += f->k[i].count;
		}
	}
	return 0;
}

static void fold_free(struct fold *f)
{
	psi_free(f->k);
	psi_free(f->r);
}

int ps_store_counts_foreach(struct ps_store *store, uint64_t start, uint64_t end,
		ps_counts_fn fn, void *arg)
{
	struct fold f;
	uint64_t gone;
	size_t i;
	int ret;

	if (!store || !fn || start >= end)
		return -EINVAL;
	ret = fold(store, start, end, &f, &gone);
	for (i = 0; !ret && i < f.nr; i++)
		if (f.r[i].end > start && f.r[i].start < end)
			ret = fn(&f.r[i], arg);
	fold_free(&f);
	return ret;
}

static bool above(const struct ps_range_counts *a, const struct ps_range_counts *b, int by)
{
	if (by == PS_COUNTS_BY_RATE ? a->rate != b->rate : a->count != b->count)
		return by == PS_COUNTS_BY_RATE ? a->rate > b->rate : a->count > b->count;
	return a->start < b->start;
}

int ps_store_counts_top(struct ps_store *store, uint64_t start, uint64_t end, int by,
		struct ps_range_counts *out, size_t n)
{
	size_t i, k = 0, j;
	struct fold f;
	uint64_t gone;
	int ret;

	if (!store || !out || start >= end || (by != PS_COUNTS_BY_COUNT && by != PS_COUNTS_BY_RATE))
		return -EINVAL;
	if (n > INT32_MAX)
		n = INT32_MAX;
	ret = fold(store, start, end, &f, &gone);
	for (i = 0; !ret && i < f.nr; i++) {
		const struct ps_range_counts *r = &f.r[i];

		if (!r->count || r->end <= start || r->start >= end)
			continue;
		if (k == n && (!n || !above(r, &out[n - 1], by)))
			continue;
		/* Insertion into the sorted @out: n is small. */
		j = k < n ? k++ : n - 1;
		for (; j && above(r, &out[j - 1], by); j--)
			out[j] = out[j - 1];
		out[j] = *r;
	}
	fold_free(&f);
	return ret ? ret : (int)k;
}

int ps_store_counts_sum(struct ps_store *store, struct ps_counts_sum *sum)
{
	struct fold f;
	uint64_t gone;
	size_t i;
	int ret;

	if (!store || !sum)
		return -EINVAL;
	ret = fold(store, 0, UINT64_MAX, &f, &gone);
	if (!ret) {
		*sum = (struct ps_counts_sum){ .gaps = f.gaps + f.lost, .gone = gone,
			.epoch = f.epoch };
		for (i = 0; i < f.nr; i++)
			sum->in_ranges += f.r[i].count;
		sum->counted = sum->in_ranges + sum->gaps + sum->gone;
	}
	fold_free(&f);
	return ret;
}
