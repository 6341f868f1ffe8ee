"""The one TABLE loader and the Python API: stated directions, stated group weights, the settings used."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest
from hang_bound import HANG_S
from vnr_cli import vnr

import ranking
from ranking.floor.errors import UserError

COSTLY = "model,accuracy,energy_kwh,train_hours\nA,0.9,3,2\nB,0.8,1,1\nC,0.7,2,3\n"


@pytest.fixture()
def costly(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text(COSTLY)
    return path


def test_cost_columns_without_a_sidecar_are_refused(capsys, costly):
    code, out, err = vnr(capsys, "rank", costly)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "energy_kwh, train_hours look like costs" in err
    assert "--lower energy_kwh,train_hours" in err and "vnr criteria init" in err


@pytest.mark.parametrize("command", [["prospective"], ["analyze", "diversity"]])
def test_every_table_command_refuses_them(capsys, costly, command):
    code, _, err = vnr(capsys, *command, costly)
    assert code == 2 and "look like costs" in err


def test_stated_directions_are_used(capsys, costly):
    code, out, err = vnr(capsys, "rank", costly, "--lower", "energy_kwh,train_hours", "--rule", "borda",
                         "--format", "json")
    assert code == 0
    doc = json.loads(out)
    # accuracy A>B>C: A2 B1 C0; energy (lower): B2 C1 A0; hours (lower): B2 A1 C0
    assert doc["borda"]["scores"] == {"A": 3.0, "B": 5.0, "C": 1.0}
    assert doc["settings"]["directions"] == {"accuracy": "higher", "energy_kwh": "lower", "train_hours": "lower"}
    assert err.count("\n") == 1 and "columns without --lower/--higher are read as higher-is-better" in err
    # --higher states a cost-like name is a benefit after all
    code, out, err = vnr(capsys, "rank", costly, "--lower", "energy_kwh", "--higher", "train_hours",
                         "--rule", "borda", "--format", "json")
    # accuracy: A2 B1 C0; energy (lower): B2 C1 A0; hours (higher): C2 A1 B0
    assert code == 0 and json.loads(out)["borda"]["scores"] == {"A": 3.0, "B": 3.0, "C": 3.0}
    assert err.startswith("note: ") and err.count("\n") == 1


def test_plain_tables_get_a_one_line_note(capsys, tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("model,acc,f1\nA,0.9,0.8\nB,0.8,0.9\n")
    code, _, err = vnr(capsys, "rank", path, "--rule", "borda")
    assert code == 0
    assert err.count("\n") == 1 and "every column is read as higher-is-better" in err


def test_a_note_comes_before_the_table_and_not_before_an_error(tmp_path):
    # notes of the quick commands wait for their output (harness.cli._HeldNotes): before it on success, dropped
    # when the command then fails on bad input, so its error stays one line
    import subprocess
    import sys

    path = tmp_path / "plain.csv"
    path.write_text("model,acc\nA,0\nB,1\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "harness", "rank", str(path), *args], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=HANG_S)

    ok = run("--rule", "borda")
    assert ok.returncode == 0 and ok.stdout.startswith(f"note: {path} has no criteria sidecar: every column is read")
    assert "winners — borda: B" in ok.stdout
    bad = run("--rule", "geometric_mean")
    assert bad.returncode == 2 and bad.stdout.splitlines() == [
        "vnr rank: error: rule geometric_mean: geometric_mean needs positive scores, but model 'A' has 0 on "
        "criterion 'acc' (shift or rescale that criterion, or use another rule)"]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--lower", "nope"], "unknown column 'nope'"),
        (["--lower", "energy_kwh", "--higher", "energy_kwh,train_hours"], "both as --lower and as --higher"),
    ],
)
def test_bad_direction_options(capsys, costly, args, expected):
    code, out, err = vnr(capsys, "rank", costly, *args)
    assert code == 2 and out == "" and expected in err and err.count("\n") == 1


def test_criteria_init_writes_a_sidecar_the_loader_reads(capsys, costly, tmp_path):
    old = os.umask(0o022)
    try:
        code, out, _ = vnr(capsys, "criteria", "init", costly)
    finally:
        os.umask(old)
    assert code == 0 and "criteria.yaml" in out
    sidecar = tmp_path / "criteria.yaml"
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o644  # what the umask allows, like any file
    text = sidecar.read_text()
    assert "energy_kwh: {direction: lower, weight: 1}" in text and "accuracy: {direction: higher, weight: 1}" in text
    code, out, err = vnr(capsys, "rank", costly, "--rule", "borda", "--format", "json")
    assert code == 0 and err == "" and json.loads(out)["borda"]["scores"] == {"A": 3.0, "B": 5.0, "C": 1.0}
    code, _, err = vnr(capsys, "criteria", "init", costly)
    assert code == 2 and "--force" in err and sidecar.read_text() == text  # never overwritten silently


GROUPED = "model,p1,p2,e1,f1\nA,3,3,2,1\nB,2,1,1,2\nC,1,2,3,3\n"
GROUPS = ("groups: [perf, eff, fair]\ncriteria:\n  p1: {group: perf}\n  p2: {group: perf}\n"
          "  e1: {group: eff, direction: lower}\n  f1: {group: fair}\n")


@pytest.fixture()
def grouped(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text(GROUPED)
    (tmp_path / "g.yaml").write_text(GROUPS)
    return path


def test_group_weights_must_name_every_group(capsys, grouped):
    code, out, err = vnr(capsys, "rank", grouped, "--setting", "weighted", "--group-weights", "perf=0.5,eff=0.5")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "but not fair" in err
    code, out, _ = vnr(capsys, "rank", grouped, "--setting", "weighted", "--rule", "borda",
                       "--group-weights", "perf=0.5,eff=0.5,fair=0", "--format", "json")
    assert code == 0 and json.loads(out)["settings"]["group_weights"] == {"perf": 0.5, "eff": 0.5, "fair": 0.0}


def test_table_output_states_the_weights_used(capsys, grouped):
    code, out, _ = vnr(capsys, "rank", grouped, "--setting", "two-step", "--rule", "borda",
                       "--group-weights", "perf=0.4,eff=0.3,fair=0.3")
    assert code == 0
    assert out.splitlines()[:3] == [
        "setting: two-step · ties: default · group weights: perf=0.4, eff=0.3, fair=0.3",
        "lower is better: e1 · higher is better: every other criterion",
        "criterion weights: 1 for every criterion",
    ]


def test_python_api(grouped):
    table = ranking.load_table(grouped)
    result = ranking.rank(table, rule=["borda", "copeland"], setting="weighted",
                          group_weights={"perf": 2, "eff": 1, "fair": 1})
    frame = result.to_frame()
    assert list(frame.columns) == ["borda_score", "borda_rank", "copeland_score", "copeland_rank"]
    # weights: p1, p2 = 1 each (perf 2 over two criteria), e1 = 1, f1 = 1
    # borda points p1: A2 B1 C0; p2: A2 C1 B0; e1 (lower): B2 A1 C0; f1: C2 B1 A0
    assert frame["borda_score"].to_dict() == {"A": 5.0, "B": 4.0, "C": 3.0}
    assert str(frame["borda_rank"].dtype) == "Int64" and frame["borda_rank"].to_dict() == {"A": 1, "B": 2, "C": 3}
    # a rule that leaves models unranked: <NA>, not NaN in a float column
    ranks = ranking.rank(table, rule="threshold", setting="weighted", group_weights={"perf": 2, "eff": 1, "fair": 1})
    assert str(ranks.to_frame()["threshold_rank"].dtype) == "Int64"
    assert result.winners["borda"] == ("A",)
    assert result.settings["effective_weights"] == {"p1": 1.0, "p2": 1.0, "e1": 1.0, "f1": 1.0}
    assert ranking.rank(table, "borda").settings["setting"] == "basic"
    with pytest.raises(UserError, match="unknown rule"):
        ranking.rank(table, "bordaa")


def test_rank_and_analyze_read_the_same_tables(capsys, data_root):
    # a benchbench leaderboard folder: once only `analyze` read it
    folder = data_root / "leaderboards" / "benchbench" / "glue"
    code, out, _ = vnr(capsys, "rank", folder, "--rule", "borda", "--format", "json")
    assert code == 0 and len(json.loads(out)["borda"]["ranks"]) == 87
    code, _, _ = vnr(capsys, "analyze", "diversity", folder)
    assert code == 0
    assert ranking.load_table("benchbench/glue", data_root=data_root).n_models == 87


def test_files_a_sidecar_names_are_read_only_inside_its_folder(tmp_path):
    """stderr.csv named by the sidecar: a symbolic link out of the folder is refused (issue #38), a link to a file
    inside it is read; duplicate rows of a model are refused, a model without a row is an unknown error (NaN)."""
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "matrix.csv").write_text("model,a\nA,0.9\nB,0.8\n")
    (folder / "criteria.yaml").write_text("table: matrix.csv\nstandard_errors: stderr.csv\ncriteria:\n  a: {}\n")
    secret = tmp_path / "elsewhere.csv"
    secret.write_text("model,a\nA,0.01\nB,0.02\n")
    os.symlink(secret, folder / "stderr.csv")
    with pytest.raises(UserError, match=r"stderr.csv is a link out of its folder \(to .*elsewhere.csv\)"):
        ranking.load_table(folder)
    os.unlink(folder / "stderr.csv")
    (folder / "own.csv").write_text("model,a\nA,0.01\n")
    os.symlink("own.csv", folder / "stderr.csv")
    table = ranking.load_table(folder)
    assert table.standard_errors[0, 0] == 0.01 and math.isnan(table.standard_errors[1, 0])
    (folder / "own.csv").write_text("model,a\nA,0.01\nA,0.02\n")
    with pytest.raises(UserError, match="model 'A' has two rows"):
        ranking.load_table(folder)
