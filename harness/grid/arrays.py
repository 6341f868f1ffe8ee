"""How a grid is cut into array tasks, for both ways of submitting one (``vnr run --executor slurm``:
:mod:`harness.grid.slurm`; the plain ``slurm/grid-array.sbatch``: :func:`harness.grid.entry.main`), and
what each task is given to calibrate with.

Task ``i`` runs ``specs[i*G:(i+1)*G]`` (:func:`task_specs`), G = :func:`group_size` of what the tasks run
side by side (:func:`runs_per_task`: N, or ``auto``: 16, run N at a time after the calibration); the
payload (:func:`calibration_payload`, :func:`task_packing`) reaches :func:`harness.grid.entry.run_task`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.grid.local import Spec
from harness.grid.settings import SlurmSettings
from harness.specs import FinetuneSpec


def task_specs(specs: Sequence[Spec], index: int, runs_per_gpu: int = 1) -> list[Spec]:
    """The specs array task ``index`` runs: ``specs[index*N:(index+1)*N]``.

    >>> task_specs(list("abcde"), 2, runs_per_gpu=2), task_specs(list("abcde"), 1)
    (['e'], ['b'])
    """
    return list(specs[index * runs_per_gpu:(index + 1) * runs_per_gpu])


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
    return next((s for s in specs if isinstance(s, FinetuneSpec)), None)


def calibration_payload(settings: SlurmSettings, specs: Sequence[Spec], todo: Sequence[Spec], *,
                        calibrate_runs: bool = True) -> dict[str, Any] | None:
    """What an array task calibrates with (:func:`harness.grid.slurm.submit`'s ``calibration``): the grid's first
    fine-tuning spec among ``specs`` (the selected grid), the training samples of ``todo`` (the runs the
    array is for, what the time budget is a share of) and the settings' budget cap. ``vnr run --executor
    slurm`` and the plain sbatch entry (:func:`harness.grid.entry.main`) both build it here.

    None where nothing is to be measured: calibration off (``calibrate: false``, ``--no-calibrate``:
    ``calibrate_runs`` False), or N fixed and the tasks get no GPU. A fixed N on a GPU still gets it: the
    first task on a device kind measures ``precision: auto`` at that N, as the local executor does.

    >>> spec = FinetuneSpec("tiny:bert", "rte", 0, max_steps=3, batch_size=2)
    >>> calibration_payload(SlurmSettings(runs_per_gpu=2), [spec], [spec])
    {'first': FinetuneSpec(...), 'samples': 6, 'budget_cap_s': None}
    >>> calibration_payload(SlurmSettings(runs_per_gpu=2, gpus=0), [spec], [spec]), calibration_payload(
    ...     SlurmSettings(), [spec], [spec], calibrate_runs=False)
    (None, None)
    """
    from harness.grid.calibrate import AUTO, grid_samples

    if not (calibrate_runs and settings.calibrate):
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
