#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tables of ridx's callgrind runs: per lookup (less the empty loop) and per set.

usage: ridx-table.py DIR [COMPACT_DIR [BRANCH_DIR]]
  DIR, COMPACT_DIR: lookup-<L2|L3>-<N>.out/.txt, upkeep-<N>.out/.txt of the
  default and the -DA_COMPACT program (the latter with RIDX_ONLY=bplus);
  BRANCH_DIR: lookup-<N>.out of --branch-sim=yes runs of the default program.
"""
import re
import subprocess
import sys

ORDER = ["rb", "rb64", "rcu", "rcu_inl", "sorted", "bplus", "stree", "stree_delta", "eytz",
         "eytz_delta"]
NAMES = {"rb": "rb (unsync walk)", "rb64": "C1 rb, 64-B aligned nodes", "rcu": "rcu:node (call)",
         "rcu_inl": "rcu:node:inline", "sorted": "sorted array", "bplus": "A bplus",
         "stree": "B S+ snapshot, empty delta", "stree_delta": "B S+ snapshot, delta 32",
         "eytz": "B' Eytzinger, empty delta", "eytz_delta": "B' Eytzinger, delta 32"}


def inclusive(path, prefix, show="Ir,D1mr,DLmr"):
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--show=" + show,
                          "--threshold=100", path], capture_output=True, text=True).stdout
    res = {}
    ncol = len(show.split(","))
    for line in out.splitlines():
        m = re.match(r"(.*?)\s\S*ridx\.c:(" + prefix + r"\w+)(?:\.\w+)* \[", line)
        if not m:
            continue
        # the counts, each maybe followed by its share in parentheses; "." is 0
        nums = re.sub(r"\([^)]*\)", " ", m.group(1)).split()
        if len(nums) != ncol:
            continue
        res[m.group(2)] = [0 if v == "." else int(v.replace(",", "")) for v in nums]
    return res


def branches(d, dc, sizes):
    """Conditional branches mispredicted per lookup, less the empty loop's."""
    print("| structure | " + " | ".join(f"{n:.0e}" for n in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    data = {}
    for n in sizes:
        try:
            data[n] = inclusive(f"{d}/lookup-{n}.out", "m_", "Bc,Bcm")
        except FileNotFoundError:
            pass
        try:
            c = inclusive(f"{dc}/lookup-L2-{n}.out", "m_", "Bc,Bcm")
            if "m_bplus" in c:
                data.setdefault(n, {})["m_bplus_c"] = c["m_bplus"]
        except FileNotFoundError:
            pass
    for s in ORDER + ["bplus_c"]:
        cells = []
        for n in sizes:
            r = data.get(n, {})
            key = "m_" + s
            nul = r.get("m_null", [0, 0])
            cells.append(f"{(r[key][1] - nul[1]) / 100000:.2f}" if key in r else "-")
        print(f"| {NAMES.get(s, 'A compact')} | " + " | ".join(cells) + " |")


def lookups(d, sizes, dc=None):
    print("| structure | " + " | ".join(f"{n:.0e} Ir / D1mr / L2mr / L3mr" for n in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    data = {}
    for n in sizes:
        for cfg in ("L2", "L3"):
            try:
                data[(cfg, n)] = inclusive(f"{d}/lookup-{cfg}-{n}.out", "m_")
            except FileNotFoundError:
                pass
    if dc:
        for n in sizes:
            for cfg in ("L2", "L3"):
                try:
                    c = inclusive(f"{dc}/lookup-{cfg}-{n}.out", "m_")
                except FileNotFoundError:
                    continue
                if "m_bplus" not in c:
                    continue
                data.setdefault((cfg, n), {})["m_bplus_c"] = c["m_bplus"]
                data[(cfg, n)].setdefault("m_null", c["m_null"])
    for s in ORDER + (["bplus_c"] if dc else []):
        cells = []
        for n in sizes:
            l3 = data.get(("L3", n), {})
            l2 = data.get(("L2", n), {})
            key = "m_" + s
            if key not in l3 or "m_null" not in l3:
                cells.append("-")
                continue
            k = 100000.0
            ir = (l3[key][0] - l3["m_null"][0]) / k
            d1 = (l3[key][1] - l3["m_null"][1]) / k
            llm = (l3[key][2] - l3["m_null"][2]) / k
            l2m = (l2[key][2] - l2["m_null"][2]) / k if key in l2 and "m_null" in l2 else float("nan")
            cells.append(f"{ir:.0f} / {d1:.2f} / {l2m:.2f} / {llm:.2f}")
        print(f"| {NAMES.get(s, 'A compact')} | " + " | ".join(cells) + " |")


def upkeep(d, sizes, label=""):
    kinds = ["replace", "split", "unsplit", "remove", "readd"]
    print("| structure | N | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 2) + "|")
    for n in sizes:
        try:
            res = inclusive(f"{d}/upkeep-{n}.out", "u_")
            txt = open(f"{d}/upkeep-{n}.txt").read()
        except FileNotFoundError:
            continue
        sets = int(re.search(r"sets_per_kind (\d+)", txt).group(1))
        for s, per in (("rb", sets), ("rcu", sets), ("bplus", sets), ("delta", min(sets, 8))):
            cells = []
            for k in kinds:
                v = res.get(f"u_{s}_{k}")
                cells.append(f"{v[0] / per:.0f}" if v else "-")
            print(f"| {s}{label} | {n:.0e} | " + " | ".join(cells) + " |")
        for s in ("stree", "eytz"):
            v = res.get(f"u_{s}_rebuild")
            if v:
                print(f"| {s} rebuild, Ir per range | {n:.0e} | {v[0] / n:.1f} | | | | |")


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ridx-cg"
    dc = sys.argv[2] if len(sys.argv) > 2 else None
    db = sys.argv[3] if len(sys.argv) > 3 else None
    lookups(d, [100, 10000, 100000, 1000000], dc)
    print()
    upkeep(d, [100, 10000, 1000000])
    if dc:
        upkeep(dc, [100, 10000, 1000000], " (A compact run)")
    if db:
        print()
        branches(db, dc, [100000, 1000000])
