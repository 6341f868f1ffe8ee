"""Command-line flags generated from declared fields (as ``HfArgumentParser`` does for dataclasses).

A field of a declared dataclass (a harness run kind's spec or run options, :mod:`harness.specs`; a ranking's
choices, :class:`ranking.plan.RankPlan`) is declared once, with its type, checks and
:class:`~ranking.floor.schema.Help`; a command adds one flag per field from that declaration, so a flag's help
is the field's own description (the config's or scenario's JSON Schema shows the same text) and its value is
checked by the same declaration as a file's key (:func:`ranking.floor.schema.validate`, the error naming the
flag). A field's flag is ``--field-name`` unless the field names another (``Annotated[..., Cli("--lr")]``); a
true/false field is a switch with its negation (``--keep-checkpoints`` / ``--no-keep-checkpoints``, or the
negation the field names: ``Cli(negative="--keep-incomplete")``).

>>> import argparse
>>> from ranking.plan import RankPlan
>>> p = argparse.ArgumentParser()
>>> add_flags(p, RankPlan, only=("draws", "drop_incomplete"))
>>> values(p.parse_args(["--draws", "300", "--keep-incomplete"]), RankPlan, only=("draws", "drop_incomplete"))
{'drop_incomplete': False, 'draws': '300'}
>>> flag(RankPlan, "max_cells")
'--max-cells'
"""

from __future__ import annotations

import argparse
import functools
import typing
from collections.abc import Sequence
from dataclasses import MISSING, fields
from typing import Any


class Cli:
    """How a field is given on the command line where it is not ``--field-name VALUE``: its flag
    (``Cli("--lr")`` for ``learning_rate``); ``repeat``: the flag is given once per item (``--setup LINE``
    twice: two lines), its values a list; ``metavar``: what the help calls the value; ``dest``: the parsed
    arguments' attribute where two declarations on one command share a field name (``vnr run``'s
    ``--local-gpus`` beside SLURM's ``--gpus``); ``negative``: a switch's negation where it is not
    ``--no-<flag>`` (``--keep-incomplete`` for ``--drop-incomplete``); ``needs``: the switch field this one only
    applies with (``--level`` with ``--intervals``: a command refuses it given alone, :func:`unused`)."""

    def __init__(self, flag: str | None = None, *, repeat: bool = False, metavar: str | None = None,
                 dest: str | None = None, negative: str | None = None, needs: str | None = None) -> None:
        self.flag, self.repeat, self.metavar, self.dest = flag, repeat, metavar, dest
        self.negative, self.needs = negative, needs


def _cli(hint: Any) -> Cli:
    return next((meta for meta in _metadata(hint) if isinstance(meta, Cli)), Cli())


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A class's field types, read once (``get_type_hints`` compiles every annotation it reads)."""
    return typing.get_type_hints(cls, include_extras=True)


def _metadata(hint: Any) -> list[Any]:
    """Every marker declared anywhere in a field's type (an optional field's inner ``Annotated`` too)."""
    found = list(getattr(hint, "__metadata__", ()))
    for arg in typing.get_args(hint):
        found += _metadata(arg)
    return found


def flag(cls: type, name: str) -> str:
    """The flag of field ``name`` of ``cls``: its :class:`Cli` marker's, else ``--field-name``."""
    return _cli(_hints(cls)[name]).flag or "--" + name.replace("_", "-")


def _is_switch(hint: Any) -> bool:
    from ranking.floor.schema import Flag

    return any(isinstance(meta, Flag) for meta in _metadata(hint))


def _help(field: Any, hint: Any, required: bool, defaults: bool) -> str:
    from ranking.floor.schema import description

    text = description(hint) or field.name.replace("_", " ")
    default = field.default
    if defaults and not required and default not in (None, (), False, MISSING) and "default" not in text:
        text += f" (default: {default})"
    if _cli(hint).repeat:
        text += " (repeatable)"
    return text.replace("%", "%%")


def _metavar(name: str, hint: Any) -> str:
    """``{auto,fp32,fp16,bf16}`` for a field of a few named values (optional or not), else the flag's name in
    capitals."""
    def literal(t: Any) -> tuple[Any, ...] | None:
        if typing.get_origin(t) is typing.Literal:
            return typing.get_args(t)
        for arg in typing.get_args(t):
            found = literal(arg)
            if found:
                return found
        return None

    named = literal(hint)
    return "{" + ",".join(map(str, named)) + "}" if named else name[2:].upper().replace("-", "_")


def add_flags(parser: Any, cls: type, *, skip: Sequence[str] = (), only: Sequence[str] | None = None,
              defaults: bool = True) -> None:
    """One flag per field of ``cls`` (``only`` those, if given) but those in ``skip`` (given by flags of their
    own): text, read and checked by the field's declaration when :func:`values` hands it to
    :func:`ranking.floor.schema.validate`. A field without a default is a required flag; ``defaults=False``: the
    help names no default (the flags override a config's values, whose defaults apply)."""
    hints = _hints(cls)
    for field in fields(cls):
        if field.name in skip or (only is not None and field.name not in only):
            continue
        hint = hints[field.name]
        required = field.default is MISSING and field.default_factory is MISSING
        name, cli, text = flag(cls, field.name), _cli(hint), _help(field, hint, required, defaults)
        dest = cli.dest or field.name
        if _is_switch(hint) and cli.negative:
            both = parser.add_mutually_exclusive_group()
            both.add_argument(name, dest=dest, action="store_const", const=True, default=None, help=text)
            both.add_argument(cli.negative, dest=dest, action="store_const", const=False,
                              help=f"the opposite of {name}")
        elif _is_switch(hint):
            parser.add_argument(name, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            parser.add_argument(name, dest=dest, default=None, required=required,
                                action="append" if cli.repeat else "store",
                                metavar=cli.metavar or _metavar(name, hint), help=text)


def values(args: argparse.Namespace, cls: type, *, skip: Sequence[str] = (), only: Sequence[str] | None = None
           ) -> dict[str, Any]:
    """The fields of ``cls`` given as flags (those left out: the declaration's default)."""
    hints = _hints(cls)
    given = {f.name: getattr(args, _cli(hints[f.name]).dest or f.name, None) for f in fields(cls)
             if f.name not in skip and (only is None or f.name in only)}
    return {name: value for name, value in given.items() if value is not None}


def names(*classes: type) -> typing.Callable[[str], str]:
    """Field name → its flag, for :func:`ranking.floor.schema.validate`'s errors (``--lr: nan is not a finite number``)."""
    table = {f.name: flag(cls, f.name) for cls in classes for f in fields(cls)}
    return lambda name: table.get(name, "--" + name.replace("_", "-"))


def unused(args: argparse.Namespace, cls: type, *, only: Sequence[str] | None = None) -> str | None:
    """The first flag given without the switch it only applies with (:class:`Cli`'s ``needs``), as the one line
    that refuses it (``--level only applies with --intervals``), else None."""
    hints = _hints(cls)
    for field in fields(cls):
        need = _cli(hints[field.name]).needs if field.name in hints else None
        if not need or (only is not None and field.name not in only):
            continue
        if getattr(args, _cli(hints[field.name]).dest or field.name, None) is not None and not getattr(args, need, None):
            return f"{flag(cls, field.name)} only applies with {flag(cls, need)}"
    return None
