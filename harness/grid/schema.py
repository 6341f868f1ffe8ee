"""The experiment config's schema: one declared pydantic model per section, validated once at load.

The options sections are derived from the declarations they configure, so a field added there is a key
here. Each run kind of :data:`harness.kinds.KINDS` has one section, declared in the kind's package
(``harness/finetune/grid.py``, ``harness/bias/grid.py``) and built by :mod:`harness.grid.sections`: its
options (``finetune.hyperparameters``, ``bias.options``) and every ``overrides[].set`` are the fields of the
kind's spec other than the ones naming a run (model, the section's lists such as task/seed or dataset,
model_args); its ``run_options`` are the kind's run options. ``slurm:`` and ``local:`` are
:class:`~harness.grid.config.SlurmSettings` (``time`` for ``time_min``) and
:class:`~harness.grid.config.LocalSettings`. A key left out keeps its default; a key given must be valid
(``null`` included: ``bias.options.scoring: null`` is refused).

The shared pieces (model lists, seeds, globs) are here; :func:`experiment_config` builds the whole
(``ExperimentConfig``) from the kind table. :func:`harness.grid.config.config_json_schema` gives its JSON Schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from harness.grid.settings import DecideSettings, LocalSettings, SlurmSettings, slurm_name
from harness.schema import Seed
from ranking.floor.schema import Check, Name, OneLine, Text, adapter, fields_model
from ranking.settings import PRESETS

PresetName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]


MAX_SEEDS = 10_000  # seeds per grid (a {from, to} range beyond this is a typo, not a grid)


class Section(BaseModel):
    """A config mapping: unknown keys refused, every key described."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------- lists
def _listed(value: Any) -> Any:
    """A single name is a list of one (``tasks: rte``)."""
    return [value] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else value


def _distinct(values: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    for value in values:
        key = getattr(value, "name", value)
        if key in seen:
            raise ValueError(f"{key!r} is listed twice")
        seen.add(key)
    return values


def _known(allowed: tuple[str, ...], what: str, kind: str, spec_check: Any) -> Any:
    """A registry key as the grid names it. A name the spec refuses is refused in the spec's words (the API's
    and the CLI's); a spelling the spec reads but the grid does not (``sst-2``: ``sst2``) is refused here."""
    def check(name: str) -> str:
        if name not in allowed:
            spec_check(name)
            raise ValueError(f"unknown {what} {name!r} ({kind}: {', '.join(allowed)})")
        return name

    return check


def _selector(patterns: list[str]) -> list[str]:
    if not patterns:
        raise ValueError("an empty list selects no run: list globs, or leave the key out to select every run")
    return patterns


# globs (fnmatch: *, ?, [...]); each must match something in the grid (harness.grid.config checks it)
Patterns = Annotated[list[OneLine], BeforeValidator(_listed), AfterValidator(_selector)]


def listed(item: Any) -> Any:
    """A list key of distinct names, at least one (``tasks:``, ``datasets:``); a single name is a list of one."""
    return Annotated[list[item], BeforeValidator(_listed), AfterValidator(_distinct), Field(min_length=1)]


def _model_entry(value: Any) -> Any:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return {"name": value}
    if not isinstance(value, dict):
        raise ValueError("must be a model id or {name: ID, model_args: {...}}")
    return value


def _known_model(name: str) -> str:
    from harness.models import resolve_model

    resolve_model(name)  # a typo'd alias or a missing local folder is named here
    return name


class ModelEntry(Section):
    """A model with options: ``{name: ID, model_args: {...}}``."""

    name: Annotated[Name, Check(_known_model)] = Field(
        description="hub id, local checkpoint directory, paper alias or tiny:<family>")
    model_args: dict[str, Any] | None = Field(
        None, description="keyword arguments of from_pretrained (revision, dtype, attn_implementation, ...)")


Models = Annotated[
    list[Annotated[ModelEntry, BeforeValidator(_model_entry, json_schema_input_type=str | ModelEntry)]],
    BeforeValidator(lambda v: [v] if isinstance(v, (str, dict)) else v), AfterValidator(_distinct),
]


def _seeds(value: Any) -> Any:
    """Seeds as a list: ``[0, 1]``, one seed, or a range ``{from: 0, to: 4}`` (both ends included)."""
    if isinstance(value, dict):
        if set(value) != {"from", "to"}:
            raise ValueError("write seeds as a list [0, 1, 2] or as {from: 0, to: 4}")
        ends = adapter(tuple[Seed, Seed]).validate_python((value["from"], value["to"]))
        if ends[1] < ends[0]:
            raise ValueError(f"'to' ({ends[1]}) is below 'from' ({ends[0]})")
        if ends[1] - ends[0] >= MAX_SEEDS:
            raise ValueError(f"{ends[1] - ends[0] + 1} seeds; a grid takes at most {MAX_SEEDS}")
        return list(range(ends[0], ends[1] + 1))
    return _listed(value)


def _distinct_seeds(seeds: list[int]) -> list[int]:
    if len(set(seeds)) != len(seeds):
        raise ValueError("a seed is listed twice")
    return seeds


Seeds = Annotated[
    list[Seed], BeforeValidator(_seeds), AfterValidator(_distinct_seeds), Field(min_length=1),
    WithJsonSchema({"anyOf": [
        {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}, "minItems": 1},
        {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
        {"type": "object", "properties": {"from": {"type": "integer", "minimum": 0},
                                          "to": {"type": "integer", "minimum": 0}},
         "required": ["from", "to"], "additionalProperties": False}],
        "description": "seeds: a list [0, 1, 2], or a range {from: 0, to: 4} (both ends included)"}),
]


# ---------------------------------------------------------------------------- options, derived from the declarations
SlurmSection = fields_model(SlurmSettings, optional=True, rename=(("time_min", "time"),))
LocalSection = fields_model(LocalSettings, optional=True)
DecideSection = fields_model(DecideSettings, optional=True)


def _label(text: str) -> str:
    """A row name in matrix.csv: not blank, no spaces at its ends (the ranking side reads names without them,
    so ``'A '`` would become ``'A'`` there)."""
    if not text.strip():
        raise ValueError("is empty: give the model's row name in matrix.csv, or leave the model out of labels:")
    if text != text.strip():
        raise ValueError(f"{text!r} has spaces at its ends: write {text.strip()!r}")
    return text


def _distinct_labels(labels: dict[str, str]) -> dict[str, str]:
    first: dict[str, str] = {}
    for model, label in labels.items():
        if label in first:
            raise ValueError(f"{first[label]!r} and {model!r} share the label {label!r}: their rows in matrix.csv "
                             "would merge; give each model its own label")
        first[label] = model
    return labels


Label = Annotated[str, Text(), Check(_label)]


class _Head(Section):
    """An experiment grid (``configs/experiments/*.yaml``): what to run, where results go, how to run it."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="vnr experiment config")

    name: Annotated[str, Text(), Check(slurm_name("name"))] | None = Field(
        None, description="the grid's name (default: the file's name); letters, digits, '_', '.', '-'")
    description: str | None = Field(None, description="free text")
    output: OneLine | None = Field(None, description="results folder (default results/<name>; --output overrides)")
    labels: Annotated[dict[OneLine, Label], AfterValidator(_distinct_labels)] | None = Field(
        None, description="row names in matrix.csv, e.g. {microsoft/deberta-base: deberta-base}: one per model, "
        "none equal to another model's name")
    preset: PresetName = Field(
        "default", description="ranking preset whose conventions the grid follows (votenrank: bias scored as "
        "the Vote'n'Rank authors did)")


_BUILT: dict[tuple[Any, ...], Any] = {}


def experiment_config() -> Any:
    """The experiment config's model: the head keys, one section per run kind of :data:`harness.kinds.KINDS`
    (its :class:`~harness.grid.sections.GridSection`, in the table's order; a kind without one has none),
    then ``slurm:`` and ``local:``. Built once per table."""
    from pydantic import create_model

    from harness.kinds import kinds

    table = tuple(k for k in kinds() if k.grid is not None)
    key = tuple((k.name, id(k)) for k in table)
    if key not in _BUILT:
        _BUILT[key] = create_model(
            "ExperimentConfig", __base__=_Head, __doc__=_Head.__doc__,
            **{k.name: (k.grid_section().model(k) | None, None) for k in table},
            slurm=(SlurmSection | None, Field(None, description="defaults for --executor slurm (the CLI overrides them)")),
            local=(LocalSection | None, Field(None, description="defaults for the local executor")),
            decide=(DecideSection | None, Field(None, description="decide first: run in waves until the scenario's "
                                                "decision is settled (vnr run --decide; the CLI overrides it)")),
        )
    return _BUILT[key]


def __getattr__(name: str) -> Any:
    if name == "ExperimentConfig":  # built from the kind table, when first asked for
        return experiment_config()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
