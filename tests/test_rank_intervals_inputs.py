"""The uncertainty inputs of ``--intervals`` as declared schemas bound to their table (issue #38): ``stderr.csv``
one row per model and one column per criterion, an unknown standard error never "certain"; ``seeds.csv`` bound
to the matrix it was collected with; no file a sidecar names read through a link out of its folder; Threshold's
intervals exact where its lexicographic keys settle every pair."""

from __future__ import annotations

import os

import numpy as np
import pytest
from vnr_cli import vnr

from ranking.api import rank
from ranking.floor.errors import UserError
from ranking.intervals import intervals_from_seeds, seed_table_source
from ranking.table import Criterion, ScoreTable

SIDECAR = "table: matrix.csv\nstandard_errors: stderr.csv\ncriteria:\n  a: {direction: higher}\n  b: {direction: higher}\n"
# A and B 0.001 apart, C and D far below: with B's standard error known, A and B stay within the noise
MATRIX = "model,a,b\nA,0.801,0.801\nB,0.800,0.800\nC,0.5,0.5\nD,0.2,0.2\n"


def results(folder, stderr: str, matrix: str = MATRIX, sidecar: str = SIDECAR):
    folder.mkdir(exist_ok=True)
    (folder / "matrix.csv").write_text(matrix)
    (folder / "criteria.yaml").write_text(sidecar)
    if stderr is not None:
        (folder / "stderr.csv").write_text(stderr)
    return folder


def one_line_refusal(capsys, folder, *words):
    code, out, err = vnr(capsys, "rank", folder, "--rule", "arithmetic_mean", "--intervals", "--draws", "100")
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


# ---------------------------------------------------------------------- stderr.csv
@pytest.mark.parametrize("stderr", [
    "model,a,b\nA,0.01,0.01\nC,0.01,0.01\nD,0.01,0.01\n",  # B has no row
    "model,a,b\nA,0.01,0.01\nB,,0.01\nC,0.01,0.01\nD,0.01,0.01\n",  # B's error on a is empty
], ids=["missing_row", "empty_cell"])
def test_an_unknown_standard_error_is_not_separable(tmp_path, stderr):
    table = ScoreTable.load(results(tmp_path / "r", stderr))
    iv = rank(table, "arithmetic_mean", intervals=True, draws=200).intervals["arithmetic_mean"]
    # before: B's unknown errors were read as 0 (certain) and A, B looked separated (1-1, 2-2); now B may be
    # anywhere (1-4) and no one is separated from B, while A, C, D keep their separations from each other
    assert (iv.rank_lo.tolist(), iv.rank_hi.tolist()) == ([1, 1, 2, 3], [2, 4, 3, 4])
    res = rank(table, "arithmetic_mean", intervals=True, draws=200)
    assert "1 model with an unknown standard error: not separable" in res.settings["intervals"]["described"]
    # with every error known, A and B are within the noise of each other, C and D settled
    full = ScoreTable.load(results(tmp_path / "k", "model,a,b\nA,0.01,0.01\nB,0.01,0.01\nC,0.01,0.01\nD,0.01,0.01\n"))
    iv = rank(full, "arithmetic_mean", intervals=True, draws=200).intervals["arithmetic_mean"]
    assert (iv.rank_lo.tolist(), iv.rank_hi.tolist()) == ([1, 1, 3, 4], [2, 2, 3, 4])


def test_duplicate_rows_or_columns_of_stderr_are_refused(tmp_path, capsys):
    rows = results(tmp_path / "rows", "model,a,b\nA,0.01,0.01\nB,0.01,0.01\nB,0.5,0.5\nC,0.01,0.01\nD,0.01,0.01\n")
    err = one_line_refusal(capsys, rows, "stderr.csv", "'B' has two rows (lines 3 and 4)", "one row")
    cols = results(tmp_path / "cols", "model,a,b,a\nA,0.01,0.01,0.5\nB,0.01,0.01,0.5\n")
    err = one_line_refusal(capsys, cols, "stderr.csv", "column 'a' appears twice")
    assert "one column" in err


@pytest.mark.parametrize("cell,what", [("inf", "finite and >= 0"), ("-0.1", "finite and >= 0")])
def test_stderr_cells_are_finite_and_not_negative(tmp_path, capsys, cell, what):
    folder = results(tmp_path / "r", f"model,a,b\nA,{cell},0.01\nB,0.01,0.01\n")
    one_line_refusal(capsys, folder, what)


# ---------------------------------------------------------------------- links out of the folder
def test_a_link_out_of_the_folder_is_refused(tmp_path, capsys):
    outside = tmp_path / "secret.csv"
    outside.write_text("model,a,b\nA,0.01,0.01\nB,0.01,0.01\nC,0.01,0.01\nD,0.01,0.01\n")
    folder = results(tmp_path / "r", None)
    os.symlink(outside, folder / "stderr.csv")
    one_line_refusal(capsys, folder, "stderr.csv", "link out of its folder", "put the file itself in")
    # a link to a file inside the folder is the folder's own file
    os.unlink(folder / "stderr.csv")
    (folder / "errors.csv").write_text(outside.read_text())
    os.symlink("errors.csv", folder / "stderr.csv")
    code, out, err = vnr(capsys, "rank", folder, "--rule", "arithmetic_mean", "--intervals", "--draws", "100")
    assert code == 0, err


def test_a_seeds_link_out_of_the_folder_is_refused(tmp_path, capsys):
    outside = tmp_path / "seeds_elsewhere.csv"
    outside.write_text(seeds_text({"A": (0.8, 0.82), "B": (0.7, 0.72)}))
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "matrix.csv").write_text("model,a\nA,0.81\nB,0.71\n")
    (folder / "criteria.yaml").write_text("table: matrix.csv\ncriteria:\n  a: {direction: higher, range: [0, 1]}\n")
    os.symlink(outside, folder / "seeds.csv")
    one_line_refusal(capsys, folder, "seeds.csv", "link out of its folder")


# ---------------------------------------------------------------------- seeds.csv
def seeds_text(cells: dict[str, tuple[float, ...]], criterion: str = "a") -> str:
    rows = ["model,criterion,seed,value"]
    for model, values in cells.items():
        rows += [f"{model},{criterion},{s},{v}" for s, v in enumerate(values)]
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("cells,words", [
    ({"A": (0.6, 0.62), "B": (0.9, 0.92)}, ["A/a average 0.61", "the table says 0.81", "another table"]),
    ({"A": (0.8, 1.5), "B": (0.7, 0.72)}, ["A/a seed 1 is 1.5", "outside the criterion's range [0, 1]"]),
    ({"A": (0.8, "inf"), "B": (0.7, 0.72)}, ["A/a seed 1 is inf", "finite"]),
    ({"A": (0.81,), "B": (0.7, 0.72)}, ["A/a has one seed", "at least two seeds"]),
], ids=["another_grid", "out_of_range", "infinite", "one_seed"])
def test_seeds_are_bound_to_their_matrix(tmp_path, capsys, cells, words):
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "matrix.csv").write_text("model,a\nA,0.81\nB,0.71\n")
    (folder / "criteria.yaml").write_text("table: matrix.csv\ncriteria:\n  a: {direction: higher, range: [0, 1]}\n")
    (folder / "seeds.csv").write_text(seeds_text(cells))
    one_line_refusal(capsys, folder, "per-seed results", "seeds.csv", *words)


def test_seed_tables_give_intervals_and_tiers():
    """The adaptive grid's entry: models × seeds × criteria in, per-model intervals and tiers out."""
    rng = np.random.default_rng(0)
    per_seed = 0.5 + 0.01 * rng.standard_normal((4, 3, 5))
    per_seed[0] += 0.2  # A far above in every seed
    per_seed[3] -= 0.2  # D far below
    table = ScoreTable(tuple("ABCD"), tuple(Criterion(f"c{j}") for j in range(5)), per_seed.mean(axis=1))
    found = intervals_from_seeds(table, per_seed, ["arithmetic_mean", "borda"], draws=200)
    for rule, iv in found.items():
        assert iv.models == tuple("ABCD")
        assert (iv.rank_lo[[0, 3]].tolist(), iv.rank_hi[[0, 3]].tolist()) == ([1, 4], [1, 4]), rule
        assert iv.tier[0] == 1 and iv.tier[3] == 3, rule
    # whole seeds per model: a seed's row of a model's criteria moves together in every draw
    draws = seed_table_source(table, per_seed).sample(np.random.default_rng(1), 50)
    spread = per_seed - per_seed.mean(axis=1, keepdims=True)
    lifted = per_seed.mean(axis=1)[:, None, :] + spread * np.sqrt(3 / 2)  # spread for the unbiased variance
    for d in draws[:5]:
        for i in range(4):  # each drawn row is the mean of three of the model's (spread) seed rows
            options = [lifted[i][list(c)].mean(axis=0) for c in np.ndindex(3, 3, 3)]
            assert any(np.allclose(d[i], o) for o in options)
    with pytest.raises(UserError, match="shape"):
        seed_table_source(table, per_seed[:, :, :2])
    bad = per_seed.copy()
    bad[1, :, 0] += 0.3
    with pytest.raises(UserError, match="B/c0 average"):
        seed_table_source(table, bad)


# ---------------------------------------------------------------------- Threshold's intervals
@pytest.mark.parametrize("direction", ["higher", "lower", "target"])
def test_threshold_gives_the_far_better_model_interval_one(direction):
    rng = np.random.default_rng(3)
    values = rng.uniform(0.3, 0.5, (5, 4))
    values[0] = 0.95  # A far better on every criterion, tiny standard errors
    crits = [Criterion(f"c{j}") for j in range(4)]
    if direction == "lower":
        values = 1.0 - values
        crits = [Criterion(f"c{j}", direction="lower") for j in range(4)]
    if direction == "target":
        values[:, 2] = values[:, 2] - 0.95  # A exactly on target 0, the others 0.45-0.65 off
        crits[2] = Criterion("c2", direction="target", target=0.0)
    table = ScoreTable(tuple("ABCDE"), tuple(crits), values, standard_errors=np.full(values.shape, 1e-4))
    res = rank(table, "threshold", intervals=True, draws=200)
    iv = res.intervals["threshold"]
    ranks = res.results["threshold"].ranks
    assert (iv.rank_lo[0], iv.rank_hi[0], iv.tier[0]) == (1, 1, 1)
    # nothing is uncertain here: every interval is the point rank (the lexicographic keys settle every pair)
    assert iv.rank_lo.tolist() == ranks.tolist() and iv.rank_hi.tolist() == ranks.tolist()
