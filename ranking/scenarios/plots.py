"""Figures of a scenario: bump chart, criteria heatmap, weight-simplex maps, rank probabilities.

matplotlib is imported lazily (Agg backend) inside each function, so importing
this module (and the CLI) stays light. Every function returns a Figure; the
report saves it as PNG (inlined) and SVG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ranking.scenarios.compare import Comparison, criterion_order, criterion_ranks
from ranking.scenarios.simplex import NO_WINNER, TIE, SimplexMap
from ranking.table import ScoreTable

TIE_COLOR = "#bdbdbd"
NONE_COLOR = "#ffffff"


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def model_colors(models: Sequence[str]) -> dict[str, Any]:
    """One stable colour per model (tab10, then tab20)."""
    plt = _plt()
    cmap = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    return {m: cmap(i % cmap.N) for i, m in enumerate(models)}


def spread_labels(y: Sequence[float], gap: float) -> list[float]:
    """Label heights near ``y`` (same order) at least ``gap`` apart, each block centred on its points.

    >>> spread_labels([1.0, 4.0, 4.0, 4.0, 7.0], 0.5)
    [1.0, 3.5, 4.0, 4.5, 7.0]
    """
    order = sorted(range(len(y)), key=lambda k: y[k])
    blocks: list[list[int]] = []  # runs of labels pushed together, each placed around its mean height
    pos = [float(v) for v in y]
    for k in order:
        blocks.append([k])
        while True:
            cur = blocks[-1]
            centre = sum(y[i] for i in cur) / len(cur)
            start = centre - gap * (len(cur) - 1) / 2
            for n, i in enumerate(cur):
                pos[i] = start + n * gap
            if len(blocks) < 2 or pos[blocks[-2][-1]] + gap <= pos[cur[0]] + 1e-12:
                break
            blocks[-2:] = [blocks[-2] + cur]
    return pos


def bump_chart(cmp: Comparison) -> Any:
    """Each model's rank across the columns (reference first), one line per model.

    Tied models' points are drawn side by side around their shared rank; the model names
    sit right of the last column, spread apart so that tied models' names do not overprint.
    """
    plt = _plt()
    cols = [c.name for c in cmp.scenario.columns]
    ref = cmp.scenario.reference
    cols = [ref, *[c for c in cols if c != ref]]
    n = len(cmp.models)
    colors = model_colors(cmp.models)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(cols) + 3.5), max(3.5, 0.5 * n + 1.8)))
    x = np.arange(len(cols), dtype=float)
    ref_order = cmp.results[ref].ordering()
    ranks = {m: np.array([cmp.results[c].ranks[cmp.models.index(m)] for c in cols], dtype=float) for m in ref_order}
    shift = {m: np.zeros(len(cols)) for m in ref_order}  # tied points side by side (vertical offsets)
    for k in range(len(cols)):
        by_rank: dict[float, list[str]] = {}
        for m in ref_order:
            if not math.isnan(ranks[m][k]):
                by_rank.setdefault(ranks[m][k], []).append(m)
        for tied in by_rank.values():
            for t, m in enumerate(tied):
                shift[m][k] = (t - (len(tied) - 1) / 2) * min(0.16, 0.7 / len(tied))
    ends = []
    for m in ref_order:
        y = ranks[m] + shift[m]
        ax.plot(x, y, "-o", color=colors[m], lw=2.2, ms=7, label=m)
        last = np.where(~np.isnan(y))[0]
        if last.size:
            ends.append((m, x[last[-1]], y[last[-1]]))
    label_y = spread_labels([e[2] for e in ends], gap=0.42)
    x_label = len(cols) - 1 + 0.35
    for (m, x0, y0), yl in zip(ends, label_y):
        ax.annotate(m, (x0, y0), xytext=(x_label, yl), textcoords="data", va="center", fontsize=9,
                    color=colors[m], arrowprops=dict(arrowstyle="-", color=colors[m], lw=0.8, alpha=0.7,
                                                    shrinkA=0, shrinkB=4))
    ax.set_xticks(x)
    ax.set_xticklabels([f"{c}\n(reference)" if c == ref else c for c in cols], rotation=20, ha="right", fontsize=9)
    ax.set_yticks(range(1, n + 1))
    low = max([n + 0.5, *[v + 0.4 for v in label_y]])
    high = min([0.5, *[v - 0.4 for v in label_y]])
    ax.set_ylim(low, high)
    width = max((len(m) for m in cmp.models), default=8)
    ax.set_xlim(-0.3, len(cols) - 1 + 0.45 + 0.06 * width)
    ax.set_ylabel("rank (1 = best)")
    ax.set_title(f"Rank of each model across the columns of {cmp.scenario.name}")
    ax.grid(axis="y", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


def criteria_heatmap(table: ScoreTable, models_order: Sequence[str] | None = None) -> Any:
    """Per-criterion ranks (1 = best on that criterion): one row per criterion, by group then name.

    Criteria are rows (their names stay horizontal and readable however many there are),
    models are columns in ``models_order``; the group of each block of rows is named on the
    right; the colour bar has integer ticks (ranks).
    """
    plt = _plt()
    from matplotlib.ticker import MaxNLocator

    ranks = criterion_ranks(table)
    order = list(models_order or table.models)
    rows = [table.models.index(m) for m in order]
    crits = criterion_order(table)
    data = ranks[np.ix_(rows, crits)].T  # criteria × models
    n_c, n_m = data.shape
    name_w = max((len(table.criteria[j].name) for j in crits), default=8)
    fig_w = min(20.0, max(6.5, 0.62 * n_m + 0.075 * name_w + 2.8))
    fig_h = max(3.2, 0.235 * n_c + 2.6)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    cmap = plt.get_cmap("viridis_r").with_extremes(bad="#eeeeee")
    vmax = max(n_m, 2)
    im = ax.imshow(np.ma.masked_invalid(data), aspect="auto", cmap=cmap, vmin=1, vmax=vmax, interpolation="nearest")
    ax.set_yticks(range(n_c))
    ax.set_yticklabels([table.criteria[j].name for j in crits], fontsize=8)
    ax.set_xticks(range(n_m))
    ax.xaxis.tick_top()
    ax.set_xticklabels(order, rotation=90, ha="center", fontsize=9)
    groups = [table.criteria[j].group or "(no group)" for j in crits]
    start = 0
    for k in range(1, n_c + 1):
        if k == n_c or groups[k] != groups[start]:
            if start:
                ax.axhline(start - 0.5, color="white", lw=3)
            ax.annotate(groups[start], xy=(1.0, (start + k - 1) / 2), xycoords=("axes fraction", "data"),
                        xytext=(8, 0), textcoords="offset points", rotation=90 if k - start > 3 else 0,
                        ha="left", va="center", fontsize=10, fontweight="bold")
            start = k
    if n_c * n_m <= 1500:
        for r in range(n_c):
            for c in range(n_m):
                if not math.isnan(data[r, c]):
                    dark = data[r, c] > (1 + vmax) / 2
                    ax.text(c, r, int(data[r, c]), ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")
    cb = fig.colorbar(im, ax=ax, orientation="horizontal", fraction=0.04 if n_c > 20 else 0.08, pad=0.02,
                      aspect=40)
    cb.ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    cb.set_label("rank on the criterion (1 = best; grey: no score)")
    fig.suptitle("Per-criterion ranks, grouped (models in the reference column's order)", fontsize=11)
    fig.tight_layout()
    return fig


def _hexagon(cx: float, cy: float, r: float) -> np.ndarray:
    ang = np.deg2rad(30 + 60 * np.arange(6))
    return np.column_stack([cx + r * np.cos(ang), cy + r * np.sin(ang)])


def _to_xy(points: np.ndarray) -> np.ndarray:
    """Barycentric (a, b, c) → triangle with corners a=(0,0), b=(1,0), c=(1/2, √3/2)."""
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, math.sqrt(3) / 2]])
    return points @ corners


def simplex_figure(maps: Sequence[SimplexMap], scenario_weights: Sequence[np.ndarray | None] = ()) -> Any:
    """One weight triangle per map, each point coloured by its winner (grey: tie; white: no winner)."""
    plt = _plt()
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch, Polygon

    models = maps[0].models
    colors = model_colors(models)
    fig, axes = plt.subplots(1, len(maps), figsize=(5.2 * len(maps), 5.4), squeeze=False)
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, math.sqrt(3) / 2]])
    used: set[int] = set()
    for k, (ax, smap) in enumerate(zip(axes[0], maps)):
        xy = _to_xy(smap.points)
        r = 1.0 / smap.resolution / math.sqrt(3) * 1.02
        codes = smap.codes
        facecolors = [
            colors[models[c]] if c >= 0 else (TIE_COLOR if c == TIE else NONE_COLOR) for c in codes
        ]
        used.update(int(c) for c in codes)
        polys = PolyCollection([_hexagon(x, y, r) for x, y in xy], facecolors=facecolors, edgecolors="none")
        tri = Polygon(corners, closed=True, fill=False, edgecolor="black", lw=1.2)
        ax.add_patch(tri)
        ax.add_collection(polys)
        polys.set_clip_path(tri)
        g = smap.groups
        ax.text(-0.04, -0.05, f"{g[0]}\n(1, 0, 0)", ha="center", va="top", fontsize=9)
        ax.text(1.04, -0.05, f"{g[1]}\n(0, 1, 0)", ha="center", va="top", fontsize=9)
        ax.text(0.5, math.sqrt(3) / 2 + 0.03, f"{g[2]} (0, 0, 1)", ha="center", va="bottom", fontsize=9)
        w = scenario_weights[k] if k < len(scenario_weights) else None
        if w is not None:
            p = _to_xy(np.asarray(w, dtype=float)[None, :])[0]
            ax.plot(p[0], p[1], marker="*", ms=16, color="black", mec="white", mew=1.2)
            ax.annotate("scenario", p, xytext=(8, 6), textcoords="offset points", fontsize=8)
        ax.set_title(f"{smap.column}\n{smap.label}", fontsize=10)
        ax.set_xlim(-0.15, 1.15)
        ax.set_ylim(-0.2, 1.0)
        ax.set_aspect("equal")
        ax.axis("off")
    handles = [Patch(facecolor=colors[models[i]], label=models[i]) for i in sorted(c for c in used if c >= 0)]
    if TIE in used:
        handles.append(Patch(facecolor=TIE_COLOR, label="tie for first"))
    if NO_WINNER in used:
        handles.append(Patch(facecolor=NONE_COLOR, edgecolor="black", label="no winner"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), fontsize=9, frameon=False)
    fig.suptitle("Winner at each group weighting (★ = the scenario's weights)", fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    return fig


def rank_probability_figure(cmp: Comparison) -> Any:
    """Per column, each model's probability of each rank position over the seed bootstrap.

    One panel per column (three per row), models in the reference column's order, cells
    labelled with the percentage (blank below 1%), integer rank positions on the x axis.
    """
    import textwrap

    plt = _plt()
    assert cmp.rank_probabilities is not None
    cols = [c.name for c in cmp.scenario.columns]
    n = len(cmp.models)
    ncols = min(3, len(cols))
    nrows = math.ceil(len(cols) / ncols)
    name_w = max(len(m) for m in cmp.models)
    panel_w, panel_h = 0.42 * n + 1.0, 0.36 * n + 1.1
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_w * ncols + 0.075 * name_w + 1.2, panel_h * nrows + 0.8),
                             squeeze=False, layout="constrained")
    order = cmp.reference.ordering()
    rows = [cmp.models.index(m) for m in order]
    im = None
    for k, (ax, c) in enumerate(zip(axes.flat, cols)):
        data = 100 * np.asarray(cmp.rank_probabilities[c][rows], dtype=float)  # in %, like the colour bar
        im = ax.imshow(data, cmap="Blues", vmin=0, vmax=100, aspect="auto", interpolation="nearest")
        ax.set_title("\n".join(textwrap.wrap(c, 30)), fontsize=9)
        ax.set_xticks(range(n))
        ax.set_xticklabels([str(p + 1) for p in range(n)], fontsize=8)
        ax.set_xlabel("rank", fontsize=8)
        ax.set_yticks(range(n))
        ax.set_yticklabels(order if k % ncols == 0 else [], fontsize=8)
        for r in range(n):
            for p in range(n):
                if data[r, p] >= 1:
                    ax.text(p, r, f"{data[r, p]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if data[r, p] > 60 else "black")
    for ax in list(axes.flat)[len(cols):]:
        ax.axis("off")
    if im is not None:
        cb = fig.colorbar(im, ax=axes, fraction=0.02, pad=0.01)
        cb.set_label("% of resamples at this rank")
    fig.suptitle(f"Rank probabilities over {cmp.resamples()} (cells: % of resamples)", fontsize=10)
    return fig
