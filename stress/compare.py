#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Compare polstore-stress --json runs against the thresholds in a data file.

Usage: stress/compare.py [--strict] [--thresholds FILE] RUN.jsonl [RUN.jsonl ...]

Each figure of the thresholds file (stress/thresholds.txt by default; its
header says the format) is looked up in every run given: its value is the
point's median over the interleaved repetitions, its spread the slowest and
fastest repetition where the point records them.  With several runs the
figure is the median of the runs' values and the spread covers them all.

A figure is
  ok        when its value is on the right side of the limit;
  noise     when it is past the limit by no more than the tolerance, or some
            repetition was on the right side: within the noise of the run;
  OUTSIDE   when it is past the limit by more than the tolerance and no
            repetition reached it: a change outside the noise;
  absent    when the runs did not measure it.
A figure taken from a point that carries a warning (its "warn" field:
cpu, ref, noise; man polstore-stress, WARNINGS) says so after its name:
such a point measured the machine's load more than the code.

Report mode (the default) prints the table and always exits 0, so CI may
call it for information.  --strict exits 1 when a figure is OUTSIDE and 2
when a file cannot be read.
"""
import json
import os
import re
import statistics
import sys

# The fields that record a spread over repetitions: field -> (low, high).
SPREAD = {
    "ops_per_sec": ("ops_per_sec_min", "ops_per_sec_max"),
    "efficiency": ("efficiency_min", "efficiency_max"),
    "lookup_ns_median": ("lookup_ns", "lookup_ns_max"),
    "set_ns": ("set_ns_min", "set_ns_max"),
    "writer_max_wait_ns": ("writer_max_wait_min_ns", "writer_max_wait_ns"),
    "writer_ops_per_sec": ("writer_ops_per_sec_min", "writer_ops_per_sec_max"),
}

TERM = re.compile(r"^(?P<scn>[a-z-]+)/(?P<var>[^/:]+(?::[a-z]+)*)(?P<keys>(?:/[a-z_]+=[^/:]+)*):(?P<field>[a-z_0-9]+)$")


class Bad(Exception):
    pass


def parse_term(text):
    m = TERM.match(text)
    if not m:
        raise Bad("not a figure: %r" % text)
    keys = {}
    for kv in m.group("keys").split("/")[1:]:
        k, v = kv.split("=", 1)
        keys[k] = v
    return {"scenario": m.group("scn"), "variant": m.group("var"), "keys": keys,
            "field": m.group("field"), "text": text}


def read_thresholds(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if len(words) < 4 or words[-3] not in ("<=", ">="):
                raise Bad("%s:%d: want FIGURE OP LIMIT TOLERANCE" % (path, n))
            fig = " ".join(words[:-3])
            parts = [p.strip() for p in fig.split(" / ")]
            if len(parts) > 2:
                raise Bad("%s:%d: at most one ' / '" % (path, n))
            try:
                limit, tol = float(words[-2]), float(words[-1])
            except ValueError:
                raise Bad("%s:%d: LIMIT and TOLERANCE are numbers" % (path, n))
            rows.append({"figure": fig, "terms": [parse_term(p) for p in parts],
                         "op": words[-3], "limit": limit, "tol": tol})
    return rows


def read_run(path):
    pts = []
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                pts.append(json.loads(line))
    if not pts:
        raise Bad("%s: no polstore-stress --json points" % path)
    return pts


def find(pts, term):
    for p in pts:
        if p.get("scenario") != term["scenario"] or p.get("variant") != term["variant"]:
            continue
        if all(str(p.get(k)) == v for k, v in term["keys"].items()):
            return p
    return None


def term_value(pts, term):
    """(value, low, high) of one term in one run, or None."""
    p = find(pts, term)
    if p is None or term["field"] not in p:
        return None
    v = float(p[term["field"]])
    lo_key, hi_key = SPREAD.get(term["field"], (None, None))
    lo = float(p[lo_key]) if lo_key in p else v
    hi = float(p[hi_key]) if hi_key in p else v
    return v, min(lo, v), max(hi, v)


def figure_warn(pts, row):
    """The warnings of the points a figure is taken from, in one run."""
    got = set()
    for t in row["terms"]:
        p = find(pts, t)
        if p is not None and p.get("warn"):
            got.update(p["warn"].split("+"))
    return got


def figure_value(pts, row):
    vals = [term_value(pts, t) for t in row["terms"]]
    if any(v is None for v in vals):
        return None
    if len(vals) == 1:
        return vals[0]
    (a, alo, ahi), (b, blo, bhi) = vals
    if b == 0 or blo == 0:
        return None
    return a / b, alo / bhi, ahi / blo


def meets(v, op, limit):
    return v <= limit if op == "<=" else v >= limit


def verdict(row, runs):
    got = [figure_value(pts, row) for pts in runs]
    got = [g for g in got if g is not None]
    if not got:
        return None, None, None, "absent"
    v = statistics.median(g[0] for g in got)
    lo = min(g[1] for g in got)
    hi = max(g[2] for g in got)
    op, limit, tol = row["op"], row["limit"], row["tol"]
    if meets(v, op, limit):
        return v, lo, hi, "ok"
    best = lo if op == "<=" else hi
    slack = abs(limit) * tol
    if abs(v - limit) <= slack or meets(best, op, limit):
        return v, lo, hi, "noise"
    return v, lo, hi, "OUTSIDE"


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1e5:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    return "%.3f" % v


def main(argv):
    strict = False
    thr = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thresholds.txt")
    files = []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--strict":
            strict = True
        elif a == "--report":
            strict = False
        elif a == "--thresholds":
            if not args:
                raise Bad("--thresholds needs a file")
            thr = args.pop(0)
        elif a.startswith("--thresholds="):
            thr = a.split("=", 1)[1]
        elif a.startswith("-"):
            raise Bad("unknown option %s (see --help)" % a)
        else:
            files.append(a)
    if not files:
        raise Bad("no run given (see --help)")
    rows = read_thresholds(thr)
    runs = [read_run(f) for f in files]
    counts = {"ok": 0, "noise": 0, "OUTSIDE": 0, "absent": 0}
    warned = 0
    print("%-8s %12s %25s %4s %10s %5s  %s" % ("verdict", "median", "(spread)", "op", "limit",
                                              "tol", "figure"))
    for r in rows:
        v, lo, hi, what = verdict(r, runs)
        counts[what] += 1
        if what == "absent":
            continue
        warn = set()
        for pts in runs:
            warn |= figure_warn(pts, r)
        warned += bool(warn)
        print("%-8s %12s %25s %4s %10s %4.0f%%  %s%s" % (
            what, fmt(v), "(%s .. %s)" % (fmt(lo), fmt(hi)), r["op"], fmt(r["limit"]),
            r["tol"] * 100, r["figure"],
            "  [warn: %s]" % "+".join(sorted(warn)) if warn else ""))
    print("\n%d figure(s) ok, %d within the noise, %d OUTSIDE the noise, %d not measured "
          "by %s" % (counts["ok"], counts["noise"], counts["OUTSIDE"], counts["absent"],
                     ", ".join(files)))
    if warned:
        print("%d figure(s) from points that carry a warning ([warn: ...]): not meaningful "
              "on this run" % warned)
    for r in rows:
        if verdict(r, runs)[3] == "OUTSIDE":
            print("outside the noise: %s (%s %s)" % (r["figure"], r["op"], fmt(r["limit"])))
    return 1 if strict and counts["OUTSIDE"] else 0


if __name__ == "__main__":
    strict_mode = "--strict" in sys.argv[1:]
    try:
        sys.exit(main(sys.argv[1:]))
    except (Bad, OSError, ValueError) as e:
        print("compare.py: %s" % e, file=sys.stderr)
        sys.exit(2 if strict_mode else 0)
