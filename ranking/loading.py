"""The one TABLE loader: every command and the Python API read score tables through :func:`load_table`.

A TABLE is any of:

* a CSV (one row per model) with its criteria sidecar (``criteria.yaml``,
  ``<stem>.yaml`` or ``<stem>.criteria.yaml`` beside it), or a results folder
  holding ``matrix.csv``;
* a leaderboard spec YAML (``configs/leaderboards/*.yaml``), whose file is
  read from the data root;
* a benchbench leaderboard (``benchbench/glue``, ``benchbench/helm/accuracy``,
  the ``leaderboard.tsv`` itself) or a ranking_nlp task table
  (``ranking_nlp/glue.data``), as given or under the data root and its
  ``leaderboards/`` folder.

With ``format=`` (``lm-eval``, ``open-llm-leaderboard``, ``helm``, ``mteb``, ``codecarbon``) the
source is another tool's results, read by :mod:`ranking.importers` (``vnr import`` writes the same
table as a results folder). A table's ``standard_errors`` come from its sidecar's
``standard_errors:`` file (``stderr.csv``) or from the imported source.

The data root is resolved once, here (``data_root`` argument, else
``$VNR_DATA_ROOT``), and passed down to the loaders.

Directions are never guessed silently. A CSV without a sidecar whose column
names say they are costs (energy, kWh, CO2, time, memory, size, ...) is
refused unless ``lower=`` / ``higher=`` state those columns' directions; any
other sidecar-less CSV is read as higher-is-better everywhere, with a one-line
note (``note``, default: stderr) saying so. A CSV WITH a sidecar must have
every column described there (or stated by ``lower=`` / ``higher=``): a partial
sidecar is refused, never completed with defaults.

>>> cost_columns(["accuracy", "energy_kwh", "train time (h)", "f1", "n_params"])
['energy_kwh', 'train time (h)', 'n_params']
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError
from ranking.floor.paths import resolve_data_root

#: Words that, as a whole word of a column name, mark a cost (lower is better).
COST_WORDS = frozenset(
    "energy kwh wh joules co2 co2eq carbon emission emissions power watts hours hour duration time runtime "
    "seconds secs minutes latency memory mem vram ram params parameters size gb mb flops cost price "
    "gpu_hours exp_len_hours".split()
)


def cost_columns(names: Iterable[str]) -> list[str]:
    """The names that contain a cost word (:data:`COST_WORDS`) as a whole word (split at non-letters)."""
    out = []
    for name in names:
        words = set(re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", str(name)).lower()))
        if words & COST_WORDS:
            out.append(str(name))
    return out


def _stderr_note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def load_table(
    source: str | Path | Iterable[str | Path],
    *,
    data_root: str | Path | None = None,
    lower: Iterable[str] = (),
    higher: Iterable[str] = (),
    note: Callable[[str], None] | None = _stderr_note,
    format: str | None = None,
    **import_options: Any,
) -> Any:
    """The :class:`~ranking.table.ScoreTable` of a TABLE (module docstring).

    ``lower`` / ``higher`` name criteria whose direction is stated by the
    caller (``--lower`` / ``--higher``); they win over a sidecar's or a
    leaderboard's direction. ``note`` receives the one-line note about a
    sidecar-less CSV (None: no note).

    ``format`` reads another tool's results directly (``"lm-eval"``, ``"open-llm-leaderboard"``,
    ``"helm"``, ``"mteb"``, ``"codecarbon"``; ``source``: one path or several) through
    :func:`ranking.importers.import_table`, which takes ``import_options`` (``on_duplicate``,
    ``codecarbon``, ``codecarbon_map``, ``codecarbon_key``); ``lower`` / ``higher`` then name
    metrics or columns whose direction the source does not state.
    """
    if format is not None:
        from ranking.importers import import_table

        return import_table(format, source, higher=higher, lower=lower, note=note or (lambda _m: None),
                            **import_options)
    if import_options:
        raise TypeError(f"load_table() got unexpected keyword argument(s) {', '.join(import_options)} "
                        "(they are options of format=...)")
    lower, higher = [str(c) for c in lower], [str(c) for c in higher]
    both = sorted(set(lower) & set(higher))
    if both:
        raise UserError(f"column {both[0]!r} is given both as --lower and as --higher")
    root = resolve_data_root(data_root)
    stated = {**{c: "lower" for c in lower}, **{c: "higher" for c in higher}}
    table, sidecar_less = read_table(str(source), root, stated=stated)
    unknown = [c for c in stated if c not in table.names]
    if unknown:
        raise UserError(
            f"--lower/--higher name unknown column {unknown[0]!r} of {table.source or source} "
            f"(columns: {', '.join(table.names)})"
        )
    if sidecar_less:
        unstated = [c for c in cost_columns(table.names) if c not in stated]
        if unstated:
            cols = ",".join(unstated)
            raise UserError(
                f"{table.source} has no criteria sidecar and column(s) {', '.join(unstated)} look like costs: "
                f"state their direction with --lower {cols} (or --higher {cols}), "
                f"or write a criteria.yaml (`vnr criteria init {source}`)"
            )
        rest = [c for c in table.names if c not in stated]
        if rest and note is not None:
            note(
                f"{table.source} has no criteria sidecar: "
                f"{'every column is' if len(rest) == table.n_criteria else 'columns without --lower/--higher are'} "
                "read as higher-is-better (see `vnr criteria init`)"
            )
    if stated:
        table = table.with_criteria([replace(c, direction=stated.get(c.name, c.direction)) for c in table.criteria])
    return table


def benchbench_name(path: Path) -> str | None:
    """The benchbench leaderboard a path names (``.../benchbench/helm/accuracy.tsv`` → ``helm/accuracy``)."""
    parts = path.parts
    if "benchbench" not in parts:
        return None
    rel = list(parts[len(parts) - parts[::-1].index("benchbench") :])
    if not rel:
        return None
    if rel[-1] in ("leaderboard.tsv",):
        rel = rel[:-1]
    rel[-1] = rel[-1].removesuffix(".tsv")
    return "/".join(rel)


def root_of(path: Path, folder: str) -> Path:
    """The data root above ``.../[leaderboards/]<folder>/...`` (for loaders that take a root)."""
    parts = path.resolve().parts
    i = len(parts) - parts[::-1].index(folder) - 1
    return Path(*parts[:i])


def read_table(spec: str, root: Path | None, *, stated: Iterable[str] = ()) -> tuple[Any, bool]:
    """(table, whether it is a CSV read without a sidecar) for a TABLE; ``root``: the resolved data root.

    ``stated``: columns whose direction the caller states (``--higher``/``--lower``), which a CSV's sidecar
    may then leave undescribed.

    The reading half of :func:`load_table`, for callers that state directions their own way
    (a scenario's ``directions:``); everyone else calls :func:`load_table`.
    """
    for path in _candidates(spec, root):
        if path.is_dir() and (path / "matrix.csv").exists():
            return _read_csv(path / "matrix.csv", stated)
        if not (path.exists() or path.with_suffix(".tsv").exists()):
            continue
        bb = benchbench_name(path)
        if bb is not None:
            from ranking.published import load_benchbench

            return load_benchbench(bb, root_of(path, "benchbench")), False
        if path.is_dir():
            raise UserError(f"{path} is a directory without matrix.csv: pass a CSV or a leaderboard spec")
        if path.suffix.lower() in (".yaml", ".yml"):
            from ranking.leaderboard import load_leaderboard

            return load_leaderboard(path, data_root=root), False
        if path.suffix == ".data":
            from ranking.published import load_ranking_nlp

            return load_ranking_nlp(path), False
        if "instance_level" in path.parts:
            raise UserError(f"{spec} is an instance-level table: use `vnr analyze instance {spec}`")
        if path.suffix.lower() in (".json", ".jsonl"):  # another tool's results, not a table
            raise UserError(f"{spec} is JSON, not a score table: import another tool's results first "
                            f"(`vnr import lm-eval|helm|mteb {spec} -o DIR`, then rank DIR)")
        return _read_csv(path, stated)
    from ranking.published import BENCHBENCH, load_benchbench

    bare = spec.strip("/").removeprefix("benchbench/")
    if bare in BENCHBENCH or bare in ("helm", "heim"):
        return load_benchbench(bare, root), False
    if Path(spec).suffix.lower() in (".csv", ".yaml", ".yml", ".tsv", ".data"):
        raise UserError(f"cannot read {spec}: no such file (and not found under the data root)")
    raise UserError(
        f"TABLE {spec!r} not found: give a CSV, a results folder, a leaderboard spec, or a path under the data "
        "root (e.g. benchbench/glue, ranking_nlp/glue.data); pass --data-root or set VNR_DATA_ROOT"
    )


def _read_csv(path: Path, stated: Iterable[str] = ()) -> tuple[Any, bool]:
    from ranking.table import ScoreTable, find_sidecar

    sidecar = find_sidecar(path)
    return ScoreTable.from_csv(path, sidecar, stated=stated), sidecar is None


def _candidates(spec: str, root: Path | None) -> list[Path]:
    out = [Path(spec).expanduser()]
    if root is not None and not Path(spec).is_absolute():
        out += [root / spec, root / "leaderboards" / spec]
    return out


def sidecar_template(table: Any, stated: Mapping[str, str] | None = None, table_file: str | None = None) -> str:
    """A ``criteria.yaml`` for ``table``: every column with its direction, weight, group and unit.

    The direction is the one ``stated`` (column → higher/lower), else lower for a cost-like
    name (:func:`cost_columns`), else the table's. ``table_file``: the CSV's file name, written as
    ``table:`` so the sidecar describes that CSV only. Any column name round-trips (quoted where YAML
    would read it otherwise: ``true``, ``a: b``, ``#x``, ``-x``, emoji, quotes, ...).

    >>> import numpy as np
    >>> from ranking.table import Criterion, ScoreTable
    >>> t = ScoreTable(("A", "B"), (Criterion("acc"), Criterion("kwh"), Criterion("yes")),
    ...                np.array([[0.9, 2.0, 1], [0.8, 1.0, 0]]))
    >>> print(sidecar_template(t, table_file="scores.csv"))  # doctest: +NORMALIZE_WHITESPACE
    # Criteria of the score table: one entry per column.
    #   direction: higher | lower   (which way is better; check every line)
    #   weight:    >= 0             (default 1; 0 = shown but not ranked)
    #   group:     optional name    (e.g. performance / efficiency / fairness; needed by --setting weighted/two-step)
    #   unit:      optional text
    table: scores.csv
    criteria:
      acc: {direction: higher, weight: 1}
      kwh: {direction: lower, weight: 1}
      "yes": {direction: higher, weight: 1}
    <BLANKLINE>
    """
    costs = set(cost_columns(table.names))
    lines = [
        "# Criteria of the score table: one entry per column.",
        "#   direction: higher | lower   (which way is better; check every line)",
        "#   weight:    >= 0             (default 1; 0 = shown but not ranked)",
        "#   group:     optional name    (e.g. performance / efficiency / fairness; needed by --setting weighted/two-step)",
        "#   unit:      optional text",
    ]
    if table_file is not None:
        lines.append(f"table: {_yaml_scalar(table_file)}")
    lines.append("criteria:")
    for c in table.criteria:
        direction = (stated or {}).get(c.name) or ("lower" if c.name in costs else c.direction)
        attrs = f"direction: {direction}, weight: {c.weight:g}"
        if c.group:
            attrs += f", group: {_yaml_scalar(c.group)}"
        if c.unit:
            attrs += f", unit: {_yaml_scalar(c.unit)}"
        lines.append(f"  {_yaml_scalar(c.name)}: {{{attrs}}}")
    return "\n".join(lines) + "\n"


def _yaml_scalar(text: str) -> str:
    """``text`` as a YAML scalar that reads back as exactly ``text``: plain where that is safe, else double-quoted."""
    import yaml

    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*(?: [A-Za-z0-9_.\-]+)*", text):
        try:
            if yaml.safe_load(f"{text}: 1") == {text: 1} and yaml.safe_load(f"[{text}]") == [text]:
                return text
        except yaml.YAMLError:
            pass
    quoted = yaml.safe_dump(text, default_style='"', allow_unicode=True, width=float("inf"))
    return quoted.removesuffix("\n").removesuffix("\n...").rstrip("\n")
