"""A scenario gives the same numbers as calling the rules directly with the equivalent weights."""

from __future__ import annotations

import argparse
import csv
import io
import json

import numpy as np
import pytest
from test_scenarios_util import MODELS, PAPER, USER, write_results

from ranking.rules import get_rule
from ranking.scenarios import load_scenario
from ranking.scenarios.casestudy import load_case_study
from ranking.scenarios.cli import run_rank_scenario
from ranking.scenarios.compare import LEGEND, change_mark, compare, format_csv, format_table
from ranking.table import Criterion, ScoreTable


@pytest.fixture(scope="module")
def paper(data_root):
    sc = load_scenario(PAPER)
    table = sc.build_table(load_case_study(data_root))
    return sc, table, compare(sc, table)


def _direct_weighted(table: ScoreTable, group_weights: dict[str, float], per_column: bool = False) -> ScoreTable:
    """Each criterion gets own × group weight / (total own weight of its group): = gw/|g| for unit own weights.

    ``per_column``: / (number of columns of its group), the votenrank preset's reading.
    """
    totals = {g: sum(1.0 if per_column else c.weight for c in table.criteria if c.group == g)
              for g in table.group_names}
    return table.with_weights([c.weight * group_weights[c.group] / totals[c.group] for c in table.criteria])


def _direct_two_step(table: ScoreTable, rule: str, group_weights: dict[str, float], ties: str) -> np.ndarray:
    """Rank inside each group, then the same rule on the groups' positions weighted by the group weights."""
    fn = get_rule(rule)
    interim = np.column_stack([-fn(table.group(g), ties=ties).ranks for g in table.group_names])
    crits = tuple(Criterion(g, weight=group_weights[g]) for g in table.group_names)
    return fn(ScoreTable(table.models, crits, interim), ties=ties).scores


def test_paper_columns_equal_direct_rule_calls(paper):
    sc, table, cmp = paper
    borda = get_rule("borda")
    mean = get_rule("arithmetic_mean")
    np.testing.assert_allclose(
        cmp.results["am_performance"].scores, mean(table.group("performance"), ties="votenrank").scores
    )
    np.testing.assert_allclose(cmp.results["borda"].scores, borda(table, ties="votenrank").scores)
    for g in ("performance", "efficiency", "fairness"):
        np.testing.assert_allclose(cmp.results[f"borda_{g}"].scores, borda(table.group(g), ties="votenrank").scores)
    equal = {g: 1.0 for g in table.group_names}
    np.testing.assert_allclose(
        # the paper scenario uses the votenrank preset: own weight / number of columns of the group
        cmp.results["borda_weighted"].scores,
        borda(_direct_weighted(table, equal, per_column=True), ties="votenrank").scores,
    )
    paper_w = {"performance": 0.4, "efficiency": 0.3, "fairness": 0.3}
    np.testing.assert_allclose(
        cmp.results["borda_two_step"].scores, _direct_two_step(table, "borda", paper_w, "votenrank")
    )


def test_paper_reference_is_the_glue_style_mean(paper):
    _, table, cmp = paper
    perf = table.group("performance")
    w = perf.weights
    expected = perf.values @ w / w.sum()
    np.testing.assert_allclose(cmp.results["am_performance"].scores, expected)
    assert cmp.results["am_performance"].winners == ("deberta-base",)


def test_paper_basic_borda_by_hand(paper):
    """Basic Borda, votenrank ties: per criterion, (number of models strictly worse) × own weight."""
    _, table, cmp = paper
    o = table.oriented
    below = (o[:, None, :] > o[None, :, :]).sum(axis=1)  # models × criteria
    np.testing.assert_allclose(cmp.results["borda"].scores, below @ table.weights)


def test_rank_changes_against_the_reference(paper):
    _, _, cmp = paper
    ref = cmp.results["am_performance"].ranks
    for name, res in cmp.results.items():
        np.testing.assert_array_equal(cmp.rank_change(name), ref - res.ranks)
    assert (cmp.rank_change("am_performance") == 0).all()
    assert (change_mark(3.0), change_mark(-2.0), change_mark(0.0)) == ("↑3", "↓2", "=")
    text = format_table(cmp)
    lines = text.splitlines()
    assert lines[0] == "each column sorted by its own rank (# = position); reference column am_performance; ties votenrank"
    assert lines[1].split()[:3] == ["#", "am_performance", "(ref)"]
    assert lines[3].split()[:4] == ["1", "deberta-base", "82.72", "="]
    assert "↑" in text and "↓" in text
    assert all(len(line) <= 120 for line in lines)  # wrapped into blocks, each repeating the # column
    assert sum(1 for line in lines if line.startswith("#  ")) >= 2
    assert lines.count(LEGEND) == 1 and lines[-1] == LEGEND
    assert LEGEND == ("↑n / ↓n: n places above / below its reference rank; =: same; (tied n): shares position n; "
                      "–: unranked")
    wide = format_table(cmp, wide=True).splitlines()
    assert sum(1 for line in wide if line.startswith("#  ")) == 1 and max(len(line) for line in wide) > 120


def _args(**kw):
    base = dict(scenario=str(USER), results=None, table=None, data_root=None, bootstrap=0, seed=0, format="table")
    base.update(kw)
    return argparse.Namespace(**base)


def test_user_weighted_on_a_collected_matrix_json(tmp_path, capsys):
    results = write_results(tmp_path / "res")
    assert run_rank_scenario(_args(results=str(results), format="json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == [
        "am_performance", "borda", "borda_weighted", "borda_two_step", "copeland_weighted",
        "borda_performance", "borda_efficiency", "borda_fairness",
    ]
    for entry in out.values():
        assert set(entry) == {"scores", "ranks", "winners"}
        assert set(entry["ranks"]) == set(MODELS)
    # direct: weighted Borda with 0.4/0.3/0.3 spread over each group's criteria
    table = ScoreTable.from_csv(results / "matrix.csv")
    w = {"performance": 0.4, "efficiency": 0.3, "fairness": 0.3}
    direct = get_rule("borda")(_direct_weighted(table, w))
    assert out["borda_weighted"]["scores"] == pytest.approx(dict(zip(table.models, direct.scores)))
    assert out["borda_two_step"]["scores"] == pytest.approx(
        dict(zip(table.models, _direct_two_step(table, "borda", w, "default")))
    )
    cop = get_rule("copeland")(_direct_weighted(table, w))
    assert out["copeland_weighted"]["winners"] == list(cop.winners)
    assert out["borda_performance"]["winners"] == ["A"]
    assert out["borda_efficiency"]["winners"] == ["E"]
    assert out["borda_fairness"]["winners"] == ["C"]


def test_csv_and_table_formats(tmp_path, capsys):
    results = write_results(tmp_path / "res")
    assert run_rank_scenario(_args(results=str(results), format="csv")) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 8 * len(MODELS)
    first = rows[0]
    assert first["column"] == "am_performance" and first["rank"] == "1" and first["rank_change"] == "0"
    assert run_rank_scenario(_args(results=str(results))) == 0
    text = capsys.readouterr().out
    assert "am_performance (ref)" in text and "copeland_weighted" in text


def test_group_column_on_a_table_with_a_model_missing_that_group(tmp_path):
    """A model without scores in one group is unranked (NaN) in that group's column, ranked elsewhere."""
    results = write_results(tmp_path / "res", seeds=False)
    table = ScoreTable.from_csv(results / "matrix.csv")
    values = np.array(table.values)
    fair = [j for j, c in enumerate(table.criteria) if c.group == "fairness"]
    values[MODELS.index("B"), fair] = np.nan
    table = table.with_values(values)
    sc = load_scenario(USER)
    cmp = compare(sc, sc.build_table(table))
    assert np.isnan(cmp.results["borda_fairness"].ranks[MODELS.index("B")])
    assert not np.isnan(cmp.results["borda"].ranks[MODELS.index("B")])
    rows = [r for r in csv.DictReader(io.StringIO(format_csv(cmp))) if r["column"] == "borda_fairness"]
    assert rows[-1]["model"] == "B" and rows[-1]["rank"] == "" and rows[-1]["rank_change"] == ""


def test_vnr_rank_scenario_through_the_dispatcher(tmp_path, capsys, data_root):
    pytest.importorskip("ranking.cli")
    from harness.cli import main

    results = write_results(tmp_path / "res", seeds=False)
    assert main(["rank", "--scenario", str(USER), "--results", str(results), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["borda_efficiency"]["winners"] == ["E"]
    assert main(["rank", "--scenario", str(PAPER), "--data-root", str(data_root)]) == 0
    assert "am_performance (ref)" in capsys.readouterr().out
    assert main(["rank", "--scenario", str(PAPER), "--data-root", str(data_root), "--bootstrap", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no per-seed results exist" in err[0]
