"""The run store and the one run lifecycle: ``<output>/runs/<run_id>.json``, one record per run.

What it holds, and nothing else:

* **Run ids.** :func:`run_id` hashes (SHA-256 over canonical JSON) everything
  that changes the result, so a re-submitted grid skips finished work and a
  changed hyper-parameter gets a new id instead of a stale result.
* **Atomic, strict-JSON files.** :func:`atomic_write_bytes`, :func:`atomic_write_json` and
  :func:`atomic_write_parquet` go through the floor's one atomic writer
  (:func:`ranking.floor.paths.write_atomic`): a temporary file in the same directory, given the
  mode the umask allows (``0o666 & ~umask``, as ``open()`` would), fsynced and renamed over the
  final name: a reader sees the old file or the whole new one. JSON is strict
  (``allow_nan=False``): a non-finite float is stored as ``null`` and a run
  record names it under ``nonfinite`` (path → ``"nan"``/``"inf"``/``"-inf"``).
* **The run lifecycle** (:meth:`RunStore.run`), the only code that writes run
  records: skip when done (a usable finished record) → per-run ``flock`` lock (``<output>/locks/<run_id>.lock``;
  the kernel drops it when its holder dies) → running marker → exactly one
  record per attempt, ``ok`` or ``failed``, with one schema for every run kind
  (:data:`LIFECYCLE_FIELDS`: identity, timings, status, error, traceback,
  environment, attempt). Nested use in one process (the executor around
  ``run_finetune``) and in a child process (``vnr run --isolate``, which
  inherits the lock) joins the same attempt, so a failure is recorded once.
* **Reading.** :meth:`RunStore.get` (a file that is not a JSON object counts as
  absent, so the run is redone), :meth:`RunStore.records`, and
  :meth:`RunStore.frame` (pandas, one row per run, flat columns).
* **Done.** :func:`record_problem` is the one answer to "is this run done?": a record
  with ``status: ok`` and numeric, finite metrics (:meth:`RunStore.done_record`). The
  lifecycle skips exactly those, ``vnr status`` shows them as done and ``vnr collect``
  reads them; any other record is redone by the next run.

Example: ``run_id({"kind": "finetune", "model": "bert-base-uncased", "task": "rte", "seed": 0})``
is ``finetune-bert_base_uncased-rte-s0-<12 hex digits>``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import math
import os
import re
import shutil
import socket
import sys
import threading
import time
import traceback as traceback_module
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ranking.floor import paths as floor_paths
from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, parse_json, read_json, read_json_object

STATUS_OK = "ok"
STATUS_FAILED = "failed"
SCHEMA_VERSION = 2
# What RunStore.run puts in every record, whatever the kind of run.
LIFECYCLE_FIELDS = ("schema", "run_id", "kind", "model", "identity", "status", "error", "traceback", "attempt",
                    "started_at", "finished_at", "wall_time_s", "environment")
_NAMING = ("model", "task", "seed", "dataset")  # identity keys copied to the top of a record
ATTEMPT_ENV = "VNR_RUN_ATTEMPT"  # set by the isolated runner for its child: the attempt it joins
_LOCK_TRIES = 5
_MARKER_MAX_BYTES = 1 << 20  # a running marker is a few hundred bytes: a bigger file is not one


class RunNotStarted(UserError):
    """Bad input found before a run did any work (e.g. a model that cannot be loaded).

    The lifecycle records nothing for it: the run stays missing, with no failed
    record, and the user gets one line saying what to fix.
    """


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def run_id(identity: Mapping[str, Any]) -> str:
    """A stable, readable id: ``<kind>-<model>-<task|dataset>-s<seed>-<hash>``.

    The hash covers every key of ``identity`` (canonical JSON, sorted keys), so
    any change to a hyper-parameter or code-relevant option changes the id.
    The readable prefix is only for people; uniqueness comes from the hash.
    """
    digest = hashlib.sha256(_canonical(identity).encode()).hexdigest()[:12]
    parts = [str(identity.get("kind", "run"))]
    for key in ("model", "task", "dataset"):
        if identity.get(key) is not None:
            parts.append(str(identity[key]))
    if identity.get("seed") is not None:
        parts.append(f"s{identity['seed']}")
    slug = "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", p).strip("_") or "x" for p in parts)
    return f"{slug}-{digest}"


# ---------------------------------------------------------------------- atomic, strict files
def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, creating missing folders: the floor's one writer
    (:func:`ranking.floor.paths.write_atomic`: temporary file, umask mode, fsync, rename, fsync of the folder)."""
    floor_paths.write_atomic(path, lambda tmp: tmp.write_bytes(data), parents=True)


def strict_json(obj: Any, found: dict[str, str] | None = None, where: str = "") -> Any:
    """``obj`` with every non-finite float replaced by None (its path and value noted in ``found``).

    >>> found = {}
    >>> strict_json({"a": [1.0, float("nan")], "b": {"c": float("-inf")}}, found)
    {'a': [1.0, None], 'b': {'c': None}}
    >>> found
    {'a[1]': 'nan', 'b.c': '-inf'}
    """
    obj = _plain(obj)
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        if found is not None:
            found[where or "."] = "nan" if obj != obj else ("inf" if obj > 0 else "-inf")
        return None
    if isinstance(obj, Mapping):
        return {str(k): strict_json(v, found, f"{where}.{k}" if where else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v, found, f"{where}[{i}]") for i, v in enumerate(obj)]
    return obj


def _plain(obj: Any) -> Any:
    """numpy scalars/arrays and paths as plain Python values (numpy only when it is already imported)."""
    if isinstance(obj, Path):
        return str(obj)
    if type(obj).__module__ == "numpy":
        return obj.tolist() if hasattr(obj, "tolist") else obj.item()
    return obj


def dumps_strict(obj: Any) -> str:
    """Standard JSON (``allow_nan=False``): non-finite floats become ``null``."""
    return json.dumps(strict_json(obj), indent=2, allow_nan=False, default=_json_default)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_bytes(path, (dumps_strict(obj) + "\n").encode())


def atomic_write_parquet(path: str | Path, frame: Any) -> None:
    """Write a DataFrame as parquet, atomically (:func:`ranking.floor.paths.write_atomic`)."""
    floor_paths.write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False), parents=True)


def _json_default(obj: Any) -> Any:
    plain = _plain(obj)
    if plain is not obj:
        return plain
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def iso_time(t: float) -> str:
    """``2026-11-23T01:02:03+00:00`` (UTC, seconds)."""
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------- usable finished records
def _finite_number(value: Any) -> bool:
    """A finite int or float (bools, strings and null are not numbers)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _nonfinite(value: Any) -> bool:
    """A non-finite float, or its spelling as a string (a record edited by hand)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, str) and value.strip().lower() in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity")


#: The range of each metric a run's spec names (``spec.metric_keys()``), where it is certain from the
#: definition: GLUE accuracy and F1 are shares in [0, 1]; Matthews, Pearson and Spearman correlations lie
#: in [-1, 1]; the bias sets' fairness metrics are percentages or ICAT, in [0, 100]. A value outside it
#: cannot have come from a run (a record edited by hand, or a bug): the record is not usable.
#: tests/test_store.py checks that every task's and bias set's metric has an entry.
METRIC_RANGES: dict[str, tuple[float, float]] = {
    **dict.fromkeys(("accuracy", "accuracy_mm", "f1"), (0.0, 1.0)),
    **dict.fromkeys(("matthews_correlation", "pearson", "spearman"), (-1.0, 1.0)),
    **dict.fromkeys(("anti_stereo_score", "intrasentence_icat", "intersentence_icat", "parity_score"), (0.0, 100.0)),
}
_RANGE_SLACK = 1e-9  # rounding in a library's correlation may land a hair outside [-1, 1]
#: the fields a record names its run by, and the spec attribute each must equal
_OWN_FIELDS = (("run_id", None), ("kind", "kind"), ("model", "model"), ("task", "task"), ("dataset", "dataset"),
               ("seed", "seed"))


def _same(stored: Any, expected: Any) -> bool:
    """Equal and of the same type (a seed stored as ``true`` or ``"0"`` is not seed 0)."""
    return type(stored) is type(expected) and stored == expected


def record_problem(rec: Any, spec: Any = None, epoch: str = "final", run_id: str | None = None) -> str | None:
    """Why ``rec`` is not a usable finished result (of ``spec``, or of the run ``run_id``), or None when it is one.

    Usable: a JSON object with ``status: ok`` that names the run it is stored as (its ``run_id``, ``kind``,
    ``model``, ``task``/``dataset`` and ``seed``, where it has them, equal the spec's), whose metrics
    (``metrics_best`` for ``epoch="best"``, where the record has them) hold at least one finite number,
    none of them non-finite, every one of the spec's own metrics (``spec.metric_keys()``) a number within
    its range (:data:`METRIC_RANGES`), and whose ``efficiency`` (if any) has no non-finite value and a
    positive integer ``packing``. Every "is this run done?" (the lifecycle's skip, ``vnr status``,
    ``vnr collect``) asks this one function.

    >>> record_problem({"status": "ok", "metrics": {"accuracy": 0.5}}) is None
    True
    >>> record_problem([]), record_problem({"status": "failed"}), record_problem({"status": "ok", "metrics": {}})
    ('the record is not a JSON object', "its status is 'failed', not 'ok'", 'no numeric metrics')
    >>> record_problem({"status": "ok", "metrics": {"accuracy": "0.9"}})
    'no numeric metrics'
    >>> record_problem({"status": "ok", "metrics": {"accuracy": float("nan")}})
    'metrics.accuracy is nan'
    >>> record_problem({"run_id": "b", "status": "ok", "metrics": {"accuracy": 0.5}}, run_id="a")
    "its run_id is 'b', not 'a' (the run it is stored as)"
    """
    if not isinstance(rec, dict):
        return "the record is not a JSON object"
    if rec.get("status") != STATUS_OK:
        return f"its status is {rec.get('status')!r}, not {STATUS_OK!r}"
    for key, attr in _OWN_FIELDS:
        if key not in rec:
            continue
        if attr is None:  # the run id the caller looked it up by, else the spec's
            expected = run_id if run_id is not None or spec is None else spec.run_id()
        else:
            expected = getattr(spec, attr, None)
        if expected is not None and not _same(rec[key], expected):
            return f"its {key} is {rec[key]!r}, not {expected!r} (the run it is stored as)"
    settings = _settings_problem(rec, spec, run_id)
    if settings:
        return settings
    name = "metrics_best" if epoch == "best" and rec.get("metrics_best") else "metrics"
    metrics = rec.get(name)
    if not isinstance(metrics, dict):
        return "no numeric metrics"
    for key, value in metrics.items():
        if _nonfinite(value):
            return f"{name}.{key} is {value}"
    keys = spec.metric_keys() if hasattr(spec, "metric_keys") else ()
    for key in keys:
        if key in metrics and metrics[key] is None:
            return f"{name}.{key} is null"
    if not any(_finite_number(v) for v in metrics.values()):
        return "no numeric metrics"
    for key in keys:
        value = metrics.get(key)
        if key not in metrics:
            held = ", ".join(sorted(metrics)[:8]) + (", ..." if len(metrics) > 8 else "")
            return f"{name}.{key} is missing (it holds: {held or 'nothing'})"
        if not _finite_number(value):
            return f"{name}.{key} is {value!r}, not a number"
        low, high = METRIC_RANGES.get(key, (-math.inf, math.inf))
        if not low - _RANGE_SLACK <= value <= high + _RANGE_SLACK:
            return f"{name}.{key} is {value}, outside its range [{low:g}, {high:g}]"
    efficiency = rec.get("efficiency")
    if efficiency is not None:
        if not isinstance(efficiency, dict):
            return "efficiency is not an object"
        for key, value in efficiency.items():
            if _nonfinite(value):
                return f"efficiency.{key} is {value}"
        packing = efficiency.get("packing", 1)
        if isinstance(packing, bool) or not isinstance(packing, int) or packing < 1:
            return f"efficiency.packing is {packing!r}, not a positive integer"
    return None


def _settings_problem(rec: dict[str, Any], spec: Any, rid: str | None) -> str | None:
    """Why the settings a record states (its ``identity``, its ``hyperparameters``) are not its run's, or None:
    a record edited to another hyper-parameter, or another run's copied over, is not this run's result.

    >>> rec = {"identity": {"kind": "finetune", "model": "m", "seed": 0, "learning_rate": 1e-5}}
    >>> _settings_problem(rec, None, run_id(rec["identity"])) is None
    True
    >>> _settings_problem(rec, None, run_id({**rec["identity"], "learning_rate": 2e-5}))  # doctest: +ELLIPSIS
    'its identity hashes to finetune-m-s0-..., not the run id it is stored as (its settings were edited)'
    """
    from dataclasses import asdict, is_dataclass

    identity = rec.get("identity")
    if identity is not None and not isinstance(identity, dict):
        return "its identity is not a JSON object"
    if identity is not None and spec is not None and hasattr(spec, "identity"):
        expected = spec.identity()
        for key in sorted(set(identity) | set(expected), key=str):
            if _canonical(identity.get(key)) != _canonical(expected.get(key)):
                return (f"its identity.{key} is {identity.get(key)!r}, not {expected.get(key)!r} (the run's "
                        "setting: the record was edited or is another run's)")
    elif identity is not None and rid is not None and run_id(identity) != rid:
        return f"its identity hashes to {run_id(identity)}, not the run id it is stored as (its settings were edited)"
    stated = rec.get("hyperparameters")
    if isinstance(stated, dict) and spec is not None and is_dataclass(spec):
        own = asdict(spec)
        for key, value in stated.items():
            if key in own and _canonical(value) != _canonical(own[key]):
                return (f"its hyperparameters.{key} is {value!r}, not {own[key]!r} (the run's setting: the record "
                        "was edited or is another run's)")
    return None


class RunFailed(RuntimeError):
    """A run ended without a result; its ``failed`` record (with the reason) is already stored."""


# ---------------------------------------------------------------------- the store
class RunStore:
    """Results of one experiment under ``root``: ``runs/``, ``locks/``, ``checkpoints/``, ``logs/``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"

    def ensure_writable(self) -> None:
        """Create the store or fail with a message that says what to fix."""
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            probe = self.runs_dir / f".write-probe-{os.getpid()}-{threading.get_ident()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise UserError(f"cannot write results under {self.root}: {exc.strerror or exc}; choose another --output") from None

    # paths
    def result_path(self, rid: str) -> Path:
        return self.runs_dir / f"{rid}.json"

    def artifact_path(self, rid: str, name: str) -> Path:
        """A file stored beside the result, e.g. ``artifact_path(rid, "examples.parquet")``."""
        return self.runs_dir / f"{rid}.{name}"

    def running_path(self, rid: str) -> Path:
        return self.runs_dir / f"{rid}.running"

    def lock_path(self, rid: str) -> Path:
        return self.root / "locks" / f"{rid}.lock"

    def checkpoint_dir(self, rid: str) -> Path:
        return self.root / "checkpoints" / rid

    def log_dir(self) -> Path:
        return self.root / "logs"

    # records
    def get(self, rid: str) -> dict[str, Any] | None:
        """The stored record, or None if there is none or it is unusable (not a JSON object): redone."""
        return self._load(rid)[0]

    def unreadable(self, rid: str) -> str | None:
        """Why a result file that exists is not a record (:meth:`get` treats it as missing), else None.

        >>> import tempfile
        >>> store = RunStore(tempfile.mkdtemp())
        >>> store.result_path("r").parent.mkdir(parents=True)
        >>> _ = store.result_path("r").write_text("[]")
        >>> store.unreadable("r"), store.unreadable("absent")
        ('its result file is not a JSON object', None)
        """
        return self._load(rid)[1]

    def _load(self, rid: str) -> tuple[dict[str, Any] | None, str | None]:
        """(the record, None), or (None, why the file that is there is not a record), or (None, None): no file."""
        try:
            text = self.result_path(rid).read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # no record (an output under a file has none either)
            return None, None
        except OSError as exc:  # a folder in its place, no permission to read it
            return None, f"its result file cannot be read ({exc.strerror or exc})"
        if not text.strip():
            return None, "its result file is empty"
        try:  # NaN kept: record_problem names the metric that holds it
            rec = parse_json(text, allow_nan=True)
        except JsonProblem as exc:  # cut short (atomic writes never leave this), nested or numbered beyond reading
            why = str(exc)
            return None, ("its result file is not valid JSON (cut short or edited)" if why.startswith("not valid JSON")
                          else f"its result file {why}" if why.startswith("holds") else f"its result file is {why}")
        return (rec, None) if isinstance(rec, dict) else (None, "its result file is not a JSON object")

    def is_done(self, run: Any) -> bool:
        """Whether ``run`` (a spec, or a run id) has a usable finished record (:func:`record_problem`)."""
        return self.done_record(run) is not None

    def done_record(self, run: Any, epoch: str = "final") -> dict[str, Any] | None:
        """The stored record of ``run`` (a spec, or a run id) if it is a usable finished result, else None.

        The one answer to "is this run done?": the run lifecycle skips exactly these, ``vnr status`` shows
        them as done and ``vnr collect`` reads them; any other record (failed, or ``ok`` but unusable) is
        redone by the next ``vnr run``.
        """
        spec = None if isinstance(run, str) else run
        rid = run if spec is None else spec.run_id()
        rec = self.get(rid)
        return rec if rec is not None and record_problem(rec, spec, epoch, run_id=rid) is None else None

    def write(self, record: Mapping[str, Any]) -> Path:
        """Atomically store a record (low level: runs store theirs through :meth:`run`).

        Non-finite floats are stored as null and named under ``nonfinite``.
        """
        if "run_id" not in record or "status" not in record:
            raise ValueError("a run record needs 'run_id' and 'status'")
        found: dict[str, str] = {}
        rec = strict_json({"schema": SCHEMA_VERSION, **record}, found)
        if found:
            rec["nonfinite"] = {**(rec.get("nonfinite") or {}), **found}
        path = self.result_path(str(record["run_id"]))
        atomic_write_json(path, rec)
        return path

    def records(self) -> Iterator[dict[str, Any]]:
        """Every usable record (JSON objects only), in run-id order."""
        if not self.runs_dir.is_dir():
            return
        for path in sorted(self.runs_dir.glob("*.json")):
            with contextlib.suppress(JsonProblem, OSError):
                rec = read_json(path, allow_nan=True)
                if isinstance(rec, dict):
                    yield rec

    def frame(self) -> Any:
        """All records as a pandas DataFrame: one row per run, nested fields flattened with dots.

        Lists (``history``) stay as one cell; ``metrics.accuracy``, ``efficiency.energy_kwh``,
        ``environment.gpu`` ... are columns.
        """
        import pandas as pd

        rows = [_flatten(rec) for rec in self.records()]
        frame = pd.DataFrame(rows)
        if "run_id" in frame.columns:
            frame = frame.set_index("run_id", drop=False).rename_axis(None)
        return frame

    # running markers
    def mark_running(self, rid: str, **extra: Any) -> None:
        from harness.environment import slurm_ids

        info = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(), **slurm_ids(), **extra}
        atomic_write_json(self.running_path(rid), info)

    def clear_running(self, rid: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.running_path(rid).unlink()

    def running_info(self, rid: str) -> dict[str, Any] | None:
        """The running marker's content; None without one, or where it is no JSON object (a marker the next
        attempt writes again: an unreadable one means nothing is known about that attempt)."""
        try:
            return read_json_object(self.running_path(rid), max_bytes=_MARKER_MAX_BYTES)
        except (OSError, JsonProblem):
            return None

    def remove_checkpoints(self, rid: str) -> None:
        shutil.rmtree(self.checkpoint_dir(rid), ignore_errors=True)

    # locks
    @contextlib.contextmanager
    def lock(self, rid: str) -> Iterator[int | None]:
        """Hold the run's exclusive lock: yields its file descriptor, or None if another process holds it."""
        import fcntl

        path = self.lock_path(rid)
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
                        yield None
                        return
                    time.sleep(0.1)
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                yield fd
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def is_locked(self, rid: str) -> bool:
        """True while some process holds the run's lock (i.e. is running it)."""
        import fcntl

        path = self.lock_path(rid)
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

    # the lifecycle
    def active(self, rid: str) -> Run | None:
        """The attempt this process is running for ``rid`` in this store, if any."""
        return _ACTIVE.get(_key(self.root, rid))

    def _busy(self, spec: Any, is_error: bool) -> Run:
        if is_error:
            rid = spec.run_id()
            raise UserError(f"{rid} is being run by another process (lock {self.lock_path(rid)}); "
                            "leave it or wait for it")
        return Run(self, spec, "busy")

    @contextlib.contextmanager
    def run(self, spec: Any, *, busy_is_error: bool = False) -> Iterator[Run]:
        """The one run lifecycle. ``spec`` has ``run_id()``, ``identity()`` and ``kind``.

        Yields a :class:`Run` whose ``state`` is ``"done"`` (``run.record`` is the stored
        result: return it), ``"busy"`` (another process holds the lock: leave it) or
        ``"run"``: do the work and call :meth:`Run.finish` once. An exception out of the
        block stores a ``failed`` record (error, traceback) unless this attempt already
        stored one, and propagates. Entered again for the same run in the same process
        (or in the isolated child), it joins the running attempt.

        ``busy_is_error``: a run held by another process raises a :class:`UserError` instead
        (for the single-run commands, which have nothing else to do).
        """
        rid = spec.run_id()
        key = _key(self.root, rid)
        joined = _ACTIVE.get(key)
        if joined is not None and joined.thread != threading.get_ident():
            yield self._busy(spec, busy_is_error)  # another thread of this process runs it
            return
        if joined is None:
            joined = _inherited_attempt(self, spec)
            if joined is not None:
                _ACTIVE[key] = joined
        if joined is not None:
            joined.depth += 1
            try:
                yield from _guard(joined)
            finally:
                joined.depth -= 1
                if joined.depth == 0:
                    _ACTIVE.pop(key, None)
            return
        stored = self.done_record(spec)
        if stored is not None:
            yield Run(self, spec, "done", record=stored)
            return
        kept = self.get(rid)
        if isinstance(kept, dict) and kept.get("status") == STATUS_OK:  # "ok" but not this run's usable result
            logging.getLogger(__name__).warning("%s: its stored record is not a usable result (%s): redoing the run",
                                                rid, record_problem(kept, spec, run_id=rid))
        self.ensure_writable()
        with self.lock(rid) as fd:
            if fd is None:
                yield self._busy(spec, busy_is_error)
                return
            stored = self.done_record(spec)
            if stored is not None:  # finished while we waited
                yield Run(self, spec, "done", record=stored)
                return
            run = Run(self, spec, "run", lock_fd=fd)
            _ACTIVE[key] = run
            run.depth = 1
            self.mark_running(rid, attempt=run.attempt)
            try:
                yield from _guard(run)
            finally:
                _ACTIVE.pop(key, None)
                self.clear_running(rid)


def _guard(run: Run) -> Iterator[Run]:
    try:
        yield run
    except BaseException as exc:
        if run.state == "run" and not run.recorded:
            run.fail(exc)
        raise


def _key(root: Path, rid: str) -> tuple[str, str]:
    return (os.path.realpath(root), rid)


_ACTIVE: dict[tuple[str, str], Run] = {}


def _inherited_attempt(store: RunStore, spec: Any) -> Run | None:
    """The attempt an isolated child joins (``$VNR_RUN_ATTEMPT``, set by its parent, which holds the lock)."""
    text = os.environ.get(ATTEMPT_ENV)
    if not text:
        return None
    try:  # a value its parent did not write (left exported in a shell): no attempt to join, the run is its own
        info = parse_json(text)
    except JsonProblem:
        return None
    if not isinstance(info, dict) or info.get("run_id") != spec.run_id() \
            or info.get("root") != os.path.realpath(store.root):
        return None
    lock_fd, attempt, started = info.get("lock_fd"), info.get("attempt"), info.get("started")
    if not (lock_fd is None or type(lock_fd) is int) or not isinstance(attempt, str) \
            or type(started) not in (int, float):
        return None
    run = Run(store, spec, "run", lock_fd=lock_fd)
    run.attempt, run.started = attempt, float(started)
    return run


class Run:
    """One attempt at one run (see :meth:`RunStore.run`)."""

    def __init__(self, store: RunStore, spec: Any, state: str, *, record: dict[str, Any] | None = None,
                 lock_fd: int | None = None):
        self.store, self.spec, self.state = store, spec, state
        self.run_id = spec.run_id()
        self.record = record
        self.recorded = False  # this attempt stored its record
        self.lock_fd = lock_fd
        self.attempt = uuid.uuid4().hex[:16]
        self.started = time.time()
        self.depth = 0
        self.thread = threading.get_ident()  # only this thread joins the attempt

    def child_env(self) -> dict[str, str]:
        """Environment for a child process that does this attempt's work (it must inherit ``lock_fd``)."""
        return {ATTEMPT_ENV: json.dumps({"run_id": self.run_id, "root": os.path.realpath(self.store.root),
                                         "attempt": self.attempt, "started": self.started,
                                         "lock_fd": self.lock_fd})}

    def adopt_stored(self) -> bool:
        """After a child did the work: take its record if it belongs to this attempt."""
        rec = self.store.get(self.run_id)
        if rec is not None and rec.get("attempt") == self.attempt:
            self.record, self.recorded = rec, True
        return self.recorded

    def finish(self, result: Mapping[str, Any], *, error: str | None = None,
               traceback: str | None = None) -> dict[str, Any]:
        """Store this attempt's record: ``ok`` with ``result``'s fields, or ``failed`` when ``error`` is given."""
        from harness.environment import environment_info

        if self.recorded:
            raise RuntimeError(f"{self.run_id}: this attempt already stored its record")
        identity = self.spec.identity()
        now = time.time()
        lifecycle = {
            "schema": SCHEMA_VERSION,
            "run_id": self.run_id,
            "kind": self.spec.kind,
            **{k: identity[k] for k in _NAMING if k in identity},
            "identity": identity,
            "status": STATUS_FAILED if error else STATUS_OK,
            "error": error,
            "traceback": traceback,
            "attempt": self.attempt,
            "started_at": iso_time(self.started),
            "finished_at": iso_time(now),
            "wall_time_s": now - self.started,
        }
        body = {k: v for k, v in result.items() if k not in lifecycle or k in _NAMING}
        record = {**lifecycle, **body}
        record.setdefault("environment", environment_info(import_libraries=False))
        self.record, self.recorded = record, True
        try:
            self.store.write(record)
        except OSError:  # e.g. ENOSPC: this run fails (the lifecycle tries a smaller failure record)
            self.record, self.recorded = None, False
            raise
        return self.store.get(self.run_id) or record

    def fail(self, exc: BaseException, result: Mapping[str, Any] | None = None) -> None:
        """Store a ``failed`` record for ``exc`` (never raises: the original error matters more);
        nothing for :class:`RunNotStarted`.

        The record's ``error`` is one short line (:func:`error_line`: the exception's type and message);
        its ``traceback`` keeps the last 8000 characters, and the whole traceback is appended to the run's
        log (``<output>/logs/<run_id>.log``). ``exc`` is marked (:func:`failure_of`), so a command that
        catches it can report the failure in one line instead of a traceback.
        """
        if isinstance(exc, RunNotStarted):
            return  # the run never started: nothing to record
        full = "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__))
        log_path = self.store.log_dir() / f"{self.run_id}.log"
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "a") as fh:
                fh.write(f"--- {iso_time(time.time())} attempt {self.attempt} of {self.run_id} failed:\n{full}")
        except OSError:  # a full disk: the record (below) still tries
            log_path = None
        try:
            self.finish(result or {}, error=error_line(exc), traceback=full[-8000:])
        except OSError as again:  # e.g. the disk is full: the run is failed all the same; the caller reports exc
            logging.getLogger(__name__).debug("could not record the failure of %s: %s", self.run_id, again)
        except Exception:
            logging.getLogger(__name__).exception("could not record the failure of %s", self.run_id)
        with contextlib.suppress(Exception):  # some exception types take no attributes: then no mark
            exc._vnr_failed_run = (self.run_id, str(self.store.result_path(self.run_id)),  # type: ignore[union-attr]
                                   str(log_path) if log_path else None)


#: the longest ``error`` a failed record keeps (the whole traceback is in the run's log)
ERROR_CHARS = 300


def error_line(exc: BaseException, limit: int = ERROR_CHARS) -> str:
    """``Type: message`` on one line (whitespace runs, newlines included, made one space), cut to ``limit``.

    >>> error_line(RuntimeError("CUDA out of memory.\\n  Tried to allocate 4 GiB"))
    'RuntimeError: CUDA out of memory. Tried to allocate 4 GiB'
    >>> len(error_line(ValueError("x" * 1000)))
    300
    """
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_of(exc: BaseException) -> str | None:
    """For an exception a run's lifecycle recorded as its failure: one line saying so, the record's error,
    and where the record and the whole traceback are; else None (the exception was not a run's failure).

    ``vnr finetune`` and ``vnr bias`` print it instead of a traceback (exit 1).
    """
    found = getattr(exc, "_vnr_failed_run", None)
    if not found:
        return None
    run_id, record, log_path = found
    where = f"record: {record}" + (f"; traceback: {log_path}" if log_path else "")
    return f"run {run_id} failed: {error_line(exc)} ({where})"


def report_failed_run(exc: BaseException, prog: str) -> int:
    """Exit status 1 after printing ``prog: <failure_of line>`` on stderr, for a run's recorded failure;
    anything else (bad input and I/O errors, which the CLI edge reports in one line) is raised again."""
    line = failure_of(exc)
    if line is None or isinstance(exc, (UserError, OSError)):
        raise exc
    print(f"{prog}: {line}", file=sys.stderr)
    return 1


def _flatten(rec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in rec.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and key != "identity" and value:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out
