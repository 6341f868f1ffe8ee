"""One declaration, every surface, for a ranking's choices: each declared field of :class:`ranking.plan.RankPlan`
(typed in :mod:`ranking.choices`) is a keyword of ``ranking.rank`` and ``RankPlan.build``, a flag of every command
its :class:`~ranking.choices.On` names (``vnr rank``, ``report``, ``analyze``, ``prospective``) with the declared
help, and a scenario key where it says so; a bad value gets the same one-line refusal from each (only the prefix
naming where differs: the keyword, the flag, the file's key). Fields are read from the declaration, so a field
added there is tested here without an edit (as tests/test_one_declaration.py does for the harness)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import ranking
from harness.cli import build_parser, main
from ranking.floor.errors import UserError
from ranking.floor.flags import flag
from ranking.floor.schema import description
from ranking.plan import CHOICES, RankPlan, check_choices, choice_hints, on
from ranking.rules import worked_example
from ranking.schemas import ColumnModel, ScenarioModel

COMMANDS = ("rank", "report", "analyze", "prospective")
CANDIDATES = ("-5", "nope", "0", "1e400", "1.5", "x" * 2000)  # the first the declaration refuses is the bad value
# an analyze sub-command that takes every choice analyze declares (a rule: --setting; a table: --vote)
ANALYZE = "iia"


def _subparser(command: str):
    parser = build_parser(command)
    sub = parser._subparsers._group_actions[0].choices[command]
    if command == "analyze":
        sub = sub._subparsers._group_actions[0].choices[ANALYZE]
    return sub


def _surfaces(name: str) -> tuple[str, ...]:
    return tuple(s for s in (*COMMANDS, "scenario", "column") if name in on(s))


def _bad_value(name: str):
    for value in CANDIDATES:
        try:
            check_choices({"setting": "weighted", name: value} if name == "group_weights" else {name: value})
        except UserError:
            return value
    return None


def _after(message: str, key: str) -> str:
    assert key in message, (key, message)
    return message.split(f"{key}: ", 1)[1] if f"{key}: " in message else message.split(key, 1)[1]


@pytest.mark.parametrize("name", CHOICES)
def test_every_choice_is_reachable_with_one_validation(name, tmp_path, capsys):
    default = RankPlan.__dataclass_fields__[name].default
    # the API: a keyword of ranking.rank and RankPlan.build, with the declared default
    for function in (ranking.rank, RankPlan.build):
        parameter = inspect.signature(function).parameters[name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default == default
    text = description(choice_hints()[name])
    assert text, f"{name} declares no help"
    # each command it names has its flag, whose help is the declaration's
    for command in (s for s in _surfaces(name) if s in COMMANDS):
        action = _subparser(command)._option_string_actions[flag(RankPlan, name)]
        assert action.help.replace("%%", "%").startswith(text), (command, action.help)
    # a scenario key (top level or a column's) where it says so
    assert ("scenario" in _surfaces(name)) == (name in ScenarioModel.model_fields)
    assert ("column" in _surfaces(name)) == (name in ColumnModel.model_fields)

    bad = _bad_value(name)
    if bad is None:  # free (a seeds.csv path): reachable is the point
        return
    extra = {"setting": "weighted"} if name == "group_weights" else {}
    with pytest.raises(UserError) as api:
        ranking.rank(worked_example(), "borda", **extra, **{name: bad})
    texts = {"api": _after(str(api.value), name)}
    option = flag(RankPlan, name)
    switch = _subparser("rank")._option_string_actions[option].nargs == 0 if "rank" in _surfaces(name) else True
    if "rank" in _surfaces(name) and not switch:
        csv = tmp_path / "t.csv"
        worked_example().to_csv(csv)
        capsys.readouterr()
        argv = ["rank", str(csv), "--setting", "weighted"] if name == "group_weights" else ["rank", str(csv)]
        needs = {"level": "--intervals", "draws": "--intervals", "seed": "--intervals", "max_cells": "--robustness"}
        assert main([*argv, *([needs[name]] if name in needs else []), option, bad]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        texts["cli"] = _after(err, option)
    if "scenario" in _surfaces(name):
        import yaml

        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({name: bad, "columns": [{"name": "b", "rule": "borda"}]}))
        from ranking.scenarios.scenario import load_scenario

        with pytest.raises(UserError) as scenario:
            load_scenario(path)
        texts["scenario"] = _after(str(scenario.value), name)
    assert len(set(texts.values())) == 1, texts


def test_rank_help_is_generated_from_the_declaration():
    """Every declared choice of vnr rank, in the declaration's order, with its declared help and default."""
    rank = _subparser("rank")
    flags = [a.option_strings[0] for a in rank._actions if a.option_strings and a.dest in CHOICES]
    assert [f for f in flags if f != "--keep-incomplete"] == [flag(RankPlan, n) for n in on("rank")]
    draws = rank._option_string_actions["--draws"]
    assert "20 to 100000" in draws.help
    assert "(default: 3)" in rank._option_string_actions["--max-cells"].help


def test_the_declared_fields_are_the_plan_s():
    assert CHOICES == tuple(f.name for f in dataclasses.fields(RankPlan) if f.name not in ("rules", "explicit", "params"))


# ---------------------------------------------------------------------------- bounds: refused before any allocation
@pytest.mark.parametrize(("name", "value", "words"), [
    ("draws", 10**18, "1000000000000000000 is above 100000"),
    ("draws", 10**9, "1000000000 is above 100000"),
    ("draws", 5, "5 is below 20"),
    ("seed", -1, "-1 is below 0"),
    ("seed", 1.5, "1.5 is not a whole number"),
    ("max_cells", 0, "0 is below 1"),
    ("max_cells", -3, "-3 is below 1"),
    ("max_cells", 2.5, "2.5 is not a whole number"),
])
def test_counts_are_bounded_alike_from_the_api_the_cli_and_a_scenario(name, value, words, tmp_path, capsys):
    switch = {"draws": "--intervals", "seed": "--intervals", "max_cells": "--robustness"}[name]
    with pytest.raises(UserError, match=f"^{name}: {words}"):
        ranking.rank(worked_example(), "borda", **{switch[2:]: True, name: value})
    csv = tmp_path / "t.csv"
    worked_example().to_csv(csv)
    option = flag(RankPlan, name)
    capsys.readouterr()
    assert main(["rank", str(csv), switch, option, str(value)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"vnr rank: error: {option}: {words}")
    # a scenario run (vnr rank --scenario / vnr report): the same flags, the same words, before the table is read
    scenario = tmp_path / "s.yaml"
    scenario.write_text("columns:\n  - {name: b, rule: borda}\n")
    assert main(["rank", "--scenario", str(scenario), "--results", str(csv), switch, option, str(value)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"vnr rank: error: {option}: {words}")
    assert main(["report", "--scenario", str(scenario), "--results", str(csv), "--out", str(tmp_path / "out"),
                 switch, option, str(value)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"vnr report: error: {option}: {words}") and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_gamma_has_one_spelling():
    """``og_gamma`` is the optimality gap's gamma; ``gamma=`` (which once gave every model 0.0 where ``og_gamma``
    of the same value was refused) is refused naming the keyword to write."""
    with pytest.raises(UserError, match=r"^og_gamma: -1 must be above 0$"):
        ranking.rank(worked_example(), "optimality_gap", og_gamma=-1)
    with pytest.raises(UserError, match=r"^gamma: write og_gamma=-1 "):
        ranking.rank(worked_example(), "optimality_gap", gamma=-1)
    with pytest.raises(UserError, match=r"^gamma: write og_gamma=0.9 "):
        ranking.rank(worked_example(), "optimality_gap", gamma=0.9)
    assert ranking.rank(worked_example(), "optimality_gap", og_gamma=0.9).settings["og_gamma"] == 0.9
    # the rule function called directly holds the same bound (it ranked with gamma -1 before)
    from ranking import rules

    for bad in (-1, 0, float("inf")):
        with pytest.raises(UserError, match=r"must be a finite number > 0"):
            rules.optimality_gap(worked_example(), gamma=bad)


def test_a_scenario_column_s_gamma_is_the_og_gamma():
    """A scenario column writes ``params: {gamma: ...}`` (its key stays): it is the plan's og_gamma."""
    from ranking.scenarios.scenario import Scenario

    sc = Scenario.from_mapping({"columns": [{"name": "og", "rule": "optimality_gap", "params": {"gamma": 0.9}}]})
    plan = sc.plan("og")
    assert plan.og_gamma == 0.9 and plan.rule_params("optimality_gap")["gamma"] == 0.9
    with pytest.raises(UserError, match="og_gamma: -1 must be above 0"):
        Scenario.from_mapping({"columns": [{"name": "og", "rule": "optimality_gap", "params": {"gamma": -1}}]}
                              ).plan("og")
