"""The plan of a ranking: every choice of :func:`ranking.rank` resolved once, then applied to tables.

:func:`ranking.rank` (``vnr rank``) is ``apply_plan(RankPlan.build(...), table)``
(:func:`ranking.api.apply_plan`). Everything else in the project that ranks — a scenario's columns, the weight simplex, what-if, the seed / standard-error
bootstraps, rank intervals, the fewest changes to win and the analyses — holds a :class:`RankPlan` too
and ranks through it, so no path can apply a default (a preset's tie convention, its divisor of the
weighted setting, its optimality-gap gamma, dropping incomplete rows, one vote per benchmark) that
another forgets.

A plan is applied in two steps:

1. :meth:`RankPlan.prepare` — once per table: the rows the preset ranks (``drop_incomplete``: the
   complete rows only) and the weights of the vote mode (:mod:`ranking.votes`), giving a
   :class:`Prepared` table;
2. :meth:`RankPlan.run_rule` — as often as needed: one rule under the plan's setting, preset, tie
   convention and parameters on a prepared table, or on a table derived from one by new values
   (a bootstrap draw, a changed cell of the fewest changes to win) or a subset of rows (an
   analysis), optionally under other group weights (a point of the weight simplex). The
   orientation (directions, targets) is the table's criteria's, which every rule reads.

Never prepare a prepared table again: one vote per benchmark divides a benchmark's weight among its
columns, and dividing twice would change it.

The vectorised paths take what they compute from the plan too: the weight simplex and what-if build
their linear basis from :meth:`RankPlan.run_rule` at the corners (checked at probe points), and the
rank intervals' batch scorers score :meth:`RankPlan.effective_table`, the very table whose weights a
rule sees under ``basic`` or ``weighted``.

>>> from ranking.rules import worked_example
>>> plan = RankPlan.build(["borda", "copeland"])
>>> plan.rules, plan.setting, plan.ties, plan.preset, plan.vote, plan.drop_incomplete
(('borda', 'copeland'), 'basic', 'default', 'default', 'benchmark', False)
>>> prepared = plan.prepare(worked_example())
>>> plan.run_rule(prepared.table, "borda").scores.tolist()
[6.0, 9.0, 8.0, 7.0]
>>> from ranking.api import apply_plan
>>> apply_plan(plan, worked_example()).winners
{'borda': ('B',), 'copeland': ('B',)}
>>> votenrank = RankPlan.build("optimality_gap", preset="votenrank")
>>> votenrank.ties, votenrank.drop_incomplete, votenrank.rule_params("optimality_gap")
('votenrank', True, {'gamma': 0.95})
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ranking.floor.errors import UserError
from ranking.result import RuleResult
from ranking.settings import (
    SETTINGS,
    Preset,
    apply_setting,
    get_preset,
    preset_params,
    resolve_group_weights,
    weighted_table,
)
from ranking.table import ScoreTable


@dataclass(frozen=True)
class Prepared:
    """A table as a plan ranks it (:meth:`RankPlan.prepare`)."""

    #: what the rules see: the complete rows where the plan drops incomplete ones, weights under the vote mode
    table: ScoreTable
    #: the same rows with the table's own weights (the leaderboard's own order reads it)
    unvoted: ScoreTable
    #: the models left out for missing a score (None where the plan does not drop incomplete rows)
    dropped: list[str] | None
    #: what the output states about the vote (:func:`ranking.votes.apply_votes`)
    votes: dict[str, Any]


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


def resolve_rule_names(rule: str | Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """(rule names, whether they were named rather than ``"all"``); an unknown name is a :class:`UserError`."""
    from ranking.rules import rule_names

    requested = [rule] if isinstance(rule, str) else list(rule)
    known = rule_names()
    names: list[str] = []
    for name in requested or ["all"]:
        for n in known if name == "all" else [name]:
            if n not in known:
                raise UserError(f"unknown rule {n!r} (rules: {', '.join(known)}, all)")
            if n not in names:
                names.append(n)
    return tuple(names), bool(requested) and "all" not in requested


@dataclass(frozen=True)
class RankPlan:
    """The resolved choices of a ranking (module docstring); build one with :meth:`build`."""

    rules: tuple[str, ...]
    explicit: bool  # rules named: one that cannot rank raises; under "all" it is skipped
    setting: str = "basic"
    group_weights: Mapping[str, float] | None = None  # as given (checked against a table by resolve_group_weights)
    ties: str = "default"  # the tie convention in force (the preset's unless given)
    preset: str = "default"
    og_gamma: float | None = None  # an explicit optimality-gap gamma (else params' or the preset's)
    params: Mapping[str, Any] = field(default_factory=dict)  # to every rule
    drop_incomplete: bool = False
    vote: str = "benchmark"
    board: bool = False
    intervals: bool = False
    level: float = 0.95
    draws: int | None = None
    seed: int = 0
    seeds: Any = None
    robustness: bool = False
    max_cells: int = 3

    # ------------------------------------------------------------------ building
    @classmethod
    def build(
        cls,
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
    ) -> RankPlan:
        """The plan of these choices (the arguments of :func:`ranking.rank`), checked and with every default
        resolved: the preset's tie convention and ``drop_incomplete`` where not given, the vote mode."""
        from ranking.votes import check_vote

        names, explicit = resolve_rule_names(rule)
        if setting not in SETTINGS:
            raise UserError(f"unknown setting {setting!r} (choose one of: {', '.join(SETTINGS)})")
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
        return cls(
            rules=names, explicit=explicit, setting=setting,
            group_weights=None if group_weights is None else dict(group_weights),
            ties=conv.ties if ties is None else ties, preset=conv.name, og_gamma=og_gamma, params=dict(params),
            drop_incomplete=conv.drop_incomplete if drop_incomplete is None else bool(drop_incomplete),
            vote=check_vote(vote), board=board, intervals=intervals, level=level, draws=draws, seed=seed,
            seeds=seeds, robustness=robustness, max_cells=max_cells,
        )

    def with_(self, **changes: Any) -> RankPlan:
        """This plan with some fields changed (e.g. ``rules=("borda",)``, ``group_weights=...``)."""
        return replace(self, **changes)

    @property
    def conventions(self) -> Preset:
        return get_preset(self.preset)

    def rule_params(self, rule: str) -> dict[str, Any]:
        """The parameters ``rule`` runs with: the plan's, ``og_gamma`` for the optimality gap, the preset's."""
        extra = {"gamma": self.og_gamma} if rule == "optimality_gap" and self.og_gamma is not None else {}
        return preset_params(rule, self.conventions, {**self.params, **extra})

    @property
    def gamma(self) -> float | None:
        """The optimality gap's gamma in force (None when that rule is not ranked): stated in the settings."""
        if "optimality_gap" not in self.rules:
            return None
        return self.og_gamma if self.og_gamma is not None else self.params.get("gamma", self.conventions.og_gamma)

    # ------------------------------------------------------------------ applying
    def prepare(self, table: ScoreTable) -> Prepared:
        """The rows the plan ranks and their weights under its vote mode (once per table)."""
        from ranking.votes import apply_votes

        dropped: list[str] | None = None
        if self.drop_incomplete:
            table, dropped = table.complete_rows()
        voted, votes = apply_votes(table, self.vote)
        return Prepared(voted, table, dropped, votes)

    def run_rule(self, table: ScoreTable, rule: str, *, group_weights: Mapping[str, float] | None = None
                 ) -> RuleResult:
        """``rule`` on a prepared ``table`` (or one derived from it by values or rows) under the plan's setting,
        preset, ties and parameters; ``group_weights`` replace the plan's (a point of the weight simplex)."""
        gw = self.group_weights if group_weights is None else group_weights
        return apply_setting(table, rule, setting=self.setting, group_weights=gw, ties=self.ties, preset=self.preset,
                             **self.rule_params(rule))

    def effective_table(self, table: ScoreTable, group_weights: Mapping[str, float] | None = None
                        ) -> ScoreTable | None:
        """The prepared ``table`` with the weights a rule sees under the plan's setting: the table itself under
        ``basic``, the weighted setting's table under ``weighted``; None under ``two-step`` (no single table)."""
        if self.setting == "basic":
            return table
        if self.setting == "weighted":
            gw = resolve_group_weights(table, self.group_weights if group_weights is None else group_weights)
            return weighted_table(table, gw, divisor=self.conventions.weighted_divisor)
        return None

    def rank_kwargs(self) -> dict[str, Any]:
        """The plan's group weights, ties, preset and parameters as keyword arguments of :meth:`build` (what the
        intervals' batch scorers read: the tie convention, ``atol``)."""
        return {"group_weights": self.group_weights, "ties": self.ties, "preset": self.preset, **self.params}

    def used_settings(self, prepared: Prepared) -> dict[str, Any]:
        """The settings a ranking states (:func:`used_settings`, the vote, the dropped models);
        checks the group weights against the table."""
        from ranking.votes import changes_weights

        out = used_settings(prepared.table, self.setting, self.ties, self.group_weights, preset=self.preset,
                            og_gamma=self.gamma)
        if changes_weights(prepared.votes):
            out["votes"] = prepared.votes  # stated where the vote mode changes the weights
        if prepared.dropped is not None:
            out["dropped_incomplete"] = prepared.dropped
        return out
