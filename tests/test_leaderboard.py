"""Leaderboard specs: the shipped GLUE / SuperGLUE / VALUE specs on the shared data, and the spec rules."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ranking.floor.errors import UserError
from ranking.leaderboard import dedupe, load_leaderboard
from ranking.loading import load_table

SPECS = Path(__file__).resolve().parents[1] / "configs" / "leaderboards"


def test_glue_spec(data_root):
    t = load_table(SPECS / "glue.yaml", data_root=data_root)
    assert t.shape == (100, 14)
    assert t.models[0] == "ERNIE"
    # duplicate model names get _1, _2, ... in row order
    assert {"RefBERT", "RefBERT_1", "RefBERT_2", "RefBERT_3"} <= set(t.models)
    # "93.9/91.8" MRPC cell -> F1 and accuracy, weight 1/2 each; AX is diagnostic (weight 0)
    i = t.model_index("ERNIE")
    assert t.values[i, t.names.index("MRPC-F1")] == 93.9
    assert t.values[i, t.names.index("MRPC-acc")] == 91.8
    assert t.criterion("MRPC-F1").weight == 0.5 and t.criterion("AX").weight == 0.0
    assert "Score" not in t.names
    # "-" is missing: XLNet (ensemble) has no QNLI score
    assert math.isnan(t.values[t.model_index("XLNet (ensemble)"), t.names.index("QNLI")])


def test_glue_model_names_are_names(data_root):
    """Two submissions are named "1" and "QQP" on the public board: kept (all 100 systems, as the paper ranks
    them), named with their submitter, so no model name is a bare number or a task's name."""
    t = load_table(SPECS / "glue.yaml", data_root=data_root)
    tasks = {name.split("-")[0] for name in t.names} | set(t.names)
    assert [m for m in t.models if m.strip().isdigit() or m in tasks] == []
    assert {"1 (gao jie)", "QQP (焦阳)"} <= set(t.models)
    assert t.values[t.model_index("QQP (焦阳)"), t.names.index("CoLA")] == 0.0  # the row's own scores, unchanged


def test_superglue_spec(data_root):
    t = load_table(SPECS / "superglue.yaml", data_root=data_root)
    assert t.shape == (24, 14)
    assert t.criterion("AX-g-parity").weight == 0 and t.criterion("CB-acc").weight == 0.5
    assert t.values[t.model_index("ERNIE 3.0"), t.names.index("CB-acc")] == 99.2


def test_value_spec(data_root):
    t = load_table(SPECS / "value.yaml", data_root=data_root)
    assert t.models == ("Human", "craig.starr", "DuKG", "HERO 1", "HERO 2", "HERO 3", "HERO 4")
    assert t.n_criteria == 11 and "Meta-Ave" not in t.names
    human = t.values[0]
    assert [t.names[j] for j in range(11) if math.isnan(human[j])] == ["TVR", "How2R", "YC2R", "VATEX-EN-R", "YC2C"]
    assert t.values[1, t.names.index("YC2C")] == 143.17


def test_dedupe_avoids_existing_names():
    assert dedupe(["a", "a_1", "a"]) == ["a", "a_1", "a_2"]


def test_spec_errors(tmp_path, data_root):
    spec = tmp_path / "s.yaml"
    spec.write_text("file: leaderboards/votenrank/glue.csv\nmodel_column: Nope\n")
    with pytest.raises(UserError, match="model_column 'Nope'"):
        load_leaderboard(spec, data_root=data_root)
    spec.write_text("file: leaderboards/votenrank/glue.csv\nmodel_column: Model\nignore: [Rank, Name, URL]\n")
    with pytest.raises(UserError, match="'XLNet \\(ensemble\\)' on 'Score' is '-', not a number"):  # Score has "-" cells: not declared missing
        load_leaderboard(spec, data_root=data_root)
    spec.write_text("file: nowhere.csv\nmodel_column: Model\n")
    with pytest.raises(UserError, match="not found under the data root"):
        load_leaderboard(spec, data_root=data_root)
    spec.write_text("file: x.csv\nmodel_column: Model\nmodel_colum: Model\n")
    with pytest.raises(UserError, match="s.yaml: unknown key 'model_colum' — remove it or fix its spelling "
                       "\\(allowed: file, "):
        load_leaderboard(spec, data_root=data_root)
