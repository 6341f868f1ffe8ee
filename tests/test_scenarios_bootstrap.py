"""Seed bootstrap: rank-position probabilities per column."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest
from test_scenarios_util import MODELS, SEEDED, USER, write_results

from ranking.floor.errors import UserError
from ranking.scenarios import load_scenario
from ranking.scenarios.bootstrap import bootstrap, read_seeds, resample_values, tie_split
from ranking.scenarios.cli import run_rank_scenario
from ranking.scenarios.compare import compare
from ranking.table import ScoreTable


def _setup(tmp_path, spread=4.0):
    results = write_results(tmp_path / "r", spread=spread)
    sc = load_scenario(USER)
    table = sc.build_table(ScoreTable.from_csv(results / "matrix.csv"))
    return sc, table, read_seeds(results / "seeds.csv", table)


def test_resample_replaces_only_seeded_cells_by_means_of_drawn_seeds(tmp_path):
    sc, table, seeds = _setup(tmp_path)
    rng = np.random.default_rng(1)
    values = resample_values(table, seeds, rng)
    seeded = [table.names.index(c) for c in SEEDED]
    other = [j for j in range(table.n_criteria) if j not in seeded]
    np.testing.assert_array_equal(values[:, other], table.values[:, other])
    # every resampled cell is a mean of three of the values base-4, base, base+4
    diff = (values[:, seeded] - table.values[:, seeded]) * 3 / 4
    np.testing.assert_allclose(diff, np.round(diff), atol=1e-9)


def test_identical_seeds_give_certain_ranks(tmp_path):
    sc, table, seeds = _setup(tmp_path, spread=0.0)
    probs = bootstrap(sc, table, seeds, n=5, seed=0)
    cmp = compare(sc, table)
    for name, p in probs.items():
        ranks = cmp.results[name].ranks
        # certain: every replicate gives the point ranks; tied models split their positions evenly
        np.testing.assert_allclose(p, tie_split(ranks))
        ok = ~np.isnan(ranks)
        np.testing.assert_allclose(p[ok].sum(axis=0)[: ok.sum()], 1.0)  # each position: 100 % in all
        for i in range(len(MODELS)):
            if not np.isnan(ranks[i]):
                tied = int(np.sum(ranks == ranks[i]))
                assert p[i, int(ranks[i]) - 1] == pytest.approx(1.0 / tied)


def test_probabilities_sum_to_one_and_vary(tmp_path):
    sc, table, seeds = _setup(tmp_path, spread=12.0)
    probs = bootstrap(sc, table, seeds, n=40, seed=3)
    for p in probs.values():
        np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert not set(np.unique(probs["am_performance"])) <= {0.0, 1.0}  # performance really is uncertain
    again = bootstrap(sc, table, seeds, n=40, seed=3)
    for name in probs:
        np.testing.assert_array_equal(probs[name], again[name])
    # efficiency and fairness have no seeds: their single-group columns never move
    assert set(np.unique(probs["borda_efficiency"])) <= {0.0, 1.0}


def test_rank_with_bootstrap_json_and_table(tmp_path, capsys):
    results = write_results(tmp_path / "r", spread=12.0)
    args = argparse.Namespace(scenario=str(USER), results=str(results), table=None, data_root=None,
                              bootstrap=20, seed=0, format="json")
    assert run_rank_scenario(args) == 0
    out = json.loads(capsys.readouterr().out)
    probs = out["am_performance"]["rank_probabilities"]
    assert set(probs) == set(MODELS)
    assert sum(probs["A"].values()) == pytest.approx(1.0)
    args.format = "table"
    assert run_rank_scenario(args) == 0
    assert "Rank probabilities over 20 seed-bootstrap resamples" in capsys.readouterr().out


def test_bad_seed_files(tmp_path):
    sc, table, _ = _setup(tmp_path)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"model": ["A"], "criterion": ["t1_acc"], "value": [1.0]}).to_csv(bad, index=False)
    with pytest.raises(UserError, match="missing column 'seed'"):
        read_seeds(bad, table)
    pd.DataFrame({"model": ["A"], "criterion": ["t1_acc"], "seed": [0], "value": ["x"]}).to_csv(bad, index=False)
    with pytest.raises(UserError, match="not a number"):
        read_seeds(bad, table)
    pd.DataFrame({"model": ["Q"], "criterion": ["t1_acc"], "seed": [0], "value": [1]}).to_csv(bad, index=False)
    with pytest.raises(UserError, match="nothing to resample"):
        bootstrap(sc, table, read_seeds(bad, table), n=3)
