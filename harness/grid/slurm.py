"""The SLURM executor: one job array through submitit, one task per pending spec
(or per N specs run side by side on the task's GPU, with ``runs_per_gpu=N``).

* resources (partition, time, GPUs, CPUs, memory, array parallelism, account,
  QoS, constraint) come from the config's ``slurm:`` section, overridden by the CLI;
* every task logs to ``<output>/logs/slurm/<array>_<task>/``;
* ``--requeue`` plus submitit's SIGUSR2 handler: SLURM sends USR2
  ``signal_delay_s`` before the time limit (and on preemption where the cluster
  signals it); the task checkpoints its call and requeues itself; the run
  resumes from its training checkpoint (``max_timeouts`` bounds time-limit requeues);
* a submission manifest ``<output>/submissions/<job>.json`` maps array indices
  to run ids (a list of them for a task of N), so ``vnr status`` can say which specs are queued.

``--dry-run`` prints the sbatch script submitit would submit, without a cluster:

>>> from harness.grid.config import SlurmSettings
>>> script = sbatch_script(SlurmSettings(partition="gpu", time_min=90, gpus=1, cpus=4, mem_gb=16,
...     array_parallelism=8), Path("results/x"), 20, name="x")
>>> [line for line in script.splitlines() if "array" in line or "partition" in line]
['#SBATCH --array=0-19%8', '#SBATCH --partition=gpu']
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.grid.arrays import array_tasks, task_packing
from harness.grid.config import SlurmSettings, slurm_value
from harness.grid.local import Spec
from harness.store import atomic_write_json
from ranking.floor.errors import UserError
from ranking.floor.json_io import read_json

log = logging.getLogger("harness.grid")


def log_folder(output: Path) -> Path:
    """submitit's folder pattern: one folder (and log pair) per array task."""
    return check_log_path(Path(output).resolve()) / "logs" / "slurm" / "%j"


#: what the shell expands as a file pattern in an unquoted word
FILE_PATTERN_CHARACTERS = "*?["


def check_no_file_patterns(words: Sequence[str]) -> None:
    """The words ``vnr run CONFIG --sbatch-args`` prints reach sbatch through ``sbatch $(vnr run ...)``: the shell
    splits them and expands ``*``, ``?`` and ``[`` as file patterns (a file ``--comment=x1`` in the folder turns
    ``--comment=x*`` into it), and quotes in ``$(...)``'s output are not removed, so no quoting protects them.
    A word with one is refused in one line (``--executor slurm`` has no shell between vnr and sbatch).

    >>> check_no_file_patterns(["--time=90", "--constraint=a100|h100"])
    >>> check_no_file_patterns(["--comment=x*"])
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: --sbatch-args: --comment=x* has *, which the shell expands as a file pattern in sbatch $(vnr run CONFIG --sbatch-args), where no quoting protects it: give the option without * ? [, or submit with --executor slurm (no shell between vnr and sbatch)
    """
    for word in words:
        found = sorted({c for c in word if c in FILE_PATTERN_CHARACTERS})
        if found:
            raise UserError(f"--sbatch-args: {word} has {' '.join(found)}, which the shell expands as a file pattern "
                            "in sbatch $(vnr run CONFIG --sbatch-args), where no quoting protects it: give the option "
                            "without * ? [, or submit with --executor slurm (no shell between vnr and sbatch)")


def check_log_path(path: Path, where: str = "output") -> Path:
    """A directory SLURM can log under: it reaches ``#SBATCH --output=`` as one token, without filename patterns.

    >>> check_log_path(Path("/tmp/my grid"))
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: output: '/tmp/my grid' cannot hold SLURM logs: a path without spaces, quotes, '%', '#', '$', '`', ';' or backslashes
    """
    text = str(path)
    if any(ord(c) < 32 or ord(c) == 127 or c.isspace() or c in "'\"%#$`;\\" for c in text):
        raise UserError(f"{where}: {text!r} cannot hold SLURM logs: a path without spaces, quotes, '%', '#', "
                        "'$', '`', ';' or backslashes")
    return path


def sbatch_parameters(settings: SlurmSettings, *, name: str, env_setup: Sequence[str] = ()) -> dict[str, Any]:
    """The settings as submitit ``SlurmExecutor`` parameters (sbatch's own names), each value checked."""
    params: dict[str, Any] = {
        "job_name": settings.job_name or slurm_value("job_name", f"vnr-{name}", "name"),
        "time": int(settings.time_min),
        "cpus_per_task": int(settings.cpus),
        "mem": _mem(settings.mem_gb),
        "array_parallelism": int(settings.array_parallelism),
        "signal_delay_s": int(settings.signal_delay_s),
        "stderr_to_stdout": False,
        "additional_parameters": {"requeue": True, **dict(settings.additional)},
    }
    if settings.gpus:
        params["gpus_per_node"] = int(settings.gpus)
    for key in ("partition", "account", "qos", "constraint"):
        value = getattr(settings, key)
        if value:
            params[key] = value
    setup = [*env_setup, *settings.setup]
    if setup:
        params["setup"] = list(setup)
    return params


def _mem(mem_gb: float) -> str:
    return f"{int(mem_gb)}GB" if float(mem_gb) == int(mem_gb) else f"{int(mem_gb * 1024)}MB"


def _env_setup() -> list[str]:
    """Lines exported in every task: offline flags and the data root as the submitter has them."""
    lines = []
    for key in ("VNR_DATA_ROOT", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME",
                "TOKENIZERS_PARALLELISM"):
        if os.environ.get(key):
            if any(ord(c) < 32 or ord(c) == 127 for c in os.environ[key]):
                raise UserError(f"${key} contains a control character: set it on one line")
            lines.append(f"export {key}={shlex.quote(os.environ[key])}")
    return lines


def sbatch_script(settings: SlurmSettings, output: Path, n_tasks: int, *, name: str) -> str:
    """The sbatch script submitit writes for an array of ``n_tasks`` tasks."""
    from submitit.slurm.slurm import _make_sbatch_string

    folder = log_folder(output)
    command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(str(folder))])
    params = sbatch_parameters(settings, name=name, env_setup=_env_setup())
    return _make_sbatch_string(command=command, folder=folder, map_count=n_tasks, **params)


def submit(
    specs: Sequence[Spec],
    output: Path,
    settings: SlurmSettings,
    *,
    name: str,
    data_root: Path | None = None,
    options: Callable[[Spec], Mapping[str, Any]] | None = None,
    runs_per_gpu: int | str = 1,
    calibration: Mapping[str, Any] | None = None,
    fuse: int = 1,
    capture: str | None = None,
) -> str:
    """Submit one array and write the manifest; returns the array job id.

    ``runs_per_gpu=N``: ``ceil(len(specs) / N)`` tasks, task i running specs
    ``[i*N:(i+1)*N]`` side by side on its GPU (:func:`harness.grid.entry.run_task`).
    ``runs_per_gpu="auto"``: groups of :func:`harness.grid.arrays.group_size` specs; each task runs its group N at a time,
    N (and precision ``auto``) from the calibration of its device kind (``calibration``: the spec to
    calibrate with, ``first``, the grid's training ``samples`` and ``budget_cap_s``: :func:`harness.grid.arrays.calibration_payload`),
    measured by the first
    task that gets there (:func:`harness.grid.calibrate.ensure_calibration`).
    ``fuse`` K > 1: one task per fused group (:func:`harness.grid.arrays.array_tasks`), trained as one stacked
    model (``capture``: what chose to capture its step, or None) and resumed from each run's checkpoint after a
    requeue.
    """
    if not specs:
        raise ValueError("nothing to submit")
    if runs_per_gpu != "auto" and (isinstance(runs_per_gpu, bool) or not isinstance(runs_per_gpu, int)
                                   or runs_per_gpu < 1):
        raise UserError(f"runs_per_gpu must be a positive integer or auto, not {runs_per_gpu!r}")
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise UserError("--executor slurm: sbatch/srun not found on this machine: run on a SLURM login node "
                        "(or start a local one with slurm/start-local-cluster.sh)")
    import submitit

    from harness.grid.entry import GridTask

    output = Path(output).resolve()
    executor = submitit.SlurmExecutor(folder=log_folder(output), max_num_timeout=settings.max_timeouts)
    executor.update_parameters(**sbatch_parameters(settings, name=name, env_setup=_env_setup()))
    root = str(Path(data_root).resolve()) if data_root else None
    task = GridTask()
    groups = array_tasks(specs, runs_per_gpu, fuse)
    packing = task_packing(runs_per_gpu, calibration)
    jobs = []
    try:
        with executor.batch():
            for group in groups:
                opts = [dict(options(s)) if options else None for s in group]
                if fuse > 1 and len(group) > 1:
                    jobs.append(executor.submit(task, group, str(output), root, opts, None, fuse, capture))
                elif packing is not None:
                    jobs.append(executor.submit(task, group, str(output), root, opts, packing))
                elif runs_per_gpu == 1:
                    jobs.append(executor.submit(task, group[0], str(output), root, opts[0]))
                else:
                    jobs.append(executor.submit(task, group, str(output), root, opts))
    except Exception as exc:  # submitit wraps sbatch's complaint (bad partition, too much memory, ...)
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        raise UserError(f"sbatch refused the array: {' '.join(lines[-3:]) if lines else type(exc).__name__}") from None
    array_id = str(jobs[0].job_id).split("_")[0]
    write_manifest(output, array_id, groups)
    return array_id


def write_manifest(output: Path, array_id: str, tasks: Sequence[Spec | Sequence[Spec]]) -> Path:
    """``<output>/submissions/<array_id>.json``: array index → run id, or run ids when a task runs several."""
    path = Path(output) / "submissions" / f"{array_id}.json"
    entries: dict[str, Any] = {}
    for i, task in enumerate(tasks):
        group = [task] if hasattr(task, "run_id") else list(task)
        ids = [s.run_id() for s in group]
        entries[str(i)] = ids[0] if len(ids) == 1 else ids
    atomic_write_json(path, {"array_job_id": array_id, "submitted": time.time(), "tasks": entries})
    return path


def read_manifests(output: Path) -> dict[str, list[tuple[str, str]]]:
    """All submission manifests: array job id → [(task index, run id), ...]."""
    out: dict[str, list[tuple[str, str]]] = {}
    folder = Path(output) / "submissions"
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            doc = read_json(path)
            pairs = []
            for index, ids in doc["tasks"].items():
                for rid in ids if isinstance(ids, list) else [ids]:
                    pairs.append((str(index), str(rid)))
            out[str(doc["array_job_id"])] = pairs
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # JsonProblem is a ValueError
            continue
    return out


def squeue_states(user_only: bool = True) -> dict[str, str] | None:
    """Every queued or running job (array tasks expanded): ``"<job>_<task>"`` or ``"<job>"`` → state.

    None where ``squeue`` is absent or the controller does not answer.
    """
    if shutil.which("squeue") is None:
        return None
    cmd = ["squeue", "-h", "-r", "-o", "%i|%T"]
    if user_only and os.environ.get("USER"):
        cmd += ["-u", os.environ["USER"]]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    states = {}
    for line in proc.stdout.splitlines():
        if "|" in line:
            job, state = line.strip().split("|", 1)
            states[job] = state
    return states


def wait_for_array(array_id: str, *, poll_s: float = 5.0, timeout_s: float | None = None,
                   on_poll: Callable[[], None] | None = None) -> None:
    """Block until no task of ``array_id`` is queued or running (read from squeue).

    ``on_poll`` is called at every poll (``vnr run --wait`` refreshes its status line there).
    """
    started = time.time()
    while True:
        if on_poll is not None:
            on_poll()
        states = squeue_states(user_only=False)
        if states is None:
            raise UserError("--wait: squeue does not answer")
        left = {k: v for k, v in states.items() if k == array_id or k.startswith(f"{array_id}_")}
        if not left:
            return
        if timeout_s is not None and time.time() - started > timeout_s:
            raise UserError(f"--wait: array {array_id} still has {len(left)} tasks after {timeout_s:.0f} s")
        time.sleep(poll_s)
