"""Checkpoint folders of a fine-tuning run: which are complete, the latest, and the completion marker.

A checkpoint (``<output>/checkpoints/<run_id>/checkpoint-<step>``) counts only once
it is complete: its files fsync'ed, then a ``vnr-complete.json`` marker written
atomically after ``trainer_state.json`` (:func:`mark_complete`), so a run killed
while saving resumes from the previous complete one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
from pathlib import Path

from harness.store import atomic_write_json
from ranking.floor.json_io import JsonProblem, read_json_object
from ranking.floor.schema import show

log = logging.getLogger(__name__)

COMPLETE_MARKER = "vnr-complete.json"
CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_step(folder: Path) -> int | None:
    """The step in a ``checkpoint-<step>`` folder's name (None for any other name).

    >>> checkpoint_step(Path("out/checkpoint-120")), checkpoint_step(Path("out/logs"))
    (120, None)
    """
    match = CHECKPOINT_RE.match(folder.name)
    return int(match.group(1)) if match else None


#: the files of ours a checkpoint may hold beside the marker (the token counts of
#: :class:`harness.finetune.callbacks.TokenAccountingCallback`, the efficiency totals of
#: :data:`harness.energy.tracker.CHECKPOINT_FILE`): where one is there, it must be a JSON object too
_OWN_FILES = ("vnr-tokens.json", "efficiency.json")


def is_complete_checkpoint(folder: Path) -> bool:
    """True when ``folder`` was fully written: our marker, a ``trainer_state.json`` whose ``global_step`` is the
    folder's step, and our own files there readable. A marker, state or file of ours that is there but cut
    short, not JSON or of another shape makes it incomplete (with a warning naming the file): it is not resumed
    from, and :func:`drop_incomplete_checkpoints` removes it, so its steps are trained again."""
    step = checkpoint_step(folder)
    if step is None:
        return False
    names = (COMPLETE_MARKER, "trainer_state.json", *(n for n in _OWN_FILES if (folder / n).exists()))
    docs = {}
    for name in names:
        try:
            docs[name] = read_json_object(folder / name, allow_nan=name == "trainer_state.json")
        except (FileNotFoundError, NotADirectoryError):  # not (yet) written: a half-written checkpoint
            return False
        except JsonProblem as exc:
            log.warning("checkpoint %s is not used: its %s %s", folder, name, _as_clause(exc))
            return False
    state_step = docs["trainer_state.json"].get("global_step")
    if type(state_step) is not int or state_step != step:
        log.warning("checkpoint %s is not used: its trainer_state.json has global_step %s, not %d", folder,
                    show(state_step), step)
        return False
    return True


def _as_clause(exc: JsonProblem) -> str:
    why = str(exc)
    return why if why.startswith("holds") else f"is {why}"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step under ``run_dir`` (None if there is none)."""
    if not run_dir.is_dir():
        return None
    found = sorted(
        ((step, p) for p in run_dir.iterdir() if p.is_dir() and (step := checkpoint_step(p)) is not None),
        reverse=True,
    )
    for _, folder in found:
        if is_complete_checkpoint(folder):
            return folder
    return None


def drop_incomplete_checkpoints(run_dir: Path, keep: Path | None) -> None:
    """Remove half-written checkpoints newer than ``keep`` (the one we resume from)."""
    if not run_dir.is_dir():
        return
    keep_step = checkpoint_step(keep) if keep is not None else -1
    for p in run_dir.iterdir():
        step = checkpoint_step(p)
        if step is not None and p.is_dir() and step > keep_step and not is_complete_checkpoint(p):
            log.info("removing incomplete checkpoint %s", p)
            shutil.rmtree(p, ignore_errors=True)


def mark_complete(folder: Path, step: int) -> None:
    """fsync every file of ``folder``, then write its completion marker atomically."""
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with contextlib.suppress(OSError), open(path, "rb") as fh:
                os.fsync(fh.fileno())
    atomic_write_json(folder / COMPLETE_MARKER, {"global_step": step, "time": time.time()})
