"""What-if: the group weights nearest (L1) to the scenario's under which a given model wins.

Group weights are compared as points of the simplex (normalised to sum 1).

- Rules linear in the weights (see :mod:`ranking.scenarios.simplex`): exact, by
  linear programming. With ``C`` the linear basis (scores = C @ w), minimise
  ``Σ|w − w0|`` subject to ``(C_M − C_j)·w ≥ δ`` for every other model j,
  ``w ≥ 0``, ``Σw = 1``. First with a small margin δ > 0 (M wins alone), then
  δ = 0 (M shares first place). The weights found are checked by calling the
  rule there.
- Other rules: the nearest winning point of a fine simplex grid (resolution
  ``resolution``; the answer is exact up to that step).
- For the Condorcet criterion, also the prospective LP of Vote'n'Rank
  (:func:`ranking.prospective.prospective`): criterion weights, if any, that
  make M the Condorcet winner.

>>> r = what_if(table, column, "votenrank", "roberta-base", {"performance": .4, ...})   # doctest: +SKIP
>>> r.weights, r.distance                                                             # doctest: +SKIP
({'performance': 0.52, 'efficiency': 0.18, 'fairness': 0.3}, 0.24)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.scenarios.compare import group_weight_vector
from ranking.scenarios.scenario import Column
from ranking.scenarios.simplex import linear_basis, loop_winners, rank_at, simplex_grid
from ranking.table import ScoreTable


@dataclass
class WhatIf:
    """The answer: the nearest winning group weights (or None) and how they were found."""

    model: str
    column: Column
    scenario_weights: dict[str, float]
    weights: dict[str, float] | None
    distance: float | None
    sole: bool  # wins alone (False: shares first place)
    method: str  # "lp" | "grid"
    resolution: int | None = None
    winners_at_scenario: tuple[str, ...] = ()
    winners_at_weights: tuple[str, ...] = ()
    prospective: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "rule": self.column.rule,
            "setting": self.column.setting,
            "scenario_weights": self.scenario_weights,
            "winners_at_scenario_weights": list(self.winners_at_scenario),
            "weights": self.weights,
            "l1_distance": self.distance,
            "wins_alone": self.sole if self.weights is not None else None,
            "winners_at_weights": list(self.winners_at_weights),
            "method": self.method,
            "grid_resolution": self.resolution,
            "prospective": self.prospective,
        }

    def describe(self) -> str:
        fmt = ", ".join
        w0 = fmt(f"{g}={w:.3g}" for g, w in self.scenario_weights.items())
        head = f"{self.model} under {self.column.rule} ({self.column.setting}); scenario group weights {w0}"
        lines = [head, f"  winner(s) at the scenario's weights: {fmt(self.winners_at_scenario) or 'none'}"]
        if self.weights is None:
            lines.append(f"  no group weights make {self.model} win under this rule and setting")
        else:
            how = "exact (linear programme)" if self.method == "lp" else f"nearest point of a grid with step 1/{self.resolution}"
            alone = "wins" if self.sole else "shares first place"
            lines.append(
                f"  nearest weights where {self.model} {alone}: "
                + fmt(f"{g}={w:.4g}" for g, w in self.weights.items())
                + f"  (L1 distance {self.distance:.4g}; {how})"
            )
            lines.append(f"  winner(s) there: {fmt(self.winners_at_weights)}")
        if self.prospective is not None:
            p = self.prospective
            if p["prospective"]:
                gw = fmt(f"{g}={w:.3g}" for g, w in (p.get("group_share") or {}).items())
                lines.append(
                    f"  Condorcet (prospective LP, weak): criterion weights exist that make {self.model} a Condorcet "
                    f"winner (ties allowed)" + (f"; their share per group: {gw}" if gw else "")
                )
            elif p.get("left_out"):
                lines.append(f"  Condorcet (prospective LP): {self.model} misses a score, and the preset examines only "
                             "models with every score")
            else:
                lines.append(f"  Condorcet (prospective LP): no criterion weights make {self.model} the Condorcet winner")
        lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines)


def _lp(basis: np.ndarray, m: int, w0: np.ndarray, margin: float) -> np.ndarray | None:
    from scipy.optimize import linprog

    n_models, k = basis.shape
    others = [j for j in range(n_models) if j != m]
    # variables: w (k), d (k); minimise sum d
    c = np.concatenate([np.zeros(k), np.ones(k)])
    a_ub = []
    b_ub = []
    eye = np.eye(k)
    for g in range(k):  # w - d <= w0 ; -w - d <= -w0
        a_ub.append(np.concatenate([eye[g], -eye[g]]))
        b_ub.append(w0[g])
        a_ub.append(np.concatenate([-eye[g], -eye[g]]))
        b_ub.append(-w0[g])
    for j in others:  # (C_j - C_M) . w <= -margin
        a_ub.append(np.concatenate([basis[j] - basis[m], np.zeros(k)]))
        b_ub.append(-margin)
    a_eq = np.concatenate([np.ones(k), np.zeros(k)])[None, :]
    res = linprog(c, A_ub=np.array(a_ub), b_ub=np.array(b_ub), A_eq=a_eq, b_eq=[1.0],
                  bounds=[(0, 1)] * k + [(0, None)] * k, method="highs")
    if res.status != 0:
        return None
    w = np.clip(res.x[:k], 0, None)
    return w / w.sum()


def what_if(
    table: ScoreTable,
    column: Column,
    ties: str,
    model: str,
    scenario_weights: Mapping[str, float] | None,
    *,
    resolution: int = 60,
) -> WhatIf:
    """The group weights nearest to ``scenario_weights`` (L1, on the simplex) under which ``model`` wins."""
    m = table.model_index(model)
    if not column.uses_group_weights:
        raise UserError(f"what-if varies group weights: use setting weighted or two-step, not {column.setting!r}")
    groups = table.group_names
    if len(groups) < 2:
        raise UserError("what-if needs a table with at least two groups")
    w0 = group_weight_vector(groups, scenario_weights)
    plan = column.plan(ties)  # every ranking below: the column's plan under other group weights
    at_scenario = rank_at(table, column, ties, groups, w0, plan).winners
    answer = WhatIf(model, column, dict(zip(groups, map(float, w0))), None, None, False, "grid",
                    winners_at_scenario=tuple(at_scenario))
    basis = linear_basis(table, column, ties)
    if basis is not None:
        answer.method = "lp"
        scale = float(np.abs(basis).max()) or 1.0
        found = None
        for margin, sole in ((1e-7 * scale, True), (1e-6 * scale, True), (1e-4 * scale, True), (0.0, False)):
            w = _lp(basis, m, w0, margin)
            if w is None:
                continue
            winners = rank_at(table, column, ties, groups, w, plan).winners
            if model in winners:
                found = (w, sole and len(winners) == 1, winners)
                break
        if found is None and model in at_scenario:
            found = (w0, len(at_scenario) == 1, at_scenario)
        if found is not None:
            w, answer.sole, winners = found
            answer.weights = {g: float(x) for g, x in zip(groups, w)}
            answer.distance = float(np.abs(w - w0).sum())
            answer.winners_at_weights = tuple(winners)
    else:
        answer.resolution = resolution
        points = np.vstack([w0[None, :], simplex_grid(resolution, len(groups))])
        mask = loop_winners(table, column, ties, points)
        dist = np.abs(points - w0).sum(axis=1)
        sole = mask[:, m] & (mask.sum(axis=1) == 1)
        shared = mask[:, m]
        for candidates, is_sole in ((sole, True), (shared, False)):
            if candidates.any():
                p = int(np.where(candidates, dist, np.inf).argmin())
                answer.weights = {g: float(x) for g, x in zip(groups, points[p])}
                answer.distance = float(dist[p])
                answer.sole = is_sole
                answer.winners_at_weights = tuple(t for t, b in zip(table.models, mask[p]) if b)
                break
    if column.rule == "condorcet":
        # the LP under the column's preset (votenrank: weight-0 columns too, complete models only)
        answer.prospective = _prospective(table, model, column.params.get("preset"))
    return answer


def _prospective(table: ScoreTable, model: str, preset: str | None = None) -> dict[str, Any]:
    from ranking.prospective import prospective

    found = prospective(table, preset=preset)
    if model not in found:  # left out by the preset: it misses a score
        return {"prospective": False, "weights": None, "group_share": None, "margin": None, "left_out": True}
    res = found[model]
    margin = getattr(res, "margin", None)
    out: dict[str, Any] = {
        "prospective": bool(res.prospective),
        "weights": None,
        "group_share": None,
        "margin": None if margin is None else float(margin),
    }
    if res.prospective and res.weights:
        weights = {str(k): float(v) for k, v in res.weights.items()}
        out["weights"] = weights
        total = sum(weights.values()) or 1.0
        share: dict[str, float] = {}
        for c in table.criteria:
            if c.group is not None:
                share[c.group] = share.get(c.group, 0.0) + weights.get(c.name, 0.0) / total
        out["group_share"] = share or None
    return out
