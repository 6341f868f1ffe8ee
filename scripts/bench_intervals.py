"""Rank intervals by simulation: simultaneous coverage and width, the method before beside today's, on the
same drawn tables (``ranking/intervals.py``; issue #34 item 5).

Scenarios (each replication draws an observed table around a known truth, then intervals from ``--draws``
draws of its uncertainty):

* ``ties N×M``: every model tied in truth (standard error 0.02 per score): every interval must hold rank 1;
* ``separated N×M``: true scores 6 standard errors apart on every criterion: the width must not grow;
* ``missing N×M``: a third of the models scored on one criterion only (arithmetic mean): width beside the
  studentised-differences reference on the same draws;
* ``shared N×M``: one run's luck moves all of a model's scores (seed effect 0.02 shared by its criteria, 0.01
  per cell, 5 seeds): per-cell standard errors (all an imported table has) beside whole seeds drawn per model;
* ``expected 5×50``: one model wins 70 % of criteria by a hair and loses the rest by a mile: coverage of the
  ranks of the rule's expected score beside the rule applied to the true table.

Old = draws around the observed table, deviations from the point score, scale ``σ_i + σ_j``; new = draws
around the ties the data allow, deviations from the draws' mean, each difference studentised by its own
spread (``pairwise``), the max statistic calibrated out of sample (``CROSS_FIT``); ref = each difference
studentised in sample (``CROSS_FIT`` off), on the new draws (the audit's reference).

    python scripts/bench_intervals.py                 # 150 replications, 200 draws (a few minutes)
    python scripts/bench_intervals.py --reps 40 --quick
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ranking.intervals as intervals  # noqa: E402
from ranking.api import rank  # noqa: E402
from ranking.intervals import draw_source, rank_intervals, seed_table_source  # noqa: E402
from ranking.settings import apply_setting  # noqa: E402
from ranking.table import Criterion, ScoreTable  # noqa: E402

RULES = ("borda", "copeland", "plurality", "dowdall", "threshold", "minimax", "baldwin", "arithmetic_mean")
SE = 0.02


def table(values: np.ndarray, se: float | np.ndarray | None) -> ScoreTable:
    n, m = values.shape
    errors = None if se is None else np.where(np.isnan(values), np.nan, np.broadcast_to(se, values.shape))
    return ScoreTable(tuple(f"M{i}" for i in range(n)), tuple(Criterion(f"c{j}") for j in range(m)), values,
                      standard_errors=errors)


def methods(observed: ScoreTable, rules, draws: int, seed: int, source=None) -> dict[str, dict]:
    point = rank(observed, list(rules))
    src = source if source is not None else draw_source(observed)
    out = {"old": rank_intervals(observed, point.results, source=src, draws=draws, seed=seed, recentre=False),
           "new": rank_intervals(observed, point.results, source=src, draws=draws, seed=seed)}
    intervals.CROSS_FIT = False  # the reference: each difference studentised in sample, on the new draws
    try:
        out["ref"] = rank_intervals(observed, point.results, source=src, draws=draws, seed=seed)
    finally:
        intervals.CROSS_FIT = True
    return out


def expected_ranks(truth: np.ndarray, rule: str, draws: int = 2000) -> np.ndarray:
    """The ranks of the rule's expected score over tables drawn around ``truth`` (what the intervals cover); where
    every score ties in truth (or the rule is linear) the same as the rule on the true table."""
    from ranking.intervals import score_draws
    from ranking.rules import positions_from_scores

    t = table(truth, SE)
    if rule == "arithmetic_mean" or np.all(truth == truth.flat[0]):
        return apply_setting(t, rule).ranks
    if rule == "threshold":  # lexicographic: the positions of its expected keys
        from ranking.rules import WEIGHT_RTOL, lexicographic_positions, threshold_keys

        noisy = truth[None] + np.random.default_rng(1).standard_normal((draws, *truth.shape)) * SE
        keys = np.mean([threshold_keys(t.with_values(v)) for v in noisy], axis=0)
        return lexicographic_positions(keys, tol=WEIGHT_RTOL * t.n_criteria * t.n_models)
    mean_score = score_draws(t, rule, draw_source(t), draws, 1).mean(axis=0)
    return positions_from_scores(mean_score, atol=1e-9 * max(1.0, float(np.abs(mean_score).max())))


def covered(iv, truth_ranks) -> bool:
    ok = ~np.isnan(truth_ranks)
    return bool(np.all((iv.rank_lo[ok] <= truth_ranks[ok]) & (truth_ranks[ok] <= iv.rank_hi[ok])))


def width(iv) -> float:
    return float(np.nanmean(iv.rank_hi - iv.rank_lo))


def run_truth(name: str, truth: np.ndarray, rules, reps: int, draws: int, rng, observe=None) -> None:
    true_ranks = {r: expected_ranks(truth, r) for r in rules}
    cover = {k: dict.fromkeys(rules, 0) for k in ("old", "ref", "new")}
    wide = {k: dict.fromkeys(rules, 0.0) for k in ("old", "ref", "new")}
    t0 = time.perf_counter()
    for _ in range(reps):
        observed = table(truth + rng.standard_normal(truth.shape) * SE, SE) if observe is None else observe(rng)
        found = methods(observed, rules, draws, int(rng.integers(1 << 30)))
        for k, per_rule in found.items():
            for r in rules:
                cover[k][r] += covered(per_rule[r], true_ranks[r])
                wide[k][r] += width(per_rule[r]) / reps
    print(f"\n{name} ({reps} tables, {draws} draws, {time.perf_counter() - t0:.0f} s)")
    print(f"  {'rule':<16}{'coverage old':>13}{'ref':>7}{'new':>7}   {'width old':>9}{'ref':>7}{'new':>7}"
          f"{'new/ref':>9}")
    for r in rules:
        print(f"  {r:<16}{cover['old'][r] / reps:>13.3f}{cover['ref'][r] / reps:>7.3f}{cover['new'][r] / reps:>7.3f}"
              f"   {wide['old'][r]:>9.2f}{wide['ref'][r]:>7.2f}{wide['new'][r]:>7.2f}"
              + (f"{wide['new'][r] / wide['ref'][r]:>9.3f}" if wide["ref"][r] > 0.05 else f"{'-':>9}"))


def run_missing(n: int, m: int, reps: int, draws: int, rng) -> None:
    truth = np.tile(np.linspace(0.5, 0.9, n)[:, None], (1, m))
    few = np.arange(n) % 3 == 0  # a third of the models on one criterion only
    truth[few, 1:] = np.nan

    def observe(r):
        v = truth + r.standard_normal(truth.shape) * SE
        v[few, 1:] = np.nan
        return table(v, SE)

    run_truth(f"missing {n}x{m} (a third of the models on one criterion)", truth, ("arithmetic_mean",), reps,
              draws, rng, observe)


def run_shared(n: int, m: int, seeds: int, reps: int, draws: int, rng) -> None:
    truth = np.full((n, m), 0.5) + np.linspace(0, 0.01, n)[:, None]  # near ties
    rules = ("borda", "copeland", "arithmetic_mean")
    true_ranks = {r: apply_setting(table(truth, SE), r).ranks for r in rules}
    cover = {k: dict.fromkeys(rules, 0) for k in ("cells", "seeds")}
    t0 = time.perf_counter()
    for _ in range(reps):
        per_seed = truth[:, None, :] + 0.02 * rng.standard_normal((n, seeds, 1)) \
            + 0.01 * rng.standard_normal((n, seeds, m))
        means = per_seed.mean(axis=1)
        se = per_seed.std(axis=1, ddof=1) / np.sqrt(seeds)
        s = int(rng.integers(1 << 30))
        cells = table(means, se)
        point = rank(cells, list(rules))
        by_cell = rank_intervals(cells, point.results, source=draw_source(cells), draws=draws, seed=s)
        plain = table(means, None)
        by_seed = rank_intervals(plain, point.results, source=seed_table_source(plain, per_seed), draws=draws, seed=s)
        for r in rules:
            cover["cells"][r] += covered(by_cell[r], true_ranks[r])
            cover["seeds"][r] += covered(by_seed[r], true_ranks[r])
    print(f"\nshared {n}x{m}, {seeds} seeds: a seed's luck moves all of a model's scores ({reps} tables, "
          f"{time.perf_counter() - t0:.0f} s)")
    print(f"  {'rule':<16}{'per-cell errors':>16}{'whole seeds':>13}")
    for r in rules:
        print(f"  {r:<16}{cover['cells'][r] / reps:>16.3f}{cover['seeds'][r] / reps:>13.3f}")


def run_expected(reps: int, draws: int, rng) -> None:
    m = 50
    truth = 0.5 + rng.uniform(-0.001, 0.001, (5, m))
    hair = np.arange(m) < 35  # model 0 wins 70 % of criteria by a hair, loses the rest by a mile
    truth[0] = np.where(hair, truth[1:].max(axis=0) + 0.002, truth[1:].min(axis=0) - 0.3)
    rules = ("copeland", "borda")
    true_table = {r: apply_setting(table(truth, SE), r).ranks for r in rules}
    exp_ranks = {r: expected_ranks(truth, r, 4000) for r in rules}
    hit = {r: [0, 0] for r in rules}
    for _ in range(reps):
        observed = table(truth + rng.standard_normal(truth.shape) * SE, SE)
        found = methods(observed, rules, draws, int(rng.integers(1 << 30)))["new"]
        for r in rules:
            hit[r][0] += covered(found[r], true_table[r])
            hit[r][1] += covered(found[r], exp_ranks[r])
    print(f"\nexpected 5x{m}: model 0 wins 70 % of criteria by a hair, loses the rest by a mile ({reps} tables)")
    for r in rules:
        print(f"  {r:<16} covers the rule on the true table {hit[r][0] / reps:.3f}, the expected score's ranks "
              f"{hit[r][1] / reps:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=150)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="only the 20-model scenarios")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print("rank intervals, 95 %: coverage (every model's true rank inside) and mean width (rank_hi - rank_lo)")
    run_truth("ties 5x6", np.full((5, 6), 0.5), RULES, args.reps, args.draws, rng)
    run_truth("ties 20x10", np.full((20, 10), 0.5), RULES, args.reps, args.draws, rng)
    if not args.quick:
        run_truth("ties 50x20", np.full((50, 20), 0.5), RULES, args.reps, args.draws, rng)
    run_truth("moderate 20x10 (neighbours 1 standard error apart)",
              np.tile(0.5 + SE * np.arange(20)[:, None], (1, 10)), RULES, args.reps, args.draws, rng)
    run_truth("separated 20x10 (6 standard errors apart)", np.tile(0.5 + 6 * SE * np.arange(20)[:, None], (1, 10)),
              RULES, args.reps, args.draws, rng)
    run_missing(20, 10, args.reps, args.draws, rng)
    run_missing(20, 10, args.reps // 3, 1000, rng)  # the default draws: the out-of-sample calibration costs less
    run_shared(20, 10, 5, args.reps, args.draws, rng)
    run_expected(args.reps, args.draws, rng)


if __name__ == "__main__":
    main()
