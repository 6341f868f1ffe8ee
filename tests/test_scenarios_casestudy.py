"""The Vote'n'Rank case-study importer on the shared CSVs, and the paper's scenario built on it."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from test_scenarios_util import PAPER

from ranking.floor.errors import UserError
from ranking.scenarios import load_scenario
from ranking.scenarios.casestudy import load_case_study

SEVEN = {
    "bert-base-uncased", "roberta-base", "albert-base-v2", "deberta-base",
    "distilbert-base-uncased", "distilroberta-base", "gpt2",
}


@pytest.fixture(scope="module")
def case_table(data_root):
    return load_case_study(data_root)


def test_importer_groups_directions_and_values(case_table):
    t = case_table
    assert set(t.models) == SEVEN
    assert t.group_names == ("performance", "efficiency", "fairness")
    by_group = {g: [c for c in t.criteria if c.group == g] for g in t.group_names}
    assert [len(by_group[g]) for g in t.group_names] == [13, 40, 5]
    assert {c.direction for c in by_group["performance"]} == {"higher"}
    assert {c.direction for c in by_group["efficiency"]} == {"lower"}
    assert {c.direction for c in by_group["fairness"]} == {"higher"}
    assert t.frame().loc["roberta-base", "cola.eval_matthews_correlation"] == 60.4
    assert t.frame().loc["gpt2", "winobias_acc_difference"] == 0.9255
    assert t.frame().loc["deberta-base", "rte_gpu_hours"] == pytest.approx(0.03045175978872511)
    assert not t.has_missing


def test_importer_drops_t5_with_a_warning(data_root, caplog):
    with caplog.at_level(logging.WARNING, logger="ranking.scenarios.casestudy"):
        load_case_study(data_root)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "t5-base" in text and "efficiency" in text


def test_importer_missing_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="case study folder"):
        load_case_study(tmp_path)


def test_paper_scenario_selects_the_papers_criteria(case_table):
    sc = load_scenario(PAPER)
    t = sc.build_table(case_table)
    groups = {g: [c for c in t.criteria if c.group == g] for g in t.group_names}
    assert [len(groups[g]) for g in ("performance", "efficiency", "fairness")] == [13, 40, 4]
    assert "winogender_acc_difference" not in t.names
    halves = {c.name for c in groups["performance"] if c.weight == 0.5}
    assert halves == {
        "stsb.eval_pearson", "stsb.eval_spearmanr", "mrpc.eval_accuracy", "mrpc.eval_f1",
        "qqp.eval_accuracy", "qqp.eval_f1",
    }
    assert sum(c.weight for c in groups["performance"]) == 10.0  # ten GLUE tasks
    assert {c.weight for c in groups["efficiency"] + groups["fairness"]} == {1.0}
    assert [c.name for c in sc.columns] == [
        "am_performance", "borda", "borda_weighted", "borda_two_step",
        "borda_performance", "borda_efficiency", "borda_fairness",
    ]
    assert sc.reference == "am_performance" and sc.ties == "votenrank"
    assert sc.column("borda_two_step").group_weights == {"performance": 0.4, "efficiency": 0.3, "fairness": 0.3}
    assert sc.column("borda_weighted").group_weights == {"performance": 1.0, "efficiency": 1.0, "fairness": 1.0}
    np.testing.assert_array_equal(t.values, case_table.select_criteria(t.names).values)
