"""The experiment config's schema: one declared pydantic model per section, validated once at load.

The options sections are derived from the declarations they configure, so a field added there is a key
here: ``finetune.hyperparameters`` and every ``overrides[].set`` are the fields of
:class:`~harness.specs.FinetuneSpec` (``bias.options``: :class:`~harness.specs.BiasSpec`) other than
model, task/dataset, seed and model_args; ``run_options`` are :class:`~harness.specs.FinetuneRunOptions` /
:class:`~harness.specs.BiasRunOptions`; ``slurm:`` and ``local:`` are :class:`~harness.grid.config.SlurmSettings`
(``time`` for ``time_min``) and :class:`~harness.grid.config.LocalSettings`. A key left out keeps its
default; a key given must be valid (``null`` included: ``bias.options.scoring: null`` is refused).

:func:`harness.grid.config.config_json_schema` gives the JSON Schema of :class:`ExperimentConfig`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from harness.bias.data import DATASETS
from harness.finetune.tasks import TASKS
from harness.floor.schema import Check, Name, OneLine, Text, adapter, fields_model
from harness.grid.settings import LocalSettings, SlurmSettings, slurm_name
from harness.schema import Seed
from harness.specs import (
    BiasRunOptions,
    BiasSpec,
    FinetuneRunOptions,
    FinetuneSpec,
    _bias_dataset,
    _glue_task,
)
from ranking.settings import PRESETS

PresetName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]


# Grids name tasks and datasets canonically (they become matrix column names): the registries' keys.
GLUE_TASKS = tuple(TASKS)
BIAS_DATASETS = tuple(DATASETS)
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
Task = Annotated[str, Text(), Check(_known(GLUE_TASKS, "task", "GLUE tasks", _glue_task)),
                 WithJsonSchema({"type": "string", "enum": list(GLUE_TASKS)})]
Dataset = Annotated[str, Text(), Check(_known(BIAS_DATASETS, "dataset", "known", _bias_dataset)),
                    WithJsonSchema({"type": "string", "enum": list(BIAS_DATASETS)})]


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


# ---------------------------------------------------------------------------- options, derived from the specs
_FINETUNE_NAMING = ("model", "task", "seed", "model_args")
_BIAS_NAMING = ("model", "dataset", "model_args")
Hyperparameters = fields_model(FinetuneSpec, exclude=_FINETUNE_NAMING, optional=True)
BiasOptions = fields_model(BiasSpec, exclude=_BIAS_NAMING, optional=True)
SlurmSection = fields_model(SlurmSettings, optional=True, rename=(("time_min", "time"),))
LocalSection = fields_model(LocalSettings, optional=True)


def _not_empty(changes: Any) -> Any:
    if not changes.model_fields_set:
        raise ValueError("needs a non-empty set: {option: value}")
    return changes


class FinetuneOverride(Section):
    """Options for the runs whose model, task and seed match the globs given (all runs where none is)."""

    models: Patterns | None = Field(None, description="model globs this override applies to (default: all)")
    tasks: Patterns | None = Field(None, description="task globs this override applies to (default: all)")
    seeds: Patterns | None = Field(None, description="seed globs this override applies to (default: all)")
    set: Annotated[Hyperparameters, AfterValidator(_not_empty)] = Field(
        description="hyper-parameters for the matching runs (FinetuneSpec fields)")


class BiasOverride(Section):
    """Options for the bias runs whose model and dataset match the globs given."""

    models: Patterns | None = Field(None, description="model globs this override applies to (default: all)")
    datasets: Patterns | None = Field(None, description="dataset globs this override applies to (default: all)")
    set: Annotated[BiasOptions, AfterValidator(_not_empty)] = Field(
        description="options for the matching runs (BiasSpec fields)")


class Finetune(Section):
    """Fine-tuning runs: models × tasks × seeds."""

    models: Annotated[Models, Field(min_length=1, description="models to fine-tune: ids or {name, model_args}")]
    tasks: Annotated[list[Task], BeforeValidator(_listed), AfterValidator(_distinct), Field(min_length=1)] = Field(
        description="GLUE tasks (mnli is trained once, scored on matched and mismatched)")
    seeds: Seeds = Field([0], description="seeds: a list [0, 1, 2], or {from: 0, to: 4}")
    hyperparameters: Hyperparameters | None = Field(None, description="FinetuneSpec fields for every run")
    overrides: list[FinetuneOverride] | None = Field(None, description="applied in order; globs allowed")
    run_options: FinetuneRunOptions | None = Field(
        None, description="keyword options of run_finetune that do not change results (not in the run id)")


class Bias(Section):
    """Bias-scoring runs: models × datasets."""

    models: Annotated[Models, Field(min_length=1)] | None = Field(
        None, description="models to score (default: the fine-tuning models)")
    datasets: Annotated[list[Dataset], BeforeValidator(_listed), AfterValidator(_distinct),
                        Field(min_length=1)] = Field(list(BIAS_DATASETS), description="bias benchmarks")
    options: BiasOptions | None = Field(None, description="BiasSpec fields for every run")
    overrides: list[BiasOverride] | None = Field(None, description="applied in order; globs allowed")
    run_options: BiasRunOptions | None = Field(
        None, description="keyword options of run_bias that do not change results")


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


class ExperimentConfig(Section):
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
    finetune: Finetune | None = None
    bias: Bias | None = None
    slurm: SlurmSection | None = Field(None, description="defaults for --executor slurm (the CLI overrides them)")
    local: LocalSection | None = Field(None, description="defaults for the local executor")

