"""``vnr rank`` and ``vnr prospective``: voting rules and prospective systems from the command line.

::

    vnr rank TABLE [--data-root DIR] [--rule NAME ... | --rule all] [--setting basic|weighted|two-step]
                   [--group-weights g=w,...] [--ties default|votenrank] [--drop-incomplete]
                   [--format table|json|csv]
    vnr rank --scenario FILE [--results DIR] [--bootstrap N] [--seed N] ...   (scenario mode)
    vnr prospective TABLE [--data-root DIR] [--strict] [--format table|json]

TABLE is a CSV (with its criteria sidecar if present) or a leaderboard spec
YAML. ``--format json`` prints one object: ``{rule: {"scores": {model:
number|null}, "ranks": {model: int|null}, "winners": [...]}}`` for ``rank``
and ``{model: {"prospective": bool, "weights": {criterion: number}|null}}``
for ``prospective``. With ``--rule all`` (the default), a rule that cannot
apply to the table (e.g. ``geometric_mean`` with a non-positive score) is
left out with a note on stderr; a rule named explicitly fails instead.

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

from ranking.cli_types import finite_positive_float, non_negative_int
from ranking.errors import UserError

TIES = ("default", "votenrank")
PRESETS = ("default", "votenrank")  # = ranking.settings.PRESETS
SETTINGS = ("basic", "weighted", "two-step")  # = ranking.settings.SETTINGS, without importing numpy here


def register(subparsers: Any) -> None:
    """Add the ``rank`` and ``prospective`` sub-commands to the ``vnr`` parser."""
    p = subparsers.add_parser(
        "rank",
        help="rank the models of a score table with voting rules (or a scenario with --scenario)",
        description="Rank the models of a score table (CSV + sidecar, or leaderboard spec) with voting rules. "
        "Pairwise rules work in blocks of rows above 2500 models (memory O(n·m), no n×n matrix); "
        "every rule of --rule all ranks 20 000 models × 5 criteria.",
    )
    p.add_argument("table", nargs="?", metavar="TABLE", help="CSV score table or leaderboard spec (.yaml)")
    p.add_argument("--data-root", metavar="DIR", help="data root for leaderboard specs (default: $VNR_DATA_ROOT)")
    p.add_argument(
        "--rule", action="extend", nargs="+", metavar="NAME",
        help="rule name(s), repeatable, or 'all' (default: all)",
    )
    p.add_argument("--setting", default="basic", choices=SETTINGS, help="aggregation setting (default: basic)")
    p.add_argument("--group-weights", metavar="G=W,...", help="group weights, e.g. performance=0.4,efficiency=0.3")
    p.add_argument("--ties", default=None, choices=TIES, help="tie convention of positional rules (default: the preset's)")
    p.add_argument(
        "--preset", default=None, choices=PRESETS,
        help="conventions: default (principled) or votenrank (reproduces the paper's numbers: votenrank ties, "
        "weighted divides by the group's number of columns, optimality gap gamma 0.95, geometric mean 0 "
        "for a score <= 0)",
    )
    p.add_argument(
        "--og-gamma", type=finite_positive_float, default=None, metavar="G",
        help="optimality_gap's gamma on the 0-1 scale (0.95 = 95 on a 0-100 scale; default: the preset's, 1 or 0.95)",
    )
    p.add_argument(
        "--drop-incomplete", action="store_true", help="drop models missing any criterion of non-zero weight"
    )
    p.add_argument("--format", default="table", choices=("table", "json", "csv"), help="output format")
    p.add_argument("--scenario", metavar="FILE", help="rank a user-preference scenario (YAML) instead")
    p.add_argument("--results", metavar="DIR", help="scenario mode: results directory or CSV to rank")
    p.add_argument("--bootstrap", type=non_negative_int, default=0, metavar="N", help="scenario mode: seed-bootstrap repetitions")
    p.add_argument("--seed", type=int, default=None, metavar="N", help="scenario mode: random seed of the bootstrap")
    p.set_defaults(func=run_rank)

    q = subparsers.add_parser(
        "prospective",
        help="which models some weighting of the criteria makes the Condorcet winner",
        description="For each model: can some non-negative weights summing to 1 make it a Condorcet winner? "
        "One linear programme per model: at most 5000 models (about a minute with 5 criteria).",
    )
    q.add_argument("table", metavar="TABLE", help="CSV score table or leaderboard spec (.yaml)")
    q.add_argument("--data-root", metavar="DIR", help="data root for leaderboard specs (default: $VNR_DATA_ROOT)")
    q.add_argument("--strict", action="store_true", help="require beating every rival (default: >= 0, Eq. 2)")
    q.add_argument(
        "--preset", default=None, choices=PRESETS,
        help="votenrank: search weights over every column, weight-0 diagnostics included (as the paper)",
    )
    q.add_argument("--format", default="table", choices=("table", "json"), help="output format")
    q.set_defaults(func=run_prospective)


# ---------------------------------------------------------------------- rank
def run_rank(args: argparse.Namespace) -> int:
    if getattr(args, "scenario", None):
        from ranking.scenarios.cli import run_rank_scenario

        for option, key in (("--preset", "preset"), ("--og-gamma", "og_gamma"), ("--ties", "ties")):
            if getattr(args, key, None) is not None:
                raise UserError(f"{option} does not apply with --scenario: set '{key}:' in the scenario file")

        return run_rank_scenario(args)
    if not args.table:
        raise UserError("give a score table (TABLE) or a scenario (--scenario FILE)")
    for option, given in (("--results", args.results), ("--bootstrap", args.bootstrap), ("--seed", args.seed)):
        if given not in (None, 0):
            raise UserError(f"{option} only applies with --scenario")
    from ranking.result import rule_names
    from ranking.settings import rank, resolve_group_weights

    table = _load(args.table, args.data_root)
    if args.drop_incomplete:
        table = table.drop_incomplete()
    rules = resolve_rules(args.rule, rule_names())
    group_weights = parse_group_weights(args.group_weights)
    if args.setting != "basic":
        resolve_group_weights(table, group_weights)  # input errors once, before any rule runs
    elif group_weights:
        raise UserError("--group-weights only applies with --setting weighted or two-step")
    explicit = bool(args.rule) and "all" not in args.rule
    results = {}
    skipped: list[tuple[str, UserError]] = []
    for name in rules:
        try:
            extra = {"gamma": args.og_gamma} if name == "optimality_gap" and args.og_gamma is not None else {}
            results[name] = rank(
                table, name, setting=args.setting, group_weights=group_weights, ties=args.ties,
                preset=args.preset, **extra,
            )
        except UserError as exc:
            if explicit:
                raise UserError(f"rule {name}: {exc}") from None
            skipped.append((name, exc))
    if not results:
        name, exc = skipped[0]
        raise UserError(f"no rule could rank this table ({name}: {exc})")
    for name, exc in skipped:
        print(f"vnr rank: note: skipped {name}: {exc}", file=sys.stderr)
    text = {"table": format_rank_table, "json": format_rank_json, "csv": format_rank_csv}[args.format](results)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def resolve_rules(requested: list[str] | None, known: list[str]) -> list[str]:
    """Rule names from ``--rule`` (``all`` or none given: every rule), unknown names rejected.

    >>> resolve_rules(["borda", "all"], ["plurality", "borda"])
    ['borda', 'plurality']
    >>> resolve_rules(["bordaa"], ["borda"])
    Traceback (most recent call last):
    ...
    ranking.errors.UserError: unknown rule 'bordaa' (rules: borda, all)
    """
    out: list[str] = []
    for name in requested or ["all"]:
        names = known if name == "all" else [name]
        for n in names:
            if n not in known:
                raise UserError(f"unknown rule {n!r} (rules: {', '.join(known)}, all)")
            if n not in out:
                out.append(n)
    return out


def parse_group_weights(text: str | None) -> dict[str, float]:
    """``"performance=0.4,efficiency=0.3"`` → a dict; a :class:`UserError` for a malformed item.

    >>> parse_group_weights("performance=0.4, fairness=0.3")
    {'performance': 0.4, 'fairness': 0.3}
    >>> parse_group_weights("performance")
    Traceback (most recent call last):
    ...
    ranking.errors.UserError: --group-weights: 'performance' is not GROUP=WEIGHT
    """
    out: dict[str, float] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UserError(f"--group-weights: {item!r} is not GROUP=WEIGHT")
        try:
            weight = float(value)
        except ValueError:
            raise UserError(f"--group-weights: weight of group {name!r} is {value.strip()!r}, not a number") from None
        if not math.isfinite(weight) or weight < 0:
            raise UserError(f"--group-weights: weight of group {name!r} must be finite and >= 0, got {value.strip()}")
        if name in out:
            raise UserError(f"--group-weights: group {name!r} given twice")
        out[name] = weight
    return out


def _load(path: str, data_root: str | None):
    from ranking.paths import resolve_data_root
    from ranking.table import ScoreTable

    root = resolve_data_root(data_root) if path.lower().endswith((".yaml", ".yml")) else data_root
    return ScoreTable.load(path, data_root=root)


def _number(x: float) -> str:
    """Compact display of a score: integers without decimals, others with up to 4."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4f}".rstrip("0").rstrip(".") if abs(x) < 1e4 else f"{x:.1f}"


def format_rank_table(results: dict[str, Any]) -> str:
    """An aligned terminal table: models sorted by the first rule's rank; per rule, score and rank."""
    first = next(iter(results.values()))
    models = first.ordering()
    header1 = ["model"]
    header2 = [""]
    for name in results:
        header1 += [name, ""]
        header2 += ["score", "rank"]
    rows = []
    for m in models:
        row = [m]
        for res in results.values():
            row += [_number(res.score_of(m)), _number(res.rank_of(m))]
        rows.append(row)
    lines = [header1, header2, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header1))]
    for k in range(1, len(header1), 2):  # a rule's name may span its score and rank columns
        need = len(header1[k]) - widths[k] - widths[k + 1] - 2
        if need > 0:
            widths[k] += need
    out = []
    for line in lines:
        cells = [line[0].ljust(widths[0])]
        for k in range(1, len(line), 2):
            if line is header1:
                cells.append(line[k].ljust(widths[k] + widths[k + 1] + 2))
            else:
                cells.append(line[k].rjust(widths[k]) + "  " + line[k + 1].rjust(widths[k + 1]))
        out.append("   ".join(cells).rstrip())
    winners = "; ".join(f"{name}: {', '.join(r.winners) or '(none)'}" for name, r in results.items())
    out.append("")
    out.append(f"winners — {winners}")
    return "\n".join(out)


def format_rank_json(results: dict[str, Any]) -> str:
    return json.dumps({name: res.to_dict() for name, res in results.items()}, indent=2, allow_nan=False)


def format_rank_csv(results: dict[str, Any]) -> str:
    """One row per model (in table order): ``model, <rule>_score, <rule>_rank, ...``."""
    first = next(iter(results.values()))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["model"] + [f"{n}_{k}" for n in results for k in ("score", "rank")])
    for m in first.models:
        row: list[Any] = [m]
        for res in results.values():
            s, r = res.score_of(m), res.rank_of(m)
            row += ["" if math.isnan(s) else repr(float(s)), "" if math.isnan(r) else int(r)]
        writer.writerow(row)
    return buf.getvalue()


# ---------------------------------------------------------------------- prospective
def run_prospective(args: argparse.Namespace) -> int:
    from ranking.prospective import prospective

    table = _load(args.table, args.data_root)
    found = prospective(table, strict=args.strict, zero_weight_columns=args.preset == "votenrank")
    if args.format == "json":
        text = json.dumps({m: r.to_dict() for m, r in found.items()}, indent=2, allow_nan=False)
    else:
        text = format_prospective_table(found, strict=args.strict)
    sys.stdout.write(text + "\n")
    return 0


def format_prospective_table(found: dict[str, Any], *, strict: bool = False) -> str:
    """Models, whether prospective, the smallest margin and the non-zero weights found."""
    rows = [["model", "prospective", "margin", "weights (non-zero)"]]
    for m, r in found.items():
        weights = ""
        if r.weights:
            weights = ", ".join(f"{c}={w:.3g}" for c, w in sorted(r.weights.items(), key=lambda kv: -kv[1]) if w > 0)
        rows.append([m, "yes" if r.prospective else "no", "-" if r.margin is None else f"{r.margin:.4g}", weights])
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["   ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2]), row[3]]).rstrip()
             for row in rows]
    kind = "strict (beats every rival)" if strict else "weak (no rival beats it, the paper's Eq. 2)"
    n_yes = sum(1 for r in found.values() if r.prospective)
    lines += ["", f"{n_yes} of {len(found)} models are prospective Condorcet winners, {kind}"]
    return "\n".join(lines)
