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

Lines outside physical bounds are never charged to a run: a line whose time, counter or utilisation
is negative, non-finite or not a number is skipped when the file is read (:meth:`GpuLedger.events`),
and an interval that ends before it starts or whose energy implies more than :data:`MAX_GPU_WATTS`
is left out of every run, like a counter gap. Both are logged as warnings naming the line and listed
in the run's attribution (``rejected``), so the record says what was not counted.

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

import fcntl
import json
import logging
import math
import os
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.floor.json_io import JsonProblem, parse_json
from ranking.floor.schema import show

log = logging.getLogger(__name__)

SLOT_ENV = "VNR_GPU_SLOT"
#: no GPU draws more than this: an interval whose energy implies more (over at least one second) is refused
MAX_GPU_WATTS = 10_000.0
KINDS = ("start", "tick", "stop")
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
        self.rejected: list[str] = []  # lines skipped by the last events(): "<file>:<line>: <why>"

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
        """Every complete, physically possible event, in the file's (= the counter's) order.

        A torn last line is skipped silently (a writer died mid-line); any other line that is not an event
        or holds an impossible value (:func:`event_problem`) is skipped with a warning naming it, and listed
        in :attr:`rejected` (``"<file>:<line>: <why>"``). Events carry their line number as ``line``.
        """
        self.rejected: list[str] = []
        try:
            with open(self.path, "rb") as fh:  # bytes: a line that is not UTF-8 is one rejected line
                fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
                try:
                    lines = fh.read().splitlines()
                finally:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except FileNotFoundError:
            return []
        out = []
        for number, line in enumerate(lines, start=1):
            try:  # NaN kept: event_problem names the field that holds it
                item = parse_json(line, allow_nan=True)
            except JsonProblem as exc:
                if number < len(lines):  # the last line may be being written
                    why = str(exc)
                    self._reject(number, "not a JSON line" if why.startswith(("not valid JSON", "empty")) else why)
                continue
            why = event_problem(item)
            if why:
                self._reject(number, why)
                continue
            out.append({**item, "line": number})
        return out

    def _reject(self, number: int, why: str) -> None:
        where = f"{self.path.name}:{number}"
        log.warning("GPU energy ledger %s: %s; the line is skipped (not charged to any run)", where, why)
        self.rejected.append(f"{where}: {why}")


def event_problem(item: Any) -> str | None:
    """Why a ledger line is not a possible event, or None.

    >>> event_problem({"attempt": "a", "kind": "tick", "t": 5.0, "mj": 10, "util": {"1": 40.0}}) is None
    True
    >>> event_problem({"attempt": "a", "kind": "tick", "t": 5.0, "mj": -1})
    'mj is -1 (negative)'
    >>> event_problem({"attempt": "a", "kind": "tick", "t": float("nan"), "mj": 1})
    't is nan (not finite)'
    >>> event_problem({"attempt": "a", "kind": "tick", "t": 1.0, "mj": 1, "util": {"7": 250.0}})
    'util of pid 7 is 250.0 (not a percentage)'
    """
    if not isinstance(item, dict) or "attempt" not in item or item.get("kind") not in KINDS:
        return "not a ledger event (attempt, kind start/tick/stop)"
    for key, required in (("t", True), ("mj", False)):
        value = item.get(key)
        if value is None and not required:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{key} is {_shown(value)} (not a number)"
        if not math.isfinite(value):
            return f"{key} is {value} (not finite)"
        if value < 0:
            return f"{key} is {value} (negative)"
    util = item.get("util")
    if util is not None:
        if not isinstance(util, dict):
            return f"util is {_shown(util)} (not a mapping of pid to percent)"
        for pid, value in util.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
                return f"util of pid {pid if len(pid) <= 20 else pid[:19] + '…'} is {_shown(value)} (not a percentage)"
    return None


def _shown(value: Any) -> str:
    """A refused ledger value in a warning: a number as Python writes it, anything else bounded (:func:`show`)."""
    return repr(value) if isinstance(value, int | float) and not isinstance(value, bool) else show(value)


def interval_problem(start: Mapping[str, Any], end: Mapping[str, Any]) -> str | None:
    """Why the interval between two consecutive events is physically impossible, or None.

    >>> interval_problem({"t": 10.0, "mj": 0}, {"t": 5.0, "mj": 100})
    'ends before it starts (t 10.0 then 5.0)'
    >>> interval_problem({"t": 0.0, "mj": 0}, {"t": 2.0, "mj": 30_000_000})  # 30 kJ in 2 s: 15 kW
    'implies 15000 W on one GPU (more than 10000 W)'
    >>> interval_problem({"t": 0.0, "mj": 0}, {"t": 2.0, "mj": 1_400_000}) is None  # 700 W
    True
    """
    t0, t1 = float(start["t"]), float(end["t"])
    if t1 < t0:
        return f"ends before it starts (t {t0} then {t1})"
    m0, m1 = start.get("mj"), end.get("mj")
    if m0 is not None and m1 is not None and m1 > m0:
        watts = (m1 - m0) / 1000.0 / max(t1 - t0, 1.0)
        if watts > MAX_GPU_WATTS:
            return f"implies {watts:.0f} W on one GPU (more than {MAX_GPU_WATTS:.0f} W)"
    return None


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
        seconds = max(0.0, float(events[k + 1]["t"]) - float(events[k]["t"]))
        impossible = interval_problem(events[k], events[k + 1])
        if impossible:  # charged to no run: neither its energy nor its time
            where = f"line {events[k + 1].get('line', k + 2)}"
            log.warning("GPU energy ledger %s: the interval %s; left out of every run", where, impossible)
            energy, seconds = None, 0.0
        weights, method = _weights(active, pids, events[k + 1].get("util"))
        out.append({
            "index": k,
            "seconds": seconds,
            "rejected": f"line {events[k + 1].get('line', k + 2)}: the interval {impossible}" if impossible else None,
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
    (driver reload): their energy is left out of every run. ``rejected`` names the intervals of this
    attempt left out as physically impossible (:func:`interval_problem`).
    """
    mine = intervals(events, alive, attempt)
    own_run = next((e.get("run") for e in events if str(e["attempt"]) == attempt), None)
    gpu_mj = gpu_mj_measured = seconds = 0.0
    gaps = 0
    methods: set[str] = set()
    colocated: set[str] = set()
    packing = 1
    rejected = [iv["rejected"] for iv in mine if iv["rejected"]]
    for iv in mine:
        w = iv["weights"][attempt]
        seconds += iv["seconds"] * w
        packing = max(packing, len(iv["active"]))
        colocated.update(str(r) for r in iv["runs"] if r != own_run)
        if len(iv["active"]) > 1:
            methods.add(iv["method"])
        if iv["rejected"]:
            continue
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
        "rejected": rejected,
    }


def measured_total(events: Sequence[Mapping[str, Any]],
                   alive: Callable[[Mapping[str, Any]], bool | None] | None = None) -> dict[str, float]:
    """What the GPU's meter measured while any run was active (mJ, seconds): the sum every share adds up to."""
    ivs = intervals(events, alive)
    return {"gpu_mj": sum(iv["mj"] for iv in ivs if iv["mj"] is not None),
            "seconds": sum(iv["seconds"] for iv in ivs)}
