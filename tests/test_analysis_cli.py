"""``vnr analyze``: JSON shapes, progress-free runs, the tradeoff plot, and one-line errors."""

from __future__ import annotations

import json

import pandas as pd

from harness.cli import main


def _csv(tmp_path):
    frame = pd.DataFrame({"model": list("ABCD"), "t1": [4, 3, 2, 1], "t2": [4, 3, 1, 2], "t3": [1, 2, 3, 4]})
    path = tmp_path / "m.csv"
    frame.to_csv(path, index=False)
    return str(path)


def test_diversity_json(tmp_path, capsys):
    assert main(["analyze", "diversity", _csv(tmp_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"diversity", "n_models", "n_criteria"}
    assert out["n_models"] == 4 and out["n_criteria"] == 3 and 0.0 <= out["diversity"] <= 1.0


def test_kemeny_json(tmp_path, capsys):
    assert main(["analyze", "kemeny", _csv(tmp_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"ranking", "cost", "n_optimal", "exact"}
    assert out["ranking"][0] == "A" and out["exact"] is True and out["n_optimal"] >= 1


def test_rule_analyses_run(tmp_path, capsys):
    path = _csv(tmp_path)
    assert main(["analyze", "agreement", path, "--rules", "borda,copeland", "-k", "1,2"]) == 0
    assert "copeland" in capsys.readouterr().out
    assert main(["analyze", "iia", path, "--rule", "copeland", "--repetitions", "5", "--format", "json",
                 "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["repetitions"] == 5
    assert main(["analyze", "missing", path, "--rule", "arithmetic_mean", "--n-missing", "1,2", "--repetitions",
                 "5", "--top", "3", "--format", "json", "--seed", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 2
    assert main(["analyze", "sensitivity", path, "--kind", "cardinal", "--steps", "20", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["lower_bound"] is True
    assert main(["analyze", "sensitivity", path, "--kind", "ordinal", "--rule", "borda", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "ordinal"
    assert main(["analyze", "synthetic", "--values", "0,1", "--repetitions", "3", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 2


def test_leaderboards_and_tradeoff_plot(data_root, tmp_path, capsys):
    root = str(data_root)
    assert main(["analyze", "diversity", "benchbench/superglue", "--data-root", root, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_models"] == 28
    assert main(["analyze", "instance", "ranking_nlp/instance_level/DIALOG_pc.csv", "--data-root", root]) == 0
    assert "two_level" in capsys.readouterr().out
    out = tmp_path / "tradeoff.png"
    assert main(["analyze", "tradeoff", "benchbench/superglue", "benchbench/bigcode", "--data-root", root,
                 "--out", str(out), "--steps", "30", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["kind"] for r in rows] == ["cardinal", "ordinal"]
    assert out.stat().st_size > 1000


def test_errors_are_one_line(tmp_path, capsys):
    assert main(["analyze", "diversity", str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not found" in err
    assert main(["analyze", "iia", _csv(tmp_path), "--rule", "nope"]) == 2
    assert "unknown rule" in capsys.readouterr().err
