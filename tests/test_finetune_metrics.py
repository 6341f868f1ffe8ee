"""GLUE metrics against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.finetune.metrics import best_over_epochs, compute_metrics, predictions_from_logits
from harness.finetune.tasks import TASKS


def test_accuracy_and_f1():
    # TP=2 FP=1 FN=0 TN=1: precision 2/3, recall 1, F1 = 2*(2/3)/(5/3) = 0.8
    assert compute_metrics("mrpc", [1, 0, 1, 1], [1, 0, 0, 1]) == {"accuracy": 0.75, "f1": 0.8}
    assert compute_metrics("qqp", [0, 0], [0, 0]) == {"accuracy": 1.0, "f1": 0.0}  # no positives: F1 0, no crash
    assert compute_metrics("rte", [0, 1, 1], [0, 0, 1]) == {"accuracy": pytest.approx(2 / 3)}


def test_matthews_correlation():
    # TP=2 FP=1 TN=1 FN=0: (2*1 - 1*0) / sqrt(3 * 2 * 2 * 1) = 2 / sqrt(12)
    mcc = compute_metrics("cola", [1, 1, 1, 0], [1, 1, 0, 0])["matthews_correlation"]
    assert mcc == pytest.approx(2 / math.sqrt(12), abs=1e-12)
    assert compute_metrics("cola", [1, 1, 0, 0], [1, 0, 1, 0])["matthews_correlation"] == 0.0


def test_pearson_and_spearman():
    # x = 1,2,3; y = 1,2,4: cov sum 3, sxx 2, syy 42/9 -> r = 3 / sqrt(84/9) = 9 / sqrt(84)
    out = compute_metrics("stsb", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    assert out["pearson"] == pytest.approx(9 / math.sqrt(84), abs=1e-12)
    assert out["spearman"] == pytest.approx(1.0)
    # ties get average ranks: x ranks 1, 2.5, 2.5, 4; y ranks 1, 3, 2, 4 -> rho = 4.5 / sqrt(4.5 * 5) = sqrt(0.9)
    assert compute_metrics("stsb", [1, 2, 2, 3], [1, 3, 2, 4])["spearman"] == pytest.approx(math.sqrt(0.9))
    # undefined for constant predictions: recorded as None, never a silent number
    assert compute_metrics("stsb", [2.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == {"pearson": None, "spearman": None}


def test_every_task_names_its_metrics():
    expected = {"cola": ["matthews_correlation"], "sst2": ["accuracy"], "mrpc": ["accuracy", "f1"],
                "stsb": ["pearson", "spearman"], "qqp": ["accuracy", "f1"], "mnli": ["accuracy", "accuracy_mm"],
                "qnli": ["accuracy"], "rte": ["accuracy"], "wnli": ["accuracy"]}
    assert {name: t.metric_names() for name, t in TASKS.items()} == expected


def test_predictions_from_logits():
    logits = np.array([[0.1, 0.9], [2.0, -1.0], [0.0, 0.5]])
    assert predictions_from_logits("rte", logits).tolist() == [1, 0, 1]
    assert predictions_from_logits("stsb", np.array([[1.5], [4.0]])).tolist() == [1.5, 4.0]
    assert predictions_from_logits("rte", (logits, None)).tolist() == [1, 0, 1]  # (logits, extras) tuples


def test_best_over_epochs_keeps_the_first_best_and_skips_missing():
    history = [{"epoch": 1.0, "pearson": 0.2, "spearman": None}, {"epoch": 2.0, "pearson": 0.8, "spearman": 0.5},
               {"epoch": 3.0, "pearson": 0.8, "spearman": 0.4}]
    best, epoch = best_over_epochs(history, ["pearson", "spearman"])
    assert best == {"pearson": 0.8, "spearman": 0.5}
    assert epoch == {"pearson": 2.0, "spearman": 2.0}


def test_every_metric_a_task_record_names_can_be_computed():
    from harness.finetune.metrics import COMPUTE, METRIC_NAMES

    assert set(METRIC_NAMES) == set(COMPUTE)
