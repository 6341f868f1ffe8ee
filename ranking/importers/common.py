"""What every importer shares: the caller's options, notes, JSON reading, duplicates, and building the table."""

from __future__ import annotations

import json
import math
import numbers
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError


def print_note(message: str) -> None:
    """The default note: one line on stderr."""
    print(f"note: {message}", file=sys.stderr)


@dataclass(frozen=True)
class Note:
    """One thing an import left out, chose or changed: its ``kind`` (a short word the summary groups by),
    whether it changes a ranking (``ranks``: dropped runs, mixed settings, placeholders made missing), the text."""

    kind: str
    ranks: bool
    message: str


#: the notes' kinds, in the order the summary lists them (others after, by name).
NOTE_ORDER = ("settings", "duplicate", "placeholder", "range", "identity", "direction", "unit", "left-out", "missing",
              "format", "vote", "other")


@dataclass
class Options:
    """How to read a source: stated directions, the duplicate policy, the policy for out-of-range values and corrupt
    rows, where notes go, the codecarbon mapping."""

    higher: tuple[str, ...] = ()
    lower: tuple[str, ...] = ()
    on_duplicate: str = "newest"
    #: each note's text as it is made (None: only collected in ``notes``, for a summary)
    sink: Callable[[str], None] | None = print_note
    codecarbon_map: Mapping[str, str] | str | Path | None = None
    codecarbon_key: str = "project_name"
    #: a score outside its criterion's range: "error" (a one-line refusal) or "missing" (left out, with a note)
    out_of_range: str = "error"
    #: skip a tracker's own corrupt rows (counted in a note) instead of refusing the file
    skip_bad_rows: bool = False
    used: set[str] = field(default_factory=set)
    notes: list[Note] = field(default_factory=list)

    def note(self, message: str, kind: str = "other", ranks: bool = False) -> None:
        """Record a note (``kind``: what the summary groups it under; ``ranks``: it changes a ranking)."""
        self.notes.append(Note(kind, ranks, message))
        if self.sink is not None:
            self.sink(message)

    def check(self) -> None:
        if self.out_of_range not in OUT_OF_RANGE:
            raise UserError(f"out_of_range {self.out_of_range!r} is not one of {', '.join(OUT_OF_RANGE)}")
        both = sorted(set(self.higher) & set(self.lower))
        if both:
            raise UserError(f"{both[0]!r} is given both as --higher and as --lower")

    def stated(self, *names: str) -> str | None:
        """The direction the caller stated for the first of ``names`` (a column, then its metric) that has one."""
        for name in names:
            for direction, given in (("higher", self.higher), ("lower", self.lower)):
                if name in given:
                    self.used.add(name)
                    return direction
        return None

    def check_used(self) -> None:
        """Every ``--higher`` / ``--lower`` name must have matched a metric or column of the source."""
        unused = [n for n in (*self.higher, *self.lower) if n not in self.used]
        if unused:
            raise UserError(f"--higher/--lower name {unused[0]!r}, which is no metric or column of the imported source")


OUT_OF_RANGE = ("error", "missing")


def in_range(value: float | None, lo: float | None, hi: float | None, where: str, options: Options) -> float | None:
    """``value`` when it lies in [lo, hi] (None: an open end; a missing value passes); else a one-line
    :class:`UserError` naming ``where``, or, with ``options.out_of_range == "missing"``, None with a note.

    >>> in_range(0.5, 0, 1, "r.json: model 'A', acc", Options())
    0.5
    >>> in_range(1.5, 0, 1, "r.json: model 'A', acc", Options())
    Traceback (most recent call last):
    ranking.floor.errors.UserError: r.json: model 'A', acc is 1.5, outside its range [0, 1]: fix the source, or pass --out-of-range missing to import it as missing
    >>> o = Options(out_of_range="missing", sink=None); in_range(-2.0, 0, None, "c.csv: line 3, duration", o), o.notes[0].message
    (None, 'c.csv: line 3, duration is -2, outside its range [0, ∞): imported as missing (--out-of-range missing)')
    """
    if value is None or ((lo is None or value >= lo) and (hi is None or value <= hi)):
        return value
    shown_range = f"[{'-∞' if lo is None else f'{lo:g}'}, {'∞)' if hi is None else f'{hi:g}]'}"
    if options.out_of_range == "missing":
        options.note(f"{where} is {value:g}, outside its range {shown_range}: imported as missing "
                     "(--out-of-range missing)", kind="range", ranks=True)
        return None
    raise UserError(f"{where} is {value:g}, outside its range {shown_range}: fix the source, or pass "
                    "--out-of-range missing to import it as missing")


def unknown_direction(metric: str, where: str) -> UserError:
    """The one-line error for a metric whose direction nobody states."""
    return UserError(f"{where}: metric {metric!r} has no stated direction (the source does not say and it is not a "
                     f"metric this importer knows): pass --higher {metric} or --lower {metric} "
                     f"(Python: higher=[{metric!r}] / lower=[{metric!r}])")


def read_json(path: Path, what: str) -> Any:
    """A JSON file, or a one-line :class:`UserError` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"{what} {path} is nested too deeply to read (thousands of levels of [ or {{): "
                        "is it the file the tool wrote?") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise UserError(f"{what} {path} is not valid JSON ({exc})") from None


#: how messages call each kind of JSON value (``expect``'s ``kind``) → (the Python types, its name).
KINDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "object": (Mapping, "an object"),
    "list": (list, "a list"),
    "text": (str, "text"),
    "bool": (bool, "true/false"),
}


def json_kind(value: Any) -> str:
    """What a JSON value is, in words.

    >>> json_kind([1]), json_kind({}), json_kind("x"), json_kind(True), json_kind(None), json_kind(2.5)
    ('a list', 'an object', 'text', 'true/false', 'null', 'a number')
    """
    if value is None:
        return "null"
    for types, name in KINDS.values():
        if isinstance(value, types):
            return name
    return "a number" if isinstance(value, numbers.Real) else type(value).__name__


def json_path(keys: Sequence[str | int]) -> str:
    """Where a value is in a JSON document, as jq writes it.

    >>> json_path(["higher_is_better", "t"]), json_path([0, "rows", 2, 1]), json_path(["results", "t", "acc,none"])
    ('.higher_is_better.t', '.[0].rows[2][1]', '.results.t."acc,none"')
    """
    out = ""
    for k in keys:
        if isinstance(k, int):
            out += f"[{k}]" if out else f".[{k}]"
        else:
            k = str(k)
            out += f".{k}" if k.isidentifier() and k.isascii() else "." + json.dumps(k, ensure_ascii=False)
    return out or "."


def expect(value: Any, kind: str, file: Path | str, path: Sequence[str | int], shape: str | None = None) -> Any:
    """``value`` when it is of ``kind`` (a key of :data:`KINDS`), else a one-line :class:`UserError` naming the file,
    the place in it and what it must be (``shape``, default the kind's name).

    >>> expect([1], "object", "r.json", ["versions"], "an object of task → version")
    Traceback (most recent call last):
    ranking.floor.errors.UserError: r.json: .versions must be an object of task → version, not a list
    """
    if type(value) is dict and kind == "object":  # what JSON gives (fast path: no ABC check)
        return value
    types, name = KINDS[kind]
    if not isinstance(value, types):
        raise UserError(f"{file}: {json_path(path)} must be {shape or name}, not {json_kind(value)}")
    return value


def optional(doc: Mapping[str, Any], key: str, kind: str, file: Path | str, path: Sequence[str | int],
             shape: str | None = None) -> Any:
    """``doc[key]`` checked as :func:`expect` does, or None where the key is absent or null."""
    value = doc.get(key)
    return None if value is None else expect(value, kind, file, [*path, key], shape)


def existing(paths: Sequence[Path], what: str) -> list[Path]:
    """The paths, each of which must exist (one-line error naming the first that does not)."""
    for p in paths:
        if not p.exists():
            raise UserError(f"{what} {p}: no such file or directory")
    return list(paths)


def files_in(paths: Sequence[Path], what: str, pattern: str, empty: str, *, recursive: bool = False) -> list[Path]:
    """The files given, and in each folder given the files matching ``pattern`` (below it too when
    ``recursive``), sorted; a missing path, or a folder with no match, is a one-line error (``empty`` says
    what to give instead)."""
    out: list[Path] = []
    for p in existing(paths, what):
        if p.is_dir():
            found = sorted(f for f in (p.rglob(pattern) if recursive else p.glob(pattern)) if f.is_file())
            if not found:
                raise UserError(f"{p} holds no {empty}")
            out.extend(found)
        else:
            out.append(p)
    return out


def read_csv(path: Path, what: str, *, bad: list[str] | None = None,
             hint: str = "") -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line number, row as a dict)]) of a CSV file, blank lines skipped; a row with fewer or more fields
    than the header is a one-line :class:`UserError` naming its line (it would read as empty or shifted cells),
    ending with ``hint``; with a list ``bad``, such a row is skipped and recorded there instead."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise UserError(f"cannot read {what} {path}: the file is empty (no header row)")
            rows: list[tuple[int, dict[str, str]]] = []
            end = reader.line_num
            for row in reader:
                line, end = end + 1, reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    if bad is not None:
                        bad.append(f"{path} line {line} ({len(row)} fields)")
                        continue
                    raise UserError(f"{path}: line {line} has {len(row)} field(s), the header {len(header)}: "
                                    f"give every row one value per column (an empty value for a missing one){hint}")
                rows.append((line, dict(zip(header, row))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return header, rows


def number(value: Any) -> float | None:
    """A finite score from a JSON / CSV value (None for a missing, ``N/A``, non-finite or non-numeric one).

    >>> number("0.5"), number(None), number("N/A"), number(10 ** 400)
    (0.5, None, None, None)
    """
    kind = type(value)
    if kind is float or kind is int:  # what JSON gives (fast path: no ABC check)
        return _finite(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return _finite(value)
    try:
        return _finite(float(str(value).strip()))
    except (ValueError, OverflowError):
        return None


def _finite(value: Any) -> float | None:
    try:
        x = float(value)
    except OverflowError:  # an integer beyond float's range
        return None
    return x if math.isfinite(x) else None


#: a number written as text (what the CSV loader accepts; ``nan`` is not one).
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity)", re.IGNORECASE)


def shown(value: Any) -> str:
    """A value as a message quotes it: text in quotes, anything else as JSON writes it (shortened).

    >>> shown("40%"), shown(True), shown([1, 2]), shown(10 ** 400)
    ("'40%'", 'true', '[1, 2]', '1000000000000000000000000000000… (401 digits)')
    """
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:60]) + "…"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        digits = len(str(abs(value)))
        return f"{str(value)[:31]}… ({digits} digits)"
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= 60 else text[:60] + "…"


def score(value: Any, what: str, *, missing: Sequence[str] = (), absent: str = "leave it empty") -> float | None:
    """A score read from a source: a finite float, or None where the source leaves it out (null, an empty cell,
    NaN, or one of the ``missing`` words such as lm-eval's ``N/A``). A value that is there but is no number, or
    is not finite, is a one-line :class:`UserError` naming ``what`` it is and the value (``absent`` says how the
    source writes a missing score).

    >>> score("0.5", "x"), score(None, "x"), score("", "x"), score("N/A", "x", missing=["N/A"]), score(float("nan"), "x")
    (0.5, None, None, None, None)
    >>> score("40%", "c.csv: line 2, model 'A', column 'BBH'")
    Traceback (most recent call last):
    ranking.floor.errors.UserError: c.csv: line 2, model 'A', column 'BBH' is '40%', not a number (leave it empty for a missing score)
    >>> score(1e999, "r.json: model 'A', task 't', metric 'acc'")
    Traceback (most recent call last):
    ranking.floor.errors.UserError: r.json: model 'A', task 't', metric 'acc' is Infinity, not a finite number
    """
    if type(value) is float and math.isfinite(value):  # what JSON gives (fast path)
        return value
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return None
    x: float | None = None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            x = float(value)
        except OverflowError:  # an integer beyond float's range
            x = math.inf
    elif isinstance(value, str):
        text = value.strip()
        if not text or text.lower() in {m.lower() for m in missing}:
            return None
        if _NUMBER.fullmatch(text):
            x = float(text)
    if x is None:
        raise UserError(f"{what} is {shown(value)}, not a number ({absent} for a missing score)")
    if math.isnan(x):
        return None
    if math.isinf(x):
        raise UserError(f"{what} is {shown(value)}, not a finite number")
    return x


def pick_newest(candidates: Sequence[tuple[Any, str, Any]], what: str, options: Options, *,
                same: Callable[[Any], Any] | None = None, stamp: str = "date") -> Any:
    """The newest of several results of one thing: ``candidates`` are (stamp, file, payload).

    One candidate: its payload. Several: the newest stamp's with a note naming the files
    (``on_duplicate="newest"``), or a :class:`UserError` (``"error"``). Several sharing the newest
    ``stamp`` are no newest one: one of them when their scores (``same(payload)``, default the
    payload) agree, else a :class:`UserError` asking to keep one.
    """
    if len(candidates) == 1:
        return candidates[0][2]
    ordered = sorted(candidates, key=lambda c: c[0])
    files = ", ".join(str(c[1]) for c in ordered)
    if options.on_duplicate == "error":
        raise UserError(f"{what} appears {len(candidates)} times ({files}): keep one, or pass --on-duplicate newest")
    tied = [c for c in ordered if c[0] == ordered[-1][0]]
    scores_of = same or (lambda payload: payload)
    if len(tied) > 1 and any(scores_of(c[2]) != scores_of(tied[0][2]) for c in tied[1:]):
        which = "" if len(tied) == len(candidates) else f"; the newest {len(tied)}"
        raise UserError(f"{what} appears {len(candidates)} times{which} with the same {stamp} but different scores "
                        f"({', '.join(str(c[1]) for c in tied)}), so none is the newest: keep one of them")
    others = [str(c[1]) for c in tied[:-1]]
    also = (f"; {', '.join(others)} {'has' if len(others) == 1 else 'have'} the same {stamp} and the same scores"
            if others else "")
    options.note(f"{what} appears {len(candidates)} times: kept the newest ({ordered[-1][1]}{also}), left out "
                 f"{', '.join(str(c[1]) for c in ordered[:-1])} (--on-duplicate error refuses duplicates)")
    return ordered[-1][2]


def assemble(
    scores: Mapping[str, Mapping[str, float]],
    criteria: Sequence[Any],
    source: str,
    options: Options,
    errors: Mapping[str, Mapping[str, float]] | None = None,
    board: str | None = None,
) -> Any:
    """The score table of ``scores`` (model → column → score) with ``criteria`` in order, NaN where a model has
    no score (stated in a note), and standard errors (model → column → se) when any are known. Columns and
    models without any score are left out (a note names them). ``board``: the leaderboard the files come from
    (:data:`ranking.boards.BOARDS`). Names that ``vnr rank`` would refuse are refused here (:func:`check_name`)."""
    import numpy as np

    from ranking.table import ScoreTable

    models = list(scores)
    names = [c.name for c in criteria]
    for m in models:
        check_name(m, "model", source)
    for n in names:
        check_name(n, "column", source)
    values = np.full((len(models), len(names)), np.nan)
    se = np.full_like(values, np.nan)
    for i, m in enumerate(models):
        for j, n in enumerate(names):
            if n in scores[m]:
                values[i, j] = scores[m][n]
            if errors and n in errors.get(m, {}):
                se[i, j] = errors[m][n]
    if not models or not names:
        raise UserError(f"{source}: no scores found to import")
    empty = np.isnan(values).all(axis=0)
    if empty.any():
        options.note(f"{source}: left out {int(empty.sum())} column(s) without any score "
                     f"({', '.join(n for n, e in zip(names, empty) if e)})", kind="left-out")
        keep = ~empty
        criteria, names = [c for c, k in zip(criteria, keep) if k], [n for n, k in zip(names, keep) if k]
        values, se = values[:, keep], se[:, keep]
        if not names:
            raise UserError(f"{source}: no scores found to import")
    blank = np.isnan(values).all(axis=1)
    if blank.any():
        options.note(f"{source}: left out {int(blank.sum())} model(s) without any score "
                     f"({', '.join(m for m, b in zip(models, blank) if b)})", kind="left-out", ranks=True)
        models = [m for m, b in zip(models, blank) if not b]
        values, se = values[~blank], se[~blank]
    gaps = [(m, int(np.isnan(values[i]).sum())) for i, m in enumerate(models) if np.isnan(values[i]).any()]
    if gaps:
        listed = ", ".join(f"{m} ({k})" for m, k in gaps[:5]) + (f", … ({len(gaps)} models)" if len(gaps) > 5 else "")
        options.note(f"{source}: some models have no score on some columns, left empty (missing): {listed}",
                     kind="missing")
    errors_known = bool(np.isfinite(se).any())
    return ScoreTable(tuple(models), tuple(criteria), values, source=source,
                      standard_errors=se if errors_known else None, board=board)


def check_name(name: str, what: str, source: str) -> str:
    """A model or column name as the score table will store it, or the one-line :class:`UserError` that ``vnr rank``
    would give later: no control characters (a CR, a NUL), no edge spaces, not empty.

    >>> check_name("org/model", "model", "x.json")
    'org/model'
    >>> check_name("a\\rb", "model", "x.json")
    Traceback (most recent call last):
    ranking.floor.errors.UserError: x.json: model name 'a\\rb' holds a control character: fix the name in the source
    """
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{source}: a {what} name is empty: name every {what} in the source")
    from ranking.table import control_character_at

    if control_character_at(name) is not None:
        raise UserError(f"{source}: {what} name {name!r} holds a control character: fix the name in the source")
    if name != name.strip():
        raise UserError(f"{source}: {what} name {name!r} has spaces at its edges: strip them in the source")
    return name


def summarise(notes: Sequence[Note], limit: int = 3) -> list[str]:
    """The notes as a person reads them: grouped by kind, with counts, those that change a ranking first, each
    group showing its first ``limit`` messages.

    >>> for line in summarise([Note("left-out", False, "a"), Note("settings", True, "b"), Note("left-out", False, "c")]):
    ...     print(line)
    changes the ranking — settings (1): b
    left-out (2): a; c
    """
    groups: dict[tuple[bool, str], list[str]] = {}
    for n in notes:
        groups.setdefault((n.ranks, n.kind), []).append(n.message)
    order = {k: i for i, k in enumerate(NOTE_ORDER)}
    out = []
    for (ranks, kind), messages in sorted(groups.items(), key=lambda kv: (not kv[0][0], order.get(kv[0][1], 99),
                                                                           kv[0][1])):
        shown = "; ".join(messages[:limit]) + (f"; … (+{len(messages) - limit} more)" if len(messages) > limit else "")
        out.append(f"{'changes the ranking — ' if ranks else ''}{kind} ({len(messages)}): {shown}")
    return out


def describe_paths(paths: Sequence[Path]) -> str:
    """The sources in a short form for the table's ``source``."""
    return ", ".join(str(p) for p in paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
