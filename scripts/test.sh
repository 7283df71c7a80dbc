#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Usage: scripts/test.sh [--quick | --help]
#
# With no option, the whole suite (what CI runs, about 29 minutes on 2
# idle cores): install dependencies, then build and test polstore in four
# configurations:
#   build-test   Debug, invariant checks after every set, lock_stat on,
#                thread-checker annotations (POLSTORE_ANNOTATE),
#                -Werror; every CTest label but fuzz/tsan/drd/long: unit, stress,
#                examples, install, docs, valgrind (memcheck), helgrind, and
#                package (the Debian packages built and checked, ~90 s)
#   build-asan   AddressSanitizer + UndefinedBehaviorSanitizer; unit, stress,
#                examples
#   build-tsan   clang ThreadSanitizer; label tsan
#   build-fuzz   clang libFuzzer; label fuzz (bounded time per variant)
# POLSTORE_LONG=1 in the environment lengthens the oracle and fuzz runs
# and adds DRD (label drd: the second thread checker over the suites
# helgrind runs) and memcheck over the thread and process suites
# (label long: concurrency, fork, lifecycle, fairness) and every variant
# of each parameterised test under memcheck and helgrind (one or two
# otherwise), ~25 minutes more
# on 2 cores.
# POLSTORE_TEST_CONFIGS="test asan" runs a subset of the configurations.
#
# --quick: the short tier to run before a commit (about 4 minutes on 2
# idle cores, the build included; 16 on cores shared with other builds):
# install dependencies, then one build,
#   build-quick  Debug, AddressSanitizer + UndefinedBehaviorSanitizer,
#                invariant checks after every set, -Werror, no stress
#                program and no examples; label unit (every Criterion suite)
# No memcheck, no thread checker, no stress, examples, docs, install or
# package tests: the default run has them.
set -euo pipefail
quick=0
if [ $# -gt 1 ]; then
	echo "scripts/test.sh: one option at most (see --help)" >&2
	exit 1
fi
case ${1:-} in
"") ;;
--quick) quick=1 ;;
-h | --help)
	sed -n '3,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	exit 0 ;;
*)
	echo "scripts/test.sh: unknown option $1 (see --help)" >&2
	exit 1 ;;
esac
cd "$(dirname "$0")/.."
scripts/deps.sh

JOBS=$(nproc)
FUZZ_SECONDS=20
TEST_LABELS_OUT="fuzz|tsan|drd|long"
if [ "${POLSTORE_LONG:-0}" = 1 ]; then
	FUZZ_SECONDS=600
	TEST_LABELS_OUT="fuzz|tsan"
fi
CONFIGS=${POLSTORE_TEST_CONFIGS:-"test asan tsan fuzz"}
[ "$quick" = 0 ] || CONFIGS=quick
passed=0
failed=0
status=0

# run_config NAME "cmake args" "ctest args"
run_config() {
	local name=$1 cmake_args=$2 ctest_args=$3 log
	echo "=== polstore: configuration $name" >&2
	# shellcheck disable=SC2086
	cmake -S . -B "build-$name" $cmake_args >"build-$name.cmake.log" 2>&1 ||
		{ cat "build-$name.cmake.log"; return 1; }
	cmake --build "build-$name" -j"$JOBS" 2>&1 | grep -E 'error|warning|Error' || true
	[ "${PIPESTATUS[0]}" -eq 0 ] || return 1
	log="build-$name/ctest.log"
	# shellcheck disable=SC2086
	(cd "build-$name" && ctest --output-on-failure -j"$JOBS" $ctest_args) 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	local line
	line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
	if [ -n "$line" ]; then
		local f t
		f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
		t=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/')
		passed=$((passed + t - f))
		failed=$((failed + f))
	fi
	return "$rc"
}

for c in $CONFIGS; do
	case $c in
	test)
		run_config test "-DCMAKE_BUILD_TYPE=Debug -DPOLSTORE_WERROR=ON \
			-DPOLSTORE_DEBUG_CHECKS=ON -DPOLSTORE_LOCK_STAT=ON -DPOLSTORE_VALGRIND=ON -DPOLSTORE_ANNOTATE=ON \
			-DPOLSTORE_BUILD_DOCS=ON -DPOLSTORE_HWLOC=ON -DPOLSTORE_UFFD=ON \
			-DPOLSTORE_PACKAGE_TEST=ON" \
			"-LE $TEST_LABELS_OUT" || status=1
		if [ "${POLSTORE_LONG:-0}" = 1 ]; then
			echo "=== polstore: long linearizability run (10^7 lookups per configuration)" >&2
			if build-test/stress/polstore-stress --check --lookups 10000000 \
				--writes 100000; then
				passed=$((passed + 1))
			else
				failed=$((failed + 1))
				status=1
			fi
		fi ;;
	asan)
		run_config asan "-DCMAKE_BUILD_TYPE=Debug -DPOLSTORE_WERROR=ON \
			-DPOLSTORE_SANITIZE=address,undefined" "-L unit|stress|examples" || status=1 ;;
	quick)
		run_config quick "-DCMAKE_BUILD_TYPE=Debug -DPOLSTORE_WERROR=ON \
			-DPOLSTORE_DEBUG_CHECKS=ON -DPOLSTORE_SANITIZE=address,undefined \
			-DPOLSTORE_BUILD_STRESS=OFF -DPOLSTORE_BUILD_EXAMPLES=OFF" \
			"-L unit" || status=1 ;;
	tsan)
		run_config tsan "-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
			-DPOLSTORE_WERROR=ON -DPOLSTORE_SANITIZE=thread -DPOLSTORE_ANNOTATE=ON" \
			"-L tsan" || status=1 ;;
	fuzz)
		run_config fuzz "-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
			-DPOLSTORE_WERROR=ON -DPOLSTORE_FUZZ=ON -DPOLSTORE_SANITIZE=address,undefined \
			-DPOLSTORE_FUZZ_SECONDS=$FUZZ_SECONDS -DPOLSTORE_BUILD_TESTS=OFF \
			-DPOLSTORE_BUILD_STRESS=OFF -DPOLSTORE_BUILD_EXAMPLES=OFF" "-L fuzz" || status=1 ;;
	*)
		echo "polstore: unknown configuration $c" >&2
		status=1 ;;
	esac
done

echo "polstore: $passed passed, $failed failed"
exit $status
