"""The one exception type that means "the user gave us something we cannot use".

Every entry point (CLI, config loaders, table construction) raises :class:`UserError`
with a message that names the offending file, model, column or option and says
what to fix. The CLI turns it into one line on stderr and exit status 2; any
other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno

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


#: what to do about a failed file operation, by errno
_OS_ERROR_HINTS = {
    errno.ENOSPC: "free some space or choose another output folder",
    errno.EDQUOT: "free some space (disk quota) or choose another output folder",
    errno.EROFS: "the file system is read-only: choose another output folder",
    errno.EACCES: "no permission: choose a folder you can write to",
    errno.EPERM: "no permission: choose a folder you can write to",
    errno.ENOTDIR: "a part of that path is a file, not a folder: choose another path",
    errno.EISDIR: "that path is a folder: name a file",
    errno.EEXIST: "something is already there: choose another path",
}


def describe_os_error(exc: OSError) -> str:
    """One line for a failed file operation: the path, the system's words for it, and what to do.

    >>> describe_os_error(OSError(errno.ENOSPC, "No space left on device", "/out/runs/x.json"))
    '/out/runs/x.json: No space left on device (free some space or choose another output folder)'
    """
    words = exc.strerror or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    line = f"{exc.filename}: {words}" if exc.filename is not None else words
    hint = _OS_ERROR_HINTS.get(exc.errno or 0)
    return f"{line} ({hint})" if hint else line
