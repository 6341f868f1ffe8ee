"""The ``votenrank`` preset: each of its conventions on a small hand-computed table, beside the default's answer.

The preset (``ranking.settings.PRESETS["votenrank"]``) reproduces the numbers
published with Vote'n'Rank; the default stays the principled reading. Every
expected value below is worked out by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.cli import main
from ranking.floor.errors import UserError
from ranking.prospective import prospective
from ranking.scenarios.compare import compare
from ranking.scenarios.scenario import Scenario
from ranking.settings import PRESETS, apply_setting, get_preset
from ranking.table import Criterion, ScoreTable


def _table(rows: dict[str, list[float]], criteria: list[Criterion]) -> ScoreTable:
    return ScoreTable(tuple(rows), tuple(criteria), np.array(list(rows.values()), dtype=float))


# ---------------------------------------------------------------------- ties
@pytest.fixture
def tied():
    # one criterion, A and B tied first (2), C last (1)
    return _table({"A": [2.0], "B": [2.0], "C": [1.0]}, [Criterion("c")])


def test_ties_borda(tied):
    # default: the tied block fills positions 1-2, Borda points (2, 1) averaged: A = B = 1.5, C = 0
    assert apply_setting(tied, "borda").scores.tolist() == [1.5, 1.5, 0.0]
    # votenrank: the worst tied position, i.e. one point per model strictly below: A = B = 1, C = 0
    assert apply_setting(tied, "borda", preset="votenrank").scores.tolist() == [1.0, 1.0, 0.0]


def test_ties_dowdall(tied):
    # default: (1 + 1/2) / 2 = 0.75 each; votenrank: the best tied position, 1 each; C third: 1/3 both
    assert apply_setting(tied, "dowdall").scores.tolist() == pytest.approx([0.75, 0.75, 1 / 3])
    assert apply_setting(tied, "dowdall", preset="votenrank").scores.tolist() == pytest.approx([1.0, 1.0, 1 / 3])


def test_ties_plurality(tied):
    # default: two models tied first share the point, 1/2 each; votenrank: only a unique first counts
    assert apply_setting(tied, "plurality").scores.tolist() == [0.5, 0.5, 0.0]
    assert apply_setting(tied, "plurality", preset="votenrank").scores.tolist() == [0.0, 0.0, 0.0]


def test_explicit_ties_override_the_preset(tied):
    assert apply_setting(tied, "borda", preset="votenrank", ties="default").scores.tolist() == [1.5, 1.5, 0.0]


# ---------------------------------------------------------------------- weighted
@pytest.fixture
def grouped():
    # group p: p1 (own weight 1) and a two-metric task split into p2a, p2b (1/2 each); group e: e1.
    # A is better on every p column, B on e1.
    crits = [
        Criterion("p1", group="p"),
        Criterion("p2a", weight=0.5, group="p"),
        Criterion("p2b", weight=0.5, group="p"),
        Criterion("e1", group="e"),
    ]
    return _table({"A": [2.0, 2.0, 2.0, 1.0], "B": [1.0, 1.0, 1.0, 2.0]}, crits)


def test_weighted_divides_by_total_own_weight_by_default(grouped):
    # default: p's size is its total own weight 1 + 1/2 + 1/2 = 2 -> weights 1/2, 1/4, 1/4; e: 1.
    # Borda with two models = weight of the criteria a model wins: A = 1/2 + 1/4 + 1/4 = 1, B = 1: a tie.
    r = apply_setting(grouped, "borda", setting="weighted")
    assert r.scores.tolist() == [1.0, 1.0]
    assert r.winners == ("A", "B")


def test_weighted_divides_by_number_of_columns_under_the_preset(grouped):
    # votenrank: p's size is its 3 columns -> weights 1/3, 1/6, 1/6; e: 1.
    # A = 1/3 + 1/6 + 1/6 = 2/3, B = 1: B wins alone.
    r = apply_setting(grouped, "borda", setting="weighted", preset="votenrank")
    assert r.scores.tolist() == pytest.approx([2 / 3, 1.0])
    assert r.winners == ("B",)
    assert r.params["preset"] == "votenrank"


# ---------------------------------------------------------------------- optimality gap
@pytest.fixture
def percent():
    return _table({"A": [100.0, 70.0], "B": [84.0, 84.0]}, [Criterion("t1"), Criterion("t2")])


def test_optimality_gap_gamma(percent):
    # scale 100 (scores exceed 1). default gamma 1: A = (0 + (0.70 - 1)) / 2 = -0.15, B = (0.84 - 1) = -0.16: A wins.
    d = apply_setting(percent, "optimality_gap")
    assert d.scores.tolist() == pytest.approx([-0.15, -0.16])
    assert d.winners == ("A",)
    # votenrank gamma 0.95 (95 on the 0-100 scale): A = (0 + (0.70 - 0.95)) / 2 = -0.125, B = 0.84 - 0.95 = -0.11
    v = apply_setting(percent, "optimality_gap", preset="votenrank")
    assert v.scores.tolist() == pytest.approx([-0.125, -0.11])
    assert v.winners == ("B",)
    assert v.params["gamma"] == 0.95
    # an explicit gamma wins over the preset's
    assert apply_setting(percent, "optimality_gap", preset="votenrank", gamma=1.0).winners == ("A",)


def test_og_gamma_on_the_command_line(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    csv.write_text("model,t1,t2\nA,100,70\nB,84,84\n")
    (tmp_path / "t.yaml").write_text("criteria: {t1: {direction: higher}, t2: {direction: higher}}\n")
    assert main(["rank", str(csv), "--rule", "optimality_gap", "--og-gamma", "0.95", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["optimality_gap"]["winners"] == ["B"]
    assert out["optimality_gap"]["scores"]["B"] == pytest.approx(-0.11)
    assert main(["rank", str(csv), "--rule", "optimality_gap", "--og-gamma", "nan"]) == 2  # its declaration's check
    assert capsys.readouterr().err.strip() == "vnr rank: error: --og-gamma: nan is not a finite number"


# ---------------------------------------------------------------------- geometric mean
@pytest.fixture
def with_zero():
    return _table({"A": [0.0, 90.0], "B": [50.0, 50.0]}, [Criterion("t1"), Criterion("t2")])


def test_geometric_mean_with_a_zero_score(with_zero):
    # default: a score <= 0 has no logarithm: refused, naming the model and the criterion
    with pytest.raises(UserError, match="'A' has 0 on criterion 't1'"):
        apply_setting(with_zero, "geometric_mean")
    # votenrank: as scipy.stats.gmean, a zero makes the product 0: A = 0; B = sqrt(50 * 50) = 50
    r = apply_setting(with_zero, "geometric_mean", preset="votenrank")
    assert r.scores.tolist() == pytest.approx([0.0, 50.0])
    assert r.ranks.tolist() == [2.0, 1.0]


def test_geometric_mean_of_positive_scores_is_the_same_under_both():
    # A = sqrt(4 * 1) = 2, B = sqrt(2 * 2) = 2: a tie either way
    t = _table({"A": [4.0, 1.0], "B": [2.0, 2.0]}, [Criterion("t1"), Criterion("t2")])
    assert apply_setting(t, "geometric_mean").scores.tolist() == pytest.approx([2.0, 2.0])
    assert apply_setting(t, "geometric_mean", preset="votenrank").scores.tolist() == pytest.approx([2.0, 2.0])


def test_geometric_mean_of_huge_scores_does_not_overflow():
    # logs are weighted before exponentiating: sqrt(1e308 * 1e308) = 1e308, not inf
    t = _table({"A": [1e308, 1e308], "B": [1e307, 1e308]}, [Criterion("t1"), Criterion("t2")])
    r = apply_setting(t, "geometric_mean")
    assert r.scores[0] == pytest.approx(1e308)
    assert r.ranks.tolist() == [1.0, 2.0]


# ---------------------------------------------------------------------- prospective
@pytest.fixture
def diagnostic():
    # t1, t2 weighted 1; d is a weight-0 diagnostic column. C is last on t1 and t2, first on d.
    crits = [Criterion("t1"), Criterion("t2"), Criterion("d", weight=0.0)]
    return _table({"A": [3.0, 1.0, 1.0], "B": [1.0, 3.0, 2.0], "C": [0.0, 0.0, 3.0]}, crits)


def test_prospective_searches_weight_zero_columns_only_under_the_preset(diagnostic):
    # default: weights only on t1, t2, where C loses to both rivals: C cannot be a Condorcet winner.
    default = prospective(diagnostic)
    assert {m: r.prospective for m, r in default.items()} == {"A": True, "B": True, "C": False}
    # votenrank: all weight on d makes C beat A and B (margin 1).
    paper = prospective(diagnostic, zero_weight_columns=True)
    assert {m: r.prospective for m, r in paper.items()} == {"A": True, "B": True, "C": True}
    assert paper["C"].weights == {"t1": 0.0, "t2": 0.0, "d": 1.0}


def test_prospective_preset_on_the_command_line(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    csv.write_text("model,t1,t2,d\nA,3,1,1\nB,1,3,2\nC,0,0,3\n")
    (tmp_path / "t.yaml").write_text(
        "criteria: {t1: {direction: higher}, t2: {direction: higher}, d: {direction: higher, weight: 0}}\n"
    )
    assert main(["prospective", str(csv), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["C"]["prospective"] is False
    assert main(["prospective", str(csv), "--format", "json", "--preset", "votenrank"]) == 0
    assert json.loads(capsys.readouterr().out)["C"]["prospective"] is True


@pytest.fixture
def incomplete():
    # t1, t2 weighted 1; D misses t1 and is best on t2.
    nan = float("nan")
    return _table(
        {"A": [3.0, 1.0], "B": [1.0, 3.0], "C": [2.0, 2.0], "D": [nan, 4.0]}, [Criterion("t1"), Criterion("t2")]
    )


def test_prospective_preset_examines_only_models_with_every_score(incomplete):
    # default: D stays, and a pair with D is decided on t2 alone (t1 skipped): D beats everyone by w2, so D is
    # prospective (w2 = 1), and so is A (w1 = 1: D's win on t2 then weighs 0). B needs w2 = 1 to beat A, and C
    # needs w1 = w2 = 1/2 to tie A and B; either way D beats them by w2 > 0: not prospective.
    default = prospective(incomplete)
    assert {m: r.prospective for m, r in default.items()} == {"A": True, "B": False, "C": False, "D": True}
    # votenrank: D misses a score, so it is neither candidate nor rival (the authors' dropna()): A with w1 = 1,
    # B with w2 = 1, and C with w1 = w2 = 1/2 (margin 0 over A and B: a weak winner) are all prospective.
    paper = prospective(incomplete, preset="votenrank")
    assert {m: r.prospective for m, r in paper.items()} == {"A": True, "B": True, "C": True}
    assert paper["C"].weights == pytest.approx({"t1": 0.5, "t2": 0.5}) and paper["C"].margin == pytest.approx(0.0)
    # the argument overrides the preset, either way
    assert set(prospective(incomplete, preset="votenrank", drop_incomplete=False)) == {"A", "B", "C", "D"}
    assert set(prospective(incomplete, drop_incomplete=True)) == {"A", "B", "C"}


def test_prospective_incomplete_means_missing_a_column_the_lp_may_weight():
    # C misses only the weight-0 diagnostic d: the votenrank LP may weight d, so C is left out there;
    # with d held at 0 (zero_weight_columns=False) C's missing d cannot matter, and C stays.
    crits = [Criterion("t1"), Criterion("t2"), Criterion("d", weight=0.0)]
    t = _table({"A": [3.0, 1.0, 1.0], "B": [1.0, 3.0, 2.0], "C": [0.0, 0.0, float("nan")]}, crits)
    assert set(prospective(t, preset="votenrank")) == {"A", "B"}
    assert set(prospective(t, drop_incomplete=True)) == {"A", "B", "C"}
    with pytest.raises(UserError, match="leaves none"):
        prospective(_table({"A": [float("nan"), 1.0], "B": [1.0, float("nan")]}, crits[:2]), drop_incomplete=True)


def test_prospective_incomplete_on_the_command_line(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    csv.write_text("model,t1,t2\nA,3,1\nB,1,3\nC,2,2\nD,,4\n")
    (tmp_path / "t.yaml").write_text("criteria: {t1: {direction: higher}, t2: {direction: higher}}\n")
    assert main(["prospective", str(csv), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert set(json.loads(out.out)) == {"A", "B", "C", "D"} and "left out" not in out.err
    assert main(["prospective", str(csv), "--format", "json", "--preset", "votenrank"]) == 0
    out = capsys.readouterr()
    assert {m: v["prospective"] for m, v in json.loads(out.out).items()} == {"A": True, "B": True, "C": True}
    assert "left out 1 model(s) missing a score" in out.err and out.err.rstrip().endswith(": D")
    assert main(["prospective", str(csv), "--format", "json", "--preset", "votenrank", "--keep-incomplete"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"A", "B", "C", "D"}
    assert main(["prospective", str(csv), "--drop-incomplete"]) == 0
    assert "3 of 3 models are prospective" in capsys.readouterr().out


def test_whatif_prospective_under_the_preset_says_a_model_was_left_out(incomplete):
    from ranking.scenarios.whatif import _prospective

    assert _prospective(incomplete, "D")["prospective"] is True
    assert _prospective(incomplete, "D", "votenrank") == {
        "prospective": False, "weights": None, "group_share": None, "margin": None, "left_out": True
    }
    assert _prospective(incomplete, "B", "votenrank")["prospective"] is True


# ---------------------------------------------------------------------- one flag, one scenario key
def test_rank_preset_flag(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    csv.write_text("model,t1,t2\nA,0,90\nB,50,50\n")
    (tmp_path / "t.yaml").write_text("criteria: {t1: {direction: higher}, t2: {direction: higher}}\n")
    assert main(["rank", str(csv), "--rule", "geometric_mean"]) == 2
    assert "geometric_mean needs positive scores" in capsys.readouterr().err
    assert main(["rank", str(csv), "--rule", "geometric_mean", "--preset", "votenrank", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["geometric_mean"]["scores"] == pytest.approx({"A": 0.0, "B": 50.0})


def test_scenario_preset_key(grouped):
    doc = {
        "preset": "votenrank",
        "groups": {"p": {}, "e": {}},
        "columns": [
            {"name": "w", "rule": "borda", "setting": "weighted"},
            {"name": "og", "rule": "optimality_gap"},
        ],
    }
    sc = Scenario.from_mapping(doc)
    assert sc.ties == "votenrank"
    cmp = compare(sc, grouped)
    assert cmp.results["w"].scores.tolist() == pytest.approx([2 / 3, 1.0])  # / number of columns, as above
    assert cmp.results["og"].params["gamma"] == 0.95
    default = compare(Scenario.from_mapping({k: v for k, v in doc.items() if k != "preset"}), grouped)
    assert default.results["w"].scores.tolist() == [1.0, 1.0]
    assert default.results["og"].params["gamma"] == 1.0
    with_gamma = compare(Scenario.from_mapping({**doc, "og_gamma": 0.5}), grouped)
    assert with_gamma.results["og"].params["gamma"] == 0.5


@pytest.mark.parametrize("bad", [{"preset": "paper"}, {"og_gamma": float("nan")}, {"og_gamma": -1}, {"og_gamma": "x"}])
def test_scenario_preset_keys_are_validated(bad):
    with pytest.raises(UserError):
        Scenario.from_mapping({**bad, "columns": [{"name": "b", "rule": "borda"}]})


def test_default_preset_is_the_principled_one():
    assert get_preset(None) == PRESETS["default"]
    d = PRESETS["default"]
    assert (
        d.ties, d.weighted_divisor, d.og_gamma, d.gm_nonpositive, d.prospective_zero_weight,
        d.drop_incomplete,
    ) == ("default", "total_weight", 1.0, "error", False, False)


def test_paper_case_study_uses_the_preset(data_root):
    from test_scenarios_util import PAPER

    from ranking.scenarios.scenario import load_scenario

    sc = load_scenario(PAPER)
    assert sc.ties == "votenrank"
    assert all(c.params.get("preset") == "votenrank" for c in sc.columns)


def test_superglue_with_the_preset_runs(data_root, capsys):
    assert main(["rank", "configs/leaderboards/superglue.yaml", "--data-root", str(data_root),
                 "--preset", "votenrank", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the settings used (the preset recorded), then every rule: the geometric mean included
    # (two systems have a 0 on MultiRC-F1a: GM 0)
    assert list(out)[0] == "settings" and len(out) == 12
    assert (out["settings"]["preset"], out["settings"]["ties"], out["settings"]["og_gamma"]) == (
        "votenrank", "votenrank", 0.95,
    )
    assert out["geometric_mean"]["scores"]["CBoW"] == 0.0
    # the leaderboard's own Score is the weighted mean (a/b cells half weight each, diagnostics 0)
    raw = pd.read_csv(data_root / "leaderboards/votenrank/superglue.csv")
    assert out["arithmetic_mean"]["scores"]["ERNIE 3.0"] == pytest.approx(float(raw.loc[0, "Score"]), abs=0.05)


LEADERBOARDS = Path(__file__).resolve().parents[1] / "configs" / "leaderboards"

# The prospective systems in the outputs of the authors' notebook "case studies/CS2 - Condorcet Search.ipynb"
# (github.com/PragmaticsLab/vote_and_rank): their LP on the complete rows of each leaderboard.
PAPER_PROSPECTIVE = {
    "superglue": (22, [
        "ERNIE 3.0", "T5 + UDG, Single Model (Google Brain)", "DeBERTa / TuringNLRv4", "SuperGLUE Human Baselines",
        "T5", "AILabs Team, Transformers", "ADAPET (ALBERT) - few-shot", "Most Frequent Class", "CBoW",
        "WARP (ALBERT-XXL-V2) - Few-Shot (32 Examples)",
    ]),
    "glue": (97, [
        "ERNIE", "StructBERT + CLEVER", "DeBERTa / TuringNLRv4", "DeBERTa + CLEVER", "MacALBERT + DKM",
        "ALBERT + DAAF + NAS", "T5", "MT-DNN-SMART", "GLUE Human Baselines",
    ]),
    "value": (6, ["craig.starr", "DuKG", "HERO 1"]),
}


@pytest.mark.parametrize("board", sorted(PAPER_PROSPECTIVE))
def test_preset_reproduces_the_papers_prospective_systems(data_root, board):
    from ranking.loading import load_table

    table = load_table(LEADERBOARDS / f"{board}.yaml", data_root=data_root)
    n_examined, systems = PAPER_PROSPECTIVE[board]
    found = prospective(table, preset="votenrank")
    assert len(found) == n_examined
    assert sorted(m for m, r in found.items() if r.prospective) == sorted(systems)


def test_superglue_prospective_with_incomplete_models_kept(data_root):
    # keeping the two incomplete rows (the default's way) adds exactly them: Outside Best (no CB, WiC, WSC,
    # AX-b, AX-g) and Snorkel (no BoolQ, ReCoRD, AX-g) win where their missing scores skip the pairs
    from ranking.loading import load_table

    table = load_table(LEADERBOARDS / "superglue.yaml", data_root=data_root)
    kept = prospective(table, preset="votenrank", drop_incomplete=False)
    extra = {m for m, r in kept.items() if r.prospective} - set(PAPER_PROSPECTIVE["superglue"][1])
    assert len(kept) == 24 and extra == {"Outside Best", "Snorkel [SuperGLUE v1.9]"}


def test_rank_under_the_preset_leaves_out_incomplete_models_as_the_authors_dropna(capsys, tmp_path):
    """Borda (basic, default ties) on a table whose model D misses c2: the default ranks D on c1 alone (the
    missing pair skipped); the preset ranks A, B, C only (the authors ranked pandas ``dropna()`` rows)."""
    import ranking

    frame = pd.DataFrame({"c1": [3.0, 2.0, 1.0, 4.0], "c2": [1.0, 3.0, 2.0, None]}, index=list("ABCD"))
    table = ScoreTable.from_frame(frame)
    default = ranking.rank(table, rule="borda")
    # c1: D>A>B>C gives D 3, A 2, B 1, C 0; c2 among A, B, C: B>C>A gives B 2, C 1, A 0
    assert default.results["borda"].scores.tolist() == [2.0, 3.0, 1.0, 3.0]
    assert "dropped_incomplete" not in default.settings
    voted = ranking.rank(table, rule="borda", preset="votenrank")
    # A, B, C: c1 A>B>C gives 2, 1, 0; c2 B>C>A gives 0, 2, 1
    assert voted.results["borda"].models == ("A", "B", "C")
    assert voted.results["borda"].scores.tolist() == [2.0, 3.0, 1.0]
    assert voted.settings["dropped_incomplete"] == ["D"]
    kept = ranking.rank(table, rule="borda", preset="votenrank", drop_incomplete=False)
    assert kept.results["borda"].models == tuple("ABCD") and "dropped_incomplete" not in kept.settings
    assert ranking.rank(table, rule="borda", drop_incomplete=True).settings["dropped_incomplete"] == ["D"]

    path = tmp_path / "holes.csv"
    frame.rename_axis("model").to_csv(path)
    assert main(["rank", str(path), "--rule", "borda", "--preset", "votenrank", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["borda"]["scores"] == {"A": 2.0, "B": 3.0, "C": 1.0}
    assert err.strip().splitlines()[-1] == ("vnr rank: note: left out 1 model(s) missing a score (D); "
                                            "--keep-incomplete ranks them")
    assert main(["rank", str(path), "--rule", "borda", "--preset", "votenrank"]) == 0
    assert "left out, missing a score: D" in capsys.readouterr().out.splitlines()
    assert main(["rank", str(path), "--rule", "borda", "--preset", "votenrank", "--keep-incomplete",
                      "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["borda"]["scores"] == {"A": 2.0, "B": 3.0, "C": 1.0, "D": 3.0} and "left out" not in err


def test_a_scenario_under_the_preset_ranks_complete_rows_only():
    table = ScoreTable.from_frame(pd.DataFrame({"c1": [3.0, 2.0, 1.0, 4.0], "c2": [1.0, 3.0, 2.0, None]},
                                               index=list("ABCD")))
    doc = {"columns": [{"name": "b", "rule": "borda"}]}
    voted = Scenario.from_mapping({**doc, "preset": "votenrank"})
    assert voted.build_table(table).models == ("A", "B", "C")
    assert Scenario.from_mapping(doc).build_table(table).models == tuple("ABCD")
    # same Borda scores as `vnr rank` under each preset (test above)
    assert compare(voted, voted.build_table(table)).results["b"].scores.tolist() == [2.0, 3.0, 1.0]
