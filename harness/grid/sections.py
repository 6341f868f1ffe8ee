"""A run kind's section of the experiment config, declared by the kind, built and expanded here.

Each :class:`~harness.kinds.RunKind` names (``grid=``) a :class:`GridSection` in its own package
(``harness/finetune/grid.py``, ``harness/bias/grid.py``): which config keys list the values of which spec
fields (its :class:`Axis` list: ``tasks`` × ``seeds``, ``datasets``), the key holding the spec's other fields
for every run (``hyperparameters``, ``options``), whether its ``models:`` default to another kind's, which
spec fields default to the ranking preset's, and the checks a run of it needs at load. From that one
declaration come the section's pydantic model (:meth:`GridSection.model`: ``models``, the axes, the options,
``overrides`` with one glob key per axis, ``run_options``) and its runs (:func:`expand`): the experiment
config (:func:`harness.grid.schema.experiment_config`) has one such section per kind of the table, in the
table's order, and :func:`harness.grid.config.parse_experiment` expands each in turn, so a new kind's
section needs no edit here or there.
"""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from ranking.floor.errors import UserError

REQUIRED: Any = ...  # an axis without a default: the key must be given


@dataclass(frozen=True)
class Axis:
    """One list key of a section: a run per value, the value given to spec field ``field``."""

    key: str  # the config key ("tasks"); its globs in ``overrides[]`` have the same key
    field: str  # the spec field each value goes to ("task")
    type: Any  # the key's pydantic type: a list (harness.grid.schema.listed)
    description: str
    default: Any = REQUIRED  # REQUIRED: the key must be given
    shown: str = "{}"  # how a run's place names the value in a refusal ("seed {}": "(tiny:bert, rte, seed 0)")


@dataclass(frozen=True)
class GridSection:
    """How a run kind is written in an experiment config: its section's keys and how they become runs.

    The section is ``models × axes[0] × axes[1] × ...``, one spec per combination in that order (the order of
    the run ids in the grid), each spec given the options (``options`` key, then the matching ``overrides``),
    the model's ``model_args`` and one value of each axis.
    """

    title: str  # the section model's name (the JSON Schema's $defs name): "Finetune"
    doc: str  # what the section holds (its JSON Schema description)
    runs: str  # how refusals name the kind's runs: "fine-tuning" ("matches no task of the fine-tuning runs")
    axes: tuple[Axis, ...]
    models: str  # the description of ``models:``
    models_from: str | None = None  # a kind whose models are the default (``models:`` may then be left out)
    options: str = "options"  # the key of the spec's other fields for every run
    options_what: str = "options"  # what the docs call them ("hyper-parameters for the matching runs")
    override_doc: str | None = None  # the override model's description (default: said from the axes)
    run_options_doc: str | None = None  # the description of ``run_options:`` (default: said from the kind)
    preset_defaults: tuple[tuple[str, str], ...] = ()  # (spec field, ranking preset attribute): its default
    check: str | None = None  # "module:attr": check(spec, where, source, checked) for each run, at load
    check_options: str | None = None  # "module:attr": check(run_options, where) for the section's run_options

    def naming(self) -> tuple[str, ...]:
        """The spec fields the section names runs by (not settable as options): model, the axes, model_args."""
        return ("model", *(axis.field for axis in self.axes), "model_args")

    def options_model(self, kind: Any) -> Any:
        """The model of ``options:`` / ``overrides[].set``: the spec's other fields, each optional."""
        from ranking.floor.schema import fields_model

        return fields_model(kind.spec, exclude=self.naming(), optional=True)

    def model(self, kind: Any) -> Any:
        """The section's pydantic model (built once per kind record)."""
        built = _BUILT.get(id(kind))
        if built is None or built[0] is not kind:
            built = _BUILT[id(kind)] = (kind, _section_model(self, kind))
        return built[1]


_BUILT: dict[int, tuple[Any, Any]] = {}  # id(kind) → (kind, its section model)


def _section_model(grid: GridSection, kind: Any) -> Any:
    from pydantic import AfterValidator, Field, create_model

    from harness.grid.schema import Models, Patterns, Section

    Options = grid.options_model(kind)
    spec_name = kind.spec.__name__
    where = ", ".join(["model", *(axis.field for axis in grid.axes[:-1])])
    where = f"{where} and {grid.axes[-1].field}" if grid.axes else "model"
    override = create_model(
        f"{grid.title}Override", __base__=Section,
        __doc__=grid.override_doc or f"Options for the {grid.runs} runs whose {where} match the globs given "
                                     "(all runs where none is).",
        models=(Patterns | None, Field(None, description="model globs this override applies to (default: all)")),
        **{axis.key: (Patterns | None, Field(None, description=f"{axis.field} globs this override applies to "
                                                                "(default: all)")) for axis in grid.axes},
        set=(Annotated[Options, AfterValidator(_not_empty)],
             Field(description=f"{grid.options_what} for the matching runs ({spec_name} fields)")),
    )
    if grid.models_from is None:
        models: Any = (Annotated[Models, Field(min_length=1, description=grid.models)], ...)
    else:
        models = (Annotated[Models, Field(min_length=1)] | None, Field(None, description=grid.models))
    run = kind.run.rpartition(":")[2]
    return create_model(
        grid.title, __base__=Section, __doc__=grid.doc,
        models=models,
        **{axis.key: (axis.type, Field(description=axis.description) if axis.default is REQUIRED
                      else Field(axis.default, description=axis.description)) for axis in grid.axes},
        **{grid.options: (Options | None, Field(None, description=f"{spec_name} fields for every run"))},
        overrides=(list[override] | None, Field(None, description="applied in order; globs allowed")),
        run_options=(kind.options | None, Field(None, description=grid.run_options_doc or
                                                 f"keyword options of {run} that do not change results")),
    )


def _not_empty(changes: Any) -> Any:
    if not changes.model_fields_set:
        raise ValueError("needs a non-empty set: {option: value}")
    return changes


# ---------------------------------------------------------------------------- expansion
@dataclass
class Expanded:
    """What :func:`expand` makes of one section."""

    specs: list[Any]
    models: list[Any]  # the section's model entries ({name, model_args}), in order
    axes: dict[str, tuple[Any, ...]]  # axis key → its values
    run_options: dict[str, Any]


def expand(kind: Any, section: Any, *, where: str, preset: Any, models_of: Mapping[str, Sequence[Any]],
           checked: set[tuple[Any, ...]]) -> Expanded:
    """The specs of one validated section (``where``: ``"<config>: <kind>"``), in the grid's order.

    ``models_of``: the model entries of the sections expanded before (a ``models_from`` default);
    ``checked``: what the load-time checks already looked at (shared by every section)."""
    from harness.kinds import load

    grid = kind.grid_section()
    if section.models is not None:
        entries = list(section.models)
    elif models_of.get(grid.models_from):
        entries = list(models_of[grid.models_from])
    else:
        raise UserError(f"{where}.models is required when there is no {grid.models_from}: section")
    axes = {axis.key: tuple(getattr(section, axis.key)) for axis in grid.axes}
    base = {name: getattr(preset, attr) for name, attr in grid.preset_defaults}  # the preset's unless given
    base.update(given(getattr(section, grid.options)))
    overrides = [(_selection(ov, grid), given(ov.set)) for ov in section.overrides or ()]
    check_selections(overrides, {"models": [e.name for e in entries],
                                 **{key: [str(v) for v in values] for key, values in axes.items()}}, where, grid.runs)
    check = load(grid.check) if grid.check else None
    specs = []
    for entry, *point in itertools.product(entries, *axes.values()):
        at = {"models": entry.name, **{axis.key: str(value) for axis, value in zip(grid.axes, point)}}
        params = apply(base, overrides, at)
        data = {**params, "model": entry.name, **{axis.field: value for axis, value in zip(grid.axes, point)},
                **model_args(entry)}
        run_where = f"{where} ({', '.join([entry.name, *(a.shown.format(v) for a, v in zip(grid.axes, point))])})"
        spec = _spec(kind.spec, data, run_where)
        check_model_files(spec, f"{where}.models", checked)
        if check is not None:
            check(spec, run_where, lambda key, at=at: source(key, base, overrides, where, grid.options, at), checked)
        specs.append(spec)
    run_options = section.run_options.given() if section.run_options is not None else {}
    if grid.check_options:
        load(grid.check_options)(run_options, where)
    return Expanded(specs, entries, axes, run_options)


def given(section: Any) -> dict[str, Any]:
    """The keys a validated options section sets (a key left out keeps the spec's default)."""
    return {} if section is None else {key: getattr(section, key) for key in section.model_fields_set}


def _selection(override: Any, grid: GridSection) -> dict[str, list[str]]:
    return {key: list(getattr(override, key)) for key in ("models", *(axis.key for axis in grid.axes))
            if getattr(override, key, None) is not None}


def check_selections(overrides: Sequence[tuple[Mapping[str, Sequence[str]], Any]],
                     values: Mapping[str, Sequence[str]], where: str, runs: str) -> None:
    """Every glob of every override matches a model, task, seed or dataset of the grid: one that matches
    nothing (a typo, ``RTE`` for ``rte``) would leave its runs at the defaults without a word."""
    for i, (selection, _) in enumerate(overrides):
        for key, patterns in selection.items():
            for pattern in patterns:
                if any(fnmatch.fnmatchcase(v, pattern) for v in values[key]):
                    continue
                case = any(fnmatch.fnmatchcase(v.lower(), pattern.lower()) for v in values[key])
                shown = ", ".join(list(values[key])[:8]) + (", ..." if len(values[key]) > 8 else "")
                raise UserError(f"{where}.overrides[{i}].{key}: {pattern!r} matches no {key[:-1]} of the {runs} runs "
                                f"({shown}){'; globs are case-sensitive' if case else ''}: fix or remove it")


def apply(base: Mapping[str, Any], overrides: Sequence[tuple[Mapping[str, Sequence[str]], Mapping[str, Any]]],
          at: Mapping[str, str]) -> dict[str, Any]:
    """The options of one spec: ``base``, then every override whose globs match it, in order. ``at``: the
    spec's value of each key the overrides select by (``{"models": "tiny:bert", "tasks": "rte", ...}``)."""
    params = dict(base)
    for selection, changes in overrides:
        if all(key not in selection or any(fnmatch.fnmatchcase(value, p) for p in selection[key])
               for key, value in at.items()):
            params.update(changes)
    return params


def source(key: str, base: Mapping[str, Any], overrides: Sequence[tuple[Mapping[str, Sequence[str]], Mapping[str, Any]]],
           where: str, options: str, at: Mapping[str, str]) -> str:
    """The config key that gave one spec its ``key`` option: the last matching override's ``set``, else the
    section's options (``where.hyperparameters.padding``)."""
    for i in reversed(range(len(overrides))):
        if key in overrides[i][1] and apply({}, [overrides[i]], at):
            return f"{where}.overrides[{i}].set.{key}"
    return f"{where}.{options}.{key}" if key in base else f"{where}: {key}"


def check_model_files(spec: Any, where: str, checked: set[tuple[Any, ...]]) -> None:
    """A local checkpoint folder without weights, with a truncated safetensors file or without tokenizer files:
    refused at load (:func:`harness.models.check_local_files`, the check each run makes before it starts)."""
    key = (spec.model, getattr(spec, "model_args", None))
    if key in checked:
        return
    checked.add(key)
    from harness.models import check_local_files, is_local, resolve_model

    if not is_local(spec.model):
        return
    try:
        check_local_files(resolve_model(*key))
    except UserError as exc:
        raise UserError(f"{where} ({spec.model}): {exc}") from None


def model_args(entry: Any) -> dict[str, Any]:
    """A ``{name, model_args}`` entry's ``from_pretrained`` options, handed to the spec as written (the spec's
    :func:`harness.models.parse_model_args` checks them)."""
    return {} if entry.model_args is None else {"model_args": dict(entry.model_args)}


def _spec(cls: type, data: dict[str, Any], where: str) -> Any:
    """One spec; its values were checked with the config, so a refusal here is about their combination."""
    from ranking.floor.schema import validate

    return validate(cls, data, where=where)

