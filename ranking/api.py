"""Ranking a table with several rules under one setting: :func:`rank` → :class:`RankResult`.

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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.floor.errors import UserError
from ranking.result import RuleResult
from ranking.rules import rule_names
from ranking.settings import get_preset, resolve_group_weights, weighted_table
from ranking.settings import rank as rank_one
from ranking.table import ScoreTable


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


def used_settings(
    table: ScoreTable,
    setting: str,
    ties: str | None,
    group_weights: Mapping[str, float] | None,
    *,
    preset: str | None = None,
    og_gamma: float | None = None,
) -> dict[str, Any]:
    """The preferences a ranking used, stated in full.

    ``preset`` (its name, ``default`` when none is given) and ``ties`` (the
    tie convention in effect: the preset's unless given); ``directions`` and
    ``criterion_weights`` per criterion; ``groups`` per criterion (None where
    it has none); ``group_weights`` (weighted / two-step, every group's weight
    after defaults; None under basic); under ``weighted`` also
    ``effective_weights``, each criterion's weight after the group weights are
    applied (what the rules actually use, with the preset's divisor). With
    ``og_gamma`` given (the optimality gap was ranked) also ``og_gamma``.
    """
    conv = get_preset(preset)
    out: dict[str, Any] = {
        "setting": setting,
        "preset": conv.name,
        "ties": conv.ties if ties is None else ties,
        "directions": {c.name: c.direction for c in table.criteria},
        **({"targets": {c.name: c.target for c in table.criteria if c.direction == "target"}}
           if any(c.direction == "target" for c in table.criteria) else {}),
        "criterion_weights": {c.name: c.weight for c in table.criteria},
        "groups": {c.name: c.group for c in table.criteria},
        "group_weights": None,
    }
    if setting != "basic":
        gw = resolve_group_weights(table, group_weights)
        out["group_weights"] = gw
        if setting == "weighted":
            effective = weighted_table(table, gw, divisor=conv.weighted_divisor).weights.tolist()
            out["effective_weights"] = dict(zip(table.names, effective))
    if og_gamma is not None:
        out["og_gamma"] = og_gamma
    return out


def rank(
    table: ScoreTable,
    rule: str | Sequence[str] = "all",
    *,
    setting: str = "basic",
    group_weights: Mapping[str, float] | None = None,
    ties: str | None = None,
    preset: str | None = None,
    og_gamma: float | None = None,
    drop_incomplete: bool | None = None,
    vote: str | None = None,
    board: bool = False,
    intervals: bool = False,
    level: float = 0.95,
    draws: int | None = None,
    seed: int = 0,
    seeds: Any = None,
    robustness: bool = False,
    max_cells: int = 3,
    **params: Any,
) -> RankResult:
    """Rank ``table`` with one rule, several, or ``"all"`` under ``setting`` and ``preset``.

    ``preset`` is ``"default"`` (None) or ``"votenrank"`` (the published conventions,
    :data:`ranking.settings.PRESETS`); ``ties`` (default: the preset's) and
    ``og_gamma`` (the optimality gap's ``gamma``, default: the preset's) override it.
    ``og_gamma`` goes to ``optimality_gap`` only, ``params`` to every rule asked for.
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
    """
    requested = [rule] if isinstance(rule, str) else list(rule)
    known = rule_names()
    names: list[str] = []
    for name in requested or ["all"]:
        for n in known if name == "all" else [name]:
            if n not in known:
                raise UserError(f"unknown rule {n!r} (rules: {', '.join(known)}, all)")
            if n not in names:
                names.append(n)
    explicit = "all" not in requested
    if setting == "basic" and group_weights:
        raise UserError("group weights only apply with the weighted or two-step setting, not basic")
    conv = get_preset(preset)
    if og_gamma is not None:
        try:
            og_gamma = float(og_gamma)
        except (TypeError, ValueError):
            raise UserError(f"og_gamma={og_gamma!r} is not a number") from None
        if not math.isfinite(og_gamma) or og_gamma <= 0:
            raise UserError(f"og_gamma={og_gamma!r} must be a finite number > 0")
    gamma = None
    if "optimality_gap" in names:
        gamma = og_gamma if og_gamma is not None else params.get("gamma", conv.og_gamma)
    from ranking.votes import apply_votes, changes_weights

    dropped: list[str] | None = None
    if conv.drop_incomplete if drop_incomplete is None else drop_incomplete:
        table, dropped = table.complete_rows()
    unvoted = table
    table, votes = apply_votes(table, vote)
    # input errors once, before any rule runs
    settings = used_settings(table, setting, ties, group_weights, preset=conv.name, og_gamma=gamma)
    if changes_weights(votes):
        settings["votes"] = votes  # stated where the vote mode changes the weights
    if dropped is not None:
        settings["dropped_incomplete"] = dropped
    results: dict[str, RuleResult] = {}
    skipped: dict[str, str] = {}
    for name in names:
        extra = {"gamma": og_gamma} if name == "optimality_gap" and og_gamma is not None else {}
        try:
            results[name] = rank_one(
                table, name, setting=setting, group_weights=group_weights, ties=ties, preset=conv.name,
                **{**params, **extra},
            )
        except UserError as exc:
            if explicit:
                raise UserError(f"rule {name}: {exc}") from None
            skipped[name] = str(exc)
    if not results:
        name, why = next(iter(skipped.items()))
        raise UserError(f"no rule could rank this table ({name}: {why})")
    kwargs = {"group_weights": group_weights, "ties": ties, "preset": conv.name, **params}
    per_rule = {"optimality_gap": {"gamma": og_gamma}} if og_gamma is not None else {}
    found_intervals = None
    if intervals:
        from ranking.intervals import DEFAULT_DRAWS, check_level, draw_source, rank_intervals

        level = check_level(level)
        draws = DEFAULT_DRAWS if draws is None else int(draws)
        source = draw_source(table, seeds)
        failed: dict[str, str] = {}
        found_intervals = rank_intervals(table, results, source=source, level=level, draws=draws, seed=seed,
                                         setting=setting, rank_kwargs=kwargs, rule_params=per_rule, skipped=failed)
        if failed and explicit:
            name, why = next(iter(failed.items()))
            raise UserError(why)
        settings["intervals"] = {"level": level, "draws": draws, "seed": seed, "source": source.kind,
                                 "described": source.describe(draws, table.values.size),
                                 "simultaneous": "for all models at once, per rule", "without": failed}
    found_robustness = None
    if robustness:
        from ranking.robustness import SCOPE
        from ranking.robustness import robustness as cells_search

        found_robustness = cells_search(table, results, setting=setting, max_cells=max_cells, rank_kwargs=kwargs,
                                        rule_params=per_rule)
        settings["robustness"] = {"changed_cell": SCOPE, "max_cells": max_cells}
    used = table.weights > 0
    present = (~np.isnan(table.values[:, used])).sum(axis=1)
    from ranking.intervals import few_scores

    few = few_scores({m: int(k) for m, k in zip(table.models, present)})
    if few:  # ranked on a few scores: said wherever the model is ranked
        settings["few_scores"] = few
    if board:  # the leaderboard's own order, beside the rules (no intervals: it is the board's, not a rule's)
        from ranking.boards import board_result

        results["board"] = board_result(unvoted)
        settings["board"] = unvoted.board
    return RankResult(results, settings, skipped, found_intervals, found_robustness,
                      {m: int(k) for m, k in zip(table.models, present)})
