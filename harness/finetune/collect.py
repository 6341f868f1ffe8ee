"""The fine-tuning kind's half of ``vnr collect`` (:attr:`harness.kinds.RunKind.collect`): per GLUE task its
performance criteria (from the task's record) and its efficiency criteria, each a mean over the seeds; the
shared scaffolding (which runs are usable, the matrix, its sidecar, writing them together) is
:func:`harness.grid.collect.collect`'s."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from harness.energy import basis
from harness.finetune.tasks import get_task
from harness.grid.collect import (
    EFFICIENCY_METRICS,
    ENERGY_BASED,
    Table,
    _basis_text,
    _keys,
    _mean,
    _metrics_of,
    _num,
    _packing_levels,
    _some,
    _std,
)
from ranking.floor.errors import UserError


def criterion_name(task: str, metric: str) -> str:
    """The matrix column of ``task``'s recorded ``metric`` (its task record's criterion).

    >>> criterion_name("mnli", "accuracy_mm"), criterion_name("cola", "matthews_correlation")
    ('mnli_mm_acc', 'cola_mcc')
    """
    for crit in get_task(task).criteria:
        if crit.record_key == metric:
            return crit.name
    raise UserError(f"GLUE task {task} records no metric {metric!r} (its metrics: "
                    f"{', '.join(c.record_key for c in get_task(task).criteria)})")


def _share_text(task: str) -> str:
    """A task with several metrics (STS-B Pearson and Spearman, MRPC and QQP accuracy and F1) counts once, as on the
    GLUE leaderboard and in Vote'n'Rank: its columns name one benchmark, whose vote they share (1/n each under
    ``vnr rank``'s default ``--vote benchmark``). MNLI's matched and mismatched dev sets are two GLUE columns of one
    metric each: a vote each, as there.

    >>> _share_text("stsb"), _share_text("rte")
    ("; one of stsb's 2 metrics: they share the task's one vote (1/2 each)", '')
    """
    n = len(get_task(task).metrics)
    return f"; one of {task}'s {n} metrics: they share the task's one vote (1/{n} each)" if n > 1 else ""



def collect_finetune(table: Table, specs: Sequence[Any]) -> None:
    """The fine-tuning kind's columns: per GLUE task its performance criteria and its efficiency criteria, each a
    mean over the seeds (with the per-seed values in the side tables), and how their energy and packing were
    measured."""
    exp, usable, epoch, eff_metrics = table.exp, table.usable, table.epoch, table.eff_metrics
    rows, meta, stat_rows, long_rows = table.rows, table.meta, table.stat_rows, table.long_rows
    packing_by_task, basis_by_task = table.packing_by_task, table.basis_by_task
    tasks = exp.axis("finetune", "tasks")  # the grid's finetune.tasks, in order
    seeded: dict[tuple[str, str], dict[int, float]] = {}  # (model, criterion) -> seed -> value
    packing: dict[tuple[str, str, int], tuple[int, str]] = {}  # (model, task, seed) -> (level, run id)
    bases: dict[tuple[str, str, int], tuple[str, float | None, float | None]] = {}  # -> (basis, kWh, modelled kWh)
    by_target: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (kind, task) -> usable records

    for spec in specs:
        rid = spec.run_id()
        rec = usable.get(rid)
        if rec is None:
            continue
        by_target.setdefault(("finetune", spec.task), []).append(rec)
        metrics = _metrics_of(rec, epoch, rid)
        for crit in get_task(spec.task).criteria:
            value = _num(metrics.get(crit.record_key))
            if value is not None:
                seeded.setdefault((spec.model, crit.name), {})[spec.seed] = value
        efficiency = rec.get("efficiency") or {}
        measured = False
        for key, suffix, _unit, _note, section, _direction in eff_metrics:
            part = rec.get(section)
            value = _num(part.get(key)) if isinstance(part, dict) else None
            if value is not None:
                seeded.setdefault((spec.model, f"{spec.task}_{suffix}"), {})[spec.seed] = value
                measured = True
        if measured:
            packing[(spec.model, spec.task, spec.seed)] = (int(efficiency.get("packing", 1)), rid)
            found = efficiency.get("energy_basis")
            bases[(spec.model, spec.task, spec.seed)] = (
                found if found in basis.BASES else basis.UNKNOWN,
                _num(efficiency.get("energy_kwh")), _num(efficiency.get("modelled_kwh")))

    for task in tasks:  # a task with usable runs must yield a column: else its record and its runs disagree
        recs = by_target.get(("finetune", task), [])
        crits = get_task(task).criteria
        if recs and not any((m, c.name) in seeded for m in exp.models for c in crits):
            raise UserError(
                f"GLUE task {task}: {len(recs)} usable runs but none of the metrics its task record names "
                f"({', '.join(c.record_key for c in crits)}) is in their records (they hold: "
                f"{_keys(recs, 'metrics')}); fix the task record in harness/finetune/tasks.py or the runs"
            )

    perf_names = [c.name for t in tasks for c in get_task(t).criteria]
    eff_names = [f"{t}_{m[1]}" for t in tasks for m in eff_metrics]
    seeds_all = list(exp.axis("finetune", "seeds"))
    seeds_text = ",".join(map(str, seeds_all))
    for task in tasks:
        shared = len(get_task(task).metrics) > 1
        for crit in get_task(task).criteria:
            meta[crit.name] = {
                "direction": "higher",
                "weight": 1.0,
                "group": "performance",
                "unit": crit.unit,
                "source": crit.source(epoch, seeds_text) + _share_text(task),
                # a task's metrics share its one vote (ranking.votes); MNLI's two dev sets are two GLUE columns
                **({"benchmark": f"glue/{task}"} if shared else {}),
                "task": task,
                "metric": crit.record_key,
            }
        for _key, suffix, unit, note, _section, direction in eff_metrics:
            meta[f"{task}_{suffix}"] = {
                "direction": direction,
                "weight": 1.0,
                "group": "efficiency",
                "unit": unit,
                "source": f"fine-tuning on {task}: {note}; mean over seeds {seeds_text}",
            }
    complete: set[tuple[str, str]] = set()  # (model, criterion) cells with every seed
    for model in exp.models:
        label = exp.label(model)
        for name in [*perf_names, *eff_names]:
            by_seed = seeded.get((model, name), {})
            values = [by_seed[s] for s in seeds_all if s in by_seed]
            if values and len(values) == len(seeds_all):
                rows[label][name] = _mean(values)
                complete.add((model, name))
                long_rows.extend({"model": label, "criterion": name, "seed": s, "value": by_seed[s]}
                                 for s in seeds_all)
            stat_rows.append(
                {
                    "model": label,
                    "criterion": name,
                    "group": meta[name]["group"],
                    **{f"seed_{s}": by_seed.get(s, math.nan) for s in seeds_all},
                    "mean": _mean(values),
                    "std": _std(values),
                    "n": len(values),
                }
            )

    for task in tasks:
        for key, suffix, _unit, _note in EFFICIENCY_METRICS:
            if key not in ENERGY_BASED:
                continue
            name = f"{task}_{suffix}"
            runs = [bases[(m, task, s)] for m in exp.models for s in seeds_all
                    if (m, name) in complete and (m, task, s) in bases]
            if not runs:
                continue
            method = basis.column_basis(b for b, _, _ in runs)
            source = meta[name].pop("source")  # method beside the unit, source last
            meta[name]["method"] = method
            meta[name]["source"] = f"{source}; {_basis_text(method, runs)}"
            if key == "energy_kwh":
                basis_by_task[task] = method

    for task in tasks:
        cells = {(m, task) for m in exp.models
                 if any((m, f"{task}_{metric[1]}") in complete for metric in eff_metrics)}
        levels = _packing_levels(packing, task, cells)
        if not levels:
            continue
        packing_by_task[task] = sorted(levels)
        if len(levels) > 1 and not table.allow_mixed_packing:
            shown = "; ".join(f"{level} run(s) per GPU: {_some(rids)}" for level, rids in sorted(levels.items()))
            raise UserError(
                f"the efficiency criteria of {task} would mix runs measured at different packing levels ({shown}); "
                "re-run them at one level, or pass --allow-mixed-packing to collect them anyway"
            )
        text = (f"measured with {sorted(levels)[0]} run(s) per GPU (packing {sorted(levels)[0]})" if len(levels) == 1
                else f"MIXED packing levels {', '.join(map(str, sorted(levels)))} runs per GPU (--allow-mixed-packing)")
        for metric in eff_metrics:
            meta[f"{task}_{metric[1]}"]["source"] += f"; {text}"

    table.columns += [*perf_names, *eff_names]
    table.seeded += [*perf_names, *eff_names]
