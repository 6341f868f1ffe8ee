"""Argument types shared by every ``vnr`` sub-command (argparse turns their errors into one line, exit 2)."""

from __future__ import annotations

import argparse


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
