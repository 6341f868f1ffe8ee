"""Where each spec of a grid stands: done / running / queued / failed / missing.

Read from the run store, and from ``squeue`` where it answers:

* **done** — a usable finished result (:func:`harness.store.record_problem`: ``status: ok``
  with the spec's own metrics, numeric and within range), exactly what ``vnr run`` skips and ``vnr collect`` reads;
* **running** — a running marker whose process is alive: its SLURM array task
  is RUNNING in squeue, or (no SLURM ids) its pid is alive on this host; a
  marker from another host without squeue is trusted;
* **queued** — submitted (a submission manifest maps it to an array task)
  and that task is pending in squeue (also while it waits to be requeued);
* **failed** — the last attempt stored ``status: failed`` (the error is shown), or a
  result file that is not a usable result (:func:`~harness.store.record_problem`: cut short,
  not a JSON object, another status than ``ok``, metrics that are not numbers, lack the
  task's own or lie outside their range, fields naming another run; the reason is shown);
  the next ``vnr run`` retries it;
* **missing** — none of these (never run, or a stale marker of a killed process).
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.grid.config import Experiment
from harness.grid.local import Spec
from harness.grid.slurm import read_manifests, squeue_states
from harness.kinds import kind_of
from harness.store import STATUS_FAILED, RunStore, record_problem

STATES = ("done", "running", "queued", "failed", "missing")
_PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "CONFIGURING", "RESIZING", "SUSPENDED"}
_ACTIVE = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}


@dataclass(frozen=True)
class SpecStatus:
    spec: Spec
    run_id: str
    state: str
    detail: str = ""

    def row(self) -> dict[str, Any]:
        s = self.spec
        kind = kind_of(s)
        return {"state": self.state, "kind": s.kind, "model": s.model, "target": kind.target_of(s),
                "seed": kind.seed_of(s),
                "run_id": self.run_id, "detail": self.detail}


def _pid_alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError, OverflowError):  # gone, or a marker's pid no pid can be
        return False
    except PermissionError:
        return True
    return True


def _marker_field(value: Any) -> str:
    """A running marker's host, pid or job as the status line shows it: one line, at most 60 characters."""
    text = " ".join(str(value).split())
    return text if len(text) <= 60 else text[:59] + "…"


def _marker_job(info: dict[str, Any]) -> str | None:
    array, task = info.get("slurm_array_job_id"), info.get("slurm_array_task_id")
    if array and task is not None:
        return f"{array}_{task}"
    job = info.get("slurm_job_id")
    return str(job) if job else None


def grid_status(exp: Experiment, specs: Sequence[Spec] | None = None, *, use_squeue: bool = True) -> list[SpecStatus]:
    """The state of every spec (``specs`` defaults to the whole grid)."""
    store = RunStore(exp.output)
    squeue = squeue_states() if use_squeue else None
    queued_by_run: dict[str, tuple[str, str]] = {}
    if squeue is not None:
        for array_id, tasks in read_manifests(exp.output).items():
            single = len({index for index, _ in tasks}) == 1
            for index, rid in tasks:
                for job in (f"{array_id}_{index}", array_id if single else None):
                    if job and job in squeue:
                        queued_by_run[rid] = (job, squeue[job])
    host = socket.gethostname()
    out = []
    for spec in specs if specs is not None else exp.specs:
        rid = spec.run_id()
        rec = store.get(rid)
        problem = record_problem(rec, spec) if rec is not None else store.unreadable(rid)
        if rec is not None and problem is None:
            wall = rec.get("wall_time_s")
            detail = f"{wall:.0f} s" if isinstance(wall, int | float) and not isinstance(wall, bool) else ""
            out.append(SpecStatus(spec, rid, "done", detail))
            continue
        info = store.running_info(rid)
        if info is not None:
            job = _marker_job(info)
            where = (f"{_marker_field(info.get('host', '?'))} pid {_marker_field(info.get('pid', '?'))}"
                     + (f" job {_marker_field(job)}" if job else ""))
            if job and squeue is not None:
                alive = squeue.get(job) in _ACTIVE
            elif info.get("host") == host:
                alive = _pid_alive(info.get("pid"))
            else:
                alive = True  # another host, no squeue: cannot check
            if alive:
                out.append(SpecStatus(spec, rid, "running", where))
                continue
        if rid in queued_by_run:
            job, state = queued_by_run[rid]
            if state in _ACTIVE:
                out.append(SpecStatus(spec, rid, "running", f"job {job} starting"))
                continue
            if state in _PENDING:
                out.append(SpecStatus(spec, rid, "queued", f"job {job} {state.lower()}"))
                continue
        if rec is not None and rec.get("status") == STATUS_FAILED:
            error = str(rec.get("error") or "no error recorded").strip().splitlines()
            out.append(SpecStatus(spec, rid, "failed", error[-1][:200] if error else ""))
            continue
        if problem is not None:  # a result file that is no usable result: the next `vnr run` redoes it
            out.append(SpecStatus(spec, rid, "failed", f"unusable record: {problem}; `vnr run` redoes it"))
            continue
        detail = "stale running marker (process gone)" if info is not None else ""
        out.append(SpecStatus(spec, rid, "missing", detail))
    return out


def totals(statuses: Sequence[SpecStatus]) -> dict[str, int]:
    counts = Counter(s.state for s in statuses)
    return {state: counts.get(state, 0) for state in STATES}


def totals_line(statuses: Sequence[SpecStatus]) -> str:
    """``14 runs: 10 done, 1 running, 0 queued, 1 failed, 2 missing``."""
    t = totals(statuses)
    return f"{len(statuses)} runs: " + ", ".join(f"{t[s]} {s}" for s in STATES)


def format_table(statuses: Sequence[SpecStatus], *, wide: bool = False) -> str:
    """One spec per line, in the grid's order (:mod:`ranking.textable`: fits 120 columns unless ``wide``)."""
    from ranking.textable import TextTable, render

    cols = ("state", "kind", "model", "target", "seed", "run_id", "detail")
    header = ("STATE", "KIND", "MODEL", "TASK/DATASET", "SEED", "RUN ID", "DETAIL")
    rows = [[str(s.row()[c]) for c in cols] for s in statuses]
    return render(TextTable(header, rows, align="l" * len(cols), name_columns=(2,)), wide=wide)
