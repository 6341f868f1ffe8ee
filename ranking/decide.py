"""Decide first: the statistics of a grid that runs in waves and stops when the user's decision is settled.

The question is one decision under one scenario column: the ``winner``, the ``top`` k, or the ``tiers``, at a
``level``. The grid runs in waves; after each wave this module looks at the per-seed results so far and says
whether the decision the *full grid* would reach is already settled, and if not, which runs buy most.

What is predicted
    The target is the decision of the full grid (every seed of every cell), not an abstract "true" ranking: it
    is what the user would otherwise compute, and it is what the replay (``scripts/bench_decide.py``) checks.
    A cell (model, criterion) has ``n`` of its ``S`` seeds; the mean of all ``S`` is the mean of the ``n`` run
    plus the mean of the ``S - n`` still to run, so given the runs so far it lies around their mean with
    variance ``σ²(1/n − 1/S)`` (the finite-population correction: 0 once every seed ran). ``σ²`` is the seed
    variance pooled across models per task (every criterion a run of that task yields, jointly: the metrics and
    efficiency figures of one run move together), with its own uncertainty (a scaled inverse χ² with the pooled
    degrees of freedom). Criteria without seeds (the bias scores) are exact.

One look
    ``draws`` full tables are drawn from that predictive distribution and scored by the column's rule (the
    vectorised scorers of :mod:`ranking.intervals` where the column allows, else the rule on each drawn table).
    The decision is a partition of the point order into blocks (winner: the first model / the rest; top k: the
    first k / the rest; tiers: the finest partition whose boundaries hold), and a drawn table *agrees* when
    every model's drawn position lies inside its block. The decision is **settled** when at least
    ``1 − α_look`` of the draws agree.

Valid under stopping (the level spent over the looks)
    A grid looks after every wave, at most ``waves`` times; each look spends ``α_look = (1 − level) / waves``
    (Bonferroni over a number of looks fixed in advance), so the chance that *any* look settles a decision the
    full grid would not reach is at most ``1 − level`` whichever wave it stops at. The last wave runs every seed
    left to the models that can still change the decision, so the grid never needs more looks than declared.

Which runs next
    For each model, how often its drawn position leaves its block (``q``: how much it can still change the
    decision); for each of its cells (model, task), the share of the model's drawn score the cell's predictive
    noise explains, times the share of that noise one more seed removes (``1 − (1/(n+1) − 1/S)/(1/n − 1/S)``).
    Their product is what one more run of the cell buys; a wave gives one more seed to each cell buying at
    least :data:`WAVE_SHARE` of the best cell's value (the last wave: every seed left to every model with
    ``q > 0``), within the budget.

The harness (:mod:`harness.grid.decide`) and the replay call the same :func:`next_step`.

>>> positions(np.array([[1.0, 3.0, 2.0]])).tolist()
[[2, 0, 1]]
>>> blocks_agree(np.array([[0, 1, 2], [1, 0, 2]]), [(0,), (1, 2)]).tolist()
[True, False]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ranking.floor.errors import UserError

#: What a decision can settle.
KINDS = ("winner", "top", "tiers")
#: Drawn full tables per look.
DEFAULT_DRAWS = 2000
#: Looks (waves) by default: the level is spent over them.
DEFAULT_WAVES = 6
#: A wave gives one more seed to every cell buying at least this share of the best cell's value.
WAVE_SHARE = 0.1
#: How a grid's decision ended.
SETTLED, COMPLETE, BUDGET, UNSETTLED = "settled", "complete", "budget", "unsettled"
STOP_TEXT = {
    SETTLED: "settled at the level",
    COMPLETE: "seeds ran out: every model that could still change the decision has all its runs",
    BUDGET: "the budget is spent before the decision settled",
    UNSETTLED: "the declared waves are spent before the decision settled",
}


@dataclass(frozen=True)
class Question:
    """What must be settled: ``kind`` (winner | top | tiers), ``k`` for top, at ``level``, over at most ``waves``
    looks."""

    kind: str = "winner"
    k: int = 1
    level: float = 0.95
    waves: int = DEFAULT_WAVES

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UserError(f"decision {self.kind!r}: use winner, top or tiers")
        if not 0.5 <= float(self.level) < 1.0:
            raise UserError(f"level {self.level:g} must be at least 0.5 and below 1 (e.g. 0.95)")
        if self.waves < 2:
            raise UserError(f"waves {self.waves}: at least 2 (a first wave and one more)")
        if self.kind == "top" and self.k < 1:
            raise UserError(f"top {self.k}: at least 1")

    @property
    def alpha_per_look(self) -> float:
        return (1.0 - float(self.level)) / self.waves

    def describe(self) -> str:
        what = {"winner": "the winner", "top": f"the top {self.k}", "tiers": "the tiers"}[self.kind]
        return f"{what} at level {self.level:g} (spent over {self.waves} looks: {self.alpha_per_look:.4g} each)"


@dataclass
class SeedCube:
    """Per-seed results so far: ``values[model, criterion, seed]`` (NaN: not run yet), the grid's ``S`` seeds on the
    last axis. ``unit[j]``: the index in ``units`` (tasks) of criterion ``j``'s run, -1 for a criterion without
    seeds (its value in seed slot 0, exact)."""

    models: tuple[str, ...]
    criteria: tuple[str, ...]
    units: tuple[str, ...]
    unit: np.ndarray
    values: np.ndarray

    @property
    def seeds(self) -> int:
        return int(self.values.shape[2])

    def counts(self) -> np.ndarray:
        """Seeds run per (model, unit): the count of the unit's first criterion."""
        out = np.zeros((len(self.models), len(self.units)), dtype=int)
        for u in range(len(self.units)):
            j = int(np.flatnonzero(self.unit == u)[0])
            out[:, u] = (~np.isnan(self.values[:, j, :])).sum(axis=1)
        return out

    def means(self) -> np.ndarray:
        """models × criteria: the mean of the seeds run (a criterion without seeds: its value)."""
        out = np.full(self.values.shape[:2], np.nan)
        seeded = self.unit >= 0
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                out[:, seeded] = np.nanmean(self.values[:, seeded, :], axis=2)
        out[:, ~seeded] = self.values[:, ~seeded, 0]
        return out


# ====================================================================== the predictive draws
@dataclass(frozen=True)
class Predictive:
    """Draws of the full grid's table given the runs so far (see the module docstring)."""

    means: np.ndarray  # models × criteria
    chol: tuple[np.ndarray, ...]  # per unit: Cholesky factor of the pooled covariance of its criteria
    df: np.ndarray  # per unit: pooled degrees of freedom (0: no spread known yet)
    cols: tuple[np.ndarray, ...]  # per unit: its criterion indices
    shrink: np.ndarray  # models × units: sqrt(1/n − 1/S) (0 when every seed ran)

    def sample(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``k`` drawn full tables (k × models × criteria) and the per-cell standard noise (k × models × units)."""
        n, m = self.means.shape
        out = np.repeat(self.means[None], k, axis=0)
        z_all = np.zeros((k, n, len(self.cols)))
        for u, (cols, chol) in enumerate(zip(self.cols, self.chol)):
            z = rng.standard_normal((k, n, cols.size))
            scale = self.df[u] / rng.chisquare(self.df[u], size=(k, 1, 1)) if self.df[u] > 0 else 1.0
            noise = (z @ chol.T) * np.sqrt(scale) * self.shrink[None, :, u, None]
            out[:, :, cols] += noise
            z_all[:, :, u] = z.sum(axis=2) * np.sqrt(scale if np.ndim(scale) == 0 else scale[:, :, 0])
        return out, z_all


def predictive(cube: SeedCube) -> Predictive:
    """The predictive distribution of the full grid's table from the runs so far (variance pooled per unit across
    models; a unit with no cell of two seeds yet has no spread and refuses: the first wave gives each two)."""
    means = cube.means()
    counts = cube.counts()
    s_full = cube.seeds
    chols, dfs, cols_all = [], [], []
    for u, name in enumerate(cube.units):
        cols = np.flatnonzero(cube.unit == u)
        x = cube.values[:, cols, :]  # models × c × S
        present = ~np.isnan(x[:, 0, :])
        resid = np.where(present[:, None, :], x - means[:, cols, None], 0.0)
        df = int(np.clip(present.sum(axis=1) - 1, 0, None).sum())
        if df == 0:
            raise UserError(f"{name}: no model has two seeds yet, so its seed spread is unknown; the first wave "
                            "gives every cell two seeds")
        r = np.moveaxis(resid, 1, 2).reshape(-1, cols.size)  # runs × c
        cov = r.T @ r / df
        scale = np.maximum(np.diag(cov), 0.0)
        cov = cov + np.diag(np.where(scale > 0, scale * 1e-9, 1e-30))
        chols.append(np.linalg.cholesky(cov))
        dfs.append(df)
        cols_all.append(cols)
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.sqrt(np.clip(1.0 / np.maximum(counts, 1) - 1.0 / s_full, 0.0, None))
    shrink[counts == 0] = 0.0  # a cell with no seed yet: no mean to predict from (the first wave runs every cell)
    return Predictive(means, tuple(chols), np.array(dfs, dtype=float), tuple(cols_all), shrink)


# ====================================================================== decisions as blocks of the point order
def positions(scores: np.ndarray) -> np.ndarray:
    """Per draw, each model's 0-based position (0 = best; equal scores: the lower index first; NaN last)."""
    key = np.where(np.isnan(scores), -np.inf, scores)
    order = np.argsort(-key, axis=1, kind="stable")
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.broadcast_to(np.arange(scores.shape[1]), order.shape), axis=1)
    return pos


def blocks_agree(pos: np.ndarray, blocks: Sequence[Sequence[int]]) -> np.ndarray:
    """Per draw: every model's position inside its block's positions (blocks in point order)."""
    ok = np.ones(pos.shape[0], dtype=bool)
    start = 0
    for block in blocks:
        p = pos[:, list(block)]
        ok &= ((p >= start) & (p < start + len(block))).all(axis=1)
        start += len(block)
    return ok


def split(order: Sequence[int], cuts: Sequence[int]) -> list[tuple[int, ...]]:
    """The point ``order`` cut after the given numbers of models: ``split([2, 0, 1], [1])`` → ``[(2,), (0, 1)]``."""
    out, last = [], 0
    for c in sorted(set(cuts)) + [len(order)]:
        if c > last:
            out.append(tuple(order[last:c]))
            last = c
    return out


@dataclass
class Look:
    """One look at the runs so far: the decision (blocks of model indices, in point order), how often the draws
    agree with it, whether that settles it at this look's α, each model's chance to leave its block (``q``), and
    what one more run of each (model, unit) cell buys (``value``; 0 for a cell with every seed)."""

    blocks: list[tuple[int, ...]]
    agree: float
    settled: bool
    q: np.ndarray
    value: np.ndarray
    scores: np.ndarray
    counts: np.ndarray

    def uncertain(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(self.q > 0)]


Scorer = Callable[[np.ndarray], np.ndarray]  # k × models × criteria → k × models (higher is better)


def look(cube: SeedCube, question: Question, scorer: Scorer, *, draws: int = DEFAULT_DRAWS, seed: int = 0) -> Look:
    """The decision on the runs so far and whether it is settled at this look's α (see the module docstring)."""
    pred = predictive(cube)
    point = scorer(pred.means[None])[0]
    order = [int(i) for i in np.argsort(-np.where(np.isnan(point), -np.inf, point), kind="stable")]
    n = len(order)
    rng = np.random.default_rng(seed)
    drawn, z = pred.sample(rng, draws)
    scores = scorer(drawn)
    pos = positions(scores)
    alpha = question.alpha_per_look
    counts = cube.counts()
    if question.kind == "winner":
        blocks = split(order, [1])
    elif question.kind == "top":
        blocks = split(order, [min(question.k, n)])
    else:
        blocks = _tiers(order, pos, alpha)
    agree = blocks_agree(pos, blocks)
    share = float(agree.mean())
    settled = share >= 1.0 - alpha
    if question.kind == "tiers":  # inside a tier, more seeds could still split it: settled once they all ran
        settled = settled and all(len(b) == 1 or (counts[list(b)] >= cube.seeds).all() for b in blocks)
    q = _leave_block(pos, blocks)
    if question.kind == "tiers":
        for b in blocks:
            if len(b) > 1:
                q[list(b)] = np.maximum(q[list(b)], 1.0 / draws)
    value = _value(scores, z, q, counts, cube.seeds)
    return Look(blocks, share, bool(settled), q, value, point, counts)


def _tiers(order: list[int], pos: np.ndarray, alpha: float) -> list[tuple[int, ...]]:
    """The finest cut of the point order whose boundaries all hold in at least ``1 − α`` of the draws."""
    n = len(order)
    ranks = np.empty(n, dtype=int)
    ranks[order] = np.arange(n)
    holds = []
    for c in range(1, n):  # boundary after c models: the same c models on top
        top = np.array(order[:c])
        holds.append(float((pos[:, top] < c).all(axis=1).mean()))
    cuts = [c for c in range(1, n) if holds[c - 1] >= 1.0 - alpha]
    while cuts and blocks_agree(pos, split(order, cuts)).mean() < 1.0 - alpha:
        cuts.remove(min(cuts, key=lambda c: holds[c - 1]))
    return split(order, cuts)


def _leave_block(pos: np.ndarray, blocks: list[tuple[int, ...]]) -> np.ndarray:
    q = np.zeros(pos.shape[1])
    start = 0
    for block in blocks:
        p = pos[:, list(block)]
        q[list(block)] = ((p < start) | (p >= start + len(block))).mean(axis=0)
        start += len(block)
    return q


def _value(scores: np.ndarray, z: np.ndarray, q: np.ndarray, counts: np.ndarray, s_full: int) -> np.ndarray:
    """What one more run of each (model, unit) cell buys: q × explained share × removed share (module docstring)."""
    k, n = scores.shape
    sc = scores - scores.mean(axis=0)
    zc = z - z.mean(axis=0)
    var_s = (sc**2).mean(axis=0)
    cov = np.einsum("kn,knu->nu", sc, zc) / k
    var_z = (zc**2).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        explained = np.where((var_s[:, None] > 0) & (var_z > 0), cov**2 / (var_s[:, None] * var_z), 0.0)
        n_ = np.maximum(counts, 1).astype(float)
        left = 1.0 / n_ - 1.0 / s_full
        after = np.clip(1.0 / (n_ + 1) - 1.0 / s_full, 0.0, None)
        removed = np.where(left > 0, 1.0 - after / left, 0.0)
    value = q[:, None] * explained * removed
    value[counts >= s_full] = 0.0
    return value


# ====================================================================== the next step: a wave, or the stop
@dataclass
class Step:
    """What to do after a look: run ``wave`` (a list of (model, unit) cells, one more seed each) or stop
    (``stop``: one of SETTLED, COMPLETE, BUDGET, UNSETTLED)."""

    look: Look
    wave: list[tuple[int, int]] = field(default_factory=list)
    stop: str | None = None


def next_step(cube: SeedCube, question: Question, scorer: Scorer, *, waves_done: int, budget_left: float = math.inf,
              cost: np.ndarray | None = None, draws: int = DEFAULT_DRAWS, seed: int = 0) -> Step:
    """After ``waves_done`` waves: look, then either stop or name the next wave's cells (``cost``: per (model,
    unit) what one more run costs against ``budget_left``; default 1 run)."""
    lk = look(cube, question, scorer, draws=draws, seed=seed + waves_done)
    if lk.settled:
        return Step(lk, stop=SETTLED)
    counts = lk.counts
    open_ = counts < cube.seeds
    wanted = np.zeros(open_.shape, dtype=bool)
    wanted[lk.uncertain()] = True
    wanted &= open_
    if not wanted.any():
        return Step(lk, stop=COMPLETE)
    if waves_done >= question.waves:
        return Step(lk, stop=UNSETTLED)
    last = waves_done == question.waves - 1
    if last:  # the last wave: every seed left to every model that can still change the decision
        cells = [(int(i), int(u)) for i, u in zip(*np.nonzero(wanted)) for _ in range(cube.seeds - counts[i, u])]
        order = sorted(range(len(cells)), key=lambda c: -lk.value[cells[c]])
        cells = [cells[c] for c in order]
    else:
        v = np.where(wanted, lk.value, 0.0)
        best = float(v.max())
        pick = (v >= WAVE_SHARE * best) & wanted if best > 0 else wanted
        idx = list(zip(*np.nonzero(pick)))
        cells = [(int(i), int(u)) for i, u in sorted(idx, key=lambda c: -v[c])]
    cost = np.ones(counts.shape) if cost is None else cost
    chosen, spent = [], 0.0
    for c in cells:
        if spent + cost[c] <= budget_left + 1e-9:
            chosen.append(c)
            spent += cost[c]
    if not chosen:
        return Step(lk, stop=BUDGET)
    return Step(lk, wave=chosen)


def first_wave(cube_shape: tuple[int, int], seeds: int, first_seeds: int = 1) -> list[tuple[int, int, int]]:
    """The first wave: (model, unit, seed index) for the first ``first_seeds`` seeds of every cell; with
    ``first_seeds`` 1, a second seed for every other cell (checkerboard over models and units), so that every
    unit's spread, pooled across models, is known from about half of them.

    >>> first_wave((2, 2), 5, 1)
    [(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0), (1, 1, 0), (1, 1, 1)]
    """
    n, u = cube_shape
    out = []
    for i in range(n):
        for t in range(u):
            count = first_seeds if first_seeds > 1 else (2 if (i + t) % 2 == 0 or n == 1 else 1)
            out += [(i, t, s) for s in range(min(count, seeds))]
    return out


def wave_seeds(wave: Sequence[tuple[int, int]], counts: np.ndarray) -> list[tuple[int, int, int]]:
    """A wave's cells as (model, unit, seed index): the next seeds of each cell, in the grid's seed order."""
    taken: dict[tuple[int, int], int] = {}
    out = []
    for i, u in wave:
        s = int(counts[i, u]) + taken.get((i, u), 0)
        taken[(i, u)] = taken.get((i, u), 0) + 1
        out.append((i, u, s))
    return out


# ====================================================================== replay against a full grid
@dataclass
class Replay:
    """One replay: the decision reached, how it stopped, the runs used, and whether it equals the full grid's."""

    blocks: list[tuple[int, ...]]
    stop: str
    runs: int
    full_runs: int
    waves: int
    equal: bool
    wrong_settled: bool


def full_scores(full: SeedCube, scorer: Scorer) -> np.ndarray:
    """The full grid's point scores (the rule on every seed's mean)."""
    return scorer(full.means()[None])[0]


def same_decision(blocks: Sequence[Sequence[int]], scores: np.ndarray, question: Question) -> bool:
    """Whether a decision (blocks, best first) is the full grid's: no model of a later block scores above a model
    of an earlier one in the full grid (``scores``; an exact tie there is no contradiction: the full grid cannot
    tell those models apart either). For tiers, a tier makes no claim about the order inside it.

    >>> same_decision([(1,), (0, 2)], np.array([1.0, 3.0, 3.0]), Question("winner"))
    True
    >>> same_decision([(0,), (1, 2)], np.array([1.0, 3.0, 2.0]), Question("winner"))
    False
    """
    s = np.where(np.isnan(scores), -np.inf, np.asarray(scores, dtype=float))
    floor = np.inf
    for block in blocks:
        if s[list(block)].max() > floor:
            return False
        floor = min(floor, float(s[list(block)].min()))
    return True


def replay(full: SeedCube, question: Question, scorer: Scorer, *, rng: np.random.Generator, first_seeds: int = 1,
           budget: float = math.inf, draws: int = DEFAULT_DRAWS, scores: np.ndarray | None = None,
           runs_fixed: int = 0) -> Replay:
    """The adaptive procedure against one full grid: the seeds of every cell come in a random order; each wave
    reveals the seeds :func:`next_step` asks for. ``runs_fixed``: runs without seeds (bias runs) counted in both
    the used and the full totals."""
    n, _, s_full = full.values.shape
    n_units = len(full.units)
    perm = np.argsort(rng.random((n, n_units, s_full)), axis=2)  # the order seeds arrive in, per cell
    seeded = full.unit >= 0
    vals = np.full(full.values.shape, np.nan)
    vals[:, ~seeded, 0] = full.values[:, ~seeded, 0]
    cube = SeedCube(full.models, full.criteria, full.units, full.unit, vals)

    def reveal(i: int, u: int, s: int) -> None:
        cols = np.flatnonzero(full.unit == u)
        src = perm[i, u, s]
        cube.values[i, cols, s] = full.values[i, cols, src]

    wave1 = first_wave((n, n_units), s_full, first_seeds)
    for i, u, s in wave1:
        reveal(i, u, s)
    used = len(wave1)
    waves = 1
    truth = scores if scores is not None else full_scores(full, scorer)
    while True:
        step = next_step(cube, question, scorer, waves_done=waves, budget_left=budget - used - runs_fixed,
                         draws=draws, seed=int(rng.integers(2**31)))
        if step.stop is not None:
            break
        for i, u, s in wave_seeds(step.wave, step.look.counts):
            reveal(i, u, s)
        used += len(step.wave)
        waves += 1
    equal = same_decision(step.look.blocks, truth, question)
    return Replay(step.look.blocks, step.stop, used + runs_fixed, n * n_units * s_full + runs_fixed, waves, equal,
                  step.stop == SETTLED and not equal)


# ====================================================================== a scenario column as a scorer
def column_scorer(scenario: Any, column: str, table: Any) -> Scorer:
    """``k × models × criteria`` drawn values of the scenario's ``table`` (built by the scenario) → the column's
    scores: a vectorised scorer of :mod:`ranking.intervals` where the column is the rule in the basic setting (on
    its group's criteria, or with the weighted setting's effective weights), else the column itself on each
    drawn table (two-step, parameters)."""
    from ranking.intervals import batch_scorer
    from ranking.scenarios.compare import column_plans, run_column

    col = scenario.column(column)
    plan = column_plans(scenario)[col.name]
    resolved = {"ties": col.ties or scenario.ties, "atol": 0.0}
    sub, cols = table, np.arange(table.n_criteria)
    if col.group is not None:
        cols = np.array([j for j, c in enumerate(table.criteria) if c.group == col.group])
        sub = table.group(col.group)
    fast = None
    if plan is not None:
        if col.setting == "basic" or col.group is not None:
            fast = batch_scorer(sub, col.rule, "basic", {**plan.rank_kwargs(), **resolved})
        elif col.setting == "weighted":
            eff = plan.effective_table(table)
            basic = plan.with_(setting="basic", group_weights=None)
            fast = batch_scorer(eff, col.rule, "basic", {**basic.rank_kwargs(), **resolved})

    def slow(values: np.ndarray) -> np.ndarray:
        return np.stack([run_column(table.with_values(v), col, scenario.ties, plan).scores for v in values])

    if fast is not None:  # the vectorised scorer only where it gives the column's own scores (its parameters kept)
        probe = np.stack([table.values, table.values[::-1]]) if table.n_models > 1 else table.values[None]
        if not np.allclose(fast(probe[:, :, cols]), slow(probe), rtol=1e-9, atol=1e-12, equal_nan=True):
            fast = None

    def score(values: np.ndarray) -> np.ndarray:
        if fast is not None:
            return fast(values[:, :, cols])
        return slow(values)

    return score
