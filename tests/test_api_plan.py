"""One ``rank`` and one plan: every ranking the project prints equals :func:`ranking.rank` with the same choices.

A scenario column, the weight simplex and what-if at the scenario's weights, a bootstrap that draws nothing new
and the analyses' ranker all rank through a :class:`ranking.plan.RankPlan`; the property test below checks on
random tables (benchmarks with detail and aggregate columns, lower-is-better and closest-to-a-target columns,
missing scores) and random choices (rule, setting, group weights, preset, ties, gamma, vote mode) that they give
exactly the ranks and scores of ``ranking.rank``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ranking
import ranking.api
from ranking.analysis._common import make_ranker
from ranking.api import apply_plan
from ranking.floor.errors import UserError
from ranking.plan import RankPlan
from ranking.rules import rule_names, worked_example
from ranking.scenarios.bootstrap import error_bootstrap, tie_split
from ranking.scenarios.compare import compare, run_column
from ranking.scenarios.scenario import Scenario
from ranking.scenarios.simplex import rank_at, simplex_map
from ranking.scenarios.whatif import what_if
from ranking.table import Criterion, ScoreTable

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------- one rank
def test_ranking_rank_is_the_one_rank():
    assert ranking.rank is ranking.api.rank
    from ranking import rank

    assert rank is ranking.api.rank
    assert "drop_incomplete" in inspect.signature(ranking.rank).parameters
    defined = [str(p.relative_to(ROOT)) for p in (ROOT / "ranking").rglob("*.py")
               if "\ndef rank(" in p.read_text(encoding="utf-8")]
    assert defined == ["ranking/api.py"]


def test_rank_and_the_plan_show_the_declared_choices_with_their_defaults():
    """ranking.rank and RankPlan.build take ``**choices``; the keywords help() and editors show are generated
    from the one declaration (RankPlan's fields), so neither can drift from it."""
    from ranking.plan import CHOICES, RankPlan

    choices = list(inspect.signature(ranking.rank).parameters.values())[1:]  # without the table
    plan = list(inspect.signature(RankPlan.build).parameters.values())
    assert [(p.name, p.kind, p.default) for p in choices] == [(p.name, p.kind, p.default) for p in plan]
    declared = [(f.name, f.default) for f in dataclasses.fields(RankPlan) if f.name in CHOICES]
    assert [(p.name, p.default) for p in choices[1:-1]] == declared
    assert choices[0].name == "rule" and choices[-1].kind is inspect.Parameter.VAR_KEYWORD


def test_drop_incomplete_through_ranking_rank():
    t = ScoreTable(("A", "B", "C"), (Criterion("x"), Criterion("y")),
                   np.array([[0.9, np.nan], [0.5, 0.6], [0.4, 0.3]]))
    dropped = ranking.rank(t, "borda", drop_incomplete=True)
    assert dropped.models == ("B", "C") and dropped.settings["dropped_incomplete"] == ["A"]
    kept = ranking.rank(t, "borda", drop_incomplete=False)
    assert kept.models == ("A", "B", "C") and "dropped_incomplete" not in kept.settings
    assert ranking.rank(t, "borda", preset="votenrank").settings["dropped_incomplete"] == ["A"]


def test_rank_is_its_plan_applied():
    plan = RankPlan.build(["borda", "optimality_gap"], preset="votenrank", og_gamma=0.9)
    assert plan.ties == "votenrank" and plan.drop_incomplete and plan.vote == "benchmark"
    assert plan.rule_params("optimality_gap") == {"gamma": 0.9, } and plan.rule_params("borda") == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.setting = "weighted"  # type: ignore[misc]
    direct = ranking.rank(worked_example(), ["borda", "optimality_gap"], preset="votenrank", og_gamma=0.9)
    applied = apply_plan(plan, worked_example())
    assert direct.to_dict() == applied.to_dict()


@pytest.mark.parametrize(("choices", "message"), [
    ({"rule": "bordaa"}, "unknown rule 'bordaa'"),
    ({"setting": "weighted-ish"}, "setting: 'weighted-ish' is not one of basic, weighted, two-step"),
    ({"group_weights": {"g": 1.0}}, "group weights only apply"),
    ({"preset": "paper"}, "preset: 'paper' is not one of default, votenrank"),
    ({"og_gamma": 0}, "og_gamma: 0 must be above 0"),
    ({"gamma": -1}, "gamma: write og_gamma=-1"),
    ({"vote": "task"}, "vote: 'task' is not one of"),
    ({"draws": 10**9}, "draws: 1000000000 is above 100000"),
    ({"seed": -1}, "seed: -1 is below 0"),
    ({"max_cells": 2.5}, "max_cells: 2.5 is not a whole number"),
])
def test_a_plan_refuses_bad_choices_before_any_table(choices, message):
    with pytest.raises(UserError, match=message):
        RankPlan.build(**choices)


# ---------------------------------------------------------------------- random tables and choices
VALUES = [0.1, 0.2, 0.3, 0.5, 0.5, 0.7, 0.8, 0.9]  # a few values: ties happen


@st.composite
def tables(draw):
    n_models = draw(st.integers(3, 6))
    n_groups = draw(st.integers(2, 3))
    crits: list[Criterion] = []
    for g in range(n_groups):
        for b in range(draw(st.integers(1, 2))):
            bench = f"g{g}b{b}"
            kind = draw(st.sampled_from(["plain", "metrics", "subtasks"]))
            if kind == "plain":  # a benchmark of one column
                names = [(f"{bench}", {})]
            elif kind == "metrics":  # two metrics of one benchmark, one of them a detail
                names = [(f"{bench}/acc", {}), (f"{bench}/acc_norm", {"detail": draw(st.booleans())})]
            else:  # an aggregate and its subtasks
                names = [(f"{bench}/all", {"aggregate": True})] + [
                    (f"{bench}/s{k}", {"detail": True}) for k in range(draw(st.integers(1, 3)))]
            for name, flags in names:
                direction = draw(st.sampled_from(["higher", "higher", "lower", "target"]))
                crits.append(Criterion(name, direction=direction, target=0.5 if direction == "target" else None,
                                       group=f"g{g}", benchmark=bench if kind != "plain" else None, **flags))
    values = np.array(draw(st.lists(st.lists(st.sampled_from(VALUES), min_size=len(crits), max_size=len(crits)),
                                    min_size=n_models, max_size=n_models)))
    holes = draw(st.lists(st.tuples(st.integers(0, n_models - 1), st.integers(0, len(crits) - 1)), max_size=2))
    for i, j in holes:
        if np.isnan(values[:, j]).sum() < n_models - 1 and np.isnan(values[i]).sum() < len(crits) - 1:
            values[i, j] = np.nan
    se = np.zeros_like(values)
    return ScoreTable(tuple(f"m{i}" for i in range(n_models)), tuple(crits), values, source="random",
                      standard_errors=se)


QUARTERS = {2: [(0.25, 0.75), (0.5, 0.5), (0.75, 0.25)],
            3: [(0.25, 0.25, 0.5), (0.25, 0.5, 0.25), (0.5, 0.25, 0.25)]}  # sums exactly 1: the simplex's own points


@st.composite
def choices(draw, n_groups: int):
    setting = draw(st.sampled_from(["weighted", "two-step", "basic"]))
    weights = draw(st.sampled_from(QUARTERS[n_groups])) if setting != "basic" else None
    return {
        "rule": draw(st.sampled_from(rule_names())),
        "setting": setting,
        "group_weights": None if weights is None else {f"g{g}": w for g, w in enumerate(weights)},
        "preset": draw(st.sampled_from([None, "votenrank"])),
        "ties": draw(st.sampled_from([None, "default", "votenrank"])),
        "og_gamma": draw(st.sampled_from([None, 0.9])),
        "vote": draw(st.sampled_from(["benchmark", "column"])),
    }


def scenario_of(table: ScoreTable, c: dict) -> Scenario:
    column = {"name": "col", "rule": c["rule"], "setting": c["setting"]}
    if c["group_weights"] is not None:
        column["group_weights"] = c["group_weights"]
    doc = {"groups": {g: {} for g in table.group_names}, "columns": [column], "vote": c["vote"]}
    doc.update({k: c[k] for k in ("preset", "ties", "og_gamma") if c[k] is not None})
    return Scenario.from_mapping(doc)


def same(a, b) -> None:
    np.testing.assert_array_equal(np.asarray(a.ranks, dtype=float), np.asarray(b.ranks, dtype=float))
    np.testing.assert_array_equal(np.asarray(a.scores, dtype=float), np.asarray(b.scores, dtype=float))
    assert tuple(a.models) == tuple(b.models)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_path_ranks_as_ranking_rank(data):
    """A lean default (12 random tables and choices, each on every path); the exhaustive run is marked slow."""
    every_path_ranks_as_ranking_rank(data)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_path_ranks_as_ranking_rank_exhaustively(data):
    every_path_ranks_as_ranking_rank(data)


def every_path_ranks_as_ranking_rank(data):
    table = data.draw(tables())
    c = data.draw(choices(len(table.group_names)))
    rule = c["rule"]
    try:
        want = ranking.rank(table, **c)[rule]
    except UserError:
        want = None  # the same choices must fail on every path
    sc = scenario_of(table, c)
    try:
        built = sc.build_table(table)
        got = compare(sc, built).results["col"]
    except UserError:
        got = None
    assert (want is None) == (got is None)
    event(f"{c['setting']}, {'refused' if want is None else 'ranked'}")
    if want is None:
        return
    same(got, want)  # a scenario column

    plan = RankPlan.build(**c)
    prepared = plan.prepare(table)
    same(make_ranker_result(plan, prepared.table, rule), want)  # the analyses' ranker
    np.testing.assert_array_equal(make_ranker(rule, plan=plan)(prepared.table), np.asarray(want.ranks, dtype=float))
    if c["preset"] is None and c["ties"] is None and c["og_gamma"] is None:  # vnr analyze's own choices
        from ranking.cli_table import table_from_args

        class Args:
            data_root, lower, higher, vote = None, (), (), c["vote"]

        with tempfile.TemporaryDirectory() as folder:
            table.to_csv(Path(folder) / "matrix.csv")
            loaded = table_from_args(Args(), source=folder, voted="analyze")
        ranker = make_ranker(rule, setting=c["setting"], group_weights=c["group_weights"])
        np.testing.assert_array_equal(ranker(loaded), np.asarray(want.ranks, dtype=float))

    col = sc.column("col")
    # a bootstrap that draws nothing new (every standard error 0) puts each model at its rank
    probs = error_bootstrap(sc, built, n=2)["col"]
    np.testing.assert_array_equal(probs, tie_split(np.asarray(want.ranks, dtype=float)))
    if col.uses_group_weights:
        groups = built.group_names
        w = np.array([c["group_weights"][g] for g in groups])
        same(rank_at(built, col, sc.ties, groups, w), want)  # a point of the simplex
        smap = simplex_map(built, col, sc.ties, resolution=4, method="loop")
        assert smap.winner_at(w) == want.winners
        answer = what_if(built, col, sc.ties, built.models[0], c["group_weights"], resolution=4)
        assert answer.winners_at_scenario == want.winners  # what-if with nothing changed
    else:
        same(run_column(built, col, sc.ties), want)


def make_ranker_result(plan: RankPlan, table: ScoreTable, rule: str):
    return plan.run_rule(table, rule)


def test_a_scenario_column_ranks_as_vnr_rank_on_the_case_study():
    """The published case study: every column of the paper's scenario equals ranking.rank with its choices."""
    import os

    root = os.environ.get("VNR_DATA_ROOT")
    if not root or not Path(root, "leaderboards", "votenrank", "case_study_4").is_dir():
        pytest.skip("no case study data")
    from ranking.scenarios import load_scenario
    from ranking.scenarios.casestudy import load_case_study
    from ranking.votes import structured

    sc = load_scenario(ROOT / "configs" / "scenarios" / "paper_case_study.yaml")
    table = sc.build_table(load_case_study(root))
    assert not structured(table.criteria)  # no benchmark structure: ranking the built table again votes alike
    cmp = compare(sc, table)
    for col in sc.columns:
        if col.rule == "board" or col.group is not None:
            continue
        params = dict(col.params)
        want = ranking.rank(table, col.rule, setting=col.setting, group_weights=col.group_weights,
                            ties=col.ties or sc.ties, preset=params.pop("preset", None), vote=sc.vote,
                            **params)[col.rule]
        same(cmp.results[col.name], want)
        assert not math.isnan(float(np.nanmax(want.scores)))


@pytest.mark.parametrize("preset", [None, "votenrank"])
def test_the_report_page_weighs_as_the_scenario_plan(preset):
    """The live page's weighted setting divides as the plan's preset does (votenrank: by the group's columns), so a
    half-weight a/b column weighs in the page what it weighs in vnr rank."""
    import json
    import re

    from ranking.scenarios.report import live_html

    t = ScoreTable(("A", "B", "C"), (Criterion("t/a", group="x", weight=0.5), Criterion("t/b", group="x", weight=0.5),
                                     Criterion("u", group="x"), Criterion("v", group="y")),
                   np.array([[0.9, 0.1, 0.5, 0.2], [0.2, 0.8, 0.4, 0.9], [0.5, 0.5, 0.9, 0.1]]))
    gw = {"x": 0.75, "y": 0.25}
    doc = {"groups": {"x": {}, "y": {}}, "columns": [{"name": "w", "rule": "borda", "setting": "weighted",
                                                     "group_weights": gw}]}
    if preset:
        doc["preset"] = preset
    sc = Scenario.from_mapping(doc)
    built = sc.build_table(t)
    cmp = compare(sc, built)
    page = live_html(cmp)
    data = json.loads(re.search(r"<script type='application/json' id='live-data'>(.*?)</script>", page).group(1))
    weights = [own * gw[data["groups"][g]] / data["totals"][g] for own, g in zip(data["own"], data["group_of"])]
    np.testing.assert_allclose(weights, sc.plan("w").effective_table(built).weights, rtol=1e-15)
    pts = np.array(data["points"]["borda"], dtype=float)
    np.testing.assert_allclose(pts @ np.array(weights), ranking.rank(t, "borda", setting="weighted", group_weights=gw,
                                                                     preset=preset)["borda"].scores, rtol=1e-12)


def test_an_ad_hoc_whatif_column_keeps_the_scenario_preset():
    """`vnr whatif --rule R --setting S` for a column the file does not list ranks under the scenario's preset and
    og_gamma (the votenrank divisor, ties and gamma), exactly as a listed column with the same rule would."""
    from ranking.scenarios.cli import whatif_columns

    doc = {"groups": {"x": {}, "y": {}}, "preset": "votenrank", "og_gamma": 0.9,
           "columns": [{"name": "b", "rule": "borda", "setting": "weighted", "group_weights": {"x": 2, "y": 1}},
                       {"name": "og", "rule": "optimality_gap", "setting": "weighted",
                        "group_weights": {"x": 2, "y": 1}}]}
    sc = Scenario.from_mapping(doc)
    (listed,) = whatif_columns(sc, "optimality_gap", "weighted")
    adhoc = sc.ad_hoc_column("optimality_gap", "two-step", {"x": 2.0, "y": 1.0})
    assert sc.plan(adhoc) == sc.plan(listed).with_(setting="two-step")
    assert sc.plan(adhoc).preset == "votenrank" and sc.plan(adhoc).rule_params("optimality_gap") == {"gamma": 0.9}
    (asked,) = whatif_columns(sc, "copeland", "two-step")
    assert sc.plan(asked).preset == "votenrank" and sc.plan(asked).ties == "votenrank"
