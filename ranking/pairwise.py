"""Pairwise comparisons of models, computed once per table as matrices.

Every majority-based rule (Condorcet, Copeland, Minimax), Baldwin's
iterated Borda count and the prospective-systems LP read the same
matrices, built here with numpy broadcasting (one vectorised n × n
comparison per criterion, never a Python loop over pairs of models):

- ``wins[a, b]``: total weight of the criteria on which model ``a`` is
  strictly better than model ``b`` (scores oriented higher-is-better; a
  pair where either score is missing is skipped, the paper's R operator);
- ``ties[a, b]``: total weight of the criteria on which both scores are
  present and equal (within ``atol``);
- ``margins = wins - wins.T``; ``a`` *beats* ``b`` by weighted majority
  iff ``margins[a, b] > 0`` (up to float noise, see :func:`majority_tolerance`).

Worked example (the paper's appendix profile, see :func:`ranking.rules.worked_example`):

>>> from ranking.rules import worked_example
>>> t = worked_example()
>>> pairwise_wins(t).astype(int).tolist()
[[0, 2, 2, 2], [3, 0, 3, 3], [3, 2, 0, 3], [3, 2, 2, 0]]
>>> beats(t).astype(int).tolist()   # B (row 1) beats everyone: the Condorcet winner
[[0, 0, 0, 0], [1, 0, 1, 1], [1, 0, 0, 1], [1, 0, 0, 0]]
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ranking.table import ScoreTable

#: Relative tolerance for comparing sums of weights (float noise, e.g. 1/3 + 1/3 vs 2/3): summing
#: m terms is off by about m * 1e-16 of the total, far below this; real differences are far above it.
WEIGHT_RTOL = 1e-12


@dataclass(frozen=True, eq=False)
class Pairwise:
    """The pairwise matrices of one table (see the module docstring)."""

    wins: np.ndarray
    ties: np.ndarray
    total_weight: float

    @property
    def margins(self) -> np.ndarray:
        """``wins[a, b] - wins[b, a]``: how much more weight prefers ``a`` to ``b`` than the reverse."""
        return self.wins - self.wins.T

    @property
    def tolerance(self) -> float:
        """Margins within this of 0 count as a majority tie (float noise of summed weights)."""
        return majority_tolerance(self.total_weight)

    @property
    def beats(self) -> np.ndarray:
        """Boolean ``beats[a, b]``: ``a`` beats ``b`` by strict weighted majority."""
        return self.margins > self.tolerance


def majority_tolerance(total_weight: float) -> float:
    """Float-noise tolerance for sums of criterion weights.

    >>> majority_tolerance(2.0)
    2e-12
    """
    return WEIGHT_RTOL * float(total_weight)


_CACHE: weakref.WeakKeyDictionary[ScoreTable, dict[float, Pairwise]] = weakref.WeakKeyDictionary()


def pairwise(table: ScoreTable, *, atol: float = 0.0) -> Pairwise:
    """The :class:`Pairwise` matrices of ``table`` (cached per table object and ``atol``).

    >>> from ranking.rules import worked_example
    >>> p = pairwise(worked_example())
    >>> p.margins[1].astype(int).tolist()   # B against A, B, C, D
    [1, 0, 1, 1]
    """
    per_table = _CACHE.setdefault(table, {})
    key = float(atol)
    if key not in per_table:
        wins = weighted_wins(table.oriented, table.weights, atol=key)
        present = (~np.isnan(table.values)).astype(float)
        both = (present * table.weights) @ present.T
        ties = both - wins - wins.T
        np.fill_diagonal(ties, 0.0)
        np.clip(ties, 0.0, None, out=ties)
        per_table[key] = Pairwise(wins, ties, float(table.weights.sum()))
    return per_table[key]


def weighted_wins(values: np.ndarray, weights: np.ndarray, *, atol: float = 0.0) -> np.ndarray:
    """``W[a, b] = sum_j weights[j] * [values[a, j] > values[b, j] + atol]``, NaN pairs skipped.

    ``values`` are oriented (higher is better). One broadcast n × n comparison
    per criterion; criteria sharing a weight are counted in integers first, so
    the common equal-weight case costs one comparison and one integer add per
    criterion.

    >>> weighted_wins(np.array([[1.0, 5.0], [2.0, np.nan]]), np.array([1.0, 3.0])).tolist()
    [[0.0, 0.0], [1.0, 0.0]]
    """
    x = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    n = x.shape[0]
    out = np.zeros((n, n))
    better = np.empty((n, n), dtype=bool)
    scratch: np.ndarray | None = None
    for weight in np.unique(w[w > 0]):
        cols = np.flatnonzero(w == weight)
        if cols.size == 1:  # a weight of its own: add it where the model is better
            col = x[:, cols[0]]
            np.greater(col[:, None], col[None, :] + atol, out=better)
            scratch = np.empty((n, n)) if scratch is None else scratch
            np.multiply(better, weight, out=scratch)
            out += scratch
            continue
        counts = np.zeros((n, n), dtype=np.int32)
        for j in cols:
            col = x[:, j]
            # NaN compares False, so a missing score never wins nor loses
            np.greater(col[:, None], col[None, :] + atol, out=better)
            counts += better
        out += weight * counts
    return out


def pairwise_wins(table: ScoreTable, *, atol: float = 0.0) -> np.ndarray:
    """n × n: entry ``[a, b]`` = total weight of criteria where ``a`` is strictly better than ``b``.

    >>> from ranking.rules import worked_example
    >>> pairwise_wins(worked_example())[0].tolist()   # A over A, B, C, D
    [0.0, 2.0, 2.0, 2.0]
    """
    return pairwise(table, atol=atol).wins


def pairwise_ties(table: ScoreTable, *, atol: float = 0.0) -> np.ndarray:
    """n × n: total weight of criteria where both scores are present and tied (diagonal 0)."""
    return pairwise(table, atol=atol).ties


def margins(table: ScoreTable, *, atol: float = 0.0) -> np.ndarray:
    """n × n: ``wins[a, b] - wins[b, a]``."""
    return pairwise(table, atol=atol).margins


def beats(table: ScoreTable, *, atol: float = 0.0) -> np.ndarray:
    """n × n booleans: ``a`` beats ``b`` by strict weighted majority (pairs with a missing score skipped)."""
    return pairwise(table, atol=atol).beats


def criterion_signs(values: np.ndarray, rows: np.ndarray | slice, *, atol: float = 0.0) -> np.ndarray:
    """Per-criterion comparisons of some models against all: shape (len(rows), n, m), int8.

    ``+1`` where the row model is strictly better on that criterion, ``-1``
    where strictly worse, ``0`` where tied or either score is missing. The
    prospective-systems LP builds its constraint matrices from these.

    >>> criterion_signs(np.array([[1.0, 2.0], [2.0, np.nan]]), slice(0, 1)).tolist()
    [[[0, 0], [-1, 0]]]
    """
    x = np.asarray(values, dtype=float)
    a = x[rows]
    if a.ndim == 1:
        a = a[None, :]
    better = a[:, None, :] > x[None, :, :] + atol
    worse = a[:, None, :] < x[None, :, :] - atol
    return better.astype(np.int8) - worse.astype(np.int8)


# ---------------------------------------------------------------------- many models: blocks of rows
#: Above this many models the majority rules never build an n × n matrix: they reduce blocks of rows.
DENSE_LIMIT = 2500
#: Pairwise comparisons (block rows × models) held in memory at once.
BLOCK_ELEMENTS = 4_000_000


def weighted_wins_rows(values: np.ndarray, rows: np.ndarray, weights: np.ndarray, *, atol: float = 0.0) -> np.ndarray:
    """Rows ``rows`` of :func:`weighted_wins` (and, transposed, its columns): shape (len(rows), n).

    Same arithmetic as the full matrix, so both give identical numbers.

    >>> x = np.array([[1.0, 5.0], [2.0, np.nan], [0.0, 1.0]])
    >>> bool((weighted_wins_rows(x, np.array([1, 2]), np.array([1.0, 3.0])) == weighted_wins(x, np.array([1.0, 3.0]))[1:]).all())
    True
    """
    x = np.asarray(values, dtype=float)
    return weighted_wins_between(x[rows], x, weights, atol=atol)


def weighted_wins_between(a: np.ndarray, b: np.ndarray, weights: np.ndarray, *, atol: float = 0.0) -> np.ndarray:
    """``W[i, k] = sum_j weights[j] * [a[i, j] > b[k, j] + atol]`` for two sets of models (NaN never wins)."""
    w = np.asarray(weights, dtype=float)
    out = np.zeros((a.shape[0], b.shape[0]))
    for weight in np.unique(w[w > 0]):
        cols = np.flatnonzero(w == weight)
        if cols.size == 1:
            j = cols[0]
            out += (a[:, j, None] > b[None, :, j] + atol) * weight
            continue
        counts = np.zeros(out.shape, dtype=np.int32)
        for j in cols:
            counts += a[:, j, None] > b[None, :, j] + atol
        out += weight * counts
    return out


def _losses_rows(values: np.ndarray, rows: np.ndarray, weights: np.ndarray, atol: float) -> np.ndarray:
    """``wins[b, a]`` for ``a`` in ``rows`` and every ``b``, as (len(rows), n): the weight preferring ``b`` to ``a``."""
    x = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    a = x[rows]
    out = np.zeros((a.shape[0], x.shape[0]))
    for weight in np.unique(w[w > 0]):
        cols = np.flatnonzero(w == weight)
        if cols.size == 1:
            j = cols[0]
            out += (x[None, :, j] > a[:, j, None] + atol) * weight
            continue
        counts = np.zeros(out.shape, dtype=np.int32)
        for j in cols:
            counts += x[None, :, j] > a[:, j, None] + atol
        out += weight * counts
    return out


def row_blocks(n: int) -> list[np.ndarray]:
    """Consecutive blocks of row indices, each with at most :data:`BLOCK_ELEMENTS` comparisons against n models."""
    size = max(1, BLOCK_ELEMENTS // max(n, 1))
    return [np.arange(lo, min(n, lo + size)) for lo in range(0, n, size)]


@dataclass(frozen=True)
class MajoritySummary:
    """Per model, what Condorcet, Copeland and Minimax need from the majority relation (no n × n matrix)."""

    beaten: np.ndarray  # how many models it beats by weighted majority
    beaten_by: np.ndarray  # how many models beat it
    worst_defeat: np.ndarray  # max over rivals b beating it of wins[b, a] (0 if unbeaten)


def majority_summary(table: ScoreTable, *, atol: float = 0.0) -> MajoritySummary:
    """:class:`MajoritySummary` of ``table``: from the cached matrices for few models, by blocks of rows for many.

    >>> from ranking.rules import worked_example
    >>> s = majority_summary(worked_example())
    >>> s.beaten.tolist(), s.beaten_by.tolist(), s.worst_defeat.tolist()
    ([0, 3, 2, 1], [3, 0, 1, 2], [3.0, 0.0, 3.0, 3.0])
    """
    per_table = _SUMMARY_CACHE.setdefault(table, {})
    key = (float(atol), DENSE_LIMIT, BLOCK_ELEMENTS)
    if key not in per_table:
        per_table[key] = _majority_summary(table, float(atol))
    return per_table[key]


_SUMMARY_CACHE: weakref.WeakKeyDictionary[ScoreTable, dict[tuple, MajoritySummary]] = weakref.WeakKeyDictionary()


def _majority_summary(table: ScoreTable, atol: float) -> MajoritySummary:
    n = table.n_models
    if n <= DENSE_LIMIT:
        pw = pairwise(table, atol=atol)
        b = pw.beats
        worst = np.where(b, pw.wins, 0.0).max(axis=0) if n else np.zeros(0)
        return MajoritySummary(b.sum(axis=1), b.sum(axis=0), worst)
    x, w = table.oriented, table.weights
    tol = majority_tolerance(float(w.sum()))
    beaten = np.zeros(n, dtype=np.int64)
    beaten_by = np.zeros(n, dtype=np.int64)
    worst = np.zeros(n)
    for rows in row_blocks(n):
        wins = weighted_wins_rows(x, rows, w, atol=atol)  # wins[a, b], a in rows
        losses = _losses_rows(x, rows, w, atol)  # wins[b, a]
        margin = wins - losses
        beaten[rows] = (margin > tol).sum(axis=1)
        lost = -margin > tol
        beaten_by[rows] = lost.sum(axis=1)
        worst[rows] = np.where(lost, losses, 0.0).max(axis=1)
    return MajoritySummary(beaten, beaten_by, worst)
