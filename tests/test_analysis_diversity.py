"""Diversity = 1 − Kendall's W: known answers, tie correction, weights, imputation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ranking.analysis.diversity import diversity, kendall_w, kendall_w_loops, knn_impute
from ranking.floor.errors import UserError
from ranking.table import ScoreTable


def test_identical_criteria_give_w_one_and_diversity_zero():
    x = np.array([[5.0, 5.0, 5.0], [3.0, 3.0, 3.0], [4.0, 4.0, 4.0], [1.0, 1.0, 1.0]])
    assert kendall_w(x) == pytest.approx(1.0)
    t = ScoreTable.from_frame(pd.DataFrame(x, index=list("ABCD"), columns=["a", "b", "c"]))
    assert diversity(t)["diversity"] == pytest.approx(0.0)


def test_identical_criteria_with_ties_still_one():
    x = np.array([[2.0, 2.0], [2.0, 2.0], [1.0, 1.0]])
    assert kendall_w(x) == pytest.approx(1.0)  # the tie correction makes this exact


def test_opposite_criteria_give_w_zero_and_diversity_one():
    x = np.array([[1.0, 4.0], [2.0, 3.0], [3.0, 2.0], [4.0, 1.0]])
    assert kendall_w(x) == pytest.approx(0.0)
    t = ScoreTable.from_frame(pd.DataFrame(x, index=list("ABCD"), columns=["a", "b"]))
    assert diversity(t)["diversity"] == pytest.approx(1.0)


def test_hand_computed_value():
    # 3 models, 2 criteria: ranks (1,2,3) and (1,3,2): R = (2,5,5), S = 6, W = 12·6 / (4·24) = 0.75
    x = np.array([[3.0, 3.0], [2.0, 1.0], [1.0, 2.0]])
    assert kendall_w(x) == pytest.approx(0.75)


def test_tie_corrected_matches_loops():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, size=(9, 6)).astype(float)
    assert kendall_w(x) == pytest.approx(kendall_w_loops(x))


def test_integer_weight_equals_replication():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(7, 3))
    replicated = np.column_stack([x[:, 0], x[:, 0], x[:, 1], x[:, 2], x[:, 2], x[:, 2]])
    assert kendall_w(x, np.array([2.0, 1.0, 3.0])) == pytest.approx(kendall_w(replicated))


def test_lower_is_better_and_zero_weight():
    x = pd.DataFrame({"acc": [3, 2, 1], "err": [1, 2, 3], "noise": [1, 3, 2]}, index=list("ABC"))
    t = ScoreTable.from_frame(x, directions={"err": "lower"}, weights={"noise": 0})
    out = diversity(t)
    assert out["diversity"] == pytest.approx(0.0) and out["n_criteria"] == 2


def test_knn_impute_uses_nearest_rows():
    x = np.array([[1.0, 1.0, 1.0], [1.1, 1.1, np.nan], [5.0, 5.0, 9.0], [5.1, 5.2, 7.0]])
    out = knn_impute(x, k=1)
    assert out[1, 2] == 1.0


def test_missing_policies():
    x = pd.DataFrame({"a": [3, 2, 1, 0], "b": [3, np.nan, 1, 0]}, index=list("ABCD"))
    t = ScoreTable.from_frame(x)
    assert diversity(t, impute="drop")["n_models"] == 3
    assert diversity(t, impute="median")["n_models"] == 4
    with pytest.raises(UserError, match="--impute"):
        diversity(t, impute="zero")


def test_kendall_w_exact_on_a_hand_made_table():
    # 4 models x 3 criteria, higher is better; c3 ties A and B.
    #        c1  c2  c3     ranks (1 = best)   rank sums R
    #   A     4   3   5     1    2    1.5      4.5
    #   B     3   4   5     2    1    1.5      4.5
    #   C     2   1   1     3    4    3        10
    #   D     1   2   0     4    3    4        11
    # mean R = m(n+1)/2 = 7.5; S = 3² + 3² + 2.5² + 3.5² = 36.5
    # tie correction: one block of t = 2 in c3 -> t³ - t = 6
    # W = 12 S / (m²(n³ - n) - m Σ(t³ - t)) = 438 / (9·60 - 3·6) = 438 / 522 = 73/87
    x = np.array([[4, 3, 5], [3, 4, 5], [2, 1, 1], [1, 2, 0]], dtype=float)
    assert kendall_w(x) == pytest.approx(73 / 87, abs=1e-12)
    table = ScoreTable.from_frame(pd.DataFrame(x, index=list("ABCD"), columns=["c1", "c2", "c3"]))
    assert diversity(table)["diversity"] == pytest.approx(14 / 87, abs=1e-12)
