"""Experiment trackers a fine-tuning run reports its training logs to (the Trainer's ``report_to``).

``report_to`` is a run option (``--report-to``, ``run_options: {report_to: ...}``, ``report_to=`` in
:func:`harness.finetune`), not part of the run id: ``none`` (the default), or one or more of
:data:`TRACKERS`. Every tracker works offline and writes under the run's output:

* ``tensorboard``: event files in ``<output>/logs/<run_id>/``;
* ``wandb``: ``WANDB_MODE=offline`` and ``WANDB_DIR=<output>`` unless you set them (``wandb sync`` uploads later);
* ``mlflow``: ``MLFLOW_TRACKING_URI`` defaults to the folder ``<output>/mlruns``.

A tracker whose package is not installed is refused in one line before the run starts.

>>> parse_report_to("tensorboard,wandb")
('tensorboard', 'wandb')
>>> parse_report_to("none"), parse_report_to(None)
((), ())
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError

TRACKERS = ("tensorboard", "wandb", "mlflow")
# The package each tracker needs (what pip installs), and the module that proves it is there.
_PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow")}


def parse_report_to(value: Any, where: str | None = "report_to") -> tuple[str, ...]:
    """``value`` (``"none"``, a name, ``"a,b"`` or a list) as the trackers' names, in :data:`TRACKERS` order.

    >>> parse_report_to(["mlflow", "tensorboard"])
    ('tensorboard', 'mlflow')
    >>> parse_report_to("all")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: report_to: 'all' is not a tracker: use none or any of tensorboard, wandb, mlflow
    """
    if value is None:
        return ()
    at = f"{where}: " if where else ""  # None: the caller names the key (a declared field's check)
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)):
        raise UserError(f"{at}{value!r}: use none or any of {', '.join(TRACKERS)}")
    chosen = {str(n).strip().lower() for n in names} - {"", "none"}
    for name in sorted(chosen):
        if name not in TRACKERS:
            raise UserError(f"{at}{name!r} is not a tracker: use none or any of {', '.join(TRACKERS)}")
    return tuple(t for t in TRACKERS if t in chosen)


def check_trackers_installed(trackers: tuple[str, ...], where: str = "report_to") -> None:
    """A one-line error for the first tracker whose package is not installed."""
    import importlib.util

    for name in trackers:
        package, module = _PACKAGES[name]
        if importlib.util.find_spec(module) is None:
            raise UserError(f"{where}: {name} is not installed: pip install {package} (or drop it from report_to)")


def logging_dir(output: Path, run_id: str) -> Path:
    """Where a run's tracker logs go: ``<output>/logs/<run_id>`` (kept after the checkpoints are removed)."""
    return Path(output) / "logs" / run_id


@contextlib.contextmanager
def tracker_environment(trackers: tuple[str, ...], output: Path, run_id: str) -> Iterator[dict[str, str]]:
    """The environment the trackers read while the run trains: offline defaults under ``output`` for the
    variables the user did not set, restored afterwards. Yields what was set (for the record)."""
    output = Path(output).resolve()
    defaults: dict[str, str] = {}
    if "tensorboard" in trackers:
        defaults["TENSORBOARD_LOGGING_DIR"] = str(logging_dir(output, run_id))
    if "wandb" in trackers:
        defaults.update({"WANDB_MODE": "offline", "WANDB_DIR": str(output)})
    if "mlflow" in trackers:
        defaults["MLFLOW_TRACKING_URI"] = (output / "mlruns").as_uri()
    chosen = {k: v for k, v in defaults.items() if k not in os.environ}
    os.environ.update(chosen)
    try:
        yield {k: os.environ[k] for k in defaults}
    finally:
        for key in chosen:
            os.environ.pop(key, None)


def report_to_argument(trackers: tuple[str, ...]) -> Any:
    """The Trainer's ``report_to``: the names, or ``"none"``."""
    return list(trackers) or "none"
