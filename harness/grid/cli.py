"""``vnr run``, ``vnr status`` and ``vnr collect``: a grid from one config, locally or on SLURM.

::

    vnr run configs/experiments/smoke.yaml                       # local: one run after another
    vnr run configs/experiments/paper.yaml --executor slurm --partition gpu --dry-run
    vnr run configs/experiments/paper.yaml --only 'roberta-base/*' --only bias
    vnr status configs/experiments/paper.yaml
    vnr collect configs/experiments/paper.yaml --epoch best

Imports nothing heavy: torch is loaded only when a spec actually runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

log = logging.getLogger("harness.grid")

ONLY_HELP = (
    "run only the specs matching this glob: a run id, model, task or bias dataset, model/task, or the kind "
    "(finetune, bias); repeat or comma-separate for several (e.g. --only 'tiny:bert/*' --only rte)"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run",
        help="run an experiment grid (local or SLURM), skipping finished runs",
        description="Expand an experiment config into run specs, skip the finished ones, run the rest. "
        "Failed runs are retried; a changed hyper-parameter gets a new run id.",
    )
    run.add_argument("config", help="experiment config, e.g. configs/experiments/smoke.yaml")
    run.add_argument("--executor", choices=("local", "slurm"), default="local",
                     help="local: one after another on this machine (default); slurm: one job array via submitit")
    run.add_argument("--data-root", default=None, help="data root (default: $VNR_DATA_ROOT, else the public source)")
    run.add_argument("--output", default=None, help="results directory (default: the config's output)")
    run.add_argument("--only", action="append", default=None, metavar="PATTERN", help=ONLY_HELP)
    run.add_argument("--dry-run", action="store_true",
                     help="print what would run (slurm: the sbatch script it would submit) and stop")
    run.add_argument("--list", action="store_true", help="print every spec with its array index, run id and state")
    run.add_argument("--count", action="store_true", help="print the number of specs (the plain sbatch array size)")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.add_argument("--isolate", action="store_true",
                     help="local: run each spec in a fresh Python process, so a crash (segfault, lost CUDA "
                     "context, OOM kill) fails only that run (recommended for long grids on a GPU)")
    slurm = run.add_argument_group("SLURM (override the config's slurm: section)")
    slurm.add_argument("--partition", default=None)
    slurm.add_argument("--time", default=None, help="time limit per task: minutes or [D-]HH:MM:SS")
    slurm.add_argument("--gpus", type=int, default=None, help="GPUs per task (0 on a CPU cluster)")
    slurm.add_argument("--cpus", type=int, default=None, help="CPUs per task")
    slurm.add_argument("--mem-gb", type=float, default=None, help="memory per task in GB")
    slurm.add_argument("--array-parallelism", type=int, default=None, help="tasks running at once")
    slurm.add_argument("--account", default=None)
    slurm.add_argument("--qos", default=None)
    slurm.add_argument("--constraint", default=None)
    slurm.add_argument("--wait", action="store_true", help="block until the array has left the queue")
    run.set_defaults(func=run_command)

    status = subparsers.add_parser(
        "status", help="done / running / queued / failed / missing per run and in total",
        description="State of every run of a grid, from the run store (and squeue where present).",
    )
    status.add_argument("config")
    status.add_argument("--output", default=None, help="results directory (default: the config's output)")
    status.add_argument("--only", action="append", default=None, metavar="PATTERN", help=ONLY_HELP)
    status.add_argument("--state", choices=("done", "running", "queued", "failed", "missing"), action="append",
                        default=None, help="list only runs in this state (repeatable)")
    status.add_argument("--summary", action="store_true", help="only the totals line")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=status_command)

    collect = subparsers.add_parser(
        "collect", help="write <output>/matrix.csv and criteria.yaml (what vnr rank reads)",
        description="Collect the grid's results into a models × criteria matrix with a criteria sidecar "
        "(performance averaged over seeds, efficiency per task, fairness from the bias runs).",
    )
    collect.add_argument("config")
    collect.add_argument("--output", default=None, help="results directory (default: the config's output)")
    collect.add_argument("--epoch", choices=("final", "best"), default="final",
                         help="performance from the final epoch (default) or each metric's best epoch")
    collect.add_argument("--allow-missing", action="store_true",
                         help="collect even if runs are missing; their cells stay empty")
    collect.set_defaults(func=collect_command)


def _load(args: argparse.Namespace):
    from harness.grid.config import load_experiment, select_specs

    exp = load_experiment(args.config, output=args.output)
    return exp, select_specs(exp.specs, getattr(args, "only", None))


def run_command(args: argparse.Namespace) -> int:
    from harness.grid.config import parse_time_min
    from harness.grid.local import check_run_options
    from harness.grid.status import grid_status
    from harness.store import RunStore
    from ranking.paths import resolve_data_root

    exp, specs = _load(args)
    if args.count:
        print(len(specs))
        return 0
    if args.list:
        for i, st in enumerate(grid_status(exp, specs)):
            print(f"{i}\t{st.run_id}\t{st.state}")
        return 0
    data_root = resolve_data_root(args.data_root)
    if not args.dry_run:
        from harness.prefetch import check_available

        check_available(exp, specs=specs, data_root=data_root, config=args.config)  # offline: all on disk?
    for kind, options in exp.run_options.items():
        check_run_options(kind, options, f"{exp.source}: {kind}.run_options")
    store = RunStore(exp.output)
    done = [s for s in specs if store.is_done(s.run_id())]
    pending = [s for s in specs if not store.is_done(s.run_id())]
    log.info("%s: %d runs in the grid%s, %d done, %d to run; results in %s", exp.source, len(exp.specs),
             f" ({len(specs)} selected by --only)" if args.only else "", len(done), len(pending), exp.output)

    if args.executor == "local":
        if args.dry_run:
            for s in specs:
                print(f"{'skip' if store.is_done(s.run_id()) else 'run '}  {s.run_id()}")
            print(f"{len(pending)} to run, {len(done)} done (dry run: nothing ran)")
            return 0
        from harness.grid.local import FAILED, execute, summary_line

        outcomes = execute(
            specs, exp.output, data_root=data_root, progress=not args.no_progress, options=exp.options_for,
            isolate=args.isolate,
        )
        failed = [o for o in outcomes if o.status == FAILED]
        for o in failed:
            log.error("failed %s: %s", o.run_id, o.error)
        print(summary_line(outcomes) + (f"; results in {exp.output}" if outcomes else ""))
        if failed:
            print(f"{len(failed)} runs failed: see `vnr status {args.config}`; `vnr run` again retries them",
                  file=sys.stderr)
        return 1 if failed else 0

    # slurm
    from harness.grid import slurm

    settings = exp.slurm.updated(
        partition=args.partition,
        time_min=parse_time_min(args.time, "--time") if args.time is not None else None,
        gpus=args.gpus,
        cpus=args.cpus,
        mem_gb=args.mem_gb,
        array_parallelism=args.array_parallelism,
        account=args.account,
        qos=args.qos,
        constraint=args.constraint,
    )
    statuses = {s.run_id: s.state for s in grid_status(exp, pending)}
    busy = [s for s in pending if statuses.get(s.run_id()) in ("running", "queued")]
    todo = [s for s in pending if statuses.get(s.run_id()) not in ("running", "queued")]
    if busy:
        log.info("%d runs are already running or queued: not submitted again", len(busy))
    if args.dry_run:
        print(f"# {len(todo)} array tasks ({len(done)} done, {len(busy)} running or queued); "
              f"one task per run id, in this order:")
        for i, s in enumerate(todo):
            print(f"#   {i}: {s.run_id()}")
        print(slurm.sbatch_script(settings, exp.output, max(len(todo), 1), name=exp.name))
        return 0
    if not todo:
        print(f"nothing to submit: {len(done)} done, {len(busy)} running or queued")
        return 0
    array_id = slurm.submit(todo, exp.output, settings, name=exp.name, data_root=data_root, options=exp.options_for)
    what = f"array {array_id} with {len(todo)} tasks" if len(todo) > 1 else f"job {array_id} (one task)"
    print(f"submitted {what}; logs in {Path(exp.output) / 'logs' / 'slurm'}; "
          f"follow with `vnr status {args.config}`")
    if args.wait:
        slurm.wait_for_array(array_id)
        statuses = grid_status(exp, todo)
        from harness.grid.status import totals_line

        print(totals_line(statuses))
        return 0 if all(s.state == "done" for s in statuses) else 1
    return 0


def status_command(args: argparse.Namespace) -> int:
    from harness.grid.status import format_table, grid_status, totals, totals_line
    from harness.prefetch import check_available
    from ranking.paths import resolve_data_root

    exp, specs = _load(args)
    check_available(exp, specs=specs, data_root=resolve_data_root(None), config=args.config)
    statuses = grid_status(exp, specs)
    shown = [s for s in statuses if args.state is None or s.state in args.state]
    if args.json:
        print(json.dumps({"output": str(exp.output), "totals": totals(statuses), "runs": [s.row() for s in shown]},
                         indent=2, default=str))
        return 0
    if not args.summary and shown:
        print(format_table(shown))
    print(totals_line(statuses))
    return 0


def collect_command(args: argparse.Namespace) -> int:
    from harness.grid.collect import collect, describe

    exp, _ = _load(args)
    result = collect(exp, epoch=args.epoch, allow_missing=args.allow_missing)
    print(describe(result))
    return 0
