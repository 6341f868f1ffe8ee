"""``vnr finetune``: one fine-tuning run from the command line.

    vnr finetune --model bert-base-uncased --task rte --seed 0 --output results/glue
    vnr finetune --model tiny:bert --task rte --seed 0 --data-root ../shared/data --max-steps 20
    vnr finetune --model Qwen/Qwen2.5-1.5B --task sst2 --seed 0 --peft lora --peft-args r=16,alpha=32

Prints where the result went and a one-line summary. Nothing heavy is
imported until the command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.models import add_model_arguments
from ranking.cli_types import folder
from ranking.errors import UserError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "finetune",
        help="fine-tune one model on one GLUE task with one seed",
        description="Fine-tune MODEL on GLUE task TASK with seed SEED (paper defaults: 5 epochs, batch 16, "
        "lr 2e-5, weight decay 0.01, dev evaluation every epoch), track its efficiency and store the "
        "result under OUTPUT/runs/. A finished run is skipped; an interrupted one resumes from its last checkpoint.",
    )
    add_model_arguments(p)
    p.add_argument("--task", required=True, help="GLUE task: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI")
    p.add_argument("--seed", required=True, help="random seed (the paper uses 0-4); part of the run id")
    p.add_argument("--data-root", help="data root with glue/<Task>/*.tsv (default: $VNR_DATA_ROOT, else the hub)")
    p.add_argument("--output", default="results/finetune", type=folder, help="result store (default: %(default)s)")
    # values are read and checked by the spec's declared fields (harness.specs), as a config's are
    p.add_argument("--epochs", help="training epochs (default 5)")
    p.add_argument("--batch-size", help="training batch size (default 16)")
    p.add_argument("--lr", help="peak learning rate (default 2e-5)")
    p.add_argument("--weight-decay", help="AdamW weight decay (default 0.01)")
    p.add_argument("--warmup-ratio", help="share of steps with linear warm-up, 0 to below 1 (default 0)")
    p.add_argument("--max-length", help="truncate inputs to this many tokens (default 128)")
    p.add_argument("--max-steps", help="stop after N optimizer steps (smoke runs)")
    p.add_argument("--max-train-samples", help="train on the first N examples only")
    p.add_argument("--max-eval-samples", help="evaluate on the first N dev examples only")
    p.add_argument("--precision", help="auto (default: in a grid, what its calibration measured fastest; alone, a rule: "
                   "bf16, else fp16, on a GPU; fp32 on CPU, that the record names), fp32, fp16 or bf16")
    p.add_argument("--group-by-length", action="store_true", default=None, help="batch examples of similar length")
    p.add_argument("--peft", choices=("lora", "none"),
                   help="lora: train LoRA adapters and the classifier head only, the base model frozen (default: "
                   "none, full fine-tuning); part of the run id")
    p.add_argument("--peft-args", metavar="K=V,...",
                   help="LoRA settings (with --peft lora): r (default 8), alpha (16), dropout (0.1), target_modules "
                   "joined by + (default per model_type: query+value for BERT-likes, q_proj+v_proj for Llama-likes, ...)")
    p.add_argument("--report-to", metavar="TRACKER[,TRACKER]",
                   help="send the training logs to tensorboard, wandb and/or mlflow (offline, under OUTPUT; "
                   "default none); not part of the run id")
    p.add_argument("--padding", help="batch layout: auto (default: bucketed, padded to a multiple of 8), flatten "
                   "(the examples packed into rows; decoders only: gpt2, llama, mistral, qwen2), bucket or pad; an "
                   "explicit value is part of the run id")
    p.add_argument("--compile", help="compile the training step (torch.compile): auto (default: where the grid's "
                   "calibration measured it faster on the device; eager on a CPU and alone), on or off; an explicit "
                   "value is part of the run id")
    p.add_argument("--save-steps", help="also checkpoint every N steps (always every epoch)")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep checkpoints after the result is written")
    p.add_argument("--country", help="ISO alpha-3 country for the carbon intensity (default $VNR_COUNTRY_ISO_CODE or USA)")
    p.add_argument("--region", help="region for the carbon intensity (USA/Canada), e.g. california")
    p.add_argument("--allow-nonfinite", action="store_true",
                   help="store a run whose loss or metrics are NaN/inf as ok (default: such a diverged run fails)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


# Flags named otherwise than their spec field / run option (the rest: --field-name).
FLAGS = {"learning_rate": "--lr", "country_iso_code": "--country"}
_NAMING = ("model", "task", "seed", "model_args", "peft")  # given by --model, --task, --seed, --model-args, --peft(-args)


def flag(field: str) -> str:
    """The flag of a spec field or run option: ``learning_rate`` → ``--lr``, ``max_length`` → ``--max-length``."""
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def spec_from_args(args: argparse.Namespace) -> Any:
    """The run's :class:`~harness.specs.FinetuneSpec`: paper defaults, overridden by the options given,
    checked by the spec's declared fields (errors name the flag: ``--lr: nan is not a finite number``)."""
    from dataclasses import fields

    from harness.schema import validate
    from harness.specs import FinetuneSpec

    values = {f.name: getattr(args, flag(f.name)[2:].replace("-", "_"), None) for f in fields(FinetuneSpec)
              if f.name not in _NAMING}
    values = {k: v for k, v in values.items() if v is not None}
    data = {"model": args.model, "task": args.task, "seed": args.seed,
            "model_args": getattr(args, "model_args", "") or "",
            "peft": peft_from_args(getattr(args, "peft", None), getattr(args, "peft_args", None)), **values}
    return validate(FinetuneSpec, data, names=flag)


def options_from_args(args: argparse.Namespace) -> Any:
    """The run function's options from the flags, checked by :class:`~harness.specs.FinetuneRunOptions`."""
    from harness.schema import validate
    from harness.specs import FinetuneRunOptions

    return validate(FinetuneRunOptions, {
        "save_steps": args.save_steps, "keep_checkpoints": args.keep_checkpoints, "country_iso_code": args.country,
        "region": args.region, "allow_nonfinite": args.allow_nonfinite,
        "report_to": args.report_to}, names=flag)


def peft_from_args(method: str | None, settings: str | None) -> tuple[tuple[str, Any], ...]:
    """``--peft`` and ``--peft-args`` as the spec's ``peft`` (checked by :func:`harness.finetune.adapters.parse_peft`).

    >>> dict(peft_from_args("lora", "r=4,target_modules=query+value"))["r"]
    4
    >>> peft_from_args(None, "r=4")
    Traceback (most recent call last):
    ...
    ranking.errors.UserError: --peft-args needs --peft lora
    """
    from harness.finetune.adapters import parse_peft

    if settings and method in (None, "none"):
        raise UserError("--peft-args needs --peft lora")
    if method in (None, "none"):
        return ()
    if settings and "method=" in settings:
        raise UserError("--peft-args: give the method with --peft, not method=")
    return parse_peft(f"method={method}" + (f",{settings}" if settings else ""), where="--peft-args")


def energy_mark(efficiency: dict[str, Any]) -> str:
    """How the energy was obtained, for the summary: nothing when measured (or not recorded), else its basis.

    >>> energy_mark({"energy_basis": "estimate"}), energy_mark({"energy_basis": "measured"})
    (' (estimate)', '')
    >>> energy_mark({"energy_basis": "mixed", "modelled_fraction": 0.25})
    ' (mixed: 25% modelled)'
    """
    how = efficiency.get("energy_basis")
    if how is None or how == "measured":
        return ""
    fraction = efficiency.get("modelled_fraction")
    if how == "mixed" and isinstance(fraction, float):
        return f" (mixed: {100 * fraction:.3g}% modelled)"
    return f" ({how})"


def summary_line(record: dict[str, Any]) -> str:
    """One line: model, task, seed, final metrics, best metrics, energy, time."""
    def fmt(values: dict[str, Any]) -> str:
        return " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())

    eff = record.get("efficiency") or {}
    parts = [f"{record['model']} {record['task']} seed={record['seed']}", f"final: {fmt(record.get('metrics', {}))}",
             f"best: {fmt(record.get('metrics_best', {}))}"]
    peft = record.get("peft")
    if peft:
        parts.append(f"{peft['method']} r={peft['r']}: {peft['trainable_parameters']:,} of "
                     f"{peft['total_parameters']:,} parameters trained")
    if eff:
        parts.append(f"energy={eff.get('energy_kwh', 0.0):.3g} kWh{energy_mark(eff)} co2={eff.get('co2_kg', 0.0):.3g} kg "
                     f"gpu_hours={eff.get('gpu_hours', 0.0):.3g}")
    parts.append(f"wall={record.get('wall_time_s', 0.0):.1f}s")
    if record.get("resumed_from") is not None:
        parts.append(f"resumed from step {record['resumed_from']}")
    return " | ".join(parts)


def run(args: argparse.Namespace) -> int:
    from harness.api import finetune
    from harness.store import RunStore

    spec = spec_from_args(args)
    options = options_from_args(args)
    output = Path(args.output)
    store = RunStore(output)
    store.ensure_writable()
    already = store.is_done(spec)
    from harness.store import RunFailed, report_failed_run

    try:
        record = finetune(
            spec, output=output, data_root=args.data_root, progress=not args.no_progress, **options.given())
    except RunFailed as exc:  # recorded as failed, with the reason
        print(f"vnr finetune: run failed: {exc}; record: {store.result_path(spec.run_id())}", file=sys.stderr)
        return 1
    except Exception as exc:  # a crash the lifecycle recorded: one line, the traceback is in the run's log
        return report_failed_run(exc, "vnr finetune")
    settings = record.get("settings") or {}
    if settings.get("precision_source") and not already:  # what chose the precision of the run that just trained
        print(f"precision {settings.get('precision')}, chosen by {settings['precision_source']}")
    print(("already done: " if already else "result: ") + str(store.result_path(spec.run_id())))
    print(summary_line(record))
    return 0
