"""Synthetic robustness experiments of Colombo et al. (NeurIPS 2022): mean vs one-level vs two-level aggregation.

``N`` systems, ``T`` tasks, ``I`` instances per task. On a normal task, system
``n`` (0-based) scores ``Gumbel(loc = φ·n, scale = 1)`` on every instance, so
the ground truth ranks system N−1 first. A *corrupted* task reverses the
order (``loc = φ·(N − 1 − n)``); a *rescaled* task has its scores multiplied
by a factor ``x`` (the ranking it induces is unchanged). The corrupted tasks
are the first ``n_corrupted`` ones and the rescaled task is task 0, so with
any corruption the rescaled task is a corrupted one: the case where the mean
is fragile.

Each aggregation (mean of all scores; Borda over all (task, instance)
rankings; Borda over instances per task, then over tasks) is compared with
the ground truth by the normalised Kendall τ distance (1 − τ)/2: 0 = exact,
1 = reversed. Repetitions are vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ranking.analysis._common import column_ranks, kendall_tau
from ranking.floor.errors import UserError

METHODS = ("mean", "one_level", "two_level")


def _draw(
    rng: np.random.Generator, reps: int, n: int, tasks: int, instances: int, phi: float, n_corrupted: int, scale: float
) -> np.ndarray:
    loc = phi * np.arange(n, dtype=float)
    locs = np.repeat(loc[:, None], tasks, axis=1)  # n × T
    locs[:, :n_corrupted] = loc[::-1, None]
    x = rng.gumbel(0.0, 1.0, size=(reps, n, tasks, instances)) + locs[None, :, :, None]
    x[:, :, 0, :] *= scale
    return x


def _errors(x: np.ndarray) -> dict[str, np.ndarray]:
    reps, n, tasks, instances = x.shape
    truth = np.arange(n, dtype=float)  # higher index = better
    # ranks within every (rep, task, instance): move systems to axis 0
    flat = np.moveaxis(x, 1, 0).reshape(n, -1)
    r = column_ranks(flat).reshape(n, reps, tasks, instances)  # 1 = best
    one = -r.mean(axis=(2, 3))  # n × reps
    per_task = r.mean(axis=3)  # n × reps × T
    r2 = column_ranks(-per_task.reshape(n, -1)).reshape(n, reps, tasks)
    two = -r2.mean(axis=2)
    mean = x.mean(axis=(2, 3)).T  # n × reps
    out = {}
    for name, s in (("mean", mean), ("one_level", one), ("two_level", two)):
        out[name] = np.array([(1.0 - kendall_tau(s[:, k], truth)) / 2.0 for k in range(reps)])
    return out


def run_synthetic(
    *,
    experiment: str = "corruption",
    values: Sequence[float] | None = None,
    n_systems: int = 20,
    n_tasks: int = 10,
    n_instances: int = 20,
    phi: float = 0.2,
    n_corrupted: int = 1,
    repetitions: int = 50,
    seed: int = 0,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """One row per setting: mean ± std of each aggregation's error against the ground truth.

    ``experiment="corruption"``: ``values`` = numbers of corrupted tasks (default 0 … T/2).
    ``experiment="scaling"``: ``values`` = factors x for task 0 (default 1, 10, 100, 1000),
    with ``n_corrupted`` corrupted tasks.
    """
    if n_systems < 2 or n_tasks < 1 or n_instances < 1 or repetitions < 1:
        raise UserError("synthetic: need at least 2 systems, 1 task, 1 instance and 1 repetition")
    if experiment == "corruption":
        settings = list(values) if values is not None else list(range(0, n_tasks // 2 + 1))
        if any(int(v) != v or not 0 <= v <= n_tasks for v in settings):
            raise UserError(f"--values: numbers of corrupted tasks must be integers in 0..{n_tasks}")
    elif experiment == "scaling":
        settings = list(values) if values is not None else [1.0, 10.0, 100.0, 1000.0]
        if any(v <= 0 for v in settings):
            raise UserError("--values: scaling factors must be positive")
        if not 0 <= n_corrupted <= n_tasks:
            raise UserError(f"--n-corrupted {n_corrupted}: must be in 0..{n_tasks}")
    else:
        raise UserError(f"unknown synthetic experiment {experiment!r} (corruption, scaling)")
    from tqdm.auto import tqdm

    rng = np.random.default_rng(seed)
    rows = []
    for v in tqdm(settings, desc=f"synthetic {experiment}", disable=not progress, leave=False):
        k, scale = (int(v), 1.0) if experiment == "corruption" else (n_corrupted, float(v))
        err = _errors(_draw(rng, repetitions, n_systems, n_tasks, n_instances, phi, k, scale))
        row: dict[str, Any] = {"n_corrupted": k, "scale": scale}
        for name in METHODS:
            row[f"{name}_mean"] = float(err[name].mean())
            row[f"{name}_std"] = float(err[name].std(ddof=1)) if repetitions > 1 else 0.0
        rows.append(row)
    return rows
