"""The smoke grid on a real SLURM cluster (the single node of slurm/start-local-cluster.sh).

Submits the smoke grid as one job array through ``vnr run --executor slurm``
(submitit), preempts one task mid-run (SIGUSR2, the signal submitit
checkpoints and requeues on), releases the requeued task at once
(``scontrol update StartTime=now``: SLURM would otherwise hold it ~2 min;
``scontrol top``: ahead of the array's other pending tasks),
waits for the array, then checks every result, that the preempted run resumed
from its checkpoint, and the collected matrix.

Skipped, with the reason, where ``sinfo`` is absent or the cluster does not
answer (``bash scripts/test.sh`` starts the cluster when run as root).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hang_bound import HANG_S

from harness.grid.config import load_experiment
from harness.specs import FinetuneSpec
from harness.store import RunStore

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "configs" / "experiments" / "smoke.yaml"
TIMEOUT_S = 600

pytestmark = pytest.mark.slurm


def _cluster_problem() -> str | None:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no SLURM here (sinfo/sbatch not found): run `bash slurm/start-local-cluster.sh` as root"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return "the SLURM controller does not answer (sinfo timed out)"
    states = proc.stdout.split()
    if proc.returncode != 0 or not any(s.rstrip("*~#") in ("idle", "mixed", "allocated") for s in states):
        return f"the SLURM cluster is not usable (sinfo: {proc.stdout.strip() or proc.stderr.strip() or 'no nodes'})"
    return None


@pytest.fixture(scope="module")
def cluster():
    problem = _cluster_problem()
    if problem:
        pytest.skip(problem)


def _squeue(array_id: str) -> dict[str, tuple[str, str]]:
    proc = subprocess.run(["squeue", "-h", "-r", "-j", array_id, "-o", "%i|%T|%r"], capture_output=True, text=True,
                          timeout=30, check=False)
    out = {}
    for line in proc.stdout.splitlines():
        job, state, reason = line.strip().split("|", 2)
        out[job] = (state, reason)
    return out


def _signal(job: str) -> None:
    """``scancel --signal=USR2 JOB``: what a preempting scheduler sends (submitit checkpoints and requeues).

    scancel keeps retrying while the job is being requeued ("can not be altered now"); the signal
    is delivered at the first try, so do not wait for it.
    """
    proc = subprocess.Popen(["scancel", "--signal=USR2", job], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _preempt_once_and_wait(job: str, ready, running_job) -> tuple[str | None, bool]:
    """Poll ``job`` (an array id or a job id) until it has left the queue; once ``ready()`` holds, send its running
    task SIGUSR2 (``running_job()``: the task's job id, or None while unknown) and release the requeued task at once.
    Returns (the preempted job id or None, whether it was requeued); cancels what is left on the way out."""
    preempted, released, started = None, False, time.time()
    try:
        while True:
            queue = _squeue(job)
            if preempted is None and ready():
                preempted = running_job()
                if preempted is not None:
                    _signal(preempted)
            if preempted and queue.get(preempted, ("", ""))[0] == "PENDING":
                released = True  # requeued
                if queue[preempted][1] == "BeginTime":  # SLURM holds a requeued job ~120 s: start it now,
                    for cmd in (["update", f"JobId={preempted}", "StartTime=now"], ["top", preempted]):
                        subprocess.run(["scontrol", *cmd], check=False, timeout=30, capture_output=True)
            if not queue:
                return preempted, released
            assert time.time() - started < TIMEOUT_S, f"job {job} still queued: {queue}"
            time.sleep(0.25)
    finally:
        if _squeue(job):
            subprocess.run(["scancel", job], check=False, timeout=30)


def _complete_checkpoint(run_dir: Path) -> bool:
    return run_dir.is_dir() and any((p / "vnr-complete.json").exists() for p in run_dir.glob("checkpoint-*"))


def test_smoke_grid_as_a_slurm_array_with_a_preempted_task(cluster, data_root, tmp_path):
    out = tmp_path / "smoke"
    doc = yaml.safe_load(SMOKE.read_text())
    # one run long enough to be preempted after its first checkpoint (epoch 1 = 4 steps of 64)
    doc["finetune"]["overrides"] = [{"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0], "set": {"epochs": 16}}]
    config = tmp_path / "smoke-slurm.yaml"
    config.write_text(yaml.safe_dump(doc))
    exp = load_experiment(config, output=out)
    long_spec = next(s for s in exp.specs if isinstance(s, FinetuneSpec) and s.epochs == 16)
    long_id = long_spec.run_id()
    store = RunStore(out)

    env = {**os.environ, "VNR_DATA_ROOT": str(data_root)}
    vnr = [sys.executable, "-m", "harness"]
    proc = subprocess.run([*vnr, "run", str(config), "--executor", "slurm", "--output", str(out)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=HANG_S, check=False)
    assert proc.returncode == 0, proc.stderr
    array_id = re.search(r"submitted array (\d+) with 14 tasks", proc.stdout).group(1)
    assert f"follow with `vnr status {config} --output {out}`" in proc.stdout  # the same results folder
    manifest = json.loads((out / "submissions" / f"{array_id}.json").read_text())
    assert sorted(manifest["tasks"].values()) == sorted(s.run_id() for s in exp.specs)

    def array_task() -> str | None:
        info = store.running_info(long_id)
        if info and info.get("slurm_array_task_id") is not None:
            return f"{info['slurm_array_job_id']}_{info['slurm_array_task_id']}"
        return None

    preempted_job, released = _preempt_once_and_wait(
        array_id, lambda: _complete_checkpoint(store.checkpoint_dir(long_id)), array_task)

    logs = "\n".join(p.read_text(errors="replace") for p in (out / "logs" / "slurm").glob("*/*_log.*"))
    assert preempted_job is not None, "the long run finished before it could be preempted"
    assert released, "the preempted task was not requeued"

    # every result is there, whole, once
    for spec in exp.specs:
        rec = store.get(spec.run_id())
        assert rec is not None and rec["status"] == "ok", (spec.run_id(), rec and rec.get("error"), logs[-3000:])
        assert rec["environment"]["slurm_array_job_id"] == array_id
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == sorted(f"{s.run_id()}.json" for s in exp.specs)
    assert not list((out / "runs").glob("*.running")) and not list((out / "runs").glob(".*.tmp"))

    # the preempted run was requeued by submitit and resumed from its checkpoint
    rec = store.get(long_id)
    assert rec["resumed_from"], "the requeued run started from scratch"
    assert rec["environment"].get("slurm_restart_count") == "1"
    assert rec["environment"]["slurm_job_id"] == preempted_job  # SLURM_JOB_ID pinned to <array>_<task>
    assert rec["train"]["global_step"] == 64
    task_log = "\n".join(p.read_text(errors="replace") for p in (out / "logs" / "slurm" / preempted_job).glob("*"))
    assert "Requeued job" in task_log and "resuming from the checkpoint" in task_log

    status = subprocess.run([*vnr, "status", str(config), "--output", str(out), "--summary"], capture_output=True,
                            text=True, env=env, cwd=REPO, timeout=HANG_S, check=True)
    assert status.stdout.strip() == "14 runs: 14 done, 0 running, 0 queued, 0 failed, 0 missing"
    again = subprocess.run([*vnr, "run", str(config), "--executor", "slurm", "--output", str(out)],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=HANG_S, check=True)
    assert "nothing to submit: 14 done" in again.stdout

    subprocess.run([*vnr, "collect", str(config), "--output", str(out)], env=env, cwd=REPO, timeout=HANG_S, check=True)
    matrix = pd.read_csv(out / "matrix.csv", index_col="model")
    assert list(matrix.index) == ["tiny:bert", "tiny:gpt2"]
    for model in matrix.index:
        accs = [store.get(s.run_id())["metrics"]["accuracy"] for s in exp.specs
                if isinstance(s, FinetuneSpec) and s.model == model and s.task == "rte"]
        assert math.isclose(matrix.loc[model, "rte_acc"], sum(accs) / 2, rel_tol=1e-9)
    for column in ("stsb_pearson", "rte_energy_kwh", "stsb_duration_h", "crows_anti_stereo_score",
                   "stereoset_intra_icat", "winobias_parity_score"):
        assert matrix[column].notna().all(), column


def test_plain_sbatch_array_template_runs_the_same_entry_point(cluster, data_root, tmp_path):
    """Three bias runs, --runs-per-gpu 2 given to --sbatch-args only: two tasks (specs 0-1, then 2), the choice
    reaching the tasks through the array file in the script's --export."""
    config = tmp_path / "bias.yaml"
    out = tmp_path / "out"
    config.write_text(yaml.safe_dump({
        "name": "template",
        "output": str(out),
        "bias": {"models": ["tiny:bert"], "datasets": ["crows_pairs", "winobias", "stereoset"],
                 "options": {"limit": 5, "precision": "fp32"}},
        # what the CI node can give a task; --sbatch-args passes it (and the setup lines) to sbatch
        "slurm": {"gpus": 0, "mem_gb": 2, "cpus": 1, "time": 10,
                  "setup": [f"echo setup ran > {tmp_path}/setup-ran"]},
    }))
    env = {**os.environ, "VNR_DATA_ROOT": str(data_root)}
    args = subprocess.run([sys.executable, "-m", "harness", "run", str(config), "--sbatch-args", "--runs-per-gpu", "2"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=HANG_S, check=True).stdout.split("\n")
    args = [a for a in args if a]
    assert "--array=0-1%2" in args and f"--output={out.resolve()}/logs/sbatch/%A_%a.out" in args
    assert args[-1].startswith(f"--export=ALL,VNR_SETUP_FILE={out.resolve()}/logs/sbatch/setup.sh,VNR_ARRAY_FILE=")
    proc = subprocess.run(
        ["sbatch", "--wait", *args, str(REPO / "slurm" / "grid-array.sbatch"), str(config)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=TIMEOUT_S, check=False,
    )
    logs = "\n".join(p.read_text(errors="replace") for p in (out / "logs" / "sbatch").glob("*.out"))
    assert proc.returncode == 0, proc.stderr + logs[-3000:]
    assert logs  # the tasks logged under the output dir ...
    assert not list(REPO.glob("slurm-*.out"))  # ... and not in the repository root
    assert (tmp_path / "setup-ran").exists()  # the config's setup: line ran in the task
    array_id = re.search(r"Submitted batch job (\d+)", proc.stdout).group(1)
    store = RunStore(out)
    exp = load_experiment(config)
    for index, spec in enumerate(exp.specs):
        rec = store.get(spec.run_id())
        assert rec is not None and rec["status"] == "ok"
        assert rec["environment"]["slurm_job_id"] == f"{array_id}_{index // 2}"  # pinned for codecarbon


def test_a_fused_group_as_one_array_task_preempted_and_resumed(cluster, data_root, tmp_path):
    """``--executor slurm --fuse 3``: a cell's three seeds are one array task training one stacked model; the task
    is preempted (SIGUSR2) after the group's first checkpoint, requeued, and every run resumes from its own
    checkpoint to an ok record naming the group; a rerun submits nothing."""
    out = tmp_path / "fused"
    config = tmp_path / "fused.yaml"
    config.write_text(yaml.safe_dump({"name": "fused", "output": str(out), "finetune": {
        "models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0, 1, 2],
        "hyperparameters": {"max_train_samples": 16, "max_eval_samples": 8, "batch_size": 4, "epochs": 8},
        "run_options": {"track_efficiency": False}}, "slurm": {"gpus": 0, "cpus": 1, "mem_gb": 2, "time": 10}}))
    exp = load_experiment(config, output=out)
    ids = [s.run_id() for s in exp.specs]
    store = RunStore(out)
    env = {**os.environ, "VNR_DATA_ROOT": str(data_root)}
    vnr = [sys.executable, "-m", "harness"]
    proc = subprocess.run([*vnr, "run", str(config), "--executor", "slurm", "--fuse", "3"], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=HANG_S, check=False)
    assert proc.returncode == 0, proc.stderr
    job = re.search(r"submitted job (\d+) \(one task\)", proc.stdout).group(1)
    manifest = json.loads((out / "submissions" / f"{job}.json").read_text())
    assert manifest["tasks"] == {"0": ids}

    def plain_job() -> str | None:  # one task: submitted as a plain job, not an array
        info = store.running_info(ids[0])
        return str(info["slurm_job_id"]) if info and info.get("slurm_job_id") is not None else None

    preempted, released = _preempt_once_and_wait(
        job, lambda: all(_complete_checkpoint(store.checkpoint_dir(r)) for r in ids), plain_job)
    logs = "\n".join(p.read_text(errors="replace") for p in (out / "logs").rglob("*") if p.is_file())
    assert preempted is not None and released, logs[-3000:]
    groups = set()
    for rid in ids:
        rec = store.get(rid)
        assert rec is not None and rec["status"] == "ok", (rid, rec and rec.get("error"), logs[-3000:])
        assert rec["resumed_from"], "the requeued group started from scratch"
        assert rec["environment"].get("slurm_restart_count") == "1"
        assert rec["train"]["global_step"] == 32
        groups.add(rec["settings"]["fused"]["group"])
    assert len(groups) == 1
    again = subprocess.run([*vnr, "run", str(config), "--executor", "slurm", "--fuse", "3"], capture_output=True,
                           text=True, env=env, cwd=REPO, timeout=HANG_S, check=True)
    assert "nothing to submit: 3 done" in again.stdout
