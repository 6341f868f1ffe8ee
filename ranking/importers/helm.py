"""HELM's summarized leaderboard tables: the JSON of a group's tables (``runs/<suite>/groups/<group>.json``).

A file is a list of tables, each ``{"title", "header": [{"value", "lower_is_better", "metadata"}, ...],
"rows": [[{"value"}, ...], ...]}``; the first header cell is the model column. Each other column
becomes a criterion:

* name: the header's ``value`` (``MMLU - EM``); a name that two tables share is prefixed with the
  table's title (``Robustness / MMLU - EM``);
* direction: the header's ``lower_is_better``; a column without it (HELM's counts such as
  ``# eval`` or ``# prompt tokens`` are not scores) is left out, named in a note, unless the caller
  states its direction (``--higher`` / ``--lower`` with the column name);
* group: the table's title (Accuracy, Efficiency, Calibration, ...); unit: the metric named in the
  header's ``metadata`` (``EM``), else "as reported";
* ``Mean win rate`` columns are left out (a ranking of the models, not a score; note).

A cell without a value (HELM's "No matching runs") is a missing score; a value that is there
but is no number is an error. HELM's summary tables carry no standard errors. A column given
twice (the same table in two files) keeps the file given last, said in a note; with
``on_duplicate="error"`` that is refused. A model in several rows of one table is kept once
when the rows' scores agree (note) and refused when they differ (the rows carry no date, so
none is the newest) or with ``on_duplicate="error"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    expect,
    files_in,
    json_kind,
    json_path,
    optional,
    read_json,
    score,
)


def table_files(paths: Sequence[Path]) -> list[Path]:
    """The JSON files given, or the ``*.json`` directly inside a given folder (an empty folder is an error)."""
    return files_in(paths, "HELM summary", "*.json",
                    "HELM group JSON (*.json): give runs/<suite>/groups/<group>.json")


def tables_of(doc: Any, path: Path) -> list[tuple[list[int], Mapping[str, Any]]]:
    """The tables of one file (a list of tables, or one table) with where each is in the file, every part this
    importer reads checked for its shape (one-line :class:`UserError` naming the file and the place)."""
    tables = [([], doc)] if isinstance(doc, Mapping) else list(enumerate(doc)) if isinstance(doc, list) else []
    if not tables:
        raise UserError(f"{path} is not a HELM summary: expected a list of tables with title, header and rows")
    out = []
    for i, t in tables:
        at = [i] if isinstance(i, int) else []
        if not (isinstance(t, Mapping) and isinstance(t.get("header"), list) and isinstance(t.get("rows"), list)
                and len(t["header"]) >= 1):
            raise UserError(f"{path} is not a HELM summary: a table lacks 'header' or 'rows'")
        optional(t, "title", "text", path, at)
        for j, head in enumerate(t["header"]):
            expect(head, "object", path, [*at, "header", j], 'an object {"value": NAME, "lower_is_better": ...}')
            optional(head, "value", "text", path, [*at, "header", j], "text (the column's name)")
            optional(head, "lower_is_better", "bool", path, [*at, "header", j], "true/false (or absent)")
            meta = optional(head, "metadata", "object", path, [*at, "header", j], 'an object {"metric": ...}')
            if meta is not None:
                optional(meta, "metric", "text", path, [*at, "header", j, "metadata"], "text (the metric's name)")
        for r, row in enumerate(t["rows"]):
            expect(row, "list", path, [*at, "rows", r], "a list of cells")
            if len(row) != len(t["header"]):
                raise UserError(f"{path}: {json_path([*at, 'rows', r])} has {len(row)} cell(s), the header "
                                f"{len(t['header'])}: give every row one cell per column")
            for j, cell in enumerate(row):
                if cell is not None:
                    expect(cell, "object", path, [*at, "rows", r, j], 'an object {"value": ...}')
            model = (row[0] or {}).get("value") if row else None
            if not isinstance(model, str) or not model.strip():
                raise UserError(f"{path}: {json_path([*at, 'rows', r, 0, 'value'])} must be the model's name "
                                f"(text), not {'empty text' if isinstance(model, str) else json_kind(model)}")
        out.append((at, t))
    return out


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of HELM summary tables (module docstring)."""
    from ranking.table import Criterion

    found: list[tuple[Path, list[int], Mapping[str, Any], int, str]] = []  # (file, where, table, column, value)
    for path in table_files(paths):
        for at, t in tables_of(read_json(path, "HELM summary"), path):
            for j, head in enumerate(t["header"][1:], start=1):
                found.append((path, at, t, j, str(head.get("value") or f"column {j}")))
    counts: dict[str, int] = {}
    for *_, name in found:
        counts[name] = counts.get(name, 0) + 1
    criteria: dict[str, Criterion] = {}
    scores: dict[str, dict[str, float]] = {}
    undirected: list[str] = []
    win_rates: list[str] = []
    twice: dict[tuple[Path, str, str], str] = {}  # (file, table, model) → the rows listing it, when several
    for path, at, t, j, value in found:
        head = t["header"][j]
        title = str(t.get("title") or t.get("name") or "HELM")
        name = value if counts[value] == 1 else f"{title} / {value}"
        if "win rate" in value.lower():
            win_rates.append(name)
            continue
        direction = options.stated(name, value)
        if direction is None and isinstance(head.get("lower_is_better"), bool):
            direction = "lower" if head["lower_is_better"] else "higher"
        if direction is None:
            undirected.append(name)
            continue
        metric = (head.get("metadata") or {}).get("metric")
        if name in criteria:
            if options.on_duplicate == "error":
                raise UserError(f"HELM column {name!r} appears twice ({path}): give each table once, or pass "
                                "--on-duplicate newest")
            options.note(f"helm: column {name!r} appears twice: kept the one of {path} (given last)")
            for by_column in scores.values():
                by_column.pop(name, None)  # every score of the column from the file given last, none of the other
        criteria[name] = Criterion(name, direction=direction, group=title, unit=str(metric) if metric else "as reported",
                                   source=f"HELM {path.stem}")
        column: dict[str, list[tuple[int, float | None]]] = {}
        for r, row in enumerate(t["rows"]):
            model = row[0]["value"].strip()
            x = score((row[j] or {}).get("value"), f"{path}: table {title!r}, model {model!r}, column {value!r}",
                      absent='no "value" or null')
            column.setdefault(model, []).append((r, x))
        for model, cells in column.items():
            if len(cells) > 1:
                _duplicate_rows(path, at, title, model, name, cells, options)
                twice[(path, title, model)] = ", ".join(json_path([*at, "rows", r]) for r, _ in cells)
            scores.setdefault(model, {})
            if cells[0][1] is not None:
                scores[model][name] = cells[0][1]
    for (path, title, model), rows in twice.items():
        options.note(f"helm: table {title!r} of {path} lists model {model!r} more than once ({rows}) with the same "
                     "scores: kept one")
    if win_rates:
        options.note(f"helm: left out {len(win_rates)} win-rate column(s) ({win_rates[0]}, ...): rankings, not scores")
    if undirected:
        options.note(f"helm: left out {len(undirected)} column(s) whose header states no direction "
                     f"({', '.join(undirected[:3])}{', ...' if len(undirected) > 3 else ''}); --higher/--lower NAME "
                     "imports one")
    if not criteria:
        raise UserError(f"{describe_paths(paths)}: no HELM column with a stated direction")
    return assemble(scores, list(criteria.values()), f"helm {describe_paths(paths)}", options)


def _duplicate_rows(path: Path, at: list[int], title: str, model: str, column: str,
                    cells: list[tuple[int, float | None]], options: Options) -> None:
    """A model listed in several rows of one table: refused with ``on_duplicate="error"``, or when the rows' scores
    differ (HELM's rows carry no date, so none of them is the newest)."""
    rows = ", ".join(json_path([*at, "rows", r]) for r, _ in cells)
    if options.on_duplicate == "error":
        raise UserError(f"{path}: table {title!r} lists model {model!r} {len(cells)} times ({rows}): keep one row, or "
                        "pass --on-duplicate newest (which keeps one when their scores agree)")
    if len({x for _, x in cells}) > 1:
        shown = ", ".join("missing" if x is None else f"{x:g}" for _, x in cells)
        raise UserError(f"{path}: table {title!r} lists model {model!r} {len(cells)} times ({rows}) with different "
                        f"scores in column {column!r} ({shown}); HELM's rows carry no date, so none is the newest: "
                        "keep one row")
