"""The paper's appendix example: every rule's exact numbers (Vote'n'Rank, Rofin et al. 2023)."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.pairwise import beats, pairwise_ties, pairwise_wins
from ranking.rules import RULES, get_rule, rule_names, worked_example

EXPECTED_RULES = [
    "plurality", "borda", "dowdall", "threshold", "baldwin", "condorcet",
    "copeland", "minimax", "arithmetic_mean", "geometric_mean", "optimality_gap",
]


@pytest.fixture(scope="module")
def table():
    return worked_example()


def test_all_rules_registered_with_kinds():
    assert rule_names() == EXPECTED_RULES
    kinds = {name: RULES[name].kind for name in EXPECTED_RULES}
    assert kinds["borda"] == "positional" and kinds["copeland"] == "majority" and kinds["geometric_mean"] == "mean"


def test_profile_is_the_papers(table):
    orders = {c: "".join(table.frame()[c].sort_values(ascending=False).index) for c in table.names}
    assert orders == {"c1": "ABCD", "c2": "ACDB", "c3": "BDCA", "c4": "CBDA", "c5": "DBCA"}


@pytest.mark.parametrize("ties", ["default", "votenrank"])  # no ties in this profile: conventions agree
def test_worked_example(table, ties):
    def run(name):
        return get_rule(name)(table, ties=ties)

    r = run("plurality")
    assert r.scores.tolist() == [2, 1, 1, 1] and r.winners == ("A",)
    assert r.ranks.tolist() == [1, 2, 2, 2]

    r = run("borda")
    assert r.scores.tolist() == [6, 9, 8, 7] and r.winners == ("B",)
    assert r.ranks.tolist() == [4, 1, 2, 3]

    r = run("dowdall")
    assert r.scores == pytest.approx([2.75, 2.75, 2.5, 1.75 + 2 / 3])
    assert r.winners == ("A", "B") and r.ranks.tolist() == [1, 1, 3, 4]

    r = run("threshold")
    assert r.scores.tolist() == [2, 4, 5, 4] and r.winners == ("C",)
    # B and D both have one last place; D has two second-to-last places, B none
    assert r.ranks.tolist() == [4, 2, 1, 3]

    r = run("baldwin")  # A goes first (Borda 6), then D, then C
    assert r.winners == ("B",) and r.ranks.tolist() == [4, 1, 2, 3]

    r = run("condorcet")
    assert r.winners == ("B",) and r.scores.tolist() == [0, 1, 0, 0]

    r = run("copeland")
    assert r.scores.tolist() == [-3, 3, 1, -1] and r.winners == ("B",)

    r = run("minimax")
    assert r.scores.tolist() == [-3, 0, -3, -3] and r.winners == ("B",)
    assert r.ranks.tolist() == [2, 1, 2, 2]


def test_pairwise_matrices(table):
    w = pairwise_wins(table)
    assert w.tolist() == [[0, 2, 2, 2], [3, 0, 3, 3], [3, 2, 0, 3], [3, 2, 2, 0]]
    assert (w + w.T + np.eye(4) * 5 == 5).all()  # no ties, no missing: every pair splits the 5 votes
    assert pairwise_ties(table).sum() == 0
    assert beats(table)[1].tolist() == [True, False, True, True]


def test_baldwin_elimination_recomputes_borda_on_survivors(table):
    # after A leaves, Borda recomputed on B, C, D: D is lowest; then B beats C 3 to 2
    from ranking.rules import borda

    survivors = table.select_models(["B", "C", "D"])
    assert borda(survivors).scores.tolist() == [6, 5, 4]
    assert borda(table.select_models(["B", "C"])).scores.tolist() == [3, 2]


def test_means(table):
    assert get_rule("arithmetic_mean")(table).scores == pytest.approx([2.2, 2.8, 2.6, 2.4])
    geo = get_rule("geometric_mean")(table).scores
    assert geo == pytest.approx([(4 * 4 * 1 * 1 * 1) ** 0.2, 108 ** 0.2, (2 * 3 * 2 * 4 * 2) ** 0.2, (1 * 2 * 3 * 2 * 4) ** 0.2])
    og = get_rule("optimality_gap")(table, scale=4, gamma=0.75)
    assert og.scores == pytest.approx([-0.3, -0.1, -0.15, -0.2]) and og.winners == ("B",)


def test_weights_multiply_points_and_votes(table):
    # doubling every weight doubles positional scores and keeps every ranking
    doubled = table.with_weights([2.0] * 5)
    for name in EXPECTED_RULES:
        a, b = get_rule(name)(table), get_rule(name)(doubled)
        assert a.ranks.tolist() == b.ranks.tolist(), name
    assert get_rule("borda")(doubled).scores.tolist() == [12, 18, 16, 14]
    assert get_rule("minimax")(doubled).scores.tolist() == [-6, 0, -6, -6]
    # weight 3 on c1 (A > B > C > D): A = 3*3 + 3 = 12, B = 3*2 + 7 = 13, C = 3*1 + 7 = 10, D = 7
    heavy = table.with_weights({"c1": 3.0})
    assert get_rule("borda")(heavy).scores.tolist() == [12, 13, 10, 7]
    assert get_rule("plurality")(heavy).scores.tolist() == [4, 1, 1, 1]
