"""Prospective systems: can some weighting of the criteria make a model the Condorcet winner?

For model ``a`` and weights ``w`` (non-negative, summing to 1) the weighted
majority margin against a rival ``b`` is ``sum_j w_j d_abj`` with ``d_abj =
+1`` where ``a`` is strictly better than ``b`` on criterion ``j``, ``-1``
where strictly worse, ``0`` where tied or either score is missing (the pair
is skipped, as in the majority rules). The table's own weights play no part
(the weights are what is searched for), except that a criterion of weight 0
(e.g. a leaderboard's diagnostic column) stays at 0 unless ``bounds`` say
otherwise or ``zero_weight_columns=True`` (the ``votenrank`` preset: the
paper's LP searches over every column, diagnostics included).

Models missing a score: by default every model is examined and a missing
score only skips that criterion in the pairs it is part of. With
``drop_incomplete=True`` (the ``votenrank`` preset: the authors ran their LP
on the leaderboard's complete rows, pandas ``dropna()``) a model missing a
score on a criterion the LP may weight (upper bound > 0) is left out: neither
a candidate nor a rival, and absent from the result. On SuperGLUE that leaves
out "Outside Best" and "Snorkel [SuperGLUE v1.9]", and the preset finds the
paper's 10 prospective systems (12 without the drop).

- **weak** (default, the paper's Eq. 2): ``a`` is prospective iff some ``w``
  gives every margin ``>= 0``;
- **strict** (``strict=True``): every margin ``>= STRICT_MARGIN`` (1e-6 of
  the total weight), i.e. ``a`` beats every rival outright.

Optional extras: per-criterion ``bounds`` on the weights, extra linear
constraints ``A_ub @ w <= b_ub``, and an ``objective`` ``c`` whose ``c @ w``
is minimised among the admissible weights. Without an objective each model
gets its **max-margin weights**: the ``w`` maximising the smallest margin
``t`` (one LP per model with variables ``(w, t)``; ``a`` is prospective iff
``t* >= 0``, resp. ``>= STRICT_MARGIN``), i.e. the weighting under which it
wins most robustly. With an objective, the LP minimises ``c @ w`` subject to
every margin ``>= 0`` (resp. ``>= STRICT_MARGIN``).

All LPs are solved by HiGHS, as scipy's ``linprog(method="highs")`` solves
them (called directly where scipy bundles HiGHS's binding: the same model and
options, the same solution, without linprog's per-call checks, which cost more
than these small solves; :class:`_DirectHighs`). Each model's constraint
matrix is a slice of the per-criterion sign tensor from
:func:`ranking.pairwise.criterion_signs`, built in bulk for a block of models
at once (no Python loop over rivals or criteria). A model that some rival
beats on every criterion that may carry weight is settled first, without an
LP (:func:`outvoted`: no admissible weighting can make it a winner; on a
leaderboard, where a model good at one task tends to be good at all, that is
most models). Constraint generation keeps the other LPs small: a few rounds of
multiplicative weights for the whole block (:func:`hard_rivals`) guess the
rivals that bind, the LP runs on those, and any rival whose constraint the
solution violates is added and the LP re-run until none is (exact, not a
heuristic: the final LP is optimal for all rivals). Where the time goes at
1000 models × 50 criteria, and the way before beside ours:
``scripts/bench_prospective.py``.

>>> from ranking.rules import worked_example
>>> found = prospective(worked_example())
>>> {m: r.prospective for m, r in found.items()}
{'A': True, 'B': True, 'C': True, 'D': True}
>>> found["A"].margin   # all weight on c1 and/or c2, where A is best: A beats everyone 1 to 0
1.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linprog

from ranking.floor.errors import UserError
from ranking.pairwise import criterion_signs
from ranking.settings import get_preset
from ranking.table import ScoreTable

#: Smallest margin (as a fraction of the total weight 1) that counts as a strict win.
STRICT_MARGIN = 1e-6
#: Solver tolerance: a margin this far below 0 still counts as >= 0.
FEASIBILITY_TOL = 1e-7
#: Constraint-generation tolerance (HiGHS's primal feasibility tolerance).
LP_TOL = 1e-7

_BLOCK_ELEMENTS = 1_250_000  # sign tensor entries (models x rivals x criteria) handled at once: the Hedge rounds of
#: hard_rivals read a block 100 times, and about 5 MB of it (float32) stays in the cache
#: Input limit: one LP per model (~5-15 ms each with 5 criteria), so 5000 models take about a minute.
MAX_MODELS = 5000


@dataclass(frozen=True)
class ProspectiveResult:
    """Whether a model can be made the Condorcet winner, and weights that do it.

    ``margin`` is the smallest weighted margin against a rival at ``weights``
    (None when not prospective; +inf for a table with a single model).
    """

    prospective: bool
    weights: dict[str, float] | None
    margin: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"prospective": self.prospective, "weights": self.weights}


def prospective(
    table: ScoreTable,
    *,
    strict: bool = False,
    bounds: Mapping[str, tuple[float | None, float | None]] | Sequence[tuple[float | None, float | None]] | None = None,
    A_ub: Any = None,
    b_ub: Any = None,
    objective: Mapping[str, float] | Sequence[float] | None = None,
    zero_weight_columns: bool | None = None,
    drop_incomplete: bool | None = None,
    preset: str | None = None,
) -> dict[str, ProspectiveResult]:
    """For every model: is it a (weak / strict) Condorcet winner under some admissible weights?

    ``preset`` (None: ``default``) gives ``zero_weight_columns`` and
    ``drop_incomplete`` when they are None (module docstring). With
    ``drop_incomplete`` the result holds only the models examined.

    ``bounds``: criterion → ``(low, high)`` (others: ``(0, 1)``; ``(0, 0)`` if
    the table gives the criterion weight 0), or
    one pair per criterion; ``None`` in a pair means no bound on that side
    (weights stay >= 0). ``A_ub``/``b_ub``: extra constraints ``A_ub @ w <=
    b_ub``, rows as arrays in criterion order or as mappings criterion →
    coefficient. ``objective``: criterion → coefficient (or one per
    criterion), minimised.

    >>> from ranking.rules import worked_example
    >>> t = worked_example()
    >>> r = prospective(t, bounds={"c1": (0.5, None)})["D"]   # D is last on c1: at best a tie with A
    >>> r.prospective, r.margin, prospective(t, bounds={"c1": (0.5, None)}, strict=True)["D"].prospective
    (True, 0.0, False)
    >>> prospective(t, objective={"c2": -1})["B"].weights["c2"]   # B is last on c2: at most half
    0.5
    """
    if table.n_models > MAX_MODELS:
        raise UserError(
            f"prospective systems solve one linear programme per model: at most {MAX_MODELS} models, "
            f"this table has {table.n_models} (select the models to examine first)"
        )
    conv = get_preset(preset)
    zero_weight_columns = conv.prospective_zero_weight if zero_weight_columns is None else zero_weight_columns
    drop_incomplete = conv.drop_incomplete if drop_incomplete is None else drop_incomplete
    names = table.names
    m = len(names)
    lower, upper = _bounds(names, bounds, np.ones(m) if zero_weight_columns else table.weights)
    if drop_incomplete:
        table = _complete_models(table, upper > 0)
    a_extra, b_extra = _extra_constraints(names, A_ub, b_ub)
    cost = _objective(names, objective)
    _check_admissible(lower, upper, a_extra, b_extra)
    need = STRICT_MARGIN if strict else -FEASIBILITY_TOL
    x = table.oriented
    n = table.n_models
    results: dict[str, ProspectiveResult] = {}
    block = max(1, _BLOCK_ELEMENTS // max(1, n * m))
    weighable = upper > 0
    for start in range(0, n, block):
        rows = np.arange(start, min(n, start + block))
        signs = criterion_signs(x, rows)  # (block, n, m): every rival of these models at once
        beaten = outvoted(signs, rows, weighable, strict)
        for a in rows[beaten]:
            results[table.models[a]] = ProspectiveResult(False, None, None)
        signs, rows = signs[~beaten], rows[~beaten]
        hard = hard_rivals(signs, rows)
        for i, a in enumerate(rows):
            d = np.delete(signs[i], a, axis=0).astype(float)
            first = hard[i] - (hard[i] > a)  # rival indices once row a is removed
            w_margin, best = _max_min_margin(d, first, lower, upper, a_extra, b_extra)
            w = w_margin
            if best < need:
                results[table.models[a]] = ProspectiveResult(False, None, None)
                continue
            if cost is not None:
                floor = min(STRICT_MARGIN if strict else 0.0, best)
                # feasible by the max-margin step; should the solver disagree, keep those weights
                w = _min_objective(d, first, lower, upper, a_extra, b_extra, cost, floor)
                w = w if w is not None else w_margin
            margin = float((d @ w).min()) if d.shape[0] else math.inf
            results[table.models[a]] = ProspectiveResult(True, {c: float(v) for c, v in zip(names, w)}, margin)
    return {model: results[model] for model in table.models}  # (in table order: pruned models were set first)


def outvoted(signs: np.ndarray, rows: np.ndarray, weighable: np.ndarray, strict: bool) -> np.ndarray:
    """Per model of a block: is there a rival that beats it on every criterion that may carry weight (``strict``:
    that it never beats there)? Then every admissible weighting gives that rival a margin over it (``strict``: at
    least a tie), so it cannot be a (strict) Condorcet winner — settled without its linear programme, with the
    same answer (a necessary test: the models it passes still get theirs).

    >>> s = criterion_signs(np.array([[3.0, 3.0], [1.0, 2.0], [3.0, 1.0]]), np.arange(3))
    >>> outvoted(s, np.arange(3), np.array([True, True]), False).tolist()
    [False, True, False]
    >>> outvoted(s, np.arange(3), np.array([True, True]), True).tolist()
    [False, True, True]
    """
    if signs.shape[1] < 2 or not weighable.any():
        return np.zeros(len(rows), dtype=bool)
    s = signs[:, :, weighable]
    loses = (s <= 0).all(axis=2) if strict else (s < 0).all(axis=2)
    loses[np.arange(len(rows)), rows] = False  # (not against itself)
    return loses.any(axis=1)


def _complete_models(table: ScoreTable, weighable: np.ndarray) -> ScoreTable:
    """``table`` without the models missing a score on a ``weighable`` criterion.

    >>> from ranking.table import Criterion
    >>> t = ScoreTable(("A", "B", "C"), (Criterion("c"), Criterion("d", weight=0.0)),
    ...                np.array([[1.0, 2.0], [np.nan, 1.0], [2.0, np.nan]]))
    >>> _complete_models(t, np.array([True, False])).models, _complete_models(t, np.array([True, True])).models
    (('A', 'C'), ('A',))
    """
    return table.complete_rows(weighable, empty="every model misses a score on a criterion the LP may weight: "
                               "dropping incomplete models leaves none (keep them: drop_incomplete=False, "
                               "--keep-incomplete)")[0]


def hard_rivals(signs: np.ndarray, rows: np.ndarray, rounds: int = 100) -> list[np.ndarray]:
    """For each model of a block, the rivals likely to bind in its LP (a warm start, not a decision).

    Plays the zero-sum game "weights vs rival" for ``rounds`` rounds of
    multiplicative weights (Hedge) for the whole block at once: each round
    every model's adversary picks the rival with the smallest margin, and the
    weights move towards the criteria that beat it. Returns, per model, the
    rivals picked plus the ``m`` rivals with the smallest margin under the
    averaged weights (which approximate the max-margin weights).

    >>> s = criterion_signs(np.array([[3.0, 1.0], [1.0, 3.0], [2.0, 2.0]]), np.arange(3))
    >>> [h.tolist() for h in hard_rivals(s, np.arange(3))]
    [[1, 2], [0, 2], [0, 1]]
    """
    b, n, m = signs.shape
    if n < 2:
        return [np.zeros(0, dtype=int) for _ in range(b)]
    d = signs.astype(np.float32)
    own = np.zeros((b, n), dtype=bool)
    own[np.arange(b), rows] = True
    eta = np.float32(np.sqrt(8.0 * np.log(max(m, 2)) / rounds))
    gain = np.zeros((b, m), dtype=np.float32)
    w = np.full((b, m), 1.0 / m, dtype=np.float32)
    w_sum = np.zeros((b, m), dtype=np.float32)
    picked = np.zeros((b, n), dtype=bool)
    at = np.arange(b)
    for _ in range(rounds):
        margins = np.matmul(d, w[:, :, None])[:, :, 0]
        margins[own] = np.inf
        worst = margins.argmin(axis=1)
        picked[at, worst] = True
        gain += d[at, worst]
        z = eta * gain
        z -= z.max(axis=1, keepdims=True)
        w = np.exp(z, dtype=np.float32)
        w /= w.sum(axis=1, keepdims=True)
        w_sum += w
    margins = np.matmul(d, (w_sum / rounds)[:, :, None])[:, :, 0]
    margins[own] = np.inf
    lowest = np.argsort(margins, axis=1, kind="stable")[:, : min(m, n - 1)]
    picked[at[:, None], lowest] = True
    picked[own] = False
    return [np.flatnonzero(p) for p in picked]


def _max_min_margin(d, first, lower, upper, a_extra, b_extra):
    """Weights maximising the smallest margin ``min(d @ w)``, and that margin."""
    k, m = d.shape
    if k == 0:  # a lone model beats every (no) rival: any admissible weights, margin +inf
        x = _lp(np.zeros(m), None, None, a_extra, b_extra, np.ones((1, m)), list(zip(lower, upper)))
        return _clean(x, lower, upper), math.inf
    # variables (w, t): minimise -t subject to -d @ w + t <= 0, sum(w) = 1
    cost = np.zeros(m + 1)
    cost[-1] = -1.0

    def rows(sel):
        return np.hstack([-sel, np.ones((sel.shape[0], 1))]), np.zeros(sel.shape[0])

    a_x = None if a_extra is None else np.hstack([a_extra, np.zeros((a_extra.shape[0], 1))])
    eq = np.ones((1, m + 1))
    eq[0, -1] = 0.0
    bounds = list(zip(lower, upper)) + [(None, None)]
    x = _cutting_planes(d, first, rows, lambda a, b: _lp(cost, a, b, a_x, b_extra, eq, bounds), lambda x: x[-1])
    if x is None:
        raise RuntimeError("prospective LP: the max-margin problem was reported infeasible")
    return _clean(x[:m], lower, upper), float(x[-1])


def _min_objective(d, first, lower, upper, a_extra, b_extra, cost, floor):
    """Weights minimising ``cost @ w`` subject to every margin ``>= floor`` (known to be feasible)."""
    m = d.shape[1]
    bounds = list(zip(lower, upper))
    if d.shape[0] == 0:
        x = _lp(cost, None, None, a_extra, b_extra, np.ones((1, m)), bounds)
        return None if x is None else _clean(x, lower, upper)

    def rows(sel):
        return -sel, np.full(sel.shape[0], -floor)

    x = _cutting_planes(
        d, first, rows, lambda a, b: _lp(cost, a, b, a_extra, b_extra, np.ones((1, m)), bounds), lambda x: floor
    )
    return None if x is None else _clean(x[:m], lower, upper)


def _cutting_planes(d, first, rows, solve, target):
    """Solve an LP with one constraint per rival (row of ``d``) by constraint generation.

    Only a working set of rivals enters the LP: first ``first`` (from
    :func:`hard_rivals`), then, after each solve, up to ``m`` rivals whose
    constraint the solution violates (most violated first). The restricted LP
    is a relaxation, so once its solution satisfies every rival's constraint
    it is optimal for the full LP; an infeasible relaxation means an
    infeasible LP. At most ``m + 1`` constraints bind at a vertex, so with a
    good warm start one or two small LPs settle a model.
    """
    k, m = d.shape
    working = np.unique(first) if len(first) else np.argsort(d.sum(axis=1), kind="stable")[:m]
    in_working = np.zeros(k, dtype=bool)
    while True:
        x = solve(*rows(d[working]))
        if x is None:
            return None
        margins = d @ x[:m]
        in_working[working] = True
        violated = np.flatnonzero((margins < target(x) - LP_TOL) & ~in_working)
        if violated.size == 0:
            return x
        worst = violated[np.argsort(margins[violated], kind="stable")][:m]
        working = np.union1d(working, worst)


def _lp(cost, a_ub, b_ub, a_extra, b_extra, a_eq, bounds):
    """One HiGHS solve (no presolve: the LPs are small and dense): the solution, or None when infeasible."""
    if a_extra is not None:
        a_ub = a_extra if a_ub is None else np.vstack([a_ub, a_extra])
        b_ub = b_extra if b_ub is None else np.concatenate([b_ub, b_extra])
    solved = _HIGHS.solve(cost, a_ub, b_ub, a_eq, bounds) if _HIGHS is not None else None
    if solved is not None:
        return solved[1] if solved[0] else None
    return _linprog(cost, a_ub, b_ub, a_eq, bounds)


def _linprog(cost, a_ub, b_ub, a_eq, bounds):
    """The same LP through scipy's ``linprog`` (the reference; the way without :class:`_DirectHighs`)."""
    res = linprog(
        cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=bounds, method="highs",
        options={"presolve": False},
    )
    if res.status == 2:
        return None
    if res.status != 0:
        raise RuntimeError(f"prospective LP failed ({res.status}): {res.message}")
    return res.x


class _DirectHighs:
    """The HiGHS solver scipy bundles, called as ``linprog(method="highs", options={"presolve": False})`` calls
    it — the same model (rows ``A_ub`` then the one equality row, column-wise), the same options — without
    ``linprog``'s checks and conversions, which cost three times the solve of one of these small LPs (and
    there is one per model). The very same solution, bit for bit (tests/test_rules_prospective.py compares).
    Anything but "optimal" or "infeasible" is left to ``linprog`` (None)."""

    def __init__(self) -> None:
        from scipy.optimize._highspy import _core  # scipy >= 1.15 (else: linprog, see _HIGHS)

        self.core = _core
        options = _core.HighsOptions()
        options.presolve = "off"
        options.highs_debug_level = int(_core.HighsDebugLevel.kHighsDebugLevelNone)
        options.log_to_console = False
        options.output_flag = False
        options.simplex_strategy = int(_core.simplex_constants.SimplexStrategy.kSimplexStrategyDual)
        self.options = options
        self.inf = _core.kHighsInf

    def solve(self, cost, a_ub, b_ub, a_eq, bounds) -> tuple[bool, np.ndarray | None] | None:
        core = self.core
        a = np.vstack([a_ub, a_eq]) if a_ub is not None else np.asarray(a_eq, dtype=float)
        n_ub = 0 if a_ub is None else a_ub.shape[0]
        rows, cols = a.shape
        mask = (a != 0).T  # column-wise, as scipy's csc_array of the dense matrix
        data = a.T[mask]
        indices = np.nonzero(mask)[1].astype(np.int32)
        indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(np.int32)
        inf = self.inf
        lhs = np.concatenate([np.full(n_ub, -inf), [1.0]])
        rhs = np.concatenate([np.asarray(b_ub, dtype=float) if n_ub else np.zeros(0), [1.0]])
        lb = np.array([-inf if lo is None else float(lo) for lo, _ in bounds])
        ub = np.array([inf if hi is None else float(hi) for _, hi in bounds])
        lb[np.isinf(lb)] = np.sign(lb[np.isinf(lb)]) * inf
        ub[np.isinf(ub)] = np.sign(ub[np.isinf(ub)]) * inf
        lp = core.HighsLp()
        lp.num_col_, lp.num_row_ = cols, rows
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, rows
        lp.a_matrix_.format_ = core.MatrixFormat.kColwise
        # (lists, not arrays: the binding copies a list into its vectors five times faster)
        lp.col_cost_ = np.asarray(cost, dtype=float).tolist()
        lp.col_lower_, lp.col_upper_ = lb.tolist(), ub.tolist()
        lp.row_lower_, lp.row_upper_ = lhs.tolist(), rhs.tolist()
        lp.a_matrix_.start_, lp.a_matrix_.index_ = indptr.tolist(), indices.tolist()
        lp.a_matrix_.value_ = data.tolist()
        highs = core._Highs()
        if highs.passOptions(self.options) == core.HighsStatus.kError:
            return None
        if highs.passModel(lp) == core.HighsStatus.kError or highs.run() == core.HighsStatus.kError:
            return None
        status = highs.getModelStatus()
        if status == core.HighsModelStatus.kOptimal:
            return True, np.array(highs.getSolution().col_value)
        if status == core.HighsModelStatus.kInfeasible:
            return False, None
        return None


def _direct_highs() -> _DirectHighs | None:
    try:
        return _DirectHighs()
    except (ImportError, AttributeError):  # an older or newer scipy: linprog for every LP
        return None


_HIGHS = _direct_highs()


def _clean(w: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Solver noise off the weights: clip into the bounds, zero out |w| < 1e-12."""
    w = np.clip(w, lower, np.where(np.isnan(upper), np.inf, upper))
    w[np.abs(w) < 1e-12] = 0.0
    return w + 0.0


def _bounds(names, bounds, table_weights):
    """Lower and upper weight bounds: (0, 1), or (0, 0) for a criterion of weight 0, unless given."""
    m = len(names)
    lower = np.zeros(m)
    upper = np.where(np.asarray(table_weights) > 0, 1.0, 0.0)
    if bounds is None:
        return lower, upper
    if isinstance(bounds, Mapping):
        items = []
        for name, pair in bounds.items():
            if name not in names:
                raise UserError(f"bounds given for unknown criterion {name!r} (criteria: {', '.join(names)})")
            items.append((names.index(name), name, pair))
    else:
        pairs = list(bounds)
        if len(pairs) != m:
            raise UserError(f"expected {m} (low, high) weight bounds, one per criterion, got {len(pairs)}")
        items = [(j, names[j], pair) for j, pair in enumerate(pairs)]
    for j, name, pair in items:
        try:
            lo, hi = pair
            lo = 0.0 if lo is None else float(lo)
            hi = 1.0 if hi is None else float(hi)
        except (TypeError, ValueError):
            raise UserError(f"weight bounds of {name!r} must be a (low, high) pair of numbers, got {pair!r}") from None
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo < 0 or hi < lo:
            raise UserError(f"weight bounds of {name!r} are ({lo:g}, {hi:g}): need 0 <= low <= high")
        lower[j], upper[j] = lo, hi
    return lower, upper


def _row(names, row, what):
    """One row of coefficients, in criterion order, from an array or a mapping criterion → coefficient."""
    try:
        if isinstance(row, Mapping):
            out = np.zeros(len(names))
            for name, v in row.items():
                if name not in names:
                    raise UserError(f"{what} names unknown criterion {name!r} (criteria: {', '.join(names)})")
                out[names.index(name)] = float(v)
        else:
            out = np.asarray(row, dtype=float)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UserError):
            raise
        raise UserError(f"{what} must hold numbers") from None
    if out.shape != (len(names),):
        raise UserError(f"{what} needs {len(names)} coefficients, one per criterion, got shape {out.shape}")
    if not np.isfinite(out).all():
        raise UserError(f"{what} must be finite")
    return out


def _extra_constraints(names, a_ub, b_ub):
    if a_ub is None and b_ub is None:
        return None, None
    if a_ub is None or b_ub is None:
        raise UserError("extra constraints need both A_ub and b_ub")
    rows = [a_ub] if isinstance(a_ub, Mapping) else list(a_ub)
    if not rows:
        raise UserError("A_ub has no rows")
    a = np.vstack([_row(names, r, f"constraint row {i} of A_ub") for i, r in enumerate(rows)])
    try:
        b = np.atleast_1d(np.asarray(b_ub, dtype=float))
    except (TypeError, ValueError):
        raise UserError("b_ub must hold numbers") from None
    if b.shape != (a.shape[0],):
        raise UserError(f"A_ub has {a.shape[0]} rows but b_ub has {b.size} values")
    if not np.isfinite(b).all():
        raise UserError("b_ub must be finite")
    return a, b


def _objective(names, objective):
    return None if objective is None else _row(names, objective, "objective")


def _check_admissible(lower, upper, a_extra, b_extra):
    """A :class:`UserError` when no weight vector at all satisfies the bounds and extra constraints."""
    m = lower.size
    res = linprog(
        np.zeros(m), A_ub=a_extra, b_ub=b_extra, A_eq=np.ones((1, m)), b_eq=[1.0],
        bounds=list(zip(lower, upper)), method="highs",
    )
    if res.status == 2:
        raise UserError("no weight vector satisfies the bounds and constraints (weights must also sum to 1)")
