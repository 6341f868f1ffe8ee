"""The fewest score changes that flip the pick: per rule and model, how many cells must change for it to win.

``cells_to_win(table, rule)`` gives every model the smallest number of score cells (present scores of criteria
of positive weight) whose change makes it rank first under the rule, alone or tied (the winner: 0), and which
cells, with a value for each that does it.

**What a changed cell may become**, for every rule: a value within its criterion's declared ``range`` (an open
end: the observed one), else within its **observed range** (from the column's lowest to its highest score) —
a saturated benchmark cannot be exceeded; the result's ``ranges`` say which bound each criterion has. (The
geometric mean refuses scores <= 0: its low end is at least the column's lowest positive score.)

**Candidate values, and why they are complete.**

* Order-based rules (every rule that is not ``cardinal``, with no tie tolerance ``atol``) see a column only
  through the weak order of its oriented scores (higher is better; a target column: minus the distance).
  The *anchors* of a column are its distinct scores and the two ends of its oriented range; with ``t`` changed
  cells in a column, the candidates are the anchors and ``t`` points inside each gap between consecutive
  anchors. Any in-range choice of the ``t`` values is carried by an increasing map that fixes every anchor and
  sends the distinct values inside a gap (at most ``t``) to that gap's points in order onto candidates that
  give the column the very same weak order (the unchanged scores are anchors), hence the same ranking.
* The means (arithmetic, geometric, optimality gap; any setting): a model's score depends only on its own row
  and does not decrease when one of its oriented scores rises. In any winning change, setting the candidate's
  changed cells to their column's best value (the favourable end; a target column: the target) and each
  rival's to its worst (the unfavourable end) only helps — so one candidate per cell suffices, and only rivals
  ranked above the candidate are worth changing.

**Exact where proven, a bound where not**, and the answer says which (``kind``):

``exact``
    0 for the winner; 1 for any model one change makes win; for the means in the basic setting with complete
    scores, the closed form below; otherwise ``k`` found after every change of fewer cells was tried over the
    complete candidates (:data:`EXHAUSTIVE_BUDGET` re-rankings per rule) without a win.
``at most`` (shown ``≤ k``)
    a change of ``k`` cells that wins (verified by re-ranking), found by a beam search, not proven minimal.
``more than K``
    every change of up to ``K = max_cells`` cells was tried over the complete candidates: none wins.
``not found within K``
    the search found none, but was not exhaustive: a win with ``K`` or fewer changes may exist.
``not searched (…)`` / ``unranked``
    the beam search runs for the models in the top :data:`SEARCH_MODELS` ranks and at most
    :data:`SEARCH_BUDGET` re-rankings per rule.

The closed form for the means (basic setting, no missing score among the used criteria, no target column):
scores are sums of per-cell contributions ``u_ij = w_j h(x_ij)`` (``h`` increasing in the oriented score: the
identity, ``log``, ``min(x/scale, γ)``). By the exchange above, for a fixed number ``a`` of the candidate's own
cells the best choice is the ``a`` largest gains (up to the column's best value) ``G_a``; each rival ``r`` then
independently needs the fewest of its own cells whose losses (down to the column's worst value) cover its
deficit ``T_r − T_c − G_a`` — the largest losses first. The answer is ``min_a (a + Σ_r q_r(a))``.

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

from ranking.floor.errors import UserError
from ranking.table import ScoreTable

#: Re-rankings one rule's exhaustive search may spend (a level of changed cells is tried in full or not at all).
EXHAUSTIVE_BUDGET = 20_000
#: Beam width of the search beyond the exhaustive levels.
BEAM = 8
#: The beam search runs for the models in the top ranks only, against rivals ranked above.
SEARCH_MODELS = 10
#: Re-rankings one rule's beam search may spend (beyond it, the remaining models are "not searched").
SEARCH_BUDGET = 4000


@dataclass(frozen=True)
class CellsToWin:
    """Per model: the fewest cells to win (None: none found), whether exact or a bound, and which cells."""

    rule: str
    models: tuple[str, ...]
    count: list[int | None]
    kind: list[str]  # exact | at most | more than K | not found within K | not searched (…) | unranked
    cells: list[list[tuple[str, str]]]  # (model, criterion) per changed cell
    scope: str  # what a changed cell may become
    ranks: tuple[float, ...] = ()  # the point ranks (the flip sentence names the best-ranked cheapest model)
    new_values: list[list[float]] | None = None  # per model, a value for each changed cell that makes it win
    #: per criterion: (low, high, "declared" | "observed" | "declared low, observed high" | …) a changed score stays in
    ranges: tuple[tuple[float, float, str], ...] = ()

    def describe(self, i: int) -> str:
        """``1 (B on RTE)`` or ``≤ 2 (…)`` style text for model ``i``."""
        if self.count[i] is None:
            return self.kind[i]
        cells = ", ".join(f"{m} on {c}" for m, c in self.cells[i])
        prefix = "≤ " if self.kind[i] == "at most" else ""
        return f"{prefix}{self.count[i]}" + (f" ({cells})" if cells else "")

    def flip_sentence(self) -> str:
        """How few changes make another model the pick, in words (the cheapest non-winner)."""
        best = None
        rank = self.ranks or (0.0,) * len(self.count)
        for i, k in enumerate(self.count):
            if k is not None and k > 0 and (best is None or (k, rank[i]) < (self.count[best], rank[best])):
                best = i
        if best is None:
            if all(k == 0 for k in self.count):
                return "every model is already a pick (all tie)"
            proven = [k for k in self.kind if k.startswith("more than")]
            open_ = [k for k in self.kind if k.startswith(("not found", "not searched"))]
            if proven and not open_:
                return f"no change of {proven[0][len('more than '):]} or fewer scores makes another model the pick"
            if open_:
                return f"no change found that makes another model the pick ({open_[0]}; the search is not exhaustive)"
            return "no other model is ranked"
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


SCOPE = ("a changed score stays within its criterion's declared range, else its observed range (lowest to "
         "highest score), for every rule")


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


def range_sources(table: ScoreTable) -> list[str]:
    """Per criterion, where the bounds of a changed score come from: ``declared``, ``observed``, or per end.

    >>> from ranking.table import Criterion
    >>> range_sources(ScoreTable(("A",), (Criterion("a", range=(0.0, 1.0)), Criterion("b"),
    ...                                   Criterion("c", range=(0.0, None))), np.array([[0.5, 2.0, 3.0]])))
    ['declared', 'observed', 'declared low, observed high']
    """
    out = []
    for c in table.criteria:
        ends = ("observed", "observed") if c.range is None else tuple(
            "observed" if e is None else "declared" for e in c.range)
        out.append(ends[0] if ends[0] == ends[1] else f"{ends[0]} low, {ends[1]} high")
    return out


# ---------------------------------------------------------------------- the problem one rule poses
class _Ranker:
    """Re-ranks a changed table (None where the rule refuses it), counting the calls."""

    def __init__(self, table: ScoreTable, rule: str, plan: Any, score: Callable[[ScoreTable], Any] | None = None):
        self.table, self.rule, self.plan = table, rule, plan
        self.score = score
        self.calls = 0

    def __call__(self, values: np.ndarray) -> Any:
        self.calls += 1
        changed = self.table.with_values(values)
        try:
            return self.score(changed) if self.score is not None else self.plan.run_rule(changed, self.rule)
        except UserError:
            return None


@dataclass
class _Problem:
    """What is fixed for one rule on one table: the base ranking, the cells that may change, their bounds."""

    table: ScoreTable
    rule: str
    ranker: _Ranker
    base: Any  # the RuleResult of the unchanged table
    cardinal: bool  # a mean: one candidate per cell (own: best, rival: worst)
    order_complete: bool  # the rule sees only each column's order: the order candidates are complete
    cells: list[tuple[int, int]]  # the cells that may change: present scores of criteria of positive weight
    low: np.ndarray
    high: np.ndarray
    best: np.ndarray  # per criterion, the value a changed score is best at (within the bounds)
    worst: np.ndarray
    sources: list[str]  # per criterion, where its bounds come from (:func:`range_sources`)

    @property
    def values(self) -> np.ndarray:
        return self.table.values

    def wins(self, res: Any, i: int) -> bool:
        return res is not None and res.ranks[i] == 1

    def named(self, pairs: list[tuple[int, int]]) -> list[tuple[str, str]]:
        return [(self.table.models[a], self.table.names[j]) for a, j in pairs]

    def changed(self, moves: list[tuple[int, int, float]]) -> np.ndarray:
        trial = np.array(self.values, copy=True)
        for a, j, v in moves:
            trial[a, j] = v
        return trial

    def scope(self) -> str:
        used = sorted({j for _, j in self.cells})
        parts = [f"{self.table.names[j]} [{self.low[j]:g}, {self.high[j]:g}] {self.sources[j]}" for j in used]
        return "a changed score stays within " + "; ".join(parts)


def _problem(table: ScoreTable, rule: str, plan: Any, score: Callable[[ScoreTable], Any] | None) -> _Problem:
    from ranking.rules import get_rule

    spec = get_rule(rule)
    ranker = _Ranker(table, rule, plan, score)
    base = score(table) if score is not None else plan.run_rule(table, rule)  # (the rule's own error, if any)
    low, high, best, worst = value_bounds(table)
    sources = range_sources(table)
    if rule == "geometric_mean":  # the rule refuses scores <= 0: the low end is the lowest positive score
        positive = np.where(table.values > 0, table.values, np.inf)
        floor = positive.min(axis=0)
        lifted = np.where((low <= 0) & np.isfinite(floor), floor, low)
        sources = [f"{src} (low: the lowest positive score)" if b != a else src
                   for src, a, b in zip(sources, low, lifted)]
        best = np.where(best == low, lifted, best)
        worst = np.where(worst == low, lifted, worst)
        low = lifted
    used = np.flatnonzero(table.weights > 0)
    cells = [(a, int(j)) for a in range(table.n_models) for j in used if not np.isnan(table.values[a, j])]
    atol = float((base.params or {}).get("atol", 0.0) or 0.0)
    return _Problem(table, rule, ranker, base, spec.cardinal, not spec.cardinal and atol == 0.0, cells,
                    low, high, best, worst, sources)


@dataclass
class _Answers:
    """The per-model answers as they are settled: count, kind, cells, values; ``proven``: the number of changed
    cells up to which every change was tried without a win (-1: none)."""

    count: list[int | None]
    kind: list[str]  # "" while open
    cells: list[list[tuple[str, str]]]
    new_values: list[list[float]]
    proven: list[int]

    @classmethod
    def start(cls, problem: _Problem) -> _Answers:
        n = problem.table.n_models
        out = cls([None] * n, [""] * n, [[] for _ in range(n)], [[] for _ in range(n)], [0] * n)
        for i, r in enumerate(problem.base.ranks):
            if math.isnan(r):
                out.kind[i] = "unranked"
            elif r == 1:
                out.count[i], out.kind[i] = 0, "exact"
        return out

    def open(self) -> list[int]:
        return [i for i, k in enumerate(self.kind) if not k]

    def settle(self, problem: _Problem, i: int, moves: list[tuple[int, int, float]], kind: str) -> None:
        self.count[i], self.kind[i] = len(moves), kind
        self.cells[i] = problem.named([(a, j) for a, j, _ in moves])
        self.new_values[i] = [float(v) for _, _, v in moves]


# ---------------------------------------------------------------------- step 1: the closed form for the means
def _contributions(problem: _Problem, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray,
                                                                         np.ndarray] | None:
    """(per-cell contributions, each column's best and worst contribution within its bounds) of a mean rule, or
    None where the closed form does not apply (a missing score, a target column, a score <= 0 for the log)."""
    table, rule = problem.table, problem.rule
    used = table.weights > 0
    x = table.values[:, used]
    if np.isnan(x).any() or any(c.direction == "target" for c, u in zip(table.criteria, used) if u):
        return None  # (a closest-to-a-target column's contribution is not monotone in the score)
    w = table.weights[used]
    signs = table.signs[used]
    ends = np.vstack([x, problem.best[used], problem.worst[used]])
    if rule == "arithmetic_mean":
        h = ends * signs
    elif rule == "geometric_mean":
        if (ends <= 0).any():
            return None
        h = np.log(ends) * signs
    else:
        scale = params.get("scale")
        gamma = float(params.get("gamma", 1.0))
        if scale is None:
            scale = 100.0 if np.nanmax(x) > 1 else 1.0
        h = np.minimum(ends / float(scale), gamma)
    u = h * w
    return u[:-2], u[-2], u[-1]


def _closed_form_mean(problem: _Problem, c: int, found: tuple[np.ndarray, np.ndarray, np.ndarray]
                      ) -> tuple[int, list[tuple[int, int]]] | None:
    """The fewest cells (and which) for model ``c`` under a mean (module docstring), None if none suffices."""
    u, best, worst = found
    cols = np.flatnonzero(problem.table.weights > 0)
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


def _means_in_closed_form(problem: _Problem, answers: _Answers, setting: str, has_score: bool) -> None:
    if not problem.cardinal or setting != "basic" or has_score:
        return
    found = _contributions(problem, {**(problem.base.params or {})})
    if found is None:
        return
    for i in answers.open():
        answer = _closed_form_mean(problem, i, found)
        if answer is None:
            continue  # no change wins: left to the exhaustive search, which proves it where it can
        k, pairs = answer
        moves = [(a, j, problem.best[j] if a == i else problem.worst[j]) for a, j in pairs]
        if problem.wins(problem.ranker(problem.changed(moves)), i):  # a float-borderline answer is searched
            answers.settle(problem, i, moves, "exact")


# ---------------------------------------------------------------------- step 2: every change, level by level
def order_candidates(problem: _Problem, j: int, t: int) -> np.ndarray:
    """The values a changed score of criterion ``j`` may take when ``t`` scores of the column change (order-based
    rules): the anchors (the column's scores and the ends of its bounds) and ``t`` points inside each gap between
    consecutive anchors (in oriented order) — complete, see the module docstring."""
    c = problem.table.criteria[j]
    col = problem.values[:, j]
    present = col[~np.isnan(col)]
    anchors: dict[float, float] = {}
    for x in (*present.tolist(), float(problem.best[j]), float(problem.worst[j])):
        anchors.setdefault(float(c.orient(np.array([x]))[0]), x)
    o = np.array(sorted(anchors))
    out = [anchors[v] for v in o]
    for lo, hi in zip(o[:-1], o[1:]):
        for q in range(1, t + 1):
            out.append(_unorient(c, lo + (hi - lo) * q / (t + 1), problem.low[j], problem.high[j]))
    return np.array(out)


def _unorient(c: Any, o: float, low: float, high: float) -> float:
    """A score of criterion ``c`` whose oriented value is ``o`` (a target column: on the side within bounds)."""
    if c.direction != "target":
        return float(o * c.sign)
    d = -o
    return float(c.target + d if c.target + d <= high else c.target - d)


def _changes(problem: _Problem, subset: tuple[tuple[int, int], ...], candidates: Callable[[int, int], Any]
             ) -> list[list[float]]:
    """Per cell of ``subset``, the values to try (the cell's own score left out: no change)."""
    per_col: dict[int, int] = {}
    for _, j in subset:
        per_col[j] = per_col.get(j, 0) + 1
    return [[v for v in candidates(j, per_col[j]) if v != problem.values[a, j]] for a, j in subset]


def _exhaustive_orders(problem: _Problem, answers: _Answers, max_cells: int) -> None:
    """Order-based rules: every change of 1, 2, … cells over the complete candidates, one re-ranking answering
    for every open model, while a whole level fits in :data:`EXHAUSTIVE_BUDGET`."""
    import itertools

    cache: dict[tuple[int, int], np.ndarray] = {}

    def candidates(j: int, t: int) -> np.ndarray:
        if (j, t) not in cache:
            cache[(j, t)] = order_candidates(problem, j, t)
        return cache[(j, t)]

    spent = 0
    for k in range(1, max_cells + 1):
        todo = answers.open()
        level = _level(problem, k, candidates, EXHAUSTIVE_BUDGET - spent) if todo else None
        if level is None:
            return  # every model settled, or this level does not fit: what is proven stays at k - 1
        spent += sum(math.prod(len(o) for o in options) for _, options in level)
        for subset, options in level:
            for vals in itertools.product(*options):
                moves = [(a, j, v) for (a, j), v in zip(subset, vals)]
                res = problem.ranker(problem.changed(moves))
                for i in todo:
                    if not answers.kind[i] and problem.wins(res, i):
                        answers.settle(problem, i, moves, "exact" if answers.proven[i] >= k - 1 else "at most")
        if problem.order_complete:  # (with a tie tolerance the candidates are not complete: nothing is proven)
            for i in todo:
                answers.proven[i] = k


def _level(problem: _Problem, k: int, candidates: Callable[[int, int], Any], budget: int
           ) -> list[tuple[tuple[tuple[int, int], ...], list[list[float]]]] | None:
    """Every set of ``k`` cells with the values each may take, or None when trying them all exceeds ``budget``."""
    import itertools

    if math.comb(len(problem.cells), k) > budget:
        return None
    level = []
    size = 0
    for subset in itertools.combinations(problem.cells, k):
        options = _changes(problem, subset, candidates)
        size += math.prod(len(o) for o in options)
        if size > budget:
            return None
        level.append((subset, options))
    return level


def _exhaustive_means(problem: _Problem, answers: _Answers, max_cells: int) -> None:
    """The means: per open model, every set of 1, 2, … useful cells (its own below the best; those of rivals
    ranked above it, above the worst), each at its one candidate, while a level fits in the budget."""
    import itertools

    spent = 0
    ranks = problem.base.ranks
    useful: dict[int, list[tuple[int, int, float]]] = {}
    for i in answers.open():
        useful[i] = [(a, j, problem.best[j] if a == i else problem.worst[j]) for a, j in problem.cells
                     if (a == i and problem.values[a, j] != problem.best[j])
                     or (a != i and ranks[a] < ranks[i] and problem.values[a, j] != problem.worst[j])]
    live = set(useful)
    for k in range(1, max_cells + 1):
        for i in sorted(live):
            if answers.kind[i]:
                live.discard(i)
                continue
            size = math.comb(len(useful[i]), k)
            if size > EXHAUSTIVE_BUDGET - spent:
                live.discard(i)
                continue
            spent += size
            for moves in itertools.combinations(useful[i], k):
                if problem.wins(problem.ranker(problem.changed(list(moves))), i):
                    answers.settle(problem, i, list(moves), "exact")
                    break
            else:
                answers.proven[i] = k


# ---------------------------------------------------------------------- step 3: a beam search for bounds
def _moves_for(problem: _Problem, i: int, rivals: list[int]) -> list[tuple[int, int, float]]:
    """The changes the beam search combines: the model's cells to their best value; a rival's to its worst and,
    for an order-based rule, to a tie with the model or just below it."""
    values = problem.values
    moves: list[tuple[int, int, float]] = []
    for j in sorted({j for _, j in problem.cells}):
        if not np.isnan(values[i, j]) and values[i, j] != problem.best[j]:
            moves.append((i, j, float(problem.best[j])))
        targets = _rival_targets(problem, i, j)
        for r in rivals:
            if not np.isnan(values[r, j]):
                moves += [(r, j, v) for v in targets if v != values[r, j]]
    return moves


def _rival_targets(problem: _Problem, i: int, j: int) -> list[float]:
    """Where the beam search moves a rival's score on criterion ``j``: its worst value; for an order-based rule
    also model ``i``'s score (a tie) and the candidate just below it."""
    targets = [float(problem.worst[j])]
    mine = problem.values[i, j]
    if problem.cardinal or np.isnan(mine):
        return targets
    c = problem.table.criteria[j]
    cand = order_candidates(problem, j, 1)
    oriented = c.orient(cand)
    below = oriented < float(c.orient(np.array([mine]))[0])
    targets.append(float(mine))
    if below.any():
        targets.append(float(cand[below][np.argmax(oriented[below])]))
    return list(dict.fromkeys(targets))


def _beam_search(problem: _Problem, answers: _Answers, max_cells: int) -> None:
    """Combine the moves of :func:`_moves_for`, keeping the :data:`BEAM` best sets per depth; each win verified."""
    ranks = problem.base.ranks
    by_rank = sorted((float(ranks[i]), i) for i in range(len(ranks)) if not math.isnan(ranks[i]))
    searched = {i for _, i in by_rank[:SEARCH_MODELS]}
    used = np.array(sorted({j for _, j in problem.cells}), dtype=int)
    start = problem.ranker.calls
    for i in answers.open():
        if i not in searched:
            answers.kind[i] = f"not searched (ranked below the top {SEARCH_MODELS})"
            continue
        if problem.ranker.calls - start > SEARCH_BUDGET:
            answers.kind[i] = f"not searched (the search's {SEARCH_BUDGET} re-rankings are spent)"
            continue
        rivals = [r for rank_r, r in by_rank if r != i and rank_r <= ranks[i]][:SEARCH_MODELS]
        moves = _moves_for(problem, i, rivals)
        beam: list[tuple[tuple[float, ...], list[int]]] = [((0.0, 0.0, 0.0), [])]
        for _ in range(max_cells):  # sets of 1, 2, … moves (those within the proven sizes cannot win)
            scored, won = _one_depth(problem, i, rivals, moves, beam, used, start)
            if won is not None:
                chosen = [moves[k] for k in won]
                answers.settle(problem, i, chosen, "exact" if answers.proven[i] >= len(chosen) - 1 else "at most")
                break
            scored.sort(key=lambda s: s[0])
            beam = scored[:BEAM]
            if not beam:
                break


def _one_depth(problem: _Problem, i: int, rivals: list[int], moves: list[tuple[int, int, float]],
               beam: list[tuple[tuple[float, ...], list[int]]], used: np.ndarray, start: int
               ) -> tuple[list[tuple[tuple[float, ...], list[int]]], list[int] | None]:
    """Every set of the beam grown by one move: the scored sets, or the first that wins."""
    scored = []
    for _, chosen in beam:
        taken = {(moves[k][0], moves[k][1]) for k in chosen}
        for k, (a, j, _v) in enumerate(moves):
            if (a, j) in taken or (chosen and k < chosen[-1]):
                continue
            if problem.ranker.calls - start > SEARCH_BUDGET:
                return scored, None
            trial = problem.changed([moves[kk] for kk in [*chosen, k]])
            res = problem.ranker(trial)
            if res is None:
                continue
            if res.ranks[i] == 1:
                return scored, [*chosen, k]
            others = np.delete(res.scores, i)
            gap = float(np.nanmax(others) - res.scores[i]) if others.size else 0.0
            # a coarse rule (Copeland) often does not move on one change: how far the model climbs in the
            # criteria's orders against its rivals breaks the ties between candidate sets
            scored.append(((float(res.ranks[i]), gap, -_climb(trial, problem.table.signs, used, i, rivals)),
                           [*chosen, k]))
    return scored, None


def _climb(values: np.ndarray, signs: np.ndarray, used: np.ndarray, i: int, rivals: list[int]) -> float:
    """Criteria (of ``used``) on which model ``i`` is strictly above each rival, minus those below, summed."""
    x = values[:, used] * signs[used]
    mine = x[i]
    theirs = x[rivals]
    return float(np.sum(mine > theirs) - np.sum(mine < theirs))


# ---------------------------------------------------------------------- the steps together
def cells_to_win(table: ScoreTable, rule: str, *, setting: str = "basic", max_cells: int = 3,
                 rank_kwargs: Mapping[str, Any] | None = None,
                 score: Callable[[ScoreTable], Any] | None = None, plan: Any = None) -> CellsToWin:
    """:class:`CellsToWin` of ``rule`` for every model of ``table`` (see the module docstring).

    The rule ranks under ``plan`` (a :class:`ranking.plan.RankPlan`, ``table`` prepared by it), else under the
    plan of ``setting`` and ``rank_kwargs`` (arguments of :func:`ranking.rank`). ``score`` (a table → its
    :class:`~ranking.result.RuleResult`, e.g. a scenario's column) replaces the plan; the closed form for the
    means then does not apply (they are searched).
    """
    from ranking.plan import RankPlan

    if plan is None:
        plan = RankPlan.build(rule, setting=setting, **dict(rank_kwargs or {}))
    problem = _problem(table, rule, plan, score)
    answers = _Answers.start(problem)
    _means_in_closed_form(problem, answers, plan.setting, score is not None)
    if problem.cardinal:
        _exhaustive_means(problem, answers, max_cells)
    else:
        _exhaustive_orders(problem, answers, max_cells)
    _beam_search(problem, answers, max_cells)
    for i in answers.open():
        answers.kind[i] = (f"more than {max_cells}" if answers.proven[i] >= max_cells
                           else f"not found within {max_cells}")
    return CellsToWin(rule, table.models, answers.count, answers.kind, answers.cells, problem.scope(),
                      tuple(problem.base.ranks.tolist()), answers.new_values,
                      tuple((float(lo), float(hi), src) for lo, hi, src in zip(problem.low, problem.high, problem.sources)))


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
