"""The basic, weighted and two-step settings."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import ranking
from ranking.choices import SETTINGS
from ranking.floor.errors import UserError
from ranking.rules import rule_names, worked_example
from ranking.settings import apply_setting, weighted_table
from ranking.table import ScoreTable


def grouped(groups: dict[str, str], table: ScoreTable | None = None) -> ScoreTable:
    t = table or worked_example()
    return t.with_criteria([replace(c, group=groups.get(c.name)) for c in t.criteria])


@pytest.fixture(scope="module")
def xy():
    # x = {c1, c2}, y = {c3, c4, c5}
    return grouped({"c1": "x", "c2": "x", "c3": "y", "c4": "y", "c5": "y"})


def test_settings_names():
    assert SETTINGS == ("basic", "weighted", "two-step")


def test_basic_is_the_rule_itself(xy):
    assert apply_setting(xy, "borda").scores.tolist() == [6, 9, 8, 7]
    assert apply_setting(xy, "borda").params["setting"] == "basic"


def test_weighted_spreads_group_weight_over_the_group(xy):
    t = weighted_table(xy, {"x": 1.0, "y": 1.0})
    assert t.weights == pytest.approx([0.5, 0.5, 1 / 3, 1 / 3, 1 / 3])
    r = apply_setting(xy, "borda", setting="weighted")  # group weights default to 1
    # per-criterion Borda points: A 3,3,0,0,0  B 2,0,3,2,2  C 1,2,1,3,1  D 0,1,2,1,3
    assert r.scores == pytest.approx([3, 1 + 7 / 3, 1.5 + 5 / 3, 0.5 + 2])
    r = apply_setting(xy, "borda", setting="weighted", group_weights={"x": 3, "y": 1})
    assert r.scores == pytest.approx([9, 3 + 7 / 3, 4.5 + 5 / 3, 1.5 + 2])
    assert r.params["group_weights"] == {"x": 3.0, "y": 1.0}


def test_weighted_respects_own_weights_within_a_group(xy):
    # c1 counts twice as much as c2 inside x; the group still weighs x in total
    t = xy.with_weights({"c1": 2.0})
    assert weighted_table(t, {"x": 1.0, "y": 1.0}).weights == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3])


def test_weighted_majority_rules(xy):
    # x: A first twice; y weighs the same in total: A last three times
    r = apply_setting(xy, "copeland", setting="weighted", group_weights={"x": 1, "y": 1})
    w = weighted_table(xy, {"x": 1.0, "y": 1.0})
    assert r.scores.tolist() == apply_setting(w, "copeland").scores.tolist()


def test_two_step_interim_positions(xy):
    r = apply_setting(xy, "borda", setting="two-step", group_weights={"x": 3, "y": 1})
    # x: Borda A 6, C 3, B 2, D 1 -> positions A1 C2 B3 D4; y: B 7, D 6, C 5, A 0 -> B1 D2 C3 A4
    assert r.params["interim"] == {
        "x": {"A": -1.0, "B": -3.0, "C": -2.0, "D": -4.0},
        "y": {"A": -4.0, "B": -1.0, "C": -3.0, "D": -2.0},
    }
    # second step: Borda on the two group rankings with weights 3 and 1
    assert r.scores.tolist() == [9 + 0, 3 + 3, 6 + 1, 0 + 2] and r.winners == ("A",)


def test_two_step_for_every_rule_runs(xy):
    for name in rule_names():
        r = apply_setting(xy, name, setting="two-step")
        assert r.ranks.shape == (4,) and not np.isnan(r.ranks).any(), name
        assert r.params["setting"] == "two-step"


def test_two_step_means_are_means_of_group_means(xy):
    r = apply_setting(xy, "arithmetic_mean", setting="two-step", group_weights={"x": 1, "y": 3})
    x = xy.values
    expected = (x[:, :2].mean(axis=1) * 1 + x[:, 2:].mean(axis=1) * 3) / 4
    assert r.scores == pytest.approx(expected)
    og = apply_setting(xy, "optimality_gap", setting="two-step", scale=4, gamma=0.75)
    gaps = np.minimum(x / 4, 0.75) - 0.75
    assert og.scores == pytest.approx((gaps[:, :2].mean(axis=1) + gaps[:, 2:].mean(axis=1)) / 2)


def test_two_step_condorcet_and_threshold(xy):
    r = apply_setting(xy, "condorcet", setting="two-step", group_weights={"x": 2, "y": 1})
    # x: A beats everyone (c1, c2 both rank A first); y: B beats everyone -> second step: A wins 2 to 1
    assert r.params["interim"]["x"]["A"] == -1.0 and r.params["interim"]["y"]["B"] == -1.0
    assert r.winners == ("A",)


def test_two_step_model_missing_a_whole_group():
    frame = pd.DataFrame(
        {"p1": [3, 2, 1], "p2": [3, 1, 2], "e1": [np.nan, 1, 2]}, index=["A", "B", "C"]
    )
    t = ScoreTable.from_frame(frame, groups={"p1": "perf", "p2": "perf", "e1": "eff"})
    r = apply_setting(t, "borda", setting="two-step")
    assert r.params["interim"]["eff"]["A"] is None
    # perf: A1 B2 C2 (B, C tie) -> Borda among 3: A 2, B 0.5, C 0.5; eff (B, C only): C 1, B 0
    assert r.scores.tolist() == [2, 0.5, 1.5]
    with pytest.raises(UserError, match="model 'A' has no score on criterion 'eff'"):
        apply_setting(t, "borda", setting="two-step", missing="error")


def test_group_weight_zero_drops_the_group(xy):
    r = apply_setting(xy, "borda", setting="two-step", group_weights={"x": 0, "y": 1})
    assert list(r.params["interim"]) == ["y"]
    assert r.winners == ("B",)
    w = apply_setting(xy, "borda", setting="weighted", group_weights={"x": 0, "y": 1})
    assert w.winners == ("B",)


def test_setting_errors(xy):
    with pytest.raises(UserError, match="unknown group 'z'"):
        apply_setting(xy, "borda", setting="weighted", group_weights={"z": 1})
    with pytest.raises(UserError, match="must be finite and >= 0"):
        apply_setting(xy, "borda", setting="weighted", group_weights={"x": -1})
    with pytest.raises(UserError, match="all group weights are zero"):
        apply_setting(xy, "borda", setting="two-step", group_weights={"x": 0, "y": 0})
    with pytest.raises(UserError, match="setting: 'three-step' is not one of basic, weighted, two-step"):
        ranking.rank(xy, "borda", setting="three-step")  # the choices are checked where they enter (ranking.plan)
    with pytest.raises(UserError, match="group weights only apply with the weighted or two-step setting"):
        ranking.rank(xy, "borda", group_weights={"x": 1})
    with pytest.raises(UserError, match="need criterion groups"):
        apply_setting(worked_example(), "borda", setting="weighted")
    with pytest.raises(UserError, match="criterion 'c5' .*has no group"):
        apply_setting(grouped({"c1": "x", "c2": "x", "c3": "y", "c4": "y"}), "borda", setting="two-step")
    with pytest.raises(UserError, match="unknown rule 'bordaa'"):
        apply_setting(xy, "bordaa")
    with pytest.raises(UserError, match="rule borda has no parameter 'gamma'"):
        apply_setting(xy, "borda", gamma=1)
