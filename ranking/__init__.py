"""Rank models under user preferences with Vote'n'Rank voting rules.

The Python API (the CLI calls the same functions)::

    import ranking
    table = ranking.load_table("results/paper/matrix.csv", lower=["energy_kwh"])
    result = ranking.rank(table, rule=["borda", "copeland"], setting="weighted",
                          group_weights={"performance": 0.4, "efficiency": 0.3, "fairness": 0.3})
    result.to_frame()          # one row per model: <rule>_score, <rule>_rank
    result.settings            # the setting, preset, ties, directions and weights actually used
    ranking.rank(table, rule="all", preset="votenrank")   # the conventions of the published numbers

Pure numpy / pandas / scipy: importing this package never imports torch or
the ``harness`` package, so cached results can be ranked on any laptop. It
imports neither numpy nor pandas either until a table is read (a command's
``--help`` starts in a fraction of a second): :func:`load_table` imports its
module when called, and ``ranking.rank`` (the very function :func:`ranking.api.rank`,
not a wrapper), ``ranking.RankPlan``, ``ranking.ScoreTable``, ``ranking.Criterion`` and
``ranking.RankResult`` are imported on first use.

``ranking.rank(table, ...)`` resolves its choices into a :class:`ranking.plan.RankPlan` and applies it;
every other ranking of the project (scenario columns, the weight simplex, what-if, bootstraps, rank
intervals, analyses) goes through such a plan, so they rank as ``vnr rank`` does.
"""

from __future__ import annotations

from typing import Any

from ranking.floor.errors import UserError

__all__ = ["Criterion", "RankPlan", "RankResult", "ScoreTable", "UserError", "load_table", "rank"]

#: names imported on first use: ``ranking.rank`` *is* :func:`ranking.api.rank` (one function, one signature)
_LAZY = {"ScoreTable": "ranking.table", "Criterion": "ranking.table", "RankResult": "ranking.api",
         "rank": "ranking.api", "RankPlan": "ranking.plan"}


def load_table(source: Any, *, data_root: Any = None, lower: Any = (), higher: Any = (), **kwargs: Any) -> Any:
    """The score table of a CSV (+ sidecar), results folder, leaderboard spec or benchbench path, or
    (``format="lm-eval"``, ``"open-llm-leaderboard"``, ``"helm"``, ``"mteb"``, ``"codecarbon"``) another tool's results.

    See :func:`ranking.loading.load_table`; ``data_root=None`` means ``$VNR_DATA_ROOT`` if set.
    Its ``standard_errors`` (models × criteria, NaN = unknown; None) come from the source where it has them.
    """
    from ranking.loading import load_table as load

    return load(source, data_root=data_root, lower=lower, higher=higher, **kwargs)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ranking' has no attribute {name!r}")
