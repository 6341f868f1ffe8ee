"""Where a run happens: the machine, library versions, GPU, and the one reader of the SLURM environment.

:func:`slurm_ids` and :func:`array_task` are the only places that read SLURM's
variables; :func:`pin_array_task_job_id` is the only place that changes one.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any


def environment_info(import_libraries: bool = True) -> dict[str, Any]:
    """Host, Python/torch/transformers versions, GPU name, driver and CUDA, SLURM ids.

    ``import_libraries=False`` reports torch/transformers only where this process
    already imported them (a record of a run that never loaded them stays cheap).
    """
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    try:
        if not import_libraries and "torch" not in sys.modules:
            raise ImportError("torch not loaded")
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
            info["gpu_count"] = torch.cuda.device_count()
            info["device"] = "cuda"
        else:
            info["gpu"] = None
            info["gpu_count"] = 0
            info["device"] = "cpu"
    except ImportError:  # not installed (or not loaded)
        info["torch"] = None
    try:
        if not import_libraries and "transformers" not in sys.modules:
            raise ImportError("transformers not loaded")
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover
        info["transformers"] = None
    info["gpu_driver"] = nvidia_driver_version()
    info.update(slurm_ids())
    return info


def nvidia_driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library, no GPU, no driver: nothing to record
        return None


_SLURM_IDS = {
    "slurm_job_id": "SLURM_JOB_ID",
    "slurm_array_job_id": "SLURM_ARRAY_JOB_ID",
    "slurm_array_task_id": "SLURM_ARRAY_TASK_ID",
    "slurm_restart_count": "SLURM_RESTART_COUNT",
}


def slurm_ids() -> dict[str, str]:
    """SLURM job / array ids of this process, where it runs under SLURM (else empty)."""
    return {k: os.environ[v] for k, v in _SLURM_IDS.items() if os.environ.get(v)}


def array_task() -> tuple[str, int] | None:
    """``(array job id, task index)`` inside a SLURM array task, else None."""
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if not array_job or task is None or not task.strip().isdigit():
        return None
    return array_job, int(task)


def pin_array_task_job_id() -> None:
    """``SLURM_JOB_ID=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}`` inside an array task (idempotent).

    codecarbon then reads this task's allocation and not the whole array's; the
    numeric id is kept in ``VNR_SLURM_NUMERIC_JOB_ID``.
    """
    task = array_task()
    if task is not None:
        current = os.environ.get("SLURM_JOB_ID", "")
        if current and "_" not in current:
            os.environ.setdefault("VNR_SLURM_NUMERIC_JOB_ID", current)
        os.environ["SLURM_JOB_ID"] = f"{task[0]}_{task[1]}"
