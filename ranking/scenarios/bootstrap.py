"""Uncertainty over seeds: resample each model's seeds and count how often it lands at each rank.

Per-seed results live in ``<results>/seeds.csv`` (long format: ``model, criterion, seed,
value``; only criteria that depend on the seed appear there). One bootstrap
resample draws, for every model, as many seeds as it has, with replacement, and
replaces each of its seeded criteria by the mean over the drawn seeds (the same
draw for all of the model's criteria, so metrics from one run stay together);
seed-independent criteria keep their matrix value. Every column of the scenario
is then ranked again. The result, per column, is a models × positions matrix of
probabilities; ``t`` models tied at position ``r`` in a replicate count ``1/t`` at each of the
positions ``r … r+t-1`` (:func:`tie_split`), so every row and every column sums to 100 %.

Uncertainty from the source: a table whose scores come with standard errors (an imported
lm-evaluation-harness run, ``stderr.csv``) is resampled by :func:`error_bootstrap` instead —
each replicate draws every score from Normal(score, its standard error), independently — so the
rank probabilities reflect the benchmark's own sampling noise. A score whose standard error is 0 (exact) or
unknown (an empty cell or a missing row of ``stderr.csv``: lm-eval's "N/A", codecarbon's columns beside an
import) is held at its value in every draw, so for the probabilities an unknown error counts as exact: a
choice that can move them, so the output says it, naming the scores (:func:`unknown_errors_note`); the
intervals never separate a model on an unknown error (``--intervals``).

>>> probs = bootstrap(scenario, table, read_seeds(path, table), n=200, seed=0)   # doctest: +SKIP
>>> probs["borda"][0]          # P(model 0 is 1st, 2nd, …)                      # doctest: +SKIP
array([0.83, 0.17, 0.  , 0.  ])
"""

from __future__ import annotations

import logging

import numpy as np

from ranking.floor.errors import UserError
from ranking.intervals import SEED_COLUMNS, read_seeds  # noqa: F401  (read here by the scenario CLI and tests)
from ranking.scenarios.compare import column_plans, run_column
from ranking.scenarios.scenario import Scenario
from ranking.table import ScoreTable

log = logging.getLogger(__name__)

def resample_values(
    table: ScoreTable, seeds: dict[int, tuple[np.ndarray, np.ndarray]], rng: np.random.Generator
) -> np.ndarray:
    """One bootstrap draw of the table's values."""
    values = np.array(table.values, dtype=float, copy=True)
    for m, (crit_idx, per_seed) in seeds.items():
        n_seeds = per_seed.shape[1]
        counts = np.bincount(rng.integers(0, n_seeds, size=n_seeds), minlength=n_seeds).astype(float)
        present = ~np.isnan(per_seed)
        weight = present * counts
        total = weight.sum(axis=1)
        mean = np.where(present, per_seed, 0.0) @ counts
        ok = total > 0
        values[m, crit_idx[ok]] = mean[ok] / total[ok]
    return values


def resample_from_errors(table: ScoreTable, rng: np.random.Generator) -> np.ndarray:
    """One draw of the table's values: each score from Normal(score, its standard error); an exact one (0) fixed.

    An unknown error is held too, and said (:func:`unknown_errors_note`).

    >>> from ranking.table import Criterion
    >>> t = ScoreTable(("A", "B"), (Criterion("acc"),), np.array([[0.5], [0.52]]),
    ...                standard_errors=np.array([[0.0], [0.0]]))
    >>> resample_from_errors(t, np.random.default_rng(0)).tolist()   # exact scores: unchanged
    [[0.5], [0.52]]
    """
    assert table.standard_errors is not None
    spread = np.nan_to_num(table.standard_errors, nan=0.0)
    return table.values + rng.standard_normal(table.values.shape) * spread


def unknown_errors_note(table: ScoreTable) -> str | None:
    """What the output says where a ranked score (a criterion of weight > 0) has no standard error: it was held
    at its value in every draw (None where every ranked score has one).

    >>> from ranking.table import Criterion
    >>> t = ScoreTable(("A", "B"), (Criterion("acc"), Criterion("kwh", direction="lower")),
    ...                np.array([[0.5, 1.0], [0.52, 2.0]]), standard_errors=np.array([[0.01, np.nan], [0.01, 0.0]]))
    >>> print(unknown_errors_note(t))
    1 ranked score has no standard error (model 'A' on 'kwh'): it was held at its value in every draw, so these probabilities treat it as exact; give it in the table's standard errors (0 where a score is exact), or read --intervals, which never separates a model on an unknown error.
    """
    if table.standard_errors is None:
        return None
    ranked = np.array([c.weight > 0 for c in table.criteria])
    unknown = np.isnan(table.standard_errors) & ~np.isnan(table.values) & ranked[None, :]
    if not unknown.any():
        return None
    i, j = np.argwhere(unknown)[0]
    n = int(unknown.sum())
    many = n != 1
    return (f"{n} ranked score{'s' if many else ''} ha{'ve' if many else 's'} no standard error (model "
            f"{table.models[i]!r} on {table.criteria[j].name!r}{', …' if many else ''}): "
            f"{'they were' if many else 'it was'} held at {'their values' if many else 'its value'} in every draw, "
            "so these probabilities treat "
            f"{'them' if many else 'it'} as exact; give {'them' if many else 'it'} in the table's standard errors (0 "
            "where a score is exact), or read --intervals, which never separates a model on an unknown error.")


def bootstrap(
    scenario: Scenario,
    table: ScoreTable,
    seeds: dict[int, tuple[np.ndarray, np.ndarray]],
    n: int,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Column → (models × positions) probability of each rank position over ``n`` seed resamples."""
    if not seeds:
        raise UserError("the per-seed results name none of the scenario's models and criteria: nothing to resample")
    return _rank_probabilities(scenario, table, lambda rng: resample_values(table, seeds, rng), n, seed)


def error_bootstrap(scenario: Scenario, table: ScoreTable, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Column → (models × positions) probability of each rank position over ``n`` draws from the standard errors."""
    if table.standard_errors is None:
        raise UserError("the table has no standard errors to draw from")
    return _rank_probabilities(scenario, table, lambda rng: resample_from_errors(table, rng), n, seed)


def _rank_probabilities(scenario: Scenario, table: ScoreTable, draw_values, n: int, seed: int) -> dict[str, np.ndarray]:
    """Rank every column on ``n`` tables of ``draw_values(rng)``; per column, the share of draws at each position."""
    if n < 1:
        raise UserError(f"--bootstrap needs a positive number of resamples, got {n}")
    rng = np.random.default_rng(seed)
    k = table.n_models
    counts = {c.name: np.zeros((k, k)) for c in scenario.columns}
    plans = column_plans(scenario)  # resolved once, applied to every draw
    for _ in range(n):
        draw = table.with_values(draw_values(rng))
        for c in scenario.columns:
            counts[c.name] += tie_split(run_column(draw, c, scenario.ties, plans[c.name]).ranks)
    return {name: cnt / n for name, cnt in counts.items()}


def tie_split(ranks: np.ndarray) -> np.ndarray:
    """Models × positions: 1 at a model's position; ``t`` models tied at position ``r`` get ``1/t`` at each of
    ``r … r+t-1`` (so every row and every column of ranked models sums to 1; unranked models: a zero row).

    A block that would run past the last position (Condorcet without a winner puts everyone at 2) ends at it.

    >>> tie_split(np.array([1.0, 1.0, 3.0])).tolist()
    [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]
    >>> tie_split(np.array([2.0, 2.0])).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    k = ranks.size
    out = np.zeros((k, k))
    ok = ~np.isnan(ranks)
    values, sizes = np.unique(ranks[ok], return_counts=True)
    for r, t in zip(values, sizes):
        start = min(int(r) - 1, k - int(t))
        out[np.ix_(ranks == r, np.arange(start, start + t))] = 1.0 / t
    return out
