"""Efficiency tracking: NVML arithmetic (pynvml monkeypatched), codecarbon offline on this CPU, carbon maths."""

from __future__ import annotations

import time

import pytest

from harness import tracking
from harness.tracking import (
    MJ_PER_KWH,
    EfficiencyTracker,
    NvmlEnergyMeter,
    add_previous,
    grid_intensity,
    read_checkpoint_efficiency,
)
from ranking.errors import UserError


class FakeNvml:
    """Stands in for the pynvml module: two GPUs whose energy counters we advance by hand."""

    def __init__(self):
        self.counters = {0: 1_000_000, 3: 5_000_000}  # mJ, keyed by NVML index
        self.shutdown = 0

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shutdown += 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):  # pragma: no cover - only with torch GPUs
        raise AssertionError("no UUIDs on a CPU machine")

    def nvmlDeviceGetIndex(self, h):
        return h

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA A100-SXM4-40GB"

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return self.counters[h]


@pytest.fixture
def fake_nvml(monkeypatch):
    import pynvml

    fake = FakeNvml()
    for name in dir(fake):
        if name.startswith("nvml"):
            monkeypatch.setattr(pynvml, name, getattr(fake, name))
    return fake


def test_nvml_meter_maps_cuda_devices_and_converts_millijoules(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,0")  # CUDA 0 is NVML 3
    meter = NvmlEnergyMeter([0])
    assert meter.start() and meter.names == ["NVIDIA A100-SXM4-40GB"]
    fake_nvml.counters[3] += 7_200_000  # 7.2e6 mJ = 2e-3 kWh
    fake_nvml.counters[0] += 99_999_999  # not ours
    assert meter.read_kwh() == [pytest.approx(7.2e6 / MJ_PER_KWH)]
    assert 7.2e6 / MJ_PER_KWH == pytest.approx(0.002)
    fake_nvml.counters[3] -= 10**9
    with pytest.raises(RuntimeError, match="went backwards"):
        meter.read_kwh()


def test_tracker_prefers_nvml_for_gpu_energy(fake_nvml, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    tracker = EfficiencyTracker(cuda_devices=[0, 3], codecarbon=False, country_iso_code="FRA")
    with tracker:
        fake_nvml.counters[0] += 3_600_000  # 0.001 kWh
        fake_nvml.counters[3] += 7_200_000  # 0.002 kWh
        time.sleep(0.05)
    eff = tracker.result
    assert eff["breakdown"]["gpu_kwh"] == pytest.approx(0.003)
    assert eff["energy_kwh"] == pytest.approx(0.003)
    assert eff["backend"] == "nvml" and eff["methods"]["gpu"] == "NVML total-energy counter"
    assert eff["gpu_count"] == 2 and eff["gpu_hours"] == pytest.approx(2 * eff["duration_h"])
    assert eff["duration_s"] >= 0.05
    assert eff["co2_kg"] == pytest.approx(0.003 * eff["grid_intensity_g_per_kwh"] / 1000)
    assert [g["energy_kwh"] for g in eff["gpus"]] == [pytest.approx(0.001), pytest.approx(0.002)]
    assert fake_nvml.shutdown == 1


def test_nvml_absent_is_skipped_cleanly():
    meter = NvmlEnergyMeter([])
    assert not meter.start() and meter.reason == "no GPU used" and meter.read_kwh() == []


def test_codecarbon_offline_on_this_machine():
    with EfficiencyTracker(cuda_devices=[], measure_power_secs=1) as tracker:
        total = sum(i * i for i in range(300_000))
        time.sleep(0.2)
    assert total > 0
    eff = tracker.result
    assert eff["backend"] == "codecarbon-offline"
    assert eff["gpu_hours"] == 0.0 and eff["breakdown"]["gpu_kwh"] == 0.0
    assert eff["breakdown"]["cpu_kwh"] > 0 and eff["breakdown"]["ram_kwh"] > 0
    parts = eff["breakdown"]
    assert eff["energy_kwh"] == pytest.approx(parts["cpu_kwh"] + parts["ram_kwh"] + parts["gpu_kwh"])
    # plausible for a couple of seconds on a small CPU: under 1 kW average
    assert eff["energy_kwh"] < eff["duration_h"] * 1.0
    assert eff["methods"]["cpu"].startswith("codecarbon ")
    assert eff["country_iso_code"] == "USA" and eff["grid_intensity_g_per_kwh"] > 0


def test_grid_intensity_is_configurable_and_validated(monkeypatch):
    usa = grid_intensity("USA")["g_per_kwh"]
    assert grid_intensity("USA", "california")["g_per_kwh"] != usa
    monkeypatch.setenv("VNR_COUNTRY_ISO_CODE", "fra")
    assert grid_intensity()["country_iso_code"] == "FRA"
    with pytest.raises(UserError, match=r"unknown country ISO code 'XXX'"):
        grid_intensity("XXX")


def test_previous_attempt_is_added(tmp_path):
    prev = {"energy_kwh": 2.0, "duration_s": 7200.0, "duration_h": 2.0, "gpu_hours": 2.0, "co2_kg": 0.5,
            "breakdown": {"cpu_kwh": 0.5, "ram_kwh": 0.5, "gpu_kwh": 1.0}, "attempts": 1, "backend": "nvml"}
    cur = {"energy_kwh": 1.0, "duration_s": 3600.0, "duration_h": 1.0, "gpu_hours": 1.0, "co2_kg": 0.25,
           "breakdown": {"cpu_kwh": 0.25, "ram_kwh": 0.25, "gpu_kwh": 0.5}, "attempts": 1}
    out = add_previous(cur, prev)
    assert (out["energy_kwh"], out["duration_h"], out["gpu_hours"], out["co2_kg"]) == (3.0, 3.0, 3.0, 0.75)
    assert out["breakdown"] == {"cpu_kwh": 0.75, "ram_kwh": 0.75, "gpu_kwh": 1.5}
    assert out["attempts"] == 2
    (tmp_path / "efficiency.json").write_text('{"energy_kwh": 1.0')  # torn file: ignored
    assert read_checkpoint_efficiency(tmp_path) is None


def test_slurm_array_task_scope(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "1235")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "1234")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "7")
    tracking.scope_slurm_array_task()
    import os

    assert os.environ["SLURM_JOB_ID"] == "1234_7"
