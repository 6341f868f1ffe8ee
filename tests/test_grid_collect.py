"""`vnr collect`: the matrix, its criteria sidecar and the per-seed side table, with exact values."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from harness.grid.collect import FAIRNESS_METRICS, collect
from harness.grid.config import parse_experiment
from harness.specs import BiasSpec, FinetuneSpec
from harness.store import RunStore
from ranking.errors import UserError
from ranking.table import ScoreTable

DOC = {
    "name": "c",
    "labels": {"tiny:gpt2": "gpt"},
    "finetune": {"models": ["tiny:bert", "tiny:gpt2"], "tasks": ["rte", "mnli"], "seeds": [0, 1]},
    "bias": {"datasets": ["crows_pairs", "stereoset"], "options": {"limit": 5}},
}
BASE = {"tiny:bert": 0.5, "tiny:gpt2": 0.7}


def _ft_record(spec: FinetuneSpec) -> dict:
    b = BASE[spec.model] + 0.1 * spec.seed
    metrics = {"accuracy": b} if spec.task == "rte" else {"accuracy": b, "accuracy_mm": b - 0.05}
    best = {k: v + 0.01 for k, v in metrics.items()}
    return {
        "run_id": spec.run_id(), "kind": "finetune", "model": spec.model, "task": spec.task, "seed": spec.seed,
        "status": "ok", "metrics": metrics, "metrics_best": best,
        "efficiency": {"energy_kwh": 1.0 + spec.seed, "duration_h": 2.0, "gpu_hours": 2.0 * (1 + spec.seed),
                       "co2_kg": 0.25},
    }


def _bias_record(spec: BiasSpec) -> dict:
    metrics = ({"anti_stereo_score": 40.0 if spec.model == "tiny:bert" else 45.0, "metric_score": 60.0}
               if spec.dataset == "crows_pairs" else
               {"intrasentence_icat": 70.0, "intrasentence_ss": 55.0, "intersentence_icat": 65.5})
    return {"run_id": spec.run_id(), "kind": "bias", "model": spec.model, "dataset": spec.dataset,
            "status": "ok", "metrics": metrics}


def _fill(exp, skip=()):
    store = RunStore(exp.output)
    for spec in exp.specs:
        if spec.run_id() in skip:
            continue
        store.write(_ft_record(spec) if isinstance(spec, FinetuneSpec) else _bias_record(spec))


@pytest.fixture
def exp(tmp_path):
    return parse_experiment(DOC).with_output(tmp_path)


def test_matrix_values_directions_and_sidecar(exp):
    _fill(exp)
    result = collect(exp)
    m = pd.read_csv(result.matrix_path, index_col="model")
    assert list(m.index) == ["tiny:bert", "gpt"]
    assert list(m.columns) == [
        "rte_acc", "mnli_m_acc", "mnli_mm_acc",
        "rte_energy_kwh", "rte_duration_h", "rte_gpu_hours", "rte_co2_kg",
        "mnli_energy_kwh", "mnli_duration_h", "mnli_gpu_hours", "mnli_co2_kg",
        "crows_anti_stereo_score", "stereoset_intra_icat", "stereoset_inter_icat",
    ]
    # performance: mean over seeds 0 and 1 (0.5 and 0.6 for bert; 0.7 and 0.8 for gpt)
    assert m.loc["tiny:bert", "rte_acc"] == pytest.approx(0.55)
    assert m.loc["gpt", "mnli_m_acc"] == pytest.approx(0.75)
    assert m.loc["gpt", "mnli_mm_acc"] == pytest.approx(0.70)
    # efficiency per task: mean over seeds
    assert m.loc["tiny:bert", "rte_energy_kwh"] == pytest.approx(1.5)
    assert m.loc["gpt", "mnli_gpu_hours"] == pytest.approx(3.0)
    assert m.loc["gpt", "rte_co2_kg"] == pytest.approx(0.25)
    # fairness
    assert m.loc["tiny:bert", "crows_anti_stereo_score"] == 40.0
    assert m.loc["gpt", "stereoset_inter_icat"] == 65.5

    side = yaml.safe_load(result.criteria_path.read_text())
    assert side["groups"] == ["performance", "efficiency", "fairness"]
    crit = side["criteria"]
    assert crit["rte_acc"]["group"] == "performance" and crit["rte_acc"]["direction"] == "higher"
    assert crit["mnli_mm_acc"]["source"].startswith("GLUE mnli dev mismatched accuracy, final epoch")
    assert all(crit[f"mnli_{k}"]["direction"] == "lower" and crit[f"mnli_{k}"]["group"] == "efficiency"
               for k in ("energy_kwh", "duration_h", "gpu_hours", "co2_kg"))
    assert crit["rte_energy_kwh"]["unit"] == "kWh" and crit["rte_co2_kg"]["unit"] == "kg CO2eq"
    assert crit["crows_anti_stereo_score"] == {
        "direction": "higher", "weight": 1.0, "group": "fairness", "unit": "%",
        "source": next(f.note for f in FAIRNESS_METRICS if f.name == "crows_anti_stereo_score"),
    }

    # exactly what `vnr rank` reads
    table = ScoreTable.load(exp.output)
    assert table.models == ("tiny:bert", "gpt")
    assert table.group_names == ("performance", "efficiency", "fairness")
    assert table.criterion("rte_gpu_hours").direction == "lower"

    stats = pd.read_csv(result.stats_path)
    row = stats[(stats.model == "gpt") & (stats.criterion == "rte_acc")].iloc[0]
    assert (row.group, row.seed_0, row.seed_1, row.n) == ("performance", pytest.approx(0.7), pytest.approx(0.8), 2)
    assert row["mean"] == pytest.approx(0.75)
    assert row["std"] == pytest.approx(math.sqrt(0.005))  # sample std of 0.7, 0.8
    row = stats[(stats.model == "tiny:bert") & (stats.criterion == "mnli_energy_kwh")].iloc[0]
    assert (row.seed_0, row.seed_1, row["mean"]) == (1.0, 2.0, 1.5)

    long = pd.read_csv(result.seeds_path)
    assert list(long.columns) == ["model", "criterion", "seed", "value"]
    assert len(long) == 2 * 11 * 2  # models x seeded criteria (3 performance + 8 efficiency) x seeds
    got = long[(long.model == "gpt") & (long.criterion == "mnli_mm_acc")].sort_values("seed")
    assert got["value"].tolist() == pytest.approx([0.65, 0.75])
    assert set(long.criterion) & {"crows_anti_stereo_score"} == set()  # fairness does not depend on a seed


def test_best_epoch(exp):
    _fill(exp)
    collect(exp, epoch="best")
    m = pd.read_csv(exp.output / "matrix.csv", index_col="model")
    assert m.loc["tiny:bert", "rte_acc"] == pytest.approx(0.56)
    assert "best epoch" in yaml.safe_load((exp.output / "criteria.yaml").read_text())["criteria"]["rte_acc"]["source"]


def test_missing_runs_are_refused_by_name_or_left_empty(exp):
    gone = [s for s in exp.specs if isinstance(s, FinetuneSpec) and s.model == "tiny:gpt2" and s.task == "rte"]
    gone_bias = [s for s in exp.specs if isinstance(s, BiasSpec) and s.model == "tiny:bert" and s.dataset == "stereoset"]
    skip = {s.run_id() for s in [*gone, *gone_bias]}
    _fill(exp, skip=skip)
    # a failed record is not a result either
    RunStore(exp.output).write({"run_id": gone[0].run_id(), "status": "failed", "error": "boom"})
    with pytest.raises(UserError) as err:
        collect(exp)
    message = str(err.value)
    assert "3 of 12 runs" in message and all(rid in message for rid in skip) and "--allow-missing" in message
    assert not (exp.output / "matrix.csv").exists()

    result = collect(exp, allow_missing=True)
    assert sorted(result.missing) == sorted(skip)
    m = pd.read_csv(result.matrix_path, index_col="model")
    assert math.isnan(m.loc["gpt", "rte_acc"]) and math.isnan(m.loc["gpt", "rte_energy_kwh"])
    assert math.isnan(m.loc["tiny:bert", "stereoset_intra_icat"])
    assert m.loc["tiny:bert", "rte_acc"] == pytest.approx(0.55)
    table = ScoreTable.load(result.matrix_path)
    assert table.has_missing


def test_a_seed_missing_averages_the_others(exp):
    one = next(s for s in exp.specs if isinstance(s, FinetuneSpec) and s.model == "tiny:bert"
               and s.task == "rte" and s.seed == 1)
    _fill(exp, skip={one.run_id()})
    collect(exp, allow_missing=True)
    m = pd.read_csv(exp.output / "matrix.csv", index_col="model")
    assert m.loc["tiny:bert", "rte_acc"] == pytest.approx(0.5)
    seeds = pd.read_csv(exp.output / "seed_stats.csv")
    row = seeds[(seeds.model == "tiny:bert") & (seeds.criterion == "rte_acc")].iloc[0]
    assert row.n == 1 and math.isnan(row.seed_1) and math.isnan(row["std"])


def test_stale_results_of_other_run_ids_are_ignored(exp):
    _fill(exp)
    store = RunStore(exp.output)
    old = FinetuneSpec("tiny:bert", "rte", 0, learning_rate=1e-3)  # an older setting in the same store
    store.write({**_ft_record(old), "metrics": {"accuracy": 0.99}})
    collect(exp)
    assert pd.read_csv(exp.output / "matrix.csv", index_col="model").loc["tiny:bert", "rte_acc"] == pytest.approx(0.55)


def test_nothing_finished(exp):
    with pytest.raises(UserError, match="nothing to collect"):
        collect(exp, allow_missing=True)
