#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# stress/compare.py on a small run: a figure on the right side of its limit
# is ok, one far past it OUTSIDE (exit 1 with --strict, 0 in report mode),
# and a figure whose point carries a warning says so.
# Usage: check_compare.sh PATH/TO/compare.py
set -eu
cmp=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/run.jsonl" <<'RUN'
{"scenario":"shared-text","variant":"rcu","ranks":2,"efficiency":0.5,"cpu_share":0.2,"warn":"cpu+ref"}
{"scenario":"shared-text","variant":"seqlock","ranks":2,"efficiency":0.95,"cpu_share":0.9}
RUN
fail() {
	echo "check_compare.sh: $*" >&2
	exit 1
}
out=$(python3 "$cmp" "$dir/run.jsonl") || fail "report mode exited $?"
echo "$out" | grep -Eq '^ok .* shared-text/seqlock/ranks=2:efficiency$' || fail "seqlock not ok"
echo "$out" | grep -Eq '^OUTSIDE .* shared-text/rcu/ranks=2:efficiency  \[warn: cpu\+ref\]$' ||
	fail "rcu not OUTSIDE with its warning"
echo "$out" | grep -q '^1 figure(s) from points that carry a warning' || fail "no warning count"
if python3 "$cmp" --strict "$dir/run.jsonl" >/dev/null; then
	fail "--strict exited 0 with a figure OUTSIDE"
fi
echo "check_compare.sh: ok"
