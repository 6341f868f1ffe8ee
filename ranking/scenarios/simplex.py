"""The weight-simplex map: which model wins at every point of the group-weight triangle.

For three groups (performance, efficiency, fairness) every group-weight vector
on the simplex ``w ≥ 0, Σw = 1`` is a point of a triangle; the map evaluates a
weighted or two-step column on a regular grid of ``(r+1)(r+2)/2`` points
(``r`` = resolution; the corners are included) and records the winner there.

Both rank through the column's :class:`ranking.plan.RankPlan` (:meth:`Column.plan`: what
:func:`ranking.rank` ranks with the same choices), under the group weights of each point. Two ways
to compute it, which must agree:

- **loop**: call the rule once per grid point (works for every rule);
- **linear** (vectorised): for rules whose scores are linear in the weights
  (Borda, Dowdall, Plurality, the means — weighted sums of per-criterion
  points), the scores at weight ``w`` are ``C @ w`` where column ``g`` of ``C``
  is the score vector at the corner of group ``g``. Both the weighted setting
  (criterion weight own × w_g / |g|) and the two-step setting (the outer rule
  weights the groups' interim results by ``w_g``) are linear in ``w``. So the
  whole map costs ``G`` rule calls and one matrix product. The linear basis is
  verified against direct rule calls at a few probe points (ranks must agree);
  if they do not, the map falls back to the loop.

A winner code is the model's index when it wins alone, :data:`TIE` (-1) when
several models share first place and :data:`NO_WINNER` (-2) when the rule
names none (e.g. no Condorcet winner).

>>> simplex_grid(2).tolist()
[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.result import RuleResult, positions_from_scores
from ranking.rules import get_rule
from ranking.scenarios.scenario import Column
from ranking.table import ScoreTable

log = logging.getLogger(__name__)

TIE = -1
NO_WINNER = -2
REL_TOL = 1e-9


def simplex_grid(resolution: int, k: int = 3) -> np.ndarray:
    """All points ``(i_1, …, i_k) / resolution`` with non-negative integers summing to ``resolution``."""
    if resolution < 1:
        raise UserError(f"simplex resolution must be >= 1, got {resolution}")
    if k == 1:
        return np.ones((1, 1))
    rows = []
    for i in range(resolution, -1, -1):
        for rest in simplex_grid(resolution - i, k - 1) if resolution - i > 0 else [np.zeros(k - 1)]:
            rows.append(np.concatenate([[i], np.asarray(rest) * (resolution - i)]))
    return np.array(rows, dtype=float) / resolution


def group_weights_at(groups: tuple[str, ...], w: np.ndarray) -> dict[str, float]:
    return {g: float(x) for g, x in zip(groups, w)}


def rank_at(table: ScoreTable, column: Column, ties: str, groups: tuple[str, ...], w: np.ndarray,
            plan: Any = None) -> RuleResult:
    """The column's rule and setting with the group weights ``w`` (one point of the simplex): its
    :class:`ranking.plan.RankPlan` (``plan``, else :meth:`Column.plan` with ``ties``) under other group weights."""
    if plan is None:
        plan = column.plan(ties)
    return plan.run_rule(table, column.rule, group_weights=group_weights_at(groups, w))


def winners_mask_from_scores(scores: np.ndarray, rel_tol: float = REL_TOL) -> np.ndarray:
    """(points × models) bool: who is (within a relative tolerance) at the top at each point."""
    s = np.where(np.isnan(scores), -np.inf, scores)
    top = s.max(axis=1, keepdims=True)
    scale = np.maximum(np.abs(s[np.isfinite(s)]).max(initial=0.0), 1.0)
    return s >= top - rel_tol * scale


def codes_from_mask(mask: np.ndarray) -> np.ndarray:
    """Winner code per point: the index of a sole winner, TIE or NO_WINNER."""
    n = mask.sum(axis=1)
    codes = np.where(n == 1, mask.argmax(axis=1), np.where(n == 0, NO_WINNER, TIE))
    return codes.astype(int)


def loop_winners(table: ScoreTable, column: Column, ties: str, points: np.ndarray) -> np.ndarray:
    """The straightforward way: one rule call per point; (points × models) winner mask."""
    groups = table.group_names
    mask = np.zeros((len(points), table.n_models), dtype=bool)
    index = {m: i for i, m in enumerate(table.models)}
    plan = column.plan(ties)  # resolved once, applied at every point
    for p, w in enumerate(points):
        res = rank_at(table, column, ties, groups, w, plan)
        for m in res.winners:
            mask[p, index[m]] = True
    return mask


def linear_basis(table: ScoreTable, column: Column, ties: str, *, probes: int = 6, seed: int = 0) -> np.ndarray | None:
    """``C`` (models × groups) with scores(w) ∝ C @ w, or None when the rule is not (verifiably) linear.

    ``C[:, g]`` is the score vector at the corner of group ``g``. The basis is accepted only if the
    ranks it predicts equal the rule's own ranks at ``probes`` random interior points and the
    centroid.
    """
    if not get_rule(column.rule).linear_in_weights:  # a candidate only: verified below
        return None
    groups = table.group_names
    k = len(groups)
    plan = column.plan(ties)  # the corners, the probes and the loop rank through one plan
    try:
        cols = [rank_at(table, column, ties, groups, np.eye(k)[g], plan).scores for g in range(k)]
    except UserError as exc:
        log.debug("no linear basis for %s: %s", column.name, exc)
        return None
    basis = np.column_stack(cols)
    if np.isnan(basis).any():
        return None
    rng = np.random.default_rng(seed)
    points = np.vstack([np.full(k, 1.0 / k), rng.dirichlet(np.ones(k), size=probes)])
    for w in points:
        want = rank_at(table, column, ties, groups, w, plan).ranks
        pred = basis @ w
        scale = max(np.abs(pred).max(), 1.0)
        got = positions_from_scores(np.round(pred / (REL_TOL * scale)) * (REL_TOL * scale))
        if not np.array_equal(np.nan_to_num(want, nan=-1), np.nan_to_num(got, nan=-1)):
            log.info("column %s: rule %s is not linear in the group weights here; using the loop", column.name, column.rule)
            return None
    return basis


@dataclass(frozen=True)
class SimplexMap:
    """Winner at each grid point of the group-weight simplex for one column."""

    column: str
    label: str
    groups: tuple[str, ...]
    models: tuple[str, ...]
    points: np.ndarray  # (P, G) barycentric weights
    winners: np.ndarray  # (P, M) bool
    method: str  # "linear" or "loop"
    resolution: int

    @property
    def codes(self) -> np.ndarray:
        return codes_from_mask(self.winners)

    def winner_at(self, w: np.ndarray) -> tuple[str, ...]:
        """Winners at the grid point nearest to ``w``."""
        p = int(np.abs(self.points - np.asarray(w, dtype=float)).sum(axis=1).argmin())
        return tuple(m for m, b in zip(self.models, self.winners[p]) if b)

    def share(self) -> dict[str, float]:
        """Fraction of grid points each model wins alone (plus 'tie' and 'none')."""
        codes = self.codes
        out = {m: float(np.mean(codes == i)) for i, m in enumerate(self.models)}
        out["tie"] = float(np.mean(codes == TIE))
        out["none"] = float(np.mean(codes == NO_WINNER))
        return out


def simplex_map(
    table: ScoreTable, column: Column, ties: str = "default", resolution: int = 30, method: str = "auto"
) -> SimplexMap:
    """Winners over the simplex for ``column`` (weighted or two-step) on ``table``.

    ``method``: ``auto`` (linear when the rule verifiably is, else loop), ``linear`` or ``loop``.
    """
    if not column.uses_group_weights:
        raise UserError(f"column {column.name!r}: the weight simplex needs setting weighted or two-step")
    groups = table.group_names
    if len(groups) < 2:
        raise UserError(f"column {column.name!r}: the weight simplex needs at least two groups")
    points = simplex_grid(resolution, len(groups))
    basis = linear_basis(table, column, ties) if method in ("auto", "linear") else None
    if method == "linear" and basis is None:
        raise UserError(f"column {column.name!r}: rule {column.rule!r} is not linear in the group weights")
    if basis is not None:
        winners = winners_mask_from_scores(points @ basis.T)
        used = "linear"
    else:
        winners = loop_winners(table, column, ties, points)
        used = "loop"
    return SimplexMap(column.name, column.label, groups, table.models, points, winners, used, resolution)
