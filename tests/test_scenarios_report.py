"""`vnr report`: a self-contained HTML page plus figure files; rendered in headless Chromium when available."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hang_bound import HANG_S
from test_scenarios_util import PAPER, USER, write_results

from harness.cli import main

FIGURES = ("bump_chart", "criteria_heatmap", "simplex_map")


def _check_self_contained(html: str) -> None:
    # the only scripts are inline: the live-weights data and code, no src= (no CDN, works from file://)
    scripts = re.findall(r"<script[^>]*>", html, flags=re.I)
    assert scripts == ["<script type='application/json' id='live-data'>", "<script>"]
    for attr in re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)['"]""", html, flags=re.I):
        assert attr.startswith("data:image/png;base64,"), attr[:60]
    assert "http://" not in html and "https://" not in html


def test_report_on_a_collected_matrix_with_bootstrap(tmp_path, capsys):
    results = write_results(tmp_path / "r", spread=10.0)
    out = tmp_path / "report"
    code = main(["report", "--scenario", str(USER), "--results", str(results), "--out", str(out),
                 "--bootstrap", "10", "--resolution", "8"])
    assert code == 0, capsys.readouterr().err
    for stem in (*FIGURES, "rank_probabilities"):
        assert (out / f"{stem}.png").stat().st_size > 1000
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "report.html").read_text()
    _check_self_contained(html)
    assert html.count("data:image/png;base64,") == 4
    for text in ("Comparison", "Weight-simplex map", "Uncertainty over seeds", "copeland_weighted", "am_performance"):
        assert text in html
    assert (out / "comparison.csv").read_text().startswith("column,rule,setting")
    assert "one rule call per point" in html and "linear in the weights" in html
    assert "Live weights" in html and "Raw values" in html
    # the raw values: every criterion with its unit and direction, by group then name
    raw = html[html.index("<table id='raw-values'>"):]
    raw = raw[:raw.index("</table>")]
    rows = re.findall(r"<tr><td>(\w+)</td><td>(\w+)</td><td>([^<]*)</td><td>([^<]*)</td>", raw)
    assert rows[:3] == [("performance", "t1_acc", "%", "↑\u00a0higher"), ("performance", "t2_acc", "%", "↑\u00a0higher"),
                        ("performance", "t2_f1", "%", "↑\u00a0higher")]
    assert ("efficiency", "energy_kwh", "", "↓\u00a0lower") in rows and len(rows) == 7  # no unit: blank
    # the live table labels its cells (rank, then the score in brackets), not bare "1 11"
    assert '": rank (score)"' in html and '" (" + fmt(res[r].scores[i]) + ")"' in html
    assert str(tmp_path) not in html  # relative paths only


def test_report_paths_are_relative(data_root, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", "--scenario", str(PAPER), "--data-root", str(data_root), "--out", str(out),
                 "--resolution", "6"]) == 0, capsys.readouterr().err
    html = (out / "report.html").read_text()
    assert str(Path(data_root).resolve()) not in html and str(data_root) not in html
    # the case study's criteria carry units (the files do not state them; the importer knows them)
    raw = html[html.index("<table id='raw-values'>"):]
    units = dict(re.findall(r"<tr><td>\w+</td><td>([\w.-]+)</td><td>([^<]*)</td>", raw[:raw.index("</table>")]))
    assert units["rte.eval_accuracy"] == "%" and units["cola.eval_matthews_correlation"] == "×100"
    assert units["rte_total_power"] == "kWh" and units["rte_kg_carbon"] == "kg CO2eq"
    assert units["rte_gpu_hours"] == "GPU-h" and units["anti_crows_score"] == "0–1"
    assert "" not in units.values()
    assert "&lt;data root&gt;/leaderboards/votenrank/case_study_4" in html
    assert not re.search(r"(?<![\w.<>/])/(?:home|work|tmp|root|Users)/", html)
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporary file behind


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
def test_report_renders_in_headless_chromium(data_root, tmp_path, capsys):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not on PATH (Debian: apt-get install chromium); cannot render the report")
    out = tmp_path / "report"
    assert main(["report", "--scenario", str(PAPER), "--data-root", str(data_root), "--out", str(out),
                 "--resolution", "12"]) == 0, capsys.readouterr().err
    html = (out / "report.html").read_text()
    _check_self_contained(html)
    shot = tmp_path / "shot.png"
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1400,2000",
        (out / "report.html").resolve().as_uri(),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish rendering the report within 120 s")
    assert shot.exists() and shot.stat().st_size > 10_000, proc.stderr[-2000:]
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    rgb = img[..., :3]
    non_white = (rgb < 0.95).any(axis=-1).mean()
    assert non_white > 0.05  # text, tables and figures, not a blank page
    assert rgb.std() > 0.05


def test_figures_heatmap_order_integer_ticks_and_bump_labels_apart(tmp_path):
    import matplotlib.pyplot as plt
    import numpy as np

    from ranking.scenarios import plots
    from ranking.scenarios.cli import build_comparison

    results = write_results(tmp_path / "r")
    args = argparse.Namespace(scenario=str(USER), results=str(results), table=None, data_root=None, bootstrap=0,
                              seed=0, format="table")
    cmp, *_ = build_comparison(args)
    fig = plots.criteria_heatmap(cmp.table, cmp.reference.ordering())
    ax, cbar = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "t1_acc", "t2_acc", "t2_f1", "energy_kwh", "gpu_hours", "crows", "stereoset"]  # by group, then name
    ticks = [t for t in cbar.get_xticks() if 1 <= t <= 5]
    assert ticks and all(float(t).is_integer() for t in ticks)  # ranks: integer colour-bar ticks
    plt.close(fig)

    fig = plots.bump_chart(cmp)
    ax = fig.axes[0]
    labels = {t.get_text(): t.xyann[1] for t in ax.texts}
    assert set(labels) == set(cmp.models)
    heights = np.sort(np.array(list(labels.values())))
    assert np.diff(heights).min() >= 0.42 - 1e-9  # names of tied models do not overprint
    assert all(float(t).is_integer() for t in ax.get_yticks())
    plt.close(fig)


def _overlapping_texts(fig) -> list[tuple[str, str]]:
    """Pairs of visible texts of ``fig`` whose drawn boxes overlap by more than a pixel each way."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip()]
    bad = []
    for i, (ta, a) in enumerate(boxes):
        for tb, b in boxes[i + 1:]:
            if min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1:
                bad.append((ta, tb))
    return bad


def _figures(cmp, maps=()):
    from ranking.scenarios import plots

    yield "bump", plots.bump_chart(cmp)
    yield "heatmap", plots.criteria_heatmap(cmp.table, cmp.reference.ordering())
    if cmp.rank_probabilities is not None:
        yield "rank probabilities", plots.rank_probability_figure(cmp)
    if maps:
        yield "simplex", plots.simplex_figure(maps)


@pytest.mark.parametrize("which", ["user_weighted", "paper_case_study"])
def test_no_text_overlaps_in_the_figures(which, tmp_path, request):
    import matplotlib.pyplot as plt

    from ranking.scenarios.cli import build_comparison
    from ranking.scenarios.simplex import simplex_map

    if which == "user_weighted":
        args = argparse.Namespace(scenario=str(USER), results=str(write_results(tmp_path / "r")), table=None,
                                  data_root=None, bootstrap=20, seed=0, format="table")
    else:
        args = argparse.Namespace(scenario=str(PAPER), results=None, table=None, bootstrap=0, seed=0,
                                  data_root=str(request.getfixturevalue("data_root")), format="table")
    cmp, scenario, *_ = build_comparison(args)
    maps = [simplex_map(cmp.table, scenario.column(c), scenario.ties, 6) for c in scenario.default_simplex_columns()]
    for name, fig in _figures(cmp, maps):
        assert _overlapping_texts(fig) == [], name
        plt.close(fig)


def test_raw_values_show_how_a_criterion_was_obtained():
    import pandas as pd

    from ranking.scenarios.report import raw_values_html
    from ranking.table import Criterion, ScoreTable

    table = ScoreTable.from_frame(pd.DataFrame({"acc": [0.9, 0.8], "kwh": [3.0, 1.0]}, index=["A", "B"]),
                                  criteria=[Criterion("kwh", direction="lower", unit="kWh", method="estimate")])
    html = raw_values_html(table, table.models)
    assert "<td>kwh</td><td>kWh (estimate)</td>" in html and "<td>acc</td><td></td>" in html  # no unit: blank


def test_report_owns_its_folder_stale_figures_go_other_files_stay(tmp_path, capsys):
    """A report into a folder holding an earlier one removes the earlier figures it has none of (by the
    manifest), never another file; report files that no manifest lists are refused, untouched."""
    import json

    results = write_results(tmp_path / "r", spread=10.0)
    out = tmp_path / "report"
    base = ["report", "--scenario", str(USER), "--results", str(results), "--out", str(out), "--resolution", "6"]
    assert main([*base, "--bootstrap", "10"]) == 0, capsys.readouterr().err
    assert (out / "rank_probabilities.png").is_file()
    manifest = json.loads((out / ".vnr-report.json").read_text())
    assert "rank_probabilities.png" in manifest["files"] and "report.html" in manifest["files"]
    (out / "notes.txt").write_text("mine")
    (out / "mine.png").write_bytes(b"png")
    # an edited manifest that names a user's file does not make the report remove it
    (out / ".vnr-report.json").write_text(json.dumps({"files": [*manifest["files"], "notes.txt", "../r/matrix.csv"]}))
    assert main(base) == 0
    assert "vnr report: removed the earlier report's rank_probabilities.png (this report has none)" in \
        capsys.readouterr().err
    assert not (out / "rank_probabilities.png").exists()  # the new report has no bootstrap: its figure is gone
    assert "Uncertainty over seeds" not in (out / "report.html").read_text()
    assert (out / "notes.txt").read_text() == "mine" and (out / "mine.png").read_bytes() == b"png"
    assert (results / "matrix.csv").is_file()
    files = json.loads((out / ".vnr-report.json").read_text())["files"]
    assert sorted(files) == sorted(p.name for p in out.iterdir() if p.name not in (".vnr-report.json", "notes.txt",
                                                                                     "mine.png"))
    # a report from before the manifest: its extra figure is named and refused; nothing is touched
    (out / ".vnr-report.json").unlink()
    (out / "rank_probabilities.png").write_bytes(b"old")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "rank_probabilities.png" in err and "remove it, or choose another --out" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # with the bootstrap the same folder is fine: every report file there is overwritten
    assert main([*base, "--bootstrap", "10"]) == 0, capsys.readouterr().err
    assert (out / "rank_probabilities.png").read_bytes()[:4] == b"\x89PNG"
