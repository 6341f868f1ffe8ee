"""The GPU energy meter: NVML's total-energy counter for the CUDA devices a run uses.

``nvmlDeviceGetTotalEnergyConsumption`` gives millijoules since the driver loaded
(Volta and newer). CUDA ordinals are mapped to NVML devices by UUID (NVML ignores
``CUDA_VISIBLE_DEVICES``); without torch, by the ``CUDA_VISIBLE_DEVICES`` list.
The meter also reads each device's UUID (the name of its energy ledger) and,
where NVML reports it, the SM utilisation of each process on the device (used to
split a shared GPU's energy between the runs on it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

MJ_PER_KWH = 3.6e9  # millijoules in one kilowatt-hour


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_entry(cuda_device: str | None = None, environ: Any = None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` entry of the GPU a child process will see as CUDA device 0:
    ``cuda_device`` where given (what the executor sets for it), else the first entry of this
    process's ``CUDA_VISIBLE_DEVICES``, else ``"0"``.

    >>> visible_entry("3"), visible_entry(None, {"CUDA_VISIBLE_DEVICES": " GPU-ab, 1"}), visible_entry(None, {})
    ('3', 'GPU-ab', '0')
    """
    visible = cuda_device if cuda_device is not None else (os.environ if environ is None else environ).get(
        "CUDA_VISIBLE_DEVICES")
    return (visible or "0").split(",")[0].strip() or "0"


def handle_for_entry(pynvml: Any, entry: str) -> Any:
    """The NVML handle of a ``CUDA_VISIBLE_DEVICES`` entry (an index, or a GPU UUID), without touching CUDA
    (no CUDA context in the process that asks: a grid's driver goes on to start the runs). An index is
    taken as NVML's, which is CUDA's order where every GPU of the node is the same model (CUDA puts the
    fastest first, then by PCI bus, as NVML does)."""
    return (pynvml.nvmlDeviceGetHandleByIndex(int(entry)) if entry.isdigit()
            else pynvml.nvmlDeviceGetHandleByUUID(entry))


class NvmlEnergyMeter:
    """GPU energy from NVML's total-energy counter, for the given CUDA devices.

    ``available`` is False where there is no NVML, no GPU, or no energy counter
    (GPUs older than Volta): callers then fall back to codecarbon's estimate,
    and ``reason`` says why.
    """

    def __init__(self, cuda_devices: Sequence[int]):
        self.cuda_devices = list(cuda_devices)
        self.available = False
        self.reason = "not started"
        self.names: list[str] = []
        self.uuids: list[str | None] = []
        self._handles: list[Any] = []
        self._start_mj: list[int] = []
        self._util_seen: list[int] = []
        self._nvml: Any = None

    def start(self) -> bool:
        if not self.cuda_devices:
            self.reason = "no GPU used"
            return False
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # no library / no driver
            self.reason = f"NVML unavailable ({type(exc).__name__}: {exc})"
            return False
        self._nvml = pynvml
        try:
            self._handles = [self._handle(pynvml, d) for d in self.cuda_devices]
            self.names = [_text(pynvml.nvmlDeviceGetName(h)) for h in self._handles]
            self._start_mj = self.read_mj()
        except Exception as exc:  # e.g. NVMLError_NotSupported on pre-Volta GPUs
            self.reason = f"no NVML energy counter ({type(exc).__name__}: {exc})"
            self.close()
            return False
        self.uuids = []
        for h in self._handles:
            uuid = None
            with contextlib.suppress(Exception):
                uuid = _text(pynvml.nvmlDeviceGetUUID(h))
            self.uuids.append(uuid)
        self._util_seen = [0] * len(self._handles)
        self.available = True
        self.reason = ""
        return True

    @staticmethod
    def _handle(pynvml: Any, cuda_index: int) -> Any:
        uuid = None
        with contextlib.suppress(Exception):
            import torch

            if torch.cuda.is_available():
                uuid = str(torch.cuda.get_device_properties(cuda_index).uuid)
        if uuid:
            return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        if visible and cuda_index < len(visible):
            return handle_for_entry(pynvml, visible[cuda_index])
        return pynvml.nvmlDeviceGetHandleByIndex(cuda_index)

    def read_mj(self) -> list[int]:
        """Each device's counter now, in millijoules since the driver loaded."""
        return [int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles]

    def read_device_mj(self, i: int) -> int:
        """Device ``i``'s counter now (millijoules)."""
        return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handles[i]))

    def read_kwh(self) -> list[float]:
        """Energy per device since :meth:`start`, in kWh."""
        if not self.available:
            return []
        deltas = [n - s for n, s in zip(self.read_mj(), self._start_mj)]
        if any(d < 0 for d in deltas):  # driver reloaded: the counter restarted
            raise RuntimeError("the NVML energy counter went backwards (driver reload?)")
        return [d / MJ_PER_KWH for d in deltas]

    def process_sm_utilisation(self, i: int) -> dict[int, float] | None:
        """Mean SM utilisation (%) per process on device ``i`` since the last call; None where NVML has none.

        NVML reports host process ids: in a container with its own pid namespace the
        ids do not match ``os.getpid()`` and callers fall back to time overlap.
        """
        if not self.available:
            return None
        try:
            samples = self._nvml.nvmlDeviceGetProcessUtilization(self._handles[i], self._util_seen[i])
        except Exception:  # NotSupported, NotFound (no samples yet), ...
            return None
        sums: dict[int, list[float]] = {}
        for s in samples:
            sums.setdefault(int(s.pid), []).append(float(s.smUtil))
            self._util_seen[i] = max(self._util_seen[i], int(s.timeStamp))
        return {pid: sum(v) / len(v) for pid, v in sums.items()} or None

    def nvml_indices(self) -> list[int] | None:
        """NVML indices of the meter's devices (for codecarbon's ``gpu_ids``), where known."""
        if not self.available:
            return None
        with contextlib.suppress(Exception):
            return [int(self._nvml.nvmlDeviceGetIndex(h)) for h in self._handles]
        return None

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None
