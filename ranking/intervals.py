"""Rank intervals and tiers: which ranks the data can separate, for every rule, for all models at once.

A rule turns a score table into scores; the table's scores are uncertain (the seeds of a grid, the
standard errors an importer kept). This module draws tables from that uncertainty, scores every draw
with the rule, and turns the draws into **simultaneous confidence intervals for the differences of the
rule's scores**, then into rank intervals and tiers — inference for ranks in the spirit of Mogstad,
Romano, Shaikh & Wilhelm (2024, "Inference for ranks with applications to mobility across
neighbourhoods and academic achievement across countries", REStud).

Why not a percentile bootstrap of the ranks
    A rank is a discontinuous function of the scores: where two models' true scores tie, the bootstrap
    distribution of their ranks does not approach the truth, and percentile intervals of ranks
    undercover (or, with many near-ties, say nothing about which models *are* separable). Score
    *differences* are smooth where ranks are not: a difference near 0 simply gets an interval that
    contains 0, and the two models stay unseparated. So we bound every pairwise difference at once
    and read the rank bounds off the pairs that are settled.

The method (for one rule, ``n`` ranked models, ``B`` draws)
    1. Draws: ``B`` tables from the table's uncertainty (:func:`draw_source`: the standard errors,
       each score from Normal(score, se); else a seed bootstrap of ``seeds.csv``); every draw is
       scored by the rule: ``S*_b`` (``B × n``, the only large array; it is filled in chunks).
    2. Per model, the spread of its score over the draws ``σ_i``, and per draw its deviation from
       the table's own score ``D_bi = S*_bi − S_i`` (models whose score never moves: ``σ = 0``, ``D = 0``).
    3. Per draw the max statistic over all ordered pairs
       ``M_b = max_{i≠j} (D_bi − D_bj) / (σ_i + σ_j)``, and ``c`` its ``level`` quantile. Then with
       probability ≈ ``level`` every difference at once satisfies
       ``S_i − S_j − c (σ_i + σ_j) ≤ θ_i − θ_j ≤ S_i − S_j + c (σ_i + σ_j)``.
       ``M_b ≤ c`` exactly when the intervals ``[D_bi − cσ_i, D_bi + cσ_i]`` share a point
       (``max_i(D_bi − cσ_i) ≤ min_j(D_bj + cσ_j)``), so ``M_b`` is found per draw by Dinkelbach's
       iteration in O(n) work per step — never an ``n × n`` array (memory O(B·n)).
    4. ``j`` is **surely above** ``i`` when ``S_j − cσ_j > S_i + cσ_i`` (the lower bound of
       ``θ_j − θ_i`` is positive). ``rank_lo = 1 + #surely above``, ``rank_hi = n − #surely below``
       (counted with two sorts). The point rank always lies inside.
    5. **Tiers** (greedy, in the point order): the best model opens tier 1; each next model joins the
       current tier unless it is surely below *every* model of that tier, in which case it opens the
       next tier. So the model opening tier ``t+1`` is surely below every model of tier ``t``; inside a
       tier, some pairs may be separated, but no model is separated from all the others before it.

    What is drawn is the rule's *score*: where a rule orders models beyond its score (Threshold's
    lexicographic tie-break, Condorcet's "everyone else shares position 2"), models equal in score share an
    interval, whatever the tie-break says.

    The scale ``σ_i + σ_j`` (rather than the spread of each difference) keeps the statistic O(n) per
    draw; since it is at least the difference's own spread, the max statistic adapts ``c`` to it.
    The simultaneous level is for all ``n(n−1)`` comparisons of one rule (not across rules).

    Measured (``tests/test_rank_intervals.py``'s simulation, 1000 tables of 5 models × 6 criteria drawn
    around known true scores, 400 draws each): every model's true rank inside its interval in 99.5 %
    (Borda), 98.4 % (Copeland), 99.8 % (arithmetic mean) of the tables at the nominal 95 %; with two pairs
    of exactly tied true scores 99.8 %, 99.4 %, 99.2 % — conservative, as a max statistic over all pairs is.

Many draws fast
    Every rule sees the same draws (one seed), scored in chunks: the positional rules from one sort per
    (draw, criterion) shared by all of them (Plurality and Threshold need only the first and last place),
    the arithmetic mean as a matrix product, and Copeland, Minimax, Condorcet and Baldwin from one pairwise
    count per chunk (integer places, 2-byte compares). Other rules, settings and scenario columns rank each
    drawn table with the rule itself. ``scripts/bench_rank.py`` measures it beside a plain numpy bootstrap.

Hand-worked example: three models, the draws give spreads σ = (1, 1, 0.5) and the quantile c = 2.
Scores S = (10, 9, 2): intervals S ± cσ are [8, 12], [7, 11], [1, 3]. A and B overlap (neither
surely above the other); both lower bounds (8, 7) exceed C's upper bound 3, so C is surely below
both. Rank intervals: A [1, 2], B [1, 2], C [3, 3]; tiers: A and B tier 1, C tier 2.

>>> lo, hi = rank_bounds(np.array([10.0, 9.0, 2.0]), np.array([1.0, 1.0, 0.5]), 2.0)
>>> lo.tolist(), hi.tolist()
([1.0, 1.0, 3.0], [2.0, 2.0, 3.0])
>>> tiers_of(np.array([10.0, 9.0, 2.0]), np.array([1.0, 1.0, 0.5]), 2.0).tolist()
[1.0, 1.0, 2.0]
>>> critical_value(np.array([[1.0, -1.0], [0.0, 0.0], [-0.5, 0.5]]), np.array([1.0, 1.0]), 0.5)
0.5
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.plan import DEFAULT_DRAWS  # draws per interval by default: the declaration's (RankPlan.draws)
from ranking.table import ScoreTable

#: Elements of one chunk of drawn tables (draws × models × criteria), about 40 MB of floats.
CHUNK_ELEMENTS = 5_000_000
#: Two scores closer than this (relative to the largest score) count as equal when bounds are compared.
SCORE_RTOL = 1e-9


# ====================================================================== where the draws come from
@dataclass(frozen=True)
class DrawSource:
    """A sampler of tables around a score table: ``sample(rng, k)`` → ``k × models × criteria`` values.

    ``kind`` is ``standard_errors`` or ``seeds``; ``cells`` how many cells carry uncertainty;
    ``detail`` a few words for the output (e.g. ``seeds.csv, 5 seeds per cell``).
    """

    kind: str
    cells: int
    detail: str
    sample: Callable[[np.random.Generator, int], np.ndarray] = field(repr=False)
    #: no two scores of a drawn column can be equal (continuous noise, no two fixed equal scores in a column)
    tie_free: bool = False

    def describe(self, draws: int, total_cells: int) -> str:
        """E.g. ``1000 draws from the scores' standard errors (12 of 15 cells carry one)``."""
        what = {"standard_errors": "draws from the scores' standard errors",
                "seeds": "seed-bootstrap resamples"}[self.kind]
        return f"{draws} {what} ({self.detail}; {self.cells} of {total_cells} cells uncertain)"


def error_source(table: ScoreTable) -> DrawSource:
    """Each score from Normal(score, its standard error), independently; unknown (NaN) or 0 errors: fixed."""
    assert table.standard_errors is not None
    spread = np.nan_to_num(table.standard_errors, nan=0.0) * (~np.isnan(table.values))
    values = table.values
    values_t, spread_t = np.ascontiguousarray(values.T), np.ascontiguousarray(spread.T)

    def sample(rng: np.random.Generator, k: int) -> np.ndarray:
        # criterion-major in memory (a per-criterion sort reads contiguous rows); single-precision standard
        # normals (half the generator's time), scaled in double precision
        noise = rng.standard_normal((k, *values_t.shape), dtype=np.float32)
        return np.swapaxes(values_t[None] + noise * spread_t[None], 1, 2)

    cells = int(np.count_nonzero(spread > 0))
    tie_free = True
    for j in range(values.shape[1]):
        fixed = values[(spread[:, j] == 0) & ~np.isnan(values[:, j]), j]
        tie_free &= bool(np.unique(fixed).size == fixed.size)
    return DrawSource("standard_errors", cells, "each score from Normal(score, its standard error)", sample, tie_free)


SEED_COLUMNS = ("model", "criterion", "seed", "value")


def read_seeds(path: str | Path, table: ScoreTable) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per model index: (criterion indices, values array criteria × seeds with NaN gaps).

    Rows for models or criteria the (scenario) table does not have are ignored.
    """
    import pandas as pd

    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise UserError(f"per-seed results {path}: no such file") from None
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise UserError(f"cannot read per-seed results {path}: {exc}") from None
    missing = [c for c in SEED_COLUMNS if c not in frame.columns]
    if missing:
        raise UserError(f"per-seed results {path}: missing column {missing[0]!r} (needs {', '.join(SEED_COLUMNS)})")
    values = pd.to_numeric(frame["value"], errors="coerce")
    bad = values.isna() & frame["value"].notna()
    if bad.any():
        row = frame[bad].iloc[0]
        raise UserError(f"per-seed results {path}: value {row['value']!r} of {row['model']}/{row['criterion']} is not a number")
    frame = frame.assign(value=values, model=frame["model"].astype(str), criterion=frame["criterion"].astype(str))
    frame = frame[frame["model"].isin(table.models) & frame["criterion"].isin(table.names)].dropna(subset=["value"])
    if frame.duplicated(["model", "criterion", "seed"]).any():
        row = frame[frame.duplicated(["model", "criterion", "seed"])].iloc[0]
        raise UserError(f"per-seed results {path}: {row['model']}/{row['criterion']} seed {row['seed']} appears twice")
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for model, sub in frame.groupby("model", sort=False):
        wide = sub.pivot(index="criterion", columns="seed", values="value")
        crit_idx = np.array([table.names.index(c) for c in wide.index])
        out[table.models.index(model)] = (crit_idx, wide.to_numpy(dtype=float))
    return out


def seed_source(table: ScoreTable, path: str | Path) -> DrawSource:
    """A seed bootstrap from ``seeds.csv`` (long: model, criterion, seed, value), vectorised over models.

    Per draw and model, its seeds are drawn with replacement (the same draw for all of the model's
    criteria, so metrics of one run stay together) and each seeded cell becomes the mean of the drawn
    seeds; cells without seeds keep the table's value. (What ``--bootstrap`` does, as
    :func:`ranking.scenarios.bootstrap.resample_values`.)
    """
    per_model = read_seeds(path, table)
    if not per_model:
        raise UserError(f"{path} names none of the table's models and criteria: nothing to resample; "
                        "rank the table its seeds belong to")
    n, m = table.shape
    by_count: dict[int, list[int]] = {}
    for i, (_, per_seed) in per_model.items():
        by_count.setdefault(per_seed.shape[1], []).append(i)
    groups = []
    cells = 0
    for s, rows in by_count.items():
        arr = np.full((len(rows), m, s), np.nan)
        for r, i in enumerate(rows):
            crit, per_seed = per_model[i]
            arr[r, crit] = per_seed
        cells += int(np.count_nonzero(~np.isnan(arr).all(axis=2)))
        groups.append((np.array(rows), s, arr))
    values = table.values
    counts_seen = sorted(by_count)
    detail = f"{Path(path).name}, {'/'.join(map(str, counts_seen))} seeds per model"

    def sample(rng: np.random.Generator, k: int) -> np.ndarray:
        out = np.repeat(values[None], k, axis=0)
        for rows, s, arr in groups:
            idx = rng.integers(0, s, size=(k, rows.size, s))
            counts = np.zeros((k, rows.size, s))
            for t in range(s):  # counts of each seed in the draw
                counts += idx[:, :, t : t + 1] == np.arange(s)
            present = ~np.isnan(arr)  # rows × m × s
            filled = np.where(present, arr, 0.0)
            total = np.einsum("krs,rms->krm", counts, present.astype(float))
            mean = np.einsum("krs,rms->krm", counts, filled)
            ok = total > 0
            block = out[:, rows]
            out[:, rows] = np.where(ok, mean / np.where(ok, total, 1.0), block)
        return out

    return DrawSource("seeds", cells, detail, sample)


def draw_source(table: ScoreTable, seeds: str | Path | None = None) -> DrawSource:
    """Where the uncertainty comes from: the table's standard errors, else ``seeds`` (or ``seeds.csv`` beside it).

    A table with neither is refused with what to do.
    """
    if table.standard_errors is not None and np.nansum(table.standard_errors) > 0:
        return error_source(table)
    if seeds is None and table.source:
        beside = Path(table.source).with_name("seeds.csv")
        if Path(table.source).suffix.lower() == ".csv" and beside.is_file():
            seeds = beside
    if seeds is not None:
        return seed_source(table, seeds)
    where = f" ({table.source})" if table.source else ""
    raise UserError(
        f"--intervals: the table{where} carries no uncertainty — no standard errors (stderr.csv named by its "
        "sidecar) and no seeds.csv beside it; rank a `vnr collect` results folder (it keeps every seed), "
        "import a source with standard errors (vnr import lm-eval), or drop --intervals"
    )


def few_scores(present: Mapping[str, int]) -> dict[str, str]:
    """Models with scores on fewer than half of the criteria → ``k/m`` (``present``: model → k, m = the most).

    >>> few_scores({"A": 81, "B": 2, "C": 60})
    {'B': '2/81'}
    """
    if not present:
        return {}
    most = max(present.values())
    return {m: f"{k}/{most}" for m, k in present.items() if k < most / 2}


# ====================================================================== scores of many drawn tables
def _positional_batch(x: np.ndarray, weights: np.ndarray, vector: Any, ties: str, tie_free: bool = False,
                      shared: dict[str, Any] | None = None) -> np.ndarray:
    """Weighted positional scores of ``k`` drawn tables at once: ``x`` is ``k × n × m`` oriented (NaN missing).

    The same points as :func:`ranking.rules.positional_scores` (exact ties, missing scores ranked among
    the present models only): one sort per (draw, criterion) gives, for every model, how many present
    models are strictly below (the start of its run of equal values) and strictly above. ``tie_free``
    (no two scores of a column can be equal): a model's place in the sort is the count below.
    """
    k, n, m = x.shape
    xt = np.ascontiguousarray(np.moveaxis(x, 1, 2))  # k × m × n (a view when the draws are criterion-major)
    if tie_free and vector.name in ("borda", "dowdall") and not np.isnan(xt[0]).any():
        # complete scores (every draw has the table's missing pattern): the points of sorted place p
        # (Borda: p models below; Dowdall: 1 / place from the top) added up per model straight from the
        # sort, one bincount per draw, no inverse permutation
        shared = {} if shared is None else shared
        if "order" not in shared:
            shared["order"] = np.argsort(xt, axis=-1)
        place = np.arange(n, dtype=float)
        pts = ((place if vector.name == "borda" else 1.0 / (n - place))[None, :] * weights[:, None]).ravel()
        order = shared["order"].reshape(k, m * n)
        return np.stack([np.bincount(order[d], weights=pts, minlength=n) for d in range(k)])
    missing = np.isnan(xt)
    if tie_free and vector.name in ("plurality", "threshold1"):  # only the first / the last place: no sort
        top = vector.name == "plurality"
        pick = np.argmax(np.where(missing, -np.inf, xt), axis=-1) if top else np.argmin(
            np.where(missing, np.inf, xt), axis=-1)
        hit = np.zeros((k, n))
        np.add.at(hit, (np.repeat(np.arange(k), m), pick.ravel()), np.tile(weights, k))
        if top:
            return hit
        present_weight = np.einsum("kmn,m->kn", (~missing).astype(float), weights)
        return present_weight - hit
    any_missing = bool(missing.any())
    key = np.where(missing, np.inf, xt) if any_missing else xt  # missing scores sort last
    shared = {} if shared is None else shared
    if "order" not in shared:  # one sort per chunk of draws, shared by the positional rules
        shared["order"] = np.argsort(key, axis=-1)
    order = shared["order"]
    present = (~missing).sum(axis=-1, keepdims=True).astype(float)
    if tie_free and vector.name in ("borda", "dowdall"):
        # the points of sorted place p (Borda: p models below; Dowdall: 1 / place from the top), added up per
        # model straight from the sort: one weighted bincount, no inverse permutation
        place = np.arange(n, dtype=float)
        shown = place < present  # missing scores sort past the present ones and earn nothing
        with np.errstate(divide="ignore"):
            pts = place if vector.name == "borda" else 1.0 / (present - place)
        pts = np.where(shown, pts, 0.0) * weights[None, :, None]
        target = (order + (np.arange(k) * n)[:, None, None]).ravel()
        return np.bincount(target, weights=np.broadcast_to(pts, order.shape).ravel(), minlength=k * n).reshape(k, n)
    if tie_free:
        if "below" not in shared:
            below = np.empty(xt.shape)
            np.put_along_axis(below, order, np.broadcast_to(np.arange(n, dtype=float), xt.shape), axis=-1)
            shared["below"] = below
        below = shared["below"].copy()
        above = present - 1.0 - below
        below[missing] = np.nan
        above[missing] = np.nan
        pts = vector.points(above, below, present, ties)
        return np.einsum("kmn,m->kn", np.nan_to_num(pts, nan=0.0), weights)
    srt = np.take_along_axis(key, order, axis=-1)
    idx = np.arange(n)
    new = np.ones(srt.shape, dtype=bool)
    new[..., 1:] = srt[..., 1:] != srt[..., :-1]
    start = np.maximum.accumulate(np.where(new, idx, 0), axis=-1)
    last = np.ones(srt.shape, dtype=bool)
    last[..., :-1] = new[..., 1:]
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, idx, n - 1), -1), axis=-1), -1)
    below = np.empty(srt.shape)
    above = np.empty(srt.shape)
    np.put_along_axis(below, order, start.astype(float), axis=-1)
    np.put_along_axis(above, order, present - 1.0 - end, axis=-1)
    below[missing] = np.nan
    above[missing] = np.nan
    pts = vector.points(above, below, present, ties)
    return np.einsum("kmn,m->kn", np.nan_to_num(pts, nan=0.0), weights)


def _baldwin_batch(points: np.ndarray, tol: float) -> np.ndarray:
    """Baldwin's "models eliminated before it" for ``k`` draws at once (``points``: ``k × n × n``, ``[d, a, b]`` =
    what ``a`` scores from ``b``): every round removes, in every draw, the survivors within ``tol`` of the lowest
    Borda score (all of them when all tie), and lowers the others' Borda by their points from the removed —
    :func:`ranking.rules.baldwin_elimination`'s rounds, vectorised over the draws (O(k·n²) in all)."""
    k, n, _ = points.shape
    rows = np.arange(k)
    borda = points.sum(axis=2)
    alive = np.ones((k, n), dtype=bool)
    done = np.zeros(k, dtype=bool)
    before = np.zeros((k, n))
    eliminated = np.zeros(k)
    for _ in range(n + 1):
        if done.all():
            break
        low = np.where(alive, borda, np.inf).min(axis=1)
        high = np.where(alive, borda, -np.inf).max(axis=1)
        tie = ~done & (high - low <= tol)
        before = np.where(tie[:, None] & alive, eliminated[:, None], before)
        done |= tie
        out = alive & ~done[:, None] & (borda <= low[:, None] + tol)
        before = np.where(out, eliminated[:, None], before)
        eliminated += out.sum(axis=1)
        alive &= ~out
        done |= ~alive.any(axis=1)
        pending = out.copy()
        while pending.any():
            e = np.argmax(pending, axis=1)
            has = pending[rows, e]
            borda[has] -= points[rows[has], :, e[has]]
            pending[rows[has], e[has]] = False
    return before


def _below_counts(xt: np.ndarray) -> np.ndarray:
    """Per (draw, criterion) row of ``xt`` (``k × m × n``): how many present scores are strictly below each
    score (int16; equal scores get equal counts), -1 where the score is missing."""
    k, m, n = xt.shape
    missing = np.isnan(xt)
    key = np.where(missing, np.inf, xt)
    order = np.argsort(key, axis=-1)
    srt = np.take_along_axis(key, order, axis=-1)
    new = np.ones(srt.shape, dtype=bool)
    new[..., 1:] = srt[..., 1:] != srt[..., :-1]
    start = np.maximum.accumulate(np.where(new, np.arange(n, dtype=np.int16), np.int16(0)), axis=-1)
    below = np.empty(srt.shape, dtype=np.int16)
    np.put_along_axis(below, order, start, axis=-1)
    below[missing] = -1
    return below


def _mean_batch(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted arithmetic means of ``k`` drawn tables (``k × n × m`` oriented), missing → the column's median."""
    if np.isnan(x).any():
        med = np.nanmedian(x, axis=1, keepdims=True)
        x = np.where(np.isnan(x), med, x)
    return x @ weights / weights.sum()


#: The rules :func:`_majority_batch` scores from the draws' pairwise wins (its own dispatch: the registry's
#: majority rules and Baldwin, whose Borda points are pairwise wins).
MAJORITY_RULES = ("copeland", "minimax", "condorcet", "baldwin")
#: Most models for the vectorised majority scorers (their chunks hold draws × n × n margins; int16 places).
MAJORITY_LIMIT = 1000


def _majority_wins(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``k × n × n`` weighted wins ``W[d, a, b] = Σ_j w_j [x_daj > x_dbj]`` of ``k`` drawn tables (a missing
    score gives no vote), built one criterion at a time from integer places (2-byte compares), counted in
    integers when every weight is equal."""
    k, n, m = x.shape
    equal = bool(np.all(weights == weights[0]))
    places = _below_counts(np.ascontiguousarray(np.moveaxis(x, 1, 2)))  # k × m × n, -1 = missing
    counts = np.zeros((k, n, n), dtype=np.int32 if equal else float)
    for j in range(m):
        col = places[:, j, :]
        cmp = col[:, :, None] > col[:, None, :]
        if (col < 0).any():
            cmp &= (col >= 0)[:, None, :]
        if equal:
            counts += cmp
        else:
            counts += weights[j] * cmp
    return counts * float(weights[0]) if equal else counts


def _majority_batch(x: np.ndarray, weights: np.ndarray, rule: str, ties: str,
                    shared: dict[str, Any] | None = None, tie_free: bool = False) -> np.ndarray:
    """Scores of ``k`` drawn tables (``k × n × m`` oriented) under a pairwise-majority rule or Baldwin.

    The weighted wins (:func:`_majority_wins`, computed once per chunk of draws and kept in ``shared`` for the
    other majority rules) are read as :func:`ranking.pairwise.majority_summary` reads them (margins beyond
    ``1e-12 × Σw``) for Copeland, Minimax and Condorcet; Baldwin eliminates on each draw's points
    (:func:`_baldwin_batch`).
    """
    from ranking.pairwise import majority_tolerance
    from ranking.rules import WEIGHT_RTOL

    k, n, m = x.shape
    shared = {} if shared is None else shared
    if "wins" not in shared:
        shared["wins"] = _majority_wins(x, weights)
    wins = shared["wins"]
    tol = majority_tolerance(float(weights.sum()))
    if rule == "baldwin":
        points = wins
        missing = np.isnan(x)
        if ties == "default" and not (tie_free and not missing.any()):  # else no pair is ever tied
            present = (~missing).astype(float)
            both = np.empty((k, n, n))
            for d in range(k):  # the weight both have a score on
                both[d] = (present[d] * weights) @ present[d].T
            tied = np.clip(both - wins - np.swapaxes(wins, 1, 2), 0.0, None)
            idx = np.arange(n)
            tied[:, idx, idx] = 0.0
            points = wins + 0.5 * tied
        return _baldwin_batch(points, WEIGHT_RTOL * float(weights.sum()) * max(n, 1))
    if "beats" not in shared:
        shared["beats"] = (wins - np.swapaxes(wins, 1, 2)) > tol
    beats = shared["beats"]
    if rule == "copeland":
        return (beats.sum(axis=2) - beats.sum(axis=1)).astype(float)
    if rule == "condorcet":
        return (beats.sum(axis=2) == n - 1).astype(float)
    worst = np.where(beats, wins, 0.0).max(axis=1) if n > 1 else np.zeros((k, n))  # minimax
    return -worst + 0.0


def batch_scorer(table: ScoreTable, rule: str, setting: str, params: Mapping[str, Any], tie_free: bool = False
                 ) -> Callable[..., np.ndarray] | None:
    """A vectorised scorer of many drawn tables for ``rule`` (``k × n × m`` values → ``k × n`` scores; an optional
    ``shared`` dict lets the majority rules of one chunk of draws share its pairwise wins), or
    None where only the rule itself can score a draw. Covered: the basic setting, exact ties (``atol`` 0),
    plurality / Borda / Dowdall / Threshold's score, the arithmetic mean, and (up to
    :data:`MAJORITY_LIMIT` models) Copeland, Minimax, Condorcet and Baldwin — equal to the rule's scores
    (checked in the tests)."""
    from ranking.rules import BORDA, DOWDALL, HUGE, PLURALITY, THRESHOLD, _rankable

    if setting != "basic" or float(params.get("atol", 0.0) or 0.0) != 0.0:
        return None
    vectors = {"plurality": PLURALITY, "borda": BORDA, "dowdall": DOWDALL, "threshold": THRESHOLD}
    majority = MAJORITY_RULES
    if rule not in vectors and rule not in majority and rule != "arithmetic_mean":
        return None
    if rule in majority and table.n_models > MAJORITY_LIMIT:
        return None
    if np.abs(table.values[~np.isnan(table.values)]).max() > HUGE / 1e3:
        return None
    sub, keep = _rankable(table)
    used = table.weights > 0
    signs, w = sub.signs, sub.weights
    ties = params.get("ties") or "default"
    n = table.n_models

    targets = np.array([c.target if c.direction == "target" else np.nan for c in sub.criteria])
    aimed = ~np.isnan(targets)  # closest-to-a-target columns: oriented as minus the distance to the target
    whole, positive = bool(keep.all() and used.all()), bool(np.all(signs > 0) and not aimed.any())

    def score(values: np.ndarray, shared: dict[str, Any] | None = None) -> np.ndarray:
        x = values if whole else values[:, keep][:, :, used]
        if not positive:
            x = np.where(aimed, -np.abs(x - np.where(aimed, targets, 0.0)), x * signs)
        if rule in vectors:
            s = _positional_batch(x, w, vectors[rule], ties, tie_free, shared)
        elif rule in majority:
            s = _majority_batch(x, w, rule, ties, shared, tie_free)
        else:
            s = _mean_batch(x, w)
        out = np.full((values.shape[0], n), np.nan)
        out[:, keep] = s
        return out

    return score


@dataclass(frozen=True)
class Scoring:
    """How one rule (or scenario column) scores drawn tables: ``rule`` under ``plan`` (a
    :class:`ranking.plan.RankPlan`; else one built from ``setting`` and ``kwargs``, the arguments of
    :func:`ranking.rank`), the point result's tie convention and ``atol`` (``resolved``: whether a
    vectorised scorer applies), or ``score_one`` (a drawn table → scores) for what only it can score."""

    rule: str
    setting: str = "basic"
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    resolved: Mapping[str, Any] = field(default_factory=dict)
    score_one: Callable[[ScoreTable], np.ndarray] | None = None
    plan: Any = None

    def ranking_plan(self) -> Any:
        """The plan the rule ranks a drawn table under (None for a ``score_one`` of its own setting)."""
        from ranking.choices import SETTINGS
        from ranking.plan import RankPlan

        if self.plan is not None:
            return self.plan
        if self.setting not in SETTINGS:
            return None
        try:
            return RankPlan.build(self.rule, setting=self.setting, **self.kwargs)
        except UserError:
            if self.score_one is not None:  # e.g. a scenario's board column: only it scores a draw
                return None
            raise


def score_many(table: ScoreTable, scorings: Mapping[str, Scoring], source: DrawSource, draws: int, seed: int,
               skipped: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """Name → ``draws × models`` scores on tables drawn from ``source``: every rule sees the same draws.

    A rule that cannot rank a drawn table raises a :class:`UserError`, unless ``skipped`` (a dict) is given:
    then it is dropped from the result and ``skipped[name]`` says why.

    Draws come in chunks of :data:`CHUNK_ELEMENTS` values (fewer when the majority rules' ``k × n × n`` wins
    are built for a chunk; they are built once per chunk and shared). Memory: O(draws × models) for the
    results, O(chunk) for the rest.
    """
    n, m = table.shape
    plans = {name: sc.ranking_plan() for name, sc in scorings.items()}
    fast = {name: None if plans[name] is None else
            batch_scorer(table, sc.rule, plans[name].setting, {**plans[name].rank_kwargs(), **sc.resolved},
                         source.tie_free)
            for name, sc in scorings.items()}
    chunk = max(1, CHUNK_ELEMENTS // max(n * m, 1))
    if any(f is not None and scorings[name].rule in MAJORITY_RULES for name, f in fast.items()):
        chunk = max(1, min(chunk, CHUNK_ELEMENTS // (4 * n * n)))
    rng = np.random.default_rng(seed)
    out = {name: np.empty((draws, n)) for name in scorings}
    for lo in range(0, draws, chunk):
        k = min(chunk, draws - lo)
        values = source.sample(rng, k)
        shared: dict[str, Any] = {}
        for name, sc in scorings.items():
            if name not in out:
                continue
            if fast[name] is not None:
                out[name][lo : lo + k] = fast[name](values, shared)
                continue
            for b in range(k):
                try:
                    drawn = table.with_values(values[b])
                    out[name][lo + b] = (sc.score_one(drawn) if sc.score_one is not None
                                         else plans[name].run_rule(drawn, sc.rule).scores)
                except UserError as exc:
                    why = f"rule {sc.rule} cannot rank a drawn table ({exc})"
                    if skipped is None:
                        raise UserError(why) from None
                    skipped[name] = why
                    del out[name]
                    break
    return out


def score_draws(table: ScoreTable, rule: str, source: DrawSource, draws: int, seed: int, *,
                setting: str = "basic", rank_kwargs: Mapping[str, Any] | None = None,
                resolved: Mapping[str, Any] | None = None,
                score_one: Callable[[ScoreTable], np.ndarray] | None = None, plan: Any = None) -> np.ndarray:
    """``draws × models`` scores of one ``rule`` (:func:`score_many` with one :class:`Scoring`)."""
    sc = Scoring(rule, setting, dict(rank_kwargs or {}), dict(resolved or {}), score_one, plan)
    return score_many(table, {rule: sc}, source, draws, seed)[rule]


# ====================================================================== from draws to intervals
def critical_value(deviations: np.ndarray, sigma: np.ndarray, level: float) -> float:
    """The ``level`` quantile over draws of ``M_b = max_{i≠j} (D_bi − D_bj) / (σ_i + σ_j)`` (0/0 counts as 0).

    ``deviations`` is draws × models (``S*_b − S``), ``sigma`` per model. Each ``M_b`` by Dinkelbach's
    iteration on the separable form ``max_i (D_i − cσ_i) − min_j (D_j + cσ_j)``: a few O(n) passes.
    The quantile is the smallest ``M_b`` with at least ``level × B`` draws at or below it.
    """
    d = np.asarray(deviations, dtype=float)
    s = np.asarray(sigma, dtype=float)
    b_count, n = d.shape
    if n < 2 or b_count == 0:
        return 0.0
    rows = np.arange(b_count)
    c = np.zeros(b_count)
    active = np.ones(b_count, dtype=bool)
    scale = max(float(np.abs(d).max()), 1e-300)
    for _ in range(200):
        if not active.any():
            break
        a = np.flatnonzero(active)
        da, ca = d[a], c[a][:, None]
        i = np.argmax(da - ca * s, axis=1)
        j = np.argmin(da + ca * s, axis=1)
        ra = rows[: a.size]
        gap = (da[ra, i] - ca[:, 0] * s[i]) - (da[ra, j] + ca[:, 0] * s[j])
        denom = s[i] + s[j]
        grow = (gap > 1e-12 * scale) & (i != j) & (denom > 0)
        new = np.where(grow, (da[ra, i] - da[ra, j]) / np.where(denom > 0, denom, 1.0), ca[:, 0])
        grow &= new > ca[:, 0]
        c[a] = np.where(grow, new, ca[:, 0])
        active[a] = grow
    k = min(b_count, max(1, math.ceil(level * b_count - 1e-9)))
    return float(np.sort(c)[k - 1])


def _tol(scores: np.ndarray) -> float:
    ok = scores[~np.isnan(scores)]
    return SCORE_RTOL * max(float(np.abs(ok).max()) if ok.size else 0.0, 1.0)


def rank_bounds(scores: np.ndarray, sigma: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    """``(rank_lo, rank_hi)`` per model from the intervals ``S ± cσ`` (NaN score: NaN bounds).

    ``j`` is surely above ``i`` when ``S_j − cσ_j > S_i + cσ_i``; ``rank_lo = 1 + #surely above``,
    ``rank_hi = n − #surely below`` among the ``n`` ranked models.
    """
    s = np.asarray(scores, dtype=float)
    ok = ~np.isnan(s)
    lo = np.full(s.shape, np.nan)
    hi = np.full(s.shape, np.nan)
    if not ok.any():
        return lo, hi
    tol = _tol(s)
    low = s[ok] - c * sigma[ok]
    up = s[ok] + c * sigma[ok]
    sorted_low, sorted_up = np.sort(low), np.sort(up)
    above = sorted_low.size - np.searchsorted(sorted_low, up + tol, side="right")
    below = np.searchsorted(sorted_up, low - tol, side="left")
    lo[ok] = 1.0 + above
    hi[ok] = float(ok.sum()) - below
    return lo, hi


def tiers_of(scores: np.ndarray, sigma: np.ndarray, c: float, ranks: np.ndarray | None = None) -> np.ndarray:
    """Tier per model (1 = top; NaN: unranked), greedy in the point order (``ranks``, else the scores).

    The best model opens tier 1; the next joins the current tier unless it is surely below every model
    of that tier (its upper bound under the tier's lowest lower bound), which opens the next tier.
    """
    s = np.asarray(scores, dtype=float)
    out = np.full(s.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(s))
    if not ok.size:
        return out
    key = ranks[ok] if ranks is not None else -s[ok]
    order = ok[np.lexsort((-s[ok], key))]
    tol = _tol(s)
    tier, floor = 1.0, math.inf
    for i in order:
        low, up = s[i] - c * sigma[i], s[i] + c * sigma[i]
        if up + tol < floor and floor != math.inf:
            tier += 1.0
            floor = low
        else:
            floor = min(floor, low)
        out[i] = tier
    return out


@dataclass(frozen=True)
class RankIntervals:
    """One rule's simultaneous rank intervals and tiers (aligned with ``models``; NaN = unranked)."""

    rule: str
    models: tuple[str, ...]
    rank_lo: np.ndarray
    rank_hi: np.ndarray
    tier: np.ndarray
    sigma: np.ndarray
    critical: float
    level: float
    draws: int

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> int | None:
            return None if math.isnan(x) else int(x)

        return {
            "rank_lo": {m: num(x) for m, x in zip(self.models, self.rank_lo)},
            "rank_hi": {m: num(x) for m, x in zip(self.models, self.rank_hi)},
            "tier": {m: num(x) for m, x in zip(self.models, self.tier)},
            "critical_value": self.critical,
        }


def intervals_from_draws(rule: str, models: tuple[str, ...], scores: np.ndarray, ranks: np.ndarray,
                         drawn: np.ndarray, level: float) -> RankIntervals:
    """:class:`RankIntervals` from the point scores and ranks and the ``draws × models`` drawn scores."""
    s = np.asarray(scores, dtype=float)
    ok = ~np.isnan(s)
    d = np.where(np.isnan(drawn), s, drawn)[:, ok]
    sigma = np.zeros(s.shape)
    sigma[ok] = d.std(axis=0)
    sig = sigma[ok]
    tol = _tol(s)
    still = sig <= tol * 1e-3
    sigma[np.flatnonzero(ok)[still]] = 0.0
    dev = d - s[ok]
    dev[:, still] = 0.0
    c = critical_value(dev, sigma[ok], level)
    lo, hi = rank_bounds(s, sigma, c)
    point = np.asarray(ranks, dtype=float)
    lo = np.where(np.isnan(point), lo, np.fmin(lo, point))
    hi = np.where(np.isnan(point), hi, np.fmax(hi, point))
    tiers = tiers_of(s, sigma, c, point)
    return RankIntervals(rule, tuple(models), lo, hi, tiers, sigma, c, level, int(drawn.shape[0]))


def rank_intervals(table: ScoreTable, results: Mapping[str, Any], *, source: DrawSource, level: float = 0.95,
                   draws: int = DEFAULT_DRAWS, seed: int = 0, setting: str = "basic",
                   rank_kwargs: Mapping[str, Any] | None = None,
                   rule_params: Mapping[str, Mapping[str, Any]] | None = None,
                   skipped: dict[str, str] | None = None, plan: Any = None) -> dict[str, RankIntervals]:
    """Rule → :class:`RankIntervals` for the point ``results`` (rule → RuleResult) of ``table``.

    The rules rank under ``plan`` (a :class:`ranking.plan.RankPlan`, ``table`` prepared by it), else under
    the plan of ``setting``, ``rank_kwargs`` and per rule ``rule_params`` (arguments of :func:`ranking.rank`).

    Every rule sees the same drawn tables (one ``seed``), so the rules' intervals are comparable. A rule
    that cannot rank a drawn table (the geometric mean of a draw below 0) raises, unless ``skipped`` (a
    dict) is given: then it is left out and ``skipped[rule]`` says why.
    """
    from ranking.plan import RankPlan, check_choices

    if plan is None or (level, draws) != (plan.level, plan.draws or DEFAULT_DRAWS):  # a plan's: checked once
        level, draws = (check_choices({"level": level, "draws": draws})[k] for k in ("level", "draws"))

    base = dict(rank_kwargs or {})
    plans = {rule: plan if plan is not None else
             RankPlan.build(rule, setting=setting, **{**base, **((rule_params or {}).get(rule, {}))})
             for rule in results}
    scored_table = table
    if any(p.setting == "weighted" for p in plans.values()):
        # the weighted setting is the basic one on the table with the plan's effective weights
        first = next(iter(plans.values()))
        scored_table = first.effective_table(table)
        plans = {rule: p.with_(setting="basic", group_weights=None) for rule, p in plans.items()}
    scorings = {}
    for rule, res in results.items():
        resolved = {"ties": res.params.get("ties", "default"), "atol": res.params.get("atol", 0.0)}
        scorings[rule] = Scoring(rule, resolved=resolved, plan=plans[rule])
    drawn = score_many(scored_table, scorings, source, draws, seed, skipped)
    out: dict[str, RankIntervals] = {}
    for rule, res in results.items():
        if rule in drawn:
            out[rule] = intervals_from_draws(rule, res.models, res.scores, res.ranks, drawn[rule], level)
    return out
