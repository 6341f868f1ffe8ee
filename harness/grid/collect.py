"""Collect a grid's run store into one results matrix: what ``vnr rank`` reads.

Writes, under the experiment's output directory:

* ``matrix.csv`` — models (rows, first column ``model``) × criteria;
* ``criteria.yaml`` — per criterion: group (performance | efficiency | fairness),
  direction, unit and source (the sidecar :meth:`ranking.table.ScoreTable.load` reads);
* ``seeds.csv`` — per-seed values, long (``model, criterion, seed, value``) for
  every seed-dependent criterion (performance and efficiency): what ``vnr rank
  --bootstrap`` resamples;
* ``seed_stats.csv`` — the side table: per model and seed-dependent criterion,
  the value of every seed, their mean, standard deviation (ddof=1) and count.

The criteria:

* **performance** — each GLUE metric of :data:`TASK_METRICS` averaged over the
  seeds (``--epoch final``: the last epoch's metrics; ``best``: each metric's
  best epoch, as the paper's ``glue_hpc`` table). MNLI is one run scored twice:
  ``mnli_m_acc`` (matched) and ``mnli_mm_acc`` (mismatched).
* **efficiency** — per task, energy (kWh), duration (h), GPU-hours and carbon
  (kg CO2eq) of one fine-tuning run, averaged over seeds; lower is better.
* **fairness** — the bias metrics of :data:`FAIRNESS_METRICS`, oriented so
  that the declared direction holds (higher is fairer for every ``higher`` one).

Only the runs of this config count (the run ids it expands to), so a stale
result of an older hyper-parameter setting never leaks in.

>>> criterion_name("mnli", "accuracy_mm"), criterion_name("cola", "matthews_correlation")
('mnli_mm_acc', 'cola_mcc')
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.grid.config import Experiment
from harness.specs import BiasSpec, FinetuneSpec
from harness.store import STATUS_OK, RunStore, atomic_write_bytes
from ranking.errors import UserError

log = logging.getLogger("harness.grid")

GROUPS = ("performance", "efficiency", "fairness")

# ------------------------------------------------------------------ performance
#: GLUE task → (metric key in the run record, short name in the criterion). Edit here to add a metric.
TASK_METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "cola": (("matthews_correlation", "mcc"),),
    "sst2": (("accuracy", "acc"),),
    "mrpc": (("accuracy", "acc"), ("f1", "f1")),
    "stsb": (("pearson", "pearson"), ("spearman", "spearman")),
    "qqp": (("accuracy", "acc"), ("f1", "f1")),
    "mnli": (("accuracy", "m_acc"), ("accuracy_mm", "mm_acc")),
    "qnli": (("accuracy", "acc"),),
    "rte": (("accuracy", "acc"),),
    "wnli": (("accuracy", "acc"),),
}
_METRIC_LABEL = {
    "accuracy": "accuracy",
    "accuracy_mm": "mismatched accuracy",
    "f1": "F1",
    "matthews_correlation": "Matthews correlation",
    "pearson": "Pearson correlation",
    "spearman": "Spearman correlation",
}


def criterion_name(task: str, metric: str) -> str:
    for key, short in TASK_METRICS.get(task, ()):
        if key == metric:
            return f"{task}_{short}"
    return f"{task}_{metric}"


# ------------------------------------------------------------------ efficiency
#: key in the record's ``efficiency`` → (criterion suffix, unit, what it is). All lower-is-better.
EFFICIENCY_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("energy_kwh", "energy_kwh", "kWh", "energy (GPU from NVML where available, CPU/RAM from codecarbon)"),
    ("duration_h", "duration_h", "h", "wall-clock duration of training and evaluation"),
    ("gpu_hours", "gpu_hours", "GPU-h", "duration × GPUs used"),
    ("co2_kg", "co2_kg", "kg CO2eq", "energy × the configured grid's carbon intensity"),
)


# ------------------------------------------------------------------ fairness
@dataclass(frozen=True)
class FairnessMetric:
    """How one bias metric becomes a fairness criterion.

    ``transform``: ``identity`` keeps the value; ``distance_from_50`` turns a
    percentage whose ideal is 50 (no preference either way) into |x − 50|,
    which is then lower-is-better.
    """

    dataset: str
    metric: str
    name: str
    direction: str
    unit: str
    note: str
    transform: str = "identity"

    def apply(self, value: float) -> float:
        if self.transform == "distance_from_50":
            return abs(value - 50.0)
        return value


#: Bias metric → fairness criterion (the paper's five fairness features, oriented so higher is fairer,
#: or lower-is-better distances where the ideal is 50). Edit here when the bias metrics change.
FAIRNESS_METRICS: tuple[FairnessMetric, ...] = (
    FairnessMetric(
        "crows_pairs", "anti_stereo_score", "crows_anti_stereo_score", "higher", "%",
        "CrowS-Pairs: % of pairs where the less stereotyping sentence is more probable (VnR anti_crows_score)",
    ),
    FairnessMetric(
        "stereoset", "intrasentence_icat", "stereoset_intra_icat", "higher", "ICAT (0-100)",
        "StereoSet intrasentence ICAT = LMS × min(SS, 100 − SS)/50 (ideal 100)",
    ),
    FairnessMetric(
        "stereoset", "intersentence_icat", "stereoset_inter_icat", "higher", "ICAT (0-100)",
        "StereoSet intersentence ICAT (ideal 100)",
    ),
    FairnessMetric(
        "winobias", "parity_score", "winobias_parity_score", "higher", "%",
        "WinoBias: 100 - |% pro preferred - % anti preferred| over pronoun-only pairs "
        "(likelihood analogue of VnR winobias_acc_difference)",
    ),
)


# ------------------------------------------------------------------ collection
@dataclass
class Collected:
    matrix_path: Path
    criteria_path: Path
    seeds_path: Path
    stats_path: Path
    models: list[str]
    criteria: list[str]
    missing: list[str]


def missing_runs(exp: Experiment, store: RunStore | None = None) -> list[str]:
    """Run ids of the grid without a finished (``ok``) result."""
    store = store or RunStore(exp.output)
    return [s.run_id() for s in exp.specs if not store.is_done(s.run_id())]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return math.nan
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def collect(exp: Experiment, *, epoch: str = "final", allow_missing: bool = False) -> Collected:
    """Build and write the matrix, its criteria sidecar and the per-seed side table."""
    import pandas as pd
    import yaml

    from ranking.table import ScoreTable

    if epoch not in ("final", "best"):
        raise UserError(f"--epoch {epoch!r}: use final or best")
    store = RunStore(exp.output)
    missing = missing_runs(exp, store)
    if missing and not allow_missing:
        shown = "\n  ".join(missing[:20])
        more = f"\n  ... and {len(missing) - 20} more" if len(missing) > 20 else ""
        raise UserError(
            f"{len(missing)} of {len(exp.specs)} runs of {exp.source} have no result in {exp.output}:\n  {shown}{more}\n"
            "run them (vnr run), check them (vnr status), or pass --allow-missing to leave their cells empty"
        )
    metrics_key = "metrics" if epoch == "final" else "metrics_best"

    rows: dict[str, dict[str, float]] = {exp.label(m): {} for m in exp.models}
    meta: dict[str, dict[str, Any]] = {}
    stat_rows: list[dict[str, Any]] = []  # wide: seed_<s> ..., mean, std, n
    long_rows: list[dict[str, Any]] = []  # model, criterion, seed, value (what the seed bootstrap reads)
    seeded: dict[tuple[str, str], dict[int, float]] = {}  # (model, criterion) -> seed -> value

    for spec in exp.specs:
        if not isinstance(spec, FinetuneSpec):
            continue
        rec = store.get(spec.run_id())
        if rec is None or rec.get("status") != STATUS_OK:
            continue
        metrics = rec.get(metrics_key) or ({} if epoch == "best" else rec.get("metrics")) or {}
        if epoch == "best" and not rec.get("metrics_best"):
            log.warning("%s has no metrics_best; using its final metrics", spec.run_id())
            metrics = rec.get("metrics") or {}
        for key, _short in TASK_METRICS.get(spec.task, ()):
            value = _num(metrics.get(key))
            if value is None:
                continue
            seeded.setdefault((spec.model, criterion_name(spec.task, key)), {})[spec.seed] = value
        efficiency = rec.get("efficiency") or {}
        for key, suffix, _unit, _note in EFFICIENCY_METRICS:
            value = _num(efficiency.get(key))
            if value is not None:
                seeded.setdefault((spec.model, f"{spec.task}_{suffix}"), {})[spec.seed] = value

    perf_names = [criterion_name(t, k) for t in exp.tasks for k, _ in TASK_METRICS.get(t, ())]
    eff_names = [f"{t}_{suffix}" for t in exp.tasks for _, suffix, _, _ in EFFICIENCY_METRICS]
    seeds_all = list(exp.seeds)
    for task in exp.tasks:
        for key, _short in TASK_METRICS.get(task, ()):
            name = criterion_name(task, key)
            meta[name] = {
                "direction": "higher",
                "weight": 1.0,
                "group": "performance",
                "unit": "score (0-1)",
                "source": f"GLUE {task} dev {_METRIC_LABEL.get(key, key)}, {epoch} epoch, mean over seeds "
                f"{','.join(map(str, seeds_all))}",
            }
        for _key, suffix, unit, note in EFFICIENCY_METRICS:
            meta[f"{task}_{suffix}"] = {
                "direction": "lower",
                "weight": 1.0,
                "group": "efficiency",
                "unit": unit,
                "source": f"fine-tuning on {task}: {note}; mean over seeds",
            }
    for model in exp.models:
        label = exp.label(model)
        for name in [*perf_names, *eff_names]:
            by_seed = seeded.get((model, name), {})
            values = [by_seed[s] for s in seeds_all if s in by_seed]
            if values:
                rows[label][name] = _mean(values)
            long_rows.extend({"model": label, "criterion": name, "seed": s, "value": by_seed[s]}
                             for s in seeds_all if s in by_seed)
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

    fair_names: list[str] = []
    for spec in exp.specs:
        if not isinstance(spec, BiasSpec):
            continue
        rec = store.get(spec.run_id())
        rules = [f for f in FAIRNESS_METRICS if f.dataset == spec.dataset]
        for rule in rules:
            if rule.name not in meta:
                fair_names.append(rule.name)
                meta[rule.name] = {
                    "direction": rule.direction,
                    "weight": 1.0,
                    "group": "fairness",
                    "unit": rule.unit,
                    "source": rule.note + (" (|x - 50|)" if rule.transform == "distance_from_50" else ""),
                }
        if rec is None or rec.get("status") != STATUS_OK:
            continue
        metrics = rec.get("metrics") or {}
        found = False
        for rule in rules:
            value = _num(metrics.get(rule.metric))
            if value is not None:
                rows[exp.label(spec.model)][rule.name] = rule.apply(value)
                found = True
        if rules and not found:
            log.warning(
                "%s: none of the fairness metrics %s is in its record (metrics: %s); update FAIRNESS_METRICS",
                spec.run_id(), ", ".join(r.metric for r in rules), ", ".join(sorted(metrics)) or "none",
            )

    columns = [*perf_names, *eff_names, *fair_names]
    frame = pd.DataFrame.from_dict(rows, orient="index").reindex(index=list(rows), columns=columns)
    frame = frame.astype(float)
    empty_cols = [c for c in frame.columns if frame[c].isna().all()]
    if empty_cols:
        log.warning("no value for %d criteria (left out of the matrix): %s", len(empty_cols), ", ".join(empty_cols))
        frame = frame.drop(columns=empty_cols)
    empty_rows = [m for m in frame.index if frame.loc[m].isna().all()]
    if empty_rows:
        log.warning("no result for models %s (left out of the matrix)", ", ".join(empty_rows))
        frame = frame.drop(index=empty_rows)
    if frame.empty:
        raise UserError(f"no finished run in {exp.output}: nothing to collect (run vnr run first)")
    frame.index.name = "model"

    out = Path(exp.output)
    matrix_path, criteria_path = out / "matrix.csv", out / "criteria.yaml"
    seeds_path, stats_path = out / "seeds.csv", out / "seed_stats.csv"
    buf = io.StringIO()
    frame.to_csv(buf, float_format="%.10g")
    atomic_write_bytes(matrix_path, buf.getvalue().encode())
    present = [g for g in GROUPS if any(meta[c]["group"] == g for c in frame.columns)]
    doc = {
        "model_column": "model",
        "groups": present,
        "criteria": {c: meta[c] for c in frame.columns},
    }
    header = (
        f"# Criteria of {matrix_path.name}, written by `vnr collect {exp.source} --epoch {epoch}`.\n"
        f"# {len(frame.index)} models x {len(frame.columns)} criteria; "
        f"{len(missing)} of {len(exp.specs)} runs missing.\n"
    )
    atomic_write_bytes(criteria_path, (header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)).encode())
    kept = set(frame.columns) & set(perf_names + eff_names)
    for path, table_rows, columns in (
        (seeds_path, long_rows, ["model", "criterion", "seed", "value"]),
        (stats_path, stat_rows, None),
    ):
        side = pd.DataFrame(table_rows, columns=columns)
        if len(side):
            side = side[side["criterion"].isin(kept) & side["model"].isin(frame.index)]
        buf = io.StringIO()
        side.to_csv(buf, index=False, float_format="%.10g")
        atomic_write_bytes(path, buf.getvalue().encode())

    ScoreTable.load(matrix_path)  # what `vnr rank` reads must load; a failure here is a bug, not user input
    return Collected(matrix_path, criteria_path, seeds_path, stats_path, list(frame.index), list(frame.columns),
                     missing)


def describe(result: Collected) -> str:
    """One line for the CLI."""
    line = (
        f"wrote {result.matrix_path} ({len(result.models)} models × {len(result.criteria)} criteria), "
        f"{result.criteria_path.name}, {result.seeds_path.name} and {result.stats_path.name}"
    )
    if result.missing:
        line += f"; {len(result.missing)} runs missing (their cells are empty)"
    return line
