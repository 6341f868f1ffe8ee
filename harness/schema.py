"""The harness's input schemas: the field markers its declared types use, and one way to turn a refusal
into the one-line :class:`~harness.floor.errors.UserError` a person reads.

Every input kind (a grid config, a run spec's values from the CLI or the Python API, SLURM and local
settings) is a declared, typed schema, validated once by pydantic where it enters. Run specs and settings
are plain dataclasses whose annotations carry the markers below (``Annotated[float, Number(gt=0)]``); the
markers hold no pydantic import until a value is validated, so importing a spec stays light.

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
harness.floor.errors.UserError: x.yaml: lr: nan is not a finite number
>>> validate(Example, {"lr": 0}, names={"lr": "--lr"}.get)
Traceback (most recent call last):
...
harness.floor.errors.UserError: --lr: 0 must be above 0
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from harness.floor.errors import UserError

SEED_MAX = 2**32 - 1  # numpy's and torch's seed range
# The numeric precisions a run can be asked for (every run kind: harness.specs, harness.finetune.train,
# harness.bias.scoring read these).
PRECISIONS = ("auto", "fp32", "fp16", "bf16")


# ---------------------------------------------------------------------------- markers
class Number:
    """An int or float field: no booleans, numeric text read as a number (YAML 1.1 reads ``2e-5`` as text,
    the CLI gives text), finite, within bounds (``gt``/``ge`` below, ``le`` above). An int field takes
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
                raise ValueError(f"{value!r} is not text")
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
    """A field's description (what ``vnr schema config`` shows an editor)."""

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
            raise ValueError(f"{value!r} is not {what}") from None
    return value


def one_line(value: str) -> str:
    """``value`` if it has no control character, else a ``ValueError`` naming the character."""
    bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ValueError(f"{value!r} contains a control character ({bad!r}); give it on one line")
    return value


# ---------------------------------------------------------------------------- common field types
Seed = Annotated[int, Number(ge=0, le=SEED_MAX)]  # a whole number numpy and torch accept as a seed
Count = Annotated[int, Number(ge=1)]  # a whole number from 1
PositiveFloat = Annotated[float, Number(gt=0)]  # a finite number above 0
OneLine = Annotated[str, Text()]  # text on one line
Name = Annotated[str, Text(empty=False)]  # non-blank text on one line


def output_path(value: Any, where: str) -> Any:
    """A results folder argument as a ``Path`` (text or a path on one line), else a one-line :class:`UserError`."""
    import os
    from pathlib import Path

    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: {value!r} is not a folder path")
    try:
        one_line(value)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None
    return Path(value)


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
    import typing

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


def validate(kind: Any, data: Any, *, where: str | None = None,
             names: Callable[[str], str | None] | None = None) -> Any:
    """``data`` validated as ``kind`` (a declared dataclass or model), or a one-line :class:`UserError`.

    A dataclass is built from its validated fields (its ``__post_init__`` then runs its own checks, which
    raise :class:`UserError`; they are named by ``where`` too). The error names the key path under
    ``where`` (``x.yaml: finetune.overrides[0].set.batch_size: ...``); ``names(field)`` may name a top
    field otherwise (a CLI flag: ``--lr``).
    """
    from pydantic import ValidationError

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
    import typing

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


def user_error(exc: Any, *, where: str | None = None, names: Callable[[str], str | None] | None = None,
               kind: Any = None, at: tuple[str, ...] = ()) -> UserError:
    """The first error of a pydantic ``ValidationError`` as one line: ``where: key.path: what is wrong``
    (``at``: the key path of the validated value itself, e.g. ``("slurm",)``)."""
    errors = exc.errors(include_url=False)
    # an unknown key first: it is usually the misspelling of a key the other errors call missing
    error = next((e for e in errors if e["type"] in ("extra_forbidden", "unexpected_keyword_argument")), errors[0])
    loc = tuple(at) + tuple(error.get("loc") or ())
    ctx = error.get("ctx") or {}
    loc += tuple(getattr(ctx.get("error"), "at", ()))
    problem = describe(error)
    if error["type"] in ("extra_forbidden", "unexpected_keyword_argument") and loc:
        allowed = allowed_keys(kind, loc[len(at):-1]) if kind is not None else []
        problem = f"unknown key {str(loc[-1])!r}" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        loc = loc[:-1]
    named = names(str(loc[0])) if names and loc and isinstance(loc[0], str) else None
    if named:
        rest = location(loc[1:])
        path = named + (rest if rest.startswith("[") or not rest else " " + rest)
    else:
        path = location(loc)
    prefix = ": ".join(p for p in (where, path) if p)
    if path and problem.startswith(("must ", "is required", "is empty", "is null")):
        return UserError(f"{prefix} {problem}")
    return UserError(f"{prefix}: {problem}" if prefix else problem)


def allowed_keys(kind: Any, loc: tuple[Any, ...]) -> list[str]:
    """The keys a mapping at ``loc`` of ``kind`` may have (from its JSON Schema), for an unknown key's error."""
    try:
        schema = adapter(kind).json_schema()
    except Exception:  # pragma: no cover - a schema that cannot be shown still validates
        return []
    defs = schema.get("$defs", {})

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node:
            node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
        for key in ("anyOf", "oneOf"):
            for option in node.get(key, ()):
                option = resolve(option)
                if "properties" in option or "items" in option:
                    return option
        return node

    node = resolve(schema)
    for part in loc:
        if isinstance(part, int):
            node = resolve(node.get("items", {}))
        else:
            node = resolve(node.get("properties", {}).get(part, {}))
    return list(node.get("properties", {}))


def location(loc: tuple[Any, ...], *, nested: bool = False) -> str:
    """``('finetune', 'overrides', 0, 'set', 'batch_size')`` as ``finetune.overrides[0].set.batch_size``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if (out or nested) else str(part)
    return out


def show(value: Any) -> str:
    """A refused value as the message shows it: numbers plain (``nan``, ``-1e-05``), anything else quoted."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return str(int(value)) if value.is_integer() and abs(value) < 1e18 else f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return repr(value)


def _bound(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


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
    "dataclass_type": lambda v, c: f"must be a mapping (key: value), not {_kind(v)}",
    "dataclass_exact_type": lambda v, c: f"must be a mapping (key: value), not {_kind(v)}",
    "list_type": lambda v, c: f"must be a list, not {_kind(v)}",
    "tuple_type": lambda v, c: f"must be a list, not {_kind(v)}",
    "too_short": lambda v, c: "is required: give a non-empty list" if c.get("min_length") == 1 else f"needs at least {c.get('min_length')} items",
    "too_long": lambda v, c: f"has {c.get('actual_length')} items; at most {c.get('max_length')}",
    "extra_forbidden": lambda v, c: "is not a known key",
    "unexpected_keyword_argument": lambda v, c: "is not a known key",
}


def _choices(expected: str) -> str:
    """pydantic's ``'a', 'b' or 'c'`` as ``a, b, c``."""
    return expected.replace("' or '", "', '").replace("'", "")


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", type(None): "null"}.get(type(value), type(value).__name__)


def describe(error: Mapping[str, Any]) -> str:
    """What is wrong, in the project's words, for one pydantic error (a custom check's own message as is)."""
    ctx = error.get("ctx") or {}
    if error["type"] in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if error.get("input", ...) is None and error["type"].endswith(("_type", "_parsing", "literal_error")):
        return "is null: give a value (a key left out keeps its default)"
    if error["type"] in _MESSAGES:
        return _MESSAGES[error["type"]](error.get("input"), ctx)
    return str(error.get("msg", "is not valid"))
