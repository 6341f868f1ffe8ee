"""Importers: other tools' results (in their published file structure, written here) → table + sidecar → rank, report."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from vnr_cli import vnr

import ranking
from ranking.floor.errors import UserError
from ranking.scenarios import load_scenario
from ranking.scenarios.bootstrap import error_bootstrap
from ranking.table import Criterion, ScoreTable

ANY_TABLE = Path(__file__).resolve().parents[1] / "configs" / "scenarios" / "any_table.yaml"


# ---------------------------------------------------------------------- samples in the published structures
def lm_eval_results(model: str, arc: float, anatomy: float, *, date: float = 1716900000.0,
                    higher_is_better: bool = True, extra: dict | None = None) -> dict:
    """One results file as lm-evaluation-harness 0.4 writes it (`--output_path`), tasks arc_easy and mmlu_anatomy."""
    doc = {
        "results": {
            "arc_easy": {"alias": "arc_easy", "acc,none": arc, "acc_stderr,none": 0.01,
                         "acc_norm,none": arc - 0.02, "acc_norm_stderr,none": "N/A"},
            "mmlu": {"acc,none": anatomy, "acc_stderr,none": 0.004, "alias": "mmlu"},
            "mmlu_stem": {"acc,none": anatomy, "acc_stderr,none": 0.03, "alias": " - stem"},
            "mmlu_anatomy": {"alias": "  - anatomy", "acc,none": anatomy, "acc_stderr,none": 0.04},
        },
        "groups": {"mmlu": {"acc,none": anatomy, "acc_stderr,none": 0.004, "alias": "mmlu"},
                   "mmlu_stem": {"acc,none": anatomy, "acc_stderr,none": 0.03, "alias": " - stem"}},
        "group_subtasks": {"mmlu_stem": ["mmlu_anatomy"], "mmlu": ["mmlu_stem"], "arc_easy": []},
        "configs": {"arc_easy": {"task": "arc_easy", "num_fewshot": 0}},
        "versions": {"arc_easy": 1.0, "mmlu": 2, "mmlu_stem": 2, "mmlu_anatomy": 1.0},
        "n-shot": {"arc_easy": 0, "mmlu_anatomy": 5},
        "higher_is_better": {"arc_easy": {"acc": True, "acc_norm": True}, "mmlu": {"acc": True},
                             "mmlu_stem": {"acc": True}, "mmlu_anatomy": {"acc": True}},
        "n-samples": {"arc_easy": {"original": 2376, "effective": 2376}},
        "config": {"model": "hf", "model_args": f"pretrained={model},dtype=float32", "batch_size": "8"},
        "git_hash": "a1b2c3d", "date": date, "model_name": model, "model_name_sanitized": model.replace("/", "__"),
    }
    if not higher_is_better:
        del doc["higher_is_better"]
    for task, metrics in (extra or {}).items():
        doc["results"][task] = metrics
        doc["group_subtasks"][task] = []
    return doc


def write_lm_eval(root: Path, model: str, doc: dict, stamp: str = "2024-05-28T12-00-00.000001") -> Path:
    folder = root / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{stamp}.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.fixture
def lm_eval_out(tmp_path) -> Path:
    out = tmp_path / "lm_eval_out"
    for model, arc, anatomy in (("org/A", 0.80, 0.60), ("org/B", 0.70, 0.50), ("org/C", 0.60, 0.40)):
        write_lm_eval(out, model, lm_eval_results(model, arc, anatomy))
    return out


OPEN_LLM_COLUMNS = [
    "eval_name", "Precision", "Type", "T", "Weight type", "Architecture", "Model", "fullname", "Model sha",
    "Average ⬆️", "Hub License", "Hub ❤️", "#Params (B)", "Available on the hub", "MoE", "Flagged",
    "Chat Template", "CO₂ cost (kg)", "IFEval Raw", "IFEval", "BBH Raw", "BBH", "MATH Lvl 5 Raw", "MATH Lvl 5",
    "GPQA Raw", "GPQA", "MUSR Raw", "MUSR", "MMLU-PRO Raw", "MMLU-PRO", "Merged", "Official Providers",
    "Upload To Hub Date", "Submission Date", "Generation", "Base Model",
]


def write_open_llm(path: Path, rows: list[tuple[str, str, float, float, float, str]]) -> Path:
    """The contents table's CSV export: (fullname, precision, benchmark level, params, co2, submission date)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=OPEN_LLM_COLUMNS)
        w.writeheader()
        for fullname, precision, level, params, co2, date in rows:
            row = {c: "" for c in OPEN_LLM_COLUMNS}
            bench = {"IFEval": level + 5, "BBH": level, "MATH Lvl 5": level / 2, "GPQA": level / 4, "MUSR": level / 3,
                     "MMLU-PRO": level + 1}
            row.update({f"{k} Raw": v / 100 for k, v in bench.items()})
            row.update(bench)
            row.update({"eval_name": f"{fullname.replace('/', '_')}_{precision}", "Precision": precision,
                        "Type": "🟢 : 🟢 pretrained", "Model": f"<a href='https://huggingface.co/{fullname}'>{fullname}</a>",
                        "fullname": fullname, "Average ⬆️": sum(bench.values()) / 6, "Hub License": "apache-2.0",
                        "Hub ❤️": 12, "#Params (B)": params, "Available on the hub": True, "MoE": False,
                        "Flagged": False, "CO₂ cost (kg)": co2, "Submission Date": date, "Generation": 0})
            w.writerow(row)
    return path


def helm_tables() -> list[dict]:
    """A HELM group JSON (runs/<suite>/groups/core_scenarios.json): accuracy, efficiency, general information."""
    def cell(v):
        return {"value": v, "description": f"min={v}, mean={v}, max={v}", "markdown": False} if v is not None else \
            {"description": "No matching runs", "markdown": False}

    def head(value, lower=None, metric=None):
        h = {"value": value, "description": value, "markdown": False, "metadata": {}}
        if lower is not None:
            h["lower_is_better"] = lower
        if metric:
            h["metadata"] = {"metric": metric, "run_group": value.split(" - ")[0]}
        return h

    models = [("GPT-X (0613)", 0.9, 0.7, 2.5), ("Llama Y (70B)", 0.8, 0.6, 1.5), ("Small Z (7B)", 0.6, None, 0.5)]
    return [
        {"title": "Accuracy", "header": [head("Model/adapter"), head("Mean win rate", False),
                                          head("MMLU - EM", False, "EM"), head("NarrativeQA - F1", False, "F1")],
         "rows": [[cell(m), cell(0.5), cell(mmlu), cell(nqa)] for m, mmlu, nqa, _ in models], "name": "accuracy"},
        {"title": "Efficiency", "header": [head("Model/adapter"), head("Mean win rate", False),
                                            head("MMLU - Observed inference time (s)", True, "Observed inference time (s)")],
         "rows": [[cell(m), cell(0.5), cell(t)] for m, _, _, t in models], "name": "efficiency"},
        {"title": "General information", "header": [head("Model/adapter"), head("MMLU - # eval")],
         "rows": [[cell(m), cell(100)] for m, *_ in models], "name": "general_information"},
    ]


def write_mteb(root: Path, model_dir: str, revision: str, task: str, subsets: list[float], split: str = "test") -> Path:
    """One MTEB task result (mteb >= 1.11): results/<model>/<revision>/<Task>.json."""
    folder = root / model_dir / revision
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"dataset_revision": "0fd18e25b25c072e09e0d92ab615fda904d66300", "task_name": task, "mteb_version": "1.12.0",
           "scores": {split: [{"accuracy": s, "main_score": s, "hf_subset": sub, "languages": [f"{sub}-Latn"]}
                              for s, sub in zip(subsets, ["eng", "deu", "fra"])]},
           "evaluation_time": 12.5, "kg_co2_emissions": None}
    (folder / f"{task}.json").write_text(json.dumps(doc))
    (folder / "model_meta.json").write_text(json.dumps({"name": model_dir.replace("__", "/"), "revision": revision}))
    return folder / f"{task}.json"


CODECARBON_COLUMNS = ["timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions", "emissions_rate",
                      "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy", "ram_energy",
                      "energy_consumed", "country_name", "country_iso_code", "region", "cloud_provider",
                      "cloud_region", "os", "python_version", "codecarbon_version", "cpu_count", "cpu_model",
                      "gpu_count", "gpu_model", "longitude", "latitude", "ram_total_size", "tracking_mode", "on_cloud",
                      "pue"]


def write_emissions(path: Path, rows: list[tuple[str, float, float, float]]) -> Path:
    """codecarbon's emissions.csv: (project_name, duration s, emissions kg, energy_consumed kWh) per tracked run."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CODECARBON_COLUMNS)
        w.writeheader()
        for k, (project, duration, emissions, energy) in enumerate(rows):
            w.writerow({c: "" for c in CODECARBON_COLUMNS} | {
                "timestamp": f"2024-05-28T12:0{k}:00", "project_name": project, "run_id": f"run-{k}",
                "experiment_id": f"exp-{k}", "duration": duration, "emissions": emissions, "energy_consumed": energy,
                "emissions_rate": emissions / duration, "country_name": "France", "country_iso_code": "FRA",
                "tracking_mode": "machine", "on_cloud": "N", "pue": 1.0})
    return path


# ---------------------------------------------------------------------- helpers


def rank_order(out: str) -> list[str]:
    """The ranked models of `vnr rank --format csv` output (rows: model, score, rank), best first."""
    rows = [line.split(",") for line in out.splitlines()[1:]]
    return [r[0] for r in sorted((r for r in rows if r[2]), key=lambda r: int(r[2]))]


def borda_order(capsys, results: Path, *options: str) -> list[str]:
    code, out, err = vnr(capsys, "rank", results, "--rule", "borda", "--format", "csv", *options)
    assert code == 0, err
    return rank_order(out)


def report_html(capsys, results: Path, out: Path, *extra: str) -> str:
    code, _, err = vnr(capsys, "report", "--scenario", ANY_TABLE, "--results", results, "--out", out, *extra)
    assert code == 0, err
    return (out / "report.html").read_text()


def sidecar(results: Path) -> dict:
    return yaml.safe_load((results / "criteria.yaml").read_text())


# ---------------------------------------------------------------------- lm-eval
def test_lm_eval_round_trips_into_rank_and_report_with_standard_errors(capsys, lm_eval_out, tmp_path):
    res = tmp_path / "res"
    code, out, err = vnr(capsys, "import", "lm-eval", lm_eval_out, "-o", res)
    assert code == 0, err
    # the group rows are imported now (mmlu votes through its own score, its parts are details)
    assert "3 models × 5 criteria" in out and "stderr.csv" in out
    doc = sidecar(res)
    assert doc["standard_errors"] == "stderr.csv" and doc["board"] == "lm-eval"
    assert doc["criteria"]["arc_easy/acc"] == {
        "direction": "higher", "weight": 1.0, "group": "arc_easy", "unit": "proportion (0-1)",
        "source": "lm-eval arc_easy v1.0, 0-shot", "benchmark": "arc_easy", "task": "arc_easy", "metric": "acc",
        "settings": {"filter": "none", "n_shot": 0, "precision": "float32", "version": "1.0"}, "range": [0.0, 1.0],
        "detail": True}  # acc_norm is arc's primary metric
    assert doc["criteria"]["mmlu_anatomy/acc"]["group"] == "mmlu"  # the top of its group hierarchy
    assert doc["criteria"]["mmlu_anatomy/acc"]["source"] == "lm-eval mmlu_anatomy v1.0, 5-shot"
    assert doc["criteria"]["mmlu/acc"]["aggregate"] is True
    table = ranking.load_table(res)
    assert table.models == ("org/A", "org/B", "org/C")
    assert table.names == ("arc_easy/acc", "arc_easy/acc_norm", "mmlu/acc", "mmlu_anatomy/acc", "mmlu_stem/acc")
    np.testing.assert_allclose(table.values[:, 0], [0.8, 0.7, 0.6])
    se = table.standard_errors
    np.testing.assert_array_equal(se[:, 0], [0.01] * 3)
    assert np.isnan(se[:, 1]).all()  # "N/A" in the file: unknown
    np.testing.assert_array_equal(se[:, 3], [0.04] * 3)
    assert borda_order(capsys, res) == ["org/A", "org/B", "org/C"]
    html = report_html(capsys, res, tmp_path / "report", "--bootstrap", "30")
    assert "Uncertainty from the standard errors" in html and "Normal(score, its standard error)" in html
    assert "proportion (0-1)" in html  # units shown in the raw values


def test_load_table_reads_lm_eval_directly_with_the_same_result(lm_eval_out, tmp_path, capsys):
    direct = ranking.load_table(lm_eval_out, format="lm-eval")
    assert vnr(capsys, "import", "lm-eval", lm_eval_out, "-o", tmp_path / "res")[0] == 0
    written = ranking.load_table(tmp_path / "res")
    assert direct.models == written.models and direct.names == written.names
    np.testing.assert_array_equal(direct.values, written.values)
    np.testing.assert_array_equal(direct.standard_errors, written.standard_errors)
    assert [c.group for c in direct.criteria] == [c.group for c in written.criteria]


def test_lm_eval_missing_tasks_are_missing_scores(lm_eval_out, capsys, tmp_path):
    write_lm_eval(lm_eval_out, "org/D", lm_eval_results("org/D", 0.9, 0.7) | {"results": {
        "arc_easy": {"alias": "arc_easy", "acc,none": 0.9, "acc_stderr,none": 0.01}}, "group_subtasks": {"arc_easy": []}})
    notes = []
    table = ranking.load_table(lm_eval_out, format="lm-eval", note=notes.append)
    d = table.model_index("org/D")
    assert np.isnan(table.values[d, table.names.index("mmlu_anatomy/acc")])
    assert any("org/D (4)" in n and "left empty (missing)" in n for n in notes)  # acc_norm and the 3 mmlu rows
    code, _, err = vnr(capsys, "import", "lm-eval", lm_eval_out, "-o", tmp_path / "res")
    assert code == 0 and "org/D (4)" in err


def test_lm_eval_duplicate_runs_keep_the_newest_or_are_refused(lm_eval_out, capsys, tmp_path):
    newer = write_lm_eval(lm_eval_out, "org/C", lm_eval_results("org/C", 0.95, 0.40, date=1716990000.0),
                          stamp="2024-05-29T12-00-00.000001")
    notes = []
    table = ranking.load_table(lm_eval_out, format="lm-eval", note=notes.append)
    assert table.values[table.model_index("org/C"), 0] == 0.95  # the newer file's arc_easy
    # one note for the re-run's four rows (arc_easy and the mmlu rows)
    assert any("tasks 'arc_easy', 'mmlu', 'mmlu_anatomy', 'mmlu_stem' of model 'org/C' appear 2 times: kept the "
               f"newest ({newer})" in n for n in notes)
    code, _, err = vnr(capsys, "import", "lm-eval", lm_eval_out, "-o", tmp_path / "res", "--on-duplicate", "error")
    assert code == 2 and err.count("\n") == 1 and "appears 2 times" in err and "--on-duplicate newest" in err
    assert not (tmp_path / "res").exists()  # nothing half-written


def test_lm_eval_directions_from_the_file_the_known_metrics_or_the_user(tmp_path, capsys):
    out = tmp_path / "out"
    extra = {"wikitext": {"alias": "wikitext", "word_perplexity,none": 20.0, "word_perplexity_stderr,none": "N/A",
                          "bits_per_byte,none": 0.9},
             "my_task": {"alias": "my_task", "toxicity,none": 0.1}}
    for model, ppl in (("org/A", 20.0), ("org/B", 30.0)):
        doc = lm_eval_results(model, 0.7, 0.5, higher_is_better=False, extra=extra)
        doc["results"]["wikitext"] = dict(extra["wikitext"], **{"word_perplexity,none": ppl})
        write_lm_eval(out, model, doc)
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1
    assert "1 metric has no stated direction" in err and "toxicity (task my_task" in err and "--higher toxicity " in err
    with pytest.raises(UserError, match=r"higher=\['toxicity'\] / lower="):
        ranking.load_table(out, format="lm-eval")
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "res", "--lower", "toxicity")
    assert code == 0, err
    crit = sidecar(tmp_path / "res")["criteria"]
    assert crit["my_task/toxicity"]["direction"] == "lower" and crit["my_task/toxicity"]["unit"] == "as reported"
    assert crit["wikitext/word_perplexity"]["direction"] == "lower"  # the documented metric table
    assert crit["wikitext/bits_per_byte"]["direction"] == "lower"
    assert crit["arc_easy/acc"]["direction"] == "higher"
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "r2", "--lower", "toxicity",
                       "--higher", "nonsense")
    assert code == 2 and "'nonsense', which is no metric or column" in err


def test_lm_eval_filters_are_named_in_the_column(tmp_path):
    out = tmp_path / "out"
    gsm = {"alias": "gsm8k", "exact_match,strict-match": 0.3, "exact_match_stderr,strict-match": 0.012,
           "exact_match,flexible-extract": 0.35, "exact_match_stderr,flexible-extract": 0.013}
    for model in ("org/A", "org/B"):
        write_lm_eval(out, model, lm_eval_results(model, 0.7, 0.5, extra={"gsm8k": gsm}))
    table = ranking.load_table(out, format="lm-eval", note=None)
    assert {"gsm8k/exact_match/strict-match", "gsm8k/exact_match/flexible-extract"} <= set(table.names)
    j = table.names.index("gsm8k/exact_match/strict-match")
    assert table.standard_errors[0, j] == 0.012


def test_lm_eval_bad_sources_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = vnr(capsys, "import", "lm-eval", empty, "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1 and "holds no lm-eval results_*.json" in err
    bad = tmp_path / "bad" / "m"
    bad.mkdir(parents=True)
    (bad / "results_2024-01-01T00-00-00.json").write_text('{"results": {"arc_easy": {"acc,none": 0.5,}}}')
    code, _, err = vnr(capsys, "import", "lm-eval", tmp_path / "bad", "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1 and "results_2024-01-01T00-00-00.json is not valid JSON" in err
    (bad / "results_2024-01-01T00-00-00.json").write_text('{"results": {"arc_easy": {"acc": 1.5, "acc_stderr": 0.01}}}')
    code, _, err = vnr(capsys, "import", "lm-eval", tmp_path / "bad", "-o", tmp_path / "res")  # 0.3 is read now
    assert code == 2 and err.count("\n") == 1 and "metric 'acc' is 1.5, outside its range [0, 1]" in err
    (bad / "results_2024-01-01T00-00-00.json").write_text('{"scores": {}}')
    code, _, err = vnr(capsys, "import", "lm-eval", tmp_path / "bad", "-o", tmp_path / "res")
    assert code == 2 and "no top-level 'results' mapping" in err
    code, _, err = vnr(capsys, "import", "lm-eval", tmp_path / "nowhere", "-o", tmp_path / "res")
    assert code == 2 and "no such file or directory" in err
    assert not (tmp_path / "res").exists()


def test_an_existing_import_is_kept_unless_forced(lm_eval_out, tmp_path, capsys):
    res = tmp_path / "res"
    assert vnr(capsys, "import", "lm-eval", lm_eval_out, "-o", res)[0] == 0
    code, _, err = vnr(capsys, "import", "lm-eval", lm_eval_out, "-o", res)
    assert code == 2 and "pass --force" in err
    # forced over by a source without standard errors: the stale stderr.csv goes too
    mteb = tmp_path / "mteb"
    write_mteb(mteb, "org__A", "rev1", "Banking77Classification", [0.8])
    assert vnr(capsys, "import", "mteb", mteb, "-o", res, "--force")[0] == 0
    assert not (res / "stderr.csv").exists() and "standard_errors" not in sidecar(res)
    assert not list(res.glob(".import-*"))  # the staging folder is gone


# ---------------------------------------------------------------------- uncertainty from the standard errors
def _two_models(se: float) -> tuple[ScoreTable, object]:
    table = ScoreTable(("A", "B"), (Criterion("acc"),), np.array([[0.50], [0.52]]),
                       standard_errors=np.array([[se], [se]]))
    return table, load_scenario(ANY_TABLE)


def test_bootstrap_from_standard_errors_matches_the_normal_difference():
    # P(B ranks first) = P(B - A > 0) with B - A ~ Normal(0.02, sqrt(2) * 0.01): Phi(1.414) = 0.9214
    table, scenario = _two_models(0.01)
    n = 4000
    probs = error_bootstrap(scenario, table, n, seed=1)["borda"]
    expected = 0.5 * (1 + math.erf(0.02 / math.sqrt(2 * 0.01**2) / math.sqrt(2)))
    assert expected == pytest.approx(0.9214, abs=1e-4)
    tolerance = 4 * math.sqrt(expected * (1 - expected) / n)  # 4 Monte-Carlo standard deviations (0.017)
    assert probs[1, 0] == pytest.approx(expected, abs=tolerance)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


def test_zero_standard_errors_give_exact_ranks():
    table, scenario = _two_models(0.0)
    probs = error_bootstrap(scenario, table, 50, seed=0)
    for p in probs.values():
        np.testing.assert_array_equal(p, [[0.0, 1.0], [1.0, 0.0]])


def test_bootstrap_says_which_ranked_scores_it_held_for_want_of_a_standard_error(tmp_path, capsys):
    """Issue 38: an empty stderr cell was held fixed in every draw without a word, so B (0.001 above A, its error
    unknown) came first in every draw: a certainty the source never gave. Held (lm-eval's "N/A" is common), and
    the output names it; a weight-0 column's unknown error ranks nothing and is not named."""
    values = np.array([[0.500, 1.0], [0.501, 2.0]])
    crits = (Criterion("acc"), Criterion("kwh", direction="lower"))
    table = ScoreTable(("A", "B"), crits, values, standard_errors=np.array([[0.01, 0.0], [np.nan, 0.0]]))
    table.to_csv(tmp_path / "matrix.csv")
    code, out, err = vnr(capsys, "rank", "--scenario", ANY_TABLE, "--results", tmp_path, "--bootstrap", "200")
    assert code == 0, err
    assert ("1 ranked score has no standard error (model 'B' on 'acc'): it was held at its value in every draw, so "
            "these probabilities treat it as exact; give it in the table's standard errors (0 where a score is "
            "exact), or read --intervals, which never separates a model on an unknown error.") in out
    from ranking.scenarios.bootstrap import unknown_errors_note

    known = ScoreTable(("A", "B"), crits, values, standard_errors=np.array([[0.01, np.nan], [0.01, np.nan]]))
    assert unknown_errors_note(known).startswith("2 ranked scores have no standard error (model 'A' on 'kwh', …)")
    shown = known.with_criteria([crits[0], Criterion("kwh", direction="lower", weight=0.0)])
    assert unknown_errors_note(shown) is None
    probs = error_bootstrap(load_scenario(ANY_TABLE), shown, 400, seed=0)["borda"]
    assert 0.4 < probs[1, 0] < 0.6  # Normal(0.001, 0.014): B first about half the time, not always


def test_rank_scenario_bootstrap_says_it_drew_from_the_standard_errors(tmp_path, capsys):
    table, _ = _two_models(0.01)
    table.to_csv(tmp_path / "matrix.csv")
    code, out, err = vnr(capsys, "rank", "--scenario", ANY_TABLE, "--results", tmp_path, "--bootstrap", "200")
    assert code == 0, err
    assert "Rank probabilities over 200 draws of each score from Normal(score, its standard error)" in out


# ---------------------------------------------------------------------- Open LLM Leaderboard
def test_open_llm_leaderboard_round_trips(tmp_path, capsys):
    path = write_open_llm(tmp_path / "contents.csv", [
        ("org/big", "bfloat16", 40.0, 70.0, 30.0, "2024-06-12"),
        ("org/mid", "bfloat16", 30.0, 7.0, 3.0, "2024-06-12"),
        ("org/small", "bfloat16", 10.0, 0.5, 0.2, "2024-06-10"),
        ("org/small", "bfloat16", 12.0, 0.5, 0.25, "2024-07-01"),  # the same model and precision, submitted later
    ])
    res = tmp_path / "res"
    code, _, err = vnr(capsys, "import", "open-llm-leaderboard", path, "-o", res)
    assert code == 0, err
    assert "'Average ⬆️' left out" in err and "'org/small' of the leaderboard appears 2 times" in err
    doc = sidecar(res)
    assert list(doc["criteria"]) == ["#Params (B)", "CO₂ cost (kg)", "IFEval Raw", "IFEval", "BBH Raw", "BBH",
                                     "MATH Lvl 5 Raw", "MATH Lvl 5", "GPQA Raw", "GPQA", "MUSR Raw", "MUSR",
                                     "MMLU-PRO Raw", "MMLU-PRO"]
    assert {k: doc["criteria"]["CO₂ cost (kg)"][k] for k in ("direction", "weight", "group", "unit", "source")} == {
        "direction": "lower", "weight": 1.0, "group": "efficiency", "unit": "kg CO2eq", "source": "Open LLM Leaderboard"}
    assert doc["criteria"]["#Params (B)"]["unit"] == "billion parameters"
    assert doc["criteria"]["BBH"]["direction"] == "higher" and doc["criteria"]["BBH"]["group"] == "performance"
    table = ranking.load_table(res)
    assert table.values[table.model_index("org/small"), table.names.index("BBH")] == 12.0  # the newest row
    assert table.standard_errors is None and not (res / "stderr.csv").exists()
    # performance only: the best benchmarks win
    assert borda_order(capsys, res, "--setting", "weighted", "--group-weights", "performance=1,efficiency=0") == [
        "org/big", "org/mid", "org/small"]
    # efficiency only: the other way round
    assert borda_order(capsys, res, "--setting", "weighted", "--group-weights", "performance=0,efficiency=1") == [
        "org/small", "org/mid", "org/big"]
    html = report_html(capsys, res, tmp_path / "report")
    assert "billion parameters" in html and "org/small" in html
    code, _, err = vnr(capsys, "import", "open-llm-leaderboard", path, "-o", tmp_path / "r2", "--on-duplicate", "error")
    assert code == 2 and "appears 2 times" in err


def test_open_llm_leaderboard_wrong_file(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("name,score\na,1\n")
    code, _, err = vnr(capsys, "import", "open-llm-leaderboard", tmp_path / "x.csv", "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1 and "no model column (fullname or eval_name or Model)" in err


# ---------------------------------------------------------------------- HELM
def test_helm_round_trips(tmp_path, capsys):
    path = tmp_path / "core_scenarios.json"
    path.write_text(json.dumps(helm_tables(), indent=2))
    res = tmp_path / "res"
    code, _, err = vnr(capsys, "import", "helm", path, "-o", res)
    assert code == 0, err
    assert "left out 2 win-rate column(s)" in err and "MMLU - # eval" in err
    doc = sidecar(res)
    assert doc["criteria"]["MMLU - EM"] == {"direction": "higher", "weight": 1.0, "group": "Accuracy", "unit": "EM",
                                            "source": "HELM core_scenarios", "benchmark": "MMLU", "task": "MMLU",
                                            "metric": "EM", "range": [0.0, 1.0]}
    eff = doc["criteria"]["MMLU - Observed inference time (s)"]
    # MMLU votes once, through its Accuracy-table column: its inference time is detail
    assert eff["direction"] == "lower" and eff["group"] == "Efficiency" and eff["detail"] is True
    table = ranking.load_table(res)
    assert np.isnan(table.values[table.model_index("Small Z (7B)"), table.names.index("NarrativeQA - F1")])
    assert borda_order(capsys, res)[0] == "GPT-X (0613)"  # best accuracy on both (inference time: the slowest)
    assert "Small Z (7B)" in report_html(capsys, res, tmp_path / "report")
    # a count column comes in when its direction is stated
    table = ranking.load_table(path, format="helm", higher=["MMLU - # eval"], note=None)
    assert table.criterion("MMLU - # eval").direction == "higher"


# ---------------------------------------------------------------------- MTEB
def test_mteb_round_trips(tmp_path, capsys):
    root = tmp_path / "results"
    for model, base in (("intfloat__e5-small", 0.8), ("org__tiny", 0.6)):
        write_mteb(root, model, "rev1", "Banking77Classification", [base])
        write_mteb(root, model, "rev1", "AmazonCounterfactualClassification", [base, base - 0.1, base + 0.04])
    write_mteb(root, "org__partial", "rev1", "Banking77Classification", [0.7])
    res = tmp_path / "res"
    code, _, err = vnr(capsys, "import", "mteb", root, "-o", res)
    assert code == 0, err
    table = ranking.load_table(res)
    assert table.models == ("intfloat/e5-small", "org/partial", "org/tiny")  # names from model_meta.json
    j = table.names.index("AmazonCounterfactualClassification")
    assert table.values[0, j] == pytest.approx(0.8)  # its English subset (the others are detail columns)
    assert table.values[0, table.names.index("AmazonCounterfactualClassification [fra]")] == pytest.approx(0.84)
    assert np.isnan(table.values[1, j]) and "org/partial (3)" in err
    crit = table.criterion("AmazonCounterfactualClassification")
    assert (crit.direction, crit.group, crit.unit) == ("higher", "performance", "main score (0-1)")
    assert crit.source == "MTEB main_score, test, eng"
    assert borda_order(capsys, res)[0] == "intfloat/e5-small"
    assert "e5-small" in report_html(capsys, res, tmp_path / "report")


def test_mteb_duplicate_revisions_and_bad_files(tmp_path, capsys):
    """Two revisions of a model are two rows (identity is model + revision; file times never decide)."""
    root = tmp_path / "results"
    write_mteb(root, "org__m", "rev1", "Banking77Classification", [0.5])
    new = write_mteb(root, "org__m", "rev2", "Banking77Classification", [0.6])
    notes = []
    table = ranking.load_table(root, format="mteb", note=notes.append)
    assert table.models == ("org/m (rev1)", "org/m (rev2)") and table.values[:, 0].tolist() == [0.5, 0.6]
    new.write_text("{not json")
    code, _, err = vnr(capsys, "import", "mteb", root, "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1 and "Banking77Classification.json is not valid JSON" in err


# ---------------------------------------------------------------------- codecarbon
def test_codecarbon_joins_lm_eval_as_efficiency(lm_eval_out, tmp_path, capsys):
    emissions = write_emissions(tmp_path / "emissions.csv", [
        ("eval-a", 3600.0, 0.5, 1.0), ("eval-a", 1800.0, 0.25, 0.5),  # two tracked runs of A: summed
        ("eval-b", 600.0, 0.1, 0.2), ("other", 10.0, 0.01, 0.01),
    ])
    res = tmp_path / "res"
    code, _, err = vnr(capsys, "import", "lm-eval", lm_eval_out, "-o", res, "--codecarbon", emissions,
                       "--map", "eval-a=org/A", "--map", "eval-b=org/B")
    assert code == 0, err
    notes = (res / "import-notes.txt").read_text()
    assert "left out the rows of other" in notes and "summed the rows of org/A" in notes
    assert "no emissions for org/C" in notes
    doc = sidecar(res)
    assert doc["criteria"]["energy_kwh"] == {"direction": "lower", "weight": 1.0, "group": "efficiency", "unit": "kWh",
                                             "source": "codecarbon energy_consumed", "benchmark": "energy_kwh",
                                             "metric": "energy_consumed", "range": [0.0, None]}
    assert doc["criteria"]["emissions_kg"]["unit"] == "kg CO2eq" and doc["criteria"]["duration_s"]["unit"] == "s"
    table = ranking.load_table(res)
    np.testing.assert_allclose(table.values[:, table.names.index("energy_kwh")], [1.5, 0.2, np.nan])
    np.testing.assert_allclose(table.values[:, table.names.index("duration_s")], [5400.0, 600.0, np.nan])
    assert np.isnan(table.standard_errors[:, table.names.index("energy_kwh")]).all()
    assert table.standard_errors[0, table.names.index("arc_easy/acc")] == 0.01
    # efficiency only: B used less energy than A
    assert borda_order(capsys, res, "--setting", "weighted", "--group-weights", "arc_easy=0,mmlu=0,efficiency=1",
                       "--keep-incomplete") == ["org/B", "org/A"]  # org/C has no efficiency score: unranked
    assert "energy_kwh" in report_html(capsys, res, tmp_path / "report")


def test_codecarbon_alone_and_with_a_yaml_map(tmp_path, capsys):
    emissions = write_emissions(tmp_path / "emissions.csv", [("p1", 100.0, 0.2, 0.4), ("p2", 50.0, 0.1, 0.2)])
    (tmp_path / "map.yaml").write_text("p1: org/one\np2: org/two\n")
    res = tmp_path / "res"
    code, _, err = vnr(capsys, "import", "codecarbon", emissions, "-o", res, "--map", tmp_path / "map.yaml")
    assert code == 0, err
    assert borda_order(capsys, res) == ["org/two", "org/one"]  # lower is better on every column
    assert "org/two" in report_html(capsys, res, tmp_path / "report")
    code, _, err = vnr(capsys, "import", "lm-eval", tmp_path, "-o", tmp_path / "r2", "--map", "a=b")
    assert code == 2 and "--map renames codecarbon projects" in err
    (tmp_path / "bad.csv").write_text("project_name,duration\np,1\n")
    code, _, err = vnr(capsys, "import", "codecarbon", tmp_path / "bad.csv", "-o", tmp_path / "r3")
    assert code == 2 and "not a codecarbon emissions.csv: no column 'energy_consumed'" in err


def test_unknown_format_in_the_api():
    with pytest.raises(UserError, match="unknown import format 'lm_eval'"):
        ranking.load_table("x", format="lm_eval")


def test_helm_table_given_twice(tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(helm_tables()[:1]))
    notes = []
    table = ranking.load_table([tmp_path / "a.json", tmp_path / "b.json"], format="helm", note=notes.append)
    assert table.names == ("MMLU - EM", "NarrativeQA - F1")  # the same measure twice is one column
    assert any(n.startswith("helm: 2 column(s) repeat a measure already imported") for n in notes)
    with pytest.raises(UserError, match="'MMLU - EM' appears 2 times"):
        ranking.load_table([tmp_path / "a.json", tmp_path / "b.json"], format="helm", on_duplicate="error")


@pytest.mark.parametrize("format, what", [("lm-eval", "holds no lm-eval results_*.json"),
                                          ("helm", "holds no HELM group JSON"),
                                          ("mteb", "holds no MTEB task results"),
                                          ("codecarbon", "holds no emissions.csv")])
def test_empty_folders_are_one_line_errors(format, what, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = vnr(capsys, "import", format, tmp_path / "empty", "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1 and what in err
    assert not (tmp_path / "res").exists()


def test_malformed_helm_json_names_the_file(tmp_path, capsys):
    (tmp_path / "core_scenarios.json").write_text('[{"title": "Accuracy", "header": [}]')
    code, _, err = vnr(capsys, "import", "helm", tmp_path / "core_scenarios.json", "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1 and "core_scenarios.json is not valid JSON" in err
    (tmp_path / "core_scenarios.json").write_text('{"rows": []}')
    code, _, err = vnr(capsys, "import", "helm", tmp_path / "core_scenarios.json", "-o", tmp_path / "res")
    assert code == 2 and "is not a HELM summary" in err


def test_open_llm_leaderboard_parquet_reads_like_the_csv(tmp_path):
    pytest.importorskip("pyarrow")
    import pandas as pd

    rows = [("org/big", "bfloat16", 40.0, 70.0, 30.0, "2024-06-12"), ("org/mid", "bfloat16", 30.0, 7.0, 3.0, "2024-06-12")]
    csv_path = write_open_llm(tmp_path / "contents.csv", rows)
    frame = pd.read_csv(csv_path)
    frame["Submission Date"] = pd.to_datetime(frame["Submission Date"])  # the dataset stores dates as timestamps
    frame.to_parquet(tmp_path / "contents.parquet")
    from_csv = ranking.load_table(csv_path, format="open-llm-leaderboard", note=None)
    from_parquet = ranking.load_table(tmp_path / "contents.parquet", format="open-llm-leaderboard", note=None)
    assert from_parquet.names == from_csv.names and from_parquet.models == from_csv.models
    np.testing.assert_allclose(from_parquet.values, from_csv.values)
