"""What one SLURM array task (or one isolated local run) executes.

Three ways in:

* submitit pickles a :class:`GridTask` per array task with one spec, or with N
  specs when ``runs_per_gpu=N`` (task i runs specs ``[i*N:(i+1)*N]`` side by
  side on its GPU through the local executor). On SIGUSR2 (preemption notice or
  the time limit coming) submitit calls :meth:`GridTask.checkpoint`, which
  resubmits the same call and requeues the job; every run of the task then
  resumes from its checkpoint under ``<output>/checkpoints/<run_id>`` (finished
  ones are skipped).
* the plain sbatch template (``slurm/grid-array.sbatch``) runs
  ``python -m harness.grid.entry CONFIG --index $SLURM_ARRAY_TASK_ID [--runs-per-gpu N|auto] [--[no-]calibrate]``:
  task i runs group i of the expanded grid (after ``--only``) in the order ``vnr run CONFIG --list``
  prints, groups of :func:`harness.grid.arrays.group_size` specs (N, or 16 for ``auto``), as the
  submitit array does; without the flag the config's ``slurm:`` section decides
  (:func:`harness.grid.arrays.runs_per_task`). An ``auto`` task runs its group N at a time after the
  calibration of its device kind, with the payload ``vnr run --executor slurm`` gives
  (:func:`harness.grid.arrays.calibration_payload`). ``--count`` prints the array size, the one
  ``vnr run CONFIG --sbatch-args`` puts in ``--array``. The script passes ``--array-file`` (the plan
  ``--sbatch-args`` wrote: :func:`harness.grid.arrays.write_array_file`), which then decides the
  ``--only`` patterns, N and the order, and refuses flags or a changed grid that say otherwise.
* ``--spec JSON``: one spec in a fresh process, joining the attempt (and the
  lock) of the local executor that started it (:func:`harness.grid.local.isolated_runner`).

An array task pins ``SLURM_JOB_ID=<array job>_<task>``
(:func:`harness.environment.pin_array_task_job_id`) before anything starts an
energy tracker, so codecarbon reads this task's allocation and not the whole array's.
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

from harness.environment import pin_array_task_job_id
from harness.grid.local import FAILED, Outcome, Spec, execute, run_spec, summary_line
from harness.store import RunFailed, RunStore, error_line
from ranking.floor.errors import EXIT_USAGE, UserError, describe_os_error

log = logging.getLogger("harness.grid")


def run_task(
    spec: Spec | Sequence[Spec],
    output: str | Path,
    data_root: str | Path | None = None,
    *,
    progress: bool = False,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    packing: Mapping[str, Any] | None = None,
    fuse: int = 1,
    capture: str | None = None,
) -> str:
    """Run this task's spec (or its specs side by side, or as one fused group of ``fuse`` K: each its own run
    and record, ``capture`` what chose to capture the group's step); returns the outcome status, raises
    :class:`~harness.store.RunFailed` (one line: the failed run ids, their errors, where their records and logs
    are) if a run failed.

    ``packing`` (``runs_per_gpu: auto``, from :func:`harness.grid.slurm.submit`): the task's specs run N at a
    time, N and precision ``auto`` from this device kind's calibration (measured here if this is the first
    task on the kind, under a lock; see :func:`harness.grid.calibrate.resolve_packing`).
    """
    pin_array_task_job_id()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    specs = [spec] if hasattr(spec, "run_id") else list(spec)
    opts = [options] * len(specs) if options is None or isinstance(options, Mapping) else list(options)
    log.info("task %s (restart %s) on %s: %s", os.environ.get("SLURM_JOB_ID", "-"),
             os.environ.get("SLURM_RESTART_COUNT") or 0, os.uname().nodename, ", ".join(s.run_id() for s in specs))
    root = Path(data_root) if data_root else None
    if fuse > 1 and len(specs) > 1:  # one fused group (harness.grid.arrays.array_tasks), as the local executor runs
        # it: it trains in fp32 with its own AdamW, so a calibration's packing has nothing to choose for it
        by_id = {s.run_id(): dict(o or {}) for s, o in zip(specs, opts)}
        outcomes = execute(specs, output, data_root=root, progress=False, options=lambda s: by_id[s.run_id()],
                           fuse=fuse, capture=capture, verbose=progress)
        log.info("%s", summary_line(outcomes))
        _raise_failed(outcomes, output)
        return "ran"
    if packing is not None:
        return _run_calibrated(specs, opts, output, root, packing, progress=progress)
    if len(specs) == 1:
        outcome = run_spec(specs[0], output, data_root=root, progress=progress, options=opts[0])
        log.info("%s: %s after %.1f s", outcome.run_id, outcome.status, outcome.seconds)
        _raise_failed([outcome], output)
        return outcome.status
    by_id = {s.run_id(): dict(o or {}) for s, o in zip(specs, opts)}
    outcomes = execute(specs, output, data_root=root, progress=False, options=lambda s: by_id[s.run_id()],
                       runs_per_gpu=len(specs), verbose=progress)
    log.info("%s", summary_line(outcomes))
    _raise_failed(outcomes, output)
    return "ran"


def _raise_failed(outcomes: Sequence[Outcome], output: str | Path) -> None:
    """A :class:`~harness.store.RunFailed` with one line naming the task's failed runs, their errors and where their
    records and logs are, if any failed (the array task then shows as failed)."""
    failed = [o for o in outcomes if o.status == FAILED]
    if not failed:
        return
    store = RunStore(output)
    shown = "; ".join(f"{o.run_id} ({' '.join(str(o.error or 'failed').split())[:200]})" for o in failed[:5])
    more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
    raise RunFailed(f"{len(failed)} of {len(outcomes)} runs of this task failed: {shown}{more}; records: "
                    f"{store.runs_dir}/<run id>.json, tracebacks and output: {store.log_dir()}/<run id>.log")


def _run_calibrated(specs: Sequence[Spec], opts: Sequence[Mapping[str, Any] | None], output: str | Path,
                    root: Path | None, packing: Mapping[str, Any], *, progress: bool) -> str:
    """An ``auto`` task: calibrate (or reuse this device kind's calibration), then run the specs N at a time."""
    from harness.grid.calibrate import Limits, format_table, resolve_packing

    plan = resolve_packing(specs, output, runs_per_gpu=packing.get("runs_per_gpu", "auto"), data_root=root,
                           limits=Limits(budget_cap_s=packing.get("budget_cap_s")), first=packing.get("first"),
                           samples=packing.get("samples"))
    if plan.calibration is not None:
        log.info("%s", format_table(plan.calibration))
    by_id = {s.run_id(): {**dict(o or {}), **plan.options(s)} for s, o in zip(specs, opts)}
    outcomes = execute(specs, output, data_root=root, progress=False, options=lambda s: by_id[s.run_id()],
                       runs_per_gpu=plan.runs_per_gpu, verbose=progress)
    log.info("%s", summary_line(outcomes))
    _raise_failed(outcomes, output)
    return "ran"


class GridTask(submitit.helpers.Checkpointable):
    """The callable submitit pickles for each array task (importable: ``harness.grid.entry.GridTask``).

    ``checkpoint`` (inherited) resubmits the same call; resuming needs nothing
    more, because every run function resumes from the store's checkpoint dir.
    """

    def __call__(self, spec: Spec | Sequence[Spec], output: str, data_root: str | None = None,
                 options: Any = None, packing: Mapping[str, Any] | None = None, fuse: int = 1,
                 capture: str | None = None) -> str:
        return run_task(spec, output, data_root, options=options, packing=packing, fuse=fuse, capture=capture)

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        specs = args[0] if isinstance(args[0], (list, tuple)) else [args[0]]
        log.warning("preemption or time limit: requeueing %s; they resume from their last checkpoints",
                    ", ".join(s.run_id() for s in specs))
        return submitit.helpers.DelayedSubmission(GridTask(), *args, **kwargs)


def _run_one_isolated(payload: str, output: Path, data_root: Path | None, progress: bool) -> int:
    """``--spec``: the child of an isolated run; its failure is recorded in this attempt, once."""
    from harness.grid.local import default_runner, spec_from_payload

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    spec, options = spec_from_payload(payload)
    try:
        with RunStore(output).run(spec) as run:
            if run.state != "run":
                return 0 if run.state == "done" else 1
            returned = default_runner(spec, output, data_root=data_root, progress=progress, **options)
            if not run.recorded and isinstance(returned, Mapping):
                run.finish(returned)
    except Exception as exc:  # recorded by the lifecycle (error, traceback; the whole traceback in the run's log)
        print(f"run failed: {error_line(exc)}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.grid.entry CONFIG --index N``: run the N-th task of the grid (plain sbatch).

    Like ``vnr``: a bad input (a :class:`~ranking.floor.errors.UserError`, or an ``OSError`` such as an output under a
    file) is one line on stderr and exit 2; a failed run is one line naming the failed runs and where their
    records and logs are, exit 1.
    """
    try:
        return _main(argv)
    except RunFailed as exc:
        print(f"{PROG}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # an output that is a file or cannot be created, a full disk: the path and the words
        print(f"{PROG}: error: {describe_os_error(exc)}", file=sys.stderr)
        return EXIT_USAGE


PROG = "harness.grid.entry"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (exit 2) named like this entry's other errors (as ``vnr``'s)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}\n")


def _index(text: str) -> int:
    """``--index``: a whole number (argparse names the flag when this refuses)."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an array task index (a whole number, 0 or more)")
    return int(text)


def _main(argv: Sequence[str] | None) -> int:
    from harness.flags import add_flags, names, values
    from harness.grid import arrays
    from harness.grid.config import load_experiment, only_patterns, select_specs
    from harness.grid.settings import SlurmSettings
    from ranking.floor.paths import resolve_data_root

    sizing = ("runs_per_gpu", "calibrate")  # what sizes the array (the budget: the config's, as submitted)
    from ranking.floor.schema import validate

    parser = _Parser(prog=f"python -m {PROG}", description=main.__doc__)
    parser.add_argument("config", nargs="?", help="experiment config YAML")
    parser.add_argument("--spec", default=None, help=argparse.SUPPRESS)  # JSON from local.isolated_runner
    parser.add_argument("--index", type=_index, default=None, help="array task index (default: $SLURM_ARRAY_TASK_ID)")
    # --runs-per-gpu, --calibrate / --no-calibrate: the slurm: settings' declarations (as vnr run's); the
    # config's slurm: section is the default. Give --count the same choice.
    add_flags(parser, SlurmSettings, only=sizing, defaults=False)
    parser.add_argument("--output", default=None, help="results directory (default: the config's output)")
    parser.add_argument("--data-root", default=None, help="data root (default: $VNR_DATA_ROOT, else the public source)")
    parser.add_argument("--only", action="append", default=None,
                        help="run ids, models, tasks or kinds (globs), as `vnr run --only`; with --array-file, the array's")
    parser.add_argument("--count", action="store_true", help="print the number of array tasks and exit")
    parser.add_argument("--progress", action="store_true", help="progress bars in the task log")
    parser.add_argument("--array-file", default=None,
                        help="what `vnr run CONFIG --sbatch-args` sized the array for (slurm/grid-array.sbatch passes "
                        "$VNR_ARRAY_FILE): its --only patterns, runs per task and run ids; flags that say otherwise "
                        "are refused")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error, already printed in one line (2)
        return int(exc.code or 0)
    if args.spec is not None:  # one spec in a fresh process for the local executor (which holds its lock)
        if args.output is None:
            raise UserError("--spec needs --output")
        return _run_one_isolated(args.spec, Path(args.output), Path(args.data_root) if args.data_root else None,
                                 args.progress)
    if args.config is None:
        raise UserError("give CONFIG (or --spec)")
    given = values(args, SlurmSettings, only=sizing)
    flags = validate(SlurmSettings, given, names=names(SlurmSettings))  # checked before the config is read
    exp = load_experiment(args.config, output=args.output)
    settings = exp.slurm.updated(**{key: getattr(flags, key) for key in given})
    calibrate_runs = True  # the flag, if given, is in settings.calibrate
    per_task = arrays.runs_per_task(settings, calibrate_runs=calibrate_runs)
    if args.array_file:  # the array's own plan decides; a script line that says otherwise is refused
        plan = arrays.read_array_file(args.array_file)
        if args.only is not None and only_patterns(args.only) != plan.only:
            raise UserError(f"this array was sized for --only {','.join(plan.only) or '(none)'} ({args.array_file}); "
                            f"the script line says --only {','.join(only_patterns(args.only))}: give both the "
                            "same, or leave it off the script line")
        if (given.get("runs_per_gpu") is not None or given.get("calibrate") is False) and per_task != plan.runs_per_gpu:
            raise UserError(f"this array was sized for {plan.runs_per_gpu} runs per task ({args.array_file}); "
                            f"the script line says {per_task}: give --sbatch-args the flag, not the script line")
        per_task, calibrate_runs = plan.runs_per_gpu, plan.calibrate
        settings = exp.slurm.updated(runs_per_gpu=per_task, gpus=plan.gpus)
        specs = arrays.planned_specs(plan, select_specs(exp.specs, plan.only), args.array_file)
        fuse, capture = plan.fuse, ("the capture setting" if plan.capture else None)
    else:
        specs = select_specs(exp.specs, args.only)
        fusing = arrays.slurm_fusing(settings)
        fuse, capture = fusing.get("fuse", 1), fusing.get("capture")
    tasks = arrays.array_tasks(specs, per_task, fuse)
    size = len(tasks)
    if args.count:
        print(size)
        return 0
    index = args.index
    if index is None:
        index = _task_index()
    if not 0 <= index < size:
        raise UserError(f"index {index} is outside the grid (0..{size - 1}): submit --array=0-{size - 1}")
    data_root = resolve_data_root(args.data_root)
    store = RunStore(exp.output)
    store.ensure_writable()  # an output that is a file, lies under one or cannot be created: one line, nothing run
    mine = tasks[index]
    if all(store.is_done(s) for s in mine):  # a resubmitted array: nothing to run, nothing to calibrate
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        log.info("task %d: its %d runs are done", index, len(mine))
        return 0
    # what vnr run --executor slurm gives its tasks; the array is for the runs not done
    packing = arrays.task_packing(per_task, arrays.calibration_payload(
        settings, specs, [s for s in specs if not store.is_done(s)], calibrate_runs=calibrate_runs))
    status = run_task(mine, exp.output, data_root, progress=args.progress,
                      options=[exp.options_for(s) for s in mine], packing=packing, fuse=fuse, capture=capture)
    return 0 if status != FAILED else 1


def _task_index() -> int:
    """This SLURM array task's index (``$SLURM_ARRAY_TASK_ID``), or a :class:`UserError` saying what is wrong."""
    text = os.environ.get("SLURM_ARRAY_TASK_ID")
    if text is None:
        raise UserError("give --index N or run inside a SLURM array task (SLURM_ARRAY_TASK_ID)")
    if not text.strip().isdigit():
        raise UserError(f"SLURM_ARRAY_TASK_ID is {text!r}, not an array task index (a whole number): "
                        "give --index N")
    return int(text)


if __name__ == "__main__":
    sys.exit(main())
