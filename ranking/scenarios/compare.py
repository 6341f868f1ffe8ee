"""Run a scenario's columns on its table and show what changes against the reference column.

>>> cmp = compare(scenario, table)                       # doctest: +SKIP
>>> print(format_table(cmp))                             # doctest: +SKIP
#  am_performance          borda                     ...
1  deberta-base 81.5 =     roberta-base 320 ↑1       ...

A rank change is the reference rank minus the column's rank: ``↑2`` means the
model stands two places higher than in the reference column, ``↓1`` one lower,
``=`` the same, ``–`` not ranked in one of the two.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ranking.floor.errors import UserError
from ranking.result import RuleResult, positions_from_scores
from ranking.scenarios.scenario import Column, Scenario
from ranking.table import ScoreTable


def run_column(table: ScoreTable, column: Column, ties: str = "default", plan: Any = None) -> RuleResult:
    """One column's result on the scenario table, aligned to ``table.models`` (NaN = not ranked).

    The column ranks through its :class:`ranking.plan.RankPlan` (``plan``, else :meth:`Column.plan` with the
    scenario's ``ties``) on the table the scenario prepared; a ``group`` column ranks that group's sub-table alone
    (setting basic).
    """
    try:
        if column.rule == "board":  # the leaderboard's own order, from the scenario's table
            from ranking.boards import board_result

            return align(board_result(table), table.models)
        if plan is None:
            plan = column.plan(ties)
        res = plan.run_rule(table.group(column.group) if column.group is not None else table, column.rule)
    except UserError as exc:
        raise UserError(f"column {column.name!r} ({column.label}): {exc}") from None
    except TypeError as exc:  # a rule parameter of the wrong kind
        if column.params:
            raise UserError(f"column {column.name!r}: rule {column.rule!r} rejects params {column.params}: {exc}") from None
        raise
    return align(res, table.models)


def align(result: RuleResult, models: tuple[str, ...]) -> RuleResult:
    """``result`` re-indexed on ``models`` (models it did not rank get NaN)."""
    if tuple(result.models) == tuple(models):
        return result
    scores = np.full(len(models), np.nan)
    ranks = np.full(len(models), np.nan)
    where = {m: i for i, m in enumerate(result.models)}
    for i, m in enumerate(models):
        if m in where:
            scores[i] = result.scores[where[m]]
            ranks[i] = result.ranks[where[m]]
    return RuleResult(result.rule, tuple(models), scores, ranks, dict(result.params))


#: what a bootstrap resampled → how the output names its replicates.
BOOTSTRAP_SOURCES = {
    "seeds": "seed-bootstrap resamples",
    "standard_errors": "draws of each score from Normal(score, its standard error)",
}


@dataclass
class Comparison:
    """Every column's result on one table, the reference, and (optionally) bootstrap rank probabilities."""

    scenario: Scenario
    table: ScoreTable
    results: dict[str, RuleResult]
    rank_probabilities: dict[str, np.ndarray] | None = None  # column -> (models × positions)
    bootstrap_n: int = 0
    notes: list[str] = field(default_factory=list)
    bootstrap_source: str = "seeds"  # what was resampled: "seeds" or "standard_errors" (BOOTSTRAP_SOURCES)
    intervals: dict[str, Any] | None = None  # column -> ranking.intervals.RankIntervals (--intervals)
    intervals_note: str = ""  # where the intervals come from (level, draws, source)
    robustness: dict[str, Any] | None = None  # column -> ranking.robustness.CellsToWin (--robustness)

    def resamples(self) -> str:
        """What the rank probabilities are over, e.g. ``200 seed-bootstrap resamples``."""
        return f"{self.bootstrap_n} {BOOTSTRAP_SOURCES[self.bootstrap_source]}"

    @property
    def models(self) -> tuple[str, ...]:
        return self.table.models

    @property
    def reference(self) -> RuleResult:
        return self.results[self.scenario.reference]

    def rank_change(self, column: str) -> np.ndarray:
        """Reference rank − column rank per model (positive = moved up); NaN where either is unranked."""
        return self.reference.ranks - self.results[column].ranks

    def to_json(self) -> dict[str, Any]:
        """``{"<column>": {"scores": {...}, "ranks": {...}, "winners": [...]}}`` (+ ``rank_probabilities``)."""
        out: dict[str, Any] = {}
        for name, res in self.results.items():
            entry = res.to_dict()
            if self.rank_probabilities is not None:
                probs = self.rank_probabilities[name]
                entry["rank_probabilities"] = {
                    m: {str(p + 1): round(float(probs[i, p]), 6) for p in range(probs.shape[1])}
                    for i, m in enumerate(self.models)
                }
            if self.intervals is not None and name in self.intervals:
                entry.update(self.intervals[name].to_dict())
            if self.robustness is not None and name in self.robustness:
                entry.update(self.robustness[name].to_dict())
            out[name] = entry
        if self.intervals is not None:
            out["intervals_note"] = self.intervals_note
        return out


def compare(scenario: Scenario, table: ScoreTable) -> Comparison:
    """Run every column of ``scenario`` on ``table`` (already :meth:`Scenario.build_table`-ed)."""
    results = {c.name: run_column(table, c, scenario.ties, _plan(scenario, c)) for c in scenario.columns}
    return Comparison(scenario, table, results)


def _plan(scenario: Scenario, column: Column) -> Any:
    """The column's plan (None for the board's own order, which is no rule's ranking)."""
    return None if column.rule == "board" else scenario.plan(column)


def column_plans(scenario: Scenario) -> dict[str, Any]:
    """Column name → its :class:`ranking.plan.RankPlan` (None for ``rule: board``), built once for repeated use."""
    return {c.name: _plan(scenario, c) for c in scenario.columns}


# ---------------------------------------------------------------------- formatting
def change_mark(delta: float) -> str:
    """``↑n`` / ``↓n`` / ``=`` / ``–`` for a rank change (reference − column).

    >>> change_mark(2.0), change_mark(-1.0), change_mark(0.0), change_mark(float("nan"))
    ('↑2', '↓1', '=', '–')
    """
    if delta is None or (isinstance(delta, float) and math.isnan(delta)):
        return "–"
    d = int(round(delta))
    return "=" if d == 0 else (f"↑{d}" if d > 0 else f"↓{-d}")


def format_score(x: float) -> str:
    """A score in a comparison cell (the one number formatter, :func:`ranking.textable.number`)."""
    from ranking.textable import number

    return number(x)


def ordered_cells(cmp: Comparison, column: str) -> list[tuple[str, float, float, str]]:
    """(model, score, rank, change mark) from best to worst; unranked models last."""
    res = cmp.results[column]
    change = cmp.rank_change(column)
    return [
        (m, float(res.scores[i]), float(res.ranks[i]), change_mark(float(change[i])))
        for i, m in ((cmp.models.index(m), m) for m in res.ordering())
    ]


#: What the markers in a comparison cell mean (printed under the table).
LEGEND = "↑n / ↓n: n places above / below its reference rank; =: same; (tied n): shares position n; –: unranked"


def format_table(cmp: Comparison, *, wide: bool = False) -> str:
    """The comparison as text: one column per (rule, setting), rows = positions, a legend below."""
    from ranking.textable import TextTable, render

    sc = cmp.scenario
    cols = [c.name for c in sc.columns]
    header = ["#", *[f"{c}{' (ref)' if c == sc.reference else ''}\n{sc.column(c).label}" for c in cols]]
    rows = []
    cells = {c: ordered_cells(cmp, c) for c in cols}
    few = few_score_flags(cmp.table)
    for pos in range(len(cmp.models)):
        row = [str(pos + 1)]
        for c in cols:
            m, score, rank, mark = cells[c][pos]
            flag = f" [{few[m]} scores]" if m in few else ""
            if math.isnan(rank):
                row.append(f"{m} (unranked)")
            else:
                tie = f" (tied {int(rank)})" if _shares(cells[c], rank) else ""
                row.append(f"{m}{flag} {format_score(score)} {mark}{tie}")
        rows.append(row)
    table = TextTable(
        header,
        rows,
        title=f"each column sorted by its own rank (# = position); reference column {sc.reference}; ties {sc.ties}",
        legend=LEGEND + ("; [k/m scores]: the model has scores on only k of the m criteria" if few else ""),
        align="r" + "l" * len(cols),
        name_columns=(),
    )
    out = render(table, wide=wide)
    if cmp.rank_probabilities is not None:
        out += "\n\n" + format_probabilities(cmp, wide=wide)
    if cmp.notes:
        out += "\n\n" + "\n".join(cmp.notes)
    return out


def few_score_flags(table: ScoreTable) -> dict[str, str]:
    """Models with scores on fewer than half of the criteria (of positive weight) → ``k/m``, flagged wherever
    they are ranked (``vnr rank``'s table, the scenario's, the report's)."""
    from ranking.intervals import few_scores

    present = (~np.isnan(table.values[:, table.weights > 0])).sum(axis=1)
    return few_scores({m: int(k) for m, k in zip(table.models, present)})


def _shares(cells: list[tuple[str, float, float, str]], rank: float) -> bool:
    return sum(1 for _, _, r, _ in cells if r == rank) > 1


def format_probabilities(cmp: Comparison, *, wide: bool = False) -> str:
    """Per column, each model's probability (%) of each rank position over the bootstrap (seeds or standard errors)."""
    from ranking.textable import TextTable, render

    assert cmp.rank_probabilities is not None
    n = len(cmp.models)
    blocks = [f"Rank probabilities over {cmp.resamples()} (% of replicates at each position; models tied in a "
              "replicate split the tied positions evenly, so every row and column sums to 100 %):"]
    for c in cmp.scenario.columns:
        probs = cmp.rank_probabilities[c.name]
        rows = []
        for m in cmp.results[c.name].ordering():
            i = cmp.models.index(m)
            rows.append([m, *[f"{100 * probs[i, p]:.1f}" for p in range(n)]])
        table = TextTable(["model", *[str(p + 1) for p in range(n)]], rows,
                          title=f"{c.name} ({c.label}), sorted by its rank", align="l" + "r" * n)
        blocks.append(render(table, wide=wide))
    return "\n\n".join(blocks)


def format_json(cmp: Comparison) -> str:
    return json.dumps(cmp.to_json(), indent=2, ensure_ascii=False)


def format_csv(cmp: Comparison) -> str:
    """Long CSV: column, rule, setting, model, rank, score, rank_change (+ p_rank_k with a bootstrap; + rank_lo,
    rank_hi, tier with intervals; + cells_to_win, cells_to_win_kind, cells with robustness)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    n = len(cmp.models)
    extra = [f"p_rank_{p + 1}" for p in range(n)] if cmp.rank_probabilities is not None else []
    if cmp.intervals is not None:
        extra += ["rank_lo", "rank_hi", "tier"]
    if cmp.robustness is not None:
        extra += ["cells_to_win", "cells_to_win_kind", "cells"]
    writer.writerow(["column", "rule", "setting", "group", "model", "rank", "score", "rank_change", *extra])
    for c in cmp.scenario.columns:
        res = cmp.results[c.name]
        change = cmp.rank_change(c.name)
        for m in res.ordering():
            i = cmp.models.index(m)
            probs = (
                [f"{cmp.rank_probabilities[c.name][i, p]:.6g}" for p in range(n)]
                if cmp.rank_probabilities is not None
                else []
            )
            if cmp.intervals is not None:
                iv = cmp.intervals[c.name]
                probs += ["" if math.isnan(v) else int(v) for v in (iv.rank_lo[i], iv.rank_hi[i], iv.tier[i])]
            if cmp.robustness is not None:
                rb = cmp.robustness[c.name]
                probs += ["" if rb.count[i] is None else rb.count[i], rb.kind[i],
                          ";".join(f"{a}:{k}" for a, k in rb.cells[i])]
            writer.writerow([
                c.name, c.rule, c.setting, c.group or "", m,
                "" if math.isnan(res.ranks[i]) else int(res.ranks[i]),
                "" if math.isnan(res.scores[i]) else repr(float(res.scores[i])),
                "" if math.isnan(change[i]) else int(change[i]),
                *probs,
            ])
    return buf.getvalue()


def criterion_ranks(table: ScoreTable) -> np.ndarray:
    """Per-criterion positions (1 = best on that criterion, ties share the best), models × criteria."""
    oriented = table.oriented
    return np.column_stack([positions_from_scores(oriented[:, j]) for j in range(table.n_criteria)])


def group_weight_vector(groups: tuple[str, ...], weights: Mapping[str, float] | None) -> np.ndarray:
    """Group weights as a point of the simplex (summing to 1), in ``groups`` order."""
    w = np.array([float((weights or {}).get(g, 1.0)) for g in groups])
    return w / w.sum()


def criterion_order(table: ScoreTable) -> list[int]:
    """Criterion indices by group (in the table's group order, ungrouped last), then by name."""
    groups = list(table.group_names)
    return sorted(
        range(table.n_criteria),
        key=lambda j: (
            groups.index(table.criteria[j].group) if table.criteria[j].group in groups else len(groups),
            table.criteria[j].name,
        ),
    )
