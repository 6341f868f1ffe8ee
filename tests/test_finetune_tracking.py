"""Efficiency tracking: NVML arithmetic (pynvml monkeypatched), codecarbon offline on this CPU, carbon maths."""

from __future__ import annotations

import json
import time

import pytest

from harness.energy import intensity
from harness.energy.intensity import grid_intensity
from harness.energy.nvml import MJ_PER_KWH, NvmlEnergyMeter
from harness.energy.tracker import EfficiencyTracker, add_previous, read_checkpoint_efficiency
from ranking.floor.errors import UserError


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


def _busy(cpu_seconds: float = 0.2) -> None:
    """Spend this much of the process's own CPU time: codecarbon's process mode charges the CPU by
    the process's CPU-time delta, so a sleeping process is charged 0 kWh (seen in CI)."""
    start = time.process_time()
    while time.process_time() - start < cpu_seconds:
        sum(i * i for i in range(10_000))


def test_codecarbon_offline_on_this_machine():
    with EfficiencyTracker(cuda_devices=[], measure_power_secs=1) as tracker:
        _busy()
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


def test_a_cpu_only_run_says_its_energy_is_an_estimate():
    with EfficiencyTracker(cuda_devices=[], measure_power_secs=1) as tracker:
        _busy()
    eff = tracker.result
    parts = eff["breakdown"]
    assert eff["methods"]["ram"] == "codecarbon RAM model" and parts["ram_kwh"] > 0 and parts["cpu_kwh"] > 0
    if eff["methods"]["cpu"].startswith("codecarbon intel_rapl"):  # a machine whose RAPL counters are readable
        assert eff["energy_basis"] == "mixed"
        assert eff["breakdown_basis"] == {"cpu": "measured", "ram": "modelled", "gpu": "none"}
        assert eff["modelled_fraction"] == parts["ram_kwh"] / eff["energy_kwh"]
    else:  # this project's machines: codecarbon's CPU model (a default TDP) and its RAM model
        assert eff["energy_basis"] == "estimate"
        assert eff["breakdown_basis"] == {"cpu": "modelled", "ram": "modelled", "gpu": "none"}
        assert eff["modelled_kwh"] == eff["energy_kwh"] and eff["modelled_fraction"] == 1.0


def test_nvml_energy_alone_is_measured(fake_nvml, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with EfficiencyTracker(cuda_devices=[0], codecarbon=False) as tracker:
        fake_nvml.counters[0] += 3_600_000
    eff = tracker.result
    assert eff["energy_basis"] == "measured"
    assert eff["breakdown_basis"] == {"cpu": "none", "ram": "none", "gpu": "measured"}
    assert eff["modelled_kwh"] == 0.0 and eff["modelled_fraction"] == 0.0


def test_nvml_gpu_with_codecarbon_cpu_and_ram_is_mixed(fake_nvml, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with EfficiencyTracker(cuda_devices=[0, 3], measure_power_secs=1) as tracker:
        fake_nvml.counters[0] += 3_600_000  # 0.001 kWh
        time.sleep(0.2)
    eff = tracker.result
    parts = eff["breakdown"]
    assert eff["methods"]["gpu"] == "NVML total-energy counter" and parts["gpu_kwh"] == pytest.approx(0.001)
    assert parts["ram_kwh"] > 0
    if eff["methods"]["cpu"].startswith("codecarbon intel_rapl"):  # pragma: no cover - readable RAPL
        modelled = parts["ram_kwh"]
    else:
        modelled = parts["cpu_kwh"] + parts["ram_kwh"]
        assert eff["breakdown_basis"]["cpu"] == ("modelled" if parts["cpu_kwh"] > 0 else "none")
    assert eff["energy_basis"] == "mixed"
    assert eff["breakdown_basis"]["ram"] == "modelled" and eff["breakdown_basis"]["gpu"] == "measured"
    assert eff["modelled_kwh"] == modelled
    assert eff["modelled_fraction"] == modelled / (parts["cpu_kwh"] + parts["ram_kwh"] + parts["gpu_kwh"])
    assert 0 < eff["modelled_fraction"] < 1


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
    assert "energy_basis" not in out  # neither attempt recorded it
    (tmp_path / "efficiency.json").write_text('{"energy_kwh": 1.0')  # torn file: ignored
    assert read_checkpoint_efficiency(tmp_path) is None


def _attempt(cpu, ram, gpu, parts):
    energy = cpu + ram + gpu
    modelled = sum(kwh for kwh, b in zip((cpu, ram, gpu), parts) if b == "modelled")
    by_part = dict(zip(("cpu", "ram", "gpu"), parts))
    from harness.energy.basis import total_basis

    return {"energy_kwh": energy, "duration_s": 10.0, "duration_h": 10 / 3600, "gpu_hours": 0.0, "co2_kg": 0.0,
            "breakdown": {"cpu_kwh": cpu, "ram_kwh": ram, "gpu_kwh": gpu}, "attempts": 1,
            "energy_basis": total_basis(by_part), "breakdown_basis": by_part, "modelled_kwh": modelled,
            "modelled_fraction": modelled / energy}


def test_resumed_attempts_keep_the_weaker_basis_and_add_the_modelled_energy():
    estimate = _attempt(0.5, 0.5, 0.0, ("modelled", "modelled", "none"))  # a CPU-only node
    measured = _attempt(0.0, 0.0, 3.0, ("none", "none", "measured"))  # NVML only
    assert (estimate["energy_basis"], measured["energy_basis"]) == ("estimate", "measured")
    out = add_previous(measured, estimate)
    assert out["energy_basis"] == "mixed"
    assert out["breakdown_basis"] == {"cpu": "modelled", "ram": "modelled", "gpu": "measured"}
    assert (out["modelled_kwh"], out["energy_kwh"], out["modelled_fraction"]) == (1.0, 4.0, 0.25)
    assert out["previous_attempts"]["energy_basis"] == "estimate"
    again = add_previous(_attempt(0.25, 0.75, 0.0, ("modelled", "modelled", "none")), estimate)
    assert (again["energy_basis"], again["modelled_kwh"], again["modelled_fraction"]) == ("estimate", 2.0, 1.0)
    # the same part measured in one attempt (RAPL) and modelled in the other
    rapl = _attempt(1.0, 1.0, 0.0, ("measured", "modelled", "none"))
    both = add_previous(rapl, estimate)
    assert both["energy_basis"] == "mixed" and both["breakdown_basis"]["cpu"] == "mixed"
    assert (both["modelled_kwh"], both["energy_kwh"], both["modelled_fraction"]) == (2.0, 3.0, 2.0 / 3.0)
    # an attempt from before the basis was recorded: the sum's basis is not known
    old = {k: v for k, v in estimate.items() if k not in ("energy_basis", "breakdown_basis", "modelled_kwh",
                                                           "modelled_fraction")}
    for cur, prev in ((measured, old), (old, measured)):
        out = add_previous(cur, prev)
        assert out["energy_basis"] == "unknown" and out["modelled_fraction"] is None and out["modelled_kwh"] is None
        assert out["breakdown_basis"] == {"cpu": "unknown", "ram": "unknown", "gpu": "unknown"}


def test_slurm_array_task_scope(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "1235")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "1234")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "7")
    intensity.scope_slurm_array_task()
    import os

    assert os.environ["SLURM_JOB_ID"] == "1234_7"


# ---------------------------------------------------------------------- runs sharing one GPU
class SharedGpu(FakeNvml):
    """One GPU (NVML index 0) with a UUID, an energy counter we set by hand, and optional per-process utilisation."""

    def __init__(self):
        super().__init__()
        self.counters = {0: 1_000_000}
        self.utilisation = None  # list of (pid, smUtil) samples, or None: NVML reports none

    def nvmlDeviceGetUUID(self, h):
        return "GPU-0000aaaa-1111-2222-3333-444455556666"

    def nvmlDeviceGetProcessUtilization(self, h, last_seen):
        if self.utilisation is None:
            import pynvml

            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        from types import SimpleNamespace

        return [SimpleNamespace(pid=pid, smUtil=u, timeStamp=last_seen + 1) for pid, u in self.utilisation]


@pytest.fixture
def shared_gpu(monkeypatch):
    import pynvml

    from harness.energy import ledger

    fake = SharedGpu()
    for name in dir(fake):
        if name.startswith("nvml"):
            monkeypatch.setattr(pynvml, name, getattr(fake, name), raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("VNR_GPU_SLOT", raising=False)
    clock = {"t": 1000.0}
    monkeypatch.setattr(ledger, "_now", lambda: clock["t"])
    fake.clock = clock
    return fake


def _at(gpu, t, mj_added, action):
    """Advance the GPU's clock to ``t`` and its counter by ``mj_added``, then do ``action``."""
    gpu.clock["t"] = t
    gpu.counters[0] += mj_added
    return action()


def test_three_overlapping_runs_split_the_measured_energy_exactly(shared_gpu, tmp_path):
    # A runs over [0, 30], B over [10, 40], C over [20, 50] (seconds after 1000). The GPU measures
    # 3000 mJ alone with A, 6000 with A+B, 9000 with A+B+C, 4000 with B+C, 2000 with C alone.
    def tracker(run_id):
        return EfficiencyTracker(cuda_devices=[0], codecarbon=False, country_iso_code="FRA",
                                 ledger_dir=tmp_path / "energy", run_id=run_id, tick_secs=0)

    a, b, c = tracker("run-a"), tracker("run-b"), tracker("run-c")
    _at(shared_gpu, 1000.0, 0, a.start)
    _at(shared_gpu, 1010.0, 3000, b.start)
    _at(shared_gpu, 1020.0, 6000, c.start)
    _at(shared_gpu, 1030.0, 9000, a.stop)
    _at(shared_gpu, 1040.0, 4000, b.stop)
    _at(shared_gpu, 1050.0, 2000, c.stop)
    ea, eb, ec = a.result, b.result, c.result
    # each interval split equally between the runs active in it (NVML reports no per-process utilisation)
    assert ea["breakdown"]["gpu_kwh"] == pytest.approx((3000 + 3000 + 3000) / MJ_PER_KWH, rel=1e-12)
    assert eb["breakdown"]["gpu_kwh"] == pytest.approx((3000 + 3000 + 2000) / MJ_PER_KWH, rel=1e-12)
    assert ec["breakdown"]["gpu_kwh"] == pytest.approx((3000 + 2000 + 2000) / MJ_PER_KWH, rel=1e-12)
    total = sum(e["breakdown"]["gpu_kwh"] for e in (ea, eb, ec))
    assert total == pytest.approx(24000 / MJ_PER_KWH, rel=1e-12)  # what the meter measured, exactly
    assert ea["energy_kwh"] == ea["breakdown"]["gpu_kwh"]  # codecarbon off: GPU only
    # GPU time: A has 10 s alone, half of 10 s, a third of 10 s; the three add up to the 50 s the GPU was busy
    assert [e["gpu_hours"] * 3600 for e in (ea, eb, ec)] == [pytest.approx(10 + 5 + 10 / 3),
                                                              pytest.approx(10 / 3 + 5 + 5),
                                                              pytest.approx(10 / 3 + 5 + 10)]
    assert sum(e["gpu_hours"] for e in (ea, eb, ec)) * 3600 == pytest.approx(50.0)
    assert [e["packing"] for e in (ea, eb, ec)] == [3, 3, 3]
    assert ea["attribution"]["method"] == "time-overlap"
    assert ea["attribution"]["colocated"] == ["run-b", "run-c"]
    assert eb["attribution"]["colocated"] == ["run-a", "run-c"]
    # share: the run's part of what the GPU measured over the run's own interval
    assert ea["attribution"]["share"] == pytest.approx(9000 / 18000)
    assert eb["attribution"]["share"] == pytest.approx(8000 / 19000)
    assert ec["attribution"]["share"] == pytest.approx(7000 / 15000)
    assert ea["gpu_kwh_measured"] == pytest.approx(18000 / MJ_PER_KWH)
    ledger_file = tmp_path / "energy" / "GPU-0000aaaa-1111-2222-3333-444455556666.jsonl"
    lines = ledger_file.read_text().splitlines()
    assert len(lines) == 6 and [json.loads(x)["kind"] for x in lines] == ["start"] * 3 + ["stop"] * 3


def test_a_run_alone_keeps_the_whole_gpu(shared_gpu, tmp_path):
    t = EfficiencyTracker(cuda_devices=[0], codecarbon=False, ledger_dir=tmp_path, run_id="solo", tick_secs=0)
    _at(shared_gpu, 1000.0, 0, t.start)
    _at(shared_gpu, 1036.0, 7200, t.stop)
    eff = t.result
    assert eff["breakdown"]["gpu_kwh"] == pytest.approx(7200 / MJ_PER_KWH)
    assert eff["packing"] == 1 and eff["gpu_hours"] == pytest.approx(0.01)
    assert eff["attribution"]["method"] == "sole" and eff["attribution"]["colocated"] == []
    assert eff["attribution"]["share"] == 1.0


def test_an_impossible_ledger_line_is_named_in_the_runs_attribution_and_not_charged(shared_gpu, tmp_path):
    t = EfficiencyTracker(cuda_devices=[0], codecarbon=False, ledger_dir=tmp_path, run_id="solo", tick_secs=0)
    _at(shared_gpu, 1000.0, 0, t.start)
    ledger_file = tmp_path / "GPU-0000aaaa-1111-2222-3333-444455556666.jsonl"
    with open(ledger_file, "a") as fh:  # a corrupt tick: a negative counter, then a time that is not finite
        fh.write(json.dumps({"attempt": t.attempt, "run": "solo", "kind": "tick", "t": 1010.0, "mj": -7}) + "\n")
        fh.write(json.dumps({"attempt": t.attempt, "run": "solo", "kind": "tick", "t": float("nan"), "mj": 1}) + "\n")
    _at(shared_gpu, 1036.0, 7200, t.stop)
    eff = t.result
    assert eff["breakdown"]["gpu_kwh"] == pytest.approx(7200 / MJ_PER_KWH)  # the two good events, exactly
    assert eff["gpu_hours"] == pytest.approx(0.01)
    assert eff["attribution"]["rejected"] == [f"{ledger_file.name}:2: mj is -7 (negative)",
                                              f"{ledger_file.name}:3: t is nan (not finite)"]


def test_split_by_process_utilisation_where_nvml_reports_it():
    from harness.energy.ledger import attribute, measured_total

    def ev(attempt, kind, t, mj, util=None):
        return {"attempt": attempt, "run": attempt.upper(), "pid": {"a": 101, "b": 202}[attempt], "kind": kind,
                "t": t, "mj": mj, "util": util}

    events = [
        ev("a", "start", 0.0, 0),
        ev("b", "start", 10.0, 1000),
        ev("a", "tick", 20.0, 5000, {"101": 60.0, "202": 20.0}),  # A did 3/4 of the work
        ev("b", "tick", 30.0, 9000),  # no per-process figures here: equal parts
        ev("a", "stop", 40.0, 11000, {"101": 0.0, "202": 0.0}),  # all idle: equal parts
        ev("b", "stop", 50.0, 12000),
    ]
    a, b = attribute(events, "a"), attribute(events, "b")
    assert a["gpu_mj"] == 1000 + 3000 + 2000 + 1000
    assert b["gpu_mj"] == 1000 + 2000 + 1000 + 1000
    assert a["gpu_mj"] + b["gpu_mj"] == measured_total(events)["gpu_mj"] == 12000
    assert a["method"] == "process-utilisation+time-overlap"
    assert a["gpu_seconds"] == pytest.approx(10 + 7.5 + 5 + 5) and b["gpu_seconds"] == pytest.approx(2.5 + 5 + 5 + 10)


def test_a_killed_run_stops_counting_at_its_last_event():
    from harness.energy.ledger import attribute

    events = [
        {"attempt": "a", "run": "A", "kind": "start", "t": 0.0, "mj": 0, "pid": 1},
        {"attempt": "k", "run": "K", "kind": "start", "t": 0.0, "mj": 0, "pid": 2},
        {"attempt": "k", "run": "K", "kind": "tick", "t": 10.0, "mj": 2000, "pid": 2},  # then K was killed
        {"attempt": "a", "run": "A", "kind": "stop", "t": 30.0, "mj": 6000, "pid": 1},
    ]
    a = attribute(events, "a", alive=lambda e: e["attempt"] != "k")
    assert a["gpu_mj"] == 0 + 1000 + 4000  # half of [0, 10], all of [10, 30]
    assert a["packing"] == 2 and a["colocated"] == ["K"]


def test_no_gpu_no_attribution():
    with EfficiencyTracker(cuda_devices=[], codecarbon=False, ledger_dir="/nonexistent", run_id="x") as t:
        pass
    assert t.result["packing"] == 1
    assert t.result["attribution"] == {"method": "no GPU", "colocated": [], "share": 1.0}
    assert t.result["gpu_hours"] == 0.0
    assert t.result["energy_basis"] == "none" and t.result["modelled_fraction"] is None  # nothing recorded energy


def test_resumed_run_keeps_its_largest_packing_and_all_neighbours():
    prev = {"energy_kwh": 1.0, "gpu_hours": 1.0, "breakdown": {"cpu_kwh": 0.0, "ram_kwh": 0.0, "gpu_kwh": 1.0},
            "gpu_kwh_measured": 4.0, "packing": 4, "attribution": {"method": "time-overlap", "colocated": ["b", "c"]}}
    cur = {"energy_kwh": 2.0, "gpu_hours": 1.0, "breakdown": {"cpu_kwh": 0.0, "ram_kwh": 0.0, "gpu_kwh": 2.0},
           "gpu_kwh_measured": 2.0, "packing": 1, "attribution": {"method": "sole", "colocated": []}}
    out = add_previous(cur, prev)
    assert out["packing"] == 4 and out["attribution"]["colocated"] == ["b", "c"]
    assert out["attribution"]["share"] == pytest.approx(3.0 / 6.0)
    assert out["attribution"]["method"] == "sole+time-overlap"


def test_unwritable_ledger_charges_the_whole_gpu_and_says_why(shared_gpu, tmp_path):
    blocker = tmp_path / "energy"
    blocker.write_text("a file where the ledger folder should be")
    t = EfficiencyTracker(cuda_devices=[0], codecarbon=False, ledger_dir=blocker, run_id="r", tick_secs=0)
    _at(shared_gpu, 1000.0, 0, t.start)
    _at(shared_gpu, 1010.0, 3600, t.stop)
    eff = t.result
    assert eff["breakdown"]["gpu_kwh"] == pytest.approx(3600 / MJ_PER_KWH) and eff["packing"] == 1
    assert eff["attribution"]["method"] == "whole GPU (no ledger)" and "ledger_error" in eff["attribution"]


def _append_events(path: str, counter: str, attempt: str, n: int) -> None:
    from harness.energy.ledger import GpuLedger

    def read_and_advance() -> int:  # a GPU counter shared by the processes (a file), read inside the lock
        value = int(open(counter).read()) + 7
        with open(counter, "w") as fh:
            fh.write(str(value))
        return value

    ledger = GpuLedger(path)
    ledger.append({"attempt": attempt, "run": attempt, "kind": "start", "pid": 0}, read_and_advance)
    for _ in range(n):
        ledger.append({"attempt": attempt, "run": attempt, "kind": "tick", "pid": 0}, read_and_advance)
    ledger.append({"attempt": attempt, "run": attempt, "kind": "stop", "pid": 0}, read_and_advance)


def test_ledger_appends_from_several_processes_stay_in_counter_order(tmp_path):
    import multiprocessing

    from harness.energy.ledger import GpuLedger, attribute, measured_total

    counter = tmp_path / "counter"
    counter.write_text("0")
    path = tmp_path / "energy" / "GPU-x.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_events, args=(str(path), str(counter), f"r{i}", 40)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    events = GpuLedger(path).events()
    assert len(events) == 3 * 42 and len(path.read_text().splitlines()) == 3 * 42  # no torn or lost line
    assert [e["mj"] for e in events] == [7 * (k + 1) for k in range(3 * 42)]  # the file's order is the counter's
    parts = [attribute(events, f"r{i}", alive=lambda e: False)["gpu_mj"] for i in range(3)]
    assert sum(parts) == pytest.approx(measured_total(events, alive=lambda e: False)["gpu_mj"], rel=1e-12)


def test_ledger_events_carry_nvml_per_process_utilisation(shared_gpu, tmp_path):
    import os

    me = os.getpid()
    shared_gpu.utilisation = [(me, 50.0), (me, 70.0), (4242, 10.0)]  # two samples of ours, one of another process

    def tracker(run_id):
        return EfficiencyTracker(cuda_devices=[0], codecarbon=False, ledger_dir=tmp_path, run_id=run_id, tick_secs=0)

    a, b = tracker("a"), tracker("b")
    _at(shared_gpu, 1000.0, 0, a.start)
    _at(shared_gpu, 1000.0, 0, b.start)
    _at(shared_gpu, 1010.0, 8000, a.stop)
    _at(shared_gpu, 1010.0, 0, b.stop)
    (path,) = tmp_path.glob("*.jsonl")
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert events[0]["util"] == {str(me): 60.0, "4242": 10.0}
    # both runs are this process (same pid): equal utilisation, equal parts, by the utilisation method
    assert a.result["attribution"]["method"] == "process-utilisation"
    assert a.result["breakdown"]["gpu_kwh"] == b.result["breakdown"]["gpu_kwh"] == pytest.approx(4000 / MJ_PER_KWH)
