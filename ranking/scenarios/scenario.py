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

Settings (each column ranks through its :class:`ranking.plan.RankPlan`, :meth:`Column.plan`, as
:func:`ranking.rank` would with the same choices): ``basic`` uses each
criterion's own weight; ``weighted`` gives a criterion own × group_weight /
(total own weight of its group) — with own weights of 1 that is
group_weight / |group| (|group| = number of criteria in the group) — so with the
default group weights of 1 each group contributes equally; ``two-step`` ranks
inside each group with the own weights, then ranks the groups' results with the
group weights. A column with ``group:`` ranks that group alone (setting basic); ``rule: board`` shows the
leaderboard's own order for a table imported from one (:mod:`ranking.boards`).

Criteria that belong to no group are left out when the scenario has groups (a warning names them).
Every mistake (unknown key, unknown group, a weight that does not parse, a
pattern matching nothing, ...) is a :class:`~ranking.floor.errors.UserError` naming
the file and the entry.

>>> sc = Scenario.from_mapping({"groups": {"g": {"criteria": ["a*"]}},
...                             "columns": [{"name": "b", "rule": "borda", "setting": "weighted"}]})
>>> sc.columns[0].group_weights, sc.reference
({'g': 1.0}, 'b')
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.floor.yaml_io import read_yaml
from ranking.table import ScoreTable

log = logging.getLogger(__name__)



# ---------------------------------------------------------------------- value parsing
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
        from ranking.textable import number

        ws = "/".join(number(w) for w in (self.group_weights or {}).values())
        return f"{self.rule} ({self.setting} {ws})"

    @property
    def uses_group_weights(self) -> bool:
        return self.setting in ("weighted", "two-step") and self.group is None

    def plan(self, ties: str = "default", vote: str | None = None) -> Any:
        """The column as a :class:`ranking.plan.RankPlan`: its rule, setting and group weights (a ``group``
        column: basic, on that group's sub-table), tie convention (its own, else ``ties``: the scenario's),
        preset and parameters — what :func:`ranking.rank` ranks with the same choices."""
        from ranking.plan import RankPlan

        if self.rule == BOARD_RULE:
            raise UserError(f"column {self.name!r} shows the leaderboard's own order: it has no ranking plan")
        params = dict(self.params)
        preset = params.pop("preset", None)
        # the optimality gap's gamma (a column's params: gamma, as the file writes it) has one keyword: og_gamma
        og_gamma = params.pop("gamma", None) if self.rule == "optimality_gap" else None
        inside = self.group is not None
        return RankPlan.build(self.rule, setting="basic" if inside else self.setting,
                              group_weights=None if inside else self.group_weights, ties=self.ties or ties,
                              preset=preset, og_gamma=og_gamma, vote=vote, **params)


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
    vote: str = "benchmark"  # one vote per benchmark (ranking.votes), or per column
    og_gamma: float | None = None  # the scenario's optimality-gap gamma (in its columns' params too)

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_mapping(cls, doc: Any, *, path: str | Path | None = None) -> Scenario:
        """The scenario of a parsed YAML mapping (or a Python dict): checked against its schema
        (:class:`ranking.schemas.ScenarioModel`), then against the rules and its own names."""
        from ranking.schemas import SCENARIO, validate
        from ranking.settings import get_preset

        where = str(path) if path else "scenario"
        spec = validate(SCENARIO, doc, where)
        name = spec.name or (Path(path).stem if path else "scenario")
        preset = get_preset(spec.preset) if spec.preset is not None else None
        ties = spec.ties or ("default" if preset is None else preset.ties)
        groups = tuple(
            GroupSpec(name=g, criteria=tuple(gs.criteria or ()), table_group=gs.table_group,
                      weights=tuple((gs.weights or {}).items()), direction=gs.direction)
            for g, gs in (spec.groups or {}).items()
        )
        group_names = [g.name for g in groups]
        columns = _columns(spec.columns, group_names, where)
        columns = tuple(_with_preset(c, preset, spec.og_gamma) for c in columns)
        names = [c.name for c in columns]
        reference = spec.reference if spec.reference is not None else names[0]
        if reference not in names:
            raise UserError(f"{where}: reference: {reference!r} is not a column — write one of: {', '.join(names)}")
        table_spec = None
        if spec.table is not None:
            table_spec = {k: v for k, v in spec.table.model_dump().items() if v is not None}
        report = spec.report
        simplex_columns = report.simplex_columns if report is not None else None
        if simplex_columns is not None:
            for c in simplex_columns:
                col = next((x for x in columns if x.name == c), None)
                if col is None:
                    raise UserError(f"{where}: report.simplex_columns: unknown column {c!r} — write one of: "
                                    f"{', '.join(names)}")
                if not col.uses_group_weights:
                    raise UserError(
                        f"{where}: report.simplex_columns: column {c!r} has setting {col.setting!r} — "
                        "name a weighted or two-step column (the weight simplex needs one)"
                    )
            simplex_columns = tuple(simplex_columns)
        return cls(
            name=name,
            columns=columns,
            reference=reference,
            groups=groups,
            directions=tuple((spec.directions or {}).items()),
            ties=ties,
            table_spec=table_spec,
            description=(spec.description or "").strip(),
            simplex_columns=simplex_columns,
            simplex_resolution=report.simplex_resolution if report is not None else 30,
            path=str(path) if path else None,
            preset=preset.name if preset is not None else None,
            vote=spec.vote or "benchmark",
            og_gamma=spec.og_gamma,
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

    def plan(self, column: str | Column) -> Any:
        """A column's :class:`ranking.plan.RankPlan` under the scenario's tie convention and vote mode."""
        col = self.column(column) if isinstance(column, str) else column
        return col.plan(self.ties, self.vote)

    def ad_hoc_column(self, rule: str, setting: str, group_weights: dict[str, float] | None) -> Column:
        """A column the file does not list (``vnr whatif --rule R --setting S``), under the scenario's preset and
        ``og_gamma`` like the columns it lists."""
        from ranking.settings import get_preset

        preset = get_preset(self.preset) if self.preset is not None else None
        return _with_preset(Column(f"{rule}_{setting}", rule, setting, group_weights), preset, self.og_gamma)

    def table_plan(self) -> Any:
        """The :class:`ranking.plan.RankPlan` that prepares the scenario's table: its preset (``votenrank``: the
        complete rows only) and vote mode."""
        from ranking.plan import RankPlan

        return RankPlan.build(preset=self.preset, vote=self.vote)

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
            outside = [n for n in names if n not in chosen]
            if outside:  # stated: a criterion the groups do not name is no part of any ranking of the scenario
                log.warning("%s: criteria in none of the scenario's groups are left out: %s (name them in a group's "
                            "criteria: to rank them)", self.name, _short_list(outside))
        else:
            chosen = {n: crits[n].group for n in names}

        new = {}
        for n, group in chosen.items():
            new[n] = replace(crits[n], group=group)
        for g in self.groups:
            members = [n for n, grp in chosen.items() if grp == g.name]
            if g.direction:
                for n in members:
                    new[n] = replace(new[n], direction=g.direction, target=None)
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
                new[n] = replace(new[n], direction=d, target=None)

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
            board=table.board,
        )
        from ranking.votes import changes_weights, describe

        # the rows and weights every column ranks, as ranking.rank prepares them (the votenrank preset: the complete
        # rows only, as the published numbers were ranked, dropna; the vote mode's weights)
        prepared = self.table_plan().prepare(out)
        out, partial = prepared.table, prepared.dropped
        if partial:
            log.warning("%s: preset %s ranks only models with every score; leaving out: %s", self.name,
                        self.preset, ", ".join(partial))
        if changes_weights(prepared.votes):
            log.warning("%s: %s", self.name, describe(prepared.votes))
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


# ---------------------------------------------------------------------- checks beyond the schema
def _with_preset(column: Column, preset: Any, og_gamma: float | None) -> Column:
    """The column with the scenario's preset and ``og_gamma`` in its params (its own params win)."""
    params = dict(column.params)
    if preset is not None:
        params.setdefault("preset", preset.name)
    if og_gamma is not None and column.rule == "optimality_gap":
        params.setdefault("gamma", og_gamma)
    return replace(column, params=params) if params != column.params else column


#: a scenario column with ``rule: board`` shows the leaderboard's own order (:mod:`ranking.boards`) beside the rules.
BOARD_RULE = "board"


def _columns(specs: Sequence[Any], group_names: Sequence[str], where: str) -> tuple[Column, ...]:
    """The schema-checked ``columns`` entries as :class:`Column` s: unique names, known rules and groups."""
    from ranking.plan import check_choices
    from ranking.rules import get_rule

    groups_text = ", ".join(group_names) or "none (define 'groups')"
    out: list[Column] = []
    for i, spec in enumerate(specs):
        what = f"{where}: columns[{i}]"
        if any(c.name == spec.name for c in out):
            raise UserError(f"{what}.name: {spec.name!r} names two columns — give each column its own name")
        try:
            if spec.rule != BOARD_RULE:
                get_rule(spec.rule)
            elif spec.setting != "basic" or spec.group is not None or spec.params:
                raise UserError(f"rule {BOARD_RULE!r} is the leaderboard's own order: it takes no setting, group "
                                "or params")
        except UserError as exc:
            raise UserError(f"{what}.rule: {exc}") from None
        if spec.group is not None:
            if spec.group not in group_names:
                raise UserError(f"{what}.group: unknown group {spec.group!r} — write one of: {groups_text}")
            if spec.setting != "basic":
                raise UserError(f"{what}.setting: a column ranking inside group {spec.group!r} takes setting basic, "
                                f"not {spec.setting!r} — remove 'setting' or 'group'")
        group_weights: dict[str, float] | None = None
        if spec.group_weights is not None:  # not under basic: the declaration's one check, named by the file's key
            check_choices({"setting": spec.setting, "group_weights": spec.group_weights}, where=where,
                          names=lambda key, i=i: f"columns[{i}].{key}")
            for g in spec.group_weights:
                if g not in group_names:
                    raise UserError(f"{what}.group_weights: unknown group {g!r} — write one of: {groups_text}")
            group_weights = {g: spec.group_weights.get(g, 1.0) for g in group_names}
            if not any(w > 0 for w in group_weights.values()):
                raise UserError(f"{what}.group_weights: every group weight is 0 — give one a positive weight")
        elif spec.setting != "basic" and group_names:
            group_weights = {g: 1.0 for g in group_names}
        # without scenario groups, weighted / two-step use the table's own groups (weights 1)
        out.append(Column(spec.name, spec.rule, spec.setting, group_weights, spec.group, dict(spec.params or {}),
                          spec.ties))
    return tuple(out)
