"""One fine-tuning run: (model, task, seed) with the paper's defaults, end to end, resumable.

:func:`run_finetune` loads the task, builds the model, trains with the
Hugging Face ``Trainer`` (evaluating on dev after every epoch), tracks
efficiency with :class:`harness.finetune.callbacks.EfficiencyCallback`, and writes one
JSON record atomically to ``<output>/runs/<run_id>.json``.

Restartability:

* a finished run (``status == "ok"``) is returned from the store, not re-run;
* checkpoints go to ``<output>/checkpoints/<run_id>/checkpoint-<step>`` every
  epoch and every ``save_steps`` steps; a checkpoint counts only once it is
  complete (its files fsync'ed, then a ``vnr-complete.json`` marker written
  atomically after ``trainer_state.json``), so a run killed while saving resumes
  from the previous complete one;
* a second invocation (or a SLURM requeue) resumes from the latest complete
  checkpoint, restoring model, optimizer, scheduler, RNG states, the
  per-epoch history and the efficiency totals spent so far;
* checkpoints are removed once the record is written, unless ``keep_checkpoints``.

Precision ``auto``: in a grid, the precision the grid's calibration measured
fastest on this device kind (:mod:`harness.grid.calibrate`; the run gets it as
the ``calibration`` option and its record names that calibration); without a
calibration (a single ``vnr finetune`` run) a rule chooses (:data:`PRECISION_RULE`)
and the record says so. On the GPU: TF32 matmuls on Ampere and newer, the fused AdamW, padding per batch chosen by
:mod:`harness.finetune.batching` (``FinetuneSpec.padding``; the record's
``settings.batching``), optional length grouping (``FinetuneSpec.group_by_length``), a compiled training
step where ``FinetuneSpec.compile`` asks or the calibration measured it faster (:mod:`harness.finetune.compilation`;
the record's ``settings.compile``).
The record's ``tokens`` section (:class:`harness.finetune.callbacks.TokenAccountingCallback`)
counts real and computed tokens, the padding share, samples/s and tokens/s.
``scripts/bench_finetune.py`` measures these against plain ``Trainer`` defaults.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.finetune.checkpoints import checkpoint_step, latest_checkpoint
from harness.finetune.checkpoints import drop_incomplete_checkpoints as _drop_incomplete_checkpoints
from harness.finetune.metrics import best_over_epochs, compute_metrics, predictions_from_logits
from harness.finetune.tasks import GlueTask, Split, get_task, load_task
from harness.finetune.trackers import (
    check_trackers_installed,
    parse_report_to,
    report_to_argument,
    tracker_environment,
)
from harness.specs import PRECISIONS, FinetuneSpec
from harness.store import RunFailed, RunStore, strict_json
from ranking.floor.errors import UserError

log = logging.getLogger(__name__)

TINY_TOKENIZER_TEXTS = 2000  # sentences a tiny model's tokenizer is trained on
_EVAL_NAMES = {"": "dev_matched", "_mm": "dev_mismatched"}
# Keys of the spec that name the run rather than tune it.
_NAMING = ("model", "task", "seed")


# What chooses precision "auto" where no calibration measured it (a single `vnr finetune` run).
PRECISION_RULE = "rule (no calibration): bf16 where the GPU supports it, else fp16; fp32 on CPU"


# ---------------------------------------------------------------------- runtime choices
def runtime_settings(precision: str = "auto", optim: str | None = None,
                     calibration: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Device, precision, TF32 and optimizer for this machine (speed options; results' identity excludes them).

    ``auto`` takes the precision of ``calibration`` (what :mod:`harness.grid.calibrate` measured fastest
    on this device kind, with a loss trajectory matching fp32's) where given, else
    :data:`PRECISION_RULE`; ``precision_source`` in the result says which. On CPU: ``adamw_torch``. On
    an NVIDIA GPU: TF32 on compute capability >= 8.0, ``adamw_torch_fused``.
    """
    # UNMEASURED: TF32 and the fused AdamW were chosen, not measured (scripts/bench_finetune.py measures
    # them where a GPU is lent). The precision of a grid's runs is measured: harness.grid.calibrate.
    import torch

    if precision not in PRECISIONS:
        raise UserError(f"precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    cuda = torch.cuda.is_available()
    source = "the spec"
    if precision == "auto" and calibration is not None and calibration.get("precision"):
        precision = str(calibration["precision"])
        source = f"calibration {calibration.get('file')}"
    elif precision == "auto":
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if cuda else "fp32"
        source = PRECISION_RULE
    if precision == "fp16" and not cuda:
        raise UserError("precision fp16 needs a CUDA GPU; use fp32 or bf16 on CPU")
    tf32 = bool(cuda and torch.cuda.get_device_capability(0) >= (8, 0))
    if optim is None:
        optim = "adamw_torch_fused" if cuda else "adamw_torch"
    return {
        "device": "cuda" if cuda else "cpu",
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "precision": precision,
        "precision_source": source,
        "tf32": tf32,
        "optim": optim,
    }


# ---------------------------------------------------------------------- data
def _tokenize(split: Split, tokenizer: Any, max_length: int, *, pad_to_max: bool = False) -> Any:
    import datasets

    ds = datasets.Dataset.from_dict(split.to_dict())
    pair = split.text_b is not None

    def encode(batch: dict[str, list[Any]]) -> Any:
        args = (batch["text_a"], batch["text_b"]) if pair else (batch["text_a"],)
        return tokenizer(*args, truncation=True, max_length=max_length,
                         padding="max_length" if pad_to_max else False)

    return ds.map(encode, batched=True, remove_columns=[c for c in ds.column_names if c != "label"])


# ---------------------------------------------------------------------- history
def history_from_log(log_history: list[dict[str, Any]], task: GlueTask, eval_keys: dict[str, str]) -> list[dict[str, Any]]:
    """Per-evaluation rows from ``Trainer.state.log_history``.

    ``eval_keys`` maps the Trainer's eval dataset key ('' for a single set) to our
    metric suffix ('' or '_mm'). Each row: epoch, step, the task's metrics
    (``accuracy``, ``accuracy_mm``, ...), ``eval_loss[_mm]``, and the training
    loss logged at the same step.
    """
    rows: dict[int, dict[str, Any]] = {}
    train_loss: dict[int, float] = {}
    for entry in log_history:
        step = int(entry.get("step", 0))
        if "loss" in entry:
            train_loss[step] = float(entry["loss"])
        for key, value in entry.items():
            if not key.startswith("eval_"):
                continue
            rest = key[len("eval_"):]
            for ds_key, suffix in eval_keys.items():
                prefix = f"{ds_key}_" if ds_key else ""
                if not rest.startswith(prefix):
                    continue
                name = rest[len(prefix):]
                row = rows.setdefault(step, {"epoch": round(float(entry.get("epoch", 0.0)), 4), "step": step})
                if name in task.metrics:
                    row[name + suffix] = None if value is None or value != value else float(value)
                elif name == "loss":
                    row["eval_loss" + suffix] = float(value)
                elif name == "runtime":
                    row["eval_runtime_s" + suffix] = float(value)
    out = []
    for step in sorted(rows):
        row = rows[step]
        if step in train_loss:
            row["train_loss"] = train_loss[step]
        out.append(row)
    return out


# ---------------------------------------------------------------------- the run
def run_finetune(
    spec: FinetuneSpec,
    output: Path,
    *,
    data_root: Path | None = None,
    keep_checkpoints: bool = False,
    progress: bool = True,
    save_steps: int | None = None,
    country_iso_code: str | None = None,
    region: str | None = None,
    track_efficiency: bool = True,
    measure_power_secs: float = 15.0,
    optim: str | None = None,
    eval_batch_size: int | None = None,
    dataloader_num_workers: int = 0,
    allow_nonfinite: bool = False,
    calibration: Mapping[str, Any] | None = None,
    report_to: Any = None,
) -> dict[str, Any]:
    """Run ``spec`` end to end (or return its stored result) and store its record through
    the store's run lifecycle (:meth:`harness.store.RunStore.run`).

    Keyword options do not change the result and are not part of the run id:
    ``save_steps`` (extra checkpoints, besides every epoch), ``country_iso_code`` /
    ``region`` (carbon intensity; default ``$VNR_COUNTRY_ISO_CODE`` or USA),
    ``optim`` (override the optimizer choice), ``eval_batch_size``, ``dataloader_num_workers``,
    ``calibration`` (the grid's calibration this run runs under, from :mod:`harness.grid.calibrate`:
    file, device kind, runs per GPU, precision; it resolves precision ``auto``, and ``padding``/``compile`` ``auto``
    where it measured them, and the record names it).
    ``report_to`` (trackers for the training logs: :mod:`harness.finetune.trackers`; none by default).

    A diverged run (a non-finite training or evaluation loss or metric) is stored
    as ``failed`` with the reason and raises :class:`harness.store.RunFailed`,
    unless ``allow_nonfinite`` (then it is ``ok`` and its ``nonfinite`` field names
    the values stored as null).
    """
    output = Path(output)
    store = RunStore(output)
    rid = spec.run_id()
    try:
        stored = store.done_record(spec)
        if stored is None and allow_nonfinite:  # a diverged run kept on request is done for this request
            kept = store.get(rid)
            stored = kept if kept is not None and kept.get("status") == "ok" and kept.get("nonfinite") else None
    except OSError:  # e.g. the output is a file: say so in one line
        store.ensure_writable()
        raise
    if stored is not None:
        log.info("%s is done: %s", rid, store.result_path(rid))
        return stored
    # Bad input fails here, before anything is recorded.
    from harness.models import check_head, check_local_files, resolve_model
    from ranking.floor.paths import resolve_data_root

    task = get_task(spec.task)
    from harness.finetune.batching import choose_batching

    info = resolve_model(spec.model, spec.model_args)
    check_local_files(info)
    check_head(info, "sequence_classification")
    from harness.finetune.fit_checks import check_fits_model

    check_fits_model(spec, info)  # max_length beyond the model's positions, a LoRA r above its hidden size
    if choose_batching(info.family, spec.padding,  # unsupported -> UserError now
                       calibrated=(calibration or {}).get("padding"))["mode"] == "flattened":
        from harness.finetune.flat import check_flat_attention

        check_flat_attention(info.family, dict(spec.model_args or {}).get("attn_implementation"))
    if spec.peft:
        from harness.finetune.adapters import check_peft_available, target_modules

        check_peft_available()
        target_modules(dict(spec.peft), info.family, info.name)  # a family without a default: refused now
    trackers = parse_report_to(report_to)
    check_trackers_installed(trackers)
    data_root = resolve_data_root(data_root)  # None: $VNR_DATA_ROOT, else the public source (as run_bias)
    if save_steps is not None and save_steps <= 0:
        raise UserError(f"save_steps must be a positive integer (got {save_steps!r})")
    if track_efficiency:
        from harness.energy.intensity import grid_intensity

        grid_intensity(country_iso_code, region)  # unknown country -> UserError now, not after training
    store.ensure_writable()
    # the input is good; torch, the data and the model take seconds to load: say so first (one line, stderr)
    log.info("fine-tuning %s on %s, seed %d: loading torch, the data and the model …", spec.model, task.name,
             spec.seed)

    with store.run(spec, busy_is_error=True) as run:
        if run.state == "done":
            return run.record  # type: ignore[return-value]
        from harness.environment import environment_info

        run_dir = store.checkpoint_dir(rid)
        resume = latest_checkpoint(run_dir)
        _drop_incomplete_checkpoints(run_dir, resume)
        base: dict[str, Any] = {
            "task": task.name,
            "hyperparameters": {k: v for k, v in asdict(spec).items() if k not in (*_NAMING, "model_args", "peft")},
            **({"model_args": dict(spec.model_args)} if spec.model_args else {}),
            "resumed_from": None,
            "environment": environment_info(),
            "calibration": dict(calibration) if calibration else None,
        }
        try:
            result = _train(
                spec, task, run_dir, resume,
                data_root=data_root, progress=progress, save_steps=save_steps, optim=optim,
                eval_batch_size=eval_batch_size, dataloader_num_workers=dataloader_num_workers, trackers=trackers,
                calibration=calibration,
                tracker_kwargs={"country_iso_code": country_iso_code, "region": region,
                                "measure_power_secs": measure_power_secs} if track_efficiency else None,
            )
        except Exception as exc:
            run.fail(exc, base)
            raise
        diverged = nonfinite_values(result)
        if diverged and not allow_nonfinite:
            reason = "the run diverged: non-finite " + ", ".join(f"{k}={v}" for k, v in list(diverged.items())[:6])
            run.finish({**base, **result}, error=reason)
            raise RunFailed(f"{rid}: {reason} (allow_nonfinite keeps such a run)")
        record = run.finish({**base, **result})
    if not keep_checkpoints:
        store.remove_checkpoints(rid)
    log.debug("result: %s", store.result_path(rid))
    return record


def nonfinite_values(result: dict[str, Any]) -> dict[str, str]:
    """Where a training result holds a non-finite loss or metric (path → ``nan``/``inf``/``-inf``).

    >>> nonfinite_values({"metrics": {"accuracy": 0.5}, "history": [{"eval_loss": float("nan")}],
    ...                   "train": {"train_loss": 1.0}})
    {'history[0].eval_loss': 'nan'}
    """
    found: dict[str, str] = {}
    strict_json({k: result.get(k) for k in ("metrics", "metrics_best", "history") if k in result}, found)
    strict_json({"train.train_loss": (result.get("train") or {}).get("train_loss")}, found)
    return found


def _train(
    spec: FinetuneSpec,
    task: GlueTask,
    run_dir: Path,
    resume: Path | None,
    *,
    data_root: Path | None,
    progress: bool,
    save_steps: int | None,
    optim: str | None,
    eval_batch_size: int | None,
    dataloader_num_workers: int,
    tracker_kwargs: dict[str, Any] | None,
    calibration: Mapping[str, Any] | None = None,
    extra_callbacks: Sequence[Any] = (),
    trackers: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One training run, in the order it happens: the settings, the data, the model, the Trainer's arguments
    and callbacks, training (resumed from ``resume``), then the record's training part (:func:`_outcome`)."""
    import contextlib

    import transformers
    from transformers import Trainer

    from harness.finetune.batching import check_devices, choose_batching, make_collator
    from harness.finetune.callbacks import ReadableLogCallback
    from harness.finetune.compilation import choose_compile
    from harness.models import resolve_model

    transformers.logging.set_verbosity_error()
    batching = choose_batching(resolve_model(spec.model, spec.model_args).family, spec.padding,
                               calibrated=(calibration or {}).get("padding"))  # auto: the calibration's layout
    bars = progress and sys.stderr.isatty()  # a bar in a file (a grid's run log) is a wall of fragments
    if not bars:
        _quiet_progress_bars()
    settings = runtime_settings(spec.precision, optim, calibration)
    log.info("precision %s, chosen by %s", settings["precision"], settings["precision_source"])
    transformers.set_seed(spec.seed)
    data = load_task(task, data_root, max_train_samples=spec.max_train_samples,
                     max_eval_samples=spec.max_eval_samples)
    model, tokenizer, peft_record = _model_for(spec, task, data, resume, batching)
    train_ds = _tokenize(data.train, tokenizer, spec.max_length)
    eval_arg, eval_keys = _eval_sets(data, tokenizer, spec.max_length)
    compiled = choose_compile(spec.compile, settings["device"], calibrated=(calibration or {}).get("compile"))
    args = _training_arguments(spec, run_dir, settings, compiled=compiled, bars=bars, trackers=trackers,
                               eval_batch_size=eval_batch_size, dataloader_num_workers=dataloader_num_workers)
    cuda = settings["device"] == "cuda"
    check_devices(batching, args.n_gpu if cuda else 0)
    settings.update({
        "batching": batching,
        "compile": compiled,
        "group_by_length": spec.group_by_length,
        "eval_batch_size": args.per_device_eval_batch_size,
        "save_steps": save_steps,
        "dataloader_num_workers": dataloader_num_workers,
        "n_gpu": args.n_gpu if cuda else 0,
        "report_to": list(trackers),
    })
    callbacks, tracker, tokens = _callbacks(args, cuda, run_dir, resume, save_steps=save_steps,
                                            tracker_kwargs=tracker_kwargs, extra=extra_callbacks)
    environment = contextlib.ExitStack()  # the trackers' offline defaults, while training
    tracker_env = environment.enter_context(tracker_environment(trackers, run_dir.parent.parent, run_dir.name))
    if trackers:
        settings["tracker_environment"] = tracker_env
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_arg,
        processing_class=tokenizer,
        data_collator=make_collator(tokenizer, batching),
        compute_metrics=functools.partial(_metrics, task),
        callbacks=callbacks,
    )
    if not bars:  # readable lines instead of the printed log dicts
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(ReadableLogCallback())
    log.info("training %s on %s: %d examples, %s …", spec.model, task.name, len(data.train),
             f"{spec.max_steps} steps" if spec.max_steps else f"{spec.epochs:g} epochs")
    resumed_from = None
    if resume is not None:
        resumed_from = checkpoint_step(resume)
        log.info("resuming %s from %s", run_dir.name, resume)
    try:
        train_out = trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    finally:
        environment.close()
        if tracker is not None and tracker.started and tracker.result is None:
            tracker.stop()  # training raised: stop codecarbon's thread
    return {
        **_outcome(trainer, task, eval_keys),
        "efficiency": tracker.result if tracker is not None else None,
        "tokens": tokens.result(),
        "settings": settings,
        "train": {
            "global_step": trainer.state.global_step,
            "epochs": round(float(trainer.state.epoch or 0.0), 4),
            "train_loss": float(train_out.training_loss),
            "train_samples": len(data.train),
            "eval_samples": {_EVAL_NAMES[s] if len(data.evals) > 1 else "dev": len(v) for s, v in data.evals.items()},
            "data_source": data.source,
            "model_parameters": int(sum(p.numel() for p in model.parameters())),
        },
        "resumed_from": resumed_from,
        **({"peft": peft_record} if peft_record is not None else {}),
    }


def _quiet_progress_bars() -> None:
    """No progress bars from datasets, the hub ("Writing model shards" at each checkpoint) or transformers."""
    import datasets
    import huggingface_hub.utils
    import transformers

    datasets.disable_progress_bars()
    huggingface_hub.utils.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def _model_for(spec: FinetuneSpec, task: GlueTask, data: Any, resume: Path | None,
               batching: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any] | None]:
    """(model, tokenizer, LoRA record or None): the classification model with the task's labels, the flattened
    forward where the batches are flattened, LoRA adapters where ``spec.peft`` asks for them."""
    from harness.models import load_model, resolve_model

    info = resolve_model(spec.model, spec.model_args)
    tokenizer = None
    if resume is not None and info.is_tiny:
        # A tiny model's vocabulary was trained at the start: reuse the checkpoint's, never retrain it.
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(resume))
    log.info("loading model %s …", spec.model)
    model, tokenizer, info = load_model(
        spec.model, "sequence_classification",
        texts=data.train.texts()[:TINY_TOKENIZER_TEXTS] if info.is_tiny else None,
        num_labels=task.num_labels, problem_type=task.problem_type, seed=spec.seed, tokenizer=tokenizer,
        model_args=spec.model_args,
    )
    if not task.is_regression:
        model.config.id2label = dict(enumerate(task.label_names))
        model.config.label2id = {n: i for i, n in enumerate(task.label_names)}
    if batching["mode"] == "flattened":  # before PEFT wraps it: PEFT calls the inner model's forward
        from harness.finetune.flat import enable_flat_forward

        enable_flat_forward(model)
    peft_record = None
    if spec.peft:  # LoRA: only the adapters and the classifier head train
        from harness.finetune.adapters import apply_peft

        model, peft_record = apply_peft(model, dict(spec.peft), info.family, info.name)
    return model, tokenizer, peft_record


def _eval_sets(data: Any, tokenizer: Any, max_length: int) -> tuple[Any, dict[str, str]]:
    """The Trainer's ``eval_dataset`` and, per its metric key prefix, our metric suffix ('' or '_mm')."""
    eval_sets = {suffix: _tokenize(split, tokenizer, max_length) for suffix, split in data.evals.items()}
    if len(eval_sets) == 1:
        return eval_sets[""], {"": ""}
    names = {"": "matched", "_mm": "mismatched"}  # MNLI: the Trainer prefixes each set's metrics with its key
    return {names[s]: ds for s, ds in eval_sets.items()}, {names[s]: s for s in eval_sets}


def _metrics(task: GlueTask, eval_pred: Any) -> dict[str, float]:
    """The task's GLUE metrics of one evaluation (``compute_metrics`` of the Trainer); None as NaN."""
    import numpy as np

    preds = predictions_from_logits(task, eval_pred.predictions)
    values = compute_metrics(task, preds, np.asarray(eval_pred.label_ids))
    return {k: (float("nan") if v is None else v) for k, v in values.items()}


def _training_arguments(spec: FinetuneSpec, run_dir: Path, settings: Mapping[str, Any], *, compiled: bool,
                        bars: bool, trackers: tuple[str, ...], eval_batch_size: int | None,
                        dataloader_num_workers: int) -> Any:
    """The Trainer's arguments: the recipe (the spec), evaluated and saved every epoch, the runtime settings
    (precision, TF32, optimizer, device), the sampler, the trackers and the compile choice."""
    from transformers import TrainingArguments

    from harness.finetune.compilation import training_arguments

    cuda = settings["device"] == "cuda"
    return TrainingArguments(
        output_dir=str(run_dir),
        num_train_epochs=spec.epochs,
        max_steps=spec.max_steps if spec.max_steps else -1,
        per_device_train_batch_size=spec.batch_size,
        per_device_eval_batch_size=eval_batch_size or max(spec.batch_size, 64),
        learning_rate=spec.learning_rate,
        weight_decay=spec.weight_decay,
        warmup_steps=spec.warmup_ratio,
        lr_scheduler_type="linear",
        eval_strategy="epoch",
        save_strategy="epoch",
        logging_strategy="epoch",
        save_total_limit=2,
        seed=spec.seed,
        data_seed=spec.seed,
        bf16=settings["precision"] == "bf16",
        fp16=settings["precision"] == "fp16",
        tf32=True if settings["tf32"] else None,
        optim=settings["optim"],
        train_sampling_strategy="group_by_length" if spec.group_by_length else "random",
        dataloader_num_workers=dataloader_num_workers,
        dataloader_pin_memory=cuda,
        report_to=report_to_argument(trackers),
        run_name=run_dir.name,
        disable_tqdm=not bars,
        use_cpu=not cuda,
        full_determinism=not cuda,  # deterministic kernels on CPU (same seed, same result)
        **training_arguments(compiled),  # torch_compile=True where compiled (harness.finetune.compilation)
    )


def _callbacks(args: Any, cuda: bool, run_dir: Path, resume: Path | None, *, save_steps: int | None,
               tracker_kwargs: dict[str, Any] | None, extra: Sequence[Any]) -> tuple[list[Any], Any, Any]:
    """(callbacks, efficiency tracker or None, token accounting): the tracker and the token count first (their
    files are part of each checkpoint, written before its completion marker), then the marker, then ``extra``
    (e.g. the calibration's burst timer, harness.grid.calibrate)."""
    from harness.energy.tracker import EfficiencyTracker, read_checkpoint_efficiency
    from harness.finetune.callbacks import CheckpointCallback, EfficiencyCallback, TokenAccountingCallback

    callbacks: list[Any] = []
    tracker = None
    if tracker_kwargs is not None:
        used = list(range(args.n_gpu)) if cuda and args.n_gpu > 1 else ([args.device.index or 0] if cuda else [])
        # The GPU ledgers live beside the run store (run_dir = <output>/checkpoints/<run_id>): runs that
        # share a GPU split its measured energy between them (harness.energy.ledger).
        tracker = EfficiencyTracker(cuda_devices=used, previous=read_checkpoint_efficiency(resume),
                                    ledger_dir=run_dir.parent.parent / "energy", run_id=run_dir.name,
                                    **tracker_kwargs)
        callbacks.append(EfficiencyCallback(tracker))
    tokens = TokenAccountingCallback(TokenAccountingCallback.read_checkpoint(resume))
    callbacks += [tokens, CheckpointCallback(save_steps), *extra]
    return callbacks, tracker, tokens


def _outcome(trainer: Any, task: GlueTask, eval_keys: dict[str, str]) -> dict[str, Any]:
    """The record's metrics after training: the final epoch's, the best over epochs, and the history."""
    history = history_from_log(trainer.state.log_history, task, eval_keys)
    if not history or history[-1]["step"] != trainer.state.global_step:
        # Training stopped between epoch ends (cannot happen with epoch evaluation; kept as a guard).
        trainer.evaluate()
        history = history_from_log(trainer.state.log_history, task, eval_keys)
    names = task.metric_names()
    best, best_epoch = best_over_epochs(history, names)
    return {"metrics": {n: history[-1].get(n) for n in names}, "metrics_best": best,
            "metrics_best_epoch": best_epoch, "history": history}
