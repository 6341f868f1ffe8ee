"""Several runs side by side (``runs_per_gpu``), isolated children that die with their parent, a full disk.

Real tiny bias runs through the real isolated runner (``python -m harness.grid.entry --spec``).
To kill a run in the middle, the child processes load a ``sitecustomize`` that makes the one run
named in ``$VNR_TEST_SLOW_RUN`` write its pid and sleep instead of working.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.grid.local import FAILED, RAN, SKIPPED, execute, worker_slots
from harness.specs import BiasSpec
from harness.store import RunStore

REPO = Path(__file__).resolve().parents[1]

SITECUSTOMIZE = textwrap.dedent(
    """
    import os, time
    slow = os.environ.get("VNR_TEST_SLOW_RUN")
    if slow:
        import harness.grid.local as local
        real = local.default_runner

        def runner(spec, output, **kw):
            if spec.run_id() == slow:
                target = os.environ["VNR_TEST_PID_FILE"]
                with open(target + ".tmp", "w") as fh:  # whole or absent: never a partial pid
                    fh.write(str(os.getpid()))
                os.replace(target + ".tmp", target)
                time.sleep(120)
            return real(spec, output, **kw)

        local.default_runner = runner
    """
)

SPECS = [BiasSpec("tiny:bert", "crows_pairs", limit=4), BiasSpec("tiny:gpt2", "crows_pairs", limit=4),
         BiasSpec("tiny:gpt2", "winobias", limit=2)]


@pytest.fixture
def slow_children(tmp_path, monkeypatch):
    """Children started from now on load the sitecustomize above."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")]))
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("VNR_TEST_PID_FILE", str(pid_file))
    return pid_file


def _wait_for(path: Path, proc: subprocess.Popen | None = None, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert proc is None or proc.poll() is None, "the executor ended before the run started"
        assert time.time() < deadline, f"{path} did not appear"
        time.sleep(0.05)
    return int(path.read_text())


PF_EXITING = 0x4  # linux/sched.h: set at the start of do_exit, before the process closes its files


def _alive(pid: int) -> bool:
    """Running, not exiting: a process closes its files (and so drops its locks) after it starts to exit and
    before it becomes a zombie, so a zombie check alone races with the lock check."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state, flags = fields[0], int(fields[6])
    return state not in ("Z", "X") and not flags & PF_EXITING


def _metrics(store: RunStore) -> dict[str, dict]:
    return {rec["run_id"]: rec["metrics"] for rec in store.records()}


@pytest.mark.slow  # four processes that each load torch: ~40 s on an idle 2-core machine
def test_runs_side_by_side_match_runs_one_by_one_and_a_killed_one_is_redone_alone(
        tmp_path, data_root, slow_children, monkeypatch):
    one_by_one = execute(SPECS, tmp_path / "n1", data_root=data_root, progress=False, echo=False)
    assert [o.status for o in one_by_one] == [RAN] * 3
    killed = SPECS[1].run_id()
    monkeypatch.setenv("VNR_TEST_SLOW_RUN", killed)

    import threading

    def kill_it() -> None:
        os.kill(_wait_for(slow_children, timeout=180), signal.SIGKILL)

    killer = threading.Thread(target=kill_it)
    killer.start()
    side_by_side = execute(SPECS, tmp_path / "n3", data_root=data_root, progress=False, echo=False,
                           runs_per_gpu=3, gpus=[])
    killer.join()
    assert [o.status for o in side_by_side] == [RAN, FAILED, RAN]
    assert side_by_side[1].error == "RuntimeError: the run process exited with status -9"
    store = RunStore(tmp_path / "n3")
    assert store.get(killed)["status"] == "failed" and not store.is_locked(killed)
    assert (tmp_path / "n3" / "logs" / f"{SPECS[0].run_id()}.log").is_file()  # the run's own output

    monkeypatch.delenv("VNR_TEST_SLOW_RUN")
    again = execute(SPECS, tmp_path / "n3", data_root=data_root, progress=False, echo=False,
                    runs_per_gpu=3, gpus=[])
    assert [o.status for o in again] == [SKIPPED, RAN, SKIPPED]  # only the killed run is redone
    side, single = _metrics(store), _metrics(RunStore(tmp_path / "n1"))
    assert side.keys() == single.keys() == {s.run_id() for s in SPECS}  # nothing lost
    for rid in single:
        assert side[rid] == pytest.approx(single[rid], rel=1e-6, abs=1e-9), rid


PARENT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from harness.grid.local import execute
    from harness.specs import BiasSpec
    execute([BiasSpec("tiny:bert", "crows_pairs", limit=4)], Path(sys.argv[1]), isolate=True, progress=False)
    """
)


def test_an_isolated_child_dies_with_its_parent_and_holds_the_lock_until_gone(tmp_path, slow_children, monkeypatch):
    spec = BiasSpec("tiny:bert", "crows_pairs", limit=4)
    monkeypatch.setenv("VNR_TEST_SLOW_RUN", spec.run_id())
    out = tmp_path / "out"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(out)], cwd=REPO)
    try:
        child = _wait_for(slow_children, parent)
        store = RunStore(out)
        assert store.is_locked(spec.run_id()) and _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        deadline = time.time() + 30
        while _alive(child):  # the child goes (PR_SET_PDEATHSIG); until then the run stays locked
            assert store.is_locked(spec.run_id()), "lock released while the child still runs"
            assert time.time() < deadline, "the child outlived its parent"
            time.sleep(0.02)
    finally:
        if parent.poll() is None:
            parent.kill()
    # A multi-threaded child's leader shows as a zombie while its other threads still exit and hold the
    # lock's file: the lock goes with the last of them, within moments.
    deadline = time.time() + 10
    while store.is_locked(spec.run_id()):
        assert time.time() < deadline, "the lock outlived the child"
        time.sleep(0.02)
    assert store.get(spec.run_id()) is None  # killed: no result, so the next `vnr run` does it (once)


def test_a_full_disk_fails_that_run_not_the_grid(tmp_path, monkeypatch):
    specs = [BiasSpec("tiny:bert", "crows_pairs", limit=n) for n in (1, 2, 3)]
    full = specs[1].run_id()
    real_write = RunStore.write

    def write(self, record):
        if record["run_id"] == full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, record)

    monkeypatch.setattr(RunStore, "write", write)

    def runner(spec, output, **kw):
        with RunStore(output).run(spec) as run:
            return run.finish({"metrics": {"x": 1.0}})

    outcomes = execute(specs, tmp_path, runner=runner, progress=False, echo=False)
    assert [o.status for o in outcomes] == [RAN, FAILED, RAN]
    assert outcomes[1].error == f"OSError: [Errno {errno.ENOSPC}] No space left on device"
    store = RunStore(tmp_path)
    assert store.is_done(specs[0].run_id()) and store.is_done(specs[2].run_id()) and store.get(full) is None
    assert not store.is_locked(full) and not store.running_path(full).exists()


def test_a_pool_of_slots_runs_every_spec_once_and_keeps_the_order(tmp_path):
    """The pool itself (an in-process runner, so no child processes): each spec once, outcomes in order."""
    import threading

    seen: list[tuple[str, str]] = []
    specs = [BiasSpec("tiny:bert", "crows_pairs", limit=n) for n in range(1, 8)]
    together = threading.Barrier(3)  # the first three runs wait for each other: only three slots at once pass it
    lock = threading.Lock()

    def runner(spec, output, **kw):
        with lock:
            seen.append((spec.run_id(), threading.current_thread().name))
            first_three = len(seen) <= 3
        if first_three:
            together.wait(timeout=60)  # BrokenBarrierError (the run fails) unless three run side by side
        with RunStore(output).run(spec) as run:
            return run.finish({"metrics": {"limit": float(spec.limit)}})

    outcomes = execute(specs, tmp_path, runner=runner, progress=False, echo=False, runs_per_gpu=3, gpus=[])
    assert [o.run_id for o in outcomes] == [s.run_id() for s in specs] and {o.status for o in outcomes} == {RAN}
    assert sorted(rid for rid, _ in seen) == sorted(s.run_id() for s in specs)  # each exactly once
    assert len({name for _, name in seen[:3]}) == 3  # three slots worked side by side
    assert {rec["run_id"]: rec["metrics"]["limit"] for rec in RunStore(tmp_path).records()} == {
        s.run_id(): float(s.limit) for s in specs}


def test_worker_slots_export_the_gpu_to_each_child():
    slots = worker_slots(3, ["0", "1"])
    assert len(slots) == 6 and sorted(s["VNR_GPU_SLOT"] for s in slots) == ["0", "0", "0", "1", "1", "1"]
    assert all(s["CUDA_VISIBLE_DEVICES"] == s["VNR_GPU_SLOT"] for s in slots)
    with pytest.raises(Exception, match="runs_per_gpu must be a positive integer"):
        worker_slots(0, [])


def test_plain_sbatch_entry_counts_tasks_of_n_specs(capsys):
    from harness.grid import arrays, entry

    smoke = str(REPO / "configs" / "experiments" / "smoke.yaml")
    assert entry.main([smoke, "--count"]) == 0
    n = int(capsys.readouterr().out)
    assert entry.main([smoke, "--count", "--runs-per-gpu", "4"]) == 0
    assert int(capsys.readouterr().out) == -(-n // 4)
    assert entry.main([smoke, "--index", str(-(-n // 4)), "--runs-per-gpu", "4"]) == 2
    assert "outside the grid" in capsys.readouterr().err
    assert arrays.task_specs(list(range(n)), -(-n // 4) - 1, 4) == list(range(4 * (-(-n // 4) - 1), n))


def test_slurm_submit_makes_tasks_of_n_specs_and_requeues_all_of_them(tmp_path, stand_in_sbatch):
    """sbatch is the external edge: a stand-in on PATH accepts the script; submitit's pickled calls are checked."""
    import json

    import submitit

    from harness.grid import slurm
    from harness.grid.config import load_experiment
    from harness.grid.entry import GridTask

    stand_in_sbatch("4242")
    exp = load_experiment(REPO / "configs" / "experiments" / "smoke.yaml", output=tmp_path / "out")
    specs = exp.specs[:10]
    assert slurm.submit(specs, exp.output, exp.slurm, name="t", runs_per_gpu=4, options=exp.options_for) == "4242"
    assert "#SBATCH --array=0-2" in (tmp_path / "script.sh").read_text()  # ceil(10 / 4) tasks
    manifest = json.loads((tmp_path / "out" / "submissions" / "4242.json").read_text())
    assert manifest["tasks"] == {str(i): [s.run_id() for s in specs[4 * i:4 * i + 4]] for i in range(3)}
    assert sorted(rid for _, rid in slurm.read_manifests(tmp_path / "out")["4242"]) == sorted(s.run_id() for s in specs)
    for i in range(3):
        pickled = tmp_path / "out" / "logs" / "slurm" / f"4242_{i}" / f"4242_{i}_submitted.pkl"
        call = submitit.core.utils.DelayedSubmission.load(pickled)
        group, output, _root, options = call.args
        assert isinstance(call.function, GridTask) and output == str((tmp_path / "out").resolve())
        assert [s.run_id() for s in group] == [s.run_id() for s in specs[4 * i:4 * i + 4]]
        assert options == [exp.options_for(s) for s in group]
        requeued = call.function.checkpoint(*call.args)  # preemption: the same N specs, each resumes
        assert [s.run_id() for s in requeued.args[0]] == [s.run_id() for s in group]
    with pytest.raises(Exception, match="runs_per_gpu must be a positive integer"):
        slurm.submit(specs, exp.output, exp.slurm, name="t", runs_per_gpu=0)


def test_the_same_spec_twice_in_one_pool_runs_once(tmp_path):
    spec = BiasSpec("tiny:bert", "winobias", limit=2)
    calls = []

    def runner(spec, output, **kw):
        calls.append(spec.run_id())
        time.sleep(0.3)
        with RunStore(output).run(spec) as run:
            # a usable record (its set's metrics as numbers): an empty one is not "done" (store.record_problem)
            return run.finish({"metrics": {key: 1.0 for key in spec.metric_keys()}})

    outcomes = execute([spec, spec], tmp_path, runner=runner, progress=False, echo=False, runs_per_gpu=2, gpus=[])
    assert calls == [spec.run_id()]
    assert sorted(o.status for o in outcomes) in (["busy", RAN], [RAN, SKIPPED])
