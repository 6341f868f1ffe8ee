"""The worked examples in the docstrings of the ranking-engine modules are tests too."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["ranking.pairwise", "ranking.rules", "ranking.settings", "ranking.prospective", "ranking.cli"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0
