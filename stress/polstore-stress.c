// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress: the many-rank benchmark and validator of polstore.
 *
 * This file is the driver: the options, then each selected scenario, then
 * the human output.  The scenarios live in scn_store.c (lookup-cost,
 * shared-text, hot-policy, write-cost, window, batch-cost), scn_companion.c
 * (memcg-charge, mmap-commit, css-walk), scn_churn.c (churn, with the
 * plugins of peer.h), scn_many.c (many-stores), scn_uffd.c (uffd-fault)
 * and scn_check.c (--check);
 * what they share (timing, histogram, points and JSON/CSV output) is
 * stress.c, the human tables, summaries and plot tables.c.  Nothing calls
 * back into this file.  `polstore-stress --help` and
 * docs/polstore-stress.1 describe the options; BENCHMARKS.md the results.
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
	double (*estimate)(const char *name); /* NULL: estimate_s() knows it */
} scenarios[] = {
	{"lookup-cost", stress_run_lookup_cost, stress_store_estimate_s},
	{"shared-text", run_shared_text, stress_store_estimate_s},
	{"hot-policy", run_hot_policy, stress_store_estimate_s},
	{"memcg-charge", stress_run_memcg_charge, stress_companion_estimate_s},
	{"mmap-commit", stress_run_mmap_commit, stress_companion_estimate_s},
	{"css-walk", stress_run_css_walk, stress_companion_estimate_s},
	{"write-cost", stress_run_write_cost, stress_store_estimate_s},
	{"window", stress_run_window, stress_store_estimate_s},
	{"batch-cost", stress_run_batch_cost, stress_store_estimate_s},
	{"many-stores", stress_run_many_stores, NULL},
	{"churn", stress_run_churn, NULL},
	{"uffd-fault", stress_run_uffd_fault, NULL},
};
#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

/* ---- options --------------------------------------------------------------------------------- */

static void usage(FILE *out)
{
	fprintf(out, "Usage: polstore-stress [OPTION]...\n"
		     "Measure and validate polstore's store variants against hand-written "
		     "baselines.\n"
		     "With no option: lookup-cost and shared-text, every variant, 1 and 2 "
		     "ranks,\n"
		     "the tables and a short summary per question (lookup cost against the\n"
		     "bare walk, scaling to 2 ranks, write cost, memory per range).\n"
		     "A run takes about scenarios x variants x ranks x --repeat x --duration;\n"
		     "the first line of a run says how long, and so does the end of this text\n"
		     "for the options given before --help.\n"
		     "\n"
		     "Scenarios (--scenario, comma-separated; default lookup-cost,shared-text):\n"
		     "  lookup-cost   one rank, no writer, no other work: ns per lookup per "
		     "variant,\n"
		     "                ratio to the unsynchronised lookup, and bytes per range "
		     "measured\n"
		     "                from the allocator; run for every --ranges value\n"
		     "  shared-text   ranks fault on uniform (or --sequential) pages of a shared "
		     "text\n"
		     "                region: lookup, validate, --fault-work of other work; "
		     "writers\n"
		     "                ps_store_set() a whole range or a random sub-range of one\n"
		     "  hot-policy    as shared-text, but every rank hits the same range (writers\n"
		     "                set the others): the policy refcount is the shared line\n"
		     "  memcg-charge  ranks charge/uncharge pages one at a time (up to 64 held)\n"
		     "                through leaves under a shared parent and root (ps_charge "
		     "kinds\n"
		     "                spin, seqlock, atomic, stock, plus stock:private: a private\n"
		     "                hierarchy per rank); the parent's limit is --limit x the "
		     "ranks'\n"
		     "                peak usage; share of charges refused; ranks 1,2,4,16,64\n"
		     "                without --ranks\n"
		     "  mmap-commit   ranks commit/uncommit 32768 pages (ps_commit), strict and "
		     "loose\n"
		     "                batch, max approximation error against its bound\n"
		     "  css-walk      ranks walk all ids with get_next, writers alloc/remove ids\n"
		     "                (ps_idmap spin, rwlock, rcu)\n"
		     "  write-cost    one thread, no readers: ns per ps_store_set() for each "
		     "store\n"
		     "                variant and the unsync in-place set, kinds replace, split,\n"
		     "                remove, span16 (restoring sets timed apart), ratio\n"
		     "                to unsync; --ranges [100,10000,1000000], median of "
		     "--repeat,\n"
		     "                min(--duration, 0.1) s per kind (not in the default run)\n"
		     "  window        ranks read windows (ps_store_foreach_range()) of 1, 16 and "
		     "256\n"
		     "                ranges, and point lookups, while writers set: CPU ns per "
		     "window\n"
		     "                and per range, ratio to the lookup; store variants, the "
		     "first\n"
		     "                --ranges value [1000000] (not in the default run)\n"
		     "  batch-cost    one thread, no readers: ns per set as --batch [16] single "
		     "sets\n"
		     "                and as one ps_store_set_many(), adjacent and random slots;\n"
		     "                --ranges [10000,1000000] (not in the default run)\n"
		     "  many-stores   --stores [10000] stores of 1 to 16 ranges (--ranges: exactly\n"
		     "                that many), each variant in a child process: bytes per store\n"
		     "                fresh, after 100 sets each and 100 ms later; lookups/s of\n"
		     "                the largest --ranks value over all stores beside --writers;\n"
		     "                one 64-range store after 100000 sets (not in the default run)\n"
		     "  churn         readers look up uniform pages (a read section each) while "
		     "one\n"
		     "                writer removes a random range and inserts another, flat "
		     "out:\n"
		     "                lookups/s and writer ops/s of the store variants and of "
		     "every\n"
		     "                --peer plugin, rows of --ranks readers alone, beside the "
		     "writer,\n"
		     "                and the writer alone; ratio to --reference; --ranges "
		     "[64,100000]\n"
		     "                (not in the default run)\n"
		     "  uffd-fault    real page faults through the fault plane (libpolstore_uffd):\n"
		     "                each round the ranks touch the --pages fresh pages of a\n"
		     "                registered region, resolvers place each page on the node the\n"
		     "                store names while a writer sets; faults/s, fault latency,\n"
		     "                the lookup's share of fault time, beside the fixed-node plane\n"
		     "                (no lookup); store variants (not in the default run)\n"
		     "  all           every scenario above\n"
		     "\n"
		     "Linearizability check (instead of the scenarios):\n"
		     "  --check              run the oracle on every selected store variant\n"
		     "                       (spin, rwlock, seqlock, rcu, rcu-qsbr): versioned "
		     "sets and\n"
		     "                       removals against timed lookups; an illegal lookup "
		     "prints\n"
		     "                       the history that proves it and aborts.  Without "
		     "--ranks\n"
		     "                       or --writers: CPUs/2 readers + 1 writer, then "
		     "2 x CPUs\n"
		     "                       readers + 2 writers (below and above the core "
		     "count)\n"
		     "  --lookups N          lookups checked per configuration [1000000]\n"
		     "  --writes N           and at least N sets and removals; more rounds run "
		     "until\n"
		     "                       the writers (an RCU set waits a grace period) "
		     "got there [10000]\n"
		     "                       (--pages: pages written and read [48])\n"
		     "\n"
		     "Options (defaults in brackets):\n"
		     "  --variants LIST      comma list, 'all' or 'none' [all]; store scenarios: "
		     "unsync,\n"
		     "                       unsync:noref, pthread_mutex, pthread_rwlock, spin, "
		     "rwlock,\n"
		     "                       seqlock, rcu, rcu-qsbr, each also with ':noref'; "
		     "the\n"
		     "                       1-rank unsync and unsync:noref baselines always run\n"
		     "  --ranks LIST         rank (reader thread) counts, e.g. 1,2 [1,2; "
		     "memcg-charge:\n"
		     "                       1,2,4,16,64]\n"
		     "  --sweep LIST         same as --ranks, e.g. 1,2,4,16,64,256,1024\n"
		     "  --duration SECONDS   measuring time per point [1.0]\n"
		     "  --repeat K           measure every point K times, interleaved; report "
		     "the\n"
		     "                       median-throughput repetition and the worst writer "
		     "wait [1]\n"
		     "  --pages N            pages in the shared text region [16384]\n"
		     "  --ranges LIST        policy ranges N [64]; lookup-cost and write-cost run\n"
		     "                       each value, e.g. 100,10000,1000000 (write-cost's\n"
		     "                       default); the others use the first\n"
		     "  --writers N          writer threads calling ps_store_set() [1]\n"
		     "  --batch N            writers apply N sets per ps_store_set_many() call "
		     "[1];\n"
		     "                       batch-cost's batch size [16]\n"
		     "  --resolvers N        uffd-fault's resolver threads, or 'ranks' for one per "
		     "rank\n"
		     "                       [one per NUMA node]\n"
		     "  --write-interval US  microseconds between a writer's sets; 0 = flat out "
		     "[1000]\n"
		     "  --fault-work NS      other work per fault in ns, or 'auto': the measured "
		     "cost\n"
		     "                       of one unsynchronised lookup [auto]\n"
		     "  --limit LIST         memcg-charge: the parent's limit as multiples of "
		     "what\n"
		     "                       the ranks hold at their peaks: numbers, 'common' "
		     "(100:\n"
		     "                       charges succeed), 'refusal' (0.75: charges fail at "
		     "the\n"
		     "                       peaks) or 'sweep' "
		     "(0.75,0.9,1,1.1,1.25,1.5,2,4,10,100)\n"
		     "                       [common]\n"
		     "  --pattern P          uniform or sequential page order [uniform]\n"
		     "  --sequential         same as --pattern sequential\n"
		     "  --seed N             random seed [1]\n"
		     "  --peer PATH.so       churn: also measure this plugin's range map "
		     "(stress/peer.h);\n"
		     "                       repeat for more (at most 8)\n"
		     "  --reference NAME     churn: the map the ratios divide by [the first "
		     "--peer,\n"
		     "                       else the first store variant]\n"
		     "  --scenario LIST      see above [lookup-cost,shared-text]\n"
		     "  --json               JSON Lines on stdout, one object per point\n"
		     "  --csv                CSV on stdout, one row per point\n"
		     "  --plot FILE.svg      lookups/s, efficiency, longest writer wait and p99 "
		     "latency\n"
		     "                       against ranks per variant (gnuplot; .png for PNG);\n"
		     "                       FILE.dat and FILE.gp kept\n"
		     "  --quiet              no progress lines on stderr\n"
		     "  --help               this text\n"
		     "\n"
		     "Every lookup is validated (a policy never set at that page aborts the "
		     "run);\n"
		     "ps_store_check() runs after every point.  lock_stat tables are printed "
		     "for the\n"
		     "locking variants when the library was built with "
		     "-DPOLSTORE_LOCK_STAT=ON.\n"
		     "Exit status: 0 ok, 1 usage error, 2 runtime error, abort on a broken "
		     "invariant.\n");
}

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
			t += scenarios[k].estimate(n);
		else if (!strcmp(n, "churn")) /* maps x sizes x rows (readers, + writer, writer) */
			t += (PS_SYNC_COUNT + stress_opts.npeers) *
			     (stress_opts.ranges_given ? stress_opts.nranges : 2) *
			     (2.0 * stress_opts.nranks + 1) * reps * d;
		else if (!strcmp(n, "uffd-fault")) /* store variants and the fixed-node plane */
			t += (PS_SYNC_COUNT + 1) * stress_opts.nranks * reps * d;
		else if (!strcmp(n, "many-stores")) /* a child per variant: build, read, idle */
			t += PS_SYNC_COUNT * (d + 0.5);
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

static int parse_list_u64(const char *s, uint64_t *out, int max)
{
	int n = 0;
	char *end;

	while (*s) {
		unsigned long long v = strtoull(s, &end, 10);

		if (end == s || n == max)
			return -1;
		if (*end == 'k' || *end == 'K')
			v *= 1000, end++;
		else if (*end == 'm' || *end == 'M')
			v *= 1000000, end++;
		out[n++] = v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return n;
}

static void bad(const char *what, const char *val)
{
	fprintf(stderr, "polstore-stress: invalid %s: '%s' (see --help)\n", what, val ? val : "");
	exit(1);
}

/*
 * --limit: memcg-charge's parent limit as multiples of the ranks' peak
 * usage.  "common" is far above it, "refusal" below it (ranks are refused
 * at their peaks), "sweep" the steps between; numbers may be mixed in.
 */
static void parse_limits(const char *v)
{
	static const double sweep[] = {0.75, 0.9, 1, 1.1, 1.25, 1.5, 2, 4, 10, 100};
	char buf[512], *tok, *save, *end;
	int n = 0;
	size_t k;

	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "sweep")) {
			for (k = 0; k < sizeof(sweep) / sizeof(sweep[0]); k++) {
				if (n == STRESS_MAX_LIST)
					bad("--limit (too many values)", v);
				stress_opts.limits[n++] = sweep[k];
			}
			continue;
		}
		if (n == STRESS_MAX_LIST)
			bad("--limit (too many values)", v);
		if (!strcmp(tok, "common")) {
			stress_opts.limits[n++] = 100;
		} else if (!strcmp(tok, "refusal")) {
			stress_opts.limits[n++] = 0.75;
		} else {
			double x = strtod(tok, &end);

			if (*end || !(x > 0) || x > 10000)
				bad("--limit", tok);
			stress_opts.limits[n++] = x;
		}
	}
	if (!n)
		bad("--limit", v);
	stress_opts.nlimits = n;
}

/* A whole number in [lo, hi] for option @what, or bad(). */
static int opt_int(const char *v, const char *what, int lo, int hi)
{
	char *end;
	int x = (int)strtol(v, &end, 10);

	if (*end || x < lo || x > hi)
		bad(what, v);
	return x;
}

static void parse(int argc, char **argv)
{
	bool scenario_given = false;
	const char *scenario_only = NULL, *check_only = NULL; /* an option given, for the checks */
	const char *churn_only = NULL;
	int i;

	snprintf(stress_opts.scenarios, sizeof(stress_opts.scenarios), "lookup-cost,shared-text");
	snprintf(stress_opts.variants, sizeof(stress_opts.variants), "all");
	stress_opts.ranks[0] = 1;
	stress_opts.ranks[1] = 2;
	stress_opts.nranks = 2;
	stress_opts.duration_s = 1.0;
	stress_opts.repeat = 1;
	stress_opts.pages = 16384;
	stress_opts.ranges[0] = 64;
	stress_opts.nranges = 1;
	stress_opts.writers = 1;
	stress_opts.batch = 1;
	stress_opts.write_interval_ns = 1000000;
	stress_opts.fault_work_ns = -1;
	stress_opts.seed = 1;
	stress_opts.check_lookups = 1000000;
	stress_opts.check_writes = 10000;
	stress_opts.limits[0] = 100;
	stress_opts.nlimits = 1;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		char *end;
		char key[64];
		const char *eq = strchr(a, '=');

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			if (!stress_opts.check) {
				print_estimate(stdout, "\nWith the options before --help the run "
						       "takes");
				printf(" (scenarios %s, --repeat %d, --duration %g).\n",
						stress_opts.scenarios, stress_opts.repeat,
						stress_opts.duration_s);
			}
			exit(0);
		}
		if (strncmp(a, "--", 2))
			bad("argument", a);
		if (eq) {
			snprintf(key, sizeof(key), "%.*s", (int)(eq - a), a);
			v = eq + 1;
		} else {
			snprintf(key, sizeof(key), "%s", a);
		}
#define FLAG(name) (!strcmp(key, name))
#define NEEDV()                                                                                    \
	do {                                                                                       \
		if (!v) {                                                                          \
			if (i + 1 >= argc)                                                         \
				bad("missing value for", key);                                     \
			v = argv[++i];                                                             \
		}                                                                                  \
	} while (0)
		if (FLAG("--duration") || FLAG("--repeat") || FLAG("--plot") ||
				FLAG("--write-interval") || FLAG("--ranges") || FLAG("--pattern") ||
				FLAG("--sequential") || FLAG("--fault-work") || FLAG("--batch") ||
				FLAG("--stores") || FLAG("--limit") ||
				FLAG("--resolvers"))
			scenario_only = a;
		if (FLAG("--lookups") || FLAG("--writes"))
			check_only = a;
		if (FLAG("--json")) {
			stress_opts.json = true;
		} else if (FLAG("--check")) {
			stress_opts.check = true;
		} else if (FLAG("--lookups")) {
			uint64_t n;

			NEEDV();
			if (parse_list_u64(v, &n, 1) != 1 || !n || n > 1000000000000ULL)
				bad("--lookups", v);
			stress_opts.check_lookups = (long)n;
		} else if (FLAG("--writes")) {
			uint64_t n;

			NEEDV();
			if (parse_list_u64(v, &n, 1) != 1 || n > 1000000000ULL)
				bad("--writes", v);
			stress_opts.check_writes = (long)n;
		} else if (FLAG("--csv")) {
			stress_opts.csv = true;
		} else if (FLAG("--quiet")) {
			stress_opts.quiet = true;
		} else if (FLAG("--sequential")) {
			stress_opts.sequential = true;
		} else if (FLAG("--pattern")) {
			NEEDV();
			if (!strcmp(v, "sequential"))
				stress_opts.sequential = true;
			else if (!strcmp(v, "uniform"))
				stress_opts.sequential = false;
			else
				bad("--pattern", v);
		} else if (FLAG("--variants")) {
			char buf[512], *tok, *save;

			NEEDV();
			snprintf(stress_opts.variants, sizeof(stress_opts.variants), "%s", v);
			snprintf(buf, sizeof(buf), "%s", v);
			for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (strcmp(tok, "all") && strcmp(tok, "none") &&
						!stress_variant_known(tok) &&
						!stress_companion_variant_known(tok))
					bad("variant", tok);
		} else if (FLAG("--ranks") || FLAG("--sweep")) {
			uint64_t l[STRESS_MAX_LIST];
			int n, k;

			NEEDV();
			n = parse_list_u64(v, l, STRESS_MAX_LIST);
			if (n <= 0)
				bad(key, v);
			for (k = 0; k < n; k++) {
				if (!l[k] || l[k] > 8192)
					bad(key, v);
				stress_opts.ranks[k] = (int)l[k];
			}
			stress_opts.nranks = n;
			stress_opts.ranks_given = true;
		} else if (FLAG("--duration")) {
			NEEDV();
			stress_opts.duration_s = strtod(v, &end);
			if (*end || !(stress_opts.duration_s > 0) || stress_opts.duration_s > 3600)
				bad("--duration", v);
		} else if (FLAG("--repeat")) {
			NEEDV();
			stress_opts.repeat = opt_int(v, "--repeat", 1, 100);
		} else if (FLAG("--pages")) {
			NEEDV();
			if (parse_list_u64(v, &stress_opts.pages, 1) != 1 || !stress_opts.pages ||
					stress_opts.pages > (1ULL << 40))
				bad("--pages", v);
			stress_opts.pages_given = true;
		} else if (FLAG("--ranges")) {
			int k;

			stress_opts.ranges_given = true;
			NEEDV();
			stress_opts.nranges =
					parse_list_u64(v, stress_opts.ranges, STRESS_MAX_LIST);
			if (stress_opts.nranges <= 0)
				bad("--ranges", v);
			for (k = 0; k < stress_opts.nranges; k++)
				if (!stress_opts.ranges[k] || stress_opts.ranges[k] > 100000000)
					bad("--ranges", v);
		} else if (FLAG("--writers")) {
			NEEDV();
			stress_opts.writers = opt_int(v, "--writers", 0, 64);
			stress_opts.writers_given = true;
		} else if (FLAG("--batch")) {
			NEEDV();
			stress_opts.batch = opt_int(v, "--batch (1 to 4096)", 1, 4096);
			stress_opts.batch_given = true;
		} else if (FLAG("--stores")) {
			NEEDV();
			stress_opts.stores = (size_t)opt_int(v, "--stores (1 to 10000000)", 1, 10000000);
		} else if (FLAG("--resolvers")) {
			NEEDV();
			stress_opts.resolvers =
					!strcmp(v, "ranks") ? -1 : opt_int(v, "--resolvers", 1, 1024);
		} else if (FLAG("--write-interval")) {
			double us;

			NEEDV();
			us = strtod(v, &end);
			if (*end || us < 0)
				bad("--write-interval", v);
			stress_opts.write_interval_ns = (uint64_t)(us * 1000);
		} else if (FLAG("--fault-work")) {
			NEEDV();
			if (!strcmp(v, "auto")) {
				stress_opts.fault_work_ns = -1;
			} else {
				stress_opts.fault_work_ns = strtol(v, &end, 10);
				if (*end || stress_opts.fault_work_ns < 0)
					bad("--fault-work", v);
			}
		} else if (FLAG("--seed")) {
			NEEDV();
			stress_opts.seed = strtoull(v, &end, 0);
			if (*end)
				bad("--seed", v);
		} else if (FLAG("--scenario") || FLAG("--scenarios")) {
			char buf[256], *tok, *save;
			size_t k;

			NEEDV();
			scenario_given = true;
			snprintf(stress_opts.scenarios, sizeof(stress_opts.scenarios), "%s", v);
			snprintf(buf, sizeof(buf), "%s", v);
			for (tok = strtok_r(buf, ",", &save); tok;
					tok = strtok_r(NULL, ",", &save)) {
				bool ok = !strcmp(tok, "all");

				for (k = 0; k < NSCENARIOS; k++)
					ok = ok || !strcmp(tok, scenarios[k].name);
				if (!ok)
					bad("--scenario", tok);
			}
		} else if (FLAG("--limit")) {
			NEEDV();
			parse_limits(v);
		} else if (FLAG("--plot")) {
			NEEDV();
			stress_opts.plot = v;
		} else if (FLAG("--peer")) {
			NEEDV();
			if (stress_opts.npeers == STRESS_MAX_PEERS)
				bad("--peer (at most 8)", v);
			stress_opts.peers[stress_opts.npeers++] = v;
			churn_only = a;
		} else if (FLAG("--reference")) {
			NEEDV();
			stress_opts.reference = v;
			churn_only = a;
		} else {
			bad("option", a);
		}
	}
	if (stress_opts.json && stress_opts.csv)
		bad("combination", "--json with --csv");
	if (!stress_opts.check && check_only)
		bad("option without --check", check_only);
	if (churn_only && (stress_opts.check || !scenario_selected("churn")))
		bad("option without --scenario churn", churn_only);
	if (stress_opts.check) {
		char buf[512], *tok, *save;

		if (scenario_given)
			bad("combination", "--check with --scenario");
		if (scenario_only)
			bad("option with --check (it measures no speed)", scenario_only);
		if (stress_opts.writers < 1)
			bad("--writers for --check (at least 1)", "0");
		if (stress_opts.pages_given && stress_opts.pages > (1u << 20))
			bad("--pages for --check (at most 1048576)", "too many");
		snprintf(buf, sizeof(buf), "%s", stress_opts.variants);
		for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, "all") && !stress_check_variant_known(tok))
				bad("variant for --check (spin, rwlock, seqlock, rcu, rcu-qsbr)",
						tok);
	}
}

int main(int argc, char **argv)
{
	bool human;
	size_t k;

	stress_init_clock();
	parse(argc, argv);
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

