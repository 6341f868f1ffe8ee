"""``vnr import FORMAT PATH... -o DIR``: another tool's results as ``DIR/matrix.csv`` + ``DIR/criteria.yaml``.

Also ``DIR/stderr.csv`` when the source has per-score standard errors (named in the sidecar
by ``standard_errors:`` and bound by its hash) and ``DIR/import-notes.txt``, every note of the
import (the terminal shows a summary grouped by kind, the notes that change a ranking first).
The files are replaced as one unit (:func:`ranking.floor.together.write_together`: staged, journalled,
moved): a failure while swapping puts the previous files back, and a kill at any point leaves the
previous import or the new one whole once the folder is next read, so a table's files always belong
to one import.
Nothing heavy is imported at import time.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ranking.cli_types import column_list
from ranking.floor.errors import UserError
from ranking.importers import FORMATS, ON_DUPLICATE


def register(subparsers: Any) -> None:
    """Add the ``import`` sub-command to the ``vnr`` parser."""
    p = subparsers.add_parser(
        "import",
        help="import another tool's results (lm-eval, Open LLM Leaderboard, HELM, MTEB, codecarbon) as a score table",
        description="Write DIR/matrix.csv + DIR/criteria.yaml (+ DIR/stderr.csv: the source's standard errors) "
        "from another tool's results, every criterion's direction, group and unit stated. Formats: "
        + "; ".join(f"{name}: {what}" for name, (_, what) in FORMATS.items()),
    )
    p.add_argument("format", choices=list(FORMATS), metavar="FORMAT", help="one of: " + ", ".join(FORMATS))
    p.add_argument("paths", nargs="+", metavar="PATH", help="the files or folders to read")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--higher", type=column_list, action="extend", default=[], metavar="NAME,...",
                   help="metrics or columns that are higher-is-better (for a metric the source states no direction for)")
    p.add_argument("--lower", type=column_list, action="extend", default=[], metavar="NAME,...",
                   help="metrics or columns that are lower-is-better")
    p.add_argument("--on-duplicate", choices=ON_DUPLICATE, default="newest",
                   help="several results of one model and task: keep the newest (default, with a note) or refuse")
    p.add_argument("--codecarbon", metavar="EMISSIONS_CSV", help="join codecarbon emissions as efficiency criteria")
    p.add_argument("--map", dest="model_map", action="append", default=[], metavar="PROJECT=MODEL|FILE.yaml",
                   help="codecarbon project name → model name (repeatable), or a YAML file of such pairs")
    p.add_argument("--by", dest="codecarbon_key", choices=("project_name", "experiment_id", "run_id", "file"),
                   default="project_name", help="what names a codecarbon model: a column (default: project_name), "
                   "or file (one model per emissions.csv)")
    p.add_argument("--out-of-range", choices=("error", "missing"), default="error",
                   help="a score outside its criterion's range (a proportion above 1, a negative energy): refuse "
                   "the import (default) or import it as missing, with a note")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip a tracker's own corrupt rows (codecarbon), counted in a note, instead of refusing the file")
    p.add_argument("--force", action="store_true", help="replace an existing DIR/matrix.csv (and the files imported "
                   "with it, all together)")
    p.set_defaults(func=run_import)


def parse_model_map(items: list[str]) -> dict[str, str] | str | None:
    """``--map`` values: PROJECT=MODEL pairs, or one YAML file.

    >>> parse_model_map(["run-a=org/model-a", "run-b=org/model-b"])
    {'run-a': 'org/model-a', 'run-b': 'org/model-b'}
    >>> parse_model_map(["names.yaml"])
    'names.yaml'
    """
    if not items:
        return None
    if len(items) == 1 and "=" not in items[0]:
        return items[0]
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserError(f"--map: {item!r} is not PROJECT=MODEL (or give one YAML file)")
        out[key.strip()] = value.strip()
    return out


def run_import(args: argparse.Namespace) -> int:
    """Import, then write the table, its sidecar and its standard errors into ``--out`` together."""
    from pathlib import Path

    from ranking.floor.together import recover, write_together
    from ranking.importers import import_table
    from ranking.table import STANDARD_ERRORS_FILE

    out = Path(args.out)
    model_map = parse_model_map(args.model_map)
    if model_map is not None and args.format != "codecarbon" and not args.codecarbon:
        raise UserError("--map renames codecarbon projects: give --codecarbon EMISSIONS_CSV (or import codecarbon)")
    recover(out)  # an import a kill interrupted is finished first
    if (out / "matrix.csv").exists() and not args.force:
        raise UserError(f"{out / 'matrix.csv'} exists: choose another --out, or pass --force to replace it")

    from ranking.importers.common import summarise

    notes: list[Any] = []
    table = import_table(args.format, args.paths, higher=args.higher, lower=args.lower,
                         on_duplicate=args.on_duplicate, codecarbon=args.codecarbon, codecarbon_map=model_map,
                         codecarbon_key=args.codecarbon_key, out_of_range=args.out_of_range,
                         skip_bad_rows=args.skip_bad_rows, notes=notes)
    out.mkdir(parents=True, exist_ok=True)

    def fill(staging: Path) -> None:
        table.to_csv(staging / "matrix.csv", staging / "criteria.yaml")
        if notes:
            (staging / NOTES_FILE).write_text("".join(f"[{n.kind}{', changes the ranking' if n.ranks else ''}] "
                                                      f"{n.message}\n" for n in notes), encoding="utf-8")

    # one unit, all or nothing even under kill -9 (a stale stderr.csv or notes file the new import lacks goes)
    write_together(out, fill, (STANDARD_ERRORS_FILE, NOTES_FILE, "matrix.csv", "criteria.yaml"),
                   written_by="vnr import --force")
    if notes:
        for line in summarise(notes):
            print(f"vnr import: note: {line}", file=sys.stderr)
        print(f"vnr import: every note ({len(notes)}) is in {out / NOTES_FILE}", file=sys.stderr)
    errors = " and stderr.csv (standard errors)" if table.standard_errors is not None else ""
    print(f"wrote {out / 'matrix.csv'} ({table.n_models} models × {table.n_criteria} criteria), criteria.yaml{errors}; "
          f"rank it with `vnr rank {out}`")
    return 0


NOTES_FILE = "import-notes.txt"

