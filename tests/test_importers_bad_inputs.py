"""Bad input to the importers (`vnr import`): each is exit 2 with one line that says what to fix, never a
traceback and never a silently wrong table; values that are there but are no number are refused, values the
source leaves out are missing scores (with a note)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ranking
from harness.cli import main
from ranking.errors import UserError
from ranking.importers.common import Options, pick_newest

BIG = int("1" + "0" * 400)  # beyond a float's range
DEEP = "[" * 100000 + "]" * 100000  # deeper than Python's recursion limit


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the paths in the messages are relative, as a user types them


def vnr(capsys, *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *args: object) -> str:
    """The one-line error of `vnr import ARGS -o bad` (exit 2, nothing written)."""
    code, _, err = vnr(capsys, "import", *args, "-o", "bad")
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vnr import: error: "), err
    assert not Path("bad").exists()
    return lines[-1].removeprefix("vnr import: error: ")


def imported(capsys, *args: object) -> tuple[ranking.ScoreTable, list[str]]:
    """The table `vnr import ARGS -o res` wrote, and its notes."""
    code, _, err = vnr(capsys, "import", *args, "-o", "res", "--force")
    assert code == 0, err
    return ranking.load_table("res"), [n.removeprefix("vnr import: note: ") for n in err.splitlines()]


def write(path: str, text: str) -> str:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
    return path


# ---------------------------------------------------------------------- shared
@pytest.mark.parametrize("format, path, what", [
    ("lm-eval", "o/A/results_x.json", "lm-eval results file"),
    ("helm", "core.json", "HELM summary"),
    ("mteb", "m/A/r/T.json", "MTEB task result"),
])
def test_deeply_nested_json_is_one_line(format, path, what, capsys):
    write(path, DEEP)
    assert refused(capsys, format, path.split("/")[0]) == (
        f"{what} {path} is nested too deeply to read (thousands of levels of [ or {{): is it the file the tool wrote?")


def test_an_integer_of_more_than_4300_digits_is_one_line(capsys):
    write("o/A/results_x.json", '{"results": {"t": {"acc,none": 1' + "0" * 5000 + "}}}")
    assert refused(capsys, "lm-eval", "o").startswith("lm-eval results file o/A/results_x.json is not valid JSON "
                                                      "(Exceeds the limit (4300 digits)")


def test_several_newest_with_different_scores_are_no_newest():
    notes: list[str] = []
    options = Options(note=notes.append)
    with pytest.raises(UserError) as err:
        pick_newest([(2, "a", 0.5), (1, "b", 0.7), (2, "c", 0.6)], "task t of m", options)
    assert str(err.value) == ("task t of m appears 3 times; the newest 2 with the same date but different scores "
                              "(a, c), so none is the newest: keep one of them")
    assert pick_newest([(2, "a", 0.5), (2, "c", 0.5)], "task t of m", options) == 0.5
    assert notes == ["task t of m appears 2 times: kept the newest (c; a has the same date and the same scores), "
                     "left out a (--on-duplicate error refuses duplicates)"]
