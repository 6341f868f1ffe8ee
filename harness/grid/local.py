"""The local executor: run specs on this machine, one after another or several side by side per GPU.

:func:`run_spec` runs one spec through the store's run lifecycle
(:meth:`harness.store.RunStore.run`: skip when done, per-run lock, running
marker, one ``ok`` or ``failed`` record); SLURM array tasks call it too.
:func:`execute` runs a grid:

* ``runs_per_gpu=1`` and no ``gpus`` (default): in this process, one spec after
  another (``isolate``: each in its own process);
* ``runs_per_gpu=N`` and/or ``gpus=[0, 1]``: one pool of N worker slots per GPU
  (all visible GPUs when ``gpus`` is None; one CPU pool without a GPU); each spec
  runs in its own process (:func:`isolated_runner`) with ``CUDA_VISIBLE_DEVICES``
  set to its GPU and ``VNR_GPU_SLOT=<gpu index>`` (what energy attribution reads
  to know which runs share a GPU).

An isolated child dies with its parent (``PR_SET_PDEATHSIG`` on Linux) and
inherits the run's lock, so the lock is held until the child is gone: killing
``vnr run`` never leaves a run that a second ``vnr run`` would start again.

Terminal output: one progress bar for the grid (on a terminal only: redirected stderr gets no
carriage-return frames) and one line per finished run (``ok``/``failed``/``busy``, run id, seconds) on stderr; a run's own output
(Trainer logs, inner progress bars) goes to ``<output>/logs/<run_id>.log``
unless ``verbose``.

>>> import tempfile
>>> out = Path(tempfile.mkdtemp())
>>> from harness.specs import BiasSpec
>>> spec = BiasSpec("tiny:bert", "crows_pairs", limit=2)
>>> def fake(spec, output, **kw):
...     with RunStore(output).run(spec) as run:
...         return run.finish({"metrics": {"anti_stereo_score": 45.0}})
>>> [o.status for o in execute([spec, spec], out, runner=fake, progress=False, echo=False)]
['ran', 'skipped']
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from harness.kinds import get_kind, kind_of
from harness.store import STATUS_OK, RunFailed, RunStore
from ranking.floor.errors import UserError

log = logging.getLogger("harness.grid")

Spec = Any  # a run spec, of any kind of harness.kinds.KINDS
Runner = Callable[..., dict[str, Any]]

# outcome statuses
RAN, SKIPPED, FAILED, BUSY = "ran", "skipped", "failed", "busy"
GPU_SLOT_ENV = "VNR_GPU_SLOT"


@dataclass(frozen=True)
class Outcome:
    """What happened to one spec in one ``vnr run``."""

    run_id: str
    status: str  # ran | skipped (already done) | failed | busy (another process holds it)
    seconds: float = 0.0
    error: str | None = None


def run_function(spec: Spec) -> Runner:
    """The real run function of ``spec``'s kind (imported here: running needs torch)."""
    return kind_of(spec).run_function()


def default_runner(
    spec: Spec, output: Path, *, data_root: Path | None = None, progress: bool = True, **options: Any
) -> dict[str, Any]:
    """Run ``spec`` with its kind's run function (:mod:`harness.kinds`)."""
    return run_function(spec)(spec, output, data_root=data_root, progress=progress, **options)


# ---------------------------------------------------------------------- one spec in its own process
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGKILL when the parent dies (Linux), and never outlives a dead one."""
    def setup() -> None:
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return setup


def isolated_runner(
    spec: Spec, output: Path, *, data_root: Path | None = None, progress: bool = True,
    child_env: Mapping[str, str] | None = None, log_file: Path | None = None, **options: Any,
) -> dict[str, Any]:
    """Run the spec's run function in a fresh Python process (``python -m harness.grid.entry --spec``).

    Called inside :func:`run_spec` (which holds the run's lock): the child joins
    that attempt and inherits the lock; it dies with this process. A crash that
    takes the child down (segfault, CUDA context lost, the OOM killer) fails only
    this run. ``child_env`` is added to the child's environment (e.g.
    ``CUDA_VISIBLE_DEVICES``); ``log_file`` receives the child's output.
    """
    store = RunStore(output)
    run = store.active(spec.run_id())
    payload = json.dumps({"kind": spec.kind, "fields": asdict(spec), "options": dict(options)})
    cmd = [sys.executable, "-m", "harness.grid.entry", "--spec", payload, "--output", str(output)]
    if data_root is not None:
        cmd += ["--data-root", str(data_root)]
    if progress:
        cmd.append("--progress")
    env = {**os.environ, **dict(child_env or {})}
    pass_fds: tuple[int, ...] = ()
    if run is not None:
        env.update(run.child_env())
        if run.lock_fd is not None:
            pass_fds = (run.lock_fd,)
    with contextlib.ExitStack() as stack:
        sink: TextIO | None = None
        if log_file is not None:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            sink = stack.enter_context(open(log_file, "a"))  # noqa: SIM115
        proc = subprocess.Popen(cmd, env=env, pass_fds=pass_fds, stdout=sink, stderr=subprocess.STDOUT if sink else None,
                                preexec_fn=_die_with_parent(os.getpid()))
        try:
            returncode = proc.wait()
        finally:
            if proc.poll() is None:  # interrupted: the child goes first, then the lock is released
                proc.kill()
                proc.wait()
    if run is not None and run.adopt_stored():
        if run.record.get("status") != STATUS_OK:
            raise RunFailed(str(run.record.get("error") or "failed"))
        return run.record
    if returncode != 0:
        raise RuntimeError(f"the run process exited with status {returncode}")
    record = store.get(spec.run_id())
    if record is None or record.get("status") != STATUS_OK:
        raise RuntimeError("the run process stored no result")
    return record


def spec_from_payload(text: str) -> tuple[Spec, dict[str, Any]]:
    """The spec and run options of :func:`isolated_runner`'s JSON payload."""
    data = json.loads(text)
    cls = get_kind(data["kind"]).spec
    return cls.from_mapping(data["fields"], where="--spec"), dict(data.get("options") or {})


# ---------------------------------------------------------------------- one spec
def run_spec(
    spec: Spec,
    output: str | Path,
    *,
    data_root: Path | None = None,
    runner: Runner | None = None,
    progress: bool = True,
    raise_errors: bool = False,
    options: Mapping[str, Any] | None = None,
) -> Outcome:
    """Run one spec through the store's lifecycle; never raises for a failed run
    unless ``raise_errors`` (SLURM tasks re-raise so the array task shows as failed).

    The runner does the work inside the lifecycle: a real run function joins the
    attempt and stores its record; a runner that only returns an ``ok`` record
    has it stored here; an exception is a ``failed`` record, stored once.
    """
    store = RunStore(output)
    rid = spec.run_id()
    if store.is_done(spec):
        return Outcome(rid, SKIPPED)
    store.ensure_writable()
    started = time.time()
    run = None
    try:
        with store.run(spec) as run:
            if run.state == "done":
                return Outcome(rid, SKIPPED)
            if run.state == "busy":
                return Outcome(rid, BUSY)
            ckpt = store.checkpoint_dir(rid)
            if ckpt.is_dir() and any(ckpt.iterdir()):
                log.info("%s: resuming from the checkpoint in %s", rid, ckpt)
            returned = (runner or default_runner)(
                spec, Path(output), data_root=data_root, progress=progress, **dict(options or {})
            )
            if not run.recorded:
                if not (isinstance(returned, Mapping) and returned.get("status") == STATUS_OK):
                    raise RuntimeError("the run function stored no successful result")
                run.finish(returned)
    except Exception as exc:
        seconds = time.time() - started
        error = f"{type(exc).__name__}: {exc}"
        if run is not None and run.recorded and run.record is not None and run.record.get("error"):
            error = str(run.record["error"])
        log.debug("%s failed after %.1f s: %s", rid, seconds, error)
        if raise_errors:
            raise
        return Outcome(rid, FAILED, seconds, error)
    seconds = time.time() - started
    if run.record is None or run.record.get("status") != STATUS_OK:
        error = str((run.record or {}).get("error") or "the run function stored no successful result")
        if raise_errors:
            raise RunFailed(f"{rid}: {error}")
        return Outcome(rid, FAILED, seconds, error)
    return Outcome(rid, RAN, seconds)


# ---------------------------------------------------------------------- the grid
def visible_gpus() -> list[str]:
    """GPU indices this process may use: ``$CUDA_VISIBLE_DEVICES``, else NVML's count, else none."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library, no driver, no GPU
        return []


def gpu_count() -> int:
    """GPUs on this machine, counted without a CUDA context where NVML answers (the executor's children use
    them), else torch's count; 0 without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library or driver: ask torch (no context either)
        pass
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:
        return 0


def check_gpus(gpus: Sequence[int] | None, where: str) -> None:
    """A config's explicit ``local.gpus`` exist on this machine: a missing index would give its worker a
    ``CUDA_VISIBLE_DEVICES`` without a device, and its runs would train on the CPU without a word. Checked
    when the grid runs, not at ``--dry-run`` (a login node may have no GPU); no list, no check (the
    executor uses what it finds, the CPU without a GPU)."""
    if gpus is None:
        return
    count = gpu_count()
    if count == 0:
        raise UserError(f"{where}: local.gpus: {list(gpus)} but this machine has no GPU: remove local.gpus or run "
                        "on a GPU node")
    absent = [g for g in gpus if int(g) >= count]
    if absent:
        raise UserError(f"{where}: local.gpus: GPU {absent[0]} is not on this machine, which has {count} "
                        f"GPU{'s' if count > 1 else ''} (0 to {count - 1}): list indices below {count}, or leave "
                        "local.gpus out to use every GPU found")


def cpu_cores() -> int:
    """Cores this process may use."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_threads(runs: int) -> int:
    """Threads each of ``runs`` CPU runs side by side gets: the cores shared out, at least one."""
    return max(1, cpu_cores() // max(1, runs))


def worker_slots(runs_per_gpu: int, gpus: Sequence[int | str] | None) -> list[dict[str, str]]:
    """The child environment of each worker slot: N per GPU, taken round-robin over the GPUs
    (one CPU pool of N slots without a GPU, each with ``cores // N`` threads, as the calibration
    measured them: :mod:`harness.grid.calibrate`).

    >>> [slot["VNR_GPU_SLOT"] for slot in worker_slots(2, [0, 1])]
    ['0', '1', '0', '1']
    >>> worker_slots(1, ["3"])
    [{'CUDA_VISIBLE_DEVICES': '3', 'VNR_GPU_SLOT': '3'}]
    """
    if isinstance(runs_per_gpu, bool) or not isinstance(runs_per_gpu, int) or runs_per_gpu < 1:
        raise UserError(f"runs_per_gpu must be a positive integer, not {runs_per_gpu!r}")
    devices = [str(g) for g in (visible_gpus() if gpus is None else gpus)]
    if not devices:
        threads = str(cpu_threads(runs_per_gpu))
        return [{"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads} for _ in range(runs_per_gpu)]
    return [{"CUDA_VISIBLE_DEVICES": g, GPU_SLOT_ENV: g} for _ in range(runs_per_gpu) for g in devices]


@contextlib.contextmanager
def _run_output_to(path: Path | None) -> Iterator[None]:
    """Send this process's output to ``path`` while a run goes on in-process: stdout/stderr at the
    file-descriptor level (libraries that kept a handle on the terminal, C code) and in Python,
    and the root logger's records."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", buffering=1) as fh:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        saved_fds = []
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                saved_fds.append((fd, os.dup(fd)))
                os.dup2(fh.fileno(), fd)
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        saved_handlers = root.handlers[:]
        root.handlers = [handler]
        try:
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
                yield
        finally:
            root.handlers = saved_handlers
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            for fd, copy in saved_fds:
                os.dup2(copy, fd)
                os.close(copy)


def execute(
    specs: Sequence[Spec],
    output: str | Path,
    *,
    data_root: Path | None = None,
    runner: Runner | None = None,
    progress: bool = True,
    options: Callable[[Spec], Mapping[str, Any]] | None = None,
    isolate: bool = False,
    runs_per_gpu: int = 1,
    gpus: Sequence[int | str] | None = None,
    verbose: bool = False,
    echo: bool = True,
    fuse: int = 1,
    capture: str | None = None,
) -> list[Outcome]:
    """The local executor (see the module docstring); outcomes in the order of ``specs``.

    ``fuse`` (K > 1): the runs of a cell that differ only in seed, learning rate or weight decay train K at a
    time as one fused group in
    this process, for a kind that declares a ``fused`` runner (:meth:`harness.kinds.RunKind.run_fused_group`;
    fine-tuning does), each with its own record. ``capture``: what chose to capture the fused groups' whole
    steps (:func:`harness.grid.calibrate.resolve_capture`; None: not captured).

    A failed spec does not stop the grid. ``progress``: the grid's progress bar;
    ``echo``: one line per finished run on stderr; ``verbose``: the runs' own
    output on the terminal instead of ``<output>/logs/<run_id>.log``.
    """
    from tqdm.auto import tqdm

    parallel = runs_per_gpu != 1 or gpus is not None
    slots = worker_slots(runs_per_gpu, gpus) if parallel else [{}]
    if (isolate or parallel) and runner is None:
        runner = isolated_runner
    store = RunStore(output)
    terminal = sys.stderr
    # a bar redraws itself with carriage returns: in a file or pipe (a job log, `2> log`) those frames pile up
    # as noise, so it is drawn on a terminal only; the one line per run is written either way
    bar = tqdm(total=len(specs), desc="grid", unit="run", disable=not (progress and _is_terminal(terminal)),
               file=terminal, leave=True, dynamic_ncols=True)
    lock = threading.Lock()
    outcomes: dict[int, Outcome] = {}

    def report(outcome: Outcome) -> None:
        with lock:
            if echo and outcome.status != SKIPPED:
                word = {RAN: "ok"}.get(outcome.status, outcome.status)
                line = f"{word:6} {outcome.run_id} {outcome.seconds:.1f} s"
                if outcome.error:
                    line += f": {outcome.error.strip().splitlines()[-1][:200] if outcome.error.strip() else ''}"
                bar.write(line, file=terminal)
            bar.update(1)

    def one(index: int, spec: Spec, slot: Mapping[str, str]) -> None:
        rid = spec.run_id()
        if store.is_done(spec):
            outcome = Outcome(rid, SKIPPED)
        else:
            opts = dict(options(spec)) if options else {}
            run_log = None if verbose else store.log_dir() / f"{rid}.log"
            use = runner or default_runner
            if use is isolated_runner:
                opts = {**opts, "child_env": dict(slot), "log_file": run_log}
                redirect = None
            else:
                redirect = None if parallel else run_log  # in-process runs side by side share stdout
            try:
                with _run_output_to(redirect):
                    outcome = run_spec(spec, output, data_root=data_root, runner=use,
                                       progress=progress and verbose, options=opts)
            except OSError as exc:  # e.g. the disk is full even for the failure record: this run only
                outcome = Outcome(rid, FAILED, 0.0, f"{type(exc).__name__}: {exc}")
        outcomes[index] = outcome
        report(outcome)

    items = list(enumerate(specs))
    if fuse > 1:  # the fused groups first, in this process; the runs that stay alone as before
        from harness.kinds import fused_groups, kind_of

        index = {id(s): i for i, s in items}
        groups = fused_groups(specs, fuse)  # each kind groups its own runs, in the order of each group's first run
        items = [(index[id(g[0])], g[0]) for g in groups if len(g) == 1]
        for group in (g for g in groups if len(g) > 1):
            log_file = None if verbose else store.log_dir() / f"{group[0].run_id()}.fused.log"
            with _run_output_to(log_file):
                opts = {**(dict(options(group[0])) if options else {}), **({"capture": capture} if capture else {})}
                results = kind_of(group[0]).run_fused_group(group, output, data_root=data_root, options=opts)
            for spec, (rid, status, seconds, error) in zip(group, results):
                outcomes[index[id(spec)]] = Outcome(rid, status, seconds, error)
                report(outcomes[index[id(spec)]])
    try:
        if not parallel:
            for i, spec in items:
                one(i, spec, slots[0])
        else:
            _run_pool(items, slots, one)
    finally:
        bar.close()
    return [outcomes[i] for i in range(len(specs)) if i in outcomes]


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _run_pool(items: list[tuple[int, Spec]], slots: list[dict[str, str]],
              one: Callable[[int, Spec, Mapping[str, str]], None]) -> None:
    """Each slot is a thread that takes the next spec and runs it (in a child process) until none is left."""
    todo: queue.Queue[tuple[int, Spec]] = queue.Queue()
    for item in items:
        todo.put(item)
    errors: list[BaseException] = []

    def worker(slot: dict[str, str]) -> None:
        while True:
            try:
                index, spec = todo.get_nowait()
            except queue.Empty:
                return
            try:
                one(index, spec, slot)
            except BaseException as exc:  # pragma: no cover - run_spec records run failures itself
                errors.append(exc)
                return

    threads = [threading.Thread(target=worker, args=(slot,), daemon=True) for slot in slots[: max(len(items), 1)]]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.5)
    if errors:
        raise errors[0]


def summary_line(outcomes: Sequence[Outcome]) -> str:
    """``14 runs: 10 ran, 3 skipped (done), 1 failed, 0 busy``."""
    counts = {s: sum(o.status == s for o in outcomes) for s in (RAN, SKIPPED, FAILED, BUSY)}
    return (
        f"{len(outcomes)} runs: {counts[RAN]} ran, {counts[SKIPPED]} skipped (done), "
        f"{counts[FAILED]} failed, {counts[BUSY]} busy (running elsewhere)"
    )
