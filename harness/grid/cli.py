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

from harness.flags import add_flags, flag, names, values
from harness.grid.settings import PACKING_FIELDS, DecideSettings, LocalSettings, SlurmSettings
from harness.kinds import KINDS

log = logging.getLogger("harness.grid")

ONLY_HELP = (
    "only the runs matching this glob: a run id, model, task or bias dataset, model/task, or the kind "
    f"({', '.join(KINDS)}); repeat or comma-separate for several (e.g. --only 'tiny:bert/*' --only rte)"
)


CONFIG_HELP = "experiment config (YAML), e.g. configs/experiments/smoke.yaml"
OUTPUT_HELP = "results directory (default: the config's output:)"


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run",
        help="run an experiment grid (local or SLURM), skipping finished runs",
        description="Expand an experiment config into run specs, skip the finished ones, run the rest. "
        "Failed runs are retried; a changed hyper-parameter gets a new run id. Every hyper-parameter and "
        "SLURM value is checked before anything runs (--dry-run shows what would run).",
    )
    run.add_argument("config", help=CONFIG_HELP)
    run.add_argument("--executor", choices=("local", "slurm"), default="local",
                     help="local: on this machine (default); slurm: one job array via submitit")
    run.add_argument("--data-root", default=None, help="data root (default: $VNR_DATA_ROOT, else the public source)")
    run.add_argument("--output", default=None, help=OUTPUT_HELP)
    run.add_argument("--only", action="append", default=None, metavar="PATTERN", help=ONLY_HELP)
    mode = run.add_mutually_exclusive_group()  # each prints something and stops: one at a time
    mode.add_argument("--dry-run", action="store_true",
                      help="check everything, print what would run (slurm: the sbatch script it would submit) and stop")
    mode.add_argument("--list", action="store_true", help="print every spec with its array index, run id and state")
    mode.add_argument("--count", action="store_true", help="print the number of specs (the lines --list prints)")
    mode.add_argument("--sbatch-args", action="store_true",
                     help="print the sbatch options for slurm/grid-array.sbatch from the config's slurm: section "
                     "and the flags below, one per line (array size: one task per runs_per_gpu group, 16 specs for "
                     "auto; resources, --output=<output>/logs/sbatch/...), "
                     "creating that log folder: sbatch $(vnr run CONFIG --sbatch-args) slurm/grid-array.sbatch CONFIG")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.add_argument("--isolate", action="store_true",
                     help="local executor: run each spec in a fresh Python process, so a crash (segfault, lost CUDA "
                     "context, OOM kill) fails only that run (recommended for long grids on a GPU)")
    # --runs-per-gpu, --calibrate / --no-calibrate, --calibration-budget-s: both executors' packing settings,
    # from their declarations (the same for local: and slurm:)
    add_flags(run, LocalSettings, only=PACKING_FIELDS, defaults=False)
    local = run.add_argument_group("local executor (override the config's local: section; checked like it)")
    add_flags(local, LocalSettings, only=LOCAL_FIELDS, defaults=False)
    slurm = run.add_argument_group("SLURM (override the config's slurm: section; checked like it)")
    add_flags(slurm, SlurmSettings, only=SLURM_FIELDS, defaults=False)  # from their declarations, as the config's
    decide = run.add_argument_group(
        "decide first (override the config's decide: section; checked like it): run in waves, stop when the "
        "scenario's decision is settled (harness/README.md, 'Decide first')")
    add_flags(decide, DecideSettings, defaults=False)
    slurm.add_argument("--wait", action="store_true",
                       help="after submitting, show a live status line (done/running/queued/failed) until the "
                       "array has left the queue; exit 1 if a run failed")
    run.set_defaults(func=run_command)

    status = subparsers.add_parser(
        "status", help="done / running / queued / failed / missing per run and in total",
        description="State of every run of a grid, from the run store (and squeue where present).",
    )
    status.add_argument("config", help=CONFIG_HELP)
    status.add_argument("--output", default=None, help=OUTPUT_HELP)
    status.add_argument("--only", action="append", default=None, metavar="PATTERN", help=ONLY_HELP)
    status.add_argument("--state", choices=("done", "running", "queued", "failed", "missing"), action="append",
                        default=None, help="list only runs in this state (repeatable)")
    status.add_argument("--summary", action="store_true", help="only the totals line")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--wide", action="store_true",
                        help="print the table in full: no 120-column fit, no shortened or cut cells")
    status.set_defaults(func=status_command)

    collect = subparsers.add_parser(
        "collect", help="write <output>/matrix.csv and criteria.yaml (what vnr rank reads)",
        description="Collect the grid's results into a models × criteria matrix with a criteria sidecar "
        "(performance averaged over seeds, efficiency per task, fairness from the bias runs).",
    )
    collect.add_argument("config", help=CONFIG_HELP)
    collect.add_argument("--output", default=None, help=OUTPUT_HELP)
    collect.add_argument("--epoch", choices=("final", "best"), default="final",
                         help="performance from the final epoch (default) or each metric's best epoch")
    collect.add_argument("--allow-missing", action="store_true",
                         help="collect even if runs are missing, failed or have unusable records; their cells "
                         "stay empty, and so does every mean over seeds that lacks one of its seeds")
    collect.add_argument("--allow-mixed-packing", action="store_true",
                         help="let one efficiency criterion mix runs measured at different packing levels "
                         "(runs per GPU); criteria.yaml then says so")
    collect.add_argument("--criteria", action="append", default=[], metavar="+NAME",
                         help="add an opt-in efficiency criterion per task (repeatable): +tokens_per_s "
                         "(training throughput in real tokens/s, higher is better; off by default)")
    collect.set_defaults(func=collect_command)


def _load(args: argparse.Namespace):
    from harness.grid.config import load_experiment, select_specs
    from ranking.floor.paths import check_output_dir

    exp = load_experiment(args.config, output=args.output)
    check_output_dir(exp.output, "output")  # a file there, or under a file: one line, before any work
    return exp, select_specs(exp.specs, getattr(args, "only", None))


def slurm_settings(exp, args: argparse.Namespace, *, packing: bool = True):
    """The config's ``slurm:`` section with the CLI flags over it, the flags checked by the same declaration
    (:class:`~harness.grid.config.SlurmSettings`) as the config's keys, each refusal naming its flag.
    ``packing`` False: without the packing flags (a local run: they are the ``local:`` settings')."""
    from dataclasses import replace

    from harness.grid.config import SlurmSettings
    from ranking.floor.errors import UserError
    from ranking.floor.schema import validate

    given = values(args, SlurmSettings, only=(*SLURM_FIELDS, *(PACKING_FIELDS if packing else ())))
    if args.additional:
        extra = {}
        for item in args.additional:
            key, sep, value = str(item).partition("=")
            if sep and not value:
                raise UserError(f"--sbatch-opt {item!r}: give KEY=VALUE, or KEY alone for a flag")
            extra[key] = value if sep else True
        given["additional"] = extra
    checked = validate(SlurmSettings, given, names=names(SlurmSettings))
    changes = {key: getattr(checked, key) for key in given}
    if "setup" in changes:
        changes["setup"] = (*exp.slurm.setup, *changes["setup"])
    if "additional" in changes:
        changes["additional"] = {**exp.slurm.additional, **changes["additional"]}
    return replace(exp.slurm, **changes)


def local_settings(exp, args: argparse.Namespace):
    """The config's ``local:`` section with the packing flags over it (``--runs-per-gpu``, ``--calibrate`` /
    ``--no-calibrate``), checked by the same declaration (:class:`~harness.grid.config.LocalSettings`) as the
    config's keys, each refusal naming its flag."""
    from dataclasses import replace

    from ranking.floor.schema import validate

    given = values(args, LocalSettings, only=(*PACKING_FIELDS, *LOCAL_FIELDS))
    checked = validate(LocalSettings, given, names=names(LocalSettings))
    return replace(exp.local, **{key: getattr(checked, key) for key in given})


# the SLURM flags besides --wait: they size or configure a SLURM array (--executor slurm or --sbatch-args)
SLURM_FIELDS = ("partition", "time_min", "gpus", "cpus", "mem_gb", "array_parallelism", "account", "qos", "constraint",
                "job_name", "max_timeouts", "signal_delay_s", "setup", "additional")
# the local executor's flags besides the packing ones (--local-gpus)
LOCAL_FIELDS = ("gpus",)


def check_flag_combinations(args: argparse.Namespace) -> None:
    """Flags that contradict each other are refused, not silently ignored (--dry-run, --list, --count and
    --sbatch-args already exclude each other in the parser)."""
    from ranking.floor.errors import UserError

    slurm = args.executor == "slurm" or args.sbatch_args
    given = next((flag(SlurmSettings, name) for name in SLURM_FIELDS if getattr(args, name, None) is not None), None)
    if given and not slurm:
        raise UserError(f"{given} applies to --executor slurm (or --sbatch-args): add --executor slurm, or leave "
                        f"{given} out for a local run")
    if args.wait:
        mode = next((f for f in ("--dry-run", "--list", "--count", "--sbatch-args")
                     if getattr(args, f[2:].replace("-", "_"))), None)
        if args.executor != "slurm":
            raise UserError("--wait follows a submitted SLURM array: add --executor slurm (a local run already "
                            "waits), or leave --wait out")
        if mode:
            raise UserError(f"--wait follows a submitted array, and {mode} submits nothing: leave one of them out")
    local = next((flag(LocalSettings, name) for name in LOCAL_FIELDS
                  if values(args, LocalSettings, only=(name,))), None)
    if local and slurm:
        raise UserError(f"{local} applies to the local executor: leave it out with "
                        f"{'--executor slurm' if args.executor == 'slurm' else '--sbatch-args'}")
    if args.isolate and slurm:
        raise UserError(f"--isolate applies to the local executor (each SLURM array task is already its own "
                        f"process): leave it out with {'--executor slurm' if args.executor == 'slurm' else '--sbatch-args'}")


def decide_settings(exp, args: argparse.Namespace):
    """The config's ``decide:`` with the decide flags over it (:class:`~harness.grid.settings.DecideSettings`, each
    refusal naming its flag); None when neither names a scenario."""
    from harness.grid.decide import settings_of

    return settings_of(exp, values(args, DecideSettings), names=names(DecideSettings))


def decide_command(args: argparse.Namespace, exp, specs, settings, decide) -> int:
    """``vnr run --decide``: the grid in waves (:mod:`harness.grid.decide`), local or SLURM."""
    from harness.grid.decide import Decider, WaveFailed, run_local, run_slurm
    from harness.grid.status import grid_status
    from ranking.floor.errors import UserError
    from ranking.floor.paths import resolve_data_root

    if args.only:
        raise UserError("--only selects part of the grid, and --decide decides on the whole grid: leave one out")
    if args.sbatch_args or args.wait:
        what = "--sbatch-args" if args.sbatch_args else "--wait"
        raise UserError(f"{what} sizes or follows one array; --decide submits one array per wave and waits for each "
                        f"itself: leave {what} out")
    decider = Decider(exp, decide)  # the scenario and its column are checked before anything runs
    if args.list:
        for i, st in enumerate(grid_status(exp, specs)):
            print(f"{i}\t{st.run_id}\t{st.state}")
        return 0
    data_root = resolve_data_root(args.data_root)
    first = decider.cells.first_wave(decide.first_seeds)
    if args.dry_run:
        print(decider.plan_text())
        from harness.store import RunStore

        store = RunStore(exp.output)
        todo = [s for s in first if not store.is_done(s)]
        print(f"wave 1: {len(todo)} to run, {len(first) - len(todo)} done (dry run: nothing ran)")
        print(spec_counts(todo, indent=""))
        if args.executor == "slurm":
            from harness.grid import arrays, slurm

            per_task = arrays.runs_per_task(settings)
            n_tasks = len(arrays.array_tasks(todo, per_task, arrays.fused_k(settings.fuse)))
            print(f"# wave 1 as one array of {n_tasks} tasks; the driver (this command, without --dry-run) waits "
                  "for it, looks, and submits the next wave's array")
            print(slurm.sbatch_script(settings, exp.output, max(n_tasks, 1), name=exp.name))
        return 0
    from harness.prefetch import check_available

    check_available(exp, specs=specs, data_root=data_root, config=args.config)
    try:
        if args.executor == "local":
            from harness.grid.calibrate import format_table, local_packing
            from harness.grid.local import execute
            from harness.store import RunStore

            RunStore(exp.output).ensure_writable()
            store = RunStore(exp.output)
            plan, packing = local_packing(exp, specs, [s for s in specs if not store.is_done(s)], data_root=data_root)
            if plan.calibration is not None:
                print(format_table(plan.calibration))

            def execute_wave(wave):
                return execute(wave, exp.output, data_root=data_root, progress=not args.no_progress,
                               options=lambda s: {**exp.options_for(s), **plan.options(s)}, isolate=args.isolate,
                               **packing)

            run_local(exp, decide, execute_wave=execute_wave)
            return 0
        from harness.grid import arrays, slurm

        slurm.log_folder(exp.output)
        import shutil

        if shutil.which("sbatch") is None or shutil.which("srun") is None:  # before any state is written
            raise UserError("--executor slurm: sbatch/srun not found on this machine: run on a SLURM login node "
                            "(or start a local one with slurm/start-local-cluster.sh)")
        per_task = arrays.runs_per_task(settings)
        fusing = arrays.slurm_fusing(settings)

        def submit(todo):
            packing: dict = {"runs_per_gpu": per_task} if per_task != 1 else {}
            calibration = arrays.calibration_payload(settings, specs, todo)
            if calibration is not None:
                packing["calibration"] = calibration
            array_id = slurm.submit(todo, exp.output, settings, name=exp.name, data_root=data_root,
                                    options=exp.options_for, **packing, **fusing)
            print(f"submitted array {array_id} with {len(todo)} runs; logs in {Path(exp.output) / 'logs' / 'slurm'}")
            return array_id

        def wait(array_id, pending):
            import time

            if array_id is not None:
                slurm.wait_for_array(array_id)
            while any(st.state in ("running", "queued") for st in grid_status(exp, pending)):
                time.sleep(5.0)  # runs of an earlier driver's array, still in the queue

        run_slurm(exp, decide, submit=submit, wait=wait)
        return 0
    except WaveFailed as exc:
        print(f"decide: {exc}; see `{follow_up('status', args)}`", file=sys.stderr)
        return 1


def run_command(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from harness.grid.status import grid_status
    from harness.store import RunStore
    from ranking.floor.paths import resolve_data_root

    check_flag_combinations(args)
    exp, specs = _load(args)
    # every flag is checked before anything is printed or run, whatever the executor; the packing flags (given to
    # both) first against the settings of the executor in use, whose combined checks then speak (slurm.fuse ...)
    if args.executor == "slurm" or args.sbatch_args:
        settings = slurm_settings(exp, args)
        exp = replace(exp, local=local_settings(exp, args))
    else:
        exp = replace(exp, local=local_settings(exp, args))
        settings = slurm_settings(exp, args, packing=False)  # the config's slurm: (a local run packs by local:)
    decide = decide_settings(exp, args)
    if args.count:
        print(len(specs))
        return 0
    if decide is not None:
        return decide_command(args, exp, specs, settings, decide)
    if args.sbatch_args:
        print("\n".join(sbatch_args(settings, exp, specs, only=args.only, calibrate_runs=settings.calibrate)))
        return 0
    if args.list:
        for i, st in enumerate(grid_status(exp, specs)):
            print(f"{i}\t{st.run_id}\t{st.state}")
        return 0
    data_root = resolve_data_root(args.data_root)
    if not args.dry_run:
        from harness.prefetch import check_available

        check_available(exp, specs=specs, data_root=data_root, config=args.config)  # offline: all on disk?
    store = RunStore(exp.output)
    done = [s for s in specs if store.is_done(s)]
    pending = [s for s in specs if not store.is_done(s)]
    log.info("%s: %d runs in the grid%s, %d done, %d to run; results in %s", exp.source, len(exp.specs),
             f" ({len(specs)} selected by --only)" if args.only else "", len(done), len(pending), exp.output)

    if args.executor == "local":
        if args.dry_run:
            print(f"{len(pending)} to run, {len(done)} done (dry run: nothing ran)")
            print(spec_counts(pending, indent=""))
            print(f"every run id with its state: {follow_up('run', args, '--list')}")
            return 0
        from harness.grid.calibrate import format_table, local_packing
        from harness.grid.local import FAILED, execute, summary_line

        store.ensure_writable()  # a read-only or full output: one line now, not one failure per run

        plan, packing = local_packing(exp, specs, pending, data_root=data_root)  # exp.local: the flags over local:
        if plan.calibration is not None:
            print(format_table(plan.calibration))
        elif exp.local.runs_per_gpu == "auto":
            print(f"runs_per_gpu auto: {plan.runs_per_gpu} ({plan.reason})")
        outcomes = execute(
            specs, exp.output, data_root=data_root, progress=not args.no_progress,
            options=lambda s: {**exp.options_for(s), **plan.options(s)}, isolate=args.isolate, **packing,
        )
        failed = [o for o in outcomes if o.status == FAILED]
        for o in failed:
            log.error("failed %s: %s", o.run_id, o.error)
        print(summary_line(outcomes) + (f"; results in {exp.output}" if outcomes else ""))
        if failed:
            print(f"{len(failed)} runs failed: see `{follow_up('status', args)}`; `vnr run` again retries them",
                  file=sys.stderr)
        return 1 if failed else 0

    # slurm
    from harness.grid import arrays, slurm

    slurm.log_folder(exp.output)  # SLURM must be able to log there: checked before anything is submitted
    statuses = {s.run_id: s.state for s in grid_status(exp, pending)}
    busy = [s for s in pending if statuses.get(s.run_id()) in ("running", "queued")]
    todo = [s for s in pending if statuses.get(s.run_id()) not in ("running", "queued")]
    if busy:
        log.info("%d runs are already running or queued: not submitted again", len(busy))
    per_task = arrays.runs_per_task(settings)  # settings: the packing flags over slurm:
    fusing = arrays.slurm_fusing(settings)
    if args.dry_run:
        n_tasks = len(arrays.array_tasks(todo, per_task, fusing.get("fuse", 1)))
        print(f"# {n_tasks} array tasks ({len(done)} done, {len(busy)} running or queued); "
              + (f"each task trains one fused group of up to {fusing['fuse']} of these {len(todo)} runs (the seeds of "
                 f"a cell as one stacked model{', its step captured' if fusing.get('capture') else ''}):"
                 if fusing else f"one task per run, {len(todo)} runs:" if per_task == 1 else
                 f"each task runs {per_task} of these {len(todo)} runs side by side on its GPU (runs_per_gpu):"
                 if per_task != "auto" else
                 f"each task takes {arrays.group_size(per_task)} of these {len(todo)} runs and runs them N at a "
                 "time, N and precision auto from the calibration of its device kind (the first task there calibrates):"))
        print(spec_counts(todo, indent="#   "))
        print(f"#   every run id with its state: {follow_up('run', args, '--list')}")
        print(slurm.sbatch_script(settings, exp.output, max(n_tasks, 1), name=exp.name))
        return 0
    if not todo:
        print(f"nothing to submit: {len(done)} done, {len(busy)} running or queued")
        return 0
    packing: dict = {"runs_per_gpu": per_task} if per_task != 1 else {}
    calibration = arrays.calibration_payload(settings, specs, todo)
    if calibration is not None:
        packing["calibration"] = calibration
    array_id = slurm.submit(todo, exp.output, settings, name=exp.name, data_root=data_root, options=exp.options_for,
                            **packing, **fusing)
    n_tasks = len(arrays.array_tasks(todo, per_task, fusing.get("fuse", 1)))
    what = f"array {array_id} with {n_tasks} tasks" if n_tasks > 1 else f"job {array_id} (one task)"
    print(f"submitted {what}; logs in {Path(exp.output) / 'logs' / 'slurm'}; "
          f"follow with `{follow_up('status', args)}`")
    if args.wait:
        from harness.grid.status import totals_line

        line = LiveLine(sys.stderr)
        slurm.wait_for_array(array_id, on_poll=lambda: line.show(
            "waiting: " + totals_line(grid_status(exp, todo))))
        line.close()
        statuses = grid_status(exp, todo)
        print(totals_line(statuses))
        return 0 if all(s.state == "done" for s in statuses) else 1
    return 0


class LiveLine:
    """One status line, rewritten in place on a terminal; elsewhere (a log file) printed only when it changes."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last = ""

    def show(self, text: str) -> None:
        if text == self.last and not self.tty:
            return
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.last = text

    def close(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()


def follow_up(command: str, args: argparse.Namespace, *extra: str) -> str:
    """The ``vnr COMMAND`` line that continues from ``args``: the same config, ``--output`` and ``--only``.

    >>> follow_up("status", argparse.Namespace(config="c.yaml", output="out dir", only=["bias"]))
    "vnr status c.yaml --output 'out dir' --only bias"
    """
    import shlex

    words = ["vnr", command, args.config]
    if getattr(args, "output", None):
        words += ["--output", str(args.output)]
    for pattern in getattr(args, "only", None) or ():
        words += ["--only", pattern]
    return shlex.join([*words, *extra])


def spec_counts(specs, *, indent: str) -> str:
    """How many runs per kind, model and task or bias set, one line each (what ``--dry-run`` prints).

    >>> from harness.specs import BiasSpec, FinetuneSpec
    >>> print(spec_counts([FinetuneSpec("tiny:bert", "rte", seed=0), FinetuneSpec("tiny:bert", "rte", seed=1),
    ...                    BiasSpec("tiny:gpt2", "crows_pairs")], indent="# "))
    # kinds: finetune 2, bias 1
    # models: tiny:bert 2, tiny:gpt2 1
    # tasks and bias sets: rte 2, crows_pairs 1
    """
    from collections import Counter

    from harness.kinds import kind_of

    def line(label: str, counts: Counter) -> str:
        return f"{indent}{label}: " + (", ".join(f"{k} {n}" for k, n in counts.items()) or "none")

    return "\n".join([
        line("kinds", Counter(s.kind for s in specs)),
        line("models", Counter(s.model for s in specs)),
        line("tasks and bias sets", Counter(kind_of(s).target_of(s) for s in specs)),  # each kind's target
    ])


def sbatch_args(settings, exp, specs, *, only=None, calibrate_runs: bool = True) -> list[str]:
    """sbatch options for ``slurm/grid-array.sbatch``: the array size, resources from the settings.

    One array task per group of :func:`harness.grid.arrays.group_size` specs (``runs_per_gpu``: N, or 16
    for ``auto``, what :func:`harness.grid.arrays.runs_per_task` makes of the settings and
    ``calibrate_runs``). What the array was sized for (the ``--only`` patterns, the runs per task, whether
    to calibrate, and the run ids in order) goes to ``<output>/logs/sbatch/array-<digest>.json``
    (:func:`harness.grid.arrays.write_array_file`), which every task reads (``VNR_ARRAY_FILE``): a task
    runs exactly its group of those runs, and refuses a script line or a grid that says otherwise.
    Creates ``<output>/logs/sbatch/`` (SLURM does not create log folders) and, where the settings have
    ``setup`` lines, ``<output>/logs/sbatch/setup.sh``, which the script sources before the task
    (``VNR_SETUP_FILE``); both through one ``--export`` (after the config's own ``export`` value, if any;
    else ``ALL``).
    """
    from harness.grid import arrays, slurm
    from harness.store import atomic_write_bytes
    from ranking.floor.errors import UserError

    output = slurm.check_log_path(Path(exp.output).resolve())
    logs = output / "logs" / "sbatch"
    if "," in str(logs):
        raise UserError(f"--sbatch-args: {logs} has a comma, which sbatch --export cannot pass")
    glob = sorted({c for c in str(logs) if c in "*?["})
    if glob:  # printed for `sbatch $(vnr run CONFIG --sbatch-args) ...`: the shell globs what $(...) gives, and
        # quotes in it are not removed (a quoted path would reach sbatch with its quotes), so refuse instead
        import shlex

        raise UserError(f"--sbatch-args: the log folder {shlex.quote(str(logs))} has {' '.join(glob)}, which the "
                        "shell expands as a file pattern in sbatch $(vnr run CONFIG --sbatch-args): give the grid an "
                        "output folder without * ? [ (--output DIR or output: in the config)")
    params = slurm.sbatch_parameters(settings, name=exp.name)
    per_task = arrays.runs_per_task(settings, calibrate_runs=calibrate_runs)
    fusing = arrays.slurm_fusing(settings)
    tasks = max(len(arrays.array_tasks(specs, per_task, fusing.get("fuse", 1))), 1)
    lines = [f"--array=0-{tasks - 1}%{min(tasks, settings.array_parallelism)}",
             f"--job-name={params['job_name']}", f"--time={params['time']}",
             f"--cpus-per-task={params['cpus_per_task']}", f"--mem={params['mem']}"]
    if settings.gpus:
        lines.append(f"--gres=gpu:{settings.gpus}")
    for key in ("partition", "account", "qos", "constraint"):
        if params.get(key):
            lines.append(f"--{key}={params[key]}")
    export = "ALL"
    for key, value in params["additional_parameters"].items():
        if key == "export":
            export = str(value)
        elif key != "requeue":
            lines.append(f"--{key}" if value is True else f"--{key}={value}")
    slurm.check_no_file_patterns(lines)  # before anything is written (the log folder's own check is above)
    lines.append(f"--output={logs}/%A_%a.out")
    logs.mkdir(parents=True, exist_ok=True)
    exports = []
    if settings.setup:
        setup = logs / "setup.sh"
        text = "# setup lines from the config (vnr run --sbatch-args)\n" + "\n".join(settings.setup) + "\n"
        atomic_write_bytes(setup, text.encode())
        exports.append(f"VNR_SETUP_FILE={setup}")
    array = arrays.write_array_file(logs, specs, only=only, runs_per_gpu=per_task, calibrate=calibrate_runs,
                                    gpus=settings.gpus, fuse=fusing.get("fuse", 1),
                                    capture=fusing.get("capture") is not None)
    exports.append(f"VNR_ARRAY_FILE={array}")
    lines.append("--export=" + ",".join([export, *exports]))
    return lines


def status_command(args: argparse.Namespace) -> int:
    from harness.grid.status import format_table, grid_status, totals, totals_line

    exp, specs = _load(args)  # the run store and the config only: no model cache, no hub (as run --list)
    statuses = grid_status(exp, specs)
    shown = [s for s in statuses if args.state is None or s.state in args.state]
    if args.json:
        print(json.dumps({"output": str(exp.output), "totals": totals(statuses), "runs": [s.row() for s in shown]},
                         indent=2, default=str))
        return 0
    if not args.summary and shown:
        print(format_table(shown, wide=args.wide))
    print(totals_line(statuses))
    from harness.grid.decide import status_lines

    for line in status_lines(exp):
        print(line)
    _note_not_on_disk(statuses, specs, args.config)
    return 0


def _note_not_on_disk(statuses: list, specs: list, config: str) -> None:
    """One note (stderr) naming what the runs still to do need and the disk lacks (read from disk only, no
    hub probe): status itself needs none of it, `vnr run` will (offline: after `vnr prefetch`)."""
    from harness.prefetch import missing
    from ranking.floor.errors import UserError
    from ranking.floor.paths import resolve_data_root

    todo = {s.run_id for s in statuses if s.state != "done"}
    try:
        gone = missing([s for s in specs if s.run_id() in todo], resolve_data_root(None)) if todo else []
    except (OSError, ValueError, UserError):  # a note never turns a status into an error
        return
    if gone:
        shown = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
        print(f"note: not on disk yet (needed by the runs to do): {shown}; `vnr run` downloads them, or run "
              f"`vnr prefetch {config}` on a machine with internet for offline nodes", file=sys.stderr)


def collect_command(args: argparse.Namespace) -> int:
    from harness.grid.collect import collect, describe
    from ranking.floor.errors import UserError

    exp, _ = _load(args)
    extra = []
    for item in args.criteria:
        if not item.startswith("+"):
            raise UserError(f"--criteria {item}: name an opt-in criterion to add with a leading +, e.g. "
                            "--criteria +tokens_per_s")
        extra.append(item[1:])
    result = collect(exp, epoch=args.epoch, allow_missing=args.allow_missing,
                     allow_mixed_packing=args.allow_mixed_packing, extra_criteria=extra)
    print(describe(result))
    return 0
