"""ScoreTable: construction from frames and CSV + sidecar, validation errors that name the culprit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ranking.errors import UserError
from ranking.table import Criterion, ScoreTable


def frame(**cols):
    return pd.DataFrame(cols, index=["A", "B", "C"][: len(next(iter(cols.values())))])


def test_from_frame_directions_weights_groups():
    t = ScoreTable.from_frame(
        frame(acc=[0.9, 0.8, 0.7], kwh=[3.0, 1.0, 2.0]),
        directions={"kwh": "lower"},
        weights={"acc": 2},
        groups={"acc": "performance", "kwh": "efficiency"},
    )
    assert t.models == ("A", "B", "C")
    assert t.names == ("acc", "kwh")
    assert t.weights.tolist() == [2.0, 1.0]
    assert t.group_names == ("performance", "efficiency")
    assert t.oriented[:, 1].tolist() == [-3.0, -1.0, -2.0]
    assert t.group("efficiency").names == ("kwh",)


def test_values_are_read_only_and_transformations_copy():
    t = ScoreTable.from_frame(frame(a=[1.0, 2.0, 3.0]))
    with pytest.raises(ValueError):
        t.values[0, 0] = 5
    t2 = t.with_weights({"a": 0.5})
    assert t.weights.tolist() == [1.0] and t2.weights.tolist() == [0.5]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1, "x"]}, index=["A", "B"])), "model 'B' on criterion 'a'"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1, np.inf]}, index=["A", "B"])), "model 'B' on criterion 'a'"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1, 2]}, index=["A", "A"])), "model 'A' appears more than once"),
        (lambda: ScoreTable.from_frame(pd.DataFrame([[1, 2]], columns=["a", "a"], index=["A"])), "criterion 'a' appears more than once"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1.0]}, index=["A"]), weights={"a": -1}), "weight -1 is negative"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1.0]}, index=["A"]), weights={"a": 0}), "all criterion weights"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1.0]}, index=["A"]), weights={"b": 1}), "unknown column 'b'"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1.0]}, index=["A"]), directions={"a": "up"}), "direction 'up'"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [1.0]}, index=["A"]), groups={"a": "x"}, known_groups=["p"]), "unknown group 'x'"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": []})), "empty"),
        (lambda: ScoreTable.from_frame(pd.DataFrame({"a": [np.nan, np.nan], "b": [1, 2]}, index=["A", "B"])), "criterion 'a' has no score"),
    ],
)
def test_bad_tables_name_the_problem(make, message):
    with pytest.raises(UserError, match=message):
        make()


def test_csv_roundtrip_with_sidecar(tmp_path):
    t = ScoreTable.from_frame(
        frame(acc=[0.9, np.nan, 0.7], kwh=[3.0, 1.0, 2.0]),
        criteria=[Criterion("kwh", direction="lower", group="efficiency", unit="kWh")],
        groups={"acc": "performance"},
    )
    t.to_csv(tmp_path / "matrix.csv")
    back = ScoreTable.load(tmp_path / "matrix.csv")
    assert back.models == t.models and back.criteria == t.criteria
    np.testing.assert_array_equal(back.values, t.values)
    assert back.incomplete_models() == ["B"]
    assert back.drop_incomplete().models == ("A", "C")
    assert ScoreTable.load(tmp_path).models == t.models  # a results directory with matrix.csv


def test_a_sidecar_may_say_how_a_criterion_was_obtained(tmp_path):
    (tmp_path / "m.csv").write_text("model,acc,kwh\nA,0.9,3\nB,0.8,1\n")
    (tmp_path / "m.yaml").write_text("criteria:\n  acc: {direction: higher}\n  kwh: {direction: lower, unit: kWh, "
                                     "method: estimate, source: codecarbon's CPU and RAM models}\n")
    t = ScoreTable.from_csv(tmp_path / "m.csv")
    assert t.criterion("kwh").method == "estimate" and t.criterion("acc").method is None
    t.to_csv(tmp_path / "out.csv")
    assert ScoreTable.load(tmp_path / "out.csv").criterion("kwh").to_dict() == {
        "direction": "lower", "weight": 1.0, "unit": "kWh", "source": "codecarbon's CPU and RAM models",
        "method": "estimate"}
    (tmp_path / "m.yaml").write_text("criteria:\n  kwh: {direction: lower, method: 3}\n")
    with pytest.raises(UserError, match=r"m.yaml: criteria.kwh.method: input should be a valid string \(got 3\) — "
                       r"write how the figures were obtained, as text \(e.g. measured, estimate\)$"):
        ScoreTable.from_csv(tmp_path / "m.csv")
    (tmp_path / "m.yaml").write_text("criteria:\n  kwh: {direction: lower, methd: estimate}\n")
    with pytest.raises(UserError, match=r"criteria.kwh.methd: unknown key — remove it or fix its spelling "
                       r"\(allowed: direction, weight, group, unit, source, method\)"):
        ScoreTable.from_csv(tmp_path / "m.csv")


def test_csv_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        ScoreTable.from_csv(tmp_path / "nope.csv")
    (tmp_path / "m.csv").write_text("model,a\nA,1\nB,oops\n")
    with pytest.raises(UserError, match="'B' on criterion 'a' .* 'oops'"):
        ScoreTable.from_csv(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text("model,a\nA,1\nB,2\n")
    (tmp_path / "m.yaml").write_text("criteria:\n  a: {direction: sideways}\n")
    with pytest.raises(UserError, match="m.yaml: criteria.a.direction: 'sideways' is not allowed — write "
                       "'higher' or 'lower'"):
        ScoreTable.from_csv(tmp_path / "m.csv")
    (tmp_path / "m.yaml").write_text("criteria:\n  zz: {}\n")
    with pytest.raises(UserError, match="m.yaml: criteria.zz: m.csv has no column 'zz' — remove the entry"):
        ScoreTable.from_csv(tmp_path / "m.csv")
