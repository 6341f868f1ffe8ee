"""What one SLURM array task runs: exactly one spec, through :func:`harness.grid.local.run_spec`.

Two ways in, the same work:

* submitit pickles a :class:`GridTask` per spec; on SIGUSR2 (preemption notice
  or the time limit coming) submitit calls :meth:`GridTask.checkpoint`, which
  resubmits the same task, and requeues the job. The requeued task finds the
  run's training checkpoint under ``<output>/checkpoints/<run_id>`` and resumes.
* the plain sbatch template (``slurm/grid-array.sbatch``) runs
  ``python -m harness.grid.entry CONFIG --index $SLURM_ARRAY_TASK_ID``: the
  index is a position in the expanded grid (after ``--only``), the same order
  ``vnr run CONFIG --list`` prints; ``--count`` prints the array size.

Either way the task sets ``SLURM_JOB_ID=<array job>_<task>`` before anything
starts an energy tracker, so codecarbon reads this task's allocation and not
the whole array's.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import submitit

from harness.grid.local import FAILED, Spec, run_spec

log = logging.getLogger("harness.grid")


def pin_array_task_job_id() -> None:
    """``SLURM_JOB_ID=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}`` inside an array task (idempotent).

    The numeric id is kept in ``VNR_SLURM_NUMERIC_JOB_ID``.
    """
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        current = os.environ.get("SLURM_JOB_ID", "")
        if current and "_" not in current:
            os.environ.setdefault("VNR_SLURM_NUMERIC_JOB_ID", current)
        os.environ["SLURM_JOB_ID"] = f"{array_job}_{task}"


def run_task(
    spec: Spec,
    output: str | Path,
    data_root: str | Path | None = None,
    *,
    progress: bool = False,
    options: Mapping[str, Any] | None = None,
) -> str:
    """Run one spec in this task; returns the outcome status, raises if the run failed."""
    pin_array_task_job_id()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    restarts = os.environ.get("SLURM_RESTART_COUNT")
    log.info(
        "task %s (restart %s) on %s: %s",
        os.environ.get("SLURM_JOB_ID", "-"),
        restarts or 0,
        os.uname().nodename,
        spec.run_id(),
    )
    outcome = run_spec(
        spec, output, data_root=Path(data_root) if data_root else None, progress=progress, raise_errors=True,
        options=options,
    )
    log.info("%s: %s after %.1f s", outcome.run_id, outcome.status, outcome.seconds)
    if outcome.status == FAILED:  # pragma: no cover - raise_errors raises first
        raise RuntimeError(outcome.error)
    return outcome.status


class GridTask(submitit.helpers.Checkpointable):
    """The callable submitit pickles for each array task (importable: ``harness.grid.entry.GridTask``).

    ``checkpoint`` (inherited) resubmits the same call; resuming needs nothing
    more, because the run function resumes from the store's checkpoint dir.
    """

    def __call__(
        self, spec: Spec, output: str, data_root: str | None = None, options: Mapping[str, Any] | None = None
    ) -> str:
        return run_task(spec, output, data_root, options=options)

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        log.warning("preemption or time limit: requeueing %s; it resumes from its last checkpoint", args[0].run_id())
        return submitit.helpers.DelayedSubmission(GridTask(), *args, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.grid.entry CONFIG --index N``: run the N-th spec of the grid (plain sbatch)."""
    from harness.grid.config import load_experiment, select_specs
    from ranking.errors import UserError
    from ranking.paths import resolve_data_root

    parser = argparse.ArgumentParser(prog="python -m harness.grid.entry", description=main.__doc__)
    parser.add_argument("config", nargs="?", help="experiment config YAML")
    parser.add_argument("--spec", default=None, help=argparse.SUPPRESS)  # JSON from local.isolated_runner
    parser.add_argument("--index", type=int, default=None, help="position in the grid (default: $SLURM_ARRAY_TASK_ID)")
    parser.add_argument("--output", default=None, help="results directory (default: the config's output)")
    parser.add_argument("--data-root", default=None, help="data root (default: $VNR_DATA_ROOT, else the public source)")
    parser.add_argument("--only", action="append", default=None, help="the same --only patterns given to --count")
    parser.add_argument("--count", action="store_true", help="print the number of specs (the array size) and exit")
    parser.add_argument("--progress", action="store_true", help="progress bars in the task log")
    args = parser.parse_args(argv)
    if args.spec is not None:  # one spec in a fresh process for the local executor (which holds its lock)
        from harness.grid.local import default_runner, spec_from_payload

        logging.basicConfig(level=logging.INFO, format="%(message)s")
        spec, options = spec_from_payload(args.spec)
        data_root = Path(args.data_root) if args.data_root else None
        default_runner(spec, Path(args.output), data_root=data_root, progress=args.progress, **options)
        return 0
    if args.config is None:
        parser.error("give CONFIG (or --spec)")
    try:
        exp = load_experiment(args.config, output=args.output)
        specs = select_specs(exp.specs, args.only)
        if args.count:
            print(len(specs))
            return 0
        index = args.index
        if index is None:
            task = os.environ.get("SLURM_ARRAY_TASK_ID")
            if task is None:
                raise UserError("give --index N or run inside a SLURM array task (SLURM_ARRAY_TASK_ID)")
            index = int(task)
        if not 0 <= index < len(specs):
            raise UserError(f"index {index} is outside the grid (0..{len(specs) - 1}): submit --array=0-{len(specs) - 1}")
        data_root = resolve_data_root(args.data_root)
    except UserError as exc:
        print(f"harness.grid.entry: error: {exc}", file=sys.stderr)
        return 2
    spec = specs[index]
    status = run_task(spec, exp.output, data_root, progress=args.progress, options=exp.options_for(spec))
    return 0 if status != FAILED else 1


if __name__ == "__main__":
    sys.exit(main())
