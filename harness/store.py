"""The run store: one JSON per run under ``<output>/runs/<run_id>.json``.

Guarantees the rest of the harness relies on:

* **Atomic results.** A result is written to a temporary file in the same
  directory, flushed and fsync'ed, then renamed over the final name (and the
  directory fsync'ed). A crash, kill or preemption at any instant leaves
  either the old state or the whole new file, never a partial one; many
  SLURM array tasks can write to one store at once because each writes only
  its own file and ``os.replace`` is atomic on POSIX file systems.
* **Stable run ids.** :func:`run_id` hashes (SHA-256 over canonical JSON)
  everything that changes the result, so a re-submitted grid skips finished
  work and a changed hyper-parameter gets a new id instead of a stale result.
* **Done means done.** Only a record with ``status == "ok"`` counts as
  finished; a ``failed`` record keeps its error for the user and is retried.
* **Running markers.** ``<run_id>.running`` says who is working on a run
  (host, pid, SLURM ids) so ``vnr status`` can tell running from missing.

Example: ``run_id({"kind": "finetune", "model": "bert-base-uncased", "task": "rte", "seed": 0})``
is ``finetune-bert_base_uncased-rte-s0-<12 hex digits>``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ranking.errors import UserError

STATUS_OK = "ok"
STATUS_FAILED = "failed"
SCHEMA_VERSION = 1


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


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system supports it
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n").encode())


def atomic_write_parquet(path: str | Path, frame: Any) -> None:
    """Write a DataFrame as parquet, atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


class RunStore:
    """Results of one experiment under ``root``: ``runs/``, ``checkpoints/``, ``logs/``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"

    def ensure_writable(self) -> None:
        """Create the store or fail with a message that says what to fix."""
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            probe = self.runs_dir / f".write-probe-{os.getpid()}"
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

    def checkpoint_dir(self, rid: str) -> Path:
        return self.root / "checkpoints" / rid

    def log_dir(self) -> Path:
        return self.root / "logs"

    # records
    def get(self, rid: str) -> dict[str, Any] | None:
        """The stored record, or None if there is none (or it cannot be parsed)."""
        path = self.result_path(rid)
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # cannot happen with atomic writes; treat as missing so it is redone

    def is_done(self, rid: str) -> bool:
        rec = self.get(rid)
        return rec is not None and rec.get("status") == STATUS_OK

    def write(self, record: Mapping[str, Any]) -> Path:
        """Atomically store a record (must carry ``run_id`` and ``status``)."""
        if "run_id" not in record or "status" not in record:
            raise ValueError("a run record needs 'run_id' and 'status'")
        rec = {"schema": SCHEMA_VERSION, **record}
        path = self.result_path(str(record["run_id"]))
        atomic_write_json(path, rec)
        return path

    def records(self) -> Iterator[dict[str, Any]]:
        if not self.runs_dir.is_dir():
            return
        for path in sorted(self.runs_dir.glob("*.json")):
            with contextlib.suppress(json.JSONDecodeError, UnicodeDecodeError, FileNotFoundError):
                yield json.loads(path.read_text())

    # running markers
    def mark_running(self, rid: str) -> None:
        info = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(), **slurm_ids()}
        atomic_write_json(self.running_path(rid), info)

    def clear_running(self, rid: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.running_path(rid).unlink()

    def running_info(self, rid: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.running_path(rid).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def remove_checkpoints(self, rid: str) -> None:
        shutil.rmtree(self.checkpoint_dir(rid), ignore_errors=True)


def slurm_ids() -> dict[str, str]:
    """SLURM job / array ids of this process, where it runs under SLURM."""
    keys = {
        "slurm_job_id": "SLURM_JOB_ID",
        "slurm_array_job_id": "SLURM_ARRAY_JOB_ID",
        "slurm_array_task_id": "SLURM_ARRAY_TASK_ID",
        "slurm_restart_count": "SLURM_RESTART_COUNT",
    }
    return {k: os.environ[v] for k, v in keys.items() if os.environ.get(v)}
