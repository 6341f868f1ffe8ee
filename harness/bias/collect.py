"""The bias kind's half of ``vnr collect`` (:attr:`harness.kinds.RunKind.collect`): each bias set's fairness
criteria (from its record), oriented as declared, and the scoring mode its runs were scored with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.bias.data import get_dataset
from harness.grid.collect import SCORING_SOURCES, Table, _keys, _num, _some
from ranking.floor.errors import UserError


def collect_bias(table: Table, specs: Sequence[Any]) -> None:
    """The bias kind's columns: each bias set's fairness criteria, oriented as declared, and the scoring mode
    its runs were scored with (never two in one criterion)."""
    exp, usable, rows, meta = table.exp, table.usable, table.rows, table.meta
    by_target: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (kind, dataset) -> usable records
    fair_names: list[str] = []
    scoring_modes: dict[str, dict[str, list[str]]] = {}  # dataset -> scoring mode -> run ids
    for spec in specs:
        record = get_dataset(spec.dataset)
        for crit in record.fairness:
            if crit.name not in meta:
                fair_names.append(crit.name)
                meta[crit.name] = {
                    "direction": crit.direction,
                    "weight": 1.0,
                    "group": "fairness",
                    "unit": crit.unit,
                    "source": crit.source,
                }
        rec = usable.get(spec.run_id())
        if rec is None:
            continue
        by_target.setdefault(("bias", spec.dataset), []).append(rec)
        mode = str((rec.get("scoring") or {}).get("mode", "default"))
        scoring_modes.setdefault(spec.dataset, {}).setdefault(mode, []).append(spec.run_id())
        metrics = rec.get("metrics") or {}
        for crit in record.fairness:
            value = _num(metrics.get(crit.metric))
            if value is not None:
                rows[exp.label(spec.model)][crit.name] = crit.apply(value)
    for dataset, modes in scoring_modes.items():  # one criterion, one definition: never mix scoring modes
        if len(modes) > 1:
            shown = "; ".join(f"{mode}: {_some(rids)}" for mode, rids in sorted(modes.items()))
            raise UserError(f"bias set {dataset}: its runs were scored with different definitions ({shown}); "
                            "re-run them with one bias.options.scoring (default | reference | votenrank)")
        (mode,) = modes
        for crit in get_dataset(dataset).fairness:
            meta[crit.name]["source"] += "; " + SCORING_SOURCES.get(mode, f"scored with scoring: {mode}")
            if mode in crit.mode_notes:
                meta[crit.name]["source"] += f" — {crit.mode_notes[mode]}"
    for dataset in exp.axis("bias", "datasets"):
        recs = by_target.get(("bias", dataset), [])
        crits = get_dataset(dataset).fairness
        if recs and not any(c.name in row for row in rows.values() for c in crits):
            raise UserError(
                f"bias set {dataset}: {len(recs)} usable runs but none of the metrics its dataset record's fairness "
                f"criteria read ({', '.join(c.metric for c in crits) or 'none'}) is in their records (they hold: "
                f"{_keys(recs, 'metrics')}); fix the record in harness/bias/data.py or the runs"
            )

    table.columns += fair_names
