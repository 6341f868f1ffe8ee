"""Sensitivity of an aggregate ranking to irrelevant changes (Zhang & Hardt, ICML 2024).

**Cardinal sensitivity.** Give every criterion a weight α_j ∈ [ε, 1] (a label-noise
proportion: noise that keeps a task's ranking but shrinks its spread) and look
for the α that moves the weighted-mean ranking furthest from the original
(α = 1). ε = min(0.01, std_min / std_max) over the criteria's standard
deviations unless given. The search optimises a relaxed pairwise surrogate,
Σ over originally ordered pairs (j above i) of max(s_j − s_i, 0) (optionally
weighted by the rank gap), with Adam on α = ε + (1 − ε)·sigmoid(θ) from several
starts, and also tries the "one task up / one task down" vertices; every
candidate is scored exactly and the worst case is kept.

**Ordinal sensitivity.** Take the top 20 % of models by win rate (L) and the
rest (Lᶜ). Which subset of Lᶜ, added to L, perturbs the win-rate ranking of L
the most? Exact enumeration when |Lᶜ| is small, else a straight-through
Bernoulli relaxation (sample a subset, back-propagate through the
probabilities) followed by single-model flips.

Both are reported as the normalised Kendall τ distance (1 − τ_b)/2 and the
max rank change (MRC, divided by n − 1) between the perturbed and the
original ranking. **Both are lower bounds**: the search finds *a* bad case,
not necessarily the worst one.

Both also work for any registered rule (``ranker``): the rule then ranks the
re-weighted table (cardinal) or the table restricted to L ∪ S (ordinal); the
candidates come from the mean / win-rate search plus a rule-evaluated local
search under a call budget.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ranking.analysis._common import Ranker, fast_table, positions, rank_distance
from ranking.analysis.diversity import complete_values
from ranking.floor.errors import UserError
from ranking.table import ScoreTable

LOWER_BOUND_NOTE = "lower bound: the search finds a perturbation this bad; the worst one may be worse"


# ---------------------------------------------------------------------- cardinal
def _batch_distance(cand_pos: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """τ distance and MRC of every row of ``cand_pos`` against ``base`` (vectorised over rows)."""
    n = base.size
    sb = np.sign(base[:, None] - base[None, :])
    taus = np.empty(cand_pos.shape[0])
    den_b = np.abs(sb).sum()
    chunk = max(1, 2_000_000 // max(n * n, 1))
    for lo in range(0, cand_pos.shape[0], chunk):
        p = cand_pos[lo : lo + chunk]
        sp = np.sign(p[:, :, None] - p[:, None, :])
        num = (sp * sb).sum(axis=(1, 2))
        den = np.sqrt(np.abs(sp).sum(axis=(1, 2)) * den_b)
        with np.errstate(invalid="ignore", divide="ignore"):
            taus[lo : lo + chunk] = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    tau_dist = (1.0 - taus) / 2.0
    mrc = np.abs(cand_pos - base).max(axis=1) / max(n - 1, 1)
    same = (cand_pos == base).all(axis=1)
    tau_dist[same] = 0.0
    return tau_dist, mrc


def _surrogate_search(
    x: np.ndarray, w0: np.ndarray, base: np.ndarray, eps: float, *, steps: int, lr: float,
    restarts: int, rng: np.random.Generator, weighted: bool,
) -> list[np.ndarray]:
    """Adam on θ (α = ε + (1 − ε)σ(θ)) minimising the pairwise hinge surrogate; returns visited α's."""
    n, m = x.shape
    better = base[None, :] < base[:, None]  # better[i, j]: j originally above i
    coef = (base[:, None] - base[None, :]) * better if weighted else better.astype(float)
    visited = []
    for r in range(restarts):
        theta = np.zeros(m) if r == 0 else rng.normal(0.0, 2.0, size=m)
        mom, vel = np.zeros(m), np.zeros(m)
        for step in range(1, steps + 1):
            sig = 1.0 / (1.0 + np.exp(-theta))
            alpha = eps + (1.0 - eps) * sig
            aw = alpha * w0
            total = aw.sum()
            s = x @ aw / total
            diff = s[None, :] - s[:, None]  # s_j − s_i
            active = coef * (diff > 0)
            if not active.any():
                visited.append(alpha)
                break
            g_s = active.sum(axis=0) - active.sum(axis=1)  # dL/ds
            grad_alpha = (g_s @ (x - s[:, None])) * w0 / total
            grad = grad_alpha * (1.0 - eps) * sig * (1.0 - sig)
            mom = 0.9 * mom + 0.1 * grad
            vel = 0.999 * vel + 0.001 * grad**2
            theta -= lr * (mom / (1 - 0.9**step)) / (np.sqrt(vel / (1 - 0.999**step)) + 1e-12)
            if step % 5 == 0 or step == steps:
                visited.append(alpha)
    return visited


def default_epsilon(x: np.ndarray) -> float:
    """ε = min(0.01, std_min / std_max) over the criteria's standard deviations across models."""
    std = x.std(axis=0)
    std = std[std > 1e-12]
    return float(min(0.01, std.min() / std.max())) if std.size else 0.01


def cardinal_sensitivity(
    table: ScoreTable,
    ranker: Ranker | None = None,
    *,
    epsilon: float | None = None,
    steps: int = 300,
    lr: float = 0.1,
    restarts: int = 4,
    rule_budget: int = 300,
    impute: str = "knn",
    seed: int = 0,
) -> dict[str, Any]:
    """Worst ranking change found under per-criterion weights α ∈ [ε, 1] (a lower bound).

    ``ranker=None`` ranks by the weighted mean of the oriented scores (the
    paper's setting); a rule's ranker ranks the table re-weighted by α times
    its own weights. Returns τ distance, MRC, ε and the α found.
    """
    x_all, models = complete_values(table, impute)
    w_all = table.weights
    std = x_all.std(axis=0)
    keep = (w_all > 0) & (std > 1e-12)
    if keep.sum() < 2:
        raise UserError(f"{table.source or 'the table'}: cardinal sensitivity needs at least 2 non-constant criteria")
    x, w0 = x_all[:, keep], w_all[keep] / w_all[keep].max()
    names = [c for c, k in zip(table.names, keep) if k]
    eps = default_epsilon(x) if epsilon is None else float(epsilon)
    if not 0 < eps <= 1:
        if epsilon is None:
            raise UserError(
                f"the default epsilon, min(0.01, smallest / largest criterion spread), is {eps:g}, outside (0, 1] "
                "(the criteria's spreads differ too much or overflow): pass --epsilon in (0, 1]"
            )
        raise UserError(f"--epsilon {epsilon}: must be in (0, 1]")
    rng = np.random.default_rng(seed)
    n, m = x.shape

    def mean_positions(alphas: np.ndarray) -> np.ndarray:
        aw = alphas * w0
        return positions((x @ aw.T / aw.sum(axis=1)).T)

    base = mean_positions(np.ones((1, m)))[0]
    cands = [np.ones(m)]
    for weighted in (False, True):
        cands += _surrogate_search(
            x, w0, base, eps, steps=steps, lr=lr, restarts=restarts, rng=rng, weighted=weighted
        )
    vert = np.full((2 * m, m), 1.0)
    vert[np.arange(m), np.arange(m)] = eps  # one criterion down
    up = np.full((m, m), eps)
    up[np.arange(m), np.arange(m)] = 1.0  # one criterion up
    vert[m:] = up
    alphas = np.vstack([np.vstack(cands), vert])
    if ranker is None:
        tau, mrc = _batch_distance(mean_positions(alphas), base)
        best = int(np.lexsort((mrc, tau))[-1])
        best_alpha, best_tau, best_mrc = alphas[best], float(tau[best]), float(mrc[best])
        calls = 0
    else:
        best_alpha, best_tau, best_mrc, calls = _rule_weight_search(
            table, ranker, keep, w0, alphas, eps, rule_budget, rng, base_mean=base
        )
    return {
        "kind": "cardinal",
        "tau_distance": best_tau,
        "mrc": best_mrc,
        "epsilon": eps,
        "weights": {name: float(a) for name, a in zip(names, best_alpha)},
        "n_models": len(models),
        "n_criteria": int(m),
        "rule_calls": calls,
        "lower_bound": True,
        "note": LOWER_BOUND_NOTE,
    }


def _rule_weight_search(
    table: ScoreTable, ranker: Ranker, keep: np.ndarray, w0: np.ndarray, alphas: np.ndarray,
    eps: float, budget: int, rng: np.random.Generator, base_mean: np.ndarray,
) -> tuple[np.ndarray, float, float, int]:
    """Evaluate candidate α's with the rule (most promising by the mean first), then flip single weights."""
    full_w = table.weights.copy()
    kept_idx = np.flatnonzero(keep)

    def run(alpha: np.ndarray) -> np.ndarray:
        w = full_w.copy()
        w[kept_idx] = w0 * alpha * full_w[kept_idx].max()
        return ranker(table.with_weights(w))

    base = run(np.ones(len(kept_idx)))
    # order candidates by how far they move the mean ranking; evaluate up to half the budget
    aw = alphas * w0
    mean_pos = positions((table.oriented[:, keep] @ aw.T / aw.sum(axis=1)).T) if not table.has_missing else None
    if mean_pos is not None:
        tau_m, _ = _batch_distance(mean_pos, base_mean)
        order = np.argsort(-tau_m, kind="stable")
    else:
        order = rng.permutation(len(alphas))
    best_alpha, best_tau, best_mrc = np.ones(len(kept_idx)), 0.0, 0.0
    calls = 1
    for i in order[: max(1, budget // 2)]:
        tau, mrc = rank_distance(run(alphas[i]), base)
        calls += 1
        if (tau, mrc) > (best_tau, best_mrc):
            best_alpha, best_tau, best_mrc = alphas[i].copy(), tau, mrc
    # local search: set one weight to ε or 1 at a time
    improved = True
    while improved and calls < budget:
        improved = False
        for j in rng.permutation(len(kept_idx)):
            if calls >= budget:
                break
            trial = best_alpha.copy()
            trial[j] = 1.0 if trial[j] < 0.5 else eps
            tau, mrc = rank_distance(run(trial), base)
            calls += 1
            if (tau, mrc) > (best_tau, best_mrc):
                best_alpha, best_tau, best_mrc, improved = trial, tau, mrc, True
    return best_alpha, best_tau, best_mrc, calls


# ---------------------------------------------------------------------- ordinal
def win_rate_matrix(values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``W[i, k]`` = weighted share of co-observed criteria on which i scores strictly above k (0 on the diagonal)."""
    x = np.asarray(values, dtype=float)
    n, m = x.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
    ok = ~np.isnan(x)
    z = np.nan_to_num(x)
    wins = np.zeros((n, n))
    tot = np.zeros((n, n))
    chunk = max(1, int(4_000_000 // max(n * n, 1)))
    for lo in range(0, m, chunk):
        sl = slice(lo, lo + chunk)
        both = ok[:, None, sl] & ok[None, :, sl]
        wins += ((z[:, None, sl] > z[None, :, sl]) & both) @ w[sl]
        tot += both @ w[sl]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(tot > 0, wins / np.where(tot > 0, tot, 1), 0.0)
    np.fill_diagonal(out, 0.0)
    return out


def win_rate_matrix_loops(values: np.ndarray) -> np.ndarray:
    """Straightforward reference (triple loop, unit weights) for tests and the benchmark."""
    x = np.asarray(values, dtype=float)
    n, m = x.shape
    out = np.zeros((n, n))
    for i in range(n):
        for k in range(n):
            wins = tot = 0
            for j in range(m):
                if not (math.isnan(x[i, j]) or math.isnan(x[k, j])):
                    tot += 1
                    wins += int(x[i, j] > x[k, j] and i != k)
            out[i, k] = wins / tot if tot else 0.0
    return out


def ordinal_sensitivity(
    table: ScoreTable,
    ranker: Ranker | None = None,
    *,
    top_share: float = 0.2,
    exact_limit: int = 16,
    steps: int = 600,
    lr: float = 0.05,
    rule_budget: int = 400,
    seed: int = 0,
) -> dict[str, Any]:
    """Worst change of the top models' ranking found by adding a subset of the other models (a lower bound).

    ``ranker=None`` ranks by win rate (the paper's setting); a rule's ranker
    ranks the sub-table L ∪ S and the L models are then re-positioned among themselves.
    """
    n = table.n_models
    if not 0 < top_share < 1:
        raise UserError(f"--top-share {top_share}: must be strictly between 0 and 1")
    n_top = max(2, int(n * top_share))
    if n - n_top < 1:
        raise UserError(f"{table.source or 'the table'}: ordinal sensitivity needs more models than the top {n_top}")
    weights = table.weights
    wr = win_rate_matrix(table.oriented, weights)
    overall = wr.mean(axis=1)
    order = np.argsort(-overall, kind="stable")
    top, rest = order[:n_top], order[n_top:]
    a = wr[np.ix_(top, top)].sum(axis=1)
    b = wr[np.ix_(top, rest)]  # |L| × |Lᶜ|
    base = positions(a)
    rng = np.random.default_rng(seed)
    exact = len(rest) <= exact_limit
    if exact:
        subsets = _all_subsets(len(rest))
    else:
        subsets = _relaxed_search(a, b, base, steps=steps, lr=lr, rng=rng)
    tau, mrc = _batch_distance(positions(a[None, :] + subsets @ b.T), base)
    best = int(np.lexsort((mrc, tau))[-1])
    chosen, best_tau, best_mrc = subsets[best], float(tau[best]), float(mrc[best])
    if not exact:
        chosen, best_tau, best_mrc = _flip_search(a, b, base, chosen, best_tau, best_mrc)
    calls = 0
    if ranker is not None:
        chosen, best_tau, best_mrc, calls, exact = _rule_subset_search(
            table, ranker, top, rest, subsets, tau, rule_budget, rng
        )
    return {
        "kind": "ordinal",
        "tau_distance": best_tau,
        "mrc": best_mrc,
        "top_models": [table.models[i] for i in top],
        "added": [table.models[rest[k]] for k in np.flatnonzero(chosen)],
        "n_models": n,
        "n_candidates": int(len(rest)),
        "exact": bool(exact),
        "rule_calls": calls,
        "lower_bound": not exact,
        "note": "exact search over all subsets" if exact else LOWER_BOUND_NOTE,
    }


def _all_subsets(k: int) -> np.ndarray:
    masks = np.arange(1 << k, dtype=np.int64)
    return ((masks[:, None] >> np.arange(k)) & 1).astype(float)


def _relaxed_search(
    a: np.ndarray, b: np.ndarray, base: np.ndarray, *, steps: int, lr: float, rng: np.random.Generator
) -> np.ndarray:
    """Straight-through Bernoulli relaxation: sampled subsets visited while minimising the pairwise surrogate."""
    n_top, k = b.shape
    better = base[:, None] < base[None, :]  # i originally above j
    theta = np.zeros(k)
    mom, vel = np.zeros(k), np.zeros(k)
    visited = [np.zeros(k), np.ones(k)]
    for step in range(1, steps + 1):
        p = 1.0 / (1.0 + np.exp(-theta))
        s = (rng.random(k) < p).astype(float)
        visited.append(s)
        u = a + b @ s
        d = n_top + s.sum()
        wr = u / d
        margin = wr[:, None] - wr[None, :]  # wr_i − wr_j, want below for originally better i
        active = better & (margin > -0.01)
        g = active.sum(axis=1) - active.sum(axis=0)  # dL/dwr
        grad_s = (g @ b) / d - float(g @ u) / d**2
        grad = grad_s * p * (1.0 - p)
        mom = 0.9 * mom + 0.1 * grad
        vel = 0.999 * vel + 0.001 * grad**2
        theta -= lr * (mom / (1 - 0.9**step)) / (np.sqrt(vel / (1 - 0.999**step)) + 1e-12)
    visited.append((1.0 / (1.0 + np.exp(-theta)) > 0.5).astype(float))
    return np.unique(np.array(visited), axis=0)


def _flip_search(
    a: np.ndarray, b: np.ndarray, base: np.ndarray, s: np.ndarray, tau: float, mrc: float
) -> tuple[np.ndarray, float, float]:
    """Hill-climb: flip the one model (in or out) that raises the τ distance most, until none does."""
    s = s.copy()
    k = s.size
    while True:
        flips = np.repeat(s[None, :], k, axis=0)
        flips[np.arange(k), np.arange(k)] = 1.0 - flips[np.arange(k), np.arange(k)]
        t, m = _batch_distance(positions(a[None, :] + flips @ b.T), base)
        j = int(np.lexsort((m, t))[-1])
        if (t[j], m[j]) <= (tau, mrc):
            return s, tau, mrc
        s, tau, mrc = flips[j], float(t[j]), float(m[j])


def _rule_subset_search(
    table: ScoreTable, ranker: Ranker, top: np.ndarray, rest: np.ndarray, subsets: np.ndarray,
    wr_tau: np.ndarray, budget: int, rng: np.random.Generator,
) -> tuple[np.ndarray, float, float, int, bool]:
    """Rank L ∪ S with the rule: every subset if they fit the budget, else the win-rate search's best ones + flips."""
    n_top = len(top)

    def run(s: np.ndarray) -> np.ndarray:
        rows = np.concatenate([top, rest[np.flatnonzero(s)]])
        sub = fast_table(table, rows)
        if sub is None:
            return np.full(n_top, np.nan)
        r = ranker(sub)[:n_top]
        return positions(-np.where(np.isnan(r), np.inf, r))

    base = run(np.zeros(len(rest)))
    exact = len(subsets) <= budget and len(subsets) == (1 << len(rest))
    order = np.arange(len(subsets)) if exact else np.argsort(-wr_tau, kind="stable")[: budget // 2]
    best_s, best_tau, best_mrc = np.zeros(len(rest)), 0.0, 0.0
    calls = 1
    for i in order:
        tau, mrc = rank_distance(run(subsets[i]), base)
        calls += 1
        if (tau, mrc) > (best_tau, best_mrc):
            best_s, best_tau, best_mrc = subsets[i].copy(), tau, mrc
    improved = not exact
    while improved and calls < budget:
        improved = False
        for j in rng.permutation(len(rest)):
            if calls >= budget:
                break
            trial = best_s.copy()
            trial[j] = 1.0 - trial[j]
            tau, mrc = rank_distance(run(trial), base)
            calls += 1
            if (tau, mrc) > (best_tau, best_mrc):
                best_s, best_tau, best_mrc, improved = trial, tau, mrc, True
    return best_s, best_tau, best_mrc, calls, exact
