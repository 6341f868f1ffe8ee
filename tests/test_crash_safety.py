"""A multi-file output is all or nothing even under ``kill -9`` (issue #38): ``vnr import --force``, ``vnr collect``
and ``vnr report`` killed at every file move leave the folder holding the previous output or the new one whole
once it is next read (``ranking.floor.together``), never a mix that ``vnr rank`` reads as one table.

The kill: the command runs in a forked child whose file moves (``os.replace``, ``os.rename``, ``os.unlink``)
are counted; before the move after the k-th it sends itself SIGKILL (a real ``kill -9``: no ``finally``, no
``atexit``, no flush), for k = 0, 1, ... until the command completes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from lm_eval_files import results_04, write_04
from test_scenarios_util import USER, write_results

from harness.cli import main
from harness.grid.collect import collect
from harness.grid.config import parse_experiment
from harness.store import RunStore
from ranking import load_table
from ranking.floor.errors import UserError
from ranking.floor.together import JOURNAL, recover, write_together

KILLED = -signal.SIGKILL  # the child's exit code as os.waitstatus_to_exitcode gives a kill -9
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the kill is a forked child's SIGKILL")


def killed_at(k: int, action) -> bool:
    """Run ``action()`` in a forked child that dies just before its (k+1)-th file move; True if it died there,
    False if it completed with k moves or fewer."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            moves = 0
            real = {name: getattr(os, name) for name in ("replace", "rename", "unlink")}

            def counted(name):
                def move(*args, **kwargs):
                    nonlocal moves
                    if moves == k:
                        os.kill(os.getpid(), signal.SIGKILL)
                    moves += 1
                    return real[name](*args, **kwargs)
                return move

            for name in real:
                setattr(os, name, counted(name))
            code = 0 if action() in (None, 0) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, KILLED), f"the command failed on its own (exit {code}) with {k} moves allowed"
    return code == KILLED


def unit(folder: Path, names) -> dict[str, bytes]:
    return {n: (folder / n).read_bytes() for n in names if (folder / n).is_file()}


def kill_everywhere(template: Path, tmp: Path, action, snapshot, old: dict, new: dict, read) -> list[str]:
    """For every k: a fresh copy of ``template``, ``action(copy)`` killed after k moves, ``read(copy)`` (the next
    reader: it finishes an interrupted write), then the unit (``snapshot(copy)``) must be ``old`` or ``new``."""
    seen = []
    k = 0
    while True:
        folder = tmp / f"k{k}"
        shutil.copytree(template, folder)
        died = killed_at(k, lambda folder=folder: action(folder))
        read(folder)
        got = snapshot(folder)
        assert got in (old, new), f"killed after {k} moves: a mix of the two outputs ({sorted(got)})"
        assert not (folder / JOURNAL).exists() and (folder / "notes.txt").read_text() == "mine"
        seen.append("old" if got == old else "new")
        if not died:
            break
        shutil.rmtree(folder)
        k += 1
    assert seen[0] == "old" and seen[-1] == "new" and len(seen) > 4, seen
    return seen


# ---------------------------------------------------------------------- vnr import --force
def _lm_eval(root: Path) -> Path:
    for model, arc in (("org/A", 0.8), ("org/B", 0.7)):
        write_04(root, results_04(model, {"arc_easy": arc, "arc_easy_norm": arc - 0.1}, mmlu=False))
    return root


def _emissions(path: Path) -> Path:
    path.write_text("project_name,energy_consumed,emissions,duration\na,0.1,0.01,10\nb,0.2,0.02,20\n")
    return path


IMPORTED = ("matrix.csv", "criteria.yaml", "stderr.csv", "import-notes.txt")


def test_import_force_killed_at_every_move_leaves_one_import_whole(tmp_path, capsys):
    template = tmp_path / "template"
    assert main(["import", "lm-eval", str(_lm_eval(tmp_path / "lm")), "-o", str(template)]) == 0
    (template / "notes.txt").write_text("mine")  # a user's file: never the import's
    old = unit(template, IMPORTED)
    assert "stderr.csv" in old  # the new import has none: the old one must go with its matrix
    argv = ["import", "codecarbon", str(_emissions(tmp_path / "e.csv")), "--force", "-o"]
    done = tmp_path / "done"
    shutil.copytree(template, done)
    assert main([*argv, str(done)]) == 0
    new = unit(done, IMPORTED)
    assert "stderr.csv" not in new and new["matrix.csv"] != old["matrix.csv"]
    seen = kill_everywhere(template, tmp_path, lambda out: main([*argv, str(out)]),
                           lambda folder: unit(folder, IMPORTED), old, new, read=load_table)
    assert "old" in seen and "new" in seen
    capsys.readouterr()


# ---------------------------------------------------------------------- vnr collect
COLLECTED = ("seeds.csv", "seed_stats.csv", "matrix.csv", "criteria.yaml")
GRID = {"name": "w", "finetune": {"models": ["tiny:bert", "tiny:gpt2"], "tasks": ["rte"], "seeds": [0, 1]}}


def _fill(exp, bump: float) -> None:
    store = RunStore(exp.output)
    for i, spec in enumerate(exp.specs):
        store.write({"run_id": spec.run_id(), "kind": "finetune", "model": spec.model, "task": spec.task,
                     "seed": spec.seed, "status": "ok", "metrics": {"accuracy": 0.5 + 0.1 * i + bump},
                     "efficiency": {"energy_kwh": 1.0 + bump, "duration_h": 2.0, "gpu_hours": 2.0, "co2_kg": 0.25}})


def test_collect_killed_at_every_move_leaves_one_matrix_whole(tmp_path):
    template = tmp_path / "template"
    exp = parse_experiment(GRID).with_output(template)
    _fill(exp, 0.0)
    collect(exp)
    (template / "notes.txt").write_text("mine")  # a user's file: never the collect's
    old = unit(template, COLLECTED)
    _fill(exp, 0.01)  # new results: every file of the unit changes
    done = tmp_path / "done"
    shutil.copytree(template, done)
    collect(exp.with_output(done))
    new = unit(done, COLLECTED)
    assert all(new[n] != old[n] for n in COLLECTED)
    kill_everywhere(template, tmp_path, lambda out: collect(exp.with_output(out)) and None,
                    lambda folder: unit(folder, COLLECTED), old, new, read=load_table)


# ---------------------------------------------------------------------- vnr report
REPORTED = ("report.html", "comparison.csv", "comparison.json", "bump_chart.png", "criteria_heatmap.png",
            "rank_probabilities.png", ".vnr-report.json")


def _report_unit(folder: Path) -> dict[str, bytes]:
    got = unit(folder, REPORTED)
    if "report.html" in got:  # the page says when it was generated (to the minute)
        got["report.html"] = re.sub(rb"generated [^<]*UTC", b"generated -", got["report.html"])
    return got


def test_report_killed_at_every_move_leaves_one_report_whole(tmp_path, capsys):
    first, second = write_results(tmp_path / "r1", spread=10.0), write_results(tmp_path / "r2", spread=4.0)
    base = ["report", "--scenario", str(USER), "--resolution", "4"]
    template = tmp_path / "template"
    assert main([*base, "--results", str(first), "--out", str(template), "--bootstrap", "10"]) == 0
    (template / "notes.txt").write_text("mine")  # a user's file: never the report's
    old = _report_unit(template)
    argv = [*base, "--results", str(second), "--out"]
    done = tmp_path / "done"
    shutil.copytree(template, done)
    assert main([*argv, str(done)]) == 0
    new = _report_unit(done)
    assert "rank_probabilities.png" in old and "rank_probabilities.png" not in new
    assert json.loads(new[".vnr-report.json"])["files"] != json.loads(old[".vnr-report.json"])["files"]

    # the next `vnr report` finishes an interrupted one first: recover() is that step
    kill_everywhere(template, tmp_path, lambda out: main([*argv, str(out)]), _report_unit, old, new, read=recover)
    capsys.readouterr()


# ---------------------------------------------------------------------- a journal that cannot be finished
def _interrupted(folder: Path) -> None:
    """``folder`` as a kill right after the journal was written leaves it: old a.txt and b.txt, new ones staged."""
    folder.mkdir()
    (folder / "a.txt").write_text("old a")
    (folder / "b.txt").write_text("old b")

    def fill(staging: Path) -> None:
        (staging / "a.txt").write_text("new a")
        (staging / "b.txt").write_text("new b")

    assert killed_at(1, lambda: write_together(folder, fill, ["a.txt", "b.txt"], written_by="vnr collect"))
    assert (folder / JOURNAL).is_file() and (folder / "a.txt").read_text() == "old a"


def test_a_journal_is_finished_by_the_next_access_or_refused_in_one_line(tmp_path):
    _interrupted(tmp_path / "f")
    assert recover(tmp_path / "f") is True and recover(tmp_path / "f") is False
    assert [(tmp_path / "f" / n).read_text() for n in ("a.txt", "b.txt")] == ["new a", "new b"]
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["a.txt", "b.txt"]

    _interrupted(tmp_path / "gone")  # its staged files removed by hand: the new b.txt is nowhere
    (staging,) = (tmp_path / "gone").glob(".vnr-staging-*")
    shutil.rmtree(staging)
    with pytest.raises(UserError, match=r"holds a half-replaced output: the new a.txt its journal .* is gone — "
                                        r"re-run vnr collect"):
        recover(tmp_path / "gone")

    _interrupted(tmp_path / "edited")  # a journal edited to move a file out of its folder is not followed
    doc = json.loads((tmp_path / "edited" / JOURNAL).read_text())
    doc["moves"][0][0] = "../outside.txt"
    (tmp_path / "edited" / JOURNAL).write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"is not a journal of an unfinished write: remove it"):
        recover(tmp_path / "edited")
    assert not (tmp_path / "outside.txt").exists()
