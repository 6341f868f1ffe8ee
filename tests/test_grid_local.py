"""The local executor and the per-spec guard, under faults: concurrent writers, kills, failures, stale ids.

The run function is injected here (a real function that writes real records
through the real store); the real fine-tuning and bias runs are exercised by
tests/test_grid_smoke.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hang_bound import HANG_S

from harness.grid.config import parse_experiment
from harness.grid.local import (
    BUSY,
    FAILED,
    RAN,
    SKIPPED,
    execute,
    run_spec,
    summary_line,
)
from harness.grid.status import grid_status
from harness.specs import BiasSpec, FinetuneSpec
from harness.store import RunStore

REPO = Path(__file__).resolve().parents[1]


def _grid(**hyper):
    return parse_experiment({
        "name": "t",
        "finetune": {"models": ["tiny:bert", "tiny:gpt2"], "tasks": ["rte", "stsb"], "seeds": [0, 1],
                     "hyperparameters": hyper},
        "bias": {"datasets": ["crows_pairs"], "options": {"limit": 5}},
    })


def record_runner(spec, output, *, data_root=None, progress=True, calls_file=None, **_):
    """A run function with the real contract: stores an ok record through the store's lifecycle, returns it."""
    if calls_file:
        with open(calls_file, "a") as fh:  # O_APPEND: one line per call, even across processes
            fh.write(spec.run_id() + "\n")
    with RunStore(output).run(spec) as run:
        return run.finish({"metrics": dict.fromkeys(spec.metric_keys(), 0.5), "payload": "x" * 20000})


def test_execute_runs_then_skips_finished_runs(tmp_path):
    exp = _grid()
    first = execute(exp.specs, tmp_path, runner=record_runner, progress=False)
    assert [o.status for o in first] == [RAN] * 10
    second = execute(exp.specs, tmp_path, runner=record_runner, progress=False)
    assert [o.status for o in second] == [SKIPPED] * 10
    assert summary_line(second) == "10 runs: 0 ran, 10 skipped (done), 0 failed, 0 busy (running elsewhere)"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(f"{s.run_id()}.json" for s in exp.specs)
    assert all(st.state == "done" for st in grid_status(exp.with_output(tmp_path), use_squeue=False))


def test_failed_run_records_its_error_and_the_next_run_retries_it(tmp_path):
    exp = _grid()
    bad = exp.specs[2].run_id()

    def flaky(spec, output, **kw):
        if spec.run_id() == bad:
            raise RuntimeError("CUDA out of memory (simulated)")
        return record_runner(spec, output, **kw)

    outcomes = execute(exp.specs, tmp_path, runner=flaky, progress=False)
    assert [o.status for o in outcomes].count(FAILED) == 1
    failed = next(o for o in outcomes if o.status == FAILED)
    assert failed.run_id == bad and "CUDA out of memory" in failed.error
    rec = RunStore(tmp_path).get(bad)
    assert rec["status"] == "failed"
    assert rec["error"] == "RuntimeError: CUDA out of memory (simulated)"
    assert "Traceback" in rec["traceback"] and rec["identity"] == exp.specs[2].identity()
    states = {st.run_id: (st.state, st.detail) for st in grid_status(exp.with_output(tmp_path), use_squeue=False)}
    assert states[bad] == ("failed", "RuntimeError: CUDA out of memory (simulated)")
    assert not RunStore(tmp_path).running_path(bad).exists()  # marker cleared after the failure

    retry = execute(exp.specs, tmp_path, runner=record_runner, progress=False)
    assert {o.run_id: o.status for o in retry}[bad] == RAN
    assert [o.status for o in retry].count(SKIPPED) == 9
    assert RunStore(tmp_path).is_done(bad)


def test_a_run_function_that_stores_its_own_failure_keeps_it(tmp_path, monkeypatch):
    """The run function's failure record (with its reason) is the attempt's one record: never overwritten."""
    spec = FinetuneSpec("tiny:bert", "rte", 0)
    writes = []
    real_write = RunStore.write
    monkeypatch.setattr(RunStore, "write", lambda self, rec: writes.append(rec["status"]) or real_write(self, rec))

    def fails_with_record(spec, output, **kw):
        with RunStore(output).run(spec) as run:  # joins the executor's attempt
            run.finish({"history": [{"eval_loss": float("nan")}]}, error="diverged: eval_loss nan")
            raise ValueError("own words")

    outcome = run_spec(spec, tmp_path, runner=fails_with_record)
    assert outcome.status == FAILED and outcome.error == "diverged: eval_loss nan"
    rec = RunStore(tmp_path).get(spec.run_id())
    assert writes == ["failed"]  # written once, by the run function
    assert rec["error"] == "diverged: eval_loss nan" and rec["traceback"] is None
    assert rec["history"] == [{"eval_loss": None}] and rec["nonfinite"] == {"history[0].eval_loss": "nan"}
    with pytest.raises(ValueError):
        run_spec(spec, tmp_path, runner=fails_with_record, raise_errors=True)
    assert writes == ["failed", "failed"]


def test_changed_hyperparameter_makes_new_runs_instead_of_reusing_stale_results(tmp_path):
    old = _grid(learning_rate=2e-5)
    execute(old.specs, tmp_path, runner=record_runner, progress=False)
    new = _grid(learning_rate=3e-5)
    outcomes = execute(new.specs, tmp_path, runner=record_runner, progress=False)
    ft = [o for o, s in zip(outcomes, new.specs) if isinstance(s, FinetuneSpec)]
    assert [o.status for o in ft] == [RAN] * 8  # every fine-tuning run is new ...
    bias = [o for o, s in zip(outcomes, new.specs) if isinstance(s, BiasSpec)]
    assert [o.status for o in bias] == [SKIPPED] * 2  # ... the bias runs did not change
    assert not {s.run_id() for s in old.specs if isinstance(s, FinetuneSpec)} & {o.run_id for o in ft}


def test_a_spec_held_by_another_process_is_left_to_it(tmp_path):
    spec = BiasSpec("tiny:bert", "stereoset", limit=3)
    store = RunStore(tmp_path)
    with store.lock(spec.run_id()) as fd:
        assert fd is not None and store.is_locked(spec.run_id())
        assert run_spec(spec, tmp_path, runner=record_runner).status == BUSY
    assert not store.is_locked(spec.run_id())
    assert run_spec(spec, tmp_path, runner=record_runner).status == RAN


def _worker(specs, output, calls_file, seed):
    order = list(specs)
    random.Random(seed).shuffle(order)
    for spec in order:
        run_spec(spec, output, runner=record_runner, options={"calls_file": calls_file})


def test_many_processes_on_one_store_lose_nothing_and_duplicate_nothing(tmp_path):
    """Eight 'array tasks' race over the same ten specs: every result lands once, whole."""
    exp = _grid()
    calls = tmp_path / "calls.txt"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(exp.specs, tmp_path / "store", str(calls), i)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = calls.read_text().split()
    assert sorted(lines) == sorted(s.run_id() for s in exp.specs)  # each spec ran exactly once
    store = RunStore(tmp_path / "store")
    for spec in exp.specs:
        rec = json.loads(store.result_path(spec.run_id()).read_text())  # whole, parseable
        assert rec["status"] == "ok" and len(rec["payload"]) == 20000
    leftovers = [p.name for p in (tmp_path / "store" / "runs").iterdir() if not p.name.endswith(".json")]
    assert leftovers == []  # no temp files, no running markers


KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from harness.grid.local import run_spec
    from harness.specs import BiasSpec
    from harness.store import RunStore

    out, ready, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    real_fsync = os.fsync

    def stall(fd):  # the record is in the temp file but not yet renamed into place
        ready.write_text("writing")
        time.sleep(120)

    def runner(spec, output, **kw):
        if mode == "mid-run":
            ready.write_text("running")
            time.sleep(120)
        os.fsync = stall
        with RunStore(output).run(spec) as run:
            run.finish({"payload": "y" * 100000})

    run_spec(BiasSpec("tiny:bert", "winobias", limit=7), out, runner=runner)
    """
)


@pytest.mark.parametrize("mode", ["mid-write", "mid-run"])
def test_a_task_killed_mid_write_or_mid_run_leaves_no_result(tmp_path, mode):
    spec = BiasSpec("tiny:bert", "winobias", limit=7)
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(tmp_path), str(ready), mode], cwd=REPO)
    try:
        deadline = time.time() + 60
        while not ready.exists():
            assert proc.poll() is None, "the task ended before it could be killed"
            assert time.time() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    store = RunStore(tmp_path)
    assert not store.result_path(spec.run_id()).exists()
    assert store.get(spec.run_id()) is None and list(store.records()) == []
    assert not store.is_locked(spec.run_id())  # the kernel dropped the dead task's lock
    exp = parse_experiment({"bias": {"models": ["tiny:bert"], "datasets": ["winobias"], "options": {"limit": 7}}})
    [st] = grid_status(exp.with_output(tmp_path), use_squeue=False)
    assert st.state == "missing" and "stale" in st.detail
    # the next run takes it over and finishes it
    assert run_spec(spec, tmp_path, runner=record_runner).status == RAN
    assert store.is_done(spec.run_id())


def test_benchmark_quick_run_agrees():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_grid.py"), "--quick"], capture_output=True,
                          text=True, timeout=HANG_S, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "sanity: both stores end with the same 40 records: yes" in proc.stdout
    ours = next(line for line in proc.stdout.splitlines() if line.strip().startswith("ours"))
    assert ours.split("torn reads")[1].split()[0] == "0"  # atomic writes: never a partial file


def test_isolated_run_that_crashes_fails_only_itself(tmp_path, monkeypatch):
    """--isolate: a run whose process dies (here: SIGKILL, as the OOM killer would) is a failed run."""
    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\nkill -9 $$\n")
    crash.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(crash))
    specs = [BiasSpec("tiny:bert", "crows_pairs", limit=3), BiasSpec("tiny:gpt2", "crows_pairs", limit=3)]
    outcomes = execute(specs, tmp_path / "out", progress=False, isolate=True)
    assert [o.status for o in outcomes] == [FAILED, FAILED]
    assert outcomes[0].error == "RuntimeError: the run process exited with status -9"
    rec = RunStore(tmp_path / "out").get(specs[0].run_id())
    assert rec["status"] == "failed" and rec["error"] == "RuntimeError: the run process exited with status -9"


def test_terminal_shows_one_line_per_finished_run_and_the_details_go_to_its_log(tmp_path, capfd):
    import logging

    specs = [BiasSpec("tiny:bert", "crows_pairs", limit=n) for n in (1, 2)]

    def chatty(spec, output, **kw):
        print(f"trainer says hello from {spec.limit}")
        logging.getLogger("harness.finetune.train").warning("a detail for the log")
        os.write(2, b"C-level noise\n")  # written to the file descriptor, as libraries and C code do
        if spec.limit == 2:
            raise RuntimeError("no GPU left")
        return record_runner(spec, output, **kw)

    outcomes = execute(specs, tmp_path, runner=chatty, progress=False)
    assert [o.status for o in outcomes] == [RAN, FAILED]
    out, err = capfd.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].split()[:2] == ["ok", specs[0].run_id()] and lines[0].endswith(" s")
    assert lines[1].split()[:2] == ["failed", specs[1].run_id()] and lines[1].endswith(": RuntimeError: no GPU left")
    log0 = (tmp_path / "logs" / f"{specs[0].run_id()}.log").read_text()
    assert "trainer says hello from 1" in log0 and "a detail for the log" in log0 and "C-level noise" in log0
    assert "trainer says hello from 2" in (tmp_path / "logs" / f"{specs[1].run_id()}.log").read_text()
    # verbose: the details stay on the terminal, no log file
    again = [BiasSpec("tiny:bert", "crows_pairs", limit=3)]
    execute(again, tmp_path, runner=chatty, progress=False, verbose=True)
    assert "trainer says hello from 3" in capfd.readouterr().out
    assert not (tmp_path / "logs" / f"{again[0].run_id()}.log").exists()


@pytest.mark.parametrize(("text", "why"), [
    ("[]", "its result file is not a JSON object"),
    ("null", "its result file is not a JSON object"),
    ('"ok"', "its result file is not a JSON object"),
    ("", "its result file is empty"),
    ('{"status": "ok", "metr', "its result file is not valid JSON (cut short or edited)"),
    ('{"status": "OK", "metrics": {"accuracy": 0.5}}', "its status is 'OK', not 'ok'"),
])
def test_a_run_json_that_is_no_usable_record_is_failed_with_its_reason_and_redone(tmp_path, text, why):
    exp = _grid().with_output(tmp_path)
    spec = exp.specs[0]
    store = RunStore(tmp_path)
    store.runs_dir.mkdir(parents=True)
    store.result_path(spec.run_id()).write_text(text)
    states = {st.run_id: (st.state, st.detail) for st in grid_status(exp, use_squeue=False)}
    assert states[spec.run_id()] == ("failed", f"unusable record: {why}; `vnr run` redoes it")
    outcomes = execute(exp.specs[:2], tmp_path, runner=record_runner, progress=False, echo=False)
    assert [o.status for o in outcomes] == [RAN, RAN] and store.is_done(spec.run_id())


_BAR_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from harness.grid.local import execute
    from harness.specs import BiasSpec
    from harness.store import RunStore

    def fake(spec, output, **kw):
        with RunStore(output).run(spec) as run:
            return run.finish({"metrics": {"anti_stereo_score": 45.0}})

    specs = [BiasSpec("tiny:bert", "crows_pairs", limit=n) for n in (1, 2, 3)]
    execute(specs, Path(sys.argv[1]), runner=fake, progress=True)
""")


def test_the_grid_bar_draws_on_a_terminal_only(tmp_path):
    """Redirected stderr (a job log, `2> log`) gets the one line per run and no carriage-return frames."""
    import pty

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    log = tmp_path / "stderr.log"
    with log.open("wb") as handle:
        subprocess.run([sys.executable, "-c", _BAR_SCRIPT, str(tmp_path / "a")], stderr=handle, env=env, check=True)
    text = log.read_bytes()
    assert b"\r" not in text and b"grid:" not in text, text
    assert [line.split()[0] for line in text.decode().splitlines()] == ["ok", "ok", "ok"]
    # on a terminal the bar is drawn (its frames end with carriage returns)
    import fcntl
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    try:
        subprocess.run([sys.executable, "-c", _BAR_SCRIPT, str(tmp_path / "b")], stderr=follower, env=env, check=True)
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    assert b"grid:" in drawn and b"\r" in drawn


def test_a_bias_runs_scoring_bar_writes_no_frames_into_redirected_stderr(tmp_path):
    """`vnr bias ... 2> log` (and `vnr run --verbose 2> log`): the scoring bar is drawn on a terminal only."""
    data = os.environ.get("VNR_DATA_ROOT") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
    if not Path(data).is_dir():
        pytest.skip("no data root")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "VNR_DATA_ROOT": data,
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = tmp_path / "stderr.log"
    with log.open("wb") as handle:
        subprocess.run([sys.executable, "-m", "harness.cli", "bias", "--model", "tiny:bert", "--dataset",
                        "crows_pairs", "--limit", "4", "--output", str(tmp_path / "o")], stderr=handle,
                       stdout=subprocess.DEVNULL, env=env, check=True)
    text = log.read_bytes()
    assert b"\r" not in text and b"row/s" not in text, text
