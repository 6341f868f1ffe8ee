"""Kemeny consensus: the DP agrees with brute force, counts optimal rankings, falls back to Borda."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ranking.analysis.kemeny import (
    borda_order,
    disagreement_matrix,
    kemeny,
    kemeny_brute_force,
    kemeny_dp,
    ranking_cost,
)
from ranking.table import ScoreTable


def _table(data: dict, index: str, **kw) -> ScoreTable:
    return ScoreTable.from_frame(pd.DataFrame(data, index=list(index)), **kw)


def test_hand_checked_three_systems():
    # a: X>Y>Z, b: X>Z>Y, c: Y>Z>X. X,Y,Z costs 1 (c on XY) + 1 (c on XZ) + 1 (b on YZ) = 3, and it is unique.
    t = _table({"a": [3, 2, 1], "b": [3, 1, 2], "c": [1, 3, 2]}, "XYZ")
    r = kemeny(t)
    assert (r.ranking, r.cost, r.n_optimal, r.exact) == (["X", "Y", "Z"], 3.0, 1, True)


def test_condorcet_cycle_has_three_optimal_rankings():
    # a: X>Y>Z, b: Y>Z>X, c: Z>X>Y: every rotation costs 4, the reversed ones 5
    t = _table({"a": [3, 2, 1], "b": [1, 3, 2], "c": [2, 1, 3]}, "XYZ")
    r = kemeny(t)
    assert r.cost == 4.0 and r.n_optimal == 3


def test_all_ties_every_ranking_is_optimal():
    t = _table({"a": [1, 1, 1, 1]}, "ABCD")
    r = kemeny(t)
    assert r.cost == 0.0 and r.n_optimal == 24
    # with tied pairs charged 1/2 each: 6 pairs
    assert kemeny(t, tie_cost=0.5).cost == 3.0


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_dp_matches_brute_force(n):
    rng = np.random.default_rng(n)
    for _ in range(8):
        x = rng.integers(0, 4, size=(n, 5)).astype(float)  # many ties
        x[rng.random(x.shape) < 0.1] = np.nan  # some missing pairs
        w = rng.choice([0.5, 1.0, 2.0], size=5)
        d = disagreement_matrix(x, w)
        order, cost, count = kemeny_dp(d)
        b_order, b_cost, b_count = kemeny_brute_force(d)
        assert cost == pytest.approx(b_cost)
        assert count == b_count
        assert ranking_cost(order, d) == pytest.approx(cost)


def test_disagreement_matrix_counts_strictly_better():
    x = np.array([[1.0, 2.0], [2.0, 2.0], [0.0, np.nan]])
    d = disagreement_matrix(x, np.array([1.0, 3.0]))
    # D[u, v] = weight of criteria ranking v strictly above u
    assert d.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]


def test_borda_beyond_max_exact_and_weights():
    t = _table({"a": [4, 3, 2, 1], "b": [1, 2, 3, 4]}, "ABCD", weights={"b": 0.25})
    r = kemeny(t, max_exact=3)
    assert not r.exact and r.method == "borda" and r.n_optimal == 0
    assert r.ranking == ["A", "B", "C", "D"]
    # cost of A>B>C>D: 6 pairs all reversed in b (weight 1/4)
    assert r.cost == pytest.approx(1.5)
    exact = kemeny(t)
    assert exact.exact and exact.ranking == r.ranking and exact.cost == pytest.approx(1.5)


def test_borda_order_skips_missing():
    x = np.array([[3.0, np.nan, np.nan], [2.0, 1.0, 1.0], [1.0, 2.0, 2.0]])  # mean ranks 1, 2, 5/3
    assert borda_order(x).tolist() == [0, 2, 1]


def test_lower_is_better_is_respected():
    t = _table({"err": [0.3, 0.1, 0.2]}, "ABC", directions={"err": "lower"})
    assert kemeny(t).ranking == ["B", "C", "A"]
