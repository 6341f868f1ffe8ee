"""Rank intervals and tiers (``vnr rank --intervals``): exact where the data separate, one tier where they cannot,
simultaneous coverage of the true ranks by simulation, the vectorised scorers equal to the rules, the CLI contract."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from vnr_cli import vnr

from ranking.api import rank
from ranking.intervals import (
    batch_scorer,
    critical_value,
    draw_source,
    rank_bounds,
    rank_intervals,
    score_draws,
    tie_recentred,
    tiers_of,
)
from ranking.rules import rule_names
from ranking.settings import apply_setting as rank_one
from ranking.table import Criterion, ScoreTable


def table_of(values, errors, names=None, directions=None):
    values = np.asarray(values, dtype=float)
    n, m = values.shape
    names = names or tuple("ABCDEFGH"[:n])
    crits = tuple(Criterion(f"c{j}", direction=(directions or {}).get(j, "higher")) for j in range(m))
    return ScoreTable(tuple(names), crits, values, standard_errors=np.broadcast_to(errors, values.shape))


def test_separated_data_give_exact_intervals_and_one_tier_per_model():
    # A > B > C > D on every criterion, far beyond the noise: every pair is settled
    values = np.array([[4.0, 40, 400, 4000, 4], [3, 30, 300, 3000, 3], [2, 20, 200, 2000, 2], [1, 10, 100, 1000, 1]])
    t = table_of(values + 10, 1e-3)
    res = rank(t, "all", intervals=True, draws=200)
    strict = [n for n, r in res.results.items() if len(set(r.ranks.tolist())) == 4]
    assert set(strict) == {"borda", "dowdall", "threshold", "baldwin", "copeland", "arithmetic_mean",
                           "geometric_mean", "optimality_gap"}  # plurality, minimax, condorcet tie the rest
    # threshold's score (weighted non-last places) is 5, 5, 5, 0: its further lexicographic keys (fewest last or
    # second-to-last places, ...) separate A, B, C in every draw, so they too are exact (the bug of issue #38)
    for name in strict:
        iv = res.intervals[name]
        assert iv.rank_lo.tolist() == [1, 2, 3, 4], name
        assert iv.rank_hi.tolist() == [1, 2, 3, 4], name
        assert iv.tier.tolist() == [1, 2, 3, 4], name
    # condorcet: A in position 1, the others share position 2 and are not separated from each other
    iv = res.intervals["condorcet"]
    assert (iv.rank_lo.tolist(), iv.rank_hi.tolist(), iv.tier.tolist()) == ([1, 2, 2, 2], [1, 4, 4, 4], [1, 2, 2, 2])


def test_indistinguishable_data_give_one_tier():
    t = table_of(np.full((5, 6), 0.7), 0.05, names=tuple("ABCDE"))
    res = rank(t, ["borda", "copeland", "arithmetic_mean", "plurality"], intervals=True, draws=200, seed=3)
    for name, iv in res.intervals.items():
        assert iv.tier.tolist() == [1] * 5, name
        assert iv.rank_lo.tolist() == [1] * 5, name
        assert iv.rank_hi.tolist() == [5] * 5, name


def test_hand_worked_bounds_and_tiers():
    s, sigma = np.array([10.0, 9.0, 2.0, np.nan]), np.array([1.0, 1.0, 0.5, 0.0])
    lo, hi = rank_bounds(s, sigma, 2.0)
    assert lo[:3].tolist() == [1, 1, 3] and hi[:3].tolist() == [2, 2, 3] and np.isnan(lo[3])
    assert tiers_of(s, sigma, 2.0)[:3].tolist() == [1, 1, 2]
    # c = 0 (nothing uncertain): the point order, ties unseparated
    lo, hi = rank_bounds(np.array([3.0, 3.0, 1.0]), np.zeros(3), 0.0)
    assert lo.tolist() == [1, 1, 3] and hi.tolist() == [2, 2, 3]


def test_tier_opens_only_below_every_member():
    # intervals A [11, 13], B [9.5, 11.5], C [8.5, 10.5], D [0, 2]: B overlaps A; C is surely below A
    # (10.5 < 11) but not below B, so it stays in T1; D is below all three and opens T2
    s, sigma = np.array([12.0, 10.5, 9.5, 1.0]), np.ones(4)
    assert tiers_of(s, sigma, 1.0).tolist() == [1, 1, 1, 2]


def test_critical_value_equals_brute_force_max_over_pairs():
    rng = np.random.default_rng(0)
    for trial in range(5):
        d = rng.standard_normal((200, 7)) * rng.uniform(0.1, 3, 7)
        sigma = rng.uniform(0.1, 3, 7)
        sigma[0] = 0.0 if trial % 2 else sigma[0]
        if trial % 2:
            d[:, 0] = 0.0
        pairs = (d[:, :, None] - d[:, None, :]) / np.where((sigma[:, None] + sigma[None]) > 0,
                                                            sigma[:, None] + sigma[None], np.inf)
        m = pairs.reshape(200, -1).max(axis=1)
        expected = np.sort(m)[int(np.ceil(0.9 * 200)) - 1]
        assert critical_value(d, sigma, 0.9) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("tie_free", [False, True])
def test_vectorised_scorers_equal_the_rules(tie_free):
    rng = np.random.default_rng(1)
    values = rng.integers(0, 4, size=(9, 5)).astype(float)  # many ties
    values[2, 1] = np.nan
    errors = np.abs(rng.normal(size=values.shape)) * 0.5 + (0.01 if tie_free else 0.0)
    if not tie_free:
        errors[:, :2] = 0.0  # fixed columns: ties in every draw
    t = table_of(values, errors, names=tuple(f"M{i}" for i in range(9)), directions={3: "lower"})
    source = draw_source(t)
    assert source.tie_free is tie_free
    draws = source.sample(np.random.default_rng(0), 4)
    for rule in ("plurality", "borda", "dowdall", "threshold", "arithmetic_mean", "copeland", "minimax",
                 "condorcet", "baldwin"):
        for ties in ("default", "votenrank"):
            fast = batch_scorer(t, rule, "basic", {"ties": ties}, source.tie_free)
            expected = np.array([rank_one(t.with_values(v), rule, ties=ties).scores for v in draws])
            np.testing.assert_allclose(fast(draws), expected, rtol=0, atol=1e-12, err_msg=f"{rule} {ties}")
    assert batch_scorer(t, "geometric_mean", "basic", {}) is None  # scored draw by draw by the rule itself
    complete = table_of(np.nan_to_num(values, nan=2.5), errors, names=t.models).with_weights([1.0, 2.0, 1.0, 0.5, 1.0])
    complete_draws = draw_source(complete).sample(np.random.default_rng(1), 4)
    for rule in ("borda", "dowdall"):  # complete scores: straight from the sort
        fast = batch_scorer(complete, rule, "basic", {"ties": "default"}, draw_source(complete).tie_free)
        expected = np.array([rank_one(complete.with_values(v), rule).scores for v in complete_draws])
        np.testing.assert_allclose(fast(complete_draws), expected, rtol=0, atol=1e-12, err_msg=f"complete {rule}")
    weighted = t.with_weights([1.0, 2.5, 0.5, 1.0, 0.0])  # unequal weights and an unused criterion
    for rule in ("borda", "copeland", "minimax", "condorcet", "baldwin", "arithmetic_mean"):
        fast = batch_scorer(weighted, rule, "basic", {"ties": "default"}, source.tie_free)
        expected = np.array([rank_one(weighted.with_values(v), rule).scores for v in draws])
        np.testing.assert_allclose(fast(draws), expected, rtol=0, atol=1e-12, err_msg=f"weighted {rule}")


def test_seed_bootstrap_source(tmp_path):
    t = table_of([[0.9, 0.5], [0.8, 0.6], [0.2, 0.1]], 0.0)
    t = t.with_standard_errors(None)
    t.to_csv(tmp_path / "matrix.csv")
    rows = ["model,criterion,seed,value"]
    for m, base in (("A", 0.9), ("B", 0.8), ("C", 0.2)):
        rows += [f"{m},c0,{s},{base + d}" for s, d in enumerate((-0.05, 0.0, 0.05))]
    (tmp_path / "seeds.csv").write_text("\n".join(rows) + "\n")
    loaded = ScoreTable.load(tmp_path)
    source = draw_source(loaded)
    assert source.kind == "seeds" and source.cells == 3
    draws = source.sample(np.random.default_rng(0), 50)
    assert np.all(draws[:, :, 1] == loaded.values[:, 1])  # no seeds: fixed
    # the mean of three drawn seeds, each seed spread about the cell's mean by sqrt(3 / 2) (unbiased variance)
    spread = 0.05 * np.sqrt(1.5)
    assert set(np.round(draws[:, 0, 0] - 0.9, 6)) <= {round(k / 3 * spread - spread, 6) for k in range(7)}
    res = rank(loaded, "borda", intervals=True, draws=100)
    assert "seed-bootstrap resamples" in res.settings["intervals"]["described"]
    assert res.intervals["borda"].rank_lo.tolist()[2] == 3  # C is last in every resample


def test_a_table_without_uncertainty_is_refused_in_one_line(tmp_path, capsys):
    t = table_of([[1.0, 2.0], [2.0, 1.0]], 0.0).with_standard_errors(None)
    t.to_csv(tmp_path / "plain.csv", tmp_path / "plain.yaml")
    code, out, err = vnr(capsys, "rank", tmp_path / "plain.csv", "--intervals")
    assert code == 2 and out == ""
    assert "carries no uncertainty" in err and len(err.strip().splitlines()) == 1
    code, _, err = vnr(capsys, "rank", tmp_path / "plain.csv", "--level", "0.9")
    assert code == 2 and "--level only applies with --intervals" in err


@pytest.fixture()
def noisy_csv(tmp_path: Path) -> Path:
    values = np.array([[0.90, 0.80, 0.70], [0.89, 0.81, 0.69], [0.50, 0.40, 0.30], [0.10, 0.20, 0.15]])
    table_of(values, 0.01).to_csv(tmp_path / "scores.csv", tmp_path / "scores.yaml")
    return tmp_path / "scores.csv"


def test_cli_csv_json_and_table_carry_intervals_and_tiers(noisy_csv, capsys):
    code, out, err = vnr(capsys, "rank", noisy_csv, "--rule", "borda", "arithmetic_mean", "--intervals",
                         "--draws", "300", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["model", "borda_score", "borda_rank", "borda_rank_lo", "borda_rank_hi", "borda_tier",
                             "arithmetic_mean_score", "arithmetic_mean_rank", "arithmetic_mean_rank_lo",
                             "arithmetic_mean_rank_hi", "arithmetic_mean_tier"]
    by = {r["model"]: r for r in rows}
    # A and B are within the noise of each other, C and D are clearly below
    assert (by["A"]["arithmetic_mean_rank_lo"], by["A"]["arithmetic_mean_rank_hi"]) == ("1", "2")
    assert (by["C"]["arithmetic_mean_rank_lo"], by["C"]["arithmetic_mean_rank_hi"]) == ("3", "3")
    assert [by[m]["arithmetic_mean_tier"] for m in "ABCD"] == ["1", "1", "2", "3"]
    code, out, _ = vnr(capsys, "rank", noisy_csv, "--rule", "borda", "--intervals", "--draws", "300",
                       "--format", "json")
    doc = json.loads(out)
    assert doc["borda"]["tier"]["D"] == 3 and doc["borda"]["rank_lo"]["A"] == 1
    assert doc["settings"]["intervals"]["draws"] == 300 and doc["settings"]["intervals"]["source"] == "standard_errors"
    code, out, _ = vnr(capsys, "rank", noisy_csv, "--rule", "borda", "--intervals", "--draws", "300")
    assert "interval" in out and "T1" in out and "300 draws from the scores' standard errors" in out


@pytest.mark.parametrize("tied", [False, True], ids=["near_ties", "exact_ties"])
def test_simultaneous_coverage_of_true_ranks(tied):
    """Tables drawn around known true scores: every model's true rank inside its interval in >= 95 % of them
    (within Monte-Carlo error: 200 tables, binomial sd ~1.5 %, allowed down to 92 %). Neighbours within the
    noise of each other, or (``exact_ties``) two pairs with equal true scores, where the true ranks tie."""
    rng = np.random.default_rng(2024)
    true = np.array([[0.80, 0.70, 0.75, 0.60, 0.82, 0.71],
                     [0.79, 0.72, 0.74, 0.61, 0.80, 0.70],
                     [0.70, 0.60, 0.70, 0.55, 0.70, 0.66],
                     [0.71, 0.61, 0.66, 0.50, 0.72, 0.64],
                     [0.50, 0.50, 0.50, 0.40, 0.50, 0.50]])
    if tied:
        true[1], true[3] = true[0], true[2]
    se = 0.02
    rules = ("borda", "copeland", "arithmetic_mean")
    truth = table_of(true, se, names=tuple("ABCDE"))
    true_ranks = {r: rank_one(truth, r).ranks for r in rules}
    covered = {r: 0 for r in rules}
    n_tables = 200
    for _ in range(n_tables):
        observed = table_of(true + rng.standard_normal(true.shape) * se, se, names=tuple("ABCDE"))
        point = rank(observed, list(rules))
        found = rank_intervals(observed, point.results, source=draw_source(observed), draws=200,
                               seed=int(rng.integers(1 << 30)))
        for r in rules:
            iv = found[r]
            covered[r] += bool(np.all((iv.rank_lo <= true_ranks[r]) & (true_ranks[r] <= iv.rank_hi)))
    for r in rules:
        assert covered[r] / n_tables >= 0.92, (r, covered[r])


def test_every_rule_intervals_contain_the_point_rank():
    rng = np.random.default_rng(5)
    t = table_of(rng.uniform(0.2, 1.0, (6, 4)), 0.05, names=tuple("ABCDEF"))
    res = rank(t, "all", intervals=True, draws=60)
    assert set(res.intervals) | set(res.settings["intervals"]["without"]) == set(rule_names())
    for name, iv in res.intervals.items():
        ranks = res.results[name].ranks
        assert np.all((iv.rank_lo <= ranks) & (ranks <= iv.rank_hi)), name
        assert np.nanmin(iv.tier) == 1, name


def test_draws_are_chunked_and_reproducible(monkeypatch):
    import ranking.intervals as intervals

    rng = np.random.default_rng(9)
    t = table_of(rng.uniform(size=(5, 3)), 0.1, names=tuple("ABCDE"))
    whole = score_draws(t, "borda", draw_source(t), 30, seed=4)
    monkeypatch.setattr(intervals, "CHUNK_ELEMENTS", 16)  # one draw per chunk
    assert np.array_equal(score_draws(t, "borda", draw_source(t), 30, seed=4), whole)


def test_models_with_few_scores_are_flagged(tmp_path, capsys):
    values = np.array([[0.9, 0.8, 0.7, 0.6], [0.95, np.nan, np.nan, np.nan], [0.5, 0.4, 0.6, 0.5]])
    table_of(values, 0.01, names=("A", "B", "C")).to_csv(tmp_path / "few.csv", tmp_path / "few.yaml")
    code, out, err = vnr(capsys, "rank", tmp_path / "few.csv", "--rule", "borda")
    assert code == 0, err
    assert "B (1/4)" in out and "scores on only k of the m criteria" in out
    code, out, _ = vnr(capsys, "rank", tmp_path / "few.csv", "--rule", "borda", "--format", "json")
    assert json.loads(out)["settings"]["few_scores"] == {"B": "1/4"}


def test_weighted_setting_scores_the_draws_as_the_rule_does():
    from dataclasses import replace as with_

    rng = np.random.default_rng(11)
    t = table_of(rng.uniform(0.3, 1.0, (6, 4)), 0.05, names=tuple("ABCDEF"))
    t = t.with_criteria([with_(c, group="p" if j < 3 else "e") for j, c in enumerate(t.criteria)])
    gw = {"p": 0.3, "e": 0.7}
    res = rank(t, ["borda", "copeland", "geometric_mean"], setting="weighted", group_weights=gw,
               intervals=True, draws=40, seed=2)
    draws = tie_recentred(draw_source(t)).sample(np.random.default_rng(2), 40)  # what the intervals draw
    for rule, iv in res.intervals.items():
        expected = np.array([rank_one(t.with_values(v), rule, setting="weighted", group_weights=gw).scores
                             for v in draws])
        sigma = expected.std(axis=0)
        np.testing.assert_allclose(iv.sigma, np.where(sigma <= 1e-12, 0.0, sigma), atol=1e-12, err_msg=rule)


def test_vectorised_scorers_orient_a_closest_to_target_column():
    """A signed bias column (best at 0) in the drawn tables: the fast scorers read it as the rules do."""
    rng = np.random.default_rng(3)
    values = np.column_stack([rng.normal(0.6, 0.1, 6), rng.normal(0.0, 0.5, 6), rng.normal(1.0, 0.2, 6)])
    errors = np.full(values.shape, 0.05)
    base = table_of(values, errors, names=tuple(f"M{i}" for i in range(6)), directions={2: "lower"})
    crits = list(base.criteria)
    crits[1] = Criterion(crits[1].name, direction="target", target=0.0)
    t = base.with_criteria(crits)
    source = draw_source(t)
    draws = source.sample(np.random.default_rng(0), 4)
    for rule in ("borda", "plurality", "copeland", "minimax", "arithmetic_mean"):
        fast = batch_scorer(t, rule, "basic", {"ties": "default"}, source.tie_free)
        expected = np.array([rank_one(t.with_values(v), rule).scores for v in draws])
        np.testing.assert_allclose(fast(draws), expected, rtol=0, atol=1e-12, err_msg=rule)
