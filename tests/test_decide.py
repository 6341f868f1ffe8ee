"""Decide first, the statistics (ranking/decide.py): a stopping rule whose settled decisions differ from the full
grid's at most 1 − level of the time, measured over replays of stored per-seed tables with a known truth."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import ranking.decide as decide
from ranking.decide import (
    BUDGET,
    COMPLETE,
    SETTLED,
    Question,
    SeedCube,
    blocks_agree,
    look,
    next_step,
    positions,
    replay,
    same_decision,
    split,
)
from ranking.floor.errors import UserError

DATA = Path(__file__).resolve().parents[1] / "scripts" / "data"
TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
ENCODERS = ("bert_base_uncased", "bert_base_cased", "roberta_base", "microsoft_deberta_v3_base")


def mean_scorer(values: np.ndarray) -> np.ndarray:
    return values.mean(axis=2)


@pytest.fixture(scope="module")
def stored():
    """The stored tables: 20 models' published GLUE means and 20 real seeds per (base model, task)."""
    import pandas as pd

    means = pd.read_csv(DATA / "glue_20_models.csv", comment="#").set_index("model")[list(TASKS)].to_numpy()
    res = pd.read_csv(DATA / "glue_seed_residuals.csv", comment="#")
    pool = {(b, t): g.sort_values("seed")["residual"].to_numpy() for (b, t), g in res.groupby(["base_model", "task"])}
    return means, pool


def full_grid(stored, rows, seeds, rng) -> SeedCube:
    means, pool = stored
    values = np.empty((len(rows), len(TASKS), seeds))
    for i, row in enumerate(rows):
        base = ENCODERS[rng.integers(len(ENCODERS))]
        for u, task in enumerate(TASKS):
            values[i, u] = means[row, u] + rng.choice(pool[(base, task)], seeds, replace=False)
    return SeedCube(tuple(f"m{i}" for i in range(len(rows))), TASKS, TASKS, np.arange(len(TASKS)), values)


def error_rate(stored, rows, question, replays=300, seed=1):
    rng = np.random.default_rng(seed)
    wrong = used = 0.0
    for _ in range(replays):
        r = replay(full_grid(stored, rows, 5, rng), question, mean_scorer, rng=rng, draws=400)
        wrong += r.wrong_settled
        used += r.runs / r.full_runs
    return wrong / replays, used / replays


def test_blocks_positions_and_agreement_exact():
    assert positions(np.array([[1.0, 3.0, 2.0], [np.nan, 0.0, 5.0]])).tolist() == [[2, 0, 1], [2, 1, 0]]
    assert split([2, 0, 1, 3], [1, 3]) == [(2,), (0, 1), (3,)]
    pos = np.array([[0, 1, 2], [1, 0, 2], [0, 2, 1]])
    assert blocks_agree(pos, [(0,), (1, 2)]).tolist() == [True, False, True]
    assert blocks_agree(pos, [(0, 1), (2,)]).tolist() == [True, True, False]
    assert same_decision([(0, 1), (2,)], np.array([2.0, 3.0, 1.0]), Question("tiers"))
    assert not same_decision([(0,), (1, 2)], np.array([2.0, 3.0, 1.0]), Question("winner"))
    assert same_decision([(0, 1), (2,)], np.array([2.0, 3.0, 2.0]), Question("top", k=2))  # a tie: no contradiction
    assert Question(level=0.9, waves=4).alpha_per_look == pytest.approx(0.025)


def test_a_complete_grid_is_its_own_decision(stored):
    """Every seed run: nothing left to predict (the finite-population correction is 0), so every draw agrees and
    the decision is the full grid's, whatever the spread."""
    rng = np.random.default_rng(3)
    full = full_grid(stored, [0, 1, 2, 3], 5, rng)
    for question in (Question("winner"), Question("top", k=2), Question("tiers")):
        lk = look(full, question, mean_scorer, draws=300)
        assert lk.agree == 1.0 and lk.settled
        assert lk.value.max() == 0.0
        assert same_decision(lk.blocks, full.means().mean(axis=1), question)
        r = replay(full, question, mean_scorer, rng=rng, first_seeds=5, draws=300)
        assert (r.stop, r.runs, r.full_runs, r.equal) == (SETTLED, 180, 180, True)


@pytest.mark.parametrize(("rows", "question"), [
    ([0, 0, 0, 2], Question("winner", level=0.9)),         # three models tied in truth at the top
    ([0, 1, 2, 3, 4, 5], Question("top", k=3, level=0.9)),  # six published models, close
])
def test_settled_decisions_differ_from_the_full_grid_at_most_1_minus_level(stored, rows, question):
    error, used = error_rate(stored, rows, question)
    assert error <= 1 - question.level, error
    assert used < 0.95  # and it stops before the full grid


def test_understated_spread_is_caught(stored, monkeypatch):
    """The measurement can fail: the same procedure with the predictive spread cut to a quarter settles wrong
    decisions on the tied truth more often than 1 − level allows."""
    real = decide.predictive
    monkeypatch.setattr(decide, "predictive", lambda cube: dataclasses.replace(real(cube), shrink=real(cube).shrink / 4))
    error, _ = error_rate(stored, [0, 0, 0, 2], Question("winner", level=0.9))
    assert error > 0.1


def test_next_step_spends_within_the_budget_and_stops_when_seeds_run_out(stored):
    rng = np.random.default_rng(5)
    full = full_grid(stored, [0, 0, 19], 5, rng)
    cube = SeedCube(full.models, full.criteria, full.units, full.unit, full.values.copy())
    cube.values[:, :, 2:] = np.nan  # two seeds per cell so far
    step = next_step(cube, Question("winner"), mean_scorer, waves_done=1, draws=300)
    assert step.stop is None and step.wave  # two tied models: more seeds wanted
    assert {i for i, _ in step.wave} <= set(step.look.uncertain())
    assert next_step(cube, Question("winner"), mean_scorer, waves_done=1, budget_left=0, draws=300).stop == BUDGET
    trimmed = next_step(cube, Question("winner"), mean_scorer, waves_done=1, budget_left=2, draws=300)
    assert len(trimmed.wave) == 2
    last = next_step(cube, Question("winner", waves=2), mean_scorer, waves_done=1, draws=300)
    uncertain = last.look.uncertain()
    assert len(last.wave) == 3 * len(uncertain) * len(TASKS)  # the last wave: every seed left to them
    done = SeedCube(full.models, full.criteria, full.units, full.unit, full.values.copy())
    done.values[2, :, 2:] = np.nan  # the only open cells belong to a model that cannot win
    assert next_step(done, Question("winner"), mean_scorer, waves_done=1, draws=300).stop in (SETTLED, COMPLETE)


def test_bad_questions_are_refused_in_one_line():
    for kwargs, text in (({"kind": "best"}, "use winner, top or tiers"), ({"level": 1.0}, "below 1"),
                         ({"waves": 1}, "at least 2")):
        with pytest.raises(UserError, match=text):
            Question(**kwargs)


def test_column_scorer_gives_the_columns_own_scores():
    """The vectorised scorer of a scenario column (weighted setting, a group column) equals the column ranked by
    the scenario itself on every drawn table."""
    from ranking.decide import column_scorer
    from ranking.scenarios.compare import run_column
    from ranking.scenarios.scenario import Scenario
    from ranking.table import Criterion, ScoreTable

    crits = (Criterion("a", group="performance"), Criterion("b", group="performance"),
             Criterion("c", direction="lower", group="efficiency"))
    rng = np.random.default_rng(0)
    table = ScoreTable(("x", "y", "z", "w"), crits, rng.random((4, 3)))
    scenario = Scenario.from_mapping({"name": "s", "groups": {"performance": {}, "efficiency": {}}, "columns": [
        {"name": "bw", "rule": "borda", "setting": "weighted", "group_weights": {"performance": 0.7, "efficiency": 0.3}},
        {"name": "am", "rule": "arithmetic_mean", "group": "performance"},
        {"name": "two", "rule": "borda", "setting": "two-step"}]})
    built = scenario.build_table(table)
    drawn = built.values[None] + rng.normal(0, 0.3, (5, 4, 3))
    for name in ("bw", "am", "two"):
        got = column_scorer(scenario, name, built)(drawn)
        want = np.stack([run_column(built.with_values(v), scenario.column(name), scenario.ties).scores for v in drawn])
        np.testing.assert_allclose(got, want)
