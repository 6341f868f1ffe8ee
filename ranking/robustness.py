"""The fewest score changes that flip the pick: per rule and model, how many cells must change for it to win.

``cells_to_win(table, rule)`` gives every model the smallest number of score cells (of criteria of
positive weight) whose change makes it rank first under the rule, alone or tied (the winner: 0), and
which cells. What a changed cell may become:

* order-based rules (positional, majority): **any value** — only the cell's place among its column's
  other scores matters;
* the means (arithmetic, geometric, optimality gap): **a value within its column's observed range**
  (from the column's lowest to its highest score). Unbounded, one cell always suffices for a mean
  (raise the model's own score far enough), which says nothing; the range is the honest scale.

Exact where we can prove it, a bound where we cannot, and the answer says which (``kind``):

``exact`` for the means (basic setting, no missing score among the used criteria)
    Scores are sums of per-cell contributions ``u_ij = w_j h(x_ij)`` (``h`` increasing in the oriented
    score: the identity, ``log``, ``min(x/scale, γ)``). A change to the candidate ``c``'s own cell moves
    only ``c``'s score, a change to a rival's cell only that rival's, so any solution can be replaced,
    cell for cell, by setting ``c``'s changed cells to their column's best value and each rival's to
    its column's worst. For a fixed number ``a`` of ``c``'s own cells the best choice is the ``a``
    largest gains ``G_a``; each rival ``r`` then independently needs the fewest of its own cells whose
    losses cover its deficit ``T_r − T_c − G_a`` — the largest losses first (a prefix of the sorted
    losses reaches any sum with the fewest items). The answer is ``min_a (a + Σ_r q_r(a))``.

``exact`` for 0 and 1 (every rule)
    The winner needs 0. For 1 cell, every single-cell change is tried (order-based rules: each cell in
    every distinct place of its column, ``2n+1`` places; the means: each cell at its column's best or
    worst); a non-winner that wins after one of them needs exactly 1.

``exact`` for 2 when no single change wins and the search finds 2 (the 1-cell check above is complete).

``at most`` otherwise: a beam search over changes to the extremes (the candidate's cells to the column's
best, a rival ranked above it to the column's worst or just below the candidate), each found set verified
by re-ranking; it runs for the models in the top :data:`SEARCH_MODELS` ranks and at most
:data:`SEARCH_BUDGET` re-rankings per rule (the others: ``not searched``, with why).
``more than K``: nothing found with up to ``max_cells`` changes (the count is then None).

>>> from ranking.rules import worked_example
>>> r = cells_to_win(worked_example(), "borda")
>>> [(m, r.count[i], r.kind[i]) for i, m in enumerate(r.models)]
[('A', 1, 'exact'), ('B', 0, 'exact'), ('C', 1, 'exact'), ('D', 1, 'exact')]
>>> r.flip_sentence()
'the pick changes if 1 score changes: A on c2 (then C wins)'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ranking.table import ScoreTable

#: Single-cell changes tried at most per rule for the exact 1-cell check (cells × places).
SINGLE_BUDGET = 20_000
#: Beam width of the search beyond one cell.
BEAM = 8
#: The search beyond the exact methods runs for the models in the top ranks only, against rivals ranked above.
SEARCH_MODELS = 10
#: Re-rankings one rule's search may spend (beyond it, the remaining models are "not searched").
SEARCH_BUDGET = 4000


@dataclass(frozen=True)
class CellsToWin:
    """Per model: the fewest cells to win (None: more than ``max_cells``), whether exact, and which cells."""

    rule: str
    models: tuple[str, ...]
    count: list[int | None]
    kind: list[str]  # exact | at most | more than K | unranked
    cells: list[list[tuple[str, str]]]  # (model, criterion) per changed cell
    scope: str  # what a changed cell may become
    ranks: tuple[float, ...] = ()  # the point ranks (the flip sentence names the best-ranked cheapest model)
    new_values: list[list[float]] | None = None  # per model, a value for each changed cell that makes it win

    def describe(self, i: int) -> str:
        """``exact: 1 (B on RTE)`` style text for model ``i``."""
        if self.count[i] is None:
            return self.kind[i]
        cells = ", ".join(f"{m} on {c}" for m, c in self.cells[i])
        prefix = "at most " if self.kind[i] == "at most" else ""
        return f"{prefix}{self.count[i]}" + (f" ({cells})" if cells else "")

    def flip_sentence(self) -> str:
        """How few changes make another model the pick, in words (the cheapest non-winner)."""
        best = None
        rank = self.ranks or (0.0,) * len(self.count)
        for i, k in enumerate(self.count):
            if k is not None and k > 0 and (best is None or (k, rank[i]) < (self.count[best], rank[best])):
                best = i
        if best is None:
            if any(k == 0 for k in self.count) and len([k for k in self.count if k == 0]) == len(self.count):
                return "every model is already a pick (all tie)"
            limits = {k for k in self.kind if k.startswith("more than")}
            return f"the pick holds against up to {max(limits) if limits else 'any'} changed scores searched"
        k = self.count[best]
        cells = ", ".join(f"{m} on {c}" for m, c in self.cells[best])
        bound = "at most " if self.kind[best] == "at most" else ""
        verb = "score changes" if k == 1 else "scores change"
        return f"the pick changes if {bound}{k} {verb}: {cells} (then {self.models[best]} wins)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "cells_to_win": {m: k for m, k in zip(self.models, self.count)},
            "kind": dict(zip(self.models, self.kind)),
            "cells": {m: [{"model": a, "criterion": c, "value": v} for (a, c), v in zip(cs, vs)]
                      for m, cs, vs in zip(self.models, self.cells, self.new_values or [[]] * len(self.models))},
            "flip": self.flip_sentence(),
        }


SCOPE = ("order-based rules: a changed score may take any value; means: any value within its criterion's "
         "declared range, else its observed range")


def value_bounds(table: ScoreTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per criterion (low, high, the best value, the worst value) a changed score may take: the declared
    ``range`` where the criterion has one (an open end: the observed one), else the observed range; the best
    of a closest-to-a-target criterion is its target (within the bounds), its worst the bound farther from it.

    >>> from ranking.table import Criterion
    >>> t = ScoreTable(("A", "B"), (Criterion("acc", range=(0.0, 1.0)), Criterion("kwh", direction="lower"),
    ...                             Criterion("bias", direction="target", target=0.0)),
    ...                np.array([[0.5, 2.0, -0.2], [0.6, 3.0, 0.5]]))
    >>> [b.tolist() for b in value_bounds(t)]
    [[0.0, 2.0, -0.2], [1.0, 3.0, 0.5], [1.0, 2.0, 0.0], [0.0, 3.0, 0.5]]
    """
    values = table.values
    low = np.nanmin(values, axis=0)
    high = np.nanmax(values, axis=0)
    for j, c in enumerate(table.criteria):
        if c.range is not None:
            low[j] = low[j] if c.range[0] is None else c.range[0]
            high[j] = high[j] if c.range[1] is None else c.range[1]
    best = np.where(table.signs > 0, high, low)
    worst = np.where(table.signs > 0, low, high)
    for j, c in enumerate(table.criteria):
        if c.direction == "target":
            best[j] = min(max(c.target, low[j]), high[j])
            worst[j] = low[j] if abs(low[j] - c.target) >= abs(high[j] - c.target) else high[j]
    return low, high, best, worst


# ---------------------------------------------------------------------- exact for the means
def _contributions(table: ScoreTable, rule: str, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray] | None:
    """(per-cell contributions, the column's best and worst contribution) of a mean rule, or None if unknown."""
    used = table.weights > 0
    x = table.values[:, used]
    if np.isnan(x).any() or any(c.direction == "target" for c, u in zip(table.criteria, used) if u):
        return None  # (a closest-to-a-target column's contribution is not monotone: the search handles it)
    w = table.weights[used]
    signs = table.signs[used]
    if rule == "arithmetic_mean":
        h = x * signs
    elif rule == "geometric_mean":
        if (x <= 0).any():
            return None
        h = np.log(x) * signs
    else:
        scale = params.get("scale")
        gamma = float(params.get("gamma", 1.0))
        if scale is None:
            scale = 100.0 if np.nanmax(x) > 1 else 1.0
        h = np.minimum(x / float(scale), gamma)
    u = h * w
    return u, u.max(axis=0), u.min(axis=0)


def _exact_mean(table: ScoreTable, rule: str, c: int, params: Mapping[str, Any]
                ) -> tuple[int, list[tuple[int, int]]] | None:
    found = _contributions(table, rule, params)
    if found is None:
        return None
    u, best, worst = found
    cols = np.flatnonzero(table.weights > 0)
    total = u.sum(axis=1)
    gains = best - u[c]
    own = np.argsort(-gains, kind="stable")
    prefix = np.concatenate([[0.0], np.cumsum(gains[own])])
    scale = max(float(np.abs(u).max()), 1.0)
    eps = 1e-12 * scale * u.shape[1]
    answer: tuple[int, list[tuple[int, int]]] | None = None
    for a in range(u.shape[1] + 1):
        if a > 0 and gains[own[a - 1]] <= 0:
            break
        count, cells = a, [(c, int(cols[j])) for j in own[:a]]
        for r in range(u.shape[0]):
            if r == c:
                continue
            deficit = total[r] - total[c] - prefix[a]
            if deficit <= eps:
                continue
            losses = u[r] - worst
            order = np.argsort(-losses, kind="stable")
            reach = np.cumsum(losses[order])
            q = int(np.searchsorted(reach, deficit - eps, side="left")) + 1
            if q > u.shape[1] or reach[q - 1] < deficit - eps:
                count = math.inf
                break
            count += q
            cells += [(r, int(cols[j])) for j in order[:q]]
        if count < (answer[0] if answer else math.inf):
            answer = (int(count), cells)
    return answer


# ---------------------------------------------------------------------- the search
def _places(col: np.ndarray) -> np.ndarray:
    """Every distinct place a new value can take in a column (order only): each score, each gap, both ends."""
    v = np.unique(col[~np.isnan(col)])
    span = float(v[-1] - v[0]) if v.size > 1 else 1.0
    span = span if span > 0 else 1.0
    mids = (v[1:] + v[:-1]) / 2
    return np.concatenate([[v[0] - span], v, mids, [v[-1] + span]])


class _Ranker:
    def __init__(self, table: ScoreTable, rule: str, plan: Any, score: Callable[[ScoreTable], Any] | None = None):
        self.table, self.rule, self.plan = table, rule, plan
        self.score = score
        self.calls = 0

    def __call__(self, values: np.ndarray) -> Any:
        self.calls += 1
        if self.score is not None:
            return self.score(self.table.with_values(values))
        return self.plan.run_rule(self.table.with_values(values), self.rule)


def cells_to_win(table: ScoreTable, rule: str, *, setting: str = "basic", max_cells: int = 3,
                 rank_kwargs: Mapping[str, Any] | None = None,
                 score: Callable[[ScoreTable], Any] | None = None, plan: Any = None) -> CellsToWin:
    """:class:`CellsToWin` of ``rule`` for every model of ``table`` (see the module docstring).

    The rule ranks under ``plan`` (a :class:`ranking.plan.RankPlan`, ``table`` prepared by it), else under the
    plan of ``setting`` and ``rank_kwargs`` (arguments of :func:`ranking.rank`). ``score`` (a table → its
    :class:`~ranking.result.RuleResult`, e.g. a scenario's column) replaces the plan; the exact method for
    the means then does not apply (a bound is searched).
    """
    from ranking.plan import RankPlan
    from ranking.rules import get_rule

    spec = get_rule(rule)
    if plan is None:
        plan = RankPlan.build(rule, setting=setting, **dict(rank_kwargs or {}))
    setting = plan.setting
    ranker = _Ranker(table, rule, plan, score)
    base = ranker(table.values)
    n, m = table.shape
    used = np.flatnonzero(table.weights > 0)
    values = table.values
    is_mean = spec.kind == "mean"
    count: list[int | None] = [None] * n
    kind = [f"more than {max_cells}"] * n
    cells: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    new_values: list[list[float]] = [[] for _ in range(n)]
    low, high, oriented_best, oriented_worst = value_bounds(table)

    def named(pairs: list[tuple[int, int]]) -> list[tuple[str, str]]:
        return [(table.models[i], table.names[j]) for i, j in pairs]

    for i in range(n):
        if math.isnan(base.ranks[i]):
            kind[i] = "unranked"
        elif base.ranks[i] == 1:
            count[i], kind[i] = 0, "exact"

    # exact for the means (basic setting, complete scores)
    if is_mean and setting == "basic" and score is None:
        params = {**base.params}
        for i in range(n):
            if count[i] is not None or kind[i] == "unranked":
                continue
            found = _exact_mean(table, rule, i, params)
            if found is None:
                break
            k, pairs = found
            trial = np.array(values, copy=True)
            for a, j in pairs:
                trial[a, j] = oriented_best[j] if a == i else oriented_worst[j]
            if ranker(trial).ranks[i] == 1:  # verified (a float-borderline answer is left to the search)
                count[i], kind[i], cells[i] = k, "exact", named(pairs)
                new_values[i] = [float(trial[a, j]) for a, j in pairs]

    todo = [i for i in range(n) if count[i] is None and kind[i] != "unranked"]
    if not todo:
        return CellsToWin(rule, table.models, count, kind, cells, SCOPE, tuple(base.ranks.tolist()), new_values)

    # exact 1-cell check: every single change, once for all models
    singles_complete = False
    places = {j: (np.array([oriented_best[j], oriented_worst[j]]) if is_mean else _places(values[:, j])) for j in used}
    if n * sum(p.size for p in places.values()) <= SINGLE_BUDGET:
        singles_complete = not is_mean  # every place of an order-based column; a mean's extremes only
        for a in range(n):
            for j in used:
                for v in places[j]:
                    if values[a, j] == v:
                        continue
                    trial = np.array(values, copy=True)
                    trial[a, j] = v
                    ranks = ranker(trial).ranks
                    for i in todo:
                        if count[i] is None and ranks[i] == 1:
                            count[i], kind[i], cells[i] = 1, "exact", named([(a, j)])
                            new_values[i] = [float(v)]
        todo = [i for i in todo if count[i] is None]

    # beam search over moves to the extremes, for the models ranked near the top
    span = np.where(high > low, high - low, 1.0)
    by_rank = sorted((float(base.ranks[i]), i) for i in range(n) if not math.isnan(base.ranks[i]))
    searched = {i for _, i in by_rank[:SEARCH_MODELS]}
    for i in todo:
        if i not in searched:
            kind[i] = f"not searched (ranked below the top {SEARCH_MODELS})"
            continue
        if ranker.calls > SEARCH_BUDGET:
            kind[i] = f"not searched (the search's {SEARCH_BUDGET} re-rankings are spent)"
            continue
        rivals = [r for rank_r, r in by_rank if r != i and rank_r <= base.ranks[i]][:SEARCH_MODELS]
        moves: list[tuple[int, int, float]] = []
        for j in used:
            target = table.criteria[j].direction == "target"
            # beyond the extremes for order-based rules; a target column's best is its target, its worst beyond the
            # bound farther from it
            away = (1.0 if oriented_worst[j] >= table.criteria[j].target else -1.0) if target else -table.signs[j]
            moves.append((i, j, oriented_best[j] + (0 if is_mean or target else table.signs[j] * span[j])))
            for r in rivals:
                if np.isnan(values[r, j]):
                    continue
                moves.append((r, j, oriented_worst[j] + (0 if is_mean else away * span[j])))
                if not is_mean and not target and not np.isnan(values[i, j]):
                    moves.append((r, j, values[i, j] - table.signs[j] * 1e-9 * span[j]))
        beam: list[tuple[tuple[float, ...], list[int]]] = [((0.0, 0.0, 0.0), [])]
        for depth in range(1, max_cells + 1):
            scored = []
            for _, chosen in beam:
                taken = {(moves[k][0], moves[k][1]) for k in chosen}
                for k, (a, j, _v) in enumerate(moves):
                    if (a, j) in taken or (chosen and k < chosen[-1]):
                        continue
                    if ranker.calls > SEARCH_BUDGET:
                        break
                    trial = np.array(values, copy=True)
                    for kk in [*chosen, k]:
                        trial[moves[kk][0], moves[kk][1]] = moves[kk][2]
                    res = ranker(trial)
                    if res.ranks[i] == 1:
                        scored = [((-math.inf, 0.0, 0.0), [*chosen, k])]
                        break
                    others = np.delete(res.scores, i)
                    gap = float(np.nanmax(others) - res.scores[i]) if others.size else 0.0
                    # a coarse rule (Copeland) often does not move on one change: how far the model climbs in
                    # the criteria's orders against its rivals breaks the ties between candidate sets
                    scored.append(((float(res.ranks[i]), gap, -_climb(trial, table.signs, used, i, rivals)),
                                   [*chosen, k]))
                if scored and scored[0][0][0] == -math.inf:
                    break
            if scored and scored[0][0][0] == -math.inf:
                chosen = scored[0][1]
                count[i] = depth
                exact = depth == 1 or (depth == 2 and singles_complete)
                kind[i] = "exact" if exact else "at most"
                cells[i] = named([(moves[k][0], moves[k][1]) for k in chosen])
                new_values[i] = [float(moves[k][2]) for k in chosen]
                break
            scored.sort(key=lambda s: s[0])
            beam = scored[:BEAM]
            if not beam:
                break
    return CellsToWin(rule, table.models, count, kind, cells, SCOPE, tuple(base.ranks.tolist()), new_values)


def _climb(values: np.ndarray, signs: np.ndarray, used: np.ndarray, i: int, rivals: list[int]) -> float:
    """Criteria (of ``used``) on which model ``i`` is strictly above each rival, minus those below, summed."""
    x = values[:, used] * signs[used]
    mine = x[i]
    theirs = x[rivals]
    return float(np.sum(mine > theirs) - np.sum(mine < theirs))


def robustness(table: ScoreTable, results: Mapping[str, Any], *, setting: str = "basic", max_cells: int = 3,
               rank_kwargs: Mapping[str, Any] | None = None,
               rule_params: Mapping[str, Mapping[str, Any]] | None = None, plan: Any = None) -> dict[str, CellsToWin]:
    """Rule → :class:`CellsToWin` for the rules of ``results`` (rule → RuleResult) on ``table``, under ``plan``
    (a :class:`ranking.plan.RankPlan`) or the plan of ``setting``, ``rank_kwargs`` and per rule ``rule_params``."""
    if plan is None or max_cells != plan.max_cells:  # a plan's was checked once, when it was built
        from ranking.plan import check_choices

        max_cells = check_choices({"max_cells": max_cells})["max_cells"]
    return {rule: cells_to_win(table, rule, setting=setting, max_cells=max_cells, plan=plan,
                               rank_kwargs={**(rank_kwargs or {}), **((rule_params or {}).get(rule, {}))})
            for rule in results}
