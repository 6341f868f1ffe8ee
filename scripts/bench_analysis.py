"""Benchmark the analyses against the straightforward implementations, side by side, on the same inputs.

    python scripts/bench_analysis.py            # a minute or two on 2 cores
    python scripts/bench_analysis.py --quick    # a few seconds (used by the tests)
    python scripts/bench_analysis.py --json out.json   # also write the compared values

Each line: what was computed, the input size, the straightforward way's time,
ours, the speed-up, and whether both gave the same answer. ``--json FILE``
writes ``{"rows": [{"computation", "size", "straightforward_s", "ours_s",
"agree", "straightforward", "ours"}, ...], "agree": bool}`` where
``straightforward`` / ``ours`` are the compared values (a number, a list, or
for matrices the largest absolute difference as ``max_abs_diff``). Exit
status 1 when any comparison differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranking.analysis.diversity import kendall_w, kendall_w_loops  # noqa: E402
from ranking.analysis.kemeny import disagreement_matrix, kemeny_brute_force, kemeny_dp  # noqa: E402
from ranking.analysis.sensitivity import win_rate_matrix, win_rate_matrix_loops  # noqa: E402
from ranking.floor.paths import write_text_atomic  # noqa: E402
from ranking.table import ScoreTable  # noqa: E402

ROWS: list[dict] = []


def timed(fn, *args, repeat: int = 1):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, out


def disagreement_loops(x: np.ndarray) -> np.ndarray:
    n, m = x.shape
    d = np.zeros((n, n))
    for u in range(n):
        for v in range(n):
            for j in range(m):
                if not (np.isnan(x[u, j]) or np.isnan(x[v, j])) and x[v, j] > x[u, j]:
                    d[u, v] += 1.0
    return d


def iia_validated(table: ScoreTable, reps: int, seed: int) -> list[int]:
    """IIA the straightforward way: a fully validated sub-table per step (ScoreTable.select_models)."""
    from ranking.settings import apply_setting

    rng = np.random.default_rng(seed)
    flips = []
    for _ in range(reps):
        perm = rng.permutation(table.n_models)
        prev, count = None, 0
        for t in range(2, table.n_models + 1):
            sub = table.select_models([table.models[i] for i in perm[:t]])
            r = apply_setting(sub, "copeland").ranks
            state = int(np.sign(r[1] - r[0]))
            count += prev is not None and state != prev
            prev = state
        flips.append(count)
    return flips


def iia_fast(table: ScoreTable, reps: int, seed: int) -> list[int]:
    from ranking.analysis._common import make_ranker
    from ranking.analysis.votenrank import iia_experiment

    return iia_experiment(table, make_ranker("copeland"), repetitions=reps, seed=seed)["flips"]


def row(name: str, size: str, slow: float, fast: float, agree: bool, **values) -> None:
    ROWS.append({"computation": name, "size": size, "straightforward_s": slow, "ours_s": fast, "agree": bool(agree),
                 **values})
    speed = f"{slow / fast:8.1f}x" if fast > 0 else "      inf"
    print(f"{name:34s} {size:>14s} {slow:10.4f}s {fast:10.4f}s {speed}  {'agree' if agree else 'DIFFER'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", help="also write the compared values as JSON")
    args = ap.parse_args(argv)
    ROWS.clear()
    rng = np.random.default_rng(args.seed)
    print(f"{'computation':34s} {'size':>14s} {'straightforward':>11s} {'ours':>11s} {'speed-up':>9s}  check")

    # Kemeny: brute force over permutations vs DP over subsets
    for n in ([7] if args.quick else [8, 9]):
        x = rng.integers(0, 5, size=(n, 6)).astype(float)
        d = disagreement_matrix(x)
        ts, (_, c_slow, k_slow) = timed(kemeny_brute_force, d)
        tf, (_, c_fast, k_fast) = timed(kemeny_dp, d, repeat=3)
        row("Kemeny exact (permutations vs DP)", f"n={n}, m=6", ts, tf, c_slow == c_fast and k_slow == k_fast,
            straightforward=[float(c_slow), int(k_slow)], ours=[float(c_fast), int(k_fast)])
    for n in ([14] if args.quick else [18, 20]):
        x = rng.normal(size=(n, 8))
        d = disagreement_matrix(x)
        tf, (order, cost, count) = timed(kemeny_dp, d)
        print(f"{'Kemeny DP alone':34s} {f'n={n}, m=8':>14s} {'-':>11s} {tf:10.4f}s {'':9s}  cost={cost:g}, "
              f"{count} optimal")

    # disagreement matrix: triple loop vs broadcast
    n, m = (20, 10) if args.quick else (60, 30)
    x = rng.integers(0, 5, size=(n, m)).astype(float)
    x[rng.random(x.shape) < 0.1] = np.nan
    ts, slow = timed(disagreement_loops, x)
    tf, fast = timed(disagreement_matrix, x, repeat=3)
    row("Kemeny disagreement matrix", f"{n}x{m}", ts, tf, bool(np.allclose(slow, fast)),
        max_abs_diff=float(np.max(np.abs(slow - fast))))

    # Kendall's W with tie correction: loops vs vectorised
    for n, m in ([(30, 20)] if args.quick else [(100, 57), (112, 300)]):
        x = np.round(rng.normal(size=(n, m)), 1)  # rounding makes ties
        ts, slow = timed(kendall_w_loops, x)
        tf, fast = timed(kendall_w, x, repeat=3)
        row("Kendall's W (tie-corrected)", f"{n}x{m}", ts, tf, abs(slow - fast) < 1e-9,
            straightforward=float(slow), ours=float(fast))

    # win-rate matrix: loops vs vectorised
    for n, m in ([(20, 10)] if args.quick else [(67, 16), (100, 50)]):
        x = np.round(rng.normal(size=(n, m)), 1)
        x[rng.random(x.shape) < 0.15] = np.nan
        ts, slow = timed(win_rate_matrix_loops, x)
        tf, fast = timed(win_rate_matrix, x, repeat=3)
        row("win-rate matrix", f"{n}x{m}", ts, tf, bool(np.allclose(slow, fast, equal_nan=True)),
            max_abs_diff=float(np.nanmax(np.abs(slow - fast))))

    # IIA: validated sub-tables vs fast sub-tables (same rule, same seed)
    n, m, reps = (12, 6, 5) if args.quick else (30, 8, 20)
    frame = pd.DataFrame(rng.normal(size=(n, m)), index=[f"M{i}" for i in range(n)], columns=[f"t{j}" for j in range(m)])
    table = ScoreTable.from_frame(frame)
    iia_validated(table, 1, args.seed), iia_fast(table, 1, args.seed)  # warm-up: imports, registry
    ts, slow = timed(iia_validated, table, reps, args.seed)
    tf, fast = timed(iia_fast, table, reps, args.seed)
    row("IIA experiment (copeland)", f"{n}x{m}, {reps} reps", ts, tf, slow == fast,
        straightforward=[int(v) for v in slow], ours=[int(v) for v in fast])
    agree = all(r["agree"] for r in ROWS)
    if args.json:
        write_text_atomic(args.json, json.dumps({"rows": ROWS, "agree": agree}, indent=2) + "\n")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
