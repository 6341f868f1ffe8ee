"""Every YAML input is read by one loader: YAML 1.2 scalars, no anchors or aliases, no repeated keys."""

from __future__ import annotations

import time

import pytest

from harness.cli import main

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + k)}: &{chr(98 + k)} [{', '.join(['*' + chr(97 + k)] * 9)}]\n" for k in range(9)) + "criteria: *j\n"


def _one_line(capsys, args) -> str:
    assert main([str(a) for a in args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def table(tmp_path):
    (tmp_path / "t.csv").write_text("model,acc\nA,0.5\nB,0.6\n")
    return tmp_path


def test_an_alias_bomb_in_a_sidecar_is_one_line_at_once(table, capsys):
    (table / "t.yaml").write_text(BOMB)
    start = time.perf_counter()
    err = _one_line(capsys, ["rank", table / "t.csv"])
    assert err.endswith("t.yaml: line 1: an anchor (&a) — config files take no anchors or aliases: write the value out")
    assert len(err) < 300 and time.perf_counter() - start < 30  # nothing was expanded (9^10 items otherwise)


def test_sexagesimal_and_yes_no_are_text_not_numbers_or_booleans(table, capsys):
    (table / "t.yaml").write_text("criteria:\n  acc: {direction: higher, weight: 1:30}\n")
    err = _one_line(capsys, ["rank", table / "t.csv"])
    assert "criteria.acc.weight: weight '1:30' does not parse — write e.g. 0.5 or 1/2" in err  # YAML 1.1: 90
    (table / "t.yaml").write_text("criteria:\n  acc: {direction: higher, detail: yes}\n")
    err = _one_line(capsys, ["rank", table / "t.csv"])
    assert "criteria.acc.detail" in err and "'yes'" in err  # YAML 1.1: true


def test_aliases_are_refused_in_every_yaml_input(tmp_path, capsys):
    (tmp_path / "grid.yaml").write_text("models: &m [tiny:bert]\ntasks: *m\n")
    assert "line 1: an anchor (&m)" in _one_line(capsys, ["run", tmp_path / "grid.yaml", "--dry-run"])
    (tmp_path / "e.csv").write_text("project_name,energy_consumed,emissions,duration\np,1,1,1\n")
    (tmp_path / "map.yaml").write_text("p: &n org/model\nq: *n\n")
    err = _one_line(capsys, ["import", "codecarbon", tmp_path / "e.csv", "--map", tmp_path / "map.yaml",
                             "-o", tmp_path / "out"])
    assert "map.yaml: line 1: an anchor (&n)" in err
