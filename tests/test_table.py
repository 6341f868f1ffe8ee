"""ScoreTable: construction from frames and CSV + sidecar, validation errors that name the culprit."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from ranking.floor.errors import UserError
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
    with pytest.raises(UserError, match=r"m.yaml: criteria.kwh.method: 3 is not text — "
                       r"write how the figures were obtained, as text \(e.g. measured, estimate\)$"):
        ScoreTable.from_csv(tmp_path / "m.csv")
    (tmp_path / "m.yaml").write_text("criteria:\n  kwh: {direction: lower, methd: estimate}\n")
    with pytest.raises(UserError, match=r"criteria.kwh: unknown key 'methd' — remove it or fix its spelling "
                       r"\(allowed: direction, weight, group, unit, source, method, target, benchmark, task, metric, settings, "
                           r"range, detail, aggregate\)"):
        ScoreTable.from_csv(tmp_path / "m.csv")


def test_csv_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        ScoreTable.from_csv(tmp_path / "nope.csv")
    (tmp_path / "m.csv").write_text("model,a\nA,1\nB,oops\n")
    with pytest.raises(UserError, match="'B' on criterion 'a' .* 'oops'"):
        ScoreTable.from_csv(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text("model,a\nA,1\nB,2\n")
    (tmp_path / "m.yaml").write_text("criteria:\n  a: {direction: sideways}\n")
    with pytest.raises(UserError, match="m.yaml: criteria.a.direction: 'sideways' is not one of higher, lower, target$"):
        ScoreTable.from_csv(tmp_path / "m.csv")
    (tmp_path / "m.yaml").write_text("criteria:\n  zz: {}\n")
    with pytest.raises(UserError, match="m.yaml: criteria.zz: m.csv has no column 'zz' — remove the entry"):
        ScoreTable.from_csv(tmp_path / "m.csv")


def _csv(tmp_path, text: str):
    (tmp_path / "m.csv").write_text(text)
    return tmp_path / "m.csv"


@pytest.mark.parametrize("text, message", [
    # a short row was padded with missing scores, silently: as likely a lost cell as trailing blanks
    ("model,acc,f1\nA,1\nB,2,3\n", "line 2 has 2 fields, the header 3: give every column a cell"),
    ("model,acc,f1\nA,1,2,3\nB,2,3\n", "line 2 has 4 fields, the header 3"),
    # another delimiter used to read as one column: 'empty (2 models × 0 criteria)' or 'has no column'
    ("model;acc;f1\nA;1;2\nB;2;3\n", "its header is one column 'model;acc;f1', semicolon-separated it seems: "
                                       "save the table comma-separated"),
    ("model\tacc\nA\t1\n", "tab-separated it seems"),
    # 'A' and 'A ' were two models
    ("model,acc\nA,1\nA ,2\nB,3\n", "model 'A' appears more than once"),
])
def test_csv_shapes_that_used_to_read_as_something_else(tmp_path, text, message):
    with pytest.raises(UserError, match=re.escape(message)):
        ScoreTable.from_csv(_csv(tmp_path, text), False)


def test_names_are_read_without_their_edge_spaces(tmp_path):
    t = ScoreTable.from_csv(_csv(tmp_path, "model , acc\n A ,1\nB,2\n"), False)
    assert t.models == ("A", "B") and t.names == ("acc",)


def test_two_sidecars_that_both_describe_the_csv_are_refused(tmp_path):
    csv = _csv(tmp_path, "model,acc\nA,1\nB,2\n")
    (tmp_path / "m.yaml").write_text("criteria:\n  acc: {direction: higher}\n")
    (tmp_path / "criteria.yaml").write_text("criteria:\n  acc: {direction: lower}\n")  # the folder's only CSV
    with pytest.raises(UserError, match=re.escape(f"m.yaml and criteria.yaml both describe {csv}: keep one")):
        ScoreTable.from_csv(csv)
    # bound to another table, criteria.yaml is not this CSV's: m.yaml is read
    (tmp_path / "criteria.yaml").write_text("table: other.csv\ncriteria:\n  acc: {direction: lower}\n")
    assert ScoreTable.from_csv(csv).criterion("acc").direction == "higher"


# ---------------------------------------------------------------------- standard errors
def _with_errors():
    return ScoreTable(("A", "B", "C"), (Criterion("acc", group="p"), Criterion("kwh", direction="lower", group="e")),
                      np.array([[0.9, 2.0], [0.8, 1.0], [0.7, np.nan]]),
                      standard_errors=np.array([[0.01, np.nan], [0.02, np.nan], [0.0, np.nan]]))


def test_standard_errors_round_trip_through_the_csv_and_sidecar(tmp_path):
    t = _with_errors()
    t.to_csv(tmp_path / "matrix.csv")
    assert (tmp_path / "stderr.csv").read_text().splitlines() == ["model,acc,kwh", "A,0.01,", "B,0.02,", "C,0.0,"]
    back = ScoreTable.load(tmp_path)
    np.testing.assert_array_equal(back.standard_errors, t.standard_errors)
    # a table without standard errors writes no file and no key
    ScoreTable(t.models, t.criteria, t.values).to_csv(tmp_path / "plain.csv", tmp_path / "plain.yaml")
    assert "standard_errors" not in (tmp_path / "plain.yaml").read_text()
    assert ScoreTable.from_csv(tmp_path / "plain.csv", tmp_path / "plain.yaml").standard_errors is None


def test_standard_errors_follow_the_rows_and_columns_they_describe():
    t = _with_errors()
    assert t.select_models(["C", "A"]).standard_errors[:, 0].tolist() == [0.0, 0.01]
    assert t.select_criteria(["acc"]).standard_errors.tolist() == [[0.01], [0.02], [0.0]]
    assert t.group("p").standard_errors.tolist() == [[0.01], [0.02], [0.0]]
    np.testing.assert_array_equal(t.with_weights({"acc": 2}).standard_errors, t.standard_errors)
    assert t.with_values(t.values).standard_errors is None  # new values: their errors are unknown


def test_bad_standard_errors_name_the_cell(tmp_path):
    t = _with_errors()
    with pytest.raises(UserError, match="standard error of model 'B' on criterion 'acc' is -0.1"):
        t.with_standard_errors(np.array([[0.01, 0], [-0.1, 0], [0, 0]]))
    t.to_csv(tmp_path / "matrix.csv")
    (tmp_path / "stderr.csv").write_text("model,acc\nA,0.5\n")  # the sidecar binds the file by its hash
    with pytest.raises(UserError, match="stderr.csv changed since criteria.yaml was written — import the table "
                       "again, or remove the standard_errors_sha256 line"):
        ScoreTable.load(tmp_path)
    sidecar = tmp_path / "criteria.yaml"
    sidecar.write_text("\n".join(line for line in sidecar.read_text().splitlines()
                                 if not line.startswith("standard_errors_sha256")) + "\n")
    (tmp_path / "stderr.csv").write_text("model,acc,f1\nA,0.01,0.02\n")
    with pytest.raises(UserError, match="column 'f1' is not a column of the score table"):
        ScoreTable.load(tmp_path)
    (tmp_path / "stderr.csv").write_text("model,acc\nZ,0.01\n")
    with pytest.raises(UserError, match="model 'Z' is not a model of the score table"):
        ScoreTable.load(tmp_path)
    (tmp_path / "stderr.csv").write_text("model,acc\nA,big\n")
    with pytest.raises(UserError, match="'big', not a number"):
        ScoreTable.load(tmp_path)


def test_standard_errors_file_lies_beside_the_sidecar_bound_by_its_hash(tmp_path):
    _with_errors().to_csv(tmp_path / "scores.csv", tmp_path / "scores.yaml")
    doc = yaml.safe_load((tmp_path / "scores.yaml").read_text())
    assert doc["standard_errors"] == "stderr.csv"
    assert doc["standard_errors_sha256"] == hashlib.sha256((tmp_path / "stderr.csv").read_bytes()).hexdigest()
    back = ScoreTable.from_csv(tmp_path / "scores.csv", tmp_path / "scores.yaml")
    np.testing.assert_array_equal(back.standard_errors, _with_errors().standard_errors)


def test_a_score_outside_its_declared_range_is_refused_however_the_table_enters(tmp_path):
    """One check in the constructor: the Python API, a frame and a CSV + sidecar give the same line."""
    import pandas as pd

    from ranking.api import rank

    crits = (Criterion("acc", range=(0.0, 1.0)), Criterion("kwh", direction="lower", range=(0.0, None)))
    line = r"^score of model 'B' on criterion 'acc' is 1.5, outside its range \[0, 1\]: fix the score"
    with pytest.raises(UserError, match=line):
        ScoreTable(("A", "B"), crits, np.array([[0.5, 1.0], [1.5, 2.0]]))
    with pytest.raises(UserError, match=r"model 'A' on criterion 'kwh' is -1, outside its range \[0, \]"):
        ScoreTable(("A", "B"), crits, np.array([[0.5, -1.0], [0.9, 2.0]]))
    with pytest.raises(UserError, match=line.replace("is 1.5", "in frame is 1.5")):
        ScoreTable.from_frame(pd.DataFrame({"acc": [0.5, 1.5]}, index=["A", "B"]), criteria=crits[:1],
                              source="frame")
    (tmp_path / "m.csv").write_text("model,acc\nA,0.5\nB,1.5\n")
    (tmp_path / "m.yaml").write_text("criteria:\n  acc: {range: [0, 1]}\n")
    with pytest.raises(UserError, match=r"'B' on criterion 'acc' in .*m.csv is 1.5, outside its range \[0, 1\]"):
        ScoreTable.from_csv(tmp_path / "m.csv")
    # a table in range ranks; one derived from it by new values (bootstrap draws) may leave the range
    t = ScoreTable(("A", "B"), crits, np.array([[0.5, 1.0], [1.0, 0.5]]))
    assert rank(t, "borda").results["borda"].winners == ("B",)
    drawn = t.with_values(np.array([[0.5, 1.0], [1.2, 0.5]]))
    assert drawn.select_models(["B"]).values[0, 0] == 1.2
    with pytest.raises(UserError, match=line.replace("1.5", "1.2")):
        ScoreTable(drawn.models, drawn.criteria, drawn.values)  # built anew, it is checked


def test_the_sidecar_text_is_the_same_from_libyamls_emitter_and_the_pure_python_one():
    """to_csv writes the sidecar with CSafeDumper where PyYAML has it: it must be the text SafeDumper writes."""
    yaml = pytest.importorskip("yaml")
    if not hasattr(yaml, "CSafeDumper"):
        pytest.skip("PyYAML without libyaml")
    doc = {"criteria": {f"c{i} é": {"direction": "target", "target": 0.5, "weight": 1.5, "group": "perf",
                                    "settings": {"n-shot": 5, "filter": "none"}, "range": [0, 1]}
                        for i in range(50)}, "standard_errors": "stderr.csv"}
    fast = yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True)
    assert fast == yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
