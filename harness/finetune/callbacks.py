"""Trainer callbacks of a fine-tuning run: efficiency tracking, token accounting and checkpoint completion.

Imports transformers at the top: import this module only when training.
:class:`EfficiencyCallback` and :class:`TokenAccountingCallback` must come before
:class:`CheckpointCallback` in the Trainer's list, so that their totals are written
into a checkpoint before the checkpoint is marked complete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from harness.energy.tracker import CHECKPOINT_FILE, EfficiencyTracker
from harness.finetune.checkpoints import mark_complete
from harness.store import atomic_write_json
from ranking.floor.json_io import read_totals

log = logging.getLogger("harness.finetune")

#: Trainer log keys that are bookkeeping, not results (left out of the readable line)
_QUIET_KEYS = ("_runtime", "_per_second", "total_flos", "epoch", "grad_norm", "learning_rate")


def format_trainer_log(logs: dict[str, Any], epoch: float | None, epochs: float | None) -> str:
    """One readable line for a Trainer log dict (what HF prints as a raw dict).

    >>> format_trainer_log({"eval_loss": 0.69412, "eval_accuracy": 0.4375, "eval_runtime": 3.585, "epoch": 1.0},
    ...                    1.0, 2.0)
    'epoch 1/2: eval_loss 0.6941, eval_accuracy 0.4375 (3.6 s)'
    >>> format_trainer_log({"train_runtime": 31.28, "train_loss": 0.69331, "epoch": 2.0}, 2.0, 2.0)
    'epoch 2/2: train_loss 0.6933 (31.3 s)'
    """
    shown = [f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in logs.items()
             if not any(q in k for q in _QUIET_KEYS)]
    runtime = next((v for k, v in logs.items() if k.endswith("_runtime")), None)
    where = f"epoch {epoch:g}/{epochs:g}" if epoch is not None and epochs else "log"
    return f"{where}: {', '.join(shown)}" + (f" ({runtime:.1f} s)" if runtime is not None else "")


class ReadableLogCallback(TrainerCallback):
    """Each Trainer log as one line through :mod:`logging` (instead of HF's printed dicts, which read badly
    in a captured log file)."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if state.is_world_process_zero and logs:
            log.info("%s", format_trainer_log(logs, state.epoch, getattr(state, "num_train_epochs", None)))


class EfficiencyCallback(TrainerCallback):
    """Runs an :class:`EfficiencyTracker` over ``Trainer.train`` and saves its totals in each checkpoint."""

    def __init__(self, tracker: EfficiencyTracker):
        self.tracker = tracker

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tracker.start()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero and self.tracker.started and self.tracker.result is None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                atomic_write_json(folder / CHECKPOINT_FILE, self.tracker.snapshot())

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker.started:
            self.tracker.stop()


TOKENS_FILE = "vnr-tokens.json"  # a checkpoint's token-accounting totals (restored on resume)
_COUNTS = ("samples", "real_tokens", "computed_tokens", "train_seconds")


class TokenAccountingCallback(TrainerCallback):
    """Counts what the model computes in training: samples, real tokens, computed tokens (padding included),
    and the time spent inside optimizer steps; :meth:`result` gives the record's ``tokens`` section.

    The counts come from a forward pre-hook on the model (training mode only, so evaluation is not counted):
    a batch of ``b`` rows of width ``w`` computes ``b * w`` tokens, of which ``attention_mask.sum()`` are real
    (a flattened batch's ``example_lengths.sum()``, whose samples are its examples, not its rows; all of them
    when there is neither). Real-token sums stay on the device until read, so counting adds no
    GPU synchronisation per step. ``train_seconds`` sums the spans from ``on_step_begin`` to ``on_step_end``
    (forward, backward and optimizer; the batch is fetched before a step begins, and evaluation and
    checkpointing happen after it ends). Totals are saved in every checkpoint and restored on resume.
    """

    def __init__(self, previous: dict[str, Any] | None = None):
        self.totals: dict[str, float] = {k: float((previous or {}).get(k, 0)) for k in _COUNTS}
        self._real: Any = 0  # device tensor sum since the last read
        self._hook: Any = None
        self._step_start: float | None = None

    @staticmethod
    def read_checkpoint(checkpoint: Path | None) -> dict[str, Any] | None:
        """The totals saved in ``checkpoint`` (None without a checkpoint or file, or with a warning where the file
        is no JSON object of finite, non-negative counts: the counts then start again from zero)."""
        if checkpoint is None:
            return None
        return read_totals(Path(checkpoint) / TOKENS_FILE, _COUNTS, what="token counts", nonnegative=True,
                           warn=log.warning)

    def _count(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not module.training:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            return
        mask = kwargs.get("attention_mask")
        lengths = kwargs.get("example_lengths")  # a flattened batch (harness.finetune.flat): rows of examples
        self.totals["computed_tokens"] += ids.numel()
        if lengths is not None:
            self._real = self._real + lengths.sum()
        elif mask is not None:
            self._real = self._real + mask.sum()
        else:
            self.totals["real_tokens"] += ids.numel()
        self.totals["samples"] += ids.shape[0] if lengths is None else lengths.numel()

    def _flush(self) -> None:
        if not isinstance(self._real, int):
            self.totals["real_tokens"] += int(self._real.item())
        self._real = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if model is not None and self._hook is None:
            import torch

            # eager under compile (compile: on): traced, its Python counters would be guards that change every
            # step (a recompile per step until dynamo's recompile limit); disabled, it is one break before the
            # compiled forward
            self._hook = model.register_forward_pre_hook(torch.compiler.disable(self._count), with_kwargs=True)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step_start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._step_start is not None:
            self.totals["train_seconds"] += time.perf_counter() - self._step_start
            self._step_start = None

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            self._flush()
            atomic_write_json(folder / TOKENS_FILE, dict(self.totals))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._flush()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def result(self) -> dict[str, Any]:
        """The record's ``tokens`` section (rates over ``train_seconds``; None when nothing was timed)."""
        self._flush()
        return tokens_section(self.totals)


def tokens_section(t: Mapping[str, float]) -> dict[str, Any]:
    """A record's ``tokens`` section from running totals (samples, real and computed tokens, train seconds):
    rates over ``train_seconds``, None when nothing was timed. One run's or, fused, each run's of a group."""
    seconds = t["train_seconds"]
    return {
        "samples": int(t["samples"]),
        "real_tokens": int(t["real_tokens"]),
        "computed_tokens": int(t["computed_tokens"]),
        "padding_share": 1 - t["real_tokens"] / t["computed_tokens"] if t["computed_tokens"] else None,
        "train_seconds": seconds,
        "samples_per_s": t["samples"] / seconds if seconds > 0 else None,
        "tokens_per_s": t["real_tokens"] / seconds if seconds > 0 else None,
        "computed_tokens_per_s": t["computed_tokens"] / seconds if seconds > 0 else None,
    }


class CheckpointCallback(TrainerCallback):
    """Extra saves every ``save_steps`` steps (besides every epoch) and the completeness marker."""

    def __init__(self, save_steps: int | None):
        self.save_steps = save_steps

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.save_steps and state.global_step % self.save_steps == 0:
            control.should_save = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            mark_complete(folder, state.global_step)
