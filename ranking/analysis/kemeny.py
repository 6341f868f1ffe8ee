"""Kemeny consensus of the criteria's rankings (Colombo et al., NeurIPS 2022), exact up to ~20 systems.

The Kemeny cost of a strict ranking π is the total number of discordant
unordered pairs between π and each criterion's ranking, summed over criteria
and weighted by the criterion weight: a pair counts when the criterion puts
the two systems strictly in the other order. A pair tied in a criterion, or
missing there, is not discordant (``tie_cost`` > 0 charges tied pairs too).

All of it is read from one matrix built once, ``D[u, v]`` = weighted number of
criteria that rank ``v`` strictly above ``u``: placing ``u`` before ``v`` costs
``D[u, v]``. The exact solver is a dynamic programme over subsets: ``f(S)``,
the cheapest ordering of the set ``S`` as the top ``|S|`` positions, obeys
``f(S) = min_{v ∈ S} f(S∖v) + Σ_{u ∈ S∖v} D[u, v]``; it runs layer by layer
(sets of equal size) with numpy, O(n²·2ⁿ) time and O(2ⁿ) memory, and carries
the number of optimal orderings of every set alongside the cost. Beyond
``max_exact`` systems the Borda count (the approximation Colombo et al.
recommend) is returned, marked ``exact=False``.

>>> import pandas as pd
>>> t = ScoreTable.from_frame(pd.DataFrame({"a": [3, 2, 1], "b": [3, 1, 2], "c": [1, 3, 2]}, index=list("XYZ")))
>>> r = kemeny(t)
>>> r.ranking, r.cost, r.n_optimal, r.exact
(['X', 'Y', 'Z'], 3.0, 1, True)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ranking.analysis._common import column_ranks
from ranking.floor.errors import UserError
from ranking.table import ScoreTable

MAX_EXACT = 20
#: Hard limit of the exact solver: 2^22 states take ~40 s and ~0.8 GB; 25 would take minutes and ~6 GB.
EXACT_LIMIT = 22
_REL_TOL = 1e-9
_BLOCK = 4_000_000  # pairwise comparisons held in memory at once by the blocked cost


@dataclass(frozen=True)
class KemenyResult:
    """One optimal (or, if not exact, approximate) consensus ranking, its cost and how many rankings reach it."""

    ranking: list[str]
    cost: float
    n_optimal: int  # number of strict rankings with this cost (0 when not exact: not counted)
    exact: bool
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranking": list(self.ranking),
            "cost": float(self.cost),
            "n_optimal": int(self.n_optimal),
            "exact": bool(self.exact),
            "method": self.method,
        }


def disagreement_matrix(values: np.ndarray, weights: np.ndarray | None = None, tie_cost: float = 0.0) -> np.ndarray:
    """``D[u, v]`` = Σ_j w_j [criterion j ranks v strictly above u] (+ ``tie_cost`` · w_j for tied pairs).

    ``values`` is higher-is-better (models × criteria), NaN = missing (pairs skipped).
    """
    x = np.asarray(values, dtype=float)
    n, m = x.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
    ok = ~np.isnan(x)
    z = np.nan_to_num(x)
    # broadcast over criteria in chunks so memory stays n² · chunk
    out = np.zeros((n, n))
    chunk = max(1, int(4_000_000 // max(n * n, 1)))
    for lo in range(0, m, chunk):
        sl = slice(lo, lo + chunk)
        zu, zv = z[:, None, sl], z[None, :, sl]
        both = ok[:, None, sl] & ok[None, :, sl]
        worse = (zv > zu) & both
        out += (worse * w[sl]).sum(axis=2)
        if tie_cost:
            ties = (zv == zu) & both
            out += tie_cost * (ties * w[sl]).sum(axis=2)
    np.fill_diagonal(out, 0.0)
    return out


def ranking_cost(order: list[int] | np.ndarray, d: np.ndarray) -> float:
    """Kemeny cost of a strict ranking given as model indices best → worst."""
    o = np.asarray(order, dtype=int)
    pos = np.empty(len(o), dtype=int)
    pos[o] = np.arange(len(o))
    before = pos[:, None] < pos[None, :]
    return float(d[before].sum())


def kemeny_dp(d: np.ndarray) -> tuple[list[int], float, int]:
    """Exact Kemeny by dynamic programming over subsets: (one optimal order best → worst, cost, # optimal orders)."""
    n = d.shape[0]
    if n == 0:
        return [], 0.0, 1
    if n > EXACT_LIMIT:
        raise UserError(f"exact Kemeny over {n} systems needs 2^{n} states: at most {EXACT_LIMIT} (Borda beyond)")
    if not np.isfinite(d).all():
        raise UserError("the Kemeny disagreement matrix is not finite (check the weights and --tie-cost)")
    size = 1 << n
    masks = np.arange(size, dtype=np.int64)
    pop = np.zeros(size, dtype=np.int8)
    for b in range(n):
        pop += ((masks >> b) & 1).astype(np.int8)
    order = np.argsort(pop, kind="stable")
    bounds = np.searchsorted(pop[order], np.arange(n + 2))
    f = np.full(size, np.inf)
    cnt = np.zeros(size, dtype=np.int64 if n <= 20 else np.float64)
    f[0] = 0.0
    cnt[0] = 1
    bit = (np.int64(1) << np.arange(n, dtype=np.int64))
    scale = max(1.0, float(np.abs(d).sum()))
    tol = _REL_TOL * scale
    for k in range(1, n + 1):
        layer = order[bounds[k] : bounds[k + 1]]
        members = ((layer[:, None] >> np.arange(n)) & 1).astype(bool)
        g = members.astype(float) @ d  # g[T, v] = Σ_{u ∈ T} D[u, v]  (D[v, v] = 0)
        best = np.full(layer.size, np.inf)
        cand_all = np.full((layer.size, n), np.inf)
        for v in range(n):
            has = members[:, v]
            prev = layer[has] ^ bit[v]
            cand_all[has, v] = f[prev] + g[has, v]
        best = cand_all.min(axis=1)
        f[layer] = best
        hit = cand_all <= best[:, None] + tol
        total = np.zeros(layer.size, dtype=cnt.dtype)
        for v in range(n):
            sel = hit[:, v]
            if sel.any():
                total[sel] += cnt[layer[sel] ^ bit[v]]
        cnt[layer] = total
    # backtrack one optimal order: the last system is a v whose removal attains f
    full = size - 1
    mask = full
    rev: list[int] = []
    while mask:
        members = [v for v in range(n) if mask >> v & 1]
        for v in members:
            prev = mask ^ (1 << v)
            g_v = float(sum(d[u, v] for u in members if u != v))
            if f[prev] + g_v <= f[mask] + tol:
                rev.append(v)
                mask = prev
                break
        else:  # cannot happen with finite costs; never loop forever
            raise RuntimeError("Kemeny backtracking found no optimal predecessor")
    return rev[::-1], float(f[full]), int(cnt[full])


def kemeny_brute_force(d: np.ndarray) -> tuple[list[int], float, int]:
    """Reference: every permutation (n ≤ 9 or so). Same return as :func:`kemeny_dp`."""
    n = d.shape[0]
    best_cost, best, count = np.inf, [], 0
    scale = max(1.0, float(np.abs(d).sum()))
    for perm in itertools.permutations(range(n)):
        c = 0.0
        for a in range(n):
            for b in range(a + 1, n):
                c += d[perm[a], perm[b]]
        if c < best_cost - _REL_TOL * scale:
            best_cost, best, count = c, list(perm), 1
        elif abs(c - best_cost) <= _REL_TOL * scale:
            count += 1
    return best, float(best_cost), count


def borda_order(values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Model indices best → worst by the weighted Borda count (sum of average ranks; missing scores skipped).

    A model missing on a criterion contributes nothing there; the Borda score is
    the weighted mean of its average ranks over the criteria it has.
    """
    x = np.asarray(values, dtype=float)
    w = np.ones(x.shape[1]) if weights is None else np.asarray(weights, dtype=float)
    r = column_ranks(x)
    present = ~np.isnan(r)
    ww = np.where(present, w, 0.0)
    mean_rank = (np.nan_to_num(r) * ww).sum(axis=1) / np.maximum(ww.sum(axis=1), 1e-300)
    return np.argsort(mean_rank, kind="stable")


def blocked_ranking_cost(order: np.ndarray, values: np.ndarray, weights: np.ndarray, tie_cost: float = 0.0) -> float:
    """:func:`ranking_cost` of ``order`` without the n × n matrix (for many systems): blocks of rows.

    >>> x = np.array([[3.0, 1.0], [2.0, 3.0], [1.0, 2.0]])
    >>> d = disagreement_matrix(x, np.ones(2))
    >>> blocked_ranking_cost(np.array([1, 0, 2]), x, np.ones(2)) == ranking_cost([1, 0, 2], d)
    True
    """
    xs = np.asarray(values, dtype=float)[np.asarray(order, dtype=int)]
    n, m = xs.shape
    rows = max(1, _BLOCK // max(n, 1))
    later = np.arange(n)
    total = 0.0
    for j in range(m):
        col = xs[:, j]
        for lo in range(0, n, rows):
            a = col[lo : lo + rows, None]
            after = later[None, :] > np.arange(lo, min(n, lo + rows))[:, None]  # b placed after a
            total += weights[j] * float(np.count_nonzero((col[None, :] > a) & after))  # NaN compares False
            if tie_cost:
                total += tie_cost * weights[j] * float(np.count_nonzero((col[None, :] == a) & after))
    return float(total)


def kemeny(
    table: ScoreTable, *, max_exact: int = MAX_EXACT, tie_cost: float = 0.0, use_weights: bool = True
) -> KemenyResult:
    """Kemeny consensus of a table's criteria: exact (DP) up to ``max_exact`` models, else Borda.

    ``max_exact`` is at most :data:`EXACT_LIMIT`; ``tie_cost`` must be finite and >= 0. Beyond
    ``max_exact`` nothing of size n × n is held in memory (the Borda order's cost is counted in blocks).
    """
    if isinstance(max_exact, bool) or not isinstance(max_exact, (int, np.integer)) or not 0 <= max_exact <= EXACT_LIMIT:
        raise UserError(
            f"--max-exact {max_exact}: the exact solver takes 0 to {EXACT_LIMIT} systems (time and memory grow as 2^n)"
        )
    try:
        tie_cost = float(tie_cost)
    except (TypeError, ValueError):
        raise UserError(f"--tie-cost {tie_cost!r} is not a number") from None
    if not np.isfinite(tie_cost) or tie_cost < 0:
        raise UserError(f"--tie-cost {tie_cost}: must be a finite number >= 0")
    from ranking.rules import safe_weights

    w = table.weights if use_weights else (table.weights > 0).astype(float)
    keep = w > 0
    x, w = table.oriented[:, keep], safe_weights(w[keep])
    if table.n_models <= max_exact:
        d = disagreement_matrix(x, w, tie_cost)
        order, cost, count = kemeny_dp(d)
        return KemenyResult([table.models[i] for i in order], cost, count, True, "dp")
    order = borda_order(x, w)
    cost = blocked_ranking_cost(order, x, w, tie_cost)
    return KemenyResult([table.models[i] for i in order], cost, 0, False, "borda")
