"""The weight-simplex map: grid, corners = single-group winners, vectorised = loop."""

from __future__ import annotations

import numpy as np
import pytest
from hang_bound import HANG_S
from test_scenarios_util import PAPER, USER, write_results

from ranking.scenarios import load_scenario
from ranking.scenarios.casestudy import load_case_study
from ranking.scenarios.compare import run_column
from ranking.scenarios.scenario import Column
from ranking.scenarios.simplex import (
    NO_WINNER,
    TIE,
    codes_from_mask,
    linear_basis,
    loop_winners,
    simplex_grid,
    simplex_map,
)
from ranking.table import ScoreTable


def test_grid_covers_the_simplex():
    g = simplex_grid(4)
    assert g.shape == (15, 3)
    np.testing.assert_allclose(g.sum(axis=1), 1.0)
    assert (g >= 0).all()
    for corner in np.eye(3):
        assert (np.abs(g - corner).sum(axis=1) < 1e-12).any()
    assert len({tuple(np.round(p * 4).astype(int)) for p in g}) == 15
    assert simplex_grid(3, k=2).tolist() == [[1.0, 0.0], [2 / 3, 1 / 3], [1 / 3, 2 / 3], [0.0, 1.0]]


def test_codes():
    mask = np.array([[True, False], [True, True], [False, False]])
    assert codes_from_mask(mask).tolist() == [0, TIE, NO_WINNER]


@pytest.fixture(scope="module")
def paper(data_root):
    sc = load_scenario(PAPER)
    return sc, sc.build_table(load_case_study(data_root))


@pytest.mark.parametrize("column", ["borda_weighted", "borda_two_step"])
def test_corners_are_single_group_winners(paper, column):
    sc, table = paper
    smap = simplex_map(table, sc.column(column), sc.ties, resolution=6)
    assert smap.method == "linear"
    for k, g in enumerate(table.group_names):
        single = run_column(table, sc.column(f"borda_{g}"), sc.ties)
        assert smap.winner_at(np.eye(3)[k]) == single.winners, g


@pytest.mark.parametrize("column", ["borda_weighted", "borda_two_step"])
def test_vectorised_map_equals_the_loop(paper, column):
    sc, table = paper
    col = sc.column(column)
    smap = simplex_map(table, col, sc.ties, resolution=8)
    loop = loop_winners(table, col, sc.ties, smap.points)
    np.testing.assert_array_equal(smap.winners, loop)


def test_non_linear_rule_uses_the_loop_and_corners_hold(tmp_path):
    sc = load_scenario(USER)
    table = sc.build_table(ScoreTable.from_csv(write_results(tmp_path / "r", seeds=False) / "matrix.csv"))
    col = sc.column("copeland_weighted")
    assert linear_basis(table, col, sc.ties) is None
    smap = simplex_map(table, col, sc.ties, resolution=4)
    assert smap.method == "loop" and len(smap.points) == 15
    for k, g in enumerate(table.group_names):
        single = run_column(table, Column(f"copeland_{g}", "copeland", group=g), sc.ties)
        assert smap.winner_at(np.eye(3)[k]) == single.winners
    share = smap.share()
    assert sum(share.values()) == pytest.approx(1.0)


def test_linear_map_on_collected_matrix(tmp_path):
    sc = load_scenario(USER)
    table = sc.build_table(ScoreTable.from_csv(write_results(tmp_path / "r", seeds=False) / "matrix.csv"))
    for name in ("borda_weighted", "borda_two_step"):
        col = sc.column(name)
        smap = simplex_map(table, col, sc.ties, resolution=10)
        assert smap.method == "linear"
        np.testing.assert_array_equal(smap.winners, loop_winners(table, col, sc.ties, smap.points))
        assert smap.winner_at([1, 0, 0]) == ("A",)
        assert smap.winner_at([0, 1, 0]) == ("E",)
        assert smap.winner_at([0, 0, 1]) == ("C",)


def test_benchmark_quick_runs_and_agrees(data_root):
    import os
    import subprocess
    import sys

    from test_scenarios_util import REPO

    env = {**os.environ, "VNR_DATA_ROOT": str(data_root), "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_scenarios.py"), "--quick", "--resolution", "5"],
        capture_output=True, text=True, timeout=HANG_S, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if "agree" in ln]
    assert len(lines) == 6
    assert all("agree 21/21" in ln and "(linear)" in ln for ln in lines)
