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
from typing import Annotated, Any, Literal

from harness.flags import Cli
from harness.schema import PRECISIONS, Seed
from harness.store import run_id
from ranking.floor.errors import UserError
from ranking.floor.schema import (
    Before,
    Check,
    Count,
    Flag,
    Help,
    Name,
    Number,
    OneLine,
    PositiveFloat,
    Refusal,
    Shown,
    check_fields,
    validate,
)

# Bump when a code change makes earlier results of that kind incomparable.
FINETUNE_CODE_VERSION = 1
BIAS_CODE_VERSION = 1

# How a bias run scores (harness.bias.evaluators): the harness's own definitions, the published scripts', or the
# Vote'n'Rank authors' fairness computation (harness.bias.votenrank).
BIAS_SCORING = ("default", "reference", "votenrank")
# The longest input a run may ask for, in tokens: 2**20, the longest context windows of current models (1M
# tokens); beyond it a tokenizer's padding and a batch's buffers cannot be allocated, so a larger value is a typo
# (``--max-length 1e8``), refused at entry instead of failing in the tokenizer or torch.
MAX_LENGTH = 2**20
# Examples in one batch (training or evaluation): beyond it a batch's buffers cannot be allocated on any device,
# so a larger value is a typo (``--eval-batch-size 1e9``), refused at entry instead of allocating.
MAX_BATCH_SIZE = 2**16

Precision = Literal[PRECISIONS]
# harness.finetune.batching.PADDING_OPTIONS (tested equal; specs do not import the batching code)
Padding = Literal["auto", "flatten", "bucket", "pad"]
# harness.finetune.compilation.COMPILE_OPTIONS (tested equal)
Compile = Literal["auto", "on", "off"]
Scoring = Literal[BIAS_SCORING]


def _peft(value: Any) -> tuple[tuple[str, Any], ...]:
    """A ``peft`` setting as the spec stores it (:func:`harness.finetune.adapters.parse_peft`)."""
    from harness.finetune.adapters import parse_peft

    return parse_peft(value, where=None)


def _report_to(value: Any) -> Any:
    """Tracker names (:func:`harness.finetune.trackers.parse_report_to`; whether installed: at run time)."""
    from harness.finetune.trackers import parse_report_to

    return None if value is None else parse_report_to(value, where=None)


def _optimizer(name: str) -> str:
    """An optimizer the Trainer knows (``transformers.training_args.OptimizerNames``): a typo fails every run
    otherwise, after the grid has started. transformers is imported here, only where ``optim`` is given."""
    import difflib

    try:
        from transformers.training_args import OptimizerNames
    except ImportError:  # a ranking-only install: the run itself says what is missing
        return name
    known = [str(o.value) for o in OptimizerNames]
    if name not in known:
        close = [k for k in known if k.startswith(name)] or difflib.get_close_matches(name, known, n=3)
        hint = (f"did you mean {' or '.join(close[:3])}?" if close else
                "use e.g. adamw_torch, adamw_torch_fused, sgd or adafactor")
        raise ValueError(f"{name!r} is not an optimizer transformers knows: {hint} (all: "
                         "transformers.training_args.OptimizerNames)")
    return name


def _glue_task(name: str) -> str:
    """A GLUE task's canonical name ("RTE", "rte" are one run), or the error naming the known ones."""
    from harness.finetune.tasks import get_task

    return get_task(name).name


def _bias_dataset(name: str) -> str:
    from harness.bias.data import DATASETS

    if name not in DATASETS:
        raise UserError(f"unknown bias dataset {name!r} (known: {', '.join(DATASETS)})")
    return name


ModelArgs = Annotated[Any, Help("keyword arguments of from_pretrained (revision, dtype, ...): a mapping, "
                                "key=value text or pairs; checked by harness.models.parse_model_args")]


@dataclass(frozen=True)
class FinetuneSpec:
    """One fine-tuning run: (model, task, seed) and the hyper-parameters (paper defaults).

    Every field is declared with its checks (:mod:`harness.schema`, on the floor's :mod:`ranking.floor.schema`): a grid config's ``hyperparameters:``,
    the flags of ``vnr finetune`` and the arguments of ``harness.finetune`` are validated against them.
    """

    model: Annotated[Name, Help("hub id, local checkpoint directory, paper alias or tiny:<family>")]
    task: Annotated[Name, Check(_glue_task), Help("GLUE task (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli)")]
    seed: Annotated[Seed, Help("random seed, 0 to 2**32-1 (the paper: 0-4)")]
    epochs: Annotated[PositiveFloat, Help("training epochs (the paper: 5)")] = 5.0
    batch_size: Annotated[int, Number(ge=1, le=MAX_BATCH_SIZE), Help("training batch size (the paper: 16)")] = 16
    learning_rate: Annotated[PositiveFloat, Help("peak learning rate (the paper: 2e-5)"), Cli("--lr")] = 2e-5
    weight_decay: Annotated[float, Number(ge=0.0), Help("AdamW weight decay (the paper: 0.01)")] = 0.01
    warmup_ratio: Annotated[float, Number(ge=0.0, lt=1.0), Help("share of steps with linear warm-up, 0 to <1")] = 0.0
    max_length: Annotated[int, Number(ge=1, le=MAX_LENGTH), Help("truncate inputs to this many tokens")] = 128
    max_steps: Annotated[Count | None, Help("stop after N optimizer steps (smoke runs)")] = None
    max_train_samples: Annotated[Count | None, Help("train on the first N examples only")] = None
    max_eval_samples: Annotated[Count | None, Help("evaluate on the first N dev examples only")] = None
    precision: Annotated[Precision, Help("auto: bf16 where supported, else fp16 on GPU; fp32 on CPU")] = "auto"
    group_by_length: Annotated[bool, Flag(), Help("batch examples of similar length")] = False
    # how a batch's examples become tensors (harness.finetune.batching). In the run id only when not auto: the
    # layouts compute the same function, but dropout draws its masks per computed token, so a different width is
    # a different dropout draw (statistically alike, numerically not)
    padding: Annotated[Padding, Help("batch layout: auto (the layout the grid's calibration measured fastest on "
                                     "the device among those exact for the family, else bucket), flatten (the "
                                     "examples packed into rows: gpt2, llama, mistral, qwen2, bert, roberta, albert, "
                                     "distilbert, electra; not deberta), bucket (padded to a multiple of 8) or pad (to "
                                     "the longest)")] = "auto"
    # torch.compile of the training step (harness.finetune.compilation). In the run id only when not auto, as
    # padding: compiled kernels reorder float operations (the same run, rounded differently)
    compile: Annotated[Compile, Help("compile the training step with torch.compile: auto (where the grid's "
                                     "calibration measured it faster on the device; eager on a CPU), on or "
                                     "off")] = "auto"
    model_args: ModelArgs = ()  # stored as sorted (key, value) pairs
    # LoRA adapters (harness.finetune.adapters): sorted (key, value) pairs with the defaults filled in; () = full
    # fine-tuning. In the run id only when set, so runs without it keep their ids.
    peft: Annotated[Any, Before(_peft), Shown({
        "description": "parameter-efficient fine-tuning: lora, or {method: lora, r: 8, alpha: 16, dropout: 0.1, "
                       "target_modules: [...]} (default per model_type); none or empty: full fine-tuning",
        "anyOf": [{"type": "string"}, {"type": "object"}, {"type": "null"}]})] = ()

    kind = "finetune"

    def __post_init__(self) -> None:
        # One run id per run: "RTE", "rte" and "deberta-base" / "microsoft/deberta-base" are the same run.
        check_fields(self)
        _canonical_model(self)

    def identity(self) -> dict[str, Any]:
        return _identity(self, FINETUNE_CODE_VERSION)

    def run_id(self) -> str:
        return _run_id(self)

    def metric_keys(self) -> list[str]:
        """The metrics a finished record of this run must hold (the task's criteria; see ``record_problem``)."""
        from harness.finetune.tasks import get_task

        return [c.record_key for c in get_task(self.task).criteria]

    @classmethod
    def from_mapping(cls, data: dict[str, Any], where: str = "config") -> FinetuneSpec:
        return _from_mapping(cls, data, where)


@dataclass(frozen=True)
class BiasSpec:
    """One bias-scoring run: (model, dataset) and what changes the scores."""

    model: Annotated[Name, Help("hub id, local checkpoint directory, paper alias or tiny:<family>")]
    dataset: Annotated[Name, Check(_bias_dataset), Help("bias benchmark: crows_pairs, stereoset or winobias")]
    limit: Annotated[Count | None, Help("first N examples only (per StereoSet section / WinoBias file)")] = None
    precision: Annotated[Precision, Help("fp32 (exact, the default), bf16, fp16, or auto (bf16, else fp16, "
                                         "on a GPU)")] = "fp32"
    model_args: ModelArgs = ()
    scoring: Annotated[Scoring, Help("default: the harness's definitions; reference: the published scripts'; "
                                     "votenrank: the Vote'n'Rank authors' fairness computation (what a grid "
                                     "with the votenrank preset scores with)")] = "default"

    kind = "bias"

    def __post_init__(self) -> None:
        check_fields(self)
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

    def metric_keys(self) -> list[str]:
        """The metrics a finished record of this run must hold (the bias set's fairness criteria)."""
        from harness.bias.data import get_dataset

        return [f.metric for f in get_dataset(self.dataset).fairness]

    @classmethod
    def from_mapping(cls, data: dict[str, Any], where: str = "config") -> BiasSpec:
        return _from_mapping(cls, data, where)


@dataclass(frozen=True)
class FinetuneRunOptions:
    """Keyword options of :func:`harness.finetune.run_finetune` besides the spec (a grid's
    ``finetune.run_options:``, flags of ``vnr finetune``, arguments of ``harness.finetune``). They never change
    a result (not part of the run id), but a bad one fails every run, so they are checked at entry. ``None``:
    the run function's default."""

    keep_checkpoints: Annotated[bool | None, Flag(), Help("keep checkpoints after the result is written")] = None
    save_steps: Annotated[Count | None, Help("also checkpoint every N steps (always every epoch)")] = None
    country_iso_code: Annotated[OneLine | None, Help("ISO 3166 alpha-3 country for the carbon intensity "
                                                     "(default $VNR_COUNTRY_ISO_CODE, else USA)"), Cli("--country")] = None
    region: Annotated[OneLine | None, Help("region for the carbon intensity (USA/Canada), e.g. california")] = None
    track_efficiency: Annotated[bool | None, Flag(), Help("measure energy, time and carbon")] = None
    measure_power_secs: Annotated[PositiveFloat | None, Help("seconds between power readings")] = None
    optim: Annotated[Annotated[OneLine, Check(_optimizer)] | None,
                     Help("optimizer name for the Trainer, one of transformers' OptimizerNames (default: "
                          "adamw_torch_fused on a GPU, adamw_torch on CPU)")] = None
    eval_batch_size: Annotated[Annotated[int, Number(ge=1, le=MAX_BATCH_SIZE)] | None,
                               Help(f"evaluation batch size (1 to {MAX_BATCH_SIZE})")] = None
    dataloader_num_workers: Annotated[int | None, Number(ge=0), Help("data loader worker processes")] = None
    allow_nonfinite: Annotated[bool | None, Flag(), Help("store a diverged (NaN/inf) run as ok")] = None
    report_to: Annotated[Any, Before(_report_to), Shown({
        "description": "trackers for the training logs: none (default), tensorboard, wandb, mlflow, or several "
                       "(a list or comma-separated); offline, under the output",
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}]})] = None

    kind = "finetune"

    def __post_init__(self) -> None:
        check_fields(self)
        if self.country_iso_code is not None or self.region is not None:
            from harness.energy.intensity import check_location

            for key, region in (("country_iso_code", None), ("region", self.region)):
                try:
                    check_location(self.country_iso_code, region)
                except UserError as exc:
                    raise Refusal(str(exc), at=(key,)) from None

    def given(self) -> dict[str, Any]:
        """The options set (the keyword arguments to pass on)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class BiasRunOptions:
    """Keyword options of :func:`harness.bias.run_bias` besides the spec (a grid's ``bias.run_options:``)."""

    batch_tokens: Annotated[Count | None, Help("padded tokens per forward pass (default 4096 on CPU, "
                                               "65536 on GPU)")] = None

    kind = "bias"

    def __post_init__(self) -> None:
        check_fields(self)

    def given(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


# which kind a spec and its options belong to, its run function, ...: harness.kinds (one record per kind)


def _canonical_model(spec: Any) -> None:
    """The model's canonical name (offline), its ``model_args`` as sorted pairs, and for a local
    directory its content fingerprint (taken once, when the spec is made)."""
    from harness.models import (
        canonical_model,
        check_model_args,
        is_local,
        local_fingerprint,
        parse_model_args,
    )

    model = canonical_model(spec.model)
    object.__setattr__(spec, "model", model)
    args = parse_model_args(spec.model_args, where=f"model_args of {model}")
    check_model_args(model, args)  # e.g. a revision for a local folder or a tiny model: refused, not ignored
    object.__setattr__(spec, "model_args", args)
    if is_local(model):
        object.__setattr__(spec, "_fingerprint", local_fingerprint(model, dict(args).get("subfolder")))


def _identity(spec: Any, code_version: int) -> dict[str, Any]:
    """What the run id hashes. ``model_args``, a fine-tuning run's ``peft``, a bias run's non-default ``scoring``
    and the local fingerprint appear only when set, so the run ids of plain hub and tiny models are those of
    earlier versions."""
    out = {"kind": spec.kind, "code_version": code_version, **asdict(spec)}
    if out.get("scoring") == "default":
        del out["scoring"]
    if "peft" in out:
        if out["peft"]:
            out["peft"] = {k: list(v) if isinstance(v, tuple) else v for k, v in spec.peft}
        else:
            del out["peft"]
    for key in ("padding", "compile"):  # auto: run ids as before the option existed
        if out.get(key) == "auto":
            del out[key]
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
    """A spec from a mapping of its fields, validated against their declarations (errors name ``where``)."""
    return validate(cls, data, where=where)
