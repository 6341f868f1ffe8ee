"""Importers: turn published result files into a score table with groups and directions.

``votenrank_case_study`` reads the Vote'n'Rank case study (Rofin et al. 2023, §4)
from ``<data root>/leaderboards/votenrank/case_study_4/``:

- ``glue_hpc.csv`` → group ``performance`` (13 GLUE dev metrics ×100, higher is better);
- ``experiment_tracker_table.csv`` → group ``efficiency`` (40 columns
  ``{task}_{gpu_hours,exp_len_hours,total_power,kg_carbon}``, lower is better);
- ``social_bias_data.csv`` → group ``fairness`` (5 bias columns, every one higher is better).

Criterion names are the files' column names. A model that lacks a whole group
(t5-base has no tracker row) is dropped with a warning naming it; models the
three files name differently would show up there too.

>>> t = load_case_study(data_root)                    # doctest: +SKIP
>>> t.shape, t.group_names                            # doctest: +SKIP
((7, 58), ('performance', 'efficiency', 'fairness'))
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ranking.floor.errors import UserError
from ranking.table import ScoreTable

log = logging.getLogger(__name__)

CASE_STUDY_DIR = Path("leaderboards") / "votenrank" / "case_study_4"
CASE_STUDY_FILES = (
    ("glue_hpc.csv", "performance", "higher"),
    ("experiment_tracker_table.csv", "efficiency", "lower"),
    ("social_bias_data.csv", "fairness", "higher"),
)
MODEL_COLUMN = "model_name"


def _read(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise UserError(f"case study file {path} does not exist: check --data-root / VNR_DATA_ROOT") from None
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise UserError(f"cannot read case study file {path}: {exc}") from None
    if MODEL_COLUMN not in frame.columns:
        raise UserError(f"{path}: no {MODEL_COLUMN!r} column (columns: {', '.join(frame.columns)})")
    frame = frame.set_index(MODEL_COLUMN)
    if frame.index.duplicated().any():
        raise UserError(f"{path}: model {frame.index[frame.index.duplicated()][0]!r} appears twice")
    return frame


def load_case_study(data_root: str | Path | None = None, dir: str | Path | None = None) -> ScoreTable:
    """The case study's models × (performance, efficiency, fairness) table.

    ``data_root`` is the data root as resolved by the caller (a path or None).
    ``dir`` (absolute, or relative to the data root) overrides the folder holding the three CSVs.
    Models absent from (or without any score in) one of the files are dropped with a warning.
    """
    if dir is not None and Path(dir).is_absolute():
        folder = Path(dir)
    else:
        if data_root is None:
            raise UserError("the case study is read from the data root: pass --data-root DIR or set VNR_DATA_ROOT")
        folder = Path(data_root) / (Path(dir) if dir is not None else CASE_STUDY_DIR)
    if not folder.is_dir():
        raise UserError(f"case study folder {folder} does not exist: check --data-root / VNR_DATA_ROOT")
    frames = []
    for fname, group, direction in CASE_STUDY_FILES:
        frame = _read(folder / fname)
        frames.append((frame, group, direction, fname))
    models = list(dict.fromkeys(m for frame, *_ in frames for m in frame.index))
    joined = pd.concat([f.reindex(models) for f, *_ in frames], axis=1)
    if joined.columns.duplicated().any():
        raise UserError(f"case study: column {joined.columns[joined.columns.duplicated()][0]!r} is in two files")
    groups: dict[str, str] = {}
    directions: dict[str, str] = {}
    for frame, group, direction, _ in frames:
        for col in frame.columns:
            groups[col] = group
            directions[col] = direction
    table = ScoreTable.from_frame(
        joined,
        groups=groups,
        directions=directions,
        known_groups=[g for _, g, _ in CASE_STUDY_FILES],
        source=str(folder),
    )
    # drop models that lack a whole group
    lacking: dict[str, list[str]] = {}
    for _, group, _, fname in frames:
        cols = [j for j, c in enumerate(table.criteria) if c.group == group]
        empty = np.isnan(table.values[:, cols]).all(axis=1)
        for m, e in zip(table.models, empty):
            if e:
                lacking.setdefault(m, []).append(f"{group} ({fname})")
    if lacking:
        log.warning(
            "case study: dropping model(s) that lack a whole group: %s",
            "; ".join(f"{m} has no {', '.join(gs)}" for m, gs in lacking.items()),
        )
        if len(lacking) == table.n_models:
            raise UserError(f"case study in {folder}: every model lacks a whole group")
        table = table.drop_models(lacking)
    crits = tuple(replace(c, source=f"votenrank case study ({c.group})", unit=case_study_unit(c.name, c.group))
                  for c in table.criteria)
    return table.with_criteria(crits)


#: the tracker's column suffixes (the paper's four efficiency features) and their units
EFFICIENCY_UNITS = {"_total_power": "kWh", "_exp_len_hours": "h", "_gpu_hours": "GPU-h", "_kg_carbon": "kg CO2eq"}


def case_study_unit(name: str, group: str | None) -> str | None:
    """The unit of a case-study column, from its name and file (None where the files do not say).

    GLUE accuracies and F1 are in %, the correlations (Matthews, Pearson, Spearman) × 100; the tracker's
    columns by suffix; the bias scores are fractions (0–1), as the authors stored them.

    >>> [case_study_unit(n, g) for n, g in (("rte.eval_accuracy", "performance"), ("stsb.eval_pearson",
    ...  "performance"), ("rte_total_power", "efficiency"), ("anti_crows_score", "fairness"))]
    ['%', '×100', 'kWh', '0–1']
    """
    if group == "performance":
        return "%" if name.endswith(("_accuracy", "_f1")) else "×100"
    if group == "efficiency":
        return next((unit for suffix, unit in EFFICIENCY_UNITS.items() if name.endswith(suffix)), None)
    if group == "fairness":
        return "0–1"
    return None


Importer = Callable[..., ScoreTable]
IMPORTERS: dict[str, Callable[..., Any]] = {"votenrank_case_study": load_case_study}
