"""Bounded work and robust numbers: the block-wise paths for many models, huge finite values, Kemeny's limits."""

from __future__ import annotations

import numpy as np
import pytest

import ranking.pairwise as pairwise_mod
import ranking.rules as rules_mod
from ranking.analysis.kemeny import (
    EXACT_LIMIT,
    blocked_ranking_cost,
    disagreement_matrix,
    kemeny,
    ranking_cost,
)
from ranking.floor.errors import UserError
from ranking.settings import apply_setting
from ranking.table import Criterion, ScoreTable

BLOCKED_RULES = ("baldwin", "threshold", "condorcet", "copeland", "minimax")


def _random_table(seed: int) -> ScoreTable:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 30)), int(rng.integers(1, 6))
    v = rng.integers(0, int(rng.integers(2, 6)), size=(n, m)).astype(float)  # many ties
    v[rng.random((n, m)) < 0.15] = np.nan
    v[:, 0] = np.where(np.isnan(v[:, 0]), 1.0, v[:, 0])  # no empty row
    v[0] = np.where(np.isnan(v[0]), 0.0, v[0])  # no empty column
    w = rng.choice([0.5, 1.0, 2.0, 1 / 3], size=m)
    return ScoreTable(tuple(f"M{i}" for i in range(n)), tuple(Criterion(f"c{j}", weight=w[j]) for j in range(m)), v)


@pytest.fixture
def force_blocks(monkeypatch):
    """Every table counts as 'many models', and blocks hold 7 comparisons: the paths used at 20 000 models."""
    for mod in (pairwise_mod, rules_mod):
        monkeypatch.setattr(mod, "DENSE_LIMIT", 0)
        monkeypatch.setattr(mod, "BLOCK_ELEMENTS", 7)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("ties", ["default", "votenrank"])
def test_block_paths_give_the_dense_numbers(seed, ties, monkeypatch):
    t = _random_table(seed)
    dense = {r: apply_setting(t, r, ties=ties) for r in BLOCKED_RULES}
    for mod in (pairwise_mod, rules_mod):
        monkeypatch.setattr(mod, "DENSE_LIMIT", 0)
        monkeypatch.setattr(mod, "BLOCK_ELEMENTS", 7)
    for r in BLOCKED_RULES:
        blocked = apply_setting(t, r, ties=ties)
        np.testing.assert_array_equal(blocked.ranks, dense[r].ranks, err_msg=r)
        np.testing.assert_allclose(blocked.scores, dense[r].scores, rtol=1e-12, atol=1e-12, err_msg=r)


def test_block_paths_on_the_worked_example(force_blocks):
    from ranking.rules import worked_example

    t = worked_example()
    # the paper's appendix numbers (tests/test_rules_worked_example.py), now from the block-wise code
    assert apply_setting(t, "copeland").scores.tolist() == [-3.0, 3.0, 1.0, -1.0]
    assert apply_setting(t, "minimax").scores.tolist() == [-3.0, 0.0, -3.0, -3.0]
    assert apply_setting(t, "condorcet").winners == ("B",)
    assert apply_setting(t, "baldwin").ranks.tolist() == [4.0, 1.0, 2.0, 3.0]
    assert apply_setting(t, "threshold").ranks.tolist() == [4.0, 2.0, 1.0, 3.0]


# ---------------------------------------------------------------------- huge finite values
def test_huge_scores_never_tie_different_models():
    # A > B > C on both criteria, scores at the edge of float range
    t = ScoreTable(("A", "B", "C"), (Criterion("x"), Criterion("y")),
                   np.array([[1e308, 1e308], [1e308, -1e308], [-1e308, -1e308]]))
    for r in ("borda", "copeland", "minimax", "baldwin", "threshold", "plurality", "dowdall", "optimality_gap"):
        assert apply_setting(t, r).ranks.tolist() == [1.0, 2.0, 3.0], r
    # the mean of (1e308, 1e308) is 1e308, not inf; of (1e308, -1e308) exactly 0
    am = apply_setting(t, "arithmetic_mean")
    assert am.scores.tolist() == [1e308, 0.0, -1e308]
    assert am.ranks.tolist() == [1.0, 2.0, 3.0]


def test_a_column_in_the_billions_does_not_tie_the_means_of_models_it_does_not_separate():
    # A beats B on acc and ties it on params (7e9): the means (0.801 - 7e9) / 2 and (0.800 - 7e9) / 2 differ by
    # 5e-4, far above their rounding (~2.5e-5); the old tolerance (1e-12 of the largest |score|, 3.5e-3) tied them
    t = ScoreTable(("A", "B", "C"), (Criterion("acc"), Criterion("params", direction="lower")),
                   np.array([[0.801, 7e9], [0.800, 7e9], [0.5, 1e3]]))
    am = apply_setting(t, "arithmetic_mean")
    assert am.scores.tolist() == [(0.801 - 7e9) / 2, (0.800 - 7e9) / 2, (0.5 - 1e3) / 2]
    assert am.ranks.tolist() == [2.0, 3.0, 1.0]


def test_one_huge_optimality_gap_does_not_tie_the_others():
    # B's -1e308 used to set the tie tolerance for everyone (1e-12 × 5e305): A (-0.496) and C (-0.9995) tied first
    t = ScoreTable(("A", "B", "C"), (Criterion("acc"), Criterion("f1")),
                   np.array([[1e308, 0.8], [-1e308, 0.9], [0.0, 0.1]]))
    og = apply_setting(t, "optimality_gap")  # scale 100 (a score above 1), gamma 1
    assert og.scores.tolist() == [(0.0 + (0.008 - 1)) / 2, (-1e306 - 1 + (0.009 - 1)) / 2, (-1 + (0.001 - 1)) / 2]
    assert og.ranks.tolist() == [1.0, 3.0, 2.0] and og.winners == ("A",)


@pytest.mark.parametrize("rule", ["arithmetic_mean", "geometric_mean", "optimality_gap"])
def test_equal_means_computed_in_another_order_still_tie(rule):
    # B's scores are A's permuted, on criteria of equal weight: the same mean summed in another order
    rng = np.random.default_rng(5)
    for _ in range(200):
        a = rng.uniform(0.01, 1.0, size=7) * 10.0 ** rng.integers(-3, 4, size=7)
        if rule == "optimality_gap":
            a = np.minimum(a, 1.0)
        t = ScoreTable(("A", "B", "C"), tuple(Criterion(f"c{j}") for j in range(7)),
                       np.array([a, rng.permutation(a), a * 0.5]))
        assert apply_setting(t, rule).ranks.tolist()[:2] == [1.0, 1.0], (rule, a)


def test_huge_scores_with_a_missing_one_impute_a_finite_median():
    # y's median of (1e308, 1e308) is 1e308 (not inf): A's missing y is imputed as 1e308
    t = ScoreTable(("A", "B", "C"), (Criterion("x"), Criterion("y")),
                   np.array([[1e308, np.nan], [1e307, 1e308], [1e306, 1e308]]))
    am = apply_setting(t, "arithmetic_mean")
    assert np.isfinite(am.scores).all()
    assert am.ranks.tolist() == [1.0, 2.0, 3.0]


def test_huge_weights_keep_their_ratios():
    # x, y, z of weight 1e308 each; A first on x and y, C first on z, B always second
    t = ScoreTable(("A", "B", "C"), tuple(Criterion(c, weight=1e308) for c in "xyz"),
                   np.array([[3.0, 3.0, 1.0], [2.0, 2.0, 2.0], [1.0, 1.0, 3.0]]))
    # scores in units of the largest weight: Borda A = 2+2+0, B = 1+1+1, C = 0+0+2
    assert apply_setting(t, "borda").scores.tolist() == [4.0, 3.0, 2.0]
    assert apply_setting(t, "copeland").scores.tolist() == [2.0, 0.0, -2.0]
    assert apply_setting(t, "condorcet").winners == ("A",)
    assert apply_setting(t, "minimax").ranks.tolist() == [1.0, 2.0, 2.0]
    assert apply_setting(t, "arithmetic_mean").scores.tolist() == pytest.approx([7 / 3, 2.0, 5 / 3])


def test_huge_group_weights_in_the_weighted_setting():
    # own weights 1e308; group weights g = 1e308, h = 5e307 (ratio 2:1). A wins g's x, B wins h's y.
    t = ScoreTable(("A", "B"), (Criterion("x", weight=1e308, group="g"), Criterion("y", weight=1e308, group="h")),
                   np.array([[2.0, 1.0], [1.0, 3.0]]))
    r = apply_setting(t, "borda", setting="weighted", group_weights={"g": 1e308, "h": 5e307})
    assert r.scores.tolist() == [1.0, 0.5]
    assert r.winners == ("A",)


# ---------------------------------------------------------------------- Kemeny
def test_blocked_kemeny_cost_equals_the_matrix_cost(monkeypatch):
    import ranking.analysis.kemeny as km

    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(30, 4)).astype(float)
    x[rng.random(x.shape) < 0.1] = np.nan
    w = np.array([1.0, 0.5, 2.0, 1.0])
    order = rng.permutation(30)
    monkeypatch.setattr(km, "_BLOCK", 50)
    for tie_cost in (0.0, 0.5):
        assert blocked_ranking_cost(order, x, w, tie_cost) == pytest.approx(
            ranking_cost(order, disagreement_matrix(x, w, tie_cost))
        )


def test_kemeny_beyond_max_exact_is_borda_with_its_cost():
    t = ScoreTable.from_frame(
        __import__("pandas").DataFrame({"a": [3, 2, 1], "b": [3, 1, 2], "c": [1, 3, 2]}, index=list("XYZ"))
    )
    r = kemeny(t, max_exact=2)
    # Borda: X mean rank (1+1+3)/3, Y (2+3+1)/3, Z (3+2+2)/3 -> X, Y, Z; cost: 1 (b: Z>Y) + 2 (c: Y>X, Z>X) = 3
    assert (r.ranking, r.cost, r.exact, r.method) == (["X", "Y", "Z"], 3.0, False, "borda")


@pytest.mark.parametrize("tie_cost", [float("nan"), float("inf"), -1.0])
def test_kemeny_refuses_non_finite_tie_cost(tie_cost):
    from ranking.rules import worked_example

    with pytest.raises(UserError, match="tie-cost"):
        kemeny(worked_example(), tie_cost=tie_cost)


def test_kemeny_exact_limit():
    from ranking.rules import worked_example

    with pytest.raises(UserError, match=f"0 to {EXACT_LIMIT}"):
        kemeny(worked_example(), max_exact=EXACT_LIMIT + 1)


def test_kemeny_with_huge_weights_terminates_with_the_unit_weight_answer():
    from ranking.rules import worked_example

    t = worked_example()
    huge = t.with_weights([1e308] * t.n_criteria)
    a, b = kemeny(t), kemeny(huge)
    assert a.ranking == b.ranking and a.n_optimal == b.n_optimal


def test_prospective_states_its_model_limit(monkeypatch):
    import ranking.prospective as pm
    from ranking.rules import worked_example

    monkeypatch.setattr(pm, "MAX_MODELS", 3)
    with pytest.raises(UserError, match="at most 3 models, this table has 4"):
        pm.prospective(worked_example())


def test_numeric_group_names_in_a_scenario():
    # YAML reads `1:` as an integer; it names the same group as "1" (was: "unknown group 1 (groups: 1, 2)")
    from ranking.scenarios.compare import compare
    from ranking.scenarios.scenario import Scenario

    doc = {"groups": {1: {"criteria": ["x"]}, 2: {"criteria": ["y"]}},
           "columns": [{"name": "g1", "rule": "borda", "group": 1},
                       {"name": "w", "rule": "borda", "setting": "weighted", "group_weights": {1: 2, 2: 1}}]}
    t = ScoreTable(("A", "B"), (Criterion("x"), Criterion("y")), np.array([[2.0, 1.0], [1.0, 2.0]]))
    sc = Scenario.from_mapping(doc)
    cmp = compare(sc, sc.build_table(t))
    assert cmp.results["g1"].winners == ("A",)
    assert cmp.results["w"].scores.tolist() == [2.0, 1.0]  # A wins x (weight 2), B wins y (weight 1)
