"""Aggregation settings: how criterion and group weights reach a rule.

``basic``
    The rule runs on the table with the criteria's own weights.
``weighted``
    Each group's weight is spread over its criteria: a criterion of group
    ``g`` gets ``own_weight × group_weight[g] / (total own weight of g)``.
    With unit own weights that is the paper's ``group_weight / |group|``;
    with other own weights (e.g. an ``a/b`` cell split into two criteria of
    weight 1/2, or a diagnostic of weight 0) the group still carries exactly
    its group weight in total.
``two-step``
    The rule runs inside each group with the criteria's own weights, giving
    one interim score per model per group; the same rule then ranks the
    models on a models × groups table of interim scores (higher is better)
    weighted by the group weights. The interim score is

    - for the eight voting rules, the model's position in the group negated
      (``-rank``). These rules are ordinal, so only the group's ranking
      matters in the second step; the position carries it exactly, with the
      rule's own ties, Threshold's lexicographic tie-breaks and Baldwin's
      elimination order (for Condorcet: winner ``-1``, everyone else ``-2``);
    - for ``arithmetic_mean`` and ``geometric_mean``, the group's mean, so
      the second step is a weighted mean of group means;
    - for ``optimality_gap``, the group's weighted mean of ``min(s/scale,
      gamma)``, and the second step runs with ``scale=1``, so the final score
      is the group-weighted mean of the groups' (negated) gaps.

    A model without any score in a group has a *missing* interim score there,
    handled by the second step like any missing score (positional rules rank
    only the models present, majority rules skip the pair, means impute the
    median; ``missing="error"`` refuses). A model missing every group cannot
    be ranked (NaN).

Presets (``preset=``)
    ``"default"`` is the principled reading above. ``"votenrank"``
    reproduces the numbers published with Vote'n'Rank (Rofin et al. 2023) and
    changes six conventions at once (see :data:`PRESETS`): ties as the
    ``votenrank`` tie convention; ``weighted`` divides an own weight by the
    *number of columns* of its group (every column of the group counted,
    a half-weight ``a/b`` column and a weight-0 column included), so a group
    with split columns carries less than its group weight; the optimality
    gap's ``gamma`` is 0.95 of the score scale (95 on a 0-100 scale) instead of
    1; the geometric mean of a model with a score <= 0 on a criterion of
    positive weight is 0 (the authors' ``scipy.stats.gmean`` gives exactly 0
    for a zero score, NaN for a negative one, which sorts last: both end at
    the bottom) instead of an error; prospective systems
    (:mod:`ranking.prospective`) search weights over every column, weight-0
    diagnostics included, among the models with a score on every column (the
    authors ran their LP on the leaderboard's complete rows, pandas
    ``dropna()``: a model missing any score is neither a candidate nor a
    rival; the default keeps it and skips the missing pairs). An explicit
    ``ties=``, ``og_gamma=`` (the optimality gap's gamma), rule parameter or ``prospective`` argument
    (``zero_weight_columns=``, ``drop_incomplete=``) overrides the preset's value.
    A grid config naming the preset scores its bias runs as the authors computed
    fairness (``bias_scoring``: the ``votenrank`` scoring mode of :mod:`harness.bias`).

Group weights default to 1 for every group when none are given; given ones
must name every group with a criterion of non-zero weight (a group left out is
an error, not a silent 1), be finite and >= 0, and are only meaningful for ``weighted`` and ``two-step``
(passing them with ``basic`` is an error). Every criterion of positive
weight needs a group in these two settings.

>>> from ranking.rules import worked_example
>>> from dataclasses import dataclass, replace
>>> t = worked_example()
>>> t = t.with_criteria([replace(c, group="x" if c.name in ("c1", "c2") else "y") for c in t.criteria])
>>> apply_setting(t, "borda", setting="weighted", group_weights={"x": 3, "y": 1}).scores.round(4).tolist()
[9.0, 5.3333, 6.1667, 3.5]
>>> r = apply_setting(t, "borda", setting="two-step", group_weights={"x": 3, "y": 1})
>>> r.params["interim"]["x"], r.scores.tolist()
({'A': -1.0, 'B': -3.0, 'C': -2.0, 'D': -4.0}, [9.0, 6.0, 7.0, 2.0])
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.result import RuleResult
from ranking.rules import HUGE, get_rule, safe_weights
from ranking.table import Criterion, ScoreTable


@dataclass(frozen=True)
class Preset:
    """A bundle of conventions (module docstring, "Presets")."""

    name: str
    ties: str
    weighted_divisor: str  # "total_weight" | "columns": what an own weight is divided by in `weighted`
    og_gamma: float  # optimality_gap's gamma on the normalised (0-1) scale
    gm_nonpositive: str  # geometric_mean with a score <= 0: "error" | "zero"
    prospective_zero_weight: bool  # prospective LP may put weight on weight-0 columns
    drop_incomplete: bool  # rank and search prospective systems only among models with every score (dropna)
    bias_scoring: str = "default"  # how a grid with this preset scores bias (harness.bias: default|reference|votenrank)


PRESETS: dict[str, Preset] = {
    "default": Preset("default", "default", "total_weight", 1.0, "error", False, False),
    "votenrank": Preset("votenrank", "votenrank", "columns", 0.95, "zero", True, True, bias_scoring="votenrank"),
}


def get_preset(name: str | None) -> Preset:
    """The preset ``name`` (None: ``default``); a :class:`UserError` for an unknown one.

    >>> get_preset("votenrank").og_gamma
    0.95
    >>> get_preset("paper")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: unknown preset 'paper' (choose one of: default, votenrank)
    """
    key = "default" if name is None else name
    if key not in PRESETS:
        raise UserError(f"unknown preset {name!r} (choose one of: {', '.join(PRESETS)})")
    return PRESETS[key]


def preset_params(rule: str, preset: Preset, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with the preset's rule parameters filled in where not given explicitly.

    >>> preset_params("optimality_gap", get_preset("votenrank"), {})
    {'gamma': 0.95}
    >>> preset_params("optimality_gap", get_preset("votenrank"), {"gamma": 0.9})
    {'gamma': 0.9}
    """
    out = dict(params)
    if rule == "optimality_gap":
        out.setdefault("gamma", preset.og_gamma)
    elif rule == "geometric_mean":
        out.setdefault("nonpositive", preset.gm_nonpositive)
    return out


def apply_setting(
    table: ScoreTable,
    rule: str,
    *,
    setting: str = "basic",
    group_weights: Mapping[str, float] | None = None,
    ties: str | None = None,
    preset: str | None = None,
    **params: Any,
) -> RuleResult:
    """Run one ``rule`` on ``table`` under ``setting`` and ``preset`` (see the module docstring).

    ``ties`` (default: the preset's) and explicit rule ``params`` override the preset. The primitive under
    :class:`ranking.plan.RankPlan` (its :meth:`~ranking.plan.RankPlan.run_rule` is the one caller in the
    package): rank with :func:`ranking.rank`, or a plan, rather than with this.

    >>> from ranking.rules import worked_example
    >>> apply_setting(worked_example(), "copeland").winners
    ('B',)
    """
    spec = get_rule(rule)
    check_params(rule, params)
    conv = get_preset(preset)
    ties = conv.ties if ties is None else ties
    params = preset_params(rule, conv, params)
    if setting == "basic":  # the setting and its group weights were checked where the choices entered (ranking.plan)
        result = spec(table, ties=ties, **params)
        return replace(result, params={**result.params, "setting": setting, "preset": conv.name})
    gw = resolve_group_weights(table, group_weights)
    if setting == "weighted":
        result = spec(weighted_table(table, gw, divisor=conv.weighted_divisor), ties=ties, **params)
        return replace(
            result, params={**result.params, "setting": setting, "group_weights": gw, "preset": conv.name}
        )
    result = two_step(table, rule, gw, ties=ties, **params)
    return replace(result, params={**result.params, "preset": conv.name})


def check_params(rule: str, params: Mapping[str, Any]) -> None:
    """A :class:`UserError` if ``rule`` does not take one of ``params``.

    >>> check_params("borda", {"gamma": 1})
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: rule borda has no parameter 'gamma' (parameters: missing, atol)
    """
    spec = get_rule(rule)
    accepted = [
        p.name
        for p in inspect.signature(spec.fn).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "ties"
    ]
    for name in params:
        if name not in accepted:
            raise UserError(
                f"rule {rule} has no parameter {name!r} (parameters: {', '.join(accepted) or 'none'})"
            )


def resolve_group_weights(table: ScoreTable, group_weights: Mapping[str, float] | None) -> dict[str, float]:
    """Every group of ``table`` → its weight, validated.

    No group weights at all means weight 1 for every group. Group weights that are
    given must name every group with a criterion of non-zero weight: a group left
    out is an error, never a silent weight of 1.

    >>> from ranking.rules import worked_example
    >>> resolve_group_weights(worked_example(), {})
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: the weighted and two-step settings need criterion groups, but the score table in worked example has none
    """
    groups = table.group_names
    where = f" in {table.source}" if table.source else ""
    if not groups:
        raise UserError(f"the weighted and two-step settings need criterion groups, but the score table{where} has none")
    ungrouped = [c.name for c in table.criteria if c.group is None and c.weight > 0]
    if ungrouped:
        raise UserError(
            f"criterion {ungrouped[0]!r}{where} has no group: the weighted and two-step settings need a group "
            "for every criterion of positive weight"
        )
    out = {g: 1.0 for g in groups}
    for name, value in (group_weights or {}).items():
        if name not in out:
            raise UserError(f"group weight given for unknown group {name!r} (groups: {', '.join(groups)})")
        try:
            w = float(value)
        except (TypeError, ValueError):
            raise UserError(f"weight of group {name!r} is {value!r}, not a number") from None
        if not math.isfinite(w) or w < 0:
            raise UserError(f"weight of group {name!r} is {value!r}: group weights must be finite and >= 0")
        out[name] = w
    if group_weights:
        active = [g for g in groups if any(c.weight > 0 for c in table.criteria if c.group == g)]
        left_out = [g for g in active if g not in group_weights]
        if left_out:
            raise UserError(
                f"group weights name {', '.join(group_weights)} but not {', '.join(left_out)}: "
                f"give a weight to every group (groups: {', '.join(active)}), e.g. "
                + ",".join(f"{g}={group_weights.get(g, 0):g}" for g in active)
            )
    if not any(w > 0 for w in out.values()):
        raise UserError("all group weights are zero: at least one must be positive")
    return out


def weighted_table(
    table: ScoreTable, group_weights: Mapping[str, float], *, divisor: str = "total_weight"
) -> ScoreTable:
    """The table with each criterion's weight = own × group weight / its group's size.

    The size is the group's total own weight (``divisor="total_weight"``, the
    default) or its number of columns (``"columns"``, the ``votenrank`` preset).

    >>> from ranking.rules import worked_example
    >>> t = worked_example()
    >>> t = t.with_criteria([replace(c, group="x" if c.name == "c1" else "y") for c in t.criteria])
    >>> weighted_table(t, {"x": 1.0, "y": 2.0}).weights.tolist()
    [1.0, 0.5, 0.5, 0.5, 0.5]
    >>> t = t.with_weights({"c2": 0.5, "c3": 0.5})
    >>> weighted_table(t, {"x": 1.0, "y": 2.0}).weights.tolist()          # y: 2 / (0.5+0.5+1+1)
    [1.0, 0.3333333333333333, 0.3333333333333333, 0.6666666666666666, 0.6666666666666666]
    >>> weighted_table(t, {"x": 1.0, "y": 2.0}, divisor="columns").weights.tolist()   # y: 2 / 4
    [1.0, 0.25, 0.25, 0.5, 0.5]
    """
    if divisor not in ("total_weight", "columns"):
        raise ValueError(f"unknown divisor {divisor!r}")
    # huge own or group weights (1e308) are divided by their largest first: rules depend on ratios only,
    # and their sums and products must stay finite
    own = safe_weights(table.weights)
    gmax = max(group_weights.values(), default=0.0)
    gscale = gmax if gmax > HUGE else 1.0
    totals: dict[str, float] = {}
    for c, w in zip(table.criteria, own):
        if c.group is not None:
            size = 1.0 if divisor == "columns" else w
            totals[c.group] = totals.get(c.group, 0.0) + size
    crits = []
    for c, w in zip(table.criteria, own):
        if c.group is None or totals[c.group] == 0 or c.weight == 0:
            crits.append(c)  # weight 0 (checked in resolve_group_weights)
        else:
            crits.append(replace(c, weight=w * (group_weights[c.group] / gscale) / totals[c.group]))
    if not any(c.weight > 0 for c in crits):
        raise UserError("every criterion gets weight 0 under these group weights")
    return table.with_criteria(crits)


def interim_scores(result: RuleResult) -> np.ndarray:
    """What a group's result contributes to the second step of ``two-step`` (module docstring).

    >>> from ranking.rules import worked_example, threshold
    >>> interim_scores(threshold(worked_example())).tolist()
    [-4.0, -2.0, -1.0, -3.0]
    """
    if result.rule == "optimality_gap":
        return result.scores + result.params["gamma"]
    if get_rule(result.rule).cardinal:
        return np.array(result.scores, dtype=float)
    return -np.asarray(result.ranks, dtype=float)


def two_step(
    table: ScoreTable, rule: str, group_weights: Mapping[str, float], *, ties: str | None = None, **params: Any
) -> RuleResult:
    """The ``two-step`` setting (module docstring); ``group_weights`` as from :func:`resolve_group_weights`."""
    spec = get_rule(rule)
    ties = "default" if ties is None else ties
    active = [g for g in table.group_names if group_weights.get(g, 1.0) > 0]
    interim = np.full((table.n_models, len(active)), np.nan)
    for k, g in enumerate(active):
        sub = table.group(g)
        if not any(c.weight > 0 for c in sub.criteria):
            raise UserError(f"group {g!r} has weight {group_weights[g]:g} but all its criteria have weight 0")
        res = spec(sub, ties=ties, **params)
        rows = [table.models.index(m) for m in res.models]
        interim[rows, k] = interim_scores(res)
    second_params = dict(params)
    if "atol" in second_params:
        second_params["atol"] = 0.0  # interim scores are positions or means, not raw scores
    if rule == "optimality_gap":
        second_params["scale"] = 1.0
    keep = ~np.isnan(interim).all(axis=1)
    if not keep.any():
        raise UserError("no model has a score in any group of positive weight")
    second = ScoreTable(
        tuple(m for m, k in zip(table.models, keep) if k),
        tuple(Criterion(g, weight=group_weights[g]) for g in active),
        interim[keep],
        source=f"two-step interim scores of {table.source or 'the score table'}",
    )
    final = spec(second, ties=ties, **second_params)
    scores = np.full(table.n_models, np.nan)
    ranks = np.full(table.n_models, np.nan)
    scores[keep] = final.scores
    ranks[keep] = final.ranks
    detail = {
        g: {m: (None if np.isnan(v) else float(v)) for m, v in zip(table.models, interim[:, k])}
        for k, g in enumerate(active)
    }
    merged = {**final.params, "setting": "two-step", "group_weights": dict(group_weights), "interim": detail}
    return RuleResult(rule, table.models, scores, ranks, merged)
