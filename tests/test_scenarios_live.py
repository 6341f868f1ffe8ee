"""The report's live weights: the page's own rankings equal `ranking`'s for the same group weights.

The browser test opens the report in headless Chromium with a URL hash carrying many weight
vectors; the page's script sets its sliders to each vector in turn (firing their ``input``
events, as a user dragging them does), reads back the ranks from the table it rendered, and
writes them into ``<pre id="live-output">``, which ``--dump-dom`` returns. Each is compared
with what `vnr rank` gives: the scenario's :class:`ranking.plan.RankPlan` (setting ``weighted``, its ties and preset).
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hang_bound import HANG_S
from test_scenarios_util import PAPER, USER, scenario_file, write_results

from harness.cli import main
from ranking.plan import RankPlan
from ranking.scenarios.cli import build_comparison
from ranking.scenarios.live import LIVE_RULES, live_data
from ranking.settings import apply_setting

N_VECTORS = 25


def _comparison(scenario: Path, results: Path | None, data_root: Path | None):
    args = argparse.Namespace(scenario=str(scenario), results=None if results is None else str(results), table=None,
                              data_root=None if data_root is None else str(data_root), bootstrap=0, seed=0,
                              format="table")
    cmp, *_ = build_comparison(args)
    return cmp


def _tied_results(folder: Path) -> Path:
    """Ties on every criterion, a missing score and a model with no fairness score at all."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "matrix.csv").write_text(
        "model,p1,p2,e1,e2,f1\n"
        "A,90,80,2,5,0.5\n"
        "B,90,85,2,4,0.5\n"
        "C,85,85,1,,0.7\n"
        "D,80,80,3,5,\n"
        "E,85,70,1,4,0.5\n"
    )
    (folder / "criteria.yaml").write_text(
        "model_column: model\ngroups: [performance, efficiency, fairness]\ncriteria:\n"
        "  p1: {group: performance}\n  p2: {group: performance}\n"
        "  e1: {group: efficiency, direction: lower, unit: kWh}\n  e2: {group: efficiency, direction: lower}\n"
        "  f1: {group: fairness}\n"
    )
    return folder


TIED_SCENARIO = """
name: tied
ties: {ties}
groups:
  performance: {{criteria: ["p*"]}}
  efficiency: {{criteria: ["e*"], direction: lower}}
  fairness: {{criteria: ["f*"]}}
reference: borda_weighted
columns:
  - name: borda_weighted
    rule: borda
    setting: weighted
    group_weights: {{performance: 0.5, efficiency: 0.3, fairness: 0.2}}
"""


def _weight_vectors(n_groups: int, seed: int) -> list[list[str]]:
    """Random group weights as decimal strings; some exact zeros, some exact repeats (ties in the sums)."""
    rng = np.random.default_rng(seed)
    out = [["1"] * n_groups, ["1"] + ["0"] * (n_groups - 1)]
    while len(out) < N_VECTORS:
        w = rng.random(n_groups)
        w[rng.random(n_groups) < 0.15] = 0.0
        if len(out) % 5 == 0:
            w[:] = w[0]
        if not (w > 0).any():
            continue
        out.append([f"{x:.3f}" for x in w])
    return out


def test_live_data_is_what_the_rules_use(tmp_path):
    """Without a browser: the embedded points reproduce the weighted positional scores exactly."""
    cmp = _comparison(scenario_file(tmp_path, TIED_SCENARIO.format(ties="default")),
                      _tied_results(tmp_path / "r"), None)
    data = live_data(cmp.table, "default", {"performance": 0.5})
    assert data["groups"] == ["performance", "efficiency", "fairness"] and data["initial"] == [0.5, 1.0, 1.0]
    assert data["rules"] == list(LIVE_RULES)
    gw = {"performance": 0.2, "efficiency": 0.5, "fairness": 0.3}
    w = [own * gw[data["groups"][g]] / data["totals"][g] for own, g in zip(data["own"], data["group_of"])]
    for rule in ("borda", "dowdall", "plurality"):
        pts = np.array([[np.nan if v is None else v for v in row] for row in data["points"][rule]])
        expected = apply_setting(cmp.table, rule, setting="weighted", group_weights=gw).scores
        np.testing.assert_allclose(np.nansum(pts * w, axis=1), expected, rtol=1e-12)
    # plurality's tied first places share the point (ties "default"): p1 has A and B tied first
    assert data["points"]["plurality"][0][0] == 0.5 and data["points"]["plurality"][1][0] == 0.5
    # D has no score on f1: no point there, and no pairwise vote
    assert data["present"][3][4] == 0 and data["points"]["borda"][3][4] is None
    assert data["better"][4][3 * 5:4 * 5] == "00000"


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _page_rankings(browser: str, page: Path, vectors: list[list[str]], profile: Path) -> list[dict]:
    url = page.resolve().as_uri() + "#weights=" + ";".join(",".join(v) for v in vectors)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--dump-dom", url]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish within 120 s")
    found = re.search(r'<pre id="live-output"[^>]*>(.*?)</pre>', proc.stdout, flags=re.S)
    assert found, f"no live output in the page: {proc.stderr[-1500:]}"
    return json.loads(html.unescape(found.group(1)))


def _python_ranks(table, groups, weights, ties, preset=None) -> dict[str, dict[str, float | None]]:
    """What vnr rank gives: the scenario's plan (its ties and preset: votenrank divides by a group's columns)."""
    gw = dict(zip(groups, weights))
    out = {}
    for rule in LIVE_RULES:
        res = RankPlan.build(rule, setting="weighted", ties=ties, preset=preset).run_rule(table, rule, group_weights=gw)
        out[rule] = {m: (None if math.isnan(r) else float(r)) for m, r in zip(res.models, res.ranks)}
    return out


CASES = {
    "paper_case_study": lambda tmp, root: (PAPER, None),
    "user_weighted": lambda tmp, root: (USER, write_results(tmp / "results")),
    "tied_default": lambda tmp, root: (scenario_file(tmp, TIED_SCENARIO.format(ties="default")),
                                       _tied_results(tmp / "results")),
    "tied_votenrank": lambda tmp, root: (scenario_file(tmp, TIED_SCENARIO.format(ties="votenrank")),
                                         _tied_results(tmp / "results")),
}


@pytest.mark.browser
@pytest.mark.parametrize("case", list(CASES))
def test_page_ranking_equals_python_ranking_for_random_weights(case, tmp_path, capsys, request):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not on PATH (Debian: apt-get install chromium)")
    root = request.getfixturevalue("data_root") if case == "paper_case_study" else None
    scenario, results = CASES[case](tmp_path, root)
    out = tmp_path / "report"
    argv = ["report", "--scenario", str(scenario), "--out", str(out), "--resolution", "6"]
    argv += ["--results", str(results)] if results else ["--data-root", str(root)]
    assert main(argv) == 0, capsys.readouterr().err
    cmp = _comparison(scenario, results, root)
    groups = list(cmp.table.group_names)
    vectors = _weight_vectors(len(groups), seed=len(case))
    runs = _page_rankings(browser, out / "report.html", vectors, tmp_path / "profile")
    assert len(runs) == len(vectors) >= 20
    differ = 0
    for vec, run in zip(vectors, runs):
        assert run["weights"] == [float(x) for x in vec]  # the sliders took the weights exactly
        expected = _python_ranks(cmp.table, groups, run["weights"], cmp.scenario.ties, cmp.scenario.preset)
        assert run["ranks"] == expected, f"weights {vec}"
        differ += expected != _python_ranks(cmp.table, groups, [1.0] * len(groups), cmp.scenario.ties,
                                            cmp.scenario.preset)
    assert differ >= 3  # the weights did change the rankings: the comparison is not vacuous
