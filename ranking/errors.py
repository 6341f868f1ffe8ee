"""The one exception type that means "the user gave us something we cannot use".

Every entry point (CLI, config loaders, table construction) raises :class:`UserError`
with a message that names the offending file, model, column or option and says
what to fix. The CLI turns it into one line on stderr and exit status 2; any
other exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input: a message for a person, not a traceback."""


EXIT_USAGE = 2


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
