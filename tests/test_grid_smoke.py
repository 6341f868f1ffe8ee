"""The smoke grid end to end on the local executor with the real run functions, then collect and rank.

`tiny:` models on the shared data, offline: README's first command, as a test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness import cli
from harness.grid.config import load_experiment
from harness.specs import BiasSpec, FinetuneSpec
from harness.store import RunStore
from ranking.table import ScoreTable

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "experiments" / "smoke.yaml")
SCENARIO = REPO / "configs" / "scenarios" / "user_weighted.yaml"


def test_smoke_grid_runs_locally_collects_and_ranks(data_root, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "smoke"
    exp = load_experiment(SMOKE, output=out)
    base = ["--output", str(out), "--data-root", str(data_root)]

    assert cli.main(["run", SMOKE, *base, "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("14 runs: 14 ran, 0 skipped (done), 0 failed")
    store = RunStore(out)
    for spec in exp.specs:
        rec = store.get(spec.run_id())
        assert rec["status"] == "ok" and rec["run_id"] == spec.run_id() and rec["model"] == spec.model
        if isinstance(spec, FinetuneSpec):
            assert rec["task"] == spec.task and rec["seed"] == spec.seed
            assert len(rec["history"]) == 2  # two epochs, evaluated after each
            assert set(rec["efficiency"]) >= {"energy_kwh", "duration_h", "gpu_hours", "co2_kg"}
        else:
            assert isinstance(spec, BiasSpec) and rec["dataset"] == spec.dataset and rec["metrics"]
    assert not list((out / "runs").glob("*.running"))

    # a second run finds everything done
    assert cli.main(["run", SMOKE, *base, "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("14 runs: 0 ran, 14 skipped (done)")

    assert cli.main(["collect", SMOKE, "--output", str(out)]) == 0
    collected = capsys.readouterr().out
    # CPU-only runs: codecarbon's CPU and RAM models, so energy and carbon are estimates, and say so
    cpu_methods = {store.get(s.run_id())["efficiency"]["methods"]["cpu"] for s in exp.specs
                   if isinstance(s, FinetuneSpec)}
    how = "mixed" if any(m.startswith("codecarbon intel_rapl") for m in cpu_methods) else "estimate"  # readable RAPL
    assert f"energy and carbon not measured: {how} for " in collected
    side = yaml.safe_load((out / "criteria.yaml").read_text())["criteria"]
    energy_based = [c for c in side if c.endswith(("_energy_kwh", "_co2_kg"))]
    assert energy_based and all(side[c]["method"] == how for c in energy_based)
    if how == "estimate":
        assert all("; estimate: codecarbon's CPU model" in side[c]["source"] and
                   "effectively a time proxy" in side[c]["source"] for c in energy_based)
    matrix = pd.read_csv(out / "matrix.csv", index_col="model")
    assert list(matrix.index) == ["tiny:bert", "tiny:gpt2"]
    for model in matrix.index:
        pearson = [store.get(s.run_id())["metrics"]["pearson"] for s in exp.specs
                   if isinstance(s, FinetuneSpec) and s.model == model and s.task == "stsb"]
        assert math.isclose(matrix.loc[model, "stsb_pearson"], sum(pearson) / 2, rel_tol=1e-9)
        crows = next(store.get(s.run_id()) for s in exp.specs
                     if isinstance(s, BiasSpec) and s.model == model and s.dataset == "crows_pairs")
        assert matrix.loc[model, "crows_anti_stereo_score"] == pytest.approx(crows["metrics"]["anti_stereo_score"])
    # every fairness criterion is filled, for the masked model too (StereoSet intersentence included)
    fairness = ["crows_anti_stereo_score", "stereoset_intra_icat", "stereoset_inter_icat", "winobias_parity_score"]
    assert matrix[fairness].notna().all().all()
    table = ScoreTable.load(out / "matrix.csv")
    assert table.group_names == ("performance", "efficiency", "fairness")
    assert table.criterion(energy_based[0]).method == how

    assert cli.main(["rank", str(out / "matrix.csv"), "--rule", "borda", "--setting", "two-step",
                     "--group-weights", "performance=0.4,efficiency=0.3,fairness=0.3", "--format", "json"]) == 0
    ranking = json.loads(capsys.readouterr().out)
    assert "tiny:bert" in json.dumps(ranking) and "tiny:gpt2" in json.dumps(ranking)
    if SCENARIO.exists():
        assert cli.main(["rank", "--scenario", str(SCENARIO), "--results", str(out), "--bootstrap", "10"]) == 0
        text = capsys.readouterr().out
        assert "borda_two_step" in text and "tiny:gpt2" in text


def test_isolated_local_runs_record_success_and_failure(data_root, tmp_path, capsys):
    """--isolate: each spec in its own process; a failing one records its error, the next still runs."""
    # a data root whose RTE training file is there but broken: found up front, fails only when that run reads it
    root = tmp_path / "data"
    (root / "glue" / "RTE").mkdir(parents=True)
    (root / "glue" / "RTE" / "train.tsv").write_bytes(b"\x00\xff\xfe broken \x00")
    (root / "glue" / "RTE" / "dev.tsv").write_text((data_root / "glue" / "RTE" / "dev.tsv").read_text())
    (root / "bias").symlink_to(data_root / "bias")
    config = tmp_path / "grid.yaml"
    config.write_text(
        "finetune: {models: [tiny:bert], tasks: [rte], seeds: [0], hyperparameters: {max_train_samples: 8}}\n"
        "bias: {datasets: [winobias], options: {limit: 3, precision: fp32}}\n"
    )
    out = tmp_path / "out"
    code = cli.main(["run", str(config), "--output", str(out), "--data-root", str(root), "--isolate",
                     "--no-progress"])
    assert code == 1  # the RTE run fails; the bias run still runs
    captured = capsys.readouterr()
    assert "2 runs: 1 ran, 0 skipped (done), 1 failed" in captured.out + captured.err
    exp = load_experiment(config, output=out)
    ft, bias = exp.specs
    failed = RunStore(out).get(ft.run_id())
    assert failed["status"] == "failed" and "train.tsv" in failed["error"], failed["error"]
    assert RunStore(out).get(bias.run_id())["status"] == "ok"
