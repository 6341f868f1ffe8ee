"""Argument types and options shared by the `vnr` sub-commands: integers, rule lists, column lists, the ranking
choices' flags (one-line errors, exit 2). The TABLE argument and its options: :mod:`ranking.cli_table`."""

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


def registered_rule_names() -> list[str]:
    """The rule names registered in :mod:`ranking.rules`, read from its ``@register("name", ...)`` lines.

    For ``--help`` only: listing the rules this way does not import numpy (tests check it equals
    :func:`ranking.rules.rule_names`).
    """
    import importlib.util
    import re

    spec = importlib.util.find_spec("ranking.rules")
    if spec is None or spec.origin is None:
        return []
    with open(spec.origin, encoding="utf-8") as fh:
        return re.findall(r'^@register\(\s*"(\w+)"', fh.read(), flags=re.M)


def rule_help(text: str) -> str:
    """``text`` followed by the list of rule names (for a ``--rule`` option's help)."""
    return f"{text}; rules: {', '.join(registered_rule_names())}"


def column_list(text: str) -> list[str]:
    """An argparse type: comma-separated column names.

    >>> column_list("energy_kwh, time_h")
    ['energy_kwh', 'time_h']
    """
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give one or more comma-separated column names")
    return names


def finite_float(minimum: float, *, strict: bool):
    """An argparse type: a finite number ``> minimum`` (``strict``) or ``>= minimum`` (``nan``/``inf`` refused).

    >>> finite_float(0, strict=False)("0")
    0.0
    """
    relation = ">" if strict else ">="

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or (value <= minimum if strict else value < minimum):
            raise argparse.ArgumentTypeError(f"{text} must be a finite number {relation} {minimum:g}")
        return value

    parse.__name__ = f"finite number {relation} {minimum:g}"
    return parse


finite_non_negative_float = finite_float(0, strict=False)


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


def add_choice_flags(parser: argparse.ArgumentParser, command: str, *, only: tuple[str, ...] | None = None) -> None:
    """The flags of the ranking choices ``command`` takes (:func:`ranking.plan.on`), generated from their one
    declaration (:class:`ranking.plan.RankPlan`: type, bound, default and help); ``only``: some of them."""
    from ranking.floor.flags import add_flags
    from ranking.plan import RankPlan, on

    chosen = tuple(n for n in on(command) if only is None or n in only)
    add_flags(parser, RankPlan, only=chosen)
    parser.set_defaults(_choices=chosen)


def choices_from_args(args: argparse.Namespace) -> dict[str, object]:
    """The ranking choices given as flags, checked once against their declaration (a refusal names the flag),
    written back into ``args`` with the declared defaults filled in; returns the given ones."""
    from ranking.floor.flags import names, values
    from ranking.plan import RankPlan, check_choices

    chosen = tuple(getattr(args, "_choices", ()))
    given = check_choices(values(args, RankPlan, only=chosen), names=names(RankPlan))
    for name in chosen:
        setattr(args, name, given.get(name, RankPlan.__dataclass_fields__[name].default))
    return given
