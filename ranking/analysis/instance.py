"""Instance-level aggregation (Colombo et al., NeurIPS 2022): rank systems from (system, instance, metric) scores.

Three aggregations of a long frame ``system, instance, metric, value``
(higher is better everywhere):

* **mean**: the mean over instances of each metric, then the mean over
  metrics (the naive baseline: metrics on larger scales dominate);
* **one-level**: every (instance, metric) pair ranks the systems; the Borda
  count (mean average rank) over all those rankings gives the consensus;
* **two-level**: the Borda count over instances gives one ranking per metric,
  then the Borda count over the metrics' rankings gives the consensus.

Missing scores are skipped (a system absent from an instance takes no part in that ranking).

>>> import pandas as pd
>>> f = pd.DataFrame({"system": ["A", "B"] * 2, "instance": ["1", "1", "2", "2"],
...                   "metric": ["m"] * 4, "value": [0.9, 0.1, 0.2, 0.3]})
>>> aggregate_instances(f)["one_level"]["ranking"]
['A', 'B']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ranking.analysis._common import column_ranks, kendall_tau, positions
from ranking.floor.errors import UserError

HUMAN_PREFIX = "H:"


def _matrix(frame: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    """systems, values (systems × (metric, instance) columns), metric id of each column, metric names."""
    wide = frame.pivot_table(index="system", columns=["metric", "instance"], values="value", aggfunc="mean", sort=True)
    metrics = list(dict.fromkeys(wide.columns.get_level_values(0)))
    metric_id = np.array([metrics.index(m) for m in wide.columns.get_level_values(0)])
    return [str(s) for s in wide.index], wide.to_numpy(dtype=float), metric_id, metrics


def borda_scores(values: np.ndarray) -> np.ndarray:
    """Borda score (minus the mean average rank) of each row over the columns; higher is better."""
    r = column_ranks(values)
    with np.errstate(invalid="ignore"):
        return -np.nanmean(r, axis=1)


def _two_level_scores(values: np.ndarray, metric_id: np.ndarray, n_metrics: int) -> np.ndarray:
    r = column_ranks(values)
    per_metric = np.full((values.shape[0], n_metrics), np.nan)
    for g in range(n_metrics):
        cols = metric_id == g
        with np.errstate(invalid="ignore"):
            per_metric[:, g] = np.nanmean(r[:, cols], axis=1)
    return borda_scores(-per_metric)


def _mean_scores(values: np.ndarray, metric_id: np.ndarray, n_metrics: int) -> np.ndarray:
    per_metric = np.column_stack([np.nanmean(values[:, metric_id == g], axis=1) for g in range(n_metrics)])
    return np.nanmean(per_metric, axis=1)


def _result(systems: list[str], scores: np.ndarray) -> dict[str, Any]:
    pos = positions(scores)
    order = np.argsort(np.where(np.isnan(pos), np.inf, pos), kind="stable")
    return {"ranking": [systems[i] for i in order], "positions": {s: float(p) for s, p in zip(systems, pos)}}


def select_metrics(frame: pd.DataFrame, metrics: Sequence[str] | None = None, human: str = "exclude") -> pd.DataFrame:
    """Rows for the chosen metrics (names or regexes); ``human`` = exclude | include | only (the ``H:`` metrics)."""
    if human not in ("exclude", "include", "only"):
        raise UserError(f"--human {human!r}: one of exclude, include, only")
    names = list(dict.fromkeys(frame["metric"]))
    is_human = {m: m.startswith(HUMAN_PREFIX) for m in names}
    keep = [m for m in names if (human == "include") or (is_human[m] == (human == "only"))]
    if metrics:
        chosen = []
        for pattern in metrics:
            hits = [m for m in keep if m == pattern or re.fullmatch(pattern, m)]
            if not hits:
                raise UserError(f"--metrics: no metric matches {pattern!r} (metrics: {', '.join(keep)})")
            chosen += [h for h in hits if h not in chosen]
        keep = chosen
    if not keep:
        raise UserError(f"no metric left (metrics: {', '.join(names)}); check --metrics and --human")
    return frame[frame["metric"].isin(keep)]


def aggregate_instances(
    frame: pd.DataFrame, *, metrics: Sequence[str] | None = None, human: str = "exclude"
) -> dict[str, Any]:
    """Mean, one-level and two-level rankings of the systems, and Kendall τ between them.

    When the frame has human judgements (``H:`` metrics) and they are not
    among the aggregated metrics, each ranking is also compared (Kendall τ)
    with the two-level ranking of the human judgements.
    """
    sub = select_metrics(frame, metrics, human)
    systems, values, metric_id, names = _matrix(sub)
    if len(systems) < 2:
        raise UserError("instance-level aggregation needs at least 2 systems")
    scores = {
        "mean": _mean_scores(values, metric_id, len(names)),
        "one_level": borda_scores(values),
        "two_level": _two_level_scores(values, metric_id, len(names)),
    }
    out: dict[str, Any] = {
        "n_systems": len(systems),
        "n_instances": int(sub["instance"].nunique()),
        "metrics": names,
    }
    for key, s in scores.items():
        out[key] = _result(systems, s)
    pos = {k: positions(v) for k, v in scores.items()}
    out["kendall_tau"] = {
        "mean_vs_one_level": kendall_tau(pos["mean"], pos["one_level"]),
        "mean_vs_two_level": kendall_tau(pos["mean"], pos["two_level"]),
        "one_level_vs_two_level": kendall_tau(pos["one_level"], pos["two_level"]),
    }
    has_human = frame["metric"].str.startswith(HUMAN_PREFIX).any()
    if has_human and human == "exclude":
        h_sys, h_vals, h_id, h_names = _matrix(select_metrics(frame, None, "only"))
        h_pos = dict(zip(h_sys, positions(_two_level_scores(h_vals, h_id, len(h_names)))))
        ref = np.array([h_pos.get(s, np.nan) for s in systems])
        out["kendall_tau_vs_human"] = {k: kendall_tau(p, ref) for k, p in pos.items()}
    return out
