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
    1. Draws: ``B`` tables from the table's uncertainty (:func:`draw_source`: the standard errors, each
       score from Normal(score, se); else a seed bootstrap of ``seeds.csv``, whole seeds per model), drawn
       **around the ties the data allow** (:func:`tie_recentred`): in each criterion, every block of
       scores whose spread stays within what equal true scores give (:func:`tie_centre`) is drawn around its
       common mean. Every draw is scored by the rule: ``S*_b`` (``B × n``, filled in chunks).
    2. Per draw its deviation from the draws' mean ``D_bi = S*_bi − mean_b S*_bi`` (the expected score's
       analogue), per pair the spread of its difference over the draws ``s_ij`` (models that move together
       — a model scored on few criteria, whose gaps the others' medians fill — get a small ``s_ij``).
    3. The max statistic ``T_b = max_{i<j} |D_bi − D_bj| / s_ij`` and ``c`` its ``level`` quantile (the
       ``ceil(level · (B + 1))``-th smallest, as a Monte-Carlo test's), calibrated out of sample: each half
       of the draws is studentised by the other half's spreads, as the observed table's statistic is by
       spreads from draws it is not one of. Then with probability ≈ ``level`` every difference at once
       satisfies ``|S_i − S_j − (θ_i − θ_j)| ≤ c · s_ij``.
    4. ``j`` is **surely above** ``i`` when ``S_j − S_i > c · s_ij``; ``rank_lo = 1 + #surely above``,
       ``rank_hi = n − #surely below``. The point rank always lies inside. A difference the draws never
       (or rarely) moved gets at least the spread of a move, by as much as any difference moved, with
       probability 3 / B (the rule of three: B draws cannot certify a rarer move).
    5. **Tiers** (greedy, in the point order): the best model opens tier 1; each next model joins the
       current tier unless it is surely below *every* model of that tier, in which case it opens the
       next tier. So the model opening tier ``t+1`` is surely below every model of tier ``t``; inside a
       tier, some pairs may be separated, but no model is separated from all the others before it.

    Above :data:`PAIRWISE_LIMIT` models (``B × n²`` work) the scale is ``σ_i + σ_j`` (per-model spreads, at
    least each difference's own; ``M_b = max_{i≠j} (D_bi − D_bj) / (σ_i + σ_j)`` by Dinkelbach's iteration in
    O(n) per draw, :func:`critical_value`), which is wider where models move together.

    Why draw around the ties: a rank-based score (Borda, Copeland, Baldwin, ...) drawn around the observed
    table moves less than around the truth where true scores tie (the observed table has spread the tied
    scores apart; the draws reshuffle them only partly), so intervals from such draws were too short exactly
    at ties (20 tied models × 10 criteria: Borda covered 0.69, Copeland 0.63 at a nominal 0.95; 50 × 20: 0.43
    and 0.27). Drawn around the ties, the draws at a true tie come from the truth's own distribution; where
    scores are far apart (beyond the noise) nothing is pooled and nothing changes.

    **What is covered: the ranks of each rule's expected score** ``θ_i = E[S_i]`` over the table's noise —
    not the rule applied to the noise-free table. For the arithmetic mean they are the same; for a voting rule
    they can differ: where one model wins 70 % of the criteria by a hair (well inside the noise) and loses the
    rest by a mile, the rule on the noise-free table puts it first, while its expected Copeland score (the
    hair-thin wins are coin flips) puts it last; the intervals cover the latter (``scripts/bench_intervals.py``:
    0.007 of the tables cover the noise-free rank, 1.000 the expected score's). A decision should use the
    expected score's ranks: they are what another run of the same grid would give on average, while a
    margin inside the noise is not a finding.

    What is drawn is the rule's *score*; where a rule orders models beyond its score, Threshold's further
    lexicographic keys (fewest last-or-second-to-last places, ...) are drawn as well (up to
    :data:`THRESHOLD_KEYS`) and decide a pair whose score is equal in the table and in every draw; Condorcet's
    "everyone else shares position 2" leaves the others in one interval.

    Where the uncertainty comes from matters: one run's luck moves all of a model's scores (a seed that
    trains well is good on every task). A grid's seeds keep that (whole seeds drawn per model,
    :func:`seed_table_source`, :func:`intervals_from_seeds`); an imported table's per-cell standard errors
    cannot express it (the cells are drawn independently), and where the shared part is large its
    intervals are too short (12-20 models near ties: coverage 0.1 with per-cell errors, 0.95 with whole
    seeds). An unknown standard error (a model without a row in ``stderr.csv``, an empty cell) is not a
    certain score: that model is never separated from another.

    The simultaneous level is for all ``n(n−1)/2`` comparisons of one rule (not across rules), for one look:
    a procedure that looks after every wave and stops when intervals separate must spend its level over
    the looks.

    Measured (``scripts/bench_intervals.py``: 150 tables per scenario, 200 draws each; draws around the observed
    table with the ``σ_i + σ_j`` scale → now): with every model tied in truth, 20 models × 10 criteria, Borda
    0.69 → 0.97, Copeland 0.63 → 0.99, Baldwin 0.69 → 0.99, plurality 1.00 → 0.95, the arithmetic mean 0.93
    → 0.99; 50 × 20, Borda 0.43 → 0.96, Copeland 0.27 → 0.99, Baldwin 0.32 → 1.00, the rest 0.91-1.00; 5 × 6,
    0.92-1.00. Width: separated tables (6 standard errors apart) keep their width (0 for Borda, Copeland,
    Dowdall, Baldwin, the mean); with a third of the models on one criterion, the mean's width is 2.28 where
    the old scale gave 3.44, 1.01× that of in-sample studentised differences on the same draws at 1000
    draws (1.06× at 200: the price of the out-of-sample calibration); on neighbours one standard error apart
    the rank-based rules are wider than before (Borda 2.75 → 3.66), as pooling what the noise cannot tell
    apart costs there.

Many draws fast
    Every rule sees the same draws (one seed), scored in chunks: the positional rules from one sort per
    (draw, criterion) shared by all of them (Plurality and Threshold need only the first and last place),
    the arithmetic mean as a matrix product, and Copeland, Minimax, Condorcet and Baldwin from one pairwise
    count per chunk (integer places, 2-byte compares). Other rules, settings and scenario columns rank each
    drawn table with the rule itself. ``scripts/bench_rank.py`` measures it beside a plain numpy bootstrap.

Hand-worked example, pairwise: three models, scores S = (10, 9, 2), the spreads of the differences
s_AB = 1, s_AC = s_BC = 1.5 and the quantile c = 2. A − B = 1 < 2 · 1: not separated; A − C = 8 and
B − C = 7 exceed 2 · 1.5 = 3: C is surely below both. Rank intervals A [1, 2], B [1, 2], C [3, 3]; tiers 1, 1, 2.

>>> spread = np.array([[0.0, 1.0, 1.5], [1.0, 0.0, 1.5], [1.5, 1.5, 0.0]])
>>> [x.tolist() for x in pair_bounds(np.array([10.0, 9.0, 2.0]), spread, 2.0)]
[[1.0, 1.0, 3.0], [2.0, 2.0, 3.0], [1.0, 1.0, 2.0]]

The same with the per-model scale (beyond :data:`PAIRWISE_LIMIT` models): spreads σ = (1, 1, 0.5), c = 2.
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
    #: the values the draws centre on (models × criteria), or None (then no tie recentring is possible)
    centre: np.ndarray | None = field(default=None, repr=False)
    #: each centre value's standard error (NaN: unknown or not drawn), or None
    cell_se: np.ndarray | None = field(default=None, repr=False)
    #: present cells whose uncertainty is unknown (a standard error left empty, a model without a row):
    #: their models are "not separable" from any other (models × criteria booleans), or None
    unknown: np.ndarray | None = field(default=None, repr=False)
    #: the same source with its centre moved by a models × criteria shift (see :func:`tie_recentred`)
    shifted: Callable[[np.ndarray], DrawSource] | None = field(default=None, repr=False)

    def describe(self, draws: int, total_cells: int) -> str:
        """E.g. ``1000 draws from the scores' standard errors (12 of 15 cells carry one)``."""
        what = {"standard_errors": "draws from the scores' standard errors",
                "seeds": "seed-bootstrap resamples"}[self.kind]
        text = f"{draws} {what} ({self.detail}; {self.cells} of {total_cells} cells uncertain"
        if self.unknown is not None and self.unknown.any():
            k = int(self.unknown.any(axis=1).sum())
            text += f"; {k} model{'s' if k != 1 else ''} with an unknown standard error: not separable"
        return text + ")"


def error_source(table: ScoreTable) -> DrawSource:
    """Each score from Normal(score, its standard error), independently; 0 errors: fixed.

    An unknown (NaN) standard error of a present score is held fixed in the draws, and its model is marked
    ``unknown``: it is never separated from another model (:func:`rank_intervals`) — an unknown error is not
    a certain score."""
    assert table.standard_errors is not None
    present = ~np.isnan(table.values)
    unknown = np.isnan(table.standard_errors) & present
    return _normal_source(table.values, np.nan_to_num(table.standard_errors, nan=0.0) * present, unknown)


def _normal_source(values: np.ndarray, spread: np.ndarray, unknown: np.ndarray) -> DrawSource:
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
    se = np.where(spread > 0, spread, np.nan)
    return DrawSource("standard_errors", cells, "each score from Normal(score, its standard error)", sample,
                      tie_free, centre=values, cell_se=se, unknown=unknown if unknown.any() else None,
                      shifted=lambda delta: _normal_source(values + delta, spread, unknown))


SEED_COLUMNS = ("model", "criterion", "seed", "value")
#: A cell's per-seed mean and its table value agree within this (relative, and absolute for values near 0):
#: the tables a grid writes keep 10 significant digits.
SEED_MEAN_RTOL, SEED_MEAN_ATOL = 1e-6, 1e-9


def read_seeds(path: str | Path, table: ScoreTable) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per model index: (criterion indices, values array criteria × seeds with NaN gaps).

    ``seeds.csv`` is a declared schema bound to ``table`` (the matrix it was collected with): columns
    ``model, criterion, seed, value``; each value finite and inside its criterion's declared range; one row per
    (model, criterion, seed); every cell the table has a score for and the file has seeds for holds at least
    two seeds (one seed has no spread to resample), and their mean gives the table's value (within
    :data:`SEED_MEAN_RTOL`) — a seeds file of another grid is refused, not resampled. Rows for models or
    criteria the (scenario) table does not have, and seeds of cells the table leaves empty, are ignored.
    Every refusal is one line naming the file, the row (model, criterion) and what to fix.
    """
    import pandas as pd

    from ranking.floor.paths import file_inside

    path = file_inside(Path(path).parent, Path(path).name, "per-seed results")
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
    frame = frame.assign(value=values, model=frame["model"].astype(str).str.strip(),
                         criterion=frame["criterion"].astype(str))
    frame = frame[frame["model"].isin(table.models) & frame["criterion"].isin(table.names)].dropna(subset=["value"])
    infinite = ~np.isfinite(frame["value"].to_numpy(dtype=float))
    if infinite.any():
        row = frame[infinite].iloc[0]
        raise UserError(f"per-seed results {path}: {row['model']}/{row['criterion']} seed {row['seed']} is "
                        f"{row['value']}: a seed's value is finite (drop the row, or rerun the seed)")
    if frame.duplicated(["model", "criterion", "seed"]).any():
        row = frame[frame.duplicated(["model", "criterion", "seed"])].iloc[0]
        raise UserError(f"per-seed results {path}: {row['model']}/{row['criterion']} seed {row['seed']} appears twice")
    by_name = {c.name: c for c in table.criteria}
    for name, sub in frame.groupby("criterion", sort=False):
        rng_ = by_name[name].range
        if rng_ is None:
            continue
        lo, hi = rng_
        v = sub["value"].to_numpy(dtype=float)
        out_of = ((v < lo) if lo is not None else False) | ((v > hi) if hi is not None else False)
        if np.any(out_of):
            row = sub[out_of].iloc[0]
            shown = f"[{'' if lo is None else f'{lo:g}'}, {'' if hi is None else f'{hi:g}'}]"
            raise UserError(f"per-seed results {path}: {row['model']}/{name} seed {row['seed']} is {row['value']:g}, "
                            f"outside the criterion's range {shown}: fix the value, or the criterion's range")
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for model, sub in frame.groupby("model", sort=False):
        wide = sub.pivot(index="criterion", columns="seed", values="value")
        i = table.models.index(model)
        crit_idx = np.array([table.names.index(c) for c in wide.index])
        per_seed = wide.to_numpy(dtype=float)
        keep = ~np.isnan(table.values[i, crit_idx])  # seeds of a cell the table leaves empty: not this table's
        crit_idx, per_seed = crit_idx[keep], per_seed[keep]
        if crit_idx.size:
            out[i] = (crit_idx, per_seed)
    check_seed_binding(out, table, str(path))
    return out


def check_seed_binding(per_model: Mapping[int, tuple[np.ndarray, np.ndarray]], table: ScoreTable,
                       where: str) -> None:
    """One line naming the first cell with one seed only, or whose seeds' mean is not the table's value."""
    for i, (crit, per_seed) in per_model.items():
        counts = (~np.isnan(per_seed)).sum(axis=1)
        with np.errstate(invalid="ignore"):
            means = np.nanmean(np.where(counts[:, None] > 0, per_seed, 0.0), axis=1)
        for j, count, mean in zip(crit, counts, means):
            if count == 0:
                continue
            name = f"{table.models[i]}/{table.names[j]}"
            if count < 2:
                raise UserError(f"per-seed results {where}: {name} has one seed: a resampled cell needs at least "
                                "two seeds (run another seed, or drop the cell's rows to hold it fixed)")
            value = float(table.values[i, j])
            if not math.isclose(mean, value, rel_tol=SEED_MEAN_RTOL, abs_tol=SEED_MEAN_ATOL):
                raise UserError(f"per-seed results {where}: the seeds of {name} average {mean:.10g}, but the table "
                                f"says {value:.10g}: the seeds belong to another table (collect them again with "
                                "the matrix, or rank the matrix they were collected with)")


def seed_source(table: ScoreTable, path: str | Path) -> DrawSource:
    """A seed bootstrap from ``seeds.csv`` (long: model, criterion, seed, value), vectorised over models.

    Per draw and model, its seeds are drawn with replacement (the same draw for all of the model's
    criteria, so metrics of one run stay together: one run's luck moves all of a model's scores, and the
    draws keep that) and each seeded cell becomes the mean of the drawn seeds; cells without seeds keep
    the table's value. Each cell's seeds are first spread about their mean by ``sqrt(s / (s - 1))`` so that
    a resampled mean has the unbiased variance ``sd² / s`` (the plain bootstrap's is ``(s - 1) / s`` of it,
    half at two seeds). (What ``--bootstrap`` does, as :func:`ranking.scenarios.bootstrap.resample_values`,
    without the spread correction.)
    """
    per_model = read_seeds(path, table)
    if not per_model:
        raise UserError(f"{path} names none of the table's models and criteria: nothing to resample; "
                        "rank the table its seeds belong to")
    return _seed_source_of(table, per_model, Path(path).name)


def seed_table_source(table: ScoreTable, per_seed: np.ndarray) -> DrawSource:
    """A seed bootstrap from per-model seed tables: ``per_seed`` is models × seeds × criteria (aligned with
    ``table``; NaN: that seed has no value there). Checked as ``seeds.csv`` is (:func:`read_seeds`): finite,
    within ranges, two seeds or more per resampled cell, the seeds' means giving ``table``'s values; a cell
    with no seed at all keeps the table's value (not seed-dependent)."""
    arr = np.asarray(per_seed, dtype=float)
    n, m = table.shape
    if arr.ndim != 3 or arr.shape[0] != n or arr.shape[2] != m:
        raise UserError(f"per-seed results: shape {arr.shape} is not models × seeds × criteria ({n} × S × {m})")
    if np.isinf(arr).any():
        i, s, j = np.argwhere(np.isinf(arr))[0]
        raise UserError(f"per-seed results: {table.models[i]}/{table.names[j]} seed {s} is {arr[i, s, j]}: "
                        "a seed's value is finite")
    from ranking.table import _check_ranges

    for s in range(arr.shape[1]):
        _check_ranges(arr[:, s, :], table.models, table.criteria, f" (per-seed results, seed {s})")
    per_model = {}
    for i in range(n):
        cells = arr[i].T  # criteria × seeds
        crit = np.flatnonzero(~np.isnan(cells).all(axis=1) & ~np.isnan(table.values[i]))
        if crit.size:
            per_model[i] = (crit, cells[crit])
    check_seed_binding(per_model, table, "(models × seeds × criteria)")
    if not per_model:
        raise UserError("per-seed results: no cell of the table has seeds: nothing to resample")
    return _seed_source_of(table, per_model, "per-seed tables")


def _seed_source_of(table: ScoreTable, per_model: Mapping[int, tuple[np.ndarray, np.ndarray]], name: str,
                    delta: np.ndarray | None = None) -> DrawSource:
    n, m = table.shape
    by_count: dict[int, list[int]] = {}
    for i, (_, per_seed) in per_model.items():
        by_count.setdefault(per_seed.shape[1], []).append(i)
    groups = []
    cells = 0
    se = np.full((n, m), np.nan)
    shift = np.zeros((n, m)) if delta is None else delta
    for s, rows in by_count.items():
        arr = np.full((len(rows), m, s), np.nan)
        for r, i in enumerate(rows):
            crit, per_seed = per_model[i]
            arr[r, crit] = per_seed
        count = (~np.isnan(arr)).sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.nanmean(np.where(count[..., None] > 0, arr, 0.0), axis=2)
            sd = np.nanstd(np.where(count[..., None] > 0, arr, 0.0), axis=2, ddof=1)
            inflate = np.sqrt(count / np.maximum(count - 1, 1))
        # spread each cell's seeds about their mean so a resampled mean has variance sd² / s; then shift it
        arr = mean[..., None] + (arr - mean[..., None]) * inflate[..., None] + shift[rows][..., None]
        se[rows] = np.where(count >= 2, sd / np.sqrt(np.maximum(count, 1)), np.nan)
        cells += int(np.count_nonzero(count > 0))
        groups.append((np.array(rows), s, arr))
    values = table.values + shift
    counts_seen = sorted(by_count)
    detail = f"{name}, {'/'.join(map(str, counts_seen))} seeds per model"
    present = [(rows, s, ~np.isnan(arr), np.where(np.isnan(arr), 0.0, arr)) for rows, s, arr in groups]

    def sample(rng: np.random.Generator, k: int) -> np.ndarray:
        out = np.repeat(values[None], k, axis=0)
        for rows, s, here, filled in present:
            idx = rng.integers(0, s, size=(k, rows.size, s))
            counts = np.zeros((k, rows.size, s))
            for t in range(s):  # counts of each seed in the draw
                counts += idx[:, :, t : t + 1] == np.arange(s)
            total = np.einsum("krs,rms->krm", counts, here.astype(float))
            mean = np.einsum("krs,rms->krm", counts, filled)
            ok = total > 0
            block = out[:, rows]
            out[:, rows] = np.where(ok, mean / np.where(ok, total, 1.0), block)
        return out

    return DrawSource("seeds", cells, detail, sample, centre=values, cell_se=se,
                      shifted=lambda d: _seed_source_of(table, per_model, name, shift + d))


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


#: Two or more scores of one criterion are pooled (drawn around their common mean) while their spread stays
#: within what equal true scores give at this level: the largest standardised difference of k equal scores
#: exceeds ``z(1 − POOL_ALPHA / (k (k − 1)))`` with probability at most ``POOL_ALPHA`` (Bonferroni).
POOL_ALPHA = 0.05


def tie_centre(values: np.ndarray, cell_se: np.ndarray, alpha: float | None = None) -> np.ndarray:
    """``values`` with, per criterion, every block of scores the data cannot tell apart set to the block's mean.

    In each column the scores with a standard error (``cell_se`` > 0; NaN: none, never pooled) are sorted and
    cut greedily from the top into blocks: a block grows while its range stays within
    ``z(1 − α / (k (k − 1))) · √2 · (its largest standard error)`` (``k``: the block's size) — what ``k``
    equal true scores stay within with probability ≥ 1 − α. A single score stays as it is.

    >>> tie_centre(np.array([[1.0], [1.1], [5.0]]), np.array([[0.1], [0.1], [0.1]])).ravel().tolist()
    [1.05, 1.05, 5.0]
    """
    from statistics import NormalDist

    alpha = POOL_ALPHA if alpha is None else alpha
    out = np.array(values, dtype=float, copy=True)
    n, m = out.shape
    z = [0.0, 0.0] + [NormalDist().inv_cdf(1.0 - alpha / (k * (k - 1))) * math.sqrt(2.0) for k in range(2, n + 1)]
    for j in range(m):
        ok = np.flatnonzero(~np.isnan(values[:, j]) & (np.nan_to_num(cell_se[:, j], nan=0.0) > 0))
        if ok.size < 2:
            continue
        order = ok[np.argsort(-values[ok, j], kind="stable")]
        v, se = values[order, j], cell_se[order, j]
        start = 0
        while start < order.size:
            end, top = start + 1, se[start]
            while end < order.size:
                widest = max(top, se[end])
                if v[start] - v[end] > z[end - start + 1] * widest:
                    break
                top = widest
                end += 1
            if end - start > 1:
                out[order[start:end], j] = v[start:end].mean()
            start = end
    return out


def tie_recentred(source: DrawSource, alpha: float | None = None) -> DrawSource:
    """``source`` drawn around :func:`tie_centre` of its centre (the same source where nothing is pooled).

    Why: a rank-based score (Borda, Copeland, ...) drawn around the observed table moves less than it does
    around the truth where true scores tie — the observed table has already spread the tied scores apart, and
    the draws reshuffle them only partly — so intervals from those draws are too short exactly at ties (the
    audit's 20 tied models: Borda covered 0.68 of the time). Drawn around a table where every block the data
    cannot tell apart is tied, the draws at a true tie come from the truth's own distribution; where the
    scores are far apart (beyond the noise) nothing is pooled and nothing changes. The score's deviation is
    then taken from its mean over the draws (the expected score's analogue), not from the observed score.
    """
    if source.centre is None or source.cell_se is None or source.shifted is None:
        return source
    centre = tie_centre(source.centre, source.cell_se, alpha)
    delta = np.nan_to_num(centre - source.centre, nan=0.0)
    if not delta.any():
        return source
    moved = source.shifted(delta)
    return DrawSource(moved.kind, moved.cells, moved.detail + ", drawn around the ties the data allow",
                      moved.sample, moved.tie_free, moved.centre, moved.cell_se, source.unknown, moved.shifted)


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
    from ranking.rules import BORDA, DOWDALL, HUGE, PLURALITY, THRESHOLD, _rankable, threshold_vector

    if setting != "basic" or float(params.get("atol", 0.0) or 0.0) != 0.0:
        return None
    vectors = {"plurality": PLURALITY, "borda": BORDA, "dowdall": DOWDALL, "threshold": THRESHOLD}
    majority = MAJORITY_RULES
    if rule not in vectors and rule not in majority and rule != "arithmetic_mean":
        return None
    if rule in majority and table.n_models > MAJORITY_LIMIT:
        return None

    key = int(params.get("threshold_key", 1) or 1)  # Threshold's k-th lexicographic key: k trailing zeros
    if rule == "threshold" and key > 1:
        vectors["threshold"] = threshold_vector(key)
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


#: Most ranked models for studentised pairwise differences (``draws × n × n`` work); above it the scale of a
#: difference is ``σ_i + σ_j`` (:func:`critical_value`, O(n) per draw).
PAIRWISE_LIMIT = 300
#: Elements of one chunk of pairwise differences (draws × models × models).
PAIR_CHUNK = 4_000_000
#: Calibrate the max statistic out of sample: the draws in ``CROSS_FOLDS`` folds, each fold's statistic
#: studentised by the spreads of the other folds' draws.
CROSS_FIT = True
CROSS_FOLDS = 2
#: Most of Threshold's lexicographic keys the draws carry (pairs equal on all of them stay unseparated).
THRESHOLD_KEYS = 8


def pair_spread(deviations: np.ndarray) -> np.ndarray:
    """``n × n`` spread over draws of every difference ``D_i − D_j`` (``deviations``: draws × models, centred)."""
    d = np.asarray(deviations, dtype=float)
    b = max(d.shape[0], 1)
    cov = d.T @ d / b
    var = np.diag(cov)
    out = np.sqrt(np.clip(var[:, None] + var[None, :] - 2.0 * cov, 0.0, None))
    np.fill_diagonal(out, 0.0)
    return out


def pair_critical_value(deviations: np.ndarray, spread: np.ndarray, level: float) -> float:
    """The ``level`` quantile over draws of ``T_b = max_{i<j} |D_bi − D_bj| / s_ij`` (pairs with ``s_ij`` 0 or
    infinite count 0): the max-|t| over all pairs, each difference studentised by its own spread.

    Three draws, level 0.5: the statistics are √1.5, 0, √1.5 (each difference 2 or 1 over its spread), and the
    quantile is the ``ceil(0.5 · 4)`` = 2nd smallest:

    >>> d = np.array([[1.0, -1.0, 0.0], [0.0, 0.0, 0.0], [-1.0, 1.0, 0.0]])
    >>> round(pair_critical_value(d, pair_spread(d), 0.5), 6)
    1.224745
    """
    d = np.asarray(deviations, dtype=float)
    return _keyed_critical_value([d], np.zeros((d.shape[1], d.shape[1]), dtype=int), spread, level)


def pair_bounds(scores: np.ndarray, spread: np.ndarray, c: float,
                ranks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rank_lo, rank_hi, tier)`` per model from pairwise bounds: ``j`` is surely above ``i`` when
    ``S_j − S_i > c · s_ij`` (``spread`` ``s``: ``n × n``; NaN score: NaN). Tiers as :func:`tiers_of`, in the
    point order (``ranks``, else the scores): a model opens the next tier when it is surely below every model
    of the current one."""
    s = np.asarray(scores, dtype=float)
    n = s.size
    lo, hi, tier = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    ok = np.flatnonzero(~np.isnan(s))
    if not ok.size:
        return lo, hi, tier
    tol = _tol(s)
    so, sp = s[ok], spread[np.ix_(ok, ok)]
    above = (so[:, None] - so[None, :]) > c * sp + tol  # above[j, i]: j surely above i
    return _ranks_and_tiers(n, ok, above, so, ranks[ok] if ranks is not None else -so)


def _ranks_and_tiers(n: int, idx: np.ndarray, above: np.ndarray, scores: np.ndarray,
                     key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rank_lo, rank_hi, tier)`` of ``n`` models from ``above[j, i]`` (among the models ``idx``: ``j`` surely
    above ``i``), NaN for the others; tiers in the order of ``key``, then higher ``scores`` first."""
    lo, hi, tier = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    np.fill_diagonal(above, False)
    lo[idx] = 1.0 + above.sum(axis=0)
    hi[idx] = float(idx.size) - above.sum(axis=1)
    current: list[int] = []
    t = 1.0
    for i in np.lexsort((-scores, key)):
        if current and above[np.array(current), i].all():
            t += 1.0
            current = []
        current.append(i)
        tier[idx[i]] = t
    return lo, hi, tier


def _deciding(scores: np.ndarray, drawn: np.ndarray, keys: list[tuple[np.ndarray, np.ndarray]],
              tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Per pair the first lexicographic key that is not certainly equal (equal in the point table and in every
    draw): ``(point differences n × n, the key index n × n)``; key 0 is ``scores`` itself."""
    n = scores.size
    all_keys = [(scores, drawn), *keys]
    which = np.zeros((n, n), dtype=int)
    settled = np.zeros((n, n), dtype=bool)
    for k, (sk, dk) in enumerate(all_keys):
        dk = np.where(np.isnan(dk), sk, dk)
        moves = pair_spread(dk - dk.mean(axis=0)) > tol * 1e-3
        differs = np.abs(sk[:, None] - sk[None, :]) > tol
        decided = ~settled & (moves | differs)
        which[decided] = k
        settled |= decided
    point = np.stack([sk for sk, _ in all_keys])  # keys × n
    idx = np.arange(n)
    diff = point[which, idx[:, None]] - point[which, idx[None, :]]
    return diff, which


def _keyed_critical_value(devs: list[np.ndarray], which: np.ndarray, spread: np.ndarray, level: float,
                          floor: np.ndarray | None = None) -> float:
    """:func:`pair_critical_value` where pair ``(i, j)`` reads the deviations of its key ``which[i, j]`` (``devs``:
    per key, draws × models) and is studentised by ``spread[i, j]`` (0 or infinite: the pair counts 0; each
    fold's spreads are at least ``floor``, as ``spread`` is).

    With :data:`CROSS_FIT` (and 10 draws a fold or more) each fold of the draws is studentised by the spreads of
    the other folds' draws (by all draws' where those are 0): the observed table's statistic is studentised by
    spreads estimated from draws it is not one of, and so, then, is each draw's. (Studentised in sample, the
    max over many pairs is too small: the pairs whose draws happened to move less get a smaller spread.) The
    quantile is the ``ceil(level · (B + 1))``-th smallest of the ``B`` statistics, as a Monte-Carlo test's.
    """
    b_count, n = devs[0].shape
    if n < 2 or b_count == 0:
        return 0.0
    iu = np.triu_indices(n, 1)
    w = which[iu]
    blocked = ~np.isfinite(spread)
    # a spread this small is float noise of a difference that does not move (0 / 0 counts 0)
    eps = 1e-9 * max(max(float(np.abs(dk).max()) if dk.size else 0.0 for dk in devs), 1e-300)

    def inverse(sp: np.ndarray) -> np.ndarray:
        return np.where((sp > eps) & np.isfinite(sp), 1.0 / np.where(sp > eps, sp, 1.0), 0.0)[iu]

    def spread_of(rows: Any) -> np.ndarray:
        per_key = [pair_spread(dk[rows] - dk[rows].mean(axis=0)) for dk in devs]
        own = per_key[0] if len(devs) == 1 else np.choose(which, per_key)
        if floor is not None:
            own = np.maximum(own, floor)
        return np.where((own > eps) & ~blocked, own, spread)

    halves = [(0, b_count, inverse(spread))]
    if CROSS_FIT and b_count >= 10 * CROSS_FOLDS:
        cuts = [b_count * f // CROSS_FOLDS for f in range(CROSS_FOLDS + 1)]
        halves = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            rest = np.r_[0:a, b:b_count]
            halves.append((a, b, inverse(spread_of(rest))))
    stat = np.zeros(b_count)
    chunk = max(1, PAIR_CHUNK // max(n * n, 1))
    for k, dk in enumerate(devs):
        pick = w == k
        if not pick.any():
            continue
        a, b = iu[0][pick], iu[1][pick]
        for start, stop, inv_u in halves:
            inv_k = inv_u[pick]
            if pick.all():  # every pair on this key: the whole n × n block per draw (contiguous, no gather)
                inv_full = np.zeros((n, n), dtype=np.float32)  # single precision: half the memory traffic
                inv_full[iu] = inv_k
                d32 = dk.astype(np.float32)
                for lo in range(start, stop, chunk):
                    hi = min(lo + chunk, stop)
                    part = d32[lo:hi]
                    block = np.abs(part[:, :, None] - part[:, None, :])
                    block *= inv_full
                    stat[lo:hi] = np.maximum(stat[lo:hi], block.reshape(hi - lo, -1).max(axis=1))
                continue
            for lo in range(start, stop, chunk):
                hi = min(lo + chunk, stop)
                stat[lo:hi] = np.maximum(stat[lo:hi], (np.abs(dk[lo:hi, a] - dk[lo:hi, b]) * inv_k).max(axis=1))
    q = min(b_count, max(1, math.ceil(level * (b_count + 1) - 1e-9)))  # a Monte-Carlo test's (B + 1) rank
    return float(np.sort(stat)[q - 1])


def _bounds_from_differences(s: np.ndarray, ok: np.ndarray, diff: np.ndarray, spread: np.ndarray, c: float,
                             ranks: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`pair_bounds` from per-pair point differences ``diff[j, i]`` (``S_j − S_i`` on the pair's key)."""
    idx = np.flatnonzero(ok)
    return _ranks_and_tiers(s.size, idx, diff > c * spread + tol, s[idx], ranks[idx])


def unseparable_models(table: ScoreTable, source: DrawSource) -> np.ndarray | None:
    """Models with an unknown uncertainty on a ranked (weight > 0) criterion: never separated (None: none)."""
    if source.unknown is None:
        return None
    out = (source.unknown & (table.weights > 0)[None, :]).any(axis=1)
    return out if out.any() else None


def intervals_from_draws(rule: str, models: tuple[str, ...], scores: np.ndarray, ranks: np.ndarray,
                         drawn: np.ndarray, level: float, *, unseparable: np.ndarray | None = None,
                         centre: str = "mean", pairwise: bool | None = None,
                         keys: list[tuple[np.ndarray, np.ndarray]] | None = None) -> RankIntervals:
    """:class:`RankIntervals` from the point scores and ranks and the ``draws × models`` drawn scores.

    ``centre``: each drawn score's deviation is taken from its mean over the draws (``"mean"``, the expected
    score's analogue; what the tie-recentred draws need) or from the point score (``"point"``, as before).
    ``pairwise`` (default: up to :data:`PAIRWISE_LIMIT` models): each difference studentised by its own
    spread; else by ``σ_i + σ_j``. ``unseparable`` (models, booleans): never separated from any other model
    (an unknown standard error). ``keys``: further lexicographic keys ``(scores, drawn)`` (Threshold's), used
    for a pair whose score is certainly equal (equal in the point table and in every draw).
    """
    s = np.asarray(scores, dtype=float)
    ok = ~np.isnan(s)
    n_ok = int(ok.sum())
    d = np.where(np.isnan(drawn), s, drawn)[:, ok]
    sigma = np.zeros(s.shape)
    sigma[ok] = d.std(axis=0)
    sig = sigma[ok]
    tol = _tol(s)
    still = sig <= tol * 1e-3
    sigma[np.flatnonzero(ok)[still]] = 0.0
    dev = d - (d.mean(axis=0) if centre == "mean" else s[ok])
    dev[:, still] = 0.0
    free = np.zeros(n_ok, dtype=bool) if unseparable is None else np.asarray(unseparable, dtype=bool)[ok]
    point = np.asarray(ranks, dtype=float)
    if pairwise is None:
        pairwise = n_ok <= PAIRWISE_LIMIT
    if not pairwise:
        dev[:, free] = 0.0
        c = critical_value(dev, np.where(free, 0.0, sigma[ok]), level)
        wide = np.where(ok, sigma, 0.0)
        wide[np.flatnonzero(ok)[free]] = np.inf
        lo, hi = rank_bounds(s, wide, c)
        tiers = tiers_of(s, wide, c, point)
    else:
        spread = pair_spread(dev)
        spread[spread <= tol * 1e-3] = 0.0
        devs, which, diff = [dev], np.zeros((n_ok, n_ok), dtype=int), None
        if keys:
            sub = [(np.asarray(k_s, dtype=float)[ok], np.where(np.isnan(k_d), k_s, k_d)[:, ok]) for k_s, k_d in keys]
            diff, which = _deciding(s[ok], d, sub, tol)
            # per pair its deciding key's deviations and spread: the max statistic over the pairs' own keys
            devs = [dev] + [kd - kd.mean(axis=0) if centre == "mean" else kd - ks for ks, kd in sub]
            spreads = [spread] + [pair_spread(x) for x in devs[1:]]
            spread = np.choose(which, spreads)
            spread[spread <= tol * 1e-3] = 0.0
        # B draws cannot certify a rare move: a difference seen to move in none (or few) of them may still move,
        # with probability up to 3 / B (the rule of three), by as much as any difference moved in the draws (its
        # own at most): its spread is at least that of such a move — in the draws' statistic and the table's
        # alike (what keeps an observed Condorcet winner among tied models from looking certain when no draw
        # happened to make it win, and a rare move of a discrete score from setting the quantile alone)
        rare = min(0.5, 3.0 / max(int(drawn.shape[0]), 1))
        moved = np.concatenate([x[:, ~free] for x in devs], axis=1) if (~free).any() else dev[:, :0]
        jump = float((moved.max(axis=1) - moved.min(axis=1)).max()) if moved.size else 0.0
        gap = np.abs(diff) if diff is not None else np.abs(s[ok][:, None] - s[ok][None, :])
        floor = np.minimum(gap, jump) * math.sqrt(rare * (1.0 - rare))
        spread = np.maximum(spread, floor)
        spread[free, :] = np.inf
        spread[:, free] = np.inf
        c = _keyed_critical_value(devs, which, spread, level, floor)
        full = np.zeros((s.size, s.size))
        full[np.ix_(ok, ok)] = spread
        if diff is None:
            lo, hi, tiers = pair_bounds(s, full, c, point)
        else:
            lo, hi, tiers = _bounds_from_differences(s, ok, diff, spread, c, point, tol)
    lo = np.where(np.isnan(point), lo, np.fmin(lo, point))
    hi = np.where(np.isnan(point), hi, np.fmax(hi, point))
    return RankIntervals(rule, tuple(models), lo, hi, tiers, sigma, c, level, int(drawn.shape[0]))


def rank_intervals(table: ScoreTable, results: Mapping[str, Any], *, source: DrawSource, level: float = 0.95,
                   draws: int = DEFAULT_DRAWS, seed: int = 0, setting: str = "basic",
                   rank_kwargs: Mapping[str, Any] | None = None,
                   rule_params: Mapping[str, Mapping[str, Any]] | None = None,
                   skipped: dict[str, str] | None = None, plan: Any = None, recentre: bool = True,
                   pairwise: bool | None = None) -> dict[str, RankIntervals]:
    """Rule → :class:`RankIntervals` for the point ``results`` (rule → RuleResult) of ``table``.

    The rules rank under ``plan`` (a :class:`ranking.plan.RankPlan`, ``table`` prepared by it), else under
    the plan of ``setting``, ``rank_kwargs`` and per rule ``rule_params`` (arguments of :func:`ranking.rank`).

    Every rule sees the same drawn tables (one ``seed``), so the rules' intervals are comparable. A rule
    that cannot rank a drawn table (the geometric mean of a draw below 0) raises, unless ``skipped`` (a
    dict) is given: then it is left out and ``skipped[rule]`` says why.

    ``recentre`` (default): draw around the ties the data allow (:func:`tie_recentred`) and take deviations
    from the draws' mean; False: around the observed table, deviations from the point scores (the method
    before; kept for comparison, ``scripts/bench_intervals.py``). ``pairwise``: see :func:`intervals_from_draws`.
    What is covered: the ranks of each rule's *expected* score (module docstring).
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
    extra: dict[str, list[str]] = {}
    for rule, res in results.items():
        resolved = {"ties": res.params.get("ties", "default"), "atol": res.params.get("atol", 0.0)}
        scorings[rule] = Scoring(rule, resolved=resolved, plan=plans[rule])
        if rule == "threshold" and pairwise is not False and batch_scorer(
                scored_table, rule, plans[rule].setting, {**plans[rule].rank_kwargs(), **resolved}) is not None:
            # Threshold ranks lexicographically: its further keys decide pairs equal on its score
            n_keys = min(scored_table.n_models - 1, THRESHOLD_KEYS)
            extra[rule] = [f"{rule}\0key{z}" for z in range(2, n_keys + 1)]
            for z, name in enumerate(extra[rule], start=2):
                scorings[name] = Scoring(rule, resolved={**resolved, "threshold_key": z}, plan=plans[rule])
    drawing = tie_recentred(source) if recentre else source
    drawn = score_many(scored_table, scorings, drawing, draws, seed, skipped)
    free = unseparable_models(scored_table, source)
    out: dict[str, RankIntervals] = {}
    for rule, res in results.items():
        if rule not in drawn:
            continue
        keys = None
        if extra.get(rule):
            from ranking.rules import _rankable, threshold_keys

            sub, keep = _rankable(scored_table)
            point_keys = np.full((scored_table.n_models, sub.n_models - 1), np.nan)
            point_keys[keep] = threshold_keys(sub, ties=res.params.get("ties", "default"),
                                              atol=float(res.params.get("atol", 0.0) or 0.0))
            keys = [(point_keys[:, z - 1], drawn[name]) for z, name in enumerate(extra[rule], start=2)]
        out[rule] = intervals_from_draws(rule, res.models, res.scores, res.ranks, drawn[rule], level,
                                         unseparable=free, centre="mean" if recentre else "point",
                                         pairwise=pairwise if pairwise is not None else (None if recentre else False),
                                         keys=keys)
    return out


def intervals_from_seeds(table: ScoreTable, per_seed: np.ndarray, rule: str | Any = "borda", *,
                         level: float = 0.95, draws: int = DEFAULT_DRAWS, seed: int = 0,
                         **options: Any) -> dict[str, RankIntervals]:
    """Rank intervals and tiers from per-model seed tables: what an adaptive grid calls after each wave.

    ``table``: the models × criteria means (a :class:`ScoreTable`, its criteria's directions, weights and
    ranges); ``per_seed``: models × seeds × criteria, aligned with ``table`` (NaN where a seed has no value:
    a model with fewer seeds, a cell that does not depend on the seed). Checked as ``seeds.csv`` is: finite,
    within ranges, two seeds or more in every cell that has any, and each cell's seed mean equal to ``table``'s
    value (:func:`seed_table_source`). ``rule``: one rule or several (or ``"all"``); ``options``: the choices of
    :func:`ranking.rank` (``setting``, ``group_weights``, ``ties``, ``preset``, ``vote``, ...).

    Returns rule → :class:`RankIntervals`: per model (``.models``) ``rank_lo``/``rank_hi`` (the ranks the data
    allow, for all models at once at ``level``) and ``tier`` (1 = top; a model opens the next tier when it is
    surely below every model of the current one). NaN: a model the rule does not rank.

    How: each draw resamples, per model, whole seeds (a seed's row of the model's criteria together, so one
    run's luck moving all of a model's scores is kept), around the ties the data allow; the intervals cover the
    ranks of each rule's **expected** score (module docstring). A decision that stops early should use
    ``rank_hi``/``rank_lo`` at a level spent over its looks (the intervals hold at ``level`` for one look).
    """
    from ranking.plan import RankPlan

    plan = RankPlan.build(rule, **options)
    prepared = plan.prepare(table).table
    arr = np.asarray(per_seed, dtype=float)
    if arr.ndim == 3 and arr.shape[0] == table.n_models and arr.shape[2] == table.n_criteria:
        rows = [table.models.index(m) for m in prepared.models]
        cols = [table.names.index(c) for c in prepared.names]
        arr = arr[rows][:, :, cols]
    source = seed_table_source(prepared, arr)
    results = {}
    for name in plan.rules:
        try:
            results[name] = plan.run_rule(prepared, name)
        except UserError:
            if plan.explicit:
                raise
    return rank_intervals(prepared, results, source=source, level=level, draws=draws, seed=seed, plan=plan,
                          skipped=None if plan.explicit else {})
