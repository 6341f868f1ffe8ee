"""The one JSON reader: a file or text the project reads back, or a one-line reason why it cannot be used.

Every way a JSON file goes wrong comes out as one :class:`JsonProblem` whose message is a short, bounded
reason without the file's name (the caller names the file and says what to do: redo the run, delete the
file, write it again): cut short or not JSON, not UTF-8, ``NaN``/``Infinity`` where the file never holds
them (``allow_nan=False``, the default: the project writes non-finite numbers as null), nested thousands of
levels deep (Python's ``RecursionError``), a number of more digits than Python converts, bigger than the
caller allows, or (:func:`read_json_object`) valid JSON that is not an object. A file that is not there is
not a problem of its content: :class:`FileNotFoundError` (and :class:`NotADirectoryError`) pass through.

Standard library only, as the whole floor (:mod:`ranking.floor`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class JsonProblem(ValueError):
    """Why a JSON text or file cannot be used: one bounded line, without the file's name."""


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def kind_of(value: Any) -> str:
    """What a JSON value is, in words.

    >>> kind_of([1]), kind_of("x"), kind_of(None), kind_of(True), kind_of(2.5), kind_of({})
    ('a list', 'text', 'null', 'true/false', 'a number', 'an object')
    """
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    return {list: "a list", str: "text", type(None): "null", dict: "an object"}.get(type(value), type(value).__name__)


def parse_json(text: str | bytes, *, allow_nan: bool = False) -> Any:
    """The value of a JSON text, or a :class:`JsonProblem` saying in one line why there is none.

    >>> parse_json('{"a": 1}')
    {'a': 1}
    >>> for bad in ('{"a": 1', '[NaN]', '[' * 100000, '1' * 5000, b'\\xff{}'):
    ...     try:
    ...         parse_json(bad)
    ...     except JsonProblem as exc:
    ...         print(exc)
    not valid JSON (Expecting ',' delimiter: line 1, column 8): cut short or edited
    holds NaN, which is no JSON number
    nested too deeply to read (thousands of levels of [ or {)
    holds a number of more than 4300 digits
    not UTF-8 text
    """
    if isinstance(text, (bytes, bytearray)) and not text.strip():
        raise JsonProblem("empty")
    if isinstance(text, str) and not text.strip():
        raise JsonProblem("empty")
    try:
        return json.loads(text, parse_constant=None if allow_nan else _refuse_constant)
    except json.JSONDecodeError as exc:
        raise JsonProblem(f"not valid JSON ({exc.msg}: line {exc.lineno}, column {exc.colno}): cut short or "
                          "edited") from None
    except UnicodeDecodeError:
        raise JsonProblem("not UTF-8 text") from None
    except RecursionError:
        raise JsonProblem("nested too deeply to read (thousands of levels of [ or {)") from None
    except _NonFinite as exc:
        raise JsonProblem(f"holds {exc}, which is no JSON number") from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        if "digits" in str(exc):
            raise JsonProblem("holds a number of more than 4300 digits") from None
        raise JsonProblem(f"not valid JSON ({type(exc).__name__})") from None


def read_json(path: str | Path, *, allow_nan: bool = False, max_bytes: int | None = None) -> Any:
    """The value of the JSON file at ``path``, or a :class:`JsonProblem` saying in one line why there is none
    (``max_bytes``: a bigger file is refused before it is read). A missing file raises
    :class:`FileNotFoundError` (or :class:`NotADirectoryError`) unchanged."""
    path = Path(path)
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            raise JsonProblem(f"bigger than {max_bytes} bytes (not a file this reads)")
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:  # a folder in its place, no permission
        raise JsonProblem(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    return parse_json(data, allow_nan=allow_nan)


def read_json_object(path: str | Path, *, allow_nan: bool = False, max_bytes: int | None = None) -> dict[str, Any]:
    """:func:`read_json`, and a :class:`JsonProblem` unless the value is a JSON object.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> _ = open(path, "w").write("[1, 2]")
    >>> try:
    ...     read_json_object(path)
    ... except JsonProblem as exc:
    ...     print(exc)
    holds a list, not a JSON object
    """
    value = read_json(path, allow_nan=allow_nan, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise JsonProblem(f"holds {kind_of(value)}, not a JSON object")
    return value


def read_totals(path: str | Path, keys: tuple[str, ...], *, what: str, nonnegative: bool = False,
                warn: Any = None) -> dict[str, Any] | None:
    """Running totals a checkpoint keeps (token counts, energy totals): the JSON object at ``path`` whose ``keys``
    are finite numbers (absent or null: 0), or None — no file there, or, with one warning through ``warn`` (a
    logger's ``warning``) naming ``what``, the file and why, a file that is not such an object (a resumed run
    then counts from zero rather than stopping).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> _ = open(path, "w").write('{"real": 5, "computed": "7"}')
    >>> read_totals(path, ("real", "computed"), what="token counts", warn=print)  # doctest: +ELLIPSIS
    token counts .../t.json are not used (computed is '7', not a number): they start again from zero
    """
    try:
        doc = read_json_object(path, max_bytes=1 << 20)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except JsonProblem as exc:
        reason = str(exc)
    else:
        bad = next((k for k in keys if not _total(doc.get(k) or 0, nonnegative)), None)
        if bad is None:
            return doc
        from ranking.floor.schema import show

        reason = f"{bad} is {show(doc[bad])}, not a {'count' if nonnegative else 'number'}"
    if warn is not None:
        warn(f"{what} {path} are not used ({reason}): they start again from zero")
    return None


def _total(value: Any, nonnegative: bool) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and not (nonnegative and value < 0)
