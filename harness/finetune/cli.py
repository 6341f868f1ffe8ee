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

from harness import flags
from harness.flags import add_flags
from harness.models import add_model_arguments
from harness.specs import FinetuneRunOptions, FinetuneSpec
from ranking.floor.errors import UserError
from ranking.floor.paths import folder


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "finetune",
        help="fine-tune one model on one GLUE task with one seed",
        description="Fine-tune MODEL on GLUE task TASK with seed SEED (paper defaults: 5 epochs, batch 16, "
        "lr 2e-5, weight decay 0.01, dev evaluation every epoch), track its efficiency and store the "
        "result under OUTPUT/runs/. A finished run is skipped; an interrupted one resumes from its last checkpoint.",
    )
    add_model_arguments(p)
    add_flags(p, FinetuneSpec, skip=OWN_FLAGS)  # --task, --seed and the hyper-parameters, from their declarations
    p.add_argument("--peft", choices=("lora", "none"),
                   help="lora: train LoRA adapters and the classifier head only, the base model frozen (default: "
                   "none, full fine-tuning); part of the run id")
    p.add_argument("--peft-args", metavar="K=V,...",
                   help="LoRA settings (with --peft lora): r (default 8), alpha (16), dropout (0.1), target_modules "
                   "joined by + (default per model_type: query+value for BERT-likes, q_proj+v_proj for Llama-likes, ...)")
    add_flags(p, FinetuneRunOptions)  # the run options (not part of the run id)
    p.add_argument("--data-root", help="data root with glue/<Task>/*.tsv (default: $VNR_DATA_ROOT, else the hub)")
    p.add_argument("--output", default="results/finetune", type=folder, help="result store (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


# the spec fields with flags of their own: --model, --model-args (every command that loads a model), --peft(-args)
OWN_FLAGS = ("model", "model_args", "peft")


def flag(field: str) -> str:
    """The flag of a spec field or run option: ``learning_rate`` → ``--lr``, ``max_length`` → ``--max-length``."""
    return flags.names(FinetuneSpec, FinetuneRunOptions)(field)


def spec_from_args(args: argparse.Namespace) -> Any:
    """The run's :class:`~harness.specs.FinetuneSpec` from the flags (:func:`run_from_args`)."""
    return run_from_args(args)[0]


def run_from_args(args: argparse.Namespace) -> tuple[Any, Any]:
    """The run's :class:`~harness.specs.FinetuneSpec` and :class:`~harness.specs.FinetuneRunOptions`: paper
    defaults, overridden by the flags given, checked by the fields' declarations
    (:meth:`harness.kinds.RunKind.prepare`; errors name the flag: ``--lr: nan is not a finite number``)."""
    from harness.kinds import get_kind

    data = {"model": args.model, "model_args": getattr(args, "model_args", "") or "",
            "peft": peft_from_args(getattr(args, "peft", None), getattr(args, "peft_args", None)),
            **flags.values(args, FinetuneSpec, skip=OWN_FLAGS), **flags.values(args, FinetuneRunOptions)}
    return get_kind("finetune").prepare(None, data, where=None, names=flag)


def peft_from_args(method: str | None, settings: str | None) -> tuple[tuple[str, Any], ...]:
    """``--peft`` and ``--peft-args`` as the spec's ``peft`` (checked by :func:`harness.finetune.adapters.parse_peft`).

    >>> dict(peft_from_args("lora", "r=4,target_modules=query+value"))["r"]
    4
    >>> peft_from_args(None, "r=4")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: --peft-args needs --peft lora
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

    spec, options = run_from_args(args)
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
