#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Configure polstore as on a machine without Criterion (find_package(Criterion)
# disabled), from an empty build directory:
#  - POLSTORE_BUILD_TESTS=AUTO (the default) configures, says the unit suites
#    are not built, and registers no Criterion suite (the other tests stay);
#  - POLSTORE_BUILD_TESTS=ON fails, naming Criterion;
#  - a value other than AUTO, ON or OFF fails.
#
# Usage: tests/tools/consumer/no-criterion.sh <polstore source dir>
set -eu
srcdir=$(cd "${1:?usage: no-criterion.sh <srcdir>}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/polstore-nocrit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
die() { printf 'no-criterion: %s\n' "$*" >&2; exit 1; }

# Docs and the hwloc bridge off: they have nothing to do with Criterion and
# only slow the configure down.
conf() {
	d=$1
	shift
	cmake -S "$srcdir" -B "$tmp/$d" -DCMAKE_DISABLE_FIND_PACKAGE_Criterion=ON \
		-DPOLSTORE_BUILD_DOCS=OFF -DPOLSTORE_HWLOC=OFF "$@" >"$tmp/$d.log" 2>&1
}

echo "== POLSTORE_BUILD_TESTS=AUTO without Criterion"
conf auto || { cat "$tmp/auto.log" >&2; die "configure without Criterion failed"; }
grep -q 'Criterion not found: unit suites not built' "$tmp/auto.log" ||
	{ cat "$tmp/auto.log" >&2; die "no message that the unit suites are not built"; }
(cd "$tmp/auto" && ctest -N) >"$tmp/auto.tests"
if grep -qE 'unit\.(store|policy|concurrency)$' "$tmp/auto.tests"; then
	die "Criterion suites registered without Criterion"
fi
grep -q 'stress\.check\.rcu$' "$tmp/auto.tests" || die "the tests without Criterion are gone too"

echo "== POLSTORE_BUILD_TESTS=ON without Criterion"
if conf on -DPOLSTORE_BUILD_TESTS=ON; then
	die "POLSTORE_BUILD_TESTS=ON configured without Criterion"
fi
grep -q 'POLSTORE_BUILD_TESTS=ON needs Criterion' "$tmp/on.log" ||
	{ cat "$tmp/on.log" >&2; die "no clear message for POLSTORE_BUILD_TESTS=ON"; }

echo "== POLSTORE_BUILD_TESTS=maybe"
if conf bad -DPOLSTORE_BUILD_TESTS=maybe; then
	die "POLSTORE_BUILD_TESTS=maybe configured"
fi
grep -q 'POLSTORE_BUILD_TESTS must be AUTO, ON or OFF' "$tmp/bad.log" ||
	{ cat "$tmp/bad.log" >&2; die "no clear message for a bad POLSTORE_BUILD_TESTS"; }
echo "no-criterion OK"
