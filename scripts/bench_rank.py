"""Benchmark rank intervals (``vnr rank --intervals``) against a plain numpy bootstrap of the same draws, in one run.

    python scripts/bench_rank.py                 # positional rules at 1000 models x 50 criteria, 1000 draws;
                                                 # then every rule at 200 x 50
    python scripts/bench_rank.py --quick         # small sizes, a few seconds (the tests call this)
    python scripts/bench_rank.py --json out.json # also write what was measured and compared

"Ours": :func:`ranking.intervals.rank_intervals` — the drawn tables scored in chunks (one sort per
draw and criterion for a positional rule), the simultaneous max statistic by Dinkelbach's iteration,
rank bounds by two sorts. "Plain": the straightforward bootstrap a user would write — per draw, the
table plus noise, each criterion's ranks by a double argsort, the rule's scores, the ranks of the
scores; then per model the 2.5 / 97.5 % percentiles of its ranks (marginal, not simultaneous, and
wrong near ties: the reason we do not use it). Both sides draw the very same tables (one seed), and
the script checks that they computed the same drawn scores (ours keeps them; the plain way recomputes
them) — exit status 1 if not.

``--json FILE`` writes ``{"runs": [{"rule", "models", "criteria", "draws", "ours_s", "plain_s",
"max_abs_score_diff", "agree"}], "all_rules": {"models", "criteria", "draws", "seconds": {rule: s},
"all_at_once_s", "rules"}, "agree"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranking.api import rank  # noqa: E402
from ranking.floor.paths import write_text_atomic  # noqa: E402
from ranking.intervals import draw_source, rank_intervals, score_draws  # noqa: E402
from ranking.table import Criterion, ScoreTable  # noqa: E402


def noisy_table(n: int, m: int, seed: int) -> ScoreTable:
    """``n × m`` scores in [0.5, 1) with standard errors of 0.02 (neighbours are often inseparable)."""
    rng = np.random.default_rng(seed)
    return ScoreTable(tuple(f"model{i}" for i in range(n)), tuple(Criterion(f"task{j}") for j in range(m)),
                      0.5 + 0.5 * rng.random((n, m)), standard_errors=np.full((n, m), 0.02))


def plain_bootstrap(table: ScoreTable, rule: str, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The straightforward way: per draw, per criterion ranks by a double argsort; percentile rank intervals."""
    rng = np.random.default_rng(seed)
    n, m = table.shape
    se = table.standard_errors
    scores = np.empty((draws, n))
    ranks = np.empty((draws, n))
    chunk = max(1, 5_000_000 // (n * m))  # the same draws as ours: same generator calls, same chunks
    b = 0
    while b < draws:
        k = min(chunk, draws - b)
        noise = rng.standard_normal((k, m, n), dtype=np.float32)  # as ours draws them: criterion-major
        for t in range(k):
            x = table.values + noise[t].T * se
            s = np.zeros(n)
            for j in range(m):
                r = np.argsort(np.argsort(x[:, j]))  # 0 = worst
                if rule == "borda":
                    s += r
                elif rule == "plurality":
                    s += r == n - 1
                elif rule == "dowdall":
                    s += 1.0 / (n - r)
                elif rule == "threshold":
                    s += r != 0
                else:
                    raise ValueError(rule)
            scores[b + t] = s
            ranks[b + t] = 1 + np.argsort(np.argsort(-s))
        b += k
    lo, hi = np.percentile(ranks, [2.5, 97.5], axis=0)
    return scores, lo, hi


def measure(n: int, m: int, draws: int, rules: list[str], seed: int) -> list[dict]:
    table = noisy_table(n, m, seed)
    point = rank(table, rules)
    runs = []
    for rule in rules:
        t0 = time.perf_counter()
        rank_intervals(table, {rule: point[rule]}, source=draw_source(table), draws=draws, seed=seed)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        plain_scores, _, _ = plain_bootstrap(table, rule, draws, seed)
        plain = time.perf_counter() - t0
        ours_scores = score_draws(table, rule, draw_source(table), draws, seed)
        diff = float(np.abs(ours_scores - plain_scores).max())
        runs.append({"rule": rule, "models": n, "criteria": m, "draws": draws, "ours_s": round(ours, 3),
                     "plain_s": round(plain, 3), "max_abs_score_diff": diff, "agree": diff <= 1e-9 * n * m})
        print(f"{rule:>10} {n} x {m}, {draws} draws: ours {ours:6.2f} s   plain numpy bootstrap {plain:6.2f} s   "
              f"(drawn scores agree: {runs[-1]['agree']})", flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    big, small, draws = ((60, 10, 100), (30, 10), 100) if args.quick else ((1000, 50, 1000), (200, 50), 1000)
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs", flush=True)
    runs = measure(*big, ["borda", "plurality", "dowdall", "threshold"], args.seed)
    table = noisy_table(*small, args.seed)
    point = rank(table, "all")
    seconds = {}
    for rule, res in point.results.items():
        t0 = time.perf_counter()
        rank_intervals(table, {rule: res}, source=draw_source(table), draws=draws, seed=args.seed)
        seconds[rule] = round(time.perf_counter() - t0, 3)
        print(f"{rule:>16} {small[0]} x {small[1]}, {draws} draws: {seconds[rule]:6.2f} s", flush=True)
    t0 = time.perf_counter()
    together = rank_intervals(table, point.results, source=draw_source(table), draws=draws, seed=args.seed)
    all_at_once = round(time.perf_counter() - t0, 3)
    print(f"every rule at {small[0]} x {small[1]}: {sum(seconds.values()):.2f} s one rule at a time, "
          f"{all_at_once:.2f} s all at once (what `vnr rank --rule all --intervals` runs: one set of draws, one "
          "sort per chunk for the positional rules, one pairwise count for the majority rules)")
    agree = all(r["agree"] for r in runs)
    if args.json:
        doc = {"runs": runs, "all_rules": {"models": small[0], "criteria": small[1], "draws": draws,
                                           "seconds": seconds, "all_at_once_s": all_at_once,
                                           "rules": sorted(together)}, "agree": agree}
        write_text_atomic(Path(args.json), json.dumps(doc, indent=2))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
