"""Benchmark the ranking engine against the straightforward way, on the same random table, in one run.

    python scripts/bench_ranking.py            # 1000 models x 50 criteria; straightforward prospective on a sample
    python scripts/bench_ranking.py --full     # ... measured for all models (several minutes)
    python scripts/bench_ranking.py --quick    # small sizes, a few seconds (the tests call this)
    python scripts/bench_ranking.py --json out.json   # also write the measured and compared values

``--json FILE`` writes ``{"models", "criteria", "seed", "rules": {rule: {"ours_s",
"straightforward_s", "max_abs_score_diff", "ranks_equal", "agree"}}, "prospective":
{"ours_s", "straightforward_s", "sample", "n_prospective", "mismatches", "agree"}, "agree"}``.

"Ours": every registered rule from a fresh table (so the first majority rule
pays for the shared pairwise matrices), then ``prospective`` for every model.
"Straightforward": the textbook way — Python loops over pairs of models for
the majority matrix, a Python sort per criterion for positional points,
Baldwin re-sorting the survivors every round, and for prospective systems one
feasibility LP per model with its constraint matrix built row by row. Both
sides run on the same table and the script checks that they agree (scores,
ranks, winners; prospective yes/no). Exit status 1 if they do not.
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
from scipy.optimize import linprog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranking.floor.paths import write_text_atomic  # noqa: E402
from ranking.prospective import prospective  # noqa: E402
from ranking.result import positions_from_scores  # noqa: E402
from ranking.rules import get_rule, rule_names  # noqa: E402
from ranking.table import Criterion, ScoreTable  # noqa: E402


def random_table(n: int, m: int, seed: int) -> ScoreTable:
    rng = np.random.default_rng(seed)
    values = rng.random((n, m))
    return ScoreTable(tuple(f"model{i}" for i in range(n)), tuple(Criterion(f"task{j}") for j in range(m)), values)


# ---------------------------------------------------------------------- the straightforward way
def naive_majority(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """wins[a][b] with a Python loop over every pair of models."""
    n = x.shape[0]
    wins = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            if a != b:
                wins[a, b] = float(np.sum(w[x[a] > x[b]]))
    return wins


def naive_positions(x: np.ndarray) -> list[list[int]]:
    """positions[j][i]: 0-based position of model i on criterion j (no ties in a random table)."""
    out = []
    for j in range(x.shape[1]):
        order = sorted(range(x.shape[0]), key=lambda i: -x[i, j])
        pos = [0] * x.shape[0]
        for p, i in enumerate(order):
            pos[i] = p
        out.append(pos)
    return out


def ranked(s: np.ndarray) -> np.ndarray:
    """Positions from scores, equal up to float noise of summation order (as any careful tally would)."""
    return positions_from_scores(np.round(s / max(np.abs(s).max(), 1e-300), 9))


def naive_rules(table: ScoreTable, timings: dict[str, float]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    x, w = table.oriented, table.weights
    n, m = x.shape
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        result = fn()
        timings[name] = time.perf_counter() - t0
        out[name] = result

    positions: list[list[int]] = []

    def positional(points):
        def run():
            if not positions:
                positions.extend(naive_positions(x))
            s = np.zeros(n)
            for j in range(m):
                for i in range(n):
                    s[i] += w[j] * points(positions[j][i], n)
            return s, ranked(s)

        return run

    timed("plurality", positional(lambda p, k: 1.0 if p == 0 else 0.0))
    timed("borda", positional(lambda p, k: k - 1 - p))
    timed("dowdall", positional(lambda p, k: 1.0 / (p + 1)))

    def threshold():
        s = np.zeros(n)
        keys = []
        for i in range(n):
            from_bottom = [0.0] * n
            for j in range(m):
                from_bottom[n - 1 - positions[j][i]] += w[j]
            s[i] = w.sum() - from_bottom[0]
            keys.append(tuple(-c for c in from_bottom[: n - 1]))
        ranks = np.array([1 + sum(1 for k in keys if k > keys[i]) for i in range(n)], dtype=float)
        return s, ranks

    timed("threshold", threshold)

    def baldwin():
        alive = list(range(n))
        before = np.zeros(n)
        gone = 0
        while alive:
            borda = {i: 0.0 for i in alive}
            for j in range(m):
                order = sorted(alive, key=lambda i: -x[i, j])
                for p, i in enumerate(order):
                    borda[i] += w[j] * (len(alive) - 1 - p)
            lo, hi = min(borda.values()), max(borda.values())
            if hi - lo <= 1e-9:
                for i in alive:
                    before[i] = gone
                break
            out_ = [i for i in alive if borda[i] <= lo + 1e-9]
            for i in out_:
                before[i] = gone
            gone += len(out_)
            alive = [i for i in alive if i not in out_]
        return before, ranked(before)

    timed("baldwin", baldwin)
    wins_box: list[np.ndarray] = []

    def majority():
        if not wins_box:
            wins_box.append(naive_majority(x, w))
        return wins_box[0]

    def condorcet():
        wins = majority()
        s = np.array([1.0 if all(wins[a, b] > wins[b, a] for b in range(n) if b != a) else 0.0 for a in range(n)])
        return s, np.where(s == 1, 1.0, 2.0)

    def copeland():
        wins = majority()
        s = np.array([sum(int(wins[a, b] > wins[b, a]) - int(wins[b, a] > wins[a, b]) for b in range(n) if b != a)
                      for a in range(n)], dtype=float)
        return s, ranked(s)

    def minimax():
        wins = majority()
        s = np.array([-max([wins[b, a] if wins[b, a] > wins[a, b] else 0.0 for b in range(n) if b != a] or [0.0])
                      for a in range(n)]) + 0.0
        return s, ranked(s)

    timed("condorcet", condorcet)  # pays for the pair loops
    timed("copeland", copeland)
    timed("minimax", minimax)

    def mean(kind):
        def run():
            s = np.zeros(n)
            for i in range(n):
                if kind == "arithmetic_mean":
                    s[i] = sum(w[j] * x[i, j] for j in range(m)) / w.sum()
                elif kind == "geometric_mean":
                    s[i] = float(np.exp(sum(w[j] * np.log(x[i, j]) for j in range(m)) / w.sum()))
                else:
                    s[i] = sum(w[j] * (min(x[i, j], 1.0) - 1.0) for j in range(m)) / w.sum()
            return s, ranked(s)

        return run

    for kind in ("arithmetic_mean", "geometric_mean", "optimality_gap"):
        timed(kind, mean(kind))
    return out


def naive_prospective(table: ScoreTable, models: list[int]) -> dict[int, bool]:
    """One feasibility LP per model, its constraint matrix built row by row (rival by rival, criterion by criterion)."""
    x = table.oriented
    n, m = x.shape
    out = {}
    for a in models:
        rows = []
        for b in range(n):
            if b == a:
                continue
            row = []
            for j in range(m):
                d = 1.0 if x[a, j] > x[b, j] else (-1.0 if x[a, j] < x[b, j] else 0.0)
                row.append(-d)  # -sum_j w_j d_j <= 0
            rows.append(row)
        res = linprog(np.zeros(m), A_ub=np.array(rows), b_ub=np.zeros(len(rows)), A_eq=np.ones((1, m)), b_eq=[1.0],
                      bounds=[(0, 1)] * m, method="highs")
        out[a] = res.status == 0
    return out


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--criteria", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=100, help="models in the straightforward prospective run")
    ap.add_argument("--full", action="store_true", help="straightforward prospective for every model")
    ap.add_argument("--quick", action="store_true", help="200 models x 20 criteria, sample 20 (a few seconds)")
    ap.add_argument("--json", metavar="FILE", help="also write the timings and the compared values as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.models, args.criteria, args.sample = 200, 20, 20
    n, m = args.models, args.criteria
    print(f"# ranking engine benchmark: {n} models x {m} criteria (seed {args.seed})")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, {platform.machine()}")

    # ours: all rules on a fresh table (the pairwise matrices are built inside the timing)
    table = random_table(n, m, args.seed)
    ours: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    ours_t: dict[str, float] = {}
    for name in rule_names():
        t0 = time.perf_counter()
        r = get_rule(name)(table, **({"scale": 1.0} if name == "optimality_gap" else {}))
        ours_t[name] = time.perf_counter() - t0
        ours[name] = (r.scores, r.ranks)
    naive_t: dict[str, float] = {}
    naive = naive_rules(random_table(n, m, args.seed), naive_t)

    print(f"\n{'rule':<16} {'ours (s)':>10} {'straightforward (s)':>20} {'speed-up':>9}  agree")
    disagreements = []
    report: dict = {"models": n, "criteria": m, "seed": args.seed, "rules": {}}
    for name in rule_names():
        (s1, r1), (s2, r2) = ours[name], naive[name]
        ok = np.allclose(s1, s2, rtol=1e-9, atol=1e-9) and np.array_equal(r1, r2)
        report["rules"][name] = {
            "ours_s": ours_t[name], "straightforward_s": naive_t[name],
            "max_abs_score_diff": float(np.max(np.abs(s1 - s2))), "ranks_equal": bool(np.array_equal(r1, r2)),
            "agree": bool(ok),
        }
        if not ok:
            disagreements.append(name)
        print(f"{name:<16} {ours_t[name]:>10.4f} {naive_t[name]:>20.3f} {naive_t[name] / max(ours_t[name], 1e-9):>8.0f}x  "
              f"{'yes' if ok else 'NO'}")
    total_ours, total_naive = sum(ours_t.values()), sum(naive_t.values())
    print(f"{'all rules':<16} {total_ours:>10.3f} {total_naive:>20.3f} {total_naive / total_ours:>8.0f}x")

    # prospective systems
    t0 = time.perf_counter()
    found = prospective(table)
    ours_p = time.perf_counter() - t0
    sample = list(range(n)) if args.full else list(np.random.default_rng(args.seed).choice(n, min(args.sample, n), replace=False))
    t0 = time.perf_counter()
    naive_p = naive_prospective(table, sample)
    naive_p_t = time.perf_counter() - t0
    mismatches = [table.models[a] for a, ok in naive_p.items() if found[table.models[a]].prospective != ok]
    agree_p = not mismatches
    if not agree_p:
        disagreements.append("prospective")
    n_yes = sum(r.prospective for r in found.values())
    report["prospective"] = {"ours_s": ours_p, "straightforward_s": naive_p_t, "sample": len(sample),
                             "n_prospective": n_yes, "mismatches": mismatches, "agree": agree_p}
    report["agree"] = not disagreements
    if args.json:
        write_text_atomic(args.json, json.dumps(report, indent=2) + "\n")
    print(f"\nprospective, all {n} models (ours): {ours_p:.2f} s  ({n_yes} prospective, weak)")
    if len(sample) == n:
        print(f"prospective, all {n} models (straightforward, measured): {naive_p_t:.1f} s  "
              f"speed-up {naive_p_t / ours_p:.0f}x  agree: {'yes' if agree_p else 'NO'}")
    else:
        est = naive_p_t / len(sample) * n
        print(f"prospective, straightforward, measured on a random sample of {len(sample)} models: {naive_p_t:.1f} s; "
              f"EXTRAPOLATED to {n} models: ~{est:.0f} s (speed-up ~{est / ours_p:.0f}x; run with --full to measure)  "
              f"agree on the sample: {'yes' if agree_p else 'NO'}")
    if disagreements:
        print(f"\nDISAGREEMENT: {', '.join(disagreements)}")
        return 1
    print("\nsanity check: ours and the straightforward way agree on every rule and on prospective systems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
