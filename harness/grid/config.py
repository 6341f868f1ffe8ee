"""Experiment configs: load ``configs/experiments/*.yaml`` and expand them into run specs.

A config names a grid and where its results go::

    name: smoke
    output: results/smoke            # relative to the working directory; --output overrides
    labels: {microsoft/deberta-base: deberta-base}   # optional: row names in matrix.csv
    finetune:
      models: [tiny:bert, tiny:gpt2]
      tasks: [rte, sst2]             # GLUE; mnli is trained once, scored on matched and mismatched
      seeds: [0, 1]                  # or {from: 0, to: 4}
      hyperparameters: {max_steps: 10, batch_size: 8}      # any FinetuneSpec field
      overrides:                     # optional, applied in order; globs allowed
        - {models: ["gpt2*"], tasks: [cola], set: {learning_rate: 5.0e-5}}
      run_options: {save_steps: 500} # keyword options of run_finetune that do not change results
                                     # (not part of the run id)
    bias:
      models: [tiny:bert, tiny:gpt2] # default: the fine-tuning models
      datasets: [crows_pairs, stereoset, winobias]
      options: {limit: 20}           # any BiasSpec field
      overrides: [{datasets: [stereoset], set: {limit: 10}}]
    slurm:                           # defaults for --executor slurm (the CLI overrides them)
      partition: gpu
      time: "04:00:00"               # or minutes
      gpus: 1
      cpus: 8
      mem_gb: 32
      array_parallelism: 16
      runs_per_gpu: auto             # specs one array task runs side by side on its GPU: auto (calibrated,
                                     # the default with gpus >= 1) or N
      calibrate: true                # false: no calibration bursts (auto is then 1, precision auto a rule)
      calibration_budget_s: 600      # hard cap on the calibration's bursts (default 600 on a GPU, 120 on CPU)
      setup: ["module load cuda/12.4"]          # shell lines before the task, one line each
      additional: {mail-type: END}   # more #SBATCH long options (known ones only)
    local:                           # defaults for the local executor
      runs_per_gpu: 4                # runs side by side on each GPU; auto: calibrated (the default where a
                                     # GPU is used; 1 without one unless auto is written)
      gpus: [0, 1]                   # GPU indices to use (default: what the executor finds)
      calibrate: true                # and calibration_budget_s: as in slurm:

``models:`` entries are model ids, or ``{name: ID, model_args: {...}}`` (keyword arguments
of ``from_pretrained``). The format is one declared schema (:mod:`harness.grid.schema`; its
JSON Schema: :func:`config_json_schema`, ``vnr schema config``), checked once, at load:
every key, every hyper-parameter (the fields of :class:`~harness.specs.FinetuneSpec` /
:class:`~harness.specs.BiasSpec` with their declared checks), every run option, and every
value that reaches the sbatch script against what SLURM accepts for it (no control
characters, SLURM's character set for names, known ``#SBATCH`` options only). So
``vnr run --dry-run`` refuses what would fail at run time, in one line naming the key:
``smoke.yaml: finetune.overrides[0].set.batch_size: 0 is below 1``.

Expansion order is models × tasks × seeds (fine-tuning), then models × datasets
(bias); SLURM array indices follow it.

>>> exp = parse_experiment({"name": "x", "output": "out", "finetune": {"models": ["tiny:bert"],
...     "tasks": ["rte", "sst2"], "seeds": [0, 1]}}, where="x.yaml")
>>> [(s.task, s.seed) for s in exp.specs]
[('rte', 0), ('rte', 1), ('sst2', 0), ('sst2', 1)]
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.floor.errors import UserError
from harness.floor.yaml_io import read_yaml

# the settings and SLURM checks live in harness.grid.settings; they are named here for the grid's users
from harness.grid.settings import (  # noqa: F401
    MAX_RUNS_PER_GPU,
    LocalSettings,
    SlurmSettings,
    parse_time_min,
    sbatch_option,
    slurm_value,
)
from harness.kinds import kind_of
from harness.specs import BiasSpec, FinetuneSpec

Spec = FinetuneSpec | BiasSpec


@dataclass(frozen=True)
class Experiment:
    """An expanded grid."""

    name: str
    source: str
    output: Path
    specs: tuple[Spec, ...]
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    bias_datasets: tuple[str, ...] = ()
    models: tuple[str, ...] = ()  # all models, in order of first appearance
    labels: Mapping[str, str] = field(default_factory=dict)
    preset: str = "default"  # ranking preset whose conventions the grid follows (bias scoring: its bias_scoring)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    run_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # kind -> run function kwargs
    local: LocalSettings = field(default_factory=LocalSettings)

    def options_for(self, spec: Spec) -> dict[str, Any]:
        """Keyword options for the run function of ``spec`` (they never change its result)."""
        return dict(self.run_options.get(spec.kind, {}))

    def label(self, model: str) -> str:
        """The row name of ``model`` in the results matrix."""
        return self.labels.get(model, model)

    def with_output(self, output: str | Path | None) -> Experiment:
        from harness.schema import output_path

        if output in (None, ""):
            return self
        return replace(self, output=output_path(output, "--output"))


# ---------------------------------------------------------------------------- loading
def load_experiment(path: str | Path, *, output: str | Path | None = None) -> Experiment:
    """Read and expand an experiment config (``output`` overrides the config's ``output``)."""
    path = Path(path)
    doc = read_yaml(path, "experiment config")
    return parse_experiment(doc, where=str(path), default_name=path.stem).with_output(output)


def config_json_schema() -> dict[str, Any]:
    """The experiment config's JSON Schema (draft 2020-12), with a description on every key: what
    ``vnr schema config`` prints, for an editor (``# yaml-language-server: $schema=<file>``)."""
    from harness.grid.schema import ExperimentConfig

    schema = ExperimentConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def parse_experiment(doc: Any, *, where: str = "config", default_name: str = "experiment") -> Experiment:
    """Validate a config mapping against :class:`harness.grid.schema.ExperimentConfig` and expand it
    (see the module docstring for the format)."""
    from harness.grid.schema import ExperimentConfig
    from harness.schema import validate
    from ranking.settings import get_preset

    if not isinstance(doc, Mapping):
        raise UserError(f"{where}: an experiment config must be a mapping with finetune: and/or bias: sections")
    config = validate(ExperimentConfig, doc, where=where)
    name = config.name if config.name is not None else slurm_value("name", default_name, f"{where}: name")
    output = Path(config.output or f"results/{name}")
    labels = dict(config.labels or {})
    preset = get_preset(config.preset)

    specs: list[Spec] = []
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    datasets: tuple[str, ...] = ()
    models: list[str] = []
    run_options: dict[str, dict[str, Any]] = {}

    ft = config.finetune
    ft_models: list[Any] = []
    checked: set[tuple[Any, ...]] = set()  # (model, model_args) whose local files were checked
    if ft is not None:
        fwhere = f"{where}: finetune"
        ft_models = list(ft.models)
        tasks, seeds = tuple(ft.tasks), tuple(ft.seeds)
        base = _given(ft.hyperparameters)
        overrides = [(_selection(ov), _given(ov.set)) for ov in ft.overrides or ()]
        _check_selections(overrides, {"models": [e.name for e in ft_models], "tasks": tasks,
                                      "seeds": [str(s) for s in seeds]}, f"{where}: finetune", "fine-tuning")
        for entry in ft_models:
            for task in tasks:
                for seed in seeds:
                    params = _apply(base, overrides, model=entry.name, task=task, seed=str(seed))
                    data = {**params, "model": entry.name, "task": task, "seed": seed, **_model_args(entry)}
                    spec = _spec(FinetuneSpec, data, f"{fwhere} ({entry.name}, {task}, seed {seed})")
                    _check_model_files(spec, f"{fwhere}.models", checked)
                    _check_fits_model(spec, f"{fwhere} ({entry.name}, {task}, seed {seed})", checked)
                    _check_batching(spec, _source("padding", base, overrides, fwhere, model=entry.name, task=task,
                                                  seed=str(seed)))
                    specs.append(spec)
        models.extend(e.name for e in ft_models)
        run_options["finetune"] = ft.run_options.given() if ft.run_options is not None else {}
        _check_trackers(run_options["finetune"].get("report_to"), f"{fwhere}.run_options.report_to")

    bias = config.bias
    if bias is not None:
        bwhere = f"{where}: bias"
        if bias.models is None and not models:
            raise UserError(f"{bwhere}.models is required when there is no finetune: section")
        b_models = list(bias.models) if bias.models is not None else ft_models
        datasets = tuple(bias.datasets)
        base = {"scoring": preset.bias_scoring, **_given(bias.options)}  # the preset's scoring unless given
        overrides = [(_selection(ov), _given(ov.set)) for ov in bias.overrides or ()]
        _check_selections(overrides, {"models": [e.name for e in b_models], "datasets": datasets}, bwhere, "bias")
        for entry in b_models:
            for ds in datasets:
                params = _apply(base, overrides, model=entry.name, dataset=ds)
                data = {**params, "model": entry.name, "dataset": ds, **_model_args(entry)}
                spec = _spec(BiasSpec, data, f"{bwhere} ({entry.name}, {ds})")
                _check_model_files(spec, f"{bwhere}.models", checked)
                specs.append(spec)
        models.extend(e.name for e in b_models if e.name not in models)
        run_options["bias"] = bias.run_options.given() if bias.run_options is not None else {}

    if not specs:
        raise UserError(f"{where}: the grid is empty: give a finetune: and/or a bias: section with models")
    ids = [s.run_id() for s in specs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise UserError(f"{where}: run {dup} appears twice in the grid (a model, task or seed is listed twice)")
    unknown_labels = sorted(set(labels) - set(models))
    if unknown_labels:
        raise UserError(f"{where}: labels: {unknown_labels[0]!r} is not a model of this grid")
    _check_labels(labels, models, where)
    return Experiment(
        name=name,
        source=where,
        output=output,
        specs=tuple(specs),
        tasks=tasks,
        seeds=seeds,
        bias_datasets=datasets,
        models=tuple(dict.fromkeys(models)),
        labels=labels,
        preset=preset.name,
        slurm=_settings(SlurmSettings, config.slurm, {"time": "time_min"}),
        run_options=run_options,
        local=_settings(LocalSettings, config.local, {}),
    )


def _check_labels(labels: Mapping[str, str], models: Sequence[str], where: str) -> None:
    """A label must not be another model's name (as written, or canonical: ``roberta-base`` for
    ``FacebookAI/roberta-base``): ``collect`` would put both models in one row of matrix.csv."""
    from harness.models import canonical_model

    names = {name: model for model in models for name in (canonical_model(model), model)}
    for model, label in labels.items():
        other = names.get(label, model)
        if other != model:
            named = "" if other == label else f" ({other!r})"
            raise UserError(f"{where}: labels: {model!r}: {label!r} is the name of another model of this grid"
                            f"{named}; matrix.csv would mix up their rows: give {model!r} another label")


def _given(section: Any) -> dict[str, Any]:
    """The keys a validated options section sets (a key left out keeps the spec's default)."""
    return {} if section is None else {key: getattr(section, key) for key in section.model_fields_set}


def _selection(override: Any) -> dict[str, list[str]]:
    return {key: list(getattr(override, key)) for key in ("models", "tasks", "datasets", "seeds")
            if getattr(override, key, None) is not None}


def _check_selections(overrides: Sequence[tuple[Mapping[str, Sequence[str]], Any]],
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


def _apply(base: Mapping[str, Any], overrides: Sequence[tuple[Mapping[str, Sequence[str]], Mapping[str, Any]]],
           **values: str) -> dict[str, Any]:
    """The options of one spec: ``base``, then every override whose globs match it, in order."""
    plural = {"model": "models", "task": "tasks", "dataset": "datasets", "seed": "seeds"}
    params = dict(base)
    for selection, changes in overrides:
        if all(plural[key] not in selection or any(fnmatch.fnmatchcase(value, p) for p in selection[plural[key]])
               for key, value in values.items()):
            params.update(changes)
    return params


def _source(key: str, base: Mapping[str, Any], overrides: Sequence[tuple[Mapping[str, Sequence[str]], Mapping[str, Any]]],
            where: str, **values: str) -> str:
    """The config key that gave one spec its ``key`` option: the last matching override's ``set``, else the
    section's options (``where.hyperparameters.padding``)."""
    for i in reversed(range(len(overrides))):
        if key in overrides[i][1] and _apply({}, [overrides[i]], **values):
            return f"{where}.overrides[{i}].set.{key}"
    return f"{where}.hyperparameters.{key}" if key in base else f"{where}: {key}"


def _check_model_files(spec: Spec, where: str, checked: set[tuple[Any, ...]]) -> None:
    """A local checkpoint folder without weights, with a truncated safetensors file or without tokenizer files:
    refused at load (:func:`harness.models.check_local_files`, the check each run makes before it starts)."""
    key = (spec.model, spec.model_args)
    if key in checked:
        return
    checked.add(key)
    from harness.models import check_local_files, is_local, resolve_model

    if not is_local(spec.model):
        return
    try:
        check_local_files(resolve_model(spec.model, spec.model_args))
    except UserError as exc:
        raise UserError(f"{where} ({spec.model}): {exc}") from None


def _check_fits_model(spec: FinetuneSpec, where: str, checked: set[tuple[Any, ...]]) -> None:
    """``max_length`` beyond the model's positions or a LoRA ``r`` above its hidden size: refused at load (so
    before a calibration burst or a SLURM array starts) for the models whose config is on disk (tiny, local, or
    in the Hugging Face cache: never the hub), by the check each run makes before it starts
    (:func:`harness.finetune.fit_checks.check_fits_model`)."""
    key = ("fits", spec.model, spec.model_args, spec.max_length, dict(spec.peft or ()).get("r"))
    if key in checked:
        return
    checked.add(key)
    from harness.finetune.fit_checks import check_fits_dimensions
    from harness.models import dimensions_on_disk

    try:
        check_fits_dimensions(spec, spec.model, dimensions_on_disk(spec.model, spec.model_args))
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _check_trackers(report_to: Any, where: str) -> None:
    """A tracker in ``run_options.report_to`` whose package is not installed: refused at load (and so at
    ``--dry-run``), as each run would refuse it before it starts."""
    from harness.finetune.trackers import check_trackers_installed, parse_report_to

    check_trackers_installed(parse_report_to(report_to, where=where), where=where)


def _check_batching(spec: FinetuneSpec, where: str) -> None:
    """``padding: flatten`` where the model's family cannot be flattened: refused at load, by the check
    :func:`harness.finetune.run_finetune` makes before it starts (``vnr finetune --padding flatten``), not
    by every run of the grid once it has started."""
    if spec.padding != "flatten":
        return
    from harness.finetune.batching import choose_batching
    from harness.models import resolve_model

    try:
        choose_batching(resolve_model(spec.model, spec.model_args).family, spec.padding)
    except UserError as exc:
        raise UserError(f"{where} ({spec.model}): {exc}") from None


def _model_args(entry: Any) -> dict[str, Any]:
    """A ``{name, model_args}`` entry's ``from_pretrained`` options, handed to the spec as written (the spec's
    :func:`harness.models.parse_model_args` checks them)."""
    return {} if entry.model_args is None else {"model_args": dict(entry.model_args)}


def _spec(cls: type, data: dict[str, Any], where: str) -> Spec:
    """One spec; its values were checked with the config, so a refusal here is about their combination."""
    from harness.schema import validate

    return validate(cls, data, where=where)


def _settings(cls: type, section: Any, rename: Mapping[str, str]) -> Any:
    values = {rename.get(key, key): value for key, value in _given(section).items() if value is not None}
    return cls(**values)


# ---------------------------------------------------------------------------- selection
def spec_labels(spec: Spec) -> dict[str, str]:
    """The strings ``--only`` patterns match: run id, kind, model, task/dataset, model/task."""
    target = kind_of(spec).target_of(spec)
    return {
        "run_id": spec.run_id(),
        "kind": spec.kind,
        "model": spec.model,
        "target": target,
        "pair": f"{spec.model}/{target}",
    }


def only_patterns(patterns: Sequence[str] | None) -> list[str]:
    """``--only`` values as single patterns (repeated flags and comma-separated lists alike). An empty pattern
    (``--only ''``, ``--only ,``: an unset shell variable) is refused: it would otherwise select every run.

    >>> only_patterns(["bias, rte", "tiny:bert/*"]), only_patterns(None)
    (['bias', 'rte', 'tiny:bert/*'], [])
    >>> only_patterns(["bias,"])
    Traceback (most recent call last):
    ...
    harness.floor.errors.UserError: --only 'bias,': an empty pattern is no selection (an unset shell variable?): give a run id, model, task or model/task glob, or leave --only out for every run
    """
    out = []
    for pattern in patterns or ():
        for piece in str(pattern).split(","):
            if not piece.strip():
                raise UserError(f"--only {str(pattern)!r}: an empty pattern is no selection (an unset shell "
                                "variable?): give a run id, model, task or model/task glob, or leave --only out for "
                                "every run")
            out.append(piece.strip())
    return out


def select_specs(specs: Iterable[Spec], patterns: Sequence[str] | None) -> list[Spec]:
    """Specs matching any of ``patterns`` (globs; comma-separated lists allowed).

    A pattern matches a spec when it matches its run id, its kind (``finetune``,
    ``bias``), its model, its task or bias dataset, or ``model/task``; e.g.
    ``--only 'tiny:bert/*'``, ``--only rte,sst2``, ``--only bias``, ``--only '*-s0-*'``.
    """
    specs = list(specs)
    pats = only_patterns(patterns)
    if not pats:
        return specs
    labels = [list(spec_labels(s).values()) for s in specs]
    matched = {p: [any(fnmatch.fnmatchcase(v, p) for v in values) for values in labels] for p in pats}
    chosen = [s for i, s in enumerate(specs) if any(hits[i] for hits in matched.values())]
    if not chosen:
        raise UserError(f"--only {','.join(pats)!r} matches no run of this grid (try a run id, model, task or model/task glob)")
    unmatched = [p for p, hits in matched.items() if not any(hits)]
    if unmatched:  # the runs it was meant to add would be left out without a word
        raise UserError(f"--only {unmatched[0]!r} matches no run of this grid, though the other patterns do: fix or "
                        "remove it (try a run id, model, task or model/task glob)")
    return chosen
