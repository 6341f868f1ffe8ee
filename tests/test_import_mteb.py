"""The MTEB importer on the structures of real result files of both formats (issue #27).

The fixtures copy the STRUCTURE of files in embeddings-benchmark/results (written here, never copied):
mteb >= 1.11 (``task_name``, ``scores`` → split → [entries with ``hf_subset``, ``languages``,
``main_score``, ``scores_per_experiment``], ``evaluation_time``, ``kg_co2_emissions``) and the files
before 1.11 that mteb's ``TaskResult.from_disk`` still reads (``mteb_dataset_name``, ``mteb_version``
``1.0.3.dev0``, splits at the top level holding subsets or the metrics themselves, ``evaluation_time``
inside each split, renamed tasks such as ``NorwegianParliament``, reranking files without ``main_score``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import ranking
from harness.cli import main
from ranking.boards import board_scores
from ranking.floor.errors import UserError
from ranking.importers import mteb
from ranking.importers.common import Options

MINILM = "sentence-transformers__all-MiniLM-L6-v2"
HASH = "8b3219a92973c328a8e22fadcfa821b5dc75636a"


def write(root: Path, model: str, revision: str, name: str, doc: dict) -> Path:
    path = root / model / revision / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def new_file(task: str, subsets: dict[str, float], *, split: str = "test", date: float | None = None,
             version: str = "1.12.75") -> dict:
    doc = {"dataset_revision": "0fd18e25b25c072e09e0d92ab615fda904d66300", "evaluation_time": 16.3,
           "kg_co2_emissions": 0.0024, "mteb_version": version, "task_name": task,
           "scores": {split: [{"accuracy": s, "f1": s - 0.01, "hf_subset": sub, "languages": [f"{sub}-Latn"],
                               "main_score": s, "scores_per_experiment": [{"accuracy": s, "f1": s}]}
                              for sub, s in subsets.items()]}}
    if date is not None:
        doc["date"] = date
    return doc


def old_multilingual(task: str, subsets: dict[str, float]) -> dict:
    """Before 1.11: test and validation splits, each subset → metrics, the split's own evaluation_time."""
    def split(delta: float) -> dict:
        out: dict = {sub: {"accuracy": s + delta, "accuracy_stderr": 0.01, "f1": s - 0.01, "f1_stderr": 0.01,
                           "main_score": s + delta} for sub, s in subsets.items()}
        out["evaluation_time"] = 17.89
        return out
    return {"test": split(0.0), "validation": split(-0.02), "mteb_version": "1.0.3.dev0",
            "mteb_dataset_name": task, "dataset_revision": "7d571f92784cd94a019292a1f45445077d0ef634"}


def old_flat(task: str, value: float | None, *, main: bool = True) -> dict:
    """Before 1.11: one subset, the metrics directly in the split (a reranking file of 1.1.1 has no main_score)."""
    metrics = {"accuracy": value, "ap": 0.52, "evaluation_time": 35.46, "f1": 0.54}
    if main:
        metrics["main_score"] = value
    return {"dataset_revision": None, "mteb_dataset_name": task, "mteb_version": "1.0.3.dev0", "test": metrics,
            "validation": dict(metrics)}


def read(paths: list[Path], notes: list[str] | None = None, **options: object):
    return mteb.read(paths, Options(sink=(notes if notes is not None else []).append, **options))


def test_files_before_1_11_are_read_as_mteb_reads_them(tmp_path):
    root = tmp_path / "results"
    write(root, MINILM, "no_revision_available", "MassiveScenarioClassification",
          old_multilingual("MassiveScenarioClassification", {"en": 0.7576, "da": 0.4701, "nb": 0.4467, "sv": 0.4293}))
    write(root, MINILM, "no_revision_available", "NorwegianParliament", old_flat("NorwegianParliament", 0.548))
    write(root, "org__other", "rev1", "MassiveScenarioClassification", new_file(
        "MassiveScenarioClassification", {"en": 0.8, "da": 0.5, "nb": 0.5, "sv": 0.5}))
    write(root, "org__other", "rev1", "NorwegianParliamentClassification",
          new_file("NorwegianParliamentClassification", {"default": 0.6}))
    notes: list[str] = []
    table = read([root], notes)
    assert table.models == ("org/other", "sentence-transformers/all-MiniLM-L6-v2")
    voting = [c.name for c in table.criteria if not c.detail]
    assert voting == ["MassiveScenarioClassification", "NorwegianParliamentClassification"]  # renamed as mteb does
    assert table.names[1:4] == tuple(f"MassiveScenarioClassification [{s}]" for s in ("da", "nb", "sv"))
    j, k = table.names.index("MassiveScenarioClassification"), table.names.index("NorwegianParliamentClassification")
    np.testing.assert_allclose(table.values[:, [j, k]], [[0.8, 0.6], [0.7576, 0.548]])  # the English subset votes
    assert "mteb: read 2 task file(s) in the format before mteb 1.11 (as mteb's own loader reads them)" in notes


def test_an_old_file_without_main_score_takes_its_types_main_metric(tmp_path):
    """Issue 36: early mteb wrote main_score for classification only; mteb's loader takes the main metric the task
    declares (here accuracy); a file with neither leaves the score missing."""
    root = tmp_path / "results"
    write(root, "a", HASH, "T", old_flat("T", 0.7, main=False))
    write(root, "b", HASH, "T", old_flat("T", 0.6))
    write(root, "a", HASH, "U", old_flat("U", 0.5))
    write(root, "b", HASH, "U", old_flat("U", 0.4))
    notes: list[str] = []
    table = read([root], notes)
    np.testing.assert_array_equal(table.values, [[0.7, 0.5], [0.6, 0.4]])
    assert any("main metric mteb declares for the task's type" in n for n in notes)
    write(root, "a", HASH, "T", {"mteb_dataset_name": "T", "test": {"custom": 0.7}})
    notes = []
    np.testing.assert_array_equal(read([root], notes).values, [[np.nan, 0.5], [0.6, 0.4]])
    assert any(n.startswith("mteb: left missing 1 task score(s) with a subset that has no main_score") and "a T (default)"
               in n for n in notes)


def test_identity_is_model_and_revision(tmp_path):
    root = tmp_path / "results"
    write(root, MINILM, "no_revision_available", "Banking77Classification", old_flat("Banking77Classification", 0.8))
    write(root, MINILM, HASH, "Banking77Classification", new_file("Banking77Classification", {"default": 0.8004}))
    write(root, "org__b", "main", "Banking77Classification", new_file("Banking77Classification", {"default": 0.7}))
    notes: list[str] = []
    table = read([root], notes)
    assert table.models == ("org/b", "sentence-transformers/all-MiniLM-L6-v2 (8b3219a)",
                            "sentence-transformers/all-MiniLM-L6-v2 (no_revision_available)")
    assert any(n.startswith("mteb: 1 model(s) have results of several revisions") for n in notes)


def test_reruns_are_decided_by_the_files_own_date_never_file_times(tmp_path):
    a, b = tmp_path / "run1", tmp_path / "run2"
    newer = write(a, "m", "r", "T", new_file("T", {"default": 0.61}, date=1_800_000_000))
    older = write(b, "m", "r", "T", new_file("T", {"default": 0.59}, date=1_700_000_000))
    os.utime(newer, (1_000_000_000, 1_000_000_000))  # the file times say the opposite
    os.utime(older, (1_900_000_000, 1_900_000_000))
    for other in (a, b):
        write(other, "z", "r", "T", new_file("T", {"default": 0.5}))
    notes: list[str] = []
    assert read([a, b], notes).values[0, 0] == 0.61
    assert any("kept the newest" in n for n in notes)
    with pytest.raises(UserError, match="appears 2 times"):
        read([a, b], on_duplicate="error")
    # without a date on every copy: equal copies are one, different ones are refused (no file times)
    write(b, "m", "r", "T", new_file("T", {"default": 0.59}))
    with pytest.raises(UserError, match=r"carries no 'date', so the newest cannot be told \(file times are not used\)"):
        read([a, b])
    write(a, "m", "r", "T", new_file("T", {"default": 0.59}))
    assert read([a, b]).values[0, 0] == 0.59


def test_every_task_without_a_common_subset_is_named_in_one_message(tmp_path):
    root = tmp_path / "m"
    for task in ("T", "U", "V"):
        write(root, "A", "r", task, new_file(task, {"fra": 0.5, "ita": 0.5}))
        write(root, "B", "r", task, new_file(task, {"deu": 0.5, "spa": 0.6} if task != "V" else {"fra": 0.4, "x": 1}))
    with pytest.raises(UserError) as err:
        read([root])
    message = str(err.value)
    assert "\n" not in message and message.startswith("2 MTEB tasks are scored on no common split or subset")
    assert "'T': A is scored on subsets fra, ita" in message and "'U': A is scored on subsets fra, ita" in message
    assert "'V'" not in message


def test_percent_columns_are_normalised_and_mixed_units_refused(tmp_path):
    root = tmp_path / "m"
    write(root, "A", "r", "T", new_file("T", {"default": 75.0}))
    write(root, "B", "r", "T", new_file("T", {"default": 62.5}))
    write(root, "A", "r", "U", new_file("U", {"default": 0.5}))
    write(root, "B", "r", "U", new_file("U", {"default": 0.4}))
    notes: list[str] = []
    table = read([root], notes)
    np.testing.assert_allclose(table.values, [[0.75, 0.5], [0.625, 0.4]])
    assert ("mteb: 1 task column(s) were in percent and are divided by 100 to 0-1 like the others: T") in notes
    write(root, "C", "r", "T", new_file("T", {"default": 0.7}))
    write(root, "C", "r", "U", new_file("U", {"default": 0.3}))
    with pytest.raises(UserError, match=r"^MTEB task 'T' mixes units: A, B scored in percent \(beyond 1\), C in 0-1"):
        read([root])


def test_a_score_beyond_100_is_out_of_range(tmp_path):
    root = tmp_path / "m"
    write(root, "A", "r", "T", new_file("T", {"default": 150.0}))
    write(root, "B", "r", "T", new_file("T", {"default": 0.5}))
    for model in ("A", "B"):
        write(root, model, "r", "U", new_file("U", {"default": 0.4}))
    with pytest.raises(UserError, match=r"task 'T', model 'A', main_score.*150.*--out-of-range missing"):
        read([root])
    table = read([root], out_of_range="missing")
    assert np.isnan(table.values[0, 0]) and table.values[1, 0] == 0.5


def test_each_task_is_one_benchmark_voting_once(tmp_path):
    root = tmp_path / "m"
    write(root, "A", "r", "T", new_file("T", {"eng": 0.5, "deu": 0.7}))
    crit = read([root]).criterion("T")
    assert (crit.benchmark, crit.task, crit.metric, dict(crit.settings), crit.range, crit.detail) == (
        "T", "T", "main_score", {"split": "test", "subsets": "eng", "type": "Classification"}, (-1.0, 1.0), False)
    assert read([root]).criterion("T [deu]").detail


def test_board_parity_mean_over_tasks(tmp_path):
    """MTEB's mean over tasks: each task's score on its own subset (English where it has one; else the mean of the
    subsets every model has), then their mean."""
    root = tmp_path / "m"
    files = {("A", "T"): {"eng": 0.5, "deu": 0.7}, ("A", "U"): {"fra": 0.9, "ita": 0.7},
             ("B", "T"): {"eng": 0.4, "deu": 0.4}, ("B", "U"): {"fra": 0.3, "ita": 0.2}}
    for (model, task), subsets in files.items():
        write(root, model, "r", task, new_file(task, subsets))
    write(root, "C", "r", "T", new_file("T", {"eng": 0.1, "deu": 0.2}))  # no U: the board gives no mean
    table = read([root])
    expected = [np.mean([files[m, "T"]["eng"], np.mean(list(files[m, "U"].values()))]) for m in ("A", "B")]
    np.testing.assert_allclose(mteb.board_scores(table)[:2], expected, rtol=0, atol=1e-15)
    assert np.isnan(mteb.board_scores(table)[2])


SAMPLES = Path(__file__).resolve().parents[1] / "configs" / "import_samples" / "mteb"


def test_the_readme_example_imports_the_shipped_sample_and_ranks(tmp_path, capsys):
    out = tmp_path / "results" / "imported" / "mteb"
    code = main(["import", "mteb", str(SAMPLES), "-o", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    table = ranking.load_table(out)
    assert table.models == ("demo-org/mini-embed", "demo-org/old-embed") and table.board == "mteb"
    np.testing.assert_allclose(board_scores(table), [(0.80 + 0.76 + 0.55) / 3,  # MassiveScenario: its en subset
                                                     (0.73 + 0.70 + 0.52) / 3])
    assert main(["rank", str(out), "--board"]) == 0
    assert "demo-org/mini-embed" in capsys.readouterr().out


def test_an_old_task_name_in_another_case_shares_the_newer_files_column(tmp_path):
    root = tmp_path / "results"
    write(root, MINILM, "no_revision_available", "SCIDOCS", {
        "dataset_revision": "7d24eac886a6ae6653a6b67433e1c302cb0e9ac6", "mteb_version": "1.2.0", "evaluation_time": "",
        "mteb_dataset_name": "SciDocs", "test": {"ndcg_at_10": 0.1968, "main_score": 0.1968}})
    write(root, "org__b", "r", "SCIDOCS", new_file("SCIDOCS", {"default": 0.21}))
    table = read([root])
    assert table.names == ("SCIDOCS",) and table.values[:, 0].tolist() == [0.21, 0.1968]


# ---------------------------------------------------------------------- issue 36: MTEB as mteb computes it
def paper_files(root: Path, model: str, level: float) -> dict[str, float]:
    """A model's folder in the MTEB paper's layout (embeddings-benchmark/mtebpaper results/<model>/<Task>.json,
    mteb 0.0.2): main_score only in classification files (AmazonCounterfactual's holds ap there), every other
    type's metrics as early mteb wrote them, MSMARCO on dev and test, CQADupstack's subforums beside their merged
    file, a bitext task. Returns each task's declared main score (what the paper averages)."""
    folder = root / model
    folder.mkdir(parents=True, exist_ok=True)

    def put(task: str, splits: dict) -> None:
        (folder / f"{task}.json").write_text(json.dumps({"mteb_version": "0.0.2", **splits, "mteb_dataset_name": task,
                                                         "dataset_revision": None}))
    sims = {"cos_sim": {"pearson": level + 0.01, "spearman": level}, "euclidean": {"pearson": 0.1, "spearman": 0.1},
            "manhattan": {"pearson": 0.1, "spearman": 0.1}}
    put("AmazonCounterfactualClassification", {"test": {
        "de": {"accuracy": 0.9, "ap": 0.8, "f1": 0.7, "main_score": 0.9},
        "en": {"accuracy": level, "accuracy_stderr": 0.04, "ap": level / 3, "f1": level - 0.05, "main_score": level / 3},
        "en-ext": {"accuracy": 0.2, "ap": 0.1, "f1": 0.1, "main_score": 0.2}, "evaluation_time": 10.9}})
    put("ArguAna", {"test": {"evaluation_time": 30.0, "map_at_10": 0.1, "ndcg_at_1": 0.2, "ndcg_at_10": level - 0.1,
                             "recall_at_10": 0.5}})
    put("MSMARCO", {"dev": {"ndcg_at_10": level - 0.2, "map_at_10": 0.1}, "test": {"ndcg_at_10": 0.9, "map_at_10": 0.8}})
    put("STS17", {"test": {"en-en": sims, "ko-ko": {k: {"pearson": 0.9, "spearman": 0.9} for k in sims}}})
    put("SprintDuplicateQuestions", {"test": {
        "cos_sim": {"accuracy": 0.99, "ap": level + 0.1, "f1": 0.6}, "dot": {"accuracy": 0.99, "ap": 0.2, "f1": 0.3},
        "max": {"accuracy": 0.99, "ap": 0.99, "f1": 0.65}, "evaluation_time": 13.3}})
    put("AskUbuntuDupQuestions", {"test": {"evaluation_time": 3.1, "map": level - 0.05, "mrr": level + 0.05}})
    put("ArxivClusteringS2S", {"test": {"evaluation_time": 50.0, "v_measure": level - 0.3, "v_measure_std": 0.01}})
    forums = {"Android": level, "English": level - 0.1}
    for forum, x in forums.items():
        put(f"CQADupstack{forum}Retrieval", {"test": {"ndcg_at_10": x, "map_at_10": 0.1}})
    put("CQADupstackRetrieval", {"test": {"ndcg_at_10": sum(forums.values()) / 2, "map_at_10": 0.1}})
    put("BUCC", {"test": {"de-en": {"accuracy": 0.9, "f1": 0.5, "precision": 0.4, "recall": 0.6, "main_score": 0.5}}})
    return {"AmazonCounterfactualClassification": level, "ArguAna": level - 0.1, "MSMARCO": level - 0.2, "STS17": level,
            "SprintDuplicateQuestions": level + 0.1, "AskUbuntuDupQuestions": level - 0.05,
            "ArxivClusteringS2S": level - 0.3, "CQADupstackRetrieval": sum(forums.values()) / 2}


def test_the_mteb_papers_files_score_as_the_paper_averages_them(tmp_path, capsys):
    """Before, only classification files had a score (main_score), the folder above ('results') named the models,
    and the board differed from the paper's average; now each task's declared main metric on its own split and
    English subset, CQADupstack merged, bitext out: mteb's own English average (checked against the paper's table
    on the real files of embeddings-benchmark/mtebpaper, see ranking/README.md)."""
    root = tmp_path / "results"
    expected = {m: paper_files(root, m, level) for m, level in (("LASER2", 0.5), ("LaBSE", 0.6))}
    notes: list[str] = []
    table = read([root], notes)
    assert table.models == ("LASER2", "LaBSE")
    for i, m in enumerate(table.models):
        for task, x in expected[m].items():
            assert table.values[i, table.names.index(task)] == pytest.approx(x, abs=1e-12), (m, task)
        assert mteb.board_scores(table)[i] == pytest.approx(np.mean(list(expected[m].values())), abs=1e-12)
    crit = {c.name: c for c in table.criteria}
    assert crit["CQADupstackAndroidRetrieval"].benchmark == "CQADupstackRetrieval" and crit[
        "CQADupstackAndroidRetrieval"].detail and crit["CQADupstackRetrieval"].aggregate
    assert dict(crit["MSMARCO"].settings)["split"] == "dev" and dict(crit["BUCC"].settings)["type"] == "BitextMining"
    assert crit["STS17 [ko-ko]"].detail and not crit["STS17"].detail
    assert any("main metric mteb declares for the task's type" in n for n in notes)


def test_model_identity_follows_the_layout_the_files_record(tmp_path):
    """Flat <model>/, <org>/<model>/ (old files), <org>__<model>/<revision>/ and model_meta.json; never two folders
    up whatever the layout ('results (LASER2)', 'BAAI' for BAAI/bge-m3)."""
    root = tmp_path / "results"
    for folder in ("LASER2", "BAAI/bge-m3", "intfloat/multilingual-e5-base"):
        (root / folder).mkdir(parents=True)
        (root / folder / "T.json").write_text(json.dumps(old_flat("T", 0.5)))
    write(root, "sentence-transformers__all-MiniLM-L6-v2", HASH, "T", new_file("T", {"default": 0.6}))
    meta = write(root, "renamed-folder", "rev9", "T", new_file("T", {"default": 0.7}))
    (meta.parent / "model_meta.json").write_text(json.dumps({"name": "org/real-name", "revision": "abc"}))
    assert read([root]).models == ("BAAI/bge-m3", "LASER2", "intfloat/multilingual-e5-base", "org/real-name",
                                   "sentence-transformers/all-MiniLM-L6-v2")
    assert read([root / "LASER2"]).models == ("LASER2",)


def test_test_full_and_validation_full_in_one_file_and_a_subset_renamed_between_versions(tmp_path):
    root = tmp_path / "m"
    for model, x in (("A", 0.4), ("B", 0.5)):
        doc = new_file("T", {"default": x}, split="test.full")
        doc["scores"]["validation.full"] = doc["scores"]["test.full"]
        write(root, model, "r", "T", doc)
    write(root, "A", "r", "U", new_file("U", {"fr": 0.3}, version="1.2.0"))
    write(root, "B", "r", "U", new_file("U", {"default": 0.35}))
    notes: list[str] = []
    table = read([root], notes)
    assert table.names == ("T", "U") and table.values.tolist() == [[0.4, 0.3], [0.5, 0.35]]
    assert dict(table.criterion("T").settings)["split"] == "test.full"
    assert any("named differently by different mteb versions, compared as one: U (default, fr)" in n for n in notes)
