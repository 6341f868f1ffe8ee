"""One validation point for the harness's run options: every entry (grid config, ``vnr finetune``,
``vnr bias``, ``vnr run`` flags) checks its values here, up front, before anything runs.

A value that would make a run fail (or, worse, succeed with garbage) is refused with a
:class:`~ranking.errors.UserError` naming where it came from: a config key
(``smoke.yaml: finetune.hyperparameters.epochs``) or a flag (``--lr``).

>>> check_spec_values({"epochs": 2, "learning_rate": 1e-3, "seed": 0}, "finetune")
>>> check_spec_values({"learning_rate": float("nan")}, "finetune", where=lambda key: f"--{key}")
Traceback (most recent call last):
...
ranking.errors.UserError: --learning_rate: nan is not a finite number
>>> check_spec_values({"limit": 0}, "bias", where=lambda key: f"bias.options.{key}")
Traceback (most recent call last):
...
ranking.errors.UserError: bias.options.limit: 0 is below 1
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ranking.errors import UserError

# The numeric precisions a run can be asked for (harness.finetune.train and harness.bias.scoring accept these).
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
# How a bias run scores (harness.bias.evaluators): the harness's own definitions, the published scripts', or the
# Vote'n'Rank authors' fairness computation (harness.bias.votenrank).
BIAS_SCORING = ("default", "reference", "votenrank")
SEED_MAX = 2**32 - 1  # numpy's and torch's seed range


def finite(value: Any, where: str, *, minimum: float | None = None, exclusive: bool = False,
           maximum: float | None = None) -> float:
    """``value`` as a finite float within ``[minimum, maximum]`` (``exclusive``: strictly above ``minimum``).

    >>> finite("2e-5", "lr", minimum=0, exclusive=True)
    2e-05
    """
    if isinstance(value, bool):
        raise UserError(f"{where}: {value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise UserError(f"{where}: {value} is not a finite number")
    if minimum is not None and (number <= minimum if exclusive else number < minimum):
        raise UserError(f"{where}: {number:g} must be {'above' if exclusive else 'at least'} {minimum:g}")
    if maximum is not None and number > maximum:
        raise UserError(f"{where}: {number:g} is above {maximum:g}")
    return number


def whole(value: Any, where: str, *, minimum: int | None = 0, maximum: int | None = None) -> int:
    """``value`` as an int within ``[minimum, maximum]`` (``3.0`` and ``"3"`` are 3; ``3.5`` is refused).

    >>> whole("4", "gpus"), whole(4.0, "gpus")
    (4, 4)
    """
    if isinstance(value, bool):
        raise UserError(f"{where}: {value!r} is not a whole number")
    try:
        number = int(value) if isinstance(value, int) else int(float(value))
        if isinstance(value, (float, str)) and float(value) != number:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise UserError(f"{where}: {value!r} is not a whole number") from None
    if minimum is not None and number < minimum:
        raise UserError(f"{where}: {number} is below {minimum}")
    if maximum is not None and number > maximum:
        raise UserError(f"{where}: {number} is above {maximum}")
    return number


def choice(value: Any, where: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UserError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def single_line(value: Any, where: str) -> str:
    """``value`` as text without control characters (a newline would start a new shell/#SBATCH line)."""
    text = str(value)
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise UserError(f"{where}: {text!r} contains a control character ({bad!r}); give it on one line")
    return text


# What each run option may be: (check, description for errors). None is always allowed where the field's default is.
_POSITIVE_FLOAT = {"minimum": 0.0, "exclusive": True}
_FINETUNE_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "seed": lambda v, w: whole(v, w, minimum=0, maximum=SEED_MAX),
    "epochs": lambda v, w: finite(v, w, **_POSITIVE_FLOAT),
    "batch_size": lambda v, w: whole(v, w, minimum=1),
    "learning_rate": lambda v, w: finite(v, w, **_POSITIVE_FLOAT),
    "weight_decay": lambda v, w: finite(v, w, minimum=0.0),
    "warmup_ratio": lambda v, w: finite(v, w, minimum=0.0, maximum=1.0),
    "max_length": lambda v, w: whole(v, w, minimum=1),
    "max_steps": lambda v, w: whole(v, w, minimum=1),
    "max_train_samples": lambda v, w: whole(v, w, minimum=1),
    "max_eval_samples": lambda v, w: whole(v, w, minimum=1),
    "precision": lambda v, w: choice(v, w, PRECISIONS),
    "padding": lambda v, w: choice(v, w, _padding_options()),
    "model_args": lambda v, w: _model_args(v, w),
}
_BIAS_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "limit": lambda v, w: whole(v, w, minimum=1),
    "precision": lambda v, w: choice(v, w, PRECISIONS),
    "batch_tokens": lambda v, w: whole(v, w, minimum=1),
    "model_args": lambda v, w: _model_args(v, w),
    "scoring": lambda v, w: choice(v, w, BIAS_SCORING),
}
CHECKS = {"finetune": _FINETUNE_CHECKS, "bias": _BIAS_CHECKS}


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"{where}: {value!r} is not true or false")
    return value


# Keyword options of the run functions (``run_options:`` in a grid config): they do not change a result,
# but a bad one fails every run.
RUN_OPTION_CHECKS: dict[str, dict[str, Callable[[Any, str], Any]]] = {
    "finetune": {
        "save_steps": lambda v, w: whole(v, w, minimum=1),
        "measure_power_secs": lambda v, w: finite(v, w, **_POSITIVE_FLOAT),
        "keep_checkpoints": _flag,
        "track_efficiency": _flag,
        "country_iso_code": single_line,
        "region": single_line,
        "optim": single_line,
    },
    "bias": {"batch_tokens": lambda v, w: whole(v, w, minimum=1)},
}


def check_run_options(options: Mapping[str, Any], kind: str, *, where: Callable[[str], str] | None = None) -> None:
    """Refuse the first run option of a ``kind`` run whose value cannot work (names are checked by the executor).

    >>> check_run_options({"save_steps": 0}, "finetune", where=lambda key: f"finetune.run_options.{key}")
    Traceback (most recent call last):
    ...
    ranking.errors.UserError: finetune.run_options.save_steps: 0 is below 1
    """
    checks = RUN_OPTION_CHECKS.get(kind, {})
    name = where or (lambda key: key)
    for key, value in options.items():
        if value is not None and key in checks:
            checks[key](value, name(key))


def _padding_options() -> tuple[str, ...]:
    from harness.finetune.batching import PADDING_OPTIONS

    return PADDING_OPTIONS


def _model_args(value: Any, where: str) -> Any:
    """``from_pretrained`` options: checked by :func:`harness.models.parse_model_args` (a mapping or pairs)."""
    from harness.models import parse_model_args

    return parse_model_args(value, where=where)


def check_spec_values(values: Mapping[str, Any], kind: str, *, where: Callable[[str], str] | None = None) -> None:
    """Refuse the first value of a ``kind`` run ("finetune" or "bias") that cannot give a valid run.

    ``values`` maps option names (the spec's fields) to values; unknown names are
    left to the spec (it names them); ``None`` means "the default". ``where(key)``
    says where a key came from in the error (default: the key itself).
    """
    checks = CHECKS[kind]
    name = where or (lambda key: key)
    for key, value in values.items():
        if value is not None and key in checks:
            checks[key](value, name(key))


def check_spec(spec: Any, *, where: Callable[[str], str] | None = None) -> Any:
    """:func:`check_spec_values` over a built :class:`~harness.specs.FinetuneSpec` / ``BiasSpec``; returns it.

    What ``vnr finetune`` and ``vnr bias`` call on the spec built from their flags
    (``where=lambda key: f"--{key.replace('_', '-')}"``), and what a grid config's
    expansion calls on every spec.
    """
    from dataclasses import fields

    check_spec_values({f.name: getattr(spec, f.name) for f in fields(spec)}, spec.kind, where=where)
    return spec
