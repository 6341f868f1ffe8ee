"""The floor (:mod:`ranking.floor`): one wording for a bad value, whichever input carries it, and one atomic
writer that never leaves a half-written file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
import yaml

from ranking.floor import paths as floor_paths
from ranking.floor.errors import UserError
from ranking.floor.schema import SHOWN, show

LONG = "x" * 10_000
#: how a 10 000-character text is shown in every message: quoted, cut at SHOWN characters
LONG_SHOWN = show(LONG)


# ---------------------------------------------------------------------- one wording, four doors
def grid_config(tmp_path: Path, **hyperparameters) -> str:
    from harness.grid.config import load_experiment

    doc = {"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "hyperparameters": hyperparameters}}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(doc))
    return _refusal(lambda: load_experiment(path))


def criteria_sidecar(tmp_path: Path, **attributes) -> str:
    from ranking.table import ScoreTable

    (tmp_path / "m.csv").write_text("model,acc\nA,0.5\nB,0.7\n")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump({"criteria": {"acc": {"direction": "target", **attributes}}}))
    return _refusal(lambda: ScoreTable.from_csv(tmp_path / "m.csv"))


def scenario_file(tmp_path: Path, **keys) -> str:
    from ranking.scenarios import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**keys, "columns": [{"name": "og", "rule": "optimality_gap"}]}))
    return _refusal(lambda: load_scenario(path))


def python_api(tmp_path: Path, **kwargs) -> str:
    import harness

    return _refusal(lambda: harness.finetune(model="tiny:bert", task="rte", seed=0, output=tmp_path / "out", **kwargs))


def _refusal(call) -> str:
    with pytest.raises(UserError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and len(message) < 600, message
    return message


@pytest.mark.parametrize("value, problem", [
    (-1, "-1 must be above 0"),
    (float("nan"), "nan is not a finite number"),
    (LONG, f"{LONG_SHOWN} is not a number"),
])
def test_a_bad_number_reads_the_same_from_a_grid_config_a_scenario_and_the_python_api(tmp_path, value, problem):
    lines = {
        "grid": grid_config(tmp_path, learning_rate=value),
        "scenario": scenario_file(tmp_path, og_gamma=value),
        "api": python_api(tmp_path, learning_rate=value),
    }
    assert f"grid.yaml: finetune.hyperparameters.learning_rate: {problem}" in lines["grid"]
    assert f"s.yaml: og_gamma: {problem}" in lines["scenario"]
    assert lines["api"].startswith(f"harness.finetune: learning_rate: {problem}")
    for line in lines.values():  # a bound states itself; a wrong type says what to write instead
        assert line.endswith(problem) if value != LONG else f"{problem} — write " in line, line


@pytest.mark.parametrize("value, problem", [
    (float("nan"), "nan is not a finite number"),
    (float("inf"), "inf is not a finite number"),
    (LONG, f"{LONG_SHOWN} is not a number"),
])
def test_a_criteria_sidecar_refuses_a_number_in_the_same_words(tmp_path, value, problem):
    line = criteria_sidecar(tmp_path, target=value)
    assert f"m.yaml: criteria.acc.target: {problem}" in line
    assert f"{problem} — write " in line if value == LONG else line.endswith(problem)
    assert line.split("target: ", 1)[1] == grid_config(tmp_path, learning_rate=value).split("learning_rate: ", 1)[1] \
        .replace("peak learning rate (the paper: 2e-5)", "direction target only: the best score (the closer, the "
                 "better), e.g. 0 for a signed bias score")


@pytest.mark.parametrize("key", ["colour", LONG])
def test_an_unknown_key_reads_the_same_everywhere_and_lists_the_allowed_keys(tmp_path, key):
    shown = show(key)
    lines = {
        "grid": grid_config(tmp_path, **{key: 1}),
        "sidecar": criteria_sidecar(tmp_path, target=0, **{key: 1}),
        "scenario": scenario_file(tmp_path, **{key: 1}),
        "api": python_api(tmp_path, **{key: 1}),
    }
    wording = f"unknown key {shown} — remove it or fix its spelling (allowed: "
    assert f"grid.yaml: finetune.hyperparameters: {wording}epochs, batch_size, learning_rate," in lines["grid"]
    assert f"m.yaml: criteria.acc: {wording}direction, weight, group," in lines["sidecar"]
    assert f"s.yaml: {wording}name, description, table," in lines["scenario"]
    assert lines["api"].startswith(f"harness.finetune: {wording}model, task, seed,")
    if key == LONG:
        assert len(shown) == SHOWN and shown.endswith("…")
        assert all(line.count("x") < 2 * SHOWN for line in lines.values()), lines


def test_a_long_value_in_a_key_path_or_in_a_check_s_own_message_is_cut(tmp_path):
    from harness.grid.schema import ExperimentConfig
    from ranking.floor.schema import validate

    for doc, start in [
        ({"finetune": {"models": ["tiny:bert"], "tasks": [LONG]}}, "g.yaml: finetune.tasks[0]: unknown GLUE task "),
        ({"name": LONG}, "g.yaml: name: "),
        ({"slurm": {"additional": {LONG: 1}}}, f"g.yaml: slurm.additional.{LONG_SHOWN}: "),
    ]:
        line = _refusal(lambda doc=doc: validate(ExperimentConfig, doc, where="g.yaml"))
        assert line.startswith(start) and LONG_SHOWN in line and len(line) < 400, line


def test_the_translator_is_the_ranking_side_s_too(tmp_path):
    import ranking.floor.schema as core
    from ranking import schemas

    assert schemas.floor_schema is core  # the ranking side validates through the floor's one core
    line = _refusal(lambda: schemas.validate(schemas.SCENARIO, {"columns": []}, "s.yaml"))
    assert line == "s.yaml: columns is required: give a non-empty list — write the compared columns: a list of " \
        "{name, rule, setting, group_weights}"


# ---------------------------------------------------------------------- one atomic writer
def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "r.json"
    floor_paths.write_text_atomic(target, "old")

    def half(tmp: Path) -> None:
        tmp.write_bytes(b'{"half')
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    with pytest.raises(OSError):
        floor_paths.write_atomic(target, half)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]

    class Interrupted(BaseException):
        pass

    def interrupted(tmp: Path) -> None:
        tmp.write_bytes(b"ne")
        raise Interrupted

    with pytest.raises(Interrupted):  # Ctrl-C half-way: the same
        floor_paths.write_atomic(target, interrupted)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_rename_that_fails_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    floor_paths.write_bytes_atomic(target, b"old")

    def refuse(src, dst):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(dst))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        floor_paths.write_bytes_atomic(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_the_writer_gives_the_umask_s_mode_even_when_the_fill_makes_the_file_anew(tmp_path):
    def anew(tmp: Path) -> None:  # a library that replaces the file it is given, with mkstemp's 0o600
        tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"data")
        os.close(fd)

    old = os.umask(0o022)
    try:
        floor_paths.write_atomic(tmp_path / "a.bin", anew)
        floor_paths.write_text_atomic(tmp_path / "deep" / "b.txt", "x", parents=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == 0o644
    assert (tmp_path / "a.bin").read_bytes() == b"data" and (tmp_path / "deep" / "b.txt").read_text() == "x"
    with pytest.raises(FileNotFoundError):  # no folder is made unless asked
        floor_paths.write_text_atomic(tmp_path / "none" / "c.txt", "x")


def test_the_store_and_the_ranking_side_write_through_the_one_writer(tmp_path, monkeypatch):
    import harness.store as store
    from ranking.table import ScoreTable

    written: list[str] = []
    real = floor_paths.write_atomic

    def spy(path, fill, **options):
        written.append(Path(path).name)
        return real(path, fill, **options)

    monkeypatch.setattr(floor_paths, "write_atomic", spy)
    store.atomic_write_json(tmp_path / "a.json", {"a": 1})
    store.atomic_write_bytes(tmp_path / "b.bin", b"x")
    (tmp_path / "t.csv").write_text("model,acc\nA,0.5\nB,0.7\n")
    ScoreTable.from_csv(tmp_path / "t.csv").to_csv(tmp_path / "out.csv")
    assert written[:2] == ["a.json", "b.bin"] and "out.csv" in written and "criteria.yaml" in written
