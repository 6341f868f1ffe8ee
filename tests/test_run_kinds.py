"""Run kinds are records (harness.kinds): one table, asked by everything that handles runs.

A third kind is one module with its record and one line in the table: the toy kind below (its spec, options,
run function, collector and grid section, all in this file) goes through the grid config (its section's
schema, expansion, overrides and refusals), ``vnr run`` (``--list``, ``--dry-run``, a real local run),
``vnr status``, ``--only``'s labels, prefetch, the calibration's packing and ``collect`` without a change to
any of them.
"""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import pytest

from harness import kinds as kinds_module
from harness.grid.schema import listed
from harness.grid.sections import Axis, GridSection
from harness.kinds import KINDS, RunKind, get_kind, kind_of, kinds, spec_kind
from harness.specs import BiasSpec, FinetuneSpec
from harness.store import RunStore, run_id
from ranking.floor.errors import UserError
from ranking.floor.schema import Count, Help, Name, check_fields

ROOT = Path(__file__).resolve().parents[1]


def test_every_kind_is_one_record_named_as_its_spec_says():
    assert list(KINDS) == ["finetune", "bias"]
    for kind in kinds():
        assert isinstance(kind, RunKind)
        assert kind.spec.kind == kind.options.kind == kind.name
        assert callable(kind.run_function()) and callable(kind.collector())
        assert kind.target in {f.name for f in fields(kind.spec)}
        assert kind.seed is None or kind.seed in {f.name for f in fields(kind.spec)}
    assert get_kind("finetune").calibrated and not get_kind("bias").calibrated
    with pytest.raises(UserError, match=r"^unknown run kind 'nope' \(kinds: finetune, bias\)$"):
        get_kind("nope")


def test_kind_of_a_spec_and_of_anything_else():
    ft, bias = FinetuneSpec("tiny:bert", "rte", 1), BiasSpec("tiny:bert", "crows_pairs")
    assert kind_of(ft).target_of(ft) == "rte" and kind_of(ft).seed_of(ft) == 1
    assert kind_of(bias).target_of(bias) == "crows_pairs" and kind_of(bias).seed_of(bias) == ""
    assert spec_kind(ft) is get_kind("finetune") and spec_kind("tiny:bert") is None
    with pytest.raises(TypeError, match="not a run spec"):
        kind_of("tiny:bert")


def test_no_code_dispatches_on_the_spec_class():
    pattern = re.compile(r"isinstance\([a-z_]*, *\(?(FinetuneSpec|BiasSpec)")
    sites = [f"{p.relative_to(ROOT)}:{n}" for folder in ("harness", "scripts") for p in (ROOT / folder).rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert sites == []


# ---------------------------------------------------------------------------- a third kind
@dataclass(frozen=True)
class ToySpec:
    """A run kind the harness does not have: count a model's name's letters for an item."""

    model: Annotated[Name, Help("any name")]
    item: Annotated[Name, Help("what to count for")]
    repeat: Annotated[Count, Help("how often")] = 1

    kind = "toy"

    def __post_init__(self) -> None:
        check_fields(self)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "item": self.item, "repeat": self.repeat}

    def run_id(self) -> str:
        return run_id(self.identity())

    def metric_keys(self) -> list[str]:
        return ["letters"]


@dataclass(frozen=True)
class ToyOptions:
    loud: Annotated[bool | None, Help("shout")] = None

    kind = "toy"

    def __post_init__(self) -> None:
        check_fields(self)

    def given(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def run_toy(spec: ToySpec, output: Path, *, data_root: Any = None, progress: bool = True, **options: Any) -> dict:
    with RunStore(output).run(spec) as run:
        return run.finish({"metrics": {"letters": float(len(spec.model) * spec.repeat)}})


def collect_toy(table: Any, specs: list[ToySpec]) -> None:
    for spec in specs:
        rec = table.usable.get(spec.run_id())
        if rec is not None:
            table.rows[table.exp.label(spec.model)][f"{spec.item}_letters"] = rec["metrics"]["letters"]
            table.meta[f"{spec.item}_letters"] = {"direction": "higher", "weight": 1.0, "group": "performance",
                                                  "unit": "letters", "source": "the toy kind"}
            if f"{spec.item}_letters" not in table.columns:
                table.columns.append(f"{spec.item}_letters")


TOY_GRID = GridSection(
    title="Toy", doc="Toy runs: models × items.", runs="toy", models="models whose names to count",
    axes=(Axis("items", "item", listed(Name), "what to count for"),),
)

TOY = RunKind(name="toy", spec=ToySpec, options=ToyOptions, run="toy_kind:run_toy", target="item",
              collect="toy_kind:collect_toy", summary="toy_kind:summary", prefetch=None, grid="toy_kind:GRID")


@pytest.fixture
def toy(monkeypatch):
    """The toy kind's package (a module) and its one line in the table."""
    module = types.ModuleType("toy_kind")
    module.KIND, module.run_toy, module.collect_toy, module.GRID = TOY, run_toy, collect_toy, TOY_GRID
    module.summary = lambda record: f"{record['model']}: {record['metrics']['letters']} letters"
    monkeypatch.setitem(sys.modules, "toy_kind", module)
    monkeypatch.setitem(KINDS, "toy", ("toy_kind:KIND", "count letters"))
    monkeypatch.setattr(kinds_module, "_LOADED", {})
    return TOY


def test_a_third_kind_runs_through_the_grid_scaffolding(toy, tmp_path):
    from harness.grid.calibrate import Packing
    from harness.grid.config import Experiment, spec_labels
    from harness.grid.local import execute
    from harness.grid.status import grid_status
    from harness.prefetch import needs

    spec = ToySpec("tiny:bert", "apples", repeat=2)
    assert kind_of(spec) is toy and toy.fields() == ("model", "item", "repeat", "loud")
    assert spec_labels(spec)["target"] == "apples"
    assert needs([spec]).targets == {}  # a kind without data to fetch
    assert Packing(1).options(spec) == {}  # not a calibrated kind

    outcomes = execute([spec, spec], tmp_path, progress=False, echo=False)  # the toy's own run function
    assert [o.status for o in outcomes] == ["ran", "skipped"]
    assert toy.summary_line(RunStore(tmp_path).get(spec.run_id())) == "tiny:bert: 18.0 letters"

    exp = Experiment(name="toy", source="toy.yaml", output=tmp_path, specs=(spec,), models=("tiny:bert",))
    (row,) = [s.row() for s in grid_status(exp)]
    assert (row["state"], row["kind"], row["target"], row["seed"]) == ("done", "toy", "apples", "")

    from harness.grid.collect import collect

    result = collect(exp)
    assert result.criteria == ["apples_letters"] and result.models == ["tiny:bert"]


def test_a_third_kind_options_are_checked_by_its_declaration(toy):
    spec, options = toy.prepare(None, {"model": "m", "item": "pears", "loud": True}, where="toy")
    assert spec.item == "pears" and options.given() == {"loud": True}
    with pytest.raises(UserError, match=r"^toy: repeat: 0 is below 1$"):
        toy.prepare(None, {"model": "m", "item": "pears", "repeat": 0}, where="toy")
    with pytest.raises(UserError, match=r"^toy: unknown key 'colour'"):
        toy.prepare(None, {"model": "m", "item": "pears", "colour": "red"}, where="toy")


# ---------------------------------------------------------------------------- the third kind in a grid config
TOY_CONFIG = {"name": "toys", "toy": {
    "models": ["tiny:bert", "tiny:gpt2"], "items": ["apples", "pears"], "options": {"repeat": 2},
    "overrides": [{"items": ["pears"], "models": ["*gpt2"], "set": {"repeat": 3}}], "run_options": {"loud": True}}}


def test_a_third_kind_has_a_grid_section(toy, tmp_path):
    from harness.grid.config import config_json_schema, parse_experiment

    exp = parse_experiment({**TOY_CONFIG, "output": str(tmp_path)}, where="toys.yaml")
    assert [(s.model, s.item, s.repeat) for s in exp.specs] == [
        ("tiny:bert", "apples", 2), ("tiny:bert", "pears", 2), ("tiny:gpt2", "apples", 2), ("tiny:gpt2", "pears", 3)]
    assert exp.axis("toy", "items") == ("apples", "pears") and exp.run_options == {"toy": {"loud": True}}
    assert exp.models == ("tiny:bert", "tiny:gpt2") and exp.options_for(exp.specs[0]) == {"loud": True}
    # beside the other kinds' sections, in the table's order
    both = parse_experiment({**TOY_CONFIG, "output": str(tmp_path), "bias": {"datasets": ["winobias"],
                            "models": ["tiny:bert"]}, "finetune": {"models": ["tiny:bert"], "tasks": ["rte"]}})
    assert [s.kind for s in both.specs] == ["finetune", "bias", "toy", "toy", "toy", "toy"]
    schema = config_json_schema()
    assert list(schema["properties"])[5:] == ["finetune", "bias", "toy", "slurm", "local", "decide"]
    toy_schema = schema["$defs"]["Toy"]
    assert set(toy_schema["properties"]) == {"models", "items", "options", "overrides", "run_options"}
    assert set(schema["$defs"]["ToyOverride"]["properties"]) == {"models", "items", "set"}
    assert set(schema["$defs"]["ToySpecOptions"]["properties"]) == {"repeat"}  # model and item name the run


@pytest.mark.parametrize(("section", "message"), [
    ({"items": ["apples"]}, r"^toys\.yaml: toy\.models is required"),
    ({"models": ["tiny:bert"], "items": ["apples"], "options": {"repeat": 0}}, r"^toys\.yaml: toy\.options\.repeat: 0 is below 1$"),
    ({"models": ["tiny:bert"], "items": ["apples"], "options": {"item": "x"}}, r"^toys\.yaml: toy\.options: unknown key 'item'"),
    ({"models": ["tiny:bert"], "items": ["apples", "apples"]}, r"^toys\.yaml: toy\.items: 'apples' is listed twice"),
    ({"models": ["tiny:bert"], "items": ["apples"], "run_options": {"loud": "maybe"}},
     r"^toys\.yaml: toy\.run_options\.loud: 'maybe' is not true or false"),
    ({"models": ["tiny:bert"], "items": ["apples"], "overrides": [{"items": ["plums"], "set": {"repeat": 2}}]},
     r"^toys\.yaml: toy\.overrides\[0\]\.items: 'plums' matches no item of the toy runs \(apples\): fix or remove it$"),
])
def test_a_third_kind_section_is_checked_by_its_declaration(toy, section, message):
    from harness.grid.config import parse_experiment

    with pytest.raises(UserError, match=message):
        parse_experiment({"name": "toys", "toy": section}, where="toys.yaml")


def test_a_third_kind_through_vnr_run_and_status(toy, tmp_path, capsys):
    import yaml

    from harness.cli import main

    config = tmp_path / "toys.yaml"
    config.write_text(yaml.safe_dump({**TOY_CONFIG, "output": str(tmp_path / "out")}))
    assert main(["run", str(config), "--list"]) == 0
    listed_runs = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[2] for line in listed_runs] == ["missing"] * 4
    assert main(["run", str(config), "--dry-run"]) == 0
    assert "kinds: toy 4" in capsys.readouterr().out
    assert main(["run", str(config), "--only", "pears", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["status", str(config), "--json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["kind"], r["target"], r["state"]) for r in rows] == [
        ("toy", "apples", "missing"), ("toy", "pears", "done"), ("toy", "apples", "missing"), ("toy", "pears", "done")]
    assert main(["run", str(config), "--only", "toy", "--count"]) == 0
    assert capsys.readouterr().out.strip() == "4"


def test_the_config_without_the_third_kind_has_no_section_for_it(tmp_path):
    from harness.grid.config import config_json_schema, parse_experiment

    assert "toy" not in config_json_schema()["properties"]
    with pytest.raises(UserError, match=r"^c: unknown key 'toy' — remove it or fix its spelling \(allowed: .*finetune, bias, slurm, local, decide\)"):
        parse_experiment({"name": "toys", "toy": {"models": ["tiny:bert"], "items": ["apples"]}}, where="c")


def test_the_grid_and_prefetch_name_no_kind():
    """The grid (config, sections, executors, status, collect, CLI) and prefetch ask the table: no kind's name,
    spec class or package is written in their code. The calibration is the exception by design: it measures
    fine-tuning training (the kinds marked ``calibrated``), so it calls the fine-tuning code itself."""
    import ast

    allowed = {"harness/grid/calibrate.py"}
    files = [*(ROOT / "harness" / "grid").glob("*.py"), ROOT / "harness" / "prefetch.py"]
    found = []
    for path in sorted(files):
        rel = str(path.relative_to(ROOT))
        if rel in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in KINDS:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Name) and node.id in ("FinetuneSpec", "BiasSpec"):
                found.append(f"{rel}:{node.lineno}: {node.id}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                found += [f"{rel}:{node.lineno}: import {m}" for m in modules
                          if any(m == f"harness.{k}" or m.startswith(f"harness.{k}.") for k in KINDS)]
    assert found == []
