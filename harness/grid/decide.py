"""Decide first: a grid that runs in waves and stops when the user's decision is settled (``vnr run --decide``).

::

    vnr run configs/experiments/example_three_models.yaml --decide configs/scenarios/user_weighted.yaml
    vnr run CONFIG --decide SCENARIO --decision top --top 3 --level 0.9 --budget-runs 200
    vnr run CONFIG --decide SCENARIO --executor slurm --dry-run      # the first wave's array and the plan
    vnr status CONFIG                                               # the waves, what is settled, what runs

The declaration is :class:`~harness.grid.settings.DecideSettings` (a config's ``decide:``, ``vnr run``'s flags,
``harness.run_grid(decide=...)``). The first wave runs one seed of every fine-tuning cell (model × task), a
second on every other cell (``first_seeds: 1``, the default; ``first_seeds: N``: N seeds of every cell) and every
run without seeds (bias); after each wave the run store is read into per-seed results, the
scenario column's decision is looked at (:func:`ranking.decide.next_step`, the code the replay bench runs), and
the next wave gets only the runs that can still change it. The grid stops when the decision is settled at the
level, when the seeds of every model that could change it ran out, or when the budget is spent.

Resumable: the run store skips every finished run, and ``<output>/decide/state.json`` (written whole by the
floor's atomic writer) holds the declaration, each wave's runs and each look. Killed at any point, ``vnr run``
again finishes the wave in the state (its finished runs skipped) and goes on; a state of another declaration
starts over (its runs are reused from the store).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from harness.grid.settings import DecideSettings
from ranking.floor.errors import UserError

log = logging.getLogger("harness.grid")

STATE = "state.json"
# the declaration's fields that define the decision (a state made under others is not resumed)
DEFINING = ("scenario", "column", "decision", "top", "level", "waves", "first_seeds")


def state_path(output: str | Path) -> Path:
    return Path(output) / "decide" / STATE


def read_state(output: str | Path) -> dict[str, Any] | None:
    path = state_path(output)
    if not path.is_file():
        return None
    from ranking.floor.json_io import read_json_object

    return read_json_object(path)


def write_state(output: str | Path, state: Mapping[str, Any]) -> None:
    from ranking.floor.paths import write_text_atomic

    write_text_atomic(state_path(output), json.dumps(state, indent=1, default=str) + "\n", parents=True)


def settings_of(exp: Any, given: Mapping[str, Any] | DecideSettings | None, *, names: Callable[[str], str] | None = None
                ) -> DecideSettings | None:
    """The config's ``decide:`` with ``given`` (flags or API arguments, each checked by the declaration) over it;
    None when neither names a scenario."""
    from ranking.floor.schema import validate

    if isinstance(given, DecideSettings):
        return given
    given = {k: v for k, v in dict(given or {}).items() if v is not None}
    checked = validate(DecideSettings, given, names=names or (lambda n: n))
    base = exp.decide or DecideSettings()
    out = replace(base, **{k: getattr(checked, k) for k in given})
    if "top" in given and out.decision != "top":
        name = (names or (lambda n: n))
        raise UserError(f"{name('top')} is the k of {name('decision')} top, and the decision is {out.decision}: "
                        f"add {name('decision')} top, or leave {name('top')} out")
    return out if out.scenario is not None else None


# ---------------------------------------------------------------------------- the grid's cells
@dataclass
class Cells:
    """The seeded kind's specs by (model, target, seed), the runs without seeds, and the grid's axes."""

    exp: Any
    models: tuple[str, ...]
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    by_cell: dict[tuple[str, str, int], Any]
    fixed: list[Any]
    kind: Any  # the seeded run kind's record (harness.kinds.RunKind)

    @classmethod
    def of(cls, exp: Any) -> Cells:
        """The cells of the grid's seeded kind (the kind table's ``seed`` and ``criteria_of``: its seeds are
        what waves spend); every other run is fixed and runs in the first wave."""
        from harness.kinds import kinds

        present = {s.kind for s in exp.specs}
        seeded = [k for k in kinds() if k.seed and k.criteria_of and k.name in present]
        if not seeded:
            names = ", ".join(k.name for k in kinds() if k.seed and k.criteria_of)
            raise UserError(f"{exp.source}: --decide needs runs with seeds (a {names} section): its seeds are "
                            "what waves spend")
        kind = seeded[0]
        runs = [s for s in exp.specs if s.kind == kind.name]
        by_cell = {(s.model, kind.target_of(s), kind.seed_of(s)): s for s in runs}
        tasks = tuple(dict.fromkeys(kind.target_of(s) for s in runs))
        seeds = tuple(dict.fromkeys(kind.seed_of(s) for s in runs))
        models = tuple(dict.fromkeys(s.model for s in runs))
        fixed = [s for s in exp.specs if s.kind != kind.name]
        return cls(exp, models, tasks, seeds, by_cell, fixed, kind)

    def first_wave(self, first_seeds: int) -> list[Any]:
        """The first wave (:func:`ranking.decide.first_wave`, the one the replay runs) and every run without seeds."""
        from ranking.decide import first_wave

        cells = first_wave((len(self.models), len(self.tasks)), len(self.seeds), first_seeds)
        keys = [(self.models[i], self.tasks[t], self.seeds[s]) for i, t, s in cells]
        return [*(self.by_cell[k] for k in keys if k in self.by_cell), *self.fixed]


def collected(exp: Any, cells: Cells, scenario: Any, *, quiet: bool = False) -> tuple[Any, Any, list[str]]:
    """The runs so far as (seed cube, scenario table): the kinds' collectors (:mod:`harness.grid.collect`) on the
    finished runs, each cell's per-seed values, fixed criteria (bias) as they are. Also the model rows."""
    import numpy as np

    from harness.grid.collect import Table, classify_runs, efficiency_metrics
    from harness.kinds import kinds
    from harness.store import RunStore
    from ranking.decide import SeedCube
    from ranking.table import Criterion, ScoreTable

    usable, _missing, _unusable = classify_runs(exp, RunStore(exp.output), "final")
    table = Table(exp, usable, "final", {exp.label(m): {} for m in exp.models}, efficiency_metrics(), True)
    for kind in kinds():
        kind.collector()(table, [s for s in exp.specs if s.kind == kind.name])
    unit_of: dict[str, str] = {}
    for t in cells.tasks:
        for name in cells.kind.criteria_names(t):
            unit_of[name] = t
        for metric in table.eff_metrics:
            unit_of[f"{t}_{metric[1]}"] = t
    per_seed: dict[tuple[str, str], list[float]] = {}
    for row in table.stat_rows:
        per_seed[(row["model"], row["criterion"])] = [row.get(f"seed_{s}", math.nan) for s in cells.seeds]
    labels = [exp.label(m) for m in exp.models]
    names = [c for c in table.columns
             if c in unit_of and any(not all(math.isnan(v) for v in per_seed.get((lb, c), [math.nan])) for lb in labels)
             or c not in unit_of and any(c in table.rows[lb] for lb in labels)]
    means = np.full((len(labels), len(names)), np.nan)
    for i, lb in enumerate(labels):
        for j, c in enumerate(names):
            if c in unit_of:
                vals = [v for v in per_seed.get((lb, c), []) if not math.isnan(v)]
                means[i, j] = float(np.mean(vals)) if vals else math.nan
            else:
                means[i, j] = table.rows[lb].get(c, math.nan)
    known = {f for f in Criterion.__dataclass_fields__}
    crits = [Criterion(c, **{k: v for k, v in table.meta[c].items() if k in known and k != "name"}) for c in names]
    keep = ~np.isnan(means).all(axis=1)
    raw = ScoreTable(tuple(lb for lb, k in zip(labels, keep) if k), tuple(crits), means[keep])
    scenario_log = logging.getLogger("ranking.scenarios.scenario")
    level = scenario_log.level
    if quiet:  # the scenario's notes about the table (criteria left out, ...) were shown at the first look
        scenario_log.setLevel(logging.ERROR)
    try:
        built = scenario.build_table(raw)
    finally:
        scenario_log.setLevel(level)
    s_count = len(cells.seeds)
    values = np.full((built.n_models, built.n_criteria, s_count), np.nan)
    unit = np.full(built.n_criteria, -1)
    tasks = list(cells.tasks)
    for j, c in enumerate(built.names):
        for i, lb in enumerate(built.models):
            if c in unit_of:
                values[i, j] = per_seed.get((lb, c), [math.nan] * s_count)
            else:
                values[i, j, 0] = raw.values[raw.models.index(lb), raw.names.index(c)]
        if c in unit_of:
            unit[j] = tasks.index(unit_of[c])
    used = sorted({int(u) for u in unit if u >= 0})
    remap = {u: k for k, u in enumerate(used)}
    unit = np.array([remap.get(int(u), -1) for u in unit])
    cube = SeedCube(built.models, built.names, tuple(tasks[u] for u in used), unit, values)
    return cube, built, [m for m in exp.models if exp.label(m) in built.models]


# ---------------------------------------------------------------------------- the driver
@dataclass
class Decider:
    """One grid's decision: the declaration, the scenario, the cells; :meth:`run` drives the waves."""

    exp: Any
    settings: DecideSettings

    def __post_init__(self) -> None:
        from ranking.decide import Question
        from ranking.scenarios.scenario import load_scenario

        self.scenario = load_scenario(self.settings.scenario)
        self.column = self.settings.column or self.scenario.reference
        self.scenario.column(self.column)  # an unknown column: one line naming the columns
        s = self.settings
        self.question = Question(s.decision, s.top if s.decision == "top" else 1, s.level, s.waves)
        self.cells = Cells.of(self.exp)
        if len(self.cells.seeds) < max(s.first_seeds, 2):
            raise UserError(f"--decide: the grid has {len(self.cells.seeds)} seed(s) and the first wave runs "
                            f"{max(s.first_seeds, 2)} where it estimates the seed spread: list at least "
                            f"{max(s.first_seeds, 2)} under {self.cells.kind.name}: seeds")

    def declaration(self) -> dict[str, Any]:
        d = asdict(self.settings)
        d["column"] = self.column
        return {k: d[k] for k in DEFINING}

    def plan_text(self) -> str:
        total = len(self.exp.specs)
        first = self.cells.first_wave(self.settings.first_seeds)
        return (f"decide: {self.question.describe()}, column {self.column} of {self.scenario.name}; "
                f"wave 1: {len(first)} of {total} runs ({self._first_text()}"
                f"{', the runs without seeds' if self.cells.fixed else ''}); then, after each look, the runs that "
                f"can still change the decision, at most {self.settings.waves} waves"
                + (f"; budget {self.settings.budget_runs} runs" if self.settings.budget_runs else "")
                + (f"; budget {self.settings.budget_gpu_hours:g} GPU-hours" if self.settings.budget_gpu_hours else ""))

    def _first_text(self) -> str:
        n = self.settings.first_seeds
        return "one seed of every cell, a second on every other" if n == 1 else f"{n} seeds of every cell"

    def load_state(self) -> dict[str, Any]:
        state = read_state(self.exp.output)
        if state is not None and state.get("declaration") == self.declaration():
            return state
        if state is not None:
            log.warning("decide: %s holds another declaration; starting over (finished runs are reused)",
                        state_path(self.exp.output))
        return {"declaration": self.declaration(), "waves": [], "stop": None}

    def specs_of(self, ids: Sequence[str]) -> list[Any]:
        by_id = {s.run_id(): s for s in self.exp.specs}
        return [by_id[i] for i in ids if i in by_id]

    def budget(self, store: Any) -> tuple[float, Any]:
        """What is left of the budget and each (model, unit)'s cost of one more run (runs: 1; GPU-hours: the mean
        measured GPU-hours of the task's finished runs)."""

        done = [s for s in self.exp.specs if store.is_done(s)]
        if self.settings.budget_gpu_hours is not None:
            hours: dict[str, list[float]] = {}
            spent = 0.0
            for s in done:
                rec = store.get(s.run_id()) or {}
                h = float((rec.get("efficiency") or {}).get("gpu_hours") or 0.0)
                spent += h
                if s.kind == self.cells.kind.name:
                    hours.setdefault(self.cells.kind.target_of(s), []).append(h)
            return self.settings.budget_gpu_hours - spent, hours
        if self.settings.budget_runs is not None:
            return float(self.settings.budget_runs - len(done)), None
        return math.inf, None

    def run(self, run_wave: Callable[[list[Any]], bool], *, echo: Callable[[str], None] = print) -> dict[str, Any]:
        """Drive the waves: ``run_wave(specs)`` runs a wave's specs (finished ones skipped) and says whether all
        finished. Returns the final state (its ``stop`` and ``report``)."""
        import numpy as np

        from harness.store import RunStore
        from ranking.decide import STOP_TEXT, column_scorer, next_step

        store = RunStore(self.exp.output)
        state = self.load_state()
        if state.get("stop") in ("settled", "complete"):
            echo(report_text(state))
            return state
        if state.get("stop"):  # the budget or the waves ran out: look again (a larger budget goes on)
            state["stop"] = None
            state.pop("report", None)
        looked = False
        if not state["waves"]:
            first = self.cells.first_wave(self.settings.first_seeds)
            state["waves"].append({"wave": 1, "runs": [s.run_id() for s in first]})
            write_state(self.exp.output, state)
        while True:
            wave = state["waves"][-1]
            specs = self.specs_of(wave["runs"])
            echo(f"decide: wave {wave['wave']}: {len(specs)} runs "
                 f"({sum(store.is_done(s) for s in specs)} already done)")
            if not run_wave(specs):
                raise WaveFailed(f"wave {wave['wave']}: some runs failed; `vnr run` again retries them and goes on")
            cube, built, _ = collected(self.exp, self.cells, self.scenario, quiet=looked)
            looked = True
            scorer = column_scorer(self.scenario, self.column, built)
            left, hours = self.budget(store)
            cost = None
            if hours is not None:
                mean_all = float(np.mean([h for v in hours.values() for h in v])) if hours else 0.0
                cost = np.array([[float(np.mean(hours.get(t) or [mean_all])) for t in cube.units] for _ in cube.models])
            step = next_step(cube, self.question, scorer, waves_done=len(state["waves"]), budget_left=left,
                             cost=cost, draws=self.settings.draws, seed=0)
            lk = step.look
            wave["look"] = {
                "decision": [[cube.models[i] for i in b] for b in lk.blocks],
                "agree": lk.agree, "needed": 1 - self.question.alpha_per_look, "settled": lk.settled,
                "uncertain": [cube.models[i] for i in lk.uncertain()],
                "runs_done": sum(store.is_done(s) for s in self.exp.specs),
            }
            if step.stop is not None:
                state["stop"] = step.stop
                state["report"] = {
                    "decision": wave["look"]["decision"], "kind": self.question.kind, "k": self.question.k,
                    "column": self.column, "scenario": self.scenario.name, "level": self.question.level,
                    "stop": step.stop, "why": STOP_TEXT[step.stop], "agree": lk.agree,
                    "runs_used": wave["look"]["runs_done"], "runs_full": len(self.exp.specs),
                    "waves": len(state["waves"]),
                    "uncertain": [] if step.stop == "settled" else wave["look"]["uncertain"],
                }
                write_state(self.exp.output, state)
                echo(report_text(state))
                return state
            by_label = {self.exp.label(m): m for m in self.cells.models}
            runs = []
            taken: dict[tuple[str, str], int] = {}
            for i, u in step.wave:
                model, task = by_label[cube.models[i]], cube.units[u]
                todo = [s for s in self.cells.seeds if (model, task, s) in self.cells.by_cell
                        and not store.is_done(self.cells.by_cell[(model, task, s)])]
                k = taken.get((model, task), 0)
                if k < len(todo):
                    runs.append(self.cells.by_cell[(model, task, todo[k])].run_id())
                    taken[(model, task)] = k + 1
            state["waves"].append({"wave": len(state["waves"]) + 1, "runs": runs})
            write_state(self.exp.output, state)


class WaveFailed(UserError):
    """A wave's run failed: the state is kept, and ``vnr run`` again retries it."""


def _decision_text(kind: str, k: int, blocks: Sequence[Sequence[str]]) -> str:
    if kind == "winner":
        return f"winner {blocks[0][0]}"
    if kind == "top":
        return f"top {k}: {', '.join(blocks[0])}"
    return "tiers: " + " > ".join("{" + ", ".join(b) + "}" for b in blocks)


def report_text(state: Mapping[str, Any]) -> str:
    """The final lines: the decision, its level, how it stopped, the runs used against the full grid, and what
    stayed uncertain."""
    r = state["report"]
    lines = [
        f"decision ({r['column']} of {r['scenario']}): {_decision_text(r['kind'], r['k'], r['decision'])}",
        f"  {r['why']}; the draws agree {r['agree']:.1%} (level {r['level']:g}, spent over the declared waves)"
        if r["stop"] == "settled" else f"  not settled at level {r['level']:g}: {r['why']} "
        f"(the draws agree {r['agree']:.1%})",
        f"  runs used: {r['runs_used']} of the full grid's {r['runs_full']} "
        f"({r['runs_used'] / max(r['runs_full'], 1):.0%}) in {r['waves']} wave(s)",
    ]
    if r["uncertain"]:
        lines.append(f"  still uncertain: {', '.join(r['uncertain'])}")
    return "\n".join(lines)


def status_lines(exp: Any) -> list[str]:
    """What ``vnr status`` adds for a decide-first grid: one line per wave, and the decision or what is open."""
    from harness.store import RunStore

    state = read_state(exp.output)
    if state is None:
        return []
    store = RunStore(exp.output)
    by_id = {s.run_id(): s for s in exp.specs}
    d = state.get("declaration", {})
    out = [f"decide: {d.get('decision')} ({d.get('column')} of {d.get('scenario')}) at level {d.get('level')}, "
           f"at most {d.get('waves')} waves"]
    for w in state.get("waves", []):
        specs = [by_id[i] for i in w["runs"] if i in by_id]
        done = sum(store.is_done(s) for s in specs)
        line = f"  wave {w['wave']}: {done}/{len(specs)} runs done"
        lk = w.get("look")
        if lk:
            kind = d.get("decision", "winner")
            line += (f"; look: {_decision_text(kind, int(d.get('top') or 1), lk['decision'])}, draws agree "
                     f"{lk['agree']:.1%} (settles at {lk['needed']:.2%})"
                     + ("" if lk["settled"] or not lk["uncertain"] else f"; uncertain: {', '.join(lk['uncertain'])}"))
        else:
            line += " (running or to run)"
        out.append(line)
    if state.get("stop"):
        out += report_text(state).splitlines()
    return out


# ---------------------------------------------------------------------------- the executors
def run_local(exp: Any, settings: DecideSettings, *, execute_wave: Callable[[list[Any]], list[Any]],
              echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Local waves: ``execute_wave(specs)`` is the local executor on those specs (outcomes)."""
    from harness.grid.local import FAILED

    def run_wave(specs: list[Any]) -> bool:
        outcomes = execute_wave(specs)
        return not any(o.status == FAILED for o in outcomes)

    return Decider(exp, settings).run(run_wave, echo=echo)


def run_slurm(exp: Any, settings: DecideSettings, *, submit: Callable[[list[Any]], str | None],
              wait: Callable[[str | None, list[Any]], None], echo: Callable[[str], None] = print) -> dict[str, Any]:
    """SLURM waves: each wave one array (``submit(todo)``: its array id, None when nothing was to submit), the
    driver waiting for it (``wait``) before it looks; runs already running or queued are not submitted again."""
    from harness.grid.status import grid_status
    from harness.store import RunStore

    def run_wave(specs: list[Any]) -> bool:
        store = RunStore(exp.output)
        pending = [s for s in specs if not store.is_done(s)]
        states = {st.run_id: st.state for st in grid_status(exp, pending)}
        todo = [s for s in pending if states.get(s.run_id()) not in ("running", "queued")]
        array = submit(todo) if todo else None
        wait(array, pending)
        return all(store.is_done(s) for s in specs)

    return Decider(exp, settings).run(run_wave, echo=echo)
