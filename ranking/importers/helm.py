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

A cell without a value (HELM's "No matching runs") is a missing score. HELM's summary tables
carry no standard errors. A column given twice (the same table in two files) keeps the file
given last, said in a note; with ``on_duplicate="error"`` that is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import Options, assemble, describe_paths, files_in, number, read_json


def table_files(paths: Sequence[Path]) -> list[Path]:
    """The JSON files given, or the ``*.json`` directly inside a given folder (an empty folder is an error)."""
    return files_in(paths, "HELM summary", "*.json",
                    "HELM group JSON (*.json): give runs/<suite>/groups/<group>.json")


def tables_of(doc: Any, path: Path) -> list[Mapping[str, Any]]:
    """The tables of one file (a list of tables, or one table), each checked for title, header and rows."""
    tables = [doc] if isinstance(doc, Mapping) else doc
    if not isinstance(tables, list) or not tables:
        raise UserError(f"{path} is not a HELM summary: expected a list of tables with title, header and rows")
    for t in tables:
        if not (isinstance(t, Mapping) and isinstance(t.get("header"), list) and isinstance(t.get("rows"), list)
                and len(t["header"]) >= 1):
            raise UserError(f"{path} is not a HELM summary: a table lacks 'header' or 'rows'")
    return tables


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of HELM summary tables (module docstring)."""
    from ranking.table import Criterion

    found: list[tuple[Path, Mapping[str, Any], int, str]] = []  # (file, table, column, value)
    for path in table_files(paths):
        for t in tables_of(read_json(path, "HELM summary"), path):
            for j, head in enumerate(t["header"][1:], start=1):
                found.append((path, t, j, str((head or {}).get("value", f"column {j}"))))
    counts: dict[str, int] = {}
    for _, _, _, name in found:
        counts[name] = counts.get(name, 0) + 1
    criteria: dict[str, Criterion] = {}
    scores: dict[str, dict[str, float]] = {}
    undirected: list[str] = []
    win_rates: list[str] = []
    for path, t, j, value in found:
        head = t["header"][j] or {}
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
        criteria[name] = Criterion(name, direction=direction, group=title, unit=str(metric) if metric else "as reported",
                                   source=f"HELM {path.stem}")
        for row in t["rows"]:
            if not row or len(row) <= j:
                continue
            model = str((row[0] or {}).get("value", "")).strip()
            score = number((row[j] or {}).get("value"))
            if model and score is not None:
                scores.setdefault(model, {})[name] = score
    if win_rates:
        options.note(f"helm: left out {len(win_rates)} win-rate column(s) ({win_rates[0]}, ...): rankings, not scores")
    if undirected:
        options.note(f"helm: left out {len(undirected)} column(s) whose header states no direction "
                     f"({', '.join(undirected[:3])}{', ...' if len(undirected) > 3 else ''}); --higher/--lower NAME "
                     "imports one")
    if not criteria:
        raise UserError(f"{describe_paths(paths)}: no HELM column with a stated direction")
    return assemble(scores, list(criteria.values()), f"helm {describe_paths(paths)}", options)
