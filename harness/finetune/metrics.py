"""GLUE metrics with scikit-learn and scipy (the functions ``evaluate``'s GLUE metric calls).

>>> compute_metrics("mrpc", [1, 0, 1, 1], [1, 0, 0, 1])
{'accuracy': 0.75, 'f1': 0.8}
>>> compute_metrics("stsb", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0])["spearman"]
1.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.finetune.tasks import TASKS, GlueTask, get_task

#: Every metric name a record can hold (read off the task records); all of them are higher-is-better.
METRIC_NAMES = tuple(dict.fromkeys(str(m) for t in TASKS.values() for m in t.metrics))


def _finite(x: float) -> float | None:
    """A float for the record; NaN (e.g. Pearson of constant predictions) becomes None."""
    x = float(x)
    return x if math.isfinite(x) else None


def _accuracy(gold: np.ndarray, preds: np.ndarray) -> float | None:
    from sklearn.metrics import accuracy_score

    return _finite(accuracy_score(gold, preds))


def _f1(gold: np.ndarray, preds: np.ndarray) -> float | None:
    from sklearn.metrics import f1_score

    return _finite(f1_score(gold, preds, zero_division=0.0))


def _matthews(gold: np.ndarray, preds: np.ndarray) -> float | None:
    from sklearn.metrics import matthews_corrcoef

    return _finite(matthews_corrcoef(gold, preds))


def _correlation(kind: str):
    def compute(gold: np.ndarray, preds: np.ndarray) -> float | None:
        from scipy.stats import pearsonr, spearmanr

        if np.ptp(preds) == 0 or np.ptp(gold) == 0:
            return None  # undefined for a constant series
        return _finite((pearsonr if kind == "pearson" else spearmanr)(preds, gold)[0])

    return compute


#: Metric name (a :class:`~harness.finetune.tasks.Metric` of a task record) → how it is computed.
COMPUTE = {
    "accuracy": _accuracy,
    "f1": _f1,
    "matthews_correlation": _matthews,
    "pearson": _correlation("pearson"),
    "spearman": _correlation("spearman"),
}


def compute_metrics(task: str | GlueTask, predictions: Sequence[Any], labels: Sequence[Any]) -> dict[str, float | None]:
    """The task's metrics for class predictions (or scores, for STS-B) against gold labels."""
    t = task if isinstance(task, GlueTask) else get_task(task)
    preds = np.asarray(predictions)
    gold = np.asarray(labels)
    if preds.shape != gold.shape:
        raise ValueError(f"{len(preds)} predictions for {len(gold)} labels")
    return {str(name): COMPUTE[name](gold, preds) for name in t.metrics}


def predictions_from_logits(task: str | GlueTask, logits: Any) -> np.ndarray:
    """Class ids (argmax) for classification, the single output for regression."""
    t = task if isinstance(task, GlueTask) else get_task(task)
    arr = np.asarray(logits[0] if isinstance(logits, tuple) else logits, dtype=np.float64)
    if t.is_regression:
        return arr.reshape(len(arr), -1)[:, 0]
    return arr.argmax(axis=-1)


def best_over_epochs(history: list[dict[str, Any]], names: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Each metric's best value over the evaluated epochs, and the epoch it came from (first on ties).

    >>> best_over_epochs([{"epoch": 1.0, "accuracy": 0.5}, {"epoch": 2.0, "accuracy": 0.7},
    ...                   {"epoch": 3.0, "accuracy": 0.7}], ["accuracy"])
    ({'accuracy': 0.7}, {'accuracy': 2.0})
    """
    best: dict[str, float] = {}
    epoch: dict[str, float] = {}
    for row in history:
        for name in names:
            value = row.get(name)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            if name not in best or value > best[name]:
                best[name] = value
                epoch[name] = row.get("epoch")
    return best, epoch
