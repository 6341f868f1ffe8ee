"""Every worked example in a docstring is a test: one case per module of ranking/ and harness/ that has any.

Modules are found by walking both packages' source files for ``>>>``; each is
imported and its examples are collected with :class:`doctest.DocTestFinder`.
A module that needs the harness extra (torch, transformers, ...) is skipped
only where that package is not installed.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def modules_with_examples() -> list[str]:
    out = []
    for package in ("ranking", "harness"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


MODULES = modules_with_examples()


def test_the_ranking_engine_is_covered():
    assert {"ranking.rules", "ranking.settings", "ranking.pairwise", "ranking.loading", "ranking.api"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top in ("ranking", "harness") or importlib.util.find_spec(top) is not None:
            raise
        pytest.skip(f"{name} needs {top}, which is not installed (the harness extra)")
    tests = [t for t in doctest.DocTestFinder().find(module, name) if t.examples]
    if not tests:
        pytest.skip(f"{name}: its '>>>' lines are not in docstrings")
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
