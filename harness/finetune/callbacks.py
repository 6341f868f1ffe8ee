"""Trainer callbacks of a fine-tuning run: efficiency tracking and checkpoint completion.

Imports transformers at the top: import this module only when training.
:class:`EfficiencyCallback` must come before :class:`CheckpointCallback` in the
Trainer's list, so that the efficiency totals are written into a checkpoint
before the checkpoint is marked complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from harness.energy.tracker import CHECKPOINT_FILE, EfficiencyTracker
from harness.finetune.checkpoints import mark_complete
from harness.store import atomic_write_json


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
