"""Trainer callbacks of a fine-tuning run: efficiency tracking and checkpoint completion.

Imports transformers at the top: import this module only when training.
:class:`EfficiencyCallback` must come before :class:`CheckpointCallback` in the
Trainer's list, so that the efficiency totals are written into a checkpoint
before the checkpoint is marked complete.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from harness.energy.tracker import CHECKPOINT_FILE, EfficiencyTracker
from harness.finetune.checkpoints import mark_complete
from harness.store import atomic_write_json

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
