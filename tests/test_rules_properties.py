"""Axiomatic properties of the rules on random tables (hypothesis), and independent re-derivations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranking.pairwise import pairwise
from ranking.rules import THRESHOLD, borda, get_rule, position_counts, rule_names, threshold_vector
from ranking.table import Criterion, ScoreTable

# The rule sets come from the properties declared at each rule's registration.
ALL = rule_names()
VOTING = [n for n in ALL if get_rule(n).kind != "mean"]
CONDORCET_CONSISTENT = rule_names(condorcet_consistent=True)
PARETO_STRICT = rule_names(pareto_strict=True)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tables(draw, *, min_n=2, max_n=6, max_m=5, missing=False, float_weights=False):
    n = draw(st.integers(min_n, max_n))
    m = draw(st.integers(1, max_m))
    cells = draw(st.lists(st.integers(1, 5), min_size=n * m, max_size=n * m))
    x = np.array(cells, dtype=float).reshape(n, m)
    if missing:
        holes = np.array(draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m))).reshape(n, m)
        holes[:, 0] = False  # column 0 stays complete: no empty rows
        holes[np.arange(m) % n, np.arange(m)] = False  # and every column keeps a score
        x[holes] = np.nan
    weight = st.floats(0.1, 3.0) if float_weights else st.integers(1, 3)
    weights = draw(st.lists(weight, min_size=m, max_size=m))
    crits = tuple(Criterion(f"c{j}", weight=float(w)) for j, w in enumerate(weights))
    return ScoreTable(tuple(f"m{i}" for i in range(n)), crits, x)


def run(name, table, **kw):
    return get_rule(name)(table, **kw)


def same(a, b):
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.ranks, b.ranks)


ties_st = st.sampled_from(["default", "votenrank"])


@SETTINGS
@given(tables(missing=True, float_weights=True), st.randoms(use_true_random=False), ties_st)
def test_neutrality_permuting_models_permutes_results(table, rnd, ties):
    order = list(range(table.n_models))
    rnd.shuffle(order)
    perm = table.select_models([table.models[i] for i in order])
    for name in ALL:
        a, b = run(name, table, ties=ties), run(name, perm, ties=ties)
        np.testing.assert_allclose(a.scores[order], b.scores, rtol=1e-9, atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(a.ranks[order], b.ranks, err_msg=name)


@SETTINGS
@given(tables(missing=True, float_weights=True), st.randoms(use_true_random=False), ties_st)
def test_anonymity_permuting_criteria_changes_nothing(table, rnd, ties):
    names = list(table.names)
    rnd.shuffle(names)
    perm = table.select_criteria(names)
    for name in ALL:
        same(run(name, table, ties=ties), run(name, perm, ties=ties))


@SETTINGS
@given(tables(min_n=2), ties_st, st.data())
def test_pareto(table, ties, data):
    # make m0 strictly better than m1 on every criterion
    x = table.values.copy()
    x[0] = np.maximum(x[0], x[1] + data.draw(st.integers(1, 3)))
    t = table.with_values(x)
    for name in ALL:
        r = run(name, t, ties=ties)
        assert r.ranks[0] <= r.ranks[1], name
        if name in PARETO_STRICT:
            assert r.ranks[0] < r.ranks[1], name


@settings(max_examples=150, deadline=None)
@given(tables(min_n=2, max_n=6, max_m=7, float_weights=True))
def test_condorcet_consistency(table):
    beats = pairwise(table).beats
    n = table.n_models
    cw = [a for a in range(n) if all(beats[a, b] for b in range(n) if b != a)]
    for name in CONDORCET_CONSISTENT:
        r = run(name, table)  # Baldwin: default tie convention (half a point per tie), complete data
        if cw:
            assert r.winners == (table.models[cw[0]],), name
    if not cw:
        assert run("condorcet", table).winners == ()


@SETTINGS
@given(tables(missing=True, float_weights=True), st.data(), ties_st)
def test_invariance_to_monotone_rescaling_of_one_criterion(table, data, ties):
    j = data.draw(st.integers(0, table.n_criteria - 1))
    f = data.draw(st.sampled_from([np.exp, lambda v: 3 * v**3 + 7, lambda v: np.log(v) - 100, lambda v: 1e-3 * v]))
    x = table.values.copy()
    x[:, j] = f(x[:, j])
    t = table.with_values(x)
    for name in VOTING:
        same(run(name, table, ties=ties), run(name, t, ties=ties))


@SETTINGS
@given(tables(missing=True))
def test_invariance_to_flipping_a_criterion_direction(table):
    # negate a column and declare it lower-is-better: nothing changes for the voting rules
    x = table.values.copy()
    x[:, 0] = -x[:, 0]
    crits = (Criterion(table.criteria[0].name, direction="lower", weight=table.criteria[0].weight),) + table.criteria[1:]
    flipped = ScoreTable(table.models, crits, x)
    for name in VOTING:
        same(run(name, table), run(name, flipped))


@SETTINGS
@given(tables(missing=True), st.floats(0.5, 100))
def test_geometric_mean_invariant_to_scaling_one_criterion(table, c):
    x = table.values.copy()
    x[:, 0] *= c
    np.testing.assert_array_equal(run("geometric_mean", table).ranks, run("geometric_mean", table.with_values(x)).ranks)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 7), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_conventions_agree_without_ties(n, m, seed):
    x = np.random.default_rng(seed).permuted(np.tile(np.arange(n, dtype=float), (m, 1)), axis=1).T
    t = ScoreTable(tuple(f"m{i}" for i in range(n)), tuple(Criterion(f"c{j}") for j in range(m)), x)
    for name in VOTING:
        same(run(name, t, ties="default"), run(name, t, ties="votenrank"))


# ---------------------------------------------------------------------- independent re-derivations
@SETTINGS
@given(tables(missing=True, float_weights=True), st.sampled_from([0.0, 1.0]))
def test_borda_equals_pairwise_counts(table, atol):
    """Positional Borda (rank_present) = wins + half the ties from the pairwise matrices."""
    pw = pairwise(table, atol=atol)
    np.testing.assert_allclose(borda(table, atol=atol).scores, (pw.wins + 0.5 * pw.ties).sum(axis=1), atol=1e-9)
    np.testing.assert_allclose(borda(table, atol=atol, ties="votenrank").scores, pw.wins.sum(axis=1), atol=1e-9)


def _reference_baldwin(table, ties):
    """Baldwin by re-running the positional Borda count on each survivor sub-table."""
    alive = list(table.models)
    before = {}
    eliminated = 0
    while alive:
        rows = [table.models.index(m) for m in alive]
        cols = [j for j in range(table.n_criteria) if not np.isnan(table.values[rows, j]).all()]
        sub = ScoreTable(tuple(alive), tuple(table.criteria[j] for j in cols), table.values[np.ix_(rows, cols)])
        keep = ~np.isnan(sub.values).all(axis=1)
        s = borda(sub, ties=ties).scores
        lo, hi = np.nanmin(s), np.nanmax(s)
        if np.isclose(lo, hi, rtol=0, atol=1e-9):
            before.update({m: eliminated for m in alive})
            break
        out = [m for m, v, k in zip(alive, s, keep) if k and v <= lo + 1e-9]
        before.update({m: eliminated for m in out})
        eliminated += len(out)
        alive = [m for m in alive if m not in out]
    return [before[m] for m in table.models]


@SETTINGS
@given(tables(missing=True, float_weights=True), ties_st)
def test_baldwin_matches_rerunning_borda_on_survivors(table, ties):
    assert run("baldwin", table, ties=ties).scores.tolist() == _reference_baldwin(table, ties)


@SETTINGS
@given(tables(missing=True, float_weights=True), ties_st)
def test_threshold_matches_vector_by_vector_lexicographic_order(table, ties):
    n = table.n_models
    above, below, m = position_counts(table.oriented)
    keys = []
    for zeros in range(1, n):
        pts = threshold_vector(zeros).points(above, below, m, ties)
        keys.append(np.nansum(pts * table.weights, axis=1))
    keys = np.round(np.array(keys).T, 9)
    expected = [1 + sum(tuple(keys[b]) > tuple(keys[a]) for b in range(n)) for a in range(n)]
    r = run("threshold", table, ties=ties)
    assert r.ranks.tolist() == expected
    np.testing.assert_allclose(r.scores, np.nansum(THRESHOLD.points(above, below, m, ties) * table.weights, axis=1))


def test_every_rule_is_covered():
    assert sorted(ALL) == sorted(rule_names())


@pytest.mark.parametrize("name", ALL)
def test_single_model(name):
    t = ScoreTable(("solo",), (Criterion("c"),), np.array([[0.5]]))
    r = run(name, t)
    assert r.winners == ("solo",) and r.ranks.tolist() == [1]
