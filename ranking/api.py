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

from ranking.errors import UserError
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
        """
        import pandas as pd

        data = {}
        for name, r in self.results.items():
            data[f"{name}_score"] = r.scores
            data[f"{name}_rank"] = pd.array([None if math.isnan(x) else int(x) for x in r.ranks], dtype="Int64")
        frame = pd.DataFrame(data, index=pd.Index(self.models, name="model"))
        return frame

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"settings": {...}, <rule>: {"scores", "ranks", "winners"}, ...}``."""
        return {"settings": self.settings, **{name: r.to_dict() for name, r in self.results.items()}}


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
    from ranking.votes import apply_votes

    dropped: list[str] | None = None
    if conv.drop_incomplete if drop_incomplete is None else drop_incomplete:
        table, dropped = table.complete_rows()
    unvoted = table
    table, votes = apply_votes(table, vote)
    # input errors once, before any rule runs
    settings = used_settings(table, setting, ties, group_weights, preset=conv.name, og_gamma=gamma)
    if votes["benchmarks"] != votes["columns"] or votes["not_voting"]:
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
    if board:
        from ranking.boards import board_result

        results["board"] = board_result(unvoted)
        settings["board"] = unvoted.board
    return RankResult(results, settings, skipped)
