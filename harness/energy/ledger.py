"""Who used a shared GPU when, and each run's share of the energy the GPU's meter measured.

One append-only JSON-lines file per GPU (``<output>/energy/<gpu>.jsonl``, where
``<gpu>`` is the NVML UUID, else ``$VNR_GPU_SLOT``). Every run on that GPU appends
an event when it starts, every few seconds while it runs (a tick) and when it
stops. Each event is written under an exclusive ``flock`` and carries the GPU's
total-energy counter read *inside* the lock, so the file's order is the
counter's order: between two consecutive events ``k`` and ``k+1`` the GPU used
``mj[k+1] - mj[k]`` millijoules, and the runs active then are known.

Attribution (:func:`attribute`): each interval between consecutive events is split
between the runs active in it —

* by per-process SM utilisation when event ``k+1`` carries NVML's per-process
  utilisation for every active run's process and it is not all zero
  (``process-utilisation``);
* else in equal parts (``time-overlap``).

A run's GPU energy is the sum of its parts, its GPU time (``gpu_hours``) the sum of
its parts of the intervals' durations. The parts of one interval sum to 1, so the
energies of co-located runs sum to what the meter measured while any of them was
active. A run that died without a ``stop`` event is active up to its last event.

>>> events = [
...     {"attempt": "a", "run": "A", "kind": "start", "t": 0.0, "mj": 1000},
...     {"attempt": "b", "run": "B", "kind": "start", "t": 10.0, "mj": 2000},
...     {"attempt": "a", "run": "A", "kind": "stop", "t": 20.0, "mj": 4000},
...     {"attempt": "b", "run": "B", "kind": "stop", "t": 30.0, "mj": 5000},
... ]
>>> a, b = attribute(events, "a"), attribute(events, "b")
>>> a["gpu_mj"], b["gpu_mj"], a["gpu_mj"] + b["gpu_mj"] == 5000 - 1000
(2000.0, 2000.0, True)
>>> a["gpu_seconds"], a["packing"], a["colocated"], a["share"], a["method"]
(15.0, 2, ['B'], 0.6666666666666666, 'time-overlap')
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

SLOT_ENV = "VNR_GPU_SLOT"
START, TICK, STOP = "start", "tick", "stop"
UTILISATION = "process-utilisation"
OVERLAP = "time-overlap"


def _now() -> float:
    """Wall-clock time of an event (a function of its own so that tests can control it)."""
    return time.time()


def ledger_name(uuid: str | None, slot: str | None = None) -> str | None:
    """The file name (without ``.jsonl``) of a GPU's ledger: its NVML UUID, else the executor's slot.

    The UUID comes first because it names the physical GPU even when runs of one
    output folder share it from several SLURM nodes' points of view (a slot
    number such as ``0`` repeats on every node).

    >>> ledger_name("GPU-1a2b", "0"), ledger_name(None, "0"), ledger_name(None, None)
    ('GPU-1a2b', 'slot-0', None)
    """
    if uuid:
        return re.sub(r"[^A-Za-z0-9._-]", "_", uuid)
    if slot:
        return "slot-" + re.sub(r"[^A-Za-z0-9._-]", "_", slot)
    return None


class GpuLedger:
    """The append-only event file of one GPU."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def append(self, event: Mapping[str, Any], read_mj: Callable[[], int | None],
               read_utilisation: Callable[[], Mapping[int, float] | None] | None = None) -> dict[str, Any]:
        """Append ``event`` plus the time, the counter and per-process utilisation, all read under the lock."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                full = dict(event)
                full["t"] = _now()
                full["mj"] = read_mj()
                util = read_utilisation() if read_utilisation is not None else None
                full["util"] = {str(pid): float(v) for pid, v in util.items()} if util else None
                fh.write(json.dumps(full, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return full

    def events(self) -> list[dict[str, Any]]:
        """Every complete event, in the file's (= the counter's) order; a torn last line is skipped."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
                try:
                    lines = fh.read().splitlines()
                finally:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):
                item = json.loads(line)
                if isinstance(item, dict) and "attempt" in item and "kind" in item:
                    out.append(item)
        return out


def pid_alive(host: str | None, pid: int | None) -> bool | None:
    """Whether process ``pid`` on ``host`` still runs (None when it is on another host)."""
    if host != socket.gethostname() or pid is None:
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _spans(events: Sequence[Mapping[str, Any]], alive: Callable[[Mapping[str, Any]], bool | None]) -> dict[str, tuple[int, int]]:
    """attempt → (index of its start, index up to which it was active)."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    stopped: dict[str, int] = {}
    last_event: dict[str, Mapping[str, Any]] = {}
    for k, e in enumerate(events):
        a = str(e["attempt"])
        if e["kind"] == START and a not in first:
            first[a] = k
        if a in first and a not in stopped:
            last[a] = k
            last_event[a] = e
            if e["kind"] == STOP:
                stopped[a] = k
    end = len(events) - 1
    spans = {}
    for a, s in first.items():
        if a in stopped:
            spans[a] = (s, stopped[a])
        elif alive(last_event[a]):  # still running: active up to now
            spans[a] = (s, end)
        else:  # died without a stop event (killed): active up to its last event
            spans[a] = (s, last[a])
    return spans


def _weights(active: Sequence[str], pids: Mapping[str, Any], util: Mapping[str, float] | None) -> tuple[dict[str, float], str]:
    if util:
        values = [util.get(str(pids.get(a))) for a in active]
        if all(v is not None for v in values) and sum(values) > 0:
            total = float(sum(values))
            return {a: float(v) / total for a, v in zip(active, values)}, UTILISATION
    return {a: 1.0 / len(active) for a in active}, OVERLAP


def intervals(events: Sequence[Mapping[str, Any]],
              alive: Callable[[Mapping[str, Any]], bool | None] | None = None,
              attempt: str | None = None) -> list[dict[str, Any]]:
    """Each interval between consecutive events: duration, measured energy, active attempts and their parts.

    ``alive(event)`` says whether the process behind an attempt's latest event still
    runs (default: :func:`pid_alive` on this host, treating other hosts as alive).
    ``attempt``: only the intervals in which that attempt was active.
    """
    alive = alive or (lambda e: pid_alive(e.get("host"), e.get("pid")) is not False)
    spans = _spans(events, alive)
    pids = {str(e["attempt"]): e.get("pid") for e in events}
    runs = {str(e["attempt"]): e.get("run") for e in events}
    lo, hi = spans.get(attempt, (0, 0)) if attempt is not None else (0, len(events) - 1)
    spans = {a: (s, end) for a, (s, end) in spans.items() if s < hi and end > lo}
    out = []
    for k in range(lo, hi):
        active = sorted(a for a, (s, end) in spans.items() if s <= k < end)
        if not active:
            continue
        m0, m1 = events[k].get("mj"), events[k + 1].get("mj")
        energy = None if m0 is None or m1 is None or m1 < m0 else float(m1 - m0)
        weights, method = _weights(active, pids, events[k + 1].get("util"))
        out.append({
            "index": k,
            "seconds": max(0.0, float(events[k + 1]["t"]) - float(events[k]["t"])),
            "mj": energy,
            "active": active,
            "runs": [runs[a] for a in active],
            "weights": weights,
            "method": method,
        })
    return out


def attribute(events: Sequence[Mapping[str, Any]], attempt: str,
              alive: Callable[[Mapping[str, Any]], bool | None] | None = None) -> dict[str, Any]:
    """One attempt's part of the GPU: energy (mJ), GPU seconds, packing, co-located runs, share, method.

    ``share`` = the attempt's energy / the energy the GPU measured over the attempt's
    own interval (1.0 when it ran alone). ``gpu_mj_measured`` is that measured energy.
    ``counter_gaps`` counts intervals whose counter went backwards or was missing
    (driver reload): their energy is left out of every run.
    """
    mine = intervals(events, alive, attempt)
    own_run = next((e.get("run") for e in events if str(e["attempt"]) == attempt), None)
    gpu_mj = gpu_mj_measured = seconds = 0.0
    gaps = 0
    methods: set[str] = set()
    colocated: set[str] = set()
    packing = 1
    for iv in mine:
        w = iv["weights"][attempt]
        seconds += iv["seconds"] * w
        packing = max(packing, len(iv["active"]))
        colocated.update(str(r) for r in iv["runs"] if r != own_run)
        if len(iv["active"]) > 1:
            methods.add(iv["method"])
        if iv["mj"] is None:
            gaps += 1
            continue
        gpu_mj += iv["mj"] * w
        gpu_mj_measured += iv["mj"]
    if not methods:
        method = "sole"  # never shared: its energy is the GPU's
    else:
        method = "+".join(m for m in (UTILISATION, OVERLAP) if m in methods)
    share = gpu_mj / gpu_mj_measured if gpu_mj_measured > 0 else 1.0
    return {
        "gpu_mj": gpu_mj,
        "gpu_mj_measured": gpu_mj_measured,
        "gpu_seconds": seconds,
        "packing": packing,
        "colocated": sorted(colocated),
        "share": share,
        "method": method,
        "counter_gaps": gaps,
    }


def measured_total(events: Sequence[Mapping[str, Any]],
                   alive: Callable[[Mapping[str, Any]], bool | None] | None = None) -> dict[str, float]:
    """What the GPU's meter measured while any run was active (mJ, seconds): the sum every share adds up to."""
    ivs = intervals(events, alive)
    return {"gpu_mj": sum(iv["mj"] for iv in ivs if iv["mj"] is not None),
            "seconds": sum(iv["seconds"] for iv in ivs)}
