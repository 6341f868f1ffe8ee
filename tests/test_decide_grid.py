"""Decide first, the grid (harness/grid/decide.py): one declaration (config, vnr run flags, API), waves through the
local executor, a budget stop and a kill mid-wave resumed without redoing a finished run, vnr status, and the
SLURM dry run of the first wave."""

from __future__ import annotations

from dataclasses import fields

import pytest
import yaml

from harness import flags
from harness.cli import build_parser, main
from harness.grid.config import parse_experiment
from harness.grid.decide import read_state, run_local, settings_of, status_lines
from harness.grid.local import RAN, execute
from harness.grid.settings import DecideSettings
from harness.store import RunStore
from ranking.floor.errors import UserError
from ranking.floor.schema import validate

SCENARIO = {"name": "perf", "groups": {"performance": {}},
            "columns": [{"name": "am", "rule": "arithmetic_mean", "group": "performance"}]}
# accuracy per model and seed: bert and roberta close (a few waves), gpt2 far behind
ACCURACY = {"tiny:bert": [0.61, 0.55, 0.60, 0.57], "tiny:roberta": [0.56, 0.60, 0.55, 0.58],
            "tiny:gpt2": [0.30, 0.31, 0.29, 0.30]}


def _grid(tmp_path, **decide):
    scenario = tmp_path / "perf.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    doc = {"name": "d", "output": str(tmp_path / "out"),
           "finetune": {"models": list(ACCURACY), "tasks": ["rte"], "seeds": [0, 1, 2, 3]},
           "decide": {"scenario": str(scenario), "draws": 400, "first_seeds": 2, **decide}}
    config = tmp_path / "d.yaml"
    config.write_text(yaml.safe_dump(doc))
    return config, parse_experiment(doc)


def record_runner(spec, output, *, calls=None, **_):
    """A run function with the real contract (stores an ok record through the store's lifecycle)."""
    if calls is not None:
        calls.append(spec.run_id())
    with RunStore(output).run(spec) as run:
        return run.finish({"metrics": {"accuracy": ACCURACY[spec.model][spec.seed]},
                           "efficiency": {"gpu_hours": 0.5, "energy_kwh": 0.1, "duration_h": 0.5, "co2_kg": 0.01}})


def _waves(exp, settings, calls, stop_after=None):
    ran = []

    def wave(specs):
        out = execute(specs, exp.output, runner=lambda s, o, **kw: record_runner(s, o, calls=calls, **kw),
                      progress=False, echo=False)
        ran.extend(o for o in out if o.status == RAN)
        if stop_after is not None and len(ran) >= stop_after:
            raise KeyboardInterrupt  # the driver killed between two waves' runs
        return out

    return run_local(exp, settings, execute_wave=wave, echo=lambda _: None)


def _mtimes(exp):
    store = RunStore(exp.output)
    return {s.run_id(): store.result_path(s.run_id()).stat().st_mtime_ns for s in exp.specs if store.is_done(s)}


def test_waves_stop_on_budget_and_resume_without_redoing_a_run(tmp_path):
    _, exp = _grid(tmp_path)
    settings = settings_of(exp, {"budget_runs": 6})
    calls: list[str] = []
    state = _waves(exp, settings, calls)
    assert state["stop"] == "budget" and len(calls) == 6  # wave 1: two seeds of every cell
    assert state["waves"][0]["look"]["uncertain"] == ["tiny:bert", "tiny:roberta"]
    before = _mtimes(exp)
    assert any("budget is spent" in line for line in status_lines(exp))
    state = _waves(exp, settings_of(exp, {}), calls)
    assert state["stop"] in ("settled", "complete")
    assert len(calls) == len(set(calls))  # no run twice
    after = _mtimes(exp)
    assert {k: after[k] for k in before} == before  # the finished runs untouched
    report = state["report"]
    assert report["decision"][0] == ["tiny:bert"] and report["runs_used"] == len(after) < len(exp.specs) + 1
    assert not any(r.startswith("finetune-tiny_gpt2") and "-s2-" in r for r in calls)  # gpt2 never needed more


def test_a_kill_mid_wave_resumes_without_redoing_a_finished_run(tmp_path):
    _, exp = _grid(tmp_path)
    calls: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _waves(exp, settings_of(exp, {}), calls, stop_after=7)  # killed after wave 2's first run
    assert len(read_state(exp.output)["waves"]) == 2
    before = _mtimes(exp)
    state = _waves(exp, settings_of(exp, {}), calls)
    assert state["stop"] in ("settled", "complete")
    assert len(calls) == len(set(calls))
    assert {k: _mtimes(exp)[k] for k in before} == before


def test_cli_dry_run_shows_the_first_wave_and_the_plan(tmp_path, capsys):
    config, _ = _grid(tmp_path)
    assert main(["run", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "wave 1: 6 to run, 0 done" in out and "at most 6 waves" in out
    assert main(["run", str(config), "--dry-run", "--executor", "slurm", "--decision", "top", "--top", "2",
                 "--runs-per-gpu", "1"]) == 0
    out = capsys.readouterr().out
    assert "the top 2" in out and "one array of 6 tasks" in out and "#SBATCH --array=0-5%6" in out
    assert not (tmp_path / "out" / "decide").exists()


def test_status_shows_the_waves_and_the_decision(tmp_path, capsys):
    config, exp = _grid(tmp_path)
    _waves(exp, settings_of(exp, {}), [])
    assert main(["status", str(config), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "wave 1: 6/6 runs done; look: winner" in out and "decision (am of perf): winner tiny:bert" in out
    assert "runs used:" in out


# ---------------------------------------------------------------------------- one declaration
CANDIDATES = ("-5", "nope", "0", "1e400", "x" * 2000, "a\nb")


def _bad(name):
    for value in CANDIDATES:
        try:
            validate(DecideSettings, {name: value})
        except UserError:
            return value
    return None


@pytest.mark.parametrize("name", [f.name for f in fields(DecideSettings)])
def test_every_decide_field_is_reachable_with_one_validation(name, tmp_path, capsys):
    """Each field: a flag of vnr run, a key of the config's decide:, an entry of run_grid's decide=; a bad value
    refused by all three in the same words (one line, exit 2, nothing written)."""
    import harness
    from harness.grid.schema import DecideSection

    flag = flags.flag(DecideSettings, name)
    run = build_parser("run")._subparsers._group_actions[0].choices["run"]
    assert flag in run._option_string_actions, flag
    assert name in DecideSection.model_fields
    bad = _bad(name)
    if bad is None:
        return  # free text (a path, a column name): checked where it is read
    config, _ = _grid(tmp_path)
    doc = yaml.safe_load(config.read_text())
    with pytest.raises(UserError) as api:
        harness.run_grid(config, decide={name: bad}, check=False)
    with pytest.raises(UserError) as conf:
        parse_experiment({**doc, "decide": {**doc["decide"], name: bad}})
    capsys.readouterr()
    assert main(["run", str(config), "--dry-run", flag, bad]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err

    def after(text, key):
        return text.split(f"{key}: ", 1)[1]

    assert after(str(api.value), name) == after(str(conf.value), name) == after(err, flag)
    assert not (tmp_path / "out").exists()


def test_a_bad_scenario_or_column_is_one_line(tmp_path, capsys):
    config, _ = _grid(tmp_path)
    assert main(["run", str(config), "--dry-run", "--top", "2"]) == 2
    assert capsys.readouterr().err.strip().endswith("add --decision top, or leave --top out")
    assert main(["run", str(config), "--dry-run", "--column", "nope"]) == 2
    assert "unknown column 'nope'" in capsys.readouterr().err
    assert main(["run", str(config), "--dry-run", "--decide", str(tmp_path / "missing.yaml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
