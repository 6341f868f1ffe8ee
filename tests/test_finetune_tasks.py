"""GLUE loaders: every task on the shared data where present, QQP and MNLI on files written here, bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.finetune.tasks import TASKS, get_task, load_task, read_glue_tsv
from ranking.floor.errors import UserError

# task: (train rows, {suffix: dev rows}, first train label, first dev label) per the data README
SHARED = {
    "cola": (8551, {"": 1043}, 1, 1),
    "sst2": (67349, {"": 872}, 0, 1),
    "mrpc": (3668, {"": 408}, 1, 1),
    "stsb": (5749, {"": 1500}, 5.0, 5.0),
    "rte": (2490, {"": 277}, 1, 1),  # not_entailment = 1 in the hub's label order
    "wnli": (635, {"": 71}, 1, 0),
}


@pytest.mark.parametrize("name", sorted(SHARED))
def test_every_shared_task_loads_with_readme_sizes(data_root: Path, name: str):
    n_train, n_dev, first_train, first_dev = SHARED[name]
    data = load_task(name, data_root)
    assert len(data.train) == n_train
    assert {k: len(v) for k, v in data.evals.items()} == n_dev
    assert data.train.label[0] == first_train
    assert data.evals[""].label[0] == first_dev
    task = get_task(name)
    assert (data.train.text_b is not None) == task.is_pair
    assert all(isinstance(x, str) and x for x in data.train.text_a[:100])
    if task.is_regression:
        assert all(0.0 <= y <= 5.0 for y in data.train.label)
    else:
        assert set(data.train.label) == set(range(task.num_labels))


def test_rows_are_read_verbatim(data_root: Path):
    cola = load_task("CoLA", data_root)
    assert cola.evals[""].text_a[0] == "The sailors rode the breeze clear of the rocks."
    mrpc = load_task("MRPC", data_root)  # BOM header, literal quotes inside the text
    assert mrpc.evals[""].text_b[0].startswith('"The foodservice pie business')
    rte = load_task("rte", data_root)
    assert rte.evals[""].text_b[0] == "Christopher Reeve had an accident."


def test_subsets_take_the_first_rows(data_root: Path):
    data = load_task("rte", data_root, max_train_samples=5, max_eval_samples=3)
    full = load_task("rte", data_root)
    assert data.train.text_a == full.train.text_a[:5] and data.train.label == full.train.label[:5]
    assert len(data.evals[""]) == 3


def _fake_hub(monkeypatch, calls: list, fail: bool = False):
    """``datasets.load_dataset`` answering any GLUE config with two rows per split (never the network)."""
    import datasets

    def fake_load_dataset(path, name):
        calls.append((path, name))
        if fail:  # what datasets raises offline for a config in no cache
            raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)")
        task = get_task(name)
        cols = {c: [f"{c} 1", f"{c} 2"] for c in task.hub_columns}
        split = datasets.Dataset.from_dict({**cols, "label": [0.5, 4.0] if task.is_regression else [1, 0]})
        return datasets.DatasetDict({"train": split, **{s.hub_split: split for s in task.eval_splits}})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)


def test_qnli_has_dev_only_in_shared_data_so_it_comes_from_the_hub(data_root: Path, monkeypatch):
    calls: list = []
    _fake_hub(monkeypatch, calls)
    data = load_task("qnli", data_root)
    assert calls == [("nyu-mll/glue", "qnli")] and data.source == "hub:nyu-mll/glue/qnli"
    dev = read_glue_tsv(get_task("qnli"), data_root / "glue" / "QNLI" / "dev.tsv")
    assert len(dev) == 5463 and dev.label[0] == 0  # entailment


def test_a_data_root_is_per_task(data_root: Path, tmp_path: Path, monkeypatch):
    """A root holding only RTE serves RTE; QQP, absent from it, comes from the public loader."""
    shutil.copytree(data_root / "glue" / "RTE", tmp_path / "glue" / "RTE")
    calls: list = []
    _fake_hub(monkeypatch, calls)
    rte = load_task("rte", tmp_path)
    assert calls == [] and rte.source == str(tmp_path / "glue" / "RTE") and len(rte.train) == 2490
    qqp = load_task("qqp", tmp_path)
    assert calls == [("nyu-mll/glue", "qqp")]
    assert qqp.source == "hub:nyu-mll/glue/qqp" and qqp.train.text_b == ["question2 1", "question2 2"]
    load_task("stsb", tmp_path)  # no STS-B folder either: the hub too
    assert calls[-1] == ("nyu-mll/glue", "stsb")


def test_offline_a_task_missing_from_the_data_root_fails_fast_in_one_line(data_root: Path, monkeypatch):
    calls: list = []
    _fake_hub(monkeypatch, calls, fail=True)
    with pytest.raises(UserError) as err:
        load_task("QQP", data_root)
    message = str(err.value)
    assert "\n" not in message and calls == [("nyu-mll/glue", "qqp")]  # the cache was looked in, once
    assert message.startswith(f"GLUE task QQP is not in the data root {data_root} ")
    assert "`vnr prefetch CONFIG`" in message and str(data_root / "glue" / "QQP") in message
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")  # online, the hub's own error is shown, still in one line
    with pytest.raises(UserError, match=r"^cannot load nyu-mll/glue/qqp from the hub \(ConnectionError: Couldn't"):
        load_task("qqp", data_root)


def test_binary_tsv_is_a_one_line_error_naming_the_file(tmp_path: Path):
    folder = tmp_path / "glue" / "RTE"
    folder.mkdir(parents=True)
    (folder / "train.tsv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary")
    (folder / "dev.tsv").write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\ta\x00\tb\tentailment\n")
    with pytest.raises(UserError, match=r"RTE/train\.tsv: not a UTF-8 text TSV") as err:
        load_task("rte", tmp_path)
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match=r"RTE/dev\.tsv: a binary file \(NUL bytes\)"):
        read_glue_tsv(get_task("rte"), folder / "dev.tsv")


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_qqp_from_small_files(tmp_path: Path):
    head = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"
    _write(tmp_path / "glue" / "QQP" / "train.tsv", [
        head, '1\t1\t2\tHow do I learn "Python"?\tWhat is the best way to learn Python?\t1',
        "2\t3\t4\tWhy is the sky blue?\tHow tall is Everest?\t0",
        "3\t5\t6\tbroken row with too few fields",  # the public file has a few of these: skipped
    ])
    _write(tmp_path / "glue" / "QQP" / "dev.tsv", [head, "9\t7\t8\tA?\tB?\t0"])
    data = load_task("QQP", tmp_path)
    assert data.train.text_a == ['How do I learn "Python"?', "Why is the sky blue?"]
    assert data.train.text_b[1] == "How tall is Everest?"
    assert data.train.label == [1, 0]
    assert data.evals[""].label == [0]
    assert get_task("qqp").metric_names() == ["accuracy", "f1"]


def test_mnli_matched_and_mismatched_from_small_files(tmp_path: Path, monkeypatch):
    cols = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
            "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]

    def row(i: int, s1: str, s2: str, gold: str) -> str:
        return "\t".join([str(i), "p", "q", "fiction", "(", "(", "(", "(", s1, s2, gold, gold])

    folder = tmp_path / "glue" / "MNLI"
    _write(folder / "train.tsv", ["\t".join(cols), row(0, "A man eats.", "Someone eats.", "entailment"),
                                  row(1, "A man eats.", "Nobody eats.", "contradiction"),
                                  row(2, "A man eats.", "He is hungry.", "neutral")])
    _write(folder / "dev_matched.tsv", ["\t".join(cols), row(0, "It rains.", "It is wet.", "entailment")])
    _write(folder / "dev_mismatched.tsv", ["\t".join(cols), row(0, "It rains.", "It is dry.", "contradiction"),
                                           row(1, "Cats purr.", "Cats are pets.", "neutral")])
    data = load_task("mnli", tmp_path)
    assert data.train.label == [0, 2, 1]  # hub order: entailment, neutral, contradiction
    assert data.train.text_b == ["Someone eats.", "Nobody eats.", "He is hungry."]
    assert {k: v.label for k, v in data.evals.items()} == {"": [0], "_mm": [2, 1]}
    assert get_task("MNLI").metric_names() == ["accuracy", "accuracy_mm"]
    (folder / "dev_mismatched.tsv").unlink()  # an incomplete folder is not used: the public source is
    _fake_hub(monkeypatch, [], fail=True)
    with pytest.raises(UserError, match=r"GLUE task MNLI is not in .*MNLI/, which lacks dev_mismatched\.tsv\)"):
        load_task("mnli", tmp_path)


def test_missing_column_and_bad_label_name_the_file(tmp_path: Path):
    _write(tmp_path / "glue" / "RTE" / "train.tsv", ["index\tsentence1\tlabel", "0\ta\tentailment"])
    _write(tmp_path / "glue" / "RTE" / "dev.tsv", ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment"])
    with pytest.raises(UserError, match=r"train\.tsv: column 'sentence2' is missing from the header"):
        load_task("rte", tmp_path)
    _write(tmp_path / "glue" / "RTE" / "train.tsv", ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tmaybe"])
    with pytest.raises(UserError, match=r"train\.tsv:2: label 'maybe' is not one of entailment, not_entailment"):
        load_task("rte", tmp_path)
    _write(tmp_path / "glue" / "CoLA" / "train.tsv", ["gj04\t1\tonly three fields"])
    _write(tmp_path / "glue" / "CoLA" / "dev.tsv", ["gj04\t1\t\tFine."])
    with pytest.raises(UserError, match=r"CoLA/train\.tsv:1: 3 tab-separated fields, expected at least 4"):
        load_task("cola", tmp_path)


def test_unknown_task_and_empty_data_root(tmp_path: Path, monkeypatch):
    with pytest.raises(UserError, match=r"unknown GLUE task 'glue-x'.*CoLA, SST-2"):
        get_task("glue-x")
    calls: list = []
    _fake_hub(monkeypatch, calls, fail=True)
    with pytest.raises(UserError, match=r"GLUE task RTE is not in the data root .*vnr prefetch CONFIG"):
        load_task("rte", tmp_path)  # a root without GLUE data: every task from its public source
    with pytest.raises(UserError, match=r"GLUE task RTE has no data root to come from .*vnr prefetch CONFIG"):
        load_task("rte", None)
    assert [get_task(n).name for n in ("SST-2", "sts_b", "MNLI", "qnli")] == ["sst2", "stsb", "mnli", "qnli"]
    assert len(TASKS) == 9


def test_every_task_record_describes_its_criteria_and_sources():
    names = [c.name for t in TASKS.values() for c in t.criteria]
    assert names == ["cola_mcc", "sst2_acc", "mrpc_acc", "mrpc_f1", "stsb_pearson", "stsb_spearman", "qqp_acc",
                     "qqp_f1", "mnli_m_acc", "mnli_mm_acc", "qnli_acc", "rte_acc", "wnli_acc"]
    for task in TASKS.values():  # each criterion reads a metric the task's runs record
        assert [c.record_key for c in task.criteria] == task.metric_names()
        assert task.sources["public"] == f"hub:nyu-mll/glue/{task.name}"
    assert get_task("mrpc").criteria[1].label == "F1"
    assert get_task("mnli").files == ("train.tsv", "dev_matched.tsv", "dev_mismatched.tsv")


def test_hub_path_through_datasets(monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(path, name):
        calls.append((path, name))
        split = datasets.Dataset.from_dict({"premise": ["p1", "p2"], "hypothesis": ["h1", "h2"],
                                            "label": [2, 0], "idx": [0, 1]})
        return datasets.DatasetDict({"train": split, "validation_matched": split.select([0]),
                                     "validation_mismatched": split.select([1])})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    data = load_task("mnli", None, max_train_samples=1)
    assert calls == [("nyu-mll/glue", "mnli")]
    assert data.train.text_a == ["p1"] and data.train.label == [2]
    assert data.evals["_mm"].text_b == ["h2"] and data.evals["_mm"].label == [0]
    assert data.source == "hub:nyu-mll/glue/mnli"

    def offline(path, name):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(UserError, match=r"cannot load nyu-mll/glue/rte from the hub.*--data-root"):
        load_task("rte", None)
