"""Instance-level aggregation and the synthetic robustness experiments."""

from __future__ import annotations

import pandas as pd
import pytest

from ranking.analysis.instance import aggregate_instances, select_metrics
from ranking.analysis.synthetic import run_synthetic
from ranking.floor.errors import UserError


def _frame(rows):
    return pd.DataFrame(rows, columns=["system", "instance", "metric", "value"])


def test_one_level_vs_two_level_vs_mean_hand_case():
    # metric "big" (large scale): B wins one instance hugely, A wins the other; metric "small": A wins both.
    rows = [
        ("A", "1", "big", 10.0), ("B", "1", "big", 0.0),
        ("A", "2", "big", 0.0), ("B", "2", "big", 100.0),
        ("A", "1", "small", 0.2), ("B", "1", "small", 0.1),
        ("A", "2", "small", 0.2), ("B", "2", "small", 0.1),
    ]
    out = aggregate_instances(_frame(rows))
    assert out["mean"]["ranking"] == ["B", "A"]  # the large scale dominates the mean
    assert out["one_level"]["ranking"] == ["A", "B"]  # A first in 3 of 4 rankings
    # two-level: big is a tie (1.5 each), small goes to A
    assert out["two_level"]["ranking"] == ["A", "B"]
    assert out["kendall_tau"]["one_level_vs_two_level"] == 1.0


def test_human_reference_and_selection():
    rows = [(s, str(i), m, v) for i in range(3) for s, m, v in
            [("A", "H:overall", 3.0), ("B", "H:overall", 1.0), ("A", "bleu", 1.0), ("B", "bleu", 2.0)]]
    f = _frame(rows)
    out = aggregate_instances(f)
    assert out["metrics"] == ["bleu"] and out["kendall_tau_vs_human"]["two_level"] == -1.0
    assert list(select_metrics(f, None, "only")["metric"].unique()) == ["H:overall"]
    with pytest.raises(UserError, match="--metrics"):
        select_metrics(f, ["rouge"], "exclude")


def test_instance_level_real_file(data_root):
    from ranking.published import load_instance_level

    f = load_instance_level(data_root / "leaderboards" / "ranking_nlp" / "instance_level" / "DIALOG_pc.csv")
    out = aggregate_instances(f, metrics=["ROUGE_.*", "BLEU"])
    assert out["n_systems"] == 4 and len(out["two_level"]["ranking"]) == 4
    assert set(out["metrics"]) == {"ROUGE_WE_1", "ROUGE_WE_2", "ROUGE_L", "ROUGE_1", "ROUGE_2", "BLEU"}


def test_synthetic_clean_case_is_exact():
    rows = run_synthetic(values=[0], phi=5.0, repetitions=5, n_systems=6, n_tasks=4, n_instances=3)
    assert rows[0]["mean_mean"] == 0.0 and rows[0]["one_level_mean"] == 0.0 and rows[0]["two_level_mean"] == 0.0


def test_synthetic_scaling_breaks_the_mean_only():
    rows = run_synthetic(experiment="scaling", values=[1000.0], n_corrupted=1, phi=2.0, repetitions=5,
                         n_systems=6, n_tasks=5, n_instances=5)
    # the rescaled task is corrupted (reversed): the mean follows it, Borda aggregations do not
    assert rows[0]["mean_mean"] == 1.0
    assert rows[0]["one_level_mean"] == 0.0 and rows[0]["two_level_mean"] == 0.0


def test_synthetic_bad_options():
    with pytest.raises(UserError):
        run_synthetic(experiment="nope")
    with pytest.raises(UserError):
        run_synthetic(experiment="scaling", values=[-1.0])
