"""What a criterion means: one vote per benchmark, closest-to-a-target directions, declared ranges, and the
import unit (notes, names, files swapped together)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import ranking
from harness.cli import main
from ranking.floor.errors import UserError
from ranking.rules import rule_names
from ranking.table import Criterion, ScoreTable
from ranking.votes import apply_votes, vote_weights

# rules whose score is a function of the table alone (no randomness), ranked on complete tables
RULES = [r for r in rule_names() if r not in ("geometric_mean",)]


def _benchmarks(draw_sizes: list[tuple[int, int, bool]]) -> list[Criterion]:
    """Criteria of benchmarks b0, b1, ...: each (voting columns, detail columns, with an aggregate)."""
    out = []
    for b, (voting, details, aggregate) in enumerate(draw_sizes):
        if aggregate:
            out.append(Criterion(f"b{b}/all", benchmark=f"b{b}", aggregate=True))
        out += [Criterion(f"b{b}/m{k}", benchmark=f"b{b}") for k in range(voting if not aggregate else 0)]
        out += [Criterion(f"b{b}/d{k}", benchmark=f"b{b}", detail=True) for k in range(details)]
    return out


SIZES = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 60), st.booleans()), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(SIZES, st.integers(0, 5), st.integers(1, 40))
def test_adding_subtasks_or_metrics_to_a_benchmark_never_changes_its_share_of_the_vote(sizes, which, extra):
    which %= len(sizes)

    def shares(crits):
        w = vote_weights(crits, "benchmark")
        out: dict[str, float] = {}
        for c, x in zip(crits, w):
            out[c.vote_unit] = out.get(c.vote_unit, 0.0) + x
        return out

    before = shares(_benchmarks(sizes))
    assert before == pytest.approx({f"b{b}": 1.0 for b in range(len(sizes))})
    voting, details, aggregate = sizes[which]
    for grown in ((voting + extra, details, aggregate), (voting, details + extra, aggregate)):
        after = shares(_benchmarks([*sizes[:which], grown, *sizes[which + 1:]]))
        assert after == pytest.approx(before)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 57))
def test_subtasks_behind_an_aggregate_never_change_any_ranking(seed, n_subtasks):
    """MMLU's 57 subtasks beside its group score: whatever their values, every rule ranks as without them."""
    rng = np.random.default_rng(seed)
    n = 5
    base = [Criterion("mmlu", benchmark="mmlu", aggregate=True), Criterion("arc", benchmark="arc"),
            Criterion("gsm8k", benchmark="gsm8k")]
    values = rng.integers(0, 4, size=(n, 3)).astype(float) / 4 + 0.125
    models = tuple("ABCDE")
    plain = ScoreTable(models, tuple(base), values)
    subtasks = tuple(Criterion(f"mmlu_{k}", benchmark="mmlu", detail=True) for k in range(n_subtasks))
    grown = ScoreTable(models, (*base, *subtasks), np.hstack([values, rng.random((n, n_subtasks))]))
    a, b = ranking.rank(plain, RULES), ranking.rank(grown, RULES)
    for rule in RULES:
        np.testing.assert_array_equal(a[rule].ranks, b[rule].ranks, err_msg=rule)
    # voting per column lets the subtasks in (and the aggregate gives way to them)
    assert b.settings["votes"]["vote"] == "benchmark" and b.settings["votes"]["benchmarks"] == 3
    cols = ranking.rank(grown, "borda", vote="column").settings
    assert cols["criterion_weights"]["mmlu"] == 0.0 and cols["criterion_weights"]["mmlu_0"] == 1.0


def test_two_metrics_of_one_task_share_its_vote_worked_example():
    # arc reports acc and acc_norm (no primary): each has half of arc's vote. By hand, Borda (points 1, 0 per
    # criterion): A wins acc, acc_norm (½ + ½ = 1); B wins hellaswag (1): a tie 1-1, not A 2-1 as per column.
    t = ScoreTable(("A", "B"), (Criterion("arc/acc", benchmark="arc"), Criterion("arc/acc_norm", benchmark="arc"),
                               Criterion("hellaswag/acc", benchmark="hellaswag")),
                   np.array([[0.6, 0.62, 0.3], [0.5, 0.52, 0.4]]))
    assert ranking.rank(t, "borda").results["borda"].scores.tolist() == [1.0, 1.0]
    assert ranking.rank(t, "borda", vote="column").results["borda"].scores.tolist() == [2.0, 1.0]


def test_a_table_without_benchmarks_ranks_alike_in_both_modes_and_states_nothing(tmp_path):
    t = ScoreTable(("A", "B", "C"), (Criterion("x"), Criterion("y", weight=2.0)),
                   np.array([[1.0, 3.0], [2.0, 1.0], [3.0, 2.0]]))
    a, b = ranking.rank(t), ranking.rank(t, vote="column")
    assert "votes" not in a.settings and "votes" not in b.settings
    for rule in a.results:
        np.testing.assert_array_equal(a[rule].scores, b[rule].scores)
    assert apply_votes(t)[0] is t
    with pytest.raises(UserError, match="vote: 'task' is not one of benchmark, column"):
        ranking.rank(t, vote="task")


def test_target_direction_closest_is_best_in_every_rule():
    # HELM's BBQ bias is signed, 0 = unbiased: an unbiased model must beat a maximally counter-stereotypical one
    # (as lower-is-better, -1.0 would win) and a stereotypical one.
    t = ScoreTable(("unbiased", "counter", "stereo"),
                   (Criterion("bbq_bias", direction="target", target=0.0), Criterion("acc")),
                   np.array([[0.0, 0.5], [-1.0, 0.5], [0.4, 0.5]]))
    assert t.oriented[:, 0].tolist() == [0.0, -1.0, -0.4]
    res = ranking.rank(t, "all")
    for rule, r in res.results.items():
        assert r.winners == ("unbiased",), rule
        assert r.ranks[1] >= r.ranks[2], rule  # -1.0 is farther from 0 than 0.4: never ahead of it
    assert res.settings["targets"] == {"bbq_bias": 0.0} and "geometric_mean" in res.skipped
    with pytest.raises(UserError, match="geometric_mean reads raw scores, but 'bbq_bias' is best closest to 0"):
        ranking.rank(t, "geometric_mean")
    with pytest.raises(UserError, match="optimality_gap needs higher-is-better criteria, but 'bbq_bias' is closest "
                       "to 0"):
        ranking.rank(t, "optimality_gap")


def test_sidecar_round_trips_what_a_criterion_is_and_checks_it(tmp_path):
    crits = (Criterion("mmlu", benchmark="mmlu", task="mmlu", metric="acc", aggregate=True, range=(0.0, 1.0),
                       settings={"n_shot": 5, "filter": "none", "version": "2"}),
             Criterion("mmlu_anatomy", benchmark="mmlu", detail=True, range=(0.0, 1.0)),
             Criterion("bias", direction="target", target=0.0, range=(-1.0, 1.0)))
    t = ScoreTable(("A", "B"), crits, np.array([[0.5, 0.4, -0.2], [0.6, 0.7, 0.1]]), board="helm")
    t.to_csv(tmp_path / "matrix.csv")
    doc = yaml.safe_load((tmp_path / "criteria.yaml").read_text())
    assert doc["board"] == "helm"
    assert doc["criteria"]["mmlu"] == {"direction": "higher", "weight": 1.0, "benchmark": "mmlu", "task": "mmlu",
                                       "metric": "acc", "settings": {"filter": "none", "n_shot": 5, "version": "2"},
                                       "range": [0.0, 1.0], "aggregate": True}
    assert doc["criteria"]["bias"] == {"direction": "target", "weight": 1.0, "target": 0.0, "range": [-1.0, 1.0]}
    back = ScoreTable.load(tmp_path)
    assert back.criteria == t.criteria and back.board == "helm"
    # a score outside its declared range is refused when the table is read, naming model and column
    (tmp_path / "criteria.yaml").write_text(yaml.safe_dump({**doc, "sha256": None}).replace("sha256: null\n", ""))
    (tmp_path / "matrix.csv").write_text("model,mmlu,mmlu_anatomy,bias\nA,0.5,1.4,-0.2\nB,0.6,0.7,0.1\n")
    with pytest.raises(UserError, match=r"score of model 'A' on criterion 'mmlu_anatomy' in .*matrix.csv is 1.4, "
                       r"outside its range \[0, 1\]: fix the score \(or leave it empty\), or the criterion's range"):
        ScoreTable.load(tmp_path)
    for bad, message in (({"direction": "target"}, "direction target needs target: <the best score>"),
                         ({"direction": "higher", "target": 0}, "target: is given but direction is higher"),
                         ({"range": [1, 0]}, r"range \[1, 0\] is empty"),
                         ({"detail": True, "aggregate": True}, "detail and aggregate are both true")):
        (tmp_path / "criteria.yaml").write_text(yaml.safe_dump({"criteria": {"mmlu": bad, "mmlu_anatomy": {},
                                                                             "bias": {}}}))
        with pytest.raises(UserError, match=message):
            ScoreTable.load(tmp_path)


def _structured_folder(tmp_path):
    t = ScoreTable(("A", "B", "C"),
                   (Criterion("mmlu", benchmark="mmlu", aggregate=True),
                    *(Criterion(f"mmlu_{k}", benchmark="mmlu", detail=True) for k in range(3)),
                    Criterion("arc", benchmark="arc")),
                   np.array([[0.7, 0.1, 0.1, 0.1, 0.2], [0.6, 0.9, 0.9, 0.9, 0.3], [0.5, 0.5, 0.5, 0.5, 0.9]]))
    t.to_csv(tmp_path / "matrix.csv")
    return tmp_path


def test_vnr_rank_states_the_vote_and_votes_per_column_on_request(tmp_path, capsys):
    folder = _structured_folder(tmp_path)
    assert main(["rank", str(folder), "--rule", "borda"]) == 0
    out = capsys.readouterr().out
    assert ("votes: one per benchmark (2 benchmarks from 5 columns; 3 detail columns do not vote; --vote column: one "
            "per column)") in out
    assert main(["rank", str(folder), "--rule", "borda", "--format", "csv"]) == 0
    by_benchmark = capsys.readouterr().out
    assert main(["rank", str(folder), "--rule", "borda", "--vote", "column", "--format", "json"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["settings"]["votes"] == {"vote": "column", "columns": 5, "benchmarks": 2, "voting_columns": 4,
                                        "not_voting": ["mmlu"]}
    # per column B wins the three subtasks; one vote per benchmark (Borda points 2, 1, 0): mmlu A 2, B 1, C 0 and
    # arc C 2, B 1, A 0 — a three-way tie
    assert doc["borda"]["winners"] == ["B"]
    assert by_benchmark.splitlines()[1:] == ["A,2.0,1", "B,2.0,1", "C,2.0,1"]


def test_the_vote_line_agrees_in_number(tmp_path, capsys):
    """`vnr rank --vote column` with one aggregate left to its parts says so in the singular, two in the plural."""
    folder = _structured_folder(tmp_path)
    assert main(["rank", str(folder), "--rule", "borda", "--vote", "column"]) == 0
    out = capsys.readouterr().out
    assert "votes: one per column (4 of 5 columns vote; 1 aggregate column left to its parts)" in out
    assert "their parts" not in out
    t = ScoreTable(("A", "B"), (Criterion("mmlu", benchmark="mmlu", aggregate=True),
                               Criterion("mmlu_0", benchmark="mmlu", detail=True),
                               Criterion("arc", benchmark="arc", aggregate=True), Criterion("arc_0", benchmark="arc")),
                   np.array([[0.7, 0.1, 0.4, 0.2], [0.6, 0.9, 0.5, 0.3]]))
    two = ranking.rank(t, "borda", vote="column").settings["votes"]
    from ranking.votes import describe

    assert describe(two) == "votes: one per column (2 of 4 columns vote; 2 aggregate columns left to their parts)"
    one = ranking.rank(ScoreTable(t.models, t.criteria[:2], t.values[:, :2]), "borda").settings["votes"]
    assert describe(one) == ("votes: one per benchmark (1 benchmark from 2 columns; 1 detail column does not vote; "
                             "--vote column: one per column)")


def test_board_needs_an_imported_table(tmp_path, capsys):
    folder = _structured_folder(tmp_path)
    assert main(["rank", str(folder), "--board"]) == 2
    assert capsys.readouterr().err.strip().endswith("--board applies to tables imported from HELM, the Open LLM "
                                                    "Leaderboard, MTEB or lm-eval")


def test_import_refuses_names_rank_would_refuse(tmp_path, capsys):
    emissions = tmp_path / "emissions.csv"
    for name, why in (("a\rb", "holds a control character"), ("a\x00b", "holds a control character")):
        emissions.write_text("project_name,energy_consumed,emissions,duration\n"
                             f'"{name}",0.1,0.01,10\nb,0.2,0.02,20\n')
        assert main(["import", "codecarbon", str(emissions), "-o", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "out" / "matrix.csv").exists()


def _emissions(path, energy: float) -> str:
    path.write_text("project_name,energy_consumed,emissions,duration\n"
                    f"a,{energy},0.01,10\nb,0.2,0.02,20\n")
    return str(path)


def test_import_force_swaps_every_file_together_or_none(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert main(["import", "codecarbon", _emissions(tmp_path / "e1.csv", 0.1), "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    real = os.replace
    calls = []

    def failing(src, dst):
        calls.append(str(dst))
        if str(dst).endswith("criteria.yaml") and ".previous-" not in str(dst):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    code = main(["import", "codecarbon", _emissions(tmp_path / "e2.csv", 0.3), "-o", str(out), "--force"])
    monkeypatch.setattr(os, "replace", real)
    assert code != 0 and "No space left on device" in capsys.readouterr().err
    assert any(c.endswith("matrix.csv") and ".previous-" not in c for c in calls)  # it got as far as the matrix
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before  # the previous import's files, all of them, and nothing of the failed one
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    assert ranking.load_table(out).values[0, 0] == 0.1


def test_import_notes_are_summarised_and_kept_in_full(tmp_path, capsys):
    emissions = tmp_path / "e.csv"
    emissions.write_text("project_name,energy_consumed,emissions,duration\n"
                         + "".join(f"p{k},0.1,0.01,10\np{k},0.2,0.02,20\n" for k in range(6)) + "q,,0.01,5\nq,1,1,1\n")
    assert main(["import", "codecarbon", str(emissions), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err.splitlines()
    notes = (tmp_path / "out" / "import-notes.txt").read_text().splitlines()
    assert err[-1] == f"vnr import: every note ({len(notes)}) is in {tmp_path / 'out' / 'import-notes.txt'}"
    assert len(err) < len(notes) + 2 and all(line.startswith("vnr import: ") for line in err)
    assert any("left missing energy_kwh of q" in n for n in notes)


def test_readme_import_block_runs_top_to_bottom_as_written(tmp_path, monkeypatch, capsys):
    """README's "Already have results?" block, line by line, on the samples that ship in configs/import_samples."""
    import re
    import shlex
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "README.md").read_text()
    section = text[text.index("### Already have results?"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert len(lines) >= 7 and all(line.startswith("vnr ") for line in lines)
    (tmp_path / "configs").symlink_to(repo / "configs")  # relative paths as written, outputs kept out of the repo
    monkeypatch.chdir(tmp_path)
    for line in lines:
        assert main(shlex.split(line)[1:]) == 0, line
        out = capsys.readouterr().out
    assert "votes: one per column" in out
    for fmt in ("lm-eval", "helm", "open-llm-leaderboard", "mteb", "codecarbon"):
        table = ranking.load_table(tmp_path / "results" / "imported" / fmt)
        assert table.n_models >= 2


def test_a_scenario_shows_the_boards_order_beside_the_users(tmp_path):
    """The report's scenario can hold a `rule: board` column: the leaderboard's own order from its own files."""
    from pathlib import Path

    from ranking.boards import board_scores
    from ranking.importers import import_table
    from ranking.scenarios import load_scenario
    from ranking.scenarios.compare import compare

    samples = Path(__file__).resolve().parents[1] / "configs" / "import_samples" / "helm"
    table = import_table("helm", samples, notes=[])
    (tmp_path / "s.yaml").write_text("columns:\n  - {name: mine, rule: borda}\n  - {name: helm, rule: board}\n")
    cmp = compare(load_scenario(tmp_path / "s.yaml"), table)
    board = cmp.results["helm"]
    np.testing.assert_array_equal(board.scores, board_scores(table))
    assert board.ordering() == ["Gamma (70B)", "Beta Chat (13B)", "Alpha Instruct (7B)", "Delta Base (7B)"]
    (tmp_path / "s.yaml").write_text("columns:\n  - {name: helm, rule: board, setting: weighted}\n")
    with pytest.raises(UserError, match=r"columns\[0\].rule: rule 'board' is the leaderboard's own order: it takes "
                       "no setting, group or params"):
        load_scenario(tmp_path / "s.yaml")


def test_prospective_and_analyze_rank_under_the_vote_too(tmp_path, capsys):
    """Commands that rank without `vnr rank` read the same votes: a benchmark's subtasks do not vote by default."""
    import json

    t = ScoreTable(("A", "B"), (Criterion("mmlu", benchmark="mmlu", aggregate=True),
                               *(Criterion(f"mmlu_{k}", benchmark="mmlu", detail=True) for k in range(3))),
                   np.array([[0.7, 0.1, 0.1, 0.1], [0.6, 0.9, 0.9, 0.9]]))
    t.to_csv(tmp_path / "matrix.csv")
    assert main(["prospective", str(tmp_path), "--format", "json"]) == 0
    out = capsys.readouterr()
    found = json.loads(out.out)
    assert found["A"]["prospective"] and not found["B"]["prospective"]  # only the group score votes: A is ahead
    assert "vnr prospective: note: votes: one per benchmark (1 benchmark from 4 columns" in out.err
    assert main(["prospective", str(tmp_path), "--format", "json", "--vote", "column"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["B"]["prospective"] and not found["A"]["prospective"]  # the subtasks vote: B wins all three
    assert main(["analyze", "agreement", str(tmp_path), "--rules", "borda,copeland"]) == 0
    assert "vnr analyze: note: votes: one per benchmark" in capsys.readouterr().err
    assert main(["rank", "--scenario", str(tmp_path / "s.yaml"), "--vote", "column"]) == 2
    assert "--vote does not apply with --scenario: set 'vote:' in the scenario file" in capsys.readouterr().err


def test_an_unknown_board_or_vote_in_a_file_is_one_line(tmp_path, capsys):
    folder = _structured_folder(tmp_path)
    sidecar = folder / "criteria.yaml"
    sidecar.write_text(sidecar.read_text() + "board: helmm\n")
    assert main(["rank", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "board: 'helmm' is not one of helm, " in err
    (tmp_path / "s.yaml").write_text("vote: task\ncolumns:\n  - {name: b, rule: borda}\n")
    assert main(["rank", "--scenario", str(tmp_path / "s.yaml"), "--results", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "vote: 'task' is not one of benchmark, column" in err


# ---------------------------------------------------------------------------- votes from the weights that rank
def _drop(table: ScoreTable, name: str) -> ScoreTable:
    keep = [j for j, c in enumerate(table.criteria) if c.name != name]
    return ScoreTable(table.models, tuple(table.criteria[j] for j in keep), table.values[:, keep])


@pytest.mark.parametrize("vote", ["benchmark", "column"])
def test_a_weight_0_column_takes_no_share_of_its_benchmark_s_vote_under_every_rule(vote):
    """acc_norm is shown but not ranked (weight 0): every rule ranks as if it were not in the table. (Before, it
    halved acc's share of the benchmark's vote: the mean then put B first, with acc counted half.)"""
    crits = (Criterion("arc/acc", benchmark="arc"), Criterion("arc/acc_norm", benchmark="arc", weight=0.0),
             Criterion("gsm8k"))
    values = np.array([[1.0, 0.05, 0.05], [0.05, 1.0, 0.6], [0.2, 0.5, 0.3]])
    table = ScoreTable(("A", "B", "C"), crits, values)
    assert vote_weights(crits, vote).tolist() == [1.0, 0.0, 1.0]
    without = _drop(table, "arc/acc_norm")
    for rule in rule_names():
        got, want = ranking.rank(table, rule, vote=vote)[rule], ranking.rank(without, rule, vote=vote)[rule]
        np.testing.assert_array_equal(got.ranks, want.ranks)
        np.testing.assert_allclose(got.scores, want.scores)
    assert ranking.rank(table, "arithmetic_mean").winners["arithmetic_mean"] == ("A",)


def test_an_aggregate_whose_parts_all_have_weight_0_votes_under_either_mode():
    """The parts are not ranked (weight 0), so the aggregate is its benchmark's one ranked column: it votes under
    --vote column as under --vote benchmark. (Before, it gave way to parts that cast nothing under column: the
    benchmark lost its vote.) With one part ranked, the parts vote instead, as before."""
    crits = [Criterion("mmlu", benchmark="mmlu", aggregate=True),
             Criterion("mmlu_a", benchmark="mmlu", weight=0.0), Criterion("mmlu_b", benchmark="mmlu", weight=0.0),
             Criterion("arc")]
    assert vote_weights(crits, "column").tolist() == [1.0, 0.0, 0.0, 1.0]
    assert vote_weights(crits, "benchmark").tolist() == [1.0, 0.0, 0.0, 1.0]
    crits[1] = Criterion("mmlu_a", benchmark="mmlu")
    assert vote_weights(crits, "column").tolist() == [0.0, 1.0, 0.0, 1.0]


def test_a_benchmark_whose_ranked_columns_are_details_is_voted_by_them():
    """Its non-detail column has weight 0: the ranked detail columns share the benchmark's vote."""
    crits = [Criterion("b/main", benchmark="b", weight=0.0), Criterion("b/d1", benchmark="b", detail=True),
             Criterion("b/d2", benchmark="b", detail=True), Criterion("c")]
    assert vote_weights(crits, "benchmark").tolist() == [0.0, 0.5, 0.5, 1.0]


def test_a_benchmark_name_with_an_edge_space_is_the_same_benchmark(tmp_path):
    """``X`` and ``X `` name one benchmark wherever the name enters (a sidecar, the Python API): normalised once."""
    assert Criterion("a", benchmark="X ").benchmark == "X"
    crits = (Criterion("a", benchmark="X"), Criterion("b", benchmark="X "), Criterion("c"))
    assert vote_weights(crits, "benchmark").tolist() == [0.5, 0.5, 1.0]
    (tmp_path / "matrix.csv").write_text("model,a,b,c\nm1,1,2,3\nm2,2,1,1\nm3,3,3,2\n")
    (tmp_path / "criteria.yaml").write_text('criteria:\n  a: {benchmark: "X"}\n  b: {benchmark: "X "}\n  c: {}\n')
    result = ranking.rank(ranking.load_table(tmp_path / "matrix.csv"), "borda")
    assert result.settings["votes"]["benchmarks"] == 2 and result.settings["votes"]["columns"] == 3
