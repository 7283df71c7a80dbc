// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Reading, printing and resetting lock statistics (polstore/lockstat.h).
 * The table layout follows /proc/lock_stat: a 40-column class name with a
 * -W/-R suffix, counts in 14 columns, times in microseconds with two
 * decimals.
 */
#include <errno.h>
#include <string.h>

#include <polstore/lockstat.h>

#include "store_internal.h"
#include "variants.h"

#ifdef POLSTORE_LOCK_STAT
static void row_from_class(struct ps_lock_stat_row *row, const struct psi_lstat_class *c)
{
	row->con_bounces = PSI_READ_ONCE(c->con_bounces);
	row->contentions = PSI_READ_ONCE(c->contentions);
	row->wait_min_ns = PSI_READ_ONCE(c->wait_min);
	row->wait_max_ns = PSI_READ_ONCE(c->wait_max);
	row->wait_total_ns = PSI_READ_ONCE(c->wait_total);
	row->acq_bounces = PSI_READ_ONCE(c->acq_bounces);
	row->acquisitions = PSI_READ_ONCE(c->acquisitions);
	row->hold_min_ns = PSI_READ_ONCE(c->hold_min);
	row->hold_max_ns = PSI_READ_ONCE(c->hold_max);
	row->hold_total_ns = PSI_READ_ONCE(c->hold_total);
}
#endif

int ps_store_lock_stat_read(struct ps_store *store, struct ps_lock_stat_row rows[2])
{
#ifdef POLSTORE_LOCK_STAT
	struct psi_lstat *st;

	if (!store || !rows)
		return -EINVAL;
	memset(rows, 0, 2 * sizeof(*rows));
	st = store->ops->lock_stat(store);
	if (st) {
		row_from_class(&rows[PS_LOCK_STAT_WRITE], &st->cls[PS_LOCK_STAT_WRITE]);
		row_from_class(&rows[PS_LOCK_STAT_READ], &st->cls[PS_LOCK_STAT_READ]);
	}
	return 0;
#else
	/* As documented: NULL arguments are EINVAL whether or not lock_stat is built in. */
	return store && rows ? -EOPNOTSUPP : -EINVAL;
#endif
}

int ps_store_lock_stat_reset(struct ps_store *store)
{
#ifdef POLSTORE_LOCK_STAT
	struct psi_lstat *st;

	if (!store)
		return -EINVAL;
	st = store->ops->lock_stat(store);
	if (st)
		memset(st, 0, sizeof(*st));
	return 0;
#else
	return store ? -EOPNOTSUPP : -EINVAL;
#endif
}

static void print_time(FILE *out, uint64_t ns)
{
	fprintf(out, " %11llu.%02llu", (unsigned long long)(ns / 1000),
			(unsigned long long)(ns % 1000 / 10));
}

/* Bounces, count, then min, max, total and average time: the wait and the hold halves. */
static void print_half(FILE *out, uint64_t bounces, uint64_t count, uint64_t min_ns,
		uint64_t max_ns, uint64_t total_ns)
{
	fprintf(out, " %14llu %14llu", (unsigned long long)bounces, (unsigned long long)count);
	print_time(out, min_ns);
	print_time(out, max_ns);
	print_time(out, total_ns);
	print_time(out, count ? total_ns / count : 0);
}

static void print_row(FILE *out, const char *name, char dir, const struct ps_lock_stat_row *r)
{
	fprintf(out, "%38s-%c:", name, dir);
	print_half(out, r->con_bounces, r->contentions, r->wait_min_ns, r->wait_max_ns,
			r->wait_total_ns);
	print_half(out, r->acq_bounces, r->acquisitions, r->hold_min_ns, r->hold_max_ns,
			r->hold_total_ns);
	fputc('\n', out);
}

int ps_store_lock_stat_print(struct ps_store *store, const char *name, bool header, FILE *out)
{
	struct ps_lock_stat_row rows[2];
	char defname[64];
	int ret;

	if (!store || !out)
		return -EINVAL;
	ret = ps_store_lock_stat_read(store, rows);
	if (ret)
		return ret;
	if (!name) {
		snprintf(defname, sizeof(defname), "%s->lock", ps_sync_name(store->sync));
		name = defname;
	}
	if (header) {
		static const char *const cols[] = { "con-bounces", "contentions", "waittime-min",
			"waittime-max", "waittime-total", "waittime-avg", "acq-bounces",
			"acquisitions", "holdtime-min", "holdtime-max", "holdtime-total",
			"holdtime-avg" };
		size_t i;

		fprintf(out, "lock_stat version 0.4\n");
		for (i = 0; i < 234; i++)
			fputc('-', out);
		fprintf(out, "\n%40s ", "class name");
		for (i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
			fprintf(out, " %14s", cols[i]);
		fputc('\n', out);
		for (i = 0; i < 234; i++)
			fputc('-', out);
		fputc('\n', out);
	}
	print_row(out, name, 'W', &rows[PS_LOCK_STAT_WRITE]);
	/* A lock readers share shows its read row even when empty. */
	if (rows[PS_LOCK_STAT_READ].acquisitions || psi_variant_has(store, PSI_V_SECTION_SHARED))
		print_row(out, name, 'R', &rows[PS_LOCK_STAT_READ]);
	return 0;
}
