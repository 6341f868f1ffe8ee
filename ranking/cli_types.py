"""Argument types shared by every ``vnr`` sub-command (argparse turns their errors into one line, exit 2)."""

from __future__ import annotations

import argparse
import math


def int_at_least(minimum: int):
    """An argparse type: an integer ``>= minimum``.

    >>> int_at_least(1)("3")
    3
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def finite_positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (``nan``/``inf`` refused).

    >>> finite_positive_float("0.95")
    0.95
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def finite_non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0 (``nan``/``inf`` refused).

    >>> finite_non_negative_float("0")
    0.0
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return value


def int_in_range(minimum: int, maximum: int):
    """An argparse type: an integer from ``minimum`` to ``maximum`` (a stated input limit).

    >>> int_in_range(1, 400)("30")
    30
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{value} must be from {minimum} to {maximum}")
        return value

    parse.__name__ = f"int in [{minimum}, {maximum}]"
    return parse
