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

# the settings and SLURM checks live in harness.grid.settings; they are named here for the grid's users
from harness.grid.settings import (  # noqa: F401
    MAX_RUNS_PER_GPU,
    DecideSettings,
    LocalSettings,
    SlurmSettings,
    parse_time_min,
    sbatch_option,
    slurm_value,
)
from harness.kinds import kind_of, kinds
from ranking.floor.errors import UserError
from ranking.floor.yaml_io import read_yaml

Spec = Any  # a run spec, of any kind of harness.kinds.KINDS


@dataclass(frozen=True)
class Experiment:
    """An expanded grid."""

    name: str
    source: str
    output: Path
    specs: tuple[Spec, ...]
    axes: Mapping[str, Mapping[str, tuple[Any, ...]]] = field(default_factory=dict)  # kind → list key → values
    models: tuple[str, ...] = ()  # all models, in order of first appearance
    labels: Mapping[str, str] = field(default_factory=dict)
    preset: str = "default"  # ranking preset whose conventions the grid follows (bias scoring: its bias_scoring)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    run_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # kind -> run function kwargs
    local: LocalSettings = field(default_factory=LocalSettings)
    decide: DecideSettings | None = None  # the config's decide: (harness.grid.decide), None without one

    def axis(self, kind: str, key: str) -> tuple[Any, ...]:
        """The values of a section's list key (``axis("finetune", "tasks")``; none where the grid has no
        such section)."""
        return tuple(self.axes.get(kind, {}).get(key, ()))

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
    from harness.grid.schema import experiment_config

    schema = experiment_config().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def parse_experiment(doc: Any, *, where: str = "config", default_name: str = "experiment") -> Experiment:
    """Validate a config mapping against :class:`harness.grid.schema.ExperimentConfig` and expand it
    (see the module docstring for the format)."""
    from harness.grid.schema import experiment_config
    from harness.grid.sections import expand
    from ranking.floor.schema import validate
    from ranking.settings import get_preset

    if not isinstance(doc, Mapping):
        raise UserError(f"{where}: an experiment config must be a mapping with {_sections()} sections")
    config = validate(experiment_config(), doc, where=where)
    name = config.name if config.name is not None else slurm_value("name", default_name, f"{where}: name")
    output = Path(config.output or f"results/{name}")
    labels = dict(config.labels or {})
    preset = get_preset(config.preset)

    specs: list[Spec] = []
    models: list[str] = []
    entries: dict[str, list[Any]] = {}  # kind → its model entries (a later section's default models)
    axes: dict[str, dict[str, tuple[Any, ...]]] = {}
    run_options: dict[str, dict[str, Any]] = {}
    checked: set[tuple[Any, ...]] = set()  # what the load-time checks already looked at
    for kind in kinds():  # each kind's section, in the table's order (harness.grid.sections)
        section = getattr(config, kind.name, None) if kind.grid is not None else None
        if section is None:
            continue
        done = expand(kind, section, where=f"{where}: {kind.name}", preset=preset, models_of=entries,
                      checked=checked)
        specs += done.specs
        entries[kind.name] = done.models
        axes[kind.name] = done.axes
        run_options[kind.name] = done.run_options
        models.extend(e.name for e in done.models if e.name not in models)

    if not specs:
        raise UserError(f"{where}: the grid is empty: give a {_sections()} section with models")
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
        axes=axes,
        models=tuple(dict.fromkeys(models)),
        labels=labels,
        preset=preset.name,
        slurm=_settings(SlurmSettings, config.slurm, {"time": "time_min"}),
        run_options=run_options,
        local=_settings(LocalSettings, config.local, {}),
        decide=None if config.decide is None else _settings(DecideSettings, config.decide, {}),
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


def _sections() -> str:
    """The kinds' sections, as a refusal names them: ``finetune: and/or bias:``."""
    return " and/or ".join(f"{k.name}:" for k in kinds() if k.grid is not None)


def _settings(cls: type, section: Any, rename: Mapping[str, str]) -> Any:
    from harness.grid.sections import given

    values = {rename.get(key, key): value for key, value in given(section).items() if value is not None}
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
    ranking.floor.errors.UserError: --only 'bias,': an empty pattern is no selection (an unset shell variable?): give a run id, model, task or model/task glob, or leave --only out for every run
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
