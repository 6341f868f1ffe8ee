"""Bad input to the importers (`vnr import`): each is exit 2 with one line that says what to fix, never a
traceback and never a silently wrong table; values that are there but are no number are refused, values the
source leaves out are missing scores (with a note)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from vnr_cli import vnr

import ranking
from harness.cli import main
from ranking.floor.errors import UserError
from ranking.importers.common import Options, pick_newest

BIG = int("1" + "0" * 400)  # beyond a float's range
DEEP = "[" * 100000 + "]" * 100000  # deeper than Python's recursion limit


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the paths in the messages are relative, as a user types them


def refused(capsys, *args: object) -> str:
    """The one-line error of `vnr import ARGS -o bad` (exit 2, nothing written)."""
    code, _, err = vnr(capsys, "import", *args, "-o", "bad")
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vnr import: error: "), err
    assert not Path("bad").exists()
    return lines[-1].removeprefix("vnr import: error: ")


def imported(capsys, *args: object) -> tuple[ranking.ScoreTable, list[str]]:
    """The table `vnr import ARGS -o res` wrote, and its notes."""
    code, _, err = vnr(capsys, "import", *args, "-o", "res", "--force")
    assert code == 0, err
    # every note is in the output's notes file (the terminal shows a summary of them)
    notes = Path("res", "import-notes.txt")
    lines = notes.read_text().splitlines() if notes.exists() else []
    return ranking.load_table("res"), [re.sub(r"^\[[^]]*\] ", "", line) for line in lines]


def write(path: str, text: str) -> str:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
    return path


# ---------------------------------------------------------------------- shared
@pytest.mark.parametrize("format, path, what", [
    ("lm-eval", "o/A/results_x.json", "lm-eval results file"),
    ("helm", "core.json", "HELM summary"),
    ("mteb", "m/A/r/T.json", "MTEB task result"),
])
def test_deeply_nested_json_is_one_line(format, path, what, capsys):
    write(path, DEEP)
    assert refused(capsys, format, path.split("/")[0]) == (
        f"{what} {path} is nested too deeply to read (thousands of levels of [ or {{): is it the file the tool wrote?")


def test_an_integer_of_more_than_4300_digits_is_one_line(capsys):
    write("o/A/results_x.json", '{"results": {"t": {"acc,none": 1' + "0" * 5000 + "}}}")
    assert refused(capsys, "lm-eval", "o").startswith("lm-eval results file o/A/results_x.json is not valid JSON "
                                                      "(Exceeds the limit (4300 digits)")


def test_several_newest_with_different_scores_are_no_newest():
    notes: list[str] = []
    options = Options(sink=notes.append)
    with pytest.raises(UserError) as err:
        pick_newest([(2, "a", 0.5), (1, "b", 0.7), (2, "c", 0.6)], "task t of m", options)
    assert str(err.value) == ("task t of m appears 3 times; the newest 2 with the same date but different scores "
                              "(a, c), so none is the newest: keep one of them")
    assert pick_newest([(2, "a", 0.5), (2, "c", 0.5)], "task t of m", options) == 0.5
    assert notes == ["task t of m appears 2 times: kept the newest (c; a has the same date and the same scores), "
                     "left out a (--on-duplicate error refuses duplicates)"]


# ---------------------------------------------------------------------- lm-eval
def lm_eval(extra: str = "", results: str = '{"t": {"acc,none": 0.5}}', model: str = "A",
            path: str = "o/A/results_x.json") -> str:
    """A results file with one task (the audit's base case), EXTRA top-level keys added."""
    return write(path, f'{{"results": {results}, "model_name": "{model}"{", " + extra if extra else ""}}}')


LM_EVAL_SHAPES = {
    '"config": "x"': ".config must be an object (model, model_args, ...), not text",
    '"config": {"model_args": 5}': ".config.model_args must be text ('pretrained=...,dtype=...') or an object, "
                                   "not a number",
    '"model_name": [1]': ".model_name must be text (the model's name), not a list",
    '"higher_is_better": [1]': ".higher_is_better must be an object of task → {metric: true/false}, not a list",
    '"higher_is_better": {"t": "x"}': ".higher_is_better.t must be an object of metric → true/false, not text",
    '"higher_is_better": {"t": {"acc": "yes"}}': ".higher_is_better.t.acc must be true/false (or null), not text",
    '"versions": [1]': ".versions must be an object of task → version, not a list",
    '"versions": {"t": {"v": 1}}': ".versions.t must be a version (a number or text), not an object",
    '"n-shot": "x"': '."n-shot" must be an object of task → number of shots, not text',
    '"group_subtasks": "t"': ".group_subtasks must be an object of group → [subtask, ...], not text",
    '"group_subtasks": {"g": 5}': ".group_subtasks.g must be a list of subtask names, not a number",
    '"group_subtasks": {"g": [5]}': ".group_subtasks.g[0] must be text (a task name), not a number",
    '"groups": ["g"]': ".groups must be an object of group → scores, not a list",
    '"date": "yesterday"': ".date must be the run's time as a number (Unix seconds, as lm-eval writes it), "
                           "not 'yesterday'",
}


@pytest.mark.parametrize("extra", list(LM_EVAL_SHAPES))
def test_lm_eval_parts_of_the_wrong_shape_are_named(extra, capsys):
    lm_eval(extra)
    assert refused(capsys, "lm-eval", "o") == f"o/A/results_x.json: {LM_EVAL_SHAPES[extra]}"


def test_lm_eval_null_parts_are_absent_ones(capsys):
    """lm-eval writes null for a group's metric whose subtasks disagree on the direction: not stated, not an error."""
    lm_eval('"config": null, "versions": null, "higher_is_better": {"t": {"acc": null}}, "group_subtasks": {"t": null}')
    table, _ = imported(capsys, "lm-eval", "o")
    assert table.criterion("t/acc").direction == "higher"  # lm-eval's known metric
    assert table.criterion("t/acc").source == "lm-eval t"


LM_EVAL_SCORES = {
    '{"t": {"acc,none": "high"}}': "model 'A', task 't', metric 'acc,none' is 'high', not a number "
                                   '(null or "N/A" for a missing score)',
    '{"t": {"acc,none": true}}': "model 'A', task 't', metric 'acc,none' is true, not a number "
                                 '(null or "N/A" for a missing score)',
    '{"t": {"acc,none": [0.5]}}': "model 'A', task 't', metric 'acc,none' is [0.5], not a number "
                                  '(null or "N/A" for a missing score)',
    '{"t": {"acc,none": 1e999}}': "model 'A', task 't', metric 'acc,none' is Infinity, not a finite number",
    f'{{"t": {{"acc,none": {BIG}}}}}': "model 'A', task 't', metric 'acc,none' is "
                                       "1000000000000000000000000000000… (401 digits), not a finite number",
    '{"t": {"acc,none": 0.5, "acc_stderr,none": "big"}}': "model 'A', task 't', standard error 'acc_stderr,none' is "
                                                          "'big', not a number (null or \"N/A\" for a missing score)",
    '{"t": {",none": 0.5}}': ".results.t.\",none\": a score key must be '<metric>,<filter>' with both names "
                             "(such as 'acc,none'), not an empty one",
    '{"t": {"acc,": 0.5}}': ".results.t.\"acc,\": a score key must be '<metric>,<filter>' with both names "
                            "(such as 'acc,none'), not an empty one",
    '{"t": 0.5}': ".results.t must be an object of '<metric>,<filter>' → score, not a number",
}


@pytest.mark.parametrize("results", list(LM_EVAL_SCORES))
def test_lm_eval_scores_that_are_no_finite_number_are_refused(results, capsys):
    lm_eval(results=results)
    assert refused(capsys, "lm-eval", "o") == f"o/A/results_x.json: {LM_EVAL_SCORES[results]}"


def test_lm_eval_missing_scores_stay_missing(capsys):
    lm_eval(results='{"t": {"acc,none": 0.5, "acc_stderr,none": "N/A"}, "u": {"acc,none": 0.7}}')
    lm_eval(results='{"t": {"acc,none": 0.6}, "u": {"acc,none": "N/A"}}', model="B", path="o/B/results_x.json")
    lm_eval(results='{"t": {"acc,none": null}, "u": {"acc,none": NaN}}', model="C", path="o/C/results_x.json")
    table, notes = imported(capsys, "lm-eval", "o")
    assert table.models == ("A", "B")
    np.testing.assert_array_equal(table.values, [[0.5, 0.7], [0.6, np.nan]])
    assert "lm-eval o: left out 1 model(s) without any score (C)" in notes
    assert "lm-eval o: some models have no score on some columns, left empty (missing): B (1)" in notes


def test_lm_eval_files_that_disagree_on_a_direction(capsys):
    lm_eval('"higher_is_better": {"t": {"tox": true}}', results='{"t": {"tox,none": 0.5}}')
    lm_eval('"higher_is_better": {"t": {"tox": false}}', results='{"t": {"tox,none": 0.4}}', model="B",
            path="o/B/results_x.json")
    assert refused(capsys, "lm-eval", "o") == (
        "lm-eval files disagree on the direction of metric 'tox' of task 't': o/A/results_x.json says higher is "
        "better, o/B/results_x.json lower: pass --higher tox or --lower tox (Python: higher=['tox'] / lower=['tox'])")
    table, _ = imported(capsys, "lm-eval", "o", "--lower", "tox")
    assert table.criterion("t/tox").direction == "lower"
    # one file states it, the other does not: the stated one, whichever file is read first
    lm_eval(results='{"t": {"tox,none": 0.5}}')
    for order in (["o/A", "o/B"], ["o/B", "o/A"]):
        assert imported(capsys, "lm-eval", *order)[0].criterion("t/tox").direction == "lower"


def test_lm_eval_source_does_not_depend_on_the_order(capsys):
    """Two settings of one task are two columns now (one setting per column), whichever file is read first."""
    lm_eval('"versions": {"t": 1}, "n-shot": {"t": 0}')
    lm_eval('"versions": {"t": 2}, "n-shot": {"t": 5}', results='{"t": {"acc,none": 0.4}}', model="B",
            path="o/B/results_x.json")
    for order in (["o/A", "o/B"], ["o/B", "o/A"]):
        table, notes = imported(capsys, "lm-eval", *order)
        assert table.names == ("t/acc@0-shot@v1", "t/acc@5-shot@v2")
        assert table.criterion("t/acc@0-shot@v1").source == "lm-eval t v1, 0-shot"
        assert table.criterion("t/acc@5-shot@v2").source == "lm-eval t v2, 5-shot"
    assert ("lm-eval: 1 task(s) (t) were run with different settings, one column per setting (sharing the task's "
            "vote) — n_shot=0, version=1: A; n_shot=5, version=2: B") in notes


def test_lm_eval_equal_dates_with_different_scores_are_no_newest(capsys):
    lm_eval('"date": 1716900000')
    lm_eval('"date": 1716900000', results='{"t": {"acc,none": 0.9}}', path="o/A2/results_x.json")
    assert refused(capsys, "lm-eval", "o") == (
        "lm-eval task 't' of model 'A' appears 2 times with the same date but different scores (o/A/results_x.json, "
        "o/A2/results_x.json), so none is the newest: keep one of them")
    lm_eval('"date": 1716900000', path="o/A2/results_x.json")  # the same scores: either will do
    table, notes = imported(capsys, "lm-eval", "o")
    assert table.values.tolist() == [[0.5]]
    assert ("lm-eval task 't' of model 'A' appears 2 times: kept the newest (o/A2/results_x.json; o/A/results_x.json "
            "has the same date and the same scores), left out o/A/results_x.json (--on-duplicate error refuses "
            "duplicates)") in notes


def test_lm_eval_group_does_not_depend_on_the_order(capsys):
    """A ran the group g (t inside it), B ran t alone: t is in group g whichever file is read first."""
    lm_eval('"group_subtasks": {"g": ["t"]}')
    lm_eval(results='{"t": {"acc,none": 0.4}}', model="B", path="o/B/results_x.json")
    for order in (["o/A", "o/B"], ["o/B", "o/A"]):
        table, notes = imported(capsys, "lm-eval", *order)
        assert table.criterion("t/acc").group == "g" and table.criterion("t/acc").benchmark == "g"
    # two files that put t in different groups: the first by name, said in a note
    lm_eval('"group_subtasks": {"h": ["t"]}', results='{"t": {"acc,none": 0.4}}', model="B", path="o/B/results_x.json")
    for order in (["o/A", "o/B"], ["o/B", "o/A"]):
        table, notes = imported(capsys, "lm-eval", *order)
        assert table.criterion("t/acc").benchmark == "g"
        assert "lm-eval: task 't' is in different groups in different files (g, h): its group is 'g'" in notes


# ---------------------------------------------------------------------- HELM
def helm(*rows: object, header: object = None, extra: str = "") -> str:
    """A HELM group JSON with one table (the audit's base case): its header and ROWS as JSON text."""
    header = header or '[{"value": "Model/adapter"}, {"value": "X - EM", "lower_is_better": false}]'
    body = ", ".join(str(r) for r in rows) or '[{"value": "M"}, {"value": 0.5}]'
    return write("core.json", f'[{{"title": "Acc", "header": {header}, "rows": [{body}]{extra}}}]')


HELM_SHAPES = {
    ('["Model/adapter", "X - EM"]', None): '.[0].header[0] must be an object {"value": NAME, "lower_is_better": ...}, '
                                           "not text",
    ('[{"value": "Model/adapter"}, {"value": "X - EM", "lower_is_better": false, "metadata": [1]}]', None):
        '.[0].header[1].metadata must be an object {"metric": ...}, not a list',
    ('[{"value": "Model/adapter"}, {"value": "X - EM", "lower_is_better": "no"}]', None):
        ".[0].header[1].lower_is_better must be true/false (or absent), not text",
    ('[{"value": "Model/adapter"}, {"value": 5, "lower_is_better": false}]', None):
        ".[0].header[1].value must be text (the column's name), not a number",
    (None, '[{"value": "M"}, 0.5]'): '.[0].rows[0][1] must be an object {"value": ...}, not a number',
    (None, '{"value": "M"}'): ".[0].rows[0] must be a list of cells, not an object",
    (None, '[{"value": "M"}]'): ".[0].rows[0] has 1 cell(s), the header 2: give every row one cell per column",
    (None, '[{"value": null}, {"value": 0.5}]'): ".[0].rows[0][0].value must be the model's name (text), not null",
    (None, '[{"value": " "}, {"value": 0.5}]'): ".[0].rows[0][0].value must be the model's name (text), not empty text",
    (None, '[{"value": "M"}, {"value": "high"}]'): "table 'Acc', model 'M', column 'X - EM' is 'high', not a number "
                                                   '(no "value" or null for a missing score)',
    (None, '[{"value": "M"}, {"value": true}]'): "table 'Acc', model 'M', column 'X - EM' is true, not a number "
                                                 '(no "value" or null for a missing score)',
    (None, f'[{{"value": "M"}}, {{"value": {BIG}}}]'): "table 'Acc', model 'M', column 'X - EM' is "
                                                       "1000000000000000000000000000000… (401 digits), not a finite number",
}


@pytest.mark.parametrize("header, row", list(HELM_SHAPES))
def test_helm_parts_of_the_wrong_shape_are_named(header, row, capsys):
    helm(*([row] if row else []), header=header)
    assert refused(capsys, "helm", "core.json") == f"core.json: {HELM_SHAPES[header, row]}"


def test_helm_cells_without_a_value_are_missing(capsys):
    helm('[{"value": "M"}, {"value": 0.5}, {"value": 0.1}]', '[{"value": "N"}, {"description": "none"}, {"value": 0.2}]',
         '[{"value": "O"}, {"value": null}, null]',
         header='[{"value": "Model/adapter"}, {"value": "X - EM", "lower_is_better": false},'
                '{"value": "Y - EM", "lower_is_better": false}]')
    table, notes = imported(capsys, "helm", "core.json")
    assert table.models == ("M", "N")
    np.testing.assert_array_equal(table.values, [[0.5, 0.1], [np.nan, 0.2]])
    assert "helm core.json: left out 1 model(s) without any score (O)" in notes


def test_helm_a_model_twice_in_one_table(capsys):
    helm('[{"value": "M"}, {"value": 0.9}]', '[{"value": "N"}, {"value": 0.5}]', '[{"value": "M"}, {"value": 0.1}]')
    assert refused(capsys, "helm", "core.json") == (
        "core.json: table 'Acc' lists model 'M' 2 times (.[0].rows[0], .[0].rows[2]) with different scores in column "
        "'X - EM' (0.9, 0.1); HELM's rows carry no date, so none is the newest: keep one row")
    helm('[{"value": "M"}, {"value": 0.9}]', '[{"value": "N"}, {"value": 0.5}]', '[{"value": "M"}, {"value": 0.9}]')
    table, notes = imported(capsys, "helm", "core.json")
    assert table.values.tolist() == [[0.9], [0.5]]
    assert ("helm: table 'Acc' of core.json lists model 'M' more than once (.[0].rows[0], .[0].rows[2]) with the same "
            "scores: kept one") in notes
    assert refused(capsys, "helm", "core.json", "--on-duplicate", "error") == (
        "core.json: table 'Acc' lists model 'M' 2 times (.[0].rows[0], .[0].rows[2]): keep one row, or pass "
        "--on-duplicate newest (which keeps one when their scores agree)")


def test_helm_a_column_given_twice_with_other_scores_keeps_both_apart(capsys):
    """Two files' copies of a column that differ are other runs: each is its own column (named by its file), neither
    file's scores are dropped, and they share the benchmark's vote."""
    helm('[{"value": "M"}, {"value": 0.9}]', '[{"value": "N"}, {"value": 0.5}]')
    Path("core.json").rename("a.json")
    helm('[{"value": "N"}, {"value": 0.6}]', '[{"value": "O"}, {"value": 0.4}]')
    table, notes = imported(capsys, "helm", "a.json", "core.json")
    assert table.names == ("X - EM [a.json]", "X - EM [core.json]")
    assert table.models == ("M", "N", "O")
    np.testing.assert_array_equal(table.values, [[0.9, np.nan], [0.5, 0.6], [np.nan, 0.4]])
    assert [c.benchmark for c in table.criteria] == ["X", "X"] and not any(c.detail for c in table.criteria)
    assert ("helm: X 'EM' is given 2 times with different scores (a.json .[0].header[1]; core.json .[0].header[1]): "
            "other runs, kept as separate columns that share X's vote") in notes


# ---------------------------------------------------------------------- MTEB
def mteb(model: str, *scores: object, subsets: tuple[str, ...] = ("eng", "deu"), task: str = "T") -> str:
    """One task file of MODEL (results/<model>/<revision>/<Task>.json) with one main_score per subset."""
    entries = [{"main_score": s, "hf_subset": sub} for s, sub in zip(scores, subsets)]
    return write(f"m/{model}/r/{task}.json", json.dumps({"task_name": task, "scores": {"test": entries}}))


def test_mteb_a_subset_without_a_score_leaves_the_task_missing(capsys):
    """A with [0.9, null] used to average 0.9 and beat B's 0.6: a mean over fewer subsets is not comparable."""
    mteb("A", 0.9, None, subsets=("fra", "deu"))
    mteb("B", 0.6, 0.6, subsets=("fra", "deu"))
    mteb("A", 0.5, 0.5, task="U")
    mteb("B", 0.4, 0.4, task="U")
    table, notes = imported(capsys, "mteb", "m")
    t, u = table.names.index("T"), table.names.index("U")
    np.testing.assert_array_equal(table.values[:, [t, u]], [[np.nan, 0.5], [0.6, 0.4]])
    assert ("mteb: left missing 1 task score(s) with a subset that has no main_score (a mean over fewer subsets would "
            "not compare with the others): A T (deu)") in notes
    write("m/A/r/T.json", json.dumps({"task_name": "T", "scores": {"test": [
        {"main_score": 0.9, "hf_subset": "fra"}, {"main_score": float("nan"), "hf_subset": "deu"}]}}))
    assert np.isnan(imported(capsys, "mteb", "m")[0].values[0, t])


MTEB_BAD = {
    '{"task_name": "T", "scores": {"test": [{"main_score": "high", "hf_subset": "eng"}]}}':
        "m/A/r/T.json: task 'T', subset 'eng', main_score is 'high', not a number (null for a missing score)",
    f'{{"task_name": "T", "scores": {{"test": [{{"main_score": {BIG}}}]}}}}':
        "m/A/r/T.json: task 'T', subset 'subset 1', main_score is 1000000000000000000000000000000… (401 digits), "
        "not a finite number",
    '{"task_name": "T", "scores": {"test": [0.5]}}':
        'm/A/r/T.json: .scores.test[0] must be an object {"main_score": ..., "hf_subset": ...}, not a number',
    '{"task_name": "T", "scores": {"test": [{"main_score": 0.5, "hf_subset": 1}]}}':
        "m/A/r/T.json: .scores.test[0].hf_subset must be text (the subset's name), not a number",
    '{"task_name": 5, "scores": {"test": [{"main_score": 0.5}]}}':
        "m/A/r/T.json: .task_name must be text (the task's name), not a number",
}


@pytest.mark.parametrize("doc", list(MTEB_BAD))
def test_mteb_bad_task_files(doc, capsys):
    write("m/A/r/T.json", doc)
    assert refused(capsys, "mteb", "m") == MTEB_BAD[doc]


def test_mteb_models_scored_on_different_subsets_compare_on_their_common_one(capsys):
    """Issue 36: an English-only model beside a multilingual one compares on the subset they share; models with no
    common (nor English) subset are refused."""
    mteb("A", 0.5, subsets=("eng",))
    mteb("B", 0.6, 0.7)
    table, _ = imported(capsys, "mteb", "m")
    assert table.names == ("T", "T [deu]") and table.values[:, 0].tolist() == [0.5, 0.6]
    mteb("A", 0.5, subsets=("fra",))
    mteb("B", 0.6, subsets=("deu",))
    assert refused(capsys, "mteb", "m") == (
        "MTEB task 'T': A is scored on subsets fra (m/A/r/T.json), B on deu (m/B/r/T.json), and no subset is English or "
        "every model's: the scores are not comparable; give every model's results on the same split and a common "
        "subset (or leave the task out)")


def test_mteb_source_does_not_depend_on_the_order(capsys):
    mteb("A", 0.5, 0.7)
    mteb("B", 0.6, 0.6)
    for order in (["m/A", "m/B"], ["m/B", "m/A"]):
        table, _ = imported(capsys, "mteb", *order)
        assert table.models == ("A", "B")
        assert table.criterion("T").source == "MTEB main_score, test, eng"


# ---------------------------------------------------------------------- codecarbon
EMISSIONS = "timestamp,project_name,experiment_id,duration,emissions,energy_consumed\n"


def test_codecarbon_a_run_without_a_value_leaves_that_column_missing(capsys):
    """a's energy used to be the sum of one run while its duration and emissions summed both, so a ranked cheaper."""
    write("e.csv", EMISSIONS + "t,a,x,10,0.1,1.0\nt,a,y,10,0.1,\nt,b,z,10,0.1,1.5\n")
    table, notes = imported(capsys, "codecarbon", "e.csv")
    assert table.models == ("a", "b") and table.names == ("energy_kwh", "emissions_kg", "duration_s")
    np.testing.assert_array_equal(table.values, [[np.nan, 0.2, 20.0], [1.5, 0.1, 10.0]])
    assert ("codecarbon: left missing energy_kwh of a (no value on line 3 of e.csv): a sum over only some of a model's "
            "runs would understate it") in notes


CODECARBON_BAD = {
    ("t,,x,10,0.1,1.0\n", None): "e.csv: line 2 has an empty project_name: name every run's project "
                                 "(or pass --by experiment_id)",
    ("t,a,x,10,0.1\n", None): "e.csv: line 2 has 5 field(s), the header 6: give every row one value per column "
                              "(an empty value for a missing one), or pass --skip-bad-rows to skip codecarbon's "
                              "corrupt rows",
    ("t,a,x,10,0.1,inf\n", None): "e.csv: line 2, project_name 'a', energy_consumed is 'inf', not a finite number; or "
                                  "pass --skip-bad-rows to skip codecarbon's corrupt rows",
    ("t,a,x,10,0.1,1 kWh\n", None): "e.csv: line 2, project_name 'a', energy_consumed is '1 kWh', not a number "
                                    "(leave it empty for a missing score); or pass --skip-bad-rows to skip "
                                    "codecarbon's corrupt rows",
    ("t,a,x,10,0.1,1\n", "a: null"): "codecarbon model map map.yaml: project 'a' maps to null, not a model name: "
                                     "write `a: ORG/MODEL` (a model name as text)",
    ("t,a,x,10,0.1,1\n", "a: {x: 1}"): 'codecarbon model map map.yaml: project \'a\' maps to {"x": 1}, not a model '
                                       "name: write `a: ORG/MODEL` (a model name as text)",
    ("t,a,x,10,0.1,1\n", "a: ''"): "codecarbon model map map.yaml: project 'a' maps to empty text, not a model name: "
                                   "write `a: ORG/MODEL` (a model name as text)",
    ("t,a,x,10,0.1,1\n", "~: b"): "codecarbon model map map.yaml: a project name is empty: write `PROJECT: ORG/MODEL`",
}


@pytest.mark.parametrize("rows, names", list(CODECARBON_BAD))
def test_codecarbon_bad_rows_and_model_maps(rows, names, capsys):
    write("e.csv", EMISSIONS + rows)
    extra = ["--map", write("map.yaml", names + "\n")] if names else []
    assert refused(capsys, "codecarbon", "e.csv", *extra) == CODECARBON_BAD[rows, names]


def test_codecarbon_model_map_in_python_is_checked_too():
    write("e.csv", EMISSIONS + "t,a,x,10,0.1,1\n")
    with pytest.raises(UserError, match=r"^codecarbon model map: project 'a' maps to null, not a model name"):
        ranking.load_table("e.csv", format="codecarbon", codecarbon_map={"a": None})


def test_codecarbon_an_empty_project_outside_the_map_is_left_out_with_the_others(capsys):
    write("e.csv", EMISSIONS + "t,,x,10,0.1,1.0\nt,a,y,10,0.1,2.0\n")
    table, notes = imported(capsys, "codecarbon", "e.csv", "--map", "a=org/a")
    assert table.models == ("org/a",)
    assert "codecarbon: left out the rows of (empty) (not in the model map)" in notes


# ---------------------------------------------------------------------- Open LLM Leaderboard
LEADERBOARD = "fullname,Precision,IFEval,BBH,MATH Lvl 5,GPQA,MUSR,MMLU-PRO,Average ⬆️,Submission Date\n"


def leaderboard(*rows: str) -> str:
    return write("contents.csv", LEADERBOARD + "".join(r + "\n" for r in rows))


def test_open_llm_a_cell_that_is_no_number_is_refused(capsys):
    """`40%x` in every benchmark used to leave all six columns out, exit 0 (`40 %`, the page's way, is 40)."""
    leaderboard("org/a,bf16,40%x,30%,10%,5%,7%,20%,18.7,2024-06-12", "org/b,bf16,41,31,11,6,8,21,19.7,2024-06-12")
    assert refused(capsys, "open-llm-leaderboard", "contents.csv") == (
        "contents.csv: line 2, model 'org/a', column 'IFEval' is '40%x', not a number (leave it empty for a missing "
        "score)")


def test_open_llm_empty_cells_are_missing(capsys):
    leaderboard("org/a,bf16,40,,10,5,7,20,,2024-06-12", "org/b,bf16,41,31,11,6,8,21,19.7,2024-06-12")
    table, notes = imported(capsys, "open-llm-leaderboard", "contents.csv")
    assert np.isnan(table.values[0, table.names.index("BBH")])
    assert "open-llm-leaderboard contents.csv: some models have no score on some columns, left empty (missing): " \
           "org/a (1)" in notes


@pytest.mark.parametrize("rows, message", [
    (["org/a,bf16,40,30,10,5,7,20,18.7,2024-06-12", ",bf16,41,31,11,6,8,21,19.7,2024-06-12"],
     "contents.csv: line 3 has no model name in column 'fullname': name every model (or delete the row)"),
    (["org/a,bf16,40,30,10,5,7,20,18.7,2024-06-12", "org/b,bf16,41,31"],
     "contents.csv: line 3 has 4 field(s), the header 10: give every row one value per column (an empty value for a "
     "missing one)"),
    (["org/a,bf16,40,30,10,5,7,20,18.7,2024-06-12", "org/a,bf16,41,31,11,6,8,21,19.7,yesterday"],
     "contents.csv: line 3: model 'org/a' is listed more than once and this row's 'Submission Date' is 'yesterday', "
     "not a date (YYYY-MM-DD or ISO 8601), so the newest row cannot be told: give its date, or keep one row"),
    (["org/a,bf16,40,30,10,5,7,20,18.7,2024-06-12", "org/a,bf16,41,31,11,6,8,21,19.7,"],
     "contents.csv: line 3: model 'org/a' is listed more than once and this row's 'Submission Date' is empty, "
     "not a date (YYYY-MM-DD or ISO 8601), so the newest row cannot be told: give its date, or keep one row"),
    (["org/a,bf16,40,30,10,5,7,20,18.7,2024-06-12", "org/a,bf16,41,31,11,6,8,21,19.7,2024-06-12"],
     "model 'org/a' of the leaderboard appears 2 times with the same Submission Date but different scores "
     "(contents.csv line 2, contents.csv line 3), so none is the newest: keep one of them"),
])
def test_open_llm_rows_that_cannot_be_read_or_chosen(rows, message, capsys):
    leaderboard(*rows)
    assert refused(capsys, "open-llm-leaderboard", "contents.csv") == message


def test_open_llm_dates_are_compared_as_dates(capsys):
    """`2024-06-12T09:00:00Z` is newer than `2024-06-12`; the date of a model listed once is not needed."""
    leaderboard("org/a,bf16,40,30,10,5,7,20,18.7,2024-06-12T09:00:00Z", "org/a,bf16,41,31,11,6,8,21,19.7,2024-06-12",
                "org/b,bf16,41,31,11,6,8,21,19.7,yesterday")  # one row: its date is not needed
    table, notes = imported(capsys, "open-llm-leaderboard", "contents.csv")
    assert table.values[table.model_index("org/a"), table.names.index("IFEval")] == 40.0
    assert ("model 'org/a' of the leaderboard appears 2 times: kept the newest (contents.csv line 2), left out "
            "contents.csv line 3 (--on-duplicate error refuses duplicates)") in notes


def test_lm_eval_cyclic_group_subtasks_are_one_line_not_a_traceback(tmp_path, capsys):
    """Issue 38: a cyclic group_subtasks (a group inside itself, in one file or across two) raised RecursionError."""
    import json

    from lm_eval_files import results_04, write_04


    for k, cycle in enumerate(({"mmlu": ["mmlu_stem"], "mmlu_stem": ["mmlu"]},
                               {"mmlu": ["mmlu_stem", "mmlu_humanities"], "mmlu_stem": ["mmlu_anatomy", "mmlu_x"],
                                "mmlu_x": ["mmlu_stem"]})):
        out = tmp_path / f"o{k}"
        doc = results_04("org/A", {"arc_easy": 0.5, "arc_easy_norm": 0.5, "mmlu_anatomy": 0.4, "mmlu_astronomy": 0.5,
                                   "mmlu_formal_logic": 0.3})
        doc["group_subtasks"] |= cycle
        write_04(out, doc)
        assert json.loads(next(out.rglob("*.json")).read_text())["group_subtasks"]["mmlu_stem"]
        code = main(["import", "lm-eval", str(out), "-o", str(tmp_path / f"res{k}")])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "group_subtasks hold a cycle (mmlu" in err and "results_" in err, err
        assert not (tmp_path / f"res{k}").exists()


def test_lm_eval_group_subtasks_cycling_across_two_files_are_refused(tmp_path):
    from lm_eval_files import results_04, write_04

    import ranking
    from ranking.floor.errors import UserError

    out = tmp_path / "o"
    for k, (model, hierarchy) in enumerate((("org/A", {"g1": ["g2"], "g2": ["t"]}),
                                            ("org/B", {"g2": ["g1"], "g1": ["u"]}))):
        doc = results_04(model, {"arc_easy": 0.5, "arc_easy_norm": 0.5}, mmlu=False,
                         extra={"t": {"acc,none": 0.5}, "u": {"acc,none": 0.4}}, date=1740964420.0 + k)
        doc["group_subtasks"] = {"arc_easy": [], **hierarchy}
        write_04(out, doc)
    with pytest.raises(UserError, match=r"group_subtasks hold a cycle \(g1 → g2 → g1"):
        ranking.load_table(out, format="lm-eval")
