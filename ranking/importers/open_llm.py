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
with ``on_duplicate="error"``, is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import Options, assemble, describe_paths, existing, number, pick_newest

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


def read_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows as dicts) of a CSV or parquet export."""
    if path.suffix.lower() == ".parquet":
        try:
            import pandas as pd

            frame = pd.read_parquet(path)
        except ImportError:
            raise UserError(f"{path}: reading parquet needs pyarrow (pip install pyarrow), or export the table "
                            "as CSV") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        return [str(c) for c in frame.columns], frame.to_dict("records")
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            return list(reader.fieldnames or []), rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of the leaderboard export(s) (module docstring)."""
    from ranking.table import Criterion

    candidates: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
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
        for row in rows:
            model = str(row.get(model_col) or "").strip()
            if model:
                candidates.setdefault(model, []).append((str(row.get(DATE_COLUMN) or ""), str(path), row))
    if not candidates:
        raise UserError(f"{describe_paths(paths)}: no model rows")
    scores: dict[str, dict[str, float]] = {}
    for model, rows in candidates.items():
        row = pick_newest(rows, f"model {model!r} of the leaderboard", options)
        scores[model] = {c: x for c in columns if (x := number(row.get(c))) is not None}
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
    return assemble(scores, criteria, f"open-llm-leaderboard {describe_paths(paths)}", options)
