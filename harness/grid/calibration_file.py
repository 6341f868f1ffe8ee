"""The calibration file's declared schema, checked where the file is read (``<output>/calibration/<kind>.json``).

:mod:`harness.grid.calibrate` writes one file per device kind; a grid reuses its entries instead of measuring
again, and every fine-tuning run names the chosen setting in its record. A file that is valid JSON of the
wrong shape (a list, an entry without ``chosen``), a ``NaN``, ``runs_per_gpu: "two"`` or ``10**9`` (obeyed,
it would start runs until memory runs out), a precision or a batch layout no run knows (``fp64``, ``padding: zigzag``), or a file measured on
another device kind (copied or renamed beside this one) is refused in one line that names the file and the
key, and says what to do: move it aside (or delete it) and the grid calibrates again on this device. The file is
validated by the floor's one schema core (:func:`ranking.floor.schema.validate`), in the words every input is
refused in.

>>> import json, tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> _ = (folder / "cpu-x-2.json").write_text(json.dumps({"device_kind": "cpu-x-2", "entries": {"k": {
...     "device": {"kind": "cpu-x-2", "type": "cpu"}, "chosen": {"runs_per_gpu": 10**9, "precision": "fp32"}}}}))
>>> read_calibration_file(folder / "cpu-x-2.json")
Traceback (most recent call last):
...
ranking.floor.errors.UserError: calibration file ...cpu-x-2.json: entries.k.chosen.runs_per_gpu: 1000000000 is above 64; move it aside (or delete it) and the grid calibrates again on this device
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from harness.grid.settings import MAX_FUSE, MAX_RUNS_PER_GPU
from harness.schema import PRECISIONS
from harness.specs import Padding
from ranking.floor.errors import UserError
from ranking.floor.schema import Name, Number, validate

__all__ = ["CalibrationFile", "read_calibration_file"]

#: the precisions a calibration measures and a run can be given (``auto`` is what a calibration resolves)
MEASURED_PRECISIONS = tuple(p for p in PRECISIONS if p != "auto")
#: the batch layouts a calibration measures (``padding: auto`` is what it resolves)
MEASURED_LAYOUTS = tuple(p for p in get_args(Padding) if p != "auto")
FIX = "move it aside (or delete it) and the grid calibrates again on this device"


class _Open(BaseModel):
    """A part of the file: the keys the grid reads are declared and checked; others (rows, bounds) are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)


class ChosenSetting(_Open):
    """What the grid runs with: runs side by side per device and the precision of ``precision: auto``."""

    runs_per_gpu: Annotated[int, Number(ge=1, le=MAX_RUNS_PER_GPU)]
    precision: Literal[MEASURED_PRECISIONS]  # type: ignore[valid-type]
    samples_s: Annotated[float, Number(ge=0)] | None = None
    compile: Literal["on", "off"] | None = None  # compile auto, where measured (harness.grid.calibrate.measure_compile)
    fuse: Annotated[int, Number(ge=2, le=MAX_FUSE)] | None = None  # fuse auto, where measured (_Sweep.fused_groups)
    capture: Literal["on", "off"] | None = None  # capture auto, where measured (measure_capture)
    padding: Literal[MEASURED_LAYOUTS] | None = None  # type: ignore[valid-type]  # a layout no run knows is refused


class DeviceRecord(_Open):
    """The device the entry was measured on (:class:`harness.grid.calibrate.Device`)."""

    kind: Name
    type: Literal["cuda", "cpu"]


class CalibrationEntry(_Open):
    """One spec shape's calibration (:func:`harness.grid.calibrate.calibrate`'s document)."""

    device: DeviceRecord
    chosen: ChosenSetting


class CalibrationFile(_Open):
    """``{"device_kind": ..., "entries": {shape key: entry}}``."""

    device_kind: Name
    entries: dict[str, CalibrationEntry]


def read_calibration_file(path: str | Path) -> dict[str, Any]:
    """A device kind's calibration file as stored (``{"device_kind", "entries"}``; empty when there is none),
    checked against :class:`CalibrationFile` and against the device kind it is filed under (its file name,
    :func:`harness.grid.calibrate.calibration_path`). Anything else: a one-line :class:`UserError`."""
    path = Path(path)
    if not path.is_file():
        return {"device_kind": path.stem, "entries": {}}
    where = f"calibration file {path}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # nested thousands of levels deep
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise UserError(f"{where}: not readable JSON ({first}); {FIX}") from None
    if not isinstance(doc, dict):
        kind = {list: "a list", str: "text", type(None): "null"}.get(type(doc), type(doc).__name__)
        raise UserError(f"{where}: holds {kind}, not an object with device_kind and entries; {FIX}")
    try:
        checked = validate(CalibrationFile, doc, where=where)
    except UserError as exc:
        raise UserError(f"{exc}; {FIX}") from None
    device = path.stem
    if checked.device_kind != device:
        raise UserError(f"{where}: was measured on device {checked.device_kind!r}, not {device!r} (the device "
                        f"this file is for); {FIX}")
    for key, entry in checked.entries.items():
        if entry.device.kind != device:
            raise UserError(f"{where}: entry {key[:120]!r} was measured on device {entry.device.kind!r}, not "
                            f"{device!r}; {FIX}")
    return doc
