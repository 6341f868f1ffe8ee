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

from harness.bias.data import DATASETS, REGISTRY
from harness.models import add_model_arguments
from ranking.cli_types import folder
from ranking.errors import UserError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bias",
        help="score one model zero-shot on CrowS-Pairs, StereoSet or WinoBias",
        description="Score MODEL zero-shot on a social-bias benchmark with LM likelihoods (masked LMs: "
        "pseudo-log-likelihood; causal LMs: log-probability), batched, and store the metrics under "
        "OUTPUT/runs/<run_id>.json with the per-example scores beside it as parquet. A finished run is skipped.",
    )
    add_model_arguments(p)
    p.add_argument("--dataset", required=True, help=f"benchmark to score: {', '.join(DATASETS)}")
    p.add_argument("--data-root", help="data root with bias/<dataset>/ (default: $VNR_DATA_ROOT, else the public files)")
    p.add_argument("--output", default="results/bias", type=folder, help="result store (default: %(default)s)")
    # values are read and checked by the spec's declared fields (harness.specs), as a config's are
    p.add_argument("--limit", help="first N examples only (per StereoSet section / WinoBias file)")
    p.add_argument("--batch-tokens", help="padded tokens per forward pass (default 4096 on CPU, 65536 on GPU)")
    p.add_argument("--precision", default="fp32",
                   help="fp32, bf16, fp16 or auto; default fp32 (exact: no TF32) on CPU and GPU alike; bf16/fp16, or auto (bf16, else "
                   "fp16, on a GPU), trade exactness for speed")
    p.add_argument("--scoring", default="default",
                   help="default: the harness's definitions (documented in README); reference: the benchmarks' "
                   "published evaluation scripts, as their published tables were made; votenrank: the Vote'n'Rank "
                   "authors' fairness computation, which made the case study's fairness columns (what a grid with "
                   "the votenrank preset scores with)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def summary_line(record: dict[str, Any]) -> str:
    metrics = record.get("metrics") or {}
    dataset = REGISTRY.get(record.get("dataset", ""))
    shown = [f"{k}={metrics[k]:.2f}" for k in (dataset.headline if dataset else ()) if k in metrics]
    return f"{record['model']} {record['dataset']} n={record.get('n_examples')} " + " ".join(shown)


def run(args: argparse.Namespace) -> int:
    from harness.api import score_bias
    from harness.schema import validate
    from harness.specs import BiasRunOptions, BiasSpec
    from harness.store import RunStore, report_failed_run

    def flag(field: str) -> str:
        return "--" + field.replace("_", "-")

    spec = validate(BiasSpec, {"model": args.model, "dataset": args.dataset, "limit": args.limit,
                               "precision": args.precision, "scoring": args.scoring,
                               "model_args": args.model_args or ""}, names=flag)
    options = validate(BiasRunOptions, {"batch_tokens": args.batch_tokens}, names=flag)
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
