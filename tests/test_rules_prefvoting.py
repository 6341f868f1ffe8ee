"""Cross-checks against pref_voting on random profiles, where the conventions coincide.

A criterion is a voter; an integer weight w is w identical voters (``rcounts``).
pref_voting's Minimax defaults to margins; ``score_method="winning"`` is the
paper's variant. With ties inside criteria (``ProfileWithTies``) our default
Borda is ``(|M|-1)/2`` per unit weight plus half pref_voting's *symmetric*
Borda score, and the ``votenrank`` Borda is its *domination* Borda score.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pref_voting")

from pref_voting import margin_based_methods as mb  # noqa: E402
from pref_voting import scoring_methods as sm  # noqa: E402
from pref_voting.iterative_methods import baldwin_with_explanation  # noqa: E402
from pref_voting.profiles import Profile  # noqa: E402
from pref_voting.profiles_with_ties import ProfileWithTies  # noqa: E402

from ranking.rules import get_rule  # noqa: E402
from ranking.table import Criterion, ScoreTable  # noqa: E402

CHECK = settings(max_examples=60, deadline=None)


@st.composite
def strict_profiles(draw):
    n = draw(st.integers(2, 6))
    voters = draw(st.integers(1, 7))
    rankings = [draw(st.permutations(range(n))) for _ in range(voters)]
    weights = draw(st.lists(st.integers(1, 4), min_size=voters, max_size=voters))
    return n, rankings, weights


def table_from_rankings(n, rankings, weights):
    """Criterion j scores model c with n - (position of c in ranking j)."""
    x = np.empty((n, len(rankings)))
    for j, r in enumerate(rankings):
        for pos, c in enumerate(r):
            x[c, j] = n - pos
    crits = tuple(Criterion(f"v{j}", weight=float(w)) for j, w in enumerate(weights))
    return ScoreTable(tuple(str(c) for c in range(n)), crits, x)


def as_list(scores: dict, n: int) -> list[float]:
    return [float(scores[c]) for c in range(n)]


def winners(r) -> list[int]:
    return sorted(int(m) for m in r.winners)


@CHECK
@given(strict_profiles())
def test_strict_profiles_agree_with_pref_voting(profile):
    n, rankings, weights = profile
    prof = Profile([list(r) for r in rankings], rcounts=weights)
    t = table_from_rankings(n, rankings, weights)
    for ties in ("default", "votenrank"):  # no ties inside a strict ranking: both conventions apply
        assert get_rule("borda")(t, ties=ties).scores.tolist() == as_list(prof.borda_scores(), n)
        assert get_rule("plurality")(t, ties=ties).scores.tolist() == as_list(prof.plurality_scores(), n)
    # (winners of Borda and Plurality follow from the scores; sm.borda is numba-compiled, slow to start)
    # Dowdall: exact winners from fractions (pref_voting compares float sums, so an exact tie such as
    # 1/3 + 1/2 + ... = 8 2/3 on both sides can come out as a single winner there)
    exact = [sum(Fraction(w, r.index(c) + 1) for r, w in zip(rankings, weights)) for c in range(n)]
    best = [c for c in range(n) if exact[c] == max(exact)]
    assert winners(get_rule("dowdall")(t)) == best
    if len(best) == 1:
        assert sm.dowdall(prof) == best
    assert get_rule("copeland")(t).scores.tolist() == as_list(prof.copeland_scores(), n)
    assert get_rule("minimax")(t).scores.tolist() == as_list(mb.minimax_scores(prof, score_method="winning"), n)
    assert winners(get_rule("minimax")(t)) == mb.minimax(prof)
    cw = prof.condorcet_winner()
    assert winners(get_rule("condorcet")(t)) == ([] if cw is None else [cw])


@CHECK
@given(strict_profiles())
def test_baldwin_agrees_with_pref_voting_when_no_elimination_ties(profile):
    n, rankings, weights = profile
    prof = Profile([list(r) for r in rankings], rcounts=weights)
    ws, rounds = baldwin_with_explanation(prof)
    if any(len(eliminated) > 1 for eliminated, _ in rounds) or len(ws) > 1:
        return  # a tie during elimination: pref_voting and we may break it differently
    r = get_rule("baldwin")(table_from_rankings(n, rankings, weights))
    assert winners(r) == ws
    # reverse elimination order: the k-th eliminated model is in position n - k + 1
    for k, (eliminated, _) in enumerate(rounds):
        assert r.rank_of(str(eliminated[0])) == n - k


@st.composite
def weak_profiles(draw):
    n = draw(st.integers(2, 6))
    voters = draw(st.integers(1, 6))
    levels = [draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)) for _ in range(voters)]
    weights = draw(st.lists(st.integers(1, 4), min_size=voters, max_size=voters))
    return n, levels, weights


@CHECK
@given(weak_profiles())
def test_profiles_with_ties_agree_with_pref_voting(profile):
    n, levels, weights = profile  # levels[j][c]: rank of model c for voter j (1 = best, equal = tied)
    prof = ProfileWithTies([{c: lv[c] for c in range(n)} for lv in levels], rcounts=weights, candidates=list(range(n)))
    x = -np.array(levels, dtype=float).T  # higher is better
    t = ScoreTable(tuple(str(c) for c in range(n)), tuple(Criterion(f"v{j}", weight=float(w)) for j, w in enumerate(weights)), x)
    total = sum(weights)
    sym = as_list(sm.symmetric_borda_scores(prof), n)
    np.testing.assert_allclose(get_rule("borda")(t).scores, [total * (n - 1) / 2 + s / 2 for s in sym])
    dom = as_list(sm.domination_borda_scores(prof), n)
    assert get_rule("borda")(t, ties="votenrank").scores.tolist() == dom
    assert get_rule("copeland")(t).scores.tolist() == as_list(prof.copeland_scores(), n)
    assert get_rule("minimax")(t).scores.tolist() == as_list(mb.minimax_scores(prof, score_method="winning"), n)
    cw = prof.condorcet_winner()
    assert winners(get_rule("condorcet")(t)) == ([] if cw is None else [cw])
