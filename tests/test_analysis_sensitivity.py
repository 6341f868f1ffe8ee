"""Cardinal and ordinal sensitivity: known answers on small tables, with the mean/win rate and real rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ranking.analysis._common import make_ranker
from ranking.analysis.sensitivity import (
    cardinal_sensitivity,
    default_epsilon,
    ordinal_sensitivity,
    win_rate_matrix,
    win_rate_matrix_loops,
)
from ranking.table import ScoreTable


def _opposite() -> ScoreTable:
    # equal weights: A (1.1) > B (1.05) > C (1.0); weight ε on t2 ranks by t1: C > B > A (fully reversed)
    x = pd.DataFrame({"t1": [0.0, 1.0, 2.0], "t2": [2.2, 1.1, 0.0]}, index=["A", "B", "C"])
    return ScoreTable.from_frame(x)


def test_cardinal_reverses_two_opposite_tasks():
    out = cardinal_sensitivity(_opposite(), steps=50, restarts=1)
    assert out["tau_distance"] == pytest.approx(1.0) and out["mrc"] == pytest.approx(1.0)
    assert out["lower_bound"] is True
    assert min(out["weights"].values()) == pytest.approx(out["epsilon"])


def test_cardinal_identical_tasks_are_insensitive():
    x = pd.DataFrame({"t1": [3.0, 2.0, 1.0, 0.0], "t2": [6.0, 4.0, 2.0, 0.0]}, index=list("ABCD"))
    out = cardinal_sensitivity(ScoreTable.from_frame(x), steps=50, restarts=1)
    assert out["tau_distance"] == 0.0 and out["mrc"] == 0.0


def test_cardinal_with_a_registered_rule():
    out = cardinal_sensitivity(_opposite(), make_ranker("arithmetic_mean"), steps=50, restarts=1, rule_budget=50)
    assert out["tau_distance"] == pytest.approx(1.0) and out["rule_calls"] > 0


def test_default_epsilon():
    x = np.array([[0.0, 0.0], [1.0, 0.001], [2.0, 0.002]])
    assert default_epsilon(x) == pytest.approx(0.001)
    assert default_epsilon(np.array([[0.0, 0.0], [1.0, 1.0]])) == 0.01


def test_win_rate_matrix_matches_loops():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(7, 5)).astype(float)
    x[rng.random(x.shape) < 0.2] = np.nan
    assert np.allclose(win_rate_matrix(x), win_rate_matrix_loops(x))


def test_ordinal_identical_tasks_exact_zero():
    x = pd.DataFrame({f"t{j}": [10.0 - i for i in range(10)] for j in range(3)}, index=[f"M{i}" for i in range(10)])
    out = ordinal_sensitivity(ScoreTable.from_frame(x))
    assert out["exact"] and out["tau_distance"] == 0.0 and out["top_models"] == ["M0", "M1"]


def test_ordinal_adding_a_model_reverses_a_pair():
    # A beats B on t1, t2; B beats A on t3. Alone, win rate: A 2/3 > B 1/3.
    # Each X_k loses to B on all tasks but beats A on t1 and t2, so adding them pulls A below B.
    data = {"t1": [5, 4], "t2": [5, 4], "t3": [1, 2]}
    frame = pd.DataFrame(data, index=["A", "B"])
    extra = pd.DataFrame({"t1": [0] * 8, "t2": [0] * 8, "t3": [0] * 8}, index=[f"X{k}" for k in range(8)])
    extra["t1"] = 6  # X beats A and B on t1 ...
    extra["t3"] = 1.5  # ... loses to B on t3, beats A there
    t = ScoreTable.from_frame(pd.concat([frame, extra]).astype(float))
    # overall win rates: B 17/30 > A 10/30 > X 1/10, so L = (B, A); alone A ranks first
    out = ordinal_sensitivity(t, top_share=0.2)
    assert out["exact"] and out["top_models"] == ["B", "A"]
    assert out["tau_distance"] == 1.0 and out["mrc"] == 1.0 and len(out["added"]) >= 2


def test_ordinal_relaxation_and_rule_run():
    rng = np.random.default_rng(3)
    x = pd.DataFrame(rng.normal(size=(40, 4)), index=[f"M{i}" for i in range(40)], columns=list("abcd"))
    t = ScoreTable.from_frame(x)
    out = ordinal_sensitivity(t, exact_limit=4, steps=100, seed=0)
    assert not out["exact"] and out["lower_bound"] and 0.0 <= out["tau_distance"] <= 1.0
    assert out == ordinal_sensitivity(t, exact_limit=4, steps=100, seed=0)
    with_rule = ordinal_sensitivity(t, make_ranker("copeland"), exact_limit=4, steps=100, rule_budget=40)
    assert 0.0 <= with_rule["tau_distance"] <= 1.0 and with_rule["rule_calls"] <= 40
