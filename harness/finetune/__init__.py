"""GLUE fine-tuning: task registry, metrics, one resumable run per (model, task, seed), the ``vnr finetune`` command.

>>> from harness.finetune import get_task
>>> get_task("CoLA").metrics
('matthews_correlation',)

``run_finetune`` imports torch and transformers only when called, so importing
this package (e.g. for the CLI) stays cheap.
"""

from __future__ import annotations

from harness.finetune.tasks import TASKS, GlueTask, get_task, load_task
from harness.finetune.train import run_finetune

__all__ = ["TASKS", "GlueTask", "get_task", "load_task", "run_finetune"]
