"""`vnr collect`'s outputs are one unit, bound by the matrix's hash; a task with two metrics counts once."""

from __future__ import annotations

import errno
import os
from dataclasses import replace

import pytest
import yaml

import harness.grid.collect as collect_module
from harness.cli import main
from harness.grid.collect import collect
from harness.grid.config import parse_experiment
from harness.specs import FinetuneSpec
from harness.store import RunStore
from ranking import load_table, rank
from ranking.floor.errors import UserError
from ranking.table import sha256_of

# Three models, five tasks, one seed. Per task, the models' order (best first):
#   stsb (pearson + spearman) A>B>C, mrpc (accuracy + f1) A>B>C, rte C>B>A, sst2 C>B>A, cola C>A>B.
ORDER = {"stsb": "ABC", "mrpc": "ABC", "rte": "CBA", "sst2": "CBA", "cola": "CAB"}
MODELS = {"tiny:bert": "A", "tiny:roberta": "B", "tiny:gpt2": "C"}
TASK_DOC = {
    "name": "w",
    "labels": {m: label for m, label in MODELS.items()},
    "finetune": {"models": list(MODELS), "tasks": list(ORDER), "seeds": [0]},
}


def _record(spec: FinetuneSpec, bump: float = 0.0) -> dict:
    from harness.finetune.tasks import get_task

    score = 0.9 - 0.1 * ORDER[spec.task].index(MODELS[spec.model]) + bump
    return {
        "run_id": spec.run_id(), "kind": "finetune", "model": spec.model, "task": spec.task, "seed": spec.seed,
        "status": "ok", "metrics": {k: score for k in get_task(spec.task).metric_names()},
        "efficiency": {"energy_kwh": 1.0, "duration_h": 2.0, "gpu_hours": 2.0, "co2_kg": 0.25},
    }


@pytest.fixture
def grid(tmp_path):
    exp = parse_experiment(TASK_DOC).with_output(tmp_path / "out")
    store = RunStore(exp.output)
    for spec in exp.specs:
        store.write(_record(spec))
    return exp


def _refill(exp, bump: float) -> None:
    store = RunStore(exp.output)
    for spec in exp.specs:
        store.write(_record(spec, bump))


def test_a_task_with_two_metrics_counts_once_under_weighted(grid):
    result = collect(grid)
    side = yaml.safe_load(result.criteria_path.read_text())["criteria"]
    benchmarks = {c: side[c].get("benchmark") for c in side if side[c]["group"] == "performance"}
    assert benchmarks == {"cola_mcc": None, "sst2_acc": None, "mrpc_acc": "glue/mrpc", "mrpc_f1": "glue/mrpc",
                          "stsb_pearson": "glue/stsb", "stsb_spearman": "glue/stsb", "rte_acc": None}
    assert side["stsb_spearman"]["metric"] == "spearman" and side["stsb_spearman"]["task"] == "stsb"
    assert side["stsb_spearman"]["source"].endswith("; one of stsb's 2 metrics: they share the task's one vote "
                                                    "(1/2 each)")
    assert "one vote" not in side["rte_acc"]["source"]
    perf = load_table(grid.output).group("performance")
    # the default vote (one per benchmark) gives each of a task's two metrics half of its vote
    assert rank(perf, "borda").settings["criterion_weights"] == {
        "cola_mcc": 1.0, "sst2_acc": 1.0, "mrpc_acc": 0.5, "mrpc_f1": 0.5, "stsb_pearson": 0.5,
        "stsb_spearman": 0.5, "rte_acc": 1.0}
    assert set(rank(perf, "borda", vote="column").settings["criterion_weights"].values()) == {1.0}
    got = rank(perf, "borda", setting="weighted").results["borda"]
    # by hand: a criterion weighs own / 5 (the group's own weights add up to 5); Borda points 2, 1, 0
    #   A: stsb 2·(.5+.5) + mrpc 2·(.5+.5) + rte 0 + sst2 0 + cola 1 = 5 → 1.0
    #   B: 1 + 1 + 1 + 1 + 0 = 4 → 0.8;   C: 0 + 0 + 2 + 2 + 2 = 6 → 1.2
    assert {m: got.score_of(m) for m in "ABC"} == pytest.approx({"A": 1.0, "B": 0.8, "C": 1.2})
    assert list(got.winners) == ["C"]
    # one vote per metric (--vote column) A wins: 9 points against C's 6
    assert list(rank(perf, "borda", setting="weighted", vote="column").results["borda"].winners) == ["A"]


def test_the_sidecar_names_and_hashes_the_matrix_and_rank_refuses_a_changed_matrix(grid, capsys):
    result = collect(grid)
    doc = yaml.safe_load(result.criteria_path.read_text())
    assert doc["table"] == "matrix.csv" and doc["sha256"] == sha256_of(result.matrix_path.read_bytes())
    assert main(["rank", str(grid.output), "--rule", "borda"]) == 0
    capsys.readouterr()
    # a matrix written without its sidecar (what an interrupted collect used to leave)
    result.matrix_path.write_text(result.matrix_path.read_text().replace("0.9", "0.95"))
    assert main(["rank", str(grid.output), "--rule", "borda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vnr rank: error: matrix.csv changed since criteria.yaml was written — re-run vnr collect, or "
                   f"remove the sha256 line of {result.criteria_path} if you edited matrix.csv on purpose"]


def _unit(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_failure_between_the_renames_leaves_the_old_unit_whole(grid, monkeypatch, capsys):
    collect(grid)
    before = _unit(grid.output)
    _refill(grid, bump=0.01)  # new results: every file of the unit changes
    real = os.replace

    def replace_but_not_the_sidecar(src, dst):
        if ".vnr-staging-" in str(src) and os.path.basename(dst) == "criteria.yaml":
            raise OSError(errno.EIO, "Input/output error", str(dst))
        return real(src, dst)

    monkeypatch.setattr(collect_module.os, "replace", replace_but_not_the_sidecar)
    with pytest.raises(UserError, match=r"^cannot write .*criteria.yaml: Input/output error — nothing was changed"):
        collect(grid)
    monkeypatch.undo()
    after = _unit(grid.output)
    assert {k: v for k, v in after.items() if k in ("matrix.csv", "criteria.yaml", "seeds.csv", "seed_stats.csv")} \
        == {k: v for k, v in before.items() if k in ("matrix.csv", "criteria.yaml", "seeds.csv", "seed_stats.csv")}
    assert not [p.name for p in grid.output.iterdir() if p.name.startswith(".")]  # no staging folder left
    assert main(["rank", str(grid.output), "--rule", "borda"]) == 0  # the old pair still belongs together
    capsys.readouterr()
    collect(grid)  # and a clean run writes the new unit
    assert _unit(grid.output)["matrix.csv"] != before["matrix.csv"]


def test_results_that_would_not_load_in_rank_replace_nothing(grid):
    """The staged matrix is read back as `vnr rank` reads it before any file is replaced: a model with an empty
    name (a label the config should have refused) fails there, and the previous four files stay byte for byte."""
    collect(grid)
    before = _unit(grid.output)
    _refill(grid, bump=0.03)  # new results: every file would change
    nameless = replace(grid, labels={**grid.labels, "tiny:roberta": ""})
    with pytest.raises(UserError) as err:
        collect(nameless)
    assert str(err.value) == (
        f"the results would not load in vnr rank: {grid.output / 'matrix.csv'}: line 3 has no model name in column "
        "'model': name every model — nothing was changed, the previous files are as they were")
    assert _unit(grid.output) == before
    assert not [p.name for p in grid.output.iterdir() if p.name.startswith(".")]  # no staging folder left
    assert load_table(grid.output).models == ("A", "B", "C")


def test_a_full_disk_while_writing_aside_changes_nothing(grid, monkeypatch):
    collect(grid)
    before = _unit(grid.output)
    _refill(grid, bump=0.02)
    real_open = open
    calls = []

    def open_until_the_disk_is_full(path, mode="r", *args, **kwargs):
        if "x" in mode:
            calls.append(path)
            if len(calls) == 3:  # the side tables are written aside, then the matrix finds the disk full
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(collect_module, "open", open_until_the_disk_is_full, raising=False)
    with pytest.raises(UserError, match=r"No space left on device — nothing was changed; free space"):
        collect(grid)
    monkeypatch.undo()
    assert _unit(grid.output) == before
    assert load_table(grid.output).n_models == 3


def test_collected_files_follow_the_umask(grid):
    old = os.umask(0o022)
    try:
        result = collect(grid)
    finally:
        os.umask(old)
    for path in (result.matrix_path, result.criteria_path, result.seeds_path, result.stats_path):
        assert path.stat().st_mode & 0o777 == 0o644, path
