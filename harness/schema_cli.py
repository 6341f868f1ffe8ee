"""``vnr schema KIND``: the JSON Schema of an input file, for an editor to check the file as it is typed.

::

    vnr schema criteria > criteria.schema.json
    # then, as the first line of criteria.yaml:
    # yaml-language-server: $schema=./criteria.schema.json

KIND is ``config`` (an experiment grid, :func:`harness.grid.config.config_json_schema`), ``criteria`` (a
score table's sidecar), ``leaderboard`` (a leaderboard spec) or ``scenario`` (:mod:`ranking.schemas`). The
schemas are the very models the readers validate with, so the editor and ``vnr`` agree. This command lives
in ``harness`` because ``config`` is the harness's schema (``ranking`` never imports ``harness``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ranking.floor.errors import UserError

KINDS = ("config", "criteria", "leaderboard", "scenario")


def register(subparsers: Any) -> None:
    """Add the ``schema`` sub-command to the ``vnr`` parser."""
    p = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of an input file (config, criteria, leaderboard, scenario)",
        description="Print the JSON Schema of an input file kind, for editors: `vnr schema criteria > "
        "criteria.schema.json`, then `# yaml-language-server: $schema=./criteria.schema.json` as the YAML's "
        "first line.",
    )
    p.add_argument("kind", choices=KINDS, metavar="KIND", help=f"one of: {', '.join(KINDS)}")
    p.set_defaults(func=run_schema)


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind`` (one of :data:`KINDS`)."""
    if kind == "config":
        try:
            from harness.grid.config import config_json_schema
        except ImportError:
            raise UserError("the experiment-config schema is not available in this version "
                            "(harness.grid.config.config_json_schema) — use criteria, leaderboard or scenario") from None
        return config_json_schema()
    from ranking.schemas import json_schema

    return json_schema(kind)


def run_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(json.dumps(schema_of(args.kind), indent=2, ensure_ascii=False) + "\n")
    return 0
