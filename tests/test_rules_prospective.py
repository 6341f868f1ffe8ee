"""Prospective systems: the LP answers, checked against the weights found and a one-shot full LP."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from ranking.floor.errors import UserError
from ranking.pairwise import criterion_signs, pairwise
from ranking.prospective import STRICT_MARGIN, prospective
from ranking.rules import get_rule, worked_example
from ranking.table import Criterion, ScoreTable


def table(data: dict) -> ScoreTable:
    n = len(next(iter(data.values())))
    return ScoreTable.from_frame(pd.DataFrame(data, index=[f"m{i}" for i in range(n)]))


def full_lp_max_margin(x: np.ndarray, a: int) -> float:
    """max_w min_b sum_j w_j sign(x_aj - x_bj) over the simplex, one LP with every rival (reference)."""
    d = np.delete(criterion_signs(x, slice(a, a + 1))[0], a, axis=0).astype(float)
    k, m = d.shape
    if k == 0:
        return np.inf  # a lone model: no rival to beat
    c = np.r_[np.zeros(m), -1.0]
    res = linprog(
        c, A_ub=np.hstack([-d, np.ones((k, 1))]), b_ub=np.zeros(k), A_eq=[np.r_[np.ones(m), 0.0]], b_eq=[1.0],
        bounds=[(0, 1)] * m + [(None, None)], method="highs",
    )
    return float(res.x[-1])


def test_worked_example_every_model_is_prospective():
    t = worked_example()
    for strict in (False, True):
        found = prospective(t, strict=strict)
        for model, r in found.items():
            assert r.prospective and r.margin == pytest.approx(1.0)
            # the weights found make it the Condorcet winner
            assert get_rule("condorcet")(t.with_weights(r.weights)).winners == (model,)


def test_dominated_model_is_never_prospective():
    t = table({"c1": [3, 2, 1], "c2": [3, 1, 2], "c3": [2, 3, 1]})  # m2 is worse than m0 everywhere
    found = prospective(t)
    assert not found["m2"].prospective and found["m2"].weights is None
    assert found["m0"].prospective and found["m1"].prospective


def test_weak_versus_strict():
    t = table({"c1": [1, 1], "c2": [2, 2]})  # identical models: they can only tie
    assert all(r.prospective for r in prospective(t).values())
    assert not any(r.prospective for r in prospective(t, strict=True).values())
    # m1 can tie m0 (weight on c2) but never beat it
    t = table({"c1": [2, 1], "c2": [1, 1]})
    weak, strict = prospective(t)["m1"], prospective(t, strict=True)["m1"]
    assert weak.prospective and weak.weights == {"c1": 0.0, "c2": 1.0} and weak.margin == 0.0
    assert not strict.prospective


def test_missing_scores_skip_the_pair():
    # m1 only has c2, where it loses to m0; on c1 the pair is skipped: weight on c1 makes it a (weak) tie
    t = table({"c1": [2, np.nan, 1], "c2": [2, 1, 3]})
    r = prospective(t)["m1"]
    assert r.prospective and r.weights["c1"] == 1.0
    assert not prospective(t, strict=True)["m1"].prospective


def test_bounds_constraints_and_objective():
    t = worked_example()
    # D is last on c1: with at least half the weight there it can at best tie with A
    r = prospective(t, bounds={"c1": (0.5, None)})["D"]
    assert r.prospective and r.margin == pytest.approx(0.0) and r.weights["c1"] == pytest.approx(0.5)
    assert not prospective(t, bounds={"c1": (0.5, None)}, strict=True)["D"].prospective
    # as much weight on c2 (B's last place) as B can afford: one half
    r = prospective(t, objective={"c2": -1})["B"]
    assert r.weights["c2"] == pytest.approx(0.5) and r.margin >= -1e-9
    # extra constraint w_c3 + w_c4 + w_c5 >= 0.4: A (first on c1, c2, last on c3-c5) wins by 0.6 - 0.4
    found = prospective(t, A_ub=[{"c3": -1, "c4": -1, "c5": -1}], b_ub=[-0.4])
    assert found["A"].prospective and found["A"].margin == pytest.approx(0.2)
    assert sum(found["A"].weights[c] for c in ("c3", "c4", "c5")) >= 0.4 - 1e-9
    assert not prospective(t, A_ub=[[0, 0, -1, -1, -1]], b_ub=[-0.6])["A"].prospective
    # bounds as one pair per criterion
    pairs = [(0, 0), (0, 0), (0, 1), (0, 1), (0, 1)]
    assert not prospective(t, bounds=pairs)["A"].prospective


def test_weights_sum_to_one_and_respect_bounds():
    rng = np.random.default_rng(1)
    t = ScoreTable(tuple(f"m{i}" for i in range(30)), tuple(Criterion(f"c{j}") for j in range(6)), rng.random((30, 6)))
    for r in prospective(t, bounds={"c0": (0.1, 0.3)}).values():
        if r.prospective:
            assert sum(r.weights.values()) == pytest.approx(1.0)
            assert 0.1 - 1e-9 <= r.weights["c0"] <= 0.3 + 1e-9
            assert min(r.weights.values()) >= 0


def test_bad_arguments():
    t = worked_example()
    with pytest.raises(UserError, match="unknown criterion 'c9'"):
        prospective(t, bounds={"c9": (0, 1)})
    with pytest.raises(UserError, match="need 0 <= low <= high"):
        prospective(t, bounds={"c1": (0.5, 0.2)})
    with pytest.raises(UserError, match="need 0 <= low <= high"):
        prospective(t, bounds={"c1": (-0.5, 1)})
    with pytest.raises(UserError, match="no weight vector satisfies"):
        prospective(t, bounds={"c1": (0.6, 1), "c2": (0.6, 1)})
    with pytest.raises(UserError, match="both A_ub and b_ub"):
        prospective(t, A_ub=[[1, 0, 0, 0, 0]])
    with pytest.raises(UserError, match="A_ub has 1 rows but b_ub has 2"):
        prospective(t, A_ub=[[1, 0, 0, 0, 0]], b_ub=[1, 2])
    with pytest.raises(UserError, match="5 coefficients"):
        prospective(t, objective=[1, 2])
    with pytest.raises(UserError, match="objective must hold numbers"):
        prospective(t, objective={"c1": "x"})
    with pytest.raises(UserError, match="unknown criterion 'zz'"):
        prospective(t, A_ub=[{"zz": 1}], b_ub=[1])


@st.composite
def small_tables(draw):
    n = draw(st.integers(1, 12))
    m = draw(st.integers(1, 6))
    x = np.array(draw(st.lists(st.integers(0, 3), min_size=n * m, max_size=n * m)), dtype=float).reshape(n, m)
    holes = np.array(draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m))).reshape(n, m)
    holes[:, 0] = False
    holes[np.arange(m) % n, np.arange(m)] = False
    x[holes & draw(st.booleans())] = np.nan
    return ScoreTable(tuple(f"m{i}" for i in range(n)), tuple(Criterion(f"c{j}") for j in range(m)), x)


@settings(max_examples=40, deadline=None)
@given(small_tables())
def test_agrees_with_one_shot_full_lp(t):
    weak, strict = prospective(t), prospective(t, strict=True)
    x = t.oriented
    for a, model in enumerate(t.models):
        best = full_lp_max_margin(x, a)
        assert weak[model].prospective == (best >= -1e-7), model
        assert strict[model].prospective == (best >= STRICT_MARGIN), model
        if weak[model].prospective:
            assert weak[model].margin == pytest.approx(best, abs=1e-7)
            assert strict[model].prospective == (weak[model].margin >= STRICT_MARGIN)
            # the weights found: no rival beats it by weighted majority
            w = np.array([weak[model].weights[c] for c in t.names])
            if w.sum() > 0 and t.n_models > 1:
                pw = pairwise(t.with_weights(w))
                assert not (pw.margins[:, a] > 1e-7).any()


def _answers(found):
    return {m: (r.prospective, r.margin, r.weights) for m, r in found.items()}


@settings(max_examples=25, deadline=None)
@given(small_tables(), st.booleans())
def test_the_fast_way_gives_the_very_same_answers(t, strict):
    """The pre-LP test and the direct HiGHS calls change nothing: the same models, margins and weights (bit for
    bit) as solving every model's LP through scipy's linprog."""
    import ranking.prospective as p

    fast = _answers(prospective(t, strict=strict))
    kept = p._HIGHS, p.outvoted
    try:
        p._HIGHS = None
        p.outvoted = lambda signs, rows, weighable, strict: np.zeros(len(rows), dtype=bool)
        slow = _answers(prospective(t, strict=strict))
    finally:
        p._HIGHS, p.outvoted = kept
    assert fast == slow


def test_the_direct_solver_is_linprog_bit_for_bit():
    import ranking.prospective as p

    if p._HIGHS is None:
        pytest.skip("this scipy does not bundle HiGHS's binding: linprog solves every LP")
    rng = np.random.default_rng(3)
    t = ScoreTable(tuple(f"m{i}" for i in range(60)), tuple(Criterion(f"c{j}") for j in range(8)), rng.random((60, 8)))
    for strict, objective in ((False, None), (True, None), (False, {"c0": 1.0})):
        fast = _answers(prospective(t, strict=strict, objective=objective, bounds={"c1": (0.05, 0.5)}))
        kept = p._HIGHS
        try:
            p._HIGHS = None
            slow = _answers(prospective(t, strict=strict, objective=objective, bounds={"c1": (0.05, 0.5)}))
        finally:
            p._HIGHS = kept
        assert fast == slow
        assert sum(r[0] for r in fast.values()) > 0


def test_a_model_outvoted_everywhere_is_settled_before_its_lp():
    """m1 loses to m0 on every criterion: not prospective (weak or strict) without an LP; m2 ties m0 on c1 and
    loses elsewhere: weakly prospective (all weight on c1: a tie), not strictly — the LP decides, as before."""
    from ranking.prospective import outvoted

    x = np.array([[3.0, 3.0, 3.0], [1.0, 2.0, 2.0], [3.0, 1.0, 1.0]])
    s = criterion_signs(x, np.arange(3))
    every = np.ones(3, dtype=bool)
    assert outvoted(s, np.arange(3), every, strict=False).tolist() == [False, True, False]
    assert outvoted(s, np.arange(3), every, strict=True).tolist() == [False, True, True]
    # a criterion that may carry no weight does not count: m1 beats m0 there, still outvoted where it counts
    x[1, 2] = 4.0
    s = criterion_signs(x, np.arange(3))
    assert outvoted(s, np.arange(3), np.array([True, True, False]), strict=False).tolist() == [False, True, False]
    assert outvoted(s, np.arange(3), every, strict=False).tolist() == [False, False, False]
    t = table({"c1": [3, 1, 3], "c2": [3, 2, 1], "c3": [3, 2, 1]})
    found, strictly = prospective(t), prospective(t, strict=True)
    assert [found[m].prospective for m in t.models] == [True, False, True]
    assert found["m2"].weights == {"c1": 1.0, "c2": 0.0, "c3": 0.0} and found["m2"].margin == 0.0
    assert [strictly[m].prospective for m in t.models] == [True, False, False]


def test_the_bench_runs_and_agrees():
    """scripts/bench_prospective.py (a small table): ours beside the way before on two tables, the same answers."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_prospective.py"
    spec = importlib.util.spec_from_file_location("bench_prospective", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--models", "60", "--criteria", "8"]) == 0
