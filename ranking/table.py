"""The score table: models (rows) × criteria (columns), validated once.

Everything in :mod:`ranking` consumes a :class:`ScoreTable`. It holds raw
scores (NaN = missing) and, per criterion, a :class:`Criterion` with the
direction (``higher`` or ``lower`` is better), a weight (default 1), an
optional group (e.g. performance / efficiency / fairness), a unit and a source.

Validation happens here and only here, at construction, with errors that name
the offending model or column: duplicate names, non-numeric cells, ±inf,
negative / all-zero / non-finite weights, unknown directions or groups, an
empty table, a criterion or a model without any score.

>>> import pandas as pd
>>> t = ScoreTable.from_frame(
...     pd.DataFrame({"acc": [0.9, 0.8], "kwh": [2.0, 1.0]}, index=["A", "B"]),
...     directions={"kwh": "lower"},
... )
>>> t.models, t.names
(('A', 'B'), ('acc', 'kwh'))
>>> t.oriented.tolist()   # every column higher-is-better
[[0.9, -2.0], [0.8, -1.0]]
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from ranking.floor.errors import UserError
from ranking.floor.paths import file_inside
from ranking.floor.together import recover
from ranking.floor.yaml_io import read_yaml

if TYPE_CHECKING:
    import pandas as pd

DIRECTIONS = ("higher", "lower", "target")


@dataclass(frozen=True)
class Criterion:
    """One column of a score table and how to read it.

    Besides the direction and weight, a criterion says what it measures, so that rankings count each
    benchmark once (:mod:`ranking.votes`):

    * ``benchmark`` the benchmark it belongs to (None: its own), ``task`` and ``metric``, and the
      source's ``settings`` (n-shot, filter, split, version, precision, ...) under which it was measured;
    * ``detail``: kept for reference but not voting by default (a subtask behind its benchmark's
      aggregate, a secondary metric); ``aggregate``: the source's own aggregate of other columns of its
      benchmark (it votes for them by default, and gives way to them under ``--vote column``);
    * ``range``: (lo, hi) the valid values (None = open): a score outside is refused when the table is built;
    * ``direction="target"`` with ``target``: the closer to the target, the better (a signed bias score
      whose ideal is 0, a "50 % is unbiased" score).

    >>> Criterion("bias", direction="target", target=0.0).orient(np.array([-1.0, 0.0, 0.25])).tolist()
    [-1.0, -0.0, -0.25]
    """

    name: str
    direction: str = "higher"
    weight: float = 1.0
    group: str | None = None
    unit: str | None = None
    source: str | None = None
    method: str | None = None  # how the figures were obtained (collect: measured | estimate | mixed | none | unknown)
    target: float | None = None
    benchmark: str | None = None
    task: str | None = None
    metric: str | None = None
    settings: tuple[tuple[str, Any], ...] | None = None
    range: tuple[float | None, float | None] | None = None
    detail: bool = False
    aggregate: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.benchmark, str) and self.benchmark != self.benchmark.strip():
            # a benchmark's name is compared (one vote per benchmark): normalised once, where it enters
            object.__setattr__(self, "benchmark", self.benchmark.strip())
        if isinstance(self.settings, Mapping):  # a mapping is kept as sorted (key, value) pairs: hashable, one order
            object.__setattr__(self, "settings", tuple(sorted((str(k), v) for k, v in self.settings.items())))
        if self.range is not None and not isinstance(self.range, tuple):
            object.__setattr__(self, "range", tuple(self.range))

    @property
    def sign(self) -> float:
        """+1 if higher is better, -1 if lower is better (or closest to a target: see :meth:`orient`)."""
        return -1.0 if self.direction == "lower" else 1.0

    @property
    def vote_unit(self) -> str:
        """What casts one vote: the benchmark, else the column itself."""
        return self.benchmark if self.benchmark is not None else self.name

    def orient(self, values: np.ndarray) -> np.ndarray:
        """The scores turned higher-is-better: negated for lower, minus the distance for a target."""
        if self.direction == "target":
            return -np.abs(np.asarray(values, dtype=float) - float(self.target))
        return np.asarray(values, dtype=float) * self.sign

    def describe_direction(self) -> str:
        """``higher``, ``lower`` or ``closest to 0``."""
        return f"closest to {self.target:g}" if self.direction == "target" else self.direction

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"direction": self.direction, "weight": float(self.weight)}
        if self.direction == "target":
            out["target"] = float(self.target)
        for key in ("group", "unit", "source", "method", "benchmark", "task", "metric"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.settings:
            out["settings"] = dict(self.settings)
        if self.range is not None:
            out["range"] = [None if x is None else float(x) for x in self.range]
        for key in ("detail", "aggregate"):
            if getattr(self, key):
                out[key] = True
        return out


def _finite_number(c: Criterion, what: str, value: Any) -> float:
    """``value`` (the criterion's ``what``: weight, target) as a finite float, or a one-line :class:`UserError`."""
    if isinstance(value, bool):
        raise UserError(f"criterion {c.name!r}: {what} {value!r} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UserError(f"criterion {c.name!r}: {what} {value!r} is not a number") from None
    if not math.isfinite(x):
        raise UserError(f"criterion {c.name!r}: {what} {value!r} is not finite")
    return x


def _check_criterion(c: Criterion, known_groups: Sequence[str] | None) -> Criterion:
    """The criterion with its weight as a float, or a :class:`UserError` saying what is wrong with it.

    The one check of a :class:`Criterion` object, whatever built it (the Python API, a file's schema-checked
    entry); files are checked against their schema (:mod:`ranking.schemas`) before.

    >>> _check_criterion(Criterion("acc", direction="up"), None)
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: criterion 'acc': direction 'up' is not one of higher, lower, target
    >>> _check_criterion(Criterion("bias", direction="target"), None)
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: criterion 'bias': direction target needs a target value (the best score, e.g. target: 0)
    """
    if not isinstance(c.name, str) or not c.name.strip():
        raise UserError(f"criterion name {c.name!r} is empty: give every column a name")
    if not isinstance(c.direction, str) or c.direction not in DIRECTIONS:
        raise UserError(
            f"criterion {c.name!r}: direction {c.direction!r} is not one of {', '.join(DIRECTIONS)}"
        )
    if c.direction == "target":
        if c.target is None or isinstance(c.target, bool):
            raise UserError(f"criterion {c.name!r}: direction target needs a target value (the best score, "
                            "e.g. target: 0)")
        _finite_number(c, "target", c.target)
    elif c.target is not None:
        raise UserError(f"criterion {c.name!r}: a target ({c.target!r}) is given but the direction is "
                        f"{c.direction}: write direction: target, or remove the target")
    if c.range is not None:
        lo, hi = c.range if len(c.range) == 2 else (None, None)
        if len(c.range) != 2 or any(x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))
                                                       or not math.isfinite(x)) for x in (lo, hi)):
            raise UserError(f"criterion {c.name!r}: range {list(c.range)!r} is not [lo, hi] (finite numbers, "
                            "null for an open end)")
        if lo is not None and hi is not None and lo > hi:
            raise UserError(f"criterion {c.name!r}: range [{lo:g}, {hi:g}] is empty: write [low, high]")
    if c.detail and c.aggregate:
        raise UserError(f"criterion {c.name!r} is both a detail and an aggregate: an aggregate votes for its "
                        "benchmark's detail columns")
    weight = _finite_number(c, "weight", c.weight)
    if weight < 0:
        raise UserError(f"criterion {c.name!r}: weight {weight:g} is negative; weights must be >= 0")
    if c.method is not None and (not isinstance(c.method, str) or not c.method.strip()):
        raise UserError(f"criterion {c.name!r}: method {c.method!r} is not text (e.g. measured, estimate)")
    if known_groups is not None and c.group is not None and c.group not in known_groups:
        raise UserError(
            f"criterion {c.name!r}: unknown group {c.group!r} (known groups: {', '.join(known_groups)})"
        )
    out = c if type(c.weight) is float else replace(c, weight=weight)
    return out if c.direction != "target" or type(c.target) is float else replace(out, target=float(c.target))


@dataclass(frozen=True, eq=False)
class ScoreTable:
    """Validated models × criteria scores. Immutable: transformations return new tables."""

    models: tuple[str, ...]
    criteria: tuple[Criterion, ...]
    values: np.ndarray = field(repr=False)
    source: str | None = None
    #: per-score standard errors from the source (same shape as ``values``; NaN = unknown), or None.
    standard_errors: np.ndarray | None = field(default=None, repr=False)
    #: the leaderboard the table was imported from (a key of :data:`ranking.boards.BOARDS`), or None.
    board: str | None = None
    #: True for a table computed from a checked one by new values (bootstrap draws, :meth:`with_values`) and the
    #: sub-tables of such a table: its scores may leave the declared ranges on purpose. Every other table, however
    #: it is built (a CSV, a frame, an importer, the constructor in Python), is refused when a score leaves its
    #: criterion's ``range``.
    derived: bool = field(default=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        # a name's edge spaces are never meaningful: "A" and "A " are one model (a duplicate), on every entry
        models = tuple(str(m).strip() for m in self.models)
        # every entry (sidecar, leaderboard spec, scenario, Python API) gets the same criterion checks
        criteria = tuple(_check_criterion(c, None) for c in self.criteria)
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "criteria", criteria)
        where = f" in {self.source}" if self.source else ""
        if not models or not criteria:
            raise UserError(
                f"the score table{where} is empty ({len(models)} models × {len(criteria)} criteria): "
                "it needs at least one model and one criterion"
            )
        _no_duplicates(models, "model", where)
        _no_control_characters(models, "model", where)
        _no_duplicates([c.name for c in criteria], "criterion", where)
        try:
            values = np.array(self.values, dtype=float, copy=True)
        except (TypeError, ValueError):
            raise UserError(f"the score table{where} has non-numeric cells") from None
        if values.shape != (len(models), len(criteria)):
            raise ValueError(
                f"values have shape {values.shape}, expected {(len(models), len(criteria))}"
            )
        bad = np.isinf(values)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise UserError(
                f"score of model {models[i]!r} on criterion {criteria[j].name!r}{where} is "
                f"{values[i, j]}: scores must be finite (leave the cell empty for a missing score)"
            )
        empty_cols = np.isnan(values).all(axis=0)
        if empty_cols.any():
            name = criteria[int(np.argmax(empty_cols))].name
            raise UserError(f"criterion {name!r}{where} has no score for any model: drop the column")
        empty_rows = np.isnan(values).all(axis=1)
        if empty_rows.any():
            name = models[int(np.argmax(empty_rows))]
            raise UserError(f"model {name!r}{where} has no score on any criterion: drop the row")
        values.setflags(write=False)
        object.__setattr__(self, "values", values)
        if self.standard_errors is not None:
            object.__setattr__(self, "standard_errors", _checked_errors(self.standard_errors, models, criteria, where))
        if not any(c.weight > 0 for c in criteria):
            raise UserError(f"all criterion weights{where} are zero: at least one must be positive")
        if not self.derived:  # the one range check, wherever a table enters
            _check_ranges(values, models, criteria, where)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        directions: Mapping[str, str] | None = None,
        weights: Mapping[str, float] | None = None,
        groups: Mapping[str, str] | None = None,
        units: Mapping[str, str] | None = None,
        criteria: Iterable[Criterion] | None = None,
        known_groups: Sequence[str] | None = None,
        source: str | None = None,
    ) -> ScoreTable:
        """A table from a DataFrame whose index holds the model names.

        Per-criterion attributes come either as full :class:`Criterion` objects
        (``criteria``, matched by name) or as mappings column → value; columns
        not mentioned get the defaults (higher is better, weight 1, no group).
        Mentioning a column the frame does not have is an error.
        """
        import pandas as pd

        where = f" in {source}" if source else ""
        if frame.columns.duplicated().any():
            dup = frame.columns[frame.columns.duplicated()][0]
            raise UserError(f"criterion {dup!r} appears more than once{where}")
        columns = [str(c) for c in frame.columns]
        crits = _criteria_of(columns, criteria, known_groups, where,
                             direction=directions, weight=weights, group=groups, unit=units)
        values = np.empty(frame.shape, dtype=float)
        for j, col in enumerate(frame.columns):
            series = frame[col]
            numeric = pd.to_numeric(series, errors="coerce")
            bad = numeric.isna() & series.notna() & (series.astype(str).str.strip() != "")
            if bad.any():
                model = frame.index[int(np.argmax(bad.to_numpy()))]
                cell = series[bad].iloc[0]
                raise UserError(
                    f"score of model {str(model)!r} on criterion {str(col)!r}{where} is {cell!r}, not a number"
                )
            values[:, j] = numeric.to_numpy(dtype=float)
        return cls(tuple(str(m) for m in frame.index), crits, values, source=source)

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        sidecar: str | Path | None | bool = None,
        *,
        model_column: str | None = None,
        stated: Iterable[str] = (),
    ) -> ScoreTable:
        """A table from a CSV (one row per model) and an optional criteria sidecar YAML.

        The model names come from ``model_column``, else the sidecar's
        ``model_column``, else a column named ``model``, else the first column.
        The sidecar (``<stem>.yaml``, ``<stem>.criteria.yaml`` or ``criteria.yaml``
        beside the CSV, found by :func:`find_sidecar` when ``sidecar`` is None; ``False``: none)
        describes exactly this table (schema: :class:`ranking.schemas.Sidecar`)::

            table: scores.csv            # the CSV it describes (vnr collect adds sha256: of its bytes)
            model_column: model          # optional
            groups: [performance, efficiency, fairness]   # optional: the allowed groups
            criteria:                    # EVERY column but the model column
              cola_mcc: {direction: higher, weight: 1, group: performance, unit: "%"}
              rte_kwh:  {direction: lower, group: efficiency, unit: kWh, method: estimate}

        ``source`` and ``method`` (how the figures were obtained) are optional text,
        carried along (the HTML report shows the method beside the unit), never used
        in a ranking. A column the sidecar does not describe is refused unless its
        direction is ``stated`` by the caller (``--higher``/``--lower``); a sidecar that
        names another table, columns the CSV lacks, or a sha256 the CSV's bytes no
        longer have is refused (:func:`check_binding`). An empty cell is a missing
        score; any other cell must be a number. (Read with the ``csv`` module,
        not pandas, so ``vnr rank`` does not pay for importing pandas.)
        A write of the folder that a kill interrupted is finished first (:func:`ranking.floor.together.recover`).
        """
        path = Path(path)
        recover(path.parent)  # never read half of an import or a collect (one stat when there is no journal)
        header, rows, lines = _read_csv_rows(path)
        _no_duplicates([h.strip() for h in header], "column", f" in {path}")
        if sidecar is None:
            sidecar = find_sidecar(path)
        spec = read_sidecar(sidecar) if sidecar else None
        if spec is not None:
            check_binding(spec, Path(sidecar), path)
        model_column = model_column or (spec.model_column if spec is not None else None)
        if model_column is None:
            model_column = "model" if "model" in header else (header[0] if header else None)
        if model_column is None or model_column not in header:
            raise UserError(f"{path}: model column {model_column!r} not found (columns: {', '.join(header)})")
        m = header.index(model_column)
        _no_blank_names(header, rows, lines, m, str(path))
        columns = [h for k, h in enumerate(header) if k != m]
        where = f" in {path}"
        described: list[Criterion] = []
        if spec is not None:
            _describes_every_column(spec, Path(sidecar), path, columns, set(stated))
            described = [Criterion(name, **attrs.model_dump()) for name, attrs in spec.criteria.items()]
        crits = _criteria_of(columns, described, spec.groups if spec is not None else None, where)
        models = tuple(row[m].strip() for row in rows)
        values = np.empty((len(rows), len(columns)), dtype=float)
        for j, k in enumerate(k for k in range(len(header)) if k != m):  # column by column, like from_frame
            for i, row in enumerate(rows):
                values[i, j] = _cell(row[k], models[i], header[k], where)
        errors = None
        if spec is not None and spec.standard_errors is not None:
            errors_path = file_inside(Path(sidecar).parent, spec.standard_errors, "standard errors")
            if spec.standard_errors_sha256 is not None:
                try:
                    digest = sha256_of(errors_path.read_bytes())
                except OSError as exc:
                    raise UserError(f"cannot read {errors_path}: {exc.strerror or exc}") from None
                if digest != spec.standard_errors_sha256:
                    raise UserError(f"{errors_path.name} changed since {Path(sidecar).name} was written — import "
                                    f"the table again, or remove the standard_errors_sha256 line of {sidecar}")
            errors = read_standard_errors(errors_path, models, columns, model_column)
        return cls(models, crits, values, source=str(path), standard_errors=errors,
                   board=spec.board if spec is not None else None)

    @classmethod
    def load(cls, path: str | Path) -> ScoreTable:
        """Read a CSV (with its sidecar if present) or a results folder's ``matrix.csv``.

        Commands and the Python API read every kind of TABLE (leaderboard specs,
        benchbench, ...) through :func:`ranking.load_table`; this reads only the
        file format this module defines.
        """
        path = Path(path)
        if path.is_dir():
            if (path / "matrix.csv").exists():
                return cls.from_csv(path / "matrix.csv")
            raise UserError(f"{path} is a directory without matrix.csv: pass a CSV")
        return cls.from_csv(path)

    # ------------------------------------------------------------------ views
    @property
    def names(self) -> tuple[str, ...]:
        """Criterion names, in column order."""
        return tuple(c.name for c in self.criteria)

    @property
    def weights(self) -> np.ndarray:
        return np.array([c.weight for c in self.criteria], dtype=float)

    @property
    def signs(self) -> np.ndarray:
        return np.array([c.sign for c in self.criteria], dtype=float)

    @property
    def groups(self) -> tuple[str | None, ...]:
        """Each criterion's group (None where it has none)."""
        return tuple(c.group for c in self.criteria)

    @property
    def group_names(self) -> tuple[str, ...]:
        """Distinct groups, in order of first appearance."""
        return tuple(dict.fromkeys(g for g in self.groups if g is not None))

    @property
    def oriented(self) -> np.ndarray:
        """Scores with every criterion turned higher-is-better (lower-is-better columns negated, a target
        column's distance from its target negated)."""
        out = self.values * self.signs
        for j, c in enumerate(self.criteria):
            if c.direction == "target":
                out[:, j] = c.orient(self.values[:, j])
        return out

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_criteria(self) -> int:
        return len(self.criteria)

    @property
    def missing(self) -> np.ndarray:
        """Boolean mask of missing scores."""
        return np.isnan(self.values)

    @property
    def has_missing(self) -> bool:
        return bool(self.missing.any())

    def frame(self) -> pd.DataFrame:
        """Raw scores as a DataFrame (models × criteria)."""
        import pandas as pd

        return pd.DataFrame(self.values, index=list(self.models), columns=list(self.names))

    def criterion(self, name: str) -> Criterion:
        for c in self.criteria:
            if c.name == name:
                return c
        raise UserError(f"unknown criterion {name!r} (criteria: {', '.join(self.names)})")

    def model_index(self, name: str) -> int:
        try:
            return self.models.index(name)
        except ValueError:
            raise UserError(f"unknown model {name!r} (models: {', '.join(self.models)})") from None

    def __repr__(self) -> str:
        groups = f", groups={list(self.group_names)}" if self.group_names else ""
        return f"ScoreTable({self.n_models} models × {self.n_criteria} criteria{groups})"

    # ------------------------------------------------------------------ transformations
    def with_values(self, values: np.ndarray) -> ScoreTable:
        """A copy with new values (and no standard errors: they described the old ones)."""
        return ScoreTable(self.models, self.criteria, values, source=self.source, derived=True)

    def _errors(self, rows: Any = slice(None), cols: Any = slice(None)) -> np.ndarray | None:
        """The standard errors of the sub-table ``rows`` × ``cols`` (None when the table has none)."""
        return None if self.standard_errors is None else self.standard_errors[rows][:, cols]

    def with_standard_errors(self, errors: np.ndarray | None) -> ScoreTable:
        """A copy with per-score standard errors (models × criteria, NaN = unknown; None: none)."""
        return ScoreTable(self.models, self.criteria, self.values, source=self.source, standard_errors=errors,
                          board=self.board, derived=self.derived)

    def with_weights(self, weights: Mapping[str, float] | Sequence[float] | np.ndarray) -> ScoreTable:
        """A copy with new weights: a mapping (name → weight; others unchanged) or one per criterion."""
        if isinstance(weights, Mapping):
            unknown = [n for n in weights if n not in self.names]
            if unknown:
                raise UserError(f"weight given for unknown criterion {unknown[0]!r} (criteria: {', '.join(self.names)})")
            crits = tuple(replace(c, weight=weights.get(c.name, c.weight)) for c in self.criteria)
        else:
            w = np.asarray(weights, dtype=float)
            if w.shape != (self.n_criteria,):
                raise UserError(f"expected {self.n_criteria} weights, got {w.shape[0] if w.ndim else 1}")
            crits = tuple(replace(c, weight=float(x)) for c, x in zip(self.criteria, w))
        crits = tuple(_check_criterion(c, None) for c in crits)
        return ScoreTable(self.models, crits, self.values, source=self.source, standard_errors=self.standard_errors,
                          board=self.board, derived=self.derived)

    def with_criteria(self, criteria: Sequence[Criterion]) -> ScoreTable:
        """A copy with the criteria's attributes replaced (same names, same order)."""
        if tuple(c.name for c in criteria) != self.names:
            raise ValueError("with_criteria needs the same criterion names in the same order")
        crits = tuple(_check_criterion(c, None) for c in criteria)
        return ScoreTable(self.models, crits, self.values, source=self.source, standard_errors=self.standard_errors,
                          board=self.board, derived=self.derived)

    def select_models(self, models: Sequence[str]) -> ScoreTable:
        idx = [self.model_index(m) for m in models]
        return ScoreTable(tuple(self.models[i] for i in idx), self.criteria, self.values[idx], source=self.source,
                          standard_errors=self._errors(idx), board=self.board, derived=self.derived)

    def drop_models(self, models: Iterable[str]) -> ScoreTable:
        drop = set(models)
        for m in drop:
            self.model_index(m)
        return self.select_models([m for m in self.models if m not in drop])

    def select_criteria(self, names: Sequence[str]) -> ScoreTable:
        idx = [self.names.index(self.criterion(n).name) for n in names]
        return ScoreTable(
            self.models, tuple(self.criteria[j] for j in idx), self.values[:, idx], source=self.source,
            standard_errors=self._errors(cols=idx), derived=self.derived,
        )

    def group(self, name: str) -> ScoreTable:
        """The sub-table of one group's criteria (models without any score there are dropped)."""
        if name not in self.group_names:
            raise UserError(f"unknown group {name!r} (groups: {', '.join(self.group_names) or 'none'})")
        cols = [j for j, c in enumerate(self.criteria) if c.group == name]
        values = self.values[:, cols]
        keep = ~np.isnan(values).all(axis=1)
        return ScoreTable(
            tuple(m for m, k in zip(self.models, keep) if k),
            tuple(self.criteria[j] for j in cols),
            values[keep],
            source=self.source,
            standard_errors=self._errors(keep, cols), derived=self.derived,
        )

    def incomplete_models(self, among: np.ndarray | None = None) -> list[str]:
        """Models missing a score on some criterion of ``among`` (a boolean mask over the criteria;
        default: those of non-zero weight)."""
        among = self.weights > 0 if among is None else np.asarray(among, dtype=bool)
        bad = np.isnan(self.values[:, among]).any(axis=1)
        return [m for m, b in zip(self.models, bad) if b]

    def complete_rows(self, among: np.ndarray | None = None, *, empty: str | None = None
                      ) -> tuple[ScoreTable, list[str]]:
        """The table without the models missing a score on a criterion of ``among`` (a boolean mask;
        default: every criterion, weight-0 ones included — pandas ``dropna()``, as the Vote'n'Rank
        authors ranked), and the models left out. ``empty``: the error when none would be left.

        >>> import pandas as pd
        >>> t = ScoreTable.from_frame(pd.DataFrame({"a": [1.0, None, 3.0], "b": [0.0, 1.0, None]}, index=list("xyz")))
        >>> t.complete_rows()[0].models, t.complete_rows()[1], t.complete_rows(np.array([True, False]))[1]
        (('x',), ['y', 'z'], ['y'])
        """
        dropped = self.incomplete_models(np.ones(len(self.criteria), dtype=bool) if among is None else among)
        if len(dropped) == self.n_models:
            raise UserError(empty or "every model misses some score: dropping incomplete models (the votenrank "
                            "preset) would leave an empty table; keep them with --keep-incomplete")
        return (self.drop_models(dropped) if dropped else self), dropped

    def drop_incomplete(self) -> ScoreTable:
        """Drop the models missing any criterion of non-zero weight."""
        return self.complete_rows(self.weights > 0, empty="every model misses some score: --drop-incomplete "
                                  "would leave an empty table")[0]

    # ------------------------------------------------------------------ persistence
    def to_csv(self, path: str | Path, sidecar: str | Path | None = None) -> None:
        """Write the CSV (first column ``model``) and its criteria sidecar YAML, bound to it by name and hash.

        A table with standard errors also writes them as ``stderr.csv`` beside the CSV (same model
        column and column names, empty = unknown), named in the sidecar by ``standard_errors:``.
        The sidecar is written last, so a failure never leaves a sidecar naming files that are not there.
        """
        import pandas as pd

        from ranking.floor.paths import write_text_atomic

        path = Path(path)
        frame = self.frame()
        frame.index.name = "model"
        text = frame.to_csv()
        sidecar = Path(sidecar) if sidecar is not None else path.with_name("criteria.yaml")
        doc: dict[str, Any] = {"table": path.name, "sha256": sha256_of(text.encode("utf-8")), "model_column": "model"}
        if self.group_names:
            doc["groups"] = list(self.group_names)
        if self.board is not None:
            doc["board"] = self.board
        if self.standard_errors is not None:
            errors_path = path.with_name(STANDARD_ERRORS_FILE)
            if errors_path.parent.resolve() != sidecar.parent.resolve():
                raise ValueError("a table with standard errors writes its sidecar beside its CSV")
            errors = pd.DataFrame(self.standard_errors, index=list(self.models), columns=list(self.names))
            errors.index.name = "model"
            errors_text = errors.to_csv()
            write_text_atomic(errors_path, errors_text)
            doc["standard_errors"] = errors_path.name
            doc["standard_errors_sha256"] = sha256_of(errors_text.encode("utf-8"))
        doc["criteria"] = {c.name: c.to_dict() for c in self.criteria}
        write_text_atomic(path, text)
        # libyaml's emitter where PyYAML has it: the same text (tested), 3-4x faster on a wide sidecar
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        write_text_atomic(sidecar, yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=True))


def _check_ranges(values: np.ndarray, models: Sequence[str], criteria: Sequence[Criterion], where: str) -> None:
    """A :class:`UserError` for the first score outside its criterion's declared ``range``."""
    for j, c in enumerate(criteria):
        if c.range is None:
            continue
        lo, hi = c.range
        col = values[:, j]
        bad = ((col < lo) if lo is not None else np.zeros(col.shape, bool)) | (
            (col > hi) if hi is not None else np.zeros(col.shape, bool))
        if bad.any():
            i = int(np.argmax(bad))
            shown = f"[{'' if lo is None else f'{lo:g}'}, {'' if hi is None else f'{hi:g}'}]"
            raise UserError(f"score of model {models[i]!r} on criterion {c.name!r}{where} is {col[i]:g}, outside "
                            f"its range {shown}: fix the score (or leave it empty), or the criterion's range")


# ---------------------------------------------------------------------- standard errors
#: The file beside a table's CSV that holds its per-score standard errors (named in the sidecar).
STANDARD_ERRORS_FILE = "stderr.csv"


def _checked_errors(errors: Any, models: Sequence[str], criteria: Sequence[Criterion], where: str) -> np.ndarray:
    """Standard errors as a read-only models × criteria float array: each NaN (unknown) or finite and >= 0."""
    try:
        se = np.array(errors, dtype=float, copy=True)
    except (TypeError, ValueError):
        raise UserError(f"the standard errors{where} have non-numeric cells") from None
    if se.shape != (len(models), len(criteria)):
        raise ValueError(f"standard errors have shape {se.shape}, expected {(len(models), len(criteria))}")
    bad = np.isinf(se) | (se < 0)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise UserError(f"standard error of model {models[i]!r} on criterion {criteria[j].name!r}{where} is "
                        f"{se[i, j]}: a standard error is finite and >= 0 (leave it empty when unknown)")
    se.setflags(write=False)
    return se


def read_standard_errors(path: Path, models: Sequence[str], columns: Sequence[str], model_column: str) -> np.ndarray:
    """The standard errors CSV named by a sidecar, aligned to the table: a declared schema bound to its table.

    One row per model and one column per criterion, the table's model column and column names (a model or
    column the table lacks is refused, and so is a model or column given twice); each cell empty (unknown) or a
    number (finite and >= 0, checked by the table). A model without a row, or an empty cell, is an **unknown**
    standard error (NaN): the intervals never separate such a model (:func:`ranking.intervals.error_source`).
    """
    path = file_inside(path.parent, path.name, "standard errors")
    header, rows, lines = _read_csv_rows(path)
    where = f" in {path}"
    if model_column not in header:
        raise UserError(f"{path}: model column {model_column!r} not found (columns: {', '.join(header)})")
    m = header.index(model_column)
    _no_blank_names(header, rows, lines, m, str(path))
    out = np.full((len(models), len(columns)), np.nan)
    col_of: dict[int, int] = {}
    for k, name in enumerate(header):
        if k == m:
            continue
        if name not in columns:
            raise UserError(f"{path}: column {name!r} is not a column of the score table: the standard errors "
                            "use the table's column names")
        if columns.index(name) in col_of.values() or name == model_column:
            raise UserError(f"{path}: column {name!r} appears twice: give each criterion one column")
        col_of[k] = columns.index(name)
    seen: dict[str, int] = {}
    for row, line in zip(rows, lines):
        model = row[m].strip()
        if model not in models:
            raise UserError(f"{path}: model {model!r} is not a model of the score table")
        if model in seen:
            raise UserError(f"{path}: model {model!r} has two rows (lines {seen[model]} and {line}): give each "
                            "model one row")
        seen[model] = line
        i = models.index(model)
        for k, j in col_of.items():
            out[i, j] = _cell(row[k], model, header[k], where)
    return out


def _no_duplicates(names: Sequence[str], what: str, where: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise UserError(f"{what} {n!r} appears more than once{where}: names must be unique")
        seen.add(n)


def control_character_at(name: str) -> int | None:
    """Where the first control character (Unicode category Cc: NUL, tab, CR, ESC, DEL, ...) of ``name`` is, or None.

    >>> control_character_at("a\\rb"), control_character_at("ab")
    (1, None)
    """
    import unicodedata

    return next((i for i, c in enumerate(name) if unicodedata.category(c) == "Cc"), None)


def _no_control_characters(names: Sequence[str], what: str, where: str) -> None:
    """A :class:`UserError` for a name holding a control character (NUL, tab, newline, escape, DEL, ...): it
    would print as a space or not at all, and two names that look alike would be two models.

    >>> _no_control_characters(["a", "b" + chr(27) + "c"], "model", " in t.csv")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: model 'b\\x1bc' in t.csv has a control character ('\\x1b' at position 2): remove it (a name is printable text)
    """
    for name in names:
        at = control_character_at(name)
        if at is not None:
            shown = repr(name if len(name) <= 60 else name[:57] + "...")
            raise UserError(f"{what} {shown}{where} has a control character ({name[at]!r} at position {at + 1}): "
                            "remove it (a name is printable text)")


def _no_blank_names(
    header: Sequence[str], rows: Sequence[Sequence[str]], lines: Sequence[int], m: int, where: str
) -> None:
    """A :class:`UserError` for a blank criterion header or an empty model cell (column ``m`` is the models').

    A blank header is fine on the model column (pandas writes its index that way). ``lines`` are the
    file's line numbers of ``rows``.
    """
    for j, name in enumerate(header):
        if j != m and not name.strip():
            raise UserError(f"{where}: column {j + 1} of the header is blank: give every criterion a name")
    for row, line in zip(rows, lines):
        if not row[m].strip():
            raise UserError(f"{where}: line {line} has no model name in column {header[m]!r}: name every model")


def _csv_header(path: Path) -> list[str]:
    """The CSV's header cells as written (a reader that renames a repeated name would hide the duplicate)."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return [c.strip() for c in next(csv.reader(fh), [])]
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def _read_csv_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """(header, rows, line numbers of the rows) of a CSV; blank lines skipped, header cells stripped, a row
    with another number of fields than the header refused."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            lines = [(reader.line_num, row) for row in reader if row and any(c.strip() for c in row) or len(row) > 1]
    except FileNotFoundError:
        raise UserError(f"cannot read {path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not lines:
        raise UserError(f"cannot read {path}: the file is empty (no header row)")
    header = [h.strip() for h in lines[0][1]]
    if len(header) == 1:
        for sep, name in ((";", "semicolon"), ("\t", "tab")):
            if sep in header[0]:
                raise UserError(f"cannot read {path}: its header is one column {header[0]!r}, {name}-separated it "
                                "seems: save the table comma-separated")
    rows = []
    numbers = []
    for number, row in lines[1:]:
        if len(row) != len(header):  # a short row is as likely a lost cell as trailing missing scores
            raise UserError(f"cannot read {path}: line {number} has {len(row)} fields, the header {len(header)}: "
                            "give every column a cell (an empty cell is a missing score)")
        rows.append(row)
        numbers.append(number)
    return header, rows, numbers


_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity)", re.IGNORECASE)


def _cell(text: str, model: str, column: str, where: str) -> float:
    """A CSV cell as a score: empty (or blank) is missing (NaN), else a decimal number."""
    t = text.strip()
    if not t:
        return math.nan
    if not _NUMBER.fullmatch(t):
        raise UserError(f"score of model {model!r} on criterion {column!r}{where} is {text!r}, not a number")
    return float(t)


def _criteria_of(
    columns: Sequence[str],
    criteria: Iterable[Criterion] | None,
    known_groups: Sequence[str] | None,
    where: str,
    **attributes: Mapping[str, Any] | None,
) -> tuple[Criterion, ...]:
    """One validated :class:`Criterion` per column: described ones by name, ``attributes`` (attr → column →
    value) on top, defaults for the rest; describing a column that does not exist is an error."""
    by_name: dict[str, Criterion] = {name: Criterion(name) for name in columns}
    for c in criteria or ():
        if c.name not in by_name:
            raise UserError(f"criterion {c.name!r} is described but is not a column{where}")
        by_name[c.name] = c
    for attr, mapping in attributes.items():
        for name, value in (mapping or {}).items():
            if name not in by_name:
                raise UserError(f"{attr} given for unknown column {name!r}{where} (columns: {', '.join(columns)})")
            by_name[name] = replace(by_name[name], **{attr: value})
    return tuple(_check_criterion(by_name[name], known_groups) for name in columns)


def find_sidecar(csv_path: Path) -> Path | None:
    """The criteria sidecar for a CSV: ``<stem>.yaml`` / ``<stem>.criteria.yaml`` / ``criteria.yaml`` beside it.

    Whether it describes THIS CSV is :func:`check_binding`'s question, asked when it is read.
    Where several of them exist and more than one describes this CSV (by ``table:``, or, without it, by
    :func:`check_binding`'s rules), which one holds the directions would be a guess: refused.
    """
    found = [c for c in (
        csv_path.with_suffix(".yaml"),
        csv_path.with_name(csv_path.stem + ".criteria.yaml"),
        csv_path.with_name("criteria.yaml"),
    ) if c.exists()]
    if len(found) > 1:
        claiming = [c for c in found if _describes(c, csv_path)]
        if len(claiming) > 1:
            raise UserError(
                f"{claiming[0].name} and {claiming[1].name} both describe {csv_path}: keep one, or bind "
                f"{claiming[-1].name} to its own table with a `table:` line"
            )
    return found[0] if found else None


def _describes(sidecar: Path, csv_path: Path) -> bool:
    """Whether the readable sidecar ``sidecar`` describes ``csv_path`` (:func:`check_binding` accepts it)."""
    try:
        check_binding(read_sidecar(sidecar), sidecar, csv_path)
    except UserError:
        return False
    return True


def read_sidecar(path: str | Path) -> Any:
    """The validated sidecar (a :class:`ranking.schemas.Sidecar`); one-line errors naming the file and key."""
    from ranking.schemas import SIDECAR, validate

    path = Path(path)
    return validate(SIDECAR, read_yaml(path, "criteria sidecar"), path)


def sha256_of(data: bytes) -> str:
    """The hex sha256 of ``data`` (what a sidecar's ``sha256:`` records of its table's bytes)."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


#: The CSV a generic ``criteria.yaml`` without ``table:`` describes when its folder holds other CSVs too
#: (the folder ``vnr collect`` writes: matrix.csv beside seeds.csv and seed_stats.csv).
COLLECTED_MATRIX = "matrix.csv"


def check_binding(spec: Any, sidecar: Path, csv_path: Path) -> None:
    """A :class:`UserError` unless the sidecar ``spec`` (read from ``sidecar``) describes ``csv_path``.

    * ``table:`` names the CSV by file name: another name is refused;
    * ``sha256:`` (written by ``vnr collect``) must be the CSV's bytes' digest: else the two are out of step;
    * an older sidecar without ``table:`` is bound by its name (``<stem>.yaml``), or, as ``criteria.yaml``,
      to the only CSV of its folder, or to ``matrix.csv`` (a collected folder); beside several other CSVs it
      is refused, with the line to add.
    """
    if spec.table is not None and spec.table != csv_path.name:
        raise UserError(
            f"{sidecar}: table: it describes {spec.table}, not {csv_path.name} — rank {csv_path.with_name(spec.table)}, "
            f"or give {csv_path.name} its own sidecar ({csv_path.stem}.yaml, `vnr criteria init {csv_path}`)"
        )
    if spec.table is None and sidecar.name == "criteria.yaml" and csv_path.name != COLLECTED_MATRIX:
        others = sorted(p.name for p in csv_path.parent.glob("*.csv") if p.name != csv_path.name)
        if others:
            raise UserError(
                f"{sidecar}: names no table and its folder holds other CSVs ({', '.join(others[:3])}"
                f"{', …' if len(others) > 3 else ''}) — add the line `table: {csv_path.name}` if it describes "
                f"{csv_path.name}, or give {csv_path.name} its own sidecar ({csv_path.stem}.yaml)"
            )
    if spec.sha256 is not None:
        try:
            digest = sha256_of(csv_path.read_bytes())
        except OSError as exc:
            raise UserError(f"cannot read {csv_path}: {exc.strerror or exc}") from None
        if digest != spec.sha256:
            raise UserError(
                f"{csv_path.name} changed since {sidecar.name} was written — re-run vnr collect, or remove the "
                f"sha256 line of {sidecar} if you edited {csv_path.name} on purpose"
            )


def _describes_every_column(spec: Any, sidecar: Path, csv_path: Path, columns: Sequence[str],
                            stated: set[str]) -> None:
    """A :class:`UserError` for a column the sidecar leaves undescribed (and no ``--higher/--lower`` states),
    or one it describes that the CSV lacks."""
    extra = [c for c in spec.criteria if c not in columns]
    if extra and extra[0] in _csv_header(csv_path):  # described, but it holds the model names
        raise UserError(f"{sidecar}: criteria.{extra[0]}: {extra[0]!r} is the model column of {csv_path.name}, not a "
                        "criterion — remove the entry (or name another model_column)")
    if extra:
        raise UserError(
            f"{sidecar}: criteria.{extra[0]}: {csv_path.name} has no column {extra[0]!r} — remove the entry or fix "
            f"its name (columns: {', '.join(columns)})"
        )
    missing = [c for c in columns if c not in spec.criteria and c not in stated]
    if missing:
        shown = ", ".join(repr(c) for c in missing[:5]) + (f", … ({len(missing)} in all)" if len(missing) > 5 else "")
        cols = ",".join(missing[:5])
        raise UserError(
            f"{sidecar}: criteria: column(s) {shown} of {csv_path.name} are not described (a partial or truncated "
            f"sidecar?) — add them under criteria: (`vnr criteria init {csv_path} --print` shows every line), or "
            f"state their direction with --higher {cols} or --lower {cols}"
        )
