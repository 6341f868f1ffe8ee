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

Expansion order is models × tasks × seeds (fine-tuning), then models × datasets
(bias); SLURM array indices follow it.

>>> exp = parse_experiment({"name": "x", "output": "out", "finetune": {"models": ["tiny:bert"],
...     "tasks": ["rte", "sst2"], "seeds": [0, 1]}}, where="x.yaml")
>>> [(s.task, s.seed) for s in exp.specs]
[('rte', 0), ('rte', 1), ('sst2', 0), ('sst2', 1)]
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.bias.data import DATASETS
from harness.finetune.tasks import TASKS
from harness.specs import BiasSpec, FinetuneSpec
from ranking.errors import UserError
from ranking.yaml_io import read_yaml

Spec = FinetuneSpec | BiasSpec

# Grids name tasks and datasets canonically (they become matrix column names): the registries' keys.
GLUE_TASKS = tuple(TASKS)
BIAS_DATASETS = DATASETS
_TOP_KEYS = ("name", "description", "output", "labels", "finetune", "bias", "slurm")
_FINETUNE_KEYS = ("models", "tasks", "seeds", "hyperparameters", "overrides", "run_options")
_BIAS_KEYS = ("models", "datasets", "options", "overrides", "run_options")
_OVERRIDE_KEYS = ("models", "tasks", "datasets", "seeds", "set")


@dataclass(frozen=True)
class SlurmSettings:
    """Resources of one array task, and how the array behaves."""

    partition: str | None = None
    time_min: int = 240
    gpus: int = 1
    cpus: int = 8
    mem_gb: float = 32.0
    array_parallelism: int = 16
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    job_name: str | None = None
    max_timeouts: int = 3  # requeues after hitting the time limit (preemptions are always requeued)
    signal_delay_s: int = 120  # SIGUSR2 this long before the time limit: checkpoint and requeue
    setup: tuple[str, ...] = ()  # shell lines run before the task (module load, conda activate, ...)
    additional: Mapping[str, Any] = field(default_factory=dict)  # extra #SBATCH flags

    def updated(self, **changes: Any) -> SlurmSettings:
        """A copy with the non-None ``changes`` applied (CLI options over config values)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


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
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    run_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # kind -> run function kwargs

    def options_for(self, spec: Spec) -> dict[str, Any]:
        """Keyword options for the run function of ``spec`` (they never change its result)."""
        return dict(self.run_options.get(spec.kind, {}))

    def label(self, model: str) -> str:
        """The row name of ``model`` in the results matrix."""
        return self.labels.get(model, model)

    def with_output(self, output: str | Path | None) -> Experiment:
        return self if output in (None, "") else replace(self, output=Path(output))


# ---------------------------------------------------------------------------- loading
def load_experiment(path: str | Path, *, output: str | Path | None = None) -> Experiment:
    """Read and expand an experiment config (``output`` overrides the config's ``output``)."""
    path = Path(path)
    doc = read_yaml(path, "experiment config")
    return parse_experiment(doc, where=str(path), default_name=path.stem).with_output(output)


def parse_experiment(doc: Any, *, where: str = "config", default_name: str = "experiment") -> Experiment:
    """Validate a config mapping and expand it (see the module docstring for the format)."""
    if not isinstance(doc, Mapping):
        raise UserError(f"{where}: an experiment config must be a mapping with finetune: and/or bias: sections")
    _no_unknown(doc, _TOP_KEYS, where)
    name = str(doc.get("name") or default_name)
    output = Path(str(doc.get("output") or f"results/{name}"))
    labels = doc.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise UserError(f"{where}: labels must map a model id to its row name, e.g. {{microsoft/deberta-base: deberta-base}}")
    labels = {str(k): str(v) for k, v in labels.items()}
    if len(set(labels.values())) != len(labels):
        raise UserError(f"{where}: two models share one label in labels:")

    specs: list[Spec] = []
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    datasets: tuple[str, ...] = ()
    models: list[str] = []
    run_options: dict[str, dict[str, Any]] = {}

    ft = doc.get("finetune")
    if ft is not None:
        fwhere = f"{where}: finetune"
        if not isinstance(ft, Mapping):
            raise UserError(f"{fwhere} must be a mapping with models, tasks, seeds")
        _no_unknown(ft, _FINETUNE_KEYS, fwhere)
        ft_models = _str_list(ft.get("models"), f"{fwhere}.models", required=True)
        _check_models(ft_models, f"{fwhere}.models")
        tasks = tuple(_str_list(ft.get("tasks"), f"{fwhere}.tasks", required=True))
        for task in tasks:
            if task not in GLUE_TASKS:
                raise UserError(f"{fwhere}.tasks: unknown task {task!r} (GLUE tasks: {', '.join(GLUE_TASKS)})")
        seeds = _seeds(ft.get("seeds", [0]), f"{fwhere}.seeds")
        base = _mapping(ft.get("hyperparameters"), f"{fwhere}.hyperparameters")
        overrides = _overrides(ft.get("overrides"), f"{fwhere}.overrides", ("models", "tasks", "seeds", "set"))
        for model in ft_models:
            for task in tasks:
                for seed in seeds:
                    params = dict(base)
                    for ov in overrides:
                        if _override_applies(ov, model=model, task=task, seed=seed):
                            params.update(ov["set"])
                    data = _coerce(FinetuneSpec, {**params, "model": model, "task": task, "seed": seed}, fwhere)
                    specs.append(FinetuneSpec.from_mapping(data, where=f"{fwhere} ({model}, {task}, seed {seed})"))
        models.extend(ft_models)
        run_options["finetune"] = _mapping(ft.get("run_options"), f"{fwhere}.run_options")

    bias = doc.get("bias")
    if bias is not None:
        bwhere = f"{where}: bias"
        if not isinstance(bias, Mapping):
            raise UserError(f"{bwhere} must be a mapping with models and datasets")
        _no_unknown(bias, _BIAS_KEYS, bwhere)
        if bias.get("models") is None and not models:
            raise UserError(f"{bwhere}.models is required when there is no finetune: section")
        b_models = _str_list(bias.get("models"), f"{bwhere}.models") if bias.get("models") is not None else list(models)
        _check_models(b_models, f"{bwhere}.models")
        datasets = tuple(_str_list(bias.get("datasets", list(BIAS_DATASETS)), f"{bwhere}.datasets"))
        for ds in datasets:
            if ds not in BIAS_DATASETS:
                raise UserError(f"{bwhere}.datasets: unknown dataset {ds!r} (known: {', '.join(BIAS_DATASETS)})")
        base = _mapping(bias.get("options"), f"{bwhere}.options")
        overrides = _overrides(bias.get("overrides"), f"{bwhere}.overrides", ("models", "datasets", "set"))
        for model in b_models:
            for ds in datasets:
                params = dict(base)
                for ov in overrides:
                    if _override_applies(ov, model=model, dataset=ds):
                        params.update(ov["set"])
                data = _coerce(BiasSpec, {**params, "model": model, "dataset": ds}, bwhere)
                specs.append(BiasSpec.from_mapping(data, where=f"{bwhere} ({model}, {ds})"))
        models.extend(m for m in b_models if m not in models)
        run_options["bias"] = _mapping(bias.get("run_options"), f"{bwhere}.run_options")

    if not specs:
        raise UserError(f"{where}: the grid is empty: give a finetune: and/or a bias: section with models")
    ids = [s.run_id() for s in specs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise UserError(f"{where}: run {dup} appears twice in the grid (a model, task or seed is listed twice)")
    unknown_labels = sorted(set(labels) - set(models))
    if unknown_labels:
        raise UserError(f"{where}: labels: {unknown_labels[0]!r} is not a model of this grid")
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
        slurm=parse_slurm(doc.get("slurm"), f"{where}: slurm"),
        run_options=run_options,
    )


def parse_slurm(data: Any, where: str) -> SlurmSettings:
    """SLURM settings from the config's ``slurm:`` section (``time`` as minutes or [D-]HH:MM:SS)."""
    data = _mapping(data, where)
    allowed = {f.name for f in fields(SlurmSettings)} | {"time"}
    _no_unknown(data, tuple(sorted(allowed)), where)
    values = dict(data)
    if "time" in values:
        values["time_min"] = parse_time_min(values.pop("time"), f"{where}.time")
    for key in ("time_min", "gpus", "cpus", "array_parallelism", "max_timeouts", "signal_delay_s"):
        if key in values:
            values[key] = _int(values[key], f"{where}.{key}", minimum=0 if key == "gpus" else 1)
    if "mem_gb" in values:
        try:
            values["mem_gb"] = float(values["mem_gb"])
        except (TypeError, ValueError):
            raise UserError(f"{where}.mem_gb: {values['mem_gb']!r} is not a number of GB") from None
    if "setup" in values:
        values["setup"] = tuple(_str_list(values["setup"], f"{where}.setup"))
    if "additional" in values:
        values["additional"] = dict(_mapping(values["additional"], f"{where}.additional"))
    for key in ("partition", "account", "qos", "constraint", "job_name"):
        if values.get(key) is not None:
            values[key] = str(values[key])
    return SlurmSettings(**values)


def parse_time_min(value: Any, where: str = "time") -> int:
    """Minutes from ``90``, ``"90"``, ``"01:30:00"``, ``"1-00:00:00"`` or ``"30:00"`` (MM:SS).

    >>> parse_time_min("1-02:00:00"), parse_time_min("04:00:00"), parse_time_min(45)
    (1560, 240, 45)
    """
    if isinstance(value, bool):
        raise UserError(f"{where}: {value!r} is not a time")
    if isinstance(value, int):
        minutes = value
    else:
        text = str(value).strip()
        m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
        if not m:
            raise UserError(f"{where}: {value!r} is not a time: use minutes or [D-]HH:MM:SS")
        days, a, b, c = m.groups()
        if c is not None:  # HH:MM:SS
            minutes = int(a) * 60 + int(b) + (1 if int(c) else 0)
        elif b is not None:  # MM:SS (SLURM's reading of two fields), or D-HH:MM
            minutes = int(a) * 60 + int(b) if days else int(a) + (1 if int(b) else 0)
        else:
            minutes = int(a) * 60 if days else int(a)
        minutes += int(days or 0) * 24 * 60
    if minutes < 1:
        raise UserError(f"{where}: the time limit must be at least one minute")
    return minutes


# ---------------------------------------------------------------------------- selection
def spec_labels(spec: Spec) -> dict[str, str]:
    """The strings ``--only`` patterns match: run id, kind, model, task/dataset, model/task."""
    target = spec.task if isinstance(spec, FinetuneSpec) else spec.dataset
    return {
        "run_id": spec.run_id(),
        "kind": spec.kind,
        "model": spec.model,
        "target": target,
        "pair": f"{spec.model}/{target}",
    }


def select_specs(specs: Iterable[Spec], patterns: Sequence[str] | None) -> list[Spec]:
    """Specs matching any of ``patterns`` (globs; comma-separated lists allowed).

    A pattern matches a spec when it matches its run id, its kind (``finetune``,
    ``bias``), its model, its task or bias dataset, or ``model/task``; e.g.
    ``--only 'tiny:bert/*'``, ``--only rte,sst2``, ``--only bias``, ``--only '*-s0-*'``.
    """
    specs = list(specs)
    pats = [p.strip() for pattern in (patterns or ()) for p in str(pattern).split(",") if p.strip()]
    if not pats:
        return specs
    chosen = [s for s in specs if any(fnmatch.fnmatchcase(v, p) for v in spec_labels(s).values() for p in pats)]
    if not chosen:
        raise UserError(f"--only {','.join(pats)} matches no run of this grid (try a run id, model, task or model/task glob)")
    return chosen


# ---------------------------------------------------------------------------- helpers
def _no_unknown(data: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserError(f"{where} must be a mapping (key: value), not {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _str_list(value: Any, where: str, *, required: bool = False) -> list[str]:
    if value is None or value == []:
        if required:
            raise UserError(f"{where} is required: give a non-empty list")
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise UserError(f"{where} must be a list of names")
    out = [str(v) for v in value]
    if len(set(out)) != len(out):
        dup = next(v for v in out if out.count(v) > 1)
        raise UserError(f"{where}: {dup!r} is listed twice")
    return out


def _int(value: Any, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool):
        raise UserError(f"{where}: {value!r} is not a whole number")
    try:
        number = int(value)
        if number != float(value):
            raise ValueError
    except (TypeError, ValueError):
        raise UserError(f"{where}: {value!r} is not a whole number") from None
    if number < minimum:
        raise UserError(f"{where}: {number} is below {minimum}")
    return number


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, Mapping):
        if set(value) != {"from", "to"}:
            raise UserError(f"{where}: write seeds as a list [0, 1, 2] or as {{from: 0, to: 4}}")
        lo, hi = _int(value["from"], where), _int(value["to"], where)
        if hi < lo:
            raise UserError(f"{where}: 'to' ({hi}) is below 'from' ({lo})")
        return tuple(range(lo, hi + 1))
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: give a non-empty list of seeds, e.g. [0, 1, 2, 3, 4]")
    seeds = tuple(_int(v, where) for v in value)
    if len(set(seeds)) != len(seeds):
        raise UserError(f"{where}: a seed is listed twice")
    return seeds


def _overrides(value: Any, where: str, keys: Sequence[str]) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserError(f"{where} must be a list of {{models: [...], tasks: [...], set: {{...}}}}")
    out = []
    for i, item in enumerate(value):
        iwhere = f"{where}[{i}]"
        item = _mapping(item, iwhere)
        _no_unknown(item, keys, iwhere)
        if not isinstance(item.get("set"), Mapping) or not item["set"]:
            raise UserError(f"{iwhere}: needs a non-empty set: {{option: value}}")
        sel = {k: [str(x) for x in _str_list(item[k], f"{iwhere}.{k}")] for k in keys if k != "set" and k in item}
        out.append({**sel, "set": dict(item["set"])})
    return out


def _override_applies(ov: Mapping[str, Any], **values: Any) -> bool:
    plural = {"model": "models", "task": "tasks", "dataset": "datasets", "seed": "seeds"}
    for key, value in values.items():
        pats = ov.get(plural[key])
        if pats is not None and not any(fnmatch.fnmatchcase(str(value), p) for p in pats):
            return False
    return True


def _check_models(models: Sequence[str], where: str) -> None:
    try:
        from harness.models import resolve_model
    except ImportError:  # pragma: no cover - the model registry is part of the harness
        return
    for model in models:
        try:
            resolve_model(model)
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None


def _coerce(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """Give every value its field's number type, so equal settings hash to equal run ids.

    YAML 1.1 reads ``2e-5`` as a string and ``5`` as an int where the field is a
    float (``epochs: 5`` must give the same run id as the default ``5.0``).
    """
    types = {f.name: str(f.type) for f in fields(cls)}
    out = dict(data)
    for key, value in data.items():
        kind = types.get(key, "")
        if value is None or isinstance(value, bool):
            continue
        if "float" in kind and isinstance(value, (str, int)):
            try:
                out[key] = float(value)
            except ValueError:
                raise UserError(f"{where}: {key}: {value!r} is not a number") from None
        elif kind.startswith("int") and isinstance(value, (str, float)):
            try:
                number = float(value)
                if number != int(number):
                    raise ValueError
                out[key] = int(number)
            except ValueError:
                raise UserError(f"{where}: {key}: {value!r} is not a whole number") from None
    return out
