"""The declared schemas of the ranking side's input files: criteria sidecar, leaderboard spec, scenario.

Each input kind is one pydantic model, validated once where the file (or the Python mapping) enters
(:func:`validate`), so the types, the allowed keys and the allowed values live in one place, and
``vnr schema criteria|leaderboard|scenario`` prints the same model as JSON Schema (:func:`json_schema`)
for an editor to check files as they are typed. A file that does not fit gives ONE line::

    criteria.yaml: criteria.acc.weight: weight -1 is negative — write a number >= 0 (0 = shown but not ranked)

(``file: key.path: what is wrong — what to write instead``, in the words of the floor's one translator,
:mod:`ranking.floor.schema`, so a bad value reads the same in a grid config or a calibration file), raised as
:class:`~ranking.floor.errors.UserError` (exit 2 on the command line). What needs the table or the rules to
judge (a column the CSV lacks, a pattern matching nothing, an unknown group) is checked by the reader
that has them, in the same one-line form.

pydantic is imported with this module, and this module only where a file is read: ``import ranking``
and ``vnr --help`` stay light.

>>> validate(SIDECAR, {"criteria": {"acc": {"direction": "up"}}}, "criteria.yaml")
Traceback (most recent call last):
...
ranking.floor.errors.UserError: criteria.yaml: criteria.acc.direction: 'up' is not one of higher, lower, target
>>> validate(SIDECAR, {"criteria": {"kwh": {"direction": "lower", "weight": "1/2"}}}, "c.yaml").criteria["kwh"].weight
0.5
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from ranking.choices import (  # a ranking choice's declared type
    GroupWeightsChoice,
    PresetChoice,
    SettingChoice,
    TiesChoice,
    VoteChoice,
)
from ranking.choices import OgGammaChoice as GammaChoice
from ranking.floor import schema as floor_schema
from ranking.floor.errors import UserError
from ranking.floor.schema import Flag, Number, show


def choice_help(choice: Any) -> str | None:
    """A declared choice's help (:mod:`ranking.choices`), the description of its scenario key."""
    return floor_schema.description(choice)

# The allowed values, spelled here so that printing a schema imports no numpy; tests/test_schema_ranking.py
# checks they equal ranking.table.DIRECTIONS and ranking.boards.BOARDS. A ranking's choices (setting, ties,
# preset, og_gamma, vote) are typed by their one declaration, ranking.plan.RankPlan (its light module).
DIRECTIONS = ("higher", "lower", "target")
BOARD_NAMES = ("helm", "open-llm-leaderboard", "mteb", "lm-eval")  # = ranking.boards.BOARDS


# ---------------------------------------------------------------------- value types
def parse_weight(value: Any) -> float:
    """A finite weight >= 0 from a number or a fraction written as text (``"1/2"``, ``"0.4"``).

    >>> parse_weight("1/2"), parse_weight(3)
    (0.5, 3.0)
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"weight {value!r} is not a number — write e.g. 0.5 or 1/2")
    if isinstance(value, (int, float)):
        try:
            w = float(value)
        except OverflowError:
            raise ValueError(f"weight {show(value)} is too large — write a finite number >= 0") from None
    elif isinstance(value, str):
        try:
            fraction = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"weight {show(value)} does not parse — write e.g. 0.5 or 1/2") from None
        try:
            w = float(fraction)
        except OverflowError:
            raise ValueError(f"weight {show(value)} is too large — write a finite number >= 0") from None
    else:
        raise ValueError(f"weight {show(value)} is not a number — write e.g. 0.5 or 1/2")
    if not math.isfinite(w):
        raise ValueError(f"weight {value!r} is not finite — write a finite number >= 0")
    if w < 0:
        raise ValueError(f"weight {w:g} is negative — write a number >= 0 (0 = shown but not ranked)")
    return w


def _text(value: Any) -> Any:
    """A name: text that is not blank (numbers are refused by the field's type: quote them)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("the text is blank — write a name")
    return value


def _one_or_list(value: Any) -> Any:
    """``"a*"`` → ``["a*"]``: a single pattern may be written without the list."""
    return [value] if isinstance(value, str) else value


def _file_name(value: Any) -> Any:
    if isinstance(value, str) and (not value.strip() or "/" in value or "\\" in value or value in (".", "..")):
        raise ValueError(f"{value!r} is not a file name — write the name of a file in the same folder, e.g. matrix.csv")
    return value


def _sha256(value: Any) -> Any:
    if isinstance(value, str):
        digest = value.removeprefix("sha256:")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("not a sha256 digest — write 64 lowercase hex digits, or remove the line")
        return digest
    return value


Weight = Annotated[
    float,
    BeforeValidator(parse_weight),
    WithJsonSchema({"anyOf": [{"type": "number", "minimum": 0},
                              {"type": "string", "pattern": r"^\s*[0-9.]+\s*(/\s*[0-9.]+\s*)?$"}],
                    "description": "a finite number >= 0, or a fraction such as 1/2"}),
]
Name = Annotated[str, BeforeValidator(_text)]


FiniteNumber = Annotated[float, Number()]  # finite: no nan, no inf (the floor's marker)
SettingValue = str | int | float | bool


def _group_name(value: Any) -> Any:
    """A group name: a whole number is its decimal text (YAML reads ``group: 1`` as a number; it names the group
    ``"1"``, as a key ``1:`` does); a boolean, null or fractional number must be quoted."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _text(value)


GroupName = Annotated[str, BeforeValidator(_group_name)]
FileName = Annotated[str, BeforeValidator(_file_name)]
Direction = Literal[DIRECTIONS]  # type: ignore[valid-type]


class _Strict(BaseModel):
    """Unknown keys are refused (a typo never passes as a silently ignored key)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _string_keys(value: Any) -> Any:
    """A mapping whose keys are names: a whole-number key is its decimal text (``1:`` names ``"1"``, as in a CSV
    header); a key YAML read as a boolean, null or fractional number must be quoted."""
    if isinstance(value, dict):
        value = {str(k) if isinstance(k, int) and not isinstance(k, bool) else k: v for k, v in value.items()}
        for key in value:
            if not isinstance(key, str):
                kind = {bool: "a boolean", int: "a number", float: "a number", type(None): "null"}.get(
                    type(key), f"a {type(key).__name__}")
                raise ValueError(f"key {show(key)} is not text (YAML read it as {kind}) — quote it: \"{key}\":")
    return value


def _entries(value: Any) -> Any:
    """A name → attributes mapping where an entry written without attributes (``acc:``) takes the defaults."""
    value = _string_keys(value)
    if isinstance(value, dict):
        return {k: ({} if v is None else v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------- criteria sidecar
class SidecarCriterion(_Strict):
    """One column of the table: which way is better, its weight, group, unit, source and method."""

    direction: Direction = Field("higher", description="which way is better: higher, lower or target (closest to target: is best)")
    weight: Weight = Field(1.0, description="a number >= 0 (default 1; 0 = shown but not ranked)")
    group: GroupName | None = Field(None, description="a group name, e.g. performance, efficiency or fairness")
    unit: str | None = Field(None, description="the unit, as text (e.g. kWh)")
    source: str | None = Field(None, description="where the figures come from, as text")
    method: Name | None = Field(None, description="how the figures were obtained, as text (e.g. measured, estimate)")
    target: FiniteNumber | None = Field(None, description="direction target only: the best score (the closer, the "
                                        "better), e.g. 0 for a signed bias score")
    benchmark: Name | None = Field(None, description="the benchmark the column belongs to: one vote per benchmark "
                                   "by default (default: the column is its own benchmark)")
    task: Name | None = Field(None, description="the task or subtask the column measures")
    metric: Name | None = Field(None, description="the metric (acc, f1, main_score, ...)")
    settings: Annotated[dict[str, SettingValue], BeforeValidator(_string_keys)] | None = Field(
        None, description="the source's settings the column was measured under (n_shot, filter, split, version, "
        "precision, ...)")
    range: Annotated[list[FiniteNumber | None], Field(min_length=2, max_length=2)] | None = Field(
        None, description="[low, high]: the valid scores (null for an open end); a score outside is refused")
    detail: Annotated[bool, Flag()] = Field(False, description="true: kept for reference, not voting under --vote benchmark (a "
                         "subtask behind its benchmark's aggregate, a secondary metric)")
    aggregate: Annotated[bool, Flag()] = Field(False, description="true: the source's own aggregate of its benchmark's other columns "
                            "(votes for them under --vote benchmark; left out under --vote column)")

    @model_validator(mode="after")
    def _target_fits_direction(self) -> SidecarCriterion:
        if self.direction == "target" and self.target is None:
            raise ValueError("direction target needs target: <the best score>, e.g. target: 0")
        if self.direction != "target" and self.target is not None:
            raise ValueError(f"target: is given but direction is {self.direction} — write direction: target, or "
                             "remove target")
        if self.range is not None and None not in self.range and self.range[0] > self.range[1]:
            raise ValueError(f"range [{self.range[0]:g}, {self.range[1]:g}] is empty — write [low, high]")
        if self.detail and self.aggregate:
            raise ValueError("detail and aggregate are both true — an aggregate votes for its benchmark's details")
        return self


class Sidecar(_Strict):
    """``criteria.yaml``: the criteria of ONE score table (a CSV beside it), one entry per column."""

    table: FileName | None = Field(
        None, description="the file name of the CSV this sidecar describes, e.g. matrix.csv (beside the sidecar)")
    sha256: Annotated[str, BeforeValidator(_sha256)] | None = Field(
        None, description="sha256 of the CSV's bytes (written by vnr collect): the table may not change unseen")
    model_column: Name | None = Field(None, description="the CSV column holding the model names (default: model, "
                                      "else the first column)")
    groups: list[GroupName] | None = Field(None, description="the allowed group names, in order")
    standard_errors: FileName | None = Field(
        None, description="a CSV beside the sidecar holding the scores' standard errors (same model column and "
        "column names), e.g. stderr.csv")
    standard_errors_sha256: Annotated[str, BeforeValidator(_sha256)] | None = Field(
        None, description="sha256 of the standard errors CSV's bytes (written by vnr import/collect)")
    board: Literal[BOARD_NAMES] | None = Field(  # type: ignore[valid-type]
        None, description="the leaderboard the table was imported from (helm, open-llm-leaderboard, mteb, lm-eval): "
        "vnr rank --board shows its own order")
    criteria: Annotated[dict[str, SidecarCriterion], BeforeValidator(_entries)] = Field(
        default_factory=dict, description="column name → {direction, weight, group, unit, source, method}; "
        "every column of the table but the model column")

    @field_validator("groups")
    @classmethod
    def _unique_groups(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            dup = next(g for g in value if value.count(g) > 1)
            raise ValueError(f"group {dup!r} is listed twice — list each group once")
        return value

    @model_validator(mode="after")
    def _known_groups(self) -> Sidecar:
        if self.groups is not None:
            for name, c in self.criteria.items():
                if c.group is not None and c.group not in self.groups:
                    raise ValueError(f"criterion {name!r} has group {c.group!r}, which 'groups' does not list — "
                                     f"use one of: {', '.join(self.groups)}")
        return self


# ---------------------------------------------------------------------- leaderboard spec
def _scalar_text(value: Any) -> Any:
    """A row name or cell token: text, or a number YAML read from an unquoted name (``2021``) as its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


ScalarText = Annotated[str, BeforeValidator(_scalar_text)]


class LeaderboardCriterion(_Strict):
    """One column of a leaderboard CSV."""

    direction: Direction = Field("higher", description="which way is better: higher or lower")
    weight: Weight = Field(1.0, description="a number >= 0 (default 1; 0 = kept in the table, not ranked)")
    group: GroupName | None = Field(None, description="a group name")
    unit: str | None = Field(None, description="the unit, as text")
    split: Annotated[list[Name], Field(min_length=2, max_length=2)] | None = Field(
        None, description="two criterion names for an 'a/b' column, e.g. [MRPC-F1, MRPC-acc]")


class LeaderboardSpec(_Strict):
    """A public leaderboard's CSV and how to read it (``configs/leaderboards/*.yaml``)."""

    file: Name = Field(description="the leaderboard CSV, relative to the data root (or absolute)")
    description: str | None = Field(None, description="free text")
    model_column: Name | None = Field(None, description="the column holding the row names")
    names: list[ScalarText] | None = Field(None, description="row names in row order, instead of model_column")
    rename: Annotated[dict[str, ScalarText], BeforeValidator(_string_keys)] | None = Field(
        None, description="old row name → new row name")
    ignore: list[ScalarText] | None = Field(None, description="columns that are not criteria")
    missing: list[ScalarText] | None = Field(None, description="cell values meaning 'no score', e.g. ['-']")
    criteria: Annotated[dict[str, LeaderboardCriterion], BeforeValidator(_entries)] | None = Field(
        None, description="column → {direction, weight, group, unit, split} (default: every column not ignored)")

    @model_validator(mode="after")
    def _rows_named(self) -> LeaderboardSpec:
        if self.names is None and self.model_column is None:
            raise ValueError("neither model_column nor names is given — add model_column: <the column of the "
                             "row names>, or names: [...]")
        return self


# ---------------------------------------------------------------------- scenario
class TableSource(_Strict):
    """Where a scenario's scores come from: a named importer, or a results folder / CSV."""

    importer: Name | None = Field(None, description="a named importer, e.g. votenrank_case_study")
    path: Name | None = Field(None, description="a results folder (matrix.csv + criteria.yaml) or a CSV")
    dir: Name | None = Field(None, description="the importer's folder (default: under the data root)")

    @model_validator(mode="after")
    def _one_source(self) -> TableSource:
        if self.importer is None and self.path is None:
            raise ValueError("names neither importer nor path — write importer: <name> or path: <results folder>")
        return self


def _group_entry(value: Any) -> Any:
    """``performance: [a, b]`` or ``performance: a*`` → ``{criteria: [...]}``; ``performance:`` → ``{}``."""
    if value is None:
        return {}
    if isinstance(value, (list, str)):
        return {"criteria": value}
    return value


class GroupSpecModel(_Strict):
    """A criteria group of a scenario."""

    criteria: Annotated[list[Name], BeforeValidator(_one_or_list)] | None = Field(
        None, description="criterion names, glob patterns or re:<regex> (default: the table's group of this name)")
    table_group: GroupName | None = Field(None, description="the table's group to take (default: this group's name)")
    weights: Annotated[dict[str, Weight], BeforeValidator(_string_keys)] | None = Field(
        None, description="own weights by criterion name or pattern, e.g. {stsb.*: 1/2}")
    direction: Direction | None = Field(None, description="one direction for the whole group: higher or lower")
    description: str | None = Field(None, description="free text")


def _groups(value: Any) -> Any:
    if isinstance(value, list):  # [performance, efficiency]: the table's own groups
        if not all(isinstance(g, str) for g in value):
            raise ValueError("a list of groups must list group names — write e.g. [performance, efficiency]")
        if len(set(value)) != len(value):
            raise ValueError("a group is listed twice — list each group once")
        value = {g: {} for g in value}
    value = _string_keys(value)
    if isinstance(value, dict):
        if not value:
            raise ValueError("no group — name at least one group, or remove 'groups'")
        blank = [k for k in value if not k.strip()]
        if blank:
            raise ValueError(f"group name {blank[0]!r} is blank — give every group a name")
        return {k: _group_entry(v) for k, v in value.items()}
    return value


class ColumnModel(_Strict):
    """One compared column of a scenario: a rule under a setting."""

    name: Name = Field(description="the column's name (unique)")
    rule: Name = Field(description="a rule name, e.g. borda (see vnr rank --help)")
    setting: SettingChoice = Field("basic", description=choice_help(SettingChoice))  # type: ignore[valid-type]
    group_weights: GroupWeightsChoice = Field(None, description=choice_help(GroupWeightsChoice))
    group: GroupName | None = Field(None, description="rank inside this one group only (setting basic)")
    params: Annotated[dict[str, Any], BeforeValidator(_string_keys)] | None = Field(
        None, description="extra parameters of the rule")
    ties: TiesChoice = Field(None, description=choice_help(TiesChoice))  # type: ignore[valid-type]
    description: str | None = Field(None, description="free text")


class ReportModel(_Strict):
    """What the HTML report draws."""

    simplex_columns: list[Name] | None = Field(None, description="weighted / two-step columns to map over the weights")
    simplex_resolution: Annotated[int, Number(ge=1, le=400)] = Field(
        30, description="grid steps per side of the weight triangle, an integer from 1 to 400")


class ScenarioModel(_Strict):
    """A user-preference scenario (``configs/scenarios/*.yaml``)."""

    name: Name | None = Field(None, description="the scenario's name (default: the file's stem)")
    description: str | None = Field(None, description="free text")
    table: TableSource | None = Field(None, description="where the scores come from: {importer: NAME} or {path: DIR}")
    preset: PresetChoice = Field(None, description=choice_help(PresetChoice))  # type: ignore[valid-type]
    og_gamma: GammaChoice = Field(None, description=choice_help(GammaChoice))  # type: ignore[valid-type]
    ties: TiesChoice = Field(None, description=choice_help(TiesChoice))  # type: ignore[valid-type]
    groups: Annotated[dict[str, GroupSpecModel], BeforeValidator(_groups)] | None = Field(
        None, description="group name → {criteria, weights, direction}, in order")
    directions: Annotated[dict[str, Direction], BeforeValidator(_string_keys)] | None = Field(
        None, description="criterion name or pattern → higher or lower")
    reference: Name | None = Field(None, description="the column others are compared with (default: the first)")
    vote: VoteChoice | None = Field(None, description=choice_help(VoteChoice))  # type: ignore[valid-type]
    columns: Annotated[list[ColumnModel], Field(min_length=1)] = Field(
        description="the compared columns: a list of {name, rule, setting, group_weights}")
    report: ReportModel | None = Field(None, description="{simplex_columns, simplex_resolution}")


#: The declared input kinds: ``vnr schema KIND`` and the readers use these names.
SIDECAR = Sidecar
LEADERBOARD = LeaderboardSpec
SCENARIO = ScenarioModel
KINDS: dict[str, type[BaseModel]] = {"criteria": Sidecar, "leaderboard": LeaderboardSpec, "scenario": ScenarioModel}


# ---------------------------------------------------------------------- validation and its one-line errors
def validate(model: type[BaseModel], doc: Any, where: Any) -> Any:
    """``doc`` (parsed YAML or a Python mapping) as a ``model``, or ONE :class:`UserError` line naming
    ``where`` (the file), the key path, what is wrong and what to write instead: the floor's one translator
    (:func:`ranking.floor.schema.validate`), so a bad value reads the same here as in a grid config."""
    if doc is None:
        raise UserError(f"{where}: the file is empty — write the {_title(model)} (`vnr schema "
                        f"{_kind(model)}` prints its schema)")
    try:
        return floor_schema.validate(model, doc, where=where)
    except RecursionError:
        raise UserError(f"{where}: nested too deeply — write a flat {_title(model)}") from None


def _title(model: type[BaseModel]) -> str:
    return {"criteria": "criteria sidecar", "leaderboard": "leaderboard spec", "scenario": "scenario"}[_kind(model)]


def _kind(model: type[BaseModel]) -> str:
    return next(k for k, m in KINDS.items() if m is model)


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of an input kind (``criteria``, ``leaderboard``, ``scenario``)."""
    if kind not in KINDS:
        raise UserError(f"unknown schema {kind!r} — write one of: config, {', '.join(KINDS)}")
    schema = KINDS[kind].model_json_schema()
    _short_forms(kind, schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = _title(KINDS[kind])
    return schema


def _short_forms(kind: str, schema: dict[str, Any]) -> None:
    """Add to ``schema`` the short forms the readers accept before validation (``acc:`` with no attributes,
    ``groups: [a, b]``, ``performance: [t1, t2]``, ``criteria: "a*"``), so an editor does not flag them."""
    defs = schema.get("$defs", {})

    def entries_may_be_empty(prop: dict[str, Any]) -> None:
        for arm in prop.get("anyOf", [prop]):
            if arm.get("type") == "object" and "additionalProperties" in arm:
                arm["additionalProperties"] = {"anyOf": [arm["additionalProperties"], {"type": "null"}]}

    if kind in ("criteria", "leaderboard"):
        entries_may_be_empty(schema["properties"]["criteria"])
    if kind == "scenario":
        strings = {"type": "array", "items": {"type": "string"}}
        groups = schema["properties"]["groups"]
        for arm in groups["anyOf"]:
            if arm.get("type") == "object":
                arm["additionalProperties"] = {"anyOf": [arm["additionalProperties"], strings, {"type": "string"},
                                                         {"type": "null"}]}
        groups["anyOf"].insert(1, strings)
        defs["GroupSpecModel"]["properties"]["criteria"]["anyOf"].insert(1, {"type": "string"})
