"""The calibration file is a declared schema bound to its device (issue 29's held-out sweep): a file of the
wrong shape, with a NaN, a count as text or beyond the cap, an unknown precision, or from another device is
refused in one line that names the file and key and says what to do, before a run reuses it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.grid.calibrate import Device, calibration_path, ensure_calibration, shape_key
from harness.grid.calibration_file import FIX, read_calibration_file
from harness.specs import FinetuneSpec
from ranking.floor.errors import UserError

DEVICE = Device("cpu-test-4", "cpu", "test cpu", 8 * 2**30, 4)
SPEC = FinetuneSpec("tiny:bert", "rte", 0, batch_size=8, max_length=64)
KEY = shape_key(SPEC)
GOOD = {"device_kind": DEVICE.kind, "entries": {KEY: {
    "device": {"kind": DEVICE.kind, "type": "cpu", "name": "test cpu", "memory_bytes": 8 * 2**30, "cores": 4},
    "spec": {"model": "tiny:bert"}, "rows": [{"n": 2, "precision": "fp32", "status": "measured", "samples_s": 30.0}],
    "chosen": {"runs_per_gpu": 2, "precision": "fp32", "samples_s": 30.0}}}}


def _write(tmp_path: Path, doc) -> Path:
    path = calibration_path(tmp_path, DEVICE.kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _with(change) -> dict:
    doc = copy.deepcopy(GOOD)
    change(doc["entries"][KEY])
    return doc


@pytest.mark.parametrize(("doc", "message"), [
    ([1, 2], "holds a list, not an object with device_kind and entries"),
    ("[not json", "not readable JSON"),
    ({"device_kind": DEVICE.kind}, "entries is required"),
    (_with(lambda e: e.pop("chosen")), f"entries.{KEY}.chosen is required"),
    (_with(lambda e: e["chosen"].update(samples_s=float("nan"))), "chosen.samples_s"),
    (_with(lambda e: e["chosen"].update(runs_per_gpu="two")), "chosen.runs_per_gpu: 'two' is not a whole number"),
    (_with(lambda e: e["chosen"].update(runs_per_gpu=10**9)), "chosen.runs_per_gpu: 1000000000 is above 64"),
    (_with(lambda e: e["chosen"].update(precision="fp64")), "chosen.precision: 'fp64' is not one of fp32, fp16, bf16"),
    ({**GOOD, "device_kind": "nvidia-a100-sxm4-80gb"},
     "was measured on device 'nvidia-a100-sxm4-80gb', not 'cpu-test-4'"),
    (_with(lambda e: e["device"].update(kind="cpu-other-64")), "was measured on device 'cpu-other-64', not 'cpu-test-4'"),
])
def test_a_bad_calibration_file_is_refused_in_one_line(doc, message, tmp_path):
    path = _write(tmp_path, doc)
    with pytest.raises(UserError) as caught:
        read_calibration_file(path)
    text = str(caught.value)
    assert text.startswith(f"calibration file {path}: ") and message in text, text
    assert text.endswith(FIX) and "\n" not in text
    # the grid refuses it the same way, before any burst runs and without rewriting the file
    before = path.read_bytes()
    with pytest.raises(UserError, match="move it aside"):
        ensure_calibration(SPEC, tmp_path, device=DEVICE)
    assert path.read_bytes() == before


def test_a_good_calibration_file_is_reused_as_stored(tmp_path):
    path = _write(tmp_path, GOOD)
    assert read_calibration_file(path) == GOOD
    cal = ensure_calibration(SPEC, tmp_path, device=DEVICE)
    assert cal.reused and cal.bursts_run == 0 and (cal.runs_per_gpu, cal.precision) == (2, "fp32")
    assert cal.ref()["device_kind"] == DEVICE.kind
    assert read_calibration_file(tmp_path / "none.json") == {"device_kind": "none", "entries": {}}
