"""Read a public leaderboard CSV through a spec YAML (``configs/leaderboards/*.yaml``).

A spec says how to turn a scraped leaderboard into a :class:`ScoreTable`::

    file: leaderboards/votenrank/glue.csv   # relative to the data root (or absolute)
    model_column: Model                     # row names; duplicates get _1, _2, ... in row order
    names: [Human, craig.starr, ...]        # optional: row names in row order, instead of model_column
    rename: {"old name": new}               # optional: rename rows (after de-duplication)
    ignore: [Rank, Name, URL, Score]        # columns that are not criteria
    missing: ["-"]                          # cell values meaning "no score" (empty cells always are)
    criteria:                               # optional: default = every column not ignored
      CoLA: {}                              # direction (default higher), weight (default 1), group, unit
      MRPC: {split: [MRPC-F1, MRPC-acc]}    # an "a/b" cell: two criteria, each of half the column's weight
      AX: {weight: 0}                       # diagnostic: weight 0 (kept in the table, ignored by rules)

A column whose cells look like ``a/b`` but has no ``split`` entry is split into
``<col>/1`` and ``<col>/2`` (again half the weight each), so a multi-metric
column is never silently read as text.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ranking.floor.errors import UserError
from ranking.floor.yaml_io import read_yaml
from ranking.table import Criterion, ScoreTable, _csv_header

_SLASH = re.compile(r"^\s*[^/]+/[^/]+\s*$")


def read_spec(path: str | Path) -> Any:
    """The validated spec (a :class:`ranking.schemas.LeaderboardSpec`); one-line errors naming the file and key."""
    from ranking.schemas import LEADERBOARD, validate

    path = Path(path)
    return validate(LEADERBOARD, read_yaml(path, "leaderboard spec"), path)


def dedupe(names: list[str]) -> list[str]:
    """Suffix repeated names with ``_1``, ``_2``, ... in row order (the first keeps its name).

    >>> dedupe(["a", "b", "a", "a"])
    ['a', 'b', 'a_1', 'a_2']
    """
    seen: dict[str, int] = {}
    out = []
    taken = set(names)
    for n in names:
        if n not in seen:
            seen[n] = 0
            out.append(n)
            continue
        k = seen[n]
        while True:
            k += 1
            candidate = f"{n}_{k}"
            if candidate not in taken:
                break
        seen[n] = k
        taken.add(candidate)
        out.append(candidate)
    return out


def load_leaderboard(spec_path: str | Path, data_root: str | Path | None = None) -> ScoreTable:
    """The score table a leaderboard spec describes, reading its CSV from the data root.

    ``data_root`` is the data root already resolved by the caller (:func:`ranking.load_table`
    or a command's edge): a path, or None when there is none.
    """
    spec_path = Path(spec_path)
    spec = read_spec(spec_path)
    where = str(spec_path)
    file = Path(spec.file)
    if not file.is_absolute():
        if data_root is None:
            raise UserError(
                f"{where}: the leaderboard file {file} is relative to the data root: pass --data-root DIR or set VNR_DATA_ROOT"
            )
        file = Path(data_root) / file
    try:
        raw = pd.read_csv(file, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise UserError(f"{where}: leaderboard file {file} not found under the data root") from None
    except pd.errors.EmptyDataError:
        raise UserError(f"{where}: leaderboard file {file} is empty: it needs a header row and one row per "
                        "model") from None
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: cannot read {file}: {exc}") from None
    if raw.empty:
        raise UserError(f"{where}: leaderboard file {file} has no rows under its header: it needs one row per model")
    raw.columns = [str(c).strip() for c in raw.columns]
    header = _csv_header(file)
    missing_tokens = set(spec.missing or []) | {""}

    # row names
    if spec.names is not None:
        names = list(spec.names)
        if len(names) != len(raw):
            raise UserError(f"{where}: names: it lists {len(names)} rows but {file.name} has {len(raw)} — "
                            "give one name per row, in row order")
    else:
        col = spec.model_column
        if col not in raw.columns:
            raise UserError(f"{where}: model_column {col!r} is not a column of {file.name} (columns: {', '.join(raw.columns)})")
        for line, value in enumerate(raw[col], start=2):  # tabs and line breaks are spaces; any other is an error
            if any(unicodedata.category(c) == "Cc" and c not in "\t\n\r" for c in str(value)):
                raise UserError(f"{where}: line {line} of {file.name} has a control character in its model name "
                                f"{str(value)[:60]!r} (column {col!r}): remove it (a name is printable text)")
        names = [" ".join(str(v).split()) for v in raw[col]]
        if "" in names:
            raise UserError(
                f"{where}: line {names.index('') + 2} of {file.name} has no model name in column {col!r}: "
                "name every model (or give 'names:')"
            )
    names = dedupe(names)
    rename = dict(spec.rename or {})
    unknown_rows = [k for k in rename if k not in names]
    if unknown_rows:
        raise UserError(f"{where}: rename names unknown row {unknown_rows[0]!r}")
    names = [rename.get(n, n) for n in names]

    ignore = list(spec.ignore or [])
    for c in ignore:
        if c not in raw.columns:
            raise UserError(f"{where}: ignored column {c!r} is not in {file.name} (columns: {', '.join(raw.columns)})")
    described = spec.criteria or {}
    for c in described:
        if c not in raw.columns:
            raise UserError(f"{where}: criterion {c!r} is not a column of {file.name} (columns: {', '.join(raw.columns)})")
        if c in ignore:
            raise UserError(f"{where}: column {c!r} is both ignored and a criterion")
    model_col = spec.model_column if spec.names is None else None
    columns = list(described) if described else [c for c in raw.columns if c not in ignore and c != model_col]
    if not columns:
        raise UserError(f"{where}: no criteria left: every column of {file.name} besides the model column is in "
                        f"ignore ({', '.join(ignore)}); keep at least one score column (or list criteria:)")
    for c in columns:
        j = list(raw.columns).index(c)
        if j < len(header) and not header[j].strip():
            raise UserError(f"{where}: column {j + 1} of {file.name} has a blank header: name it, or list criteria")

    crits: list[Criterion] = []
    data: list[np.ndarray] = []
    for col in columns:
        attrs = described[col].model_dump() if col in described else {}
        cells = [str(v).strip() for v in raw[col]]
        split = attrs.pop("split", None)
        if split is None and any(_SLASH.match(v) for v in cells if v not in missing_tokens):
            split = [f"{col}/1", f"{col}/2"]
        weight = attrs.pop("weight", 1.0)
        base = {k: v for k, v in attrs.items() if k in ("direction", "group", "unit")}
        if split is None:
            crits.append(Criterion(col, weight=weight, source=file.name, **base))
            data.append(_parse(cells, col, names, missing_tokens, where))
            continue
        halves: list[list[str]] = [[], []]
        for name, v in zip(names, cells):
            if v in missing_tokens:
                halves[0].append("")
                halves[1].append("")
                continue
            parts = v.split("/")
            if len(parts) != 2:
                raise UserError(f"{where}: cell of {name!r} in {col!r} is {v!r}, expected 'a/b'")
            halves[0].append(parts[0].strip())
            halves[1].append(parts[1].strip())
        for sub, cells_half in zip(split, halves):
            crits.append(Criterion(str(sub), weight=weight / 2, source=f"{file.name}:{col}", **base))
            data.append(_parse(cells_half, str(sub), names, missing_tokens, where))
    values = np.column_stack(data)
    return ScoreTable(tuple(names), tuple(crits), values, source=where)


def _parse(cells: list[str], col: str, names: list[str], missing: set[str], where: str) -> np.ndarray:
    out = np.empty(len(cells))
    for i, v in enumerate(cells):
        if v in missing:
            out[i] = np.nan
            continue
        try:
            out[i] = float(v)
        except ValueError:
            raise UserError(f"{where}: score of {names[i]!r} on {col!r} is {v!r}, not a number") from None
    return out
