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
    # auto | flatten | bucket | pad: how a batch's examples become tensors (harness.finetune.batching). In the
    # run id only when not auto: the layouts compute the same function, but dropout draws its masks per computed
    # token, so a different width is a different dropout draw (statistically alike, numerically not)
    padding: str = "auto"
    model_args: tuple[tuple[str, Any], ...] = ()  # from_pretrained options (revision, dtype, ...), sorted pairs

    kind = "finetune"

    def __post_init__(self) -> None:
        # One run id per run: "RTE", "rte" and "deberta-base" / "microsoft/deberta-base" are the same run.
        from harness.finetune.tasks import get_task

        object.__setattr__(self, "task", get_task(self.task).name)
        _canonical_model(self)

    def identity(self) -> dict[str, Any]:
        return _identity(self, FINETUNE_CODE_VERSION)

    def run_id(self) -> str:
        return _run_id(self)

    @classmethod
    def from_mapping(cls, data: dict[str, Any], where: str = "config") -> FinetuneSpec:
        return _from_mapping(cls, data, where)


@dataclass(frozen=True)
class BiasSpec:
    """One bias-scoring run: (model, dataset) and what changes the scores."""

    model: str
    dataset: str  # crows_pairs | stereoset | winobias
    limit: int | None = None
    precision: str = "fp32"  # fp32 (exact, the default) | bf16 | fp16 | auto (bf16, else fp16, on a GPU)
    model_args: tuple[tuple[str, Any], ...] = ()
    scoring: str = "default"  # default (the harness's definitions) | reference (the published scripts') | votenrank

    kind = "bias"

    def __post_init__(self) -> None:
        _canonical_model(self)

    def identity(self) -> dict[str, Any]:
        """The run id's content; a bias set's own ``version`` (its record) when above 1."""
        from harness.bias.data import REGISTRY

        out = _identity(self, BIAS_CODE_VERSION)
        record = REGISTRY.get(self.dataset)
        if record is not None and record.version > 1:
            out["dataset_version"] = record.version
        return out

    def run_id(self) -> str:
        return _run_id(self)

    @classmethod
    def from_mapping(cls, data: dict[str, Any], where: str = "config") -> BiasSpec:
        return _from_mapping(cls, data, where)


def _canonical_model(spec: Any) -> None:
    """The model's canonical name (offline), its ``model_args`` as sorted pairs, and for a local
    directory its content fingerprint (taken once, when the spec is made)."""
    from harness.models import canonical_model, is_local, local_fingerprint, parse_model_args

    model = canonical_model(spec.model)
    object.__setattr__(spec, "model", model)
    args = parse_model_args(spec.model_args, where=f"model_args of {model}")
    object.__setattr__(spec, "model_args", args)
    if is_local(model):
        object.__setattr__(spec, "_fingerprint", local_fingerprint(model, dict(args).get("subfolder")))


def _identity(spec: Any, code_version: int) -> dict[str, Any]:
    """What the run id hashes. ``model_args``, a bias run's non-default ``scoring`` and the local fingerprint
    appear only when set, so the run ids of plain hub and tiny models are those of earlier versions."""
    out = {"kind": spec.kind, "code_version": code_version, **asdict(spec)}
    if out.get("scoring") == "default":
        del out["scoring"]
    if out.get("padding") == "auto":  # the default layout: run ids as before the option existed
        del out["padding"]
    if not spec.model_args:
        del out["model_args"]
    else:
        out["model_args"] = {k: v for k, v in spec.model_args}
    fingerprint = getattr(spec, "_fingerprint", None)
    if fingerprint:
        out["model_fingerprint"] = fingerprint
    return out


def _run_id(spec: Any) -> str:
    identity = spec.identity()
    if getattr(spec, "_fingerprint", None):  # a local directory: a short readable prefix, the path in the hash
        from pathlib import Path

        identity = {**identity, "model": Path(spec.model).name or "model", "model_path": spec.model}
    return run_id(identity)


def _from_mapping(cls: type, data: dict[str, Any], where: str) -> Any:
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise UserError(f"{where}: unknown option {unknown[0]!r} for a {cls.kind} run (allowed: {', '.join(sorted(allowed))})")
    try:
        return cls(**data)
    except TypeError as exc:
        raise UserError(f"{where}: {exc}") from None
