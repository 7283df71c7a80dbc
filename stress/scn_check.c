// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress --check: the linearizability oracle (linearizability.h)
 * over the library's store variants, with rank counts below and above the
 * number of CPUs.
 *
 * Each configuration is one ps_lin_run(): readers look pages up (counted
 * and borrowed lookups, QSBR readers half explicit-online) and read windows
 * of pages (ps_store_foreach_range(), ps_store_next()) while writers set
 * and remove versioned policies, alone or in ps_store_set_many() batches; every lookup is checked against the
 * history, and every allocation the library made must be freed by the end.
 * An illegal lookup prints the slice of history that proves it and aborts
 * (a core dump to debug); a leak aborts too.  This mode measures no speed:
 * the clock every operation ticks is one shared counter.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "linearizability.h"
#include "stress.h"

#define CHECK_MAX_CONFIGS STRESS_MAX_LIST

struct check_config {
	int readers, writers;
};

/* A store variant --check accepts: the five library variants (":noref" is the same store). */
static int check_variant(const char *name)
{
	char buf[64];
	size_t n = strlen(name);

	if (n > 6 && !strcmp(name + n - 6, ":noref"))
		n -= 6;
	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, name, n);
	buf[n] = '\0';
	return ps_sync_from_name(buf);
}

bool stress_check_variant_known(const char *name)
{
	return check_variant(name) >= 0;
}

/*
 * The configurations: the --ranks list with --writers writers each when
 * either was given; otherwise one below the CPU count (half the CPUs as
 * readers, one writer: writers never overlap, so the check is exact) and
 * one above it (2 x CPUs readers and two writers, which overlap).
 */
static int check_configs(struct check_config *c)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int n = 0, i;

	if (ncpu < 1)
		ncpu = 1;
	if (stress_opts.ranks_given || stress_opts.writers_given) {
		for (i = 0; i < stress_opts.nranks; i++) {
			c[n].readers = stress_opts.ranks[i];
			c[n].writers = stress_opts.writers;
			n++;
		}
		return n;
	}
	c[n].readers = ncpu / 2 > 0 ? (int)(ncpu / 2) : 1;
	c[n].writers = 1;
	n++;
	c[n].readers = (int)(2 * ncpu);
	c[n].writers = 2;
	n++;
	return n;
}

static void check_print(const char *variant, const struct check_config *c,
		const struct ps_lin_result *r, int npages, double secs)
{
	if (stress_opts.json) {
		printf("{\"scenario\":\"check\",\"variant\":\"%s\",\"readers\":%d,\"writers\":%d,"
		       "\"pages\":%d,\"lookups_checked\":%ld,\"windows_checked\":%ld,"
		       "\"writes\":%ld,\"removals\":%ld,\"batches\":%ld,"
		       "\"rounds\":%ld,\"violations\":%ld,\"leaked\":%ld,\"seconds\":%.3f}\n",
				variant, c->readers, c->writers, npages, r->lookups_checked,
				r->windows_checked, r->writes, r->removals, r->batches, r->rounds,
				r->violations, r->live_allocs, secs);
	} else if (stress_opts.csv) {
		printf("check,%s,%d,%d,%d,%ld,%ld,%ld,%ld,%ld,%ld,%.3f,%ld,%ld\n", variant,
				c->readers, c->writers, npages, r->lookups_checked, r->writes,
				r->removals, r->rounds, r->violations, r->live_allocs, secs,
				r->windows_checked, r->batches);
	} else {
		printf("%-9s %7d %7d %15ld %9ld %12ld %12ld %9ld %10ld %6ld %8.1f\n", variant,
				c->readers, c->writers, r->lookups_checked, r->windows_checked,
				r->writes, r->removals, r->batches, r->violations, r->live_allocs,
				secs);
	}
	fflush(stdout);
}

int stress_run_check(void)
{
	struct check_config configs[CHECK_MAX_CONFIGS];
	int nconf = check_configs(configs), npages, s, i;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long total = 0, configs_run = 0;

	npages = stress_opts.pages_given ? (int)stress_opts.pages : 48;
	if (stress_opts.csv)
		printf("scenario,variant,readers,writers,pages,lookups_checked,writes,removals,"
		       "rounds,violations,leaked,seconds,windows_checked,batches\n");
	else if (!stress_opts.json)
		printf("linearizability check: >= %ld lookups and >= %ld writes per configuration, "
		       "%d pages, %ld CPUs, seed %" PRIu64
		       "\n%-9s %7s %7s %15s %9s %12s %12s %9s %10s %6s %8s\n",
				stress_opts.check_lookups, stress_opts.check_writes, npages, ncpu,
				stress_opts.seed, "variant",
				"readers", "writers", "reads checked", "(windows)", "writes",
				"removals", "(batches)", "violations", "leaked", "seconds");
	for (s = 0; s < STRESS_NSYNC; s++) {
		const char *name = ps_sync_name((enum ps_sync)s);
		char noref[64];

		snprintf(noref, sizeof(noref), "%s:noref", name);
		if (!stress_variant_selected(name) && !stress_variant_selected(noref))
			continue;
		for (i = 0; i < nconf; i++) {
			struct ps_lin_config cfg = {
				.sync = (enum ps_sync)s,
				.readers = configs[i].readers,
				.writers = configs[i].writers,
				.lookups = stress_opts.check_lookups,
				.min_writes = stress_opts.check_writes,
				.npages = npages,
				.seed = stress_seed_for(stress_opts.seed, (uint64_t)(s * 64 + i)),
				.log = stderr,
				.abort_on_violation = true,
			};
			struct ps_lin_result res;
			uint64_t t0 = stress_now_ns();
			int ret;

			stress_progress("check %s: %d readers, %d writers", name, cfg.readers,
					cfg.writers);
			ret = ps_lin_run(&cfg, &res);
			check_print(name, &configs[i], &res, npages,
					(double)(stress_now_ns() - t0) / 1e9);
			if (res.writes < cfg.min_writes)
				fprintf(stderr,
						"polstore-stress: check %s: the writers finished only "
						"%ld of the %ld writes asked for in %ld rounds (lookups "
						"were still checked)\n",
						name, res.writes, cfg.min_writes, res.rounds);
			if (res.live_allocs)
				stress_fail("check %s: %ld allocations leaked after destroy", name,
						res.live_allocs);
			if (ret || res.violations || res.lookups_checked < cfg.lookups)
				stress_fail("check %s: failed (%ld violations, %ld of %ld lookups "
					    "checked)",
						name, res.violations, res.lookups_checked,
						cfg.lookups);
			total += res.lookups_checked;
			configs_run++;
		}
	}
	if (!configs_run)
		stress_die("--check: no store variant selected (spin, rwlock, seqlock, rcu, "
			   "rcu-qsbr)");
	if (!stress_opts.json && !stress_opts.csv)
		printf("%ld configurations, %ld reads checked, 0 violations, 0 leaked\n",
				configs_run, total);
	return 0;
}
