"""The Vote'n'Rank analyses (Rofin et al., EACL 2023): how rankings by different rules compare and how stable they are.

* **agreement@k**: share of the top-k (or least-k) set of a ranking that the
  reference ranking's set also holds;
* **Kendall τ** (τ-b) between full rankings;
* **discriminative power**: how many alternatives share a position with another one (fewer ties = more decisive);
* **IIA experiment**: start from two random systems, add the others one at a
  time in random order, and count how often the relative order of the
  original pair flips (a rule satisfying independence of irrelevant
  alternatives never flips); repeated, reported as mean ± std;
* **robustness to missing scores**: hide N random scores, rank again, and
  measure Spearman ρ over the full-data top-7 between the two rankings.

Rankings are position vectors (1 = best, ties share the best position, NaN =
unranked). Sets with ties: the top-k set holds every model whose position is
≤ k, so a tie at the boundary can make it larger than k; agreement is then
``|A ∩ B| / max(|A|, |B|)``, which is ``|A ∩ B| / k`` without ties.

>>> agreement_at_k(np.array([1, 2, 3, 4.0]), np.array([2, 1, 4, 3.0]), k=2)
1.0
>>> agreement_at_k(np.array([1, 2, 3, 4.0]), np.array([2, 1, 4, 3.0]), k=1, which="least")
0.0
>>> discriminative_power(np.array([1, 1, 3, 4, 4, 4.0]))
5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ranking.analysis._common import Ranker, fast_table, kendall_tau, spearman_rho
from ranking.floor.errors import UserError
from ranking.table import ScoreTable


def _position_set(ranks: np.ndarray, k: int, which: str) -> set[int]:
    r = np.asarray(ranks, dtype=float)
    ok = ~np.isnan(r)
    if which == "top":
        return set(np.flatnonzero(ok & (r <= k)).tolist())
    if which == "least":
        # position from the bottom: 1 + number of ranked models strictly worse
        rr = r[ok]
        worse = (rr[None, :] > rr[:, None]).sum(axis=1)
        idx = np.flatnonzero(ok)
        return set(idx[worse + 1 <= k].tolist())
    raise ValueError(f"which must be 'top' or 'least', not {which!r}")


def agreement_at_k(ranks: np.ndarray, reference: np.ndarray, k: int, which: str = "top") -> float:
    """Agreement of the top-k (``which="top"``) or least-k (``"least"``) sets of two rankings, in [0, 1]."""
    if k < 1:
        raise UserError(f"-k {k}: k must be at least 1")
    a = _position_set(ranks, k, which)
    b = _position_set(reference, k, which)
    size = max(len(a), len(b))
    return 1.0 if size == 0 else len(a & b) / size


def discriminative_power(ranks: np.ndarray) -> int:
    """Number of ranked alternatives that share their position with at least one other (0 = no ties)."""
    r = np.asarray(ranks, dtype=float)
    r = r[~np.isnan(r)]
    _, counts = np.unique(r, return_counts=True)
    return int(counts[counts > 1].sum())


def compare_rankings(
    rankings: dict[str, np.ndarray], reference: np.ndarray, ks: Sequence[int] = (1, 3, 5)
) -> list[dict[str, Any]]:
    """One row per ranking: top-k / least-k agreement with the reference, Kendall τ, ties, distinct positions."""
    rows = []
    for name, r in rankings.items():
        row: dict[str, Any] = {"rule": name}
        for k in ks:
            row[f"top{k}"] = agreement_at_k(r, reference, k, "top")
            row[f"least{k}"] = agreement_at_k(r, reference, k, "least")
        row["kendall_tau"] = kendall_tau(r, reference)
        row["tied"] = discriminative_power(r)
        row["distinct_positions"] = int(np.unique(r[~np.isnan(r)]).size)
        rows.append(row)
    return rows


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)


def iia_experiment(
    table: ScoreTable,
    ranker: Ranker,
    *,
    repetitions: int = 50,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Count flips of a random pair's relative order while random systems are added one at a time.

    The relative order of the pair (a before b, b before a, or tied) is read
    after every addition; a flip is any change of it between consecutive
    steps. Returns mean and std of the flip count over the repetitions (and the
    share of repetitions with at least one flip).
    """
    n = table.n_models
    if n < 3:
        raise UserError(f"{table.source or 'the table'}: the IIA experiment needs at least 3 models, got {n}")
    if repetitions < 1:
        raise UserError(f"--repetitions {repetitions}: give at least 1")
    rng = np.random.default_rng(seed)
    flips = np.zeros(repetitions, dtype=int)
    with _progress(repetitions, "IIA", progress) as bar:
        for rep in range(repetitions):
            perm = rng.permutation(n)
            prev = None
            for t in range(2, n + 1):
                sub = fast_table(table, perm[:t])
                if sub is None:
                    continue
                r = ranker(sub)
                ra, rb = r[0], r[1]
                state = "?" if np.isnan(ra) or np.isnan(rb) else int(np.sign(rb - ra))
                if prev is not None and state != prev:
                    flips[rep] += 1
                prev = state
            bar.update(1)
    return {
        "repetitions": repetitions,
        "n_models": n,
        "flips_mean": float(flips.mean()),
        "flips_std": float(flips.std(ddof=1)) if repetitions > 1 else 0.0,
        "share_with_flip": float((flips > 0).mean()),
        "flips": flips.tolist(),
    }


def _draw_missing(present: np.ndarray, n_missing: int, rng: np.random.Generator, attempts: int = 200) -> np.ndarray:
    """A copy of ``present`` with ``n_missing`` more cells hidden, leaving every row and column a score."""
    cells = np.argwhere(present)
    for _ in range(attempts):
        pick = cells[rng.choice(len(cells), size=n_missing, replace=False)]
        mask = present.copy()
        mask[pick[:, 0], pick[:, 1]] = False
        if mask.any(axis=1).all() and mask.any(axis=0).all():
            return mask
    raise UserError(
        f"--n-missing {n_missing}: could not hide that many scores without emptying a model or a criterion; use fewer"
    )


def missing_experiment(
    table: ScoreTable,
    ranker: Ranker,
    *,
    n_missing: Sequence[int] = (1, 5, 10),
    repetitions: int = 100,
    top: int = 7,
    seed: int = 0,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Spearman ρ between the full-data ranking and the ranking with N scores hidden, over the full-data top-``top``.

    The top set is the ``top`` best models of the full-data ranking (table
    order breaks ties). A model the perturbed ranking leaves unranked counts
    as last. One row per N: mean and std of ρ over the repetitions. How a rule
    treats the hidden scores is the rule's own convention (majority rules skip
    the pair, mean baselines impute the criterion's median).
    """
    if repetitions < 1:
        raise UserError(f"--repetitions {repetitions}: give at least 1")
    if top < 2:
        raise UserError(f"--top {top}: Spearman ρ needs at least 2 models")
    n = table.n_models
    base = ranker(table)
    key = np.where(np.isnan(base), np.inf, base)
    top_idx = np.argsort(key, kind="stable")[: min(top, n)]
    present = ~table.missing
    rng = np.random.default_rng(seed)
    rows = []
    for n_hide in n_missing:
        if n_hide < 1 or n_hide >= int(present.sum()):
            raise UserError(f"--n-missing {n_hide}: must be between 1 and {int(present.sum()) - 1}")
        rhos = np.empty(repetitions)
        with _progress(repetitions, f"missing N={n_hide}", progress) as bar:
            for rep in range(repetitions):
                mask = _draw_missing(present, n_hide, rng)
                values = np.where(mask, table.values, np.nan)
                sub = fast_table(table, values=values)
                r = ranker(sub) if sub is not None else np.full(n, np.nan)
                r = np.where(np.isnan(r), n + 1.0, r)
                rhos[rep] = spearman_rho(base[top_idx], r[top_idx])
                bar.update(1)
        rows.append(
            {
                "n_missing": int(n_hide),
                "rho_mean": float(rhos.mean()),
                "rho_std": float(rhos.std(ddof=1)) if repetitions > 1 else 0.0,
                "repetitions": repetitions,
                "top": int(len(top_idx)),
            }
        )
    return rows
