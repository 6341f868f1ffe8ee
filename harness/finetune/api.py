"""``harness.finetune(model, task, seed, **hp)``: one fine-tuning run from Python (the API behind ``vnr finetune``).

Lives in the package it serves so that ``harness.finetune`` (the package, callable) needs no
import of :mod:`harness.api`; :mod:`harness.api` re-exports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError


def finetune(
    model: Any,
    task: str | None = None,
    seed: int = 0,
    *,
    output: str | Path = "results/finetune",
    data_root: str | Path | None = None,
    progress: bool = False,
    **given: Any,
) -> dict[str, Any]:
    """Fine-tune ``model`` on GLUE ``task`` with ``seed`` and return the run's record.

    ``model`` is a hub id, a local checkpoint directory, a paper alias or ``tiny:<family>`` (or a
    ready :class:`~harness.specs.FinetuneSpec`, then ``task``/``seed``/hyper-parameters are not given).
    ``given`` takes every key a grid config takes: the hyper-parameters, the fields of
    :class:`~harness.specs.FinetuneSpec` (``epochs``, ``batch_size``, ``learning_rate``, ``max_length``,
    ``max_steps``, ``max_train_samples``, ``precision``, ``model_args``, ``peft``, ...), and the run options,
    the fields of :class:`~harness.specs.FinetuneRunOptions` (``keep_checkpoints``, ``save_steps``,
    ``optim``, ``eval_batch_size``, ``dataloader_num_workers``, ``measure_power_secs``, ``report_to``, ...).
    ``peft="lora"`` or ``peft={"method": "lora", "r": 8, "alpha": 16, "dropout": 0.1, "target_modules": [...]}``
    trains LoRA adapters and the classifier head only (:mod:`harness.finetune.adapters`).
    ``report_to`` (``"tensorboard"``, ``"wandb"``, ``"mlflow"`` or a list; default none) sends the training
    logs to trackers, offline (:mod:`harness.finetune.trackers`); it is not part of the run id.
    A finished run is returned from the store; an interrupted one resumes.

    Every argument is checked by the field that declares it (:meth:`harness.kinds.RunKind.prepare`) before
    anything is written: a bad one raises :class:`~ranking.floor.errors.UserError` naming it.
    """
    from harness.kinds import get_kind, spec_kind
    from harness.schema import output_path
    from ranking.floor.paths import resolve_data_root

    where = "harness.finetune"
    kind = get_kind("finetune")
    if spec_kind(model) is kind:
        if task is not None:
            raise UserError(f"{where}(spec): give either a FinetuneSpec or model, task, seed and options")
        spec, options = kind.prepare(model, given, where=where)
    else:
        if task is None:
            raise UserError(f"{where}: which GLUE task? e.g. harness.finetune('bert-base-uncased', 'rte', seed=0)")
        spec, options = kind.prepare(None, {"model": model, "task": task, "seed": seed, **given}, where=where)
    return kind.run_function()(spec, output_path(output, f"{where}: output"), data_root=resolve_data_root(data_root),
                               progress=bool(progress), **options.given())
