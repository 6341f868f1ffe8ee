"""Benchmark the weight-simplex map: vectorised (linear basis) vs one rule call per grid point.

    python scripts/bench_scenarios.py [--quick] [--data-root DIR] [--resolution R]

Inputs: the Vote'n'Rank case study (7 models × 57 criteria, from the data root:
--data-root, else $VNR_DATA_ROOT, else ../shared/data) under
configs/scenarios/paper_case_study.yaml, and a synthetic table (40 models × 60
criteria in three groups). For every weighted / two-step Borda column it times
the straightforward loop (``loop_winners``: ``rank()`` at each point) and the
vectorised map (``simplex_map``: G corner calls + probe checks + one matrix
product), and checks that both give the same winners at every point.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ranking.scenarios import load_scenario  # noqa: E402
from ranking.scenarios.casestudy import load_case_study  # noqa: E402
from ranking.scenarios.scenario import Column  # noqa: E402
from ranking.scenarios.simplex import loop_winners, simplex_map  # noqa: E402
from ranking.table import Criterion, ScoreTable  # noqa: E402


def synthetic(n_models: int = 40, per_group: int = 20, seed: int = 0) -> ScoreTable:
    rng = np.random.default_rng(seed)
    groups = ("performance", "efficiency", "fairness")
    crits = tuple(
        Criterion(f"{g}_{j}", direction="lower" if g == "efficiency" else "higher", group=g)
        for g in groups
        for j in range(per_group)
    )
    values = rng.normal(size=(n_models, len(crits))).round(2)  # rounding makes per-criterion ties
    return ScoreTable(tuple(f"m{i:02d}" for i in range(n_models)), crits, values)


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench(name: str, table: ScoreTable, column: Column, ties: str, resolution: int, repeat: int) -> None:
    t_vec, smap = best_of(lambda: simplex_map(table, column, ties, resolution), repeat)
    t_loop, loop = best_of(lambda: loop_winners(table, column, ties, smap.points), 1)
    agree = int((smap.winners == loop).all(axis=1).sum())
    n = len(smap.points)
    print(
        f"{name:<34} {table.n_models:>3}×{table.n_criteria:<3} {n:>6} pts  loop {t_loop:8.3f} s  "
        f"vectorised ({smap.method}) {t_vec:7.4f} s  x{t_loop / t_vec:7.1f}  agree {agree}/{n}"
    )
    if agree != n:
        raise SystemExit(f"{name}: vectorised and loop maps disagree at {n - agree} points")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small grids (a few seconds)")
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--resolution", type=int, default=None, help="grid steps per side (default 40, quick 10)")
    args = ap.parse_args()
    res = args.resolution or (10 if args.quick else 40)
    repeat = 1 if args.quick else 3
    print(f"weight-simplex map, resolution {res} ({(res + 1) * (res + 2) // 2} points); times: best of {repeat}")
    root = args.data_root or os.environ.get("VNR_DATA_ROOT") or (REPO.parent / "shared" / "data")
    if Path(root, "leaderboards", "votenrank", "case_study_4").is_dir():
        sc = load_scenario(REPO / "configs" / "scenarios" / "paper_case_study.yaml")
        table = sc.build_table(load_case_study(root))
        for col in ("borda_weighted", "borda_two_step"):
            bench(f"case study {col}", table, sc.column(col), sc.ties, res, repeat)
    else:
        print(f"(no case study data under {root}: skipped)")
    syn = synthetic(n_models=20 if args.quick else 40)
    for setting in ("weighted", "two-step"):
        for rule in ("borda", "dowdall"):
            col = Column(f"{rule}_{setting}", rule, setting, {"performance": 1.0, "efficiency": 1.0, "fairness": 1.0})
            bench(f"synthetic {rule} {setting}", syn, col, "default", res, repeat)


if __name__ == "__main__":
    main()
