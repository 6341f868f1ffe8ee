"""Scenario files: which criteria, grouped how, weighted how, ranked by which rules.

A scenario is a YAML mapping (see ``configs/scenarios/*.yaml``)::

    name: my_scenario                    # optional (default: the file's stem)
    description: free text               # optional
    table:                               # optional: where the scores come from
      importer: votenrank_case_study     #   a named importer (reads the data root), or
      # path: results/my_grid            #   a results dir (matrix.csv + criteria.yaml) or a CSV
    preset: votenrank                    # optional: default | votenrank (the paper's conventions, see
                                         #   ranking.settings; sets ties, weighted divisor, OG gamma, GM)
    og_gamma: 0.95                       # optional: optimality_gap's gamma (0-1 scale; default: the preset's)
    ties: votenrank                      # optional: default | votenrank (default: the preset's)
    groups:                              # optional: criteria groups, in order
      performance:
        criteria: ["*.eval_*"]           # names, glob patterns (fnmatch) or "re:<regex>"
        weights: {"stsb.*": 1/2}         # own weights by name/pattern (default: the table's, i.e. 1)
      efficiency:
        criteria: ["*_gpu_hours"]
        direction: lower                 # a direction for the whole group
      fairness: {}                       # no criteria: the table's own group "fairness" (sidecar)
    directions: {"kg_*": lower}          # optional: per-criterion direction overrides (name/pattern)
    reference: am_performance            # optional (default: the first column)
    columns:
      - {name: am_performance, rule: arithmetic_mean, group: performance}   # inside one group
      - {name: borda, rule: borda}                                          # setting basic
      - {name: borda_weighted, rule: borda, setting: weighted}              # group weights 1 each
      - name: borda_two_step
        rule: borda
        setting: two-step
        group_weights: {performance: 0.4, efficiency: 0.3, fairness: 0.3}
        params: {}                       # optional extra parameters of the rule
    report:                              # optional
      simplex_columns: [borda_weighted]  # default: every weighted / two-step column
      simplex_resolution: 30             # grid steps per side of the weight triangle

Settings (computed by :func:`ranking.settings.rank`): ``basic`` uses each
criterion's own weight; ``weighted`` gives a criterion own × group_weight /
(total own weight of its group) — with own weights of 1 that is
group_weight / |group| (|group| = number of criteria in the group) — so with the
default group weights of 1 each group contributes equally; ``two-step`` ranks
inside each group with the own weights, then ranks the groups' results with the
group weights. A column with ``group:`` ranks that group alone (setting basic).

Criteria that belong to no group are left out when the scenario has groups.
Every mistake (unknown key, unknown group, a weight that does not parse, a
pattern matching nothing, ...) is a :class:`~ranking.errors.UserError` naming
the file and the entry.

>>> sc = Scenario.from_mapping({"groups": {"g": {"criteria": ["a*"]}},
...                             "columns": [{"name": "b", "rule": "borda", "setting": "weighted"}]})
>>> sc.columns[0].group_weights, sc.reference
({'g': 1.0}, 'b')
"""

from __future__ import annotations

import fnmatch
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ranking.errors import UserError
from ranking.table import DIRECTIONS, ScoreTable
from ranking.yaml_io import read_yaml

log = logging.getLogger(__name__)

SETTINGS = ("basic", "weighted", "two-step")
TIES = ("default", "votenrank")
_TOP_KEYS = {
    "name", "description", "table", "ties", "preset", "og_gamma", "groups", "directions", "reference", "columns", "report",
}
_GROUP_KEYS = {"criteria", "table_group", "weights", "direction", "description"}
_COLUMN_KEYS = {"name", "rule", "setting", "group_weights", "group", "params", "ties", "description"}
_REPORT_KEYS = {"simplex_columns", "simplex_resolution"}
_TABLE_KEYS = {"importer", "path", "dir"}


# ---------------------------------------------------------------------- value parsing
def parse_weight(value: Any, what: str) -> float:
    """A non-negative finite weight from a number or a string (``"0.4"``, ``"1/2"``).

    >>> parse_weight("1/2", "w"), parse_weight(3, "w")
    (0.5, 3.0)
    """
    if isinstance(value, bool) or value is None:
        raise UserError(f"{what}: weight {value!r} is not a number (write e.g. 0.5 or 1/2)")
    if isinstance(value, (int, float)):
        w = float(value)
    elif isinstance(value, str):
        try:
            w = float(Fraction(value.strip()))
        except (ValueError, ZeroDivisionError):
            raise UserError(f"{what}: weight {value!r} does not parse (write e.g. 0.5 or 1/2)") from None
    else:
        raise UserError(f"{what}: weight {value!r} is not a number (write e.g. 0.5 or 1/2)")
    if not math.isfinite(w):
        raise UserError(f"{what}: weight {value!r} is not finite")
    if w < 0:
        raise UserError(f"{what}: weight {w:g} is negative; weights must be >= 0")
    return w


def match_criteria(pattern: str, names: Sequence[str]) -> list[str]:
    """Names matched by ``pattern``: an exact name, a glob (``*``, ``?``, ``[...]``) or ``re:<regex>``.

    >>> match_criteria("a*", ["ab", "ba", "ac"]), match_criteria("re:b.", ["ab", "ba"])
    (['ab', 'ac'], ['ba'])
    """
    if pattern.startswith("re:"):
        try:
            rx = re.compile(pattern[3:])
        except re.error as exc:
            raise UserError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
        return [n for n in names if rx.fullmatch(n)]
    if pattern in names:
        return [pattern]
    if any(ch in pattern for ch in "*?["):
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    return []


def _short_list(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "")


# ---------------------------------------------------------------------- the model
@dataclass(frozen=True)
class GroupSpec:
    """One criteria group: its criteria (names/patterns, or the table's own group), own weights, direction."""

    name: str
    criteria: tuple[str, ...] = ()
    table_group: str | None = None
    weights: tuple[tuple[str, float], ...] = ()
    direction: str | None = None


@dataclass(frozen=True)
class Column:
    """One compared column: a rule under a setting (with group weights), or a rule inside one group."""

    name: str
    rule: str
    setting: str = "basic"
    group_weights: dict[str, float] | None = None
    group: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    ties: str | None = None

    @property
    def label(self) -> str:
        """Human label: ``borda (two-step 0.4/0.3/0.3)``."""
        if self.group:
            return f"{self.rule} ({self.group} only)"
        if self.setting == "basic":
            return f"{self.rule} (basic)"
        ws = "/".join(f"{w:g}" for w in (self.group_weights or {}).values())
        return f"{self.rule} ({self.setting} {ws})"

    @property
    def uses_group_weights(self) -> bool:
        return self.setting in ("weighted", "two-step") and self.group is None


@dataclass(frozen=True)
class Scenario:
    """A parsed, validated scenario (see the module docstring for the YAML format)."""

    name: str
    columns: tuple[Column, ...]
    reference: str
    groups: tuple[GroupSpec, ...] = ()
    directions: tuple[tuple[str, str], ...] = ()
    ties: str = "default"
    table_spec: dict[str, Any] | None = None
    description: str = ""
    simplex_columns: tuple[str, ...] | None = None
    simplex_resolution: int = 30
    path: str | None = None
    preset: str | None = None  # the scenario's preset (None: default); votenrank ranks complete rows only

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_mapping(cls, doc: Any, *, path: str | Path | None = None) -> Scenario:
        where = f"scenario {path}" if path else "scenario"
        if not isinstance(doc, Mapping):
            raise UserError(f"{where} must be a mapping with 'columns' (and usually 'groups')")
        _no_unknown(doc, _TOP_KEYS, where)
        name = str(doc.get("name") or (Path(path).stem if path else "scenario"))
        preset, og_gamma = _parse_preset(doc, where)
        ties = str(doc.get("ties", "default" if preset is None else preset.ties))
        if ties not in TIES:
            raise UserError(f"{where}: ties {ties!r} is not one of {', '.join(TIES)}")
        groups = _parse_groups(doc.get("groups"), where)
        group_names = [g.name for g in groups]
        directions = _parse_directions(doc.get("directions"), f"{where}: directions")
        columns = _parse_columns(doc.get("columns"), group_names, where)
        columns = tuple(_with_preset(c, preset, og_gamma) for c in columns)
        names = [c.name for c in columns]
        reference = doc.get("reference", names[0])
        if reference not in names:
            raise UserError(f"{where}: reference {reference!r} is not a column (columns: {', '.join(names)})")
        table_spec = doc.get("table")
        if table_spec is not None:
            if not isinstance(table_spec, Mapping) or not (set(table_spec) & {"importer", "path"}):
                raise UserError(f"{where}: 'table' must be a mapping with 'importer' or 'path'")
            _no_unknown(table_spec, _TABLE_KEYS, f"{where}: table")
            table_spec = dict(table_spec)
        report = doc.get("report") or {}
        if not isinstance(report, Mapping):
            raise UserError(f"{where}: 'report' must be a mapping")
        _no_unknown(report, _REPORT_KEYS, f"{where}: report")
        simplex_columns = report.get("simplex_columns")
        if simplex_columns is not None:
            if isinstance(simplex_columns, str) or not isinstance(simplex_columns, Sequence):
                raise UserError(f"{where}: report.simplex_columns must be a list of column names")
            for c in simplex_columns:
                col = next((x for x in columns if x.name == c), None)
                if col is None:
                    raise UserError(f"{where}: report.simplex_columns names unknown column {c!r}")
                if not col.uses_group_weights:
                    raise UserError(
                        f"{where}: report.simplex_columns: column {c!r} has setting {col.setting!r}; "
                        "the weight simplex needs a weighted or two-step column"
                    )
            simplex_columns = tuple(str(c) for c in simplex_columns)
        resolution = report.get("simplex_resolution", 30)
        if isinstance(resolution, bool) or not isinstance(resolution, int) or not 1 <= resolution <= 400:
            raise UserError(f"{where}: report.simplex_resolution must be an integer from 1 to 400, got {resolution!r}")
        return cls(
            name=name,
            columns=columns,
            reference=str(reference),
            groups=groups,
            directions=directions,
            ties=ties,
            table_spec=table_spec,
            description=str(doc.get("description") or "").strip(),
            simplex_columns=simplex_columns,
            simplex_resolution=resolution,
            path=str(path) if path else None,
            preset=preset.name if preset is not None else None,
        )

    # ------------------------------------------------------------------ accessors
    @property
    def where(self) -> str:
        return f"scenario {self.path}" if self.path else f"scenario {self.name!r}"

    @property
    def group_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.groups)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise UserError(f"{self.where}: unknown column {name!r} (columns: {', '.join(c.name for c in self.columns)})")

    def default_simplex_columns(self) -> tuple[str, ...]:
        if self.simplex_columns is not None:
            return self.simplex_columns
        return tuple(c.name for c in self.columns if c.uses_group_weights)

    def scenario_group_weights(self, rule: str | None = None, setting: str | None = None) -> dict[str, float] | None:
        """The scenario's group weights for a (rule, setting): the best-matching weighted/two-step column's."""
        candidates = [c for c in self.columns if c.uses_group_weights]
        for pick in (
            lambda c: c.rule == rule and c.setting == setting,
            lambda c: c.setting == setting,
            lambda c: c.rule == rule,
            lambda c: True,
        ):
            found = [c for c in candidates if pick(c)]
            if found:
                return dict(found[0].group_weights or {})
        return None

    # ------------------------------------------------------------------ the table
    def states_direction(self, built: ScoreTable, name: str) -> bool:
        """Whether the scenario itself gives criterion ``name`` of its ``built`` table a direction.

        (a ``direction:`` of its group or a ``directions:`` pattern that matches it)
        """
        group = built.criterion(name).group
        if any(g.name == group and g.direction for g in self.groups):
            return True
        return any(match_criteria(pattern, [name]) for pattern, _ in self.directions)

    def build_table(self, table: ScoreTable) -> ScoreTable:
        """The scenario's view of ``table``: its groups' criteria with groups, own weights and directions.

        Models left without any score on the chosen criteria are dropped (with a warning).
        """
        names = list(table.names)
        crits = {c.name: c for c in table.criteria}
        chosen: dict[str, str | None] = {}  # criterion -> group
        if self.groups:
            for g in self.groups:
                found: list[str] = []
                if g.criteria:
                    for pattern in g.criteria:
                        hits = match_criteria(pattern, names)
                        if not hits:
                            raise UserError(
                                f"{self.where}: group {g.name!r}: {pattern!r} matches no criterion of the table "
                                f"(criteria: {_short_list(names)})"
                            )
                        found.extend(h for h in hits if h not in found)
                else:
                    tg = g.table_group or g.name
                    found = [n for n in names if crits[n].group == tg]
                    if not found:
                        raise UserError(
                            f"{self.where}: group {g.name!r} lists no criteria and the table has no group {tg!r} "
                            f"(table groups: {', '.join(table.group_names) or 'none'}); add 'criteria:' patterns"
                        )
                for n in found:
                    if n in chosen:
                        raise UserError(
                            f"{self.where}: criterion {n!r} is in both group {chosen[n]!r} and group {g.name!r}"
                        )
                    chosen[n] = g.name
        else:
            chosen = {n: crits[n].group for n in names}

        new = {}
        for n, group in chosen.items():
            new[n] = replace(crits[n], group=group)
        for g in self.groups:
            members = [n for n, grp in chosen.items() if grp == g.name]
            if g.direction:
                for n in members:
                    new[n] = replace(new[n], direction=g.direction)
            for pattern, w in g.weights:
                hits = match_criteria(pattern, members)
                if not hits:
                    raise UserError(
                        f"{self.where}: group {g.name!r}: weight pattern {pattern!r} matches no criterion of the group "
                        f"(its criteria: {_short_list(members)})"
                    )
                for n in hits:
                    new[n] = replace(new[n], weight=w)
        for pattern, d in self.directions:
            hits = match_criteria(pattern, list(chosen))
            if not hits:
                raise UserError(
                    f"{self.where}: directions: {pattern!r} matches no criterion of the scenario "
                    f"(criteria: {_short_list(list(chosen))})"
                )
            for n in hits:
                new[n] = replace(new[n], direction=d)

        order = [n for n in names if n in chosen]
        idx = [names.index(n) for n in order]
        values = table.values[:, idx]
        keep = ~np.isnan(values).all(axis=1)
        if not keep.all():
            dropped = [m for m, k in zip(table.models, keep) if not k]
            log.warning("%s: dropping model(s) without any score on its criteria: %s", self.name, ", ".join(dropped))
        if not keep.any():
            raise UserError(f"{self.where}: no model has a score on the scenario's criteria")
        out = ScoreTable(
            tuple(m for m, k in zip(table.models, keep) if k),
            tuple(new[n] for n in order),
            values[keep],
            source=table.source,
            standard_errors=None if table.standard_errors is None else table.standard_errors[:, idx][keep],
        )
        from ranking.settings import get_preset

        if self.preset is not None and get_preset(self.preset).drop_incomplete:
            out, partial = out.complete_rows()  # the published numbers ranked the complete rows only (dropna)
            if partial:
                log.warning("%s: preset %s ranks only models with every score; leaving out: %s", self.name,
                            self.preset, ", ".join(partial))
        if not any(c.weight > 0 for c in out.criteria):
            raise UserError(f"{self.where}: every criterion has weight 0")
        for g in self.groups:
            if not any(c.weight > 0 for c in out.criteria if c.group == g.name):
                raise UserError(f"{self.where}: every criterion of group {g.name!r} has weight 0")
        for col in self.columns:
            if col.uses_group_weights and not out.group_names:
                raise UserError(
                    f"{self.where}: column {col.name!r} uses setting {col.setting!r} but the table has no groups; "
                    "define 'groups' in the scenario"
                )
        return out

    def load_table(
        self, results: str | Path | None = None, data_root: str | Path | None = None
    ) -> tuple[ScoreTable, Path | None]:
        """The raw score table (before :meth:`build_table`) and the per-seed file if one exists.

        ``results`` (a results dir with ``matrix.csv`` + ``criteria.yaml``, or a CSV) wins over the
        scenario's ``table:``; ``importer:`` sources read the data root ``data_root`` (resolved by
        the caller: ``--data-root``, else ``$VNR_DATA_ROOT``).
        """
        if results is not None:
            return _load_results(Path(results))
        spec = self.table_spec
        if not spec:
            raise UserError(f"{self.where} names no table: pass --results DIR (a results dir with matrix.csv)")
        if "path" in spec:
            return _load_results(Path(os.path.expanduser(str(spec["path"]))))
        from ranking.scenarios.casestudy import IMPORTERS

        name = str(spec["importer"])
        if name not in IMPORTERS:
            raise UserError(f"{self.where}: unknown importer {name!r} (importers: {', '.join(IMPORTERS)})")
        options = {k: v for k, v in spec.items() if k not in ("importer",)}
        return IMPORTERS[name](data_root=data_root, **options), None


def _load_results(path: Path) -> tuple[ScoreTable, Path | None]:
    """The results table (read by the one TABLE reader, :func:`ranking.loading.read_table`) and its seeds file.

    The scenario states directions itself (``directions:``, a group's ``direction:``) on top of the sidecar's.
    """
    from ranking.loading import read_table

    if path.is_dir():
        matrix = path / "matrix.csv"
        if not matrix.exists():
            raise UserError(f"results dir {path} has no matrix.csv: run `vnr collect` first or pass a CSV")
        seeds = path / "seeds.csv"
        return read_table(str(matrix), None)[0], (seeds if seeds.exists() else None)
    if not path.exists():
        raise UserError(f"results {path}: no such file or directory")
    seeds = path.with_name("seeds.csv")
    return read_table(str(path), None)[0], (seeds if seeds.exists() and path.suffix.lower() == ".csv" else None)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML (errors name the file and the entry)."""
    path = Path(path)
    doc = read_yaml(path, "scenario")
    return Scenario.from_mapping(doc, path=path)


# ---------------------------------------------------------------------- parsing helpers
def _no_unknown(doc: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in doc if k not in allowed)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _string_list(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{what} must be a list of criterion names or patterns")
    return tuple(value)


def _direction(value: Any, what: str) -> str:
    if value not in DIRECTIONS:
        raise UserError(f"{what}: direction {value!r} is not one of {', '.join(DIRECTIONS)}")
    return str(value)


def _parse_groups(raw: Any, where: str) -> tuple[GroupSpec, ...]:
    if raw is None:
        return ()
    if isinstance(raw, Sequence) and not isinstance(raw, str):  # [performance, efficiency]: table groups
        raw = {str(g): {} for g in raw}
    if not isinstance(raw, Mapping) or not raw:
        raise UserError(f"{where}: 'groups' must map group names to their criteria")
    out = []
    for gname, spec in raw.items():
        what = f"{where}: group {gname!r}"
        if isinstance(spec, (list, str)):
            spec = {"criteria": spec}
        spec = spec or {}
        if not isinstance(spec, Mapping):
            raise UserError(f"{what} must be a mapping (criteria, weights, direction) or a list of criteria")
        _no_unknown(spec, _GROUP_KEYS, what)
        weights_raw = spec.get("weights") or {}
        if not isinstance(weights_raw, Mapping):
            raise UserError(f"{what}: 'weights' must map criterion names/patterns to weights")
        weights = tuple((str(k), parse_weight(v, f"{what}, criterion {k!r}")) for k, v in weights_raw.items())
        direction = spec.get("direction")
        out.append(
            GroupSpec(
                name=str(gname),
                criteria=_string_list(spec.get("criteria"), f"{what}: 'criteria'"),
                table_group=str(spec["table_group"]) if spec.get("table_group") else None,
                weights=weights,
                direction=_direction(direction, what) if direction is not None else None,
            )
        )
    return tuple(out)


def _parse_preset(doc: Mapping[str, Any], where: str) -> tuple[Any, float | None]:
    """The scenario's ``preset`` (a :class:`ranking.settings.Preset`, or None) and ``og_gamma`` (or None)."""
    from ranking.settings import get_preset

    preset = None
    if doc.get("preset") is not None:
        try:
            preset = get_preset(str(doc["preset"]))
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
    og_gamma = doc.get("og_gamma")
    if og_gamma is not None:
        if isinstance(og_gamma, bool) or not isinstance(og_gamma, (int, float)) or not math.isfinite(og_gamma) or og_gamma <= 0:
            raise UserError(f"{where}: og_gamma must be a finite number > 0 (0.95 = 95 on a 0-100 scale), got {og_gamma!r}")
        og_gamma = float(og_gamma)
    return preset, og_gamma


def _with_preset(column: Column, preset: Any, og_gamma: float | None) -> Column:
    """The column with the scenario's preset and ``og_gamma`` in its params (its own params win)."""
    params = dict(column.params)
    if preset is not None:
        params.setdefault("preset", preset.name)
    if og_gamma is not None and column.rule == "optimality_gap":
        params.setdefault("gamma", og_gamma)
    return replace(column, params=params) if params != column.params else column


def _parse_directions(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise UserError(f"{where} must map criterion names/patterns to 'higher' or 'lower'")
    return tuple((str(k), _direction(v, f"{where}, criterion {k!r}")) for k, v in raw.items())


def _parse_columns(raw: Any, group_names: Sequence[str], where: str) -> tuple[Column, ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise UserError(f"{where}: 'columns' must be a non-empty list of {{name, rule, setting, group_weights}}")
    from ranking.rules import get_rule

    out: list[Column] = []
    for i, spec in enumerate(raw):
        if not isinstance(spec, Mapping):
            raise UserError(f"{where}: column {i + 1} must be a mapping with 'name' and 'rule'")
        name = spec.get("name")
        what = f"{where}: column {name!r}" if name else f"{where}: column {i + 1}"
        _no_unknown(spec, _COLUMN_KEYS, what)
        if not name or not isinstance(name, str):
            raise UserError(f"{what} needs a 'name'")
        if any(c.name == name for c in out):
            raise UserError(f"{what}: the name appears twice; column names must be unique")
        rule = spec.get("rule")
        if not rule or not isinstance(rule, str):
            raise UserError(f"{what} needs a 'rule'")
        try:
            get_rule(rule)
        except UserError as exc:
            raise UserError(f"{what}: {exc}") from None
        except ImportError:  # the rules package is not importable: checked again when ranking
            pass
        setting = str(spec.get("setting", "basic"))
        if setting not in SETTINGS:
            raise UserError(f"{what}: setting {setting!r} is not one of {', '.join(SETTINGS)}")
        group = spec.get("group")
        if group is not None:
            group = str(group)
            if group not in group_names:
                raise UserError(f"{what}: unknown group {group!r} (groups: {', '.join(group_names) or 'none'})")
            if setting != "basic":
                raise UserError(f"{what}: a column ranking inside group {group!r} takes setting basic, not {setting!r}")
        gw_raw = spec.get("group_weights")
        group_weights: dict[str, float] | None = None
        if gw_raw is not None:
            if setting == "basic":
                raise UserError(f"{what}: group_weights apply to settings weighted and two-step, not basic")
            if not isinstance(gw_raw, Mapping):
                raise UserError(f"{what}: group_weights must map group names to weights")
            for g in gw_raw:
                if str(g) not in group_names:
                    raise UserError(
                        f"{what}: group_weights names unknown group {g!r} (groups: {', '.join(group_names) or 'none'})"
                    )
            parsed = {str(g): parse_weight(w, f"{what}, group {g!r}") for g, w in gw_raw.items()}
            group_weights = {g: parsed.get(g, 1.0) for g in group_names}
            if not any(w > 0 for w in group_weights.values()):
                raise UserError(f"{what}: every group weight is 0; at least one must be positive")
        elif setting != "basic" and group_names:
            group_weights = {g: 1.0 for g in group_names}
        # without scenario groups, weighted / two-step use the table's own groups (weights 1)
        params = spec.get("params") or {}
        if not isinstance(params, Mapping):
            raise UserError(f"{what}: 'params' must be a mapping of rule parameters")
        ties = spec.get("ties")
        if ties is not None and ties not in TIES:
            raise UserError(f"{what}: ties {ties!r} is not one of {', '.join(TIES)}")
        out.append(Column(str(name), rule, setting, group_weights, group, dict(params), ties))
    return tuple(out)
