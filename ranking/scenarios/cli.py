"""``vnr rank --scenario``, ``vnr report`` and ``vnr whatif``: scenarios from the command line.

``vnr rank``'s parser belongs to :mod:`ranking.cli`; with ``--scenario`` it calls
:func:`run_rank_scenario`. This module registers ``report`` and ``whatif``.
Nothing heavy is imported at import time (matplotlib only when plotting).

Where the scores come from: ``--results DIR`` (a results dir with ``matrix.csv`` +
``criteria.yaml`` from ``vnr collect``, optional ``seeds.csv``; or a CSV), else the
scenario's ``table:`` (``importer: votenrank_case_study`` reads the data root:
``--data-root``, else ``$VNR_DATA_ROOT``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from ranking.cli_types import add_choice_flags, choices_from_args, int_in_range, rule_help
from ranking.floor.errors import UserError
from ranking.plan import MAX_DRAWS

log = logging.getLogger(__name__)

#: Largest weight-simplex resolution (as a scenario's report.simplex_resolution): 400 gives 80 601 grid points.
MAX_RESOLUTION = 400


# ---------------------------------------------------------------------- shared steps
def load_inputs(args: argparse.Namespace) -> tuple[Any, Any, Path | None, str]:
    """(scenario, scenario table, seeds path or None, source description) from the CLI options."""
    from ranking.floor.paths import resolve_data_root
    from ranking.loading import cost_columns
    from ranking.scenarios.scenario import load_scenario
    from ranking.table import find_sidecar

    scenario = load_scenario(args.scenario)
    results = getattr(args, "results", None) or getattr(args, "table", None)
    raw, seeds = scenario.load_table(results, resolve_data_root(getattr(args, "data_root", None)))
    table = scenario.build_table(raw)
    csv = Path(raw.source or "")
    if csv.suffix.lower() == ".csv" and csv.is_file() and find_sidecar(csv) is None:
        # directions are stated by a sidecar or by the scenario, never guessed for a cost-like column
        unstated = [c for c in cost_columns(table.names) if not scenario.states_direction(table, c)]
        if unstated:
            raise UserError(
                f"{csv} has no criteria sidecar and the scenario states no direction for {', '.join(unstated)}, "
                f"which look like costs: add `directions: {{{unstated[0]}: lower}}` (or a group's `direction:`) "
                f"to {scenario.where}, or write a criteria.yaml (`vnr criteria init {csv}`)"
            )
    source = str(results) if results else (raw.source or "")
    return scenario, table, seeds, source


def build_comparison(args: argparse.Namespace) -> tuple[Any, Any, Path | None, str]:
    """The scenario's comparison, with bootstrap rank probabilities when ``--bootstrap N`` > 0: drawn from the
    table's standard errors where it has them (an imported source's ``stderr.csv``), else from its seeds."""
    from ranking.scenarios.compare import compare

    scenario, table, seeds, source = load_inputs(args)
    cmp = compare(scenario, table)
    n = int(getattr(args, "bootstrap", 0) or 0)  # bounded by its flag's type
    if n > 0:
        from ranking.scenarios.bootstrap import bootstrap, error_bootstrap, read_seeds, unknown_errors_note

        seed = args.seed  # checked once, with the other ranking choices (choices_from_args)
        if table.standard_errors is not None:  # the source's own noise (e.g. lm-eval's stderr) wins over seeds
            note = unknown_errors_note(table)
            if note:  # held fixed: said, not silent
                cmp.notes.append(note)
            say(f"bootstrapping {n} draws from the scores' standard errors …")
            cmp.rank_probabilities = error_bootstrap(scenario, table, n, seed=seed)
            cmp.bootstrap_source = "standard_errors"
            if seeds is not None:
                cmp.notes.append(f"The bootstrap drew from the scores' standard errors; {seeds.name} was not used.")
        else:
            if seeds is None:
                where = f" (no seeds.csv beside {source})" if source else ""
                raise UserError(
                    f"--bootstrap {n}: no per-seed results exist for this table{where} and it has no standard errors; "
                    "collect runs with several seeds (vnr collect writes seeds.csv), import a source with standard "
                    "errors (vnr import lm-eval), or drop --bootstrap"
                )
            seed_values = read_seeds(seeds, table)
            say(f"bootstrapping {n} resamples over seeds …")
            cmp.rank_probabilities = bootstrap(scenario, table, seed_values, n, seed=seed)
        cmp.bootstrap_n = n
    if getattr(args, "intervals", False):
        from ranking.intervals import draw_source
        from ranking.plan import DEFAULT_DRAWS
        from ranking.scenarios.uncertainty import add_intervals

        draws = DEFAULT_DRAWS if args.draws is None else args.draws
        draw_source(cmp.table, seeds)  # a table without uncertainty is refused before any work
        say("drawing rank intervals …")
        add_intervals(cmp, seeds, level=args.level, draws=draws, seed=args.seed)
    if getattr(args, "robustness", False):
        from ranking.scenarios.uncertainty import add_robustness

        say("searching the fewest changed scores that flip each column's pick …")
        add_robustness(cmp, max_cells=args.max_cells)
    return cmp, scenario, seeds, source


def say(text: str) -> None:
    """A one-line progress message on stderr (stdout keeps the result), before work that takes seconds."""
    print(text, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- rank
def run_rank_scenario(args: argparse.Namespace) -> int:
    """``vnr rank --scenario S [--results DIR] [--format table|json|csv] [--bootstrap N]``."""
    from ranking.scenarios.compare import format_csv, format_json, format_table

    cmp, *_ = build_comparison(args)
    fmt = getattr(args, "format", None) or "table"
    text = {"table": format_table, "json": format_json, "csv": format_csv}.get(fmt)
    if text is None:
        raise UserError(f"--format {fmt!r} is not one of table, json, csv")
    out = format_table(cmp, wide=bool(getattr(args, "wide", False))) if fmt == "table" else text(cmp)
    if fmt == "table" and (cmp.intervals or cmp.robustness):
        from ranking.scenarios.uncertainty import format_text

        out += "\n\n" + format_text(cmp, wide=bool(getattr(args, "wide", False)))
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


# ---------------------------------------------------------------------- report
def run_report(args: argparse.Namespace) -> int:
    from ranking.floor.paths import check_output_dir
    from ranking.scenarios.report import write_report
    from ranking.scenarios.simplex import simplex_map

    check_output_dir(args.out, "--out")  # before the work: a file named as --out is refused in one line
    choices_from_args(args)  # the ranking choices, checked once (their declaration: ranking.plan.RankPlan)
    cmp, scenario, _, source = build_comparison(args)
    resolution = args.resolution or scenario.simplex_resolution
    maps = []
    notes = []
    groups = cmp.table.group_names
    chosen = scenario.default_simplex_columns()
    if len(groups) == 3 and chosen:
        say(f"vnr report: weight-simplex maps of {len(chosen)} column(s) at resolution {resolution} …")
        for name in chosen:
            maps.append(simplex_map(cmp.table, scenario.column(name), scenario.ties, resolution))
    elif chosen:
        notes.append(f"No weight-simplex map: it needs exactly three groups (this table has {len(groups)}).")
    else:
        notes.append("No weight-simplex map: the scenario has no weighted or two-step column.")
    say(f"vnr report: rendering the report and its figures into {args.out} …")
    path = write_report(cmp, args.out, maps, source=source, notes=notes, data_root=_data_root_shown(args), say=say)
    print(f"wrote {path} (and its figures in {path.parent})")
    return 0


def _data_root_shown(args: argparse.Namespace) -> str | None:
    """The data root whose paths the report shows as ``<data root>/…`` (none configured: None)."""
    import os

    return getattr(args, "data_root", None) or os.environ.get("VNR_DATA_ROOT") or None


# ---------------------------------------------------------------------- whatif
def whatif_columns(scenario: Any, rule: str | None, setting: str | None) -> list[Any]:
    """The columns to ask about: an ad-hoc (rule, setting), or every weighted / two-step column."""
    from ranking.plan import check_choices

    if setting is not None:
        check_choices({"setting": setting}, names=lambda _: "--setting")  # its declaration's values
    if setting == "basic":
        raise UserError("--setting basic has no group weights to change: use weighted or two-step")
    if rule is None and setting is None:
        cols = [c for c in scenario.columns if c.uses_group_weights]
        if cols:
            return cols
        rule, setting = "borda", "weighted"
    if rule is not None:
        from ranking.rules import get_rule

        get_rule(rule)
    existing = [c for c in scenario.columns if c.uses_group_weights]
    if rule is None:
        rule = next((c.rule for c in existing if c.setting == setting), existing[0].rule if existing else "borda")
    if setting is None:
        setting = next((c.setting for c in existing if c.rule == rule), "weighted")
    for c in existing:
        if c.rule == rule and c.setting == setting:
            return [c]
    weights = scenario.scenario_group_weights(rule, setting)
    return [scenario.ad_hoc_column(rule, setting, weights)]  # under the scenario's preset, as its own columns


def run_whatif(args: argparse.Namespace) -> int:
    import json

    from ranking.scenarios.whatif import what_if

    scenario, table, _, _ = load_inputs(args)
    table.model_index(args.model)  # a clear error for an unknown model
    answers = []
    for col in whatif_columns(scenario, args.rule, args.setting):
        answers.append(what_if(table, col, scenario.ties, args.model, col.group_weights, resolution=args.resolution))
    if args.format == "json":
        print(json.dumps([a.to_dict() for a in answers], indent=2))
    else:
        print("\n\n".join(a.describe() for a in answers))
    return 0


# ---------------------------------------------------------------------- parsers
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", required=True, metavar="FILE", help="scenario YAML (configs/scenarios/*.yaml)")
    p.add_argument("--results", metavar="DIR", help="results dir with matrix.csv + criteria.yaml (or a CSV); "
                   "default: the scenario's own table source")
    p.add_argument("--data-root", metavar="DIR", help="data root for importer sources (default: $VNR_DATA_ROOT)")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report",
        help="HTML report of a scenario: comparison table, bump chart, criteria heatmap, weight-simplex map",
        description="Write a self-contained HTML report (no network) and its figures into --out.",
    )
    _common(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--bootstrap", type=int_in_range(0, MAX_DRAWS), default=0, metavar="N",
                   help=f"replicates for rank probabilities, 0 to {MAX_DRAWS}: draws from the scores' standard errors "
                   "where the table has them (stderr.csv), else seed resamples (needs seeds.csv)")
    add_choice_flags(p, "report")  # --intervals, --level, --draws, --seed, --robustness, --max-cells (ranking.plan)
    p.add_argument("--resolution", type=int_in_range(1, MAX_RESOLUTION), default=None, metavar="R",
                   help=f"grid steps per side of the weight simplex, 1 to {MAX_RESOLUTION} "
                   "(default: the scenario's, else 30)")
    p.set_defaults(func=run_report)

    w = subparsers.add_parser(
        "whatif",
        help="nearest group weights (L1) under which a model wins",
        description="Find the group weights nearest to the scenario's under which --model wins "
        "(exact LP for rules linear in the weights, else a simplex grid); for condorcet also the prospective LP.",
    )
    _common(w)
    w.add_argument("--model", required=True, help="the model that should win")
    w.add_argument("--rule", help=rule_help("rule (default: each weighted / two-step column of the scenario)"))
    w.add_argument("--setting", help="weighted or two-step")
    w.add_argument("--resolution", type=int_in_range(1, MAX_RESOLUTION), default=60, metavar="R",
                   help=f"grid steps per side for rules not linear in the weights, 1 to {MAX_RESOLUTION} (default 60)")
    w.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    w.set_defaults(func=run_whatif)
