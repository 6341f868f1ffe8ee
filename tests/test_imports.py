"""Import structure: ranking never imports torch or ``harness``; the floor (:mod:`ranking.floor`) imports nothing
of the project; no import cycles; a fast, lazy ``vnr``."""

from __future__ import annotations

import argparse
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)


def test_ranking_does_not_import_torch_or_harness():
    code = (
        "import sys, ranking, ranking.rules, ranking.settings, ranking.prospective, ranking.leaderboard\n"
        "import ranking.loading, ranking.api, ranking.cli, ranking.scenarios.cli, ranking.analysis.cli\n"
        "import ranking.importers.cli, ranking.importers.lm_eval, ranking.importers.open_llm, ranking.importers.helm\n"
        "import ranking.importers.mteb, ranking.importers.codecarbon\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'harness'))\n"
        "print(','.join(bad))\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_the_floor_imports_nothing_of_the_project_and_nothing_heavy():
    modules = sorted(p.stem for p in (ROOT / "ranking" / "floor").glob("*.py") if p.stem != "__init__")
    code = (
        "import sys\n"
        + "".join(f"import ranking.floor.{m}\n" for m in modules)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('harness', 'torch', 'transformers', 'numpy',\n"
        "             'pandas') or (m.startswith('ranking.') and not m.startswith('ranking.floor')))\n"
        "print(','.join(bad))\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert modules and out.stdout.strip() == ""


@pytest.mark.parametrize("command", [None, "rank", "prospective", "analyze", "report", "criteria", "schema", "import"])
def test_cli_starts_without_numpy_pandas_or_torch(command):
    # what `vnr --help` / `vnr <ranking command> --help` import: the dispatcher, the package, one cli module
    code = (
        "import sys\n"
        "import harness.cli, ranking\n"
        f"harness.cli.build_parser({command!r})\n"
        "heavy = ('numpy', 'pandas', 'scipy', 'torch', 'transformers', 'matplotlib', 'yaml', 'pydantic')\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy})))\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_full_parser_builds_without_torch():
    code = (
        "import sys\n"
        "from harness.cli import build_parser\n"
        "build_parser(every=True)\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'matplotlib'))))\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_dispatcher_table_matches_what_each_module_registers():
    for module_name in dict.fromkeys(m for m, _ in COMMANDS.values()):
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module_name).register(sub)
        listed = {name for name, (m, _) in COMMANDS.items() if m == module_name}
        assert set(sub.choices) == listed, module_name


def test_rule_help_lists_the_registered_rules():
    from ranking.cli_types import registered_rule_names
    from ranking.rules import rule_names

    assert registered_rule_names() == rule_names()


BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'transformers', 'codecarbon'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from harness.cli import main
"""


def test_harness_command_in_a_ranking_only_install_names_the_extra(tmp_path):
    code = BLOCK + (
        f"code = main(['finetune', '--model', 'tiny:bert', '--task', 'rte', '--seed', '1', '--output', {str(tmp_path / 'out')!r}])\n"
        "sys.exit(code)\n"
    )
    out = python(code)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "needs the harness extra" in out.stderr and "pip install 'vnr-harness[harness]'" in out.stderr
    assert not (tmp_path / "out").exists()  # nothing written


def test_ranking_commands_work_in_a_ranking_only_install(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("model,acc,f1\nA,0.9,0.8\nB,0.8,0.9\nC,0.7,0.7\n")
    out = python(BLOCK + f"sys.exit(main(['rank', {str(csv)!r}, '--rule', 'borda', '--format', 'csv']))\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == ["A,3.0,1", "B,3.0,1", "C,0.0,3"]  # Borda 2+1, 1+2, 0


# ---------------------------------------------------------------------- the package import graph
def module_files() -> dict[str, Path]:
    out = {}
    for package in ("ranking", "harness"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module → the project modules it imports, at module level or inside functions (lazy imports count)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:  # `from pkg import submodule` depends on the submodule
                    deps.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else resolve(base))
        graph[name] = deps - {None, name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_circle():
    # the two circles this layout used to have: result <-> rules (the registry) and table <-> leaderboard
    graph = {"ranking.result": {"ranking.rules"}, "ranking.rules": {"ranking.result", "ranking.table"},
             "ranking.table": {"ranking.leaderboard"}, "ranking.leaderboard": {"ranking.table"}}
    assert sorted(cycles(graph)) == [["ranking.leaderboard", "ranking.table"], ["ranking.result", "ranking.rules"]]


def test_no_import_cycles():
    modules = module_files()
    graph = import_graph(modules)
    assert graph["ranking.rules"] >= {"ranking.result", "ranking.table"}  # the walk sees imports
    assert "ranking.loading" in graph["ranking"]  # ... including the lazy ones inside functions
    assert cycles(graph) == []


def test_no_arrow_runs_back_up_from_ranking_to_the_harness():
    """The harness stands on ranking (its floor, presets, tables), never the reverse: no module of ``ranking``
    names one of ``harness``, at module level or inside a function."""
    graph = import_graph(module_files())
    up = sorted(f"{m} -> {d}" for m, deps in graph.items() if m.split(".")[0] == "ranking"
                for d in deps if d.split(".")[0] == "harness")
    assert up == []


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_option_of_every_command_has_help(command):
    from harness.cli import build_parser

    def undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
        out = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out += undocumented(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                out.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return out

    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    assert undocumented(sub, command) == []


def test_ranking_a_csv_needs_neither_pandas_nor_scipy(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("model,acc,f1\nA,0.9,0.8\nB,0.8,0.9\nC,0.7,0.7\n")
    code = (
        "import sys, io, contextlib\n"
        "from harness.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    assert main(['rank', {str(csv)!r}, '--rule', 'all']) == 0\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'scipy', 'torch'})))\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_a_reader_that_leaves_early_is_no_error(tmp_path, monkeypatch):
    """`vnr rank ... | head`: once the reader has closed the pipe, the command ends quietly with 141."""
    import os

    from harness.cli import main

    csv = tmp_path / "t.csv"
    csv.write_text("model,acc\nA,1\nB,2\n")
    read, write = os.pipe()
    os.close(read)  # the reader has gone
    with os.fdopen(write, "w") as gone:
        monkeypatch.setattr(sys, "stdout", gone)
        assert main(["rank", str(csv), "--rule", "borda"]) == 141
