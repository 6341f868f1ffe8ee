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

from ranking.scenarios.compare import Comparison, criterion_ranks
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


def bump_chart(cmp: Comparison) -> Any:
    """Each model's rank across the columns (reference first), one line per model."""
    plt = _plt()
    cols = [c.name for c in cmp.scenario.columns]
    ref = cmp.scenario.reference
    cols = [ref, *[c for c in cols if c != ref]]
    n = len(cmp.models)
    colors = model_colors(cmp.models)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(cols) + 3), max(3.0, 0.45 * n + 1.5)))
    x = np.arange(len(cols))
    ref_order = cmp.results[ref].ordering()
    for m in ref_order:
        i = cmp.models.index(m)
        y = np.array([cmp.results[c].ranks[i] for c in cols], dtype=float)
        ax.plot(x, y, "-o", color=colors[m], lw=2.2, ms=7, label=m)
        last = np.where(~np.isnan(y))[0]
        if last.size:
            ax.annotate(m, (x[last[-1]], y[last[-1]]), xytext=(8, 0), textcoords="offset points",
                        va="center", fontsize=8, color=colors[m])
    ax.set_xticks(x)
    ax.set_xticklabels([f"{c}\n(reference)" if c == ref else c for c in cols], rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(1, n + 1))
    ax.set_ylim(n + 0.5, 0.5)
    ax.set_xlim(-0.3, len(cols) - 1 + 1.6)
    ax.set_ylabel("rank (1 = best)")
    ax.set_title(f"Rank of each model across the columns of {cmp.scenario.name}")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def criteria_heatmap(table: ScoreTable, models_order: Sequence[str] | None = None) -> Any:
    """Per-criterion ranks (1 = best on that criterion), criteria grouped, models in ``models_order``."""
    plt = _plt()
    ranks = criterion_ranks(table)
    order = list(models_order or table.models)
    rows = [table.models.index(m) for m in order]
    groups = table.group_names or (None,)
    cols: list[int] = []
    bounds: list[tuple[str, int, int]] = []
    for g in groups:
        idx = [j for j, c in enumerate(table.criteria) if c.group == g]
        if idx:
            bounds.append((g or "", len(cols), len(cols) + len(idx)))
            cols.extend(idx)
    rest = [j for j in range(table.n_criteria) if j not in cols]
    if rest:
        bounds.append(("(no group)", len(cols), len(cols) + len(rest)))
        cols.extend(rest)
    data = ranks[np.ix_(rows, cols)]
    n_c = len(cols)
    fig, ax = plt.subplots(figsize=(min(24.0, max(6.0, 0.22 * n_c + 3)), max(3.0, 0.4 * len(order) + 2.2)))
    cmap = plt.get_cmap("viridis_r").with_extremes(bad="#eeeeee")
    im = ax.imshow(np.ma.masked_invalid(data), aspect="auto", cmap=cmap, vmin=1, vmax=max(len(order), 2))
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels(order, fontsize=8)
    ax.set_xticks(range(n_c))
    ax.set_xticklabels([table.criteria[j].name for j in cols], rotation=90, fontsize=6)
    for name, start, stop in bounds:
        if start:
            ax.axvline(start - 0.5, color="white", lw=3)
        ax.text((start + stop - 1) / 2, -0.8, name, ha="center", va="bottom", fontsize=9, fontweight="bold")
    if n_c <= 20 and len(order) <= 20:
        for r in range(len(order)):
            for c in range(n_c):
                if not math.isnan(data[r, c]):
                    ax.text(c, r, int(data[r, c]), ha="center", va="center", fontsize=7, color="white")
    cb = fig.colorbar(im, ax=ax, fraction=0.025, pad=0.01)
    cb.set_label("rank on the criterion")
    ax.set_title("Per-criterion ranks, grouped", pad=22)
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
    """Per column, each model's probability of each rank position over the seed bootstrap."""
    plt = _plt()
    assert cmp.rank_probabilities is not None
    cols = [c.name for c in cmp.scenario.columns]
    n = len(cmp.models)
    ncols = min(4, len(cols))
    nrows = math.ceil(len(cols) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols + 1.5, (0.32 * n + 1.4) * nrows), squeeze=False)
    order = cmp.reference.ordering()
    rows = [cmp.models.index(m) for m in order]
    im = None
    for ax, c in zip(axes.flat, cols):
        data = cmp.rank_probabilities[c][rows]
        im = ax.imshow(data, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        ax.set_title(c, fontsize=9)
        ax.set_xticks(range(n))
        ax.set_xticklabels([str(p + 1) for p in range(n)], fontsize=7)
        ax.set_yticks(range(n))
        ax.set_yticklabels(order if ax in axes[:, 0] else [], fontsize=7)
        for r in range(n):
            for p in range(n):
                if data[r, p] >= 0.005:
                    ax.text(p, r, f"{data[r, p]:.2f}", ha="center", va="center", fontsize=6,
                            color="white" if data[r, p] > 0.6 else "black")
    for ax in list(axes.flat)[len(cols):]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes, fraction=0.02, pad=0.01, label="P(rank)")
    fig.suptitle(f"Rank probabilities over {cmp.bootstrap_n} seed-bootstrap resamples (x: rank position)", fontsize=10)
    return fig
