"""Scenario mode and the report with ``--intervals --robustness``: the bars and bands carry the computed intervals,
the live weights say they are stale, and headless Chromium (when present) shows the same."""

from __future__ import annotations

import csv
import html as htmllib
import io
import json
import re
import shutil
import subprocess

import pytest
from hang_bound import HANG_S
from test_scenarios_util import USER, write_results

from harness.cli import main


def _bars(page: str) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(column, model) → (lo, hi, tier) read from the report's SVG bars."""
    out = {}
    for svg in re.finditer(r"<svg class='rank-intervals' data-column='([^']*)'(.*?)</svg>", page, flags=re.S):
        for bar in re.finditer(r"<rect class='interval' data-model='([^']*)' data-lo='(\d+)' data-hi='(\d+)' "
                               r"data-tier='(\d+)'", svg.group(2)):
            out[(htmllib.unescape(svg.group(1)), htmllib.unescape(bar.group(1)))] = tuple(map(int, bar.group(2, 3, 4)))
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("intervals_report")
    results = write_results(tmp / "r", spread=4.0)
    out = tmp / "report"
    assert main(["report", "--scenario", str(USER), "--results", str(results), "--out", str(out),
                 "--intervals", "--draws", "60", "--robustness", "--max-cells", "1", "--resolution", "4"]) == 0
    return results, out


def test_report_draws_the_intervals_it_computed(report):
    _, out = report
    page = (out / "report.html").read_text()
    doc = json.loads((out / "comparison.json").read_text())
    bars = _bars(page)
    columns = [c for c in doc if c != "intervals_note"]
    assert len(bars) == 5 * len(columns)
    for c in columns:
        for m in "ABCDE":
            assert bars[(c, m)] == (doc[c]["rank_lo"][m], doc[c]["rank_hi"][m], doc[c]["tier"][m]), (c, m)
    assert page.count("class='tier-band'") >= len(columns)
    assert "How sure the ranks are" in page and "seed-bootstrap resamples" in page
    assert "<span id='intervals-stale'" in page and "flip-sentences" in page
    assert "the pick changes if" in page


def test_scenario_rank_csv_and_text(report, capsys):
    results, _ = report
    argv = ["rank", "--scenario", str(USER), "--results", str(results), "--intervals", "--draws", "100"]
    assert main([*argv, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {"rank_lo", "rank_hi", "tier"} <= set(rows[0])
    for r in rows:
        assert int(r["rank_lo"]) <= int(r["rank"]) <= int(r["rank_hi"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "rank [interval] tier" in out and "100 seed-bootstrap resamples" in out


@pytest.mark.browser
def test_chromium_shows_the_bars_and_marks_them_stale_at_other_weights(report, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not on PATH (Debian: apt-get install chromium)")
    _, out = report
    expected = _bars((out / "report.html").read_text())

    def dom(fragment: str) -> str:
        url = (out / "report.html").resolve().as_uri() + fragment
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", url]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S).stdout

    def stale(page: str) -> str:
        found = re.search(r'<span id="intervals-stale"[^>]*>(.*?)</span>', page, flags=re.S)
        assert found, "no stale marker in the rendered page"
        return found.group(1)

    rendered = dom("")
    shown = _bars(rendered.replace('"', "'"))
    assert shown == expected  # the browser shows the bars the report computed
    assert stale(rendered) == ""  # at the scenario's weights the intervals hold
    assert stale(dom("#weights=0.8,0.1,0.1")).startswith("Stale at the live weights")


def test_scenario_refusals_are_one_line(report, tmp_path, capsys):
    results, _ = report
    code = main(["rank", "--scenario", str(USER), "--results", str(results), "--intervals", "--draws", "5"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--draws: 5 is below 20" in err
    bare = write_results(tmp_path / "bare", seeds=False)
    code = main(["report", "--scenario", str(USER), "--results", str(bare), "--out", str(tmp_path / "o"),
                 "--intervals"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "carries no uncertainty" in err
