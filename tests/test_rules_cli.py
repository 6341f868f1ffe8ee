"""``vnr rank`` and ``vnr prospective``: outputs, and every bad input exits 2 with one line."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from vnr_cli import vnr

from ranking.rules import worked_example

ALL_RULES = [
    "plurality", "borda", "dowdall", "threshold", "baldwin", "condorcet",
    "copeland", "minimax", "arithmetic_mean", "geometric_mean", "optimality_gap",
]


@pytest.fixture()
def example_csv(tmp_path: Path) -> Path:
    path = tmp_path / "example.csv"
    worked_example().to_csv(path, sidecar=tmp_path / "example.yaml")
    return path


@pytest.fixture()
def grouped_csv(tmp_path: Path) -> Path:
    path = tmp_path / "grouped.csv"
    path.write_text("model,p1,p2,e1\nA,3,3,2\nB,2,1,1\nC,1,2,3\n")
    (tmp_path / "grouped.yaml").write_text(
        "groups: [perf, eff]\ncriteria:\n  p1: {group: perf}\n  p2: {group: perf}\n"
        "  e1: {group: eff, direction: lower}\n"
    )
    return path


def test_rank_json_all_rules(capsys, example_csv):
    code, out, err = vnr(capsys, "rank", example_csv, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == ["settings", *ALL_RULES]  # the preferences used, then every rule
    assert doc["settings"]["setting"] == "basic" and doc["settings"]["ties"] == "default"
    assert doc["settings"]["group_weights"] is None
    assert doc["borda"] == {
        "scores": {"A": 6.0, "B": 9.0, "C": 8.0, "D": 7.0},
        "ranks": {"A": 4, "B": 1, "C": 2, "D": 3},
        "winners": ["B"],
    }
    assert doc["copeland"]["scores"] == {"A": -3.0, "B": 3.0, "C": 1.0, "D": -1.0}
    assert doc["minimax"]["scores"] == {"A": -3.0, "B": 0.0, "C": -3.0, "D": -3.0}
    assert doc["threshold"]["winners"] == ["C"] and doc["dowdall"]["winners"] == ["A", "B"]
    assert doc["condorcet"]["winners"] == ["B"] and doc["baldwin"]["winners"] == ["B"]
    assert doc["plurality"]["scores"] == {"A": 2.0, "B": 1.0, "C": 1.0, "D": 1.0}


def test_rank_selected_rules_and_options(capsys, example_csv):
    code, out, _ = vnr(capsys, "rank", example_csv, "--rule", "borda", "--rule", "copeland", "--format", "json",
                       "--ties", "votenrank")
    assert code == 0 and list(json.loads(out)) == ["settings", "borda", "copeland"]
    assert json.loads(out)["settings"]["ties"] == "votenrank"
    code, out, _ = vnr(capsys, "rank", example_csv, "--rule", "threshold", "minimax", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0] == {"model": "A", "threshold_score": "2.0", "threshold_rank": "4",
                       "minimax_score": "-3.0", "minimax_rank": "2"}


def test_rank_terminal_table(capsys, example_csv):
    code, out, _ = vnr(capsys, "rank", example_csv, "--rule", "borda", "copeland")
    assert code == 0
    head, table = out.split("\n\n", 1)  # the preferences used, stated above the table
    assert head.splitlines() == [
        "setting: basic · ties: default",
        "higher is better: every criterion",
        "criterion weights: 1 for every criterion",
    ]
    assert table.splitlines() == [
        "sorted by borda rank, ties broken by copeland",
        "       borda        copeland",
        "model  score  rank  score  rank",
        "B          9     1      3     1",
        "C          8     2      1     2",
        "D          7     3     -1     3",
        "A          6     4     -3     4",
        "score: higher is better under the rule; rank: 1 = best, tied models share the best rank; –: not ranked",
        "",
        "winners — borda: B; copeland: B",
    ]


GLUE = Path(__file__).resolve().parents[1] / "configs" / "leaderboards" / "glue.yaml"


def test_rank_table_echoes_the_weights_and_fits_120_columns(capsys, grouped_csv, data_root):
    code, out, _ = vnr(capsys, "rank", grouped_csv, "--rule", "borda", "--setting", "weighted",
                       "--group-weights", "perf=0.7,eff=0.3")
    assert code == 0
    assert out.splitlines()[0] == "setting: weighted · ties: default · group weights: perf=0.7, eff=0.3"
    code, out, _ = vnr(capsys, "rank", GLUE, "--data-root", data_root, "--rule", "all")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 120
    assert "[1] " in out  # long model names shortened, with their key below the table
    code, wide, _ = vnr(capsys, "rank", GLUE, "--data-root", data_root, "--rule", "all",
                        "--wide")
    assert code == 0 and max(len(line) for line in wide.splitlines()) > 120 and "[1] " not in wide


def test_rank_settings(capsys, grouped_csv):
    code, out, err = vnr(capsys, "rank", grouped_csv, "--rule", "borda", "--setting", "two-step",
                         "--group-weights", "perf=1,eff=2", "--format", "json")
    assert code == 0, err
    # perf: A first, B and C tied -> positions A1 B2 C2; eff (lower is better): B1 A2 C3
    # second step Borda: perf A 2, B 0.5, C 0.5 (weight 1); eff B 2, A 1, C 0 (weight 2)
    doc = json.loads(out)
    assert doc["borda"]["scores"] == {"A": 4.0, "B": 4.5, "C": 0.5}
    assert doc["settings"] == {
        "setting": "two-step", "preset": "default", "ties": "default",
        "directions": {"p1": "higher", "p2": "higher", "e1": "lower"},
        "criterion_weights": {"p1": 1.0, "p2": 1.0, "e1": 1.0},
        "groups": {"p1": "perf", "p2": "perf", "e1": "eff"},
        "group_weights": {"perf": 1.0, "eff": 2.0},
    }
    code, out, _ = vnr(capsys, "rank", grouped_csv, "--rule", "borda", "--setting", "weighted", "--format", "json")
    assert code == 0 and json.loads(out)["borda"]["winners"] == ["A"]
    # each group carries weight 1: perf's two criteria 1/2 each, eff's one criterion 1
    assert json.loads(out)["settings"]["effective_weights"] == {"p1": 0.5, "p2": 0.5, "e1": 1.0}
    # the votenrank preset is recorded, with its ties and its effective weights (own / number of columns)
    code, out, _ = vnr(capsys, "rank", grouped_csv, "--rule", "borda", "--setting", "weighted",
                       "--preset", "votenrank", "--format", "json")
    settings = json.loads(out)["settings"]
    assert code == 0 and (settings["preset"], settings["ties"]) == ("votenrank", "votenrank")
    assert "og_gamma" not in settings  # stated only when the optimality gap is ranked
    assert settings["effective_weights"] == {"p1": 0.5, "p2": 0.5, "e1": 1.0}
    code, out, _ = vnr(capsys, "rank", grouped_csv, "--rule", "optimality_gap", "--preset", "votenrank",
                       "--higher", "e1", "--format", "json")
    assert code == 0 and json.loads(out)["settings"]["og_gamma"] == 0.95
    code, out, _ = vnr(capsys, "rank", grouped_csv, "--rule", "optimality_gap", "--preset", "votenrank",
                       "--higher", "e1", "--og-gamma", "0.9")
    assert code == 0 and out.splitlines()[0] == (
        "setting: basic · preset: votenrank · ties: votenrank · optimality gap gamma: 0.9"
    )


def test_rank_drop_incomplete(capsys, tmp_path):
    path = tmp_path / "holes.csv"
    path.write_text("model,c1,c2\nA,1,\nB,2,1\nC,3,2\n")
    code, out, _ = vnr(capsys, "rank", path, "--rule", "borda", "--format", "json")
    assert code == 0 and json.loads(out)["borda"]["scores"] == {"A": 0.0, "B": 1.0, "C": 3.0}
    code, out, _ = vnr(capsys, "rank", path, "--rule", "borda", "--format", "json", "--drop-incomplete")
    assert code == 0 and json.loads(out)["borda"]["scores"] == {"B": 0.0, "C": 2.0}


def test_rank_all_skips_inapplicable_rules_with_a_note(capsys, tmp_path):
    path = tmp_path / "zero.csv"
    path.write_text("model,c1,c2\nA,0,1\nB,2,1\n")
    code, out, err = vnr(capsys, "rank", path, "--format", "json")
    assert code == 0 and "geometric_mean" not in json.loads(out)
    assert "skipped geometric_mean" in err
    code, out, err = vnr(capsys, "rank", path, "--rule", "geometric_mean")
    assert code == 2 and "model 'A' has 0 on criterion 'c1'" in err


def test_prospective(capsys, example_csv):
    code, out, _ = vnr(capsys, "prospective", example_csv, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and set(doc) == {"A", "B", "C", "D"}
    assert all(v["prospective"] for v in doc.values())
    assert sum(doc["A"]["weights"].values()) == pytest.approx(1.0)
    code, out, _ = vnr(capsys, "prospective", example_csv, "--strict")
    assert code == 0 and "4 of 4 models are prospective" in out and "strict" in out


def test_prospective_not_prospective_is_null(capsys, tmp_path):
    path = tmp_path / "dom.csv"
    path.write_text("model,c1,c2\nA,2,2\nB,1,1\n")
    code, out, _ = vnr(capsys, "prospective", path, "--format", "json")
    assert json.loads(out)["B"] == {"prospective": False, "weights": None}


def test_leaderboard_spec(capsys, data_root):
    spec = Path(__file__).resolve().parents[1] / "configs" / "leaderboards" / "value.yaml"
    if not spec.exists():
        pytest.skip("no VALUE leaderboard spec")
    code, out, err = vnr(capsys, "rank", spec, "--data-root", data_root, "--rule", "borda", "copeland",
                         "--ties", "votenrank", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["borda"]["scores"]) == 7 and doc["copeland"]["winners"]


# ---------------------------------------------------------------------- bad input
def one_line_error(code: int, err: str) -> str:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


BAD_TABLES = {
    "non_numeric": ("model,c1\nA,1\nB,abc\n", None, "'abc', not a number"),
    "inf": ("model,c1\nA,1\nB,inf\n", None, "must be finite"),
    "neg_inf": ("model,c1\nA,1\nB,-inf\n", None, "must be finite"),
    "duplicate_criterion": ("model,c1,c1\nA,1,2\nB,2,1\n", None, "appears more than once"),
    "empty": ("model,c1\n", None, "empty"),
    "blank_file": ("", None, "cannot read"),
    "negative_weight": ("model,c1\nA,1\nB,2\n", "criteria:\n  c1: {weight: -1}\n", "negative"),
    "all_zero_weights": ("model,c1,c2\nA,1,2\nB,2,1\n", "criteria:\n  c1: {weight: 0}\n  c2: {weight: 0}\n", "zero"),
    "unknown_column": ("model,c1\nA,1\nB,2\n", "criteria:\n  c9: {weight: 1}\n", "'c9'"),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
@pytest.mark.parametrize("command", ["rank", "prospective"])
def test_bad_tables(capsys, tmp_path, case, command):
    text, sidecar, expected = BAD_TABLES[case]
    path = tmp_path / "bad.csv"
    path.write_text(text)
    if sidecar is not None:
        (tmp_path / "bad.yaml").write_text(sidecar)
    line = one_line_error(*vnr(capsys, command, path)[::2])
    assert expected in line


@pytest.mark.parametrize(
    "args, expected",
    [
        (["rank", "missing.csv"], "no such file"),
        (["prospective", "missing.csv"], "no such file"),
        (["rank", "{csv}", "--rule", "bordaa"], "unknown rule 'bordaa'"),
        (["rank", "{csv}", "--setting", "weighted", "--group-weights", "nope=1"], "unknown group 'nope'"),
        (["rank", "{csv}", "--setting", "weighted", "--group-weights", "perf=-1"], "--group-weights perf: -1 must be a finite number >= 0"),
        (["rank", "{csv}", "--setting", "weighted", "--group-weights", "perf=0,eff=0"], "all group weights are zero"),
        (["rank", "{csv}", "--setting", "weighted", "--group-weights", "perf"], "is not GROUP=WEIGHT"),
        (["rank", "{csv}", "--group-weights", "perf=1"], "--group-weights: group weights only apply with the weighted"),
        (["rank", "{csv}", "--setting", "three-step"], "--setting: 'three-step' is not one of basic, weighted"),
        (["rank", "{csv}", "--ties", "odd"], "--ties: 'odd' is not one of default, votenrank"),
        (["rank", "{csv}", "--bootstrap", "5"], "only applies with --scenario"),
        (["rank"], "give a score table"),
        (["rank", "{csv}", "--data-root", "/no/such/dir", "--format", "xml"], "invalid choice"),
    ],
)
def test_bad_options(capsys, grouped_csv, args, expected):
    argv = [a.replace("{csv}", str(grouped_csv)) for a in args]
    line = one_line_error(*vnr(capsys, *argv)[::2])
    assert expected in line


def test_bad_leaderboard_data_root(capsys, tmp_path):
    spec = tmp_path / "lb.yaml"
    spec.write_text("file: x.csv\n")
    line = one_line_error(*vnr(capsys, "rank", spec, "--data-root", tmp_path / "nowhere")[::2])
    assert "not a directory" in line


def test_no_traceback_in_a_real_process(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("model,c1\nA,1\nB,x\n")
    proc = subprocess.run([sys.executable, "-m", "harness", "rank", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
