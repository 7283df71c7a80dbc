#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build polstore (Release) and run the benchmark: its default scenarios,
# or the options given, or (--results) the benchmarks behind BENCHMARKS.md
# and README's "Choosing a variant", whose tables and plots it then
# regenerates from the results.
set -eu
usage() {
	cat <<'USAGE'
Usage: scripts/bench.sh [POLSTORE-STRESS OPTION]...
       scripts/bench.sh --results [--only NAME[,NAME]...] [--no-build] [--list]

Installs the build dependencies (scripts/deps.sh), builds polstore-stress
in Release mode into build-release/ (log in build-release.log) and runs it.

With no option it runs the default scenarios, lookup-cost and shared-text,
for every variant at 1 and 2 ranks, 3 interleaved repetitions of 0.5 s per
point: about 2 minutes on 2 CPUs after the build.  The output is a table
per scenario, then one short summary per question (what a lookup costs
against the bare walk, how it scales to 2 ranks, what a write costs, what
a range holds in memory), each with its spread over the repetitions.

Options replace those defaults and go to polstore-stress as they are, e.g.
  scripts/bench.sh --sweep 1,2,4,16 --plot sweep.svg
  scripts/bench.sh --repeat 3 --duration 0.5 --json > run.jsonl
  stress/compare.py run.jsonl        # against stress/thresholds.txt
See build-release/stress/polstore-stress --help (or man polstore-stress).

--results builds polstore-stress (Release, build-release/) and the sample
peer plugin, runs each benchmark behind BENCHMARKS.md and README's
"Choosing a variant" at the checked-out commit and writes
its JSON Lines to bench/results/NAME.jsonl: a header record (commit,
date, machine: CPU model, cores, memory, kernel; load; the exact
command), one record per point (polstore-stress --json) and a closing
record (load, exit status).  Then scripts/bench-tables.pl rewrites the
generated tables of BENCHMARKS.md and README.md and the plots in
bench/results/ from every result file.  About 20 minutes on 2 CPUs.

  --only LIST   run only these benchmarks (the others' files stay)
  --no-build    use the polstore-stress already in build-release/
  --list        print the benchmarks and their commands, run nothing

Environment:
  POLSTORE_PEERS  space-separated paths of more churn plugins
                  (docs/peers.md: the maple tree, urcu-rbtree); when one
                  is named maple.so it becomes the churn reference
  NICE            the niceness to run at [0]
  POLSTORE_BENCH_BUILD  the build directory [build-release]

Run it on an otherwise idle machine where you can: other processes'
time lands in the figures, and the points flag it (warn: cpu).
USAGE
}
for a in "$@"; do
	case $a in
	-h | --help) usage; exit 0 ;;
	esac
done
cd "$(dirname "$0")/.."

# --results: the benchmarks behind the documents, into bench/results/.
results() {
	only=""
	build=1
	list=0
	while [ $# -gt 0 ]; do
		case $1 in
		--only) only=${2:?--only needs a list}; shift ;;
		--only=*) only=${1#--only=} ;;
		--no-build) build=0 ;;
		--list) list=1 ;;
		*) echo "bench.sh --results: unknown option $1 (see --help)" >&2; exit 1 ;;
		esac
		shift
	done
	bdir=${POLSTORE_BENCH_BUILD:-build-release}
	ps=$bdir/stress/polstore-stress
	sorted=$bdir/peer_sorted.so
	out=bench/results

	peers="--peer $sorted"
	reference=rcu
	for p in ${POLSTORE_PEERS:-}; do
		peers="$peers --peer $p"
		case $(basename "$p") in maple.so) reference=maple ;; esac
	done

	# NAME and the polstore-stress arguments of each benchmark, one a line.
	benchmarks() {
		cat <<EOF
lookup --scenario lookup-cost --ranges 64,1000,10000,100000,1000000 --variants unsync,unsync:node,spin,spin:node,rwlock,rwlock:node,seqlock,seqlock:node,rcu,rcu:node,rcu-qsbr,rcu-qsbr:node --repeat 3 --duration 0.2 --seed 1
write --scenario write-cost --ranges 100,10000,1000000 --repeat 5 --duration 0.1 --seed 1
scale --scenario shared-text,hot-policy --ranks 1,2 --variants unsync,pthread_rwlock,spin,rwlock,seqlock,rcu,rcu:node,rcu-qsbr,rcu-qsbr:node --repeat 3 --duration 0.3 --seed 1
flatout --scenario shared-text --write-interval 0 --ranks 1 --variants spin,rwlock,seqlock,rcu,rcu-qsbr --repeat 3 --duration 0.3 --seed 1
oversub --scenario shared-text --sweep 1,2,16,256 --variants spin,rwlock:node,seqlock:node,rcu:node,rcu-qsbr:node --duration 0.3 --seed 1
churn --scenario churn --ranges 64,100000 $peers --reference $reference --repeat 3 --duration 0.5 --seed 1
faults --scenario uffd-fault --ranks 1,2 --pages 4096 --repeat 3 --duration 0.3 --seed 1
memory --scenario many-stores --stores 10000 --ranks 2 --duration 0.2 --seed 1
EOF
	}

	if [ "$list" = 1 ]; then
		benchmarks | sed 's/^\([^ ]*\) /\1: polstore-stress /'
		exit 0
	fi

	if [ "$build" = 1 ]; then
		log=$bdir.log
		echo "bench: building (Release) into $bdir/, log in $log" >&2
		if ! { cmake -S . -B $bdir -DCMAKE_BUILD_TYPE=Release -DPOLSTORE_BUILD_TESTS=OFF &&
			cmake --build $bdir -j"$(nproc)" --target polstore-stress; } >"$log" 2>&1; then
			cat "$log" >&2
			exit 1
		fi
	fi
	cc -O2 -fPIC -shared -I stress -o $sorted stress/peer_sorted.c -lpthread

	# A JSON string of $1: backslashes and quotes escaped.
	json_str() {
		printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"
	}
	load() {
		cut -d' ' -f1-3 /proc/loadavg | sed 's/ /, /g'
	}
	commit=$(git rev-parse --short=12 HEAD)
	git diff --quiet HEAD -- src include stress CMakeLists.txt || commit="$commit+changes"
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
	mem=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)

	mkdir -p $out
	status=0
	benchmarks | while read -r name args; do
		case ,$only, in ,,) ;; *,$name,*) ;; *) continue ;; esac
		echo "bench: $name: polstore-stress $args" >&2
		f=$out/$name.jsonl
		{
			printf '{"header":"polstore-stress","name":%s,"commit":"%s","date":"%s",' \
				"$(json_str "$name")" "$commit" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
			printf '"machine":{"cpu":%s,"cores":%s,"memory_kib":%s,"kernel":%s},' \
				"$(json_str "$cpu")" "$(nproc)" "$mem" "$(json_str "$(uname -r)")"
			printf '"build":"Release","load_start":[%s],"command":%s}\n' "$(load)" \
				"$(json_str "polstore-stress $args")"
		} >"$f.new"
		rc=0
		# shellcheck disable=SC2086
		nice -n "${NICE:-0}" $ps $args --quiet --json >>"$f.new" || rc=$?
		printf '{"end":"polstore-stress","load_end":[%s],"exit":%d}\n' "$(load)" "$rc" >>"$f.new"
		mv "$f.new" "$f"
		[ "$rc" = 0 ] || echo "bench: $name exited $rc" >&2
	done || status=1
	perl scripts/bench-tables.pl --plots || status=1
	return $status
}
if [ "${1:-}" = --results ]; then
	shift
	results "$@"
	exit $?
fi

scripts/deps.sh
log=build-release.log
echo "polstore: building (Release) into build-release/, log in $log" >&2
if ! { cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DPOLSTORE_BUILD_TESTS=OFF &&
	cmake --build build-release -j"$(nproc)" --target polstore-stress; } >"$log" 2>&1; then
	cat "$log" >&2
	exit 1
fi
if [ $# -eq 0 ]; then
	set -- --repeat 3 --duration 0.5
fi
exec build-release/stress/polstore-stress "$@"
