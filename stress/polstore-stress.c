// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress: the many-rank benchmark and validator of polstore.
 *
 * This file is the driver: the scenario table, the options (options.c),
 * the start line with the run's length, each selected scenario, then the
 * human output (tables.c).  One scenario per scn_*.c file (the store
 * scenarios share scn_store.[ch], the companions companion_run.c); what
 * they all share is stress.c.  Nothing calls back into this file.
 * `polstore-stress --help` and docs/polstore-stress.1 describe the
 * options; BENCHMARKS.md the results.
 */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <polstore/polstore.h>

#include "stress.h"

static void run_shared_text(void)
{
	stress_run_store("shared-text");
}

static void run_hot_policy(void)
{
	stress_run_store("hot-policy");
}

/* Every scenario, in the order a run takes the selected ones. */
static const struct scenario {
	const char *name;
	void (*run)(void);
	double (*estimate)(void); /* seconds, about; NULL: estimate_s() knows it */
} scenarios[] = {
	{"lookup-cost", stress_run_lookup_cost, stress_estimate_lookup_cost},
	{"shared-text", run_shared_text, stress_estimate_store},
	{"hot-policy", run_hot_policy, stress_estimate_store},
	{"memcg-charge", stress_run_memcg_charge, stress_estimate_memcg_charge},
	{"mmap-commit", stress_run_mmap_commit, stress_estimate_mmap_commit},
	{"css-walk", stress_run_css_walk, stress_estimate_css_walk},
	{"write-cost", stress_run_write_cost, stress_estimate_write_cost},
	{"window", stress_run_window, stress_estimate_window},
	{"batch-cost", stress_run_batch_cost, stress_estimate_batch_cost},
	{"many-stores", stress_run_many_stores, NULL},
	{"churn", stress_run_churn, NULL},
	{"uffd-fault", stress_run_uffd_fault, NULL},
};
#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

/* ---- options --------------------------------------------------------------------------------- */

static bool scenario_selected(const char *name)
{
	return stress_list_has(stress_opts.scenarios, name);
}

/* Seconds the selected scenarios take, about: points x --repeat x --duration. */
static double estimate_s(void)
{
	double reps = stress_opts.repeat, d = stress_opts.duration_s, t = 0;
	size_t k;

	if (stress_opts.check)
		return 0;
	for (k = 0; k < NSCENARIOS; k++) {
		const char *n = scenarios[k].name;

		if (!scenario_selected(n))
			continue;
		if (scenarios[k].estimate)
			t += scenarios[k].estimate();
		else if (!strcmp(n, "churn")) /* maps x sizes x rows (readers, + writer, writer) */
			t += (STRESS_NSYNC + stress_opts.npeers) *
			     (stress_opts.ranges_given ? stress_opts.nranges : 2) *
			     (2.0 * stress_opts.nranks + 1) * reps * d;
		else if (!strcmp(n, "uffd-fault")) /* store variants and the fixed-node plane */
			t += (STRESS_NSYNC + 1) * stress_opts.nranks * reps * d;
		else if (!strcmp(n, "many-stores")) /* a child per variant: build, read, idle */
			t += STRESS_NSYNC * (d + 0.5);
	}
	return t;
}

static void print_estimate(FILE *out, const char *what)
{
	double t = estimate_s();

	if (t >= 120)
		fprintf(out, "%s about %.0f minutes", what, t / 60);
	else
		fprintf(out, "%s about %.0f s", what, t < 1 ? 1 : t);
}

int main(int argc, char **argv)
{
	const char *names[NSCENARIOS];
	bool human;
	size_t k;

	stress_init_clock();
	for (k = 0; k < NSCENARIOS; k++)
		names[k] = scenarios[k].name;
	if (!stress_parse(argc, argv, names, NSCENARIOS)) {
		/* --help: the text, and how long the options before it would take. */
		stress_usage(stdout);
		if (!stress_opts.check) {
			print_estimate(stdout, "\nWith the options before --help the run takes");
			printf(" (scenarios %s, --repeat %d, --duration %g).\n",
					stress_opts.scenarios, stress_opts.repeat,
					stress_opts.duration_s);
		}
		return 0;
	}
	if (stress_opts.check)
		return stress_run_check(); /* it installs its own counting allocator */
	human = !stress_opts.json && !stress_opts.csv;
	/* Before any polstore object exists: count every byte the library holds. */
	stress_count_allocations();
	stress_calibrate();
	if (human) {
		printf("polstore-stress %s: %ld CPUs online, lock_stat %s, random seed %llu;\n",
				ps_version(), sysconf(_SC_NPROCESSORS_ONLN),
				ps_lock_stat_enabled() ? "on"
						       : "off (build with -DPOLSTORE_LOCK_STAT=ON)",
				(unsigned long long)stress_opts.seed);
		print_estimate(stdout, "this run takes");
		printf(" (%s, %d repetition(s) of %g s per point)\n", stress_opts.scenarios,
				stress_opts.repeat, stress_opts.duration_s);
		fflush(stdout);
	} else if (!stress_opts.quiet) {
		print_estimate(stderr, "polstore-stress: this run takes");
		fputc('\n', stderr);
	}

	for (k = 0; k < NSCENARIOS; k++)
		if (scenario_selected(scenarios[k].name))
			scenarios[k].run();

	if (human)
		stress_print_tables();
	if (stress_opts.plot)
		stress_plot(stress_opts.plot);
	stress_points_free();
	return 0;
}

