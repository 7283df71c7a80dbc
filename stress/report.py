#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Markdown tables from polstore-stress --json output (for BENCHMARKS.md).

The warn column repeats a point's warnings (man polstore-stress, WARNINGS).

Usage: stress/report.py FILE.jsonl [FILE.jsonl ...]
"""
import json
import sys


def fmt(v, f="{:.3f}"):
    if v is None:
        return "-"
    return f.format(v)


def ns(v):
    """A latency in ns: every latency column of the tables is in ns."""
    if v is None:
        return "-"
    if v >= 2**63:
        # A wrapped unsigned difference: a writer that first ran after its point ended.
        return "(writer first ran at the end)"
    return "%.0f" % v


def reps_range(p):
    """The min..max of a point's repetitions in Mops/s, or "" for one repetition."""
    if p.get("reps", 1) > 1:
        return "%.2f..%.2f" % (p["ops_per_sec_min"] / 1e6, p["ops_per_sec_max"] / 1e6)
    return ""


def main():
    pts = []
    for path in sys.argv[1:]:
        with open(path) as f:
            pts += [json.loads(line) for line in f if line.startswith("{")]
    scen = []
    for p in pts:
        if p["scenario"] not in scen:
            scen.append(p["scenario"])
    for s in scen:
        sp = [p for p in pts if p["scenario"] == s]
        print("\n#### %s\n" % s)
        if s == "lookup-cost":
            print("| ranges | variant | ns/lookup | x baseline | baseline | bytes/range (allocator) | ps_store_memory/range |")
            print("|---:|---|---:|---:|---|---:|---:|")
            for p in sp:
                print("| %d | %s | %s | %s | %s | %s | %s |" % (
                    p["ranges"], p["variant"], fmt(p.get("lookup_ns"), "{:.2f}"),
                    fmt(p.get("cost_ratio")), p.get("baseline", ""),
                    fmt(p.get("bytes_per_range"), "{:.1f}"),
                    fmt(p.get("store_bytes_per_range"), "{:.1f}")))
        elif s in ("shared-text", "hot-policy"):
            print("| variant | ranks | Mlookups/s | (min..max of reps) | efficiency | cpu-eff | CPUs used | lookup % | p50 ns | p99 ns | p99.9 ns | max ns | writer sets/s | writer max wait ns | warn |")
            print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
            for p in sp:
                mm = reps_range(p)
                print("| %s | %d | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    p["variant"], p["ranks"], p["ops_per_sec"] / 1e6, mm,
                    fmt(p.get("efficiency")), fmt(p.get("cpu_efficiency")),
                    fmt(p["rank_cpu_s"] / p["duration_s"], "{:.2f}") if "rank_cpu_s" in p else "-",
                    fmt(p.get("lookup_share", 0) * 100, "{:.1f}"),
                    ns(p.get("p50_ns")), ns(p.get("p99_ns")), ns(p.get("p999_ns")),
                    ns(p.get("max_ns")), fmt(p.get("writer_ops_per_sec"), "{:.0f}"),
                    ns(p.get("writer_max_wait_ns")), p.get("warn", "")))
        elif s == "memcg-charge":
            print("| limit (x peak) | limit (pages) | variant | ranks | Mops/s | (min..max of reps) | efficiency (vs own 1 rank) | cpu-eff | calls per CPU-s / stock:private | refused % | p50 ns | p99 ns | overshoot / bound (pages) |")
            print("|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
            for p in sp:
                mm = reps_range(p)
                print("| %g | %d | %s | %d | %.3f | %s | %s | %s | %s | %s | %s | %s | %d / %d |" % (
                    p.get("limit_ratio", 0), p.get("limit_pages", 0), p["variant"], p["ranks"],
                    p["ops_per_sec"] / 1e6, mm, fmt(p.get("efficiency")),
                    fmt(p.get("cpu_efficiency")), fmt(p.get("cpu_vs_private")),
                    fmt(p["refused_share"] * 100 if "refused_share" in p else None, "{:.3f}"),
                    ns(p.get("p50_ns")), ns(p.get("p99_ns")),
                    p.get("max_overshoot", 0), p.get("overshoot_bound", 0)))
        else:
            print("| variant | ranks | Mops/s | efficiency (vs own 1 rank) | cpu-eff | p50 ns | p99 ns | writer ops/s | writer max wait ns | bound check | note | warn |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
            for p in sp:
                b = ""
                if "max_overshoot" in p:
                    b = "overshoot %d / bound %d" % (p["max_overshoot"], p["overshoot_bound"])
                elif "max_error" in p:
                    b = "error %d / bound %d" % (p["max_error"], p["error_bound"])
                print("| %s | %d | %.3f | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    p["variant"], p["ranks"], p.get("ops_per_sec", float("nan")) / 1e6,
                    fmt(p.get("efficiency")),
                    fmt(p.get("cpu_efficiency")),
                    ns(p.get("p50_ns")), ns(p.get("p99_ns")),
                    fmt(p.get("writer_ops_per_sec"), "{:.0f}"), ns(p.get("writer_max_wait_ns")),
                    b, p.get("note", ""), p.get("warn", "")))


if __name__ == "__main__":
    main()
