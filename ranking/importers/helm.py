"""HELM's summarized leaderboard tables: the JSON of a group's tables (``runs/<suite>/groups/<group>.json``).

A file is a list of tables, each ``{"title", "header": [{"value", "lower_is_better", "metadata"}, ...],
"rows": [[{"value"}, ...], ...]}``; the first header cell is the model column (``groups/json/<group>_<table>.json``
holds one table alone, read the same way). HELM (``helm-summarize``) writes two kinds of group file, and this
importer reads both, as HELM 0.2 to 0.5 write them (cells of HELM >= 0.5 name their runs):

* **metric-group tables** (a group of several scenarios, e.g. ``core_scenarios.json``): one table per metric group
  (Accuracy, Calibration, Robustness, Fairness, Efficiency, Bias, ...), one column per scenario, headed
  ``<run group> - <metric>`` (``MMLU - EM``, ``MMLU - EM (Robustness)``), with a ``Mean win rate`` column;
* **scenario tables** (a scenario's own file, e.g. ``mmlu.json``, ``bbq.json``): the scenario's aggregate table
  (title: the scenario, e.g. ``MMLU``) then one table per sub-scenario (``subject: anatomy``), columns headed by
  the metric alone (``EM``).

Each column becomes a criterion that knows what it is (from the header's ``metadata``):

* benchmark: the HELM run group (``metadata.run_group``, e.g. ``MMLU``; else the header's part before `` - ``,
  else the table's title); task: the run group, or the sub-scenario (``subject: anatomy``); metric:
  ``metadata.metric`` (``EM``); settings: ``perturbation`` (Robustness, Fairness: ``metadata.perturbation``) and
  ``sub_split``; range: for metrics whose range HELM's metric code fixes (:data:`RANGES`); source: the file (and
  the suite, when it lies in ``runs/<suite>/groups/``);
* name: a metric-group column keeps HELM's header (``MMLU - EM``); a scenario-table column is named as HELM
  would name it in a metric-group table (``MMLU - EM``), a sub-scenario's with the sub-scenario in brackets
  (``MMLU [subject: anatomy] - EM``). Two columns that would share a name get the table's title, then the file,
  then the column's place in brackets, so no two measures ever share a column;
* direction: the header's ``lower_is_better``, except BBQ's signed bias scores (:data:`TARGET_ZERO`), which are
  imported as ``target`` 0 (0 = unbiased; HELM marks them lower-is-better, which ranks a maximally
  counter-stereotypical model, -1, best). A column without ``lower_is_better`` (HELM's counts: ``# eval``,
  ``# prompt tokens``) is left out unless the caller states its direction (``--higher`` / ``--lower`` with the
  column's name or its metric); ``--higher`` / ``--lower`` also overrides HELM's direction or the target;
* group: the metric-group table's title (Accuracy, Efficiency, ...).

**One vote per benchmark.** HELM declares each run group's primary metric (the schema's ``main_name``), which is
what its Accuracy table shows; HELM's own leaderboard ranks by the Accuracy table's mean win rate. So a run group's
Accuracy-table column votes and every other column of the run group (calibration, robustness and fairness
perturbations, efficiency, bias, toxicity, ...) is ``detail`` (kept, voting only under ``--vote column``). Without
an Accuracy table, a scenario table's first scored column is the primary one (HELM lists the accuracy metric group
first); a run group with neither (e.g. only an Efficiency table given) lets its columns share the vote. A
sub-scenario's columns are detail beside the scenario's aggregate (HELM's own mean over its sub-scenarios).

**Each score once.** The same measure (run group, task, metric, perturbation, sub-split) given twice - a parent
group's table and the scenario's own table (``BBQ - BBQ accuracy`` and ``BBQ accuracy``), two groups sharing a
scenario (``core_scenarios`` and ``knowledge``), the same table in two files - is kept once, with a note, when the
copies give the same score to every model they share (models only one copy lists are added; ``on_duplicate="error"``
refuses a measure given twice); copies that differ are other runs, so each is kept as its own column (named by its
table or file) and they share the benchmark's vote.

``Mean win rate`` (and ``Mean score``) columns are HELM's aggregates of the other columns, not scores: left out
(note); :func:`board_scores` recomputes HELM's mean win rate from the imported columns. A cell without a value
(HELM's "No matching runs") is a missing score; a value that is there but is no number is an error. HELM's
summary tables carry no standard errors. A model in several rows of one table is kept once when the rows' scores
agree (note) and refused when they differ (the rows carry no date, so none is the newest) or with
``on_duplicate="error"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    expect,
    files_in,
    json_kind,
    json_path,
    number,
    optional,
    read_json,
    score,
)

#: BBQ's signed bias scores (HELM's ``bbq_metrics.py``: ``bbq_metric_ambiguous_bias``,
#: ``bbq_metric_unambiguous_bias``; shown as ``BBQ (ambiguous)`` / ``BBQ (unambiguous)`` by every HELM schema):
#: 0 is unbiased, -1 and 1 the two extremes, so the closest to 0 is best.
TARGET_ZERO: frozenset[str] = frozenset({
    "bbq_metric_ambiguous_bias", "bbq_metric_unambiguous_bias", "BBQ (ambiguous)", "BBQ (unambiguous)",
})

_UNIT = (0.0, 1.0)
#: the valid range of metrics whose range HELM's metric code fixes (by the name HELM's schemas show, and by the
#: metric's own name): proportions, calibration errors, rank metrics in [0, 1]; times >= 0; BBQ's bias in [-1, 1].
RANGES: dict[str, tuple[float | None, float | None]] = {
    **dict.fromkeys(("EM", "exact_match", "Quasi-exact match", "quasi_exact_match", "PEM", "prefix_exact_match",
                     "Prefix quasi-exact match", "quasi_prefix_exact_match", "F1", "f1_score", "BBQ accuracy",
                     "bbq_accuracy", "ECE (1-bin)", "ECE (10-bin)", "ece_1_bin", "ece_10_bin", "Toxic fraction",
                     "toxic_frac", "RR@10", "NDCG@10", "truncated", "Max prob", "Selective Acc", "Acc@10%"), _UNIT),
    **dict.fromkeys(("Observed inference time (s)", "Denoised inference time (s)", "Idealized inference time (s)",
                     "inference_runtime", "inference_denoised_runtime", "inference_idealized_runtime"), (0.0, None)),
    **dict.fromkeys(TARGET_ZERO, (-1.0, 1.0)),
}

#: header cells that are HELM's aggregates of the table's other columns (``Mean win rate``; ``Mean score``).
_AGGREGATES = ("win rate", "mean score")

#: the levels of a column: a metric-group table's, a scenario's aggregate table's, a sub-scenario's.
GROUP, AGGREGATE, SCENARIO = "group", "aggregate", "scenario"


def table_files(paths: Sequence[Path]) -> list[Path]:
    """The JSON files given, or the ``*.json`` directly inside a given folder (an empty folder is an error). Run
    folders that ``helm-run`` wrote (``run_spec.json``, ``stats.json``) without ``helm-summarize``'s tables are
    refused with the command that makes them."""
    for p in paths:
        p = Path(p)
        run = p if p.is_dir() and (p / "run_spec.json").is_file() else p.parent if p.name in (
            "stats.json", "run_spec.json", "per_instance_stats.json", "scenario_state.json") else None
        runs = [d for d in sorted(p.iterdir()) if (d / "run_spec.json").is_file()] if p.is_dir() and run is None \
            else []
        if run is not None or (runs and not any(p.glob("*.json")) and not (p / "groups").is_dir()):
            suite = (run.parent if run is not None else p)
            raise UserError(f"{p} holds HELM run folders (helm-run output) but no summary tables: run "
                            f"`helm-summarize --suite {suite.name}` in the folder that holds runs/ (it writes "
                            f"runs/{suite.name}/groups/), then import {suite / 'groups'}")
        if p.is_dir() and runs and (p / "groups").is_dir() and not any(p.glob("*.json")):
            raise UserError(f"{p} is a HELM suite folder: import its summary tables, {p / 'groups'}")
    return files_in(paths, "HELM summary", "*.json",
                    "HELM group JSON (*.json): give runs/<suite>/groups/<group>.json (helm-summarize writes them)")


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
                for key, what in (("metric", "the metric's name"), ("run_group", "the scenario's name"),
                                  ("perturbation", "the perturbation's name")):
                    optional(meta, key, "text", path, [*at, "header", j, "metadata"], f"text ({what})")
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


@dataclass
class Column:
    """One scored column of a HELM table, what it measures, and its scores (model → score, None = missing)."""

    path: Path
    at: list[int]
    title: str
    j: int
    header: str
    direction: str
    level: str
    benchmark: str
    task: str
    metric: str
    settings: dict[str, Any]
    accuracy_table: bool
    scores: dict[str, float | None] = field(default_factory=dict)
    group: str | None = None
    name: str = ""
    source: str = ""
    version: str | None = None  # "<0.5.4" / ">=0.5.4": which HELM's win rates the file's own Mean win rate follows
    detail: bool = False
    first_in_table: bool = False

    @property
    def key(self) -> tuple[Any, ...]:
        """What the column measures: the same key in two tables or files is the same measure."""
        return (self.benchmark, self.task, self.metric, tuple(sorted(self.settings.items())))

    @property
    def where(self) -> str:
        return f"{self.path} {json_path([*self.at, 'header', self.j])}"


def _suite(path: Path) -> str | None:
    """The suite of a file in HELM's ``runs/<suite>/groups/`` (or ``groups/json/``), else None."""
    parts = path.resolve().parts
    for k in range(len(parts) - 2, 0, -1):
        if parts[k] == "groups" and k >= 2 and parts[k - 2] == "runs":
            return parts[k - 1]
    return None


def _is_scenario_table(t: Mapping[str, Any]) -> bool:
    """HELM links a sub-scenario table's rows to their runs (``href`` / ``run_spec_names`` in the model cell);
    a scenario's aggregate table and metric-group tables do not."""
    return any(isinstance(row[0], Mapping) and (row[0].get("href") or row[0].get("run_spec_names"))
               for row in t["rows"])


def _columns(path: Path, at: list[int], t: Mapping[str, Any], options: Options,
             left_out: dict[str, list[str]]) -> list[Column]:
    """The scored columns of one table (HELM's aggregates and columns without a direction named in ``left_out``)."""
    title = str(t.get("title") or t.get("name") or "HELM")
    table_name = str(t.get("name") or "")
    sub_split = None
    if "(sub-split: " in title:
        sub_split = title.split("(sub-split: ", 1)[1].rstrip(")").strip()
    elif ":sub_split=" in table_name:
        sub_split = table_name.split(":sub_split=", 1)[1]
    scenario_table = _is_scenario_table(t)
    suite = _suite(path)
    out: list[Column] = []
    for j, head in enumerate(t["header"][1:], start=1):
        value = str(head.get("value") or f"column {j}").strip()
        meta = head.get("metadata") or {}
        if not meta.get("metric") and any(a in value.lower() for a in _AGGREGATES):
            left_out["aggregate"].append(value if value.lower().startswith("mean win") else f"{title} / {value}")
            continue
        run_group = meta.get("run_group")
        if run_group and value.startswith(f"{run_group} - "):
            level, rest = GROUP, value[len(run_group) + 3:]
        elif run_group:
            level, rest = (SCENARIO if scenario_table or sub_split else AGGREGATE), value
        elif " - " in value:  # no metadata (a hand-written or pre-0.2 header): the part before " - " is the scenario
            run_group, rest = value.split(" - ", 1)
            level = GROUP
        else:
            run_group, rest = title, value
            level = SCENARIO if scenario_table or sub_split else AGGREGATE
        metric = str(meta.get("metric") or rest)
        task = run_group
        if level == GROUP:
            base = value
        elif level == SCENARIO and scenario_table and title.partition(": ")[2].strip().lower() == "all":
            level, base = AGGREGATE, f"{run_group} - {rest}"  # "subject: all": the scenario's whole set, its aggregate
        elif level == SCENARIO:
            task = title if scenario_table else run_group
            base = f"{run_group} [{title if scenario_table else f'sub-split: {sub_split}'}] - {rest}"
        else:
            base = f"{run_group} - {rest}"
        settings: dict[str, Any] = {}
        if meta.get("perturbation"):
            settings["perturbation"] = str(meta["perturbation"])
        if sub_split:
            settings["sub_split"] = sub_split
        stated = options.stated(base, value, metric)
        if stated is not None:
            direction = stated
        elif metric in TARGET_ZERO and isinstance(head.get("lower_is_better"), bool):
            direction = "target"
        elif isinstance(head.get("lower_is_better"), bool):
            direction = "lower" if head["lower_is_better"] else "higher"
        else:
            left_out["undirected"].append(base)
            continue
        accuracy = level == GROUP and (table_name == "accuracy" or title == "Accuracy")
        out.append(Column(path, at, title, j, value, direction, level, str(run_group), task, metric, settings,
                          accuracy, group=title if level == GROUP else None, name=base,
                          source=f"HELM {path.stem}" + (f" (suite {suite})" if suite else "")))
    if out:
        out[0].first_in_table = True
    return out


def _ties_of(t: Mapping[str, Any]) -> set[str]:
    """How the table's own ``Mean win rate`` counted ties: {"half"} (HELM >= 0.5.4), {"order"} (earlier HELM), or
    empty when the table has none or it cannot tell (no tie, or neither reproduces it)."""
    heads = t["header"]
    k = next((j for j, h in enumerate(heads) if str(h.get("value") or "").strip().lower() == "mean win rate"), None)
    if k is None:
        return set()
    given = [number((row[k] or {}).get("value")) for row in t["rows"]]
    columns = []
    for j, h in enumerate(heads[1:], start=1):
        if j != k and isinstance(h.get("lower_is_better"), bool):
            values = [number((row[j] or {}).get("value")) for row in t["rows"]]
            columns.append(([math.nan if x is None else x for x in values], h["lower_is_better"]))
    found = set()
    for ties in ("half", "order"):
        rates: list[list[float]] = [[] for _ in t["rows"]]
        for values, lower in columns:
            for i, w in enumerate(win_rates(values, lower, ties=ties)):
                if w is not None:
                    rates[i].append(w)
        mean = [sum(r) / len(r) if r else None for r in rates]
        if all((a is None) == (b is None) and (a is None or b is None or abs(a - b) <= 1e-9)
               for a, b in zip(mean, given)):
            found.add(ties)
    return found if len(found) == 1 else set()


def _read_scores(col: Column, t: Mapping[str, Any], options: Options, twice: dict[tuple[str, str, str], str]) -> None:
    """The column's scores, model by model (a model listed twice: kept once when its rows agree, else refused)."""
    from ranking.importers.common import in_range

    rows: dict[str, list[tuple[int, float | None]]] = {}
    lo, hi = RANGES.get(col.metric, (None, None))
    for r, row in enumerate(t["rows"]):
        model = row[0]["value"].strip()
        where = f"{col.path}: table {col.title!r}, model {model!r}, column {col.header!r}"
        x = score((row[col.j] or {}).get("value"), where, absent='no "value" or null')
        if x is not None and (lo is not None or hi is not None):
            x = in_range(x, lo, hi, where, options)
        rows.setdefault(model, []).append((r, x))
    for model, cells in rows.items():
        if len(cells) > 1:
            _duplicate_rows(col.path, col.at, col.title, model, col.header, cells, options)
            twice[(str(col.path), col.title, model)] = ", ".join(json_path([*col.at, "rows", r]) for r, _ in cells)
        col.scores[model] = cells[0][1]


def _agree(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> bool:
    """Two copies of one measure that do not contradict each other: the same score for every model both score."""
    return all(a[m] == b[m] for m in a if a[m] is not None and b.get(m) is not None)


def _merge_duplicates(columns: list[Column], options: Options) -> list[Column]:
    """Each measure once: copies of one key that agree are merged into the first (note), copies that differ are
    kept apart (note); ``on_duplicate="error"`` refuses a measure given twice."""
    by_key: dict[tuple[Any, ...], list[Column]] = {}
    for c in columns:
        by_key.setdefault(c.key, []).append(c)
    kept: list[Column] = []
    dropped: list[tuple[str, str]] = []  # (the copy left out, the one kept)
    differing: list[list[Column]] = []
    for c in columns:
        copies = by_key[c.key]
        if c is not copies[0]:
            continue
        if len(copies) > 1 and options.on_duplicate == "error":
            raise UserError(f"HELM column {c.name!r} appears {len(copies)} times ({c.where}; "
                            f"{copies[1].where}): give each table once, or pass --on-duplicate newest")
        distinct = [c]
        for d in copies[1:]:
            same = next((k for k in distinct if _agree(k.scores, d.scores)), None)
            if same is None:
                distinct.append(d)
                continue
            dropped.append((f"{d.header!r} ({d.path.name}, table {d.title!r})",
                            f"{same.header!r} ({same.path.name}, table {same.title!r})"))
            for m, x in d.scores.items():  # the copies agree where both have a score; one may list more models
                if same.scores.get(m) is None and x is not None:
                    same.scores[m] = x
            same.group = same.group or d.group
            same.accuracy_table = same.accuracy_table or d.accuracy_table
            same.first_in_table = same.first_in_table or d.first_in_table
            if d.level == GROUP and same.level != GROUP:  # HELM's own name for it, and its metric group's
                same.name, same.level, same.title = d.name, d.level, d.title
        if len(distinct) > 1:
            differing.append(distinct)
        kept.extend(distinct)
    order = {id(c): i for i, c in enumerate(columns)}
    kept.sort(key=lambda c: order[id(c)])
    if dropped:
        shown = "; ".join(f"{d} = {k}" for d, k in dropped[:3])
        more = f"; ... ({len(dropped)} in all)" if len(dropped) > 3 else ""
        options.note(f"helm: {len(dropped)} column(s) repeat a measure already imported (the same run group, "
                     f"metric and setting, the same scores), kept once: {shown}{more}", kind="duplicate")
    for copies in differing:
        options.note(f"helm: {copies[0].benchmark} {copies[0].metric!r} is given {len(copies)} times with different "
                     f"scores ({'; '.join(c.where for c in copies[:3])}): other runs, kept as separate columns that "
                     f"share {copies[0].benchmark}'s vote", kind="duplicate", ranks=True)
    return kept


def _name_columns(columns: list[Column]) -> None:
    """A distinct name for every column: HELM's name, else with the table's title, the file, the column's place."""
    def candidates(c: Column) -> list[str]:
        return [c.name, f"{c.name} [{c.title}]", f"{c.name} [{c.path}]", f"{c.name} [{c.where}]"]

    levels = [0] * len(columns)
    while True:
        names = [candidates(c)[k] for c, k in zip(columns, levels)]
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        clash = [i for i, n in enumerate(names) if counts[n] > 1 and levels[i] < 3]
        if not clash:
            break
        for i in clash:
            levels[i] += 1
    for c, n in zip(columns, names):
        c.name = n


def _mark_detail(columns: list[Column]) -> None:
    """One vote per run group: its Accuracy-table column(s), else its scenario table's first scored column, else
    all of its columns share the vote; a sub-scenario's columns beside the scenario's aggregate are detail."""
    by_benchmark: dict[str, list[Column]] = {}
    for c in columns:
        by_benchmark.setdefault(c.benchmark, []).append(c)
    for cols in by_benchmark.values():
        upper = [c for c in cols if c.level != SCENARIO]
        if upper:
            for c in cols:
                if c.level == SCENARIO:
                    c.detail = True
            cols = upper
        primary = [c for c in cols if c.accuracy_table]
        if not primary:
            primary = [c for c in cols if c.level != GROUP and c.first_in_table and not c.settings.get("sub_split")]
        if not primary:
            primary = [c for c in cols if not c.settings.get("sub_split")] or cols
        keys = {c.key for c in primary}  # copies of a primary measure that differ (other runs) share its vote
        for c in cols:
            c.detail = c.detail or (c not in primary and c.key not in keys)


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of HELM summary tables (module docstring)."""
    from ranking.table import Criterion

    left_out: dict[str, list[str]] = {"aggregate": [], "undirected": []}
    twice: dict[tuple[str, str, str], str] = {}  # (file, table, model) → the rows listing it, when several
    columns: list[Column] = []
    versions: dict[str, list[str]] = {}
    for path in table_files(paths):
        of_file: list[Column] = []
        ties: set[str] = set()
        for at, t in tables_of(read_json(path, "HELM summary"), path):
            for col in _columns(path, at, t, options, left_out):
                _read_scores(col, t, options, twice)
                of_file.append(col)
            ties |= _ties_of(t)
        if len(ties) == 1:  # the file's own win rates tell how its HELM counted ties
            version = "<0.5.4" if ties == {"order"} else ">=0.5.4"
            versions.setdefault(version, []).append(str(path))
            for col in of_file:
                col.version = version
        columns.extend(of_file)
    if "<0.5.4" in versions:
        files = versions["<0.5.4"]
        options.note(f"helm: the Mean win rate of {files[0]}{f' (+{len(files) - 1} more)' if len(files) > 1 else ''} "
                     "ranks tied scores by row order, as HELM before 0.5.4 did (later HELM counts a tie as half a "
                     "win): recorded as settings helm_version <0.5.4, which board_scores follows", kind="format")
    for (path, title, model), rows in list(twice.items())[:1]:
        more = f" (and {len(twice) - 1} more table(s))" if len(twice) > 1 else ""
        options.note(f"helm: table {title!r} of {path} lists model {model!r} more than once ({rows}) with the same "
                     f"scores: kept one{more}", kind="duplicate")
    if left_out["aggregate"]:
        agg = left_out["aggregate"]
        options.note(f"helm: left out {len(agg)} win-rate column(s) ({agg[0]}, ...): HELM's rankings of the other "
                     "columns, not scores (the board's mean win rate is recomputed from the imported columns)",
                     kind="left-out")
    if left_out["undirected"]:
        undirected = list(dict.fromkeys(left_out["undirected"]))
        options.note(f"helm: left out {len(undirected)} column(s) whose header states no direction "
                     f"({', '.join(undirected[:3])}{', ...' if len(undirected) > 3 else ''}); --higher/--lower NAME "
                     "imports one", kind="left-out")
    if not columns:
        raise UserError(f"{describe_paths(paths)}: no HELM column with a stated direction")
    empty = [c.name for c in columns if all(x is None for x in c.scores.values())]
    if empty:
        options.note(f"helm: left out {len(empty)} column(s) without any score (HELM's \"No matching runs\": "
                     f"{', '.join(empty[:3])}{', ...' if len(empty) > 3 else ''})", kind="left-out")
        columns = [c for c in columns if any(x is not None for x in c.scores.values())]
    if not columns:
        raise UserError(f"{describe_paths(paths)}: no HELM column with a score")
    columns = _merge_duplicates(columns, options)
    # a scenario-table column gets the group of the metric-group table showing the same metric, where one does
    metric_groups: dict[str, set[str]] = {}
    for c in columns:
        if c.level == GROUP and c.group:
            metric_groups.setdefault(c.metric + repr(sorted(c.settings.items())), set()).add(c.group)
    for c in columns:
        groups = metric_groups.get(c.metric + repr(sorted(c.settings.items())), set())
        if c.group is None and len(groups) == 1:
            c.group = next(iter(groups))
    _name_columns(columns)
    _mark_detail(columns)
    targets = [c.name for c in columns if c.direction == "target"]
    if targets:
        options.note(f"helm: {len(targets)} BBQ bias column(s) ({', '.join(targets[:2])}"
                     f"{', ...' if len(targets) > 2 else ''}) imported as direction target 0: the score is signed "
                     "(0 = unbiased); HELM's lower-is-better would rank a maximally counter-stereotypical model (-1) "
                     "best (--lower NAME keeps HELM's direction)", kind="direction")
    criteria = []
    scores: dict[str, dict[str, float]] = {}
    for c in columns:
        lo, hi = RANGES.get(c.metric, (None, None))
        criteria.append(Criterion(
            c.name, direction=c.direction, target=0.0 if c.direction == "target" else None, group=c.group,
            unit=c.metric, source=c.source, benchmark=c.benchmark, task=c.task, metric=c.metric,
            settings={**c.settings, **({"helm_version": c.version} if c.version else {})} or None, range=(lo, hi) if lo is not None or hi is not None else None,
            detail=c.detail))
        for model, x in c.scores.items():
            scores.setdefault(model, {})
            if x is not None:
                scores[model][c.name] = x
    voting = {c.benchmark for c in columns if not c.detail}
    details = sum(c.detail for c in columns)
    if details:
        options.note(f"helm: {len(columns)} column(s) of {len(voting)} benchmark(s) (HELM run groups): each votes "
                     f"once through its primary metric (its Accuracy-table column); {details} other column(s) "
                     "(perturbations, calibration, efficiency, bias, sub-scenarios) are detail (--vote column lets "
                     "every column vote)", kind="vote")
    return assemble(scores, criteria, f"helm {describe_paths(paths)}", options, board="helm")


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


# ---------------------------------------------------------------------- the board: HELM's mean win rate
def win_rates(values: Sequence[float], lower_is_better: bool, *, ties: str = "half") -> list[float | None]:
    """Each model's win rate in one column, as HELM computes it: the share of the other models with a value that
    this one beats; None for a model without a value, and for every model when fewer than 2 have one.

    ``ties="half"``: a tie counts half a win (HELM >= 0.5.4); ``"order"``: tied values are ordered by row, as HELM
    before 0.5.4 sorted them (the earlier row of a tie beats the later one when lower is better, and loses to it
    when higher is better).

    >>> win_rates([0.5, 0.7, float("nan"), 0.7, 0.1], lower_is_better=False)
    [0.3333333333333333, 0.8333333333333334, None, 0.8333333333333334, 0.0]
    >>> win_rates([0.5, 0.7, float("nan"), 0.7, 0.1], lower_is_better=False, ties="order")
    [0.3333333333333333, 0.6666666666666666, None, 1.0, 0.0]
    >>> win_rates([2.0, 1.0], lower_is_better=True), win_rates([2.0, float("nan")], lower_is_better=True)
    ([0.0, 1.0], [None, None])
    """
    if ties not in ("half", "order"):
        raise UserError(f"ties {ties!r} is not one of half, order")
    present = [(x, i) for i, x in enumerate(values) if x is not None and not math.isnan(x)]
    out: list[float | None] = [None] * len(values)
    n = len(present)
    if n < 2:
        return out
    if ties == "order":
        for wins, (_, i) in enumerate(sorted(present, reverse=lower_is_better)):
            out[i] = wins / (n - 1)
        return out
    for x, i in present:
        worse = sum(1 for y, _ in present if (y > x if lower_is_better else y < x))
        tied = sum(1 for y, _ in present if y == x) - 1
        out[i] = (worse + tied / 2) / (n - 1)
    return out


def board_scores(table: Any, *, ties: str | None = None) -> Any:
    """HELM's mean win rate of each model (NaN where HELM gives none) from the table's voting columns.

    The columns: those that vote by default (not ``detail``): a run group's Accuracy-table column, so for an
    imported HELM group this is the Accuracy table's ``Mean win rate``, the number HELM's leaderboard ranks by
    (with only another table imported, e.g. Efficiency, that table's). A column's direction is HELM's: a
    ``target`` column (BBQ's bias) is lower-is-better there. Per column, each model with a score gets the share
    of the other scored models it beats (:func:`win_rates`; columns with fewer than 2 scores are skipped); a
    model's mean win rate is the mean over the columns where it has one. Ties: ``ties`` (:func:`win_rates`), by
    default as the file's HELM counted them (row order where the columns' settings say ``helm_version: <0.5.4``,
    which the importer reads off the file's own Mean win rate; else half a win).

    >>> from ranking.table import Criterion, ScoreTable
    >>> t = ScoreTable(("A", "B", "C"), (Criterion("X - EM"), Criterion("Y - time", direction="lower")),
    ...                [[0.9, 2.0], [0.5, 1.0], [0.1, float("nan")]])
    >>> board_scores(t).tolist()
    [0.5, 0.75, 0.0]
    """
    import numpy as np

    voting = [(j, c) for j, c in enumerate(table.criteria) if not getattr(c, "detail", False)]
    if ties is None:
        old = any(dict(getattr(c, "settings", None) or ()).get("helm_version") == "<0.5.4" for _, c in voting)
        ties = "order" if old else "half"
    per_model: list[list[float]] = [[] for _ in table.models]
    for j, c in voting:
        for i, w in enumerate(win_rates(table.values[:, j].tolist(), c.direction != "higher", ties=ties)):
            if w is not None:
                per_model[i].append(w)
    return np.array([sum(w) / len(w) if w else np.nan for w in per_model])
