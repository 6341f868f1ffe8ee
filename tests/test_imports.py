"""Ranking cached results must work on a laptop: ``ranking`` never imports torch or ``harness``."""

from __future__ import annotations

import subprocess
import sys


def test_ranking_does_not_import_torch_or_harness():
    code = (
        "import sys, ranking, ranking.rules, ranking.settings, ranking.prospective, ranking.leaderboard\n"
        "import importlib\n"
        "for name in ('ranking.cli', 'ranking.scenarios', 'ranking.analysis'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        if exc.name != name: raise\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'harness'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_parser_builds_without_torch():
    code = (
        "import sys\n"
        "from harness.cli import build_parser\n"
        "build_parser()\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'matplotlib'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
