"""Efficiency tracking: energy (kWh), duration (h), GPU-hours and carbon (kg CO2eq) of a run.

Two sources, never the internet:

* **codecarbon's offline tracker** (``OfflineEmissionsTracker``) for CPU and RAM
  energy (and GPU energy where NVML has no energy counter). Which CPU method it
  used (RAPL counters, a TDP table × CPU load, or a constant) is recorded in
  ``efficiency.methods``; on machines without RAPL access the CPU figure is an
  estimate, and the record says so.
* **NVML's total-energy counter** (``nvmlDeviceGetTotalEnergyConsumption``,
  millijoules since the driver loaded; Volta and newer) for the GPUs the run
  used, read at start and stop. Where present it is the GPU figure.

Carbon = total energy × the grid intensity of a configured country (ISO 3166
alpha-3, e.g. ``USA``, ``FRA``, ``DEU``; optional region for USA/CAN, e.g.
``california``), taken from codecarbon's bundled energy-mix data. The default
is :data:`DEFAULT_COUNTRY` (``USA``), overridable per call, or with the
environment variables ``VNR_COUNTRY_ISO_CODE`` / ``VNR_REGION``. No location
look-up is ever made: the country is configuration, not detection.

Use it around any block of work::

    with EfficiencyTracker(country_iso_code="FRA") as tracker:
        work()
    tracker.result["energy_kwh"], tracker.result["co2_kg"]

or as a Trainer callback: ``Trainer(..., callbacks=[EfficiencyCallback(EfficiencyTracker())])``;
the callback also stores the running totals in every checkpoint
(``efficiency.json``) so a resumed run adds the energy spent before the interruption.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError

log = logging.getLogger(__name__)

DEFAULT_COUNTRY = "USA"
COUNTRY_ENV = "VNR_COUNTRY_ISO_CODE"
REGION_ENV = "VNR_REGION"
CHECKPOINT_FILE = "efficiency.json"
MJ_PER_KWH = 3.6e9  # millijoules in one kilowatt-hour
_SUMMED = ("energy_kwh", "duration_s", "duration_h", "gpu_hours", "co2_kg")
_PARTS = ("cpu_kwh", "ram_kwh", "gpu_kwh")


def scope_slurm_array_task() -> None:
    """In a SLURM array task, point ``SLURM_JOB_ID`` at this task (``<array job>_<task>``).

    codecarbon reads ``SLURM_JOB_ID`` when it is imported to ask ``scontrol`` for the
    job's CPUs; for an array task the array's own id would describe the whole array.
    """
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        os.environ["SLURM_JOB_ID"] = f"{array_job}_{task}"


def resolve_location(country_iso_code: str | None = None, region: str | None = None) -> tuple[str, str | None]:
    """(country, region): the arguments, else ``$VNR_COUNTRY_ISO_CODE`` / ``$VNR_REGION``, else USA."""
    country = (country_iso_code or os.environ.get(COUNTRY_ENV) or DEFAULT_COUNTRY).strip().upper()
    region = region or os.environ.get(REGION_ENV) or None
    return country, (region.strip().lower() if region else None)


def grid_intensity(country_iso_code: str | None = None, region: str | None = None) -> dict[str, Any]:
    """Grid carbon intensity (g CO2eq/kWh) from codecarbon's bundled data, offline.

    >>> round(grid_intensity("FRA")["g_per_kwh"]) < round(grid_intensity("POL")["g_per_kwh"])
    True
    """
    country, region = resolve_location(country_iso_code, region)
    scope_slurm_array_task()
    from codecarbon.core.emissions import Emissions
    from codecarbon.core.units import Energy
    from codecarbon.external.geography import GeoMetadata
    from codecarbon.input import DataSource

    source = DataSource()
    mix = source.get_global_energy_mix_data()
    if country not in mix:
        raise UserError(
            f"unknown country ISO code {country!r} for the carbon intensity: use an ISO 3166 alpha-3 code "
            f"such as USA, FRA, DEU, GBR (option --country or {COUNTRY_ENV})"
        )
    geo = GeoMetadata(country_iso_code=country, country_name=mix[country].get("country_name"), region=region)
    # electricitymaps_api_token=None: never ask the Electricity Maps API, even if a config file names a token.
    emissions = Emissions(source, electricitymaps_api_token=None)
    kg = emissions.get_private_infra_emissions(Energy.from_energy(kWh=1.0), geo)
    where = f"{country}/{region}" if region else country
    return {
        "g_per_kwh": float(kg) * 1000.0,
        "country_iso_code": country,
        "country_name": geo.country_name,
        "region": region,
        "source": f"codecarbon {_codecarbon_version()} bundled energy-mix data ({where})",
    }


def _codecarbon_version() -> str:
    try:
        from codecarbon import __version__

        return str(__version__)
    except Exception:  # pragma: no cover
        return "?"


# ---------------------------------------------------------------------- NVML
class NvmlEnergyMeter:
    """GPU energy from NVML's total-energy counter, for the given CUDA devices.

    CUDA ordinals are mapped to NVML devices by UUID (NVML ignores
    ``CUDA_VISIBLE_DEVICES``); without torch, by the ``CUDA_VISIBLE_DEVICES`` list.
    ``available`` is False where there is no NVML, no GPU, or no energy counter
    (GPUs older than Volta): callers then fall back to codecarbon's estimate.
    """

    def __init__(self, cuda_devices: Sequence[int]):
        self.cuda_devices = list(cuda_devices)
        self.available = False
        self.reason = "not started"
        self.names: list[str] = []
        self._handles: list[Any] = []
        self._start_mj: list[int] = []
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
            self._start_mj = [int(pynvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles]
        except Exception as exc:  # e.g. NVMLError_NotSupported on pre-Volta GPUs
            self.reason = f"no NVML energy counter ({type(exc).__name__}: {exc})"
            self.close()
            return False
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
            entry = visible[cuda_index]
            if entry.isdigit():
                return pynvml.nvmlDeviceGetHandleByIndex(int(entry))
            return pynvml.nvmlDeviceGetHandleByUUID(entry)
        return pynvml.nvmlDeviceGetHandleByIndex(cuda_index)

    def read_kwh(self) -> list[float]:
        """Energy per device since :meth:`start`, in kWh."""
        if not self.available:
            return []
        now = [int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles]
        deltas = [n - s for n, s in zip(now, self._start_mj)]
        if any(d < 0 for d in deltas):  # driver reloaded: the counter restarted
            raise RuntimeError("the NVML energy counter went backwards (driver reload?)")
        return [d / MJ_PER_KWH for d in deltas]

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_indices(meter: NvmlEnergyMeter) -> list[int] | None:
    """NVML indices of the meter's devices (for codecarbon's ``gpu_ids``), where known."""
    if not meter.available:
        return None
    with contextlib.suppress(Exception):
        return [int(meter._nvml.nvmlDeviceGetIndex(h)) for h in meter._handles]
    return None


# ---------------------------------------------------------------------- tracker
def _default_cuda_devices() -> list[int]:
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            return list(range(torch.cuda.device_count()))
    return []


class EfficiencyTracker:
    """Energy, duration, GPU-hours and carbon of whatever runs between :meth:`start` and :meth:`stop`.

    ``cuda_devices``: the CUDA ordinals the work uses (default: every visible GPU);
    GPU-hours = duration × their number. ``previous``: an earlier attempt's result
    (a resumed run), added to this one's totals. ``codecarbon=False`` /
    ``nvml=False`` switch a source off (the clock still runs).
    """

    def __init__(
        self,
        *,
        country_iso_code: str | None = None,
        region: str | None = None,
        cuda_devices: Sequence[int] | None = None,
        measure_power_secs: float = 15.0,
        tracking_mode: str = "process",
        codecarbon: bool = True,
        nvml: bool = True,
        previous: Mapping[str, Any] | None = None,
    ):
        if tracking_mode not in ("process", "machine"):
            raise UserError(f"tracking mode {tracking_mode!r}: use 'process' or 'machine'")
        self.country_iso_code, self.region = resolve_location(country_iso_code, region)
        self.intensity = grid_intensity(self.country_iso_code, self.region)  # validates the country
        self.cuda_devices = list(_default_cuda_devices() if cuda_devices is None else cuda_devices)
        self.measure_power_secs = measure_power_secs
        self.tracking_mode = tracking_mode
        self.use_codecarbon = codecarbon
        self.use_nvml = nvml
        self.previous = dict(previous) if previous else None
        self.result: dict[str, Any] | None = None
        self._t0: float | None = None
        self._cc: Any = None
        self._cc_error = ""
        self._nvml = NvmlEnergyMeter(self.cuda_devices)

    # lifecycle
    @property
    def started(self) -> bool:
        return self._t0 is not None

    def start(self) -> EfficiencyTracker:
        if self.started:
            return self
        scope_slurm_array_task()
        if self.use_nvml:
            self._nvml.start()
        if self.use_codecarbon:
            self._cc = self._start_codecarbon()
        self._t0 = time.perf_counter()
        return self

    def _start_codecarbon(self) -> Any:
        try:
            logging.getLogger("codecarbon").setLevel(logging.ERROR)
            from codecarbon import OfflineEmissionsTracker

            tracker = OfflineEmissionsTracker(
                country_iso_code=self.country_iso_code,
                region=self.region,
                project_name="vnr",
                measure_power_secs=self.measure_power_secs,
                tracking_mode=self.tracking_mode,
                gpu_ids=_nvml_indices(self._nvml),
                log_level="error",
                save_to_file=False,
                save_to_api=False,
                save_to_logger=False,
                save_to_prometheus=False,
                save_to_logfire=False,
                output_handlers=[],
                electricitymaps_api_token=None,
                allow_multiple_runs=True,  # several runs may share a node
            )
            logging.getLogger("codecarbon").setLevel(logging.ERROR)
            tracker.start()
            return tracker
        except Exception as exc:  # keep the run going; the record says what is missing
            self._cc_error = f"{type(exc).__name__}: {exc}"
            log.warning("codecarbon could not start (%s): CPU/RAM energy will be missing", self._cc_error)
            return None

    def snapshot(self) -> dict[str, Any]:
        """The totals so far (including ``previous``), without stopping."""
        if not self.started:
            raise RuntimeError("start the tracker first")
        cc = None
        if self._cc is not None:
            try:
                self._cc.flush()
                cc = self._cc._prepare_emissions_data()  # codecarbon's running totals (no public getter)
            except Exception as exc:  # pragma: no cover - defensive
                self._cc_error = f"{type(exc).__name__}: {exc}"
        return self._build(time.perf_counter() - self._t0, cc)

    def stop(self) -> dict[str, Any]:
        if self.result is not None:
            return self.result
        if not self.started:
            raise RuntimeError("start the tracker first")
        duration = time.perf_counter() - self._t0
        cc = None
        if self._cc is not None:
            self._cc.stop()
            cc = getattr(self._cc, "final_emissions_data", None)
        self.result = self._build(duration, cc)
        self._nvml.close()
        return self.result

    def __enter__(self) -> EfficiencyTracker:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # the record
    def _methods(self, nvml_ok: bool) -> dict[str, str]:
        methods = {"cpu": "none", "ram": "none", "gpu": "none" if self.cuda_devices else "no GPU used"}
        if self._cc is not None:
            for hw in getattr(self._cc, "_hardware", []):
                kind = type(hw).__name__
                if kind == "CPU":
                    mode = getattr(hw, "_mode", "?")
                    tdp = getattr(hw, "_tdp", None)
                    methods["cpu"] = f"codecarbon {mode}" + (f" (TDP {tdp} W)" if tdp and mode != "intel_rapl" else "")
                elif kind == "RAM":
                    methods["ram"] = "codecarbon RAM model"
                elif kind == "GPU" and not nvml_ok:
                    methods["gpu"] = "codecarbon NVML power sampling"
        if nvml_ok:
            methods["gpu"] = "NVML total-energy counter"
        return methods

    def _build(self, duration_s: float, cc: Any) -> dict[str, Any]:
        nvml_kwh: list[float] = []
        nvml_ok = self._nvml.available
        if nvml_ok:
            try:
                nvml_kwh = self._nvml.read_kwh()
            except Exception as exc:
                nvml_ok = False
                self._nvml.reason = str(exc)
        cpu = float(cc.cpu_energy) if cc is not None else 0.0
        ram = float(cc.ram_energy) if cc is not None else 0.0
        gpu_cc = float(cc.gpu_energy) if cc is not None else 0.0
        gpu = sum(nvml_kwh) if nvml_ok else gpu_cc
        energy = cpu + ram + gpu
        n_gpus = len(self.cuda_devices)
        sources = (["codecarbon-offline"] if cc is not None else []) + (["nvml"] if nvml_ok else [])
        out: dict[str, Any] = {
            "energy_kwh": energy,
            "duration_h": duration_s / 3600.0,
            "duration_s": duration_s,
            "gpu_hours": duration_s / 3600.0 * n_gpus,
            "co2_kg": energy * self.intensity["g_per_kwh"] / 1000.0,
            "breakdown": {"cpu_kwh": cpu, "ram_kwh": ram, "gpu_kwh": gpu},
            "backend": "+".join(sources) or "clock-only",
            "methods": self._methods(nvml_ok),
            "grid_intensity_g_per_kwh": self.intensity["g_per_kwh"],
            "grid_source": self.intensity["source"],
            "country_iso_code": self.country_iso_code,
            "region": self.region,
            "gpu_count": n_gpus,
            "gpus": [{"cuda_index": d, "name": n, "energy_kwh": e}
                     for d, n, e in zip(self.cuda_devices, self._nvml.names, nvml_kwh)] if nvml_ok else [],
            "gpu_kwh_codecarbon": gpu_cc if cc is not None else None,
            "tracking_mode": self.tracking_mode,
            "measure_power_secs": self.measure_power_secs,
            "pue": 1.0,
            "codecarbon_version": _codecarbon_version() if cc is not None else None,
            "attempts": 1,
        }
        if cc is None and self.use_codecarbon:
            out["codecarbon_error"] = self._cc_error or "no data"
        if self.cuda_devices and not nvml_ok and self.use_nvml:
            out["nvml_note"] = self._nvml.reason
        if self.previous:
            out = add_previous(out, self.previous)
        return out


def add_previous(current: Mapping[str, Any], previous: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` plus the totals of an earlier attempt of the same run (before a resume).

    >>> add_previous({"energy_kwh": 1.0, "duration_s": 10.0, "duration_h": 0.5, "gpu_hours": 0.5, "co2_kg": 0.1,
    ...               "breakdown": {"cpu_kwh": 1.0, "ram_kwh": 0.0, "gpu_kwh": 0.0}, "attempts": 1},
    ...              {"energy_kwh": 2.0, "duration_s": 5.0, "duration_h": 0.25, "gpu_hours": 0.25, "co2_kg": 0.2,
    ...               "breakdown": {"cpu_kwh": 2.0, "ram_kwh": 0.0, "gpu_kwh": 0.0}, "attempts": 1})["energy_kwh"]
    3.0
    """
    out = dict(current)
    for key in _SUMMED:
        out[key] = float(current.get(key) or 0.0) + float(previous.get(key) or 0.0)
    out["breakdown"] = {
        k: float(current.get("breakdown", {}).get(k) or 0.0) + float(previous.get("breakdown", {}).get(k) or 0.0)
        for k in _PARTS
    }
    out["attempts"] = int(current.get("attempts", 1)) + int(previous.get("attempts", 1))
    out["previous_attempts"] = {k: previous.get(k) for k in (*_SUMMED, "backend")}
    return out


def read_checkpoint_efficiency(checkpoint: str | Path | None) -> dict[str, Any] | None:
    """The efficiency totals stored in a checkpoint by :class:`EfficiencyCallback`, if any."""
    if checkpoint is None:
        return None
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        data = json.loads((Path(checkpoint) / CHECKPOINT_FILE).read_text())
        if isinstance(data, dict) and all(math.isfinite(float(data.get(k) or 0.0)) for k in _SUMMED):
            return data
    return None


def _callback_class() -> type:
    from transformers import TrainerCallback

    from harness.store import atomic_write_json

    class EfficiencyCallback(TrainerCallback):
        """Runs an :class:`EfficiencyTracker` over ``Trainer.train`` and saves its totals in each checkpoint."""

        def __init__(self, tracker: EfficiencyTracker):
            self.tracker = tracker

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.tracker.start()

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero and self.tracker.started and self.tracker.result is None:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if folder.is_dir():
                    atomic_write_json(folder / CHECKPOINT_FILE, self.tracker.snapshot())

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.tracker.started:
                self.tracker.stop()

    return EfficiencyCallback


def __getattr__(name: str) -> Any:
    # EfficiencyCallback subclasses transformers' TrainerCallback: build it on first use, so that
    # importing this module (for the context manager) stays free of torch and transformers.
    if name == "EfficiencyCallback":
        cls = _callback_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
