"""``vnr`` run in-process for the tests: the command line as a user types it, its exit code and what it printed."""

from __future__ import annotations

from harness.cli import main


def vnr(capsys, *argv: object) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``vnr ARGV`` (each argument given as text; argparse's usage errors, which
    exit, give their code like every other refusal)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
