"""The one exception type that means "the user gave us something we cannot use".

Every entry point (CLI, config loaders, table construction) raises :class:`UserError`
with a message that names the offending file, model, column or option and says
what to fix. The CLI turns it into one line on stderr and exit status 2; any
other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

#: Every character ``str.splitlines`` breaks a line at, and how a message shows it instead.
_LINE_BREAKS = str.maketrans({ch: repr(ch)[1:-1] for ch in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


class UserError(ValueError):
    r"""Bad input: a message for a person, not a traceback — ONE line, whatever names it quotes.

    >>> print(UserError("unknown group 'a\x0cb' (groups: c\nd)"))
    unknown group 'a\x0cb' (groups: c\nd)
    """

    def __str__(self) -> str:
        return super().__str__().translate(_LINE_BREAKS)


EXIT_USAGE = 2
