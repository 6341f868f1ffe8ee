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
of ``from_pretrained``). Every hyper-parameter and option is checked here, at load
(:mod:`harness.validate`), and every value that reaches the sbatch script is checked
against what SLURM accepts for it (no control characters, SLURM's character set for
names, known ``#SBATCH`` options only), so ``vnr run --dry-run`` refuses what would
fail at run time, naming the config key.

Expansion order is models × tasks × seeds (fine-tuning), then models × datasets
(bias); SLURM array indices follow it.

>>> exp = parse_experiment({"name": "x", "output": "out", "finetune": {"models": ["tiny:bert"],
...     "tasks": ["rte", "sst2"], "seeds": [0, 1]}}, where="x.yaml")
>>> [(s.task, s.seed) for s in exp.specs]
[('rte', 0), ('rte', 1), ('sst2', 0), ('sst2', 1)]
"""

from __future__ import annotations

import fnmatch
import math
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.bias.data import DATASETS
from harness.finetune.tasks import TASKS
from harness.specs import BiasSpec, FinetuneSpec
from harness.validate import (
    SEED_MAX,
    check_run_options,
    check_spec_values,
    finite,
    runs_per_gpu_value,
    single_line,
    whole,
)
from ranking.errors import UserError
from ranking.yaml_io import read_yaml

Spec = FinetuneSpec | BiasSpec

# Grids name tasks and datasets canonically (they become matrix column names): the registries' keys.
GLUE_TASKS = tuple(TASKS)
BIAS_DATASETS = DATASETS
_TOP_KEYS = ("name", "description", "output", "labels", "preset", "finetune", "bias", "slurm", "local")
_FINETUNE_KEYS = ("models", "tasks", "seeds", "hyperparameters", "overrides", "run_options")
_BIAS_KEYS = ("models", "datasets", "options", "overrides", "run_options")
_OVERRIDE_KEYS = ("models", "tasks", "datasets", "seeds", "set")
_MODEL_KEYS = ("name", "model_args")
MAX_SEEDS = 10_000  # seeds per grid (a {from, to} range beyond this is a typo, not a grid)

# What SLURM accepts, per field that reaches the sbatch script (checked at load and for every CLI flag).
_NAME = r"[A-Za-z0-9_.+][A-Za-z0-9_.+-]{0,99}"  # job names and the grid's name: no spaces, quotes or shell syntax
_SLURM_NAME = {
    "name": _NAME,
    "job_name": _NAME,
    "partition": r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*",  # one partition or a comma-separated list
    "account": r"[A-Za-z0-9_.-]+",
    "qos": r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*",
    "constraint": r"[A-Za-z0-9_.\-&|,*\[\]():!]+",  # features joined by & | , with counts [a*2&b]
}
# Option values on a #SBATCH line: one token, nothing sbatch or the shell would split or read as a comment.
_SBATCH_VALUE = r"[^\s'\"\\#`$;]+"
# sbatch's long options (``man sbatch``) that ``additional:`` / ``--sbatch-opt`` may set.
SBATCH_OPTIONS = frozenset("""
    account acctg-freq batch bb bbf begin chdir cluster-constraint clusters comment constraint container
    contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency
    distribution exclude exclusive export export-file extra-node-info get-user-env gpu-bind gpu-freq gpus
    gpus-per-node gpus-per-socket gpus-per-task gres gres-flags hint hold ignore-pbs kill-on-invalid-dep
    licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nice no-kill
    nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket
    overcommit oversubscribe partition power prefer priority profile propagate qos reboot reservation
    sockets-per-node spread-job switches thread-spec threads-per-core time time-min tmp tres-per-task
    use-min-nodes verbose wait-all-nodes wckey
""".split())
# Set by vnr itself (array size, log files, requeue on USR2): changing them would break the grid's bookkeeping.
SBATCH_RESERVED = frozenset({"array", "output", "error", "input", "open-mode", "wrap", "signal", "requeue",
                             "no-requeue", "job-name", "parsable", "wait", "test-only"})


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
    # specs one array task runs side by side on its GPU: N, "auto" (calibrated: harness.grid.calibrate),
    # None: auto where tasks get a GPU (gpus >= 1), else 1
    runs_per_gpu: int | str | None = None
    calibrate: bool = True  # False: no calibration bursts (auto is then 1; precision auto follows the rule)
    calibration_budget_s: float | None = None  # hard cap on the bursts' time (None: calibrate.BUDGET_CAP_S)

    def updated(self, **changes: Any) -> SlurmSettings:
        """A copy with the non-None ``changes`` applied (CLI options over config values)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass(frozen=True)
class LocalSettings:
    """How the local executor uses this machine's GPUs."""

    runs_per_gpu: int | str | None = None  # runs side by side on each GPU: N, "auto" (calibrated), None: auto
    # where the executor uses a GPU, else 1
    gpus: tuple[int, ...] | None = None  # GPU indices to use; None: the executor's default
    calibrate: bool = True  # False: no calibration bursts (--no-calibrate)
    calibration_budget_s: float | None = None  # hard cap on the bursts' time (None: calibrate.BUDGET_CAP_S)


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
        if output in (None, ""):
            return self
        return replace(self, output=Path(single_line(output, "--output")))


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
    name = slurm_value("name", doc.get("name") or default_name, f"{where}: name")
    output = Path(single_line(doc.get("output") or f"results/{name}", f"{where}: output"))
    labels = doc.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise UserError(f"{where}: labels must map a model id to its row name, e.g. {{microsoft/deberta-base: deberta-base}}")
    labels = {single_line(k, f"{where}: labels"): single_line(v, f"{where}: labels") for k, v in labels.items()}
    if len(set(labels.values())) != len(labels):
        raise UserError(f"{where}: two models share one label in labels:")
    preset = _preset(doc.get("preset", "default"), f"{where}: preset")

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
        ft_models = _models(ft.get("models"), f"{fwhere}.models", required=True)
        tasks = tuple(_str_list(ft.get("tasks"), f"{fwhere}.tasks", required=True))
        for task in tasks:
            if task not in GLUE_TASKS:
                raise UserError(f"{fwhere}.tasks: unknown task {task!r} (GLUE tasks: {', '.join(GLUE_TASKS)})")
        seeds = _seeds(ft.get("seeds", [0]), f"{fwhere}.seeds")
        base = _mapping(ft.get("hyperparameters"), f"{fwhere}.hyperparameters")
        overrides = _overrides(ft.get("overrides"), f"{fwhere}.overrides", ("models", "tasks", "seeds", "set"))
        for model, model_args in ft_models:
            for task in tasks:
                for seed in seeds:
                    params, origin = _apply(base, f"{fwhere}.hyperparameters", overrides, f"{fwhere}.overrides",
                                            model=model, task=task, seed=seed)
                    swhere = f"{fwhere} ({model}, {task}, seed {seed})"
                    data = {**params, "model": model, "task": task, "seed": seed,
                            **_model_args_field(FinetuneSpec, model_args, f"{fwhere}.models")}
                    specs.append(_spec(FinetuneSpec, data, swhere, origin))
        models.extend(m for m, _ in ft_models)
        run_options["finetune"] = _run_options(ft.get("run_options"), "finetune", f"{fwhere}.run_options")

    bias = doc.get("bias")
    if bias is not None:
        bwhere = f"{where}: bias"
        if not isinstance(bias, Mapping):
            raise UserError(f"{bwhere} must be a mapping with models and datasets")
        _no_unknown(bias, _BIAS_KEYS, bwhere)
        if bias.get("models") is None and not models:
            raise UserError(f"{bwhere}.models is required when there is no finetune: section")
        if bias.get("models") is not None:
            b_models = _models(bias.get("models"), f"{bwhere}.models")
        else:
            b_models = list(ft_models)
        datasets = tuple(_str_list(bias.get("datasets", list(BIAS_DATASETS)), f"{bwhere}.datasets"))
        for ds in datasets:
            if ds not in BIAS_DATASETS:
                raise UserError(f"{bwhere}.datasets: unknown dataset {ds!r} (known: {', '.join(BIAS_DATASETS)})")
        base = _mapping(bias.get("options"), f"{bwhere}.options")
        overrides = _overrides(bias.get("overrides"), f"{bwhere}.overrides", ("models", "datasets", "set"))
        preset_scoring = {"scoring": preset.bias_scoring} if "scoring" not in base else {}
        for model, model_args in b_models:
            for ds in datasets:
                params, origin = _apply(base, f"{bwhere}.options", overrides, f"{bwhere}.overrides",
                                        model=model, dataset=ds)
                params = {**preset_scoring, **params}
                origin = {"scoring": f"{where}: preset ({preset.name})", **origin}
                data = {**params, "model": model, "dataset": ds,
                        **_model_args_field(BiasSpec, model_args, f"{bwhere}.models")}
                specs.append(_spec(BiasSpec, data, f"{bwhere} ({model}, {ds})", origin))
        models.extend(m for m, _ in b_models if m not in models)
        run_options["bias"] = _run_options(bias.get("run_options"), "bias", f"{bwhere}.run_options")

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
        preset=preset.name,
        slurm=parse_slurm(doc.get("slurm"), f"{where}: slurm"),
        run_options=run_options,
        local=parse_local(doc.get("local"), f"{where}: local"),
    )


def _preset(value: Any, where: str) -> Any:
    """The ranking preset a grid follows (``default`` | ``votenrank``); its ``bias_scoring`` is the default
    ``scoring`` of the grid's bias runs (``votenrank``: ``votenrank``, the Vote'n'Rank authors' fairness computation)."""
    from ranking.settings import PRESETS, get_preset

    if not isinstance(value, str) or value not in PRESETS:
        raise UserError(f"{where}: {value!r} is not one of {', '.join(PRESETS)}")
    return get_preset(value)


def _apply(base: Mapping[str, Any], base_where: str, overrides: Sequence[Mapping[str, Any]], ov_where: str,
           **values: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The options of one spec, and for each the config key it came from (named in errors)."""
    params = dict(base)
    origin = {key: f"{base_where}.{key}" for key in base}
    for i, ov in enumerate(overrides):
        if _override_applies(ov, **values):
            params.update(ov["set"])
            origin.update({key: f"{ov_where}[{i}].set.{key}" for key in ov["set"]})
    return params, origin


def _run_options(value: Any, kind: str, where: str) -> dict[str, Any]:
    options = _mapping(value, where)
    check_run_options(options, kind, where=lambda key: f"{where}.{key}")
    return options


def _spec(cls: type, data: dict[str, Any], where: str, origin: Mapping[str, str]) -> Spec:
    """Check every option where it came from (harness.validate), then build the spec."""
    check_spec_values(data, cls.kind, where=lambda key: origin.get(key, f"{where}: {key}"))
    return cls.from_mapping(_coerce(cls, data, where), where=where)


def _model_args_field(cls: type, model_args: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    if model_args is None:
        return {}
    if "model_args" not in {f.name for f in fields(cls)}:
        raise UserError(f"{where}: model_args is not supported by this version of the harness")
    return {"model_args": dict(model_args)}


def _models(value: Any, where: str, *, required: bool = False) -> list[tuple[str, dict[str, Any] | None]]:
    """``models:`` entries: an id, or ``{name: id, model_args: {...}}``; each model once."""
    if isinstance(value, (str, Mapping)):
        value = [value]
    if value is None or value == []:
        if required:
            raise UserError(f"{where} is required: give a non-empty list")
        return []
    if not isinstance(value, list):
        raise UserError(f"{where} must be a list of model ids or {{name: ID, model_args: {{...}}}}")
    out: list[tuple[str, dict[str, Any] | None]] = []
    for i, item in enumerate(value):
        iwhere = f"{where}[{i}]"
        if isinstance(item, Mapping):
            _no_unknown(item, _MODEL_KEYS, iwhere)
            if not isinstance(item.get("name"), str) or not item["name"].strip():
                raise UserError(f"{iwhere}: give the model id as name: ID")
            args = item.get("model_args")
            if args is not None and not isinstance(args, Mapping):
                raise UserError(f"{iwhere}.model_args must be a mapping of from_pretrained keyword arguments")
            out.append((single_line(item["name"], f"{iwhere}.name"),
                        {str(k): v for k, v in args.items()} if args is not None else None))
        elif isinstance(item, (str, int, float)) and not isinstance(item, bool):
            out.append((single_line(item, iwhere), None))
        else:
            raise UserError(f"{iwhere} must be a model id or {{name: ID, model_args: {{...}}}}")
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        dup = next(v for v in names if names.count(v) > 1)
        raise UserError(f"{where}: {dup!r} is listed twice")
    _check_models(names, where)
    return out


def parse_slurm(data: Any, where: str) -> SlurmSettings:
    """SLURM settings from the config's ``slurm:`` section (``time`` as minutes or [D-]HH:MM:SS).

    Every value is checked by :func:`slurm_value`, the same check the CLI flags go through.
    """
    data = _mapping(data, where)
    allowed = {f.name for f in fields(SlurmSettings)} | {"time"}
    _no_unknown(data, tuple(sorted(allowed)), where)
    values = {("time_min" if key == "time" else key): slurm_value(key, value, f"{where}.{key}")
              for key, value in data.items() if value is not None}
    return SlurmSettings(**values)


def check_slurm_settings(settings: SlurmSettings, where: str = "slurm") -> SlurmSettings:
    """Every field of ``settings`` through :func:`slurm_value` (for settings built in Python, not from a config)."""
    changes = {}
    for f in fields(SlurmSettings):
        value = getattr(settings, f.name)
        if value is not None and (f.name not in ("setup", "additional") or value):
            changes[f.name] = slurm_value(f.name, list(value) if f.name == "setup" else value, f"{where}.{f.name}")
    return replace(settings, **changes)


def parse_local(data: Any, where: str) -> LocalSettings:
    """The config's ``local:`` section: ``runs_per_gpu`` (auto or >= 1), ``gpus`` (indices, or a count),
    ``calibrate`` and ``calibration_budget_s``."""
    data = _mapping(data, where)
    _no_unknown(data, ("gpus", "runs_per_gpu", "calibrate", "calibration_budget_s"), where)
    values: dict[str, Any] = {}
    for key in ("runs_per_gpu", "calibrate", "calibration_budget_s"):
        if data.get(key) is not None:
            values[key] = slurm_value(key, data[key], f"{where}.{key}")
    if data.get("gpus") is not None:
        values["gpus"] = gpu_list(data["gpus"], f"{where}.gpus")
    return LocalSettings(**values)


def gpu_list(value: Any, where: str) -> tuple[int, ...]:
    """GPU indices from a list ``[0, 2]``, a comma list ``"0,2"`` or a count ``2`` (GPUs 0 and 1).

    >>> gpu_list([0, 2], "gpus"), gpu_list("1,3", "gpus"), gpu_list(2, "gpus")
    ((0, 2), (1, 3), (0, 1))
    """
    if isinstance(value, str) and "," in value:
        value = [v for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        gpus = tuple(whole(v, where, minimum=0) for v in value)
        if not gpus or len(set(gpus)) != len(gpus):
            raise UserError(f"{where}: give distinct GPU indices, e.g. [0, 1]")
        return gpus
    return tuple(range(whole(value, where, minimum=1)))


def slurm_value(key: str, value: Any, where: str) -> Any:
    """One SLURM setting (a ``slurm:`` key or the grid's ``name``), checked against what SLURM accepts.

    >>> slurm_value("partition", "gpu,gpu-long", "--partition")
    'gpu,gpu-long'
    >>> slurm_value("partition", "gpu\\ntouch /tmp/x", "--partition")
    Traceback (most recent call last):
    ...
    ranking.errors.UserError: --partition: 'gpu\\ntouch /tmp/x' contains a control character ('\\n'); give it on one line
    """
    if key in ("time", "time_min"):
        return parse_time_min(value, where)
    if key in ("gpus", "max_timeouts"):
        return whole(value, where, minimum=0)
    if key in ("cpus", "array_parallelism", "signal_delay_s"):
        return whole(value, where, minimum=1)
    if key == "runs_per_gpu":
        return runs_per_gpu_value(value, where)
    if key == "calibrate":
        if not isinstance(value, bool):
            raise UserError(f"{where}: {value!r} is not true or false")
        return value
    if key == "calibration_budget_s":
        return finite(value, where, minimum=0.0)
    if key == "mem_gb":
        return finite(value, where, minimum=0.0, exclusive=True)
    if key == "setup":
        return tuple(setup_line(line, f"{where}[{i}]") for i, line in enumerate(_str_list(value, where)))
    if key == "additional":
        return dict(sbatch_option(k, raw, where) for k, raw in _mapping(value, where).items())
    if key in _SLURM_NAME:
        text = single_line(value, where)
        if not re.fullmatch(_SLURM_NAME[key], text):
            what = "a name" if key in ("name", "job_name") else f"a SLURM {key.replace('_', ' ')}"
            raise UserError(f"{where}: {text!r} is not {what} SLURM accepts (letters, digits, '_', '.', '-'"
                            f"{'; a comma-separated list' if key in ('partition', 'qos') else ''})")
        return text
    raise UserError(f"{where}: unknown SLURM setting")  # pragma: no cover - callers pass known keys


def sbatch_option(key: Any, value: Any, where: str) -> tuple[str, Any]:
    """An extra ``#SBATCH --key=value`` (``additional:`` / ``--sbatch-opt``): a known long option, one token.

    ``true`` gives a bare flag (``exclusive: true`` → ``#SBATCH --exclusive``). Errors name
    ``where`` and the option (``slurm.additional.mail-type``).

    >>> sbatch_option("mail_type", "END,FAIL", "additional")
    ('mail-type', 'END,FAIL')
    """
    name = single_line(key, f"{where}: option").strip().lstrip("-").replace("_", "-")
    where = f"{where}.{name}" if where.endswith("additional") else f"{where} {name}"
    if name in SBATCH_RESERVED:
        raise UserError(f"{where}: --{name} is set by vnr itself (use the slurm: keys: partition, time, ...)")
    if name not in SBATCH_OPTIONS:
        raise UserError(f"{where}: {str(key)!r} is not an sbatch long option vnr knows (e.g. mail-type, gres, "
                        "reservation, exclusive; see man sbatch)")
    if value is True:
        return name, True
    if isinstance(value, bool) or value is None:
        raise UserError(f"{where}: give a value, or true for a flag without one")
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{where}: {value} is not a finite number")
    text = single_line(value, where)
    if not re.fullmatch(_SBATCH_VALUE, text):
        raise UserError(f"{where}: {text!r} must be one word on an #SBATCH line (no spaces, quotes, '#', '$', "
                        "'`', ';' or backslashes)")
    return name, text


def setup_line(line: Any, where: str) -> str:
    """A ``setup:`` shell line: one line, and valid shell on its own (``bash -n``) where bash is present."""
    text = single_line(line, where)
    bash = shutil.which("bash")
    if bash is not None:
        proc = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise UserError(f"{where}: {text!r} is not a complete shell command (bash -n refuses it)")
    return text


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
        text = single_line(value, where).strip()
        m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text, flags=re.ASCII)
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
    if minutes > 366 * 24 * 60:
        raise UserError(f"{where}: {minutes} minutes is more than a year; give minutes or [D-]HH:MM:SS")
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
        raise UserError(f"--only {','.join(pats)!r} matches no run of this grid (try a run id, model, task or model/task glob)")
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


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, Mapping):
        if set(value) != {"from", "to"}:
            raise UserError(f"{where}: write seeds as a list [0, 1, 2] or as {{from: 0, to: 4}}")
        lo, hi = (whole(value[k], f"{where}.{k}", minimum=0, maximum=SEED_MAX) for k in ("from", "to"))
        if hi < lo:
            raise UserError(f"{where}: 'to' ({hi}) is below 'from' ({lo})")
        if hi - lo >= MAX_SEEDS:
            raise UserError(f"{where}: {hi - lo + 1} seeds; a grid takes at most {MAX_SEEDS}")
        return tuple(range(lo, hi + 1))
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: give a non-empty list of seeds, e.g. [0, 1, 2, 3, 4]")
    seeds = tuple(whole(v, where, minimum=0, maximum=SEED_MAX) for v in value)
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
