"""``harness.finetune(model, task, seed, **hp)``: one fine-tuning run from Python (the API behind ``vnr finetune``).

Lives in the package it serves so that ``harness.finetune`` (the package, callable) needs no
import of :mod:`harness.api`; :mod:`harness.api` re-exports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ranking.errors import UserError


def finetune(
    model: Any,
    task: str | None = None,
    seed: int = 0,
    *,
    output: str | Path = "results/finetune",
    data_root: str | Path | None = None,
    model_args: Any = None,
    progress: bool = False,
    keep_checkpoints: bool = False,
    save_steps: int | None = None,
    country_iso_code: str | None = None,
    region: str | None = None,
    track_efficiency: bool = True,
    allow_nonfinite: bool = False,
    report_to: Any = None,
    **hyperparameters: Any,
) -> dict[str, Any]:
    """Fine-tune ``model`` on GLUE ``task`` with ``seed`` and return the run's record.

    ``model`` is a hub id, a local checkpoint directory, a paper alias or ``tiny:<family>`` (or a
    ready :class:`~harness.specs.FinetuneSpec`, then ``task``/``seed``/hyper-parameters are not given);
    ``hyperparameters`` are :class:`~harness.specs.FinetuneSpec` fields (``epochs``, ``batch_size``,
    ``learning_rate``, ``max_length``, ``max_steps``, ``max_train_samples``, ``precision``, ``peft``, ...);
    ``peft="lora"`` or ``peft={"method": "lora", "r": 8, "alpha": 16, "dropout": 0.1, "target_modules": [...]}``
    trains LoRA adapters and the classifier head only (:mod:`harness.finetune.adapters`).
    ``report_to`` (``"tensorboard"``, ``"wandb"``, ``"mlflow"`` or a list; default none) sends the training
    logs to trackers, offline (:mod:`harness.finetune.trackers`); it is not part of the run id.
    A finished run is returned from the store; an interrupted one resumes.

    Every argument is checked against the spec's and the run options' declarations
    (:class:`~harness.specs.FinetuneSpec`, :class:`~harness.specs.FinetuneRunOptions`) before anything
    is written: a bad one raises :class:`~ranking.errors.UserError` naming it.
    """
    from harness.finetune.train import run_finetune
    from harness.schema import output_path, validate
    from harness.specs import FinetuneRunOptions, FinetuneSpec
    from ranking.paths import resolve_data_root

    where = "harness.finetune"
    if isinstance(model, FinetuneSpec):
        if task is not None or hyperparameters or model_args is not None:
            raise UserError(f"{where}(spec): give either a FinetuneSpec or model, task, seed and options")
        spec = model
    else:
        if task is None:
            raise UserError(f"{where}: which GLUE task? e.g. harness.finetune('bert-base-uncased', 'rte', seed=0)")
        spec = validate(FinetuneSpec, {"model": model, "task": task, "seed": seed,
                                       "model_args": () if model_args is None else model_args, **hyperparameters},
                        where=where)
    options = validate(FinetuneRunOptions, {
        "keep_checkpoints": keep_checkpoints, "save_steps": save_steps, "country_iso_code": country_iso_code,
        "region": region, "track_efficiency": track_efficiency, "allow_nonfinite": allow_nonfinite,
        "report_to": report_to}, where=where)
    return run_finetune(spec, output_path(output, f"{where}: output"), data_root=resolve_data_root(data_root),
                        progress=bool(progress), **options.given())
