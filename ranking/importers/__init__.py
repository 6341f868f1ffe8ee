"""Importers: results of other tools as a score table with every criterion's direction, group and unit stated.

One small module per format, registered here by name (imported only when used, so
``import ranking`` and ``vnr --help`` stay light)::

    from ranking.importers import import_table
    table = import_table("lm-eval", ["out/"], higher=["my_metric"])
    table.standard_errors        # per-score standard errors where the source has them (NaN = unknown)

``vnr import FORMAT PATH... -o DIR`` writes the same table as ``DIR/matrix.csv`` +
``DIR/criteria.yaml`` (+ ``DIR/stderr.csv``), which every command then reads.

Directions are never guessed: each comes from the source (lm-eval's
``higher_is_better``, HELM's ``lower_is_better``), from a documented table of the
format's columns / metrics, or from the caller (``higher=`` / ``lower=``, the CLI's
``--higher`` / ``--lower``, naming a metric or a column); anything else is refused
with a one-line error that says which option to pass.

>>> sorted(FORMATS)
['codecarbon', 'helm', 'lm-eval', 'mteb', 'open-llm-leaderboard']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError

#: format name → (module with ``read(paths, options)``, what it reads).
FORMATS: dict[str, tuple[str, str]] = {
    "lm-eval": ("ranking.importers.lm_eval", "lm-evaluation-harness output folders or results files (0.4 results_*.json, 0.3 any name)"),
    "open-llm-leaderboard": ("ranking.importers.open_llm", "the Open LLM Leaderboard table (CSV or parquet export)"),
    "helm": ("ranking.importers.helm", "HELM summarized leaderboard tables (groups/<group>.json)"),
    "mteb": ("ranking.importers.mteb", "MTEB results folders (<model>/<revision>/<Task>.json)"),
    "codecarbon": ("ranking.importers.codecarbon", "codecarbon emissions.csv (efficiency criteria)"),
}

ON_DUPLICATE = ("newest", "error")


def import_table(
    format: str,
    paths: str | Path | Iterable[str | Path],
    *,
    higher: Iterable[str] = (),
    lower: Iterable[str] = (),
    on_duplicate: str = "newest",
    codecarbon: str | Path | None = None,
    codecarbon_map: Mapping[str, str] | str | Path | None = None,
    codecarbon_key: str = "project_name",
    note: Callable[[str], None] | None = None,
    out_of_range: str = "error",
    skip_bad_rows: bool = False,
    notes: list[Any] | None = None,
) -> Any:
    """The :class:`~ranking.table.ScoreTable` of ``paths`` read as ``format`` (see :data:`FORMATS`).

    ``higher`` / ``lower`` state directions the source does not (metric or column names);
    ``on_duplicate``: ``newest`` keeps the newest of several results of one model (and says
    so in a note) or ``error`` refuses them. ``codecarbon``: an ``emissions.csv`` joined as
    efficiency criteria, its projects (or ``codecarbon_key="experiment_id"``) renamed to
    models by ``codecarbon_map`` (a mapping, or a YAML file of one). ``note`` receives the
    one-line notes about what was left out or chosen (None: stderr). ``out_of_range``: a score outside its
    criterion's range is refused (``"error"``) or imported as missing with a note (``"missing"``);
    ``skip_bad_rows``: a tracker's own corrupt rows are skipped (counted in a note) instead of refused.
    ``notes``: a list that receives every note as a :class:`~ranking.importers.common.Note` (kind, whether it
    changes a ranking, text) instead of ``note`` (what ``vnr import`` summarises).
    """
    from ranking.importers.common import Options, print_note

    if format not in FORMATS:
        raise UserError(f"unknown import format {format!r} (formats: {', '.join(FORMATS)})")
    if on_duplicate not in ON_DUPLICATE:
        raise UserError(f"on_duplicate {on_duplicate!r} is not one of {', '.join(ON_DUPLICATE)}")
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not paths:
        raise UserError(f"give one or more {format} paths to import")
    options = Options(higher=tuple(str(h) for h in higher), lower=tuple(str(x) for x in lower),
                      on_duplicate=on_duplicate, sink=None if notes is not None else note or print_note,
                      codecarbon_map=codecarbon_map, codecarbon_key=codecarbon_key, out_of_range=out_of_range,
                      skip_bad_rows=skip_bad_rows, notes=[] if notes is None else notes)
    options.check()
    module = importlib.import_module(FORMATS[format][0])
    table = module.read(paths, options)
    if codecarbon is not None:
        if format == "codecarbon":
            raise UserError("--codecarbon joins emissions to another format's table: import codecarbon alone "
                            "with `vnr import codecarbon EMISSIONS.csv`")
        from ranking.importers.codecarbon import join_efficiency
        from ranking.importers.codecarbon import read as read_emissions

        table = join_efficiency(table, read_emissions([Path(codecarbon)], options), options)
    options.check_used()
    return table
