"""Small numeric helpers shared by the analyses: ranks, Kendall τ, rank distances, rule adapters.

Conventions: scores are higher-is-better; positions are 1 = best with ties
sharing the best position (as :func:`ranking.result.positions_from_scores`);
NaN means "not ranked".

>>> kendall_tau([1, 2, 3, 4], [1, 2, 4, 3])
0.6666666666666666
>>> rank_distance([1, 2, 3, 4], [4, 3, 2, 1])
(1.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.table import ScoreTable

Ranker = Callable[[ScoreTable], np.ndarray]


def positions(scores: np.ndarray) -> np.ndarray:
    """Competition positions (1 = best, ties share the best) along the last axis; NaN stays NaN.

    Works on a vector or row-wise on a matrix.

    >>> positions(np.array([[3.0, 1.0, 3.0], [0.0, 2.0, 1.0]])).tolist()
    [[1.0, 3.0, 1.0], [3.0, 1.0, 2.0]]
    """
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        return s.copy()
    return np.asarray(rankdata(-s, method="min", axis=-1, nan_policy="omit"), dtype=float)


def column_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (1 = best) of every column of a higher-is-better matrix; NaN stays NaN.

    Tied models get the mean of the positions they span (Kendall's W convention).

    >>> column_ranks(np.array([[3.0], [1.0], [3.0]])).ravel().tolist()
    [1.5, 3.0, 1.5]
    """
    from scipy.stats import rankdata

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return x.copy()
    return np.asarray(rankdata(-x, method="average", axis=0, nan_policy="omit"), dtype=float)


def kendall_tau(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Kendall's τ-b between two rankings (positions or scores, same orientation); NaN entries dropped.

    Vectorised over all pairs (O(n²) memory). Two rankings that tie everything
    agree perfectly (1.0); one constant ranking against a non-constant one gives 0.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if x.size < 2:
        return 1.0
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    num = float((sx * sy).sum())
    den = float(np.sqrt(np.abs(sx).sum() * np.abs(sy).sum()))
    if den == 0:
        return 1.0 if not sx.any() and not sy.any() else 0.0
    return num / den


def rank_distance(new: Sequence[float] | np.ndarray, old: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """(normalised Kendall τ distance (1 − τ_b)/2, max rank change / (n − 1)) between two position vectors."""
    x = np.asarray(new, dtype=float)
    y = np.asarray(old, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if x.size < 2 or np.array_equal(x, y):
        return 0.0, 0.0
    tau = kendall_tau(x, y)
    return (1.0 - tau) / 2.0, float(np.max(np.abs(x - y)) / (x.size - 1))


def spearman_rho(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman ρ (Pearson correlation of average ranks); 1.0 when both are constant, 0.0 when one is."""
    x = column_ranks(np.asarray(a, dtype=float)[:, None]).ravel()
    y = column_ranks(np.asarray(b, dtype=float)[:, None]).ravel()
    x = x - x.mean()
    y = y - y.mean()
    den = float(np.sqrt((x * x).sum() * (y * y).sum()))
    if den == 0:
        return 1.0 if not x.any() and not y.any() else 0.0
    return float((x * y).sum() / den)


# ---------------------------------------------------------------------- tables without re-validation
def fast_table(table: ScoreTable, rows: np.ndarray | None = None, values: np.ndarray | None = None) -> ScoreTable | None:
    """A sub-table (rows) and/or a table with new values, without re-running validation.

    Used inside repeated experiments, where the input was validated once. The
    only ways such a derived table could be invalid are handled here: criteria
    left without any score are dropped, and None is returned when no model row
    keeps a score or no positive weight is left (the caller skips that draw).
    """
    vals = table.values if values is None else values
    models = table.models
    if rows is not None:
        vals = vals[rows]
        models = tuple(models[i] for i in rows)
    nan = np.isnan(vals)
    if nan.all(axis=1).any():
        return None
    criteria = table.criteria
    empty = nan.all(axis=0)
    if empty.any():
        keep = np.flatnonzero(~empty)
        vals = vals[:, keep]
        criteria = tuple(criteria[j] for j in keep)
        if not criteria or not any(c.weight > 0 for c in criteria):
            return None
    vals = np.array(vals, dtype=float)
    vals.setflags(write=False)
    t = object.__new__(ScoreTable)
    object.__setattr__(t, "models", models)
    object.__setattr__(t, "criteria", criteria)
    object.__setattr__(t, "values", vals)
    object.__setattr__(t, "source", table.source)
    return t


# ---------------------------------------------------------------------- rules
def weighted_mean_positions(table: ScoreTable) -> np.ndarray:
    """Positions by the weighted mean of oriented scores (missing scores skipped)."""
    x = table.oriented
    w = np.where(np.isnan(x), 0.0, table.weights)
    s = np.nansum(np.nan_to_num(x) * w, axis=1) / np.maximum(w.sum(axis=1), 1e-300)
    return positions(s)


def make_ranker(
    rule: str,
    *,
    setting: str = "basic",
    group_weights: Mapping[str, float] | None = None,
    params: Mapping[str, Any] | None = None,
    plan: Any = None,
) -> Ranker:
    """A function ``table -> positions`` for a registered rule, ranked through a :class:`ranking.plan.RankPlan`.

    ``plan`` (else the plan of ``rule``, ``setting``, ``group_weights`` and ``params``, the arguments of
    :func:`ranking.rank`) ranks tables it prepared (:meth:`~ranking.plan.RankPlan.prepare`, e.g.
    :func:`ranking.cli_table.table_from_args` with ``voted``) and the sub-tables and changed tables the
    analyses derive from them. The rule name is checked now, so a typo fails before any repetition runs.
    """
    from ranking.plan import RankPlan

    if plan is None:
        plan = RankPlan.build(rule, setting=setting, group_weights=group_weights, **dict(params or {}))
    else:
        RankPlan.build(rule)  # the name checked

    def run(table: ScoreTable) -> np.ndarray:
        return np.asarray(plan.run_rule(table, rule).ranks, dtype=float)

    run.__name__ = f"rank_{rule}"
    return run


def parse_int_list(text: str, option: str) -> list[int]:
    """``"1,5,10"`` → [1, 5, 10], with a UserError naming the option otherwise."""
    try:
        out = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{option}: {text!r} is not a comma-separated list of integers") from None
    if not out:
        raise UserError(f"{option}: give at least one integer")
    return out
