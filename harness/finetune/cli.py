"""``vnr finetune``: one fine-tuning run from the command line.

    vnr finetune --model bert-base-uncased --task rte --seed 0 --output results/glue
    vnr finetune --model tiny:bert --task rte --seed 0 --data-root ../shared/data --max-steps 20

Prints where the result went and a one-line summary. Nothing heavy is
imported until the command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.finetune.batching import PADDING_OPTIONS
from harness.models import add_model_arguments
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
    p.add_argument("--seed", type=int, required=True, help="random seed (the paper uses 0-4); part of the run id")
    p.add_argument("--data-root", help="data root with glue/<Task>/*.tsv (default: $VNR_DATA_ROOT, else the hub)")
    p.add_argument("--output", default="results/finetune", help="result store (default: %(default)s)")
    p.add_argument("--epochs", type=float, help="training epochs (default 5)")
    p.add_argument("--batch-size", type=int, help="training batch size (default 16)")
    p.add_argument("--lr", type=float, help="peak learning rate (default 2e-5)")
    p.add_argument("--weight-decay", type=float, help="AdamW weight decay (default 0.01)")
    p.add_argument("--warmup-ratio", type=float, help="share of steps with linear warm-up (default 0)")
    p.add_argument("--max-length", type=int, help="truncate inputs to this many tokens (default 128)")
    p.add_argument("--max-steps", type=int, help="stop after N optimizer steps (smoke runs)")
    p.add_argument("--max-train-samples", type=int, help="train on the first N examples only")
    p.add_argument("--max-eval-samples", type=int, help="evaluate on the first N dev examples only")
    p.add_argument("--precision", choices=("auto", "fp32", "fp16", "bf16"), help="default auto: bf16/fp16 on GPU")
    p.add_argument("--group-by-length", action="store_true", default=None, help="batch examples of similar length")
    p.add_argument("--padding", choices=PADDING_OPTIONS,
                   help="batch layout (default auto: flattened where supported, else padded to a multiple of 8); "
                        "an explicit value is part of the run id")
    p.add_argument("--save-steps", type=int, help="also checkpoint every N steps (always every epoch)")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep checkpoints after the result is written")
    p.add_argument("--country", help="ISO alpha-3 country for the carbon intensity (default $VNR_COUNTRY_ISO_CODE or USA)")
    p.add_argument("--region", help="region for the carbon intensity (USA/Canada), e.g. california")
    p.add_argument("--allow-nonfinite", action="store_true",
                   help="store a run whose loss or metrics are NaN/inf as ok (default: such a diverged run fails)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


_OVERRIDES = {
    "epochs": "epochs",
    "batch_size": "batch_size",
    "lr": "learning_rate",
    "weight_decay": "weight_decay",
    "warmup_ratio": "warmup_ratio",
    "max_length": "max_length",
    "max_steps": "max_steps",
    "max_train_samples": "max_train_samples",
    "max_eval_samples": "max_eval_samples",
    "precision": "precision",
    "group_by_length": "group_by_length",
    "padding": "padding",
}


def spec_from_args(args: argparse.Namespace) -> Any:
    """The run's :class:`~harness.specs.FinetuneSpec`: paper defaults, overridden by the options given."""
    from harness.specs import FinetuneSpec
    from harness.validate import check_spec

    values = {field: getattr(args, opt) for opt, field in _OVERRIDES.items() if getattr(args, opt) is not None}
    from harness.models import parse_model_args

    model_args = parse_model_args(getattr(args, "model_args", "") or "")
    spec = FinetuneSpec.from_mapping({"model": args.model, "task": args.task, "seed": args.seed,
                                      "model_args": model_args, **values}, where="vnr finetune")
    flags = {field: f"--{opt.replace('_', '-')}" for opt, field in _OVERRIDES.items()}
    return check_spec(spec, where=lambda field: flags.get(field, f"--{field.replace('_', '-')}"))


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
    if eff:
        parts.append(f"energy={eff.get('energy_kwh', 0.0):.3g} kWh{energy_mark(eff)} co2={eff.get('co2_kg', 0.0):.3g} kg "
                     f"gpu_hours={eff.get('gpu_hours', 0.0):.3g}")
    parts.append(f"wall={record.get('wall_time_s', 0.0):.1f}s")
    if record.get("resumed_from") is not None:
        parts.append(f"resumed from step {record['resumed_from']}")
    return " | ".join(parts)


def run(args: argparse.Namespace) -> int:
    from harness.api import finetune
    from harness.finetune.tasks import get_task
    from harness.store import RunStore

    get_task(args.task)
    for name in ("max_steps", "max_train_samples", "max_eval_samples", "batch_size", "save_steps"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be a positive integer (got {value})")
    spec = spec_from_args(args)
    output = Path(args.output)
    store = RunStore(output)
    store.ensure_writable()
    already = store.is_done(spec.run_id())
    from harness.store import RunFailed

    try:
        record = finetune(
            spec, output=output, data_root=args.data_root, keep_checkpoints=args.keep_checkpoints,
            progress=not args.no_progress, save_steps=args.save_steps, country_iso_code=args.country,
            region=args.region, allow_nonfinite=args.allow_nonfinite,
        )
    except RunFailed as exc:  # recorded as failed, with the reason
        print(f"vnr finetune: run failed: {exc}; record: {store.result_path(spec.run_id())}", file=sys.stderr)
        return 1
    print(("already done: " if already else "result: ") + str(store.result_path(spec.run_id())))
    print(summary_line(record))
    return 0
