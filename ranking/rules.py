"""The Vote'n'Rank voting rules and mean baselines, and their registry (name → rule and its properties).

Each rule is registered with :func:`register` together with its properties
(kind, cardinal, linear in the weights, Condorcet-consistent, strictly Pareto;
see :class:`RuleSpec`); the two-step setting, the weight-simplex map and the
property tests read them from :func:`get_rule` / :func:`rule_names` instead of
keeping lists of names.

Every rule has the signature ``rule(table, *, ties="default", **params) ->
RuleResult``: scores (higher = better), a full ranking (1 = best, tied models
share the best position) and the winners (the models in position 1). A
criterion's weight multiplies the points (positional rules) or the votes
(majority rules) it gives. Criteria of weight 0 are ignored; a model with no
score on any criterion of positive weight cannot be ranked (NaN score and
rank).

Rules (the paper's appendix profile, :func:`worked_example`, in brackets):

========================  ==========  ================================================================
rule                      kind        score
========================  ==========  ================================================================
``plurality``             positional  points of the vector (1, 0, …, 0)                 [A=2, B=C=D=1]
``borda``                 positional  points of (|M|-1, …, 1, 0)                        [B=9 wins]
``dowdall``               positional  points of (1, 1/2, …, 1/|M|)                      [A=B=2.75]
``threshold``             positional  points of (1, …, 1, 0); full ranking lexicographic [C=5 wins]
``baldwin``               positional  number of models eliminated before it              [B wins]
``condorcet``             majority    1 for the Condorcet winner, 0 for the others       [B]
``copeland``              majority    majority wins - majority losses                    [B=3]
``minimax``               majority    -(largest winning support against it)              [B=0]
``arithmetic_mean``       mean        weighted mean of oriented scores
``geometric_mean``        mean        weighted geometric mean (lower-is-better: 1/score)
``optimality_gap``        mean        weighted mean of min(s/scale, gamma) - gamma
========================  ==========  ================================================================

Ties inside a criterion (``ties=``)
    Scores are tied when exactly equal, or within ``atol`` if given. Let a
    model have ``k`` models strictly above it and ``t - 1`` tied with it, so
    the tied block fills positions ``k+1 … k+t``.

    ``"default"``: the model gets the **average of the vector's points over
    the positions of its tied block** (the same for every positional rule).
    Each criterion then hands out exactly the points of a strict ranking,
    symmetric models get equal points, and Borda equals the pairwise count
    (one point per model beaten, half a point per tie), so Borda, Baldwin and
    the majority matrices agree. Plurality: ``t`` models tied first get
    ``1/t`` each; Threshold: ``t`` models tied last get ``(t-1)/t`` each.

    ``"votenrank"``: reproduces the published Vote'n'Rank numbers. Borda,
    Plurality and Threshold give the points of the *worst* tied position
    (Borda: the number of models strictly below; Plurality: only a unique first
    place counts; Threshold: a model tied for last counts as last); Dowdall
    gives those of the *best* tied position, ``1/(1+k)``.

    Majority rules never count a tied criterion for either model, under both
    conventions. Baldwin follows Borda's convention in every round. Baldwin
    is Condorcet-consistent under ``default`` with complete scores; under
    ``votenrank`` (ties worth nothing) or with missing scores the pairwise
    totals differ between pairs and it need not be.

Election-only rules and their rankings
    Threshold: lexicographic (fewest last places, then fewest second-to-last,
    …). Baldwin: reverse elimination order. Condorcet: the winner in position
    1, every other model shares position 2 (no model is in position 1 when
    there is no Condorcet winner, so ``winners`` is empty).

Missing scores (``missing=`` for positional rules)
    ``"rank_present"`` (default): per criterion only the models with a score
    there are ranked, with the scoring vector of that many models (Borda over
    ``m`` present models gives ``m-1 … 0``); a model without a score gets no
    points from that criterion. This is never the same as a score of 0.
    ``"error"``: a missing score on a criterion of positive weight is a
    :class:`~ranking.floor.errors.UserError` naming the model and the criterion.
    Majority rules skip the pairs where either score is missing; mean
    baselines replace a missing score by the criterion's median.

Ties between final scores
    Scores that are sums of weights are compared up to float noise (relative
    ``1e-12`` of the largest attainable score for voting rules), so ``1/3 + 1/3``
    ties with ``2/3``. A mean baseline's two scores tie only within the rounding
    bound of the two weighted sums themselves (:func:`mean_noise`: a few
    ulps of each model's own terms), so a column in the billions cannot make
    0.801 and 0.800 tie on another, nor one huge score make the others tie; Threshold's
    lexicographic keys allow ``1e-12`` per model (they are running sums over
    positions), Baldwin recomputes near-lowest Borda scores exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ranking.choices import TIES  # the tie conventions: their one declaration
from ranking.floor.errors import UserError
from ranking.pairwise import (
    BLOCK_ELEMENTS,
    DENSE_LIMIT,
    WEIGHT_RTOL,
    majority_summary,
    pairwise,
)
from ranking.result import RuleResult, positions_from_scores
from ranking.table import Criterion, ScoreTable

MISSING = ("rank_present", "error")

#: Rounding bound of a mean baseline's score, in ulps per term: float sums of k terms are off by at most
#: about k ulps of the sum of their magnitudes; the factor covers the rescaling and the division by the weights.
MEAN_ULPS = 8.0


# ====================================================================== the registry
Rule = Callable[..., RuleResult]
KINDS = ("positional", "majority", "mean")


@dataclass(frozen=True)
class RuleSpec:
    """A registered rule and the properties the rest of :mod:`ranking` reads from it.

    ``kind``
        ``positional`` (points by position), ``majority`` (pairwise majority
        matrices) or ``mean`` (a mean of the scores).
    ``cardinal``
        The scores use the size of score differences, not only their order;
        the two-step setting passes a cardinal rule's *scores* of each group
        to the second step, an ordinal rule's *positions*.
    ``linear_in_weights``
        The score is a linear function of the criterion weights (the other
        inputs fixed), so the group-weight simplex map may interpolate between
        its corners (it still verifies the interpolation before using it).
    ``condorcet_consistent``
        A Condorcet winner, when one exists, is the rule's sole winner (for
        Baldwin: under the default tie convention with complete scores).
    ``pareto_strict``
        A model better than another on every criterion is ranked strictly
        above it (every rule ranks it at least as high).
    """

    name: str
    fn: Rule
    kind: str
    cardinal: bool
    linear_in_weights: bool
    condorcet_consistent: bool
    pareto_strict: bool
    doc: str

    def __call__(self, table: Any, **kwargs: Any) -> RuleResult:
        return self.fn(table, **kwargs)


RULES: dict[str, RuleSpec] = {}


def register(
    name: str,
    *,
    kind: str,
    cardinal: bool,
    linear_in_weights: bool,
    condorcet_consistent: bool,
    pareto_strict: bool,
) -> Callable[[Rule], Rule]:
    """Register a rule function under ``name`` with its properties (see :class:`RuleSpec`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown rule kind {kind!r}")

    def deco(fn: Rule) -> Rule:
        if name in RULES:
            raise ValueError(f"rule {name!r} registered twice")
        RULES[name] = RuleSpec(
            name, fn, kind, cardinal, linear_in_weights, condorcet_consistent, pareto_strict,
            (fn.__doc__ or "").strip(),
        )
        return fn

    return deco


def get_rule(name: str) -> RuleSpec:
    """The registered rule ``name``; a :class:`UserError` listing the known rules otherwise.

    >>> get_rule("borda").kind, get_rule("borda").linear_in_weights
    ('positional', True)
    >>> get_rule("bordaa")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: unknown rule 'bordaa' (rules: plurality, borda, dowdall, threshold, baldwin, condorcet, copeland, minimax, arithmetic_mean, geometric_mean, optimality_gap)
    """
    try:
        return RULES[name]
    except KeyError:
        raise UserError(f"unknown rule {name!r} (rules: {', '.join(RULES)})") from None


def rule_names(**properties: Any) -> list[str]:
    """Registered rule names, in registration order; keyword arguments filter by property.

    >>> rule_names(kind="majority")
    ['condorcet', 'copeland', 'minimax']
    >>> rule_names(cardinal=True)
    ['arithmetic_mean', 'geometric_mean', 'optimality_gap']
    """
    return [n for n, s in RULES.items() if all(getattr(s, k) == v for k, v in properties.items())]


# ====================================================================== the worked example
def worked_example() -> ScoreTable:
    """The paper's appendix profile: 4 models, 5 criteria, scores 4/3/2/1 from best to worst.

    c1: A>B>C>D, c2: A>C>D>B, c3: B>D>C>A, c4: C>B>D>A, c5: D>B>C>A.

    >>> worked_example().frame().astype(int).to_dict("list")["c2"]
    [4, 1, 3, 2]
    """
    orders = ["ABCD", "ACDB", "BDCA", "CBDA", "DBCA"]
    values = np.array([[4.0 - order.index(m) for order in orders] for m in "ABCD"])
    criteria = tuple(Criterion(f"c{j + 1}") for j in range(len(orders)))
    return ScoreTable(tuple("ABCD"), criteria, values, source="worked example")


# ====================================================================== shared helpers
def _check_ties(ties: str) -> None:
    if ties not in TIES:
        raise UserError(f"unknown tie convention {ties!r} (choose one of: {', '.join(TIES)})")


def _check_missing(missing: str) -> None:
    if missing not in MISSING:
        raise UserError(f"unknown missing-score policy {missing!r} (choose one of: {', '.join(MISSING)})")


def _check_atol(atol: float) -> float:
    try:
        value = float(atol)
    except (TypeError, ValueError):
        raise UserError(f"tie tolerance atol={atol!r} is not a number") from None
    if not np.isfinite(value) or value < 0:
        raise UserError(f"tie tolerance atol={atol!r} must be a finite number >= 0")
    return value


#: Weights are rescaled (divided by the largest) when their total could overflow or lose the small ones.
HUGE = 1e150


def safe_weights(weights: np.ndarray) -> np.ndarray:
    """``weights``, divided by the largest one when their sum would overflow (every rule is invariant to it).

    Weights of 1e308 would sum to ``inf`` and make every model tie; rescaled, they
    compare exactly as their ratios do. Ordinary weights are returned unchanged.

    >>> safe_weights(np.array([1e308, 1e308, 5e307])).tolist()
    [1.0, 1.0, 0.5]
    >>> safe_weights(np.array([0.5, 2.0])).tolist()
    [0.5, 2.0]
    """
    w = np.asarray(weights, dtype=float)
    top = float(w.max()) if w.size else 0.0
    if top > HUGE:
        return w / top
    return w


def _rankable(table: ScoreTable) -> tuple[ScoreTable, np.ndarray]:
    """The sub-table a rule works on, and which of the table's models it keeps.

    Criteria of weight 0 are dropped; models without any score on the remaining
    criteria are dropped (they cannot be ranked and get NaN). Huge weights are
    rescaled (:func:`safe_weights`).
    """
    used = table.weights > 0
    keep = (~np.isnan(table.values[:, used])).any(axis=1)
    weights = table.weights
    w = safe_weights(weights)
    if used.all() and keep.all() and w is weights:  # the same table: its pairwise caches are reused
        return table, keep
    crits = tuple(replace(c, weight=float(x)) for c, x in zip(table.criteria, w))
    sub = ScoreTable(
        tuple(m for m, k in zip(table.models, keep) if k),
        tuple(c for c, u in zip(crits, used) if u),
        table.values[np.ix_(keep, used)],
        source=table.source, derived=table.derived,
    )
    return sub, keep


def _expand(keep: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Put per-kept-model values back in the full model order, NaN for the others."""
    out = np.full(keep.shape, np.nan)
    out[keep] = values
    return out


def _result(
    name: str, table: ScoreTable, keep: np.ndarray, scores: np.ndarray, ranks: np.ndarray, **params: Any
) -> RuleResult:
    return RuleResult(name, table.models, _expand(keep, scores), _expand(keep, ranks), dict(params))


def _ranks(scores: np.ndarray, scale: float, rtol: float = WEIGHT_RTOL) -> np.ndarray:
    """Competition ranking of scores, ties up to ``rtol * scale`` of float noise."""
    return positions_from_scores(scores, atol=rtol * max(float(scale), 0.0))


def _refuse_missing(table: ScoreTable, rule: str) -> None:
    miss = np.isnan(table.values)
    if miss.any():
        i, j = np.argwhere(miss)[0]
        raise UserError(
            f"model {table.models[i]!r} has no score on criterion {table.names[j]!r}: rule {rule} with "
            "missing='error' needs complete scores (use missing='rank_present', or drop the model)"
        )


# ====================================================================== positional machinery
def position_counts(values: np.ndarray, atol: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per criterion: models strictly above and strictly below each model, and how many are present.

    Returns ``(above, below, present)``: ``above`` and ``below`` are models ×
    criteria (NaN where the score is missing), ``present`` the number of
    models with a score on each criterion. ``values`` are oriented.

    >>> above, below, m = position_counts(np.array([[3.0], [1.0], [3.0], [np.nan]]))
    >>> above[:, 0].tolist(), below[:, 0].tolist(), m.tolist()
    ([0.0, 2.0, 0.0, nan], [1.0, 0.0, 1.0, nan], [3])
    """
    x = np.asarray(values, dtype=float)
    above = np.full(x.shape, np.nan)
    below = np.full(x.shape, np.nan)
    present = (~np.isnan(x)).sum(axis=0)
    for j in range(x.shape[1]):  # one vectorised pass per criterion
        col = x[:, j]
        ok = ~np.isnan(col)
        srt = np.sort(col[ok])
        v = col[ok]
        above[ok, j] = srt.size - np.searchsorted(srt, v + atol, side="right")
        below[ok, j] = np.searchsorted(srt, v - atol, side="left")
    return above, below, present


@dataclass(frozen=True)
class ScoringVector:
    """A positional scoring vector for any number ``m`` of ranked models.

    ``cumulative(k, m)`` is the sum of the points of positions ``1 … k``
    (vectorised; ``k = 0`` gives 0). ``votenrank`` says which tied position
    the Vote'n'Rank convention pays: ``"worst"`` or ``"best"``.
    """

    name: str
    cumulative: Callable[[np.ndarray, np.ndarray], np.ndarray]
    votenrank: str

    def points(self, above: np.ndarray, below: np.ndarray, m: np.ndarray, ties: str = "default") -> np.ndarray:
        """Points of each (model, criterion) given the models above/below it; NaN stays NaN.

        >>> BORDA.points(np.array([0.0, 0.0, 2.0]), np.array([1.0, 1.0, 0.0]), np.array(3)).tolist()
        [1.5, 1.5, 0.0]
        >>> BORDA.points(np.array([0.0, 0.0, 2.0]), np.array([1.0, 1.0, 0.0]), np.array(3), "votenrank").tolist()
        [1.0, 1.0, 0.0]
        """
        m = np.broadcast_to(m, above.shape).astype(float)
        first = above + 1  # best position of the tied block
        last = m - below  # worst position of the tied block
        if ties == "default":
            return (self.cumulative(last, m) - self.cumulative(first - 1, m)) / (last - first + 1)
        pos = last if self.votenrank == "worst" else first
        return self.cumulative(pos, m) - self.cumulative(pos - 1, m)


def _borda_cumulative(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    return k * m - k * (k + 1) / 2  # sum of (m - i) for i = 1 … k


def _dowdall_cumulative(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    k = np.asarray(k, dtype=float)
    out = np.full(k.shape, np.nan)
    ok = ~np.isnan(k)
    if ok.any():
        kk = k[ok].astype(int)
        harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, max(int(kk.max()), 0) + 1))])
        out[ok] = harmonic[kk]
    return out


def _plurality_cumulative(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    return np.minimum(k, 1.0)


def threshold_vector(zeros: int) -> ScoringVector:
    """The vector (1, …, 1, 0, …, 0) with ``zeros`` trailing zeros (``zeros=1``: Threshold's)."""
    return ScoringVector(
        f"threshold{zeros}", lambda k, m: np.clip(np.minimum(k, m - zeros), 0.0, None), "worst"
    )


BORDA = ScoringVector("borda", _borda_cumulative, "worst")
DOWDALL = ScoringVector("dowdall", _dowdall_cumulative, "best")
PLURALITY = ScoringVector("plurality", _plurality_cumulative, "worst")
THRESHOLD = threshold_vector(1)


def positional_scores(
    table: ScoreTable, vector: ScoringVector, *, ties: str = "default", atol: float = 0.0
) -> np.ndarray:
    """Weighted positional scores: sum over criteria of weight × points (missing: no points).

    >>> positional_scores(worked_example(), BORDA).tolist()
    [6.0, 9.0, 8.0, 7.0]
    """
    above, below, m = position_counts(table.oriented, atol)
    pts = vector.points(above, below, m, ties)
    return np.nansum(pts * table.weights, axis=1)


def _max_points(vector: ScoringVector, n: int) -> float:
    return float(n - 1) if vector is BORDA else 1.0


def _positional_rule(name: str, vector: ScoringVector, table: ScoreTable, ties: str, missing: str, atol: float):
    _check_ties(ties)
    _check_missing(missing)
    atol = _check_atol(atol)
    sub, keep = _rankable(table)
    if missing == "error":
        _refuse_missing(sub, name)
    scores = positional_scores(sub, vector, ties=ties, atol=atol)
    scale = sub.weights.sum() * max(_max_points(vector, sub.n_models), 1.0)
    return _result(name, table, keep, scores, _ranks(scores, scale), ties=ties, missing=missing, atol=atol)


# ====================================================================== positional rules
@register(
    "plurality", kind="positional", cardinal=False, linear_in_weights=True,
    condorcet_consistent=False, pareto_strict=False,
)
def plurality(table: ScoreTable, *, ties: str = "default", missing: str = "rank_present", atol: float = 0.0):
    """Plurality: each criterion gives its weight to the model it ranks first, vector (1, 0, …, 0).

    Tied first places share the point (``default``) or count for nobody (``votenrank``).

    >>> r = plurality(worked_example())
    >>> r.scores.tolist(), r.winners
    ([2.0, 1.0, 1.0, 1.0], ('A',))
    """
    return _positional_rule("plurality", PLURALITY, table, ties, missing, atol)


@register(
    "borda", kind="positional", cardinal=False, linear_in_weights=True,
    condorcet_consistent=False, pareto_strict=True,
)
def borda(table: ScoreTable, *, ties: str = "default", missing: str = "rank_present", atol: float = 0.0):
    """Borda count: vector (|M|-1, …, 1, 0): one point per model ranked below, times the weight.

    >>> r = borda(worked_example())
    >>> r.scores.tolist(), r.ranks.tolist(), r.winners
    ([6.0, 9.0, 8.0, 7.0], [4.0, 1.0, 2.0, 3.0], ('B',))
    """
    return _positional_rule("borda", BORDA, table, ties, missing, atol)


@register(
    "dowdall", kind="positional", cardinal=False, linear_in_weights=True,
    condorcet_consistent=False, pareto_strict=True,
)
def dowdall(table: ScoreTable, *, ties: str = "default", missing: str = "rank_present", atol: float = 0.0):
    """Dowdall (Nauru) count: vector (1, 1/2, …, 1/|M|).

    >>> r = dowdall(worked_example())
    >>> r.scores.round(4).tolist(), r.winners
    ([2.75, 2.75, 2.5, 2.4167], ('A', 'B'))
    """
    return _positional_rule("dowdall", DOWDALL, table, ties, missing, atol)


@register(
    "threshold", kind="positional", cardinal=False, linear_in_weights=False,
    condorcet_consistent=False, pareto_strict=False,
)
def threshold(table: ScoreTable, *, ties: str = "default", missing: str = "rank_present", atol: float = 0.0):
    """Threshold rule: fewest (weighted) last places wins; score = points of (1, …, 1, 0).

    Models tied on that score are ordered by (1, …, 1, 0, 0) (fewest last or
    second-to-last places), then (1, …, 1, 0, 0, 0), …: the full ranking is
    lexicographic, and models equal on every vector share a position. With
    missing scores each criterion uses the vectors of its own present models.

    >>> r = threshold(worked_example())
    >>> r.scores.tolist(), r.ranks.tolist(), r.winners
    ([2.0, 4.0, 5.0, 4.0], [4.0, 2.0, 1.0, 3.0], ('C',))
    """
    _check_ties(ties)
    _check_missing(missing)
    atol = _check_atol(atol)
    sub, keep = _rankable(table)
    if missing == "error":
        _refuse_missing(sub, "threshold")
    tol = WEIGHT_RTOL * sub.weights.sum() * sub.n_models
    if sub.n_models <= DENSE_LIMIT:
        keys = threshold_keys(sub, ties=ties, atol=atol)
        scores = keys[:, 0] if keys.shape[1] else np.zeros(sub.n_models)
        ranks = lexicographic_positions(keys, tol=tol)
    else:  # many models: the n × (n-1) keys are compared from each model's few mass intervals
        scores, ranks = threshold_sparse(sub, ties=ties, atol=atol, tol=tol)
    return _result("threshold", table, keep, scores, ranks, ties=ties, missing=missing, atol=atol)


def threshold_keys(table: ScoreTable, *, ties: str = "default", atol: float = 0.0) -> np.ndarray:
    """Models × (n-1): column ``k-1`` = weighted points of the vector with ``k`` trailing zeros.

    Built in one pass from the weighted mass each model has at each position
    counted from the bottom (a tied block spreads its mass evenly over its
    positions under ``default``; under ``votenrank`` it sits at the worst one).

    >>> threshold_keys(worked_example()).tolist()
    [[2.0, 2.0, 2.0], [4.0, 4.0, 1.0], [5.0, 2.0, 1.0], [4.0, 2.0, 1.0]]
    """
    n = table.n_models
    above, below, m = position_counts(table.oriented, atol)
    w = table.weights
    ok = ~np.isnan(above)
    rows, cols = np.nonzero(ok)
    first = above[ok] + 1
    last = np.broadcast_to(m, above.shape)[ok] - below[ok]
    mcol = np.broadcast_to(m, above.shape)[ok]
    # bottom index b = m - position + 1 (1 = last place)
    if ties == "default":
        lo, hi, mass = mcol - last + 1, mcol - first + 1, w[cols] / (last - first + 1)
    else:
        lo = hi = mcol - last + 1
        mass = w[cols].astype(float)
    diff = np.zeros((n, n + 2))
    np.add.at(diff, (rows, lo.astype(int)), mass)
    np.add.at(diff, (rows, hi.astype(int) + 1), -mass)
    at_bottom = np.cumsum(diff, axis=1)[:, 1 : n + 1]  # column b-1: mass at bottom index b
    present_weight = np.where(ok, w, 0.0).sum(axis=1)
    return present_weight[:, None] - np.cumsum(at_bottom, axis=1)[:, : n - 1]


def _bottom_mass(table: ScoreTable, ties: str, atol: float):
    """Per (model, criterion) with a score: the model, the bottom indices ``lo..hi`` its mass covers, the mass per index."""
    above, below, m = position_counts(table.oriented, atol)
    w = table.weights
    ok = ~np.isnan(above)
    rows, cols = np.nonzero(ok)
    first = above[ok] + 1
    last = np.broadcast_to(m, above.shape)[ok] - below[ok]
    mcol = np.broadcast_to(m, above.shape)[ok]
    if ties == "default":
        return rows, mcol - last + 1, mcol - first + 1, w[cols] / (last - first + 1)
    lo = mcol - last + 1
    return rows, lo, lo, w[cols].astype(float)


def threshold_sparse(table: ScoreTable, *, ties: str = "default", atol: float = 0.0, tol: float = 0.0):
    """Threshold's scores and lexicographic positions without the n × (n-1) key matrix (for many models).

    Key ``k`` of a model is its present weight minus its mass at bottom indices
    ``1..k``; two models equal on keys ``1..k-1`` differ on key ``k`` exactly when
    their mass at index ``k`` differs. Each model's mass is piecewise constant with
    at most ``2m`` changes, so a comparison walks those changes only (O(m)), and a
    sort needs O(n log n) comparisons. Same positions as :func:`threshold_keys` +
    :func:`lexicographic_positions`.
    """
    import functools

    n = table.n_models
    rows, lo, hi, mass = _bottom_mass(table, ties, atol)
    present_weight = np.zeros(n)
    np.add.at(present_weight, rows, table.weights[np.nonzero(~np.isnan(table.values))[1]])
    ev_row = np.concatenate([rows, rows])
    ev_k = np.concatenate([lo, hi + 1]).astype(np.int64)
    ev_d = np.concatenate([mass, -mass])
    order = np.lexsort((ev_k, ev_row))
    ev_row, ev_k, ev_d = ev_row[order], ev_k[order], ev_d[order]
    starts = np.searchsorted(ev_row, np.arange(n + 1))
    first_key = np.empty(n)
    profiles: list[list[tuple[int, float]]] = []
    for a in range(n):
        ks, ds = ev_k[starts[a] : starts[a + 1]].tolist(), ev_d[starts[a] : starts[a + 1]].tolist()
        value, i = 0.0, 0
        while i < len(ks) and ks[i] <= 1:
            value += ds[i]
            i += 1
        first_key[a] = present_weight[a] - value
        while i < len(ks) and ks[i] <= 2:
            value += ds[i]
            i += 1
        profile = [(2, value)]  # mass at bottom index k, from k on, for k = 2 .. n-1
        while i < len(ks) and ks[i] <= n - 1:
            k = ks[i]
            while i < len(ks) and ks[i] == k:
                value += ds[i]
                i += 1
            profile.append((k, value))
        profiles.append(profile)
    last_key = n - 1

    def compare(a: int, b: int) -> int:  # -1: a before b (better)
        fa, fb = first_key[a], first_key[b]
        if fa > fb + tol:
            return -1
        if fb > fa + tol:
            return 1
        if last_key < 2:
            return 0
        pa, pb = profiles[a], profiles[b]
        i = j = 0
        while True:
            va, vb = pa[i][1], pb[j][1]
            if va < vb - tol:
                return -1
            if vb < va - tol:
                return 1
            na = pa[i + 1][0] if i + 1 < len(pa) else n
            nb = pb[j + 1][0] if j + 1 < len(pb) else n
            k = min(na, nb)
            if k > last_key:
                return 0
            i += na == k
            j += nb == k

    ordered = sorted(range(n), key=functools.cmp_to_key(compare))
    positions = np.empty(n)
    block_start = 0
    for idx, a in enumerate(ordered):
        if idx and compare(ordered[idx - 1], a) != 0:
            block_start = idx
        positions[a] = block_start + 1.0
    scores = first_key if n > 1 else np.zeros(n)
    return scores, positions


def lexicographic_positions(keys: np.ndarray, *, tol: float = 0.0) -> np.ndarray:
    """Positions (1 = best) ordering rows lexicographically by their keys, higher first.

    Within each key column, values closer than ``tol`` to their neighbour in
    sorted order count as equal (float noise); rows equal on every key share
    the best position.

    >>> lexicographic_positions(np.array([[1.0, 5.0], [2.0, 0.0], [1.0, 5.0], [1.0, 7.0]])).tolist()
    [3.0, 1.0, 3.0, 2.0]
    >>> lexicographic_positions(np.array([[0.1 + 0.2, 1.0], [0.3, 2.0]]), tol=1e-12).tolist()
    [2.0, 1.0]
    """
    n = keys.shape[0]
    if n == 0:
        return np.zeros(0)
    if keys.shape[1] == 0:
        return np.ones(n)
    # integer keys (integer weights, no ties) are exact sums: no float noise to absorb
    ids = keys if np.array_equal(keys, np.round(keys)) else snap_to_levels(keys, tol)
    order = np.lexsort((-ids).T[::-1])
    srt = ids[order]
    new_block = np.ones(n, dtype=bool)
    new_block[1:] = np.any(srt[1:] != srt[:-1], axis=1)
    block_start = np.maximum.accumulate(np.where(new_block, np.arange(n), 0))
    positions = np.empty(n)
    positions[order] = block_start + 1.0
    return positions


def snap_to_levels(values: np.ndarray, tol: float) -> np.ndarray:
    """Per column, integer levels preserving order; values within ``tol`` of their sorted neighbour share a level.

    >>> snap_to_levels(np.array([[0.3], [0.1 + 0.2], [0.5]]), 1e-12).ravel().tolist()
    [0, 0, 1]
    """
    order = np.argsort(values, axis=0, kind="stable")
    srt = np.take_along_axis(values, order, axis=0)
    step = np.ones(values.shape, dtype=np.int64)
    step[0] = 0
    step[1:] = np.diff(srt, axis=0) > tol
    levels = np.empty(values.shape, dtype=np.int64)
    np.put_along_axis(levels, order, np.cumsum(step, axis=0), axis=0)
    return levels


@register(
    "baldwin", kind="positional", cardinal=False, linear_in_weights=False,
    condorcet_consistent=True, pareto_strict=True,
)
def baldwin(table: ScoreTable, *, ties: str = "default", missing: str = "rank_present", atol: float = 0.0):
    """Baldwin: repeatedly eliminate the lowest Borda score, recomputed on the survivors.

    Models tied for the lowest score are eliminated together; when all
    survivors tie they are the winners. Ranking = reverse elimination order
    (models eliminated in the same round share a position); score = the
    number of models eliminated before it. Borda follows ``ties`` and
    ``missing`` exactly as :func:`borda` (computed from the pairwise matrices:
    a criterion gives one point per survivor beaten, half a point per tie
    under ``default``, none under ``votenrank``).

    >>> r = baldwin(worked_example())   # A goes, then D, then C
    >>> r.scores.tolist(), r.ranks.tolist(), r.winners
    ([0.0, 3.0, 2.0, 1.0], [4.0, 1.0, 2.0, 3.0], ('B',))
    """
    _check_ties(ties)
    _check_missing(missing)
    atol = _check_atol(atol)
    sub, keep = _rankable(table)
    if missing == "error":
        _refuse_missing(sub, "baldwin")
    tol = WEIGHT_RTOL * float(sub.weights.sum()) * max(sub.n_models, 1)
    if sub.n_models <= DENSE_LIMIT:
        pw = pairwise(sub, atol=atol)
        points = pw.wins + 0.5 * pw.ties if ties == "default" else pw.wins
        scores = baldwin_elimination(points, tol=tol)
    else:  # many models: points computed block by block from the scores, never an n × n matrix
        scores = baldwin_many(sub.oriented, sub.weights, ties, atol, tol)
    return _result("baldwin", table, keep, scores, positions_from_scores(scores), ties=ties, missing=missing, atol=atol)


def baldwin_elimination(points: np.ndarray, tol: float = 0.0) -> np.ndarray:
    """Baldwin's eliminations from a pairwise points matrix; returns models eliminated before each.

    ``points[a, b]`` is what ``a`` scores from the presence of ``b`` (Borda on a
    set S is ``points[:, S].sum(1)``). Scores are updated incrementally, so the
    whole run is O(n²); the candidates near the lowest (and, at the end, all
    survivors) are recomputed exactly before comparing within ``tol``, so
    rounding drift never decides an elimination.

    >>> baldwin_elimination(np.array([[0, 2, 2], [0, 0, 1], [1, 2, 0]])).tolist()
    [2.0, 0.0, 1.0]
    """
    p = np.asarray(points, dtype=float)
    return _baldwin(lambda rows, cols: p[np.ix_(rows, cols)], p.shape[0], tol)


def _baldwin(block: Callable[[np.ndarray, np.ndarray], np.ndarray], n: int, tol: float) -> np.ndarray:
    """:func:`baldwin_elimination` given ``block(rows, cols)`` = the points sub-matrix (never all of it at once)."""
    everyone = np.arange(n)

    def row_sums(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        out = np.zeros(rows.size)
        step = max(1, BLOCK_ELEMENTS // max(cols.size, 1))
        for lo in range(0, rows.size, step):
            out[lo : lo + step] = block(rows[lo : lo + step], cols).sum(axis=1)
        return out

    borda = row_sums(everyone, everyone)
    alive = np.ones(n, dtype=bool)
    before = np.zeros(n)
    eliminated = 0
    drift = 1e3 * tol + 1e-9 * max(float(borda.max()) if n else 0.0, 1.0)
    while alive.any():
        current = borda[alive]
        lowest = current.min()
        survivors = np.flatnonzero(alive)
        if current.max() - lowest <= drift:  # possibly all tied: check exactly
            exact = row_sums(survivors, survivors)
            if exact.max() - exact.min() <= tol:
                before[alive] = eliminated
                break
        near = np.flatnonzero(alive & (borda <= lowest + drift))
        exact = row_sums(near, survivors)
        out = near[exact <= exact.min() + tol]
        before[out] = eliminated
        eliminated += out.size
        alive[out] = False
        step = max(1, BLOCK_ELEMENTS // max(out.size, 1))
        for lo in range(0, n, step):
            rows = everyone[lo : lo + step]
            borda[rows] -= block(rows, out).sum(axis=1)
    return before


def baldwin_many(values: np.ndarray, weights: np.ndarray, ties: str, atol: float, tol: float) -> np.ndarray:
    """:func:`baldwin_elimination` for many models: O(n·m) memory, O(n·m) work per round.

    A model's points from a rival are its weight where it is strictly better and
    (``default``) half of it where tied. Eliminating ``e`` lowers every survivor's
    Borda by its points from ``e`` (one vectorised pass per criterion); candidates
    near the lowest, and all survivors when they look tied, are recounted exactly
    against the survivors (comparisons for a few, sorted counts for many).
    """
    x = np.asarray(values, dtype=float)
    n = x.shape[0]
    cols = np.asarray(x.T, order="C")  # criterion-major: cols[j] is a contiguous view
    used = [(j, float(wj)) for j, wj in enumerate(np.asarray(weights, dtype=float)) if wj > 0]
    half = 0.5 if ties == "default" else 0.0

    def points_from(e: int) -> np.ndarray:  # every model's points from rival e
        out = np.zeros(n)
        for j, wj in used:
            xe = cols[j][e]
            out += (cols[j] > xe + atol) * wj
            if half:
                out += (np.abs(cols[j] - xe) <= atol) * (half * wj)
        out[e] = 0.0
        return out

    def exact(rows: np.ndarray, alive: np.ndarray) -> np.ndarray:  # Borda of rows against the survivors
        out = np.zeros(rows.size)
        if rows.size <= 8:
            for k, a in enumerate(rows):
                total = 0.0
                for j, wj in used:
                    xa = cols[j][a]
                    c = cols[j][alive]
                    total += wj * np.count_nonzero(xa > c + atol)
                    if half:
                        total += half * wj * (np.count_nonzero(np.abs(c - xa) <= atol) - (not np.isnan(xa)))
                out[k] = total
            return out
        for j, wj in used:
            c = np.sort(cols[j][alive])
            c = c[~np.isnan(c)]
            xa = cols[j][rows]
            below = np.searchsorted(c, xa - atol, side="left").astype(float)
            below[np.isnan(xa)] = 0.0
            out += wj * below
            if half:
                tied = np.searchsorted(c, xa + atol, side="right") - np.searchsorted(c, xa - atol, side="left") - 1.0
                tied[np.isnan(xa)] = 0.0
                out += half * wj * tied
        return out

    alive = np.ones(n, dtype=bool)
    borda = exact(np.arange(n), alive)
    before = np.zeros(n)
    eliminated = 0
    drift = 1e3 * tol + 1e-9 * max(float(borda.max()) if n else 0.0, 1.0)
    while alive.any():
        current = borda[alive]
        lowest = current.min()
        if current.max() - lowest <= drift:  # possibly all tied: check exactly
            survivors = np.flatnonzero(alive)
            recount = exact(survivors, alive)
            if recount.max() - recount.min() <= tol:
                before[alive] = eliminated
                break
        near = np.flatnonzero(alive & (borda <= lowest + drift))
        recount = exact(near, alive)
        out = near[recount <= recount.min() + tol]
        before[out] = eliminated
        eliminated += out.size
        alive[out] = False
        for e in out:
            borda -= points_from(int(e))
    return before


# ====================================================================== majority rules
def _majority_setup(table: ScoreTable, ties: str, atol: float):
    _check_ties(ties)
    atol = _check_atol(atol)
    sub, keep = _rankable(table)
    return sub, keep, majority_summary(sub, atol=atol), atol


@register(
    "condorcet", kind="majority", cardinal=False, linear_in_weights=False,
    condorcet_consistent=True, pareto_strict=False,
)
def condorcet(table: ScoreTable, *, ties: str = "default", atol: float = 0.0):
    """Condorcet: the winner is the model that beats every other model by weighted majority.

    Score 1 for the Condorcet winner and 0 for every other model. Ranking:
    the winner in position 1 and every other model sharing position 2; when
    there is no Condorcet winner every model is in position 2 (no winners).
    A tied criterion or a missing score gives no vote to either model.

    >>> r = condorcet(worked_example())
    >>> r.scores.tolist(), r.ranks.tolist(), r.winners
    ([0.0, 1.0, 0.0, 0.0], [2.0, 1.0, 2.0, 2.0], ('B',))
    """
    sub, keep, summary, atol = _majority_setup(table, ties, atol)
    scores = (summary.beaten == sub.n_models - 1).astype(float)  # beats every other model
    ranks = np.where(scores == 1.0, 1.0, 2.0)
    return _result("condorcet", table, keep, scores, ranks, ties=ties, atol=atol)


def condorcet_indicator(beats: np.ndarray) -> np.ndarray:
    """1.0 for the model beating every other one (at most one exists), else 0.0.

    >>> condorcet_indicator(np.array([[False, True], [False, False]])).tolist()
    [1.0, 0.0]
    """
    b = np.asarray(beats, dtype=bool)
    others = ~np.eye(b.shape[0], dtype=bool)
    return np.all(b | ~others, axis=1).astype(float)


@register(
    "copeland", kind="majority", cardinal=False, linear_in_weights=False,
    condorcet_consistent=True, pareto_strict=True,
)
def copeland(table: ScoreTable, *, ties: str = "default", atol: float = 0.0):
    """Copeland: number of models it beats minus number it loses to (weighted majority).

    >>> r = copeland(worked_example())
    >>> r.scores.tolist(), r.winners
    ([-3.0, 3.0, 1.0, -1.0], ('B',))
    """
    sub, keep, summary, atol = _majority_setup(table, ties, atol)
    scores = summary.beaten.astype(float) - summary.beaten_by
    return _result("copeland", table, keep, scores, positions_from_scores(scores), ties=ties, atol=atol)


@register(
    "minimax", kind="majority", cardinal=False, linear_in_weights=False,
    condorcet_consistent=True, pareto_strict=False,
)
def minimax(table: ScoreTable, *, ties: str = "default", atol: float = 0.0):
    """Minimax (winning votes): score(A) = -max_B s(B, A).

    ``s(B, A)`` is the weight of the criteria ranking B above A when B beats A
    by majority, else 0, so an unbeaten model scores 0. (pref_voting's
    ``minimax_scores(..., score_method="winning")``.)

    >>> r = minimax(worked_example())
    >>> r.scores.tolist(), r.winners
    ([-3.0, 0.0, -3.0, -3.0], ('B',))
    """
    sub, keep, summary, atol = _majority_setup(table, ties, atol)
    scores = -summary.worst_defeat if sub.n_models > 1 else np.zeros(sub.n_models)
    scores = scores + 0.0  # no negative zeros in the output
    return _result(
        "minimax", table, keep, scores, _ranks(scores, float(sub.weights.sum())), ties=ties, atol=atol
    )


# ====================================================================== mean baselines
def median_imputed(values: np.ndarray) -> np.ndarray:
    """Missing scores replaced by their criterion's median (the paper's baseline).

    >>> median_imputed(np.array([[1.0, np.nan], [3.0, 2.0], [np.nan, 4.0]])).tolist()
    [[1.0, 3.0], [3.0, 2.0], [2.0, 4.0]]
    """
    x = np.array(values, dtype=float)
    if not np.isnan(x).any():
        return x
    # per-column scale, so the middle of two huge scores (their mean) cannot overflow
    scale = np.nanmax(np.abs(x), axis=0)
    scale = np.where(np.isfinite(scale) & (scale > HUGE), scale, 1.0)
    med = np.nanmedian(x / scale, axis=0) * scale
    return np.where(np.isnan(x), med, x)


def mean_noise(terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per model: the rounding bound of ``terms @ weights / weights.sum()`` (models × criteria terms).

    ``MEAN_ULPS`` × (k + 2) ulps of the model's own weighted sum of magnitudes: the same mean computed
    in another order (permuted criteria, split weights) lands within it, and it grows with the model's
    own terms only, not with another model's or another criterion's scale.

    In ulps: 8 × (2 + 2) × the mean of each model's own |terms| (3.5e9 and 500.25):

    >>> (mean_noise(np.array([[0.801, -7e9], [0.5, -1e3]]), np.array([1.0, 1.0])) / np.finfo(float).eps).round(1).tolist()
    [112000000012.8, 16008.0]
    """
    t = np.abs(np.asarray(terms, dtype=float))
    w = np.asarray(weights, dtype=float)
    k = t.shape[1] if t.ndim == 2 else 1
    magnitude = (t / max(float(t.max(initial=0.0)), 1.0)) @ w / w.sum() * max(float(t.max(initial=0.0)), 1.0)
    return MEAN_ULPS * (k + 2) * np.finfo(float).eps * magnitude


def positions_within(scores: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Competition ranking where ``j`` is above ``i`` only if ``scores[j] - scores[i] > noise[i] + noise[j]``.

    >>> positions_within(np.array([3.0, 3.0 + 1e-9, 1.0, np.nan]), np.array([1e-9, 1e-9, 0.0, 0.0])).tolist()
    [1.0, 1.0, 3.0, nan]
    """
    s = np.asarray(scores, dtype=float)
    e = np.where(np.isfinite(noise), noise, 0.0)
    out = np.full(s.shape, np.nan)
    ok = ~np.isnan(s)
    v, ev = s[ok], e[ok]
    if v.size:
        order = np.argsort(-v, kind="stable")
        desc, edesc = v[order], ev[order]
        widest = float(edesc.max())
        # surely above: beyond the widest bound; only the few within it are compared pair by pair
        sure = np.searchsorted(-desc, -(v + ev + widest), side="left")
        near = np.searchsorted(-desc, -(v + ev), side="left")
        better = sure.astype(float)
        for i in np.flatnonzero(near > sure):
            cand = slice(sure[i], near[i])
            better[i] += np.count_nonzero(desc[cand] - v[i] > ev[i] + edesc[cand])
        out[ok] = better + 1.0
    return out


def _mean_result(name: str, table: ScoreTable, keep: np.ndarray, scores: np.ndarray, noise: np.ndarray,
                 **params: Any):
    return _result(name, table, keep, scores, positions_within(scores, noise), **params)


@register(
    "arithmetic_mean", kind="mean", cardinal=True, linear_in_weights=True,
    condorcet_consistent=False, pareto_strict=True,
)
def arithmetic_mean(table: ScoreTable, *, ties: str = "default", atol: float = 0.0):
    """Weighted arithmetic mean of the oriented scores (lower-is-better criteria negated).

    Missing scores are replaced by the criterion's median. ``ties`` and
    ``atol`` are accepted for a uniform interface and have no effect.

    >>> arithmetic_mean(worked_example()).scores.tolist()
    [2.2, 2.8, 2.6, 2.4]
    """
    _check_ties(ties)
    sub, keep = _rankable(table)
    w = sub.weights
    x = median_imputed(sub.oriented)
    top = float(np.abs(x).max())
    scale = top if top > HUGE else 1.0  # a mean of huge scores, computed without overflowing
    scores = (x / scale) @ w / w.sum() * scale
    return _mean_result("arithmetic_mean", table, keep, scores, mean_noise(x, w), ties=ties)


@register(
    "geometric_mean", kind="mean", cardinal=True, linear_in_weights=True,
    condorcet_consistent=False, pareto_strict=True,
)
def geometric_mean(table: ScoreTable, *, ties: str = "default", atol: float = 0.0, nonpositive: str = "error"):
    """Weighted geometric mean: exp(sum_j w_j log s_j / sum_j w_j); needs positive scores.

    A lower-is-better criterion enters as 1/score. Missing scores are replaced
    by the criterion's median (before taking logs). A score <= 0 (on a
    criterion of positive weight) is a :class:`UserError` naming the model and
    criterion under ``nonpositive="error"`` (the default); under ``"zero"``
    (the ``votenrank`` preset, as the authors' ``scipy.stats.gmean``) that
    model's geometric mean is 0. Logs are taken per criterion and weighted
    before exponentiating, so huge finite scores never overflow.

    >>> geometric_mean(worked_example()).scores.round(4).tolist()
    [1.7411, 2.5508, 2.4915, 2.1689]
    >>> t = worked_example().with_values(np.array([[0.0, 1, 1, 1, 1], *worked_example().values[1:]]))
    >>> geometric_mean(t, nonpositive="zero").scores.round(4).tolist()
    [0.0, 2.5508, 2.4915, 2.1689]
    """
    _check_ties(ties)
    if nonpositive not in ("error", "zero"):
        raise UserError(f"geometric_mean: nonpositive={nonpositive!r} is not one of error, zero")
    sub, keep = _rankable(table)
    _no_target("geometric_mean", sub)
    raw = median_imputed(sub.values)
    bad = raw <= 0
    if bad.any() and nonpositive == "error":
        i, j = np.argwhere(bad)[0]
        raise UserError(
            f"geometric_mean needs positive scores, but model {sub.models[i]!r} has {raw[i, j]:g} on "
            f"criterion {sub.names[j]!r} (shift or rescale that criterion, or use another rule)"
        )
    w = sub.weights
    zero = bad.any(axis=1)
    logs = np.log(np.where(bad, 1.0, raw)) * sub.signs
    scores = np.where(zero, 0.0, np.exp(logs @ w / w.sum()))
    # the bound of the mean of logs (each log itself within an ulp or so), carried through exp
    noise = scores * (mean_noise(logs, w) + MEAN_ULPS * np.finfo(float).eps)
    return _mean_result("geometric_mean", table, keep, scores, noise, ties=ties, nonpositive=nonpositive)


def _no_target(rule: str, table: ScoreTable) -> None:
    """A :class:`UserError` when a rule that reads raw scores meets a closest-to-a-target criterion."""
    target = [c for c in table.criteria if c.direction == "target"]
    if target:
        raise UserError(f"{rule} reads raw scores, but {target[0].name!r} is best {target[0].describe_direction()} "
                        "(give it weight 0 or use another rule)")


@register(
    "optimality_gap", kind="mean", cardinal=True, linear_in_weights=True,
    condorcet_consistent=False, pareto_strict=False,
)
def optimality_gap(
    table: ScoreTable,
    *,
    ties: str = "default",
    atol: float = 0.0,
    gamma: float = 1.0,
    scale: float | None = None,
):
    """Negated optimality gap: weighted mean of min(s/scale, gamma) - gamma (0 = every score at gamma).

    ``scale`` is the score scale (1 for fractions, 100 for percentages);
    ``None`` infers it: 100 if any used score exceeds 1, else 1 (the value
    used is recorded in the result's ``params``). ``gamma`` is the target on
    the normalised scale. Needs higher-is-better criteria. Missing scores are
    replaced by the criterion's median.

    >>> r = optimality_gap(worked_example(), scale=4, gamma=0.75)
    >>> r.scores.tolist(), r.params["scale"]
    ([-0.3, -0.1, -0.15, -0.2], 4.0)
    """
    _check_ties(ties)
    try:
        gamma = float(gamma)
    except (TypeError, ValueError):
        raise UserError(f"optimality_gap: gamma={gamma!r} is not a number") from None
    if not np.isfinite(gamma) or gamma <= 0:  # the declared bound of og_gamma (ranking.choices), here too
        raise UserError(f"optimality_gap: gamma={gamma!r} must be a finite number > 0 (on the 0-1 scale)")
    sub, keep = _rankable(table)
    lower = [c for c in sub.criteria if c.direction != "higher"]
    if lower:
        raise UserError(
            f"optimality_gap needs higher-is-better criteria, but {lower[0].name!r} is "
            f"{'lower-is-better' if lower[0].direction == 'lower' else lower[0].describe_direction()} "
            "(give it weight 0 or use another rule)"
        )
    if scale is None:
        scale = 100.0 if np.nanmax(sub.values) > 1 else 1.0
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise UserError(f"optimality_gap: scale={scale!r} is not a number") from None
    if not np.isfinite(scale) or scale <= 0:
        raise UserError(f"optimality_gap: scale={scale!r} must be a positive number")
    w = sub.weights
    capped = np.minimum(median_imputed(sub.values) / scale, gamma)
    gaps = capped - gamma
    scores = gaps @ w / w.sum() + 0.0
    noise = mean_noise(np.abs(capped) + abs(gamma), w)  # each gap is within an ulp of its two terms
    return _mean_result("optimality_gap", table, keep, scores, noise, ties=ties, gamma=gamma, scale=scale)
