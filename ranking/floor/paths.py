"""Where data comes from (the data root: CLI option, else ``VNR_DATA_ROOT``, else the public source) and
how the project writes its files: :func:`write_atomic` (and :func:`write_bytes_atomic`,
:func:`write_text_atomic`), the one atomic writer, into folders checked by :func:`check_output_dir`."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from ranking.floor.errors import UserError

DATA_ROOT_ENV = "VNR_DATA_ROOT"


def resolve_data_root(cli_value: str | Path | None = None, *, required: bool = False) -> Path | None:
    """The data root: ``cli_value`` if given, else ``$VNR_DATA_ROOT``, else None (= public source).

    A root that is named but does not exist is an error, so a typo never
    silently falls back to downloading.
    """
    value = cli_value if cli_value not in (None, "") else os.environ.get(DATA_ROOT_ENV) or None
    if value is None:
        if required:
            raise UserError(f"no data root: pass --data-root DIR or set {DATA_ROOT_ENV}")
        return None
    root = Path(value).expanduser()
    if not root.is_dir():
        origin = "--data-root" if cli_value not in (None, "") else DATA_ROOT_ENV
        raise UserError(f"data root {root} (from {origin}) is not a directory")
    return root


def check_output_dir(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a folder to write into, checked before any work: an existing folder, or one that can be
    created (no part of it is a file). A file there, or under a file, is a one-line :class:`UserError`.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "report.html"
    >>> _ = f.write_text("x")
    >>> check_output_dir(f)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: --out .../report.html is a file: give a folder (it is created if missing)
    """
    out = Path(path).expanduser()
    if out.exists() and not out.is_dir():
        raise UserError(f"{option} {out} is a file: give a folder (it is created if missing)")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{option} {out}: {parent} is a file, not a folder: give a path under a folder")
            break
    return out


def folder(text: str) -> str:
    """An argparse type: a folder path, not empty text (an unset shell variable would mean the current folder).

    >>> folder("results/x")
    'results/x'
    >>> folder(" ")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: is empty: give a folder (an unset shell variable?)
    """
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a folder (an unset shell variable?)")
    return text


def write_atomic(path: str | Path, fill: Callable[[Path], object], *, parents: bool = False) -> None:
    """The one atomic writer: ``fill(tmp)`` writes a temporary file beside ``path``, which is then synced and
    renamed over ``path``. A reader sees the old file or the whole new one, never a half-written file; a
    failure anywhere (``fill`` raising, a full disk, a kill) leaves the old file as it was and removes the
    temporary file (a kill may leave it: its name starts with ``.`` and ends with ``.tmp``).

    The new file gets the mode ``open(path, "w")`` would give (``0o666`` less the umask, not
    ``tempfile.mkstemp``'s ``0o600``); its bytes and then its folder's entry are synced (``fsync``), so
    after a crash the file is the old one or the new one. ``parents``: create missing folders above it.
    ``fill`` takes a path, so a library that writes to a path (``DataFrame.to_parquet``) can write it.
    Every file the project writes as a whole (run records, sidecars, tables, reports) goes through here.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.txt"
    >>> write_text_atomic(target, "old")
    >>> def half(tmp):
    ...     _ = tmp.write_text("ne")
    ...     raise OSError(28, "No space left on device", str(target))
    >>> write_atomic(target, half)
    Traceback (most recent call last):
    ...
    OSError: [Errno 28] No space left on device: '...a.txt'
    >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
    ('old', ['a.txt'])
    """
    import uuid

    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        os.close(fd)
        fd = -1
        fill(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        os.fchmod(fd, mode)  # a writer that made the file anew (0o600) gets the umask's mode back
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Sync ``folder``'s entries (a rename is durable only then); not every file system can."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes_atomic(path: str | Path, data: bytes, *, parents: bool = False) -> None:
    """:func:`write_atomic` of ``data``."""
    write_atomic(path, lambda tmp: tmp.write_bytes(data), parents=parents)


def write_text_atomic(path: str | Path, text: str, *, parents: bool = False) -> None:
    """:func:`write_atomic` of ``text`` in UTF-8."""
    write_bytes_atomic(path, text.encode("utf-8"), parents=parents)


def file_inside(folder: str | Path, name: str | Path, what: str) -> Path:
    """``folder / name``, a file a sidecar names (``stderr.csv``) or one read beside a table (``seeds.csv``),
    checked to stay inside ``folder``: a symbolic link (or ``..``) that leads out of the folder is refused in
    one line, as every path the project reads from a declaration.

    >>> import os, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> os.symlink("/etc/hostname", d / "stderr.csv")
    >>> file_inside(d, "stderr.csv", "standard errors")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: standard errors .../stderr.csv is a link out of its folder (to /etc/hostname): ...
    """
    folder = Path(folder)
    path = folder / name
    try:
        real, home = path.resolve(), folder.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise UserError(f"{what} {path}: cannot follow its links ({exc}): put the file itself in {folder}") from None
    if not real.is_relative_to(home):
        raise UserError(f"{what} {path} is a link out of its folder (to {real}): put the file itself in {folder} "
                        "(files named beside a table are read only inside its folder)")
    return path
