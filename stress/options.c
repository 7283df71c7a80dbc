// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * polstore-stress's options: the usage text, then one table row per
 * option (its name, whether it takes a value, which runs it applies to,
 * and the function that sets it), read by getopt_long().
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#include "stress.h"

void stress_usage(FILE *out)
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
		     "  --counts             store scenarios: the stores count accesses\n"
		     "                       (ps_store_counts_enable()); :node lookups count theirs\n"
		     "  --dependent          lookup-cost: each lookup's page waits for the last\n"
		     "                       answer (latency), not independent lookups\n"
		     "                       (throughput)\n"
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
		     "  --warn LIST          flag the points whose figures are not meaningful\n"
		     "                       (a warn column and a footnote; JSON/CSV: warn):\n");
	fprintf(out,
			"                       cpu=SHARE: the threads got under SHARE of the\n"
			"                       CPU time they could use; events=N: a ratio's\n"
			"                       reference counted under N events; slack=F:\n"
			"                       uffd-fault's x fixed above 1 + F or below\n"
			"                       1 - lookup share - F; inflight=BYTES: churn's\n"
			"                       reclaim threads held over BYTES waiting for a\n"
			"                       grace period with a writer running (flag bound)\n"
			"                       [cpu=%g,events=%g,slack=%g,inflight=the RCU\n"
			"                       stores' bound, 32 MiB]\n",
			STRESS_WARN_CPU_SHARE, (double)STRESS_WARN_MIN_EVENTS, STRESS_WARN_SLACK);
	fprintf(out, "  --quiet              no progress lines on stderr\n"
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

/* ---- one setter per option --------------------------------------------------------- */

static void set_json(const char *o, const char *v)
{
	(void)o, (void)v;
	stress_opts.json = true;
}

static void set_csv(const char *o, const char *v)
{
	(void)o, (void)v;
	stress_opts.csv = true;
}

static void set_quiet(const char *o, const char *v)
{
	(void)o, (void)v;
	stress_opts.quiet = true;
}

static void set_check(const char *o, const char *v)
{
	(void)o, (void)v;
	stress_opts.check = true;
}

static void set_counts(const char *o, const char *v)
{
	(void)o, (void)v;
	stress_opts.counts = true;
}

static void set_sequential(const char *o, const char *v)
{
	(void)o, (void)v;
	stress_opts.sequential = true;
}

static void set_dependent(const char *o, const char *v)
{
	(void)o, (void)v;
	stress_opts.dependent = true;
}

static void set_lookups(const char *o, const char *v)
{
	uint64_t n;

	if (parse_list_u64(v, &n, 1) != 1 || !n || n > 1000000000000ULL)
		bad(o, v);
	stress_opts.check_lookups = (long)n;
}

static void set_writes(const char *o, const char *v)
{
	uint64_t n;

	if (parse_list_u64(v, &n, 1) != 1 || n > 1000000000ULL)
		bad(o, v);
	stress_opts.check_writes = (long)n;
}

static void set_pattern(const char *o, const char *v)
{
	if (!strcmp(v, "sequential"))
		stress_opts.sequential = true;
	else if (!strcmp(v, "uniform"))
		stress_opts.sequential = false;
	else
		bad(o, v);
}

static void set_variants(const char *o, const char *v)
{
	char buf[512], *tok, *save;

	(void)o;
	snprintf(stress_opts.variants, sizeof(stress_opts.variants), "%s", v);
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (strcmp(tok, "all") && strcmp(tok, "none") && !stress_variant_known(tok) &&
				!stress_companion_variant_known(tok))
			bad("variant", tok);
}

static void set_ranks(const char *o, const char *v)
{
	uint64_t l[STRESS_MAX_LIST];
	int n, k;

	n = parse_list_u64(v, l, STRESS_MAX_LIST);
	if (n <= 0)
		bad(o, v);
	for (k = 0; k < n; k++) {
		if (!l[k] || l[k] > 8192)
			bad(o, v);
		stress_opts.ranks[k] = (int)l[k];
	}
	stress_opts.nranks = n;
	stress_opts.ranks_given = true;
}

static void set_duration(const char *o, const char *v)
{
	char *end;

	stress_opts.duration_s = strtod(v, &end);
	if (*end || !(stress_opts.duration_s > 0) || stress_opts.duration_s > 3600)
		bad(o, v);
}

static void set_repeat(const char *o, const char *v)
{
	stress_opts.repeat = opt_int(v, o, 1, 100);
}

static void set_pages(const char *o, const char *v)
{
	if (parse_list_u64(v, &stress_opts.pages, 1) != 1 || !stress_opts.pages ||
			stress_opts.pages > (1ULL << 40))
		bad(o, v);
	stress_opts.pages_given = true;
}

static void set_ranges(const char *o, const char *v)
{
	int k;

	stress_opts.ranges_given = true;
	stress_opts.nranges = parse_list_u64(v, stress_opts.ranges, STRESS_MAX_LIST);
	if (stress_opts.nranges <= 0)
		bad(o, v);
	for (k = 0; k < stress_opts.nranges; k++)
		if (!stress_opts.ranges[k] || stress_opts.ranges[k] > 100000000)
			bad(o, v);
}

static void set_writers(const char *o, const char *v)
{
	stress_opts.writers = opt_int(v, o, 0, 64);
	stress_opts.writers_given = true;
}

static void set_batch(const char *o, const char *v)
{
	(void)o;
	stress_opts.batch = opt_int(v, "--batch (1 to 4096)", 1, 4096);
	stress_opts.batch_given = true;
}

static void set_stores(const char *o, const char *v)
{
	(void)o;
	stress_opts.stores = (size_t)opt_int(v, "--stores (1 to 10000000)", 1, 10000000);
}

static void set_resolvers(const char *o, const char *v)
{
	stress_opts.resolvers = !strcmp(v, "ranks") ? -1 : opt_int(v, o, 1, 1024);
}

static void set_write_interval(const char *o, const char *v)
{
	char *end;
	double us = strtod(v, &end);

	if (*end || us < 0)
		bad(o, v);
	stress_opts.write_interval_ns = (uint64_t)(us * 1000);
}

static void set_fault_work(const char *o, const char *v)
{
	char *end;

	if (!strcmp(v, "auto")) {
		stress_opts.fault_work_ns = -1;
		return;
	}
	stress_opts.fault_work_ns = strtol(v, &end, 10);
	if (*end || stress_opts.fault_work_ns < 0)
		bad(o, v);
}

static void set_seed(const char *o, const char *v)
{
	char *end;

	stress_opts.seed = strtoull(v, &end, 0);
	if (*end)
		bad(o, v);
}

static const char *const *scenario_names;
static size_t nscenario_names;
static bool scenario_given;

static void set_scenario(const char *o, const char *v)
{
	char buf[256], *tok, *save;
	size_t k;

	scenario_given = true;
	snprintf(stress_opts.scenarios, sizeof(stress_opts.scenarios), "%s", v);
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool ok = !strcmp(tok, "all");

		for (k = 0; k < nscenario_names; k++)
			ok = ok || !strcmp(tok, scenario_names[k]);
		if (!ok)
			bad(o, tok);
	}
}

static void set_limit(const char *o, const char *v)
{
	(void)o;
	parse_limits(v);
}

static void set_plot(const char *o, const char *v)
{
	(void)o;
	stress_opts.plot = v;
}

/* --warn cpu=SHARE,events=N,slack=F,inflight=BYTES: any of them, the others keep their value. */
static void set_warn(const char *o, const char *v)
{
	char buf[256], *tok, *save, *end;

	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		double x;

		if (!eq)
			bad(o, tok);
		*eq = 0;
		x = strtod(eq + 1, &end);
		if (end == eq + 1 || *end || !(x >= 0) || isinf(x))
			bad(o, v);
		if (!strcmp(tok, "cpu"))
			stress_opts.warn_cpu = x;
		else if (!strcmp(tok, "events"))
			stress_opts.warn_events = x;
		else if (!strcmp(tok, "slack"))
			stress_opts.warn_slack = x;
		else if (!strcmp(tok, "inflight"))
			stress_opts.warn_inflight = x;
		else
			bad(o, tok);
	}
}

static void set_peer(const char *o, const char *v)
{
	(void)o;
	if (stress_opts.npeers == STRESS_MAX_PEERS)
		bad("--peer (at most 8)", v);
	stress_opts.peers[stress_opts.npeers++] = v;
}

static void set_reference(const char *o, const char *v)
{
	(void)o;
	stress_opts.reference = v;
}

/* ---- the table ------------------------------------------------------------------------ */

/* Which runs an option applies to. */
enum opt_scope {
	FOR_ANY,       /* every run */
	FOR_SCENARIOS, /* the scenarios, not --check (it measures no speed) */
	FOR_CHECK,     /* --check only */
	FOR_CHURN,     /* --scenario churn only */
};

struct opt {
	const char *name; /* without the leading "--" */
	int has_arg;	  /* no_argument or required_argument */
	enum opt_scope scope;
	void (*set)(const char *opt, const char *value); /* opt: "--name" */
};

static const struct opt opts[] = {
		{"json", no_argument, FOR_ANY, set_json},
		{"csv", no_argument, FOR_ANY, set_csv},
		{"quiet", no_argument, FOR_ANY, set_quiet},
		{"check", no_argument, FOR_ANY, set_check},
		{"lookups", required_argument, FOR_CHECK, set_lookups},
		{"writes", required_argument, FOR_CHECK, set_writes},
		{"scenario", required_argument, FOR_ANY, set_scenario},
		{"scenarios", required_argument, FOR_ANY, set_scenario},
		{"variants", required_argument, FOR_ANY, set_variants},
		{"ranks", required_argument, FOR_ANY, set_ranks},
		{"sweep", required_argument, FOR_ANY, set_ranks},
		{"pages", required_argument, FOR_ANY, set_pages},
		{"writers", required_argument, FOR_ANY, set_writers},
		{"seed", required_argument, FOR_ANY, set_seed},
		{"duration", required_argument, FOR_SCENARIOS, set_duration},
		{"repeat", required_argument, FOR_SCENARIOS, set_repeat},
		{"ranges", required_argument, FOR_SCENARIOS, set_ranges},
		{"batch", required_argument, FOR_SCENARIOS, set_batch},
		{"stores", required_argument, FOR_SCENARIOS, set_stores},
		{"resolvers", required_argument, FOR_SCENARIOS, set_resolvers},
		{"write-interval", required_argument, FOR_SCENARIOS, set_write_interval},
		{"fault-work", required_argument, FOR_SCENARIOS, set_fault_work},
		{"limit", required_argument, FOR_SCENARIOS, set_limit},
		{"pattern", required_argument, FOR_SCENARIOS, set_pattern},
		{"sequential", no_argument, FOR_SCENARIOS, set_sequential},
		{"counts", no_argument, FOR_SCENARIOS, set_counts},
		{"dependent", no_argument, FOR_SCENARIOS, set_dependent},
		{"plot", required_argument, FOR_SCENARIOS, set_plot},
		{"warn", required_argument, FOR_SCENARIOS, set_warn},
		{"peer", required_argument, FOR_CHURN, set_peer},
		{"reference", required_argument, FOR_CHURN, set_reference},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
#define OPT_BASE 256 /* getopt_long()'s value for opts[i]: OPT_BASE + i */

static void defaults(void)
{
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
	stress_opts.warn_cpu = STRESS_WARN_CPU_SHARE;
	stress_opts.warn_events = STRESS_WARN_MIN_EVENTS;
	stress_opts.warn_slack = STRESS_WARN_SLACK;
	stress_opts.warn_inflight = NAN;
}

/* Options that do not combine, and --check's own limits. */
static void check_combinations(const char *const given[])
{
	char buf[512], *tok, *save;

	if (stress_opts.json && stress_opts.csv)
		bad("combination", "--json with --csv");
	if (!stress_opts.check && given[FOR_CHECK])
		bad("option without --check", given[FOR_CHECK]);
	if (given[FOR_CHURN] && (stress_opts.check || !stress_list_has(stress_opts.scenarios, "churn")))
		bad("option without --scenario churn", given[FOR_CHURN]);
	/* The plot draws the two store scenarios against ranks and nothing else. */
	if (stress_opts.plot && !stress_list_has(stress_opts.scenarios, "shared-text") &&
			!stress_list_has(stress_opts.scenarios, "hot-policy"))
		bad("--plot without --scenario shared-text or hot-policy (what it draws)",
				stress_opts.scenarios);
	if (!stress_opts.check)
		return;
	if (scenario_given)
		bad("combination", "--check with --scenario");
	if (given[FOR_SCENARIOS])
		bad("option with --check (it measures no speed)", given[FOR_SCENARIOS]);
	if (stress_opts.writers < 1)
		bad("--writers for --check (at least 1)", "0");
	if (stress_opts.pages_given && stress_opts.pages > (1u << 20))
		bad("--pages for --check (at most 1048576)", "too many");
	snprintf(buf, sizeof(buf), "%s", stress_opts.variants);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (strcmp(tok, "all") && !stress_check_variant_known(tok))
			bad("variant for --check (spin, rwlock, seqlock, rcu, rcu-qsbr)", tok);
}

bool stress_parse(int argc, char **argv, const char *const *scenarios, size_t nscenarios)
{
	struct option lo[NOPTS + 2];
	const char *given[FOR_CHURN + 1] = {NULL}; /* an option given, per scope */
	static char names[NOPTS][32];
	size_t i;
	int c;

	scenario_names = scenarios;
	nscenario_names = nscenarios;
	defaults();
	for (i = 0; i < NOPTS; i++) {
		lo[i] = (struct option){opts[i].name, opts[i].has_arg, NULL, OPT_BASE + (int)i};
		snprintf(names[i], sizeof(names[i]), "--%s", opts[i].name);
	}
	lo[NOPTS] = (struct option){"help", no_argument, NULL, 'h'};
	lo[NOPTS + 1] = (struct option){NULL, 0, NULL, 0};
	opterr = 0;
	/* "+": stop at the first argument that is no option (refused below). */
	while ((c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		const struct opt *o;

		if (c == 'h')
			return false;
		if (c == ':')
			bad("missing value for", argv[optind - 1]);
		if (c < OPT_BASE || c >= OPT_BASE + (int)NOPTS)
			bad("option", argv[optind - 1]);
		o = &opts[c - OPT_BASE];
		given[o->scope] = names[c - OPT_BASE];
		o->set(names[c - OPT_BASE], optarg);
	}
	if (optind < argc)
		bad("argument", argv[optind]);
	check_combinations(given);
	return true;
}
