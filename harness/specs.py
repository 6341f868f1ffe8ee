"""Run specs: what one process computes, and the identity its run id hashes.

A grid config expands into these; the local executor and every SLURM array
task run exactly one spec each. Fields that change the result are part of the
identity (and therefore of the run id); fields that only change speed or
bookkeeping (batch-token budgets, checkpoint retention) are not.

>>> FinetuneSpec("tiny:bert", "rte", 0).run_id().startswith("finetune-tiny_bert-rte-s0-")
True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from harness.store import run_id
from ranking.errors import UserError

# Bump when a code change makes earlier results of that kind incomparable.
FINETUNE_CODE_VERSION = 1
BIAS_CODE_VERSION = 1


@dataclass(frozen=True)
class FinetuneSpec:
    """One fine-tuning run: (model, task, seed) and the hyper-parameters (paper defaults)."""

    model: str
    task: str
    seed: int
    epochs: float = 5.0
    batch_size: int = 16
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.0
    max_length: int = 128
    max_steps: int | None = None
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    precision: str = "auto"  # auto (bf16 where supported, else fp16 on GPU; fp32 on CPU) | fp32 | fp16 | bf16
    group_by_length: bool = False

    kind = "finetune"

    def __post_init__(self) -> None:
        # One run id per run: "RTE", "rte" and "deberta-base" / "microsoft/deberta-base" are the same run.
        from harness.finetune.tasks import get_task
        from harness.models import resolve_model

        object.__setattr__(self, "task", get_task(self.task).name)
        object.__setattr__(self, "model", resolve_model(self.model).name)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "code_version": FINETUNE_CODE_VERSION, **asdict(self)}

    def run_id(self) -> str:
        return run_id(self.identity())

    @classmethod
    def from_mapping(cls, data: dict[str, Any], where: str = "config") -> FinetuneSpec:
        return _from_mapping(cls, data, where)


@dataclass(frozen=True)
class BiasSpec:
    """One bias-scoring run: (model, dataset) and what changes the scores."""

    model: str
    dataset: str  # crows_pairs | stereoset | winobias
    limit: int | None = None
    precision: str = "auto"  # auto (bf16/fp16 on GPU, fp32 on CPU) | fp32 | fp16 | bf16

    kind = "bias"

    def __post_init__(self) -> None:
        from harness.models import resolve_model

        object.__setattr__(self, "model", resolve_model(self.model).name)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "code_version": BIAS_CODE_VERSION, **asdict(self)}

    def run_id(self) -> str:
        return run_id(self.identity())

    @classmethod
    def from_mapping(cls, data: dict[str, Any], where: str = "config") -> BiasSpec:
        return _from_mapping(cls, data, where)


def _from_mapping(cls: type, data: dict[str, Any], where: str) -> Any:
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise UserError(f"{where}: unknown option {unknown[0]!r} for a {cls.kind} run (allowed: {', '.join(sorted(allowed))})")
    try:
        return cls(**data)
    except TypeError as exc:
        raise UserError(f"{where}: {exc}") from None
