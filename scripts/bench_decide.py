"""Replay full grids through the decide-first procedure (:mod:`ranking.decide`, the code ``vnr run --decide`` runs).

Each replay builds one full grid of per-seed results with real seed spreads, then runs the adaptive procedure
against it (the seeds of each cell arriving in a random order, each wave revealing what :func:`next_step` asks
for) and compares its decision with the full grid's. Per setting it reports the share of the full grid's runs
used, how often the decision equals the full grid's, the error rate (settled, yet different from the full
grid's; it must stay at most 1 − level), and how the replays stopped.

Settings
    ``paper7``: the Vote'n'Rank case study (``configs/scenarios/paper_case_study.yaml``, its 7 models from the data
    root), 9 GLUE tasks × 5 seeds + 21 bias runs = 336 runs, column ``am_performance`` (the scenario's reference)
    unless ``--column``. ``glue20``: 20 RoBERTa-base fine-tuned models (``scripts/data/glue_20_models.csv``),
    9 tasks × 5 seeds = 900 runs, the arithmetic mean of the nine tasks.

Seed spreads (real, published)
    ``scripts/data/glue_seed_residuals.csv``: IBM/model-recycling's 20 fine-tuning seeds per task of four base
    encoders (bert-base-uncased, bert-base-cased, roberta-base, deberta-v3-base), each seed's score minus the
    20-seed mean. A replay gives each model one of the four at random and each cell 5 of its 20 seeds at random:
    the full grid's 5-seed means vary around the published means as a real grid's would, with per-model
    spreads that differ as much as the four encoders' do (e.g. MRPC: 0.65 to 2.32 points). CoLA deviations
    are doubled (IBM scored accuracy, the case study Matthews correlation, about twice as spread). Efficiency
    figures of one run move together by a 2 % relative deviation per run (an assumption: no published per-seed
    timings); bias scores have no seeds.

    python scripts/bench_decide.py                      # 1000 replays per setting and decision
    python scripts/bench_decide.py --replays 200 --settings paper7 --decisions winner
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ranking.decide import Question, SeedCube, column_scorer, full_scores, replay  # noqa: E402

DATA = ROOT / "scripts" / "data"
ENCODERS = ("bert_base_uncased", "bert_base_cased", "roberta_base", "microsoft_deberta_v3_base")
TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
SEEDS = 5
EFFICIENCY_CV = 0.02
DECISIONS = {"winner": Question("winner"), "top3": Question("top", k=3), "tiers": Question("tiers")}


def residuals() -> dict[tuple[str, str], np.ndarray]:
    """(base model, task) → its 20 seeds' deviations from their mean (points)."""
    import pandas as pd

    frame = pd.read_csv(DATA / "glue_seed_residuals.csv", comment="#")
    return {(b, t): g.sort_values("seed")["residual"].to_numpy() for (b, t), g in frame.groupby(["base_model", "task"])}


def unit_of(name: str) -> str | None:
    """The task whose runs a criterion comes from (``mnli-mm.eval_accuracy``, ``mnli-mm_gpu_hours`` → mnli)."""
    head = name.split(".")[0].split("_")[0].replace("-mm", "")
    return head if head in TASKS else None


class Setting:
    """A scenario table with units per criterion, and a generator of full per-seed grids around its values."""

    def __init__(self, name: str, scenario, column: str, table, runs_fixed: int) -> None:
        self.name, self.scenario, self.column, self.table, self.runs_fixed = name, scenario, column, table, runs_fixed
        units = [unit_of(c.name) if c.group != "fairness" else None for c in table.criteria]
        self.units = tuple(t for t in TASKS if t in units)
        self.unit = np.array([self.units.index(u) if u is not None else -1 for u in units])
        self.efficiency = np.array([c.group == "efficiency" for c in table.criteria])
        self.scale = np.array([2.0 if c.name.startswith("cola") else 1.0 for c in table.criteria])
        self.scorer = column_scorer(scenario, column, table)
        self.pool = residuals()

    def full_grid(self, rng: np.random.Generator) -> SeedCube:
        means = self.table.values
        n, m = means.shape
        values = np.full((n, m, SEEDS), np.nan)
        fixed = self.unit < 0
        values[:, fixed, 0] = means[:, fixed]
        for i in range(n):
            base = ENCODERS[rng.integers(len(ENCODERS))]
            for u, task in enumerate(self.units):
                dev = rng.choice(self.pool[(base, task)], SEEDS, replace=False)
                eff = 1.0 + EFFICIENCY_CV * rng.standard_normal(SEEDS)
                for j in np.flatnonzero(self.unit == u):
                    if self.efficiency[j]:
                        values[i, j] = means[i, j] * eff
                    else:
                        values[i, j] = means[i, j] + self.scale[j] * dev
        return SeedCube(self.table.models, self.table.names, self.units, self.unit, values)


def paper7(column: str | None, data_root: str | None) -> Setting:
    from ranking.scenarios.scenario import load_scenario

    scenario = load_scenario(ROOT / "configs" / "scenarios" / "paper_case_study.yaml")
    raw, _ = scenario.load_table(None, data_root)
    table = scenario.build_table(raw)
    return Setting("paper7", scenario, column or scenario.reference, table, runs_fixed=table.n_models * 3)


def glue20(column: str | None) -> Setting:
    import pandas as pd

    from ranking.scenarios.scenario import Scenario
    from ranking.table import ScoreTable

    frame = pd.read_csv(DATA / "glue_20_models.csv", comment="#").set_index("model")
    table = ScoreTable.from_frame(frame[list(TASKS)])
    scenario = Scenario.from_mapping({"name": "glue20", "columns": [
        {"name": "arithmetic_mean", "rule": "arithmetic_mean"}, {"name": "borda", "rule": "borda"}]})
    return Setting("glue20", scenario, column or "arithmetic_mean", scenario.build_table(table), runs_fixed=0)


def run(setting: Setting, decision: str, replays: int, draws: int, first_seeds: int, seed: int) -> dict:
    question = DECISIONS[decision]
    rng = np.random.default_rng(seed)
    used, equal, wrong, waves = [], 0, 0, []
    stops: dict[str, int] = {}
    started = time.perf_counter()
    for _ in range(replays):
        full = setting.full_grid(rng)
        r = replay(full, question, setting.scorer, rng=rng, first_seeds=first_seeds, draws=draws,
                   scores=full_scores(full, setting.scorer), runs_fixed=setting.runs_fixed)
        used.append(r.runs / r.full_runs)
        equal += r.equal
        wrong += r.wrong_settled
        waves.append(r.waves)
        stops[r.stop] = stops.get(r.stop, 0) + 1
    seconds = time.perf_counter() - started
    err = wrong / replays
    # a one-sided 95 % upper bound on the error rate (Clopper-Pearson), to compare with 1 - level
    from scipy.stats import beta

    upper = float(beta.ppf(0.95, wrong + 1, replays - wrong)) if wrong < replays else 1.0
    return {"setting": setting.name, "column": setting.column, "decision": decision, "replays": replays,
            "runs_used": float(np.mean(used)), "runs_used_p90": float(np.quantile(used, 0.9)),
            "equal": equal / replays, "error": err, "error_upper95": upper, "level": question.level,
            "waves": float(np.mean(waves)), "stops": stops, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replays", type=int, default=1000)
    parser.add_argument("--settings", default="paper7,glue20")
    parser.add_argument("--decisions", default="winner,top3,tiers")
    parser.add_argument("--column", default=None, help="scenario column (paper7: default am_performance)")
    parser.add_argument("--draws", type=int, default=1000, help="predictive draws per look")
    parser.add_argument("--first-seeds", type=int, default=1)
    parser.add_argument("--data-root", default=os.environ.get("VNR_DATA_ROOT"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    settings = {"paper7": lambda: paper7(args.column, args.data_root), "glue20": lambda: glue20(None)}
    print(f"{'setting':8} {'column':16} {'decision':8} {'replays':>7} {'runs used':>9} {'p90':>6} {'= full':>7} "
          f"{'error':>6} {'err95':>6} {'waves':>5}  stops")
    for name in args.settings.split(","):
        setting = settings[name]()
        for decision in args.decisions.split(","):
            r = run(setting, decision, args.replays, args.draws, args.first_seeds, args.seed)
            stops = ", ".join(f"{k} {v}" for k, v in sorted(r["stops"].items()))
            print(f"{r['setting']:8} {r['column']:16} {decision:8} {r['replays']:7d} {r['runs_used']:9.1%} "
                  f"{r['runs_used_p90']:6.1%} {r['equal']:7.1%} {r['error']:6.2%} {r['error_upper95']:6.2%} "
                  f"{r['waves']:5.2f}  {stops}  ({r['seconds']:.0f} s)", flush=True)
            if r["error_upper95"] > 1 - r["level"] and r["error"] > 1 - r["level"]:
                print(f"  ! error rate {r['error']:.2%} above 1 - level = {1 - r['level']:.0%}", flush=True)
    return 0 if not math.isnan(0.0) else 1


if __name__ == "__main__":
    raise SystemExit(main())
