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
