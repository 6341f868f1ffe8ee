"""Where data comes from (the data root: CLI option, else ``VNR_DATA_ROOT``, else the public source) and
how ranking writes its files (:func:`write_text_atomic`, into folders checked by :func:`check_output_dir`)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.floor.errors import UserError

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
    harness.floor.errors.UserError: --out .../report.html is a file: give a folder (it is created if missing)
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


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once: a temporary file beside it, then a rename.

    A reader never sees a half-written file, and the file gets the permissions
    the umask allows (like ``open(path, "w")``, unlike ``tempfile.mkstemp``'s 0600).
    Every file ranking writes (reports, sidecars, tables) goes through here.
    """
    import uuid

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8."""
    write_bytes_atomic(path, text.encode("utf-8"))
