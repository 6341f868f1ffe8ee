"""Ties inside a criterion (both conventions, tolerance) and missing scores, with hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ranking.floor.errors import UserError
from ranking.rules import get_rule, rule_names
from ranking.table import Criterion, ScoreTable

POSITIONAL = ["plurality", "borda", "dowdall", "threshold", "baldwin"]


def make(data: dict, **kw) -> ScoreTable:
    frame = pd.DataFrame(data, index=list("ABCDEFG")[: len(next(iter(data.values())))])
    return ScoreTable.from_frame(frame, **kw)


@pytest.fixture(scope="module")
def tied():
    # c1: A = B > C > D (A, B tied first); c2: A > B = C = D (three tied last)
    return make({"c1": [3, 3, 1, 0], "c2": [2, 1, 1, 1]})


def scores(name, table, **kw):
    return get_rule(name)(table, **kw).scores.tolist()


def test_default_convention_averages_the_tied_positions(tied):
    assert scores("borda", tied) == [5.5, 3.5, 2.0, 1.0]  # c1: (3+2)/2 each; c2: (2+1+0)/3 each
    assert scores("plurality", tied) == [1.5, 0.5, 0.0, 0.0]  # two tied first share the point
    assert scores("dowdall", tied) == pytest.approx([1.75, 0.75 + 13 / 36, 1 / 3 + 13 / 36, 1 / 4 + 13 / 36])
    assert scores("threshold", tied) == pytest.approx([2, 5 / 3, 5 / 3, 2 / 3])


def test_votenrank_convention(tied):
    assert scores("borda", tied, ties="votenrank") == [5, 2, 1, 0]  # models strictly below
    assert scores("plurality", tied, ties="votenrank") == [1, 0, 0, 0]  # only a unique first place
    assert scores("dowdall", tied, ties="votenrank") == pytest.approx([2, 1.5, 1 / 3 + 1 / 2, 1 / 4 + 1 / 2])
    assert scores("threshold", tied, ties="votenrank") == [2, 1, 1, 0]  # tied for last counts as last


@pytest.mark.parametrize("ties", ["default", "votenrank"])
def test_threshold_breaks_ties_lexicographically(tied, ties):
    r = get_rule("threshold")(tied, ties=ties)
    # B and C equal on (1,1,1,0); on (1,1,0,0) B keeps its c1 point, C does not
    assert r.ranks.tolist() == [1, 2, 3, 4]


def test_default_convention_conserves_points_per_criterion(tied):
    # each criterion hands out exactly the points of a strict ranking
    assert sum(scores("borda", tied)) == 2 * (3 + 2 + 1)
    assert sum(scores("plurality", tied)) == 2
    assert sum(scores("dowdall", tied)) == pytest.approx(2 * (1 + 1 / 2 + 1 / 3 + 1 / 4))


def test_majority_rules_skip_tied_criteria(tied):
    assert get_rule("condorcet")(tied).winners == ("A",)
    assert scores("copeland", tied) == [3, 1, -1, -3]
    assert scores("minimax", tied) == [0, -1, -2, -2]
    for ties in ("default", "votenrank"):
        assert scores("copeland", tied, ties=ties) == [3, 1, -1, -3]


def test_baldwin_with_ties(tied):
    r = get_rule("baldwin")(tied)
    assert r.scores.tolist() == [3, 2, 1, 0] and r.winners == ("A",)


def test_tied_models_share_the_best_position():
    t = make({"c1": [1, 2, 3], "c2": [3, 2, 1]})  # A and C symmetric, B in the middle twice
    r = get_rule("borda")(t)
    assert r.scores.tolist() == [2, 2, 2] and r.ranks.tolist() == [1, 1, 1] and len(r.winners) == 3
    r = get_rule("plurality")(t)
    assert r.ranks.tolist() == [1, 3, 1] and r.winners == ("A", "C")


def test_float_noise_in_weight_sums_is_a_tie():
    # A wins on three criteria of weight 0.1 each, B on one of weight 0.3: 0.1+0.1+0.1 != 0.3 in floats
    t = make({"c1": [2, 1], "c2": [2, 1], "c3": [2, 1], "c4": [1, 2]}, weights={"c1": 0.1, "c2": 0.1, "c3": 0.1, "c4": 0.3})
    for name in ("plurality", "borda", "dowdall", "copeland", "minimax", "baldwin"):
        r = get_rule(name)(t)
        assert r.ranks.tolist() == [1, 1], name
    assert get_rule("condorcet")(t).winners == ()


def test_atol_makes_close_scores_ties():
    t = make({"c1": [0.900, 0.899, 0.5], "c2": [0.1, 0.2, 0.3]})
    assert scores("borda", t) == [2, 2, 2]
    assert scores("borda", t, atol=0.005) == [1.5 + 0, 1.5 + 1, 0 + 2]
    assert scores("copeland", t, atol=0.005) == [-1, 1, 0]  # A ~ B on c1, so B wins with c2
    with pytest.raises(UserError, match="atol"):
        get_rule("borda")(t, atol=-1)


def test_unknown_tie_convention():
    t = make({"c1": [1, 2]})
    for name in rule_names():
        with pytest.raises(UserError, match="tie convention 'nope'"):
            get_rule(name)(t, ties="nope")


# ---------------------------------------------------------------------- missing scores
@pytest.fixture(scope="module")
def holes():
    # c1: A > B (C missing); c2: C > A (B missing); c3: C > B > A
    return make({"c1": [3, 2, np.nan], "c2": [1, np.nan, 2], "c3": [1, 2, 3]})


def test_positional_rules_rank_only_present_models(holes):
    assert scores("borda", holes) == [1, 1, 3]  # vectors (1, 0), (1, 0), (2, 1, 0)
    assert scores("plurality", holes) == [1, 0, 2]
    assert scores("dowdall", holes) == pytest.approx([1 + 1 / 2 + 1 / 3, 1 / 2 + 1 / 2, 1 + 1])
    assert scores("threshold", holes) == [1, 1, 2]  # last places: A on c2 and c3, B on c1


def test_missing_is_not_zero(holes):
    zeros = ScoreTable.from_frame(holes.frame().fillna(0.0))
    assert scores("borda", zeros) == [3, 2, 4]
    assert scores("borda", holes) != scores("borda", zeros)


def test_missing_error_names_model_and_criterion(holes):
    for name in POSITIONAL:
        with pytest.raises(UserError, match="model 'B' has no score on criterion 'c2'"):
            get_rule(name)(holes, missing="error")
    with pytest.raises(UserError, match="missing-score policy"):
        get_rule("borda")(holes, missing="zero")


def test_majority_rules_skip_pairs_with_a_missing_score(holes):
    # A vs B: c1 A, c3 B -> tie; C beats A (c2, c3) and B (c3)
    assert get_rule("condorcet")(holes).winners == ("C",)
    assert scores("copeland", holes) == [-1, -1, 2]
    assert scores("minimax", holes) == [-2, -1, 0]


def test_means_impute_the_criterion_median(holes):
    # medians: c1 2.5, c2 1.5
    assert scores("arithmetic_mean", holes) == pytest.approx([5 / 3, 5.5 / 3, 2.5])
    geo = scores("geometric_mean", holes)
    assert geo == pytest.approx([3 ** (1 / 3), (2 * 1.5 * 2) ** (1 / 3), (2.5 * 2 * 3) ** (1 / 3)])


def test_model_without_any_weighted_score_is_unranked():
    t = make({"c1": [1, 2, np.nan], "c2": [5, 4, 3]}, weights={"c2": 0.0})
    for name in rule_names():
        r = get_rule(name)(t)
        assert np.isnan(r.scores[2]) and np.isnan(r.ranks[2]), name
        assert r.to_dict()["ranks"]["C"] is None


def test_zero_weight_criteria_are_ignored():
    base = make({"c1": [3, 2, 1], "c2": [1, 2, 3]})
    zero = base.with_weights({"c2": 0.0})
    only = base.select_criteria(["c1"])
    for name in rule_names():
        assert get_rule(name)(zero).ranks.tolist() == get_rule(name)(only).ranks.tolist(), name


def test_condorcet_without_winner_has_no_winners():
    cycle = make({"c1": [3, 2, 1], "c2": [1, 3, 2], "c3": [2, 1, 3]})  # A > B > C > A
    r = get_rule("condorcet")(cycle)
    assert r.winners == () and r.scores.tolist() == [0, 0, 0] and r.ranks.tolist() == [2, 2, 2]
    assert get_rule("copeland")(cycle).ranks.tolist() == [1, 1, 1]


def test_geometric_mean_refuses_non_positive_scores():
    t = make({"c1": [1.0, 0.0], "c2": [1.0, 2.0]})
    with pytest.raises(UserError, match="model 'B' has 0 on criterion 'c1'"):
        get_rule("geometric_mean")(t)


def test_geometric_mean_inverts_lower_is_better():
    t = make({"acc": [0.8, 0.8], "kwh": [1.0, 4.0]}, directions={"kwh": "lower"})
    assert scores("geometric_mean", t) == pytest.approx([(0.8 / 1.0) ** 0.5, (0.8 / 4.0) ** 0.5])


def test_optimality_gap_parameters():
    t = make({"c1": [90.0, 60.0], "c2": [100.0, 97.0]})
    r = get_rule("optimality_gap")(t)  # scale inferred as 100, gamma 1
    assert r.params["scale"] == 100 and r.scores == pytest.approx([-0.05, -0.215])
    r = get_rule("optimality_gap")(t, gamma=0.8)
    assert r.scores == pytest.approx([0.0, -0.1]) and r.winners == ("A",)
    with pytest.raises(UserError, match="lower-is-better"):
        get_rule("optimality_gap")(make({"c1": [1.0, 2.0]}, directions={"c1": "lower"}))
    with pytest.raises(UserError, match="scale"):
        get_rule("optimality_gap")(t, scale=0)


def test_exact_tie_of_float_sums_is_a_tie_but_tiny_real_differences_are_not():
    # Dowdall: model 1 gets 1/3 + 2/4 + 1/2 + 4/3 + 4 + 2 and model 3 gets 1 + 2/2 + 1 + 4 + 4/4 + 2/3:
    # both exactly 26/3, but the float sums differ in the last bit
    rankings = [[3, 2, 1, 0], [0, 3, 2, 1], [3, 1, 2, 0], [3, 2, 1, 0], [1, 0, 2, 3], [1, 0, 3, 2]]
    weights = [1, 2, 1, 4, 4, 2]
    x = np.array([[4 - r.index(c) for r in rankings] for c in range(4)], dtype=float)
    t = ScoreTable(tuple("0123"), tuple(Criterion(f"v{j}", weight=w) for j, w in enumerate(weights)), x)
    assert get_rule("dowdall")(t).winners == ("1", "3")
    # a genuine difference of 1e-9 of the total weight is not float noise
    t = make({"c1": [2, 1], "c2": [1, 2]}, weights={"c1": 1.0, "c2": 1.0 + 1e-9})
    for name in ("plurality", "borda", "dowdall", "threshold", "baldwin", "copeland", "minimax"):
        assert get_rule(name)(t).winners == ("B",), name
