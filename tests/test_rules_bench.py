"""The ranking benchmark runs (small sizes) and its sanity check passes: ours agrees with the straightforward way."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_ranking.py"


def test_bench_quick(capsys):
    spec = importlib.util.spec_from_file_location("bench_ranking", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "all rules" in out and "agree on every rule" in out
