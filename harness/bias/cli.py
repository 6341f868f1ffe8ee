"""``vnr bias``: score one model on one bias benchmark.

    vnr bias --model bert-base-uncased --dataset crows_pairs --output results/bias
    vnr bias --model tiny:gpt2 --dataset stereoset --data-root ../shared/data --limit 50

Prints where the result went and the headline metrics. Nothing heavy is
imported until the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness import flags
from harness.bias.data import REGISTRY
from harness.flags import add_flags
from harness.models import add_model_arguments
from harness.specs import BiasRunOptions, BiasSpec
from ranking.floor.errors import UserError
from ranking.floor.paths import folder


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bias",
        help="score one model zero-shot on CrowS-Pairs, StereoSet or WinoBias",
        description="Score MODEL zero-shot on a social-bias benchmark with LM likelihoods (masked LMs: "
        "pseudo-log-likelihood; causal LMs: log-probability), batched, and store the metrics under "
        "OUTPUT/runs/<run_id>.json with the per-example scores beside it as parquet. A finished run is skipped.",
    )
    add_model_arguments(p)
    add_flags(p, BiasSpec, skip=OWN_FLAGS)  # --dataset, --limit, --precision, --scoring: from their declarations
    add_flags(p, BiasRunOptions)  # --batch-tokens
    p.add_argument("--data-root", help="data root with bias/<dataset>/ (default: $VNR_DATA_ROOT, else the public files)")
    p.add_argument("--output", default="results/bias", type=folder, help="result store (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


OWN_FLAGS = ("model", "model_args")  # --model, --model-args: every command that loads a model


def summary_line(record: dict[str, Any]) -> str:
    metrics = record.get("metrics") or {}
    dataset = REGISTRY.get(record.get("dataset", ""))
    shown = [f"{k}={metrics[k]:.2f}" for k in (dataset.headline if dataset else ()) if k in metrics]
    return f"{record['model']} {record['dataset']} n={record.get('n_examples')} " + " ".join(shown)


def run(args: argparse.Namespace) -> int:
    from harness.api import score_bias
    from harness.kinds import get_kind
    from harness.store import RunStore, report_failed_run

    data = {"model": args.model, "model_args": args.model_args or "", **flags.values(args, BiasSpec, skip=OWN_FLAGS),
            **flags.values(args, BiasRunOptions)}
    spec, options = get_kind("bias").prepare(None, data, where=None, names=flags.names(BiasSpec, BiasRunOptions))
    output = Path(args.output)
    if output.exists() and not output.is_dir():
        raise UserError(f"--output {output} is a file; give a directory")
    try:
        record = score_bias(spec, output=output, data_root=args.data_root, progress=not args.no_progress,
                            **options.given())
    except Exception as exc:  # a crash the lifecycle recorded: one line, the traceback is in the run's log
        return report_failed_run(exc, "vnr bias")
    print(f"{RunStore(output).result_path(record['run_id'])}")
    print(summary_line(record))
    details = details_line(record)
    if details:
        print(details)
    return 0


def details_line(record: dict[str, Any]) -> str:
    """One line naming the record's notes and skipped parts (their text stays in the record), or ''."""
    parts = []
    if record.get("notes"):
        parts.append("notes: " + ", ".join(record["notes"]))
    if record.get("skipped"):
        parts.append("skipped: " + ", ".join(record["skipped"]))
    return "; ".join(parts) + " (their text is in the record)" if parts else ""
