"""Benchmark prospective systems (``vnr prospective``) against the way before, in one run, and check they agree.

    python scripts/bench_prospective.py                 # 1000 models x 50 criteria: uniform and correlated scores
    python scripts/bench_prospective.py --quick         # 200 x 20 (a second or two; the tests call this)
    python scripts/bench_prospective.py --json out.json # also write what was measured and compared

"Ours": :func:`ranking.prospective.prospective` — a model a rival outvotes on every criterion that may carry
weight is settled without its linear programme, and each LP goes to the HiGHS solver scipy bundles directly.
"Before" (as of 6b29f70): the same function with every model's LP and every LP through ``scipy.optimize.linprog``
(the same model, the same options). Both run on the same tables in one process (CPU seconds, ``time.process_time``),
and must give the same answer for every model — prospective or not, the margin and the weights, bit for bit —
exit status 1 if not. Beside them, ``rank --rule all`` on the same table (``ranking.rank``), the yardstick of the
issue ("prospective is 16-20x rank --rule all").

Two tables: **uniform** scores (almost every model is prospective: one LP each, the worst case) and
**correlated** scores (a model's ability plus noise, as leaderboards are: most models are outvoted on every
criterion by a better one).

``--json FILE`` writes ``{"models", "criteria", "tables": {name: {"ours_s", "before_s", "rank_all_s",
"prospective", "outvoted", "agree"}}, "agree"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ranking.prospective as prospective_module  # noqa: E402
from ranking.api import rank  # noqa: E402
from ranking.floor.paths import write_text_atomic  # noqa: E402
from ranking.pairwise import criterion_signs  # noqa: E402
from ranking.table import Criterion, ScoreTable  # noqa: E402


def tables(n: int, m: int, seed: int) -> dict[str, ScoreTable]:
    rng = np.random.default_rng(seed)
    models = tuple(f"model{i}" for i in range(n))
    crits = tuple(Criterion(f"task{j}") for j in range(m))
    return {"uniform": ScoreTable(models, crits, rng.random((n, m))),
            "correlated": ScoreTable(models, crits, rng.random((n, 1)) + 0.3 * rng.random((n, m)))}


def before(table: ScoreTable) -> dict:
    """The way before: every model's LP, every LP through linprog."""
    kept = prospective_module._HIGHS, prospective_module.outvoted
    try:
        prospective_module._HIGHS = None
        prospective_module.outvoted = lambda signs, rows, weighable, strict: np.zeros(len(rows), dtype=bool)
        return prospective_module.prospective(table)
    finally:
        prospective_module._HIGHS, prospective_module.outvoted = kept


def cpu(fn, *args):
    t0 = time.process_time()
    out = fn(*args)
    return time.process_time() - t0, out


def answers(found: dict) -> dict:
    return {m: (r.prospective, r.margin, r.weights) for m, r in found.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--criteria", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="200 models x 20 criteria")
    ap.add_argument("--json", metavar="FILE", help="also write the timings and the comparison as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.models, args.criteria = 200, 20
    n, m = args.models, args.criteria
    print(f"# prospective systems: {n} models x {m} criteria (seed {args.seed}); CPU seconds")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"direct HiGHS: {'yes' if prospective_module._HIGHS is not None else 'no (linprog)'}")
    report: dict = {"models": n, "criteria": m, "tables": {}}
    print(f"\n{'table':<11} {'ours':>7} {'before':>7} {'speed-up':>9} {'rank all':>9} {'ours/rank':>10} "
          f"{'prospective':>12} {'outvoted':>9}  agree")
    ok = True
    for name, table in tables(n, m, args.seed).items():
        before_s, old = cpu(before, table)
        ours_s, new = cpu(prospective_module.prospective, table)
        rank_s, _ = cpu(lambda t: rank(t, "all"), table)
        agree = answers(new) == answers(old)
        ok = ok and agree
        signs = criterion_signs(table.oriented, np.arange(n))
        outvoted = int(prospective_module.outvoted(signs, np.arange(n), np.ones(m, dtype=bool), False).sum())
        n_yes = sum(r.prospective for r in new.values())
        report["tables"][name] = {"ours_s": ours_s, "before_s": before_s, "rank_all_s": rank_s,
                                  "prospective": n_yes, "outvoted": outvoted, "agree": agree}
        print(f"{name:<11} {ours_s:>7.2f} {before_s:>7.2f} {before_s / ours_s:>8.1f}x {rank_s:>9.2f} "
              f"{ours_s / rank_s:>9.1f}x {n_yes:>12} {outvoted:>9}  {'yes' if agree else 'NO'}")
    report["agree"] = ok
    if args.json:
        write_text_atomic(args.json, json.dumps(report, indent=2) + "\n")
    if not ok:
        print("\nDISAGREEMENT: ours and the way before differ on some model")
        return 1
    print("\nsanity check: every model's answer (prospective, margin, weights) is the same both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
