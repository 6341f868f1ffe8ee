"""codecarbon's ``emissions.csv`` as efficiency criteria, alone or joined to another format's table.

Columns read (codecarbon's own names): ``project_name`` (or ``experiment_id``, the key),
``energy_consumed`` (kWh), ``emissions`` (kg CO2eq) and ``duration`` (s). Each becomes a
criterion of group ``efficiency``, lower is better (:data:`CRITERIA`). A model's value is the
sum over its rows (every tracked run of it; note); where one of its runs has no value in a
column, its value there is missing (note), not a sum over the other runs. The key is renamed to a model name by a
mapping (``--map project=model``, or a YAML file ``{project: model}``); with a mapping, rows of
projects it does not name are left out (note), without one the key is the model name.

Joined to another table (:func:`join_efficiency`), models without emissions get missing
scores and emissions of models the table lacks are left out, both named in a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import Options, assemble, describe_paths, existing, read_csv, score, shown

#: codecarbon column → (criterion name, unit); every one lower is better, group efficiency.
CRITERIA: dict[str, tuple[str, str]] = {
    "energy_consumed": ("energy_kwh", "kWh"),
    "emissions": ("emissions_kg", "kg CO2eq"),
    "duration": ("duration_s", "s"),
}
KEYS = ("project_name", "experiment_id")


def model_map(mapping: Mapping[str, str] | str | Path | None) -> dict[str, str] | None:
    """The key → model mapping from a mapping or a YAML file of one; every model name must be non-empty text.

    >>> model_map({"p1": "org/a"})
    {'p1': 'org/a'}
    >>> model_map({"p1": None})
    Traceback (most recent call last):
    ranking.errors.UserError: codecarbon model map: project 'p1' maps to null, not a model name: write `p1: ORG/MODEL` (a model name as text)
    """
    if mapping is None:
        return None
    where = "codecarbon model map"
    if isinstance(mapping, (str, Path)):
        from ranking.yaml_io import read_yaml

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


def read(paths: Sequence[Path], options: Options) -> Any:
    """The efficiency table of one or more ``emissions.csv`` (module docstring)."""
    from ranking.table import Criterion

    key = options.codecarbon_key
    if key not in KEYS:
        raise UserError(f"codecarbon key {key!r} is not one of {', '.join(KEYS)}")
    names = model_map(options.codecarbon_map)
    totals: dict[str, dict[str, float]] = {}
    rows_of: dict[str, int] = {}
    gaps: dict[tuple[str, str], str] = {}  # (model, column) → where the first run without a value is
    unmapped: set[str] = set()
    for path in existing(paths, "codecarbon emissions"):
        if path.is_dir():
            if not (path / "emissions.csv").is_file():
                raise UserError(f"{path} holds no emissions.csv: give the file codecarbon wrote (output_dir)")
            path = path / "emissions.csv"
        header, rows = read_csv(path, "codecarbon emissions")
        missing = [c for c in (key, *CRITERIA) if c not in header]
        if missing:
            raise UserError(f"{path} is not a codecarbon emissions.csv: no column {missing[0]!r}")
        for line, row in rows:
            project = row[key].strip()
            model = names.get(project) if names is not None else project
            if model is None:
                unmapped.add(project or "(empty)")
                continue
            if not model:
                raise UserError(f"{path}: line {line} has an empty {key}: name every run's project (or pass "
                                f"--by {KEYS[1] if key == KEYS[0] else KEYS[0]})")
            rows_of[model] = rows_of.get(model, 0) + 1
            for column, (name, _) in CRITERIA.items():
                value = score(row[column], f"{path}: line {line}, {key} {project!r}, {column}")
                if value is None:
                    gaps.setdefault((model, name), f"line {line} of {path}")
                totals.setdefault(model, {})[name] = totals.get(model, {}).get(name, 0.0) + (value or 0.0)
    if unmapped:
        options.note(f"codecarbon: left out the rows of {', '.join(sorted(unmapped))} (not in the model map)")
    if not totals:
        raise UserError(f"{describe_paths(paths)}: no emissions rows for any mapped model")
    for model, name in gaps:
        del totals[model][name]
    if gaps:
        options.note("codecarbon: left missing " + "; ".join(f"{name} of {model} (no value on {where})"
                                                              for (model, name), where in gaps.items())
                     + ": a sum over only some of a model's runs would understate it")
    summed = [m for m, k in rows_of.items() if k > 1]
    if summed:
        options.note(f"codecarbon: summed the rows of {', '.join(summed)} (one row per tracked run)")
    criteria = [Criterion(name, direction=options.stated(name, column) or "lower", group="efficiency", unit=unit,
                          source=f"codecarbon {column}") for column, (name, unit) in CRITERIA.items()]
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
                     "project names with --map PROJECT=MODEL)")
    if not any(m in efficiency.models for m in table.models):
        raise UserError(f"no codecarbon project matches a model of the table ({', '.join(table.models[:5])}, ...): "
                        "map them with --map PROJECT=MODEL")
    rows = [efficiency.models.index(m) if m in efficiency.models else -1 for m in table.models]
    added = np.array([efficiency.values[i] if i >= 0 else np.full(efficiency.n_criteria, np.nan) for i in rows])
    lacking = [m for m, i in zip(table.models, rows) if i < 0]
    if lacking:
        options.note(f"codecarbon: no emissions for {', '.join(lacking)}: their efficiency scores are missing")
    errors = None
    if table.standard_errors is not None:
        errors = np.hstack([table.standard_errors, np.full(added.shape, np.nan)])
    return ScoreTable(table.models, (*table.criteria, *efficiency.criteria), np.hstack([table.values, added]),
                      source=f"{table.source} + {efficiency.source}", standard_errors=errors)
