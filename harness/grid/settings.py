"""SLURM and local-executor settings: declared dataclasses (a config's ``slurm:`` and ``local:`` sections,
``vnr run``'s flags), with SLURM's syntax checked as field checks, so nothing a shell or sbatch would read
otherwise reaches the sbatch script.

>>> SlurmSettings(partition="gpu", time_min="04:00:00").time_min
240
>>> LocalSettings(runs_per_gpu=10**11)
Traceback (most recent call last):
...
ranking.floor.errors.UserError: local.runs_per_gpu: 100000000000 is above 64
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from harness.flags import Cli
from ranking.floor.errors import UserError
from ranking.floor.schema import (
    Before,
    Check,
    Count,
    Flag,
    Help,
    Number,
    OneLine,
    PositiveFloat,
    Refusal,
    Shown,
    Text,
    check_fields,
    one_line,
    show,
)

# Runs side by side on one GPU, each its own process with its own CUDA context (0.3-0.5 GB each before any
# model): 64 already spends 20-30 GB of GPU memory on contexts, and the executor starts a worker slot per run,
# so a larger number (``--runs-per-gpu 1e11``) is a typo, refused instead of allocating slots until memory
# runs out. Issue 15 measured packing up to 8 per H100.
MAX_RUNS_PER_GPU = 64
MAX_TIME_MIN = 366 * 24 * 60  # a SLURM time limit beyond a year is a typo
# GPUs of one machine (local.gpus, --local-gpus) or of one array task (slurm.gpus): nodes hold 8 to 16; a larger
# count (--local-gpus 100000) is a typo, refused at entry instead of building a hundred thousand worker slots.
MAX_GPUS = 256

# What SLURM accepts, per field that reaches the sbatch script (checked at load and for every CLI flag).
_NAME = r"[A-Za-z0-9_.+][A-Za-z0-9_.+-]{0,99}"  # job names and the grid's name: no spaces, quotes or shell syntax
_SLURM_NAME = {
    "name": _NAME,
    "job_name": _NAME,
    "partition": r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*",  # one partition or a comma-separated list
    "account": r"[A-Za-z0-9_.-]+",
    "qos": r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*",
    "constraint": r"[A-Za-z0-9_.\-&|,*\[\]():!]+",  # features joined by & | , with counts [a*2&b]
}
# Option values on a #SBATCH line: one token, nothing sbatch or the shell would split or read as a comment.
_SBATCH_VALUE = r"[^\s'\"\\#`$;]+"
# sbatch's long options (``man sbatch``) that ``additional:`` / ``--sbatch-opt`` may set.
SBATCH_OPTIONS = frozenset("""
    account acctg-freq batch bb bbf begin chdir cluster-constraint clusters comment constraint container
    contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency
    distribution exclude exclusive export export-file extra-node-info get-user-env gpu-bind gpu-freq gpus
    gpus-per-node gpus-per-socket gpus-per-task gres gres-flags hint hold ignore-pbs kill-on-invalid-dep
    licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nice no-kill
    nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket
    overcommit oversubscribe partition power prefer priority profile propagate qos reboot reservation
    sockets-per-node spread-job switches thread-spec threads-per-core time time-min tmp tres-per-task
    use-min-nodes verbose wait-all-nodes wckey
""".split())
# Set by vnr itself (array size, log files, requeue on USR2): changing them would break the grid's bookkeeping.
SBATCH_RESERVED = frozenset({"array", "output", "error", "input", "open-mode", "wrap", "signal", "requeue",
                             "no-requeue", "job-name", "parsable", "wait", "test-only"})


# ---------------------------------------------------------------------------- SLURM's syntax
def slurm_name(key: str) -> Any:
    """The check of a SLURM name field (``partition``, ``account``, ``job_name``, ...): SLURM's character set."""
    def check(text: str) -> str:
        if not re.fullmatch(_SLURM_NAME[key], text):
            what = "a name" if key in ("name", "job_name") else f"a SLURM {key.replace('_', ' ')}"
            raise ValueError(f"{text!r} is not {what} SLURM accepts (letters, digits, '_', '.', '-'"
                             f"{'; a comma-separated list' if key in ('partition', 'qos') else ''})")
        return text

    return check


def sbatch_option(key: Any, value: Any) -> tuple[str, Any]:
    """An extra ``#SBATCH --key=value`` (``additional:`` / ``--sbatch-opt``): a known long option, one token.

    ``true`` gives a bare flag (``exclusive: true`` → ``#SBATCH --exclusive``). A refusal names the option
    (``slurm.additional.mail-type: ...``).

    >>> sbatch_option("mail_type", "END,FAIL")
    ('mail-type', 'END,FAIL')
    """
    try:
        name = one_line(str(key)).strip().lstrip("-").replace("_", "-")
    except ValueError as exc:
        raise Refusal(f"option: {exc}") from None
    if name in SBATCH_RESERVED:
        raise Refusal(f"--{name} is set by vnr itself (use the slurm: keys: partition, time, ...)", at=(name,))
    if name not in SBATCH_OPTIONS:
        raise Refusal(f"{str(key)!r} is not an sbatch long option vnr knows (e.g. mail-type, gres, "
                      "reservation, exclusive; see man sbatch)", at=(name,))
    if value is True:
        return name, True
    if isinstance(value, bool) or value is None:
        raise Refusal("give a value, or true for a flag without one", at=(name,))
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        raise Refusal(f"{value} is not a finite number", at=(name,))
    try:
        text = one_line(str(value))
    except ValueError as exc:
        raise Refusal(str(exc), at=(name,)) from None
    if not re.fullmatch(_SBATCH_VALUE, text):
        raise Refusal(f"{text!r} must be one word on an #SBATCH line (no spaces, quotes, '#', '$', "
                      "'`', ';' or backslashes)", at=(name,))
    return name, text


def sbatch_options(options: Mapping[Any, Any]) -> dict[str, Any]:
    """Every ``additional:`` option through :func:`sbatch_option`."""
    return dict(sbatch_option(key, value) for key, value in options.items())


def setup_line(text: str) -> str:
    """A ``setup:`` shell line: one line, and valid shell on its own (``bash -n``) where bash is present."""
    bash = shutil.which("bash")
    if bash is not None:
        proc = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ValueError(f"{text!r} is not a complete shell command (bash -n refuses it)")
    return text


def at_least_one_mb(gb: float) -> float:
    """``mem_gb``: at least 1 MB, the least sbatch's ``--mem`` (in whole MB) can say: below it the script would
    say ``--mem=0``, which SLURM reads as all of a node's memory."""
    if gb * 1024 < 1:
        raise ValueError(f"{show(gb)} GB is below 1 MB, the least sbatch --mem takes (--mem=0 would mean all of a "
                         "node's memory): give at least 0.001")
    return gb


def minutes(value: Any) -> int:
    """Minutes from ``90``, ``"90"``, ``"01:30:00"``, ``"1-00:00:00"`` or ``"30:00"`` (MM:SS), 1 to a year.

    SLURM's time limits are whole minutes: seconds round up to the next minute, as ``sbatch --time`` does
    (``man sbatch``), so ``"0:00:30"`` is 1 and ``"30:30"`` is 31.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{value!r} is not a time: use minutes or [D-]HH:MM:SS")
    if isinstance(value, int):
        total = value
    else:
        text = one_line(value).strip()
        m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text, flags=re.ASCII)
        if not m:
            raise ValueError(f"{value!r} is not a time: use minutes or [D-]HH:MM:SS")
        days, a, b, c = m.groups()
        if c is not None:  # HH:MM:SS
            total = int(a) * 60 + int(b) + (1 if int(c) else 0)
        elif b is not None:  # MM:SS (SLURM's reading of two fields), or D-HH:MM
            total = int(a) * 60 + int(b) if days else int(a) + (1 if int(b) else 0)
        else:
            total = int(a) * 60 if days else int(a)
        total += int(days or 0) * 24 * 60
    if total < 1:
        raise ValueError("the time limit must be at least one minute")
    if total > MAX_TIME_MIN:
        raise ValueError(f"{total} minutes is more than a year; give minutes or [D-]HH:MM:SS")
    return total


def parse_time_min(value: Any, where: str = "time") -> int:
    """:func:`minutes`, a refusal as a :class:`UserError` naming ``where``.

    >>> parse_time_min("1-02:00:00"), parse_time_min("04:00:00"), parse_time_min(45)
    (1560, 240, 45)
    """
    try:
        return minutes(value)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None


def gpu_list(value: Any) -> tuple[int, ...]:
    """GPU indices from a list ``[0, 2]``, a comma list ``"0,2"`` or a count ``2`` (GPUs 0 and 1).

    >>> gpu_list([0, 2]), gpu_list("1,3"), gpu_list(2)
    ((0, 2), (1, 3), (0, 1))
    """
    if isinstance(value, str) and "," in value:
        value = [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        if not value or len({str(v) for v in value}) != len(value):
            raise ValueError("give distinct GPU indices, e.g. [0, 1]")
        return tuple(int(v) if isinstance(v, str) and v.strip().isdigit() else v for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise ValueError(f"{value!r} is not a GPU count or a list of GPU indices, e.g. [0, 1]")
    if int(value) < 1:
        raise ValueError(f"{value} is below 1")
    if int(value) > MAX_GPUS:
        raise ValueError(f"{value} GPUs is above {MAX_GPUS} (the most one machine or task has)")
    return tuple(range(int(value)))


def _lines(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def runs_per_gpu_value(value: Any) -> int | str:
    """``runs_per_gpu``: ``"auto"`` (any case; measured by the grid's calibration, :mod:`harness.grid.calibrate`)
    or a whole number from 1 to :data:`MAX_RUNS_PER_GPU` (numeric text read as a number, as the CLI gives it).

    >>> runs_per_gpu_value("AUTO"), runs_per_gpu_value("4"), runs_per_gpu_value(8)
    ('auto', 4, 8)
    >>> runs_per_gpu_value("many")
    Traceback (most recent call last):
    ...
    ValueError: 'many' is neither auto nor a whole number of runs
    """
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is neither auto nor a whole number of runs")
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is neither auto nor a whole number of runs") from None
    if number != number or number in (float("inf"), float("-inf")) or number != int(number):
        raise ValueError(f"{value!r} is not a whole number")
    number = int(number)
    if number < 1:
        raise ValueError(f"{number} is below 1")
    if number > MAX_RUNS_PER_GPU:
        raise ValueError(f"{number} is above {MAX_RUNS_PER_GPU}")
    return number


RunsPerGpu = Annotated[int | str, Before(runs_per_gpu_value)]  # N (1 to 64) or "auto"


# A fused group stacks K copies of the model in one process's memory (harness.finetune.fused); beyond 64 a
# number is a typo, as for runs_per_gpu.
MAX_FUSE = 64


def fuse_value(value: Any) -> int | str:
    """``fuse``: ``"auto"`` (K measured by the grid's calibration; not fused without one), ``"off"`` (= 1) or
    a group size K from 1 to :data:`MAX_FUSE` (numeric text read as a number, as the CLI gives it).

    >>> fuse_value("AUTO"), fuse_value("off"), fuse_value("5"), fuse_value(1)
    ('auto', 1, 5, 1)
    >>> fuse_value("many")
    Traceback (most recent call last):
    ...
    ValueError: 'many' is neither auto, off nor a whole number of runs
    """
    if isinstance(value, str) and value.strip().lower() in ("auto", "off"):
        return "auto" if value.strip().lower() == "auto" else 1
    if value is False:
        return 1
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is neither auto, off nor a whole number of runs")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is neither auto, off nor a whole number of runs") from None
    if number != number or number in (float("inf"), float("-inf")) or number != int(number):
        raise ValueError(f"{value!r} is not a whole number")
    if number < 1:
        raise ValueError(f"{int(number)} is below 1")
    if number > MAX_FUSE:
        raise ValueError(f"{int(number)} is above {MAX_FUSE}")
    return int(number)


Fuse = Annotated[int | str, Before(fuse_value), Cli(metavar="K|auto|off"), Shown({
    "anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_FUSE}, {"enum": ["auto", "off"]}],
    "description": "train the runs of a cell that differ only in seed, learning rate or weight decay as one "
                   "process and one stacked model, K "
                   "at a time (harness.finetune.fused; each keeps its own run id, weights, optimizer, data order, "
                   "checkpoint and record): auto (K measured by the grid's calibration; not fused without one, "
                   f"and not on SLURM, where no task measures it), off, or K (1 to {MAX_FUSE}; SLURM: each array "
                   "task trains one fused group)"})] | None


CaptureMode = Literal["auto", "on", "off"]
Capture = Annotated[CaptureMode, Help(
    "a fused group's whole training step captured once per static batch shape and replayed (a CUDA graph on a "
    "GPU: one launch per step; harness.finetune.fused.capture_options): auto (where the calibration measured it "
    "faster, its compile time counted against a whole run; not captured without a calibration), on, or off")] | None


def _runs_per_gpu_shown(description: str) -> Shown:
    return Shown({"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_RUNS_PER_GPU},
                            {"const": "auto"}], "description": description})


# The packing settings: fields of both settings below, given to both executors by the same flags.
PACKING_FIELDS = ("runs_per_gpu", "calibrate", "calibration_budget_s", "fuse", "capture")
# One declaration each for both executors (a config's ``local:`` and ``slurm:``, the
# flags of ``vnr run`` and of ``python -m harness.grid.entry``): one help text, one bound.
RunsPerGpuField = Annotated[RunsPerGpu, Cli(metavar="N|auto"), _runs_per_gpu_shown(
    "runs side by side on one GPU, each its own process (SLURM: the specs of one array task): auto (measured by "
    f"the grid's calibration, harness.grid.calibrate) or N (1 to {MAX_RUNS_PER_GPU}); default: auto where the "
    "runs get a GPU (SLURM: gpus >= 1), else 1")] | None
Calibrate = Annotated[bool, Flag(), Help(
    "calibration bursts measure runs_per_gpu auto and precision auto (default: true); false (--no-calibrate): no "
    "bursts, runs_per_gpu auto is then 1 and precision auto follows the rule bf16/fp16 on a GPU, fp32 on CPU")]
CalibrationBudget = Annotated[PositiveFloat, Help(
    "hard cap in seconds on the calibration's bursts (default: 600 on a GPU, 120 on CPU; "
    "harness.grid.calibrate.BUDGET_CAP_S)")] | None


SlurmName = Annotated[str, Text()]
_SHELL_LINES = Shown({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                      "description": "shell lines run before each task (module load, conda activate, ...), "
                                     "one line each"})


@dataclass(frozen=True)
class SlurmSettings:
    """Resources of one array task, and how the array behaves (a config's ``slurm:``; ``vnr run``'s flags)."""

    partition: Annotated[SlurmName, Check(slurm_name("partition")), Help("partition, or a comma-separated list")] | None = None
    time_min: Annotated[int, Before(minutes), Cli("--time"), Shown({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}],
                        "description": "time limit per task: minutes or [D-]HH:MM:SS (seconds round up to the "
                                       "next minute, as sbatch does)"})] = 240
    gpus: Annotated[int, Number(ge=0, le=MAX_GPUS), Help("GPUs per task (0 on a CPU cluster)")] = 1
    cpus: Annotated[Count, Help("CPUs per task")] = 8
    mem_gb: Annotated[PositiveFloat, Check(at_least_one_mb), Help("memory per task in GB (at least 0.001: 1 MB)")] = 32.0
    array_parallelism: Annotated[Count, Help("array tasks running at once")] = 16
    account: Annotated[SlurmName, Check(slurm_name("account")), Help("account to charge")] | None = None
    qos: Annotated[SlurmName, Check(slurm_name("qos")), Help("quality of service")] | None = None
    constraint: Annotated[SlurmName, Check(slurm_name("constraint")), Help("node features, e.g. a100|h100")] | None = None
    job_name: Annotated[SlurmName, Check(slurm_name("job_name")), Help("job name (default vnr-<name>)")] | None = None
    max_timeouts: Annotated[int, Number(ge=0), Help("requeues after hitting the time limit "
                                                    "(preemptions are always requeued)")] = 3
    signal_delay_s: Annotated[Count, Help("SIGUSR2 this long before the time limit: checkpoint and "
                                          "requeue")] = 120
    setup: Annotated[tuple[Annotated[str, Text(), Check(setup_line)], ...], Before(_lines), _SHELL_LINES,
                     Cli(repeat=True, metavar="LINE")] = ()
    additional: Annotated[Mapping[str, Any], Check(sbatch_options), Cli("--sbatch-opt", repeat=True, metavar="KEY=VALUE"),
                          Help("more #SBATCH long options (known ones only), e.g. {mail-type: END}; "
                               "true for a flag")] = field(default_factory=dict)
    runs_per_gpu: RunsPerGpuField = None
    calibrate: Calibrate = True
    calibration_budget_s: CalibrationBudget = None
    fuse: Fuse = None
    capture: Capture = None

    def __post_init__(self) -> None:
        check_fields(self, at=("slurm",))
        check_fused_packing(self, "slurm")
        if isinstance(self.fuse, int) and self.fuse > 1 and self.runs_per_gpu not in (None, 1, "auto"):
            raise Refusal(f"slurm.fuse: {self.fuse} makes each array task one fused group, and runs_per_gpu "
                          f"{self.runs_per_gpu} asks each task for {self.runs_per_gpu} runs side by side: give one of "
                          "them")
        if self.signal_delay_s >= 60 * self.time_min:  # the signal would come before the task starts
            raise Refusal(f"slurm.signal_delay_s: {self.signal_delay_s} s is not below the time limit "
                          f"({self.time_min} min = {60 * self.time_min} s): give a delay shorter than the time limit "
                          "(default 120 s)")

    def updated(self, **changes: Any) -> SlurmSettings:
        """A copy with the non-None ``changes`` applied (CLI options over config values)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def check_fused_packing(settings: Any, at: str) -> None:
    """``capture: on`` captures fused groups' steps: refused where nothing is fused (``fuse: off``, and on SLURM
    ``fuse: auto`` too, which no array task measures)."""
    unfused = settings.fuse == 1 or (at == "slurm" and settings.fuse in (None, "auto"))
    if settings.capture == "on" and unfused:
        what = "off" if settings.fuse == 1 else "auto, which SLURM does not measure (not fused)"
        raise Refusal(f"{at}.capture: on captures a fused group's step, and fuse is {what}: give fuse K (2 or more)"
                      f"{' or auto' if at == 'local' else ''}, or leave capture out")


@dataclass(frozen=True)
class LocalSettings:
    """How the local executor uses this machine's GPUs (a config's ``local:``; ``vnr run --runs-per-gpu``)."""

    runs_per_gpu: RunsPerGpuField = None
    gpus: Annotated[tuple[Annotated[int, Number(ge=0, le=MAX_GPUS - 1)], ...], Before(gpu_list), Cli("--local-gpus", metavar="IDS|N",
                                                                                   dest="local_gpus"),
                    Shown({"anyOf": [{"type": "array", "items": {"type": "integer", "minimum": 0}},
                                     {"type": "string"}, {"type": "integer", "minimum": 1}],
                           "description": "GPU indices to use ([0, 2] or \"0,2\"), or a count; default: what "
                                          "the executor finds"})] | None = None
    fuse: Fuse = None
    capture: Capture = None
    calibrate: Calibrate = True
    calibration_budget_s: CalibrationBudget = None

    def __post_init__(self) -> None:
        check_fields(self, at=("local",))
        check_fused_packing(self, "local")


DecisionKind = Literal["winner", "top", "tiers"]


@dataclass(frozen=True)
class DecideSettings:
    """Decide first (a config's ``decide:``; ``vnr run --decide SCENARIO``; ``harness.run_grid(decide=...)``): run
    the grid in waves and stop once the scenario column's decision is settled at the level
    (:mod:`harness.grid.decide`, the statistics in :mod:`ranking.decide`)."""

    scenario: Annotated[OneLine, Cli("--decide", metavar="SCENARIO"), Help(
        "scenario YAML whose column's decision the grid settles (weights, rule, setting, vote), e.g. "
        "configs/scenarios/user_weighted.yaml")] | None = None
    column: Annotated[OneLine, Help("the scenario column to decide on (default: the scenario's reference)")] | None = None
    decision: Annotated[DecisionKind, Help("what must be settled: winner, top (the top k, --top) or tiers")] = "winner"
    top: Annotated[int, Number(ge=1, le=10_000), Help("k of decision top (default 3)")] = 3
    level: Annotated[float, Number(ge=0.5, lt=1.0), Help(
        "the chance, at least, that a settled decision is the full grid's (default 0.95), spent over the waves")] = 0.95
    waves: Annotated[int, Number(ge=2, le=50), Help(
        "most waves (looks): the level is spent over them; the last runs every seed left to the models that can "
        "still change the decision (default 6)")] = 6
    first_seeds: Annotated[int, Number(ge=1, le=10_000), Help(
        "the first wave: 1 (default): one seed of every cell and a second on every other cell, the seed spread "
        "pooled across models per task; N: N seeds of every cell")] = 1
    budget_runs: Annotated[Count, Help("stop before the runs of the grid exceed this many")] | None = None
    budget_gpu_hours: Annotated[PositiveFloat, Help(
        "stop before the runs' GPU-hours (measured; a run to come: the mean of its task's) exceed this")] | None = None
    draws: Annotated[int, Number(ge=200, le=1_000_000), Help("predictive draws per look (default 2000)")] = 2000

    def __post_init__(self) -> None:
        check_fields(self, at=("decide",))


def slurm_value(key: str, value: Any, where: str) -> Any:
    """One SLURM setting (a ``slurm:`` key, ``time`` for ``time_min``, or ``job_name`` for the grid's name),
    checked by :class:`SlurmSettings`'s declaration; a refusal names ``where`` (a flag).

    >>> slurm_value("partition", "gpu,gpu-long", "--partition")
    'gpu,gpu-long'
    >>> slurm_value("partition", "gpu\\ntouch /tmp/x", "--partition")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: --partition: 'gpu\\ntouch /tmp/x' contains a control character ('\\n'); give it on one line
    """
    from ranking.floor.schema import validate

    key = {"time": "time_min", "name": "job_name"}.get(key, key)
    checked = validate(SlurmSettings, {key: value}, names=lambda _: where)
    return getattr(checked, key)


