"""`vnr collect`: the matrix, its criteria sidecar and the per-seed side table, with exact values."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest
import yaml

from harness.bias import data as bias_data
from harness.finetune import tasks as glue_tasks
from harness.grid.collect import collect
from harness.grid.config import parse_experiment
from harness.specs import BiasSpec, FinetuneSpec
from harness.store import RunStore
from ranking.floor.errors import UserError
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
        "tokens": {"real_tokens": 1000, "computed_tokens": 1250, "padding_share": 0.2,
                   "tokens_per_s": (100.0 if spec.model == "tiny:bert" else 300.0) * (1 + spec.seed)},
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
        "source": bias_data.get_dataset("crows_pairs").fairness[0].note + "; scored with the harness's definitions",
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
    assert "\n" not in message and "3 missing or failed" in message
    assert not (exp.output / "matrix.csv").exists()

    result = collect(exp, allow_missing=True)
    assert sorted(result.missing) == sorted(skip)
    m = pd.read_csv(result.matrix_path, index_col="model")
    assert math.isnan(m.loc["gpt", "rte_acc"]) and math.isnan(m.loc["gpt", "rte_energy_kwh"])
    assert math.isnan(m.loc["tiny:bert", "stereoset_intra_icat"])
    assert m.loc["tiny:bert", "rte_acc"] == pytest.approx(0.55)
    table = ScoreTable.load(result.matrix_path)
    assert table.has_missing


def test_a_seed_missing_leaves_the_cell_empty(exp):
    """--allow-missing: a mean over seeds lacking one seed is not made up from the others (it would sit beside
    full means under the same "mean over seeds 0,1"); the seed that is there stays in seed_stats.csv."""
    one = next(s for s in exp.specs if isinstance(s, FinetuneSpec) and s.model == "tiny:bert"
               and s.task == "rte" and s.seed == 1)
    _fill(exp, skip={one.run_id()})
    collect(exp, allow_missing=True)
    m = pd.read_csv(exp.output / "matrix.csv", index_col="model")
    assert math.isnan(m.loc["tiny:bert", "rte_acc"]) and math.isnan(m.loc["tiny:bert", "rte_energy_kwh"])
    assert m.loc["gpt", "rte_acc"] == pytest.approx(0.75) and m.loc["tiny:bert", "mnli_m_acc"] == pytest.approx(0.55)
    side = yaml.safe_load((exp.output / "criteria.yaml").read_text())
    assert side["criteria"]["rte_acc"]["source"].endswith("mean over seeds 0,1")  # true of every non-empty cell
    seeds = pd.read_csv(exp.output / "seed_stats.csv")
    row = seeds[(seeds.model == "tiny:bert") & (seeds.criterion == "rte_acc")].iloc[0]
    assert row.n == 1 and row.seed_0 == pytest.approx(0.5) and math.isnan(row.seed_1) and math.isnan(row["std"])
    long = pd.read_csv(exp.output / "seeds.csv")
    assert long[(long.model == "tiny:bert") & (long.criterion == "rte_acc")].empty  # what bootstrap resamples


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


def _spec(exp, model, target, seed=0):
    return next(s for s in exp.specs if s.model == model and getattr(s, "task", getattr(s, "dataset", None)) == target
                and getattr(s, "seed", 0) == seed)


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ([], "its result file is not a JSON object"),
        ({"status": "ok", "metrics": {}}, "no numeric metrics"),
        ({"status": "ok", "metrics": {"accuracy": "high"}}, "no numeric metrics"),
        ({"status": "ok", "metrics": {"accuracy": float("nan")}}, "metrics.accuracy is nan"),
        ({"status": "ok", "metrics": {"accuracy": 0.5, "accuracy_mm": None}}, "metrics.accuracy_mm is null"),
        ({"status": "ok", "metrics": {"accuracy": 0.5, "accuracy_mm": 0.4},
          "efficiency": {"energy_kwh": float("inf")}}, "efficiency.energy_kwh is inf"),
    ],
)
def test_unusable_records_are_counted_and_named_like_missing_ones(exp, record, why):
    import json

    bad = _spec(exp, "tiny:gpt2", "mnli", 1)
    _fill(exp)
    path = RunStore(exp.output).result_path(bad.run_id())
    text = json.dumps(record if isinstance(record, list) else {"run_id": bad.run_id(), **record})
    path.write_text(text)  # json.dumps writes NaN / Infinity: the non-standard JSON the sweep found
    with pytest.raises(UserError) as err:
        collect(exp)
    message = str(err.value)
    assert "\n" not in message and message.startswith("1 of 12 runs of ")
    assert f"1 with an unusable record ({bad.run_id()}: {why})" in message and "--allow-missing" in message
    assert not (exp.output / "matrix.csv").exists()
    result = collect(exp, allow_missing=True)
    assert result.unusable == {bad.run_id(): why} and result.missing == [bad.run_id()]
    m = pd.read_csv(result.matrix_path, index_col="model")
    assert math.isnan(m.loc["gpt", "mnli_m_acc"]) and m.loc["gpt", "rte_acc"] == pytest.approx(0.75)


def test_the_cli_refuses_unusable_runs_in_one_line(exp, tmp_path, capsys):
    from harness.cli import main

    config = tmp_path / "grid.yaml"
    config.write_text(yaml.safe_dump({**DOC, "output": str(exp.output)}))
    _fill(exp)
    RunStore(exp.output).result_path(_spec(exp, "tiny:bert", "rte").run_id()).write_text("[]")
    assert main(["collect", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 with an unusable record" in err[0] and "Traceback" not in err[0]
    assert not (exp.output / "matrix.csv").exists()
    assert main(["collect", str(config), "--allow-missing"]) == 0


def test_a_registered_task_whose_metric_is_absent_from_its_results_fails_loudly(exp, monkeypatch):
    """Were RTE's record to name F1 only, the RTE results (accuracy) would not be RTE results: refused by name, not
    a dropped column (a record without its task's own metrics is not usable: harness.store.record_problem)."""
    _fill(exp)
    rte = glue_tasks.TASKS["rte"]
    monkeypatch.setitem(glue_tasks.TASKS, "rte", replace(rte, metrics=(glue_tasks.F1,)))
    with pytest.raises(UserError, match=r"^4 of 12 runs .* 4 with an unusable record \(finetune-tiny_bert-rte-s0-\w+: "
                       r"metrics.f1 is missing \(it holds: accuracy\);"):
        collect(exp)
    assert not (exp.output / "matrix.csv").exists()


def test_a_registered_bias_set_whose_metric_is_absent_fails_loudly(exp, monkeypatch):
    _fill(exp)
    crows = bias_data.REGISTRY["crows_pairs"]
    renamed = replace(crows.fairness[0], metric="anti_crows_score")
    monkeypatch.setitem(bias_data.REGISTRY, "crows_pairs", replace(crows, fairness=(renamed,)))
    with pytest.raises(UserError, match=r"^2 of 12 runs .* 2 with an unusable record \(bias-tiny_bert-crows_pairs-\w+: "
                       r"metrics.anti_crows_score is missing \(it holds: anti_stereo_score, metric_score\);"):
        collect(exp)


def test_columns_come_from_the_records(exp, monkeypatch):
    """A metric added to a task record becomes a column with no other edit."""
    _fill(exp)
    store = RunStore(exp.output)
    for spec in exp.specs:
        if isinstance(spec, FinetuneSpec) and spec.task == "rte":
            rec = store.get(spec.run_id())
            store.write({**rec, "metrics": {**rec["metrics"], "f1": 0.25 + spec.seed / 10}})
    rte = glue_tasks.TASKS["rte"]
    monkeypatch.setitem(glue_tasks.TASKS, "rte", replace(rte, metrics=(*rte.metrics, glue_tasks.F1)))
    result = collect(exp)
    assert result.criteria[:2] == ["rte_acc", "rte_f1"]
    m = pd.read_csv(result.matrix_path, index_col="model")
    assert m.loc["gpt", "rte_f1"] == pytest.approx(0.3)
    side = yaml.safe_load(result.criteria_path.read_text())["criteria"]["rte_f1"]
    assert side["source"] == ("GLUE rte dev F1, final epoch, mean over seeds 0,1; one of rte's 2 metrics: they share "
                              "the task's one vote (1/2 each)") and side["direction"] == "higher"
    assert side["benchmark"] == "glue/rte" and side["weight"] == 1.0


def _set_packing(exp, levels):
    store = RunStore(exp.output)
    for spec in exp.specs:
        if isinstance(spec, FinetuneSpec) and (spec.model, spec.task, spec.seed) in levels:
            rec = store.get(spec.run_id())
            store.write({**rec, "efficiency": {**rec["efficiency"], "packing": levels[(spec.model, spec.task, spec.seed)]}})


def test_packing_level_is_stated_and_mixed_levels_are_refused(exp):
    _fill(exp)
    _set_packing(exp, {(m, t, s): 4 for m in BASE for t in ("rte", "mnli") for s in (0, 1)})
    result = collect(exp)
    side = yaml.safe_load(result.criteria_path.read_text())["criteria"]
    assert side["rte_energy_kwh"]["source"].endswith("; measured with 4 run(s) per GPU (packing 4)")
    assert "packing" not in side["rte_acc"]["source"]
    assert "# efficiency packing (runs per GPU) per task: rte=4, mnli=4" in result.criteria_path.read_text()
    assert result.packing == {"rte": [4], "mnli": [4]}

    odd = _spec(exp, "tiny:gpt2", "mnli", 1)
    _set_packing(exp, {("tiny:gpt2", "mnli", 1): 1})
    with pytest.raises(UserError) as err:
        collect(exp)
    message = str(err.value)
    assert "\n" not in message and message.startswith("the efficiency criteria of mnli would mix runs measured at "
                                                      f"different packing levels (1 run(s) per GPU: {odd.run_id()}; 4 ")
    assert "--allow-mixed-packing" in message
    result = collect(exp, allow_mixed_packing=True)
    side = yaml.safe_load(result.criteria_path.read_text())["criteria"]
    assert "MIXED packing levels 1, 4" in side["mnli_gpu_hours"]["source"]
    assert side["rte_gpu_hours"]["source"].endswith("(packing 4)")


def test_tokens_per_s_is_an_opt_in_higher_is_better_efficiency_criterion(exp, tmp_path, capsys):
    _fill(exp)
    plain = collect(exp)
    assert not any("tokens" in c for c in plain.criteria)  # off by default: the default ranking is unchanged
    result = collect(exp, extra_criteria=["tokens_per_s"])
    m = pd.read_csv(result.matrix_path, index_col="model")
    assert list(m.columns)[3:8] == ["rte_energy_kwh", "rte_duration_h", "rte_gpu_hours", "rte_co2_kg",
                                    "rte_tokens_per_s"]
    assert m.loc["tiny:bert", "rte_tokens_per_s"] == pytest.approx(150.0)  # mean of seeds 0, 1: 100 and 200
    assert m.loc["gpt", "mnli_tokens_per_s"] == pytest.approx(450.0)
    side = yaml.safe_load(result.criteria_path.read_text())["criteria"]
    assert side["rte_tokens_per_s"]["direction"] == "higher" and side["rte_tokens_per_s"]["group"] == "efficiency"
    assert side["rte_tokens_per_s"]["unit"] == "tokens/s"
    assert side["rte_tokens_per_s"]["source"].endswith("(packing 1)")
    assert ScoreTable.load(exp.output).criterion("mnli_tokens_per_s").direction == "higher"
    with pytest.raises(UserError, match=r"--criteria \+watts: not an optional criterion; use \+tokens_per_s"):
        collect(exp, extra_criteria=["watts"])

    from harness.cli import main

    config = tmp_path / "grid.yaml"
    config.write_text(yaml.safe_dump({**DOC, "output": str(exp.output)}))
    assert main(["collect", str(config), "--criteria", "tokens_per_s"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "with a leading +" in err[0]
    assert main(["collect", str(config), "--criteria", "+tokens_per_s"]) == 0
    assert "rte_tokens_per_s" in pd.read_csv(exp.output / "matrix.csv", index_col="model").columns


def test_records_without_packing_were_measured_alone(exp):
    _fill(exp)
    side = yaml.safe_load(collect(exp).criteria_path.read_text())["criteria"]
    assert side["mnli_co2_kg"]["source"].endswith("(packing 1)")


def test_an_output_that_is_a_file_or_read_only_is_one_line_and_writes_nothing(exp, tmp_path):
    import os

    from harness.grid.config import parse_experiment as parse

    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(UserError, match=r"output .*afile is a file, not a results directory"):
        collect(parse(DOC).with_output(afile))
    _fill(exp)
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    exp.output.chmod(0o500)
    try:
        with pytest.raises(UserError, match=r"cannot write the matrix into .*: the directory is not writable"):
            collect(exp)
    finally:
        exp.output.chmod(0o700)
    assert not (exp.output / "matrix.csv").exists()


def _set_scoring(exp, modes):
    store = RunStore(exp.output)
    for spec in exp.specs:
        if isinstance(spec, BiasSpec) and (spec.model, spec.dataset) in modes:
            rec = store.get(spec.run_id())
            store.write({**rec, "scoring": {"mode": modes[(spec.model, spec.dataset)]}})


def test_the_bias_scoring_mode_is_stated_and_mixed_modes_are_refused(exp):
    _fill(exp)  # records without scoring.mode were scored with the default definitions
    side = yaml.safe_load(collect(exp).criteria_path.read_text())["criteria"]
    assert side["crows_anti_stereo_score"]["source"].endswith("; scored with the harness's definitions")
    _set_scoring(exp, {(m, "crows_pairs"): "reference" for m in BASE})
    side = yaml.safe_load(collect(exp).criteria_path.read_text())["criteria"]
    assert side["crows_anti_stereo_score"]["source"].endswith(
        "; scored with the published scripts' definitions (scoring: reference)")
    assert side["stereoset_intra_icat"]["source"].endswith("; scored with the harness's definitions")
    _set_scoring(exp, {(m, "stereoset"): "votenrank" for m in BASE})
    side = yaml.safe_load(collect(exp).criteria_path.read_text())["criteria"]
    assert side["stereoset_intra_icat"]["source"].endswith(
        "; scored with the Vote'n'Rank authors' fairness computation (scoring: votenrank)")
    assert side["stereoset_inter_icat"]["source"].endswith(
        "; scored with the Vote'n'Rank authors' fairness computation (scoring: votenrank) — as published, the "
        "intrasentence items with their context prepended, not StereoSet's intersentence section")

    _set_scoring(exp, {("tiny:gpt2", "crows_pairs"): "default"})
    odd = _spec(exp, "tiny:gpt2", "crows_pairs")
    with pytest.raises(UserError) as err:
        collect(exp)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        f"bias set crows_pairs: its runs were scored with different definitions (default: {odd.run_id()}; reference: ")
    assert message.endswith("re-run them with one bias.options.scoring (default | reference | votenrank)")


def test_a_grid_preset_is_named_in_the_sidecar_and_the_summary(tmp_path):
    from harness.grid.collect import describe

    exp = parse_experiment({**DOC, "preset": "votenrank"}).with_output(tmp_path)
    _fill(exp)
    result = collect(exp)
    text = result.criteria_path.read_text()
    assert "# grid preset: votenrank (rank with --preset votenrank to follow its conventions)\n" in text
    assert describe(result).endswith("; the grid follows preset votenrank: rank with --preset votenrank")
    plain_exp = parse_experiment(DOC).with_output(tmp_path / "plain")
    _fill(plain_exp)
    plain = collect(plain_exp)
    assert "# grid preset" not in plain.criteria_path.read_text() and "follows preset" not in describe(plain)


def _set_basis(exp, bases):
    """Give the fine-tuning records an energy basis, as the tracker writes it (all-modelled: modelled kWh = energy)."""
    store = RunStore(exp.output)
    for spec in exp.specs:
        if isinstance(spec, FinetuneSpec) and (spec.model, spec.task, spec.seed) in bases:
            rec = store.get(spec.run_id())
            how = bases[(spec.model, spec.task, spec.seed)]
            energy = rec["efficiency"]["energy_kwh"]
            modelled = {"estimate": energy, "measured": 0.0, "mixed": energy / 4}[how]
            store.write({**rec, "efficiency": {**rec["efficiency"], "energy_basis": how, "modelled_kwh": modelled,
                                               "modelled_fraction": modelled / energy}})


ALL_RUNS = [(m, t, s) for m in BASE for t in ("rte", "mnli") for s in (0, 1)]


def test_energy_and_carbon_criteria_state_their_method_and_say_estimate_plainly(exp, tmp_path, capsys):
    _fill(exp)
    _set_basis(exp, dict.fromkeys(ALL_RUNS, "estimate"))  # CPU-only runs: codecarbon's models throughout
    result = collect(exp)
    text = result.criteria_path.read_text()
    side = yaml.safe_load(text)["criteria"]
    for task in ("rte", "mnli"):
        energy, co2 = side[f"{task}_energy_kwh"], side[f"{task}_co2_kg"]
        assert (energy["method"], energy["unit"]) == ("estimate", "kWh")
        assert (co2["method"], co2["unit"]) == ("estimate", "kg CO2eq")
        for crit in (energy, co2):
            assert ("; estimate: codecarbon's CPU model (TDP × load, or a constant; a default TDP for an unknown "
                    "processor) and RAM model, no hardware energy counter, effectively a time proxy; measured with "
                    "1 run(s) per GPU (packing 1)") in crit["source"]
        assert "fixed grid carbon intensity" in co2["source"]
        assert list(energy) == ["direction", "weight", "group", "unit", "method", "source"]
        assert "method" not in side[f"{task}_duration_h"] and "method" not in side[f"{task}_gpu_hours"]
    assert "method" not in side["rte_acc"]
    assert ("# energy and carbon per task, how obtained (measured | estimate | mixed | none | unknown): "
            "rte=estimate, mnli=estimate\n") in text
    assert result.energy_basis == {"rte": "estimate", "mnli": "estimate"}
    from harness.grid.collect import describe

    assert describe(result).endswith("; energy and carbon not measured: estimate for rte, mnli (see criteria.yaml)")
    # what `vnr rank` reads keeps the method, and ranks
    table = ScoreTable.load(exp.output)
    assert table.criterion("rte_energy_kwh").method == "estimate" and table.criterion("rte_acc").method is None
    from harness.cli import main

    assert main(["rank", str(exp.output), "--rule", "borda", "--setting", "two-step", "--format", "json"]) == 0
    assert '"borda"' in capsys.readouterr().out


def test_a_column_of_measured_and_estimated_runs_is_mixed_with_its_modelled_share(exp):
    _fill(exp)
    bases = dict.fromkeys(ALL_RUNS, "estimate")
    bases[("tiny:gpt2", "rte", 1)] = "measured"  # energy 2.0 kWh, none of it modelled
    _set_basis(exp, bases)
    result = collect(exp)
    side = yaml.safe_load(result.criteria_path.read_text())["criteria"]
    # rte's runs: 1.0 + 2.0 (bert) + 1.0 (gpt, estimate) modelled of 1.0 + 2.0 + 1.0 + 2.0 kWh: 4 of 6
    for name in ("rte_energy_kwh", "rte_co2_kg"):
        assert side[name]["method"] == "mixed"
        assert "; mixed: partly measured by hardware energy counters" in side[name]["source"]
        assert "(66.7% of the energy of these runs modelled; runs: 3 estimate, 1 measured)" in side[name]["source"]
    assert side["mnli_energy_kwh"]["method"] == "estimate"
    assert result.energy_basis == {"rte": "mixed", "mnli": "estimate"}

    _set_basis(exp, dict.fromkeys(ALL_RUNS, "measured"))
    side = yaml.safe_load(collect(exp).criteria_path.read_text())["criteria"]
    assert side["rte_energy_kwh"]["method"] == "measured" and "measured: hardware energy counters (NVML's " \
        "total-energy counter for the GPU, RAPL for the CPU)" in side["rte_energy_kwh"]["source"]

    _set_basis(exp, dict.fromkeys(ALL_RUNS, "mixed"))  # every run a quarter modelled
    side = yaml.safe_load(collect(exp).criteria_path.read_text())["criteria"]
    assert side["mnli_co2_kg"]["method"] == "mixed"
    assert "(25% of the energy of these runs modelled)" in side["mnli_co2_kg"]["source"]


def test_old_records_without_a_basis_collect_with_method_unknown(exp):
    _fill(exp)  # records as written before efficiency.energy_basis existed
    result = collect(exp)
    side = yaml.safe_load(result.criteria_path.read_text())["criteria"]
    for name in ("rte_energy_kwh", "rte_co2_kg", "mnli_energy_kwh", "mnli_co2_kg"):
        assert side[name]["method"] == "unknown"
        assert "; energy basis unknown (a record written before vnr recorded efficiency.energy_basis" in \
            side[name]["source"]
    assert ScoreTable.load(exp.output).criterion("mnli_co2_kg").method == "unknown"
    # one new record beside old ones: the column cannot say more than unknown
    _set_basis(exp, {("tiny:bert", "rte", 0): "estimate"})
    side = yaml.safe_load(collect(exp).criteria_path.read_text())["criteria"]
    assert side["rte_energy_kwh"]["method"] == "unknown"
    assert "(runs: 1 estimate, 3 unknown)" in side["rte_energy_kwh"]["source"]
