"""Reading YAML config files (scenarios, criteria sidecars, leaderboard specs, experiment configs).

One reader, so a missing, unreadable or malformed file always fails the same way:
a :class:`~ranking.floor.errors.UserError` that names the file and what kind of file it is.
A mapping that repeats a key is refused, naming the key and both lines (plain YAML
loaders keep the last value silently, so half of a file could be ignored unseen).

Scalars are read as YAML 1.2's core schema reads them, not as YAML 1.1 (PyYAML's default):
``1:30`` is the text ``"1:30"``, not 90 (sexagesimal); ``yes``, ``no``, ``on``, ``off`` are
text, not booleans (only ``true`` / ``false`` are); ``010`` is 10, not 8. A merge key (``<<``, YAML 1.1
only) is refused: it would merge silently, even over a key written beside it. Anchors and aliases
(``&a`` / ``*a``) are refused before anything is expanded: a config needs none, and a few
nested aliases expand to gigabytes ("billion laughs").

>>> parse_yaml("weight: 1:30\\nflag: yes\\nok: true\\nn: 010\\n", "scenario", "s.yaml")
{'weight': '1:30', 'flag': 'yes', 'ok': True, 'n': 10}
>>> parse_yaml("a: &x [1, 2]\\nb: *x\\n", "scenario", "s.yaml")
Traceback (most recent call last):
...
ranking.floor.errors.UserError: s.yaml: line 1: an anchor (&x) — config files take no anchors or aliases: write the value out

>>> import tempfile, os
>>> with tempfile.TemporaryDirectory() as d:
...     p = os.path.join(d, "s.yaml")
...     _ = open(p, "w").write("weights: {a: 1}")
...     read_yaml(p, "scenario")
{'weights': {'a': 1}}
>>> parse_yaml("a: 1\\nb: 2\\na: 3\\n", "scenario", "s.yaml")
Traceback (most recent call last):
...
ranking.floor.errors.UserError: s.yaml: line 3: key 'a' appears twice in one mapping (first on line 1) — keep one of them
>>> parse_yaml("a: 1\\n<<: {a: 2}\\n", "scenario", "s.yaml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ranking.floor.errors.UserError: s.yaml: line 2: a merge key (<<) — config files take none ...
"""

from __future__ import annotations

from typing import Any

from ranking.floor.errors import UserError

_LOADER = None
#: the largest YAML file read (a sidecar of 40,000 criteria fits in a few MB). Parsing costs about a second of CPU
#: per MB, so a larger file (a 150 MB sidecar naming a million columns) is refused before it is read.
MAX_YAML_BYTES = 8 * 2**20


def _strict_loader() -> type:
    """A ``yaml.SafeLoader`` that refuses a key repeated in one mapping (built once, on first use)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        """Safe loading, YAML 1.2 core scalars, no duplicate keys (aliases are refused before composing)."""

    StrictLoader.yaml_implicit_resolvers = _core_schema_resolvers(yaml)

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # YAML 1.1 only; it would merge over keys beside it
                raise _MergeKey(key_node.start_mark.line + 1)
            key = loader.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key (a list or mapping as a key): the base loader says so
                continue
            line = key_node.start_mark.line + 1
            if first is not None:
                raise _DuplicateKey(key, line, first)
            seen[key] = line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    def construct_int(loader: Any, node: Any) -> int:
        text = str(loader.construct_scalar(node))
        body = text.lstrip("+-")
        sign = -1 if text.startswith("-") else 1
        if body.startswith(("0o", "0x")):
            return sign * int(body[2:], 8 if body[1] == "o" else 16)
        return sign * int(body, 10)  # "010" is ten, as YAML 1.2 reads it (1.1: octal eight)

    StrictLoader.add_constructor("tag:yaml.org,2002:map", construct_mapping)
    StrictLoader.add_constructor("tag:yaml.org,2002:int", construct_int)
    _LOADER = StrictLoader
    return StrictLoader


def _core_schema_resolvers(yaml: Any) -> dict[Any, list[Any]]:
    """PyYAML's implicit resolvers with YAML 1.2 core schema booleans, integers and floats (no ``yes``/``on``,
    no sexagesimal ``1:30``, no leading-zero octal), the rest (null, timestamps) as PyYAML has them (a merge key is refused when met)."""
    import re

    core = {
        "tag:yaml.org,2002:bool": re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        "tag:yaml.org,2002:int": re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
        "tag:yaml.org,2002:float": re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    }
    out: dict[Any, list[Any]] = {}
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items():
        out[first] = [(tag, regexp) for tag, regexp in resolvers if tag not in core]
    for tag, regexp in core.items():
        for first in "-+0123456789.tTfF":
            out.setdefault(first, []).append((tag, regexp))
    return out


def _no_anchors(text: str, where: Any) -> None:
    """A one-line :class:`UserError` at the first anchor or alias of ``text`` (found by the scanner, before any
    value is built or expanded)."""
    import yaml

    try:
        for token in yaml.scan(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(token, (yaml.AnchorToken, yaml.AliasToken)):
                sign = "&" if isinstance(token, yaml.AnchorToken) else "*"
                kind = "an anchor" if sign == "&" else "an alias"
                name = str(token.value)[:40]
                raise UserError(f"{where}: line {token.start_mark.line + 1}: {kind} ({sign}{name}) — config files "
                                "take no anchors or aliases: write the value out")
    except yaml.YAMLError:
        return  # the parser says what is wrong, with its own line


class _MergeKey(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


def parse_yaml(text: str, what: str, where: Any) -> Any:
    """Parse YAML ``text`` of a ``what`` read from ``where`` (its name in errors); one-line errors."""
    import yaml

    if "&" in text or "*" in text:
        _no_anchors(text, where)
    try:
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as dup:
        raise UserError(
            f"{where}: line {dup.line}: key {dup.key!r} appears twice in one mapping (first on line {dup.first}) "
            "— keep one of them"
        ) from None
    except _MergeKey as merge:
        raise UserError(f"{where}: line {merge.line}: a merge key (<<) — config files take none (YAML 1.2 has "
                        "no merge keys; YAML 1.1 would merge silently, even over a key written beside it): write "
                        "the keys out") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {where} is not valid YAML: {' '.join(str(exc).split())}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. a date the calendar lacks, deep nesting
        raise UserError(f"{what} {where} is not valid YAML: {exc}") from None


def read_yaml(path, what: str):
    """Parse the YAML file ``path`` (a ``what``: "scenario", "criteria sidecar", ...), one-line errors.

    Every config reader goes through here, so a missing, unreadable or malformed file
    always says which file and which kind of file it is, and no file may repeat a key.
    A file above :data:`MAX_YAML_BYTES` is refused before it is read.
    """
    from pathlib import Path

    path = Path(path)
    try:
        size = path.stat().st_size if path.is_file() else 0
        if size > MAX_YAML_BYTES:
            raise UserError(f"{what} {path} is {size / 2**20:.1f} MB: a config file is at most "
                            f"{MAX_YAML_BYTES / 2**20:g} MB (a sidecar of 40,000 criteria fits in a few MB); check that "
                            "it is the file you meant")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"cannot read {what} {path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"cannot read {what} {path}: it is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_yaml(text, what, path)
