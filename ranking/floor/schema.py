"""The one schema core: the field markers every declared input uses, one :func:`validate`, and one translator
from a refusal to the ONE line a person reads.

Every input of the project (a grid config, a run spec's values from the CLI or the Python API, SLURM and
local settings, a calibration file, a criteria sidecar, a leaderboard spec, a scenario) is a declared, typed
schema (a pydantic model, or a dataclass whose annotations carry the markers below), validated by
:func:`validate` where it enters. Whatever the input, a value that does not fit is refused in the same words::

    where: key.path: what is wrong — what to write instead

* ``where`` names the file (``criteria.yaml``) or the flag (``--lr``: ``names`` maps a field to it);
* ``key.path`` is the place in it (``finetune.overrides[0].set.lr``; a key with a space, dot, bracket or quote
  is quoted);
  a problem that starts with a verb follows it without the colon (``finetune.models is required``);
* what is wrong shows the value bounded (:func:`show`: numbers plain, anything else quoted and cut at 60
  characters), and the bound it breaks (``0 must be above 0``, ``nan is not a finite number``);
* what to write instead: the allowed keys for an unknown key, the field's description (``Field(description=)``
  or :class:`Help`) for a missing key or a value of the wrong type; a check's own message as it is.

The markers hold no pydantic import until a value is validated, so importing a declaration stays light;
this module imports only the standard library (pydantic inside the functions).

>>> from dataclasses import dataclass
>>> from typing import Annotated
>>> @dataclass(frozen=True)
... class Example:
...     lr: Annotated[float, Number(gt=0), Help("peak learning rate")] = 2e-5
>>> validate(Example, {"lr": "3e-5"}, where="x.yaml")
Example(lr=3e-05)
>>> validate(Example, {"lr": float("nan")}, where="x.yaml")
Traceback (most recent call last):
...
ranking.floor.errors.UserError: x.yaml: lr: nan is not a finite number
>>> validate(Example, {"lr": 0}, names={"lr": "--lr"}.get)
Traceback (most recent call last):
...
ranking.floor.errors.UserError: --lr: 0 must be above 0
>>> validate(Example, {"lr": [1]}, where="x.yaml")
Traceback (most recent call last):
...
ranking.floor.errors.UserError: x.yaml: lr: [1] is not a number — write peak learning rate
>>> validate(Example, {"lr": 1, "l" * 10_000: 2}, where="x.yaml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ranking.floor.errors.UserError: x.yaml: unknown key 'llll...llll… — remove it or fix its spelling (allowed: lr)
"""

from __future__ import annotations

import functools
import math
import re
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from ranking.floor.errors import UserError

__all__ = [
    "Number", "Text", "Check", "Before", "Flag", "Refusal", "Shown", "Help", "Count", "PositiveFloat", "OneLine",
    "Name", "one_line", "show", "validate", "check_fields", "fields_model", "adapter", "description",
    "user_error", "location",
]

#: the longest a value or a key is shown in a message (the rest is cut, with "…")
SHOWN = 60


# ---------------------------------------------------------------------------- markers
class Number:
    """An int or float field: no booleans, numeric text read as a number (YAML 1.1 reads ``2e-5`` as text,
    the CLI gives text), finite, within bounds (``gt``/``ge`` below, ``le``/``lt`` above). An int field takes
    ``3.0`` and ``"1e3"`` but refuses ``1.5``."""

    def __init__(self, *, gt: float | None = None, ge: float | None = None, le: float | None = None,
                 lt: float | None = None) -> None:
        self.bounds = {k: v for k, v in (("gt", gt), ("ge", ge), ("le", le), ("lt", lt)) if v is not None}

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        outer = dict(handler(source))
        inner = dict(outer["schema"]) if outer.get("type") == "nullable" else outer
        if inner.get("type") not in ("int", "float"):  # pragma: no cover - a declaration error
            raise TypeError(f"Number() marks an int or float field, not {source!r}")
        inner.update(self.bounds, strict=False)
        if inner["type"] == "float":
            inner["allow_inf_nan"] = False
        if outer is not inner:
            outer["schema"] = inner
        whole = inner["type"] == "int"
        return core_schema.no_info_before_validator_function(lambda value: _read_number(value, whole), outer)


class Text:
    """A text field on one line (no control characters: a newline would start a new shell or #SBATCH line);
    ``empty=False`` also refuses empty or blank text."""

    def __init__(self, *, empty: bool = True) -> None:
        self.empty = empty

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def check(value: Any) -> str:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)  # YAML reads a model id "1" or a region "7" as a number
            if not isinstance(value, str):
                raise ValueError(f"{show(value)} is not text")
            one_line(value)
            if not self.empty and not value.strip():
                raise ValueError("is empty")
            return value

        return core_schema.no_info_before_validator_function(check, handler(source))


class Check:
    """Run ``function(value)`` after the type is checked (it returns the value to keep, or raises
    ``ValueError``/:class:`UserError` with the message); for checks a type cannot state (SLURM's syntax)."""

    def __init__(self, function: Callable[[Any], Any]) -> None:
        self.function = function

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.function, handler(source))


class Before:
    """Run ``function(value)`` before the type is checked: it reads a friendlier spelling (``"04:00:00"`` as
    minutes, ``"0,2"`` as GPU indices) or raises ``ValueError``/:class:`UserError` with the message."""

    def __init__(self, function: Callable[[Any], Any]) -> None:
        self.function = function

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(self.function, handler(source))


class Flag:
    """A true/false field that takes only ``true`` or ``false`` (not ``"no"``, ``0`` or ``"off"``)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        outer = dict(handler(source))
        if outer.get("type") == "nullable":
            outer["schema"] = {**outer["schema"], "strict": True}
        else:
            outer["strict"] = True
        return outer


class Refusal(UserError):
    """A check's refusal of part of a value: ``at`` names the part (``("mail-type",)`` under ``additional``)."""

    def __init__(self, message: str, *, at: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.at = at


class Shown:
    """The JSON Schema an editor is shown for a field read by a :class:`Before` function (which accepts more
    spellings than the stored type: ``time: "04:00:00"`` for minutes)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = dict(schema)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        return dict(self.schema)


class Help:
    """A field's description: what ``vnr schema`` shows an editor, and what an error says to write."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        out = handler(schema)
        out["description"] = self.text
        return out


def _read_number(value: Any, whole: bool = False) -> Any:
    what = "a whole number" if whole else "a number"
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not {what}")
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            return value  # the type refuses it, in the words of a value of the wrong type
    return value


def one_line(value: str) -> str:
    """``value`` if it has no control character, else a ``ValueError`` naming the character."""
    bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ValueError(f"{show(value)} contains a control character ({bad!r}); give it on one line")
    return value


# ---------------------------------------------------------------------------- common field types
Count = Annotated[int, Number(ge=1)]  # a whole number from 1
PositiveFloat = Annotated[float, Number(gt=0)]  # a finite number above 0
OneLine = Annotated[str, Text()]  # text on one line
Name = Annotated[str, Text(empty=False)]  # non-blank text on one line


# ---------------------------------------------------------------------------- validation
def fields_model(kind: type, *, exclude: tuple[str, ...] = (), optional: bool = False,
                 rename: tuple[tuple[str, str], ...] = ()) -> Any:
    """The pydantic model of a declared dataclass's fields (its annotations and defaults), unknown keys refused.

    ``exclude`` leaves fields out; ``optional`` makes every field optional (a grid's ``hyperparameters:``:
    a key left out keeps the spec's default, a key given must be valid, ``null`` included). Adding an
    annotated field to the dataclass adds it here, to the CLI's and API's checks and to the JSON Schema.
    ``rename`` gives fields another key (a config's ``time`` for ``time_min``).
    """
    return _fields_model(kind, tuple(exclude), optional, tuple(rename))


@functools.cache
def _fields_model(kind: type, exclude: tuple[str, ...], optional: bool, rename: tuple[tuple[str, str], ...]) -> Any:
    import dataclasses

    from pydantic import ConfigDict, Field, create_model

    hints = typing.get_type_hints(kind, include_extras=True)
    declared: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        if f.name in exclude or not f.init or f.name.startswith("_"):
            continue
        if optional or f.default is not dataclasses.MISSING:
            default = None if optional else f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = ...
        shown = {"default": f.default} if optional and isinstance(f.default, (int, float, str, bool)) else None
        declared[dict(rename).get(f.name, f.name)] = (
            hints[f.name], Field(default, description=description(hints[f.name]), json_schema_extra=shown))
    title = kind.__name__ + ("Options" if optional else "")
    return create_model(title, __config__=ConfigDict(extra="forbid", title=title, validate_default=False),
                        __doc__=kind.__doc__, **declared)


@functools.cache
def adapter(kind: Any) -> Any:
    """The (cached) pydantic ``TypeAdapter`` of a declared type (a model, or a dataclass's fields model)."""
    from pydantic import TypeAdapter

    if _is_dataclass(kind):
        kind = fields_model(kind)
    return TypeAdapter(kind)


def _is_dataclass(kind: Any) -> bool:
    import dataclasses

    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def validate(kind: Any, data: Any, *, where: Any = None, names: Callable[[str], str | None] | None = None) -> Any:
    """``data`` validated as ``kind`` (a pydantic model, a declared dataclass, or any type pydantic reads), or
    a one-line :class:`UserError` (:func:`user_error`).

    A dataclass is built from its validated fields (its ``__post_init__`` then runs its own checks, which
    raise :class:`UserError`; they are named by ``where`` too). The error names the key path under
    ``where`` (``x.yaml: finetune.overrides[0].set.batch_size: ...``); ``names(field)`` may name a top
    field otherwise (a CLI flag: ``--lr``).
    """
    from pydantic import ValidationError

    where = None if where is None else str(where)
    try:
        value = adapter(kind).validate_python(data)
    except ValidationError as exc:
        raise user_error(exc, where=where, names=names, kind=kind) from None
    if not _is_dataclass(kind):
        return value
    try:
        return kind(**{key: getattr(value, key) for key in value.model_fields_set | _required(kind)})
    except UserError as exc:  # a check of the dataclass's own, on its fields together
        at = tuple(getattr(exc, "at", ()))
        named = names(str(at[0])) if names and at else None
        path = named or location(at)
        raise UserError(": ".join(p for p in (where, path, str(exc)) if p)) from None


def check_fields(obj: Any, *, at: tuple[str, ...] = ()) -> None:
    """Validate a dataclass instance's own field values in place (numbers given their field's type, so equal
    settings hash to equal run ids); what ``__post_init__`` of a declared dataclass calls, so one built
    directly in Python is checked too."""
    import dataclasses

    from pydantic import ValidationError

    kind = type(obj)
    data = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init and not f.name.startswith("_")}
    try:
        checked = fields_model(kind).model_validate(data)
    except ValidationError as exc:
        raise user_error(exc, kind=kind, at=at) from None
    for key in data:
        object.__setattr__(obj, key, getattr(checked, key))


def description(hint: Any) -> str | None:
    """The :class:`Help` text (or :class:`Shown` description) declared anywhere in a field's type, so it is
    the key's own description in the JSON Schema even where the field is optional."""
    for meta in getattr(hint, "__metadata__", ()):
        if isinstance(meta, Help):
            return meta.text
        if isinstance(meta, Shown) and "description" in meta.schema:
            return str(meta.schema["description"])
    for arg in typing.get_args(hint):
        found = description(arg)
        if found:
            return found
    return None


def _required(kind: type) -> set[str]:
    return {name for name, f in fields_model(kind).model_fields.items() if f.is_required()}


# ---------------------------------------------------------------------------- the one translator
_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")
#: problems that read as the key's predicate: ``finetune.models is required``, not ``finetune.models: is ...``
_PREDICATES = ("must ", "is required", "is empty", "is null", "needs ", "has ")


def user_error(exc: Any, *, where: Any = None, names: Callable[[str], str | None] | None = None,
               kind: Any = None, at: tuple[Any, ...] = ()) -> UserError:
    """The first error of a pydantic ``ValidationError`` (an unknown key first: it is usually the misspelling
    of a key the other errors call missing) as ONE line: ``where: key.path: what is wrong — what to write``.

    ``kind`` (the validated model or dataclass) lets the line list the allowed keys and the field's
    description; ``at`` is the key path of the validated value itself (``("slurm",)``); ``names(field)``
    names a top field otherwise (a CLI flag).
    """
    errors = exc.errors(include_url=False)
    error = next((e for e in errors if e["type"] in _UNKNOWN), errors[0])
    inner = tuple(p for p in (error.get("loc") or ()) if p != "[key]")
    ctx = error.get("ctx") or {}
    inner += tuple(getattr(ctx.get("error"), "at", ()))
    model = fields_model(kind) if _is_dataclass(kind) else kind
    field, holder = _field_at(model, inner)
    loc = tuple(at) + inner
    if error["type"] in _UNKNOWN and loc:
        allowed = [str(k) for k in getattr(holder, "model_fields", {})]
        problem = (f"unknown key {show(str(loc[-1]))} — remove it or fix its spelling"
                   + (f" (allowed: {', '.join(allowed)})" if allowed else ""))
        loc = loc[:-1]
    else:
        problem = describe(error, field)
    named = names(str(loc[0])) if names and loc and isinstance(loc[0], str) else None
    if named:
        rest = location(loc[1:])
        path = named + (rest if rest.startswith("[") or not rest else " " + rest)
    else:
        path = location(loc)
    where = None if where is None else str(where)
    prefix = ": ".join(p for p in (where, path) if p)
    if path and problem.startswith(_PREDICATES):
        return UserError(f"{prefix} {problem}")
    return UserError(f"{prefix}: {problem}" if prefix else problem)


def location(loc: tuple[Any, ...]) -> str:
    """``('finetune', 'overrides', 0, 'set', 'batch_size')`` as ``finetune.overrides[0].set.batch_size``; a key
    with a space, a dot, a bracket or a quote in it is quoted (``criteria.'acc (%)'``), a long one cut (:func:`show`).

    >>> location(("criteria", "acc (%)", "weight")), location(("labels", "org/m:v1")), location(("x" * 99,))[-3:]
    ("criteria.'acc (%)'.weight", 'labels.org/m:v1', 'xx…')
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = str(part)
        plain = text and len(text) <= SHOWN and not any(ch.isspace() or ch in ".[]'\"" or not ch.isprintable()
                                                         for ch in text)
        out += ("." if out else "") + (text if plain else show(text))
    return out


def show(value: Any, limit: int = SHOWN) -> str:
    """A refused value as a message shows it, bounded: numbers plain (``nan``, ``-1e-05``), anything else
    quoted, cut at ``limit`` characters.

    >>> show(float("nan")), show(3.0), show("up"), show("x" * 100)[-5:]
    ('nan', '3', "'up'", 'xxxx…')
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = str(int(value)) if value.is_integer() and abs(value) < 1e18 else f"{value:g}"
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            text = str(value)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            text = f"a whole number of {value.bit_length()} bits"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_QUOTED = re.compile(r"(?<!\w)(?:'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")(?!\w)")  # a repr, not an apostrophe
_WORD = re.compile(r"\S{" + str(2 * SHOWN) + ",}")
_MESSAGE_MAX = 500


def bounded(message: str) -> str:
    """A check's own message with every value in it bounded, as :func:`show` bounds one: a quoted value longer
    than :data:`SHOWN` characters is cut, so is any longer run without a space, and the whole at 500 characters
    (a check that quotes the value it refuses cannot print ten thousand characters of it).

    >>> bounded("unknown task '" + "x" * 1000 + "' (tasks: rte)")[-20:]
    'xxxxxx… (tasks: rte)'
    >>> bounded("the model's row name, not a label that is much longer than sixty characters: 'A '")
    "the model's row name, not a label that is much longer than sixty characters: 'A '"
    """
    def cut(match: re.Match[str]) -> str:
        text = match.group(0)
        return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"

    message = _WORD.sub(cut, _QUOTED.sub(cut, message))
    return message if len(message) <= _MESSAGE_MAX else message[: _MESSAGE_MAX - 1] + "…"


def _bound(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _choices(expected: str) -> str:
    """pydantic's ``'a', 'b' or 'c'`` as ``a, b, c``."""
    return expected.replace("' or '", "', '").replace("'", "")


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", type(None): "null"}.get(type(value), type(value).__name__)


#: what is wrong, by pydantic's error type (the value shown bounded)
_MESSAGES: dict[str, Callable[[Any, Mapping[str, Any]], str]] = {
    "finite_number": lambda v, c: f"{show(v)} is not a finite number",
    "greater_than": lambda v, c: f"{show(v)} must be above {_bound(c['gt'])}",
    "greater_than_equal": lambda v, c: (f"{show(v)} must be at least {_bound(c['ge'])}" if isinstance(c["ge"], float)
                                        else f"{show(v)} is below {c['ge']}"),
    "less_than_equal": lambda v, c: f"{show(v)} is above {_bound(c['le'])}",
    "less_than": lambda v, c: f"{show(v)} must be below {_bound(c['lt'])}",
    "int_from_float": lambda v, c: f"{show(v)} is not a whole number",
    "int_parsing": lambda v, c: f"{show(v)} is not a whole number",
    "int_type": lambda v, c: f"{show(v)} is not a whole number",
    "int_parsing_size": lambda v, c: f"{show(v)} is not a whole number in range",
    "float_parsing": lambda v, c: f"{show(v)} is not a number",
    "float_type": lambda v, c: f"{show(v)} is not a number",
    "bool_type": lambda v, c: f"{show(v)} is not true or false",
    "bool_parsing": lambda v, c: f"{show(v)} is not true or false",
    "string_type": lambda v, c: f"{show(v)} is not text",
    "literal_error": lambda v, c: f"{show(v)} is not one of {_choices(c['expected'])}",
    "enum": lambda v, c: f"{show(v)} is not one of {_choices(c['expected'])}",
    "missing": lambda v, c: "is required",
    "missing_argument": lambda v, c: "is required",
    "dict_type": lambda v, c: f"must be a mapping (key: value), not {_kind(v)}",
    "model_type": lambda v, c: f"must be a mapping (key: value), not {_kind(v)}",
    "model_attributes_type": lambda v, c: f"must be a mapping (key: value), not {_kind(v)}",
    "dataclass_type": lambda v, c: f"must be a mapping (key: value), not {_kind(v)}",
    "dataclass_exact_type": lambda v, c: f"must be a mapping (key: value), not {_kind(v)}",
    "list_type": lambda v, c: f"must be a list, not {_kind(v)}",
    "tuple_type": lambda v, c: f"must be a list, not {_kind(v)}",
    "too_short": lambda v, c: ("is required: give a non-empty list" if c.get("min_length") == 1
                               else f"needs at least {c.get('min_length')} items"),
    "too_long": lambda v, c: f"has {c.get('actual_length')} items; at most {c.get('max_length')}",
}
#: the problems that say only what the value is not: the field's description says what to write instead
_FIXED_BY_DESCRIPTION = {"missing", "missing_argument"}
_NOT_FIXED = {"finite_number", "greater_than", "greater_than_equal", "less_than_equal", "less_than",
              "literal_error", "enum", "value_error", "assertion_error"}


def describe(error: Mapping[str, Any], field: Any = None) -> str:
    """What is wrong, in the project's words, for one pydantic error (a check's own message as it is), and,
    where the message names only what the value is not, what to write instead (``field``'s description)."""
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return bounded(str(ctx["error"]))
    value = error.get("input", ...)
    has_default = field is None or not field.is_required()
    text = getattr(field, "description", None)
    if value is None and kind.endswith(("_type", "_parsing", "literal_error")):
        return "is null: give a value" + (" (a key left out keeps its default)" if has_default else "") + (
            f" — write {text}" if text else "")
    if kind in _MESSAGES:
        problem = _MESSAGES[kind](error.get("input"), ctx)
    else:  # a pydantic check the table does not word: pydantic's words, the value bounded
        message = str(error.get("msg") or "is not valid")
        problem = message[0].lower() + message[1:]
        if value is not ... and not isinstance(value, (dict, list)):
            problem += f" (got {show(value)})"
    if text and kind not in _NOT_FIXED and " — " not in problem:
        problem += f" — add it: {text}" if kind in _FIXED_BY_DESCRIPTION else f" — write {text}"
    return problem


def _field_at(model: Any, loc: tuple[Any, ...]) -> tuple[Any, Any]:
    """The pydantic ``FieldInfo`` that ``loc`` ends at (or the last one on the way; None) and the model that
    holds (or would hold) the last key (None where the path leaves the declared models)."""
    from pydantic import BaseModel

    def is_model(t: Any) -> bool:
        return isinstance(t, type) and issubclass(t, BaseModel)

    field = None
    holder = model if is_model(model) else None
    current: Any = model
    for part in loc:
        current = _unwrap(current, part)
        if is_model(current):
            holder = current
            if part not in current.model_fields:
                return field, holder
            field = current.model_fields[part]
            current = field.annotation
            continue
        origin, args = typing.get_origin(current), typing.get_args(current)
        if origin is dict and len(args) == 2:
            current = args[1]
        elif origin in (list, tuple, set, frozenset) and args:
            current = args[0]
        else:
            return field, None
    final = _unwrap(current, None)
    if is_model(final):
        holder = final
    return field, holder


def _unwrap(annotation: Any, part: Any) -> Any:
    """``Annotated[X, ...]`` → X; ``X | None`` → X; a union of models → the one that has the key ``part``."""
    import types

    from pydantic import BaseModel

    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(args) == 1:
                annotation = args[0]
                continue
            if models:
                annotation = next((m for m in models if part in m.model_fields), models[0])
                continue
        return annotation
