"""The scenario report: one self-contained HTML page plus its figures as files.

``write_report(cmp, out_dir, maps)`` writes into ``out_dir``:

- ``report.html`` — one self-contained page, no CDN, no network, no server (works from
  ``file://``): figures are inline base64 PNGs; the only script is the live-weights one
  (:mod:`ranking.scenarios.live`), embedded with its data; paths in it are relative
  (a data path reads ``<data root>/…``, others are relative to the report's folder);
- ``comparison.csv`` / ``comparison.json`` — the comparison table (as ``vnr rank`` prints it);
- ``bump_chart.png``, ``criteria_heatmap.png``, ``simplex_map.png`` (three groups and at
  least one weighted / two-step column), ``rank_probabilities.png`` (with a seed bootstrap);
- ``.vnr-report.json`` — the manifest: the files this report wrote.

The report owns the files it writes, and only those: a report written into a folder that holds an
earlier one removes the earlier report's files that it does not write again (a figure the new report
has none of), as its manifest lists them, and never touches any other file. A folder holding report
files that no manifest lists (a report from before the manifest) is refused, naming them, rather than
leaving a figure beside a report that says it has none.

The report's files and its manifest are written as one unit (:func:`ranking.floor.together.write_together`:
staged, journalled, moved, with the umask's permissions): a kill at any point leaves the earlier report or
the new one whole once the folder is next written. Every score and weight on the page goes through one
formatter, :func:`ranking.textable.number` (the live table's JavaScript ``fmt`` is its exact port).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, read_json
from ranking.floor.together import recover, write_together
from ranking.scenarios.compare import (
    Comparison,
    criterion_order,
    few_score_flags,
    format_csv,
    format_json,
    format_score,
    ordered_cells,
)
from ranking.scenarios.simplex import SimplexMap
from ranking.table import ScoreTable
from ranking.textable import number  # the one number formatter (the live table's JS fmt is its port)

REF_ATTR = ' class="ref"'
MANIFEST = ".vnr-report.json"
# every file a report may write (the manifest aside): a manifest can name only these, so an edited
# manifest never makes a report remove another file
REPORT_FILES = ("report.html", "comparison.csv", "comparison.json", "bump_chart.png", "criteria_heatmap.png",
                "simplex_map.png", "rank_probabilities.png")
CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0} th,td{border:1px solid #ddd;padding:.3em .55em;text-align:left}
th{background:#f3f3f3} td.pos{text-align:right;color:#666}
.up{color:#1a7f37;font-weight:600} .down{color:#c62828;font-weight:600} .same{color:#888}
.ref{background:#fff8e1} .score{color:#666;font-size:.9em}
img{max-width:100%;height:auto;border:1px solid #eee} .muted{color:#666;font-size:.9em}
code{background:#f5f5f5;padding:0 .25em}
.scroll{max-height:32em;overflow:auto;border:1px solid #eee} td.num{text-align:right;font-variant-numeric:tabular-nums}
.live-controls{display:flex;flex-wrap:wrap;gap:1.2em;align-items:center;margin:.6em 0}
.live-controls label{display:flex;align-items:center;gap:.4em} .live-group{font-weight:600}
.live-share{display:inline-block;min-width:2.6em;text-align:right;color:#666}
#live-table td[data-rule]{text-align:right} td.live-first{background:#e8f5e9;font-weight:600}
"""


def relative_paths(text: str, out_dir: str | Path, data_root: str | Path | None = None) -> str:
    """``text`` with absolute paths made relative: under the data root ``<data root>/…``, else to ``out_dir``.

    >>> relative_paths("from /data/lb/x.csv and /home/u/s.yaml", "/home/u/report", "/data")
    'from <data root>/lb/x.csv and ../s.yaml'
    """
    root = os.path.normpath(os.path.abspath(data_root)) if data_root else None

    def fix(match: re.Match[str]) -> str:
        path = os.path.normpath(match.group(0))
        if root and (path == root or path.startswith(root + os.sep)):
            return "<data root>" + path[len(root):]
        return os.path.relpath(path, os.path.abspath(out_dir))

    return re.sub(r"(?<![\w.<>])/[^\s;,:'\"<>()]+", fix, text)


def _fig_bytes(fig: Any, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120, bbox_inches="tight")
    return buf.getvalue()


def _save_figure(fig: Any, files: dict[str, bytes], stem: str) -> str:
    """Keep the PNG file's bytes in ``files`` (written with the report); return it as a data URI for inlining."""
    import matplotlib.pyplot as plt

    png = _fig_bytes(fig, "png")
    files[f"{stem}.png"] = png
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def report_files(cmp: Comparison, maps: Sequence[SimplexMap] = ()) -> list[str]:
    """The files ``write_report`` writes for this comparison (the manifest aside), in writing order."""
    files = ["comparison.csv", "comparison.json", "bump_chart.png"]
    files += ["simplex_map.png"] if maps else []
    files += ["criteria_heatmap.png"]
    files += ["rank_probabilities.png"] if cmp.rank_probabilities is not None else []
    return [*files, "report.html"]


def _previous_report_files(out: Path) -> set[str] | None:
    """The files the manifest in ``out`` says an earlier report wrote; None without a readable manifest."""
    return _read_manifest(out)[0]


def _read_manifest(out: Path) -> tuple[set[str] | None, str]:
    """(the files the manifest in ``out`` lists, "") or (None, why there are none: it is missing or unusable)."""
    try:
        doc = read_json(out / MANIFEST)
    except (FileNotFoundError, NotADirectoryError):
        return None, "is missing"
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or type(exc).__name__}"
    except JsonProblem as exc:
        return None, f"{exc}" if str(exc).startswith("holds") else f"is {exc}"
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        return None, "lists no files"
    return {f for f in files if f in REPORT_FILES}, ""


def stale_report_files(out: Path, planned: Sequence[str]) -> list[str]:
    """The earlier report's files in ``out`` that this report will not overwrite (to be removed).

    From the manifest; without one, report files there that this report would not overwrite are
    refused (a UserError naming them): nothing says they are a report's, so none is removed.
    """
    previous, why = _read_manifest(out)
    if previous is None:
        unknown = [f for f in REPORT_FILES if f not in planned and (out / f).is_file()]
        if unknown:
            raise UserError(f"--out {out}: holds {', '.join(unknown)} from an earlier report that lists no files "
                            f"({MANIFEST} {why}), and this report writes none of them: remove "
                            f"{'it' if len(unknown) == 1 else 'them'}, or choose another --out")
        return []
    return sorted(f for f in previous if f not in planned and (out / f).is_file())


def _change_class(mark: str) -> str:
    return "up" if mark.startswith("↑") else "down" if mark.startswith("↓") else "same"


def comparison_html(cmp: Comparison) -> str:
    cols = [c.name for c in cmp.scenario.columns]
    ref = cmp.scenario.reference
    head = "".join(
        f"<th{REF_ATTR if c == ref else ''}>{html.escape(c)}{' (reference)' if c == ref else ''}"
        f"<br><span class='muted'>{html.escape(cmp.scenario.column(c).label)}</span></th>"
        for c in cols
    )
    cells = {c: ordered_cells(cmp, c) for c in cols}
    few = few_score_flags(cmp.table)
    body = []
    for pos in range(len(cmp.models)):
        tds = [f"<td class='pos'>{pos + 1}</td>"]
        for c in cols:
            m, score, rank, mark = cells[c][pos]
            if math.isnan(rank):
                tds.append(f"<td>{html.escape(m)} <span class='muted'>(unranked)</span></td>")
                continue
            tied = sum(1 for _, _, r, _ in cells[c] if r == rank) > 1
            tie = f" <span class='muted'>(tied {int(rank)})</span>" if tied else ""
            flag = f" <span class='down'>({html.escape(few[m])} scores)</span>" if m in few else ""
            tds.append(
                f"<td{REF_ATTR if c == ref else ''}>{html.escape(m)}{flag} "
                f"<span class='score'>{html.escape(format_score(score))}</span> "
                f"<span class='{_change_class(mark)}'>{html.escape(mark)}</span>{tie}</td>"
            )
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><thead><tr><th>#</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _groups_html(cmp: Comparison) -> str:
    t = cmp.table
    rows = []
    for g in t.group_names or (None,):
        crits = [c for c in t.criteria if c.group == g]
        if not crits:
            continue
        weights = sorted({c.weight for c in crits})
        dirs = sorted({c.direction for c in crits})
        names = ", ".join(c.name for c in crits[:6]) + (f", … ({len(crits)} in all)" if len(crits) > 6 else "")
        rows.append(
            f"<tr><td>{html.escape(g or '(none)')}</td><td>{len(crits)}</td>"
            f"<td>{html.escape(', '.join(number(w) for w in weights))}</td><td>{html.escape(', '.join(dirs))}</td>"
            f"<td class='muted'>{html.escape(names)}</td></tr>"
        )
    return (
        "<table><thead><tr><th>group</th><th>criteria</th><th>own weights</th><th>direction</th>"
        f"<th>criteria</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _columns_html(cmp: Comparison) -> str:
    rows = []
    for c in cmp.scenario.columns:
        gw = ", ".join(f"{g} {number(w)}" for g, w in (c.group_weights or {}).items()) if c.uses_group_weights else "–"
        res = cmp.results[c.name]
        rows.append(
            f"<tr><td>{html.escape(c.name)}</td><td>{html.escape(c.rule)}</td>"
            f"<td>{html.escape(c.group + ' only' if c.group else c.setting)}</td><td>{html.escape(gw)}</td>"
            f"<td>{html.escape(', '.join(res.winners) or 'none')}</td></tr>"
        )
    return (
        "<table><thead><tr><th>column</th><th>rule</th><th>setting</th><th>group weights</th><th>winner(s)</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _probabilities_html(cmp: Comparison) -> str:
    assert cmp.rank_probabilities is not None
    n = len(cmp.models)
    parts = []
    for c in cmp.scenario.columns:
        probs = cmp.rank_probabilities[c.name]
        head = "".join(f"<th>{p + 1}</th>" for p in range(n))
        rows = []
        for m in cmp.results[c.name].ordering():
            i = cmp.models.index(m)
            cells = "".join(
                f"<td style='background:rgba(33,113,181,{probs[i, p]:.3f})'>{100 * probs[i, p]:.0f}%</td>"
                for p in range(n)
            )
            rows.append(f"<tr><td>{html.escape(m)}</td>{cells}</tr>")
        parts.append(
            f"<h3>{html.escape(c.name)} <span class='muted'>{html.escape(c.label)}</span></h3>"
            f"<table><thead><tr><th>model \\ rank</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts)


def raw_values_html(table: ScoreTable, models: Sequence[str]) -> str:
    """The raw scores: one row per criterion (by group, then name), with unit (and method), direction and own weight."""
    cols = [table.models.index(m) for m in models]
    head = "".join(f"<th>{html.escape(m)}</th>" for m in models)
    rows = []
    for j in criterion_order(table):
        c = table.criteria[j]
        arrow = {"higher": "↑\u00a0higher", "lower": "↓\u00a0lower"}.get(c.direction) or f"◎\u00a0{c.describe_direction()}"
        cells = "".join(f"<td class='num'>{html.escape(number(table.values[i, j]))}</td>" for i in cols)
        unit = " ".join(filter(None, (c.unit, f"({c.method})" if c.method else "")))  # "kWh (estimate)"; none: blank
        rows.append(
            f"<tr><td>{html.escape(c.group or '–')}</td><td>{html.escape(c.name)}</td>"
            f"<td>{html.escape(unit)}</td><td>{arrow}</td><td class='num'>{html.escape(number(c.weight))}</td>"
            f"{cells}</tr>"
        )
    return (
        "<div class='scroll'><table id='raw-values'><thead><tr><th>group</th><th>criterion</th><th>unit</th><th>better</th>"
        f"<th>own weight</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def live_html(cmp: Comparison) -> str:
    """The live-weights section (sliders + table + embedded data and script); empty without groups."""
    from ranking.scenarios.live import live_data, live_json, live_script

    sc = cmp.scenario
    weighted = [c for c in sc.columns if c.uses_group_weights and c.group_weights]
    initial = weighted[0].group_weights if weighted else None
    # the weighted setting's divisor of the scenario's plan (its preset's), as vnr rank divides
    divisor = sc.table_plan().conventions.weighted_divisor
    data = live_data(cmp.table, sc.ties, initial, divisor=divisor)
    if data is None:
        return ""
    size = "number of columns" if divisor == "columns" else "total own weight"
    return (
        "<h2>Live weights</h2><p class='muted'>Move a slider to change a group's weight; the models are "
        "re-ranked in this page under the <b>weighted</b> setting (each criterion's weight = its own weight × "
        f"the group weight / the group's {size}), with the scenario's tie convention "
        f"<code>{html.escape(sc.ties)}</code>. Borda, Dowdall, Plurality and the mean are linear in the weights; "
        "Copeland and Minimax are recomputed from the per-criterion pairwise comparisons embedded in the page. "
        "The rankings equal <code>vnr rank TABLE --setting weighted --group-weights …</code> for the same "
        "weights. Each cell: the model's rank under that rule, then its score in brackets. A link with <code>#weights=0.4,0.3,0.3</code> opens the page "
        "at those weights.</p>"
        "<div id='live'><noscript>(the live table needs JavaScript)</noscript></div>"
        f"<script type='application/json' id='live-data'>{live_json(data)}</script>"
        f"<script>{live_script()}</script>"
    )


def write_report(
    cmp: Comparison,
    out_dir: str | Path,
    maps: Sequence[SimplexMap] = (),
    *,
    source: str = "",
    notes: Sequence[str] = (),
    data_root: str | Path | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """Write the report and its figures into ``out_dir``; return the HTML path.

    Absolute paths in ``source``, the scenario path and the notes are shown relative
    (:func:`relative_paths`: ``<data root>/…`` under ``data_root``, else relative to ``out_dir``).
    """
    from ranking.scenarios import plots
    from ranking.scenarios.compare import group_weight_vector

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recover(out)  # a report a kill interrupted is finished first (its manifest says what is stale)
    sc = cmp.scenario
    planned = report_files(cmp, maps)
    stale = stale_report_files(out, planned)  # before writing anything: a refusal leaves the folder as it was

    def rel(text: str) -> str:
        return relative_paths(text, out, data_root)

    files = {"comparison.csv": format_csv(cmp).encode(), "comparison.json": (format_json(cmp) + "\n").encode()}

    sections = []
    sections.append(
        f"<h2>Comparison</h2><p class='muted'>Each cell: the model, its score under the column's rule, and its rank "
        f"change against the reference column <b>{html.escape(sc.reference)}</b> (↑n higher, ↓n lower, = same; "
        "(tied n): shares position n).</p>"
        + comparison_html(cmp)
        + _columns_html(cmp)
    )
    from ranking.scenarios.uncertainty import section_html

    sections.append(section_html(cmp))
    sections.append(live_html(cmp))
    bump = _save_figure(plots.bump_chart(cmp), files, "bump_chart")
    sections.append(f"<h2>Rank across the columns</h2><img alt='bump chart' src='{bump}'>")
    if maps:
        weights = []
        for smap in maps:
            col = sc.column(smap.column)
            weights.append(group_weight_vector(smap.groups, col.group_weights))
        img = _save_figure(plots.simplex_figure(maps, weights), files, "simplex_map")
        shares = []
        for smap in maps:
            share = smap.share()
            top = sorted(((v, k) for k, v in share.items() if v > 0), reverse=True)
            how = "linear in the weights (vectorised)" if smap.method == "linear" else "one rule call per point"
            shares.append(
                f"<li><b>{html.escape(smap.column)}</b> ({how}, {len(smap.points)} points): "
                + ", ".join(f"{html.escape(k)} {100 * v:.0f}%" for v, k in top)
                + "</li>"
            )
        sections.append(
            "<h2>Weight-simplex map</h2><p class='muted'>Which model wins at every group weighting "
            f"({html.escape(' / '.join(maps[0].groups))}); the corners weigh a single group.</p>"
            f"<img alt='weight simplex map' src='{img}'><ul>{''.join(shares)}</ul>"
        )
    order = cmp.reference.ordering()
    heat = _save_figure(plots.criteria_heatmap(cmp.table, order), files, "criteria_heatmap")
    sections.append(
        "<h2>Criteria</h2>" + _groups_html(cmp) + f"<img alt='criteria heatmap' src='{heat}'>"
        "<h3>Raw values</h3><p class='muted'>The scores ranked above, as read (before orienting), "
        "models in the reference column's order.</p>" + raw_values_html(cmp.table, order)
    )
    if cmp.rank_probabilities is not None:
        img = _save_figure(plots.rank_probability_figure(cmp), files, "rank_probabilities")
        heading = "Uncertainty over seeds" if cmp.bootstrap_source == "seeds" else "Uncertainty from the standard errors"
        sections.append(
            f"<h2>{heading}</h2><p class='muted'>Probability of each rank position over "
            f"{html.escape(cmp.resamples())}; models tied in a replicate split the tied positions evenly, so every "
            f"row and column sums to 100 %.</p><img alt='rank probabilities' src='{img}'>"
            + _probabilities_html(cmp)
        )
    all_notes = [*cmp.notes, *notes]
    if all_notes:
        sections.append(
            "<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(rel(n))}</li>" for n in all_notes) + "</ul>"
        )

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = (
        f"<p class='muted'>{cmp.table.n_models} models × {cmp.table.n_criteria} criteria"
        f"{' from ' + html.escape(rel(source)) if source else ''}; ties: <code>{html.escape(sc.ties)}</code>; "
        f"scenario file: <code>{html.escape(rel(str(sc.path or sc.name)))}</code>; generated {stamp}.</p>"
    )
    winners = ", ".join(cmp.reference.winners)
    page = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(sc.name)} — scenario report</title><style>{CSS}</style></head><body>"
        f"<h1>Scenario: {html.escape(sc.name)}</h1>"
        + (f"<p>{html.escape(sc.description)}</p>" if sc.description else "")
        + meta
        + f"<p>Reference column <b>{html.escape(sc.reference)}</b> is won by <b>{html.escape(winners)}</b>.</p>"
        + "".join(sections)
        + "</body></html>\n"
    )
    path = out / "report.html"
    files["report.html"] = page.encode("utf-8")
    files[MANIFEST] = (json.dumps({"written_by": "vnr report", "files": planned}, indent=1) + "\n").encode()

    def fill(staging: Path) -> None:
        for name, data in files.items():
            (staging / name).write_bytes(data)

    # one unit with its manifest, all or nothing even under kill -9: the earlier report's files this one has
    # none of go with it, no other file of the folder is touched
    write_together(out, fill, [*planned, *stale, MANIFEST], written_by="vnr report")
    if stale and say is not None:
        say(f"vnr report: removed the earlier report's {', '.join(stale)} (this report has none)")
    return path
