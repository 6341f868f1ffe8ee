"""Ranking a table with several rules under one setting: :func:`rank` → :class:`RankResult`.

:func:`rank` is the project's one function of that name (``ranking.rank`` is this very function): it
resolves the choices into a :class:`~ranking.plan.RankPlan` and applies it to the table. Scenarios, the
weight simplex, what-if, the bootstraps and the analyses rank through such a plan too.

What ``vnr rank`` runs and what the Python API (``ranking.rank``) returns: every
requested rule's :class:`~ranking.result.RuleResult` plus the settings actually
used (setting, preset, tie convention, directions, criterion and group weights,
the optimality gap's gamma), so no output can leave out which preferences
produced it.

>>> from ranking.rules import worked_example
>>> res = rank(worked_example(), rule=["borda", "copeland"])
>>> res.winners
{'borda': ('B',), 'copeland': ('B',)}
>>> res.to_frame().loc["B"].tolist()
[9.0, 1.0, 3.0, 1.0]
>>> res.settings["setting"], res.settings["preset"], res.settings["ties"], res.settings["group_weights"]
('basic', 'default', 'default', None)
>>> rank(worked_example(), rule="borda", preset="votenrank").settings["ties"]
'votenrank'
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.plan import CHOICES, DEFAULT_DRAWS, RankPlan, choice_help, choice_signature, used_settings
from ranking.result import RuleResult
from ranking.table import ScoreTable

__all__ = ["RankPlan", "RankResult", "apply_plan", "rank", "used_settings"]


@dataclass(frozen=True)
class RankResult:
    """The results of several rules on one table, and the settings they were computed under.

    ``results`` maps rule name → :class:`RuleResult` (in the order asked);
    ``skipped`` maps a rule that could not apply (only with ``rule="all"``) to why;
    ``settings`` is JSON-ready (see :func:`used_settings`).
    """

    results: dict[str, RuleResult]
    settings: dict[str, Any]
    skipped: dict[str, str] = field(default_factory=dict)
    #: rule → :class:`ranking.intervals.RankIntervals` (``intervals=True``), else None
    intervals: dict[str, Any] | None = None
    #: rule → :class:`ranking.robustness.CellsToWin` (``robustness=True``), else None
    robustness: dict[str, Any] | None = None
    #: per model, how many criteria of positive weight it has a score on (table order)
    scores_present: dict[str, int] = field(default_factory=dict)

    @property
    def models(self) -> tuple[str, ...]:
        return next(iter(self.results.values())).models

    @property
    def winners(self) -> dict[str, tuple[str, ...]]:
        return {name: r.winners for name, r in self.results.items()}

    def __getitem__(self, rule: str) -> RuleResult:
        try:
            return self.results[rule]
        except KeyError:
            raise UserError(f"no result for rule {rule!r} (rules ranked: {', '.join(self.results)})") from None

    def to_frame(self):
        """A DataFrame, one row per model (table order): ``<rule>_score``, ``<rule>_rank`` per rule.

        Ranks are whole numbers (pandas' nullable ``Int64``: ``<NA>`` where a rule leaves a model unranked).
        With intervals also ``<rule>_rank_lo``, ``<rule>_rank_hi``, ``<rule>_tier``; with robustness
        ``<rule>_cells_to_win`` (empty: more than the cells searched) — :meth:`columns` in order.
        """
        import pandas as pd

        def ints(values: Any) -> Any:
            return pd.array([None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)
                             for x in values], dtype="Int64")

        data: dict[str, Any] = {}
        for name, r in self.results.items():
            data[f"{name}_score"] = r.scores
            data[f"{name}_rank"] = ints(r.ranks)
            if self.intervals is not None and name in self.intervals:
                iv = self.intervals[name]
                data[f"{name}_rank_lo"] = ints(iv.rank_lo)
                data[f"{name}_rank_hi"] = ints(iv.rank_hi)
                data[f"{name}_tier"] = ints(iv.tier)
            if self.robustness is not None and name in self.robustness:
                data[f"{name}_cells_to_win"] = ints(self.robustness[name].count)
        frame = pd.DataFrame(data, index=pd.Index(self.models, name="model"))
        return frame

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"settings": {...}, <rule>: {"scores", "ranks", "winners"}, ...}``.

        With intervals each rule also has ``rank_lo``, ``rank_hi``, ``tier`` (model → int|null) and
        ``critical_value``; with robustness ``cells_to_win`` (model → int|null), ``kind``, ``cells`` and
        ``flip`` (the sentence). ``settings`` then states ``intervals`` (level, draws, source, seed) and
        ``robustness`` (what a changed cell may become, the cells searched).
        """
        out: dict[str, Any] = {"settings": self.settings}
        for name, r in self.results.items():
            entry = r.to_dict()
            if self.intervals is not None and name in self.intervals:
                entry.update(self.intervals[name].to_dict())
            if self.robustness is not None and name in self.robustness:
                entry.update(self.robustness[name].to_dict())
            out[name] = entry
        return out


def apply_plan(plan: RankPlan, table: ScoreTable) -> RankResult:
    """Rank ``table`` with every rule of ``plan``: prepare it once, check the choices against it, run each rule,
    add the intervals, robustness and the board's order the plan asks for (what :func:`rank` returns)."""
    from ranking.intervals import few_scores

    prepared = plan.prepare(table)
    table = prepared.table
    settings = plan.used_settings(prepared)  # input errors once, before any rule runs
    results: dict[str, RuleResult] = {}
    skipped: dict[str, str] = {}
    for name in plan.rules:
        try:
            results[name] = plan.run_rule(table, name)
        except UserError as exc:
            if plan.explicit:
                raise UserError(f"rule {name}: {exc}") from None
            skipped[name] = str(exc)
    if not results:
        name, why = next(iter(skipped.items()))
        raise UserError(f"no rule could rank this table ({name}: {why})")
    found_intervals = None
    if plan.intervals:
        from ranking.intervals import draw_source, rank_intervals

        level = plan.level  # checked once, when the plan was built (its declaration's bounds)
        draws = DEFAULT_DRAWS if plan.draws is None else plan.draws
        source = draw_source(table, plan.seeds)
        failed: dict[str, str] = {}
        found_intervals = rank_intervals(table, results, source=source, level=level, draws=draws, seed=plan.seed,
                                         plan=plan, skipped=failed)
        if failed and plan.explicit:
            name, why = next(iter(failed.items()))
            raise UserError(why)
        settings["intervals"] = {"level": level, "draws": draws, "seed": plan.seed, "source": source.kind,
                                 "described": source.describe(draws, table.values.size),
                                 "simultaneous": "for all models at once, per rule", "without": failed}
    found_robustness = None
    if plan.robustness:
        from ranking.robustness import SCOPE
        from ranking.robustness import robustness as cells_search

        found_robustness = cells_search(table, results, max_cells=plan.max_cells, plan=plan)
        settings["robustness"] = {"changed_cell": SCOPE, "max_cells": plan.max_cells}
    used = table.weights > 0
    present = {m: int(k) for m, k in zip(table.models, (~np.isnan(table.values[:, used])).sum(axis=1))}
    few = few_scores(present)
    if few:  # ranked on a few scores: said wherever the model is ranked
        settings["few_scores"] = few
    if plan.board:  # the leaderboard's own order, beside the rules (no intervals: it is the board's, not a rule's)
        from ranking.boards import board_result

        results["board"] = board_result(prepared.unvoted)
        settings["board"] = prepared.unvoted.board
    return RankResult(results, settings, skipped, found_intervals, found_robustness, present)


def rank(table: ScoreTable, rule: str | Sequence[str] = "all", **choices: Any) -> RankResult:
    """Rank ``table`` with one rule, several, or ``"all"`` under the declared choices (the keywords below, each
    checked once against :class:`ranking.plan.RankPlan`'s declaration; a bad one is one :class:`UserError` line).

    ``preset`` is ``"default"`` (None) or ``"votenrank"`` (the published conventions,
    :data:`ranking.settings.PRESETS`); ``ties`` (default: the preset's) and
    ``og_gamma`` (the optimality gap's ``gamma``, default: the preset's; its one keyword) override it.
    Other keywords are the rules' own parameters (``atol``, ``missing``, ``nonpositive``), to every rule asked for.
    ``drop_incomplete`` (default: the preset's; ``votenrank``: yes, as the authors ranked
    ``dropna()`` rows) ranks only the models with every score; those left out are listed under
    ``settings["dropped_incomplete"]`` whenever dropping applies.
    ``vote`` (default ``"benchmark"``, :mod:`ranking.votes`): one vote per benchmark, or ``"column"``: one per
    column; ``settings["votes"]`` states which, with how many benchmarks and columns voted.
    ``board``: also the board's own order (``results["board"]``) for a table imported from a leaderboard
    (:mod:`ranking.boards`).
    A rule asked for by name that cannot rank the table raises a
    :class:`UserError`; under ``"all"`` it is left out and listed in
    ``skipped`` (e.g. the geometric mean of a table with a score <= 0).

    ``intervals=True`` adds, per rule, rank intervals that hold for all models at once at ``level`` and
    tiers (:mod:`ranking.intervals`), from ``draws`` (default 1000) tables drawn with ``seed`` from the
    table's standard errors, else from ``seeds`` (a ``seeds.csv``; default: the one beside the table's CSV).
    ``robustness=True`` adds, per rule and model, the fewest cells to change for it to win
    (:mod:`ranking.robustness`, searched up to ``max_cells``).

    The same as ``apply_plan(RankPlan.build(rule, **choices), table)`` (:class:`ranking.plan.RankPlan`):
    build the plan once to rank many tables under the same choices.
    """
    return apply_plan(RankPlan.build(rule, **choices), table)


# help() and editors show the declared choices as keywords (one list: ranking.plan.RankPlan's fields)
rank.__signature__ = choice_signature(  # type: ignore[attr-defined]
    inspect.Parameter("table", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="ScoreTable"),
    inspect.Parameter("rule", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="all"))
rank.__doc__ = (rank.__doc__ or "") + "\n    The choices, as declared (:class:`ranking.plan.RankPlan`)::\n\n" + "".join(
    f"        {name}={RankPlan.__dataclass_fields__[name].default!r}: {choice_help(name)}\n" for name in CHOICES)
