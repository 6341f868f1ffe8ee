"""``vnr``: one command line for the whole harness.

Each area contributes its sub-commands from its own ``cli`` module, which
exposes ``register(subparsers)``; those modules import nothing heavy at import
time, so ``vnr rank`` never loads torch. A :class:`ranking.errors.UserError`
anywhere becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from ranking.errors import EXIT_USAGE, UserError

COMMAND_MODULES = (
    "ranking.cli",  # rank, prospective
    "ranking.scenarios.cli",  # report, whatif
    "ranking.analysis.cli",  # analyze
    "harness.finetune.cli",  # finetune
    "harness.bias.cli",  # bias
    "harness.grid.cli",  # run, status, collect
    "harness.prefetch",  # prefetch
)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (exit 2) like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vnr", description="Fine-tune, score and rank language models under user preferences.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # that area is not installed / not built
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s" if args.verbose else "%(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"vnr {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"vnr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
