"""How a grid is cut into array tasks, for both ways of submitting one (``vnr run --executor slurm``:
:mod:`harness.grid.slurm`; the plain ``slurm/grid-array.sbatch``: :func:`harness.grid.entry.main`), and
what each task is given to calibrate with.

Task ``i`` runs ``specs[i*G:(i+1)*G]`` (:func:`task_specs`), G = :func:`group_size` of what the tasks run
side by side (:func:`runs_per_task`: N, or ``auto``: 16, run N at a time after the calibration); the
payload (:func:`calibration_payload`, :func:`task_packing`) reaches :func:`harness.grid.entry.run_task`.
With ``fuse: K`` (K > 1) each task is one fused group instead (:func:`array_tasks`: the runs of a cell that
differ only in seed, learning rate or weight decay, K at a time, as the local executor groups them; a run that
cannot fuse is a task alone).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.grid.local import Spec
from harness.grid.settings import MAX_FUSE, SlurmSettings
from harness.kinds import calibrated, fused_groups
from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, kind_of, read_json_object
from ranking.floor.schema import show


def task_specs(specs: Sequence[Spec], index: int, runs_per_gpu: int = 1) -> list[Spec]:
    """The specs array task ``index`` runs: ``specs[index*N:(index+1)*N]``.

    >>> task_specs(list("abcde"), 2, runs_per_gpu=2), task_specs(list("abcde"), 1)
    (['e'], ['b'])
    """
    return list(specs[index * runs_per_gpu:(index + 1) * runs_per_gpu])


def fused_k(fuse: int | str | None) -> int:
    """The fused group size an array uses: an explicit K, else 1 (``auto`` is measured by the local executor's
    calibration only: an array is not fused unless told K).

    >>> fused_k(4), fused_k("auto"), fused_k(None)
    (4, 1, 1)
    """
    return fuse if isinstance(fuse, int) else 1


def slurm_fusing(settings: SlurmSettings) -> dict[str, Any]:
    """:func:`harness.grid.slurm.submit`'s fusing keywords from the settings: ``fuse`` K where an explicit K > 1
    is given (``auto`` is not measured on SLURM: not fused), ``capture`` where it is ``on`` (``auto``: no
    calibration measures it there); {} where the array is not fused.

    >>> slurm_fusing(SlurmSettings(fuse=3, capture="on")), slurm_fusing(SlurmSettings(fuse="auto"))
    ({'fuse': 3, 'capture': 'the capture setting'}, {})
    """
    k = fused_k(settings.fuse)
    if k <= 1:
        return {}
    return {"fuse": k, **({"capture": "the capture setting"} if settings.capture == "on" else {})}


def array_tasks(specs: Sequence[Spec], per_task: int | str = 1, fuse: int = 1) -> list[list[Spec]]:
    """Every array task's specs, in index order: slices of :func:`group_size` (:func:`task_specs`), or with
    ``fuse`` K > 1 the fused groups (:meth:`harness.kinds.RunKind.fused_groups`, in the order of each group's
    first run), one task each.

    >>> array_tasks(list("abcde"), 2)
    [['a', 'b'], ['c', 'd'], ['e']]
    """
    if fuse > 1:
        return fused_groups(specs, fuse)
    size = group_size(per_task)
    return [task_specs(specs, i, size) for i in range(array_size(len(specs), size))]


def array_size(n_specs: int, runs_per_gpu: int = 1) -> int:
    """``ceil(n_specs / runs_per_gpu)`` array tasks."""
    return math.ceil(n_specs / runs_per_gpu)


def runs_per_task(settings: SlurmSettings, *, calibrate_runs: bool = True) -> int | str:
    """What the array's tasks run side by side: the settings' N, or ``"auto"`` (the default where tasks get
    a GPU); 1 without a GPU by default, and for ``auto`` when calibration is off (``calibrate: false``,
    ``--no-calibrate``).

    >>> runs_per_task(SlurmSettings()), runs_per_task(SlurmSettings(gpus=0)), runs_per_task(SlurmSettings(runs_per_gpu=4))
    ('auto', 1, 4)
    """
    if fused_k(settings.fuse) > 1:  # each task one fused group (array_tasks), nothing side by side
        return 1
    value = settings.runs_per_gpu
    if value is None:
        value = "auto" if settings.gpus else 1
    if value == "auto" and not (calibrate_runs and settings.calibrate):
        return 1
    return value


def group_size(per_task: int | str) -> int:
    """Specs per array task: N, or for ``auto`` the largest N a calibration tries (the task then runs them
    N at a time, N from its device kind's calibration).

    >>> group_size(4), group_size("auto")
    (4, 16)
    """
    from harness.grid.calibrate import AUTO, CANDIDATE_N

    return max(CANDIDATE_N) if per_task == AUTO else int(per_task)


def first_finetune(specs: Sequence[Spec]) -> Spec | None:
    """The grid's first fine-tuning spec (what the calibration measures), or None."""
    return next(iter(calibrated(specs)), None)


def calibration_payload(settings: SlurmSettings, specs: Sequence[Spec], todo: Sequence[Spec], *,
                        calibrate_runs: bool = True) -> dict[str, Any] | None:
    """What an array task calibrates with (:func:`harness.grid.slurm.submit`'s ``calibration``): the grid's first
    fine-tuning spec among ``specs`` (the selected grid), the training samples of ``todo`` (the runs the
    array is for, what the time budget is a share of) and the settings' budget cap. ``vnr run --executor
    slurm`` and the plain sbatch entry (:func:`harness.grid.entry.main`) both build it here.

    None where nothing is to be measured: calibration off (``calibrate: false``, ``--no-calibrate``:
    ``calibrate_runs`` False), or N fixed and the tasks get no GPU. A fixed N on a GPU still gets it: the
    first task on a device kind measures ``precision: auto`` at that N, as the local executor does.

    >>> from harness.specs import FinetuneSpec
    >>> spec = FinetuneSpec("tiny:bert", "rte", 0, max_steps=3, batch_size=2)
    >>> calibration_payload(SlurmSettings(runs_per_gpu=2), [spec], [spec])
    {'first': FinetuneSpec(...), 'samples': 6, 'budget_cap_s': None}
    >>> calibration_payload(SlurmSettings(runs_per_gpu=2, gpus=0), [spec], [spec]), calibration_payload(
    ...     SlurmSettings(), [spec], [spec], calibrate_runs=False)
    (None, None)
    """
    from harness.grid.calibrate import AUTO, grid_samples

    if not (calibrate_runs and settings.calibrate) or fused_k(settings.fuse) > 1:  # a fused group trains in fp32
        return None
    if runs_per_task(settings) != AUTO and not settings.gpus:
        return None
    return {"first": first_finetune(specs), "samples": grid_samples(todo), "budget_cap_s": settings.calibration_budget_s}


def task_packing(per_task: int | str, calibration: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``packing`` an array task passes to :func:`harness.grid.entry.run_task`: ``{"runs_per_gpu": N or
    "auto", **calibration}`` (N fixed: the task's specs run N side by side, precision ``auto`` measured);
    None for a fixed N without a calibration (they run side by side, precision ``auto`` by the rule).

    >>> task_packing("auto", {"samples": 8}), task_packing(4, {"samples": 8}), task_packing(4, None)
    ({'runs_per_gpu': 'auto', 'samples': 8}, {'runs_per_gpu': 4, 'samples': 8}, None)
    """
    from harness.grid.calibrate import AUTO

    if calibration is None and per_task != AUTO:
        return None
    return {"runs_per_gpu": per_task, **dict(calibration or {})}


# ---------------------------------------------------------------------- the plain sbatch array's file
@dataclass(frozen=True)
class ArrayPlan:
    """What ``vnr run CONFIG --sbatch-args`` sized a plain sbatch array for (``array-<digest>.json``)."""

    only: list[str]
    runs_per_gpu: int | str
    calibrate: bool
    gpus: int  # GPUs per task (what a fixed N's precision calibration needs to know)
    run_ids: list[str]
    fuse: int = 1  # K > 1: each task one fused group (array_tasks)
    capture: bool = False  # the fused groups' steps captured (capture: on)


def write_array_file(folder: Path, specs: Sequence[Spec], *, only: Sequence[str] | None, runs_per_gpu: int | str,
                     calibrate: bool, gpus: int, fuse: int = 1, capture: bool = False) -> Path:
    """Write the array's plan to ``folder/array-<digest>.json`` (the digest of its content: two arrays of one
    output sized differently get two files, the same one again the same file); returns its path."""
    from harness.grid.config import only_patterns
    from harness.store import atomic_write_bytes

    doc = {"only": only_patterns(only), "runs_per_gpu": runs_per_gpu, "calibrate": bool(calibrate),
           "gpus": int(gpus), "run_ids": [s.run_id() for s in specs],
           **({"fuse": int(fuse), "capture": bool(capture)} if fuse > 1 else {})}
    text = json.dumps(doc, indent=1) + "\n"
    path = Path(folder) / f"array-{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"
    atomic_write_bytes(path, text.encode())
    return path


_ARRAY_KEYS = ("only", "runs_per_gpu", "calibrate", "gpus", "run_ids")


def _array_doc_problem(doc: dict[str, Any]) -> str | None:
    """Why an array file's object is not the one :func:`write_array_file` writes (runs_per_gpu is checked after)."""
    missing = [k for k in _ARRAY_KEYS if k not in doc]
    if missing:
        return f"no {', '.join(missing)}"
    for key in ("only", "run_ids"):
        if not isinstance(doc[key], list) or not all(isinstance(x, str) for x in doc[key]):
            return f"{key} is {kind_of(doc[key]) if not isinstance(doc[key], list) else 'a list'}, not a list of text"
    if type(doc["calibrate"]) is not bool:
        return f"calibrate is {show(doc['calibrate'])}, not true or false"
    if type(doc["gpus"]) is not int or doc["gpus"] < 0:
        return f"gpus is {show(doc['gpus'])}, not a whole number"
    if "fuse" in doc and (type(doc["fuse"]) is not int or not 1 <= doc["fuse"] <= MAX_FUSE):
        return f"fuse is {show(doc['fuse'])}, not a group size from 1 to {MAX_FUSE}"
    if "capture" in doc and type(doc["capture"]) is not bool:
        return f"capture is {show(doc['capture'])}, not true or false"
    return None


def read_array_file(path: str | Path) -> ArrayPlan:
    """The plan :func:`write_array_file` wrote; a :class:`UserError` naming the file where it cannot be one."""
    try:
        doc = read_json_object(path)
        problem = _array_doc_problem(doc)
        if problem:
            raise JsonProblem(problem)
        plan = ArrayPlan(only=list(doc["only"]), runs_per_gpu=doc["runs_per_gpu"], calibrate=doc["calibrate"],
                         gpus=doc["gpus"], run_ids=list(doc["run_ids"]), fuse=doc.get("fuse", 1),
                         capture=doc.get("capture", False))
    except OSError as exc:
        raise UserError(f"--array-file {path}: cannot be read ({exc.strerror or exc}); size the array again with "
                        "`vnr run CONFIG --sbatch-args`") from None
    except JsonProblem as exc:
        raise UserError(f"--array-file {path}: not an array file written by `vnr run --sbatch-args` ({exc}); "
                        "size the array again") from None
    if not (plan.runs_per_gpu == "auto" or (type(plan.runs_per_gpu) is int and plan.runs_per_gpu >= 1)):
        raise UserError(f"--array-file {path}: runs_per_gpu {show(plan.runs_per_gpu)} is neither auto nor a positive "
                        "whole number; size the array again")
    return plan


def planned_specs(plan: ArrayPlan, specs: Sequence[Spec], path: str | Path) -> list[Spec]:
    """The grid's specs in the order the array was sized for (``specs``: the grid after ``plan.only``); a
    :class:`UserError` where the grid has changed since (another config, an edited one): the tasks would
    otherwise run other runs than the array's indices stand for."""
    now = [s.run_id() for s in specs]
    if now != plan.run_ids:
        first = next((i for i, (a, b) in enumerate(zip(now, plan.run_ids)) if a != b), min(len(now), len(plan.run_ids)))
        raise UserError(f"the grid has changed since `vnr run --sbatch-args` sized this array ({path}: "
                        f"{len(plan.run_ids)} runs then, {len(now)} now, the first difference at line {first} of "
                        "`vnr run CONFIG --list`): size it again and resubmit")
    return list(specs)
