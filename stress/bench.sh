#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The runs behind BENCHMARKS.md, in order.  Usage: stress/bench.sh OUTDIR
# Expects Release builds in build-stress/ and build-lockstat/ (see
# BENCHMARKS.md for the cmake lines).  Takes about 15 minutes on 2 CPUs.
# stress/compare.py OUTDIR/*.jsonl compares the runs with stress/thresholds.txt.
set -eu
out=${1:-bench}
mkdir -p "$out"
ps=build-stress/stress/polstore-stress
pl=build-lockstat/stress/polstore-stress
run() { name=$1; shift; echo "== $name: $*" >&2; uptime >&2
	"$@" --json > "$out/$name.jsonl" 2> "$out/$name.err"; }
# 1. the store scenarios (efficiency, lookup cost) at 1 and 2 ranks, 5 interleaved repetitions
run store $ps --scenario lookup-cost,shared-text,hot-policy --ranks 1,2 --repeat 5 --duration 0.5
# 2. writer wait with 2 reading ranks flat out (no fault work)
run flatout $ps --scenario shared-text --ranks 2 --fault-work 0 --repeat 3 --duration 0.5 \
	--variants pthread_rwlock,rwlock,rwlock:noref,seqlock,seqlock:noref,rcu,rcu-qsbr
# 3. the oversubscription sweep, with the curves
run sweep $ps --scenario shared-text,hot-policy --sweep 1,2,4,16,64,256,1024 --duration 0.5 \
	--plot "$out/sweep.svg"
# 4. lookup cost against N, and memory per range
run logn $ps --scenario lookup-cost --ranges 100,10000,1000000 --repeat 3 --duration 0.3
# 5. the companion scenarios (charge, commit, id map)
run companions $ps --scenario memcg-charge,mmap-commit,css-walk --ranks 1,2 --duration 0.5
# 5b. memcg-charge: the common case (limit far above the ranks' peak usage) and
# the refusal case at 1, 2, 4, 16 and 64 ranks, and the sweep between them
run memcg-common $ps --scenario memcg-charge --limit common --repeat 5 --duration 0.5
run memcg-refusal $ps --scenario memcg-charge --limit refusal --repeat 3 --duration 0.5
run memcg-sweep $ps --scenario memcg-charge --limit sweep --ranks 1,2,16 --repeat 3 --duration 0.3
# 6. lock_stat tables (library built with -DPOLSTORE_LOCK_STAT=ON), human output
echo "== lockstat" >&2
$pl --scenario shared-text,hot-policy --ranks 2,64 --duration 0.5 \
	--variants pthread_rwlock,spin,rwlock,seqlock,rcu > "$out/lockstat.txt" 2> "$out/lockstat.err"
