"""Collect a grid's run store into one results matrix: what ``vnr rank`` reads.

Writes, under the experiment's output directory:

* ``matrix.csv`` — models (rows, first column ``model``) × criteria;
* ``criteria.yaml`` — per criterion: group (performance | efficiency | fairness),
  direction, unit and source (the sidecar :meth:`ranking.table.ScoreTable.load` reads);
* ``seeds.csv`` — per-seed values, long (``model, criterion, seed, value``) for
  every seed-dependent cell of the matrix (performance and efficiency): what
  ``vnr rank --bootstrap`` resamples;
* ``seed_stats.csv`` — the side table: per model and seed-dependent criterion,
  the value of every seed, their mean, standard deviation (ddof=1) and count.

The criteria come from the records of the tasks and bias sets, nowhere else:

* **performance** — each criterion of each GLUE task record
  (:attr:`harness.finetune.tasks.GlueTask.criteria`: ``rte_acc``, ``mnli_mm_acc``, ...)
  averaged over the seeds (``--epoch final``: the last epoch's metrics;
  ``best``: each metric's best epoch, as the paper's ``glue_hpc`` table).
* **efficiency** — per task, energy (kWh), duration (h), GPU-hours and carbon
  (kg CO2eq) of one fine-tuning run, averaged over seeds; lower is better.
  The sidecar states the packing level they were measured at (how many runs
  shared the GPU, ``efficiency.packing`` of the records, 1 when alone); runs
  measured at different levels are not mixed in one criterion unless
  ``allow_mixed_packing``. Each energy and carbon criterion also states how its
  energy was obtained (``method``: the runs' ``efficiency.energy_basis``,
  :mod:`harness.energy.basis`: ``measured``, ``estimate``, ``mixed``, ``none``, or
  ``unknown`` for a record without it), and its ``source`` says so in words.
  Opt-in (``extra_criteria`` / ``vnr collect --criteria +tokens_per_s``): the
  training throughput in real tokens/s (the record's ``tokens`` section), higher
  is better; off by default, so that adding it never changes a ranking silently.
* **fairness** — the fairness criteria of each bias set record
  (:attr:`harness.bias.data.BiasDataset.fairness`), oriented so that the
  declared direction holds.

A registered task or bias set that has usable results but yields no column is
an error naming it (its record and its runs disagree), never a silent drop.

Only the runs of this config count (the run ids it expands to), so a stale
result of an older hyper-parameter setting never leaks in. A run counts when
its record is usable (:func:`harness.store.record_problem`, what ``vnr run`` and
``vnr status`` ask too): a JSON object with status ``ok`` naming this run, its
task's or bias set's own metrics numeric and in range, finite values. Missing runs (no record, failed) and unusable ones are refused by name
unless ``allow_missing``; then a seed-dependent cell with any seed missing is
left EMPTY (never an average of the seeds that happen to be there, which would
put a noisier number beside full means under the same "mean over seeds"), and
its per-seed values stay in ``seed_stats.csv``.
"""

from __future__ import annotations

import io
import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.energy import basis
from harness.grid.config import Experiment
from harness.kinds import kinds
from harness.store import STATUS_FAILED, RunStore, record_problem
from ranking.floor.errors import UserError

log = logging.getLogger("harness.grid")

GROUPS = ("performance", "efficiency", "fairness")
SHOWN = 5  # run ids named in an error


# ------------------------------------------------------------------ efficiency
#: key in the record's ``efficiency`` → (criterion suffix, unit, what it is). All lower-is-better.
EFFICIENCY_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("energy_kwh", "energy_kwh", "kWh", "energy (GPU from NVML where available, CPU/RAM from codecarbon)"),
    ("duration_h", "duration_h", "h", "wall-clock duration of training and evaluation"),
    ("gpu_hours", "gpu_hours", "GPU-h", "GPU time attributed to the run"),
    ("co2_kg", "co2_kg", "kg CO2eq", "energy × the configured country's fixed grid carbon intensity "
     "(codecarbon's bundled average, not measured)"),
)
#: opt-in efficiency criteria (``collect(extra_criteria=...)``, ``vnr collect --criteria +NAME``):
#: name → (record section, unit, direction, what it is). Off by default: a new column changes a ranking.
OPTIONAL_EFFICIENCY: dict[str, tuple[str, str, str, str]] = {
    "tokens_per_s": ("tokens", "tokens/s", "higher", "real (non-padding) training tokens per second inside "
                     "optimizer steps (the record's tokens section; depends on the device and the batch layout)"),
}
#: the efficiency criteria whose figures are the energy's, so they carry its basis (carbon = energy × intensity)
ENERGY_BASED = ("energy_kwh", "co2_kg")


#: how a fairness criterion's ``source`` names the scoring mode of its runs (harness.bias: ``scoring``)
SCORING_SOURCES = {
    "default": "scored with the harness's definitions",
    "reference": "scored with the published scripts' definitions (scoring: reference)",
    "votenrank": "scored with the Vote'n'Rank authors' fairness computation (scoring: votenrank)",
}


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
    unusable: dict[str, str] = field(default_factory=dict)  # run id -> what is wrong with its record
    packing: dict[str, list[int]] = field(default_factory=dict)  # task -> packing levels of its efficiency runs
    preset: str = "default"  # the grid's ranking preset (rank with --preset PRESET to follow it)
    energy_basis: dict[str, str] = field(default_factory=dict)  # task -> how its energy was obtained (method)


def _num(value: Any) -> float | None:
    """A finite number, else None (bools, strings and null are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _metrics_of(rec: dict[str, Any], epoch: str, rid: str, warn: bool = True) -> Any:
    if epoch == "best":
        if rec.get("metrics_best"):
            return rec["metrics_best"]
        if warn:
            log.warning("%s has no metrics_best; using its final metrics", rid)
    return rec.get("metrics")


def usable_problem(rec: Any, spec: Any, epoch: str = "final") -> str | None:
    """What makes a record unusable for the matrix, or None: the run store's one predicate
    (:func:`harness.store.record_problem`), which ``vnr run`` and ``vnr status`` ask too.

    >>> from harness.specs import FinetuneSpec
    >>> spec = FinetuneSpec("tiny:bert", "rte", 0)
    >>> usable_problem({"status": "ok", "metrics": {"accuracy": 0.5}}, spec) is None
    True
    >>> usable_problem([], spec), usable_problem({"status": "ok", "metrics": {}}, spec)
    ('the record is not a JSON object', 'no numeric metrics')
    >>> usable_problem({"status": "ok", "metrics": {"accuracy": float("nan")}}, spec)
    'metrics.accuracy is nan'
    >>> usable_problem({"status": "ok", "metrics": {"accuracy": None}}, spec)
    'metrics.accuracy is null'
    """
    return record_problem(rec, spec, epoch)


def classify_runs(
    exp: Experiment, store: RunStore | None = None, epoch: str = "final"
) -> tuple[dict[str, dict[str, Any]], list[str], dict[str, str]]:
    """The grid's usable records (run id → record), missing run ids (no record, or a ``failed`` one) and
    unusable ones (run id → why: a result file that is not a usable result, :func:`usable_problem`)."""
    store = store or RunStore(exp.output)
    usable: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    unusable: dict[str, str] = {}
    for spec in exp.specs:
        rid = spec.run_id()
        rec = store.get(rid)
        broken = store.unreadable(rid) if rec is None else None
        if broken:
            unusable[rid] = broken
            continue
        if rec is None or rec.get("status") == STATUS_FAILED:
            missing.append(rid)
            continue
        problem = usable_problem(rec, spec, epoch)
        if problem is None:
            usable[rid] = rec
        else:
            unusable[rid] = problem
    return usable, missing, unusable


def missing_runs(exp: Experiment, store: RunStore | None = None) -> list[str]:
    """Run ids of the grid without a usable finished result (missing, failed or unusable)."""
    _, missing, unusable = classify_runs(exp, store)
    return [*missing, *unusable]


def _some(ids: Sequence[str]) -> str:
    return ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def refusal(exp: Experiment, missing: Sequence[str], unusable: dict[str, str]) -> UserError:
    """The one-line error for runs without a usable result."""
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing or failed ({_some(list(missing))})")
    if unusable:
        shown = [f"{rid}: {why}" for rid, why in list(unusable.items())[:SHOWN]]
        more = f" and {len(unusable) - SHOWN} more" if len(unusable) > SHOWN else ""
        parts.append(f"{len(unusable)} with an unusable record ({'; '.join(shown)}{more}) — records: "
                     f"{RunStore(exp.output).runs_dir}/<run id>.json")
    n = len(missing) + len(unusable)
    return UserError(
        f"{n} of {len(exp.specs)} runs of {exp.source} have no usable result in {exp.output}: {', '.join(parts)}; "
        "run them (vnr run), check them (vnr status), or pass --allow-missing to leave their cells empty"
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return math.nan
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _keys(records: Iterable[dict[str, Any]], field_name: str) -> str:
    found = sorted({k for rec in records for k in (rec.get(field_name) or {})})
    return ", ".join(found[:12]) + (", ..." if len(found) > 12 else "") if found else "none"


def _basis_text(method: str, runs: Sequence[tuple[str, float | None, float | None]]) -> str:
    """What a criterion's ``method`` means, for its ``source``: the basis in words, the modelled share, the runs'.

    >>> text = _basis_text("mixed", [("estimate", 1.0, 1.0), ("measured", 3.0, 0.0)])
    >>> text.startswith("mixed: "), text.endswith("(25% of the energy of these runs modelled; runs: 1 estimate, 1 measured)")
    (True, True)
    """
    text = basis.DESCRIPTION[method]
    notes = []
    energy = [e for _, e, _ in runs]
    modelled = [m for _, _, m in runs]
    if method == basis.MIXED and None not in energy and None not in modelled and sum(energy) > 0:
        notes.append(f"{100 * sum(modelled) / sum(energy):.3g}% of the energy of these runs modelled")
    counts: dict[str, int] = {}
    for b, _, _ in runs:
        counts[b] = counts.get(b, 0) + 1
    if len(counts) > 1:
        notes.append("runs: " + ", ".join(f"{n} {b}" for b, n in sorted(counts.items())))
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _packing_levels(packing: dict[tuple[str, str, int], tuple[int, str]], task: str,
                    cells: set[tuple[str, str]]) -> dict[int, list[str]]:
    """Packing level → run ids, over the efficiency runs of ``task`` behind the matrix's cells."""
    levels: dict[int, list[str]] = {}
    for (model, t, _seed), (level, rid) in sorted(packing.items()):
        if t == task and (model, task) in cells:
            levels.setdefault(level, []).append(rid)
    return levels


def efficiency_metrics(extra_criteria: Sequence[str] = ()) -> list[tuple[str, str, str, str, str, str]]:
    """The efficiency criteria collected: (record key, suffix, unit, note, record section, direction), the
    default ones then the opt-in :data:`OPTIONAL_EFFICIENCY` named in ``extra_criteria``.

    >>> [m[1] for m in efficiency_metrics(["tokens_per_s"])][-2:]
    ['co2_kg', 'tokens_per_s']
    """
    out = [(key, suffix, unit, note, "efficiency", "lower") for key, suffix, unit, note in EFFICIENCY_METRICS]
    for name in dict.fromkeys(extra_criteria):
        if name not in OPTIONAL_EFFICIENCY:
            raise UserError(f"--criteria +{name}: not an optional criterion; use "
                            + ", ".join(f"+{n}" for n in OPTIONAL_EFFICIENCY))
        section, unit, direction, note = OPTIONAL_EFFICIENCY[name]
        out.append((name, name, unit, note, section, direction))
    return out


@dataclass
class Table:
    """The matrix as the kinds' collectors build it (:attr:`harness.kinds.RunKind.collect`): each adds its
    columns to ``rows`` (model label → criterion → value), their sidecar entries to ``meta`` and their names, in
    order, to ``columns``; a seed-dependent column also to ``seeded`` with its per-seed values in ``long_rows``
    and ``stat_rows``. :func:`collect` writes what they built."""

    exp: Experiment
    usable: dict[str, dict[str, Any]]  # run id -> usable record
    epoch: str
    rows: dict[str, dict[str, float]]
    eff_metrics: list[tuple[str, str, str, str, str, str]]
    allow_mixed_packing: bool = False
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    seeded: list[str] = field(default_factory=list)
    stat_rows: list[dict[str, Any]] = field(default_factory=list)  # wide: seed_<s> ..., mean, std, n
    long_rows: list[dict[str, Any]] = field(default_factory=list)  # model, criterion, seed, value (the bootstrap's)
    packing_by_task: dict[str, list[int]] = field(default_factory=dict)
    basis_by_task: dict[str, str] = field(default_factory=dict)


def collect(
    exp: Experiment, *, epoch: str = "final", allow_missing: bool = False, allow_mixed_packing: bool = False,
    extra_criteria: Sequence[str] = (),
) -> Collected:
    """Build and write the matrix, its criteria sidecar and the per-seed side table (``extra_criteria``: the
    opt-in efficiency criteria of :data:`OPTIONAL_EFFICIENCY` to add, e.g. ``["tokens_per_s"]``)."""
    import pandas as pd
    import yaml

    from ranking.table import ScoreTable, sha256_of

    if epoch not in ("final", "best"):
        raise UserError(f"--epoch {epoch!r}: use final or best")
    eff_metrics = efficiency_metrics(extra_criteria)
    out = Path(exp.output)
    if out.exists() and not out.is_dir():
        raise UserError(f"output {out} is a file, not a results directory; give the grid's output directory")
    store = RunStore(exp.output)
    usable, missing, unusable = classify_runs(exp, store, epoch)
    if (missing or unusable) and not allow_missing:
        raise refusal(exp, missing, unusable)
    if unusable:
        log.warning("left out %d runs with unusable records: %s", len(unusable), _some(list(unusable)))

    table = Table(exp, usable, epoch, {exp.label(m): {} for m in exp.models}, eff_metrics, allow_mixed_packing)
    for kind in kinds():  # each kind adds its columns (harness.kinds: its record's ``collect``)
        kind.collector()(table, [s for s in exp.specs if s.kind == kind.name])
    rows, meta, columns = table.rows, table.meta, table.columns
    packing_by_task, basis_by_task = table.packing_by_task, table.basis_by_task

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
        raise UserError(f"no usable finished run in {exp.output}: nothing to collect (run vnr run first)")
    frame.index.name = "model"

    matrix_path, criteria_path = out / "matrix.csv", out / "criteria.yaml"
    seeds_path, stats_path = out / "seeds.csv", out / "seed_stats.csv"
    present = [g for g in GROUPS if any(meta[c]["group"] == g for c in frame.columns)]
    doc = {
        "table": matrix_path.name,
        "sha256": sha256_of(matrix_bytes := _csv_bytes(frame)),
        "model_column": "model",
        "groups": present,
        "criteria": {c: meta[c] for c in frame.columns},
    }
    kept_tasks = [t for t in packing_by_task if any(c.startswith(f"{t}_") and meta[c]["group"] == "efficiency"
                                                     for c in frame.columns)]
    packing_line = ("# efficiency packing (runs per GPU) per task: "
                    + ", ".join(f"{t}={'/'.join(map(str, packing_by_task[t]))}" for t in kept_tasks) + "\n"
                    if kept_tasks else "")
    energy_columns = {t: [f"{t}_{suffix}" for key, suffix, _, _ in EFFICIENCY_METRICS if key in ENERGY_BASED]
                      for t in basis_by_task}
    basis_by_task = {t: b for t, b in basis_by_task.items() if any(c in frame.columns for c in energy_columns[t])}
    basis_line = ("# energy and carbon per task, how obtained (measured | estimate | mixed | none | unknown): "
                  + ", ".join(f"{t}={b}" for t, b in basis_by_task.items()) + "\n" if basis_by_task else "")
    header = (
        f"# Criteria of {matrix_path.name}, written by `vnr collect {exp.source} --epoch {epoch}`.\n"
        f"# {len(frame.index)} models x {len(frame.columns)} criteria; "
        f"{len(missing)} of {len(exp.specs)} runs missing, {len(unusable)} unusable"
        + ("; a seed-dependent cell with any seed missing is empty" if missing or unusable else "") + ".\n"
        + packing_line
        + basis_line
        + (f"# grid preset: {exp.preset} (rank with --preset {exp.preset} to follow its conventions)\n"
           if exp.preset != "default" else "")
    )
    criteria_bytes = (header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)).encode()
    kept = set(frame.columns) & set(table.seeded)
    side_bytes = []
    for table_rows, side_columns in ((table.long_rows, ["model", "criterion", "seed", "value"]), (table.stat_rows, None)):
        side = pd.DataFrame(table_rows, columns=side_columns)
        if len(side):
            side = side[side["criterion"].isin(kept) & side["model"].isin(frame.index)]
        buf = io.StringIO()
        side.to_csv(buf, index=False, float_format="%.10g")
        side_bytes.append(buf.getvalue().encode())
    if not os.access(out, os.W_OK):  # refuse before writing any of the four files, not half-way
        raise UserError(f"cannot write the matrix into {out}: the directory is not writable")

    # one unit, all or nothing even under kill -9 (ranking.floor.together): the side tables, the matrix, then its
    # sidecar (which holds the matrix's hash); what `vnr rank` reads must load before anything is replaced
    write_unit(out, [(seeds_path.name, side_bytes[0]), (stats_path.name, side_bytes[1]),
                     (matrix_path.name, matrix_bytes), (criteria_path.name, criteria_bytes)],
               check=lambda staged: ScoreTable.from_csv(staged / matrix_path.name, staged / criteria_path.name))
    return Collected(matrix_path, criteria_path, seeds_path, stats_path, list(frame.index), list(frame.columns),
                     [*missing, *unusable], dict(unusable), packing_by_task, preset=exp.preset,
                     energy_basis=basis_by_task)


def _csv_bytes(frame: Any) -> bytes:
    buf = io.StringIO()
    frame.to_csv(buf, float_format="%.10g")
    return buf.getvalue().encode()


def write_unit(out: Path, files: Sequence[tuple[str, bytes]], check: Callable[[Path], object] | None = None) -> None:
    """Write ``files`` (name, content) into ``out`` as one unit (:func:`ranking.floor.together.write_together`):
    staged beside their targets, ``check(staging)`` reads them back, then journalled and moved in, so a kill at
    any point leaves the previous unit or the new one whole once the folder is next read.

    A failure while staging (disk full, read-only folder), a refusal by ``check`` or a failure between the
    renames (the files already replaced are put back) changes none of the targets: a one-line
    :class:`UserError` that says nothing was changed, and no staging folder is left.
    """
    from ranking.floor.together import JOURNAL, STAGING_PREFIX, write_together

    def fill(staging: Path) -> None:
        for name, content in files:
            with open(staging / name, "xb") as fh:  # the umask's mode, as open() gives
                fh.write(content)

    def named_as_targets(text: str) -> str:  # the files as they would be, not their staging copies
        return re.sub(rf"{re.escape(str(out))}/{re.escape(STAGING_PREFIX)}[^/]*", str(out), text)

    def checked(staging: Path) -> None:
        if check is None:
            return
        try:
            check(staging)
        except UserError as exc:
            raise UserError(f"the results would not load in vnr rank: {named_as_targets(str(exc))} — nothing was "
                            "changed, the previous files are as they were") from None

    try:
        write_together(out, fill, [name for name, _ in files], check=checked, written_by="vnr collect")
    except OSError as exc:
        where = named_as_targets(str(getattr(exc, "filename", None) or out / files[0][0]))
        if (out / JOURNAL).exists():  # the old files could not be put back: the new ones are finished next time
            raise UserError(f"cannot write {where}: {exc.strerror or exc} — the new results are finished by the "
                            "next vnr collect or vnr rank of the folder") from None
        raise UserError(f"cannot write {where}: {exc.strerror or exc} — nothing was changed; free space or "
                        "fix the folder's permissions, then re-run vnr collect") from None


def describe(result: Collected) -> str:
    """One line for the CLI."""
    line = (
        f"wrote {result.matrix_path} ({len(result.models)} models × {len(result.criteria)} criteria), "
        f"{result.criteria_path.name}, {result.seeds_path.name} and {result.stats_path.name}"
    )
    unmeasured: dict[str, list[str]] = {}  # basis -> tasks
    for task, how in result.energy_basis.items():
        if how != basis.MEASURED:
            unmeasured.setdefault(how, []).append(task)
    if unmeasured:
        line += ("; energy and carbon not measured: " + "; ".join(f"{b} for {', '.join(ts)}" for b, ts in unmeasured.items())
                 + f" (see {result.criteria_path.name})")
    if result.missing:
        unusable = f" ({len(result.unusable)} of them unusable records)" if result.unusable else ""
        line += (f"; {len(result.missing)} runs missing{unusable}: their cells, and every mean over seeds "
                 "lacking one, are empty")
    if result.preset != "default":
        line += f"; the grid follows preset {result.preset}: rank with --preset {result.preset}"
    return line
