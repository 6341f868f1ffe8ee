"""Run specs safely, one after another (the local executor), and the per-spec guard SLURM tasks share.

:func:`run_spec` is the only way the grid runs a spec:

1. a finished result (``status: ok``) is returned as is: re-running a grid never redoes work;
2. an exclusive lock (``<output>/locks/<run_id>.lock``, ``flock``) keeps two
   processes from running the same spec at once; the kernel drops it when its
   holder dies, so a killed task never leaves the spec blocked;
3. a running marker (``runs/<run_id>.running``) tells ``vnr status`` who works on it;
4. the run function writes the result atomically (a killed task leaves none);
   if it raises, a ``failed`` record with the error is stored (unless the run
   function stored one itself) and the next ``vnr run`` retries the spec.

>>> import tempfile
>>> out = Path(tempfile.mkdtemp())
>>> spec = BiasSpec("tiny:bert", "crows_pairs", limit=2)
>>> def fake(spec, output, **kw):
...     rec = {"run_id": spec.run_id(), "kind": "bias", "status": "ok", "metrics": {}}
...     RunStore(output).write(rec)
...     return rec
>>> [o.status for o in execute([spec, spec], out, runner=fake, progress=False)]
['ran', 'skipped']
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import inspect
import json
import logging
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.specs import BiasSpec, FinetuneSpec
from harness.store import STATUS_FAILED, STATUS_OK, RunStore
from ranking.errors import UserError

log = logging.getLogger("harness.grid")

Spec = FinetuneSpec | BiasSpec
Runner = Callable[..., dict[str, Any]]

# outcome statuses
RAN, SKIPPED, FAILED, BUSY = "ran", "skipped", "failed", "busy"


@dataclass(frozen=True)
class Outcome:
    """What happened to one spec in one ``vnr run``."""

    run_id: str
    status: str  # ran | skipped (already done) | failed | busy (another process holds it)
    seconds: float = 0.0
    error: str | None = None


def run_function(spec: Spec) -> Runner:
    """The real run function of ``spec`` (imported here: running needs torch)."""
    if isinstance(spec, FinetuneSpec):
        from harness.finetune import run_finetune

        return run_finetune
    if isinstance(spec, BiasSpec):
        from harness.bias import run_bias

        return run_bias
    raise TypeError(f"not a run spec: {spec!r}")


def default_runner(
    spec: Spec, output: Path, *, data_root: Path | None = None, progress: bool = True, **options: Any
) -> dict[str, Any]:
    """Dispatch to :func:`harness.finetune.run_finetune` or :func:`harness.bias.run_bias`."""
    return run_function(spec)(spec, output, data_root=data_root, progress=progress, **options)


def isolated_runner(
    spec: Spec, output: Path, *, data_root: Path | None = None, progress: bool = True, **options: Any
) -> dict[str, Any]:
    """Run the spec's run function in a fresh Python process (``python -m harness.grid.entry --spec``).

    A crash that takes the process down (segfault, CUDA context lost, the OOM
    killer) then fails only this run; the grid goes on. The caller
    (:func:`run_spec`) holds the lock and the running marker.
    """
    payload = json.dumps({"kind": spec.kind, "fields": asdict(spec), "options": dict(options)})
    cmd = [sys.executable, "-m", "harness.grid.entry", "--spec", payload, "--output", str(output)]
    if data_root is not None:
        cmd += ["--data-root", str(data_root)]
    if progress:
        cmd.append("--progress")
    proc = subprocess.run(cmd, check=False)
    record = RunStore(output).get(spec.run_id())
    if proc.returncode != 0:
        error = (record or {}).get("error") if (record or {}).get("status") == STATUS_FAILED else None
        raise RuntimeError(error or f"the run process exited with status {proc.returncode}")
    if record is None:
        raise RuntimeError("the run process stored no result")
    return record


def spec_from_payload(text: str) -> tuple[Spec, dict[str, Any]]:
    """The spec and run options of :func:`isolated_runner`'s JSON payload."""
    data = json.loads(text)
    cls = {"finetune": FinetuneSpec, "bias": BiasSpec}[data["kind"]]
    return cls.from_mapping(data["fields"], where="--spec"), dict(data.get("options") or {})


def check_run_options(kind: str, options: Mapping[str, Any], where: str = "run_options") -> None:
    """Refuse keyword options the run function of ``kind`` does not take (checked before anything runs)."""
    if not options:
        return
    module, name = ("harness.finetune", "run_finetune") if kind == "finetune" else ("harness.bias", "run_bias")
    try:
        func = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return  # the run function is not installed here (e.g. a login node without torch)
    params = inspect.signature(func).parameters
    reserved = {"spec", "output", "data_root", "progress"}
    allowed = [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY and p not in reserved]
    for key in options:
        if key not in allowed:
            raise UserError(f"{where}: {name} has no option {key!r} (options: {', '.join(allowed)})")


_LOCK_TRIES = 5


def lock_path(store: RunStore, rid: str) -> Path:
    return store.root / "locks" / f"{rid}.lock"


@contextlib.contextmanager
def spec_lock(store: RunStore, rid: str) -> Iterator[bool]:
    """Hold the spec's exclusive lock; yields False (without waiting) if another process holds it."""
    import fcntl

    path = lock_path(store, rid)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for attempt in range(_LOCK_TRIES):  # a few tries: a `vnr status` probe holds it for microseconds
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if attempt == _LOCK_TRIES - 1:
                    yield False
                    return
                time.sleep(0.1)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def is_locked(store: RunStore, rid: str) -> bool:
    """True while some process holds the spec's lock (i.e. is running it)."""
    import fcntl

    path = lock_path(store, rid)
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def failure_record(spec: Spec, exc: BaseException) -> dict[str, Any]:
    """The record stored when a run raised before storing its own failure."""
    from harness.environment import environment_info

    target = {"task": spec.task, "seed": spec.seed} if isinstance(spec, FinetuneSpec) else {"dataset": spec.dataset}
    return {
        "run_id": spec.run_id(),
        "kind": spec.kind,
        "model": spec.model,
        **target,
        "identity": spec.identity(),
        "status": STATUS_FAILED,
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:],
        "environment": environment_info(),
        "finished": time.time(),
    }


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
    """Run one spec under the guarantees in the module docstring; never raises for a failed run
    unless ``raise_errors`` (SLURM tasks re-raise so the array task shows as failed)."""
    store = RunStore(output)
    rid = spec.run_id()
    if store.is_done(rid):
        return Outcome(rid, SKIPPED)
    store.ensure_writable()
    with spec_lock(store, rid) as acquired:
        if not acquired:
            return Outcome(rid, BUSY)
        if store.is_done(rid):  # finished by another process while we waited for the lock
            return Outcome(rid, SKIPPED)
        ckpt = store.checkpoint_dir(rid)
        if ckpt.is_dir() and any(ckpt.iterdir()):
            log.info("%s: resuming from the checkpoint in %s", rid, ckpt)
        store.mark_running(rid)
        started = time.time()
        try:
            record = (runner or default_runner)(
                spec, Path(output), data_root=data_root, progress=progress, **dict(options or {})
            )
        except Exception as exc:
            seconds = time.time() - started
            stored = store.get(rid)
            path = store.result_path(rid)
            if stored is None or stored.get("status") != STATUS_FAILED or path.stat().st_mtime < started - 1:
                store.write(failure_record(spec, exc))
            log.error("%s failed after %.1f s: %s: %s", rid, seconds, type(exc).__name__, exc)
            if raise_errors:
                raise
            return Outcome(rid, FAILED, seconds, f"{type(exc).__name__}: {exc}")
        finally:
            store.clear_running(rid)
        seconds = time.time() - started
        if isinstance(record, dict) and record.get("status") == STATUS_OK and not store.is_done(rid):
            store.write(record)  # a runner that returned its record without storing it
        if not store.is_done(rid):
            stored = store.get(rid) or {}
            error = str(stored.get("error") or "the run function stored no successful result")
            if raise_errors:
                raise RuntimeError(f"{rid}: {error}")
            return Outcome(rid, FAILED, seconds, error)
        return Outcome(rid, RAN, seconds)


def execute(
    specs: Sequence[Spec],
    output: str | Path,
    *,
    data_root: Path | None = None,
    runner: Runner | None = None,
    progress: bool = True,
    options: Callable[[Spec], Mapping[str, Any]] | None = None,
    isolate: bool = False,
) -> list[Outcome]:
    """The local executor: every spec in turn, with a progress bar over the grid.

    A failed spec does not stop the grid; the outcomes say what happened.
    ``isolate`` runs each spec in its own Python process (:func:`isolated_runner`).
    """
    if isolate and runner is None:
        runner = isolated_runner
    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    store = RunStore(output)
    outcomes: list[Outcome] = []
    bar = tqdm(total=len(specs), desc="grid", unit="run", disable=not progress, position=0, leave=True)
    with logging_redirect_tqdm(loggers=[logging.getLogger()]):
        for spec in specs:
            rid = spec.run_id()
            bar.set_postfix_str(rid[:60], refresh=True)
            if store.is_done(rid):
                log.info("skip   %s (done)", rid)
                outcome = Outcome(rid, SKIPPED)
            else:
                log.info("run    %s", rid)
                outcome = run_spec(
                    spec, output, data_root=data_root, runner=runner, progress=progress,
                    options=options(spec) if options else None,
                )
                if outcome.status == RAN:
                    log.info("done   %s in %.1f s", rid, outcome.seconds)
                elif outcome.status == BUSY:
                    log.warning("busy   %s: another process is running it; left to that process", rid)
                elif outcome.status == SKIPPED:
                    log.info("skip   %s (finished meanwhile by another process)", rid)
            outcomes.append(outcome)
            bar.update(1)
    bar.close()
    return outcomes


def summary_line(outcomes: Sequence[Outcome]) -> str:
    """``14 runs: 10 ran, 3 skipped (done), 1 failed, 0 busy``."""
    counts = {s: sum(o.status == s for o in outcomes) for s in (RAN, SKIPPED, FAILED, BUSY)}
    return (
        f"{len(outcomes)} runs: {counts[RAN]} ran, {counts[SKIPPED]} skipped (done), "
        f"{counts[FAILED]} failed, {counts[BUSY]} busy (running elsewhere)"
    )
