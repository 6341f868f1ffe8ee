"""Several files of one folder replaced as one unit, all or nothing, even under ``kill -9``.

A multi-file output (an import's matrix, sidecar, standard errors and notes; a grid's collected matrix, sidecar
and seed tables; a report's page, figures and manifest) is written by :func:`write_together`:

1. every new file is written into a staging folder inside the target folder (``.vnr-staging-…``), synced;
2. ``check`` may read the staged files back: a refusal leaves every target as it was;
3. the journal ``.vnr-journal.json`` is written atomically: the staging folder, each file to move in with
   its SHA-256, each file of the unit the new one lacks (to remove). This is the commit point;
4. each staged file is renamed over its target, then each file to remove is removed;
5. the journal is removed, then the staging folder.

A kill before 3 leaves the old unit whole (and a staging folder of a dead process, removed by the next
write); a kill after 3 leaves the journal, and :func:`recover`, which every reader and writer of such a folder
calls first, finishes the moves (roll forward): the folder then holds the new unit whole. It never holds a mix
that a command reads as one table. An exception between the renames (a failing disk) puts the old files back
(kept as hard links while the unit is written) and removes the journal. A journal that cannot be finished
(a read-only folder, a staging folder removed by hand) is refused in one line, naming the command to re-run.

The unit owns only the files it names: other files of the folder (a grid's ``runs/``, a user's notes) are
never touched. Journal entries are plain file names, so an edited journal cannot move a file elsewhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ranking.floor.errors import UserError
from ranking.floor.paths import _fsync_dir, write_text_atomic

JOURNAL = ".vnr-journal.json"
STAGING_PREFIX = ".vnr-staging-"
_BACKUPS = ".old"  # inside the staging folder: hard links to the files being replaced, for an undo


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _plain_name(name: object) -> bool:
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and "\0" not in name)


def _read_journal(journal: Path) -> dict | None:
    """The journal's plan, None without one; a journal that is not one of ours is a one-line refusal."""
    try:
        text = journal.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise UserError(f"cannot read {journal} (an unfinished write): {exc.strerror or exc}") from None
    try:
        plan = json.loads(text)
        moves, remove, staging = plan["moves"], plan["remove"], plan["staging"]
        ok = (isinstance(staging, str) and staging.startswith(STAGING_PREFIX) and _plain_name(staging)
              and all(isinstance(m, list) and len(m) == 2 and _plain_name(m[0]) and isinstance(m[1], str)
                      for m in moves)
              and all(_plain_name(r) for r in remove) and JOURNAL not in [m[0] for m in moves] + list(remove))
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise UserError(f"{journal} is not a journal of an unfinished write: remove it, then re-run the command "
                        "that wrote this folder")
    return plan


def recover(folder: str | Path) -> bool:
    """Finish the write a kill interrupted in ``folder`` (roll forward, from its journal); True if there was one.

    Called first by every reader and writer of a multi-file output, so none ever reads half of one. A write
    that cannot be finished is a one-line :class:`UserError` (the folder is left as it is).
    """
    folder = Path(folder)
    journal = folder / JOURNAL
    plan = _read_journal(journal)
    if plan is None:
        return False
    staging = folder / plan["staging"]
    by = plan.get("written_by") or "the command that wrote it"
    try:
        for name, digest in plan["moves"]:
            if (staging / name).is_file():
                os.replace(staging / name, folder / name)
            elif _sha256(folder / name) != digest:
                raise UserError(f"{folder} holds a half-replaced output: the new {name} its journal ({JOURNAL}) "
                                f"names is gone — re-run {by}, then remove {journal}")
        for name in plan["remove"]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
        _fsync_dir(folder)
        os.unlink(journal)
    except OSError as exc:
        raise UserError(f"{folder} holds an unfinished write of {by} ({JOURNAL}) that cannot be finished: "
                        f"{exc.strerror or exc} — make the folder writable and run again") from None
    _fsync_dir(folder)
    shutil.rmtree(staging, ignore_errors=True)
    return True


def _remove_dead_staging(folder: Path) -> None:
    """Staging folders of processes of this host that are gone (killed before their journal was written)."""
    host = socket.gethostname().replace("-", "_")
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        parts = entry.name[len(STAGING_PREFIX):].split("-")
        if not entry.name.startswith(STAGING_PREFIX) or len(parts) < 3 or parts[0] != host:
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
        except (ValueError, OSError):
            continue


def write_together(folder: str | Path, fill: Callable[[Path], object], owned: Sequence[str], *,
                   check: Callable[[Path], object] | None = None, written_by: str = "") -> None:
    """Replace the unit ``owned`` (file names in ``folder``, in moving order) by what ``fill(staging)`` writes.

    ``fill`` writes the new files into the staging folder it is given, under their own names; an owned file it
    does not write is removed from ``folder`` (a stale file the new unit lacks). ``check(staging)`` may read
    the staged files and refuse (raise): nothing is then changed. ``written_by`` names the command, for the
    one-line refusal of a journal that cannot be finished. See the module docstring for the steps.
    """
    folder = Path(folder)
    recover(folder)
    _remove_dead_staging(folder)
    host = socket.gethostname().replace("-", "_")
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{host}-{os.getpid()}-", dir=folder))
    journal = folder / JOURNAL
    done: list[tuple[str, bool]] = []  # (name, whether an old version existed), replaced or removed so far
    backups: dict[str, Path | None] = {}
    committed = keep_staging = False
    try:
        fill(staging)
        moves = [name for name in owned if (staging / name).is_file()]
        remove = [name for name in owned if name not in moves and os.path.lexists(folder / name)]
        digests = []
        for name in moves:
            fd = os.open(staging / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            digests.append(_sha256(staging / name))
        _fsync_dir(staging)
        if check is not None:
            check(staging)
        (staging / _BACKUPS).mkdir()
        for name in [*moves, *remove]:
            backups[name] = None
            if os.path.lexists(folder / name):
                with contextlib.suppress(OSError):  # no hard links here: that file cannot be put back
                    os.link(folder / name, staging / _BACKUPS / name, follow_symlinks=False)
                    backups[name] = staging / _BACKUPS / name
        write_text_atomic(journal, json.dumps({
            "written_by": written_by, "staging": staging.name,
            "moves": [[name, digest] for name, digest in zip(moves, digests, strict=True)], "remove": remove}))
        committed = True
        for name in moves:
            existed = os.path.lexists(folder / name)
            os.replace(staging / name, folder / name)
            done.append((name, existed))
        for name in remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
            done.append((name, True))
        _fsync_dir(folder)
        os.unlink(journal)
        committed = False
    except BaseException:
        if committed:  # undo the renames done, so the old unit stays whole; else leave the journal to finish it
            keep_staging = not _undo(folder, done, backups, journal)
        raise
    finally:
        if not keep_staging:
            shutil.rmtree(staging, ignore_errors=True)


def _undo(folder: Path, done: list[tuple[str, bool]], backups: dict[str, Path | None], journal: Path) -> bool:
    """Put back the old versions of the files replaced or removed; True when the journal could then go (False:
    it stays, and the next access finishes the write instead)."""
    if any(existed and backups.get(name) is None for name, existed in done):
        return False  # an old version that was not kept cannot be put back: finish the new unit instead
    try:
        for name, existed in reversed(done):
            backup = backups.get(name)
            if existed and backup is not None:
                os.replace(backup, folder / name)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / name)
        os.unlink(journal)
    except OSError:
        return False
    _fsync_dir(folder)
    return True
