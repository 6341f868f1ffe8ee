"""Diversity of a multi-task benchmark (Zhang & Hardt, ICML 2024): 1 − Kendall's W across criteria.

Kendall's coefficient of concordance W measures how much the criteria agree
on the ranking of the models: 1 when every criterion ranks them identically,
0 when the rank sums are all equal. With ``m`` criteria, ``n`` models, average
ranks ``r_ij`` (ties share the mean position) and rank sums ``R_i``::

    W = 12 Σ_i (R_i − R̄)² / (m² (n³ − n) − m Σ_j T_j),   T_j = Σ_ties (t³ − t)

(the denominator carries the tie correction). Criterion weights act as
replication counts: a criterion of weight 2 counts as two identical criteria,
so ``R_i = Σ_j w_j r_ij``, ``m = Σ_j w_j`` and ``Σ_j T_j`` becomes ``Σ_j w_j T_j``;
with unit weights this is the textbook formula. Criteria of weight 0 are left out.

>>> kendall_w(np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]))   # identical criteria
1.0
>>> kendall_w(np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]))   # opposite criteria
0.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ranking.analysis._common import column_ranks
from ranking.floor.errors import UserError
from ranking.table import ScoreTable

IMPUTE_CHOICES = ("knn", "median", "drop")


def kendall_w(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Kendall's W (tie-corrected) of the columns of a complete higher-is-better matrix (models × criteria)."""
    x = np.asarray(values, dtype=float)
    if np.isnan(x).any():
        raise ValueError("kendall_w needs a complete matrix: impute or drop missing scores first")
    n, m = x.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
    keep = w > 0
    x, w = x[:, keep], w[keep]
    if n < 2 or x.shape[1] == 0:
        return float("nan")
    ranks = column_ranks(x)
    rank_sums = ranks @ w
    s = float(((rank_sums - rank_sums.mean()) ** 2).sum())
    tie_terms = _tie_terms(x)
    big_m = float(w.sum())
    den = big_m**2 * (n**3 - n) - big_m * float(tie_terms @ w)
    if den <= 0:  # every criterion ties every model: no ranking information at all
        return float("nan")
    return 12.0 * s / den


def _tie_terms(x: np.ndarray) -> np.ndarray:
    """Σ (t³ − t) over the tie blocks of each column, vectorised over columns."""
    srt = np.sort(x, axis=0)
    n, m = srt.shape
    # a new block starts where a value differs from the previous one
    starts = np.ones((n, m), dtype=bool)
    starts[1:] = srt[1:] != srt[:-1]
    out = np.zeros(m)
    for j in np.flatnonzero(~starts.all(axis=0)):  # only columns that have ties
        idx = np.flatnonzero(starts[:, j])
        t = np.diff(np.append(idx, n)).astype(float)
        out[j] = float((t**3 - t).sum())
    return out


def knn_impute(values: np.ndarray, k: int = 5) -> np.ndarray:
    """Fill NaNs with the mean of the ``k`` nearest models that have the score.

    Distances are NaN-aware Euclidean over the co-observed criteria, scaled by
    ``m / (number co-observed)`` (the convention of scikit-learn's KNNImputer,
    which Zhang & Hardt use for ordinal benchmarks). A model without any
    co-observed neighbour gets the criterion's mean.
    """
    x = np.asarray(values, dtype=float)
    miss = np.isnan(x)
    if not miss.any():
        return x.copy()
    n, m = x.shape
    obs = (~miss).astype(float)
    z = np.nan_to_num(x)
    # Σ over co-observed j of (x_ij − x_kj)², vectorised: a² o_k + o_i b² − 2 a b
    sq = (z**2) @ obs.T + obs @ (z**2).T - 2.0 * z @ z.T
    common = obs @ obs.T
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = np.sqrt(np.maximum(sq, 0.0) * m / common)
    dist[common == 0] = np.inf
    np.fill_diagonal(dist, np.inf)
    out = x.copy()
    col_mean = np.nanmean(x, axis=0)
    for i, j in np.argwhere(miss):
        donors = np.flatnonzero(~miss[:, j] & np.isfinite(dist[i]))
        if donors.size == 0:
            out[i, j] = col_mean[j]
            continue
        nearest = donors[np.argsort(dist[i, donors], kind="stable")[:k]]
        out[i, j] = x[nearest, j].mean()
    return out


def complete_values(table: ScoreTable, impute: str = "knn") -> tuple[np.ndarray, tuple[str, ...]]:
    """Oriented scores with missing cells handled: ``knn`` / ``median`` imputation or ``drop`` incomplete models."""
    if impute not in IMPUTE_CHOICES:
        raise UserError(f"--impute {impute!r} is not one of {', '.join(IMPUTE_CHOICES)}")
    x = table.oriented
    models = table.models
    if not np.isnan(x).any():
        return x, models
    if impute == "drop":
        keep = ~np.isnan(x).any(axis=1)
        if keep.sum() < 2:
            raise UserError(
                f"{table.source or 'the table'}: fewer than 2 models have every score; use --impute knn or median"
            )
        return x[keep], tuple(m for m, k in zip(models, keep) if k)
    if impute == "median":
        return np.where(np.isnan(x), np.nanmedian(x, axis=0), x), models
    return knn_impute(x), models


def diversity(table: ScoreTable, *, impute: str = "knn", use_weights: bool = True) -> dict[str, Any]:
    """``{"diversity": 1 − W, "kendall_w": W, "n_models": n, "n_criteria": m}`` for a score table.

    Only criteria with positive weight count; ``use_weights=False`` gives each of them weight 1.
    """
    x, models = complete_values(table, impute)
    w = table.weights if use_weights else (table.weights > 0).astype(float)
    keep = w > 0
    w_kept = w[keep]
    w_value = kendall_w(x[:, keep], w_kept)
    return {
        "diversity": float(1.0 - w_value) if np.isfinite(w_value) else float("nan"),
        "kendall_w": float(w_value),
        "n_models": len(models),
        "n_criteria": int(keep.sum()),
    }


def kendall_w_loops(values: np.ndarray) -> float:
    """Straightforward reference (Python loops, unit weights) for tests and the benchmark."""
    x = np.asarray(values, dtype=float)
    n, m = x.shape
    ranks = [[0.0] * m for _ in range(n)]
    tie_sum = 0.0
    for j in range(m):
        for i in range(n):
            better = sum(1 for k in range(n) if x[k, j] > x[i, j])
            equal = sum(1 for k in range(n) if x[k, j] == x[i, j])
            ranks[i][j] = better + (equal + 1) / 2.0
        seen: dict[float, int] = {}
        for i in range(n):
            seen[x[i, j]] = seen.get(x[i, j], 0) + 1
        tie_sum += sum(t**3 - t for t in seen.values())
    sums = [sum(r) for r in ranks]
    mean = sum(sums) / n
    s = sum((v - mean) ** 2 for v in sums)
    return 12.0 * s / (m**2 * (n**3 - n) - m * tie_sum)
