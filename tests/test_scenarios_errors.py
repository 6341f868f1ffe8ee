"""Bad scenario files exit 2 with one line that names the problem."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hang_bound import HANG_S
from test_scenarios_util import REPO, USER, scenario_file, write_results

from harness.cli import main
from ranking.floor.errors import UserError
from ranking.scenarios import load_scenario
from ranking.scenarios.scenario import match_criteria
from ranking.schemas import parse_weight

GOOD = """
groups:
  performance: {criteria: ["t*_acc", t2_f1]}
  efficiency: {criteria: [energy_kwh, gpu_hours]}
  fairness: {}
columns:
  - {name: b, rule: borda, setting: weighted, group_weights: {performance: 2}}
"""

BAD = {
    "unknown group in group_weights": (
        GOOD.replace("{performance: 2}", "{speed: 2}"), "unknown group 'speed'"),
    "unknown group of a column": (
        GOOD + "  - {name: c, rule: borda, group: speed}\n", "unknown group 'speed'"),
    "weight that does not parse": (
        GOOD.replace("{performance: 2}", "{performance: two}"), "columns[0].group_weights.performance: 'two' is not a number"),
    "negative weight": (
        GOOD.replace("{performance: 2}", "{performance: -1}"), "columns[0].group_weights.performance: -1 must be a finite number >= 0"),
    "own weight that does not parse": (
        GOOD.replace("t2_f1]}", "t2_f1], weights: {t2_f1: 1/0}}"), "does not parse"),
    "pattern matching nothing": (
        GOOD.replace("t*_acc", "bleu_*"), "'bleu_*' matches no criterion"),
    "name matching nothing": (
        GOOD.replace("gpu_hours]", "gpu_days]"), "'gpu_days' matches no criterion"),
    "weight pattern matching nothing": (
        GOOD.replace("t2_f1]}", "t2_f1], weights: {rouge: 1}}"), "weight pattern 'rouge'"),
    "unknown rule": (
        GOOD.replace("rule: borda", "rule: bordo"), "unknown rule 'bordo'"),
    "unknown setting": (
        GOOD.replace("setting: weighted", "setting: heavy"), "columns[0].setting: 'heavy' is not one of basic, weighted, two-step"),
    "unknown key": (
        GOOD + "colums: []\n", "scenario.yaml: unknown key 'colums' — remove it or fix its spelling (allowed: name, "),
    "reference not a column": (
        GOOD + "reference: nope\n", "reference: 'nope' is not a column — write one of: b"),
    "criterion in two groups": (
        GOOD.replace("fairness: {}", "fairness: {criteria: [t1_acc]}"), "in both group"),
    "not YAML": ("groups: [unclosed\n", "not valid YAML"),
    "no columns": ("groups: {performance: {}}\n", "scenario.yaml: columns is required — add it: the compared columns"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_scenario_exits_2_with_one_line(case, tmp_path, capsys):
    text, needle = BAD[case]
    results = write_results(tmp_path / "r", seeds=False)
    path = scenario_file(tmp_path, text)
    code = main(["report", "--scenario", str(path), "--results", str(results), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    assert needle in err[0] and "Traceback" not in err[0]


def test_good_scenario_and_helpers(tmp_path):
    sc = load_scenario(scenario_file(tmp_path, GOOD))
    assert sc.column("b").group_weights == {"performance": 2.0, "efficiency": 1.0, "fairness": 1.0}
    assert parse_weight("1/2") == 0.5 and parse_weight(0.3) == 0.3
    with pytest.raises(ValueError, match="not a number"):
        parse_weight(True)
    assert match_criteria("re:t[12]_.*", ["t1_acc", "t2_f1", "x"]) == ["t1_acc", "t2_f1"]
    with pytest.raises(UserError, match="no such file"):
        load_scenario(tmp_path / "missing.yaml")


def test_missing_table_source_and_missing_seeds(tmp_path, capsys):
    assert main(["whatif", "--scenario", str(USER), "--model", "A"]) == 2
    assert "pass --results DIR" in capsys.readouterr().err
    results = write_results(tmp_path / "r", seeds=False)
    code = main(["report", "--scenario", str(USER), "--results", str(results), "--out", str(tmp_path / "o"),
                 "--bootstrap", "10"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no per-seed results exist" in err[0]


def test_rank_scenario_subprocess_exit_code(tmp_path):
    """Through the real `vnr` entry point: exit status 2 and a single stderr line."""
    pytest.importorskip("ranking.cli")
    results = write_results(tmp_path / "r", seeds=False)
    path = scenario_file(tmp_path, GOOD.replace("t*_acc", "bleu_*"))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "rank", "--scenario", str(path), "--results", str(results)],
        cwd=REPO, capture_output=True, text=True, timeout=HANG_S,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "matches no criterion" in lines[0]


SIDECARLESS = """
groups:
  performance: {criteria: [acc]}
  efficiency: {criteria: [energy_kwh]}
columns:
  - {name: b, rule: borda, setting: weighted}
"""


def test_a_sidecarless_csv_needs_the_scenario_to_state_cost_directions(tmp_path, capsys):
    csv = tmp_path / "scores.csv"
    csv.write_text("model,acc,energy_kwh\nA,0.9,3\nB,0.8,1\nC,0.7,2\n")
    path = scenario_file(tmp_path, SIDECARLESS)
    code = main(["rank", "--scenario", str(path), "--results", str(csv)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "states no direction for energy_kwh" in err[0] and "directions: {energy_kwh: lower}" in err[0]
    for stated in ("directions: {energy_kwh: lower}\n",
                   SIDECARLESS.replace("{criteria: [energy_kwh]}", "{criteria: [energy_kwh], direction: lower}")):
        text = SIDECARLESS + stated if stated.startswith("directions") else stated
        code = main(["rank", "--scenario", str(scenario_file(tmp_path, text)), "--results", str(csv)])
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()


def test_criteria_outside_every_group_are_named_when_left_out(caplog):
    import logging

    import numpy as np

    from ranking.scenarios.scenario import Scenario
    from ranking.table import Criterion, ScoreTable

    table = ScoreTable(("A", "B"), (Criterion("acc"), Criterion("f1"), Criterion("kwh", direction="lower")),
                       np.array([[0.9, 0.8, 2.0], [0.7, 0.9, 1.0]]))
    sc = Scenario.from_mapping({"name": "s", "groups": {"g1": {"criteria": ["acc"]}},
                                "columns": [{"name": "b", "rule": "borda", "setting": "weighted"}]})
    with caplog.at_level(logging.WARNING):
        built = sc.build_table(table)
    assert built.names == ("acc",)
    assert [r.getMessage() for r in caplog.records] == [
        "s: criteria in none of the scenario's groups are left out: f1, kwh (name them in a group's criteria: to "
        "rank them)"]
