#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build polstore (Release) and run the benchmark's default scenarios.
set -eu
usage() {
	cat <<'USAGE'
Usage: scripts/bench.sh [POLSTORE-STRESS OPTION]...

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
USAGE
}
for a in "$@"; do
	case $a in
	-h | --help) usage; exit 0 ;;
	esac
done
cd "$(dirname "$0")/.."
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
