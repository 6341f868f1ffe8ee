"""What a result records about where it was produced."""

from __future__ import annotations

import platform
import socket
import sys
from typing import Any

from harness.store import slurm_ids


def environment_info() -> dict[str, Any]:
    """Host, Python/torch/transformers versions, GPU name, driver and CUDA, SLURM ids."""
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    try:
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
    except ImportError:  # pragma: no cover - harness extra not installed
        info["torch"] = None
    try:
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
