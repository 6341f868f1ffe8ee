"""lm-eval import, issue 27: one benchmark one vote, each score once, one setting per column, one model per
identity, impossible values refused, lm-eval 0.3 and 0.4.x files, foreign files skipped, notes summarised, board
parity. Fixtures copy the structure of real published files (lm-eval 0.4.3/0.4.8 folders of
jannalulu/lm-evaluation-harness-goose, lm-eval 0.3 files of EleutherAI/pythia's evals/), written here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from lm_eval_files import MMLU, SIZES, leaves, results_03, results_04, write_04
from vnr_cli import vnr

import ranking
from ranking.floor.errors import UserError
from ranking.importers.lm_eval import board_scores, group_parity
from ranking.votes import vote_weights

ROOT = Path(__file__).resolve().parents[1]
A = {"arc_easy": 0.80, "arc_easy_norm": 0.78, "gsm8k_strict": 0.50, "gsm8k_flex": 0.55,
     "mmlu_anatomy": 0.60, "mmlu_astronomy": 0.70, "mmlu_formal_logic": 0.40}
B = {k: round(v - 0.1, 2) for k, v in A.items()}
C = {k: round(v - 0.2, 2) for k, v in A.items()}


def load(path: Path, *, notes: list | None = None, **kw) -> ranking.ScoreTable:
    return ranking.load_table(path, format="lm-eval", note=(notes.append if notes is not None else None), **kw)


def shares(table: ranking.ScoreTable, vote: str = "benchmark") -> dict[str, float]:
    """Each benchmark's share of the vote (its columns' weights summed)."""
    w = vote_weights(table.criteria, vote)
    out: dict[str, float] = {}
    for c, x in zip(table.criteria, w):
        out[c.vote_unit] = out.get(c.vote_unit, 0.0) + float(x)
    return out


@pytest.fixture
def folder(tmp_path) -> Path:
    out = tmp_path / "out"
    for k, (model, scores) in enumerate((("org/A", A), ("org/B", B), ("org/C", C))):
        write_04(out, results_04(model, scores, date=1740964420.0 + k))
    return out


# ---------------------------------------------------------------------- one benchmark, one vote
def test_mmlu_votes_once_through_lm_evals_own_group_score(folder):
    table = load(folder)
    crit = {c.name: c for c in table.criteria}
    assert table.names == ("arc_easy/acc", "arc_easy/acc_norm", "gsm8k/exact_match/flexible-extract",
                           "gsm8k/exact_match/strict-match", "mmlu/acc", "mmlu_anatomy/acc", "mmlu_astronomy/acc",
                           "mmlu_formal_logic/acc", "mmlu_humanities/acc", "mmlu_stem/acc")
    assert crit["mmlu/acc"].aggregate and not crit["mmlu/acc"].detail and crit["mmlu/acc"].benchmark == "mmlu"
    assert crit["mmlu/acc"].settings == (("filter", "none"), ("n_shot", 0), ("precision", "bfloat16"),
                                         ("version", "2"))
    for t in ("mmlu_anatomy", "mmlu_astronomy", "mmlu_formal_logic"):
        assert crit[f"{t}/acc"].detail and crit[f"{t}/acc"].benchmark == "mmlu" and crit[f"{t}/acc"].weight == 1
    for g in ("mmlu_stem", "mmlu_humanities"):  # intermediate groups: never vote (their parts do under column)
        assert crit[f"{g}/acc"].detail and crit[f"{g}/acc"].weight == 0
    # a task with acc and acc_norm votes once (acc_norm), gsm8k once (strict-match)
    assert crit["arc_easy/acc"].detail and not crit["arc_easy/acc_norm"].detail
    assert crit["gsm8k/exact_match/flexible-extract"].detail and not crit["gsm8k/exact_match/strict-match"].detail
    assert crit["gsm8k/exact_match/strict-match"].settings == (
        ("filter", "strict-match"), ("n_shot", 0), ("precision", "bfloat16"), ("version", "1.0"))
    assert crit["arc_easy/acc"].range == (0.0, 1.0) and crit["arc_easy/acc"].metric == "acc"
    assert shares(table) == {"arc_easy": 1.0, "gsm8k": 1.0, "mmlu": 1.0}
    # per column: the subjects and both metrics vote, the group rows give way to them
    assert shares(table, "column") == {"arc_easy": 2.0, "gsm8k": 2.0, "mmlu": 3.0}


def test_adding_subtasks_or_metrics_never_changes_a_benchmarks_share(tmp_path):
    """Property (issue 27 'done when'): whatever MMLU's number of subjects or a task's number of metrics."""
    for k, n_extra in enumerate((0, 1, 5, 20)):
        hierarchy = {"mmlu": ["mmlu_stem"], "mmlu_stem": [f"mmlu_s{i}" for i in range(n_extra + 1)]}
        out = tmp_path / f"o{k}"
        for m, level in (("org/A", 0.6), ("org/B", 0.5)):
            subjects = {f"mmlu_s{i}": {"alias": f"s{i}", "acc,none": level, "acc_stderr,none": 0.01}
                        for i in range(n_extra + 1)}
            metrics = {"alias": "t", **{f"m{i},none": level for i in range(n_extra + 1)}}
            doc = results_04(m, {"arc_easy": level, "arc_easy_norm": level}, extra={**subjects, "t": metrics},
                             hib={"t": {f"m{i}": True for i in range(n_extra + 1)}})
            doc["results"]["mmlu"] = {"acc,none": level, "acc_stderr,none": 0.01, "alias": "mmlu"}
            doc["results"]["mmlu_stem"] = {"acc,none": level, "acc_stderr,none": 0.01, "alias": " - stem"}
            doc["group_subtasks"] = {"arc_easy": [], "t": [], **hierarchy}
            write_04(out, doc)
        assert shares(load(out)) == pytest.approx({"arc_easy": 1.0, "mmlu": 1.0, "t": 1.0})


def test_group_rows_are_lm_evals_own_and_the_board_is_their_mean(folder):
    """Parity: each group row the files carry is the n-samples-weighted mean of its subjects (lm-eval's
    aggregate_subtask_metrics); the board is the mean of the voting benchmark scores."""
    doc = json.loads(next((folder / "org__A").glob("*.json")).read_text())
    parity = group_parity(doc)
    assert sorted((g, k) for g, k, _, _ in parity) == [("mmlu", "acc,none"), ("mmlu_humanities", "acc,none"),
                                                       ("mmlu_stem", "acc,none")]
    for _, _, given, recomputed in parity:
        assert recomputed == pytest.approx(given, abs=1e-12)
    by_hand = (0.60 * 135 + 0.70 * 152 + 0.40 * 126) / (135 + 152 + 126)
    assert doc["results"]["mmlu"]["acc,none"] == pytest.approx(by_hand, abs=1e-15)
    table = load(folder)
    expected = [np.mean([d["results"]["mmlu"]["acc,none"], d["results"]["arc_easy"]["acc_norm,none"],
                         d["results"]["gsm8k"]["exact_match,strict-match"]])
                for d in (json.loads(next((folder / f"org__{m}").glob("*.json")).read_text()) for m in "ABC")]
    np.testing.assert_allclose(board_scores(table), expected, rtol=0, atol=1e-12)
    assert table.board == "lm-eval"


def test_a_model_that_ran_the_subjects_without_the_group_row_votes_with_lm_evals_formula(folder, tmp_path):
    doc = results_04("org/D", A, mmlu=False)  # the subjects run one by one: no group row
    doc["n-samples"] = {t: {"original": SIZES[t], "effective": SIZES[t]} for t in SIZES if t in doc["results"]}
    write_04(folder, doc)
    notes: list[str] = []
    table = load(folder, notes=notes)
    a, d = table.model_index("org/A"), table.model_index("org/D")
    j = table.names.index("mmlu/acc")
    assert table.values[d, j] == pytest.approx(table.values[a, j], abs=1e-15)  # the same subjects, the same score
    assert table.standard_errors[d, j] == pytest.approx(table.standard_errors[a, j], abs=1e-15)
    assert any("ran the subtasks of 'mmlu' without its group row" in n for n in notes)


# ---------------------------------------------------------------------- each score once, one setting per column
def test_a_slash_in_a_metric_name_never_merges_two_metrics(tmp_path):
    out = tmp_path / "o"
    for m in ("org/A", "org/B"):
        t = {"alias": "t", "rouge/f,none": 0.3, "rouge,f": 0.4}
        write_04(out, results_04(m, {"arc_easy": 0.5, "arc_easy_norm": 0.5}, extra={"t": t},
                                 hib={"t": {"rouge/f": True, "rouge": True}}))
    table = load(out)
    assert {"t/rouge%2Ff", "t/rouge/f"} <= set(table.names)
    assert table.values[0, table.names.index("t/rouge%2Ff")] == 0.3
    assert table.values[0, table.names.index("t/rouge/f")] == 0.4


def test_other_n_shot_runs_are_their_own_columns_and_never_dropped(folder, capsys, tmp_path):
    """Real class: results-0.4.3 of lm-evaluation-harness-goose holds one model's 5-shot MMLU beside the others'
    0-shot MMLU. Before, the 0-shot and 5-shot runs of one model were 'duplicates' and the older was dropped."""
    write_04(folder, results_04("org/A", {k: v + 0.05 for k, v in A.items()}, n_shot=5, date=1740999999.0),
             stamp="2025-03-04T00-00-00.000000")
    notes: list[str] = []
    table = load(folder, notes=notes)
    assert table.models == ("org/A", "org/B", "org/C")
    assert "mmlu/acc@0-shot" in table.names and "mmlu/acc@5-shot" in table.names
    a = table.model_index("org/A")
    assert table.values[a, table.names.index("arc_easy/acc@0-shot")] == 0.80  # the older 0-shot run is kept
    assert table.values[a, table.names.index("arc_easy/acc@5-shot")] == pytest.approx(0.85)
    assert np.isnan(table.values[table.model_index("org/B"), table.names.index("mmlu/acc@5-shot")])
    assert shares(table)["mmlu"] == pytest.approx(1.0)  # the two settings share MMLU's one vote
    assert any(n.startswith("lm-eval: 8 task(s) (arc_easy, gsm8k, mmlu, … (8 in all)) were run with different "
                            "settings, one column per setting (sharing the task's vote) — n_shot=0: org/A, org/B, "
                            "org/C; n_shot=5: org/A") for n in notes), notes
    code, _, err = vnr(capsys, "import", "lm-eval", folder, "-o", tmp_path / "res")
    assert code == 0 and "changes the ranking — settings (2)" in err


def test_identity_is_the_model_name_and_its_model_args(tmp_path):
    """Real class: two RWKV runs of one local path with another tmix_backend (goose's results/RWKV-block__*)."""
    out = tmp_path / "o"
    path = "/workspace/RWKV-block/test/v7_goose/.hf_build/v7-1B5-world/"
    for backend, acc in (("fla", 0.6866), ("pytorch", 0.6856)):
        doc = results_04(path, {}, mmlu=False, extra={"lambada_openai": {
            "alias": "lambada_openai", "perplexity,none": 4.25, "perplexity_stderr,none": 0.09, "acc,none": acc,
            "acc_stderr,none": 0.0065}},
            model_args=f"pretrained={path},trust_remote_code=True,add_bos_token=True,tmix_backend={backend}")
        doc["model_name_sanitized"] = f"RWKV-block__rwkv7-1.5B-world-{backend}"
        write_04(out, doc)
    # how a model was run (parallelize, batch size, TRUE/True) does not make another model
    for args in ("pretrained=org/m,parallelize=True", "pretrained=org/m,trust_remote_code=TRUE"):
        doc = results_04("org/m", {}, mmlu=False, model_args=args, extra={"lambada_openai": {
            "alias": "lambada_openai", "acc,none": 0.5, "perplexity,none": 9.0}})
        doc["model_name_sanitized"] = args.replace("=", "_").replace(",", "_").replace("/", "_")
        write_04(out, doc)
    notes: list[str] = []
    table = load(out, notes=notes)
    assert table.models == ("v7-1B5-world (tmix_backend=fla)", "v7-1B5-world (tmix_backend=pytorch)", "org/m")
    assert table.values[:2, table.names.index("lambada_openai/acc")].tolist() == [0.6866, 0.6856]
    assert table.criterion("lambada_openai/perplexity").detail  # acc is LAMBADA's primary metric
    assert "lm-eval: local paths shown short: v7-1B5-world = /workspace/RWKV-block/test/v7_goose/.hf_build/" \
           "v7-1B5-world" in notes


def test_newest_comes_from_the_files_date_never_its_modification_time(folder, tmp_path):
    old = next((folder / "org__C").glob("*.json"))
    newer = write_04(folder, results_04("org/C", {**C, "arc_easy_norm": 0.9}, date=1741999999.0),
                     stamp="2025-03-15T00-00-00.000000")
    os.utime(newer, (1_000_000_000, 1_000_000_000))  # a checkout may leave any file time
    os.utime(old, (2_000_000_000, 2_000_000_000))
    notes: list[str] = []
    table = load(folder, notes=notes)
    assert table.values[table.model_index("org/C"), table.names.index("arc_easy/acc_norm")] == 0.9
    assert len([n for n in notes if "appear 2 times: kept the newest" in n]) == 1  # one note for the rerun's rows
    # no date and no time stamp in the name: re-runs that differ cannot be ordered
    for name, level in (("a.json", 0.5), ("b.json", 0.6)):
        doc = results_03("pretrained=org/x", {"piqa": {"acc": level}})
        (tmp_path / "z").mkdir(exist_ok=True)
        (tmp_path / "z" / name).write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"appears 2 times with different scores and .*a.json, .*b.json carries no "
                                        r"date"):
        load(tmp_path / "z")


# ---------------------------------------------------------------------- impossible values
def test_impossible_values_are_refused_or_missing_on_request(tmp_path, capsys):
    out = tmp_path / "o"
    write_04(out, results_04("org/A", {**A, "arc_easy": 1.2}))
    write_04(out, results_04("org/B", B))
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1
    assert "model 'org/A', task 'arc_easy', metric 'acc,none' is 1.2, outside its range [0, 1]" in err
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "res", "--out-of-range", "missing")
    assert code == 0 and "outside its range [0, 1]: imported as missing" in err
    assert np.isnan(ranking.load_table(tmp_path / "res").values[0, 0])
    bad = results_04("org/B", B)
    bad["results"]["arc_easy"]["acc_stderr,none"] = -0.01
    write_04(out, bad)
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "r2", "--out-of-range", "missing")
    assert code == 2 and "standard error 'acc_stderr,none' is -0.01: a standard error is never negative" in err


def test_a_file_that_flips_a_well_known_metric_needs_it_confirmed(capsys, tmp_path):
    folder = tmp_path / "o"
    for model, scores in (("org/A", A), ("org/D", B)):
        write_04(folder, results_04(model, scores, hib={"arc_easy": {"acc": False, "acc_norm": False}}))
    with pytest.raises(UserError, match=r"says 'acc' of task 'arc_easy' is lower-is-better, but acc is documented "
                                        r"higher-is-better: pass --lower acc to confirm the file, or --higher acc"):
        load(folder)
    code, _, err = vnr(capsys, "import", "lm-eval", folder, "-o", tmp_path / "res", "--higher", "acc,acc_norm")
    assert code == 0, err
    assert ranking.load_table(tmp_path / "res").criterion("arc_easy/acc").direction == "higher"


def test_ruler_placeholder_minus_one_is_missing(tmp_path):
    """Real class: RULER's niah tasks write -1 for a context length they had no sample of."""
    out = tmp_path / "o"
    for m, found in (("org/A", 0.998), ("org/B", 0.95)):
        write_04(out, results_04(m, {}, mmlu=False, extra={"niah_single_1": {
            "alias": "niah_single_1", "4096,none": -1, "4096_stderr,none": "N/A", "1024,none": found,
            "1024_stderr,none": 0.002}}, hib={"niah_single_1": {"4096": True}}))
    notes: list[str] = []
    table = load(out, notes=notes)
    assert table.names == ("niah_single_1/1024",)  # 4096 has no score at all: left out
    assert table.criterion("niah_single_1/1024").direction == "higher"
    assert any("2 RULER score(s) of -1 (no sample of that context length) imported as missing" in n for n in notes)


# ---------------------------------------------------------------------- lm-eval 0.3, foreign files
def test_lm_eval_03_files_of_any_name_are_read(tmp_path, capsys):
    """Pythia's evals/: 0.3 files named <size>_step<N>.json, zero-shot/ and five-shot/ folders, the revision in the
    model args; MMLU's 57 hendrycksTest-* tasks have no group row in 0.3: they share one vote."""
    out = tmp_path / "pythia-160m"
    for step, level in ((13000, 0.4), (143000, 0.5)):
        for shots, folder in ((0, "zero-shot"), (5, "five-shot")):
            scores = {"arc_easy": {"acc": level, "acc_norm": level - 0.05}, "lambada_openai": {"ppl": 30.0 - level,
                                                                                               "acc": level},
                      "crows_pairs_english": {"likelihood_difference": 3.4, "pct_stereotype": 0.56},
                      "crows_pairs_english_age": {"likelihood_difference": 2.8, "pct_stereotype": 0.49},
                      **{f"hendrycksTest-{s}": {"acc": level, "acc_norm": level} for s in ("anatomy", "virology")}}
            (out / folder).mkdir(parents=True, exist_ok=True)
            (out / folder / f"160m{'-5shot' if shots else ''}_step{step}.json").write_text(json.dumps(
                results_03(f"pretrained=EleutherAI/pythia-v1.1-160m,revision=step{step}", scores, shots)))
    notes: list[str] = []
    table = load(out, notes=notes)
    assert table.models == ("EleutherAI/pythia-v1.1-160m (revision=step13000)",
                            "EleutherAI/pythia-v1.1-160m (revision=step143000)")
    crit = {c.name: c for c in table.criteria}
    assert crit["hendrycksTest-anatomy/acc@0-shot"].benchmark == "hendrycksTest"
    assert not crit["hendrycksTest-anatomy/acc@0-shot"].detail and crit["hendrycksTest-anatomy/acc_norm@0-shot"].detail
    assert crit["crows_pairs_english/pct_stereotype@0-shot"].aggregate  # the whole set, its subsets are detail
    assert crit["crows_pairs_english_age/pct_stereotype@0-shot"].detail
    assert crit["lambada_openai/ppl@5-shot"].direction == "lower" and crit["lambada_openai/ppl@5-shot"].detail
    assert crit["arc_easy/acc_norm@5-shot"].settings == (("filter", "none"), ("n_shot", 5), ("version", "0"))
    assert shares(table) == pytest.approx({"arc_easy": 1.0, "lambada_openai": 1.0, "crows_pairs_english": 1.0,
                                           "hendrycksTest": 1.0})
    assert any("in lm-eval 0.3's format" in n for n in notes)
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "res")
    assert code == 0, err


def test_a_foreign_json_file_in_a_folder_is_skipped_and_named(folder, capsys, tmp_path):
    """Real classes: Pythia's winobias files (a BigScience-fork result list), goose's bare results mappings."""
    (folder / "winobias").mkdir()
    (folder / "winobias" / "eval_results_02-16-2023-00-59-19.json").write_text(json.dumps(
        {"results": [{"task_name": "wino_bias_type1_pro", "prompt_name": "p", "em": 0.45}], "config": {}}))
    (folder / "org__A" / "results_2025-03-04T10-35-04.json").write_text(json.dumps(
        {"lambada_openai": {"acc,none": 0.4, "alias": "lambada_openai"}}))
    (folder / "broken.json").write_text('{"results": ')
    notes: list[str] = []
    table = load(folder, notes=notes)
    assert table.models == ("org/A", "org/B", "org/C")
    skipped = [n for n in notes if n.startswith("lm-eval: skipped 3 file(s) that are no lm-eval results file")]
    assert len(skipped) == 1 and "broken.json" in skipped[0]
    with pytest.raises(UserError, match="broken.json is not valid JSON"):  # named by the user: refused
        load(folder / "broken.json")


# ---------------------------------------------------------------------- notes
def test_an_86_file_folder_gives_a_few_notes(tmp_path, capsys):
    out = tmp_path / "o"
    for k in range(86):  # 2 models, 43 re-runs each (a sweep of one task), as goose's fla-hub__rwkv7-1.5B-world
        model = f"org/m{k % 2}"
        doc = results_04(model, {}, mmlu=False, date=1740000000.0 + k, extra={"lambada_openai": {
            "alias": "lambada_openai", "acc,none": 0.5 + k / 1000, "perplexity,none": 9.0}})
        write_04(out, doc, stamp=f"2025-02-24T{k // 60:02d}-{k % 60:02d}-00.000000")
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "res")
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("vnr import: note:")]
    assert len(lines) == 1 and "duplicate (1)" in lines[0]
    assert "appear 43 times: kept the newest" in (tmp_path / "res" / "import-notes.txt").read_text()


# ---------------------------------------------------------------------- first hour
def test_the_readme_example_imports_the_shipped_samples_and_ranks_them(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    res = tmp_path / "imported" / "lm-eval"
    code, out, err = vnr(capsys, "import", "lm-eval", "configs/import_samples/lm-eval/", "-o", res)
    assert code == 0, err
    assert "3 models × 10 criteria" in out
    code, out, err = vnr(capsys, "rank", res, "--board")
    assert code == 0, err
    assert "votes: one per benchmark (3 benchmarks from 10 columns" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("org/")]
    assert [r[0] for r in rows[:3]] == ["org/large-lm", "org/medium-lm", "org/small-lm"]
    assert rows[3][-2:] == ["0.6582", "1"]  # the board: the mean of MMLU's group row, ARC's acc_norm, gsm8k strict


def test_the_sample_group_rows_are_lm_evals_formula():
    for path in sorted((ROOT / "configs" / "import_samples" / "lm-eval").rglob("*.json")):
        doc = json.loads(path.read_text())
        for _, _, given, recomputed in group_parity(doc):
            assert recomputed == pytest.approx(given, abs=1e-12)
        assert set(leaves("mmlu", MMLU)) <= set(doc["results"])


# ---------------------------------------------------------------------- issue 36: a group's settings are its runs'
def test_a_groups_n_shot_is_its_subtasks_so_0_and_5_shot_mmlu_never_share_a_column(tmp_path, capsys):
    """lm-eval writes n-shot 0 for MMLU whatever its subjects ran with. Models A and B ran MMLU 0-shot and (later)
    5-shot, C only 5-shot: the 5-shot group rows are the 5-shot column, each model's 0-shot run is kept beside
    it (never an 'older duplicate'), and a column's vote and its subtasks come from one run."""
    out = tmp_path / "o"
    for k, (model, scores) in enumerate((("org/A", A), ("org/B", B), ("org/C", C))):
        five = {t: v + 0.05 for t, v in scores.items()}
        if model != "org/C":
            write_04(out, results_04(model, scores, n_shot=0, date=1740964420.0 + k), stamp=f"2025-03-0{k + 1}T00-00-00")
        write_04(out, results_04(model, five, n_shot=5, date=1741964420.0 + k), stamp=f"2025-03-1{k + 1}T00-00-00")
    doc = json.loads(next((out / "org__C").glob("*.json")).read_text())
    assert doc["n-shot"]["mmlu"] == 0 and doc["n-shot"]["mmlu_anatomy"] == 5  # the structure of lm-eval's files
    notes: list[str] = []
    table = load(out, notes=notes)
    crit = {c.name: c for c in table.criteria}
    assert dict(crit["mmlu/acc@5-shot"].settings)["n_shot"] == 5
    assert dict(crit["mmlu/acc@0-shot"].settings)["n_shot"] == 0
    assert not any("duplicate" in n or "appear" in n for n in notes), notes
    assert any("group row(s) take the n-shot their subtasks ran with" in n and "mmlu (5-shot, not 0)" in n
               for n in notes), notes
    for model, scores in (("org/A", A), ("org/B", B)):
        i = table.model_index(model)
        zero = (scores["mmlu_anatomy"] * 135 + scores["mmlu_astronomy"] * 152 + scores["mmlu_formal_logic"] * 126) / 413
        assert table.values[i, table.names.index("mmlu/acc@0-shot")] == pytest.approx(zero, abs=1e-12)
        assert table.values[i, table.names.index("mmlu/acc@5-shot")] == pytest.approx(zero + 0.05, abs=1e-12)
        assert table.values[i, table.names.index("mmlu_anatomy/acc@0-shot")] == scores["mmlu_anatomy"]
    c = table.model_index("org/C")
    assert np.isnan(table.values[c, table.names.index("mmlu/acc@0-shot")])
    assert crit["mmlu/acc@5-shot"].aggregate and crit["mmlu/acc@0-shot"].aggregate


def test_directions_stated_only_in_configs_metric_list_are_read_and_every_unstated_metric_is_named_once(
        tmp_path, capsys):
    """Some lm-eval 0.4 versions state higher_is_better only inside configs.<task>.metric_list (a task's
    metric_list entries: metric, aggregation, higher_is_better); a group's metric takes its subtasks' direction.
    Metrics nobody states are all named in one refusal with the one option that imports them."""
    out = tmp_path / "o"
    for k, (model, level) in enumerate((("org/A", 0.6), ("org/B", 0.4))):
        extra = {"sumtask": {"alias": "sumtask", "coherence,none": level, "brevity_penalty,none": 1 - level},
                 "gen_a": {"alias": "gen_a", "novelty,none": level}, "gen_b": {"alias": "gen_b", "novelty,none": level},
                 "gens": {"alias": "gens", "novelty,none": level},
                 "odd": {"alias": "odd", "zeta,none": level, "omega,none": level}}
        doc = results_04(model, {"arc_easy": level, "arc_easy_norm": level}, extra=extra, date=1740964420.0 + k)
        doc["group_subtasks"] |= {"gens": ["gen_a", "gen_b"]}
        for t in extra:
            doc["higher_is_better"].pop(t, None)
        doc["configs"]["sumtask"]["metric_list"] = [
            {"metric": "coherence", "aggregation": "mean", "higher_is_better": True},
            {"metric": "brevity_penalty", "aggregation": "mean", "higher_is_better": False}]
        for t in ("gen_a", "gen_b"):
            doc["configs"][t]["metric_list"] = [{"metric": "novelty", "aggregation": "mean", "higher_is_better": True}]
        write_04(out, doc)
    code, _, err = vnr(capsys, "import", "lm-eval", out, "-o", tmp_path / "res")
    assert code == 2 and err.count("\n") == 1
    assert "2 metrics have no stated direction" in err and "omega (task odd" in err and "zeta (task odd" in err
    assert "--higher omega,zeta " in err and "coherence" not in err and "novelty" not in err
    table = load(out, higher=["omega"], lower=["zeta"])
    crit = {c.name: c for c in table.criteria}
    assert crit["sumtask/coherence"].direction == "higher" and crit["sumtask/brevity_penalty"].direction == "lower"
    assert crit["gens/novelty"].direction == "higher" and crit["odd/zeta"].direction == "lower"


# ---------------------------------------------------------------------- issue 36: one scale per vote
def truthfulqa(level: float, group: str = "truthfulqa") -> dict[str, dict]:
    """TruthfulQA as lm-eval 0.4.0-0.4.2 writes it: mc1 and mc2 report ``acc`` (0-1), the generative task BLEU and
    ROUGE (max 0-100, acc 0-1, diff -100..100); the group row carries the mean ``acc`` beside all 12 of them."""
    gen = {f"{s}_{k},none": (40 * level if k == "max" else level if k == "acc" else 10 * level - 5)
           for s in ("bleu", "rouge1", "rouge2", "rougeL") for k in ("max", "acc", "diff")}
    mc1, mc2 = {"acc,none": level - 0.1, "acc_stderr,none": 0.015}, {"acc,none": level, "acc_stderr,none": 0.014}
    row = {"alias": group, "acc,none": (mc1["acc,none"] + mc2["acc,none"]) / 2, "acc_stderr,none": 0.01, **gen}
    return {group: row, f"{group}_gen": {"alias": " - gen", **gen}, f"{group}_mc1": {"alias": " - mc1", **mc1},
            f"{group}_mc2": {"alias": " - mc2", **mc2}}


def write_truthfulqa(out: Path, group: str = "truthfulqa") -> None:
    for k, (model, level) in enumerate((("org/A", 0.55), ("org/B", 0.45), ("org/C", 0.35))):
        doc = results_04(model, {"arc_easy": 0.5 + k / 10, "arc_easy_norm": 0.45 + k / 10},
                         extra=truthfulqa(level, group), date=1740964420.0 + k)
        doc["group_subtasks"] |= {group: [f"{group}_gen", f"{group}_mc1", f"{group}_mc2"]}
        write_04(out, doc)


def test_truthfulqa_votes_through_mc2_and_its_bleu_rouge_never_share_the_vote(tmp_path, capsys):
    """Real class: lm-eval 0.4 files of the Open LLM Leaderboard suite. Before, 13 columns (acc and the generative
    task's BLEU/ROUGE, 0-100) shared TruthfulQA's vote and --board averaged them with proportions."""
    write_truthfulqa(tmp_path / "o")
    notes: list[str] = []
    table = load(tmp_path / "o", notes=notes)
    w = vote_weights(table.criteria, "benchmark")
    voting = {c.name: float(x) for c, x in zip(table.criteria, w) if x > 0}
    assert voting == {"arc_easy/acc_norm": 1.0, "truthfulqa_mc2/acc": 1.0}
    assert sum(c.benchmark == "truthfulqa" for c in table.criteria) == 13 + 1 + 12 + 1
    assert any("'truthfulqa' votes through 'truthfulqa_mc2'" in n for n in notes)
    np.testing.assert_allclose(board_scores(table), [(0.45 + 0.55) / 2, (0.55 + 0.45) / 2, (0.65 + 0.35) / 2],
                               atol=1e-12)
    code, out, err = vnr(capsys, "import", "lm-eval", tmp_path / "o", "-o", tmp_path / "res")
    assert code == 0, err
    code, out, err = vnr(capsys, "rank", tmp_path / "res", "--board", "--format", "csv")
    assert code == 0, err


def test_a_group_row_votes_through_the_metric_most_of_its_subtasks_report(tmp_path):
    """The same structure under another name (no suite convention): the group row's acc (of two subtasks) votes,
    the BLEU/ROUGE it carries from its one generative subtask are details."""
    write_truthfulqa(tmp_path / "o", group="tqa")
    table = load(tmp_path / "o")
    w = vote_weights(table.criteria, "benchmark")
    assert {c.name for c, x in zip(table.criteria, w) if x > 0} == {"arc_easy/acc_norm", "tqa/acc"}
    crit = {c.name: c for c in table.criteria}
    assert crit["tqa/acc"].aggregate and crit["tqa/bleu_max"].detail and crit["tqa/bleu_max"].unit == "BLEU (0-100)"


def test_a_vote_through_columns_of_different_units_is_stated_and_the_board_refuses_it(tmp_path):
    out = tmp_path / "o"
    for k, (model, level) in enumerate((("org/A", 0.6), ("org/B", 0.4))):
        extra = {"qa": {"alias": "qa", "acc,none": level, "bleu_max,none": 50 * level},
                 "qa_mc": {"alias": "qa_mc", "acc,none": level}, "qa_gen": {"alias": "qa_gen", "bleu_max,none": 50 * level}}
        doc = results_04(model, {"arc_easy": level, "arc_easy_norm": level}, extra=extra, date=1740964420.0 + k)
        doc["group_subtasks"] |= {"qa": ["qa_mc", "qa_gen"]}
        write_04(out, doc)
    notes: list[str] = []
    table = load(out, notes=notes)
    assert any("'qa' votes through columns of different units (BLEU (0-100), proportion (0-1))" in n for n in notes)
    with pytest.raises(UserError, match="benchmark 'qa' votes through columns of different units"):
        board_scores(table)


# ---------------------------------------------------------------------- issue 36: lm-eval 0.3 suites, identities
def test_03_suites_vote_once_per_benchmark_and_unknown_families_are_stated(tmp_path):
    """0.3 files of AGIEval and BIG-Bench tasks (the Nous suite's structure): each family is one benchmark; tasks
    sharing a prefix of no known family (arc_easy, arc_challenge) vote alone, named in a note."""
    out = tmp_path / "o"
    out.mkdir()
    for model, level in (("org/A", 0.6), ("org/B", 0.4)):
        tasks = {**{f"agieval_{t}": {"acc": level, "acc_norm": level} for t in ("aqua_rat", "logiqa_en", "lsat_ar")},
                 **{f"bigbench_{t}": {"multiple_choice_grade": level} for t in ("causal_judgement", "navigate")},
                 "arc_easy": {"acc": level, "acc_norm": level}, "arc_challenge": {"acc": level, "acc_norm": level}}
        (out / f"{model.replace('/', '_')}.json").write_text(json.dumps(results_03(f"pretrained={model}", tasks)))
    notes: list[str] = []
    table = load(out, notes=notes, higher=["multiple_choice_grade"])
    assert shares(table) == pytest.approx({"agieval": 1.0, "bigbench": 1.0, "arc_easy": 1.0, "arc_challenge": 1.0})
    assert any("no known task family" in n and "arc: arc_challenge, arc_easy" in n for n in notes)


def test_model_args_that_change_nothing_never_split_a_model(tmp_path):
    """One model run under 0.3 (trust_remote_code=False) and 0.4 (dtype=auto), another under 0.4 without dtype:
    one row each, no suffix."""
    out = tmp_path / "o"
    write_04(out, results_04("org/A", A, model_args="pretrained=org/A,dtype=auto,trust_remote_code=True"))
    write_04(out, results_04("org/B", B, model_args="pretrained=org/B"))
    (out / "old.json").write_text(json.dumps(results_03("pretrained=org/A,trust_remote_code=False",
                                                        {"piqa": {"acc": 0.7, "acc_norm": 0.71}})))
    table = load(out)
    assert table.models == ("org/A", "org/B")
    assert table.values[0, table.names.index("piqa/acc_norm")] == 0.71
