"""``runs_per_gpu: auto`` / ``precision: auto`` by calibration (harness.grid.calibrate), on the CPU.

The bursts are real: N processes, each training the tiny model through the real training path.
One calibration (module fixture, three bursts) serves the reuse and record tests, which check that it chose
what its own windows measured fastest and stopped only by its rules. How fast a setting is on this machine is
not asserted: a shared 2-core machine measured one setting anywhere in 70-760 samples/s within minutes (that
is scripts/bench_gpu_grid.py's to report). Each burst starts N Python processes that load torch, so the tests
that run bursts are marked slow.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.grid.calibrate import (
    AUTO,
    Device,
    Limits,
    calibration_path,
    detect_device,
    ensure_calibration,
    format_table,
    resolve_packing,
    shape_key,
)
from harness.specs import FinetuneSpec
from harness.store import RunStore

CANDIDATES = (1, 2, 4)
HYPER = {"batch_size": 8, "max_length": 64}
SPEC = FinetuneSpec("tiny:bert", "rte", 0, **HYPER)


@pytest.fixture(scope="module")
def calibrated(data_root):
    """A grid's first calibration: N = 1, 2, 4 at fp32 (the CPU's one precision), budget wide enough for all."""
    out = Path(tempfile.mkdtemp(prefix="vnr-test-calibration-"))
    cal = ensure_calibration(SPEC, out, data_root=data_root, grid_samples_total=10**9,
                             limits=Limits(candidates=CANDIDATES, budget_cap_s=900))
    return out, cal


@pytest.mark.slow
def test_the_first_grid_start_measures_and_writes_the_table(calibrated):
    out, cal = calibrated
    device = detect_device()
    assert cal.path == calibration_path(out, device.kind) == out / "calibration" / f"{device.kind}.json"
    assert device.kind.startswith("cpu-") and device.kind.endswith(f"-{device.cores}")
    assert not cal.reused and cal.bursts_run >= 1
    stored = json.loads(cal.path.read_text())
    assert stored["device_kind"] == device.kind and stored["entries"][shape_key(SPEC)] == cal.doc
    rows = cal.doc["rows"]
    confirmations = [r for r in rows if r.get("confirmation")]
    assert rows[len(rows) - len(confirmations):] == confirmations  # the confirmation round comes after the sweep
    # a gain shortfall measures the N before once more (under the same load) before it stops the sweep
    remeasured = [r for r in rows if r.get("remeasured")]
    sweep = [r for r in rows if not r.get("confirmation") and not r.get("remeasured")]
    assert [(r["n"], r["precision"]) for r in sweep] == [(n, "fp32") for n in CANDIDATES]
    assert len(remeasured) <= len(CANDIDATES) - 1
    for again in remeasured:  # each follows the burst at the next N, whose gain fell short
        after = rows[rows.index(again) - 1]
        assert after["n"] == CANDIDATES[CANDIDATES.index(again["n"]) + 1] and after["status"] == "measured"
    measured = [r for r in rows if r["status"] == "measured"]
    swept = [r for r in sweep if r["status"] == "measured"]
    # padding auto: bucket and flatten timed first at N = 1, fp32; the faster is swept, its burst the sweep's first
    layouts = cal.doc["layouts"]
    assert [r["padding"] for r in layouts] == ["bucket", "flatten"] and all(r["status"] == "measured" for r in layouts)
    fastest = max(layouts, key=lambda r: r["samples_s"])
    assert cal.doc["chosen"]["padding"] == fastest["padding"]
    assert {k: v for k, v in swept[0].items() if k != "loss_match"} == {k: v for k, v in fastest.items()
                                                                          if k not in ("padding", "loss_match")}
    assert swept[0]["n"] == 1 and len(measured) + len(layouts) - 1 == cal.bursts_run
    bounds = cal.doc["bounds"]
    assert (bounds["warmup_steps"], bounds["timed_steps"], bounds["windows"]) == (5, 40, 3)  # CPU defaults
    for r in measured:  # 3 windows, each N runs x 40 timed steps x batch 8; no NVML on CPU
        per_window = r["n"] * 40 * 8
        assert r["timed_samples"] == 3 * per_window and len(r["window_samples_s"]) == 3
        assert r["seconds"] == pytest.approx(sum(per_window / w for w in r["window_samples_s"]))
        assert r["samples_s"] == statistics.median(r["window_samples_s"])
        assert r["utilisation_pct"] is None and r["power_w"] is None and r["peak_memory_bytes"] > 0
        assert r["threads_per_run"] == 1 and r["loss_match"] is True  # one thread per burst run on a CPU
    for r in sweep[len(swept):]:  # only the gain rule stops a sweep with this budget and memory
        assert r["status"] == "skipped" and r["reason"].startswith("gain:")
    # every window of every burst of a setting counts: the median of them all decides
    windows = {n: [w for r in measured if r["n"] == n for w in r["window_samples_s"]] for n in {r["n"] for r in measured}}
    by_sweep = sorted(((r["samples_s"], r["n"]) for r in swept), reverse=True)
    if len(by_sweep) >= 2 and by_sweep[1][0] >= 0.75 * by_sweep[0][0]:  # within 25 %: the two best measured again
        assert sorted(r["n"] for r in confirmations) == sorted([by_sweep[0][1], by_sweep[1][1]])
    else:
        assert confirmations == []
    medians = {n: statistics.median(v) for n, v in windows.items()}
    best = max(medians, key=medians.get)
    assert cal.doc["chosen"] == {"runs_per_gpu": best, "precision": "fp32", "samples_s": medians[best],
                                 "padding": fastest["padding"]}
    table = format_table(cal)
    assert f"chosen: runs_per_gpu {best}, precision fp32, padding {fastest['padding']}" in table
    assert "padding auto, each exact layout at the first N and precision: bucket " in table
    assert "measured: N=1 fp32" in table and "skipped for budget: none" in table


@pytest.mark.slow
def test_a_second_grid_start_reuses_the_file_and_runs_no_burst(calibrated, data_root):
    out, cal = calibrated
    before = cal.path.read_bytes()
    again = ensure_calibration(SPEC, out, data_root=data_root, grid_samples_total=10**9,
                               limits=Limits(candidates=CANDIDATES, budget_cap_s=900))
    assert again.reused and again.bursts_run == 0 and again.doc == cal.doc
    assert cal.path.read_bytes() == before
    # the same shape with another seed or task is the same entry; another batch size is not (it would calibrate)
    assert shape_key(FinetuneSpec("tiny:bert", "stsb", 3, **HYPER)) == shape_key(SPEC)
    assert shape_key(FinetuneSpec("tiny:bert", "rte", 0, batch_size=16, max_length=64)) != shape_key(SPEC)
    # nor is another batch layout or LoRA (another throughput and memory per run)
    for other in ({"padding": "bucket"}, {"peft": "lora"}):
        assert shape_key(FinetuneSpec("tiny:bert", "rte", 0, **{**HYPER, **other})) != shape_key(SPEC)


@pytest.mark.slow
def test_grid_runs_name_the_calibration_they_ran_under(calibrated, data_root, capsys, monkeypatch):
    """vnr run with runs_per_gpu: auto on an output that has the calibration: reused (no burst), and
    the record names it; precision auto took the calibration's precision."""
    out, cal = calibrated
    monkeypatch.setenv("VNR_DATA_ROOT", str(data_root))
    config = out / "grid.yaml"
    config.write_text(yaml.safe_dump({
        "name": "cal", "output": str(out),
        "finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0],
                     "hyperparameters": {**HYPER, "max_steps": 2, "max_train_samples": 16, "max_eval_samples": 16}},
        "local": {"runs_per_gpu": "auto"},
    }))
    before = cal.path.read_bytes()
    assert cli.main(["run", str(config), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"calibration {cal.path} (reused)" in printed
    assert cal.path.read_bytes() == before  # no burst re-ran, nothing rewritten
    (record,) = [r for r in RunStore(out).records() if r.get("status") == "ok"]
    assert record["calibration"] == {"file": f"calibration/{cal.path.name}", "device_kind": cal.doc["device"]["kind"],
                                     "shape": shape_key(SPEC), "runs_per_gpu": cal.runs_per_gpu, "precision": "fp32",
                                     "padding": cal.doc["chosen"]["padding"]}
    assert record["settings"]["batching"]["chosen_by"] == "calibration"  # padding auto: the measured layout
    assert record["settings"]["batching"]["mode"] == {"bucket": "bucketed", "flatten": "flattened"}[
        cal.doc["chosen"]["padding"]]
    assert record["settings"]["precision"] == "fp32"
    assert record["settings"]["precision_source"] == f"calibration calibration/{cal.path.name}"

    # a SLURM array task of an auto array (harness.grid.entry): the same calibration, reused under its lock
    from harness.grid.config import load_experiment
    from harness.grid.entry import run_task

    exp = load_experiment(config)
    seed1 = replace(exp.specs[0], seed=1)
    packing = {"runs_per_gpu": "auto", "first": exp.specs[0], "samples": 10**9, "budget_cap_s": 900}
    assert run_task([seed1], out, data_root, packing=packing) == "ran"
    assert cal.path.read_bytes() == before
    assert RunStore(out).get(seed1.run_id())["calibration"] == record["calibration"]


def test_a_forced_value_skips_calibration(tmp_path):
    fp32 = FinetuneSpec("tiny:bert", "rte", 0, precision="fp32", compile="off", **HYPER)
    # N fixed, the precision and compile fixed by the spec: nothing to measure, no file (with compile auto, a GPU
    # would measure compile: tests/test_compile.py)
    plan = resolve_packing([fp32], tmp_path, runs_per_gpu=4, gpus=[0])
    assert (plan.runs_per_gpu, plan.calibration) == (4, None)
    # --no-calibrate: auto is 1, and precision auto is left to the rule
    plan = resolve_packing([SPEC], tmp_path, runs_per_gpu=AUTO, calibrate_runs=False)
    assert (plan.runs_per_gpu, plan.calibration, plan.options(SPEC)) == (1, None, {})
    # without a GPU, N fixed: fp32 is the only candidate, nothing to measure
    assert resolve_packing([SPEC], tmp_path, runs_per_gpu=2, gpus=[]).calibration is None
    # the default (None) without a GPU: one run at a time, uncalibrated
    assert resolve_packing([SPEC], tmp_path, runs_per_gpu=None, gpus=[]).runs_per_gpu == 1
    assert not (tmp_path / "calibration").exists()


def test_a_failing_burst_worker_is_one_line_and_its_output_is_kept(tmp_path, monkeypatch):
    """A worker that dies with a traceback (here a stand-in for `python`, the allocation error a huge batch_size
    gives) ends the calibration with one line: its exception, and where its whole output is kept."""
    import re
    import sys

    from ranking.floor.errors import UserError

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\n"
                    "printf 'Traceback (most recent call last):\\n  File \"w.py\", line 9, in probe\\n    f()\\n' >&2\n"
                    "printf 'RuntimeError: DefaultCPUAllocator: can'\"'\"'t allocate memory:\\n  4000000000000 bytes\\n' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    out = tmp_path / "out"
    with pytest.raises(UserError) as err:
        ensure_calibration(SPEC, out, limits=Limits(candidates=(1,), budget_cap_s=60),
                           device=Device("cpu-test-2", "cpu", "test", 8 * 2**30, 2))  # torch is not imported
    message = str(err.value)
    kept = re.fullmatch(r"calibration: the grid's first fine-tuning spec does not train: a calibration worker "
                        r"\(fp32, N=1\) exited: RuntimeError: DefaultCPUAllocator: can't allocate memory: "
                        r"4000000000000 bytes \(its output: (.+)\)", message)
    assert kept, message
    assert Path(kept[1]).parent == out / "logs" / "calibration"
    assert Path(kept[1]).read_text().startswith("Traceback (most recent call last):\n")


@pytest.mark.slow
def test_the_budget_stops_the_sweep_and_memory_excludes_an_n(calibrated, tmp_path, data_root):
    """N = 1 runs within the cap (bucketed and flattened, the faster opening the sweep); the budget it then sets
    (5 % of a one-sample grid: well under a second) skips N = 2, which fits in memory, and N = 4 (4 x the
    measured peak per run) does not fit in the injected memory."""
    _, cal = calibrated
    peak = cal.doc["rows"][0]["peak_memory_bytes"]
    memory = int(3.0 * peak / 0.9)  # 90 % of it holds 3 runs of the earlier peak (this burst's may differ a little)
    small = ensure_calibration(SPEC, tmp_path, data_root=data_root, grid_samples_total=1,
                               limits=Limits(candidates=CANDIDATES, budget_cap_s=900, memory_bytes=memory))
    rows = small.doc["rows"]
    assert small.bursts_run == 2 and rows[0]["status"] == "measured" and rows[0]["n"] == 1  # (bucket, flatten)
    assert rows[1]["n"] == 2 and rows[1]["status"] == "skipped" and rows[1]["reason"].startswith("budget:")
    assert rows[2]["n"] == 4 and rows[2]["status"] == "skipped" and rows[2]["reason"].startswith("memory: 4 x")
    assert small.doc["bounds"]["budget_s"] < 1 and small.doc["device"]["memory_bytes_used_for_bound"] == memory
    assert small.doc["chosen"]["runs_per_gpu"] == 1
    assert "measured: N=1 fp32; skipped for budget: N=2 fp32;" in format_table(small)


def test_the_budget_is_a_hard_cap_that_cuts_a_running_burst(tmp_path, data_root):
    """A 2 s cap: the first burst (N = 1, one CPU thread) is cut at it (its process loads torch and the model
    first), kept with its partial rate or discarded, and nothing else starts; the table names both. (That each
    burst is handed the cap as its deadline is checked on fixed windows:
    test_a_cut_burst_spends_the_budget_and_gets_the_caps_deadline; how long stopping a worker takes on a loaded
    machine is not asserted.)"""
    cal = ensure_calibration(SPEC, tmp_path, data_root=data_root, grid_samples_total=10**9,
                             limits=Limits(candidates=CANDIDATES, budget_cap_s=2))
    rows = cal.doc["rows"]
    assert rows[0]["n"] == 1 and rows[0]["cut"] and rows[0]["threads_per_run"] == 1
    assert [r["status"] for r in rows[1:]] == ["skipped", "skipped"]
    assert all(r["reason"] == "budget: 2 s spent (a burst was cut at it)" for r in rows[1:])
    table = format_table(cal)
    assert "skipped for budget: N=2 fp32, N=4 fp32;" in table
    if rows[0]["status"] == "cut":  # cut before a timed step ended: discarded, nothing chosen by measurement
        assert rows[0]["reason"].startswith("budget: cut after") and rows[0]["reason"].endswith("discarded")
        assert "cut at the budget and discarded: N=1 fp32" in table
        assert cal.doc["chosen"]["measured"] is False and cal.doc["chosen"]["runs_per_gpu"] == 1
        assert not cal.path.exists()  # an unmeasured fallback is not stored for later grids to reuse
        assert "unmeasured; not stored" in table
    else:  # a slow machine's timed steps before the cut: a partial rate, said so
        assert rows[0]["status"] == "measured" and rows[0]["samples_s"] > 0 and "(partial)" in rows[0]["note"]
        assert cal.doc["chosen"]["runs_per_gpu"] == 1


def test_a_run_without_calibration_states_the_rule_that_chose_its_precision(tmp_path, data_root, capsys):
    """A single `vnr finetune` run (no grid, no calibration): precision auto by the rule, named in the record
    and in the output."""
    from harness.finetune.train import PRECISION_RULE

    assert cli.main(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--output", str(tmp_path),
                     "--max-steps", "1", "--max-train-samples", "8", "--max-eval-samples", "8", "--batch-size", "8",
                     "--data-root", str(data_root), "--no-progress"]) == 0
    assert f"precision fp32, chosen by {PRECISION_RULE}" in capsys.readouterr().out
    (record,) = RunStore(tmp_path).records()
    assert record["calibration"] is None and record["settings"]["precision"] == "fp32"
    assert record["settings"]["precision_source"] == PRECISION_RULE


@pytest.mark.slow
def test_concurrent_tasks_on_one_device_kind_calibrate_once(tmp_path, data_root):
    """Two array tasks start together: one measures (holding the lock file), the other waits and reuses."""
    from concurrent.futures import ThreadPoolExecutor

    def task(_):
        return ensure_calibration(SPEC, tmp_path, data_root=data_root, grid_samples_total=0,
                                  limits=Limits(candidates=(1,), steps=5))

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(task, range(2))
    assert sorted([first.bursts_run, second.bursts_run]) == [0, 2]  # N = 1 bucketed and flattened
    assert sorted([first.reused, second.reused]) == [False, True] and first.doc == second.doc
    assert (tmp_path / "calibration" / f"{first.path.stem}.lock").exists()


def test_slurm_auto_gives_each_task_16_specs_and_what_to_calibrate_with(tmp_path, stand_in_sbatch, capsys):
    """runs_per_gpu: auto on SLURM: tasks of 16 specs, each carrying the grid's first fine-tuning spec, its
    training samples and the budget cap, so the first task on a device kind can calibrate (sbatch is a stand-in)."""

    import submitit

    from harness.grid import arrays, slurm
    from harness.grid.config import load_experiment

    stand_in_sbatch("77")
    configs = Path(__file__).resolve().parents[1] / "configs" / "experiments"
    smoke = configs / "smoke.yaml"
    assert arrays.runs_per_task(load_experiment(smoke).slurm) == 1  # gpus: 0, so the default is one run per task
    exp = load_experiment(configs / "paper.yaml", output=tmp_path / "out")
    assert arrays.runs_per_task(exp.slurm) == "auto"
    assert arrays.runs_per_task(exp.slurm, calibrate_runs=False) == 1  # --no-calibrate
    specs = list(exp.specs[:40])
    payload = {"first": exp.specs[0], "samples": 123, "budget_cap_s": 60.0}
    assert slurm.submit(specs, exp.output, exp.slurm, name="t", runs_per_gpu="auto", calibration=payload) == "77"
    assert "#SBATCH --array=0-2" in (tmp_path / "script.sh").read_text()  # 16 + 16 + 8
    call = submitit.core.utils.DelayedSubmission.load(tmp_path / "out" / "logs" / "slurm" / "77_0" / "77_0_submitted.pkl")
    group, _output, _root, _options, packing = call.args
    assert [s.run_id() for s in group] == [s.run_id() for s in specs[:16]]
    assert packing == {"runs_per_gpu": "auto", **payload}
    # a fixed N on a GPU: tasks of N, and the first task on a device kind still measures precision auto at N
    fixed = arrays.calibration_payload(exp.slurm.updated(runs_per_gpu=4), specs, specs)
    assert fixed == {"first": exp.specs[0], "samples": sum(s.epochs * {"cola": 8551, "sst2": 67349, "mrpc": 3668,
                     "stsb": 5749, "qqp": 363846, "mnli": 392702, "qnli": 104743, "rte": 2490, "wnli": 635}[s.task]
                     for s in specs if hasattr(s, "task")), "budget_cap_s": exp.slurm.calibration_budget_s}
    assert slurm.submit(specs, exp.output, exp.slurm, name="t", runs_per_gpu=4, calibration=fixed) == "77"
    assert "#SBATCH --array=0-9" in (tmp_path / "script.sh").read_text()  # 40 / 4
    call = submitit.core.utils.DelayedSubmission.load(tmp_path / "out" / "logs" / "slurm" / "77_9" / "77_9_submitted.pkl")
    assert [s.run_id() for s in call.args[0]] == [s.run_id() for s in specs[36:]]
    assert call.args[4] == {"runs_per_gpu": 4, **fixed}
    # the dry run says how an auto array packs (the default where tasks get a GPU)
    assert cli.main(["run", str(smoke), "--executor", "slurm", "--dry-run", "--gpus", "1",
                     "--output", str(tmp_path / "dry")]) == 0
    out = capsys.readouterr().out
    assert f"# {-(-len(load_experiment(smoke).specs) // 16)} array tasks" in out
    assert "N and precision auto from the calibration" in out
    assert cli.main(["run", str(smoke), "--executor", "slurm", "--dry-run", "--gpus", "1", "--no-calibrate",
                     "--output", str(tmp_path / "dry")]) == 0
    assert "one task per run, " in capsys.readouterr().out


# ---------------------------------------------------------------------- the sweep's rules on fixed windows
CPU = Device("cpu-fixed-2", "cpu", "fixed", 64 * 2**30, 2)


def _fixed_bursts(rates, calls):
    """A burst runner giving fixed measurement windows: the next rate for (N, precision) from ``rates`` (a list
    per N: one entry per burst at that N, in order), each burst's three windows all at that rate."""
    seen = {}

    def burst(spec, n, precision, *, deadline, **kwargs):
        i = seen.get(n, 0)
        seen[n] = i + 1
        calls.append((spec.padding, n, deadline))
        rate = rates[n][i]
        return {"n": n, "precision": precision, "status": "measured", "samples_s": rate,
                "window_samples_s": [rate] * 3, "wall_s": 1.0, "seconds": 0.5, "peak_memory_bytes": 2**20,
                "utilisation_pct": None, "power_w": None, "losses": [[5, 0.69]], "threads_per_run": 1}

    return burst


def test_a_gain_shortfall_remeasures_the_n_before_and_goes_on_where_it_was_one_contended_burst():
    """N=1 measured quiet (100), N=2 in a contended moment (90): N=1 measured again under that load (60), so N=2
    gained and the sweep goes on; N=8 (140) gains nothing over N=4 (200) measured again (195): it stops there.
    The median over both N=1 bursts' windows is 80 and N=4's is 197.5: N=4 is chosen (one burst would have
    stopped the sweep at N=1)."""
    from harness.grid.calibrate import calibrate

    calls = []
    rates = {1: [100.0, 60.0], 2: [90.0], 4: [200.0, 195.0], 8: [140.0], 16: [999.0]}
    doc, bursts = calibrate(replace(SPEC, padding="bucket"), device=CPU, grid_samples_total=10**9,
                            limits=Limits(candidates=(1, 2, 4, 8, 16), budget_cap_s=900),
                            burst=_fixed_bursts(rates, calls))
    assert [n for _, n, _ in calls] == [1, 2, 1, 4, 8, 4]
    rows = doc["rows"]
    assert [(r["n"], r["status"], bool(r.get("remeasured"))) for r in rows] == [
        (1, "measured", False), (2, "measured", False), (1, "measured", True), (4, "measured", False),
        (8, "measured", False), (4, "measured", True), (16, "skipped", False)]
    assert rows[-1]["reason"] == "gain: N=8 gained < 5% over the N before (N=4 re-measured: 195.0 samples/s)"
    assert doc["chosen"] == {"runs_per_gpu": 4, "precision": "fp32", "samples_s": 197.5}
    assert bursts == 6


def test_a_shortfall_confirmed_by_the_remeasurement_stops_the_sweep():
    from harness.grid.calibrate import calibrate

    calls = []
    doc, _ = calibrate(replace(SPEC, padding="bucket"), device=CPU, grid_samples_total=10**9,
                       limits=Limits(candidates=(1, 2, 4), budget_cap_s=900),
                       burst=_fixed_bursts({1: [100.0, 98.0, 99.0], 2: [101.0, 102.0], 4: [500.0]}, calls))
    assert [n for _, n, _ in calls] == [1, 2, 1, 1, 2]  # (+ the confirmation round: N=1 and N=2 within 25 %)
    assert doc["rows"][3]["status"] == "skipped" and doc["rows"][3]["n"] == 4
    assert doc["rows"][3]["reason"] == "gain: N=2 gained < 5% over the N before (N=1 re-measured: 98.0 samples/s)"
    assert doc["chosen"]["runs_per_gpu"] == 2  # the confirmation round's medians: 101.5 against 99


def test_a_cut_burst_spends_the_budget_and_gets_the_caps_deadline():
    """Before any rate is known the cap is the deadline each burst is given; a burst cut at it (no finished
    window) is discarded, nothing more starts, and nothing measured is stored or named as stored."""
    from harness.grid.calibrate import Calibration, calibrate

    calls = []

    def cut(spec, n, precision, *, deadline, **kwargs):
        calls.append(deadline)
        return {"n": n, "precision": precision, "status": "cut", "cut": True, "samples_s": None,
                "reason": "budget: cut after 2 s, before a timed step ended: discarded"}

    doc, bursts = calibrate(replace(SPEC, padding="bucket"), device=CPU, grid_samples_total=10**9,
                            limits=Limits(candidates=(1, 2, 4), budget_cap_s=2), burst=cut)
    assert len(calls) == 1 and bursts == 1
    assert [r["status"] for r in doc["rows"]] == ["cut", "skipped", "skipped"]
    assert doc["bounds"]["budget_s"] == 2 and doc["chosen"]["measured"] is False
    table = format_table(Calibration(Path("out/calibration/cpu-fixed-2.json"), "k", doc, bursts_run=bursts))
    assert "cpu-fixed-2.json" not in table and table.startswith("calibration (not stored: nothing measured)")


def _fixed_fused(rates, calls):
    """A fused-burst runner giving fixed windows: K → its rate."""
    def fused(spec, k, *, deadline, **kwargs):
        calls.append(k)
        return {"n": 1, "fuse": k, "precision": "fp32", "status": "measured", "samples_s": rates[k],
                "window_samples_s": [rates[k]] * 3, "wall_s": 1.0, "seconds": 0.5, "peak_memory_bytes": 2**20,
                "losses": []}

    return fused


def test_the_calibration_chooses_k_where_a_fused_group_is_measured_faster():
    """Unfused: N=2 best at 120 samples/s. Fused K=2 150, K=4 260, K=8 255 (no gain over K=4: K=16 not tried):
    K=4 is chosen, named in the table, in the records' calibration and in what the grid resolves fuse auto to."""
    from harness.grid.calibrate import calibrate, calibration_ref, resolve_fuse

    calls, fused_calls = [], []
    doc, bursts = calibrate(replace(SPEC, padding="bucket"), device=CPU, grid_samples_total=10**9,
                            limits=Limits(candidates=(1, 2), budget_cap_s=900, fuse_candidates=(2, 4, 8, 16)),
                            burst=_fixed_bursts({1: [100.0, 99.0], 2: [120.0, 118.0, 121.0]}, calls),
                            fused_burst=_fixed_fused({2: 150.0, 4: 260.0, 8: 255.0, 16: 999.0}, fused_calls))
    assert fused_calls == [2, 4, 8]
    assert [(r["fuse"], r["status"]) for r in doc["fuse"]["rows"]] == [
        (2, "measured"), (4, "measured"), (8, "measured"), (16, "skipped")]
    assert doc["chosen"]["fuse"] == 4 and doc["chosen"]["runs_per_gpu"] == 2
    from harness.grid.calibrate import Calibration

    cal = Calibration(Path("out/calibration/cpu-fixed-2.json"), "k", doc, bursts_run=bursts)
    assert calibration_ref(cal)["fuse"] == 4
    assert resolve_fuse("auto", doc["chosen"]["fuse"]) == (4, "calibration")
    assert "fuse auto: K=2 150.0 samples/s, K=4 260.0 samples/s, K=8 255.0 samples/s, K=16 skipped" in format_table(cal)


def test_fusion_slower_than_the_best_unfused_setting_is_not_chosen():
    from harness.grid.calibrate import calibrate

    doc, _ = calibrate(replace(SPEC, padding="bucket"), device=CPU, grid_samples_total=10**9,
                       limits=Limits(candidates=(1,), budget_cap_s=900, fuse_candidates=(2,)),
                       burst=_fixed_bursts({1: [100.0]}, []), fused_burst=_fixed_fused({2: 101.0}, []))
    assert doc["fuse"]["chosen"] == 1 and "fuse" not in doc["chosen"]


def _fused_with_capture(rates, captured_rate, capture_s, calls):
    """:func:`_fixed_fused`, and a captured burst at ``captured_rate`` whose warm-up took ``capture_s`` more."""
    eager = _fixed_fused(rates, calls)

    def fused(spec, k, *, deadline, capture=False, **kwargs):
        row = {**eager(spec, k, deadline=deadline, **kwargs), "losses": [[20, 0.70]]}
        if capture:
            calls.append(("captured", k))
            row = {**row, "samples_s": captured_rate, "window_samples_s": [captured_rate] * 3,
                   "wall_s": row["wall_s"] + capture_s, "capture": "on"}
        return row

    return fused


@pytest.mark.parametrize("captured_rate, capture_s, chosen", [(600.0, 30.0, "on"), (600.0, 10**6, "off"),
                                                              (265.0, 30.0, "off")])
def test_capture_is_chosen_only_where_it_is_faster_with_its_compile_time_counted_against_a_run(
        captured_rate, capture_s, chosen):
    """On a GPU, after K=4 is chosen (260 samples/s eager), one captured burst at K=4: captured where 4 runs of
    12,450 samples at its rate plus its capture time end sooner than eager (191 s at 260 samples/s)."""
    from harness.grid.calibrate import Calibration, Device, calibrate, resolve_capture

    gpu = Device("gpu-fixed", "cuda", "fixed", 80 * 2**30, 16)
    calls = []
    doc, _ = calibrate(replace(SPEC, padding="bucket", compile="off"), device=gpu, grid_samples_total=10**9,
                       limits=Limits(candidates=(1,), precisions=("fp32",), budget_cap_s=900,
                                     fuse_candidates=(2, 4), capture=True),
                       burst=_fixed_bursts({1: [100.0]}, []),
                       fused_burst=_fused_with_capture({2: 150.0, 4: 260.0}, captured_rate, capture_s, calls))
    assert calls == [2, 4, 4, ("captured", 4)]
    capture = doc["fuse"]["capture"]
    assert capture["chosen"] == chosen and capture["capture_s"] == capture_s
    assert doc["chosen"]["capture"] == chosen
    assert resolve_capture("auto", doc["chosen"]["capture"]) == ("calibration" if chosen == "on" else None)
    table = format_table(Calibration(Path("out/calibration/gpu-fixed.json"), "k", doc, bursts_run=4))
    assert f"capture auto: captured {captured_rate:.1f} against eager 260.0 samples/s at fused K=4" in table
    assert table.splitlines()[-1].startswith(f"chosen: runs_per_gpu 1, precision fp32, fuse 4, "
                                             f"capture {chosen} (100.0 samples/s")


def test_capture_is_not_measured_on_a_cpu():
    from harness.grid.calibrate import calibrate

    calls = []
    doc, _ = calibrate(replace(SPEC, padding="bucket"), device=CPU, grid_samples_total=10**9,
                       limits=Limits(candidates=(1,), budget_cap_s=900, fuse_candidates=(2,), capture=True),
                       burst=_fixed_bursts({1: [100.0]}, []),
                       fused_burst=_fused_with_capture({2: 300.0}, 900.0, 1.0, calls))
    assert calls == [2] and doc["chosen"]["fuse"] == 2 and "capture" not in doc["chosen"]
    assert doc["fuse"]["capture"]["note"] == "not measured: CPU (no kernel launches to save)"
