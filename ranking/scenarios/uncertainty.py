"""A scenario's rank intervals, tiers and fewest changes to win (``vnr rank --scenario S --intervals --robustness``,
``vnr report ... --intervals --robustness``): :mod:`ranking.intervals` and :mod:`ranking.robustness` run on
every column of the comparison, and their text, CSV/JSON fields and report section.

In the report, each column's intervals are drawn as bars (one row per model, the bar from ``rank_lo`` to
``rank_hi``, a dot at the point rank) over bands, one band per tier. The live-weights sliders re-rank the
table in the page but do not redraw the intervals: when the weights differ from the scenario's, the page
says the intervals are stale (``#intervals-stale``).
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np

from ranking.scenarios.compare import Comparison, column_plans, run_column


def add_intervals(cmp: Comparison, seeds: str | Path | None, *, level: float, draws: int, seed: int) -> None:
    """Fill ``cmp.intervals`` (column → RankIntervals) and ``cmp.intervals_note`` from the table's uncertainty."""
    from ranking.intervals import draw_source, intervals_from_draws, score_draws
    from ranking.plan import check_choices

    level, draws, seed = (check_choices({"level": level, "draws": draws, "seed": seed})[k]
                          for k in ("level", "draws", "seed"))
    table = cmp.table
    source = draw_source(table, seeds)
    from ranking.intervals import tie_recentred, unseparable_models

    drawing = tie_recentred(source)  # around the ties the data allow (ranking.intervals)
    free = unseparable_models(table, source)
    ties = cmp.scenario.ties
    plans = column_plans(cmp.scenario)
    out = {}
    for c in cmp.scenario.columns:
        res = cmp.results[c.name]

        def one(t: Any, c: Any = c) -> np.ndarray:
            return run_column(t, c, ties, plans[c.name]).scores

        simple = c.group is None and not c.params and c.setting == "basic"
        resolved = {"ties": c.ties or ties, "atol": 0.0}
        # a plain basic column may use a vectorised scorer (its plan's); any other is scored draw by draw by its column
        drawn = score_draws(table, c.rule, drawing, draws, seed, setting="basic" if simple else "column",
                            resolved=resolved, score_one=one, plan=plans[c.name] if simple else None)
        out[c.name] = intervals_from_draws(c.rule, table.models, res.scores, res.ranks, drawn, level,
                                           unseparable=free)
    cmp.intervals = out
    cmp.intervals_note = (f"Rank intervals: {level:.0%} for all models at once (per column), from "
                          f"{source.describe(draws, table.values.size)}, seed {seed}; simultaneous pairwise "
                          "comparisons of each column's scores (max statistic). Tier: models the data cannot "
                          "separate share one.")


def add_robustness(cmp: Comparison, *, max_cells: int) -> None:
    """Fill ``cmp.robustness`` (column → CellsToWin)."""
    from ranking.robustness import cells_to_win

    ties = cmp.scenario.ties
    plans = column_plans(cmp.scenario)
    out = {}
    for c in cmp.scenario.columns:
        def one(t: Any, c: Any = c) -> Any:
            return run_column(t, c, ties, plans[c.name])

        simple = c.group is None and not c.params and c.setting == "basic" and not c.ties
        out[c.name] = cells_to_win(cmp.table, c.rule, max_cells=max_cells, plan=plans[c.name],
                                   score=None if simple else one)
    cmp.robustness = out


def format_text(cmp: Comparison, *, wide: bool = False) -> str:
    """Per column: each model's rank, interval and tier; then per column the flip sentence."""
    from ranking.textable import TextTable, render

    blocks = []
    if cmp.intervals:
        cols = list(cmp.intervals)
        first = cmp.results[cols[0]]
        rows = []
        few = scores_flag(cmp)
        for m in first.ordering():
            i = cmp.models.index(m)
            row = [f"{m} ({few[m]})" if m in few else m]
            for c in cols:
                iv = cmp.intervals[c]
                r = cmp.results[c].ranks[i]
                if math.isnan(r):
                    row.append("–")
                    continue
                span = f"{int(iv.rank_lo[i])}" if iv.rank_lo[i] == iv.rank_hi[i] else \
                    f"{int(iv.rank_lo[i])}–{int(iv.rank_hi[i])}"
                row.append(f"{int(r)} [{span}] T{int(iv.tier[i])}")
            rows.append(row)
        table = TextTable(["model", *cols], rows, title=f"rank [interval] tier, sorted by {cols[0]}",
                          legend="interval: the ranks the data allow, for all models at once; T1 = top tier",
                          align="l" * (1 + len(cols)))
        blocks.append(render(table, wide=wide) + "\n" + cmp.intervals_note)
    if cmp.robustness:
        from ranking.robustness import SCOPE

        width = max(len(c) for c in cmp.robustness)
        lines = [f"Fewest changed scores to win ({SCOPE}):"]
        lines += [f"  {c:<{width}}  {rb.flip_sentence()}" for c, rb in cmp.robustness.items()]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def section_html(cmp: Comparison) -> str:
    """The report's "How sure the ranks are" section: per column an SVG of interval bars over tier bands."""
    if not cmp.intervals and not cmp.robustness:
        return ""
    parts = ["<h2>How sure the ranks are</h2>"]
    if cmp.intervals:
        parts.append(f"<p class='muted'>{html.escape(cmp.intervals_note)} Bars: the interval of ranks; dot: the "
                     "rank; bands: tiers. <span id='intervals-stale' class='down'></span></p>")
        for c in cmp.intervals:
            parts.append(f"<h3>{html.escape(c)} <span class='muted'>{html.escape(cmp.scenario.column(c).label)}"
                         f"</span></h3>" + interval_svg(cmp, c))
    if cmp.robustness:
        from ranking.robustness import SCOPE

        items = "".join(f"<li><b>{html.escape(c)}</b>: {html.escape(rb.flip_sentence())}</li>"
                        for c, rb in cmp.robustness.items())
        parts.append(f"<p class='muted'>Fewest changed scores to win ({html.escape(SCOPE)}).</p><ul "
                     f"id='flip-sentences'>{items}</ul>")
    return "".join(parts)


def scores_flag(cmp: Comparison) -> dict[str, str]:
    """Models with scores on fewer than half of the criteria → ``k/m`` (flagged wherever they are ranked)."""
    from ranking.scenarios.compare import few_score_flags

    return few_score_flags(cmp.table)


def interval_svg(cmp: Comparison, column: str) -> str:
    """One column's intervals: rows of models in rank order, bars from rank_lo to rank_hi, tier bands behind.

    Every bar is ``<rect class="interval" data-model=… data-lo=… data-hi=… data-tier=…>`` (what the tests read).
    A model with few scores is labelled with how many it has (``B (2/81)``).
    """
    few = scores_flag(cmp)
    iv = cmp.intervals[column]
    res = cmp.results[column]
    order = [m for m in res.ordering() if not math.isnan(res.ranks[cmp.models.index(m)])]
    n = len(cmp.models)
    row_h, left, width = 22, 160, 420
    step = width / max(n, 1)
    height = row_h * len(order) + 30

    def x(rank: float) -> float:
        return left + (rank - 0.5) * step

    shapes = []
    tiers = [int(iv.tier[cmp.models.index(m)]) for m in order]
    start = 0
    for k in range(1, len(order) + 1):
        if k == len(order) or tiers[k] != tiers[start]:
            shade = "#eef3fb" if tiers[start] % 2 else "#fdf3e6"
            shapes.append(f"<rect class='tier-band' data-tier='{tiers[start]}' x='0' y='{start * row_h}' "
                          f"width='{left + width + 10}' height='{(k - start) * row_h}' fill='{shade}'/>"
                          f"<text x='{left + width + 14}' y='{start * row_h + 15}' font-size='11' "
                          f"fill='#555'>T{tiers[start]}</text>")
            start = k
    for r, m in enumerate(order):
        i = cmp.models.index(m)
        lo, hi, point = float(iv.rank_lo[i]), float(iv.rank_hi[i]), float(res.ranks[i])
        y = r * row_h
        shapes.append(
            f"<text x='4' y='{y + 15}' font-size='12'>{html.escape(m + (f' ({few[m]})' if m in few else ''))}</text>"
            f"<rect class='interval' data-model='{html.escape(m)}' data-lo='{int(lo)}' data-hi='{int(hi)}' "
            f"data-tier='{int(iv.tier[i])}' x='{x(lo) - step * 0.4:.1f}' y='{y + 7}' "
            f"width='{(hi - lo) * step + step * 0.8:.1f}' height='8' rx='4' fill='#2171b5' opacity='0.55'/>"
            f"<circle cx='{x(point):.1f}' cy='{y + 11}' r='4' fill='#08306b'/>"
        )
    axis_y = len(order) * row_h + 4
    ticks = "".join(f"<text x='{x(k):.1f}' y='{axis_y + 14}' font-size='10' text-anchor='middle'>{k}</text>"
                    for k in range(1, n + 1) if n <= 30 or k in (1, n) or k % 10 == 0)
    return (f"<svg class='rank-intervals' data-column='{html.escape(column)}' width='{left + width + 40}' "
            f"height='{height}' role='img' aria-label='rank intervals of {html.escape(column)}'>"
            + "".join(shapes) + f"<line x1='{left}' x2='{left + width}' y1='{axis_y}' y2='{axis_y}' stroke='#999'/>"
            + ticks + "</svg>")
