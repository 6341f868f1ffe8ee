"""`vnr status`: done / running / queued / failed / missing, from the store and squeue's answer."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from harness.grid import status as status_mod
from harness.grid.config import parse_experiment
from harness.grid.slurm import read_manifests, write_manifest
from harness.grid.status import format_table, grid_status, totals, totals_line
from harness.store import RunStore, atomic_write_json


@pytest.fixture
def exp(tmp_path):
    return parse_experiment({
        "finetune": {"models": ["tiny:bert"], "tasks": ["rte", "stsb", "sst2"], "seeds": [0, 1]},
    }).with_output(tmp_path)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_states_from_the_store_and_squeue(exp, monkeypatch):
    store = RunStore(exp.output)
    s = [spec.run_id() for spec in exp.specs]
    store.write({"run_id": s[0], "status": "ok", "wall_time_s": 12.0, "metrics": {"accuracy": 0.5}})
    store.write({"run_id": s[1], "status": "failed", "error": "Traceback ...\nRuntimeError: boom"})
    store.mark_running(s[2])  # this process: alive
    atomic_write_json(store.running_path(s[3]), {"host": socket.gethostname(), "pid": _dead_pid()})
    # s[4]: array task 77_0 pending; s[5]: array task 77_1 gone from the queue, its marker stale
    write_manifest(exp.output, "77", [exp.specs[4], exp.specs[5]])
    atomic_write_json(store.running_path(s[5]), {"host": "node9", "pid": 1, "slurm_array_job_id": "77",
                                                  "slurm_array_task_id": "1"})
    assert read_manifests(exp.output) == {"77": [("0", s[4]), ("1", s[5])]}
    monkeypatch.setattr(status_mod, "squeue_states", lambda user_only=True: {"77_0": "PENDING", "12": "RUNNING"})

    got = grid_status(exp)
    assert [g.state for g in got] == ["done", "failed", "running", "missing", "queued", "missing"]
    assert got[1].detail == "RuntimeError: boom"
    assert got[3].detail == "stale running marker (process gone)"
    assert got[4].detail == "job 77_0 pending"
    assert totals(got) == {"done": 1, "running": 1, "queued": 1, "failed": 1, "missing": 2}
    assert totals_line(got) == "6 runs: 1 done, 1 running, 1 queued, 1 failed, 2 missing"
    table = format_table(got).splitlines()
    assert table[0].split()[:5] == ["STATE", "KIND", "MODEL", "TASK/DATASET", "SEED"]
    assert table[1].split()[:6] == ["done", "finetune", "tiny:bert", "rte", "0", s[0]]

    # the same array task running: a marker with its ids
    monkeypatch.setattr(status_mod, "squeue_states", lambda user_only=True: {"77_1": "RUNNING"})
    assert grid_status(exp)[5].state == "running"
    # without squeue, a marker from another host cannot be checked: trusted as running
    assert grid_status(exp, use_squeue=False)[5].state == "running"


def test_records_collect_cannot_use_are_shown_not_a_traceback(exp, monkeypatch):
    store = RunStore(exp.output)
    s = [spec.run_id() for spec in exp.specs]
    store.result_path(s[0]).parent.mkdir(parents=True, exist_ok=True)
    store.result_path(s[0]).write_text("[]")
    store.write({"run_id": s[1], "status": "ok", "wall_time_s": 3.0, "metrics": {"accuracy": None}})
    store.write({"run_id": s[2], "status": "ok", "wall_time_s": "soon", "metrics": {"pearson": 0.5, "spearman": 0.4}})
    monkeypatch.setattr(status_mod, "squeue_states", lambda user_only=True: None)
    got = grid_status(exp)[:3]
    assert [(g.state, g.detail) for g in got] == [
        ("failed", "unusable record: its result file is not a JSON object; `vnr run` redoes it"),
        ("failed", "unusable record: metrics.accuracy is null; `vnr run` redoes it"),
        ("done", ""),
    ]


@pytest.mark.parametrize(("damage", "why"), [
    ({"metrics": {"acc": 0.5}}, "metrics.accuracy is missing (it holds: acc)"),
    ({"metrics": {"accuracy": 7.5}}, "metrics.accuracy is 7.5, outside its range [0, 1]"),
    ({"seed": 1}, "its seed is 1, not 0 (the run it is stored as)"),
    ({"task": "sst2"}, "its task is 'sst2', not 'rte' (the run it is stored as)"),
    ({"status": "OK"}, "its status is 'OK', not 'ok'"),
])
def test_a_hand_damaged_record_is_judged_alike_by_status_run_and_collect(exp, monkeypatch, damage, why):
    """status shows it failed with the reason, run redoes it, collect refuses it by name: never done."""
    from harness.grid.collect import collect
    from harness.grid.local import RAN, SKIPPED, execute
    from ranking.floor.errors import UserError

    monkeypatch.setattr(status_mod, "squeue_states", lambda user_only=True: None)
    store = RunStore(exp.output)

    def record(spec):
        return {"run_id": spec.run_id(), "kind": "finetune", "model": spec.model, "task": spec.task,
                "seed": spec.seed, "status": "ok", "metrics": dict.fromkeys(spec.metric_keys(), 0.5)}

    for spec in exp.specs:
        store.write(record(spec))
    bad = exp.specs[0]  # rte, seed 0
    store.write({**record(bad), **damage})
    got = {g.run_id: (g.state, g.detail) for g in grid_status(exp)}
    assert got[bad.run_id()] == ("failed", f"unusable record: {why}; `vnr run` redoes it")
    assert totals(grid_status(exp)) == {"done": 5, "running": 0, "queued": 0, "failed": 1, "missing": 0}
    with pytest.raises(UserError) as err:
        collect(exp)
    assert f"1 with an unusable record ({bad.run_id()}: {why}) — records: {exp.output / 'runs'}/<run id>.json" \
        in str(err.value)

    def runner(spec, output, **_):
        with RunStore(output).run(spec) as run:
            return run.finish({"metrics": dict.fromkeys(spec.metric_keys(), 0.5)})

    outcomes = execute(exp.specs, exp.output, runner=runner, progress=False, echo=False)
    assert [o.status for o in outcomes] == [RAN] + [SKIPPED] * 5
    assert grid_status(exp)[0].state == "done" and collect(exp).models == ["tiny:bert"]
