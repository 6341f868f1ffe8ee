"""codecarbon's ``emissions.csv`` as efficiency criteria, alone or joined to another format's table.

Columns read (codecarbon's own names, 2.x and 3.x alike; 2.x files have no ``experiment_id``):
``energy_consumed`` (kWh), ``emissions`` (kg CO2eq) and ``duration`` (s). Each becomes a criterion
of group ``efficiency``, lower is better, its own benchmark, range ``>= 0`` (:data:`CRITERIA`); a
negative value is refused, or missing with a note under ``options.out_of_range == "missing"``.

**What a model is** (``options.codecarbon_key``, the CLI's ``--by``):

* ``project_name`` (default): the project. codecarbon names every project ``codecarbon`` unless told
  otherwise, so that default name found in several files is refused (two projects would silently become
  one model) unless the model map names it; give ``--by file`` or ``--by run_id`` instead. A project
  named in several files, or the default name with several runs in one file, is summed with a note.
* ``file``: one model per ``emissions.csv`` (codecarbon's ``output_dir``), named by its folder (the
  path where two folders share a name);
* ``run_id``: one model per tracked run; ``experiment_id``: one per experiment (codecarbon 3.x, and 2.x
  files written after the column appeared).

The key is renamed to a model name by a mapping (``--map KEY=model``, or a YAML file ``{KEY: model}``); with a
mapping, rows of keys it does not name are left out (note), without one the key is the model name.

**One run counted once.** codecarbon writes a row each time a tracker flushes, and every such row holds the
running totals since the run started: the rows of one ``run_id`` in a file are one run, whose last row
(latest ``timestamp``) is its total (note). Rows of one run that do not grow are not flushes of one
run: they are summed as separate measurements (note). A file with a ``task_name`` column (codecarbon's
task tracking) holds one row per task, summed. A model's value is the sum over its runs; where one of
its runs has no value in a column, its value there is missing (note), not a sum over the other runs.

**Corrupt rows.** A row with another number of fields than the header, or with a value that is no
number, is a one-line error naming it; with ``options.skip_bad_rows`` (``--skip-bad-rows``) such rows
are skipped and counted in one note.

Joined to another table (:func:`join_efficiency`), models without emissions get missing
scores and emissions of models the table lacks are left out, both named in a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    read_csv,
    score,
    shown,
)

#: codecarbon column → (criterion name, unit); every one lower is better, group efficiency, range >= 0.
CRITERIA: dict[str, tuple[str, str]] = {
    "energy_consumed": ("energy_kwh", "kWh"),
    "emissions": ("emissions_kg", "kg CO2eq"),
    "duration": ("duration_s", "s"),
}
#: what may name a model (``--by``): a column of the file, or the file itself.
KEYS = ("project_name", "experiment_id", "run_id", "file")
#: the project name codecarbon gives a tracker that is not given one.
DEFAULT_PROJECT = "codecarbon"


def model_map(mapping: Mapping[str, str] | str | Path | None) -> dict[str, str] | None:
    """The key → model mapping from a mapping or a YAML file of one; every model name must be non-empty text.

    >>> model_map({"p1": "org/a"})
    {'p1': 'org/a'}
    >>> model_map({"p1": None})
    Traceback (most recent call last):
    ranking.floor.errors.UserError: codecarbon model map: project 'p1' maps to null, not a model name: write `p1: ORG/MODEL` (a model name as text)
    """
    if mapping is None:
        return None
    where = "codecarbon model map"
    if isinstance(mapping, (str, Path)):
        from ranking.floor.yaml_io import read_yaml

        where = f"codecarbon model map {mapping}"
        doc = read_yaml(mapping, "codecarbon model map")
        if not isinstance(doc, Mapping) or not doc:
            raise UserError(f"codecarbon model map {mapping} must map project names to model names")
        mapping = doc
    out: dict[str, str] = {}
    for key, model in mapping.items():
        project = "" if key is None else str(key).strip()
        if not project:
            raise UserError(f"{where}: a project name is empty: write `PROJECT: ORG/MODEL`")
        if not isinstance(model, str) or not model.strip():
            raise UserError(f"{where}: project {project!r} maps to "
                            f"{'empty text' if isinstance(model, str) else shown(model)}, not a model name: "
                            f"write `{project}: ORG/MODEL` (a model name as text)")
        out[project] = model.strip()
    return out


@dataclass
class Run:
    """One tracked run (or task) of a file: its key, its rows' line numbers and its values (None: none given)."""

    key: str
    file: Path
    lines: list[int]
    values: dict[str, float | None]


def _rows(path: Path, options: Options, bad: list[str]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line, row)]) of an emissions.csv; a row with another field count than the header is refused, or
    skipped and recorded in ``bad`` with ``options.skip_bad_rows``."""
    return read_csv(path, "codecarbon emissions", bad=bad if options.skip_bad_rows else None,
                    hint=", or pass --skip-bad-rows to skip codecarbon's corrupt rows")


def _file_labels(files: Sequence[Path]) -> dict[Path, str]:
    """Each file's model name under ``--by file``: its folder's name, or its path where two folders share a name."""
    names = {f: f.parent.name or f.stem for f in files}
    clash = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {f: (str(f) if n in clash else n) for f, n in names.items()}


def read(paths: Sequence[Path], options: Options) -> Any:
    """The efficiency table of one or more ``emissions.csv`` (module docstring)."""
    from ranking.table import Criterion

    key = options.codecarbon_key
    if key not in KEYS:
        raise UserError(f"codecarbon key {key!r} is not one of {', '.join(KEYS)}")
    names = model_map(options.codecarbon_map)
    files: list[Path] = []
    for path in existing(paths, "codecarbon emissions"):
        if path.is_dir():
            if not (path / "emissions.csv").is_file():
                raise UserError(f"{path} holds no emissions.csv: give the file codecarbon wrote (output_dir)")
            path = path / "emissions.csv"
        files.append(path)
    seen: dict[Path, Path] = {}
    for path in files:
        seen.setdefault(path.resolve(), path)
    if len(seen) < len(files):
        twice = sorted({str(p) for p in files if seen[p.resolve()] is not p or files.count(p) > 1})
        options.note(f"codecarbon: {', '.join(twice)} given more than once: read once (a file's runs count once)",
                     kind="duplicate", ranks=True)
        files = list(seen.values())
    labels = _file_labels(files)
    bad: list[str] = []
    runs: list[Run] = []
    flushes = 0  # earlier rows of runs written several times (left out)
    not_growing: list[str] = []
    old: list[str] = []  # codecarbon 1.x files (no run_id: their experiment_id is one per run)
    for path in files:
        header, rows = _rows(path, options, bad)
        run_column = "run_id" if "run_id" in header else "experiment_id" if "experiment_id" in header else None
        column = run_column if key == "run_id" and run_column == "experiment_id" else key
        if column != key:
            old.append(str(path))
        needed = [c for c in ((column,) if key != "file" else ()) + tuple(CRITERIA) if c not in header]
        if needed:
            hint = (" (a codecarbon 2.x file has no experiment_id: pass --by project_name, --by run_id or --by file)"
                    if needed[0] == "experiment_id" else "")
            raise UserError(f"{path} is not a codecarbon emissions.csv: no column {needed[0]!r}{hint}")
        tasks = "task_name" in header
        grouped: dict[tuple[str, str], list[tuple[int, dict[str, str], dict[str, float | None]]]] = {}
        for line, row in rows:
            label = labels[path] if key == "file" else row[column].strip()
            if not label and names is None:  # with a model map, an empty key is one the map does not name
                other = KEYS[1] if key == KEYS[0] else KEYS[0]
                raise UserError(f"{path}: line {line} has an empty {key}: name every run's project (or pass "
                                f"--by {other})")
            values = _values(path, line, key, label, row, options, bad)
            if values is None:
                continue
            run = row.get(run_column, "").strip() if run_column else ""
            # a row is its own run where the file has no run ids, or tracks tasks (one row each)
            group = (label, run if run and not tasks else f"line {line}")
            grouped.setdefault(group, []).append((line, row, values))
        for (label, _), found in grouped.items():
            if len(found) == 1:
                runs.append(Run(label, path, [found[0][0]], found[0][2]))
                continue
            found.sort(key=lambda f: (f[1].get("timestamp", ""), f[0]))
            if _growing([v for _, _, v in found]):
                flushes += len(found) - 1
                runs.append(Run(label, path, [f[0] for f in found], found[-1][2]))
            else:
                not_growing.append(f"{label} ({path} lines {', '.join(str(f[0]) for f in found)})")
                runs.extend(Run(label, path, [f[0]], f[2]) for f in found)
    if old:
        options.note(f"codecarbon: {len(old)} file(s) of codecarbon 1.x (no run_id column; its experiment_id is one per "
                     f"tracked run, what 2.x calls run_id) named by experiment_id under --by run_id: "
                     f"{', '.join(old[:3])}", kind="format")
    if bad:
        options.note(f"codecarbon: skipped {len(bad)} corrupt row(s) (--skip-bad-rows): {'; '.join(bad[:5])}"
                     + (" …" if len(bad) > 5 else ""), kind="left-out", ranks=True)
    if flushes:
        options.note(f"codecarbon: {flushes} earlier row(s) of runs written several times left out: each row of a "
                     "run holds its running totals (codecarbon's periodic flushes), so its last row is the run's total",
                     kind="duplicate", ranks=True)
    if not_growing:
        options.note(f"codecarbon: rows of one run_id that do not grow (not a run's running totals) are summed as "
                     f"separate measurements: {'; '.join(not_growing[:5])}", kind="duplicate", ranks=True)
    _check_default_project(runs, key, names)
    return _table(runs, key, names, options, Criterion, paths)


def _values(path: Path, line: int, key: str, label: str, row: Mapping[str, str], options: Options,
            bad: list[str]) -> dict[str, float | None] | None:
    """The row's energy, emissions and duration (None where empty or made missing); None for a corrupt row skipped."""
    out: dict[str, float | None] = {}
    for column in CRITERIA:
        where = f"{path}: line {line}, {key} {label!r}, {column}"
        try:
            value = score(row[column], where)
        except UserError as exc:
            if options.skip_bad_rows:
                bad.append(f"{path} line {line} ({column} {shown(row[column])})")
                return None
            raise UserError(f"{exc}; or pass --skip-bad-rows to skip codecarbon's corrupt rows") from None
        out[column] = in_range(value, 0.0, None, where, options)
    return out


def _growing(values: Sequence[Mapping[str, float | None]]) -> bool:
    """Whether successive rows only grow (or stay) in every column: a run's running totals."""
    for before, after in zip(values, values[1:]):
        for column in CRITERIA:
            a, b = before[column], after[column]
            if a is not None and b is not None and b < a:
                return False
    return True


def _check_default_project(runs: Sequence[Run], key: str, names: Mapping[str, str] | None) -> None:
    """codecarbon's default project name in several files is refused: two projects would silently be one model."""
    if key != "project_name" or (names is not None and DEFAULT_PROJECT in names):
        return
    files = sorted({str(r.file) for r in runs if r.key == DEFAULT_PROJECT})
    if len(files) > 1:
        raise UserError(f"project name {DEFAULT_PROJECT!r} (codecarbon's default, kept by every tracker not given "
                        f"one) is in {len(files)} files ({', '.join(files)}): they would be summed as one model; "
                        "pass --by file (one model per emissions.csv) or --by run_id (one per run), or map "
                        f"{DEFAULT_PROJECT!r} to a model with --map if it is one")


def _table(runs: Sequence[Run], key: str, names: Mapping[str, str] | None, options: Options, Criterion: Any,
           paths: Sequence[Path]) -> Any:
    """The summed table of the runs."""
    totals: dict[str, dict[str, float]] = {}
    runs_of: dict[str, list[Run]] = {}
    gaps: dict[tuple[str, str], str] = {}  # (model, column) → where the first run without a value is
    unmapped: set[str] = set()
    for run in runs:
        model = names.get(run.key) if names is not None else run.key
        if model is None:
            unmapped.add(run.key or "(empty)")
            continue
        runs_of.setdefault(model, []).append(run)
        for column, (name, _) in CRITERIA.items():
            value = run.values[column]
            if value is None:
                gaps.setdefault((model, name), f"line {run.lines[-1]} of {run.file}")
            totals.setdefault(model, {})[name] = totals.get(model, {}).get(name, 0.0) + (value or 0.0)
    if unmapped:
        options.note(f"codecarbon: left out the rows of {', '.join(sorted(unmapped))} (not in the model map)",
                     kind="left-out")
    if not totals:
        raise UserError(f"{describe_paths(paths)}: no emissions rows for any mapped model")
    for model, name in gaps:
        del totals[model][name]
    if gaps:
        options.note("codecarbon: left missing " + "; ".join(f"{name} of {model} (no value on {where})"
                                                              for (model, name), where in gaps.items())
                     + ": a sum over only some of a model's runs would understate it", kind="missing", ranks=True)
    summed = [m for m, r in runs_of.items() if len(r) > 1]
    if summed:
        options.note(f"codecarbon: summed the rows of {', '.join(summed)} (one row per tracked run)", kind="other")
    spread = [f"{m} ({', '.join(sorted({str(r.file) for r in rs}))})" for m, rs in runs_of.items()
              if len({r.file for r in rs}) > 1 and key != "file"]
    if spread:
        options.note(f"codecarbon: summed runs from several files as one model: {'; '.join(spread)} (--by file "
                     "keeps each file apart)", kind="identity", ranks=True)
    default = [r for r in runs if r.key == DEFAULT_PROJECT and key == "project_name"]
    if len(default) > 1 and len({r.file for r in default}) == 1:
        options.note(f"codecarbon: project {DEFAULT_PROJECT!r} is codecarbon's default name; its {len(default)} runs "
                     f"in {default[0].file} are summed as one model (--by run_id splits them)", kind="identity",
                     ranks=True)
    criteria = [Criterion(name, direction=options.stated(name, column) or "lower", group="efficiency", unit=unit,
                          source=f"codecarbon {column}", benchmark=name, metric=column, range=(0.0, None))
                for column, (name, unit) in CRITERIA.items()]
    return assemble(totals, criteria, f"codecarbon {describe_paths(paths)}", options)


def join_efficiency(table: Any, efficiency: Any, options: Options) -> Any:
    """``table`` with the columns of ``efficiency`` added for its models (missing where a model has none)."""
    import numpy as np

    from ranking.table import ScoreTable

    clash = [n for n in efficiency.names if n in table.names]
    if clash:
        raise UserError(f"the table already has a column {clash[0]!r}: cannot join the codecarbon column of that name")
    extra = [m for m in efficiency.models if m not in table.models]
    if extra:
        options.note(f"codecarbon: left out emissions of {', '.join(extra)}, not models of the table (map their "
                     "project names with --map PROJECT=MODEL)", kind="left-out")
    if not any(m in efficiency.models for m in table.models):
        raise UserError(f"no codecarbon project matches a model of the table ({', '.join(table.models[:5])}, ...): "
                        "map them with --map PROJECT=MODEL")
    rows = [efficiency.models.index(m) if m in efficiency.models else -1 for m in table.models]
    added = np.array([efficiency.values[i] if i >= 0 else np.full(efficiency.n_criteria, np.nan) for i in rows])
    lacking = [m for m, i in zip(table.models, rows) if i < 0]
    if lacking:
        options.note(f"codecarbon: no emissions for {', '.join(lacking)}: their efficiency scores are missing",
                     kind="missing")
    errors = None
    if table.standard_errors is not None:
        errors = np.hstack([table.standard_errors, np.full(added.shape, np.nan)])
    return ScoreTable(table.models, (*table.criteria, *efficiency.criteria), np.hstack([table.values, added]),
                      source=f"{table.source} + {efficiency.source}", standard_errors=errors,
                      board=getattr(table, "board", None))
