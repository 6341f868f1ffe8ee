"""``vnr rank``, ``vnr prospective`` and ``vnr criteria init``: voting rules, prospective systems and sidecars from the command line.

::

    vnr rank TABLE [--data-root DIR] [--lower COL,...] [--higher COL,...]
                   [--rule NAME ... | --rule all] [--setting basic|weighted|two-step]
                   [--group-weights g=w,...] [--preset default|votenrank] [--og-gamma G]
                   [--ties default|votenrank] [--drop-incomplete | --keep-incomplete] [--format table|json|csv]
                   [--intervals [--level P] [--draws N] [--seed N]] [--robustness [--max-cells K]]
    vnr rank --scenario FILE [--results DIR] [--bootstrap N] [--seed N] [--intervals] [--robustness] ...
                                                                              (scenario mode)
    vnr prospective TABLE [--data-root DIR] [--lower/--higher COL,...] [--strict] [--preset default|votenrank]
                          [--drop-incomplete | --keep-incomplete] [--format table|json]
    vnr criteria init TABLE [--lower/--higher COL,...] [--force]

TABLE is anything :func:`ranking.load_table` reads (a CSV with its criteria
sidecar, a leaderboard spec YAML, a benchbench path, ...). ``--format json``
prints one object: ``{"settings": {...}, rule: {"scores": {model:
number|null}, "ranks": {model: int|null}, "winners": [...]}}`` for ``rank``
(``settings``: the setting, preset, ties, directions and weights actually used, see
:func:`ranking.api.used_settings`; the table format states them above the
table) and ``{model: {"prospective": bool, "weights": {criterion: number}|null}}``
for ``prospective`` (the models examined: with ``--drop-incomplete``, the
``votenrank`` preset's default, models missing a score are left out, and a
note on stderr names them). With ``--rule all`` (the default), a rule that cannot
apply to the table (e.g. ``geometric_mean`` with a non-positive score) is
left out with a note on stderr; a rule named explicitly fails instead.

``--intervals`` (:mod:`ranking.intervals`) adds per rule the columns ``<rule>_rank_lo``, ``<rule>_rank_hi``,
``<rule>_tier`` (CSV; JSON: ``rank_lo``, ``rank_hi``, ``tier`` per rule, ``settings.intervals`` says the level,
draws, seed and source); ``--robustness`` (:mod:`ranking.robustness`) adds ``<rule>_cells_to_win`` (with
``_kind``: exact / at most / more than K, and ``<rule>_cells``) and prints the flip sentence per rule.

Nothing heavy is imported at import time.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from typing import Any

from ranking.cli_table import TABLE_HELP, add_table_options, table_from_args
from ranking.cli_types import (
    add_choice_flags,
    choices_from_args,
    column_list,
    int_in_range,
    rule_help,
)
from ranking.floor.errors import UserError
from ranking.floor.flags import names
from ranking.plan import MAX_DRAWS


def register(subparsers: Any) -> None:
    """Add the ``rank`` and ``prospective`` sub-commands to the ``vnr`` parser."""
    p = subparsers.add_parser(
        "rank",
        help="rank the models of a score table with voting rules (or a scenario with --scenario)",
        description="Rank the models of a score table (CSV + sidecar, or leaderboard spec) with voting rules. "
        "Pairwise rules work in blocks of rows above 2500 models (memory O(n·m), no n×n matrix); "
        "every rule of --rule all ranks 20 000 models × 5 criteria.",
    )
    p.add_argument("table", nargs="?", metavar="TABLE", help=TABLE_HELP)
    add_table_options(p)
    p.add_argument(
        "--rule", action="extend", nargs="+", metavar="NAME",
        help=rule_help("rule name(s), repeatable, or 'all' (default: all)"),
    )
    add_choice_flags(p, "rank")  # --setting ... --max-cells: generated from the declaration (ranking.plan.RankPlan)
    p.add_argument("--format", default="table", choices=("table", "json", "csv"), help="output format")
    p.add_argument("--wide", action="store_true", help="print tables in full: no wrapping to 120 columns, no shortened names")
    p.add_argument("--scenario", metavar="FILE", help="rank a user-preference scenario (YAML) instead")
    p.add_argument("--results", metavar="DIR", help="scenario mode: results directory or CSV to rank")
    p.add_argument("--bootstrap", type=int_in_range(0, MAX_DRAWS), default=0, metavar="N",
                   help=f"scenario mode: bootstrap replicates, 0 to {MAX_DRAWS} (from the standard errors where the "
                   "table has them, else from the seeds)")
    p.set_defaults(func=run_rank)

    q = subparsers.add_parser(
        "prospective",
        help="which models some weighting of the criteria makes the Condorcet winner",
        description="For each model: can some non-negative weights summing to 1 make it a Condorcet winner? "
        "One linear programme per model: at most 5000 models (about a minute with 5 criteria).",
    )
    q.add_argument("table", metavar="TABLE", help=TABLE_HELP)
    add_table_options(q)
    q.add_argument("--strict", action="store_true", help="require beating every rival (default: >= 0, Eq. 2)")
    add_choice_flags(q, "prospective")  # --preset, --drop-incomplete/--keep-incomplete, --vote (ranking.plan)
    q.add_argument("--format", default="table", choices=("table", "json"), help="output format")
    q.add_argument("--wide", action="store_true", help="print tables in full: no wrapping to 120 columns, no shortened names")
    q.set_defaults(func=run_prospective)

    c = subparsers.add_parser(
        "criteria",
        help="write a criteria.yaml template (directions, weights, groups) for a CSV",
        description="Criteria sidecars: `vnr criteria init TABLE` writes criteria.yaml beside a CSV, one line per "
        "column (cost-like names get direction lower); check every line before ranking.",
    )
    csub = c.add_subparsers(dest="action", metavar="ACTION", parser_class=type(c))
    csub.required = True
    ci = csub.add_parser("init", help="write criteria.yaml beside TABLE (a CSV)", description="Write a criteria.yaml "
                         "template beside the CSV TABLE (or print it with --print).")
    ci.add_argument("table", metavar="TABLE", help="the CSV score table")
    ci.add_argument("--lower", type=column_list, action="extend", default=[], metavar="COL,...",
                    help="these columns are lower-is-better (cost-like names are already)")
    ci.add_argument("--higher", type=column_list, action="extend", default=[], metavar="COL,...",
                    help="these columns are higher-is-better (overrides the cost-like guess)")
    ci.add_argument("--force", action="store_true", help="overwrite an existing sidecar")
    ci.add_argument("--print", dest="stdout", action="store_true", help="print the template instead of writing it")
    ci.set_defaults(func=run_criteria_init)


# ---------------------------------------------------------------------- rank
def run_rank(args: argparse.Namespace) -> int:
    from ranking.floor.flags import flag, unused
    from ranking.plan import RankPlan, on

    if getattr(args, "scenario", None):
        from ranking.scenarios.cli import run_rank_scenario

        for key in on("scenario"):  # the scenario file states these (its keys of the same declaration)
            if getattr(args, key, None) is not None:
                raise UserError(f"{flag(RankPlan, key)} does not apply with --scenario: set '{key}:' in the "
                                "scenario file")
        choices_from_args(args)
        return run_rank_scenario(args)
    if not args.table:
        raise UserError("give a score table (TABLE) or a scenario (--scenario FILE)")
    for option, given in (("--results", args.results), ("--bootstrap", args.bootstrap)):
        if given not in (None, 0):
            raise UserError(f"{option} only applies with --scenario")
    needless = unused(args, RankPlan, only=on("rank"))
    if needless:
        raise UserError(needless)
    if args.seed is not None and not args.intervals:
        raise UserError("--seed only applies with --intervals or --scenario")
    from ranking.api import apply_plan

    rules = args.rule if args.rule else "all"
    plan = RankPlan.from_choices(rules, choices_from_args(args), names=names(RankPlan))  # once, before the table
    table = table_from_args(args)
    if plan.intervals:
        from ranking.intervals import draw_source

        draw_source(table)  # a table without uncertainty is refused before any work
    if args.intervals or args.robustness:
        print("vnr rank: " + " and ".join(w for w, on in (("drawing rank intervals", args.intervals),
              ("searching the fewest changes that flip each rank", args.robustness)) if on) + " …",
              file=sys.stderr, flush=True)
    result = apply_plan(plan, table)
    for name, why in result.skipped.items():
        print(f"vnr rank: note: skipped {name}: {why}", file=sys.stderr)
    for name, why in (result.settings.get("intervals") or {}).get("without", {}).items():
        print(f"vnr rank: note: no intervals for {name}: {why}", file=sys.stderr)
    if result.settings.get("dropped_incomplete"):
        left = result.settings["dropped_incomplete"]
        print(f"vnr rank: note: left out {len(left)} model(s) missing a score ({', '.join(left)}); "
              "--keep-incomplete ranks them", file=sys.stderr)
    if args.format == "json":
        text = json.dumps(result.to_dict(), indent=2, allow_nan=False)
    elif args.format == "csv":
        text = format_rank_csv(result.results, result.intervals, result.robustness)
    else:
        text = format_settings(result.settings) + "\n\n" + format_rank_table(
            result.results, wide=args.wide, intervals=result.intervals, robustness=result.robustness,
            scores_present=result.scores_present)
        text += format_uncertainty(result.settings, result.robustness)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def format_settings(settings: dict[str, Any], width: int = 120) -> str:
    """The preferences a ranking used, in a few lines (setting, preset, ties, group weights, directions, weights).

    The preset is named when it is not ``default``; the optimality gap's gamma when that rule was ranked.

    >>> print(format_settings({"setting": "weighted", "ties": "default", "group_weights": {"perf": 0.5, "eff": 0.5},
    ...     "directions": {"acc": "higher", "kwh": "lower"}, "criterion_weights": {"acc": 1.0, "kwh": 1.0}}))
    setting: weighted · ties: default · group weights: perf=0.5, eff=0.5
    lower is better: kwh · higher is better: every other criterion
    criterion weights: 1 for every criterion
    """

    def listing(items: list[str], room: int) -> str:
        out: list[str] = []
        for k, item in enumerate(items):
            rest = len(items) - k
            if len(", ".join([*out, item])) + len(f", … (+{rest} more)") > room and rest > 1:
                return ", ".join(out) + f", … (+{rest} more)"
            out.append(item)
        return ", ".join(out)

    head = f"setting: {settings['setting']}"
    if settings.get("preset", "default") != "default":
        head += f" · preset: {settings['preset']}"
    head += f" · ties: {settings['ties']}"
    if settings.get("og_gamma") is not None:
        head += f" · optimality gap gamma: {settings['og_gamma']:g}"
    if settings.get("group_weights"):
        head += " · group weights: " + listing([f"{g}={w:g}" for g, w in settings["group_weights"].items()], width - len(head) - 17)
    lines = [head]
    if settings.get("votes"):  # (present where the vote changed a weight: ranking.api.rank)
        from ranking.votes import describe

        lines.append(describe(settings["votes"]))
    directions = settings["directions"]
    targets = settings.get("targets") or {}
    lower = [c for c, d in directions.items() if d == "lower"]
    higher = [c for c, d in directions.items() if d == "higher"]
    if not lower and not targets:
        lines.append("higher is better: every criterion")
    else:
        parts = ["lower is better: " + listing(lower, width - 60)] if lower else []
        if targets:
            parts.append("closest to a target is better: " + listing([f"{c} (target {t:g})" for c, t in targets.items()],
                                                                     width - 60))
        parts.append("higher is better: " + ("every other criterion" if higher else "none"))
        lines.append(" · ".join(parts))
    weights = settings["criterion_weights"]
    if all(w == 1 for w in weights.values()):
        lines.append("criterion weights: 1 for every criterion")
    else:
        others = [f"{c}={w:g}" for c, w in weights.items() if w != 1]
        lines.append("criterion weights: 1 except " + listing(others, width - 30))
    if settings.get("dropped_incomplete"):
        lines.append("left out, missing a score: " + listing(settings["dropped_incomplete"], width - 30))
    return "\n".join(lines)


def format_rank_table(results: dict[str, Any], *, used: str = "", wide: bool = False,
                      intervals: dict[str, Any] | None = None, robustness: dict[str, Any] | None = None,
                      scores_present: dict[str, int] | None = None) -> str:
    """Models × (score, rank) per rule, sorted by the first rule's rank (ties: the next rules' ranks).

    ``used`` (the setting, ties and weights actually used) is echoed in the title line. With ``intervals``
    (rule → :class:`ranking.intervals.RankIntervals`) each rule also shows its rank interval ``lo–hi`` and
    tier; with ``robustness`` (rule → :class:`ranking.robustness.CellsToWin`) the cells to win. A model
    with scores on fewer than half of the criteria (``scores_present``) is flagged with how many it has.
    """
    from ranking.textable import DEFAULT_WIDTH, TextTable, render

    names = list(results)
    first = results[names[0]]

    def key(m: str) -> tuple[float, ...]:
        return tuple(math.inf if math.isnan(r.rank_of(m)) else r.rank_of(m) for r in results.values())

    def extra(name: str) -> list[str]:
        out = []
        if intervals is not None and name in intervals:
            out += ["interval", "tier"]
        if robustness is not None and name in robustness:
            out += ["to win"]
        return out

    def cells(name: str, r: Any, m: str) -> list[Any]:
        i = r._index(m)
        out: list[Any] = [r.score_of(m), r.rank_of(m)]
        if intervals is not None and name in intervals:
            iv = intervals[name]
            lo, hi = iv.rank_lo[i], iv.rank_hi[i]
            out += ["–" if math.isnan(lo) else (f"{int(lo)}" if lo == hi else f"{int(lo)}–{int(hi)}"),
                    "–" if math.isnan(iv.tier[i]) else f"T{int(iv.tier[i])}"]
        if robustness is not None and name in robustness:
            rb = robustness[name]
            k = rb.count[i]
            out += [rb.kind[i] if k is None else ("≤" if rb.kind[i] == "at most" else "") + str(k)]
        return out

    from ranking.intervals import few_scores

    models = sorted(first.models, key=key)  # a stable sort: table order among full ties
    few = few_scores(scores_present or {})
    shown = {m: (f"{m} ({few[m]})" if m in few else m) for m in models}
    rows = [[shown[m], *[v for name, r in results.items() for v in cells(name, r, m)]] for m in models]
    then = f", ties broken by {names[1]}" + (" and the next rules" if len(names) > 2 else "") if len(names) > 1 else ""
    legend = "score: higher is better under the rule; rank: 1 = best, tied models share the best rank; –: not ranked"
    if intervals:
        legend += ("; interval: the ranks the data allow (for all models at once); tier: models the data cannot "
                   "separate share one (T1 = top)")
    if robustness:
        legend += "; to win: fewest scores that must change for the model to rank first (≤: at most)"
    if few:
        legend += "; (k/m): the model has scores on only k of the m criteria"
    table = TextTable(
        ["model", *[h for n in names for h in ["score", "rank", *extra(n)]]],
        rows,
        title=f"sorted by {names[0]} rank{then}" + (f"; {used}" if used else ""),
        legend=legend,
        spans=["", *[n for n in names for _ in range(2 + len(extra(n)))]],
    )
    winners = "; ".join(f"{name}: {', '.join(r.winners) or '(none)'}" for name, r in results.items())
    winners = f"winners — {winners}"
    if not wide:
        import textwrap

        winners = textwrap.fill(winners, DEFAULT_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    return render(table, wide=wide) + f"\n\n{winners}"


def format_rank_csv(results: dict[str, Any], intervals: dict[str, Any] | None = None,
                    robustness: dict[str, Any] | None = None) -> str:
    """One row per model (in table order): ``model, <rule>_score, <rule>_rank, ...``.

    With ``intervals`` each rule adds ``<rule>_rank_lo``, ``<rule>_rank_hi``, ``<rule>_tier``; with
    ``robustness`` ``<rule>_cells_to_win`` (empty: more than the cells searched), ``<rule>_cells_to_win_kind``
    (exact, at most, more than K) and ``<rule>_cells`` (``model:criterion`` separated by ``;``).
    """
    first = next(iter(results.values()))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")

    def whole(x: float) -> Any:
        return "" if x is None or math.isnan(x) else int(x)

    header = ["model"]
    for n in results:
        header += [f"{n}_score", f"{n}_rank"]
        if intervals is not None and n in intervals:
            header += [f"{n}_rank_lo", f"{n}_rank_hi", f"{n}_tier"]
        if robustness is not None and n in robustness:
            header += [f"{n}_cells_to_win", f"{n}_cells_to_win_kind", f"{n}_cells"]
    writer.writerow(header)
    for i, m in enumerate(first.models):
        row: list[Any] = [m]
        for n, res in results.items():
            s, r = res.score_of(m), res.rank_of(m)
            row += ["" if math.isnan(s) else repr(float(s)), whole(r)]
            if intervals is not None and n in intervals:
                iv = intervals[n]
                row += [whole(iv.rank_lo[i]), whole(iv.rank_hi[i]), whole(iv.tier[i])]
            if robustness is not None and n in robustness:
                rb = robustness[n]
                row += ["" if rb.count[i] is None else rb.count[i], rb.kind[i],
                        ";".join(f"{a}:{c}" for a, c in rb.cells[i])]
        writer.writerow(row)
    return buf.getvalue()


def format_uncertainty(settings: dict[str, Any], robustness: dict[str, Any] | None) -> str:
    """The lines under the table: where the intervals come from, and per rule the flip sentence."""
    lines = []
    iv = settings.get("intervals")
    if iv:
        lines.append(f"intervals: {iv['level']:.0%} for all models at once (per rule), from {iv['described']}, "
                     f"seed {iv['seed']}; simultaneous pairwise comparisons of the rule's scores (max statistic)")
    if robustness:
        lines.append(f"to win: {settings['robustness']['changed_cell']}")
        width = max(len(n) for n in robustness)
        lines += [f"  {n:<{width}}  {rb.flip_sentence()}" for n, rb in robustness.items()]
    return ("\n\n" + "\n".join(lines)) if lines else ""


# ---------------------------------------------------------------------- prospective
def run_prospective(args: argparse.Namespace) -> int:
    from ranking.prospective import prospective

    choices_from_args(args)
    table = table_from_args(args, voted="prospective")
    found = prospective(table, strict=args.strict, preset=args.preset, drop_incomplete=args.drop_incomplete)
    left_out = [m for m in table.models if m not in found]
    if left_out:
        print(f"vnr prospective: note: left out {len(left_out)} model(s) missing a score, neither candidates nor "
              f"rivals (--keep-incomplete keeps them): {', '.join(left_out)}", file=sys.stderr)
    if args.format == "json":
        text = json.dumps({m: r.to_dict() for m, r in found.items()}, indent=2, allow_nan=False)
    else:
        text = format_prospective_table(found, strict=args.strict, wide=getattr(args, "wide", False))
    sys.stdout.write(text + "\n")
    return 0


def format_prospective_table(found: dict[str, Any], *, strict: bool = False, wide: bool = False) -> str:
    """Models (prospective ones first, by margin), whether prospective, the margin and the weights found."""
    from ranking.textable import TextTable, number, render

    rows = []
    for m, r in found.items():
        weights = ""
        if r.weights:
            weights = ", ".join(f"{c}={number(w, 3)}" for c, w in sorted(r.weights.items(), key=lambda kv: -kv[1]) if w > 0)
        rows.append([m, "yes" if r.prospective else "no", r.margin, weights])
    order = sorted(range(len(rows)), key=lambda i: (rows[i][1] != "yes", -(rows[i][2] if rows[i][2] is not None else -math.inf)))
    kind = "strict (beats every rival)" if strict else "weak (no rival beats it, the paper's Eq. 2)"
    n_yes = sum(1 for r in found.values() if r.prospective)
    table = TextTable(
        ["model", "prospective", "margin", "weights (non-zero)"],
        [rows[i] for i in order],
        title="sorted by prospective, then by margin (largest first)",
        legend="margin: the smallest majority margin over the rivals under the weights shown; –: none found",
        align="llrl",
    )
    return render(table, wide=wide) + f"\n\n{n_yes} of {len(found)} models are prospective Condorcet winners, {kind}"


# ---------------------------------------------------------------------- criteria init
def run_criteria_init(args: argparse.Namespace) -> int:
    """Write (or print) a criteria.yaml template for a CSV; an existing sidecar is kept unless ``--force``.

    The template names the CSV (``table:``), so it describes that CSV only. A ``criteria.yaml`` of the
    folder that describes another CSV is left alone: the template then goes to ``<stem>.yaml``.
    """
    from pathlib import Path

    from ranking.loading import sidecar_template
    from ranking.table import ScoreTable, find_sidecar

    path = Path(args.table)
    if path.is_dir():
        path = path / "matrix.csv"
    if path.suffix.lower() == ".csv" and not path.exists():
        raise UserError(f"cannot read {path}: no such file")
    if path.suffix.lower() != ".csv" or not path.is_file():
        raise UserError(f"{args.table}: give a CSV score table (a leaderboard spec or benchbench table states its "
                        "directions already)")
    existing = _own_sidecar(path, find_sidecar(path))
    if existing is not None and not args.force and not args.stdout:
        raise UserError(f"{path} already has a sidecar ({existing}): edit it, or pass --force to overwrite")
    try:  # prefill from the sidecar there is; a broken or partial one is what --force replaces
        table = ScoreTable.from_csv(path, existing, stated=_csv_columns(path)) if existing else None
    except UserError:
        if not args.force:
            raise
        table = None
    table = table or ScoreTable.from_csv(path, False)
    stated = {**{c: "lower" for c in args.lower}, **{c: "higher" for c in args.higher}}
    unknown = [c for c in stated if c not in table.names]
    if unknown:
        raise UserError(f"--lower/--higher name unknown column {unknown[0]!r} (columns: {', '.join(table.names)})")
    text = sidecar_template(table, stated, table_file=path.name)
    if args.stdout:
        sys.stdout.write(text)
        return 0
    target = existing or (path.with_name("criteria.yaml") if not path.with_name("criteria.yaml").exists()
                          else path.with_suffix(".yaml"))
    from ranking.floor.paths import write_text_atomic

    write_text_atomic(target, text)
    print(f"wrote {target}: check each direction and weight, then `vnr rank {args.table}`")
    return 0


def _own_sidecar(csv_path: Any, found: Any) -> Any:
    """``found`` (the sidecar :func:`ranking.table.find_sidecar` found) unless it is a ``criteria.yaml`` whose
    ``table:`` names another CSV (a broken one counts as the CSV's own: ``--force`` replaces it)."""
    from ranking.table import read_sidecar

    if found is None or found.name != "criteria.yaml":
        return found
    try:
        named = read_sidecar(found).table
    except UserError:
        return found
    return None if named is not None and named != csv_path.name else found


def _csv_columns(path: Any) -> list[str]:
    from ranking.table import _csv_header

    return _csv_header(path)
