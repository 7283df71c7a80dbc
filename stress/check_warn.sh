#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# polstore-stress's warnings reach every output form: with limits no point
# can meet (--warn cpu=2: more CPU than the threads could use; events=1e15)
# every shared-text point is flagged cpu and every ratio point ref, in the
# human table (a warn column and its footnote), in JSON and in CSV; with
# limits every point meets, none is; a bad limit is a usage error.  The
# churn scenario flags a writer past the in-flight bound (bound).
# Usage: check_warn.sh PATH/TO/polstore-stress
set -eu
ps=$1
run="--scenario shared-text --ranks 2 --variants rcu --duration 0.02 --quiet"
fail() {
	echo "check_warn.sh: $*" >&2
	exit 1
}

# shellcheck disable=SC2086
out=$("$ps" $run --warn cpu=2,events=1e15)
echo "$out" | grep -q ' warn$' || fail "no warn column in the table"
echo "$out" | grep -Eq '^  rcu +2 .* cpu\+ref$' || fail "the rcu row is not flagged cpu+ref"
echo "$out" | grep -q 'cpu: its threads got under 200 %' || fail "no cpu footnote"
echo "$out" | grep -q 'ref: a ratio divides by a reference that counted fewer than' ||
	fail "no ref footnote"
echo "$out" | grep -q 'limits: --warn cpu=2,events=1e+15,slack=0.1' || fail "no limits line"

# shellcheck disable=SC2086
json=$("$ps" $run --warn cpu=2,events=1e15 --json)
echo "$json" | grep -q '"variant":"rcu","ranks":2,.*"cpu_share":[0-9.]*,"warn":"cpu+ref"}' ||
	fail "JSON: the rcu point has no cpu_share or no warn cpu+ref"
# shellcheck disable=SC2086
csv=$("$ps" $run --warn cpu=2,events=1e15 --csv)
echo "$csv" | head -1 | grep -q ',cpu_share,warn$' || fail "CSV: no cpu_share and warn columns"
echo "$csv" | grep -q '^shared-text,rcu,2,.*,cpu+ref$' || fail "CSV: the rcu row is not flagged"

# shellcheck disable=SC2086
json=$("$ps" $run --warn cpu=0,events=0,slack=1e9 --json)
if echo "$json" | grep -q '"warn"'; then
	fail "JSON: a point flagged with limits every point meets"
fi
# shellcheck disable=SC2086
out=$("$ps" $run --warn cpu=0,events=0)
if echo "$out" | grep -q 'warn: the row'; then
	fail "a footnote without a flagged row"
fi

# churn: a writer beside which more than the in-flight bound waited for a
# grace period is flagged bound (inflight=1: any byte in flight, which an
# RCU writer always leaves); rows without a writer never are, nor any row
# with the default bound, which 64 ranges for 0.02 s cannot reach.
churn="--scenario churn --ranges 64 --ranks 1 --variants rcu --duration 0.02 --quiet"
# shellcheck disable=SC2086
json=$("$ps" $churn --warn inflight=1 --json)
echo "$json" | grep '"writers":1' | grep -q '"warn":"\([a-z]*+\)*bound"' ||
	fail "JSON: the churn rows with a writer past the bound are not flagged bound"
if echo "$json" | grep '"writers":0' | grep -q 'bound'; then
	fail "JSON: a churn row without a writer flagged bound"
fi
# shellcheck disable=SC2086
out=$("$ps" $churn --warn inflight=1)
echo "$out" | grep -q 'bound: the reclaim threads held over 1 bytes waiting' ||
	fail "no bound footnote"
echo "$out" | grep -q 'limits: .*,inflight=1)' || fail "no inflight limit in the limits line"
# shellcheck disable=SC2086
json=$("$ps" $churn --json)
if echo "$json" | grep -q bound; then
	fail "JSON: a churn row flagged bound below the default bound"
fi

for bad in cpu= cpu=x share=1 cpu=-1 cpu inflight=-1; do
	# shellcheck disable=SC2086
	if "$ps" $run --warn "$bad" >/dev/null 2>&1; then
		fail "--warn $bad accepted"
	fi
done
echo "check_warn.sh: ok"
