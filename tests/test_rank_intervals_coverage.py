"""Rank intervals a decision can stand on (issue #34 item 5), by simulation: simultaneous coverage with many
exactly tied models, for every rule; no needless width where models have few scores; whole seeds per model.
Lean (about 100 tables of 100-200 draws each); ``scripts/bench_intervals.py`` runs the full comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ranking.api import rank
from ranking.intervals import draw_source, rank_intervals, score_draws, seed_table_source, tie_recentred
from ranking.rules import rule_names
from ranking.table import Criterion, ScoreTable

SE = 0.02


def table_of(values, errors=SE):
    n, m = values.shape
    se = None if errors is None else np.where(np.isnan(values), np.nan, np.broadcast_to(errors, values.shape))
    return ScoreTable(tuple(f"M{i}" for i in range(n)), tuple(Criterion(f"c{j}") for j in range(m)), values,
                      standard_errors=se)


#: Scored draw by draw by the rule itself (no vectorised scorer).
BY_DRAW = ("geometric_mean", "optimality_gap")


def tied_coverage(n: int, m: int, tables: int, draws: int, seed: int, rules=None) -> dict[str, float]:
    """Share of tables, observed around ``n`` models tied in truth, where no rule separates any two models."""
    rng = np.random.default_rng(seed)
    rules = list(rules or rule_names())
    held = dict.fromkeys(rules, 0)
    for _ in range(tables):
        observed = table_of(0.5 + rng.standard_normal((n, m)) * SE)
        point = rank(observed, rules)
        found = rank_intervals(observed, point.results, source=draw_source(observed), draws=draws,
                               seed=int(rng.integers(1 << 30)))
        for rule, iv in found.items():
            held[rule] += bool(np.all(iv.rank_lo == 1))  # every true rank is 1: no pair may be separated
    return {rule: k / tables for rule, k in held.items()}


def test_coverage_holds_with_20_exactly_tied_models_for_every_rule():
    """Before: Borda 0.69, Copeland 0.63, Baldwin 0.69 at the nominal 0.95 (draws around the observed table
    understate a rank-based score's spread where true scores tie). Binomial sd at 0.95 over 200 tables: 0.015."""
    fast = [r for r in rule_names() if r not in BY_DRAW]
    covered = tied_coverage(20, 10, tables=200, draws=200, seed=7, rules=fast)
    # the geometric mean and the optimality gap: no vectorised scorer (each draw ranked by the rule itself)
    covered.update(tied_coverage(20, 10, tables=200, draws=200, seed=21, rules=BY_DRAW))
    assert set(covered) == set(rule_names())
    low = {rule: c for rule, c in covered.items() if c < 0.93}
    assert not low, covered


@pytest.mark.slow
def test_coverage_holds_with_50_exactly_tied_models_for_every_rule():
    covered = tied_coverage(50, 20, tables=150, draws=200, seed=8, rules=[r for r in rule_names() if r not in BY_DRAW])
    low = {rule: c for rule, c in covered.items() if c < 0.93}
    assert not low, covered


def studentised_width(table: ScoreTable, rule: str, draws: int, seed: int, level: float = 0.95) -> float:
    """The reference, written out: on the same drawn scores, each difference studentised by its own spread over
    the draws, the max over all pairs in sample, ``j`` above ``i`` when ``S_j − S_i > c · s_ij``."""
    point = rank(table, rule).results[rule]
    s = point.scores
    drawn = score_draws(table, rule, tie_recentred(draw_source(table)), draws, seed)
    dev = drawn - drawn.mean(axis=0)
    diff = dev[:, :, None] - dev[:, None, :]
    spread = diff.std(axis=0)
    t = np.abs(diff) / np.where(spread > 1e-12, spread, np.inf)
    stat = np.sort(t.reshape(draws, -1).max(axis=1))
    c = stat[math.ceil(level * draws) - 1]
    above = (s[:, None] - s[None, :]) > c * spread + 1e-12
    lo = 1 + above.sum(axis=0)
    hi = s.size - above.sum(axis=1)
    return float(np.mean(hi - lo))


@pytest.mark.parametrize("few", [True, False], ids=["a_third_on_one_criterion", "complete"])
def test_width_is_the_studentised_differences_width(few):
    """Where a third of the models have one score each, their drawn means move together (the others' medians
    fill their gaps) and the scale σ_i + σ_j was far wider than a difference's spread (before: 1.4× the
    reference); now within 1.05× of it, and on complete tables within 0.97-1.04× as before."""
    rng = np.random.default_rng(3)
    truth = np.tile(np.linspace(0.5, 0.9, 20)[:, None], (1, 10))
    ours, reference = 0.0, 0.0
    for k in range(25):
        values = truth + rng.standard_normal(truth.shape) * SE
        if few:
            values[np.arange(20) % 3 == 0, 1:] = np.nan
        t = table_of(values)
        point = rank(t, "arithmetic_mean")
        iv = rank_intervals(t, point.results, source=draw_source(t), draws=1000, seed=k)["arithmetic_mean"]
        ours += float(np.mean(iv.rank_hi - iv.rank_lo))
        reference += studentised_width(t, "arithmetic_mean", 1000, k)
    ratio = ours / reference
    assert ratio <= 1.05, (ours, reference)
    if not few:
        assert ratio >= 0.97, (ours, reference)


def test_whole_seeds_per_model_cover_where_per_cell_errors_cannot():
    """One run's luck moves all of a model's scores (a seed effect shared by its criteria): per-cell standard
    errors (all an imported table has) draw the cells independently and undercover; whole seeds drawn per model
    keep the shared part."""
    rng = np.random.default_rng(11)
    n, m, seeds = 12, 8, 5
    truth = np.full((n, m), 0.5) + np.linspace(0.0, 0.004, n)[:, None]
    true_ranks = rank(table_of(truth), "arithmetic_mean").results["arithmetic_mean"].ranks
    held = {"cells": 0, "seeds": 0}
    tables = 60
    for k in range(tables):
        per_seed = truth[:, None, :] + 0.02 * rng.standard_normal((n, seeds, 1)) \
            + 0.01 * rng.standard_normal((n, seeds, m))
        means = per_seed.mean(axis=1)
        cells = table_of(means, per_seed.std(axis=1, ddof=1) / np.sqrt(seeds))
        plain = table_of(means, None)
        point = rank(plain, "arithmetic_mean").results
        for how, t, source in (("cells", cells, draw_source(cells)), ("seeds", plain, seed_table_source(plain, per_seed))):
            iv = rank_intervals(t, point, source=source, draws=200, seed=k)["arithmetic_mean"]
            held[how] += bool(np.all((iv.rank_lo <= true_ranks) & (true_ranks <= iv.rank_hi)))
    assert held["seeds"] / tables >= 0.9 and held["cells"] / tables <= 0.5, held
