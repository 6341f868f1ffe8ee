"""``vnr``: one command line for the whole harness.

Each area contributes its sub-commands from its own ``cli`` module, which
exposes ``register(subparsers)``. The dispatcher imports only the module of the
command being run (:data:`COMMANDS` says which module holds which command), so
``vnr --help`` and ``vnr rank --help`` start without numpy, pandas or torch and
``vnr rank`` never loads torch. A command of the harness extra in an install
without it (no torch / transformers / codecarbon) exits 2 with one line naming
the extra to install. A :class:`ranking.floor.errors.UserError` anywhere becomes one
line on stderr and exit status 2, and so does an ``OSError`` (disk full, read-only
output, a file where a folder should be): the path and the system's words for it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence

from ranking.floor.errors import EXIT_USAGE, UserError, describe_os_error

#: command → (module whose ``register`` adds it, one-line summary for ``vnr --help``).
#: tests/test_imports.py checks that each module registers exactly the commands listed for it.
COMMANDS: dict[str, tuple[str, str]] = {
    "rank": ("ranking.cli", "rank the models of a score table with voting rules (or a scenario with --scenario)"),
    "prospective": ("ranking.cli", "which models some weighting of the criteria makes the Condorcet winner"),
    "criteria": ("ranking.cli", "write a criteria.yaml template (directions, weights, groups) for a CSV"),
    "import": ("ranking.importers.cli", "import lm-eval / Open LLM Leaderboard / HELM / MTEB / codecarbon results as a table"),
    "report": ("ranking.scenarios.cli", "HTML report of a scenario: comparison, bump chart, heatmap, weight map"),
    "whatif": ("ranking.scenarios.cli", "the nearest group weights that make a given model win"),
    "analyze": ("ranking.analysis.cli", "trustworthiness analyses: agreement, IIA, diversity, sensitivity, Kemeny"),
    "finetune": ("harness.finetune.cli", "fine-tune one model on one GLUE task with one seed"),
    "bias": ("harness.bias.cli", "score one model's social bias on CrowS-Pairs, StereoSet or WinoBias"),
    "run": ("harness.grid.cli", "run an experiment grid (local GPU or SLURM), skipping finished runs"),
    "status": ("harness.grid.cli", "done / running / failed / missing per run of an experiment grid"),
    "collect": ("harness.grid.cli", "collect a grid's runs into matrix.csv + criteria.yaml for ranking"),
    "prefetch": ("harness.prefetch", "download a grid's models and data into the caches (before going offline)"),
    "schema": ("harness.schema_cli", "print the JSON Schema of an input file (config, criteria, leaderboard, scenario)"),
}

#: quick commands whose notes wait for their output: a note and then an error would be two lines on stderr.
HOLD_NOTES = {"rank", "prospective", "criteria", "import", "report", "whatif", "analyze", "schema"}

#: commands that train or score models: they need the ``harness`` extra.
HARNESS_EXTRA = {"finetune", "bias", "run", "prefetch"}
EXTRA_MODULES = ("torch", "transformers", "codecarbon")
INSTALL_EXTRA = "pip install 'vnr-harness[harness]'"

EPILOG = """common tasks:
  vnr rank results/paper/matrix.csv                      rank a score table with every rule
  vnr rank TABLE --setting weighted --group-weights performance=0.4,efficiency=0.3,fairness=0.3
  vnr criteria init my_scores.csv                        state directions/weights in a sidecar first
  vnr import lm-eval lm_eval_out/ -o results/lm_eval     another tool's results as a table (+ criteria.yaml)
  vnr rank --scenario configs/scenarios/paper_case_study.yaml
  vnr report --scenario SCENARIO --out report/           HTML report with plots
  vnr finetune --model bert-base-uncased --task RTE --seed 1
  vnr run configs/experiments/smoke.yaml                 a whole grid; then `vnr collect`
run `vnr COMMAND --help` for a command's options."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (exit 2) like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None, *, every: bool = False) -> argparse.ArgumentParser:
    """The ``vnr`` parser: every command listed, with the full sub-parsers of ``command``'s module only
    (of every module with ``every=True``); the other commands are placeholders until they run."""
    parser = _Parser(
        prog="vnr",
        description="Fine-tune, score and rank language models under user preferences.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    if every:
        wanted = {m for m, _ in COMMANDS.values()}
    else:
        wanted = {COMMANDS[command][0]} if command in COMMANDS else set()
    registered = set()
    for module_name in dict.fromkeys(m for m, _ in COMMANDS.values()):
        if module_name in wanted:
            importlib.import_module(module_name).register(sub)
            registered |= {name for name, (m, _) in COMMANDS.items() if m == module_name}
    for name, (_, summary) in COMMANDS.items():
        if name not in registered:  # listed in `vnr --help`; its options load when it runs
            sub.add_parser(name, help=summary, add_help=False)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command named in ``argv``: the first argument that is not an option (None if there is none)."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def missing_extra(command: str) -> str | None:
    """The first module of the harness extra that ``command`` needs and cannot import, else None."""
    if command not in HARNESS_EXTRA:
        return None
    for name in EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return name
    return None


def command_label(args: argparse.Namespace) -> str:
    """The command as typed, with its sub-command where it has one: ``analyze agreement``, ``criteria init``."""
    sub = getattr(args, "analysis", None) or getattr(args, "action", None)
    return f"{args.command} {sub}" if isinstance(sub, str) else str(args.command)


class _HeldNotes:
    """stderr for a quick command: what is written without a flush (a note) waits for the command's first
    output on stdout, its first flush (progress, logging) or its end, and a command that fails on bad input
    drops it, so its error stays the one line on stderr."""

    def __init__(self, target: object):
        self.target = target
        self.pending: list[str] = []
        self.passing = False

    def write(self, text: str) -> int:
        if self.passing:
            return self.target.write(text)
        self.pending.append(text)
        return len(text)

    def flush(self) -> None:
        self.release()
        self.target.flush()

    def release(self) -> None:
        if not self.passing:
            self.passing = True
            self.target.write("".join(self.pending))
            self.pending.clear()

    def __getattr__(self, name: str) -> object:  # isatty, fileno, encoding, ...: the real stream's
        return getattr(self.target, name)


class _ReleasingOutput:
    """stdout that lets the held notes out first, so they still come before the result they are about."""

    def __init__(self, target: object, notes: _HeldNotes):
        self.target, self.notes = target, notes

    def write(self, text: str) -> int:
        if text:
            self.notes.release()
        return self.target.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.target, name)


def main(argv: Sequence[str] | None = None) -> int:
    real = sys.stdout, sys.stderr
    held = _HeldNotes(sys.stderr) if _command_of(list(sys.argv[1:] if argv is None else argv)) in HOLD_NOTES else None
    if held is not None:
        sys.stderr, sys.stdout = held, _ReleasingOutput(sys.stdout, held)
    try:
        return _main(argv)
    finally:  # what is still held (a success, a crash's context) comes out now; a bad input's was dropped
        if held is not None:
            sys.stdout, sys.stderr = real
            held.release()


def _drop_held_notes() -> None:
    """Before a bad input's one-line error: the notes held so far are not printed (:class:`_HeldNotes`)."""
    if isinstance(sys.stderr, _HeldNotes):
        sys.stderr.pending.clear()
        sys.stderr.passing = True


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    if command is not None:
        missing = missing_extra(command)
        if missing is not None:
            print(f"vnr {command}: error: this command needs the harness extra ({missing} is not installed): "
                  f"{INSTALL_EXTRA}", file=sys.stderr)
            return EXIT_USAGE
    # a command missing from COMMANDS (a module registered a new one) still works: load every module
    parser = build_parser(command, every=command is not None and command not in COMMANDS)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named after the (sub-)command that was given them, like every other error
        parser.exit(EXIT_USAGE, f"vnr {command_label(args)}: error: unrecognized arguments: {' '.join(unknown)}\n")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s" if args.verbose else "%(message)s",
    )
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below, not at interpreter exit
        return code
    except UserError as exc:
        _drop_held_notes()
        print(f"vnr {command_label(args)}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"vnr {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `vnr ... | head`: the reader has gone, nothing is wrong; no traceback at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a writer stopped by SIGPIPE
    except OSError as exc:  # disk full, read-only, a file where a folder should be: the path and the errno's words
        _drop_held_notes()
        print(f"vnr {args.command}: error: {describe_os_error(exc)}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
