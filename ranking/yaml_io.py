"""Reading YAML config files (scenarios, criteria sidecars, leaderboard specs, experiment configs).

One reader, so a missing, unreadable or malformed file always fails the same way:
a :class:`~ranking.errors.UserError` that names the file and what kind of file it is.

>>> import tempfile, os
>>> with tempfile.TemporaryDirectory() as d:
...     p = os.path.join(d, "s.yaml")
...     _ = open(p, "w").write("weights: {a: 1}")
...     read_yaml(p, "scenario")
{'weights': {'a': 1}}
"""

from __future__ import annotations

from ranking.errors import UserError


def read_yaml(path, what: str):
    """Parse the YAML file ``path`` (a ``what``: "scenario", "criteria sidecar", ...), one-line errors.

    Every config reader goes through here, so a missing, unreadable or malformed file
    always says which file and which kind of file it is.
    """
    from pathlib import Path

    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"cannot read {what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {path} is not valid YAML: {' '.join(str(exc).split())}") from None
