"""The harness's input schemas: what is the harness's own (the seed range, the precisions a run knows, a
results folder argument) on top of the floor's one schema core (:mod:`ranking.floor.schema`: the field
markers, :func:`~ranking.floor.schema.validate` and the one translator of a refusal into the one-line
:class:`~ranking.floor.errors.UserError` a person reads), which every declaration imports from there.

Every input kind (a grid config, a run spec's values from the CLI or the Python API, SLURM and local
settings) is a declared, typed schema, validated once by pydantic where it enters. Run specs and settings
are plain dataclasses whose annotations carry the markers (``Annotated[float, Number(gt=0)]``); the
markers hold no pydantic import until a value is validated, so importing a spec stays light.

>>> from ranking.floor.schema import validate
>>> validate(tuple[Seed, Seed], [0, -1], where="seeds")
Traceback (most recent call last):
...
ranking.floor.errors.UserError: seeds: [1]: -1 is below 0
"""

from __future__ import annotations

from typing import Annotated, Any

from ranking.floor.errors import UserError
from ranking.floor.schema import Number, one_line, show

SEED_MAX = 2**32 - 1  # numpy's and torch's seed range
# The numeric precisions a run can be asked for (every run kind: harness.specs, harness.finetune.train,
# harness.bias.scoring read these).
PRECISIONS = ("auto", "fp32", "fp16", "bf16")


# ---------------------------------------------------------------------------- common field types
Seed = Annotated[int, Number(ge=0, le=SEED_MAX)]  # a whole number numpy and torch accept as a seed


def output_path(value: Any, where: str) -> Any:
    """A results folder argument as a ``Path`` (text or a path on one line), else a one-line :class:`UserError`."""
    import os
    from pathlib import Path

    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: {show(value)} is not a folder path")
    try:
        one_line(value)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None
    return Path(value)
