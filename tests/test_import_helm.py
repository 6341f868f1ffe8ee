"""HELM group tables (`vnr import helm`): each score once, one vote per benchmark (HELM run group), BBQ's signed bias
as a target, two HELM versions' files, and board parity with the `Mean win rate` the files themselves carry.

The fixtures are written here in the structure HELM's `helm-summarize` writes `runs/<suite>/groups/<group>.json`
(checked against published suites of HELM 0.4 (2023-11) and 0.5 (2024-05)): metric-group tables headed
`<run group> - <metric>` with a `Mean win rate` column, a scenario's own file with its aggregate table first and a
table per sub-scenario whose model cells link their runs (`href`, `run_spec_names`); numbers made up unless said.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

import ranking
from harness.cli import main
from ranking.floor.errors import UserError
from ranking.importers.helm import board_scores, win_rates

REPO = Path(__file__).resolve().parents[1]
MODELS = ("Model A (7B)", "Model B (13B)", "Model C (70B)", "Model D (7B)")


# ---------------------------------------------------------------------- HELM's structures
def cell(v, runs: list[str] | None = None) -> dict:
    """A value cell (HELM >= 0.5 names the runs behind it); None: HELM's "No matching runs"."""
    if v is None:
        return {"description": "No matching runs", "markdown": False}
    out = {"value": v, "description": f"min={v:.3f}, mean={v:.3f}, max={v:.3f}, sum={v:.3f} (1)", "style": {},
           "markdown": False}
    if runs:
        out["run_spec_names"] = runs
    return out


def head(value: str, lower: bool | None, metric: str | None = None, group: str | None = None,
         perturbation: str | None = None) -> dict:
    h = {"value": value, "description": f"{value}.", "markdown": False, "metadata": {}}
    if lower is not None:
        h["lower_is_better"] = lower
    if metric:
        h["metadata"] = {"metric": metric, "run_group": group}
        if perturbation:
            h["metadata"]["perturbation"] = perturbation
    return h


MODEL_HEAD = {"value": "Model/adapter", "markdown": False, "metadata": {}}
WIN_RATE = {"value": "Mean win rate", "description": "How many models this model outperforms on average (over "
            "columns).", "markdown": False, "lower_is_better": False, "metadata": {}}


def model(m: str, runs: list[str] | None = None) -> dict:
    """The model cell: a sub-scenario table links the row to its runs."""
    out = {"value": m, "description": "", "markdown": False}
    if runs:
        out.update(href=f"?group=g&runSpecs={json.dumps(runs)}", run_spec_names=runs)
    return out


def table(title: str, name: str, heads: list[dict], rows: list[list], win_rates: list | None = None,
          links: list[str] | None = None, runs: bool = True) -> dict:
    """A HELM table; ``win_rates`` (the file's own Mean win rate) puts HELM's column after the model column;
    ``runs=False``: cells as HELM before 0.5 wrote them (no ``run_spec_names``)."""
    header = [MODEL_HEAD, *([WIN_RATE] if win_rates is not None else []), *heads]
    body = []
    for k, (m, *values) in enumerate(rows):
        wr = [] if win_rates is None else [{"markdown": False} if win_rates[k] is None else
                                           {"value": win_rates[k], "markdown": False}]
        body.append([model(m, [f"{name}:model={m}"] if links else None), *wr,
                     *[cell(v, [f"run:{m}"] if runs else None) for v in values]])
    return {"title": title, "header": header, "rows": body, "links": [], "name": name}


def write(path: Path, tables: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tables, indent=2))
    return path


def safety_group(root: Path) -> Path:
    """groups/safety_scenarios.json: metric-group tables (Accuracy with HELM's mean win rate, BBQ metrics)."""
    acc = [("Model A (7B)", 0.71, 0.90), ("Model B (13B)", 0.80, 0.95), ("Model C (70B)", 0.86, None),
           ("Model D (7B)", 0.59, 0.85)]
    bias = [("Model A (7B)", 0.08, 0.03), ("Model B (13B)", 0.02, -0.01), ("Model C (70B)", 0.21, 0.05),
            ("Model D (7B)", -1.0, -0.35)]
    # HELM's mean win rate of the Accuracy table, worked by hand: BBQ .71 .80 .86 .59 -> 1/3 2/3 1 0;
    # XSTest .90 .95 - .85 -> 1/2 1 - 0
    return write(root / "safety_scenarios.json", [
        table("Accuracy", "accuracy", [head("BBQ - BBQ accuracy", False, "BBQ accuracy", "BBQ"),
                                       head("XSTest - LM Evaluation for Safety", False, "LM Evaluation for Safety",
                                            "XSTest")],
              [list(r) for r in acc], win_rates=[5 / 12, 5 / 6, 1.0, 0.0]),
        table("BBQ metrics", "bbq_metrics", [head("BBQ - BBQ (ambiguous)", True, "BBQ (ambiguous)", "BBQ"),
                                             head("BBQ - BBQ (unambiguous)", True, "BBQ (unambiguous)", "BBQ")],
              [list(r) for r in bias]),
        table("General information", "general_information", [head("BBQ - # eval", None, "# eval", "BBQ")],
              [[m, 1000.0] for m in MODELS], win_rates=[None] * 4),
    ])


def bbq_group(root: Path) -> Path:
    """groups/bbq.json: the scenario's aggregate table (its columns named by the metric alone), then a table per
    sub-scenario (model cells link their runs)."""
    heads = [head("BBQ accuracy", False, "BBQ accuracy", "BBQ"), head("BBQ (ambiguous)", True, "BBQ (ambiguous)", "BBQ")]
    return write(root / "bbq.json", [
        table("BBQ", "bbq", heads, [["Model A (7B)", 0.71, 0.08], ["Model B (13B)", 0.80, 0.02],
                                    ["Model C (70B)", 0.86, 0.21], ["Model D (7B)", 0.59, -1.0]]),
        table("subject: Age", "bbq_subject:Age", heads, [["Model A (7B)", 0.69, 0.1], ["Model B (13B)", 0.78, 0.0],
                                                         ["Model C (70B)", 0.85, 0.2], ["Model D (7B)", 0.57, -0.9]],
              links=["bbq:subject=Age"]),
        table("subject: Race_ethnicity", "bbq_subject:Race_ethnicity", heads,
              [["Model A (7B)", 0.73, 0.06], ["Model B (13B)", 0.82, 0.04], ["Model C (70B)", 0.87, 0.22],
               ["Model D (7B)", 0.61, -1.0]], links=["bbq:subject=Race_ethnicity"]),
    ])


def imported(paths, **kw) -> tuple[ranking.ScoreTable, list]:
    notes: list = []
    table_ = ranking.load_table([str(p) for p in paths], format="helm", notes=notes, **kw)
    return table_, notes


def crit(t: ranking.ScoreTable, name: str):
    return t.criterion(name)


# ---------------------------------------------------------------------- each score once
def test_a_parent_group_and_the_scenarios_own_table_give_each_score_once(tmp_path):
    t, notes = imported([safety_group(tmp_path), bbq_group(tmp_path)])
    # `BBQ accuracy` (bbq.json) is `BBQ - BBQ accuracy` (safety's Accuracy table): one column, HELM's name for it
    assert [n for n in t.names if n.endswith("BBQ accuracy")] == [
        "BBQ - BBQ accuracy", "BBQ [subject: Age] - BBQ accuracy", "BBQ [subject: Race_ethnicity] - BBQ accuracy"]
    assert [n for n in t.names if "(ambiguous)" in n] == [
        "BBQ - BBQ (ambiguous)", "BBQ [subject: Age] - BBQ (ambiguous)",
        "BBQ [subject: Race_ethnicity] - BBQ (ambiguous)"]
    dup = [n for n in notes if n.kind == "duplicate"]
    assert len(dup) == 1 and dup[0].message.startswith("helm: 2 column(s) repeat a measure already imported")
    assert "'BBQ accuracy' (bbq.json, table 'BBQ') = 'BBQ - BBQ accuracy' (safety_scenarios.json, table 'Accuracy')" \
        in dup[0].message
    assert t.values[:, t.names.index("BBQ - BBQ accuracy")].tolist() == [0.71, 0.80, 0.86, 0.59]
    # the same tables again (the same suite's groups/json/ copy) add nothing
    again, _ = imported([safety_group(tmp_path), bbq_group(tmp_path), write(tmp_path / "json" / "acc.json",
                                                                            [json.loads((tmp_path / "safety_scenarios.json").read_text())[0]])])
    assert again.names == t.names
    with pytest.raises(UserError, match=r"HELM column 'BBQ - BBQ accuracy' appears 2 times .*--on-duplicate newest"):
        imported([safety_group(tmp_path), bbq_group(tmp_path)], on_duplicate="error")


def test_copies_that_differ_are_other_runs_kept_apart(tmp_path):
    rows = [["Model A (7B)", 0.5], ["Model B (13B)", 0.6]]
    a = write(tmp_path / "v1" / "mmlu.json", [table("Accuracy", "accuracy", [head("MMLU - EM", False, "EM", "MMLU")],
                                                    rows)])
    b = write(tmp_path / "v2" / "mmlu.json", [table("Accuracy", "accuracy", [head("MMLU - EM", False, "EM", "MMLU")],
                                                    [["Model B (13B)", 0.7], ["Model C (70B)", 0.4]])])
    t, notes = imported([a, b])
    assert t.names == (f"MMLU - EM [{a}]", f"MMLU - EM [{b}]")
    assert np.array_equal(t.values, [[0.5, np.nan], [0.6, 0.7], [np.nan, 0.4]], equal_nan=True)
    assert all(c.benchmark == "MMLU" and not c.detail for c in t.criteria)  # they share MMLU's vote
    assert [(n.kind, n.ranks) for n in notes if "different scores" in n.message] == [("duplicate", True)]
    # models one copy lacks, the same scores where both have one: one measure, one column
    c = write(tmp_path / "v3" / "mmlu.json", [table("Accuracy", "accuracy", [head("MMLU - EM", False, "EM", "MMLU")],
                                                    [["Model B (13B)", 0.6], ["Model C (70B)", 0.4]])])
    t, _ = imported([a, c])
    assert t.names == ("MMLU - EM",) and t.values[:, 0].tolist() == [0.5, 0.6, 0.4]


def test_no_two_measures_share_a_name(tmp_path):
    """A column named like another table's title + column, and two same-named columns of one table: all kept."""
    path = write(tmp_path / "g.json", [
        {"title": "X", "header": [MODEL_HEAD, {"value": "EM", "lower_is_better": False},
                                  {"value": "EM", "lower_is_better": False}],
         "rows": [[model("M"), cell(0.1), cell(0.2)], [model("N"), cell(0.3), cell(0.4)]]},
        {"title": "Y", "header": [MODEL_HEAD, {"value": "X - EM", "lower_is_better": False}],
         "rows": [[model("M"), cell(0.5)], [model("N"), cell(0.6)]]},
    ])
    t, _ = imported([path])
    assert t.names == (f"X - EM [{path} .[0].header[1]]", f"X - EM [{path} .[0].header[2]]", "X - EM [Y]")
    assert t.values.tolist() == [[0.1, 0.2, 0.5], [0.3, 0.4, 0.6]]


# ---------------------------------------------------------------------- one benchmark, one vote
def test_a_criterion_knows_its_run_group_task_metric_and_setting(tmp_path):
    core = write(tmp_path / "runs" / "v1" / "groups" / "core_scenarios.json", [
        table("Accuracy", "accuracy", [head("MMLU - EM", False, "EM", "MMLU"), head("GSM8K - EM", False, "EM", "GSM8K")],
              [[m, 0.4 + k / 10, 0.3 + k / 20] for k, m in enumerate(MODELS)], win_rates=[0.0, 1 / 3, 2 / 3, 1.0]),
        table("Robustness", "robustness", [head("MMLU - EM (Robustness)", False, "EM", "MMLU", "Robustness")],
              [[m, 0.3 + k / 10] for k, m in enumerate(MODELS)], win_rates=[0.0, 1 / 3, 2 / 3, 1.0]),
        table("Efficiency", "efficiency", [head("MMLU - Observed inference time (s)", True,
                                                "Observed inference time (s)", "MMLU")],
              [[m, 1.0 + k] for k, m in enumerate(MODELS)], win_rates=[1.0, 2 / 3, 1 / 3, 0.0]),
    ])
    mmlu = write(tmp_path / "runs" / "v1" / "groups" / "mmlu.json", [
        table("MMLU (Massive Multitask Language Understanding)", "mmlu", [head("EM", False, "EM", "MMLU")],
              [[m, 0.4 + k / 10] for k, m in enumerate(MODELS)]),
        table("subject: anatomy", "mmlu_subject:anatomy", [head("EM", False, "EM", "MMLU")],
              [[m, 0.35 + k / 10] for k, m in enumerate(MODELS)], links=["mmlu:subject=anatomy"]),
        table("subject: anatomy (sub-split: hard)", "mmlu:sub_split=hard", [head("EM", False, "EM", "MMLU")],
              [[m, 0.2 + k / 10] for k, m in enumerate(MODELS)]),
    ])
    t, notes = imported([core, mmlu])
    res = tmp_path / "res"
    res.mkdir()
    t.to_csv(res / "matrix.csv", res / "criteria.yaml")
    doc = yaml.safe_load((res / "criteria.yaml").read_text())
    assert doc["board"] == "helm"
    assert doc["criteria"]["MMLU - EM"] == {
        "direction": "higher", "weight": 1.0, "group": "Accuracy", "unit": "EM", "source": "HELM core_scenarios (suite v1)",
        "benchmark": "MMLU", "task": "MMLU", "metric": "EM", "range": [0.0, 1.0]}
    rob = crit(t, "MMLU - EM (Robustness)")
    assert (rob.benchmark, rob.metric, dict(rob.settings), rob.detail) == ("MMLU", "EM", {"perturbation": "Robustness"},
                                                                           True)
    eff = crit(t, "MMLU - Observed inference time (s)")
    assert (eff.direction, eff.range, eff.detail, eff.group) == ("lower", (0.0, None), True, "Efficiency")
    sub = crit(t, "MMLU [subject: anatomy] - EM")
    assert (sub.benchmark, sub.task, sub.detail, sub.group) == ("MMLU", "subject: anatomy", True, "Accuracy")
    split = crit(t, "MMLU [sub-split: hard] - EM")
    assert (dict(split.settings), split.detail) == ({"sub_split": "hard"}, True)
    # one vote each for MMLU and GSM8K, whatever else they report
    assert [c.name for c in t.criteria if not c.detail] == ["MMLU - EM", "GSM8K - EM"]
    assert [n.kind for n in notes].count("vote") == 1


def test_without_an_accuracy_table_a_scenario_tables_first_metric_votes(tmp_path):
    heads = [head("EM", False, "EM", "MMLU"), head("ECE (10-bin)", True, "ECE (10-bin)", "MMLU"),
             head("EM (Robustness)", False, "EM", "MMLU", "Robustness")]
    t, _ = imported([write(tmp_path / "mmlu.json", [
        table("MMLU", "mmlu", heads, [[m, 0.5 + k / 10, 0.1, 0.4] for k, m in enumerate(MODELS)])])])
    assert t.names == ("MMLU - EM", "MMLU - ECE (10-bin)", "MMLU - EM (Robustness)")
    assert [c.detail for c in t.criteria] == [False, True, True]
    # only an Efficiency table: its columns of one run group share the vote
    t, _ = imported([write(tmp_path / "eff.json", [table("Efficiency (Detailed)", "efficiency_detailed", [
        head("MMLU - Observed inference time (s)", True, "Observed inference time (s)", "MMLU"),
        head("MMLU - Denoised inference time (s)", True, "Denoised inference time (s)", "MMLU")],
        [[m, 1.0 + k, 0.5 + k] for k, m in enumerate(MODELS)])])])
    assert [c.detail for c in t.criteria] == [False, False]


# ---------------------------------------------------------------------- BBQ: closest to 0 is best
def test_bbqs_signed_bias_is_a_target_of_zero(tmp_path):
    t, notes = imported([safety_group(tmp_path)])
    amb = crit(t, "BBQ - BBQ (ambiguous)")
    assert (amb.direction, amb.target, amb.range, amb.metric) == ("target", 0.0, (-1.0, 1.0), "BBQ (ambiguous)")
    column = t.values[:, t.names.index("BBQ - BBQ (ambiguous)")]
    oriented = amb.orient(column)
    assert t.models[int(np.argmax(oriented))] == "Model B (13B)"  # 0.02: the least biased
    assert t.models[int(np.argmin(oriented))] == "Model D (7B)"  # -1.0: maximally counter-stereotypical
    assert [n.message.split(" imported")[0] for n in notes if n.kind == "direction"] == [
        "helm: 2 BBQ bias column(s) (BBQ - BBQ (ambiguous), BBQ - BBQ (unambiguous))"]
    # the caller can keep HELM's direction
    t, _ = imported([safety_group(tmp_path)], lower=["BBQ (ambiguous)"])
    assert crit(t, "BBQ - BBQ (ambiguous)").direction == "lower"
    assert crit(t, "BBQ - BBQ (unambiguous)").direction == "target"


def test_a_score_outside_its_metrics_range_is_refused_or_missing(tmp_path):
    path = write(tmp_path / "g.json", [table("Accuracy", "accuracy", [head("MMLU - EM", False, "EM", "MMLU")],
                                             [["Model A (7B)", 0.5], ["Model B (13B)", 1.5]])])
    with pytest.raises(UserError, match=r"model 'Model B \(13B\)', column 'MMLU - EM' is 1.5, outside its range"):
        imported([path])
    t, notes = imported([path], out_of_range="missing")
    assert t.models == ("Model A (7B)",) and [n.kind for n in notes if n.ranks] == ["range", "left-out"]


# ---------------------------------------------------------------------- board parity: HELM's mean win rate
def test_win_rates_count_ties_as_helm_does():
    assert win_rates([0.5, 0.7, math.nan, 0.7], lower_is_better=False) == [0.0, 0.75, None, 0.75]
    assert win_rates([0.5, 0.7, math.nan, 0.7], lower_is_better=False, ties="order") == [0.0, 0.5, None, 1.0]
    assert win_rates([0.5, 0.7, 0.7], lower_is_better=True, ties="order") == [1.0, 0.5, 0.0]
    assert win_rates([0.5, math.nan], lower_is_better=False) == [None, None]  # HELM ranks no single model


def test_board_parity_helm_0_5_4_and_later(tmp_path):
    """Ties count half (HELM >= 0.5.4): the file's own Mean win rate, recomputed from the imported columns."""
    # X: .5 .7 .7 -  -> 0, 3/4, 3/4, -;  Y: .2 .1 .3 .4 -> 1/3, 0, 2/3, 1
    given = [1 / 6, 0.375, 17 / 24, 1.0]
    path = write(tmp_path / "core_scenarios.json", [
        table("Accuracy", "accuracy", [head("X - EM", False, "EM", "X"), head("Y - F1", False, "F1", "Y")],
              [["Model A (7B)", 0.5, 0.2], ["Model B (13B)", 0.7, 0.1], ["Model C (70B)", 0.7, 0.3],
               ["Model D (7B)", None, 0.4]], win_rates=given),
        table("Efficiency", "efficiency", [head("X - Observed inference time (s)", True,
                                                "Observed inference time (s)", "X")],
              [[m, 1.0] for m in MODELS], win_rates=[0.5] * 4),
    ])
    t, notes = imported([path])
    np.testing.assert_allclose(board_scores(t), given, rtol=0, atol=1e-12)
    assert all(dict(c.settings).get("helm_version") == ">=0.5.4" for c in t.criteria)
    assert not [n for n in notes if n.kind == "format"]
    assert "Mean win rate" not in " ".join(t.names)  # HELM's aggregate never votes


def test_board_parity_helm_before_0_5_4(tmp_path):
    """HELM 0.2-0.5.3 ranked ties by row order. Numbers of a published HELM 0.5 suite (2024-05, five Llama 3
    deployments): MMLU EM and its Accuracy mean win rate; `Max prob` 1.0 for all five, which that HELM turned into
    win rates 0, .25, .5, .75, 1 by row order."""
    names = ["Together AI Llama 3 (8B)", "Together AI Llama 3 (70B)", "Groq LLaMA 3 (8B)", "Groq LLaMA 3 (70B)",
             "Hugging face LLaMA 3 (8B)(original)"]
    em = [0.5457712478651048, 0.7306329549363606, 0.38060987091050635, 0.703082215342277, 0.6461130574113303]
    path = write(tmp_path / "calibration.json", [
        table("Calibration (Detailed)", "calibration_detailed",
              [head("MMLU - Max prob", False, "Max prob", "MMLU"), head("MMLU - ECE (1-bin)", True, "ECE (1-bin)", "MMLU")],
              [[m, 1.0, None] for m in names], win_rates=[0.0, 0.25, 0.5, 0.75, 1.0]),
        table("Accuracy", "accuracy", [head("MMLU - EM", False, "EM", "MMLU")], [[m, x] for m, x in zip(names, em)],
              win_rates=[0.25, 1.0, 0.0, 0.75, 0.5]),
    ])
    t, notes = imported([path])
    assert board_scores(t).tolist() == [0.25, 1.0, 0.0, 0.75, 0.5]  # the Accuracy table's: HELM's headline
    assert dict(crit(t, "MMLU - Max prob").settings) == {"helm_version": "<0.5.4"}
    assert [n.kind for n in notes].count("format") == 1
    calibration_only = write(tmp_path / "cal" / "calibration_calibration_detailed.json",
                             json.loads(path.read_text())[:1])
    t, _ = imported([calibration_only])
    assert board_scores(t).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert board_scores(t, ties="half").tolist() == [0.5] * 5


def test_board_parity_one_model_has_no_win_rate(tmp_path):
    """HELM 0.4 (a one-model suite of 2023-11): the Mean win rate cell is empty, and so is the board's."""
    path = write(tmp_path / "core_scenarios.json", [
        table("Accuracy", "accuracy", [head("MMLU - EM", False, "EM", "MMLU"), head("BoolQ - EM", False, "EM", "BoolQ")],
              [["huggingface/gpt2", 0.1111111111111111, None]], win_rates=[None], runs=False)])
    t, _ = imported([path])
    assert t.names == ("MMLU - EM",) and np.isnan(board_scores(t)).all()


# ---------------------------------------------------------------------- the shipped samples, as README runs them
def test_readme_example_imports_and_ranks_the_samples(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    os.symlink(REPO / "configs", tmp_path / "configs")
    assert main(["import", "helm", "configs/import_samples/helm", "-o", "results/imported/helm"]) == 0
    err = capsys.readouterr().err
    assert err.count("vnr import: note:") <= 8, err  # a summary, not a flood
    doc = yaml.safe_load(Path("results/imported/helm/criteria.yaml").read_text())
    voting = [n for n, c in doc["criteria"].items() if not c.get("detail")]
    assert voting == ["BBQ - BBQ accuracy", "MMLU - EM", "NarrativeQA - F1"]
    assert doc["criteria"]["BBQ - BBQ (ambiguous)"]["direction"] == "target"
    table_ = ranking.load_table("results/imported/helm")
    # the Accuracy table's Mean win rate the sample carries (worked by hand: 7/18, 7/9, 1, 0)
    given = json.loads((REPO / "configs/import_samples/helm/core_scenarios.json").read_text())[0]
    assert [row[1]["value"] for row in given["rows"]] == pytest.approx([7 / 18, 7 / 9, 1.0, 0.0], abs=1e-12)
    np.testing.assert_allclose(board_scores(table_), [7 / 18, 7 / 9, 1.0, 0.0], atol=1e-12)
    assert main(["rank", "results/imported/helm"]) == 0
    out = capsys.readouterr().out
    assert "Gamma (70B)" in out


# ---------------------------------------------------------------------- issue 36
def test_run_folders_without_summary_name_helm_summarize(tmp_path, capsys):
    """A suite folder as helm-run writes it (runs/<suite>/<run>/run_spec.json, stats.json, ...), no groups/."""
    suite = tmp_path / "benchmark_output" / "runs" / "v1"
    run = suite / "mmlu:subject=anatomy,method=multiple_choice_joint,model=org_m"
    run.mkdir(parents=True)
    for name in ("run_spec.json", "stats.json", "per_instance_stats.json", "scenario_state.json"):
        (run / name).write_text("{}" if name == "run_spec.json" else "[]")
    for given in (suite, run, run / "stats.json"):
        code = main(["import", "helm", str(given), "-o", str(tmp_path / "res")])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "`helm-summarize --suite v1`" in err, err


def test_bbq_subject_all_is_the_group_column_not_a_second_one(tmp_path):
    """HELM's bbq.json holds the scenario table and a 'subject: all' table of the same scores."""
    doc = json.loads((REPO / "configs/import_samples/helm/bbq.json").read_text())
    whole = json.loads(json.dumps(doc[1]))  # a sub-scenario table (its rows link to their runs)
    whole["title"] = "subject: all"
    for row, aggregate in zip(whole["rows"], doc[0]["rows"]):
        row[1]["value"] = aggregate[1]["value"]
    path = tmp_path / "bbq.json"
    path.write_text(json.dumps([doc[0], whole, *doc[1:]]))
    notes: list[str] = []
    table = ranking.load_table(path, format="helm", note=notes.append)
    assert not any("[subject: all]" in n for n in table.names), table.names
    assert len(table.names) == len(ranking.load_table(REPO / "configs/import_samples/helm/bbq.json", format="helm",
                                                      note=None).names)
