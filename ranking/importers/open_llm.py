"""The Open LLM Leaderboard's published table (the ``open-llm-leaderboard/contents`` export, CSV or parquet).

One row per model (``fullname``, else ``eval_name``); the columns imported:

* benchmarks, group ``performance``, higher is better, unit "normalized score (0-100)" (the
  leaderboard's own normalisation; the ``... Raw`` columns are left out): :data:`BENCHMARKS`
  (version 2: IFEval, BBH, MATH Lvl 5, GPQA, MUSR, MMLU-PRO; version 1's ARC, HellaSwag, MMLU,
  TruthfulQA, Winogrande, GSM8K where a v1 export has them, unit "score (0-100)");
* costs, group ``efficiency``, lower is better: :data:`COSTS` (``CO₂ cost (kg)`` in kg CO2eq,
  ``#Params (B)`` in billions of parameters).

The ``Average ⬆️`` column is left out (it is a mean of the benchmarks, which the voting rules
aggregate themselves) and the rest (licence, likes, dates, flags) are not scores; a note says so.
A model listed twice (e.g. two precisions) keeps its newest ``Submission Date`` row (note) or,
with ``on_duplicate="error"``, is refused; so is a row without a readable date among them, and
rows of the same date with different scores (none is the newest). A cell that is there but is
no number (``40%``) is an error; an empty one is a missing score.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import Options, assemble, describe_paths, existing, pick_newest, read_csv, score

#: benchmark column → unit (higher is better, group performance).
BENCHMARKS: dict[str, str] = {
    **{b: "normalized score (0-100)" for b in ("IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO")},
    **{b: "score (0-100)" for b in ("ARC", "HellaSwag", "MMLU", "TruthfulQA", "Winogrande", "GSM8K")},
}
#: cost column → unit (lower is better, group efficiency).
COSTS: dict[str, str] = {"CO₂ cost (kg)": "kg CO2eq", "#Params (B)": "billion parameters"}
AVERAGE = "Average ⬆️"
MODEL_COLUMNS = ("fullname", "eval_name")
DATE_COLUMN = "Submission Date"


def read_rows(path: Path) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """(columns, [(where, row as a dict)]) of a CSV or parquet export (``where``: ``line N`` / ``row N``)."""
    if path.suffix.lower() == ".parquet":
        try:
            import pandas as pd

            frame = pd.read_parquet(path)
        except ImportError:
            raise UserError(f"{path}: reading parquet needs pyarrow (pip install pyarrow), or export the table "
                            "as CSV") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        return [str(c) for c in frame.columns], [(f"row {i}", row) for i, row in
                                                  enumerate(frame.to_dict("records"), start=1)]
    header, rows = read_csv(path, "the Open LLM Leaderboard table")
    return header, [(f"line {line}", row) for line, row in rows]


def submission_time(value: Any, path: Path, where: str, model: str) -> float:
    """A row's ``Submission Date`` as a time stamp (to find a model's newest row); a one-line :class:`UserError`
    where it is empty or no date.

    >>> submission_time("2024-06-12", Path("c.csv"), "line 2", "m") < submission_time("2024-06-12T10:00:00Z", Path("c.csv"), "line 3", "m")
    True
    """
    from datetime import datetime, timezone

    if isinstance(value, datetime) and type(value).__name__ != "NaTType":
        when = value
    else:
        text = "" if value is None or type(value).__name__ == "NaTType" or value != value else str(value).strip()
        try:
            when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            shown_value = repr(text) if text else "empty"
            raise UserError(f"{path}: {where}: model {model!r} is listed more than once and this row's "
                            f"{DATE_COLUMN!r} is {shown_value}, not a date (YYYY-MM-DD or ISO 8601), so the newest "
                            "row cannot be told: give its date, or keep one row") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of the leaderboard export(s) (module docstring)."""
    from ranking.table import Criterion

    found: dict[str, list[tuple[Path, str, Any, dict[str, float]]]] = {}  # model → (file, where, date, scores)
    columns: list[str] = []
    for path in existing(paths, "Open LLM Leaderboard table"):
        if path.is_dir():
            raise UserError(f"{path} is a folder: give the leaderboard table file (CSV or parquet)")
        header, rows = read_rows(path)
        model_col = next((c for c in MODEL_COLUMNS if c in header), None)
        if model_col is None:
            raise UserError(f"{path} has no model column ({' or '.join(MODEL_COLUMNS)}): is it the Open LLM "
                            f"Leaderboard's table? (columns: {', '.join(header[:12])})")
        if not any(b in header for b in BENCHMARKS):
            raise UserError(f"{path} has none of the leaderboard's benchmark columns ({', '.join(BENCHMARKS)})")
        columns += [c for c in header if (c in BENCHMARKS or c in COSTS) and c not in columns]
        for where, row in rows:
            name = row.get(model_col)
            model = name.strip() if isinstance(name, str) else ""
            if not model:
                raise UserError(f"{path}: {where} has no model name in column {model_col!r}: name every model "
                                "(or delete the row)")
            scores = {}
            for c in columns:
                x = score(row.get(c), f"{path}: {where}, model {model!r}, column {c!r}")
                if x is not None:
                    scores[c] = x
            found.setdefault(model, []).append((path, where, row.get(DATE_COLUMN), scores))
    if not found:
        raise UserError(f"{describe_paths(paths)}: no model rows")
    by_model: dict[str, dict[str, float]] = {}
    for model, rows in found.items():
        candidates = [(submission_time(date, path, where, model) if len(rows) > 1 else 0.0, f"{path} {where}", scores)
                      for path, where, date, scores in rows]
        by_model[model] = pick_newest(candidates, f"model {model!r} of the leaderboard", options, stamp=DATE_COLUMN)
    options.note("open-llm-leaderboard: benchmarks are performance (higher is better), CO₂ cost and #Params "
                 f"efficiency (lower is better); left out the {AVERAGE!r} column (a mean of the benchmarks) and the "
                 "non-score columns")
    criteria = []
    for c in columns:
        stated = options.stated(c)
        if c in BENCHMARKS:
            criteria.append(Criterion(c, direction=stated or "higher", group="performance", unit=BENCHMARKS[c],
                                      source="Open LLM Leaderboard"))
        else:
            criteria.append(Criterion(c, direction=stated or "lower", group="efficiency", unit=COSTS[c],
                                      source="Open LLM Leaderboard"))
    return assemble(by_model, criteria, f"open-llm-leaderboard {describe_paths(paths)}", options)
