"""The Open LLM Leaderboard's published table (``open-llm-leaderboard/contents``, v2, and the archived v1
``open-llm-leaderboard-old/contents``), as its CSV or parquet export.

**Identity** is the leaderboard's own key: one model per (``fullname``, ``Precision``) — the v2 table
lists some models in float16 *and* bfloat16, evaluated on the same day, and these are two entries of
the board. A model is shown by its ``fullname``, with the precision in brackets
(``org/m (bfloat16)``) only where the tables give it in several precisions; a table without
``fullname`` is keyed by ``eval_name`` (which carries the precision). The same key listed twice
(two snapshots of the table) keeps its newest ``Submission Date`` (v1: ``date``) row with a note,
or is refused with ``on_duplicate="error"``.

**The table as the board's page shows it** is read too: a ``Model`` column (the name, possibly a Markdown or
HTML link) instead of ``fullname``, ``Average`` for ``Average ⬆️``, values with the unit the page writes after them
(``6.51 %`` in a benchmark column, ``0.09 kg`` for CO₂, ``7.24 B`` for parameters), and rows the page lists twice
(identical: read once, noted).

**One vote per benchmark.** Each benchmark column (:data:`V2` / :data:`V1`) is one criterion,
group ``performance``, higher is better, with ``benchmark``/``task`` the benchmark, ``metric``,
``settings`` (the leaderboard's n-shot and version) and ``range``. v2's normalised score (the
random-guess baseline subtracted, then rescaled to 0-100, a score below the baseline set to 0:
https://huggingface.co/docs/leaderboards/open_llm_leaderboard/normalization) has range 0-100; its
``<benchmark> Raw`` column (the unnormalised accuracy, 0-1) is kept as a ``detail`` column of the same
benchmark, so it does not vote by default. v1's scores are percentages (0-100).

**Costs**, group ``efficiency``, lower is better, each its own benchmark: ``CO₂ cost (kg)`` and
``#Params (B)``, both ``>= 0``. The leaderboard writes an unknown parameter count as ``0`` (and, in
the v2 table, a few times as ``-1``): these are placeholders, left missing with one note.

A value outside its range (a normalised score of 150, a raw accuracy above 1, negative CO₂ or
parameters other than the ``-1`` placeholder) is a one-line error, or missing with a note under
``options.out_of_range == "missing"``. ``Average ⬆️`` is not imported (it is the board's own
aggregate of the benchmarks): :func:`board_scores` recomputes it from the table, and a row whose
``Average ⬆️`` is not the mean of its benchmarks is named in a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    existing,
    in_range,
    pick_newest,
    read_csv,
    score,
)

BOARD = "open-llm-leaderboard"
SOURCE = "Open LLM Leaderboard"


@dataclass(frozen=True)
class Benchmark:
    """A benchmark column of the leaderboard: its metric, n-shot, unit and valid range."""

    metric: str
    n_shot: int
    unit: str
    lo: float
    hi: float


#: v2 (June 2024 –): benchmark column → what it holds. Its "<name> Raw" column is the raw accuracy (0-1).
V2: dict[str, Benchmark] = {
    name: Benchmark("normalized score", shots, "normalized score (0-100)", 0.0, 100.0)
    for name, shots in (("IFEval", 0), ("BBH", 3), ("MATH Lvl 5", 4), ("GPQA", 0), ("MUSR", 0), ("MMLU-PRO", 5))
}
#: v1 (2023 – June 2024): benchmark column → what it holds (percentages, as the archived table gives them).
V1: dict[str, Benchmark] = {
    "ARC": Benchmark("acc_norm", 25, "score (0-100)", 0.0, 100.0),
    "HellaSwag": Benchmark("acc_norm", 10, "score (0-100)", 0.0, 100.0),
    "MMLU": Benchmark("acc", 5, "score (0-100)", 0.0, 100.0),
    "TruthfulQA": Benchmark("mc2", 0, "score (0-100)", 0.0, 100.0),
    "Winogrande": Benchmark("acc", 5, "score (0-100)", 0.0, 100.0),
    "GSM8K": Benchmark("acc", 5, "score (0-100)", 0.0, 100.0),
}
BENCHMARKS: dict[str, Benchmark] = {**V2, **V1}
RAW = " Raw"
#: cost column → unit (lower is better, group efficiency, range >= 0).
COSTS: dict[str, str] = {"CO₂ cost (kg)": "kg CO2eq", "#Params (B)": "billion parameters"}
PARAMS = "#Params (B)"
#: values of ``#Params (B)`` that mean "unknown" (0 throughout; -1 in a few v2 rows).
PARAMS_PLACEHOLDERS = (0.0, -1.0)
AVERAGE = "Average ⬆️"
AVERAGES = (AVERAGE, "Average")  # the export's name, the page's
#: the model's column: the exports' ``fullname`` / ``eval_name``; the page's ``Model`` (copied from the board, a
#: name that may be a link)
MODEL_COLUMNS = ("fullname", "eval_name", "Model")
#: units the board's page writes after a value (``6.51 %``, ``0.09 kg``, ``7.24 B``), by column kind
PAGE_UNITS = {"benchmark": ("%",), "raw": ("%",), "CO₂ cost (kg)": ("kg",), PARAMS: ("B",)}
PRECISION = "Precision"
DATE_COLUMNS = ("Submission Date", "date")  # v2, v1


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


def submission_time(value: Any, path: Path, where: str, model: str, column: str = DATE_COLUMNS[0]) -> float:
    """A row's submission date as a time stamp (to find a key's newest row); a one-line :class:`UserError`
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
                            f"{column!r} is {shown_value}, not a date (YYYY-MM-DD or ISO 8601), so the newest "
                            "row cannot be told: give its date, or keep one row") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


@dataclass
class Row:
    """One row of a table: where it is, its key, its submission date and its scores."""

    path: Path
    where: str
    name: str
    precision: str | None
    date: Any
    date_column: str
    scores: dict[str, float]
    average: float | None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def model_name(value: Any) -> str:
    """A model's name as a row gives it: the export's text, or the page's cell, which may be a Markdown or HTML
    link and carry a marker after the name.

    >>> model_name("[org/m-7b](https://huggingface.co/org/m-7b)"), model_name('<a href="x">org/m</a> 📑'), model_name(" org/m ")
    ('org/m-7b', 'org/m', 'org/m')
    """
    import re

    text = _text(value)
    link = re.match(r"^\[([^\]]+)\]\([^)]*\)", text) or re.match(r"^<a\b[^>]*>(.*?)</a>", text)
    if link:
        text = re.sub(r"<[^>]+>", "", link.group(1))
    return text.split()[0] if text.split() else ""


def page_value(value: Any, column: str) -> Any:
    """A value with the unit the board's page writes after it (``6.51 %`` in a benchmark column, ``0.09 kg`` for
    CO₂) as the number the export holds; any other value as it is.

    >>> page_value("6.51 %", "IFEval"), page_value("0.09 kg", "CO₂ cost (kg)"), page_value("6.51 kg", "IFEval")
    ('6.51', '0.09', '6.51 kg')
    """
    if not isinstance(value, str):
        return value
    kind = "benchmark" if column in BENCHMARKS else "raw" if column.endswith(RAW) else column
    text = value.strip()
    for unit in PAGE_UNITS.get(kind, ()):
        if text.endswith(unit) and text[: -len(unit)].strip():
            return text[: -len(unit)].strip()
    return value


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of the leaderboard export(s) (module docstring)."""
    from ranking.table import Criterion

    rows: list[Row] = []
    columns: list[str] = []
    placeholders: list[tuple[str, str | None]] = []
    by_fullname = True
    for path in existing(paths, "Open LLM Leaderboard table"):
        if path.is_dir():
            raise UserError(f"{path} is a folder: give the leaderboard table file (CSV or parquet)")
        header, table = read_rows(path)
        model_col = next((c for c in MODEL_COLUMNS if c in header), None)
        if model_col is None:
            raise UserError(f"{path} has no model column ({' or '.join(MODEL_COLUMNS)}): is it the Open LLM "
                            f"Leaderboard's table? (columns: {', '.join(header[:12])})")
        by_fullname = by_fullname and model_col in ("fullname", "Model")
        if not any(b in header for b in BENCHMARKS):
            raise UserError(f"{path} has none of the leaderboard's benchmark columns ({', '.join(BENCHMARKS)})")
        mine = [c for c in header if c in BENCHMARKS or c in COSTS
                or (c.endswith(RAW) and c[: -len(RAW)] in V2)]
        columns += [c for c in mine if c not in columns]
        date_col = next((c for c in DATE_COLUMNS if c in header), DATE_COLUMNS[0])
        benchmarks_here = [c for c in header if c in BENCHMARKS]
        average_col = next((c for c in AVERAGES if c in header), None)
        for where, row in table:
            model = model_name(row.get(model_col)) if model_col == "Model" else _text(row.get(model_col))
            if not model:
                raise UserError(f"{path}: {where} has no model name in column {model_col!r}: name every model "
                                "(or delete the row)")
            precision = _text(row.get(PRECISION)) or None
            scores: dict[str, float] = {}
            for c in mine:
                at = f"{path}: {where}, model {model!r}, column {c!r}"
                x = score(page_value(row.get(c), c), at)
                if x is None:
                    continue
                if c == PARAMS and x in PARAMS_PLACEHOLDERS:
                    placeholders.append((model, precision))
                    continue
                x = in_range(x, *_range(c), at, options)
                if x is not None:
                    scores[c] = x
            average = score(page_value(row.get(average_col), "IFEval"),  # a benchmark's unit, %
                            f"{path}: {where}, model {model!r}, column {average_col!r}") \
                if average_col is not None and benchmarks_here else None
            rows.append(Row(path, where, model, precision, row.get(date_col), date_col, scores, average))
    if not rows:
        raise UserError(f"{describe_paths(paths)}: no model rows")
    by_model, several = _one_row_per_key(rows, by_fullname, options)
    if placeholders:
        names = [f"{m} ({p})" if m in several else m for m, p in placeholders]
        shown = ", ".join(names[:5]) + (f", … ({len(names)} rows)" if len(names) > 5 else "")
        options.note(f"open-llm-leaderboard: {PARAMS!r} is 0 or -1 (the leaderboard's 'unknown') for "
                     f"{len(names)} row(s), left missing: {shown}", kind="placeholder", ranks=True)
    _check_averages(rows, options)
    options.note("open-llm-leaderboard: one criterion per benchmark (performance, higher is better), its 'Raw' "
                 "column kept as detail (no vote); CO₂ cost and #Params efficiency (lower is better); "
                 f"{AVERAGE!r} left out (the board's own mean, see `vnr rank --board`)", kind="format")
    criteria = [_criterion(c, options, Criterion) for c in columns]
    return assemble(by_model, criteria, f"{BOARD} {describe_paths(paths)}", options, board=BOARD)


def _range(column: str) -> tuple[float | None, float | None]:
    """The valid values of a column."""
    if column in BENCHMARKS:
        return BENCHMARKS[column].lo, BENCHMARKS[column].hi
    if column.endswith(RAW):
        return 0.0, 1.0
    return 0.0, None


def _criterion(column: str, options: Options, Criterion: Any) -> Any:
    """The criterion of one imported column."""
    stated = options.stated(column)
    if column in BENCHMARKS:
        b = BENCHMARKS[column]
        version = "v2" if column in V2 else "v1"
        return Criterion(column, direction=stated or "higher", group="performance", unit=b.unit,
                         source=f"{SOURCE} {version}", benchmark=column, task=column, metric=b.metric,
                         settings={"n_shot": b.n_shot, "leaderboard": version}, range=(b.lo, b.hi))
    if column.endswith(RAW):
        bench = column[: -len(RAW)]
        return Criterion(column, direction=stated or "higher", group="performance", unit="raw score (0-1)",
                         source=f"{SOURCE} v2", benchmark=bench, task=bench, metric="raw score",
                         settings={"n_shot": V2[bench].n_shot, "leaderboard": "v2"}, range=(0.0, 1.0), detail=True)
    return Criterion(column, direction=stated or "lower", group="efficiency", unit=COSTS[column], source=SOURCE,
                     benchmark=column, metric=column, range=(0.0, None))


def _one_row_per_key(rows: list[Row], by_fullname: bool,
                     options: Options) -> tuple[dict[str, dict[str, float]], list[str]]:
    """(model name → scores, the models listed in several precisions): one entry per (fullname, precision), named
    with the precision where a model has several."""
    keyed: dict[tuple[str, str | None], list[Row]] = {}
    for r in rows:
        keyed.setdefault((r.name, r.precision if by_fullname else None), []).append(r)
    precisions: dict[str, set[str | None]] = {}
    for name, precision in keyed:
        precisions.setdefault(name, set()).add(precision)
    several = sorted(n for n, p in precisions.items() if len(p) > 1)
    if several:
        shown = ", ".join(several[:5]) + (f", … ({len(several)} models)" if len(several) > 5 else "")
        options.note(f"open-llm-leaderboard: {len(several)} model(s) are listed in several precisions, each one "
                     f"its own entry as on the board (named 'MODEL (PRECISION)'): {shown}", kind="identity")
    out: dict[str, dict[str, float]] = {}
    copies = []
    for (name, precision), found in keyed.items():
        label = f"{name} ({precision})" if name in several else name
        if len(found) > 1 and all(r.scores == found[0].scores for r in found[1:]):
            copies.append(f"{label} ({len(found)} rows)")  # the page lists some rows twice (pinned, paged)
            found = found[:1]
        candidates = [(submission_time(r.date, r.path, r.where, label, r.date_column) if len(found) > 1 else 0.0,
                       f"{r.path} {r.where}", r.scores) for r in found]
        out[label] = pick_newest(candidates, f"model {label!r} of the leaderboard", options,
                                 stamp=found[0].date_column)
    if copies:
        options.note(f"open-llm-leaderboard: {len(copies)} model(s) listed in identical rows, read once: "
                     + ", ".join(copies[:5]) + (" …" if len(copies) > 5 else ""), kind="duplicate")
    return out, several


def _check_averages(rows: list[Row], options: Options) -> None:
    """Name the rows whose ``Average ⬆️`` is not the mean of their benchmark scores (the board's own aggregate)."""
    off = []
    for r in rows:
        values = [v for c, v in r.scores.items() if c in BENCHMARKS]
        if r.average is None or not values:
            continue
        version = V2 if any(c in V2 for c in r.scores) else V1
        if len(values) == len(version) and abs(sum(values) / len(values) - r.average) > 1e-6:
            off.append(f"{r.name} ({r.where} of {r.path}: {r.average:g} vs {sum(values) / len(values):g})")
    if off:
        options.note(f"open-llm-leaderboard: {len(off)} row(s) carry an {AVERAGE!r} that is not the mean of their "
                     f"benchmarks: {'; '.join(off[:3])}" + (" …" if len(off) > 3 else ""), kind="board")


def board_scores(table: Any) -> Any:
    """The leaderboard's own aggregate per model: the mean of its benchmark scores (v2: the normalised ones; v1:
    the six percentages), NaN where a model lacks one — the board's ``Average ⬆️``.

    Only the table's voting benchmark columns of the leaderboard count (not the ``Raw`` details, not the costs).
    """
    import numpy as np

    cols = [j for j, c in enumerate(table.criteria)
            if c.name in BENCHMARKS and not getattr(c, "detail", False)
            and (c.source or "").startswith(SOURCE)]
    if not cols:
        raise UserError(f"{table.source}: no Open LLM Leaderboard benchmark column to average "
                        f"({', '.join(BENCHMARKS)})")
    values = np.asarray(table.values, dtype=float)[:, cols]
    return values.mean(axis=1)
