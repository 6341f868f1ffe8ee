"""The fine-tuning benchmarks report the values they compare (JSON), and the GPU-grid benchmark's arithmetic."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU_GRID = REPO / "scripts" / "bench_gpu_grid.py"


def _gpu_grid_module():
    spec = importlib.util.spec_from_file_location("bench_gpu_grid", GPU_GRID)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow
def test_bench_finetune_quick_json(data_root: Path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_finetune.py"), "--quick", "--json",
                          "--data-root", str(data_root)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    (cpu,) = report["benchmarks"]  # --quick: the CPU benchmark only
    rows = {r["variant"]: r for r in cpu["rows"]}
    plain, ours, untracked = rows["plain Trainer defaults"], rows["ours"], rows["ours, no tracker"]
    # same examples in the same order, fp32 on CPU: the training losses agree
    assert cpu["ours"]["precision"] == "fp32"
    assert ours["loss"] == pytest.approx(plain["loss"], abs=1e-3)
    assert untracked["loss"] == ours["loss"]  # the tracker does not touch training
    assert cpu["sanity"]["ok"] is True
    for r in cpu["rows"]:
        assert _positive(r["samples_s"]) and _positive(r["tokens_s"]) and _positive(r["seconds"])
    # plain pads every example to max_length; ours pads each batch to its longest: same real tokens, fewer computed
    assert plain["padded_tokens_s"] / plain["samples_s"] == pytest.approx(cpu["max_length"])
    assert ours["tokens_s"] / ours["samples_s"] == pytest.approx(plain["tokens_s"] / plain["samples_s"])
    assert ours["padded_tokens_s"] / ours["samples_s"] < cpu["max_length"]
    # tracked variants measured energy, the untracked one did not
    assert _positive(plain["kwh_per_1000"]) and _positive(ours["kwh_per_1000"]) and untracked["kwh_per_1000"] is None
    assert cpu["speedup_ours_over_plain"] == pytest.approx(ours["samples_s"] / plain["samples_s"])
    assert len(cpu["tracker_overhead_pct"]) == 1
    assert report["tracker_cost"]["backend"] == "codecarbon-offline"
    assert report["tracker_cost"]["start_s"] >= 0 and _positive(report["tracker_cost"]["sample_s"])


def test_bench_gpu_grid_skips_in_one_line_without_a_gpu():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(GPU_GRID), "--json"], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(out.stdout.splitlines()) == 1
    assert json.loads(out.stdout) == {"skipped": "no CUDA GPU here: bench_gpu_grid skipped"}


def test_paper_grid_projection():
    m = _gpu_grid_module()
    # the GLUE train sets: 949,733 examples; 5 epochs = the 4.75 M samples per model and seed
    assert sum(m.GLUE_TRAIN_SIZES.values()) == 949_733
    p = m.project_grid({"bert-base": 1000.0, "gpt2": 500.0})
    per_seed = 949_733 * 5
    assert p["samples_per_model_seed"] == per_seed
    assert p["total_samples"] == 949_733 * 5 * 5 * 7 == 166_203_275  # the 166 M training samples
    assert p["per_model_gpu_hours"]["roberta-base"] == pytest.approx(per_seed * 5 / 1000 / 3600)
    assert p["per_model_gpu_hours"]["gpt2"] == pytest.approx(per_seed * 5 / 500 / 3600)
    assert p["total_gpu_hours"] == pytest.approx(per_seed * 5 * (6 / 1000 + 1 / 500) / 3600)
    # the issue's target (24 H100-hours for the whole grid) needs 35 model-seeds' samples in 24 h
    needed = per_seed * 35 / (24 * 3600)
    assert m.project_grid({"bert-base": needed, "gpt2": needed})["total_gpu_hours"] == pytest.approx(24.0)
    with pytest.raises(ValueError, match="gpt2"):
        m.project_grid({"bert-base": 1000.0})


def test_arithmetic_floor_and_peak_table():
    m = _gpu_grid_module()
    assert m.peak_tflops("NVIDIA H100 80GB HBM3") == 989.0 and m.peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert m.peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0 and m.peak_tflops("AMD EPYC") is None
    # the floor: bert-base (110 M parameters) at ~34 real tokens per sample, 400 TFLOP/s: ~2.6 h
    tokens = m.grid_real_tokens({task: 34.0 for task in m.GLUE_TRAIN_SIZES})
    assert tokens == pytest.approx(166_203_275 * 34.0)
    assert m.floor_hours(110_000_000, tokens, 400.0) == pytest.approx(6 * 110e6 * tokens / 400e12 / 3600)
    assert 2.5 < m.floor_hours(110_000_000, tokens, 400.0) < 2.7
    # tasks missing from the data root count at the size-weighted mean of the measured ones
    partial = m.grid_real_tokens({"sst2": 10.0, "cola": 20.0}, epochs=1, seeds=1, models=1)
    mean = (67349 * 10.0 + 8551 * 20.0) / (67349 + 8551)
    assert partial == pytest.approx(67349 * 10.0 + 8551 * 20.0 + (949_733 - 67349 - 8551) * mean)


@pytest.mark.slow
def test_bench_gpu_grid_calibrates_on_cpu_and_projects(data_root: Path, tmp_path: Path):
    """--cpu runs the same calibration as on a GPU (the tiny BERT; nothing measured is meaningful) and
    reports the projections from its own table."""
    out = subprocess.run([sys.executable, str(GPU_GRID), "--cpu", "--candidates", "1,2", "--steps", "4",
                          "--warmup", "1", "--budget", "900", "--peak-tflops", "1", "--json", "--output",
                          str(tmp_path), "--data-root", str(data_root)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert Path(report["calibration_file"]) == tmp_path / "calibration" / f"{report['device_kind']}.json"
    measured = [r for r in report["rows"] if r["status"] == "measured"]
    assert [r["n"] for r in measured][:1] == [1] and all(r["precision"] == "fp32" for r in measured)
    for r in measured:
        assert r["timed_samples"] == r["n"] * 4 * 16 and _positive(r["samples_s"])
    best = max(measured, key=lambda r: r["samples_s"])
    assert report["chosen"] == {"runs_per_gpu": best["n"], "precision": "fp32", "samples_s": best["samples_s"]}
    single = measured[0]["samples_s"]
    assert report["one_run_per_gpu"] == {"n": 1, "precision": "fp32", "samples_s": single}
    proj = report["projection"]
    assert proj["total_samples"] == 166_203_275
    assert proj["calibrated_gpu_hours"] == pytest.approx(166_203_275 / best["samples_s"] / 3600)
    assert proj["one_run_per_gpu_hours"] == pytest.approx(166_203_275 / single / 3600)
    assert report["speedup_over_one_run"] == pytest.approx(best["samples_s"] / single)
    # real tokens from the GLUE train sets in the data root, the floor at the given 1 TFLOP/s
    assert {"cola", "sst2", "rte"} <= set(proj["tokens_per_sample"])
    assert all(2 < v <= 128 for v in proj["tokens_per_sample"].values())
    assert report["parameters"] == measured[0]["model_parameters"] > 0
    m = _gpu_grid_module()
    assert proj["real_tokens"] == pytest.approx(m.grid_real_tokens(proj["tokens_per_sample"]))
    assert proj["floor_gpu_hours"] == pytest.approx(6 * report["parameters"] * proj["real_tokens"] / 1e12 / 3600)
