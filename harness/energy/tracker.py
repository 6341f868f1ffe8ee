"""The efficiency tracker: energy (kWh), duration (h), GPU-hours and carbon (kg CO2eq) of one run.

It combines, never asking the internet:

* **codecarbon's offline tracker** (``OfflineEmissionsTracker``) for CPU and RAM
  energy (and GPU energy where NVML has no energy counter). Which CPU method it
  used (RAPL counters, a TDP table × CPU load, or a constant) is recorded in
  ``efficiency.methods``; on machines without RAPL access the CPU figure is an
  estimate, and the RAM figure always is (a model of the installed memory).
* **NVML's total-energy counter** (:mod:`harness.energy.nvml`) for the GPUs the run
  used. Where present it is the GPU figure.
* **the GPU ledger** (:mod:`harness.energy.ledger`) when given ``ledger_dir`` and
  ``run_id``: several runs may share one GPU, and then a run's GPU energy and
  GPU-hours are its attributed part of what the GPU measured, so the co-located
  runs' figures add up to the meter's. ``efficiency["packing"]`` is the largest
  number of runs that shared the GPU with it (1 when alone) and
  ``efficiency["attribution"]`` = ``{"method", "colocated", "share"}``.
* the grid carbon intensity of a configured country (:mod:`harness.energy.intensity`).

How the energy was obtained (:mod:`harness.energy.basis`) is in the record:
``efficiency["energy_basis"]`` is ``measured`` (every part with energy read from a
hardware counter: NVML for the GPU, RAPL for the CPU), ``estimate`` (every part
modelled, as on a CPU-only machine without RAPL: then the figure is in effect a
time proxy), ``mixed``, or ``none`` (nothing recorded energy);
``efficiency["breakdown_basis"]`` says it per part (``measured`` / ``modelled`` /
``none``), ``modelled_kwh`` how much of the energy was modelled and
``modelled_fraction`` = ``modelled_kwh / energy_kwh`` (None when the energy is 0).

Use it around any block of work::

    with EfficiencyTracker(country_iso_code="FRA") as tracker:
        work()
    tracker.result["energy_kwh"], tracker.result["co2_kg"]

or through the Trainer callback :class:`harness.finetune.callbacks.EfficiencyCallback`,
which also stores the running totals in every checkpoint (``efficiency.json``) so
that a resumed run adds what it spent before the interruption.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.energy import basis
from harness.energy.intensity import (
    codecarbon_version,
    grid_intensity,
    resolve_location,
    scope_slurm_array_task,
)
from harness.energy.ledger import SLOT_ENV, START, STOP, TICK, GpuLedger, attribute, ledger_name
from harness.energy.nvml import MJ_PER_KWH, NvmlEnergyMeter
from ranking.floor.errors import UserError
from ranking.floor.json_io import read_totals

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "efficiency.json"
_SUMMED = ("energy_kwh", "duration_s", "duration_h", "gpu_hours", "co2_kg")
_PARTS = ("cpu_kwh", "ram_kwh", "gpu_kwh")
NO_GPU = "no GPU"
WHOLE_GPU = "whole GPU (no ledger)"


def _default_cuda_devices() -> list[int]:
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            return list(range(torch.cuda.device_count()))
    return []


class EfficiencyTracker:
    """Energy, duration, GPU-hours and carbon of whatever runs between :meth:`start` and :meth:`stop`.

    ``cuda_devices``: the CUDA ordinals the work uses (default: every visible GPU).
    ``previous``: an earlier attempt's result (a resumed run), added to this one's
    totals. ``codecarbon=False`` / ``nvml=False`` switch a source off (the clock
    still runs). ``ledger_dir`` + ``run_id``: record this run in the per-GPU
    ledgers under ``ledger_dir`` (``<output>/energy``) and attribute each GPU's
    energy between the runs sharing it; a tick is written every ``tick_secs``
    (default ``measure_power_secs``). Without a ledger a run is charged its GPUs'
    whole energy and GPU-hours = duration × GPUs.
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
        ledger_dir: str | Path | None = None,
        run_id: str | None = None,
        tick_secs: float | None = None,
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
        self.ledger_dir = Path(ledger_dir) if ledger_dir is not None else None
        self.run_id = run_id
        self.tick_secs = tick_secs if tick_secs is not None else measure_power_secs
        self.attempt = uuid.uuid4().hex
        self.result: dict[str, Any] | None = None
        self._t0: float | None = None
        self._cc: Any = None
        self._cc_error = ""
        self._nvml = NvmlEnergyMeter(self.cuda_devices)
        self._ledgers: list[GpuLedger] = []
        self._ledger_error = ""
        self._ledger_rejected: list[str] = []
        self._lock = threading.Lock()
        self._stop_ticks = threading.Event()
        self._ticker: threading.Thread | None = None

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
        if self._nvml.available and self.ledger_dir is not None and self.run_id:
            self._open_ledgers()
        if self.use_codecarbon:
            self._cc = self._start_codecarbon()
        self._t0 = time.perf_counter()
        return self

    def _open_ledgers(self) -> None:
        slot = os.environ.get(SLOT_ENV) if len(self.cuda_devices) == 1 else None
        names = [ledger_name(u, slot) for u in self._nvml.uuids]
        if any(n is None for n in names):
            log.warning("no GPU UUID and no %s: each run is charged its GPU's whole energy", SLOT_ENV)
            return
        self._ledgers = [GpuLedger(self.ledger_dir / f"{n}.jsonl") for n in names]
        try:
            self._append(START)
        except OSError as exc:  # e.g. a read-only output: measure on, without sharing the GPU's energy out
            log.warning("cannot write the GPU energy ledger under %s (%s): each run is charged its GPU's "
                        "whole energy", self.ledger_dir, exc)
            self._ledger_error = f"{type(exc).__name__}: {exc}"
            self._ledgers = []
            return
        if self.tick_secs and self.tick_secs > 0:
            self._ticker = threading.Thread(target=self._tick_loop, name="vnr-energy-ledger", daemon=True)
            self._ticker.start()

    def _append(self, kind: str) -> None:
        base = {"attempt": self.attempt, "run": self.run_id, "kind": kind, "pid": os.getpid(),
                "host": socket.gethostname()}
        with self._lock:
            for i, ledger in enumerate(self._ledgers):
                ledger.append(base, lambda i=i: self._nvml.read_device_mj(i),
                              lambda i=i: self._nvml.process_sm_utilisation(i))

    def _tick_loop(self) -> None:
        while not self._stop_ticks.wait(self.tick_secs):
            try:
                self._append(TICK)
            except Exception as exc:  # pragma: no cover - a full disk must not kill training
                log.warning("could not write to the GPU energy ledger: %s", exc)

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
                gpu_ids=self._nvml.nvml_indices(),
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
                cc = self._cc._prepare_emissions_data()  # codecarbon 3's running totals (no public getter)
            except Exception as exc:  # pragma: no cover - defensive
                self._cc_error = f"{type(exc).__name__}: {exc}"
        return self._build(time.perf_counter() - self._t0, cc, final=False)

    def stop(self) -> dict[str, Any]:
        if self.result is not None:
            return self.result
        if not self.started:
            raise RuntimeError("start the tracker first")
        duration = time.perf_counter() - self._t0
        self._stop_ticks.set()
        if self._ticker is not None:
            self._ticker.join(timeout=30)
        cc = None
        if self._cc is not None:
            self._cc.stop()
            cc = getattr(self._cc, "final_emissions_data", None)
        self.result = self._build(duration, cc, final=True)
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
            for hw in getattr(self._cc, "_hardware", []):  # codecarbon 3's hardware list (private)
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

    def _attribution(self, final: bool) -> list[dict[str, Any]] | None:
        """Per device: this attempt's part of the GPU, from the ledgers (None without ledgers)."""
        if not self._ledgers:
            return None
        self._append(STOP if final else TICK)
        with self._lock:
            parts = [attribute(ledger.events(), self.attempt) for ledger in self._ledgers]
            self._ledger_rejected = [r for ledger in self._ledgers for r in ledger.rejected]
            return parts

    def _build(self, duration_s: float, cc: Any, *, final: bool) -> dict[str, Any]:
        nvml_kwh: list[float] = []
        nvml_ok = self._nvml.available
        parts = None
        if nvml_ok:
            try:
                nvml_kwh = self._nvml.read_kwh()
            except Exception as exc:
                nvml_ok = False
                self._nvml.reason = str(exc)
        if nvml_ok:
            try:
                parts = self._attribution(final)
            except Exception as exc:  # pragma: no cover - a broken ledger must not lose the run
                log.warning("could not attribute the GPU's energy from the ledger: %s", exc)
                self._ledger_error = f"{type(exc).__name__}: {exc}"
        cpu = float(cc.cpu_energy) if cc is not None else 0.0
        ram = float(cc.ram_energy) if cc is not None else 0.0
        gpu_cc = float(cc.gpu_energy) if cc is not None else 0.0
        n_gpus = len(self.cuda_devices)
        if parts is not None:
            per_gpu = [p["gpu_mj"] / MJ_PER_KWH for p in parts]
            gpu = sum(per_gpu)
            gpu_measured = sum(p["gpu_mj_measured"] for p in parts) / MJ_PER_KWH
            gpu_hours = sum(p["gpu_seconds"] for p in parts) / 3600.0
            packing = max(p["packing"] for p in parts)
            methods = sorted({p["method"] for p in parts})
            attribution = {
                "method": "+".join(methods),
                "colocated": sorted({r for p in parts for r in p["colocated"]}),
                "share": gpu / gpu_measured if gpu_measured > 0 else 1.0,
                "ledgers": [str(ledger.path.name) for ledger in self._ledgers],
            }
            if any(p["counter_gaps"] for p in parts):
                attribution["counter_gaps"] = sum(p["counter_gaps"] for p in parts)
            rejected = [*self._ledger_rejected, *(r for p in parts for r in p["rejected"])]
            if rejected:  # ledger lines and intervals outside physical bounds: charged to no run
                attribution["rejected"] = rejected[:20] + ([f"... and {len(rejected) - 20} more"]
                                                           if len(rejected) > 20 else [])
        else:
            per_gpu = nvml_kwh
            gpu = sum(nvml_kwh) if nvml_ok else gpu_cc
            gpu_measured = gpu
            gpu_hours = duration_s / 3600.0 * n_gpus
            packing = 1
            attribution = {"method": WHOLE_GPU if n_gpus else NO_GPU, "colocated": [], "share": 1.0}
            if self._ledger_error:
                attribution["ledger_error"] = self._ledger_error
        slot = os.environ.get(SLOT_ENV)
        if slot:
            attribution["gpu_slot"] = slot
        energy = cpu + ram + gpu
        breakdown = {"cpu_kwh": cpu, "ram_kwh": ram, "gpu_kwh": gpu}
        part_methods = self._methods(nvml_ok)
        by_part = basis.parts_basis(part_methods, breakdown)
        modelled = basis.modelled_kwh(by_part, breakdown)
        sources = (["codecarbon-offline"] if cc is not None else []) + (["nvml"] if nvml_ok else [])
        out: dict[str, Any] = {
            "energy_kwh": energy,
            "duration_h": duration_s / 3600.0,
            "duration_s": duration_s,
            "gpu_hours": gpu_hours,
            "co2_kg": energy * self.intensity["g_per_kwh"] / 1000.0,
            "breakdown": breakdown,
            "energy_basis": basis.total_basis(by_part),
            "breakdown_basis": by_part,
            "modelled_kwh": modelled,
            "modelled_fraction": modelled / energy if energy > 0 else None,
            "gpu_kwh_measured": gpu_measured,
            "packing": packing,
            "attribution": attribution,
            "backend": "+".join(sources) or "clock-only",
            "methods": part_methods,
            "grid_intensity_g_per_kwh": self.intensity["g_per_kwh"],
            "grid_source": self.intensity["source"],
            "country_iso_code": self.country_iso_code,
            "region": self.region,
            "gpu_count": n_gpus,
            "gpus": [{"cuda_index": d, "name": n, "energy_kwh": e}
                     for d, n, e in zip(self.cuda_devices, self._nvml.names, per_gpu)] if nvml_ok else [],
            "gpu_kwh_codecarbon": gpu_cc if cc is not None else None,
            "tracking_mode": self.tracking_mode,
            "measure_power_secs": self.measure_power_secs,
            "pue": 1.0,
            "codecarbon_version": codecarbon_version() if cc is not None else None,
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

    Energies, durations, GPU-hours and carbon add up; ``packing`` is the larger of the
    two, the co-located runs the union, and the share is recomputed over both. The
    energy's basis (:mod:`harness.energy.basis`) is the weaker of the two, per part and
    in total (measured with an estimate is ``mixed``; an attempt that did not record
    its basis makes it ``unknown``), and the modelled kWh add up.

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
    out["previous_attempts"] = {k: previous.get(k) for k in (*_SUMMED, "backend", "energy_basis")}
    if "energy_basis" in current or "energy_basis" in previous:
        out["energy_basis"] = basis.combine(current.get("energy_basis"), previous.get("energy_basis"))
        cur, prev = current.get("breakdown_basis") or {}, previous.get("breakdown_basis") or {}
        out["breakdown_basis"] = {p: basis.combine(cur.get(p), prev.get(p)) for p in basis.PARTS}
        known = out["energy_basis"] != basis.UNKNOWN
        modelled = (float(current.get("modelled_kwh") or 0.0) + float(previous.get("modelled_kwh") or 0.0)
                    if known else None)
        out["modelled_kwh"] = modelled
        out["modelled_fraction"] = (modelled / out["energy_kwh"]
                                    if modelled is not None and out["energy_kwh"] > 0 else None)
    if "packing" in current or "packing" in previous:
        out["packing"] = max(int(current.get("packing") or 1), int(previous.get("packing") or 1))
    if "gpu_kwh_measured" in current or "gpu_kwh_measured" in previous:
        measured = float(current.get("gpu_kwh_measured") or 0.0) + float(previous.get("gpu_kwh_measured") or 0.0)
        out["gpu_kwh_measured"] = measured
        cur, prev = current.get("attribution") or {}, previous.get("attribution") or {}
        methods = {m for a in (cur, prev) for m in str(a.get("method") or "").split("+") if m}
        out["attribution"] = {
            **cur,
            "method": "+".join(sorted(methods)),
            "colocated": sorted(set(cur.get("colocated") or []) | set(prev.get("colocated") or [])),
            "share": out["breakdown"]["gpu_kwh"] / measured if measured > 0 else 1.0,
        }
    return out


def read_checkpoint_efficiency(checkpoint: str | Path | None) -> dict[str, Any] | None:
    """The efficiency totals stored in a checkpoint by the efficiency callback, if any."""
    if checkpoint is None:
        return None
    return read_totals(Path(checkpoint) / CHECKPOINT_FILE, _SUMMED, what="efficiency totals", warn=log.warning)
