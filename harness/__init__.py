"""Produce results: GLUE fine-tuning, bias scoring, efficiency tracking, the run store,
local and SLURM execution.

The Python API (:mod:`harness.api`), the same functions the ``vnr`` CLI calls::

    import harness
    record = harness.finetune("bert-base-uncased", "rte", seed=0, output="results/glue")
    bias = harness.score_bias("gpt2", "crows_pairs", output="results/bias")
    outcomes = harness.run_grid("configs/experiments/smoke.yaml")

Importing this package is cheap: torch and transformers are imported inside the
functions that need them, so ``vnr rank`` works on a laptop without them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["finetune", "run_grid", "score_bias"]


def __getattr__(name: str) -> Any:
    # Lazy: ``harness.finetune`` is the sub-package, callable as the API function (see harness/finetune).
    if name == "finetune":
        import importlib

        return importlib.import_module("harness.finetune")
    if name in ("score_bias", "run_grid"):
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
