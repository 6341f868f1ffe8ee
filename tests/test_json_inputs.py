"""Every JSON file the project reads back, written corrupt on disk: cut short, not JSON, not UTF-8, NaN where
the file never holds it, nested thousands of levels deep, a number of 5000 digits, valid JSON of another shape.

A file the project writes again (a run record, a running marker, a checkpoint's files) is treated as missing:
the run or the steps are redone. A file the user hands in (``--array-file``) is a one-line error naming it and
what to do. A file of a worker, of the hub or of another tool is skipped or named in one line. None is a
traceback. Real files, no mocks.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, parse_json, read_json, read_json_object

DEEP = "[" * 100_000
LONG_NUMBER = '{"a": ' + "7" * 5000 + "}"

#: corrupt contents, and the one line the floor gives for each
CORRUPT = {
    "cut": ('{"status": "ok", "metr', "not valid JSON (Unterminated string starting at: line 1, column 18): "
                                      "cut short or edited"),
    "not json": ("hello", "not valid JSON (Expecting value: line 1, column 1): cut short or edited"),
    "empty": ("  \n", "empty"),
    "nan": ('{"a": NaN}', "holds NaN, which is no JSON number"),
    "infinity": ('{"a": -Infinity}', "holds -Infinity, which is no JSON number"),
    "deep": (DEEP, "nested too deeply to read (thousands of levels of [ or {)"),
    "long number": (LONG_NUMBER, "holds a number of more than 4300 digits"),
    "not utf-8": (b'{"a": "\xff"}', "not UTF-8 text"),
}


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


# ---------------------------------------------------------------------- the floor's reader
@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_the_floor_reader_gives_one_bounded_line_for_every_corrupt_file(tmp_path, case):
    content, why = CORRUPT[case]
    path = _write(tmp_path / "x.json", content)
    with pytest.raises(JsonProblem) as err:
        read_json(path)
    assert str(err.value) == why and "\n" not in why and len(why) < 120


def test_the_floor_reader_names_the_shape_the_size_and_an_unreadable_path(tmp_path):
    lst = _write(tmp_path / "list.json", "[1, 2]")
    with pytest.raises(JsonProblem, match="^holds a list, not a JSON object$"):
        read_json_object(lst)
    with pytest.raises(JsonProblem, match="^holds text, not a JSON object$"):
        read_json_object(_write(tmp_path / "text.json", '"x"'))
    with pytest.raises(JsonProblem, match="^bigger than 10 bytes"):
        read_json(_write(tmp_path / "big.json", "[" + "1," * 20 + "1]"), max_bytes=10)
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(JsonProblem, match="^cannot be read"):
        read_json(tmp_path / "folder.json")
    with pytest.raises(FileNotFoundError):  # absent is no problem of content: the caller decides
        read_json(tmp_path / "absent.json")
    assert parse_json('{"a": NaN}', allow_nan=True)["a"] != 0  # where NaN is the caller's to name


# ---------------------------------------------------------------------- run records and running markers
@pytest.mark.parametrize("case,why", [
    ("deep", "its result file is nested too deeply to read (thousands of levels of [ or {)"),
    ("long number", "its result file holds a number of more than 4300 digits"),
    ("not utf-8", "its result file is not UTF-8 text"),
    ("cut", "its result file is not valid JSON (cut short or edited)"),
])
def test_a_corrupt_run_record_is_a_missing_run_with_its_reason(tmp_path, case, why):
    from harness.store import RunStore

    store = RunStore(tmp_path)
    _write(store.result_path("r1"), CORRUPT[case][0])
    _write(store.result_path("r2"), json.dumps({"run_id": "r2", "status": "ok", "metrics": {"accuracy": 0.5}}))
    assert store.get("r1") is None and not store.is_done("r1")
    assert store.unreadable("r1") == why
    assert [r["run_id"] for r in store.records()] == ["r2"]  # the corrupt one skipped, the good one kept


@pytest.mark.parametrize("content", [CORRUPT["deep"][0], CORRUPT["long number"][0], CORRUPT["nan"][0], b"\xff\xfe",
                                     "[1, 2]", '"host"'])
def test_a_corrupt_running_marker_is_no_marker(tmp_path, content):
    from harness.store import RunStore

    store = RunStore(tmp_path)
    _write(store.running_path("r1"), content)
    assert store.running_info("r1") is None
    store.running_path("r1").unlink()
    store.running_path("r1").mkdir()  # a folder in its place
    assert store.running_info("r1") is None


def test_a_running_marker_of_impossible_values_shows_bounded_and_is_not_alive():
    from harness.grid.status import _marker_field, _pid_alive

    assert _pid_alive(10**30) is False and _pid_alive("x") is False and _pid_alive([1]) is False
    assert _marker_field("h" * 10_000) == "h" * 59 + "…" and _marker_field("a\nb") == "a b"


# ---------------------------------------------------------------------- checkpoints
def _checkpoint(run_dir: Path, step: int, *, state: str | None = None, marker: str | None = None,
                files: dict[str, str] | None = None) -> Path:
    folder = run_dir / f"checkpoint-{step}"
    _write(folder / "trainer_state.json", state if state is not None else json.dumps({"global_step": step}))
    _write(folder / "vnr-complete.json", marker if marker is not None else json.dumps({"global_step": step}))
    for name, text in (files or {}).items():
        _write(folder / name, text)
    return folder


@pytest.mark.parametrize("where,content,warning", [
    ("state", DEEP, "its trainer_state.json is nested too deeply to read"),
    ("state", "[10]", "its trainer_state.json holds a list, not a JSON object"),
    ("state", '{"global_step": "10"}', "its trainer_state.json has global_step '10', not 10"),
    ("state", '{"global_step": 1e400}', "its trainer_state.json has global_step inf, not 10"),
    ("state", '{"global_step": ' + "9" * 5000 + "}", "its trainer_state.json holds a number of more than 4300"),
    ("marker", '{"global_step": 10, "time": Na', "its vnr-complete.json is not valid JSON"),
    ("marker", '{"time": NaN}', "its vnr-complete.json holds NaN, which is no JSON number"),
    ("vnr-tokens.json", '{"samples": 1', "its vnr-tokens.json is not valid JSON"),
    ("efficiency.json", '"x"', "its efficiency.json holds text, not a JSON object"),
])
def test_a_corrupt_checkpoint_is_not_resumed_from_and_is_removed(tmp_path, caplog, where, content, warning):
    from harness.finetune.checkpoints import (
        drop_incomplete_checkpoints,
        is_complete_checkpoint,
        latest_checkpoint,
    )

    good = _checkpoint(tmp_path, 5, files={"vnr-tokens.json": '{"samples": 4}'})
    kwargs = {"state": content} if where == "state" else {"marker": content} if where == "marker" else \
        {"files": {where: content}}
    bad = _checkpoint(tmp_path, 10, **kwargs)
    with caplog.at_level(logging.WARNING, logger="harness.finetune.checkpoints"):
        assert not is_complete_checkpoint(bad)
        assert latest_checkpoint(tmp_path) == good  # the steps after 5 are trained again
    assert any(f"checkpoint {bad} is not used: {warning}" in r.getMessage() for r in caplog.records)
    drop_incomplete_checkpoints(tmp_path, good)
    assert not bad.exists() and good.exists()


def test_a_checkpoint_without_its_marker_is_incomplete_without_a_warning(tmp_path, caplog):
    from harness.finetune.checkpoints import is_complete_checkpoint

    folder = _checkpoint(tmp_path, 3)
    (folder / "vnr-complete.json").unlink()
    with caplog.at_level(logging.WARNING):
        assert not is_complete_checkpoint(folder)
    assert not caplog.records


@pytest.mark.parametrize("content,why", [
    (DEEP, "nested too deeply to read"),
    ('{"samples": NaN}', "holds NaN"),
    ('{"samples": "12"}', "samples is '12', not a count"),
    ('{"samples": -3}', "samples is -3, not a count"),
    ("[]", "holds a list, not a JSON object"),
])
def test_corrupt_token_counts_start_again_from_zero_with_a_warning(tmp_path, caplog, content, why):
    pytest.importorskip("transformers")
    from harness.finetune.callbacks import TOKENS_FILE, TokenAccountingCallback

    path = _write(tmp_path / TOKENS_FILE, content)
    with caplog.at_level(logging.WARNING, logger="harness.finetune"):
        assert TokenAccountingCallback.read_checkpoint(tmp_path) is None
    assert any(f"token counts {path} are not used" in r.getMessage() and why in r.getMessage() for r in caplog.records)
    assert TokenAccountingCallback.read_checkpoint(tmp_path / "absent") is None


@pytest.mark.parametrize("content,why", [
    (DEEP, "nested too deeply to read"),
    ('{"energy_kwh": Infinity}', "holds Infinity"),
    ('{"energy_kwh": "lots"}', "energy_kwh is 'lots', not a number"),
    ('{"energy_kwh": [1]}', "energy_kwh is [1], not a number"),
])
def test_corrupt_efficiency_totals_start_again_from_zero_with_a_warning(tmp_path, caplog, content, why):
    from harness.energy.tracker import _SUMMED, CHECKPOINT_FILE, read_checkpoint_efficiency

    assert "energy_kwh" in _SUMMED
    path = _write(tmp_path / CHECKPOINT_FILE, content)
    with caplog.at_level(logging.WARNING, logger="harness.energy.tracker"):
        assert read_checkpoint_efficiency(tmp_path) is None
    assert any(f"efficiency totals {path} are not used" in r.getMessage() and why in r.getMessage()
               for r in caplog.records)


# ---------------------------------------------------------------------- the array file (handed in)
@pytest.mark.parametrize("content,why", [
    (DEEP, "nested too deeply to read (thousands of levels of [ or {)"),
    (LONG_NUMBER, "holds a number of more than 4300 digits"),
    ('{"only": [], "runs_per_gpu": NaN, "calibrate": false, "gpus": 1, "run_ids": []}',
     "holds NaN, which is no JSON number"),
    ("[1]", "holds a list, not a JSON object"),
    ('{"only": []}', "no runs_per_gpu, calibrate, gpus, run_ids"),
    ('{"only": "rte", "runs_per_gpu": 1, "calibrate": false, "gpus": 1, "run_ids": []}',
     "only is text, not a list of text"),
    ('{"only": [], "runs_per_gpu": 1, "calibrate": "no", "gpus": 1, "run_ids": []}',
     "calibrate is 'no', not true or false"),
    ('{"only": [], "runs_per_gpu": 1, "calibrate": false, "gpus": "' + "9" * 500 + '", "run_ids": []}',
     "gpus is '" + "9" * 58 + "…, not a whole number"),
    ('{"only": [], "runs_per_gpu": 1, "calibrate": false, "gpus": 1, "run_ids": [], "fuse": 0}',
     "fuse is 0, not a group size from 1 to 64"),
    ('{"only": [], "runs_per_gpu": 1, "calibrate": false, "gpus": 1, "run_ids": [], "fuse": 3, "capture": "on"}',
     "capture is 'on', not true or false"),
])
def test_a_corrupt_array_file_is_one_line_naming_it(tmp_path, content, why):
    from harness.grid.arrays import read_array_file

    path = _write(tmp_path / "array-x.json", content)
    with pytest.raises(UserError) as err:
        read_array_file(path)
    assert str(err.value) == (f"--array-file {path}: not an array file written by `vnr run --sbatch-args` ({why}); "
                              "size the array again")


def test_an_array_file_runs_per_gpu_is_shown_bounded(tmp_path):
    from harness.grid.arrays import read_array_file

    path = _write(tmp_path / "array-x.json", json.dumps({"only": [], "runs_per_gpu": "x" * 10_000,
                                                         "calibrate": False, "gpus": 1, "run_ids": []}))
    with pytest.raises(UserError) as err:
        read_array_file(path)
    assert len(str(err.value)) < 300 and "is neither auto nor a positive whole number" in str(err.value)


# ---------------------------------------------------------------------- a calibration worker's output
@pytest.mark.parametrize("content,why", [
    (None, "is No such file or directory"),
    ('{"index": 0, "t1": [1.0', "is not valid JSON"),
    ('{"index": 0, "t1": [NaN]}', "holds NaN, which is no JSON number"),
    ("[]", "holds a list, not a JSON object"),
    ('{"index": 0, "t1": [1.0], "window_samples": 8, "losses": []}', "lacks its index, window_samples, "
                                                                     "peak_memory_bytes, losses or one finite t1"),
    ('{"index": 0, "t1": [], "window_samples": 8, "peak_memory_bytes": 1, "losses": []}', "lacks its index"),
])
def test_a_worker_that_left_no_usable_result_is_one_line(tmp_path, content, why):
    from harness.grid.calibrate import worker_result

    path = tmp_path / "worker-0.json"
    if content is not None:
        _write(path, content)
    with pytest.raises(RuntimeError) as err:
        worker_result(path, 1, "bf16", 2)
    message = str(err.value)
    assert message.startswith(f"a calibration worker (bf16, N=2) left no usable result: {path} ") and why in message
    assert "\n" not in message
    good = {"index": 0, "t0": [0.0], "t1": [1.5], "window_samples": 8, "peak_memory_bytes": 10, "losses": [1.0]}
    assert worker_result(_write(path, json.dumps(good)), 1) == good


# ---------------------------------------------------------------------- third-party and report files
def test_a_corrupt_hub_index_is_as_if_not_cached(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    from harness.prefetch import model_cached

    snap = tmp_path / "models--org--m" / "snapshots" / "abc"
    _write(tmp_path / "models--org--m" / "refs" / "main", "abc")
    _write(snap / "config.json", "{}")
    _write(snap / "shard-1.safetensors", "")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    for index in (DEEP, '{"weight_map": ["shard-1.safetensors"]}', '{"weight_map": {"a": ["x"]}}', "[]",
                  '{"weight_map": {"a": "shard-1.safetensors"'):
        _write(snap / "model.safetensors.index.json", index)
        assert model_cached("org/m") is False
    _write(snap / "model.safetensors.index.json", '{"weight_map": {"a": "shard-1.safetensors"}}')
    assert model_cached("org/m") is True


def test_a_corrupt_safetensors_header_or_config_is_unreadable_not_a_traceback(tmp_path):
    import struct

    from harness.models import _read_json, _safetensors_length, dimensions_on_disk

    for header in (DEEP.encode(), b"[1, 2]", b'{"w": {"data_offsets": [0, NaN]}}', b'{"w": 5}'):
        path = _write(tmp_path / "model.safetensors", struct.pack("<Q", len(header)) + header)
        assert _safetensors_length(path) is None
    folder = tmp_path / "model"
    for config in (DEEP, LONG_NUMBER, "[1]", b"\xff"):
        _write(folder / "config.json", config)
        assert dimensions_on_disk(str(folder)) is None
        _write(folder / "tokenizer.json", config)
        assert _read_json(folder / "tokenizer.json") in (None, [1])


def test_a_corrupt_report_manifest_is_no_manifest(tmp_path):
    from ranking.scenarios.report import MANIFEST, _previous_report_files

    for content in (DEEP, LONG_NUMBER, '{"files": [NaN]}', b"\xff", "[]"):
        _write(tmp_path / MANIFEST, content)
        assert _previous_report_files(tmp_path) is None  # unknown report files there are then refused by name
    _write(tmp_path / MANIFEST, '{"files": ["report.html"]}')
    assert _previous_report_files(tmp_path) == {"report.html"}


def test_corrupt_submission_manifests_are_skipped(tmp_path):
    from harness.grid.slurm import read_manifests

    for i, content in enumerate((DEEP, LONG_NUMBER, "[]", '{"tasks": [1]}', b"\xff")):
        _write(tmp_path / "submissions" / f"bad-{i}.json", content)
    _write(tmp_path / "submissions" / "good.json", json.dumps({"array_job_id": 7, "tasks": {"0": "r1"}}))
    assert read_manifests(tmp_path) == {"7": [("0", "r1")]}


def test_corrupt_ledger_lines_are_rejected_by_reason(tmp_path):
    from harness.energy.ledger import GpuLedger

    good = '{"attempt": "a", "run": "A", "kind": "start", "t": 0.0, "mj": 0, "pid": 1}'
    lines = [good.encode(), DEEP.encode(), b'{"attempt": "\xff"}', LONG_NUMBER.encode(), b"",
             b'{"attempt": "a", "kind": "tick", "t": 1.0, "mj": "' + b"x" * 10_000 + b'"}', good.encode()]
    path = _write(tmp_path / "GPU-x.jsonl", b"\n".join(lines) + b"\n")
    ledger = GpuLedger(path)
    assert [e["line"] for e in ledger.events()] == [1, 7]
    assert ledger.rejected[:4] == ["GPU-x.jsonl:2: nested too deeply to read (thousands of levels of [ or {)",
                                   "GPU-x.jsonl:3: not UTF-8 text",
                                   "GPU-x.jsonl:4: holds a number of more than 4300 digits",
                                   "GPU-x.jsonl:5: not a JSON line"]
    assert ledger.rejected[4].startswith("GPU-x.jsonl:6: mj is 'xxx") and len(ledger.rejected[4]) < 120


# ---------------------------------------------------------------------- files handed in with a declared reader
@pytest.mark.parametrize("content", [DEEP, LONG_NUMBER])
def test_a_calibration_file_nested_or_numbered_beyond_reading_is_one_line(tmp_path, content):
    from harness.grid.calibration_file import FIX, read_calibration_file

    path = _write(tmp_path / "cpu-test-4.json", content)
    with pytest.raises(UserError) as err:
        read_calibration_file(path)
    text = str(err.value)
    assert text.startswith(f"calibration file {path}: not readable JSON (") and text.endswith(FIX)
    assert "\n" not in text and len(text) < 400


@pytest.mark.parametrize("content,why", [
    (DEEP, "nested too deeply to read"),
    (LONG_NUMBER, "holds a number of more than 4300 digits"),
    (b'{"data": "\xff"}', "not UTF-8 text"),
    ('{"data": {', "not valid JSON"),
])
def test_a_stereoset_file_beyond_reading_is_one_line_naming_it(tmp_path, content, why):
    from harness.bias.data import load_stereoset

    path = _write(tmp_path / "bias/stereoset/dev.json", content)
    with pytest.raises(UserError) as err:
        load_stereoset(tmp_path)
    text = str(err.value)
    assert text.startswith(f"{path}: not a StereoSet JSON file with a 'data' key (") and why in text
    assert "\n" not in text and len(text) < 400


# ---------------------------------------------------------------------- the attempt a child joins (environment)
@pytest.mark.parametrize("value", [DEEP, "[1]", "not json", '{"run_id": "RID", "root": "ROOT", "attempt": 5}',
                                   '{"run_id": "RID", "root": "ROOT", "attempt": "a", "started": "x"}',
                                   '{"run_id": "RID", "root": "ROOT", "attempt": "a", "started": 1, "lock_fd": "3"}'])
def test_a_stray_attempt_in_the_environment_is_ignored_and_the_run_is_its_own(tmp_path, monkeypatch, value):
    import os

    from harness.specs import BiasSpec
    from harness.store import ATTEMPT_ENV, RunStore

    spec = BiasSpec("tiny:bert", "crows_pairs", limit=2)
    store = RunStore(tmp_path)
    monkeypatch.setenv(ATTEMPT_ENV, value.replace("RID", spec.run_id()).replace("ROOT", os.path.realpath(tmp_path)))
    with store.run(spec) as run:
        assert run.state == "run" and run.lock_fd is not None  # it took the lock itself
        run.finish({"metrics": {"x": 1.0}})
    assert store.is_done(spec.run_id())


@pytest.mark.parametrize("content,why", [
    (DEEP, "is nested too deeply to read (thousands of levels of [ or {)"),
    ('{"files": [NaN]}', "holds NaN, which is no JSON number"),
    ('{"files": ["rank_probabilities.png"', "is not valid JSON (Expecting ',' delimiter: line 1, column 36): cut "
                                           "short or edited"),
    ('{"files": "all"}', "lists no files"),
    (None, "is missing"),
])
def test_an_earlier_report_with_a_corrupt_manifest_is_refused_by_name_and_kept(tmp_path, content, why):
    from ranking.scenarios.report import MANIFEST, stale_report_files

    if content is not None:
        _write(tmp_path / MANIFEST, content)
    _write(tmp_path / "rank_probabilities.png", b"png")
    with pytest.raises(UserError) as err:
        stale_report_files(tmp_path, ["report.html"])
    assert str(err.value) == (f"--out {tmp_path}: holds rank_probabilities.png from an earlier report that lists no "
                              f"files ({MANIFEST} {why}), and this report writes none of them: remove it, or choose "
                              "another --out")
    assert (tmp_path / "rank_probabilities.png").exists()
    assert stale_report_files(tmp_path, ["report.html", "rank_probabilities.png"]) == []  # all overwritten: fine
