"""Issue 29's held-out sweep, ranking side: leaderboard specs with no criteria left or an empty CSV, and
control characters in model names, are one line and exit 2 (never a traceback, never ranked as a space)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from ranking.floor.errors import UserError
from ranking.leaderboard import load_leaderboard
from ranking.table import Criterion, ScoreTable


def rank(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["rank", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.err.strip()


def _spec(tmp_path: Path, csv: bytes, extra: str = "") -> Path:
    (tmp_path / "board.csv").write_bytes(csv)
    spec = tmp_path / "board.yaml"
    spec.write_text(f"file: {tmp_path / 'board.csv'}\nmodel_column: Model\n{extra}")
    return spec


@pytest.mark.parametrize(("csv", "extra", "message"), [
    (b"Model,A,B\nm1,1,2\nm2,3,4\n", "ignore: [A, B]\n",
     "no criteria left: every column of board.csv besides the model column is in ignore (A, B)"),
    (b"", "", "leaderboard file {dir}/board.csv is empty: it needs a header row and one row per model"),
    (b"Model,A,B\n", "", "has no rows under its header: it needs one row per model"),
    (b"Model,A\nm\x001,1\nm2,3\n", "",
     "line 2 of board.csv has a control character in its model name 'm\\x001' (column 'Model')"),
    (b"Model,A\nm\x1b[31m1,1\nm2,3\n", "", "has a control character in its model name 'm\\x1b[31m1'"),
])
def test_bad_leaderboard_specs_are_one_line(csv, extra, message, tmp_path, capsys):
    spec = _spec(tmp_path, csv, extra)
    with pytest.raises(UserError) as caught:
        load_leaderboard(spec)
    assert message.format(dir=tmp_path) in str(caught.value)
    code, err = rank(capsys, spec)
    assert code == 2 and len(err.splitlines()) == 1 and message.format(dir=tmp_path) in err, err


def test_a_leaderboard_names_line_breaks_and_tabs_as_spaces(tmp_path):
    spec = _spec(tmp_path, b'Model,A\n"big\n model",1\nsmall\tmodel,3\n')
    assert load_leaderboard(spec).models == ("big model", "small model")


@pytest.mark.parametrize("name", ["a\x00b", "a\tb", "a\x7fb", "a\x85b", "a\nb"])
def test_a_control_character_in_a_model_name_is_refused_by_every_table(name):
    with pytest.raises(UserError, match=r"model '.*' in t has a control character \(.* at position 2\): remove it"):
        ScoreTable(("ok", name), (Criterion("x"),), np.array([[1.0], [2.0]]), source="t")


def test_a_nul_in_a_csv_model_name_exits_2_in_one_line(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_bytes(b"model,x,y\nm\x001,1,2\nm 1,3,4\n")  # would look like one model twice, or rank as "m 1"
    code, err = rank(capsys, table)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "model 'm\\x001'" in err and "has a control character ('\\x00' at position 2)" in err
