"""Run store: stable run ids, atomic strict-JSON writes with the umask's mode, the run lifecycle, the frame."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from harness.specs import BiasSpec, FinetuneSpec
from harness.store import (
    LIFECYCLE_FIELDS,
    SCHEMA_VERSION,
    RunStore,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_parquet,
    run_id,
)


def test_run_id_is_stable_and_sensitive_to_every_hyperparameter():
    a = FinetuneSpec("bert-base-uncased", "rte", 0)
    assert a.run_id() == FinetuneSpec("bert-base-uncased", "rte", 0).run_id()
    assert a.run_id().startswith("finetune-bert_base_uncased-rte-s0-")
    changed = {
        FinetuneSpec("bert-base-uncased", "rte", 1).run_id(),
        FinetuneSpec("bert-base-uncased", "rte", 0, learning_rate=3e-5).run_id(),
        FinetuneSpec("bert-base-uncased", "rte", 0, max_steps=10).run_id(),
        FinetuneSpec("bert-base-uncased", "mrpc", 0).run_id(),
    }
    assert a.run_id() not in changed and len(changed) == 4
    # spellings of the same task or model are the same run
    assert FinetuneSpec("deberta-base", "RTE", 0).run_id() == FinetuneSpec("microsoft/deberta-base", "rte", 0).run_id()
    assert BiasSpec("gpt2", "crows_pairs").run_id() != BiasSpec("gpt2", "crows_pairs", limit=10).run_id()
    # key order does not matter
    assert run_id({"kind": "x", "a": 1, "b": 2}) == run_id({"b": 2, "a": 1, "kind": "x"})


def test_done_only_when_ok_with_numeric_metrics(tmp_path):
    store = RunStore(tmp_path)
    rid = "finetune-x-1"
    assert not store.is_done(rid) and store.get(rid) is None
    store.write({"run_id": rid, "status": "failed", "error": "boom"})
    assert not store.is_done(rid) and store.get(rid)["error"] == "boom"
    store.write({"run_id": rid, "status": "ok"})  # ok, but no result in it: not done
    assert not store.is_done(rid) and store.get(rid)["status"] == "ok"
    store.write({"run_id": rid, "status": "ok", "metrics": {"accuracy": 0.5}})
    assert store.is_done(rid)
    assert [r["run_id"] for r in store.records()] == [rid]
    assert not list(store.runs_dir.glob(".*.tmp"))


def _writer(root, i):
    store = RunStore(root)
    for k in range(20):
        store.write({"run_id": f"r{i}-{k}", "status": "ok", "payload": "x" * 10_000})


def test_concurrent_writers_lose_nothing(tmp_path):
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(tmp_path, i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    recs = list(RunStore(tmp_path).records())
    assert len(recs) == 80 and all(len(r["payload"]) == 10_000 for r in recs)


def test_killed_mid_write_leaves_old_file_or_nothing(tmp_path):
    target = tmp_path / "r.json"
    target.write_text(json.dumps({"status": "ok", "v": 1}))
    code = (
        "from harness.store import atomic_write_bytes\n"
        "import os, time\n"
        "orig = os.fsync\n"
        "def slow(fd):\n"
        "    print('writing', flush=True); time.sleep(30); orig(fd)\n"
        "os.fsync = slow\n"
        f"atomic_write_bytes({str(target)!r}, b'{{\"status\": \"ok\", \"v\": 2}}')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"  # the new bytes are written, not yet renamed
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads(target.read_text()) == {"status": "ok", "v": 1}
    time.sleep(0.05)
    atomic_write_bytes(target, b"{}")
    assert target.read_text() == "{}"


# ---------------------------------------------------------------------- files: modes, strict JSON, unusable records
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_result_files_honour_the_umask(tmp_path, umask, mode):
    import pandas as pd

    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "a.bin", b"x")
        RunStore(tmp_path).write({"run_id": "r", "status": "ok"})
        atomic_write_parquet(tmp_path / "f.parquet", pd.DataFrame({"a": [1]}))
    finally:
        os.umask(old)
    for path in (tmp_path / "a.bin", RunStore(tmp_path).result_path("r"), tmp_path / "f.parquet"):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def _strict_loads(text):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_records_are_strict_json_and_name_their_nonfinite_values(tmp_path):
    store = RunStore(tmp_path)
    store.write({"run_id": "r", "status": "ok", "metrics": {"pearson": float("nan"), "acc": 0.5},
                 "history": [{"eval_loss": float("inf")}, {"eval_loss": -math.inf}], "n": np.float32(0.25)})
    rec = _strict_loads(store.result_path("r").read_text())
    assert rec["metrics"] == {"pearson": None, "acc": 0.5}
    assert rec["history"] == [{"eval_loss": None}, {"eval_loss": None}] and rec["n"] == 0.25
    assert rec["nonfinite"] == {"metrics.pearson": "nan", "history[0].eval_loss": "inf",
                                "history[1].eval_loss": "-inf"}
    atomic_write_json(tmp_path / "x.json", {"a": float("nan")})
    assert _strict_loads((tmp_path / "x.json").read_text()) == {"a": None}


@pytest.mark.parametrize("text", ["[]", "3", '"ok"', "null", '{"status": "ok"', ""])
def test_a_record_that_is_not_an_object_is_unusable_and_redone(tmp_path, text):
    spec = BiasSpec("tiny:bert", "crows_pairs", limit=2)
    store = RunStore(tmp_path)
    store.runs_dir.mkdir(parents=True)
    store.result_path(spec.run_id()).write_text(text)
    assert store.get(spec.run_id()) is None and not store.is_done(spec.run_id())
    assert list(store.records()) == [] and len(store.frame()) == 0
    with store.run(spec) as run:
        assert run.state == "run"
        run.finish({"metrics": {"x": 1.0}})
    assert store.is_done(spec.run_id())


RTE0 = FinetuneSpec("tiny:bert", "rte", 0)
STSB0 = FinetuneSpec("tiny:bert", "stsb", 0)
CROWS = BiasSpec("tiny:bert", "crows_pairs", limit=2)


def _own(spec, **fields) -> dict:
    """A usable record of ``spec`` as the lifecycle writes it, with ``fields`` changed by hand."""
    naming = {"task": spec.task, "seed": spec.seed} if spec.kind == "finetune" else {"dataset": spec.dataset}
    return {"run_id": spec.run_id(), "kind": spec.kind, "model": spec.model, **naming, "status": "ok",
            "metrics": dict.fromkeys(spec.metric_keys(), 0.5), **fields}


@pytest.mark.parametrize(("spec", "fields", "epoch", "why"), [
    (RTE0, {}, "final", None),
    (RTE0, {"metrics": {"acc": 0.5}}, "final", "metrics.accuracy is missing (it holds: acc)"),
    (STSB0, {"metrics": {"pearson": 0.5, "loss": 0.1}}, "final", "metrics.spearman is missing (it holds: loss, pearson)"),
    (CROWS, {"metrics": {"metric_score": 55.0}}, "final", "metrics.anti_stereo_score is missing (it holds: metric_score)"),
    (RTE0, {"metrics": {"accuracy": "0.5", "loss": 0.1}}, "final", "metrics.accuracy is '0.5', not a number"),
    (RTE0, {"run_id": "finetune-other"}, "final",
     f"its run_id is 'finetune-other', not '{RTE0.run_id()}' (the run it is stored as)"),
    (RTE0, {"seed": 1}, "final", "its seed is 1, not 0 (the run it is stored as)"),
    (RTE0, {"seed": "0"}, "final", "its seed is '0', not 0 (the run it is stored as)"),
    (RTE0, {"task": "sst2"}, "final", "its task is 'sst2', not 'rte' (the run it is stored as)"),
    (RTE0, {"kind": "bias"}, "final", "its kind is 'bias', not 'finetune' (the run it is stored as)"),
    (RTE0, {"model": "tiny:gpt2"}, "final", "its model is 'tiny:gpt2', not 'tiny:bert' (the run it is stored as)"),
    (CROWS, {"dataset": "stereoset"}, "final", "its dataset is 'stereoset', not 'crows_pairs' (the run it is stored as)"),
    (RTE0, {"metrics": {"accuracy": 7.5}}, "final", "metrics.accuracy is 7.5, outside its range [0, 1]"),
    (RTE0, {"metrics": {"accuracy": -0.01}}, "final", "metrics.accuracy is -0.01, outside its range [0, 1]"),
    (STSB0, {"metrics": {"pearson": -1.5, "spearman": 0.2}}, "final", "metrics.pearson is -1.5, outside its range [-1, 1]"),
    (STSB0, {"metrics": {"pearson": -1.0, "spearman": 1.0}}, "final", None),  # the ends are in range
    (CROWS, {"metrics": {"anti_stereo_score": 140.0}}, "final", "metrics.anti_stereo_score is 140.0, outside its range [0, 100]"),
    (RTE0, {"metrics_best": {"accuracy": 1.5}}, "best", "metrics_best.accuracy is 1.5, outside its range [0, 1]"),
    (RTE0, {"metrics_best": {"accuracy": 1.5}}, "final", None),  # the final epoch's metrics are fine
    (RTE0, {"status": "OK"}, "final", "its status is 'OK', not 'ok'"),
])
def test_a_record_that_cannot_be_trusted_is_not_done(tmp_path, spec, fields, epoch, why):
    """One predicate for every "done?": a record edited by hand (metrics renamed or out of range, fields naming
    another run) is not done, with the reason; the lifecycle then runs it again."""
    from harness.store import record_problem

    rec = _own(spec, **fields)
    assert record_problem(rec, spec, epoch) == why
    store = RunStore(tmp_path)
    store.write(rec)
    assert store.is_done(spec) is (why is None or epoch == "best")
    with store.run(spec) as run:
        assert run.state == ("done" if store.is_done(spec) else "run")


def test_every_metric_a_run_must_hold_has_a_known_range():
    """record_problem checks the range of each task's and bias set's own metrics: adding one means stating it."""
    from harness.bias.data import REGISTRY
    from harness.finetune.tasks import TASKS
    from harness.store import METRIC_RANGES

    keys = {c.record_key for task in TASKS.values() for c in task.criteria}
    keys |= {f.metric for record in REGISTRY.values() for f in record.fairness}
    assert keys - set(METRIC_RANGES) == set()


def test_a_failed_run_keeps_a_short_reason_and_its_whole_traceback_in_its_log(tmp_path):
    from harness.store import failure_of

    store = RunStore(tmp_path)
    message = "[enforce fail at alloc_cpu.cpp:127] can't allocate memory:\n  you tried to allocate " + "4" * 400
    with pytest.raises(RuntimeError) as caught, store.run(RTE0):
        raise RuntimeError(message)
    rec = store.get(RTE0.run_id())
    assert rec["status"] == "failed" and "\n" not in rec["error"] and len(rec["error"]) == 300
    assert rec["error"].startswith("RuntimeError: [enforce fail at alloc_cpu.cpp:127] can't allocate memory: you "
                                   "tried to allocate 444") and rec["error"].endswith("4…")
    log = (tmp_path / "logs" / f"{RTE0.run_id()}.log").read_text()
    assert "Traceback (most recent call last)" in log and message in log  # the whole message, not cut
    assert failure_of(caught.value) == (f"run {RTE0.run_id()} failed: {rec['error']} (record: "
                                        f"{store.result_path(RTE0.run_id())}; traceback: "
                                        f"{tmp_path / 'logs' / (RTE0.run_id() + '.log')})")
    assert failure_of(RuntimeError("not a run's")) is None


# ---------------------------------------------------------------------- the lifecycle
def test_one_record_schema_for_every_kind(tmp_path):
    store = RunStore(tmp_path)
    specs = [FinetuneSpec("tiny:bert", "rte", 3), BiasSpec("tiny:gpt2", "winobias", limit=4)]
    for spec in specs:
        with store.run(spec) as run:
            assert run.state == "run" and store.running_path(spec.run_id()).exists()
            assert store.is_locked(spec.run_id())
            run.finish({"metrics": dict.fromkeys(spec.metric_keys(), 1.0)})
        assert not store.running_path(spec.run_id()).exists() and not store.is_locked(spec.run_id())
    ft, bias = (store.get(s.run_id()) for s in specs)
    for rec, spec in ((ft, specs[0]), (bias, specs[1])):
        assert set(LIFECYCLE_FIELDS) <= set(rec)
        assert (rec["status"], rec["error"], rec["traceback"], rec["kind"]) == ("ok", None, None, spec.kind)
        assert rec["identity"] == spec.identity() and rec["schema"] == SCHEMA_VERSION
        assert rec["started_at"] <= rec["finished_at"] and rec["wall_time_s"] >= 0
        assert rec["environment"]["host"]
    assert (ft["task"], ft["seed"], bias["dataset"]) == ("rte", 3, "winobias")
    # done: the next attempt is told so and gets the stored record
    with store.run(specs[0]) as run:
        assert run.state == "done" and run.record == ft


def test_an_exception_is_recorded_once_and_propagates(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    spec = FinetuneSpec("tiny:bert", "rte", 0)
    writes = []
    real_write = RunStore.write
    monkeypatch.setattr(RunStore, "write", lambda self, rec: writes.append(rec["error"]) or real_write(self, rec))
    with pytest.raises(RuntimeError, match="boom"), store.run(spec) as outer:
        with store.run(spec) as inner:  # nested in the same process: the same attempt
            assert inner is outer
            raise RuntimeError("boom")
    assert writes == ["RuntimeError: boom"]
    rec = store.get(spec.run_id())
    assert rec["status"] == "failed" and "Traceback" in rec["traceback"] and rec["attempt"] == outer.attempt
    assert not store.is_locked(spec.run_id()) and not store.running_path(spec.run_id()).exists()


def test_busy_when_another_process_holds_the_lock(tmp_path):
    store = RunStore(tmp_path)
    spec = BiasSpec("tiny:bert", "stereoset", limit=3)
    code = ("import sys, time\nfrom harness.store import RunStore\n"
            f"with RunStore({str(tmp_path)!r}).lock({spec.run_id()!r}):\n"
            "    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with store.run(spec) as run:
            assert run.state == "busy"
        assert store.get(spec.run_id()) is None
    finally:
        proc.kill()
        proc.wait()
    with store.run(spec) as run:
        assert run.state == "run"


def test_frame_has_one_row_per_run_and_flat_columns(tmp_path):
    store = RunStore(tmp_path)
    store.write({"run_id": "a", "status": "ok", "metrics": {"accuracy": 0.75}, "efficiency": {"energy_kwh": 0.5},
                 "history": [{"epoch": 1.0}]})
    store.write({"run_id": "b", "status": "failed", "error": "x", "metrics": {}})
    frame = store.frame()
    assert list(frame["run_id"]) == ["a", "b"] and list(frame.index) == ["a", "b"]
    assert frame.loc["a", "metrics.accuracy"] == 0.75 and frame.loc["a", "efficiency.energy_kwh"] == 0.5
    assert math.isnan(frame.loc["b", "metrics.accuracy"]) and frame.loc["b", "error"] == "x"
    assert frame.loc["a", "history"] == [{"epoch": 1.0}]


@pytest.mark.parametrize("module", ["harness.store", "harness.grid.local", "harness.grid.entry", "harness.environment",
                                    "harness.grid.calibrate"])
def test_lifecycle_modules_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
