#!/usr/bin/env python3
"""Paired ratios from a run-peers.sh TSV: for each repetition, dsh's figure
divided by the best other peer's in the same repetition (so that the load
of that moment weighs on both), then the median and range over repetitions.

    python3 bench/peers_paired.py results.tsv

Metrics, per repetition (N = smallest and largest step counts measured):
  ov     overhead per step, ms: (wall(N) - wall(1)) / (N - 1) - server time per step
  cpu    CPU (user+sys) per step, ms
  wall1  wall time of the 1-step run (fixed cost)
  ttfr   time from exec to the first model request (1-step run)
  rss    peak RSS of the largest run
"""
import csv
import statistics
import sys
from collections import defaultdict


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def main(path):
    rows = [r for r in csv.DictReader(open(path), delimiter="\t") if r["kind"] == "run" and r["done"] == "1"]
    by = defaultdict(dict)  # (peer, rep) -> steps -> row
    for r in rows:
        by[(r["peer"], r["rep"])][int(r["steps"])] = r
    steps = sorted({int(r["steps"]) for r in rows})
    if len(steps) < 2:
        print("peers_paired: need two step counts")
        return
    lo, hi = steps[0], steps[-1]
    metrics = {}  # (peer, rep) -> metric -> value
    for (p, rep), s in by.items():
        if lo not in s or hi not in s:
            continue
        a, b = s[lo], s[hi]
        d = hi - lo
        srv = (num(b["server_ms"]) - num(a["server_ms"])) / d
        metrics[(p, rep)] = {
            "ov": (num(b["wall_s"]) - num(a["wall_s"])) / d * 1000 - srv,
            "cpu": (num(b["cpu_s"]) - num(a["cpu_s"])) / d * 1000,
            "wall1": num(a["wall_s"]),
            "ttfr": num(a["first_req_s"]),
            "rss": num(b["maxrss_kb"]),
        }
    peers = sorted({p for p, _ in metrics})
    ours = [p for p in peers if p.startswith("dsh")]
    others = [p for p in peers if p not in ours]
    reps = sorted({rep for _, rep in metrics}, key=lambda x: (len(x), x))
    print(f"Paired ratios from `{path.split('/')[-1]}` (steps {lo} and {hi}): dsh's figure over the best other peer's in the same repetition\n")
    print("| dsh variant | metric | dsh (median) | ratio to the best other peer: median [min–max] | best peer per rep |")
    print("|---|---|---:|---:|---|")
    units = {"ov": "ms", "cpu": "ms", "wall1": "s", "ttfr": "s", "rss": "KB"}
    for p in ours:
        for m in ["ov", "cpu", "wall1", "ttfr", "rss"]:
            ratios, best_names, vals = [], [], []
            for rep in reps:
                mine = metrics.get((p, rep), {}).get(m)
                cands = [(metrics[(q, rep)][m], q) for q in others
                         if (q, rep) in metrics and metrics[(q, rep)][m] is not None and metrics[(q, rep)][m] > 0]
                if mine is None or not cands:
                    continue
                best, name = min(cands)
                ratios.append(mine / best)
                best_names.append(name)
                vals.append(mine)
            if not ratios:
                continue
            v = statistics.median(vals)
            shown = f"{v / 1024:.1f} MB" if m == "rss" else (f"{v:.1f} ms" if units[m] == "ms" else f"{v * 1000:.0f} ms")
            print(f"| {p} | {m} | {shown} | {statistics.median(ratios):.2f}× [{min(ratios):.2f}–{max(ratios):.2f}] (n={len(ratios)}) | {', '.join(best_names)} |")
    print()


if __name__ == "__main__":
    main(sys.argv[1])
