"""``vnr analyze``: how far a ranking can be trusted (agreement, IIA, missing scores, diversity, sensitivity, Kemeny).

Imports nothing heavy at module level; matplotlib only inside the plot.

Examples (with ``VNR_DATA_ROOT`` or ``--data-root`` set)::

    vnr analyze diversity benchbench/glue --format json
    vnr analyze kemeny ranking_nlp/superglue.data --format json
    vnr analyze iia benchbench/superglue --rule copeland --repetitions 50 --seed 0
    vnr analyze sensitivity benchbench/helm/accuracy --kind ordinal
    vnr analyze tradeoff --out tradeoff.png
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from ranking.cli_table import TABLE_HELP, add_table_options, table_from_args
from ranking.cli_types import (
    add_choice_flags,
    choices_from_args,
    finite_non_negative_float,
    rule_help,
)

FORMATS = ("table", "json")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="trustworthiness analyses: agreement, IIA, missing scores, diversity, sensitivity, Kemeny",
        description="Analyses of Vote'n'Rank, Zhang & Hardt (diversity/sensitivity) and Colombo et al. (Kemeny, "
        "instance-level). TABLE is a CSV (+ criteria sidecar), a leaderboard spec YAML, or a path under the data "
        "root such as benchbench/glue, benchbench/helm/accuracy or ranking_nlp/glue.data.",
    )
    sub = parser.add_subparsers(dest="analysis", metavar="ANALYSIS", parser_class=type(parser))
    sub.required = True

    def add(name: str, help_text: str, *, table: bool = True, rule: str | None = None,
            setting: bool = False) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if table:
            p.add_argument("table", metavar="TABLE", help=TABLE_HELP)
            add_table_options(p)
        else:
            p.add_argument("--data-root", metavar="DIR", default=None, help="data root (default: $VNR_DATA_ROOT)")
        p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
        p.add_argument("--wide", action="store_true",
                       help="print tables in full: no wrapping to 120 columns, no shortened names")
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bars on stderr (default: when stderr is a terminal)")
        if rule is not None:
            p.add_argument("--rule", default=rule, help=rule_help(f"rule to analyse (default: {rule})"))
        # --seed, and --vote (a table), --setting (a rule): generated from their declaration (ranking.plan.RankPlan)
        add_choice_flags(p, "analyze", only=("seed", *(("vote",) if table else ()),
                                             *(("setting",) if rule is not None or setting else ())))
        return p

    p = add("agreement", "agreement@k (top and least), Kendall τ and ties of several rules against a reference rule",
            setting=True)
    p.add_argument("--rules", default="all", help=rule_help("comma-separated rule names, or 'all' (default)"))
    p.add_argument("--reference", default="arithmetic_mean", help="reference rule (default: arithmetic_mean)")
    p.add_argument("-k", default="1,3,5", help="comma-separated k values (default: 1,3,5)")
    p.set_defaults(func=_checked(run_agreement))

    p = add("iia", "IIA experiment: flips of a random pair's order as random systems are added", rule="borda")
    p.add_argument("--repetitions", type=int, default=50, help="repetitions (default: 50)")
    p.set_defaults(func=_checked(run_iia))

    p = add("missing", "robustness to missing scores: Spearman ρ of the top-7 after hiding N scores", rule="borda")
    p.add_argument("--n-missing", default="1,5,10", help="comma-separated numbers of hidden scores (default: 1,5,10)")
    p.add_argument("--repetitions", type=int, default=100, help="repetitions (default: 100)")
    p.add_argument("--top", type=int, default=7, help="size of the compared top set (default: 7)")
    p.set_defaults(func=_checked(run_missing))

    p = add("diversity", "diversity = 1 − Kendall's W across criteria (tie-corrected)")
    p.add_argument("--impute", default="knn", choices=("knn", "median", "drop"),
                   help="missing scores: kNN imputation (default), criterion median, or drop incomplete models")
    p.set_defaults(func=_checked(run_diversity))

    p = add("sensitivity", "cardinal / ordinal sensitivity (lower bounds on the worst ranking change)", setting=True)
    p.add_argument("--kind", default="auto", choices=("auto", "cardinal", "ordinal"),
                   help="auto: ordinal for the ordinal benchbench leaderboards, else cardinal")
    p.add_argument("--rule", default=None,
                   help=rule_help("rank with this rule instead of the mean (cardinal) / win rate (ordinal)"))
    p.add_argument("--epsilon", type=float, default=None, help="cardinal: smallest weight (default min(0.01, std ratio))")
    p.add_argument("--steps", type=int, default=None, help="optimisation steps (default 300 cardinal / 600 ordinal)")
    p.add_argument("--top-share", type=float, default=0.2, help="ordinal: share of top models (default 0.2)")
    p.add_argument("--exact-limit", type=int, default=16, help="ordinal: enumerate all subsets up to this many candidates")
    p.add_argument("--rule-budget", type=int, default=300, help="rule evaluations allowed with --rule (default 300)")
    p.add_argument("--impute", default="knn", choices=("knn", "median", "drop"),
                   help="missing scores: kNN imputation (default), criterion median, or drop incomplete models")
    p.set_defaults(func=_checked(run_sensitivity))

    p = add("kemeny", "exact Kemeny consensus (DP over subsets) up to --max-exact systems, Borda beyond")
    p.add_argument(
        "--max-exact", type=int, default=20,
        help="largest number of systems solved exactly (default 20, at most 22: time and memory grow as 2^n, "
        "22 systems take ~40 s and ~0.8 GB); beyond it the Borda order is returned, marked exact=false",
    )
    p.add_argument(
        "--tie-cost", type=finite_non_negative_float, default=0.0,
        help="cost of a pair tied in a criterion (finite, >= 0; default 0)",
    )
    p.set_defaults(func=_checked(run_kemeny))

    p = add("instance", "instance-level mean / one-level / two-level aggregation of (system, instance, metric) scores")
    p.add_argument("--metrics", default=None, help="comma-separated metric names or regexes (default: all)")
    p.add_argument("--human", default="exclude", choices=("exclude", "include", "only"),
                   help="human judgements (H: metrics): exclude (default; then used as reference), include, only")
    p.set_defaults(func=_checked(run_instance))

    p = add("synthetic", "synthetic robustness: corrupted tasks / a rescaled task, error of each aggregation",
            table=False)
    p.add_argument("--experiment", default="corruption", choices=("corruption", "scaling"),
                   help="corruption: some tasks score at random; scaling: one task's scores rescaled (default: corruption)")
    p.add_argument("--values", default=None, help="comma-separated corrupted-task counts or scale factors")
    p.add_argument("--systems", type=int, default=20, help="synthetic systems (default 20)")
    p.add_argument("--tasks", type=int, default=10, help="synthetic tasks (default 10)")
    p.add_argument("--instances", type=int, default=20, help="instances per task (default 20)")
    p.add_argument("--phi", type=float, default=0.2, help="spacing of the Gumbel locations (default 0.2)")
    p.add_argument("--n-corrupted", type=int, default=1, help="scaling: corrupted tasks (default 1)")
    p.add_argument("--repetitions", type=int, default=50, help="repetitions per value (default 50)")
    p.set_defaults(func=_checked(run_synthetic))

    p = add("tradeoff", "diversity vs sensitivity across benchmarks, as a table and a scatter plot", table=False)
    p.add_argument("tables", nargs="*", metavar="TABLE", help="tables (default: every benchbench leaderboard)")
    p.add_argument("--out", default=None, help="scatter plot file (.png, .pdf, .svg)")
    p.add_argument("--steps", type=int, default=None, help="optimisation steps per benchmark")
    p.set_defaults(func=_checked(run_tradeoff))


# ---------------------------------------------------------------------- helpers
def _checked(run: Any) -> Any:
    """``run`` after the ranking choices given as flags are checked once (:func:`ranking.cli_types.choices_from_args`)."""
    def checked(args: argparse.Namespace) -> int:
        choices_from_args(args)
        return run(args)

    checked.__name__ = checked.__qualname__ = run.__name__
    return checked


def _progress(args: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if args.progress is None else bool(args.progress)


def _load(args: argparse.Namespace):
    return table_from_args(args, voted="analyze")


def _ranker(args: argparse.Namespace, rule: str):
    from ranking.analysis._common import make_ranker

    return make_ranker(rule, setting=getattr(args, "setting", "basic"))


def _num(x: Any) -> Any:
    if isinstance(x, float):
        return None if math.isnan(x) else x
    if isinstance(x, dict):
        return {k: _num(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_num(v) for v in x]
    return x


def _emit(args: argparse.Namespace, payload: Any, rows: list[dict[str, Any]] | None = None, title: str = "") -> int:
    if args.format == "json":
        print(json.dumps(_num(payload), indent=2, ensure_ascii=False))
        return 0
    if title:
        print(title)
    if rows is None:
        rows = [payload] if isinstance(payload, dict) else list(payload)
    print(format_rows(rows, wide=getattr(args, "wide", False)))
    return 0


def format_rows(rows: list[dict[str, Any]], *, wide: bool = False) -> str:
    """dict rows as a terminal table (union of keys, in first-seen order), via :mod:`ranking.textable`."""
    from ranking.textable import TextTable, render

    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    return render(TextTable(keys, [[r.get(k, "") for k in keys] for r in rows], name_columns=()), wide=wide)


# ---------------------------------------------------------------------- commands
def run_agreement(args: argparse.Namespace) -> int:
    from ranking.analysis._common import parse_int_list
    from ranking.analysis.votenrank import compare_rankings
    from ranking.floor.errors import UserError
    from ranking.rules import rule_names

    table = _load(args)
    ks = parse_int_list(args.k, "-k")
    every = args.rules == "all"
    rules = rule_names() if every else [r.strip() for r in args.rules.split(",") if r.strip()]
    rankers = {r: _ranker(args, r) for r in rules}  # unknown names fail before any rule runs
    reference = _ranker(args, args.reference)(table)
    rankings, skipped = {}, {}
    for name, ranker in rankers.items():
        try:
            rankings[name] = ranker(table)
        except UserError as exc:
            if not every:  # a rule the user named must run
                raise UserError(f"rule {name}: {exc}") from None
            skipped[name] = str(exc)  # e.g. the geometric mean of a table with a zero score
    for name, why in skipped.items():
        print(f"vnr analyze agreement: note: skipped {name}: {why}", file=sys.stderr)
    rows = compare_rankings(rankings, reference, ks)
    payload = {"reference": args.reference, "rows": rows, "skipped": skipped}
    return _emit(args, payload, rows, f"reference: {args.reference}")


def run_iia(args: argparse.Namespace) -> int:
    from ranking.analysis.votenrank import iia_experiment

    table = _load(args)
    out = iia_experiment(table, _ranker(args, args.rule), repetitions=args.repetitions, seed=args.seed,
                         progress=_progress(args))
    out = {"rule": args.rule, **out}
    row = {k: v for k, v in out.items() if k != "flips"}
    return _emit(args, out, [row])


def run_missing(args: argparse.Namespace) -> int:
    from ranking.analysis._common import parse_int_list
    from ranking.analysis.votenrank import missing_experiment

    table = _load(args)
    rows = missing_experiment(table, _ranker(args, args.rule), n_missing=parse_int_list(args.n_missing, "--n-missing"),
                              repetitions=args.repetitions, top=args.top, seed=args.seed, progress=_progress(args))
    return _emit(args, {"rule": args.rule, "rows": rows}, rows, f"rule: {args.rule}")


def run_diversity(args: argparse.Namespace) -> int:
    from ranking.analysis.diversity import diversity

    out = diversity(_load(args), impute=args.impute)
    if args.format == "json":
        return _emit(args, {k: out[k] for k in ("diversity", "n_models", "n_criteria")})
    return _emit(args, out)


def _sensitivity(table, args: argparse.Namespace, kind: str) -> dict[str, Any]:
    from ranking.analysis.sensitivity import cardinal_sensitivity, ordinal_sensitivity

    ranker = _ranker(args, args.rule) if getattr(args, "rule", None) else None
    steps = getattr(args, "steps", None)
    if kind == "cardinal":
        kw = {"steps": steps} if steps else {}
        return cardinal_sensitivity(table, ranker, epsilon=getattr(args, "epsilon", None), seed=args.seed,
                                    rule_budget=getattr(args, "rule_budget", 300),
                                    impute=getattr(args, "impute", "knn"), **kw)
    kw = {"steps": steps} if steps else {}
    return ordinal_sensitivity(table, ranker, top_share=getattr(args, "top_share", 0.2),
                               exact_limit=getattr(args, "exact_limit", 16),
                               rule_budget=getattr(args, "rule_budget", 300), seed=args.seed, **kw)


def _kind_of(table, requested: str) -> str:
    from ranking.published import benchbench_kind

    if requested != "auto":
        return requested
    src = table.source or ""
    return benchbench_kind(src.removeprefix("benchbench/")) if src.startswith("benchbench/") else "cardinal"


def run_sensitivity(args: argparse.Namespace) -> int:
    table = _load(args)
    out = _sensitivity(table, args, _kind_of(table, args.kind))
    out = {"rule": args.rule or ("mean" if out["kind"] == "cardinal" else "win_rate"), **out}
    row = {k: v for k, v in out.items() if k not in ("weights", "added", "top_models", "note")}
    if args.format == "table":
        print(f"note: {out['note']}")
    return _emit(args, out, [row])


def run_kemeny(args: argparse.Namespace) -> int:
    from ranking.analysis.kemeny import kemeny

    res = kemeny(_load(args), max_exact=args.max_exact, tie_cost=args.tie_cost)
    d = res.to_dict()
    if args.format == "json":
        return _emit(args, {k: d[k] for k in ("ranking", "cost", "n_optimal", "exact")})
    print(f"cost {res.cost:g}, {'exact' if res.exact else 'Borda approximation'}"
          + (f", {res.n_optimal} optimal ranking(s)" if res.exact else ""))
    rows = [{"position": i + 1, "model": m} for i, m in enumerate(res.ranking)]
    print(format_rows(rows, wide=getattr(args, "wide", False)))
    return 0


def run_instance(args: argparse.Namespace) -> int:
    from ranking.analysis.instance import aggregate_instances
    from ranking.floor.paths import resolve_data_root
    from ranking.published import load_instance_table

    frame = load_instance_table(args.table, resolve_data_root(args.data_root))
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
    out = aggregate_instances(frame, metrics=metrics, human=args.human)
    if args.format == "json":
        return _emit(args, out)
    print(f"{out['n_systems']} systems, {out['n_instances']} instances, {len(out['metrics'])} metrics")
    rows = [{"position": i + 1, "mean": a, "one_level": b, "two_level": c}
            for i, (a, b, c) in enumerate(zip(out["mean"]["ranking"], out["one_level"]["ranking"],
                                              out["two_level"]["ranking"]))]
    print(format_rows(rows, wide=getattr(args, "wide", False)))
    taus = [{"comparison": k, "kendall_tau": v} for k, v in out["kendall_tau"].items()]
    taus += [{"comparison": f"{k}_vs_human", "kendall_tau": v} for k, v in out.get("kendall_tau_vs_human", {}).items()]
    print(format_rows(taus, wide=getattr(args, "wide", False)))
    return 0


def run_synthetic(args: argparse.Namespace) -> int:
    from ranking.analysis.synthetic import run_synthetic as simulate
    from ranking.floor.errors import UserError

    values = None
    if args.values:
        try:
            values = [float(v) for v in args.values.split(",") if v.strip()]
        except ValueError:
            raise UserError(f"--values {args.values!r}: give comma-separated numbers") from None
    rows = simulate(experiment=args.experiment, values=values, n_systems=args.systems, n_tasks=args.tasks,
                    n_instances=args.instances, phi=args.phi, n_corrupted=args.n_corrupted,
                    repetitions=args.repetitions, seed=args.seed, progress=_progress(args))
    return _emit(args, {"experiment": args.experiment, "rows": rows}, rows)


def run_tradeoff(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from ranking.analysis.diversity import diversity
    from ranking.published import BENCHBENCH

    names = args.tables or [f"benchbench/{b}" for b in BENCHBENCH]
    args.rule = None
    rows = []
    for name in tqdm(names, desc="tradeoff", disable=not _progress(args), leave=False):
        table = table_from_args(args, name)
        kind = _kind_of(table, "auto")
        sens = _sensitivity(table, args, kind)
        div = diversity(table)
        rows.append({"benchmark": name.removeprefix("benchbench/"), "kind": kind, "diversity": div["diversity"],
                     "tau_distance": sens["tau_distance"], "mrc": sens["mrc"], "n_models": table.n_models,
                     "n_criteria": table.n_criteria})
    if args.out:
        plot_tradeoff(rows, args.out)
    payload = {"rows": rows, "plot": args.out, "note": "sensitivity values are lower bounds"}
    return _emit(args, payload, rows)


def plot_tradeoff(rows: list[dict[str, Any]], out: str) -> None:
    """Scatter of diversity (x) against sensitivity (τ distance, y), one marker per benchmark."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ranking.floor.errors import UserError

    fig, ax = plt.subplots(figsize=(7, 5))
    for kind, marker in (("cardinal", "o"), ("ordinal", "s")):
        sel = [r for r in rows if r["kind"] == kind]
        if sel:
            ax.scatter([r["diversity"] for r in sel], [r["tau_distance"] for r in sel], marker=marker, label=kind)
            for r in sel:
                ax.annotate(r["benchmark"], (r["diversity"], r["tau_distance"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("diversity (1 − Kendall's W)")
    ax.set_ylabel("sensitivity (Kendall τ distance, lower bound)")
    ax.set_title("Diversity vs sensitivity across benchmarks")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(Path(out))
    except (OSError, ValueError) as exc:
        raise UserError(f"--out {out}: cannot write the plot ({exc})") from None
    finally:
        plt.close(fig)
