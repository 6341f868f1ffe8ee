"""One rounding per value in the report: every number the page shows goes through one formatter
(`ranking.textable.number`); the live table's JavaScript `fmt` is an exact port of it."""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hang_bound import HANG_S

from harness.cli import main
from ranking.textable import number

JS = Path(__file__).resolve().parents[1] / "ranking" / "scenarios" / "live_weights.js"


def _values() -> list[float]:
    rng = random.Random(0)
    vals = [0.0, -0.0, 3.0, -2.0, 82.7153, 0.123456, 1234.56, 0.0001234, 1.5e-6, 10.0625, -10.0625, 1.03125,
            1.245e21, 1.235e21, 9.99996e-5, 9.99995, 99999.95, 999999.5, 1e6 + 0.5, 2.5e15, 1e15, 123456.75,
            0.00012345, 1e-300, 5e-324, 1.7e308, 1 / 3, 2 / 3, 0.00099995, 1e-4, 1e6, 4503599627370495.5,
            2.0**60 + 2048, 12.345]
    vals += [rng.choice([1, -1]) * 10 ** rng.uniform(-12, 22) for _ in range(800)]
    vals += [rng.choice([1, -1]) * rng.randint(1, 10**7) / 2 ** rng.randint(0, 12) for _ in range(800)]  # exact ties
    return [v for v in vals if math.isfinite(v)]


def _run_js(block: str, values: list[float], tmp_path: Path) -> list[str]:
    call = f"JSON.stringify({json.dumps([repr(v) for v in values])}.map(Number).map(fmt))"
    node = shutil.which("node") or shutil.which("nodejs")
    if node:
        done = subprocess.run([node, "-e", f"{block}\nconsole.log({call});"], capture_output=True, text=True,
                              timeout=HANG_S, check=True)
        return json.loads(done.stdout)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("neither node nor chromium is on PATH")
    page = tmp_path / "fmt.html"
    page.write_text(f"<!DOCTYPE html><html><body><pre id='out'></pre><script>{block}\n"
                    f"document.getElementById('out').textContent = {call};</script></body></html>")
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=HANG_S)
    found = re.search(r"<pre id=\"out\">(.*?)</pre>", done.stdout, flags=re.S)
    assert found, done.stderr[-1500:]
    import html

    return json.loads(html.unescape(found.group(1)))


def test_the_live_tables_fmt_is_python_number(tmp_path):
    """Integers, 4 significant digits, the exponent form and Python's half-to-even rounding of exact ties
    (10.0625 → 10.06, where JavaScript's toFixed gives 10.07): the same text for every value."""
    text = JS.read_text()
    block = text[text.index("/* number-format: begin"):text.index("/* number-format: end */")]
    values = _values()
    shown = _run_js(block, values, tmp_path)
    wrong = [(v, js, number(v)) for v, js in zip(values, shown) if js != number(v)]
    assert not wrong, wrong[:10]
    assert number(10.0625) == "10.06" and number(0.0001234) == "0.0001234"  # the old fmt: 10.07 and 0.000123


def test_a_weight_reads_the_same_everywhere_in_the_report(tmp_path, capsys):
    """An own weight and a group weight each appear in several tables and labels of one report: one text each."""
    res = tmp_path / "r"
    res.mkdir()
    (res / "matrix.csv").write_text("model,a,b,c,e\nA,0.91,0.5,70,3.2\nB,0.88,0.7,60,1.1\nC,0.85,0.6,65,2.0\n")
    (res / "criteria.yaml").write_text(
        "table: matrix.csv\ngroups: [performance, efficiency, fairness]\ncriteria:\n"
        "  a: {direction: higher, weight: 0.333333333, group: performance}\n"
        "  b: {direction: higher, weight: 1, group: performance}\n"
        "  c: {direction: higher, weight: 1, group: fairness}\n"
        "  e: {direction: lower, weight: 1, group: efficiency}\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\nties: default\ngroups: {performance: {}, efficiency: {}, fairness: {}}\nreference: bw\n"
        "columns:\n  - {name: bw, rule: borda, setting: weighted,"
        " group_weights: {performance: 0.123456789, efficiency: 0.5, fairness: 0.376543211}}\n"
        "  - {name: am, rule: arithmetic_mean, group: performance}\n")
    out = tmp_path / "report"
    assert main(["report", "--scenario", str(scenario), "--results", str(res), "--out", str(out),
                 "--resolution", "4"]) == 0, capsys.readouterr().err
    page = (out / "report.html").read_text()
    shown = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)  # what the page shows, not its data
    shown = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", shown)
    for value in (0.333333333, 0.123456789, 0.376543211):
        assert number(value) in shown, value
        assert f"{value:g}" not in shown, f"{value:g} beside {number(value)}"
    assert "borda (weighted 0.1235/0.5/0.3765)" in shown
