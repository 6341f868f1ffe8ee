"""What every importer shares: the caller's options, notes, JSON reading, duplicates, and building the table."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ranking.errors import UserError


def print_note(message: str) -> None:
    """The default note: one line on stderr."""
    print(f"note: {message}", file=sys.stderr)


@dataclass
class Options:
    """How to read a source: stated directions, the duplicate policy, where notes go, the codecarbon mapping."""

    higher: tuple[str, ...] = ()
    lower: tuple[str, ...] = ()
    on_duplicate: str = "newest"
    note: Callable[[str], None] = print_note
    codecarbon_map: Mapping[str, str] | str | Path | None = None
    codecarbon_key: str = "project_name"
    used: set[str] = field(default_factory=set)

    def check(self) -> None:
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


def number(value: Any) -> float | None:
    """A finite score from a JSON / CSV value (None for a missing, ``N/A`` or non-numeric one)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if value == value and abs(value) != float("inf") else None
    text = str(value).strip()
    try:
        x = float(text)
    except ValueError:
        return None
    return x if x == x and abs(x) != float("inf") else None


def pick_newest(candidates: Sequence[tuple[Any, str, Any]], what: str, options: Options) -> Any:
    """The newest of several results of one thing: ``candidates`` are (stamp, file, payload).

    One candidate: its payload. Several: the newest stamp's with a note naming the files
    (``on_duplicate="newest"``), or a :class:`UserError` (``"error"``).
    """
    if len(candidates) == 1:
        return candidates[0][2]
    ordered = sorted(candidates, key=lambda c: c[0])
    files = ", ".join(str(c[1]) for c in ordered)
    if options.on_duplicate == "error":
        raise UserError(f"{what} appears {len(candidates)} times ({files}): keep one, or pass --on-duplicate newest")
    options.note(f"{what} appears {len(candidates)} times: kept the newest ({ordered[-1][1]}), left out "
                 f"{', '.join(str(c[1]) for c in ordered[:-1])} (--on-duplicate error refuses duplicates)")
    return ordered[-1][2]


def assemble(
    scores: Mapping[str, Mapping[str, float]],
    criteria: Sequence[Any],
    source: str,
    options: Options,
    errors: Mapping[str, Mapping[str, float]] | None = None,
) -> Any:
    """The score table of ``scores`` (model → column → score) with ``criteria`` in order, NaN where a model has
    no score (stated in a note), and standard errors (model → column → se) when any are known."""
    import numpy as np

    from ranking.table import ScoreTable

    models = list(scores)
    names = [c.name for c in criteria]
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
                     f"({', '.join(n for n, e in zip(names, empty) if e)})")
        keep = ~empty
        criteria, names = [c for c, k in zip(criteria, keep) if k], [n for n, k in zip(names, keep) if k]
        values, se = values[:, keep], se[:, keep]
        if not names:
            raise UserError(f"{source}: no scores found to import")
    gaps = [(m, int(np.isnan(values[i]).sum())) for i, m in enumerate(models) if np.isnan(values[i]).any()]
    if gaps:
        shown = ", ".join(f"{m} ({k})" for m, k in gaps[:5]) + (f", … ({len(gaps)} models)" if len(gaps) > 5 else "")
        options.note(f"{source}: some models have no score on some columns, left empty (missing): {shown}")
    errors_known = bool(np.isfinite(se).any())
    return ScoreTable(tuple(models), tuple(criteria), values, source=source,
                      standard_errors=se if errors_known else None)


def describe_paths(paths: Sequence[Path]) -> str:
    """The sources in a short form for the table's ``source``."""
    return ", ".join(str(p) for p in paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
