"""GLUE fine-tuning: task registry, metrics, one resumable run per (model, task, seed), the ``vnr finetune`` command.

>>> from harness.finetune import get_task
>>> get_task("CoLA").metrics
('matthews_correlation',)

``run_finetune`` imports torch and transformers only when called, so importing
this package (e.g. for the CLI) stays cheap.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from harness.finetune.tasks import TASKS, GlueTask, get_task, load_task

__all__ = ["TASKS", "GlueTask", "get_task", "load_task", "run_finetune"]


class _CallablePackage(types.ModuleType):
    """``harness.finetune(model, task, seed, **hp)`` is the API function :func:`harness.finetune.api.finetune`,
    while ``harness.finetune`` stays this package (``harness.finetune.run_finetune``, ...)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from harness.finetune.api import finetune

        return finetune(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "run_finetune":  # lazy: training imports numpy, torch and transformers
            from harness.finetune.train import run_finetune

            return run_finetune
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


sys.modules[__name__].__class__ = _CallablePackage
