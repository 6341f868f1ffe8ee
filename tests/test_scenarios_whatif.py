"""What-if: the weights found really make the model win, and are the nearest ones."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_scenarios_util import PAPER, USER, write_results

from harness.cli import main
from ranking.scenarios import load_scenario
from ranking.scenarios.casestudy import load_case_study
from ranking.scenarios.scenario import Column
from ranking.scenarios.simplex import rank_at, simplex_grid
from ranking.scenarios.whatif import what_if
from ranking.table import ScoreTable


@pytest.fixture(scope="module")
def paper(data_root):
    sc = load_scenario(PAPER)
    return sc, sc.build_table(load_case_study(data_root))


@pytest.mark.parametrize("column", ["borda_weighted", "borda_two_step"])
def test_whatif_weights_make_the_model_win(paper, column):
    sc, table = paper
    col = sc.column(column)
    groups = table.group_names
    for model in table.models:
        ans = what_if(table, col, sc.ties, model, col.group_weights)
        assert ans.method == "lp"
        if ans.weights is None:
            # no weights: not even at any point of a fine grid
            for w in simplex_grid(20):
                assert model not in rank_at(table, col, sc.ties, groups, w).winners
            continue
        w = np.array([ans.weights[g] for g in groups])
        assert w.sum() == pytest.approx(1.0) and (w >= 0).all()
        res = rank_at(table, col, sc.ties, groups, w)
        assert model in res.winners
        if ans.sole:
            assert res.winners == (model,)
        w0 = np.array([ans.scenario_weights[g] for g in groups])
        assert ans.distance == pytest.approx(np.abs(w - w0).sum())
        # nearest: no grid point strictly closer makes the model win alone
        grid = simplex_grid(16)
        closer = grid[np.abs(grid - w0).sum(axis=1) < ans.distance - 1e-6]
        for p in closer:
            assert rank_at(table, col, sc.ties, groups, p).winners != (model,)


def test_whatif_current_winner_needs_no_change(paper):
    sc, table = paper
    col = sc.column("borda_two_step")
    winner = rank_at(table, col, sc.ties, table.group_names, np.array([0.4, 0.3, 0.3])).winners[0]
    ans = what_if(table, col, sc.ties, winner, col.group_weights)
    assert ans.distance == pytest.approx(0.0, abs=1e-9)
    assert ans.weights == pytest.approx({"performance": 0.4, "efficiency": 0.3, "fairness": 0.3})


def test_whatif_grid_for_a_non_linear_rule(tmp_path):
    sc = load_scenario(USER)
    table = sc.build_table(ScoreTable.from_csv(write_results(tmp_path / "r", seeds=False) / "matrix.csv"))
    col = sc.column("copeland_weighted")
    ans = what_if(table, col, sc.ties, "E", col.group_weights, resolution=20)
    assert ans.method == "grid" and ans.weights is not None
    w = np.array([ans.weights[g] for g in table.group_names])
    assert "E" in rank_at(table, col, sc.ties, table.group_names, w).winners


def test_whatif_condorcet_reports_the_prospective_lp(tmp_path):
    sc = load_scenario(USER)
    table = sc.build_table(ScoreTable.from_csv(write_results(tmp_path / "r", seeds=False) / "matrix.csv"))
    col = Column("condorcet_weighted", "condorcet", "weighted", {"performance": 0.4, "efficiency": 0.3, "fairness": 0.3})
    ans = what_if(table, col, sc.ties, "A", col.group_weights, resolution=10)
    assert ans.prospective is not None and ans.prospective["prospective"] is True  # A is best on performance
    assert sum(ans.prospective["weights"].values()) == pytest.approx(1.0)
    assert "prospective LP" in ans.describe()


def test_whatif_cli(tmp_path, capsys):
    results = write_results(tmp_path / "r", seeds=False)
    argv = ["whatif", "--scenario", str(USER), "--results", str(results), "--model", "C", "--rule", "borda",
            "--setting", "two-step", "--format", "json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 1 and out[0]["rule"] == "borda" and out[0]["setting"] == "two-step"
    assert "C" in out[0]["winners_at_weights"]
    assert main(["whatif", "--scenario", str(USER), "--results", str(results), "--model", "C"]) == 0
    text = capsys.readouterr().out
    assert "borda (weighted)" in text and "copeland (weighted)" in text
    assert main(["whatif", "--scenario", str(USER), "--results", str(results), "--model", "Z"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown model 'Z'" in err[0]
