"""Reading YAML config files (scenarios, criteria sidecars, leaderboard specs, experiment configs).

One reader, so a missing, unreadable or malformed file always fails the same way:
a :class:`~ranking.errors.UserError` that names the file and what kind of file it is.
A mapping that repeats a key is refused, naming the key and both lines (plain YAML
loaders keep the last value silently, so half of a file could be ignored unseen).

>>> import tempfile, os
>>> with tempfile.TemporaryDirectory() as d:
...     p = os.path.join(d, "s.yaml")
...     _ = open(p, "w").write("weights: {a: 1}")
...     read_yaml(p, "scenario")
{'weights': {'a': 1}}
>>> parse_yaml("a: 1\\nb: 2\\na: 3\\n", "scenario", "s.yaml")
Traceback (most recent call last):
...
ranking.errors.UserError: s.yaml: line 3: key 'a' appears twice in one mapping (first on line 1) — keep one of them
"""

from __future__ import annotations

from typing import Any

from ranking.errors import UserError

_LOADER = None


def _strict_loader() -> type:
    """A ``yaml.SafeLoader`` that refuses a key repeated in one mapping (built once, on first use)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        """Safe loading, no duplicate keys."""

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
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

    StrictLoader.add_constructor("tag:yaml.org,2002:map", construct_mapping)
    _LOADER = StrictLoader
    return StrictLoader


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


def parse_yaml(text: str, what: str, where: Any) -> Any:
    """Parse YAML ``text`` of a ``what`` read from ``where`` (its name in errors); one-line errors."""
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as dup:
        raise UserError(
            f"{where}: line {dup.line}: key {dup.key!r} appears twice in one mapping (first on line {dup.first}) "
            "— keep one of them"
        ) from None
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {where} is not valid YAML: {' '.join(str(exc).split())}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. a date the calendar lacks, deep nesting
        raise UserError(f"{what} {where} is not valid YAML: {exc}") from None


def read_yaml(path, what: str):
    """Parse the YAML file ``path`` (a ``what``: "scenario", "criteria sidecar", ...), one-line errors.

    Every config reader goes through here, so a missing, unreadable or malformed file
    always says which file and which kind of file it is, and no file may repeat a key.
    """
    from pathlib import Path

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"cannot read {what} {path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"cannot read {what} {path}: it is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_yaml(text, what, path)
