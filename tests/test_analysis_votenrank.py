"""Vote'n'Rank analyses: agreement@k, Kendall τ, ties, IIA and missing-score experiments (real rule registry)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ranking.analysis._common import kendall_tau, make_ranker, rank_distance, spearman_rho
from ranking.analysis.votenrank import (
    agreement_at_k,
    compare_rankings,
    discriminative_power,
    iia_experiment,
    missing_experiment,
)
from ranking.floor.errors import UserError
from ranking.table import ScoreTable


def _random_table(n=8, m=5, seed=0) -> ScoreTable:
    rng = np.random.default_rng(seed)
    return ScoreTable.from_frame(pd.DataFrame(rng.normal(size=(n, m)), index=[f"M{i}" for i in range(n)],
                                              columns=[f"t{j}" for j in range(m)]))


def test_agreement_hand_cases():
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    b = np.array([2.0, 1.0, 3.0, 5.0, 4.0])
    assert agreement_at_k(a, b, 1) == 0.0
    assert agreement_at_k(a, b, 2) == 1.0
    assert agreement_at_k(a, b, 3) == 1.0
    assert agreement_at_k(a, b, 1, "least") == 0.0
    assert agreement_at_k(a, b, 2, "least") == 1.0
    # a tie at the boundary enlarges the set: {0, 1} vs {0}
    assert agreement_at_k(np.array([1.0, 1.0, 3.0]), np.array([1.0, 2.0, 3.0]), 1) == 0.5
    with pytest.raises(UserError):
        agreement_at_k(a, b, 0)


def test_kendall_and_ties():
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert kendall_tau([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(4 / 6)
    assert rank_distance([1, 2, 3], [1, 2, 3]) == (0.0, 0.0)
    assert discriminative_power(np.array([1.0, 1.0, 3.0, 4.0, 4.0, 4.0])) == 5
    assert discriminative_power(np.array([1.0, 2.0, np.nan])) == 0
    assert spearman_rho(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])) == pytest.approx(-1.0)


def test_compare_rankings_rows():
    ref = np.array([1.0, 2.0, 3.0])
    rows = compare_rankings({"same": ref, "rev": ref[::-1].copy()}, ref, ks=(1,))
    assert rows[0] == {"rule": "same", "top1": 1.0, "least1": 1.0, "kendall_tau": 1.0, "tied": 0,
                       "distinct_positions": 3}
    assert rows[1]["kendall_tau"] == -1.0 and rows[1]["top1"] == 0.0


def test_iia_mean_never_flips():
    # the arithmetic mean satisfies IIA: adding systems never changes a pair's order
    out = iia_experiment(_random_table(), make_ranker("arithmetic_mean"), repetitions=10, seed=3)
    assert out["flips_mean"] == 0.0 and out["flips_std"] == 0.0 and len(out["flips"]) == 10


def test_iia_borda_can_flip():
    # Borda violates IIA: A beats B alone (2 criteria to 1), but adding C ties them
    x = pd.DataFrame({"t1": [2, 1, 0], "t2": [2, 1, 0], "t3": [0, 2, 1]}, index=["A", "B", "C"])
    t = ScoreTable.from_frame(x)
    out = iia_experiment(t, make_ranker("borda"), repetitions=40, seed=0)
    # only the pair {A, B} flips (A > B alone, tied 4-4 once C joins): one flip in about a third of the draws
    assert set(out["flips"]) == {0, 1} and 0.1 < out["flips_mean"] < 0.6
    assert out == iia_experiment(t, make_ranker("borda"), repetitions=40, seed=0)  # seeded


def test_missing_experiment_is_seeded_and_bounded():
    t = _random_table(n=10, m=6)
    ranker = make_ranker("arithmetic_mean")
    rows = missing_experiment(t, ranker, n_missing=(1, 4), repetitions=20, seed=1)
    assert [r["n_missing"] for r in rows] == [1, 4]
    assert all(-1.0 <= r["rho_mean"] <= 1.0 for r in rows)
    assert rows == missing_experiment(t, ranker, n_missing=(1, 4), repetitions=20, seed=1)


def test_missing_experiment_constant_columns_keep_ranking():
    # identical criteria: a majority rule skipping the hidden pairs still sees every pair decided the same way
    x = pd.DataFrame({f"t{j}": [10 - i for i in range(8)] for j in range(4)}, index=[f"M{i}" for i in range(8)])
    rows = missing_experiment(ScoreTable.from_frame(x), make_ranker("copeland"), n_missing=(1, 3),
                              repetitions=10, seed=0)
    assert [r["rho_mean"] for r in rows] == [1.0, 1.0]


def test_missing_experiment_rejects_too_many():
    t = _random_table(n=3, m=2)
    with pytest.raises(UserError, match="--n-missing"):
        missing_experiment(t, make_ranker("arithmetic_mean"), n_missing=(6,), repetitions=2)


def test_unknown_rule_is_a_user_error():
    with pytest.raises(UserError, match="unknown rule"):
        make_ranker("nope")
